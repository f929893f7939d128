# t/022_trail_join.pl: issue 15's trail items against a real MinIO on
# 127.0.0.1 (scripts/test.sh: MINIO_ENDPOINT, MINIO_ROOT_USER,
# MINIO_ROOT_PASSWORD) and on local files.
#
# 1. A join on trail ids is parameterized: (VALUES ...) v JOIN trail t ON
#    t.callsign = v.c plans as a nested loop of pruned lookups with the
#    planner's default settings, returns the heap's rows, and fetches exactly
#    the bytes of its single-id queries (bytes(a) + bytes(b) - bytes(none), the
#    open being paid once); an outer side of 100,000 ids is not a nested loop.
#    A VALUES list's ids are known at planning: the first lookup fetches the
#    pages of them all (NULLs, repeats, ids not in the file, text ids of an
#    integer file; not a value computed per row).
# 2. revalidate_interval: with 0 every query asks for size and ETag (one
#    request, the 16 kB tail); with 60 a second query in the session asks nothing; an
#    object replaced within the interval is read as the old version from the
#    caches, or is an error when a byte must come from S3 (never a mix), and
#    a query after the interval reads the new one.
# 3. With both caches off a full scan fetches each byte once: Bytes From S3
#    equals the file size (it was 2.6 times the size).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $endpoint = $ENV{MINIO_ENDPOINT} // die 'MINIO_ENDPOINT must name the MinIO of scripts/test.sh';
my $user = $ENV{MINIO_ROOT_USER} // die 'MINIO_ROOT_USER unset';
my $secret = $ENV{MINIO_ROOT_PASSWORD} // die 'MINIO_ROOT_PASSWORD unset';

tdb_make_bucket('tap-join');

my $node = tdb_node('trail_join');
my $dir = PostgreSQL::Test::Utils::tempdir;
$node->safe_psql('postgres', qq{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE SERVER s3 FOREIGN DATA WRAPPER trafficdb_trails
  OPTIONS (endpoint '$endpoint', region 'us-east-1', block_size '16kB', cache_dir 'none');
CREATE USER MAPPING FOR CURRENT_USER SERVER s3 OPTIONS (access_key '$user', secret_key '$secret');
CREATE SERVER disk FOREIGN DATA WRAPPER trafficdb_trails;

-- 300 flights by callsign, 100 to 149 events each
CREATE TABLE ev AS
SELECT v AS vid, 'AC' || lpad(v::text, 3, '0') AS callsign,
  '2024-03-01 00:00:00+00'::timestamptz + (v * 37 % 3600) * interval '1 s' + i * interval '47 s' AS ts,
  ST_SetSRID(ST_MakePoint(round((24.5 + (v % 20) * 0.05 + i * 0.0003 * sin(v))::numeric, 7)::float8,
                          round((60.1 + (v / 20) * 0.03 + i * 0.0002 * cos(v))::numeric, 7)::float8), 4326) AS geom,
  round((10 + 5 * sin(i / 7.0 + v))::numeric, 2)::float8 AS speed
FROM generate_series(1, 300) v, generate_series(0, 99 + v % 50) i;
-- version 2: 'a small fraction of the file' assumes pages much larger than the 16 kB blocks a
-- lookup fetches at least, which version 3's are not
SELECT trafficdb.trail_write('SELECT callsign, ts, geom, speed FROM ev', 's3://tap-join/adsb.trail', server => 's3',
  id_column => 'callsign', time_column => 'ts', page_size => 4096, page_seconds => 900, format_version => 2);
SELECT trafficdb.trail_write('SELECT callsign, ts, geom, speed FROM ev', '$dir/adsb.trail',
  id_column => 'callsign', time_column => 'ts', page_size => 4096, page_seconds => 900);
SELECT trafficdb.trail_write('SELECT vid, ts, geom, speed FROM ev', 's3://tap-join/veh.trail', server => 's3',
  id_column => 'vid', time_column => 'ts', page_size => 4096, page_seconds => 900);
IMPORT FOREIGN SCHEMA "s3://tap-join/adsb.trail" FROM SERVER s3 INTO public;
IMPORT FOREIGN SCHEMA "s3://tap-join/veh.trail" FROM SERVER s3 INTO public;
CREATE FOREIGN TABLE adsb_local (callsign text, ts timestamptz, geom geometry(Point, 4326), speed float8)
  SERVER disk OPTIONS (url '$dir/adsb.trail', id_column 'callsign', time_column 'ts');
CREATE TABLE ids300 AS SELECT 'AC' || lpad(v::text, 3, '0') AS c FROM generate_series(1, 300) v;
CREATE TABLE many AS SELECT g AS id FROM generate_series(1, 100000) g;
ANALYZE ev, ids300, many;
});


