# t/024_trail_v2.pl: the trail FDW and CLI over format version 2, against a
# real MinIO on 127.0.0.1 (scripts/test.sh: MINIO_ENDPOINT, MINIO_ROOT_USER,
# MINIO_ROOT_PASSWORD) and local files.
#
# a. Aggregates from the footer: count(*), count(col), min/max of int,
#    float, time, id, lon/lat columns, bool_and/bool_or, with and without
#    GROUP BY the trail id, with id filters and HAVING, over NaN, NULL and
#    all-NULL columns, give exactly what PostgreSQL computes from the rows
#    (the same query with trafficdb.trail_footer_aggregates off, and on the
#    heap); EXPLAIN shows them pushed and EXPLAIN ANALYZE no page read and
#    only the bytes of opening the file.  What cannot be answered exactly
#    (DISTINCT, FILTER, a time clause, sum, text min) is not pushed.
# b. Projection: a query fetches only the chunks of the columns it uses
#    (Trail Page Bytes Read = the sum of those chunks' lengths by
#    trafficdb-trail info --pages) and returns the rows of SELECT *.
# c. Version-1 files (trail_write format_version => 1, trafficdb-trail
#    --format-version 1) read identically; their aggregates are pushed only
#    where the footer has the answer without column summaries.
# d. Booleans round-trip as booleans (TDB_TRAIL_BOOL) through trail_write
#    and the CLI; writer options are checked and refused with the value and
#    what is expected.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use lib 't';
use TdbTest;

my $endpoint = $ENV{MINIO_ENDPOINT} // die 'MINIO_ENDPOINT must name the MinIO of scripts/test.sh';
my $user = $ENV{MINIO_ROOT_USER} // die 'MINIO_ROOT_USER unset';
my $secret = $ENV{MINIO_ROOT_PASSWORD} // die 'MINIO_ROOT_PASSWORD unset';
my $cli = $ENV{TRAFFICDB_TRAIL} // die 'TRAFFICDB_TRAIL must name tools/trafficdb-trail';

tdb_make_bucket('tap-v2');

# no memory cache: each query's bytes come from S3, so they can be compared
my $node = tdb_node('trail_v2', 'trafficdb.trail_memory_cache' => '0', 'TimeZone' => "'UTC'");
my $dir = PostgreSQL::Test::Utils::tempdir;

