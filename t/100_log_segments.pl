# t/100_log_segments.pl: the generation log in segments (docs/write-path.md).
# A trim empties whole segments (TRUNCATE) and deletes no record one by one;
# everything the retention settings keep is always in the log, from a
# checkpoint on; a session reading a segment never makes the daemon wait (the
# segment's rows are deleted instead); a standby's follower stays
# byte-identical across trims; a crash after trims replays byte-identical;
# pg_dump carries every segment.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $keep = 10;
my $interval = 4;
my ($primary, $standby) = tdb_standby_pair('trafficdb.publish_interval' => "'1h'",
	'trafficdb.checkpoint_interval' => $interval, 'trafficdb.checkpoint_min_changed' => '0',
	'trafficdb.log_retention' => '0', 'trafficdb.log_retention_generations' => $keep);

sub round { return tdb_feed_round($primary, $_[0]); }

# Per segment: rows, oldest and newest generation, and the kinds of the oldest generation.
my $segments = q{SELECT segment, count(*), min(generation), max(generation),
  (SELECT string_agg(kind::text, '' ORDER BY kind) FROM trafficdb.generations f
    WHERE f.segment = g.segment AND f.generation = min(g.generation))
  FROM trafficdb.generations g GROUP BY segment ORDER BY min(generation)};

my %filenode;
sub filenodes
{
	return map { split /\|/ } split /\n/, $primary->safe_psql('postgres',
		q{SELECT relname, pg_relation_filenode(oid) FROM pg_class
		   WHERE relnamespace = 'trafficdb_log'::regnamespace AND relname ~ '^generations_[0-7]$'});
}
%filenode = filenodes();

# --- every round: what the settings keep is there, from a checkpoint on, and little more
my %used;
my ($violations, $checked) = (0, 0);
for my $r (1 .. 40)
{
	my $g = round($r);
	my @segs = map { [ split /\|/ ] } split /\n/, $primary->safe_psql('postgres', $segments);
	$used{ $_->[0] } = 1 for @segs;
	my $first = $segs[0][2];
	my ($d, $dmin) = split /\|/, $primary->safe_psql('postgres',
		"SELECT count(*), min(generation) FROM trafficdb.generations WHERE kind = 'D' AND generation > $first");
	my $ok = $first <= $g - $keep || $first <= 2;    # the count kept
	$ok &&= $d == $g - $first;                          # no gap after the oldest
	$ok &&= $g - $first <= $keep + 3 * $interval;       # at most a segment and a checkpoint more
	# every segment begins with a checkpoint (the first map's, or one the daemon moved on at)
	$ok &&= !grep { $_->[4] !~ /K/ } @segs;
	# segments hold consecutive ranges: none overlaps the next
	$ok &&= !grep { $segs[$_][3] >= $segs[ $_ + 1 ][2] } 0 .. $#segs - 1;
	$checked++;
	unless ($ok)
	{
		$violations++;
		diag("round $r, generation $g: " . join(' ', map { join(',', @$_) } @segs) . " D after first: $d");
	}
}
is($violations, 0, "after each of $checked publications the log holds the newest $keep generations and a checkpoint before them, no gap, at most a segment and a checkpoint more");
cmp_ok(scalar(keys %used), '==', 8, 'the log went round all eight segments');
my %now = filenodes();
my %holds = map { ("generations_$_" => 1) } split /\n/, $primary->safe_psql('postgres', 'SELECT DISTINCT segment FROM trafficdb.generations');
is(join(',', sort grep { !$holds{$_} && $now{$_} == $filenode{$_} } keys %now), '', 'every empty segment was emptied whole (TRUNCATE: a new file)');
cmp_ok(scalar(grep { $now{$_} != $filenode{$_} } keys %now), '>=', 8 - scalar(keys %holds), 'and so were the segments used again');
$primary->poll_query_until('postgres', q{SELECT sum(n_tup_ins) > 0 FROM pg_stat_all_tables
  WHERE schemaname = 'trafficdb_log' AND relname LIKE 'generations%'}) or die 'the daemon reported no statistics';
