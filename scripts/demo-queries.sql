-- scripts/demo-queries.sql: what `make demo` shows on the imported roads.
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