# Six vehicles, 3,000 events each (a file of many 16 kB blocks).  speed: NaN in vehicle 2, all NULL in 3, all
# NaN in 4; alt: NULL now and then, all NULL in 4; moving: all true in 1, all
# NULL in 5; empty: NULL everywhere.
$node->safe_psql('postgres', qq{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE SERVER s3 FOREIGN DATA WRAPPER trafficdb_trails
  OPTIONS (endpoint '$endpoint', region 'us-east-1', block_size '16kB', cache_dir 'none');
CREATE USER MAPPING FOR CURRENT_USER SERVER s3 OPTIONS (access_key '$user', secret_key '$secret');
CREATE SERVER disk FOREIGN DATA WRAPPER trafficdb_trails;
CREATE TABLE ev AS
SELECT v::bigint AS vid, 'CS' || v AS callsign,
  '2024-03-01 00:00:00+00'::timestamptz + i * interval '20 s' + v * interval '1 s' AS ts,
  ST_SetSRID(ST_MakePoint(round((24.5 + v * 0.01 + i * 0.00013)::numeric, 7)::float8,
                          round((60.1 + v * 0.02 - i * 0.00011)::numeric, 7)::float8), 4326) AS geom,
  CASE WHEN v = 3 THEN NULL WHEN v = 4 OR (v = 2 AND i % 7 = 0) THEN 'NaN'::float8
       ELSE round((i * 0.25 - v * 3)::numeric, 2)::float8 END AS speed,
  CASE WHEN v = 4 OR i % 11 = 0 THEN NULL ELSE (i * 13 - v * 500)::bigint END AS alt,
  CASE WHEN v = 5 OR (v = 6 AND i % 9 = 0) THEN NULL WHEN v = 1 THEN true ELSE i % 3 = 0 END AS moving,
  'tag' || (i % 4) AS tag,
  NULL::float8 AS empty
FROM generate_series(1, 6) v, generate_series(0, 2999) i;
-- one page per trail: its chunks span several 16 kB blocks, so a projection fetches fewer
-- (version 2: version 3 encodes these columns in a few bytes, and a page fits a block)
SELECT trafficdb.trail_write('SELECT vid, ts, geom, speed, alt, moving, tag, empty FROM ev', 's3://tap-v2/veh.trail',
  server => 's3', id_column => 'vid', time_column => 'ts', page_seconds => 0, format_version => 2);
SELECT trafficdb.trail_write('SELECT vid, ts, geom, speed, alt, moving, tag, empty FROM ev', 's3://tap-v2/veh-st.trail',
  server => 's3', id_column => 'vid', time_column => 'ts', page_size => 2048, page_order => 'space-time', bucket_seconds => 900);
SELECT trafficdb.trail_write('SELECT vid, ts, geom, speed, alt, moving, tag, empty FROM ev', 's3://tap-v2/veh-tm.trail',
  server => 's3', id_column => 'vid', time_column => 'ts', page_size => 2048, page_order => 'time', bucket_seconds => 900);
SELECT trafficdb.trail_write('SELECT vid, ts, geom, speed, alt, moving, tag, empty FROM ev', 's3://tap-v2/veh-v1.trail',
  server => 's3', id_column => 'vid', time_column => 'ts', page_size => 2048, format_version => 1);
SELECT trafficdb.trail_write('SELECT callsign, ts, geom, speed, alt, moving FROM ev', 's3://tap-v2/cs.trail',
  server => 's3', id_column => 'callsign', time_column => 'ts', page_size => 2048);
SELECT trafficdb.trail_write('SELECT vid, ts, geom, speed, alt, moving, tag, empty FROM ev', '$dir/veh.trail',
  id_column => 'vid', time_column => 'ts', page_size => 2048);
IMPORT FOREIGN SCHEMA "s3://tap-v2/veh.trail" FROM SERVER s3 INTO public;
IMPORT FOREIGN SCHEMA "s3://tap-v2/cs.trail" FROM SERVER s3 INTO public;
CREATE FOREIGN TABLE veh_st (vid bigint, ts timestamptz, geom geometry(Point, 4326), speed float8, alt bigint,
  moving boolean, tag text, empty float8) SERVER s3 OPTIONS (url 's3://tap-v2/veh-st.trail', id_column 'vid', time_column 'ts');
CREATE FOREIGN TABLE veh_tm (vid bigint, ts timestamptz, geom geometry(Point, 4326), speed float8, alt bigint,
  moving boolean, tag text, empty float8) SERVER s3 OPTIONS (url 's3://tap-v2/veh-tm.trail', id_column 'vid', time_column 'ts');
CREATE FOREIGN TABLE veh_v1 (vid bigint, ts timestamptz, geom geometry(Point, 4326), speed float8, alt bigint,
  moving boolean, tag text, empty float8) SERVER s3 OPTIONS (url 's3://tap-v2/veh-v1.trail', id_column 'vid', time_column 'ts');
CREATE FOREIGN TABLE veh_local (vid bigint, ts timestamptz, geom geometry(Point, 4326), speed float8, alt bigint,
  moving boolean, tag text, empty float8) SERVER disk OPTIONS (url '$dir/veh.trail', id_column 'vid', time_column 'ts');
-- the positions as the file's lon and lat columns
CREATE FOREIGN TABLE veh_pos (vid bigint, ts timestamptz, lon float8, lat float8)
  SERVER s3 OPTIONS (url 's3://tap-v2/veh.trail', id_column 'vid', time_column 'ts');
CREATE VIEW ev_pos AS SELECT vid, ts, ST_X(geom) AS lon, ST_Y(geom) AS lat FROM ev;
});

is($node->safe_psql('postgres', q{SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
  FROM pg_attribute a WHERE a.attrelid = 'veh'::regclass AND a.attnum > 0}),
	'vid bigint, ts timestamp with time zone, geom geometry(Point,4326), speed double precision, alt bigint, moving boolean, tag text, empty double precision',
	'IMPORT FOREIGN SCHEMA of a version-2 file: a boolean column is boolean');


sub rows { return $node->safe_psql('postgres', $_[0]); }
my $off = 'SET trafficdb.trail_footer_aggregates = off; ';

# ---- a. aggregates from the footer ------------------------------------------------------

