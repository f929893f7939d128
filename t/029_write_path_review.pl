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

my $node = tdb_node('review', 'trafficdb.publish_interval' => "'1h'", 'trafficdb.checkpoint_interval' => '3', 'trafficdb.checkpoint_min_changed' => '0',
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

# poll the server log for a pattern (10 s)
sub wait_for_log
{
	my ($n, $re) = @_;
	for (1 .. 100)
	{
		return 1 if $n->log_contains($re);
		usleep(100_000);
	}
	return 0;
}

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

# --- the writers' ring from the daemon's side: a process with write access
# scribbles on <prefix>.writers (random bytes in lanes and slots, huge
# tails, crafted slots with invalid values, truncation to 0 and to the
# middle of a lane) while two writers put: the daemon never crashes, never
# applies an invalid value, resets and counts the damaged lanes; an update
# for an id that left the map (a reload while writers put) is filed in
# feed_rejects.
my $lib = $ENV{TRAFFICDB_LIB} // die 'TRAFFICDB_LIB must name lib/libtrafficdb.so';
my $pydir = $ENV{TRAFFICDB_PYTHON} // die 'TRAFFICDB_PYTHON must name the python/ folder';
my $rn = tdb_node('ring', 'trafficdb.publish_interval' => "'50ms'", 'trafficdb.max_writers' => '4',
	'trafficdb.writer_ring_slots' => '256', 'trafficdb.writer_drain_interval' => "'1ms'");
$rn->safe_psql('postgres', 'CREATE EXTENSION trafficdb CASCADE');
$rn->safe_psql('postgres', q{
CREATE TABLE roads AS
SELECT i::bigint AS id, ST_SetSRID(ST_MakeLine(ST_MakePoint(24.9 + (i % 40) * 0.002, 60.15 + (i / 40) * 0.001),
                              ST_MakePoint(24.9 + (i % 40) * 0.002 + 0.001, 60.15 + (i / 40) * 0.001 + 0.0005)), 4326) AS geom
  FROM generate_series(1, 2000) i;
SELECT trafficdb.load_map('roads', 'id', 'geom');});
my $shm = '/trafficdb.' . $rn->port;
my $rpid = $rn->safe_psql('postgres', 'SELECT daemon_pid FROM trafficdb.status');
my $tmp = PostgreSQL::Test::Utils::tempdir;
open(my $fh, '>', "$tmp/putter.py") or die;
print $fh <<'PY';
import os, sys, time, random, trafficdb
name, seconds = sys.argv[1], float(sys.argv[2])
end = time.time() + seconds
n = 0
# a truncated ring is a SIGBUS in a writer too: each writer is a child, made anew when it dies
deaths = 0
while time.time() < end:
    pid = os.fork()
    if pid != 0:
        _, st = os.waitpid(pid, 0)
        deaths += os.WIFSIGNALED(st)
        continue
    try:
        with trafficdb.Writer(name) as w:
            while time.time() < end:
                i = random.randint(1, 2000)
                try:
                    w.put(i, speed_kmh=random.randint(0, 400), congestion=random.randint(0, 4),
                          confidence=random.randint(0, 100), incident=random.choice([None, 'x' * random.randint(0, 200)]),
                          wait=True)
                    n += 1
                except trafficdb.NotFound:
                    pass
    except trafficdb.TrafficDBError:
        time.sleep(0.01)
    except Exception:
        time.sleep(0.01)
    os._exit(0)
print('writers killed by a signal:', deaths)
PY
close($fh);
open($fh, '>', "$tmp/scribble.py") or die;
print $fh <<'PY';
import mmap, os, random, struct, sys, time
path, rounds = '/dev/shm' + sys.argv[1] + '.writers', int(sys.argv[2])
HDR, LANE, SLOT = 4096, 256, 64
random.seed(29)
done = {'bytes': 0, 'tails': 0, 'crafted': 0, 'truncated': 0}
for r in range(rounds):
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        time.sleep(0.01)
        continue
    size = os.fstat(fd).st_size
    if size < HDR:
        os.close(fd); time.sleep(0.01); continue
    m = mmap.mmap(fd, size)
    nlanes, lane_slots = struct.unpack_from('<II', m, 16)
    if not (1 <= nlanes <= 1024 and lane_slots in (128, 256, 512, 1024)) or size < HDR + nlanes * LANE:
        m.close(); os.close(fd); time.sleep(0.01); continue
    soff = (HDR + nlanes * LANE + 4095) & ~4095
    lane = random.randrange(nlanes)
    lh = HDR + lane * LANE
    slots = soff + lane * lane_slots * SLOT
    what = r % 5
    try:
        if what == 0:                       # random bytes in a lane's slots and in its header
            for _ in range(8):
                off = slots + random.randrange(lane_slots * SLOT - 8)
                m[off:off + 8] = os.urandom(8)
            m[lh:lh + 8] = os.urandom(8)
            done['bytes'] += 1
        elif what == 1:                     # a huge tail
            tail = struct.unpack_from('<Q', m, lh)[0]
            struct.pack_into('<Q', m, lh, tail + random.choice([1 << 40, 1 << 63, lane_slots + 1, 2**64 - 1 - tail]))
            done['tails'] += 1
        elif what == 2:                     # a well-formed slot with an invalid value, published
            tail = struct.unpack_from('<Q', m, lh)[0]
            t = tail
            bad = random.choice(['speed', 'nan_present', 'congestion', 'confidence', 'future', 'utf8', 'kind', 'past'])
            speed = {'speed': 401.0, 'nan_present': float('inf')}.get(bad, 50.0)
            cong = 9 if bad == 'congestion' else 1
            conf = 101 if bad == 'confidence' else 50
            obs = int(time.time() * 1e6) + (3600 * 10**6 if bad == 'future' else 0)
            obs = -5 if bad == 'past' else obs
            present = 0x1F if bad == 'utf8' else 0x0F
            ilen = 3 if bad == 'utf8' else 0
            kind = 7 if bad == 'kind' else 1
            body = struct.pack('<QQIIqffBBBBIQQ', 1, 0, 0, ilen, obs, speed, 60.0, present, cong, conf, kind, 0, 0, (t + 1) % 2**64)
            m[slots + (t % lane_slots) * SLOT: slots + (t % lane_slots) * SLOT + SLOT] = body
            need = 1
            if ilen:
                text = b'\xff\xfe\xfd' + b'\0' * 53 + struct.pack('<Q', (t + 2) % 2**64)
                m[slots + ((t + 1) % lane_slots) * SLOT: slots + ((t + 1) % lane_slots) * SLOT + SLOT] = text
                need = 2
            struct.pack_into('<Q', m, lh, (t + need) % 2**64)
            done['crafted'] += 1
        elif what == 3:                     # truncated to 0 or to the middle of a lane, for a while
            m.close()
            os.ftruncate(fd, random.choice([0, soff + lane * lane_slots * SLOT + 100, HDR + 10]))
            time.sleep(random.random() * 0.02)
            os.ftruncate(fd, size)
            done['truncated'] += 1
            os.close(fd)
            continue
        else:                               # a valid update for an id the map does not have
            tail = struct.unpack_from('<Q', m, lh)[0]
            t = tail
            body = struct.pack('<QQIIqffBBBBIQQ', 987654321, 0, 0, 0, int(time.time() * 1e6), 10.0, 10.0, 0x03, 255, 255, 1, 0, 0, (t + 1) % 2**64)
            m[slots + (t % lane_slots) * SLOT: slots + (t % lane_slots) * SLOT + SLOT] = body
            struct.pack_into('<Q', m, lh, (t + 1) % 2**64)
    except (ValueError, IndexError, OSError, struct.error):
        pass
    m.close()
    os.close(fd)
    time.sleep(0.002)
print(done)
PY
close($fh);
{
	local $ENV{TRAFFICDB_LIB} = $lib;
	local $ENV{PYTHONPATH} = $pydir;
	my @procs;
	for my $k (1 .. 2)
	{
		my ($o, $e) = ('', '');
		push @procs, [ IPC::Run::start([ '/usr/bin/python3', "$tmp/putter.py", $shm, '8' ], '>', \$o, '2>', \$e,
			IPC::Run::timeout(60)), \$o, \$e ];
	}
	my ($so, $se) = ('', '');
	my $scr = IPC::Run::start([ '/usr/bin/python3', "$tmp/scribble.py", $shm, '1500' ], '>', \$so, '2>', \$se, IPC::Run::timeout(60));
	# a map reload while they put: ids 1..100 leave the map
	usleep(500_000);
	$rn->safe_psql('postgres', q{DELETE FROM roads WHERE id <= 100; SELECT trafficdb.load_map('roads', 'id', 'geom');});
	$scr->finish;
	note("scribbler: $so $se");
	for my $p (@procs)
	{
		$p->[0]->finish;
		note('putter: ' . ${ $p->[1] } . ${ $p->[2] });
	}
}
$rn->safe_psql('postgres', 'SELECT trafficdb.publish()');
is($rn->safe_psql('postgres', 'SELECT daemon_pid FROM trafficdb.status'), $rpid, 'the daemon survived the scribbling');
ok(!$rn->log_contains(qr/terminated by signal|server process .* was terminated/), 'no process of the server crashed');
is($rn->safe_psql('postgres', q{SELECT count(*) FROM trafficdb.locations WHERE NOT (speed_kmh BETWEEN 0 AND 400)
  OR NOT (free_flow_kmh BETWEEN 0 AND 400) OR congestion > 4 OR congestion < 0 OR confidence > 100 OR confidence < 0
  OR updated_at > now() + interval '5 minutes' OR updated_at <= 'epoch' OR length(incident) > 4096}), '0',
	'no invalid value was applied');
ok($rn->log_contains(qr/reset \d+ damaged writer lane/), 'damaged lanes are reset and logged');
ok($rn->log_contains(qr/writers' ring \S+ was damaged \(truncated/), 'a truncated ring is made anew');
cmp_ok($rn->safe_psql('postgres', q{SELECT count(*) FROM trafficdb.feed_rejects WHERE reason LIKE '%trafficdb_put%'}), '>', 0,
	'updates for ids not in the map are filed in feed_rejects');
# truncated and grown back at once: the same size, all zeros; no writer could open it
{
	my $f = "/dev/shm$shm.writers";
	my $size = -s $f;
	truncate($f, 0) or die "truncate: $!";
	truncate($f, $size) or die "truncate: $!";
	ok($rn->poll_query_until('postgres', q{SELECT pg_sleep(0.05) IS NOT NULL}) && wait_for_log($rn, qr/writers' ring \S+ was damaged \(its header was overwritten/),
		'a ring zeroed in place (truncated and grown back) is noticed and made anew');
}
# after all that, a writer puts and is published
{
	local $ENV{TRAFFICDB_LIB} = $lib;
	local $ENV{PYTHONPATH} = $pydir;
	my ($o, $e) = run_command([ '/usr/bin/python3', '-c',
		"import trafficdb\nwith trafficdb.Writer('$shm') as w:\n    w.put(500, speed_kmh=12.5, sync=True)\nprint('ok')" ]);
	is($o, 'ok', 'a writer puts after the scribbling') or diag($e);
}
# 400 updates for an id not in the map in one drain (two lanes of 200): every one is filed or counted
{
	my $t0 = $rn->safe_psql('postgres', 'SELECT clock_timestamp()');
	my ($o, $e) = run_command([ '/usr/bin/python3', '-c', qq{
import mmap, os, struct, time
fd = os.open('/dev/shm$shm.writers', os.O_RDWR)
m = mmap.mmap(fd, os.fstat(fd).st_size)
nlanes, lane_slots = struct.unpack_from('<II', m, 16)
soff = (4096 + nlanes * 256 + 4095) & ~4095
for lane in (2, 3):
    lh = 4096 + lane * 256
    t0 = struct.unpack_from('<Q', m, lh)[0]
    base = soff + lane * lane_slots * 64
    for k in range(200):
        t = t0 + k
        m[base + (t % lane_slots) * 64: base + (t % lane_slots) * 64 + 64] = struct.pack('<QQIIqffBBBBIQQ',
            987654322, 0, 0, 0, int(time.time() * 1e6), 10.0, 10.0, 0x03, 255, 255, 1, 0, 0, t + 1)
    struct.pack_into('<Q', m, lh, t0 + 200)
print('ok')
} ]);
	is($o, 'ok', 'a process with write access published 400 updates for an unknown id') or diag($e);
	$rn->safe_psql('postgres', 'SELECT pg_sleep(0.3); SELECT trafficdb.publish()');
	is($rn->safe_psql('postgres', qq{SELECT count(*) FILTER (WHERE location_id = 987654322)
	  + coalesce(sum(substring(reason from '^and (\\d+) more trafficdb_put')::int), 0) FROM trafficdb.feed_rejects
	  WHERE rejected_at >= '$t0' AND (location_id = 987654322 OR reason LIKE 'and % more trafficdb_put%')}), '400',
		'each is in feed_rejects, or counted there: none dropped silently');
}
$rn->poll_query_until('postgres', 'SELECT speed_kmh = 12.5 FROM trafficdb.locations WHERE location_id = 500');
is($rn->safe_psql('postgres', 'SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 500'), '12.5', 'and is published');
$rn->stop;

# --- a feed transaction is published whole: two INSERTs (or one long COPY)
# across a partition flip must not land in two generations
my $tn = tdb_node('torn', 'trafficdb.publish_interval' => "'10ms'");
$tn->safe_psql('postgres', 'CREATE EXTENSION trafficdb CASCADE');
$tn->safe_psql('postgres', q{
CREATE TABLE roads AS
SELECT i::bigint AS id, ST_SetSRID(ST_MakeLine(ST_MakePoint(24.9 + i * 0.002, 60.15), ST_MakePoint(24.9 + i * 0.002 + 0.001, 60.1505)), 4326) AS geom
  FROM generate_series(1, 10) i;
SELECT trafficdb.load_map('roads', 'id', 'geom');
INSERT INTO trafficdb.feed (location_id, speed_kmh) SELECT g, 0 FROM generate_series(1, 10) g;
SELECT trafficdb.publish();});
{
	my $w = '';
	for my $v (1 .. 60)
	{
		$w .= "BEGIN; INSERT INTO trafficdb.feed (location_id, speed_kmh) SELECT g, $v FROM generate_series(1, 5) g;\n"
		  . "SELECT pg_sleep(0.015); INSERT INTO trafficdb.feed (location_id, speed_kmh) SELECT g, $v FROM generate_series(6, 10) g; COMMIT;\n";
	}
	my $r = "SELECT count(DISTINCT speed_kmh) FROM trafficdb.locations;\n" x 3000;
	# files, not scalars: IPC::Run feeds a scalar only while the harness is pumped
	my $dir = PostgreSQL::Test::Utils::tempdir;
	PostgreSQL::Test::Utils::append_to_file("$dir/w.sql", $w);
	PostgreSQL::Test::Utils::append_to_file("$dir/r.sql", $r);
	my ($wo, $we, $ro, $re) = ('', '', '', '');
	my $wh = IPC::Run::start([ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $tn->connstr('postgres'), '-f', "$dir/w.sql" ],
		'>', \$wo, '2>', \$we, IPC::Run::timeout(120));
	my $rh = IPC::Run::start([ 'psql', '-XAtq', '-d', $tn->connstr('postgres'), '-f', "$dir/r.sql" ], '>', \$ro, '2>', \$re,
		IPC::Run::timeout(120));
	$wh->finish;
	$rh->finish;
	note($we . $re) if $we . $re;
	my @counts = split /\n/, $ro;
	cmp_ok(scalar(@counts), '>', 100, 'the reader read while the transactions committed');
	is(scalar(grep { $_ ne '1' } @counts), 0, 'no read shows half of a committed feed transaction');
}
$tn->stop;

# --- crashes at awkward moments, bounded: kill -9 of the daemon during a
# map load, during the checkpoint of a map of 20,000 locations (20 parts),
# at random right after commits; kill -9 of a feeding backend; an immediate
# stop.  Feed rows are written with an audit row in the same transaction:
# after each restart the replay is byte-identical, nothing is damaged,
# generations never go back, and at the end the published traffic is the
# last committed batch.
my $cn = tdb_node('crash', 'trafficdb.publish_interval' => "'20ms'", 'trafficdb.checkpoint_interval' => '2', 'trafficdb.checkpoint_min_changed' => '0',
	'trafficdb.checkpoint_part_entries' => '1024', 'restart_after_crash' => 'on');
$cn->safe_psql('postgres', 'CREATE EXTENSION trafficdb CASCADE');
$cn->safe_psql('postgres', q{
CREATE TABLE roads AS
SELECT i::bigint AS id, ST_SetSRID(ST_MakeLine(ST_MakePoint(24.9 + (i % 100) * 0.002, 60.15 + (i / 100) * 0.001),
                              ST_MakePoint(24.9 + (i % 100) * 0.002 + 0.001, 60.15 + (i / 100) * 0.001 + 0.0005)), 4326) AS geom
  FROM generate_series(1, 20000) i;
CREATE TABLE roads2 AS SELECT id, ST_Translate(geom, 0.0001, 0) AS geom FROM roads;
CREATE TABLE audit (n bigint PRIMARY KEY);
SELECT trafficdb.load_map('roads', 'id', 'geom');});

my $feeder;
my ($fin, $fout, $ferr);
my $run = 0;
sub start_feeder
{
	$run++;
	$fin = '';
	for my $i (1 .. 20000)
	{
		my $n = $run * 1_000_000 + $i;
		$fin .= "BEGIN; INSERT INTO trafficdb.feed (location_id, speed_kmh, observed_at) SELECT g, $n % 400, "
		  . "timestamptz '2026-01-01' + interval '1 ms' * $n FROM generate_series(1, 200) g; INSERT INTO audit VALUES ($n); COMMIT;\n";
	}
	($fout, $ferr) = ('', '');
	my $f = PostgreSQL::Test::Utils::tempdir . "/feed$run.sql";
	PostgreSQL::Test::Utils::append_to_file($f, $fin);
	$feeder = IPC::Run::start([ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $cn->connstr('postgres'), '-f', $f ],
		'>', \$fout, '2>', \$ferr, IPC::Run::timeout(300));
}
sub stop_feeder
{
	return unless $feeder;
	$feeder->kill_kill;
	$feeder = undef;
}
sub daemon_up
{
	my ($after) = @_;
	for (1 .. 300)
	{
		# a publication, whether or not the feed has rows (the daemon may not be up yet)
		$cn->psql('postgres', 'SELECT trafficdb.publish()', on_error_stop => 0);
		my ($r, $o) = $cn->psql('postgres', q{SELECT daemon_pid IS NOT NULL AND generation > 0, generation, coalesce(log_damaged_at, 0),
		  replay_mismatches FROM trafficdb.status});
		return $o if $r == 0 && $o =~ /^t\|(\d+)/ && $1 > $after;
		return $o if $r == 0 && $o =~ /^\w\|\d+\|[1-9]/;
		usleep(100_000);
	}
	return 'timeout';
}

my $maxgen = $cn->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
my $bad = 0;
my @what = ('daemon during a map load', 'daemon mid-cycle', 'a feeding backend', 'immediate stop');
for my $cycle (0 .. 11)
{
	my $what = $what[ $cycle % 4 ];
	start_feeder();
	usleep(200_000 + int(rand(300_000)));
	my $dpid = $cn->safe_psql('postgres', 'SELECT daemon_pid FROM trafficdb.status');
	if ($what eq 'daemon during a map load')
	{
		my ($lo, $le) = ('', '');
		my $tbl = $cycle % 8 == 0 ? 'roads2' : 'roads';
		my $lm = IPC::Run::start([ 'psql', '-XAtq', '-d', $cn->connstr('postgres'), '-c', "SELECT trafficdb.load_map('$tbl', 'id', 'geom')" ],
			'>', \$lo, '2>', \$le, IPC::Run::timeout(120));
		usleep(20_000 + int(rand(250_000)));
		kill 'KILL', $dpid;
		$lm->finish;
	}
	elsif ($what eq 'daemon mid-cycle')
	{
		kill 'KILL', $dpid;
	}
	elsif ($what eq 'a feeding backend')
	{
		my $bpid = $cn->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend'
		  AND query ~ 'trafficdb.feed|audit|BEGIN|COMMIT' AND query !~ 'pg_stat_activity|load_map' AND pid <> pg_backend_pid() LIMIT 1});
		diag("cycle $cycle: no feeding backend found to kill") unless $bpid;
		kill 'KILL', $bpid if $bpid;
	}
	else
	{
		stop_feeder();
		$cn->stop('immediate');
		$cn->start;
	}
	usleep(100_000);
	stop_feeder();
	my $st = daemon_up($maxgen);
	my ($ok, $g, $dmg, $mis) = split /\|/, $st;
	if ($st eq 'timeout' || $dmg != 0 || $mis != 0 || $g <= $maxgen)
	{
		$bad++;
		diag("cycle $cycle ($what): status after the crash: $st (generation before: $maxgen)");
	}
	$maxgen = $g if $g && $g > $maxgen;
}
is($bad, 0, '12 crashes: each restart replays byte-identically, undamaged, generations going on');
$cn->poll_query_until('postgres', 'SELECT count(*) = 0 FROM trafficdb.feed') or diag('the feed was not consumed');
$cn->safe_psql('postgres', 'SELECT trafficdb.publish()');
my $last = $cn->safe_psql('postgres', 'SELECT max(n) FROM audit');
is($cn->safe_psql('postgres', qq{SELECT count(*) FILTER (WHERE speed_kmh = $last % 400
  AND updated_at = timestamptz '2026-01-01' + interval '1 ms' * $last), count(*) FROM trafficdb.locations WHERE location_id <= 200}),
	'200|200', 'the published traffic is the last committed batch: no committed feed row lost');
my $g0 = $cn->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
$cn->stop('immediate');
$cn->start;
is(daemon_up($g0) =~ /^t\|\d+\|0\|0$/ ? 1 : 0, 1, 'a last crash: replayed byte-identically');
is($cn->safe_psql('postgres', qq{SELECT count(*) FROM trafficdb.locations WHERE location_id <= 200 AND speed_kmh = $last % 400}),
	'200', 'and the traffic is the same');

# text in shared memory is UTF-8: a database in another encoding is refused
$cn->safe_psql('postgres', q{CREATE DATABASE latin1db ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0});
my ($lret, $lout, $lerr) = $cn->psql('latin1db', 'CREATE EXTENSION trafficdb CASCADE');
like($lerr, qr/trafficdb needs a UTF8 database; database "latin1db" is LATIN1.*HINT:  Create the database with ENCODING 'UTF8'/s,
	'CREATE EXTENSION in a LATIN1 database: refused, naming the encoding');
$cn->stop;

done_testing();
