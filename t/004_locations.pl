# t/004_locations.pl: the locations foreign table returns exactly what the
# same query returns on a heap table with a GiST index, over more than a
# thousand random queries; pushdown shows in EXPLAIN; one generation per
# statement / transaction.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('locations', 'trafficdb.publish_interval' => "'100ms'", 'log_statement' => "'all'");

# 3,000 random segments (seeded), with the edge cases: zero-length segments,
# exact duplicates, segments sharing edges on a grid, a few long ones.
$node->safe_psql('postgres', q{
CREATE EXTENSION trafficdb CASCADE;
SELECT setseed(0.25);
CREATE TABLE roads AS
SELECT i::bigint AS id,
       ST_SetSRID(CASE
         WHEN i % 50 = 0 THEN ST_MakeLine(ST_MakePoint(x, y), ST_MakePoint(x, y))                 -- zero length
         WHEN i % 7 = 0 THEN ST_MakeLine(ST_MakePoint(round(x::numeric, 3)::float8, round(y::numeric, 3)::float8),
                                         ST_MakePoint(round(x::numeric, 3)::float8 + 0.001, round(y::numeric, 3)::float8))  -- grid edges
         WHEN i % 97 = 0 THEN ST_MakeLine(ST_MakePoint(x, y), ST_MakePoint(x + 0.05, y + 0.03))   -- long
         ELSE ST_MakeLine(ARRAY[ST_MakePoint(x, y), ST_MakePoint(x + dx, y + dy), ST_MakePoint(x + 2 * dx, y + dy / 2)])
       END, 4326) AS geom
  FROM (SELECT i, 24.8 + random() * 0.3 AS x, 60.1 + random() * 0.15 AS y,
               (random() - 0.5) * 0.004 AS dx, (random() - 0.5) * 0.002 AS dy
          FROM generate_series(1, 3000) i) s;
INSERT INTO roads SELECT id + 100000, geom FROM roads WHERE id % 13 = 0;              -- duplicates
-- Roads at the long east-west edges of the geography queries below (bulge_queries): a geography
-- edge is a great-circle arc, poleward of its endpoints' latitude by up to
-- tan(lat) / cos(half its longitude span) (here 2 to 340 m).  At three points of each edge,
-- north-south roads: one that crosses the arc (radius 0) or starts 0.35 radius poleward of it,
-- all poleward of the endpoints' latitude by more than the radius; one more that stays
-- beyond the radius.  id: 500000 + 100 * query + 10 * edge + (0..2 in, 5..7 out).
CREATE TABLE bulge_edges (q int, e int, lon0 float8, lon1 float8, lat float8, d float8);
INSERT INTO bulge_edges VALUES (1, 0, 1.45, 1.75, 42.5, 0), (2, 0, 1.0, 2.0, 42.6, 50), (3, 0, 1.45, 1.75, 42.4, 3),
  (4, 0, 24.6, 25.4, 60.0, 0), (5, 0, 24.5, 25.5, 59.8, 20), (6, 0, 150.0, 150.6, -35.0, 0),
  (7, 0, 150.0, 150.6, -35.5, 10), (8, 0, 1.45, 1.75, 42.3, 0), (8, 1, 1.45, 1.75, 42.2, 0),
  (9, 0, 1.45, 1.75, 42.1, 0), (10, 0, 24.6, 25.4, 61.0, 5), (10, 1, 24.6, 25.4, 61.2, 5),
  (11, 0, 23.0, 24.8, 60.5, 0), (12, 0, 23.0, 24.8, 60.6, 100), (13, 0, 1.45, 1.75, 42.0, 2);
INSERT INTO roads
SELECT 500000 + 100 * q + 10 * e + j + CASE WHEN o THEN 5 ELSE 0 END,
       ST_SetSRID(ST_MakeLine(ST_MakePoint(x, arc + s * CASE WHEN o THEN 1.3 * dd + 0.2 * b WHEN d = 0 THEN -0.6 * b ELSE 0.35 * dd END),
                              ST_MakePoint(x, arc + s * CASE WHEN o THEN 1.6 * dd + 0.6 * b WHEN d = 0 THEN 0.5 * b ELSE 0.7 * dd END)), 4326)
  FROM (SELECT *, abs(arc - lat) AS b FROM
         (SELECT q, e, j, o, x, lat, d, sign(lat) AS s, d / 111195.0 AS dd,
                 degrees(atan(tan(radians(lat)) * cos(radians(x - (lon0 + lon1) / 2)) / cos(radians((lon1 - lon0) / 2)))) AS arc
            FROM bulge_edges, generate_series(0, 2) j, (VALUES (false), (true)) v(o),
                 LATERAL (SELECT lon0 + (0.35 + 0.15 * j) * (lon1 - lon0) AS x) xx) a) r;
CREATE INDEX ON roads USING gist (geom);
ANALYZE roads;
SELECT trafficdb.load_map('roads');
INSERT INTO trafficdb.feed (location_id, speed_kmh) SELECT id, id % 90 FROM roads WHERE id % 3 = 0;
SELECT trafficdb.publish();
});

