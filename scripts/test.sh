#!/usr/bin/env bash
# scripts/test.sh: `make test`.  Installs what is missing, builds with
# warnings as errors, installs the extension, then runs
#   1. the C unit tests of src/ and libtrafficdb (stream files included), the
#      threaded ones again under ThreadSanitizer, the stream-file damage and
#      crash tests under AddressSanitizer, and the stream CLI,
#   2. as root, libtrafficdb and the Python bindings installed by an ordinary
#      OS user and used from C (shared, static) and Python (test/packaging.sh),
#   3. the pg_regress suite (sql/, expected/) on a temporary instance that
#      preloads the library,
#   4. the TAP tests (t/) on clusters they create themselves, with a real
#      MinIO on 127.0.0.1 and the tests' fault proxy for the trail FDW,
#   5. the live map (web/) in headless chromium against a real cluster, the
#      tipg app and MinIO (test/livemap.sh), and its app against hostile web
#      clients (test/web_hostile.sh),
#   5a. the vector tiles: trafficdb.tile_mvt byte for byte against PostGIS's
#      ST_AsMVT on four maps and the edge cases (test/tiles_diff.sh),
#   5b. the docs: make docs with no warnings, every snippet of README.md and
#      docs/ against a scratch demo (test/doc_examples.py), every figure equal
#      to its bench result (scripts/figures.py),
#   6. 20 s of random SQL (sqlsmith) that must not crash the server,
#   7. as root, the group-mode test (test/group_mode.sh) with real OS users,
#      and a user in no group squatting trafficdb's names (test/security_names.sh),
#      and what group members can do to the segments they can write
#      (test/security_shm.sh), with real OS users,
#   8. scripts/autoctl.sh's checks (test/autoctl_check.sh: logs outside
#      PGDATA; as root, no runuser left stopped by afo_kill).
# Exits non-zero on the first failing stage and shows why.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$TDB_ROOT"

