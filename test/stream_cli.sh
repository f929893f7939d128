#!/usr/bin/env bash
# test/stream_cli.sh TRAFFICDB_STREAM [TRAFFICDB_TRAIL]: the stream-file CLI
# end to end, on a real file: create from RDL, append CSV (columns matched
# by the header's names or --no-header, ISO and integer times in a detected
# or given unit, NULLs), dump exact rows, stats, verify, recover, and clear
# errors for bad input (schema line and column; every bad line by file line,
# column and value, with nothing appended unless --skip-bad; a foreign
# file).  With TRAFFICDB_TRAIL, the two CLIs read the same times the same
# way.  TAP lines, then "N passed, N failed".
set -uo pipefail
T=$(readlink -f "$1")
TRAIL=${2:+$(readlink -f "$2")}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pass=0 fail=0
check() {	# check DESCRIPTION COMMAND...
	if "${@:2}"; then pass=$((pass + 1)); echo "ok $((pass + fail)) - $1"
	else fail=$((fail + 1)); echo "not ok $((pass + fail)) - $1"; fi
}
has() {	# has TEXT PATTERN: grep -F, showing the text when it fails
	grep -qF -- "$2" <<<"$1" || { echo "# expected: $2"; sed 's/^/#   got: /' <<<"$1"; return 1; }
}
rows() { "$T" dump "$1" "$2" | tail -n +2; }
exits() {	# exits RC WANT TEXT PATTERN: the exit status, then has
	[ "$1" = "$2" ] || { echo "# exit status $1, expected $2"; return 1; }
	has "$3" "$4"
}
cat >"$dir/v.rdl" <<'RDL'
-- a vessel's sensors
SET blockSize = 4096;
SET fileSize = 1MB;
CREATE STREAM nav WITH ID 1 {
    sog float64 WITH CODEC deadband PARAMS (0.1),
    heading int16 NULL WITH CODEC step
};
CREATE STREAM raw WITH ID 2 { sog double precision, heading smallint NULL, n i8 NULL };
RDL
check "create from RDL" "$T" create "$dir/v.tsf" "$dir/v.rdl"
check "the file is preallocated to fileSize" [ "$(stat -c %s "$dir/v.tsf")" = 1048576 ]
printf 'ts,sog,heading\n2020-06-30 00:00:01Z,10.5,90\n2020-06-30T00:00:02.5Z,10.55,90\n1593475203000000,11,\n' >"$dir/in.csv"
check "append CSV with a header, ISO and integer times" "$T" append "$dir/v.tsf" nav "$dir/in.csv"
expected=$'ts,sog,heading\n1593475201000000,10.5,90\n1593475203000000,11,'
check "dump gives the stored rows exactly (the deadband dropped 10.55)" [ "$("$T" dump "$dir/v.tsf" nav)" = "$expected" ]
check "dump of a time range" [ "$("$T" dump "$dir/v.tsf" 1 1593475202000000 | tail -n +2)" = "1593475203000000,11," ]
check "stats counts the records" bash -c "'$T' stats '$dir/v.tsf' | grep -q 'stream nav (id 1): 2 records in 1 blocks'"
check "verify passes" "$T" verify "$dir/v.tsf"

# --- time units: detected as trafficdb-trail does, or given
out=$(printf 'ts,sog,heading,n\n1593475200,1,1,1\n1593475201,2,2,2\n' | "$T" append "$dir/v.tsf" raw 2>&1)
check "epoch seconds are read as seconds, and the summary says so" has "$out" "appended 2 rows to raw (2 stored by the codecs); integer times read as seconds (--time-unit auto)"
check "  stored as microseconds of 2020-06-30" [ "$(rows "$dir/v.tsf" raw)" = $'1593475200000000,1,1,1\n1593475201000000,2,2,2' ]
printf 'ts,sog,heading,n\n1593475202000,3,3,3\n' | "$T" append "$dir/v.tsf" raw 2>/dev/null
check "epoch milliseconds are read as milliseconds" [ "$(rows "$dir/v.tsf" raw | tail -1)" = "1593475202000000,3,3,3" ]
"$T" create "$dir/ms.tsf" "$dir/v.rdl" >/dev/null
printf 'ts,sog,heading,n\n1593475203,4,4,4\n' | "$T" append "$dir/ms.tsf" raw --time-unit ms 2>/dev/null
check "--time-unit ms reads the integers as milliseconds whatever their size" [ "$(rows "$dir/ms.tsf" raw)" = "1593475203000,4,4,4" ]
err=$(printf 'ts,sog,heading,n\n1593475210,5,5,5\n1593475211000000,6,6,6\n' | "$T" append "$dir/v.tsf" raw 2>&1)
check "a column mixing seconds and microseconds is refused" has "$err" 'stdin line 3, column ts: "1593475211000000" reads as microseconds by the automatic rule (|v| < 1e11 seconds, < 1e14 milliseconds, else microseconds), but the column'"'"'s first integer time, on line 2, was in seconds: mixed units; say which with --time-unit'
err=$("$T" append "$dir/v.tsf" raw --time-unit sec </dev/null 2>&1); rc=$?
check "an unknown --time-unit is refused" has "$rc $err" '2 trafficdb-stream: --time-unit "sec": expected s, ms, us or auto'
check "dump FROM TO take the same units" [ "$("$T" dump "$dir/v.tsf" raw 1593475201 1593475202000 | tail -n +2)" = $'1593475201000000,2,2,2\n1593475202000000,3,3,3' ]

