# t/039_region_search_path.pl: trafficdb.region_of() and _region_fit() ran
# with search_path = <PostGIS's schema>, pg_catalog.  PostGIS's schema is
# usually public; a role that may create objects there (any role, in a
# database created before PostgreSQL 15) defines public.= (integer,
# integer), which then comes before pg_catalog's: region_of()'s
# "ST_SRID(geom) = 4326" ran the role's function as whoever called it: a
# superuser updating trafficdb.regions, a feed writer, and the daemon while
# it loads a region's map (the daemon must never run SQL with a search_path a
# user could have changed).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('spath', 'trafficdb.publish_interval' => "'1h'");
$node->safe_psql('postgres', q{
CREATE EXTENSION trafficdb CASCADE;
CREATE TABLE roads AS
SELECT i::bigint AS id,
       ST_SetSRID(ST_MakeLine(ST_MakePoint(24.9 + (i % 40) * 0.002, 60.15 + (i / 40) * 0.001),
                              ST_MakePoint(24.9 + (i % 40) * 0.002 + 0.001, 60.15 + (i / 40) * 0.001 + 0.0005)), 4326) AS geom
  FROM generate_series(1, 2000) i;
INSERT INTO trafficdb.regions (name, area, bounds, server) VALUES
 ('w', ST_Multi(ST_MakeEnvelope(24.80, 60.00, 24.94, 60.30, 4326)), ST_MakeEnvelope(24.80, 60.00, 24.95, 60.30, 4326), 'srv_w'),
 ('e', ST_Multi(ST_MakeEnvelope(24.94, 60.00, 25.10, 60.30, 4326)), ST_MakeEnvelope(24.93, 60.00, 25.10, 60.30, 4326), 'srv_e');
CREATE ROLE mallory LOGIN;
GRANT CREATE ON SCHEMA public TO mallory;
SET ROLE mallory;
CREATE FUNCTION public.spy(integer, integer) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  RAISE WARNING 'spy ran as %', current_user;
  RETURN $1 OPERATOR(pg_catalog.=) $2;
END $$;
CREATE OPERATOR public.= (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.spy);
CREATE FUNCTION public.spy(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  RAISE WARNING 'spy ran as %', current_user;
  RETURN $1 OPERATOR(pg_catalog.=) $2;
END $$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.spy);
RESET ROLE;
});
is($node->safe_psql('postgres', q{SELECT extnamespace::regnamespace FROM pg_extension WHERE extname = 'postgis'}), 'public',
	'PostGIS is in schema public');

my ($ret, $out, $err) = $node->psql('postgres', q{SELECT trafficdb.region_of(geom) FROM roads WHERE id = 5});
is($out, 'w', 'region_of() answers');
unlike($err, qr/spy ran/, 'region_of() called by a superuser runs no function of mallory\'s');
my $off = -s $node->logfile;
($ret, $out, $err) = $node->psql('postgres', q{SELECT trafficdb.load_map('roads', 'id', 'geom', region => 'w')});
is($out, '1000', 'load_map(region => ...) loads the region');
unlike(slurp_file($node->logfile, $off), qr/spy ran/, 'the daemon ran no function of mallory\'s while loading the region');
($ret, $out, $err) = $node->psql('postgres', q{SELECT count(*) FROM roads WHERE trafficdb._region_fit(geom, 'e') = 1});
is($out, '1000', '_region_fit() answers');
unlike($err, qr/spy ran/, '_region_fit() runs no function of mallory\'s');

done_testing();
