#!/usr/bin/env bash
# test/livemap.sh: the live map (web/) tested as a person uses it.
#
# Sets up, in a scratch directory, a real cluster that preloads trafficdb
# (the installed build) with the Helsinki roads as its map, a MinIO on
# 127.0.0.1 holding the demo's AIS day as a trail file read through the
# trail FDW, and the tipg app with Martin serving the page's tiles
# (scripts/web.sh), then runs the browser tests
# (web/test/, node --test, headless Debian chromium through puppeteer-core).
# Stops everything it started, whatever happens.
#
# Ports: the system picks free ones; TDB_TEST_PG_PORTS="FIRST LAST" and
# TDB_WEB_PORTS="FIRST LAST" (TDB_MARTIN_PORTS for Martin) choose a range instead.  LIVEMAP_SHOTS=DIR keeps
# the screenshots.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$TDB_ROOT"

scripts/web-setup.sh
scripts/fetch-ais.sh >/dev/null
make -s tools/trafficdb-trail
command -v chromium >/dev/null || die "chromium is missing: scripts/deps.sh installs it"

work=$(mktemp -d /tmp/trafficdb-livemap.XXXXXX)
chmod 755 "$work"	# the cluster account reaches its directory through it
pgdata=$work/pg/data	# start_test_cluster makes it
cleanup() {
	set +e
	scripts/web.sh stop "$work" >/dev/null 2>&1
	scripts/minio.sh stop "$work/minio" >/dev/null 2>&1
	[ -f "$pgdata/postmaster.pid" ] && as_pg "$PG_BIN/pg_ctl" -D "$pgdata" stop -m fast -w >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT

# only publish() publishes: each test knows which generation holds its rows
start_test_cluster "$work" livemap "trafficdb.publish_interval = '1h'"
"${PSQL[@]}" -c "CREATE EXTENSION postgis"
osm2pgsql --output=flex --style=scripts/roads.lua --log-level=warn --log-progress=false -H 127.0.0.1 -P "$port" -U postgres -d livemap \
	data/helsinki.osm.pbf
"${PSQL[@]}" -c "CREATE EXTENSION trafficdb" \
	-c "SELECT trafficdb.load_map('roads', 'osm_id', 'geom', 'highway', 'name', 'maxspeed', 'oneway')" >/dev/null

echo "livemap: MinIO with the AIS day of 2020-06-30 as a trail file"
scripts/minio.sh start "$work/minio"
. "$work/minio/env"
AWS_ACCESS_KEY_ID=$MINIO_ROOT_USER AWS_SECRET_ACCESS_KEY=$MINIO_ROOT_PASSWORD AWS_ENDPOINT_URL=$MINIO_ENDPOINT \
	tools/trafficdb-trail mb s3://vessels >/dev/null
AWS_ACCESS_KEY_ID=$MINIO_ROOT_USER AWS_SECRET_ACCESS_KEY=$MINIO_ROOT_PASSWORD AWS_ENDPOINT_URL=$MINIO_ENDPOINT \
	tools/trafficdb-trail write s3://vessels/us_coastal_2020_06_30.trail --id mmsi --time ts \
	<data/cache/ais/us_coastal_2020_06_30.csv
"${PSQL[@]}" -v endpoint="$MINIO_ENDPOINT" -v access_key="$MINIO_ROOT_USER" -v secret_key="$MINIO_ROOT_PASSWORD" <<'EOSQL'
CREATE SERVER minio FOREIGN DATA WRAPPER trafficdb_trails OPTIONS (endpoint :'endpoint', region 'us-east-1');
CREATE USER MAPPING FOR CURRENT_USER SERVER minio OPTIONS (access_key :'access_key', secret_key :'secret_key');
CREATE SCHEMA trails;
IMPORT FOREIGN SCHEMA "s3://vessels/us_coastal_2020_06_30.trail" FROM SERVER minio INTO trails;
EOSQL

# the app connects as an ordinary role, as in the demo
"${PSQL[@]}" -v server=minio -v access_key="$MINIO_ROOT_USER" -v secret_key="$MINIO_ROOT_PASSWORD" -f web/role.sql
scripts/web.sh start "$work" "postgresql://trafficdb_web@127.0.0.1:$port/livemap"
# the browser tests restart the cluster under the open page with this
cat >"$work/pg-restart.sh" <<EOF2
#!/usr/bin/env bash
. "$TDB_ROOT/scripts/lib.sh"
as_pg "$PG_BIN/pg_ctl" -D "$pgdata" -l "$work/pg/postgres.log" -m fast -w -t 60 restart >/dev/null
EOF2
chmod +x "$work/pg-restart.sh"
echo "livemap: browser tests (node --test web/test/livemap.test.mjs, $(chromium --version 2>/dev/null | head -1))"
[ -n "${LIVEMAP_SHOTS:-}" ] && mkdir -p "$LIVEMAP_SHOTS"
if ! (cd web && LIVEMAP_URL="http://127.0.0.1:$(cat "$work/web.port")" LIVEMAP_PSQL="$PG_BIN/psql" LIVEMAP_PG_RESTART="$work/pg-restart.sh" CHROMIUM=$(command -v chromium) \
	timeout 600 node --test test/livemap.test.mjs); then
	echo "--- web.log" >&2; tail -n 30 "$work/web.log" >&2
	echo "--- martin.log" >&2; grep -v ' INFO ' "$work/martin.log" | tail -n 30 >&2
	echo "--- postgres.log" >&2; tail -n 30 "$work/pg/postgres.log" >&2
	die "the live map tests failed"
fi
