# t/025_trail_v2_review.pl: hostile review of format version 2 through SQL
# (local files, no MinIO).  Footer aggregates must give exactly what
# PostgreSQL computes from the rows (trafficdb.trail_footer_aggregates off):
# here min/max of a float column whose extreme is a tie of -0 and 0 between
# trails.  PostgreSQL's float8larger/float8smaller keep the later of two
# equal values in scan order, so the answer's sign depends on which trail's
# zero comes last in the file.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('trail_v2_review', 'TimeZone' => "'UTC'");
my $dir = PostgreSQL::Test::Utils::tempdir;

$node->safe_psql('postgres', qq{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE SERVER disk FOREIGN DATA WRAPPER trafficdb_trails;
-- trail order: vehicle 1 has only 0, vehicle 2 only -0 (file order: 1 then 2)
CREATE TABLE z AS SELECT v::bigint AS vid, '2024-03-01 00:00:00+00'::timestamptz + i * interval '1 s' AS ts,
  ST_SetSRID(ST_MakePoint(24 + v, 60), 4326) AS geom,
  CASE WHEN v = 1 THEN 0::float8 ELSE '-0'::float8 END AS speed
FROM generate_series(1, 2) v, generate_series(0, 2) i;
SELECT trafficdb.trail_write('SELECT vid, ts, geom, speed FROM z', '$dir/z.trail',
  id_column => 'vid', time_column => 'ts');
CREATE FOREIGN TABLE zt (vid bigint, ts timestamptz, geom geometry(Point, 4326), speed float8)
  SERVER disk OPTIONS (url '$dir/z.trail', id_column 'vid', time_column 'ts');
-- space-time: vehicle 2's 0 in the first bucket, vehicle 1's -0 in a later
-- one (file order: 2's page, then 1's), so "the later trail wins" is wrong too
CREATE TABLE s AS SELECT * FROM (VALUES
  (1::bigint, '2024-03-01 01:00:00+00'::timestamptz, ST_SetSRID(ST_MakePoint(24, 60), 4326), '-0'::float8),
  (2::bigint, '2024-03-01 00:00:00+00'::timestamptz, ST_SetSRID(ST_MakePoint(25, 60), 4326), 0::float8)) AS t(vid, ts, geom, speed);
SELECT trafficdb.trail_write('SELECT vid, ts, geom, speed FROM s', '$dir/s.trail',
  id_column => 'vid', time_column => 'ts', page_order => 'space-time', bucket_seconds => 600);
CREATE FOREIGN TABLE st (vid bigint, ts timestamptz, geom geometry(Point, 4326), speed float8)
  SERVER disk OPTIONS (url '$dir/s.trail', id_column 'vid', time_column 'ts');
-- and the other way round: vehicle 1's 0 first, vehicle 2's -0 later
CREATE TABLE s2 AS SELECT * FROM (VALUES
  (1::bigint, '2024-03-01 00:00:00+00'::timestamptz, ST_SetSRID(ST_MakePoint(24, 60), 4326), 0::float8),
  (2::bigint, '2024-03-01 01:00:00+00'::timestamptz, ST_SetSRID(ST_MakePoint(25, 60), 4326), '-0'::float8)) AS t(vid, ts, geom, speed);
SELECT trafficdb.trail_write('SELECT vid, ts, geom, speed FROM s2', '$dir/s2.trail',
  id_column => 'vid', time_column => 'ts', page_order => 'space-time', bucket_seconds => 600);
CREATE FOREIGN TABLE st2 (vid bigint, ts timestamptz, geom geometry(Point, 4326), speed float8)
  SERVER disk OPTIONS (url '$dir/s2.trail', id_column 'vid', time_column 'ts');
});

for my $t ('zt', 'st', 'st2')
{
	for my $q ("SELECT max(speed)::text, min(speed)::text FROM $t",
		"SELECT max(speed)::text, min(speed)::text FROM $t WHERE vid IN (1, 2)")
	{
		my $off = $node->safe_psql('postgres', "SET trafficdb.trail_footer_aggregates = off; $q");
		my $on = $node->safe_psql('postgres', "SET trafficdb.trail_footer_aggregates = on; $q");
		my $plan = $node->safe_psql('postgres', "SET trafficdb.trail_footer_aggregates = on; EXPLAIN (COSTS OFF) $q");
		note "$t: off $off, on $on\n$plan";
		is($on, $off, "$q: footer aggregates give PostgreSQL's -0/0 tie");
	}
}

