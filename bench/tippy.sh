#!/usr/bin/env bash
# bench/tippy.sh: TippyDB's geo-placement experiment (issue 17), replayed
# with three trafficdb clusters and Toxiproxy latencies, on this machine.
#
# Three PostgreSQL 15 clusters with trafficdb, regions A, B and C (127.0.0.1,
# ports from 5900), each owning a share of one synthetic map: a grid of
# TIPPY_SEGMENTS (30,000) short segments over a box the size of Helsinki
# (0.40 x 0.18 degrees, about 22 x 20 km), split two ways:
#   geo    the region is the third of the map (by x) the segment starts in;
#   hash   the region is hash(location_id) % 3 (hashint8), ignoring geography.
# Each cluster loads only its share (trafficdb.load_map() of a view), once per
# placement, in the same run.  The clients are in region A: they reach A
# through a Toxiproxy proxy adding BENCH_NEAR_MS (1) of round trip time, B
# and C through proxies adding BENCH_FAR_MS (100) (scripts/toxiproxy.sh: half
# of it on each direction).  bench/tippy_client (libpq, TIPPY_THREADS = 4
# threads, one persistent connection per region each, opened before timing)
# sends TIPPY_OPS (2,000) writes, INSERT INTO trafficdb.feed (location_id,
# speed_kmh) autocommit, then TIPPY_OPS reads, a key lookup in
# trafficdb.locations, each to the node owning the location under the
# placement.  Each operation picks its location TIPPY_NEAR_PCT (80) % of the
# time in region A's part of the map, else in B's or C's, from an RNG seeded
# with TIPPY_SEED: the same picks for both placements.
#
# Figures (bench/lib.sh's CSV, section tippydb): mean and p99 latency per
# write and per read under each placement, geo against hash (the ratio), and
# TippyDB's own figures (127 ms per insert vs MongoDB's 268 ms, from their
# paper: cited, not measured here).  Every loop is bounded in count and time
# (TIPPY_MAX_SECONDS per phase); everything started is stopped and removed at
# the end (TIPPY_KEEP=1 keeps the directory).
#
# TIPPY_REPLICAS=1 adds TippyDB's replicas: each region's cluster gets a
# synchronous standby (trafficdb runs there as a follower) in the next region
# (A's in B, B's in C, C's in A), streaming through a Toxiproxy link of
# BENCH_FAR_MS round trip, with synchronous_standby_names set: a commit waits
# for the far standby's flush.  Its figures are named with "_replicated".
#
# The server binaries are BENCH_PG_BIN (default PG_BIN of scripts/lib.sh,
# where `make install` put trafficdb).  TIPPY_PORT: the first of 7 ports
# (3 clusters, 3 proxies, Toxiproxy's API; 13 with TIPPY_REPLICAS=1: 3
# standbys and 3 replication proxies more); default the first free block
# from 5900.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

BIN=${BENCH_PG_BIN:-$PG_BIN}
NEAR_MS=${BENCH_NEAR_MS:-1}
FAR_MS=${BENCH_FAR_MS:-100}
OPS=${TIPPY_OPS:-2000}
THREADS=${TIPPY_THREADS:-4}
SEED=${TIPPY_SEED:-17}
NEAR_PCT=${TIPPY_NEAR_PCT:-80}
MAX_S=${TIPPY_MAX_SECONDS:-300}
N=${TIPPY_SEGMENTS:-30000}
REPLICAS=${TIPPY_REPLICAS:-0}
COLS=200
REGIONS=(A B C)
emit() { bench_emit tippydb "$@"; }

for v in NEAR_MS FAR_MS OPS THREADS SEED NEAR_PCT MAX_S N REPLICAS; do
	[[ "${!v}" =~ ^[0-9]+$ ]] || die "bench/tippy: $v=${!v}: expected a whole number"
done
[ "$REPLICAS" -le 1 ] || die "bench/tippy: TIPPY_REPLICAS=$REPLICAS: 0 or 1"
NPORTS=$((7 + 6 * REPLICAS))
VARIANT=
[ "$REPLICAS" = 1 ] && VARIANT=_replicated
[ "$N" -ge 300 ] || die "bench/tippy: TIPPY_SEGMENTS=$N: at least 300"
[ -x "$BIN/initdb" ] || die "bench/tippy: no initdb in $BIN (set BENCH_PG_BIN)"
[ -f "$("$BIN/pg_config" --pkglibdir)/trafficdb.so" ] ||
	die "bench/tippy: trafficdb is not installed in $("$BIN/pg_config" --pkglibdir) (make install, or BENCH_PG_BIN)"

