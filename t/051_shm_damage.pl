# t/051_shm_damage.pl: a member of trafficdb.shm_group / writer_group (here:
# the server's own OS user, who has the same access) damages the headers of
# the segments it can write (issue 28, item 8): a zeroed <prefix>.readers
# header, a <prefix>.subs state word set to STOPPED, a zeroed .subs header
# while a SQL session and tdbsub wait, a <prefix>.writers state word set to
# STOPPED.  The daemon notices within its check interval (1 s, publication
# or not), repairs or rebuilds, says what was damaged in
# status.last_error; attached parties get an error, never silence; new
# readers, subscribers and writers work again; the server never restarts.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run qw(start finish);
use Time::HiRes qw(time);
use lib 't';
use TdbTest;

my $tdbread = $ENV{TDBREAD} // die 'TDBREAD must name tools/tdbread';
my $lib = $ENV{TRAFFICDB_LIB} // die 'TRAFFICDB_LIB must name lib/libtrafficdb.so';
my $pydir = $ENV{TRAFFICDB_PYTHON} // die 'TRAFFICDB_PYTHON must name the python/ folder';

# publication only when asked: every repair below is the daemon's periodic check
my $node = tdb_node('damage', 'trafficdb.publish_interval' => "'1h'");
tdb_grid_map($node);
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
my $name = '/trafficdb.' . $node->port;
my $dev = "/dev/shm$name";
my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');

# Write $bytes at $offset of $file (as a member of its group could).
sub scribble
{
	my ($file, $offset, $bytes) = @_;
	open(my $fh, '+<', $file) or die "open $file: $!";
	sysseek($fh, $offset, 0) or die "seek: $!";
	syswrite($fh, $bytes) == length($bytes) or die "write $file: $!";
	close($fh);
}

sub tdbread_ok
{
	my ($out, $err) = ('', '');
	IPC::Run::run([ $tdbread, $name ], '>', \$out, '2>', \$err);
	return ($? == 0, $err);
}

# Poll $check (a sub) for at most $secs; returns the seconds it took, or undef.
sub within
{
	my ($secs, $check) = @_;
	my $t0 = time;
	while (time - $t0 < $secs)
	{
		return time - $t0 if $check->();
		select(undef, undef, undef, 0.05);
	}
	return undef;
}

sub last_error { return $node->safe_psql('postgres', 'SELECT coalesce(last_error, \'\') FROM trafficdb.status'); }

