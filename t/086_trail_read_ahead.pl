# t/086_trail_read_ahead.pl: how a scan of a trail file in S3 fetches its
# pages, against a real MinIO on 127.0.0.1 (scripts/tap.sh with
# TAP_MINIO=1).
#
# A scan that will read every row it finds (no LIMIT, no cursor) announces
# all its pages at once, gaps bridged: one round of concurrent range GETs.
# It used to announce them in windows of 4, 8, 16 .. pages, a round each,
# as a scan that may stop early still does (a LIMIT, a cursor, EXISTS), so
# that stopping leaves little fetched for nothing.  And a full scan under a
# LIMIT no longer loads the whole version-3 footer first (the FDW never
# told the reader about the LIMIT):
# 1. a box: exact rows both ways; without LIMIT fewer requests than under a
#    LIMIT it never reaches (which reads the same pages window by window),
#    and at most half as many bytes more (the bridged gaps, the smallest
#    first);
# 2. a cursor fetching 10 rows, and LIMIT 10: a handful of requests, a
#    small part of the file;
# 3. prepared statements run with and without LIMIT keep the rows exact;
# 4. the pages are fetched in a thread of the backend's while it decodes
#    those before (the pager's read-ahead thread): statement_timeout and
#    pg_cancel_backend interrupt a scan whose thread is stuck in a stalled
#    response within a second or two, and the backend then reads the same
#    file exactly.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use lib 't';
use TdbTest;

my $endpoint = $ENV{MINIO_ENDPOINT} // die 'MINIO_ENDPOINT must name the MinIO of scripts/tap.sh (TAP_MINIO=1)';
my $user = $ENV{MINIO_ROOT_USER} // die 'MINIO_ROOT_USER unset';
my $secret = $ENV{MINIO_ROOT_PASSWORD} // die 'MINIO_ROOT_PASSWORD unset';
my $proxy = tdb_fault_proxy();

tdb_make_bucket('tap-read-ahead');

my $node = tdb_node('trail_read_ahead');
$node->safe_psql('postgres', qq{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE SERVER s3 FOREIGN DATA WRAPPER trafficdb_trails
  OPTIONS (endpoint '$endpoint', region 'us-east-1', cache_dir 'none');
CREATE USER MAPPING FOR CURRENT_USER SERVER s3 OPTIONS (access_key '$user', secret_key '$secret');

-- 20 flights of 20,000 to 20,190 events each, from west to east over 5 degrees: each
-- crosses the box for a twenty-fifth of its length (in the middle of its pages, trail order)
CREATE TABLE ev AS
SELECT 'AC' || lpad(v::text, 3, '0') AS callsign,
  '2024-03-01 00:00:00+00'::timestamptz + (v * 37 % 3600) * interval '1 s' + i * interval '5 s' AS ts,
  ST_SetSRID(ST_MakePoint(round((22.5 + (v % 8) * 0.01 + i * 0.00025)::numeric, 7)::float8,
                          round((60.1 + (v / 8) * 0.05 + 0.01 * sin(i / 50.0 + v))::numeric, 7)::float8), 4326) AS geom,
  round((10 + 5 * sin(i / 7.0 + v))::numeric, 2)::float8 AS speed,
  (v * 13 + i) % 7 AS alt
FROM generate_series(1, 20) v, generate_series(0, 19999 + v * 10) i;
SELECT trafficdb.trail_write('SELECT callsign, ts, geom, speed, alt FROM ev', 's3://tap-read-ahead/tr.trail',
  server => 's3', id_column => 'callsign', time_column => 'ts', page_size => 4096);
CREATE FOREIGN TABLE tr (callsign text, ts timestamptz, geom geometry(Point, 4326), speed float8, alt bigint)
  SERVER s3 OPTIONS (url 's3://tap-read-ahead/tr.trail', id_column 'callsign', time_column 'ts');
ANALYZE ev;
});

