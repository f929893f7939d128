#!/usr/bin/env bash
# bench/sub_baselines.sh [LOCATIONS] [SUBSCRIPTIONS] [ROUNDS] [CHANGES]: what
# a user would run instead of trafficdb's subscriptions (issue 18), on one
# workload, same machine, same run (Tile38 is not obtainable here).
#
# The workload (bench/sub_workload.h; bench/sub_baselines gen), written once
# to a file that every side reads: a map of LOCATIONS points (default
# 100,000) on a grid over Helsinki; SUBSCRIPTIONS boxes (default 1,000, 9 to
# 36 locations each), half 'any change' with 'change' events, half
# congestion_at_least 3 with 'enter_exit' events; ROUNDS (default 20) of
# CHANGES distinct locations each (default 10,000) with new speed and
# congestion; seeded (SUB_SEED, 18), with the expected event count found by
# brute force (every change against every subscription).
#
#   redis       a redis-server of our own on 127.0.0.1:REDIS_PORT (6392),
#               pub-sub buffers unlimited; CONSUMERS (2) processes SUBSCRIBE;
#               one publisher PUBLISHes every change (id, old and new values),
#               SUB_PIPELINE (1000) commands per write; each consumer holds
#               half of the subscriptions in a grid index and filters every
#               message (bench/sub_baselines.c)
#   notify      PostgreSQL: table sub_traffic, an AFTER UPDATE FOR EACH ROW
#               trigger that pg_notify()s every changed row (same payload);
#               each round one UPDATE of its CHANGES rows from sub_changes in
#               one transaction; CONSUMERS libpq sessions LISTEN and filter as
#               the Redis consumers do
#   notify_stmt the same with a FOR EACH STATEMENT trigger over the transition
#               tables (one pg_notify per row, from one trigger call)
#   update_only the same UPDATEs with no trigger and no listener: what storing
#               the changes costs before anyone is told (CPU per expected event)
#   trafficdb   the hook sub_trafficdb_side below: our side (subscriptions and
#               rings) on the same workload file, each round fed through SQL
#               (trafficdb.feed) and published by trafficdb.publish()
#   put         our side fed by trafficdb_put instead (bench/sub_put.c): one
#               producer puts each round with trafficdb_put_many
#               (TRAFFICDB_ASYNC, SUB_PIPELINE updates a call) and waits for
#               its publication (trafficdb_sync) before the next; CONSUMERS
#               subscribers (rings, one group tapping every subscription)
#               check every event against the workload (wrong=0) and count
#               them; CPU: the daemon (server), producer and consumers (clients)
#   put_batch   the same, each round ended by trafficdb_end_batch instead of
#               trafficdb_sync: the daemon publishes the round at once, on
#               its own, while the producer puts the next (one sync after
#               the last round)
#
# Each side runs SUB_REPEATS times (5), interleaved; the median is reported.
# Our sides need subscriber rings that hold what a consumer can fall behind
# by: a round's events per consumer (about 7,400 at 10,000 subscriptions)
# past trafficdb.subscriber_ring_events (4,096 by default; a restart) end
# in OVERRUN events, which the check reports as such; 32,768 holds them.
# SUB_SIDES (default all: "redis notify notify_stmt update_only trafficdb put put_batch")
# picks the sides; redis always runs (it is the baseline).
# Measures (section subscriptions, x = SUBSCRIPTIONS):
#   <side>_events_per_s      events counted / (first PUBLISH or UPDATE to the
#                            last change handled by a consumer)
#   <side>_cpu_us_per_event  CPU of the publisher, the consumers (getrusage)
#                            and the server (redis-server's threads, or the
#                            publisher's and consumers' PostgreSQL backends:
#                            /proc/<pid>/task/*/schedstat) / events
#   notify*_cluster_cpu_us_per_event  the same with every process of the
#                            cluster instead of those backends (walwriter,
#                            checkpointer, autovacuum, trafficdb's daemon...)
#   <side>_changes_per_s     changes published / wall time
#   put[_batch]_round_put_ms, put[_batch]_round_sync_ms  a round's time in trafficdb_put_many,
#                            then in trafficdb_sync (the daemon's cycle; put_batch: in
#                            trafficdb_end_batch, and the last round's sync)
#   expected_events          the brute-force count; every run must match it
#
# Runs on bench_cluster's cluster (BENCH_PORT, BENCH_DB override), which must
# be local (the backends' CPU is read in /proc).  SUB_WORKLOAD=FILE keeps the
# workload file (written when absent, reused when present); SUB_MAX_SECONDS
# (300) bounds each run.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

