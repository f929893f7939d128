/*-------------------------------------------------------------------------
 *
 * matching.c
 *	  Subscription matching: the daemon loads trafficdb.subscriptions and
 *	  indexes them, with one filter per external target, for the current
 *	  map; matches each published generation's changes against them within
 *	  trafficdb.match_budget_ms (the events external subscribers get:
 *	  subscribers.c), and sends the NOTIFYs of the generation.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/async.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "bgworker/daemon_internal.h"
#include "module/subscriptions.h"
#include "module/trafficdb.h"

#define NOTIFY_CHANNEL "trafficdb_publish"

/*
 * Load trafficdb.subscriptions and index them for the current map, when they
 * changed (a committed change bumps tdb_shared->subs_version) or the map
 * did.  In a subtransaction: a row that cannot be read (they are checked
 * when written) leaves the previous set in force and never stops
 * publication.  Ids a reloaded map lacks are dropped from their filter, and
 * a filter left with none is skipped, with a LOG line.
 */
void
refresh_subscriptions(void)
{
	uint64		version = pg_atomic_read_u64(&tdb_shared->subs_version);
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	MemoryContext cxt;
	TdbSubFilter *volatile subs = NULL;
	bool	   *volatile notify = NULL;
	char	  **volatile channel = NULL;
	volatile uint32 n = 0;

	if (!D.have_map || (version == D.subs_version && D.sql_map_id == D.map.hdr->map_id))
		return;
	cxt = AllocSetContextCreate(D.cxt, "trafficdb subscriptions", ALLOCSET_DEFAULT_SIZES);
	BeginInternalSubTransaction(NULL);
	PG_TRY();
	{
		TupleDesc	td;

		if (SPI_execute("SELECT * FROM trafficdb.subscriptions ORDER BY id", true, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not read trafficdb.subscriptions");
		td = SPI_tuptable->tupdesc;
		subs = MemoryContextAllocHuge(cxt, sizeof(TdbSubFilter) * Max(SPI_processed, 1));
		notify = MemoryContextAllocHuge(cxt, sizeof(bool) * Max(SPI_processed, 1));
		channel = MemoryContextAllocHuge(cxt, sizeof(char *) * Max(SPI_processed, 1));
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			TdbSubFilter *f = &subs[n];
			bool		isnull;

			tdb_subscription_filter(td, SPI_tuptable->vals[r], f, cxt);
			notify[n] = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[r], td, SPI_fnumber(td, "notify"), &isnull)) && !isnull;
			channel[n] = NULL;
			if (notify[n])
			{
				/* the key is checked at INSERT (hex, 24 characters): the channel fits NAMEDATALEN */
				char	   *key = SPI_getvalue(SPI_tuptable->vals[r], td, SPI_fnumber(td, "notify_key"));

				channel[n] = MemoryContextStrdup(cxt, psprintf("trafficdb_subscription_%u_%.24s", f->id, key ? key : ""));
			}
			if (f->area == TDB_SUB_IDS)
			{
				uint32		kept = 0;
				uint64	   *ids = (uint64 *) f->ids;

				for (uint32 i = 0; i < f->nids; i++)
					if (tdb_map_find(&D.map, ids[i]) >= 0)
						ids[kept++] = ids[i];
				if (kept < f->nids)
					ereport(LOG,
							(errmsg("trafficdb: subscription %u: %u of its %u location ids are not in the map%s",
									f->id, f->nids - kept, f->nids, kept == 0 ? "; it gets no events" : "")));
				f->nids = kept;
				if (kept == 0)
					continue;
			}
			n++;
		}
		SPI_freetuptable(SPI_tuptable);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
		ereport(LOG,
				(errmsg("trafficdb: could not load the subscriptions, the previous ones stay in force: %s", edata->message)));
		FreeErrorData(edata);
		MemoryContextDelete(cxt);
		D.subs_version = version;	/* tried: again at the next change */
		D.sql_map_id = D.map.hdr->map_id;
		return;
	}
	PG_END_TRY();

	{
		/* what NOTIFYs owe their subscriptions carries over, by id (both in id order) */
		uint64	   *owed = MemoryContextAllocHuge(cxt, sizeof(uint64) * Max(n, 1));
		uint32		o = 0;

		for (uint32 i = 0; i < n; i++)
		{
			owed[i] = 0;
			while (o < D.nsql && D.sql_subs[o].id < subs[i].id)
				o++;
			if (o < D.nsql && D.sql_subs[o].id == subs[i].id && D.sql_owed_from != NULL)
				owed[i] = D.sql_owed_from[o];
		}
		D.sql_owed_from = owed;
	}
	if (D.subs_cxt)
		MemoryContextDelete(D.subs_cxt);
	D.subs_cxt = cxt;
	D.sql_subs = subs;
	D.sql_notify = notify;
	D.sql_channel = channel;
	D.nsql = n;
	D.subs_version = version;
	D.sql_map_id = D.map.hdr->map_id;
	D.sql_loaded++;
	D.subs_map_id = 0;			/* index again */
	rebuild_subscription_index();
}

