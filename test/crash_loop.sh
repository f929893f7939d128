#!/usr/bin/env bash
# test/crash_loop.sh: `make crash-test`.  Runs test/crash_loop.pl (kill -9 of
# the daemon, a backend and the postmaster in rotation, CRASH_CYCLES times)
# through `make tap` against the installed build, as the cluster's OS user
# in a scratch copy of the test files (as scripts/test.sh runs the TAP tests).
# The scratch directory is removed after a pass (CRASH_KEEP=1 keeps it) and
# kept after a failure.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$TDB_ROOT"

[ -f "$("$PG_CONFIG" --sharedir)/extension/trafficdb.control" ] ||
	die "trafficdb is not installed for $PG_CONFIG: make install (or make test) first"
for f in test/crash_writer test/crash_reader test/crash_putter; do
	[ -x "$f" ] || die "$f is missing: run make crash-test"
done

work=$(mktemp -d /tmp/trafficdb-crash.XXXXXX)
cp -r Makefile trafficdb.control t test "$work"/
[ "$(id -u)" = 0 ] && chown -R "$PG_OS_USER": "$work"

if as_pg env CRASH_CYCLES="${CRASH_CYCLES:-100}" ${CRASH_SEED:+CRASH_SEED="$CRASH_SEED"} \
	make -s -C "$work" tap PG_CONFIG="$PG_CONFIG" PROVE_TESTS=test/crash_loop.pl PROVE_FLAGS=-v; then
	if [ "${CRASH_KEEP:-0}" = 1 ]; then echo "logs kept in $work/tmp_check"; else rm -rf "$work"; fi
else
	echo "crash test failed; logs kept in $work/tmp_check (regress_log_crash_loop, log/, crash_loop/)" >&2
	exit 1
fi
