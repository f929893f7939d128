# t/012_sql_safety.pl: no SQL call crashes the server, no role gets more than
# it was granted (issue 13).
#
# - every C function of the extension called with NULL in each argument
#   position, and with hostile values, as a superuser and as an ordinary
#   role: errors are fine, a crash (a server restart) is not;
# - trail_write(NULL, NULL) in particular (it crashed the server);
# - trail_write(server => s) needs USAGE on s, even with a PUBLIC user mapping;
# - changing trafficdb.trail_memory_cache between FETCHes of an open cursor
#   (it freed the block cache the cursor's pager still used);
# - tile(), tile_features() and geojson() are not parallel safe (workers would pin other
#   generations than the leader).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('sqlsafety');
my $su = tdb_superuser($node);
my $dir = PostgreSQL::Test::Utils::tempdir;
$node->safe_psql('postgres', q{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE ROLE app LOGIN;
CREATE TABLE roads (id bigint, geom geometry(LineString, 4326), name text);
INSERT INTO roads SELECT i, ST_SetSRID(ST_MakeLine(ST_MakePoint(24.9 + i * 0.001, 60.1), ST_MakePoint(24.9 + i * 0.001, 60.101)), 4326), 'r' || i
  FROM generate_series(1, 50) i;
SELECT trafficdb.load_map('roads', name_column => 'name');
});
my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');

sub still_up
{
	my ($what) = @_;
	is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started, "$what: no backend crashed");
}

# A value of each argument type that is valid in form (so that each NULL is
# the only odd argument of its call).
my %sample = (
	'regclass' => q{'trafficdb.feed'::regclass},
	'text' => q{'x'},
	'name' => q{'x'::name},
	'boolean' => 'true',
	'integer' => '1',
	'bigint' => '1',
	'double precision' => '1.0',
	'timestamp with time zone' => q{'2024-01-01'::timestamptz},
	'timestamp with time zone[]' => q{ARRAY['2024-01-01'::timestamptz]},
	'text[]' => q{'{}'::text[]},
	'oid' => '0');

# Every function of the extension that SQL can call (handlers excluded: they
# return fdw_handler, which SQL cannot call).
my @funcs = split /\n/, $node->safe_psql('postgres', q{
SELECT p.oid::regproc || '|' || p.proretset || '|' || coalesce(array_to_string(array(
         SELECT format_type(t, NULL) FROM unnest(p.proargtypes) t), ','), '')
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'trafficdb')
  AND p.prorettype NOT IN ('fdw_handler'::regtype)
ORDER BY 1});
ok(@funcs >= 10, scalar(@funcs) . ' functions of the extension found');