# Each stage's wall time, printed at the end (the 20-minute budget: docs/testing.md)
stage_names=() stage_secs=() stage_at=$SECONDS
stage() {
	[ ${#stage_names[@]} -gt 0 ] && stage_secs+=("$((SECONDS - stage_at))")
	stage_names+=("$1") stage_at=$SECONDS
	say "$1"
}
# lane NAME COMMAND...: COMMAND in the background (a function or program),
# its output into a log of its own; lane_wait NAME MESSAGE waits for it,
# shows its log and dies with MESSAGE when it failed.  Lanes still running
# when make test stops early are stopped (stop_lanes).
declare -A lane_pid=() lane_log=()
lane() {
	local name=$1
	shift
	lane_log[$name]=$(mktemp /tmp/trafficdb-lane-"$name".XXXXXX)
	( lane_at=$SECONDS; "$@"; echo "lane $name: $((SECONDS - lane_at)) s" ) >"${lane_log[$name]}" 2>&1 &
	lane_pid[$name]=$!
}
lane_wait() {
	local name=$1 rc=0
	wait "${lane_pid[$name]}" || rc=$?
	unset "lane_pid[$name]"
	cat "${lane_log[$name]}"
	rm -f "${lane_log[$name]}"
	[ "$rc" = 0 ] || die "$2"
}
stop_lanes() {
	local name pid
	for name in "${!lane_pid[@]}"; do
		pid=${lane_pid[$name]}
		pkill -TERM -P "$pid" 2>/dev/null || true
		kill "$pid" 2>/dev/null || true
		rm -f "${lane_log[$name]}"
	done
}
trap stop_lanes EXIT

stage_times() {
	local i
	stage_secs+=("$((SECONDS - stage_at))")
	echo "make test: $SECONDS s in all; each stage:"
	for i in "${!stage_names[@]}"; do printf '  %5d s  %.72s\n' "${stage_secs[$i]}" "${stage_names[$i]}"; done
}

stage "dependencies"
scripts/deps.sh

stage "build (-Wall -Wextra -Werror), and the test programs: sanitizer builds, fuzzers"
# every test program here, on every core: the stages after only run them
make -s -j"$(nproc)" all tools/trafficdb-trail src/tests/unit_tests src/tests/unit_tests_tsan src/tests/unit_tests_asan \
	src/trail/tests/trail_tests src/trail/tests/trail_tests_asan src/trail/tests/trail_tests_tsan src/trail/tests/fuzz_decode \
	src/tests/fuzz/fuzz_stream_open src/tests/fuzz/fuzz_genlog PG_CONFIG="$PG_CONFIG"

stage "house rules: no include cycle, no file over 1,000 lines, README ≤ 300 lines (test/check_layout.py)"
python3 test/check_layout.py --symbols || die "a house rule is broken: test/check_layout.py lists each breach (issue 29)"

# Two lanes of trail tests run beside the stages that follow, each into a
# log of its own (lane, lane_wait):
# - against MinIO and the fault proxy: they mostly wait (on the proxy's
#   stalls, retries, cancels: about 20 s of CPU in 165 s); then the pager's
#   read-ahead thread against MinIO and its faults under ThreadSanitizer;
# - under AddressSanitizer and UBSan (single-threaded, about 85 s), TSan, and
#   the page decoder fuzzed.
# The stages below are about one core busy in two (measured, 2 cores): side
# by side they take about 200 s fewer (docs/testing.md).
trail_minio() {
	src/trail/tests/run.sh && TRAIL_TEST_BIN=src/trail/tests/trail_tests_tsan src/trail/tests/run.sh \
		test_s3_async_reads_what_sync_reads test_s3_async_faults test_s3_async_cancel_and_close \
		test_s3_async_bulk_skips_disk_cache test_s3_async_covered_announcement_does_not_wait
}
trail_sanitized() {
	make -s unit-trail-asan && make -s unit-trail-tsan && make -s fuzz-trail FUZZ_SECONDS=6
}
lane trail-minio trail_minio
lane trail-sanitized trail_sanitized

stage "unit tests (src/, libtrafficdb)"
make -s unit

stage "threads under ThreadSanitizer"
make -s unit-tsan

stage "stream files under AddressSanitizer and UBSan; the stream CLI (test/stream_cli.sh)"
make -s unit-asan
test/stream_cli.sh tools/trafficdb-stream tools/trafficdb-trail
make -s fuzz-stream FUZZ_SECONDS=6
make -s fuzz-genlog FUZZ_SECONDS=6

stage "trail files: unit tests against MinIO and the fault proxy, ASan and UBSan, TSan, fuzzing (the two lanes started after the house rules)"
lane_wait trail-minio "the trail unit tests against MinIO failed (src/trail/tests/run.sh; its output above)"
lane_wait trail-sanitized "the trail unit tests under a sanitizer, or the trail fuzzer, failed (output above)"

stage "packaging: make install-client as an ordinary user, pkg-config, static linking, Python (test/packaging.sh)"
if [ "$(id -u)" = 0 ]; then
	test/packaging.sh || die "packaging test failed"
else
	echo "skipped: it creates an OS user, so it runs only when make test runs as root (as CI does)"
fi

stage "install"
$SUDO make -s install PG_CONFIG="$PG_CONFIG"

# The server-side tests run as the cluster account, in a scratch copy of the
# test inputs that it owns (the checkout may not be readable by it).
work=$(mktemp -d /tmp/trafficdb-test.XXXXXX)
servers=$(mktemp -d /tmp/trafficdb-servers.XXXXXX)
stop_servers() {
	scripts/minio.sh stop "$servers" >/dev/null 2>&1 || true
	rm -rf "$work" "$servers"
}
trap 'stop_lanes; stop_servers' EXIT
cp -r Makefile trafficdb.control sql expected test t "$work"/
mkdir -p "$work/data" "$work/scripts" && cp data/helsinki.osm.pbf "$work/data/" && cp scripts/roads.lua "$work/scripts/"
# t/032_failover.pl runs bench/failover.sh (pg_auto_failover, scripts/autoctl.sh)
mkdir -p "$work/bench" && cp scripts/lib.sh scripts/autoctl.sh scripts/demo.sh scripts/minio.sh "$work/scripts/" &&
	cp bench/lib.sh bench/failover.sh bench/failover_load.py bench/failover_check.py "$work/bench/"
mkdir -p "$work/tools" "$work/lib" && cp tools/tdbread tools/tdbsub tools/trafficdb-stream tools/trafficdb-trail src/trail/tests/fault_proxy.py "$work/tools/" && cp lib/libtrafficdb.so "$work/lib/"
mkdir -p "$work/examples" && cp examples/live_traffic "$work/examples/"
cp -r python "$work/"
[ "$(id -u)" = 0 ] && chown -R "$PG_OS_USER": "$work"

stage "regression tests (pg_regress, temporary instance)"
if ! as_pg make -s -C "$work" installcheck PG_CONFIG="$PG_CONFIG" ; then
	[ -f "$work/regression.diffs" ] && cat "$work/regression.diffs"
	die "regression tests failed"
fi

# prove -j$(nproc)+1: the TAP files run side by side (each makes its own
# clusters on ports PostgreSQL::Test::Cluster reserves; most of their time is
# waiting: one at a time they take 12 minutes), one more than the cores so
# that a core is never idle while a file waits, which keeps make test within
# 20 minutes on 2 cores
stage "TAP tests (t/), with MinIO and the fault proxy on 127.0.0.1"
scripts/minio.sh start "$servers"
. "$servers/env"
if ! as_pg env TDBREAD="$work/tools/tdbread" TDBSUB="$work/tools/tdbsub" TRAFFICDB_STREAM="$work/tools/trafficdb-stream" TRAFFICDB_LIB="$work/lib/libtrafficdb.so" \
	TRAFFICDB_TRAIL="$work/tools/trafficdb-trail" MINIO_ENDPOINT="$MINIO_ENDPOINT" MINIO_ROOT_USER="$MINIO_ROOT_USER" \
	MINIO_ROOT_PASSWORD="$MINIO_ROOT_PASSWORD" TRAIL_FAULT_PROXY="$work/tools/fault_proxy.py" \
	TRAFFICDB_PYTHON="$work/python" make -s -C "$work" tap PG_CONFIG="$PG_CONFIG" PROVE_FLAGS="--timer -j$(($(nproc) + 1))"; then
	# the servers' logs, and each test script's own (regress_log_*: where a die says why)
	find "$work/tmp_check/log" \( -name '*.log' -o -name 'regress_log_*' \) -newer "$work/Makefile" -print \
		-exec tail -n 40 {} \; 2>/dev/null || true
	die "TAP tests failed"
fi

stage "the base map: Helsinki's extract, the world and the glyphs built (cached) and decoded (test/basemap.sh)"
test/basemap.sh || die "the base map tests failed"

# The live map's tests wait on a browser and on servers about half their
# time: a lane of their own, beside the stages that follow, collected at the
# end.  What it shares with them (the web venv, the Delaware extract, the AIS
# files, Helsinki's SUMO network: cached, built once) is made here first, so
# that two never build the same thing at once.
scripts/web-setup.sh
scripts/fetch-map.sh delaware >/dev/null
scripts/fetch-ais.sh >/dev/null
scripts/sumo.sh build helsinki data/helsinki.osm.pbf >/dev/null
livemap_lane() {
	test/livemap.sh || die "the live map tests failed"
	say "the live map's app against hostile web clients: bounded filters, tiles and items, no database text, supervised (test/web_hostile.sh)"
	test/web_hostile.sh || die "the hostile web client tests failed"
	test/sumo_feeder_hostile.sh || die "the SUMO feeder's hostile tests failed"
}
lane livemap livemap_lane

stage "vector tiles: trafficdb.tile_mvt byte for byte against PostGIS's ST_AsMVT over a heap copy (test/tiles_diff.sh)"
test/tiles_diff.sh || die "a tile of trafficdb.tile_mvt differs from PostGIS (test/tiles_diff.sh shows it decoded)"

stage "the docs: make docs with no warnings, every snippet runs against a demo cluster (test/doc_examples.py), figures equal their bench results (scripts/figures.py)"
docs_started=$SECONDS
make -s docs || die "make docs failed (any warning fails it: scripts/docs.sh)"
# a demo of its own in a scratch directory, on the first free ports of the
# demo's ranges (TDB_DEMO_PG_PORTS, TDB_WEB_PORTS; MinIO's the system picks),
# stopped and deleted whatever happens
docs_demo=$(mktemp -d /var/tmp/trafficdb-docs-demo.XXXXXX)
make_pg_dir "$docs_demo"
stop_docs_demo() {
	local pid
	TDB_DEMO_DIR="$docs_demo" scripts/demo.sh --stop >/dev/null 2>&1 || true
	for pid in "$docs_demo"/*/postmaster.pid; do	# servers snippets started there (docs/fleet.md's standby)
		[ -f "$pid" ] && as_pg "$PG_BIN/pg_ctl" -D "$(dirname "$pid")" stop -m immediate >/dev/null 2>&1 || true
	done
	rm -rf "$docs_demo" "$docs_demo.log"
}
trap 'stop_docs_demo; stop_lanes; stop_servers' EXIT
trap 'exit 130' INT TERM
TDB_DEMO_DIR="$docs_demo" scripts/demo.sh >"$docs_demo.log" 2>&1 ||
	{ tail -n 40 "$docs_demo.log"; die "the docs stage's demo did not start (scripts/demo.sh; log above)"; }
echo "docs: a demo in $docs_demo, started in $((SECONDS - docs_started)) s"
python3 test/doc_examples.py --demo "$docs_demo" || die "a snippet of README.md or docs/ failed (test/doc_examples.py shows it)"
stop_docs_demo
trap 'stop_lanes; stop_servers' EXIT
scripts/figures.py || die "a figure of README.md or docs/ differs from its bench result (scripts/figures.py --write rewrites them)"
echo "docs: the stage took $((SECONDS - docs_started)) s"

stage "random SQL: sqlsmith for 20 s as an ordinary role and as a superuser (test/sqlsmith.sh)"
test/sqlsmith.sh 20 || die "a random SQL statement crashed the server"

stage "group mode: other OS users and trafficdb.shm_group (test/group_mode.sh)"
if [ "$(id -u)" = 0 ]; then
	test/group_mode.sh examples/live_traffic tools/tdbread || die "group mode test failed"
	test/security_shm.sh tools/tdbsub tools/tdbread || die "a member of shm_group broke another party (test/security_shm.sh)"
else
	echo "skipped: it creates OS users, so it runs only when make test runs as root (as CI does)"
fi

stage "squatted names: another OS user creates /dev/shm/trafficdb.<port>.* first (test/security_names.sh)"
if [ "$(id -u)" = 0 ]; then
	test/security_names.sh tools/tdbread tools/tdbsub || die "squatted names test failed"
else
	echo "skipped: it creates an OS user, so it runs only when make test runs as root (as CI does)"
fi

stage "scripts/autoctl.sh: server logs outside PGDATA, afo_kill leaves nothing stopped (test/autoctl_check.sh)"
test/autoctl_check.sh || die "the autoctl checks failed"

stage "the live map in headless chromium: tiles from Martin, repaint on publish, popup, vessels; the base map at z8/12/16, SUMO's traffic drawn as simulated, colour-blind checks, a phone, Helsinki and Delaware (test/livemap.sh); its app against hostile web clients (test/web_hostile.sh): the lane started after the base map"
lane_wait livemap "the live map's tests failed (its lane's output above)"

stage_times
say "all tests passed"
