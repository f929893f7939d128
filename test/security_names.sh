#!/usr/bin/env bash
# test/security_names.sh [TDBREAD TDBSUB]: a local user in no group squats
# trafficdb's names in /dev/shm (issue 28, item 4).  Needs root (it creates a
# throwaway OS user, removed at exit); prints TAP.
#
# Names in /dev/shm are public and predictable (/trafficdb.<port>.*), and the
# server's user cannot remove another user's file there (sticky bit).  The
# squatter, before the server starts:
#   - creates <prefix>.lock (mode 0666) and holds an OFD read lock on it,
#   - creates <prefix>.ctl, .readers, .subs and .writers (mode 0644);
# then, while it runs, creates the next 400 segment names <prefix>.N.
# Asserted: the server publishes and SQL reads it; the error (status and
# log) names the file, its owner and the remedy; the daemon does not restart
# in a loop; no external tool (tdbread, tdbsub, a Python writer) and no server
# process maps the squatter's objects, and each refusal names the owner; once
# root removes the files the daemon moves back to the configured names by
# itself; taken segment names are skipped with a WARNING naming the owner.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
tdbread=$(readlink -f "${1:-$root/tools/tdbread}")
tdbsub=$(readlink -f "${2:-$root/tools/tdbsub}")

if [ "$(id -u)" != 0 ]; then
	echo "1..0 # SKIP squatting another user's names needs root to create an OS user"
	exit 0
fi

