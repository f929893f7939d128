#!/usr/bin/env bash
# test/security.sh [--os-only]: the hostile suite (`make security-test`;
# docs/security.md says what each role and OS user may do, and this is
# where that is checked).
#
#   1. the TAP files of the attacks by SQL roles (no grants; the documented
#      reader, feeder and subscriber grants): the per-item regression tests
#      of issue 28 (t/048-t/057), the earlier attacks (t/010 load_map
#      escalation, t/012 every function with NULLs, t/014 pins, t/029 the
#      write path) and t/060, all roles at once;
#   2. as root, the attacks by OS users (in no group; in trafficdb.shm_group;
#      in both groups): test/security_shm.sh, test/security_names.sh and
#      test/group_mode.sh;
#   3. the live map as an unauthenticated web client (test/web_hostile.sh).
#
# --os-only runs 2 and 3 (`make test` runs every TAP file already).
# Every stage asserts: no server crash, no escalation, publication goes on,
# other users' data unreadable, each refusal a clear error.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$TDB_ROOT"

TAP_FILES=(t/010_daemon_guards.pl t/012_sql_safety.pl t/014_reader_liveness.pl t/029_write_path_review.pl)
for f in t/04[89]_*.pl t/05[0-7]_*.pl t/06[0-2]_*.pl; do
	[ -f "$f" ] && TAP_FILES+=("$f")
done

if [ "${1:-}" != --os-only ]; then
	say "security: SQL roles (${#TAP_FILES[@]} TAP files)"
	scripts/tap.sh "${TAP_FILES[@]}"
fi

if [ "$(id -u)" = 0 ]; then
	make -s -j"$(nproc)" all examples/live_traffic PG_CONFIG="$PG_CONFIG"
	for s in test/security_shm.sh test/security_names.sh; do
		if [ -x "$s" ]; then
			say "security: OS users ($s)"
			"$s" || die "$s failed"
		fi
	done
	say "security: OS users and groups (test/group_mode.sh)"
	test/group_mode.sh examples/live_traffic tools/tdbread || die "test/group_mode.sh failed"
else
	echo "skipped the OS users' attacks: they create OS users, so they run only as root (as CI does)"
fi

if [ -x test/web_hostile.sh ]; then
	say "security: the live map as an unauthenticated web client (test/web_hostile.sh)"
	test/web_hostile.sh || die "test/web_hostile.sh failed"
fi
say "security: all attacks refused"
