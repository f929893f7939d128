--
-- CREATE EXTENSION / DROP EXTENSION: what is created, what is refused,
-- and that nothing is left behind.
--
\set VERBOSITY default

-- PostGIS is required: without it the extension is refused with a hint.
CREATE EXTENSION trafficdb;
SELECT count(*) AS trafficdb_schemas FROM pg_namespace WHERE nspname = 'trafficdb';

CREATE EXTENSION postgis;
CREATE EXTENSION trafficdb;
SELECT extversion, extrelocatable FROM pg_extension WHERE extname = 'trafficdb';
SELECT nspname, pg_get_userbyid(nspowner) = current_user AS owned_by_creator
  FROM pg_namespace WHERE nspname = 'trafficdb';
SELECT trafficdb.version() = (SELECT extversion FROM pg_extension WHERE extname = 'trafficdb')
  AS library_matches_sql;

-- every object the extension owns
SELECT pg_describe_object(classid, objid, 0) AS member
  FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'trafficdb')
   AND deptype = 'e'
 ORDER BY 1;

-- installing twice is an error; PostGIS cannot be dropped from under it
CREATE EXTENSION trafficdb;
DROP EXTENSION postgis;

-- the install script cannot be run outside CREATE EXTENSION
-- (its \echo/\quit guard is exercised by psql only, so check the catalog)
SELECT count(*) AS orphan_functions FROM pg_proc p
  LEFT JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
 WHERE p.pronamespace = 'trafficdb'::regnamespace AND d.objid IS NULL;

-- dropping removes the schema and every member
DROP EXTENSION trafficdb;
SELECT count(*) AS trafficdb_schemas FROM pg_namespace WHERE nspname = 'trafficdb';
SELECT count(*) AS trafficdb_functions FROM pg_proc WHERE prosrc LIKE 'trafficdb%';

-- a schema of that name that is not ours stops CREATE EXTENSION
CREATE SCHEMA trafficdb;
CREATE EXTENSION trafficdb;
DROP SCHEMA trafficdb;

-- and it comes back cleanly, together with PostGIS through CASCADE
DROP EXTENSION postgis;
CREATE EXTENSION trafficdb CASCADE;
-- this database is not the one the daemon serves (trafficdb.database): feed rows are refused
INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, 10);
SELECT extname FROM pg_extension WHERE extname IN ('postgis', 'trafficdb') ORDER BY 1;
SELECT trafficdb.version() IS NOT NULL AS works;
