# t/002_daemon.pl: the daemon loads a map, consumes the feed, publishes,
# reports rejects, notifies, and answers changes_since; a long reader does
# not stop publication.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('daemon', 'trafficdb.publish_interval' => "'200ms'", 'trafficdb.reader_pin_timeout' => "'2s'");

$node->safe_psql('postgres', q{
CREATE EXTENSION trafficdb CASCADE;
-- 400 short segments on a grid near Helsinki, ids 1..400
CREATE TABLE roads (id bigint PRIMARY KEY, geom geometry(LineString, 4326), highway text, name text, maxspeed int);
INSERT INTO roads
SELECT i, ST_MakeLine(ST_MakePoint(24.9 + (i % 20) * 0.001, 60.15 + (i / 20) * 0.001),
                      ST_MakePoint(24.9 + (i % 20) * 0.001 + 0.0008, 60.15 + (i / 20) * 0.001 + 0.0004)),
       CASE WHEN i % 3 = 0 THEN 'primary' ELSE 'residential' END,
       'Street ' || (i % 10), 30 + (i % 3) * 10
  FROM generate_series(1, 400) i;
});

# --- before any map is loaded, reads say so
my ($ret0, $out0, $err0) = $node->psql('postgres', 'SELECT * FROM trafficdb.locations');
like($err0, qr/trafficdb has no map loaded.*\n.*HINT:  Load one with SELECT trafficdb.load_map/s,
	'the locations table before the first map: a clear error with a hint');

# --- bad input to load_map gives clear errors
my ($ret, $out, $err) = $node->psql('postgres', q{SELECT trafficdb.load_map('roads', 'nope', 'geom')});
like($err, qr/column "nope" \(the id column\) does not exist in table roads/, 'missing id column named');
($ret, $out, $err) = $node->psql('postgres', q{SELECT trafficdb.load_map('roads', 'name', 'geom')});
like($err, qr/column "name" of roads has type text; the id column must be smallint, integer or bigint/, 'wrong id type named');
($ret, $out, $err) = $node->psql('postgres', q{SELECT trafficdb.load_map('roads', 'id', 'highway')});
like($err, qr/the geometry column must be geometry/, 'wrong geometry type named');
($ret, $out, $err) = $node->psql('postgres', q{SELECT trafficdb.publish()});
like($err, qr/no map loaded/, 'publish without a map says so');

# --- SRID 0 is refused, other SRIDs are transformed
$node->safe_psql('postgres', q{
CREATE TABLE roads0 (id int, geom geometry);
INSERT INTO roads0 VALUES (1, 'LINESTRING(0 0, 1 1)');
});
($ret, $out, $err) = $node->psql('postgres', q{SELECT trafficdb.load_map('roads0')});
like($err, qr/1 geometries in roads0.geom have SRID 0 \(unknown\)/, 'SRID 0 refused with a hint');

# --- load the map
is($node->safe_psql('postgres', q{SELECT trafficdb.load_map('roads', 'id', 'geom', 'highway', 'name', 'maxspeed')}),
	'400', 'load_map returns the number of locations');
my $gen0 = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
cmp_ok($gen0, '>=', 1, 'a generation is published');
is($node->safe_psql('postgres', q{SELECT count(*), count(DISTINCT road_class), min(speed_limit_kmh), max(speed_limit_kmh)
  FROM trafficdb.current_traffic()}), '400|2|30|50', 'every location is readable with its attributes');
is($node->safe_psql('postgres', q{SELECT count(*) FROM trafficdb.current_traffic() t JOIN roads r ON r.id = t.location_id
  WHERE ST_Equals(t.geom, r.geom) AND t.name = r.name AND abs(t.length_m - ST_Length(r.geom::geography)) < 0.5}),
	'400', 'geometry, names and lengths are exact');
is($node->safe_psql('postgres', q{SELECT source::text, id_column, locations FROM trafficdb.map_source}),
	'roads|id|400', 'the map source is recorded');

