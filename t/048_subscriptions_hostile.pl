# t/048_subscriptions_hostile.pl: trafficdb.subscriptions against hostile
# roles (issue 28, items 1, 2, 5, 6 and 12):
#  - a role with exactly the documented subscriber grants (SELECT, INSERT,
#    DELETE on the table, USAGE on its sequence) writing NULLs where the row
#    trigger read before NOT NULL held (SIGSEGV, cluster restart);
#  - a role with no grants attaching the C trigger functions to its own temp
#    table (SIGSEGV; a forced reload of every subscription at each commit);
#  - one subscriber reading, deleting, forging or receiving another's
#    subscriptions;
#  - absurd values, and one role's count of subscriptions.
# After every attack the server must still be the same server: the daemon's
# pid, the postmaster's start time and a session opened at the start survive,
# and the log shows no process killed by a signal.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('hostile', 'trafficdb.publish_interval' => "'1h'");
tdb_grid_map($node);
$node->safe_psql('postgres', q{
CREATE ROLE nogrant LOGIN;
CREATE ROLE sub_a LOGIN;
CREATE ROLE sub_b LOGIN;
-- the documented subscriber grants (README, Subscriptions; the extension's SQL)
GRANT SELECT, INSERT, DELETE ON trafficdb.subscriptions TO sub_a, sub_b;
GRANT USAGE ON SEQUENCE trafficdb.subscriptions_id_seq TO sub_a, sub_b;
});

my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
my $daemon = $node->safe_psql('postgres', 'SELECT daemon_pid FROM trafficdb.status');
# a session of its own, open all along: a crash of any backend ends it
my ($w_in, $w_out, $w_err) = ('', '', '');
my $watcher = IPC::Run::start([ 'psql', '-XAtq', '-d', $node->connstr('postgres') ],
	'<', \$w_in, '>', \$w_out, '2>', \$w_err);
$w_in .= "SELECT 'watcher ' || pg_backend_pid();\n";
$watcher->pump until $w_out =~ /watcher (\d+)/;
my $watcher_pid = $1;

sub server_intact
{
	my ($what) = @_;
	my $log = slurp_file($node->logfile);
	my ($ret, $now) = $node->psql('postgres', 'SELECT pg_postmaster_start_time()::text || \' \' || (SELECT daemon_pid FROM trafficdb.status)');
	my $alive = $node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid = $watcher_pid");
	ok($log !~ /terminated by signal|was terminated by exception|terminating any other active server processes/
		  && $ret == 0 && $now eq "$started $daemon" && $alive eq '1',
		"$what: no crash (no process killed, same postmaster, daemon and other session)")
	  or diag("log:\n" . join("\n", grep { /terminated|terminating|PANIC/ } split /\n/, $log));
}

# psql as a role; returns (stdout, stderr)
sub as
{
	my ($role, $sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', $sql, extra_params => [ '-U', $role ]);
	return ($out, $err);
}

# ---- item 1: NULL in NOT NULL columns the trigger reads ----------------------
for my $col ('condition', 'events')
{
	my ($out, $err) = as('sub_a',
		"INSERT INTO trafficdb.subscriptions (name, location_ids, $col) VALUES ('x', '{1}', NULL)");
	like($err, qr/null value in column "$col"/, "INSERT of a NULL $col as a subscriber: refused, naming the column");
	server_intact("INSERT of a NULL $col");
}
my $sid = $node->safe_psql('postgres', q{INSERT INTO trafficdb.subscriptions (name, location_ids) VALUES ('mine', '{1}') RETURNING id});
for my $col ('condition', 'events')
{
	my ($ret, $out, $err) = $node->psql('postgres', "UPDATE trafficdb.subscriptions SET $col = NULL WHERE id = $sid");
	like($err, qr/null value in column "$col"/, "UPDATE to a NULL $col: refused, naming the column");
	server_intact("UPDATE to a NULL $col");
}
$node->safe_psql('postgres', "DELETE FROM trafficdb.subscriptions WHERE id = $sid");

# ---- item 2: the C trigger functions, from a role with no grants, and on another table
my $evil = q{CREATE TEMP TABLE evil (id int, location_ids bigint[], area int, center int, radius_m float8,
  condition int, value float8, events text);};
my ($out, $err) = as('nogrant', $evil . q{
CREATE TRIGGER evil BEFORE INSERT ON evil FOR EACH ROW EXECUTE FUNCTION trafficdb._subscription_check();
INSERT INTO evil (id, condition, events) VALUES (1, 12345, 'change');});
like($err, qr/permission denied for function (?:trafficdb\.)?_subscription_check/, 'a role with no grants cannot attach _subscription_check()');
server_intact('_subscription_check() attached by a role with no grants');
($out, $err) = as('nogrant', $evil . q{
CREATE TRIGGER evil AFTER INSERT ON evil FOR EACH STATEMENT EXECUTE FUNCTION trafficdb._subscriptions_changed();});
like($err, qr/permission denied for function (?:trafficdb\.)?_subscriptions_changed/, 'a role with no grants cannot attach _subscriptions_changed()');
($out, $err) = as('nogrant', q{SELECT trafficdb._assert_preloaded()});
like($err, qr/permission denied for function (?:trafficdb\.)?_assert_preloaded/, 'a role with no grants cannot call _assert_preloaded()');

# every internal function of the extension: not executable by PUBLIC, except
# those PostgreSQL runs with the caller's rights inside what PUBLIC may use
# (the feed's DEFAULT and CHECK, the status and readers views, changes_since,
# tile()'s aggregate, and _region_fit, which the daemon calls as the role
# that called load_map while it reads the map source)
is($node->safe_psql('postgres', q{
SELECT coalesce(string_agg(p.oid::regprocedure::text, ', ' ORDER BY 1), '')
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'trafficdb'
 WHERE (p.proname LIKE '\_%' OR p.prorettype IN ('trigger'::regtype, 'fdw_handler'::regtype)
        OR p.proname LIKE '%fdw_validator')
   AND p.proname NOT IN ('_feed_part', '_feed_owned', '_status', '_readers', '_check_changes_since', '_asmvt', '_region_fit')
   AND has_function_privilege('nogrant', p.oid, 'EXECUTE')}), '',
	'no internal function or trigger function is executable by a role with no grants');

# a superuser attaching them elsewhere gets an error naming the relation
my $ret;
($ret, $out, $err) = $node->psql('postgres', $evil . q{
CREATE TRIGGER evil BEFORE INSERT ON evil FOR EACH ROW EXECUTE FUNCTION trafficdb._subscription_check();
INSERT INTO evil (id, condition, events) VALUES (1, 12345, 'change');});
like($err, qr/_subscription_check\(\) fires only on trafficdb\.subscriptions, not on .*evil/,
	'_subscription_check() on another table: a clear error');
server_intact('_subscription_check() on another table');
($ret, $out, $err) = $node->psql('postgres', $evil . q{
CREATE TRIGGER evil AFTER INSERT ON evil FOR EACH STATEMENT EXECUTE FUNCTION trafficdb._subscriptions_changed();
INSERT INTO evil (id) VALUES (1);});
like($err, qr/_subscriptions_changed\(\) fires only on trafficdb\.subscriptions, not on .*evil/,
	'_subscriptions_changed() on another table: a clear error');
# a table named like it in another schema is another table
($ret, $out, $err) = $node->psql('postgres', q{CREATE SCHEMA fake; CREATE TABLE fake.subscriptions (LIKE trafficdb.subscriptions);
CREATE TRIGGER c BEFORE INSERT ON fake.subscriptions FOR EACH ROW EXECUTE FUNCTION trafficdb._subscription_check();
SET search_path = fake, public; INSERT INTO fake.subscriptions (id, location_ids, condition, events, owner, created_at, notify)
  VALUES (1, '{1}', 'any', 'change', 'x', now(), false);});
like($err, qr/fires only on trafficdb\.subscriptions, not on fake\.subscriptions/, 'a table of that name in another schema is refused');
server_intact('trigger functions on other tables');

# ---- item 6: one subscriber's rows are its own -------------------------------
my ($a_id) = as('sub_a', q{INSERT INTO trafficdb.subscriptions (name, location_ids) VALUES ('a''s', '{5}') RETURNING id});
my ($b_id) = as('sub_b', q{INSERT INTO trafficdb.subscriptions (name, location_ids) VALUES ('b''s', '{6}') RETURNING id});
like($a_id, qr/^\d+$/, "sub_a subscribes ($a_id)");
like($b_id, qr/^\d+$/, "sub_b subscribes ($b_id)");
($out) = as('sub_b', 'SELECT string_agg(name, \',\') FROM trafficdb.subscriptions');
is($out, "b's", 'sub_b sees its own subscription only');
($out) = as('sub_b', "DELETE FROM trafficdb.subscriptions WHERE id = $a_id RETURNING id");
is($out, '', 'sub_b cannot delete sub_a\'s subscription');
is($node->safe_psql('postgres', "SELECT owner FROM trafficdb.subscriptions WHERE id = $a_id"), 'sub_a', '... which stays');
($out, $err) = as('sub_b', q{INSERT INTO trafficdb.subscriptions (name, location_ids, owner) VALUES ('forged', '{7}', 'postgres')});
like($err, qr/owner "postgres" is not the current role "sub_b"/, 'sub_b cannot forge a subscription of postgres');
($out, $err) = as('sub_b', q{INSERT INTO trafficdb.subscriptions (name, location_ids, owner) VALUES ('forged', '{7}', 'sub_a')});
like($err, qr/owner "sub_a" is not the current role "sub_b"/, '... nor of sub_a');
($out, $err) = as('sub_b', "SELECT count(*) FROM trafficdb.subscription_events($a_id)");
like($err, qr/permission denied for subscription $a_id/, 'subscription_events() of another role\'s subscription: permission denied, naming it');
($out, $err) = as('sub_a', "SELECT count(*) FROM trafficdb.subscription_events($a_id)");
is($out, '0', 'subscription_events() of one\'s own subscription works');
($out, $err) = as('sub_b', "SELECT count(*) FROM trafficdb.subscription_events(999999)");
like($err, qr/subscription 999999 does not exist/, 'an unknown id: does not exist');
($out, $err) = as('nogrant', "SELECT count(*) FROM trafficdb.subscription_events($a_id)");
like($err, qr/permission denied/, 'a role with no grants reads no subscription\'s events');
is($node->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.subscriptions'), '2', 'a superuser sees every subscription');
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
is($node->safe_psql('postgres', 'SELECT subscriptions FROM trafficdb.status'), '2', 'the daemon loads every role\'s subscriptions');
is($node->safe_psql('postgres', "SELECT count(*) FROM trafficdb.subscription_events($a_id)"), '0',
	'a superuser may read any subscription\'s events');

# ---- item 12: absurd values, each refused naming the value --------------------
sub refused
{
	my ($values, $expect, $what) = @_;
	my ($o, $e) = as('sub_a', "INSERT INTO trafficdb.subscriptions $values");
	like($e, $expect, $what);
}
my $c = q{ST_SetSRID(ST_MakePoint(24.92, 60.16), 4326)};
refused("(center, radius_m) VALUES ($c, 1e300)", qr/radius 1e\+300 m is out of range/, 'a radius of 1e300 m');
refused("(center, radius_m) VALUES ($c, -1)", qr/radius -1 m/, 'a negative radius');
refused("(center, radius_m) VALUES ($c, 'NaN')", qr/radius nan m/i, 'a NaN radius');
refused("(center, radius_m) VALUES ($c, 'Infinity')", qr/radius inf m/i, 'an infinite radius');
refused(q{(area) VALUES (ST_MakeEnvelope(-1e308, -1e308, 1e308, 1e308, 4326))}, qr/area .*outside longitudes \[-180, 180\] and latitudes \[-90, 90\]/,
	'an envelope of +-1e308');
refused(q{(area) VALUES (ST_MakeEnvelope(24.9, 60.1, 'Infinity'::float8, 60.2, 4326))},
	qr/area is a polygon with invalid coordinates|area .* reaches outside/, 'an area with an infinite coordinate');
refused(q{(area) VALUES (ST_MakeEnvelope(24.9, 60.1, 'NaN'::float8, 60.2, 4326))},
	qr/area is a polygon with invalid coordinates|area .* reaches outside/, 'an area with a NaN coordinate');
refused(q{(area) VALUES ('SRID=4326;POLYGON((24.9 60.1, 25 60.2, 25 60.1, 24.9 60.2, 24.9 60.1))')},
	qr/area is not a valid polygon: Self-intersection/, 'a self-intersecting polygon');
refused(q{(location_ids) VALUES (array_fill(5::bigint, ARRAY[1000000]))}, qr/location_ids holds 1000000 ids: at most 10000/,
	'1,000,000 duplicate ids');
refused(q{(location_ids) VALUES ('{}')}, qr/list of location ids is empty|location_ids is empty/, 'an empty id list');
refused(q{(location_ids) VALUES ('{5, NULL}')}, qr/location_ids holds a NULL at position 2/, 'a NULL id');
refused(q{(location_ids) VALUES ('{{5, 6}, {7, 8}}')}, qr/location_ids is a 2-dimensional array/, 'a 2-D array of ids');
refused(q{(location_ids) VALUES ('{-5}')}, qr/location id -5/, 'a negative id');
($out, $err) = as('sub_a', q{INSERT INTO trafficdb.subscriptions (location_ids) VALUES ('{5, 5, 6, 5}') RETURNING location_ids});
is($out, '{5,6}', 'duplicate ids are stored once, sorted');
server_intact('absurd values');

# ---- item 5 (part): a role's count of subscriptions ---------------------------
$node->safe_psql('postgres', 'ALTER ROLE sub_b SET trafficdb.max_subscriptions_per_role = 3');
($out, $err) = as('sub_b', q{INSERT INTO trafficdb.subscriptions (location_ids) VALUES ('{8}'), ('{9}')});
is($err, '', 'sub_b reaches its limit of 3');
($out, $err) = as('sub_b', q{INSERT INTO trafficdb.subscriptions (location_ids) VALUES ('{10}')});
like($err, qr/role "sub_b" has 3 subscriptions: trafficdb\.max_subscriptions_per_role is 3/, 'the 4th is refused, naming the role, its count and the setting');
($out, $err) = as('sub_b', q{SET trafficdb.max_subscriptions_per_role = 100000});
like($err, qr/permission denied to set parameter "trafficdb\.max_subscriptions_per_role"/, 'a role cannot raise its own limit');
($out, $err) = as('sub_a', q{INSERT INTO trafficdb.subscriptions (location_ids) SELECT ARRAY[i::bigint] FROM generate_series(1, 20) i});
is($err, '', 'another role\'s count is its own (default limit 1000)');
is($node->safe_psql('postgres', q{SHOW trafficdb.max_subscriptions_per_role}), '1000', 'the default is 1000');
# the count's per-role lock is none a role can take with pg_advisory_lock():
# sub_b holding every such lock of its own does not hold sub_a's INSERT
my $hash = $node->safe_psql('postgres', q{SELECT hashtext('sub_a')});
# (held in the watcher's session, as sub_b, while sub_a inserts)
$w_in .= qq{SET ROLE sub_b; SELECT pg_advisory_lock(1952735859, $hash); SELECT 'locked';\n};
$watcher->pump until $w_out =~ /locked/;
($out, $err) = as('sub_a', q{SET statement_timeout = '3s'; INSERT INTO trafficdb.subscriptions (location_ids) VALUES ('{30}')});
is($err, '', 'sub_a inserts while another role holds advisory locks of the same keys');
$w_in .= qq{SELECT pg_advisory_unlock_all(); RESET ROLE;\n};
server_intact('the count of subscriptions');

$w_in .= "\\q\n";
$watcher->finish;
done_testing();
