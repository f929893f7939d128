-- test/tiles_synth.sql: the synthetic map of the differential tile test
-- (test/tiles_diff.sh): :n short random polylines (2 to 5 points, steps of
-- up to ~100 m) over 8 x 6 degrees of central Europe (8-16 E, 47-53 N, about the density of Delaware), with
-- a few classes (one in 12 without a class), names on half of them; table
-- tiles_synth (id, class, name, geom), ids 1..:n; the same map for a seed.
DO $$ BEGIN PERFORM setseed(0.3); END $$;
CREATE TABLE tiles_synth AS
SELECT i::bigint AS id,
       (ARRAY['motorway', 'trunk', 'primary', 'secondary', 'tertiary', 'primary_link', 'unclassified',
              'residential', 'residential', 'residential', 'service', NULL])[1 + (i::bigint * 7919) % 12] AS class,
       CASE WHEN i % 2 = 0 THEN 'Synth ' || (i % 3001) END AS name,
       ST_SetSRID(ST_MakeLine(ARRAY(
         SELECT ST_MakePoint(lon + k * dx + (random() - 0.5) * 2e-4, lat + k * dy + (random() - 0.5) * 2e-4)
           FROM generate_series(0, 1 + i % 4) k ORDER BY k)), 4326) AS geom
  FROM (SELECT i, 8 + 8 * random() AS lon, 47 + 6 * random() AS lat,
               (random() - 0.5) * 2e-3 AS dx, (random() - 0.5) * 2e-3 AS dy
          FROM generate_series(1, :n) i) s;
