# t/015_shm_takeover.pl: two servers with the same trafficdb.shm_name, the
# first stopping while the second waits for the prefix.
#  - the second takes the prefix over (its daemon takes the lock);
#  - when the second then stops cleanly, its external readers are told
#    (TDB_SHM_ESTALE, as with any clean stop) and nothing is left under the
#    prefix, as when the first server stops.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use lib 't';
use TdbTest;

my $tdbread = $ENV{TDBREAD} // die 'TDBREAD must name tools/tdbread';
my $roads = q{
CREATE EXTENSION trafficdb CASCADE;
CREATE TABLE roads AS SELECT i::bigint AS id,
  ST_SetSRID(ST_MakeLine(ST_MakePoint(25 + i * 0.001, 60), ST_MakePoint(25 + i * 0.001, 60.001)), 4326) AS geom
  FROM generate_series(1, 100) i;
};
my $first = tdb_node('first', 'trafficdb.publish_interval' => "'1h'");
$first->safe_psql('postgres', "$roads SELECT trafficdb.load_map('roads');");
my $prefix = '/trafficdb.' . $first->port;

my $second = tdb_node('second', 'trafficdb.shm_name' => "'$prefix'", 'trafficdb.publish_interval' => "'1h'");
$second->safe_psql('postgres', $roads);
ok($second->poll_query_until('postgres', q{SELECT last_error LIKE '%in use by another running server%' FROM trafficdb.status}),
	'the second server refuses the prefix while the first runs');

$first->stop;
ok(!-e "/dev/shm$prefix.ctl", 'the first server\'s clean stop removed its objects');

# the second server's daemon retries (bgw_restart_time) and takes the prefix
ok($second->poll_query_until('postgres', q{SELECT trafficdb.load_map('roads') = 100}),
	'the second server takes the prefix over once the first is gone');
$second->safe_psql('postgres', 'INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, 42); SELECT trafficdb.publish()');
is($second->safe_psql('postgres', 'SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 1'), '42',
	'and publishes');

# an external reader that reads continuously across the second server's clean stop
my ($in, $out, $err) = ('', '', '');
my $h = IPC::Run::start([ $tdbread, $prefix, 'watch', '6' ], '<', \$in, '>', \$out, '2>', \$err,
	IPC::Run::timeout(60));
sleep 1;
$second->stop;
$h->finish;
like($out, qr/reads=[1-9]\d* inconsistent=0 .* reopens=[1-9]/,
	'the external reader is told the server stopped (it reopened)');
my @left = glob("/dev/shm$prefix.*");
is("@left", '', 'the second server\'s clean stop leaves nothing under the prefix');

unlink @left;
done_testing();
