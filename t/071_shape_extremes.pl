# t/071_shape_extremes.pl: map objects of format 2 store a shape's first
# point from its leaf box's corner (shape encoding 2, docs/object-format.md).
# Shapes at the extremes come back exactly as loaded: +-180 and +-90, points
# on the leaf box's edges, 1e-7-degree and world-wide segments, one point
# repeated, coordinates that are not 1e-7 multiples, 100,000 points.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('shapes', 'trafficdb.publish_interval' => "'1h'");
$node->safe_psql('postgres', q{
CREATE EXTENSION trafficdb CASCADE;
CREATE TABLE roads (id bigint PRIMARY KEY, geom geometry(LineString, 4326));
INSERT INTO roads VALUES
 (1, 'SRID=4326;LINESTRING(-180 -90,180 90)'),
 (2, 'SRID=4326;LINESTRING(180 90,-180 -90)'),
 (3, 'SRID=4326;LINESTRING(-180 90,180 -90)'),
 (4, 'SRID=4326;LINESTRING(179.9999999 89.9999999,180 90)'),
 (5, 'SRID=4326;LINESTRING(-180 -90,-179.9999999 -89.9999999)'),
 (6, 'SRID=4326;LINESTRING(0 0,0.0000001 0)'),
 (7, 'SRID=4326;LINESTRING(-0.0000001 -0.0000001,0 0)'),
 (8, 'SRID=4326;LINESTRING(24.9384567 60.1698765,24.9384567 60.1698765)'),
 (9, 'SRID=4326;LINESTRING(-122.4194155 37.7749295,-122.4194154 37.7749296,-122.4194155 37.7749295)'),
 (10, 'SRID=4326;LINESTRING(0.123456789012 0.987654321098,1.5 1.5)'),
 (11, 'SRID=4326;LINESTRING(-179.9999999 0,179.9999999 0)'),
 (12, 'SRID=4326;LINESTRING(13.3333333 52.6666667,13.3333334 52.6666666)'),
 (13, 'SRID=4326;LINESTRING(-73.9856644 40.7484405,-73.9856644 40.7484405,-73.9856644 40.7484405)'),
 (14, 'SRID=4326;LINESTRING(1e-7 -1e-7,-1e-7 1e-7)'),
 (15, 'SRID=4326;LINESTRING(-0.3 -0.7,0.3 0.7)');
INSERT INTO roads SELECT 100 + k, ST_SetSRID(ST_MakeLine(ARRAY(
  SELECT ST_MakePoint(round((-179.9 + k * 0.37 + i * 1e-7)::numeric, 7), round((-89.9 + k * 0.19 - i * 3e-7)::numeric, 7))
  FROM generate_series(0, 2 + k) i)), 4326)
  FROM generate_series(0, 300) k;
INSERT INTO roads SELECT 1000, ST_SetSRID(ST_MakeLine(ARRAY(
  SELECT ST_MakePoint(round((24 + i * 1e-5 * (1 + (i % 7)))::numeric, 7), round((60 + sin(i / 100.0))::numeric, 7))
  FROM generate_series(1, 100000) i)), 4326);
SELECT trafficdb.load_map('roads');
});

is($node->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.locations'),
	$node->safe_psql('postgres', 'SELECT count(*) FROM roads'), 'every road is a location');
is($node->safe_psql('postgres', q{
SELECT string_agg(r.id::text, ',' ORDER BY r.id) FROM roads r LEFT JOIN trafficdb.locations l ON l.location_id = r.id
 WHERE l.geom IS NULL OR ST_AsBinary(l.geom) <> ST_AsBinary(r.geom) OR NOT ST_Equals(l.geom, r.geom)
    OR ST_SRID(l.geom) <> 4326}), '', 'every shape comes back exactly as loaded');

$node->stop;
done_testing();
