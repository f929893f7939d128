# t/090_trail_exact_box.pl: ST_Intersects(geom, a rectangle) on a trail
# table is checked by the scan itself, on the doubles of each point it
# forms, and not again by PostgreSQL (PostGIS's recheck was half the CPU
# of a box query over most of a file: issue 33).  It must answer exactly
# what PostGIS answers:
# 1. rectangles whose edges lie on points of the file, one double beside
#    them (inside and outside), between grid points, and at the corners:
#    the same rows as the heap, and no Filter left in the plan;
# 2. the rectangle second, two rectangles (their intersection), two that
#    do not meet (no row), a rectangle with another clause;
# 3. what is not a rectangle keeps PostgreSQL's check and its answer: a
#    rotated square, a ring that goes back on itself, a rectangle with Z,
#    SRID 0 (PostGIS's mixed-SRID error), a multipolygon, a zero-width box,
#    a rectangle given as a parameter of a generic plan, geom && rectangle
#    (float boxes: PostGIS's own semantics);
# 4. EXPLAIN ANALYZE says who checked the area and how many rows it removed.
use strict;
use warnings;
use POSIX qw(nextafter);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('trail_exact_box');
my $dir = PostgreSQL::Test::Utils::tempdir;
tdb_trail_disk($node);

# 40 trails on a 1e-7 grid around (10, 50): every point of a 0.001-degree lattice
# inside [9.99, 10.01] x [49.99, 50.01], so rectangles can sit on, beside and between them
$node->safe_psql('postgres', qq{
CREATE TABLE ev AS
SELECT 'T' || (i % 40) AS tid,
  '2024-05-01 00:00:00+00'::timestamptz + i * interval '1 s' AS ts,
  ST_SetSRID(ST_MakePoint(round((9.99 + (i % 21) * 0.001)::numeric, 7)::float8,
                          round((49.99 + (i / 21 % 21) * 0.001)::numeric, 7)::float8), 4326) AS geom,
  i AS n
FROM generate_series(0, 21 * 21 * 3 - 1) i;
SELECT trafficdb.trail_write('SELECT tid, ts, geom, n FROM ev', '$dir/ev.trail',
  id_column => 'tid', time_column => 'ts', page_size => 1024);
CREATE FOREIGN TABLE tr (tid text, ts timestamptz, geom geometry(Point, 4326), n bigint)
  SERVER disk OPTIONS (url '$dir/ev.trail', id_column 'tid', time_column 'ts');
ANALYZE ev;
});

sub rows { return tdb_where_digest($node, @_); }

sub plan_of
{
	my ($where) = @_;
	return $node->safe_psql('postgres', "EXPLAIN (VERBOSE, COSTS OFF) SELECT n FROM tr WHERE $where");
}

