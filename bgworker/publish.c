/*-------------------------------------------------------------------------
 *
 * publish.c
 *	  Publication and the generation log: inside the cycle's transaction
 *	  the daemon records the generation, writes the traffic object into a
 *	  free buffer and appends the generation's record to the log; once the
 *	  commit is confirmed (by the synchronous standby, if one is required)
 *	  it publishes the object, has the subscriptions matched and the events
 *	  delivered, and sends the NOTIFYs.  A follower publishes the primary's
 *	  generations the same way (follower_publish).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_bitutils.h"
#include "portability/instr_time.h"
#include "postmaster/interrupt.h"
#include "replication/syncrep.h"
#include "replication/walsender.h"
#include "replication/walsender_private.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/pmsignal.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "bgworker/daemon_internal.h"
#include "module/trafficdb.h"

/*
 * The planner's statistics of the map (see TdbShared.map_extent): computed
 * once per map, when it is first published.
 */
static uint64 stats_map_id;
static double stats_extent[4];
static double stats_mean_box[2];
static double stats_arc_slack_m;

static void
compute_map_stats(const TdbMapView *v)
{
	const TdbRtree *t = &v->rtree;
	double		w = 0,
				h = 0;

	if (stats_map_id == v->hdr->map_id)
		return;
	memset(stats_extent, 0, sizeof(stats_extent));
	stats_mean_box[0] = stats_mean_box[1] = 0;
	if (t->nlevels > 0 && v->count > 0)
	{
		const TdbBoxF *root = &t->boxes[t->levels[t->nlevels - 1].first];
		const TdbBoxF *leaf = &t->boxes[t->levels[0].first];

		stats_extent[0] = root->xmin;
		stats_extent[1] = root->ymin;
		stats_extent[2] = root->xmax;
		stats_extent[3] = root->ymax;
		for (uint64 i = 0; i < t->levels[0].count; i++)
		{
			w += (double) leaf[i].xmax - leaf[i].xmin;
			h += (double) leaf[i].ymax - leaf[i].ymin;
		}
		stats_mean_box[0] = w / t->levels[0].count;
		stats_mean_box[1] = h / t->levels[0].count;
	}
	/* for nearest-first scans in metres: once here, not in every backend */
	stats_arc_slack_m = tdb_map_arc_slack_m(v);
	stats_map_id = v->hdr->map_id;
}

/* ---- publishing ------------------------------------------------------------------- */

/*
 * Write the working traffic, as generation gen made at created_us, into a
 * free buffer (not published yet: that waits for the commit).  touched
 * lists the records changed since the previous write (NULL: not known).
 * Returns the object's checksum, which its log record carries.
 */
static uint32
prepare_traffic(uint64 gen, int64 created_us, const uint32 *touched, uint64 ntouched)
{
	uint32		seg;
	Size		bytes;
	uint64		entries;
	uint32		crc = write_traffic_object(gen, created_us, touched, ntouched, &seg, &bytes, &entries);

	D.pub.ready = true;
	D.pub.gen = gen;
	D.pub.seg = seg;
	D.pub.created_us = created_us;
	D.pub.traffic_bytes = bytes;
	D.pub.entries = entries;
	D.pub.checkpoint = false;
	D.pub.log_first = 0;
	D.pub.log_bytes = 0;
	D.pub.logged = 0;
	return crc;
}

TdbLogState
daemon_log_state(void)
{
	TdbLogState s = {D.map.hdr->map_id, D.map.count, D.traffic, D.incidents, D.incident_count, NULL, NULL, 0, NULL};

	return s;
}

/*
 * Sort the records changed in this generation (D.pend), for the log record
 * and for the object's write, which then walk memory in order: from the
 * bitmap when they are many (a scan of count / 8 bytes), by a two-pass
 * radix sort on 16 bits when they are more than a few hundred, else qsort.
 */
