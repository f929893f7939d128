# scripts/lib.sh: what every trafficdb script shares.  Source it; do not run it.
#
# PostgreSQL refuses to run as root, so when the scripts run as root (a fresh
# machine, CI) every server-side command runs as the 'postgres' account that
# Debian's packages create; an ordinary user runs them as itself and uses
# sudo only to install packages and the extension.

PG_MAJOR=15
# TDB_PG_CONFIG: another installation of PostgreSQL 15 to build, install
# into and test against (e.g. a relocated copy, so that parallel work on one
# machine does not share the system's extension directory).
PG_CONFIG=${TDB_PG_CONFIG:-/usr/lib/postgresql/$PG_MAJOR/bin/pg_config}
PG_BIN=$(dirname "$PG_CONFIG")
TDB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

if [ "$(id -u)" = 0 ]; then
	SUDO=
	PG_OS_USER=postgres
else
	SUDO=sudo
	PG_OS_USER=$(id -un)
fi

# Run a command as the account that owns PostgreSQL clusters.
as_pg() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u "$PG_OS_USER" -- "$@"
	else
		"$@"
	fi
}

# A directory the cluster account can write, owned by it.
make_pg_dir() {
	mkdir -p "$1"
	if [ "$(id -u)" = 0 ]; then chown "$PG_OS_USER": "$1"; fi
}

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Is something listening on 127.0.0.1:PORT?
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port ["FIRST LAST"]: a free TCP port of 127.0.0.1, the first free one
# of the range when one is given, else one the system picks.
free_port() {
	local first last p
	if [ -n "${1:-}" ]; then
		read -r first last <<<"$1"
		for p in $(seq "$first" "$last"); do
			if ! port_in_use "$p"; then echo "$p"; return 0; fi
		done
		die "no free TCP port on 127.0.0.1 between $first and $last"
	fi
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# stop_pidfile FILE: stop the process FILE names (SIGTERM, up to 10 s, then
# SIGKILL) and remove FILE.
stop_pidfile() {
	local pid i
	[ -f "$1" ] || return 0
	pid=$(cat "$1")
	if kill -0 "$pid" 2>/dev/null; then
		kill "$pid"
		for i in $(seq 1 100); do	# bounded: 10 s
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
	fi
	rm -f "$1"
}
