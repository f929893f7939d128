#!/usr/bin/env bash
# bench/feed.sh [LOCATIONS]: the durable feed through SQL, end to end, beside
# what a user would run instead, in one run on the demo cluster.
#
#   trafficdb       FEEDERS sessions (default 2) COPY 10,000-row CSV batches
#                   (server-side files) into trafficdb.feed, FEED_ROWS rows in
#                   all (default 3 M) over a map of LOCATIONS (default 1 M);
#                   rows/s until the last row is PUBLISHED (sustained, from the
#                   first COPY to the generation holding the last row), the
#                   publication lag after the last COPY's commit against
#                   2 x trafficdb.publish_interval, WAL bytes per row
#   heap_logged     the same COPYs into a logged heap of the feed's shape
#   heap_unlogged   ... into an unlogged one
#   redis_set       redis-benchmark pipelined SET of the same number of values
#
# Figures go to bench/lib.sh's CSV (section feed).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

N=${1:-1000000}
ROWS=${FEED_ROWS:-3000000}
FEEDERS=${FEEDERS:-2}
INTERVAL_MS=${FEED_INTERVAL_MS:-500}
BATCH=10000
NB=$(((N + BATCH - 1) / BATCH))
[ "$NB" -gt 100 ] && NB=100
bench_cluster
bench_deps
emit() { bench_emit feed "$@"; }
tmp=$(mktemp -d /tmp/tdb-feedbench.XXXXXX)
chmod 777 "$tmp"
RPORT=${REDIS_PORT:-6391}
trap 'redis-cli -p $RPORT shutdown nosave >/dev/null 2>&1 || true; rm -rf "$tmp"; "${PSQL[@]}" -c "ALTER SYSTEM RESET trafficdb.publish_interval" -c "SELECT pg_reload_conf()" >/dev/null 2>&1 || true' EXIT

echo "bench/feed: a map of $N locations" >&2
"${PSQL[@]}" <<EOF
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench_feed_roads, heap_logged, heap_unlogged;
CREATE UNLOGGED TABLE bench_feed_roads AS
SELECT i AS id, ST_SetSRID(ST_MakeLine(ST_MakePoint(10 + (i % 1000) * 0.01, 45 + (i / 1000) * 0.01),
                                       ST_MakePoint(10 + (i % 1000) * 0.01 + 0.004, 45 + (i / 1000) * 0.01 + 0.002)), 4326) AS geom
  FROM generate_series(1, $N) i;
SELECT trafficdb.load_map('bench_feed_roads', 'id', 'geom') \g /dev/null
CREATE TABLE heap_logged (LIKE trafficdb.feed INCLUDING DEFAULTS);
ALTER TABLE heap_logged DROP COLUMN part;
CREATE UNLOGGED TABLE heap_unlogged (LIKE heap_logged INCLUDING DEFAULTS);
EOF

echo "bench/feed: $NB CSV batches of $BATCH rows" >&2
for b in $(seq 0 $((NB - 1))); do
	"${PSQL[@]}" -c "COPY (SELECT id, 20 + (id + $b) % 60, 80, (id + $b) % 5, 90,
	                  pg_catalog.now() - interval '1 ms' * ((id + $b) % 997)
	                 FROM bench_feed_roads WHERE id % $NB = $b ORDER BY random() LIMIT $BATCH) TO '$tmp/b$b.csv' CSV"
done
COLS="(location_id, speed_kmh, free_flow_kmh, congestion, confidence, observed_at)"
# one script per session: its share of the ROWS / BATCH statements
per=$((ROWS / BATCH / FEEDERS))
for f in $(seq 1 "$FEEDERS"); do
	: >"$tmp/s$f.sql"
done

