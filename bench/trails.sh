#!/usr/bin/env bash
# bench/trails.sh [SYN_TRAILS] [SYN_EVENTS_PER_TRAIL]: trail files read by
# byte ranges from a real S3 server (MinIO on 127.0.0.1) against the way
# without trail files: download the whole object first, then read it
# locally.  `make bench-trails` runs it alone; `make bench` runs it in step 5.
#
# Files: real AIS vessel trails, one trail per vessel (MMSI): `ais`, US
# coastal waters on 2020-06-30 (236 k reports), and `nyh`, New York Harbor
# over the first week of December 2020 (173 k reports); and `syn`, a
# synthetic file of vehicles (bench/trailbench gen, fixed seed; default
# 20,000 trails x 3,100 events, about 486 MB in format 2 (1.06 GB in format 1); TRAIL_SYN_TRAILS and
# TRAIL_SYN_EVENTS or the arguments shrink or grow it).
# Queries: 1, 10 and 100 trails spread evenly over the footer's index, a
# 0.02 x 0.01 degree box centred on a real event (the middle event of the
# middle trail), the 10 minutes from the middle of the file's time span,
# and all of it (bench/trailbench probe computes the box and the window
# from the local copy, so every mode runs the same query).
# For each block size (16 kB, 1 MB, 16 MB) and for the baseline: time to
# the first event and to the last, bytes from the network, requests; each
# run a fresh process with a fresh pager and no disk cache (cold), the
# median of TRAIL_RUNS (default 3).  Then the full scan with a warm disk cache (1 MB blocks, filled by
# one cold run) against the same scan of a local copy of the file.
# Issue 15: a warm query of one trail (block cache filled, one process, each
# query opening the file as an FDW query does) revalidating size and ETag at
# every query (revalidate_interval 0) or at most once a minute (60), against
# the same query of a local file; and a nested loop's 2 lookups (two pruned
# scans of one trail each behind one open) against scanning the whole object
# once, what a hash join does.
#
# Figures go to bench/lib.sh's CSV, section "trails" (rows of an earlier
# run of this script in the same CSV are replaced); bench_emit's ratio is
# ours / baseline (< 1: faster, fewer bytes); bench/report.py also shows
# the speedup (baseline / ours).  Each trailbench call is bounded by
# TRAIL_TIMEOUT seconds (default 300); the default run takes about 4
# minutes on 2 cores, the synthetic file's generator about 5.5 GB of RAM.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

SYN_TRAILS=${1:-${TRAIL_SYN_TRAILS:-20000}}
SYN_EVENTS=${2:-${TRAIL_SYN_EVENTS:-3100}}
RUNS=${TRAIL_RUNS:-3}
TMO=${TRAIL_TIMEOUT:-300}
t_start=$SECONDS
progress() { printf '  [%4d s] bench/trails: %s\n' $((SECONDS - t_start)) "$*" >&2; }

