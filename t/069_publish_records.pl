# t/069_publish_records.pl: the daemon's records of what its last writes
# changed (bgworker/trafficwrite.c) give back a large list once its slot is
# reused for a small write, and that small write is still recorded: the
# buffers are still brought up to date in place after it.  (A first version
# of the memory bound marked such a write unknown, so the publications that
# followed it were whole writes of the map.)  Every location reads as
# written throughout.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $n = 300_000;
my $node = tdb_node('pubrecords', 'trafficdb.publish_interval' => "'1h'");
tdb_line_grid($node, $n);

# a round: speed s on locations from .. from + count - 1; the entries the publication copied
sub round
{
	my ($from, $count, $s) = @_;
	$node->safe_psql('postgres', qq{
INSERT INTO trafficdb.feed (location_id, speed_kmh, observed_at)
SELECT i, $s, clock_timestamp() FROM generate_series($from, $from + $count - 1) i;
SELECT trafficdb.publish();
});
	return $node->safe_psql('postgres', 'SELECT last_publish_entries FROM trafficdb.status');
}

round(1, 10, 1) for 1 .. 4;		# every buffer written and recorded
# 90,000 changes: recorded (under a third of the map), a list of 90,000 in its slot
my $big = round(1, 90_000, 2);
cmp_ok($big, '<', $n, "a 90,000-change publication is written in place ($big entries)");
my @entries;
push @entries, round(100_000 + $_, 1, 3) for 1 .. 14;
# the first few copy the big write into older buffers; then a few entries each,
# also after the big write's slot took a one-change write (the 8th after it)
my @late = @entries[4 .. 13];
ok(!(grep { $_ > 10 } @late), "one-change publications after it copy a few entries each: @entries");
is($node->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.locations WHERE speed_kmh = 2'), '90000',
	'the big round reads as written');
is($node->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.locations WHERE speed_kmh = 3'), '14',
	'the one-change rounds read as written');

$node->stop;
done_testing();
