# t/050_shm_shrink.pl: a member of trafficdb.shm_group (here: the server's
# own OS user, who has the same access) truncates <prefix>.subs while a SQL
# session waits in subscription_events() and an external subscriber
# (tools/tdbsub) waits in trafficdb_receive (issue 28, item 3).  Both get a
# clear error, never a SIGBUS: the server does not restart, the session
# goes on, the daemon makes the segment anew and says so in
# status.last_error, and subscribing again works.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run qw(start finish);
use Time::HiRes qw(time);
use lib 't';
use TdbTest;

my $node = tdb_node('shrink', 'trafficdb.publish_interval' => "'1h'");
tdb_grid_map($node);
my $subs = '/dev/shm/trafficdb.' . $node->port . '.subs';
my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
my $sid = $node->safe_psql('postgres', q{INSERT INTO trafficdb.subscriptions (name, location_ids)
  VALUES ('shrink', '{20, 21}') RETURNING id});

my ($sq_in, $sq_out, $sq_err) = ('', '', '');
my $sess = start([ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=0', '-d', $node->connstr('postgres') ],
	'<', \$sq_in, '>', \$sq_out, '2>', \$sq_err);
$sq_in = "SELECT 'pid', pg_backend_pid();\nSELECT count(*) FROM trafficdb.subscription_events($sid);\n";
ok(tdb_wait_session($sess, \$sq_out, \$sq_err, qr/^0$/m, 10), 'the SQL session subscribed') or diag($sq_err);
my ($backend) = $sq_out =~ /^pid\|(\d+)$/m;
my $sub = tdb_tdbsub($node, '--ids', '20,21', '--timeout-ms', '30000');
like(${ $sub->{out} }, qr/ready/, 'tdbsub subscribed');
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');	# the daemon attaches both

# both wait; then the segment shrinks to nothing under them
$sq_out = '';
$sq_in .= "SELECT count(*) FROM trafficdb.subscription_events($sid, 10, 15000);\n";
$sess->pump_nb for 1 .. 10;
select(undef, undef, undef, 0.5);
ok(-e $subs, "$subs exists");
truncate($subs, 0) or die "truncate $subs: $!";
my $t0 = time;
ok(tdb_wait_session($sess, \$sq_out, \$sq_err, qr/ERROR/, 10), 'the waiting SQL session got an error');
cmp_ok(time - $t0, '<', 5, 'within 5 s, not at the end of its 15 s wait');
like($sq_err, qr/events of subscription $sid stopped: .*truncated/, 'which says the segment was truncated')
  or diag($sq_err);
ok(tdb_wait_output({ %$sub, out => $sub->{err} }, qr/truncated|rebuilt/, 10), 'tdbsub got an error too')
  or diag(${ $sub->{err} });
finish($sub->{h});
isnt($? >> 8, 0, 'and exited with an error, not killed by a signal') or diag($?);
is($? & 127, 0, 'tdbsub was not killed by a signal');

# the server did not restart, and the same session goes on
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started, 'the server did not restart');
$sq_out = '';
$sq_err = '';
$sq_in .= "SELECT 'alive', pg_backend_pid();\n";
ok(tdb_wait_session($sess, \$sq_out, \$sq_err, qr/^alive\|/m, 10), 'the session is alive');
like($sq_out, qr/^alive\|$backend$/m, 'the same backend');

# the daemon notices at its next cycle, makes it anew and says so
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
ok($node->poll_query_until('postgres', q{SELECT last_error LIKE '%subs%truncated%' FROM trafficdb.status}),
	'status.last_error names the damaged segment and how');
cmp_ok(-s $subs, '>', 0, 'the segment was made anew');

# subscribing again works: the session receives the next change of id 20
$sq_out = '';
$sq_in .= "SELECT count(*) FROM trafficdb.subscription_events($sid);\n";
ok(tdb_wait_session($sess, \$sq_out, \$sq_err, qr/^0$/m, 10), 'the session subscribed again') or diag($sq_err);
my $sub2 = tdb_tdbsub($node, '--ids', '20,21', '--count', '1', '--timeout-ms', '10000');
like(${ $sub2->{out} }, qr/ready/, 'a new tdbsub subscribed');
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
$node->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (20, 11);
SELECT trafficdb.publish();});
$sq_out = '';
$sq_in .= "SELECT kind, location_id FROM trafficdb.subscription_events($sid, 10, 5000);\n";
ok(tdb_wait_session($sess, \$sq_out, \$sq_err, qr/^change\|20$/m, 10), 'the session receives events again')
  or diag("$sq_out $sq_err");
ok(tdb_wait_output($sub2, qr/^change \d+ 20 /m, 10), 'the new tdbsub receives events') or diag(${ $sub2->{err} });
finish($sub2->{h});
$sq_in .= "\\q\n";
finish($sess);
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started, 'still no restart');
done_testing();
