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

# pidfile_alive FILE: whether FILE names a live process that started no
# later than FILE was written (false when FILE is missing).  A pid the
# kernel gave to another process since (the process named died without
# removing FILE) is not ours to signal: its process is younger than FILE,
# within a second of slack for the clocks' resolution.
pidfile_alive() {
	local pid age
	[ -f "$1" ] || return 1
	pid=$(cat "$1")
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
	age=$(ps -o etimes= -p "$pid" 2>/dev/null) || return 1
	[ "$((${age// /} + 2))" -ge "$(($(date +%s) - $(stat -c %Y "$1")))" ]
}

# stop_pidfile FILE: stop the process FILE names, when pidfile_alive
# (SIGTERM, up to 10 s, then SIGKILL), and remove FILE.
stop_pidfile() {
	local pid i
	[ -f "$1" ] || return 0
	if pidfile_alive "$1"; then
		pid=$(cat "$1")
		kill "$pid"
		for i in $(seq 1 100); do	# bounded: 10 s
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
	fi
	rm -f "$1"
}

# TAP lines for the shell tests run as root with real OS users
# (test/group_mode.sh, test/security_shm.sh, test/security_names.sh):
# check DESCRIPTION COMMAND... prints ok/not ok; tap_done prints the plan
# and the counts and fails if any check did.
pass=0 fail=0
check() {
	if "${@:2}"; then pass=$((pass + 1)); echo "ok $((pass + fail)) - $1"
	else fail=$((fail + 1)); echo "not ok $((pass + fail)) - $1"; fi
}
tap_done() {
	echo "1..$((pass + fail))"
	echo "$pass passed, $fail failed"
	[ "$fail" = 0 ]
}

# start_test_cluster WORK DB [CONF_LINE...]: a cluster of the tests' own in
# WORK/pg (UTF-8, trafficdb preloaded, its daemon in DB, on a free port of
# 127.0.0.1 only, no Unix socket), started, with database DB created; sets
# pgdata, port and PSQL (psql, stopping at the first error) and exports
# PGHOST, PGPORT, PGUSER and PGDATABASE for it.  The caller stops it.
start_test_cluster() {
	local work=$1 db=$2
	shift 2
	make_pg_dir "$work/pg"
	pgdata=$work/pg/data
	port=$(free_port "${TDB_TEST_PG_PORTS:-}")
	echo "$(basename "$0" .sh): cluster on 127.0.0.1:$port"
	as_pg "$PG_BIN/initdb" -D "$pgdata" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$work/pg/initdb.log" ||
		{ cat "$work/pg/initdb.log"; die "initdb failed"; }
	printf '%s\n' "listen_addresses = '127.0.0.1'" "port = $port" "unix_socket_directories = ''" \
		"shared_preload_libraries = 'trafficdb'" "trafficdb.database = '$db'" "dynamic_shared_memory_type = posix" "$@" |
		as_pg tee -a "$pgdata/postgresql.conf" >/dev/null
	as_pg "$PG_BIN/pg_ctl" -D "$pgdata" -l "$work/pg/postgres.log" -w start >/dev/null ||
		{ tail -n 20 "$work/pg/postgres.log"; die "the cluster did not start"; }
	export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=$db
	PSQL=("$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1)
	"${PSQL[@]}" -d postgres -c "CREATE DATABASE $db"
}

# For the shell tests run as root with real OS users (test/group_mode.sh,
# test/security_shm.sh): the users and groups, a directory they can run the
# tools from, and a cluster they can reach.
#
# os_group GROUP: a system group, made if missing.
os_group() { getent group "$1" >/dev/null || groupadd --system "$1"; }
# os_user USER [GROUP,...]: a system user without home or login shell (in the
# groups given), made if missing.
os_user() { id "$1" >/dev/null 2>&1 || useradd --system -M -s /usr/sbin/nologin ${2:+-G "$2"} "$1"; }
# pg_joins GROUP...: the cluster account joins the groups, as an operator's
# server account must for the server to hand objects to them.
pg_joins() {
	local g
	for g in "$@"; do id -nG "$PG_OS_USER" | grep -qw "$g" || usermod -aG "$g" "$PG_OS_USER"; done
}

# shared_tools_dir TEMPLATE TOOL...: a new directory (mktemp -d TEMPLATE)
# every user can read (the tests' own work directories are 0700) holding the
# TOOLs, libtrafficdb.so and the Python bindings, for runs and puts as other
# users; sets dir.
shared_tools_dir() {
	dir=$(mktemp -d "$1")
	shift
	chmod 755 "$dir"
	install -m 755 "$@" "$dir/"
	mkdir -p "$dir/python" && cp -r "$TDB_ROOT/python/trafficdb" "$dir/python/" &&
		install -m 755 "$TDB_ROOT/lib/libtrafficdb.so" "$dir/"
	chmod -R a+rX "$dir/python"
}

# os_users_cluster [CONF_LINE...]: a cluster in $dir/data (trust, on a free
# port of 127.0.0.1 and a Unix socket in $dir/data, trafficdb preloaded, its
# daemon in postgres, plus the lines given), not started; sets port and
# prefix (/trafficdb.PORT) and defines start, stop, psql (as postgres, on
# database postgres, stopping at the first error) and as USER COMMAND...
os_users_cluster() {
	make_pg_dir "$dir/data"
	port=$(free_port "${TDB_TEST_PG_PORTS:-}")
	prefix=/trafficdb.$port
	as_pg "$PG_BIN/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --locale=C.UTF-8 >/dev/null
	printf '%s\n' "listen_addresses = '127.0.0.1'" "port = $port" "unix_socket_directories = '$dir/data'" \
		"shared_preload_libraries = 'trafficdb'" "trafficdb.database = 'postgres'" "$@" >>"$dir/data/postgresql.conf"
	start() { as_pg "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/data/log" -w start >/dev/null; }
	stop() { as_pg "$PG_BIN/pg_ctl" -D "$dir/data" -w stop >/dev/null; }
	psql() { "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d postgres "$@"; }
	as() { runuser -u "$1" -- "${@:2}"; }
}

# publish_small_map: (on a started os_users_cluster) the extension, a map of
# 50 short segments (table roads, ids 1..50, at 25.00x E 60.15 N) and
# 30 km/h on each, published.
publish_small_map() {
	psql -c "SET client_min_messages = warning" -c "CREATE EXTENSION trafficdb CASCADE" \
		-c "CREATE TABLE roads AS SELECT i::bigint AS id, ST_SetSRID(ST_MakeLine(ST_MakePoint(25 + i * 0.001, 60.15),
			ST_MakePoint(25 + i * 0.001, 60.151)), 4326) AS geom FROM generate_series(1, 50) i" \
		-c "SELECT trafficdb.load_map('roads')" \
		-c "INSERT INTO trafficdb.feed (location_id, speed_kmh) SELECT id, 30 FROM roads" \
		-c "SELECT trafficdb.publish()" >/dev/null
}

