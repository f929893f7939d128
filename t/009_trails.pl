# t/009_trails.pl: the trail FDW against a real MinIO on 127.0.0.1 (started
# by scripts/test.sh: MINIO_ENDPOINT, MINIO_ROOT_USER, MINIO_ROOT_PASSWORD)
# and the tests' fault proxy in front of it (tdb_fault_proxy).
#
# trail_write() of a heap table to S3 and to a local file, IMPORT FOREIGN
# SCHEMA, every row equal to the heap's, 80 random queries (trail ids with =
# and ANY, time windows, boxes, ST_DWithin in degrees and metres, mixes)
# equal to the same query on the heap, pushdown fetching less than the file,
# LIMIT stopping the fetch, the disk cache serving a second run, errors for
# missing objects, bad credentials (the secret never shown), temporary
# credentials with and without their session token, missing user mappings
# and file privileges, statement_timeout interrupting a stalled GET,
# and GDAL's ogrinfo reading the table with a spatial filter.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use JSON::PP;
use lib 't';
use TdbTest;

my $endpoint = $ENV{MINIO_ENDPOINT} // die 'MINIO_ENDPOINT must name the MinIO of scripts/test.sh';
my $user = $ENV{MINIO_ROOT_USER} // die 'MINIO_ROOT_USER unset';
my $secret = $ENV{MINIO_ROOT_PASSWORD} // die 'MINIO_ROOT_PASSWORD unset';
my $proxy = tdb_fault_proxy();
my $cli = $ENV{TRAFFICDB_TRAIL} // die 'TRAFFICDB_TRAIL must name tools/trafficdb-trail';

# a bucket of our own
tdb_make_bucket('tap-trails');

my $node = tdb_node('trails');
my $dir = PostgreSQL::Test::Utils::tempdir;
$node->safe_psql('postgres', qq{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE SERVER s3 FOREIGN DATA WRAPPER trafficdb_trails
  OPTIONS (endpoint '$endpoint', region 'us-east-1', block_size '16kB', cache_dir '$dir/cache');
CREATE USER MAPPING FOR CURRENT_USER SERVER s3 OPTIONS (access_key '$user', secret_key '$secret');
CREATE SERVER disk FOREIGN DATA WRAPPER trafficdb_trails;

-- 300 vehicles, 100 to 149 events each, unique times per vehicle, positions
-- on the file's 1e-7 degree grid, a float, an int and a lexicon string with NULLs
CREATE TABLE ev AS
SELECT v AS vid,
  '2024-03-01 00:00:00+00'::timestamptz + (v * 37 % 3600) * interval '1 s' + i * interval '47 s' AS ts,
  ST_SetSRID(ST_MakePoint(round((24.5 + (v % 20) * 0.05 + i * 0.0003 * sin(v))::numeric, 7)::float8,
                          round((60.1 + (v / 20) * 0.03 + i * 0.0002 * cos(v))::numeric, 7)::float8), 4326) AS geom,
  round((10 + 5 * sin(i / 7.0 + v))::numeric, 2)::float8 AS speed,
  ((v * 13 + i * 7) % 360)::int AS heading,
  CASE WHEN (v + i) % 11 = 0 THEN NULL ELSE (ARRAY['moored','underway','anchored','fishing'])[1 + (v + i) % 4] END AS status
FROM generate_series(1, 300) v, generate_series(0, 99 + v % 50) i;
});
my $nev = $node->safe_psql('postgres', 'SELECT count(*) FROM ev');

# version 2: the fractions below assume pages much larger than the footer, which version 3's
# pages, much smaller for the same events, are not until the footer is read lazily (issue 33)
is($node->safe_psql('postgres', q{SELECT trafficdb.trail_write('SELECT * FROM ev ORDER BY random()',
  's3://tap-trails/vehicles.trail', server => 's3', id_column => 'vid', time_column => 'ts', page_size => 4096, page_seconds => 900,
  format_version => 2)}),
	$nev, "trail_write wrote $nev events (in random order) to S3");
