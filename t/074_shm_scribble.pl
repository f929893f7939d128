# t/074_shm_scribble.pl: an OS user who could write the daemon's traffic
# objects in /dev/shm (a member of trafficdb.shm_group only reads them)
# scribbles random bytes into them while backends read and the daemon
# publishes in place, then into the map object: readers may see wrong values or refuse the object, but
# no process crashes.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('scribble', 'trafficdb.publish_interval' => "'1h'");
tdb_grid_map($node);
my $prefix = '/dev/shm/trafficdb.' . $node->port;
$node->safe_psql('postgres', q{
INSERT INTO trafficdb.feed (location_id, speed_kmh, incident, observed_at)
SELECT i, i % 100, CASE WHEN i % 5 = 0 THEN repeat('z', i % 37) END, clock_timestamp() FROM generate_series(1, 2000) i;
SELECT trafficdb.publish();
});

sub segments
{
	my ($magic) = @_;
	my @s;
	for my $f (glob("$prefix.*"))
	{
		next unless $f =~ /\.\d+$/ && -f $f && -s $f >= 8;
		open(my $fh, '<', $f) or next;
		my $m;
		read($fh, $m, 4);
		close $fh;
		push @s, $f if unpack('V', $m) == $magic;
	}
	return @s;
}

srand(74);
my $errors = 0;
for my $round (1 .. 200)
{
	my @t = segments(0x54424454);
	die 'no traffic object' unless @t;
	my $f = $t[ int(rand(@t)) ];
	my $size = -s $f;
	open(my $fh, '+<', $f) or die "open $f: $!";
	for (1 .. 1 + int(rand(4)))
	{
		# mostly the header, the digest and the first entries; anywhere too
		my $at = rand() < 0.5 ? int(rand(512)) : int(rand($size));
		seek($fh, $at, 0);
		print $fh chr(int(rand(256)));
	}
	close $fh;
	my ($ret) = $node->psql('postgres', 'SELECT count(*), sum(length(incident)), sum(speed_kmh) FROM trafficdb.locations');
	$errors++ if $ret != 0;
	$node->psql('postgres', "INSERT INTO trafficdb.feed (location_id, speed_kmh, incident) VALUES ($round, 1, 'r$round'); SELECT trafficdb.publish()")
	  if $round % 3 == 0;
}
note "$errors reads of 200 refused";

{
	# the map object too (checked once per process; the daemon's own copy never again)
	for my $round (1 .. 40)
	{
		my @m = segments(0x4D424454);
		last unless @m;
		my $f = $m[ int(rand(@m)) ];
		my $size = -s $f;
		open(my $fh, '+<', $f) or die "open $f: $!";
		seek($fh, int(rand($size)), 0);
		print $fh chr(int(rand(256)));
		close $fh;
		$node->psql('postgres', 'SELECT count(*), sum(length(incident)), sum(speed_kmh) FROM trafficdb.locations');
		$node->psql('postgres', "SELECT count(*) FROM trafficdb.locations WHERE geom && ST_MakeEnvelope(24, 60, 25, 61, 4326)");
		$node->psql('postgres', "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES ($round, 2); SELECT trafficdb.publish()");
	}
}
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'the server answers');
unlike(slurp_file($node->logfile), qr/terminated by signal|server process .* was terminated/, 'no process crashed');

$node->stop('immediate');
done_testing();