# ---- a zeroed .readers header: every external reader refused -----------------------------
my ($ok, $err) = tdbread_ok();
ok($ok, 'tdbread reads') or diag($err);
scribble("$dev.readers", 0, "\0" x 64);
my $took = within(5, sub { (tdbread_ok())[0] && last_error() =~ /readers/ });
ok(defined $took, 'external readers are served again after a zeroed .readers header, without a publication');
cmp_ok($took // 99, '<', 3, 'within 3 s');
like(last_error(), qr/\.readers was damaged \(its header was overwritten.*repaired/, 'last_error says what was damaged');

# ---- .subs: a session and tdbsub wait; the state word is set to STOPPED ---------------------
my $sid = $node->safe_psql('postgres', q{INSERT INTO trafficdb.subscriptions (name, location_ids)
  VALUES ('damage', '{20, 21}') RETURNING id});

my ($sq_in, $sq_out, $sq_err) = ('', '', '');
my $sess = start([ 'psql', '-XAtq', '-d', $node->connstr('postgres') ], '<', \$sq_in, '>', \$sq_out, '2>', \$sq_err);

# subscribe the session and a tdbsub; both wait for events (15 s)
sub attach_both
{
	$sq_out = $sq_err = '';
	$sq_in .= "SELECT 'sub', count(*) FROM trafficdb.subscription_events($sid);\n";
	tdb_wait_session($sess, \$sq_out, \$sq_err, qr/^sub\|0$/m, 10) or diag("session: $sq_out $sq_err");
	my $sub = tdb_tdbsub($node, '--ids', '20,21', '--timeout-ms', '30000');
	$node->safe_psql('postgres', 'SELECT trafficdb.publish()');	# attached by the daemon
	$sq_out = $sq_err = '';
	$sq_in .= "SELECT 'got', count(*) FROM trafficdb.subscription_events($sid, 10, 15000);\n";
	$sess->pump_nb for 1 .. 10;
	select(undef, undef, undef, 0.3);
	return $sub;
}

my $sub = attach_both();
scribble("$dev.subs", 24, pack('V', 2));	# TDB_SUBRING_STOPPED
ok(tdb_wait_session($sess, \$sq_out, \$sq_err, qr/ERROR/, 5), 'the waiting session is told (an error, not 0 rows)')
  or diag("$sq_out $sq_err");
ok(tdb_wait_output({ %$sub, out => $sub->{err} }, qr/tdbsub: /, 5), 'tdbsub is told') or diag(${ $sub->{err} });
finish($sub->{h});
ok(defined within(5, sub { last_error() =~ /\.subs was damaged \(its state word was set to 2/ }),
	'the daemon noticed the state word within its check interval and says so');

# subscribing again works, and events flow
$sub = attach_both();
$node->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (20, 12);
SELECT trafficdb.publish();});
ok(tdb_wait_session($sess, \$sq_out, \$sq_err, qr/^got\|1$/m, 10), 'a new subscription of the session receives events')
  or diag("$sq_out $sq_err");
ok(tdb_wait_output($sub, qr/^change \d+ 20 /m, 10), 'and so does a new tdbsub') or diag(${ $sub->{err} });

# ---- .subs: its header zeroed while both wait; then the location changes --------------------
$sq_out = $sq_err = '';
$sq_in .= "SELECT 'got', count(*) FROM trafficdb.subscription_events($sid, 10, 15000);\n";
$sess->pump_nb for 1 .. 10;
select(undef, undef, undef, 0.3);
scribble("$dev.subs", 0, "\0" x 64);
my $t0 = time;
$node->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (20, 33);
SELECT trafficdb.publish();});
ok(tdb_wait_session($sess, \$sq_out, \$sq_err, qr/ERROR|^got/m, 10), 'the session returned');
like($sq_err, qr/events of subscription $sid stopped: .*(rebuilt|stopped)/, 'with an error that says to subscribe again, not 0 rows')
  or diag("$sq_out $sq_err");
cmp_ok(time - $t0, '<', 5, 'within 5 s, not at the end of its wait');
ok(tdb_wait_output({ %$sub, out => $sub->{err} }, qr/tdbsub: /, 5), 'tdbsub is told too') or diag(${ $sub->{err} });
finish($sub->{h});
like(last_error(), qr/\.subs was damaged \(its header was overwritten/, 'last_error says the header was overwritten');

# ---- .writers: its state word set to STOPPED (every put refused) ---------------------------
local $ENV{TRAFFICDB_LIB} = $lib;
local $ENV{PYTHONPATH} = $pydir;
my ($out, $perr) = run_command([ '/usr/bin/python3', '-c', qq{
import trafficdb, struct, time
w = trafficdb.Writer("$name")
w.put(30, speed_kmh=40)
with open("$dev.writers", "r+b") as f:
    f.seek(24); f.write(struct.pack("<I", 3))
try:
    w.put(30, speed_kmh=41)
    print("attached writer: put ok")
except trafficdb.TrafficDBError as e:
    print("attached writer:", e)
t0 = time.time()
while time.time() - t0 < 5:
    try:
        with trafficdb.Writer("$name") as w2:
            w2.put(31, speed_kmh=42, sync=True)
        print("new writer ok after %.1f s" % (time.time() - t0))
        break
    except trafficdb.TrafficDBError as e:
        time.sleep(0.1)
else:
    print("new writers refused")
} ]);
like($out, qr/attached writer: .*(stopped|reopen)/i, 'a writer attached is told') or diag("$out $perr");
like($out, qr/new writer ok after/, 'new writers put again within 5 s') or diag("$out $perr");
like(last_error(), qr/\.writers was damaged \(its state word was set to 3/, 'last_error says what was damaged');

$sq_in .= "\\q\n";
finish($sess);
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started, 'the server never restarted');
done_testing();