$node->safe_psql('postgres', q{IMPORT FOREIGN SCHEMA "s3://tap-trails/vehicles.trail" FROM SERVER s3 INTO public});
is($node->safe_psql('postgres', q{SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
  FROM pg_attribute a WHERE a.attrelid = 'vehicles'::regclass AND a.attnum > 0}),
	'vid bigint, ts timestamp with time zone, geom geometry(Point,4326), speed double precision, heading bigint, status text',
	'IMPORT FOREIGN SCHEMA "s3://..." makes a table named after the file with typed columns');

my $cols = q{format('%s|%s|%s|%s|%s|%s', vid, ts, encode(ST_AsEWKB(geom), 'hex'), speed, heading, status)};
sub digest
{
	my ($table, $where) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) || ':' || coalesce(md5(string_agg($cols, ',' ORDER BY vid, ts)), '-') FROM $table WHERE $where");
}
is(digest('vehicles', 'true'), digest('ev', 'true'), 'every event read back from S3 equals the heap row');

# local file written by trail_write, read through a table with a path
$node->safe_psql('postgres', qq{SELECT trafficdb.trail_write('SELECT * FROM ev', '$dir/local.trail',
  id_column => 'vid', time_column => 'ts');
  CREATE FOREIGN TABLE local_vehicles (vid bigint, ts timestamptz, geom geometry(Point, 4326), speed float8,
    heading int, status text) SERVER disk OPTIONS (url '$dir/local.trail', id_column 'vid', time_column 'ts')});
is(digest('local_vehicles', 'true'), digest('ev', 'true'), 'a local trail file reads back equal (int column as integer)');

# Each row's point is written into one buffer of the scan (no palloc per row): it lives until the next
# row, as a value in the per-tuple context does. Whatever keeps a row's geometry longer copies it.
for my $keep (
	[ 'array_agg', q{SELECT md5((SELECT string_agg(ST_AsText(g), ',' ORDER BY ST_X(g), ST_Y(g)) FROM unnest(array_agg(geom)) g)) FROM %s} ],
	[ 'ST_MakeLine ordered', q{SELECT md5(ST_AsText(ST_MakeLine(geom ORDER BY vid, ts))) FROM %s} ],
	[ 'lag() over a window', q{SELECT md5(string_agg(ST_AsText(p), ',' ORDER BY vid, ts)) FROM (SELECT vid, ts, lag(geom) OVER (ORDER BY vid, ts) p FROM %s) s} ],
	[ 'a materialized CTE', q{WITH x AS MATERIALIZED (SELECT vid, ts, geom FROM %s) SELECT md5(string_agg(ST_AsText(geom), ',' ORDER BY vid, ts)) FROM x} ],
	[ 'DISTINCT', q{SELECT count(*) FROM (SELECT DISTINCT geom FROM %s) s} ])
{
	is($node->safe_psql('postgres', sprintf($keep->[1], 'local_vehicles')), $node->safe_psql('postgres', sprintf($keep->[1], 'ev')),
		"$keep->[0] of the scan's points equals the heap's");
}

# A function of PostGIS's name with another signature in PostGIS's schema is
# not pushed down (the scan would read its bytea as a geometry): it runs as
# SQL and every row is there.
$node->safe_psql('postgres', q{CREATE FUNCTION public.st_intersects(bytea, geometry) RETURNS boolean
  LANGUAGE sql STRICT IMMUTABLE AS $$ SELECT true $$});
is($node->safe_psql('postgres', q{SELECT count(*) FROM local_vehicles WHERE st_intersects('\x00000000020000000000ff7f'::bytea, geom)}),
	$node->safe_psql('postgres', 'SELECT count(*) FROM ev'), 'st_intersects(bytea, geometry) of a user is not pushed down');
$node->safe_psql('postgres', 'DROP FUNCTION public.st_intersects(bytea, geometry)');