# One trail, -0 then 0 (PostgreSQL: max 0, min 0, the later of the tie).  A
# generic plan over a file replaced by a version-1 one computes the summaries
# from the pages (trail_stats in fdw/trails.c): the same rule must hold.
$node->safe_psql('postgres', qq{
CREATE TABLE one AS SELECT 7::bigint AS vid, '2024-03-01 00:00:00+00'::timestamptz + i * interval '1 s' AS ts,
  ST_SetSRID(ST_MakePoint(24, 60), 4326) AS geom, CASE WHEN i = 0 THEN '-0'::float8 ELSE 0::float8 END AS speed
FROM generate_series(0, 1) i;
SELECT trafficdb.trail_write('SELECT vid, ts, geom, speed FROM one', '$dir/one.trail',
  id_column => 'vid', time_column => 'ts');
CREATE FOREIGN TABLE one_t (vid bigint, ts timestamptz, geom geometry(Point, 4326), speed float8)
  SERVER disk OPTIONS (url '$dir/one.trail', id_column 'vid', time_column 'ts');
});
my $heap = $node->safe_psql('postgres', 'SELECT max(speed)::text, min(speed)::text FROM one');
my $swapped = $node->safe_psql('postgres', qq{SET plan_cache_mode = force_generic_plan;
  PREPARE a(bigint) AS SELECT max(speed)::text, min(speed)::text FROM one_t WHERE vid = \$1;
  EXECUTE a(7);
  SELECT trafficdb.trail_write('SELECT vid, ts, geom, speed FROM one', '$dir/one.trail',
    id_column => 'vid', time_column => 'ts', format_version => 1);
  SELECT '--';
  EXECUTE a(7);});
my ($before, $after) = split /\n--\n/, $swapped;
like($before, qr/^\Q$heap\E\n/, 'one trail, -0 then 0: footer summary as PostgreSQL');
is($after, $heap, 'the same after the file became version 1 (summaries computed from the pages)');

# Random files (NaN, -0, NULL, all-NULL trails, booleans, one-event trails,
# an empty file): every aggregate the footer answers equals PostgreSQL's.
my @aggs = ('count(*)', 'count(f)', 'min(f)::text', 'max(f)::text', 'min(i)', 'max(i)', 'count(b)',
	'bool_and(b)', 'bool_or(b)', 'every(b)', 'min(ts)', 'max(ts)', 'min(vid)', 'max(vid)');
for my $seed (1 .. 6)
{
	for my $order ('trail', 'space-time', 'time')
	{
		my $where = $seed == 6 ? 'WHERE false' : '';
		$node->safe_psql('postgres', qq{
SET client_min_messages = warning;
SELECT setseed(0.$seed);
DROP TABLE IF EXISTS r; DROP FOREIGN TABLE IF EXISTS rt;
CREATE TABLE r AS SELECT (random() * 5)::bigint AS vid,
  '1969-12-31 23:00:00+00'::timestamptz + (random() * 7200)::int * interval '1 s' AS ts,
  ST_SetSRID(ST_MakePoint(round((random() * 2)::numeric, 3)::float8, 60), 4326) AS geom,
  CASE WHEN vid_null THEN NULL ELSE (ARRAY['NaN', '-0', '0', '1.5', '-2.25', 'Infinity', NULL])[1 + (random() * 6)::int]::float8 END AS f,
  CASE WHEN random() < 0.2 THEN NULL ELSE (random() * 10 - 5)::bigint END AS i,
  CASE WHEN random() < 0.3 THEN NULL ELSE random() < 0.5 END AS b
FROM (SELECT g, random() < 0.1 AS vid_null FROM generate_series(1, 40) g) x $where;
SELECT trafficdb.trail_write('SELECT vid, ts, geom, f, i, b FROM r', '$dir/r-$seed-$order.trail',
  id_column => 'vid', time_column => 'ts', page_order => '$order', page_size => 1024@{[$order eq 'trail' ? '' : ', bucket_seconds => 600']});
CREATE FOREIGN TABLE rt (vid bigint, ts timestamptz, geom geometry(Point, 4326), f float8, i bigint, b boolean)
  SERVER disk OPTIONS (url '$dir/r-$seed-$order.trail', id_column 'vid', time_column 'ts');});
		for my $grouped (0, 1)
		{
			my $q = 'SELECT ' . ($grouped ? 'vid, ' : '') . join(', ', @aggs) . ' FROM rt' .
			  ($grouped ? ' GROUP BY vid ORDER BY vid' : '');
			my $off = $node->safe_psql('postgres', "SET trafficdb.trail_footer_aggregates = off; $q");
			my $on = $node->safe_psql('postgres', "SET trafficdb.trail_footer_aggregates = on; $q");
			my $plan = $node->safe_psql('postgres', "EXPLAIN (COSTS OFF) $q");
			like($plan, qr/Aggregates From Footer/, "seed $seed $order grouped $grouped: pushed");
			is($on, $off, "seed $seed $order grouped $grouped: footer aggregates equal PostgreSQL's");
		}
	}
}

