#!/usr/bin/env bash
# test/security_shm.sh TDBSUB TDBREAD: what a member of trafficdb.shm_group
# (and of trafficdb.writer_group) can do to the segments it can write,
# checked with real OS users (so it needs root; issue 28, items 3 and 8).
#
# A member truncates <prefix>.subs while a SQL session waits in
# subscription_events() and another member's tdbsub waits for events;
# truncates <prefix>.writers under another member's writer; truncates
# <prefix>.readers under another member's tdbread; zeroes the .readers
# header.  Each of them may break the member's own process at most: the
# server never restarts (postmaster start time and daemon pid unchanged),
# the session and the other parties get errors (never a signal), the
# daemon says what was damaged in status.last_error, and new subscribers,
# writers and readers work again.
#
# Users and groups are made here and removed at exit: tdbsec-shm and
# tdbsec-wr (groups), tdbsec-member (the attacker, in both) and
# tdbsec-victim (in both); postgres joins both groups while the test runs.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"

tdbsub=$(readlink -f "$1")
tdbread=$(readlink -f "$2")

if [ "$(id -u)" != 0 ]; then
	echo "1..0 # SKIP needs root to create OS users"
	exit 0
fi
dir=
cleanup() {
	[ -n "$dir" ] && as_pg "$PG_BIN/pg_ctl" -D "$dir/data" stop -m immediate >/dev/null 2>&1 || true
	userdel tdbsec-member 2>/dev/null || true
	userdel tdbsec-victim 2>/dev/null || true
	groupdel tdbsec-shm 2>/dev/null || true
	groupdel tdbsec-wr 2>/dev/null || true
	[ -n "$dir" ] && rm -rf "$dir"
}
trap cleanup EXIT
os_group tdbsec-shm
os_group tdbsec-wr
os_user tdbsec-member tdbsec-shm,tdbsec-wr
os_user tdbsec-victim tdbsec-shm,tdbsec-wr
pg_joins tdbsec-shm tdbsec-wr

shared_tools_dir /tmp/trafficdb-secshm.XXXXXX "$tdbsub" "$tdbread"
os_users_cluster "trafficdb.shm_group = 'tdbsec-shm'" "trafficdb.writer_group = 'tdbsec-wr'" \
	"trafficdb.publish_interval = '1h'"
