# t/029_write_path_review.pl: a hostile review of the write path.  Feed rows
# with hostile values are applied or filed in feed_rejects, never dropped
# silently; a generation log whose newest records a superuser deleted (or
# that was emptied under the running daemon) stops publication instead of
# silently taking back published values; a damaged log does not make the
# daemon leak a replayed state at each publish() retry; repair_log acts only
# in the served database; the writers' ring survives scribbles and
# truncation by a member of writer_group; publish() and changes_since
# honour statement_timeout and cancellation.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use lib 't';
use TdbTest;

my $node = tdb_node('review', 'trafficdb.publish_interval' => "'1h'", 'trafficdb.checkpoint_interval' => '3',
	'trafficdb.checkpoint_part_entries' => '1024');
$node->safe_psql('postgres', 'CREATE EXTENSION trafficdb CASCADE');
$node->safe_psql('postgres', q{
CREATE TABLE roads AS
SELECT i::bigint AS id, ST_SetSRID(ST_MakeLine(ST_MakePoint(24.9 + (i % 40) * 0.002, 60.15 + (i / 40) * 0.001),
                              ST_MakePoint(24.9 + (i % 40) * 0.002 + 0.001, 60.15 + (i / 40) * 0.001 + 0.0005)), 4326) AS geom
  FROM generate_series(1, 5000) i;
SELECT trafficdb.load_map('roads', 'id', 'geom');
});
is($node->safe_psql('postgres', q{SELECT count(*) FROM trafficdb.generations WHERE kind = 'C'}), '5',
	'a map of 5,000 locations checkpoints in 5 parts of 1,024');

sub gen { return $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status'); }

sub restart_and_wait
{
	my ($after, $mode) = @_;
	# a crash (immediate) keeps the published objects in shared memory for readers
	$node->stop($mode // 'fast');
	$node->start;
	$node->poll_query_until('postgres', "SELECT generation > $after OR log_damaged_at IS NOT NULL FROM trafficdb.status")
	  or die 'the daemon neither published nor reported damage after the restart';
}

# --- hostile observed_at values: applied or rejected, never lost silently
$node->safe_psql('postgres', q{
INSERT INTO trafficdb.feed (location_id, speed_kmh, observed_at) VALUES
  (7, 1, 'infinity'), (8, 1, '-infinity'), (9, 1, '1970-01-01 00:00:00+00'), (10, 1, '1969-12-31 00:00:00+00'),
  (11, 1, '294276-12-31 23:59:59+00'), (12, 1, '4713-01-01 00:00:00+00 BC'), (13, 1, now() - interval '1 day');
SELECT trafficdb.publish();});
is($node->safe_psql('postgres', q{SELECT string_agg(location_id::text, ',' ORDER BY location_id)
  FROM (SELECT location_id FROM trafficdb.locations WHERE location_id BETWEEN 7 AND 13 AND updated_at IS NOT NULL
        UNION ALL SELECT location_id FROM trafficdb.feed_rejects WHERE location_id BETWEEN 7 AND 13) x}),
	'7,8,9,10,11,12,13', 'every feed row with an extreme observed_at is published or filed in feed_rejects');
like($node->safe_psql('postgres', q{SELECT string_agg(reason, ';' ORDER BY location_id) FROM trafficdb.feed_rejects
  WHERE location_id IN (7, 11)}), qr/observed_at infinity .*;observed_at 294276-12-31 .*future/,
	'infinity and the last representable year are rejected as in the future');

# --- a damaged record: while damaged, publish() retries the start; the daemon must not grow
$node->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh, incident, observed_at)
  SELECT g, 5, 'x' || g, now() FROM generate_series(1, 5000) g; SELECT trafficdb.publish();});
$node->safe_psql('postgres', qq{INSERT INTO trafficdb.feed (location_id, speed_kmh, observed_at) VALUES (1, $_, now());
  SELECT trafficdb.publish();}) for 6 .. 8;
# a D record after the newest checkpoint: the one replay needs
my $g = $node->safe_psql('postgres', q{SELECT min(generation) FROM trafficdb.generations WHERE kind = 'D'
  AND generation > (SELECT max(generation) FROM trafficdb.generations WHERE kind = 'K')});
