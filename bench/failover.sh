#!/usr/bin/env bash
# bench/failover.sh: kill -9 a region's primary under load, FAILOVER_KILLS
# times (default 20), and measure the failover (issue 17, "Failover").
#
# One pg_auto_failover formation on 127.0.0.1 (scripts/autoctl.sh): a monitor
# on port FAILOVER_PORT (default 5810), nodes n1 and n2 on the next two ports,
# synchronous replication, trafficdb preloaded on both (shm names
# /tdbfo<port>_n1, _n2), a grid map of 2,000 locations.  Under the load of
# bench/failover_load.py (FAILOVER_WRITERS SQL feed writers over the multi-host
# connection string, a TRAFFICDB_SYNC put writer through libtrafficdb, readers
# of every node and of the current primary), each cycle
#   - kills the primary's keeper and postmaster with kill -9 (afo_kill),
#   - waits for the monitor to make the secondary the primary, and checks that
#     its daemon went on as the writer without a rebuild (the same daemon
#     process, role follower -> primary, the "promoted" line in its log and
#     no map build after it),
#   - starts the killed node's keeper again, which rejoins as the secondary
#     (pg_rewind), and waits until the formation is healthy (a synchronous
#     secondary) and the rejoined node's daemon follows the new primary.
# At the end a last publication, and bench/failover_check.py: every location
# publishes its last acknowledged write (or one in flight after it), no
# reader saw a generation go backwards, and the failover times per kill
#   (i)  last acknowledged write on the old primary -> first on the new one,
#   (ii) the same start -> first newer generation visible on the new primary,
# with their median and max, emitted with bench_emit (section failover).
#
# Environment: FAILOVER_KILLS (20), FAILOVER_WRITERS (4), FAILOVER_PORT (5810),
# FAILOVER_DIR (/tmp/trafficdb-failover.<port>), FAILOVER_LOAD_SECONDS
# (load between two kills, 3), FAILOVER_PUBLISH_INTERVAL ('1s'),
# FAILOVER_KEEP=1 (leave the formation running at the end), TDB_PG_CONFIG
# (a private copy of PostgreSQL 15 with trafficdb and pg_autoctl installed).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. scripts/autoctl.sh

KILLS=${FAILOVER_KILLS:-20}
WRITERS=${FAILOVER_WRITERS:-4}
PORT=${FAILOVER_PORT:-5810}
DIR=${FAILOVER_DIR:-/tmp/trafficdb-failover.$PORT}
LOAD_S=${FAILOVER_LOAD_SECONDS:-3}
PUBLISH_INTERVAL=${FAILOVER_PUBLISH_INTERVAL:-1s}
DB=tdbfo
P1=$((PORT + 1))
P2=$((PORT + 2))
SHM=/tdbfo${PORT}

say "failover: $KILLS kills of the primary, $WRITERS SQL writers + a SYNC put writer, in $DIR"
[ -x "$AFO_PG_AUTOCTL" ] || die "no pg_autoctl: scripts/deps.sh installs postgresql-$PG_MAJOR-auto-failover"
[ -f lib/libtrafficdb.so ] || make -s lib/libtrafficdb.so

load_pid=
stop_all() {
	[ -n "$load_pid" ] && { touch "$DIR/out/stop" 2>/dev/null || true; wait "$load_pid" 2>/dev/null || true; }
	if [ "${FAILOVER_KEEP:-0}" != 1 ]; then
		for n in n1 n2 mon; do [ -d "$DIR/$n" ] && afo_stop "$DIR/$n" >/dev/null 2>&1 || true; done
		rm -f /dev/shm/"${SHM#/}"_* 2>/dev/null || true
	fi
}
# a previous run's formation
for n in n1 n2 mon; do [ -d "$DIR/$n/xdg" ] && afo_stop "$DIR/$n" >/dev/null 2>&1 || true; done
rm -rf "$DIR"
rm -f /dev/shm/"${SHM#/}"_* 2>/dev/null || true
make_pg_dir "$DIR"
trap stop_all EXIT

