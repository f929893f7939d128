# t/014_reader_liveness.pl: no reader can stop publication and no other
# server can take a reader's version away (issue 13, item 7).
#  - a second server started with the same trafficdb.shm_name refuses the
#    prefix and leaves the first one's pins alone (it used to clear them: a
#    REPEATABLE READ transaction then read a later generation's value);
#  - 63 idle REPEATABLE READ sessions pinning every version make publish()
#    fail loudly (it used to return the stale generation), and once their
#    versions are superseded longer than reader_pin_timeout publication goes
#    on and the sessions get SQLSTATE 72000;
#  - an external reader holding a version past the timeout is told it was
#    revoked, and what it read is intact;
#  - a reader in another PID namespace keeps its version (no PIDs trusted).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use lib 't';
use TdbTest;

my $tdbread = $ENV{TDBREAD} // die 'TDBREAD must name tools/tdbread';
my $node = tdb_node('liveness', 'max_connections' => 90, 'trafficdb.publish_interval' => "'1h'",
	'trafficdb.reader_pin_timeout' => "'10min'");
$node->safe_psql('postgres', q{
CREATE EXTENSION trafficdb CASCADE;
CREATE TABLE roads AS SELECT i::bigint AS id,
  ST_SetSRID(ST_MakeLine(ST_MakePoint(25 + i * 0.001, 60), ST_MakePoint(25 + i * 0.001, 60.001)), 4326) AS geom
  FROM generate_series(1, 100) i;
SELECT trafficdb.load_map('roads');
});
my $prefix = '/trafficdb.' . $node->port;

sub set_speed
{
	my ($v) = @_;
	$node->safe_psql('postgres', "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, $v); SELECT trafficdb.publish()");
}