# cargo_cmd MINOR WHO: the path of a cargo (and its rustc) of Rust 1.MINOR or
# later, for `cargo install` of a pinned tool (scripts/martin.sh,
# scripts/oha.sh; WHO names it in messages).  The one on PATH or in
# ~/.cargo/bin when new enough; otherwise Debian 12's cargo-web and rustc-web
# (Rust 1.85 in bookworm, newer in bookworm-security; Debian's cargo and
# rustc are 1.63), installed when apt offers one new enough; otherwise an
# error naming what is needed.
cargo_cmd() {
	local need=$1 who=$2 c minor cand
	rust_minor() { "$1" --version 2>/dev/null | sed -nE 's/^[a-z]+ 1\.([0-9]+)\..*/\1/p'; }
	for c in "$(command -v cargo || true)" "$HOME/.cargo/bin/cargo" /usr/bin/cargo; do
		[ -n "$c" ] && [ -x "$c" ] || continue
		minor=$(rust_minor "$c")
		# cargo runs the rustc beside it when there is one (rustup's proxies), else the one on PATH
		if [ -x "$(dirname "$c")/rustc" ]; then
			[ "$(rust_minor "$(dirname "$c")/rustc")" -ge "$need" ] 2>/dev/null || continue
		else
			[ "$(rust_minor "$(command -v rustc || echo none)")" -ge "$need" ] 2>/dev/null || continue
		fi
		if [ "${minor:-0}" -ge "$need" ]; then
			echo "$c"
			return 0
		fi
	done
	echo "$who: no cargo of Rust 1.$need or later on PATH or in ~/.cargo/bin; looking at Debian's cargo-web" >&2
	cand=$(apt-cache policy cargo-web 2>/dev/null | sed -nE 's/^ *Candidate: 1\.([0-9]+)\..*/\1/p')
	if [ -z "$cand" ]; then
		$SUDO apt-get update -q >/dev/null || true
		cand=$(apt-cache policy cargo-web 2>/dev/null | sed -nE 's/^ *Candidate: 1\.([0-9]+)\..*/\1/p')
	fi
	if [ "${cand:-0}" -ge "$need" ]; then
		echo "$who: installing Debian's cargo-web and rustc-web (Rust 1.$cand; they replace Debian's cargo and rustc)" >&2
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q cargo-web rustc-web >/dev/null ||
			die "$who: apt-get install cargo-web rustc-web failed"
		c=/usr/bin/cargo
		[ "$(rust_minor "$c")" -ge "$need" ] 2>/dev/null && { echo "$c"; return 0; }
	fi
	die "$who: building it needs cargo and rustc 1.$need or later; found none, and Debian offers cargo-web 1.${cand:-?} (Debian 12's cargo and rustc are 1.63): install Rust 1.$need+ (e.g. rustup's stable toolchain) and put its cargo on PATH"
}

