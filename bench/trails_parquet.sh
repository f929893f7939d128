#!/usr/bin/env bash
# bench/trails_parquet.sh: trail files read through the trail FDW against
# DuckDB reading the same data as sorted Parquet, side by side in one run,
# from the same MinIO on 127.0.0.1.  `make bench-parquet` runs it alone;
# `make bench` runs it in step 5.
#
# Data sets (each written twice: a trail file with `tools/trafficdb-trail
# write FILE --id ID --time ts $TRAIL_WRITE_ARGS`, and Parquet written by
# DuckDB with `COPY (SELECT * ... ORDER BY id, ts) TO ... (FORMAT parquet)`,
# DuckDB's defaults, lon/lat as DOUBLE columns; both uploaded to one bucket):
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
# Queries, all columns unless said (constants picked from the data by the
# helper: see the log line "params"):
#   q1 one trail (the id of median length), q2 a 5-minute window from the
#   middle of the span, q3 a 0.2 x 0.2 degree box, q4 a 3 km radius
#   (PostGIS: ST_DWithin on geography; DuckDB: a lon/lat bbox prefilter and
#   ST_Distance_Spheroid), both around CDG for flights and the busiest
#   0.1-degree cell for AIS, q5 max per id (flights: altitude; ais_nyh_1h:
#   sog; the other AIS files have no speed: lat), q6 count(*).
# Measured per query and side, each run cold (trail FDW: a fresh backend,
# so an empty memory cache, and a fresh empty cache_dir; DuckDB: a fresh
# in-memory database with enable_external_file_cache, the HTTP metadata and
# Parquet metadata caches off): wall time from the query's start to its
# last row in a Python client (psycopg2 / duckdb.fetchall; the connection,
# PostGIS's and DuckDB's extension loading before the clock), bytes and
# requests from MinIO as a counting proxy on 127.0.0.1 sees them (both
# sides reach MinIO only through it); the median of TRAIL_RUNS (3) runs.
# Row counts and a checksum of the rows (times in µs, floats to 6
# decimals) must match DuckDB's, or the bench fails.  Our side at two
# block sizes, 16 kB and 1 MB (the default), each cold with a fresh disk
# cache (the server's default: blocks are written and fsynced as they
# arrive) and cold with none (cache_dir 'none'; measure suffix _nocache).
#
# Figures go to bench/lib.sh's CSV, section "parquet" (rows of an earlier
# run in the same CSV are replaced): measure <set>_<query>_{ms,bytes,
# requests,rows}, x = our block size, baseline duckdb_parquet (ratio < 1:
# fewer bytes or faster than DuckDB); DuckDB's own figures at x = 0.  The
# readable table goes to stdout; details (row groups, compression, ranges
# each side fetched) to $TRAIL_PARQUET_META (default
# bench/results/<date>-parquet-meta.json).  About 75 s on 2 cores (the
# first time also installs DuckDB into a venv under ~/.cache/trafficdb).
#
#   make bench-parquet                     # or bench/trails_parquet.sh
#   TRAIL_WRITE_ARGS="..." make bench-parquet   # extra writer arguments
set -euo pipefail
. "$(dirname "$0")/lib.sh"

RUNS=${TRAIL_RUNS:-3}
TMO=${TRAIL_TIMEOUT:-300}
DUCKDB_VERSION=1.5.5
# shellcheck disable=SC2206 # extra writer arguments, split on spaces
WRITE_ARGS=(${TRAIL_WRITE_ARGS:-})
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
	[ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null || true
	[ -f "$work/pg/PG_VERSION" ] && as_pg "$PG_BIN/pg_ctl" -D "$work/pg" stop -m fast -w >/dev/null 2>&1 || true
	scripts/minio.sh stop "$work/minio" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }

scripts/minio.sh start "$work/minio" >/dev/null
. "$work/minio/env"
export AWS_ACCESS_KEY_ID=$MINIO_ROOT_USER AWS_SECRET_ACCESS_KEY=$MINIO_ROOT_PASSWORD AWS_ENDPOINT_URL=$MINIO_ENDPOINT
tools/trafficdb-trail mb s3://parquet >/dev/null
sed -i '/^parquet,/d' "$BENCH_CSV"

