# t/026_genlog.pl: the generation log (docs/write-path.md).  Every
# publication appends one record; a crash and restart rebuilds the traffic
# from the newest checkpoint and the records after it, byte-identical to what
# was published (every replayed generation's object checksum is compared
# with the one recorded at publication), generations continue, changes_since
# answers across the restart and refuses generations older than the trim
# point; a damaged record stops publication until repair_log; a damaged
# checkpoint falls back to the previous one; a map source whose rows moved
# rebuilds the same map.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('genlog', 'trafficdb.publish_interval' => "'1h'",
	'trafficdb.checkpoint_interval' => '4', 'trafficdb.checkpoint_min_changed' => '0', 'trafficdb.log_retention' => "'1h'",
	'trafficdb.log_retention_generations' => '1000');

$node->safe_psql('postgres', q{
CREATE EXTENSION trafficdb CASCADE;
CREATE TABLE roads (id bigint PRIMARY KEY, geom geometry(LineString, 4326), highway text, name text);
INSERT INTO roads
SELECT i, ST_MakeLine(ST_MakePoint(24.9 + (i % 30) * 0.001, 60.15 + (i / 30) * 0.001),
                      ST_MakePoint(24.9 + (i % 30) * 0.001 + 0.0008, 60.15 + (i / 30) * 0.001 + 0.0004)),
       CASE WHEN i % 3 = 0 THEN 'primary' ELSE 'residential' END, 'Street ' || (i % 10)
  FROM generate_series(1, 900) i;
SELECT trafficdb.load_map('roads', 'id', 'geom', 'highway', 'name');
});

my $g = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
is($node->safe_psql('postgres', qq{SELECT string_agg(kind::text || ':' || part, ',' ORDER BY kind, part)
  FROM trafficdb.generations WHERE generation = $g}), 'C:0,K:0', 'the first map is logged as a checkpoint');

# A publication: random values, NULLs, incidents (some long), with a seed per round.
sub feed_round
{
	my ($seed) = @_;
	$node->safe_psql('postgres', qq{
SELECT setseed($seed / 100.0);
INSERT INTO trafficdb.feed (location_id, speed_kmh, free_flow_kmh, congestion, confidence, incident, observed_at)
SELECT (random() * 899)::int + 1,
       CASE WHEN random() < 0.1 THEN NULL ELSE round((random() * 120)::numeric, 2) END,
       CASE WHEN random() < 0.5 THEN NULL ELSE 50 + (random() * 50)::int END,
       CASE WHEN random() < 0.2 THEN NULL ELSE (random() * 4)::int END,
       CASE WHEN random() < 0.2 THEN NULL ELSE (random() * 100)::int END,
       CASE WHEN random() < 0.05 THEN repeat('ä', (random() * 300)::int) || ' blocked'
            WHEN random() < 0.05 THEN '' END,
       now() - (random() * 1000)::int * interval '1 ms'
  FROM generate_series(1, 150);
SELECT trafficdb.publish();
});
}

feed_round($_) for 1 .. 9;
my $g1 = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
is($g1, $g + 9, 'one generation per publish()');
is($node->safe_psql('postgres', qq{SELECT count(*) FROM trafficdb.generations WHERE kind = 'D' AND generation > $g}),
	'9', 'one D record per generation');
is($node->safe_psql('postgres', q{SELECT count(*) FROM trafficdb.generations WHERE kind IN ('D', 'K') AND object_crc IS NULL}),
	'0', 'every D and K record carries its object checksum');
cmp_ok($node->safe_psql('postgres', q{SELECT count(*) FROM trafficdb.generations WHERE kind = 'K'}), '>=', 3,
	'checkpoints every trafficdb.checkpoint_interval generations');