static void
sort_pending(void)
{
	static uint32 counts[65536];

	if (D.npend <= 1)
		return;
	if (D.npend > D.map.count / 32)
	{
		uint64		k = 0;

		for (uint64 byte = 0; byte < D.map.count / 8 + 1; byte++)
			for (uint8 bits = D.pend_bit[byte]; bits != 0; bits &= (uint8) (bits - 1))
				D.pend[k++] = (uint32) (byte * 8 + pg_rightmost_one_pos32(bits));
		Assert(k == D.npend);
	}
	else if (D.npend > 512)
	{
		uint32	   *tmp = palloc_extended(D.npend * sizeof(uint32), MCXT_ALLOC_HUGE);
		uint32	   *from = D.pend,
				   *to = tmp;

		for (int shift = 0; shift < 32; shift += 16)
		{
			uint32		sum = 0;

			memset(counts, 0, sizeof(counts));
			for (uint64 k = 0; k < D.npend; k++)
				counts[(from[k] >> shift) & 0xFFFF]++;
			for (uint32 d = 0; d < 65536; d++)
			{
				uint32		c = counts[d];

				counts[d] = sum;
				sum += c;
			}
			for (uint64 k = 0; k < D.npend; k++)
				to[counts[(from[k] >> shift) & 0xFFFF]++] = from[k];
			from = to;
			to = from == tmp ? D.pend : tmp;
		}
		/* two passes: the result is back in D.pend */
		Assert(from == D.pend);
		pfree(tmp);
	}
	else
		qsort(D.pend, D.npend, sizeof(uint32), cmp_uint32);
}

/*
 * Append generation gen to the log, in the transaction that publishes it:
 * its D record (the entries changed since the last committed record), and a
 * checkpoint when one is due, when the map changed or when the log does not
 * end at gen - 1.
 */
static void
log_generation(uint64 gen, int64 created_us, uint32 object_crc)
{
	TdbLogState ls = daemon_log_state();
	bool		delta = !(D.need_checkpoint || D.log_last == 0 || D.log_last + 1 != gen);
	bool		ckpt = !delta ||
		(gen - D.ckpt_gen >= (uint64) tdb_checkpoint_interval &&
		 (double) (D.logged_since_ckpt + D.npend) >= tdb_checkpoint_min_changed * (double) D.map.count) ||
		TimestampDifferenceExceeds(D.ckpt_at, GetCurrentTimestamp(), tdb_checkpoint_timeout_s * 1000);
	Size		bytes = 0;

	/* a checkpoint may start a segment: its generation's D record goes there too */
	if (ckpt)
		tdb_log_next_segment(gen, tdb_log_retention_s, tdb_log_retention_generations);
	if (delta)
	{
		/* D.pend is sorted (prepare_generation) */
		bytes += tdb_log_write_delta(gen, created_us, object_crc, &ls, D.pend, D.npend);
		D.pub.logged = D.npend;
	}
	if (ckpt)
	{
		uint64	   *ids = MemoryContextAllocHuge(CurrentMemoryContext, Max(ls.count, 1) * sizeof(uint64));

		for (uint64 i = 0; i < ls.count; i++)
			ids[i] = D.map.records[i].id;
		ls.ids = ids;
		if (D.need_checkpoint)
			D.mapinfo.map_generation = gen;
		bytes += tdb_log_write_checkpoint(gen, created_us, object_crc, &ls, &D.mapinfo,
										  (uint64) tdb_checkpoint_part_entries);
		pfree(ids);
		/* keep the previous checkpoint too: replay falls back to it if this one is damaged */
		D.pub.log_first = tdb_log_trim(gen, D.ckpt_gen ? D.ckpt_gen : gen, tdb_log_retention_s,
									   tdb_log_retention_generations,
									   tdb_log_trim_method == TDB_LOG_TRIM_DELETE);
		D.pub.checkpoint = true;
	}
	D.pub.log_bytes = bytes;
}

