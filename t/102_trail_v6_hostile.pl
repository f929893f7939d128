# t/102_trail_v6_hostile.pl: trail format version 6 (small files' pages
# column-major) attacked from SQL (hostile-v6 review).  Needs MinIO and the
# fault proxy (scripts/tap.sh with TAP_MINIO=1).
#
# 1. trail_write's default writes version 6 for a small file, 5 past 64 kB;
#    both read back as the heap's rows, whole and projected (a column, the
#    positions only, the ids only).
# 2. Hostile files behind a foreign table, read by a role with
#    pg_read_server_files but no superuser: a version-5 file claiming 6, a
#    version-6 file claiming 5 (every checksum good), a truncated one: a
#    clean "corrupted" error, never rows, and the backend lives on.
# 3. trail_write with each argument NULL: an error naming it, or the
#    default (server, page_size, bucket_seconds); format_version 0, 7: refused.
# 4. A role without pg_write_server_files cannot write a server path, nor
#    one without pg_read_server_files read one; granted, it can.
# 5. statement_timeout at a stalled GET of a version-6 file's pages on S3.
# 6. kill -9 of a backend in trail_write: nothing under the final name,
#    the cluster recovers and writes it afterwards.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IPC::Run;
use lib 't';
use TdbTest;

my $endpoint = $ENV{MINIO_ENDPOINT} // die 'MINIO_ENDPOINT must name the MinIO of scripts/tap.sh (TAP_MINIO=1)';
my $user = $ENV{MINIO_ROOT_USER} // die 'MINIO_ROOT_USER unset';
my $secret = $ENV{MINIO_ROOT_PASSWORD} // die 'MINIO_ROOT_PASSWORD unset';
my $proxy = tdb_fault_proxy();
my $bucket = 'tap-v6hostile';
tdb_make_bucket($bucket);

my $dir = PostgreSQL::Test::Utils::tempdir;
chmod 0777, $dir;
my $node = tdb_node('trail_v6_hostile', restart_after_crash => 'on');
my $su = tdb_superuser($node);
$node->safe_psql('postgres', qq{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE SERVER disk FOREIGN DATA WRAPPER trafficdb_trails;
CREATE SERVER s3 FOREIGN DATA WRAPPER trafficdb_trails
  OPTIONS (endpoint '$endpoint', region 'us-east-1', block_size '16kB', cache_dir 'none');
CREATE USER MAPPING FOR CURRENT_USER SERVER s3 OPTIONS (access_key '$user', secret_key '$secret');
CREATE TABLE small AS
SELECT v::bigint AS id, '2024-03-01 00:00:00+00'::timestamptz + i * interval '30 s' + v * interval '1 ms' AS time,
  ST_SetSRID(ST_MakePoint(24.5 + v * 0.01 + i * 0.0001, 60.1 + i * 0.0002), 4326) AS geom,
  round((10 + 5 * sin(i + v))::numeric, 2)::float8 AS speed, (v * 7 + i) % 5 AS alt,
  CASE WHEN i % 4 = 0 THEN NULL ELSE 'st' || (v % 3) END AS status
FROM generate_series(1, 40) v, generate_series(0, 49) i;
CREATE TABLE big AS
SELECT v::bigint AS id, '2024-03-01 00:00:00+00'::timestamptz + i * interval '30 s' + v * interval '1 ms' AS time,
  ST_SetSRID(ST_MakePoint(24.5 + v * 0.001 + i * 0.0001, 60.1 + i * 0.0002), 4326) AS geom,
  random() AS speed, (v * 7 + i) % 5 AS alt, NULL::text AS status
FROM generate_series(1, 400) v, generate_series(0, 99) i;
});
for my $t ('small', 'big')
{
	$node->safe_psql('postgres', qq{SELECT trafficdb.trail_write('SELECT * FROM $t', '$dir/$t.trail');
	  CREATE FOREIGN TABLE ${t}_t (id bigint, time timestamptz, geom geometry(Point, 4326), speed float8, alt int, status text)
	    SERVER disk OPTIONS (url '$dir/$t.trail', id_column 'id', time_column 'time')});
}

