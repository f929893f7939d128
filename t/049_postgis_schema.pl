# t/049_postgis_schema.pl: trafficdb's SQL functions ran PostGIS through
# search_path = pg_catalog, <PostGIS's schema> (issue 28, item 10).  PostGIS
# usually lives in public; a role that may create objects there defines
# functions and operators named like PostGIS's whose argument types match a
# call better (public.st_asmvtgeom(geometry, geometry, int, int, bool) beats
# PostGIS's (geometry, box2d, ...), st_asmvt(record, ...) beats its
# anyelement), and the next tile() run by a superuser ran them as the
# superuser.  Every call must reach PostGIS's own functions: the planted ones
# never run (each would record its call and try to make its role superuser).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('pgschema', 'trafficdb.publish_interval' => "'1h'");
tdb_grid_map($node);
is($node->safe_psql('postgres', q{SELECT extnamespace::regnamespace FROM pg_extension WHERE extname = 'postgis'}), 'public',
	'PostGIS is in schema public');
$node->safe_psql('postgres', q{
INSERT INTO trafficdb.feed (location_id, speed_kmh, congestion) SELECT i, 30, 1 FROM generate_series(1, 50) i;
SELECT trafficdb.publish();
INSERT INTO trafficdb.regions (name, area, bounds, server) VALUES
 ('w', ST_Multi(ST_MakeEnvelope(24.80, 60.00, 24.94, 60.30, 4326)), ST_MakeEnvelope(24.80, 60.00, 24.95, 60.30, 4326), 'srv_w');
CREATE ROLE mallory LOGIN;
GRANT CREATE ON SCHEMA public TO mallory;
CREATE TABLE public.planted_ran (fn text, as_role text);
GRANT INSERT ON public.planted_ran TO mallory;
});

# mallory's functions: named like the PostGIS functions (and operators)
# tile(), tile_features(), geojson(), region_of() and _region_fit() call,
# with argument types that match a call better than PostGIS's do (one with
# extra defaulted arguments would only make a call ambiguous: an error, not
# an escalation; README, Security)
my @plants = (
	[ 'st_asmvtgeom', 'geometry, geometry, integer, integer, boolean', 'geometry', '$1' ],
	[ 'st_asmvt', 'record, text, integer, text', 'bytea', 'NULL' ],
	[ 'st_tileenvelope', 'integer, integer, integer, geometry, numeric', 'geometry', 'NULL' ],
	[ 'st_transform', 'geometry, bigint', 'geometry', '$1' ],
	[ 'st_transform', 'geometry, numeric', 'geometry', '$1' ],
	[ 'st_asgeojson', 'geometry, bigint, bigint', 'text', 'NULL' ],
	[ 'st_makeenvelope', 'numeric, numeric, numeric, numeric, integer', 'geometry', 'NULL' ],
	[ 'st_pointonsurface', 'text', 'geometry', 'NULL' ],
	[ 'st_intersects', 'geometry, text', 'boolean', 'true' ],
	[ 'json', 'text', 'json', 'NULL' ],
	[ 'spy_bool', 'geometry, geometry', 'boolean', 'true' ],
	[ 'spy_int', 'integer, integer', 'boolean', 'true' ],
);
my $sql = "SET ROLE mallory;\n";
for my $p (@plants)
{
	my ($name, $args, $ret, $val) = @$p;
	$sql .= qq{CREATE FUNCTION public.$name($args) RETURNS $ret LANGUAGE plpgsql AS \$\$
BEGIN
  INSERT INTO public.planted_ran VALUES ('$name($args)', current_user);
  BEGIN ALTER ROLE mallory SUPERUSER; EXCEPTION WHEN OTHERS THEN NULL; END;
  RETURN $val;
END \$\$;
};
}
$sql .= q{
CREATE OPERATOR public.&& (LEFTARG = geometry, RIGHTARG = geometry, FUNCTION = public.spy_bool);
CREATE OPERATOR public.@ (LEFTARG = geometry, RIGHTARG = geometry, FUNCTION = public.spy_bool);
CREATE OPERATOR public.= (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.spy_int);
RESET ROLE;
};
my ($ret, $out, $err) = $node->psql('postgres', $sql);
# (&& and @ on (geometry, geometry) are PostGIS's own: those fail)
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_proc WHERE proowner = 'mallory'::regrole}), scalar(@plants),
	'mallory planted every function') or diag($err);

