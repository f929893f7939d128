# t/088_review_today.pl: a hostile review of the day's trail changes
# (9419445..981959f): text values made once per lexicon string
# (trl_text_datum), values read from the decoded page (values_in_page),
# ids compared exactly (trl_canonical_int64, collations) and the
# geography box of ST_DWithin (tdb_geography_box, tdb_box_grow_metres).
# Each check compares a foreign table's answer with a heap's holding the
# same rows: the same answer, or the same error (REVIEW.md).
#
# Confirmed wrong (fails until fixed, REVIEW.md 1):
#   ST_DWithin(geom::geography, g, d) where g is a collection holding an
#   empty part beside others: PostGIS raises "lwgeom_distance_spheroid
#   returned negative!" on every row, the trail FDW prunes by the box of
#   the other parts and returns 0 rows when no page is near them.
# Found different, not counted as the FDW's bug (TODO, REVIEW.md 2):
#   a polygon's antipodal points at distance 0 (PostGIS).
# The rest was right and is kept here.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('review_today');
my $dir = PostgreSQL::Test::Utils::tempdir;

# 120 trails; two text columns with NULLs, '' and strings of several
# lengths (a shorter string after a longer one rewrites the attribute's
# buffer in place); written as version 1, 2 and 3, in trail and in
# space-time order
tdb_trail_disk($node);
$node->safe_psql('postgres', qq{
CREATE TABLE ev AS
SELECT 'AC' || lpad(v::text, 3, '0') AS callsign,
  '2024-03-01 00:00:00+00'::timestamptz + (v * 37 % 3600) * interval '1 s' + i * interval '47 s' AS ts,
  ST_SetSRID(ST_MakePoint(24 + (v % 20) * 0.1 + i * 0.0003, 60 + (v / 20) * 0.1 + i * 0.0002), 4326) AS geom,
  (ARRAY['a','bb','ccc','dd','e','ffffffffffffffffffff','xy','yx',NULL,''])[1 + (i * 7 + v) % 10] AS s1,
  CASE WHEN i % 5 = 0 THEN NULL ELSE 'st' || ((i / 3 + v) % 13) END AS s2,
  (i * 1.5 + v)::float8 AS speed, (i % 3)::bigint AS k
FROM generate_series(1, 120) v, generate_series(0, 59 + v % 40) i;
-- the subplan's probes by index (a scan of ev per outer row took 11 s a table)
CREATE INDEX ON ev (callsign, s1);
ANALYZE ev;
});
my @tables;
for my $v (1, 2, 3, 4)
{
	for my $order ('trail', 'space-time')
	{
		next if $v == 1 && $order ne 'trail';
		# version 3's pages of several trails decode as version 4's do, which may also use codecs 8 and 9
		next if $v == 3 && $order ne 'trail';
		(my $t = "f${v}_$order") =~ s/-/_/g;
		$node->safe_psql('postgres', qq{
SELECT trafficdb.trail_write('SELECT callsign, ts, geom, s1, s2, speed, k FROM ev', '$dir/$t.trail',
  id_column => 'callsign', time_column => 'ts', page_size => 2048, page_seconds => 900,
  format_version => $v, page_order => '$order');
CREATE FOREIGN TABLE $t (callsign text, ts timestamptz, geom geometry(Point, 4326), s1 text, s2 text,
  speed float8, k bigint) SERVER disk OPTIONS (url '$dir/$t.trail', id_column 'callsign', time_column 'ts');
});
		push @tables, $t;
	}
}

# The answer of $sql (its %s the table), or the error's first line.
sub answer
{
	my ($sql, $table) = @_;
	my $n = () = $sql =~ /%s/g;
	my ($rc, $out, $err) = $node->psql('postgres', sprintf($sql, ($table) x $n));
	return $rc == 0 ? $out : ($err =~ /(ERROR:[^\n]*)/ ? $1 : "rc $rc: $err");
}

sub same
{
	my ($sql, $table, $heap, $what) = @_;
	my $h = answer($sql, $heap);
	is(answer($sql, $table), $h, "$what: $table is $heap\'s (" . substr($h, 0, 40) . ")");
}

# ---- 1. text values made once per string: every consumer that keeps a row -------------------