sub digest
{
	my ($sql) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) || ':' || coalesce(md5(string_agg(format('%s|%s|%s|%s|%s', callsign, ts, encode(ST_AsEWKB(geom), 'hex'), speed, alt), ',' ORDER BY callsign, ts)), '-') FROM ($sql) q");
}

my $box = q{geom && ST_MakeEnvelope(25.0, 60.0, 25.8, 60.5, 4326)};

# ---- 1. a box, read to its end ------------------------------------------------------------------
my $heap = digest("SELECT * FROM ev WHERE $box");
like($heap, qr/^\d{5,}:/, "the heap's box: $heap");
is(digest("SELECT * FROM tr WHERE $box"), $heap, 'the box without LIMIT: exactly the heap\'s rows');
is(digest("SELECT * FROM tr WHERE $box LIMIT 1000000"), $heap, 'under a LIMIT it never reaches: the same rows');

my $all = tdb_scan_node($node, "SELECT * FROM tr WHERE $box");
my $win = tdb_scan_node($node, "SELECT * FROM tr WHERE $box LIMIT 1000000");
my $file = tdb_scan_node($node, 'SELECT * FROM tr');
note("box: $all->{'Trail Read-Ahead Windows'} / $win->{'Trail Read-Ahead Windows'} windows, $all->{'Trail Pages Read'} of $all->{'Trail Pages In File'} pages; without LIMIT $all->{Requests} requests, "
	  . "$all->{'Bytes From S3'} bytes; under LIMIT $win->{Requests}, $win->{'Bytes From S3'}; the file: $file->{'Bytes From S3'}");
cmp_ok($all->{'Trail Pages Read'}, '>', 64, 'the box reads more pages than the first windows hold (4 + 8 + 16 + 32)');
cmp_ok($all->{'Trail Pages Read'}, '<', $all->{'Trail Pages In File'} / 2, 'and fewer than half the file\'s');
is($all->{'Trail Pages Read'}, $win->{'Trail Pages Read'}, 'both read the same pages');
is($all->{'Trail Read-Ahead Windows'}, 1, 'read to its end, the box announces its pages in one window (one round of GETs)');
cmp_ok($win->{'Trail Read-Ahead Windows'}, '>=', 4, "under a LIMIT, in $win->{'Trail Read-Ahead Windows'} windows that grow");
cmp_ok($all->{Requests}, '<=', $win->{Requests},
	"and in $all->{Requests} requests, no more than the $win->{Requests} of windows that may stop");
cmp_ok($all->{'Bytes From S3'}, '<=', 1.5 * $win->{'Bytes From S3'} + 64 * 1024,
	'and fetches at most half as many bytes more (gaps bridged, a block each side)');
cmp_ok($all->{'Bytes From S3'}, '<', $file->{'Bytes From S3'}, 'still less than the whole file');

# ---- 2. stopping early ------------------------------------------------------------------------------
my $lim = tdb_scan_node($node, 'SELECT * FROM tr LIMIT 10');
note("LIMIT 10: $lim->{Requests} requests, $lim->{'Bytes From S3'} bytes");
cmp_ok($lim->{Requests}, '<=', 4, 'LIMIT 10 on the whole file: the footer\'s head and a first window');
cmp_ok($lim->{'Bytes From S3'}, '<', $file->{'Bytes From S3'} / 10, 'a tenth of the file at most');
my $cur = $node->safe_psql('postgres', q{
BEGIN;
DECLARE c CURSOR FOR SELECT callsign, ts FROM tr WHERE } . $box . q{;
FETCH 10 FROM c;
COMMIT;});
is(scalar(split /\n/, $cur), 10, 'a cursor fetches its first 10 rows');
is(digest("SELECT * FROM tr WHERE $box LIMIT 10"), digest("SELECT * FROM (SELECT * FROM tr WHERE $box) x LIMIT 10"),
	'LIMIT 10 in a subquery and outside agree');
