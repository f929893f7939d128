# t/101_log_segments_review.pl: the hostile review of the generation log's
# segments (a helper's attack test of d49ca83, kept with the fixes).  Each
# part asserts what must be true:
#
# A. A REPEATABLE READ snapshot (pg_dump's) taken before trims and reading
#    the log after them sees the log as it was: a segment is truncated only
#    once every snapshot is younger than the trim that found it aged out
#    (TRUNCATE is not MVCC-safe; it emptied the log for such a snapshot).
# B. With trafficdb.log_trim = delete, a hot standby session reading the log
#    holds up neither WAL replay nor the follower (a TRUNCATE's
#    AccessExclusiveLock did); a role with no privilege cannot even name a
#    segment (schema trafficdb_log: PREPARE locked segments before any
#    permission check).
# C. A session reading the oldest segment: the segment is emptied by DELETE
#    (its snapshot still sees its rows) and the log has no hole after
#    log_first_generation (newer segments were truncated past it).
# D. An admin DETACHes the current segment: publication fails with an error
#    naming it (records went silently to the detached table).  D3: a DETACH
#    ... CONCURRENTLY cancelled half-way leaves the segment a partition
#    pending detach, which the log's queries no longer see: the same.
# E. A lock on a segment's index only: the daemon does not wait for it
#    (TRUNCATE took a waiting lock on the index; publication stopped).
# F. Promotion after trims: the promoted node keeps the invariants.
# G. A role with no privilege cannot hold the segments on the primary, and
#    the log keeps about what the settings keep.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use lib 't';
use TdbTest;

my $keep = 10;
my $interval = 4;
my ($primary, $standby) = tdb_standby_pair('trafficdb.publish_interval' => "'1h'",
	'trafficdb.checkpoint_interval' => $interval, 'trafficdb.checkpoint_min_changed' => '0',
	'trafficdb.log_retention' => '0', 'trafficdb.log_retention_generations' => $keep,
	# the standby (init_from_backup copies the primary's postgresql.conf):
	# no vacuum conflict is possible; lock conflicts wait as long as they last
	'hot_standby_feedback' => 'on', 'max_standby_streaming_delay' => '-1');

sub round { return tdb_feed_round($primary, $_[0]); }

