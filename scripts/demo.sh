#!/usr/bin/env bash
# scripts/demo.sh: `make demo [MAP=helsinki|delaware]`, `make demo-stop`,
# `make demo-clean`.
#
# Installs what is missing, builds and installs trafficdb, then runs a
# throwaway PostgreSQL 15 cluster under .demo/ in the project folder
# (loopback only, on a free port), imports a real OpenStreetMap road network
# into a PostGIS table, creates the extension and prints example queries.
# The server is left running.  Running it again reuses the cluster and
# re-imports the map.
#
# Ports, all on 127.0.0.1 (to keep parallel demos on one machine to ranges):
#   TDB_DEMO_PG_PORTS="FIRST LAST"  PostgreSQL: the first free one (default 5433 5532)
#   TDB_MINIO_PORTS="FIRST LAST"    MinIO: the first two free ones, S3 and console
#                                   (default: two the system picks)
#   TDB_WEB_PORTS="FIRST LAST"      the live map: the first free one (default 8080 8179)
#   TDB_MARTIN_PORTS="FIRST LAST"   its tile server (Martin): the first free one (default 3000 3099)
# The demo prints them when it starts.  `scripts/demo.sh --ports` prints the
# ports a start would take now and starts nothing.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$TDB_ROOT"

TDB_DEMO_PG_PORTS=${TDB_DEMO_PG_PORTS:-5433 5532}
export TDB_WEB_PORTS=${TDB_WEB_PORTS:-8080 8179}
export TDB_MARTIN_PORTS=${TDB_MARTIN_PORTS:-3000 3099}
for range in "TDB_DEMO_PG_PORTS=$TDB_DEMO_PG_PORTS" "TDB_WEB_PORTS=$TDB_WEB_PORTS" "TDB_MARTIN_PORTS=$TDB_MARTIN_PORTS" ${TDB_MINIO_PORTS:+"TDB_MINIO_PORTS=$TDB_MINIO_PORTS"}; do
	[[ ${range#*=} =~ ^[[:space:]]*([0-9]{1,5})[[:space:]]+([0-9]{1,5})[[:space:]]*$ ]] &&
		[ "${BASH_REMATCH[1]}" -ge 1 ] && [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ] && [ "${BASH_REMATCH[2]}" -le 65535 ] ||
		die "${range%%=*}=\"${range#*=}\": expected \"FIRST LAST\", two port numbers, FIRST <= LAST <= 65535"
done
unset range

DEMO_DB=trafficdb_demo
# TDB_DEMO_DIR: the demo's directory instead of .demo (make test's docs stage
# runs a scratch demo there; --stop and --clean then act on that one)
DEMO_LINK=${TDB_DEMO_DIR:-$TDB_ROOT/.demo}

# The cluster must live where the cluster account can write.  As root, a
# checkout under /root is out of its reach: keep the cluster in /var/tmp
# then and leave .demo as a link to it.
demo_dir() {
	if [ -L "$DEMO_LINK" ]; then
		readlink "$DEMO_LINK"
	else
		echo "$DEMO_LINK"
	fi
}

pgdata() { echo "$(demo_dir)/pgdata"; }
demo_port() { cat "$(demo_dir)/port" 2>/dev/null || true; }
is_running() { [ -f "$(pgdata)/PG_VERSION" ] && as_pg "$PG_BIN/pg_ctl" -D "$(pgdata)" status >/dev/null 2>&1; }

# The live map: the SUMO feeder, the web app and Martin (the cluster and MinIO stay up).
stop_live() {
	if [ -f "$(demo_dir)/web/web.pid" ] || [ -f "$(demo_dir)/web/feeder.pid" ]; then
		stop_pidfile "$(demo_dir)/web/feeder.pid"
		scripts/web.sh stop "$(demo_dir)/web"
		echo "demo: stopped the live map and its tile server (Martin)"
	fi
}

stop_demo() {
	stop_live
	if [ -f "$(demo_dir)/minio/pid" ]; then
		scripts/minio.sh stop "$(demo_dir)/minio"
		echo "demo: stopped MinIO"
	fi
	if is_running; then
		as_pg "$PG_BIN/pg_ctl" -D "$(pgdata)" stop -m fast -w >/dev/null
		echo "demo: stopped the cluster in $(demo_dir)"
	else
		echo "demo: no demo cluster is running"
	fi
}

# The PostgreSQL port a start takes: the one recorded in .demo when it is in
# TDB_DEMO_PG_PORTS and free (or the demo server's, running), else the first
# free one of TDB_DEMO_PG_PORTS.
pick_pg_port() {
	local port first last
	read -r first last <<<"$TDB_DEMO_PG_PORTS"
	port=$(demo_port)
	if [ -n "$port" ] && { is_running || { [ "$port" -ge "$first" ] && [ "$port" -le "$last" ] && ! port_in_use "$port"; }; }; then
		echo "$port"
	else
		free_port "$TDB_DEMO_PG_PORTS"
	fi
}

# first_free_but "FIRST LAST" PORT: the first free port of the range other
# than PORT (as scripts/martin.sh picks Martin's beside the live map's)
first_free_but() {
	local first last p
	read -r first last <<<"$1"
	for p in $(seq "$first" "$last"); do
		[ "$p" != "$2" ] && ! port_in_use "$p" && { echo "$p"; return 0; }
	done
	die "no free TCP port on 127.0.0.1 between $first and $last"
}

ports_line() {	# what the demo says of its ports at start
	local minio="two the system picks (TDB_MINIO_PORTS unset)"
	[ -z "${TDB_MINIO_PORTS:-}" ] || minio="of TDB_MINIO_PORTS=\"$TDB_MINIO_PORTS\""
	echo "demo: ports on 127.0.0.1: PostgreSQL $1 (of TDB_DEMO_PG_PORTS=\"$TDB_DEMO_PG_PORTS\"), MinIO $minio, live map the first free of TDB_WEB_PORTS=\"$TDB_WEB_PORTS\", its tiles (Martin) the first free of TDB_MARTIN_PORTS=\"$TDB_MARTIN_PORTS\""
}

case "${1:-}" in
--ports)
	# the ports a start would take now; starts nothing
	pg_port=$(pick_pg_port)
	minio_ports=$(scripts/minio.sh ports)
	web_port=$(free_port "$TDB_WEB_PORTS")
	martin_port=$(first_free_but "$TDB_MARTIN_PORTS" "$web_port")
	printf 'postgresql %s\nminio %s\nweb %s\nmartin %s\n' "$pg_port" "$minio_ports" "$web_port" "$martin_port"
	exit 0
	;;
--stop)
	stop_demo
	exit 0
	;;
--stop-live)
	# what the benchmarks do first (bench/lib.sh): a quiet machine, the cluster kept
	stop_live
	exit 0
	;;
