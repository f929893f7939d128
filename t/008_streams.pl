# t/008_streams.pl: the stream FDW on a real stream file: IMPORT FOREIGN
# SCHEMA, INSERT in time order (errors name the row; a failed statement
# stores nothing), SELECT equal to the same query on a heap copy for random
# time windows, EXPLAIN showing the pushed-down range, aggregates and
# resampling against values computed in SQL, file privileges.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $cli = $ENV{TRAFFICDB_STREAM} // die 'TRAFFICDB_STREAM must name tools/trafficdb-stream';
my $node = tdb_node('streams');
my $dir = PostgreSQL::Test::Utils::tempdir;
my $file = "$dir/vessel.tsf";
open(my $fh, '>', "$dir/vessel.rdl") or die;
print $fh <<'RDL';
SET blockSize = 4096;
SET fileSize = 2MB;
CREATE STREAM nav WITH ID 1 {
    sog float64 WITH CODEC deadband PARAMS (0.25),
    heading int16 NULL WITH CODEC step,
    moored bool NULL WITH CODEC step
};
CREATE STREAM engine WITH ID 2 { rpm int32, temp float32 NULL };
RDL
close $fh;
system($cli, 'create', $file, "$dir/vessel.rdl") == 0 or die 'trafficdb-stream create failed';

$node->safe_psql('postgres', qq{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE SERVER vessel FOREIGN DATA WRAPPER trafficdb_streams OPTIONS (filename '$file');
CREATE SCHEMA s;
IMPORT FOREIGN SCHEMA streams FROM SERVER vessel INTO s;
});
is($node->safe_psql('postgres', q{SELECT string_agg(c.relname || ':' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY c.relname, a.attnum)
  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid WHERE c.relnamespace = 's'::regnamespace AND a.attnum > 0}),
	'engine:ts timestamp with time zone, engine:rpm integer, engine:temp real, nav:ts timestamp with time zone, nav:sog double precision, nav:heading smallint, nav:moored boolean',
	'IMPORT FOREIGN SCHEMA makes a table per stream with typed columns');

# 20,000 rows in time order; the codecs keep what changes
$node->safe_psql('postgres', q{
CREATE TABLE src AS SELECT '2020-06-30 00:00:00+00'::timestamptz + i * interval '1 s' AS ts,
  round((8 + 4 * sin(i / 300.0))::numeric, 3)::float8 AS sog, ((i / 500) % 360)::int2 AS heading,
  CASE WHEN i % 997 = 0 THEN NULL ELSE (i / 5000) % 2 = 0 END AS moored
  FROM generate_series(1, 20000) i;
INSERT INTO s.nav SELECT * FROM src ORDER BY ts;
});
my $stored = $node->safe_psql('postgres', 'SELECT count(*) FROM s.nav');
cmp_ok($stored, '<', 20000, "the codecs stored $stored of 20000 rows");
cmp_ok($stored, '>', 500, 'and kept the changes');

# the stored rows, as a heap, for differential checks
$node->safe_psql('postgres', 'CREATE TABLE stored AS SELECT * FROM s.nav');
is($node->safe_psql('postgres', q{SELECT count(*) FROM stored st JOIN src USING (ts)
  WHERE st.sog = src.sog AND st.heading = src.heading AND st.moored IS NOT DISTINCT FROM src.moored}),
	$stored, 'every stored row equals the inserted row at its time');
is($node->safe_psql('postgres', q{SELECT count(*) FROM src WHERE moored IS NULL AND ts NOT IN (SELECT ts FROM stored)}),
	'0', 'a change to NULL is always stored');

my $bad = 0;
srand(42);
for my $i (1 .. 150)
{
	my $a = int(rand(21000)) - 500;
	my $b = $a + int(rand(3000));
	my @ops = (['>=', '<'], ['>', '<='], ['>=', '<='], ['=', undef]);
	my ($lo, $hi) = @{ $ops[ $i % 4 ] };
	my $where = "ts $lo '2020-06-30 00:00:00+00'::timestamptz + $a * interval '1 s'"
	  . (defined $hi ? " AND ts $hi '2020-06-30 00:00:00+00'::timestamptz + $b * interval '1 s'" : '');
	my $f = $node->safe_psql('postgres', "SELECT count(*), coalesce(sum(sog), 0), coalesce(sum(heading), 0) FROM s.nav WHERE $where");
	my $h = $node->safe_psql('postgres', "SELECT count(*), coalesce(sum(sog), 0), coalesce(sum(heading), 0) FROM stored WHERE $where");
	if ($f ne $h) { $bad++; diag("window $where: foreign $f, heap $h"); }
}
is($bad, 0, '150 random time windows equal the same queries on a heap');

like($node->safe_psql('postgres', q{EXPLAIN (COSTS OFF) SELECT * FROM s.nav WHERE ts >= now() - interval '1 hour' AND ts < now()}),
	qr/Time Range Pushed Down: ts >= \(now\(\) - '01:00:00'::interval\) AND ts < now\(\)/, 'EXPLAIN shows the pushed-down time range');
