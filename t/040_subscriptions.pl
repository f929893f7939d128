# t/040_subscriptions.pl: subscriptions as rows of trafficdb.subscriptions
# (issue 18, first piece): bad filters refused naming the value; the daemon
# loads and indexes the rest after each committed change, and at each
# publication counts the events the changed locations make
# (status.last_events), as the definitions give them.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('subs', 'trafficdb.publish_interval' => "'1h'");
tdb_grid_map($node);

sub refused
{
	my ($values, $expect, $what) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "INSERT INTO trafficdb.subscriptions $values");
	like($err, $expect, $what);
}
refused(q{(center, radius_m) VALUES (ST_SetSRID(ST_MakePoint(24.92, 60.16), 4326), -5)}, qr/radius -5 m/, 'a negative radius');
refused(q{(center, radius_m) VALUES (ST_SetSRID(ST_MakePoint(24.92, 60.16), 4326), 'NaN')}, qr/radius nan m/, 'a NaN radius');
refused(q{(center, radius_m) VALUES (ST_MakePoint(24.92, 60.16), 50)}, qr/center has SRID 0/, 'a centre without SRID');
refused(q{(area) VALUES ('SRID=4326;POLYGON EMPTY')}, qr/area is an empty polygon/, 'an empty polygon');
refused(q{(area) VALUES ('SRID=4326;LINESTRING(24.9 60.1, 25 60.2)')}, qr/area is a LINESTRING/, 'a line as area');
refused(q{(area) VALUES (ST_Transform(ST_MakeEnvelope(24.9, 60.1, 25, 60.2, 4326), 3857))}, qr/area has SRID 3857/, 'an area in 3857');
refused(q{(location_ids) VALUES ('{5, 99999}')}, qr/location id 99999 is not in the published map/, 'an unknown id');
refused(q{(location_ids) VALUES ('{}')}, qr/list of location ids is empty/, 'no ids');
refused(q{(location_ids, condition, value) VALUES ('{5}', 'congestion_at_least', 9)}, qr/congestion 9 is out of range/, 'a congestion out of range');
refused(q{(location_ids, condition) VALUES ('{5}', 'speed_below')}, qr/condition speed_below has no value/, 'a condition without value');
refused(q{(location_ids, events) VALUES ('{5}', 'enter_exit')}, qr/enter and exit events need a condition/, 'enter/exit without a condition');
refused(q{(location_ids, center, radius_m) VALUES ('{5}', ST_SetSRID(ST_MakePoint(24.92, 60.16), 4326), 5)},
	qr/subscriptions_one_place/, 'two places at once');
is($node->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.subscriptions'), '0', 'nothing of them stored');

# ids 1..2000 lie on a grid from (24.9, 60.15): 40 per row.  Subscriptions
# are matched only when someone receives them (a session, a tap or, here,
# notify): issue 28, item 5.
$node->safe_psql('postgres', q{
INSERT INTO trafficdb.subscriptions (name, location_ids, notify) VALUES ('ids', '{5, 6, 7}', true);
INSERT INTO trafficdb.subscriptions (name, area, condition, value, events, notify)
  VALUES ('jams in a box', ST_MakeEnvelope(24.899, 60.1495, 24.9095, 60.1515, 4326), 'congestion_at_least', 3, 'enter_exit', true);
INSERT INTO trafficdb.subscriptions (name, center, radius_m, condition, value, notify)
  VALUES ('slow near', ST_SetSRID(ST_MakePoint(24.9005, 60.1502), 4326), 300, 'speed_below', 20, true);
});
# the daemon loads them at its next cycle
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
is($node->safe_psql('postgres', 'SELECT subscriptions FROM trafficdb.status'), '3', 'the daemon loaded three subscriptions');

# the expected events, from the definitions, by SQL over the published locations
sub expected
{
	my ($feed) = @_;
	my $before = $node->safe_psql('postgres', q{CREATE TEMP TABLE IF NOT EXISTS b AS SELECT 1; DROP TABLE b;
		CREATE TABLE IF NOT EXISTS before_pub AS SELECT location_id, speed_kmh, congestion FROM trafficdb.locations WHERE false;
		TRUNCATE before_pub; INSERT INTO before_pub SELECT location_id, speed_kmh, congestion FROM trafficdb.locations;});
	$node->safe_psql('postgres', "INSERT INTO trafficdb.feed (location_id, speed_kmh, congestion) VALUES $feed; SELECT trafficdb.publish()");
	return $node->safe_psql('postgres', q{
WITH changed AS (
  SELECT l.location_id, l.geom, l.speed_kmh AS s1, l.congestion AS c1, b.speed_kmh AS s0, b.congestion AS c0
    FROM trafficdb.locations l JOIN before_pub b USING (location_id)
   WHERE l.changed_generation = (SELECT generation FROM trafficdb.status))
SELECT (SELECT count(*) FROM changed, trafficdb.subscriptions s
         WHERE s.name = 'ids' AND location_id = ANY (s.location_ids))
     + (SELECT count(*) FROM changed, trafficdb.subscriptions s
         WHERE s.name = 'jams in a box' AND geom && s.area
           AND (coalesce(c0 >= 3, false) <> coalesce(c1 >= 3, false)))
     + (SELECT count(*) FROM changed, trafficdb.subscriptions s
         WHERE s.name = 'slow near' AND ST_DWithin(geom::geography, s.center::geography, s.radius_m)
           AND coalesce(s1 < 20, false))});
}
my @rounds = (
	q{(5, 50, 1), (6, 10, 4), (1, 10, 4), (2, 30, 3), (500, 5, 4)},
	q{(1, 50, 0), (2, 30, 3), (3, 10, 4), (7, 12, 2), (41, 8, 3)},
	q{(1, 50, 0), (2, 50, 0), (3, 50, 0), (41, 50, 1), (1999, 1, 4)},
);
for my $i (0 .. $#rounds)
{
	my $want = expected($rounds[$i]);
	is($node->safe_psql('postgres', 'SELECT last_events FROM trafficdb.status'), $want,
		"publication $i: the events the definitions give ($want)");
}

# LISTEN on a subscription's channel
my $id = $node->safe_psql('postgres', q{INSERT INTO trafficdb.subscriptions (name, location_ids, notify)
  VALUES ('told', '{100, 101}', true) RETURNING id});
my $key = $node->safe_psql('postgres', "SELECT notify_key FROM trafficdb.subscriptions WHERE id = $id");
like($key, qr/^[0-9a-f]{24}$/, 'a subscription has a random notify key');
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
my ($ret, $out, $err) = $node->psql('postgres', qq{LISTEN trafficdb_subscription_${id}_$key;
INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (100, 33), (101, 34), (102, 35);
SELECT trafficdb.publish();
SELECT pg_sleep(0.2);});
my $gen = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
like($out . $err, qr/notification "trafficdb_subscription_${id}_$key" with payload "$gen 2"/,
	'LISTEN trafficdb_subscription_<id>_<notify_key>: the generation and its two events, at the commit');

# a change of the subscriptions is picked up at the next cycle
$node->safe_psql('postgres', q{DELETE FROM trafficdb.subscriptions WHERE name = 'ids'; SELECT trafficdb.publish()});
is($node->safe_psql('postgres', 'SELECT subscriptions FROM trafficdb.status'), '3', 'a deleted subscription is dropped');

done_testing();