--clean)
	stop_demo
	dir=$(demo_dir)
	rm -rf "$dir" "$DEMO_LINK"
	echo "demo: removed $dir"
	exit 0
	;;
esac

# Before anything starts: MinIO's and the live map's ranges have room now.
# They start last, minutes after the cluster: a full range stopped the demo
# halfway, its cluster up and nothing after it.  This demo's own MinIO,
# running, is kept (and its live map, running, gives its port back when
# restarted), so neither is counted against the range.
minio_pid=$(demo_dir)/minio/pid
if ! pidfile_alive "$minio_pid"; then
	scripts/minio.sh ports >/dev/null
fi
if [ ! -f "$(demo_dir)/web/web.pid" ]; then
	web_port=$(free_port "$TDB_WEB_PORTS")
	first_free_but "$TDB_MARTIN_PORTS" "$web_port" >/dev/null
	unset web_port
fi
unset minio_pid

MAP=${1:-helsinki}
case "$MAP" in
helsinki) pbf=data/helsinki.osm.pbf ;;
delaware) pbf=data/cache/delaware-latest.osm.pbf ;;
*) die "unknown MAP '$MAP': expected helsinki (shipped) or delaware (fetched)" ;;
esac

pg_port=$(pick_pg_port)
ports_line "$pg_port"

