# t/085_trail_v3_hostile.pl: version-3 trail footers (issue 33) attacked from
# SQL by a role without superuser, against a real MinIO on 127.0.0.1
# (scripts/tap.sh with TAP_MINIO=1: MINIO_ENDPOINT, its credentials,
# tdb_fault_proxy a fault proxy of its own).
#
# 1. Crafted files, t/hostile3/*.trail (written by
#    src/trail/tests/test_footer3_hostile.c with TRAIL_HOSTILE_OUT=t/hostile3:
#    a valid file's footer re-encoded with one lie and every CRC valid):
#    count(*) is the head's; a query that reads the lie is a clean
#    "corrupted" error, never rows (they answered 0 rows, 4 of 5 rows, and
#    another trail's events as their own before the fixes); a head total past
#    2^63 (count(*) from the head alone was negative) is refused.
# 2. A valid file of 5,000 trails: id = ANY(arrays with NULLs, duplicates,
#    100,000 elements, NULL), GROUP BY id aggregates and a join with the
#    page cache off and at its maximum all give exactly the heap's rows.
# 3. statement_timeout interrupts a lookup whose trail chunk GET stalls (the
#    tail reused within revalidate_interval, so the chunk is the first GET),
#    and the table reads fine afterwards.
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
my $bucket = 'tap-hostile3';

tdb_make_bucket($bucket);
my @crafted = ('list_of_another_trail', 'list_missing_a_page', 'run_outside_range');
for my $f (@crafted, 'count_past_2_63')
{
	system('curl', '-fsS', '--aws-sigv4', 'aws:amz:us-east-1:s3', '--user', "$user:$secret",
		'-H', 'x-amz-content-sha256: UNSIGNED-PAYLOAD', '-T', "t/hostile3/$f.trail",
		"$endpoint/$bucket/$f.trail") == 0
	  or die "could not upload t/hostile3/$f.trail";
}

my $node = tdb_node('trail_v3_hostile');
$node->safe_psql('postgres', qq{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE SERVER s3 FOREIGN DATA WRAPPER trafficdb_trails
  OPTIONS (endpoint '$endpoint', region 'us-east-1', block_size '16kB', cache_dir 'none');
CREATE USER MAPPING FOR CURRENT_USER SERVER s3 OPTIONS (access_key '$user', secret_key '$secret');
-- 5,000 trails of 3 to 5 events: trail chunks well before the last 16 kB
CREATE TABLE ev AS
SELECT v::bigint AS id, '2024-03-01 00:00:00+00'::timestamptz + (v % 600) * interval '1 s' + i * interval '30 s' AS ts,
  ST_SetSRID(ST_MakePoint(24.5 + (v % 50) * 0.01 + i * 0.001, 60.1 + (v / 50) * 0.001), 4326) AS geom,
  round((10 + 5 * sin(i + v))::numeric, 2)::float8 AS speed, (v * 7 + i) % 5 AS alt
FROM generate_series(1, 5000) v, generate_series(0, 2 + v % 3) i;
SELECT trafficdb.trail_write('SELECT id, ts, geom, speed, alt FROM ev', 's3://$bucket/ev.trail',
  server => 's3', id_column => 'id', time_column => 'ts', page_size => 4096, page_order => 'space-time');
ANALYZE ev;
CREATE ROLE mallory LOGIN;
CREATE SCHEMA m AUTHORIZATION mallory;
GRANT USAGE ON FOREIGN SERVER s3 TO mallory;
GRANT SELECT ON ev TO mallory;
CREATE USER MAPPING FOR mallory SERVER s3 OPTIONS (access_key '$user', secret_key '$secret');
});
$node->safe_psql('postgres', qq{
CREATE FOREIGN TABLE m.t (id bigint, ts timestamptz, geom geometry(Point, 4326), speed float8, alt bigint)
  SERVER s3 OPTIONS (url 's3://$bucket/ev.trail', id_column 'id', time_column 'ts');
} . join('', map { qq{CREATE FOREIGN TABLE m.$_ (id bigint, t timestamptz, c0 bigint, c1 bigint)
  SERVER s3 OPTIONS (url 's3://$bucket/$_.trail', id_column 'id', time_column 't');
} } @crafted), extra_params => [ '-U', 'mallory' ]);

sub as_mallory
{
	my ($sql) = @_;
	return $node->psql('postgres', $sql, extra_params => [ '-U', 'mallory' ]);
}

