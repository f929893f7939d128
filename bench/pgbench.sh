#!/usr/bin/env bash
# bench/pgbench.sh [SEGMENTS] [SECONDS] [CLIENTS]: load tests through SQL.
#
# pgbench, prepared statements, each query for SECONDS at every client
# count of CLIENTS (default "1 2 4 8", -j up to the cores), on the
# locations foreign table and, in the same run, on a heap table with a
# btree on id and GiST indexes on geom and geom::geography (at 2 clients
# also on a copy CLUSTERed on its GiST index, the heap's best case):
#   id        one id, the prepared lookup a service makes per request
#   bbox2..50 count of a box of 2, 5, 10, 20, 50 km (the TrafficDB paper's
#             figures 10, 11 and 14)
#   knn       the 10 nearest segments of a point
#   radius    segments within 2 km on geography
#   join      live speed of a 1,000-segment route (a route table joined)
# and the forms users write that issue 14 is about (one transaction each):
#   mm_deg    map matching: the nearest road that is not a footway, cycleway
#             or service road to a noisy GPS point (of 10,000), in degrees
#   mm_m      the same in metres (geography <->)
#   spjoin    a spatial join: 1,000 points with ST_DWithin 100 m (geography)
#   within    roads ST_Within a random 1 km polygon
# and the same work in one statement each, as a map matcher or an analyst
# runs it (per-statement costs, a round trip and the executor's start, no
# longer hide the query's own work):
#   mm_deg_all  map matching of all 10,000 GPS points (a LATERAL join)
#   mm_m_all    the same in metres
#   within_all  roads ST_Within a 1 km polygon around each of 1,000 points
# Then the mixed run: the same id and bbox2 readers while a feed writer
# inserts 10,000 rows/s and the daemon publishes every 100 ms; it reports
# the readers' throughput against the same clients without publishing, and
# how many generations were published meanwhile.
#
# The network: SEGMENTS (default 1,000,000) synthetic segments shaped like
# the Helsinki extract over about 1 x 1 degree (110 x 78 km), so boxes of 2
# to 50 km hold from hundreds to hundreds of thousands of segments.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

N=${1:-1000000}
T=${2:-3}
CLIENTS=${3:-"1 2 4 8"}
bench_cluster
cores=$(nproc)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "bench/pgbench: building $N segments and the heap baselines" >&2
"${PSQL[@]}" <<EOF
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench_heap, bench_heap_clustered, bench_route, bench_gps, bench_pts;
SELECT setseed(0.3) \g /dev/null
CREATE TABLE bench_heap AS
SELECT i::bigint AS id,
       ST_SetSRID(ST_MakeLine((ARRAY[ST_MakePoint(x, y), ST_MakePoint(x + dx, y + dy),
                                     ST_MakePoint(x + 2 * dx, y + dy * 1.5), ST_MakePoint(x + 3 * dx, y + dy * 2)])[1:np]), 4326) AS geom,
       (20 + i % 60)::real AS speed_kmh,
       (ARRAY['primary', 'secondary', 'residential', 'footway', 'cycleway', 'service'])[1 + i % 6] AS road_class
  FROM (SELECT i, 10 + random() AS x, 45 + random() AS y,
               (random() - 0.5) * 0.0008 AS dx, (random() - 0.5) * 0.0004 AS dy, 2 + (random() * 2.9)::int AS np
          FROM generate_series(1, $N) i) s;
