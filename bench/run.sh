#!/usr/bin/env bash
# bench/run.sh: `make bench [SCALE=1M|10M|40M] [SECONDS=3] [CLIENTS="1 2 4 8"]`.
#
# Measures trafficdb beside the baselines users would pick instead, in one
# run on this machine, and writes
#   bench/results/<date>-<host>.csv   every figure, its baseline and the ratio
#   bench/results/<date>-<host>.md    the report: machine, versions, commands, tables
#   bench/results/<date>-<host>-*.png plots (gnuplot)
# Steps (progress on stderr, elapsed time in brackets):
#   1. publishing, objects alone (bench/objbench) at SCALE/8, /4, /2 and SCALE:
#      map build, traffic publication, bytes per location (scale-up);
#   2. publishing through SQL (bench/daemon.sh) at SCALE on a synthetic network
#      shaped like OpenStreetMap's, and on the real Delaware network;
#   3. pgbench load tests (bench/pgbench.sh), fdw vs heap at each client count,
#      and the mixed read/publish run; 3b. nearest first from geography lines
#      and polygons and within id ranges on Delaware (bench/knn_forms.sh);
#   4. the C accessor vs a bare hash probe and Redis (bench/accessor.sh);
#   5. streams and trails, when their benchmarks exist (bench/streams.sh,
#      bench/trails.sh, bench/trails_parquet.sh: trails vs DuckDB on Parquet);
#      5c. the live map (bench/livemap.sh): vector tiles per second through
#      tipg from trafficdb.tile_features vs a heap table with GiST, and the
#      time from publish() to the page's repainted tile in headless chromium;
#      5b. when Go is there, TippyDB's geo-placement experiment (bench/tippy.sh:
#      three clusters behind Toxiproxy, geo vs hash placement);
#   6. the report and plots (bench/report.py).
# Runs on the demo cluster (started when it is not running); the default
# takes about 10 minutes on 2 cores.
set -euo pipefail
start=$(date +%s)
. "$(dirname "$0")/lib.sh"

SCALE=${SCALE:-1M}
T=${SECONDS_PER_TEST:-3}
CLIENTS=${CLIENTS:-"1 2 4 8"}
case $SCALE in
*M) N=$((${SCALE%M} * 1000000)) ;;
*k) N=$((${SCALE%k} * 1000)) ;;
*[!0-9]* | '') die "SCALE=$SCALE: expected a count such as 1M, 10M, 40M, 500k or 250000" ;;
*) N=$SCALE ;;
esac
[ "$N" -ge 1000 ] || die "SCALE=$SCALE: at least 1000 segments"

base=bench/results/$(date -u +%Y-%m-%d)-$(hostname -s)
export BENCH_CSV=$base.csv
rm -f "$BENCH_CSV" "$base"-*.png
. bench/lib.sh	# writes the CSV header
step() { printf '\n\033[1m== [%ds] %s\033[0m\n' "$(($(date +%s) - start))" "$*" >&2; }

step "dependencies and build"
scripts/deps.sh >/dev/null
bench_deps
make -s -j"$(nproc)" all bench/objbench bench/accessor bench/put_server PG_CONFIG="$PG_CONFIG"
if [ ! -f .demo/port ] || ! "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$(cat .demo/port)" ||
	[ "$(cksum <lib/trafficdb-server.so)" != "$(cat .demo/lib.cksum 2>/dev/null)" ]; then
	make -s demo >/dev/null	# installs this build and (re)starts the cluster on it
fi
bench_cluster

step "1/6 publishing, objects alone (bench/objbench), up to $N segments"
for n in $((N / 8)) $((N / 4)) $((N / 2)) "$N"; do
	bench/objbench "$n" 2>/dev/null | while IFS=, read -r name value unit; do
		bench_emit publish_objects "$name" "$n" "$value" "$unit"
	done
done

step "2/6 publishing through SQL (bench/daemon.sh $N), then the real Delaware network"
bench/daemon.sh "$N" >/dev/null
scripts/fetch-map.sh delaware >/dev/null
"${PSQL[@]}" -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS bench_delaware"
TDB_ROADS_TABLE=bench_delaware osm2pgsql --output=flex --style=scripts/roads.lua --log-level=warn \
	-H 127.0.0.1 -P "$port" -U postgres -d "$DB" data/cache/delaware-latest.osm.pbf
