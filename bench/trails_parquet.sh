#!/usr/bin/env bash
# bench/trails_parquet.sh: trail files read through the trail FDW against
# DuckDB reading the same data as sorted Parquet, side by side in one run,
# from the same MinIO on 127.0.0.1.  `make bench-parquet` runs it alone;
# `make bench` runs it in step 5.
#
# Data sets (each written as one trail file per layout, `tools/trafficdb-trail
# write FILE --id ID --time ts LAYOUT-ARGS $TRAIL_WRITE_ARGS`, and as Parquet
# written by DuckDB with `COPY (SELECT * ... ORDER BY id, ts) TO ...
# (FORMAT parquet)`, DuckDB's defaults, lon/lat as DOUBLE columns; all
# uploaded to one bucket; DuckDB's Parquet twice, sorted by id and time and
# sorted by time).  Layouts, TRAIL_LAYOUTS (default "default st"):
#   default the writer's defaults, no option (format version 3, pages by
#           trail of at most an hour)
#   trailN  --page-seconds N (pages by trail of at most N s; trail3600 was
#           the default before issue 33)
#   st      --order space-time (version 3, the default 600 s buckets)
#   stN     --order space-time --bucket-seconds N
#   time    --order time (pages of one trail and one hour, by hour then
#           trail); timeN: --bucket-seconds N
#   v2      --format-version 2 (by trail: version 2's column encodings)
#   v1      --format-version 1 (by trail)
# Block sizes, TRAIL_BLOCKS (default "default 1MB"): "default" is a server
# without block_size (the pager's default, 16 kB growing its read-ahead on
# sequential access); any other value a server with that block_size.
# The defaults' figures (layout default, block size default) come first in
# the table; the best of the other layouts and block sizes beside them.
# Data sets (TRAIL_SETS, default all five):
#   ais_us        real AIS, US coastal waters on 2020-06-30 (236 k reports:
#                 mmsi, ts, lon, lat, segment)
#   ais_nyh_week  real AIS, New York Harbor, first week of December 2020 (173 k)
#   ais_nyh_1h    real AIS, New York Harbor, first hour of 2020-06-30 (8.7 k;
#                 the one AIS file with sog, cog, heading, name, sizes)
#   flights       generated (bench/trails_parquet.py gen-flights, fixed seed):
#                 300 flights around Paris (CDG, ORY, overflights), 1,000-2,000
#                 reports each every 4-6 s (440 k): callsign (string id), ts,
#                 lon, lat, altitude (ft, steps of 25), ground_speed, track,
#                 vertical_rate, squawk (string, leading zeros), on_ground
#   adsb          generated (gen-adsb, fixed seed), shaped like OpenSky's
#                 state vectors as issue 33 tried them: 200 flights (302 k
#                 reports) with icao24, squawk and onground constant within
#                 a flight, track a float with all its decimals; TRAIL_SCALE=N
#                 (default 1) repeats them N times with ids suffixed and
#                 times shifted by a day (18: 5.4 M reports, 3,600 flights)
#   flightsN      (N from 2 to 100, not in the default list) the flight set N
#                 times, copy k's callsigns suffixed -k and its reports k days
#                 later: a file N times larger of the same shape, to see which
#                 costs grow with the file (flights18: 7.9 M reports, 5,400 flights)
# Queries, all columns unless said (constants picked from the data by the
# helper: see the log line "params"):
#   q1 one trail (the id of median length), q2 a 5-minute window from the
#   middle of the span (adsb: the 5-minute bin of median report count), q3 a 0.2 x 0.2 degree box, q4 a 3 km radius
#   (PostGIS: ST_DWithin on geography; DuckDB: a lon/lat bbox prefilter and
#   ST_Distance_Spheroid), both around CDG for flights and the busiest
#   0.1-degree cell for AIS, q5 max per id (flights: altitude; ais_nyh_1h:
#   sog; the other AIS files have no speed: lat, which our side reads from
#   a lat column added to the imported table), q6 count(*), q7 id, time,
#   lon and lat only (a map's query) in q2's 5 minutes, q8 a join of 100
#   trail ids (a VALUES list, ids drawn with a fixed seed) with the table,
#   all columns (ours: a nested loop of 100 pruned lookups sharing the
#   pages they decoded, trafficdb.trail_page_cache; DuckDB: a hash join over
#   its scan; PGOPTIONS='-c trafficdb.trail_page_cache=0' measures ours
#   without the sharing).  Our side's plan
#   of each query (EXPLAIN ANALYZE VERBOSE, one more cold run) goes to the
#   meta file; q5 and q6 must show "Aggregates From Footer" on version-2 and -3
#   files or the bench fails.
# Measured per query and side, each run cold (trail FDW: a fresh backend,
# so an empty memory cache, and a fresh empty cache_dir; DuckDB: a fresh
# in-memory database with enable_external_file_cache, the HTTP metadata and
# Parquet metadata caches off): wall time from the query's start to its
# last row in a Python client (psycopg2 / duckdb.fetchall; the connection,
# PostGIS's and DuckDB's extension loading before the clock), bytes and
# requests from MinIO as a counting proxy on 127.0.0.1 sees them (both
# sides reach MinIO only through it); the median of TRAIL_RUNS (3) runs.
# A second time per query and side, "engine ms", excludes moving the rows
# to the client, measured in the same run and cold the same way (3 more
# runs each): ours = "Execution Time" of EXPLAIN (ANALYZE, TIMING OFF) of
# the same SQL ("Planning Time" kept apart: for q5/q6 it includes reading
# the footer), DuckDB = "Total Time" of its EXPLAIN ANALYZE (binding, so
# the Parquet footer, planning and execution); each run's bytes and the top
# operator's rows are kept, and the table marks with * an engine time whose
# run fetched other bytes than the query did.  DuckDB answers count(*) on
# Parquet (q6) while optimizing, from the row groups' metadata: its EXPLAIN
# ANALYZE then shows no operator and 0 s, and the table no ratio ("-").
# Row counts and a checksum of the rows (times in µs, floats to 6
# decimals) must match DuckDB's, or the bench fails.  Our side at each
# block size of TRAIL_BLOCKS for each layout, cold with a fresh disk cache
# (the server's default) and cold with none (cache_dir 'none'; measure
# suffix _nocache; TRAIL_NOCACHE=0 leaves these runs out).
#
# Figures go to bench/lib.sh's CSV, section "parquet" (rows of an earlier
# run in the same CSV are replaced): measure <set>_<query>_<layout>[_nocache]_
# {ms,bytes,requests}, x = our block size, baseline duckdb_parquet (ratio
# < 1: fewer bytes or faster than DuckDB; x = 0 for the default block
# size), <...>_bytes_vs_time and <...>_engine_ms_vs_time (baseline
# duckdb_parquet_time: DuckDB on the Parquet sorted by time), and
# <...>_engine_ms (baseline
# DuckDB's engine ms), <...>_engine_plan_ms, <...>_engine_bytes; DuckDB's own figures
# (<set>_<query>_duckdb_..., _duckdb_engine_ms, <set>_<query>_rows; on the
# time-sorted Parquet <set>_<query>_duckdb_time_...) at x = 0.  The
# readable table goes to stdout; details (row groups, compression, ranges
# each side fetched) to $TRAIL_PARQUET_META (default
# bench/results/<date>-parquet-meta.json).  About 75 s on 2 cores (the
# first time also installs DuckDB into a venv under ~/.cache/trafficdb).
#
#   make bench-parquet                     # or bench/trails_parquet.sh
#   TRAIL_WRITE_ARGS="..." make bench-parquet   # extra writer arguments (every layout)
#   TRAIL_LAYOUTS="trail st300 st st1800" TRAIL_SETS=flights make bench-parquet
#   TRAIL_QUERIES="q1 q8" make bench-parquet   # only these queries
#   TRAIL_FLIGHTS=3400 TRAIL_SETS=flights make bench-parquet   # ~5 M flight reports (default 300 flights)
#   TRAIL_SETS=adsb TRAIL_SCALE=18 TRAIL_NOCACHE=0 make bench-parquet   # 5.4 M reports
#   TRAIL_HOLD=600 ...                     # keep MinIO, the proxy and the cluster 600 s before cleaning up
set -euo pipefail
. "$(dirname "$0")/lib.sh"

