# t/008_streams.pl: the stream FDW on a real stream file: IMPORT FOREIGN
# SCHEMA, INSERT in time order (errors name the row; a failed statement
# stores nothing), SELECT equal to the same query on a heap copy for random
# time windows, EXPLAIN showing the pushed-down range, aggregates and
# resampling against values computed in SQL, how long the last value holds
# (hold 'stream' or 'window'), samples against records, file privileges.
#
# INSERT is transactional (issue 13, item 11): ROLLBACK, ROLLBACK TO
# SAVEPOINT and an error caught in a subtransaction drop the rows; the order
# check spans the statements of a transaction; a conflict found at commit
# aborts the transaction; PREPARE TRANSACTION is refused while rows wait.
# Messages name the real problem: a ts beyond what the file stores is out of
# range (it was "out of time order"), and each timestamp is printed once.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $cli = $ENV{TRAFFICDB_STREAM} // die 'TRAFFICDB_STREAM must name tools/trafficdb-stream';
my $node = tdb_node('streams', max_prepared_transactions => 2, timezone => "'UTC'");
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
# a scan larger than work_mem: the tuplestore spills to disk (it crashed the
# server: tuples read back were freed after their memory context was reset)
is($node->safe_psql('postgres', q{SET work_mem = '64kB'; SELECT count(*), sum(heading) FROM s.nav}),
	$node->safe_psql('postgres', q{SELECT count(*), sum(heading) FROM stored}), 'a scan spilling to disk reads every row');
is($node->safe_psql('postgres', q{PREPARE w(timestamptz) AS SELECT count(*) FROM s.nav WHERE ts > $1; EXECUTE w('2020-06-30 05:00:00+00')}),
	$node->safe_psql('postgres', q{SELECT count(*) FROM stored WHERE ts > '2020-06-30 05:00:00+00'}), 'parameters are pushed down too');

# INSERT: order, NULLs, atomicity
my ($ret, $out, $err) = $node->psql('postgres', q{INSERT INTO s.engine VALUES
  ('2020-06-30 00:00:01+00', 900, 80), ('2020-06-30 00:00:03+00', 950, NULL), ('2020-06-30 00:00:02+00', 990, 81)});
like($err, qr/row 3 inserted into "engine" is out of time order: ts 2020-06-30 00:00:02\+00 is before 2020-06-30 00:00:03\+00, the last ts this transaction inserted into the stream/,
	'an out-of-order row is refused, naming the row');
is($node->safe_psql('postgres', 'SELECT count(*) FROM s.engine'), '0', 'a failed statement stores none of its rows');
($ret, $out, $err) = $node->psql('postgres', q{INSERT INTO s.engine VALUES ('2020-06-30 00:00:01+00', NULL, 80)});
like($err, qr/has a NULL rpm, which the stream does not allow/, 'a NULL in a non-null field is refused');
$node->safe_psql('postgres', q{INSERT INTO s.engine VALUES ('2020-06-30 00:00:01+00', 900, 80), ('2020-06-30 00:00:03+00', 950, NULL)});
is($node->safe_psql('postgres', 'SELECT rpm, temp FROM s.engine ORDER BY ts'), "900|80\n950|", 'rows in order are stored with their NULLs');

# The error of a statement, without psql's prefix: ERROR, DETAIL and HINT lines.
sub error_of
{
	my ($sql) = @_;
	my ($r, $o, $e) = $node->psql('postgres', $sql);
	$e =~ s/^psql:<stdin>:\d+: //mg;
	return $e;
}

