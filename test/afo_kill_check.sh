#!/usr/bin/env bash
# test/afo_kill_check.sh: afo_kill (scripts/autoctl.sh) leaves no process
# stopped and no zombie behind, checked without a fleet: a stand-in keeper
# (a script named pg_autoctl that writes its pid file and has a child) is
# started by afo_run exactly as a real one (as root: through `runuser`),
# then afo_kill stops and kills it as a machine loss.
#
# Before the fix `runuser`, the keeper's parent, saw its child stopped,
# stopped itself (SIGSTOP, util-linux's job control pass-through) and never
# reaped the killed keeper: state T with a zombie child, left behind by
# `make fleet-stop` after the kill tests.  Needs root (as_pg is `runuser`
# only then); prints TAP lines.
set -euo pipefail
. "$(dirname "$0")/../scripts/autoctl.sh"

if [ "$(id -u)" != 0 ]; then
	echo "1..0 # SKIP needs root (the keeper's parent is runuser only when started by root)"
	exit 0
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

pass=0 fail=0
check() {	# check DESCRIPTION COMMAND...: a TAP line
	if "${@:2}"; then pass=$((pass + 1)); echo "ok $((pass + fail)) - $1"
	else fail=$((fail + 1)); echo "not ok $((pass + fail)) - $1"; fi
}
state() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1; }

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
