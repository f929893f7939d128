#!/usr/bin/env bash
# scripts/toxiproxy.sh: a throwaway Toxiproxy (Shopify's TCP proxy that adds
# faults such as latency) on 127.0.0.1, to emulate distance between the
# regions of a benchmark (bench/tippy.sh).
#
#   scripts/toxiproxy.sh install
#       build toxiproxy-server with `go install` into
#       ~/.cache/trafficdb/toxiproxy/VERSION/bin if missing (seconds; Go
#       caches the build)
#   scripts/toxiproxy.sh start DIR [PORT]
#       start it with its HTTP API on 127.0.0.1:PORT (default: the first free
#       port from TOXIPROXY_PORTS, "5990-5999"); waits until it answers, then
#       writes DIR/env: TOXIPROXY_URL (source it)
#   scripts/toxiproxy.sh proxy DIR NAME LISTEN_PORT UPSTREAM_PORT RTT_MS
#       a proxy 127.0.0.1:LISTEN_PORT -> 127.0.0.1:UPSTREAM_PORT whose round
#       trip costs RTT_MS more (see below); replaces a proxy of that name
#   scripts/toxiproxy.sh stop DIR
#       stop it (the pid in DIR/pid)
#
# Latency and direction: a latency toxic delays one direction of a proxy's
# stream, "upstream" (client -> server) or "downstream" (server -> client),
# each chunk by the toxic's latency counted from the chunk's arrival.  A
# request and its answer cross both, so a round trip time of R is emulated by
# ceil(R/2) ms on upstream and floor(R/2) ms on downstream (Toxiproxy's
# latency is in whole milliseconds: 1 ms of RTT is 1 ms upstream, 0 down).
# No jitter.  Loopback addresses only: every listen and upstream address is
# 127.0.0.1.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

TOXIPROXY_MODULE=github.com/Shopify/toxiproxy/v2
TOXIPROXY_VERSION=v2.5.0
TOXIPROXY_CACHE=${TOXIPROXY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trafficdb/toxiproxy}
TOXIPROXY_BIN=$TOXIPROXY_CACHE/$TOXIPROXY_VERSION/bin/toxiproxy-server

# Toxiproxy v2.5.0 needs Go 1.17: the go on PATH (or /usr/local/go), else
# Debian's golang-go (1.19 on Debian 12).
go_cmd() {
	local go
	go=$(command -v go || true)
	if [ -z "$go" ] && [ -x /usr/local/go/bin/go ]; then go=/usr/local/go/bin/go; fi
	if [ -z "$go" ]; then
		echo "toxiproxy: installing Debian's golang-go" >&2
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q golang-go >/dev/null
		go=$(command -v go)
	fi
	echo "$go"
}

install_toxiproxy() {
	[ -x "$TOXIPROXY_BIN" ] && return 0
	local go dir tmp
	go=$(go_cmd)
	dir=$(dirname "$TOXIPROXY_BIN")
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/toxiproxy-gobin.XXXXXX")
	echo "toxiproxy: building with go install $TOXIPROXY_MODULE/cmd/server@$TOXIPROXY_VERSION" >&2
	# go install names the binary after its package directory ("server")
	(cd /tmp && GOBIN="$tmp" GOFLAGS=-mod=mod "$go" install "$TOXIPROXY_MODULE/cmd/server@$TOXIPROXY_VERSION")
	[ -x "$tmp/server" ] || die "toxiproxy: go install finished but $tmp/server is missing"
	mkdir -p "$dir"
	mv "$tmp/server" "$TOXIPROXY_BIN"
	rmdir "$tmp"
}

# The first port of LO-HI nothing listens on (and that can be bound) on 127.0.0.1.
free_port_in() {
	python3 - "$1" "$2" <<'EOF'
import socket, sys
for p in range(int(sys.argv[1]), int(sys.argv[2]) + 1):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: a port in TIME_WAIT is free
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    print(p)
    sys.exit(0)
sys.exit("no free port in %s-%s" % (sys.argv[1], sys.argv[2]))
EOF
}

api_url() {
	[ -f "$1/env" ] || die "toxiproxy: no $1/env (start it first)"
	sed -n 's/^export TOXIPROXY_URL=//p' "$1/env"
}