node_conf=("trafficdb.publish_interval = '$PUBLISH_INTERVAL'")
echo "formation: monitor :$PORT, n1 :$P1 (primary), n2 :$P2"
afo_monitor_create "$DIR/mon" "$PORT" || die "monitor"
afo_node_create "$DIR/n1" "$P1" n1 "$DIR/mon" default "$DB" primary "trafficdb.shm_name = '${SHM}_n1'" "${node_conf[@]}" ||
	die "node n1"
afo_psql "$P1" "$DB" -f test/grid_map.sql >/dev/null
afo_node_create "$DIR/n2" "$P2" n2 "$DIR/mon" default "$DB" secondary "trafficdb.shm_name = '${SHM}_n2'" "${node_conf[@]}" ||
	die "node n2"
afo_wait_healthy "$DIR/mon" default 120 || die "the formation did not become healthy"
afo_state "$DIR/mon"

# the load, as the cluster account (the put writer and the shared memory
# readers need its access to /dev/shm), from a copy it can read; its
# connections log in as the superuser the nodes' initdb made (PGUSER: the
# OS account's name is a role only when it is postgres)
make_pg_dir "$DIR/out"
make_pg_dir "$DIR/client"
cp -r python/trafficdb bench/failover_load.py bench/failover_check.py lib/libtrafficdb.so "$DIR/client/"
[ "$(id -u)" = 0 ] && chown -R "$PG_OS_USER": "$DIR/client"
DSN="host=127.0.0.1,127.0.0.1 port=$P1,$P2 dbname=$DB target_session_attrs=read-write connect_timeout=2"
as_pg env PGUSER=postgres PYTHONPATH="$DIR/client" TRAFFICDB_LIB="$DIR/client/libtrafficdb.so" python3 "$DIR/client/failover_load.py" \
	--dsn "$DSN" --nodes "$P1:${SHM}_n1,$P2:${SHM}_n2" --db "$DB" --writers "$WRITERS" \
	--out "$DIR/out" --stop "$DIR/out/stop" --seconds $((KILLS * 120 + 120)) 2>"$DIR/out/load.err" &
load_pid=$!
sleep "$LOAD_S"

