#!/usr/bin/env bash
# bench/streams.sh [RECORDS]: stream files against the stores a device
# logger would use instead, on RealDB's workload (bench/streamgen.c: a
# vehicle's 8 sensor streams, RECORDS records in time order, default
# 9,200,000), loaded in batches of 100,000:
#   trafficdb   a stream file (bench/streamgen tsf), flushed per batch
#   PostgreSQL  a heap table with a primary key (stream, ts), \copy per batch
#   SQLite      a table with the same primary key, WAL, synchronous=FULL,
#               one transaction per batch (python3's sqlite3)
# each without and with size management (keeping about the newest quarter:
# a smaller stream file that reuses its oldest blocks; DELETE of old rows
# after each batch for the others).  Measured: load time, CPU time (all
# processes, from /proc/stat), bytes written to the disks (/proc/diskstats,
# after a sync), final size.  Figures go to bench/lib.sh's CSV.
#
# Then what a query costs (issue 15): files of 64 streams of eight float64
# fields (bench/streamgen fill64: filled until they wrapped) of each size in
# STREAM_QUERY_MB (default 64, 512 and 4096 MB), beside a heap table with a
# primary key (stream, ts) holding the same rows, in the same run, with
# pgbench -M prepared, 1 client, STREAM_QUERY_SECONDS (10) each:
#   window5   SELECT * of a random 5-row window of one stream
#   insert50  INSERT of 50 rows into one stream (one transaction)
# and the sectors EXPLAIN ANALYZE reports for a window (the handle kept).
# STREAM_PARTS (default "load query") picks the parts.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