RUNS=${TRAIL_RUNS:-3}
TMO=${TRAIL_TIMEOUT:-300}
DUCKDB_VERSION=1.5.5
# shellcheck disable=SC2206 # extra writer arguments, split on spaces
WRITE_ARGS=(${TRAIL_WRITE_ARGS:-})
read -r -a LAYOUTS <<<"${TRAIL_LAYOUTS:-default st}"
read -r -a BLOCKS <<<"${TRAIL_BLOCKS:-default 1MB}"
NOCACHE=${TRAIL_NOCACHE:-1}
SCALE=${TRAIL_SCALE:-1}
[[ $SCALE =~ ^[0-9]+$ ]] && [ "$SCALE" -ge 1 ] && [ "$SCALE" -le 100 ] ||
	die "TRAIL_SCALE=$SCALE: expected a whole number from 1 to 100 (copies of the adsb set)"
layout_args() {	# the writer's arguments for a layout name
	case $1 in
	default) ;;
	trail) echo "--order trail --page-seconds 3600" ;;
	trail[0-9]*) echo "--order trail --page-seconds ${1#trail}" ;;
	st) echo "--order space-time" ;;
	st[0-9]*) echo "--order space-time --bucket-seconds ${1#st}" ;;
	time) echo "--order time" ;;
	time[0-9]*) echo "--order time --bucket-seconds ${1#time}" ;;
	v1) echo "--format-version 1" ;;
	v2) echo "--format-version 2 --order trail" ;;
	*) die "TRAIL_LAYOUTS: unknown layout $1 (default, trailN, st, stN, time, timeN, v2, v1)" ;;
	esac
}
layout_label() {
	case $1 in
	default) echo "defaults" ;;
	trail) echo "by trail, 3600 s pages" ;;
	trail[0-9]*) echo "by trail, ${1#trail} s pages" ;;
	st) echo "space-time 600 s" ;;
	st[0-9]*) echo "space-time ${1#st} s" ;;
	time) echo "by time, 3600 s" ;;
	time[0-9]*) echo "by time, ${1#time} s" ;;
	v2) echo "v2 by trail, 3600 s pages" ;;
	v1) echo "v1 by trail" ;;
	esac
}
for l in "${LAYOUTS[@]}"; do layout_args "$l" >/dev/null; done
block_bytes() {	# a TRAIL_BLOCKS entry as bytes (0: the server's default)
	case $1 in
	default) echo 0 ;;
	[0-9]*kB) echo $((${1%kB} * 1024)) ;;
	[0-9]*MB) echo $((${1%MB} * 1048576)) ;;
	*) die "TRAIL_BLOCKS: unknown block size $1 (default, NkB, NMB)" ;;
	esac
}
servers_json= ssep=
for b in "${BLOCKS[@]}"; do
	servers_json+="$ssep[$(block_bytes "$b"), \"s_$b\"]" ssep=", "
