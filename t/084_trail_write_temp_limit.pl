# t/084_trail_write_temp_limit.pl: trafficdb.trail_write keeps to the
# administrator's temp_file_limit.
#
# Any role with USAGE on a trails server may call trail_write (to s3://),
# and it sorts past its memory limit in runs spilled to the server's
# $TMPDIR and writes the whole file to an unnamed temporary file there
# before storing it.  Neither counted against temp_file_limit, PostgreSQL's
# bound on a process's temporary files, so one query could fill the
# server's temporary directory whatever the administrator set.  Now the
# spilled runs and the file together stay within it:
# 1. with temp_file_limit below the file's size trail_write fails, naming
#    the limit, and leaves nothing behind;
# 2. with room (or -1, no limit) the same call writes the file exactly.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('trail_temp_limit');
my $dir = PostgreSQL::Test::Utils::tempdir;
$node->safe_psql('postgres', q{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE SERVER loc FOREIGN DATA WRAPPER trafficdb_trails;
CREATE TABLE ev AS SELECT 'v' || (i % 50) AS id, '2024-01-01'::timestamptz + i * interval '1 s' AS time,
  ST_SetSRID(ST_MakePoint(24 + (i::int8 * 7919 % 10007) * 0.0001, 60 + (i::int8 * 104729 % 10009) * 0.0001), 4326) AS geom,
  (i::int8 * 2654435761 % 1000003)::float8 / 7 AS f FROM generate_series(1, 50000) i;
});

my $call = "SELECT trafficdb.trail_write('SELECT * FROM ev', '$dir/t.trail')";
my ($rc, $out, $err) = $node->psql('postgres', "SET temp_file_limit = '64kB'; $call");
isnt($rc, 0, 'trail_write of a file larger than temp_file_limit (64 kB) fails');
like($err, qr/temp_file_limit \(64kB\)/, '  naming the limit') or diag($err);
ok(!-e "$dir/t.trail", '  and writes no file');

is($node->safe_psql('postgres', "SET temp_file_limit = '10MB'; $call"), '50000', 'with 10 MB of room it writes the 50000 events');
cmp_ok(-s "$dir/t.trail", '>', 65536, '  a file of ' . (-s "$dir/t.trail") . ' bytes, more than 64 kB');
unlink "$dir/t.trail";
is($node->safe_psql('postgres', "SET temp_file_limit = -1; $call"), '50000', 'and with no limit (-1)');
$node->safe_psql('postgres', qq{CREATE FOREIGN TABLE t (id text, time timestamptz, geom geometry(Point, 4326), f float8)
  SERVER loc OPTIONS (url '$dir/t.trail')});
is($node->safe_psql('postgres', q{SELECT count(*) || ':' || round(sum(f)::numeric, 3) FROM t}),
	$node->safe_psql('postgres', q{SELECT count(*) || ':' || round(sum(f)::numeric, 3) FROM ev}), 'the file reads back');

$node->stop;
done_testing();
