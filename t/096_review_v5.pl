# t/096_review_v5.pl: review of the trail format version 5 (hostile review, 2026-12-01): footer
# aggregates over a version-5 file against the same rows in a heap (NaN,
# -0.0, NULL-only columns, booleans), GROUP BY id with and without WHERE id,
# whole-file; a damaged summary chunk: an error, the rows still scan.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('review_v5');
my $dir = PostgreSQL::Test::Utils::tempdir;
$node->safe_psql('postgres', qq{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE SERVER disk FOREIGN DATA WRAPPER trafficdb_trails;
CREATE TABLE ev AS
SELECT v::bigint AS vid,
  '2024-03-01 00:00:00+00'::timestamptz + i * interval '47 s' + v * interval '1 ms' AS ts,
  ST_SetSRID(ST_MakePoint(24.5 + (v % 20) * 0.05 + i * 0.0003, 60.1 + (v / 20) * 0.03), 4326) AS geom,
  CASE WHEN v % 7 = 0 AND i = 3 THEN 'NaN'::float8 WHEN v % 5 = 0 THEN -0.0::float8 WHEN (v + i) % 9 = 0 THEN NULL
       ELSE round((10 + 5 * sin(i / 7.0 + v))::numeric, 2)::float8 END AS f,
  CASE WHEN v % 11 = 0 THEN (CASE WHEN i % 2 = 0 THEN 0.0::float8 ELSE -0.0::float8 END) ELSE NULL END AS fz,
  NULL::float8 AS fnull,
  CASE WHEN (v + i) % 13 = 0 THEN NULL ELSE ((v * 13 + i * 7) % 360 - 180)::bigint END AS n,
  CASE WHEN v % 3 = 0 THEN NULL WHEN v % 4 = 0 THEN true ELSE (v + i) % 2 = 0 END AS b,
  CASE WHEN v % 6 = 0 THEN NULL::bool ELSE NULL::bool END AS bnull,
  CASE WHEN (v + i) % 5 = 0 THEN NULL ELSE (ARRAY['moored','underway','anchored'])[1 + (v + i) % 3] END AS s
FROM generate_series(1, 5000) v, generate_series(0, 2 + v % 4) i;
SELECT trafficdb.trail_write('SELECT * FROM ev', '$dir/v5.trail', id_column => 'vid', time_column => 'ts');
SELECT trafficdb.trail_write('SELECT * FROM ev', '$dir/v4.trail', id_column => 'vid', time_column => 'ts', format_version => 4);
CREATE FOREIGN TABLE t5 (vid bigint, ts timestamptz, geom geometry(Point, 4326), f float8, fz float8, fnull float8, n bigint, b bool, bnull bool, s text)
  SERVER disk OPTIONS (url '$dir/v5.trail', id_column 'vid', time_column 'ts');
CREATE FOREIGN TABLE t4 (vid bigint, ts timestamptz, geom geometry(Point, 4326), f float8, fz float8, fnull float8, n bigint, b bool, bnull bool, s text)
  SERVER disk OPTIONS (url '$dir/v4.trail', id_column 'vid', time_column 'ts');
});

my @q = (
	[ 'group by id, every agg', q{SELECT md5(string_agg(x::text, ';' ORDER BY vid)) FROM (SELECT vid, max(f) AS a, min(f) AS b2, count(f) AS c, max(fz) AS d, min(fz) AS e, count(fnull) AS g, max(fnull) AS h, max(n) AS i, min(n) AS j, bool_and(b) AS k, bool_or(b) AS l, bool_and(bnull) AS m, count(s) AS o, count(*) AS p FROM %s GROUP BY vid) x} ],
	[ 'group by id, max(f) only', q{SELECT md5(string_agg(vid || ':' || coalesce(m::text, 'null'), ',' ORDER BY vid)) FROM (SELECT vid, max(f) m FROM %s GROUP BY vid) x} ],
	[ 'group by id, count(n), min(fz)', q{SELECT md5(string_agg(vid || ':' || c || ':' || coalesce(m::text, 'null'), ',' ORDER BY vid)) FROM (SELECT vid, count(n) c, min(fz) m FROM %s GROUP BY vid) x} ],
	[ 'where id in, grouped', q{SELECT string_agg(vid || ':' || coalesce(a::text,'n') || ':' || coalesce(b2::text,'n') || ':' || c || ':' || coalesce(k::text,'n') || ':' || coalesce(z::text,'n'), ',' ORDER BY vid) FROM (SELECT vid, max(f) a, min(f) b2, count(n) c, bool_and(b) k, max(fz) z FROM %s WHERE vid IN (1, 5, 7, 11, 55, 77, 4096, 4999, 5000, 6000) GROUP BY vid) x} ],
	[ 'where id =, whole', q{SELECT max(f), min(f), count(f), bool_or(b), max(n), min(fz) FROM %s WHERE vid = 35} ],
	[ 'whole file', q{SELECT max(f)::text, min(f)::text, count(f), max(fz)::text, min(fz)::text, count(fnull), max(fnull), max(n), min(n), bool_and(b), bool_or(b), bool_and(bnull), count(s), count(*) FROM %s} ],
	[ 'whole file, where ids', q{SELECT max(f)::text, min(f)::text, count(f), max(fz)::text, bool_and(b), count(*) FROM %s WHERE vid = ANY('{3,6,9,10,4097}'::bigint[])} ],
);
for my $q (@q)
{
	my $want = $node->safe_psql('postgres', sprintf($q->[1], 'ev'));
	for my $t ('t5', 't4')
	{
		my $got = $node->safe_psql('postgres', sprintf($q->[1], $t));
		is($got, $want, "$q->[0]: $t as the heap");
	}
}
# the plans use the footer
my $plan = $node->safe_psql('postgres', q{EXPLAIN (VERBOSE) SELECT vid, max(f) FROM t5 GROUP BY vid});
note $plan;
like($plan, qr/Foreign Scan/, 'footer aggregate plan');

