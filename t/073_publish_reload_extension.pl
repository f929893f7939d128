# t/073_publish_reload_extension.pl: in-place publication (docs/object-format.md)
# across a reload of another map and DROP/CREATE EXTENSION: what readers see
# after puts with incidents is what a restart's replay rebuilds, byte for
# byte (replay_mismatches 0), and what was written.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('reloadext', 'trafficdb.publish_interval' => "'1h'",
	'trafficdb.log_retention' => "'1h'", 'trafficdb.log_retention_generations' => '1000');
tdb_grid_map($node);

sub put
{
	my ($tag, @ids) = @_;
	my $sql = '';
	for my $id (@ids)
	{
		my $inc = $id % 3 == 0 ? "'$tag $id'" : 'NULL';
		$sql .= "INSERT INTO trafficdb.feed (location_id, speed_kmh, incident, observed_at) VALUES ($id, $id % 100, $inc, clock_timestamp());\n";
	}
	$node->safe_psql('postgres', $sql . 'SELECT trafficdb.publish();');
}

# what readers see now, kept; a restart must give it back
sub restart_gives_back
{
	my ($what) = @_;
	$node->safe_psql('postgres', 'DROP TABLE IF EXISTS seen; CREATE TABLE seen AS SELECT location_id, speed_kmh, incident FROM trafficdb.locations');
	my $gen = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
	$node->restart;
	$node->poll_query_until('postgres', "SELECT generation >= $gen AND daemon_pid IS NOT NULL FROM trafficdb.status")
	  or die 'no daemon after the restart';
	is($node->safe_psql('postgres', 'SELECT replay_mismatches FROM trafficdb.status'), '0', "$what: replayed byte-identically");
	is($node->safe_psql('postgres', q{
SELECT count(*) FROM seen s FULL JOIN trafficdb.locations l USING (location_id)
 WHERE s.location_id IS NULL OR l.location_id IS NULL OR s.speed_kmh IS DISTINCT FROM l.speed_kmh
    OR s.incident IS DISTINCT FROM l.incident}), '0', "$what: the restart gives back what readers saw");
}

put('a', 1 .. 30);
put('b', 1, 2, 3, 2000);
put('c', 3, 6);
is($node->safe_psql('postgres', "SELECT incident FROM trafficdb.locations WHERE location_id = 6"), 'c 6', 'a value as written');

# another map: some roads gone, one new
$node->safe_psql('postgres', q{
CREATE TABLE roads2 AS SELECT * FROM roads WHERE id NOT IN (2, 5, 1999);
INSERT INTO roads2 (id, geom) SELECT 5000, geom FROM roads WHERE id = 2;
SELECT trafficdb.load_map('roads2');
});
put('d', 3, 4, 5000, 2000);
put('e', 6, 9, 12);
is($node->safe_psql('postgres', "SELECT incident FROM trafficdb.locations WHERE location_id = 12"), 'e 12', 'another map: a value as written');
is($node->safe_psql('postgres', "SELECT count(*) FROM trafficdb.locations"), '1998', 'another map: its locations');
restart_gives_back('another map');

$node->safe_psql('postgres', 'DROP EXTENSION trafficdb CASCADE');
$node->safe_psql('postgres', "CREATE EXTENSION trafficdb; SELECT trafficdb.load_map('roads')");
put('f', 1 .. 12);
put('g', 3, 2000);
is($node->safe_psql('postgres', "SELECT incident FROM trafficdb.locations WHERE location_id = 2000"), '', 'after DROP/CREATE EXTENSION: a value as written');
is($node->safe_psql('postgres', "SELECT incident FROM trafficdb.locations WHERE location_id = 3"), 'g 3', 'and another');
restart_gives_back('after DROP/CREATE EXTENSION');

$node->stop;
done_testing();
