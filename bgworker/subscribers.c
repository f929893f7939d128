/*-------------------------------------------------------------------------
 *
 * subscribers.c
 *	  External subscribers (<prefix>.subs, trafficdb_subscribe): the daemon
 *	  makes their rings, sweeps the slots (new subscribers' filters, dead
 *	  ones' undelivered events handed to their group) and delivers each
 *	  published generation's events, to a subscriber or to a member of its
 *	  group; a damaged segment is made anew.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <grp.h>
#include <sched.h>
#include <sys/mman.h>

#include "utils/memutils.h"

#include "bgworker/daemon_internal.h"
#include "module/trafficdb.h"

/* ---- external subscribers (<prefix>.subs, trafficdb_subscribe) ---------------------- */

static char *subring_err;
static int	subring_rc;
static gid_t subring_gid;

static void
subring_create_guarded(void *p)
{
	(void) p;
	subring_rc = tdb_subring_create(&D.subring, D.prefix, (uint32) tdb_max_subscribers,
									(uint32) tdb_subscriber_ring_events, subring_gid,
									D.writer.ctl->instance_id, subring_err);
	if (subring_rc == TDB_SHM_OK)
		tdb_subring_set_state(&D.subring, TDB_SUBRING_RUNNING);
}

void
open_subring(void)
{
	char		err[TDB_SHM_ERRLEN];

	if (tdb_max_subscribers == 0)
		return;
	subring_gid = (gid_t) -1;
	if (tdb_shm_group && tdb_shm_group[0] != '\0')
	{
		struct group *g = getgrnam(tdb_shm_group);

		if (g != NULL)
			subring_gid = g->gr_gid;
	}
	subring_err = err;
	if (!tdb_writer_guarded(subring_create_guarded, NULL))
	{
		snprintf(err, sizeof(err), "%s.subs was truncated while it was made", D.prefix);
		subring_rc = TDB_SHM_ESYS;
	}
	if (subring_rc != TDB_SHM_OK)
	{
		ereport(WARNING, (errmsg("trafficdb: no subscribers' rings: %s", err)));
		return;
	}
	if (D.slot_live == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(D.cxt);

		D.slot_live = palloc0(sizeof(bool) * tdb_max_subscribers);
		D.slot_filter = palloc0(sizeof(TdbSubFilter) * tdb_max_subscribers);
		D.slot_store = MemoryContextAllocHuge(D.cxt, sizeof(TdbSubFilterStore) * tdb_max_subscribers);
		D.slot_group = palloc0(sizeof(uint64) * tdb_max_subscribers);
		D.slot_gmode = palloc0(sizeof(uint32) * tdb_max_subscribers);
		MemoryContextSwitchTo(old);
	}
	memset(D.slot_live, 0, sizeof(bool) * tdb_max_subscribers);
	D.subring_open = true;
	D.targets_dirty = true;
	ereport(LOG, (errmsg("trafficdb: subscribers' rings %s.subs: %d slots of %d events", D.prefix,
						 tdb_max_subscribers, tdb_subscriber_ring_events)));
}

/*
 * The subscriber an event for location_id goes to: the target's own slot,
 * or a live member of its group other than excluded (-1: none).  Round
 * robin takes the next member each time; sticky gives a location to the
 * member of highest weight hash(location, member), so that only a dead
 * member's locations move.
 */
static int32
subscriber_for(uint32 first, uint64 location_id, int32 excluded, uint32 *rr)
{
	uint64		group = D.slot_group[first];
	bool		sticky = D.slot_gmode[first] == TDB_SUBGROUP_STICKY;
	int32		best = -1;
	uint64		best_w = 0;
	uint32		nmembers = 0,
				k,
				i = 0;

	if (group == 0)
		return D.slot_live[first] && (int32) first != excluded ? (int32) first : -1;
	for (uint32 sl = 0; sl < D.subring.nslots; sl++)
	{
		uint64		w;

		if (!takes_events(sl) || D.slot_group[sl] != group || (int32) sl == excluded)
			continue;
		nmembers++;
		w = tdb_hash_id(location_id ^ ((uint64) (sl + 1) * 0x9E3779B97F4A7C15ull));
		if (best < 0 || w > best_w)
		{
			best = (int32) sl;
			best_w = w;
		}
	}
	if (nmembers == 0 || sticky)
		return best;
	k = (*rr)++ % nmembers;
	for (uint32 sl = 0; sl < D.subring.nslots; sl++)
		if (takes_events(sl) && D.slot_group[sl] == group && (int32) sl != excluded && i++ == k)
			return (int32) sl;
	return -1;
}

