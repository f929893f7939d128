#!/usr/bin/env bash
# test/livemap.sh: the live map (web/) tested as a person uses it.
#
# Sets up, in a scratch directory, a real cluster that preloads trafficdb
# (the installed build) with the Helsinki roads as its map, a MinIO on
# 127.0.0.1 holding the demo's AIS day as a trail file read through the
# trail FDW, and the tipg app with Martin serving the page's tiles
# (scripts/web.sh), then runs the browser tests
# (web/test/, node --test, headless Debian chromium through puppeteer-core).
# Stops everything it started, whatever happens.
#
# Ports: the system picks free ones; TDB_TEST_PG_PORTS="FIRST LAST" and
# TDB_WEB_PORTS="FIRST LAST" (TDB_MARTIN_PORTS for Martin) choose a range instead.  LIVEMAP_SHOTS=DIR keeps
# the screenshots.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$TDB_ROOT"

scripts/web-setup.sh
scripts/fetch-ais.sh >/dev/null
make -s tools/trafficdb-trail
command -v chromium >/dev/null || die "chromium is missing: scripts/deps.sh installs it"

work=$(mktemp -d /tmp/trafficdb-livemap.XXXXXX)
chmod 755 "$work"	# the cluster account reaches its directory through it
pgdata=$work/pg/data	# start_test_cluster makes it
cleanup() {
	set +e
	scripts/web.sh stop "$work" >/dev/null 2>&1
	scripts/minio.sh stop "$work/minio" >/dev/null 2>&1
	[ -f "$pgdata/postmaster.pid" ] && as_pg "$PG_BIN/pg_ctl" -D "$pgdata" stop -m fast -w >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT

# only publish() publishes: each test knows which generation holds its rows
start_test_cluster "$work" livemap "trafficdb.publish_interval = '1h'"
"${PSQL[@]}" -c "CREATE EXTENSION postgis"
osm2pgsql --output=flex --style=scripts/roads.lua --log-level=warn --log-progress=false -H 127.0.0.1 -P "$port" -U postgres -d livemap \
	data/helsinki.osm.pbf
"${PSQL[@]}" -c "CREATE EXTENSION trafficdb" \
	-c "SELECT trafficdb.load_map('roads', 'osm_id', 'geom', 'highway', 'name', 'maxspeed', 'oneway')" >/dev/null

echo "livemap: MinIO with the AIS day of 2020-06-30 as a trail file"
scripts/minio.sh start "$work/minio"
. "$work/minio/env"
AWS_ACCESS_KEY_ID=$MINIO_ROOT_USER AWS_SECRET_ACCESS_KEY=$MINIO_ROOT_PASSWORD AWS_ENDPOINT_URL=$MINIO_ENDPOINT \
	tools/trafficdb-trail mb s3://vessels >/dev/null
AWS_ACCESS_KEY_ID=$MINIO_ROOT_USER AWS_SECRET_ACCESS_KEY=$MINIO_ROOT_PASSWORD AWS_ENDPOINT_URL=$MINIO_ENDPOINT \
	tools/trafficdb-trail write s3://vessels/us_coastal_2020_06_30.trail --id mmsi --time ts \
	<data/cache/ais/us_coastal_2020_06_30.csv
"${PSQL[@]}" -v endpoint="$MINIO_ENDPOINT" -v access_key="$MINIO_ROOT_USER" -v secret_key="$MINIO_ROOT_PASSWORD" <<'EOSQL'
CREATE SERVER minio FOREIGN DATA WRAPPER trafficdb_trails OPTIONS (endpoint :'endpoint', region 'us-east-1');
CREATE USER MAPPING FOR CURRENT_USER SERVER minio OPTIONS (access_key :'access_key', secret_key :'secret_key');
CREATE SCHEMA trails;
IMPORT FOREIGN SCHEMA "s3://vessels/us_coastal_2020_06_30.trail" FROM SERVER minio INTO trails;
EOSQL

# the base map of the extract, the world's land and the glyphs (built once,
# cached: scripts/basemap.sh)
echo "livemap: the base map (scripts/basemap.sh)"
basemap_env helsinki data/helsinki.osm.pbf Helsinki

# the app connects as an ordinary role, as in the demo
"${PSQL[@]}" -v server=minio -v access_key="$MINIO_ROOT_USER" -v secret_key="$MINIO_ROOT_PASSWORD" -f web/role.sql
scripts/web.sh start "$work" "postgresql://trafficdb_web@127.0.0.1:$port/livemap"
# the browser tests restart the cluster under the open page with this
cat >"$work/pg-restart.sh" <<EOF2
#!/usr/bin/env bash
. "$TDB_ROOT/scripts/lib.sh"
as_pg "$PG_BIN/pg_ctl" -D "$pgdata" -l "$work/pg/postgres.log" -m fast -w -t 60 restart >/dev/null
EOF2
chmod +x "$work/pg-restart.sh"
# logs_and_die MESSAGE: the ends of the app's, Martin's and the cluster's logs, then die
logs_and_die() {
	echo "--- web.log" >&2; tail -n 30 "$work/web.log" >&2
	echo "--- martin.log" >&2; grep -v ' INFO ' "$work/martin.log" | tail -n 30 >&2
	echo "--- postgres.log" >&2; tail -n 30 "$work/pg/postgres.log" >&2
	die "$1"
}
[ -n "${LIVEMAP_SHOTS:-}" ] && mkdir -p "$LIVEMAP_SHOTS"
# LIVEMAP_ONLY=mapview skips livemap.test.mjs (when working on the map's looks)
if [ "${LIVEMAP_ONLY:-}" != mapview ]; then
echo "livemap: browser tests (node --test web/test/livemap.test.mjs, $(chromium --version 2>/dev/null | head -1))"
if ! (cd web && LIVEMAP_URL="http://127.0.0.1:$(cat "$work/web.port")" LIVEMAP_PSQL="$PG_BIN/psql" LIVEMAP_PG_RESTART="$work/pg-restart.sh" CHROMIUM=$(command -v chromium) \
	timeout 600 node --test test/livemap.test.mjs); then
	logs_and_die "the live map tests failed"
fi
fi

# mapview MAP [ENV=VALUE...]: web/test/mapview.test.mjs against the running app
mapview() {
	local map=$1
	shift
	echo "livemap: the map as a person looks at it, $map (node --test web/test/mapview.test.mjs)"
	if ! (cd web && env MAPVIEW_URL="http://127.0.0.1:$(cat "$work/web.port")" MAPVIEW_MAP="$map" MAPVIEW_PSQL="$PG_BIN/psql" \
		MAPVIEW_OUT="${LIVEMAP_SHOTS:-}" CHROMIUM=$(command -v chromium) "$@" timeout 600 node --test test/mapview.test.mjs); then
		logs_and_die "the map view tests failed ($map)"
	fi
}

# Helsinki with simulated traffic: SUMO drives the morning peak (12 steps of
# 60 SUMO s, 07:30 to 08:42 of the simulated day, after 300 s of warm-up) with a road jammed; the feeder
# puts each road's speed through shared memory; what the server then
# publishes must be exactly what the feeder says it sent
echo "livemap: simulated traffic (scripts/sumo.sh, web/sumo_feeder.py)"
command -v sumo >/dev/null || die "sumo is missing: scripts/deps.sh installs sumo and sumo-tools"
sim=$(scripts/sumo.sh build helsinki data/helsinki.osm.pbf)
jam=$("${PSQL[@]}" -tA -c "SELECT location_id FROM trafficdb.locations WHERE name = 'Mannerheimintie' AND road_class = 'primary'
	ORDER BY length_m DESC LIMIT 1")
# (awk reads the whole file: grep -q in a pipe may end before cut, whose SIGPIPE pipefail counts)
awk -F '\t' -v w="$jam" '$2 == w { found = 1 } END { exit !found }' "$sim/edges.tsv" || die "way $jam (Mannerheimintie) has no edge in $sim/edges.tsv: expected a way of the net"
# the daemon publishes the feeder's puts on its own again (the tests above set 1 h)
"${PSQL[@]}" -c "ALTER SYSTEM SET trafficdb.publish_interval = '200ms'" -c "SELECT pg_reload_conf()" >/dev/null
timeout 600 "${TDB_WEB_VENV:-$TDB_ROOT/.venv-web}/bin/python" web/sumo_feeder.py --shm "/trafficdb.$port" --sim "$sim" \
	--status "$work/sim.json" --jam "$jam" --steps 12 --speedup 20 --start 07:30 --traci-port "$(free_port "${TDB_SUMO_PORTS:-}")" \
	>"$work/feeder.log" 2>&1 || { tail -n 30 "$work/feeder.log" >&2; die "the SUMO feeder failed (log above)"; }
tail -n 1 "$work/feeder.log"
"${PSQL[@]}" -tA -c "SELECT trafficdb.publish()" >/dev/null
"${VENV:-$TDB_ROOT/.venv-web}/bin/python" - "$work/sim.json" >"$work/sim.tsv" <<'EOF2'
import json, sys
doc = json.load(open(sys.argv[1]))
for w, v in doc["ways"].items():
    print(w, v["speed_kmh"], v["free_flow_kmh"], v["congestion"], v["confidence"], sep="\t")
EOF2
cut -f2 "$sim/edges.tsv" | sort -u >"$work/ways.txt"
"${PSQL[@]}" -c "CREATE TABLE sim_status (way bigint PRIMARY KEY, speed numeric, free_flow numeric, congestion int, confidence int)" \
	-c "CREATE TABLE sim_ways (way bigint PRIMARY KEY)" \
	-c "\\copy sim_status FROM '$work/sim.tsv'" -c "\\copy sim_ways FROM '$work/ways.txt'"
q() { "${PSQL[@]}" -tA -c "$1"; }
pass=0 fail=0
check "the feeder sent $(q "SELECT count(*) FROM sim_status") ways" test "$(q "SELECT count(*) > 100 FROM sim_status")" = t
check "most simulated ways have traffic ($(q "SELECT count(*) FILTER (WHERE l.speed_kmh IS NOT NULL) || ' of ' || count(*) FROM sim_ways s LEFT JOIN trafficdb.locations l ON l.location_id = s.way"))" \
	test "$(q "SELECT count(*) FILTER (WHERE l.speed_kmh IS NOT NULL) >= 0.9 * count(*) FROM sim_ways s LEFT JOIN trafficdb.locations l ON l.location_id = s.way")" = t
check "every way the feeder sent is a location of the map, none missing" \
	test "$(q "SELECT count(*) FROM sim_status WHERE NOT EXISTS (SELECT 1 FROM trafficdb.locations l WHERE l.location_id = way)"),$(grep -c '"ways_missing": *0,' "$work/sim.json")" = 0,1
check "the jammed way $jam is at standstill, at most 20 % of free flow ($(q "SELECT speed_kmh || ' of ' || free_flow_kmh || ' km/h' FROM trafficdb.locations WHERE location_id = $jam"))" \
	test "$(q "SELECT congestion = 4 AND speed_kmh <= 0.2 * free_flow_kmh FROM trafficdb.locations WHERE location_id = $jam")" = t
check "the published values are exactly the feeder's" \
	test "$(q "SELECT count(*) FROM sim_status st JOIN trafficdb.locations l ON l.location_id = st.way
		WHERE round(l.speed_kmh::numeric, 1) IS DISTINCT FROM st.speed OR round(l.free_flow_kmh::numeric, 1) IS DISTINCT FROM st.free_flow
		   OR l.congestion IS DISTINCT FROM st.congestion OR l.confidence IS DISTINCT FROM st.confidence")" = 0
check "the simulation has queues: $(q "SELECT count(*) FROM sim_status WHERE congestion > 0") ways slower than free flow" \
	test "$(q "SELECT count(*) > 10 FROM sim_status WHERE congestion > 0")" = t
tap_done || die "the simulated traffic is not what the server published"
scripts/web.sh stop "$work" >/dev/null
TRAFFICDB_WEB_SIM_STATUS=$work/sim.json scripts/web.sh start "$work" "postgresql://trafficdb_web@127.0.0.1:$port/livemap"
mapview helsinki MAPVIEW_SIM="$work/sim.json" MAPVIEW_JAM="$jam"

# Delaware (52,000 roads, a state with a coast): its roads as the map, its
# base map, traffic from the demo's SQL feed
echo "livemap: Delaware"
scripts/fetch-map.sh delaware >/dev/null
"${PSQL[@]}" -c "DROP TABLE IF EXISTS roads"
osm2pgsql --output=flex --style=scripts/roads.lua --log-level=warn --log-progress=false -H 127.0.0.1 -P "$port" -U postgres -d livemap \
	data/cache/delaware-latest.osm.pbf
"${PSQL[@]}" -c "SELECT trafficdb.load_map('roads', 'osm_id', 'geom', 'highway', 'name', 'maxspeed', 'oneway')" >/dev/null
"${PSQL[@]}" -f web/demo-traffic.sql >/dev/null
basemap_env delaware data/cache/delaware-latest.osm.pbf Delaware
scripts/web.sh stop "$work" >/dev/null
scripts/web.sh start "$work" "postgresql://trafficdb_web@127.0.0.1:$port/livemap"
mapview delaware MAPVIEW_SKIP='colour-vision|vessels|dark theme|phone|popup'
