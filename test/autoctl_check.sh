#!/usr/bin/env bash
# test/autoctl_check.sh: scripts/autoctl.sh's process and file handling,
# checked without a fleet (no failover, no load).  Prints TAP lines.
#
#   1. Server logs live outside PGDATA (DIR/log): pg_rewind copies the
#      source's PGDATA over a rejoining node's, and with the logs in
#      PGDATA/log a rejoined node lost its own (its time as a frozen
#      primary).  A monitor and a primary node are created on ports
#      AUTOCTL_CHECK_PORT (5840) and +1, their log_directory and files looked
#      at, and both stopped.
#   2. afo_kill leaves no process stopped and no zombie behind: a stand-in
#      keeper (a script named pg_autoctl that writes its pid file and has a
#      child) is started by afo_run exactly as a real one (as root: through
#      `runuser`), then afo_kill stops and kills it as a machine loss.
#      Before the fix `runuser`, the keeper's parent, saw its child stopped,
#      stopped itself (SIGSTOP, util-linux's job control pass-through) and
#      never reaped the killed keeper: state T with a zombie child, left
#      behind by `make fleet-stop` after the kill tests.  Needs root (as_pg
#      is `runuser` only then); skipped otherwise.
set -euo pipefail
. "$(dirname "$0")/../scripts/autoctl.sh"

pass=0 fail=0
check() {	# check DESCRIPTION COMMAND...: a TAP line
	if "${@:2}"; then pass=$((pass + 1)); echo "ok $((pass + fail)) - $1"
	else fail=$((fail + 1)); echo "not ok $((pass + fail)) - $1"; fi
}
state() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1; }

# ---- 1. logs outside PGDATA
port=${AUTOCTL_CHECK_PORT:-5840}
top=$(mktemp -d /tmp/autoctl-check.XXXXXX)
make_pg_dir "$top"
cleanup() { afo_stop "$top/n1" >/dev/null 2>&1 || true; afo_stop "$top/mon" >/dev/null 2>&1 || true; }
trap cleanup EXIT
if "$AFO_BIN/pg_isready" -q -h 127.0.0.1 -p "$port" || "$AFO_BIN/pg_isready" -q -h 127.0.0.1 -p $((port + 1)); then
	echo "not ok - ports $port-$((port + 1)) are taken: set AUTOCTL_CHECK_PORT"
	exit 1
fi
afo_monitor_create "$top/mon" "$port" >/dev/null
afo_node_create "$top/n1" $((port + 1)) n1 "$top/mon" default postgres primary >/dev/null
for n in mon n1; do
	p=$(cat "$top/$n/port")
	check "$n: log_directory is $top/$n/log, outside PGDATA" \
		test "$(afo_psql "$p" postgres -At -c 'SHOW log_directory')" = "$top/$n/log"
	check "$n: its server log is written there" bash -c "grep -qs 'database system is ready' '$top/$n/log/'*.log"
	check "$n: nothing is logged inside PGDATA" test ! -e "$top/$n/pgdata/log"
	check "$n: afo_log_dir names it" test "$(afo_log_dir "$top/$n")" = "$top/$n/log"
done
cleanup
trap - EXIT
rm -rf "$top"

# ---- 2. afo_kill and the keeper's runuser parent
if [ "$(id -u)" != 0 ]; then
	echo "ok $((pass + fail + 1)) # SKIP afo_kill's check needs root (the keeper's parent is runuser only when started by root)"
	echo "1..$((pass + fail + 1))"
	[ "$fail" = 0 ]
	exit
fi

dir=$(mktemp -d /tmp/afo-kill-check.XXXXXX)
make_pg_dir "$dir"
make_pg_dir "$dir/xdg"
as_pg mkdir -p "$dir/xdg/config" "$dir/xdg/data" "$dir/xdg/run" "$dir/bin"
# (#!/bin/bash, not env: its comm must be pg_autoctl, which afo_kill looks for)
cat >"$dir/bin/pg_autoctl" <<'EOF'
#!/bin/bash
# a stand-in keeper: its pid file where the real one writes it, and a child
echo $$ >"$XDG_RUNTIME_DIR/pg_autoctl.pid"
sleep 120 &
echo $! >"$XDG_RUNTIME_DIR/child.pid"
wait
EOF
chmod 755 "$dir/bin/pg_autoctl"
chown -R "$PG_OS_USER": "$dir/bin"

AFO_PG_AUTOCTL="$dir/bin/pg_autoctl" afo_run "$dir"
keeper=$(afo_keeper_pid "$dir")
parent=$(ps -o ppid= -p "$keeper" | tr -d ' ')
check "the stand-in keeper runs (pid $keeper) under $(cat /proc/"$parent"/comm) (pid $parent)" \
	test "$(cat /proc/"$parent"/comm)" = runuser

# a pause between the SIGSTOP and the SIGKILL, as a loaded machine makes
# it: runuser then sees its child stopped before it is killed
AFO_KILL_PAUSE=0.3 afo_kill "$dir" || true
check "afo_kill: the keeper is dead" bash -c "[ ! -e /proc/$keeper ] || [ \"\$(sed 's/.*) //' /proc/$keeper/stat | cut -d' ' -f1)\" = Z ]"

# bounded: the shell (this one) reaps what it started; nothing may stay stopped
stopped=
for _ in $(seq 1 40); do
	stopped=
	for p in "$parent" "$keeper"; do
		[ -e "/proc/$p" ] && [ "$(state "$p")" = T ] && stopped+=" $p"
	done
	[ -z "$stopped" ] && ! [ -e "/proc/$keeper" ] && break
	sleep 0.05
done
check "no process of the keeper's chain is left stopped (state T)${stopped:+:$stopped}" test -z "$stopped"
check "the killed keeper was reaped (no zombie left with a stopped parent)" test ! -e "/proc/$keeper"

# clean up what we started: the stand-in's orphaned child, a stopped runuser (before the fix)
kill -KILL "$(cat "$dir/xdg/run/child.pid")" 2>/dev/null || true
if [ -e "/proc/$parent" ] && [ "$(state "$parent")" = T ]; then kill -CONT "$parent" 2>/dev/null || true; fi
wait 2>/dev/null || true
rm -rf "$dir"
echo "1..$((pass + fail))"
[ "$fail" = 0 ]
