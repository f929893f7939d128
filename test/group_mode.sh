#!/usr/bin/env bash
# test/group_mode.sh LIVE_TRAFFIC TDBREAD: who may read trafficdb's shared
# memory, checked with real OS users (so it needs root; scripts/test.sh runs
# it when it runs as root and says it skipped it otherwise).
#
#   - without trafficdb.shm_group every object is 0600: another user's
#     reader gets TRAFFICDB_PERMISSION with a message that names the setting;
#   - with trafficdb.shm_group = trafficdb-readers a member reads (objects
#     0640, the reader slots 0660) and a non-member still cannot;
#   - an external reader maps the control block and the objects read-only
#     (its /proc/PID/maps shows r--s); only its slot table is writable;
#   - the writers' ring <prefix>.writers is 0600 without trafficdb.writer_group
#     (another user's trafficdb_put: TRAFFICDB_PERMISSION naming the setting),
#     0660 with it: a member of both groups puts (the value is published), a
#     member of the readers' group only cannot, and readers still map every
#     object read-only.
#
# Users and group are created once if missing: trafficdb-readers (group),
# tdb-reader (a member), tdb-outsider (not), trafficdb-writers (group) and
# tdb-writer (a member of both); postgres joins the groups, as an operator's
# server account must for the server to hand objects to them.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"

live=$(readlink -f "$1")
tdbread=$(readlink -f "$2")

if [ "$(id -u)" != 0 ]; then
	echo "1..0 # SKIP group mode needs root to create OS users"
	exit 0
fi
dir=
cleanup() {
	[ -n "$dir" ] && as_pg "$PG_BIN/pg_ctl" -D "$dir/data" stop -m immediate >/dev/null 2>&1 || true
	[ -n "$dir" ] && rm -rf "$dir"
}
trap cleanup EXIT
os_group trafficdb-readers
os_user tdb-reader trafficdb-readers
os_user tdb-outsider
os_group trafficdb-writers
os_user tdb-writer trafficdb-readers,trafficdb-writers
pg_joins trafficdb-readers trafficdb-writers

# a world-readable copy of the readers, the Python bindings and libtrafficdb
# (for puts as other users)
shared_tools_dir /tmp/trafficdb-group.XXXXXX "$live" "$tdbread"
os_users_cluster
mode_of() { stat -c '%a %G' "/dev/shm$prefix.$1"; }
box=(24.9 60.1 25.1 60.2)

echo "# owner-only (the default)"
start
publish_small_map
check "the control block is 0600" [ "$(mode_of ctl)" = "600 postgres" ]
err=$(as tdb-reader "$dir/live_traffic" "$prefix" "${box[@]}" 2>&1 >/dev/null || true)
check "another user gets a permission error naming trafficdb.shm_group" \
	grep -q "permission denied (run as the server's user or set trafficdb.shm_group)" <<<"$err"
stop

echo "# trafficdb.shm_group = trafficdb-readers"
echo "trafficdb.shm_group = 'trafficdb-readers'" >>"$dir/data/postgresql.conf"
start
psql -c "SELECT trafficdb.publish()" >/dev/null
check "the control block is 0640, group trafficdb-readers" [ "$(mode_of ctl)" = "640 trafficdb-readers" ]
check "the reader slots are 0660 (a reader writes its own slot)" [ "$(mode_of readers)" = "660 trafficdb-readers" ]
objs=$(find /dev/shm -maxdepth 1 -name "trafficdb.$port.[0-9]*" -printf '%m %g\n' | sort -u)
check "every object is 0640, group trafficdb-readers" [ "$objs" = "640 trafficdb-readers" ]
out=$(as tdb-reader "$dir/live_traffic" "$prefix" "${box[@]}" 2>&1 || true); echo "$out" | sed "s/^/# /"
check "a member of the group reads live traffic" grep -q "50 segments with traffic in the box" <<<"$out"
err=$(as tdb-outsider "$dir/live_traffic" "$prefix" "${box[@]}" 2>&1 >/dev/null || true)
check "a non-member still gets a permission error" grep -q "permission denied" <<<"$err"

# what a reader maps, and how
as tdb-reader "$dir/tdbread" "$prefix" hold 20 >"$dir/hold.out" 2>&1 &
holder=$!
for _ in $(seq 100); do grep -q holding "$dir/hold.out" && break; sleep 0.1; done
pid=$(pgrep -u tdb-reader -f "tdbread $prefix hold" | head -1)
maps=$(grep "/dev/shm$prefix" "/proc/$pid/maps" | awk '{ print $2, $6 }')
kill "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
check "the reader maps the control block read-only" grep -q "^r--s /dev/shm$prefix.ctl$" <<<"$maps"
check "the reader maps every object read-only" \
	bash -c '! grep -E "\.[0-9]+$" <<<"$1" | grep -qv "^r--s"' _ "$maps"
check "it maps at least the map and a traffic object" [ "$(grep -cE "\.[0-9]+$" <<<"$maps")" -ge 2 ]
check "only the reader slot table is writable" [ "$(grep -c '^rw' <<<"$maps")" = "$(grep -c "^rw-s /dev/shm$prefix.readers$" <<<"$maps")" ]

