# bench/lib.sh: what the benchmark scripts share.  Source it; do not run it.
#
# Every figure goes to one CSV per run, bench/results/<date>-<host>.csv
# (BENCH_CSV overrides), one row per measurement:
#   section,measure,x,value,unit,baseline,baseline_value,ratio
# where x is the client count, thread count or size the figure is for, and
# baseline/baseline_value/ratio name the figure it is compared with in the
# same run (empty when there is none).  bench/report.py turns it into the
# report and the plots.
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$TDB_ROOT"

BENCH_CSV=${BENCH_CSV:-bench/results/$(date -u +%Y-%m-%d)-$(hostname -s).csv}
export BENCH_CSV
mkdir -p "$(dirname "$BENCH_CSV")"
[ -s "$BENCH_CSV" ] || echo "section,measure,x,value,unit,baseline,baseline_value,ratio" >"$BENCH_CSV"

# bench_emit SECTION MEASURE X VALUE UNIT [BASELINE BASELINE_VALUE]
bench_emit() {
	local ratio=""
	if [ -n "${7:-}" ]; then
		ratio=$(awk -v a="$4" -v b="$7" 'BEGIN { if (b > 0) printf "%.3g", a / b }')
	fi
	echo "$1,$2,$3,$4,$5,${6:-},${7:-},$ratio" >>"$BENCH_CSV"
	printf '  %-14s %-28s %6s %14s %-8s %s\n' "$1" "$2" "$3" "$4" "$5" "${6:+vs $6 $7: ${ratio}x}"
}