squat=tdbsquat$$
dir=$(mktemp -d /tmp/trafficdb-names.XXXXXX)
holder=
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
prefix=/trafficdb.$port
# the lock holder: runuser's pid, and (from its output) the squatter's python process
stop_holder() {
	local pid
	pid=$(sed -n 's/^locked \([0-9]*\)$/\1/p' "$dir/holder.out" 2>/dev/null || true)
	[ -n "$pid" ] && kill "$pid" 2>/dev/null || true
	[ -n "$holder" ] && { kill "$holder" 2>/dev/null || true; wait "$holder" 2>/dev/null || true; }
	holder=
}
cleanup() {
	as_pg "$PG_BIN/pg_ctl" -D "$dir/data" stop -m immediate -t 30 >/dev/null 2>&1 || true
	stop_holder
	find /dev/shm -maxdepth 1 -user "$squat" -delete 2>/dev/null || true
	userdel "$squat" 2>/dev/null || true
	getent group "$squat" >/dev/null && groupdel "$squat" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

# a user in no group of trafficdb's (useradd gives it a private group only)
useradd --system -M -s /usr/sbin/nologin "$squat"
squat_uid=$(id -u "$squat")
as() { runuser -u "$1" -- "${@:2}"; }

chmod 755 "$dir"
install -m 755 "$tdbread" "$tdbsub" "$dir/"
mkdir -p "$dir/python" && cp -r "$root/python/trafficdb" "$dir/python/" && install -m 755 "$root/lib/libtrafficdb.so" "$dir/"
chmod -R a+rX "$dir/python"
make_pg_dir "$dir/data"
make_pg_dir "$dir/sock"
as_pg "$PG_BIN/initdb" -D "$dir/data" -E UTF8 --locale=C.UTF-8 -A trust -U postgres >/dev/null
cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = ''
port = $port
unix_socket_directories = '$dir/sock'
shared_preload_libraries = 'trafficdb'
trafficdb.database = 'postgres'
trafficdb.publish_interval = '1h'
EOF
log=$dir/data/log
psql() { timeout 120 "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir/sock" -p "$port" -U postgres -d postgres "$@"; }
roads() {
	echo "DROP TABLE IF EXISTS roads; CREATE TABLE roads AS SELECT i::bigint AS id,
	  ST_SetSRID(ST_MakeLine(ST_MakePoint(25 + i * 0.001, 60.15), ST_MakePoint(25 + i * 0.001, 60.151)), 4326) AS geom
	  FROM generate_series(1, $1) i;"
}

echo "# the squatter ($squat, uid $squat_uid) takes the names before the server starts"
# <prefix>.lock, writable by everyone, with an OFD read lock held on it
as "$squat" python3 -c '
import fcntl, os, struct, sys, time
fd = os.open("/dev/shm" + sys.argv[1] + ".lock", os.O_RDWR | os.O_CREAT, 0o666)
os.fchmod(fd, 0o666)
F_OFD_SETLK = 37
fcntl.fcntl(fd, F_OFD_SETLK, struct.pack("hh4xqqi4x", fcntl.F_RDLCK, 0, 0, 0, 0))
print("locked", os.getpid(), flush=True)
time.sleep(900)
' "$prefix" >"$dir/holder.out" 2>&1 &
holder=$!
for _ in $(seq 100); do grep -q locked "$dir/holder.out" && break; sleep 0.1; done
check "the squatter holds an OFD read lock on $prefix.lock" grep -q locked "$dir/holder.out"
for s in ctl readers subs writers; do
	as "$squat" sh -c "umask 022; head -c 65536 /dev/zero >/dev/shm$prefix.$s"
done
check "the squatter owns .ctl .readers .subs .writers" \
	[ "$(stat -c %U /dev/shm$prefix.{ctl,readers,subs,writers} | sort -u)" = "$squat" ]

as_pg "$PG_BIN/pg_ctl" -D "$dir/data" -l "$log" -w -t 60 start >/dev/null
psql -c "SET client_min_messages = warning" -c "CREATE EXTENSION trafficdb CASCADE" -c "$(roads 50)" >/dev/null
n=$(psql -Atc "SELECT trafficdb.load_map('roads')" 2>&1 || true)
check "the map loads with every fixed name squatted (got: $n)" [ "$n" = 50 ]
psql -c "INSERT INTO trafficdb.feed (location_id, speed_kmh) SELECT id, 30 FROM roads" -c "SELECT trafficdb.publish()" >/dev/null 2>&1 || true
v=$(psql -Atc "SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 7" 2>&1 || true)
check "the daemon publishes and SQL reads it (got: $v)" [ "$v" = 30 ]
last=$(psql -Atc "SELECT last_error FROM trafficdb.status")
echo "# last_error: $last"
check "last_error names the file" grep -qE "\"/dev/shm$prefix\.(lock|ctl|readers|subs|writers)\" is taken" <<<"$last"
check "last_error names the owner, user name and uid" grep -qF "by user $squat (uid $squat_uid)" <<<"$last"
check "last_error says what to do" grep -qE "remove it as root, or set trafficdb.shm_name" <<<"$last"
check "it no longer blames another running server" bash -c '! grep -q "another running server" "$1"' _ "$log"
sleep 3
check "the log names file and owner in a WARNING" \
	grep -qE "WARNING:  trafficdb: \"/dev/shm$prefix\.[a-z]+\" is taken by user $squat \\(uid $squat_uid\\)" "$log"
check "the daemon started once (no restart every second)" [ "$(grep -c 'trafficdb: created shared memory' "$log")" = 1 ]

# nobody maps the squatter's objects: external tools refuse them, naming the owner
out=$(as_pg "$dir/tdbread" "$prefix" 2>&1 || true); echo "# tdbread: $out"
check "tdbread (as the server's user) refuses the squatter's control block" \
	grep -qE "\"$prefix\.ctl\" belongs to user $squat \\(uid $squat_uid\\)" <<<"$out"
out=$(as_pg env TRAFFICDB_LIB="$dir/libtrafficdb.so" "$dir/tdbsub" "$prefix" --ids 1 --timeout-ms 2000 2>&1 || true)
echo "# tdbsub: $out"
check "tdbsub refuses them, naming the owner" grep -q "belongs to user $squat" <<<"$out"
out=$(as_pg env -C "$dir" TRAFFICDB_LIB="$dir/libtrafficdb.so" PYTHONPATH="$dir/python" python3 -c '
import sys, trafficdb
try:
    with trafficdb.Writer(sys.argv[1]) as w:
        w.put(1, speed_kmh=99.0, sync=True)
    print("put ok")
except Exception as e:
    print("error:", e)
' "$prefix" 2>&1 || true)
echo "# writer: $out"
check "a writer refuses them, naming the owner" grep -q "belongs to user $squat" <<<"$out"
maps=$(grep -lE "/dev/shm$prefix\.(lock|ctl|readers|subs|writers)( \(deleted\))?$" /proc/[0-9]*/maps 2>/dev/null || true)
check "no process maps the squatter's objects" [ -z "$maps" ]
check "the server never opened the squatter's lock (only its holder has it open)" \
	[ "$(find /proc/[0-9]*/fd -lname "/dev/shm$prefix.lock" 2>/dev/null | wc -l)" = 1 ]

echo "# root removes the squatter's files: the daemon moves back by itself"
stop_holder
find /dev/shm -maxdepth 1 -user "$squat" -delete
ok=0
for _ in $(seq 120); do
	if as_pg "$dir/tdbread" "$prefix" >"$dir/read.out" 2>&1; then ok=1; break; fi
	sleep 0.5
done
check "external readers attach under the configured names again" [ $ok = 1 ]
check "a snapshot they read is consistent" grep -q "consistent=1" "$dir/read.out"
out=$(as "$squat" "$dir/tdbread" "$prefix" 2>&1 || true); echo "# tdbread as $squat: $out"
check "another user gets the permission message naming trafficdb.shm_group, as before" \
	grep -q "no permission to map \"$prefix.ctl\".*trafficdb.shm_group" <<<"$out"
check "the private names are gone" [ -z "$(find /dev/shm -maxdepth 1 -name "trafficdb.$port-*")" ]

echo "# while it runs the squatter takes the next 400 segment names"
as "$squat" bash -c 'for i in $(seq 1 400); do [ -e "/dev/shm$1.$i" ] || : >"/dev/shm$1.$i"; done' _ "$prefix"
psql -c "$(roads 300)" >/dev/null
n=$(psql -Atc "SELECT trafficdb.load_map('roads')" 2>&1 || true)
check "a new map (new objects) loads (got: $n)" [ "$n" = 300 ]
psql -c "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (250, 17)" -c "SELECT trafficdb.publish()" >/dev/null 2>&1 || true
v=$(psql -Atc "SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 250" 2>&1 || true)
check "and is published (got: $v)" [ "$v" = 17 ]
out=$(as_pg "$dir/tdbread" "$prefix" 2>&1 || true); echo "# tdbread: $out"
check "an external reader reads it (300 locations, consistent)" grep -q "locations=300 .*consistent=1" <<<"$out"
check "one WARNING names a skipped name and its owner" \
	grep -qE "WARNING:  trafficdb: skipped a name another user holds: \"/dev/shm$prefix\.[0-9]+\" is taken by user $squat \\(uid $squat_uid\\)" "$log"
bad=
for f in $(cat /proc/[0-9]*/maps 2>/dev/null | grep -oE "/dev/shm$prefix\.[0-9]+$" | sort -u); do
	[ "$(stat -c %U "$f" 2>/dev/null)" = "$squat" ] && bad="$bad $f"
done
check "no process maps a squatter's segment name" [ -z "$bad" ]

as_pg "$PG_BIN/pg_ctl" -D "$dir/data" -w -t 60 stop >/dev/null
check "a clean stop leaves no object of the server's under the prefix" \
	[ -z "$(find /dev/shm -maxdepth 1 -name "trafficdb.$port*" ! -user "$squat")" ]
# a squatter's object the server's user cannot even open (0600): named as the squatter's, not
# blamed on trafficdb.shm_group
as "$squat" sh -c "umask 077; head -c 65536 /dev/zero >/dev/shm$prefix.ctl"
out=$(as_pg "$dir/tdbread" "$prefix" 2>&1 || true); echo "# tdbread: $out"
check "an unreadable squatter's .ctl is refused as the squatter's" grep -q "\"$prefix.ctl\" belongs to user $squat" <<<"$out"
tap_done
