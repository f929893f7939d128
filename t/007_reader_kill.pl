# t/007_reader_kill.pl: an external reader that holds a version and is
# killed with kill -9: it is listed while it lives, its slot is reclaimed
# after, and publication never waits for it.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use lib 't';
use TdbTest;

my $tdbread = $ENV{TDBREAD} // die 'TDBREAD must name tools/tdbread';
my $node = tdb_node('readerkill', 'trafficdb.publish_interval' => "'100ms'", 'trafficdb.reader_pin_timeout' => "'100ms'");
$node->safe_psql('postgres', q{
CREATE EXTENSION trafficdb CASCADE;
CREATE TABLE roads AS SELECT i::bigint AS id,
  ST_SetSRID(ST_MakeLine(ST_MakePoint(25 + i * 0.001, 60), ST_MakePoint(25 + i * 0.001, 60.001)), 4326) AS geom
  FROM generate_series(1, 100) i;
SELECT trafficdb.load_map('roads');
});
my $prefix = '/trafficdb.' . $node->port;

my ($in, $out, $err) = ('', '', '');
my $h = IPC::Run::start([ $tdbread, $prefix, 'hold', '60' ], '<', \$in, '>', \$out, '2>', \$err,
	IPC::Run::timeout(90));
$h->pump until $out =~ /holding generation (\d+)/;
my $held = $1;
my $pid = $h->{KIDS}[0]{PID};

# publication goes on; the reader is reported late
for my $i (1 .. 5)
{
	$node->safe_psql('postgres', "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, $i)");
	$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
}
cmp_ok($node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status'), '>=', $held + 5,
	'publication goes on while an external reader holds a version');
ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM trafficdb.readers WHERE kind = 'external' AND pid = $pid AND late AND generation = $held"),
	'the reader is listed as late, with its pid and generation');

# its version, superseded longer than reader_pin_timeout ago, is revoked
# while it lives (at a publication: one every 100 ms here, at most 300)
my $revoked = 0;
for (1 .. 300)
{
	$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
	$revoked = slurp_file($node->logfile) =~ /revoked \d+ version\(s\) pinned longer than trafficdb.reader_pin_timeout/;
	last if $revoked;
	usleep(100_000);
}
ok($revoked, 'the version it held was revoked after reader_pin_timeout');

kill 'KILL', $pid;
eval { $h->finish; };
ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM trafficdb.readers WHERE pid = $pid"),
	'after kill -9 its slot is reclaimed');
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
is($node->safe_psql('postgres', 'SELECT max(speed_kmh) FROM trafficdb.locations WHERE location_id = 1'), '5',
	'readers see the latest traffic');
$node->stop;
done_testing();
