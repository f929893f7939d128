# t/095_trail_v5_summaries.pl: format version 5 (the default) keeps each
# column's per-trail summaries in chunks of their own, which only the
# footer aggregates naming that column read.
# 1. GROUP BY id aggregates (max, min, count, bool_and, bool_or) of every
#    column, with and without an id list, and whole-file aggregates, over
#    version 5 and version 4 files of the same rows: the heap's answers
#    (NaN, -0, NULL-only trails and booleans included);
# 2. max(one column) GROUP BY id reads fewer footer bytes from version 5
#    than from version 4 (the other columns' summaries are not read);
# 3. a damaged summary chunk: the aggregate of that column is an error
#    naming the chunk, the rows and other columns' aggregates still answer.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('trail_v5_summaries');
my $dir = PostgreSQL::Test::Utils::tempdir;
tdb_trail_disk($node);

# 150 trails (3 trail chunks), five columns: a float with NaN and -0, an
# int, a text, a boolean, a float NULL in every other trail
$node->safe_psql('postgres', qq{
CREATE TABLE ev AS
SELECT v::bigint AS vid,
  '2024-05-01 00:00:00+00'::timestamptz + (v * 7 + i) * interval '1 s' AS ts,
  ST_SetSRID(ST_MakePoint(10 + v * 0.01 + i * 0.0001, 50 + i * 0.0001), 4326) AS geom,
  CASE WHEN v % 13 = 0 AND i = 3 THEN 'NaN'::float8 WHEN v % 11 = 0 THEN -0.0::float8 ELSE v * 0.5 + i END AS speed,
  (v * 100 + i)::bigint AS n,
  'name ' || (v % 17) AS label,
  (v + i) % 3 = 0 AS moving,
  CASE WHEN v % 2 = 0 THEN NULL ELSE i * 0.25 END::float8 AS draft
FROM generate_series(1, 150) v, generate_series(0, 9 + v % 5) i;
SELECT trafficdb.trail_write('SELECT vid, ts, geom, speed, n, label, moving, draft FROM ev', '$dir/v5.trail',
  id_column => 'vid', time_column => 'ts');
SELECT trafficdb.trail_write('SELECT vid, ts, geom, speed, n, label, moving, draft FROM ev', '$dir/v4.trail',
  id_column => 'vid', time_column => 'ts', format_version => 4);
CREATE FOREIGN TABLE t5 (vid bigint, ts timestamptz, geom geometry(Point, 4326), speed float8, n bigint,
  label text, moving boolean, draft float8)
  SERVER disk OPTIONS (url '$dir/v5.trail', id_column 'vid', time_column 'ts');
CREATE FOREIGN TABLE t4 (vid bigint, ts timestamptz, geom geometry(Point, 4326), speed float8, n bigint,
  label text, moving boolean, draft float8)
  SERVER disk OPTIONS (url '$dir/v4.trail', id_column 'vid', time_column 'ts');
});

my $cli = $ENV{TRAFFICDB_TRAIL} // die 'TRAFFICDB_TRAIL must name tools/trafficdb-trail';
like(`$cli info $dir/v5.trail`, qr/^footer:\s+head \d+, trail chunks \d+ \(3\), summary chunks \d+ \(15\)/m,
	'version 5: three trail chunks, a summary chunk per column of each');

# ---- 1. the heap's answers -----------------------------------------------------------------
my @queries = (
	'SELECT vid, max(speed), min(speed), count(speed), max(n), min(n), count(label), bool_and(moving), bool_or(moving), max(draft), count(draft) FROM %s GROUP BY vid',
	'SELECT vid, max(speed), min(n), bool_or(moving), count(draft) FROM %s WHERE vid IN (1, 13, 22, 77, 150, 151, NULL) GROUP BY vid',
	'SELECT max(speed), min(speed), count(*), max(n), bool_and(moving), min(draft) FROM %s',
	'SELECT max(draft) FROM %s WHERE vid = 4',
	'SELECT vid, max(speed) FROM %s GROUP BY vid HAVING max(speed) > 60');
for my $q (@queries)
{
	my $heap = $node->safe_psql('postgres', sprintf($q, 'ev') . ' ORDER BY 1');
	for my $t ('t5', 't4')
	{
		my $plan = $node->safe_psql('postgres', 'EXPLAIN (VERBOSE) ' . sprintf($q, $t));
		like($plan, qr/Aggregates From Footer/, "$t: from the footer: " . sprintf($q, $t));
		is($node->safe_psql('postgres', sprintf($q, $t) . ' ORDER BY 1'), $heap, "$t: the heap's answer");
	}
}

# ---- 2. the other columns' summaries are not read -------------------------------------------
sub footer_bytes
{
	my ($t, $q) = @_;
	# a fresh backend (each psql), so no decoded footer kept: the file opened anew
	my $plan = $node->safe_psql('postgres', "EXPLAIN (ANALYZE, SUMMARY OFF) $q");
	my ($local) = $plan =~ /Bytes From Local File: (\d+) bytes/;
	return $local // -1;
}
my $q5 = 'SELECT vid, max(speed) FROM %s GROUP BY vid';
my ($b5, $b4) = (footer_bytes('t5', sprintf($q5, 't5')), footer_bytes('t4', sprintf($q5, 't4')));
ok($b5 > 0 && $b4 > 0 && $b5 < $b4, "max(speed) GROUP BY vid reads less of version 5 ($b5 bytes) than of version 4 ($b4)");

# ---- 3. a damaged summary chunk ------------------------------------------------------------
# the first summary chunk (speed's, trail chunk 0) starts where the pages end
my $info = `$cli info $dir/v5.trail`;
my ($size, $pages) = $info =~ /^bytes:\s+(\d+) \(pages (\d+),/m;
ok($pages > 0, 'info gives the pages\' bytes');
open(my $fh, '+<:raw', "$dir/v5.trail") or die;
seek($fh, 16 + $pages + 2, 0);
read($fh, my $byte, 1);
seek($fh, 16 + $pages + 2, 0);
print $fh chr(ord($byte) ^ 0x20);
close($fh);
my ($rc, $out, $err) = $node->psql('postgres', '' . sprintf($q5, 't5'));
like($err, qr/checksum mismatch in summary chunk 0/, 'max(speed): an error naming the damaged summary chunk');
is($node->safe_psql('postgres', 'SELECT count(*) FROM (SELECT vid, max(n) FROM t5 GROUP BY vid) x'),
	'150', 'max(n): its own summaries still answer');
is($node->safe_psql('postgres', 'SELECT count(*), sum(n) FROM t5'),
	$node->safe_psql('postgres', 'SELECT count(*), sum(n) FROM ev'), 'and every row is still read');

done_testing();
