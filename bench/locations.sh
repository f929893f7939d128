#!/usr/bin/env bash
# bench/locations.sh [SEGMENTS] [SECONDS]: queries per second through SQL
# (pgbench, prepared, 2 clients on 2 threads) on the locations foreign table,
# beside the same queries in the same run on heap tables: one with a btree on
# id and GiST indexes on geom and geom::geography, and a copy CLUSTERed on
# the GiST index (the heap's best case).
#
# The network: SEGMENTS (default 1,000,000) synthetic segments shaped like
# the Helsinki extract, over about 1 x 1 degree (a region about 110 x 78 km),
# so that boxes of 2 to 50 km hold from tens to hundreds of thousands of
# segments, as the TrafficDB paper's figures.
#
# Runs on the demo cluster (started by `make demo` if needed), reloads the
# demo map at the end.  Prints a table with ratios; appends to
# bench/results/locations.csv.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$TDB_ROOT"

N=${1:-1000000}
T=${2:-5}
port=$(cat .demo/port 2>/dev/null || true)
if [ -z "$port" ] || ! "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$port"; then
	make -s demo >/dev/null
	port=$(cat .demo/port)
fi
DB=trafficdb_demo
PSQL=("$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d "$DB")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=bench/results/locations.csv
mkdir -p bench/results
stamp="$(date -u +%Y-%m-%dT%H:%M:%SZ),$(hostname)"

echo "bench/locations: building $N segments and the heap baselines" >&2
"${PSQL[@]}" <<EOF
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench_heap, bench_heap_clustered, bench_route;
SELECT setseed(0.3) \g /dev/null
CREATE TABLE bench_heap AS
SELECT i::bigint AS id,
       ST_SetSRID(ST_MakeLine((ARRAY[ST_MakePoint(x, y), ST_MakePoint(x + dx, y + dy),
                                     ST_MakePoint(x + 2 * dx, y + dy * 1.5), ST_MakePoint(x + 3 * dx, y + dy * 2)])[1:np]), 4326) AS geom,
       (20 + i % 60)::real AS speed_kmh
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
VACUUM ANALYZE bench_heap; VACUUM ANALYZE bench_heap_clustered; ANALYZE bench_route;
SELECT trafficdb.load_map('bench_heap') \g /dev/null
INSERT INTO trafficdb.feed (location_id, speed_kmh) SELECT id, speed_kmh FROM bench_heap;
SELECT trafficdb.publish() \g /dev/null
EOF

# pgbench scripts: one per query and table; the box half-width in degrees of latitude per km
script() { # name, body
	printf '%s\n' "$2" >"$work/$1.sql"
}
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
done

tps() { # script -> transactions per second
	"$PG_BIN/pgbench" -n -M prepared -c 2 -j 2 -T "$T" -h 127.0.0.1 -p "$port" -U postgres -f "$work/$1.sql" "$DB" 2>/dev/null |
		sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}

printf '%-10s %12s %12s %12s %10s %10s\n' query fdw_qps heap_qps clustered_qps vs_heap vs_clust
for q in id bbox2 bbox5 bbox10 bbox20 bbox50 knn radius join; do
	echo "bench/locations: $q" >&2
	f=$(tps "${q}_fdw")
	h=$(tps "${q}_heap")
	c=$(tps "${q}_clustered")
	rh=$(awk -v a="$f" -v b="$h" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
	rc=$(awk -v a="$f" -v b="$c" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
	printf '%-10s %12.0f %12.0f %12.0f %9sx %9sx\n' "$q" "$f" "$h" "$c" "$rh" "$rc"
	echo "$stamp,$N,$q,$f,$h,$c,$rh,$rc" >>"$out"
done

echo "bench/locations: restoring the demo map" >&2
"${PSQL[@]}" -c "SELECT trafficdb.load_map('roads', 'osm_id', 'geom', 'highway', 'name', 'maxspeed', 'oneway')" >/dev/null
"${PSQL[@]}" -c "DROP TABLE bench_heap, bench_heap_clustered, bench_route"