/*
 * The members of each target for one delivery (deliver_guarded): target t's
 * are dmembers[doff[t] .. doff[t] + dcount[t]), the live slots of its group
 * in slot order (or its own slot), so that picking one for an event costs
 * no scan of every slot.  dpick gives the same member subscriber_for would.
 * Targets are D.target_first[0 .. ntargets) then D.tap_first[0 .. ntaps).
 */
static int32 *dmembers;
static uint32 *doff;
static uint32 *dcount;
static bool *dsticky;

static void
delivery_members(void)
{
	uint32		nslots = D.subring.nslots;
	uint32		k = 0;

	if (dmembers == NULL)
	{
		/* each slot is in one target at most: nslots of each */
		dmembers = MemoryContextAlloc(D.cxt, sizeof(int32) * Max(nslots, 1));
		doff = MemoryContextAlloc(D.cxt, sizeof(uint32) * Max(2 * nslots, 1));
		dcount = MemoryContextAlloc(D.cxt, sizeof(uint32) * Max(2 * nslots, 1));
		dsticky = MemoryContextAlloc(D.cxt, sizeof(bool) * Max(2 * nslots, 1));
	}
	for (uint32 t = 0; t < D.ntargets + D.ntaps; t++)
	{
		uint32		first = (uint32) (t < D.ntargets ? D.target_first[t] : D.tap_first[t - D.ntargets]);
		uint64		group = D.slot_group[first];

		doff[t] = k;
		dcount[t] = 0;
		dsticky[t] = group != 0 && D.slot_gmode[first] == TDB_SUBGROUP_STICKY;
		if (group == 0)
		{
			if (takes_events(first) && k < nslots)
			{
				dmembers[k++] = (int32) first;
				dcount[t]++;
			}
			continue;
		}
		/* as subscriber_for: the group's members that take events */
		for (uint32 sl = 0; sl < nslots && k < nslots; sl++)
			if (takes_events(sl) && D.slot_group[sl] == group)
			{
				dmembers[k++] = (int32) sl;
				dcount[t]++;
			}
	}
}

/* subscriber_for(first of target t, location_id, -1, rr) over delivery_members' lists */
static inline int32
dpick(uint32 t, uint64 location_id, uint32 *rr)
{
	const int32 *m = &dmembers[doff[t]];
	uint32		n = dcount[t];
	int32		best = -1;
	uint64		best_w = 0;

	if (n == 0)
		return -1;
	if (D.slot_group[m[0]] == 0)
		return m[0];
	if (!dsticky[t])
		return m[(*rr)++ % n];
	for (uint32 i = 0; i < n; i++)
	{
		uint64		w = tdb_hash_id(location_id ^ ((uint64) (m[i] + 1) * 0x9E3779B97F4A7C15ull));

		if (best < 0 || w > best_w)
		{
			best = m[i];
			best_w = w;
		}
	}
	return best;
}

static void
push_counted(uint32 slot, const TdbSubEvent *ev, uint64 *pushed, uint64 *dropped)
{
	int			rc = tdb_subring_push(&D.subring, slot, ev);

	if (rc == TDB_SUBRING_PUSHED)
		(*pushed)++;
	else if (rc == TDB_SUBRING_DROPPED)
		(*dropped)++;
}

/* The end of a batch of pushes: one wake per subscriber pushed to that waits, and the counts. */
static void
wake_and_count(uint64 pushed, uint64 dropped)
{
	if (pushed > 0 && tdb_subring_wake_pending(&D.subring) > 0)
	{
		/*
		 * The subscribers just woken run before the rest of our work
		 * (reclaiming buffers, watching readers): on a busy machine the
		 * scheduler often queues a woken subscriber on our CPU, where it
		 * would wait until we sleep.  Nothing else runnable: a no-op.
		 */
		sched_yield();
	}
	SpinLockAcquire(&tdb_shared->mutex);
	tdb_shared->events_delivered += pushed;
	tdb_shared->events_dropped += dropped;
	SpinLockRelease(&tdb_shared->mutex);
}

static char subring_damage[200];	/* what a sweep found damaged */

