#!/usr/bin/env bash
# test/trail_write_cli.sh TRAFFICDB_TRAIL: trafficdb-trail write in bounded
# memory (issue 33, item 8).  A generated CSV (trails interleaved, string
# ids and values, NULLs, equal times) written with the default memory limit
# and with 1 MB (many sorted runs on disk), from a file and from a pipe, in
# each layout: the same bytes.  No progress line when stderr is not a
# terminal, one with `script` when it is, none with --quiet.  kill -9 in the
# middle of a write leaves neither the output nor a temporary file (in the
# output's directory or --temp-dir).  Clear errors for a bad --memory-limit
# and a missing --temp-dir.  With AWS_ENDPOINT_URL and keys in the
# environment (src/trail/tests/run.sh), the same file through s3://.  TAP
# lines, then "N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
T=$(readlink -f "${1:-tools/trafficdb-trail}")
[ -x "$T" ] || die "$T: build tools/trafficdb-trail first"
dir=$(mktemp -d "${TMPDIR:-/tmp}/trail-write-XXXXXX")
trap 'rm -rf "$dir"' EXIT
has() {	# has TEXT PATTERN: grep -F, showing the text when it fails
	grep -qF -- "$2" <<<"$1" || { echo "# expected: $2"; sed 's/^/#   got: /' <<<"$1"; return 1; }
}
empty_dir() {	# empty_dir DIR: nothing in it, else list it
	[ -z "$(ls -A "$1")" ] || { ls -la "$1" | sed 's/^/#   /'; return 1; }
}

# 200 trails x 600 events, interleaved; every 4th time repeats; NULLs and strings
python3 - "$dir/in.csv" <<'PY'
import random, sys
rng = random.Random(33)
kinds = ["cargo", "tanker", "a \"quoted\", word", "ünïcode", ""]
rows = []
for t in range(200):
    tid = f"v{rng.randrange(10**6):06d}"
    ts = 1593475200 + rng.randrange(86400)
    lon, lat = rng.uniform(-10, 10), rng.uniform(40, 60)
    for i in range(600):
        ts += 0 if i % 4 == 3 else rng.randrange(1, 90)
        lon += rng.uniform(-0.01, 0.01)
        lat += rng.uniform(-0.01, 0.01)
        sog = "" if rng.random() < 0.1 else f"{rng.uniform(0, 30):.1f}"
        kind = kinds[rng.randrange(5)]
        kind = '"' + kind.replace('"', '""') + '"' if '"' in kind or "," in kind else kind
        rows.append(f"{tid},{ts},{lon:.6f},{lat:.6f},{sog},{kind}")
rng.shuffle(rows)
with open(sys.argv[1], "w") as f:
    f.write("id,time,lon,lat,sog,kind\n" + "\n".join(rows) + "\n")
