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
# uploaded to one bucket).  Layouts, TRAIL_LAYOUTS (default "trail st st1800"):
#   trail   the writer's default (format version 3, pages by trail)
#   st      --order space-time (version 3, the default 600 s buckets)
#   stN     --order space-time --bucket-seconds N
#   v1      --format-version 1 (by trail)
#   v2      --format-version 2 (by trail; its footer is read whole)
# Data sets (TRAIL_SETS, default all four):
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
#   flightsN      (N from 2 to 100, not in the default list) the flight set N
#                 times, copy k's callsigns suffixed -k and its reports k days
#                 later: a file N times larger of the same shape, to see which
#                 costs grow with the file (flights18: 7.9 M reports, 5,400 flights)
# Queries, all columns unless said (constants picked from the data by the
# helper: see the log line "params"):
#   q1 one trail (the id of median length), q2 a 5-minute window from the
#   middle of the span, q3 a 0.2 x 0.2 degree box, q4 a 3 km radius
#   (PostGIS: ST_DWithin on geography; DuckDB: a lon/lat bbox prefilter and
#   ST_Distance_Spheroid), both around CDG for flights and the busiest
#   0.1-degree cell for AIS, q5 max per id (flights: altitude; ais_nyh_1h:
#   sog; the other AIS files have no speed: lat, which our side reads from
#   a lat column added to the imported table), q6 count(*), q7 id, time,
#   lon and lat only (a map's query) in q2's 5 minutes.  Our side's plan
#   of each query (EXPLAIN ANALYZE VERBOSE, one more cold run) goes to the
#   meta file; q5 and q6 must show "Aggregates From Footer" on version-2
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
# decimals) must match DuckDB's, or the bench fails.  Our side at two
# block sizes, 16 kB and 1 MB (the default), for each layout, cold with a
# fresh disk cache (the server's default) and cold with none (cache_dir
# 'none'; measure suffix _nocache; TRAIL_NOCACHE=0 leaves these runs out).
#
# Figures go to bench/lib.sh's CSV, section "parquet" (rows of an earlier
# run in the same CSV are replaced): measure <set>_<query>_<layout>[_nocache]_
# {ms,bytes,requests}, x = our block size, baseline duckdb_parquet (ratio
# < 1: fewer bytes or faster than DuckDB), and <...>_engine_ms (baseline
# DuckDB's engine ms), <...>_engine_plan_ms, <...>_engine_bytes; DuckDB's own figures
# (<set>_<query>_duckdb_..., _duckdb_engine_ms, <set>_<query>_rows) at x = 0.  The
# readable table goes to stdout; details (row groups, compression, ranges
# each side fetched) to $TRAIL_PARQUET_META (default
# bench/results/<date>-parquet-meta.json).  About 75 s on 2 cores (the
# first time also installs DuckDB into a venv under ~/.cache/trafficdb).
#
#   make bench-parquet                     # or bench/trails_parquet.sh
#   TRAIL_WRITE_ARGS="..." make bench-parquet   # extra writer arguments (every layout)
#   TRAIL_LAYOUTS="trail st300 st st1800" TRAIL_SETS=flights make bench-parquet
set -euo pipefail
. "$(dirname "$0")/lib.sh"

