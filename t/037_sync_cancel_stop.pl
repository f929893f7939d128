# t/037_sync_cancel_stop.pl: a primary whose synchronous standby is gone
# stops on request even after its daemon's standby wait was cancelled once.
# pg_cancel_backend() of the daemon (an operator cancelling every SyncRep
# waiter) ends the commit's wait; the daemon then waits again for the
# standby before publishing (commit_confirmed), but that second wait did not
# listen to stop requests (daemon_sigterm cancels only a wait inside
# commit_tx): `pg_ctl stop -m fast` never finished.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use lib 't';
use TdbTest;

my ($primary, $standby) = tdb_sync_pair();

$standby->stop('immediate');
$primary->safe_psql('postgres', q{SET synchronous_commit = local; INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (7, 42)});
my $waiting = q{SELECT pid, state, query FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND backend_type = 'trafficdb daemon'};
ok($primary->poll_query_until('postgres', "SELECT count(*) = 1 FROM ($waiting) w"), 'the daemon\'s commit waits for the synchronous standby');
# cancel the daemon's waits inside its commits (state active) until it waits
# after the commit of a generation, before publishing it (state idle)
my ($cancels, $after_commit) = (0, 0);
for (1 .. 10)
{
	ok($primary->poll_query_until('postgres', "SELECT count(*) = 1 FROM ($waiting) w"), 'the daemon waits for the standby') or last;
	my ($pid, $state, $query) = split /\|/, $primary->safe_psql('postgres', $waiting);
	note("the daemon waits for the standby in state $state ($query)");
	if ($state eq 'idle')
	{
		$after_commit = 1;
		last;
	}
	my $off = -s $primary->logfile;
	$primary->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
	ok(wait_for_log($primary, qr/canceling wait for synchronous replication/, $off), 'a cancel ended the commit\'s wait');
	$cancels++;
}
ok($cancels > 0 && $after_commit, "after $cancels cancels, the daemon waits for the standby again before publishing a committed generation");
is($primary->safe_psql('postgres', q{SELECT speed_kmh IS DISTINCT FROM 42 FROM trafficdb.locations WHERE location_id = 7}), 't',
	'... and has not published the unconfirmed generation');

my $t0 = time;
{
	local $ENV{PGCTLTIMEOUT} = 30;
	$primary->stop('fast', fail_ok => 1);
}
my $took = time - $t0;
cmp_ok($took, '<', 25, sprintf('pg_ctl stop -m fast returns (%.1f s) after a cancelled standby wait', $took));
$primary->stop('immediate', fail_ok => 1) if $took >= 25;

$primary->start;
$standby->start;
$primary->wait_for_catchup($standby, 'replay');
ok($primary->poll_query_until('postgres', q{SELECT speed_kmh = 42 FROM trafficdb.locations WHERE location_id = 7}),
	'after a restart the primary publishes what it committed');

sub wait_for_log
{
	my ($n, $re, $from) = @_;
	for (1 .. 100)
	{
		return 1 if slurp_file($n->logfile, $from) =~ $re;
		select(undef, undef, undef, 0.1);
	}
	return 0;
}

done_testing();