PY
mkdir "$dir/out" "$dir/tmp"
for layout in "--order trail" "--order space-time" "--format-version 1"; do
	name=${layout//[- ]/}
	"$T" write "$dir/out/a.trail" $layout --quiet <"$dir/in.csv" 2>/dev/null
	"$T" write "$dir/out/b.trail" $layout --memory-limit 1MB --temp-dir "$dir/tmp" <"$dir/in.csv" 2>"$dir/err"
	cat "$dir/in.csv" | "$T" write "$dir/out/c.trail" $layout --memory-limit 1MB --temp-dir "$dir/tmp" 2>/dev/null
	check "$name: 1 MB (sorted runs on disk) gives the default's bytes" cmp "$dir/out/a.trail" "$dir/out/b.trail"
	check "$name: from a pipe too" cmp "$dir/out/a.trail" "$dir/out/c.trail"
	check "$name: not a terminal: no progress line, only the summary" \
		[ "$(cat "$dir/err")" = "trafficdb-trail: wrote $dir/out/b.trail: $(stat -c %s "$dir/out/b.trail") bytes, 120000 events" ]
	check "$name: nothing left in --temp-dir" empty_dir "$dir/tmp"
	check "$name: nothing but the files in the output's directory" \
		[ "$(ls -A "$dir/out" | tr '\n' ' ')" = "a.trail b.trail c.trail " ]
	rm -f "$dir/out"/*
done
"$T" write "$dir/out/v.trail" --memory-limit 1MB <"$dir/in.csv" 2>/dev/null
check "the file verifies" has "$("$T" verify "$dir/out/v.trail")" "ok, 200 trails"

# format version 6: a small file's pages column-major, the same events as version 5; a large one version 5
head -n 2001 "$dir/in.csv" >"$dir/small.csv"
"$T" write "$dir/out/s6.trail" --quiet <"$dir/small.csv" 2>/dev/null
"$T" write "$dir/out/s5.trail" --format-version 5 --quiet <"$dir/small.csv" 2>/dev/null
check "a small file is version 6 by default, pages column-major" has "$("$T" info "$dir/out/s6.trail")" "version:     6 (pages column-major)"
check "  and version 5 on request" has "$("$T" info "$dir/out/s5.trail")" "version:     5"
check "  info --pages gives each chunk's offset" has "$("$T" info "$dir/out/s6.trail" --pages)" "chunks=core:"
check "  it verifies" has "$("$T" verify "$dir/out/s6.trail")" ", 2000 events"
check "  cat: the same events as version 5" [ "$("$T" cat "$dir/out/s6.trail")" = "$("$T" cat "$dir/out/s5.trail")" ]
check "  cat --columns kind --no-position: the same" \
	[ "$("$T" cat "$dir/out/s6.trail" --columns kind --no-position --from 2020-06-30T06:00:00Z --to 2020-06-30T12:00:00Z)" = \
	  "$("$T" cat "$dir/out/s5.trail" --columns kind --no-position --from 2020-06-30T06:00:00Z --to 2020-06-30T12:00:00Z)" ]
check "  cat --columns '': id, time and position only" \
	[ "$("$T" cat "$dir/out/s6.trail" --columns '' | head -n 1)" = "id,time,lon,lat" ]
err=$("$T" cat "$dir/out/s6.trail" --columns nope 2>&1) && rc=0 || rc=$?
check "  cat --columns names an unknown column" has "$rc $err" "2 trafficdb-trail: --columns: nope is not an extra column of this file"
check "  cat --columns kind,sog: the columns in the order named" \
	[ "$("$T" cat "$dir/out/s6.trail" --columns kind,sog | head -n 1)" = "id,time,lon,lat,kind,sog" ]
check "  and each row's values in that order" \
	[ "$("$T" cat "$dir/out/s6.trail" --columns kind,sog | tail -n +2 | md5sum)" = \
	  "$("$T" cat "$dir/out/s6.trail" | tail -n +2 | python3 -c '
import csv, sys
w = csv.writer(sys.stdout, lineterminator="\n")
for r in csv.reader(sys.stdin):
    w.writerow(r[:4] + [r[5], r[4]])' | md5sum)" ]
for bad in 'kind,' ',kind' 'kind,,sog'; do
	err=$("$T" cat "$dir/out/s6.trail" --columns "$bad" 2>&1) && rc=0 || rc=$?
	check "  cat --columns '$bad': an empty name is refused" has "$rc $err" "2 trafficdb-trail: --columns: an empty name in \"$bad\""
done
err=$("$T" cat "$dir/out/s6.trail" --columns sog,kind,sog 2>&1) && rc=0 || rc=$?
check "  cat --columns sog,kind,sog: a name given twice is refused" has "$rc $err" "2 trafficdb-trail: --columns: sog is named twice"
# a column named with a comma, a quote or a carriage return (the writer takes them quoted): cat's
# header and rows stay CSV, each value under its name, and cat | write gives the same file back
printf 'id,time,lon,lat,"a,b",q"z,"c\rr",a\n1,1593475200,1,2,"x,y","u""v","s\rt",w\n' >"$dir/odd.csv"
"$T" write "$dir/out/odd.trail" --quiet <"$dir/odd.csv" 2>/dev/null
csv_rows() { python3 -c 'import csv, sys; print(list(csv.reader(open(sys.argv[1], newline=""))))' "$1"; }
"$T" cat "$dir/out/odd.trail" >"$dir/odd.out"
check "cat: column names with a comma, a quote or a CR are quoted, each value under its name" \
	[ "$(csv_rows "$dir/odd.out")" = "[['id', 'time', 'lon', 'lat', 'a,b', 'q\"z', 'c\\rr', 'a'], ['1', '2020-06-30T00:00:00Z', '1', '2', 'x,y', 'u\"v', 's\\rt', 'w']]" ]
"$T" cat "$dir/out/odd.trail" --columns a >"$dir/odd.out"
check "  cat --columns a: the column a, not a,b" \
	[ "$(csv_rows "$dir/odd.out")" = "[['id', 'time', 'lon', 'lat', 'a'], ['1', '2020-06-30T00:00:00Z', '1', '2', 'w']]" ]
"$T" cat "$dir/out/odd.trail" | "$T" write "$dir/out/odd2.trail" --quiet 2>/dev/null || true
check "  cat | write: the same file" cmp "$dir/out/odd.trail" "$dir/out/odd2.trail"
rm -f "$dir/out/odd.trail" "$dir/out/odd2.trail"
"$T" write "$dir/out/l6.trail" --quiet <"$dir/in.csv" 2>/dev/null
"$T" write "$dir/out/l5.trail" --format-version 5 --quiet <"$dir/in.csv" 2>/dev/null
check "a file whose pages pass 64 KiB is version 5, byte for byte" cmp "$dir/out/l6.trail" "$dir/out/l5.trail"
rm -f "$dir/out"/*

if command -v script >/dev/null; then
	out=$(script -qec "'$T' write '$dir/out/p.trail' --memory-limit 1MB --temp-dir '$dir/tmp' < '$dir/in.csv'" /dev/null | tr '\r' '\n')
	check "a terminal gets a progress line: runs spilled, pages written" has "$out" "sorted runs spilled"
	check "  and the events written" has "$out" "writing pages: 120000 of 120000 events (100%)"
	out=$(script -qec "'$T' write '$dir/out/q.trail' --quiet --memory-limit 1MB < '$dir/in.csv'" /dev/null | tr '\r' '\n')
	check "--quiet: none" [ "$(grep -c "sorted runs" <<<"$out")" = 0 ]
	rm -f "$dir/out"/*
fi

# kill -9 at several moments of a long write: no output, no temporary file
big="$dir/big.csv"
for _ in 1 2 3 4 5 6 7 8; do cat "$dir/in.csv"; done | awk 'NR == 1 || !/^id,/' >"$big"
killed=0
for delay in 0.05 0.2 0.4 0.6 0.8 1.0 1.3 1.6; do
	"$T" write "$dir/out/k.trail" --memory-limit 1MB --temp-dir "$dir/tmp" --order space-time <"$big" 2>/dev/null &
	pid=$!
	sleep "$delay"
	if kill -9 "$pid" 2>/dev/null; then killed=$((killed + 1)); fi
	wait "$pid" 2>/dev/null || true
	if [ -e "$dir/out/k.trail" ] && [ "$killed" -gt 0 ]; then
		# it finished before the kill: not a crash; start over
		rm -f "$dir/out/k.trail"
		killed=$((killed - 1))
	fi
	ls -A "$dir/out" "$dir/tmp" >"$dir/left"
	[ "$(grep -vc ':$\|^$' "$dir/left")" = 0 ] || break
done
echo "# kill -9: $killed of 8 writers killed mid-write"
check "kill -9 mid-write leaves no output file" empty_dir "$dir/out"
check "  and no temporary file" empty_dir "$dir/tmp"
check "  (at least 3 writers were killed mid-write)" [ "$killed" -ge 3 ]

# memory: 960,000 rows (93 MB of events held whole before) within 300 MB of
# address space with the defaults, and within 100 MB with --memory-limit 16MB
(ulimit -v 300000; "$T" write "$dir/out/m.trail" <"$big" 2>/dev/null) && rc=0 || rc=$?
check "960,000 rows in 300 MB of address space (the defaults)" [ "$rc" = 0 ]
(ulimit -v 100000; "$T" write "$dir/out/n.trail" --memory-limit 16MB <"$big" 2>/dev/null) && rc=0 || rc=$?
check "  and in 100 MB with --memory-limit 16MB, the same file" cmp "$dir/out/m.trail" "$dir/out/n.trail"
rm -f "$dir/out"/*

err=$("$T" write "$dir/out/x.trail" --memory-limit 10kB <"$dir/in.csv" 2>&1) && rc=0 || rc=$?
check "a too small --memory-limit is refused, saying the least" has "$rc $err" "2 trafficdb-trail: --memory-limit 10kB: expected a size of at least 256kB"
err=$("$T" write "$dir/out/x.trail" --memory-limit lots <"$dir/in.csv" 2>&1) && rc=0 || rc=$?
check "a --memory-limit that is not a size is refused" has "$rc $err" "2 trafficdb-trail: --memory-limit lots: expected"
err=$(cat "$dir/in.csv" | "$T" write "$dir/out/x.trail" --temp-dir "$dir/nonexistent" 2>&1) && rc=0 || rc=$?
check "a missing --temp-dir is named" has "$rc $err" "1 trafficdb-trail: cannot create a temporary file in $dir/nonexistent for the input"
err=$("$T" write "$dir/out/x.trail" --memory-limit 1MB --temp-dir "$dir/nonexistent" <"$dir/in.csv" 2>&1) && rc=0 || rc=$?
check "  also when the sort first spills" has "$rc $err" "(temporary directory $dir/nonexistent)"
check "  and no output is left" empty_dir "$dir/out"
err=$(printf 'id,time,lon,lat,a,a\n1,1593475200,1,2,x,y\n' | "$T" write "$dir/out/x.trail" 2>&1) && rc=0 || rc=$?
check "a header naming a column twice is refused, with both columns' numbers" \
	has "$rc $err" '1 trafficdb-trail: CSV header: columns 5 and 6 are both named "a"'
err=$(printf ',id,time,lon,lat\n0,1,1593475200,1,2\n' | "$T" write "$dir/out/x.trail" 2>&1) && rc=0 || rc=$?
check "a header with an unnamed column (pandas' index) is refused" \
	has "$rc $err" "1 trafficdb-trail: CSV header: column 1 has no name"
check "  and no output is left" empty_dir "$dir/out"

if [ -n "${AWS_ENDPOINT_URL:-}" ] && [ -n "${AWS_ACCESS_KEY_ID:-}" ]; then
	"$T" mb s3://trail-write-cli >/dev/null 2>&1 || true
	"$T" write s3://trail-write-cli/s.trail --memory-limit 1MB <"$dir/in.csv" 2>/dev/null
	"$T" write "$dir/out/s.trail" <"$dir/in.csv" 2>/dev/null
	check "s3://: the same file, and it verifies" has "$("$T" verify s3://trail-write-cli/s.trail)" "ok, 200 trails"
	check "  its info equals the local file's" [ "$("$T" info s3://trail-write-cli/s.trail | tail -n +2)" = "$("$T" info "$dir/out/s.trail" | tail -n +2)" ]
	# version 6 on S3: the ids, times and positions of a small file fetch less than of version 5
	head -n 2001 "$dir/in.csv" >"$dir/small.csv"
	"$T" write s3://trail-write-cli/s6.trail --quiet <"$dir/small.csv" 2>/dev/null
	"$T" write s3://trail-write-cli/s5.trail --format-version 5 --quiet <"$dir/small.csv" 2>/dev/null
	n6=$("$T" cat s3://trail-write-cli/s6.trail --columns '' --stats 2>&1 >/dev/null | sed -n 's/.*network \([0-9]*\) .*/\1/p')
	n5=$("$T" cat s3://trail-write-cli/s5.trail --columns '' --stats 2>&1 >/dev/null | sed -n 's/.*network \([0-9]*\) .*/\1/p')
	echo "# s3://: id, time and position of 2,000 events: version 5 fetched $n5 bytes, version 6 $n6"
	check "s3://: version 6's projection fetches fewer bytes than version 5's" [ "$n6" -lt "$n5" ]
	check "  the same rows" [ "$("$T" cat s3://trail-write-cli/s6.trail --columns '')" = "$("$T" cat s3://trail-write-cli/s5.trail --columns '')" ]
fi
tap_done
