#!/usr/bin/env bash
# bench/livemap.sh: the live map's figures (make bench-livemap; a step of make bench).
#
#  1. vector tiles per second for every tile of zooms 12 to 16 over the map's
#     extent, through tipg (web/app.py, one uvicorn worker, THREADS client
#     threads with keep-alive, bench/livemap_load.py), from our function layer
#     trafficdb.tile_features (the R-tree in shared memory) vs the same function
#     over a heap copy of trafficdb.locations with a GiST index
#     (public.bench_heap_tile_features): same server, same run, same tiles;
#  2. the same tiles made in SQL alone (pgbench, ST_AsMVT over each function's
#     rows, 2 clients, prepared), to show what the tile server adds;
#  3. the time from publish() to the page's repainted tile, in headless
#     chromium (web/bench/repaint.mjs), median of LIVEMAP_RUNS (default 20).
# Runs on the demo cluster (bench/lib.sh's bench_cluster); pauses the demo's
# traffic feeder meanwhile.  Figures go to BENCH_CSV (section livemap).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

T=${SECONDS_PER_TEST:-3}
THREADS=${LIVEMAP_THREADS:-4}
RUNS=${LIVEMAP_RUNS:-20}
bench_cluster
scripts/web-setup.sh
VENV=${TDB_WEB_VENV:-$TDB_ROOT/.venv-web}
work=$TDB_ROOT/bench/work/livemap
mkdir -p "$work"

dburl="postgresql://postgres@127.0.0.1:$port/$DB"
feeder_was_running=
if [ -f .demo/web/feeder.pid ] && kill -0 "$(cat .demo/web/feeder.pid)" 2>/dev/null; then
	feeder_was_running=1
	stop_pidfile .demo/web/feeder.pid
fi
finish() {
	scripts/web.sh stop "$work" >/dev/null 2>&1 || true
	if [ -n "$feeder_was_running" ]; then
		nohup "$VENV/bin/python" web/feeder.py "$dburl" >.demo/web/feeder.log 2>&1 &
		echo $! >.demo/web/feeder.pid
	fi
}
trap finish EXIT

# the baseline: the same rows in a heap table with GiST, the same function shape
"${PSQL[@]}" <<'EOSQL'
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench_livemap_heap CASCADE;
CREATE TABLE bench_livemap_heap AS
  SELECT location_id, name, road_class, speed_kmh, free_flow_kmh, congestion, incident, generation, geom
    FROM trafficdb.locations;
CREATE INDEX ON bench_livemap_heap USING gist (geom);
ANALYZE bench_livemap_heap;
CREATE OR REPLACE FUNCTION public.bench_heap_tile_features(z integer, x integer, y integer,
    OUT location_id bigint, OUT name text, OUT road_class text,
    OUT speed_kmh real, OUT free_flow_kmh real, OUT congestion smallint,
    OUT incident text, OUT generation bigint, OUT geom geometry)
RETURNS SETOF record LANGUAGE plpgsql STABLE AS $$
DECLARE
  side bigint;
BEGIN
  IF z IS NULL OR x IS NULL OR y IS NULL THEN RETURN; END IF;
  IF z < 0 OR z > 30 THEN RAISE EXCEPTION 'tile zoom % is out of range: expected 0 to 30', z; END IF;
  side := 1::bigint << z;
  IF x < 0 OR x >= side OR y < 0 OR y >= side THEN RAISE EXCEPTION 'tile %/%/% is outside the grid', z, x, y; END IF;
  RETURN QUERY
    SELECT h.location_id, h.name, h.road_class, h.speed_kmh, h.free_flow_kmh, h.congestion,
           h.incident, h.generation, h.geom
      FROM public.bench_livemap_heap h
     WHERE h.geom && ST_Transform(ST_TileEnvelope(z, x, y, margin => 64.0 / 4096), 4326);
END $$;
EOSQL

TIPG_DB_SCHEMAS='["trafficdb", "public"]' \
	TIPG_DB_FUNCTIONS='["trafficdb.tile_features", "public.bench_heap_tile_features"]' \
	TIPG_DB_EXCLUDE_TABLE_SCHEMAS='["trafficdb", "public"]' \
	scripts/web.sh start "$work" "$dburl" 2>/dev/null
base="http://127.0.0.1:$(cat "$work/web.port")"

