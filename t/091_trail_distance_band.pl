# t/091_trail_distance_band.pl: ST_DWithin(geom::geography, a point, d)
# on a trail table is evaluated by the scan: the great-circle distance
# settles the rows at least 1 % and 1 m away from the circle (the WGS 84
# geodesic lies within 0.56 % of it), the geodesic itself those a centimetre
# or more away (t/097), PostGIS the rows nearer; PostgreSQL
# does not check it again.  It must answer exactly what PostGIS answers on
# a heap of the same rows:
# 1. circles of 0 m, 1 m, 50 m, 3 km, 500 km and 5,000 km around points
#    of the file, near the poles and across the antimeridian, with
#    use_spheroid true and false: the heap's rows, and the scan settles
#    most of them itself;
# 2. what it does not take keeps PostgreSQL's check and its answer: a
#    negative distance (no row on geography), NaN, infinity, a line, SRID 4269,
#    a generic plan's parameter, NOT, OR, the distance inside an expression;
# 3. statement_timeout interrupts a scan whose points all lie outside.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('trail_distance_band');
my $dir = PostgreSQL::Test::Utils::tempdir;
tdb_trail_disk($node);

# 30,000 points in clusters: around (24.94, 60.17), near the north pole, across the
# antimeridian, near the south pole, and scattered world-wide; on the 1e-7 grid
$node->safe_psql('postgres', qq{
SELECT setseed(0.91);
CREATE TABLE ev AS
SELECT 'T' || (i % 97) AS tid, '2024-05-01 00:00:00+00'::timestamptz + i * interval '1 s' AS ts,
  ST_SetSRID(ST_MakePoint(round(x::numeric, 7)::float8, round(y::numeric, 7)::float8), 4326) AS geom, i AS n
FROM (
  SELECT i,
    CASE i % 5 WHEN 0 THEN 24.94 + (random() - 0.5) * 0.2
               WHEN 1 THEN (random() - 0.5) * 360
               WHEN 2 THEN CASE WHEN random() < 0.5 THEN 179.9 + random() * 0.1 ELSE -180 + random() * 0.1 END
               WHEN 3 THEN (random() - 0.5) * 360
               ELSE (random() - 0.5) * 359.9 END AS x,
    CASE i % 5 WHEN 0 THEN 60.17 + (random() - 0.5) * 0.1
               WHEN 1 THEN 89.9 + random() * 0.1
               WHEN 2 THEN 10 + (random() - 0.5) * 0.2
               WHEN 3 THEN -89.95 - random() * 0.05
               ELSE (random() - 0.5) * 179.8 END AS y
  FROM generate_series(0, 29999) i) p;
SELECT trafficdb.trail_write('SELECT tid, ts, geom, n FROM ev', '$dir/ev.trail',
  id_column => 'tid', time_column => 'ts', page_size => 4096);
CREATE FOREIGN TABLE tr (tid text, ts timestamptz, geom geometry(Point, 4326), n bigint)
  SERVER disk OPTIONS (url '$dir/ev.trail', id_column 'tid', time_column 'ts');
ANALYZE ev;
});

sub rows { return tdb_where_digest($node, @_); }

sub pt { my ($x, $y) = @_; return "ST_SetSRID(ST_MakePoint($x, $y), 4326)::geography"; }

# a point of the file as the centre (so that some rows sit at 0 m and near every radius)
my $c = $node->safe_psql('postgres', 'SELECT ST_X(geom) || \' \' || ST_Y(geom) FROM ev WHERE n = 10');
my ($cx, $cy) = split / /, $c;