my $rows = q{md5(string_agg(concat_ws(',', callsign, ts, coalesce(s1, '<N>'), coalesce(s2, '<N>'), speed, k), '|' ORDER BY callsign, ts))};
my @lifetime = (
	["SELECT $rows FROM %s", 'a sort of every row'],
	[q{SELECT callsign, array_agg(s1 ORDER BY ts), array_agg(s2 ORDER BY ts) FROM %s GROUP BY callsign ORDER BY 1}, 'array_agg'],
	[q{SELECT md5(string_agg(t::text, '|' ORDER BY t.callsign, t.ts)) FROM (SELECT callsign, ts, s1, s2, speed, k FROM %s) t}, 'whole rows'],
	[q{SELECT md5(string_agg(row_to_json(t)::text, '|' ORDER BY t.callsign, t.ts)) FROM (SELECT callsign, ts, s1, s2 FROM %s) t}, 'row_to_json'],
	[q{WITH c AS MATERIALIZED (SELECT callsign, ts, s1, s2 FROM %s) SELECT md5(string_agg(concat(callsign, ts, s1, '/', s2), '|' ORDER BY callsign, ts)) FROM c}, 'a materialized CTE'],
	[q{SELECT s1, s2, count(*) FROM %s GROUP BY s1, s2 ORDER BY 1, 2}, 'grouping on the text columns'],
	[q{SELECT md5(string_agg(concat(callsign, ts, s1, '/', l), '|' ORDER BY callsign, ts)) FROM (SELECT callsign, ts, s1, lag(s1) OVER (PARTITION BY callsign ORDER BY ts) l FROM %s) x}, 'lag() keeps the row before'],
	[q{SELECT a.s1, count(*) FROM %s a JOIN (SELECT DISTINCT s1 FROM ev) b ON a.s1 = b.s1 GROUP BY 1 ORDER BY 1}, 'a hash join on text'],
	[q{SELECT min(s1), max(s1), min(s2), max(s2) FROM %s}, 'min and max of text'],
	[q{SET enable_hashjoin = off; SET enable_mergejoin = off; SELECT e.c, md5(string_agg(concat(x.ts, x.s1, '/', x.s2), '|' ORDER BY x.ts)) FROM (SELECT DISTINCT callsign c FROM ev WHERE callsign < 'AC060') e, LATERAL (SELECT * FROM %s t WHERE t.callsign = e.c ORDER BY ts LIMIT 7) x GROUP BY 1 ORDER BY 1}, 'lookups rescanned after a LIMIT'],
	[q{SET enable_hashjoin = off; SET enable_mergejoin = off; SET enable_material = off; SELECT count(*), md5(string_agg(concat(x.ts, x.s1, '/', x.s2), '|' ORDER BY x.callsign, x.ts)) FROM (SELECT DISTINCT callsign c FROM ev) e JOIN %s x ON x.callsign = e.c}, 'a nested loop of lookups (page cache)'],
	[q{SELECT md5(string_agg(concat(a.callsign, a.s1, b.s1), '|' ORDER BY a.callsign, a.ts, b.ts)) FROM %s a JOIN %s b ON a.callsign = b.callsign AND a.s2 = b.s2 WHERE a.callsign < 'AC010'}, 'a self-join'],
	[q{SELECT count(*) FROM (SELECT (SELECT max(e.s2) FROM ev e WHERE e.callsign = 'AC003' AND e.s1 = f.s1) x FROM %s f) y WHERE x IS NOT NULL}, 'a subplan on a text column'],
	[q{SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SELECT count(*), count(DISTINCT s1), count(DISTINCT s2) FROM %s}, 'distinct counts'],
);
for my $t (@tables)
{
	same($_->[0], $t, 'ev', $_->[1]) for @lifetime;
}

