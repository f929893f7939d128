#!/usr/bin/env bash
# bench/idle.sh [SEGMENTS]: what an idle daemon costs, and what its sleeping
# costs writers, for this tree beside a baseline build in the same run.
#
# Each build gets a cluster of its own (SEGMENTS synthetic locations, default
# 100,000; default settings): a few puts, IDLE_QUIET_SECONDS (10) with
# nothing written, then over IDLE_SECONDS (10) the daemon's wake-ups per
# second (voluntary + involuntary context switches, /proc/PID/status) and its
# CPU (/proc/PID/schedstat); then IDLE_WAKES (5) single TRAFFICDB_SYNC puts
# of one writer, each after 2 s of quiet (the daemon asleep): their
# acknowledgement, median and longest; then
# bench/put_server's trafficdb_put async p50/p99 and TRAFFICDB_SYNC ack
# p50/p99 (4 producers, batches of 1,000), IDLE_PUT_ROUNDS (3) rounds
# taking turns between the builds (which goes first alternates), medians
# reported.
#
# The baseline is IDLE_BASELINE_REF (default: the last commit of main before
# the daemon slept, where it drained the writers' ring every
# trafficdb.writer_drain_interval whatever happened), built from
# `git archive` into a copy of PostgreSQL 15 of its own (scripts/tap.sh
# --copy-pg) under the work directory; IDLE_BASELINE_REF=none measures this
# tree alone.  This tree is built and installed into PG_CONFIG
# (TDB_PG_CONFIG).  Clusters listen on 127.0.0.1 only, on ports of
# TDB_TEST_PG_PORTS when set.  Figures go to bench/lib.sh's CSV, section
# idle, each beside the baseline's.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

N=${1:-100000}
QUIET=${IDLE_QUIET_SECONDS:-10}
SPAN=${IDLE_SECONDS:-10}
WAKES=${IDLE_WAKES:-5}
ROUNDS=${IDLE_PUT_ROUNDS:-3}
CALLS=${PUT_CALLS:-1000000}
BASE_REF=${IDLE_BASELINE_REF:-3a5997b}
for v in N QUIET SPAN WAKES ROUNDS CALLS; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "bench/idle: $v must be a positive integer, not '${!v}'"
done

work=$(mktemp -d /tmp/trafficdb-idle.XXXXXX)
chmod 755 "$work"
sides=()
declare -A pgbin port shm putbin pgdata
finish() {
	local s
	for s in "${sides[@]}"; do
		[ -f "${pgdata[$s]}/postmaster.pid" ] && as_pg "${pgbin[$s]}/pg_ctl" -D "${pgdata[$s]}" stop -m fast -w >/dev/null 2>&1
	done
	rm -rf "$work"
}
trap finish EXIT

echo "bench/idle: building this tree into $PG_CONFIG" >&2
make -s -j"$(nproc)" all bench/put_server PG_CONFIG="$PG_CONFIG" >/dev/null
$SUDO make -s install PG_CONFIG="$PG_CONFIG" >/dev/null
mkdir -p "$work/cur"
cp bench/put_server "$work/cur/put_server"
pgbin[cur]=$PG_BIN
putbin[cur]=$work/cur/put_server
sides+=(cur)

if [ "$BASE_REF" != none ]; then
	git -C "$TDB_ROOT" rev-parse -q --verify "$BASE_REF^{commit}" >/dev/null ||
		die "bench/idle: IDLE_BASELINE_REF '$BASE_REF' is not a commit of this repository (or none)"
	echo "bench/idle: building the baseline $BASE_REF into a PostgreSQL copy under $work/base" >&2
	mkdir -p "$work/base/src"
	git -C "$TDB_ROOT" archive "$BASE_REF" | tar -x -C "$work/base/src"
	# the driver of this tree (it can skip the async part), linked with the baseline's library
	cp bench/put_server.c "$work/base/src/bench/put_server.c"
	base_config=$(scripts/tap.sh --copy-pg "$work/base/pg" | sed -n 's/^TDB_PG_CONFIG=//p')
	[ -x "$base_config" ] || die "bench/idle: no pg_config in the PostgreSQL copy ($base_config)"
	make -C "$work/base/src" -s -j"$(nproc)" all bench/put_server PG_CONFIG="$base_config" >/dev/null
	make -C "$work/base/src" -s install PG_CONFIG="$base_config" >/dev/null
	pgbin[base]=$(dirname "$base_config")
	putbin[base]=$work/base/src/bench/put_server
	sides=(base cur)
fi

# a cluster of each build, with the map
for s in "${sides[@]}"; do
	saved_bin=$PG_BIN
	PG_BIN=${pgbin[$s]}
	start_test_cluster "$work/$s" idle >&2
	PG_BIN=$saved_bin
	pgdata[$s]=$pgdata
	port[$s]=$port
	shm[$s]=/trafficdb.$port
	"${PSQL[@]}" -p "$port" <<-SQL
	SET client_min_messages = warning;
	CREATE EXTENSION trafficdb CASCADE;
	CREATE UNLOGGED TABLE roads AS
	SELECT i AS id, ST_SetSRID(ST_MakeLine(ST_MakePoint(10 + (i % 1000) * 0.01, 45 + (i / 1000) * 0.01),
	                                       ST_MakePoint(10 + (i % 1000) * 0.01 + 0.004, 45 + (i / 1000) * 0.01 + 0.002)), 4326) AS geom
	  FROM generate_series(1, $N) i;
	SELECT trafficdb.load_map('roads', 'id', 'geom') \g /dev/null
	SQL
