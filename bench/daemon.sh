#!/usr/bin/env bash
# bench/daemon.sh [SEGMENTS]: what publishing costs through the daemon, end
# to end (SQL source table -> map object; feed table -> traffic object), on
# the demo cluster (started by `make demo` if it is not running).
#
#   map build          trafficdb.load_map() of a synthetic network of SEGMENTS
#                      LineStrings (default 1,000,000): SPI read + build + publish
#   feed 1 % / 100 %   INSERT that many feed rows, then trafficdb.publish():
#                      consume (delete), check, log the generation, publish;
#                      WAL bytes per row of the INSERT and of the publication
#                      (the generation log), and the restart's replay time
#   idle               bench/idle.sh: an idle daemon's wake-ups and CPU, and
#                      trafficdb_put's latency, beside the build before the
#                      daemon slept (clusters of its own; IDLE_SEGMENTS
#                      locations, default 100,000; IDLE=0 skips it)
#
# Figures go to bench/lib.sh's CSV.  The demo map is loaded back at the end.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

N=${1:-1000000}
bench_cluster
emit() { bench_emit publish_sql "$1" "$N" "$2" "$3"; }

# wall-clock milliseconds of one SQL statement
time_sql() {
	local t0 t1
	t0=$(date +%s%N)
	"${PSQL[@]}" -c "$1" >/dev/null
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}

echo "bench/daemon: generating $N synthetic segments (shaped like the Helsinki extract)" >&2
bench_synthetic_roads bench_roads "$N"

# only trafficdb.publish() consumes during the measurement (and the WAL between two
# LSNs is the publication's alone)
"${PSQL[@]}" -c "ALTER SYSTEM SET trafficdb.publish_interval = '1h'" -c "SELECT pg_reload_conf()" >/dev/null
trap '"${PSQL[@]}" -c "ALTER SYSTEM RESET trafficdb.publish_interval" -c "SELECT pg_reload_conf()" >/dev/null 2>&1 || true' EXIT

echo "bench/daemon: load_map" >&2
ms=$(time_sql "SELECT trafficdb.load_map('bench_roads', 'id', 'geom', 'highway', 'name')")
emit map_load_wall_ms "$ms" ms
emit map_build_ms "$("${PSQL[@]}" -Atc 'SELECT round(last_map_build_ms) FROM trafficdb.status')" ms
emit bytes_per_location "$("${PSQL[@]}" -Atc 'SELECT round(bytes_per_location::numeric, 1) FROM trafficdb.status')" B

for pct in 1 100; do
	rows=$((N * pct / 100))
	echo "bench/daemon: feed of $rows rows ($pct %)" >&2
	l0=$("${PSQL[@]}" -Atc "CHECKPOINT; SELECT pg_current_wal_insert_lsn()")
	"${PSQL[@]}" -c "INSERT INTO trafficdb.feed (location_id, speed_kmh, free_flow_kmh, congestion, confidence)
	                 SELECT id, 20 + id % 60, 80, id % 5, 90 FROM bench_roads ORDER BY random() LIMIT $rows"
	l1=$("${PSQL[@]}" -Atc "CHECKPOINT; SELECT pg_current_wal_insert_lsn()")
	ms=$(time_sql "SELECT trafficdb.publish()")
	l2=$("${PSQL[@]}" -Atc "SELECT pg_current_wal_insert_lsn()")
	emit "feed_${pct}pct_insert_wal_bytes_per_row" "$("${PSQL[@]}" -Atc "SELECT round(pg_wal_lsn_diff('$l1', '$l0') / $rows)")" B
	emit "feed_${pct}pct_publish_wal_bytes_per_row" "$("${PSQL[@]}" -Atc "SELECT round(pg_wal_lsn_diff('$l2', '$l1') / $rows)")" B
	emit "feed_${pct}pct_log_bytes_per_row" "$("${PSQL[@]}" -Atc "SELECT round(last_log_bytes::numeric / $rows, 1) FROM trafficdb.status")" B
	emit "feed_${pct}pct_publish_wall_ms" "$ms" ms
	emit "feed_${pct}pct_rows_per_s" "$((rows * 1000 / (ms > 0 ? ms : 1)))" rows/s
	emit "feed_${pct}pct_traffic_publish_ms" "$("${PSQL[@]}" -Atc 'SELECT round(last_publish_ms::numeric, 1) FROM trafficdb.status')" ms
done

echo "bench/daemon: restart and replay" >&2
bench_restart_cluster
emit replay_ms "$("${PSQL[@]}" -Atc 'SELECT round(last_replay_ms) FROM trafficdb.status')" ms
emit replay_mismatches "$("${PSQL[@]}" -Atc 'SELECT replay_mismatches FROM trafficdb.status')" count

echo "bench/daemon: restoring the demo map" >&2
bench_restore_map
"${PSQL[@]}" -c "DROP TABLE bench_roads"

if [ "${IDLE:-1}" != 0 ]; then
	echo "bench/daemon: an idle daemon (bench/idle.sh)" >&2
	bench/idle.sh "${IDLE_SEGMENTS:-100000}"
fi
