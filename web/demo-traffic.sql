-- web/demo-traffic.sql: traffic on every road cars use, so that the live
-- map has colours (scripts/demo.sh runs it; web/feeder.py then moves it).
-- Deterministic: each road's congestion follows a hash of its id, about
-- 45 % free flow, 25 % light, 15 % moderate, 10 % heavy, 5 % standstill;
-- the speed is the free-flow speed (the speed limit, else 30 km/h) scaled
-- by the level.
\set ON_ERROR_STOP on
INSERT INTO trafficdb.feed (location_id, speed_kmh, free_flow_kmh, congestion, confidence)
SELECT location_id, round(ff * (ARRAY[0.95, 0.75, 0.5, 0.3, 0.1])[c + 1]), ff, c, 80
  FROM (SELECT location_id, coalesce(speed_limit_kmh, 30)::real AS ff,
               CASE WHEN h < 45 THEN 0 WHEN h < 70 THEN 1 WHEN h < 85 THEN 2 WHEN h < 95 THEN 3 ELSE 4 END AS c
          FROM (SELECT location_id, speed_limit_kmh, abs(hashint8(location_id)) % 100 AS h
                  FROM trafficdb.locations
                 WHERE road_class IN ('motorway', 'trunk', 'primary', 'secondary', 'tertiary', 'unclassified',
                                      'residential', 'living_street', 'service', 'motorway_link', 'trunk_link',
                                      'primary_link', 'secondary_link', 'tertiary_link')) s) t;
SELECT trafficdb.publish() AS generation;