# random queries against the heap
srand(20261122);
my @checks;
for my $k (1 .. 80)
{
	my @conds;
	my $kind = $k % 8;
	my $v = 1 + int(rand(300));
	my $t0 = sprintf("'2024-03-01 00:00:00+00'::timestamptz + interval '%d s'", int(rand(10000)));
	my $x = 24.5 + rand(1.0);
	my $y = 60.1 + rand(0.45);
	my $w = 0.005 + rand(0.1);
	push @conds, "vid = $v" if $kind == 0 || $kind == 5;
	push @conds, sprintf("vid = ANY ('{%s}'::bigint[])", join(',', map { 1 + int(rand(320)) } 1 .. 1 + int(rand(12))))
	  if $kind == 1 || $kind == 6;
	push @conds, "ts >= $t0 AND ts < $t0 + interval '@{[1 + int(rand(60))]} min'" if $kind == 2 || $kind == 5 || $kind == 7;
	push @conds, "ts BETWEEN $t0 AND $t0 + interval '20 min'" if $kind == 6;
	push @conds, sprintf("geom && ST_MakeEnvelope(%.6f, %.6f, %.6f, %.6f, 4326)", $x, $y, $x + $w, $y + $w / 2)
	  if $kind == 3 || $kind == 7;
	push @conds, sprintf("ST_DWithin(geom, ST_SetSRID(ST_MakePoint(%.6f, %.6f), 4326), %.4f)", $x, $y, $w / 3)
	  if $kind == 4;
	push @conds, sprintf("ST_DWithin(geom::geography, ST_SetSRID(ST_MakePoint(%.6f, %.6f), 4326)::geography, %d)",
		$x, $y, 200 + int(rand(3000)))
	  if $kind == 5 || $kind == 6;
	push @conds, "ts > $t0" if $kind == 1;
	my $where = join(' AND ', @conds);
	push @checks, [ $where, digest('vehicles', $where), digest('ev', $where) ];
}
my @bad = grep { $_->[1] ne $_->[2] } @checks;
my $nonempty = grep { $_->[2] !~ /^0:/ } @checks;
is(scalar(@bad), 0, "80 random queries equal the heap's answers ($nonempty non-empty)")
  or diag(join("\n", map { "$_->[0]: $_->[1] vs $_->[2]" } @bad[0 .. ($#bad < 4 ? $#bad : 4)]));

# GDAL as a GIS client: ogrinfo with a spatial filter reads the trail table from S3
{
	my $connstr = 'PG:host=' . $node->host . ' port=' . $node->port . ' dbname=postgres';
	my @spat = (24.6, 60.15, 24.7, 60.2);
	my $want = $node->safe_psql('postgres', "SELECT count(*) FROM ev WHERE geom && ST_MakeEnvelope(@{[join ', ', @spat]}, 4326)");
	my ($ogr_out, $ogr_err) = run_command([ 'ogrinfo', '-ro', '-q', '-al', '-spat', @spat, $connstr, 'public.vehicles' ]);
	my $features = () = $ogr_out =~ /OGRFeature\(/g;
	is($features, $want, "ogrinfo -spat returns the $want events of the box from the trail file on S3");
}

sub explain_json
{
	my ($sql) = @_;
	my $json = $node->safe_psql('postgres', "EXPLAIN (ANALYZE, FORMAT JSON) $sql");
	my $plan = decode_json($json)->[0]{Plan};
	$plan = $plan->{Plans}[0] while $plan->{'Node Type'} ne 'Foreign Scan';
	return $plan;
}

# pushdown: one trail, a window, a box each fetch a fraction of the file
$node->safe_psql('postgres', 'ALTER SERVER s3 OPTIONS (SET cache_dir \'none\')');
my $one = explain_json('SELECT * FROM vehicles WHERE vid = 42');
my $size = $one->{'File Size'};
ok($one->{'Trail Ids Pushed Down'} =~ /vid = 42/, 'EXPLAIN shows the trail id pushed down');
cmp_ok($one->{'Bytes From S3'}, '<', $size / 4,
	"one trail fetched $one->{'Bytes From S3'} of $size bytes from S3 ($one->{'Trail Pages Read'} of $one->{'Trail Pages In File'} pages)");
cmp_ok($one->{'Trail Pages Read'}, '<=', 10, 'and read only its pages');
my $box = explain_json('SELECT * FROM vehicles WHERE geom && ST_MakeEnvelope(24.6, 60.15, 24.62, 60.16, 4326)');
ok($box->{'Area Pushed Down'} =~ /box of/, 'EXPLAIN shows the area pushed down');
cmp_ok($box->{'Trail Pages Pruned'}, '>', $box->{'Trail Pages Read'}, "a small box prunes most pages ($box->{'Trail Pages Read'} read, $box->{'Trail Pages Pruned'} pruned)");
my $win = explain_json(q{SELECT * FROM vehicles WHERE ts BETWEEN '2024-03-01 02:40+00' AND '2024-03-01 02:45+00'});
ok($win->{'Time Range Pushed Down'} =~ /ts >=/, 'EXPLAIN shows the time range pushed down');
cmp_ok($win->{'Bytes From S3'}, '<', $size / 2, "a 5-minute window fetched $win->{'Bytes From S3'} of $size bytes");
my $all = explain_json('SELECT * FROM vehicles');
cmp_ok($all->{'Bytes From S3'}, '>=', $size - 65536, 'a full scan fetches the whole file');
my $lim = explain_json('SELECT * FROM vehicles LIMIT 1');
cmp_ok($lim->{'Bytes From S3'}, '<', $size / 4, "LIMIT 1 stops fetching ($lim->{'Bytes From S3'} of $size bytes)");

# a parameterized join: ids from another table, rescans prune per id
is($node->safe_psql('postgres', q{SET enable_hashjoin = off; SET enable_mergejoin = off;
  SELECT count(*) FROM (VALUES (3), (77), (150)) w(id) JOIN vehicles v ON v.vid = w.id}),
	$node->safe_psql('postgres', 'SELECT count(*) FROM ev WHERE vid IN (3, 77, 150)'), 'a nested-loop join by trail id');

# the shared disk cache: a second run is served from it
$node->safe_psql('postgres', "ALTER SERVER s3 OPTIONS (SET cache_dir '$dir/cache')");
explain_json('SELECT * FROM vehicles WHERE vid BETWEEN 10 AND 40');
my $again = $node->safe_psql('postgres', q{SET trafficdb.trail_memory_cache = 0;
  EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM vehicles WHERE vid BETWEEN 10 AND 40});
my $p = decode_json($again)->[0]{Plan};
cmp_ok($p->{'Bytes From Disk Cache'}, '>', 0, "a second session reads $p->{'Bytes From Disk Cache'} bytes from the disk cache");
cmp_ok($p->{'Bytes From S3'}, '<=', 65536, 'and only the tail (size and ETag) from S3');

# errors
my ($rc, $out, $err) = $node->psql('postgres', q{SELECT count(*) FROM vehicles_missing});
$node->safe_psql('postgres', q{CREATE FOREIGN TABLE vehicles_missing (vid bigint, ts timestamptz) SERVER s3
  OPTIONS (url 's3://tap-trails/no/such.trail', id_column 'vid', time_column 'ts')});
($rc, $out, $err) = $node->psql('postgres', 'SELECT count(*) FROM vehicles_missing');
like($err, qr/object not found: bucket "tap-trails", key "no\/such.trail"/, 'a missing object names bucket and key');
$node->safe_psql('postgres', qq{CREATE ROLE mallory LOGIN; GRANT USAGE ON FOREIGN SERVER s3 TO mallory;
  GRANT SELECT ON vehicles TO mallory; GRANT CREATE ON SCHEMA public TO mallory;
  CREATE USER MAPPING FOR mallory SERVER s3 OPTIONS (access_key '$user', secret_key 'not-the-secret-42')});
($rc, $out, $err) = $node->psql('postgres', 'SELECT count(*) FROM vehicles', extra_params => [ '-U', 'mallory' ]);
like($err, qr/access denied .*HTTP 403/, 'a wrong secret key is refused with 403');
unlike($err, qr/not-the-secret-42|\Q$secret\E/, 'and the error shows no secret');
$node->safe_psql('postgres', 'DROP USER MAPPING FOR mallory SERVER s3');
($rc, $out, $err) = $node->psql('postgres', 'SELECT count(*) FROM vehicles', extra_params => [ '-U', 'mallory' ]);
like($err, qr/user mapping not found for "mallory"/, 'no user mapping: refused');

# temporary credentials (MinIO's STS, AssumeRole signed with the root key):
# accepted with their session token, refused without it
my $sts = `curl -s --max-time 20 --aws-sigv4 aws:amz:us-east-1:sts --user '$user:$secret' -d 'Action=AssumeRole&DurationSeconds=900&Version=2011-06-15' '$endpoint/'`;
my ($tkey) = $sts =~ m{<AccessKeyId>([^<]+)</AccessKeyId>};
my ($tsecret) = $sts =~ m{<SecretAccessKey>([^<]+)</SecretAccessKey>};
my ($token) = $sts =~ m{<SessionToken>([^<]+)</SessionToken>};
ok(defined $token, 'MinIO issued temporary credentials') or diag($sts);
$node->safe_psql('postgres', qq{CREATE USER MAPPING FOR mallory SERVER s3
  OPTIONS (access_key '$tkey', secret_key '$tsecret', session_token '$token')});
($rc, $out, $err) = $node->psql('postgres', 'SELECT count(*) FROM vehicles', extra_params => [ '-U', 'mallory' ]);
is($out, $nev, 'temporary credentials with their session token read the table');
$node->safe_psql('postgres', 'ALTER USER MAPPING FOR mallory SERVER s3 OPTIONS (DROP session_token)');
($rc, $out, $err) = $node->psql('postgres', 'SELECT count(*) FROM vehicles', extra_params => [ '-U', 'mallory' ]);
like($err, qr/access denied .*HTTP 403 InvalidTokenId/, 'without the session token they are refused');
unlike($err, qr/\Q$tsecret\E|\Q$token\E/, 'and the error shows neither secret nor token');
$node->safe_psql('postgres', 'DROP USER MAPPING FOR mallory SERVER s3');
{
	local $ENV{AWS_ACCESS_KEY_ID} = $tkey;
	local $ENV{AWS_SECRET_ACCESS_KEY} = $tsecret;
	local $ENV{AWS_SESSION_TOKEN} = $token;
	local $ENV{AWS_ENDPOINT_URL} = $endpoint;
	is(system("$cli info s3://tap-trails/vehicles.trail >/dev/null"), 0, 'the CLI sends AWS_SESSION_TOKEN');
	delete $ENV{AWS_SESSION_TOKEN};
	isnt(system("$cli info s3://tap-trails/vehicles.trail >/dev/null 2>&1"), 0, 'and fails without it');
}

($rc, $out, $err) = $node->psql('postgres', qq{CREATE FOREIGN TABLE x (vid bigint) SERVER disk OPTIONS (url '$dir/local.trail')},
	extra_params => [ '-U', 'mallory' ]);
like($err, qr/permission denied to read trail file|must be owner|permission denied for foreign server/,
	'naming a server file needs pg_read_server_files');
$node->psql('postgres', q{CREATE FOREIGN TABLE elsewhere (vid bigint, ts timestamptz) SERVER s3
  OPTIONS (url 'http://127.0.0.1:9/secret', id_column 'vid', time_column 'ts')}, extra_params => [ '-U', 'mallory' ]);
($rc, $out, $err) = $node->psql('postgres', 'SELECT count(*) FROM elsewhere', extra_params => [ '-U', 'mallory' ]);
like($err, qr/permission denied to read "http:\/\/127.0.0.1:9\/secret" through server "s3"/,
	'an http URL outside the server endpoint needs pg_read_server_files');
($rc, $out, $err) = $node->psql('postgres', qq{SELECT trafficdb.trail_write('SELECT * FROM ev', '$dir/x.trail', id_column => 'vid', time_column => 'ts')},
	extra_params => [ '-U', 'mallory' ]);
like($err, qr/permission denied to write trail file/, 'writing a server file needs pg_write_server_files');
($rc, $out, $err) = $node->psql('postgres', q{SELECT trafficdb.trail_write('SELECT vid, ts, ST_Transform(geom, 3857) AS geom FROM ev',
  's3://tap-trails/bad.trail', server => 's3', id_column => 'vid', time_column => 'ts')});
like($err, qr/position in SRID 3857; expected 4326/, 'trail_write names a position in the wrong SRID');
# a position that is not one point: named, not "function N returned NULL" (an
# empty point) or PostGIS's ST_X error without the row (issue 13, item 11)
($rc, $out, $err) = $node->psql('postgres', qq{SELECT trafficdb.trail_write(\$q\$SELECT 1::bigint AS id, now() AS time, 'SRID=4326;POINT(1 1)'::geometry AS geom
  UNION ALL SELECT 1, now(), 'SRID=4326;POINT EMPTY'\$q\$, '$dir/empty.trail')});
like($err, qr/ERROR:  row 2 of the query has a position \("geom"\) that is not one point but an empty POINT\nDETAIL:  Each event of a trail is at one point: geometry\(Point, 4326\)\./,
	'trail_write names an empty point and its row');
($rc, $out, $err) = $node->psql('postgres', qq{SELECT trafficdb.trail_write(\$q\$SELECT 1::bigint AS id, now() AS time, 'SRID=4326;LINESTRING(1 1, 2 2)'::geometry AS geom\$q\$,
  '$dir/line.trail')});
like($err, qr/ERROR:  row 1 of the query has a position \("geom"\) that is not one point but a LINESTRING/,
	'trail_write names a position that is a line');
($rc, $out, $err) = $node->psql('postgres', q{SELECT trafficdb.trail_write('SELECT 1 AS id', 's3://tap-trails/bad.trail', server => 's3')});
like($err, qr/has no column "time"/, 'trail_write names a missing column');
($rc, $out, $err) = $node->psql('postgres', q{CREATE SERVER bad FOREIGN DATA WRAPPER trafficdb_trails OPTIONS (block_size '3MB')});
like($err, qr/invalid value for option "block_size": "3MB"/, 'a block size that is not a power of two is refused');

# a corrupted file: a clear error, no crash
open(my $fh, '+<', "$dir/local.trail") or die;
binmode $fh;
my $fsize = -s "$dir/local.trail";
seek($fh, $fsize - 100, 0);
print $fh "\xff" x 20;
close $fh;
($rc, $out, $err) = $node->psql('postgres', 'SELECT count(*) FROM local_vehicles');
like($err, qr/could not read the footer of trail file .*(CRC|corrupt|damaged|checksum)/i, 'a damaged footer is a clear error');

# statement_timeout while the server stalls mid-body: interrupted within a second or so
$node->safe_psql('postgres', qq{CREATE SERVER slow FOREIGN DATA WRAPPER trafficdb_trails
  OPTIONS (endpoint '$proxy', block_size '16kB', cache_dir 'none', retries '0');
  CREATE USER MAPPING FOR CURRENT_USER SERVER slow OPTIONS (access_key '$user', secret_key '$secret');
  CREATE FOREIGN TABLE slow_vehicles (vid bigint, ts timestamptz) SERVER slow
    OPTIONS (url 's3://tap-trails/vehicles.trail', id_column 'vid', time_column 'ts')});
system('curl', '-fs', '-o', '/dev/null', "$proxy/__fault__?plan=stall") == 0 or die 'could not arm the proxy';
my $t0 = time();
($rc, $out, $err) = $node->psql('postgres', q{SET statement_timeout = '1s'; SELECT count(*) FROM slow_vehicles});
my $took = time() - $t0;
like($err, qr/statement timeout/, 'statement_timeout interrupts a stalled GET');
cmp_ok($took, '<', 3.5, sprintf('within %.2f s (the stall lasts 8 s)', $took));
is($node->safe_psql('postgres', 'SELECT count(*) FROM slow_vehicles'), $nev, 'the same table reads fine afterwards');

$node->stop;
done_testing();