# INSERT ... SELECT and RETURNING copy the values; a plpgsql loop keeps them
for my $t ('f4_space_time', 'f1_trail')
{
	is($node->safe_psql('postgres', qq{
CREATE TEMP TABLE cp AS SELECT callsign, ts, s1, s2 FROM ev LIMIT 0;
WITH ins AS (INSERT INTO cp SELECT callsign, ts, s1, s2 FROM $t RETURNING callsign, ts, s1, s2)
SELECT (SELECT md5(string_agg(concat(callsign, ts, s1, '/', s2), '|' ORDER BY callsign, ts)) FROM ins)
     = (SELECT md5(string_agg(concat(callsign, ts, s1, '/', s2), '|' ORDER BY callsign, ts)) FROM ev);
}), 't', "INSERT ... SELECT ... RETURNING from $t");
	is($node->safe_psql('postgres', qq{
DO \$\$
DECLARE r record; acc text[] := '{}'; prev text; h text;
BEGIN
  FOR r IN SELECT callsign, ts, s1, s2 FROM $t ORDER BY callsign, ts LOOP
    acc := acc || (coalesce(r.s1, '<N>') || coalesce(prev, '<N>'));
    prev := r.s2;
  END LOOP;
  SELECT md5(string_agg(coalesce(s1, '<N>') || coalesce(p, '<N>'), '|' ORDER BY callsign, ts)) INTO h
    FROM (SELECT callsign, ts, s1, lag(s2) OVER (ORDER BY callsign, ts) p FROM ev) x;
  IF md5(array_to_string(acc, '|')) IS DISTINCT FROM h THEN RAISE EXCEPTION 'differ'; END IF;
END \$\$;
SELECT 'same';
}), 'same', "a plpgsql loop keeping the row before, over $t");
}

# a scrollable cursor goes back over the rows it returned (a Material over the scan)
for my $t (@tables)
{
	my $out = $node->safe_psql('postgres', qq{
BEGIN;
DECLARE c SCROLL CURSOR FOR SELECT ts, s1, s2 FROM $t WHERE callsign IN ('AC001', 'AC002');
FETCH 40 FROM c;
SELECT '--';
FETCH 1 FROM c;
SELECT '--';
FETCH BACKWARD 40 FROM c;
COMMIT;
});
	my ($fwd, undef, $back) = split /^--\n/m, $out;
	is(join("\n", reverse split /\n/, $fwd), join("\n", split /\n/, $back), "FETCH BACKWARD gives back the rows of $t");
}

# ---- 2. ids: a text column over integer ids, collations -----------------------------------