# Each check: how many of N random queries give different results on the
# foreign table and on the heap (as sorted id arrays).
sub mismatches
{
	my ($n, $fdw, $heap, $what) = @_;
	my $sql = qq{
SELECT setseed(0.5);
WITH q AS (SELECT i, 24.75 + random() * 0.4 AS x, 60.05 + random() * 0.25 AS y,
                  random() * 0.05 AS w, random() * 0.03 AS h, (random() * 3000)::int AS k
             FROM generate_series(1, $n) i)
SELECT count(*) FILTER (WHERE f IS DISTINCT FROM h), count(*) FILTER (WHERE cardinality(h) > 0)
  FROM (SELECT (SELECT coalesce(array_agg(location_id ORDER BY location_id), '{}') FROM ($fdw) f) AS f,
               (SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM ($heap) h) AS h
          FROM q) r};
	my @lines = split /\n/, $node->safe_psql('postgres', $sql);
	my ($wrong, $nonempty) = split /\|/, $lines[-1];
	is($wrong, '0', "$what: $n random queries agree with the heap");
	cmp_ok($nonempty, '>', $n / 4, "$what: and a good share of them return rows ($nonempty of $n)");
}

mismatches(400, q{SELECT location_id FROM trafficdb.locations WHERE geom && ST_MakeEnvelope(q.x, q.y, q.x + q.w, q.y + q.h, 4326)},
	q{SELECT id FROM roads WHERE geom && ST_MakeEnvelope(q.x, q.y, q.x + q.w, q.y + q.h, 4326)}, 'geom && box');
mismatches(100, q{SELECT location_id FROM trafficdb.locations WHERE geom && ST_MakeEnvelope(q.x, q.y, q.x, q.y, 4326)},
	q{SELECT id FROM roads WHERE geom && ST_MakeEnvelope(q.x, q.y, q.x, q.y, 4326)}, 'point boxes');
mismatches(200, q{SELECT location_id FROM trafficdb.locations WHERE ST_Intersects(geom, ST_MakeEnvelope(q.x, q.y, q.x + q.w, q.y + q.h, 4326))},
	q{SELECT id FROM roads WHERE ST_Intersects(geom, ST_MakeEnvelope(q.x, q.y, q.x + q.w, q.y + q.h, 4326))}, 'ST_Intersects');
mismatches(200, q{SELECT location_id FROM trafficdb.locations WHERE location_id = ANY (ARRAY[q.k, q.k + 1, q.k + 100000, q.k, -1]::bigint[])},
	q{SELECT id FROM roads WHERE id = ANY (ARRAY[q.k, q.k + 1, q.k + 100000, q.k, -1]::bigint[])}, 'location_id = ANY (ids)');
mismatches(100, q{SELECT location_id FROM trafficdb.locations WHERE location_id = q.k},
	q{SELECT id FROM roads WHERE id = q.k}, 'location_id = parameter');
mismatches(100, q{SELECT location_id FROM trafficdb.locations WHERE ST_DWithin(geom::geography, ST_MakePoint(q.x, q.y)::geography, q.w * 20000)},
	q{SELECT id FROM roads WHERE ST_DWithin(geom::geography, ST_MakePoint(q.x, q.y)::geography, q.w * 20000)}, 'ST_DWithin on geography');
