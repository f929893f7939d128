# t/038_region_feed_owned.pl: the feed's region check (CHECK
# feed_location_in_region, trafficdb._feed_owned) for the roles that really
# write the feed.  A writer with the grants the README asks for (INSERT on
# trafficdb.feed, USAGE on its sequence) got "permission denied for table
# map_source" for any location the region's map lacks, instead of the
# region's name and server (another region's location), or instead of the
# row being taken (an id no region knows: rejected at publication).  With
# the map's source table dropped, the same rows failed with a syntax error
# ("FROM 16384": the dropped regclass printed as a number).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('owned', 'trafficdb.publish_interval' => "'1h'");
$node->safe_psql('postgres', q{
CREATE EXTENSION trafficdb CASCADE;
CREATE EXTENSION postgres_fdw;
CREATE SERVER srv_w FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host 'west.example', port '5432', dbname 'traffic', extensions 'postgis');
CREATE SERVER srv_e FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host 'east.example', port '5433', dbname 'traffic', extensions 'postgis');
CREATE TABLE roads AS
SELECT i::bigint AS id,
       ST_SetSRID(ST_MakeLine(ST_MakePoint(24.9 + (i % 40) * 0.002, 60.15 + (i / 40) * 0.001),
                              ST_MakePoint(24.9 + (i % 40) * 0.002 + 0.001, 60.15 + (i / 40) * 0.001 + 0.0005)), 4326) AS geom
  FROM generate_series(1, 2000) i;
REVOKE ALL ON roads FROM PUBLIC;
INSERT INTO trafficdb.regions (name, area, bounds, server) VALUES
 ('w', ST_Multi(ST_MakeEnvelope(24.80, 60.00, 24.94, 60.30, 4326)), ST_MakeEnvelope(24.80, 60.00, 24.95, 60.30, 4326), 'srv_w'),
 ('e', ST_Multi(ST_MakeEnvelope(24.94, 60.00, 25.10, 60.30, 4326)), ST_MakeEnvelope(24.93, 60.00, 25.10, 60.30, 4326), 'srv_e');
SELECT trafficdb.load_map('roads', 'id', 'geom', region => 'w');
CREATE ROLE feeder LOGIN;
GRANT INSERT ON trafficdb.feed TO feeder;
GRANT USAGE ON SEQUENCE trafficdb.feed_seq_seq TO feeder;
});
my $w_loc = $node->safe_psql('postgres', q{SELECT min(id) FROM roads WHERE trafficdb.region_of(geom) = 'w'});
my $e_loc = $node->safe_psql('postgres', q{SELECT min(id) FROM roads WHERE trafficdb.region_of(geom) = 'e'});
is($node->safe_psql('postgres', 'SELECT region FROM trafficdb.status'), 'w', 'the node serves region w');
my $su = tdb_superuser($node);	# the bootstrap superuser (postgres as root, the OS user's name otherwise)

sub feed
{
	my ($role, $id) = @_;
	my ($ret, $out, $err) = $node->psql('postgres',
		qq{\\set VERBOSITY verbose\nSET ROLE "$role"; INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES ($id, 10)});
	return $err;
}
is(feed('feeder', $w_loc), '', 'a feed writer writes a location of its region');
my $err = feed('feeder', $e_loc);
like($err, qr/23514: location $e_loc belongs to region "e", not to region "w"/,
	'a feed writer\'s row of region e: refused, naming the region (not "permission denied")');
like($err, qr/server "srv_e" \(host=east\.example port=5433 dbname=traffic\)/, '... and its server');
is(feed('feeder', 987654321), '', 'a feed writer\'s row of an id no region knows: taken (rejected at publication)');
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
is($node->safe_psql('postgres', 'SELECT location_id, reason FROM trafficdb.feed_rejects'),
	'987654321|unknown location_id: not in the loaded map', '... and rejected at publication');

# the map's source dropped (the map stays loaded)
$node->safe_psql('postgres', q{CREATE TABLE roads2 AS SELECT * FROM roads;
  SELECT trafficdb.load_map('roads2', 'id', 'geom', region => 'w'); DROP TABLE roads2});
is(feed($su, $w_loc), '', 'source dropped: a location of the region is written');
$err = feed($su, $e_loc);
unlike($err, qr/syntax error/, 'source dropped: a location the map lacks is no syntax error');
is($err, '', '... it is taken (its owner cannot be known; rejected at publication)');
is(feed('feeder', 987654321), '', '... likewise for a feed writer');

done_testing();