$node->safe_psql('postgres', qq{
CREATE TABLE evv AS SELECT (1 + (row_number() OVER ()) % 50)::bigint AS vid, ts, geom, s1 FROM ev
  UNION ALL SELECT v, '2024-03-01+00', 'SRID=4326;POINT(24 60)', 'x'
    FROM unnest(ARRAY[-9223372036854775808, 9223372036854775807, 0, -1]::bigint[]) v;
SELECT trafficdb.trail_write('SELECT vid, ts, geom, s1 FROM evv', '$dir/veh.trail', id_column => 'vid', time_column => 'ts');
CREATE VIEW evv_text AS SELECT vid::text AS vid, ts, s1 FROM evv;
CREATE FOREIGN TABLE veh_text (vid text, ts timestamptz, geom geometry(Point, 4326), s1 text)
  SERVER disk OPTIONS (url '$dir/veh.trail', id_column 'vid', time_column 'ts');
CREATE FOREIGN TABLE veh_varchar (vid varchar, ts timestamptz, geom geometry(Point, 4326), s1 text)
  SERVER disk OPTIONS (url '$dir/veh.trail', id_column 'vid', time_column 'ts');
CREATE TABLE sid AS SELECT (ARRAY['7','007',' 7','8','-0','0','+9','9'])[1 + v % 8] AS id,
  '2024-03-01+00'::timestamptz + v * interval '1 min' AS ts, 'SRID=4326;POINT(24 60)'::geometry AS geom, v::float8 AS x
  FROM generate_series(0, 799) v;
SELECT trafficdb.trail_write('SELECT id, ts, geom, x FROM sid', '$dir/sid.trail', id_column => 'id', time_column => 'ts');
CREATE VIEW sid_big AS SELECT id::bigint AS id, ts, x FROM sid;
CREATE FOREIGN TABLE sidf (id bigint, ts timestamptz, geom geometry(Point, 4326), x float8)
  SERVER disk OPTIONS (url '$dir/sid.trail', id_column 'id', time_column 'ts');
CREATE VIEW evci AS SELECT callsign COLLATE ci AS callsign, ts, s1 FROM ev;
CREATE FOREIGN TABLE f3ci (callsign text COLLATE ci, ts timestamptz, geom geometry(Point, 4326), s1 text, s2 text,
  speed float8, k bigint) SERVER disk OPTIONS (url '$dir/f4_space_time.trail', id_column 'callsign', time_column 'ts');
});
for my $w (q{vid = '-9223372036854775808'}, q{vid = '9223372036854775807'}, q{vid = '9223372036854775808'},
	q{vid = ''}, q{vid = ' 1'}, q{vid = '1 '}, q{vid = '+1'}, q{vid = '01'}, q{vid = '-0'}, q{vid = '0'},
	q{vid = '-1'}, q{vid = '7'}, q{vid IN ('1', '01', '2', NULL)}, q{vid = ANY (ARRAY['3', '-9223372036854775808'])},
	q{vid = ANY ('{}'::text[])}, q{vid = ANY (ARRAY[NULL]::text[])}, q{vid = '5' COLLATE "C"}, q{vid < '2'})
{
	for my $q ("SELECT count(*) FROM %s WHERE $w", "SELECT count(*), min(ts), max(s1) FROM %s WHERE $w",
		"SELECT vid, count(*) FROM %s WHERE $w GROUP BY vid ORDER BY 1")
	{
		same($q, 'veh_text', 'evv_text', 'a text column over integer ids');
		same($q, 'veh_varchar', 'evv_text', 'a varchar column over integer ids');
	}
}
for my $w (q{id = 7}, q{id = 0}, q{id IN (7, 9)}, q{id = ANY (ARRAY[7, 8]::bigint[])}, q{id = 7::smallint},
	q{id = 9 AND ts > '2024-03-01 01:00+00'})
{
	same("SELECT count(*), min(ts), max(ts), sum(x) FROM %s WHERE $w", 'sidf', 'sid_big', 'a bigint column over string ids');
	same("SELECT id, count(*) FROM %s WHERE $w GROUP BY id ORDER BY 1", 'sidf', 'sid_big', 'a bigint column over string ids');
}
for my $w (q{callsign = 'ac001'}, q{callsign IN ('ac001', 'AC002')}, q{callsign = ANY (ARRAY['ac001', 'ac003'])},
	q{callsign = 'ac001' COLLATE "C"}, q{callsign = 'AC001' COLLATE "C"}, q{callsign::text = 'ac001'})
{
	same("SELECT count(*), min(ts) FROM %s WHERE $w", 'f3ci', 'evci', 'a column under a nondeterministic collation');
	same("SELECT callsign, count(*), max(ts) FROM %s WHERE $w GROUP BY callsign ORDER BY 1", 'f3ci', 'evci',
		'a column under a nondeterministic collation');
}
same(q{SELECT count(*) FROM %s WHERE callsign COLLATE ci IN ('ac007', 'AC009')}, 'f4_space_time', 'ev', 'COLLATE ci in the clause');
same(q{SELECT count(*) FROM (SELECT callsign COLLATE ci FROM %s GROUP BY 1) x}, 'f4_space_time', 'ev', 'grouped under COLLATE ci');

# ---- 3. ST_DWithin on geography over every longitude and latitude ----------------------------