mismatches(100, q{SELECT location_id FROM trafficdb.locations WHERE ST_DWithin(geom::geography, ST_MakePoint(q.x, q.y)::geography, q.w * 400000, false)},
	q{SELECT id FROM roads WHERE ST_DWithin(geom::geography, ST_MakePoint(q.x, q.y)::geography, q.w * 400000, false)}, 'ST_DWithin on the sphere, radii up to 20 km');
mismatches(50, q{SELECT location_id FROM trafficdb.locations WHERE ST_DWithin(geom::geography, ST_MakeLine(ST_MakePoint(q.x, q.y), ST_MakePoint(q.x + q.w, q.y))::geography, q.h * 10000)},
	q{SELECT id FROM roads WHERE ST_DWithin(geom::geography, ST_MakeLine(ST_MakePoint(q.x, q.y), ST_MakePoint(q.x + q.w, q.y))::geography, q.h * 10000)}, 'ST_DWithin on geography from a line');
mismatches(100, q{SELECT location_id FROM (SELECT location_id FROM trafficdb.locations ORDER BY geom <-> ST_SetSRID(ST_MakePoint(q.x, q.y), 4326), location_id LIMIT 7) k},
	q{SELECT id FROM (SELECT id FROM roads ORDER BY geom <-> ST_SetSRID(ST_MakePoint(q.x, q.y), 4326), id LIMIT 7) k}, 'k nearest');
mismatches(100, q{SELECT location_id FROM trafficdb.locations WHERE geom && ST_MakeEnvelope(q.x, q.y, q.x + q.w, q.y + q.h, 4326) AND speed_kmh > 40},
	q{SELECT id FROM roads WHERE geom && ST_MakeEnvelope(q.x, q.y, q.x + q.w, q.y + q.h, 4326) AND id % 3 = 0 AND id % 90 > 40}, 'box with a traffic filter');

# geography radii from long east-west edges: their arcs bulge poleward past
# the vertices' latitudes, and the roads there are answers (see bulge_edges)
my @bulge_queries = (
	[ 1, 'LINESTRING(1.45 42.5, 1.75 42.5)', 0 ],
	[ 2, 'LINESTRING(1.0 42.6, 2.0 42.6)', 50 ],
	[ 3, 'LINESTRING(1.45 42.4, 1.75 42.4)', 3 ],
	[ 4, 'POLYGON((24.6 59.9, 25.4 59.9, 25.4 60.0, 24.6 60.0, 24.6 59.9))', 0 ],
	[ 5, 'LINESTRING(25.5 59.8, 24.5 59.8)', 20 ],
	[ 6, 'POLYGON((150.0 -35.0, 150.0 -34.9, 150.6 -34.9, 150.6 -35.0, 150.0 -35.0))', 0 ],
	[ 7, 'LINESTRING(150.0 -35.5, 150.6 -35.5)', 10 ],
	[ 8, 'MULTILINESTRING((1.45 42.3, 1.75 42.3), (1.75 42.2, 1.45 42.2))', 0 ],
	[ 9, 'GEOMETRYCOLLECTION(POINT(1.5 41.9), LINESTRING(1.45 42.1, 1.75 42.1))', 0 ],
	[ 10, 'MULTIPOLYGON(((24.6 60.9, 25.4 60.9, 25.4 61.0, 24.6 61.0, 24.6 60.9)), ((24.6 61.1, 25.4 61.1, 25.4 61.2, 24.6 61.2, 24.6 61.1)))', 5 ],
	[ 11, 'LINESTRING(23.0 60.5, 24.8 60.5)', 0 ],
	[ 12, 'LINESTRING(23.0 60.6, 24.8 60.6)', 100 ],
	[ 13, 'GEOMETRYCOLLECTION(MULTIPOINT(1.5 41.8, 1.6 41.8), POLYGON((1.45 42.0, 1.75 42.0, 1.75 41.95, 1.45 41.95, 1.45 42.0)))', 2 ]);
