# t/064_live_traffic.pl: the C reader example (examples/live_traffic, built
# by make) on a map like the demo's: Finnish and Swedish names, unnamed
# roads, roads with a congestion but no speed.  It shows only roads with a
# name and a speed (no "nan km/h", no blank names), and its columns line up
# by display width, whatever the bytes of the names (UTF-8, also decomposed)
# and under a C locale.
use strict;
use warnings;
use utf8;
use Encode qw(decode);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run qw(start finish);
use lib 't';
use TdbTest;

my $example = 'examples/live_traffic';
plan skip_all => "$example is not built" unless -x $example;

my $node = tdb_node('live_traffic', 'trafficdb.publish_interval' => "'1h'");
# ids 1-8 on one street of the box each; 9 outside it
$node->safe_psql('postgres', q{
CREATE EXTENSION trafficdb CASCADE;
CREATE TABLE roads (id bigint PRIMARY KEY, name text, highway text, geom geometry(LineString, 4326));
INSERT INTO roads
SELECT id, name, 'primary', ST_SetSRID(ST_MakeLine(ST_MakePoint(24.94 + id * 0.001, 60.17),
                                                  ST_MakePoint(24.94 + id * 0.001, 60.171)), 4326)
  FROM (VALUES (1, 'Mäkelänkatu'), (2, 'Hämeentie'), (3, 'Södra esplanaden'), (4, NULL),
               (5, 'Mannerheimintie'), (6, 'Ylioppilastalon läntinen sisäpiha ja käytävä'),
               (7, 'Ha' || chr(776) || 'meentie'), (8, 'Itämerenkatu')) v(id, name);
SELECT trafficdb.load_map('roads', 'id', 'geom', 'highway', 'name');
-- 4 (unnamed) is the slowest; 8 has a congestion but no speed
INSERT INTO trafficdb.feed (location_id, speed_kmh, free_flow_kmh)
VALUES (1, 12, 50), (2, 20, 50), (3, 25, 50), (4, 3, 50), (5, 30, 50), (6, 35, 50), (7, 40, 50);
INSERT INTO trafficdb.feed (location_id, congestion) VALUES (8, 3);
SELECT trafficdb.publish();
});

my ($out, $err) = ('', '');
local $ENV{LC_ALL} = 'C';	# a container's locale: the names are UTF-8 all the same
my $h = start([ $example, '/trafficdb.' . $node->port, '24.9', '60.16', '25.0', '60.18', '1', '20' ],
	'>', \$out, '2>', \$err);
for (1 .. 200) { $h->pump_nb; last if $out =~ /the slowest/ && $out =~ /\n\s*$/; select(undef, undef, undef, 0.05); }
select(undef, undef, undef, 0.3);
$node->safe_psql('postgres', q{
INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (4, 7), (1, 9), (2, 19), (7, 41);
INSERT INTO trafficdb.feed (location_id, congestion) VALUES (8, 4);
SELECT trafficdb.publish();});
finish($h) or diag("live_traffic failed: $err");
my $text = decode('UTF-8', $out);
note($text);