/*
 * The matcher's filters (the SQL subscriptions, then one per external
 * target) and their index for the current map.  A filter the map cannot
 * index (an external subscriber's id the map lacks) is dropped from the
 * set, with a LOG line, rather than failing the rest.
 */
void
rebuild_subscription_index(void)
{
	uint32		nslots = D.subring_open ? D.subring.nslots : 0;
	uint32		n = 0;
	TdbSubFilter *all;
	TdbSubIndex ix;
	char		err[TDB_ERRLEN];
	bool	   *skip;
	bool	   *left_out;
	uint64		max_pairs;
	MemoryContext old = MemoryContextSwitchTo(D.cxt);

	if (!D.have_map)
	{
		MemoryContextSwitchTo(old);
		return;
	}
	/* targets: each live slot outside a group, and each group once (its lowest slot that takes events) */
	if (D.target_first == NULL && nslots > 0)
	{
		D.target_first = palloc0(sizeof(int32) * nslots);
		D.target_rr = palloc0(sizeof(uint32) * nslots);
		D.tap_first = palloc0(sizeof(int32) * nslots);
		D.tap_rr = palloc0(sizeof(uint32) * nslots);
	}
	D.ntargets = 0;
	D.ntaps = 0;
	for (uint32 sl = 0; sl < nslots; sl++)
	{
		bool		first = takes_events(sl);

		for (uint32 o = 0; first && D.slot_group[sl] != 0 && o < sl; o++)
			if (takes_events(o) && D.slot_group[o] == D.slot_group[sl])
				first = false;
		if (!first)
			continue;			/* a later member, or no events (requests only) */
		if (D.slot_filter[sl].area == TDB_SUB_ALL_SQL)
		{
			D.tap_rr[D.ntaps] = 0;
			D.tap_first[D.ntaps++] = (int32) sl;
			continue;
		}
		/* the filter must index: an id the map lacks drops the target */
		if (tdb_sub_index_build(&D.map, &D.slot_filter[sl], 1, &ix, err) != TDB_OBJ_OK)
		{
			ereport(LOG, (errmsg("trafficdb: subscriber slot %u gets no events: %s", sl, err)));
			continue;
		}
		tdb_sub_index_free(&ix);
		D.target_rr[D.ntargets] = 0;
		D.target_first[D.ntargets++] = (int32) sl;
	}
	all = MemoryContextAllocHuge(D.cxt, sizeof(TdbSubFilter) * Max(D.nsql + D.ntargets, 1));
	if (D.nsql > 0)
		memcpy(all, D.sql_subs, sizeof(TdbSubFilter) * D.nsql);
	n = D.nsql;
	for (uint32 t = 0; t < D.ntargets; t++)
	{
		all[n] = D.slot_filter[D.target_first[t]];
		all[n].id = 0x80000000u | (uint32) D.target_first[t];	/* an external subscriber: its slot */
		n++;
	}

	/*
	 * Only what someone receives is matched: an SQL subscription's events
	 * go to taps (every SQL subscription) and to its NOTIFY (not on a
	 * standby); a session reading it with subscription_events is a target
	 * of its own.  Two indexes over the filters of all, each of at most
	 * trafficdb.subscription_index_mb: the SQL rows' (made again only when
	 * the rows, the map or the presence of taps change, so that subscribers
	 * coming and going never make the daemon sort it again) and the
	 * targets'.  What does not fit gets no events, counted and logged.
	 */
	skip = MemoryContextAllocHuge(D.cxt, sizeof(bool) * Max(n, 1));
	max_pairs = (uint64) tdb_subscription_index_mb * 1024 * 1024 / (sizeof(uint64) + sizeof(uint32));
	if (D.sqlix_loaded != D.sql_loaded || D.sqlix_map_id != D.map.hdr->map_id || D.sqlix_taps != (D.ntaps > 0) ||
		D.sql_left_out == NULL)
	{
		left_out = MemoryContextAllocHuge(D.cxt, sizeof(bool) * Max(n, 1));
		for (uint32 i = 0; i < n; i++)
			skip[i] = i >= D.nsql || (D.ntaps == 0 && (follower_mode || !D.sql_notify[i]));
		if (tdb_sub_index_build_limited(&D.map, all, n, NULL, skip, max_pairs, left_out, &ix, err) != TDB_OBJ_OK)
		{
			ereport(LOG, (errmsg("trafficdb: could not index the subscriptions, none get events: %s", err)));
			memset(&ix, 0, sizeof(ix));
			memset(left_out, 0, sizeof(bool) * Max(n, 1));
		}
		else if (ix.nleft_out > 0)
		{
			uint32		first = 0;

			while (first < n && !left_out[first])
				first++;
			ereport(LOG,
					(errmsg("trafficdb: %u of %u subscriptions get no events: their index would take more than trafficdb.subscription_index_mb (%d MB, " UINT64_FORMAT " location pairs)",
							ix.nleft_out, D.nsql, tdb_subscription_index_mb, max_pairs),
					 errdetail("The first left out is subscription %u; trafficdb.status counts them (subscriptions_unindexed).",
							   first < n ? all[first].id : 0),
					 errhint("Raise trafficdb.subscription_index_mb, or make subscriptions cover fewer locations.")));
		}
		tdb_sub_index_free(&D.subix);
		D.subix = ix;
		if (D.sql_left_out)
			pfree(D.sql_left_out);
		D.sql_left_out = left_out;
		if (D.sql_left_told)
			pfree(D.sql_left_told);
		D.sql_left_told = MemoryContextAllocHuge(D.cxt, sizeof(bool) * Max(n, 1));
		memset(D.sql_left_told, 0, sizeof(bool) * Max(n, 1));
		D.sqlix_loaded = D.sql_loaded;
		D.sqlix_map_id = D.map.hdr->map_id;
		D.sqlix_taps = D.ntaps > 0;
	}
	for (uint32 i = 0; i < n; i++)
		skip[i] = i < D.nsql;
	left_out = MemoryContextAllocHuge(D.cxt, sizeof(bool) * Max(n, 1));
	if (tdb_sub_index_build_limited(&D.map, all, n, NULL, skip, max_pairs, left_out, &ix, err) != TDB_OBJ_OK)
	{
		ereport(LOG, (errmsg("trafficdb: could not index the subscribers, none get events: %s", err)));
		memset(&ix, 0, sizeof(ix));
	}
	else if (ix.nleft_out > 0)
		ereport(LOG,
				(errmsg("trafficdb: %u of %u subscribers get no events: their index would take more than trafficdb.subscription_index_mb (%d MB, " UINT64_FORMAT " location pairs)",
						ix.nleft_out, D.ntargets, tdb_subscription_index_mb, max_pairs),
				 errhint("Raise trafficdb.subscription_index_mb, or subscribe to smaller areas.")));
	pfree(left_out);
	pfree(skip);
	tdb_sub_index_free(&D.tix);
	D.tix = ix;
	if (D.subs)
		pfree(D.subs);
	if (D.subs_events)
		pfree(D.subs_events);
	D.subs = all;
	D.subs_events = MemoryContextAllocHuge(D.cxt, sizeof(uint32) * Max(n, 1));
	memset(D.subs_events, 0, sizeof(uint32) * Max(n, 1));
	D.nsubs = n;
	D.subs_map_id = D.map.hdr->map_id;
	D.targets_dirty = false;
	MemoryContextSwitchTo(old);
	SpinLockAcquire(&tdb_shared->mutex);
	tdb_shared->subscriptions = D.nsql;
	tdb_shared->subscribers = D.ntargets + D.ntaps;
	tdb_shared->subscriptions_unindexed = D.subix.nleft_out + D.tix.nleft_out;
	SpinLockRelease(&tdb_shared->mutex);
}

