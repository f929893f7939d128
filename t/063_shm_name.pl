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
	[ '/' . ('x' x 63), qr/is 64 bytes long/, '64 bytes' ],
	# control characters (the configuration file's \t and \033 escapes):
	# refused, and shown escaped in the FATAL line, never raw (the fourth
	# element: the value as the FATAL line shows it)
	[ '/a\\tb\\033[31m', qr/"\/a\\tb\\x1B\[31m" has a control character \(byte 3\)/,
		'control characters', "/a\tb\033[31m" ],
	[ '/a\\nb', qr/"\/a\\nb" has a control character \(byte 3\)/, 'a newline', '/a\\nb' ],
);
for my $b (@bad)
{
	my ($value, $why, $what, $parsed) = @$b;
	$parsed //= $value;
	$node->append_conf('postgresql.conf', "trafficdb.shm_name = '$value'\n");
	my $offset = -s $node->logfile // 0;
	my $started = $node->start(fail_ok => 1);
	ok(!$started, "$what: the server does not start");
	$node->stop('immediate', fail_ok => 1) if $started;
	my $log = slurp_file($node->logfile, $offset);
	like($log, qr/invalid value for parameter "trafficdb\.shm_name": "\Q$parsed\E"/,
		"$what: the log names the setting and the value");
	like($log, $why, "$what: and says what is wrong");
	like($log, qr{must be "/" followed by}, "$what: and what is expected");
	unlike($log, qr/belongs to another server/, "$what: not that another server owns it");
	my ($fatal) = $log =~ /^(.*FATAL:.*)$/m;
	unlike($fatal // '', qr/[\x00-\x1f\x7f]/, "$what: the FATAL line has no raw control character");
}

# the longest name taken: "/" and 62 bytes
my $longest = '/' . ('y' x 61) . '3';
$node->append_conf('postgresql.conf', "trafficdb.shm_name = '$longest'\n");
$node->start;
is($node->safe_psql('postgres', 'SHOW trafficdb.shm_name'), $longest, '63 bytes start');
$node->safe_psql('postgres', 'CREATE EXTENSION trafficdb CASCADE');
is($node->safe_psql('postgres', 'SELECT trafficdb.version() IS NOT NULL'), 't', 'and the extension works');

# ALTER SYSTEM with a long name of 2-byte characters, to a LATIN1 client:
# the value shown is cut at a character's start, so the client gets the
# message (a cut character made it "invalid byte sequence for encoding")
my ($ret, $out, $err) = $node->psql('postgres',
	"SET client_encoding = 'LATIN1'; ALTER SYSTEM SET trafficdb.shm_name = E'/tdbx" . ('\u00e9' x 40) . "'");
like($err, qr/is 85 bytes long, too long/, 'ALTER SYSTEM: a long multibyte name is refused, saying why');
unlike($err, qr/invalid byte sequence/, 'ALTER SYSTEM: and the message reaches a LATIN1 client');
($ret, $out, $err) = $node->psql('postgres', "ALTER SYSTEM SET trafficdb.shm_name = E'/a\\033[2J'");
like($err, qr/has a control character/, 'ALTER SYSTEM: a control character is refused');
($ret, $out, $err) = $node->psql('postgres', "SET trafficdb.shm_name = '/x'");
like($err, qr/cannot be changed without restarting the server/, 'SET in a session is refused');
$node->stop;

# a valid name (and the default, empty) start
$node->append_conf('postgresql.conf', "trafficdb.shm_name = '/tdb063." . $node->port . "'\n");
$node->start;
is($node->safe_psql('postgres', 'SHOW trafficdb.shm_name'), '/tdb063.' . $node->port, 'a valid name starts');
$node->stop;
$node->append_conf('postgresql.conf', "trafficdb.shm_name = ''\n");
$node->start;
is($node->safe_psql('postgres', 'SHOW trafficdb.shm_name'), '', 'empty (the default name) starts');
$node->stop;

done_testing();