is($node->safe_psql('postgres', "SELECT count(*) FROM (SELECT * FROM tr WHERE $box LIMIT 10) x"), '10', 'LIMIT 10 returns 10 rows');
is($node->safe_psql('postgres', "SELECT EXISTS (SELECT 1 FROM tr WHERE $box)"), 't', 'EXISTS finds a row');

# ---- 3. prepared, with and without a LIMIT ----------------------------------------------------------
is($node->safe_psql('postgres', qq{
PREPARE p(int) AS SELECT count(*) FROM (SELECT * FROM tr WHERE $box LIMIT \$1) x;
PREPARE q AS SELECT count(*) FROM tr WHERE $box;
EXECUTE p(5); EXECUTE p(100000); EXECUTE q; EXECUTE q; EXECUTE q; EXECUTE q; EXECUTE q; EXECUTE q;}),
	join("\n", 5, ($heap =~ /^(\d+)/) x 7), 'prepared statements, generic plans included: exact counts');

# ---- 4. interrupts while the read-ahead thread waits on a stalled response -------------------------
$node->safe_psql('postgres', qq{CREATE SERVER slow FOREIGN DATA WRAPPER trafficdb_trails
  OPTIONS (endpoint '$proxy', cache_dir 'none', retries '0');
  CREATE USER MAPPING FOR CURRENT_USER SERVER slow OPTIONS (access_key '$user', secret_key '$secret');
  CREATE FOREIGN TABLE slow_tr (callsign text, ts timestamptz, geom geometry(Point, 4326), speed float8, alt bigint)
    SERVER slow OPTIONS (url 's3://tap-read-ahead/tr.trail', id_column 'callsign', time_column 'ts')});
# the open's requests (the tail, the footer's chunks) pass, then every GET stalls for 8 s mid-body
my $stalls = 'ok,ok,ok,ok,' . join(',', ('stall') x 12);
system('curl', '-fs', '-o', '/dev/null', "$proxy/__fault__?plan=$stalls") == 0 or die 'could not arm the proxy';
my $t0 = time();
my ($rc, $out, $err) = $node->psql('postgres', "SET statement_timeout = '1s'; SELECT count(*) FROM slow_tr WHERE $box");
my $took = time() - $t0;
like($err, qr/statement timeout/, 'statement_timeout interrupts a scan whose pages stall');
cmp_ok($took, '<', 3.5, sprintf('within %.2f s (each stall lasts 8 s)', $took));

system('curl', '-fs', '-o', '/dev/null', "$proxy/__fault__?plan=$stalls") == 0 or die 'could not arm the proxy';
my $bg = $node->background_psql('postgres', on_error_stop => 0);
$bg->query_until(qr/started/, "\\echo started\nSELECT count(*) FROM slow_tr WHERE $box;\n");
my $pid;
for (1 .. 100)
{
	$pid = $node->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE query LIKE 'SELECT count(*) FROM slow_tr%' AND state = 'active'});
	last if $pid;
	select(undef, undef, undef, 0.05);
}
ok($pid, "the scan runs in backend $pid");
select(undef, undef, undef, 0.5);
$t0 = time();
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid AND state = 'active'"),
	'pg_cancel_backend ends it');
$took = time() - $t0;
cmp_ok($took, '<', 3, sprintf('within %.2f s', $took));
$bg->quit;
system('curl', '-fs', '-o', '/dev/null', "$proxy/__fault__?plan=") == 0 or die 'could not disarm the proxy';
is(digest("SELECT * FROM slow_tr WHERE $box"), $heap, 'the same scan reads fine afterwards, in a new backend');
is($node->safe_psql('postgres', "SET statement_timeout = '1s'; SELECT count(*) FROM slow_tr WHERE $box"), ($heap =~ /^(\d+)/)[0],
	'and in a backend that was interrupted before');

$node->stop;
done_testing();