shm=/dev/shm$prefix
start
# wait_for FILE REGEX SECONDS: until FILE matches (bounded)
wait_for() { for _ in $(seq $(($3 * 10))); do grep -qE "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
# exited PID SECONDS: wait (bounded) until the process is gone
exited() { for _ in $(seq $(($2 * 10))); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done; return 1; }

publish_small_map
started=$(psql -Atc "SELECT pg_postmaster_start_time()")
daemon=$(psql -Atc "SELECT daemon_pid FROM trafficdb.status")
check "the subscribers' segment is 0660 for tdbsec-shm" [ "$(stat -c '%a %G' "$shm.subs")" = "660 tdbsec-shm" ]

echo "# a member truncates .subs under a waiting SQL session and another member's tdbsub"
sid=$(psql -Atc "INSERT INTO trafficdb.subscriptions (name, location_ids) VALUES ('sec', '{1, 2}') RETURNING id")
psql -Atc "SELECT count(*) FROM trafficdb.subscription_events($sid, 10, 15000)" >"$dir/sql.out" 2>&1 &
sqlpid=$!
as tdbsec-victim "$dir/tdbsub" "$prefix" --ids 1,2 --timeout-ms 20000 >"$dir/sub.out" 2>"$dir/sub.err" &
subpid=$!
wait_for "$dir/sub.out" ready 5 || echo "# tdbsub did not start: $(cat "$dir/sub.err")"
sleep 1
as tdbsec-member truncate -s 0 "$shm.subs"
check "the SQL session ends within 5 s" exited "$sqlpid" 5
wait "$sqlpid" || true
echo "# $(head -c 300 "$dir/sql.out")"
check "with an error saying the segment was truncated" grep -q "stopped: .*truncated" "$dir/sql.out"
check "the other member's tdbsub ends within 5 s" exited "$subpid" 5
rc=0; wait "$subpid" || rc=$?
echo "# tdbsub exit $rc: $(head -c 300 "$dir/sub.err")"
check "with an error (exit 1), not killed by SIGBUS" [ "$rc" = 1 ]

echo "# a member truncates .writers under another member's writer"
as tdbsec-victim env -C "$dir" TRAFFICDB_LIB="$dir/libtrafficdb.so" PYTHONPATH="$dir/python" python3 -c '
import os, sys, time, trafficdb
w = trafficdb.Writer(sys.argv[1])
w.put(3, speed_kmh=33, sync=True)
print("ready", flush=True)
for _ in range(100):
    if os.path.exists(sys.argv[2]): break
    time.sleep(0.1)
try:
    w.put(3, speed_kmh=34)
    print("put ok")
except trafficdb.TrafficDBError as e:
    print("error:", e)' "$prefix" "$dir/go" >"$dir/put.out" 2>&1 &
putpid=$!
wait_for "$dir/put.out" ready 10 || echo "# writer: $(cat "$dir/put.out")"
as tdbsec-member truncate -s 0 "$shm.writers"
touch "$dir/go"
rc=0; exited "$putpid" 10 && wait "$putpid" || rc=$?
echo "# writer exit $rc: $(head -c 300 "$dir/put.out")"
check "the writer's next put is an error that says truncated, not a SIGBUS" \
	bash -c '[ "$1" = 0 ] && grep -q "error: .*truncated" "$2"' _ "$rc" "$dir/put.out"

echo "# a member truncates .readers under another member's tdbread"
as tdbsec-victim "$dir/tdbread" "$prefix" watch 4 >"$dir/read.out" 2>&1 &
readpid=$!
sleep 1
as tdbsec-member truncate -s 0 "$shm.readers"
rc=0; exited "$readpid" 10 && wait "$readpid" || rc=$?
echo "# tdbread exit $rc: $(tail -c 300 "$dir/read.out")"
check "tdbread is not killed by SIGBUS (it reopens)" [ "$rc" -lt 128 ]

echo "# a member zeroes the .readers header (every external reader refused)"
for _ in $(seq 30); do [ "$(stat -c %s "$shm.readers")" -gt 0 ] && break; sleep 0.1; done
as tdbsec-member python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR); os.pwrite(fd, bytes(64), 0)' "$shm.readers"
ok=no
for _ in $(seq 50); do as tdbsec-victim "$dir/tdbread" "$prefix" >/dev/null 2>&1 && { ok=yes; break; }; sleep 0.1; done
check "external readers are served again within 5 s" [ "$ok" = yes ]

echo "# after all that"
check "the server never restarted" [ "$(psql -Atc "SELECT pg_postmaster_start_time()")" = "$started" ]
check "the daemon is the same process" [ "$(psql -Atc "SELECT daemon_pid FROM trafficdb.status")" = "$daemon" ]
psql -c "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (1, 11)" -c "SELECT trafficdb.publish()" >/dev/null
le=$(psql -Atc "SELECT last_error FROM trafficdb.status"); echo "# last_error: $le"
check "status.last_error names a damaged segment" grep -qE '\.(subs|writers|readers) was damaged' <<<"$le"
check "the log names each damaged segment" \
	bash -c 'grep -q "subs was damaged" "$1" && grep -q "writers was damaged" "$1" && grep -q "readers was damaged" "$1"' _ "$dir/data/log"
as tdbsec-victim "$dir/tdbsub" "$prefix" --ids 1,2 --count 1 --timeout-ms 10000 >"$dir/sub2.out" 2>&1 &
subpid=$!
wait_for "$dir/sub2.out" ready 5 || true
psql -c "SELECT trafficdb.publish()" -c "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (2, 12)" -c "SELECT trafficdb.publish()" >/dev/null
exited "$subpid" 10 || true
wait "$subpid" || true
check "a new subscriber receives events" grep -qE '^change [0-9]+ 2 ' "$dir/sub2.out"
out=$(as tdbsec-victim env -C "$dir" TRAFFICDB_LIB="$dir/libtrafficdb.so" PYTHONPATH="$dir/python" python3 -c '
import sys, trafficdb
with trafficdb.Writer(sys.argv[1]) as w:
    w.put(4, speed_kmh=44, sync=True)
print("ok")' "$prefix" 2>&1 || true)
check "a new writer puts" [ "$out" = ok ]

tap_done