N=${1:-${SUB_LOCATIONS:-100000}}
S=${2:-${SUB_SUBSCRIPTIONS:-1000}}
R=${3:-${SUB_ROUNDS:-20}}
K=${4:-${SUB_CHANGES:-10000}}
SEED=${SUB_SEED:-18}
CONSUMERS=${CONSUMERS:-2}
PIPELINE=${SUB_PIPELINE:-1000}
REPEATS=${SUB_REPEATS:-5}
SIDES=${SUB_SIDES:-redis notify notify_stmt update_only trafficdb put put_batch}
for side in $SIDES; do
	case $side in redis | notify | notify_stmt | update_only | trafficdb | put | put_batch) ;;
	*) die "SUB_SIDES: '$side' is not a side (expected some of: redis notify notify_stmt update_only trafficdb put put_batch)" ;;
	esac
done
case " $SIDES " in *" redis "*) ;; *) SIDES="redis $SIDES" ;; esac
RPORT=${REDIS_PORT:-6392}
export SUB_MAX_SECONDS=${SUB_MAX_SECONDS:-300}

bench_cluster
bench_deps
make -s bench/sub_baselines >/dev/null	# libpq from the system's headers (the Makefile's PG_CONFIG)
CONNINFO="host=127.0.0.1 port=$port user=postgres dbname=$DB"
tmp=$(mktemp -d /tmp/tdb-subbase.XXXXXX)
chmod 755 "$tmp"
cleanup() {
	if [ -f "$tmp/redis.pid" ]; then stop_pidfile "$tmp/redis.pid"; fi
	if [ -n "$ours_ready" ]; then
		"${PSQL[@]}" -c "DELETE FROM trafficdb.subscriptions" -c "DROP TABLE IF EXISTS sub_map" >/dev/null 2>&1 || true
		bench_restore_map >/dev/null 2>&1 || true
	fi
	"${PSQL[@]}" -c "DROP TABLE IF EXISTS sub_traffic, sub_changes, sub_locations" \
		-c "DROP FUNCTION IF EXISTS sub_traffic_notify_row(), sub_traffic_notify_stmt()" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
ours_ready=
trap cleanup EXIT
emit() { bench_emit subscriptions "$1" "$S" "$2" "$3" "${4:-}" "${5:-}"; }
val() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }

# ---- the workload, once ----
WL=${SUB_WORKLOAD:-$tmp/workload.bin}
if [ -s "$WL" ]; then
	info=$(bench/sub_baselines info "$WL")
	echo "bench/sub_baselines: reusing $WL" >&2
	N=$(val n "$info"); S=$(val s "$info"); R=$(val r "$info"); K=$(val k "$info")
else
	info=$(bench/sub_baselines gen "$WL" "$N" "$S" "$R" "$K" "$SEED")
fi
expected=$(val expected "$info")
echo "bench/sub_baselines: $N locations, $S subscriptions, $R rounds of $K changes, $CONSUMERS consumers:" \
	"$expected events expected ($(val change "$info") change, $(val enter "$info") enter, $(val exit "$info") exit)" >&2
mkdir -p "$tmp/csv"
bench/sub_baselines csv "$WL" "$tmp/csv"

# ---- Redis ----
redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
	--client-output-buffer-limit "pubsub 0 0 0" --pidfile "$tmp/redis.pid" --logfile "$tmp/redis.log"
for _ in $(seq 50); do redis-cli -p "$RPORT" ping >/dev/null 2>&1 && [ -s "$tmp/redis.pid" ] && break; sleep 0.1; done
redis-cli -p "$RPORT" ping >/dev/null || die "redis-server on port $RPORT did not start (see $tmp/redis.log)"
run_redis() { bench/sub_baselines redis "$WL" "$RPORT" "$(cat "$tmp/redis.pid")" "$CONSUMERS" "$PIPELINE"; }

