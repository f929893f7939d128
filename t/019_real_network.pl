# t/019_real_network.pl: the query forms of issue 14 on a real road network
# (the Helsinki extract shipped in data/, imported with osm2pgsql as the demo
# does), against a heap copy with GiST indexes on geom and geom::geography:
# nearest first with a class filter in degrees and in metres, a spatial join,
# ST_Within a polygon, ST_DWithin from lines (the geodesic bulge), ORs and id
# ranges; nearest first in metres from lines and polygons, and within id
# ranges (issue 32: rows and distances equal, ties by id).  Seeded, hundreds of queries per form, 0 differences; the examined
# counts stay far below the map's size.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $pbf = 'data/helsinki.osm.pbf';
plan skip_all => "$pbf or osm2pgsql missing" unless -f $pbf && system('osm2pgsql --version >/dev/null 2>&1') == 0;

my $node = tdb_node('realnet');
$node->safe_psql('postgres', 'CREATE EXTENSION postgis');
my $host = $node->host;
my $port = $node->port;
system('osm2pgsql', '--output=flex', '--style=scripts/roads.lua', '--log-level=warn', '-H', $host, '-P', $port,
	'-U', tdb_superuser($node), '-d', 'postgres', $pbf) == 0 or die 'osm2pgsql failed';
$node->safe_psql('postgres', q{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb;
ALTER TABLE roads ADD PRIMARY KEY (osm_id);
SELECT trafficdb.load_map('roads', 'osm_id', 'geom', 'highway', 'name', 'maxspeed', 'oneway');
-- the heap baseline, with the foreign table's column names
CREATE TABLE heap AS SELECT osm_id AS location_id, geom, highway AS road_class FROM roads;
ALTER TABLE heap ADD PRIMARY KEY (location_id);
CREATE INDEX ON heap USING gist (geom);
CREATE INDEX ON heap USING gist ((geom::geography));
ANALYZE heap;
});
my $n = $node->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.locations');
cmp_ok($n, '>', 2000, "the Helsinki extract has $n road segments");
my ($xmin, $ymin, $xmax, $ymax) = split /\|/, $node->safe_psql('postgres',
	'SELECT ST_XMin(e), ST_YMin(e), ST_XMax(e), ST_YMax(e) FROM (SELECT ST_Extent(geom) e FROM heap) s');

