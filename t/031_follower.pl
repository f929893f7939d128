# t/031_follower.pl: a hot standby's daemon follows the primary's generation
# log: it publishes the primary's generations with the same numbers and
# byte-identical traffic (each object's checksum compared with the one the
# primary recorded), rebuilds after a map reload on the primary, catches up
# after a restart of the standby, refuses publish() and load_map(), and
# when promoted goes on publishing from the next generation with no gap.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my ($primary, $standby) = tdb_standby_pair('trafficdb.publish_interval' => "'1h'", 'trafficdb.checkpoint_interval' => '50', 'trafficdb.checkpoint_min_changed' => '0');

sub rounds
{
	my ($from, $to) = @_;
	tdb_feed_round($primary, $_) for $from .. $to;
}

my $sql = q{SELECT location_id, speed_kmh, incident, updated_at, changed_generation FROM trafficdb.locations ORDER BY 1};
sub caught_up { return tdb_caught_up($primary, $standby); }

# FOLLOWER_ROUNDS (default 120) publications before the first comparison;
# the issue's long run: FOLLOWER_ROUNDS=10000 (about ten minutes)
my $n = $ENV{FOLLOWER_ROUNDS} // 120;
rounds(1, $n);
my $g = caught_up();
is($standby->safe_psql('postgres', 'SELECT role, replay_mismatches, replay_lag_generations FROM trafficdb.status'),
	'follower|0|0', 'the standby follows: every generation byte-identical to the primary\'s, no lag');
is($standby->safe_psql('postgres', $sql), $primary->safe_psql('postgres', $sql), 'the same traffic at the same generation');
is($standby->safe_psql('postgres', 'SELECT map_id FROM trafficdb.status'), $primary->safe_psql('postgres', 'SELECT map_id FROM trafficdb.status'),
	'the same map (rebuilt from the replicated source with the logged id)');
cmp_ok($standby->safe_psql('postgres', 'SELECT publishes FROM trafficdb.status'), '>=', $n * 0.8,
	'it published the primary\'s generations one by one');

my ($ret, $out, $err) = $standby->psql('postgres', 'SELECT trafficdb.publish()');
like($err, qr/cannot run on a standby/, 'publish() on the standby: a clear error');
($ret, $out, $err) = $standby->psql('postgres', q{SELECT trafficdb.load_map('roads')});
like($err, qr/cannot run on a standby/, 'load_map() on the standby: a clear error');

# a map reload on the primary: the follower rebuilds from the new checkpoint
$primary->safe_psql('postgres', q{INSERT INTO roads SELECT 3000, 'New', ST_SetSRID(ST_MakeLine(ST_MakePoint(25, 60.2), ST_MakePoint(25.001, 60.2)), 4326);
  SELECT trafficdb.load_map('roads', 'id', 'geom', NULL, 'name');});
rounds($n + 1, $n + 20);
$g = caught_up();
is($standby->safe_psql('postgres', 'SELECT replay_mismatches, locations FROM trafficdb.status'), '0|2001',
	'after a map reload on the primary: the new map, byte-identical generations');
is($standby->safe_psql('postgres', $sql), $primary->safe_psql('postgres', $sql), 'and the same traffic');

# a restart of the standby: it catches up from the log
$standby->stop;
rounds($n + 21, $n + 50);
$standby->start;
$g = caught_up();
is($standby->safe_psql('postgres', 'SELECT replay_mismatches FROM trafficdb.status'), '0', 'after a standby restart: caught up, byte-identical');
is($standby->safe_psql('postgres', $sql), $primary->safe_psql('postgres', $sql), 'and the same traffic');

# promotion: the follower becomes the writer and continues the numbering
$primary->stop;
$standby->promote;
$standby->poll_query_until('postgres', q{SELECT role = 'primary' FROM trafficdb.status}) or die 'not primary after promotion';
# (the old primary's orderly stop may have logged one more generation)
$g = $standby->safe_psql('postgres', 'SELECT max(generation) FROM trafficdb.generations');
$standby->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (5, 99)});
is($standby->safe_psql('postgres', 'SELECT trafficdb.publish()'), $g + 1, 'promoted: the next generation is the one after the primary\'s last');
is($standby->safe_psql('postgres', 'SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 5'), '99', 'and it publishes new feed rows');
is($standby->safe_psql('postgres', qq{SELECT count(*) FROM trafficdb.generations WHERE kind = 'D' AND generation = @{[$g + 1]}}), '1',
	'logged as the next record of the same log');
$standby->restart;
$standby->poll_query_until('postgres', "SELECT generation > @{[$g + 1]} FROM trafficdb.status") or die 'no publication after restart';
is($standby->safe_psql('postgres', 'SELECT replay_mismatches FROM trafficdb.status'), '0', 'the promoted server replays its log byte-identically');

done_testing();
