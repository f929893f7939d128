# t/081_trail_join_pages.pl: issue 33 item 4 against a real MinIO on
# 127.0.0.1 (scripts/tap.sh with TAP_MINIO=1: MINIO_ENDPOINT, its
# credentials, tdb_fault_proxy a fault proxy of its own).
#
# A join on 100 trail ids is a nested loop of 100 lookups.  In space-time
# order a page holds several trails, and each lookup used to fetch and
# decode again the pages the lookups before it had read (1,163 page reads
# of a 483-page file on real flights).  Now the lookups of one statement
# share the pages they decoded (trafficdb.trail_page_cache):
# 1. the join returns exactly the heap's rows, in both orders;
# 2. its Trail Pages Read is at most the number of distinct pages the 100
#    ids need (what the same ids as one IN list read), and pages read plus
#    pages reused is what the lookups read one by one without the cache
#    (which reads more: the check bites without the sharing); in space-time
#    order, where 100 of 300 trails need nearly every page, the first lookup
#    fetches them all, in fewer requests than the lookups one by one; in
#    trail order too, since the file is smaller than 100 round trips are
#    worth (each lookup fetched its own pages, a round trip each: 4x
#    DuckDB's time on real AIS), unless the memory cache has no room for it;
# 3. a tiny bound (1 kB) still returns the exact rows and holds no more;
# 4. statement_timeout interrupts a long join in the middle, at a stalled
#    GET of a later lookup.
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

tdb_make_bucket('tap-join-pages');

my $node = tdb_node('trail_join_pages');
$node->safe_psql('postgres', qq{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE SERVER s3 FOREIGN DATA WRAPPER trafficdb_trails
  OPTIONS (endpoint '$endpoint', region 'us-east-1', block_size '16kB', cache_dir 'none');
CREATE USER MAPPING FOR CURRENT_USER SERVER s3 OPTIONS (access_key '$user', secret_key '$secret');

-- 300 flights by callsign, 100 to 149 events each, overlapping in time and place
CREATE TABLE ev AS
SELECT 'AC' || lpad(v::text, 3, '0') AS callsign,
  '2024-03-01 00:00:00+00'::timestamptz + (v * 37 % 3600) * interval '1 s' + i * interval '47 s' AS ts,
  ST_SetSRID(ST_MakePoint(round((24.5 + (v % 20) * 0.05 + i * 0.0003 * sin(v))::numeric, 7)::float8,
                          round((60.1 + (v / 20) * 0.03 + i * 0.0002 * cos(v))::numeric, 7)::float8), 4326) AS geom,
  round((10 + 5 * sin(i / 7.0 + v))::numeric, 2)::float8 AS speed,
  (v * 13 + i) % 7 AS alt
FROM generate_series(1, 300) v, generate_series(0, 99 + v % 50) i;
SELECT trafficdb.trail_write('SELECT callsign, ts, geom, speed, alt FROM ev', 's3://tap-join-pages/st.trail',
  server => 's3', id_column => 'callsign', time_column => 'ts', page_size => 4096, page_order => 'space-time');
SELECT trafficdb.trail_write('SELECT callsign, ts, geom, speed, alt FROM ev', 's3://tap-join-pages/tr.trail',
  server => 's3', id_column => 'callsign', time_column => 'ts', page_size => 4096);
CREATE FOREIGN TABLE st (callsign text, ts timestamptz, geom geometry(Point, 4326), speed float8, alt bigint)
  SERVER s3 OPTIONS (url 's3://tap-join-pages/st.trail', id_column 'callsign', time_column 'ts');
CREATE FOREIGN TABLE tr (callsign text, ts timestamptz, geom geometry(Point, 4326), speed float8, alt bigint)
  SERVER s3 OPTIONS (url 's3://tap-join-pages/tr.trail', id_column 'callsign', time_column 'ts');
-- 100 of the ids, spread over them, in an order that jumps about; and one that is not in the file
CREATE TABLE ids AS SELECT 'AC' || lpad((1 + (k * 137) % 300)::text, 3, '0') AS c FROM generate_series(0, 99) k
  UNION ALL SELECT 'NONE';
ANALYZE ev, ids;
});

