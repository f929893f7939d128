# t/092_trail_id_checked.pl: the trail id clause a scan prunes with is
# checked by the scan, not again by PostgreSQL on every row (the Filter of
# "t.callsign = v.c" was 8-12 % of a 100-id join over 150,000 rows: issue
# 33).  The scan's rows must stay exactly the heap's:
# 1. joins on text and bigint ids (inner, left, lateral), WHERE id = a,
#    id = ANY (array with a NULL), a NULL value, a generic plan's parameter:
#    the heap's rows, no Filter on the id, "Trail Id Checked By The Scan";
# 2. a second id clause stays PostgreSQL's (only the first prunes);
# 3. where the file cannot answer the clause, the scan asks PostgreSQL on
#    each formed row: a bigint column over a file of string ids ('007' and
#    '7' are both 7), and a text column over a file of integer ids
#    (answered by the index: '007' is not an id there);
# 4. a text id under a nondeterministic collation (ci, tdb_trail_disk) is not pushed down at
#    all: PostgreSQL's Filter and its answer;
# 5. EvalPlanQual (the outer row of FOR UPDATE updated concurrently) rechecks
#    the clauses the scan decides itself (fdw_recheck_quals): the id, an
#    exact rectangle, the distance band.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;
use IPC::Run;
use Time::HiRes qw(usleep);

my $node = tdb_node('trail_id_checked');
my $dir = PostgreSQL::Test::Utils::tempdir;
tdb_trail_disk($node);

# 60 trails of 30 to 89 events; sid: '7' and '007' are two trails of the string file
$node->safe_psql('postgres', qq{
CREATE TABLE ev AS
SELECT 'F' || lpad(v::text, 2, '0') AS tid, v::bigint AS vid,
  CASE WHEN v % 10 = 0 THEN lpad((v / 10)::text, 3, '0') ELSE (v % 10)::text END AS sid,
  '2024-05-01 00:00:00+00'::timestamptz + (v * 13 + i) * interval '1 s' AS ts,
  ST_SetSRID(ST_MakePoint(10 + v * 0.01 + i * 0.0001, 50 + i * 0.0001), 4326) AS geom,
  v * 1000 + i AS n
FROM generate_series(1, 60) v, generate_series(0, 29 + v) i;
SELECT trafficdb.trail_write('SELECT tid, ts, geom, n FROM ev', '$dir/t.trail',
  id_column => 'tid', time_column => 'ts', page_size => 1024);
SELECT trafficdb.trail_write('SELECT vid, ts, geom, n FROM ev', '$dir/v.trail',
  id_column => 'vid', time_column => 'ts', page_size => 1024);
SELECT trafficdb.trail_write('SELECT sid, ts, geom, n FROM ev', '$dir/s.trail',
  id_column => 'sid', time_column => 'ts', page_size => 1024);
CREATE FOREIGN TABLE tt (tid text, ts timestamptz, geom geometry(Point, 4326), n bigint)
  SERVER disk OPTIONS (url '$dir/t.trail', id_column 'tid', time_column 'ts');
CREATE FOREIGN TABLE tv (vid bigint, ts timestamptz, geom geometry(Point, 4326), n bigint)
  SERVER disk OPTIONS (url '$dir/v.trail', id_column 'vid', time_column 'ts');
-- the string file's ids read as bigint (int8in: '007' and '7' are both 7) ...
CREATE FOREIGN TABLE ts_big (sid bigint, ts timestamptz, geom geometry(Point, 4326), n bigint)
  SERVER disk OPTIONS (url '$dir/s.trail', id_column 'sid', time_column 'ts');
-- ... and the integer file's read as text (each id in decimal)
CREATE FOREIGN TABLE tv_text (vid text, ts timestamptz, geom geometry(Point, 4326), n bigint)
  SERVER disk OPTIONS (url '$dir/v.trail', id_column 'vid', time_column 'ts');
CREATE FOREIGN TABLE tt_ci (tid text COLLATE ci, ts timestamptz, geom geometry(Point, 4326), n bigint)
  SERVER disk OPTIONS (url '$dir/t.trail', id_column 'tid', time_column 'ts');
CREATE TABLE ids AS SELECT * FROM (VALUES ('F07'), ('F33'), ('F60'), ('F99'), (NULL)) v(c);
CREATE TABLE vids AS SELECT * FROM (VALUES (7::bigint), (33), (60), (99), (NULL)) v(c);
ANALYZE ev, ids, vids;
});

# count and digest of n over a query's rows
sub digest
{
	my ($sql) = @_;
	my ($rc, $out, $err) = $node->psql('postgres',
		"SELECT count(*) || ':' || coalesce(md5(string_agg(n::text, ',' ORDER BY n)), '-') FROM ($sql) q");
	return $rc == 0 ? $out : 'ERROR: ' . ($err =~ /ERROR:\s*(.*)/ ? $1 : $err);
}

