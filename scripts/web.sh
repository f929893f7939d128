#!/usr/bin/env bash
# scripts/web.sh: the live map's server (web/app.py: tipg + the live
# routes, uvicorn) on 127.0.0.1, for the demo, the tests and the benchmark.
#
#   scripts/web.sh start DIR DATABASE_URL   start it (scripts/web-setup.sh first);
#                                           DIR/web.pid (the supervisor), DIR/web.app.pid
#                                           (the app), DIR/web.port, DIR/web.log;
#                                           waits until it answers (up to 60 s)
#   scripts/web.sh stop DIR                 stop it
#
# Anyone who reaches the port talks to the app, so it runs supervised: when
# it dies (a signal, a crash of a native module, an exit) the supervisor
# starts it again on the same port after a back-off of 0.5 s, doubling to
# 30 s while it keeps dying within 60 s of its start; after
# TDB_WEB_MAX_RESTARTS (default 20) such quick deaths in a row it gives up
# and says so in the log.  Every start and death is logged in DIR/web.log.
#
# The port: the first free one of TDB_WEB_PORTS="FIRST LAST" when set, else
# one the system picks.  TDB_WEB_MAX_CONNECTIONS (default 500): connections
# and requests at once, past which uvicorn answers 503.  Extra environment (TIPG_*, TRAFFICDB_WEB_*) passes
# through to the app.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

VENV=${TDB_WEB_VENV:-$TDB_ROOT/.venv-web}

# supervise DIR URL PORT: run the app, and again when it dies (see above);
# SIGTERM stops the app, then the supervisor.
supervise() {
	local dir=$1 url=$2 port=$3 child= backoff=0.5 quick=0 started rc max=${TDB_WEB_MAX_RESTARTS:-20} i
	stopping() {
		local i
		trap - TERM INT HUP
		if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
			kill -TERM "$child" 2>/dev/null || true
			for i in $(seq 1 50); do	# bounded: 5 s
				kill -0 "$child" 2>/dev/null || break
				sleep 0.1
			done
			kill -9 "$child" 2>/dev/null || true
		fi
		rm -f "$dir/web.app.pid"
		echo "web-supervisor: stopped ($(date -u +%FT%TZ))"
		exit 0
	}
	trap stopping TERM INT HUP
	while :; do	# bounded: gives up after $max quick deaths in a row
		started=$(date +%s)
		# cwd web/: tipg reads a .env of the working directory; web/ has none
		(cd "$TDB_ROOT/web" && DATABASE_URL=$url exec "$VENV/bin/uvicorn" --app-dir "$TDB_ROOT/web" app:app \
			--host 127.0.0.1 --port "$port" --no-access-log --timeout-graceful-shutdown 2 \
			--limit-concurrency "${TDB_WEB_MAX_CONNECTIONS:-500}") &
		child=$!
		echo "$child" >"$dir/web.app.pid"
		echo "web-supervisor: app started, pid $child ($(date -u +%FT%TZ))"
		rc=0
		wait "$child" || rc=$?
		if [ "$rc" -gt 128 ]; then
			echo "web-supervisor: app $child died of signal $((rc - 128)) ($(date -u +%FT%TZ))"
		else
			echo "web-supervisor: app $child exited with status $rc ($(date -u +%FT%TZ))"
		fi
		if [ $(($(date +%s) - started)) -ge 60 ]; then
			quick=0 backoff=0.5
		else
			quick=$((quick + 1))
			if [ "$quick" -ge "$max" ]; then
				rm -f "$dir/web.app.pid"
				echo "web-supervisor: giving up after $quick quick deaths in a row; start it again with scripts/web.sh"
				exit 1
			fi
		fi
		echo "web-supervisor: starting it again in $backoff s"
		sleep "$backoff" &
		wait $! || true
		backoff=$(awk -v b="$backoff" 'BEGIN { b *= 2; if (b > 30) b = 30; print b }')
	done
}

start_web() {
	local dir=$1 url=$2 port= p first last i
	"$TDB_ROOT/scripts/web-setup.sh"
	mkdir -p "$dir"
	port=$(free_port "${TDB_WEB_PORTS:-}")
	rm -f "$dir/web.app.pid"
	nohup "$TDB_ROOT/scripts/web.sh" supervise "$dir" "$url" "$port" >"$dir/web.log" 2>&1 </dev/null &
	echo $! >"$dir/web.pid"
	echo "$port" >"$dir/web.port"
	for i in $(seq 1 120); do	# bounded: 60 s
		if curl -fs -o /dev/null "http://127.0.0.1:$port/live/state"; then
			echo "web: the live map is on http://127.0.0.1:$port/map/ (supervisor pid $(cat "$dir/web.pid"), app pid $(cat "$dir/web.app.pid" 2>/dev/null), log $dir/web.log)" >&2
			return 0
		fi
		# an app that dies before it ever answered would only die again: stop
		if grep -q '^web-supervisor: app .* \(died\|exited\)' "$dir/web.log" 2>/dev/null ||
			! kill -0 "$(cat "$dir/web.pid")" 2>/dev/null; then
			stop_pidfile "$dir/web.pid"
			tail -n 30 "$dir/web.log" >&2
			die "web: the server exited (log: $dir/web.log)"
		fi
		sleep 0.5
	done
	stop_pidfile "$dir/web.pid"
	tail -n 30 "$dir/web.log" >&2
	die "web: not answering after 60 s (log: $dir/web.log)"
}

case "${1:-}" in
start) [ -n "${3:-}" ] || die "usage: scripts/web.sh start DIR DATABASE_URL"; start_web "$2" "$3" ;;
supervise) [ -n "${4:-}" ] || die "usage: scripts/web.sh supervise DIR DATABASE_URL PORT (start runs it)"; supervise "$2" "$3" "$4" ;;
stop)
	[ -n "${2:-}" ] || die "usage: scripts/web.sh stop DIR"
	stop_pidfile "$2/web.pid"
	stop_pidfile "$2/web.app.pid"	# left only when the supervisor itself was killed
	rm -f "$2/web.port" ;;
*) die "usage: scripts/web.sh start DIR DATABASE_URL | stop DIR" ;;
esac
