-- test/grid_map.sql: the extension, and a map of 2,000 short named segments
-- on a grid in Helsinki (table roads, ids 1..2000), loaded.  Used by the TAP
-- tests (tdb_grid_map in t/TdbTest.pm) and bench/failover.sh.
CREATE EXTENSION trafficdb CASCADE;
CREATE TABLE roads AS
SELECT i::bigint AS id, 'Street ' || (i % 10) AS name,
       ST_SetSRID(ST_MakeLine(ST_MakePoint(24.9 + (i % 40) * 0.002, 60.15 + (i / 40) * 0.001),
                              ST_MakePoint(24.9 + (i % 40) * 0.002 + 0.001, 60.15 + (i / 40) * 0.001 + 0.0005)), 4326) AS geom
  FROM generate_series(1, 2000) i;
SELECT trafficdb.load_map('roads', 'id', 'geom', NULL, 'name');
