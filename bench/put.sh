#!/usr/bin/env bash
# bench/put.sh [LOCATIONS]: trafficdb_put through the daemon of the demo
# cluster (or BENCH_PORT), public API only (bench/put_server.c):
#   one ASYNC producer: p50/p99 per call, updates/s until committed and published
#   PUT_PRODUCERS (4) SYNC producers, batches of 1,000 and of 10,000: updates/s, ack p50/p99
# beside the anchors: DAL's local write (1.1 us p50, 1.6 M writes/s, cited)
# and 3 x trafficdb.publish_interval for the sync acknowledgement; the sync
# throughput also beside its ceiling on this disk: PRODUCERS x BATCH updates
# per WAL fdatasync (measured in the same run), as each producer waits for
# the commit of its batch before putting the next.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

N=${1:-1000000}
CALLS=${PUT_CALLS:-2000000}
PRODUCERS=${PUT_PRODUCERS:-4}
BATCHES=${PUT_BATCHES:-300}
bench_cluster
make -s bench/put_server >/dev/null
emit() { bench_emit put "$@"; }

echo "bench/put: a map of $N locations" >&2
"${PSQL[@]}" <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench_put_roads;
CREATE UNLOGGED TABLE bench_put_roads AS
SELECT i AS id, ST_SetSRID(ST_MakeLine(ST_MakePoint(10 + (i % 1000) * 0.01, 45 + (i / 1000) * 0.01),
                                       ST_MakePoint(10 + (i % 1000) * 0.01 + 0.004, 45 + (i / 1000) * 0.01 + 0.002)), 4326) AS geom
  FROM generate_series(1, $N) i;
SELECT trafficdb.load_map('bench_put_roads', 'id', 'geom') \g /dev/null
SQL
interval=$("${PSQL[@]}" -Atc "SELECT setting FROM pg_settings WHERE name = 'trafficdb.publish_interval'")
shm=$("${PSQL[@]}" -Atc "SELECT CASE WHEN current_setting('trafficdb.shm_name') = '' THEN '/trafficdb.' || current_setting('port') ELSE current_setting('trafficdb.shm_name') END")

# The ceiling of TRAFFICDB_SYNC: each producer waits for a commit, so at
# most PRODUCERS x BATCH updates are in one generation, and a generation
# costs at least one WAL flush.  Measured here, in the same run, on the WAL's
# file system: 200 8 kB writes with O_DSYNC (what a commit's fdatasync costs).
wal_fsync_us() {
	local dir f t0 t1
	dir=$("${PSQL[@]}" -Atc "SELECT current_setting('data_directory') || '/pg_wal'")
	[ -w "$dir" ] || dir=${TMPDIR:-/tmp}
	f=$dir/trafficdb-fsync-probe.$$
	t0=$(date +%s%N)
	dd if=/dev/zero of="$f" bs=8k count=200 oflag=dsync status=none
	t1=$(date +%s%N)
	rm -f "$f"
	echo $(((t1 - t0) / 200000))
}

echo "bench/put: $CALLS async puts, then $PRODUCERS sync producers x $BATCHES batches of 1,000 ($shm)" >&2
for batch in 1000 10000; do
	fsync_us=$(wal_fsync_us)
	emit "wal_fdatasync_us_batch$batch" "$PRODUCERS" "$fsync_us" us
	bench/put_server "$shm" "$N" "$CALLS" "$PRODUCERS" "$((BATCHES * 1000 / batch))" "$batch" >"${TMPDIR:-/tmp}/put_server.$$"
	while IFS=, read -r m v u; do
		case "$m" in
			put_async_p50) [ "$batch" = 1000 ] && emit "$m" 1 "$v" "$u" dal_local_write_p50 1100 ;;
			put_async_committed_per_s | put_many_async_committed_per_s) [ "$batch" = 1000 ] && emit "$m" 1 "$v" "$u" dal_writes_per_s 1600000 ;;
			put_async_* | put_many_async_*) [ "$batch" = 1000 ] && emit "$m" 1 "$v" "$u" ;;
			put_sync_per_s)
				emit "${m}_batch$batch" "$PRODUCERS" "$v" "$u" dal_writes_per_s 1600000
				emit "${m}_batch${batch}_vs_fsync" "$PRODUCERS" "$v" "$u" one_fdatasync_per_generation_per_s \
					"$((PRODUCERS * batch * 1000000 / (fsync_us > 0 ? fsync_us : 1)))" ;;
			put_sync_ack_p99) emit "${m}_batch$batch" "$PRODUCERS" "$v" "$u" three_publish_intervals_ms "$((3 * interval))" ;;
			*) emit "${m}_batch$batch" "$PRODUCERS" "$v" "$u" ;;
		esac
	done <"${TMPDIR:-/tmp}/put_server.$$"
	rm -f "${TMPDIR:-/tmp}/put_server.$$"
	CALLS=1000	# the async part once
done

echo "bench/put: restoring the demo map" >&2
bench_restore_map || true
"${PSQL[@]}" -c "DROP TABLE bench_put_roads" >/dev/null