dir_of() { [ "$1" = "$P1" ] && echo "$DIR/n1" || echo "$DIR/n2"; }
count_log() { cat "$(afo_log_dir "$1")"/*.log 2>/dev/null | grep -c "$2" || true; }
status_of() { afo_psql "$1" "$DB" -At -F ' ' -c "SELECT daemon_pid, role, generation FROM trafficdb.status" 2>/dev/null || true; }
: >"$DIR/out/kills.log"
for k in $(seq 1 "$KILLS"); do
	old=$(afo_primary_port "$DIR/mon" default)
	[ "$old" = "$P1" ] && new=$P2 || new=$P1
	olddir=$(dir_of "$old")
	newdir=$(dir_of "$new")
	read -r pid_before role_before _ <<<"$(status_of "$new")"
	maps_before=$(count_log "$newdir" 'trafficdb: loaded map')
	promoted_before=$(count_log "$newdir" 'trafficdb: promoted: publishing as the primary')
	sleep "$LOAD_S"

	t_kill=$(date +%s.%N)
	afo_kill "$olddir" || die "kill $k: afo_kill failed"
	afo_wait_state "$newdir" wait_primary 60 || die "kill $k: node :$new was not promoted within 60 s"
	t_promoted=$(date +%s.%N)
	# let the writers and readers find it
	sleep 2
	read -r pid_after role_after gen_after <<<"$(status_of "$new")"
	maps_after=$(count_log "$newdir" 'trafficdb: loaded map')
	promoted_after=$(count_log "$newdir" 'trafficdb: promoted: publishing as the primary')
	# the last generation the old primary logged: the new one publishes after it
	gpromo=$(cat "$(afo_log_dir "$newdir")"/*.log | sed -n 's/.*trafficdb: promoted: publishing as the primary after generation \([0-9]*\).*/\1/p' | tail -n 1)
	norebuild=0
	[ "$pid_before" = "$pid_after" ] && [ "$role_before" = follower ] && [ "$role_after" = primary ] &&
		[ "$maps_before" = "$maps_after" ] && [ "$promoted_after" = $((promoted_before + 1)) ] && norebuild=1
	detail="daemon_pid=$pid_before->$pid_after role=$role_before->$role_after map_builds+$((maps_after - maps_before)) promoted+$((promoted_after - promoted_before))"

	# the killed node rejoins as the secondary; its daemon must follow again
	t_rejoin=$(date +%s.%N)
	afo_rejoin "$olddir" || die "kill $k: the keeper of :$old did not start"
	afo_wait_healthy "$DIR/mon" default 180 || die "kill $k: the formation did not become healthy again"
	gen_p=$(afo_psql "$new" "$DB" -At -c "SELECT generation FROM trafficdb.status")
	follows=0
	for _ in $(seq 1 150); do
		read -r _ role_o gen_o <<<"$(status_of "$old")"
		[ "$role_o" = follower ] && [ "${gen_o:-0}" -ge "$gen_p" ] && { follows=1; break; }
		sleep 0.2
	done
	[ $follows = 1 ] || { norebuild=0; detail="$detail; rejoined :$old does not follow (role ${role_o:-?}, generation ${gen_o:-?} < $gen_p)"; }
	t_healthy=$(date +%s.%N)
	echo "K $t_kill $old $new $norebuild ${gpromo:-0} $detail" >>"$DIR/out/kills.log"
	printf 'kill %2d: :%s -> :%s promoted after %.1f s, healthy again %.1f s after the restart; %s\n' "$k" "$old" "$new" \
		"$(awk -v a="$t_kill" -v b="$t_promoted" 'BEGIN { print b - a }')" "$(awk -v a="$t_rejoin" -v b="$t_healthy" 'BEGIN { print b - a }')" "$detail"
done
sleep "$LOAD_S"
touch "$DIR/out/stop"
wait "$load_pid" || die "the load failed: $(tail -n 5 "$DIR/out/load.err")"
load_pid=

# a last publication on the primary, and what it publishes
final=$(afo_primary_port "$DIR/mon" default)
afo_psql "$final" "$DB" -At -c "SELECT trafficdb.publish()" >/dev/null
afo_psql "$final" "$DB" -At -c "SELECT location_id || '|' || coalesce(incident, '') FROM trafficdb.locations ORDER BY 1" \
	>"$DIR/out/final.txt"
afo_state "$DIR/mon"

say "failover: the verdict (bench/failover_check.py)"
rc=0
python3 bench/failover_check.py "$DIR/out" | tee "$DIR/out/verdict.txt" || rc=$?
v() { sed -n "s/^$1=//p" "$DIR/out/verdict.txt"; }
bench_emit failover kills "$WRITERS" "$(v kills)" count
bench_emit failover writes_acked "$WRITERS" "$(v writes_acked)" count
bench_emit failover writes_lost "$WRITERS" "$(v lost)" count
bench_emit failover generation_regressions "$WRITERS" "$(v regressions)" count
bench_emit failover daemon_rebuilds "$WRITERS" "$(v rebuilds)" count
bench_emit failover write_to_write_median "$WRITERS" "$(v t1_median_s)" s
bench_emit failover write_to_write_max "$WRITERS" "$(v t1_max_s)" s
bench_emit failover write_to_generation_median "$WRITERS" "$(v t2_median_s)" s
bench_emit failover write_to_generation_max "$WRITERS" "$(v t2_max_s)" s
echo
echo "failover: $(v kills) kills, $(v writes_acked) acknowledged writes, $(v lost) lost, $(v regressions) generation regressions," \
	"$(v rebuilds) daemon rebuilds; last write -> first write on the new primary: median $(v t1_median_s) s, max $(v t1_max_s) s;" \
	"-> first new generation: median $(v t2_median_s) s, max $(v t2_max_s) s"
[ $rc = 0 ] || die "failover: FAILED (see $DIR/out/verdict.txt)"