static int
count_event(uint32 filter, uint64 record, uint16 kind, void *arg)
{
	(void) arg;
	D.subs_events[filter]++;
	if (filter >= D.nsql || D.ntaps > 0)
	{
		/* an external target's: kept for delivery (right after the matching) */
		if (D.nev == D.evcap)
		{
			uint64		cap = D.evcap ? D.evcap * 2 : 4096;
			void	   *ev = D.ev ? repalloc_extended(D.ev, sizeof(PendingEvent) * cap, MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM)
				: MemoryContextAllocExtended(D.cxt, sizeof(PendingEvent) * cap, MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);

			if (ev == NULL)
				return 1;		/* no memory for more: the rest is dropped as over budget */
			D.ev = ev;
			D.evcap = cap;
		}
		D.ev[D.nev++] = (PendingEvent) {filter, (uint32) record, kind};
	}
	return 0;
}

/* Notify subscriptions whose owners must learn that gen's events were not all made. */
void
owe_notifications(uint64 gen)
{
	for (uint32 i = 0; i < D.nsql && !follower_mode; i++)
		if (D.sql_notify[i] && D.sql_owed_from[i] == 0)
			D.sql_owed_from[i] = gen;
}

/*
 * Match the subscriptions against what the generation just published
 * changed (after its publication: readers never wait for this): the records
 * of the pend list, between the traffic object of the previous publication
 * (still mapped until the reclaim) and the new one.  Within
 * trafficdb.match_budget_ms: records not matched in time are skipped;
 * every subscriber then gets an overrun event naming the generation (resync
 * with changes_since), notify subscriptions say overrun in their next
 * payload, and trafficdb.status counts it (match_overruns,
 * match_records_skipped).  After a refused publication or a map change
 * there is no previous object to compare with: no events then, told the
 * same way.
 */
