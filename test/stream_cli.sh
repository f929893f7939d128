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
printf 'ts,sog,heading,n\n1593475203,4,4,4\n' | "$T" append "$dir/ms.tsf" raw --time-unit ms --time-window .. 2>/dev/null
check "--time-unit ms reads the integers as milliseconds whatever their size (with the window open)" [ "$(rows "$dir/ms.tsf" raw)" = "1593475203000,4,4,4" ]
err=$(printf 'ts,sog,heading,n\n1593475210,5,5,5\n1593475211000000,6,6,6\n' | "$T" append "$dir/v.tsf" raw 2>&1)
check "a column mixing seconds and microseconds is refused" has "$err" 'stdin line 3, column ts: "1593475211000000" reads as microseconds by the automatic rule (|v| < 1e11 seconds, < 1e14 milliseconds, else microseconds), but the column'"'"'s first integer time, on line 2, was in seconds: mixed units; say which with --time-unit'
err=$("$T" append "$dir/v.tsf" raw --time-unit sec </dev/null 2>&1); rc=$?
check "an unknown --time-unit is refused" has "$rc $err" '2 trafficdb-stream: --time-unit "sec": expected s, ms, us, ns or auto'
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

# --- times outside the window (1971-01-01..2200-01-01 by default) are refused, naming the unit that fits (issue 33)
"$T" create "$dir/tw.tsf" "$dir/v.rdl" >/dev/null
cp "$dir/tw.tsf" "$dir/tw-before.tsf"
err=$(printf 'ts,sog,heading\n1633608000000000000,1,1\n' | "$T" append "$dir/tw.tsf" nav 2>&1); rc=$?
check "nanoseconds are refused, not stored as the year 53736" exits $rc 1 "$err" 'trafficdb-stream: stdin line 2, column ts: "1633608000000000000" read as microseconds (by the automatic rule, |v| >= 1e14) is the year 53736, outside the time window 1971-01-01..2200-01-01; as nanoseconds it is 2021-10-07T12:00:00Z: pass --time-unit ns'
check "  and nothing was appended" cmp -s "$dir/tw.tsf" "$dir/tw-before.tsf"
err=$(printf 'ts,sog,heading\n1633608000000,1,1\n' | "$T" append "$dir/tw.tsf" nav --time-unit s 2>&1); rc=$?
check "milliseconds given --time-unit s are refused" exits $rc 1 "$err" 'stdin line 2, column ts: "1633608000000" read as seconds (--time-unit s) is the year 53736, outside the time window 1971-01-01..2200-01-01; as milliseconds it is 2021-10-07T12:00:00Z: pass --time-unit ms'
err=$(printf 'ts,sog,heading\n1633608000,1,1\n' | "$T" append "$dir/tw.tsf" nav --time-unit us 2>&1); rc=$?
check "seconds given --time-unit us are refused" exits $rc 1 "$err" 'stdin line 2, column ts: "1633608000" read as microseconds (--time-unit us) is 1970-01-01T00:27:13.608000Z, outside the time window 1971-01-01..2200-01-01; as seconds it is 2021-10-07T12:00:00Z: pass --time-unit s'
err=$(printf 'ts,sog,heading\n1633608000000,1,1\n' | "$T" append "$dir/tw.tsf" nav --time-unit us 2>&1); rc=$?
check "milliseconds given --time-unit us (a day in January 1970) are refused" exits $rc 1 "$err" 'is 1970-01-19T21:46:48Z, outside the time window 1971-01-01..2200-01-01; as milliseconds it is 2021-10-07T12:00:00Z: pass --time-unit ms'
err=$(printf 'ts,sog,heading\n5,1,1\n' | "$T" append "$dir/tw.tsf" nav 2>&1); rc=$?
check "a time no unit puts in the window says how to widen it" exits $rc 1 "$err" '"5" read as seconds (by the automatic rule, |v| < 1e11) is 1970-01-01T00:00:05Z, outside the time window 1971-01-01..2200-01-01; no unit (s, ms, us, ns) puts it in the window: if the time is right, widen the window with --time-window FROM..TO'
err=$(printf 'ts,sog,heading\n1969-07-20T20:17:40Z,1,1\n' | "$T" append "$dir/tw.tsf" nav 2>&1); rc=$?
check "an ISO time outside the window too" exits $rc 1 "$err" '"1969-07-20T20:17:40Z" is outside the time window 1971-01-01..2200-01-01: if the time is right, widen the window with --time-window FROM..TO'
check "  nothing appended by any of them" cmp -s "$dir/tw.tsf" "$dir/tw-before.tsf"
printf 'ts,sog,heading\n1633608000123456789,1,1\n1633608001000000000,2,2\n' | "$T" append "$dir/tw.tsf" nav --time-unit ns 2>/dev/null
check "--time-unit ns stores the microseconds (the digits below dropped)" [ "$(rows "$dir/tw.tsf" nav)" = $'1633608000123456,1,1\n1633608001000000,2,2' ]
printf 'ts,sog,heading,n\n1969-07-20T20:17:40Z,1,1,1\n5,2,2,2\n' | "$T" append "$dir/tw.tsf" raw --time-window 1969-01-01.. 2>/dev/null; rc=$?
check "--time-window FROM.. accepts what the default refuses" [ "$rc $(rows "$dir/tw.tsf" raw)" = $'0 -14182940000000,1,1,1\n5000000,2,2,2' ]
err=$(printf 'ts,sog,heading,n\n2020-06-30T00:00:00Z,1,1,1\n' | "$T" append "$dir/tw.tsf" raw --time-window=..2020-06-30 2>&1); rc=$?
check "the window's TO is excluded" exits $rc 1 "$err" '"2020-06-30T00:00:00Z" is outside the time window ..2020-06-30: if the time'
err=$("$T" append "$dir/tw.tsf" raw --time-window 2020 </dev/null 2>&1); rc=$?
check "a --time-window without .. is refused" exits $rc 2 "$err" 'trafficdb-stream: --time-window "2020": expected FROM..TO, each an ISO 8601 time (2020-06-30, 2020-06-30T12:00:00Z) or empty for no bound'
err=$("$T" append "$dir/tw.tsf" raw --time-window 2021-01-01..2020-01-01 </dev/null 2>&1); rc=$?
check "a --time-window backwards is refused" exits $rc 2 "$err" 'trafficdb-stream: --time-window "2021-01-01..2020-01-01": FROM (2021-01-01) is not before TO (2020-01-01)'
err=$("$T" append "$dir/tw.tsf" raw --time-window 1633608000.. </dev/null 2>&1); rc=$?
check "a --time-window bound must be ISO (an integer's unit is ambiguous)" exits $rc 2 "$err" '"1633608000" is not an ISO 8601 time'
check "--help names the window and its default" has "$("$T" 2>&1)" '--time-window FROM..TO] [--skip-bad]'
check "  and its default" has "$("$T" 2>&1)" '(default 1971-01-01..2200-01-01, up to but not including TO; "..": any time)'