for my $bq (@bulge_queries)
{
	my ($q, $wkt, $d) = @$bq;
	my $edges = $node->safe_psql('postgres', "SELECT count(*) FROM bulge_edges WHERE q = $q");
	for my $spheroid ('true', 'false')
	{
		my $where = "ST_DWithin(geom::geography, 'SRID=4326;$wkt'::geography, $d, $spheroid)";
		my $heap = $node->safe_psql('postgres', "SELECT array_agg(id ORDER BY id) FROM roads WHERE $where");
		my $fdw = $node->safe_psql('postgres', "SELECT array_agg(location_id ORDER BY location_id) FROM trafficdb.locations WHERE $where");
		my $want = join ',', map { my $e = $_; map { 500000 + 100 * $q + 10 * $e + $_ } 0 .. 2 } 0 .. $edges - 1;
		is($heap, "{$want}", "bulge $q (radius $d, spheroid $spheroid): the heap finds the roads inside the bulge");
		is($fdw, $heap, "bulge $q: $wkt, radius $d, spheroid $spheroid: the foreign table finds them too");
	}
}
# still a box query, not a full scan: the roads of the box around the arc
my $bulge_plan = $node->safe_psql('postgres', q{EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF)
  SELECT * FROM trafficdb.locations WHERE ST_DWithin(geom::geography, 'SRID=4326;LINESTRING(1.45 42.5, 1.75 42.5)'::geography, 0)});
like($bulge_plan, qr/Locations Examined: [3-6]\n/, 'a bulging line examines only the roads of its box');

# a join from a route table
$node->safe_psql('postgres', q{CREATE TABLE route AS SELECT (i * 7) % 3100 AS seg FROM generate_series(1, 1000) i});
is($node->safe_psql('postgres', q{SELECT count(*), sum(l.location_id) FROM route r JOIN trafficdb.locations l ON l.location_id = r.seg}),
	$node->safe_psql('postgres', q{SELECT count(*), sum(h.id) FROM route r JOIN roads h ON h.id = r.seg}), 'route join agrees with the heap');

# huge, inverted, empty and NULL boxes
for my $box ("ST_MakeEnvelope(-180, -90, 180, 90, 4326)", "ST_MakeEnvelope(25.2, 60.3, 24.8, 60.1, 4326)",
	"'SRID=4326;LINESTRING EMPTY'::geometry", "NULL::geometry")
{
	is($node->safe_psql('postgres', "SELECT count(*) FROM trafficdb.locations WHERE geom && $box"),
		$node->safe_psql('postgres', "SELECT count(*) FROM roads WHERE geom && $box"), "box $box agrees");
}

# EXPLAIN shows what is pushed down and what was examined
my $plan = $node->safe_psql('postgres', q{EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF)
  SELECT * FROM trafficdb.locations WHERE geom && ST_MakeEnvelope(24.9, 60.15, 24.91, 60.16, 4326)});
like($plan, qr/TrafficDB Pushdown: geom && box2d/, 'EXPLAIN shows the box pushdown');
like($plan, qr/Locations Examined: \d+/, 'EXPLAIN ANALYZE shows the locations examined');
$plan = $node->safe_psql('postgres', q{EXPLAIN (COSTS OFF) SELECT * FROM trafficdb.locations WHERE location_id = 42});
like($plan, qr/TrafficDB Pushdown: location_id = 42/, 'EXPLAIN shows the key pushdown');

$plan = $node->safe_psql('postgres', q{EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF)
  SELECT count(*) FROM route r JOIN trafficdb.locations l ON l.location_id = r.seg});
like($plan, qr/Nested Loop.*Foreign Scan on locations l \(actual rows=1 loops=1000\).*hash lookup per row.*Locations Examined: \d{3,4}\n/s,
	'a route join runs one hash lookup per route row');
unlike($plan, qr/Locations Examined: \d{5,}/, 'and never scans the whole map per row');
$plan = $node->safe_psql('postgres', q{EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF)
  SELECT location_id FROM trafficdb.locations ORDER BY geom <-> 'SRID=4326;POINT(24.95 60.17)'::geometry LIMIT 10});