progress "dependencies, MinIO, build"
scripts/deps.sh >/dev/null
scripts/minio.sh install
make -s bench/trailbench tools/trafficdb-trail
scripts/fetch-ais.sh >/dev/null
work=$(mktemp -d /var/tmp/trafficdb-trails.XXXXXX)
cleanup() {
	scripts/minio.sh stop "$work/minio" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
scripts/minio.sh start "$work/minio" >/dev/null
. "$work/minio/env"
export AWS_ACCESS_KEY_ID=$MINIO_ROOT_USER AWS_SECRET_ACCESS_KEY=$MINIO_ROOT_PASSWORD AWS_ENDPOINT_URL=$MINIO_ENDPOINT
tools/trafficdb-trail mb s3://bench >/dev/null
sed -i '/^trails,/d' "$BENCH_CSV"

progress "writing the AIS files and the synthetic file ($SYN_TRAILS x $SYN_EVENTS events)"
tools/trafficdb-trail write "$work/ais.trail" --id mmsi --time ts <data/cache/ais/us_coastal_2020_06_30.csv 2>/dev/null
tools/trafficdb-trail write "$work/nyh.trail" --id mmsi --time ts <data/cache/ais/nyharbor_2020_12_first_week.csv 2>/dev/null
timeout "$((TMO * 3))" bench/trailbench gen "$work/syn.trail" "$SYN_TRAILS" "$SYN_EVENTS" >/dev/null
for f in ais nyh syn; do
	timeout "$TMO" bench/trailbench put "$work/$f.trail" "s3://bench/$f.trail"
	progress "$f.trail: $(stat -c %s "$work/$f.trail") bytes uploaded"
done

# median: the median of each column over the input lines
median() {
	awk '{ for (i = 1; i <= NF; i++) v[i, NR] = $i; nf = NF }
	END {
		for (i = 1; i <= nf; i++) {
			for (r = 1; r <= NR; r++) a[r] = v[i, r] + 0
			for (r = 2; r <= NR; r++) for (k = r; k > 1 && a[k - 1] > a[k]; k--) { t = a[k]; a[k] = a[k - 1]; a[k - 1] = t }
			printf "%s%s", a[int((NR + 1) / 2)], (i < nf ? " " : "\n")
		}
	}'
}

# run FILE QUERY BS MODE RUNS [CACHE]: the median of RUNS runs, each a fresh
# process: first_ms total_ms events bytes_network requests pages disk memory local
run() {
	local f=$1 q=$2 bs=$3 mode=$4 runs=$5 cache=${6:-} url i out=""
	url=s3://bench/$f.trail
	[ "$mode" = local ] && url=$work/$f.trail
	for i in $(seq 1 "$runs"); do
		# shellcheck disable=SC2086 # cache may be empty
		out+=$(timeout "$TMO" bench/trailbench query "$url" "$q" "$bs" "$mode" $cache)$'\n' ||
			die "bench/trails: trailbench query $url $q $bs $mode failed or took over $TMO s"
	done
	printf '%s' "$out" | median
}

declare -A qarg
for f in ais nyh syn; do
	size=$(stat -c %s "$work/$f.trail")
	read -r qarg[box] qarg[window] <<<"$(bench/trailbench probe "$work/$f.trail")"
	progress "$f: box ${qarg[box]#box:}, window ${qarg[window]#window:}"
	for q in ids:1 ids:10 ids:100 box window all; do
		runs=$RUNS
		arg=${qarg[$q]:-$q}
		read -r w_first w_total w_n w_bytes w_req _ <<<"$(run "$f" "$arg" 1048576 whole "$runs")"
		name=${f}_${q/:/}
		bench_emit trails "${name}_events" 0 "$w_n" events
		bench_emit trails "${name}_download_bytes" 0 "$w_bytes" B object "$size"
		bench_emit trails "${name}_download_requests" 0 "$w_req" requests
		for bs in 16384 1048576 16777216; do
			read -r first total n bytes requests pages _ <<<"$(run "$f" "$arg" "$bs" range "$runs")"
			[ "$n" = "$w_n" ] || die "bench/trails: $f $q at $bs returned $n events, the download $w_n"
			bench_emit trails "${name}_first_ms" "$bs" "$first" ms download_whole "$w_first"
			bench_emit trails "${name}_total_ms" "$bs" "$total" ms download_whole "$w_total"
			bench_emit trails "${name}_bytes" "$bs" "$bytes" B object "$size"
			bench_emit trails "${name}_requests" "$bs" "$requests" requests
			bench_emit trails "${name}_pages" "$bs" "$pages" pages
			[ "$q" = all ] && [ "$bs" = 1048576 ] && { all_ms=$total; all_bytes=$bytes; }
		done
		progress "$f $q done"
	done
	# warm single-trail queries: revalidating every query or once a minute
	read -r w0 w0_req w0_bytes <<<"$(timeout "$TMO" bench/trailbench warm "s3://bench/$f.trail" 1048576 0 20)"
	read -r w60 w60_req w60_bytes <<<"$(timeout "$TMO" bench/trailbench warm "s3://bench/$f.trail" 1048576 60 20)"
	read -r wl _ _ <<<"$(timeout "$TMO" bench/trailbench warm "$work/$f.trail" 1048576 0 20)"
	bench_emit trails "${f}_warm_ids1_revalidate0_ms" 1048576 "$w0" ms local_file "$wl"
	bench_emit trails "${f}_warm_ids1_revalidate60_ms" 1048576 "$w60" ms revalidate0 "$w0"
	bench_emit trails "${f}_warm_ids1_revalidate0_requests" 1048576 "$w0_req" requests
	bench_emit trails "${f}_warm_ids1_revalidate60_requests" 1048576 "$w60_req" requests
	bench_emit trails "${f}_warm_ids1_revalidate0_bytes" 1048576 "$w0_bytes" B
	bench_emit trails "${f}_warm_ids1_revalidate60_bytes" 1048576 "$w60_bytes" B
	# a nested loop of 2 ids against one scan of the whole object (a hash join)
	out=""
	for _ in $(seq 1 "$RUNS"); do
		out+=$(timeout "$TMO" bench/trailbench lookups "s3://bench/$f.trail" 1048576 2)$'\n'
	done
	read -r j_ms j_n j_bytes j_req <<<"$(printf '%s' "$out" | median)"
	bench_emit trails "${f}_join2_lookups_ms" 1048576 "$j_ms" ms whole_scan "$all_ms"
	bench_emit trails "${f}_join2_lookups_bytes" 1048576 "$j_bytes" B whole_scan "$all_bytes"
	bench_emit trails "${f}_join2_lookups_requests" 1048576 "$j_req" requests
	bench_emit trails "${f}_join2_lookups_events" 1048576 "$j_n" events
	progress "$f warm (${w0} ms at revalidate 0, ${w60} ms at 60, local ${wl} ms), 2 lookups ${j_ms} ms / ${j_bytes} B against ${all_ms} ms / ${all_bytes} B"

	# full scan: a warm disk cache (filled by one cold run) against a local file
	rm -rf "$work/cache"
	read -r _ cold _ cold_bytes _ <<<"$(run "$f" all 1048576 range 1 "$work/cache")"
	read -r _ warm _ warm_net _ _ warm_disk warm_mem _ <<<"$(run "$f" all 1048576 range "$RUNS" "$work/cache")"
	read -r _ local _ _ _ _ _ _ local_bytes <<<"$(run "$f" all 1048576 local "$RUNS")"
	bench_emit trails "${f}_all_fill_cache_ms" 1048576 "$cold" ms local_file "$local"
	bench_emit trails "${f}_all_warm_cache_ms" 1048576 "$warm" ms local_file "$local"
	bench_emit trails "${f}_all_warm_cache_bytes_network" 1048576 "$warm_net" B object "$size"
	bench_emit trails "${f}_all_warm_cache_bytes_disk" 1048576 "$warm_disk" B object "$size"
	bench_emit trails "${f}_all_warm_cache_bytes_memory" 1048576 "$warm_mem" B object "$size"
	bench_emit trails "${f}_all_local_bytes" 0 "$local_bytes" B object "$size"
	progress "$f full scans done (fill ${cold} ms / ${cold_bytes} B, warm ${warm} ms, local ${local} ms)"
done
progress "done"
