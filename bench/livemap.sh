#!/usr/bin/env bash
# bench/livemap.sh: the live map's figures (make bench-livemap; a step of make bench).
#
#  1. vector tiles per second for zooms 12 to 16 (the tiles of the map that
#     hold roads, at most 400 per zoom), through tipg (web/app.py, one uvicorn worker, THREADS client
#     threads with keep-alive, bench/livemap_load.py; LIVEMAP_ROUNDS rounds
#     of LIVEMAP_SECONDS, default 3 of 2 s, the two sides taking turns, each
#     side's median), from our function layer
#     trafficdb.tile_features (the R-tree in shared memory) vs the same function
#     over a heap copy of trafficdb.locations with a GiST index
#     (public.bench_heap_tile_features): same server, same run, same tiles;
#  2. the same tiles made in SQL alone (pgbench, ST_AsMVT over each function's
#     rows, 2 clients, prepared), to show what the tile server adds;
#  3. the time from publish() to the page's repainted tile, in headless
#     chromium (web/bench/repaint.mjs), median of LIVEMAP_RUNS (default 20);
#  4. unless LIVEMAP_DELAWARE=0, 1 and 2 again on the real Delaware network
#     (52,585 roads; section livemap_delaware), then the demo's map back.
# Runs on the demo cluster (bench/lib.sh's bench_cluster); pauses the demo's
# traffic feeder meanwhile.  Figures go to BENCH_CSV (section livemap).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

T=${LIVEMAP_SECONDS:-2}
ROUNDS=${LIVEMAP_ROUNDS:-3}
THREADS=${LIVEMAP_THREADS:-4}
RUNS=${LIVEMAP_RUNS:-20}
bench_cluster
scripts/web-setup.sh
VENV=${TDB_WEB_VENV:-$TDB_ROOT/.venv-web}
work=$TDB_ROOT/bench/work/livemap
mkdir -p "$work"

dburl="postgresql://postgres@127.0.0.1:$port/$DB"
bench_feeder_pause
finish() {
	scripts/web.sh stop "$work" >/dev/null 2>&1 || true
	bench_feeder_resume
}
trap finish EXIT

