# t/053_matching_budget.pl: subscriptions never starve publication (issue
# 28, item 5).  The generation is published first; the subscriptions are
# matched after it within trafficdb.match_budget_ms, and what does not fit is
# counted (trafficdb.status match_overruns, match_records_skipped) and told
# to its owners: an overrun event naming the generation to every subscriber,
# ' overrun <g>' in a notify subscription's next payload.  Subscriptions
# nobody receives (no session, tap or notify) are not matched at all, and the
# daemon's index of subscriptions is bounded by
# trafficdb.subscription_index_mb (what does not fit is counted, and a notify
# subscription left out is told: payload '<g> 0 unindexed').
#
# Scaled to run in seconds: 2,000 subscriptions covering the whole map of
# 2,000 locations (4 M pairs), an index of 32 MB (2.8 M pairs) and a budget
# of 1 ms; every location changes at each publication.  No timing is
# asserted: the behaviour is (published, counted, told).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run qw(finish);
use lib 't';
use TdbTest;

my $node = tdb_node('budget', 'trafficdb.publish_interval' => "'1h'",
	'trafficdb.match_budget_ms' => '1', 'trafficdb.subscription_index_mb' => '32');
tdb_grid_map($node);

# one notify subscription (the lowest id: indexed first among the rows), then
# 1,999 map-wide ones whose condition never holds here (congestion unknown):
# no events, but every (location, subscription) pair is evaluated
my $told = $node->safe_psql('postgres', q{
INSERT INTO trafficdb.subscriptions (name, location_ids, notify) VALUES ('told', '{5, 6}', true) RETURNING id});
$node->safe_psql('postgres', q{
INSERT INTO trafficdb.subscriptions (name, area, condition, value)
SELECT 'wide ' || i, ST_MakeEnvelope(24.89, 60.14, 25.0, 60.21, 4326), 'congestion_at_least', 4
  FROM generate_series(1, 1999) i});
# and a map-wide notify one with the highest id: the first the index leaves out once every row is indexed
my $last = $node->safe_psql('postgres', q{
INSERT INTO trafficdb.subscriptions (name, area, condition, value, notify)
VALUES ('last', ST_MakeEnvelope(24.89, 60.14, 25.0, 60.21, 4326), 'congestion_at_least', 4, true) RETURNING id});

my $round = 0;
sub feed_all
{
	$round++;
	return "INSERT INTO trafficdb.feed (location_id, speed_kmh) SELECT i, 20 + (i + $round) % 50 FROM generate_series(1, 2000) i;";
}

# nobody receives the map-wide rows (no session, no tap, no notify): not matched
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
$node->safe_psql('postgres', feed_all() . 'SELECT trafficdb.publish()');
is($node->safe_psql('postgres', 'SELECT subscriptions, match_overruns, subscriptions_unindexed FROM trafficdb.status'),
	'2001|0|0', 'rows nobody receives are loaded but neither indexed nor matched: no overrun with a 1 ms budget');

# a tap (every SQL subscription's events): now they are matched, over the budget
my $tap = tdb_tdbsub($node, '--all-subscriptions', '--timeout-ms', '3000');
# the daemon attaches it, and indexes every row: the last is left out, and its owner told
my $last_ch = "trafficdb_subscription_${last}_" . $node->safe_psql('postgres', "SELECT notify_key FROM trafficdb.subscriptions WHERE id = $last");
my ($r0, $o0, $e0) = $node->psql('postgres', "LISTEN $last_ch; SELECT trafficdb.publish(); SELECT pg_sleep(0.2);");
like($o0 . $e0, qr/notification "$last_ch" with payload "\d+ 0 unindexed"/,
	'a notify subscription over trafficdb.subscription_index_mb: its owner is told it gets no events');
my $before = $node->safe_psql('postgres', 'SELECT match_overruns FROM trafficdb.status');
my $gen = $node->safe_psql('postgres', feed_all() . 'SELECT trafficdb.publish()');
is($node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status'), $gen, 'publish() returned and the generation is published');
is($node->safe_psql('postgres', "SELECT count(*) FROM trafficdb.locations WHERE changed_generation = $gen"), '2000',
	'readers see all of its 2,000 changes');
my ($over, $skipped, $unindexed) = split /\|/,
  $node->safe_psql('postgres', 'SELECT match_overruns, match_records_skipped, subscriptions_unindexed FROM trafficdb.status');
cmp_ok($over, '>', $before, "the matching over trafficdb.match_budget_ms is counted (match_overruns $over)");
cmp_ok($skipped, '>', 0, "and the changed locations it skipped ($skipped)");
cmp_ok($unindexed, '>', 0, "subscriptions over trafficdb.subscription_index_mb are counted ($unindexed)");
cmp_ok($unindexed, '<', 2001, 'the others are indexed');
ok(tdb_wait_output($tap, qr/^overrun $gen /m, 3), "the tap gets an overrun event naming generation $gen")
	or diag(${ $tap->{out} } . ${ $tap->{err} });
like(slurp_file($node->logfile), qr/matching the subscriptions took more than trafficdb\.match_budget_ms/,
	'the log says so, naming the setting');
like(slurp_file($node->logfile), qr/subscriptions get no events: their index would take more than trafficdb\.subscription_index_mb/,
	'and names the index bound');

# a notify subscription's owner (the tap still attached): its payload says overrun
my $told_ch = "trafficdb_subscription_${told}_" . $node->safe_psql('postgres', "SELECT notify_key FROM trafficdb.subscriptions WHERE id = $told");
my ($ret, $out, $err) = $node->psql('postgres', "LISTEN $told_ch; " . feed_all() .
	'SELECT trafficdb.publish(); SELECT pg_sleep(0.2);');
$gen = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
like($out . $err, qr/notification "$told_ch" with payload "$gen \d+ overrun \d+"/,
	'a notify subscription matched over the budget: its payload says overrun');
$tap->{h}->kill_kill;
finish($tap->{h});

done_testing();