# diff(form, n): random queries comparing the foreign table with the heap
$node->safe_psql('postgres', qq{
CREATE FUNCTION diff(f text, n int) RETURNS int LANGUAGE plpgsql AS \$\$
DECLARE p geometry; q geometry; a text; b text; m int := 0; sql text; lo bigint;
BEGIN
  PERFORM setseed(0.125);
  FOR i IN 1..n LOOP
    p := ST_SetSRID(ST_MakePoint($xmin + random() * ($xmax - $xmin), $ymin + random() * ($ymax - $ymin)), 4326);
    SELECT location_id INTO lo FROM heap ORDER BY random() LIMIT 1;
    sql := CASE f
      WHEN 'mm_deg' THEN 'SELECT string_agg(round((geom <-> \$1)::numeric, 10)::text, '','') FROM (SELECT geom FROM %s WHERE road_class NOT IN (''footway'', ''cycleway'', ''service'', ''path'', ''steps'') ORDER BY geom <-> \$1 LIMIT 3) s'
      WHEN 'mm_m' THEN 'SELECT string_agg(round((geom::geography <-> \$1::geography)::numeric, 6)::text, '','') FROM (SELECT geom FROM %s WHERE road_class NOT IN (''footway'', ''cycleway'', ''service'', ''path'', ''steps'') ORDER BY geom::geography <-> \$1::geography LIMIT 3) s'
      WHEN 'within' THEN 'SELECT string_agg(id::text, '','' ORDER BY id) FROM (SELECT %s AS id FROM %s WHERE ST_Within(geom, ST_Buffer(\$1, 0.004, 6))) s'
      WHEN 'dwithin_line' THEN 'SELECT string_agg(id::text, '','' ORDER BY id) FROM (SELECT %s AS id FROM %s WHERE ST_DWithin(geom::geography, ST_MakeLine(\$1, ST_Translate(\$1, 0.08, 0.0005))::geography, 15)) s'
      WHEN 'or_boxes' THEN 'SELECT string_agg(id::text, '','' ORDER BY id) FROM (SELECT %s AS id FROM %s WHERE geom && ST_Expand(\$1, 0.002) OR geom && ST_Expand(ST_Translate(\$1, 0.01, 0.005), 0.001)) s'
      WHEN 'mm_line' THEN 'SELECT string_agg(round((geom::geography <-> \$1::geography)::numeric, 6)::text, '','') FROM (SELECT geom FROM %s ORDER BY geom::geography <-> \$1::geography LIMIT 3) s'
      WHEN 'mm_poly' THEN 'SELECT string_agg(round((geom::geography <-> \$1::geography)::numeric, 6)::text, '','') FROM (SELECT geom FROM %s WHERE road_class NOT IN (''footway'', ''cycleway'', ''service'', ''path'', ''steps'') ORDER BY geom::geography <-> \$1::geography LIMIT 5) s'
      WHEN 'knn_id_range' THEN 'SELECT string_agg(id::text || '':'' || round(d::numeric, 10)::text, '','' ORDER BY d, id) FROM (SELECT %s AS id, geom <-> \$1 AS d FROM %s WHERE %3\$s BETWEEN \$2 AND \$2 + 3000000 ORDER BY geom <-> \$1, %3\$s LIMIT 10) s'
      WHEN 'knn_id_above' THEN 'SELECT string_agg(id::text || '':'' || round(d::numeric, 10)::text, '','' ORDER BY d, id) FROM (SELECT %s AS id, geom <-> \$1 AS d FROM %s WHERE %3\$s > \$2 ORDER BY geom <-> \$1, %3\$s LIMIT 10) s'
      WHEN 'id_range' THEN 'SELECT string_agg(id::text, '','' ORDER BY id) FROM (SELECT %s AS id FROM %s WHERE %s BETWEEN \$2 AND \$2 + 100000) s'
    END;
    IF f = 'mm_line' THEN
      q := ST_MakeLine(p, ST_Translate(p, random() * 0.04 - 0.02, random() * 0.02 - 0.01));
    ELSIF f = 'mm_poly' THEN
      q := ST_Buffer(p, random() * 0.004, 3);
    ELSIF f = 'knn_id_above' THEN
      -- past the largest id half the time: no row
      IF random() < 0.5 THEN SELECT max(location_id) INTO lo FROM heap; END IF;
    END IF;
    IF f IN ('mm_line', 'mm_poly') THEN
      EXECUTE format(sql, 'trafficdb.locations') INTO a USING q;
      EXECUTE format(sql, 'heap') INTO b USING q;
    ELSIF f IN ('mm_deg', 'mm_m') THEN
      EXECUTE format(sql, 'trafficdb.locations') INTO a USING p;
      EXECUTE format(sql, 'heap') INTO b USING p;
    ELSIF f IN ('id_range', 'knn_id_range', 'knn_id_above') THEN
      EXECUTE format(sql, 'location_id', 'trafficdb.locations', 'location_id') INTO a USING p, lo;
      EXECUTE format(sql, 'location_id', 'heap', 'location_id') INTO b USING p, lo;
    ELSE
      EXECUTE format(sql, 'location_id', 'trafficdb.locations') INTO a USING p;
      EXECUTE format(sql, 'location_id', 'heap') INTO b USING p;
    END IF;
    IF a IS DISTINCT FROM b THEN m := m + 1; RAISE NOTICE '% %: % vs %', f, ST_AsText(p), a, b; END IF;
  END LOOP;
  RETURN m;
END \$\$;
});
for my $f ('mm_deg', 'mm_m', 'within', 'dwithin_line', 'or_boxes', 'id_range', 'mm_line', 'mm_poly', 'knn_id_range', 'knn_id_above')
{
	is($node->safe_psql('postgres', "SELECT diff('$f', 300)"), '0', "$f: 300 random queries on Helsinki equal the heap");
}

