# t/041_subscribers.pl: external subscribers through shared memory
# (trafficdb_subscribe, tools/tdbsub): events pushed at each publication
# into the subscriber's ring, equal to the definitions; a group shares the
# events (each to one member); bad filters refused naming the value.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run qw(start finish);
use lib 't';
use TdbTest;

my $tdbsub = $ENV{TDBSUB} // die 'TDBSUB must name tools/tdbsub';
my $node = tdb_node('subscribers', 'trafficdb.publish_interval' => "'1h'");
tdb_grid_map($node);
my $shm = '/trafficdb.' . $node->port;

# bad filters: refused by the library, naming the value
my ($out, $err) = ('', '');
IPC::Run::run([ $tdbsub, $shm, '--radius', '24.9', '60.15', '-5' ], '>', \$out, '2>', \$err);
like($err, qr/radius -5 m/, 'a negative radius is refused');
IPC::Run::run([ $tdbsub, $shm, '--ids', '5,99999' ], '>', \$out, '2>', \$err);
like($err, qr/location id 99999 is not in the published map/, 'an unknown id is refused');
IPC::Run::run([ $tdbsub, $shm, '--box', '25', '60', '24', '61' ], '>', \$out, '2>', \$err);
like($err, qr/is inverted/, 'an inverted box is refused');

# one subscriber: slow (< 20 km/h) roads in a box, every change
# (the daemon attaches subscribers at its cycles: after "ready", one publication)
sub subscriber { return tdb_tdbsub($node, @_, '--timeout-ms', '1500'); }
my $box = [ '--box', '24.899', '60.1495', '24.9395', '60.1545' ];
my $one = subscriber(@$box, '--speed-below', '20');
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');	# the daemon attaches it

$node->safe_psql('postgres', q{
INSERT INTO trafficdb.feed (location_id, speed_kmh) SELECT i, (i * 7) % 40 FROM generate_series(1, 400) i;
SELECT trafficdb.publish();});
my $want = $node->safe_psql('postgres', q{
SELECT string_agg(format('change %s %s', generation, location_id), E'\n' ORDER BY location_id)
  FROM trafficdb.locations
 WHERE changed_generation = generation AND speed_kmh < 20
   AND geom && ST_MakeEnvelope(24.899, 60.1495, 24.9395, 60.1545, 4326)});
finish($one->{h});
my @got = map { join(' ', (split / /)[0 .. 2]) } grep { /^change/ } split /\n/, ${ $one->{out} };
is(join("\n", sort { (split / /, $a)[2] <=> (split / /, $b)[2] } @got), $want,
	'the subscriber received exactly the changes the definitions give') or diag(${ $one->{err} });
cmp_ok(scalar(@got), '>', 10, 'and there were some (' . scalar(@got) . ')');
is($node->safe_psql('postgres', 'SELECT events_delivered >= ' . scalar(@got) . ' FROM trafficdb.status'), 't',
	'status counts the events delivered');

# a group of two, round robin: every event to exactly one member
my @members = map { subscriber(@$box, '--group', 'g1') } 1 .. 2;
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
$node->safe_psql('postgres', q{
INSERT INTO trafficdb.feed (location_id, speed_kmh) SELECT i, 50 + i % 30 FROM generate_series(1, 400) i;
SELECT trafficdb.publish();});
my $n = $node->safe_psql('postgres', q{SELECT count(*) FROM trafficdb.locations
 WHERE changed_generation = generation AND geom && ST_MakeEnvelope(24.899, 60.1495, 24.9395, 60.1545, 4326)});
finish($_->{h}) for @members;
my @ids = map { my $o = ${ $_->{out} }; map { (split / /)[2] } grep { /^change/ } split /\n/, $o } @members;
my %seen;
$seen{$_}++ for @ids;
is(scalar(@ids), $n, "the group received every event ($n)");
is(scalar(grep { $seen{$_} > 1 } keys %seen), 0, 'none twice');
ok((grep { /^change/ } split /\n/, ${ $members[0]{out} }) && (grep { /^change/ } split /\n/, ${ $members[1]{out} }),
	'both members got a share');

