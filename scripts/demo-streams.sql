-- scripts/demo-streams.sql: real vessel sensor streams (AIS, New York
-- Harbor, 2020-06-30, first hour) in a stream file, queried with SQL.
-- demo.sh created the file (:'tsf') with trafficdb-stream from an RDL
-- schema of the 8 busiest vessels, and loaded the reports into ais_raw.
\set ON_ERROR_STOP on
SET client_min_messages = warning;
DROP SERVER IF EXISTS ais CASCADE;
DROP SCHEMA IF EXISTS vessels CASCADE;
CREATE SERVER ais FOREIGN DATA WRAPPER trafficdb_streams OPTIONS (filename :'tsf');
CREATE SCHEMA vessels;
IMPORT FOREIGN SCHEMA streams FROM SERVER ais INTO vessels;

\echo '-- each vessel''s reports go into its stream, in time order (each INSERT commits, and flushes the file, on its own)'
SELECT format('INSERT INTO vessels.%I SELECT ts, sog, cog, nullif(heading, 511)::int2 FROM ais_raw WHERE mmsi = %s ORDER BY ts',
              'v' || mmsi, mmsi)
  FROM (SELECT DISTINCT mmsi FROM ais_raw) v \gexec

\echo '-- what the codecs kept (speed within 0.1 kn, course within 1 degree, heading on change)'
SELECT c.relname AS stream, (SELECT count(*) FROM ais_raw r WHERE 'v' || r.mmsi = c.relname) AS reports,
       (xpath('/row/n/text()', query_to_xml(format('SELECT count(*) AS n FROM vessels.%I', c.relname), false, true, '')))[1]::text::int AS stored
  FROM pg_class c WHERE c.relnamespace = 'vessels'::regnamespace ORDER BY 1;

\echo '-- a time window, pushed down to the stream file: the plan, then the same query'
\set window_query 'SELECT * FROM vessels.' :"busiest" ' WHERE ts >= ''2020-06-30 00:20:00+00'' AND ts < ''2020-06-30 00:21:00+00'''
\echo :window_query
EXPLAIN (COSTS OFF) :window_query;
:window_query;

\echo '-- speed over ground over the hour, as reconstructed: time-weighted average, min, max, distance (kn x h),'
\echo '-- the minutes with data (a vessel''s last value holds until its stream''s last timestamp, not to 01:00), samples'
SELECT c.relname AS stream, round(a.avg::numeric, 2) AS avg_kn, round(a.min::numeric, 1) AS min_kn,
       round(a.max::numeric, 1) AS max_kn, round((a.integral / 3600)::numeric, 2) AS nmi,
       round((a.covered / 60)::numeric, 1) AS minutes, a.samples
  FROM pg_class c, trafficdb.stream_aggregate(c.oid, 'sog', '2020-06-30 00:00:00+00', '2020-06-30 01:00:00+00') a
 WHERE c.relnamespace = 'vessels'::regnamespace ORDER BY 1;

\echo '-- the busiest vessel''s heading every 10 minutes'
SELECT * FROM trafficdb.stream_resample(format('vessels.%I', :'busiest')::regclass, 'heading',
       ARRAY(SELECT generate_series('2020-06-30 00:00:00+00'::timestamptz, '2020-06-30 01:00:00+00', '10 min')));