sub digest
{
	my ($sql, $pre) = @_;
	return $node->safe_psql('postgres', ($pre // '')
		  . "SELECT count(*) || ':' || coalesce(md5(string_agg(format('%s|%s|%s|%s|%s', callsign, ts, encode(ST_AsEWKB(geom), 'hex'), speed, alt), ',' ORDER BY callsign, ts)), '-') FROM ($sql) q");
}

my $join = 'SELECT t.* FROM ids i JOIN %s t ON t.callsign = i.c';
my $heap = digest(sprintf($join, 'ev'));
like($heap, qr/^\d{5}:/, "the heap's join: $heap");

for my $t ('st', 'tr')
{
	my $plan = $node->safe_psql('postgres', 'EXPLAIN (COSTS OFF) ' . sprintf($join, $t));
	like($plan, qr/Nested Loop.*Foreign Scan on $t t.*Trail Ids Pushed Down: callsign = \$\d+ \(the outer row's value/s,
		"$t: the join on 101 ids is a nested loop of lookups") or diag($plan);

	# ---- 1. exact rows --------------------------------------------------------------------------
	is(digest(sprintf($join, $t)), $heap, "$t: the join returns exactly the heap's rows");
	is(digest(sprintf($join, $t), q{SET trafficdb.trail_page_cache = 0; }), $heap, "$t: and without the page cache");

	# ---- 2. each page needed read once ----------------------------------------------------------------
	my $j = tdb_scan_node($node, sprintf($join, $t));
	my $old = tdb_scan_node($node, sprintf($join, $t), q{SET trafficdb.trail_page_cache = 0; });
	my $one = $node->safe_psql('postgres', q{SELECT array_agg(c) FROM ids});
	my $in = tdb_scan_node($node, sprintf(q{SELECT * FROM %s WHERE callsign = ANY ('%s'::text[])}, $t, $one));
	my $needed = $in->{'Trail Pages Read'};
	is($j->{'Trail Lookups'}, 101, "$t: 101 lookups");
	cmp_ok($needed, '>', 0, "$t: the 100 ids need $needed distinct pages of $in->{'Trail Pages In File'}");
	cmp_ok($j->{'Trail Pages Read'}, '<=', $needed,
		"$t: the join read $j->{'Trail Pages Read'} pages, at most the $needed distinct pages needed");
	is($j->{'Trail Pages Read'} + $j->{'Trail Pages Reused'}, $old->{'Trail Pages Read'},
		"$t: read $j->{'Trail Pages Read'} + reused $j->{'Trail Pages Reused'} = the $old->{'Trail Pages Read'} page reads of the lookups one by one");
	ok(!exists $old->{'Trail Pages Reused'}, "$t: trail_page_cache = 0 shares nothing");
	# (in trail order the first lookup reads the small file whole: its size at most)
	my $most = $t eq 'tr' && $j->{'File Size'} > $old->{'Bytes From S3'} ? $j->{'File Size'} : $old->{'Bytes From S3'};
	cmp_ok($j->{'Bytes From S3'}, '<=', $most,
		"$t: and fetched $j->{'Bytes From S3'} bytes from S3, no more than the $old->{'Bytes From S3'} without (or the file)");
	if ($t eq 'st')
	{
		cmp_ok($old->{'Trail Pages Read'}, '>', $needed,
			"st: without the sharing the lookups read $old->{'Trail Pages Read'} pages, more than the $needed needed (the bug)");
		# 101 lookups of 300 trails need nearly every page: all fetched at the first lookup
		is($j->{'Trail Pages Fetched Ahead'}, 'those of all 101 lookups expected, at the first',
			'st: the first lookup fetched the pages of all of them');
		cmp_ok($j->{Requests}, '<', $old->{Requests},
			"st: in $j->{Requests} requests, where the lookups one by one sent $old->{Requests}");
	}
	else
	{
		is($j->{'Trail Pages Reused'}, 0, 'tr: in trail order no lookup needs another\'s page');
		# a third of the pages, but the file is smaller than the 100 later lookups' round trips
		# are worth (64 kB each): all of it at the first lookup; it was a GET per lookup
		cmp_ok($j->{'File Size'}, '<', 100 * 64 * 1024, "tr: the file is $j->{'File Size'} bytes");
		is($j->{'Trail Pages Fetched Ahead'}, 'those of all 101 lookups expected, at the first',
			'tr: a small file: the first lookup fetched the pages of all of them');
		cmp_ok($j->{Requests}, '<', $old->{Requests},
			"tr: in $j->{Requests} requests, where the lookups one by one sent $old->{Requests}");
		# three round trips: the tail, every trail and page entry with the first lookup's own in one
		# GET, then the pages (it was five before them: the first id's trail chunk, its page chunks,
		# the other trail chunks, the other page chunks, one after the other)
		is($j->{Requests}, 3, 'tr: the join sent 3 requests: the tail, the footer\'s entries, the pages');
		# with room for less than the file (the memory cache's half), each lookup its own
		my $room = tdb_scan_node($node, sprintf($join, $t), q{SET trafficdb.trail_memory_cache = '128kB'; });
		is($room->{'Trail Pages Fetched Ahead'}, "each lookup's own",
			'tr: a memory cache too small for the file: each lookup fetches its own');
		is(digest(sprintf($join, $t), q{SET trafficdb.trail_memory_cache = '128kB'; }), $heap,
			"tr: and the join's rows are the heap's");
	}

	# ---- 3. a tiny bound ----------------------------------------------------------------------------
	is(digest(sprintf($join, $t), q{SET trafficdb.trail_page_cache = '1kB'; }), $heap, "$t: a 1 kB page cache: the exact rows");
	my $tiny = tdb_scan_node($node, sprintf($join, $t), q{SET trafficdb.trail_page_cache = '1kB'; });
	cmp_ok($tiny->{'Trail Page Cache Peak'}, '<=', 1024, "$t: the 1 kB cache held at most $tiny->{'Trail Page Cache Peak'} bytes");
	my $small = tdb_scan_node($node, sprintf($join, $t), q{SET trafficdb.trail_page_cache = '64kB'; });
	cmp_ok($small->{'Trail Page Cache Peak'}, '<=', 65536, "$t: a 64 kB cache held at most $small->{'Trail Page Cache Peak'} bytes");
	is($small->{'Trail Pages Read'} + $small->{'Trail Pages Reused'}, $old->{'Trail Pages Read'}, "$t: every page read or reused");
	is(digest(sprintf($join, $t), q{SET trafficdb.trail_page_cache = '64kB'; }), $heap, "$t: and the exact rows");
}

# hostile settings
my ($rc, $out, $err) = $node->psql('postgres', q{SET trafficdb.trail_page_cache = -1});
like($err, qr/-1 .*outside the valid range/, 'a negative page cache is refused');

# ---- 4. cancel in the middle of a long join ------------------------------------------------------
$node->safe_psql('postgres', qq{CREATE SERVER slow FOREIGN DATA WRAPPER trafficdb_trails
  OPTIONS (endpoint '$proxy', block_size '16kB', cache_dir 'none', retries '0');
  CREATE USER MAPPING FOR CURRENT_USER SERVER slow OPTIONS (access_key '$user', secret_key '$secret');
  CREATE FOREIGN TABLE slow_tr (callsign text, ts timestamptz, geom geometry(Point, 4326), speed float8, alt bigint)
    SERVER slow OPTIONS (url 's3://tap-join-pages/tr.trail', id_column 'callsign', time_column 'ts')});
sub proxy_count
{
	my $n = `curl -fs '$proxy/__fault__/count'`;
	die 'could not ask the proxy' if $? != 0;
	chomp $n;
	return $n;
}
# the open (the tail) and 5 lookups' requests pass, then a GET stalls for 8 s mid-body
system('curl', '-fs', '-o', '/dev/null', "$proxy/__fault__?plan=ok,ok,ok,ok,ok,ok,stall") == 0 or die 'could not arm the proxy';
my $before = proxy_count();
my $t0 = time();
($rc, $out, $err) = $node->psql('postgres',
	q{SET statement_timeout = '1s'; SET trafficdb.trail_memory_cache = 0; SELECT count(*) FROM ids i JOIN slow_tr t ON t.callsign = i.c});
my $took = time() - $t0;
my $sent = proxy_count() - $before;
like($err, qr/statement timeout/, 'statement_timeout interrupts the join');
cmp_ok($took, '<', 3.5, sprintf('within %.2f s (the stall lasts 8 s)', $took));
cmp_ok($sent, '>=', 7, "in the middle of the join: $sent requests had been sent, the 7th stalled");
is(digest(sprintf($join, 'slow_tr')), $heap, 'the same join reads fine afterwards');

$node->stop;
done_testing();