# --- the feed: good rows published, bad rows rejected with a reason
$node->safe_psql('postgres', q{
INSERT INTO trafficdb.feed (location_id, speed_kmh, free_flow_kmh, congestion, confidence, incident)
VALUES (1, 12.5, 50, 3, 90, 'accident'), (2, 40, 50, 1, 80, NULL), (3, 0, 30, 4, 70, NULL),
       (999999, 10, 10, 0, 50, NULL),      -- unknown location
       (4, 500, 50, 0, 50, NULL),          -- speed out of range
       (5, 20, 50, 9, 50, NULL),           -- congestion out of range
       (6, 20, 50, 1, 101, NULL);          -- confidence out of range
});
my $gen1 = $node->safe_psql('postgres', 'SELECT trafficdb.publish()');
cmp_ok($gen1, '>', $gen0, 'publish() returns a newer generation');
is($node->safe_psql('postgres', q{SELECT location_id, speed_kmh, free_flow_kmh, congestion, confidence, coalesce(incident, '-')
  FROM trafficdb.current_traffic(ARRAY[1, 2, 3, 4]) ORDER BY 1}),
	"1|12.5|50|3|90|accident\n2|40|50|1|80|-\n3|0|30|4|70|-\n4|||||-", 'good rows are published exactly');
is($node->safe_psql('postgres', q{SELECT location_id, reason FROM trafficdb.feed_rejects ORDER BY location_id}),
	"4|speed_kmh 500 is outside [0, 400]\n5|congestion 9 is outside [0, 4]\n6|confidence 101 is outside [0, 100]\n999999|unknown location_id: not in the loaded map",
	'bad rows are rejected with their reason');
is($node->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.feed'), '0', 'the feed is consumed');
is($node->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.traffic_state'), '3', 'traffic state persisted');

# --- an older observation does not overwrite a newer one
$node->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh, observed_at) VALUES (2, 99, now() - interval '1 hour')});
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
is($node->safe_psql('postgres', 'SELECT speed_kmh FROM trafficdb.current_traffic(ARRAY[2])'), '40', 'older observations lose');

# --- rows of one transaction share observed_at: the later row wins
$node->safe_psql('postgres', q{BEGIN; INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (9, 10);
  INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (9, 20); COMMIT;});
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
is($node->safe_psql('postgres', 'SELECT speed_kmh FROM trafficdb.current_traffic(ARRAY[9])'), '20',
	'of two rows observed at the same instant, the later one wins');

# --- a failed load leaves the published map as it was
$node->safe_psql('postgres', q{CREATE TABLE dup (id int, geom geometry(LineString, 4326));
  INSERT INTO dup VALUES (1, 'SRID=4326;LINESTRING(25 60, 25.001 60.001)'), (1, 'SRID=4326;LINESTRING(25 60, 25.002 60.002)');});
($ret, $out, $err) = $node->psql('postgres', q{SELECT trafficdb.load_map('dup')});
like($err, qr/location id 1 appears more than once/, 'duplicate ids refused, naming the id');
is($node->safe_psql('postgres', 'SELECT count(*), max(speed_kmh) FILTER (WHERE location_id = 1) FROM trafficdb.current_traffic()'),
	'400|12.5', 'the previous map and its traffic are still published');
is($node->safe_psql('postgres', 'SELECT source::text FROM trafficdb.map_source'), 'roads', 'and still recorded');

# --- the source is read with the caller's privileges (row security applies)
$node->safe_psql('postgres', q{
CREATE ROLE mapper LOGIN;
GRANT EXECUTE ON FUNCTION trafficdb.load_map TO mapper;
CREATE TABLE secret_roads AS SELECT * FROM roads;
ALTER TABLE secret_roads ENABLE ROW LEVEL SECURITY;
CREATE POLICY only_some ON secret_roads FOR SELECT TO mapper USING (id <= 50);
});
($ret, $out, $err) = $node->psql('postgres', q{SET ROLE mapper; SELECT trafficdb.load_map('secret_roads')});
like($err, qr/permission denied to read table secret_roads/, 'no SELECT privilege, no load');
$node->safe_psql('postgres', 'GRANT SELECT ON secret_roads TO mapper');
is($node->safe_psql('postgres', q{SET ROLE mapper; SELECT trafficdb.load_map('secret_roads')}), '50',
	'row security of the caller applies to the load');

# a source of several fetch batches (10,000 rows each) whose point counts
# grow: every shape must come through exact (the parse buffer outlives the
# per-batch memory the loader resets)
$node->safe_psql('postgres', q{CREATE TABLE big AS SELECT i::bigint AS id,
  ST_SetSRID(ST_MakeLine(ARRAY(SELECT ST_MakePoint(24 + i * 0.00001 + k * 0.0001, 60 + k * 0.0001)
                               FROM generate_series(0, 1 + i / 2500) k)), 4326) AS geom
  FROM generate_series(1, 25000) i});
