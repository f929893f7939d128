# t/003_crash.pl: nothing committed is lost, and external readers keep
# reading, when the daemon, a backend or the whole server is killed.
#
# A writer procedure commits feed rows one by one, each together with a row
# in an audit table (same transaction, so both or neither commit).  After
# each crash the published traffic must equal the newest audited value of
# every location.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $tdbread = $ENV{TDBREAD} // die 'TDBREAD must name tools/tdbread';

my $node = tdb_node('crash', 'trafficdb.publish_interval' => "'50ms'", 'restart_after_crash' => "on");
my $prefix = '/trafficdb.' . $node->port;

$node->safe_psql('postgres', q{
CREATE EXTENSION trafficdb CASCADE;
CREATE TABLE roads (id bigint PRIMARY KEY, geom geometry(LineString, 4326));
INSERT INTO roads SELECT i, ST_MakeLine(ST_MakePoint(25 + i * 0.0001, 60), ST_MakePoint(25 + i * 0.0001, 60.001))
  FROM generate_series(1, 200) i;
SELECT trafficdb.load_map('roads');
CREATE TABLE audit (n int PRIMARY KEY, location_id bigint, speed real, observed_at timestamptz);
CREATE PROCEDURE write_feed(first int, rows int) LANGUAGE plpgsql AS $$
DECLARE ts timestamptz;
BEGIN
  FOR i IN first .. first + rows - 1 LOOP
    ts := clock_timestamp();
    INSERT INTO audit VALUES (i, 1 + i % 200, (i % 400)::real, ts);
    INSERT INTO trafficdb.feed (location_id, speed_kmh, observed_at) VALUES (1 + i % 200, (i % 400)::real, ts);
    COMMIT;
    PERFORM pg_sleep(0.0005);  -- a steady stream, so the crashes land mid-stream
  END LOOP;
END $$;
});

# Published traffic must equal the newest committed (audited) value of each location.
sub check_nothing_lost
{
	my ($what) = @_;
	$node->poll_query_until('postgres', 'SELECT trafficdb.publish() > 0')
	  or die "daemon did not come back after $what";
	$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
	my $audited = $node->safe_psql('postgres', 'SELECT count(*) FROM audit');
	my $wrong = $node->safe_psql('postgres', q{
WITH latest AS (SELECT DISTINCT ON (location_id) location_id, speed FROM audit
                ORDER BY location_id, observed_at DESC, n DESC)
SELECT count(*) FROM latest l LEFT JOIN trafficdb.current_traffic() t USING (location_id)
 WHERE t.speed_kmh IS DISTINCT FROM l.speed});
	cmp_ok($audited, '>', 0, "$what: some feed rows were committed ($audited)");
	is($wrong, '0', "$what: published traffic reflects every committed feed row");
}

# Run the writer in the background (bounded: 20,000 rows, about 10 s); it
# dies with the crash, committed rows stay.
my ($win, $wout, $werr);
sub start_writer
{
	my ($first) = @_;
	($win, $wout, $werr) = ('', '', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-d', $node->connstr('postgres'), '-c', "CALL write_feed($first, 20000)" ],
		'<', \$win, '>', \$wout, '2>', \$werr, IPC::Run::timeout(120));
	# wait until it has committed some rows
	$node->poll_query_until('postgres', "SELECT count(*) > 100 FROM audit WHERE n >= $first")
	  or die 'the feed writer did not start';
	return $h;
}

# The writer must have been cut off by the crash, not have finished.
sub writer_was_cut
{
	my ($h, $what) = @_;
	eval { $h->finish; };
	like($werr, qr/server closed the connection|terminating connection|connection to server was lost/,
		"$what: the crash hit the writer mid-stream");
}

sub daemon_pid
{
	my $pid = '';
	$node->poll_query_until('postgres', 'SELECT daemon_pid IS NOT NULL FROM trafficdb.status');
	return $node->safe_psql('postgres', 'SELECT daemon_pid FROM trafficdb.status');
}

# An external reader watches the whole test: it must never see an
# inconsistent snapshot or a generation going backwards.
my ($rin, $rout, $rerr) = ('', '', '');
my $reader = IPC::Run::start([ $tdbread, $prefix, 'watch', '15' ],
	'<', \$rin, '>', \$rout, '2>', \$rerr, IPC::Run::timeout(120));

# 1. kill -9 the daemon while it publishes (a crash-restart follows)
my $w = start_writer(0);
my $gen_before = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
kill 'KILL', daemon_pid();
writer_was_cut($w, 'kill -9 of the daemon');
check_nothing_lost('kill -9 of the daemon');
my $gen_after = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
cmp_ok($gen_after, '>', $gen_before, 'generations keep counting up after the restart');

# 2. kill -9 a backend (the postmaster resets shared memory)
$w = start_writer(1_000_000);
my $victim = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE query LIKE 'CALL write_feed%' LIMIT 1});
ok($victim, 'found the writing backend');
kill 'KILL', $victim;
writer_was_cut($w, 'kill -9 of a backend');
check_nothing_lost('kill -9 of a backend');

# 3. immediate shutdown (no checkpoint, no cleanup) and start
$w = start_writer(2_000_000);
$node->stop('immediate');
writer_was_cut($w, 'pg_ctl stop -m immediate');
$node->start;
check_nothing_lost('pg_ctl stop -m immediate');

# 4. the daemon's own objects are validated on adoption: the readers never saw garbage
$reader->finish;
like($rout, qr/inconsistent=0 went_back=0/, 'the external reader saw only consistent snapshots')
  or diag("tdbread: $rout $rerr");
like($rout, qr/reads=[1-9]/, 'and kept reading through the crashes');

# 5. an orderly stop tells external readers to reopen and frees the names
$node->stop;
ok(!-e "/dev/shm$prefix.ctl", 'an orderly shutdown removes the shared memory names');
done_testing();
