# t/036_region_prune.pl: the planner hook of the fleet (module/regions.c)
# leaves a foreign table out of a plan when its CHECK (geom @ bounds) makes a
# spatial clause false.  It may only do so when the clause is a monotone
# predicate of the column itself: ST_Intersects(ST_Centroid(geom), box) is
# false for the bounds (the centroid of the bounds is far from the box) yet
# true for rows inside them, and the hook used to drop those rows without a
# word (likewise ST_StartPoint, ST_PointN, ST_Boundary, and "box ~ geom",
# where the column is the contained side).  Every query here must give the
# rows of the same query on the local tables; the ones the hook can prune
# must still be pruned.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('prune');
tdb_grid_map($node);
my ($host, $port) = ($node->host, $node->port);
# two foreign tables through a loopback postgres_fdw server, each over a
# local table whose rows really lie inside the bounds its CHECK states
$node->safe_psql('postgres', qq{
CREATE EXTENSION postgres_fdw;
CREATE SERVER loop FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$host', port '$port', dbname 'postgres', extensions 'postgis');
CREATE USER MAPPING FOR CURRENT_USER SERVER loop;
CREATE TABLE r_west AS SELECT * FROM roads WHERE ST_XMax(geom) < 24.94;
CREATE TABLE r_east AS SELECT * FROM roads WHERE ST_XMax(geom) >= 24.94;
CREATE TABLE r_all AS SELECT * FROM r_west UNION ALL SELECT * FROM r_east;
CREATE FOREIGN TABLE f_west (id bigint, name text, geom geometry) SERVER loop OPTIONS (table_name 'r_west');
CREATE FOREIGN TABLE f_east (id bigint, name text, geom geometry) SERVER loop OPTIONS (table_name 'r_east');
ALTER FOREIGN TABLE f_west ADD CONSTRAINT wb CHECK (geom @ 'SRID=4326;POLYGON((24.89 60.14,24.94 60.14,24.94 60.21,24.89 60.21,24.89 60.14))'::geometry);
ALTER FOREIGN TABLE f_east ADD CONSTRAINT eb CHECK (geom @ 'SRID=4326;POLYGON((24.93 60.14,25 60.14,25 60.21,24.93 60.21,24.93 60.14))'::geometry);
CREATE VIEW g AS SELECT * FROM f_west UNION ALL SELECT * FROM f_east;
});
is($node->safe_psql('postgres', q{SELECT count(*) FROM r_west WHERE NOT geom @ 'SRID=4326;POLYGON((24.89 60.14,24.94 60.14,24.94 60.21,24.89 60.21,24.89 60.14))'::geometry}),
	'0', 'the west rows lie inside the west bounds');

my $box = 'ST_MakeEnvelope(24.90, 60.15, 24.905, 60.16, 4326)';
my @where = (
	"ST_Intersects(ST_Centroid(geom), $box)",
	"ST_Intersects(ST_StartPoint(geom), $box)",
	"ST_Intersects(ST_PointN(geom, 2), $box)",
	"ST_Intersects(ST_Boundary(geom), $box)",
	"$box ~ geom",
	"ST_DWithin(ST_EndPoint(geom), $box, 0.0001)",
	"ST_DWithin(ST_Centroid(geom)::geography, ST_Centroid($box)::geography, 300)",
	"geom && $box",
	"ST_Intersects(geom, $box)",
	"ST_DWithin(geom::geography, ST_Centroid($box)::geography, 300)",
	"geom ~ 'SRID=4326;POINT(24.9025 60.1512)'::geometry",
);
for my $w (@where)
{
	my $want = $node->safe_psql('postgres', "SELECT count(*) || ' ' || coalesce(md5(string_agg(id::text, ',' ORDER BY id)), '-') FROM r_all WHERE $w");
	my $got = $node->safe_psql('postgres', "SELECT count(*) || ' ' || coalesce(md5(string_agg(id::text, ',' ORDER BY id)), '-') FROM g WHERE $w");
	like($want, qr/^[1-9]/, "rows exist: $w");
	is($got, $want, "through the foreign tables, the same rows: $w");
}

# what the hook may prune, it still prunes
sub scans
{
	my ($w) = @_;
	my $plan = $node->safe_psql('postgres', "EXPLAIN (COSTS OFF) SELECT * FROM g WHERE $w");
	return join(',', $plan =~ /Foreign Scan on (\w+)/g);
}
is(scans("geom && $box"), 'f_west', 'a box in the west: only the west table is scanned');
is(scans("ST_Intersects(geom, $box)"), 'f_west', 'ST_Intersects of the column: pruned');
is(scans("ST_DWithin(geom::geography, ST_Centroid($box)::geography, 300)"), 'f_west', 'ST_DWithin of geom::geography: pruned');
is(scans("geom ~ 'SRID=4326;POINT(24.9025 60.1512)'::geometry"), 'f_west', 'geom ~ (contains) a point: pruned');
is(scans("ST_Intersects(ST_Centroid(geom), $box)"), 'f_west,f_east', 'a function of the column: no pruning');
is(scans("$box ~ geom"), 'f_west,f_east', 'box ~ geom (the column contained): no pruning');

done_testing();