# 1. crafted files: the head's count; the lie, where read, a clean error
for my $f (@crafted)
{
	my ($rc, $out, $err) = as_mallory("SELECT count(*) FROM m.$f");
	is($out, '15', "$f: count(*) is the head's total");
}
my %lie = (
	list_of_another_trail => [ 'SELECT t FROM m.list_of_another_trail WHERE id = 1', qr/trail 0 names page 3, whose trails are 1 to 1/ ],
	list_missing_a_page => [ 'SELECT t FROM m.list_missing_a_page WHERE id = ANY(ARRAY[1, NULL, 1])', qr/pages hold 4 of its events, the footer says 5/ ],
	# a full scan loads every footer chunk first: the page list's check sees the lie before the page's
	run_outside_range => [ 'SELECT id, t FROM m.run_outside_range',
		qr/a run outside the page's trail range|trail 1 names page 3, whose trails are 0 to 0/ ]);
for my $f (@crafted)
{
	my ($sql, $re) = @{ $lie{$f} };
	my ($rc, $out, $err) = as_mallory($sql);
	isnt($rc, 0, "$f: the query that reads the lie fails") or diag("rows: $out");
	like($err, qr/corrupted trail file/, "$f: as a corrupted file");
	like($err, $re, "$f: naming the lie");
	($rc, $out, $err) = as_mallory($sql);
	like($err, $re, "$f: and again when asked again");
}
# a head whose total passes 2^63 (count(*) from the head was negative): refused at open
$node->safe_psql('postgres', qq{CREATE FOREIGN TABLE m.count_past_2_63 (id bigint, t timestamptz) SERVER s3
  OPTIONS (url 's3://$bucket/count_past_2_63.trail', id_column 'id', time_column 't')}, extra_params => [ '-U', 'mallory' ]);
for my $sql ('SELECT count(*) FROM m.count_past_2_63', 'SELECT count(*) FROM m.count_past_2_63 WHERE id = 1')
{
	my ($rc, $out, $err) = as_mallory($sql);
	like($err, qr/corrupted trail file footer: bad event count of a chunk/, "$sql: refused") or diag("rows: $out");
}
is((as_mallory('SELECT 1'))[1], '1', 'the backend survived them');

# 2. a valid file: exactly the heap's rows
sub digest
{
	my ($from, $where, $pre) = @_;
	my ($rc, $out, $err) = as_mallory(($pre // '') . "SELECT count(*) || ':' || coalesce(md5(string_agg(format('%s|%s|%s|%s|%s', id, ts, "
		  . "encode(ST_AsEWKB(geom), 'hex'), speed, alt), ',' ORDER BY id, ts)), '-') FROM $from WHERE $where");
	diag($err) if $rc;
	return $out;
}
for my $w ("id = ANY('{17,NULL,17,4999,NULL,123456789}'::bigint[])",
	"id = ANY(ARRAY(SELECT g FROM generate_series(-50000, 49999) g))",
	"id = ANY(ARRAY(SELECT 2500 FROM generate_series(1, 100000)))",
	"id = ANY(NULL::bigint[])",
	"id IN (1, 1, 5000, 5001, NULL)")
{
	is(digest('m.t', $w), digest('ev', $w), "WHERE $w: the heap's rows");
}
my $agg = 'SELECT id, count(*), min(ts), max(ts), max(speed), min(alt) FROM %s %s GROUP BY id ORDER BY id';
for my $w ('', 'WHERE id = ANY(ARRAY[3, NULL, 3, 4000, -1])')
{
	my ($rc, $trail, $err) = as_mallory(sprintf($agg, 'm.t', $w));
	my (undef, $heap) = as_mallory(sprintf($agg, 'ev', $w));
	is($trail, $heap, "GROUP BY id $w: the heap's aggregates") or diag($err);
}
my $join = 'SELECT t.* FROM (SELECT (k * 7919) % 5003 AS c FROM generate_series(0, 199) k) i JOIN %s t ON t.id = i.c';
my $heap = digest('(' . sprintf($join, 'ev') . ') q', 'true');
for my $kb (0, 2**30 - 1)
{
	is(digest('(' . sprintf($join, 'm.t') . ') q', 'true', "SET trafficdb.trail_page_cache = $kb; "), $heap, "a join with trafficdb.trail_page_cache = $kb: the heap's rows");
}

# 3. statement_timeout at a stalled trail chunk GET
$node->safe_psql('postgres', qq{CREATE SERVER slow FOREIGN DATA WRAPPER trafficdb_trails
  OPTIONS (endpoint '$proxy', block_size '16kB', cache_dir 'none', retries '0');
  CREATE USER MAPPING FOR CURRENT_USER SERVER slow OPTIONS (access_key '$user', secret_key '$secret');
  CREATE FOREIGN TABLE slow_t (id bigint, ts timestamptz) SERVER slow
    OPTIONS (url 's3://$bucket/ev.trail', id_column 'id', time_column 'ts', revalidate_interval '600')});
my $t0 = time();
my ($rc, $out, $err) = $node->psql('postgres', qq{
SELECT count(*) FROM slow_t;
COPY (SELECT 1) TO PROGRAM 'curl -fs -o /dev/null "$proxy/__fault__?plan=stall"';
SET statement_timeout = '1s';
SELECT count(ts) FROM slow_t WHERE id = 2500;
});
my $took = time() - $t0;
like($err, qr/statement timeout/, 'statement_timeout interrupts a lookup at its stalled trail chunk GET');
cmp_ok($took, '<', 3.5, sprintf('within %.2f s (the stall lasts 8 s)', $took));
is($node->safe_psql('postgres', 'SELECT count(ts) FROM slow_t WHERE id = 2500'), '4', 'the same lookup reads fine afterwards');

$node->stop;
done_testing();
