#!/usr/bin/env bash
# scripts/web.sh: the live map's server (web/app.py: tipg + the live
# routes, uvicorn) on 127.0.0.1, for the demo, the tests and the benchmark.
#
#   scripts/web.sh start DIR DATABASE_URL   start it (scripts/web-setup.sh first);
#                                           DIR/web.pid, DIR/web.port, DIR/web.log;
#                                           waits until it answers (up to 60 s)
#   scripts/web.sh stop DIR                 stop it
#
# The port: the first free one of TDB_WEB_PORTS="FIRST LAST" when set, else
# one the system picks.  Extra environment (TIPG_*, TRAFFICDB_WEB_*) passes
# through to the app.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

VENV=${TDB_WEB_VENV:-$TDB_ROOT/.venv-web}

start_web() {
	local dir=$1 url=$2 port= p first last i
	"$TDB_ROOT/scripts/web-setup.sh"
	mkdir -p "$dir"
	port=$(free_port "${TDB_WEB_PORTS:-}")
	# cwd web/: tipg reads a .env of the working directory; web/ has none
	(cd "$TDB_ROOT/web" && DATABASE_URL=$url exec nohup "$VENV/bin/uvicorn" --app-dir "$TDB_ROOT/web" app:app \
		--host 127.0.0.1 --port "$port" --no-access-log --timeout-graceful-shutdown 2 >"$dir/web.log" 2>&1) &
	echo $! >"$dir/web.pid"
	echo "$port" >"$dir/web.port"
	for i in $(seq 1 120); do	# bounded: 60 s
		if curl -fs -o /dev/null "http://127.0.0.1:$port/live/state"; then
			echo "web: the live map is on http://127.0.0.1:$port/map/ (pid $(cat "$dir/web.pid"), log $dir/web.log)" >&2
			return 0
		fi
		if ! kill -0 "$(cat "$dir/web.pid")" 2>/dev/null; then
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
stop) [ -n "${2:-}" ] || die "usage: scripts/web.sh stop DIR"; stop_pidfile "$2/web.pid"; rm -f "$2/web.port" ;;
*) die "usage: scripts/web.sh start DIR DATABASE_URL | stop DIR" ;;
esac
