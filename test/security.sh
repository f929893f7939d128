#!/usr/bin/env bash
# test/security.sh: the hostile suite (`make security-test`;
# docs/security.md says what each role and OS user may do, and this is
# where that is checked).
#
#   1. the TAP files of the attacks by SQL roles (no grants; the documented
#      reader, feeder and subscriber grants): the per-item regression tests
#      of issue 28 (t/048-t/055, t/061-t/062 from the hostile review), the earlier attacks (t/010 load_map
#      escalation, t/012 every function with NULLs, t/014 pins, t/029 the
#      write path) and t/060, all roles at once;
#   2. as root, the attacks by OS users (in no group; in trafficdb.shm_group;
#      in both groups): test/security_shm.sh, test/security_names.sh and
#      test/group_mode.sh;
#   3. the live map as an unauthenticated web client (test/web_hostile.sh).
#
# Every stage asserts: no server crash, no escalation, publication goes on,
# other users' data unreadable, each refusal a clear error.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$TDB_ROOT"

TAP_FILES=(t/010_daemon_guards.pl t/012_sql_safety.pl t/014_reader_liveness.pl t/029_write_path_review.pl)
TAP_FILES+=(t/048_subscriptions_hostile.pl t/049_postgis_schema.pl t/050_shm_shrink.pl t/051_shm_damage.pl
	t/052_shm_names.pl t/053_matching_budget.pl t/054_subscriber_slots.pl t/055_notify_full.pl t/060_security_roles.pl
	t/061_review28.pl t/062_shm_fifo.pl)

say "security: SQL roles (${#TAP_FILES[@]} TAP files)"
TAP_MINIO=1 scripts/tap.sh "${TAP_FILES[@]}"

if [ "$(id -u)" = 0 ]; then
	make -s -j"$(nproc)" all PG_CONFIG="$PG_CONFIG"
	$SUDO make -s install PG_CONFIG="$PG_CONFIG" >/dev/null
	say "security: a member of trafficdb.shm_group truncates and overwrites what it can write (test/security_shm.sh)"
	test/security_shm.sh tools/tdbsub tools/tdbread || die "test/security_shm.sh failed"
	say "security: a user in no group takes trafficdb's names in /dev/shm (test/security_names.sh)"
	test/security_names.sh tools/tdbread tools/tdbsub || die "test/security_names.sh failed"
	say "security: OS users in and out of the groups (test/group_mode.sh)"
	test/group_mode.sh examples/live_traffic tools/tdbread || die "test/group_mode.sh failed"
else
	echo "skipped the OS users' attacks: they create OS users, so they run only as root (as CI does)"
fi

say "security: the live map as an unauthenticated web client (test/web_hostile.sh)"
test/web_hostile.sh || die "test/web_hostile.sh failed"
say "security: all attacks refused"