ALTER TABLE bench_heap ADD PRIMARY KEY (id);
CREATE INDEX bench_heap_geom ON bench_heap USING gist (geom);
CREATE INDEX bench_heap_geog ON bench_heap USING gist ((geom::geography));
CREATE TABLE bench_heap_clustered AS SELECT * FROM bench_heap;
ALTER TABLE bench_heap_clustered ADD PRIMARY KEY (id);
CREATE INDEX bench_heap_clustered_geom ON bench_heap_clustered USING gist (geom);
CREATE INDEX bench_heap_clustered_geog ON bench_heap_clustered USING gist ((geom::geography));
CLUSTER bench_heap_clustered USING bench_heap_clustered_geom;
CREATE TABLE bench_route AS SELECT (1 + (random() * ($N - 1))::int)::bigint AS seg FROM generate_series(1, 1000);
-- noisy GPS points: a point of a random segment moved by up to ~30 m
CREATE TABLE bench_gps AS
SELECT g AS n, ST_SetSRID(ST_MakePoint(ST_X(p) + (random() - 0.5) * 0.0008, ST_Y(p) + (random() - 0.5) * 0.0005), 4326) AS pt
  FROM (SELECT g, ST_StartPoint(geom) AS p FROM generate_series(1, 10000) g
          JOIN bench_heap h ON h.id = 1 + (g * 7919) % $N) s;
ALTER TABLE bench_gps ADD PRIMARY KEY (n);
CREATE TABLE bench_pts AS SELECT pt FROM bench_gps WHERE n <= 1000;
VACUUM ANALYZE bench_heap; VACUUM ANALYZE bench_heap_clustered; ANALYZE bench_route; ANALYZE bench_gps; ANALYZE bench_pts;
SELECT trafficdb.load_map('bench_heap', 'id', 'geom', 'road_class') \g /dev/null
INSERT INTO trafficdb.feed (location_id, speed_kmh) SELECT id, speed_kmh FROM bench_heap;
SELECT trafficdb.publish() \g /dev/null
EOF

# one pgbench script per query and table
script() { printf '%s\n' "$2" >"$work/$1.sql"; }
for t in fdw heap clustered; do
	case $t in
	fdw) tbl=trafficdb.locations idc=location_id ;;
	heap) tbl=bench_heap idc=id ;;
	clustered) tbl=bench_heap_clustered idc=id ;;
	esac
	script "id_$t" "\\set id random(1, $N)
SELECT speed_kmh FROM $tbl WHERE $idc = :id;"
	for km in 2 5 10 20 50; do
		script "bbox${km}_$t" "\\set x random(0, 1000000)
\\set y random(0, 1000000)
SELECT count(*) FROM $tbl WHERE geom && ST_MakeEnvelope(10 + :x / 1000000.0, 45 + :y / 1000000.0, 10 + :x / 1000000.0 + $km / 78.8, 45 + :y / 1000000.0 + $km / 111.2, 4326);"
	done
	script "knn_$t" "\\set x random(0, 1000000)
\\set y random(0, 1000000)
SELECT $idc FROM $tbl ORDER BY geom <-> ST_SetSRID(ST_MakePoint(10 + :x / 1000000.0, 45 + :y / 1000000.0), 4326) LIMIT 10;"
	script "radius_$t" "\\set x random(0, 1000000)
\\set y random(0, 1000000)
SELECT count(*) FROM $tbl WHERE ST_DWithin(geom::geography, ST_MakePoint(10 + :x / 1000000.0, 45 + :y / 1000000.0)::geography, 2000);"
	script "join_$t" "SELECT sum(l.speed_kmh) FROM bench_route r JOIN $tbl l ON l.$idc = r.seg;"
	script "mm_deg_$t" "\\set n random(1, 10000)
SELECT $idc FROM $tbl WHERE road_class NOT IN ('footway', 'cycleway', 'service')
 ORDER BY geom <-> (SELECT pt FROM bench_gps WHERE n = :n) LIMIT 1;"
	script "mm_m_$t" "\\set n random(1, 10000)