sub env
{
	my ($x0, $y0, $x1, $y1, $srid) = @_;
	return sprintf('ST_MakeEnvelope(%.17g, %.17g, %.17g, %.17g, %d)', $x0, $y0, $x1, $y1, $srid // 4326);
}

sub same
{
	my ($where, $what, $exact) = @_;
	my $heap = rows('ev', $where);
	is(rows('tr', $where), $heap, "$what: the heap's answer ($heap)");
	my $plan = plan_of($where);
	if ($exact)
	{
		like($plan, qr/Area Checked By The Scan: ST_Intersects\(geom, rectangle/, "$what: checked by the scan");
		unlike($plan, qr/Filter:.*st_intersects/i, "$what: no recheck by PostgreSQL") or diag($plan);
	}
	elsif (defined $exact)
	{
		unlike($plan, qr/Area Checked By The Scan/, "$what: left to PostgreSQL's check");
	}
}

# ---- 1. edges on, beside and between the points ---------------------------------------------
my ($a, $b, $c, $d) = (9.995, 49.995, 10.004, 50.006);	# on grid points
same('ST_Intersects(geom, ' . env($a, $b, $c, $d) . ')', 'edges on points', 1);
same('ST_Intersects(geom, ' . env(nextafter($a, 0), nextafter($b, 0), nextafter($c, 100), nextafter($d, 100)) . ')',
	'edges one double outside the points', 1);
same('ST_Intersects(geom, ' . env(nextafter($a, 100), nextafter($b, 100), nextafter($c, 0), nextafter($d, 0)) . ')',
	'edges one double inside the points (the edge rows drop)', 1);
same('ST_Intersects(geom, ' . env(9.9955, 49.9955, 10.0045, 50.0055) . ')', 'edges between points', 1);
same('ST_Intersects(geom, ' . env(10.0, 50.0, 10.001, 50.001) . ')', 'a box of four points (its corners)', 1);
same('ST_Intersects(geom, ' . env(9.0, 49.0, 11.0, 51.0) . ')', 'a box around everything', 1);
same('ST_Intersects(geom, ' . env(12.0, 52.0, 13.0, 53.0) . ')', 'a box away from everything', 1);
# the same rectangle written as a polygon, clockwise, starting elsewhere
same(q{ST_Intersects(geom, 'SRID=4326;POLYGON((10.004 49.995, 9.995 49.995, 9.995 50.006, 10.004 50.006, 10.004 49.995))'::geometry)},
	'a rectangle as WKT, another start and turn', 1);

# ---- 2. other forms ---------------------------------------------------------------------------
same('ST_Intersects(' . env($a, $b, $c, $d) . ', geom)', 'the rectangle first', 1);
same('ST_Intersects(geom, ' . env($a, $b, $c, $d) . ') AND ST_Intersects(geom, ' . env(10.0, 50.0, 10.009, 50.009) . ')',
	'two rectangles: their intersection', 1);
same('ST_Intersects(geom, ' . env(9.991, 49.991, 9.995, 49.995) . ') AND ST_Intersects(geom, ' . env(10.0, 50.0, 10.009, 50.009) . ')',
	'two rectangles that do not meet', 1);
same('ST_Intersects(geom, ' . env($a, $b, $c, $d) . q{) AND tid = 'T7' AND n % 3 = 0}, 'with other clauses', 1);

# ---- 3. not rectangles: PostgreSQL's check ------------------------------------------------------
same(q{ST_Intersects(geom, 'SRID=4326;POLYGON((10 49.995, 10.005 50, 10 50.005, 9.995 50, 10 49.995))'::geometry)},
	'a rotated square', 0);
same(q{ST_Intersects(geom, 'SRID=4326;POLYGON((9.995 49.995, 10.004 49.995, 9.995 49.995, 9.995 50.006, 9.995 49.995))'::geometry)},
	'a ring that goes back on itself', 0);
same(q{ST_Intersects(geom, 'SRID=4326;POLYGON Z((9.995 49.995 1, 10.004 49.995 1, 10.004 50.006 1, 9.995 50.006 1, 9.995 49.995 1))'::geometry)},
	'a rectangle with Z', 0);
same('ST_Intersects(geom, ' . env($a, $b, $c, $d, 0) . ')', 'SRID 0 (the mixed-SRID error)', 0);
like(rows('tr', 'ST_Intersects(geom, ' . env($a, $b, $c, $d, 0) . ')'), qr/mixed SRID/i, 'SRID 0: PostGIS\'s error');
same(q{ST_Intersects(geom, 'SRID=4326;MULTIPOLYGON(((9.995 49.995, 10.004 49.995, 10.004 50.006, 9.995 50.006, 9.995 49.995)))'::geometry)},
	'a multipolygon of one rectangle', 0);
same(q{ST_Intersects(geom, 'SRID=4326;POLYGON((10 49.995, 10 50.006, 10 49.995, 10 50.006, 10 49.995))'::geometry)},
	'a zero-width box', 0);
same('ST_Intersects(geom, NULL::geometry)', 'NULL', 0);
same('geom && ' . env(nextafter($a, 100), $b, $c, $d), 'geom && a rectangle (float boxes)', 0);

# a parameter of a generic plan: not known at planning, checked by PostgreSQL
{
	my $env = env(nextafter($a, 100), nextafter($b, 100), nextafter($c, 0), nextafter($d, 0));
	my $want = rows('ev', "ST_Intersects(geom, $env)");
	my $got = $node->safe_psql('postgres', qq{
SET plan_cache_mode = force_generic_plan;
PREPARE q(geometry) AS SELECT count(*) || ':' || coalesce(md5(string_agg(n::text, ',' ORDER BY n)), '-') FROM tr WHERE ST_Intersects(geom, \$1);
EXECUTE q($env);
});
	is($got, $want, "a generic plan's parameter: the heap's answer ($want)");
	my $plan = $node->safe_psql('postgres', qq{
SET plan_cache_mode = force_generic_plan;
PREPARE q(geometry) AS SELECT n FROM tr WHERE ST_Intersects(geom, \$1);
EXPLAIN (COSTS OFF) EXECUTE q($env);
});
	like($plan, qr/Filter: st_intersects/, "a generic plan's parameter: PostgreSQL checks it") or diag($plan);
}

# ---- 4. EXPLAIN ANALYZE ----------------------------------------------------------------------------
# edges one double inside the points: the reader's pruning box (a margin wider) lets the
# edge points through, the scan's check removes them
{
	my $in = env(nextafter($a, 100), nextafter($b, 100), nextafter($c, 0), nextafter($d, 0));
	my $s = tdb_scan_node($node, "SELECT n FROM tr WHERE ST_Intersects(geom, $in)");
	my ($kept) = rows('ev', "ST_Intersects(geom, $in)") =~ /^(\d+):/;
	my ($on) = rows('ev', 'ST_Intersects(geom, ' . env($a, $b, $c, $d) . ')') =~ /^(\d+):/;
	is($s->{'Actual Rows'}, $kept, "EXPLAIN ANALYZE: $kept rows");
	ok(!exists $s->{'Rows Removed by Filter'}, 'no PostgreSQL filter');
	is($s->{'Rows Removed by Area Check'}, $on - $kept,
		"the scan removed the @{[$on - $kept]} points on the edges, one double outside its rectangle");
	like($s->{'Area Checked By The Scan'}, qr/^ST_Intersects\(geom, rectangle 9\.99500000000000\d+ 49\.99500000000000\d+, 10\.00399999999999\d+ 50\.00599999999999\d+\), exactly: no recheck$/,
		"it says what: $s->{'Area Checked By The Scan'}");
}

done_testing();
