#!/usr/bin/env bash
# scripts/web.sh: the live map's server (web/app.py: tipg + the live
# routes, uvicorn) and its tile server (Martin, scripts/martin.sh) on
# 127.0.0.1, for the demo, the tests and the benchmark.
#
#   scripts/web.sh start DIR DATABASE_URL   start them (scripts/web-setup.sh first):
#                                           Martin first (DIR/martin.pid, DIR/martin.port,
#                                           DIR/martin.log; waits for its /health), then the
#                                           app, told Martin's URL (TRAFFICDB_WEB_TILES):
#                                           DIR/web.pid (the supervisor), DIR/web.app.pid
#                                           (the app), DIR/web.port, DIR/web.log;
#                                           waits until it answers (up to 60 s each)
#   scripts/web.sh stop DIR                 stop both
#
# Both connect as DATABASE_URL's role (web/role.sql's trafficdb_web).  Martin
# is not supervised: it is one process that does not die of what clients
# send (test/web_hostile.sh); the page shows tile errors if it is gone.
#
# Anyone who reaches the port talks to the app, so it runs supervised: one
# app answers and a standby waits beside it, already started (web/serve.py:
# the imports take seconds of CPU).  When the app dies (a signal, a crash of
# a native module, an exit) the standby takes over the port at once and a
# new standby starts.  When it keeps dying within 60 s of its start, each
# takeover or new start waits a back-off of 0.5 s doubling to 30 s; after
# TDB_WEB_MAX_RESTARTS (default 20) such quick deaths in a row the
# supervisor rests 300 s and starts over (a crash loop costs little; the map
# still comes back).  Every start, takeover and death is logged in
# DIR/web.log.  TDB_WEB_STANDBY=0: no standby (a new app starts after a death).
#
# The port: the first free one of TDB_WEB_PORTS="FIRST LAST" when set, else
# one the system picks; Martin's: of TDB_MARTIN_PORTS likewise.  TDB_WEB_MAX_CONNECTIONS (default 500): connections
# and requests at once, past which uvicorn answers 503.  Extra environment (TIPG_*, TRAFFICDB_WEB_*) passes
# through to the app.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

VENV=${TDB_WEB_VENV:-$TDB_ROOT/.venv-web}

# supervise DIR URL PORT: run the app and its standby, and again when the
# app dies (see above); SIGTERM stops both, then the supervisor.
supervise() {
	local dir=$1 url=$2 port=$3 child= standby= backoff=0.5 quick=0 started rc
	local max=${TDB_WEB_MAX_RESTARTS:-20} limit=${TDB_WEB_MAX_CONNECTIONS:-500} ready=$dir/web.standby.ready
	now() { date -u +%FT%TZ; }
	end_proc() {	# end_proc PID: TERM, up to 5 s, then KILL
		local i
		[ -n "$1" ] && kill -0 "$1" 2>/dev/null || return 0
		kill -TERM "$1" 2>/dev/null || true
		for i in $(seq 1 50); do	# bounded: 5 s
			kill -0 "$1" 2>/dev/null || return 0
			sleep 0.1
		done
		kill -9 "$1" 2>/dev/null || true
	}
	stopping() {
		trap - TERM INT HUP
		end_proc "$standby"
		end_proc "$child"
		rm -f "$dir/web.app.pid" "$ready"
		echo "web-supervisor: stopped ($(now))"
		exit 0
	}
	trap stopping TERM INT HUP
	# cwd web/: tipg reads a .env of the working directory; web/ has none
	run_app() { (cd "$TDB_ROOT/web" && DATABASE_URL=$url exec "$VENV/bin/python" "$TDB_ROOT/web/serve.py" "$@") & }
	new_standby() {
		standby=
		[ "${TDB_WEB_STANDBY:-1}" = 1 ] || return 0
		rm -f "$ready"
		run_app --standby "$ready" 127.0.0.1 "$port" "$limit"
		standby=$!
	}
	pause() { sleep "$1" & wait $! || true; }	# a sleep that SIGTERM interrupts

	run_app 127.0.0.1 "$port" "$limit"
	child=$! started=$(date +%s)
	echo "$child" >"$dir/web.app.pid"
	echo "web-supervisor: app started, pid $child ($(now))"
	new_standby
	while :; do	# bounded: back-off up to 30 s, a 300 s rest after $max quick deaths
		rc=0
		wait "$child" || rc=$?
		if [ "$rc" -gt 128 ]; then
			echo "web-supervisor: app $child died of signal $((rc - 128)) ($(now))"
		else
			echo "web-supervisor: app $child exited with status $rc ($(now))"
		fi
		if [ $(($(date +%s) - started)) -ge 60 ]; then
			quick=0 backoff=0.5
		else
			quick=$((quick + 1))
		fi
		if [ "$quick" -ge "$max" ]; then
			echo "web-supervisor: $quick quick deaths in a row; resting 300 s before starting it again"
			end_proc "$standby"
			standby=
			pause 300
			quick=0 backoff=0.5
		elif [ "$quick" -ge 2 ]; then
			echo "web-supervisor: it keeps dying; waiting $backoff s"
			pause "$backoff"
			backoff=$(awk -v b="$backoff" 'BEGIN { b *= 2; if (b > 30) b = 30; print b }')
		fi
		if [ -n "$standby" ] && [ "$(cat "$ready" 2>/dev/null)" = "$standby" ] && kill -USR1 "$standby" 2>/dev/null; then
			child=$standby
			echo "web-supervisor: standby $child takes over ($(now))"
		else
			end_proc "$standby"
			run_app 127.0.0.1 "$port" "$limit"
			child=$!
			echo "web-supervisor: app started, pid $child ($(now))"
		fi
		started=$(date +%s)
		echo "$child" >"$dir/web.app.pid"
		new_standby
	done
}

start_web() {
	local dir=$1 url=$2 port= p first last i
	"$TDB_ROOT/scripts/web-setup.sh"
	mkdir -p "$dir"
	port=$(free_port "${TDB_WEB_PORTS:-}")
	"$TDB_ROOT/scripts/martin.sh" start "$dir" "$url" "$port"
	rm -f "$dir/web.app.pid"
	TRAFFICDB_WEB_TILES=http://127.0.0.1:$(cat "$dir/martin.port") \
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
			"$TDB_ROOT/scripts/martin.sh" stop "$dir"
			tail -n 30 "$dir/web.log" >&2
			die "web: the server exited (log: $dir/web.log)"
		fi
		sleep 0.5
	done
	stop_pidfile "$dir/web.pid"
	"$TDB_ROOT/scripts/martin.sh" stop "$dir"
	tail -n 30 "$dir/web.log" >&2
	die "web: not answering after 60 s (log: $dir/web.log)"
}

case "${1:-}" in
start) [ -n "${3:-}" ] || die "usage: scripts/web.sh start DIR DATABASE_URL"; start_web "$2" "$3" ;;
supervise) [ -n "${4:-}" ] || die "usage: scripts/web.sh supervise DIR DATABASE_URL PORT (start runs it)"; supervise "$2" "$3" "$4" ;;
stop)
	[ -n "${2:-}" ] || die "usage: scripts/web.sh stop DIR"
	stop_pidfile "$2/web.pid"
	# left only when the supervisor itself was killed
	stop_pidfile "$2/web.app.pid"
	stop_pidfile "$2/web.standby.ready"	# the standby's pid
	rm -f "$2/web.port"
	"$TDB_ROOT/scripts/martin.sh" stop "$2" ;;
*) die "usage: scripts/web.sh start DIR DATABASE_URL | stop DIR" ;;
esac
