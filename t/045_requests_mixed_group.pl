# t/045_requests_mixed_group.pl: a group whose members are partly
# requests-only (TRAFFICDB_AREA_NONE: "no events: a member that only
# answers requests", tdbsub --serve) and partly event consumers (a box).
# The requests-only members must not change the group's events: every
# event of the box goes to one event member, whether a requests-only
# member has the lowest slot of the group or not, and none goes into the
# ring of a member that said it wants no events.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run qw(start finish);
use lib 't';
use TdbTest;

my $tdbsub = $ENV{TDBSUB} // die 'TDBSUB must name tools/tdbsub';
my $node = tdb_node('mixedgroup', 'trafficdb.publish_interval' => "'1h'");
tdb_grid_map($node);
my $shm = '/trafficdb.' . $node->port;
my $box = [ '--box', '24.899', '60.1495', '24.9395', '60.1545' ];

sub proc { return tdb_tdbsub($node, @_); }
my $round = 0;
for my $order ('serve-first', 'events-first')
{
	$round++;
	my $g = "mixed$round";
	my ($serve, $ev);
	if ($order eq 'serve-first')
	{
		$serve = proc('--serve', '--group', $g, '--timeout-ms', '60000');
		$ev = proc(@$box, '--group', $g, '--timeout-ms', '1500');
	}
	else
	{
		$ev = proc(@$box, '--group', $g, '--timeout-ms', '1500');
		$serve = proc('--serve', '--group', $g, '--timeout-ms', '60000');
	}
	$node->safe_psql('postgres', 'SELECT trafficdb.publish()');	# the daemon attaches both
	$node->safe_psql('postgres', qq{
INSERT INTO trafficdb.feed (location_id, speed_kmh) SELECT i, 10 + (i * 3 + $round) % 60 FROM generate_series(1, 400) i;
SELECT trafficdb.publish();});
	my $n = $node->safe_psql('postgres', q{SELECT count(*) FROM trafficdb.locations
 WHERE changed_generation = generation AND geom && ST_MakeEnvelope(24.899, 60.1495, 24.9395, 60.1545, 4326)});
	finish($ev->{h});
	my @got = grep { /^change/ } split /\n/, ${ $ev->{out} };
	cmp_ok($n, '>', 10, "$order: the publication changed locations of the box ($n)");
	is(scalar(@got), $n, "$order: the group's event member received every event of the box")
	  or diag(${ $ev->{err} });
	# the requests-only member still answers
	my ($o, $e) = ('', '');
	IPC::Run::run([ $tdbsub, $shm, '--request', $g, '--count', '1', '--timeout-ms', '5000' ], '>', \$o, '2>', \$e);
	like($o, qr/^answer 1 \d+ req 1 \d+$/m, "$order: the requests-only member answers a request") or diag($e);
	$serve->{h}->kill_kill;
}

is($node->safe_psql('postgres', 'SELECT 1'), '1', 'the server is fine');
done_testing();
