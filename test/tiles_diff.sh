#!/usr/bin/env bash
# test/tiles_diff.sh [--full]: trafficdb.tile_mvt against PostGIS, byte for
# byte (make test-tiles; a stage of make test).  docs/design-tiles.md section 5.
#
# A scratch cluster of its own (the installed build, 127.0.0.1 only) loads
# each map in turn with load_map, gives its locations random traffic through
# the SQL write path (test/tiles_traffic.sql), and runs test/tiles_diff.py on
# it, which compares every tile with ST_AsMVT over a heap copy of the same
# generation:
#   helsinki  data/helsinki.osm.pbf through osm2pgsql and scripts/roads.lua, as the demo
#   delaware  scripts/fetch-map.sh delaware, loaded as bench/livemap.sh does
#   synth     1,000,000 short random polylines made in SQL (test/tiles_synth.sql);
#             zooms 11-18 and one z6 tile over the budget (a z0-10 tile reads up to
#             the whole map twice: --full adds them, and twice the tiles)
#   edge      the edge-case mini-maps (test/tiles_edge.sql): antimeridian, poles,
#             tile and buffer edges, out-and-back, snapping, the too-small shortcut,
#             ids 0, 2^63-1 and >= 2^63, -0.0/0.0, UTF-8, NULLs; each case's
#             tiles at z0, 1, 5, 14, 18 with every option set, and their neighbours
#   dense     100,000 short segments in one z14 tile: exact under a 16 MB
#             budget, within the default budget otherwise
# Every map's tiles also run under extents 256/512/8192 and buffers 0/256
# (a fifth of the random ones, every option set for the chosen ones).
#
# TILES_SEED fixes the seed (printed; default: the clock).  TILES_HELSINKI,
# TILES_DELAWARE, TILES_SYNTH, TILES_EDGE set the random tiles per map.
# TDB_TEST_PG_PORTS="FIRST LAST" chooses the cluster's port range.
# Exits 1 if any tile differs; each difference is printed decoded.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$TDB_ROOT"

full=0
case "${1:-}" in
--full) full=1 ;;
"") ;;
*) die "usage: test/tiles_diff.sh [--full]" ;;
esac
SEED=${TILES_SEED:-$(($(date +%s) % 1000000))}
N_HELSINKI=${TILES_HELSINKI:-1000}
N_DELAWARE=${TILES_DELAWARE:-$([ "$full" = 1 ] && echo 5000 || echo 1200)}
N_SYNTH=${TILES_SYNTH:-$([ "$full" = 1 ] && echo 10000 || echo 1200)}
N_EDGE=${TILES_EDGE:-500}
N_DENSE=${TILES_DENSE:-$([ "$full" = 1 ] && echo 100 || echo 20)}
DENSE_VARIANTS=$([ "$full" = 1 ] && echo 8 || echo 1)
NOPREFILTER_DELAWARE=$([ "$full" = 1 ] && echo 10 || echo 250)
SYNTH_ZOOMS=$([ "$full" = 1 ] && echo 0-18 || echo 11-18)

# psycopg2: Debian's python3-psycopg2 (scripts/deps.sh) is for Debian's python3
PY=
for p in python3 /usr/bin/python3; do
	if command -v "$p" >/dev/null && "$p" -c 'import psycopg2' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || die "no python3 with psycopg2: scripts/deps.sh installs python3-psycopg2"
command -v osm2pgsql >/dev/null || die "osm2pgsql is missing: scripts/deps.sh installs it"
scripts/fetch-map.sh delaware >/dev/null