my $calls = 0;
for my $f (@funcs)
{
	my ($name, $retset, $args) = split /\|/, $f, -1;
	my @types = $args eq '' ? () : split /,/, $args;
	next if $name =~ /load_map$/;    # a NULL-free call would load pg_class: covered below
	for my $null (0 .. $#types)
	{
		my @vals = map { $_ == $null ? 'NULL' : ($sample{ $types[$_] } // 'NULL') } 0 .. $#types;
		my $call = "$name(" . join(', ', @vals) . ')';
		my $sql = $retset eq 't' ? "SELECT count(*) FROM $call" : "SELECT $call";
		for my $role ($su, 'app')
		{
			$node->psql('postgres', "SET ROLE \"$role\"; SET statement_timeout = '20s'; $sql");
			$calls++;
		}
	}
}
ok($calls > 20, "$calls calls with a NULL argument");
still_up('every function with NULL in each argument position');

my ($ret, $out, $err) = $node->psql('postgres', 'SELECT trafficdb.trail_write(NULL, NULL)');
like($err, qr/ERROR:  trafficdb.trail_write: query must not be NULL/, 'trail_write(NULL, NULL): a clear error');
($ret, $out, $err) = $node->psql('postgres', q{SELECT trafficdb.trail_write('SELECT 1', '/tmp/x.trail', page_seconds => NULL)});
like($err, qr/page_seconds must not be NULL/, 'trail_write: a NULL optional argument is named');
for my $c (q{trafficdb.load_map(NULL)}, q{trafficdb.load_map('roads', NULL)}, q{trafficdb.load_map('roads', 'id', NULL)})
{
	($ret, $out, $err) = $node->psql('postgres', "SELECT $c");
	like($err, qr/ERROR: .*must not be NULL|ERROR: .*null/i, "$c: a clear error");
}
# hostile values
for my $sql (q{SELECT trafficdb.tile(-1, 0, 0)}, q{SELECT trafficdb.tile(40, 1, 1)}, q{SELECT trafficdb.tile(2, 99, -5)},
	q{SELECT count(*) FROM trafficdb.tile_features(40, 1, 1)}, q{SELECT count(*) FROM trafficdb.tile_features(2, 99, -5)},
	q{SELECT trafficdb.geojson('NaN', 'Infinity', '-Infinity', 1e308)},
	q{SELECT trafficdb.trail_write('SELECT 1', 's3://b/k', server => 'no_such_server')},
	q{SELECT trafficdb.trail_write('', '', page_size => -1)}, q{SELECT trafficdb.trail_write('SELECT 1', 'relative/path')},
	q{SELECT * FROM trafficdb.changes_since(-1)}, q{SELECT * FROM trafficdb.changes_since(9223372036854775807)})
{
	$node->psql('postgres', $sql);
}
still_up('hostile values');

# trail_write(server => s) checks USAGE on s, as dblink and postgres_fdw do:
# a PUBLIC user mapping does not hand the server to everyone.
$node->safe_psql('postgres', q{
CREATE SERVER s3 FOREIGN DATA WRAPPER trafficdb_trails OPTIONS (endpoint 'http://127.0.0.1:9', region 'us-east-1');
CREATE USER MAPPING FOR PUBLIC SERVER s3 OPTIONS (access_key 'k', secret_key 'sekrit');
CREATE ROLE nousage LOGIN;
});
($ret, $out, $err) = $node->psql('postgres', q{SET ROLE nousage; SELECT trafficdb.trail_write('SELECT 1 AS id', 's3://bucket/key', server => 's3')});
like($err, qr/ERROR:  permission denied for foreign server s3/, 'trail_write to a server without USAGE: permission denied');
unlike($err, qr/sekrit/, 'the secret is not shown');

# ORDER BY geom <-> p LIMIT k is pushed down only for PostGIS's operator: a
# <-> of another schema (here: the farthest first) was taken for it
$node->safe_psql('postgres', q{
CREATE SCHEMA evil;
CREATE FUNCTION evil.far(geometry, geometry) RETURNS float8 LANGUAGE plpgsql IMMUTABLE AS 'BEGIN RETURN -public.ST_Distance($1, $2); END';
CREATE OPERATOR evil.<-> (LEFTARG = geometry, RIGHTARG = geometry, FUNCTION = evil.far);
});
is($node->safe_psql('postgres', q{SELECT string_agg(location_id::text, ',') FROM (SELECT location_id FROM trafficdb.locations
  ORDER BY geom OPERATOR(evil.<->) ST_SetSRID(ST_MakePoint(24.9, 60.1005), 4326) LIMIT 3) s}), '50,49,48',
	'a user-defined <-> orders as it says (not pushed down as nearest-first)');
is($node->safe_psql('postgres', q{SELECT string_agg(location_id::text, ',') FROM (SELECT location_id FROM trafficdb.locations
  ORDER BY geom <-> ST_SetSRID(ST_MakePoint(24.9, 60.1005), 4326) LIMIT 3) s}), '1,2,3',
	'PostGIS <-> still gives the nearest');

# tile() and geojson() read the shared-memory snapshot: never in parallel workers
is($node->safe_psql('postgres', q{SELECT string_agg(proname || ':' || proparallel::text, ',' ORDER BY proname) FROM pg_proc
  WHERE pronamespace = 'trafficdb'::regnamespace AND proname IN ('tile', 'tile_features', 'geojson', 'current_traffic', 'changes_since')}),
	'changes_since:u,current_traffic:u,geojson:r,tile:r,tile_features:r', 'no function reading the snapshot is PARALLEL SAFE');

# a trail url naming a FIFO: refused at once (open() waited for a writer)
system('mkfifo', "$dir/fifo.trail") == 0 or die 'mkfifo failed';
$node->safe_psql('postgres', qq{CREATE SERVER disk FOREIGN DATA WRAPPER trafficdb_trails;
  CREATE FOREIGN TABLE fifo_trail (id bigint, time timestamptz, geom geometry(Point, 4326)) SERVER disk OPTIONS (url '$dir/fifo.trail')});
($ret, $out, $err) = $node->psql('postgres', q{SET statement_timeout = '10s'; SELECT count(*) FROM fifo_trail});
like($err, qr/fifo.trail" is not a regular file/, 'a trail url naming a FIFO is refused, not waited on');

# trafficdb.trail_memory_cache changed while a cursor reads from S3
SKIP:
{
	my $endpoint = $ENV{MINIO_ENDPOINT};
	skip 'MINIO_ENDPOINT not set (scripts/test.sh starts MinIO)', 2 unless $endpoint;
	my $user = $ENV{MINIO_ROOT_USER};
	my $secret = $ENV{MINIO_ROOT_PASSWORD};
	tdb_make_bucket('tap-sqlsafety');
	$node->safe_psql('postgres', qq{
CREATE SERVER minio FOREIGN DATA WRAPPER trafficdb_trails OPTIONS (endpoint '$endpoint', region 'us-east-1', block_size '16kB');
CREATE USER MAPPING FOR CURRENT_USER SERVER minio OPTIONS (access_key '$user', secret_key '$secret');
CREATE TABLE ev_heap AS SELECT v AS id, '2024-03-01'::timestamptz + i * interval '1 s' AS time,
  ST_SetSRID(ST_MakePoint(24 + v * 0.01, 60 + i * 0.0001), 4326) AS geom, repeat('x', 40) AS pad
  FROM generate_series(1, 40) v, generate_series(1, 500) i;
SELECT trafficdb.trail_write('SELECT * FROM ev_heap', 's3://tap-sqlsafety/ev.trail', server => 'minio', page_size => 4096);
IMPORT FOREIGN SCHEMA "s3://tap-sqlsafety/ev.trail" FROM SERVER minio INTO public;
});
	my $got = $node->safe_psql('postgres', q{
SET trafficdb.trail_memory_cache = '64kB';
BEGIN;
DECLARE c CURSOR FOR SELECT id, time FROM ev WHERE id BETWEEN 1 AND 40;
FETCH 1000 FROM c;
SET trafficdb.trail_memory_cache = 0;
FETCH 3000 FROM c;
SET trafficdb.trail_memory_cache = '16kB';
FETCH 3000 FROM c;
SET trafficdb.trail_memory_cache = '256MB';
FETCH ALL FROM c;
COMMIT;
SELECT 'done';
});
	like($got, qr/done$/, 'a cursor went on reading across changes of trafficdb.trail_memory_cache');
	my @rows = grep { /\|/ } split /\n/, $got;
	is(scalar(@rows), 20000, 'and returned every row exactly once');
}
still_up('trail_memory_cache changes under an open cursor');

$node->stop;
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal/, 'no process was terminated by a signal');
done_testing();
