# t/059_standby_starting.pl: a restarted standby (as pg_auto_failover's
# rejoin restarts it) says "trafficdb is starting" while its daemon rebuilds
# what it publishes, never "trafficdb has no map loaded" for a map that
# exists, and serves the primary's generation when the rebuild is done; and
# a killed node put through single-user crash recovery (pg_rewind) keeps its
# objects, so that it serves at once when started again (below).
#
# An orderly stop frees the published objects (external readers are told
# the instance stopped), so the next start rebuilds from the generation log
# (checkpoint + replay + the map from its source: seconds for a city).  The
# rebuild is held here by a prepared transaction on the primary locking the
# map's source table (its lock is replayed on the standby), so the standby
# is read many times inside that window; the lock is released after.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use lib 't';
use TdbTest;

my ($primary, $standby) = tdb_standby_pair('trafficdb.publish_interval' => "'200ms'", 'max_prepared_transactions' => '2');
$primary->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, 50)});
$primary->poll_query_until('postgres', q{SELECT speed_kmh = 50 FROM trafficdb.locations WHERE location_id = 1})
  or die 'not published';
tdb_caught_up($primary, $standby);

$primary->safe_psql('postgres', q{BEGIN; LOCK TABLE roads IN ACCESS EXCLUSIVE MODE; PREPARE TRANSACTION 'hold_map'});
$primary->wait_for_catchup($standby, 'replay');

$standby->stop('fast');
$standby->start;

# read at once, as a client reconnecting does (bounded); only the moment
# before the postmaster has launched the daemon may say "published nothing
# yet" (the daemon is not running: nothing says it will start), so wait for
# the daemon's process first
$standby->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'trafficdb daemon'})
  or die 'the standby\'s daemon did not start';
my (%errors, $served);
for (1 .. 40)
{
	my ($ret, $out, $err) = $standby->psql('postgres', 'SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 1');
	if ($ret == 0)
	{
		$served = $out;
		last;
	}
	my ($first) = $err =~ /ERROR:  ([^\n]*)/;
	$errors{$first // $err}++;
	select(undef, undef, undef, 0.05);
}
note(explain \%errors);
my @starting = grep { /^trafficdb is starting/ } keys %errors;
cmp_ok(scalar(@starting), '==', 1, 'while the standby\'s daemon rebuilds, readers are told trafficdb is starting');
is(join('; ', grep { !/^trafficdb is starting/ } keys %errors), '', 'and no other error (never "no map loaded")');
my ($ret, $out, $err) = $standby->psql('postgres', q{SELECT 1 FROM trafficdb.locations LIMIT 1},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:  57P03: trafficdb is starting/, 'with its own SQLSTATE (57P03, cannot_connect_now: retry)') if !defined $served;

$primary->safe_psql('postgres', q{COMMIT PREPARED 'hold_map'});
my $g = tdb_caught_up($primary, $standby);
is($standby->safe_psql('postgres', 'SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 1'), '50',
	"the rebuilt standby serves the primary's traffic (generation $g)");

# a server whose map was never loaded still says so
my $fresh = tdb_node('fresh');
$fresh->safe_psql('postgres', 'CREATE EXTENSION trafficdb CASCADE');
$fresh->poll_query_until('postgres', q{SELECT daemon_pid IS NOT NULL FROM trafficdb.status}) or die 'no daemon';
my $said = '';
for (1 .. 100)
{
	($ret, $out, $err) = $fresh->psql('postgres', 'SELECT * FROM trafficdb.locations');
	$said = $err;
	last if $err =~ /no map loaded/;
	select(undef, undef, undef, 0.05);
}
like($said, qr/trafficdb has no map loaded/, 'no map ever loaded: "no map loaded", once the daemon has started');

# A node killed (kill -9 of the postmaster: a machine lost) keeps its objects
# in /dev/shm; before it rejoins, pg_rewind runs its crash recovery in
# single-user mode (postgres --single), which preloads trafficdb too.  That
# run's exit stopped and unlinked the objects, so the rejoined server had to
# rebuild everything before serving; it must leave them alone, and the next
# start adopts them and serves at once.
my $single = tdb_node('single', 'trafficdb.publish_interval' => "'1h'");
tdb_grid_map($single);
$single->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (3, 33); SELECT trafficdb.publish()});
my $ctl = '/dev/shm/trafficdb.' . $single->port . '.ctl';
$single->kill9;
ok(-e $ctl, 'after kill -9 of the postmaster its objects stay in /dev/shm');
my ($sout, $serr, $sok) = ('', '', 0);
for (1 .. 100)
{
	# the killed postmaster's children leave within moments; until then the data directory is in use
	$sok = IPC::Run::run([ 'postgres', '--single', '-F', '-D', $single->data_dir, 'postgres' ], '<', \'', '>', \$sout, '2>', \$serr);
	last if $sok;
	select(undef, undef, undef, 0.1);
}
ok($sok, 'crash recovery in single-user mode (as pg_rewind runs it)') or diag($serr);
ok(-e $ctl, 'the single-user run left the objects alone');
my $soff = -s $single->logfile;
$single->start;
my %serrors;
my $sserved;
for (1 .. 100)
{
	my ($r, $o, $e) = $single->psql('postgres', 'SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 3');
	if ($r == 0) { $sserved = $o; last; }
	my ($first) = $e =~ /ERROR:  ([^\n]*)/;
	$serrors{$first // $e}++;
	select(undef, undef, undef, 0.05);
}
is($sserved, '33', 'the restarted node serves what it published before');
is(join('; ', keys %serrors), '', 'at once: no error before');
like(slurp_file($single->logfile, $soff), qr/trafficdb: adopted shared memory/, 'its daemon adopted the objects (no rebuild before serving)');

done_testing();