echo "# a hostile member of the group (it can write <prefix>.readers)"
daemon=$(psql -Atc "SELECT daemon_pid FROM trafficdb.status")
# a REPEATABLE READ session reads, sleeps while the member attacks, reads again
psql -Atc "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, 11)" -c "SELECT trafficdb.publish()" >/dev/null
psql -At -c "BEGIN ISOLATION LEVEL REPEATABLE READ" \
	-c "SELECT 'before', speed_kmh FROM trafficdb.locations WHERE location_id = 1" -c "SELECT pg_sleep(6)" \
	-c "SELECT 'after', speed_kmh FROM trafficdb.locations WHERE location_id = 1" -c "COMMIT" >"$dir/rr.out" 2>&1 &
rr=$!
for _ in $(seq 100); do grep -q before "$dir/rr.out" && break; sleep 0.1; done
# every byte of the slots zeroed (it used to clear backends' pins too), then a huge slot count
as tdb-reader python3 -c '
import mmap, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDWR); size = os.fstat(fd).st_size
m = mmap.mmap(fd, size); m[64:size] = bytes(size - 64); m[4:8] = struct.pack("<I", 0x7fffffff); m.close()' "/dev/shm$prefix.readers"
for i in $(seq 1 70); do
	psql -c "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, 100 + $i)" -c "SELECT trafficdb.publish()" >/dev/null
done
wait "$rr" || true
check "a member's writes to the slots segment do not reach backends' pins (REPEATABLE READ kept its value)" \
	bash -c 'grep -q "^before|11$" "$1" && grep -q "^after|11$" "$1"' _ "$dir/rr.out"
# truncated to nothing: used to be a SIGBUS in the daemon (a cluster restart)
as tdb-reader truncate -s 0 "/dev/shm$prefix.readers"
psql -c "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, 200)" -c "SELECT trafficdb.publish()" >/dev/null
check "the daemon survives a truncated slots segment (same pid) and publishes" \
	[ "$(psql -Atc "SELECT daemon_pid || ' ' || (SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 1) FROM trafficdb.status")" = "$daemon 200" ]
check "it says so in the log" grep -q "readers was damaged (truncated.*and was made anew" "$dir/data/log"
check "trafficdb.readers still answers" [ -n "$(psql -Atc "SELECT count(*) FROM trafficdb.readers")" ]
out=$(as tdb-reader "$dir/live_traffic" "$prefix" "${box[@]}" 2>&1 || true)
check "members read again through the new slots segment" grep -q "50 segments with traffic in the box" <<<"$out"
stop

echo "# the writers' ring: owner-only, then trafficdb.writer_group = trafficdb-writers"
# put LOCATION SPEED as USER: prints ok or the error
put() {
	as "$1" env -C "$dir" TRAFFICDB_LIB="$dir/libtrafficdb.so" PYTHONPATH="$dir/python" python3 -c '
import sys, trafficdb
try:
    with trafficdb.Writer(sys.argv[1]) as w:
        w.put(int(sys.argv[2]), speed_kmh=float(sys.argv[3]), sync=True)
    print("ok")
except trafficdb.TrafficDBError as e:
    print("error:", e)' "$prefix" "$2" "$3" 2>&1 || true
}
start
psql -c "SELECT trafficdb.publish()" >/dev/null
check "without writer_group the ring is 0600" [ "$(mode_of writers)" = "600 postgres" ]
out=$(put tdb-writer 2 41); echo "# $out"
check "another user cannot put; the error names trafficdb.writer_group" grep -q "trafficdb.writer_group is not set" <<<"$out"
stop
echo "trafficdb.writer_group = 'trafficdb-writers'" >>"$dir/data/postgresql.conf"
start
psql -c "SELECT trafficdb.publish()" >/dev/null
check "with writer_group the ring is 0660, group trafficdb-writers" [ "$(mode_of writers)" = "660 trafficdb-writers" ]
objs=$(find /dev/shm -maxdepth 1 -name "trafficdb.$port.[0-9]*" -printf '%m %g\n' | sort -u)
check "the map and traffic objects stay 0640 for readers" [ "$objs" = "640 trafficdb-readers" ]
out=$(put tdb-writer 2 42.5); echo "# $out"
check "a member of writer_group puts (SYNC)" [ "$out" = ok ]
check "and the put is published" [ "$(psql -Atc "SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 2")" = "42.5" ]
# the ring's bell line (src/ring/ring.h): daemon_asleep and the count of rings
bell_line() {
	python3 -c 'import struct, sys
a, _, _, rang = struct.unpack_from("<IIQQ", open(sys.argv[1], "rb").read(88), 64)
print(a, rang)' "/dev/shm$prefix.writers"
}
# a member's put into the sleeping ring rings it (tried 3 times: the daemon may wake on its own just before)
member_rings() {
	local a r0 r1
	for _ in 1 2 3; do
		for _ in $(seq 1 100); do	# bounded: 5 s
			read -r a r0 < <(bell_line)
			[ "$a" = 1 ] && break
			sleep 0.05
		done
		[ "$a" = 1 ] || { echo "# the daemon never said it sleeps"; return 1; }
		[ "$(put tdb-writer 4 44.5)" = ok ] || return 1
		read -r a r1 < <(bell_line)
		[ "$r1" = $((r0 + 1)) ] && return 0
	done
	return 1
}
check "a member of writer_group (another OS user) wakes the idle daemon: its put rings the bell once" member_rings
check "and is published" [ "$(psql -Atc "SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 4")" = "44.5" ]
out=$(put tdb-reader 3 43); echo "# $out"
check "a reader who is not in writer_group cannot put; the error names it" \
	grep -q 'not a member of trafficdb.writer_group "trafficdb-writers"' <<<"$out"
check "nothing of the refused put was applied" [ -z "$(psql -Atc "SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 3 AND speed_kmh = 43")" ]
stop

tap_done