t0=$(date +%s%N)
nde=$("${PSQL[@]}" -Atc "SELECT trafficdb.load_map('bench_delaware', 'osm_id', 'geom', 'highway', 'name', 'maxspeed', 'oneway')")
bench_emit publish_delaware map_load_wall_ms "$nde" $((($(date +%s%N) - t0) / 1000000)) ms
"${PSQL[@]}" -Atc "SELECT round(last_map_build_ms::numeric, 1), round(bytes_per_location::numeric, 1) FROM trafficdb.status" |
	while IFS='|' read -r build bpl; do
		bench_emit publish_delaware map_build_ms "$nde" "$build" ms
		bench_emit publish_delaware bytes_per_location "$nde" "$bpl" B
	done
"${PSQL[@]}" -c "INSERT INTO trafficdb.feed (location_id, speed_kmh) SELECT osm_id, 20 + osm_id % 60 FROM bench_delaware"
t0=$(date +%s%N)
"${PSQL[@]}" -c "SELECT trafficdb.publish()" >/dev/null
ms=$((($(date +%s%N) - t0) / 1000000))
bench_emit publish_delaware feed_100pct_publish_wall_ms "$nde" "$ms" ms
bench_emit publish_delaware feed_100pct_rows_per_s "$nde" $((nde * 1000 / (ms > 0 ? ms : 1))) rows/s
bench_restore_map
"${PSQL[@]}" -c "DROP TABLE bench_delaware"

step "2b/6 the write path: the durable feed (bench/feed.sh $N) and trafficdb_put through the daemon (bench/put.sh $N)"
bench/feed.sh "$N"
bench/put.sh "$N"

step "2c/6 subscriptions: matching 100,000 area subscriptions against $N changed locations and delivering the events to 2 taps (bench/subscriptions.sh $N)"
bench/subscriptions.sh "$N" 100000 >/dev/null
bench_restore_map
bench/sub_latency.sh 200 >/dev/null
step "2d/6 subscription baselines: Redis pub-sub and LISTEN/NOTIFY, filtered by consumers (bench/sub_baselines.sh)"
bench/sub_baselines.sh >/dev/null
step "2e/6 request-response over the subscribers' shared memory, beside a Redis work queue (bench/requests.sh)"
bench/requests.sh 20000 >/dev/null

step "3/6 pgbench load tests (bench/pgbench.sh $N $T \"$CLIENTS\")"
bench/pgbench.sh "$N" "$T" "$CLIENTS"

step "3b/6 nearest first from geography lines and polygons, and within id ranges, on Delaware (bench/knn_forms.sh $T)"
bench/knn_forms.sh "$T"

step "4/6 the C accessor, a bare hash probe and Redis (bench/accessor.sh $N $T)"
bench/accessor.sh "$N" "$T"

step "5/6 streams and trails"
ran=0
for b in bench/streams.sh bench/trails.sh bench/trails_parquet.sh; do
	if [ -x "$b" ]; then "$b"; ran=1; fi
done
[ "$ran" = 1 ] || echo "  (no stream or trail benchmarks yet)" >&2

step "5c/6 the live map: tiles/s through tipg vs a heap with GiST, publish() to repainted tile (bench/livemap.sh)"
bench/livemap.sh

# optional: needs Go for Toxiproxy (scripts/toxiproxy.sh builds it with go install)
if command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ]; then
	step "5b/6 TippyDB's geo-placement experiment: three clusters behind Toxiproxy (bench/tippy.sh)"
	bench/tippy.sh
else
	step "5b/6 skipped: TippyDB's geo-placement experiment (bench/tippy.sh) needs Go for Toxiproxy"
fi

step "6/6 report and plots"
BENCH_COMMAND="make bench SCALE=$SCALE SECONDS_PER_TEST=$T CLIENTS=\"$CLIENTS\"" \
	BENCH_SECONDS=$(($(date +%s) - start)) PG_PORT=$port python3 bench/report.py "$BENCH_CSV"
step "done: $base.md"