done
META=${TRAIL_PARQUET_META:-bench/results/$(date -u +%Y-%m-%d)-parquet-meta.json}
t_start=$SECONDS
progress() { printf '  [%4d s] bench/trails_parquet: %s\n' $((SECONDS - t_start)) "$*" >&2; }

progress "dependencies, MinIO, DuckDB $DUCKDB_VERSION from PyPI, build and install"
scripts/deps.sh >/dev/null
scripts/minio.sh install
# DuckDB and its httpfs and spatial extensions as PyPI packages, in a venv
# outside the checkout (reused while the version is the same)
VENV=${XDG_CACHE_HOME:-$HOME/.cache}/trafficdb/bench-venv-duckdb-$DUCKDB_VERSION
if ! "$VENV/bin/python" -c 'import duckdb, duckdb_extension_httpfs, duckdb_extension_spatial, psycopg2' 2>/dev/null; then
	python3 -m venv "$VENV" || { DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q python3-venv >/dev/null && python3 -m venv "$VENV"; }
	timeout 600 "$VENV/bin/pip" install -q "duckdb==$DUCKDB_VERSION" "duckdb-extension-httpfs==$DUCKDB_VERSION" \
		"duckdb-extension-spatial==$DUCKDB_VERSION" "psycopg2-binary==2.9.13"