/* What trafficdb.status says of a publication of gen (the caller holds the mutex). */
static void
note_published(uint64 gen)
{
	tdb_shared->generation = gen;
	tdb_shared->map_id = D.map.hdr->map_id;
	tdb_shared->locations = D.map.count;
	tdb_shared->map_region = D.region;
	pg_atomic_write_u32(&tdb_shared->map_regional, NameStr(D.region)[0] != '\0');
	memcpy(tdb_shared->map_extent, stats_extent, sizeof(stats_extent));
	memcpy(tdb_shared->map_mean_box, stats_mean_box, sizeof(stats_mean_box));
	tdb_shared->map_arc_slack_m = stats_arc_slack_m;
	tdb_shared->map_bytes = D.map.hdr->total_size;
	tdb_shared->traffic_bytes = D.pub.traffic_bytes;
	tdb_shared->last_publish_entries = D.pub.entries;
	tdb_shared->shm_bytes = tdb_writer_bytes(&D.writer);
	tdb_shared->shm_huge_bytes = tdb_writer_huge_bytes(&D.writer);
	tdb_shared->last_publish_at = GetCurrentTimestamp();
	tdb_shared->publishes++;
}

/*
 * After the commit of the transaction that logged D.pub.gen: it is durable,
 * so readers may have it.  Nothing here can fail but the publication itself
 * (every version pinned): the generation then stays committed and the next
 * cycle publishes the one after it, which contains it.
 */
static bool told_unconfirmed;	/* the stop's unconfirmed commits were logged */

static void
finish_publication(void)
{
	instr_time	start,
				dur;
	uint64		gen = D.pub.gen;
	int			rc;
	bool		prev_unpublished = D.unpublished;

	if (!D.pub.ready)
		return;
	D.pub.ready = false;
	INSTR_TIME_SET_CURRENT(start);

	/* the log's bookkeeping */
	D.generation = gen;
	D.log_last = gen;
	D.logged_since_ckpt += D.pub.logged;
	if (D.pub.checkpoint)
	{
		D.logged_since_ckpt = 0;
		D.ckpt_gen = gen;
		D.ckpt_at = GetCurrentTimestamp();
		D.need_checkpoint = false;
		D.log_first = D.pub.log_first;
	}
	if (D.log_first == 0)
		D.log_first = gen;
	/* the pending list stays until the matching below (it names what changed) */
	D.dirty = false;

	/* TRAFFICDB_SYNC writers of what this generation holds may return */
	if (!commit_unconfirmed)
		ring_committed(gen);
	else if (!told_unconfirmed)
	{
		/* once: a stop may commit a generation per writers' batch still queued */
		told_unconfirmed = true;
		ereport(LOG,
				(errmsg("trafficdb: generation " UINT64_FORMAT " committed while stopping, without waiting for the synchronous standby; TRAFFICDB_SYNC writers are told the server stopped",
						gen)));
	}
	/* how far back changes_since answers, for readers outside the server too */
	atomic_store(&D.writer.ctl->changes_from,
				 D.mapinfo.replaced ? Max(D.log_first, D.mapinfo.map_generation + 1) : D.log_first);
	D.pub.published_us = now_us();
	rc = tdb_writer_publish(&D.writer, gen, D.map.hdr->map_id, D.map_seg, D.pub.seg, D.pub.published_us);
	if (rc == TDB_SHM_ENOSLOT)
	{
		snprintf(D.refusal, sizeof(D.refusal),
				 "generation " UINT64_FORMAT " not published: readers pin all %d versions, each superseded less than trafficdb.reader_pin_timeout (%d ms) ago",
				 gen, TDB_MAX_VERSIONS, tdb_reader_pin_timeout_ms);
		SpinLockAcquire(&tdb_shared->mutex);
		tdb_shared->publishes_refused++;
		strlcpy(tdb_shared->last_error, D.refusal, TDB_ERRMSG_LEN);
		tdb_shared->last_error_at = GetCurrentTimestamp();
		SpinLockRelease(&tdb_shared->mutex);
		ereport(WARNING,
				(errmsg("trafficdb: %s", D.refusal),
				 errhint("See trafficdb.readers for the readers holding old versions; publication resumes when they release them or their pins time out.")));
		D.unpublished = true;
		/* its events are never made: subscribers are told at the next delivery */
		if (D.sub_gap_from == 0 && D.ntargets + D.ntaps > 0)
			D.sub_gap_from = gen;
		owe_notifications(gen);
		D.nev = 0;
	}
	else
	{
		D.unpublished = false;

		/*
		 * Published (and durable) first; then the subscriptions are matched
		 * within trafficdb.match_budget_ms and the events delivered.  The
		 * previous object is still mapped until the reclaim: the events'
		 * old values.
		 */
		match_subscriptions(prev_unpublished);
		deliver_events();
		D.last_pub_seg = D.pub.seg;
		D.last_pub_map_id = D.map.hdr->map_id;
		tdb_writer_reclaim(&D.writer, D.map_seg);
	}
	for (uint64 k = 0; k < D.npend; k++)
		D.pend_bit[D.pend[k] >> 3] = 0;
	D.npend = 0;
	/* LISTEN trafficdb_publish and notify subscriptions: after the publication, never failing it */
	if (!D.unpublished)
		send_notifications(gen);

	compute_map_stats(&D.map);
	INSTR_TIME_SET_CURRENT(dur);
	INSTR_TIME_SUBTRACT(dur, start);
	SpinLockAcquire(&tdb_shared->mutex);
	if (!D.unpublished)
	{
		note_published(gen);
		tdb_shared->last_publish_ms = INSTR_TIME_GET_MILLISEC(dur);
	}
	tdb_shared->log_first = D.log_first;
	tdb_shared->log_checkpoint = D.ckpt_gen;
	tdb_shared->map_generation = D.mapinfo.map_generation;
	tdb_shared->changes_from = D.mapinfo.replaced ? Max(D.log_first, D.mapinfo.map_generation + 1) : D.log_first;
	tdb_shared->last_log_bytes = D.pub.log_bytes;
	tdb_shared->log_damaged_at = 0;
	SpinLockRelease(&tdb_shared->mutex);
	ConditionVariableBroadcast(&tdb_shared->cv);
}

