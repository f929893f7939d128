# t/005_no_daemon.pl: the extension is present but its daemon cannot run
# (it is told to serve a database that does not exist): every entry point
# gives a clear error instead of hanging, crashing or returning nothing.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('nodaemon', 'trafficdb.database' => "'no_such_database'");
$node->safe_psql('postgres', 'CREATE EXTENSION trafficdb CASCADE');

my ($ret, $out, $err) = $node->psql('postgres', 'SELECT trafficdb.publish()');
like($err, qr/the trafficdb daemon is not running/, 'publish: the daemon is not running');
like($err, qr/HINT:  It starts with the server/, 'with a hint');
($ret, $out, $err) = $node->psql('postgres', q{CREATE TABLE r (id int, geom geometry(LineString, 4326));
  SELECT trafficdb.load_map('r')});
like($err, qr/the trafficdb daemon is not running/, 'load_map: the daemon is not running');
($ret, $out, $err) = $node->psql('postgres', 'SELECT * FROM trafficdb.locations');
like($err, qr/trafficdb has published nothing yet|trafficdb has no map loaded/, 'locations: nothing published, said clearly');
is($node->safe_psql('postgres', 'SELECT daemon_pid IS NULL, generation FROM trafficdb.status'), 't|0',
	'status shows no daemon');
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'the server is fine');
$node->stop;
done_testing();