# NPORTS consecutive free ports on 127.0.0.1 from TIPPY_PORT, or the first such block from 5900
if [ -n "${TIPPY_PORT:-}" ]; then
	P0=$TIPPY_PORT
else
	P0=$(python3 - "$NPORTS" <<'EOF'
import socket, sys
def free(p):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: a port in TIME_WAIT is free
    try:
        s.bind(("127.0.0.1", p))
        return True
    except OSError:
        return False
    finally:
        s.close()
n = int(sys.argv[1])
for p in range(5900, 6000 - n):
    if all(free(q) for q in range(p, p + n)):
        print(p)
        sys.exit(0)
sys.exit("bench/tippy: no %d free ports in 5900-5999" % n)
EOF
)
fi
[ "$P0" -ge 5900 ] && [ $((P0 + NPORTS - 1)) -le 5999 ] || die "bench/tippy: TIPPY_PORT=$P0: ports 5900-5999 only"

make -s bench/tippy_client PG_CONFIG="$PG_CONFIG" >/dev/null
scripts/toxiproxy.sh install

DIR=$(mktemp -d "${TMPDIR:-/tmp}/tdb-tippy.XXXXXX")
chmod 755 "$DIR"
make_pg_dir "$DIR/sock"	# the servers' Unix sockets, outside their data directories
cleanup() {
	local d r
	# primaries first, while their standbys still acknowledge: the trafficdb daemon
	# waiting for a synchronous standby does not end on a fast shutdown, so also
	# stop waiting for one, and stop immediately what a fast stop did not end in 30 s
	for r in 0 1 2; do
		if [ "$REPLICAS" = 1 ] && [ -f "$DIR/r$r/postmaster.pid" ]; then
			psql_r "$r" -c "ALTER SYSTEM RESET synchronous_standby_names" -c "SELECT pg_reload_conf()" >/dev/null 2>&1 || true
		fi
	done
	for d in "$DIR"/r[0-2] "$DIR"/s[0-2]; do
		if [ -f "$d/postmaster.pid" ]; then
			as_pg "$BIN/pg_ctl" -D "$d" stop -m fast -w -t 30 >/dev/null 2>&1 ||
				as_pg "$BIN/pg_ctl" -D "$d" stop -m immediate -w >/dev/null 2>&1 || true
		fi
	done
	scripts/toxiproxy.sh stop "$DIR/toxiproxy" || true
	if [ "${TIPPY_KEEP:-0}" = 1 ]; then echo "bench/tippy: kept $DIR" >&2; else rm -rf "$DIR"; fi
}
trap cleanup EXIT

psql_r() {	# psql_r REGION ARGS...: psql on region REGION's cluster, directly
	local r=$1
	shift
	"$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p $((P0 + r)) -U postgres -d tippy "$@"
}

echo "bench/tippy: three clusters on 127.0.0.1:$P0-$((P0 + 2)) ($BIN), a map of $N segments" >&2
for r in 0 1 2; do
	port=$((P0 + r))
	make_pg_dir "$DIR/r$r"
	as_pg "$BIN/initdb" -D "$DIR/r$r" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
	cat >>"$DIR/r$r/postgresql.conf" <<EOF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$DIR/sock'
max_connections = 50
shared_preload_libraries = 'trafficdb'
trafficdb.database = 'tippy'
trafficdb.shm_name = '/tdbtp${REGIONS[$r]}$port'
EOF
	as_pg "$BIN/pg_ctl" -D "$DIR/r$r" -l "$DIR/sock/r$r.log" -w start >/dev/null
	"$BIN/psql" -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c "CREATE DATABASE tippy"
	# the same map everywhere (no random(): one deterministic grid), and both shares as views
	psql_r "$r" <<EOF
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE TABLE tippy_roads AS
SELECT i AS id,
       ST_SetSRID(ST_MakeLine(ST_MakePoint(x, y), ST_MakePoint(x + 0.0006 * cos(a), y + 0.0003 * sin(a))), 4326) AS geom,
       least(2, floor((x - 24.80) / (0.40 / 3)))::int AS area,
       ((hashint8(i::bigint)::bigint % 3 + 3) % 3)::int AS hash
  FROM (SELECT i, 24.80 + (c + 0.5) * 0.40 / $COLS AS x, 60.12 + (r + 0.5) * 0.18 / ceil($N / $COLS::numeric) AS y,
               radians((i * 37) % 360) AS a
          FROM (SELECT i, (i - 1) % $COLS AS c, (i - 1) / $COLS AS r FROM generate_series(1, $N) i) g) s;
