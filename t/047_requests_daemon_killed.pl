# t/047_requests_daemon_killed.pl: kill -9 of the daemon while members wait
# for requests, a member works on one and a requester waits for its
# answer.  The restarted daemon makes the segment anew; every one of them
# must learn it quickly (TRAFFICDB_STALE, "the server stopped"), none may
# hang; and requests work again once they subscribe again.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run qw(start finish);
use Time::HiRes qw(time);
use lib 't';
use TdbTest;

my $tdbsub = $ENV{TDBSUB} // die 'TDBSUB must name tools/tdbsub';
my $node = tdb_node('reqdaemonkill', 'trafficdb.publish_interval' => "'200ms'", 'restart_after_crash' => 'on');
tdb_grid_map($node);
my $shm = '/trafficdb.' . $node->port;

sub proc { return tdb_tdbsub($node, @_); }
sub daemon_pid
{
	$node->poll_query_until('postgres', 'SELECT daemon_pid IS NOT NULL FROM trafficdb.status');
	return $node->safe_psql('postgres', 'SELECT daemon_pid FROM trafficdb.status');
}

my $busy = proc('--serve', '--group', 'k', '--label', 'busy', '--work-ms', '60000', '--timeout-ms', '60000');
my $req = proc('--request', 'k', '--count', '1', '--timeout-ms', '60000');
for (1 .. 500) { $busy->{h}->pump_nb; last if ${ $busy->{out} } =~ /^took /m; select(undef, undef, undef, 0.02); }
like(${ $busy->{out} }, qr/^took \d+ req 1$/m, 'the busy member took the request');
my $idle = proc('--serve', '--group', 'k', '--label', 'idle', '--timeout-ms', '60000');
select(undef, undef, undef, 0.5);
my $t0 = time;
kill 'KILL', daemon_pid();
# the postmaster restarts everything; the new daemon replaces the segment
my %done;
while (time - $t0 < 60 && keys(%done) < 2)
{
	for my $p ([ 'requester', $req ], [ 'idle member', $idle ])
	{
		next if $done{ $p->[0] };
		$p->[1]{h}->pump_nb if $p->[1]{h}->pumpable;
		$done{ $p->[0] } = time - $t0 unless $p->[1]{h}->pumpable;
	}
	select(undef, undef, undef, 0.02);
}
for my $who ('requester', 'idle member')
{
	ok(defined $done{$who}, "the $who ended after the daemon's kill -9 (" . ($done{$who} // 'never') . ' s)');
}
# (never wait for one that hangs)
for my $p ($req, $idle) { $p->{h}->pumpable ? $p->{h}->kill_kill : eval { finish($p->{h}) }; }
like(${ $req->{err} }, qr/server stopped/, 'the requester was told the server stopped');
like(${ $idle->{err} }, qr/server stopped/, 'the idle member was told the server stopped');
$busy->{h}->kill_kill;
# subscribe again: requests work
$node->poll_query_until('postgres', 'SELECT daemon_pid IS NOT NULL FROM trafficdb.status');
my $m = proc('--serve', '--group', 'k2', '--label', 'again', '--timeout-ms', '30000');
select(undef, undef, undef, 0.5);
my ($o, $e) = ('', '');
IPC::Run::run([ $tdbsub, $shm, '--request', 'k2', '--count', '1', '--timeout-ms', '10000' ], '>', \$o, '2>', \$e);
like($o, qr/^answer 1 again req 1 \d+$/m, 'after the restart, a new member answers a new requester') or diag($e);
$m->{h}->kill_kill;
done_testing();
