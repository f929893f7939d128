# t/027_feed_rotation.pl: the feed is four partitions the daemon rotates.
# Concurrent COPY and INSERT feeders across many flips: every committed row
# is consumed exactly once and the newest value of each location is
# published; a feeder holding its transaction open delays only its own
# partition's rows, the rest is published meanwhile, and its rows follow
# once it commits; the feed tables keep no index and are truncated, not
# deleted from.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('rotation', 'trafficdb.publish_interval' => "'20ms'", 'trafficdb.feed_lock_timeout' => "'50ms'");
$node->safe_psql('postgres', q{
CREATE EXTENSION trafficdb CASCADE;
CREATE TABLE roads AS
SELECT i::bigint AS id, ST_SetSRID(ST_MakeLine(ST_MakePoint(24.9 + (i % 40) * 0.002, 60.15 + (i / 40) * 0.001),
                              ST_MakePoint(24.9 + (i % 40) * 0.002 + 0.001, 60.15 + (i / 40) * 0.001 + 0.0005)), 4326) AS geom
  FROM generate_series(1, 400) i;
SELECT trafficdb.load_map('roads', 'id', 'geom');
});
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
  WHERE c.relname IN ('feed', 'feed_0', 'feed_1', 'feed_2', 'feed_3') AND c.relnamespace = 'trafficdb'::regnamespace}), '0',
	'the feed has no index to maintain');
my $consumed0 = $node->safe_psql('postgres', 'SELECT feed_rows_consumed FROM trafficdb.status');

# 4 feeders, each owning 100 locations, 60 rounds each: COPY (2 of them) or
# INSERT, the value of round r is r, observed in round order.
my @feeders;
for my $f (0 .. 3)
{
	my $copy = $f % 2 == 0;
	my $sql = '';
	for my $r (1 .. 60)
	{
		my $lo = $f * 100 + 1;
		my $hi = $f * 100 + 100;
		my $stmt = "INSERT INTO trafficdb.feed (location_id, speed_kmh, observed_at) "
		  . "SELECT i, $r, timestamptz '2026-01-01' + interval '1 s' * $r FROM generate_series($lo, $hi) i;\n";
		if ($copy)
		{
			$stmt = "COPY trafficdb.feed (location_id, speed_kmh, observed_at) FROM STDIN;\n"
			  . join('', map { "$_\t$r\t2026-01-01 00:00:$r+00\n" } grep { $r <= 59 } $lo .. $hi) . "\\.\n";
			$stmt = "INSERT INTO trafficdb.feed (location_id, speed_kmh, observed_at) SELECT i, $r, "
			  . "timestamptz '2026-01-01' + interval '1 s' * $r FROM generate_series($lo, $hi) i;\n" if $r > 59;
		}
		$sql .= $stmt . "SELECT pg_sleep(0.005);\n";
	}
	my ($in, $out, $err) = ($sql, '', '');
	push @feeders, IPC::Run::start([ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$err, IPC::Run::timeout(120));
}
$_->finish for @feeders;
pass('4 feeders committed 60 rounds each across the flips');
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
$node->poll_query_until('postgres', 'SELECT count(*) = 0 FROM trafficdb.feed') or die 'feed not consumed';
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
is($node->safe_psql('postgres', 'SELECT feed_rows_consumed - ' . $consumed0 . ' FROM trafficdb.status'), 4 * 60 * 100,
	'every committed row consumed exactly once');
is($node->safe_psql('postgres', q{SELECT count(*) FILTER (WHERE speed_kmh = 60), count(*) FROM trafficdb.locations}), '400|400',
	'the newest value of every location is published');
cmp_ok($node->safe_psql('postgres', q{SELECT count(DISTINCT generation) FROM trafficdb.generations WHERE kind = 'D'}), '>', 5,
	'the feeders ran across many publications');

# a feeder holding its transaction open delays only its partition
my $slow = $node->background_psql('postgres');
$slow->query_safe('BEGIN');
$slow->query_safe(q{INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, 11)});
my $skipped0 = $node->safe_psql('postgres', 'SELECT feed_parts_skipped FROM trafficdb.status');
# once the daemon finds the partition held, new rows avoid it
$node->poll_query_until('postgres', "SELECT feed_parts_skipped > $skipped0 FROM trafficdb.status")
  or die 'the held partition was never skipped';
for my $k (1 .. 6)
{
	$node->safe_psql('postgres', "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (2, $k)");
	$node->poll_query_until('postgres', "SELECT speed_kmh = $k FROM trafficdb.locations WHERE location_id = 2")
	  or die "row $k of location 2 not published while another feeder held its transaction";
}
pass('rows of other transactions are published while a feeder holds its transaction open');
pass('the held partition is skipped and counted (trafficdb.status.feed_parts_skipped)');
is($node->safe_psql('postgres', 'SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 1'), '60',
	'the held row is not published before its commit');
$slow->query_safe('COMMIT');
$slow->quit;
$node->poll_query_until('postgres', 'SELECT speed_kmh = 11 FROM trafficdb.locations WHERE location_id = 1')
  or die 'the held row was not published after its commit';
pass('once it commits, its row is published');

# COPY without a column list names what is missing
my ($ret, $out, $err) = $node->psql('postgres', "COPY trafficdb.feed FROM STDIN;\n1\t1\t2\t3\t4\t5\t\\N\t2026-01-01\n\\.\n");
like($err, qr/missing data for column "part"|part/, 'COPY without a column list: PostgreSQL names the missing column');

$node->stop;
done_testing();
