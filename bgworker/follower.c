/*-------------------------------------------------------------------------
 *
 * follower.c
 *	  The follower's replay: on a hot standby the daemon writes nothing; it
 *	  rebuilds the map and the traffic from the replicated generation log
 *	  and publishes the primary's generations, until the server is
 *	  promoted.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "bgworker/daemon_internal.h"
#include "module/trafficdb.h"

/*
 * On a standby the rows of trafficdb.subscriptions change by replication,
 * where no trigger tells us: look at most once a second whether they did
 * (their count and xmins), and load them again when so.
 */
static bool
follower_subscriptions_changed(bool *deferred)
{
	static int64 checked_at = 0;
	static int64 fingerprint = 0;
	int64		now = now_us();
	int64		fp;
	bool		isnull;

	*deferred = now - checked_at < 1000000;
	if (*deferred)
		return false;
	checked_at = now;
	if (SPI_execute("SELECT pg_catalog.count(*)::pg_catalog.int8 * 1000003 + "
					"COALESCE(pg_catalog.sum(xmin::pg_catalog.text::pg_catalog.int8), 0)::pg_catalog.int8 "
					"FROM trafficdb.subscriptions", true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		return false;
	fp = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_freetuptable(SPI_tuptable);
	if (isnull || fp == fingerprint)
		return false;
	fingerprint = fp;
	return true;
}

/* Records one look applies at most; and whether the last look read the log to its end. */
#define FOLLOW_MAX_RECORDS 1000
static bool caught_up;

/*
 * A follower's cycle (read-only): without a map, rebuild from the newest
 * checkpoint (startup_tx); else apply and publish the generations logged
 * since.  A gap (a map reload on the primary, or this follower fell behind
 * the log's retention) means a rebuild from the newest checkpoint.
 */
static void
follow_tx(void *p)
{
	TdbLogState ls;
	uint64		last;
	uint64		applied = 0;
	uint64		damaged = 0;
	bool		deferred;
	char		err[TDB_ERRMSG_LEN];
	bool		ok;

	(void) p;
	caught_up = false;			/* until this look ends without an error */
	if (!extension_installed())
	{
		caught_up = true;		/* CREATE EXTENSION comes through WAL too */
		return;
	}
	if (!D.have_map)
	{
		MapLoadArg	a;

		memset(&a, 0, sizeof(a));
		startup_tx(&a);
		/* the next look follows the log from there */
		return;
	}
	/* subscriptions: rows replicated from the primary are seen at most a second late */
	if (follower_subscriptions_changed(&deferred))
		D.subs_version = PG_UINT64_MAX;
	refresh_subscriptions();
	if (D.targets_dirty || D.subs_map_id != D.map.hdr->map_id)
		rebuild_subscription_index();
	ls = daemon_log_state();
	ls.changed = D.pend;
	last = D.log_last;
	/*
	 * The incidents' count goes back to D whatever happens: tdb_log_follow
	 * changes D.incidents itself, and an error half-way through a
	 * generation (out of memory) would leave D's count behind them for good
	 * (what reads D.incidents trusts it).
	 */
	PG_TRY();
	{
		ok = tdb_log_follow(&ls, &last, FOLLOW_MAX_RECORDS, follower_publish, &ls, D.cxt, &damaged, &applied, err, sizeof(err));
	}
	PG_FINALLY();
	{
		D.incident_count = ls.incident_count;
	}
	PG_END_TRY();
	/*
	 * A map reload on the primary logs a checkpoint and no D record: with no
	 * D record after it yet, following the D records alone would serve the
	 * old map until one came (and a promotion then would log its next
	 * generation for the old map, under the reload's number).
	 */
	if (ok && applied < FOLLOW_MAX_RECORDS)
	{
		uint64		alone = tdb_log_checkpoint_alone_after(last);

		if (alone > 0)
		{
			ok = false;
			snprintf(err, sizeof(err), "generation " UINT64_FORMAT " is a checkpoint without a D record: a map reload", alone);
		}
	}
	{
		uint64		newest = tdb_log_last_generation();

		SpinLockAcquire(&tdb_shared->mutex);
		tdb_shared->follower_log_max = newest;
		tdb_shared->replay_generations += applied;
		SpinLockRelease(&tdb_shared->mutex);
	}
	/* a deferred look at the subscriptions is a look to make again soon */
	caught_up = ok && applied < FOLLOW_MAX_RECORDS && !deferred;
	if (!ok)
	{
		/* a map reload on the primary, or the log was trimmed past us: start over from its newest checkpoint */
		ereport(LOG,
				(errmsg("trafficdb: follower: the generation log goes on after generation " UINT64_FORMAT
						" with no D record of generation " UINT64_FORMAT " (%s): rebuilding from the newest checkpoint",
						last, last + 1, err)));
		{
			WorkingTraffic w = {D.traffic, D.win_seq, D.incidents, D.incident_count, D.pend, D.pend_bit};

			free_working(&w, D.map.count);
		}
		D.traffic = NULL;
		D.have_map = false;
		SpinLockAcquire(&tdb_shared->mutex);
		tdb_shared->follower_rebuilds++;
		SpinLockRelease(&tdb_shared->mutex);
	}
}

/*
 * How often the follower looks for new generations: every
 * Min(publish_interval, FOLLOW_BUSY_MS) while WAL arrives (or it has more
 * to read), every FOLLOW_IDLE_MS once none has for FOLLOW_BUSY_FOR_MS.  It
 * reads the log only when replay went on since its last look, or that look
 * did not read to the end (an error, FOLLOW_MAX_RECORDS, a rebuild): what
 * it reads (the log, the subscriptions, the extension itself) comes only
 * through WAL.
 */
#define FOLLOW_BUSY_MS		50
#define FOLLOW_IDLE_MS		250
#define FOLLOW_BUSY_FOR_MS	1000

/*
 * Follow the primary while this server is a standby.  Returns once it has
 * been promoted, with the state of the log's newest generation: the daemon
 * then goes on as the primary from the next generation, without a rebuild.
 */
void
follower_loop(void)
{
	XLogRecPtr	looked_at = InvalidXLogRecPtr;	/* replay position of the last look */
	TimestampTz wal_moved = 0;

	follower_mode = true;
	SpinLockAcquire(&tdb_shared->mutex);
	tdb_shared->follower = true;
	SpinLockRelease(&tdb_shared->mutex);
	ereport(LOG, (errmsg("trafficdb: this server is a standby: following the primary's generation log")));
	for (;;)
	{
		char		msg[TDB_ERRMSG_LEN];

		if (ShutdownRequestPending)
			proc_exit(1);
		if (ConfigReloadPending)
			reload_settings();
		if (names_free_again())
		{
			/* subscribers and readers are told; the next daemon follows under the configured names */
			if (D.subring_open && !tdb_writer_guarded(subring_remove_guarded, NULL))
				tdb_subring_close(&D.subring);
			tdb_writer_stop_instance(D.prefix);
			proc_exit(1);
		}
		if (!RecoveryInProgress())
		{
			/* promoted: take what the old primary logged last, then write after it */
			(void) run_in_tx("trafficdb follower", follow_tx, NULL, msg);
			break;
		}
		sweep_subscribers();
		{
			XLogRecPtr	replayed = GetXLogReplayRecPtr(NULL);
			TimestampTz now = GetCurrentTimestamp();

			if (replayed != looked_at)
				wal_moved = now;
			if (replayed != looked_at || !caught_up)
			{
				/* read after replayed: what replay applied up to there is seen */
				if (!run_in_tx("trafficdb follower", follow_tx, NULL, msg))
					caught_up = false;
				looked_at = replayed;
			}
		}
		note_started();
		{
			/* publish() and load_map() are refused on a standby: wake their callers */
			SpinLockAcquire(&tdb_shared->mutex);
			if (tdb_shared->publish_requested > tdb_shared->publish_done)
			{
				tdb_shared->publish_failed = tdb_shared->publish_requested;
				strlcpy(tdb_shared->publish_error, "this server is a standby: the primary publishes", TDB_ERRMSG_LEN);
				tdb_shared->publish_done = tdb_shared->publish_requested;
			}
			SpinLockRelease(&tdb_shared->mutex);
			ConditionVariableBroadcast(&tdb_shared->cv);
		}
		watch_readers();
		tdb_writer_reclaim(&D.writer, D.have_map ? D.map_seg : TDB_MAX_SEGMENTS);
		report_skipped_names();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 caught_up && TimestampDifferenceExceeds(wal_moved, GetCurrentTimestamp(), FOLLOW_BUSY_FOR_MS) ?
						 FOLLOW_IDLE_MS : Min(tdb_publish_interval_ms, FOLLOW_BUSY_MS), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}

	/* promoted: the primary's numbering goes on from here */
	follower_mode = false;
	SpinLockAcquire(&tdb_shared->mutex);
	tdb_shared->follower = false;
	SpinLockRelease(&tdb_shared->mutex);
	if (D.have_map)
	{
		D.need_checkpoint = false;
		D.dirty = false;
		D.unpublished = false;
	}
	ereport(LOG, (errmsg("trafficdb: promoted: publishing as the primary after generation " UINT64_FORMAT, D.generation)));
}
