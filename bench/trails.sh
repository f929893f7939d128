#!/usr/bin/env bash
# bench/trails.sh [SYN_TRAILS] [SYN_EVENTS_PER_TRAIL]: trail files read by
# byte ranges from a real S3 server (MinIO on 127.0.0.1) against the seed's
# way, downloading the whole object first and reading it locally.
#
# Files: real AIS vessel trails (US coastal waters, 2020-06-30, 236 k
# reports of 1,185 vessels) and a synthetic file of vehicles (default
# 20,000 x 3,100 events, about 1 GB; bench/trailbench gen, seeded).
# Queries: 1, 10 and 100 trails, a small box, a 10-minute window, all.
# For each block size (16 kB, 1 MB, 16 MB): time to the first event and to
# the last, bytes fetched, cold (fresh process, no disk cache); the median
# of 3 runs (1 for the full scans of the large file).  Then the full scan
# with a warm disk cache against the same scan of a local copy.
# Figures go to bench/lib.sh's CSV (section "trails"); ratios are ours /
# download-whole (lower is better) and warm / local.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

SYN_TRAILS=${1:-${TRAIL_SYN_TRAILS:-20000}}
SYN_EVENTS=${2:-${TRAIL_SYN_EVENTS:-3100}}
make -s bench/trailbench tools/trafficdb-trail
scripts/fetch-ais.sh >/dev/null
work=$(mktemp -d /var/tmp/trafficdb-trails.XXXXXX)
cleanup() {
	scripts/minio.sh stop "$work/minio" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
scripts/minio.sh start "$work/minio"
. "$work/minio/env"
export AWS_ACCESS_KEY_ID=$MINIO_ROOT_USER AWS_SECRET_ACCESS_KEY=$MINIO_ROOT_PASSWORD AWS_ENDPOINT_URL=$MINIO_ENDPOINT
tools/trafficdb-trail mb s3://bench >/dev/null
t_start=$SECONDS

echo "bench/trails: writing the AIS file and the synthetic file ($SYN_TRAILS x $SYN_EVENTS events)" >&2
tools/trafficdb-trail write "$work/ais.trail" --id mmsi --time ts <data/cache/ais/us_coastal_2020_06_30.csv 2>/dev/null
bench/trailbench gen "$work/syn.trail" "$SYN_TRAILS" "$SYN_EVENTS" >/dev/null
for f in ais syn; do
	bench/trailbench put "$work/$f.trail" "s3://bench/$f.trail"
	echo "  $f.trail: $(stat -c %s "$work/$f.trail") bytes uploaded ($((SECONDS - t_start)) s)" >&2
done

# run FILE QUERY BS MODE RUNS [CACHE]: median line of RUNS runs
run() {
	local f=$1 q=$2 bs=$3 mode=$4 runs=$5 cache=${6:-} url i
	url=s3://bench/$f.trail
	[ "$mode" = local ] && url=$work/$f.trail
	for i in $(seq 1 "$runs"); do
		# shellcheck disable=SC2086 # cache may be empty
		bench/trailbench query "$url" "$q" "$bs" "$mode" $cache
	done | sort -n -k2 | awk -v n="$runs" 'NR == int((n + 1) / 2)'
}

for f in ais syn; do
	size=$(stat -c %s "$work/$f.trail")
	for q in ids:1 ids:10 ids:100 box window all; do
		runs=3
		[ "$f" = syn ] && [ "$q" = all ] && runs=1
		read -r w_first w_total w_n w_bytes _ _ < <(run "$f" "$q" 1048576 whole "$runs")
		name=${f}_${q/:/}
		bench_emit trails "${name}_events" 0 "$w_n" events
		for bs in 16384 1048576 16777216; do
			read -r first total n bytes requests pages < <(run "$f" "$q" "$bs" range "$runs")
			[ "$n" = "$w_n" ] || die "bench/trails: $f $q at $bs returned $n events, the download $w_n"
			bench_emit trails "${name}_first_ms" "$bs" "$first" ms download_whole "$w_first"
			bench_emit trails "${name}_total_ms" "$bs" "$total" ms download_whole "$w_total"
			bench_emit trails "${name}_bytes" "$bs" "$bytes" B object "$size"
			bench_emit trails "${name}_requests" "$bs" "$requests" requests
		done
		echo "  $f $q done ($((SECONDS - t_start)) s)" >&2
	done
	# full scan: warm disk cache (filled by a first run) against a local file
	rm -rf "$work/cache"
	run "$f" all 1048576 range 1 "$work/cache" >/dev/null
	read -r _ warm _ _ _ _ < <(run "$f" all 1048576 range 3 "$work/cache")
	read -r _ local _ _ _ _ < <(run "$f" all 1048576 local 3)
	bench_emit trails "${f}_all_warm_cache_ms" 1048576 "$warm" ms local_file "$local"
done
echo "bench/trails: done in $((SECONDS - t_start)) s" >&2