my @cases = (
	[ pt($cx, $cy), 0, 'a point of the file, 0 m' ],
	[ pt($cx, $cy), 1, '1 m' ],
	[ pt($cx, $cy), 50, '50 m' ],
	[ pt($cx, $cy), 3000, '3 km' ],
	[ pt(24.94, 60.17), 500000, '500 km' ],
	[ pt(0, 0), 5000000, '5,000 km from (0, 0)' ],
	[ pt(45, 89.97), 3000, '3 km near the north pole' ],
	[ pt(0, 90), 20000, '20 km around the north pole itself' ],
	[ pt(180, 10), 5000, '5 km on the antimeridian' ],
	[ pt(-179.99, 10.01), 8000, '8 km across the antimeridian' ],
	[ pt(10, -89.97), 4000, '4 km near the south pole' ],
	[ q{'SRID=4326;POINT(24.94 60.17)'::geography}, 2500, 'a geography literal' ],
);
for my $k (@cases)
{
	my ($p, $d, $what) = @$k;
	for my $sph ('', ', true', ', false')
	{
		my $where = "ST_DWithin(geom::geography, $p, $d$sph)";
		my $heap = rows('ev', $where);
		is(rows('tr', $where), $heap, "$what$sph: the heap's answer ($heap)");
	}
	my $s = tdb_scan_node($node, "SELECT n FROM tr WHERE ST_DWithin(geom::geography, $p, $d)");
	ok(exists $s->{'Distance Checked By The Scan'} && !exists $s->{'Filter'}, "$what: checked by the scan, no Filter");
}

# most rows settled without PostGIS: the 3 km circle around a point of the dense cluster
{
	my $s = tdb_scan_node($node, 'SELECT n FROM tr WHERE ST_DWithin(geom::geography, ' . pt(24.94, 60.17) . ', 3000)');
	my $settled = $s->{'Actual Rows'} + $s->{'Rows Removed by Distance Check'} - $s->{'Rows Checked by PostGIS'};
	cmp_ok($s->{'Rows Checked by PostGIS'}, '<', $settled / 5,
		"3 km: PostGIS asked about $s->{'Rows Checked by PostGIS'} rows, $settled settled by the scan");
}

# ---- 2. left to PostgreSQL -------------------------------------------------------------------
for my $k ([ "ST_DWithin(geom::geography, @{[pt(24.94, 60.17)]}, -1)", 'a negative distance (no row)' ],
	[ "ST_DWithin(geom::geography, @{[pt(24.94, 60.17)]}, 'NaN'::float8)", 'NaN' ],
	[ "ST_DWithin(geom::geography, @{[pt(24.94, 60.17)]}, 'Infinity'::float8)", 'infinity' ],
	[ q{ST_DWithin(geom::geography, 'SRID=4326;LINESTRING(24.9 60.1, 25 60.2)'::geography, 1000)}, 'a line' ],
	[ q{ST_DWithin(geom::geography, 'SRID=4269;POINT(24.94 60.17)'::geography, 1000)}, 'SRID 4269' ],
	[ "NOT ST_DWithin(geom::geography, @{[pt(24.94, 60.17)]}, 3000) AND n % 5 = 0", 'NOT' ],
	[ "(ST_DWithin(geom::geography, @{[pt(24.94, 60.17)]}, 3000) OR n < 10)", 'OR' ],
	[ "ST_DWithin(geom::geography, @{[pt(24.94, 60.17)]}, 3000) = (n % 2 = 0)", 'inside an expression' ])
{
	my ($where, $what) = @$k;
	my $heap = rows('ev', $where);
	is(rows('tr', $where), $heap, "$what: the heap's answer ($heap)");
	my $plan = $node->safe_psql('postgres', "EXPLAIN (COSTS OFF) SELECT n FROM tr WHERE $where");
	unlike($plan, qr/Distance Checked By The Scan/, "$what: left to PostgreSQL");
}
{
	my $want = rows('ev', 'ST_DWithin(geom::geography, ' . pt(24.94, 60.17) . ', 3000)');
	my $got = $node->safe_psql('postgres', qq{
SET plan_cache_mode = force_generic_plan;
PREPARE q(geography, float8) AS SELECT count(*) || ':' || coalesce(md5(string_agg(n::text, ',' ORDER BY n)), '-') FROM tr WHERE ST_DWithin(geom::geography, \$1, \$2);
EXECUTE q(@{[pt(24.94, 60.17)]}, 3000);
});
	is($got, $want, "a generic plan's parameters: the heap's answer ($want)");
}

# ---- 3. cancel --------------------------------------------------------------------------------
{
	my ($rc, $out, $err) = $node->psql('postgres', qq{
SET statement_timeout = '1ms';
SELECT count(*) FROM tr a, generate_series(1, 200) g WHERE ST_DWithin(a.geom::geography, @{[pt(24.94, 60.17)]}, 10);
});
	like($err, qr/statement timeout/, 'statement_timeout interrupts scans whose rows the check removes');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM tr WHERE n < 5'), 5, 'and the session goes on');
}

done_testing();
