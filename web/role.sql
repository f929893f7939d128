-- web/role.sql: the role the live map's app (web/app.py) connects as, with
-- what it reads and nothing more: not a superuser, no feed, no
-- subscriptions.  psql variables: server (the trail FDW's server),
-- access_key, secret_key (its S3 keys for this role; read-only keys in a
-- deployment).  Run by scripts/demo.sh and test/livemap.sh as a superuser,
-- again after each new extension or trail schema.
SET client_min_messages = warning;
SELECT NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'trafficdb_web') AS create_role \gset
\if :create_role
CREATE ROLE trafficdb_web LOGIN;
\endif
-- trafficdb.locations, tile_features and changes_since are PUBLIC's; the
-- time of the generation published is not
GRANT SELECT ON trafficdb.daemon_state TO trafficdb_web;
-- the vessels (no USAGE on the server: the role cannot read its mapping's keys)
GRANT USAGE ON SCHEMA trails TO trafficdb_web;
GRANT SELECT ON ALL TABLES IN SCHEMA trails TO trafficdb_web;
DROP USER MAPPING IF EXISTS FOR trafficdb_web SERVER :"server";
CREATE USER MAPPING FOR trafficdb_web SERVER :"server" OPTIONS (access_key :'access_key', secret_key :'secret_key');
