# t/054_subscriber_slots.pl: one role cannot take every subscriber slot
# (issue 28, item 7).  The sessions of one login role hold at most
# trafficdb.max_subscriber_slots_per_role slots of <prefix>.subs through
# trafficdb.subscription_events(); past it a clear error names that setting,
# while other roles and external subscribers (tdbsub) still get slots.  A
# full segment's error names trafficdb.max_subscribers, not the readers'
# setting.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run qw(start finish);
use lib 't';
use TdbTest;

my $node = tdb_node('slots', 'trafficdb.publish_interval' => "'1h'",
	'trafficdb.max_subscribers' => '6', 'trafficdb.max_subscriber_slots_per_role' => '2');
tdb_grid_map($node);
$node->safe_psql('postgres', q{
CREATE ROLE app1 LOGIN; CREATE ROLE app2 LOGIN;
GRANT SELECT, INSERT, DELETE ON trafficdb.subscriptions TO app1, app2;
GRANT USAGE ON SEQUENCE trafficdb.subscriptions_id_seq TO app1, app2;});

# the documented subscriber grants: each role makes its own rows
my @a1 = map { $node->safe_psql('postgres', "SET ROLE app1; INSERT INTO trafficdb.subscriptions (name, location_ids) VALUES ('a$_', '{$_}') RETURNING id") } 1 .. 4;
my $b1 = $node->safe_psql('postgres', "SET ROLE app2; INSERT INTO trafficdb.subscriptions (name, location_ids) VALUES ('b1', '{9}') RETURNING id");

# a session of its own (psql reading its input as it comes)
sub session
{
	my ($role) = @_;
	my %s = (in => '', out => '', err => '');
	$s{h} = start([ 'psql', '-XAtq', '-d', $node->connstr('postgres') . " user=$role" ],
		'<', \$s{in}, '>', \$s{out}, '2>', \$s{err});
	return \%s;
}
# run sql in session s, wait for it; returns (stdout, stderr) of it
sub run_in
{
	my ($s, $sql) = @_;
	$s->{out} = '';
	$s->{err} = '';
	$s->{in} .= "$sql\n\\echo DONE\n";
	for (1 .. 400) { $s->{h}->pump_nb; last if $s->{out} =~ /^DONE$/m; select(undef, undef, undef, 0.025); }
	(my $out = $s->{out}) =~ s/^DONE\n//m;
	return ($out, $s->{err});
}

my $one = session('app1');
my ($out, $err) = run_in($one, "SELECT count(*) FROM trafficdb.subscription_events($a1[0], 1, 0);
SELECT count(*) FROM trafficdb.subscription_events($a1[1], 1, 0);");
is($out, "0\n0\n", 'a session of app1 reads two subscriptions (two slots)') or diag($err);
($out, $err) = run_in($one, "SELECT count(*) FROM trafficdb.subscription_events($a1[2], 1, 0);");
like($err, qr/role "app1" holds 2 subscriber slots, the limit of trafficdb\.max_subscriber_slots_per_role \(2\)/,
	'a third: refused, naming the role and the setting');
unlike($err, qr/max_external_readers/, 'not the readers\' setting');

# the limit is the role's, over its sessions
my $two = session('app1');
($out, $err) = run_in($two, "SELECT count(*) FROM trafficdb.subscription_events($a1[3], 1, 0);");
like($err, qr/trafficdb\.max_subscriber_slots_per_role/, 'another session of app1: refused as well');

# another role and an external subscriber still get slots
my $other = session('app2');
($out, $err) = run_in($other, "SELECT count(*) FROM trafficdb.subscription_events($b1, 1, 0);");
is($out, "0\n", 'app2 gets a slot') or diag($err);
my $ext = tdb_tdbsub($node, '--ids', '5', '--timeout-ms', '500');
like(${ $ext->{out} }, qr/ready/, 'an external subscriber (tdbsub) gets a slot') or diag(${ $ext->{err} });
finish($ext->{h});

# when app1's session ends, its slots come back to it
$one->{in} .= "\\q\n";
finish($one->{h});
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');	# the daemon reclaims the slots
($out, $err) = run_in($two, "SELECT count(*) FROM trafficdb.subscription_events($a1[3], 1, 0);");
is($out, "0\n", 'after app1\'s first session ends, its other session gets a slot') or diag($err);

# the count and the claim are serialized per role, but not for the length of a
# wait: while a session of app1 waits for events in the call that claimed its
# slot, another session of app1 is answered at once (here: refused, the limit
# reached), not after that wait
$two->{out} = '';
$two->{in} .= "SELECT count(*) FROM trafficdb.subscription_events($a1[2], 1, 4000);\n\\echo DONE\n";
$two->{h}->pump_nb for 1 .. 5;
select(undef, undef, undef, 0.5);
$two->{h}->pump_nb;
my $three = session('app1');
($out, $err) = run_in($three, "SELECT count(*) FROM trafficdb.subscription_events($a1[0], 1, 0);");
$two->{h}->pump_nb;
like($err, qr/role "app1" holds 2 subscriber slots/, 'a third session of app1 is refused (its two slots are in the other)');
unlike($two->{out}, qr/DONE/, 'while that one still waits for events: no lock is held during the wait');
for (1 .. 400) { $two->{h}->pump_nb; last if $two->{out} =~ /^DONE$/m; select(undef, undef, undef, 0.025); }
$three->{in} .= "\\q\n";
finish($three->{h});
$two->{in} .= "\\q\n";
finish($two->{h});
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');	# the daemon reclaims their slots

# a full segment: the error names trafficdb.max_subscribers
my @ext = map { tdb_tdbsub($node, '--ids', '5', '--timeout-ms', '3000') } 1 .. 5;	# and app2's
my $full = tdb_tdbsub($node, '--ids', '5', '--timeout-ms', '500');
finish($full->{h});
like(${ $full->{err} }, qr/trafficdb\.max_subscribers/, 'a subscriber finding every slot taken is told trafficdb.max_subscribers')
	or diag(${ $full->{err} });
unlike(${ $full->{err} }, qr/every external reader slot/, 'and not that reader slots are taken');
$_->{h}->kill_kill for @ext;
$other->{in} .= "\\q\n";
finish($other->{h});

done_testing();