is($node->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.feed'), '0', 'the feed is consumed');

my $state_sql = q{SELECT location_id, speed_kmh, free_flow_kmh, congestion, confidence, md5(incident), updated_at,
  changed_generation FROM trafficdb.locations ORDER BY 1};
my $before = $node->safe_psql('postgres', $state_sql);
my $map_before = $node->safe_psql('postgres', 'SELECT map_id FROM trafficdb.status');
my $mid = $g + 4;
my $changes_before = $node->safe_psql('postgres', "SELECT location_id, changed_generation, speed_kmh FROM trafficdb.changes_since($mid) ORDER BY 1");

# --- crash: the postmaster and everything with it
$node->stop('immediate');
$node->start;
$node->poll_query_until('postgres', "SELECT generation > $g1 FROM trafficdb.status") or die 'no publication after the restart';
is($node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status'), $g1 + 1, 'generations continue after the crash');
is($node->safe_psql('postgres', q{SELECT replay_mismatches, replayed_generations > 0, log_damaged_at IS NULL FROM trafficdb.status}),
	'0|t|t', 'every replayed generation is byte-identical to its publication');
is($node->safe_psql('postgres', 'SELECT map_id FROM trafficdb.status'), $map_before,
	'the map is rebuilt with the logged map id (same source, same map)');
is($node->safe_psql('postgres', $state_sql), $before, 'the traffic after the crash is what was published before it');
is($node->safe_psql('postgres', "SELECT location_id, changed_generation, speed_kmh FROM trafficdb.changes_since($mid) ORDER BY 1"),
	$changes_before, 'changes_since answers across the restart with the same rows');
is($node->safe_psql('postgres', "SELECT trafficdb.publish()"), $g1 + 2, 'publication goes on');

# --- the map source's rows move (same set): the same map comes back
$node->safe_psql('postgres', q{
CREATE TABLE roads_copy AS SELECT * FROM roads ORDER BY random();
TRUNCATE roads; INSERT INTO roads SELECT * FROM roads_copy; DROP TABLE roads_copy;});
feed_round(20);
$before = $node->safe_psql('postgres', $state_sql);
my $g2 = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
$node->restart;
$node->poll_query_until('postgres', "SELECT generation > $g2 FROM trafficdb.status") or die 'no publication after the restart';
is($node->safe_psql('postgres', 'SELECT map_id, replay_mismatches FROM trafficdb.status'), "$map_before|0",
	'a map source in another physical order rebuilds the same map');
is($node->safe_psql('postgres', $state_sql), $before, 'and the same traffic');

# --- a damaged checkpoint: replay falls back to the previous one
my $k_new = $node->safe_psql('postgres', q{SELECT max(generation) FROM trafficdb.generations WHERE kind = 'K'});
$node->safe_psql('postgres', qq{UPDATE trafficdb.generations SET body = set_byte(body, 60, get_byte(body, 60) # 1)
  WHERE generation = $k_new AND kind = 'C' AND part = 0});
$before = $node->safe_psql('postgres', $state_sql);
my $g3 = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
$node->restart;
$node->poll_query_until('postgres', "SELECT generation > $g3 FROM trafficdb.status") or die 'no publication after the restart';
is($node->safe_psql('postgres', 'SELECT replay_mismatches FROM trafficdb.status'), '0', 'replayed from the older checkpoint, byte-identical');
is($node->safe_psql('postgres', $state_sql), $before, 'the traffic is the same without the damaged checkpoint');
ok($node->log_contains(qr/checkpoint of generation $k_new is unusable \(part 0 fails its checksum\); trying an older one/),
	'the damaged checkpoint is logged');

# --- a damaged D record: nothing is published until the log is repaired
feed_round(30);
feed_round(31);
my $g4 = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
$node->safe_psql('postgres', qq{UPDATE trafficdb.generations SET body = set_byte(body, 50, get_byte(body, 50) # 4)
  WHERE generation = $g4 - 1 AND kind = 'D'});
$node->restart;
$node->poll_query_until('postgres', 'SELECT log_damaged_at IS NOT NULL FROM trafficdb.status') or die 'damage not reported';
is($node->safe_psql('postgres', 'SELECT log_damaged_at FROM trafficdb.status'), $g4 - 1, 'the damaged generation is named');
like($node->safe_psql('postgres', 'SELECT last_error FROM trafficdb.status'),
	qr/generation log damaged at generation @{[$g4 - 1]}: its record fails its checksum/, 'and why');
my ($ret, $out, $err) = $node->psql('postgres', 'SELECT trafficdb.publish()');
like($err, qr/generation log damaged/, 'publish() says why nothing is published');
($ret, $out, $err) = $node->psql('postgres', 'SELECT trafficdb.repair_log(false)');
like($err, qr/accept_loss => true/, 'repair_log needs accept_loss');
is($node->safe_psql('postgres', 'SELECT trafficdb.repair_log(accept_loss => true)'), $g4 - 1, 'repair_log drops the damaged end');
cmp_ok($node->safe_psql('postgres', 'SELECT trafficdb.publish()'), '>', $g4, 'then publication resumes, generations never going back');
is($node->safe_psql('postgres', 'SELECT replay_mismatches, log_damaged_at IS NULL FROM trafficdb.status'), '0|t', 'the log is whole again');

# --- trimming and changes_since
$node->safe_psql('postgres', q{ALTER SYSTEM SET trafficdb.log_retention = 0;
  ALTER SYSTEM SET trafficdb.log_retention_generations = 3; SELECT pg_reload_conf();});
feed_round(40 + $_) for 1 .. 16;    # a segment goes a checkpoint after it aged out (write-path.md)
my ($first, $now) = split /\|/, $node->safe_psql('postgres', 'SELECT log_first_generation, generation FROM trafficdb.status');
cmp_ok($first, '>', $g4, 'the log is trimmed');
is($node->safe_psql('postgres', 'SELECT min(generation) FROM trafficdb.generations'), $first, 'status names the trim point');
cmp_ok($node->safe_psql('postgres', q{SELECT count(*) FROM trafficdb.generations WHERE kind = 'K'}), '>=', 2,
	'the newest two checkpoints are kept');
($ret, $out, $err) = $node->psql('postgres', 'SELECT * FROM trafficdb.changes_since(' . ($first - 2) . ')');
like($err, qr/generation @{[$first - 2]} is older than the generation log's trim point $first.*HINT:  Read the current state/s,
	'changes_since before the trim point: a clear error with a hint');
($ret, $out, $err) = $node->psql('postgres', 'SELECT count(*) FROM trafficdb.changes_since(' . ($first - 1) . ')');
is($ret, 0, 'changes_since from the trim point answers');
is($node->safe_psql('postgres', "SELECT count(*) FROM trafficdb.changes_since($now)"), '0', 'nothing after the current generation');

# the same limit for readers outside the server (libtrafficdb, through Python)
{
	local $ENV{TRAFFICDB_LIB} = $ENV{TRAFFICDB_LIB} // die 'TRAFFICDB_LIB must name lib/libtrafficdb.so';
	local $ENV{PYTHONPATH} = $ENV{TRAFFICDB_PYTHON} // die 'TRAFFICDB_PYTHON must name the python/ folder';
	my $shm = '/trafficdb.' . $node->port;
	my ($pout, $perr) = run_command([ '/usr/bin/python3', '-c', qq{
import trafficdb
r = trafficdb.Reader('$shm')
with r.snapshot() as s:
    try:
        s.changes_since(@{[$first - 2]})
        print('answered')
    except trafficdb.Trimmed as e:
        print('Trimmed:', e)
    print(len(s.changes_since(@{[$first - 1]})) >= 0)
} ]);
	like($pout, qr/^Trimmed:.*generation @{[$first - 2]} is older than the generation log's trim point $first.*\nTrue$/s,
		'libtrafficdb: TRAFFICDB_TRIMMED before the trim point, an answer from it') or diag($perr);
}

# --- the traffic_state view
is($node->safe_psql('postgres', q{SELECT count(*) = (SELECT count(*) FROM trafficdb.locations WHERE updated_at IS NOT NULL)
  FROM trafficdb.traffic_state}), 't', 'traffic_state lists the published traffic');

done_testing();
