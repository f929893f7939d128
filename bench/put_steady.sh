#!/usr/bin/env bash
# bench/put_steady.sh [LOCATIONS]: TRAFFICDB_SYNC at steady state, the
# generation log trimmed at every checkpoint, as on a cluster written for
# longer than trafficdb.log_retention.  Each round makes a throwaway cluster
# (log_retention STEADY_RETENTION, 20s), a map of LOCATIONS (1 M) two-point
# lines, warms up with STEADY_WARM batches (15,000: about 30 s of SYNC
# puts, past the retention) and then measures bench/put_server: 4 producers,
# 1,000 batches of 1,000, twice.  Reports the log's size and rows beside.
#
# STEADY_TREES="A B": alternate two source trees (each `make install`ed
# before its round: an A/B of builds on the same machine in one run);
# default: the installed build, once.  STEADY_ROUNDS (2) rounds each.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

N=${1:-1000000}
RETENTION=${STEADY_RETENTION:-20s}
WARM=${STEADY_WARM:-15000}
ROUNDS=${STEADY_ROUNDS:-2}
make -s bench/put_server >/dev/null
work=$(mktemp -d /tmp/trafficdb-put-steady.XXXXXX)
chmod 755 "$work"
trap 'as_pg "$PG_BIN/pg_ctl" -D "$work/pg/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

round() {
	local name=$1 tree=$2 shm r
	[ "$tree" = installed ] || (cd "$tree" && make -s install >/dev/null)
	as_pg "$PG_BIN/pg_ctl" -D "$work/pg/data" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$work/pg"
	start_test_cluster "$work" bench "trafficdb.log_retention = '$RETENTION'" >/dev/null
	"${PSQL[@]}" -d bench >/dev/null <<-SQL
		SET client_min_messages = warning;
		CREATE EXTENSION postgis;
		CREATE EXTENSION trafficdb;
		CREATE UNLOGGED TABLE bench_put_roads AS
		SELECT i AS id, ST_SetSRID(ST_MakeLine(ST_MakePoint(10 + (i % 1000) * 0.01, 45 + (i / 1000) * 0.01),
		                                       ST_MakePoint(10 + (i % 1000) * 0.01 + 0.004, 45 + (i / 1000) * 0.01 + 0.002)), 4326) AS geom
		  FROM generate_series(1, $N) i;
		SELECT trafficdb.load_map('bench_put_roads', 'id', 'geom');
	SQL
	shm=/trafficdb.$PGPORT
	echo "bench/put_steady: $name: warming up ($WARM batches of 1,000 x 4)" >&2
	bench/put_server "$shm" "$N" 0 4 "$WARM" 1000 >/dev/null
	for r in 1 2; do
		bench/put_server "$shm" "$N" 0 4 1000 1000 | while IFS=, read -r m v u; do
			case "$m" in put_sync_per_s | put_sync_ack_p50 | put_sync_ack_p99) bench_emit put_steady "$m" "$name" "$v" "$u" ;; esac
		done
	done
	"${PSQL[@]}" -d bench -Atc "SELECT count(*), max(generation) - min(generation) + 1,
	    (SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
	      WHERE c.relnamespace::regnamespace::text IN ('trafficdb', 'trafficdb_log')
	         AND c.relname ~ '^generations(_[0-7])?\$')
	   FROM trafficdb.generations" | {
		IFS='|' read -r rows gens bytes
		bench_emit put_steady log_rows "$name" "$rows" rows
		bench_emit put_steady log_generations "$name" "$gens" generations
		bench_emit put_steady log_bytes "$name" "$bytes" bytes
	}
}

for i in $(seq "$ROUNDS"); do
	if [ -n "${STEADY_TREES:-}" ]; then
		for t in $STEADY_TREES; do round "$(basename "$t")" "$t"; done
	else
		round installed installed
	fi
done
