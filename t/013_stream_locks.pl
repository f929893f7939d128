# t/013_stream_locks.pl: waits on stream files end when the user says so,
# a statement never waits for itself, readers open files read-only
# (issue 13, item 6).
#
# - INSERT INTO b SELECT FROM a, two streams of one file: it hung for good on
#   its own flock (shared then exclusive on a second descriptor) and ignored
#   cancel, terminate and a fast shutdown;
# - an open cursor on a stream file no longer keeps writers waiting;
# - a reader waiting behind the CLI writer honours statement_timeout and
#   pg_cancel_backend;
# - stream_resample of many timestamps honours statement_timeout;
# - a file the server may read but not write is readable; a FIFO is refused.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time);
use lib 't';
use TdbTest;

my $cli = $ENV{TRAFFICDB_STREAM} // die 'TRAFFICDB_STREAM must name tools/trafficdb-stream';
my $node = tdb_node('streamlocks');
my $dir = PostgreSQL::Test::Utils::tempdir;
my $file = "$dir/two.tsf";
open(my $fh, '>', "$dir/two.rdl") or die;
print $fh <<'RDL';
SET blockSize = 4096;
SET fileSize = 2MB;
CREATE STREAM a WITH ID 1 { v float64 };
CREATE STREAM b WITH ID 2 { v float64 };
RDL
close $fh;
system($cli, 'create', $file, "$dir/two.rdl") == 0 or die 'trafficdb-stream create failed';

$node->safe_psql('postgres', qq{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE SERVER two FOREIGN DATA WRAPPER trafficdb_streams OPTIONS (filename '$file');
IMPORT FOREIGN SCHEMA streams FROM SERVER two INTO public;
INSERT INTO a SELECT '2024-01-01'::timestamptz + i * interval '1 s', i FROM generate_series(1, 500) i;
});

# --- a statement reading one stream of a file and writing another
my ($ret, $out, $err) = $node->psql('postgres', q{SET statement_timeout = '20s'; INSERT INTO b SELECT ts, v * 2 FROM a});
is($ret, 0, 'INSERT INTO b SELECT FROM a (one file) completes') or diag($err);
is($node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM b'), '500|250500', 'and wrote every row');

# --- an open cursor does not keep writers waiting
my $cur = $node->background_psql('postgres');
$cur->query_safe('BEGIN');
$cur->query_safe('DECLARE c CURSOR FOR SELECT * FROM a');
$cur->query_safe('FETCH 10 FROM c');
($ret, $out, $err) = $node->psql('postgres',
	q{SET statement_timeout = '10s'; INSERT INTO a VALUES ('2024-01-01'::timestamptz + interval '1000 s', 1000)});
is($ret, 0, 'an INSERT goes through while another session has a cursor open on the file') or diag($err);
is($cur->query_safe('FETCH ALL FROM c'), join("\n", map { sprintf('2024-01-01 %s+00|%d', hms($_), $_) } 11 .. 500),
	'the cursor reads on, unchanged');
$cur->query_safe('COMMIT');
$cur->quit;

sub hms
{
	my ($s) = @_;
	return sprintf('%02d:%02d:%02d', int($s / 3600), int($s / 60) % 60, $s % 60);
}

# --- the CLI holds the file (an append reading a pipe that stays open)
my $in = '';
my ($cout, $cerr) = ('', '');
my $writer = IPC::Run::start([ $cli, 'append', $file, 'a' ], '<', \$in, '>', \$cout, '2>', \$cerr);
# the CLI locks before it reads its input: wait until a lock attempt would block
for (1 .. 100)
{
	last if system('flock', '-n', '-s', $file, 'true') != 0;
	select(undef, undef, undef, 0.05);
}
isnt(system('flock', '-n', '-s', $file, 'true'), 0, 'the CLI holds the file');

my $t0 = time;
($ret, $out, $err) = $node->psql('postgres', q{SET statement_timeout = '1s'; SELECT count(*) FROM a});
like($err, qr/canceling statement due to statement timeout/, 'a reader behind the CLI: statement_timeout ends the wait');
cmp_ok(time - $t0, '<', 30, 'within a bounded time');

# pg_cancel_backend of a waiting INSERT
my $bg = $node->background_psql('postgres', on_error_stop => 0);
my $bgpid = $bg->query_safe('SELECT pg_backend_pid()');
$bg->query_until(qr/start/, q{\echo start
INSERT INTO b VALUES ('2030-01-01', 1);
});
for (1 .. 100)
{
	last if $node->safe_psql('postgres', "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $bgpid") eq 'Extension';
	select(undef, undef, undef, 0.05);
}
is($node->safe_psql('postgres', "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $bgpid"), 'Extension',
	'a writer behind the CLI waits (on the latch, not in flock)');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($bgpid)");
my $res = $bg->query('SELECT 1');
like($bg->{stderr}, qr/canceling statement due to user request/, 'pg_cancel_backend ends the wait');
$bg->quit;

# a fast shutdown while a backend waits
my $bg2 = $node->background_psql('postgres', on_error_stop => 0);
$bg2->query_until(qr/start/, q{\echo start
SELECT count(*) FROM a;
});
select(undef, undef, undef, 0.3);
$t0 = time;
$node->stop('fast');
cmp_ok(time - $t0, '<', 60, 'pg_ctl stop -m fast returns while a backend waits for the file');
eval { $bg2->quit };
$in = "\n";
$writer->kill_kill;
$node->start;

# --- stream_resample of many timestamps honours statement_timeout
($ret, $out, $err) = $node->psql('postgres', q{SET statement_timeout = '300ms';
  SELECT count(*) FROM trafficdb.stream_resample('a', 'v',
    ARRAY(SELECT '2024-01-01'::timestamptz + i * interval '1 ms' FROM generate_series(1, 3000000) i))});
like($err, qr/canceling statement due to statement timeout/, 'stream_resample of 3 M timestamps: statement_timeout');

# --- read-only files are readable; FIFOs are refused
chmod 0444, $file;
is($node->safe_psql('postgres', 'SELECT count(*) FROM a'), '501', 'a file the server cannot write is readable');
($ret, $out, $err) = $node->psql('postgres', q{INSERT INTO a VALUES ('2030-01-01', 1)});
like($err, qr/could not open stream file for "a": could not open ".*two.tsf": Permission denied/,
	'writing it says why');
chmod 0644, $file;
system('mkfifo', "$dir/fifo.tsf") == 0 or die 'mkfifo failed';
$node->safe_psql('postgres', qq{CREATE SERVER fifo FOREIGN DATA WRAPPER trafficdb_streams OPTIONS (filename '$dir/fifo.tsf');
  CREATE FOREIGN TABLE ff (ts timestamptz, v float8) SERVER fifo OPTIONS (stream 'a')});
($ret, $out, $err) = $node->psql('postgres', q{SET statement_timeout = '10s'; SELECT * FROM ff});
like($err, qr/fifo.tsf" is not a regular file or a block device/, 'a FIFO is refused, not waited on');

$node->stop;
unlike(slurp_file($node->logfile), qr/terminated by signal/, 'no process was terminated by a signal');
done_testing();
