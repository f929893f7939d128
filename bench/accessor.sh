#!/usr/bin/env bash
# bench/accessor.sh [SEGMENTS] [SECONDS]: libtrafficdb through its public C
# API (bench/accessor.c) beside Redis GET on 127.0.0.1 in the same run
# (redis-benchmark, 1 M keys of 100 bytes, 2 clients on 2 threads, without
# and with pipelining 16), as DAL's and TrafficDB's comparisons.  Uses the
# demo cluster (started if needed) and loads back the demo map at the end.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$TDB_ROOT"

N=${1:-1000000}
T=${2:-3}
RPORT=6399
port=$(cat .demo/port 2>/dev/null || true)
if [ -z "$port" ] || ! "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$port"; then
	make -s demo >/dev/null
	port=$(cat .demo/port)
fi
PSQL=("$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d trafficdb_demo)
make -s bench/accessor
out=bench/results/accessor.csv
mkdir -p bench/results
stamp="$(date -u +%Y-%m-%dT%H:%M:%SZ),$(hostname)"
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

echo "bench/accessor: libtrafficdb" >&2
bench/accessor "/trafficdb.$port" "$N" "$T" >"$tmp/tdb.csv"

echo "bench/accessor: publish-to-wakeup latency (20 publications)" >&2
bench/accessor "/trafficdb.$port" wakeups 20 >"$tmp/wake.csv" &
wpid=$!
sleep 0.5
for i in $(seq 20); do
	"${PSQL[@]}" -c "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, $i)" -c "SELECT trafficdb.publish(false)" >/dev/null
	sleep 0.1
done
wait "$wpid" || echo "bench/accessor: the waiter did not see every publication" >&2
grep -v '^ready' "$tmp/wake.csv" >>"$tmp/tdb.csv" || true

echo "bench/accessor: Redis" >&2
redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
	--pidfile "$tmp/redis.pid" --logfile "$tmp/redis.log"
for _ in $(seq 50); do redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-benchmark -p "$RPORT" -t set -n "$N" -r "$N" -d 100 -q >/dev/null
rget() { redis-benchmark -p "$RPORT" -t get -n 2000000 -r "$N" -d 100 -c 2 --threads 2 -P "$1" -q |
	sed -n 's/.*GET: \([0-9.]*\) requests per second.*/\1/p' | tail -1; }
r1=$(rget 1)
r16=$(rget 16)

val() { sed -n "s/^$1,\([0-9.]*\),.*/\1/p" "$tmp/tdb.csv"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (b > 0 ? a / b : 0) }'; }
printf '%-28s %14s\n' measure per_second
while IFS=, read -r name value unit; do
	printf '%-28s %14.0f %s\n' "$name" "$value" "$unit"
	echo "$stamp,$N,$name,$value" >>"$out"
done <"$tmp/tdb.csv"
printf '%-28s %14.0f\n' redis_get_2clients "$r1" redis_get_2clients_pipeline16 "$r16"
echo "$stamp,$N,redis_get,$r1" >>"$out"
echo "$stamp,$N,redis_get_pipeline16,$r16" >>"$out"
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f%%", (b > 0 ? 100 * a / b : 0) }'; }
echo "both cores: libtrafficdb GET vs Redis GET $(ratio "$(val get_2thread)" "$r1")x," \
	"batched vs Redis pipelined $(ratio "$(val get_batched64_2thread)" "$r16")x"
echo "one core, against the bare 1 GiB probe: GET $(pct "$(val get_1thread)" "$(val bare_probe_1thread)")," \
	"tdb_get_traffic $(pct "$(val get_traffic_1thread)" "$(val bare_probe_1thread)")," \
	"batched $(pct "$(val get_batched64_1thread)" "$(val bare_probe_1thread)")"

"${PSQL[@]}" -c "SELECT trafficdb.load_map('roads', 'osm_id', 'geom', 'highway', 'name', 'maxspeed', 'oneway')" >/dev/null
"${PSQL[@]}" -c "DROP TABLE bench_acc"