sub plan_of
{
	my ($sql, $pre) = @_;
	return $node->safe_psql('postgres', ($pre // '') . "EXPLAIN (VERBOSE, COSTS OFF) $sql");
}

# the query on the foreign table against the same on the heap (table names substituted)
sub same
{
	my ($sql, $heap, $name, $checked) = @_;
	my $got = digest($sql);
	my $want = digest($heap);
	is($got, $want, "$name: the heap's rows ($want)");
	my $plan = plan_of($sql);
	my ($scan) = $plan =~ /(Foreign Scan on .*)/s;
	$scan //= '';
	if ($checked)
	{
		like($scan, qr/Trail Id Checked By The Scan: /, "$name: the scan checks the id clause") or diag($plan);
		unlike($scan, qr/Filter: .*\b(tid|vid|sid)\b[^,]*=/, "$name: no Filter repeats it") or diag($plan);
	}
	return $plan;
}

# ---- 1. joins and WHERE, text and bigint ids ------------------------------------------

same(q{SELECT t.n FROM ids JOIN tt t ON t.tid = ids.c}, q{SELECT e.n FROM ids JOIN ev e ON e.tid = ids.c},
	'inner join on text ids (a NULL and an unknown id among them)', 1);
like(plan_of(q{SELECT t.n FROM ids JOIN tt t ON t.tid = ids.c}), qr/Nested Loop/, 'the text join is a nested loop of lookups');
same(q{SELECT t.n FROM vids JOIN tv t ON t.vid = vids.c}, q{SELECT e.n FROM vids JOIN ev e ON e.vid = vids.c},
	'inner join on bigint ids', 1);
same(q{SELECT coalesce(t.n, -1) AS n FROM ids LEFT JOIN tt t ON t.tid = ids.c},
	q{SELECT coalesce(e.n, -1) AS n FROM ids LEFT JOIN ev e ON e.tid = ids.c}, 'left join (NULL and unknown ids keep a row)', 1);
same(q{SELECT t.n FROM ids, LATERAL (SELECT n FROM tt WHERE tt.tid = ids.c AND tt.n % 2 = 0) t},
	q{SELECT e.n FROM ids, LATERAL (SELECT n FROM ev WHERE ev.tid = ids.c AND ev.n % 2 = 0) e}, 'lateral subquery with another clause', 1);
same(q{SELECT t.n FROM (VALUES (ARRAY['F01', 'F02']), (ARRAY['F03', NULL]), (NULL)) v(a), LATERAL (SELECT n FROM tt WHERE tt.tid = ANY (v.a)) t},
	q{SELECT e.n FROM (VALUES (ARRAY['F01', 'F02']), (ARRAY['F03', NULL]), (NULL)) v(a), LATERAL (SELECT n FROM ev WHERE ev.tid = ANY (v.a)) e},
	'lateral tid = ANY (the outer row\'s array, a NULL in it, a NULL array)', 1);
same(q{SELECT n FROM tt WHERE tid = 'F07'}, q{SELECT n FROM ev WHERE tid = 'F07'}, 'WHERE tid = a', 1);
same(q{SELECT n FROM tt WHERE tid = ANY (ARRAY['F07', NULL, 'F59', 'nope'])},
	q{SELECT n FROM ev WHERE tid = ANY (ARRAY['F07', NULL, 'F59', 'nope'])}, 'WHERE tid = ANY (array with a NULL)', 1);
same(q{SELECT n FROM tv WHERE vid = ANY ('{3,4,600}'::int[])}, q{SELECT n FROM ev WHERE vid = ANY ('{3,4,600}'::int[])},
	'WHERE vid = ANY (int[]): a cross-type equality', 1);
same(q{SELECT n FROM tt WHERE tid = NULL::text}, q{SELECT n FROM ev WHERE tid = NULL::text}, 'a NULL value: no row');
same(q{SELECT n FROM tv WHERE vid = 9 AND ts >= '2024-05-01 00:02:00+00'},
	q{SELECT n FROM ev WHERE vid = 9 AND ts >= '2024-05-01 00:02:00+00'}, 'an id with a time bound', 1);

{
	my $pre = "SET plan_cache_mode = force_generic_plan; PREPARE p(text) AS SELECT n FROM tt WHERE tid = \$1;";
	my $plan = plan_of('EXECUTE p(\'F12\')', $pre);
	like($plan, qr/Trail Id Checked By The Scan: \(?tid = \$1\)?/, 'a generic plan: the scan checks tid = $1') or diag($plan);
	unlike($plan, qr/Filter:/, 'a generic plan: no Filter') or diag($plan);
	my $got = $node->safe_psql('postgres', $pre . "CREATE TEMP TABLE r AS EXECUTE p('F12'); SELECT count(*) || ':' || md5(string_agg(n::text, ',' ORDER BY n)) FROM r");
	is($got, digest(q{SELECT n FROM ev WHERE tid = 'F12'}), 'a generic plan: the heap\'s rows');
}

# ---- 2. only the first id clause prunes -----------------------------------------------

{
	# (tid = ANY: = 'F33' would join the equivalence class and replace the join clause)
	my $sql = q{SELECT t.n FROM ids JOIN tt t ON t.tid = ids.c WHERE t.tid = ANY ('{F33,F60}')};
	my $plan = same($sql, q{SELECT e.n FROM ids JOIN ev e ON e.tid = ids.c WHERE e.tid = ANY ('{F33,F60}')},
		'a join and a WHERE on the id');
	like($plan, qr/Trail Id Checked By The Scan: \(\$\d+ = tid\)/, 'the join clause, first, is the scan\'s') or diag($plan);
	like($plan, qr/Filter: \(t\.tid = ANY/, 'the second stays PostgreSQL\'s Filter') or diag($plan);
}

# ---- 3. where the file cannot answer it, the scan asks PostgreSQL ---------------------

{
	my $sql = q{SELECT n FROM ts_big WHERE sid = 7};
	my $want = digest(q{SELECT n FROM ev WHERE sid::bigint = 7});
	like($want, qr/^\d+:/, 'the heap has rows with sid 7 or 007');
	is(digest($sql), $want, "a bigint column over string ids: '007' and '7' are both 7 ($want)");
	my $node_json = tdb_scan_node($node, $sql);
	ok(($node_json->{'Rows Checked by PostgreSQL'} // 0) > 0,
		'... each formed row was checked (Rows Checked by PostgreSQL: ' . ($node_json->{'Rows Checked by PostgreSQL'} // 'none') . ')');
	is($node_json->{'Rows Removed by Id Check'} + $node_json->{'Actual Rows'}, $node_json->{'Rows Checked by PostgreSQL'},
		'... those it removed and those it returned are those it checked');
	is(digest(q{SELECT t.n FROM vids JOIN ts_big t ON t.sid = vids.c}),
		digest(q{SELECT e.n FROM vids JOIN ev e ON e.sid::bigint = vids.c}), 'the same in a join on bigint values');
}
same(q{SELECT n FROM tv_text WHERE vid = '7'}, q{SELECT n FROM ev WHERE vid::text = '7'}, "a text column over integer ids: '7'", 1);
same(q{SELECT n FROM tv_text WHERE vid = '007'}, q{SELECT n FROM ev WHERE vid::text = '007'}, "... '007' is no id there", 1);
same(q{SELECT t.n FROM (VALUES ('7'), ('07'), ('60')) v(c) JOIN tv_text t ON t.vid = v.c},
	q{SELECT e.n FROM (VALUES ('7'), ('07'), ('60')) v(c) JOIN ev e ON e.vid::text = v.c}, '... in a join', 1);

# ---- 4. a nondeterministic collation: not pushed, PostgreSQL's Filter ------------------

{
	my $sql = q{SELECT n FROM tt_ci WHERE tid = 'f07'};
	is(digest($sql), digest(q{SELECT n FROM ev WHERE tid = 'F07'}), "case-insensitive 'f07' finds F07's rows");
	my $plan = plan_of($sql);
	unlike($plan, qr/Trail Id/, 'nondeterministic collation: no id pushed or checked by the scan') or diag($plan);
	like($plan, qr/Filter: .*tid = 'f07'/, '... PostgreSQL\'s Filter') or diag($plan);
}

# ---- 5. EvalPlanQual: the clauses the scan decides are rechecked on the copy ---------------
# (the review of the change: the outer row of FOR UPDATE changes concurrently;
# PostgreSQL rechecks the join on the new outer row and the trail rows it
# copied, with no Filter left to do it: 37 rows with tid <> c were returned)

sub epq
{
	my ($table, $outer_from, $outer_to, $query) = @_;
	$node->safe_psql('postgres', qq{
DROP TABLE IF EXISTS epq_ids;
CREATE TABLE epq_ids (k int PRIMARY KEY, c $outer_from, hits int DEFAULT 0);
INSERT INTO epq_ids VALUES (1, $outer_to);});
	my $s1 = $node->background_psql('postgres');
	$s1->query_safe('BEGIN');
	$s1->query_safe("UPDATE epq_ids SET c = (SELECT c FROM epq_ids WHERE k = 1) WHERE k = 1");	# holds the row
	my ($out, $err) = ('', '');
	my $s2 = IPC::Run::start([ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-c',
		"SET enable_hashjoin = off; SET enable_mergejoin = off; SET enable_material = off; $query" ],
		'>', \$out, '2>', \$err);
	my $waiting = 0;
	for (1 .. 200)
	{
		$waiting = $node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'});
		last if $waiting > 0 || !$s2->pumpable;
		usleep(50_000);
	}
	unless ($waiting)
	{
		$s1->query_safe('ROLLBACK');
		$s1->quit;
		$s2->finish;
		return ("the query did not wait for the row lock: $out", $err);
	}
	$s1->query_safe($_[4]);
	$s1->query_safe('COMMIT');
	$s1->quit;
	$s2->finish;
	chomp $out;
	return ($out, $err);
}

{
	my $q = "SELECT count(*) || ':' || count(*) FILTER (WHERE tid <> c) FROM (SELECT t.tid, epq_ids.c FROM epq_ids JOIN %s t ON t.tid = epq_ids.c WHERE epq_ids.k = 1 FOR UPDATE OF epq_ids) s";
	my ($got, $err) = epq('tt', 'text', q{'F07'}, sprintf($q, 'tt'), q{UPDATE epq_ids SET c = 'F33' WHERE k = 1});
	my ($want) = epq('ev', 'text', q{'F07'}, sprintf($q, 'ev'), q{UPDATE epq_ids SET c = 'F33' WHERE k = 1});
	is($got, $want, "FOR UPDATE of the outer row, changed from F07 to F33 meanwhile: the heap's answer ($want)") or diag($err);
	like($got, qr/:0$/, '... no row whose id differs from the outer value');
}
{
	# the scan's own check on formed rows (a bigint column over string ids) too
	my $q = "SELECT count(*) || ':' || count(*) FILTER (WHERE sid <> c) FROM (SELECT t.sid, epq_ids.c FROM epq_ids JOIN ts_big t ON t.sid = epq_ids.c WHERE epq_ids.k = 1 FOR UPDATE OF epq_ids) s";
	my ($got, $err) = epq('ts_big', 'bigint', '7', $q, q{UPDATE epq_ids SET c = 3 WHERE k = 1});
	like($got, qr/^\d+:0$/, "bigint over string ids, 7 changed to 3 meanwhile: no row whose id differs ($got)") or diag($err);
}
{
	# an exact rectangle and the distance band, decided by the scan, are in the
	# recheck too (constants: they hold on the copy of a row the scan returned;
	# the join clause on the changed outer row is PostgreSQL's Filter)
	$node->safe_psql('postgres', q{
DROP TABLE IF EXISTS epq_area;
CREATE TABLE epq_area (k int PRIMARY KEY, x float8);
INSERT INTO epq_area VALUES (1, 10.1);});
	my $s1 = $node->background_psql('postgres');
	$s1->query_safe('BEGIN');
	$s1->query_safe('UPDATE epq_area SET x = x WHERE k = 1');
	my ($out, $err) = ('', '');
	my $s2 = IPC::Run::start([ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-c',
		q{SET enable_hashjoin = off; SET enable_mergejoin = off; SET enable_material = off;
		  SELECT count(*) || ':' || count(*) FILTER (WHERE lon > x) FROM (SELECT ST_X(t.geom) AS lon, a.x FROM epq_area a, tt t
		   WHERE ST_Intersects(t.geom, ST_MakeEnvelope(10, 49, 10.2, 51, 4326)) AND ST_X(t.geom) <= a.x
		     AND ST_DWithin(t.geom::geography, ST_SetSRID(ST_MakePoint(10.1, 50), 4326)::geography, 200000)
		     AND a.k = 1 FOR UPDATE OF a) s} ],
		'>', \$out, '2>', \$err);
	for (1 .. 200)
	{
		last if $node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'}) > 0 ||
		  !$s2->pumpable;
		usleep(50_000);
	}
	$s1->query_safe('UPDATE epq_area SET x = 10.05 WHERE k = 1');
	$s1->query_safe('COMMIT');
	$s1->quit;
	$s2->finish;
	chomp $out;
	like($out, qr/^\d+:0$/, "area clauses the scan decides, the outer row changed meanwhile: the recheck's answer holds ($out)") or diag($err);
	like($node->safe_psql('postgres', 'EXPLAIN (COSTS OFF) SELECT n FROM tt WHERE ST_Intersects(geom, ST_MakeEnvelope(10, 49, 10.2, 51, 4326))'),
		qr/Area Checked By The Scan/, '(the rectangle is the scan\'s there)');
}

# ---- EXPLAIN ANALYZE where the index answers: nothing asked -----------------------------

{
	my $j = tdb_scan_node($node, q{SELECT t.n FROM ids JOIN tt t ON t.tid = ids.c});
	ok(!exists $j->{'Rows Checked by PostgreSQL'}, 'ids the index answers: no row checked by PostgreSQL');
	ok(!exists $j->{'Filter'}, '... and no Filter');
}

done_testing();
