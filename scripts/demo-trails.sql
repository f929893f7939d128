-- scripts/demo-trails.sql: real vessel trails (AIS, US coastal waters on
-- 2020-06-30 and New York Harbor in the first week of December 2020) as
-- trail files in a local MinIO, queried with SQL through the trail FDW.
-- demo.sh uploaded the files with trafficdb-trail (the writer's defaults:
-- each page's columns in chunks, column summaries per trail in a footer read
-- in pieces, page order auto; the US coastal file twice more, its pages by
-- trail and in space-time order) and passes the endpoint
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
IMPORT FOREIGN SCHEMA "s3://vessels/us_coastal_2020_06_30_by_trail.trail" FROM SERVER minio INTO trails;
IMPORT FOREIGN SCHEMA "s3://vessels/us_coastal_2020_06_30_space_time.trail" FROM SERVER minio INTO trails;
\d trails.us_coastal_2020_06_30

\echo '-- one vessel''s day along the US coast: the footer (trail index, zone maps) and its pages are all that is fetched'
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT * FROM trails.us_coastal_2020_06_30 WHERE mmsi = 367697580;
SELECT mmsi, count(*) AS reports, min(ts) AS first, max(ts) AS last,
       round((ST_Length(ST_MakeLine(geom ORDER BY ts)::geography) / 1852)::numeric, 1) AS nautical_miles
  FROM trails.us_coastal_2020_06_30 WHERE mmsi = 367697580 GROUP BY mmsi;

\echo '-- reports and last report of every vessel: answered from the footer''s per-trail summaries, no page read'
\echo '-- (the planner fetched the footer to decide, so this execution sends no request of its own)'
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT mmsi, count(*) AS reports, max(ts) AS last FROM trails.us_coastal_2020_06_30 GROUP BY mmsi;
SELECT mmsi, count(*) AS reports, min(ts) AS first, max(ts) AS last
  FROM trails.us_coastal_2020_06_30 GROUP BY mmsi ORDER BY reports DESC, mmsi LIMIT 5;

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

\echo '-- the same query from a new session: the pages'' blocks come from the shared disk cache;'
\echo '-- S3 still gets the 16 kB tail (size and ETag) and, in one more request, the rest of the footer'
\connect
SET TimeZone = 'UTC';
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT count(*) FROM trails.nyharbor_2020_12_first_week
 WHERE ST_DWithin(geom::geography, ST_SetSRID(ST_MakePoint(-74.0445, 40.6892), 4326)::geography, 1000)
   AND ts >= '2020-12-03' AND ts < '2020-12-04';

-- the counters of a query's trail scan, from EXPLAIN (ANALYZE, FORMAT JSON)
CREATE FUNCTION pg_temp.scan(query text)
RETURNS TABLE (rows bigint, pages_read bigint, pages_in_file bigint, page_bytes_read bigint,
               bytes_from_s3 bigint, bytes_from_disk_cache bigint, requests bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  plan json;
  s jsonb;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || query INTO plan;
  s := jsonb_path_query_first(plan::jsonb, 'strict $.**? (@."Node Type" == "Foreign Scan")');
  RETURN QUERY SELECT (s->>'Actual Rows')::bigint, (s->>'Trail Pages Read')::bigint,
    (s->>'Trail Pages In File')::bigint, (s->>'Trail Page Bytes Read')::bigint,
    (s->>'Bytes From S3')::bigint, (s->>'Bytes From Disk Cache')::bigint, (s->>'Requests')::bigint;
END
$fn$;

\echo '-- where were the vessels from 12:00 to 12:10 UTC: the same window on the same events in three page orders:'
\echo '-- the defaults (auto: by time here, the vessels seen for 9.4 h of the file''s 23: one stretch of the file per hour),'
\echo '-- by trail (a page of every vessel in the window, spread over the whole file) and space-time (buckets of 10 minutes)'
SELECT 'auto (time)' AS page_order, s.* FROM pg_temp.scan($$SELECT mmsi, ts, geom FROM trails.us_coastal_2020_06_30
  WHERE ts >= '2020-06-30 12:00' AND ts < '2020-06-30 12:10'$$) s
UNION ALL
SELECT 'trail', s.* FROM pg_temp.scan($$SELECT mmsi, ts, geom FROM trails.us_coastal_2020_06_30_by_trail
  WHERE ts >= '2020-06-30 12:00' AND ts < '2020-06-30 12:10'$$) s
UNION ALL
SELECT 'space-time', s.* FROM pg_temp.scan($$SELECT mmsi, ts, geom FROM trails.us_coastal_2020_06_30_space_time
  WHERE ts >= '2020-06-30 12:00' AND ts < '2020-06-30 12:10'$$) s;
\echo '-- (bytes from S3 include each file''s 16 kB tail and the rest of its footer, fetched exactly)'

\echo '-- only the columns a query uses: of each page, the chunks of mmsi and ts (no positions, no segment ids)'
EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT date_trunc('hour', ts) AS hour, count(*) AS reports
    FROM trails.us_coastal_2020_06_30 WHERE mmsi = 367011410 GROUP BY 1 ORDER BY 1;
SELECT 'SELECT *' AS query, s.rows, s.pages_read, s.page_bytes_read
  FROM pg_temp.scan($$SELECT * FROM trails.us_coastal_2020_06_30 WHERE mmsi = 367011410$$) s
UNION ALL
SELECT 'SELECT mmsi, ts', s.rows, s.pages_read, s.page_bytes_read
  FROM pg_temp.scan($$SELECT mmsi, ts FROM trails.us_coastal_2020_06_30 WHERE mmsi = 367011410$$) s;

\echo '-- writing a trail file from SQL: the first hour of New York Harbor (ais_raw, from the stream demo) to S3'
SELECT trafficdb.trail_write(
  $$SELECT mmsi, ts, ST_SetSRID(ST_MakePoint(lon, lat), 4326) AS geom, sog, cog FROM ais_raw$$,
  's3://vessels/first_hour.trail', server => 'minio', id_column => 'mmsi', time_column => 'ts') AS events_written;
IMPORT FOREIGN SCHEMA "s3://vessels/first_hour.trail" FROM SERVER minio INTO trails;
SELECT mmsi, count(*) AS reports, round(avg(sog)::numeric, 1) AS avg_knots
  FROM trails.first_hour GROUP BY mmsi ORDER BY mmsi;