progress "generating the flight-shaped set; writing trail files${WRITE_ARGS[*]:+ (${WRITE_ARGS[*]})}"
timeout "$TMO" "$PY" bench/trails_parquet.py gen-flights "$work/flights.csv" 20261126
declare -A csv=([ais_us]=data/cache/ais/us_coastal_2020_06_30.csv
	[ais_nyh_week]=data/cache/ais/nyharbor_2020_12_first_week.csv
	[ais_nyh_1h]=data/cache/ais/nyharbor_2020_06_30_first_hour.csv
	[flights]=$work/flights.csv)
declare -A idc=([ais_us]=mmsi [ais_nyh_week]=mmsi [ais_nyh_1h]=mmsi [flights]=callsign)
declare -A tbytes
sets="ais_us ais_nyh_week ais_nyh_1h flights"
for f in $sets; do
	timeout "$TMO" tools/trafficdb-trail write "$work/$f.trail" --id "${idc[$f]}" --time ts "${WRITE_ARGS[@]}" <"${csv[$f]}" 2>/dev/null
	timeout "$TMO" bench/trailbench put "$work/$f.trail" "s3://parquet/$f.trail" >/dev/null
	tbytes[$f]=$(stat -c %s "$work/$f.trail")
	progress "$f.trail: ${tbytes[$f]} bytes uploaded"
done

progress "the counting proxy and a throwaway cluster"
pport=$(free_port)
cport=$(free_port)
"$PY" bench/trails_parquet.py proxy "$pport" "${MINIO_ENDPOINT##*:}" "$cport" &
proxy_pid=$!
make_pg_dir "$work/pg"
make_pg_dir "$work/caches"
as_pg "$PG_BIN/initdb" -D "$work/pg" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$work/initdb.log" ||
	{ cat "$work/initdb.log"; die "initdb failed"; }
port=$(free_port)
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
	for s in 16kB:s16k 1MB:s1m; do
		echo "CREATE SERVER ${s#*:} FOREIGN DATA WRAPPER trafficdb_trails OPTIONS (endpoint 'http://127.0.0.1:$pport',"
		echo "  region 'us-east-1', block_size '${s%:*}', cache_dir '$work/caches/none-yet');"
		echo "CREATE USER MAPPING FOR CURRENT_USER SERVER ${s#*:} OPTIONS (access_key :'ak', secret_key :'sk');"
		echo "CREATE SCHEMA ${s#*:};"
		for f in $sets; do echo "IMPORT FOREIGN SCHEMA \"s3://parquet/$f.trail\" FROM SERVER ${s#*:} INTO ${s#*:};"; done
	done
} | timeout "$TMO" "${PSQL[@]}" -v ak="$MINIO_ROOT_USER" -v sk="$MINIO_ROOT_PASSWORD"

progress "Parquet with DuckDB, then the queries ($RUNS cold runs each side)"
ais_cols='[["mmsi","BIGINT"],["ts","TIMESTAMP"],["lon","DOUBLE"],["lat","DOUBLE"],["segment","VARCHAR"]]'
h1_cols='[["mmsi","BIGINT"],["ts","TIMESTAMP"],["lon","DOUBLE"],["lat","DOUBLE"],["sog","DOUBLE"],["cog","DOUBLE"],["heading","DOUBLE"],["vessel_name","VARCHAR"],["vessel_type","DOUBLE"],["status","DOUBLE"],["length","DOUBLE"],["width","DOUBLE"],["draft","DOUBLE"]]'
fl_cols='[["callsign","VARCHAR"],["ts","TIMESTAMP"],["lon","DOUBLE"],["lat","DOUBLE"],["altitude","INTEGER"],["ground_speed","DOUBLE"],["track","DOUBLE"],["vertical_rate","INTEGER"],["squawk","VARCHAR"],["on_ground","BOOLEAN"]]'
umask 077	# the config holds MinIO's credentials
cat >"$work/config.json" <<EOF
{"work": "$work", "out": "$work/results.tsv", "meta": "$work/meta.json", "runs": $RUNS,
 "bucket": "parquet", "put": "bench/trailbench", "key": "$MINIO_ROOT_USER", "secret": "$MINIO_ROOT_PASSWORD",
 "proxy_port": $pport, "proxy_control": $cport, "pg_port": $port, "pg_db": "postgres",
 "cache_root": "$work/caches", "servers": [[16384, "s16k"], [1048576, "s1m"]],
 "datasets": [
  {"name": "ais_us", "csv": "${csv[ais_us]}", "id": "mmsi", "columns": $ais_cols, "extra": ["segment"], "q5": "lat", "trail_bytes": ${tbytes[ais_us]}},
  {"name": "ais_nyh_week", "csv": "${csv[ais_nyh_week]}", "id": "mmsi", "columns": $ais_cols, "extra": ["segment"], "q5": "lat", "trail_bytes": ${tbytes[ais_nyh_week]}},
  {"name": "ais_nyh_1h", "csv": "${csv[ais_nyh_1h]}", "id": "mmsi", "columns": $h1_cols,
   "extra": ["sog","cog","heading","vessel_name","vessel_type","status","length","width","draft"], "q5": "sog", "trail_bytes": ${tbytes[ais_nyh_1h]}},
  {"name": "flights", "csv": "${csv[flights]}", "id": "callsign", "columns": $fl_cols, "tsformat": "%Y-%m-%dT%H:%M:%S.%gZ",
   "extra": ["altitude","ground_speed","track","vertical_rate","squawk","on_ground"], "q5": "altitude", "airport": [2.5479, 49.0097],
   "trail_bytes": ${tbytes[flights]}}]}