like($node->safe_psql('postgres', q{EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM s.nav
  WHERE ts BETWEEN '2020-06-30 01:00:00+00' AND '2020-06-30 01:00:10+00'}),
	qr/Time Range Read: 2020-06-30 01:00:00\+00 to 2020-06-30 01:00:10\+00/, 'EXPLAIN ANALYZE shows the range read');
is($node->safe_psql('postgres', q{PREPARE w(timestamptz) AS SELECT count(*) FROM s.nav WHERE ts > $1; EXECUTE w('2020-06-30 05:00:00+00')}),
	$node->safe_psql('postgres', q{SELECT count(*) FROM stored WHERE ts > '2020-06-30 05:00:00+00'}), 'parameters are pushed down too');

# INSERT: order, NULLs, atomicity
my ($ret, $out, $err) = $node->psql('postgres', q{INSERT INTO s.engine VALUES
  ('2020-06-30 00:00:01+00', 900, 80), ('2020-06-30 00:00:03+00', 950, NULL), ('2020-06-30 00:00:02+00', 990, 81)});
like($err, qr/row 3 inserted into "engine" is out of time order: ts 2020-06-30 00:00:02\+00 is not after the stream's last timestamp/,
	'an out-of-order row is refused, naming the row');
is($node->safe_psql('postgres', 'SELECT count(*) FROM s.engine'), '0', 'a failed statement stores none of its rows');
($ret, $out, $err) = $node->psql('postgres', q{INSERT INTO s.engine VALUES ('2020-06-30 00:00:01+00', NULL, 80)});
like($err, qr/has a NULL rpm, which the stream does not allow/, 'a NULL in a non-null field is refused');
$node->safe_psql('postgres', q{INSERT INTO s.engine VALUES ('2020-06-30 00:00:01+00', 900, 80), ('2020-06-30 00:00:03+00', 950, NULL)});
is($node->safe_psql('postgres', 'SELECT rpm, temp FROM s.engine ORDER BY ts'), "900|80\n950|", 'rows in order are stored with their NULLs');
system($cli, 'verify', $file) == 0 or fail('trafficdb-stream verify after the inserts');

# aggregates with the codecs' reconstruction: each stored value holds until the next record
my $t0 = "'2020-06-30 01:00:00+00'::timestamptz";
my $t1 = "'2020-06-30 02:30:00+00'::timestamptz";
my $expect = $node->safe_psql('postgres', qq{
WITH pts AS (
  SELECT greatest(ts, $t0) AS t, sog FROM stored WHERE ts > $t0 AND ts <= $t1
  UNION ALL SELECT $t0, (SELECT sog FROM stored WHERE ts <= $t0 ORDER BY ts DESC LIMIT 1)),
seg AS (SELECT t, sog, coalesce(lead(t) OVER (ORDER BY t), $t1) AS u FROM pts)
SELECT round((sum(sog * extract(epoch FROM u - t)) / extract(epoch FROM $t1 - $t0))::numeric, 6),
       min(sog), max(sog), round(sum(sog * extract(epoch FROM u - t))::numeric, 3), count(*) FROM seg});
is($node->safe_psql('postgres', qq{SELECT round(avg::numeric, 6), min, max, round(integral::numeric, 3), samples
  FROM trafficdb.stream_aggregate('s.nav', 'sog', $t0, $t1)}), $expect,
	'time-weighted average, min, max, integral and samples equal SQL over the stored rows');
is($node->safe_psql('postgres', q{SELECT string_agg(coalesce(value::text, 'null'), ',' ORDER BY t) FROM trafficdb.stream_resample('s.nav', 'heading',
  ARRAY['2020-06-29 00:00:00+00', '2020-06-30 00:10:00+00', '2020-06-30 03:00:00+00']::timestamptz[])}),
	'null,1,21', 'resampling answers the value holding at each time');
($ret, $out, $err) = $node->psql('postgres', q{SELECT * FROM trafficdb.stream_aggregate('s.nav', 'speed', now(), now())});
like($err, qr/stream "nav" has no numeric field "speed"/, 'an unknown field is named');

# privileges: naming a file, and writing to one
$node->safe_psql('postgres', q{CREATE ROLE reader LOGIN; GRANT USAGE ON SCHEMA s TO reader; GRANT SELECT, INSERT ON s.engine TO reader;
  GRANT USAGE ON FOREIGN DATA WRAPPER trafficdb_streams TO reader});
($ret, $out, $err) = $node->psql('postgres', qq{SET ROLE reader; CREATE SERVER mine FOREIGN DATA WRAPPER trafficdb_streams OPTIONS (filename '$file')});
like($err, qr/permission denied to name a stream file/, 'naming a file needs pg_read_server_files');
is($node->safe_psql('postgres', 'SET ROLE reader; SELECT count(*) FROM s.engine'), '2', 'a granted role reads');
($ret, $out, $err) = $node->psql('postgres', q{SET ROLE reader; INSERT INTO s.engine VALUES ('2020-06-30 00:00:09+00', 1, 1)});
like($err, qr/permission denied to write stream file/, 'writing needs pg_write_server_files');
$node->stop;
done_testing();
