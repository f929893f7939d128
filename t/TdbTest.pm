# t/TdbTest.pm: what the TAP tests share: a cluster that preloads trafficdb.
package TdbTest;
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use Exporter 'import';
our @EXPORT = qw(tdb_node);

# A started cluster preloading trafficdb, its daemon in database postgres,
# plus any settings given as name => value (quoted as they should appear).
sub tdb_node
{
	my ($name, %settings) = @_;
	my %conf = ('shared_preload_libraries' => "'trafficdb'", 'trafficdb.database' => "'postgres'", %settings);
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf', join('', map { "$_ = $conf{$_}\n" } sort keys %conf));
	$node->start;
	return $node;
}

1;
