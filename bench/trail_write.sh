#!/usr/bin/env bash
# bench/trail_write.sh: trafficdb-trail write in bounded memory (issue 33,
# item 8).  A flight-shaped CSV (bench/trails_parquet.py's generator, fixed
# seed; FLIGHTS=3400 makes 5.09 M rows, 427 MB) is written in each order with
# the default memory limit (256MB) and with MEMORY_SMALL (64MB), beside the
# baseline measured in the same run: --memory-limit 16GB, every event held
# in memory and sorted once, no run spilled (the writer before the limit,
# whose 5.1 M rows took 3 GB).  Prints wall and CPU seconds and the maximum
# resident set of each run, their ratios to the baseline, and checks the
# files are byte for byte the baseline's.  `make bench-trail-write`.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
FLIGHTS=${FLIGHTS:-3400}
MEMORY_SMALL=${MEMORY_SMALL:-64MB}
[[ $FLIGHTS =~ ^[0-9]+$ ]] && [ "$FLIGHTS" -ge 1 ] && [ "$FLIGHTS" -le 100000 ] ||
	die "FLIGHTS=$FLIGHTS: expected a number of flights from 1 to 100000"
make -s tools/trafficdb-trail
cache=${XDG_CACHE_HOME:-$HOME/.cache}/trafficdb/bench
mkdir -p "$cache"
csv=$cache/flights-$FLIGHTS.csv
if [ ! -s "$csv" ]; then
	say "generating $FLIGHTS flights into $csv (about 1,500 rows a flight)"
	python3 -c 'import sys; sys.path.insert(0, "bench"); import trails_parquet as t; t.gen_flights(sys.argv[1], nflights=int(sys.argv[2]))' \
		"$csv" "$FLIGHTS"
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/trail-write-bench-XXXXXX")
trap 'rm -rf "$work"' EXIT

# run OUT ARGS...: one write of $csv, measured by a Python parent (wall, CPU, max RSS of the child)
run() {
	python3 - "$csv" "$@" <<'PY'
import resource, subprocess, sys, time
t0 = time.monotonic()
with open(sys.argv[2] + ".log", "w") as log, open(sys.argv[1]) as csv:
    rc = subprocess.call(["tools/trafficdb-trail", "write"] + sys.argv[2:], stdin=csv, stderr=log)
wall = time.monotonic() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{wall:.2f} {ru.ru_utime + ru.ru_stime:.2f} {ru.ru_maxrss}")
sys.exit(rc)
PY
}

say "$(wc -l <"$csv") lines, $(($(stat -L -c %s "$csv") >> 20)) MB; nice $(nice)"
printf '%-11s %-16s %9s %8s %10s %7s %7s %7s %s\n' order limit wall_s cpu_s maxrss_MB wall_x cpu_x rss_x same_bytes
for order in trail space-time; do
	read -r bw bc br <<<"$(run "$work/base.trail" --id callsign --time ts --order "$order" --memory-limit 16GB)"
	printf '%-11s %-16s %9s %8s %10s %7s %7s %7s %s\n' "$order" "16GB (baseline)" "$bw" "$bc" $((br >> 10)) 1.00 1.00 1.00 -
	for limit in default "$MEMORY_SMALL"; do
		args=()
		[ "$limit" = default ] || args=(--memory-limit "$limit")
		read -r w c r <<<"$(run "$work/x.trail" --id callsign --time ts --order "$order" "${args[@]}")"
		same=no
		cmp -s "$work/base.trail" "$work/x.trail" && same=yes
		printf '%-11s %-16s %9s %8s %10s %s %s\n' "$order" "$limit" "$w" "$c" $((r >> 10)) \
			"$(awk -v w="$w" -v bw="$bw" -v c="$c" -v bc="$bc" -v r="$r" -v br="$br" \
				'BEGIN { printf "%7.2f %7.2f %7.2f", w / bw, c / bc, r / br }')" "$same"
		[ "$same" = yes ] || die "$order, --memory-limit $limit: not the baseline's bytes"
	done
done
