# t/061_review28.pl: what a hostile review of the issue-28 fixes found still
# open with the documented subscriber grants.
#  - trafficdb.max_subscriptions_per_role counted in the transaction's
#    snapshot: sessions in REPEATABLE READ that took their snapshot before
#    one another's INSERTs each get the whole limit;
#  - id squatting: INSERT ... OVERRIDING SYSTEM VALUE needs no more than
#    INSERT, so a subscriber could take the ids the sequence hands out next
#    and make every other role's INSERT fail with a duplicate key.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('review28', 'trafficdb.publish_interval' => "'1h'",
	'trafficdb.max_subscriptions_per_role' => 3);
tdb_grid_map($node);
$node->safe_psql('postgres', q{
CREATE ROLE sub_a LOGIN;
CREATE ROLE sub_b LOGIN;
GRANT SELECT, INSERT, DELETE ON trafficdb.subscriptions TO sub_a, sub_b;
GRANT USAGE ON SEQUENCE trafficdb.subscriptions_id_seq TO sub_a, sub_b;
});

sub as
{
	my ($role, $sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', $sql, extra_params => [ '-U', $role ]);
	return ($out, $err);
}

sub count_of
{
	my ($role) = @_;
	return $node->safe_psql('postgres', "SELECT count(*) FROM trafficdb.subscriptions WHERE owner = '$role'");
}

# ---- the per-role limit in REPEATABLE READ ------------------------------------
# two sessions of sub_a take their snapshots first; then each inserts 2 rows,
# one after the other (the first commits before the second inserts)
my @s;
for my $i (0, 1)
{
	my %h = (in => '', out => '', err => '');
	$h{run} = IPC::Run::start([ 'psql', '-XAtq', '-U', 'sub_a', '-d', $node->connstr('postgres') ],
		'<', \$h{in}, '>', \$h{out}, '2>', \$h{err});
	$h{in} .= "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 'snap ' || count(*) FROM trafficdb.subscriptions;\n";
	$h{run}->pump until $h{out} =~ /snap \d+/;
	push @s, \%h;
}
for my $i (0, 1)
{
	my $h = $s[$i];
	$h->{in} .= "INSERT INTO trafficdb.subscriptions (name, location_ids) SELECT 'rr$i', ARRAY[g::bigint] FROM generate_series(1, 2) g; COMMIT; SELECT 'done';\n";
	$h->{run}->pump until $h->{out} =~ /done/ || $h->{err} =~ /ERROR/;
	$h->{in} .= "\\q\n";
	$h->{run}->finish;
}
ok(count_of('sub_a') <= 3,
	'REPEATABLE READ sessions of one role cannot pass trafficdb.max_subscriptions_per_role together')
  or diag('sub_a has ' . count_of('sub_a') . " rows with the limit at 3; second session: $s[1]{err}");
like($s[1]{err}, qr/trafficdb\.max_subscriptions_per_role is 3/, '... the second session is refused naming the setting');
# in one statement the limit still counts the rows inserted before
$node->safe_psql('postgres', q{DELETE FROM trafficdb.subscriptions WHERE owner = 'sub_a'});
my ($out, $err) = as('sub_a', q{INSERT INTO trafficdb.subscriptions (name, location_ids) SELECT 'm', ARRAY[g::bigint] FROM generate_series(1, 4) g});
like($err, qr/max_subscriptions_per_role/, 'one INSERT of 4 rows with the limit at 3: refused');
is(count_of('sub_a'), '0', '... and none kept');
($out, $err) = as('sub_a', q{BEGIN ISOLATION LEVEL SERIALIZABLE; INSERT INTO trafficdb.subscriptions (name, location_ids) SELECT 'm', ARRAY[g::bigint] FROM generate_series(1, 3) g; COMMIT});
is(count_of('sub_a'), '3', 'SERIALIZABLE: 3 rows with the limit at 3 are taken');
$node->safe_psql('postgres', q{DELETE FROM trafficdb.subscriptions WHERE owner = 'sub_a'});

# ---- ids the sequence has not handed out ---------------------------------------
($out, $err) = as('sub_a', q{
INSERT INTO trafficdb.subscriptions (id, name, location_ids) OVERRIDING SYSTEM VALUE
SELECT (SELECT last_value FROM pg_sequences WHERE schemaname = 'trafficdb' AND sequencename = 'subscriptions_id_seq') + g,
       'squat', '{1}' FROM generate_series(1, 3) g});
like($err, qr/id \d+ was not handed out by trafficdb\.subscriptions_id_seq/,
	'a subscriber cannot take the ids the sequence hands out next (OVERRIDING SYSTEM VALUE)');
($out, $err) = as('sub_b', q{INSERT INTO trafficdb.subscriptions (name, location_ids) VALUES ('victim', '{1}') RETURNING id});
like($out, qr/^\d+$/, "another role's next INSERT succeeds") or diag($err);
$node->safe_psql('postgres', q{DELETE FROM trafficdb.subscriptions WHERE owner = 'sub_a'});
($out, $err) = as('sub_a', q{INSERT INTO trafficdb.subscriptions (id, name, location_ids) OVERRIDING SYSTEM VALUE VALUES (0, 'zero', '{1}')});
like($err, qr/id 0 was not handed out/, 'id 0 is refused');
($out, $err) = as('sub_a', q{INSERT INTO trafficdb.subscriptions (id, name, location_ids) OVERRIDING SYSTEM VALUE VALUES (-5, 'neg', '{1}')});
like($err, qr/id -5 was not handed out/, 'a negative id is refused');
# a role granted UPDATE cannot move its row onto an id to come
$node->safe_psql('postgres', 'GRANT UPDATE ON trafficdb.subscriptions TO sub_a');
my ($mine) = as('sub_a', q{INSERT INTO trafficdb.subscriptions (name, location_ids) VALUES ('mine', '{1}') RETURNING id});
($out, $err) = as('sub_a', "UPDATE trafficdb.subscriptions SET id = id + 1000 WHERE id = $mine");
like($err, qr/can only be updated to DEFAULT|id of a subscription does not change/, 'UPDATE of id is refused');
($out, $err) = as('sub_b', q{INSERT INTO trafficdb.subscriptions (name, location_ids) VALUES ('victim2', '{1}') RETURNING id});
like($out, qr/^\d+$/, "another role's INSERT still succeeds") or diag($err);
# a superuser (a restore) still writes ids of its choosing
$node->safe_psql('postgres', q{INSERT INTO trafficdb.subscriptions (id, name, location_ids) OVERRIDING SYSTEM VALUE VALUES (100000, 'restored', '{1}')});
is($node->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.subscriptions WHERE id = 100000'), '1', 'a superuser restores a row with its id');

# ---- NOTIFY channels are private -------------------------------------------------
# LISTEN needs no privilege: any role heard trafficdb_subscription_<id> of
# another role's notify subscription (generation and event count: when
# traffic changed in that role's area).  The channel now carries the row's
# random notify_key, which only those who may read the row know.
$node->safe_psql('postgres', 'CREATE ROLE nogrant LOGIN');
$node->safe_psql('postgres', q{DELETE FROM trafficdb.subscriptions WHERE owner = 'sub_b'});
my ($nid) = as('sub_b', q{INSERT INTO trafficdb.subscriptions (name, location_ids, notify) VALUES ('b notify', '{7}', true) RETURNING id});
my ($l_in, $l_out, $l_err) = ('', '', '');
my $listener = IPC::Run::start([ 'psql', '-XAtq', '-U', 'nogrant', '-d', $node->connstr('postgres') ],
	'<', \$l_in, '>', \$l_out, '2>', \$l_err);
$l_in .= "LISTEN trafficdb_subscription_$nid; SELECT 'listening';\n";
$listener->pump until $l_out =~ /listening/;
for my $speed (3, 60, 5)
{
	$node->safe_psql('postgres', qq{INSERT INTO trafficdb.feed (location_id, speed_kmh, congestion) VALUES (7, $speed, 2); SELECT trafficdb.publish()});
	sleep 1;
}
my $sent = $node->safe_psql('postgres', 'SELECT notify_sent FROM trafficdb.status');
$l_in .= "SELECT 'polled';\n";
$listener->pump until $l_out =~ /polled/;
$l_in .= "\\q\n";
$listener->finish;
cmp_ok($sent, '>', 0, 'the notifications were sent');
unlike($l_out, qr/trafficdb_subscription_$nid/, "a role with no grants does not hear another role's subscription notifications")
  or diag("notify_sent $sent; the listener got: $l_out");

unlike(slurp_file($node->logfile), qr/terminated by signal/, 'no process killed by a signal');
$node->stop;
done_testing();