# the calls, by a superuser, each in its own transaction
my @calls = (
	[ 'tile', q{SELECT length(trafficdb.tile(14, 9326, 4739)) > 0} ],
	[ 'tile_features', q{SELECT count(*) > 0 FROM trafficdb.tile_features(14, 9326, 4739)} ],
	[ 'geojson', q{SELECT json_array_length(trafficdb.geojson(24.89, 60.14, 24.95, 60.17)->'features') > 0} ],
	[ 'region_of', q{SELECT trafficdb.region_of(geom) = 'w' FROM roads WHERE id = 5} ],
	[ '_region_fit', q{SELECT trafficdb._region_fit(geom, 'w') = 1 FROM roads WHERE id = 5} ],
);
for my $c (@calls)
{
	my ($name, $q) = @$c;
	($ret, $out, $err) = $node->psql('postgres', $q);
	is($out, 't', "$name() answers, as PostGIS's functions would") or diag($err);
}
# and by a role with no grants (the live map's role)
$node->safe_psql('postgres', q{CREATE ROLE viewer LOGIN});
for my $c (@calls[0 .. 2])
{
	my ($name, $q) = @$c;
	($ret, $out, $err) = $node->psql('postgres', $q, extra_params => [ '-U', 'viewer' ]);
	is($out, 't', "$name() answers a role with no grants") or diag($err);
}
# tile()'s aggregate refuses a NULL row (PostGIS's ST_AsMVT would crash on it)
($ret, $out, $err) = $node->psql('postgres', q{SELECT trafficdb._asmvt(t.r, 'x', 4096, 'geom')
  FROM (SELECT 1) a LEFT JOIN (SELECT NULL::trafficdb._tile_row AS r WHERE false) t ON true});
like($err, qr/trafficdb\._asmvt\(\) takes a row of each feature, not NULL/, '_asmvt(NULL row): an error, no crash');
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'the server is up');
is($node->safe_psql('postgres', q{SELECT coalesce(string_agg(DISTINCT fn, '; '), '') FROM public.planted_ran}), '',
	'no function of mallory\'s ran');
is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}), 'f', 'mallory is not superuser');

# and the functions' settings pin no schema a role could write
# (current_traffic() has none so that it can be inlined: its one operator is
# qualified)
is($node->safe_psql('postgres', q{
SELECT coalesce(string_agg(p.proname, ', ' ORDER BY p.proname), '')
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'trafficdb'
 WHERE p.prolang IN (SELECT oid FROM pg_language WHERE lanname IN ('sql', 'plpgsql'))
   AND p.proname <> 'current_traffic'
   AND NOT coalesce(p.proconfig = ARRAY['search_path=pg_catalog'], false)}), '',
	'every SQL and PL/pgSQL function of the extension runs with search_path = pg_catalog');

# installing where PostGIS's schema is writable by such a role says so
$node->safe_psql('postgres', q{CREATE DATABASE other});
($ret, $out, $err) = $node->psql('other', q{CREATE EXTENSION postgis; GRANT CREATE ON SCHEMA public TO mallory;
CREATE EXTENSION trafficdb;});
like($err, qr/WARNING:  PostGIS's schema public is writable by roles that are not superusers: mallory/,
	'CREATE EXTENSION warns that PostGIS\'s schema is writable by mallory');
($ret, $out, $err) = $node->psql('other', q{DROP EXTENSION trafficdb; REVOKE CREATE ON SCHEMA public FROM mallory;
CREATE EXTENSION trafficdb;});
unlike($err, qr/is writable/, '... and not when it is not');

# _region_fit() stays executable by PUBLIC: the daemon calls it with the
# rights of the role that called load_map, while it reads the source
$node->safe_psql('postgres', q{CREATE ROLE loader LOGIN; GRANT SELECT ON roads TO loader;
GRANT EXECUTE ON FUNCTION trafficdb.load_map TO loader;});
($ret, $out, $err) = $node->psql('postgres', q{SELECT trafficdb.load_map('roads', 'id', 'geom', region => 'w')},
	extra_params => [ '-U', 'loader' ]);
my $want = $node->safe_psql('postgres', q{SELECT count(*) FROM roads WHERE trafficdb.region_of(geom) = 'w'});
ok($want > 0 && $out eq $want, "a role granted load_map loads a region's map ($want locations)") or diag("$out $err");
is($node->safe_psql('postgres', q{SELECT coalesce(string_agg(DISTINCT fn, '; '), '') FROM public.planted_ran}), '',
	'no function of mallory\'s ran while the daemon loaded it');

done_testing();
