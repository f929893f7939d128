# t/017_spatial_joins.pl: spatial joins against the locations foreign table
# (ST_DWithin, &&, ST_Intersects and the predicates narrowed by a box:
# ST_Within, ST_Contains, ST_CoveredBy, @, ST_DFullyWithin, geography
# ST_Intersects, with the other side from another table)
# run as a nested loop with one R-tree query per outer row, and give the
# same pairs as the same join against a heap copy with a GiST index.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('spatial_joins', 'trafficdb.publish_interval' => "'100ms'");

# 3,000 random segments (seeded) as in t/004_locations.pl, zero-length ones
# and duplicates included; a heap copy with GiST; 300 random points around
# the map (some outside it), each with a small box.
$node->safe_psql('postgres', q{
CREATE EXTENSION trafficdb CASCADE;
SELECT setseed(0.125);
CREATE TABLE roads AS
SELECT i::bigint AS id,
       ST_SetSRID(CASE
         WHEN i % 50 = 0 THEN ST_MakeLine(ST_MakePoint(x, y), ST_MakePoint(x, y))
         WHEN i % 97 = 0 THEN ST_MakeLine(ST_MakePoint(x, y), ST_MakePoint(x + 0.05, y + 0.03))
         ELSE ST_MakeLine(ARRAY[ST_MakePoint(x, y), ST_MakePoint(x + dx, y + dy), ST_MakePoint(x + 2 * dx, y + dy / 2)])
       END, 4326) AS geom
  FROM (SELECT i, 24.8 + random() * 0.3 AS x, 60.1 + random() * 0.15 AS y,
               (random() - 0.5) * 0.004 AS dx, (random() - 0.5) * 0.002 AS dy
          FROM generate_series(1, 3000) i) s;
INSERT INTO roads SELECT id + 100000, geom FROM roads WHERE id % 13 = 0;
CREATE TABLE heap_locations AS SELECT id AS location_id, geom FROM roads;
CREATE INDEX ON heap_locations USING gist (geom);
CREATE INDEX ON heap_locations USING gist ((geom::geography));
CREATE TABLE points AS
SELECT i AS id, ST_SetSRID(ST_MakePoint(x, y), 4326) AS geom,
       ST_MakeEnvelope(x, y, x + 0.002, y + 0.001, 4326) AS env, (i % 7) * 0.0003 AS r,
       ST_Buffer(ST_MakePoint(x, y)::geography, 150) AS area
  FROM (SELECT i, 24.78 + random() * 0.34 AS x, 60.08 + random() * 0.19 AS y
          FROM generate_series(1, 300) i) s;
ANALYZE roads;
ANALYZE heap_locations;
ANALYZE points;
SELECT trafficdb.load_map('roads');
SELECT trafficdb.publish();
});
my $map_size = $node->safe_psql('postgres', 'SELECT count(*) FROM roads');

