#!/usr/bin/env bash
# src/trail/tests/run.sh: every trail test.  Starts MinIO on 127.0.0.1
# (scripts/minio.sh, built with go install the first time) and the fault
# proxy in front of it, runs the unit tests with their addresses in the
# environment, then stops both.  Extra arguments name tests to run;
# TRAIL_TEST_BIN=src/trail/tests/trail_tests_asan runs the sanitizer build.
set -euo pipefail
cd "$(dirname "$0")/../../.."
. scripts/lib.sh

bin=${TRAIL_TEST_BIN:-src/trail/tests/trail_tests}
make -s "$bin" tools/trafficdb-trail

work=$(mktemp -d "${TMPDIR:-/tmp}/trail-run-XXXXXX")
proxy_pid=
cleanup() {
	[ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null || true
	scripts/minio.sh stop "$work" || true
	rm -rf "$work"
}
trap cleanup EXIT

scripts/minio.sh start "$work"
. "$work/env"
python3 src/trail/tests/fault_proxy.py "${MINIO_ENDPOINT##*:}" "$work/proxy.port" 600 &
proxy_pid=$!
for _ in $(seq 1 50); do [ -s "$work/proxy.port" ] && break; sleep 0.1; done
[ -s "$work/proxy.port" ] || die "the fault proxy did not start"

export TRAIL_TEST_S3_ENDPOINT=$MINIO_ENDPOINT
export TRAIL_TEST_S3_ACCESS_KEY=$MINIO_ROOT_USER
export TRAIL_TEST_S3_SECRET_KEY=$MINIO_ROOT_PASSWORD
export TRAIL_TEST_PROXY_ENDPOINT=http://127.0.0.1:$(cat "$work/proxy.port")
timeout 300 "$bin" "$@"
# the write CLI in bounded memory (all tests only), with this MinIO for its s3:// case
if [ $# -eq 0 ]; then
	AWS_ENDPOINT_URL=$MINIO_ENDPOINT AWS_ACCESS_KEY_ID=$MINIO_ROOT_USER AWS_SECRET_ACCESS_KEY=$MINIO_ROOT_PASSWORD \
		AWS_REGION=us-east-1 timeout 600 test/trail_write_cli.sh tools/trafficdb-trail
fi