echo "livemap: tiles/s through tipg ($THREADS threads, $T s each) and in SQL (pgbench, 2 clients)" >&2
for z in 12 13 14 15 16; do
	# every tile of zoom z over the map's extent
	read -r x0 x1 y0 y1 < <("${PSQL[@]}" -At -F ' ' -c "
		SELECT floor((ST_XMin(e) + 180) / 360 * 2 ^ $z)::int, floor((ST_XMax(e) + 180) / 360 * 2 ^ $z)::int,
		       floor((1 - ln(tan(radians(ST_YMax(e))) + 1 / cos(radians(ST_YMax(e)))) / pi()) / 2 * 2 ^ $z)::int,
		       floor((1 - ln(tan(radians(ST_YMin(e))) + 1 / cos(radians(ST_YMin(e)))) / pi()) / 2 * 2 ^ $z)::int
		  FROM (SELECT ST_Extent(geom)::geometry AS e FROM trafficdb.locations) s")
	tiles=()
	for x in $(seq "$x0" "$x1"); do for y in $(seq "$y0" "$y1"); do tiles+=("$z/$x/$y"); done; done
	declare -A tps=() p50=() sqltps=()
	for f in trafficdb.tile_features public.bench_heap_tile_features; do
		# warm up once, then measure
		python3 bench/livemap_load.py "$base" "$f" 0.5 "$THREADS" "${tiles[@]}" >/dev/null
		read -r n wall rate bytes med p99 < <(python3 bench/livemap_load.py "$base" "$f" "$T" "$THREADS" "${tiles[@]}")
		tps[$f]=$rate
		p50[$f]=$med
		cat >"$work/tile.sql" <<-EOF
			\set x random($x0, $x1)
			\set y random($y0, $y1)
			SELECT length(ST_AsMVT(t.*, 'traffic')) FROM (SELECT location_id, name, road_class, speed_kmh, free_flow_kmh,
			  congestion, incident, generation,
			  ST_AsMVTGeom(ST_Transform(geom, 3857), ST_TileEnvelope($z, :x, :y), 4096, 256, true) AS geom
			  FROM $f($z, :x, :y)) t;
		EOF
		sqltps[$f]=$("$PG_BIN/pgbench" -n -M prepared -c 2 -j 2 -T "$T" -h 127.0.0.1 -p "$port" -U postgres \
			-f "$work/tile.sql" "$DB" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p' | cut -d. -f1)
		echo "  z$z ${#tiles[@]} tiles, $f: $rate tiles/s through tipg (p50 $med ms, p99 $p99 ms, $bytes B/tile), ${sqltps[$f]} tiles/s in SQL" >&2
	done
	bench_emit livemap tipg_tiles_per_s "$z" "${tps[trafficdb.tile_features]}" tiles/s heap_gist "${tps[public.bench_heap_tile_features]}"
	bench_emit livemap tipg_tile_p50_ms "$z" "${p50[trafficdb.tile_features]}" ms heap_gist "${p50[public.bench_heap_tile_features]}"
	bench_emit livemap sql_tiles_per_s "$z" "${sqltps[trafficdb.tile_features]}" tiles/s heap_gist "${sqltps[public.bench_heap_tile_features]}"
	unset tps p50 sqltps
done

echo "livemap: publish() to the repainted tile in headless chromium, $RUNS runs" >&2
PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=$DB LIVEMAP_PSQL="$PG_BIN/psql" CHROMIUM=$(command -v chromium) \
	timeout 600 node web/bench/repaint.mjs "$base" "$RUNS" >"$work/repaint.txt"
read -r ev_med rp_med rp_p90 rp_min rp_max psql_med < <(python3 -c '
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
ev = sorted(float(r[1]) for r in rows); rp = sorted(float(r[2]) for r in rows); ps = sorted(float(r[4]) for r in rows)
print(statistics.median(ev), statistics.median(rp), rp[min(len(rp) - 1, int(len(rp) * 0.9))], rp[0], rp[-1], statistics.median(ps))
' "$work/repaint.txt")
echo "  median: event $ev_med ms, repainted $rp_med ms (p90 $rp_p90, min $rp_min, max $rp_max; psql itself $psql_med ms)" >&2
bench_emit livemap publish_to_event_median_ms "$RUNS" "$ev_med" ms
bench_emit livemap publish_to_repaint_median_ms "$RUNS" "$rp_med" ms
bench_emit livemap publish_to_repaint_p90_ms "$RUNS" "$rp_p90" ms
"${PSQL[@]}" -c "DROP FUNCTION public.bench_heap_tile_features" -c "DROP TABLE bench_livemap_heap"
