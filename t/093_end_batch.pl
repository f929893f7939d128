# t/093_end_batch.pl: trafficdb_end_batch, an end of batch in a writer's
# lane (issue 32: a producer that puts in rounds has each round published
# on its own, at once, without waiting for it, while it puts the next):
#
#   1. without it, three ASYNC puts of one location and a sync make one
#      generation (the daemon merges what it drained: newest wins); with
#      an end of batch after each, three generations of one entry each,
#      the location's three values in order;
#   2. an end of batch is published at once (publish_interval is 10 min
#      here), without the writer waiting;
#   3. while every generation fails (a renamed column), the lane is drained
#      no further than the end of batch: the updates after it fill the
#      lane (Busy, for puts and for end_batch itself) and are not merged
#      into the generation that finally commits, which holds only what came
#      before the end; then they follow in a generation of their own;
#      An end of batch with nothing after it, while generations fail, keeps
#      the daemon awake (it retries at the drain interval) and is published
#      once they succeed;
#   4. bad flags are refused (BADARG, saying which flags are allowed).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use IPC::Run;
use lib 't';
use TdbTest;

my $node = tdb_node('end_batch', 'trafficdb.publish_interval' => "'10min'", 'trafficdb.writer_ring_slots' => '128');
tdb_grid_map($node);

my $shm = '/trafficdb.' . $node->port;
my $py = tdb_python("name = '$shm'");
sub py { return $py->(@_); }

sub gen { return $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status'); }

# the D records after generation g: "entries" of each, in order
sub d_records
{
	my ($g) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(entries::text, ',' ORDER BY generation), '') FROM trafficdb.generations WHERE kind = 'D' AND generation > $g");
}

sub speed_of
{
	my ($id) = @_;
	return $node->safe_psql('postgres', "SELECT speed_kmh FROM trafficdb.locations WHERE location_id = $id");
}

# every generation fails from here (a column of the log renamed), or succeeds again
sub generations_fail { $node->safe_psql('postgres', 'ALTER TABLE trafficdb.generations RENAME COLUMN body TO body_renamed'); }
sub generations_succeed { $node->safe_psql('postgres', 'ALTER TABLE trafficdb.generations RENAME COLUMN body_renamed TO body'); }

# does cond hold within 5 s (polled every 50 ms)?
sub within_5s
{
	my ($cond) = @_;
	for (1 .. 100)
	{
		return 1 if $cond->();
		usleep(50_000);
	}
	return 0;
}

# ---- 1. merged without, one generation per batch with ----------------------------------

my $g0 = gen();
py(q{
w = trafficdb.Writer(name)
for s in (10, 20, 30):
    w.put(7, speed_kmh=s)
w.sync()
});
is(d_records($g0), '1', 'three ASYNC puts of one location, then a sync: one generation (merged)');
is(speed_of(7), '30', '... holding the last value');

# a subscriber of location 8 sees each batch as a change of its own
my $pydir = $ENV{TRAFFICDB_PYTHON};
my ($so, $se) = ('', '');
my $sub = IPC::Run::start([ '/usr/bin/python3', '-c', qq{
import sys; sys.path.insert(0, "$pydir")
import trafficdb
with trafficdb.Subscriber("$shm", ids=[8], timeout_ms=3000) as s:
    print("ready", flush=True)
    n = 0
    for e in s.events(timeout_ms=3000):
        print(e.kind, e.generation, e.location_id, flush=True)
        n += 1
        if n == 3:
            break
} ], '>', \$so, '2>', \$se);
for (1 .. 100) { $sub->pump_nb; last if $so =~ /ready/; usleep(50_000); }
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');	# attaches it
$g0 = gen();
py(q{
w = trafficdb.Writer(name)
for s in (11, 21):
    w.put(8, speed_kmh=s)
    w.end_batch()
w.put(8, speed_kmh=31)
w.end_batch(sync=True)
});
is(d_records($g0), '1,1,1', 'with an end of batch after each put: three generations of one entry');
$sub->finish;
my @g = ($g0 + 1, $g0 + 2, $g0 + 3);
is(join('|', grep { !/ready/ } split /\n/, $so), "change $g[0] 8|change $g[1] 8|change $g[2] 8",
	'... and a subscriber gets a change event from each') or diag($se);
is(speed_of(8), '31', '... the last value last');

# ---- 2. published at once, the writer not waiting ----------------------------------------