sub session
{
	my ($node) = @_;
	my ($in, $out, $err) = ('', '', '');
	my $h = IPC::Run::start([ 'psql', '-X', '-At', '-v', 'ON_ERROR_STOP=0', '-d', $node->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$err);
	return { h => $h, in => \$in, out => \$out, err => \$err };
}

sub say_wait
{
	my ($s, $sql, $re, $secs) = @_;
	${ $s->{in} } .= $sql;
	return tdb_wait_session($s->{h}, $s->{out}, $s->{err}, $re, $secs);
}

round($_) for 1 .. 3 * $interval;
my $log_digest = q{SELECT 'log:' || count(*) || ':' || count(*) FILTER (WHERE kind = 'K') || ':' || coalesce(min(generation), 0) || '-' || coalesce(max(generation), 0)
  FROM trafficdb.generations};

# --- A. a REPEATABLE READ snapshot taken before a trim, reading the log after it
{
	my $at_snapshot = $primary->safe_psql('postgres', $log_digest);
	my $s = session($primary);
	ok(say_wait($s, "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 'snap:' || count(*) FROM trafficdb.daemon_state;\n", qr/^snap:/m, 10),
		'A: a REPEATABLE READ session has its snapshot (it has not read the log)');
	round(20 + $_) for 1 .. 6 * $interval;
	${ $s->{out} } = '';
	say_wait($s, "$log_digest;\n", qr/^log:/m, 10);
	my ($seen) = ${ $s->{out} } =~ /^(log:\S+)/m;
	is($seen, $at_snapshot, 'A: the snapshot sees the log as it was when taken (pg_dump\'s consistency)');
	like($seen // '', qr/^log:\d+:[1-9]/, 'A: and sees at least one checkpoint (K record) in it');
	like(slurp_file($primary->logfile), qr/a snapshot older than the trim of trafficdb_log\.generations_\d is still open: its rows are deleted instead of truncated/,
		'A: held back three trims, a segment is emptied by DELETE all the same (the server log says so)');
	my ($first_now, $g_now) = split /\|/, $primary->safe_psql('postgres', 'SELECT min(generation), max(generation) FROM trafficdb.generations');
	cmp_ok($g_now - $first_now, '<=', $keep + 6 * $interval, "A: and the log stays bounded meanwhile ($first_now to $g_now)");
	say_wait($s, "COMMIT;\n\\q\n", qr/^$/, 1);
	$s->{h}->finish;
}

# --- B. a standby session reading the log while the primary trims; then
#     the same done by a role with no privilege on the log at all (USAGE on
#     schema trafficdb is PUBLIC's: PREPARE locks a table before any
#     permission check)
sub standby_stall
{
	my ($what, $sql, $role) = @_;
	tdb_caught_up($primary, $standby);
	my ($in, $out, $err) = ('', '', '');
	my $h = IPC::Run::start([ 'psql', '-X', '-At', '-d', $standby->connstr('postgres') . ($role ? " user=$role" : '') ],
		'<', \$in, '>', \$out, '2>', \$err);
	my $s = { h => $h, in => \$in, out => \$out, err => \$err };
	ok(say_wait($s, "BEGIN; $sql SELECT 'held';\n", qr/^held$/m, 10), "B: a standby session ($what) holds the log") or diag($err);
	my $t0 = time;
	round(40 + $_) for 1 .. 3 * $interval;
	my $pg = $primary->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
	my $caught = 0;
	for (1 .. 100)
	{
		$caught = 1, last if $standby->safe_psql('postgres', 'SELECT generation FROM trafficdb.status') == $pg;
		select(undef, undef, undef, 0.1);
	}
	my $sg = $standby->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
	my $waiting = $standby->safe_psql('postgres', q{SELECT string_agg(mode || ' on ' || relation::regclass::text, ', ') FROM pg_locks WHERE NOT granted});
	ok($caught, "B ($what): the follower reaches the primary's generation $pg within 10 s (it is at $sg; waiting on the standby: " . ($waiting // '') . ')');
	say_wait($s, "COMMIT;\n\\q\n", qr/^$/, 1);
	$s->{h}->finish;
	note(sprintf('B: the standby session ended after %.1f s', time - $t0));
	ok(eval { tdb_caught_up($primary, $standby); 1 }, "B ($what): once it ends the follower catches up");
	is($standby->safe_psql('postgres', 'SELECT role, replay_mismatches FROM trafficdb.status'), 'follower|0', "B ($what): byte-identical");
}
$primary->safe_psql('postgres', q{ALTER SYSTEM SET trafficdb.log_trim = 'delete'; SELECT pg_reload_conf();});
standby_stall('a superuser reading it, log_trim delete', 'SELECT count(*) FROM trafficdb.generations;');
$primary->safe_psql('postgres', q{ALTER SYSTEM RESET trafficdb.log_trim; SELECT pg_reload_conf();});
$primary->safe_psql('postgres', 'CREATE ROLE mallory LOGIN');
tdb_caught_up($primary, $standby);
my ($rc, $o, $e) = $standby->psql('postgres', 'SELECT count(*) FROM trafficdb_log.generations_0', extra_params => [ '-U', 'mallory' ]);
like($e, qr/permission denied for schema trafficdb_log/, 'B: mallory may not read a segment');
($rc, $o, $e) = $standby->psql('postgres', 'BEGIN; PREPARE p0 AS SELECT 1 FROM trafficdb_log.generations_0;', extra_params => [ '-U', 'mallory' ]);
like($e, qr/permission denied for schema trafficdb_log/, 'B: nor name one to lock it (PREPARE)');

# --- C. a session reading the oldest segment: the newer ones go past it
{
	my $oldest = $primary->safe_psql('postgres', 'SELECT segment FROM trafficdb.generations ORDER BY generation LIMIT 1');
	my $s = session($primary);
	ok(say_wait($s, "BEGIN; SELECT 'held:' || count(*) FROM trafficdb_log.generations_$oldest;\n", qr/^held:/m, 10),
		"C: a session holds the oldest segment ($oldest)");
	round(60 + $_) for 1 .. 4 * $interval;
	my ($first, $last, $d) = split /\|/, $primary->safe_psql('postgres',
		q{SELECT log_first_generation, generation,
		  (SELECT count(DISTINCT generation) FROM trafficdb.generations g WHERE kind = 'D' AND g.generation >= s.log_first_generation)
		  FROM trafficdb.status s});
	note('C: segments: ' . $primary->safe_psql('postgres',
		q{SELECT string_agg(segment || ':' || lo || '-' || hi, ' ' ORDER BY lo) FROM
		  (SELECT segment, min(generation) lo, max(generation) hi FROM trafficdb.generations GROUP BY segment) x}));
	# the log from its first generation on: a D record of every generation
	# but the first (a checkpoint, perhaps without one)
	cmp_ok($d, '>=', $last - $first, "C: every generation from log_first_generation $first to $last is in the log ($d D records)");
	say_wait($s, "COMMIT;\n\\q\n", qr/^$/, 1);
	$s->{h}->finish;
}

# --- E. a lock on a segment's index only (not on the segment): TRUNCATE
#     rebuilds the index under AccessExclusiveLock, which the conditional
#     lock on the table did not check: the daemon waits
{
	round(70);
	my $oldest = $primary->safe_psql('postgres', 'SELECT segment FROM trafficdb.generations ORDER BY generation LIMIT 1');
	my $s = session($primary);
	ok(say_wait($s, "BEGIN; COMMENT ON INDEX trafficdb_log.generations_${oldest}_pkey IS 'looked at'; SELECT 'held';\n", qr/^held$/m, 10),
		"E: a session holds a lock on generations_${oldest}_pkey only");
	my $g0 = $primary->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
	for my $r (1 .. 3 * $interval)
	{
		$primary->safe_psql('postgres', qq{INSERT INTO trafficdb.feed (location_id, speed_kmh, observed_at) VALUES ($r, 44, now());
SELECT trafficdb.publish(false);});
		select(undef, undef, undef, 0.2);
	}
	my $moved = 0;
	for (1 .. 50)
	{
		$moved = $primary->safe_psql('postgres', 'SELECT generation FROM trafficdb.status') - $g0;
		last if $moved >= 3;
		select(undef, undef, undef, 0.1);
	}
	my $wait = $primary->safe_psql('postgres', q{SELECT string_agg(wait_event_type || ':' || wait_event || ' ' || left(query, 40), '; ')
	  FROM pg_stat_activity WHERE backend_type NOT IN ('client backend', 'walsender', 'checkpointer', 'background writer', 'walwriter', 'autovacuum launcher', 'logical replication launcher') AND wait_event_type = 'Lock'});
	cmp_ok($moved, '>=', 3, "E: publications go on while it holds the index (generations published: $moved; daemon waits: " . ($wait // '') . ')');
	say_wait($s, "COMMIT;\n\\q\n", qr/^$/, 1);
	$s->{h}->finish;
	$primary->poll_query_until('postgres', "SELECT generation >= $g0 + 3 FROM trafficdb.status") or note('E: no publication even after the session ended');
}

# --- F. promotion after trims: the promoted node writes and trims as the primary did
{
	tdb_caught_up($primary, $standby);
	my $rec = $primary->safe_psql('postgres', 'SELECT trafficdb.publish()');
	$standby->promote;
	$standby->poll_query_until('postgres', q{SELECT role = 'primary' AND daemon_pid IS NOT NULL FROM trafficdb.status})
	  or die 'no primary daemon after the promotion';
	my $bad = 0;
	for my $r (1 .. 6 * $interval)
	{
		my $g = $standby->safe_psql('postgres', qq{INSERT INTO trafficdb.feed (location_id, speed_kmh, observed_at) VALUES ($r * 13, $r, now());
SELECT trafficdb.publish();});
		my ($first, $d, $headless, $overlap) = split /\|/, $standby->safe_psql('postgres', q{
WITH seg AS (SELECT segment, min(generation) lo, max(generation) hi FROM trafficdb.generations GROUP BY segment)
SELECT (SELECT min(lo) FROM seg),
       (SELECT count(DISTINCT generation) FROM trafficdb.generations WHERE kind = 'D'),
       (SELECT count(*) FROM seg WHERE NOT EXISTS (SELECT FROM trafficdb.generations k WHERE k.segment = seg.segment AND k.generation = seg.lo AND k.kind = 'K')),
       (SELECT count(*) FROM seg a JOIN seg b ON a.segment <> b.segment AND a.lo <= b.hi AND b.lo <= a.hi)});
		my $ok = ($first <= $g - $keep) && $headless == 0 && $overlap == 0;
		$bad++, diag("F: after promotion, generation $g: first $first, D records $d, segments not starting with a checkpoint $headless, overlapping $overlap") unless $ok;
	}
	is($bad, 0, 'F: after the promotion the log keeps the newest generations, each segment starts with a checkpoint, none overlaps');
	$standby->restart;
	$standby->poll_query_until('postgres', q{SELECT daemon_pid IS NOT NULL AND generation > 0 FROM trafficdb.status});
	is($standby->safe_psql('postgres', 'SELECT replay_mismatches, log_damaged_at IS NULL FROM trafficdb.status'), '0|t', 'F: the promoted node replays its log');
}

# --- G. the same unprivileged role on the primary cannot hold the segments,
#     and the log keeps about what the settings keep
{
	my ($rc, $out, $err) = $primary->psql('postgres', 'BEGIN; ' . join(' ', map { "PREPARE p$_ AS SELECT 1 FROM trafficdb_log.generations_$_;" } 0 .. 7),
		extra_params => [ '-U', 'mallory' ]);
	like($err, qr/permission denied for schema trafficdb_log/, 'G: mallory (no privilege on the log) cannot lock a segment on the primary');
	my $g;
	$g = round(90 + $_) for 1 .. 6 * $interval;
	my $first = $primary->safe_psql('postgres', 'SELECT min(generation) FROM trafficdb.generations');
	cmp_ok($g - $first, '<=', $keep + 3 * $interval, "G: the log keeps about what the settings keep (it holds generations $first to $g)");
}

# --- D. the current segment DETACHed by an admin
{
	my $before = round(80);
	my $cur = $primary->safe_psql('postgres', 'SELECT segment FROM trafficdb.generations ORDER BY generation DESC LIMIT 1');
	$primary->safe_psql('postgres', "ALTER TABLE trafficdb.generations DETACH PARTITION trafficdb_log.generations_$cur");
	my @res;
	for my $r (81 .. 83)
	{
		my ($rc, $out, $err) = $primary->psql('postgres', qq{
INSERT INTO trafficdb.feed (location_id, speed_kmh, observed_at) VALUES ($r, 33, now());
SELECT trafficdb.publish();});
		push @res, $rc == 0 ? "ok:$out" : "error:$err";
	}
	note("D: publications after the DETACH: @res");
	note("D: detached generations_$cur: " . $primary->safe_psql('postgres', "SELECT string_agg(generation || kind::text || part, ' ' ORDER BY generation, kind, part) FROM trafficdb_log.generations_$cur"));
	note('D: the log: ' . $primary->safe_psql('postgres', q{SELECT string_agg(segment || ':' || generation || kind::text || part, ' ' ORDER BY generation, kind, part) FROM trafficdb.generations WHERE generation > 50}));
	my ($gen, $missing, $detached) = split /\|/, $primary->safe_psql('postgres',
		"SELECT s.generation,
		        (SELECT string_agg(g::text, ',') FROM generate_series($before + 1, s.generation) g
		          WHERE NOT EXISTS (SELECT FROM trafficdb.generations l WHERE l.generation = g AND l.kind = 'D')),
		        (SELECT count(*) FROM trafficdb_log.generations_$cur WHERE generation > $before)
		   FROM trafficdb.status s");
	is($detached, 0, 'D: no record goes to the detached table after the DETACH');
	ok(!grep(/^error:/, @res) || join(' ', @res) =~ /trafficdb_log\.generations_$cur is not a segment of the generation log/,
		'D: a publication that fails says which segment is missing');
	ok(!defined $missing || $missing eq '' || grep(/^error:/, @res),
		"D: every generation published after the DETACH has its D record in the log, or publication fails with an error (missing: "
		  . ($missing // '') . "; $detached record(s) went to the detached table)");
	# a restart: what does replay make of it?
	$primary->restart;
	$primary->poll_query_until('postgres', 'SELECT daemon_pid IS NOT NULL FROM trafficdb.status');
	sleep 2;
	note('D: after a restart: ' . $primary->safe_psql('postgres', 'SELECT generation, log_damaged_at, last_error FROM trafficdb.status'));
	$primary->safe_psql('postgres', "TRUNCATE trafficdb_log.generations_$cur;
	  ALTER TABLE trafficdb.generations ATTACH PARTITION trafficdb_log.generations_$cur FOR VALUES IN ($cur)");
}

# --- D2. an aged segment DETACHed: the trim that reaches it fails with an
#     error naming it (it would have emptied a table outside the log)
{
	round(85);
	my $oldest = $primary->safe_psql('postgres', 'SELECT segment FROM trafficdb.generations ORDER BY generation LIMIT 1');
	$primary->safe_psql('postgres', "ALTER TABLE trafficdb.generations DETACH PARTITION trafficdb_log.generations_$oldest");
	my $err = '';
	for my $r (1 .. 4 * $interval)
	{
		my ($rc, $out, $e) = $primary->psql('postgres', qq{
INSERT INTO trafficdb.feed (location_id, speed_kmh, observed_at) VALUES ($r, 21, now());
SELECT trafficdb.publish();});
		$err = $e, last if $rc != 0;
	}
	like($err, qr/trafficdb_log\.generations_$oldest is not a segment of the generation log trafficdb.generations/,
		'D2: publication fails with an error naming the detached segment');
	cmp_ok($primary->safe_psql('postgres', "SELECT count(*) FROM trafficdb_log.generations_$oldest"), '>', 0,
		'D2: and the detached table keeps its rows');
	$primary->safe_psql('postgres', "ALTER TABLE trafficdb.generations ATTACH PARTITION trafficdb_log.generations_$oldest FOR VALUES IN ($oldest)");
	my $g = $primary->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
	my ($rc) = $primary->psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh, observed_at) VALUES (7, 22, now());
SELECT trafficdb.publish();});
	is($rc, 0, 'D2: attached again, publication resumes');
}

# --- D3. a DETACH ... CONCURRENTLY of the current segment cancelled while it
#     waited for an older snapshot: the segment stays a partition (relispartition)
#     but pending detach, which queries of trafficdb.generations leave out.
#     Publication fails naming it and saying how to finish the detach or undo it.
{
	my $cur = $primary->safe_psql('postgres', 'SELECT segment FROM trafficdb.generations ORDER BY generation DESC LIMIT 1');
	my $s = session($primary);
	ok(say_wait($s, "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 'snap:' || count(*) FROM trafficdb.generations;\n", qr/^snap:/m, 10),
		'D3: a REPEATABLE READ session reads the log and keeps its snapshot');
	my ($rc, $out, $err) = $primary->psql('postgres',
		"SET statement_timeout = '1s'; ALTER TABLE trafficdb.generations DETACH PARTITION trafficdb_log.generations_$cur CONCURRENTLY");
	like($err, qr/canceling statement due to statement timeout/, 'D3: DETACH ... CONCURRENTLY waits for that snapshot and is cancelled');
	is($primary->safe_psql('postgres', "SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = 'trafficdb_log.generations_$cur'::regclass"),
		't', "D3: generations_$cur is left pending detach");
	$err = '';
	for my $r (1 .. 3)
	{
		($rc, $out, my $e) = $primary->psql('postgres', qq{
INSERT INTO trafficdb.feed (location_id, speed_kmh, observed_at) VALUES ($r, 23, now());
SELECT trafficdb.publish();});
		$err = $e, last if $rc != 0;
	}
	like($err, qr/trafficdb_log\.generations_$cur is being detached from the generation log trafficdb\.generations/,
		'D3: publication fails with an error naming the segment pending detach');
	say_wait($s, "COMMIT;\n\\q\n", qr/^$/, 1);
	$s->{h}->finish;
	$primary->safe_psql('postgres', "ALTER TABLE trafficdb.generations DETACH PARTITION trafficdb_log.generations_$cur FINALIZE");
	$primary->safe_psql('postgres', "ALTER TABLE trafficdb.generations ATTACH PARTITION trafficdb_log.generations_$cur FOR VALUES IN ($cur)");
	($rc) = $primary->psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh, observed_at) VALUES (8, 24, now());
SELECT trafficdb.publish();});
	is($rc, 0, 'D3: detached with FINALIZE and attached again (the hint), publication resumes');
}

$primary->stop('immediate');
$standby->stop('immediate');
done_testing();
