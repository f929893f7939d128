#!/usr/bin/env bash
# scripts/minio.sh: a throwaway MinIO (a real S3 server) on 127.0.0.1 for
# the trail tests and the demo.
#
#   scripts/minio.sh install      build MinIO with `go install` into
#                                 ~/.cache/trafficdb/minio/VERSION/bin if missing (a few minutes
#                                 the first time; Go caches the build)
#   scripts/minio.sh start DIR    start it on a free port of 127.0.0.1 with data
#                                 in DIR/data and generated root credentials;
#                                 waits until it answers, then writes DIR/env:
#                                 MINIO_ENDPOINT, MINIO_ROOT_USER,
#                                 MINIO_ROOT_PASSWORD (source it)
#   scripts/minio.sh stop DIR     stop it (the pid in DIR/pid) and remove DIR/data
#   scripts/minio.sh ports        print the two ports start would take now
#
# Ports: two, the S3 API's and the console's (which nothing here uses, but
# MinIO always listens on one): the first two free ones of
# TDB_MINIO_PORTS="FIRST LAST" when set, else two the system picks.
#
# The credentials are random per start and live only in DIR/env (mode 600).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# The MinIO every test and demo runs: one pinned module version (the one
# docs/DESIGN names), so a fresh machine builds what was tested.
MINIO_MODULE=github.com/minio/minio
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c

# Outside the checkout, so fresh clones on this machine reuse the build; one
# directory per version, so a new pin builds anew.
MINIO_CACHE=${MINIO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trafficdb/minio}
MINIO_BIN=$MINIO_CACHE/$MINIO_VERSION/bin/minio

# A Go toolchain new enough for MinIO: the one on PATH when it is 1.21 or
# later (GOTOOLCHAIN=auto then fetches whatever MinIO's go.mod asks for
# through the module proxy); otherwise Debian's golang-go, which only serves
# to download a newer toolchain as a module (golang.org/toolchain).
go_cmd() {
	local go minor
	go=$(command -v go || true)
	if [ -z "$go" ] && [ -x /usr/local/go/bin/go ]; then go=/usr/local/go/bin/go; fi
	if [ -z "$go" ]; then
		echo "minio: installing Debian's golang-go" >&2
		# package lists may be stale where scripts/deps.sh found nothing to install
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q golang-go >/dev/null ||
			{ $SUDO apt-get update -q >/dev/null &&
				DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q golang-go >/dev/null; }
		go=$(command -v go)
	fi
	minor=$("$go" env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
	if [ "${minor:-0}" -lt 21 ]; then
		local tc=golang.org/toolchain@v0.0.1-go1.24.4.linux-amd64 dir
		echo "minio: $("$go" env GOVERSION) is too old; fetching $tc" >&2
		dir=$(cd /tmp && GOFLAGS=-mod=mod "$go" mod download -json "$tc" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
		[ -f "$dir/bin/go" ] || die "minio: could not fetch a Go toolchain ($tc)"
		# the module cache unpacks files without their execute bits
		chmod u+x "$dir/bin/"* "$dir/pkg/tool/"*/* 2>/dev/null || true
		[ -x "$dir/bin/go" ] || die "minio: the Go toolchain in $dir is not executable"
		go=$dir/bin/go
	fi
	echo "$go"
}

install_minio() {
	if [ -x "$MINIO_BIN" ]; then
		return 0
	fi
	local go
	go=$(go_cmd)
	mkdir -p "$(dirname "$MINIO_BIN")"
	echo "minio: building with go install $MINIO_MODULE@$MINIO_VERSION (first time: a few minutes)" >&2
	local t0=$SECONDS
	(cd /tmp && GOTOOLCHAIN=auto GOBIN="$(dirname "$MINIO_BIN")" GOFLAGS=-mod=mod "$go" install "$MINIO_MODULE@$MINIO_VERSION")
	[ -x "$MINIO_BIN" ] || die "minio: go install finished but $MINIO_BIN is missing"
	echo "minio: built in $((SECONDS - t0)) s" >&2
}

# minio_ports: "S3 CONSOLE", two distinct free ports of 127.0.0.1 (see Ports above)
minio_ports() {
	local first last p found=()
	if [ -n "${TDB_MINIO_PORTS:-}" ]; then
		[[ $TDB_MINIO_PORTS =~ ^[[:space:]]*([0-9]{1,5})[[:space:]]+([0-9]{1,5})[[:space:]]*$ ]] &&
			[ "${BASH_REMATCH[1]}" -ge 1 ] && [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ] &&
			[ "${BASH_REMATCH[2]}" -le 65535 ] ||
			die "minio: TDB_MINIO_PORTS=\"$TDB_MINIO_PORTS\": expected \"FIRST LAST\", two port numbers, FIRST <= LAST <= 65535"
		first=${BASH_REMATCH[1]} last=${BASH_REMATCH[2]}
		for p in $(seq "$first" "$last"); do
			port_in_use "$p" || found+=("$p")
			if [ "${#found[@]}" = 2 ]; then echo "${found[*]}"; return 0; fi
		done
		die "minio: fewer than two free TCP ports on 127.0.0.1 between $first and $last (TDB_MINIO_PORTS; MinIO takes two: S3 and console)"
	fi
	# both bound at once, so that they differ
	python3 -c 'import socket
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])'
}

start_minio() {
	local dir=$1
	install_minio
	mkdir -p "$dir/data"
	local port cport user pass
	read -r port cport <<<"$(minio_ports)"
	[ -n "$cport" ] || exit 1	# minio_ports said why
	user=tdb$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
	pass=$(od -An -N18 -tx1 /dev/urandom | tr -d ' \n')
	MINIO_ROOT_USER=$user MINIO_ROOT_PASSWORD=$pass MINIO_BROWSER=off MINIO_UPDATE=off \
		nohup "$MINIO_BIN" server --quiet --address "127.0.0.1:$port" \
		--console-address "127.0.0.1:$cport" "$dir/data" >"$dir/minio.log" 2>&1 &
	echo $! >"$dir/pid"
	# ready when the liveness endpoint answers; bounded to 60 s
	local i
	for i in $(seq 1 120); do
		if curl -fs -o /dev/null "http://127.0.0.1:$port/minio/health/live"; then
			break
		fi
		if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
			cat "$dir/minio.log" >&2
			die "minio: the server exited"
		fi
		sleep 0.5
	done
	curl -fs -o /dev/null "http://127.0.0.1:$port/minio/health/live" || {
		stop_minio "$dir"
		die "minio: not ready after 60 s"
	}
	umask 077
	cat >"$dir/env" <<EOF
export MINIO_ENDPOINT=http://127.0.0.1:$port
export MINIO_ROOT_USER=$user
export MINIO_ROOT_PASSWORD=$pass
EOF
	echo "minio: listening on http://127.0.0.1:$port, console port $cport (pid $(cat "$dir/pid"), env in $dir/env)" >&2
}

stop_minio() {
	[ -f "$1/pid" ] || return 0
	stop_pidfile "$1/pid"
	rm -rf "$1/data"
}

case "${1:-}" in
install) install_minio ;;
start) [ -n "${2:-}" ] || die "usage: scripts/minio.sh start DIR"; start_minio "$2" ;;
stop) [ -n "${2:-}" ] || die "usage: scripts/minio.sh stop DIR"; stop_minio "$2" ;;
ports) minio_ports ;;
*) die "usage: scripts/minio.sh install | start DIR | stop DIR | ports" ;;
esac
