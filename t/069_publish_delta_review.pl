# t/069_publish_delta_review.pl: review of 39d93c2 (a reused traffic buffer
# is brought up to date entry by entry while the entries to copy, summed
# over every write since it was written, are at most a third of the map).
# On a 20,000-location map (1/16 + 1024 = 2,274; 1/3 + 1024 = 7,690) rounds
# of 300 to 9,000 changes, with incidents that grow, shrink and clear
# (moving later offsets), cross both thresholds and the 'all' write record
# (a round above the threshold): after every round every location reads as
# written; both ways of writing happen; a restart replays every generation
# byte-identically.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('pubdelta', 'trafficdb.publish_interval' => "'1h'",
	'trafficdb.checkpoint_interval' => '1000', 'trafficdb.log_retention' => "'1h'",
	'trafficdb.log_retention_generations' => '1000');
tdb_random_roads($node);
tdb_model_create($node);

sub round
{
	my ($seed, $n, $incidents) = @_;
	tdb_model_round($node, $seed, $n, $incidents, 20000, 60);
	return $node->safe_psql('postgres', 'SELECT last_publish_entries FROM trafficdb.status');
}

my (%ways, $seed);
my @sizes = (3000, 300, 2500, 2500, 2500, 1, 3000, 4000, 1000, 1, 1, 9000, 1, 1, 2000, 2500, 2500, 500, 6000, 1, 1, 1, 2600, 2600, 2600, 2600);
for my $n (@sizes)
{
	$seed++;
	my $e = round($seed, $n, $seed % 3 == 0 ? 0 : 0.25);
	$ways{ $e >= 20000 ? 'whole' : 'delta' }++;
	tdb_model_check($node, "round $seed ($n changes, $e entries written)");
}
ok($ways{whole} && $ways{delta}, "both ways: $ways{whole} whole, $ways{delta} in place");

tdb_restart_replayed($node);
tdb_model_check($node, 'after the restart');
round(100, 2500, 0.25) for 1 .. 2;
tdb_model_check($node, 'rounds after the restart');

$node->stop;
done_testing();
