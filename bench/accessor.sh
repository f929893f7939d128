#!/usr/bin/env bash
# bench/accessor.sh [SEGMENTS] [SECONDS] [REPS]: libtrafficdb through its
# public C API (bench/accessor.c: GET, trafficdb_get_traffic, batched GET
# over 1..cores threads, boxes and radii of 2 to 50 km, 10 nearest,
# publish-to-wakeup latency) beside, in the same run, a bare 1 GiB hash
# probe (one cache miss per lookup, the floor) on 4 kB pages and on
# transparent huge pages, and Redis GET on 127.0.0.1 (redis-benchmark, 1 M
# keys of 100 bytes, 2 clients on 2 threads, without and with pipelining
# 16), as DAL's and TrafficDB's comparisons.  The GET figures are medians of
# REPS rounds (default 5) in which the probes and the GETs run one after the
# other; the ratios are medians of the per-round ratios.  Rates are per CPU
# second of the measuring threads, but wall-clock (wall_* rows) where they
# are compared with Redis, which redis-benchmark counts so.  The daemon makes
# the objects of huge pages (trafficdb.huge_pages, on by default);
# TRAFFICDB_COLLAPSE=1 in the environment makes the accessor collapse objects
# made without them (docs/performance.md); the pages_* rows say which pages
# were used.  Uses the demo cluster (or
# BENCH_PORT's) and loads back the demo map at the end; Redis listens on
# BENCH_REDIS_PORT (6399).  Figures go to bench/lib.sh's CSV.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

N=${1:-1000000}
T=${2:-3}
REPS=${3:-5}
RPORT=${BENCH_REDIS_PORT:-6399}
case $REPS in [1-9] | [1-9][0-9]) ;; *) die "REPS $REPS: expected 1 to 99 rounds" ;; esac
bench_cluster
bench_deps
make -s bench/accessor
tmp=$(mktemp -d)
trap 'redis-cli -p $RPORT shutdown nosave >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

echo "bench/accessor: loading $N segments" >&2
"${PSQL[@]}" -c "SET client_min_messages = warning" \
	-c "DROP TABLE IF EXISTS bench_acc" \
	-c "SELECT setseed(0.4)" \
	-c "CREATE TABLE bench_acc AS SELECT i::bigint AS id,
	      ST_SetSRID(ST_MakeLine(ST_MakePoint(x, y), ST_MakePoint(x + 0.0004, y + 0.0002)), 4326) AS geom
	      FROM (SELECT i, 10 + random() AS x, 45 + random() AS y FROM generate_series(1, $N) i) s" \
	-c "SELECT trafficdb.load_map('bench_acc')" \
	-c "INSERT INTO trafficdb.feed (location_id, speed_kmh) SELECT id, id % 90 FROM bench_acc" \
	-c "SELECT trafficdb.publish()" >/dev/null

echo "bench/accessor: libtrafficdb and the bare probe" >&2
bench/accessor "/trafficdb.$port" "$N" "$T" "$REPS" >"$tmp/tdb.csv"

echo "bench/accessor: publish-to-wakeup latency (20 publications)" >&2
bench/accessor "/trafficdb.$port" wakeups 20 >"$tmp/wake.csv" &
wpid=$!
sleep 0.5
for i in $(seq 20); do
	"${PSQL[@]}" -c "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, $i)" -c "SELECT trafficdb.publish(false)" >/dev/null
	sleep 0.1
done
wait "$wpid" || echo "bench/accessor: the waiter did not see every publication" >&2

echo "bench/accessor: Redis" >&2
redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
	--pidfile "$tmp/redis.pid" --logfile "$tmp/redis.log"
for _ in $(seq 50); do redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-benchmark -p "$RPORT" -t set -n "$N" -r "$N" -d 100 -q >/dev/null
rget() { redis-benchmark -p "$RPORT" -t get -n 2000000 -r "$N" -d 100 -c 2 --threads 2 -P "$1" -q |
	sed -n 's/.*GET: \([0-9.]*\) requests per second.*/\1/p' | tail -1; }
r1=$(rget 1)
r16=$(rget 16)
bench_emit redis get 2 "$r1" ops/s
bench_emit redis get_pipeline16 2 "$r16" ops/s

val() { sed -n "s/^$1,\([0-9.]*\),.*/\1/p" "$tmp/tdb.csv"; }
while IFS=, read -r name value unit; do
	case $name in
	wall_*) t=${name##*_}; t=${t%thread}; bench_emit accessor "${name%_*}" "$t" "$value" "$unit" ;;
	bare_probe_*thread) t=${name##*_}; t=${t%thread}; bench_emit accessor "${name%_*}" "$t" "$value" "$unit" ;;
	ratio_*) t=${name##*_}; t=${t%thread}; bench_emit accessor "${name%_*}" "$t" "$value" "$unit" ;;
	get*_*thread)
		t=${name##*_}; t=${t%thread}; m=${name%_*}
		bench_emit accessor "$m" "$t" "$value" "$unit" bare_probe "$(val "bare_probe_${t}thread")"
		bench_emit accessor "$m" "$t" "$value" "$unit" bare_probe_thp "$(val "bare_probe_thp_${t}thread")"
		if [ "$t" = 2 ]; then
			# Redis ran 2 clients on 2 threads: compare both cores with both
			# cores, and wall-clock rates with redis-benchmark's wall-clock ones
			w=$(val "wall_${m}_2thread")
			case $m in
			get_batched64) bench_emit accessor "$m" 2 "$w" "$unit" redis_get_pipeline16 "$r16" ;;
			*) bench_emit accessor "$m" 2 "$w" "$unit" redis_get "$r1" ;;
			esac
		fi
		;;
	*) bench_emit accessor "$name" 1 "$value" "$unit" ;;
	esac
done <"$tmp/tdb.csv"
grep -v '^ready' "$tmp/wake.csv" | while IFS=, read -r name value unit; do
	bench_emit accessor "$name" 1 "$value" "$unit"
done

bench_restore_map
"${PSQL[@]}" -c "DROP TABLE bench_acc" -c "TRUNCATE trafficdb.feed"