# --- columns matched by the header's names
"$T" create "$dir/h.tsf" "$dir/v.rdl" >/dev/null
printf 'heading,ts,n,sog\n90,2020-06-30T00:00:01Z,7,10.5\n' | "$T" append "$dir/h.tsf" raw 2>/dev/null
check "a header in another order is mapped by name" [ "$(rows "$dir/h.tsf" raw)" = "1593475201000000,10.5,90,7" ]
err=$(printf 'ts,cog,sog\n2020-06-30T00:00:02Z,80,11\n' | "$T" append "$dir/h.tsf" nav 2>&1); rc=$?
check "a header naming a column the stream lacks is refused, naming it and the missing field" \
	has "$rc $err" '1 trafficdb-stream: stdin line 1: the header does not match stream nav (ts, sog, heading): unknown column(s) "cog"; missing: heading'
err=$(printf 'ts,sog,sog,heading\n' | "$T" append "$dir/h.tsf" nav 2>&1)
check "a column named twice is refused" has "$err" 'named twice: "sog"'
err=$(printf '2020-06-30T00:00:02Z,11,80\n' | "$T" append "$dir/h.tsf" nav 2>&1); rc=$?
check "data on line 1 is not taken for a header" has "$rc $err" '1 trafficdb-stream: stdin line 1: expected a header naming the columns (ts, sog, heading), found data ("2020-06-30T00:00:02Z" is a time); pass --no-header'
check "  and nothing was appended" [ -z "$(rows "$dir/h.tsf" nav)" ]
printf '2020-06-30T00:00:02Z,11,80\n' | "$T" append "$dir/h.tsf" nav --no-header 2>/dev/null
check "--no-header reads ts and the fields in schema order" [ "$(rows "$dir/h.tsf" nav)" = "1593475202000000,11,80" ]
err=$(printf 'ts,sog,heading\n2020-06-30T00:00:03Z,12,81\n' | "$T" append "$dir/h.tsf" nav --no-header 2>&1); rc=$?
check "--no-header: a bad time on line 1 is an error, not a header" has "$rc $err" '1 trafficdb-stream: stdin line 1, column ts: "ts" is not a time'

# --- every bad line named; all or nothing unless --skip-bad
cp "$dir/h.tsf" "$dir/before.tsf"
printf 'ts,sog,heading\n2020-06-30T00:00:10Z,12,81\n2020-06-30T00:00:11Z,fast,81\n2020-06-30T00:00:12Z,13,40000\n2020-06-30T00:00:13Z,,82\n2020-06-30T00:00:14Z,14\n2020-06-30T00:00:15Z,15,83,x\n2020-06-30T00:00:09Z,16,84\nsoon,17,85\n2020-06-30T00:00:20Z,18,86\n' >"$dir/bad.csv"
err=$("$T" append "$dir/h.tsf" nav "$dir/bad.csv" 2>&1); rc=$?
check "a malformed value names line, column and value" has "$err" "$dir/bad.csv line 3, column sog: \"fast\" is not a non-null f64"
check "a value out of its type's range" has "$err" "$dir/bad.csv line 4, column heading: \"40000\" is out of range for i16 (-32768 to 32767)"
check "an empty value in a NOT NULL field" has "$err" "$dir/bad.csv line 5, column sog: empty (NULL), but field sog is NOT NULL"
check "a missing value names its column" has "$err" "$dir/bad.csv line 6, column heading: missing (the line has 2 value(s), the header names 3)"
check "an extra value is shown" has "$err" "$dir/bad.csv line 7, extra value \"x\" after column heading (the header names 3)"
check "an out-of-order time names both times and where the earlier came from" \
	has "$err" "$dir/bad.csv line 8, column ts: \"2020-06-30T00:00:09Z\" (2020-06-30T00:00:09Z) is before 2020-06-30T00:00:10Z, the time on line 2: times must ascend"