EOF
umask 022
timeout 1200 "$PY" bench/trails_parquet.py bench "$work/config.json" ||
	die "bench/trails_parquet: the measurement failed (see above)"
mkdir -p "$(dirname "$META")"
cp "$work/meta.json" "$META"

# the CSV rows, then the readable table
declare -A d_ms d_bytes d_req
while IFS=$'\t' read -r set q side rows ms body total req; do
	name=${set}_${q%%_*}
	if [ "$side" = duckdb ]; then
		d_ms[$name]=$ms d_bytes[$name]=$body d_req[$name]=$req
		bench_emit parquet "${name}_rows" 0 "$rows" rows >/dev/null
		bench_emit parquet "${name}_duckdb_ms" 0 "$ms" ms >/dev/null
		bench_emit parquet "${name}_duckdb_bytes" 0 "$body" B >/dev/null
		bench_emit parquet "${name}_duckdb_bytes_with_headers" 0 "$total" B >/dev/null
		bench_emit parquet "${name}_duckdb_requests" 0 "$req" requests >/dev/null
	else
		bs=${side#trail_} suffix=
		case $bs in *_nocache) bs=${bs%_nocache} suffix=_nocache ;; esac
		bench_emit parquet "${name}${suffix}_ms" "$bs" "$ms" ms duckdb_parquet "${d_ms[$name]}" >/dev/null
		bench_emit parquet "${name}${suffix}_bytes" "$bs" "$body" B duckdb_parquet "${d_bytes[$name]}" >/dev/null
		bench_emit parquet "${name}${suffix}_bytes_with_headers" "$bs" "$total" B >/dev/null
		bench_emit parquet "${name}${suffix}_requests" "$bs" "$req" requests duckdb_parquet "${d_req[$name]}" >/dev/null
	fi
done <"$work/results.tsv"

"$PY" - "$work/results.tsv" "$work/meta.json" <<'EOF'
import json, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
meta = json.load(open(sys.argv[2]))
print(f"\nTrail files (trail FDW) vs DuckDB {meta['duckdb']} on sorted Parquet, same MinIO, cold, medians;"
      " bytes = response bodies from MinIO; x = ours / DuckDB")
for name, m in meta["datasets"].items():
    print(f"\n{name}: trail {m['trail_bytes']:,} B; Parquet {m['parquet_bytes']:,} B "
          f"({m['row_groups']} row groups of {m['row_group_rows'][0]:,} rows, {'/'.join(m['compression'])})")
    print("| query | rows | side | ms | bytes from MinIO | requests |")
    print("|---|---:|---|---:|---:|---:|")
    for q in m["queries"]:
        r = {s: (float(ms), int(b), int(req), n) for st, qq, s, n, ms, b, t, req in rows if st == name and qq == q}
        d = r["duckdb"]
        for s, label in (("duckdb", "DuckDB, Parquet"), ("trail_16384", "trail 16 kB"),
                         ("trail_16384_nocache", "trail 16 kB, no disk cache"), ("trail_1048576", "trail 1 MB"),
                         ("trail_1048576_nocache", "trail 1 MB, no disk cache")):
            o = r[s]
            x = "" if s == "duckdb" else " (%.2fx)"
            print(f"| {q if s == 'duckdb' else ''} | {d[3] if s == 'duckdb' else ''} | {label} | "
                  f"{o[0]:.0f}{x % (o[0] / d[0]) if x else ''} | "
                  f"{o[1]:,}{x % (o[1] / d[1]) if x and d[1] else ''} | {o[2]} |")
EOF
progress "done (details: $META)"