# ---- PostgreSQL LISTEN/NOTIFY ----
"${PSQL[@]}" <<EOF
SET client_min_messages = warning;
DROP TABLE IF EXISTS sub_traffic, sub_changes, sub_locations;
CREATE TABLE sub_locations (location_id bigint PRIMARY KEY, lon float8 NOT NULL, lat float8 NOT NULL,
                            speed_kmh real NOT NULL, congestion smallint NOT NULL);
\copy sub_locations FROM '$tmp/csv/locations.csv' CSV
CREATE TABLE sub_changes (round int, location_id bigint, speed_kmh real NOT NULL, congestion smallint NOT NULL,
                          PRIMARY KEY (round, location_id));
\copy sub_changes FROM '$tmp/csv/changes.csv' CSV
CREATE TABLE sub_traffic (location_id bigint PRIMARY KEY, speed_kmh real NOT NULL, congestion smallint NOT NULL);
VACUUM ANALYZE sub_locations, sub_changes;

-- what a user writes: every changed row notified, "<id> <old speed> <old congestion> <new speed> <new congestion>"
CREATE OR REPLACE FUNCTION sub_traffic_notify_row() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
	PERFORM pg_notify('sub_traffic', format('%s %s %s %s %s', NEW.location_id, OLD.speed_kmh, OLD.congestion,
	                                        NEW.speed_kmh, NEW.congestion));
	RETURN NULL;
END \$\$;
-- the same from one call per statement, over the transition tables
CREATE OR REPLACE FUNCTION sub_traffic_notify_stmt() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
	PERFORM pg_notify('sub_traffic', format('%s %s %s %s %s', n.location_id, o.speed_kmh, o.congestion,
	                                        n.speed_kmh, n.congestion))
	   FROM sub_new n JOIN sub_old o USING (location_id)
	  WHERE (n.speed_kmh, n.congestion) IS DISTINCT FROM (o.speed_kmh, o.congestion);
	RETURN NULL;
END \$\$;
EOF

# notify_setup row|stmt: the table back to its initial values, with that trigger
notify_setup() {
	local trig
	if [ "$1" = none ]; then
		trig="SELECT 1"
	elif [ "$1" = row ]; then
		trig="CREATE TRIGGER sub_traffic_notify AFTER UPDATE ON sub_traffic FOR EACH ROW
		      WHEN (OLD.speed_kmh IS DISTINCT FROM NEW.speed_kmh OR OLD.congestion IS DISTINCT FROM NEW.congestion)
		      EXECUTE FUNCTION sub_traffic_notify_row()"
	else
		trig="CREATE TRIGGER sub_traffic_notify AFTER UPDATE ON sub_traffic
		      REFERENCING OLD TABLE AS sub_old NEW TABLE AS sub_new
		      FOR EACH STATEMENT EXECUTE FUNCTION sub_traffic_notify_stmt()"
	fi
	"${PSQL[@]}" -c "SET client_min_messages = warning" -c "DROP TRIGGER IF EXISTS sub_traffic_notify ON sub_traffic" -c "TRUNCATE sub_traffic" \
		-c "INSERT INTO sub_traffic SELECT location_id, speed_kmh, congestion FROM sub_locations" \
		-c "$trig" -c "VACUUM ANALYZE sub_traffic" -c "CHECKPOINT" >/dev/null
}
run_notify() { notify_setup "$1" && bench/sub_baselines notify "$WL" "$CONNINFO" "$2"; }

