# t/083_trail_write_store_name.pl: trafficdb.trail_write to a local path
# stores the file under a name of its own making, never into a file that
# was there before.
#
# The store wrote DEST.tmp.<backend pid> opened with O_TRUNC but not O_EXCL,
# then renamed it to DEST.  Another user who may write the destination's
# directory (a shared, non-sticky one) could create that name beforehand,
# world-writable, and keep a hard link to it: the server then wrote the
# whole trail file into the other user's inode (readable and writable by
# them through the link, whatever the server's umask) and renamed it to
# DEST.  A backend killed during the store also left DEST.tmp.<pid> behind.
# Now the file is written unnamed (O_TMPFILE) in the destination's
# directory and linked in under a fresh name only when complete (else a
# name created with O_EXCL):
# 1. a file planted at DEST.tmp.<pid> (and its hard link) is left untouched;
# 2. DEST is a new file with the server's mode, and reads back exactly.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('trail_store_name');
my $dir = PostgreSQL::Test::Utils::tempdir;
chmod 0777, $dir or die "chmod $dir: $!";
$node->safe_psql('postgres', q{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE SERVER loc FOREIGN DATA WRAPPER trafficdb_trails;
CREATE TABLE ev AS SELECT 'v' || (i % 7) AS id, '2024-01-01'::timestamptz + i * interval '1 min' AS time,
  ST_SetSRID(ST_MakePoint(24 + i * 0.001, 60 + i * 0.0005), 4326) AS geom, i AS n FROM generate_series(1, 5000) i;
});

# one session: the planted name carries its backend's pid
my $s = $node->background_psql('postgres');
my $pid = $s->query_safe('SELECT pg_backend_pid()');
chomp $pid;
my $dest = "$dir/t.trail";
my $plant = "$dest.tmp.$pid";
open(my $fh, '>', $plant) or die "$plant: $!";
print $fh "planted\n";
close $fh;
chmod 0666, $plant or die;
link($plant, "$dir/spy") or die "link: $!";
my @before = stat($plant);

my $n = $s->query_safe("SELECT trafficdb.trail_write('SELECT * FROM ev', '$dest')");
chomp $n;
is($n, '5000', 'trail_write wrote the 5000 events');
$s->quit;

open($fh, '<', "$dir/spy") or die;
my $spy = do { local $/; <$fh> };
close $fh;
is($spy, "planted\n", 'the planted file (through its hard link) was not written into');
my @after = stat($dest);
isnt("$after[0]:$after[1]", "$before[0]:$before[1]", 'the destination is a file of its own, not the planted inode');
is(sprintf('%o', $after[2] & 07777), '600', 'with the server\'s mode (umask 0077), not the planted 0666');
ok(-e $plant, 'the planted name is left as it was (not ours to remove)');
ok(!(grep { $_ ne $plant && /\.tmp\./ } glob("$dir/*")), 'no other temporary name is left in the directory');

$node->safe_psql('postgres', qq{CREATE FOREIGN TABLE t (id text, time timestamptz, geom geometry(Point, 4326), n bigint)
  SERVER loc OPTIONS (url '$dest')});
is($node->safe_psql('postgres', q{SELECT count(*) || ':' || sum(n) FROM t}), '5000:12502500', 'the file reads back');

$node->stop;
done_testing();
