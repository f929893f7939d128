#!/usr/bin/env bash
# test/stream_cli.sh TRAFFICDB_STREAM: the stream-file CLI end to end, on a
# real file: create from RDL, append CSV (ISO and integer times, NULLs),
# dump exact rows, stats, verify, recover, and clear errors for bad input
# (schema line and column, out-of-order row with its line number, a
# malformed value, a foreign file).  TAP lines, then "N passed, N failed".
set -uo pipefail
T=$(readlink -f "$1")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pass=0 fail=0
check() {	# check DESCRIPTION COMMAND...
	if "${@:2}"; then pass=$((pass + 1)); echo "ok $((pass + fail)) - $1"
	else fail=$((fail + 1)); echo "not ok $((pass + fail)) - $1"; fi
}
cat >"$dir/v.rdl" <<'RDL'
-- a vessel's sensors
SET blockSize = 4096;
SET fileSize = 1MB;
CREATE STREAM nav WITH ID 1 {
    sog float64 WITH CODEC deadband PARAMS (0.1),
    heading int16 NULL WITH CODEC step
};
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
err=$(printf '1593475202000000,1,1\n' | "$T" append "$dir/v.tsf" nav 2>&1)
check "an out-of-order row is refused with its line number" grep -q "line 1: timestamp 1593475202000000 is not after the last one of stream nav" <<<"$err"
err=$(printf '1593475209000000,fast,1\n' | "$T" append "$dir/v.tsf" nav 2>&1)
check "a malformed value names the field and the type" grep -q 'line 1: field sog: "fast" is not a non-null float64' <<<"$err"
check "recover commits the recovered state" "$T" recover "$dir/v.tsf"
echo 'CREATE STREAM a WITH ID 1 { x int9 };' >"$dir/bad.rdl"
err=$("$T" create "$dir/w.tsf" "$dir/bad.rdl" 2>&1)
check "a schema error names the line and column" grep -q "line 1, column 31: expected a type" <<<"$err"
head -c 65536 /dev/urandom >"$dir/foreign"
err=$("$T" stats "$dir/foreign" 2>&1)
check "a foreign file is refused clearly" grep -q "no stream file here" <<<"$err"
echo "1..$((pass + fail))"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
