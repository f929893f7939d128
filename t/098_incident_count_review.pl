# t/098_incident_count_review.pl: the hostile review of a370aee, which reads
# D.incidents[i] only when D.incident_count > 0 (apply_traffic, the put drain,
# the log's to_entry/source_entries).  Incidents are set and cleared through
# feed rows and through libtrafficdb puts (async, in one generation, and
# sync), starting from no incident anywhere, including "none anywhere ->
# one set -> cleared -> set again" inside one generation, across map reloads
# (the same source, and a source that lost a location with an incident), a
# crash (immediate stop) and a clean restart; after each: every location's
# incident is what was put (newest observation wins), the follower has the
# same, and every replayed generation is byte-identical
# (status.replay_mismatches = 0).  A missed incident in a D record or a
# checkpoint part would show as both a wrong incident after the restart and
# a replay mismatch.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use lib 't';
use TdbTest;

my ($node, $standby) = tdb_standby_pair('trafficdb.publish_interval' => "'1h'",
	'trafficdb.checkpoint_interval' => '1000', 'trafficdb.checkpoint_min_changed' => '0',
	'trafficdb.log_retention_generations' => '100000');
my $shm = '/trafficdb.' . $node->port;
my $py = tdb_python("name = '$shm'\nw = trafficdb.Writer(name)");

# observation times: T0 + k ms, T0 two minutes ago (increasing k: the newest wins)
my $t0 = int(time() * 1e6) - 120_000_000;
my (%inc, %obs);

sub model_apply
{
	my ($loc, $inc, $k) = @_;
	return if defined $obs{$loc} && $obs{$loc} > $k;
	$obs{$loc} = $k;
	$inc{$loc} = $inc;
}

# feed rows [loc, incident or undef, k] in one INSERT (consumed by the next publish)
sub feed
{
	my @rows = @_;
	my @v;
	for my $r (@rows)
	{
		my ($loc, $i, $k) = @$r;
		my $us = $t0 + $k * 1000;
		push @v, "($loc, " . ($k % 100) . ', ' . (defined $i ? "'$i'" : 'NULL') .
		  ", 'epoch'::timestamptz + $us * interval '1 microsecond')";
		model_apply($loc, $i, $k);
	}
	$node->safe_psql('postgres',
		'INSERT INTO trafficdb.feed (location_id, speed_kmh, incident, observed_at) VALUES ' . join(', ', @v));
}

# puts [loc, incident or undef, k, sync] through libtrafficdb, in order
sub put
{
	my @rows = @_;
	my $code = '';
	for my $r (@rows)
	{
		my ($loc, $i, $k, $sync) = @$r;
		my $us = $t0 + $k * 1000;
		$code .= "w.put($loc, speed_kmh=" . ($k % 100) . ', incident=' . (defined $i ? "'$i'" : 'None') .
		  ", observed_at_us=$us" . ($sync ? ', sync=True' : '') . ")\n";
		model_apply($loc, $i, $k);
	}
	is($py->($code . "print('ok')"), 'ok', 'puts accepted');
}

sub publish { return $node->safe_psql('postgres', 'SELECT trafficdb.publish()'); }

sub expected
{
	return join("\n", map { "$_|$inc{$_}" } sort { $a <=> $b } grep { defined $inc{$_} } keys %inc);
}

my $inc_sql = q{SELECT location_id || '|' || incident FROM trafficdb.locations WHERE incident IS NOT NULL ORDER BY location_id};

sub check
{
	my ($what) = @_;
	is($node->safe_psql('postgres', $inc_sql), expected(), "$what: every incident is what was put");
	my $g = tdb_caught_up($node, $standby);
	is($standby->safe_psql('postgres', $inc_sql), expected(), "$what: the follower has the same incidents (generation $g)");
}

is($node->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.locations WHERE incident IS NOT NULL'), '0',
	'no incident anywhere at the start');

# generation: speeds only
feed(map { [ $_, undef, 1 ] } 1 .. 50);
publish();
check('speeds only');

# one generation, feed rows only: none anywhere -> set -> cleared -> set again (10); set -> cleared (11)
feed([ 10, 'a1', 10 ], [ 10, undef, 11 ], [ 10, 'a3', 12 ], [ 11, 'b1', 13 ], [ 11, undef, 14 ]);
publish();
check('feed: none -> set -> cleared -> set in one generation');

# clear the only one: none anywhere again
feed([ 10, undef, 20 ]);
publish();
is($node->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.locations WHERE incident IS NOT NULL'), '0',
	'none anywhere again');
check('feed: cleared');

# one generation, async puts only: none anywhere -> set -> cleared -> set again (20); set -> cleared (21)
put([ 20, 'x1', 30 ], [ 20, undef, 31 ], [ 20, 'x3', 32 ], [ 21, 'y1', 33 ], [ 21, undef, 34 ], [ 22, '', 35 ]);
publish();
check('puts: none -> set -> cleared -> set in one generation (and an empty incident)');