my @pushed = (
	[ 'counts', q{SELECT count(*), count(speed), count(alt), count(moving), count(tag), count(empty), count(geom), count(ts), count(vid) FROM %s} ],
	[ 'min/max of int, float (NaN), all-NULL, time and id', q{SELECT min(alt), max(alt), min(speed), max(speed), min(empty), max(empty), min(ts), max(ts), min(vid), max(vid) FROM %s} ],
	[ 'bool_and, bool_or, every', q{SELECT bool_and(moving), bool_or(moving), every(moving) FROM %s} ],
	[ 'GROUP BY the trail id', q{SELECT vid, count(*), count(speed), min(speed), max(speed), min(alt), max(alt), bool_and(moving), bool_or(moving), min(ts), max(ts), count(empty), max(empty) FROM %s GROUP BY vid ORDER BY vid} ],
	[ 'GROUP BY with id = ANY and id = (intersected)', q{SELECT vid, count(*), max(speed), min(alt) FROM %s WHERE vid = ANY('{2,4,99}') AND vid IN (4, 2, 1) GROUP BY vid ORDER BY vid} ],
	[ 'an all-NaN trail: min and max NaN', q{SELECT count(*), min(speed), max(speed) FROM %s WHERE vid = 4} ],
	[ 'an all-NULL trail: NULL, bool NULL', q{SELECT count(*), count(speed), min(speed), max(speed), bool_and(moving) FROM %s WHERE vid = 3 OR vid = 3} ],
	[ 'no trail matches: one row, count 0 and NULLs', q{SELECT count(*), count(alt), max(alt), min(ts), bool_or(moving) FROM %s WHERE vid = 99} ],
	[ 'no trail matches, grouped: no row', q{SELECT vid, count(*) FROM %s WHERE vid = 99 GROUP BY vid} ],
	[ 'ids of NULL: nothing', q{SELECT count(*), max(alt) FROM %s WHERE vid = ANY('{NULL,NULL}'::bigint[])} ],
	[ 'HAVING and expressions over aggregates', q{SELECT vid, max(alt) - min(alt), count(*) + 1 FROM %s GROUP BY vid HAVING count(speed) > 0 AND max(alt) IS NOT NULL ORDER BY 1} ],
	[ 'GROUP BY id not in the select list', q{SELECT max(ts) FROM %s GROUP BY vid ORDER BY 1} ],
);
for my $t ([ 'veh', 'S3, trail order' ], [ 'veh_st', 'S3, space-time order' ], [ 'veh_tm', 'S3, time order' ], [ 'veh_local', 'local file' ])
{
	my ($table, $where) = @$t;
	for my $p (@pushed)
	{
		my ($what, $q) = @$p;
		my $sql = sprintf($q, $table);
		my $plan = rows("EXPLAIN (COSTS OFF) $sql");
		like($plan, qr/Aggregates From Footer: /, "$where, $what: pushed") or diag($plan);
		my $got = rows($sql);
		is($got, rows($off . $sql), "$where, $what: the result of PostgreSQL's aggregation");
		is($got, rows(sprintf($q, 'ev')), "$where, $what: and of the heap");
	}
}
like(rows('EXPLAIN (COSTS OFF) SELECT count(*), max(alt) FROM veh'), qr/^\s*Aggregates From Footer: count\(\*\), max\(alt\)$/m,
	'EXPLAIN names the aggregates');
like(rows('EXPLAIN (COSTS OFF) SELECT vid, count(*) FROM veh GROUP BY vid'), qr/Grouped By Trail Id: vid/, 'and the grouping');
unlike(rows($off . 'EXPLAIN (COSTS OFF) SELECT count(*) FROM veh'), qr/Aggregates From Footer/, 'trafficdb.trail_footer_aggregates = off: not pushed');
rows(q{ALTER FOREIGN TABLE veh_local OPTIONS (ADD footer_aggregates 'off')});
unlike(rows('EXPLAIN (COSTS OFF) SELECT count(*) FROM veh_local'), qr/Aggregates From Footer/, 'nor with the table option footer_aggregates off');
rows(q{ALTER FOREIGN TABLE veh_local OPTIONS (DROP footer_aggregates)});

# positions: min/max of lon and lat from the zone maps, exactly the values read
for my $q (q{SELECT min(lon), max(lon), min(lat), max(lat) FROM %s}, q{SELECT vid, min(lon), max(lon), min(lat), max(lat) FROM %s GROUP BY vid ORDER BY vid})
{
	like(rows('EXPLAIN (COSTS OFF) ' . sprintf($q, 'veh_pos')), qr/Aggregates From Footer: min\(lon\)/, 'lon/lat min/max: pushed');
	is(rows(sprintf($q, 'veh_pos')), rows(sprintf($q, 'ev_pos')), 'and equal to the heap\'s coordinates');
	is(rows(sprintf($q, 'veh_pos')), rows($off . sprintf($q, 'veh_pos')), 'and to the values the scan returns');
}

