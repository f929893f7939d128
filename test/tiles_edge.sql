-- test/tiles_edge.sql: the edge-case mini-maps of the differential tile test
-- (test/tiles_diff.sh, docs/design-tiles.md section 5), as one table
-- tiles_edge (id, class, name, geom), loaded by the caller with
--   trafficdb.load_map('tiles_edge', 'id', 'geom', 'class', 'name').
-- Roads placed through their Web Mercator coordinates are built in EPSG:3857
-- from ST_TileEnvelope and brought back to 4326 (the round trip is within
-- 1e-9 m, far below the 1e-4 px that separates the cases).
CREATE TABLE tiles_edge (id bigint PRIMARY KEY, class text, name text, geom geometry(LineString, 4326));

CREATE FUNCTION pg_temp.l(VARIADIC c float8[]) RETURNS geometry LANGUAGE sql IMMUTABLE AS $$
  SELECT ST_SetSRID(ST_MakeLine(array_agg(ST_MakePoint(c[2 * i - 1], c[2 * i]) ORDER BY i)), 4326)
    FROM generate_series(1, array_length(c, 1) / 2) i $$;
-- a line given in pixels (px, py pairs) of tile z/x/y at extent 4096
CREATE FUNCTION pg_temp.px(z int, x int, y int, VARIADIC c float8[]) RETURNS geometry LANGUAGE sql IMMUTABLE AS $$
  SELECT ST_Transform(ST_SetSRID(ST_MakeLine(array_agg(ST_MakePoint(
           ST_XMin(e) + c[2 * i - 1] * (ST_XMax(e) - ST_XMin(e)) / 4096,
           ST_YMax(e) - c[2 * i] * (ST_YMax(e) - ST_YMin(e)) / 4096) ORDER BY i)), 3857), 4326)
    FROM ST_TileEnvelope(z, x, y) e, generate_series(1, array_length(c, 1) / 2) i $$;

INSERT INTO tiles_edge VALUES
-- the antimeridian: PostGIS is planar, so a road from 179.9 to -179.9 spans the world
  (101, 'primary', 'Dateline', pg_temp.l(179.9, 10, -179.9, 10.001)),
  (102, 'secondary', 'East edge', pg_temp.l(180, 20, 180, 20.01)),
  (103, 'secondary', 'West edge', pg_temp.l(-180, 20, -180, 20.01)),
  (104, 'tertiary', 'To east edge', pg_temp.l(179.99, 21, 180, 21)),
  (105, 'tertiary', 'From west edge', pg_temp.l(-180, 22, -179.99, 22)),
  (106, 'track', NULL, pg_temp.l(-180, -30, 180, -30.001)),
-- the poles: row 0 and the last row; no clamp at 85.0511 in PostGIS
  (201, 'residential', 'Across 85.0511', pg_temp.l(10, 85.0511 - 1e-4, 10.01, 85.0511 + 1e-4)),
  (202, 'residential', 'Above 85.0511', pg_temp.l(10.02, 85.0512, 10.03, 85.0512)),
  (203, 'residential', 'Below 85.0511', pg_temp.l(10.04, 85.0510, 10.05, 85.0510)),
  (204, 'service', '89.9', pg_temp.l(10.1, 89.9, 10.2, 89.9)),
  (205, 'service', 'North pole', pg_temp.l(10.3, 90, 10.4, 90)),
  (206, 'unclassified', 'To the pole', pg_temp.l(10.5, 85, 10.5, 90)),
  (211, 'residential', 'Across -85.0511', pg_temp.l(10, -85.0511 - 1e-4, 10.01, -85.0511 + 1e-4)),
  (212, 'residential', 'Below -85.0511', pg_temp.l(10.02, -85.0512, 10.03, -85.0512)),
  (214, 'service', '-89.9', pg_temp.l(10.1, -89.9, 10.2, -89.9)),
  (215, 'service', 'South pole', pg_temp.l(10.3, -90, 10.4, -90)),
  (216, 'unclassified', 'To the south pole', pg_temp.l(10.5, -85, 10.5, -90)),
-- along a tile edge, the buffer edge (64 px) and past it, in tile 14/9284/8146 (24 E, 1 S) and across its corner
  (301, 'primary', 'Tile edge west', pg_temp.px(14, 9284, 8146, 0, 500, 0, 3000)),
  (302, 'primary', 'Tile edge north', pg_temp.px(14, 9284, 8146, 500, 0, 3000, 0, 3500, 0)),
  (303, 'primary', 'Buffer edge west', pg_temp.px(14, 9284, 8146, -64, 500, -64, 3000)),
  (304, 'primary', 'Buffer edge east', pg_temp.px(14, 9284, 8146, 4160, 500, 4160, 3000)),
  (305, 'primary', 'Outside the buffer', pg_temp.px(14, 9284, 8146, -65, 500, -65, 3000)),
  (306, 'secondary', 'In, along, out', pg_temp.px(14, 9284, 8146, 2000, 2000, 0, 2000, 0, 1000, -300, 1000)),
  (307, 'secondary', 'Out, along the buffer edge, in', pg_temp.px(14, 9284, 8146, -300, 100, -64, 100, -64, 200, 100, 200)),
  (308, 'secondary', 'Through the corner', pg_temp.px(14, 9284, 8146, -200, -200, 200, 200)),
  (309, 'secondary', 'Touching the corner', pg_temp.px(14, 9284, 8146, -200, -64, -64, -64, -64, -200)),
  (310, 'secondary', 'Out-through-out', pg_temp.px(14, 9284, 8146, -300, 2000, 4400, 2100)),
  (311, 'secondary', 'Zigzag across the edge', pg_temp.px(14, 9284, 8146, -100, 10, 30, 20, -100, 30, 30, 40, -100, 50)),
  (312, 'tertiary', 'Half pixel crossing', pg_temp.px(14, 9284, 8146, -258, 0, -254, 1)),
