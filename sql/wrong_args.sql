--
-- Functions given a relation (regclass or oid) that does not exist, or is of
-- the wrong kind: each error names the argument and what it must be, never
-- "cache lookup failed" or an option the relation happens not to have
-- (issue 13, item 11).
--
\set VERBOSITY default
SET client_min_messages = error;
CREATE EXTENSION IF NOT EXISTS trafficdb CASCADE;
RESET client_min_messages;

CREATE TABLE wa_heap (ts timestamptz, v float8, id int, geom int);
CREATE VIEW wa_view AS SELECT * FROM wa_heap;
CREATE MATERIALIZED VIEW wa_matview AS SELECT * FROM wa_heap;
CREATE SEQUENCE wa_seq;
CREATE INDEX wa_index ON wa_heap (id);
CREATE TYPE wa_composite AS (a int);
CREATE TABLE wa_parted (ts timestamptz, v float8) PARTITION BY RANGE (ts);
-- a trail table, and a table of a wrapper with no handler whose server has a
-- filename option (it was opened as a stream file)
CREATE SERVER wa_trails FOREIGN DATA WRAPPER trafficdb_trails;
CREATE FOREIGN TABLE wa_trail (id bigint, time timestamptz) SERVER wa_trails OPTIONS (url '/nonexistent/x.trail');
CREATE FOREIGN DATA WRAPPER wa_other;
CREATE SERVER wa_other_server FOREIGN DATA WRAPPER wa_other OPTIONS (filename '/nonexistent/x.tsf');
CREATE FOREIGN TABLE wa_other_table (ts timestamptz, v float8) SERVER wa_other_server;
-- a stream table whose file is missing: the error is about the file
CREATE SERVER wa_streams FOREIGN DATA WRAPPER trafficdb_streams OPTIONS (filename '/nonexistent/x.tsf');
CREATE FOREIGN TABLE wa_stream (ts timestamptz, v float8) SERVER wa_streams;

-- stream_aggregate(tbl, ...)
SELECT * FROM trafficdb.stream_aggregate(4294967295, 'v', '2020-01-01', '2020-01-02');
SELECT * FROM trafficdb.stream_aggregate('wa_heap', 'v', '2020-01-01', '2020-01-02');
SELECT * FROM trafficdb.stream_aggregate('wa_view', 'v', '2020-01-01', '2020-01-02');
SELECT * FROM trafficdb.stream_aggregate('wa_matview', 'v', '2020-01-01', '2020-01-02');
SELECT * FROM trafficdb.stream_aggregate('wa_seq', 'v', '2020-01-01', '2020-01-02');
SELECT * FROM trafficdb.stream_aggregate('wa_index', 'v', '2020-01-01', '2020-01-02');
SELECT * FROM trafficdb.stream_aggregate('wa_composite', 'v', '2020-01-01', '2020-01-02');
SELECT * FROM trafficdb.stream_aggregate('wa_parted', 'v', '2020-01-01', '2020-01-02');
SELECT * FROM trafficdb.stream_aggregate('pg_class', 'v', '2020-01-01', '2020-01-02');
SELECT * FROM trafficdb.stream_aggregate('trafficdb.locations', 'v', '2020-01-01', '2020-01-02');
SELECT * FROM trafficdb.stream_aggregate('wa_trail', 'v', '2020-01-01', '2020-01-02');
SELECT * FROM trafficdb.stream_aggregate('wa_other_table', 'v', '2020-01-01', '2020-01-02');
SELECT * FROM trafficdb.stream_aggregate('wa_stream', 'v', '2020-01-01', '2020-01-02');

-- stream_resample(tbl, ...)
SELECT * FROM trafficdb.stream_resample(4294967295, 'v', ARRAY['2020-01-01']::timestamptz[]);
SELECT * FROM trafficdb.stream_resample('wa_heap', 'v', ARRAY['2020-01-01']::timestamptz[]);
SELECT * FROM trafficdb.stream_resample('wa_view', 'v', ARRAY['2020-01-01']::timestamptz[]);
SELECT * FROM trafficdb.stream_resample('wa_index', 'v', ARRAY['2020-01-01']::timestamptz[]);
SELECT * FROM trafficdb.stream_resample('trafficdb.locations', 'v', ARRAY['2020-01-01']::timestamptz[]);
SELECT * FROM trafficdb.stream_resample('wa_trail', 'v', ARRAY['2020-01-01']::timestamptz[]);
SELECT * FROM trafficdb.stream_resample('wa_other_table', 'v', ARRAY['2020-01-01']::timestamptz[]);
SELECT * FROM trafficdb.stream_resample('wa_stream', 'v', ARRAY['2020-01-01']::timestamptz[]);

-- load_map(source, ...): tables, views and foreign tables are sources;
-- a view's columns are checked as a table's are
SELECT trafficdb.load_map(4294967295);
SELECT trafficdb.load_map('wa_seq');
SELECT trafficdb.load_map('wa_index');
SELECT trafficdb.load_map('wa_composite');
SELECT trafficdb.load_map('wa_view');

-- the validators' second argument is the catalog of the options
SELECT trafficdb.streams_fdw_validator('{}', 4294967295);
SELECT trafficdb.streams_fdw_validator('{filename=/x}', 'pg_class'::regclass);
SELECT trafficdb.trails_fdw_validator('{}', 4294967295);
SELECT trafficdb.trails_fdw_validator('{endpoint=http://x}', 'pg_class'::regclass);
SELECT trafficdb.locations_fdw_validator('{}', 4294967295);
SELECT trafficdb.locations_fdw_validator('{}', 'pg_foreign_table'::regclass);
SELECT trafficdb.streams_fdw_validator('{stream=x}', 'pg_foreign_table'::regclass);

DROP FOREIGN TABLE wa_stream, wa_other_table, wa_trail;
DROP SERVER wa_streams, wa_other_server, wa_trails;
DROP FOREIGN DATA WRAPPER wa_other;
DROP TABLE wa_parted;
DROP TYPE wa_composite;
DROP SEQUENCE wa_seq;
DROP MATERIALIZED VIEW wa_matview;
DROP VIEW wa_view;
DROP TABLE wa_heap;

-- the tile server's function layer: NULL gives no rows; a zoom off [0, 30]
-- or a column or row off the zoom's grid is an error naming it
SELECT count(*) FROM trafficdb.tile_features(NULL, 0, 0);
SELECT count(*) FROM trafficdb.tile_features(3, NULL, 0);
SELECT * FROM trafficdb.tile_features(-1, 0, 0);
SELECT * FROM trafficdb.tile_features(31, 0, 0);
SELECT * FROM trafficdb.tile_features(2147483647, 0, 0);
SELECT * FROM trafficdb.tile_features(3, 8, 0);
SELECT * FROM trafficdb.tile_features(3, -1, 0);
SELECT * FROM trafficdb.tile_features(3, 0, 8);
SELECT * FROM trafficdb.tile_features(30, 1073741824, 0);
SELECT * FROM trafficdb.tile_features(0, 0, -2147483648);
