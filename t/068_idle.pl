# t/068_idle.pl: an idle daemon sleeps (issue 32, "Idle"), and waking it
# loses nothing.
#
#   - default settings, a map, a few puts, then quiet: the daemon wakes at
#     most 10 times a second (its voluntary and involuntary context
#     switches, /proc/PID/status, over 6 s), and says in the writers' ring
#     that it sleeps (the header's bell line, src/ring/ring.h); so does the
#     follower of a hot standby, which still follows the puts after;
#   - a put into the sleeping ring rings the bell (the header's count of
#     rings goes up by one) and is published; a TRAFFICDB_SYNC put after
#     quiet is acknowledged; put_many rings once for its batch;
#   - a put into the sleeping ring just before an orderly stop is published
#     after the restart (the stop still drains).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use lib 't';
use TdbTest;

my ($node, $standby) = tdb_standby_pair();
my $shm = '/trafficdb.' . $node->port;

my $py = tdb_python("w = trafficdb.Writer('$shm')");
sub py { return $py->(@_); }

# The writers' ring's bell line: (daemon_asleep, bell_nonce, bells).
sub bell_line
{
	open(my $fh, '<:raw', "/dev/shm$shm.writers") or die "cannot open /dev/shm$shm.writers: $!";
	sysseek($fh, 64, 0) or die "seek: $!";
	sysread($fh, my $b, 24) == 24 or die "short read of the writers' ring header";
	close $fh;
	my ($asleep, undef, $nonce, $bells) = unpack('L L Q Q', $b);
	return ($asleep, $nonce, $bells);
}

# Wait (at most 10 s) until the daemon says it sleeps.
sub wait_asleep
{
	for (1 .. 200)
	{
		my ($asleep) = bell_line();
		return 1 if $asleep == 1;
		usleep(50_000);
	}
	return 0;
}

# Context switches of a process: voluntary (it blocked: a wake-up follows)
# and, unless $wakeups_only, involuntary (preempted while it ran: on a
# loaded machine they count the load, not the process's wake-ups).
sub daemon_switches
{
	my ($pid, $wakeups_only) = @_;
	my $status = slurp_file("/proc/$pid/status");
	my ($v) = $status =~ /^voluntary_ctxt_switches:\s+(\d+)/m;
	my ($nv) = $status =~ /^nonvoluntary_ctxt_switches:\s+(\d+)/m;
	die "no context switch counts in /proc/$pid/status" unless defined $v && defined $nv;
	return $wakeups_only ? $v : $v + $nv;
}

# a few puts, published
is(py(q{
w.put(1, speed_kmh=11)
w.put(2, speed_kmh=22, sync=True)
w.put_many([{'location_id': i, 'speed_kmh': 33} for i in range(3, 13)])
print('ok')
}), 'ok', 'a few puts');
$node->poll_query_until('postgres', q{SELECT count(*) = 12 FROM trafficdb.locations WHERE speed_kmh IS NOT NULL})
  or die 'the first puts were not published';

# quiet: the daemon sleeps, and wakes at most 10 times a second
ok(wait_asleep(), 'once writers are quiet the daemon says in the ring that it sleeps');
my (undef, $nonce) = bell_line();
isnt($nonce, 0, 'and names its bell');
my $pid = $node->safe_psql('postgres', 'SELECT daemon_pid FROM trafficdb.status');
like($pid, qr/^[1-9]\d*$/, 'the daemon runs');
$standby->poll_query_until('postgres', q{SELECT count(*) = 12 FROM trafficdb.locations WHERE speed_kmh IS NOT NULL})
  or die 'the standby did not follow the first puts';
my $fpid = $standby->safe_psql('postgres', 'SELECT daemon_pid FROM trafficdb.status');
like($fpid, qr/^[1-9]\d*$/, "the standby's daemon follows");
sleep(2);
my ($s0, $f0) = (daemon_switches($pid), daemon_switches($fpid));
my $span = 6;
sleep($span);
my ($wakeups, $fwakeups) = (daemon_switches($pid) - $s0, daemon_switches($fpid) - $f0);
note(sprintf('idle daemon: %d context switches in %d s (%.1f/s); follower: %d (%.1f/s)',
	$wakeups, $span, $wakeups / $span, $fwakeups, $fwakeups / $span));
cmp_ok($wakeups, '<=', 10 * $span, "an idle daemon wakes at most 10 times a second ($wakeups in $span s)");
cmp_ok($fwakeups, '<=', 10 * $span, "so does an idle follower on a hot standby ($fwakeups in $span s)");

