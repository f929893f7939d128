# t/063_shm_name.pl: an invalid trafficdb.shm_name is refused at start
# (issue 29).  Before, a prefix without its leading "/" (or with another
# "/", or too long for the names made from it) was accepted, and the server
# then said its shared memory "belongs to another server ... keeps being
# replaced while locking it".  Now the postmaster does not start, and its
# log says what is wrong with the value and what is expected.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = PostgreSQL::Test::Cluster->new('shmname');
$node->init(tdb_initdb_utf8());
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'trafficdb'
trafficdb.database = 'postgres'
});

my @bad = (
	[ 'trafficdb.x', qr/does not start with "\/"/, 'no leading "/"' ],
	[ '/trafficdb/x', qr/has a "\/" after the first character/, 'another "/"' ],
	[ '/', qr/has no name after the "\/"/, 'nothing after the "/"' ],
	[ '/' . ('x' x 80), qr/is 81 bytes long/, 'too long' ],
);
for my $b (@bad)
{
	my ($value, $why, $what) = @$b;
	$node->append_conf('postgresql.conf', "trafficdb.shm_name = '$value'\n");
	my $offset = -s $node->logfile // 0;
	my $started = $node->start(fail_ok => 1);
	ok(!$started, "$what: the server does not start");
	$node->stop('immediate', fail_ok => 1) if $started;
	my $log = slurp_file($node->logfile, $offset);
	like($log, qr/invalid value for parameter "trafficdb\.shm_name": "\Q$value\E"/,
		"$what: the log names the setting and the value");
	like($log, $why, "$what: and says what is wrong");
	like($log, qr{must be "/" followed by}, "$what: and what is expected");
	unlike($log, qr/belongs to another server/, "$what: not that another server owns it");
}

# a valid name (and the default, empty) start
$node->append_conf('postgresql.conf', "trafficdb.shm_name = '/tdb063." . $node->port . "'\n");
$node->start;
is($node->safe_psql('postgres', 'SHOW trafficdb.shm_name'), '/tdb063.' . $node->port, 'a valid name starts');
$node->safe_psql('postgres', 'CREATE EXTENSION trafficdb CASCADE');
is($node->safe_psql('postgres', 'SELECT trafficdb.version() IS NOT NULL'), 't', 'and the extension works');
$node->stop;
$node->append_conf('postgresql.conf', "trafficdb.shm_name = ''\n");
$node->start;
is($node->safe_psql('postgres', 'SHOW trafficdb.shm_name'), '', 'empty (the default name) starts');
$node->stop;

done_testing();