# Python: trafficdb.Subscriber, an iterator of events
my $pydir = $ENV{TRAFFICDB_PYTHON} // die 'TRAFFICDB_PYTHON must name the python/ folder';
my ($po, $pe) = ('', '');
my $py = start([ '/usr/bin/python3', '-c', qq{
import sys; sys.path.insert(0, "$pydir")
import trafficdb
with trafficdb.Subscriber("$shm", ids=[5, 6, 7], condition="congestion_at_least", value=3, enter_exit=True,
                          timeout_ms=1500) as s:
    print("ready", flush=True)
    for e in s.events(timeout_ms=1500):     # until 1.5 s without events (for e in s: until closed)
        print(e.kind, e.location_id, e.old_congestion, e.new_congestion, flush=True)
} ], '>', \$po, '2>', \$pe);
for (1 .. 100) { $py->pump_nb; last if $po =~ /ready/; select(undef, undef, undef, 0.05); }
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
$node->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, congestion) VALUES (5, 4), (6, 1), (7, 3), (8, 4);
SELECT trafficdb.publish();});
$node->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, congestion) VALUES (5, 2), (7, 4);
SELECT trafficdb.publish();});
finish($py);
is(join('|', grep { !/ready/ } split /\n/, $po), 'enter 5 None 4|enter 7 None 3|exit 5 4 2',
	'Python: enter and exit events of three ids, in order') or diag($pe);

# SQL: trafficdb.subscription_events(), this session's events since its first call
my $sid = $node->safe_psql('postgres', q{INSERT INTO trafficdb.subscriptions (name, location_ids, condition, value, events)
  VALUES ('sql', '{20, 21}', 'speed_below', 30, 'enter_exit') RETURNING id});
my ($sq_out, $sq_err) = ('', '');
my $sess = start([ 'psql', '-XAtq', '-d', $node->connstr('postgres') ], '<', \my $sq_in, '>', \$sq_out, '2>', \$sq_err);
$sq_in = "SELECT count(*) FROM trafficdb.subscription_events($sid);\n";
for (1 .. 100) { $sess->pump_nb; last if $sq_out =~ /^0$/m; select(undef, undef, undef, 0.05); }
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
$node->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (20, 10), (21, 50), (22, 5);
SELECT trafficdb.publish();});
$sq_in .= "SELECT kind, location_id, old_speed_kmh IS NULL, new_speed_kmh FROM trafficdb.subscription_events($sid, 10, 2000);\n";
$sq_in .= "SELECT count(*) FROM trafficdb.subscription_events($sid, 10, 100);\n";
finish($sess);
is($sq_out, "0\nenter|20|f|10\n0\n", 'SQL: the enter event of id 20, then none') or diag($sq_err);
my ($r2, $o2, $e2) = $node->psql('postgres', 'SELECT * FROM trafficdb.subscription_events(999999)');
like($e2, qr/subscription 999999 does not exist/, 'an unknown subscription: a clear error');
($r2, $o2, $e2) = $node->psql('postgres', "SELECT * FROM trafficdb.subscription_events($sid, 0)");
like($e2, qr/max_events 0 is out of range/, 'max_events out of range: a clear error');
($r2, $o2, $e2) = $node->psql('postgres', "SET statement_timeout = '300ms'; SELECT * FROM trafficdb.subscription_events($sid, 10, 60000)");
like($e2, qr/statement timeout/, 'statement_timeout ends a wait');

# a tap: the events of every SQL subscription, each naming its row
$node->safe_psql('postgres', q{DELETE FROM trafficdb.subscriptions;
INSERT INTO trafficdb.subscriptions (name, location_ids) VALUES ('a', '{30, 31}'), ('b', '{31, 32}');
INSERT INTO trafficdb.subscriptions (name, center, radius_m, condition, value)
  VALUES ('c', ST_SetSRID(ST_MakePoint(24.9005, 60.1502), 4326), 200, 'speed_below', 50);});
my $tap = subscriber('--all-subscriptions');
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
$node->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (30, 40), (31, 60), (32, 70), (1, 20), (2, 90);
SELECT trafficdb.publish();});
my $want_tap = $node->safe_psql('postgres', q{
SELECT string_agg(format('%s sub=%s', l.location_id, s.id), E'\n' ORDER BY l.location_id, s.id)
  FROM trafficdb.locations l JOIN trafficdb.subscriptions s
    ON (l.location_id = ANY (s.location_ids))
    OR (s.center IS NOT NULL AND ST_DWithin(l.geom::geography, s.center::geography, s.radius_m) AND l.speed_kmh < s.value)
 WHERE l.changed_generation = l.generation});