# Any local user can find the bell (abstract sockets are listed in
# /proc/net/unix) and flood it: the daemon then drains every
# writer_drain_interval, as before it slept (at most ~1,000 wake-ups a
# second), not once per datagram; and puts are still published.
{
	use Socket qw(AF_UNIX SOCK_DGRAM pack_sockaddr_un);
	socket(my $s, AF_UNIX, SOCK_DGRAM, 0) or die "socket: $!";
	my $addr = pack_sockaddr_un("\0" . sprintf('trafficdb-bell-%016x', $nonce));
	# the flooder competes with the daemon for the CPU: count the daemon's
	# wake-ups (voluntary switches), not its preemptions, over a span timed
	# to the microsecond (CI failed at 5,351 switches in "3" s, voluntary and
	# involuntary, in whole seconds, on a loaded machine)
	my ($sent, $t0) = (0, Time::HiRes::time());
	my $f0 = daemon_switches($pid, 1);
	while (Time::HiRes::time() - $t0 < 3)		# bounded: 3 s
	{
		# blocking sends: each as soon as the daemon has room (it reads them only while it sleeps)
		for (1 .. 100) { $sent++ if defined send($s, 'x', 0, $addr); }
	}
	my $fw = daemon_switches($pid, 1) - $f0;
	my $fspan = Time::HiRes::time() - $t0;
	note(sprintf('bell flood: %d datagrams in %.2f s; the daemon woke %d times (%.0f/s)', $sent, $fspan, $fw, $fw / $fspan));
	cmp_ok($sent, '>', 100, 'the flood reached the bell');
	cmp_ok($fw, '<=', 1500 * $fspan, sprintf('a flood of the bell wakes the daemon at most about as often as draining every interval (%d in %.2f s)', $fw, $fspan));
	close $s;
	is(py(q{w.put(399, speed_kmh=39.5, sync=True); print('ok')}), 'ok', 'a SYNC put after the flood is acknowledged');
	ok(wait_asleep(), 'and the daemon sleeps again');
}

# A put into the sleeping ring rings the bell: the daemon may wake on its own
# (a cycle, a sweep) just before a put, which then finds it awake and rings
# nothing, so each case is tried up to 3 times after the daemon sleeps again.
sub rings
{
	my ($code, $want) = @_;
	for (1 .. 3)
	{
		wait_asleep() or return 'never asleep';
		my (undef, undef, $b0) = bell_line();
		my $out = py($code);
		return "put failed: $out" unless $out eq 'ok';
		my (undef, undef, $b1) = bell_line();
		return 'rang' if $b1 - $b0 == $want;
		note("rings: $b0 -> $b1");
	}
	return 'did not ring';
}
is(rings(q{w.put(100, speed_kmh=41.5); print('ok')}, 1), 'rang', 'an ASYNC put into the sleeping ring rings its bell once');
ok($node->poll_query_until('postgres', q{SELECT speed_kmh = 41.5 FROM trafficdb.locations WHERE location_id = 100}),
	'and is published');
ok($standby->poll_query_until('postgres', q{SELECT speed_kmh = 41.5 FROM trafficdb.locations WHERE location_id = 100}),
	'and followed by the idle standby');
is(rings(q{
w.put(101, speed_kmh=42.5, sync=True)
print('ok')
}, 1), 'rang', 'a TRAFFICDB_SYNC put after quiet rings and is acknowledged');
is($node->safe_psql('postgres', q{SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 101}), '42.5',
	'the acknowledged SYNC put is published');
is(rings(q{w.put_many([{'location_id': i, 'speed_kmh': 43} for i in range(200, 300)]); print('ok')}, 1), 'rang',
	'put_many rings once for its batch of 100');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 100 FROM trafficdb.locations WHERE speed_kmh = 43}),
	'and the batch is published');

# no publication but the ones asked for from here: the stop's own drain publishes the put
$node->append_conf('postgresql.conf', "trafficdb.publish_interval = '1h'");
$node->reload;
ok(wait_asleep(), 'asleep again');
is(py(q{w.put(400, speed_kmh=44.5); print('ok')}), 'ok', 'an ASYNC put into the sleeping ring');
$node->stop('fast');
$node->start;
ok($node->poll_query_until('postgres', q{SELECT speed_kmh = 44.5 FROM trafficdb.locations WHERE location_id = 400}),
	'is published after an orderly stop and a restart (the stop drained it)');
$standby->stop;
$node->stop;
done_testing();
