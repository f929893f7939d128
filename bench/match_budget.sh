#!/usr/bin/env bash
# bench/match_budget.sh [SEGMENTS] [SUBSCRIPTIONS]: what many map-wide
# subscriptions cost publication (issue 28, item 5).  A scratch cluster of the
# installed build (TDB_PG_CONFIG), a grid map of SEGMENTS (default 2,000)
# segments, SUBSCRIPTIONS (default 20,000) subscriptions covering the whole
# map whose condition never holds here (congestion unknown: no events, but
# every (location, subscription) pair evaluated), and a feed that changes
# every location, published three times in each state:
#
#   publish_ms    wall time of SELECT trafficdb.publish() (psql \timing),
#                 median of 3: without subscriptions; with them and nobody
#                 attached; with them and a tap (tdbsub --all-subscriptions)
#   insert_ms     the one INSERT of the subscriptions
#   publish_ms_loading_them  the first publication after it (the daemon
#                 reads the rows and indexes what someone receives)
#   daemon_rss_mb the daemon's peak RSS (VmHWM) after each state
#   match_overruns, subscriptions_unindexed (builds that have them)
#
# Run it once per build (install the build first) to compare; figures are
# ratios within one run, the VM being shared.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

N=${1:-2000}
S=${2:-20000}
TDBSUB=${TDBSUB:-tools/tdbsub}
port=${BENCH_PORT:-5631}
dir=$(mktemp -d /tmp/tdb-match-budget.XXXXXX)
chmod 755 "$dir"
[ "$(id -u)" = 0 ] && chown "$PG_OS_USER": "$dir"
as_pg "$PG_BIN/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --locale=C.UTF-8 >/dev/null
cat >>"$dir/data/postgresql.conf" <<EOF
port = $port
listen_addresses = ''
unix_socket_directories = '$dir'
shared_preload_libraries = 'trafficdb'
trafficdb.database = 'postgres'
trafficdb.publish_interval = '1h'
EOF
as_pg "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/log" -w start >/dev/null
tap_pid=
cleanup() {
	[ -n "$tap_pid" ] && kill "$tap_pid" 2>/dev/null || true
	as_pg "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT
Q=("$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres -d postgres)

side=$(awk -v n="$N" 'BEGIN { printf "%d", sqrt(n) + 0.999 }')
"${Q[@]}" <<EOF
CREATE EXTENSION postgis;
CREATE EXTENSION trafficdb;
CREATE TABLE roads AS
SELECT i AS id, ST_SetSRID(ST_MakeLine(ST_MakePoint(24.9 + (i % $side) * 0.002, 60.15 + (i / $side) * 0.001),
                                       ST_MakePoint(24.9 + (i % $side) * 0.002 + 0.0015, 60.15 + (i / $side) * 0.001)), 4326) AS geom
  FROM generate_series(1, $N) i;
SELECT trafficdb.load_map('roads', 'id', 'geom');
EOF
round=0
# publish once with a feed changing every location; prints publish()'s ms
publish_ms() {
	round=$((round + 1))
	"${Q[@]}" -c "INSERT INTO trafficdb.feed (location_id, speed_kmh) SELECT i, 20 + (i + $round) % 50 FROM generate_series(1, $N) i" >/dev/null
	"${Q[@]}" -c '\timing on' -c 'SELECT trafficdb.publish()' | awk '/^Time:/ { print $2 }'
}
median3() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
hwm() {
	local pid
	pid=$("${Q[@]}" -c 'SELECT daemon_pid FROM trafficdb.status')
	awk '/^VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status"
}
counters() {
	"${Q[@]}" -c "SELECT coalesce(j->>'match_overruns', 'n/a') || ' ' || coalesce(j->>'subscriptions_unindexed', 'n/a') || ' ' || (j->>'last_match_ms')
	                FROM (SELECT to_jsonb(s) j FROM trafficdb.status s) x"
}

publish_ms >/dev/null
t0=$(median3 "$(publish_ms)" "$(publish_ms)" "$(publish_ms)")
rss0=$(hwm)
bench_emit match_budget publish_ms_without_subscriptions "$N" "$t0" ms

start=$(date +%s%N)
"${Q[@]}" -c "INSERT INTO trafficdb.subscriptions (name, area, condition, value)
SELECT 'wide ' || i, ST_MakeEnvelope(24.89, 60.14, 26, 62, 4326), 'congestion_at_least', 4 FROM generate_series(1, $S) i"
bench_emit match_budget insert_ms "$S" $(( ($(date +%s%N) - start) / 1000000 )) ms

tl=$(publish_ms)	# the daemon loads (and, in builds that do, indexes) them: in the generation's transaction
bench_emit match_budget publish_ms_loading_them "$S" "$tl" ms publish_ms_without_subscriptions "$t0"
t1=$(median3 "$(publish_ms)" "$(publish_ms)" "$(publish_ms)")
bench_emit match_budget publish_ms_nobody_attached "$S" "$t1" ms publish_ms_without_subscriptions "$t0"
echo "  counters (overruns unindexed last_match_ms): $(counters); daemon VmHWM $(hwm) MB (before the subscriptions: $rss0 MB)"

"$TDBSUB" "/trafficdb.$port" --all-subscriptions --quiet --timeout-ms 600000 >/dev/null 2>&1 &
tap_pid=$!
sleep 1
publish_ms >/dev/null	# attaches the tap (and indexes every row)
t2=$(median3 "$(publish_ms)" "$(publish_ms)" "$(publish_ms)")
bench_emit match_budget publish_ms_with_a_tap "$S" "$t2" ms publish_ms_without_subscriptions "$t0"
rss2=$(hwm)
bench_emit match_budget daemon_peak_rss_mb "$S" "$rss2" MB daemon_peak_rss_before "$rss0"
echo "  counters (overruns unindexed last_match_ms): $(counters)"