say "dependencies"
scripts/deps.sh

say "build and install"
make -s -j"$(nproc)" all PG_CONFIG="$PG_CONFIG"
$SUDO make -s install PG_CONFIG="$PG_CONFIG"

if [ "$MAP" = delaware ]; then
	say "fetch the Delaware road network"
	scripts/fetch-map.sh delaware
fi

say "cluster"
if [ ! -e "$DEMO_LINK" ]; then
	mkdir -p "$DEMO_LINK"
	[ "$(id -u)" = 0 ] && chown "$PG_OS_USER": "$DEMO_LINK"
	if ! as_pg test -w "$DEMO_LINK"; then
		rmdir "$DEMO_LINK"
		alt=/var/tmp/trafficdb-demo-$(printf '%s' "$TDB_ROOT" | md5sum | cut -c1-8)
		make_pg_dir "$alt"
		ln -s "$alt" "$DEMO_LINK"
		echo "demo: $TDB_ROOT is not writable by '$PG_OS_USER'; the cluster lives in $alt (.demo links to it)"
	fi
fi
dir=$(demo_dir)

if [ ! -f "$(pgdata)/PG_VERSION" ]; then
	as_pg "$PG_BIN/initdb" -D "$(pgdata)" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" ||
		{ cat "$dir/initdb.log"; die "initdb failed"; }
	echo "include_if_exists 'trafficdb-demo.conf'" | as_pg tee -a "$(pgdata)/postgresql.conf" >/dev/null
	echo "demo: created a cluster in $(pgdata)"
fi

# a rebuilt library only takes effect when the postmaster preloads it again;
# lib.cksum records the library the running server started with
lib="$($PG_CONFIG --pkglibdir)/trafficdb.so"
if is_running && [ "$(cksum <"$lib")" != "$(cat "$dir/lib.cksum" 2>/dev/null)" ]; then
	echo "demo: trafficdb.so was rebuilt; restarting the server to load it"
	as_pg "$PG_BIN/pg_ctl" -D "$(pgdata)" stop -m fast -w >/dev/null
fi

if ! is_running; then
	port=$(pick_pg_port)
	[ "$port" = "$(demo_port)" ] || echo "$port" | as_pg tee "$dir/port" >/dev/null
	as_pg tee "$(pgdata)/trafficdb-demo.conf" >/dev/null <<-EOF
		# written by scripts/demo.sh on every start
		listen_addresses = '127.0.0.1'
		port = $port
		unix_socket_directories = ''
		shared_preload_libraries = 'trafficdb'
		trafficdb.database = '$DEMO_DB'
		dynamic_shared_memory_type = posix
		logging_collector = off
	EOF
	as_pg "$PG_BIN/pg_ctl" -D "$(pgdata)" -l "$dir/postgres.log" -w start >/dev/null ||
		{ tail -n 20 "$dir/postgres.log"; die "the demo cluster did not start (log: $dir/postgres.log)"; }
	cksum <"$lib" >"$dir/lib.cksum"
	echo "demo: server started on 127.0.0.1:$port"
else
	echo "demo: server already running on 127.0.0.1:$(demo_port)"
fi
port=$(demo_port)

PSQL=("$PG_BIN/psql" -X -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres)
if [ "$("${PSQL[@]}" -d postgres -tAc "SELECT count(*) FROM pg_database WHERE datname = '$DEMO_DB'")" = 0 ]; then
	"${PSQL[@]}" -d postgres -qc "CREATE DATABASE $DEMO_DB"
fi
"${PSQL[@]}" -d "$DEMO_DB" -qc "CREATE EXTENSION IF NOT EXISTS postgis"