unlike($text, qr/nan/i, 'no "nan km/h"');
my @slowest = grep { /km\/h \(/ } split /\n/, $text;
my @changed = grep { /^\s+changed / } split /\n/, $text;
is(scalar(@slowest), 5, 'five slowest roads');
is(join(',', map { (split ' ')[0] } @slowest), '1,2,3,5,6', 'the slowest named ones: the unnamed road 4 is left out');
is(join(',', sort map { (split ' ')[1] } @changed), '1,2,7', 'changes shown: named roads with a speed (not 4, unnamed, nor 8, no speed)');
like($text, qr/woken by generation \d+: 5 locations changed since \d+ \(3 named ones with a speed shown\)/,
	'the count is of every change');

# display columns: combining marks take none; no wide characters here
sub width { my ($s) = @_; $s =~ s/\p{Mn}//g; return length($s); }
for my $lines ([ 'slowest', \@slowest, qr/ primary / ], [ 'changed', \@changed, qr/ km\/h/ ])
{
	my ($what, $l, $re) = @$lines;
	my %at = map { $_ =~ $re ? (width(substr($_, 0, $-[0])) => 1) : ('no match' => 1) } @$l;
	is(join(',', sort keys %at), $what eq 'slowest' ? '43' : '57',
		"$what: the column after the name starts at the same display column on every line");
}
my ($long) = grep { /^\s+6 / } @slowest;
like($long, qr/ Ylioppilastalon läntinen sis primary /, 'a long name is cut at 28 columns, between characters');

# Hostile text (review of issue 29): names, road classes and incidents with
# terminal escape sequences (ESC [ ..., an OSC title, C1's CSI), bidi
# overrides, 10 kB names and names of combining marks only.  live_traffic
# is the README's C example: it must write no control character to the
# terminal (the only one in its output is the newline), keep its lines
# short, and not crash.
$node->safe_psql('postgres', q{
CREATE TABLE hostile (id bigint PRIMARY KEY, name text, highway text, geom geometry(LineString, 4326));
INSERT INTO hostile
SELECT id, name, highway, ST_SetSRID(ST_MakeLine(ST_MakePoint(24.94 + id * 0.001, 60.17),
                                                 ST_MakePoint(24.94 + id * 0.001, 60.171)), 4326)
  FROM (VALUES (11, 'Red' || chr(27) || '[31mRoad' || chr(27) || ']0;pwned' || chr(7), 'pri' || chr(27) || '[2Jmary'),
               (12, chr(155) || '2JCSI' || chr(13) || 'Tab' || chr(9) || 'x', 'motorway_link'),
               (13, repeat('Long', 2500), 'secondary'),
               (14, repeat(chr(776), 5000), 'tertiary'),
               (15, 'Bidi' || chr(8238) || 'evil' || chr(8294) || 'x', chr(127) || 'res' || chr(155) || 'idential')) v(id, name, highway);
SELECT trafficdb.load_map('hostile', 'id', 'geom', 'highway', 'name');
INSERT INTO trafficdb.feed (location_id, speed_kmh, free_flow_kmh, incident)
VALUES (11, 10, 50, 'wiped' || chr(27) || '[2J' || chr(27) || '[H'), (12, 11, 50, NULL), (13, 12, 50, repeat('i', 4000)),
       (14, 13, 50, NULL), (15, 14, 50, chr(155) || '31m');
SELECT trafficdb.publish();
});
($out, $err) = ('', '');
$h = start([ $example, '/trafficdb.' . $node->port, '24.9', '60.16', '25.0', '60.18', '1', '20' ],
	'>', \$out, '2>', \$err);
for (1 .. 200) { $h->pump_nb; last if $out =~ /the slowest/ && $out =~ /\n\s*$/; select(undef, undef, undef, 0.05); }
select(undef, undef, undef, 0.3);
$node->safe_psql('postgres', q{
INSERT INTO trafficdb.feed (location_id, speed_kmh, incident)
VALUES (11, 9, 'again' || chr(27) || ']52;c;Y2xpcA==' || chr(7)), (12, 10, NULL), (13, 11, NULL), (14, 12, NULL),
       (15, 13, chr(27) || 'c');
SELECT trafficdb.publish();});
ok(finish($h), 'hostile text: live_traffic exits 0') or diag("live_traffic failed: $err");
note(substr($out =~ s/([^\x0a\x20-\x7e])/sprintf('\\x%02x', ord($1))/ger, 0, 8000));
is(scalar(() = $out =~ /km\/h \(/g), 5, 'hostile text: the five roads are shown');
is(scalar(() = $out =~ /^\s+changed /mg), 5, 'hostile text: and their changes');
# (ok, not unlike: the output is not repeated into the test's log)
ok($out !~ /[\x00-\x09\x0b-\x1f\x7f]/, 'hostile text: no control character but the newline');
my $dec = decode('UTF-8', "$out");
ok($dec !~ /[\x{80}-\x{9f}]/, 'hostile text: no C1 control character (CSI as U+009B)');
ok($dec !~ /[\x{202a}-\x{202e}\x{2066}-\x{2069}]/, 'hostile text: no bidi override or isolate');
my @long = grep { length($_) > 400 } split /\n/, $out;
is(scalar(@long), 0, 'hostile text: no line over 400 bytes (10 kB names, 5,000 combining marks, 4 kB incidents)');
ok($out =~ / motorway_link /, 'a road class longer than its column is not cut');

# bad arguments: exit 2 naming the value and what was expected (a TIMEOUT_S
# whose milliseconds overflow an int was taken as a negative wait)
for my $case (
	[ [ 'x', 60, 25, 61 ], qr/XMIN "x": expected a number from -180 to 180/ ],
	[ [ 24, 60, 25, 61, '1.5' ], qr/PUBLICATIONS "1\.5": expected a whole number/ ],
	[ [ 24, 60, 25, 61, 1, '99999999999' ], qr/TIMEOUT_S "99999999999": expected a number from 0 to 86400/ ])
{
	my ($args, $want) = @$case;
	my ($o, $e) = ('', '');
	my $ok = IPC::Run::run([ $example, '/trafficdb.nonexistent', @$args ], '>', \$o, '2>', \$e);
	ok(!$ok && $? >> 8 == 2, "bad arguments (@$args): exit status 2");
	like($e, $want, "bad arguments (@$args): the message names the value");
}

$node->stop;
done_testing();
