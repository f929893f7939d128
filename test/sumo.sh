#!/usr/bin/env bash
# test/sumo.sh: the live map's simulated traffic, end to end.
#
# A cluster of its own with the Helsinki roads as its map (as test/livemap.sh),
# the SUMO network and day of Helsinki (scripts/sumo.sh build, cached), then
# web/sumo_feeder.py for a bounded number of steps (--steps: unpaced; SUMO
# seeded, so the same values every run) with one busy way jammed, writing
# through shared memory.  Asserted in SQL (trafficdb.locations):
#   - most ways of the simulation (edges.tsv) have traffic values;
#   - every way the feeder sent is a location of the map;
#   - the jammed way is at congestion 4 and at most 20 % of its free flow;
#   - the values are exactly those of the feeder's status file.
#
# Ports: TDB_TEST_PG_PORTS="FIRST LAST" for the cluster and TDB_SUMO_PORTS="FIRST LAST"
# for TraCI choose ranges; else the system picks free ones.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$TDB_ROOT"

# Mannerheimintie (primary, one carriageway, OSM way 45150439) at the
# centre of the extract: a way the morning's through traffic uses
JAM_WAY=${SUMO_TEST_JAM:-45150439}
STEPS=${SUMO_TEST_STEPS:-8}

command -v sumo >/dev/null || die "sumo is missing: scripts/deps.sh installs sumo and sumo-tools"
make -s lib/libtrafficdb.so
sim=$(scripts/sumo.sh build helsinki data/helsinki.osm.pbf)
cut -f2 "$sim/edges.tsv" | grep -qx "$JAM_WAY" || die "way $JAM_WAY has no edge in $sim/edges.tsv: expected a way of the net"

work=$(mktemp -d /tmp/trafficdb-sumo.XXXXXX)
chmod 755 "$work"	# the cluster account reaches its directory through it
pgdata=$work/pg/data
cleanup() {
	set +e
	[ -f "$pgdata/postmaster.pid" ] && as_pg "$PG_BIN/pg_ctl" -D "$pgdata" stop -m fast -w >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT

start_test_cluster "$work" sumotest
"${PSQL[@]}" -c "CREATE EXTENSION postgis"
osm2pgsql --output=flex --style=scripts/roads.lua --log-level=warn --log-progress=false -H 127.0.0.1 -P "$port" -U postgres \
	-d sumotest data/helsinki.osm.pbf
"${PSQL[@]}" -c "CREATE EXTENSION trafficdb" \
	-c "SELECT trafficdb.load_map('roads', 'osm_id', 'geom', 'highway', 'name', 'maxspeed', 'oneway')" >/dev/null

# the feeder runs as root here (root may open the server's 0600 writers' ring;
# an ordinary user runs it as the server's OS user or in trafficdb.writer_group)
traci_port=$(free_port "${TDB_SUMO_PORTS:-}")
echo "sumo: feeder, $STEPS steps of 60 SUMO s from 07:00 simulated (after 300 s of warm-up), way $JAM_WAY jammed (TraCI on 127.0.0.1:$traci_port)"
t0=$(date +%s)
timeout 300 python3 web/sumo_feeder.py --shm "/trafficdb.$port" --sim "$sim" --status "$work/status.json" \
	--jam "$JAM_WAY" --steps "$STEPS" --every 3 --speedup 20 --start 07:00 --traci-port "$traci_port" |
	tee "$work/feeder.log" || die "the feeder failed (exit ${PIPESTATUS[0]})"
echo "sumo: feeder took $(($(date +%s) - t0)) s"

# the status file's ways as rows, and the simulation's ways
python3 - "$work/status.json" >"$work/status.tsv" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
for w, v in doc["ways"].items():
    print(w, v["speed_kmh"], v["free_flow_kmh"], v["congestion"], v["confidence"], sep="\t")
EOF
cut -f2 "$sim/edges.tsv" | sort -u >"$work/ways.txt"
"${PSQL[@]}" -c "CREATE TABLE st (way bigint PRIMARY KEY, speed numeric, free_flow numeric, congestion int, confidence int)" \
	-c "CREATE TABLE sim_ways (way bigint PRIMARY KEY)" \
	-c "\\copy st FROM '$work/status.tsv'" -c "\\copy sim_ways FROM '$work/ways.txt'"

q() { "${PSQL[@]}" -tA -c "$1"; }
check "the status file has the ways" test "$(q "SELECT count(*) > 100 FROM st")" = t
check "most simulated ways have traffic values ($(q "SELECT count(*) FILTER (WHERE l.speed_kmh IS NOT NULL) || ' of ' || count(*) FROM sim_ways s LEFT JOIN trafficdb.locations l ON l.location_id = s.way"))" \
	test "$(q "SELECT count(*) FILTER (WHERE l.speed_kmh IS NOT NULL) >= 0.9 * count(*) FROM sim_ways s LEFT JOIN trafficdb.locations l ON l.location_id = s.way")" = t
check "every way the feeder sent is a location of the map" \
	test "$(q "SELECT count(*) FROM st WHERE NOT EXISTS (SELECT 1 FROM trafficdb.locations l WHERE l.location_id = st.way)")" = 0
check "the feeder counted no missing way" grep -q '"ways_missing":0,' "$work/status.json"
check "the jammed way $JAM_WAY is at congestion 4, at most 20 % of its free flow ($(q "SELECT speed_kmh || ' of ' || free_flow_kmh || ' km/h' FROM trafficdb.locations WHERE location_id = $JAM_WAY"))" \
	test "$(q "SELECT congestion = 4 AND speed_kmh <= 0.2 * free_flow_kmh FROM trafficdb.locations WHERE location_id = $JAM_WAY")" = t
check "the values are exactly the status file's" \
	test "$(q "SELECT count(*) FROM st JOIN trafficdb.locations l ON l.location_id = st.way
		WHERE round(l.speed_kmh::numeric, 1) IS DISTINCT FROM st.speed OR round(l.free_flow_kmh::numeric, 1) IS DISTINCT FROM st.free_flow
		   OR l.congestion IS DISTINCT FROM st.congestion OR l.confidence IS DISTINCT FROM st.confidence")" = 0
check "the simulation has traffic: some ways are slower than free flow" \
	test "$(q "SELECT count(*) > 10 FROM st WHERE congestion > 0")" = t
tap_done
