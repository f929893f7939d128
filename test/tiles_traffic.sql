-- test/tiles_traffic.sql: random traffic on the loaded map through the SQL
-- write path (trafficdb.feed, then publish), so that tiles carry varied
-- attributes: 70% of the locations get a speed (one in ten NULL, one decimal),
-- a free-flow speed, a congestion level (some NULL) and, one in eight, an
-- incident (some with multi-byte UTF-8); the rest keep no traffic (NULLs).
DO $$ BEGIN PERFORM setseed(0.7); END $$;
INSERT INTO trafficdb.feed (location_id, speed_kmh, free_flow_kmh, congestion, incident)
SELECT location_id,
       CASE WHEN r < 0.07 THEN NULL ELSE round((random() * 130)::numeric, 1)::real END,
       (ARRAY[30, 40, 50, 60, 80, 100, 120]::real[])[1 + floor(random() * 7)::int],
       CASE WHEN random() < 0.1 THEN NULL ELSE floor(random() * 5)::smallint END,
       CASE WHEN r < 0.7 / 8 THEN (ARRAY['Accident', 'Roadworks', 'Tie suljettu – äöå', '事故 🚧', 'Lane closed: 1 of 2'])[1 + floor(random() * 5)::int] END
  FROM (SELECT location_id, random() AS r FROM trafficdb.locations) s
 WHERE r < 0.7;
SELECT trafficdb.publish() IS NOT NULL AS published;