$node->safe_psql('postgres', qq{UPDATE trafficdb.generations SET body = set_byte(body, 20, get_byte(body, 20) # 4)
  WHERE generation = $g AND kind = 'D'});
restart_and_wait(gen());
is($node->safe_psql('postgres', 'SELECT log_damaged_at FROM trafficdb.status'), $g, 'a damaged record stops publication');
my $dpid = $node->safe_psql('postgres', 'SELECT daemon_pid FROM trafficdb.status');
sub rss_kb
{
	my $s = slurp_file("/proc/$dpid/status");
	return $s =~ /VmRSS:\s+(\d+)/ ? $1 : die 'no VmRSS';
}
$node->psql('postgres', 'SELECT trafficdb.publish()') for 1 .. 5;
my $rss0 = rss_kb();
$node->psql('postgres', 'SELECT trafficdb.publish()') for 1 .. 150;
cmp_ok(rss_kb() - $rss0, '<', 8192, 'failed starts against a damaged log do not leak the replayed state');

# repair_log in another database repairs nothing there
$node->safe_psql('postgres', 'CREATE DATABASE other');
$node->safe_psql('other', 'CREATE EXTENSION trafficdb CASCADE');
my ($ret, $out, $err) = $node->psql('other', 'SELECT trafficdb.repair_log(true)');
like($err, qr/database "postgres"/, 'repair_log in a database the daemon does not serve is refused');

is($node->safe_psql('postgres', 'SELECT trafficdb.repair_log(accept_loss => true)'), $g, 'repair_log drops the damaged record');
cmp_ok($node->safe_psql('postgres', 'SELECT trafficdb.publish()'), '>', $g + 1, 'publication resumes');

# --- the newest records deleted by a superuser: no silent roll back
for my $v (10, 20, 30)
{
	$node->safe_psql('postgres', qq{INSERT INTO trafficdb.feed (location_id, speed_kmh, observed_at)
	  SELECT g, $v, now() FROM generate_series(100, 110) g; SELECT trafficdb.publish();});
}
$g = gen();
$node->safe_psql('postgres', "DELETE FROM trafficdb.generations WHERE generation >= $g - 1");
restart_and_wait($g, 'immediate');
is($node->safe_psql('postgres', 'SELECT log_damaged_at FROM trafficdb.status'), $g - 1,
	'a log whose newest records were deleted is damaged at the first missing generation');
like($node->safe_psql('postgres', 'SELECT last_error FROM trafficdb.status'),
	qr/generation log damaged at generation @{[$g - 1]}: .*generation $g/, 'and says which generation it cannot rebuild');
is($node->safe_psql('postgres', 'SELECT s.generation, d.generation FROM trafficdb.status s, trafficdb.daemon_state d'), "0|$g",
	'nothing older is published in place of what readers saw');

is($node->safe_psql('postgres', 'SELECT trafficdb.repair_log(accept_loss => true)'), $g - 1, 'repair_log accepts the loss');
cmp_ok($node->safe_psql('postgres', 'SELECT trafficdb.publish()'), '>', $g, 'publication resumes, generations going on');
is($node->safe_psql('postgres', 'SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 100'), '10',
	'the state before the loss is published as a new generation');
($ret, $out, $err) = $node->psql('postgres', "SELECT count(*) FROM trafficdb.changes_since($g)");
like($err, qr/generation $g is older than/,
	'changes_since from a generation the repair took back is an error, not a silent miss of the rollback');
$g = gen();
restart_and_wait($g);
is($node->safe_psql('postgres', 'SELECT generation = ' . ($g + 1) . ', log_damaged_at IS NULL, replay_mismatches FROM trafficdb.status'),
	't|t|0', 'after the repair, the log restarts cleanly');

# --- the log emptied under the running daemon (TRUNCATE): damage at the next start
$node->safe_psql('postgres', q{ALTER SYSTEM SET trafficdb.checkpoint_interval = 1000; SELECT pg_reload_conf();});
$node->safe_psql('postgres', 'TRUNCATE trafficdb.generations');
$node->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh, observed_at) VALUES (100, 77, now());
  SELECT trafficdb.publish();});
$g = gen();
restart_and_wait($g, 'immediate');
cmp_ok($node->safe_psql('postgres', 'SELECT coalesce(log_damaged_at, 0) FROM trafficdb.status'), '>', 0,
	'a log without any checkpoint is damaged, not an empty start');
is($node->safe_psql('postgres', 'SELECT s.generation, d.generation FROM trafficdb.status s, trafficdb.daemon_state d'), "0|$g",
	'and nothing is published');
$node->safe_psql('postgres', 'SELECT trafficdb.repair_log(true)');
cmp_ok($node->safe_psql('postgres', 'SELECT trafficdb.publish()'), '>', $g, 'repair_log lets an empty log start over');
$node->safe_psql('postgres', q{ALTER SYSTEM RESET trafficdb.checkpoint_interval; SELECT pg_reload_conf();});

done_testing();
