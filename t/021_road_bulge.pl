# t/021_road_bulge.pl: roads whose own geography edges bulge past their
# vertices.  A geography edge is a great-circle arc: a long east-west road
# runs poleward of its endpoints' latitude (by about 485 m for a 2-degree
# edge at 60 N), while the R-tree holds the box of its vertices.  Geography
# queries near the arc's apex (ST_DWithin, ST_Intersects on geography, the
# nearest in metres) must find the road as the heap does.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('road_bulge', 'trafficdb.publish_interval' => "'100ms'");

# Long east-west roads (ids 1..6) at both hemispheres, and short roads
# around them (seeded), so that the box queries have other candidates.
$node->safe_psql('postgres', q{
CREATE EXTENSION trafficdb CASCADE;
SELECT setseed(0.25);
CREATE TABLE long_roads (id bigint, lon0 float8, lon1 float8, lat float8);
INSERT INTO long_roads VALUES (1, 10, 12, 60), (2, 20, 20.5, 45), (3, -5, -3, -45),
  (4, 30, 30.25, 70), (5, 100, 101, 10), (6, 150, 150.3, -35);
CREATE TABLE roads AS
SELECT id, ST_SetSRID(ST_MakeLine(ST_MakePoint(lon0, lat), ST_MakePoint(lon1, lat)), 4326) AS geom FROM long_roads
UNION ALL
SELECT 1000 + i, ST_SetSRID(ST_MakeLine(ST_MakePoint(x, y), ST_MakePoint(x + 0.001, y + 0.0005)), 4326)
  FROM (SELECT i, l.lon0 + random() * (l.lon1 - l.lon0) AS x, l.lat + (random() - 0.3) * 0.05 * sign(l.lat) AS y
          FROM generate_series(1, 1200) i JOIN long_roads l ON l.id = 1 + i % 6) s;
CREATE INDEX ON roads USING gist ((geom::geography));
ANALYZE roads;
-- the apex of each long road's arc, and points around it
CREATE TABLE apex AS
SELECT id, lon, degrees(atan(tan(radians(lat)) / cos(radians((lon1 - lon0) / 2)))) AS alat
  FROM (SELECT *, (lon0 + lon1) / 2 AS lon FROM long_roads) l;
SELECT trafficdb.load_map('roads', 'id', 'geom');
SELECT trafficdb.publish();
});

my $bulge = $node->safe_psql('postgres',
	q{SELECT round(max(abs(alat - l.lat)) * 111195) FROM apex a JOIN long_roads l USING (id)});
cmp_ok($bulge, '>=', 400, "the longest road's arc leaves its vertex box by $bulge m");

# At each apex: the road itself is within 10 m (on the sphere and the spheroid).
for my $spheroid ('true', 'false')
{
	my $q = "SELECT a.id, (SELECT array_agg(r.id ORDER BY r.id) FROM T r
	  WHERE ST_DWithin(r.geom::geography, ST_SetSRID(ST_MakePoint(a.lon, a.alat), 4326)::geography, 10, $spheroid)) FROM apex a ORDER BY 1";
	(my $heap = $q) =~ s/\bT\b/roads/;
	(my $fdw = $q) =~ s/\bT\b/trafficdb.locations/;
	$fdw =~ s/r\.id/r.location_id/g;
	my $want = $node->safe_psql('postgres', $heap);
	like($want, qr/^1\|\{1\}$/m, "the heap finds road 1 at its apex (spheroid $spheroid)");
	is($node->safe_psql('postgres', $fdw), $want, "ST_DWithin at each apex, spheroid $spheroid: the heap's roads");
}

# 300 random points around the apexes: ST_DWithin, geography ST_Intersects
# with a small buffer, and the nearest road in metres.
my $pts = q{SELECT setseed(0.5);
CREATE TABLE pts AS SELECT i, ST_SetSRID(ST_MakePoint(a.lon + (random() - 0.5) * 0.2, a.alat + (random() - 0.5) * 0.02), 4326) AS pt
  FROM generate_series(1, 300) i JOIN apex a ON a.id = 1 + i % 6};
$node->safe_psql('postgres', $pts);
my %forms = (
	'ST_DWithin 300 m' => 'SELECT array_agg(r.ID ORDER BY r.ID) FROM T r WHERE ST_DWithin(r.geom::geography, p.pt::geography, 300)',
	'ST_Intersects a 400 m buffer' =>
	  'SELECT array_agg(r.ID ORDER BY r.ID) FROM T r WHERE ST_Intersects(r.geom::geography, ST_Buffer(p.pt::geography, 400))',
	'nearest in metres' => 'SELECT array_agg(ID) FROM (SELECT r.ID FROM T r ORDER BY r.geom::geography <-> p.pt::geography, r.ID LIMIT 1) n');
for my $what (sort keys %forms)
{
	my $q = "SELECT count(*) FILTER (WHERE f IS DISTINCT FROM h), count(*) FILTER (WHERE 1 = ANY (h) OR 2 = ANY (h) OR 3 = ANY (h)
	  OR 4 = ANY (h) OR 5 = ANY (h) OR 6 = ANY (h)) FROM (SELECT (FDW) AS f, (HEAP) AS h FROM pts p) x";
	(my $fdw = $forms{$what}) =~ s/\bT\b/trafficdb.locations/;
	$fdw =~ s/\bID\b/location_id/g;
	(my $heap = $forms{$what}) =~ s/\bT\b/roads/;
	$heap =~ s/\bID\b/id/g;
	$q =~ s/FDW/$fdw/;
	$q =~ s/HEAP/$heap/;
	my ($wrong, $long) = split /\|/, $node->safe_psql('postgres', $q);
	is($wrong, 0, "$what: 300 points around the apexes agree with the heap");
	cmp_ok($long, '>=', 30, "$what: $long of them find a long road");
}

$node->stop;
done_testing();
