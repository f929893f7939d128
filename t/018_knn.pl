# t/018_knn.pl: nearest first, whatever the query adds (issue 14).  ORDER BY
# geom <-> p, geom::geography <-> p, geom <#> p, from points, lines and
# polygons, with a filter (every map matcher filters road classes), with a
# generic plan's LIMIT $1, and per outer row of a LATERAL join: the rows
# equal those of a heap with GiST indexes on geom and geom::geography
# (compared by distance, so that ties may come in any order), and the scan
# measures about as many locations as it returns instead of all of them;
# from geography lines and polygons and within id ranges too (issue 32),
# and hostile shapes and id bounds give the heap's answer.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use lib 't';
use TdbTest;

my $node = tdb_node('knn');
# duplicates and zero-length segments: ties
tdb_random_roads($node, q{
INSERT INTO roads SELECT 20000 + id, geom, road_class FROM roads WHERE id <= 200;
INSERT INTO roads SELECT 30000 + id, ST_MakeLine(ST_StartPoint(geom), ST_StartPoint(geom)), road_class FROM roads WHERE id <= 200;
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

# Issue 32: from a geography line or polygon, and within an id range, the scan
# measures about what it returns; hostile queries give the heap's rows (by
# distance, ties in any order) and never crash.
for my $form (
	[ 'geography from a line', q{ORDER BY geom::geography <-> ST_MakeLine(ST_MakePoint(24.8, 60.1), ST_MakePoint(25.1, 60.25))::geography LIMIT 10}, 400 ],
	[ 'geography from a polygon', q{ORDER BY geom::geography <-> ST_Buffer(ST_SetSRID(ST_MakePoint(24.95, 60.17), 4326), 0.001, 3)::geography LIMIT 10}, 100 ],
	[ 'an id range', q{AND location_id BETWEEN 5000 AND 5300 ORDER BY geom <-> ST_SetSRID(ST_MakePoint(24.95, 60.17), 4326) LIMIT 10}, 100 ],
	[ 'ids past the largest', q{AND location_id > 30200 ORDER BY geom <-> ST_SetSRID(ST_MakePoint(24.95, 60.17), 4326) LIMIT 10}, 0 ],
	[ 'a wide id range', q{AND location_id < 15000 ORDER BY geom::geography <-> ST_MakePoint(24.95, 60.17)::geography LIMIT 10}, 60 ])
{
	my ($name, $tail, $max) = @$form;
	my $plan = $node->safe_psql('postgres', "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF)
	  SELECT location_id FROM trafficdb.locations WHERE road_class NOT IN ('footway', 'service') $tail");
	like($plan, qr/nearest first by/, "$name: the scan is nearest first");
	my ($examined) = $plan =~ /Locations Examined: (\d+)/;
	cmp_ok($examined // 1e9, '<=', $max, "$name: measured $examined locations");
}
$node->safe_psql('postgres', q{
CREATE FUNCTION hostile(d text, w text, g text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE a text; b text; e1 text; e2 text;
  sql text := 'SELECT string_agg(coalesce(round(d::numeric, 9)::text, ''-''), '','' ORDER BY o) FROM (SELECT %2$s d, row_number() OVER () o FROM (SELECT geom FROM %1$s WHERE %3$s ORDER BY %2$s LIMIT 12) s) t';
BEGIN
  d := replace(d, '$g', g);
  BEGIN EXECUTE format(sql, 'trafficdb.locations', d, w) INTO a; EXCEPTION WHEN others THEN e1 := SQLERRM; END;
  BEGIN EXECUTE format(sql, 'roads', d, replace(w, 'location_id', 'id')) INTO b; EXCEPTION WHEN others THEN e2 := SQLERRM; END;
  RETURN CASE WHEN a IS NOT DISTINCT FROM b AND e1 IS NOT DISTINCT FROM e2 THEN 'same' ELSE format('%s / %s vs %s / %s', a, e1, b, e2) END;
END $$;
});
my $geog = 'geom::geography <-> $g::geography';
for my $h (
	[ $geog, 'true', 'NULL' ],
	[ $geog, 'true', q{'LINESTRING EMPTY'} ],
	[ $geog, 'true', q{'POLYGON EMPTY'} ],
	[ $geog, 'true', q{'GEOMETRYCOLLECTION(POINT(24.9 60.1), LINESTRING(24.8 60.2, 25 60.22))'} ],
	[ $geog, 'true', q{'MULTILINESTRING((24.8 60.2, 25 60.22), (24.9 60.1, 24.91 60.1))'} ],
	[ $geog, 'true', q{'POLYGON((-170 -80, 170 -80, 170 80, -170 80, -170 -80))'} ],
	[ $geog, 'true', q{'POLYGON((20 55, 30 55, 30 65, 20 65, 20 55))'} ],
	[ $geog, 'true', q{'POLYGON((24.9 60.15, 25 60.15, 25 60.2, 24.9 60.2, 24.9 60.15), (24.92 60.16, 24.98 60.16, 24.98 60.19, 24.92 60.19, 24.92 60.16))'} ],
	[ $geog, 'true', q{'POLYGON((0 89, 120 89, -120 89, 0 89))'} ],
	[ $geog, 'true', q{'LINESTRING(179 60, -179 60.5)'} ],
	[ $geog, 'true', q{'LINESTRING(24.9 60.1, -155.1 -60.1)'} ],
	[ $geog, 'true', q{'LINESTRING(24.9 60.1, 24.9 60.1, 24.95 60.15)'} ],
	[ 'geom <-> $g', 'location_id BETWEEN 9223372036854775806 AND 9223372036854775807', q{'SRID=4326;POINT(24.95 60.17)'::geometry} ],
	[ 'geom <-> $g', 'location_id BETWEEN -9223372036854775808 AND -9223372036854775807', q{'SRID=4326;POINT(24.95 60.17)'::geometry} ],
	[ 'geom <-> $g', 'location_id > 9223372036854775807', q{'SRID=4326;POINT(24.95 60.17)'::geometry} ],
	[ 'geom <-> $g', 'location_id < -9223372036854775808', q{'SRID=4326;POINT(24.95 60.17)'::geometry} ],
	[ 'geom <-> $g', 'location_id >= -9223372036854775808', q{'SRID=4326;POINT(24.95 60.17)'::geometry} ],
	[ 'geom <-> $g', 'location_id BETWEEN 20000 AND 10', q{'SRID=4326;POINT(24.95 60.17)'::geometry} ],
	[ 'geom <-> $g', 'location_id BETWEEN NULL AND 10', q{'SRID=4326;POINT(24.95 60.17)'::geometry} ],
	[ 'geom <-> $g', 'location_id BETWEEN 100 AND 105', q{NULL::geometry} ],
	[ $geog, 'location_id BETWEEN 100 AND 160', q{'LINESTRING(24.9 60.1, 24.95 60.15)'} ])
{
	my ($d, $w, $g) = @$h;
	is($node->safe_psql('postgres', "SELECT hostile(\$d\$$d\$d\$, \$w\$$w\$w\$, \$g\$$g\$g\$)"), 'same', "hostile: ORDER BY $d WHERE $w, g = $g: the heap's answer");
}

# a generic plan: the range and the limit are parameters
my $gen = $node->safe_psql('postgres', q{
SET plan_cache_mode = force_generic_plan;
PREPARE r(bigint, bigint, int) AS SELECT location_id FROM trafficdb.locations WHERE location_id BETWEEN $1 AND $2
  ORDER BY geom <-> ST_SetSRID(ST_MakePoint(24.95, 60.17), 4326), location_id LIMIT $3;
EXECUTE r(1000, 1400, 5);
EXECUTE r(30001, 9223372036854775807, 5);
EXECUTE r(500, 400, 5);
});
is($gen, $node->safe_psql('postgres', q{
SELECT location_id FROM (SELECT id AS location_id, geom FROM roads WHERE id BETWEEN 1000 AND 1400
  ORDER BY geom <-> ST_SetSRID(ST_MakePoint(24.95, 60.17), 4326), id LIMIT 5) s;
SELECT id FROM roads WHERE id BETWEEN 30001 AND 9223372036854775807 ORDER BY geom <-> ST_SetSRID(ST_MakePoint(24.95, 60.17), 4326), id LIMIT 5;
}), 'a generic plan with the range and the limit as parameters: the heap\'s rows');

# The distance a row is returned with is the one the scan measured, bit for
# bit the heap's (the scan hands it to PostgreSQL: fdw_scan_tlist), and
# PostGIS is not called again for the rows returned: its calls are exactly
# the scan's "Distances Measured by PostGIS" (before: that plus the rows).
$node->safe_psql('postgres', q{
CREATE FUNCTION exact_d(d text, w text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE a text; b text;
  sql text := 'SELECT string_agg(d::text, '','' ORDER BY o) FROM (SELECT %2$s d, row_number() OVER () o FROM (SELECT geom FROM %1$s WHERE %3$s ORDER BY %2$s LIMIT 7) s) t';
BEGIN
  SET LOCAL extra_float_digits = 3;
  EXECUTE format(sql, 'trafficdb.locations', d, w) INTO a;
  EXECUTE format(sql, 'roads', d, replace(w, 'location_id', 'id')) INTO b;
  RETURN CASE WHEN a IS NOT DISTINCT FROM b THEN 'same' ELSE format('%s vs %s', a, b) END;
END $$;
});
for my $h (
	[ q{geom <-> 'SRID=4326;POINT(24.95 60.17)'::geometry}, 'true' ],
	[ q{geom <#> 'SRID=4326;LINESTRING(24.9 60.1, 24.95 60.12)'::geometry}, 'true' ],
	[ q{geom::geography <-> 'LINESTRING(25.3 60.0, 25.4 60.05)'::geography}, 'true' ],
	[ q{geom::geography <-> 'POLYGON((25.3 60.3, 25.35 60.3, 25.35 60.33, 25.3 60.3))'::geography}, q{road_class IN ('primary', 'residential')} ],
	[ q{geom::geography <-> 'POINT(24.97 60.18)'::geography}, 'true' ],
	[ q{geom <-> 'SRID=4326;POINT(24.95 60.17)'::geometry}, 'location_id BETWEEN 1000 AND 1400' ],
	[ q{geom::geography <-> NULL::geography}, 'location_id BETWEEN 100 AND 105' ],
	[ q{geom <-> NULL::geometry}, 'true' ])
{
	my ($d, $w) = @$h;
	is($node->safe_psql('postgres', "SELECT exact_d(\$d\$$d\$d\$, \$w\$$w\$w\$)"), 'same', "ORDER BY $d WHERE $w: the heap's distances, bit for bit");
}
$node->safe_psql('postgres', q{ALTER SYSTEM SET track_functions = 'all'});
$node->reload;
my $knn_calls = sub {
	$node->safe_psql('postgres', q{SELECT pg_stat_clear_snapshot(); SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE funcname = 'geography_distance_knn'});
};
for my $q (
	q{SELECT location_id, geom::geography <-> 'LINESTRING(25.3 60.0, 25.4 60.05)'::geography AS d FROM trafficdb.locations ORDER BY geom::geography <-> 'LINESTRING(25.3 60.0, 25.4 60.05)'::geography LIMIT 6},
	q{SELECT location_id FROM trafficdb.locations WHERE road_class = 'primary' ORDER BY geom::geography <-> 'POLYGON((25.3 60.3, 25.35 60.3, 25.35 60.33, 25.3 60.3))'::geography LIMIT 4})
{
	my $before = $knn_calls->();
	my $plan = $node->safe_psql('postgres', "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $q");
	my ($measured) = $plan =~ /Distances Measured by PostGIS: (\d+)/;
	my ($rows) = $plan =~ /Foreign Scan on locations \(actual rows=(\d+)/;
	my $calls;
	# the backend's counts reach the statistics when it exits (safe_psql's does); bounded wait
	for (1 .. 50)
	{
		$calls = $knn_calls->() - $before;
		last if $calls >= ($measured // 0);
		usleep(100_000);
	}
	ok(defined $measured && $rows > 0 && $calls == $measured,
		"PostGIS measured each entry once and no returned row again ($calls calls, $measured measured, $rows rows): $q");
}

# Quals that cannot fail or leak (leakproof functions on columns other than
# geom) are checked before an entry is measured: a road-class filter spares
# PostGIS the roads of other classes.  Others are not: a function of the
# user's (not leakproof) sees only the rows PostgreSQL gives it, as with the
# heap, and an error it raises comes as it would.
$node->safe_psql('postgres', q{
CREATE TABLE seen (id bigint);
CREATE FUNCTION peek(id bigint, c text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN INSERT INTO seen VALUES (id); RETURN c = 'primary'; END $$;
CREATE FUNCTION fail_on(id bigint, bad bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN IF id = bad THEN RAISE EXCEPTION 'row % seen', id; END IF; RETURN true; END $$;
});
my $poly = q{'POLYGON((25.3 60.3, 25.35 60.3, 25.35 60.33, 25.3 60.3))'::geography};
my $measure = sub {
	my $plan = $node->safe_psql('postgres', "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) SELECT location_id FROM trafficdb.locations WHERE $_[0] ORDER BY geom::geography <-> $poly LIMIT 4");
	my ($removed) = $plan =~ /Rows Removed Before Measuring: (\d+)/;
	my ($measured) = $plan =~ /Distances Measured by PostGIS: (\d+)/;
	return ($removed, $measured);
};
my ($removed, $measured) = $measure->(q{road_class = 'primary' AND location_id > 10});
# the same filter through textcat, which is not leakproof: checked by PostgreSQL only
my (undef, $measured_after) = $measure->(q{road_class || '' = 'primary' AND location_id > 10});
ok(defined $removed && $removed > 0 && $measured < $measured_after,
	"road_class = 'primary' AND location_id > 10 checked before measuring: " . ($removed // 'none') .
	  " removed, $measured measured (checked after: $measured_after)");
is($node->safe_psql('postgres', "SELECT exact_d(\$d\$geom::geography <-> $poly\$d\$, \$w\$road_class = 'primary' AND location_id > 10\$w\$)"),
	'same', 'the same rows and distances as the heap');
my $plan = $node->safe_psql('postgres', "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) SELECT location_id FROM trafficdb.locations WHERE peek(location_id, road_class) ORDER BY geom::geography <-> $poly LIMIT 4");
unlike($plan, qr/Rows Removed Before Measuring/, 'a function that is not leakproof is not checked before measuring');
my ($passed) = $plan =~ /Foreign Scan on locations \(actual rows=(\d+)/;
my ($failed) = $plan =~ /Rows Removed by Filter: (\d+)/;
my $scan_rows = $passed + ($failed // 0);
is($node->safe_psql('postgres', q{SELECT count(*) FROM seen}), $scan_rows, "it saw only the $scan_rows rows the scan returned");
my ($ret) = $node->psql('postgres', "SELECT location_id FROM trafficdb.locations WHERE fail_on(location_id, 5) ORDER BY geom <-> 'SRID=4326;POINT(0 0)'::geometry LIMIT 1");
is($ret, 0, 'a qual that fails on a row beyond the LIMIT is not run on it');

# NULL query: every distance NULL, all rows, no error.
is($node->safe_psql('postgres', q{SELECT count(*) FROM (SELECT location_id FROM trafficdb.locations ORDER BY geom <-> NULL::geometry LIMIT 5) s}),
	'5', 'a NULL query point gives rows (all distances NULL), not an error');
$node->stop;
done_testing();