is($primary->safe_psql('postgres', q{SELECT coalesce(sum(n_tup_del + n_tup_upd), 0) FROM pg_stat_all_tables
  WHERE schemaname = 'trafficdb_log' AND relname LIKE 'generations%'}), '0', 'no record was deleted or updated one by one');

# --- a session reading the oldest segment: the daemon does not wait for it
my $oldest = $primary->safe_psql('postgres', 'SELECT segment FROM trafficdb.generations ORDER BY generation LIMIT 1');
my $oldest_gen = $primary->safe_psql('postgres', 'SELECT min(generation) FROM trafficdb.generations');
my ($in, $out, $err) = ('', '', '');
my $reader = IPC::Run::start([ 'psql', '-X', '-At', '-d', $primary->connstr('postgres') ], '<', \$in, '>', \$out, '2>', \$err);
$in .= "BEGIN; SELECT count(*) > 0 FROM trafficdb_log.generations_$oldest;\n";
ok(tdb_wait_session($reader, \$out, \$err, qr/^t$/m, 10), "a session holds segment $oldest open");
my $log_pos = -s $primary->logfile;
my $g0 = $primary->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
my $t0 = time;
round(100 + $_) for 1 .. 3 * $interval;
cmp_ok(time - $t0, '<', 60, 'publications go on while it reads');
is($primary->safe_psql('postgres', 'SELECT generation FROM trafficdb.status'), $g0 + 3 * $interval, 'every one of them published');
cmp_ok($primary->safe_psql('postgres', 'SELECT min(generation) FROM trafficdb.generations'), '>', $oldest_gen,
	'the segment it reads is emptied all the same: by DELETE, which waits for no reader');
like(slurp_file($primary->logfile, $log_pos), qr/trafficdb_log\.generations_$oldest is in use: its rows are deleted instead of truncated/,
	'and the server log says so');
$in .= "COMMIT;\n\\q\n";
$reader->finish;

# --- the standby followed every generation across the trims
my $sql = q{SELECT location_id, speed_kmh, incident, updated_at, changed_generation FROM trafficdb.locations ORDER BY 1};
my $g = tdb_caught_up($primary, $standby);
is($standby->safe_psql('postgres', 'SELECT role, replay_mismatches FROM trafficdb.status'), 'follower|0',
	'the follower: every generation byte-identical to the primary\'s');
is($standby->safe_psql('postgres', $sql), $primary->safe_psql('postgres', $sql), 'the same traffic at the same generation');

# --- a crash after trims: the restart replays the log byte-identical
my $before = $primary->safe_psql('postgres', $sql);
$primary->stop('immediate');
$primary->start;
$primary->poll_query_until('postgres', "SELECT generation >= $g AND daemon_pid IS NOT NULL FROM trafficdb.status") or die 'no replay';
$g = $primary->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
is($primary->safe_psql('postgres', 'SELECT replay_mismatches, log_damaged_at IS NULL FROM trafficdb.status'), '0|t',
	'replay after the crash: no mismatch');
is($primary->safe_psql('postgres', $sql), $before, 'the same traffic as before the crash');
round(300);
is($primary->safe_psql('postgres', 'SELECT generation FROM trafficdb.status'), $g + 1, 'and publication goes on');

# --- pg_dump carries every segment's records
my $log = q{SELECT generation, kind, part, segment, body_crc, md5(body) FROM trafficdb.generations ORDER BY 1, 2, 3};
$primary->safe_psql('postgres', 'CREATE DATABASE restored');
my $dump = PostgreSQL::Test::Utils::tempdir . '/dump.sql';
$primary->command_ok([ 'pg_dump', '-d', $primary->connstr('postgres'), '-f', $dump ], 'pg_dump of the database');
my ($ret, $rout, $rerr) = $primary->psql('restored', slurp_file($dump), extra_params => [ '-v', 'ON_ERROR_STOP=1' ]);
is($ret, 0, 'the dump restores without errors') or diag($rerr);
is($primary->safe_psql('restored', $log), $primary->safe_psql('postgres', $log), 'the restored log has every record, in the same segments');

$primary->stop;
$standby->stop;
done_testing();
