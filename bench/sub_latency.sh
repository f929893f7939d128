#!/usr/bin/env bash
# bench/sub_latency.sh [PUBLICATIONS]: publish -> subscriber wake-up (issue 18).
# A subscriber (tools/tdbsub --latency, a subscription to one location) and,
# in the same run and for the same publications, a reader blocked in
# trafficdb_wait (bench/accessor wakeups, the baseline); PUBLICATIONS
# (default 200) publications of one changed location, 50 ms apart, from one
# psql session.  The
# subscriber's latency: from the moment the daemon makes the generation
# visible to the return of trafficdb_receive with its event.  SUB_LATENCY_KEEP=DIR
# keeps the raw outputs (DIR/sub.out, DIR/wake.csv).  SUB_LATENCY_SLICE_US=US
# gives both the subscriber and the waiter a scheduler slice of US
# microseconds (tdbsub --slice-us; Linux 6.12+ EEVDF); SUB_LATENCY_SPIN_US=US
# makes the subscriber poll its ring that long before it blocks (tdbsub
# --spin-us).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

K=${1:-200}
bench_cluster
make -s tools/tdbsub bench/accessor
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"${PSQL[@]}" -c "ALTER SYSTEM SET trafficdb.publish_interval = '1h'" -c "SELECT pg_reload_conf()" >/dev/null
trap '"${PSQL[@]}" -c "ALTER SYSTEM RESET trafficdb.publish_interval" -c "SELECT pg_reload_conf()" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
id=$("${PSQL[@]}" -Atc "SELECT min(location_id) FROM trafficdb.locations")
[ -n "$id" ] || { echo "bench/sub_latency: no map loaded" >&2; exit 1; }

opts=()
[ -n "${SUB_LATENCY_SLICE_US:-}" ] && opts+=(--slice-us "$SUB_LATENCY_SLICE_US")
[ -n "${SUB_LATENCY_SPIN_US:-}" ] && opts+=(--spin-us "$SUB_LATENCY_SPIN_US")
as_pg tools/tdbsub "/trafficdb.$port" --ids "$id" --latency --count "$K" --timeout-ms 20000 "${opts[@]}" >"$tmp/sub.out" &
spid=$!
env ${SUB_LATENCY_SLICE_US:+TDB_SLICE_US=$SUB_LATENCY_SLICE_US} bench/accessor "/trafficdb.$port" wakeups "$K" >"$tmp/wake.csv" &
wpid=$!
for _ in $(seq 100); do grep -q ready "$tmp/sub.out" 2>/dev/null && break; sleep 0.05; done
"${PSQL[@]}" -c "SELECT trafficdb.publish()" >/dev/null	# the daemon attaches the subscriber at its cycle
sleep 0.3
# One psql session for all the publications, and bash's own timed read for
# the pause: no process is started (psql, its backend, sleep) while the
# daemon publishes, so the wake-ups measured do not queue behind the bench.
mkfifo "$tmp/sql" "$tmp/tick"
"${PSQL[@]}" -f "$tmp/sql" >/dev/null &
qpid=$!
exec 3>"$tmp/sql" 4<>"$tmp/tick"
for i in $(seq "$K"); do
	echo "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES ($id, $((i % 100))); SELECT trafficdb.publish(false);" >&3
	read -r -t 0.05 -u 4 _ || true
done
exec 3>&- 4<&-
wait "$qpid" || echo "bench/sub_latency: the publishing session failed" >&2
wait "$spid" || echo "bench/sub_latency: the subscriber did not see every publication" >&2
wait "$wpid" || echo "bench/sub_latency: the waiter did not see every publication" >&2
[ -n "${SUB_LATENCY_KEEP:-}" ] && mkdir -p "$SUB_LATENCY_KEEP" && cp "$tmp/sub.out" "$tmp/wake.csv" "$SUB_LATENCY_KEEP/"

read -r n p50 p99 max < <(awk '/^change/ { print $8 }' "$tmp/sub.out" | sort -n |
	awk '{ v[NR] = $1 } END { if (NR) printf "%d %d %d %d\n", NR, v[int(NR * 0.5 + 0.5)], v[int(NR * 0.99 + 0.5)], v[NR] }')
wake_p50=$(sed -n 's/^wakeup_latency_p50,\([0-9.]*\),.*/\1/p' "$tmp/wake.csv")
wake_p99=$(sed -n 's/^wakeup_latency_p99,\([0-9.]*\),.*/\1/p' "$tmp/wake.csv")
bench_emit subscriptions wakeup_events "$K" "${n:-0}" count
bench_emit subscriptions wakeup_p50_us "$K" "${p50:-0}" us trafficdb_wait_p50 "${wake_p50:-}"
bench_emit subscriptions wakeup_p99_us "$K" "${p99:-0}" us trafficdb_wait_p99 "${wake_p99:-}"
bench_emit subscriptions wakeup_max_us "$K" "${max:-0}" us
grep -v '^ready' "$tmp/wake.csv" | while IFS=, read -r name value unit; do
	bench_emit subscriptions "trafficdb_wait_$name" "$K" "$value" "$unit"
done