# --- floats: NaN and the infinities as PostgreSQL spells them; integers past 64 bits refused (issue 33)
cat >"$dir/f.rdl" <<'RDL'
SET blockSize = 4096;
SET fileSize = 1MB;
CREATE STREAM f WITH ID 1 { d float64 NULL, r real NULL, i bigint NULL };
RDL
"$T" create "$dir/f.tsf" "$dir/f.rdl" >/dev/null
printf 'ts,d,r,i\n2020-06-30T00:00:01Z,NaN,nan,1\n2020-06-30T00:00:02Z,Infinity,-INF,2\n2020-06-30T00:00:03Z,-infinity,+inf,3\n2020-06-30T00:00:04Z,1.5,2.5,4\n' >"$dir/f.csv"
err=$("$T" append "$dir/f.tsf" f "$dir/f.csv" 2>&1); rc=$?
check "NaN, Infinity and -Infinity in any case are floats" exits $rc 0 "$err" "appended 4 rows to f"
expected=$'ts,d,r,i\n1593475201000000,NaN,NaN,1\n1593475202000000,Infinity,-Infinity,2\n1593475203000000,-Infinity,Infinity,3\n1593475204000000,1.5,2.5,4'
check "  dump writes them as PostgreSQL does" [ "$("$T" dump "$dir/f.tsf" f)" = "$expected" ]
"$T" create "$dir/f2.tsf" "$dir/f.rdl" >/dev/null
"$T" dump "$dir/f.tsf" f >"$dir/f-dump.csv"
"$T" append "$dir/f2.tsf" f "$dir/f-dump.csv" 2>/dev/null
check "  and append reads dump's output back exactly" [ "$("$T" dump "$dir/f2.tsf" f)" = "$expected" ]
err=$(printf 'ts,d,r,i\n2020-06-30T00:00:05Z,0x10,nan(1), 7\n2020-06-30T00:00:06Z,1,1,99999999999999999999\n2020-06-30T00:00:07Z,1e999,1,1\n' | "$T" append "$dir/f.tsf" f 2>&1); rc=$?
check "a hexadecimal float is refused" has "$err" 'stdin line 2, column d: "0x10" is not a f64'
check "an integer past 64 bits is refused, not rounded" has "$err" 'stdin line 3, column i: "99999999999999999999" is out of range for i64 (-9223372036854775808 to 9223372036854775807)'
check "a decimal past a double's range is refused, not made infinite" exits $rc 1 "$err" 'stdin line 4, column d: "1e999" is out of range for f64'

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

	# the time window (issue 33): the same rule and words as trafficdb-stream
	err=$(printf 'id,time,lon,lat\n1,1633608000000000000,0,0\n' | "$TRAIL" write "$dir/ns.trail" 2>&1); rc=$?
	check "trafficdb-trail refuses nanoseconds read as microseconds" exits $rc 1 "$err" 'trafficdb-trail: CSV line 2, column time: "1633608000000000000" read as microseconds (by the automatic rule, |v| >= 1e14) is the year 53736, outside the time window 1971-01-01..2200-01-01; as nanoseconds it is 2021-10-07T12:00:00Z: pass --time-unit ns'
	check "  and writes no file" [ ! -e "$dir/ns.trail" ]
	err=$(printf 'id,time,lon,lat\n1,1633608000000,0,0\n' | "$TRAIL" write "$dir/ns.trail" --time-unit s 2>&1); rc=$?
	check "trafficdb-trail: milliseconds given --time-unit s" exits $rc 1 "$err" '"1633608000000" read as seconds (--time-unit s) is the year 53736, outside the time window 1971-01-01..2200-01-01; as milliseconds it is 2021-10-07T12:00:00Z: pass --time-unit ms'
	err=$(printf 'id,time,lon,lat\n1,1633608000,0,0\n' | "$TRAIL" write "$dir/ns.trail" --time-unit us 2>&1); rc=$?
	check "trafficdb-trail: seconds given --time-unit us" exits $rc 1 "$err" 'as seconds it is 2021-10-07T12:00:00Z: pass --time-unit s'
	printf 'id,time,lon,lat\n1,1633608000123456789,0,0\n' | "$TRAIL" write "$dir/ns.trail" --time-unit ns 2>/dev/null
	check "trafficdb-trail --time-unit ns" [ "$("$TRAIL" cat "$dir/ns.trail" | tail -n +2)" = "1,2021-10-07T12:00:00.123456Z,0,0" ]
	printf 'id,time,lon,lat\n1,5,0,0\n' | "$TRAIL" write "$dir/w.trail" --time-window .. 2>/dev/null
	check "trafficdb-trail --time-window .. accepts any time" [ "$("$TRAIL" cat "$dir/w.trail" | tail -n +2)" = "1,1970-01-01T00:00:05Z,0,0" ]
	err=$("$TRAIL" write "$dir/w.trail" --time-window 2020 </dev/null 2>&1); rc=$?
	check "trafficdb-trail: a bad --time-window" exits $rc 2 "$err" 'trafficdb-trail: --time-window 2020: expected FROM..TO'
	check "trafficdb-trail --help names the window and its default" has "$("$TRAIL" 2>&1)" '(default 1971-01-01..2200-01-01,'

	# type inference: NaN and the infinities are floats; an integer past 64 bits is an error (issue 33)
	printf 'id,time,lon,lat,x,y\n1,2020-01-01,0,0,1.5,NaN\n1,2020-01-02,0,0,NaN,nan\n1,2020-01-03,0,0,-Infinity,INF\n1,2020-01-04,0,0,+inf,\n' >"$dir/nan.csv"
	err=$("$TRAIL" write "$dir/nan.trail" <"$dir/nan.csv" 2>&1); rc=$?
	check "trafficdb-trail: a NaN keeps a float column float" exits $rc 0 "$err" "wrote $dir/nan.trail"
	check "  (and a column of NaN only is float too)" has "$("$TRAIL" info "$dir/nan.trail")" "x (float64), y (float64)"
	nanout=$'id,time,lon,lat,x,y\n1,2020-01-01T00:00:00Z,0,0,1.5,NaN\n1,2020-01-02T00:00:00Z,0,0,NaN,NaN\n1,2020-01-03T00:00:00Z,0,0,-Infinity,Infinity\n1,2020-01-04T00:00:00Z,0,0,Infinity,'
	check "  cat writes NaN and the infinities as PostgreSQL does" [ "$("$TRAIL" cat "$dir/nan.trail")" = "$nanout" ]
	"$TRAIL" cat "$dir/nan.trail" | "$TRAIL" write "$dir/nan2.trail" 2>/dev/null
	check "  and write reads cat's output back exactly" [ "$("$TRAIL" cat "$dir/nan2.trail")" = "$nanout" ]
	printf 'id,time,lon,lat,x\n1,2020-01-01,0,0,nan\n' | "$TRAIL" write "$dir/nan3.trail" --type x=float 2>/dev/null; rc=$?
	check "trafficdb-trail --type x=float takes nan" [ "$rc $("$TRAIL" cat "$dir/nan3.trail" | tail -n +2)" = "0 1,2020-01-01T00:00:00Z,0,0,NaN" ]
	err=$(printf 'id,time,lon,lat,x\n1,2020-01-01,0,0,1\n1,2020-01-02,0,0,99999999999999999999\n' | "$TRAIL" write "$dir/big.trail" 2>&1); rc=$?
	check "trafficdb-trail: an integer past 64 bits is an error, not the float 1e+20" exits $rc 1 "$err" 'trafficdb-trail: CSV line 3, column x: "99999999999999999999" is out of range for an integer column (int64: -9223372036854775808 to 9223372036854775807); --type x=float stores it rounded to a double, --type x=string keeps its digits'
	check "  and writes no file" [ ! -e "$dir/big.trail" ]
	printf 'id,time,lon,lat,x\n1,2020-01-01,0,0,1\n1,2020-01-02,0,0,99999999999999999999\n' | "$TRAIL" write "$dir/big.trail" --type x=string 2>/dev/null
	check "  --type x=string keeps its digits" [ "$("$TRAIL" cat "$dir/big.trail" | tail -1)" = "1,2020-01-02T00:00:00Z,0,0,99999999999999999999" ]
	err=$(printf 'id,time,lon,lat\n99999999999999999999,2020-01-01,0,0\n' | "$TRAIL" write "$dir/big.trail" 2>&1); rc=$?
	check "trafficdb-trail: a trail id past 64 bits is an error too" exits $rc 1 "$err" 'column id: "99999999999999999999" is out of range for an integer id (int64: -9223372036854775808 to 9223372036854775807); --type ID=string keeps its digits'
	err=$(printf 'id,time,lon,lat\n1,2020-01-01,NaN,0\n' | "$TRAIL" write "$dir/big.trail" 2>&1); rc=$?
	check "trafficdb-trail: a NaN longitude is still refused" exits $rc 1 "$err" 'CSV line 2, column lon: "NaN" is not a longitude (a number from -180 to 180)'
	err=$(printf 'id,time,lon,lat\n1,2020-01-01,0,nan\n' | "$TRAIL" write "$dir/big.trail" 2>&1); rc=$?
	check "trafficdb-trail: a NaN latitude too" exits $rc 1 "$err" 'CSV line 2, column lat: "nan" is not a latitude (a number from -90 to 90)'
	# the extreme times: ".." is any time (INT64_MAX microseconds too), and cat prints what write reads back
	extin=$'id,time,lon,lat\n1,-9223372036854775808,0,0\n1,-62167219200000000,0,0\n1,0001-02-03T04:05:06.000007Z,0,0\n1,9223372036854775807,0,0'
	extout=$'id,time,lon,lat\n1,-9223372036854775808,0,0\n1,0000-01-01T00:00:00Z,0,0\n1,0001-02-03T04:05:06.000007Z,0,0\n1,9223372036854775807,0,0'
	err=$(printf '%s\n' "$extin" | "$TRAIL" write "$dir/ext.trail" --time-window .. 2>&1); rc=$?
	check "trafficdb-trail --time-window .. takes every 64-bit microsecond time, the largest too" exits $rc 0 "$err" '4 events'
	check "  cat prints years 0 to 9999 as ISO 8601 (4 digits) and the others as microseconds" [ "$("$TRAIL" cat "$dir/ext.trail" 2>&1)" = "$extout" ]
	"$TRAIL" cat "$dir/ext.trail" | "$TRAIL" write "$dir/ext2.trail" --time-window .. 2>/dev/null
	check "  and write reads them back exactly" [ "$("$TRAIL" cat "$dir/ext2.trail" 2>&1)" = "$extout" ]
	err=$(printf 'id,time,lon,lat,x\n1,2020-01-01,0,0,1.5\n1,2020-01-02,0,0,1e999\n' | "$TRAIL" write "$dir/big.trail" 2>&1); rc=$?
	check "trafficdb-trail: a decimal past a double's range is an error, not text" exits $rc 1 "$err" 'column x: "1e999" is beyond a double'"'"'s range'
fi
echo "1..$((pass + fail))"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
