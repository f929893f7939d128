# t/080_stream_import_readonly.pl: IMPORT FOREIGN SCHEMA reads a stream file
# the server may read but not write (issue 33, item 6).
#
# Readers open stream files read-only (t/013), but IMPORT FOREIGN SCHEMA
# opened the file read-write: on a file of mode 0444 it failed with
# "Permission denied" while SELECT through a table written by hand worked.
# Here: the file is made read-only for its owner (the server's user, as the
# TAP tests run), IMPORT lists its streams, the imported tables read the
# rows the CLI wrote, an INSERT still says why it cannot write, and the
# file is unchanged byte for byte.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Compare;
use File::Copy;
use lib 't';
use TdbTest;

my $cli = $ENV{TRAFFICDB_STREAM} // die 'TRAFFICDB_STREAM must name tools/trafficdb-stream';
my $node = tdb_node('importro');
my $dir = PostgreSQL::Test::Utils::tempdir;
my $file = "$dir/ro.tsf";
open(my $fh, '>', "$dir/ro.rdl") or die;
print $fh <<'RDL';
SET blockSize = 4096;
SET fileSize = 1MB;
CREATE STREAM nav WITH ID 1 { sog float64, heading smallint NULL };
CREATE STREAM engine WITH ID 2 { rpm int };
RDL
close $fh;
system($cli, 'create', $file, "$dir/ro.rdl") == 0 or die 'trafficdb-stream create failed';
open($fh, '>', "$dir/nav.csv") or die;
print $fh "ts,sog,heading\n2024-01-01T00:00:01Z,10.5,90\n2024-01-01T00:00:02Z,11,\n";
close $fh;
system($cli, 'append', $file, 'nav', "$dir/nav.csv") == 0 or die 'trafficdb-stream append failed';
chmod 0444, $file or die "chmod $file: $!";
ok(!open(my $w, '+<', $file), 'the file cannot be opened for writing by the server\'s user');
copy($file, "$dir/before.tsf") or die "copy: $!";

my ($rc, $out, $err) = $node->psql('postgres', qq{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE SERVER ro FOREIGN DATA WRAPPER trafficdb_streams OPTIONS (filename '$file');
IMPORT FOREIGN SCHEMA streams FROM SERVER ro INTO public;
});
is($rc, 0, 'IMPORT FOREIGN SCHEMA of a read-only stream file succeeds') or diag($err);
unlike($err, qr/Permission denied/, '  without "Permission denied"');
is($node->safe_psql('postgres', q{SELECT string_agg(format('%s %s', relname, ftoptions), ', ' ORDER BY relname)
  FROM pg_foreign_table JOIN pg_class ON oid = ftrelid
  WHERE ftserver = (SELECT oid FROM pg_foreign_server WHERE srvname = 'ro')}),
	'engine {stream=engine}, nav {stream=nav}', 'it created a table per stream');
is($node->safe_psql('postgres', q{SET TimeZone = 'UTC'; SELECT ts, sog, heading FROM nav ORDER BY ts}),
	"2024-01-01 00:00:01+00|10.5|90\n2024-01-01 00:00:02+00|11|", 'the imported table reads the rows');
is($node->safe_psql('postgres', 'SELECT count(*) FROM engine'), '0', 'and the empty stream');
($rc, $out, $err) = $node->psql('postgres', q{IMPORT FOREIGN SCHEMA streams LIMIT TO (engine) FROM SERVER ro INTO public});
like($err, qr/relation "engine" already exists/, 'a second IMPORT fails only on the existing table');
($rc, $out, $err) = $node->psql('postgres', q{INSERT INTO nav VALUES ('2030-01-01', 1, 1)});
like($err, qr/could not open stream file for "nav": could not open ".*ro.tsf": Permission denied/,
	'an INSERT still says why it cannot write');
ok(compare($file, "$dir/before.tsf") == 0, 'the file is unchanged byte for byte');

$node->stop;
done_testing();
