#!/usr/bin/env bash
# test/sqlsmith.sh [SECONDS]: random SQL (Debian's sqlsmith) against a
# database with trafficdb, a loaded map, feed rows, subscriptions (rows of
# several roles), a region, a rejected feed row (a row in every table the
# extension owns), a stream table and a trail table, as a superuser, as an
# ordinary role, and as a role with exactly the subscriber grants the README
# documents (smithsub), for SECONDS in all (default 60; `make fuzz-sql` runs
# 1200).  Fails on any server crash: a
# process terminated by a signal, or a postmaster restart.  Errors from the
# random queries are expected and ignored.  The cluster listens on a Unix
# socket only.  On a crash it prints the queries sqlsmith was running and the
# server log around the crash.
#
# Needs the extension installed (make install) and tools/trafficdb-stream
# and tools/trafficdb-trail built.  Honours TDB_PG_CONFIG (scripts/lib.sh).
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$TDB_ROOT"

total=${1:-${FUZZ_SQL_SECONDS:-60}}
command -v sqlsmith >/dev/null || die "sqlsmith is not installed (scripts/deps.sh installs it)"
[ -x tools/trafficdb-stream ] && [ -x tools/trafficdb-trail ] || die "build tools/trafficdb-stream and tools/trafficdb-trail first"

dir=$(mktemp -d /tmp/trafficdb-sqlsmith.XXXXXX)
make_pg_dir "$dir"
data=$dir/data
stop() {
	as_pg "$PG_BIN/pg_ctl" -D "$data" stop -m immediate >/dev/null 2>&1 || true
	[ -n "${KEEP:-}" ] || rm -rf "$dir"
}
trap stop EXIT