/* What a sweep found: new subscribers' filters, and dead ones (their undelivered events handed over). */
static void
subring_sweep_guarded(void *p)
{
	TdbSubChange ch[64];
	uint32		nch = 0;
	static unsigned char buf[TDB_SUBRING_FILTER_SIZE];
	uint64		pushed = 0,
				dropped = 0;

	(void) p;
	if (tdb_subring_sweep(&D.subring, ch, lengthof(ch), &nch) != TDB_SHM_OK)
	{
		/* its subscribers are told (STOPPED, woken; unlinked), then sweep_subscribers makes it anew */
		strlcpy(subring_damage, D.subring.damage, sizeof(subring_damage));
		tdb_subring_abandon(&D.subring);
		D.subring_open = false;
		return;
	}
	for (uint32 i = 0; i < nch; i++)
	{
		uint32		sl = ch[i].slot;

		if (ch[i].kind == TDB_SUBCHANGE_ATTACHED)
		{
			int			len = tdb_subring_filter(&D.subring, sl, buf, sizeof(buf));
			char		err[TDB_ERRLEN];

			if (len < 0 || !tdb_subfilter_decode(buf, (size_t) len, &D.slot_filter[sl], &D.slot_store[sl], err))
			{
				ereport(LOG, (errmsg("trafficdb: subscriber slot %u (pid %d) gets no events: %s", sl, ch[i].pid,
									 len < 0 ? "its filter could not be read" : err)));
				continue;
			}
			D.slot_live[sl] = true;
			D.slot_group[sl] = ch[i].group_id;
			D.slot_gmode[sl] = ch[i].group_mode;
			D.targets_dirty = true;
		}
		else if (ch[i].kind == TDB_SUBCHANGE_RECLAIMED)
		{
			bool		was = D.slot_live[sl];
			uint64		group = D.slot_group[sl];
			TdbSubEvent ev[256];
			uint32		n;
			uint32		rr = 0;

			D.slot_live[sl] = false;
			D.targets_dirty = D.targets_dirty || was;
			if (!was || group == 0)
			{
				tdb_subring_discard(&D.subring, sl);
				continue;
			}
			/* a dead group member: what it never took goes to the others, each event once */
			while ((n = tdb_subring_take_undelivered(&D.subring, sl, ev, lengthof(ev))) > 0)
				for (uint32 k = 0; k < n; k++)
				{
					int32		first = -1;
					int32		to;

					for (uint32 o = 0; o < D.subring.nslots && first < 0; o++)
						if (takes_events(o) && D.slot_group[o] == group)
							first = (int32) o;
					if (first < 0)
						break;	/* no member left to take them */
					to = subscriber_for((uint32) first, ev[k].location_id, (int32) sl, &rr);
					if (to >= 0)
						push_counted((uint32) to, &ev[k], &pushed, &dropped);
				}
			tdb_subring_discard(&D.subring, sl);
		}
	}
	wake_and_count(pushed, dropped);
}

/*
 * <prefix>.subs was found damaged (what: how) and closed: say so where
 * monitoring looks (status.last_error), and make it anew.  Its subscribers
 * learn it from their next call (the old segment is unlinked; libtrafficdb
 * and subscription_events return "rebuilt ... subscribe again").
 */
static void
subring_lost(const char *what)
{
	report_damage("the subscribers' segment", "subs", what, "trafficdb.shm_group", " and was made anew",
				  "Its subscribers were told to subscribe again; events of the current generation may be lost for them.");
	D.subring_lost = true;
	D.subring_open = false;		/* closed by the caller */
	open_subring();
	if (D.subring_open)
		D.subring_lost = false;
	D.targets_dirty = true;
}

void
sweep_subscribers(void)
{
	if (!D.subring_open)
	{
		/* made anew after damage, when that failed last time (a WARNING said why) */
		if (D.subring_lost)
		{
			open_subring();
			if (D.subring_open)
				D.subring_lost = false;
			D.targets_dirty = true;
		}
		return;
	}
	subring_damage[0] = '\0';
	if (!tdb_writer_guarded(subring_sweep_guarded, NULL))
	{
		/* truncated between the size check and a store: nothing of it can be trusted */
		shm_unlink(D.subring.name);
		tdb_subring_close(&D.subring);
		D.subring_open = false;
		strlcpy(subring_damage, "truncated while the daemon swept it", sizeof(subring_damage));
	}
	if (!D.subring_open)
		subring_lost(subring_damage);
}

