# t/076_publish_radix.pl: on a map of 40,000 locations a generation of 600 to
# 1,200 changes sorts its changed records by radix (above 512, below
# count / 32: bgworker/publish.c sort_pending) for the object and the log
# record; readers see what was written, with incidents, and a restart replays
# every generation byte-identically.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('radix', 'trafficdb.publish_interval' => "'1h'", 'trafficdb.checkpoint_interval' => '1000',
	'trafficdb.log_retention' => "'1h'", 'trafficdb.log_retention_generations' => '1000');
$node->safe_psql('postgres', q{
CREATE EXTENSION trafficdb CASCADE;
CREATE TABLE roads AS SELECT i::bigint AS id,
  ST_SetSRID(ST_MakeLine(ST_MakePoint(20 + (i % 200) * 0.001, 60 + (i / 200) * 0.001),
                         ST_MakePoint(20 + (i % 200) * 0.001 + 0.0005, 60 + (i / 200) * 0.001)), 4326) AS geom
  FROM generate_series(1, 40000) i;
SELECT trafficdb.load_map('roads');
CREATE TABLE model (id bigint PRIMARY KEY, speed real, incident text);
INSERT INTO model SELECT id, NULL, NULL FROM roads;
});

for my $round (1 .. 4)
{
	my $n = 600 + 200 * $round;
	$node->safe_psql('postgres', qq{
SELECT setseed($round / 10.0);
CREATE TEMP TABLE u AS
SELECT DISTINCT ON (id) id, speed, incident FROM (
  SELECT (random() * 39999)::int + 1 AS id, round((random() * 120)::numeric, 1)::real AS speed,
         CASE WHEN random() < 0.3 THEN repeat('x', (random() * 30)::int) || ' closed' END AS incident,
         g FROM generate_series(1, $n) g) s ORDER BY id, g DESC;
INSERT INTO trafficdb.feed (location_id, speed_kmh, incident, observed_at)
SELECT id, speed, incident, clock_timestamp() FROM u ORDER BY random();
UPDATE model m SET speed = u.speed, incident = u.incident FROM u WHERE m.id = u.id;
SELECT trafficdb.publish();
});
	is($node->safe_psql('postgres', q{
SELECT count(*) FROM model m FULL JOIN trafficdb.locations l ON l.location_id = m.id
 WHERE l.location_id IS NULL OR m.id IS NULL OR l.speed_kmh IS DISTINCT FROM m.speed
    OR l.incident IS DISTINCT FROM m.incident}), '0', "round $round ($n changes): every location reads as written");
}
my $gen = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
$node->restart;
$node->poll_query_until('postgres', "SELECT generation >= $gen AND daemon_pid IS NOT NULL FROM trafficdb.status")
  or die 'no daemon after the restart';
is($node->safe_psql('postgres', 'SELECT replay_mismatches FROM trafficdb.status'), '0', 'replayed byte-identically');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM model m JOIN trafficdb.locations l ON l.location_id = m.id
 WHERE l.speed_kmh IS DISTINCT FROM m.speed OR l.incident IS DISTINCT FROM m.incident}), '0', 'after the restart');

$node->stop;
done_testing();