as_pg "$PG_BIN/initdb" -D "$data" -A trust -U postgres -E UTF8 --locale=C.UTF-8 >/dev/null
cat >>"$data/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$dir'
port = 5432
shared_preload_libraries = 'trafficdb'
trafficdb.database = 'smith'
trafficdb.shm_name = '/trafficdb.smith.$$'
trafficdb.publish_interval = '200ms'
statement_timeout = '5s'
max_connections = 20
log_min_messages = warning
EOF
as_pg "$PG_BIN/pg_ctl" -D "$data" -l "$dir/server.log" -w start >/dev/null
psql() { "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -U postgres "$@"; }

# the objects to fuzz: a map, feed rows, a stream table, a trail table
cat >"$dir/s.rdl" <<'EOF'
SET blockSize = 4096;
SET fileSize = 1MB;
CREATE STREAM nav WITH ID 1 { sog float64 WITH CODEC deadband PARAMS (0.25), heading int16 NULL WITH CODEC step };
EOF
tools/trafficdb-stream create "$dir/s.tsf" "$dir/s.rdl" >/dev/null
[ "$(id -u)" = 0 ] && chown "$PG_OS_USER": "$dir/s.tsf"
psql -d postgres -c 'CREATE DATABASE smith'
psql -d smith >/dev/null <<EOF
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE TABLE roads (id bigint PRIMARY KEY, geom geometry(LineString, 4326), highway text, name text, maxspeed int);
INSERT INTO roads SELECT i, ST_SetSRID(ST_MakeLine(ST_MakePoint(24.9 + (i % 20) * 0.001, 60.15 + (i / 20) * 0.001),
  ST_MakePoint(24.9 + (i % 20) * 0.001 + 0.0008, 60.15 + (i / 20) * 0.001 + 0.0004)), 4326),
  CASE WHEN i % 3 = 0 THEN 'primary' ELSE 'residential' END, 'Street ' || (i % 10), 30 + (i % 3) * 10
  FROM generate_series(1, 400) i;
SELECT trafficdb.load_map('roads', 'id', 'geom', 'highway', 'name', 'maxspeed');
INSERT INTO trafficdb.feed (location_id, speed_kmh, congestion, incident)
  SELECT i, 20 + i % 50, i % 5, CASE WHEN i % 7 = 0 THEN 'roadworks' END FROM generate_series(1, 400) i;
SELECT trafficdb.publish();
CREATE SERVER vessel FOREIGN DATA WRAPPER trafficdb_streams OPTIONS (filename '$dir/s.tsf');
IMPORT FOREIGN SCHEMA streams FROM SERVER vessel INTO public;
INSERT INTO nav SELECT '2024-01-01'::timestamptz + i * interval '1 s', i % 17, i % 360 FROM generate_series(1, 2000) i;
CREATE TABLE ev AS SELECT v AS id, '2024-03-01'::timestamptz + i * interval '7 s' AS time,
  ST_SetSRID(ST_MakePoint(24.9 + v * 0.001, 60.1 + i * 0.0001), 4326) AS geom, (i % 30)::float8 AS speed
  FROM generate_series(1, 30) v, generate_series(1, 100) i;
SELECT trafficdb.trail_write('SELECT * FROM ev', '$dir/ev.trail');
CREATE SERVER disk FOREIGN DATA WRAPPER trafficdb_trails;
CREATE FOREIGN TABLE trails (id bigint, time timestamptz, geom geometry(Point, 4326), speed float8)
  SERVER disk OPTIONS (url '$dir/ev.trail');
CREATE ROLE smith LOGIN;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO smith;
GRANT USAGE ON SCHEMA trafficdb TO smith;
GRANT SELECT ON ALL TABLES IN SCHEMA trafficdb TO smith;
GRANT INSERT ON trafficdb.feed TO smith;
-- a subscriber: exactly the documented grants (README, Subscriptions)
CREATE ROLE smithsub LOGIN;
GRANT SELECT, INSERT, DELETE ON trafficdb.subscriptions TO smithsub;
GRANT USAGE ON SEQUENCE trafficdb.subscriptions_id_seq TO smithsub;
-- subscriptions of every kind, of postgres, smith and smithsub
INSERT INTO trafficdb.subscriptions (name, location_ids, condition, value, events, notify)
  VALUES ('ids', '{1, 2, 3}', 'congestion_at_least', 2, 'enter_exit', true);
INSERT INTO trafficdb.subscriptions (name, area, condition, value)
  VALUES ('box', ST_MakeEnvelope(24.9, 60.15, 24.91, 60.16, 4326), 'speed_below', 30);
INSERT INTO trafficdb.subscriptions (name, center, radius_m, condition)
  VALUES ('near', ST_SetSRID(ST_MakePoint(24.905, 60.155), 4326), 500, 'incident');
INSERT INTO trafficdb.subscriptions (name, location_ids, owner) VALUES ('smith''s', '{4}', 'smith');
SET ROLE smithsub;
INSERT INTO trafficdb.subscriptions (name, location_ids, condition, value)
  SELECT 'sub ' || i, ARRAY[i::bigint], 'speed_below_pct', 50 FROM generate_series(5, 24) i;
INSERT INTO trafficdb.subscriptions (name, area, events, condition, value)
  VALUES ('sub box', ST_MakeEnvelope(24.9, 60.15, 24.92, 60.17, 4326), 'enter_exit', 'congestion_at_least', 3);
RESET ROLE;
-- a region (regions is the fleet's table) and a feed row the daemon rejects
-- (feed_rejects): a row in every table the extension owns
INSERT INTO trafficdb.regions (name, area, bounds, server)
  VALUES ('smith', ST_Multi(ST_MakeEnvelope(24.8, 60.0, 25.1, 60.3, 4326)), ST_MakeEnvelope(24.8, 60.0, 25.1, 60.3, 4326), 'nowhere');
INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (999999, 10);
SELECT trafficdb.publish();
EOF
started=$(psql -d smith -At -c 'SELECT pg_postmaster_start_time()')

crashed() {
	grep -Eq 'terminated by signal (4|6|7|8|11)|was terminated by exception' "$dir/server.log" && return 0
	[ "$(psql -d smith -At -c 'SELECT pg_postmaster_start_time()' 2>/dev/null)" != "$started" ]
}

run() {
	local who=$1 seconds=$2 seed=$3
	echo "sqlsmith: $seconds s as $who (seed $seed)"
	# bounded twice: by time, and by a query count no run reaches
	timeout -s INT "$seconds" sqlsmith --target="host=$dir dbname=smith user=$who" --seed="$seed" \
		--exclude-catalog --max-queries=1000000 --dump-all-queries >"$dir/queries.$who" 2>"$dir/sqlsmith.$who" || true
	grep -a -E '^(queries|AST stats)' "$dir/sqlsmith.$who" | tail -n 2 || true
	echo "sqlsmith: $(grep -ac ';$' "$dir/queries.$who" || true) queries as $who"
	if crashed; then
		echo "sqlsmith: THE SERVER CRASHED (running as $who, seed $seed); the last queries:" >&2
		tail -n 60 "$dir/queries.$who" >&2
		echo "--- server log:" >&2
		grep -a -B 5 -A 5 -E 'terminated by signal|terminated by exception|server process' "$dir/server.log" | head -n 80 >&2
		KEEP=1
		echo "kept in $dir" >&2
		exit 1
	fi
}

third=$((total / 3))
[ "$third" -ge 5 ] || third=5
seed=${FUZZ_SQL_SEED:-$(date +%s)}
run smith "$third" "$seed"
run smithsub "$third" "$((seed + 1))"
run postgres "$third" "$((seed + 2))"
echo "sqlsmith: no crash in $((3 * third)) s"