# text trail ids
for my $q (q{SELECT callsign, count(*), max(alt), bool_or(moving) FROM %s GROUP BY callsign ORDER BY callsign},
	q{SELECT count(*), min(speed) FROM %s WHERE callsign = ANY('{CS2,CS5,XX}')})
{
	like(rows('EXPLAIN (COSTS OFF) ' . sprintf($q, 'cs')), qr/Aggregates From Footer/, 'text ids: pushed');
	is(rows(sprintf($q, 'cs')), rows(sprintf($q, 'ev')), 'text ids: the heap\'s result');
}

# not pushed: what the footer cannot answer exactly
for my $q (q{SELECT count(DISTINCT alt) FROM %s}, q{SELECT count(*) FILTER (WHERE alt > 0) FROM %s},
	q{SELECT count(*) FROM %s WHERE ts < '2024-03-01 00:10:00+00'}, q{SELECT sum(alt) FROM %s},
	q{SELECT min(tag) FROM %s}, q{SELECT tag, count(*) FROM %s GROUP BY tag ORDER BY tag},
	q{SELECT count(*) FROM %s WHERE vid = 2 AND alt > 0}, q{SELECT string_agg(tag, ',' ORDER BY ts) FROM %s WHERE vid = 1},
	q{SELECT count(*) FROM %s GROUP BY vid, tag ORDER BY 1}, q{SELECT count(*) FROM %s GROUP BY ROLLUP (vid) ORDER BY 1},
	q{SELECT count(*) + random() * 0 FROM %s})
{
	my $plan = rows('EXPLAIN (COSTS OFF) ' . sprintf($q, 'veh'));
	unlike($plan, qr/Aggregates From Footer/, "not pushed: $q") or diag($plan);
	is(rows(sprintf($q, 'veh')), rows(sprintf($q, 'ev')), '  and the heap\'s result');
}

