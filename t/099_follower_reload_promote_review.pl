# t/099_follower_reload_promote_review.pl: a map reload on the primary
# writes its generation as checkpoint records only (C + K, no D).  The
# follower read D records only, so with nothing published after the reload
# it stayed on the old map (found by the hostile review of a370aee).  A
# promotion in that window then logged its next generation for the old map
# under the reload's number, and a restart replayed from the reload's
# checkpoint: what the promoted server had published was gone, with
# replay_mismatches 0.  The follower now rebuilds from a checkpoint that has
# no D record (tdb_log_checkpoint_alone_after).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my ($primary, $standby) = tdb_standby_pair('trafficdb.publish_interval' => "'1h'");
$primary->safe_psql('postgres', q{
INSERT INTO trafficdb.feed (location_id, speed_kmh, incident, observed_at) VALUES (5, 50, 'before', now());
SELECT trafficdb.publish();});
tdb_caught_up($primary, $standby);

# the reload: a road gone, nothing published after it
$primary->safe_psql('postgres', q{DELETE FROM roads WHERE id = 7; SELECT trafficdb.load_map('roads', 'id', 'geom', NULL, 'name')});
my $pg = $primary->safe_psql('postgres', 'SELECT generation || \'|\' || locations FROM trafficdb.status');
$primary->wait_for_catchup($standby, 'replay');
my $sg = '';
for (1 .. 100)
{
	$sg = $standby->safe_psql('postgres', 'SELECT generation || \'|\' || locations FROM trafficdb.status');
	last if $sg eq $pg;
	select(undef, undef, undef, 0.1);
}
note("primary $pg, standby $sg after the reload");
is($sg, $pg, 'the follower is on the reloaded map without a later publication');

# promote in that window (the old primary stops first, as in a failover)
$primary->stop('immediate');
$standby->promote;
$standby->poll_query_until('postgres', q{SELECT NOT pg_is_in_recovery()}) or die 'not promoted';
$standby->poll_query_until('postgres', q{SELECT role = 'primary' AND daemon_pid IS NOT NULL FROM trafficdb.status})
  or die 'no primary daemon after the promotion';
$standby->safe_psql('postgres', q{
INSERT INTO trafficdb.feed (location_id, speed_kmh, incident, observed_at) VALUES (6, 60, 'after', now());
SELECT trafficdb.publish();});
note($standby->safe_psql('postgres', q{SELECT string_agg(generation || kind || part || ':' || map_id || ':' || entries, ' ' ORDER BY generation, kind, part)
  FROM trafficdb.generations}));
my $st = $standby->safe_psql('postgres', 'SELECT generation || \'|\' || locations FROM trafficdb.status');
note("promoted: $st");
is($standby->safe_psql('postgres', q{SELECT count(*) FROM (SELECT generation FROM trafficdb.generations
  GROUP BY generation HAVING count(DISTINCT map_id) > 1) s}), '0', 'no generation number is logged for two maps');
is($standby->safe_psql('postgres', 'SELECT locations FROM trafficdb.status'), '1999',
	'the promoted server serves the reloaded map (1,999 locations)');

$standby->restart;
$standby->poll_query_until('postgres', q{SELECT daemon_pid IS NOT NULL AND generation > 0 FROM trafficdb.status})
  or die 'no daemon after the restart';
note('after the restart: ' . $standby->safe_psql('postgres', 'SELECT generation || \'|\' || locations || \'|\' || map_id FROM trafficdb.status'));
is($standby->safe_psql('postgres', 'SELECT replay_mismatches, log_damaged_at IS NULL FROM trafficdb.status'), '0|t',
	'after a restart of the promoted server: the log replays byte-identically, undamaged');
is($standby->safe_psql('postgres', q{SELECT string_agg(location_id || '=' || incident, ',' ORDER BY location_id)
  FROM trafficdb.locations WHERE incident IS NOT NULL}), '5=before,6=after', 'and its incidents are the ones put');

done_testing();
