# t/075_publish_refused.pl: in-place publication (docs/object-format.md) while
# readers pin every version: publications are refused (the generations
# commit, unpublished) while incidents are added, grown and cleared; once
# the readers go, readers see exactly what was written and a restart
# replays every generation byte-identically.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('refused', 'trafficdb.publish_interval' => "'1h'", 'max_connections' => '90',
	'trafficdb.reader_pin_timeout' => "'10min'", 'trafficdb.log_retention' => "'1h'",
	'trafficdb.log_retention_generations' => '1000');
tdb_grid_map($node);
tdb_model_create($node);

sub put { return tdb_model_put($node, @_); }

sub same_as_model { tdb_model_check($node, @_); }

put([ 10, 1, 'a' ], [ 20, 2, 'b' ], [ 2000, 3, 'c' ]);
my @s;
for my $v (1 .. 63)
{
	my $s = $node->background_psql('postgres');
	$s->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
	$s->query_safe('SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 5');
	push @s, $s;
	put([ 5, $v, undef ]);
}
my $refused = $node->safe_psql('postgres', 'SELECT publishes_refused FROM trafficdb.status');
put([ 10, 4, 'a, grown longer' ], [ 1, 5, 'first' ]);
put([ 20, 6, undef ], [ 2000, 7, 'c, grown' ]);
put([ 10, 8, undef ], [ 15, 9, 'q' ]);
cmp_ok($node->safe_psql('postgres', 'SELECT publishes_refused FROM trafficdb.status'), '>', $refused,
	'publications are refused while readers pin every version');
$_->query_safe('COMMIT') for @s;
$_->quit for @s;
my ($ret, $o, $e) = put([ 30, 10, undef ]);
is($ret, 0, 'then a publication goes through') or diag $e;
same_as_model('after refused publications');
put([ 1, 11, undef ], [ 15, 12, 'qq' ]);
same_as_model('and the next');

my $gen = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
$node->restart;
$node->poll_query_until('postgres', "SELECT generation >= $gen AND daemon_pid IS NOT NULL FROM trafficdb.status")
  or die 'no daemon after the restart';
is($node->safe_psql('postgres', 'SELECT replay_mismatches FROM trafficdb.status'), '0', 'replayed byte-identically');
same_as_model('after the restart');

$node->stop;
done_testing();
