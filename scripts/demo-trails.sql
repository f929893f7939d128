-- scripts/demo-trails.sql: real vessel trails (AIS, US coastal waters on
-- 2020-06-30 and New York Harbor in the first week of December 2020) as
-- trail files in a local MinIO, queried with SQL through the trail FDW.
-- demo.sh uploaded the files with trafficdb-trail and passes the endpoint
-- and credentials (:'endpoint', :'access_key', :'secret_key') and an empty
-- block cache directory (:'cache_dir').
\set ON_ERROR_STOP on
SET client_min_messages = warning;
SET TimeZone = 'UTC';
DROP SERVER IF EXISTS minio CASCADE;
DROP SCHEMA IF EXISTS trails CASCADE;
CREATE SERVER minio FOREIGN DATA WRAPPER trafficdb_trails
  OPTIONS (endpoint :'endpoint', region 'us-east-1', block_size '64kB', cache_dir :'cache_dir');
-- credentials live in the user mapping only (never in table options or messages)
CREATE USER MAPPING FOR CURRENT_USER SERVER minio
  OPTIONS (access_key :'access_key', secret_key :'secret_key');
CREATE SCHEMA trails;
IMPORT FOREIGN SCHEMA "s3://vessels/us_coastal_2020_06_30.trail" FROM SERVER minio INTO trails;
IMPORT FOREIGN SCHEMA "s3://vessels/nyharbor_2020_12_first_week.trail" FROM SERVER minio INTO trails;
\d trails.us_coastal_2020_06_30

\echo '-- one vessel''s day along the US coast: the footer (trail index, zone maps) and its pages are all that is fetched'
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT * FROM trails.us_coastal_2020_06_30 WHERE mmsi = 367697580;
SELECT mmsi, count(*) AS reports, min(ts) AS first, max(ts) AS last,
       round((ST_Length(ST_MakeLine(geom ORDER BY ts)::geography) / 1852)::numeric, 1) AS nautical_miles
  FROM trails.us_coastal_2020_06_30 WHERE mmsi = 367697580 GROUP BY mmsi;

\echo '-- who passed within 1 km of the Statue of Liberty on 3 December 2020 (area and time pushed down)'
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT count(*) FROM trails.nyharbor_2020_12_first_week
 WHERE ST_DWithin(geom::geography, ST_SetSRID(ST_MakePoint(-74.0445, 40.6892), 4326)::geography, 1000)
   AND ts >= '2020-12-03' AND ts < '2020-12-04';
SELECT mmsi, count(*) AS reports, min(ts)::time AS first, max(ts)::time AS last
  FROM trails.nyharbor_2020_12_first_week
 WHERE ST_DWithin(geom::geography, ST_SetSRID(ST_MakePoint(-74.0445, 40.6892), 4326)::geography, 1000)
   AND ts >= '2020-12-03' AND ts < '2020-12-04'
 GROUP BY mmsi ORDER BY reports DESC LIMIT 10;

\echo '-- the same query from a new session: served by the shared disk cache, only the tail (size and ETag) goes to S3'
\connect
SET TimeZone = 'UTC';
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT count(*) FROM trails.nyharbor_2020_12_first_week
 WHERE ST_DWithin(geom::geography, ST_SetSRID(ST_MakePoint(-74.0445, 40.6892), 4326)::geography, 1000)
   AND ts >= '2020-12-03' AND ts < '2020-12-04';

\echo '-- writing a trail file from SQL: the first hour of New York Harbor (ais_raw, from the stream demo) to S3'
SELECT trafficdb.trail_write(
  $$SELECT mmsi, ts, ST_SetSRID(ST_MakePoint(lon, lat), 4326) AS geom, sog, cog FROM ais_raw$$,
  's3://vessels/first_hour.trail', server => 'minio', id_column => 'mmsi', time_column => 'ts') AS events_written;
IMPORT FOREIGN SCHEMA "s3://vessels/first_hour.trail" FROM SERVER minio INTO trails;
SELECT mmsi, count(*) AS reports, round(avg(sog)::numeric, 1) AS avg_knots
  FROM trails.first_hour GROUP BY mmsi ORDER BY mmsi;
