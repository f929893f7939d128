# t/018_knn.pl: nearest first, whatever the query adds (issue 14).  ORDER BY
# geom <-> p, geom::geography <-> p, geom <#> p, from points, lines and
# polygons, with a filter (every map matcher filters road classes), with a
# generic plan's LIMIT $1, and per outer row of a LATERAL join: the rows
# equal those of a heap with GiST indexes on geom and geom::geography
# (compared by distance, so that ties may come in any order), and the scan
# measures about as many locations as it returns instead of all of them.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('knn');
$node->safe_psql('postgres', q{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
SELECT setseed(0.5);
CREATE TABLE roads AS SELECT i::bigint AS id,
  ST_SetSRID(ST_MakeLine(ST_MakePoint(x, y), ST_MakePoint(x + dx, y + dy)), 4326) AS geom,
  (ARRAY['primary', 'footway', 'residential', 'service'])[1 + i % 4] AS road_class
  FROM (SELECT i, 24.8 + random() * 0.3 AS x, 60.1 + random() * 0.15 AS y,
               (random() - 0.5) * 0.004 AS dx, (random() - 0.5) * 0.002 AS dy
          FROM generate_series(1, 20000) i) s;
-- duplicates and zero-length segments: ties
INSERT INTO roads SELECT 20000 + id, geom, road_class FROM roads WHERE id <= 200;
INSERT INTO roads SELECT 30000 + id, ST_MakeLine(ST_StartPoint(geom), ST_StartPoint(geom)), road_class FROM roads WHERE id <= 200;
CREATE INDEX ON roads USING gist (geom);
CREATE INDEX ON roads USING gist ((geom::geography));
ANALYZE roads;
SELECT trafficdb.load_map('roads', 'id', 'geom', 'road_class');
});

# Each form: N seeded random queries, the foreign table against the heap.
$node->safe_psql('postgres', q{
CREATE FUNCTION knn_diff(f text, n int, lim int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE p geometry; q geometry; a text; b text; m int := 0; qs text;
BEGIN
  PERFORM setseed(0.25);
  FOR i IN 1..n LOOP
    p := ST_SetSRID(ST_MakePoint(24.75 + random() * 0.4, 60.05 + random() * 0.25), 4326);
    q := CASE WHEN f IN ('line', 'geogline') THEN ST_MakeLine(p, ST_Translate(p, random() * 0.05 - 0.025, random() * 0.02 - 0.01))
              WHEN f = 'poly' THEN ST_Buffer(p, random() * 0.01, 4) ELSE p END;
    qs := CASE WHEN f IN ('geog', 'geogline') THEN 'geom::geography <-> $1::geography'
               WHEN f = 'box' THEN 'geom <#> $1' ELSE 'geom <-> $1' END;
    EXECUTE format('SELECT string_agg(round((%s)::numeric, 9)::text, '','' ORDER BY o) FROM (SELECT geom, row_number() OVER () o FROM (SELECT geom FROM trafficdb.locations WHERE road_class NOT IN (''footway'', ''service'') ORDER BY %s LIMIT %s) s) t', qs, qs, lim) INTO a USING q;
    EXECUTE format('SELECT string_agg(round((%s)::numeric, 9)::text, '','' ORDER BY o) FROM (SELECT geom, row_number() OVER () o FROM (SELECT geom FROM roads WHERE road_class NOT IN (''footway'', ''service'') ORDER BY %s LIMIT %s) s) t', qs, qs, lim) INTO b USING q;
    IF a IS DISTINCT FROM b THEN m := m + 1; RAISE NOTICE '% %: % vs %', f, ST_AsText(q), a, b; END IF;
  END LOOP;
  RETURN m;
END $$;
});
for my $f ('deg', 'geog', 'box', 'line', 'poly', 'geogline')
{
	for my $lim (1, 7, 60)
	{
		is($node->safe_psql('postgres', "SELECT knn_diff('$f', 150, $lim)"), '0',
			"$f, filtered, LIMIT $lim: 150 random queries equal the heap's (by distance)");
	}
}

# Examined: about as many as returned, never the map.
my %forms = (
	'degrees' => q{geom <-> ST_SetSRID(ST_MakePoint(24.95, 60.17), 4326)},
	'metres' => q{geom::geography <-> ST_MakePoint(24.95, 60.17)::geography},
	'box distance' => q{geom <#> ST_SetSRID(ST_MakePoint(24.95, 60.17), 4326)},
	# the diagonal's box is the whole map: the bound measures from the line itself
	'degrees from a line across the map' => q{geom <-> ST_SetSRID(ST_MakeLine(ST_MakePoint(24.8, 60.1), ST_MakePoint(25.1, 60.25)), 4326)},
);
for my $name (sort keys %forms)
{
	my $plan = $node->safe_psql('postgres', "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF)
	  SELECT location_id FROM trafficdb.locations WHERE road_class NOT IN ('footway', 'service') ORDER BY $forms{$name} LIMIT 10");
	like($plan, qr/nearest first by/, "$name: the scan is nearest first");
	my ($examined) = $plan =~ /Locations Examined: (\d+)/;
	# (from the line: the roads it crosses are all at distance 0, and all measured)
	cmp_ok($examined // 1e9, '<=', $name =~ /line/ ? 400 : 60, "$name: 10 rows with a filter measured $examined locations, not 20,400");
}

# A generic plan's LIMIT $1; a LATERAL join (map matching of many points at once).
$node->safe_psql('postgres', q{
CREATE TABLE gps AS SELECT g, ST_SetSRID(ST_MakePoint(24.8 + random() * 0.3, 60.1 + random() * 0.15), 4326) AS p
  FROM generate_series(1, 200) g;
});
my $generic = $node->safe_psql('postgres', q{
SET plan_cache_mode = force_generic_plan;
PREPARE k(geometry, int) AS SELECT location_id FROM trafficdb.locations WHERE road_class <> 'footway' ORDER BY geom <-> $1 LIMIT $2;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE k(ST_SetSRID(ST_MakePoint(24.9, 60.17), 4326), 4);
});
like($generic, qr/nearest first by geom <-> \$1/, 'a generic plan with LIMIT $1 is nearest first');
like($generic, qr/Locations Examined: ([1-9]|1\d)\n/, 'and measures a handful of locations');
my $q = q{SELECT g, round((geom <-> p)::numeric, 9) FROM gps, LATERAL (SELECT geom FROM %s WHERE road_class NOT IN ('footway', 'service') ORDER BY geom <-> gps.p LIMIT 1) l ORDER BY g};
is($node->safe_psql('postgres', sprintf($q, 'trafficdb.locations')), $node->safe_psql('postgres', sprintf($q, 'roads')),
	'map matching 200 points in a LATERAL join equals the heap');
my $lateral = $node->safe_psql('postgres', 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ' . sprintf($q, 'trafficdb.locations'));
my ($lex) = $lateral =~ /Locations Examined: (\d+)/;
cmp_ok($lex // 1e9, '<=', 200 * 20, "the LATERAL join measured $lex locations for 200 points");

# NULL query: every distance NULL, all rows, no error.
is($node->safe_psql('postgres', q{SELECT count(*) FROM (SELECT location_id FROM trafficdb.locations ORDER BY geom <-> NULL::geometry LIMIT 5) s}),
	'5', 'a NULL query point gives rows (all distances NULL), not an error');
$node->stop;
done_testing();
