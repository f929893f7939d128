# t/020_stream_cache.pl: the stream FDW keeps an open handle per backend and
# stream file, revalidated by the superblock's commit before every use
# (issue 15, stream files):
#
# - the CLI writer appends between two SELECTs of one session: the second
#   sees the rows (20 rounds, with the session's own INSERTs in between);
# - a file replaced under its name (rename: a new inode) and one overwritten
#   in place (cp: the same inode, another schema) are noticed;
# - the cost, as EXPLAIN ANALYZE's Sectors Read: a 5-row window on files of
#   64 streams holding the same rows reads the same sectors on a 4 MB and a
#   32 MB file, opened or kept (before, opening read every index sector of
#   every stream: 64 x 34 and 64 x 265 sectors); on the kept handle only the
#   revalidation (6 sectors) and the window's data.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $cli = $ENV{TRAFFICDB_STREAM} // die 'TRAFFICDB_STREAM must name tools/trafficdb-stream';
my $node = tdb_node('streamcache', timezone => "'UTC'");
my $dir = PostgreSQL::Test::Utils::tempdir;
my $t0 = 1704067200000000;    # 2024-01-01 00:00:00 UTC, microseconds

sub write_file
{
	my ($name, $text) = @_;
	open(my $fh, '>', "$dir/$name") or die "$dir/$name: $!";
	print $fh $text;
	close $fh;
}

# create FILE RDL
sub create
{
	my ($file, $rdl) = @_;
	write_file('schema.rdl', $rdl);
	system($cli, 'create', $file, "$dir/schema.rdl") == 0 or die "trafficdb-stream create $file failed";
}

# append FILE STREAM FROM TO: rows ts = t0 + i s, v = i
sub append
{
	my ($file, $stream, $from, $to) = @_;
	write_file("rows.csv", "ts,v\n" . join("", map { sprintf("%d,%d\n", $t0 + $_ * 1000000, $_) } $from .. $to));
	system($cli, 'append', $file, $stream, "$dir/rows.csv") == 0 or die "trafficdb-stream append $file failed";
}

my $two = "SET blockSize = 4096;\nSET fileSize = 2MB;\nCREATE STREAM a WITH ID 1 { v float64 };\nCREATE STREAM b WITH ID 2 { v float64 };\n";
my $file = "$dir/two.tsf";
create($file, $two);
append($file, 'a', 1, 100);

$node->safe_psql('postgres', qq{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE SERVER two FOREIGN DATA WRAPPER trafficdb_streams OPTIONS (filename '$file');
IMPORT FOREIGN SCHEMA streams FROM SERVER two INTO public;
});

# --- the CLI appends between two SELECTs of one session
my $s = $node->background_psql('postgres');
is($s->query_safe('SELECT count(*), max(v) FROM a'), '100|100', 'the first SELECT opens the file');
append($file, 'a', 101, 110);
is($s->query_safe('SELECT count(*), max(v) FROM a'), '110|110',
	'the second SELECT in the same session sees the rows the CLI appended since');
is($s->query_safe(qq{SELECT string_agg(v::text, ',' ORDER BY ts) FROM a
  WHERE ts BETWEEN '2024-01-01 00:01:45+00' AND '2024-01-01 00:01:49+00'}), '105,106,107,108,109',
	'a window over the appended rows');

# rounds: the CLI and the session's own INSERTs take turns; every SELECT
# of the session is what a new session reads
my $last = 110;
my $bad = 0;
for my $round (1 .. 20)
{
	my $k = 1 + ($round * 7) % 5;
	if ($round % 3 == 0)
	{
		$s->query_safe(qq{INSERT INTO a SELECT '2024-01-01'::timestamptz + i * interval '1 s', i
		  FROM generate_series($last + 1, $last + $k) i});
	}
	else
	{
		append($file, 'a', $last + 1, $last + $k);
	}
	$last += $k;
	my $kept = $s->query_safe(qq{SELECT count(*), max(v), sum(v) FROM a WHERE ts > '2024-01-01'::timestamptz + interval '50 s'});
	my $fresh = $node->safe_psql('postgres', qq{SELECT count(*), max(v), sum(v) FROM a WHERE ts > '2024-01-01'::timestamptz + interval '50 s'});
	$bad++ if $kept ne $fresh || $kept !~ /^\d+\|$last\|/;
}
is($bad, 0, '20 rounds of CLI appends and INSERTs: the kept handle reads what a new session reads');

# --- a file replaced under its name: a new inode
my $new = "$dir/new.tsf";
create($new, $two);
append($new, 'a', 1000, 1004);
rename($new, $file) or die "rename: $!";
is($s->query_safe('SELECT count(*), min(v), max(v) FROM a'), '5|1000|1004',
	'a file renamed over the old one is noticed');

# --- a file overwritten in place (the same inode), with another schema of the same layout
my $other = "$dir/other.tsf";
create($other, "SET blockSize = 4096;\nSET fileSize = 2MB;\nCREATE STREAM a WITH ID 1 { v float64 };\nCREATE STREAM b WITH ID 3 { v float64 };\n");
append($other, 'a', 2000, 2006);
my $ino = (stat($file))[1];
system('cp', $other, $file) == 0 or die 'cp failed';
is((stat($file))[1], $ino, 'cp kept the inode');
is($s->query_safe('SELECT count(*), min(v), max(v) FROM a'), '7|2000|2006',
	'a file overwritten in place is noticed');
append($file, 'a', 2007, 2008);
is($s->query_safe('SELECT count(*), max(v) FROM a'), '9|2008', 'and appended to afterwards');

# --- the cost: the same rows in a 4 MB and a 32 MB file of 64 streams
my $rdl64 = join('', map { "CREATE STREAM s$_ WITH ID " . ($_ + 1) . " { v float64 };\n" } 0 .. 63);
for my $mb (4, 32)
{
	my $f = "$dir/s64_$mb.tsf";
	create($f, "SET blockSize = 4096;\nSET fileSize = ${mb}MB;\n$rdl64");
	append($f, 's17', 1, 20000);
	append($f, "s$_", 1, 50) for (0 .. 16, 18 .. 63);
	$node->safe_psql('postgres', qq{
CREATE SERVER s64_$mb FOREIGN DATA WRAPPER trafficdb_streams OPTIONS (filename '$f');
CREATE SCHEMA m$mb;
IMPORT FOREIGN SCHEMA streams LIMIT TO (s17) FROM SERVER s64_$mb INTO m$mb;
});
}
my %sectors;
for my $mb (4, 32)
{
	for my $pass ('opened', 'kept')
	{
		my $plan = $s->query_safe(qq{EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
		  SELECT * FROM m$mb.s17 WHERE ts BETWEEN '2024-01-01 03:00:00+00' AND '2024-01-01 03:00:04+00'});
		like($plan, qr/rows=5 loops=1/, "$mb MB, $pass: the window has 5 rows");
		($sectors{"$mb.$pass"}) = $plan =~ /Sectors Read: (\d+)/;
	}
}
note(join(', ', map { "$_: $sectors{$_} sectors" } sort keys %sectors));
is($sectors{'32.opened'}, $sectors{'4.opened'}, 'opening and reading a window: the same sectors on 4 MB and 32 MB');
is($sectors{'32.kept'}, $sectors{'4.kept'}, 'on the kept handle: the same sectors on 4 MB and 32 MB');
cmp_ok($sectors{'4.kept'}, '<=', 6 + 6, 'on the kept handle: the revalidation (6) and a few data sectors');
cmp_ok($sectors{'4.opened'}, '<', 64 * 34, 'opened: less than the index sectors opening read before');

$s->quit;
done_testing();