# cargo_install_pinned CRATE VERSION MSRV ROOT "BUILD TIME" [CARGO FEATURE ARGS...]:
# the crate's binary ROOT/bin/CRATE at exactly VERSION, built once from
# crates.io with its own Cargo.lock (`cargo install --locked`) and cached;
# nothing to do when it is there and `CRATE --version` says VERSION.
cargo_install_pinned() {
	local crate=$1 version=$2 msrv=$3 root=$4 took=$5 cargo force=() t0=$SECONDS lock
	shift 5
	local bin=$root/bin/$crate
	[ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null)" = "$crate $version" ] && return 0
	# one build at a time (make demo and a bench started together would each
	# build it, twice as slowly): the second waits for the first, then uses it.
	# The lock file may be another user's (a shared root): read-only does for
	# flock; with none at all (a root nobody may write) cargo fails below.
	mkdir -p "$root"
	if { exec {lock}>>"$root/.build-lock"; } 2>/dev/null || { exec {lock}<"$root/.build-lock"; } 2>/dev/null; then
		if ! flock -n "$lock"; then
			echo "$crate: another process is building $crate $version into $root; waiting for it" >&2
			flock "$lock"
		fi
	else
		exec {lock}</dev/null	# no lock file to take: nothing to wait for
	fi
	if [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null)" = "$crate $version" ]; then
		exec {lock}>&-
		return 0
	fi
	cargo=$(cargo_cmd "$msrv" "$crate")
	# a binary of another version (or a broken one) in the pinned root: build over it
	[ -e "$bin" ] && force=(--force)
	echo "$crate: building $crate $version with $("$cargo" --version) into $root" >&2
	echo "$crate: this takes $took on 2 cores the first time; cargo prints each crate it compiles" >&2
	# cargo runs the rustc beside it (rustup's toolchain, Debian's /usr/bin)
	# (the lock's descriptor closed for cargo: a server it leaves running must not hold the lock)
	PATH=$(dirname "$cargo"):$PATH nice "$cargo" install "$crate@$version" --locked "$@" \
		--root "$root" "${force[@]}" {lock}>&- || die "$crate: cargo install $crate@$version failed (see above)"
	[ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null)" = "$crate $version" ] ||
		die "$crate: cargo install finished but $bin is missing or not $version"
	exec {lock}>&-
	echo "$crate: built in $((SECONDS - t0)) s" >&2
}

# basemap_env MAP PBF NAME: the base map of MAP built (scripts/basemap.sh,
# cached) and exported for the live map's app (scripts/web.sh passes
# TRAFFICDB_WEB_* to it): the extract's archive, the world's, the glyphs and
# the map's name as the page shows it.
basemap_env() {
	local paths
	"$TDB_ROOT/scripts/basemap.sh" all "$1" "$2" >&2
	mapfile -t paths < <("$TDB_ROOT/scripts/basemap.sh" path "$1")
	[ "${#paths[@]}" = 3 ] || die "scripts/basemap.sh path $1: expected three paths, got '${paths[*]}'"
	export TRAFFICDB_WEB_BASEMAP=${paths[0]} TRAFFICDB_WEB_WORLD=${paths[1]} TRAFFICDB_WEB_GLYPHS=${paths[2]} TRAFFICDB_WEB_MAP_NAME=$3
}