say "import $MAP roads ($pbf) with osm2pgsql"
# A cluster of an earlier demo (or a bench that used it) starts its daemon,
# which reads its map table while this drops the extension and what depends
# on it: either may be the deadlock's victim (seen on 2026-12-01: "deadlock
# detected", make demo failed).  The daemon's load ends; the drop is retried
# then, five times at most.
for try in 1 2 3 4 5; do
	if out=$("${PSQL[@]}" -d "$DEMO_DB" -qc "SET client_min_messages = warning; DROP EXTENSION IF EXISTS trafficdb CASCADE; DROP TABLE IF EXISTS roads" 2>&1); then
		break
	fi
	case $out in
	*"deadlock detected"*) [ "$try" -lt 5 ] || die "the old demo's tables could not be dropped: $out"
		echo "demo: the daemon was loading its map (deadlock); dropping again in 2 s" ;;
	*) die "the old demo's tables could not be dropped: $out" ;;
	esac
	sleep 2
done
osm2pgsql --output=flex --style=scripts/roads.lua --log-level=warn \
	-H 127.0.0.1 -P "$port" -U postgres -d "$DEMO_DB" "$pbf"
"${PSQL[@]}" -d "$DEMO_DB" -q <<-'EOF'
	ALTER TABLE roads ADD PRIMARY KEY (osm_id);
	ALTER TABLE roads ADD COLUMN length_m double precision;
	UPDATE roads SET length_m = ST_Length(geom::geography);
	ANALYZE roads;
EOF

say "create extension"
"${PSQL[@]}" -d "$DEMO_DB" -qc "CREATE EXTENSION trafficdb"
"${PSQL[@]}" -d "$DEMO_DB" -f scripts/demo-queries.sql

