# t/010_daemon_guards.pl: the daemon runs SQL as a superuser; nothing a
# user controls may make it run theirs (issue 13).
#
# A role with EXECUTE on load_map and CREATE in a schema of its own loads a
# view whose function changes search_path (and lock_timeout) for the rest of
# the daemon's session, and defines functions of its own named like those the
# daemon calls (now, unnest, quote_ident).  Before the fix, the daemon's next
# publication called the role's now() as superuser, which made the role
# superuser.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('guards', 'trafficdb.publish_interval' => "'100ms'");
$node->safe_psql('postgres', q{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE ROLE mallory LOGIN;
CREATE SCHEMA m AUTHORIZATION mallory;
GRANT EXECUTE ON FUNCTION trafficdb.load_map TO mallory;
});

$node->safe_psql('postgres', q{
SET ROLE mallory;
CREATE TABLE m.calls (fn text, who text);
GRANT INSERT ON m.calls TO PUBLIC;
CREATE TABLE m.roads (id bigint, geom public.geometry(LineString, 4326));
INSERT INTO m.roads SELECT i, public.ST_SetSRID(public.ST_MakeLine(public.ST_MakePoint(24.9 + i * 0.001, 60.1),
  public.ST_MakePoint(24.9 + i * 0.001, 60.101)), 4326) FROM generate_series(1, 20) i;
-- what the daemon must never call: each records who ran it, then tries to escalate
CREATE FUNCTION m.grab() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO m.calls VALUES ('grab', current_user);
  BEGIN
    EXECUTE 'ALTER ROLE mallory SUPERUSER';
  EXCEPTION WHEN others THEN NULL;
  END;
END $$;
CREATE FUNCTION m.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN PERFORM m.grab(); RETURN pg_catalog.now(); END $$;
CREATE FUNCTION m.quote_ident(text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM m.grab(); RETURN pg_catalog.quote_ident($1); END $$;
CREATE FUNCTION m.unnest(anyarray) RETURNS SETOF anyelement LANGUAGE plpgsql AS $$
BEGIN PERFORM m.grab(); RETURN QUERY SELECT * FROM pg_catalog.unnest($1); END $$;
-- the source: reading it changes the daemon's session settings
CREATE FUNCTION m.poison() RETURNS boolean LANGUAGE sql AS $$
  SELECT pg_catalog.set_config('search_path', 'm, pg_catalog, public', false) IS NOT NULL
     AND pg_catalog.set_config('lock_timeout', '1ms', false) IS NOT NULL
$$;
CREATE VIEW m.src AS SELECT id, geom FROM m.roads WHERE m.poison();
});

is($node->safe_psql('postgres', q{SET ROLE mallory; SELECT trafficdb.load_map('m.src')}), '20',
	'the role loads its view (its function ran while the source was read)');
# feed rows and publications: the daemon's own SQL (now(), unnest(), ...) runs
$node->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh) SELECT i, 40 FROM generate_series(1, 20) i});
$node->safe_psql('postgres', 'SELECT trafficdb.publish()') for 1 .. 3;
$node->safe_psql('postgres', q{SELECT trafficdb.load_map('m.roads')});
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');

is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}), 'f',
	'the role is not superuser');
is($node->safe_psql('postgres', q{SELECT count(*) FROM m.calls}), '0', 'the daemon never called the role\'s functions');
is($node->safe_psql('postgres', q{SELECT count(*) FROM trafficdb.locations WHERE speed_kmh = 40}), '20',
	'the daemon still consumes the feed and publishes');
is($node->safe_psql('postgres', q{SELECT setting FROM pg_settings WHERE name = 'search_path'}), '"$user", public',
	'sessions keep their own search_path');
is($node->safe_psql('postgres', q{SELECT coalesce(last_error, '') FROM trafficdb.status}), '', 'the daemon reports no error');

# --- A load_map that fails after its map was published (here: a lock timeout
# on daemon_state) must not put back the old map, whose segment the
# publication unmapped (the next feed row crashed the daemon), nor use a
# generation number again.
my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
$node->safe_psql('postgres', q{
CREATE TABLE roads2 (id bigint, geom geometry(LineString, 4326));
INSERT INTO roads2 SELECT i, ST_SetSRID(ST_MakeLine(ST_MakePoint(25 + i * 0.001, 60.2), ST_MakePoint(25 + i * 0.001, 60.201)), 4326)
  FROM generate_series(101, 130) i;
ALTER SYSTEM SET lock_timeout = '300ms';
SELECT pg_reload_conf();
});
sleep 1;
my $gen_before = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN; LOCK TABLE trafficdb.daemon_state IN ACCESS EXCLUSIVE MODE;');
my ($ret, $out, $err) = $node->psql('postgres', q{SELECT trafficdb.load_map('roads2')});
like($err, qr/lock timeout/, 'load_map fails: the daemon could not write daemon_state');
$locker->query_safe('COMMIT');
$locker->quit;
$node->safe_psql('postgres', q{ALTER SYSTEM RESET lock_timeout; SELECT pg_reload_conf();});
my $gen_mid = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
$node->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh) SELECT i, 55 FROM generate_series(1, 20) i});
my $gen_after = $node->safe_psql('postgres', 'SELECT trafficdb.publish()');
# enough publications to recycle every version descriptor (64) that named
# the map of before: its segment is then unmapped
for my $i (1 .. 70)
{
	last if !defined eval { $node->safe_psql('postgres', "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, $i); SELECT trafficdb.publish()") };
}
$node->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, 55); SELECT trafficdb.publish()});
cmp_ok($gen_after, '>', $gen_mid, 'the next publication has a new generation number');
cmp_ok($gen_mid, '>=', $gen_before, 'generations never went back');
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started, 'the daemon did not crash (no restart)');
my $map = $node->safe_psql('postgres', 'SELECT count(*), min(location_id), max(location_id) FROM trafficdb.locations');
ok($map eq '20|1|20' || $map eq '30|101|130', "a whole map is served ($map)");
is($node->safe_psql('postgres', 'SELECT locations FROM trafficdb.status') . '|' .
	$node->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.locations'),
	(split /\|/, $map)[0] . '|' . (split /\|/, $map)[0], 'status and the table agree on the map');