# Each join: the query, with T for the locations table (l) and p for points.
my @joins = (
	[ 'ST_DWithin', 'SELECT p.id, l.location_id FROM points p JOIN T l ON ST_DWithin(l.geom, p.geom, 0.001)' ],
	[ 'ST_DWithin reversed', 'SELECT p.id, l.location_id FROM points p JOIN T l ON ST_DWithin(p.geom, l.geom, 0.0015)' ],
	[ 'ST_DWithin on geography',
	  'SELECT p.id, l.location_id FROM points p JOIN T l ON ST_DWithin(l.geom::geography, p.geom::geography, 120)' ],
	[ 'ST_DWithin on the sphere, reversed',
	  'SELECT p.id, l.location_id FROM points p JOIN T l ON ST_DWithin(p.geom::geography, l.geom::geography, 80, false)' ],
	[ 'ST_DWithin, the distance from the outer row',
	  'SELECT p.id, l.location_id FROM points p JOIN T l ON ST_DWithin(l.geom, p.geom, p.r)' ],
	[ '&& ST_Expand', 'SELECT p.id, l.location_id FROM points p JOIN T l ON l.geom && ST_Expand(p.geom, 0.002)' ],
	[ '&& a point', 'SELECT p.id, l.location_id FROM points p JOIN T l ON l.geom && p.geom' ],
	[ '&& a box, reversed', 'SELECT p.id, l.location_id FROM points p JOIN T l ON p.env && l.geom' ],
	# (not the zero-length segments, ids divisible by 50: GEOS finds them in a
	# buffer or not depending on whether PostGIS prepared the buffer, even on
	# the heap alone -- its index scan and its sequential scan disagree)
	[ 'ST_Intersects ST_Buffer',
	  'SELECT p.id, l.location_id FROM points p JOIN T l ON ST_Intersects(l.geom, ST_Buffer(p.geom, 0.0015)) AND l.location_id % 50 <> 0' ],
	[ 'ST_Intersects ST_Buffer, reversed',
	  'SELECT p.id, l.location_id FROM points p JOIN T l ON ST_Intersects(ST_Buffer(p.geom, 0.002), l.geom) AND l.location_id % 50 <> 0' ],
	# the predicates narrowed by a box, rechecked by the scan
	[ 'ST_Within ST_Buffer',
	  'SELECT p.id, l.location_id FROM points p JOIN T l ON ST_Within(l.geom, ST_Buffer(p.geom, 0.004)) AND l.location_id % 50 <> 0' ],
	[ 'ST_Contains ST_Buffer, reversed',
	  'SELECT p.id, l.location_id FROM points p JOIN T l ON ST_Contains(ST_Buffer(p.geom, 0.004), l.geom) AND l.location_id % 50 <> 0' ],
	[ 'ST_CoveredBy ST_Expand', 'SELECT p.id, l.location_id FROM points p JOIN T l ON ST_CoveredBy(l.geom, ST_Expand(p.env, 0.002))' ],
	[ '@ ST_Expand', 'SELECT p.id, l.location_id FROM points p JOIN T l ON l.geom @ ST_Expand(p.geom, 0.003)' ],
	[ 'ST_DFullyWithin', 'SELECT p.id, l.location_id FROM points p JOIN T l ON ST_DFullyWithin(l.geom, p.geom, 0.004)' ],
	[ 'ST_Intersects on geography',
	  'SELECT p.id, l.location_id FROM points p JOIN T l ON ST_Intersects(l.geom::geography, p.area) AND l.location_id % 50 <> 0' ],
	[ 'EXISTS', 'SELECT p.id, 0 FROM points p WHERE EXISTS (SELECT FROM T l WHERE ST_DWithin(l.geom, p.geom, 0.001))' ],
	[ 'NOT EXISTS', 'SELECT p.id, 0 FROM points p WHERE NOT EXISTS (SELECT FROM T l WHERE ST_DWithin(l.geom, p.geom, 0.001))' ],
	[ 'LATERAL',
	  'SELECT p.id, s.location_id FROM points p CROSS JOIN LATERAL (SELECT l.location_id FROM T l WHERE ST_DWithin(l.geom, p.geom, 0.0012)) s' ],
	[ 'LEFT JOIN', 'SELECT p.id, l.location_id FROM points p LEFT JOIN T l ON ST_DWithin(l.geom, p.geom, 0.0008)' ]);

