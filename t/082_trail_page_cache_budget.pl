# t/082_trail_page_cache_budget.pl: trafficdb.trail_page_cache bounds what
# one backend keeps of decoded trail pages, not what each scan keeps.
#
# Any role may set the cache (PGC_USERSET, like work_mem); each trail scan
# that runs lookups kept its own cache of up to the setting, so a statement
# joining N trail tables (or one table N times) held N times the bound, and
# nothing bounded N.  Now every cache of the backend draws on one budget of
# the setting: a scan that finds it spent evicts its own pages or keeps no
# more (never another scan's: that scan may be reading one of them).
# 1. a 3-way join of lookups in one space-time file returns exactly the
#    heap's rows with a 256 kB bound, and its three caches together held
#    no more than 256 kB ("Trail Page Cache Backend Peak"; each alone held
#    256 kB before, 786,372 bytes together);
# 2. with a bound of 0, no cache; a large one, the same rows;
# 3. the budget is given back when the statement ends: the next statement's
#    caches fill it again.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use JSON::PP;
use lib 't';
use TdbTest;

my $node = tdb_node('trail_cache_budget');
my $dir = PostgreSQL::Test::Utils::tempdir;
$node->safe_psql('postgres', qq{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE SERVER loc FOREIGN DATA WRAPPER trafficdb_trails;
-- 300 flights by callsign, 100 to 149 events each, overlapping in time and place
CREATE TABLE ev AS
SELECT 'AC' || lpad(v::text, 3, '0') AS callsign,
  '2024-03-01 00:00:00+00'::timestamptz + (v * 37 % 3600) * interval '1 s' + i * interval '47 s' AS ts,
  ST_SetSRID(ST_MakePoint(round((24.5 + (v % 20) * 0.05 + i * 0.0003 * sin(v))::numeric, 7)::float8,
                          round((60.1 + (v / 20) * 0.03 + i * 0.0002 * cos(v))::numeric, 7)::float8), 4326) AS geom,
  round((10 + 5 * sin(i / 7.0 + v))::numeric, 2)::float8 AS speed,
  (v * 13 + i) % 7 AS alt
FROM generate_series(1, 300) v, generate_series(0, 99 + v % 50) i;
SELECT trafficdb.trail_write('SELECT callsign, ts, geom, speed, alt FROM ev', '$dir/st.trail',
  id_column => 'callsign', time_column => 'ts', page_size => 4096, page_order => 'space-time');
CREATE FOREIGN TABLE st (callsign text, ts timestamptz, geom geometry(Point, 4326), speed float8, alt bigint)
  SERVER loc OPTIONS (url '$dir/st.trail', id_column 'callsign', time_column 'ts');
CREATE TABLE ids AS SELECT 'AC' || lpad((1 + (k * 137) % 300)::text, 3, '0') AS c FROM generate_series(0, 99) k;
ANALYZE ev, ids;
});

# three lookups per outer id, each a parameterized scan of its own
my $pre = 'SET enable_hashjoin = off; SET enable_mergejoin = off; ';
my $join = 'SELECT a.callsign, a.ts, a.speed, b.alt, c.geom FROM ids i JOIN %1$s a ON a.callsign = i.c '
  . 'JOIN %1$s b ON b.callsign = i.c AND b.ts = a.ts JOIN %1$s c ON c.callsign = i.c AND c.ts = a.ts';

sub digest
{
	my ($sql, $set) = @_;
	# the heap's join may hash; the trail tables' must be lookups
	return $node->safe_psql('postgres', ($sql =~ / ev a / ? '' : $pre) . ($set // '')
		  . "SELECT count(*) || ':' || md5(string_agg(format('%s|%s|%s|%s|%s', callsign, ts, speed, alt, encode(ST_AsEWKB(geom), 'hex')), ',' ORDER BY callsign, ts)) FROM ($sql) q");
}

sub scans
{
	my ($set) = @_;
	my $json = $node->safe_psql('postgres', $pre . $set . 'EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) ' . sprintf($join, 'st'));
	my @todo = (decode_json($json)->[0]{Plan});
	my @scans;
	while (my $p = shift @todo)
	{
		push @scans, $p if $p->{'Node Type'} eq 'Foreign Scan';
		push @todo, @{ $p->{Plans} // [] };
	}
	return @scans;
}

my $heap = digest(sprintf($join, 'ev'));
like($heap, qr/^\d{5}:/, "the heap's 3-way join: $heap");

# ---- 1. one budget for the backend ------------------------------------------------------------
my $bound = 262144;
my @s = scans(q{SET trafficdb.trail_page_cache = '256kB'; });
is(scalar(@s), 3, 'three trail scans');
is(join(',', map { $_->{'Trail Lookups'} } @s), '100,100,100', 'each a scan of 100 lookups');
# each cache's own peak is within the bound (it was before too); what they hold together is the
# backend's peak: the largest of the scans' "Backend Peak" (each the total seen as it grew)
ok((grep { $_->{'Trail Page Cache Peak'} > 0 && $_->{'Trail Page Cache Peak'} <= $bound } @s) == 3,
	'each of the three caches kept pages, within the bound: ' . join(', ', map { $_->{'Trail Page Cache Peak'} } @s));
my ($sum) = sort { $b <=> $a } map { $_->{'Trail Page Cache Backend Peak'} // 0 } @s;
ok(defined $s[0]{'Trail Page Cache Backend Peak'} && $sum > 0 && $sum <= $bound,
	"together they held at most $sum bytes, within the 256 kB of trafficdb.trail_page_cache (each held 256 kB before)");
is(digest(sprintf($join, 'st'), q{SET trafficdb.trail_page_cache = '256kB'; }), $heap, 'and the join returns exactly the heap\'s rows');

# ---- 2. none, and a large one ----------------------------------------------------------------
@s = scans(q{SET trafficdb.trail_page_cache = 0; });
ok(!(grep { exists $_->{'Trail Page Cache Peak'} } @s), 'a bound of 0: no cache');
is(digest(sprintf($join, 'st'), q{SET trafficdb.trail_page_cache = 0; }), $heap, '  the same rows');
is(digest(sprintf($join, 'st'), q{SET trafficdb.trail_page_cache = '1GB'; }), $heap, 'a bound of 1 GB: the same rows');

# ---- 3. given back at the end of each statement ---------------------------------------------------
my @again = scans(q{SET trafficdb.trail_page_cache = '256kB'; });
my ($sum2) = sort { $b <=> $a } map { $_->{'Trail Page Cache Backend Peak'} // 0 } @again;
is($sum2, $sum, "the next statement's caches peak the same ($sum2 bytes): the budget was given back");
my ($rc, $out, $err) = $node->psql('postgres', $pre . q{SET trafficdb.trail_page_cache = '256kB'; SET statement_timeout = '300ms'; }
	  . 'SELECT count(*) FROM (' . sprintf($join, 'st') . ') q, generate_series(1, 100000)');
like($err, qr/statement timeout/, 'a statement cancelled in the middle of the join');
my @after = scans(q{SET trafficdb.trail_page_cache = '256kB'; });
my ($sum3) = sort { $b <=> $a } map { $_->{'Trail Page Cache Backend Peak'} // 0 } @after;
is($sum3, $sum, '  gives its budget back too');

$node->stop;
done_testing();