void
match_subscriptions(bool prev_unpublished)
{
	instr_time	start,
				now;
	int64		events = 0;
	uint64		c = 0;
	bool		stopped = false;
	double		budget_ms = tdb_match_budget_ms;
	const TdbTraffic *oldt,
			   *newt;

	D.nev = 0;
	if (D.nsubs > 0)
		memset(D.subs_events, 0, sizeof(uint32) * D.nsubs);
	if (D.nsubs == 0)
		return;
	if (D.subs_map_id != D.map.hdr->map_id || D.last_pub_map_id != D.map.hdr->map_id || prev_unpublished)
	{
		/*
		 * No previous object of this map to compare with (a map reload, or
		 * a refused publication): this generation's events cannot be made.
		 * Subscribers are told, never left to guess: an overrun event at
		 * the delivery names it as the one to resync from.
		 */
		if (D.sub_gap_from == 0 && D.ntargets + D.ntaps > 0)
			D.sub_gap_from = D.pub.gen;
		owe_notifications(D.pub.gen);
		return;
	}
	if (D.subix.npairs == 0 && D.tix.npairs == 0)
		return;					/* nothing anyone receives covers any location */
	INSTR_TIME_SET_CURRENT(start);
	oldt = tdb_traffic_entries(D.writer.seg_addr[D.last_pub_seg]);
	newt = tdb_traffic_entries(D.writer.seg_addr[D.pub.seg]);
	while (c < D.npend)
	{
		/* a slice of about 64 K (location, subscription) pairs, then a look at the clock */
		uint64		end = c;
		uint64		pairs = 0;
		int64		got;

		while (end < D.npend && pairs < 65536)
		{
			uint64		r = D.pend[end++];

			if (r < D.subix.nrecords)
				pairs += D.subix.start[r + 1] - D.subix.start[r];
			if (r < D.tix.nrecords)
				pairs += D.tix.start[r + 1] - D.tix.start[r];
		}
		got = D.tix.npairs == 0 ? 0 :
			tdb_sub_match(&D.tix, D.subs, oldt, newt, D.pend + c, end - c, count_event, NULL);
		if (got >= 0)
		{
			events += got;
			got = D.subix.npairs == 0 ? 0 :
				tdb_sub_match(&D.subix, D.subs, oldt, newt, D.pend + c, end - c, count_event, NULL);
		}
		if (got < 0)
		{
			/* out of memory for the events: what is left is dropped, as over budget */
			stopped = true;
			break;
		}
		events += got;
		c = end;
		INSTR_TIME_SET_CURRENT(now);
		INSTR_TIME_SUBTRACT(now, start);
		if (c < D.npend && INSTR_TIME_GET_MILLISEC(now) >= budget_ms)
		{
			stopped = true;
			break;
		}
	}
	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, start);
	if (stopped)
	{
		static TimestampTz last_logged = 0;
		TimestampTz ts = GetCurrentTimestamp();

		if (D.sub_gap_from == 0 && D.ntargets + D.ntaps > 0)
			D.sub_gap_from = D.pub.gen;
		owe_notifications(D.pub.gen);
		SpinLockAcquire(&tdb_shared->mutex);
		tdb_shared->match_overruns++;
		tdb_shared->match_records_skipped += D.npend - c;
		SpinLockRelease(&tdb_shared->mutex);
		/* once a minute at most: an overloaded server must not fill its log too */
		if (TimestampDifferenceExceeds(last_logged, ts, 60000))
		{
			last_logged = ts;
			ereport(LOG,
					(errmsg("trafficdb: generation " UINT64_FORMAT ": matching the subscriptions took more than trafficdb.match_budget_ms (%d ms); " UINT64_FORMAT " of " UINT64_FORMAT " changed locations were not matched",
							D.pub.gen, tdb_match_budget_ms, D.npend - c, D.npend),
					 errdetail("The generation was published; subscribers get an overrun event naming it, notify subscriptions say overrun in their next payload."),
					 errhint("Raise trafficdb.match_budget_ms, or have fewer or smaller subscriptions (trafficdb.status counts match_overruns).")));
		}
	}
	SpinLockAcquire(&tdb_shared->mutex);
	tdb_shared->last_events = (uint64) Max(events, 0);
	tdb_shared->last_match_ms = INSTR_TIME_GET_MILLISEC(now);
	SpinLockRelease(&tdb_shared->mutex);
}