SELECT $idc FROM $tbl WHERE road_class NOT IN ('footway', 'cycleway', 'service')
 ORDER BY geom::geography <-> (SELECT pt FROM bench_gps WHERE n = :n)::geography LIMIT 1;"
	script "spjoin_$t" "SELECT count(*) FROM bench_pts p JOIN $tbl l ON ST_DWithin(l.geom::geography, p.pt::geography, 100);"
	script "mm_deg_all_$t" "SELECT sum(m.id) FROM bench_gps g CROSS JOIN LATERAL (SELECT $idc AS id FROM $tbl
 WHERE road_class NOT IN ('footway', 'cycleway', 'service') ORDER BY geom <-> g.pt LIMIT 1) m;"
	script "mm_m_all_$t" "SELECT sum(m.id) FROM bench_gps g CROSS JOIN LATERAL (SELECT $idc AS id FROM $tbl
 WHERE road_class NOT IN ('footway', 'cycleway', 'service') ORDER BY geom::geography <-> g.pt::geography LIMIT 1) m;"
	script "within_all_$t" "SELECT count(*) FROM bench_pts p JOIN $tbl l ON ST_Within(l.geom, ST_Buffer(p.pt, 0.006, 8));"
	script "within_$t" "\\set x random(0, 1000000)
\\set y random(0, 1000000)
SELECT count(*) FROM $tbl WHERE ST_Within(geom, ST_Buffer(ST_SetSRID(ST_MakePoint(10 + :x / 1000000.0, 45 + :y / 1000000.0), 4326), 0.006, 8));"
done
script feed_writer "INSERT INTO trafficdb.feed (location_id, speed_kmh)
  SELECT 1 + (random() * ($N - 1))::bigint, (random() * 100)::real FROM generate_series(1, 500);"

# tps SCRIPT CLIENTS: transactions per second over T seconds
tps() {
	local j=$(($2 < cores ? $2 : cores))
	"$PG_BIN/pgbench" -n -M prepared -c "$2" -j "$j" -T "$T" -h 127.0.0.1 -p "$port" -U postgres \
		-f "$work/$1.sql" "$DB" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}

queries="id bbox2 bbox5 bbox10 bbox20 bbox50 knn radius join mm_deg mm_m spjoin within mm_deg_all mm_m_all within_all"
declare -A read_only
for c in $CLIENTS; do
	echo "bench/pgbench: $c client(s)" >&2
	for q in $queries; do
		f=$(tps "${q}_fdw" "$c")
		h=$(tps "${q}_heap" "$c")
		read_only[$q.$c]=$f
		bench_emit sql "$q" "$c" "$f" qps heap "$h"
		if [ "$c" = 2 ]; then
			bench_emit sql "$q" "$c" "$f" qps heap_clustered "$(tps "${q}_clustered" "$c")"
		fi
	done
done

echo "bench/pgbench: mixed run (feed 10,000 rows/s, publishing every 100 ms)" >&2
"${PSQL[@]}" -c "ALTER SYSTEM SET trafficdb.publish_interval = '100ms'" -c "SELECT pg_reload_conf()" >/dev/null
for c in $CLIENTS; do
	for q in id bbox2; do
		g0=$("${PSQL[@]}" -Atc "SELECT generation FROM trafficdb.status")
		"$PG_BIN/pgbench" -n -c 1 -j 1 -R 20 -T "$T" -h 127.0.0.1 -p "$port" -U postgres \
			-f "$work/feed_writer.sql" "$DB" >/dev/null 2>&1 &
		writer=$!
		m=$(tps "${q}_fdw" "$c")
		wait "$writer" || true
		g1=$("${PSQL[@]}" -Atc "SELECT generation FROM trafficdb.status")
		bench_emit mixed "$q" "$c" "$m" qps read_only "${read_only[$q.$c]}"
		bench_emit mixed "${q}_publications" "$c" "$((g1 - g0))" generations
	done
done
"${PSQL[@]}" -c "ALTER SYSTEM RESET trafficdb.publish_interval" -c "SELECT pg_reload_conf()" >/dev/null

echo "bench/pgbench: restoring the demo map" >&2
bench_restore_map
"${PSQL[@]}" -c "DROP TABLE bench_heap, bench_heap_clustered, bench_route, bench_gps, bench_pts" -c "TRUNCATE trafficdb.feed"