like($plan, qr/the 10 nearest to .* and their ties\n.*Locations Examined: 1\d\n/s, 'k nearest examines about k locations');
# A constant that is not a point (and a generic plan's parameter) goes nearest
# first, incrementally: in PostGIS's order, measuring as it goes
my $line = q{'SRID=4326;LINESTRING(24.95 60.17, 24.96 60.18)'::geometry};
for my $arg ($line, q{'SRID=4326;POINT EMPTY'::geometry}, q{'SRID=4326;MULTIPOINT(24.95 60.17, 24.96 60.18)'::geometry})
{
	$plan = $node->safe_psql('postgres', "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF)
	  SELECT location_id FROM trafficdb.locations ORDER BY geom <-> $arg LIMIT 5");
	like($plan, qr/TrafficDB Pushdown: nearest first by geom <-> .*\n.*Locations Examined: \d+\n/s, "k nearest to $arg: nearest first");
}
is($node->safe_psql('postgres', "SELECT array_agg(location_id) FROM (SELECT location_id FROM trafficdb.locations ORDER BY geom <-> $line, location_id LIMIT 5) k"),
	$node->safe_psql('postgres', "SELECT array_agg(id) FROM (SELECT id FROM roads ORDER BY geom <-> $line, id LIMIT 5) k"),
	'k nearest to a line agrees with the heap');
my $knn = $node->background_psql('postgres');
$knn->query_safe('SET plan_cache_mode = force_generic_plan');
$knn->query_safe('PREPARE knn(geometry) AS SELECT location_id FROM trafficdb.locations ORDER BY geom <-> $1 LIMIT 5');
like($knn->query_safe(q{EXPLAIN (COSTS OFF) EXECUTE knn('SRID=4326;POINT(24.95 60.17)')}),
	qr/TrafficDB Pushdown: nearest first by geom <-> \$1, until the query has its rows/,
	'a generic plan goes nearest first');
like($knn->query_safe(q{EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE knn('SRID=4326;POINT(24.95 60.17)')}),
	qr/Locations Examined: \d\n/s, 'EXPLAIN ANALYZE of it from a point: a handful measured');
like($knn->query_safe(qq{EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) SELECT * FROM (VALUES ('SRID=4326;POINT(24.95 60.17)'::geometry), ($line),
	  ('SRID=4326;POINT(24.96 60.17)')) v(g), LATERAL (SELECT location_id FROM trafficdb.locations ORDER BY geom <-> v.g LIMIT 3) s}),
	qr/TrafficDB Pushdown: nearest first by geom <-> \$0/s,
	'rescans go nearest first');
$knn->quit;
$plan = $node->safe_psql('postgres', q{EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF)
  SELECT * FROM trafficdb.locations WHERE ST_DWithin(geom::geography, 'SRID=4326;POINT(24.95 60.17)'::geography, 2000)});
like($plan, qr/TrafficDB Pushdown: ST_DWithin\(geom::geography, .*2000.*\) checked in the scan/, 'ST_DWithin on geography is pushed down');
my ($examined) = $plan =~ /Locations Examined: (\d+)/;
my ($by_postgis) = $plan =~ /Radius Decided by PostGIS: (\d+)/;
cmp_ok($by_postgis, '<', $examined / 4, "PostGIS decides only the rows near the circle ($by_postgis of $examined)");
$plan = $node->safe_psql('postgres', q{EXPLAIN (COSTS OFF)
  SELECT * FROM trafficdb.locations WHERE ST_DWithin(geom, 'SRID=4326;POINT(24.95 60.17)'::geometry, 0.01)});
