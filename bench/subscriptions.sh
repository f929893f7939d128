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
# Delivery (rings, wake-ups) is not built yet: this measures the matching.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

N=${1:-1000000}
S=${2:-100000}
bench_cluster
emit() { bench_emit subscriptions "$1" "$S" "$2" "$3" "${4:-}" "${5:-}"; }

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
trap '"${PSQL[@]}" -c "ALTER SYSTEM RESET trafficdb.publish_interval" -c "SELECT pg_reload_conf()" -c "DELETE FROM trafficdb.subscriptions" >/dev/null 2>&1 || true' EXIT

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

emit subscriptions_loaded "$loaded" count
emit index_and_empty_publish_ms $(((t1 - t0) / 1000000)) ms
emit publish_ms_without "$without" ms
emit publish_ms_with "$with" ms publish_ms_without "$without"
emit match_ms "$match" ms
emit events "$events" count
awk -v e="$events" -v m="$match" 'BEGIN { if (m > 0) printf "  %.1f M events/s matched\n", e / m / 1000 }'