say "a C program reading live traffic from shared memory (examples/live_traffic.c, no SQL)"
# It prints the slowest segments of a box around the map's centre, then
# sleeps on the publish futex; the feed rows below wake it and it prints
# what changed.
box=$("${PSQL[@]}" -d "$DEMO_DB" -tAF ' ' -c "SELECT ST_X(c) - 0.04, ST_Y(c) - 0.02, ST_X(c) + 0.04, ST_Y(c) + 0.02
	FROM (SELECT ST_Centroid(ST_Extent(geom)) AS c FROM roads) s")
# shellcheck disable=SC2086 # four numbers
examples/live_traffic "/trafficdb.$port" $box 1 30 &
reader=$!
sleep 1
"${PSQL[@]}" -d "$DEMO_DB" -qc "INSERT INTO trafficdb.feed (location_id, speed_kmh, incident)
	SELECT osm_id, 6, 'demo: lane closed' FROM roads WHERE highway = 'primary' ORDER BY osm_id LIMIT 3" \
	-c "SELECT trafficdb.publish(false)" >/dev/null
wait "$reader" || die "examples/live_traffic failed"

say "stream files: real vessel sensor streams (AIS) queried with SQL"
scripts/fetch-ais.sh
ais=data/cache/ais/NYHarbor_2020_06_30_first_hour.csv
"${PSQL[@]}" -d "$DEMO_DB" -q <<-EOSQL
	SET client_min_messages = warning;
	SET TimeZone = 'UTC';	-- AIS times are UTC
	DROP TABLE IF EXISTS ais_raw;
	CREATE TABLE ais_raw (ts timestamptz, lon float8, lat float8, mmsi bigint, sog float4, cog float4, heading float4,
	  name text, imo text, callsign text, vtype float4, status float4, length float4, width float4, draft float4,
	  cargo float4, class text, eta text);
	\copy ais_raw FROM '$ais' (FORMAT csv, HEADER)
	-- the 8 vessels with the most reports; a vessel reports once per time
	DELETE FROM ais_raw WHERE mmsi NOT IN (SELECT mmsi FROM ais_raw GROUP BY mmsi ORDER BY count(*) DESC, mmsi LIMIT 8);
	DELETE FROM ais_raw a USING ais_raw b WHERE a.mmsi = b.mmsi AND a.ts = b.ts AND a.ctid > b.ctid;
EOSQL
{
	echo "-- 8 vessels of New York Harbor, one stream each (generated by scripts/demo.sh)"
	echo "SET blockSize = 4096;"
	echo "SET fileSize = 4MB;"
	"${PSQL[@]}" -d "$DEMO_DB" -At -c "SELECT format('CREATE STREAM v%s WITH ID %s { sog f32 WITH CODEC deadband PARAMS (0.1), cog f32 NULL WITH CODEC deadband PARAMS (1), heading i16 NULL WITH CODEC step };', mmsi, row_number() OVER (ORDER BY mmsi)) FROM (SELECT DISTINCT mmsi FROM ais_raw) v"
} >"$dir/ais.rdl"
rm -f "$dir/ais.tsf"
as_pg tools/trafficdb-stream create "$dir/ais.tsf" "$dir/ais.rdl" 2>/dev/null ||
	{ cp tools/trafficdb-stream "$dir/" && as_pg "$dir/trafficdb-stream" create "$dir/ais.tsf" "$dir/ais.rdl"; }
busiest=$("${PSQL[@]}" -d "$DEMO_DB" -At -c "SELECT 'v' || mmsi FROM ais_raw GROUP BY mmsi ORDER BY count(*) DESC, mmsi LIMIT 1")
"${PSQL[@]}" -d "$DEMO_DB" -v tsf="$(readlink -f "$dir")/ais.tsf" -v busiest="$busiest" -f scripts/demo-streams.sql

say "trail files on S3: real vessel trails (AIS) in a local MinIO, queried with SQL"
# MinIO (built once with go install) on a free port of 127.0.0.1, random root
# credentials in $dir/minio/env; the CLI uploads two real AIS trail files
# with the writer's defaults (page order auto: by time for the US coast's
# vessels, seen 9.4 h of 23, by trail for the harbour's week) and two copies
# of the first, its pages by trail and in space-time order; SQL reads them
# through the trail FDW.
if pidfile_alive "$dir/minio/pid" && [ -f "$dir/minio/env" ]; then
	echo "minio: already running"
else
	scripts/minio.sh start "$dir/minio"
fi
. "$dir/minio/env"
make -s tools/trafficdb-trail
export AWS_ACCESS_KEY_ID=$MINIO_ROOT_USER AWS_SECRET_ACCESS_KEY=$MINIO_ROOT_PASSWORD AWS_ENDPOINT_URL=$MINIO_ENDPOINT
tools/trafficdb-trail mb s3://vessels
for f in us_coastal_2020_06_30 nyharbor_2020_12_first_week; do
	tools/trafficdb-trail write "s3://vessels/$f.trail" --id mmsi --time ts <"data/cache/ais/$f.csv"
done
# the same events, pages by trail (each vessel's together), and by time bucket (600 s) and area
tools/trafficdb-trail write s3://vessels/us_coastal_2020_06_30_by_trail.trail --id mmsi --time ts \
	--order trail <data/cache/ais/us_coastal_2020_06_30.csv
tools/trafficdb-trail write s3://vessels/us_coastal_2020_06_30_space_time.trail --id mmsi --time ts \
	--order space-time <data/cache/ais/us_coastal_2020_06_30.csv
tools/trafficdb-trail info s3://vessels/us_coastal_2020_06_30.trail | head -12
tools/trafficdb-trail info s3://vessels/us_coastal_2020_06_30_space_time.trail | grep -E '^(file|bytes|order|pages):'
rm -rf "$dir/trail-cache"	# start cold: the first queries fetch from S3
"${PSQL[@]}" -d "$DEMO_DB" -v endpoint="$MINIO_ENDPOINT" -v access_key="$MINIO_ROOT_USER" \
	-v secret_key="$MINIO_ROOT_PASSWORD" -v cache_dir="$(readlink -f "$dir")/trail-cache" -f scripts/demo-trails.sql
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_ENDPOINT_URL

say "the live map: a base map, simulated traffic (Eclipse SUMO) in vector tiles through Martin, vessels (web/)"
# The base map of the same extract (scripts/basemap.sh: land, water, land
# use, buildings, roads and labels with tippecanoe into PMTiles, world land
# from Natural Earth, glyphs from a Debian font; built once, cached).
# Eclipse SUMO simulates the extract's road network (scripts/sumo.sh:
# netconvert keeps the OSM way ids, randomTrips a day with a morning peak) and
# web/sumo_feeder.py puts each road's simulated speed through shared memory
# (trafficdb_put) every few seconds.  Martin (scripts/martin.sh,
# web/martin.yaml) serves trafficdb.tile_mvt(z, x, y) as the page's traffic
# tiles; web/app.py (tipg) serves the page (MapLibre GL JS from npm), the
# base map, server-sent events on each publication, the vessels of the AIS
# day from S3 through the trail FDW and OGC API collections.
# (Delaware's net has 19,000 edges: SUMO keeps up with 3 simulated seconds a second on 2 cores)
case "$MAP" in helsinki) title=Helsinki speedup=4 ;; delaware) title=Delaware speedup=3 ;; esac
basemap_env "$MAP" "$pbf" "$title"
sim=$(scripts/sumo.sh build "$MAP" "$pbf" | tail -n 1)
stop_pidfile "$dir/web/feeder.pid"
scripts/web.sh stop "$dir/web"
# the app, which anyone who reaches its port talks to, reads as trafficdb_web
# (web/role.sql: no superuser, no feed, no subscriptions); the feeder writes
# through the server's shared memory as this user
"${PSQL[@]}" -d "$DEMO_DB" -q -v server=minio -v access_key="$MINIO_ROOT_USER" -v secret_key="$MINIO_ROOT_PASSWORD" \
	-f web/role.sql
