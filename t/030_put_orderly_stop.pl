# t/030_put_orderly_stop.pl: writers' ring puts across an orderly stop of
# the server (pg_ctl stop -m fast), found by the kill -9 loop's clean restart
# (test/crash_loop.pl).
#
#   - a TRAFFICDB_SYNC put waiting for a commit when the server stops returns
#     at once (TRAFFICDB_STALE; or TRAFFICDB_OK if the stop committed it),
#     not at the end of its timeout (fixed in src/client/writer.c: waiters
#     look at the control block every 100 ms);
#   - an ASYNC put acknowledged before the stop, drained by the daemon and
#     not committed (no publication but the ones asked for), is published
#     after the restart: the daemon drains the ring and commits a last
#     generation before it exits (it left on SIGTERM without, and the
#     postmaster then unlinked the ring: such puts were lost).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use POSIX ();
use lib 't';
use TdbTest;

# no publication but the ones asked for: what is drained stays uncommitted
my $node = tdb_node('put_stop', 'trafficdb.publish_interval' => "'1h'");
$node->safe_psql('postgres', q{
CREATE EXTENSION trafficdb CASCADE;
CREATE TABLE roads AS SELECT i::bigint AS id,
  ST_SetSRID(ST_MakeLine(ST_MakePoint(25 + i * 0.001, 60), ST_MakePoint(25 + i * 0.001, 60.001)), 4326) AS geom
  FROM generate_series(1, 10) i;
SELECT trafficdb.load_map('roads', 'id', 'geom');
});
my $shm = '/trafficdb.' . $node->port;
my $out = "$PostgreSQL::Test::Utils::tmp_check/put_stop.out";

my $py = tdb_python("w = trafficdb.Writer('$shm')");
sub py { return $py->(@_); }

is(py(q{w.put(1, speed_kmh=12); print('ok')}), 'ok', 'an ASYNC put');
is($node->safe_psql('postgres', 'SELECT trafficdb.publish() > 0'), 't', 'publish()');
is($node->safe_psql('postgres', 'SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 1'), '12',
	'is published by the next publication');

# a SYNC put waits for a commit (none comes: publish_interval is 1 h) when
# the server stops; an ASYNC put was acknowledged before
is(py(q{w.put(2, speed_kmh=34); time.sleep(0.1); print('ok')}), 'ok', 'another ASYNC put is acknowledged');
my $pid = fork() // die "fork: $!";
if ($pid == 0)
{
	exec('/usr/bin/python3', '-c', "import trafficdb, time\nw = trafficdb.Writer('$shm')\nt = time.time()\n"
		  . "try:\n    w.put(3, speed_kmh=56, sync=True)\n    r = 'ok'\nexcept Exception as e:\n    r = type(e).__name__\n"
		  . "open('$out', 'w').write('%s %.3f' % (r, time.time()))\n")
	  or POSIX::_exit(127);
}
sleep(1);
my $stop_began = time();
$node->stop('fast');
waitpid($pid, 0);
my ($what, $when) = split / /, slurp_file($out);
like($what, qr/^(Stale|ok)$/, 'the SYNC put waiting at the orderly stop says TRAFFICDB_STALE (or OK)');
cmp_ok($when - $stop_began, '<', 2, 'at once (within 2 s of the stop; its timeout is 10 s)');

$node->start;
$node->poll_query_until('postgres', 'SELECT trafficdb.publish() > 0') or die 'no publication after the restart';
if ($what eq 'ok')
{
	is($node->safe_psql('postgres', 'SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 3'), '56',
		'the SYNC put acknowledged at the stop is published after the restart');
}
is($node->safe_psql('postgres', 'SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 2'), '34',
	'an ASYNC put acknowledged before an orderly stop is published after the restart');
$node->stop;
done_testing();
