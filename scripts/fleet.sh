#!/usr/bin/env bash
# scripts/fleet.sh: `make fleet` and `make fleet-stop` (docs/fleet.md).
#
# `make fleet` installs what is missing, builds and installs trafficdb, then
# runs on this machine, on 127.0.0.1 only:
#   - a pg_auto_failover monitor (port FLEET_PORT, default 5700);
#   - three regions of Helsinki's roads (west, centre, east: three strips
#     with a third of the roads each), each a formation of a primary and a
#     synchronous secondary (ports FLEET_PORT+1 .. FLEET_PORT+6), the primary
#     loading only its region's map;
# writes a feed to each region through a multi-host connection string,
# queries the global table trafficdb_global.locations, kills the centre's
# primary with kill -9 (keeper and postmaster), shows the failover (the
# secondary promoted, its follower daemon the writer, the time it took),
# brings the killed node back as a secondary and prints the fleet's status.
# Everything stays running; `make fleet-stop` stops it and removes it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/autoctl.sh"
cd "$TDB_ROOT"

FLEET_DB=traffic
BASE=${FLEET_PORT:-5700}
FLEET_LINK=$TDB_ROOT/.fleet
REGIONS=(west centre east)

fleet_dir() { if [ -L "$FLEET_LINK" ]; then readlink "$FLEET_LINK"; else echo "$FLEET_LINK"; fi; }

stop_fleet() {
	local dir n
	dir=$(fleet_dir)
	[ -d "$dir" ] || { echo "fleet: nothing to stop"; return 0; }
	for n in "$dir"/*/; do
		n=${n%/}
		[ "$(basename "$n")" = monitor ] && continue
		[ -f "$n/port" ] && afo_stop "$n" || true
	done
	[ -d "$dir/monitor" ] && afo_stop "$dir/monitor" || true
	# a node killed and not brought back leaves a postmaster behind only if
	# the kill failed; be sure nothing of ours listens any more
	for n in "$dir"/*/pgdata; do
		[ -f "$n/postmaster.pid" ] && as_pg "$PG_BIN/pg_ctl" -D "$n" stop -m immediate >/dev/null 2>&1 || true
	done
	rm -rf "$dir" "$FLEET_LINK"
	echo "fleet: stopped and removed $dir"
}

if [ "${1:-}" = --stop ]; then
	stop_fleet
	exit 0
fi

say "dependencies"
scripts/deps.sh

say "build and install"
make -s -j"$(nproc)" all PG_CONFIG="$PG_CONFIG"
$SUDO make -s install PG_CONFIG="$PG_CONFIG"

say "a fresh fleet"
stop_fleet >/dev/null
for p in $(seq "$BASE" $((BASE + 6))); do
	port_in_use "$p" && die "port $p of 127.0.0.1 is in use: set FLEET_PORT to the first of 7 free ports"
done
mkdir -p "$FLEET_LINK"
[ "$(id -u)" = 0 ] && chown "$PG_OS_USER": "$FLEET_LINK"
if ! as_pg test -w "$FLEET_LINK"; then
	rmdir "$FLEET_LINK"
	alt=/var/tmp/trafficdb-fleet-$(printf '%s' "$TDB_ROOT" | md5sum | cut -c1-8)
	rm -rf "$alt"
	make_pg_dir "$alt"
	ln -s "$alt" "$FLEET_LINK"
fi
dir=$(fleet_dir)

say "the pg_auto_failover monitor (127.0.0.1:$BASE)"
afo_monitor_create "$dir/monitor" "$BASE"

# region i: formation region_<name>, primary on BASE+2i+1, secondary on BASE+2i+2
pport() { echo $((BASE + 2 * $1 + 1)); }
sport() { echo $((BASE + 2 * $1 + 2)); }
conninfo() { echo "host=127.0.0.1,127.0.0.1 port=$(pport "$1"),$(sport "$1") dbname=$FLEET_DB target_session_attrs=read-write connect_timeout=2"; }
node_conf=("trafficdb.publish_interval = '500ms'" "wal_level = replica")

for i in 0 1 2; do
	r=${REGIONS[$i]}
	say "region $r: primary on 127.0.0.1:$(pport $i)"
	afo_formation_create "$dir/monitor" "region_$r" "$FLEET_DB"
	afo_node_create "$dir/${r}_1" "$(pport $i)" "${r}_1" "$dir/monitor" "region_$r" "$FLEET_DB" primary "${node_conf[@]}"
done

