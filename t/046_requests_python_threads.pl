# t/046_requests_python_threads.pl: Python's Subscriber used from two
# threads the way people stop a worker: one thread blocked in
# take_request() (or request()) while another closes the Subscriber.  The
# blocked call must end with an exception, never crash the interpreter
# (the handle freed and the segment unmapped under it).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use lib 't';
use TdbTest;

my $pydir = $ENV{TRAFFICDB_PYTHON} // die 'TRAFFICDB_PYTHON must name the python/ folder';
my $node = tdb_node('pythreads', 'trafficdb.publish_interval' => "'200ms'");
tdb_grid_map($node);
my $shm = '/trafficdb.' . $node->port;

for my $what ('take_request', 'request')
{
	my ($o, $e) = ('', '');
	my $call = $what eq 'take_request' ? 's.take_request(timeout_ms=3000)'
	  : 'r.request("g45", b"x", timeout_ms=3000)';
	IPC::Run::run([ '/usr/bin/python3', '-c', qq{
import sys, threading, time; sys.path.insert(0, "$pydir")
import trafficdb
s = trafficdb.Subscriber("$shm", none=True, group="g45", timeout_ms=3000)
r = trafficdb.Subscriber("$shm", none=True, timeout_ms=3000)
time.sleep(0.5)   # the daemon attaches both
out = []
def worker():
    try:
        out.append(repr($call))
    except trafficdb.TrafficDBError as ex:
        out.append(type(ex).__name__)
t = threading.Thread(target=worker)
t.start()
time.sleep(0.3)
(s if "$what" == "take_request" else r).close()
t.join()
print("survived", out, flush=True)
} ], '>', \$o, '2>', \$e);
	like($o, qr/^survived /m, "$what blocked in one thread while another closes the Subscriber: no crash")
	  or diag("stdout: $o\nstderr: $e\nexit: $?");
}
# a huge timeout is a long wait, not a short one: ctypes wraps a Python int into a C int silently
{
	my ($o, $e) = ('', '');
	IPC::Run::run([ '/usr/bin/python3', '-c', qq{
import sys, threading, time; sys.path.insert(0, "$pydir")
import trafficdb
s = trafficdb.Subscriber("$shm", none=True, group="g45b", timeout_ms=3000)
r = trafficdb.Subscriber("$shm", none=True, timeout_ms=3000)
time.sleep(0.5)
def member():
    q = s.take_request(timeout_ms=5000)
    time.sleep(0.3)
    q.answer(b"late but fine")
t = threading.Thread(target=member)
t.start()
for ms in (2 ** 32 + 5, 2 ** 31):
    try:
        print(ms, r.request("g45b", b"x", timeout_ms=ms), flush=True)
    except trafficdb.TrafficDBError as ex:
        print(ms, type(ex).__name__, flush=True)
    if t.is_alive():
        t.join()
    t = threading.Thread(target=member)
    t.start()
t.join()
} ], '>', \$o, '2>', \$e);
	is($o, "4294967301 b'late but fine'\n2147483648 b'late but fine'\n",
		'Python: timeouts of 2**32 + 5 and 2**31 ms wait for the answer (not 5 ms, not none)') or diag($e);
}
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'the server is fine');
done_testing();