# issue 32: nearest first from a geography line or polygon, and within an id range,
# examine about the rows they return, not the map
my $cx = ($xmin + $xmax) / 2;
my $cy = ($ymin + $ymax) / 2;
# a range of ids around one of the roads near the centre
my ($mid) = $node->safe_psql('postgres', "SELECT location_id - 1000000 FROM heap ORDER BY geom <-> ST_SetSRID(ST_MakePoint($cx, $cy), 4326) OFFSET 20 LIMIT 1");
my %few = (
	'geography from a line' => "ORDER BY geom::geography <-> ST_MakeLine(ST_MakePoint($cx, $cy), ST_MakePoint($cx + 0.02, $cy + 0.01))::geography LIMIT 3",
	'geography from a polygon' => "WHERE road_class NOT IN ('footway', 'cycleway', 'service', 'path', 'steps') ORDER BY geom::geography <-> ST_Buffer(ST_SetSRID(ST_MakePoint($cx, $cy), 4326), 0.002, 3)::geography LIMIT 5",
	'an id range' => "WHERE location_id BETWEEN $mid AND $mid + 3000000 ORDER BY geom <-> ST_SetSRID(ST_MakePoint($cx, $cy), 4326) LIMIT 10",
	'ids above the largest' => "WHERE location_id > (SELECT max(location_id) FROM heap) ORDER BY geom <-> ST_SetSRID(ST_MakePoint($cx, $cy), 4326) LIMIT 10",
);
for my $name (sort keys %few)
{
	my $plan = $node->safe_psql('postgres', "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) SELECT location_id FROM trafficdb.locations $few{$name}");
	my ($rows) = $plan =~ /Foreign Scan on locations \(actual rows=(\d+)/;
	my ($examined) = $plan =~ /Locations Examined: (\d+)/;
	like($plan, qr/nearest first by/, "$name: nearest first");
	cmp_ok($examined // 1e9, '<=', 10 * ($rows // 0) + 30, "$name: examined $examined locations for " . ($rows // '?') . ' rows');
}

# a spatial join: 300 GPS-like points, ST_DWithin 30 m on geography
$node->safe_psql('postgres', qq{
SELECT setseed(0.5);
CREATE TABLE gps AS SELECT g, ST_SetSRID(ST_MakePoint($xmin + random() * ($xmax - $xmin), $ymin + random() * ($ymax - $ymin)), 4326) AS p
  FROM generate_series(1, 300) g;
ANALYZE gps;
});
my $j = q{SELECT g, %s FROM gps JOIN %s l ON ST_DWithin(l.geom::geography, gps.p::geography, 30) ORDER BY 1, 2};
is($node->safe_psql('postgres', sprintf($j, 'location_id', 'trafficdb.locations')),
	$node->safe_psql('postgres', sprintf($j, 'location_id', 'heap')), 'a 300-point ST_DWithin join equals the heap');
my $plan = $node->safe_psql('postgres', 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ' . sprintf($j, 'location_id', 'trafficdb.locations'));
my ($ex) = $plan =~ /Locations Examined: (\d+)/;
cmp_ok($ex // 1e12, '<', 300 * $n / 50, "the join examined $ex locations, not 300 x $n");

# map matching as a LATERAL join, nearest car road per point
my $mm = q{SELECT g, round((geom <-> p)::numeric, 10) FROM gps, LATERAL (SELECT geom FROM %s
  WHERE road_class NOT IN ('footway', 'cycleway', 'service', 'path', 'steps') ORDER BY geom <-> gps.p LIMIT 1) l ORDER BY g};
is($node->safe_psql('postgres', sprintf($mm, 'trafficdb.locations')), $node->safe_psql('postgres', sprintf($mm, 'heap')),
	'map matching 300 points equals the heap');
# per outer row: an id range and a geography line from each GPS point (issue 32), rows equal
my $lat = q{SELECT g, l.location_id, round(d::numeric, 6) FROM gps CROSS JOIN LATERAL (SELECT location_id, geom <-> gps.p AS d FROM %s
  WHERE location_id BETWEEN gps.g * 2000000 AND gps.g * 2000000 + 40000000 ORDER BY geom <-> gps.p, location_id LIMIT 3) l ORDER BY 1, 3, 2};
is($node->safe_psql('postgres', sprintf($lat, 'trafficdb.locations')), $node->safe_psql('postgres', sprintf($lat, 'heap')),
	'nearest within an id range per outer row (LATERAL) equals the heap');
$lat = q{SELECT g, round(d::numeric, 6) FROM gps CROSS JOIN LATERAL (SELECT geom::geography <-> ST_MakeLine(gps.p, ST_Translate(gps.p, 0.01, 0.004))::geography AS d
  FROM %s ORDER BY geom::geography <-> ST_MakeLine(gps.p, ST_Translate(gps.p, 0.01, 0.004))::geography LIMIT 2) l ORDER BY 1, 2};
is($node->safe_psql('postgres', sprintf($lat, 'trafficdb.locations')), $node->safe_psql('postgres', sprintf($lat, 'heap')),
	'nearest to a geography line per outer row (LATERAL) equals the heap');
$plan = $node->safe_psql('postgres', 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ' . sprintf($mm, 'trafficdb.locations'));
($ex) = $plan =~ /Locations Examined: (\d+)/;
cmp_ok($ex // 1e12, '<', 300 * 50, "map matching examined $ex locations for 300 points");
$node->stop;
done_testing();
