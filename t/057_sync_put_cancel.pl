# t/057_sync_put_cancel.pl: a TRAFFICDB_SYNC put is acknowledged only once
# the synchronous standby has the generation holding it, even when the
# daemon's wait for the standby is cancelled.
#
# PostgreSQL ends a commit's wait for the synchronous standby on a cancel
# (pg_cancel_backend(), a driver's query timeout) and the COMMIT returns
# success with a WARNING: the transaction is committed on the primary only
# and is lost if a failover promotes the standby.  A SQL client's COMMIT
# is PostgreSQL's (README states the exception); the daemon's commits of
# generations must not pass that on to SYNC writers.  Here the standby is
# gone, a SYNC put waits, the daemon's waits are cancelled again and again
# (inside its commit and after it), then the daemon is killed (the server
# crash-restarts and the new daemon commits the generation again): the put
# must never return success while the standby lacks its generation.  When
# the standby is back it returns (success, or an error naming a loss), and
# what is published agrees on both.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use lib 't';
use TdbTest;

my $lib = $ENV{TRAFFICDB_LIB} // die 'TRAFFICDB_LIB must name lib/libtrafficdb.so';
my $pydir = $ENV{TRAFFICDB_PYTHON} // die 'TRAFFICDB_PYTHON must name the python/ folder';

my ($primary, $standby) = tdb_sync_pair();
$primary->append_conf('postgresql.conf', "restart_after_crash = on\n");
$primary->reload;
my $shm = '/trafficdb.' . $primary->port;
my $out = "$PostgreSQL::Test::Utils::tmp_check/sync_put_cancel.out";
unlink $out;

$standby->stop('immediate');

local $ENV{TRAFFICDB_LIB} = $lib;
local $ENV{PYTHONPATH} = $pydir;
my ($pin, $pout, $perr) = ('', '', '');
my $put = IPC::Run::start([ '/usr/bin/python3', '-c', <<"PY" ], '<', \$pin, '>', \$pout, '2>', \$perr);
import trafficdb
w = trafficdb.Writer('$shm')
w.set_timeout(600000)
try:
    w.put(9, speed_kmh=77, sync=True)
    r = 'ok'
except Exception as e:
    r = type(e).__name__
open('$out', 'w').write(r)
PY

my $waiting = q{SELECT pid, state FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND backend_type = 'trafficdb daemon'};
ok($primary->poll_query_until('postgres', "SELECT count(*) = 1 FROM ($waiting) w"),
	'the daemon commits the put\'s generation and waits for the synchronous standby');

sub acked { return -e $out ? slurp_file($out) : ''; }

# cancel the daemon's waits: inside its commit (state active) and after it,
# before publishing (state idle)
my %cancelled;
for (1 .. 8)
{
	ok($primary->poll_query_until('postgres', "SELECT count(*) = 1 FROM ($waiting) w"), 'the daemon waits for the standby') or last;
	my ($pid, $state) = split /\|/, $primary->safe_psql('postgres', $waiting);
	my $off = -s $primary->logfile;
	$primary->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
	ok(wait_for_log($primary, qr/canceling wait for synchronous replication/, $off), "a cancel ended the daemon's wait ($state)");
	$cancelled{$state}++;
	is(acked(), '', 'the SYNC put is not acknowledged');
}
note(explain \%cancelled);

# a SYNC put with a short timeout while the standby is gone and the daemon's
# waits were cancelled: an error (its timeout), never success
my $short = run_py(q{
w.set_timeout(1500)
try:
    w.put(10, speed_kmh=88, sync=True)
    print('ok')
except Exception as e:
    print(type(e).__name__)
});
is($short, 'Timeout', 'a SYNC put whose timeout ends first gets an error (Timeout), not success');
ok($cancelled{idle}, 'the wait after the commit was cancelled too');
ok($primary->poll_query_until('postgres', "SELECT count(*) = 1 FROM ($waiting) w"), 'the daemon still waits for the standby');
is(acked(), '', 'after every cancel the SYNC put is still not acknowledged');
is($primary->safe_psql('postgres', q{SELECT speed_kmh IS DISTINCT FROM 77 FROM trafficdb.locations WHERE location_id = 9}), 't',
	'and its generation is not published');

# the daemon killed while it waits: the server crash-restarts, the new
# daemon rebuilds from the log (which has the generation) and commits again
my $daemon = $primary->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'trafficdb daemon'});
my $off = -s $primary->logfile;
kill 'KILL', $daemon;
ok(wait_for_log($primary, qr/all server processes terminated; reinitializing/, $off), 'the server crash-restarts');
tdb_wait_accepting($primary) or die 'the server does not accept connections after its crash-restart';
ok($primary->poll_query_until('postgres', "SELECT count(*) = 1 FROM ($waiting) w"), 'the new daemon waits for the standby');
is(acked(), '', 'after the crash-restart the SYNC put is still not acknowledged');

$standby->start;
for (1 .. 600)
{
	last if acked() ne '';
	select(undef, undef, undef, 0.1);
}
$put->finish;
my $r = acked();
like($r, qr/^(ok|Lost|Stale)$/, "with the standby back the SYNC put returns ($r)");
if ($r eq 'ok')
{
	ok($primary->poll_query_until('postgres', q{SELECT speed_kmh = 77 FROM trafficdb.locations WHERE location_id = 9}),
		'acknowledged: published on the primary');
	$primary->wait_for_catchup($standby, 'replay');
	ok($standby->poll_query_until('postgres', q{SELECT speed_kmh = 77 FROM trafficdb.locations WHERE location_id = 9}),
		'and on the standby');
}

sub run_py
{
	my ($code) = @_;
	my ($o, $e) = ('', '');
	IPC::Run::run([ '/usr/bin/python3', '-c', "import trafficdb\nw = trafficdb.Writer('$shm')\n$code" ], '>', \$o, '2>', \$e);
	note($e) if $e;
	chomp $o;
	return $o;
}

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