# ==== HOOK: trafficdb's side (subscriptions + rings), on the same workload ====
# sub_trafficdb_side WORKLOAD CSVDIR CONNINFO CONSUMERS: measure our delivery
# and print one line of key=value pairs, as bench/sub_baselines does:
#   events=<counted by the consumers> wall_ns=<first change fed to the last
#   event handled> clients_cpu_ns=<feeder + consumers> server_cpu_ns=<backends
#   and trafficdb's daemon> [change=.. enter=.. exit=.. changes=..]
# or nothing when it is not built.  It must publish each round as ONE
# generation (enter/exit are defined between consecutive rounds) for the count
# to equal expected_events.  The workload: bench/sub_workload.h (sub_wl_read()
# gives the points, the initial values, the boxes and the changes, round by
# round); the same as CSV in CSVDIR (locations.csv: id,lon,lat,speed,congestion;
# changes.csv: round,id,speed,congestion; subscriptions.csv: id,xmin,ymin,
# xmax,ymax,condition,value,events: ready for trafficdb.subscriptions with
# ST_MakeEnvelope); in the database, table sub_locations.  Each point lies at
# least half a grid cell (dx/2, dy/2 in the header) from every box's edge, so a
# map of short segments from the points gives the same matches.  Until then,
# SUB_TRAFFICDB_CMD names a program taking those four arguments.
# trafficdb: the boxes as rows of trafficdb.subscriptions (the daemon matches
# them at each publication); CONSUMERS subscribers (tools/tdbsub) in one group
# tap the events of every subscription (each event to one of them); each round
# fed as one transaction and published as one generation.  CPU from /proc:
# the consumers and psql (clients), the feeding backend and the daemon (server).
cpu_ns() { # pid: user + system CPU of a live process, in ns
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.0f", ($12 + $13) * 1e9 / hz }' "/proc/$1/stat" 2>/dev/null || echo 0
}
sub_trafficdb_side() {
	if [ -n "${SUB_TRAFFICDB_CMD:-}" ]; then
		$SUB_TRAFFICDB_CMD "$1" "$2" "$3" "$4"
		return
	fi
	local csv=$2 consumers=$4 dir pids=() daemon d0 t0 t1 n feeder fpid psql_pid total
	make -s tools/tdbsub >/dev/null || return 0
	dir=$(mktemp -d "$tmp/ours.XXXXXX")
	chmod 755 "$dir"
	ours_setup "$csv"
	"${PSQL[@]}" >/dev/null <<EOSQL
INSERT INTO trafficdb.feed (location_id, speed_kmh, congestion) SELECT location_id, speed_kmh, congestion FROM sub_locations;
SELECT trafficdb.publish();
EOSQL
	for i in $(seq 1 "$consumers"); do
		as_pg tools/tdbsub "/trafficdb.$port" --all-subscriptions --group bench --timeout-ms 20000 >"$dir/c$i" 2>"$dir/e$i" &
		pids+=($!)
	done
	for _ in $(seq 200); do [ "$(cat "$dir"/c* | grep -c ready)" = "$consumers" ] && break; sleep 0.05; done
	"${PSQL[@]}" -c "SELECT trafficdb.publish()" >/dev/null	# the daemon attaches them
	daemon=$("${PSQL[@]}" -Atc "SELECT daemon_pid FROM trafficdb.status")
	{
		echo "SET application_name = 'sub_feeder';"
		for r in $(seq 0 $((R - 1))); do	# changes.csv counts rounds from 0
			echo "INSERT INTO trafficdb.feed (location_id, speed_kmh, congestion) SELECT location_id, speed_kmh, congestion FROM sub_changes WHERE round = $r;"
			echo "SELECT trafficdb.publish();"
		done
		echo "SELECT pg_sleep(30);"
	} >"$dir/rounds.sql"
	d0=$(cpu_ns "$daemon")
	t0=$(date +%s%N)
	"${PSQL[@]}" -f "$dir/rounds.sql" >/dev/null 2>&1 &
	psql_pid=$!
	total=0
	for _ in $(seq 1 30000); do	# bounded: 300 s
		total=$(cat "$dir"/c* | grep -cE '^(change|enter|exit) ')
		[ "$total" -ge "$expected" ] && break
		kill -0 "$psql_pid" 2>/dev/null || { sleep 0.5; total=$(cat "$dir"/c* | grep -cE '^(change|enter|exit) '); break; }
		sleep 0.01
	done
	t1=$(date +%s%N)
	fpid=$("${PSQL[@]}" -Atc "SELECT pid FROM pg_stat_activity WHERE application_name = 'sub_feeder'")
	feeder=$(( $(cpu_ns "${fpid:-0}") + $(cpu_ns "$daemon") - d0 ))
	n=0
	for p in $(pgrep -f "tdbsub /trafficdb.$port --all-subscriptions --group bench"); do n=$((n + $(cpu_ns "$p"))); done
	n=$((n + $(cpu_ns "$psql_pid")))
	kill "${pids[@]}" "$psql_pid" 2>/dev/null
	pkill -f "tdbsub /trafficdb.$port --all-subscriptions --group bench" 2>/dev/null
	wait 2>/dev/null
	[ -n "$fpid" ] && "${PSQL[@]}" -c "SELECT pg_cancel_backend($fpid)" >/dev/null 2>&1
	echo "events=$total published=$((R * K)) wall_ns=$((t1 - t0)) clients_cpu_ns=$n server_cpu_ns=$feeder" \
		"change=$(cat "$dir"/c* | grep -c '^change ') enter=$(cat "$dir"/c* | grep -c '^enter ') exit=$(cat "$dir"/c* | grep -c '^exit ')"
}
# ==== end of the hook ====

