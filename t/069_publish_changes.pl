# t/069_publish_changes.pl: a publication copies what changed, not the map
# (docs/object-format.md).  The daemon brings a reused traffic buffer up to
# date in place with the entries changed since it last wrote it; a
# one-change publication on a 2,000-location map copies a few entries
# (status.last_publish_entries), also with incidents laid out, also when an
# early incident grows and moves every later one; readers see exactly the
# values written (compared with a model table after every round); a restart
# replays every generation byte-identically (each replayed object's checksum
# equals the one recorded when it was published in place).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('pubchanges', 'trafficdb.publish_interval' => "'1h'",
	'trafficdb.checkpoint_interval' => '1000', 'trafficdb.log_retention' => "'1h'",
	'trafficdb.log_retention_generations' => '1000');
tdb_grid_map($node);
tdb_model_create($node);

# n updates of random locations (seeded), incidents on some, into the feed and the model; publish.
sub round { tdb_model_round($node, @_[0 .. 2], 2000, 40); }

sub same_as_model { tdb_model_check($node, @_); }

sub entries { return $node->safe_psql('postgres', 'SELECT last_publish_entries FROM trafficdb.status'); }

round(1, 500, 0);
same_as_model('500 changes');
# three buffers take turns: after a few one-change publications each is a few changes behind
round($_, 1, 0) for 2 .. 6;
cmp_ok(entries(), '<=', 5, 'a one-change publication copies a few entries, not 2,000');
same_as_model('one-change publications');

# incidents: laid out in record order; one that grows moves every later one
round(7, 300, 0.3);
same_as_model('300 changes with incidents');
my $with = $node->safe_psql('postgres', 'SELECT count(*) FROM model WHERE incident IS NOT NULL');
round($_, 1, 0) for 8 .. 12;
cmp_ok(entries(), '<=', 5 + $with, "with $with incidents, a one-change publication copies at most the changed and the moved");
same_as_model('one-change publications with incidents');
my $first = $node->safe_psql('postgres', 'SELECT min(id) FROM model WHERE incident IS NOT NULL');
$node->safe_psql('postgres', qq{
INSERT INTO trafficdb.feed (location_id, speed_kmh, incident, observed_at)
VALUES ($first, 1, repeat('long ', 50), clock_timestamp());
UPDATE model SET speed = 1, incident = repeat('long ', 50) WHERE id = $first;
SELECT trafficdb.publish();
});
same_as_model('the first incident grew');
$node->safe_psql('postgres', qq{
INSERT INTO trafficdb.feed (location_id, speed_kmh, observed_at) VALUES ($first, 2, clock_timestamp());
UPDATE model SET speed = 2, incident = NULL WHERE id = $first;
SELECT trafficdb.publish();
});
same_as_model('the first incident cleared');
cmp_ok(entries(), '<', 2000, 'still in place');
round($_, 700, 0.2) for 13 .. 15;
same_as_model('larger rounds');

# a restart replays every generation: each one's checksum as published in place
tdb_restart_replayed($node);
cmp_ok($node->safe_psql('postgres', 'SELECT replayed_generations FROM trafficdb.status'), '>', 10, 'they were replayed');
same_as_model('after the restart');
round(16, 1, 0);
same_as_model('a publication after the restart');

$node->stop;
done_testing();