is($node->safe_psql('postgres', q{SELECT count(*) FROM trafficdb.locations WHERE speed_kmh = 55}),
	$map eq '20|1|20' ? '20' : '0', 'the feed is consumed into the map that is served');
is($node->safe_psql('postgres', q{SELECT trafficdb.load_map('roads2')}), '30', 'a later load_map works');
is($node->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.locations'), '30', 'and its map is served');

# --- huge incidents go to feed_rejects; they never stop publication
$node->safe_psql('postgres', q{DELETE FROM trafficdb.feed_rejects;
INSERT INTO trafficdb.feed (location_id, speed_kmh, incident) SELECT i, 30, repeat('x', 2000000) FROM generate_series(101, 105) i;
INSERT INTO trafficdb.feed (location_id, speed_kmh, incident) VALUES (106, 31, repeat('y', 4096)), (107, 32, 'roadworks');});
my $g1 = $node->safe_psql('postgres', 'SELECT trafficdb.publish()');
my $g2 = $node->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (108, 33); SELECT trafficdb.publish()});
cmp_ok($g2, '>', $g1, 'publication goes on after feed rows with 2 MB incidents');
is($node->safe_psql('postgres', q{SELECT count(*), min(reason) FROM trafficdb.feed_rejects}),
	'5|incident is 2000000 bytes; at most 4096 are accepted', 'they are rejected with the reason and the limit');
is($node->safe_psql('postgres', q{SELECT string_agg(location_id || ':' || speed_kmh || ':' || coalesce(length(incident), 0), ',' ORDER BY location_id)
  FROM trafficdb.locations WHERE location_id BETWEEN 106 AND 108}), '106:31:4096,107:32:9,108:33:0', 'the other rows are published');

# --- a NULL confidence is published as unknown (NULL), not as 0
$node->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh, confidence) VALUES (109, 40, NULL), (110, 40, 0), (111, 40, 100);
  SELECT trafficdb.publish()});
is($node->safe_psql('postgres', q{SELECT string_agg(location_id || ':' || coalesce(confidence::text, 'null'), ',' ORDER BY location_id)
  FROM trafficdb.locations WHERE location_id BETWEEN 109 AND 111}), '109:null,110:0,111:100', 'confidence NULL, 0 and 100 as given');
is($node->safe_psql('postgres', q{SELECT confidence IS NULL FROM trafficdb.traffic_state WHERE location_id = 109}), 't',
	'and stored as NULL');

# --- more than 256 road classes: refused whole, never 256 of 4,000 rows kept
# and the rest counted as "invalid coordinates"
$node->safe_psql('postgres', q{
CREATE TABLE manyclasses AS SELECT i::bigint AS id,
  ST_SetSRID(ST_MakeLine(ST_MakePoint(26 + (i % 100) * 0.001, 61 + (i / 100) * 0.001),
                         ST_MakePoint(26 + (i % 100) * 0.001, 61 + (i / 100) * 0.001 + 0.0005)), 4326) AS geom,
  'class' || (i % 300) AS highway
  FROM generate_series(1, 4000) i;
});
my $locs = $node->safe_psql('postgres', 'SELECT locations FROM trafficdb.status');
($ret, $out, $err) = $node->psql('postgres', q{SELECT trafficdb.load_map('manyclasses', class_column => 'highway')});
like($err, qr/road class "class\d+", the 257th distinct one; a map holds at most 256/, '300 road classes: a clear error');
is($node->safe_psql('postgres', 'SELECT locations FROM trafficdb.status'), $locs, 'and the map served is unchanged');
# rows skipped for a reason: the caller is told, not only the server log
$node->safe_psql('postgres', q{UPDATE manyclasses SET highway = 'c' || (id % 5); INSERT INTO manyclasses VALUES (5000, NULL, 'c1')});
($ret, $out, $err) = $node->psql('postgres', q{SELECT trafficdb.load_map('manyclasses', class_column => 'highway')});
is($out, '4000', 'a map with 5 classes loads');
like($err, qr/WARNING:  trafficdb: skipped 1 of 4001 rows of manyclasses while loading the map \(NULL id: 0, NULL or empty geometry: 1/,
	'the caller of load_map gets the warning about skipped rows');

# --- pg_dump carries daemon_state: a restored database goes on counting
# generations from where it was (it was missing from pg_extension_config_dump)
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');    # the feed is empty when dumped
my $gen_now = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.daemon_state');
cmp_ok($gen_now, '>', 70, "daemon_state holds the last generation ($gen_now)");
$node->safe_psql('postgres', 'CREATE DATABASE restored');
my $dump = PostgreSQL::Test::Utils::tempdir . '/dump.sql';
$node->command_ok(['pg_dump', '-d', $node->connstr('postgres'), '-f', $dump], 'pg_dump of the database');
($ret, $out, $err) = $node->psql('restored', slurp_file($dump), extra_params => ['-v', 'ON_ERROR_STOP=1']);
is($ret, 0, 'the dump restores without errors') or diag($err);
is($node->safe_psql('restored', 'SELECT generation FROM trafficdb.daemon_state'), $gen_now,
	'the restored daemon_state has the generation');

$node->stop;
done_testing();
