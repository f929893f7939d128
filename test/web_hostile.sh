#!/usr/bin/env bash
# test/web_hostile.sh: the live map's app (web/app.py) against hostile but
# ordinary web clients: unauthenticated GETs, as curl or a script would send
# them, to the real app on 127.0.0.1 with a real cluster (issue 28, item 9).
#
# Sets up, in a scratch directory, a cluster on 127.0.0.1 that preloads
# trafficdb (the installed build) with a small grid map (test/grid_map.sql),
# the app's role (web/role.sql; a trail server that is never contacted) and
# the app under its supervisor with Martin beside it (scripts/web.sh start),
# then runs web/test/hostile.py against the app and web/test/martin_hostile.py
# against Martin (Python's http.client, no browser).  Stops everything it
# started, whatever happens.  Every wait is bounded.
#
# Ports: the system picks free ones; TDB_TEST_PG_PORTS="FIRST LAST" and
# TDB_WEB_PORTS="FIRST LAST" (and TDB_MARTIN_PORTS) choose a range instead.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$TDB_ROOT"

scripts/web-setup.sh

work=$(mktemp -d /tmp/trafficdb-webhostile.XXXXXX)
chmod 755 "$work"	# the cluster account reaches its directory through it
pgdata=$work/pg/data	# start_test_cluster makes it
cleanup() {
	set +e
	scripts/web.sh stop "$work" >/dev/null 2>&1
	[ -f "$pgdata/postmaster.pid" ] && as_pg "$PG_BIN/pg_ctl" -D "$pgdata" stop -m fast -w >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT

start_test_cluster "$work" hostile "trafficdb.publish_interval = '1h'"
"${PSQL[@]}" -c "SET client_min_messages = warning" -f test/grid_map.sql >/dev/null
# web/role.sql wants a trail server and the schema trails; the table the app
# reads vessels from is missing on purpose (an unexpected database error)
"${PSQL[@]}" <<'EOSQL'
CREATE SERVER nowhere FOREIGN DATA WRAPPER trafficdb_trails OPTIONS (endpoint 'http://127.0.0.1:9', region 'us-east-1');
CREATE SCHEMA trails;
EOSQL
"${PSQL[@]}" -v server=nowhere -v access_key=none -v secret_key=none -f web/role.sql

# the base map's files (web/basemap.py): an archive of 300 kB of random bytes (what is
# served is checked, not its meaning) and a glyphs directory of one font
head -c 300000 /dev/urandom >"$work/map.pmtiles"
mkdir -p "$work/glyphs/Open Sans Regular"
printf '\n\x1a\n\x11Open Sans Regular\x12\x050-255' >"$work/glyphs/Open Sans Regular/0-255.pbf"
export TRAFFICDB_WEB_BASEMAP=$work/map.pmtiles TRAFFICDB_WEB_GLYPHS=$work/glyphs HOSTILE_BASEMAP=$work/map.pmtiles
scripts/web.sh start "$work" "postgresql://trafficdb_web@127.0.0.1:$port/hostile"
echo "web_hostile: hostile requests (web/test/hostile.py)"
if ! HOSTILE_URL="http://127.0.0.1:$(cat "$work/web.port")" HOSTILE_DIR="$work" HOSTILE_PG_PORT="$port" \
	timeout 300 "${TDB_WEB_VENV:-$TDB_ROOT/.venv-web}/bin/python" web/test/hostile.py; then
	echo "--- web.log" >&2; tail -n 40 "$work/web.log" >&2
	die "the hostile web client tests failed"
fi
echo "web_hostile: hostile requests to Martin (web/test/martin_hostile.py)"
# (HOSTILE_URL too: martin_hostile.py imports hostile.py's helpers, which reads it)
if ! HOSTILE_URL="http://127.0.0.1:$(cat "$work/web.port")" HOSTILE_DIR="$work" HOSTILE_PG_PORT="$port" \
	timeout 300 "${TDB_WEB_VENV:-$TDB_ROOT/.venv-web}/bin/python" web/test/martin_hostile.py; then
	echo "--- martin.log" >&2; grep -v ' INFO ' "$work/martin.log" | tail -n 40 >&2
	die "the hostile Martin client tests failed"
fi