ALTER TABLE tippy_roads ADD PRIMARY KEY (id);
CREATE VIEW tippy_geo AS SELECT id, geom FROM tippy_roads WHERE area = $r;
CREATE VIEW tippy_hash AS SELECT id, geom FROM tippy_roads WHERE hash = $r;
EOF
done
sums=$(for r in 0 1 2; do psql_r "$r" -Atc "SELECT md5(string_agg(id || ',' || area || ',' || hash || ',' || ST_AsText(geom), ';' ORDER BY id)) FROM tippy_roads"; done | sort -u | wc -l)
[ "$sums" = 1 ] || die "bench/tippy: the three clusters built different maps"
psql_r 0 -Atc "COPY (SELECT id, area, hash FROM tippy_roads ORDER BY id) TO STDOUT WITH (FORMAT csv)" >"$DIR/placement.csv"
read -r area_a area_b area_c hash_a hash_b hash_c < <(psql_r 0 -Atc "SELECT count(*) FILTER (WHERE area = 0), count(*) FILTER (WHERE area = 1), count(*) FILTER (WHERE area = 2),
       count(*) FILTER (WHERE hash = 0), count(*) FILTER (WHERE hash = 1), count(*) FILTER (WHERE hash = 2) FROM tippy_roads" -F ' ')
echo "bench/tippy: shares A/B/C: geo $area_a/$area_b/$area_c, hash $hash_a/$hash_b/$hash_c" >&2

# the clients are in region A: A is near, B and C far
scripts/toxiproxy.sh start "$DIR/toxiproxy" $((P0 + 6))
for r in 0 1 2; do
	rtt=$FAR_MS
	[ "$r" = 0 ] && rtt=$NEAR_MS
	scripts/toxiproxy.sh proxy "$DIR/toxiproxy" "region_${REGIONS[$r]}" $((P0 + 3 + r)) $((P0 + r)) "$rtt"
done

# TIPPY_REPLICAS=1: region r's standby s$r runs in region r+1 (port P0+7+r) and
# streams from r through a far link (port P0+10+r); r's commits wait for it
if [ "$REPLICAS" = 1 ]; then
	for r in 0 1 2; do
		nx=$(((r + 1) % 3))
		scripts/toxiproxy.sh proxy "$DIR/toxiproxy" "replication_${REGIONS[$r]}_to_${REGIONS[$nx]}" \
			$((P0 + 10 + r)) $((P0 + r)) "$FAR_MS"
		make_pg_dir "$DIR/s$r"
		as_pg "$BIN/pg_basebackup" -h 127.0.0.1 -p $((P0 + r)) -U postgres -D "$DIR/s$r" -X stream -c fast
		cat >>"$DIR/s$r/postgresql.conf" <<EOF
port = $((P0 + 7 + r))
unix_socket_directories = '$DIR/sock'
trafficdb.shm_name = '/tdbtpS${REGIONS[$r]}$((P0 + 7 + r))'
primary_conninfo = 'host=127.0.0.1 port=$((P0 + 10 + r)) user=postgres application_name=tippy_standby'
EOF
		as_pg touch "$DIR/s$r/standby.signal"
		chmod 700 "$DIR/s$r"
		as_pg "$BIN/pg_ctl" -D "$DIR/s$r" -l "$DIR/sock/s$r.log" -w start >/dev/null
		psql_r "$r" -c "ALTER SYSTEM SET synchronous_standby_names = 'tippy_standby'" -c "SELECT pg_reload_conf()" >/dev/null
		sync_q="SELECT count(*) FROM pg_stat_replication WHERE application_name = 'tippy_standby' AND sync_state = 'sync' AND state = 'streaming'"
		for _ in $(seq 1 120); do	# bounded: 60 s
			[ "$(psql_r "$r" -Atc "$sync_q")" = 1 ] && break
			sleep 0.5
		done
		[ "$(psql_r "$r" -Atc "$sync_q")" = 1 ] ||
			die "bench/tippy: region ${REGIONS[$r]}'s standby is not streaming synchronously after 60 s"
	done
	echo "bench/tippy: each region's commits wait for a synchronous standby in the next region (RTT +$FAR_MS ms)" >&2
fi
conn() { echo "host=127.0.0.1 port=$((P0 + 3 + $1)) dbname=tippy user=postgres connect_timeout=30 application_name=tippy options='-c statement_timeout=60s'"; }

declare -A F	# F[placement.measure] = value
for placement in geo hash; do
	total=0
	for r in 0 1 2; do
		n=$(psql_r "$r" -Atc "SELECT trafficdb.load_map('tippy_$placement', 'id', 'geom')")
		total=$((total + n))
	done
	[ "$total" = "$N" ] || die "bench/tippy: the $placement shares hold $total locations, not $N"
	echo "bench/tippy: $placement placement: $OPS writes, then $OPS reads, $THREADS threads ($NEAR_PCT % near; RTT +$NEAR_MS ms near, +$FAR_MS ms far)" >&2
	rc=0
	bench/tippy_client "$DIR/placement.csv" "$placement" "$OPS" "$OPS" "$THREADS" "$SEED" "$NEAR_PCT" "$MAX_S" \
		"$(conn 0)" "$(conn 1)" "$(conn 2)" >"$DIR/$placement.out" || rc=$?
	[ "$rc" = 0 ] || die "bench/tippy: the client failed under the $placement placement (exit $rc)"
	while IFS=, read -r m v _; do F[$placement.$m]=$v; done <"$DIR/$placement.out"
	for k in write read; do
		[ "${F[$placement.${k}_done]}" = "$OPS" ] ||
			die "bench/tippy: only ${F[$placement.${k}_done]} of $OPS ${k}s within TIPPY_MAX_SECONDS=$MAX_S under $placement"
	done
done

for k in write read; do
	for m in mean p99 p50 max local_mean remote_mean; do
		h=${F[hash.${k}_${m}_ms]:-}
		g=${F[geo.${k}_${m}_ms]:-}
		if [ -n "$h" ]; then emit "${k}_${m}_ms_hash$VARIANT" "$THREADS" "$h" ms; fi
		if [ -n "$g" ]; then emit "${k}_${m}_ms_geo$VARIANT" "$THREADS" "$g" ms "${h:+${k}_${m}_ms_hash$VARIANT}" "$h"; fi
	done
	for p in geo hash; do
		emit "${k}_remote_pct_$p$VARIANT" "$THREADS" "${F[$p.${k}_remote_pct]}" %
		emit "${k}_per_s_$p$VARIANT" "$THREADS" "${F[$p.${k}_per_s]}" ops/s
	done
done
emit tippydb_paper_insert_mean_ms 0 127 ms mongodb_paper_insert_mean_ms 268

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
{
	echo
	echo "TippyDB's geo-placement experiment, replayed: clients in region A, $NEAR_PCT % of operations in A's part"
	echo "of the map; round trip +$NEAR_MS ms to A, +$FAR_MS ms to B and C (Toxiproxy); $THREADS threads, $OPS writes + $OPS reads"
	if [ "$REPLICAS" = 1 ]; then echo "each region's commits wait for a synchronous standby in the next region (+$FAR_MS ms)"; fi
	printf '  %-26s %12s %12s %9s\n' "" "geo" "hash" "geo/hash"
	for k in write read; do
		for m in mean p99; do
			printf '  %-26s %9s ms %9s ms %8sx\n' "$k $m" "${F[geo.${k}_${m}_ms]}" "${F[hash.${k}_${m}_ms]}" \
				"$(ratio "${F[geo.${k}_${m}_ms]}" "${F[hash.${k}_${m}_ms]}")"
		done
		printf '  %-26s %10s %% %10s %%\n' "$k to far regions" "${F[geo.${k}_remote_pct]}" "${F[hash.${k}_remote_pct]}"
	done
	printf '  %-26s %9s ms %9s ms %8sx   (%s)\n' "TippyDB paper, per insert" 127 268 "$(ratio 127 268)" \
		"TippyDB vs MongoDB, their figures, not this run"
} >&2