# copy_run TABLE: FEEDERS sessions in parallel; prints wall ms
copy_run() {
	local t0 t1 f
	for f in $(seq 1 "$FEEDERS"); do
		for k in $(seq 0 $((per - 1))); do
			echo "COPY $1 $COLS FROM '$tmp/b$(((k * FEEDERS + f) % NB)).csv' CSV;"
		done >"$tmp/s$f.sql"
	done
	t0=$(date +%s%N)
	for f in $(seq 1 "$FEEDERS"); do
		"${PSQL[@]}" -f "$tmp/s$f.sql" >/dev/null &
	done
	wait
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}
total=$((per * FEEDERS * BATCH))
lsn() { "${PSQL[@]}" -Atc "SELECT pg_current_wal_insert_lsn()"; }
walrow() { "${PSQL[@]}" -Atc "SELECT round(pg_wal_lsn_diff('$2', '$1') / $total)"; }

echo "bench/feed: baselines: COPY into heaps of the same shape ($total rows, $FEEDERS sessions)" >&2
"${PSQL[@]}" -c "CHECKPOINT" >/dev/null
l0=$(lsn); ms=$(copy_run heap_logged); l1=$(lsn)
heap_rate=$((total * 1000 / (ms > 0 ? ms : 1)))
emit heap_logged_copy_rows_per_s "$FEEDERS" "$heap_rate" rows/s
emit heap_logged_wal_bytes_per_row "$FEEDERS" "$(walrow "$l0" "$l1")" B
"${PSQL[@]}" -c "TRUNCATE heap_logged" -c "CHECKPOINT" >/dev/null
ms=$(copy_run heap_unlogged)
unlogged_rate=$((total * 1000 / (ms > 0 ? ms : 1)))
emit heap_unlogged_copy_rows_per_s "$FEEDERS" "$unlogged_rate" rows/s
"${PSQL[@]}" -c "TRUNCATE heap_unlogged" >/dev/null

echo "bench/feed: trafficdb.feed, published (publish_interval ${INTERVAL_MS} ms)" >&2
"${PSQL[@]}" -c "ALTER SYSTEM SET trafficdb.publish_interval = '${INTERVAL_MS}ms'" -c "SELECT pg_reload_conf()" -c "CHECKPOINT" >/dev/null
sleep 1
c0=$("${PSQL[@]}" -Atc "SELECT feed_rows_consumed FROM trafficdb.status")
l0=$(lsn)
t0=$(date +%s%N)
ms=$(copy_run trafficdb.feed)
t1=$(date +%s%N)
for _ in $(seq 1 6000); do
	[ "$("${PSQL[@]}" -Atc "SELECT feed_rows_consumed >= $c0 + $total FROM trafficdb.status")" = t ] && break
	sleep 0.01
done
t2=$(date +%s%N)
l1=$(lsn)
rate=$((total * 1000000000 / (t2 - t0)))
emit published_rows_per_s "$FEEDERS" "$rate" rows/s heap_logged_copy "$heap_rate"
emit copy_only_rows_per_s "$FEEDERS" "$((total * 1000 / (ms > 0 ? ms : 1)))" rows/s heap_logged_copy "$heap_rate"
emit publication_lag_ms "$FEEDERS" "$(((t2 - t1) / 1000000))" ms two_publish_intervals "$((2 * INTERVAL_MS))"
emit wal_bytes_per_row "$FEEDERS" "$(walrow "$l0" "$l1")" B upsert_path_2026_11_25 490
emit feed_parts_skipped "$FEEDERS" "$("${PSQL[@]}" -Atc "SELECT feed_parts_skipped FROM trafficdb.status")" count

echo "bench/feed: Redis pipelined SET of $total values" >&2
redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
	--pidfile "$tmp/redis.pid" --logfile "$tmp/redis.log"
for _ in $(seq 50); do redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
r=$(redis-benchmark -p "$RPORT" -t set -n "$total" -r "$N" -d 24 -c "$FEEDERS" -P 100 -q | sed -n 's/.*SET: \([0-9.]*\) requests.*/\1/p' | cut -d. -f1)
emit redis_set_pipelined_per_s "$FEEDERS" "$r" ops/s
emit published_vs_redis "$FEEDERS" "$rate" rows/s redis_set_pipelined "$r"

echo "bench/feed: restoring the demo map" >&2
bench_restore_map
"${PSQL[@]}" -c "DROP TABLE bench_feed_roads, heap_logged, heap_unlogged" >/dev/null
