# t/062_shm_fifo.pl: a FIFO under one of trafficdb's fixed /dev/shm names
# (review of issue 28, item 4).  Any local user can make one before the
# server starts (test/security_names.sh's other OS user; here the postgres
# OS user, which changes nothing: open() of a FIFO for reading waits for a
# writer whoever owns it).  Backends and external readers opened the fixed
# names without O_NONBLOCK: a SELECT of trafficdb.status then hung in open()
# for ever, deaf to cancel and pg_terminate_backend (only SIGKILL, i.e. a
# cluster restart, ended it), and so did tdbread.  They must refuse the name
# at once.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Fcntl;
use lib 't';
use TdbTest;

my $tdbread = $ENV{TDBREAD} // die 'TDBREAD must name tools/tdbread';
my $node = tdb_node('fifo', 'trafficdb.publish_interval' => "'1h'", 'trafficdb.max_subscribers' => '0',
	'-start' => 0);
my $prefix = '/trafficdb.' . $node->port;
my @fifos = map { "/dev/shm$prefix.$_" } ('ctl', 'readers');
for my $f (@fifos)
{
	unlink $f;
	system('mkfifo', $f) == 0 or die "mkfifo $f failed";
}

# whatever is stuck in open() of a FIFO is released by opening it for writing
sub release_fifos
{
	for my $f (@fifos)
	{
		for (1 .. 5)
		{
			sysopen(my $fh, $f, O_WRONLY | O_NONBLOCK) or last;
			close $fh;
		}
	}
}

$node->start;
tdb_grid_map($node);

# each query in a psql of its own, given 20 s
sub query_within
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-c', $sql ],
		'>', \$out, '2>', \$err, IPC::Run::timeout(20));
	my $done = eval { $h->finish; 1 };
	if (!$done)
	{
		release_fifos();
		eval { $h->finish };
	}
	chomp $out;
	return ($done, $out, $err);
}

my ($done, $out, $err) = query_within('SELECT generation > 0 FROM trafficdb.status');
ok($done, 'trafficdb.status answers with a FIFO at the fixed .ctl name (no wait in open())');
is($out, 't', '... and shows the published generation (served under private names)') or diag($err);
($done, $out, $err) = query_within('SELECT count(*) FROM trafficdb.locations');
ok($done, 'trafficdb.locations answers too');
is($out, '2000', '... with the map') or diag($err);

# an external reader of the configured names is refused at once
my ($rout, $rerr) = ('', '');
my $h = IPC::Run::start([ $tdbread, $prefix ], '>', \$rout, '2>', \$rerr, IPC::Run::timeout(20));
my $rdone = eval { $h->finish; 1 };
if (!$rdone)
{
	release_fifos();
	eval { $h->finish };
}
ok($rdone, 'tdbread of the configured names returns (no wait in open())');

release_fifos();
unlike(slurp_file($node->logfile), qr/terminated by signal/, 'no process killed by a signal');
$node->stop;
unlink @fifos;
done_testing();