# ours_setup CSVDIR: once per run of the script, the workload's map (a short
# segment from each point) and its subscriptions as rows (name: the
# workload's subscription number), for both of our sides; cleanup undoes it
ours_setup() {
	[ -z "$ours_ready" ] || return 0
	ours_ready=1
	"${PSQL[@]}" >/dev/null <<EOSQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS sub_map;
CREATE TABLE sub_map AS
SELECT location_id AS id, ST_SetSRID(ST_MakeLine(ST_MakePoint(lon, lat), ST_MakePoint(lon + 1e-6, lat)), 4326) AS geom
  FROM sub_locations;
SELECT trafficdb.load_map('sub_map', 'id', 'geom');
DELETE FROM trafficdb.subscriptions;
CREATE TEMP TABLE s (id int, x0 float8, y0 float8, x1 float8, y1 float8, condition text, value float8, events text);
\copy s FROM '$1/subscriptions.csv' CSV
INSERT INTO trafficdb.subscriptions (name, area, condition, value, events)
SELECT id::text, ST_MakeEnvelope(x0, y0, x1, y1, 4326), coalesce(nullif(condition, ''), 'any'), value, events FROM s;
SELECT trafficdb.publish();
EOSQL
}

# sub_put_side WORKLOAD CSVDIR CONSUMERS END: our side fed by trafficdb_put (bench/sub_put.c),
# each round ended by trafficdb_sync (END sync) or trafficdb_end_batch (END batch)
sub_put_side() {
	local shm
	make -s bench/sub_put >/dev/null
	ours_setup "$2"
	shm=$("${PSQL[@]}" -Atc "SHOW trafficdb.shm_name")
	# as the cluster's owner (as the hook's tdbsub): a writer and subscriber it may open
	as_pg env SUB_PUT_END="$4" bench/sub_put "$1" "${shm:-/trafficdb.$port}" "$CONNINFO" "$3" "$PIPELINE"
}

check() { # side result-line
	local ev
	ev=$(val events "$2")
	if [ "$(val overruns "$2")" != "" ] && [ "$(val overruns "$2")" != 0 ]; then
		echo "bench/sub_baselines: $1: $(val dropped "$2") events dropped in $(val overruns "$2") overruns:" \
			"a consumer fell further behind than its ring holds (trafficdb.subscriber_ring_events = $ring_events);" \
			"raise it (a restart) for this workload, whose rounds give about $((expected / R)) events each: $2" >&2
		return 1
	fi
	[ "$ev" = "$expected" ] || { echo "bench/sub_baselines: $1 counted $ev events, expected $expected: $2" >&2; return 1; }
	[ "$(val wrong "$2")" = "" ] || [ "$(val wrong "$2")" = 0 ] ||
		{ echo "bench/sub_baselines: $1 received $(val wrong "$2") events the workload does not give: $2" >&2; return 1; }
}
ring_events=$("${PSQL[@]}" -Atc "SHOW trafficdb.subscriber_ring_events" 2>/dev/null || echo "?")
: >"$tmp/runs"
for rep in $(seq 1 "$REPEATS"); do
	for side in $SIDES; do
		case $side in trafficdb | put | put_batch) ours_setup "$tmp/csv" ;; esac	# here: $(...) below is a subshell
		case $side in
		redis) line=$(run_redis) ;;
		notify) line=$(run_notify row "$CONSUMERS") ;;
		notify_stmt) line=$(run_notify stmt "$CONSUMERS") ;;
		update_only) line=$(run_notify none 0) ;;
		trafficdb) line=$(sub_trafficdb_side "$WL" "$tmp/csv" "$CONNINFO" "$CONSUMERS") ;;
		put) line=$(sub_put_side "$WL" "$tmp/csv" "$CONSUMERS" sync) ;;
		put_batch) line=$(sub_put_side "$WL" "$tmp/csv" "$CONSUMERS" batch) ;;
		esac
		[ -n "$line" ] || continue
		if [ "$side" != update_only ]; then check "$side" "$line"; fi
		echo "$side $line" >>"$tmp/runs"
		echo "  run $rep $side: $line" >&2
	done
