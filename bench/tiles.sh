#!/usr/bin/env bash
# bench/tiles.sh: vector tiles encoded in C (trafficdb.tile_mvt) served by
# Martin, beside the baselines (make bench-tiles; issue 30, docs/design-tiles.md
# section 6).
#
#   bench/tiles.sh            the full run (about 70 min on 2 cores)
#   bench/tiles.sh --quick    a smoke run: 1 s cells, 1 round, zooms 10 13 16,
#                             a 100,000-segment synthetic map (about 4 min)
#
# On each map (the demo's Helsinki roads, the real Delaware network and a
# synthetic network of TILES_SEGMENTS segments), traffic fed to every location
# and published, then copied to a heap table with GiST:
#
#  1. tiles/s, p50 and p99 latency and mean bytes per tile, through HTTP with
#     oha (TILES_CLIENTS concurrent keep-alive connections, TILES_SECONDS a
#     cell), for zooms TILES_ZOOMS, the tiles that hold roads (at most 400 a
#     zoom, bench_road_tiles) in one URL file per server and zoom, from
#       martin_mvt   Martin + trafficdb.tile_mvt_web (tile_mvt with its default options)
#       martin_heap  Martin + bench.tile_heap(z, x, y): ST_AsMVT over the heap
#                    copy with GiST, same layer, attributes, extent and buffer
#       tipg         tipg as the page used it before Martin (web/app.py,
#                    trafficdb.tile_features, one uvicorn worker)
#     TILES_ROUNDS rounds (median), the servers taking turns in each;
#  2. the same tiles in SQL alone: one statement over the zoom's tiles (the
#     server's time per tile), and pgbench (2 clients, prepared), a random
#     tile of the list a transaction, tile_mvt vs tile_heap;
# then on Helsinki:
#  3. the 304 check: every tile of the lists (and the tiles of one road) from
#     Martin + tile_mvt, their ETags kept; a change to that road through the
#     SQL write path (trafficdb.feed, publish()); every tile fetched again with
#     If-None-Match: the tiles holding the road must be 200, all others 304;
#  4. publish() to the page's repainted tile in headless chromium
#     (web/bench/repaint.mjs, TILES_RUNS runs) with the demo's feeder running,
#     the page taking its tiles from Martin + tile_mvt, from tipg + the heap
#     (public.bench_heap_tile_features) and from tipg + tile_features.
#
# Runs on the demo cluster (bench/lib.sh's bench_cluster; BENCH_PORT and
# BENCH_DB name another, with the demo's roads table); the demo's feeder is
# paused meanwhile and its map loaded back at the end.  Martin connects as the
# web role (trafficdb_web, web/role.sql).  Writes bench/results/<date>-tiles.csv
# (-tiles-quick.csv), every oha cell in <date>-tiles.json, and the report and
# plots through bench/report.py.  Exit status 1 when the 304 check failed.
#
# Tools: oha 1.16.0 (TDB_OHA, else scripts/oha.sh path, else
# ~/.cache/trafficdb/oha-1.16.0/bin/oha), Martin 1.14.0 (TDB_MARTIN, else
# scripts/martin.sh path, else /var/tmp/martin-build/root/bin/martin).
# Ports: TDB_MARTIN_PORTS and TDB_WEB_PORTS ("FIRST LAST"), else free ones.
set -euo pipefail
QUICK=0
[ "${1:-}" = --quick ] && QUICK=1
if [ "$QUICK" = 1 ]; then
	: "${TILES_SECONDS:=1}" "${TILES_ROUNDS:=1}" "${TILES_ZOOMS:=10 13 16}" "${TILES_SEGMENTS:=100000}" "${TILES_RUNS:=6}"
fi
T=${TILES_SECONDS:-5}
ROUNDS=${TILES_ROUNDS:-3}
ZOOMS=${TILES_ZOOMS:-10 11 12 13 14 15 16}
CLIENTS=${TILES_CLIENTS:-1 2 8}
MAPS=${TILES_MAPS:-helsinki delaware synthetic}
SEGMENTS=${TILES_SEGMENTS:-1000000}
RUNS=${TILES_RUNS:-20}
SERVERS=(martin_mvt martin_heap tipg)
root=$(cd "$(dirname "$0")/.." && pwd)
day=$(date -u +%Y-%m-%d)
if [ -z "${BENCH_CSV:-}" ]; then
	BENCH_CSV=$root/bench/results/$day-tiles$([ "$QUICK" = 1 ] && echo -quick || true).csv
	rm -f "$BENCH_CSV"	# one run, one file