mkdir -p "$dir/web"
rm -f "$dir/web/sim.json"	# another map's simulation, stopped above
nohup "${TDB_WEB_VENV:-$TDB_ROOT/.venv-web}/bin/python" web/sumo_feeder.py --shm "/trafficdb.$port" --sim "$sim" \
	--speedup "$speedup" --status "$dir/web/sim.json" >"$dir/web/feeder.log" 2>&1 &
echo $! >"$dir/web/feeder.pid"
TRAFFICDB_WEB_SIM_STATUS=$dir/web/sim.json scripts/web.sh start "$dir/web" "postgresql://trafficdb_web@127.0.0.1:$port/$DEMO_DB"
web_port=$(cat "$dir/web/web.port")
martin_port=$(cat "$dir/web/martin.port")
curl -fs -o /dev/null -w 'a z15 tile of the centre through Martin: %{size_download} bytes (%{content_type})\n' \
	"http://127.0.0.1:$martin_port/traffic/$("${PSQL[@]}" -d "$DEMO_DB" -tA -c "
	SELECT format('15/%s/%s', floor((ST_X(c) + 180) / 360 * 32768)::int,
	       floor((1 - ln(tan(radians(ST_Y(c))) + 1 / cos(radians(ST_Y(c)))) / pi()) / 2 * 32768)::int)
	  FROM (SELECT ST_Centroid(ST_Extent(geom)) AS c FROM trafficdb.locations) s")"

cat <<EOF

$(printf '\033[1m')The demo server is running.$(printf '\033[0m')
  connect:  $PG_BIN/psql -h 127.0.0.1 -p $port -U postgres $DEMO_DB
  log:      $dir/postgres.log
  minio:    $MINIO_ENDPOINT (credentials in $dir/minio/env; bucket vessels)
  live map: http://127.0.0.1:$web_port/map/   (tipg's own pages: http://127.0.0.1:$web_port/)
  tiles:    http://127.0.0.1:$martin_port/traffic/{z}/{x}/{y}   (Martin; log $dir/web/martin.log)
  stop:     make demo-stop      (stops MinIO and the live map too; make demo-clean also deletes the cluster)
It listens on 127.0.0.1 only and trusts local connections: a demo, not a deployment.
EOF