# The demo cluster (started by `make demo` when it is not running), or the
# one on 127.0.0.1:$BENCH_PORT (database $BENCH_DB) when that is set: sets
# port, DB and PSQL.
bench_cluster() {
	port=${BENCH_PORT:-$(cat .demo/port 2>/dev/null || true)}
	if [ -z "$port" ] || ! "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$port"; then
		echo "bench: starting the demo cluster (make demo)" >&2
		make -s demo >/dev/null
		port=$(cat .demo/port)
	fi
	DB=${BENCH_DB:-trafficdb_demo}
	PSQL=("$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d "$DB")
	bench_quiet_demo
}

# The demo's live map measured beside a benchmark: its SUMO feeder publishes
# every few seconds and the web app answers each publication (a benchmark's
# too) with a query of the locations table; on a 2-core guest they took a
# fifth to a third of a core and moved the accessor's and the subscriptions'
# figures by a third (bench/results/2026-12-02-amd.md).  So a benchmark on the
# demo cluster stops them first, and says so; `make demo` starts them again.
# BENCH_KEEP_LIVE=1 keeps them (to measure beside them on purpose).
bench_quiet_demo() {
	[ "${BENCH_KEEP_LIVE:-0}" = 1 ] && return 0
	[ "$port" = "$(cat .demo/port 2>/dev/null || true)" ] || return 0
	if pidfile_alive .demo/web/feeder.pid || pidfile_alive .demo/web/web.pid; then
		scripts/demo.sh --stop-live >&2
		echo "bench: the demo's live map is stopped while benchmarks run (make demo starts it again; BENCH_KEEP_LIVE=1 keeps it)" >&2
	fi
}

# Load the demo's Helsinki map back (benchmarks replace it).
bench_restore_map() {
	"${PSQL[@]}" -c "SELECT trafficdb.load_map('roads', 'osm_id', 'geom', 'highway', 'name', 'maxspeed', 'oneway')" >/dev/null
}

# Packages only the benchmarks need (Redis as a baseline, gnuplot for plots),
# or the ones named.
bench_deps() {
	local missing=() p
	for p in ${@:-redis-server redis-tools gnuplot-nox}; do	# names without spaces
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		echo "bench: installing ${missing[*]}" >&2
		$SUDO apt-get update -q >/dev/null
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
	fi
	# Debian starts a Redis service on install; the benchmark runs its own
	if command -v systemctl >/dev/null 2>&1; then $SUDO systemctl disable --now redis-server >/dev/null 2>&1 || true; fi
}

# Crash the demo cluster (immediate stop) and start it again, waiting for
# the daemon's first publication: what a restart costs (the generation log's
# replay).  For another cluster (BENCH_PORT) set BENCH_PGDATA and BENCH_PG_BIN.
bench_restart_cluster() {
	local data dir gen bin
	dir=$(readlink -f .demo)
	data=${BENCH_PGDATA:-$dir/pgdata}	# BENCH_PGDATA, BENCH_PG_BIN: the cluster of BENCH_PORT
	bin=${BENCH_PG_BIN:-$PG_BIN}
	gen=$("${PSQL[@]}" -Atc 'SELECT generation FROM trafficdb.status')
	as_pg "$bin/pg_ctl" -D "$data" stop -m immediate -w >/dev/null
	as_pg "$bin/pg_ctl" -D "$data" -l "$data/restart.log" -w start >/dev/null
	for _ in $(seq 1 600); do
		[ "$("${PSQL[@]}" -Atc 'SELECT generation FROM trafficdb.status' 2>/dev/null || echo 0)" -gt "$gen" ] && return 0
		sleep 0.5
	done
	echo "bench: no publication within 300 s of the restart" >&2
	return 1
}

# bench_median NUMBER...: their median.
bench_median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# bench_road_tiles Z [LIMIT]: the tiles of zoom Z that hold roads of the
# loaded map (the tiles of the roads' midpoints), at most LIMIT (400), in a
# fixed pseudo-random order: one z/x/y a line.  The same tiles for every
# side measured.
bench_road_tiles() {
	"${PSQL[@]}" -At -c "
		SELECT t FROM (SELECT DISTINCT format('%s/%s/%s', $1,
		         floor((ST_X(p) + 180) / 360 * 2 ^ $1)::int,
		         floor((1 - ln(tan(radians(ST_Y(p))) + 1 / cos(radians(ST_Y(p)))) / pi()) / 2 * 2 ^ $1)::int) AS t
		    FROM (SELECT ST_LineInterpolatePoint(geom, 0.5) AS p FROM trafficdb.locations) s) u
		 ORDER BY md5(t) LIMIT ${2:-400}"
}

# bench_load_delaware TABLE: the real Delaware network (52,585 OpenStreetMap
# ways; scripts/fetch-map.sh) imported into TABLE and loaded as the map.
bench_load_delaware() {
	scripts/fetch-map.sh delaware >/dev/null
	"${PSQL[@]}" -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS $1"
	TDB_ROADS_TABLE=$1 osm2pgsql --output=flex --style=scripts/roads.lua --log-level=warn --log-progress=false \
		-H 127.0.0.1 -P "$port" -U postgres -d "$DB" data/cache/delaware-latest.osm.pbf
	"${PSQL[@]}" -c "SELECT trafficdb.load_map('$1', 'osm_id', 'geom', 'highway', 'name', 'maxspeed', 'oneway')" >/dev/null
}

# bench_repaint BASE RUNS OUT: web/bench/repaint.mjs against the page at BASE
# (its environment passes through: LIVEMAP_TILES, LIVEMAP_SOURCE_LAYER),
# every run's line kept in OUT; prints the medians and spread:
#   event_median repaint_median repaint_p90 repaint_min repaint_max psql_median   (ms)
bench_repaint() {
	PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=$DB LIVEMAP_PSQL="$PG_BIN/psql" CHROMIUM=$(command -v chromium) \
		timeout 600 node web/bench/repaint.mjs "$1" "$2" >"$3"
	python3 -c '
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
ev = sorted(float(r[1]) for r in rows); rp = sorted(float(r[2]) for r in rows); ps = sorted(float(r[4]) for r in rows)
print(statistics.median(ev), statistics.median(rp), rp[min(len(rp) - 1, int(len(rp) * 0.9))], rp[0], rp[-1], statistics.median(ps))
' "$3"
}

# bench_heap_tile_features: the live map's baseline (bench/livemap.sh,
# bench/tiles.sh): the rows of trafficdb.locations copied to a heap table with
# GiST (public.bench_livemap_heap), and public.bench_heap_tile_features(z, x, y)
# over it, of trafficdb.tile_features's shape (tipg serves either).
bench_heap_tile_features() {
	"${PSQL[@]}" <<-'EOSQL'
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
}


# bench_synthetic_roads TABLE N: N synthetic segments (columns id, geom,
# highway, name) over a 10 x 10 degree grid at 10-20 E 45-55 N, shaped like the
# Helsinki extract (2 to 4 points, a few tens of metres), seeded: the same
# network every time (bench/daemon.sh, bench/tiles.sh).
bench_synthetic_roads() {
	"${PSQL[@]}" <<-EOF
	SET client_min_messages = warning;
	DROP TABLE IF EXISTS $1;
	SELECT setseed(0.7) \g /dev/null
	CREATE UNLOGGED TABLE $1 AS
	SELECT i AS id,
	       ST_SetSRID(ST_MakeLine((ARRAY[
	           ST_MakePoint(x, y), ST_MakePoint(x + dx, y + dy),
	           ST_MakePoint(x + 2 * dx, y + dy * 1.5), ST_MakePoint(x + 3 * dx, y + dy * 2)])[1:np]), 4326) AS geom,
	       (ARRAY['primary', 'secondary', 'tertiary', 'residential', 'service'])[1 + i % 5] AS highway,
	       'Street ' || (i % 20000) AS name
	  FROM (SELECT i, 10 + (i % 1000) * 0.01 + random() * 0.01 AS x, 45 + (i / 1000 % 1000) * 0.01 + random() * 0.01 AS y,
	               (random() - 0.5) * 0.0008 AS dx, (random() - 0.5) * 0.0004 AS dy, 2 + (random() * 2.9)::int AS np
	          FROM generate_series(1, $2) i) s;
	EOF
}

# The demo's feeder stopped while a benchmark measures (with BENCH_KEEP_LIVE=1;
# otherwise bench_cluster stopped it already), and started again after with
# the command line it ran (the SUMO feeder's, web/sumo_feeder.py, since the
# demo runs SUMO: the resume started web/feeder.py, the random one, before).
bench_feeder_pause() {
	feeder_was_running=()
	if pidfile_alive .demo/web/feeder.pid; then
		mapfile -d '' -t feeder_was_running <"/proc/$(cat .demo/web/feeder.pid)/cmdline" || feeder_was_running=()
		stop_pidfile .demo/web/feeder.pid
	fi
}
bench_feeder_resume() {
	if [ ${#feeder_was_running[@]} -gt 0 ]; then
		nohup "${feeder_was_running[@]}" >>.demo/web/feeder.log 2>&1 &
		echo $! >.demo/web/feeder.pid
	fi
}
