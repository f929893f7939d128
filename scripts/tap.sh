#!/usr/bin/env bash
# scripts/tap.sh: build, install and run some TAP tests (a developer's loop;
# `make test` runs them all).
#
#   scripts/tap.sh t/040_subscriptions.pl [t/041_...pl ...]
#   scripts/tap.sh --regress            the pg_regress suite only
#
# TDB_PG_CONFIG names another PostgreSQL 15 installation (a relocated copy,
# e.g. made by `scripts/tap.sh --copy-pg DIR`) so that work in several
# checkouts on one machine does not share the system's extension directory.
# MinIO starts only when a test named needs it (set TAP_MINIO=1).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$TDB_ROOT"

if [ "${1:-}" = --copy-pg ]; then
	# A relocatable copy of the system's PostgreSQL 15 (with PostGIS): its
	# binaries find share/ and lib/ relative to themselves.
	dest=${2:?usage: scripts/tap.sh --copy-pg DIR}
	mkdir -p "$dest"
	(cd / && cp -a --parents "usr/lib/postgresql/$PG_MAJOR" "usr/share/postgresql/$PG_MAJOR" usr/include/postgresql "$dest"/)
	echo "TDB_PG_CONFIG=$dest/usr/lib/postgresql/$PG_MAJOR/bin/pg_config"
	exit 0
fi

make -s -j"$(nproc)" all PG_CONFIG="$PG_CONFIG"
$SUDO make -s install PG_CONFIG="$PG_CONFIG" >/dev/null

work=$(mktemp -d /tmp/trafficdb-tap.XXXXXX)
servers=$(mktemp -d /tmp/trafficdb-tapsrv.XXXXXX)
finish() {
	scripts/minio.sh stop "$servers" >/dev/null 2>&1 || true
	rm -rf "$servers"
	echo "work directory (logs under tmp_check/): $work"
}
trap finish EXIT
cp -r Makefile trafficdb.control sql expected test t "$work"/
mkdir -p "$work/data" "$work/scripts" "$work/bench" "$work/tools" "$work/lib"
cp data/helsinki.osm.pbf "$work/data/"
cp scripts/roads.lua scripts/lib.sh scripts/autoctl.sh scripts/demo.sh scripts/minio.sh "$work/scripts/"
cp bench/lib.sh bench/failover.sh bench/failover_load.py bench/failover_check.py "$work/bench/"
cp tools/tdbread tools/tdbsub tools/trafficdb-stream src/trail/tests/fault_proxy.py "$work/tools/"
[ -x tools/trafficdb-trail ] && cp tools/trafficdb-trail "$work/tools/"
cp lib/libtrafficdb.so "$work/lib/"
mkdir -p "$work/examples" && cp examples/live_traffic "$work/examples/"
cp -r python "$work/"
[ "$(id -u)" = 0 ] && chown -R "$PG_OS_USER": "$work"

if [ "${1:-}" = --regress ]; then
	as_pg make -s -C "$work" installcheck PG_CONFIG="$PG_CONFIG" ||
		{ cat "$work/regression.diffs" 2>/dev/null; exit 1; }
	exit 0
fi

env_minio=()
if [ "${TAP_MINIO:-0}" = 1 ]; then
	scripts/minio.sh start "$servers"
	. "$servers/env"
	# each test that breaks GETs starts a fault proxy of its own (tdb_fault_proxy)
	env_minio=(MINIO_ENDPOINT="$MINIO_ENDPOINT" MINIO_ROOT_USER="$MINIO_ROOT_USER"
		MINIO_ROOT_PASSWORD="$MINIO_ROOT_PASSWORD" TRAIL_FAULT_PROXY="$work/tools/fault_proxy.py")
fi
as_pg env TDBREAD="$work/tools/tdbread" TDBSUB="$work/tools/tdbsub" TRAFFICDB_STREAM="$work/tools/trafficdb-stream" \
	TRAFFICDB_LIB="$work/lib/libtrafficdb.so" TRAFFICDB_TRAIL="$work/tools/trafficdb-trail" TRAFFICDB_PYTHON="$work/python" \
	"${env_minio[@]}" make -s -C "$work" tap PG_CONFIG="$PG_CONFIG" ${1:+"PROVE_TESTS=$*"} PROVE_FLAGS="${PROVE_FLAGS:-}"