done

# median over the runs of a side of: events/s, CPU us/event, cluster CPU us/event, changes/s
median() { # printf format
	sort -g | awk -v f="$1\n" '{ v[NR] = $1 } END { if (NR) printf f, (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
figure() { # side what
	grep "^$1 " "$tmp/runs" | while read -r _ l; do
		local w ev
		w=$(val wall_ns "$l"); ev=$(val events "$l")
		if [ "$1" = update_only ]; then ev=$expected; fi	# per event the others deliver
		case $2 in
		eps) awk -v e="$ev" -v w="$w" 'BEGIN { printf "%.0f\n", e / (w / 1e9) }' ;;
		cps) awk -v e="$(val published "$l")" -v w="$w" 'BEGIN { printf "%.0f\n", e / (w / 1e9) }' ;;
		cpu) awk -v e="$ev" -v c="$(val clients_cpu_ns "$l")" -v s="$(val server_cpu_ns "$l")" \
			'BEGIN { printf "%.2f\n", (c + s) / 1000 / e }' ;;
		ccpu) awk -v e="$ev" -v c="$(val clients_cpu_ns "$l")" -v s="$(val cluster_cpu_ns "$l")" \
			'BEGIN { if (s >= 0) printf "%.2f\n", (c + s) / 1000 / e }' ;;
		scpu) awk -v e="$ev" -v s="$(val server_cpu_ns "$l")" 'BEGIN { printf "%.2f\n", s / 1000 / e }' ;;
		putms | syncms) awk -v t="$(val "${2%ms}_ns" "$l")" -v r="$(val rounds "$l")" 'BEGIN { printf "%.2f\n", t / 1e6 / r }' ;;
		esac
	done | case $2 in eps | cps) median %.0f ;; *) median %.2f ;; esac
}

emit expected_events "$expected" count
printf '\n  %-12s %14s %14s %18s %16s %20s\n' side events/s changes/s "CPU us/event" "server us/event" "cluster us/event" >&2
for side in redis notify notify_stmt update_only trafficdb put put_batch; do
	grep -q "^$side " "$tmp/runs" || continue
	eps=$(figure $side eps); [ "$side" = update_only ] && eps=-; cps=$(figure $side cps); cpu=$(figure $side cpu); scpu=$(figure $side scpu); ccpu=$(figure $side ccpu)
	printf '  %-12s %14s %14s %18s %16s %20s\n' "$side" "$eps" "$cps" "$cpu" "$scpu" "${ccpu:--}" >&2
	printf '%s %s %s %s %s\n' "$side" "$eps" "$cps" "$cpu" "$ccpu" >>"$tmp/medians"
done
echo >&2
r_eps=$(awk '$1 == "redis" { print $2 }' "$tmp/medians")
r_cpu=$(awk '$1 == "redis" { print $4 }' "$tmp/medians")
while read -r side eps cps cpu ccpu; do
	if [ "$side" = trafficdb ] || [ "$side" = put ] || [ "$side" = put_batch ]; then
		emit "${side}_events_per_s" "$eps" events/s redis_events_per_s "$r_eps"
		emit "${side}_cpu_us_per_event" "$cpu" us redis_cpu_us_per_event "$r_cpu"
	elif [ "$side" = update_only ]; then
		emit update_only_cpu_us_per_event "$cpu" us	# the UPDATEs without a trigger, per expected event
	else
		emit "${side}_events_per_s" "$eps" events/s
		emit "${side}_cpu_us_per_event" "$cpu" us
	fi
	emit "${side}_changes_per_s" "$cps" changes/s
	if [ -n "$ccpu" ]; then emit "${side}_cluster_cpu_us_per_event" "$ccpu" us; fi
	if [ "$side" = put ] || [ "$side" = put_batch ]; then	# where a round waits: the producer's puts, then the daemon's cycle
		emit "${side}_round_put_ms" "$(figure "$side" putms)" ms
		emit "${side}_round_sync_ms" "$(figure "$side" syncms)" ms
	fi
done <"$tmp/medians"
echo "bench/sub_baselines: every run counted the $expected expected events" >&2