for my $j (@joins)
{
	my ($what, $sql) = @$j;
	(my $fdw = $sql) =~ s/\bT\b/trafficdb.locations/g;
	(my $heap = $sql) =~ s/\bT\b/heap_locations/g;
	my $pairs = sub {
		$node->safe_psql('postgres', "SELECT count(*), count(DISTINCT id), md5(coalesce(string_agg(id || ':' || coalesce(lid::text, '-'), ',' ORDER BY id, lid), ''))
		  FROM ($_[0]) j(id, lid)");
	};
	my $want = $pairs->($heap);
	my ($rows, $outer) = split /\|/, $want;
	cmp_ok($rows, '>=', 30, "$what: the heap join finds pairs ($rows)");
	is($pairs->($fdw), $want, "$what: the foreign table gives the heap's pairs");

	my $plan = $node->safe_psql('postgres', "EXPLAIN (COSTS OFF) $fdw");
	like($plan, qr/Nested Loop.*\n.*Seq Scan on points p\n.*Foreign Scan on locations l\n(?:.*\n)*?.*TrafficDB Pushdown: .* per outer row$/m,
		"$what: a nested loop, the foreign scan parameterized by the outer row");
	unlike($plan, qr/Hash|Merge|Materialize/, "$what: no hash or merge join, nothing materialized");
	$plan = $node->safe_psql('postgres', "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $fdw");
	my ($loops) = $plan =~ /Foreign Scan on locations l \(actual rows=\d+ loops=(\d+)\)/;
	my ($examined) = $plan =~ /Locations Examined: (\d+)/;
	is($loops, 300, "$what: one scan per point");
	note "$what: $rows rows, $examined examined";
	cmp_ok($examined, '<=', 4 * $rows + 300, "$what: $examined locations examined for $rows rows, not 300 x $map_size");
}

# EXPLAIN names the clause and the outer column
like($node->safe_psql('postgres', 'EXPLAIN (COSTS OFF) SELECT * FROM points p JOIN trafficdb.locations l ON ST_DWithin(l.geom, p.geom, 0.001)'),
	qr/TrafficDB Pushdown: st_dwithin\(geom, p\.geom, '0\.001'::double precision\) per outer row/i,
	'EXPLAIN shows the pushed clause with its outer reference');

# The outer side from an outer-joined subquery's output: the planner wraps
# it in a PlaceHolderVar, which the pushed clause's EXPLAIN words (written
# while planning, for every query) could not deparse: the query itself
# failed with "unrecognized node type".
for my $form ('ST_Within(l.geom, s.b)', 'ST_Intersects(l.geom, s.b)', 'l.geom @ s.b')
{
	my $q = "SELECT count(*), sum(l.location_id) FROM points p LEFT JOIN LATERAL (SELECT ST_Buffer(p.geom, 0.004) AS b
	  FROM (SELECT 1) x) s ON true JOIN T l ON $form AND l.location_id % 50 <> 0";
	(my $fdw = $q) =~ s/\bT\b/trafficdb.locations/;
	(my $heap = $q) =~ s/\bT\b/heap_locations/;
	my ($rc, $out, $err) = $node->psql('postgres', $fdw);
	is($err, '', "$form of an outer-joined subquery's output: no error");
	is($out, $node->safe_psql('postgres', $heap), "$form of an outer-joined subquery's output: the heap's rows");
	like($node->safe_psql('postgres', "EXPLAIN (COSTS OFF) $fdw"), qr/TrafficDB Pushdown: .*st_buffer\(p\.geom.* per outer row/i,
		"$form of an outer-joined subquery's output: EXPLAIN says its expression");
}
my ($prc, $pout, $perr) = $node->psql('postgres', q{SELECT count(*) FROM points p
  LEFT JOIN (SELECT ST_MakeEnvelope(24.9, 60.1, 24.91, 60.11, 4326) AS b) s ON true
  JOIN trafficdb.locations l ON ST_Within(l.geom, s.b) WHERE p.id <= 3});
is($perr, '', 'a constant of an outer-joined subquery in a pushed clause: no error');
is($pout, $node->safe_psql('postgres', q{SELECT count(*) FROM points p
  LEFT JOIN (SELECT ST_MakeEnvelope(24.9, 60.1, 24.91, 60.11, 4326) AS b) s ON true
  JOIN heap_locations l ON ST_Within(l.geom, s.b) WHERE p.id <= 3}), 'a constant of an outer-joined subquery: the heap\'s rows');

# a volatile outer side is not pushed (it must be evaluated once per pair)
unlike($node->safe_psql('postgres', 'EXPLAIN (COSTS OFF) SELECT * FROM points p JOIN trafficdb.locations l
	ON ST_DWithin(l.geom, p.geom, 0.001 + random() * 0)'), qr/per outer row/, 'a volatile distance is not pushed');

# a join on a relation already filtered by a constant box: still correct
is($node->safe_psql('postgres', q{SELECT count(*) FROM points p JOIN trafficdb.locations l ON ST_DWithin(l.geom, p.geom, 0.002)
	WHERE l.geom && ST_MakeEnvelope(24.9, 60.1, 25.0, 60.2, 4326)}),
	$node->safe_psql('postgres', q{SELECT count(*) FROM points p JOIN heap_locations l ON ST_DWithin(l.geom, p.geom, 0.002)
	WHERE l.geom && ST_MakeEnvelope(24.9, 60.1, 25.0, 60.2, 4326)}), 'a join with a constant box too agrees with the heap');

# a generic plan of a prepared join: the distance is a parameter
my $bp = $node->background_psql('postgres');
$bp->query_safe('SET plan_cache_mode = force_generic_plan');
$bp->query_safe('PREPARE j(float8) AS SELECT count(*) FROM points p JOIN trafficdb.locations l ON ST_DWithin(l.geom, p.geom, $1)');
like($bp->query_safe('EXPLAIN (COSTS OFF) EXECUTE j(0.001)'), qr/Nested Loop.*per outer row/s, 'a generic plan with the distance a parameter');
for my $d (0.0005, 0.003)
{
	is($bp->query_safe("EXECUTE j($d)"),
		$node->safe_psql('postgres', "SELECT count(*) FROM points p JOIN heap_locations l ON ST_DWithin(l.geom, p.geom, $d)"),
		"prepared join, distance $d, agrees with the heap");
}
$bp->quit;

$node->stop;
done_testing();