sub file_version
{
	my ($path) = @_;
	open(my $fh, '<:raw', $path) or die "$path: $!";
	local $/;
	my $b = <$fh>;
	close($fh);
	my $h = unpack('V', substr($b, 8, 4));
	my $t = unpack('v', substr($b, length($b) - 48 + 28, 2));
	return $h == $t ? $h : "header $h, trailer $t";
}
is(file_version("$dir/small.trail"), 6, 'a small file is written as version 6 by default');
is(file_version("$dir/big.trail"), 5, 'a file past 64 kB of pages as version 5');

# 1. the heap's rows, whole and projected
sub digest
{
	my ($from, $cols, $pre) = @_;
	my ($rc, $out, $err) = $node->psql('postgres', ($pre // '') . "SELECT count(*) || ':' || coalesce(md5(string_agg(concat_ws('|', $cols), ',' ORDER BY id, time)), '-') FROM $from");
	diag($err) if $rc;
	return $out;
}
for my $t ('small', 'big')
{
	for my $cols ("id, time, encode(ST_AsEWKB(geom), 'hex'), speed, alt, status", 'id, time', 'id, time, status',
		"id, time, ST_X(geom), ST_Y(geom)", 'id, time, alt, speed')
	{
		is(digest("${t}_t", $cols), digest($t, $cols), "$t: ($cols) as the heap's");
	}
	for my $w ('id = 7', 'id = ANY(ARRAY[1, 40, NULL, 40, 999])', "time < '2024-03-01 00:05:00+00'")
	{
		is(digest("(SELECT * FROM ${t}_t WHERE $w) q", 'id, time, speed, status'),
			digest("(SELECT * FROM $t WHERE $w) q", 'id, time, speed, status'), "$t WHERE $w: the heap's rows");
	}
}

# 2. hostile files
my @crc_table;
for my $i (0 .. 255)
{
	my $c = $i;
	$c = ($c & 1) ? (($c >> 1) ^ 0x82F63B78) : ($c >> 1) for 1 .. 8;
	$crc_table[$i] = $c;
}
sub crc32c
{
	my $crc = 0xFFFFFFFF;
	$crc = ($crc >> 8) ^ $crc_table[($crc ^ $_) & 0xFF] for unpack('C*', $_[0]);
	return $crc ^ 0xFFFFFFFF;
}
sub slurp { open(my $fh, '<:raw', $_[0]) or die "$_[0]: $!"; local $/; my $b = <$fh>; return $b; }
sub spew { open(my $fh, '>:raw', $_[0]) or die "$_[0]: $!"; print $fh $_[1]; close($fh); chmod 0644, $_[0]; }
# the version in the header, the footer and the trailer, the checksums made good
sub set_version
{
	my ($b, $v) = @_;
	my $len = length($b);
	my ($foff, $flen) = unpack('Q<Q<', substr($b, $len - 48, 16));
	substr($b, 8, 4) = pack('V', $v);
	substr($b, $foff + 4, 1) = chr($v);
	substr($b, $len - 48 + 24, 4) = pack('V', crc32c(substr($b, $foff, $flen)));
	substr($b, $len - 48 + 28, 2) = pack('v', $v);
	substr($b, $len - 48 + 40, 4) = pack('V', crc32c(substr($b, $len - 48, 40)));
	return $b;
}
$node->safe_psql('postgres', qq{SELECT trafficdb.trail_write('SELECT * FROM small', '$dir/small5.trail', format_version => 5)});
is(file_version("$dir/small5.trail"), 5, 'format_version => 5 writes version 5');
spew("$dir/v5as6.trail", set_version(slurp("$dir/small5.trail"), 6));
spew("$dir/v6as5.trail", set_version(slurp("$dir/small.trail"), 5));
my $whole = slurp("$dir/small.trail");
spew("$dir/cut.trail", substr($whole, 0, length($whole) - 1));
spew("$dir/cutfront.trail", substr($whole, 1));
$node->safe_psql('postgres', qq{
CREATE ROLE reader LOGIN;
GRANT pg_read_server_files TO reader;
GRANT USAGE ON FOREIGN SERVER disk TO reader;
CREATE SCHEMA r AUTHORIZATION reader;
});
for my $f ('v5as6', 'v6as5', 'cut', 'cutfront')
{
	$node->safe_psql('postgres', qq{CREATE FOREIGN TABLE r.$f (id bigint, time timestamptz, geom geometry(Point, 4326), speed float8, alt int, status text)
	    SERVER disk OPTIONS (url '$dir/$f.trail', id_column 'id', time_column 'time')}, extra_params => [ '-U', 'reader' ]);
	for my $sql ("SELECT * FROM r.$f", "SELECT id, time FROM r.$f WHERE id = 7", "SELECT count(speed), max(alt) FROM r.$f",
		"SELECT id, count(*) FROM r.$f GROUP BY id")
	{
		my ($rc, $out, $err) = $node->psql('postgres', $sql, extra_params => [ '-U', 'reader' ]);
		isnt($rc, 0, "$f: $sql fails") or diag("rows: " . substr($out, 0, 200));
		like($err, qr/corrupt|not a trail file|truncated/, "$f: $sql: as a corrupted file") or diag($err);
	}
	is($node->safe_psql('postgres', 'SELECT 1', extra_params => [ '-U', 'reader' ]), '1', "$f: the server lives on");
}

# 3. NULL arguments
my @args = ('query', 'destination', 'server', 'id_column', 'time_column', 'geom_column', 'page_size', 'page_seconds',
	'page_order', 'bucket_seconds', 'format_version');
my %null_ok = (server => 1, page_size => 1, bucket_seconds => 1);
for my $a (@args)
{
	my %v = (query => "'SELECT * FROM small'", destination => "'$dir/null_$a.trail'");
	my $call = join(', ', map { "$_ => " . ($_ eq $a ? 'NULL' : $v{$_}) } grep { $_ eq $a || exists $v{$_} } @args);
	my ($rc, $out, $err) = $node->psql('postgres', "SELECT trafficdb.trail_write($call)");
	if ($null_ok{$a})
	{
		is($out, '2000', "trail_write($a => NULL): the default") or diag($err);
	}
	else
	{
		like($err, qr/\Q$a\E must not be NULL/, "trail_write($a => NULL): refused, naming it");
		ok(!-e "$dir/null_$a.trail", "trail_write($a => NULL): no file");
	}
}
for my $v (0, 7, -1, 2147483647)
{
	my ($rc, $out, $err) = $node->psql('postgres', "SELECT trafficdb.trail_write('SELECT * FROM small', '$dir/fv.trail', format_version => $v)");
	like($err, qr/format_version $v is not a trail file format version/, "format_version $v refused");
}
ok(!-e "$dir/fv.trail", 'and nothing written');

# 4. roles
$node->safe_psql('postgres', q{CREATE ROLE writer LOGIN; GRANT SELECT ON small TO writer; GRANT SELECT ON small TO reader;});
my ($rc, $out, $err) = $node->psql('postgres', qq{SELECT trafficdb.trail_write('SELECT * FROM small', '$dir/w.trail')},
	extra_params => [ '-U', 'writer' ]);
like($err, qr/permission denied to write trail file/, 'without pg_write_server_files: no server path written');
ok(!-e "$dir/w.trail", 'and no file');
($rc, $out, $err) = $node->psql('postgres', qq{SELECT trafficdb.trail_write('SELECT * FROM small', '$dir/w.trail')},
	extra_params => [ '-U', 'reader' ]);
like($err, qr/permission denied to write trail file/, 'pg_read_server_files does not write');
($rc, $out, $err) = $node->psql('postgres', qq{CREATE FOREIGN TABLE public.w (id bigint) SERVER disk OPTIONS (url '$dir/small.trail')},
	extra_params => [ '-U', 'writer' ]);
like($err, qr/permission denied/, 'without pg_read_server_files: no server path read');
$node->safe_psql('postgres', 'GRANT pg_write_server_files TO writer');
is($node->safe_psql('postgres', qq{SELECT trafficdb.trail_write('SELECT * FROM small', '$dir/w.trail')},
	extra_params => [ '-U', 'writer' ]), '2000', 'granted pg_write_server_files: written');
is(file_version("$dir/w.trail"), 6, 'as version 6');

# 5. statement_timeout at a stalled GET of a version-6 file on S3
$node->safe_psql('postgres', qq{
SELECT trafficdb.trail_write('SELECT * FROM small', 's3://$bucket/small.trail', server => 's3');
CREATE SERVER slow FOREIGN DATA WRAPPER trafficdb_trails
  OPTIONS (endpoint '$proxy', block_size '16kB', cache_dir 'none', retries '0');
CREATE USER MAPPING FOR CURRENT_USER SERVER slow OPTIONS (access_key '$user', secret_key '$secret');
CREATE FOREIGN TABLE slow_t (id bigint, time timestamptz, geom geometry(Point, 4326), speed float8, alt int, status text)
  SERVER slow OPTIONS (url 's3://$bucket/small.trail', id_column 'id', time_column 'time', revalidate_interval '600')});
is(digest('slow_t', 'id, time, speed, status'), digest('small', 'id, time, speed, status'), 'S3: the heap\'s rows');
my $t0 = time();
($rc, $out, $err) = $node->psql('postgres', qq{
SELECT count(*) FROM slow_t;
COPY (SELECT 1) TO PROGRAM 'curl -fs -o /dev/null "$proxy/__fault__?plan=stall,stall,stall"';
SET statement_timeout = '1s';
SELECT sum(speed) FROM slow_t;
});
my $took = time() - $t0;
like($err, qr/statement timeout/, 'statement_timeout interrupts a scan at its stalled GET');
cmp_ok($took, '<', 4, sprintf('within %.2f s (the stall lasts 8 s)', $took));
system("curl -fs -o /dev/null '$proxy/__fault__?plan=ok'");
is(digest('slow_t', 'id, time, speed, status'), digest('small', 'id, time, speed, status'), 'and the rows afterwards');

# 6. kill -9 in trail_write: nothing under the final name
$node->safe_psql('postgres', q{CREATE TABLE huge AS SELECT (v % 5000)::bigint AS id,
  '2024-03-01'::timestamptz + v * interval '1 ms' AS time,
  ST_SetSRID(ST_MakePoint(24.5 + (v % 5000) * 0.0001, 60.1), 4326) AS geom, v::float8 AS speed
  FROM generate_series(1, 1500000) v});
my ($in, $o2, $e2) = ('', '', '');
my $h = IPC::Run::start([ 'psql', '-X', '-d', $node->connstr('postgres'), '-c',
	"SELECT trafficdb.trail_write('SELECT * FROM huge ORDER BY speed DESC', '$dir/killed.trail')" ], \$in, \$o2, \$e2);
my $pid = '';
for (1 .. 100)
{
	$pid = $node->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE query LIKE 'SELECT trafficdb.trail_write(%killed%'});
	last if $pid ne '';
	usleep(50_000);
}
ok($pid ne '', 'trail_write is running');
usleep(700_000);
kill 'KILL', $pid if $pid ne '';
$h->finish;
ok(!-e "$dir/killed.trail", 'killed: nothing under the final name');
my @left = glob("$dir/killed.trail*");
is(scalar(@left), 0, 'and no temporary file beside it') or diag("@left");
$node->poll_query_until('postgres', 'SELECT true') or die 'the cluster did not come back';
is($node->safe_psql('postgres', qq{SELECT trafficdb.trail_write('SELECT * FROM small', '$dir/killed.trail')}), '2000',
	'after recovery, written');
is(file_version("$dir/killed.trail"), 6, 'whole, as version 6');

$node->stop;
done_testing();
