/*-------------------------------------------------------------------------
 *
 * sweeps.c
 *	  The daemon's sweeps of what others change under it: the pins readers
 *	  hold (late readers and revoked versions reported, damage to the
 *	  external readers' segment reported) and, on private names, whether
 *	  the configured shared memory names are free again.  (The subscribers'
 *	  slots are swept by subscribers.c.)
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "bgworker/daemon_internal.h"
#include "module/trafficdb.h"

/* ---- readers ------------------------------------------------------------------------- */

/*
 * Record what readers pin (for trafficdb.readers), report readers that hold
 * a superseded version too long and versions revoked from them.  Liveness
 * and revocation are the writer's (tdb_writer_scan_external, compute_live):
 * no process ID is trusted here.
 */
void
watch_readers(void)
{
	TimestampTz now = GetCurrentTimestamp();
	uint64		active = atomic_load(&D.writer.ctl->active);
	uint32		nbackend = tdb_shared->nbackend_slots;

	tdb_writer_scan_external(&D.writer);
	for (uint32 s = 0; s < tdb_shared->nslots; s++)
	{
		uint64		pin = 0;
		int32		pid = 0;
		TdbSlotWatch *w = &tdb_shared->slots[s];

		if (s < nbackend)
			pin = atomic_load(&tdb_backend_pins[s].pin);
		else if (s - nbackend < D.writer.nslots && D.writer.ext_alive[s - nbackend])
		{
			pin = D.writer.ext_pin[s - nbackend];
			pid = D.writer.ext_pid[s - nbackend];
		}
		SpinLockAcquire(&tdb_shared->mutex);
		w->pid = pid;

		/*
		 * Pinning the active version holds nothing back (a reader that
		 * re-pins it in a loop shows the same word): the clock starts when
		 * the pinned version stops being the active one.
		 */
		if (pin == 0 || pin == active)
		{
			w->pin = pin;
			w->since = 0;
			w->reported = false;
		}
		else if (pin != w->pin || w->since == 0)
		{
			w->pin = pin;
			w->since = now;
			w->reported = false;
		}
		else if (!w->reported &&
				 TimestampDifferenceExceeds(w->since, now, tdb_reader_pin_timeout_ms))
		{
			w->reported = true;
			SpinLockRelease(&tdb_shared->mutex);
			ereport(LOG,
					(errmsg("trafficdb: %s reader slot %u has held generation " UINT64_FORMAT " since %s",
							s < nbackend ? "backend" : "external", s < nbackend ? s : s - nbackend,
							TDB_ACTIVE_GEN(pin), timestamptz_to_str(w->since)),
					 errdetail("Publication goes on: a version superseded longer than trafficdb.reader_pin_timeout ago is revoked, and its reader gets an error when it next uses it."),
					 errhint("See trafficdb.readers.")));
			continue;
		}
		SpinLockRelease(&tdb_shared->mutex);
	}
	if (D.writer.revoked != D.revoked_reported)
	{
		ereport(LOG,
				(errmsg("trafficdb: revoked " UINT64_FORMAT " version(s) pinned longer than trafficdb.reader_pin_timeout after they were superseded (last: generation " UINT64_FORMAT ")",
						D.writer.revoked - D.revoked_reported, D.writer.last_revoked_generation)));
		D.revoked_reported = D.writer.revoked;
	}
	if (D.writer.slots_rebuilt != D.rebuilt_reported)
	{
		report_damage("the external readers' segment", "readers", D.writer.slots_damage, "trafficdb.shm_group",
					  " and was made anew", "External readers attached before must reopen; their pins were ignored.");
		D.rebuilt_reported = D.writer.slots_rebuilt;
	}
	if (D.writer.slots_repaired != D.repaired_reported)
	{
		report_damage("the external readers' segment", "readers", D.writer.slots_damage, "trafficdb.shm_group",
					  "; its header was repaired", "New external readers were refused until then; readers attached keep their slots.");
		D.repaired_reported = D.writer.slots_repaired;
	}
	SpinLockAcquire(&tdb_shared->mutex);
	tdb_shared->versions_revoked = D.writer.revoked;
	SpinLockRelease(&tdb_shared->mutex);
}

/*
 * On private names (another user held a fixed one): are the configured
 * names free again?  Looked at after NAMES_CHECK_FIRST_MS, then at doubling
 * intervals up to NAMES_CHECK_MAX_MS; true (logged) when they are.
 */
bool
names_free_again(void)
{
	char		why[TDB_SHM_ERRLEN];

	if (!D.private_names || GetCurrentTimestamp() < D.names_check_at)
		return false;
	if (!tdb_shm_prefix_taken(tdb_shm_prefix(), why))
	{
		ereport(LOG,
				(errmsg("trafficdb: the shared memory names under %s are free again: restarting the daemon to publish there",
						tdb_shm_prefix())));
		return true;
	}
	D.names_check_ms = Min(D.names_check_ms * 2, NAMES_CHECK_MAX_MS);
	D.names_check_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), D.names_check_ms);
	return false;
}

/* Log, in one line, the segment names this cycle skipped because another user holds them. */
void
report_skipped_names(void)
{
	if (D.writer.names_skipped == D.skipped_reported)
		return;
	ereport(WARNING,
			(errcode(ERRCODE_OBJECT_IN_USE),
			 errmsg("trafficdb: skipped a name another user holds: %s", D.writer.skipped_err),
			 errdetail("%llu shared memory name(s) under %s were found taken by others and skipped; publication goes on under the next free names.",
					   (unsigned long long) (D.writer.names_skipped - D.skipped_reported), D.prefix),
			 errhint("Nothing needs doing for trafficdb; remove the files as root to tidy /dev/shm.")));
	D.skipped_reported = D.writer.names_skipped;
}