N=${1:-${STREAM_RECORDS:-9200000}}
PARTS=${STREAM_PARTS:-load query}
bench_cluster
make -s bench/streamgen
work=$(mktemp -d /var/tmp/trafficdb-streams.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"

cpu_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
disk_bytes() { sync; awk '$3 ~ /^(sd|vd|xvd|nvme[0-9]+n[0-9]+|hd)[a-z]*$/ { s += $10 } END { printf "%.0f\n", s * 512 }' /proc/diskstats; }
hz=$(getconf CLK_TCK)

# measure NAME COMMAND...: runs it; sets load_s, cpu_s, written
measure() {
	local t0 c0 d0
	d0=$(disk_bytes); c0=$(cpu_ticks); t0=$(date +%s%N)
	"$@"
	load_s=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
	written=$(($(disk_bytes) - d0))
	cpu_s=$(awk -v a="$c0" -v b="$(cpu_ticks)" -v hz="$hz" 'BEGIN { printf "%.2f", (b - a) / hz }')
}

if [[ " $PARTS " == *" load "* ]]; then
echo "bench/streams: generating $N records and splitting them into batches" >&2
bench/streamgen csv "$N" | split -l 100000 -d -a 4 - "$work/batch."
keep=$((N / 4))

emit_all() { # system variant base_system
	local sys=$1 var=$2 size=$3 base=${4:-}
	if [ -z "$base" ]; then
		bench_emit streams "${var}_load_s" "$N" "$load_s" s
		bench_emit streams "${var}_cpu_s" "$N" "$cpu_s" s
		bench_emit streams "${var}_bytes_written" "$N" "$written" B
		bench_emit streams "${var}_final_bytes" "$N" "$size" B
	else
		bench_emit streams "${var}_load_s" "$N" "${res[$var.trafficdb.load]}" s "$sys" "$load_s"
		bench_emit streams "${var}_cpu_s" "$N" "${res[$var.trafficdb.cpu]}" s "$sys" "$cpu_s"
		bench_emit streams "${var}_bytes_written" "$N" "${res[$var.trafficdb.written]}" B "$sys" "$written"
		bench_emit streams "${var}_final_bytes" "$N" "${res[$var.trafficdb.size]}" B "$sys" "$size"
	fi
}
declare -A res

for var in all managed; do
	# trafficdb: a file that holds everything (18-byte records, 27 to a 512-byte chunk), or a quarter
	if [ $var = all ]; then fsize=$(((N / 26 + 1) * 512 + 16 * 1048576)); else fsize=$(((keep / 26 + 1) * 512 + 4 * 1048576)); fi
	echo "bench/streams: trafficdb ($var)" >&2
	rm -f "$work/v.tsf"
	measure bench/streamgen tsf "$work/v.tsf" "$N" "$fsize" >"$work/tsf.out"
	res[$var.trafficdb.load]=$load_s res[$var.trafficdb.cpu]=$cpu_s res[$var.trafficdb.written]=$written
	res[$var.trafficdb.size]=$(stat -c %s "$work/v.tsf")
	bench_emit streams "${var}_records_kept" "$N" "$(sed -n 's/^records_kept,\([0-9]*\),.*/\1/p' "$work/tsf.out")" records

	echo "bench/streams: PostgreSQL ($var)" >&2
	"${PSQL[@]}" -c "DROP TABLE IF EXISTS bench_vlog" \
		-c "CREATE TABLE bench_vlog (stream int2, ts int8, value float8, PRIMARY KEY (stream, ts))" -c "CHECKPOINT"
	{
		for f in "$work"/batch.*; do
			echo "\\copy bench_vlog FROM '$f' (FORMAT csv)"
			[ $var = managed ] && echo "DELETE FROM bench_vlog WHERE ts < (SELECT max(ts) FROM bench_vlog) - $((keep * 100000 / 38));"
		done
		echo "CHECKPOINT;"
	} >"$work/load.sql"
	measure "${PSQL[@]}" -f "$work/load.sql" >/dev/null
	pgsize=$("${PSQL[@]}" -Atc "SELECT pg_total_relation_size('bench_vlog')")
	emit_all postgres_heap_pk $var "$pgsize" x
	"${PSQL[@]}" -c "DROP TABLE bench_vlog"

	echo "bench/streams: SQLite ($var)" >&2
	rm -f "$work/v.db"*
	measure python3 - "$work" "$var" "$keep" <<'PY'
import glob, sqlite3, sys
work, var, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])
db = sqlite3.connect(work + "/v.db", isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA synchronous=FULL")
db.execute("CREATE TABLE vlog (stream INTEGER, ts INTEGER, value REAL, PRIMARY KEY (stream, ts))")
for f in sorted(glob.glob(work + "/batch.*")):
    rows = [tuple(line.rstrip("\n").split(",")) for line in open(f)]
    db.execute("BEGIN")
    db.executemany("INSERT INTO vlog VALUES (?, ?, ?)", ((int(s), int(t), float(v)) for s, t, v in rows))
    if var == "managed":
        db.execute("DELETE FROM vlog WHERE ts < (SELECT max(ts) FROM vlog) - ?", (keep * 100000 // 38,))
    db.execute("COMMIT")
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
db.close()
PY
	emit_all sqlite $var "$(du -cb "$work"/v.db* | tail -1 | cut -f1)" x
done
fi

# pgbench_ms SCRIPT: the average latency (ms) of SCRIPT, prepared, 1 client
pgbench_ms() {
	"$PG_BIN/pgbench" -n -M prepared -c 1 -T "${STREAM_QUERY_SECONDS:-10}" -f "$1" -h 127.0.0.1 -p "$port" \
		-U postgres "$DB" 2>&1 | sed -n 's/^latency average = \([0-9.]*\) ms$/\1/p'
}

if [[ " $PARTS " == *" query "* ]]; then
for mb in ${STREAM_QUERY_MB:-64 512 4096}; do
	f="$work/q$mb.tsf"
	echo "bench/streams: a $mb MB file of 64 streams, and the same rows in a heap" >&2
	read -r first last < <(bench/streamgen fill64 "$f" "$mb")
	[ "$(id -u)" = 0 ] && chown "$PG_OS_USER": "$f"
	"${PSQL[@]}" -c "DROP SERVER IF EXISTS bq$mb CASCADE" -c "DROP SCHEMA IF EXISTS bq$mb CASCADE" \
		-c "DROP TABLE IF EXISTS bench_q$mb" \
		-c "CREATE SERVER bq$mb FOREIGN DATA WRAPPER trafficdb_streams OPTIONS (filename '$f')" \
		-c "CREATE SCHEMA bq$mb" -c "IMPORT FOREIGN SCHEMA streams LIMIT TO (s17) FROM SERVER bq$mb INTO bq$mb" \
		-c "CREATE TABLE bench_q$mb (stream int2, ts timestamptz, a float8, b float8, c float8, d float8,
			e float8, f float8, g float8, h float8, PRIMARY KEY (stream, ts))" \
		-c "INSERT INTO bench_q$mb SELECT s, to_timestamp(1704067200 + i), i, i + 1, i + 2, i + 3, i + 4, i + 5, i + 6, i + 7
			FROM generate_series($first, $last) i, generate_series(0, 63) s ORDER BY 1, 2" \
		-c "VACUUM ANALYZE bench_q$mb" -c "CHECKPOINT"
	rows=$(( (last - first + 1) * 64 ))
	cat >"$work/w_tsf.sql" <<-EOF
		\set i random($first, $last - 5)
		SELECT * FROM bq$mb.s17 WHERE ts BETWEEN to_timestamp(1704067200 + :i) AND to_timestamp(1704067204 + :i);
	EOF
	cat >"$work/w_heap.sql" <<-EOF
		\set i random($first, $last - 5)
		SELECT * FROM bench_q$mb WHERE stream = 17 AND ts BETWEEN to_timestamp(1704067200 + :i) AND to_timestamp(1704067204 + :i);
	EOF
	cat >"$work/i_tsf.sql" <<-EOF
		INSERT INTO bq$mb.s17 SELECT t + i * interval '1 microsecond', i, i, i, i, i, i, i, i
		  FROM (SELECT clock_timestamp() AS t) c, generate_series(1, 50) i;
	EOF
	cat >"$work/i_heap.sql" <<-EOF
		INSERT INTO bench_q$mb SELECT 17, t + i * interval '1 microsecond', i, i, i, i, i, i, i, i
		  FROM (SELECT clock_timestamp() AS t) c, generate_series(1, 50) i;
	EOF
	w_tsf=$(pgbench_ms "$work/w_tsf.sql")
	w_heap=$(pgbench_ms "$work/w_heap.sql")
	i_tsf=$(pgbench_ms "$work/i_tsf.sql")
	i_heap=$(pgbench_ms "$work/i_heap.sql")
	sectors=$("${PSQL[@]}" -At -c "SELECT count(*) FROM bq$mb.s17 WHERE ts BETWEEN to_timestamp(1704067200 + $first + 100) AND to_timestamp(1704067204 + $first + 100)" \
		-c "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM bq$mb.s17
			WHERE ts BETWEEN to_timestamp(1704067200 + $first + 200) AND to_timestamp(1704067204 + $first + 200)" |
		sed -n 's/.*Sectors Read: \([0-9]*\).*/\1/p')
	bench_emit streams window5_ms "$mb" "$w_tsf" ms postgres_heap_pk "$w_heap"
	bench_emit streams insert50_ms "$mb" "$i_tsf" ms postgres_heap_pk "$i_heap"
	bench_emit streams window5_sectors_read "$mb" "$sectors" sectors
	bench_emit streams heap_rows "$mb" "$rows" rows
	"${PSQL[@]}" -c "DROP SERVER bq$mb CASCADE" -c "DROP SCHEMA bq$mb CASCADE" -c "DROP TABLE bench_q$mb"
	rm -f "$f"
done
fi