check "a bad time" has "$err" "$dir/bad.csv line 9, column ts: \"soon\" is not a time"
check "the CLI fails and says nothing was appended" exits $rc 1 "$err" "trafficdb-stream: nothing appended to nav: 7 bad line(s) of 9 (the first on line 3); fix them, or pass --skip-bad to append the 2 good line(s) and skip the bad"
check "  and the file is unchanged byte for byte" cmp -s "$dir/h.tsf" "$dir/before.tsf"
err=$("$T" append "$dir/h.tsf" nav < "$dir/bad.csv" 2>&1); rc=$?
check "the same from a pipe-less stdin" has "$rc $err" "1 trafficdb-stream: stdin line 3, column sog"
err=$(cat "$dir/bad.csv" | "$T" append "$dir/h.tsf" nav 2>&1); rc=$?
check "the same from a pipe (spooled for the second pass)" exits $rc 1 "$err" "nothing appended to nav: 7 bad line(s) of 9"
check "  the file still unchanged" cmp -s "$dir/h.tsf" "$dir/before.tsf"
err=$(cat "$dir/bad.csv" | "$T" append "$dir/h.tsf" nav --skip-bad 2>&1); rc=$?
check "--skip-bad appends the good lines and reports the counts" exits $rc 0 "$err" "appended 2 rows to nav (2 stored by the codecs); skipped 7 bad line(s) of 9, listed above"
check "  the good lines are stored" [ "$(rows "$dir/h.tsf" nav)" = $'1593475202000000,11,80\n1593475210000000,12,81\n1593475220000000,18,86' ]
err=$(printf '1593475202000000,1,1\n' | "$T" append "$dir/h.tsf" nav --no-header 2>&1)
check "a row before the stream's last is refused, naming it" has "$err" 'stdin line 1, column ts: "1593475202000000" (2020-06-30T00:00:02Z) is before 2020-06-30T00:00:20Z, the last timestamp of stream nav: times must ascend'
seq 1 30 | sed 's/^/2020-06-30T01:00:00Z,bad,/' | sed '1i ts,sog,heading' >"$dir/many.csv"
err=$("$T" append "$dir/h.tsf" nav "$dir/many.csv" 2>&1)
check "20 bad lines are shown" has "$(grep -c 'many.csv line' <<<"$err") $err" "20 trafficdb-stream: /"
check "  and the rest counted" has "$err" "trafficdb-stream: ... and 10 more bad line(s) not shown"
check "an empty input appends nothing and succeeds" "$T" append "$dir/h.tsf" nav /dev/null

check "stats names the types unambiguously" has "$("$T" stats "$dir/v.tsf")" "stream raw (id 2): 3 records in 1 blocks, 21 bytes each, from 1593475200000000 to 1593475202000000; sog f64 heading i16 null n i8 null"
err=$(printf 'ts,sog,heading,n\n2020-06-30T00:01:00Z,1,1,128\n' | "$T" append "$dir/v.tsf" raw 2>&1)
check "an i8 field holds 8 bits" has "$err" 'column n: "128" is out of range for i8 (-128 to 127)'
echo 'CREATE STREAM a WITH ID 1 { x int8 };' >"$dir/int8.rdl"
err=$("$T" create "$dir/w.tsf" "$dir/int8.rdl" 2>&1); rc=$?
check "int8 is refused as ambiguous, with both readings" exits $rc 1 "$err" "line 1, column 31: type int8 of field x is ambiguous: write i8 for 8 bits (what int8 meant here before), or bigint / i64 for PostgreSQL's int8 (64 bits)"
check "  and no file is left" [ ! -e "$dir/w.tsf" ]
check "recover commits the recovered state" "$T" recover "$dir/v.tsf"
echo 'CREATE STREAM a WITH ID 1 { x int9 };' >"$dir/bad.rdl"
err=$("$T" create "$dir/w.tsf" "$dir/bad.rdl" 2>&1)
check "a schema error names the line and column" grep -q "line 1, column 31: expected a type" <<<"$err"
head -c 65536 /dev/urandom >"$dir/foreign"
err=$("$T" stats "$dir/foreign" 2>&1)
check "a foreign file is refused clearly" grep -q "no stream file here" <<<"$err"

# --- the same times through trafficdb-trail (tools/csvtime.c in both)
if [ -n "$TRAIL" ]; then
	for t in 1593475205 1593475205250 1593475205250000 2020-06-30T00:00:05.25Z; do
		rm -f "$dir/u.tsf" && "$T" create "$dir/u.tsf" "$dir/v.rdl" >/dev/null
		printf 'ts,sog,heading\n%s,1,1\n' "$t" | "$T" append "$dir/u.tsf" nav 2>/dev/null
		us=$(rows "$dir/u.tsf" nav | cut -d, -f1)
		iso=$(date -u -d "@$((us / 1000000))" +%Y-%m-%dT%H:%M:%S)
		[ $((us % 1000000)) = 0 ] && iso+=Z || iso+=$(printf '.%06dZ' $((us % 1000000)))
		printf 'id,time,lon,lat\n1,%s,0,0\n' "$t" | "$TRAIL" write "$dir/u.trail" >/dev/null 2>&1
		check "time $t: the stream and trail CLIs read the same instant ($iso)" \
			[ "$("$TRAIL" cat "$dir/u.trail" | tail -n +2 | cut -d, -f2)" = "$iso" ]
	done
	printf 'id,time,lon,lat\n1,1593475210,0,0\n1,1593475211000000,0,0\n' >"$dir/mixed.csv"
	err=$("$TRAIL" write "$dir/m.trail" <"$dir/mixed.csv" 2>&1); rc=$?
	check "trafficdb-trail refuses mixed units too" has "$rc $err" '1 trafficdb-trail: CSV line 3, column time: "1593475211000000" reads as microseconds by the automatic rule'
fi
echo "1..$((pass + fail))"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