started=$SECONDS
work=$(mktemp -d /tmp/trafficdb-tiles.XXXXXX)
chmod 755 "$work"	# the cluster account reaches its directory through it
pgdata=$work/pg/data	# start_test_cluster makes it
cleanup() {
	set +e
	[ -f "$pgdata/postmaster.pid" ] && as_pg "$PG_BIN/pg_ctl" -D "$pgdata" stop -m fast -w >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM	# the cleanup runs on a signal too

# only publish() publishes: the traffic of each map is one generation
start_test_cluster "$work" tiles "trafficdb.publish_interval = '1h'"
"${PSQL[@]}" -c "SET client_min_messages = warning" -c "CREATE EXTENSION postgis" -c "CREATE EXTENSION trafficdb"
"${PSQL[@]}" -At -c "SELECT 'tiles_diff: PostGIS ' || postgis_full_version()" | cut -c1-160
[ "$("${PSQL[@]}" -At -c "SELECT to_regprocedure('trafficdb.tile_mvt(integer,integer,integer,jsonb)') IS NOT NULL")" = t ] ||
	die "trafficdb.tile_mvt(integer, integer, integer, jsonb) is missing: install a build that has it"
echo "tiles_diff: seed $SEED (TILES_SEED=$SEED repeats this run)"

passed=0 failed=0
load() {	# load TABLE ID CLASS NAME [SPEED_LIMIT ONEWAY]: load_map, then random traffic through the feed
	local t0=$SECONDS n
	n=$("${PSQL[@]}" -At -c "SELECT trafficdb.load_map('$1', '$2', 'geom', '$3', '$4'${5:+, '$5', '$6'})")
	"${PSQL[@]}" -f test/tiles_traffic.sql >/dev/null
	echo "tiles_diff: map $1: $n locations loaded, traffic published ($((SECONDS - t0)) s)"
}
run() {	# run NAME ARGS...: tiles_diff.py on the loaded map
	if "$PY" test/tiles_diff.py --seed "$SEED" --map-name "$@"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
	fi
	echo "tiles_diff: $((SECONDS - started)) s so far"
}

say "helsinki (data/helsinki.osm.pbf)"
osm2pgsql --output=flex --style=scripts/roads.lua --log-level=warn --log-progress=false -H 127.0.0.1 -P "$port" -U postgres -d tiles \
	data/helsinki.osm.pbf
load roads osm_id highway name maxspeed oneway
run helsinki --tiles "$N_HELSINKI" --noprefilter-every 2

say "delaware (scripts/fetch-map.sh delaware)"
TDB_ROADS_TABLE=delaware osm2pgsql --output=flex --style=scripts/roads.lua --log-level=warn --log-progress=false \
	-H 127.0.0.1 -P "$port" -U postgres -d tiles data/cache/delaware-latest.osm.pbf
load delaware osm_id highway name maxspeed oneway
run delaware --tiles "$N_DELAWARE" --noprefilter-every "$NOPREFILTER_DELAWARE" --budget-zoom 8

say "synth (1,000,000 random polylines, test/tiles_synth.sql)"
"${PSQL[@]}" -v n=1000000 -f test/tiles_synth.sql
load tiles_synth id class name
# and one z6 tile of ~350,000 roads, over the default budget (more than 262,144 candidates:
# tile_mvt walks the ranking)
run synth --tiles "$N_SYNTH" --zooms "$SYNTH_ZOOMS" --tile 6/34/21 --variants 1
"${PSQL[@]}" -c "DROP TABLE tiles_synth, roads, delaware"

say "edge cases (test/tiles_edge.sql)"
"${PSQL[@]}" -f test/tiles_edge.sql
load tiles_edge id class name
# after the random traffic, the attribute cases: -0.0 and 0.0 (distinct
# values), multi-byte UTF-8, one value under two keys, ids at the ends
"${PSQL[@]}" -c "INSERT INTO trafficdb.feed (location_id, speed_kmh, free_flow_kmh, congestion, incident) VALUES
	(801, '-0'::real, 0, 0, NULL), (802, 0, '-0'::real, 4, 'Onnettomuus – tie suljettu 事故 🚧'),
	(803, 50, 50, 1, 'Tietyö äöå'), (807, 50, 50, 2, 'x'), (-5, 30, 30, 0, 'neg'), (0, 1, 2, 3, 'zero'),
	(-1, 31, 31, NULL, NULL), (9223372036854775807, 400, 400, 4, 'max')" -c "SELECT trafficdb.publish()" >/dev/null
at=(--at=179.95,10 --at=-179.95,10 --at=180,20 --at=-180,20 --at=180,-30 --at=10,85.0511 --at=10.2,89.9 --at=10.3,90
	--at=10,-85.0511 --at=10.3,-90 --at=23.99,-0.99 --at=40,2 --at=50,3)
run edge --tiles "$N_EDGE" "${at[@]}" --tile 0/0/0 --tile 3/6/4 --tile 10/580/508 --tile 11/1160/1016 --tile 2/3/2 --tile 1/1/1

say "dense (100,000 segments in tile 14/11195/8009)"
"${PSQL[@]}" <<-'EOSQL'
	DO $$ BEGIN PERFORM setseed(0.5); END $$;
	CREATE TABLE tiles_dense AS
	SELECT i::bigint AS id, (ARRAY['primary', 'secondary', 'residential', 'service', NULL])[1 + i % 5] AS class,
	       CASE WHEN i % 3 = 0 THEN 'Dense ' || (i % 97) END AS name,
	       ST_Transform(ST_SetSRID(ST_MakeLine(ST_MakePoint(x, y), ST_MakePoint(x + (random() - 0.5) * 40 * px, y + (random() - 0.5) * 40 * px)), 3857), 4326) AS geom
	  FROM (SELECT i, ST_XMin(e) + random() * (ST_XMax(e) - ST_XMin(e)) AS x, ST_YMin(e) + random() * (ST_YMax(e) - ST_YMin(e)) AS y,
	               (ST_XMax(e) - ST_XMin(e)) / 4096 AS px
	          FROM ST_TileEnvelope(14, 11195, 8009) e, generate_series(1, 100000) i) s;
EOSQL
load tiles_dense id class name
run dense --tiles "$N_DENSE" --zooms 15-18 --budget-all --tile 14/11195/8009 --variants "$DENSE_VARIANTS"

echo
echo "tiles_diff: $((SECONDS - started)) s in all"
echo "tiles_diff: $passed passed, $failed failed"
[ "$failed" = 0 ] || die "tile_mvt differs from PostGIS (each tile's decoded diff above)"