# trail_write's arguments: NULLs and absurd values are errors, never a crash
for my $args ("NULL, '$dir/n.trail'", "'SELECT vid, ts, geom FROM r', NULL",
	"'SELECT vid, ts, geom FROM r', '$dir/n.trail', id_column => 'vid', time_column => 'ts', page_order => NULL",
	"'SELECT vid, ts, geom FROM r', '$dir/n.trail', id_column => 'vid', time_column => 'ts', format_version => NULL",
	"'SELECT vid, ts, geom FROM r', '$dir/n.trail', id_column => 'vid', time_column => 'ts', page_order => 'space-time', bucket_seconds => -1",
	"'SELECT vid, ts, geom FROM r', '$dir/n.trail', id_column => 'vid', time_column => 'ts', page_order => 'space-time', bucket_seconds => 2147483647",
	"'SELECT vid, ts, geom FROM r', '$dir/n.trail', id_column => 'vid', time_column => 'ts', format_version => 7",
	"'SELECT vid, ts, geom FROM r', '$dir/n.trail', id_column => NULL",
	"'SELECT vid, ts, geom FROM r', '$dir/n.trail', id_column => 'vid', time_column => 'ts', page_size => 0")
{
	my ($rc, $out, $err) = $node->psql('postgres', "SELECT trafficdb.trail_write($args)");
	isnt($rc, 0, "trail_write($args): an error") or diag $out;
	like($err, qr/ERROR/, '  with a message');
}
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'the server is still up');

# Times PostgreSQL cannot represent: a file time past timestamptz's range
# (the CLI takes any int64 microseconds with --time-window ..) is an error when read, never a
# wrapped or invalid timestamp, from rows and from the footer; trail_write
# refuses a time past what a file holds (year 294247) instead of wrapping.
{
	my $trail = $ENV{TRAFFICDB_TRAIL} // 'tools/trafficdb-trail';
	my $csv = "$dir/far.csv";
	open my $fh, '>', $csv or die "$csv: $!";
	print $fh "id,t,lon,lat\n1,1000000,24,60\n2,-9223372036854775000,25,60\n";
	close $fh;
	system("$trail write $dir/far.trail --id id --time t --time-unit us --time-window .. < $csv > /dev/null 2>&1") == 0
	  or die "trafficdb-trail write failed";
	$node->safe_psql('postgres', qq{CREATE FOREIGN TABLE far (id bigint, t timestamptz, geom geometry(Point, 4326))
	  SERVER disk OPTIONS (url '$dir/far.trail', id_column 'id', time_column 't')});
	is($node->safe_psql('postgres', 'SELECT t FROM far WHERE id = 1'), '1970-01-01 00:00:01+00',
		'a time in range reads back');
	for my $q ('SELECT t FROM far WHERE id = 2', 'SELECT min(t) FROM far')
	{
		my ($rc, $out, $err) = $node->psql('postgres', $q);
		like($err, qr/trail file time -9223372036854775000 \(microseconds since 1970\) is out of range for timestamptz/,
			"$q: a file time before timestamptz's range is an error");
	}
	my ($rc, $out, $err) = $node->psql('postgres', qq{SELECT trafficdb.trail_write(
	  \$\$SELECT 1::bigint AS id, '294270-01-01 00:00:00+00'::timestamptz AS time, ST_SetSRID(ST_MakePoint(24, 60), 4326) AS geom\$\$,
	  '$dir/late.trail')});
	like($err, qr/has a time past what a trail file holds/, 'trail_write refuses a time past a file\'s range');
	is($node->safe_psql('postgres', 'SELECT 1'), '1', 'the server is up');
}

# A file not in trail order whose float column's minimum is 0: count(*) reads the
# footer's head alone (4 KiB), as in trail order; only a min or max of that column
# needs the trails' summaries (before, any float column's zero sent count(*) there)
$node->safe_psql('postgres', qq{
CREATE TABLE many AS SELECT v::bigint AS vid, '2024-03-01 00:00:00+00'::timestamptz + i * interval '30 s' AS ts,
  ST_SetSRID(ST_MakePoint(24 + v * 0.001, 60), 4326) AS geom, (i % 5)::float8 AS speed
FROM generate_series(1, 600) v, generate_series(0, 9) i;
SELECT trafficdb.trail_write('SELECT vid, ts, geom, speed FROM many', '$dir/many.trail',
  id_column => 'vid', time_column => 'ts', page_order => 'time');
CREATE FOREIGN TABLE many_t (vid bigint, ts timestamptz, geom geometry(Point, 4326), speed float8)
  SERVER disk OPTIONS (url '$dir/many.trail', id_column 'vid', time_column 'ts');
});
my $cnt = tdb_scan_node($node, 'SELECT count(*), max(ts) FROM many_t');
cmp_ok($cnt->{'Bytes From Local File'}, '<=', 8192,
	"time order, a float column's minimum 0: count(*) reads $cnt->{'Bytes From Local File'} bytes of the footer (its head)");
my $mx = tdb_scan_node($node, 'SELECT max(speed)::text, min(speed)::text FROM many_t');
cmp_ok($mx->{'Bytes From Local File'}, '>', 8192, "  min/max of that column read the trails' summaries ($mx->{'Bytes From Local File'} bytes)");
for my $q ('SELECT count(*), max(ts) FROM %s', 'SELECT max(speed)::text, min(speed)::text FROM %s')
{
	is($node->safe_psql('postgres', sprintf($q, 'many_t')), $node->safe_psql('postgres', sprintf($q, 'many')),
		'  ' . sprintf($q, 'many_t') . ': the heap\'s answer');
}

$node->stop;

done_testing();