/*
 * Everything a publication does inside its transaction: record the
 * generation, write the object, append the log.  The publication itself
 * follows the commit (finish_publication), and then the matching of the
 * subscriptions and the NOTIFYs (send_notifications, in a transaction of
 * their own: a full NOTIFY queue never fails a generation).
 */
static void record_generation(uint64 gen);

void
prepare_generation(uint64 gen)
{
	int64		created_us = now_us();
	uint32		crc;

	record_generation(gen);
	sort_pending();
	crc = prepare_traffic(gen, created_us, D.pend, D.npend);
	log_generation(gen, created_us, crc);
}

/*
 * Does trafficdb.daemon_state have log_end?  Not in a database whose
 * extension was created by a build before it (the same version 0.1.0): the
 * daemon then works without the check rather than not at all.
 */
bool
have_log_end(void)
{
	static bool known = false;
	static bool have = false;

	if (!known)
	{
		have = SPI_execute("SELECT 1 FROM pg_catalog.pg_attribute WHERE attrelid = 'trafficdb.daemon_state'::pg_catalog.regclass "
						   "AND attname = 'log_end' AND NOT attisdropped", true, 1) == SPI_OK_SELECT && SPI_processed == 1;
		known = true;
		if (!have)
			ereport(LOG,
					(errmsg("trafficdb: trafficdb.daemon_state has no column log_end: a generation log whose newest records were deleted is not detected"),
					 errhint("DROP EXTENSION trafficdb and CREATE EXTENSION trafficdb with this build (pg_dump the tables first).")));
	}
	return have;
}

