# t/097_trail_distance_exact.pl: the scan of a trail table settles
# ST_DWithin(geom::geography, a point, d) near the circle too, by the
# distance PostGIS compares for SRID 4326 (the WGS 84 geodesic, or its
# sphere of radius (2a + b) / 3 with use_spheroid false), leaving to
# PostGIS only the rows within a centimetre of the circle (asking it even
# once loads PROJ and its database in the backend: 8-12 ms).  Its answers
# must be PostGIS's exactly, so the points here lie at the circle and at
# 1 mm, 5 mm, 1 cm, 2 cm, 10 cm and 1 m inside and outside it (PostGIS's
# ST_Project along 180 azimuths, then rounded to the file's 1e-7 degree
# grid, which moves them by up to a centimetre), around a point at 60 N,
# near the north pole, on the equator and across the antimeridian, for
# radii of 3 m, 3 km and 3,000 km:
# 1. every circle, use_spheroid true and false: the heap's rows;
# 2. PostGIS is asked only about the rows within about a centimetre of the
#    circle, and a circle whose rows all lie farther asks it nothing;
# 3. nearly antipodal points (where the scan's formula does not converge)
#    are PostGIS's, with its answer.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('trail_distance_exact');
my $dir = PostgreSQL::Test::Utils::tempdir;
tdb_trail_disk($node);

my @centres = ([ 24.94, 60.17 ], [ 45, 89.9 ], [ 10, 0 ], [ 179.999, -20 ]);
my @radii = (3, 3000, 3000000);
my @deltas = (0, 0.001, -0.001, 0.005, -0.005, 0.01, -0.01, 0.02, -0.02, 0.1, -0.1, 1, -1);

# the points: c the centre's number, r the radius's; on the file's grid
my @sel;
for my $c (0 .. $#centres)
{
	my ($x, $y) = @{ $centres[$c] };
	for my $r (0 .. $#radii)
	{
		my $deltas = join(', ', @deltas);
		push @sel, qq{SELECT $c AS c, $r AS r, ST_Project(ST_SetSRID(ST_MakePoint($x, $y), 4326)::geography,
  $radii[$r] + dl, radians(az))::geometry AS g
FROM unnest(ARRAY[$deltas]::float8[]) dl, generate_series(0, 358, 2) az};
	}
}
my $union = join("\nUNION ALL\n", @sel);
$node->safe_psql('postgres', qq{
CREATE TABLE ev AS
SELECT 'T' || c || '_' || r AS tid, '2024-05-01 00:00:00+00'::timestamptz + row_number() OVER () * interval '1 s' AS ts,
  ST_SetSRID(ST_MakePoint(round(ST_X(g)::numeric, 7)::float8, round(ST_Y(g)::numeric, 7)::float8), 4326) AS geom,
  row_number() OVER () AS n
FROM ($union) p;
-- nearly antipodal to (0.0000001, 0): where Vincenty's formula does not converge
INSERT INTO ev SELECT 'A', '2024-05-02 00:00:00+00'::timestamptz + k * interval '1 s',
  ST_SetSRID(ST_MakePoint(179.9999 + k * 1e-5, (k - 5) * 1e-5), 4326), 100000 + k
FROM generate_series(0, 10) k;
SELECT trafficdb.trail_write('SELECT tid, ts, geom, n FROM ev', '$dir/ev.trail',
  id_column => 'tid', time_column => 'ts', page_size => 4096);
CREATE FOREIGN TABLE tr (tid text, ts timestamptz, geom geometry(Point, 4326), n bigint)
  SERVER disk OPTIONS (url '$dir/ev.trail', id_column 'tid', time_column 'ts');
ANALYZE ev;
});
my $n = $node->safe_psql('postgres', 'SELECT count(*) FROM ev');
is($n, scalar(@centres) * scalar(@radii) * scalar(@deltas) * 180 + 11, "$n points at and around the circles");

sub rows { return tdb_where_digest($node, @_); }

sub pt { my ($x, $y) = @_; return "ST_SetSRID(ST_MakePoint($x, $y), 4326)::geography"; }

# ---- 1. the heap's rows ------------------------------------------------------------------------
for my $c (0 .. $#centres)
{
	my ($x, $y) = @{ $centres[$c] };
	for my $r (0 .. $#radii)
	{
		for my $sph ('', ', false')
		{
			my $where = "ST_DWithin(geom::geography, @{[pt($x, $y)]}, $radii[$r]$sph)";
			my $heap = rows('ev', $where);
			is(rows('tr', $where), $heap, "($x, $y), $radii[$r] m$sph: the heap's answer ($heap)");
		}
	}
}

# ---- 2. PostGIS asked only near the circle -----------------------------------------------------
{
	my $s = tdb_scan_node($node, 'SELECT n FROM tr WHERE ST_DWithin(geom::geography, ' . pt(24.94, 60.17) . ', 3000)');
	my $near = $node->safe_psql('postgres', q{SELECT count(*) FROM ev
		WHERE abs(ST_Distance(geom::geography, ST_SetSRID(ST_MakePoint(24.94, 60.17), 4326)::geography) - 3000) <= 0.011});
	cmp_ok($s->{'Rows Checked by PostGIS'}, '<=', $near,
		"3 km: PostGIS asked about $s->{'Rows Checked by PostGIS'} rows, at most the $near within 1.1 cm of the circle");
	cmp_ok($s->{'Rows Checked by PostGIS'}, '>', 0, '3 km: and about some (the points within a centimetre)');
	my $far = tdb_scan_node($node, 'SELECT n FROM tr WHERE ST_DWithin(geom::geography, ' . pt(24.94, 60.17) . ', 2000)');
	is($far->{'Rows Checked by PostGIS'}, 0, '2 km, where no point lies near the circle: PostGIS asked about nothing');
	is($far->{'Actual Rows'}, $node->safe_psql('postgres', 'SELECT count(*) FROM ev WHERE ST_DWithin(geom::geography, '
		  . pt(24.94, 60.17) . ', 2000)'), '2 km: the heap\'s count');
}

# ---- 3. nearly antipodal -----------------------------------------------------------------------
for my $d (20003900, 20003930, 20003935, 20004000)
{
	for my $sph ('', ', false')
	{
		my $where = "ST_DWithin(geom::geography, @{[pt(0.0000001, 0)]}, $d$sph)";
		my $heap = rows('ev', $where);
		is(rows('tr', $where), $heap, "antipodes, $d m$sph: the heap's answer ($heap)");
	}
}

done_testing();