/*
 * The NOTIFYs of a published generation, in a transaction of their own
 * after its publication: trafficdb_publish, and one per notify subscription
 * with events in it (payload '<generation> <events>', with ' overrun <g>'
 * when earlier notifications or events were lost from generation g on:
 * resync with changes_since(g - 1)).  Above
 * trafficdb.notify_queue_max_usage of the queue (a listener that does not
 * read, e.g. in an open transaction), or when the queue refuses them, none
 * are sent: they are counted (trafficdb.status notify_dropped), and each
 * subscription's next notification says overrun.  The generation stands
 * either way.
 */
static void
notify_commit(void)
{
	/* commit_tx without its wait for a standby (nothing to wait for: an asynchronous commit) */
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}

void
send_notifications(uint64 gen)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	static bool dropping = false;
	volatile uint64 n = 1;
	volatile bool sent = false;
	double		usage;
	char		why[TDB_ERRMSG_LEN] = "";

	if (follower_mode)
		return;					/* no NOTIFY on a standby */
	for (uint32 i = 0; i < D.nsql; i++)
	{
		bool		left = D.sql_left_out != NULL && i < D.nsubs && D.sql_left_out[i];

		if (D.sql_notify[i] && (left ? !D.sql_left_told[i] :
								((i < D.nsubs && D.subs_events[i] > 0) || D.sql_owed_from[i] != 0)))
			n++;
	}
	begin_tx("trafficdb notify");
	PG_TRY();
	{
		LOCAL_FCINFO(fcinfo, 0);

		/* notifications are not durable: no flush, no wait for a standby */
		(void) set_config_option("synchronous_commit", "off", PGC_SUSET, PGC_S_SESSION,
								 GUC_ACTION_LOCAL, true, 0, false);
		InitFunctionCallInfoData(*fcinfo, NULL, 0, InvalidOid, NULL, NULL);
		usage = DatumGetFloat8(pg_notification_queue_usage(fcinfo));
		if (usage > tdb_notify_queue_max_usage)
		{
			snprintf(why, sizeof(why), "the NOTIFY queue is %.6f full, over trafficdb.notify_queue_max_usage (%g)",
					 usage, tdb_notify_queue_max_usage);
			notify_commit();
		}
		else
		{
			Async_Notify(NOTIFY_CHANNEL, psprintf(UINT64_FORMAT, gen));
			for (uint32 i = 0; i < D.nsql; i++)
			{
				uint32		ev = i < D.nsubs ? D.subs_events[i] : 0;

				if (D.sql_notify[i] && D.sql_left_out != NULL && i < D.nsubs && D.sql_left_out[i])
				{
					/* over trafficdb.subscription_index_mb: it gets no events; its owner is told once */
					if (!D.sql_left_told[i])
						Async_Notify(D.sql_channel[i],
									 psprintf(UINT64_FORMAT " 0 unindexed", gen));
					continue;
				}
				if (!D.sql_notify[i] || (ev == 0 && D.sql_owed_from[i] == 0))
					continue;
				Async_Notify(D.sql_channel[i],
							 D.sql_owed_from[i] != 0 ?
							 psprintf(UINT64_FORMAT " %u overrun " UINT64_FORMAT, gen, ev, D.sql_owed_from[i]) :
							 psprintf(UINT64_FORMAT " %u", gen, ev));
			}
			notify_commit();
			sent = true;
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		snprintf(why, sizeof(why), "%s", edata->message);
		FreeErrorData(edata);
		pgstat_report_activity(STATE_IDLE, NULL);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	if (sent)
	{
		for (uint32 i = 0; i < D.nsql; i++)
		{
			if (D.sql_left_out != NULL && i < D.nsubs && D.sql_left_out[i])
				D.sql_left_told[i] = true;
			else if (D.sql_notify[i])
				D.sql_owed_from[i] = 0;
		}
		if (dropping)
			ereport(LOG, (errmsg("trafficdb: notifications are sent again (generation " UINT64_FORMAT ")", gen)));
		dropping = false;
	}
	else
	{
		for (uint32 i = 0; i < D.nsql; i++)
			if (D.sql_notify[i] && D.sql_owed_from[i] == 0 && i < D.nsubs && D.subs_events[i] > 0)
				D.sql_owed_from[i] = gen;
		if (!dropping)
			ereport(LOG,
					(errmsg("trafficdb: generation " UINT64_FORMAT " published without its " UINT64_FORMAT " notification(s): %s", gen, n, why),
					 errdetail("Notifications are dropped until the queue drains; each subscription's next one says overrun. trafficdb.status counts them (notify_dropped)."),
					 errhint("A session that LISTENs and does not read (an open transaction) holds the queue: see pg_notification_queue_usage() and pg_stat_activity.")));
		dropping = true;
	}
	SpinLockAcquire(&tdb_shared->mutex);
	if (sent)
		tdb_shared->notify_sent += n;
	else
		tdb_shared->notify_dropped += n;
	SpinLockRelease(&tdb_shared->mutex);
}

/* Has trafficdb.subscriptions changed since it was loaded (or the map since)? */
bool
subscriptions_stale(void)
{
	return D.have_map && (pg_atomic_read_u64(&tdb_shared->subs_version) != D.subs_version ||
						  D.sql_map_id != D.map.hdr->map_id);
}

/*
 * After a cycle's publication, in a transaction of its own: load the rows
 * of trafficdb.subscriptions again when they changed, and index them.  A
 * reload (100,000 rows: about 0.8 s) never delays a generation; its rows
 * are matched from the next one.
 */
void
subscriptions_tx(void *p)
{
	(void) p;
	if (!extension_installed())
		return;
	refresh_subscriptions();
	if (D.have_map && (D.targets_dirty || D.subs_map_id != D.map.hdr->map_id))
		rebuild_subscription_index();
}