fi
. "$(dirname "$0")/lib.sh"
json=${BENCH_CSV%.csv}.json
start=$(date +%s)

bench_cluster
"${PSQL[@]}" -Atc "SELECT to_regprocedure('trafficdb.tile_mvt(integer, integer, integer, jsonb)') IS NOT NULL" | grep -qx t ||
	die "bench/tiles.sh: trafficdb.tile_mvt is missing on 127.0.0.1:$port (install the extension of this checkout: make install)"
bench_deps gnuplot-nox	# the plots
scripts/web-setup.sh
VENV=${TDB_WEB_VENV:-$TDB_ROOT/.venv-web}
command -v chromium >/dev/null || die "chromium is missing: scripts/deps.sh installs it"

# tool FROM_ENV SCRIPT FALLBACK: the pinned binary of a tool
tool() {
	if [ -n "$1" ]; then echo "$1"
	elif [ -x "scripts/$2" ]; then "scripts/$2" path
	else echo "$3"; fi
}
OHA=$(tool "${TDB_OHA:-}" oha.sh "${XDG_CACHE_HOME:-$HOME/.cache}/trafficdb/oha-1.16.0/bin/oha")
MARTIN=$(tool "${TDB_MARTIN:-}" martin.sh /var/tmp/martin-build/root/bin/martin)
[ -x "$OHA" ] || die "bench/tiles.sh: oha not found at $OHA (TDB_OHA names it)"
[ -x "$MARTIN" ] || die "bench/tiles.sh: martin not found at $MARTIN (TDB_MARTIN names it)"
echo "tiles: $("$OHA" --version | head -1), $("$MARTIN" --version), cluster 127.0.0.1:$port database $DB" >&2

work=$TDB_ROOT/bench/work/tiles
rm -rf "$work"
mkdir -p "$work"
: >"$work/cells.jsonl"
dburl="postgresql://postgres@127.0.0.1:$port/$DB"
bench_feeder_pause
finish() {
	stop_pidfile "$work/feeder.pid"
	stop_pidfile "$work/martin.pid"
	scripts/web.sh stop "$work/web" >/dev/null 2>&1 || true
	bench_feeder_resume
}
trap finish EXIT

# ---- the map, its traffic and the heap copy --------------------------------

# load_map NAME: the map measured next, with traffic on every location
# (seeded: speeds, congestion and an incident on one in fifty), published
load_map() {
	case $1 in
	helsinki) bench_restore_map ;;
	delaware) bench_load_delaware bench_delaware ;;
	synthetic)
		bench_synthetic_roads bench_synthetic "$SEGMENTS"
		"${PSQL[@]}" -c "SELECT trafficdb.load_map('bench_synthetic', 'id', 'geom', 'highway', 'name')" >/dev/null ;;
	*) die "bench/tiles.sh: unknown map $1 (helsinki, delaware or synthetic)" ;;
	esac
	"${PSQL[@]}" -c "INSERT INTO trafficdb.feed (location_id, speed_kmh, free_flow_kmh, congestion, incident)
		SELECT location_id, 10 + h % 80, 90, h % 5, CASE WHEN h % 50 = 0 THEN 'bench: lane closed' END
		  FROM (SELECT location_id, abs(hashint8(location_id)) % 1000 AS h FROM trafficdb.locations) s" \
		-c "SELECT trafficdb.publish()" >/dev/null
	heap_copy
}

