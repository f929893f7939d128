# t/052_shm_names.pl: names in /dev/shm are public (issue 28, item 4).
# Whatever holds a name the server needs, and it did not make, must not stop
# it, and it never maps or trusts it.  As the postgres OS user this test holds
# names with things the server cannot remove or trust (directories, a
# symbolic link); test/security_names.sh does it as another OS user.
#  - fixed names held before the start (<prefix>.lock, .ctl, .subs): the
#    daemon publishes for SQL under private names, once (no restart loop);
#    trafficdb.status.last_error names the file and what to do; an external
#    reader of the configured names is refused, naming the file;
#  - once the names are free the daemon moves back to them by itself, and
#    external readers attach;
#  - segment names <prefix>.N held while it runs: new maps and traffic
#    buffers skip them (one WARNING), publication goes on.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use lib 't';
use TdbTest;

my $tdbread = $ENV{TDBREAD} // die 'TDBREAD must name tools/tdbread';
my $node = tdb_node('names', 'trafficdb.publish_interval' => "'1h'", 'trafficdb.max_subscribers' => '0',
	'-start' => 0);
my $prefix = '/trafficdb.' . $node->port;
my @held;

# held before the server starts
symlink('/dev/null', "/dev/shm$prefix.lock") or die "symlink: $!";
push @held, "/dev/shm$prefix.lock";
for my $s ('ctl', 'subs')
{
	mkdir("/dev/shm$prefix.$s") or die "mkdir: $!";
	push @held, "/dev/shm$prefix.$s";
}
$node->start;

my $roads = sub {
	my ($n) = @_;
	return qq{DROP TABLE IF EXISTS roads; CREATE TABLE roads AS SELECT i::bigint AS id,
  ST_SetSRID(ST_MakeLine(ST_MakePoint(25 + i * 0.001, 60), ST_MakePoint(25 + i * 0.001, 60.001)), 4326) AS geom
  FROM generate_series(1, $n) i;};
};
$node->safe_psql('postgres', 'CREATE EXTENSION trafficdb CASCADE; ' . $roads->(100));
my ($rc, $out, $err) = $node->psql('postgres', q{SELECT trafficdb.load_map('roads')}, timeout => 60);
is($out, '100', 'with .lock, .ctl and .subs held by others the map loads');
$node->safe_psql('postgres', 'INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, 42); SELECT trafficdb.publish()');
is($node->safe_psql('postgres', 'SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 1'), '42',
	'the daemon publishes and SQL reads it');
my $last = $node->safe_psql('postgres', 'SELECT last_error FROM trafficdb.status');
note "last_error: $last";
like($last, qr{"/dev/shm\Q$prefix\E\.(lock|ctl|subs)" is taken}, 'last_error names the file that is taken');
like($last, qr{trafficdb\.shm_name}, 'and says what to do');
like($last, qr{external readers, writers and subscribers cannot attach}, 'and what does not work meanwhile');
sleep 3;
my $log = slurp_file($node->logfile);
my $starts = () = $log =~ /trafficdb: created shared memory/g;
is($starts, 1, 'the daemon started once (no restart every second)');
like($log, qr{WARNING:  trafficdb: "/dev/shm\Q$prefix\E\.\w+" is taken}, 'the log names the file too');

my $r = `$tdbread $prefix 2>&1`;
isnt($? >> 8, 0, 'an external reader of the configured names fails');
like($r, qr{\Q$prefix\E\.ctl}, 'naming the control block it refused');

# someone takes a private name we have not made yet (max_subscribers = 0: no
# .subs there), and the daemon starts again: it picks other private names
my @priv = glob("/dev/shm$prefix-*.ctl");
is(scalar(@priv), 1, 'one set of private names');
(my $p1 = $priv[0]) =~ s/\.ctl$//;
mkdir("$p1.subs") or die "mkdir: $!";
push @held, "$p1.subs";
my $daemon = $node->safe_psql('postgres', 'SELECT daemon_pid FROM trafficdb.status');
kill 'TERM', $daemon;
ok($node->poll_query_until('postgres', qq{SELECT daemon_pid <> $daemon AND speed_kmh = 42 FROM trafficdb.status, trafficdb.locations WHERE location_id = 1}),
	'a restarted daemon whose private names are taken publishes under others');
like(slurp_file($node->logfile), qr{Choosing other private names than "\Q@{[substr($p1, 8)]}\E"},
	'and says so');
ok(!-e "$p1.ctl", 'what was ours under the taken private names is gone');

# a server stopped while on private names leaves none behind, whichever it picked
$node->stop;
my @left = grep { !-d $_ } glob("/dev/shm$prefix-*");
is("@left", '', 'a clean stop removes the private names the daemon picked');
$node->start;
ok($node->poll_query_until('postgres', q{SELECT speed_kmh = 42 FROM trafficdb.locations WHERE location_id = 1}),
	'after a restart, still with the names held, SQL reads the rebuilt traffic');

# the admin removes them: the daemon moves back (first check after 10 s)
unlink "/dev/shm$prefix.lock";
rmdir "/dev/shm$prefix.$_" for ('ctl', 'subs');
rmdir "$p1.subs";
@held = ();
my $moved = 0;
for (1 .. 120)
{
	if (-f "/dev/shm$prefix.ctl" && `$tdbread $prefix 2>&1` =~ /generation/ && $? == 0)
	{
		$moved = 1;
		last;
	}
	sleep 0.5;
}
ok($moved, 'once the names are free the daemon publishes under them and external readers attach');
ok($node->poll_query_until('postgres', q{SELECT speed_kmh = 42 FROM trafficdb.locations WHERE location_id = 1}),
	'SQL reads go on after the move');
my @private = glob("/dev/shm$prefix-*");
is("@private", '', 'nothing is left under the private names');

# segment names held while it runs: the next objects skip them
my @segs;
for my $i (1 .. 400)
{
	my $p = "/dev/shm$prefix.$i";
	next if -e $p;
	mkdir($p) or die "mkdir: $!";
	push @segs, $p;
}
$node->safe_psql('postgres', $roads->(300));
($rc, $out, $err) = $node->psql('postgres', q{SELECT trafficdb.load_map('roads')}, timeout => 60);
is($out, '300', 'a new map loads with the next 400 segment names held');
$node->safe_psql('postgres', 'INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (250, 17); SELECT trafficdb.publish()');
is($node->safe_psql('postgres', 'SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 250'), '17',
	'and its traffic is published');
$r = `$tdbread $prefix 2>&1`;
is($? >> 8, 0, 'an external reader reads it') or note $r;
$log = slurp_file($node->logfile);
like($log, qr{WARNING:  trafficdb: skipped a name another user holds: "/dev/shm\Q$prefix\E\.\d+" is taken}, 'one WARNING names a skipped name');

$node->stop;
rmdir $_ for @segs;
ok(!-e "/dev/shm$prefix.ctl", 'a clean stop still removes the objects');
done_testing();

END { unlink $_ for grep { -l $_ } @held; rmdir $_ for grep { -d $_ } @held; }
