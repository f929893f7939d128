# t/028_put.pl: local writes from another process (libtrafficdb's writers'
# ring, through the Python bindings) reach publication: async and sync puts,
# clear errors with nothing written, a sync put survives a crash of the
# server, and a writer killed with kill -9 in the middle of its puts leaves
# the ring working.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use lib 't';
use TdbTest;

my $node = tdb_node('put', 'trafficdb.publish_interval' => "'100ms'");
tdb_grid_map($node);

my $shm = '/trafficdb.' . $node->port;

my $py = tdb_python("name = '$shm'");
sub py { return $py->(@_); }

# async and sync puts
is(py(q{
with trafficdb.Writer(name) as w:
    w.put(5, speed_kmh=33.5, free_flow_kmh=80, congestion=2, confidence=70)
    w.put(6, speed_kmh=44, incident='lane closed', sync=True)
print('ok')
}), 'ok', 'a writer puts async and sync');
$node->poll_query_until('postgres', q{SELECT speed_kmh = 33.5 FROM trafficdb.locations WHERE location_id = 5})
  or die 'async put not published';
is($node->safe_psql('postgres', q{SELECT speed_kmh, free_flow_kmh, congestion, confidence, incident IS NULL
  FROM trafficdb.locations WHERE location_id = 5}), '33.5|80|2|70|t', 'the async put is published with every field');
$node->poll_query_until('postgres', q{SELECT incident = 'lane closed' FROM trafficdb.locations WHERE location_id = 6})
  or die 'sync put not published';
is($node->safe_psql('postgres', q{SELECT speed_kmh, free_flow_kmh IS NULL, incident FROM trafficdb.locations WHERE location_id = 6}),
	'44|t|lane closed', 'the sync put is published; fields not given are unknown');

# bad input: a clear error, nothing written
like(py(q{
w = trafficdb.Writer(name)
for kw in ({'speed_kmh': 401}, {'speed_kmh': float('nan'), 'congestion': 5}, {'confidence': 101},
           {'incident': 'x' * 4097}, {'observed_at_us': int(time.time() * 1e6) + 3600 * 10**6}):
    try:
        w.put(7, **kw)
        print('accepted', kw)
    except trafficdb.BadArg as e:
        print('BadArg:', e)
try:
    w.put(999999, speed_kmh=10)
except trafficdb.NotFound as e:
    print('NotFound:', e)
}), qr/BadArg:.*speed_kmh 401 is outside \[0, 400\].*\nBadArg:.*congestion 5.*\nBadArg:.*confidence 101.*\nBadArg:.*incident.*\nBadArg:.*observed_at.*\nNotFound:.*999999/s,
	'bad values are refused naming the field and value; an unknown id is NotFound');
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
is($node->safe_psql('postgres', q{SELECT updated_at IS NULL FROM trafficdb.locations WHERE location_id = 7}), 't',
	'nothing of the refused puts was applied');

# many async puts, then sync(): all committed and published
is(py(q{
w = trafficdb.Writer(name)
n = w.put_many([{'location_id': i, 'speed_kmh': (i % 90) + 0.25} for i in range(1, 2001)] * 5, wait=True)
print(n, w.sync(10000))
}), '10000 True', 'put_many of 10,000 updates, then sync');
$node->poll_query_until('postgres', q{SELECT bool_and(speed_kmh = (location_id % 90) + 0.25) FROM trafficdb.locations})
  or die 'put_many not published';
pass('every update of put_many is published');
is($node->safe_psql('postgres', q{SELECT count(*) > 0 FROM trafficdb.generations WHERE kind = 'D'}), 't',
	'puts are logged in the generation log');

# a sync put survives a crash of the server
is(py(q{
with trafficdb.Writer(name) as w:
    w.put(11, speed_kmh=11.5, sync=True)
print('ok')
}), 'ok', 'a sync put returns');
$node->stop('immediate');
$node->start;
$node->poll_query_until('postgres', q{SELECT generation > 0 FROM trafficdb.status}) or die 'no publication after restart';
is($node->safe_psql('postgres', q{SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 11}), '11.5',
	'an acknowledged sync put survives a crash of the server');

# a writer killed with kill -9 while putting: the ring keeps working
my $pid = open(my $child, '-|', '/usr/bin/python3', '-c', "import trafficdb, os\nw = trafficdb.Writer('$shm')\nprint(os.getpid(), flush=True)\n"
	. "for k in range(100000000):\n    w.put(20 + k % 10, speed_kmh=k % 300, wait=True)\n") or die "cannot start a writer: $!";
my $cpid = <$child>;
chomp $cpid;
usleep(300_000);
kill 'KILL', $cpid;
close($child);
is(py(q{
with trafficdb.Writer(name) as w:
    w.put(30, speed_kmh=30.25, sync=True)
print('ok')
}), 'ok', 'after a writer was killed mid-put, another writer puts');
$node->poll_query_until('postgres', q{SELECT speed_kmh = 30.25 FROM trafficdb.locations WHERE location_id = 30})
  or die 'put after the kill not published';
is($node->safe_psql('postgres', q{SELECT count(*) FROM trafficdb.locations WHERE location_id BETWEEN 20 AND 29
  AND (speed_kmh IS NULL OR speed_kmh < 0 OR speed_kmh >= 300 OR speed_kmh <> round(speed_kmh))}), '0',
	'what the killed writer put is whole (no half-written update applied)');

# an orderly stop drains the ring first: async puts acknowledged before it are kept
# (no publication in between: the interval is an hour)
$node->safe_psql('postgres', q{ALTER SYSTEM SET trafficdb.publish_interval = '1h'; SELECT pg_reload_conf();});
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
is(py(q{
with trafficdb.Writer(name) as w:
    for i in range(1, 201):
        w.put(1000 + i, speed_kmh=77.5)
print('ok')
}), 'ok', 'async puts just before an orderly stop');
$node->stop('fast');
$node->start;
$node->poll_query_until('postgres', q{SELECT generation > 0 FROM trafficdb.status}) or die 'no publication after restart';
is($node->safe_psql('postgres', q{SELECT count(*) FROM trafficdb.locations WHERE location_id BETWEEN 1001 AND 1200 AND speed_kmh = 77.5}),
	'200', 'an orderly stop loses no acknowledged async put (the daemon drains and commits before it exits)');
$node->safe_psql('postgres', q{ALTER SYSTEM RESET trafficdb.publish_interval; SELECT pg_reload_conf();});

$node->stop;
done_testing();