# Every region's primary: PostGIS, trafficdb, the roads, the servers of
# every region and the same trafficdb.regions rows.
say "import Helsinki's roads with osm2pgsql (into region west, copied to the others)"
P0=$(pport 0)
afo_psql "$P0" "$FLEET_DB" -c "CREATE EXTENSION postgis" >/dev/null
osm2pgsql --output=flex --style=scripts/roads.lua --log-level=warn -H 127.0.0.1 -P "$P0" -U postgres -d "$FLEET_DB" data/helsinki.osm.pbf
afo_psql "$P0" "$FLEET_DB" -c "ALTER TABLE roads ADD PRIMARY KEY (osm_id)" >/dev/null
for i in 1 2; do
	afo_psql "$(pport $i)" "$FLEET_DB" -c "CREATE EXTENSION postgis" >/dev/null
	"$PG_BIN/pg_dump" -h 127.0.0.1 -p "$P0" -U postgres -t roads "$FLEET_DB" | afo_psql "$(pport $i)" "$FLEET_DB" >/dev/null
done

# three strips of longitude with a third of the roads each
read -r x1 x2 < <(afo_psql "$P0" "$FLEET_DB" -At -F ' ' -c "SELECT percentile_disc(1/3.0) WITHIN GROUP (ORDER BY x),
	percentile_disc(2/3.0) WITHIN GROUP (ORDER BY x) FROM (SELECT ST_X(ST_PointOnSurface(geom)) AS x FROM roads) s")
setup_sql="CREATE EXTENSION trafficdb; CREATE EXTENSION postgres_fdw;"
for i in 0 1 2; do
	r=${REGIONS[$i]}
	setup_sql+="
CREATE SERVER region_$r FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1,127.0.0.1',
  port '$(pport $i),$(sport $i)', dbname '$FLEET_DB', target_session_attrs 'read-write', extensions 'postgis', fetch_size '10000');
CREATE USER MAPPING FOR postgres SERVER region_$r;"
done
setup_sql+="
INSERT INTO trafficdb.regions (name, area, server) VALUES
  ('west',   ST_Multi(ST_MakeEnvelope(-180, -90, $x1, 90, 4326)), 'region_west'),
  ('centre', ST_Multi(ST_MakeEnvelope($x1, -90, $x2, 90, 4326)), 'region_centre'),
  ('east',   ST_Multi(ST_MakeEnvelope($x2, -90, 180, 90, 4326)), 'region_east');
UPDATE trafficdb.regions r SET bounds = (SELECT ST_Envelope(ST_Collect(geom)) FROM roads WHERE trafficdb.region_of(geom) = r.name);"

for i in 0 1 2; do
	r=${REGIONS[$i]}
	say "region $r: its map, then a synchronous secondary on 127.0.0.1:$(sport $i)"
	afo_psql "$(pport $i)" "$FLEET_DB" -c "$setup_sql" >/dev/null
	afo_psql "$(pport $i)" "$FLEET_DB" -At -c "SELECT 'loaded ' || trafficdb.load_map('roads', 'osm_id', 'geom', 'highway', 'name', 'maxspeed', 'oneway', region => '$r') || ' locations of region $r'"
	afo_node_create "$dir/${r}_2" "$(sport $i)" "${r}_2" "$dir/monitor" "region_$r" "$FLEET_DB" secondary "${node_conf[@]}"
	afo_wait_healthy "$dir/monitor" "region_$r" 120
done

say "a feed to each region, through its multi-host connection string"
for i in 0 1 2; do
	r=${REGIONS[$i]}
	echo "region $r: $(conninfo $i)"
	"$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -U postgres -d "$(conninfo $i)" -c "
INSERT INTO trafficdb.feed (location_id, speed_kmh, congestion)
SELECT location_id, 10 + location_id % 40, (location_id % 5)::smallint FROM trafficdb.locations WHERE road_class = 'primary';" \
		-c "SELECT trafficdb.publish()" >/dev/null
done
echo "a feed row of the east sent to the west is refused:"
east_loc=$(afo_psql "$(pport 2)" "$FLEET_DB" -At -c "SELECT min(location_id) FROM trafficdb.locations")
"$PG_BIN/psql" -X -q -U postgres -d "$(conninfo 0)" -c "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES ($east_loc, 5)" 2>&1 | sed 's/^/  /' || true

say "the global table (on region west's primary)"
afo_psql "$P0" "$FLEET_DB" -At -c "SELECT trafficdb.create_global_locations() || ' regions in trafficdb_global.locations'"
afo_psql "$P0" "$FLEET_DB" -c "SELECT region, count(*) AS locations, round(avg(speed_kmh)::numeric, 1) AS avg_speed_kmh
	FROM trafficdb_global.locations GROUP BY region ORDER BY region"
