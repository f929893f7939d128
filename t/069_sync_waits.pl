# t/069_sync_waits.pl: what TRAFFICDB_SYNC writers whose puts change
# nothing, or who die waiting, do to the daemon (the hostile review of the
# SYNC wake-up of 2026-11-30 found each of these):
#
#   - a TRAFFICDB_SYNC put of an update older than the location's stored
#     value (newest wins: it changes nothing) is acknowledged promptly, not
#     after the next scheduled publication (publish_interval);
#   - a writer killed in its SYNC wait leaves the header's sync_waiters
#     counted: ASYNC puts afterwards do not make a generation per drain
#     (format 2: 500-2,500 a second), since each lane says what its writer
#     waits for (sync_until);
#   - while every generation fails (a column of trafficdb.generations is
#     renamed) and writers put, the daemon retries at the drain interval,
#     not back to back (the first SYNC wake-up: ~5,000 a second, each a LOG
#     line).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use lib 't';
use TdbTest;

my $node = tdb_node('review_sync', 'trafficdb.publish_interval' => "'5s'");
tdb_grid_map($node);

my $shm = '/trafficdb.' . $node->port;

my $py = tdb_python("name = '$shm'");
sub py { return $py->(@_); }

# ASYNC puts for 2 s, a pause of SECONDS after each
sub async_puts
{
	py("w = trafficdb.Writer(name)\nend = time.monotonic() + 2\nn = 0\nwhile time.monotonic() < end:\n"
		  . "    w.put(1 + n % 100, speed_kmh=n % 90)\n    n += 1\n    time.sleep($_[0])\n");
}

# a SYNC put that changes nothing (older than what is stored)
my $out = py(q{
w = trafficdb.Writer(name)
now = int(time.time() * 1e6)
w.put(1, speed_kmh=40, observed_at_us=now, sync=True)
t0 = time.monotonic()
w.put(1, speed_kmh=30, observed_at_us=now - 10_000_000, sync=True)
print('%.0f' % ((time.monotonic() - t0) * 1000))
});
note("a SYNC put of an older update took $out ms (publish_interval 5 s)");
ok($out =~ /^\d+$/ && $out < 1000, 'a SYNC put of an update older than the stored one is acknowledged within 1 s, not at the next publication');

# a writer killed in its SYNC wait (every generation fails meanwhile, so it waits)
$node->safe_psql('postgres', 'ALTER TABLE trafficdb.generations RENAME COLUMN body TO body_renamed');
my $pid = fork() // die "fork: $!";
if ($pid == 0)
{
	exec('/usr/bin/python3', '-c', "import trafficdb, time\nw = trafficdb.Writer('$shm')\n"
		  . "w.put(2, speed_kmh=40, observed_at_us=int(time.time() * 1e6), sync=True)\n");
	exit 1;
}
usleep(1_500_000);
kill 'KILL', $pid;
waitpid($pid, 0);
$node->safe_psql('postgres', 'ALTER TABLE trafficdb.generations RENAME COLUMN body_renamed TO body');
# its put commits with the next generation; then ASYNC puts for 2 s
usleep(6_000_000);
my $gen0 = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
async_puts(0.0002);
my $gens = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status') - $gen0;
note("$gens generations in 2 s of ASYNC puts after a SYNC writer died waiting (publish_interval 5 s)");
ok($gens <= 3, 'a writer that died in its SYNC wait does not make every drain a generation');

# every generation fails from here
$node->safe_psql('postgres', 'ALTER TABLE trafficdb.generations RENAME COLUMN body TO body_renamed');
usleep(500_000);
my $log = $node->logfile;
my $before = () = slurp_file($log) =~ /trafficdb feed failed/g;
my $t0 = time();
async_puts(0.00002);
my $secs = time() - $t0;
my $after = () = slurp_file($log) =~ /trafficdb feed failed/g;
my $rate = ($after - $before) / $secs;
note(sprintf('%d failed generations in %.1f s (%.0f/s)', $after - $before, $secs, $rate));
ok($rate <= 1000, 'a failing generation is retried at most ~1,000 times a second while writers put');
$node->safe_psql('postgres', 'ALTER TABLE trafficdb.generations RENAME COLUMN body_renamed TO body');

$node->stop;
done_testing();