# ---- a damaged summary chunk ----
my $tool = $ENV{TRAFFICDB_TRAIL};
my $info = `$tool info $dir/v5.trail 2>&1`;
note $info;
my ($head, $tb, $sb, $pb, $lb) = $info =~ /head (\d+), trail chunks (\d+) \(\d+\), summary chunks (\d+) \(\d+\), page chunks (\d+) \(\d+\), lexicon (\d+)/;
ok(defined $sb, 'info shows summary chunks');
my $size = -s "$dir/v5.trail";
my $off = $size - 48 - $head - $lb - $pb - $tb - $sb + 2;	# inside column f's summary chunk 0
system("cp $dir/v5.trail $dir/bad.trail") == 0 or die;
open(my $fh, '+<', "$dir/bad.trail") or die;
binmode $fh;
seek($fh, $off, 0); read($fh, my $c, 1); seek($fh, $off, 0); print $fh chr(ord($c) ^ 0x40); close $fh;
$node->safe_psql('postgres', qq{CREATE FOREIGN TABLE tb (vid bigint, ts timestamptz, geom geometry(Point, 4326), f float8, fz float8, fnull float8, n bigint, b bool, bnull bool, s text)
  SERVER disk OPTIONS (url '$dir/bad.trail', id_column 'vid', time_column 'ts')});
my ($rc, $out, $err) = $node->psql('postgres', q{SELECT vid, max(f) FROM tb GROUP BY vid ORDER BY vid LIMIT 3});
isnt($rc, 0, 'max(f) GROUP BY over a damaged summary chunk of f fails');
like($err, qr/checksum mismatch in summary chunk 0/, 'naming the summary chunk') or note "out=$out err=$err";
($rc, $out, $err) = $node->psql('postgres', q{SELECT vid, max(f) FROM tb WHERE vid IN (1, 2) GROUP BY vid ORDER BY vid});
isnt($rc, 0, 'max(f) WHERE vid IN: fails too') or note "out=$out";
($rc, $out, $err) = $node->psql('postgres', q{SELECT count(*), count(f) FROM (SELECT * FROM tb OFFSET 0) s});
is($rc, 0, 'a scan of the rows still answers') or note $err;
is($out, $node->safe_psql('postgres', 'SELECT count(*), count(f) FROM ev'), '  and right');
($rc, $out, $err) = $node->psql('postgres', q{SELECT md5(string_agg(vid || ':' || m, ',' ORDER BY vid)) FROM (SELECT vid, max(n) m FROM tb GROUP BY vid) x});
is($rc, 0, 'max(n) GROUP BY (another column) answers') or note $err;
is($out, $node->safe_psql('postgres', q{SELECT md5(string_agg(vid || ':' || m, ',' ORDER BY vid)) FROM (SELECT vid, max(n) m FROM ev GROUP BY vid) x}), '  and right');
# the same session: damaged column first, then another, then the damaged one again
($rc, $out, $err) = $node->psql('postgres', q{
DO $$ BEGIN PERFORM vid, max(f) FROM tb GROUP BY vid; EXCEPTION WHEN OTHERS THEN NULL; END $$;
SELECT count(*) FROM (SELECT vid, max(f) m FROM tb GROUP BY vid) x WHERE m IS NOT NULL;});
isnt($rc, 0, 'in one session, after a failed load, max(f) still fails (no half-filled summaries)') or note "out=$out";
done_testing();
