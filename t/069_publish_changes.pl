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
sub round
{
	my ($seed, $n, $incidents) = @_;
	$node->safe_psql('postgres', qq{
SELECT setseed($seed / 1000.0);
CREATE TEMP TABLE u AS
SELECT DISTINCT ON (id) id, speed, incident FROM (
  SELECT (random() * 1999)::int + 1 AS id, round((random() * 120)::numeric, 1)::real AS speed,
         CASE WHEN random() < $incidents THEN repeat('x', (random() * 40)::int) || ' closed' END AS incident,
         g FROM generate_series(1, $n) g) s ORDER BY id, g DESC;
INSERT INTO trafficdb.feed (location_id, speed_kmh, incident, observed_at)
SELECT id, speed, incident, clock_timestamp() FROM u;
UPDATE model m SET speed = u.speed, incident = u.incident FROM u WHERE m.id = u.id;
SELECT trafficdb.publish();
});
}

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
my $gen = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
$node->restart;
$node->poll_query_until('postgres', "SELECT generation >= $gen AND daemon_pid IS NOT NULL FROM trafficdb.status")
  or die 'no daemon after the restart';
is($node->safe_psql('postgres', 'SELECT replay_mismatches FROM trafficdb.status'), '0',
	'every replayed generation is byte-identical to its in-place publication');
cmp_ok($node->safe_psql('postgres', 'SELECT replayed_generations FROM trafficdb.status'), '>', 10, 'they were replayed');
same_as_model('after the restart');
round(16, 1, 0);
same_as_model('a publication after the restart');

$node->stop;
done_testing();