like($plan, qr/TrafficDB Pushdown: geom && ST_Expand\(box2d/, 'ST_DWithin on geometry is pushed down');
for my $bad ("-1", "NULL")
{
	my ($r, $o, $e) = $node->psql('postgres', "SELECT count(*) FROM trafficdb.locations WHERE ST_DWithin(geom::geography, 'SRID=4326;POINT(24.95 60.17)'::geography, $bad)");
	my ($hr, $ho, $he) = $node->psql('postgres', "SELECT count(*) FROM roads WHERE ST_DWithin(geom::geography, 'SRID=4326;POINT(24.95 60.17)'::geography, $bad)");
	is("$o|$e", "$ho|$he", "radius $bad: same answer or error as the heap");
}

# one generation per transaction under REPEATABLE READ
my $rr = $node->background_psql('postgres');
$rr->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
my $g1 = $rr->query_safe('SELECT max(generation) || \'|\' || max(speed_kmh) FROM trafficdb.locations WHERE location_id = 3');
$node->safe_psql('postgres', 'INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (3, 77)');
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
is($rr->query_safe('SELECT max(generation) || \'|\' || max(speed_kmh) FROM trafficdb.locations WHERE location_id = 3'),
	$g1, 'a publish in the middle of a REPEATABLE READ transaction changes nothing it sees');
$rr->query_safe('COMMIT');
like($rr->query_safe('SELECT max(speed_kmh) FROM trafficdb.locations WHERE location_id = 3'), qr/^77$/,
	'the next transaction sees the new generation');
$rr->quit;

my ($ret, $out, $err);

# a statement that fails inside a savepoint does not pin its version for the rest of the transaction
my $sp = $node->background_psql('postgres', on_error_stop => 0);
$sp->query('BEGIN');
$sp->query('SAVEPOINT s; SELECT count(*) FROM trafficdb.locations WHERE 1 / (location_id - location_id) > 0; ROLLBACK TO s');
$node->safe_psql('postgres', 'INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (3, 11)');
my $g_new = $node->safe_psql('postgres', 'SELECT trafficdb.publish()');
my ($g_seen) = $sp->query('SELECT max(generation) FROM trafficdb.locations WHERE location_id = 3');
is($g_seen, $g_new,
	'after a failed statement rolled back to a savepoint, READ COMMITTED still sees each new generation');
$sp->query('COMMIT');
$sp->quit;

# a cursor keeps its version alive across statements and publications
my $cur = $node->background_psql('postgres');
$cur->query_safe('BEGIN');
$cur->query_safe('DECLARE c CURSOR FOR SELECT generation, location_id FROM trafficdb.locations ORDER BY location_id');
my $first = $cur->query_safe('FETCH 5 FROM c');
my ($cgen) = $first =~ /^(\d+)\|/;
for my $i (1 .. 3)
{
	$node->safe_psql('postgres', "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (6, $i)");
	$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
}
my $later = $cur->query_safe('FETCH 2000 FROM c');
my %gens = map { (split /\|/)[0] => 1 } split /\n/, $later;
is(join(',', keys %gens), $cgen, 'every row of the cursor comes from the generation it started with');
ok($node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status') > $cgen, 'while publication went on');
$cur->query_safe('CLOSE c');
$cur->query_safe('COMMIT');
$cur->quit;

# GDAL, as GIS clients really query: a spatial filter, and an export to GeoJSON
my $connstr = 'PG:host=' . $node->host . ' port=' . $node->port . ' dbname=postgres';
my @spat = (24.9, 60.15, 24.95, 60.18);
my $heap_count = $node->safe_psql('postgres', "SELECT count(*) FROM roads WHERE geom && ST_MakeEnvelope(@{[join ', ', @spat]}, 4326)");
my ($ogr_out, $ogr_err) = run_command([ 'ogrinfo', '-ro', '-q', '-al', '-spat', @spat, $connstr, 'trafficdb.locations' ]);
my $features = () = $ogr_out =~ /OGRFeature\(/g;
is($features, $heap_count, "ogrinfo -spat returns the features of the box ($heap_count)");
my $json = $PostgreSQL::Test::Utils::tmp_check . '/locations.geojson';
run_command([ 'ogr2ogr', '-f', 'GeoJSON', '-spat', @spat, $json, $connstr, 'trafficdb.locations' ]);
my $geojson = slurp_file($json);
my $exported = () = $geojson =~ /"type": "Feature"/g;
is($exported, $heap_count, 'ogr2ogr exports the same features to GeoJSON');
my ($gdal_sql) = slurp_file($node->logfile) =~ /CURSOR for (SELECT [^\n]* FROM "trafficdb"\."locations" WHERE "geom" && [^\n]*)/;
ok($gdal_sql, 'GDAL sends its spatial filter as geom && box');
like($node->safe_psql('postgres', "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $gdal_sql"),
	qr/TrafficDB Pushdown: geom && box2d.*\n.*Locations Examined: $heap_count\n/,
	"and the wrapper pushes GDAL's query down: it examines only the $heap_count locations of the box");

# vector tiles and GeoJSON for map clients
sub tile_of { my ($lon, $lat, $z) = @_; my $n = 2**$z; my $r = $lat * 3.14159265358979 / 180;
	return (int(($lon + 180) / 360 * $n), int((1 - log(sin($r) / cos($r) + 1 / cos($r)) / 3.14159265358979) / 2 * $n)); }
my ($tx, $ty) = tile_of(24.95, 60.17, 12);
cmp_ok($node->safe_psql('postgres', "SELECT length(trafficdb.tile(12, $tx, $ty))"), '>', 1000, 'a vector tile over the data has features');
is($node->safe_psql('postgres', 'SELECT length(trafficdb.tile(12, 0, 0))'), '0', 'a tile far away is empty');
is($node->safe_psql('postgres', "SELECT json_array_length(trafficdb.geojson(@{[join ', ', @spat]})->'features')"), $heap_count,
	'trafficdb.geojson() returns the features of the box');

# IMPORT FOREIGN SCHEMA gives the same table in another schema
$node->safe_psql('postgres', 'CREATE SCHEMA gis; IMPORT FOREIGN SCHEMA trafficdb FROM SERVER trafficdb INTO gis');
is($node->safe_psql('postgres', 'SELECT count(*) FROM gis.locations'),
	$node->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.locations'), 'IMPORT FOREIGN SCHEMA');
is($node->safe_psql('postgres', q{CREATE SCHEMA gis2; IMPORT FOREIGN SCHEMA trafficdb EXCEPT (locations) FROM SERVER trafficdb INTO gis2;
  SELECT count(*) FROM pg_class WHERE relnamespace = 'gis2'::regnamespace}), '0', 'IMPORT ... EXCEPT (locations) imports nothing');
($ret, $out, $err) = $node->psql('postgres', 'IMPORT FOREIGN SCHEMA public FROM SERVER trafficdb INTO gis2');
like($err, qr/trafficdb has no schema "public"/, 'a wrong remote schema is named');

# bad input: wrong SRIDs and non-finite coordinates give PostGIS's own answer or error, as on the heap
for my $q ("geom && ST_MakeEnvelope(24.9, 60.1, 25, 60.2, 3857)",
	"geom && 'SRID=4326;POINT(NaN NaN)'::geometry",
	"geom && ST_MakeEnvelope('Infinity', 60.1, 25, 60.2, 4326)",
	"ST_DWithin(geom, 'SRID=4326;POINT(24.95 60.17)'::geometry, 'NaN')",
	"ST_Intersects(geom, 'SRID=4326;POLYGON EMPTY'::geometry)",
	"ST_DWithin(geom::geography, 'SRID=4326;POINT(24.95 60.17)'::geography, 500, NULL)",
	"geom && ST_MakeEnvelope(24.12345695495605469, 60.1, 24.9, 60.2, 4326)")
{
	my ($r1, $o1, $e1) = $node->psql('postgres', "SELECT count(*) FROM trafficdb.locations WHERE $q");
	my ($r2, $o2, $e2) = $node->psql('postgres', "SELECT count(*) FROM roads WHERE $q");
	$e1 =~ s/^psql:<stdin>:\d+: //mg;
	$e2 =~ s/^psql:<stdin>:\d+: //mg;
	is("$o1|$e1", "$o2|$e2", "bad input $q: same as the heap");
}

# bad definitions are refused with the column named
($ret, $out, $err) = $node->psql('postgres', q{CREATE FOREIGN TABLE bad (location_id bigint, colour text) SERVER trafficdb;
  SELECT * FROM bad});
like($err, qr/column "colour" of foreign table bad is not a trafficdb location column/, 'unknown column named');
($ret, $out, $err) = $node->psql('postgres', q{CREATE FOREIGN TABLE bad2 (location_id int) SERVER trafficdb; SELECT * FROM bad2});
like($err, qr/column "location_id" of foreign table bad2 has type integer; trafficdb provides bigint/, 'wrong type named');

$node->stop;
done_testing();
