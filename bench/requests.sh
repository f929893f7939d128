#!/usr/bin/env bash
# bench/requests.sh [N]: request-response round trips (issue 18), N requests
# (default 20,000) from one requester to one member that answers at once:
#
#   c_p50_us, c_p99_us      tools/tdbsub --request against tools/tdbsub --serve (C, libtrafficdb)
#   py_*                    Python on both sides: trafficdb.Subscriber.request / .requests,
#                           beside the usual Redis work queue (LPUSH, BRPOP, answer list) of
#                           a redis-server of our own on 127.0.0.1:REDIS_PORT (6393), driven by
#                           the same Python code (bench/requests.py): p50, p99 and the CPU
#                           (user + system of both processes, and of redis-server) per request
set -euo pipefail
. "$(dirname "$0")/lib.sh"

N=${1:-20000}
RPORT=${REDIS_PORT:-6393}
bench_cluster
bench_deps
make -s tools/tdbsub lib/libtrafficdb.so
tmp=$(mktemp -d)
chmod 755 "$tmp"
cleanup() {
	[ -f "$tmp/redis.pid" ] && kill "$(cat "$tmp/redis.pid")" 2>/dev/null || true
	[ -n "${spid:-}" ] && kill "$spid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
emit() { bench_emit requests "$1" "$N" "$2" "$3" "${4:-}" "${5:-}"; }

# C: a member and a requester (as the cluster's OS user: the rings are its)
# (the member leaves after answering them all)
as_pg tools/tdbsub "/trafficdb.$port" --group bench-c --serve --count "$((N + 200))" --timeout-ms 5000 >/dev/null &
spid=$!
sleep 0.3
as_pg tools/tdbsub "/trafficdb.$port" --request bench-c --count "$((N + 200))" --timeout-ms 5000 >"$tmp/c.out"
wait "$spid" 2>/dev/null || true
spid=
read -r c50 c99 < <(awk '/^answer/ && $2 > 200 { print $NF }' "$tmp/c.out" | sort -n |
	awk '{ v[NR] = $1 } END { printf "%d %d\n", v[int(NR * 0.5 + 0.5)], v[int(NR * 0.99 + 0.5)] }')

# Python on both sides: trafficdb, then Redis
export TRAFFICDB_LIB=$TDB_ROOT/lib/libtrafficdb.so PYTHONPATH=$TDB_ROOT/python
py_tdb=$(as_pg env TRAFFICDB_LIB="$TRAFFICDB_LIB" PYTHONPATH="$PYTHONPATH" python3 bench/requests.py trafficdb "/trafficdb.$port" "$N")
redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
	--pidfile "$tmp/redis.pid" --logfile "$tmp/redis.log"
for _ in $(seq 50); do redis-cli -p "$RPORT" ping >/dev/null 2>&1 && [ -s "$tmp/redis.pid" ] && break; sleep 0.1; done
py_redis=$(python3 bench/requests.py redis "$RPORT" "$N" "$(cat "$tmp/redis.pid")")
IFS=, read -r _ _ t50 t99 tmean tcpu <<<"$py_tdb"
IFS=, read -r _ _ r50 r99 rmean rcpu <<<"$py_redis"

emit c_p50_us "$c50" us
emit c_p99_us "$c99" us
emit py_p50_us "$t50" us redis_p50 "$r50"
emit py_p99_us "$t99" us redis_p99 "$r99"
emit py_mean_us "$tmean" us redis_mean "$rmean"
emit py_cpu_us_per_request "$tcpu" us redis_cpu "$rcpu"