/* deliver_guarded fetches the map record and entries of the event this far ahead */
#define DELIVER_AHEAD 8

static void
deliver_guarded(void *p)
{
	const TdbTraffic *oldt = tdb_traffic_entries(D.writer.seg_addr[D.last_pub_seg]);
	const TdbTraffic *newt = tdb_traffic_entries(D.writer.seg_addr[D.pub.seg]);
	uint64		pushed = 0,
				dropped = 0;

	(void) p;
	delivery_members();
	if (D.sub_gap_from != 0)
	{
		/* every subscriber: resync from the generation whose events were not made */
		TdbSubEvent gap;

		memset(&gap, 0, sizeof(gap));
		gap.kind = TDB_SUBEV_OVERRUN;
		gap.generation = D.sub_gap_from;
		gap.created_us = D.pub.published_us;
		for (uint32 sl = 0; sl < D.subring.nslots; sl++)
			if (D.slot_live[sl])
				push_counted(sl, &gap, &pushed, &dropped);
		D.sub_gap_from = 0;
	}
	for (uint64 k = 0; k < D.nev; k++)
	{
		const PendingEvent *pe = &D.ev[k];
		bool		sql = pe->filter < D.nsql;
		uint64		r = pe->record;
		TdbSubEvent ev;

		if (k + DELIVER_AHEAD < D.nev)
		{
			/* the events' records are scattered over the map: fetched ahead */
			const PendingEvent *a = &D.ev[k + DELIVER_AHEAD];

			__builtin_prefetch(&D.map.records[a->record].id);
			__builtin_prefetch(&oldt[a->record]);
			__builtin_prefetch(&newt[a->record]);
			if (a->filter < D.subix.nfilters)
				__builtin_prefetch(&D.subix.mf[a->filter]);
		}

		/* an SQL subscription's event goes to each tap; a target's to the target */
		if (!sql && pe->filter - D.nsql >= D.ntargets)
			continue;
		memset(&ev, 0, sizeof(ev));
		ev.generation = D.pub.gen;
		ev.location_id = D.map.records[r].id;
		ev.created_us = D.pub.published_us;
		ev.kind = pe->kind;
		ev.old_speed_kmh = oldt[r].speed_kmh;
		ev.new_speed_kmh = newt[r].speed_kmh;
		ev.old_free_flow_kmh = oldt[r].free_flow_kmh;
		ev.new_free_flow_kmh = newt[r].free_flow_kmh;
		ev.old_congestion = oldt[r].congestion;
		ev.new_congestion = newt[r].congestion;
		ev.old_confidence = oldt[r].confidence;
		ev.new_confidence = newt[r].confidence;
		ev.old_incident = oldt[r].incident_off != 0;
		ev.new_incident = newt[r].incident_off != 0;
		for (uint32 t = 0; t < (sql ? D.ntaps : 1); t++)
		{
			int32		to = sql ? dpick(D.ntargets + t, ev.location_id, &D.tap_rr[t])
				: dpick(pe->filter - D.nsql, ev.location_id, &D.target_rr[pe->filter - D.nsql]);
			int			rc;

			if (to < 0)
				continue;
			/* a tap learns which SQL subscription matched; a target, the slot it went to */
			ev.subscription = !sql ? (uint32) to :
				pe->filter < D.subix.nfilters ? D.subix.mf[pe->filter].id : D.subs[pe->filter].id;
			/* head stored (and a waiting consumer woken) every few thousand, and at the end */
			rc = tdb_subring_push_deferred(&D.subring, (uint32) to, &ev);
			if (rc == TDB_SUBRING_PUSHED)
				pushed++;
			else if (rc == TDB_SUBRING_DROPPED)
				dropped++;
		}
	}
	wake_and_count(pushed, dropped);
}

/* After the publication of the generation whose events match_subscriptions kept. */
void
deliver_events(void)
{
	if ((D.nev == 0 && D.sub_gap_from == 0) || !D.subring_open || D.last_pub_map_id != D.map.hdr->map_id)
	{
		D.nev = 0;
		return;
	}
	if (!tdb_writer_guarded(deliver_guarded, NULL))
	{
		shm_unlink(D.subring.name);
		tdb_subring_close(&D.subring);
		D.subring_open = false;
		subring_lost("truncated while the daemon delivered events");
	}
	D.nev = 0;
}

void
subring_remove_guarded(void *p)
{
	(void) p;
	tdb_subring_remove(&D.subring);
}