RUNS=${TRAIL_RUNS:-3}
TMO=${TRAIL_TIMEOUT:-300}
DUCKDB_VERSION=1.5.5
# shellcheck disable=SC2206 # extra writer arguments, split on spaces
WRITE_ARGS=(${TRAIL_WRITE_ARGS:-})
read -r -a LAYOUTS <<<"${TRAIL_LAYOUTS:-trail st st1800}"
NOCACHE=${TRAIL_NOCACHE:-1}
layout_args() {	# the writer's arguments for a layout name
	case $1 in
	trail) ;;
	st) echo "--order space-time" ;;
	st[0-9]*) echo "--order space-time --bucket-seconds ${1#st}" ;;
	v1) echo "--format-version 1" ;;
	v2) echo "--format-version 2" ;;
	*) die "TRAIL_LAYOUTS: unknown layout $1 (trail, st, stN, v1, v2)" ;;
	esac
}
layout_label() {
	case $1 in
	trail) echo "v3 by trail" ;;
	st) echo "v3 space-time 600 s" ;;
	st[0-9]*) echo "v3 space-time ${1#st} s" ;;
	v1) echo "v1 by trail" ;;
	v2) echo "v2 by trail" ;;
	esac
}
for l in "${LAYOUTS[@]}"; do layout_args "$l" >/dev/null; done
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
# TDB_BENCH_PORTS="FIRST LAST": the proxy, its control port and the cluster listen on
# ports of this range (MinIO: TDB_MINIO_PORTS); else on any free ones
bench_port() {	# bench_port K: the (K+1)-th free port of the range
	local first last p k=$1
	[ -n "${TDB_BENCH_PORTS:-}" ] || { free_port; return 0; }
	read -r first last <<<"$TDB_BENCH_PORTS"
	for p in $(seq "$first" "$last"); do
		port_in_use "$p" && continue
		[ "$k" -eq 0 ] && { echo "$p"; return 0; }
		k=$((k - 1))
	done
	die "TDB_BENCH_PORTS=\"$TDB_BENCH_PORTS\": fewer than $(($1 + 1)) free ports"
}

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
declare -A tbytes tpages
sets=${TRAIL_SETS:-ais_us ais_nyh_week ais_nyh_1h flights}
# flightsN (N from 2 to 100): the flight set N times, ids and days shifted (a file N times larger)
for f in $sets; do
	case $f in
	flights[0-9]*)
		n=${f#flights}
		[[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 2 ] && [ "$n" -le 100 ] ||
			die "TRAIL_SETS: $f: expected flightsN with N from 2 to 100"
		progress "generating $f (the flight set x$n)"
		timeout "$TMO" "$PY" bench/trails_parquet.py gen-flights "$work/$f.csv" 20261126 "$n"
		csv[$f]=$work/$f.csv idc[$f]=callsign
		;;
	esac
done
for f in $sets; do
	[ -n "${idc[$f]:-}" ] || die "TRAIL_SETS: unknown data set $f"
	tbytes[$f]= tpages[$f]=
	for l in "${LAYOUTS[@]}"; do
		# shellcheck disable=SC2046 # the layout's arguments, split on spaces
		timeout "$TMO" tools/trafficdb-trail write "$work/$f.$l.trail" --id "${idc[$f]}" --time ts \
			$(layout_args "$l") "${WRITE_ARGS[@]}" <"${csv[$f]}" 2>/dev/null
		timeout "$TMO" bench/trailbench put "$work/$f.$l.trail" "s3://parquet/$f.$l.trail" >/dev/null
		b=$(stat -c %s "$work/$f.$l.trail")
		n=$(tools/trafficdb-trail info "$work/$f.$l.trail" | sed -n 's/^pages: *//p')
		tbytes[$f]+="${tbytes[$f]:+, }\"$l\": $b" tpages[$f]+="${tpages[$f]:+, }\"$l\": $n"
		progress "$f.$l.trail: $b bytes, $n pages, uploaded"
	done
done

progress "the counting proxy and a throwaway cluster"
pport=$(bench_port 0)
cport=$(bench_port 1)
"$PY" bench/trails_parquet.py proxy "$pport" "${MINIO_ENDPOINT##*:}" "$cport" &
proxy_pid=$!
make_pg_dir "$work/pg"
make_pg_dir "$work/caches"
as_pg "$PG_BIN/initdb" -D "$work/pg" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$work/initdb.log" ||
	{ cat "$work/initdb.log"; die "initdb failed"; }
port=$(bench_port 2)
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
umask 077	# the config holds MinIO's credentials
cat >"$work/config.json" <<EOF
{"work": "$work", "out": "$work/results.tsv", "meta": "$work/meta.json", "runs": $RUNS,
 "bucket": "parquet", "put": "bench/trailbench", "key": "$MINIO_ROOT_USER", "secret": "$MINIO_ROOT_PASSWORD",
 "proxy_port": $pport, "proxy_control": $cport, "pg_port": $port, "pg_db": "postgres",
 "cache_root": "$work/caches", "servers": [[16384, "s16k"], [1048576, "s1m"]], "nocache": $NOCACHE,
 "sets": "$sets", "layouts": [$(for l in "${LAYOUTS[@]}"; do printf '%s["%s", "%s"]' "${sep:-}" "$l" "$(layout_label "$l")"; sep=", "; done)],
 "datasets": [
  {"name": "ais_us", "csv": "${csv[ais_us]}", "id": "mmsi", "columns": $ais_cols, "extra": ["segment"], "q5": "lat", "trail_bytes": {${tbytes[ais_us]:-}}, "trail_pages": {${tpages[ais_us]:-}}},
  {"name": "ais_nyh_week", "csv": "${csv[ais_nyh_week]}", "id": "mmsi", "columns": $ais_cols, "extra": ["segment"], "q5": "lat", "trail_bytes": {${tbytes[ais_nyh_week]:-}}, "trail_pages": {${tpages[ais_nyh_week]:-}}},
  {"name": "ais_nyh_1h", "csv": "${csv[ais_nyh_1h]}", "id": "mmsi", "columns": $h1_cols,
   "extra": ["sog","cog","heading","vessel_name","vessel_type","status","length","width","draft"], "q5": "sog", "trail_bytes": {${tbytes[ais_nyh_1h]:-}}, "trail_pages": {${tpages[ais_nyh_1h]:-}}},
  {"name": "flights", "csv": "${csv[flights]}", "id": "callsign", "columns": $fl_cols, "tsformat": "%Y-%m-%dT%H:%M:%S.%gZ",
   "extra": ["altitude","ground_speed","track","vertical_rate","squawk","on_ground"], "q5": "altitude", "airport": [2.5479, 49.0097],
   "trail_bytes": {${tbytes[flights]:-}}, "trail_pages": {${tpages[flights]:-}}}$(
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
declare -A d_ms d_bytes d_req d_ems
while IFS=$'\t' read -r set q side rows ms body total req ems eplan ebody ereq erows; do
	name=${set}_${q%%_*}
	if [ "$side" = duckdb ]; then
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
	fi
done <"$work/results.tsv"

"$PY" - "$work/results.tsv" "$work/meta.json" <<'EOF'
import json, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
meta = json.load(open(sys.argv[2]))
print(f"\nTrail files (trail FDW) vs DuckDB {meta['duckdb']} on sorted Parquet, same MinIO, cold, medians;"
      " bytes = response bodies from MinIO; x = ours / DuckDB")
for name, m in meta["datasets"].items():
    lays = m["layouts"]
    print(f"\n### {name}\n")
    print(f"Parquet {m['parquet_bytes']:,} B ({m['row_groups']} row groups of {m['row_group_rows'][0]:,} rows, "
          f"{'/'.join(m['compression'])}); " + "; ".join(
              f"{lab} {m['trail_bytes'][l]:,} B ({m['trail_bytes'][l] / m['parquet_bytes']:.2f}x), "
              f"{m['trail_pages'][l]:,} pages" for l, lab in lays.items()))
    nc = any(s.endswith("_nocache") for st, qq, s, *_ in rows if st == name)
    print("\n| query | rows | side | ms | " + ("ms, no disk cache | " if nc else "") + "engine ms | "
          + ("engine ms, no disk cache | " if nc else "") + "planning ms | bytes from MinIO | requests |")
    print("|---|---:|---|---:|" + ("---:|" if nc else "") + "---:|" + ("---:|" if nc else "") + "---:|---:|---:|")
    def eng(o, d):    # engine ms (x DuckDB's engine ms); * when EXPLAIN ANALYZE fetched other bytes than the query
        x = "" if d is None else f" ({o[4] / d[4]:.2f}x)" if d[4] > 0 else " (-)"
        return f"{o[4]:.1f}{x}{'*' if o[6] != o[1] else ''}"
    for q in m["queries"]:
        r = {s: (float(ms), int(b), int(req), n, float(ems), eplan, int(eb))
             for st, qq, s, n, ms, b, t, req, ems, eplan, eb, *_ in rows if st == name and qq == q}
        d = r["duckdb"]
        print(f"| {q} | {d[3]} | DuckDB, Parquet | {d[0]:.0f} | " + ("| " if nc else "") + f"{eng(d, None)} | "
              + ("| " if nc else "") + f"| {d[1]:,} | {d[2]} |")
        for s in (s for s in r if s.startswith("trail_") and not s.endswith("_nocache")):
            lay, bs = s[len("trail_"):].rsplit("_", 1)
            label = f"{lays[lay]}, {'16 kB' if bs == '16384' else '1 MB' if bs == '1048576' else bs + ' B'}"
            o = r[s]
            xb = f" ({o[1] / d[1]:.2f}x)" if d[1] else ""
            o2 = r.get(s + "_nocache")
            c2 = (f"{o2[0]:.0f} ({o2[0] / d[0]:.2f}x) | " if o2 else "| ") if nc else ""
            e2 = (f"{eng(o2, d)} | " if o2 else "| ") if nc else ""
            print(f"|  |  | {label} | {o[0]:.0f} ({o[0] / d[0]:.2f}x) | {c2}{eng(o, d)} | {e2}{float(o[5]):.1f} | "
                  f"{o[1]:,}{xb} | {o[2]} |")
EOF
progress "done (details: $META)"
