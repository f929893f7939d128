# t/001_preload.pl: trafficdb refuses to work, cleanly, unless the
# postmaster preloads it; once preloaded it installs and works; a server
# restarted without it keeps running and says what is wrong.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = PostgreSQL::Test::Cluster->new('nopreload');
$node->init(tdb_initdb_utf8());
$node->start;
is($node->safe_psql('postgres', q{SELECT string_agg(DISTINCT pg_encoding_to_char(encoding) || ' ' || datcollate, ',') FROM pg_database}),
	'UTF8 C.UTF-8', 'every database of a test cluster is UTF8 (C.UTF-8), whatever the environment\'s locale');
$node->safe_psql('postgres', 'CREATE EXTENSION postgis');

# 1. CREATE EXTENSION on a server without the library preloaded.
my ($ret, $out, $err) = $node->psql('postgres', 'CREATE EXTENSION trafficdb',
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
isnt($ret, 0, 'CREATE EXTENSION fails without shared_preload_libraries');
like($err, qr/ERROR:  55000: trafficdb must be loaded via shared_preload_libraries/,
	'error names the cause, with SQLSTATE object_not_in_prerequisite_state');
like($err, qr/HINT:  Add 'trafficdb' to shared_preload_libraries in postgresql.conf/,
	'hint says what to do');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_extension WHERE extname = 'trafficdb'"),
	'0', 'no extension left behind');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_namespace WHERE nspname = 'trafficdb'"),
	'0', 'no schema left behind');
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'server still up');

# 2. LOAD in a session is not a way around it.
($ret, $out, $err) = $node->psql('postgres',
	"LOAD 'trafficdb'; CREATE EXTENSION trafficdb");
like($err, qr/trafficdb must be loaded via shared_preload_libraries/,
	'LOAD in a session does not count as preloading');

# 3. Preloaded: it installs and works.
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'trafficdb'");
$node->restart;
$node->safe_psql('postgres', 'CREATE EXTENSION trafficdb');
is($node->safe_psql('postgres', 'SELECT trafficdb.version()'),
	'0.1.0', 'works when preloaded');
# a table of each wrapper, for section 4
$node->safe_psql('postgres', q{
CREATE SERVER st FOREIGN DATA WRAPPER trafficdb_streams OPTIONS (filename '/nonexistent/x.tsf');
CREATE FOREIGN TABLE st_nav (ts timestamptz, v float8) SERVER st OPTIONS (stream 'nav');
CREATE SERVER tr FOREIGN DATA WRAPPER trafficdb_trails;
CREATE FOREIGN TABLE tr_t (id bigint, time timestamptz, geom geometry(Point, 4326)) SERVER tr OPTIONS (url '/nonexistent.trail');
});

# 4. The same server restarted without the library: SQL entry points refuse,
#    the server keeps running.
$node->append_conf('postgresql.conf', "shared_preload_libraries = ''");
$node->restart;
($ret, $out, $err) = $node->psql('postgres', 'SELECT trafficdb.version()');
isnt($ret, 0, 'functions refuse to run once the library is no longer preloaded');
like($err, qr/trafficdb must be loaded via shared_preload_libraries/,
	'with the same clear error');
like($err, qr/DETAIL:  The server was started with shared_preload_libraries = ''/,
	'detail shows the current setting');
# Every entry point, not only the functions: scans of each wrapper's tables
# (the locations scan crashed the server: its planner read shared state the
# postmaster never set up), its SQL functions, its views.
my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
for my $sql ('SELECT count(*) FROM trafficdb.locations',
	'SELECT * FROM trafficdb.locations WHERE location_id = 1',
	'EXPLAIN SELECT * FROM trafficdb.locations ORDER BY geom <-> ST_MakePoint(0, 0) LIMIT 1',
	'SELECT count(*) FROM st_nav', 'INSERT INTO st_nav VALUES (now(), 1)', 'SELECT count(*) FROM tr_t',
	'SELECT * FROM trafficdb.status', 'SELECT * FROM trafficdb.readers', 'SELECT trafficdb.publish()',
	q{SELECT trafficdb.load_map('pg_class')}, 'SELECT trafficdb.tile(1, 0, 0)',
	'SELECT trafficdb.geojson(0, 0, 1, 1)', 'SELECT * FROM trafficdb.changes_since(0)',
	q{SELECT trafficdb.stream_aggregate('st_nav', 'v', now(), now())},
	q{SELECT * FROM trafficdb.stream_resample('st_nav', 'v', ARRAY[now()])},
	q{SELECT trafficdb.trail_write('SELECT 1', '/tmp/x.trail')}, 'SELECT trafficdb.trail_write(NULL, NULL)',
	q{IMPORT FOREIGN SCHEMA "/nonexistent.trail" FROM SERVER tr INTO public},
	q{CREATE FOREIGN TABLE st2 (ts timestamptz) SERVER st OPTIONS (stream 'x')})
{
	($ret, $out, $err) = $node->psql('postgres', $sql);
	like($err, qr/trafficdb must be loaded via shared_preload_libraries/, "without the library: $sql");
}
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started, 'no backend crashed (no restart)');
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'server still up');
$node->safe_psql('postgres', 'DROP EXTENSION trafficdb CASCADE');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_namespace WHERE nspname = 'trafficdb'"),
	'0', 'the extension can still be dropped');

$node->stop;
done_testing();