finish($tap->{h});
my @tap = sort { my @x = split / /, $a; my @y = split / /, $b; $x[0] <=> $y[0] || $x[1] cmp $y[1] }
	map { my @f = split / /; "$f[2] $f[7]" } grep { /^change/ } split /\n/, ${ $tap->{out} };
is(join("\n", @tap), $want_tap, 'a tap receives every SQL subscription\'s events, each naming its row')
	or diag(${ $tap->{err} });

# a map reload: no events can be made for its generation (no previous
# object of that map); subscribers get an overrun naming it, then events again
my ($mo, $me) = ('', '');
my $reload = start([ '/usr/bin/python3', '-c', qq{
import sys; sys.path.insert(0, "$pydir")
import trafficdb
with trafficdb.Subscriber("$shm", ids=[3, 4], timeout_ms=1500) as s:
    print("ready", flush=True)
    for e in s.events(timeout_ms=1500):
        print(e.kind, e.generation, e.location_id, flush=True)
} ], '>', \$mo, '2>', \$me);
for (1 .. 100) { $reload->pump_nb; last if $mo =~ /ready/; select(undef, undef, undef, 0.05); }
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
$node->safe_psql('postgres', q{SELECT trafficdb.load_map('roads', 'id', 'geom', NULL, 'name')});
my $reload_gen = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
$node->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (3, 77); SELECT trafficdb.publish();});
my $after_gen = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
finish($reload);
is(join('|', grep { !/ready/ } split /\n/, $mo), "overrun $reload_gen 0|change $after_gen 3",
	'after a map reload: an overrun naming its generation, then the events again') or diag($me);

# overrun: a subscriber that does not read past its ring (64 events) gets an
# overrun event naming the first generation whose events it lost, then the
# events after it again
my $small = tdb_node('small_ring', 'trafficdb.publish_interval' => "'1h'", 'trafficdb.subscriber_ring_events' => '64');
tdb_grid_map($small);
my $sshm = '/trafficdb.' . $small->port;
my ($ro, $re) = ('', '');
my $lagger = start([ '/usr/bin/python3', '-c', qq{
import sys; sys.path.insert(0, "$pydir")
import trafficdb
s = trafficdb.Subscriber("$sshm", box=(24, 60, 26, 61), timeout_ms=1000)
print("ready", flush=True)
sys.stdin.readline()          # do not read until told
for e in s.events(timeout_ms=1000):
    print(e.kind, e.generation, e.location_id, flush=True)
} ], '<', \my $lin, '>', \$ro, '2>', \$re);
for (1 .. 100) { $lagger->pump_nb; last if $ro =~ /ready/; select(undef, undef, undef, 0.05); }
$small->safe_psql('postgres', 'SELECT trafficdb.publish()');
my @gens;
for my $round (1 .. 3)
{
	$small->safe_psql('postgres', qq{INSERT INTO trafficdb.feed (location_id, speed_kmh) SELECT i, $round * 10 FROM generate_series(1, 50) i;
SELECT trafficdb.publish();});
	push @gens, $small->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
}
$lin = "go\n";
$lagger->pump_nb for 1 .. 3;
$small->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh) SELECT i, 99 FROM generate_series(1, 5) i;
SELECT trafficdb.publish();});
my $last = $small->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
finish($lagger);
my @lines = grep { !/ready/ } split /\n/, $ro;
my @over = grep { /^overrun/ } @lines;
is(scalar(@over), 1, 'one overrun event') or diag($re . $ro);
my ($k, $g, $dropped) = split / /, $over[0] // 'x 0 0';
is($g, $gens[1], "it names the first generation whose events were dropped ($gens[1])");
is(scalar(grep { /^change $gens[0] / } @lines), 50, 'the events that fit were delivered');
cmp_ok($dropped, '>=', 50, "and it counts the dropped events ($dropped)");
is(scalar(grep { /^change $last / } @lines), 5, 'after the overrun, the events of the next publication arrive');
is($small->safe_psql('postgres', 'SELECT events_dropped > 0 FROM trafficdb.status'), 't', 'status counts the dropped events');

done_testing();