# EXPLAIN ANALYZE: no page; planning opened the file to decide, and the
# execution reuses what it learnt (one validation a statement): no request
for my $t ([ 'veh', 'SELECT count(*), max(alt), min(speed), bool_and(moving) FROM veh' ], [ 'veh', 'SELECT vid, max(ts) FROM veh GROUP BY vid' ],
	[ 'veh_st', 'SELECT count(*), max(speed) FROM veh_st WHERE vid = 3' ])
{
	my ($table, $q) = @$t;
	my $n = tdb_scan_node($node, $q);
	is($n->{'Trail Pages Read'}, 0, "$q: no page read");
	is($n->{'Bytes From S3'} . '|' . $n->{'Requests'}, '0|0', "$q: the execution sends no request");
	like($n->{'Object Validated'}, qr/^by this statement's planning/, "$q: validated once, by the planning");
}
my $full = tdb_scan_node($node, 'SELECT count(*), max(alt) FROM veh', $off);
cmp_ok($full->{'Bytes From S3'}, '>', tdb_scan_node($node, 'SELECT * FROM veh WHERE vid = 99')->{'Bytes From S3'},
	"aggregated by PostgreSQL the pages are read ($full->{'Bytes From S3'} bytes)");

my ($rc, $out, $err);

# a file replaced between planning and execution by one without column summaries:
# a generic plan computes them from the pages, with the same answer
rows(qq{SELECT trafficdb.trail_write('SELECT vid, ts, geom, speed, alt, moving, tag, empty FROM ev', '$dir/swap.trail',
  id_column => 'vid', time_column => 'ts', page_size => 2048);
  CREATE FOREIGN TABLE swap (vid bigint, ts timestamptz, geom geometry(Point, 4326), speed float8, alt bigint,
    moving boolean, tag text, empty float8) SERVER disk OPTIONS (url '$dir/swap.trail', id_column 'vid', time_column 'ts');});
my $agg = q{SELECT vid, count(*), count(speed), min(speed), max(speed), max(alt), count(moving) FROM %s WHERE vid = ANY($1) GROUP BY vid ORDER BY vid};
my $swapped = rows(qq{SET plan_cache_mode = force_generic_plan;
  PREPARE a(bigint[]) AS } . sprintf($agg, 'swap') . qq{;
  EXECUTE a('{1,2,3,4,5,6}');
  SELECT trafficdb.trail_write('SELECT vid, ts, geom, speed, alt, moving, tag, empty FROM ev', '$dir/swap.trail',
    id_column => 'vid', time_column => 'ts', page_size => 2048, format_version => 1);
  SELECT '--';
  EXECUTE a('{1,2,3,4,5,6}');
  EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE a('{2,3}')});
my ($before, $after) = split /\n--\n/, $swapped;
my $heap = rows(sprintf($agg =~ s/\$1/'{1,2,3,4,5,6}'/r, 'ev'));
like($before, qr/^\Q$heap\E\n18000$/, 'a generic plan of footer aggregates');
like($after, qr/^\Q$heap\E\n/, 'after the file became version 1: the same answer, from its pages');
like($after, qr/Footer Summaries: missing \(the file was replaced since planning\): computed from its pages/, 'and EXPLAIN ANALYZE says so');
like($after, qr/Trail Pages Read: [1-9]/, '  (pages read)');
# bool_and of what is now an int64 column: not computed, an error asking to plan again
rows(qq{SELECT trafficdb.trail_write('SELECT vid, ts, geom, speed, alt, moving, tag, empty FROM ev', '$dir/swap.trail',
  id_column => 'vid', time_column => 'ts', page_size => 2048)});
($rc, $out, $err) = $node->psql('postgres', qq{SET plan_cache_mode = force_generic_plan;
  PREPARE b(bigint) AS SELECT bool_and(moving) FROM swap WHERE vid = \$1;
  EXECUTE b(2);
  SELECT trafficdb.trail_write('SELECT vid, ts, geom, speed, alt, moving, tag, empty FROM ev', '$dir/swap.trail',
    id_column => 'vid', time_column => 'ts', format_version => 1);
  EXECUTE b(2);});
like($err, qr/trail file ".*swap.trail" changed since the query was planned: column "moving" is now of another type.*\n.*HINT:  Plan the query again/,
	'a column whose type changed since planning: an error asking to plan again');

# ---- b. projection -------------------------------------------------------------------------

# the chunks of each page, by trafficdb-trail info --pages
IPC::Run::run([ $cli, 'info', "$dir/veh.trail", '--pages' ], '>', \$out, '2>', \$err) or die "info --pages: $err";
my @pages = map { { map { split /:/ } split /,/, $_ } } ($out =~ /chunks=(\S+)/g);
my ($plen) = 0;
$plen += $_ for ($out =~ /length=(\d+)/g);
ok(@pages > 5, scalar(@pages) . ' pages, each with its chunks listed');
sub chunks
{
	my $sum = 0;
	for my $pg (@pages) { $sum += $pg->{$_} for @_; }
	return $sum;
}

sub digest
{
	my ($cols, $from) = @_;
	return rows("SELECT count(*) || ':' || md5(string_agg(concat_ws('|', $cols), ',' ORDER BY vid, ts)) FROM $from");
}
for my $t ([ 'vid, ts, alt', [qw(core alt)] ], [ 'vid, ts, speed, moving', [qw(core speed moving)] ],
	[ 'vid, ts, encode(ST_AsEWKB(geom), \'hex\')', [qw(core position)] ], [ 'ts', ['core'] ],
	[ 'vid, ts, encode(ST_AsEWKB(geom), \'hex\'), speed, alt, moving, tag, empty', [qw(core position speed alt moving tag empty)] ])
{
	my ($cols, $chunks) = @$t;
	for my $table ('veh', 'veh_st', 'veh_tm', 'veh_local')
	{
		is(digest($cols, $table), digest($cols, "(SELECT * FROM $table OFFSET 0) s"), "$table: SELECT $cols returns the rows of SELECT *");
	}
	is(digest($cols, 'veh'), digest($cols, 'ev'), "SELECT $cols: the heap's rows");
	my $n = tdb_scan_node($node, "SELECT $cols FROM veh_local");
	is($n->{'Trail Page Bytes Read'}, chunks(@$chunks), "SELECT $cols reads the chunks @$chunks: $n->{'Trail Page Bytes Read'} bytes");
}
my $all = tdb_scan_node($node, 'SELECT * FROM veh_local');
is($all->{'Trail Page Bytes Read'}, $plen, "SELECT * reads every page whole ($plen bytes)");
is($all->{'Columns Fetched'}, 'vid, ts, geom, speed, alt, moving, tag, empty', 'EXPLAIN VERBOSE: Columns Fetched lists them all');
my $proj = tdb_scan_node($node, 'SELECT ts, alt FROM veh');
is($proj->{'Columns Fetched'}, 'vid, ts, alt', 'and only the id, time and alt for SELECT ts, alt');
my $whole = tdb_scan_node($node, 'SELECT * FROM veh');
cmp_ok($proj->{'Bytes From S3'}, '<', $whole->{'Bytes From S3'},
	"S3: SELECT ts, alt fetched $proj->{'Bytes From S3'} bytes, SELECT * $whole->{'Bytes From S3'}");
cmp_ok($proj->{'Trail Page Bytes Read'} * 2, '<', $whole->{'Trail Page Bytes Read'},
	"of the pages: $proj->{'Trail Page Bytes Read'} of $whole->{'Trail Page Bytes Read'} bytes");
my $box = tdb_scan_node($node, q{SELECT ts, alt FROM veh_local WHERE geom && ST_MakeEnvelope(24.5, 60.1, 24.54, 60.2, 4326)});
ok($box->{'Trail Pages Read'} > 0 && $box->{'Columns Fetched'} eq 'vid, ts, geom, alt',
	"a box clause reads the positions too (PostgreSQL checks it): $box->{'Columns Fetched'}") or diag(explain $box);
is(digest('vid, ts, alt', q{veh WHERE geom && ST_MakeEnvelope(24.5, 60.1, 24.54, 60.2, 4326)}),
	digest('vid, ts, alt', q{ev WHERE geom && ST_MakeEnvelope(24.5, 60.1, 24.54, 60.2, 4326)}), 'with the heap\'s rows');

# ---- c. version 1 --------------------------------------------------------------------------

my $every = q{vid, ts, encode(ST_AsEWKB(geom), 'hex'), speed, alt, moving, tag, empty};
is(digest($every, 'veh_v1'), digest($every, 'ev'), 'a version-1 file (trail_write format_version => 1) reads the heap\'s rows');
is(digest('ts, alt', 'veh_v1'), digest('ts, alt', 'ev'), 'also projected');
like(tdb_scan_node($node, 'SELECT ts, alt FROM veh_v1')->{'Columns Fetched'}, qr/version 1: its pages are read whole/, 'EXPLAIN says a version-1 page is read whole');
for my $q (q{SELECT count(*), count(ts), count(geom), min(ts), max(ts), min(vid), max(vid) FROM %s},
	q{SELECT vid, count(*), max(ts) FROM %s WHERE vid IN (1, 3) GROUP BY vid ORDER BY vid})
{
	like(rows('EXPLAIN (COSTS OFF) ' . sprintf($q, 'veh_v1')), qr/Aggregates From Footer/, "version 1, pushed: $q");
	is(rows(sprintf($q, 'veh_v1')), rows(sprintf($q, 'ev')), '  the heap\'s result');
}
for my $q (q{SELECT max(alt) FROM %s}, q{SELECT count(speed) FROM %s}, q{SELECT bool_or(moving) FROM %s})
{
	unlike(rows('EXPLAIN (COSTS OFF) ' . sprintf($q, 'veh_v1')), qr/Aggregates From Footer/, "version 1 (no column summaries), not pushed: $q");
	is(rows(sprintf($q, 'veh_v1')), rows(sprintf($q, 'ev')), '  the heap\'s result');
}

# the CLI: the same CSV as version 2 and version 1
sub cli
{
	my ($in, @args) = @_;
	my ($o, $e) = ('', '');
	my $ok = IPC::Run::run([ $cli, @args ], '<', \$in, '>', \$o, '2>', \$e);
	return ($ok ? 0 : $? >> 8, $o, $e);
}
# (NaN speeds are left empty here, so NULL; the CLI reads NaN since issue 33: test/stream_cli.sh)
my $csv = rows(q{SELECT 'id,time,lon,lat,speed,alt,moving' UNION ALL (SELECT concat(vid, ',', to_char(ts, 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
  ',', ST_X(geom), ',', ST_Y(geom), ',', CASE WHEN speed = 'NaN' THEN NULL ELSE speed END, ',', alt, ',', CASE WHEN moving THEN 'true' WHEN NOT moving THEN 'false' END) FROM ev ORDER BY vid, ts)}) . "\n";
my ($o, $e);
($rc, $o, $e) = cli($csv, 'write', "$dir/cli2.trail");
is($rc, 0, 'trafficdb-trail write: version 6 by default (a small file)') or diag($e);
($rc, $o, $e) = cli($csv, 'write', "$dir/cli2v2.trail", '--format-version', '2');
is($rc, 0, 'and --format-version 2') or diag($e);
($rc, $o, $e) = cli($csv, 'write', "$dir/cli1.trail", '--format-version', '1');
is($rc, 0, 'and --format-version 1') or diag($e);
{
	local $ENV{AWS_ACCESS_KEY_ID} = $user;
	local $ENV{AWS_SECRET_ACCESS_KEY} = $secret;
	($rc, $o, $e) = cli($csv, 'write', "s3://tap-v2/cli-st.trail", '--order', 'space-time', '--bucket-seconds', '300', '--endpoint', $endpoint);
	is($rc, 0, '--order space-time --bucket-seconds 300 to S3 (with credentials)') or diag($e);
	($rc, $o, $e) = cli('', 'info', "s3://tap-v2/cli-st.trail", '--endpoint', $endpoint);
	like($o, qr/^version:\s+6 \(pages column-major\)\norder:\s+space-time \(time buckets of 300 s\)$/m, 'info: version 6 (a small file: pages column-major), space-time order and its bucket') or diag($o, $e);
	like($o, qr/^footer:\s+head \d+, trail chunks \d+ \(1\), summary chunks \d+ \(\d+\), page chunks \d+ \(\d+\), lexicon \d+$/m,
		'info: the footer\'s parts') or diag($o);
}
($rc, $o, $e) = cli($csv, 'write', "$dir/cli-tm.trail", '--order', 'time');
is($rc, 0, '--order time') or diag($e);
($rc, $o) = cli('', 'info', "$dir/cli-tm.trail", '--pages');
like($o, qr/^order:\s+space-time \(time buckets of 3600 s\)$/m, 'info: time order is space-time by hour (the footer needs nothing new)');
unlike($o, qr/^page \d+ .*trails=several/m, '  and every page holds one trail') or diag($o);
($rc, $o) = cli('', 'info', "$dir/cli2.trail");
like($o, qr/^version:\s+6 \(pages column-major\)\norder:\s+trail$/m, 'info: version 6, trail order');
like((cli('', 'info', "$dir/cli2v2.trail"))[1], qr/^version:\s+2\norder:\s+trail$/m, 'info: version 2 on request');
like($o, qr/moving \(bool\)/, 'true/false stored as booleans');
($rc, $o) = cli('', 'info', "$dir/cli1.trail");
like($o, qr/^version:\s+1\n/m, 'info: version 1');
like($o, qr/moving \(int64\)/, 'true/false stored as int64 1/0 in version 1');
my ($rc2, $cat2) = cli('', 'cat', "$dir/cli2.trail");
my ($rc1, $cat1) = cli('', 'cat', "$dir/cli1.trail");
like($cat2, qr/,true\n/, 'cat prints booleans as true/false');
$cat1 =~ s/,1$/,true/mg;
$cat1 =~ s/,0$/,false/mg;
is($cat1, $cat2, 'the version-1 and version-4 files hold the same events');
is((cli('', 'cat', "$dir/cli2v2.trail"))[1], $cat2, 'and the version-2 file too');
rows(qq{CREATE FOREIGN TABLE cli1 (id bigint, time timestamptz, geom geometry(Point, 4326), speed float8, alt bigint, moving boolean)
  SERVER disk OPTIONS (url '$dir/cli1.trail');
  CREATE FOREIGN TABLE cli2 (id bigint, time timestamptz, geom geometry(Point, 4326), speed float8, alt bigint, moving boolean)
  SERVER disk OPTIONS (url '$dir/cli2.trail');});
my $cl = q{SELECT count(*) || ':' || md5(string_agg(concat_ws('|', id, time, encode(ST_AsEWKB(geom), 'hex'), speed, alt, moving), ',' ORDER BY id, time)) FROM %s};
is(rows(sprintf($cl, 'cli1')), rows(sprintf($cl, 'cli2')), 'through the FDW too (a version-1 int64 column read as boolean)');
is(rows(sprintf($cl, 'cli2')),
	rows(q{SELECT count(*) || ':' || md5(string_agg(concat_ws('|', vid, ts, encode(ST_AsEWKB(geom), 'hex'), CASE WHEN speed = 'NaN' THEN NULL ELSE speed END, alt, moving), ',' ORDER BY vid, ts)) FROM ev}),
	'and they are the heap\'s rows');
for my $bad ([ [ '--format-version', '7' ], qr/--format-version 7: expected 6 \(the default: 5 when the pages pass 64 KiB\), 5, 4, 3, 2 or 1/ ],
	[ [ '--format-version', '55' ], qr/--format-version 55: expected 6 \(the default: 5 when the pages pass 64 KiB\), 5, 4, 3, 2 or 1/ ],
	[ [ '--order', 'zigzag' ], qr/--order zigzag: expected auto, trail, time or space-time/ ],
	[ [ '--order', 'time', '--format-version', '1' ], qr/--order time needs format version 2/ ],
	[ [ '--order', 'space-time', '--bucket-seconds', '0' ], qr/--bucket-seconds 0: expected a whole number of seconds from 1/ ],
	[ [ '--order', 'space-time', '--format-version', '1' ], qr/--order space-time needs format version 2/ ],
	[ [ '--order', 'trail', '--bucket-seconds', '60' ], qr/--bucket-seconds applies to --order time, space-time and auto only/ ],
	[ [ '--format-version', '1', '--bucket-seconds', '60' ], qr/--bucket-seconds applies to .* not to --format-version 1/ ])
{
	my ($args, $re) = @$bad;
	($rc, $o, $e) = cli('', 'write', "$dir/bad.trail", @$args);
	ok($rc != 0 && $e =~ $re, "refused: @$args") or diag($e);
}

# ---- d. booleans and trail_write's options ---------------------------------------------------

is(rows(q{SELECT count(*) FROM veh v JOIN ev e USING (vid, ts) WHERE v.moving IS NOT DISTINCT FROM e.moving}), 18000,
	'booleans (NULLs included) read back equal from a version-2 file');
is(rows(q{SELECT count(*) FROM veh_v1 v JOIN ev e USING (vid, ts) WHERE v.moving IS NOT DISTINCT FROM e.moving}), 18000,
	'and from a version-1 file (int64 1/0 declared boolean)');
rows(qq{SELECT trafficdb.trail_write('SELECT vid, ts, geom, moving FROM ev', '$dir/b1.trail',
  id_column => 'vid', time_column => 'ts', format_version => 1)});
($rc, $o) = cli('', 'info', "$dir/b1.trail");
like($o, qr/moving \(int64\)/, 'trail_write format_version => 1 stores booleans as int64');
($rc, $o) = cli('', 'info', "$dir/veh.trail");
like($o, qr/moving \(bool\).*\n/, 'trail_write (version 2) stores them as booleans');
for my $bad ([ q{page_order => 'zigzag'}, qr/page_order "zigzag" is not a page order.*\n.*Expected 'auto' .*, 'trail' .*, 'time' .* or 'space-time'/ ],
	[ q{format_version => 7}, qr/format_version 7 is not a trail file format version.*\n.*Expected 6 \(the default: .*\), 5 .*, 4 .*, 3 .*, 2 .* or 1/ ],
	[ q{page_order => 'trail', bucket_seconds => 60}, qr/bucket_seconds applies to page_order 'time', 'space-time' and 'auto' only, not 'trail'/ ],
	[ q{page_order => 'time', format_version => 1}, qr/page_order 'time' needs format_version 2/ ],
	[ q{format_version => 1, bucket_seconds => 60}, qr/bucket_seconds does not apply to format_version 1/ ],
	[ q{page_order => 'space-time', bucket_seconds => 0}, qr/bucket_seconds 0 is out of range/ ],
	[ q{page_order => 'space-time', format_version => 1}, qr/page_order 'space-time' needs format_version 2/ ],
	[ q{page_order => NULL}, qr/page_order must not be NULL/ ])
{
	my ($args, $re) = @$bad;
	($rc, $o, $e) = $node->psql('postgres', qq{SET client_min_messages = error; SELECT trafficdb.trail_write('SELECT vid, ts, geom FROM ev', '$dir/bad.trail',
	  id_column => 'vid', time_column => 'ts', $args)});
	like($e, $re, "trail_write refuses $args");
}

$node->stop;
done_testing();
