# t/023_trail_csv.pl: CSV into trail files loses nothing silently (issue 15):
# the trail CLI (TRAFFICDB_TRAIL) keeps a code with a leading zero as a
# string, reads booleans as booleans, takes ISO 8601 offsets and a UTF-8
# byte order mark, and refuses every value that does not fit its column,
# every unknown --type column or type, and a missing position, naming the
# line, the column and the value.  The files are read back through the FDW;
# trail_write stores a boolean column as booleans too.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use lib 't';
use TdbTest;

my $cli = $ENV{TRAFFICDB_TRAIL} // die 'TRAFFICDB_TRAIL must name tools/trafficdb-trail';
my $dir = PostgreSQL::Test::Utils::tempdir;

# write CSV text to OUT with ARGS: (exit status, stderr)
sub write_csv
{
	my ($csv, $out, @args) = @_;
	open(my $fh, '>:raw', "$dir/in.csv") or die;
	print $fh $csv;
	close $fh;
	my ($stdout, $stderr);
	my $ok = IPC::Run::run([ $cli, 'write', $out, @args ], '<', "$dir/in.csv", '>', \$stdout, '2>', \$stderr);
	return ($ok ? 0 : $? >> 8, $stderr);
}

# the report's file: a BOM, a squawk code, booleans, times with offsets
my $csv = "\xEF\xBB\xBFcallsign,time,lon,lat,squawk,on_ground,alt,speed\n"
  . "MSR799,2020-06-30T02:00:00+02:00,24.9,60.1,0412,true,1000,250.5\n"
  . "MSR799,2020-06-30T00:00:10Z,24.91,60.11,7000,false,1200,251\n"
  . "AFR12,2020-06-29 19:30:05-04:30,2.5,48.9,,TRUE,,\n";
my ($rc, $err) = write_csv($csv, "$dir/adsb.trail", '--id', 'callsign');
is($rc, 0, 'a CSV with a byte order mark and offset times is written') or diag($err);

my $node = tdb_node('trail_csv');
$node->safe_psql('postgres', qq{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE SERVER disk FOREIGN DATA WRAPPER trafficdb_trails;
IMPORT FOREIGN SCHEMA "$dir/adsb.trail" FROM SERVER disk INTO public;
});
is($node->safe_psql('postgres', q{SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
  FROM pg_attribute a WHERE a.attrelid = 'adsb'::regclass AND a.attnum > 0}),
	'callsign text, time timestamp with time zone, geom geometry(Point,4326), squawk text, on_ground boolean, alt bigint, speed double precision',
	'the header after the BOM names the id; squawk (0412) is a string, on_ground a boolean, alt an integer');
$node->safe_psql('postgres', qq{CREATE FOREIGN TABLE adsb_typed (callsign text, time timestamptz, squawk text, on_ground boolean, alt int, speed numeric)
  SERVER disk OPTIONS (url '$dir/adsb.trail', id_column 'callsign', time_column 'time')});
is($node->safe_psql('postgres', q{SET TimeZone = 'UTC'; SELECT string_agg(format('%s|%s|%s|%s|%s|%s', callsign, time, squawk, on_ground, alt, speed), E'\n' ORDER BY callsign, time) FROM adsb_typed}),
	"AFR12|2020-06-30 00:00:05+00||t||\nMSR799|2020-06-30 00:00:00+00|0412|t|1000|250.5\nMSR799|2020-06-30 00:00:10+00|7000|f|1200|251",
	'read back: the leading zero kept, booleans as booleans, offsets applied to the times');

