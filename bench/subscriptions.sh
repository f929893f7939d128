#!/usr/bin/env bash
# bench/subscriptions.sh [SEGMENTS] [SUBSCRIPTIONS]: what subscriptions cost
# the daemon (issue 18).  A synthetic map of SEGMENTS LineStrings (default
# 1,000,000) on a 1000 x 1000 grid; SUBSCRIPTIONS (default 100,000) area
# subscriptions, small boxes at random places (about 25 locations each, half
# with a condition); then a feed that changes every location, published:
#
#   publish_ms without / with the subscriptions (same feed, same run): the
#                      wall time of trafficdb.publish(), consuming the feed to
#                      publishing
#   match_ms           the daemon's matching of that publication
#   events             the events it found
#   index_ms           loading and indexing the subscriptions (once per change)
#
# Then delivery: TAPS (default 2; SUB_TAPS) tools/tdbsub --all-subscriptions
# --quiet subscribers, a round-robin group when more than one (each event to
# one of them), receive the events of one more publication of the same feed:
#
#   publish_ms_with_delivery  publish() with the taps (the daemon's pushes)
#   finish_publication_ms     the daemon's making the generation visible and
#                             pushing its events (trafficdb.status
#                             last_publish_ms)
#   delivered_ms              from the start of publish() (before psql
#                             connects) to the last event received by the
#                             taps, against the default publish_interval
#   delivered_after_visible_ms  from the generation's visibility (the time
#                             the events carry) to the last event received
#   events_received           every event: must equal last_events, with no
#                             overrun
#
# Each tap's ring must hold what it may be behind by: the bench sets
# trafficdb.subscriber_ring_events to 2^20 (64 MiB a subscriber, reserved
# only when one subscribes) and restarts the cluster once if it is smaller;
# it resets the setting at the end (in force again at the next restart).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

N=${1:-1000000}
S=${2:-100000}
TAPS=${SUB_TAPS:-2}
RING=1048576
bench_cluster
emit() { bench_emit subscriptions "$1" "$S" "$2" "$3" "${4:-}" "${5:-}"; }
make -s tools/tdbsub

# rings big enough for a tap's share of a publication: a restart when they are not
# (the setting is reset when the bench ends: the cluster's own comes back at its next restart)
raised=
if [ "$("${PSQL[@]}" -Atc "SHOW trafficdb.subscriber_ring_events")" -lt "$RING" ]; then
	echo "bench/subscriptions: trafficdb.subscriber_ring_events = $RING, restarting the cluster" >&2
	datadir=$("${PSQL[@]}" -Atc "SHOW data_directory")
	"${PSQL[@]}" -c "ALTER SYSTEM SET trafficdb.subscriber_ring_events = $RING" >/dev/null
	as_pg "$PG_BIN/pg_ctl" -D "$datadir" -l "$datadir/restart.log" restart -m fast -w >/dev/null
	raised=1
	for _ in $(seq 1 600); do
		[ "$("${PSQL[@]}" -Atc "SELECT generation > 0 FROM trafficdb.status" 2>/dev/null)" = t ] && break
		sleep 0.5
	done
fi

echo "bench/subscriptions: $N segments, $S subscriptions" >&2
"${PSQL[@]}" <<EOF
SET client_min_messages = warning;
ALTER SYSTEM SET trafficdb.publish_interval = '1h';
SELECT pg_reload_conf() \g /dev/null
DROP TABLE IF EXISTS bench_sub_roads;
CREATE UNLOGGED TABLE bench_sub_roads AS
SELECT i AS id, ST_SetSRID(ST_MakeLine(ST_MakePoint(x, y), ST_MakePoint(x + 0.0008, y + 0.0003)), 4326) AS geom
  FROM (SELECT i, 10 + (i % 1000) * 0.001 AS x, 45 + (i / 1000) * 0.0005 AS y FROM generate_series(0, $N - 1) i) s;
DELETE FROM trafficdb.subscriptions;
SELECT trafficdb.load_map('bench_sub_roads', 'id', 'geom') \g /dev/null
EOF
tmp=$(mktemp -d)
chmod 755 "$tmp"
trap '"${PSQL[@]}" -c "ALTER SYSTEM RESET trafficdb.publish_interval" ${raised:+-c "ALTER SYSTEM RESET trafficdb.subscriber_ring_events"} -c "SELECT pg_reload_conf()" -c "DELETE FROM trafficdb.subscriptions" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

feed() {
	"${PSQL[@]}" -c "INSERT INTO trafficdb.feed (location_id, speed_kmh, congestion)
		SELECT id, (id * $1) % 120, ((id + $1) % 5)::smallint FROM bench_sub_roads" >/dev/null
	local t0 t1
	t0=$(date +%s%N)
	"${PSQL[@]}" -Atc "SELECT trafficdb.publish()" >/dev/null
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}

