# t/060_security_roles.pl: the hostile suite's SQL part (issue 28): every
# role the README documents attacks the server at once, and afterwards
#   - the server never restarted (0 crashes),
#   - no role gained a privilege (0 escalations),
#   - publication kept going (a feed row is published within a bounded
#     number of publish intervals after each attack),
#   - no role read, changed or received another role's subscriptions,
#   - every refusal was an error (never a silent success).
# The roles: nobody (no grants; CREATE on public, as PostgreSQL 14 and
# older and many installations still grant), reader (what PUBLIC has),
# feeder (INSERT on the feed), sub_a and sub_b (the subscriber grants).
# The per-item regression tests are in t/048-t/057; this file runs them
# together as the roles would.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('security', 'trafficdb.publish_interval' => "'200ms'", 'trafficdb.reader_pin_timeout' => "'1s'",
	'trafficdb.max_subscriptions_per_role' => '50');
tdb_grid_map($node);
$node->safe_psql('postgres', q{
SET client_min_messages = warning;
CREATE ROLE nobody LOGIN;
GRANT CREATE ON SCHEMA public TO nobody;
CREATE ROLE reader LOGIN;
CREATE ROLE feeder LOGIN;
GRANT INSERT ON trafficdb.feed TO feeder;
GRANT USAGE ON SEQUENCE trafficdb.feed_seq_seq TO feeder;
CREATE ROLE sub_a LOGIN;
CREATE ROLE sub_b LOGIN;
GRANT SELECT, INSERT, UPDATE, DELETE ON trafficdb.subscriptions TO sub_a, sub_b;
});
my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');

sub still_up
{
	my ($what) = @_;
	is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started, "$what: the server did not restart");
}

# A feed row is published within 50 publish intervals (10 s): publication
# keeps going whatever the roles did.
my $speed = 10;
sub publishes
{
	my ($what) = @_;
	$speed++;
	$node->safe_psql('postgres', "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (7, $speed)");
	my $seen = '';
	for (1 .. 100)
	{
		$seen = $node->safe_psql('postgres', 'SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 7');
		last if $seen eq $speed;
		select(undef, undef, undef, 0.1);
	}
	is($seen, $speed, "$what: publication goes on");
}

# as(role, sql): (exit code, stdout, stderr) of sql run as role.
sub as
{
	my ($role, $sql) = @_;
	my ($out, $err) = ('', '');
	my $rc = $node->psql('postgres', "SET ROLE $role; $sql", stdout => \$out, stderr => \$err);
	return ($rc, $out, $err);
}

sub refused
{
	my ($role, $sql, $pattern, $what) = @_;
	my ($rc, $out, $err) = as($role, $sql);
	ok($rc != 0 && $err =~ $pattern, "$what: refused with a clear error") or diag("rc $rc, out: $out, err: $err");
}

# --- nobody: the internal functions are not theirs, triggers attach nowhere
my @internal = split /\n/, $node->safe_psql('postgres', q{
SELECT p.oid::regprocedure FROM pg_proc p
  JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'trafficdb'
 WHERE p.proname LIKE '\_%'
   -- PostgreSQL checks EXECUTE on these as the caller inside what PUBLIC may
   -- use (the feed's default and check, the status and readers views,
   -- changes_since, load_map(region), tile()'s aggregate): none writes
   AND p.proname NOT IN ('_feed_part', '_feed_owned', '_status', '_readers', '_check_changes_since', '_region_fit', '_asmvt')
 ORDER BY 1});
ok(@internal >= 2, 'the extension has internal functions (' . scalar(@internal) . ')');
for my $f (@internal)
{
	is($node->safe_psql('postgres', "SELECT has_function_privilege('nobody', '$f', 'EXECUTE')"), 'f',
		"nobody cannot execute $f");
}
refused('nobody', q{
CREATE TEMP TABLE evil (id int, location_ids bigint[], area int, center int, radius_m float8, condition int, value float8, events text);
CREATE TRIGGER evil BEFORE INSERT ON evil FOR EACH ROW EXECUTE FUNCTION trafficdb._subscription_check();
INSERT INTO evil (id, condition, events) VALUES (1, 12345, 'change');}, qr/permission denied/, 'the check trigger on a temp table');
refused('nobody', q{
CREATE TEMP TABLE evil2 (id int);
CREATE TRIGGER evil2 AFTER INSERT ON evil2 FOR EACH STATEMENT EXECUTE FUNCTION trafficdb._subscriptions_changed();},
	qr/permission denied/, 'the reload trigger on a temp table');
refused('nobody', q{INSERT INTO trafficdb.subscriptions (name, location_ids) VALUES ('x', '{1}')}, qr/permission denied/,
	'a subscription without the grants');
# even a superuser cannot point the triggers at another table
my ($rc, $out, $err) = as('"' . tdb_superuser($node) . '"', q{
CREATE TABLE evil3 (id int, location_ids bigint[], area int, center int, radius_m float8, condition int, value float8, events text);
CREATE TRIGGER evil3 BEFORE INSERT ON evil3 FOR EACH ROW EXECUTE FUNCTION trafficdb._subscription_check();
INSERT INTO evil3 (id, condition, events) VALUES (1, 12345, 'change');});
ok($rc != 0 && $err =~ /trafficdb\.subscriptions/, 'the check trigger refuses a relation other than its own')
	or diag($err);
still_up('nobody and the triggers');

# --- nobody: PostGIS names planted in public never run in tile()
as('nobody', q{
CREATE TABLE public.planted (who text);
GRANT INSERT ON public.planted TO PUBLIC;
CREATE FUNCTION public.st_asmvtgeom(geometry, geometry, int, int, bool) RETURNS geometry LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.planted VALUES (current_user);
  BEGIN EXECUTE 'ALTER ROLE nobody SUPERUSER'; EXCEPTION WHEN others THEN NULL; END;
  RETURN $1;
END $$;
CREATE FUNCTION public.st_transform(geometry, int) RETURNS geometry LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.planted VALUES (current_user);
  BEGIN EXECUTE 'ALTER ROLE nobody SUPERUSER'; EXCEPTION WHEN others THEN NULL; END;
  RETURN $1;
END $$;});
$node->safe_psql('postgres', q{SELECT length(trafficdb.tile(14, 9326, 4740)); SELECT count(*) FROM trafficdb.tile_features(14, 9326, 4740)});
is($node->safe_psql('postgres', q{SELECT count(*) FROM public.planted}), '0', 'tile() never called a planted function');
is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'nobody'}), 'f', 'nobody is not superuser');
publishes('nobody');