fi
PY=$VENV/bin/python
make -s -j"$(nproc)" all tools/trafficdb-trail bench/trailbench PG_CONFIG="$PG_CONFIG"
$SUDO make -s install PG_CONFIG="$PG_CONFIG" >/dev/null
scripts/fetch-ais.sh >/dev/null

work=$(mktemp -d /var/tmp/trafficdb-parquet.XXXXXX)
chmod 755 "$work"
proxy_pid=
cleanup() {
	# TRAIL_HOLD=SECONDS: keep MinIO, the proxy and the cluster up that long before cleaning up (to look at them)
	if [ -n "${TRAIL_HOLD:-}" ] && [ -f "$work/pg/PG_VERSION" ]; then
		echo "bench/trails_parquet: holding $work for ${TRAIL_HOLD} s (cluster port ${port:-?}, proxy port ${pport:-?})" >&2
		sleep "$TRAIL_HOLD" || true
	fi
	[ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null || true
	[ -f "$work/pg/PG_VERSION" ] && as_pg "$PG_BIN/pg_ctl" -D "$work/pg" stop -m fast -w >/dev/null 2>&1 || true
	scripts/minio.sh stop "$work/minio" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
# ports: TDB_BENCH_PORTS="FIRST LAST" takes the proxy's two and the
# cluster's from that range (each after the last taken), else the system's
next_port() {
	local r=${TDB_BENCH_PORTS:-}
	if [ -n "$r" ]; then
		read -r _ last <<<"$r"
		[ -n "${taken:-}" ] && r="$((taken + 1)) $last"
		taken=$(free_port "$r")
		echo "$taken"
	else
		free_port
	fi
}

scripts/minio.sh start "$work/minio" >/dev/null
. "$work/minio/env"
export AWS_ACCESS_KEY_ID=$MINIO_ROOT_USER AWS_SECRET_ACCESS_KEY=$MINIO_ROOT_PASSWORD AWS_ENDPOINT_URL=$MINIO_ENDPOINT
tools/trafficdb-trail mb s3://parquet >/dev/null
sed -i '/^parquet,/d' "$BENCH_CSV"

progress "generating the flight-shaped set; writing trail files${WRITE_ARGS[*]:+ (${WRITE_ARGS[*]})}"
FLIGHTS=${TRAIL_FLIGHTS:-300}
case $FLIGHTS in ''|*[!0-9]*) die "TRAIL_FLIGHTS: \"$FLIGHTS\" is not a number of flights (default 300; 3400 make about 5 M reports)" ;; esac
sets=${TRAIL_SETS:-ais_us ais_nyh_week ais_nyh_1h flights adsb}
[[ " $sets " == *" flights "* ]] && timeout "$TMO" "$PY" bench/trails_parquet.py gen-flights "$work/flights.csv" 20261126 "$FLIGHTS"
[[ " $sets " == *" adsb "* ]] && timeout $((TMO * SCALE)) "$PY" bench/trails_parquet.py gen-adsb "$work/adsb.csv" 20261129 "$SCALE"
declare -A csv=([ais_us]=data/cache/ais/us_coastal_2020_06_30.csv
	[ais_nyh_week]=data/cache/ais/nyharbor_2020_12_first_week.csv
	[ais_nyh_1h]=data/cache/ais/nyharbor_2020_06_30_first_hour.csv
	[flights]=$work/flights.csv [adsb]=$work/adsb.csv)
declare -A idc=([ais_us]=mmsi [ais_nyh_week]=mmsi [ais_nyh_1h]=mmsi [flights]=callsign [adsb]=callsign)
declare -A tbytes tpages
# flightsN (N from 2 to 100): the flight set N times, ids and days shifted (a file N times larger)
for f in $sets; do
	case $f in
	flights[0-9]*)
		n=${f#flights}
		[[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 2 ] && [ "$n" -le 100 ] ||
			die "TRAIL_SETS: $f: expected flightsN with N from 2 to 100"
		progress "generating $f (the flight set x$n)"
		timeout "$TMO" "$PY" bench/trails_parquet.py gen-flights "$work/$f.csv" 20261126 "$FLIGHTS" "$n"
		csv[$f]=$work/$f.csv idc[$f]=callsign
		;;
	esac
done
for f in $sets; do
	[ -n "${idc[$f]:-}" ] || die "TRAIL_SETS: unknown data set $f"
	tbytes[$f]= tpages[$f]=
	for l in "${LAYOUTS[@]}"; do
		# shellcheck disable=SC2046 # the layout's arguments, split on spaces
		timeout $((TMO * SCALE)) tools/trafficdb-trail write "$work/$f.$l.trail" --id "${idc[$f]}" --time ts \
			$(layout_args "$l") "${WRITE_ARGS[@]}" <"${csv[$f]}" 2>/dev/null
		timeout "$TMO" bench/trailbench put "$work/$f.$l.trail" "s3://parquet/$f.$l.trail" >/dev/null
		b=$(stat -c %s "$work/$f.$l.trail")
		n=$(tools/trafficdb-trail info "$work/$f.$l.trail" | sed -n 's/^pages: *//p')
		tbytes[$f]+="${tbytes[$f]:+, }\"$l\": $b" tpages[$f]+="${tpages[$f]:+, }\"$l\": $n"
		progress "$f.$l.trail: $b bytes, $n pages, uploaded"
	done
done

progress "the counting proxy and a throwaway cluster"
taken=
pport=$(next_port); taken=$pport
cport=$(next_port); taken=$cport
"$PY" bench/trails_parquet.py proxy "$pport" "${MINIO_ENDPOINT##*:}" "$cport" &
proxy_pid=$!
make_pg_dir "$work/pg"
make_pg_dir "$work/caches"
as_pg "$PG_BIN/initdb" -D "$work/pg" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$work/initdb.log" ||
	{ cat "$work/initdb.log"; die "initdb failed"; }
port=$(next_port)
as_pg tee -a "$work/pg/postgresql.conf" >/dev/null <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = ''
shared_preload_libraries = 'trafficdb'
trafficdb.database = 'postgres'
dynamic_shared_memory_type = posix
logging_collector = off
EOF
as_pg "$PG_BIN/pg_ctl" -D "$work/pg" -l "$work/pg/postgres.log" -w -t 60 start >/dev/null ||
	{ tail -n 20 "$work/pg/postgres.log"; die "the cluster did not start"; }
PSQL=("$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d postgres)
for i in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$pport") 2>/dev/null && break; sleep 0.1; done
{
	echo "SET client_min_messages = warning;"
	echo "CREATE EXTENSION trafficdb CASCADE;"
	for b in "${BLOCKS[@]}"; do
		s=$b:s_$b bopt=
		[ "$b" = default ] || bopt="block_size '$b', "
		echo "CREATE SERVER ${s#*:} FOREIGN DATA WRAPPER trafficdb_trails OPTIONS (endpoint 'http://127.0.0.1:$pport',"
		echo "  region 'us-east-1', ${bopt}cache_dir '$work/caches/none-yet');"
		echo "CREATE USER MAPPING FOR CURRENT_USER SERVER ${s#*:} OPTIONS (access_key :'ak', secret_key :'sk');"
		for l in "${LAYOUTS[@]}"; do
			# one schema per server and layout (ais_us.st.trail imports as table ais_us)
			echo "CREATE SCHEMA ${s#*:}_$l;"
			for f in $sets; do
				echo "IMPORT FOREIGN SCHEMA \"s3://parquet/$f.$l.trail\" FROM SERVER ${s#*:} INTO ${s#*:}_$l;"
				# the file's lon and lat as columns too: max(lat) is a footer aggregate, max(ST_Y(geom)) is not
				echo "ALTER FOREIGN TABLE ${s#*:}_$l.$f ADD COLUMN lon double precision, ADD COLUMN lat double precision;"
			done
		done
	done
} | timeout "$TMO" "${PSQL[@]}" -v ak="$MINIO_ROOT_USER" -v sk="$MINIO_ROOT_PASSWORD"

progress "Parquet with DuckDB, then the queries ($RUNS cold runs each side)"
ais_cols='[["mmsi","BIGINT"],["ts","TIMESTAMP"],["lon","DOUBLE"],["lat","DOUBLE"],["segment","VARCHAR"]]'
h1_cols='[["mmsi","BIGINT"],["ts","TIMESTAMP"],["lon","DOUBLE"],["lat","DOUBLE"],["sog","DOUBLE"],["cog","DOUBLE"],["heading","DOUBLE"],["vessel_name","VARCHAR"],["vessel_type","DOUBLE"],["status","DOUBLE"],["length","DOUBLE"],["width","DOUBLE"],["draft","DOUBLE"]]'
fl_cols='[["callsign","VARCHAR"],["ts","TIMESTAMP"],["lon","DOUBLE"],["lat","DOUBLE"],["altitude","INTEGER"],["ground_speed","DOUBLE"],["track","DOUBLE"],["vertical_rate","INTEGER"],["squawk","VARCHAR"],["on_ground","BOOLEAN"]]'
ad_cols='[["callsign","VARCHAR"],["ts","TIMESTAMP"],["lon","DOUBLE"],["lat","DOUBLE"],["icao24","VARCHAR"],["velocity","DOUBLE"],["track","DOUBLE"],["vertrate","DOUBLE"],["baroaltitude","DOUBLE"],["squawk","VARCHAR"],["onground","BOOLEAN"]]'
umask 077	# the config holds MinIO's credentials
cat >"$work/config.json" <<EOF
{"work": "$work", "out": "$work/results.tsv", "meta": "$work/meta.json", "runs": $RUNS,
 "bucket": "parquet", "put": "bench/trailbench", "key": "$MINIO_ROOT_USER", "secret": "$MINIO_ROOT_PASSWORD",
 "proxy_port": $pport, "proxy_control": $cport, "pg_port": $port, "pg_db": "postgres",
 "cache_root": "$work/caches", "servers": [$servers_json], "nocache": $NOCACHE, "scale": $SCALE,
 "sets": "$sets", "queries": "${TRAIL_QUERIES:-}", "layouts": [$(for l in "${LAYOUTS[@]}"; do printf '%s["%s", "%s"]' "${sep:-}" "$l" "$(layout_label "$l")"; sep=", "; done)],
 "datasets": [
  {"name": "ais_us", "csv": "${csv[ais_us]}", "id": "mmsi", "columns": $ais_cols, "extra": ["segment"], "q5": "lat", "trail_bytes": {${tbytes[ais_us]:-}}, "trail_pages": {${tpages[ais_us]:-}}},
  {"name": "ais_nyh_week", "csv": "${csv[ais_nyh_week]}", "id": "mmsi", "columns": $ais_cols, "extra": ["segment"], "q5": "lat", "trail_bytes": {${tbytes[ais_nyh_week]:-}}, "trail_pages": {${tpages[ais_nyh_week]:-}}},
  {"name": "ais_nyh_1h", "csv": "${csv[ais_nyh_1h]}", "id": "mmsi", "columns": $h1_cols,
   "extra": ["sog","cog","heading","vessel_name","vessel_type","status","length","width","draft"], "q5": "sog", "trail_bytes": {${tbytes[ais_nyh_1h]:-}}, "trail_pages": {${tpages[ais_nyh_1h]:-}}},
  {"name": "flights", "csv": "${csv[flights]}", "id": "callsign", "columns": $fl_cols, "tsformat": "%Y-%m-%dT%H:%M:%S.%gZ",
   "extra": ["altitude","ground_speed","track","vertical_rate","squawk","on_ground"], "q5": "altitude", "airport": [2.5479, 49.0097],
   "trail_bytes": {${tbytes[flights]:-}}, "trail_pages": {${tpages[flights]:-}}},
  {"name": "adsb", "csv": "${csv[adsb]}", "id": "callsign", "columns": $ad_cols, "tsformat": "%Y-%m-%dT%H:%M:%S.%gZ",
   "extra": ["icao24","velocity","track","vertrate","baroaltitude","squawk","onground"], "q5": "baroaltitude", "airport": [2.5479, 49.0097], "q2_at": "median",
   "trail_bytes": {${tbytes[adsb]:-}}, "trail_pages": {${tpages[adsb]:-}}}$(
	for f in $sets; do
		case $f in flights[0-9]*)
			printf ',\n  {"name": "%s", "csv": "%s", "id": "callsign", "columns": %s, "tsformat": "%%Y-%%m-%%dT%%H:%%M:%%S.%%gZ",' "$f" "${csv[$f]}" "$fl_cols"
			printf '\n   "extra": ["altitude","ground_speed","track","vertical_rate","squawk","on_ground"], "q5": "altitude", "airport": [2.5479, 49.0097],'
			printf '\n   "trail_bytes": {%s}, "trail_pages": {%s}}' "${tbytes[$f]:-}" "${tpages[$f]:-}" ;;
		esac
	done)]}
EOF
umask 022
timeout 1200 "$PY" bench/trails_parquet.py bench "$work/config.json" ||
	die "bench/trails_parquet: the measurement failed (see above)"
mkdir -p "$(dirname "$META")"
cp "$work/meta.json" "$META"
cp "$work/results.tsv" "${META%.json}.tsv"	# the medians, one line per (set, query, side)

# the CSV rows, then the readable table
declare -A d_ms d_bytes d_req d_ems d_tbytes d_tems
# fields split on \037, not tab: read collapses runs of a whitespace IFS, so
# DuckDB's empty plan-time field would shift the later fields left
while IFS=$'\037' read -r set q side rows ms body total req ems eplan ebody ereq erows; do
	name=${set}_${q%%_*}
	if [ "$side" = duckdb_time ]; then
		d_tbytes[$name]=$body d_tems[$name]=$ems
		bench_emit parquet "${name}_duckdb_time_ms" 0 "$ms" ms >/dev/null
		bench_emit parquet "${name}_duckdb_time_bytes" 0 "$body" B >/dev/null
		bench_emit parquet "${name}_duckdb_time_requests" 0 "$req" requests >/dev/null
		bench_emit parquet "${name}_duckdb_time_engine_ms" 0 "$ems" ms >/dev/null
	elif [ "$side" = duckdb ]; then
		d_ms[$name]=$ms d_bytes[$name]=$body d_req[$name]=$req
		bench_emit parquet "${name}_rows" 0 "$rows" rows >/dev/null
		bench_emit parquet "${name}_duckdb_ms" 0 "$ms" ms >/dev/null
		bench_emit parquet "${name}_duckdb_bytes" 0 "$body" B >/dev/null
		bench_emit parquet "${name}_duckdb_bytes_with_headers" 0 "$total" B >/dev/null
		bench_emit parquet "${name}_duckdb_requests" 0 "$req" requests >/dev/null
		d_ems[$name]=$ems
		bench_emit parquet "${name}_duckdb_engine_ms" 0 "$ems" ms >/dev/null
		bench_emit parquet "${name}_duckdb_engine_bytes" 0 "$ebody" B >/dev/null
	else
		# trail_<layout>_<block size>[_nocache]
		rest=${side#trail_} suffix=
		case $rest in *_nocache) rest=${rest%_nocache} suffix=_nocache ;; esac
		lay=${rest%_*} bs=${rest##*_}
		m=${name}_${lay}${suffix}
		bench_emit parquet "${m}_ms" "$bs" "$ms" ms duckdb_parquet "${d_ms[$name]}" >/dev/null
		bench_emit parquet "${m}_bytes" "$bs" "$body" B duckdb_parquet "${d_bytes[$name]}" >/dev/null
		bench_emit parquet "${m}_bytes_with_headers" "$bs" "$total" B >/dev/null
		bench_emit parquet "${m}_requests" "$bs" "$req" requests duckdb_parquet "${d_req[$name]}" >/dev/null
		bench_emit parquet "${m}_engine_ms" "$bs" "$ems" ms duckdb_parquet "${d_ems[$name]}" >/dev/null
		bench_emit parquet "${m}_engine_plan_ms" "$bs" "$eplan" ms >/dev/null
		bench_emit parquet "${m}_engine_bytes" "$bs" "$ebody" B >/dev/null
		bench_emit parquet "${m}_bytes_vs_time" "$bs" "$body" B duckdb_parquet_time "${d_tbytes[$name]}" >/dev/null
		bench_emit parquet "${m}_engine_ms_vs_time" "$bs" "$ems" ms duckdb_parquet_time "${d_tems[$name]}" >/dev/null
	fi
done < <(tr '\t' '\037' <"$work/results.tsv")

"$PY" bench/trails_parquet.py report "$work/results.tsv" "$work/meta.json"
progress "done (details: $META)"