start_toxiproxy() {
	local dir=$1 port=${2:-} range i url
	install_toxiproxy
	mkdir -p "$dir"
	if [ -z "$port" ]; then
		range=${TOXIPROXY_PORTS:-5990-5999}
		port=$(free_port_in "${range%-*}" "${range#*-}")
	fi
	url=http://127.0.0.1:$port
	nohup "$TOXIPROXY_BIN" -host 127.0.0.1 -port "$port" >"$dir/toxiproxy.log" 2>&1 &
	echo $! >"$dir/pid"
	for i in $(seq 1 100); do	# bounded: 20 s
		curl -fs -o /dev/null "$url/version" && break
		kill -0 "$(cat "$dir/pid")" 2>/dev/null || { cat "$dir/toxiproxy.log" >&2; die "toxiproxy: the server exited"; }
		sleep 0.2
	done
	curl -fs -o /dev/null "$url/version" || { stop_toxiproxy "$dir"; die "toxiproxy: no answer on $url after 20 s"; }
	echo "export TOXIPROXY_URL=$url" >"$dir/env"
	echo "toxiproxy: API on $url (pid $(cat "$dir/pid"))" >&2
}

stop_toxiproxy() {
	stop_pidfile "$1/pid"
	rm -f "$1/env"
}

# api METHOD URL [JSON]: one call of the HTTP API, failing with its answer
api() {
	local out code
	out=$(mktemp)
	code=$(curl -s -o "$out" -w '%{http_code}' -X "$1" -H 'Content-Type: application/json' \
		${3:+--data "$3"} "$2") || { rm -f "$out"; die "toxiproxy: $1 $2: no answer"; }
	case $code in
	2??) rm -f "$out" ;;
	*) echo "toxiproxy: $1 $2 -> HTTP $code: $(cat "$out")" >&2; rm -f "$out"; return 1 ;;
	esac
}

make_proxy() {
	local dir=$1 name=$2 listen=$3 upstream=$4 rtt=$5 url up down
	[[ "$listen" =~ ^[0-9]+$ && "$upstream" =~ ^[0-9]+$ && "$rtt" =~ ^[0-9]+$ ]] ||
		die "toxiproxy: ports and RTT_MS must be whole numbers"
	url=$(api_url "$dir")
	up=$(((rtt + 1) / 2))
	down=$((rtt / 2))
	api DELETE "$url/proxies/$name" 2>/dev/null || true
	api POST "$url/proxies" \
		"{\"name\":\"$name\",\"listen\":\"127.0.0.1:$listen\",\"upstream\":\"127.0.0.1:$upstream\",\"enabled\":true}"
	api POST "$url/proxies/$name/toxics" \
		"{\"name\":\"latency_up\",\"type\":\"latency\",\"stream\":\"upstream\",\"toxicity\":1.0,\"attributes\":{\"latency\":$up,\"jitter\":0}}"
	api POST "$url/proxies/$name/toxics" \
		"{\"name\":\"latency_down\",\"type\":\"latency\",\"stream\":\"downstream\",\"toxicity\":1.0,\"attributes\":{\"latency\":$down,\"jitter\":0}}"
	echo "toxiproxy: $name 127.0.0.1:$listen -> 127.0.0.1:$upstream, RTT +$rtt ms ($up ms up, $down ms down)" >&2
}

case "${1:-}" in
install) install_toxiproxy ;;
start) [ -n "${2:-}" ] || die "usage: scripts/toxiproxy.sh start DIR [PORT]"; start_toxiproxy "$2" "${3:-}" ;;
proxy) [ $# -eq 6 ] || die "usage: scripts/toxiproxy.sh proxy DIR NAME LISTEN_PORT UPSTREAM_PORT RTT_MS"; make_proxy "$2" "$3" "$4" "$5" "$6" ;;
stop) [ -n "${2:-}" ] || die "usage: scripts/toxiproxy.sh stop DIR"; stop_toxiproxy "$2" ;;
*) die "usage: scripts/toxiproxy.sh install | start DIR [PORT] | proxy DIR NAME LISTEN_PORT UPSTREAM_PORT RTT_MS | stop DIR" ;;
esac
