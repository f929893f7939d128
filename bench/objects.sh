#!/usr/bin/env bash
# bench/objects.sh [SIZES]: the core at scale, objects alone (bench/objbench,
# no PostgreSQL), each figure beside its baseline in the same process:
#   - publication of 1 / 1,000 / 100,000 changed entries in a reused buffer
#     (what the daemon does) vs writing the whole traffic object;
#   - random-id updates applied in batches (pipelined lookups) vs one at a
#     time, and vs the TrafficDB paper's 8.97 M/s at 40 M (cited);
#   - GETs batched vs one at a time;
#   - bytes per location (map + traffic) and the map build time (R-tree,
#     hash, layout), vs the issue's budget (110 B, 90 s at 100 M), and the
#     time to generate and add the synthetic network before it;
# with transparent huge pages asked for (as the daemon does) and, at the
# largest size, without (OBJBENCH_HUGE=0; OBJECTS_4K=0 skips that run).  SIZES defaults to
# "1000000 10000000 40000000"; `make bench-planet` adds 100000000.
# Figures go to bench/lib.sh's CSV (section objects); progress on stderr.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

SIZES=${1:-1000000 10000000 40000000}
make -s bench/objbench
emit() { bench_emit objects "$@"; }

run() {	# run N HUGE: objbench's name,value,unit lines into $tmp/N-HUGE
	say "bench/objects: $1 segments, huge pages $([ "$2" = 1 ] && echo asked || echo off)"
	OBJBENCH_HUGE=$2 /usr/bin/time -f '%e s, %M kB max RSS' bench/objbench "$1" \
		>"$tmp/$1-$2" 2>"$tmp/$1-$2.err" || { cat "$tmp/$1-$2.err" >&2; die "bench/objbench $1 failed"; }
	tail -1 "$tmp/$1-$2.err" >&2
}
val() { awk -F, -v m="$2" '$1 == m { print $2 }' "$tmp/$1"; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
last=""
for n in $SIZES; do
	run "$n" 1
	f="$n-1"
	# best against best: a shared machine preempts single runs
	whole_ms=$(awk -v s="$(val "$f" traffic_write_best_s)" 'BEGIN { print s * 1000 }')
	for k in 1 1000 100000; do
		emit "publish_${k}_changed_ms" "$n" "$(val "$f" "publish_${k}_changed_best_ms")" ms whole_write_ms "$whole_ms"
	done
	emit update_random_batched_per_s "$n" "$(val "$f" update_1pct_batched_apply_rows_per_s)" updates/s \
		update_random_one_at_a_time_per_s "$(val "$f" update_1pct_apply_rows_per_s)"
	emit update_random_batched_per_s_vs_paper "$n" "$(val "$f" update_1pct_batched_apply_rows_per_s)" updates/s \
		trafficdb_paper_40M_per_s 8970000
	emit get_batched_per_s "$n" "$(val "$f" get_batched_per_s)" ops/s get_one_at_a_time_per_s "$(val "$f" get_per_s)"
	emit bytes_per_location "$n" "$(val "$f" total_bytes_per_location)" B budget_at_100M 110
	emit map_bytes_per_location "$n" "$(val "$f" map_bytes_per_location)" B
	# the map object's build (R-tree order, boxes, hash, layout, CRC: the issue's "map build")
	# apart from generating the synthetic network and adding it (encoding its shapes)
	emit map_build_s "$n" "$(val "$f" map_build_s)" s budget_at_100M 90
	emit map_add_and_build_s "$n" "$(awk -v a="$(val "$f" map_add_s)" -v b="$(val "$f" map_build_s)" 'BEGIN { print a + b }')" s budget_at_100M 90
	emit anon_huge_pages_mb "$n" "$(val "$f" anon_huge_pages_mb)" MB
	last=$n
done
# the largest size again on 4 kB pages: what huge pages gave
[ "${OBJECTS_4K:-1}" = 1 ] || { say "bench/objects: figures in $BENCH_CSV"; exit 0; }
run "$last" 0
emit update_random_batched_per_s_huge_pages "$last" "$(val "$last-1" update_1pct_batched_apply_rows_per_s)" updates/s \
	on_4k_pages "$(val "$last-0" update_1pct_batched_apply_rows_per_s)"
emit get_batched_per_s_huge_pages "$last" "$(val "$last-1" get_batched_per_s)" ops/s \
	on_4k_pages "$(val "$last-0" get_batched_per_s)"
emit get_per_s_huge_pages "$last" "$(val "$last-1" get_per_s)" ops/s on_4k_pages "$(val "$last-0" get_per_s)"
say "bench/objects: figures in $BENCH_CSV"
