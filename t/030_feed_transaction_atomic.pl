# t/030_feed_transaction_atomic.pl: the rows one transaction writes to
# trafficdb.feed are published together, in one generation.  TODO: they are
# not since the feed became partitions the daemon rotates (found by the kill
# -9 loop: "set mixes batches", 764 inconsistent snapshots in 15 s of its
# feed writer alone, no kill needed).
#
# How: consume_feed() (bgworker/daemon.c) points new rows at the next
# partition, then takes the current one waiting up to
# trafficdb.feed_lock_timeout (200 ms) for the writers in it.  A transaction
# that inserted into it and is still open goes on: its next statement's rows
# get the new partition from the column default trafficdb._feed_part(),
# evaluated per row.  When it commits, the daemon's wait ends and it
# publishes the rows in the partition it took, half the transaction; the
# other half comes one generation later.  Here: a pause of 100 ms between two
# INSERTs of one transaction (publish_interval 50 ms, under the lock timeout).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('feed_atomic', 'trafficdb.publish_interval' => "'50ms'");
$node->safe_psql('postgres', q{
CREATE EXTENSION trafficdb CASCADE;
CREATE TABLE roads AS SELECT i::bigint AS id,
  ST_SetSRID(ST_MakeLine(ST_MakePoint(25 + i * 0.001, 60), ST_MakePoint(25 + i * 0.001, 60.001)), 4326) AS geom
  FROM generate_series(1, 10) i;
SELECT trafficdb.load_map('roads', 'id', 'geom');
});
$node->poll_query_until('postgres', 'SELECT trafficdb.publish() > 0') or die 'no publication';

my $split = 0;
for my $round (1 .. 5)
{
	$node->safe_psql('postgres', qq{
BEGIN;
INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, $round);
SELECT pg_sleep(0.1);
INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (2, $round);
COMMIT;
});
	$node->poll_query_until('postgres',
		"SELECT count(*) = 2 FROM trafficdb.locations WHERE location_id IN (1, 2) AND speed_kmh = $round")
	  or die "round $round: not published";
	my $gens = $node->safe_psql('postgres',
		'SELECT count(DISTINCT changed_generation) FROM trafficdb.locations WHERE location_id IN (1, 2)');
	note("round $round: the transaction's two rows were published in $gens generation(s)");
	$split++ if $gens ne '1';
}
TODO:
{
	local $TODO = 'a feed transaction whose statements straddle a partition flip is published in two generations';
	is($split, 0, 'the rows of each transaction were published in one generation (5 rounds)');
}
$node->stop;
done_testing();