# refusals: each names the line, the column and the value
my @refused = (
	[ "id,time,lon,lat,squawk\n1,2020-06-30T00:00:00Z,1,2,7000\n\n1,2020-06-30T00:00:01Z,1,2,7a00\n", [ '--type', 'squawk=int' ],
		qr/^trafficdb-trail: CSV line 4, column squawk: "7a00" is not an integer/, '--type x=int with 7a00 (after a blank line)' ],
	[ "id,time,lon,lat,squawk\n1,2020-06-30T00:00:00Z,1,2,7000\n", [ '--type', 'sqawk=int' ],
		qr/^trafficdb-trail: --type sqawk=int: the CSV header has no column "sqawk" \(it has: id, time, lon, lat, squawk\)/,
		'--type naming no column' ],
	[ "id,time,lon,lat,squawk\n1,2020-06-30T00:00:00Z,1,2,7000\n", [ '--type', 'squawk=integer' ],
		qr/^trafficdb-trail: --type squawk=integer: expected COLUMN=int, COLUMN=float, COLUMN=string or COLUMN=bool/,
		'--type with an unknown type' ],
	[ "id,time,lon,lat\n1,2020-06-30T00:00:00Z,24.9,\n", [],
		qr/^trafficdb-trail: CSV line 2, column lat: empty \(every event needs its trail id, time, lon and lat\)/,
		'a missing latitude' ],
	[ "id,time,lon,lat\n1,2020-06-30T00:00:00Z,24.9,60.1\n2,30.06.2020 00:00,24.9,60.1\n", [],
		qr/^trafficdb-trail: CSV line 3, column time: "30.06.2020 00:00" is not a time/, 'a time in no known form' ],
	[ "id,time,lon,lat\n1,2020-06-30T00:00:00Z,24.9,91\n", [],
		qr/^trafficdb-trail: CSV line 2, column lat: "91" is not a latitude \(a number from -90 to 90\)/, 'a latitude out of range' ],
	[ "id,time,lon,lat\n1,2020-06-30T00:00:00Z,0x18,60\n", [],
		qr/^trafficdb-trail: CSV line 2, column lon: "0x18" is not a longitude/, 'a hexadecimal longitude' ],
	[ "id,time,lon,lat,flag\n1,2020-06-30T00:00:00Z,1,2,yes\n1,2020-06-30T00:00:01Z,1,2,maybe\n", [ '--type', 'flag=bool' ],
		qr/^trafficdb-trail: CSV line 3, column flag: "maybe" is not a boolean/, '--type x=bool with a word that is not one' ],
	[ "id,time,lon,lat\n0412,2020-06-30T00:00:00Z,1,2\nx1,2020-06-30T00:00:00Z,1,2\n", [ '--type', 'id=int' ],
		qr/^trafficdb-trail: CSV line 3, column id: "x1" is not an integer/, '--type id=int with a string id' ],
	[ "id,time,lon,lat\n1,2020-06-30T00:00:00Z,1,2\n", [ '--type', 'time=int' ],
		qr/^trafficdb-trail: --type time=int: the time, lon and lat columns have fixed types/, '--type on the time column' ],
	[ "id,time,lon,lat\n1,2020-06-30T00:00:00Z,1,2\n", [ '--time-unit', 'sec' ],
		qr/^trafficdb-trail: --time-unit sec: expected s, ms, us, ns or auto/, 'an unknown --time-unit' ],
);
for my $r (@refused)
{
	my ($text, $args, $re, $what) = @$r;
	unlink("$dir/refused.trail");
	my ($rc, $err) = write_csv($text, "$dir/refused.trail", @$args);
	ok($rc != 0 && $err =~ $re && !-e "$dir/refused.trail", "refused, named, nothing written: $what") or diag("rc $rc: $err");
}

# inference: codes with leading zeros, negative codes, 1/0 stay integers, all-empty columns
($rc, $err) = write_csv("id,time,lon,lat,code,neg,bit,none,ratio\n"
	  . "007,2020-06-30T00:00:00Z,1,2,0412,-07,1,,0.5\n"
	  . "007,1593475201,1,2,12,-7,0,,1e3\n", "$dir/codes.trail");
is($rc, 0, 'a file of codes is written') or diag($err);
my ($out) = run_command([ $cli, 'info', "$dir/codes.trail" ]);
like($out, qr/columns:\s+id \(trail id, string\), time \(time\), lon \(lon\), lat \(lat\), code \(string\), neg \(string\), bit \(int64\), none \(string\), ratio \(float64\)/,
	'ids and codes with leading zeros stay strings; 1/0 is an integer; 1e3 a float');
($out) = run_command([ $cli, 'cat', "$dir/codes.trail" ]);
is($out, "id,time,lon,lat,code,neg,bit,none,ratio\n007,2020-06-30T00:00:00Z,1,2,0412,-07,1,,0.5\n007,2020-06-30T00:00:01Z,1,2,12,-7,0,,1000",
	'and read back as written');

# trail_write: a boolean column is stored as booleans (int64 1/0 in format version 1), not as the text t/f
$node->safe_psql('postgres', qq{
CREATE TABLE ev AS SELECT (v % 3)::bigint AS id, '2024-03-01 00:00:00+00'::timestamptz + v * interval '1 s' AS ts,
  ST_SetSRID(ST_MakePoint(v * 0.01, 60), 4326) AS geom, v % 4 = 0 AS moving, CASE WHEN v % 5 = 0 THEN NULL ELSE v % 2 = 0 END AS lit
FROM generate_series(1, 200) v;
SELECT trafficdb.trail_write('SELECT * FROM ev', '$dir/ev.trail', id_column => 'id', time_column => 'ts');
SELECT trafficdb.trail_write('SELECT * FROM ev', '$dir/ev1.trail', id_column => 'id', time_column => 'ts', format_version => 1);
CREATE FOREIGN TABLE ev_trail (id bigint, ts timestamptz, geom geometry(Point, 4326), moving boolean, lit boolean)
  SERVER disk OPTIONS (url '$dir/ev.trail', id_column 'id', time_column 'ts');
CREATE FOREIGN TABLE ev_trail1 (id bigint, ts timestamptz, geom geometry(Point, 4326), moving boolean, lit boolean)
  SERVER disk OPTIONS (url '$dir/ev1.trail', id_column 'id', time_column 'ts');
});
($out) = run_command([ $cli, 'info', "$dir/ev.trail" ]);
like($out, qr/moving \(bool\), lit \(bool\)/, 'trail_write stores boolean columns as booleans');
($out) = run_command([ $cli, 'info', "$dir/ev1.trail" ]);
like($out, qr/moving \(int64\), lit \(int64\)/, 'and as int64 1/0 with format_version => 1');
for my $t ('ev_trail', 'ev_trail1')
{
	is($node->safe_psql('postgres', qq{SELECT count(*) FROM $t t JOIN ev e USING (id, ts)
	  WHERE t.moving = e.moving AND t.lit IS NOT DISTINCT FROM e.lit}), 200, "$t: every boolean (NULLs included) reads back equal");
}

$node->stop;
done_testing();
