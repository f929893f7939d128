-- scripts/demo-queries.sql: what `make demo` shows on the imported roads.
\set QUIET on
\pset footer off
\echo
\echo '-- trafficdb library and extension'
SELECT trafficdb.version() AS library, extversion AS sql
  FROM pg_extension WHERE extname = 'trafficdb';

\echo '-- the road network by class (OpenStreetMap highway=*)'
SELECT highway AS class, count(*) AS segments,
       round(sum(length_m)::numeric / 1000, 1) AS km,
       round(avg(maxspeed)) AS avg_limit_kmh
  FROM roads GROUP BY highway ORDER BY km DESC LIMIT 12;

\echo '-- the longest named streets'
SELECT name, count(*) AS segments, round(sum(length_m)::numeric) AS metres
  FROM roads WHERE name IS NOT NULL
 GROUP BY name ORDER BY sum(length_m) DESC LIMIT 5;

\echo '-- roads within 250 m of the centre of the map (GiST index, geography distance)'
WITH centre AS (SELECT ST_Centroid(ST_Extent(geom)) AS pt FROM roads)
SELECT r.osm_id, r.highway, coalesce(r.name, '') AS name,
       round(ST_Distance(r.geom::geography, c.pt::geography)) AS metres_away
  FROM roads r, centre c
 WHERE ST_DWithin(r.geom::geography, c.pt::geography, 250)
   AND r.highway IN ('primary', 'secondary', 'tertiary', 'residential', 'unclassified', 'living_street')
 ORDER BY metres_away, r.osm_id LIMIT 8;

\echo '-- trafficdb settings'
SELECT name, setting, unit FROM pg_settings WHERE name LIKE 'trafficdb.%' ORDER BY name;

\echo '-- load the roads into shared memory (the daemon builds the map object and publishes it)'
SELECT trafficdb.load_map('roads', 'osm_id', 'geom', 'highway', 'name', 'maxspeed', 'oneway') AS locations;

\echo '-- three rounds of a simulated traffic feed on the roads cars use, each published'
SELECT setseed(0.42) \g /dev/null
CREATE TEMP TABLE demo_rounds AS SELECT 0 AS round, trafficdb.publish() AS generation;
INSERT INTO trafficdb.feed (location_id, speed_kmh, free_flow_kmh, congestion, confidence, incident)
SELECT osm_id, f * coalesce(maxspeed, 40), coalesce(maxspeed, 40),
       CASE WHEN f > 0.8 THEN 0 WHEN f > 0.6 THEN 1 WHEN f > 0.4 THEN 2 WHEN f > 0.2 THEN 3 ELSE 4 END, 80,
       CASE WHEN f < 0.12 THEN 'stationary traffic' END
  FROM (SELECT osm_id, maxspeed, 0.05 + 0.95 * random() AS f FROM roads
         WHERE highway IN ('primary', 'secondary', 'tertiary', 'residential', 'unclassified', 'trunk', 'motorway')) r;
INSERT INTO demo_rounds SELECT 1, trafficdb.publish();
INSERT INTO trafficdb.feed (location_id, speed_kmh, free_flow_kmh, congestion, confidence)
SELECT osm_id, 5, coalesce(maxspeed, 40), 4, 90 FROM roads WHERE highway = 'primary' ORDER BY osm_id LIMIT 10;
INSERT INTO demo_rounds SELECT 2, trafficdb.publish();
INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (-1, 30), (-2, 999);   -- not on the map: rejected
INSERT INTO demo_rounds SELECT 3, trafficdb.publish();
SELECT r.round, r.generation,
       CASE WHEN p.round IS NOT NULL
            THEN (SELECT count(*) FROM trafficdb.changes_since(p.generation)) END AS locations_changed_since_previous
  FROM demo_rounds r LEFT JOIN demo_rounds p ON p.round = r.round - 1 ORDER BY r.round;

\echo '-- the slowest roads right now, relative to free flow (read from shared memory)'
SELECT location_id, name, road_class, round(speed_kmh) AS kmh, round(free_flow_kmh) AS free_flow,
       congestion, coalesce(incident, '') AS incident, generation
  FROM trafficdb.current_traffic()
 WHERE speed_kmh IS NOT NULL AND name IS NOT NULL
 ORDER BY speed_kmh / free_flow_kmh, location_id LIMIT 8;

\echo '-- feed rows the daemon refused, and why'
SELECT seq, location_id, reason FROM trafficdb.feed_rejects ORDER BY seq DESC LIMIT 2;

\echo '-- the daemon'
SELECT generation, locations, round(bytes_per_location) AS bytes_per_location,
       round(last_map_build_ms::numeric, 1) AS map_build_ms, round(last_publish_ms::numeric, 2) AS publish_ms,
       feed_rows_consumed, feed_rows_rejected
  FROM trafficdb.status;