# each timestamp once: the row's and the stream's last (the detail repeated
# both as raw microseconds, the same number twice when they were equal)
is(error_of(q{INSERT INTO s.engine VALUES ('2020-06-30 00:00:03+00', 1, 1)}),
	qq{ERROR:  row 1 inserted into "engine" is out of time order: ts 2020-06-30 00:00:03+00 equals the stream's last timestamp
HINT:  Insert rows in ascending ts order (ORDER BY ts), after the stream's last row.},
	'a row at the stream\'s last timestamp: the timestamp once');
is(error_of(q{INSERT INTO s.engine VALUES ('2020-06-30 00:00:02+00', 1, 1)}),
	qq{ERROR:  row 1 inserted into "engine" is out of time order: ts 2020-06-30 00:00:02+00 is before 2020-06-30 00:00:03+00, the stream's last timestamp
HINT:  Insert rows in ascending ts order (ORDER BY ts), after the stream's last row.},
	'a row before the stream\'s last timestamp: both timestamps, once each');
# a ts the file cannot store (microseconds since 1970 in 64 bits) is out of
# range, not out of time order (it wrapped around to a negative number)
is(error_of(q{INSERT INTO s.engine VALUES ('294276-12-31 23:59:59+00', 1, 1)}),
	qq{ERROR:  row 1 inserted into "engine": ts = 294276-12-31 23:59:59+00 is out of range for a stream timestamp (4714-11-24 00:00:00+00 BC to 294247-01-10 04:00:54.775807+00)},
	'a ts beyond the file\'s range is named with the range');

# transactions: ROLLBACK drops the rows, reads do not see rows not yet committed
$node->safe_psql('postgres', q{BEGIN; INSERT INTO s.engine VALUES ('2020-06-30 00:00:04+00', 4, 4); ROLLBACK});
is($node->safe_psql('postgres', 'SELECT count(*) FROM s.engine'), '2', 'ROLLBACK drops the rows a transaction inserted');
is($node->safe_psql('postgres', q{BEGIN; INSERT INTO s.engine VALUES ('2020-06-30 00:00:05+00', 5, 5);
  SELECT count(*) FROM s.engine; COMMIT; SELECT string_agg(rpm::text, ',' ORDER BY ts) FROM s.engine}), "2\n900,950,5",
	'the transaction\'s own rows are read after the commit, not before');

# the order check spans the transaction's statements; the failed transaction stores nothing
is(error_of(q{BEGIN; INSERT INTO s.engine VALUES ('2020-06-30 00:00:10+00', 10, 10);
  INSERT INTO s.engine VALUES ('2020-06-30 00:00:08+00', 8, 8); COMMIT}),
	qq{ERROR:  row 1 inserted into "engine" is out of time order: ts 2020-06-30 00:00:08+00 is before 2020-06-30 00:00:10+00, the last ts this transaction inserted into the stream
HINT:  Insert rows in ascending ts order (ORDER BY ts), after the stream's last row.},
	'a row before one an earlier statement of the transaction inserted is refused at its statement');
is($node->safe_psql('postgres', q{SELECT count(*) FROM s.engine WHERE ts > '2020-06-30 00:00:05+00'}), '0', 'and the transaction stored nothing');

# savepoints: ROLLBACK TO drops the rows inserted since (released children
# included), an error caught by PL/pgSQL drops its block's rows, and the
# order check forgets dropped rows
($ret, $out, $err) = $node->psql('postgres', q{BEGIN;
INSERT INTO s.engine VALUES ('2020-06-30 00:00:20+00', 20, NULL);
SAVEPOINT p;
INSERT INTO s.engine VALUES ('2020-06-30 00:00:30+00', 30, NULL);
SAVEPOINT q;
INSERT INTO s.engine VALUES ('2020-06-30 00:00:31+00', 31, NULL);
RELEASE q;
ROLLBACK TO p;
INSERT INTO s.engine VALUES ('2020-06-30 00:00:25+00', 25, NULL);
SAVEPOINT r;
INSERT INTO s.engine VALUES ('2020-06-30 00:00:26+00', 26, NULL);
RELEASE r;
DO $$ BEGIN
  INSERT INTO s.engine VALUES ('2020-06-30 00:00:29+00', 29, NULL);
  RAISE EXCEPTION 'undo';
EXCEPTION WHEN raise_exception THEN NULL;
END $$;
INSERT INTO s.engine VALUES ('2020-06-30 00:00:27+00', 27, NULL);
COMMIT});
is($err, '', 'after ROLLBACK TO SAVEPOINT, rows are checked against the rows kept');
is($node->safe_psql('postgres', q{SELECT string_agg(rpm::text, ',' ORDER BY ts) FROM s.engine WHERE ts >= '2020-06-30 00:00:20+00'}),
	'20,25,26,27', 'ROLLBACK TO SAVEPOINT and a caught error drop the rows inserted since, and only those');

# COPY FROM into a stream table (it crashed the server: the wrapper had no
# BeginForeignInsert, so COPY called ExecForeignInsert with no state); its rows
# are transactional too
($ret, $out, $err) = $node->psql('postgres', qq{BEGIN;
COPY s.engine FROM STDIN;
2020-06-30 00:00:29+00	29	\\N
\\.
ROLLBACK;
COPY s.engine FROM STDIN;
2020-06-30 00:00:28+00	28	2.5
\\.
});
is($err, '', 'COPY FROM into a stream table works');
is($node->safe_psql('postgres', q{SELECT string_agg(rpm || ':' || coalesce(temp::text, 'null'), ',' ORDER BY ts) FROM s.engine WHERE ts >= '2020-06-30 00:00:27+00'}),
	'27:null,28:2.5', 'COPY stores its rows when it commits, none when it rolls back');

# a conflict found at commit: another writer appended after this
# transaction's INSERT; the commit fails and the whole transaction with it
$node->safe_psql('postgres', 'CREATE TABLE side (x int)');
my $bg = $node->background_psql('postgres', on_error_stop => 0);
$bg->query_safe(q{BEGIN; INSERT INTO side VALUES (1); INSERT INTO s.engine VALUES ('2020-06-30 00:00:40+00', 40, NULL)});
$node->safe_psql('postgres', q{INSERT INTO s.engine VALUES ('2020-06-30 00:00:50+00', 50, NULL)});
$bg->query('COMMIT');
like($bg->{stderr}, qr/ERROR:  could not write the rows this transaction inserted into "engine": the first one's ts 2020-06-30 00:00:40\+00 is before 2020-06-30 00:00:50\+00, the stream's last timestamp now\nDETAIL:  Another writer appended to stream "engine" of stream file "\Q$file\E" after this transaction inserted into it. The transaction is rolled back; the file keeps none of its rows./,
	'a row that another writer overtook before the commit: the commit fails, naming both timestamps');
is($bg->query(q{SELECT (SELECT count(*) FROM side) || '/' || (SELECT string_agg(rpm::text, ',' ORDER BY ts) FROM s.engine WHERE ts >= '2020-06-30 00:00:30+00')}),
	'0/50', 'the transaction is rolled back: neither its heap row nor its stream row is stored');
$bg->quit;

# PREPARE TRANSACTION cannot keep rows waiting in the session
is(error_of(q{BEGIN; INSERT INTO s.engine VALUES ('2020-06-30 00:01:00+00', 60, NULL); PREPARE TRANSACTION 'p1'}),
	qq{ERROR:  cannot PREPARE a transaction that inserted into stream file "$file"
DETAIL:  Inserted rows wait in the session's memory until the transaction commits; a prepared transaction cannot keep them.
HINT:  Insert into stream files in a transaction that is not prepared.},
	'PREPARE TRANSACTION is refused when rows wait');
is($node->safe_psql('postgres', q{SELECT (SELECT count(*) FROM pg_prepared_xacts) || '/' || (SELECT count(*) FROM s.engine WHERE ts > '2020-06-30 00:00:50+00')}), '0/0',
	'nothing was prepared or stored');
is($node->safe_psql('postgres', q{BEGIN; SELECT count(*) FROM s.engine; PREPARE TRANSACTION 'p2'; COMMIT PREPARED 'p2'}), '9',
	'a transaction that only read stream tables prepares');
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
# the last value holds until the stream's last timestamp ('stream', the
# default), or to the end of the window ('window'): a window reaching past
# the data, which ends at 05:33:20.
my $t2 = "'2020-06-30 05:00:00+00'::timestamptz";
my $t3 = "'2020-06-30 07:00:00+00'::timestamptz";
sub expected_sog
{
	my ($from, $to, $end) = @_;
	return $node->safe_psql('postgres', qq{
WITH pts AS (
  SELECT greatest(ts, $from) AS t, sog FROM stored WHERE ts > $from AND ts <= $to
  UNION ALL SELECT $from, (SELECT sog FROM stored WHERE ts <= $from ORDER BY ts DESC LIMIT 1)),
seg AS (SELECT t, sog, least(coalesce(lead(t) OVER (ORDER BY t), $to), $end) AS u FROM pts)
SELECT round((sum(sog * extract(epoch FROM u - t)) / extract(epoch FROM $end - $from))::numeric, 6),
       min(sog), max(sog), round(sum(sog * extract(epoch FROM u - t))::numeric, 3), count(*),
       (SELECT count(*) FROM stored WHERE ts >= $from AND ts <= $to), extract(epoch FROM $end - $from)::float8 FROM seg});
}
my $cols = 'round(avg::numeric, 6), min, max, round(integral::numeric, 3), samples, records, covered';
is($node->safe_psql('postgres', qq{SELECT $cols FROM trafficdb.stream_aggregate('s.nav', 'sog', $t2, $t3)}),
	expected_sog($t2, $t3, "(SELECT max(ts) FROM src)"),
	'past the data, the last value holds until the stream\'s last insert, not to the end of the window (the default)');
is($node->safe_psql('postgres', qq{SELECT $cols FROM trafficdb.stream_aggregate('s.nav', 'sog', $t2, $t3, 'stream')}),
	expected_sog($t2, $t3, "(SELECT max(ts) FROM src)"), 'hold => \'stream\' is the default');
is($node->safe_psql('postgres', qq{SELECT $cols FROM trafficdb.stream_aggregate('s.nav', 'sog', $t2, $t3, hold => 'window')}),
	expected_sog($t2, $t3, $t3), 'hold => \'window\' holds the last value to the end of the window');
# engine's rpm: 28 at 00:00:28, 50 at 00:00:50, the stream's last record
is($node->safe_psql('postgres', q{SELECT avg, min, max, integral, samples, records, covered
  FROM trafficdb.stream_aggregate('s.engine', 'rpm', '2020-06-30 00:00:40+00', '2020-06-30 00:01:40+00')}),
	'28|28|50|280|2|1|10', 'rpm: 28 holds 10 s, 50 holds for none after the last record; two samples, one record in the window');
is($node->safe_psql('postgres', q{SELECT round(avg::numeric, 4), integral, covered
  FROM trafficdb.stream_aggregate('s.engine', 'rpm', '2020-06-30 00:00:40+00', '2020-06-30 00:01:40+00', 'window')}),
	'46.3333|2780|60', '\'window\': 50 holds the 50 s to t_to');
is($node->safe_psql('postgres', q{SELECT samples, records, covered, integral IS NULL, avg IS NULL
  FROM trafficdb.stream_aggregate('s.engine', 'rpm', '2020-06-30 00:01:00+00', '2020-06-30 00:02:00+00')}),
	'0|0|0|t|t', 'a window wholly after the stream\'s last timestamp has no value (\'stream\')');
is($node->safe_psql('postgres', q{SELECT samples, records, covered, integral
  FROM trafficdb.stream_aggregate('s.engine', 'rpm', '2020-06-30 00:01:00+00', '2020-06-30 00:02:00+00', 'window')}),
	'1|0|60|3000', 'and the last value over all of it (\'window\')');
# samples count non-NULL values, records count every stored record: temp is
# 80, NULL, 5, NULL x 4, 2.5, NULL at 00:00:01, 03, 05, 20, 25, 26, 27, 28, 50
is($node->safe_psql('postgres', q{SELECT samples, records, covered, integral, min, max
  FROM trafficdb.stream_aggregate('s.engine', 'temp', '2020-06-30 00:00:00+00', '2020-06-30 00:00:50+00')}),
	'3|9|39|290|2.5|80', 'samples: the 3 non-NULL values; records: all 9; a NULL holds no value (80 x 2 s + 5 x 15 s + 2.5 x 22 s)');
is($node->safe_psql('postgres', q{SELECT string_agg(coalesce(value::text, 'null'), ',' ORDER BY t) FROM trafficdb.stream_resample('s.engine', 'rpm',
  ARRAY['2020-06-30 00:00:50+00', '2020-06-30 00:01:00+00', '2030-01-01 00:00:00+00']::timestamptz[])}),
	'50,null,null', 'resampling: no value after the stream\'s last timestamp (the default)');
is($node->safe_psql('postgres', q{SELECT string_agg(coalesce(value::text, 'null'), ',' ORDER BY t) FROM trafficdb.stream_resample('s.engine', 'rpm',
  ARRAY['2020-06-30 00:00:50+00', '2020-06-30 00:01:00+00', '2030-01-01 00:00:00+00']::timestamptz[], 'window')}),
	'50,50,50', 'resampling with \'window\': the last value holds on');
# an insert the codecs drop (the same values) still extends the data: the
# stream's last timestamp is the last insert's, stored or not
$node->safe_psql('postgres', q{INSERT INTO s.nav SELECT '2020-06-30 06:00:00+00', sog, heading, moored FROM stored ORDER BY ts DESC LIMIT 1});
is($node->safe_psql('postgres', 'SELECT count(*) FROM s.nav'), $stored, '(the codecs dropped an insert at 06:00 that changed nothing)');
is($node->safe_psql('postgres', qq{SELECT $cols FROM trafficdb.stream_aggregate('s.nav', 'sog', $t2, $t3)}),
	expected_sog($t2, $t3, "'2020-06-30 06:00:00+00'::timestamptz"),
	'the last value holds until the last insert, stored or dropped by the codecs');
is(error_of(q{SELECT * FROM trafficdb.stream_aggregate('s.engine', 'rpm', now(), now(), 'forever')}),
	qq{ERROR:  hold must be 'stream' or 'window', not "forever"
DETAIL:  'stream' (the default): the last value holds until the stream's last timestamp; 'window': it holds to the end of the window.},
	'an unknown hold rule is refused, naming both');
($ret, $out, $err) = $node->psql('postgres', q{SELECT * FROM trafficdb.stream_aggregate('s.nav', 'speed', now(), now())});
like($err, qr/stream "nav" has no numeric field "speed"/, 'an unknown field is named');

# privileges: naming a file, and writing to one
$node->safe_psql('postgres', q{CREATE ROLE reader LOGIN; GRANT USAGE ON SCHEMA s TO reader; GRANT SELECT, INSERT ON s.engine TO reader;
  GRANT USAGE ON FOREIGN DATA WRAPPER trafficdb_streams TO reader});
($ret, $out, $err) = $node->psql('postgres', qq{SET ROLE reader; CREATE SERVER mine FOREIGN DATA WRAPPER trafficdb_streams OPTIONS (filename '$file')});
like($err, qr/permission denied to name a stream file/, 'naming a file needs pg_read_server_files');
is($node->safe_psql('postgres', 'SET ROLE reader; SELECT count(*) FROM s.engine'), '9', 'a granted role reads');
($ret, $out, $err) = $node->psql('postgres', q{SET ROLE reader; INSERT INTO s.engine VALUES ('2020-06-30 00:00:09+00', 1, 1)});
like($err, qr/permission denied to write stream file/, 'writing needs pg_write_server_files');

# last: before the fix, this row stayed (ROLLBACK kept it) and every later insert was refused
($ret, $out, $err) = $node->psql('postgres', q{BEGIN; INSERT INTO s.engine VALUES ('294247-01-10 04:00:54.775807+00', 1, 1); ROLLBACK});
is($err, '', 'the last ts in range is accepted');
$node->stop;
done_testing();