is($node->safe_psql('postgres', q{SELECT trafficdb.load_map('big')}), '25000', 'a map of three batches loads');
is($node->safe_psql('postgres', q{SELECT count(*) FROM trafficdb.locations t JOIN big b ON b.id = t.location_id
  WHERE ST_Equals(t.geom, b.geom)}), '25000', 'every shape of every batch is exact');

is($node->safe_psql('postgres', q{SELECT trafficdb.load_map('roads', 'id', 'geom', 'highway', 'name', 'maxspeed')}),
	'400', 'the full map loads again for its owner');

# --- changes_since and NOTIFY
my $gen2 = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
$node->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (7, 33), (8, 44), (7, 35)});
$out = $node->safe_psql('postgres', q{LISTEN trafficdb_publish; SELECT trafficdb.publish(); SELECT pg_sleep(0.3);});
like($out, qr/Asynchronous notification "trafficdb_publish" with payload "\d+" received/, 'NOTIFY on publish');
is($node->safe_psql('postgres', "SELECT location_id, speed_kmh FROM trafficdb.changes_since($gen2) ORDER BY 1"),
	"7|35\n8|44", 'changes_since lists exactly the changed locations');
($ret, $out, $err) = $node->psql('postgres', 'SELECT * FROM trafficdb.changes_since(-1)');
like($err, qr/generation -1 is negative/, 'negative generation refused');

# --- READ COMMITTED: a session idle in a transaction holds no version
my $rc = $node->background_psql('postgres');
$rc->query_safe('BEGIN');
$rc->query_safe('SELECT count(*) FROM trafficdb.current_traffic(ARRAY[1])');
my $rc_pid = $rc->query_safe('SELECT pg_backend_pid()');
is($node->safe_psql('postgres', "SELECT count(*) FROM trafficdb.readers WHERE pid = $rc_pid"), '0',
	'a READ COMMITTED statement releases its version when it ends');
$rc->query_safe('COMMIT');
$rc->quit;

# --- REPEATABLE READ sees one generation; a long reader does not stop publication.
# (Its version is revoked reader_pin_timeout after it is superseded: 2 s, so
# that the publications below and its next read fit in that on a loaded
# machine; t/014 tests the revocation.)
my $rr = $node->background_psql('postgres');
$rr->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
my $rr_gen = $rr->query_safe('SELECT max(generation) FROM trafficdb.current_traffic(ARRAY[1])');
for my $i (1 .. 5)
{
	$node->safe_psql('postgres', "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, $i)");
	$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
}
my $now_gen = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
cmp_ok($now_gen, '>=', $rr_gen + 5, 'publication went on while a reader held a version');
is($rr->query_safe('SELECT max(generation), max(speed_kmh) FROM trafficdb.current_traffic(ARRAY[1])'),
	"$rr_gen|12.5", 'the REPEATABLE READ transaction still sees its generation');
my $rr_pid = $rr->query_safe('SELECT pg_backend_pid()');
is($node->safe_psql('postgres', "SELECT kind, generation FROM trafficdb.readers WHERE pid = $rr_pid"),
	"backend|$rr_gen", 'the reader is listed with the generation it holds');
ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM trafficdb.readers WHERE late AND generation = $rr_gen"),
	'the long reader is reported as late');
$rr->query_safe('COMMIT');
is($rr->query_safe('SELECT max(generation) FROM trafficdb.current_traffic(ARRAY[1])'), $now_gen,
	'after commit the reader sees the latest generation');
$rr->quit;
ok($node->poll_query_until('postgres', 'SELECT count(*) = 0 FROM trafficdb.readers WHERE late'),
	'no late readers after release');

# --- status
is($node->safe_psql('postgres', q{SELECT locations, map_bytes > 0, traffic_bytes = 64 + 400 * 32 + 64 OR traffic_bytes > 0,
  bytes_per_location > 0, feed_rows_rejected FROM trafficdb.status}), '400|t|t|t|4', 'status reports sizes and rejects');

# --- a map reload keeps traffic of the locations that remain
$node->safe_psql('postgres', 'DELETE FROM roads WHERE id > 300');
is($node->safe_psql('postgres', q{SELECT trafficdb.load_map('roads', 'id', 'geom', 'highway', 'name', 'maxspeed')}), '300', 'reload');
is($node->safe_psql('postgres', 'SELECT speed_kmh FROM trafficdb.current_traffic(ARRAY[1, 350])'), '5', 'traffic kept across reload');

$node->stop;
done_testing();