done

psql_on() { "${PSQL[@]}" -p "${port[$1]}" -Atc "$2"; }

# wake-ups (context switches) and CPU nanoseconds of a process, now
proc_counts() {
	local v nv
	v=$(awk '/^voluntary_ctxt_switches/ { print $2 }' "/proc/$1/status")
	nv=$(awk '/^nonvoluntary_ctxt_switches/ { print $2 }' "/proc/$1/status")
	echo "$((v + nv)) $(awk '{ print $1 }' "/proc/$1/schedstat")"
}

declare -A wake cpu ack ackmax
for s in "${sides[@]}"; do
	pid=$(psql_on "$s" 'SELECT daemon_pid FROM trafficdb.status')
	[[ $pid =~ ^[1-9][0-9]*$ ]] || die "bench/idle: no daemon pid in trafficdb.status of the $s cluster (got '$pid')"
	"${putbin[$s]}" "${shm[$s]}" "$N" 1000 1 2 100 >/dev/null
	echo "bench/idle: $s: quiet for $QUIET s, then counting the daemon's (pid $pid) wake-ups for $SPAN s" >&2
	sleep "$QUIET"
	read -r c0 t0 < <(proc_counts "$pid")
	sleep "$SPAN"
	read -r c1 t1 < <(proc_counts "$pid")
	wake[$s]=$(awk -v c="$((c1 - c0))" -v s="$SPAN" 'BEGIN { printf "%.1f", c / s }')
	cpu[$s]=$(awk -v t="$((t1 - t0))" -v s="$SPAN" 'BEGIN { printf "%.4f", t / (s * 1e9) * 100 }')
	# single sync puts after quiet: the wake-up's cost, end to end
	out=$("${putbin[$s]}" "${shm[$s]}" "$N" 0 1 "$WAKES" 1 2000)
	ack[$s]=$(awk -F, '$1 == "put_sync_ack_p50" { print $2 }' <<<"$out")
	ackmax[$s]=$(awk -F, '$1 == "put_sync_ack_p99" { print $2 }' <<<"$out")
	echo "bench/idle: $s: ${wake[$s]} wake-ups/s, ${cpu[$s]} % CPU; sync put after 2 s quiet: ${ack[$s]} ms (longest of $WAKES ${ackmax[$s]} ms)" >&2
done

# put latency: rounds taking turns between the builds, which goes first alternating
declare -A figs
for r in $(seq 1 "$ROUNDS"); do
	order=("${sides[@]}")
	[ $((r % 2)) = 0 ] && [ "${#sides[@]}" = 2 ] && order=(cur base)
	for s in "${order[@]}"; do
		line=""
		while IFS=, read -r m v _; do
			figs[$s.$m]+="$v "
			line+=" $m=$v"
		done < <("${putbin[$s]}" "${shm[$s]}" "$N" "$CALLS" 4 100 1000)
		echo "bench/idle: put round $r/$ROUNDS, $s ($CALLS async puts, 4 sync producers x 100 batches of 1,000):$line" >&2
	done
done
median() { printf '%s\n' $1 | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

emit() {	# MEASURE UNIT CURRENT BASELINE
	if [ "${#sides[@]}" = 2 ]; then
		bench_emit idle "$1" "$N" "$3" "$2" "baseline_$BASE_REF" "$4"
	else
		bench_emit idle "$1" "$N" "$3" "$2"
	fi
}
emit daemon_wakeups_per_s wakeups/s "${wake[cur]}" "${wake[base]:-}"
emit daemon_cpu_pct % "${cpu[cur]}" "${cpu[base]:-}"
emit sync_put_after_quiet_ack_ms ms "${ack[cur]}" "${ack[base]:-}"
emit sync_put_after_quiet_ack_max_ms ms "${ackmax[cur]}" "${ackmax[base]:-}"
for m in put_async_p50:ns put_async_p99:ns put_sync_ack_p50:ms put_sync_ack_p99:ms put_sync_per_s:updates/s; do
	emit "${m%%:*}" "${m#*:}" "$(median "${figs[cur.${m%%:*}]:-}")" \
		"$([ "${#sides[@]}" = 2 ] && median "${figs[base.${m%%:*}]:-}")"
done
awk -v w="${wake[cur]}" -v c="${cpu[cur]}" 'BEGIN {
	printf "bench/idle: goal <= 10 wake-ups/s: %s (%s); <= 0.1 %% CPU: %s (%s)\n",
		(w <= 10 ? "met" : "NOT met"), w, (c <= 0.1 ? "met" : "NOT met"), c }' >&2
