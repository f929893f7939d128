#!/usr/bin/env bash
# test/sumo_feeder_hostile.sh: web/sumo_feeder.py's SUMO against a local user
# or a host of the network.  SUMO's TraCI server listens on 0.0.0.0 and takes
# the first client: as root (the demo) the feeder runs it in a network
# namespace of its own, so no socket of SUMO's is reachable from outside it;
# and a feeder killed with SIGKILL (even before it connected) leaves no SUMO
# behind.  The feeder's writer finds no server (a name no server has): SUMO is
# all this tests.  Every wait is bounded.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$TDB_ROOT"
[ "$(id -u)" = 0 ] || { echo "sumo_feeder_hostile: skipped (the network namespace needs root)"; exit 0; }
sim=$(scripts/sumo.sh build helsinki data/helsinki.osm.pbf | tail -n 1)
py=${TDB_WEB_VENV:-$TDB_ROOT/.venv-web}/bin/python
work=$(mktemp -d /tmp/trafficdb-sumohostile.XXXXXX)
feeder=
cleanup() { set +e; [ -n "$feeder" ] && kill -9 "$feeder" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
sumo_of() { ps -eo pid=,ppid=,comm= | awk -v p="$1" '$2 == p && $3 == "sumo" { print $1 }'; }

# 1. while the feeder runs: SUMO listens in the host's network namespace on no port
# (ss missing would pass the check below without looking: a minbase Debian has none)
command -v ss >/dev/null || die "ss not found: scripts/deps.sh installs it (iproute2)"
"$py" web/sumo_feeder.py --shm /trafficdb.nonesuch --sim "$sim" --steps 3 --warmup 30 >"$work/feeder.log" 2>&1 &
feeder=$!
seen=0 sumo=
for _ in $(seq 1 1000); do	# up to ~20 s
	kill -0 "$feeder" 2>/dev/null || break
	[ -n "$sumo" ] || sumo=$(sumo_of "$feeder")
	if [ -n "$sumo" ]; then
		seen=1
		if ss -ltnpH | grep -q "pid=$sumo,"; then die "SUMO (pid $sumo) listens in the host's network: $(ss -ltnpH | grep "pid=$sumo,")"; fi
		[ "$(readlink /proc/$$/ns/net)" != "$(readlink "/proc/$sumo/ns/net" 2>/dev/null || echo gone)" ] ||
			die "SUMO (pid $sumo) runs in the host's network namespace"
	fi
	sleep 0.02
done
wait "$feeder" || die "the feeder failed: $(tail -n 5 "$work/feeder.log")"
feeder=
[ "$seen" = 1 ] || die "never saw the feeder's SUMO"
echo "ok   SUMO's TraCI port is not in the host's network namespace"

# 2. the feeder killed with SIGKILL as soon as SUMO started (before it connected): SUMO dies too
"$py" web/sumo_feeder.py --shm /trafficdb.nonesuch --sim "$sim" >"$work/feeder2.log" 2>&1 &
feeder=$!
sumo=
for _ in $(seq 1 1000); do sumo=$(sumo_of "$feeder"); [ -n "$sumo" ] && break; sleep 0.01; done
[ -n "$sumo" ] || die "the feeder started no SUMO: $(tail -n 5 "$work/feeder2.log")"
kill -9 "$feeder"; wait "$feeder" 2>/dev/null || true; feeder=
for _ in $(seq 1 50); do kill -0 "$sumo" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$sumo" 2>/dev/null; then kill -9 "$sumo"; die "SUMO (pid $sumo) outlived its feeder killed with SIGKILL"; fi
echo "ok   SUMO dies with its feeder"

# 3. what an operator gets wrong: one line naming it, exit 2, no traceback, no SUMO started
mkdir -p "$work/garbage"
for f in sim.json edges.tsv sim.sumocfg; do echo garbage >"$work/garbage/$f"; done
check_refused() {	# WHAT EXPECTED-TEXT ARGS...
	local what=$1 want=$2 rc=0 out; shift 2
	out=$(timeout 60 "$py" web/sumo_feeder.py --shm /trafficdb.nonesuch "$@" 2>&1) || rc=$?
	[ "$rc" = 2 ] && grep -qF -- "$want" <<<"$out" && ! grep -q Traceback <<<"$out" ||
		die "$what: expected exit 2 and '$want', got $rc: $out"
	echo "ok   $what: $(tail -n 1 <<<"$out")"
}
check_refused "a status file in a missing directory" "is not a directory this user may write" \
	--sim "$sim" --steps 1 --status "$work/nonesuch/sim.json"
check_refused "a --sim of garbage files" "expected a directory scripts/sumo.sh build MAP PBF made" --sim "$work/garbage"
check_refused "a --sim without its files" "no sim.json" --sim "$work"

# 4. a status file in a directory others may write: their FILE.tmp symlink to another file is not followed
mkdir -p "$work/shared"; chmod 1777 "$work/shared"
echo "precious" >"$work/victim"
ln -s "$work/victim" "$work/shared/sim.json.tmp"
timeout 120 "$py" web/sumo_feeder.py --shm /trafficdb.nonesuch --sim "$sim" --steps 1 --warmup 5 \
	--status "$work/shared/sim.json" >"$work/feeder4.log" 2>&1 || die "the feeder failed: $(tail -n 5 "$work/feeder4.log")"
[ "$(cat "$work/victim")" = precious ] || die "the feeder wrote through a symlink beside its status file: $(head -c 100 "$work/victim")"
"$py" -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["clock"] and d["ways"], d' "$work/shared/sim.json" ||
	die "the status file is not the feeder's"
[ "$(stat -c %a "$work/shared/sim.json")" = 644 ] || die "the status file is $(stat -c %a "$work/shared/sim.json"), expected 644"
[ "$(find "$work/shared" -name 'sim.json.*' ! -name sim.json.tmp | wc -l)" = 0 ] || die "temporary files left: $(ls "$work/shared")"
echo "ok   the status file is written through a file of the feeder's own, never a symlink beside it"