# puts clear everything, then in the same generation one is set again by a feed row (newer)
put([ 20, undef, 40 ], [ 22, undef, 41 ]);
feed([ 20, 'feed20', 42 ]);
publish();
check('puts clear all, a feed row sets again in the same generation');

# feed and puts on the same locations in one generation: puts are drained first, the newest wins
put([ 30, 'put30', 50 ], [ 31, undef, 53 ], [ 20, undef, 54 ]);
feed([ 30, 'feed30', 51 ], [ 31, 'feed31', 52 ], [ 20, 'older', 45 ]);
publish();
check('feed rows and puts mixed in one generation');

# clear all with puts; then sync puts make their own generations: set, clear, set
put([ 20, undef, 60 ], [ 30, undef, 61 ]);
publish();
is($node->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.locations WHERE incident IS NOT NULL'), '0',
	'none anywhere before the sync puts');
put([ 40, 's1', 70, 1 ]);
put([ 40, undef, 71, 1 ]);
put([ 40, 's3', 72, 1 ], [ 41, 't1', 73, 1 ]);
check('sync puts: set, cleared, set');

# a crash before any map reload: the replay goes from the first checkpoint through every D record above
sub crash
{
	my ($what) = @_;
	my $g = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
	$node->stop('immediate');
	$node->start;
	$node->poll_query_until('postgres', "SELECT generation > $g AND daemon_pid IS NOT NULL FROM trafficdb.status")
	  or die "no publication after the crash ($what)";
	is($node->safe_psql('postgres', 'SELECT replay_mismatches, replayed_generations > 0, log_damaged_at IS NULL FROM trafficdb.status'),
		'0|t|t', "$what: every replayed generation is byte-identical");
}
crash('a crash before the reloads');
ok($node->log_contains(qr/replayed the generation log from the checkpoint of generation 1 to generation \d+ \((1[0-9]|[2-9][0-9]) records/),
	'that replay went through the D records of the generations above');
check('after a crash before the reloads');

# a reload of the same map (remap_traffic carries the incidents), then set/clear after it
$node->safe_psql('postgres', q{SELECT trafficdb.load_map('roads', 'id', 'geom', NULL, 'name')});
put([ 41, undef, 80 ], [ 42, 'after reload', 81 ]);
publish();
check('after a map reload');

# a source that lost the only locations with incidents (40, 42): none anywhere after the reload
$node->safe_psql('postgres', q{DELETE FROM roads WHERE id IN (40, 42); SELECT trafficdb.load_map('roads', 'id', 'geom', NULL, 'name')});
delete @inc{40, 42};
delete @obs{40, 42};
is($node->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.locations WHERE incident IS NOT NULL'), '0',
	'the reload dropped the only incidents');
is($node->safe_psql('postgres', $inc_sql), expected(), 'reload dropped the locations with incidents: every incident is what was put');
# F4 of REVIEW.md (not this commit's): the follower follows only D records, so a map reload with no
# D record after it (nothing changed since) is not followed until the primary's next publication
{
	my $pg = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
	$node->wait_for_catchup($standby, 'replay');
	my $sg;
	for (1 .. 50)
	{
		$sg = $standby->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
		last if $sg == $pg;
		select(undef, undef, undef, 0.2);
	}
	is($sg, $pg, 'the follower reaches the reload generation with no later publication (10 s)');
}
# none anywhere -> set -> cleared -> set again in one generation, on the new map, puts and feed mixed
put([ 43, 'm1', 90 ], [ 43, undef, 91 ]);
feed([ 43, 'm3', 92 ], [ 44, 'n1', 93 ]);
publish();
check('after the reload: set, cleared, set');

# --- crash, then the replay
crash('after the crash');
check('after the crash');

# on the replayed state (set_entry's count): clear all, none anywhere -> set -> clear -> set
put([ 43, undef, 100 ], [ 44, undef, 101 ]);
publish();
is($node->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.locations WHERE incident IS NOT NULL'), '0',
	'none anywhere on the replayed state');
put([ 45, 'r1', 110 ], [ 45, undef, 111 ]);
feed([ 45, 'r3', 112 ]);
publish();
check('on the replayed state: set, cleared, set');
feed([ 45, undef, 120 ]);
put([ 46, 'r4', 121, 1 ]);
check('on the replayed state: a sync put');

# a clean restart replays these too
tdb_restart_replayed($node);
check('after a clean restart');
# and a crash right after a generation whose only incident was cleared
put([ 46, undef, 130, 1 ]);
my $g = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
$node->stop('immediate');
$node->start;
$node->poll_query_until('postgres', "SELECT generation > $g AND daemon_pid IS NOT NULL FROM trafficdb.status")
  or die 'no publication after the second crash';
is($node->safe_psql('postgres', 'SELECT replay_mismatches FROM trafficdb.status'), '0',
	'after the second crash: byte-identical');
check('after the second crash');
is($standby->safe_psql('postgres', 'SELECT replay_mismatches FROM trafficdb.status'), '0',
	'the follower never saw a generation differ from the primary\'s');

done_testing();