feed 7 >/dev/null
without=$(feed 11)
without2=$(feed 12)
[ "$without2" -lt "$without" ] && without=$without2
echo "bench/subscriptions: publication of $N changes without subscriptions: $without ms" >&2

"${PSQL[@]}" -c "SELECT setseed(0.3)" -c "INSERT INTO trafficdb.subscriptions (area, condition, value, events)
	SELECT ST_MakeEnvelope(x, y, x + 0.004, y + 0.002, 4326),
	       CASE WHEN k % 2 = 0 THEN 'any' ELSE 'congestion_at_least' END,
	       CASE WHEN k % 2 = 0 THEN NULL ELSE 3 END, 'change'
	  FROM (SELECT k, 10 + random() * 0.995 AS x, 45 + random() * 0.497 AS y FROM generate_series(1, $S) k) s" >/dev/null
t0=$(date +%s%N)
"${PSQL[@]}" -Atc "SELECT trafficdb.publish()" >/dev/null	# the daemon loads and indexes them first
t1=$(date +%s%N)
loaded=$("${PSQL[@]}" -Atc "SELECT subscriptions FROM trafficdb.status")
with=$(feed 13)
with2=$(feed 14)
[ "$with2" -lt "$with" ] && with=$with2
read -r events match < <("${PSQL[@]}" -At -F ' ' -c "SELECT last_events, round(last_match_ms::numeric, 1) FROM trafficdb.status")

# delivery: the taps receive every event of one more publication
group=()
[ "$TAPS" -gt 1 ] && group=(--group bench_taps)
tap_pids=()
for t in $(seq "$TAPS"); do
	as_pg tools/tdbsub "/trafficdb.$port" --all-subscriptions "${group[@]}" --quiet --timeout-ms 5000 >"$tmp/tap$t.out" &
	tap_pids+=($!)
done
for _ in $(seq 200); do
	[ "$(cat "$tmp"/tap*.out 2>/dev/null | grep -c ready)" -eq "$TAPS" ] && break
	sleep 0.05
done
"${PSQL[@]}" -Atc "SELECT trafficdb.publish()" >/dev/null	# the daemon attaches the taps (no change: no event)
"${PSQL[@]}" -c "INSERT INTO trafficdb.feed (location_id, speed_kmh, congestion)
	SELECT id, (id * 15) % 120, ((id + 15) % 5)::smallint FROM bench_sub_roads" >/dev/null
d0=$(date +%s%N)
"${PSQL[@]}" -Atc "SELECT trafficdb.publish()" >/dev/null
d1=$(date +%s%N)
read -r devents subscribers finish_ms dropped < <("${PSQL[@]}" -At -F ' ' -c "SELECT last_events, subscribers, round(last_publish_ms::numeric, 1), events_dropped FROM trafficdb.status")
for p in "${tap_pids[@]}"; do wait "$p" || echo "bench/subscriptions: a tap failed" >&2; done
read -r received overruns first_pub last_recv < <(awk '$1 == "received" { n += $2; o += $4;
		if ($6 > 0 && (p == 0 || $6 < p)) p = $6; if ($8 > l) l = $8 }
	END { printf "%d %d %.0f %.0f\n", n, o, p, l }' "$tmp"/tap*.out)
interval_ms=$("${PSQL[@]}" -Atc "SELECT boot_val FROM pg_settings WHERE name = 'trafficdb.publish_interval'")
delivered_ms=$(awk -v l="$last_recv" -v t="$d0" 'BEGIN { printf "%.1f", (l - t / 1000) / 1000 }')
after_visible_ms=$(awk -v l="$last_recv" -v p="$first_pub" 'BEGIN { printf "%.1f", (l - p) / 1000 }')
echo "bench/subscriptions: $TAPS tap(s) ($subscribers subscriber target(s)): $received events received ($overruns overruns) of $devents; events_dropped so far: $dropped" >&2

emit subscriptions_loaded "$loaded" count
emit index_and_empty_publish_ms $(((t1 - t0) / 1000000)) ms
emit publish_ms_without "$without" ms
emit publish_ms_with "$with" ms publish_ms_without "$without"
emit match_ms "$match" ms
emit events "$events" count
emit publish_ms_with_delivery $(((d1 - d0) / 1000000)) ms publish_ms_without "$without"
emit finish_publication_ms "$finish_ms" ms
emit delivered_ms "$delivered_ms" ms publish_interval_ms "$interval_ms"
emit delivered_after_visible_ms "$after_visible_ms" ms publish_interval_ms "$interval_ms"
emit events_received "$received" count last_events "$devents"
emit events_overrun "$overruns" count
[ "$received" -eq "$devents" ] && [ "$overruns" -eq 0 ] ||
	echo "bench/subscriptions: the taps did not receive every event ($received of $devents, $overruns overruns)" >&2
awk -v e="$events" -v m="$match" 'BEGIN { if (m > 0) printf "  %.1f M events/s matched\n", e / m / 1000 }'