# The baseline of Martin + tile_mvt: the same rows in a heap table with GiST
# (bench.locations_heap) and bench.tile_heap(z, x, y), docs/design-tiles.md
# section 5's reference: the same layer, attributes in the same order, extent
# 4096, buffer 64, prefiltered by the buffered tile box in 4326.  The web role
# (Martin's) may read and execute them.
heap_copy() {
	"${PSQL[@]}" <<-'EOSQL'
	SET client_min_messages = warning;
	CREATE SCHEMA IF NOT EXISTS bench;
	DROP TABLE IF EXISTS bench.locations_heap CASCADE;
	CREATE TABLE bench.locations_heap AS
	  SELECT location_id, name, road_class, speed_kmh, free_flow_kmh, congestion, incident, changed_generation, geom
	    FROM trafficdb.locations;
	CREATE INDEX ON bench.locations_heap USING gist (geom);
	ANALYZE bench.locations_heap;
	CREATE OR REPLACE FUNCTION bench.tile_heap(z integer, x integer, y integer) RETURNS bytea
	LANGUAGE sql STABLE PARALLEL SAFE AS $$
	  SELECT coalesce(ST_AsMVT(t, 'traffic', 4096, 'geom', 'location_id'), ''::bytea) FROM (
	    SELECT location_id, name, road_class, speed_kmh, free_flow_kmh, congestion, incident, changed_generation,
	           ST_AsMVTGeom(ST_Transform(geom, 3857), ST_TileEnvelope(z, x, y), 4096, 64, true) AS geom
	      FROM bench.locations_heap
	     WHERE geom && ST_Transform(ST_TileEnvelope(z, x, y, margin => 64.0 / 4096), 4326)) t
	$$;
	GRANT USAGE ON SCHEMA bench TO trafficdb_web;
	GRANT SELECT ON bench.locations_heap TO trafficdb_web;
	GRANT EXECUTE ON FUNCTION bench.tile_heap(integer, integer, integer) TO trafficdb_web;
	EOSQL
}

# ---- the servers -------------------------------------------------------------

# the web role: web/role.sql's, or a bare one when the cluster has none
# (its trail grants need the demo's MinIO)
"${PSQL[@]}" -c "SET client_min_messages = warning" -c "DO \$\$ BEGIN
	IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'trafficdb_web') THEN CREATE ROLE trafficdb_web LOGIN; END IF; END \$\$"
load_map helsinki
bench_heap_tile_features	# tipg + heap, for the page (section 4)

TIPG_DB_SCHEMAS='["trafficdb", "public"]' \
	TIPG_DB_FUNCTIONS='["trafficdb.tile_features", "public.bench_heap_tile_features"]' \
	TIPG_DB_EXCLUDE_TABLE_SCHEMAS='["trafficdb", "public", "bench"]' \
	scripts/web.sh start "$work/web" "$dburl" 2>/dev/null
web_port=$(cat "$work/web/web.port")
base="http://127.0.0.1:$web_port"

# Martin: no tile cache (every request reaches the function), one worker a
# core, a pool as large as the most clients, the web role; CORS for the page
# (Martin cannot bind a port that still has connections in TIME-WAIT: skip those)
martin_port=
if [ -n "${TDB_MARTIN_PORTS:-}" ]; then
	for p in $(seq ${TDB_MARTIN_PORTS}); do
		port_in_use "$p" || [ -n "$(ss -Htan "( sport = :$p )" 2>/dev/null)" ] || { martin_port=$p; break; }
	done
	[ -n "$martin_port" ] || die "no free TCP port for Martin in $TDB_MARTIN_PORTS"
else
	martin_port=$(free_port)
fi
cat >"$work/martin.yaml" <<EOF
listen_addresses: 127.0.0.1:$martin_port
worker_processes: $(nproc)
cache_size_mb: 0
cors:
  origin:
    - $base
postgres:
  connection_string: postgresql://trafficdb_web@127.0.0.1:$port/$DB
  pool_size: $(printf '%s\n' $CLIENTS 4 | sort -n | tail -1)
  auto_publish: false
  functions:
    traffic:
      schema: trafficdb
      function: tile_mvt_web
      minzoom: 0
      maxzoom: 30
    heap:
      schema: bench
      function: tile_heap
      minzoom: 0
      maxzoom: 30
EOF
nohup "$MARTIN" --config "$work/martin.yaml" >"$work/martin.log" 2>&1 </dev/null &
echo $! >"$work/martin.pid"
mbase="http://127.0.0.1:$martin_port"
for _ in $(seq 1 120); do	# bounded: 60 s
	curl -fs -o /dev/null "$mbase/health" && break
	kill -0 "$(cat "$work/martin.pid")" 2>/dev/null || { tail -n 20 "$work/martin.log" >&2; die "martin exited (log: $work/martin.log)"; }
	sleep 0.5
done
curl -fs -o /dev/null "$mbase/health" || die "martin is not answering after 60 s (log: $work/martin.log)"

# url SERVER: the tile URL prefix of a server (then z/x/y)
url() {
	case $1 in
	martin_mvt) echo "$mbase/traffic" ;;
	martin_heap) echo "$mbase/heap" ;;
	tipg) echo "$base/collections/trafficdb.tile_features/tiles/WebMercatorQuad" ;;
	esac
}

