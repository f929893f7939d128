# t/018_knn_review.pl: hostile review of the nearest-first scan's
# fdw_scan_tlist (commit 1f04237) and quals checked before measuring
# (commit 2619a5c).  Each check compares the foreign table with a heap copy
# that has GiST indexes (both failed before the fixes that followed the review).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('knnrev');
tdb_random_roads($node);
$node->safe_psql('postgres', q{
CREATE TABLE par (location_id bigint, geom geometry, road_class text);
CREATE FOREIGN TABLE chi () INHERITS (par) SERVER trafficdb;
});

my $p = q{ST_SetSRID(ST_MakePoint(24.95, 60.17), 4326)};

# 1. A system column next to a nearest-first scan with a filter (the
# fdw_scan_tlist has only the table's columns and the distance):
# "ERROR: variable not found in subplan target list".
for my $case (
	[ 'tableoid in the target list', "SELECT tableoid::regclass::text, location_id FROM trafficdb.locations WHERE road_class = 'primary' ORDER BY geom <-> $p LIMIT 3",
	  "SELECT 'trafficdb.locations', id FROM roads WHERE road_class = 'primary' ORDER BY geom <-> $p LIMIT 3" ],
	[ 'tableoid in a qual', "SELECT location_id FROM trafficdb.locations WHERE tableoid > 0 AND road_class = 'primary' ORDER BY geom <-> $p LIMIT 3",
	  "SELECT id FROM roads WHERE road_class = 'primary' ORDER BY geom <-> $p LIMIT 3" ],
	[ 'geography metric, tableoid', "SELECT tableoid::regclass::text, location_id FROM trafficdb.locations ORDER BY geom::geography <-> ${p}::geography LIMIT 3",
	  "SELECT 'trafficdb.locations', id FROM roads ORDER BY geom::geography <-> ${p}::geography LIMIT 3" ],
	[ 'inheritance parent, tableoid of the foreign child', "SELECT tableoid::regclass::text, location_id FROM par WHERE road_class = 'primary' ORDER BY geom <-> $p LIMIT 3",
	  "SELECT 'chi', id FROM roads WHERE road_class = 'primary' ORDER BY geom <-> $p LIMIT 3" ])
{
	my ($name, $fdw, $heap) = @$case;
	my ($ret, $out, $err) = $node->psql('postgres', $fdw);
	is($ret, 0, "$name: no error") or diag($err);
	is($out, $node->safe_psql('postgres', $heap), "$name: the heap's rows");
}

# 2. A qual that is "leakproof" only because its failing part reads no
# column (1 / $1 on a parameter) is checked before measuring on entries the
# heap never evaluates it on (past the LIMIT, or where OR short-circuits):
# the heap answers, the foreign table raises division by zero.
my $nearest = $node->safe_psql('postgres', "SELECT id FROM roads ORDER BY geom <-> $p LIMIT 1");
my $q = q{SET plan_cache_mode = force_generic_plan;
PREPARE q(int, geometry) AS SELECT %s FROM %s WHERE (%s = %s OR 1 / $1 = 1) ORDER BY geom <-> $2 LIMIT 1;
EXECUTE q(0, %s);};
my $heap = $node->safe_psql('postgres', sprintf($q, 'id', 'roads', 'id', $nearest, $p));
is($heap, $nearest, 'the heap evaluates 1 / $1 on no row');
my ($ret, $out, $err) = $node->psql('postgres', sprintf($q, 'location_id', 'trafficdb.locations', 'location_id', $nearest, $p));
is($ret, 0, 'generic plan, (location_id = nearest OR 1 / $1 = 1) with $1 = 0: no error') or diag($err);
is($out, $heap, "... and the heap's row");

# the same with a cast of a text parameter
$q = q{SET plan_cache_mode = force_generic_plan;
PREPARE q(text, geometry) AS SELECT %s FROM %s WHERE (%s = %s OR $1::int > 0) ORDER BY geom <-> $2 LIMIT 1;
EXECUTE q('abc', %s);};
($ret, $out, $err) = $node->psql('postgres', sprintf($q, 'location_id', 'trafficdb.locations', 'location_id', $nearest, $p));
is($ret, 0, "generic plan, (location_id = nearest OR \$1::int > 0) with \$1 = 'abc': no error") or diag($err);
is($out, $heap, "... and the heap's row");

$node->stop;
done_testing();