# --- subscribers: NULLs, forgery, other roles' rows and events, budgets
for my $sql (
	q{INSERT INTO trafficdb.subscriptions (name, location_ids, condition) VALUES ('x', '{1}', NULL)},
	q{INSERT INTO trafficdb.subscriptions (name, location_ids, events) VALUES ('x', '{1}', NULL)},
	q{INSERT INTO trafficdb.subscriptions (name, center, radius_m) VALUES ('x', ST_SetSRID(ST_MakePoint(24.9, 60.15), 4326), 1e300)},
	q{INSERT INTO trafficdb.subscriptions (name, area) VALUES ('x', ST_MakeEnvelope(-1e308, -1e308, 1e308, 1e308, 4326))},
	q{INSERT INTO trafficdb.subscriptions (name, area) VALUES ('x', 'SRID=4326;POLYGON((24.9 60.15, 24.95 60.2, 24.95 60.15, 24.9 60.2, 24.9 60.15))')})
{
	refused('sub_a', $sql, qr/ERROR/, "sub_a: $sql");
}
my $a_id = (as('sub_a', q{INSERT INTO trafficdb.subscriptions (name, location_ids) VALUES ('mine', '{7}') RETURNING id}))[1];
$a_id =~ s/\s+//g;
like($a_id, qr/^\d+$/, 'sub_a subscribes to location 7');
refused('sub_a', q{UPDATE trafficdb.subscriptions SET condition = NULL}, qr/ERROR/, 'sub_a: a NULL condition through UPDATE');
refused('sub_b', q{INSERT INTO trafficdb.subscriptions (name, location_ids, owner) VALUES ('forged', '{7}', 'sub_a')},
	qr/ERROR/, 'sub_b: a subscription in sub_a\'s name');
is((as('sub_b', q{SELECT count(*) FROM trafficdb.subscriptions}))[1] =~ s/\s+//gr, '0', 'sub_b sees none of sub_a\'s rows');
as('sub_b', q{DELETE FROM trafficdb.subscriptions; UPDATE trafficdb.subscriptions SET location_ids = '{8}'});
is($node->safe_psql('postgres', "SELECT location_ids FROM trafficdb.subscriptions WHERE id = $a_id"), '{7}',
	'sub_b neither deleted nor changed sub_a\'s subscription');
refused('sub_b', "SELECT * FROM trafficdb.subscription_events($a_id, 10, 0)", qr/ERROR/,
	'sub_b: the events of sub_a\'s subscription');
refused('sub_a', q{INSERT INTO trafficdb.subscriptions (name, location_ids) SELECT 'many', ARRAY[i::bigint] FROM generate_series(1, 100) i},
	qr/max_subscriptions_per_role/, 'sub_a: past its budget of subscriptions');
still_up('the subscribers');
publishes('the subscribers');

# --- feeder: hostile feed rows go to feed_rejects, publication goes on
for my $sql (q{INSERT INTO trafficdb.feed (location_id, incident) VALUES (7, repeat('x', 4097))},
	q{INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (7, 'NaN')})
{
	my ($rc, $out, $err) = as('feeder', $sql);
	ok($rc != 0 ? $err =~ /ERROR/ : 1, "feeder: $sql: taken or refused with an error") or diag($err);
}
refused('feeder', q{SELECT trafficdb.publish()}, qr/permission denied/, 'feeder: publish()');
refused('feeder', q{SELECT trafficdb.load_map('roads')}, qr/permission denied/, 'feeder: load_map()');
still_up('the feeder');
publishes('the feeder');
ok($node->safe_psql('postgres', q{SELECT count(*) FROM trafficdb.feed_rejects WHERE location_id = 7}) >= 1,
	'the feeder\'s hostile rows went to feed_rejects, with the reason');

# --- reader: a pin held past reader_pin_timeout does not stop publication
my $pin = $node->background_psql('postgres');
$pin->query_safe(q{SET ROLE reader; BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM trafficdb.locations});
publishes('a reader holding its pin');
$pin->quit;
refused('reader', q{SELECT * FROM trafficdb.subscriptions}, qr/permission denied/, 'reader: the subscriptions table');
still_up('the reader');

is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_roles WHERE rolsuper AND rolname IN ('nobody', 'reader', 'feeder', 'sub_a', 'sub_b')}),
	'0', 'no role became superuser');
done_testing();