# A psql session kept open; run() sends SQL and returns what it printed.
sub session
{
	my ($in, $out, $err) = ('', '', '');
	my $h = IPC::Run::start([ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=0', '-d', $node->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$err, IPC::Run::timeout(300));
	return { h => $h, in => \$in, out => \$out, err => \$err };
}

sub run_in
{
	my ($s, $sql) = @_;
	${ $s->{out} } = '';
	${ $s->{err} } = '';
	${ $s->{in} } .= "$sql\nSELECT 'done';\n";
	$s->{h}->pump until ${ $s->{out} } =~ /done\n/;
	my $o = ${ $s->{out} };
	$o =~ s/done\n$//;
	chomp $o;
	return ($o, ${ $s->{err} });
}

my $read1 = 'SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 1;';

# ---- a second server with the same shm_name ----
set_speed(7);
my $rr = session();
run_in($rr, 'BEGIN ISOLATION LEVEL REPEATABLE READ;');
is((run_in($rr, $read1))[0], '7', 'a REPEATABLE READ session reads speed 7');

my $other = tdb_node('other', 'trafficdb.shm_name' => "'$prefix'");
$other->safe_psql('postgres', 'CREATE EXTENSION trafficdb CASCADE');
ok($other->poll_query_until('postgres', q{SELECT last_error LIKE '%in use by another running server%' FROM trafficdb.status}),
	'the second server refuses the prefix, saying why');
my ($ret, $o, $e) = $other->psql('postgres', 'SELECT count(*) FROM trafficdb.locations');
like($e, qr/belongs to another server/, 'its backends do not read the first server\'s memory');
like(slurp_file($other->logfile), qr/is in use by another running server/, 'its log says so');
($ret, $o, $e) = $other->psql('postgres', 'SELECT trafficdb.publish()');
like($e, qr/could not publish.*\n.*in use by another running server/, 'publish() there fails at once, saying why');

set_speed($_) for 100 .. 170;	# more publications than version descriptors
is((run_in($rr, $read1))[0], '7', 'the first server\'s REPEATABLE READ session still reads its own generation');
run_in($rr, 'COMMIT;');
is((run_in($rr, $read1))[0], '170', 'and the latest after COMMIT');
$other->stop;
ok(-e "/dev/shm$prefix.ctl", 'stopping the second server leaves the first one\'s objects');
is($node->safe_psql('postgres', $read1), '170', 'the first server reads on');

# ---- every version pinned by idle REPEATABLE READ sessions ----
my @sessions;
for my $i (1 .. 63)
{
	set_speed($i);
	my $s = session();
	run_in($s, 'BEGIN ISOLATION LEVEL REPEATABLE READ;');
	my ($v) = run_in($s, $read1);
	push @sessions, $s;
	die "session $i read $v" unless $v eq $i;
}
$node->safe_psql('postgres', 'INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, 64); SELECT trafficdb.publish()');
($ret, $o, $e) = $node->psql('postgres', 'INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, 65); SELECT trafficdb.publish()');
isnt($ret, 0, 'publish() fails while 63 sessions pin every other version within the timeout');
like($e, qr/could not publish.*\n.*readers pin all 64 versions/, 'and says why');
like($node->safe_psql('postgres', 'SELECT last_error FROM trafficdb.status'), qr/readers pin all 64 versions/,
	'trafficdb.status shows it');
cmp_ok($node->safe_psql('postgres', 'SELECT publishes_refused FROM trafficdb.status'), '>=', 1, 'and counts it');

$node->safe_psql('postgres', "ALTER SYSTEM SET trafficdb.reader_pin_timeout = '1s'; SELECT pg_reload_conf()");
sleep 2;
$node->safe_psql('postgres', 'INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, 66); SELECT trafficdb.publish()');
is($node->safe_psql('postgres', $read1), '66', 'past reader_pin_timeout publication goes on');
cmp_ok($node->safe_psql('postgres', 'SELECT versions_revoked FROM trafficdb.status'), '>=', 63,
	'the pinned versions were revoked');
like(slurp_file($node->logfile), qr/revoked \d+ version\(s\) pinned longer than trafficdb.reader_pin_timeout/, 'the log says so');
for my $i (0, 31, 62)
{
	my ($out, $err) = run_in($sessions[$i], "\\set VERBOSITY verbose\n$read1\nROLLBACK;");
	like($err, qr/72000.*trafficdb generation \d+ is no longer available to this transaction/,
		'session ' . ($i + 1) . ' is told its snapshot is too old (SQLSTATE 72000)');
}
for my $s (@sessions)
{
	${ $s->{in} } .= "ROLLBACK;\n\\q\n";
	$s->{h}->finish;
}

# ---- an external reader held past the timeout is told ----
my ($in, $out, $err) = ('', '', '');
my $h = IPC::Run::start([ $tdbread, $prefix, 'hold', '4' ], '<', \$in, '>', \$out, '2>', \$err, IPC::Run::timeout(60));
$h->pump until $out =~ /holding generation (\d+)/;
set_speed(67);
sleep 2;
set_speed(68);
$h->finish;
like($out, qr/released generation \d+ revoked=1 consistent=1/, 'an external reader past the timeout is told, its snapshot intact');

# ---- a reader in another PID namespace keeps its version ----
$node->safe_psql('postgres', "ALTER SYSTEM SET trafficdb.reader_pin_timeout = '10min'; SELECT pg_reload_conf()");
sleep 1;
SKIP:
{
	my $probe = system('unshare --user --map-root-user --pid --fork true 2>/dev/null');
	skip 'no unprivileged user and PID namespaces here', 3 if $probe != 0;
	($in, $out, $err) = ('', '', '');
	$h = IPC::Run::start([ 'unshare', '--user', '--map-root-user', '--pid', '--fork', $tdbread, $prefix, 'hold', '4' ],
		'<', \$in, '>', \$out, '2>', \$err, IPC::Run::timeout(60));
	$h->pump until $out =~ /holding generation (\d+)/;
	my $held = $1;
	# 70 publications in one psql (within the reader's 4 s hold even on a loaded machine:
	# one psql each took more than 4 s under a parallel make test)
	$node->safe_psql('postgres', join('', map {
		"INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, $_); SELECT trafficdb.publish();\n" } 200 .. 270));
	is($node->safe_psql('postgres', "SELECT pid FROM trafficdb.readers WHERE kind = 'external' AND generation = $held"), '1',
		'the namespaced reader is listed, with the pid it has in its namespace');
	$h->finish;
	like($out, qr/released generation $held revoked=0 consistent=1/, 'it kept its version through 70 publications');
	set_speed(271);		# the daemon looks at the slots when it runs
	ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM trafficdb.readers WHERE kind = 'external'"),
		'its slot is free once it exits');
}

$node->stop;
ok(!-e "/dev/shm$prefix.ctl" && !-e "/dev/shm$prefix.lock", 'a clean stop leaves nothing under the prefix');
done_testing();