# ---- 1 and 2: tiles/s -------------------------------------------------------

# oha_cell MAP Z CLIENTS SERVER ROUND SECONDS: one oha run over the zoom's URL
# file; prints "tiles/s p50_ms p99_ms bytes_per_tile" and keeps the cell in
# cells.jsonl.  Every answer must be 200 (or 204, an empty tile).
oha_cell() {
	local out=$work/oha-$1-z$2-c$3-$4-r$5.json
	# no compression (the tile functions are compared, and their bytes); the
	# requests under way at the deadline are waited for, not aborted
	"$OHA" --no-tui --output-format json -z "${6}s" -c "$3" --disable-compression -w \
		--urls-from-file "$work/$1-z$2-$4.urls" >"$out" 2>"$work/oha.err" ||
		{ cat "$work/oha.err" >&2; die "oha failed ($1 z$2 $3 clients $4)"; }
	python3 - "$out" "$1" "$2" "$3" "$4" "$5" "$work/cells.jsonl" <<-'EOF'
	import json, sys
	path, m, z, c, s, r, cells = sys.argv[1:]
	d = json.load(open(path))
	codes = d.get("statusCodeDistribution", {})
	bad = {k: v for k, v in codes.items() if k not in ("200", "204")}
	if bad or d.get("errorDistribution"):
	    sys.exit(f"{s} {m} z{z}: answers {codes}, errors {d.get('errorDistribution')}")
	su, lp, n = d["summary"], d["latencyPercentiles"], sum(codes.values())
	if not n:
	    sys.exit(f"{s} {m} z{z}: no answer")
	cell = {"map": m, "zoom": int(z), "clients": int(c), "server": s, "round": int(r),
	        "tiles_per_s": round(n / su["total"], 1), "p50_ms": round(lp["p50"] * 1000, 3),
	        "p99_ms": round(lp["p99"] * 1000, 3), "bytes_per_tile": round(su["totalData"] / n),
	        "requests": n, "seconds": round(su["total"], 3), "status": codes}
	open(cells, "a").write(json.dumps(cell) + "\n")
	print(cell["tiles_per_s"], cell["p50_ms"], cell["p99_ms"], cell["bytes_per_tile"])
	EOF
}

# measure MAP: sections 1 and 2 on the loaded map (CSV section tiles_MAP)
measure() {
	local m=$1 z c s r i n sec=tiles_$1 rate p50 p99 bytes order
	for z in $ZOOMS; do
		bench_road_tiles "$z" >"$work/$m-z$z.tiles"
		n=$(wc -l <"$work/$m-z$z.tiles")
		[ "$n" -gt 0 ] || die "no tile of zoom $z holds a road"
		for s in "${SERVERS[@]}"; do
			sed "s|^|$(url "$s")/|" "$work/$m-z$z.tiles" >"$work/$m-z$z-$s.urls"
			oha_cell "$m" "$z" 2 "$s" 0 0.5 >/dev/null	# warm up
		done
		declare -A tps=() lat50=() lat99=() size=()
		for r in $(seq 1 "$ROUNDS"); do
			for c in $CLIENTS; do
				# the servers take turns, the first one changing each round
				for i in 0 1 2; do
					s=${SERVERS[$(((i + r) % 3))]}
					read -r rate p50 p99 bytes < <(oha_cell "$m" "$z" "$c" "$s" "$r" "$T")
					tps[$s,$c]+="$rate " lat50[$s,$c]+="$p50 " lat99[$s,$c]+="$p99 " size[$s,$c]+="$bytes "
				done
			done
		done
		for c in $CLIENTS; do
			for s in "${SERVERS[@]}"; do
				tps[$s,$c]=$(bench_median ${tps[$s,$c]}) lat50[$s,$c]=$(bench_median ${lat50[$s,$c]})
				lat99[$s,$c]=$(bench_median ${lat99[$s,$c]}) size[$s,$c]=$(bench_median ${size[$s,$c]})
			done
			echo "  $m z$z ($n tiles), $c clients: martin_mvt ${tps[martin_mvt,$c]} tiles/s (p50 ${lat50[martin_mvt,$c]} ms), martin_heap ${tps[martin_heap,$c]} (${lat50[martin_heap,$c]} ms), tipg ${tps[tipg,$c]} (${lat50[tipg,$c]} ms)" >&2
			for s in martin_heap tipg; do
				bench_emit "$sec" "z${z}_tiles_per_s" "$c" "${tps[martin_mvt,$c]}" tiles/s "$s" "${tps[$s,$c]}"
				bench_emit "$sec" "z${z}_p50_ms" "$c" "${lat50[martin_mvt,$c]}" ms "$s" "${lat50[$s,$c]}"
				bench_emit "$sec" "z${z}_p99_ms" "$c" "${lat99[martin_mvt,$c]}" ms "$s" "${lat99[$s,$c]}"
			done
		done
		# the mean size of the tiles served (a random sample; exact below)
		c=${CLIENTS%% *}
		for s in martin_heap tipg; do
			bench_emit "$sec" http_bytes_per_tile "$z" "${size[martin_mvt,$c]}" B "$s" "${size[$s,$c]}"
		done
		unset tps lat50 lat99 size
		sql_alone "$m" "$z" "$n"
	done
}