$node->safe_psql('postgres', qq{
CREATE TABLE g AS
SELECT 'T' || (n % 97) AS callsign, '2024-03-01+00'::timestamptz + n * interval '1 s' AS ts,
  ST_SetSRID(ST_MakePoint(x, y), 4326) AS geom
FROM (SELECT row_number() OVER () n, x, y FROM (
  SELECT x, y FROM generate_series(-180, 179, 2) x, generate_series(-89.5, 89.5, 2) y
  UNION ALL SELECT x, y FROM generate_series(-180, 180, 4) x, generate_series(85, 90, 0.1) y
  UNION ALL SELECT x, y FROM generate_series(-180, 180, 4) x, generate_series(-90, -85, 0.1) y
  UNION ALL SELECT x, y FROM generate_series(179, 180, 0.02) x, generate_series(-80, 80, 4) y
  UNION ALL SELECT x, y FROM generate_series(-180, -179, 0.02) x, generate_series(-80, 80, 4) y) q) r;
SELECT trafficdb.trail_write('SELECT callsign, ts, geom FROM g', '$dir/g.trail', id_column => 'callsign',
  time_column => 'ts', page_size => 4096, page_seconds => 3600, page_order => 'space-time');
CREATE FOREIGN TABLE gf (callsign text, ts timestamptz, geom geometry(Point, 4326))
  SERVER disk OPTIONS (url '$dir/g.trail', id_column 'callsign', time_column 'ts');
});
for my $a (q{'SRID=4326;POINT(0 89.9)'::geography, 50000}, q{'SRID=4326;POINT(0 -89.9)'::geography, 50000},
	q{'SRID=4326;POINT(0 90)'::geography, 1000}, q{'SRID=4326;POINT(180 10)'::geography, 5000},
	q{'SRID=4326;POINT(-180 10)'::geography, 5000}, q{'SRID=4326;POINT(-179.9 89)'::geography, 50000},
	q{'SRID=4326;LINESTRING(170 80, -170 80)'::geography, 100000},
	q{'SRID=4326;LINESTRING(0 89, 180 89)'::geography, 10000}, q{'SRID=4326;LINESTRING(-90 85, 90 85)'::geography, 10000},
	q{'SRID=4326;LINESTRING(10 -85, 169.9 -85)'::geography, 10000}, q{'SRID=4326;LINESTRING(-180 89, 180 89)'::geography, 1000},
	q{'SRID=4326;LINESTRING(-179.5 75, -100 75)'::geography, 200000}, q{'SRID=4326;LINESTRING(0 0, 90 89.9)'::geography, 10000},
	q{'SRID=4326;LINESTRING(0 0, 180 0)'::geography, 10000},
	q{'SRID=4326;POLYGON((-10 80, 100 80, -150 80, -10 80))'::geography, 1000},
	q{'SRID=4326;POLYGON((-180 85, -90 85, 0 85, 90 85, 180 85, -180 85))'::geography, 1000},
	q{'SRID=4326;POLYGON((0 -89, 120 -89, -120 -89, 0 -89))'::geography, 1000},
	q{'SRID=4326;POLYGON((-170 -10, 170 -10, 170 10, -170 10, -170 -10))'::geography, 10000},
	q{'SRID=4326;MULTIPOINT(-180 0, 180 0)'::geography, 100000}, q{'SRID=4326;MULTIPOINT(10 10, -170 -80)'::geography, 300000},
	q{'SRID=4326;POINT EMPTY'::geography, 1000}, q{'SRID=4326;GEOMETRYCOLLECTION EMPTY'::geography, 1000},
	q{'SRID=4326;GEOMETRYCOLLECTION(POINT EMPTY)'::geography, 1000}, q{NULL::geography, 1000},
	q{'SRID=4326;POINT(20 20)'::geography, 'NaN'}, q{'SRID=4326;POINT(20 20)'::geography, 'Infinity'},
	q{'SRID=4326;POINT(20 20)'::geography, -1}, q{'SRID=4326;POINT(20 20)'::geography, 15000000},
	q{'SRID=4326;POINT(20 20)'::geography, 20037508}, q{'SRID=4326;POINT(45 0)'::geography, 10000000})
{
	same("SELECT count(*) FROM %s WHERE ST_DWithin(geom::geography, $a)", 'gf', 'g', "ST_DWithin($a)");
	same("SELECT count(*) FROM %s WHERE ST_DWithin(geom::geography, $a, false)", 'gf', 'g', "ST_DWithin($a, false)");
}

# confirmed: an empty part beside others is PostGIS's error on every row; the FDW
# pruned by the other parts' box and returned no row (no page near 20 20 in ev)
for my $a (q{GEOMETRYCOLLECTION(POINT EMPTY, POINT(20 20))}, q{MULTIPOINT(EMPTY, (20 20))},
	q{GEOMETRYCOLLECTION(LINESTRING EMPTY, POINT(20 20))}, q{MULTIPOLYGON(EMPTY, ((20 20, 21 20, 21 21, 20 20)))})
{
	same("SELECT count(*) FROM %s WHERE ST_DWithin(geom::geography, 'SRID=4326;$a'::geography, 1000)",
		'f4_space_time', 'ev', "an empty part beside others: $a");
}

# PostGIS puts the antipodes of a polygon's edge (lon -160, lat -10..-20 for
# the square 10..20) at distance 0 from it; the FDW's box, rightly, not
TODO:
{
	local $TODO = 'PostGIS: the antipodes of a polygon edge at distance 0 (REVIEW.md 2)';
	same(q{SELECT count(*) FROM %s WHERE ST_DWithin(geom::geography, 'SRID=4326;POLYGON((10 10, 20 10, 20 20, 10 20, 10 10))'::geography, 100000)},
		'gf', 'g', 'a polygon and its antipodes');
}

done_testing();