# a point of the centre's bounds outside the others' (roads cross the borders)
read -r cx cy < <(afo_psql "$P0" "$FLEET_DB" -At -F ' ' -c "SELECT ST_X(p), ST_Y(p) FROM (SELECT ST_PointOnSurface(ST_Difference(c.bounds,
	(SELECT ST_Union(bounds) FROM trafficdb.regions WHERE name <> 'centre'))) AS p FROM trafficdb.regions c WHERE c.name = 'centre') s")
box="ST_MakeEnvelope($cx - 0.0003, $cy - 0.0003, $cx + 0.0003, $cy + 0.0003, 4326)"
echo "a box in the centre region contacts only the centre's node:"
afo_psql "$P0" "$FLEET_DB" -c "EXPLAIN (VERBOSE, COSTS OFF) SELECT location_id, name, speed_kmh FROM trafficdb_global.locations WHERE geom && $box"

say "kill -9 of region centre's primary (keeper and postmaster) while writing"
old=$(afo_primary_port "$dir/monitor" region_centre)
case "$old" in
"$(pport 1)") victim=$dir/centre_1 new=$(sport 1) ;;
*) victim=$dir/centre_2 new=$(pport 1) ;;
esac
gen_before=$(afo_psql "$old" "$FLEET_DB" -At -c "SELECT generation FROM trafficdb.status")
# the standby's daemon, a follower now: the same process must go on as the writer
daemon_before=$(afo_psql "$new" "$FLEET_DB" -At -c "SELECT daemon_pid || ' ' || map_id FROM trafficdb.status")
loc=$(afo_psql "$old" "$FLEET_DB" -At -c "SELECT min(location_id) FROM trafficdb.locations")
last_ok=$(date +%s.%N)
afo_kill "$victim"
t_kill=$(date +%s.%N)
first_ok=
for k in $(seq 1 600); do
	if "$PG_BIN/psql" -X -q -U postgres -d "$(conninfo 1)" -c "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES ($loc, $((k % 100)))" >/dev/null 2>&1; then
		first_ok=$(date +%s.%N)
		break
	fi
	sleep 0.1
done
[ -n "$first_ok" ] || die "no write succeeded in region centre within 60 s of the kill"
gen_after=
for _ in $(seq 1 200); do
	gen_after=$(afo_psql "$new" "$FLEET_DB" -At -c "SELECT generation FROM trafficdb.status WHERE generation > $gen_before AND role = 'primary'" 2>/dev/null || true)
	[ -n "$gen_after" ] && break
	sleep 0.05
done
t_gen=$(date +%s.%N)
daemon_after=$(afo_psql "$new" "$FLEET_DB" -At -c "SELECT daemon_pid || ' ' || map_id FROM trafficdb.status")
if [ "$daemon_after" = "$daemon_before" ]; then
	rebuilt="its follower daemon (pid ${daemon_after% *}) went on as the writer: same process, same map"
else
	rebuilt="its daemon changed ($daemon_before -> $daemon_after): it started again"
fi
awk -v a="$last_ok" -v k="$t_kill" -v b="$first_ok" -v g="$t_gen" -v o="$old" -v n="$new" -v gb="$gen_before" -v ga="$gen_after" -v rb="$rebuilt" 'BEGIN {
	printf "primary 127.0.0.1:%s killed; 127.0.0.1:%s promoted; %s\n", o, n, rb
	printf "failover: last write on the old primary -> first write on the new one: %.1f s\n", b - a
	printf "          -> first new generation on the new primary: %.1f s (generation %s -> %s)\n", g - a, gb, ga }'
afo_psql "$new" "$FLEET_DB" -c "SELECT role, generation, region, locations, replay_mismatches FROM trafficdb.status"

say "the killed node comes back as the secondary"
afo_rejoin "$victim"
afo_wait_healthy "$dir/monitor" region_centre 180

say "the fleet"
for r in "${REGIONS[@]}"; do afo_state "$dir/monitor" "region_$r"; echo; done
echo "node | region | role | generation | locations | replay_lag_generations"
for i in 0 1 2; do
	for p in "$(pport $i)" "$(sport $i)"; do
		afo_psql "$p" "$FLEET_DB" -At -F ' | ' -c "SELECT '127.0.0.1:$p', region, role, generation, locations, replay_lag_generations FROM trafficdb.status"
	done
done
echo
echo "fleet: running under $dir; monitor 127.0.0.1:$BASE, regions on ports $((BASE + 1))-$((BASE + 6)); make fleet-stop stops it"
