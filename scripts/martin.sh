#!/usr/bin/env bash
# scripts/martin.sh: Martin, the vector tile server of the live map (it serves
# trafficdb.tile_mvt_web as the tile source "traffic"), on 127.0.0.1.
#
#   scripts/martin.sh install     build Martin 1.14.0 with `cargo install` into
#                                 ~/.cache/trafficdb/martin-1.14.0 if it is missing
#                                 or not that version (20-45 min on 2 cores)
#   scripts/martin.sh path        print the binary's path (installs it first)
#   scripts/martin.sh start DIR DATABASE_URL WEB_PORT
#                                 start it with web/martin.yaml on a free port of
#                                 127.0.0.1, connecting as DATABASE_URL's role (the
#                                 web role, web/role.sql), answering CORS for the
#                                 page at 127.0.0.1:WEB_PORT and localhost:WEB_PORT;
#                                 waits (up to 60 s) until /health answers; writes
#                                 DIR/martin.pid, DIR/martin.port, DIR/martin.log
#   scripts/martin.sh stop DIR    stop it
#
# The port: the first free one of TDB_MARTIN_PORTS="FIRST LAST" when set, else
# one the system picks; never WEB_PORT.  scripts/web.sh runs start and stop
# beside the app; the demo and the tests through it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# One pinned version, built from crates.io with only the PostgreSQL sources
# (no MBTiles, PMTiles, COG, styles, fonts or web UI), with Martin's own
# Cargo.lock.  Its rust-version (MSRV) is 1.94.
MARTIN_VERSION=1.14.0
MARTIN_MSRV=94
MARTIN_ROOT=${MARTIN_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/trafficdb/martin-$MARTIN_VERSION}
MARTIN_BIN=$MARTIN_ROOT/bin/martin

install_martin() {
	cargo_install_pinned martin "$MARTIN_VERSION" "$MARTIN_MSRV" "$MARTIN_ROOT" "20-45 min" \
		--no-default-features --features postgres
}

# martin_port WEB_PORT: a free port of 127.0.0.1 other than WEB_PORT (see above)
martin_port() {
	local first last p
	if [ -n "${TDB_MARTIN_PORTS:-}" ]; then
		[[ $TDB_MARTIN_PORTS =~ ^[[:space:]]*([0-9]{1,5})[[:space:]]+([0-9]{1,5})[[:space:]]*$ ]] &&
			[ "${BASH_REMATCH[1]}" -ge 1 ] && [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ] &&
			[ "${BASH_REMATCH[2]}" -le 65535 ] ||
			die "martin: TDB_MARTIN_PORTS=\"$TDB_MARTIN_PORTS\": expected \"FIRST LAST\", two port numbers, FIRST <= LAST <= 65535"
		first=${BASH_REMATCH[1]} last=${BASH_REMATCH[2]}
		for p in $(seq "$first" "$last"); do
			[ "$p" != "$1" ] && ! port_in_use "$p" && { echo "$p"; return 0; }
		done
		die "martin: no free TCP port on 127.0.0.1 between $first and $last (TDB_MARTIN_PORTS)"
	fi
	for p in 1 2 3; do	# bounded: the system gives the web port back only by chance
		p=$(free_port)
		[ "$p" != "$1" ] && { echo "$p"; return 0; }
	done
	die "martin: no free TCP port on 127.0.0.1"
}

start_martin() {
	local dir=$1 url=$2 web_port=$3 port i
	install_martin
	mkdir -p "$dir"
	stop_pidfile "$dir/martin.pid"
	port=$(martin_port "$web_port")
	# web/martin.yaml reads these; the URL's role is the web role, trust or a
	# password in the URL (Martin prints no connection string in its log)
	TRAFFICDB_MARTIN_LISTEN=127.0.0.1:$port TRAFFICDB_MARTIN_DB=$url TRAFFICDB_WEB_PORT=$web_port \
		RUST_LOG=${RUST_LOG:-martin=info,martin_core=info,actix_web=warn} NO_COLOR=1 \
		nohup "$MARTIN_BIN" --config "$TDB_ROOT/web/martin.yaml" >"$dir/martin.log" 2>&1 </dev/null &
	echo $! >"$dir/martin.pid"
	echo "$port" >"$dir/martin.port"
	for i in $(seq 1 120); do	# bounded: 60 s
		if curl -fs -o /dev/null "http://127.0.0.1:$port/health"; then
			echo "martin: tiles on http://127.0.0.1:$port/traffic/{z}/{x}/{y} (pid $(cat "$dir/martin.pid"), log $dir/martin.log)" >&2
			return 0
		fi
		if ! kill -0 "$(cat "$dir/martin.pid")" 2>/dev/null; then
			rm -f "$dir/martin.pid" "$dir/martin.port"
			tail -n 30 "$dir/martin.log" >&2
			die "martin: the server exited (log: $dir/martin.log)"
		fi
		sleep 0.5
	done
	stop_martin "$dir"
	tail -n 30 "$dir/martin.log" >&2
	die "martin: /health not answering after 60 s (log: $dir/martin.log)"
}

stop_martin() {
	stop_pidfile "$1/martin.pid"
	rm -f "$1/martin.port"
}

case "${1:-}" in
install) install_martin ;;
path) install_martin; echo "$MARTIN_BIN" ;;
start) [ -n "${4:-}" ] || die "usage: scripts/martin.sh start DIR DATABASE_URL WEB_PORT"; start_martin "$2" "$3" "$4" ;;
stop) [ -n "${2:-}" ] || die "usage: scripts/martin.sh stop DIR"; stop_martin "$2" ;;
*) die "usage: scripts/martin.sh install | path | start DIR DATABASE_URL WEB_PORT | stop DIR" ;;
esac