# sql_alone MAP Z N: pgbench, 2 clients, prepared, a random tile of the list
# a transaction, tile_mvt and tile_heap taking turns, medians of the rounds
sql_alone() {
	local m=$1 z=$2 n=$3 f r v secs mvt_bytes heap_bytes
	secs=$(awk -v t="$T" 'BEGIN { printf "%d", (t < 1) ? 1 : t + 0.5 }')	# pgbench counts whole seconds
	awk -F/ '{ print NR "\t" $2 "\t" $3 }' "$work/$m-z$z.tiles" >"$work/tiles.tsv"
	"${PSQL[@]}" -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS bench.tile_list" \
		-c "CREATE TABLE bench.tile_list (i int PRIMARY KEY, x int, y int)" \
		-c "\\copy bench.tile_list FROM '$work/tiles.tsv'"
	declare -A sql=()
	for f in trafficdb.tile_mvt bench.tile_heap; do
		printf '\\set i random(1, %s)\nSELECT length(%s(%s, x, y)) FROM bench.tile_list WHERE i = :i;\n' "$n" "$f" "$z" >"$work/$f.sql"
	done
	for r in $(seq 1 "$ROUNDS"); do
		for f in trafficdb.tile_mvt bench.tile_heap; do
			v=$("$PG_BIN/pgbench" -n -M prepared -c 2 -j 2 -T "$secs" -h 127.0.0.1 -p "$port" -U postgres \
				-f "$work/$f.sql" "$DB" 2>&1 | sed -n 's/^tps = \([0-9]*\.*[0-9]\?\).*/\1/p')
			[ -n "$v" ] || die "pgbench of $f failed ($m z$z)"
			sql[$f]+="$v "
		done
	done
	# the same tiles in one statement each, the servers' own time (no client
	# round trip per tile, which pgbench's figure includes for both sides):
	# every tile of the list once, tile_mvt and tile_heap taking turns
	declare -A batch=()
	for r in $(seq 1 "$ROUNDS"); do
		for f in trafficdb.tile_mvt bench.tile_heap; do
			# (the lengths are summed: an output no one reads is never computed)
			v=$("${PSQL[@]}" -At -c "SELECT round(count(*) / extract(epoch FROM clock_timestamp() - min(t0))::numeric, 1)
				FROM (SELECT clock_timestamp() AS t0) s, LATERAL (SELECT length($f($z, x, y)) AS n FROM bench.tile_list) t
				HAVING sum(t.n) >= 0")
			[ -n "$v" ] || die "the batch of $f failed ($m z$z)"
			batch[$f]+="$v "
		done
	done
	echo "  $m z$z in SQL, one statement: tile_mvt $(bench_median ${batch[trafficdb.tile_mvt]}) tiles/s, tile_heap $(bench_median ${batch[bench.tile_heap]})" >&2
	bench_emit "tiles_$m" sql_batch_tiles_per_s "$z" "$(bench_median ${batch[trafficdb.tile_mvt]})" tiles/s tile_heap "$(bench_median ${batch[bench.tile_heap]})"
	# the exact mean size of the zoom's tiles, each once
	read -r mvt_bytes heap_bytes < <("${PSQL[@]}" -At -F ' ' -c "SELECT round(avg(length(trafficdb.tile_mvt($z, x, y)))),
		round(avg(length(bench.tile_heap($z, x, y)))) FROM bench.tile_list")
	bench_emit "tiles_$m" bytes_per_tile "$z" "$mvt_bytes" B tile_heap "$heap_bytes"
	echo "  $m z$z in SQL (pgbench, 2 clients): tile_mvt $(bench_median ${sql[trafficdb.tile_mvt]}) tiles/s, tile_heap $(bench_median ${sql[bench.tile_heap]})" >&2
	bench_emit "tiles_$m" sql_tiles_per_s "$z" "$(bench_median ${sql[trafficdb.tile_mvt]})" tiles/s tile_heap "$(bench_median ${sql[bench.tile_heap]})"
}

# ---- 3: the 304 check (Helsinki) ---------------------------------------------

etag_check() {
	local road gen urls=$work/etag.urls wrong got200 got304 exp200 total
	# the road: the one nearest the middle of the map
	road=$("${PSQL[@]}" -Atc "SELECT location_id FROM trafficdb.locations,
		(SELECT ST_SetSRID(ST_Centroid(ST_Extent(geom)), 4326) AS c FROM trafficdb.locations) m
		ORDER BY ST_Distance(ST_LineInterpolatePoint(geom, 0.5), m.c), location_id LIMIT 1")
	# the tiles measured, plus the road's own tile at each zoom
	{ cat "$work"/helsinki-z*.tiles; "${PSQL[@]}" -At -c "SELECT format('%s/%s/%s', z,
		floor((ST_X(p) + 180) / 360 * 2 ^ z)::int,
		floor((1 - ln(tan(radians(ST_Y(p))) + 1 / cos(radians(ST_Y(p)))) / pi()) / 2 * 2 ^ z)::int)
		FROM (SELECT ST_LineInterpolatePoint(geom, 0.5) AS p FROM trafficdb.locations WHERE location_id = $road) s,
		     unnest('{$(echo $ZOOMS | tr ' ' ,)}'::int[]) z"; } | sort -u >"$work/etag.tiles"
	sed "s|^|$mbase/traffic/|" "$work/etag.tiles" >"$urls"
	total=$(wc -l <"$urls")
	# the tiles holding the road: where ST_AsMVTGeom keeps a piece of it
	awk -F/ '{ print $1 "\t" $2 "\t" $3 }' "$work/etag.tiles" >"$work/etag.tsv"
	"${PSQL[@]}" -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS bench.etag_tiles" -c "CREATE TABLE bench.etag_tiles (z int, x int, y int)" \
		-c "\\copy bench.etag_tiles FROM '$work/etag.tsv'"
	"${PSQL[@]}" -At -c "SELECT format('$mbase/traffic/%s/%s/%s', t.z, t.x, t.y) FROM bench.etag_tiles t, trafficdb.locations l
		WHERE l.location_id = $road AND ST_AsMVTGeom(ST_Transform(l.geom, 3857), ST_TileEnvelope(t.z, t.x, t.y), 4096, 64, true) IS NOT NULL" |
		sort >"$work/etag.expect200"
	python3 bench/tiles_etag.py fetch "$urls" "$work/etag.tags"
	gen=$("${PSQL[@]}" -Atc "SELECT generation FROM trafficdb.status")
	# the write path: a feed row for the road, then a publication
	"${PSQL[@]}" -c "INSERT INTO trafficdb.feed (location_id, speed_kmh, free_flow_kmh, congestion, incident)
		SELECT $road, 7, 90, 4, 'bench: the 304 check'" -c "SELECT trafficdb.publish()" >/dev/null
	[ "$("${PSQL[@]}" -Atc "SELECT changed_generation > $gen FROM trafficdb.locations WHERE location_id = $road")" = t ] ||
		die "the change to location $road was not published"
	python3 bench/tiles_etag.py refetch "$work/etag.tags" >"$work/etag.status"
	got304=$(awk -F'\t' '$2 == 304' "$work/etag.status" | wc -l)
	got200=$((total - got304))
	exp200=$(wc -l <"$work/etag.expect200")
	# wrong: a tile holding the road that was not fetched again, or another that was
	wrong=$(awk -F'\t' 'NR == FNR { hold[$1] = 1; next } (($1 in hold) && $2 == 304) || (!($1 in hold) && $2 != 304)' \
		"$work/etag.expect200" "$work/etag.status" | tee "$work/etag.wrong" | wc -l)
	echo "  304 check: $total tiles, location $road changed (generation $gen -> $("${PSQL[@]}" -Atc "SELECT generation FROM trafficdb.status")): $got304 answered 304, $got200 200 ($exp200 hold the road), $wrong wrong" >&2
	bench_emit tiles_etag tiles_fetched "$total" "$total" tiles
	bench_emit tiles_etag answered_304 "$total" "$got304" tiles
	bench_emit tiles_etag answered_200 "$total" "$got200" tiles expected_200 "$exp200"
	bench_emit tiles_etag wrong "$total" "$wrong" tiles
	etag_wrong=$wrong
}

# ---- 4: publish to the repainted tile (Helsinki, the feeder running) --------

repaint() {
	local side tiles layer ev rp p90 mn mx ps
	declare -A med=() ninety=()
	nohup "$VENV/bin/python" web/feeder.py "$dburl" >"$work/feeder.log" 2>&1 &
	echo $! >"$work/feeder.pid"
	for side in martin_mvt tipg_heap tipg; do
		case $side in
		martin_mvt) tiles="$mbase/traffic/{z}/{x}/{y}" layer=traffic ;;
		tipg_heap) tiles="$base/collections/public.bench_heap_tile_features/tiles/WebMercatorQuad/{z}/{x}/{y}" layer=bench_heap_tile_features ;;
		tipg) tiles="$(url tipg)/{z}/{x}/{y}" layer=tile_features ;;
		esac
		read -r ev rp p90 mn mx ps < <(LIVEMAP_TILES=$tiles LIVEMAP_SOURCE_LAYER=$layer bench_repaint "$base" "$RUNS" "$work/repaint-$side.txt")
		echo "  repaint, $side: event $ev ms, repainted $rp ms (p90 $p90, min $mn, max $mx; psql itself $ps ms)" >&2
		med[$side]=$rp ninety[$side]=$p90
	done
	stop_pidfile "$work/feeder.pid"
	for side in tipg_heap tipg; do
		bench_emit tiles_repaint publish_to_repaint_p50_ms "$RUNS" "${med[martin_mvt]}" ms "$side" "${med[$side]}"
		bench_emit tiles_repaint publish_to_repaint_p90_ms "$RUNS" "${ninety[martin_mvt]}" ms "$side" "${ninety[$side]}"
	done
}