static void
record_generation(uint64 gen)
{
	static SPIPlanPtr plans[2];
	Datum		arg = Int64GetDatum((int64) gen);
	Oid			type = INT8OID;
	int			k = have_log_end() ? 1 : 0;

	/* planned once for the daemon's life: a row a generation */
	if (plans[k] == NULL)
	{
		/* with log_end: gen is logged in this transaction; a start whose replay ends before it lost records */
		SPIPlanPtr	plan = SPI_prepare(k == 0 ?
									   "INSERT INTO trafficdb.daemon_state AS d (singleton, generation, published_at) "
									   "VALUES (true, $1, pg_catalog.now()) ON CONFLICT (singleton) DO UPDATE "
									   "SET generation = excluded.generation, published_at = excluded.published_at" :
									   "INSERT INTO trafficdb.daemon_state AS d (singleton, generation, published_at, log_end) "
									   "VALUES (true, $1, pg_catalog.now(), $1) ON CONFLICT (singleton) DO UPDATE "
									   "SET generation = excluded.generation, published_at = excluded.published_at, "
									   "log_end = excluded.log_end",
									   1, &type);

		if (plan == NULL || SPI_keepplan(plan) != 0)
			elog(ERROR, "could not plan the update of trafficdb.daemon_state: %s",
				 SPI_result_code_string(SPI_result));
		plans[k] = plan;
	}
	if (SPI_execute_plan(plans[k], &arg, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not update trafficdb.daemon_state");
}

void
follower_publish(void *arg, uint64 gen, int64 created_us, bool has_crc, uint32 object_crc)
{
	TdbLogState *s = arg;
	uint32		crc;
	int			rc;
	bool		prev_unpublished = D.unpublished;

	/* set_entry only ever zeroes an incident offset: D.offsets_zero stays true */
	D.incident_count = s->incident_count;
	crc = prepare_traffic(gen, created_us, s->changed, s->changed != NULL ? s->nchanged : 0);
	D.pub.ready = false;
	if (has_crc && crc != object_crc)
	{
		SpinLockAcquire(&tdb_shared->mutex);
		tdb_shared->replay_mismatches++;
		SpinLockRelease(&tdb_shared->mutex);
		ereport(WARNING,
				(errmsg("trafficdb: follower: generation " UINT64_FORMAT " is not byte-identical to the primary's "
						"(object checksum %08x, recorded %08x)", gen, crc, object_crc)));
	}
	rc = tdb_writer_publish(&D.writer, gen, D.map.hdr->map_id, D.map_seg, D.pub.seg, now_us());
	D.generation = gen;
	D.log_last = gen;
	if (rc == TDB_SHM_ENOSLOT)
	{
		/* readers pin every version: the next generation carries this one */
		SpinLockAcquire(&tdb_shared->mutex);
		tdb_shared->publishes_refused++;
		SpinLockRelease(&tdb_shared->mutex);
		D.unpublished = true;	/* its events are not delivered: the next gives an overrun */
		if (D.sub_gap_from == 0 && D.ntargets + D.ntaps > 0)
			D.sub_gap_from = gen;
		D.nev = 0;
		return;
	}
	D.unpublished = false;

	/*
	 * The subscriptions' events of this generation (its changed records, as
	 * on the primary), matched once it is published, within the budget.
	 * The previous object is still mapped until the reclaim: the events'
	 * old values.
	 */
	D.npend = s->changed != NULL ? s->nchanged : 0;
	match_subscriptions(prev_unpublished);
	D.npend = 0;
	deliver_events();
	D.last_pub_seg = D.pub.seg;
	D.last_pub_map_id = D.map.hdr->map_id;
	tdb_writer_reclaim(&D.writer, D.map_seg);
	compute_map_stats(&D.map);
	SpinLockAcquire(&tdb_shared->mutex);
	note_published(gen);
	tdb_shared->follower_applied_at_us = created_us;
	SpinLockRelease(&tdb_shared->mutex);
	ConditionVariableBroadcast(&tdb_shared->cv);
}

/* Has the synchronous standby (if one is required) flushed WAL up to lsn? */
static bool
standby_has(XLogRecPtr lsn)
{
	bool		has;
	/* what a commit waits for at this synchronous_commit (as SyncRepWaitForLSN does) */
	int			mode = synchronous_commit == SYNCHRONOUS_COMMIT_REMOTE_WRITE ? SYNC_REP_WAIT_WRITE :
		synchronous_commit == SYNCHRONOUS_COMMIT_REMOTE_APPLY ? SYNC_REP_WAIT_APPLY : SYNC_REP_WAIT_FLUSH;

	if (!SyncRepRequested())
		return true;
	LWLockAcquire(SyncRepLock, LW_SHARED);
#ifdef SYNC_STANDBY_DEFINED
	/* 15.13 and later: a status word */
	has = !(WalSndCtl->sync_standbys_status & SYNC_STANDBY_DEFINED) || lsn <= WalSndCtl->lsn[mode];
#else
	has = !WalSndCtl->sync_standbys_defined || lsn <= WalSndCtl->lsn[mode];
#endif
	LWLockRelease(SyncRepLock);
	return has;
}

/*
 * After a commit: is it confirmed by the synchronous standby, as a commit
 * with synchronous_commit = on must be before anyone is told?  PostgreSQL
 * ends a commit's wait for the standby early when the postmaster dies (or on
 * a cancel): the transaction is then committed here but maybe not on the
 * standby, which a failover promotes (pg_auto_failover).  Publishing its
 * generation would show readers of this server one the new primary never
 * had, and tell TRAFFICDB_SYNC writers that their updates committed when a
 * failover loses them.  After a cancel, wait again; after the postmaster's
 * death, false: nothing may be published.  While the server stops (a stop
 * request cut the wait short, see daemon_sigterm), true without waiting:
 * this server's readers may see the generation, but TRAFFICDB_SYNC writers
 * are not told it committed (commit_unconfirmed).
 */
static bool
commit_confirmed(void)
{
	for (;;)
	{
		if (ProcDiePending || !PostmasterIsAlive())
			return false;
		if (standby_has(XactLastCommitEnd))
			return true;
		if (ShutdownRequestPending)
		{
			/* not confirmed: TRAFFICDB_SYNC writers must not be told it committed */
			commit_unconfirmed = true;
			return true;
		}
		/* a stop request cancels this wait too (daemon_sigterm) */
		in_commit = true;
		if (ShutdownRequestPending)
			QueryCancelPending = true;
		SyncRepWaitForLSN(XactLastCommitEnd, true);
		in_commit = false;
		if (ShutdownRequestPending)
			QueryCancelPending = false;
	}
}

bool
run_in_tx(const char *what, TxFn fn, void *arg, char *errbuf)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	volatile bool ok = true;

	begin_tx(what);
	PG_TRY();
	{
		fn(arg);
		commit_tx();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		ok = false;
		if (errbuf)
			snprintf(errbuf, TDB_ERRMSG_LEN, "%s%s%s%s%s", edata->message,
					 edata->detail ? "\nDETAIL:  " : "", edata->detail ? edata->detail : "",
					 edata->hint ? "\nHINT:  " : "", edata->hint ? edata->hint : "");
		ereport(LOG, (errmsg("trafficdb: %s failed: %s", what, edata->message)));
		set_last_error(edata->message);
		FreeErrorData(edata);
		pgstat_report_activity(STATE_IDLE, NULL);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	if (ok && D.pub.ready && !commit_confirmed())
	{
		/* the postmaster is gone: so is this server; readers keep what was confirmed */
		ereport(LOG,
				(errmsg("trafficdb: generation " UINT64_FORMAT " not published: the postmaster died before the synchronous standby confirmed its commit",
						D.pub.gen)));
		proc_exit(1);
	}
	/* publish what committed; what did not is dropped (its changes stay pending) */
	if (ok)
		finish_publication();
	D.pub.ready = false;
	return ok;
}