sub digest
{
	my ($sql) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) || ':' || coalesce(md5(string_agg(format('%s|%s|%s|%s', callsign, ts, encode(ST_AsEWKB(geom), 'hex'), speed), ',' ORDER BY callsign, ts)), '-') FROM ($sql) q");
}

# ---- 1. parameterized joins on trail ids ----------------------------------------------

my $join = q{SELECT t.* FROM (VALUES ('AC007'), ('AC250')) v(c) JOIN %s t ON t.callsign = v.c};
my $plan = $node->safe_psql('postgres', 'EXPLAIN (COSTS OFF) ' . sprintf($join, 'adsb'));
like($plan, qr/Nested Loop.*Foreign Scan on adsb t.*Trail Ids Pushed Down: callsign = \$\d+ \(the outer row's value: one pruned lookup per outer row\)\n\s+Trail Id Checked By The Scan: \(\$\d+ = callsign\)[^\n]*$/s,
	'a join of two ids on a trail table plans as a nested loop of pruned lookups (default planner settings)')
  or diag($plan);
is(digest(sprintf($join, 'adsb')), digest(sprintf($join, 'ev')), 'it returns exactly the rows of the same join on the heap (S3)');
is(digest(sprintf($join, 'adsb_local')), digest(sprintf($join, 'ev')), 'and from a local file');

for my $t ([ 'adsb', 'Bytes From S3' ], [ 'adsb_local', 'Bytes From Local File' ])
{
	my ($table, $what) = @$t;
	my $j = tdb_scan_node($node, sprintf($join, $table));
	my $a = tdb_scan_node($node, "SELECT * FROM $table WHERE callsign = 'AC007'")->{$what};
	my $b = tdb_scan_node($node, "SELECT * FROM $table WHERE callsign = 'AC250'")->{$what};
	my $none = tdb_scan_node($node, "SELECT * FROM $table WHERE callsign = 'none'")->{$what};
	my $size = $j->{'File Size'};
	is($j->{'Trail Lookups'}, 2, "$table: EXPLAIN ANALYZE shows 2 lookups");
	is($j->{$what}, $a + $b - $none,
		"$table: the 2-id join fetched $j->{$what} bytes = $a (AC007 alone) + $b (AC250 alone) - $none (opening the file, paid once)");
	# version 3: the lookups also read their footer chunks (a trail chunk and a page chunk
	# each, a few kB), which the open no longer does: an eighth of this 365 kB file
	cmp_ok($j->{$what} - $none, '<', $size / 8,
		"$table: the lookups fetched @{[$j->{$what} - $none]} bytes, a small fraction of the $size-byte file");
	my $single = tdb_scan_node($node, "SELECT * FROM $table WHERE callsign = 'AC007'");
	ok($single->{'Trail Ids Pushed Down'} eq q{callsign = 'AC007'::text} && !exists $single->{'Area Pushed Down'}
		  && !exists $single->{'Trail Lookups'}, "$table: a single id's EXPLAIN shows that id pushed down and nothing else")
	  or diag(explain $single);
	my $in = tdb_scan_node($node, "SELECT * FROM $table WHERE callsign IN ('AC007', 'AC250')");
	like($in->{'Trail Ids Pushed Down'}, qr/callsign = ANY/, "$table: an IN list is pushed down");
	is($in->{$what}, $a + $b - $none, "$table: and fetches the same $j->{$what} bytes");
}

# integer ids from an int4 outer side, an outer join, a semi join, a few hundred ids
my $q = q{SELECT count(*) FROM (VALUES (3), (77), (150)) w(id) JOIN %s v ON v.vid = w.id};
like($node->safe_psql('postgres', 'EXPLAIN (COSTS OFF) ' . sprintf($q, 'veh')), qr/Nested Loop.*Trail Ids Pushed Down: vid = \$/s,
	'int4 outer values join a bigint trail id by lookups');
is($node->safe_psql('postgres', sprintf($q, 'veh')), $node->safe_psql('postgres', sprintf($q, 'ev')), 'with the heap\'s count');
$q = q{SELECT count(*), count(v.vid) FROM (VALUES (3), (77), (9999)) w(id) LEFT JOIN %s v ON v.vid = w.id};
like($node->safe_psql('postgres', 'EXPLAIN (COSTS OFF) ' . sprintf($q, 'veh')), qr/Nested Loop Left Join.*Trail Ids Pushed Down: vid = \$/s,
	'a left join looks up each outer row');
is($node->safe_psql('postgres', sprintf($q, 'veh')), $node->safe_psql('postgres', sprintf($q, 'ev')), 'with the heap\'s counts');
$q = q{SELECT count(*), round(sum(speed)::numeric, 6) FROM %s t WHERE t.callsign IN (SELECT c FROM ids300)};
my $semi = $node->safe_psql('postgres', 'EXPLAIN (COSTS OFF) ' . sprintf($q, 'adsb'));
like($semi, qr/Nested Loop.*Trail Ids Pushed Down: callsign = \$/s, '300 ids from a table (IN (SELECT ...)) are looked up') or diag($semi);
is($node->safe_psql('postgres', sprintf($q, 'adsb')), $node->safe_psql('postgres', sprintf($q, 'ev')), 'with the heap\'s answer');
my $big = $node->safe_psql('postgres', q{EXPLAIN (COSTS OFF) SELECT count(*) FROM many g JOIN veh v ON v.vid = g.id});
unlike($big, qr/Trail Ids Pushed Down/, '100,000 outer ids (an analyzed table) are not looked up one by one: the file is scanned once')
  or diag($big);

# ids compared otherwise than byte for byte are not pruned by their bytes (both returned
# fewer rows than the heap before: the first none, the second none, the third none)
$node->safe_psql('postgres', qq{
CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE FOREIGN TABLE veh_text (vid text, ts timestamptz, geom geometry(Point, 4326), speed float8)
  SERVER s3 OPTIONS (url 's3://tap-join/veh.trail', id_column 'vid', time_column 'ts');
CREATE FOREIGN TABLE adsb_bigint (callsign bigint, ts timestamptz, geom geometry(Point, 4326), speed float8)
  SERVER s3 OPTIONS (url 's3://tap-join/adsb.trail', id_column 'callsign', time_column 'ts');
});

# A VALUES list's ids are known when the join is planned (issue 33): the first lookup
# fetches all their pages at once, in one job of concurrent GETs, not a round per lookup.
# NULLs, repeats and ids not in the file change nothing; a text id of an integer file
# counts only as its canonical decimal; a value computed per row leaves the lookups theirs.
{
	my $vq = q{SELECT count(*), round(sum(speed)::numeric, 6) FROM (VALUES %s) w(id) JOIN %s t ON t.vid = w.id};
	# three lookups at most: with more the whole file is fetched, fewer bytes than their round trips
	for my $c ([ q{(3), (NULL::int), (150)}, 2, '3, 150' ], [ q{(77), (77), (99999)}, 2, '77, 99999' ])
	{
		my ($vals, $n, $list) = @$c;
		my $vj = tdb_scan_node($node, 'SELECT t.* FROM (VALUES ' . $vals . ') w(id) JOIN veh t ON t.vid = w.id');
		is($vj->{'Trail Pages Fetched Ahead'}, "those of the $n ids of the outer VALUES list, at the first lookup",
			"VALUES $vals: the first lookup fetches the pages of its $n distinct ids") or diag(explain $vj);
		is($vj->{'Trail Lookups'}, 3, 'and each outer row is still looked up');
		# whole blocks of their pages (16 kB), and the footer chunks their ids are in
		my $in = tdb_scan_node($node, "SELECT * FROM veh WHERE vid IN ($list)")->{'Bytes From S3'};
		cmp_ok($vj->{'Bytes From S3'}, '<', $in + 16384, "about the bytes of IN ($list): $vj->{'Bytes From S3'} against $in");
		cmp_ok($vj->{'Bytes From S3'}, '<', $vj->{'File Size'} / 3, "a small part of the $vj->{'File Size'}-byte file");
		is($node->safe_psql('postgres', sprintf($vq, $vals, 'veh')), $node->safe_psql('postgres', sprintf($vq, $vals, 'ev')),
			'and the heap\'s rows');
	}
	my $one = tdb_scan_node($node, 'SELECT t.* FROM (VALUES (3), (3), (3)) w(id) JOIN veh t ON t.vid = w.id');
	is($one->{'Trail Pages Fetched Ahead'}, 'those of the 1 id of the outer VALUES list, at the first lookup',
		'one id three times: counted once');
	my $tq = q{SELECT count(*), round(sum(speed)::numeric, 6) FROM (VALUES ('3'), ('077'), ('150')) w(id) JOIN %s t ON t.vid = w.id};
	my $tj = tdb_scan_node($node, q{SELECT t.* FROM (VALUES ('3'), ('077'), ('150')) w(id) JOIN veh_text t ON t.vid = w.id});
	is($tj->{'Trail Pages Fetched Ahead'}, 'those of the 2 ids of the outer VALUES list, at the first lookup',
		"text ids of an integer file: '077' is no id's decimal");
	is($node->safe_psql('postgres', sprintf($tq, 'veh_text')),
		$node->safe_psql('postgres', sprintf($tq, '(SELECT vid::text AS vid, speed FROM ev)')), 'with the heap\'s rows');
	my $rj = tdb_scan_node($node, 'SELECT t.* FROM (VALUES (3), ((random() * 0)::int + 77)) w(id) JOIN veh t ON t.vid = w.id');
	isnt($rj->{'Trail Pages Fetched Ahead'} // '', 'those of the 2 ids of the outer VALUES list, at the first lookup',
		'a value computed per row: the ids are not known at planning');
	my $aj = tdb_scan_node($node, sprintf($join, 'adsb'));
	is($aj->{'Trail Pages Fetched Ahead'}, 'those of the 2 ids of the outer VALUES list, at the first lookup',
		'string ids from S3 too');
}
for my $w (q{callsign = 'ac007' COLLATE ci}, q{callsign IN ('ac007' COLLATE ci, 'Ac250')},
	q{callsign = ANY (SELECT lower(c) COLLATE ci FROM ids300 WHERE c < 'AC010')})
{
	is($node->safe_psql('postgres', "SELECT count(*), round(sum(speed)::numeric, 6) FROM adsb WHERE $w"),
		$node->safe_psql('postgres', "SELECT count(*), round(sum(speed)::numeric, 6) FROM ev WHERE $w"),
		"a case-insensitive collation's equality is the heap's: $w");
}
is($node->safe_psql('postgres', q{SELECT count(*) FROM (VALUES ('ac007' COLLATE ci)) v(c) JOIN adsb t ON t.callsign = v.c}),
	$node->safe_psql('postgres', q{SELECT count(*) FROM ev WHERE callsign = 'AC007'}), '  and in a join');
for my $w (q{vid = '3'}, q{vid = '03'}, q{vid IN ('3', '77', ' 4', '+5', 'x', NULL)}, q{vid = '-0'})
{
	(my $h = $w) =~ s/vid/vid::text/;
	is($node->safe_psql('postgres', "SELECT count(*) FROM veh_text WHERE $w"),
		$node->safe_psql('postgres', "SELECT count(*) FROM ev WHERE $h"),
		"a text column over integer ids: $w is the heap's");
}
is($node->safe_psql('postgres', q{SELECT count(*) FROM (VALUES ('3'), ('150')) v(c) JOIN veh_text t ON t.vid = v.c}),
	$node->safe_psql('postgres', q{SELECT count(*) FROM ev WHERE vid IN (3, 150)}), '  and in a join');
my $bigerr;
(undef, undef, $bigerr) = $node->psql('postgres', q{SELECT count(*) FROM adsb_bigint WHERE callsign = 7});
like($bigerr, qr/invalid input syntax for type bigint: "AC\d+"/,
	'a bigint column over string ids: callsign = 7 reads the ids as bigint, as a scan without the clause does (no 0 rows)');

# ---- 3. caches off: no byte fetched twice ---------------------------------------------------

for my $mem ('0', '64kB', '1MB')
{
	my $all = tdb_scan_node($node, 'SELECT * FROM adsb', "SET trafficdb.trail_memory_cache = '$mem'; ");
	is($all->{'Bytes From S3'}, $all->{'File Size'},
		"memory cache $mem, no disk cache: a full scan fetched $all->{'Bytes From S3'} bytes in $all->{Requests} requests, the file's size");
}

# ---- 2. revalidate_interval ----------------------------------------------------------------

$node->safe_psql('postgres', q{CREATE FUNCTION xj(q text) RETURNS json LANGUAGE plpgsql AS $$
DECLARE r json;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || q INTO r;
  RETURN r->0->'Plan';
END $$});
my $two = q{SELECT p->>'Requests', p->>'Bytes From S3', p->>'Object Validated' FROM (SELECT xj('SELECT * FROM veh WHERE vid = 42') p) s;
SELECT p->>'Requests', p->>'Bytes From S3', p->>'Object Validated' FROM (SELECT xj('SELECT * FROM veh WHERE vid = 42') p) s};
my @r = split /\n/, $node->safe_psql('postgres', $two);
is($r[1], '1|16384|by this query', 'revalidate_interval 0 (the default): a warm query still asks for size and ETag (1 request, the 16 kB tail)');
# the time the backend waited for S3, with the nodes' timing only (as track_io_timing's I/O Timings)
my ($wait, $wreq) = split /\|/, $node->safe_psql('postgres',
	q{SELECT p->>'Time Waiting For Reads', p->>'Requests' FROM (SELECT xj('SELECT * FROM veh WHERE vid = 42') p) s});
ok($wait =~ /^\d+\.\d{3}$/ && $wait > 0 && $wreq >= 1,
	"EXPLAIN ANALYZE: Time Waiting For Reads $wait ms for its $wreq request(s)");
unlike($node->safe_psql('postgres', 'EXPLAIN (ANALYZE, TIMING OFF, COSTS OFF) SELECT * FROM veh WHERE vid = 42'),
	qr/Time Waiting For Reads/, 'not with TIMING OFF (its value would vary from run to run)');
$node->safe_psql('postgres', q{ALTER SERVER s3 OPTIONS (ADD revalidate_interval '60')});
@r = split /\n/, $node->safe_psql('postgres', $two);
like($r[0], qr/^[1-9]\d*\|\d+\|by this query$/, 'revalidate_interval 60: the first query of a session asks');
like($r[1], qr/^0\|0\|\d+ s earlier \(revalidate_interval\)$/, 'a second query within 60 s sends no request at all');
$node->safe_psql('postgres', q{ALTER SERVER s3 OPTIONS (DROP revalidate_interval)});

# ---- the writer's defaults: count(*) from the footer's head ------------------------------
# (version 3 with every default: the head is in the pager's first request, the 16 KiB tail,
# as test_footer3.c's test_s3_v3_footer_bytes_do_not_grow counts; the FDW answers count(*)
# from it when planning, so executing the plan fetches nothing more)
$node->safe_psql('postgres', q{
SELECT trafficdb.trail_write('SELECT callsign, ts, geom, speed FROM ev', 's3://tap-join/defaults.trail', server => 's3',
  id_column => 'callsign', time_column => 'ts');
CREATE FOREIGN TABLE dflt (callsign text, ts timestamptz, geom geometry(Point, 4326), speed float8)
  SERVER s3 OPTIONS (url 's3://tap-join/defaults.trail', id_column 'callsign', time_column 'ts')});
my ($dagg, $dreq, $dbytes, $dsize) = split /\|/, $node->safe_psql('postgres',
	q{SELECT p->>'Aggregates From Footer', p->>'Requests', p->>'Bytes From S3', p->>'File Size' FROM (SELECT xj('SELECT count(*) FROM dflt') p) s});
is($dagg, 'count(*)', "the defaults' file ($dsize bytes): count(*) answered from the footer");
is("$dreq|$dbytes", '0|0', 'executing it fetched nothing beyond the open');
is($node->safe_psql('postgres', 'SELECT count(*) FROM dflt'), $node->safe_psql('postgres', 'SELECT count(*) FROM ev'),
	'and counted every event');
my ($rc, $out, $err) = $node->psql('postgres', q{ALTER SERVER s3 OPTIONS (ADD revalidate_interval '-1')});
like($err, qr/invalid value for option "revalidate_interval": "-1"/, 'a negative interval is refused');

# replacing the object: 100 vehicles, then 50, at the same key; a table option of 60 s
$node->safe_psql('postgres', q{SELECT trafficdb.trail_write('SELECT vid, ts, geom, speed FROM ev WHERE vid <= 100',
  's3://tap-join/replaced.trail', server => 's3', id_column => 'vid', time_column => 'ts', page_size => 4096);
  CREATE FOREIGN TABLE replaced (vid bigint, ts timestamptz, geom geometry(Point, 4326), speed float8)
    SERVER s3 OPTIONS (url 's3://tap-join/replaced.trail', id_column 'vid', time_column 'ts', revalidate_interval '60')});
my $n100 = $node->safe_psql('postgres', 'SELECT count(*) FROM ev WHERE vid <= 100');
my $n50 = $node->safe_psql('postgres', 'SELECT count(*) FROM ev WHERE vid <= 50');
# (count(*) would come from the footer, which the process remembers with the
# tail for the interval: a consistent old version, no page fetched; here the
# pages are read)
($rc, $out, $err) = $node->psql('postgres', q{
SET trafficdb.trail_footer_aggregates = off;
SELECT 'before', count(*) FROM replaced;
SELECT 'written', trafficdb.trail_write('SELECT vid, ts, geom, speed FROM ev WHERE vid <= 50',
  's3://tap-join/replaced.trail', server => 's3', id_column => 'vid', time_column => 'ts', page_size => 4096);
SELECT 'cached', count(*) FROM replaced;
SET trafficdb.trail_memory_cache = 0;
SELECT 'uncached', count(*) FROM replaced;
SELECT 'next', count(*) FROM replaced;
RESET trafficdb.trail_memory_cache;
SELECT trafficdb.trail_write('SELECT vid, ts, geom, speed FROM ev WHERE vid <= 100',
  's3://tap-join/replaced.trail', server => 's3', id_column => 'vid', time_column => 'ts', page_size => 4096);
ALTER FOREIGN TABLE replaced OPTIONS (SET revalidate_interval '1');
SELECT pg_sleep(1.5);
SELECT 'after the interval', count(*) FROM replaced;
}, on_error_stop => 0);
like($out, qr/^before\|$n100$/m, "a table of revalidate_interval 60 reads $n100 events");
like($out, qr/^cached\|$n100$/m, 'replaced within the interval: the old version, whole, from the memory cache');
unlike($out, qr/^uncached\|/m, 'a byte that must come from S3 for the old version is not read from the new one');
like($err, qr/ERROR:  could not read trail file "s3:\/\/tap-join\/replaced.trail": .*replaced.*within the revalidation interval/,
	'it is an error naming the interval (SQLSTATE 40001, rerun the query)');
like($out, qr/^next\|$n50$/m, "the next query reads the new version ($n50 events)");
like($out, qr/^after the interval\|$n100$/m, 'replaced again, then read after the interval (1 s): the newest version');

$node->stop;
done_testing();