# a session's lock on the log's table holds the generation back: end_batch
# returns all the same, and the batch is published once the lock goes
$g0 = gen();
my $holder = $node->background_psql('postgres');
$holder->query_safe('BEGIN');
$holder->query_safe('LOCK TABLE trafficdb.generations IN SHARE MODE');
my $ret = py(q{
w = trafficdb.Writer(name)
w.put(9, speed_kmh=44)
w.end_batch()
print('returned')
});
is($ret, 'returned', 'end_batch returns while its generation cannot commit (it does not wait for it)');
is(gen(), $g0, '... which is not published yet');
$holder->query_safe('COMMIT');
$holder->quit;
ok(within_5s(sub { gen() > $g0 }), 'the batch is published within 5 s of the lock going (publish_interval 10 min)');
is(speed_of(9), '44', '... with its value');

# ---- 3. failing generations: the lane waits at the end of batch --------------------------

my $dir = PostgreSQL::Test::Utils::tempdir;
$g0 = gen();
generations_fail();
# one writer throughout: location 10 before the end of batch, 11, 12, ... after it
my ($wo, $we) = ('', '');
my $writer = IPC::Run::start([ '/usr/bin/python3', '-c', qq{
import sys, os, time; sys.path.insert(0, "$pydir")
import trafficdb
w = trafficdb.Writer("$shm")
w.put(10, speed_kmh=50)
w.end_batch()
time.sleep(1.0)                  # the daemon drains up to the end and fails to commit
busy_put = busy_end = False
n = 0
for i in range(200):             # the lane (128 slots) fills: nothing past the end is drained
    try:
        w.put(11 + i, speed_kmh=60)
        n += 1
    except trafficdb.Busy:
        busy_put = True
        break
try:
    w.end_batch()
except trafficdb.Busy:
    busy_end = True
print(n, busy_put, busy_end, flush=True)
for _ in range(600):
    if os.path.exists("$dir/go"):
        break
    time.sleep(0.1)
w.end_batch(sync=True, wait=True)
print("done", flush=True)
} ], '>', \$wo, '2>', \$we);
for (1 .. 200) { $writer->pump_nb; last if $wo =~ /\n/; usleep(50_000); }
my ($n, $busy_put, $busy_end) = split ' ', $wo;
note("$n puts went in after the end of batch while every generation failed");
is($busy_put, 'True', 'while generations fail, puts past the end of batch fill the lane (Busy)') or diag($we);
ok(defined $n && $n >= 100 && $n <= 128, "... after about a lane of them (" . ($n // 'none') . ")");
is($busy_end, 'True', '... and end_batch on a full lane is Busy too');
is(gen(), $g0, 'no generation committed meanwhile');
generations_succeed();
open(my $fh, '>', "$dir/go") or die;
close($fh);
for (1 .. 400) { last unless eval { $writer->pump_nb; 1 }; last if $wo =~ /done/; usleep(50_000); }
$writer->finish;
like($wo, qr/done/, 'then its end_batch(sync) returns') or diag($we);
is(d_records($g0), "1,$n", "the first generation after the failures holds location 10 alone (1 entry), the next the $n after the end");
is(speed_of(10) . ',' . speed_of(11), '50,60', '... with their values');

# an end of batch with nothing after it, while generations fail for 1 s: the
# daemon retries it (at most 1 s apart) and publishes it once they succeed
$g0 = gen();
generations_fail();
py(q{
w = trafficdb.Writer(name)
w.put(500, speed_kmh=77)
w.end_batch()
time.sleep(1.0)
});
is(gen(), $g0, 'a batch ended while generations fail: not published');
generations_succeed();
ok(within_5s(sub { gen() > $g0 }), '... published within 5 s once they succeed (publish_interval 10 min: the daemon retries it)');
is(speed_of(500), '77', '... with its value');

# while generations fail, a lane stopped at an end of batch (puts behind it)
# is retried later and later (10 ms doubling to 1 s), not at every drain
# (the review measured 800 failed generations a second for as long as the
# failure lasted, with no writer left)
$g0 = gen();
generations_fail();
py(q{
w = trafficdb.Writer(name)
w.put(700, speed_kmh=70)
w.end_batch()
for i in range(5):
    w.put(701 + i, speed_kmh=71)
});
my $logtext = slurp_file($node->logfile);
my $fails0 = () = $logtext =~ /trafficdb feed failed/g;
usleep(3_000_000);
$logtext = slurp_file($node->logfile);
my $fails = (() = $logtext =~ /trafficdb feed failed/g) - $fails0;
note("$fails failed generations in 3 s with a lane stopped at an end of batch");
cmp_ok($fails, '<=', 40, 'while generations fail, a batch is retried at a backing-off pace (at most 40 in 3 s)');
generations_succeed();
ok(within_5s(sub { (speed_of(700) // '') eq '70' }), '... and published within 5 s once they succeed');

# ---- orderly stops with batches queued -------------------------------------------------
# Each queued put is an ASYNC put the writer was told is in shared memory:
# the daemon commits them all before it exits.  A session holds a lock on
# the log's table, so the daemon waits in the first batch's INSERT while the
# others queue; the stop ends that session (its lock goes) and finds the
# rest queued.  A node of its own, as a server is by default: max_wal_senders
# > 0 (PostgreSQL then treats a commit during a stop as not confirmed by a
# standby, even with none named: the lanes stayed stopped at their ends and
# the rest was lost, as the second review found), fsync on (a commit each
# costs what it does on a server), a lane of 16,384 slots.
my $sn = tdb_node('end_batch_stop', 'trafficdb.publish_interval' => "'10min'", 'wal_level' => 'replica',
	'max_wal_senders' => '4', 'trafficdb.writer_ring_slots' => '16384', 'fsync' => 'on',
	'trafficdb.stop_batches_timeout' => "'100ms'");
tdb_grid_map($sn);
my $spy = tdb_python("name = '/trafficdb." . $sn->port . "'");
# (polled: '' while the restarted daemon replays, "trafficdb is starting")
sub sspeed
{
	my ($rc, $out) = $sn->psql('postgres', "SELECT speed_kmh FROM trafficdb.locations WHERE location_id = $_[0]");
	return $rc == 0 ? $out : '';
}

# queue what $code puts behind the lock, stop, start: its output, the seconds the stop took, the generation before
sub stop_with_queued
{
	my ($code) = @_;
	my $locker = $sn->background_psql('postgres');
	$locker->query_safe('BEGIN');
	$locker->query_safe('LOCK TABLE trafficdb.generations IN SHARE MODE');
	my $gen0 = $sn->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
	my $out = $spy->($code);
	usleep(300_000);
	my $t0 = time();
	$sn->stop('fast');
	my $secs = time() - $t0;
	eval { $locker->quit; };
	$sn->start;
	return ($out, $secs, $gen0);
}

# 30 batches, an empty one, one whose update changes nothing (older than
# what is stored), then one more and a put with no end after it
my ($q) = stop_with_queued(q{
w = trafficdb.Writer(name)
for r in range(30):
    w.put(600, speed_kmh=r + 1)
    w.end_batch()
w.end_batch()
w.put(600, speed_kmh=50, observed_at_us=1000000)
w.end_batch()
w.put(600, speed_kmh=99)
w.end_batch()
w.put(601, speed_kmh=5)
});
my $ok = 0;
for (1 .. 400) { if (sspeed(600) eq '99' && sspeed(601) eq '5') { $ok = 1; last; } usleep(50_000); }
ok($ok, 'after an orderly stop with 32 batches queued (an empty one, one that changed nothing) and a put after them, all are there')
  or diag('600: ' . sspeed(600) . ', 601: ' . sspeed(601));

# 8,000 batches on one lane: a generation each for stop_batches_timeout
# (100 ms here; a commit each costs a WAL flush, fsync on), then the rest in
# one, not a commit each
my ($n6, $secs, $gen6) = stop_with_queued(q{
w = trafficdb.Writer(name)
n = 0
for r in range(8000):
    w.put(602, speed_kmh=r % 300, wait=True)
    w.end_batch(wait=True)
    n += 1
w.put(605, speed_kmh=7, wait=True)
print(n)
});
my $stop_gens = $sn->safe_psql('postgres', 'SELECT generation FROM trafficdb.status') - $gen6;
note(sprintf('the stop with %s batches queued took %.1f s and made %d generations', $n6 // '?', $secs, $stop_gens));
cmp_ok($stop_gens, '<', $n6, "an orderly stop with $n6 batches queued does not commit each on its own");
like(slurp_file($sn->logfile), qr/batches still queued after 100 ms go into one generation/,
	'... the rest went into one generation after stop_batches_timeout');
$ok = 0;
for (1 .. 400)
{
	if (sspeed(602) . ',' . sspeed(605) eq '199,7') { $ok = 1; last; }
	usleep(50_000);
}
ok($ok, '... and the last values are there') or diag(sspeed(602) . ',' . sspeed(605));
$sn->stop;

# ---- 4. bad flags -------------------------------------------------------------------------

my $bad = py(q{
from trafficdb import _lib
w = trafficdb.Writer(name)
print(_lib.trafficdb_end_batch(w._handle(), 0x10) == trafficdb.BADARG)
print(_lib.trafficdb_writer_errmsg(w._handle()).decode())
});
my ($is_badarg, $msg) = split /\n/, $bad;
is($is_badarg, 'True', 'unknown flags: TRAFFICDB_BADARG');
like($msg // '', qr/trafficdb_end_batch: flags 0x10: TRAFFICDB_SYNC and TRAFFICDB_WAIT only/, '... naming them and the allowed ones');

done_testing();
