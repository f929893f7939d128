# t/043_requests.pl: request-response over the subscribers' shared memory
# (trafficdb_request, trafficdb_take_request, trafficdb_answer; tools/tdbsub
# --serve and --request; Python Subscriber.request and .requests) against a
# running server: a group of members shares the requests; members killed
# with kill -9 while holding a request have it answered by the others (no
# request lost, each answered once); a requester killed while a member works
# on its request has the member's answer dropped once the daemon's sweep
# takes the requester's slot back; clear errors.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run qw(start finish);
use lib 't';
use TdbTest;

my $tdbsub = $ENV{TDBSUB} // die 'TDBSUB must name tools/tdbsub';
my $pydir = $ENV{TRAFFICDB_PYTHON} // die 'TRAFFICDB_PYTHON must name the python/ folder';
my $kills = $ENV{REQUEST_KILLS} // 5;
# the daemon's cycle (its sweep of dead subscribers) every 200 ms
my $node = tdb_node('requests', 'trafficdb.publish_interval' => "'200ms'");
tdb_grid_map($node);
my $shm = '/trafficdb.' . $node->port;

sub proc { return tdb_tdbsub($node, @_); }
sub wait_for { return tdb_wait_output(@_); }

# errors: no member, and a member that is not in a group
my ($out, $err) = ('', '');
IPC::Run::run([ $tdbsub, $shm, '--request', 'nobody', '--count', '1' ], '>', \$out, '2>', \$err);
like($err, qr/not found .*: group \d+ has no member/, 'a request to a group without members: refused');
IPC::Run::run([ $tdbsub, $shm, '--serve' ], '>', \$out, '2>', \$err);
like($err, qr/--serve needs --group/, '--serve without a group: refused');

# two members that answer, then doomed members that take a request and hang
my @good = map { proc('--serve', '--group', 'routers', '--label', "m$_", '--work-ms', '5', '--timeout-ms', '60000') } 1 .. 2;
# the requester goes on until it is stopped (after the kills and 300 answers at least)
my $req = proc('--request', 'routers', '--count', '1000000', '--timeout-ms', '30000');
my @doomed;
for my $k (1 .. $kills)
{
	my $d = proc('--serve', '--group', 'routers', '--label', "doomed$k", '--work-ms', '600000', '--timeout-ms', '60000');
	ok(wait_for($d, qr/^took \d+ req (\d+)$/m, 30), "doomed member $k took a request");
	my ($i) = ${ $d->{out} } =~ /^took \d+ req (\d+)$/m;
	$d->{req} = $i;
	kill 'KILL', $d->{pid};
	eval { finish($d->{h}) };
	push @doomed, $d;
}
my ($upto) = sort { $b <=> $a } 300, map { $_->{req} + 1 } @doomed;
ok(wait_for($req, qr/^answer $upto /m, 60), "the requester got $upto answers at least");
kill 'KILL', $req->{pid};
eval { finish($req->{h}) };
my %answer;
for (grep { /^answer / } split /\n/, ${ $req->{out} })
{
	my (undef, $i, $label, $r, $j) = split / /;
	$answer{$i} = [ $label, "$r $j" ];
}
my $n = scalar(keys %answer);
my ($last) = sort { $b <=> $a } keys %answer;
is($n, $last, "one answer for each request, 1 .. $last");
is(scalar(grep { $answer{$_}[1] ne "req $_" } keys %answer), 0, 'each answer is to its own request');
is(scalar(grep { $answer{$_}[0] !~ /^m[12]$/ } keys %answer), 0, 'every answer came from a live member');
for my $d (@doomed)
{
	like($answer{ $d->{req} }[0] // '', qr/^m[12]$/,
		"request $d->{req}, taken by a member killed with kill -9, was answered by another");
}
my %by;
$by{ $answer{$_}[0] }++ for keys %answer;
ok(($by{m1} // 0) > 0 && ($by{m2} // 0) > 0, "both live members answered (m1 $by{m1}, m2 $by{m2})");

# a requester killed while a member works on its request: the daemon's sweep drops the answer
my $slow = proc('--serve', '--group', 'slow', '--label', 's', '--work-ms', '1500', '--timeout-ms', '30000');
my $victim = proc('--request', 'slow', '--count', '1', '--timeout-ms', '60000');
ok(wait_for($slow, qr/^took $victim->{pid} req 1$/m, 30), 'the slow member took the request');
kill 'KILL', $victim->{pid};
eval { finish($victim->{h}) };
ok(wait_for($slow, qr/^gone$/m, 30), 'its answer to the killed requester is dropped ("gone")');

# Python: a member answering with Subscriber.requests(), a requester with Subscriber.request()
my ($po, $pe) = ('', '');
my $pm = start([ '/usr/bin/python3', '-c', qq{
import sys; sys.path.insert(0, "$pydir")
import trafficdb
with trafficdb.Subscriber("$shm", none=True, group="py", timeout_ms=3000) as s:
    print("ready", flush=True)
    for r in s.requests():
        r.answer(r.data.upper() + b" from python")
} ], '>', \$po, '2>', \$pe);
for (1 .. 200) { $pm->pump_nb; last if $po =~ /ready/; select(undef, undef, undef, 0.02); }
my ($qo, $qe) = ('', '');
IPC::Run::run([ '/usr/bin/python3', '-c', qq{
import sys; sys.path.insert(0, "$pydir")
import trafficdb
with trafficdb.Subscriber("$shm", none=True) as s:
    print(s.request("py", b"route 1 to 2", timeout_ms=5000).decode())
    try:
        s.request("nobody", b"x", timeout_ms=100)
    except trafficdb.NotFound as e:
        print("NotFound")
} ], '>', \$qo, '2>', \$qe);
is($qo, "ROUTE 1 TO 2 from python\nNotFound\n", 'Python: a request answered by a Python member; no member: NotFound')
  or diag($qe . $pe);
finish($pm);

$_->{h}->kill_kill for @good;
$slow->{h}->kill_kill;
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'the server is fine');
done_testing();