-- out and back (A-B-A vanishes), spikes
  (401, 'residential', 'Out and back', pg_temp.px(14, 9284, 8146, 1000, 3500, 1100, 3600, 1000, 3500)),
  (402, 'residential', 'Out, back half', pg_temp.px(14, 9284, 8146, 1200, 3500, 1300, 3600, 1400, 3700, 1300, 3600)),
  (403, 'residential', 'Twice', pg_temp.px(14, 9284, 8146, 1500, 3500, 1600, 3600, 1500, 3500, 1600, 3600)),
  (404, 'residential', 'Straight', pg_temp.px(14, 9284, 8146, 1700, 3500, 1750, 3550, 1800, 3600, 1900, 3700)),
-- two points that snap to one (0.98 px wide at z10, 1.96 px at z11), and 0.49/0.51 px roads at the
-- float-box boundary of the too-small shortcut, straddling a pixel's rounding edge
  (501, 'residential', 'One pixel', pg_temp.px(10, 580, 508, 100 - 0.49, 100.2, 100 + 0.49, 100.2)),
  (502, 'residential', 'One pixel, vertical', pg_temp.px(10, 580, 508, 120.2, 100 - 0.49, 120.2, 100 + 0.49)),
  (601, 'residential', '0.49 px at z0', pg_temp.px(0, 0, 0, 2900.5 - 0.245, 2100.2, 2900.5 + 0.245, 2100.2)),
  (602, 'residential', '0.51 px at z0', pg_temp.px(0, 0, 0, 2902.5 - 0.255, 2100.2, 2902.5 + 0.255, 2100.2)),
  (603, 'residential', '0.4999 px at z0', pg_temp.px(0, 0, 0, 2904.5 - 0.24995, 2100.2, 2904.5 + 0.24995, 2100.2)),
  (604, 'residential', '0.5001 px at z0', pg_temp.px(0, 0, 0, 2906.5 - 0.25005, 2100.2, 2906.5 + 0.25005, 2100.2)),
  (605, 'residential', '0.49 px tall at z3', pg_temp.px(3, 6, 4, 700.2, 900.5 - 0.245, 700.2, 900.5 + 0.245)),
  (606, 'residential', '0.51 px tall at z3', pg_temp.px(3, 6, 4, 702.2, 900.5 - 0.255, 702.2, 900.5 + 0.255)),
  (607, 'residential', '0.49 x 0.49 px at z3', pg_temp.px(3, 6, 4, 704.5 - 0.245, 902.5 - 0.245, 704.5 + 0.245, 902.5 + 0.245)),
-- ids at the ends of the range; negative bigints are ids >= 2^63 (no feature id)
  (0, 'motorway', 'Id 0', pg_temp.l(40, 2, 40.0001, 2.0001)),
  (9223372036854775807, 'motorway', 'Id 2^63-1', pg_temp.l(40.0002, 2, 40.0003, 2.0001)),
  (-5, 'motorway', 'Id 2^64-5', pg_temp.l(40.0004, 2, 40.0005, 2.0001)),
  (-9223372036854775808, 'motorway', 'Id 2^63', pg_temp.l(40.0006, 2, 40.0007, 2.0001)),
  (-1, 'trunk', 'Id 2^64-1', pg_temp.l(40.0008, 2, 40.0009, 2.0001)),
-- attributes: -0.0 and 0.0, multi-byte UTF-8, all-NULL columns, '' as NULL
  (801, 'primary', 'Speed -0.0', pg_temp.l(50, 3, 50.0001, 3.0001)),
  (802, 'primary', 'Speed 0.0', pg_temp.l(50.0002, 3, 50.0003, 3.0001)),
  (803, 'primary', 'Tie suljettu – äöå', pg_temp.l(50.0004, 3, 50.0005, 3.0001)),
  (804, NULL, NULL, pg_temp.l(50.0006, 3, 50.0007, 3.0001)),
  (805, '', '', pg_temp.l(50.0008, 3, 50.0009, 3.0001)),
  (806, 'Zebra_road', 'Unknown class', pg_temp.l(50.0010, 3, 50.0011, 3.0001)),
  (807, 'primary', 'Same speeds', pg_temp.l(50.0012, 3, 50.0013, 3.0001));