minutes=$(awk -v m="$(wc -w <<<"$MAPS")" -v z="$(wc -w <<<"$ZOOMS")" -v c="$(wc -w <<<"$CLIENTS")" -v r="$ROUNDS" -v t="$T" \
	'BEGIN { printf "%.0f", m * z * r * (c * 3 + 2) * t / 60 }')
echo "tiles: maps $MAPS; zooms $ZOOMS; clients $CLIENTS; $ROUNDS rounds of $T s a cell: $minutes min of measuring, plus loading and the browser" >&2
etag_wrong=0
for m in $MAPS; do
	echo "tiles: $m" >&2
	[ "$m" = helsinki ] || load_map "$m"
	measure "$m"
	if [ "$m" = helsinki ]; then
		echo "tiles: the 304 check (Martin + tile_mvt)" >&2
		etag_check
		echo "tiles: publish() to the repainted tile, $RUNS runs a side, the feeder running" >&2
		repaint
	fi
done
bench_restore_map
"${PSQL[@]}" -c "SET client_min_messages = warning" -c "DROP SCHEMA bench CASCADE" -c "DROP FUNCTION public.bench_heap_tile_features" \
	-c "DROP TABLE bench_livemap_heap" -c "DROP TABLE IF EXISTS bench_delaware, bench_synthetic"
python3 -c '
import json, sys
cells = [json.loads(l) for l in open(sys.argv[1])]
json.dump({"command": sys.argv[3], "seconds_per_cell": float(sys.argv[4]), "cells": cells}, open(sys.argv[2], "w"), indent=1)
' "$work/cells.jsonl" "$json" "bench/tiles.sh${1:+ $1}" "$T"
secs=$(($(date +%s) - start))
echo "tiles: done in $((secs / 60)) min $((secs % 60)) s; $BENCH_CSV, $json" >&2
settings=$(env | grep -E '^TILES_[A-Z]+=' | sort | sed "s/=\(.*\)/='\1'/" | tr '\n' ' ' || true)
BENCH_COMMAND="${settings}make bench-tiles$([ "$QUICK" = 1 ] && echo " QUICK=1" || true)" BENCH_SECONDS=$secs PG_PORT=$port python3 bench/report.py "$BENCH_CSV" >&2
[ "$etag_wrong" = 0 ] || die "the 304 check failed: $etag_wrong tiles answered wrongly ($work/etag.wrong)"
