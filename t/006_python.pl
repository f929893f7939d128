# t/006_python.pl: the Python bindings (python/trafficdb) against a real
# cluster, through pytest.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $lib = $ENV{TRAFFICDB_LIB} // die 'TRAFFICDB_LIB must name lib/libtrafficdb.so';
my $pydir = $ENV{TRAFFICDB_PYTHON} // die 'TRAFFICDB_PYTHON must name the python/ folder';

my $node = tdb_node('python', 'trafficdb.publish_interval' => "'100ms'");
tdb_grid_map($node);
$node->safe_psql('postgres', q{
INSERT INTO trafficdb.feed (location_id, speed_kmh, free_flow_kmh) SELECT id, id % 80, 80 FROM roads;
SELECT trafficdb.publish();
});

local $ENV{TRAFFICDB_SHM} = '/trafficdb.' . $node->port;
local $ENV{TRAFFICDB_LIB} = $lib;
local $ENV{PYTHONPATH} = $pydir;
local $ENV{PGHOST} = $node->host;
local $ENV{PGPORT} = $node->port;
local $ENV{PGDATABASE} = 'postgres';
my ($stdout, $stderr) = run_command([ '/usr/bin/python3', '-m', 'pytest', '-q', '-p', 'no:cacheprovider', "$pydir/tests" ]);
note($stdout);
note($stderr) if $stderr;
like($stdout, qr/\b11 passed\b/, 'pytest: the Python bindings pass against the live cluster');
unlike($stdout, qr/failed|error/i, 'pytest: nothing failed');

$node->stop;
done_testing();
