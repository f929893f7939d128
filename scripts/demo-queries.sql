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

-- places to query: the centre of the map, and a point 600 m east and 400 m south of it
SELECT ST_X(c) AS cx, ST_Y(c) AS cy, ST_X(c) + 600 / (111320 * cos(radians(ST_Y(c)))) AS ex, ST_Y(c) - 400 / 111320.0 AS ey,
       floor((ST_X(c) + 180) / 360 * 32768)::int AS tx,
       floor((1 - ln(tan(radians(ST_Y(c))) + 1 / cos(radians(ST_Y(c)))) / pi()) / 2 * 32768)::int AS ty
  FROM (SELECT ST_Centroid(ST_Extent(geom)) AS c FROM roads) s \gset

\echo '-- the locations foreign table: live traffic in a box (R-tree in shared memory)'
SELECT count(*) AS locations, round(avg(speed_kmh)) AS avg_kmh, max(congestion) AS worst_congestion
  FROM trafficdb.locations
 WHERE geom && ST_MakeEnvelope(:cx - 0.004, :cy - 0.0025, :cx + 0.004, :cy + 0.0025, 4326);

\echo '-- within 150 m of the centre (geography radius, pushed down)'
SELECT location_id, name, road_class, round(speed_kmh) AS kmh, congestion
  FROM trafficdb.locations
 WHERE ST_DWithin(geom::geography, ST_MakePoint(:cx, :cy)::geography, 150) AND name IS NOT NULL
 ORDER BY ST_Distance(geom::geography, ST_MakePoint(:cx, :cy)::geography), location_id LIMIT 5;

\echo '-- the 5 segments nearest to the point east of the centre (k-nearest, pushed down)'
SELECT location_id, coalesce(name, '') AS name, road_class, round(speed_kmh) AS kmh
  FROM trafficdb.locations
 ORDER BY geom <-> ST_SetSRID(ST_MakePoint(:ex, :ey), 4326) LIMIT 5;

\echo '-- EXPLAIN: what the foreign table pushed down'
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT * FROM trafficdb.locations WHERE geom && ST_MakeEnvelope(:cx - 0.004, :cy - 0.0025, :cx + 0.004, :cy + 0.0025, 4326);

\echo '-- a route with live speeds as costs (pgRouting over the car roads, split at junctions)'
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgrouting;
DROP TABLE IF EXISTS car_roads, car_roads_noded, car_roads_noded_vertices_pgr;
CREATE TABLE car_roads AS SELECT row_number() OVER (ORDER BY osm_id)::int AS id, osm_id, geom FROM roads
 WHERE highway IN ('motorway', 'trunk', 'primary', 'secondary', 'tertiary', 'unclassified', 'residential',
                   'living_street', 'service', 'motorway_link', 'trunk_link', 'primary_link', 'secondary_link', 'tertiary_link');
SELECT pgr_nodeNetwork('car_roads', 0.000001, 'id', 'geom') \g /dev/null
SELECT pgr_createTopology('car_roads_noded', 0.000001, 'geom', 'id') \g /dev/null
RESET client_min_messages;
SELECT (SELECT id FROM car_roads_noded_vertices_pgr ORDER BY the_geom <-> ST_SetSRID(ST_MakePoint(:cx, :cy), 4326) LIMIT 1) AS route_from,
       (SELECT id FROM car_roads_noded_vertices_pgr ORDER BY the_geom <-> ST_SetSRID(ST_MakePoint(:ex, :ey), 4326) LIMIT 1) AS route_to \gset
\echo '-- from the centre to the point east of it'
WITH route AS (
  SELECT * FROM pgr_dijkstra(
    $$SELECT n.id, n.source, n.target,
             ST_Length(n.geom::geography) / (greatest(coalesce(l.speed_kmh, l.speed_limit_kmh, 30), 1) / 3.6) AS cost
        FROM car_roads_noded n JOIN car_roads c ON c.id = n.old_id
        JOIN trafficdb.locations l ON l.location_id = c.osm_id$$, :route_from, :route_to, directed => false))
SELECT count(*) AS edges, round(sum(r.cost)) AS seconds_with_live_traffic,
       string_agg(DISTINCT l.name, ', ') AS via
  FROM route r JOIN car_roads_noded n ON n.id = r.edge JOIN car_roads c ON c.id = n.old_id
  JOIN trafficdb.locations l ON l.location_id = c.osm_id;

\echo '-- a vector tile of the live traffic at the centre (z15), for a map client'
SELECT :tx AS x, :ty AS y, length(trafficdb.tile(15, :tx, :ty)) AS mvt_bytes;

\echo '-- feed rows the daemon refused, and why'
SELECT seq, location_id, reason FROM trafficdb.feed_rejects ORDER BY seq DESC LIMIT 2;

\echo '-- the daemon'
SELECT generation, locations, round(bytes_per_location) AS bytes_per_location,
       round(last_map_build_ms::numeric, 1) AS map_build_ms, round(last_publish_ms::numeric, 2) AS publish_ms,
       feed_rows_consumed, feed_rows_rejected
  FROM trafficdb.status;