# measure_tiles SECTION: zooms 12-16, the tiles of the loaded map that hold
# roads (at most 400 of each zoom, the same ones for both sides: the tiles of
# the roads' midpoints, in a fixed pseudo-random order)
measure_tiles() {
	local section=$1 z f n wall rate bytes med p99 tiles
	for z in 12 13 14 15 16; do
		mapfile -t tiles < <(bench_road_tiles "$z")
		printf '%s\n' "${tiles[@]}" | awk -F/ '{ print $2 "\t" $3 }' >"$work/tiles.tsv"
		"${PSQL[@]}" -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS bench_livemap_tiles" \
			-c "CREATE TABLE bench_livemap_tiles (i serial PRIMARY KEY, x int, y int)" \
			-c "\\copy bench_livemap_tiles (x, y) FROM '$work/tiles.tsv'"
		declare -A tps=() p50=() sqltps=()
		for f in trafficdb.tile_features public.bench_heap_tile_features; do
			# SQL alone: the same tiles, one picked at random per transaction
			cat >"$work/tile-$f.sql" <<-EOF
				\\set i random(1, ${#tiles[@]})
				SELECT length(ST_AsMVT(t.*, 'traffic')) FROM bench_livemap_tiles k, LATERAL (SELECT location_id, name, road_class,
				  speed_kmh, free_flow_kmh, congestion, incident, generation,
				  ST_AsMVTGeom(ST_Transform(geom, 3857), ST_TileEnvelope($z, k.x, k.y), 4096, 256, true) AS geom
				  FROM $f($z, k.x, k.y)) t WHERE k.i = :i;
			EOF
			python3 bench/livemap_load.py "$base" "$f" 0.5 "$THREADS" "${tiles[@]}" >/dev/null	# warm up
		done
		# ROUNDS rounds, the two sides taking turns (the machine's other load
		# falls on both alike); each side's median
		for r in $(seq 1 "$ROUNDS"); do
			for f in trafficdb.tile_features public.bench_heap_tile_features; do
				read -r n wall rate bytes med p99 < <(python3 bench/livemap_load.py "$base" "$f" "$T" "$THREADS" "${tiles[@]}")
				tps[$f]+="$rate "
				p50[$f]+="$med "
				sqltps[$f]+="$("$PG_BIN/pgbench" -n -M prepared -c 2 -j 2 -T "$T" -h 127.0.0.1 -p "$port" -U postgres \
					-f "$work/tile-$f.sql" "$DB" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p' | cut -d. -f1) "
			done
		done
		for f in trafficdb.tile_features public.bench_heap_tile_features; do
			tps[$f]=$(bench_median ${tps[$f]})
			p50[$f]=$(bench_median ${p50[$f]})
			sqltps[$f]=$(bench_median ${sqltps[$f]})
			echo "  $section z$z, ${#tiles[@]} tiles, $f: ${tps[$f]} tiles/s through tipg (p50 ${p50[$f]} ms), ${sqltps[$f]} tiles/s in SQL (medians of $ROUNDS)" >&2
		done
		bench_emit "$section" tipg_tiles_per_s "$z" "${tps[trafficdb.tile_features]}" tiles/s heap_gist "${tps[public.bench_heap_tile_features]}"
		bench_emit "$section" tipg_tile_p50_ms "$z" "${p50[trafficdb.tile_features]}" ms heap_gist "${p50[public.bench_heap_tile_features]}"
		bench_emit "$section" sql_tiles_per_s "$z" "${sqltps[trafficdb.tile_features]}" tiles/s heap_gist "${sqltps[public.bench_heap_tile_features]}"
		unset tps p50 sqltps
	done
}

bench_heap_tile_features
TIPG_DB_SCHEMAS='["trafficdb", "public"]' \
	TIPG_DB_FUNCTIONS='["trafficdb.tile_features", "public.bench_heap_tile_features"]' \
	TIPG_DB_EXCLUDE_TABLE_SCHEMAS='["trafficdb", "public"]' \
	scripts/web.sh start "$work" "$dburl" 2>/dev/null
base="http://127.0.0.1:$(cat "$work/web.port")"

echo "livemap: tiles/s through tipg ($THREADS threads) and in SQL (pgbench, 2 clients), $ROUNDS rounds of $T s, the demo's map" >&2
measure_tiles livemap

echo "livemap: publish() to the repainted tile in headless chromium, $RUNS runs" >&2
read -r ev_med rp_med rp_p90 rp_min rp_max psql_med < <(bench_repaint "$base" "$RUNS" "$work/repaint.txt")
echo "  median: event $ev_med ms, repainted $rp_med ms (p90 $rp_p90, min $rp_min, max $rp_max; psql itself $psql_med ms)" >&2
bench_emit livemap publish_to_event_median_ms "$RUNS" "$ev_med" ms
bench_emit livemap publish_to_repaint_median_ms "$RUNS" "$rp_med" ms
bench_emit livemap publish_to_repaint_p90_ms "$RUNS" "$rp_p90" ms

if [ "${LIVEMAP_DELAWARE:-1}" = 1 ]; then
	echo "livemap: the same tiles on the real Delaware network (52,585 roads; LIVEMAP_DELAWARE=0 skips it)" >&2
	bench_load_delaware bench_delaware
	bench_heap_tile_features
	measure_tiles livemap_delaware
	bench_restore_map
	"${PSQL[@]}" -c "DROP TABLE bench_delaware"
fi
"${PSQL[@]}" -c "DROP FUNCTION public.bench_heap_tile_features" -c "DROP TABLE bench_livemap_heap" -c "DROP TABLE IF EXISTS bench_livemap_tiles"
