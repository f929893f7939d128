/*-------------------------------------------------------------------------
 *
 * putdrain.c
 *	  The writers' ring (<prefix>.writers, trafficdb_put): the daemon makes
 *	  or adopts it, drains the updates writers put into the working traffic
 *	  between publications, tells TRAFFICDB_SYNC writers when what they put
 *	  has committed, and makes it anew when a member of writer_group
 *	  damaged it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <grp.h>
#include <sys/mman.h>

#include "utils/timestamp.h"

#include "bgworker/daemon_internal.h"
#include "bgworker/working.h"
#include "module/trafficdb.h"

/*
 * The writers' ring's stores, guarded: a member of writer_group may have
 * truncated it (a SIGBUS otherwise).  A damaged ring is made anew at the
 * next drain.
 */
static uint64 ring_committed_gen;
static uint32 ring_state_arg;

static void
ring_committed_guarded(void *p)
{
	(void) p;
	tdb_ring_committed(&D.ring, ring_committed_gen);
}

static void
ring_state_guarded(void *p)
{
	(void) p;
	tdb_ring_set_state(&D.ring, ring_state_arg, 0);
}

void
ring_committed(uint64 gen)
{
	ring_committed_gen = gen;
	if (D.ring_open && !tdb_writer_guarded(ring_committed_guarded, NULL))
		ereport(LOG, (errmsg("trafficdb: the writers' ring faulted; it is made anew at the next drain")));
}

void
ring_set_state(uint32 state)
{
	ring_state_arg = state;
	if (D.ring_open && !tdb_writer_guarded(ring_state_guarded, NULL))
		ereport(LOG, (errmsg("trafficdb: the writers' ring faulted; it is made anew at the next drain")));
}

/* Puts for unknown locations, into feed_rejects (seq = the lane's ticket). */
void
persist_put_rejects(void)
{
	Rejects		rj = {0};

	for (uint32 k = 0; k < D.nput_rejects; k++)
		reject(&rj, D.put_reject_ticket[k], D.put_reject_id[k],
			   psprintf("unknown location_id: not in the loaded map (trafficdb_put, writer lane %u)",
						D.put_reject_lane[k]));
	/* never dropped silently: the ones there was no room for, counted in one row */
	if (D.put_rejects_unfiled > 0)
		reject(&rj, 0, 0,
			   psprintf("and " UINT64_FORMAT " more trafficdb_put update(s) for locations not in the loaded map, not listed one by one",
						D.put_rejects_unfiled));
	persist_rejects(&rj);
	D.nput_rejects = 0;
	D.put_rejects_unfiled = 0;
}

/* ---- the writers' ring ------------------------------------------------------------- */

static char put_incident[TDB_VALID_MAX_INCIDENT + 1];

/* One validated update from a writer lane into the working traffic. */
static void
apply_put(const TdbRingUpdate *u, uint32_t lane, uint64_t ticket)
{
	int64		i;

	if (u->map_id == D.map.hdr->map_id && u->record_hint < D.map.count &&
		D.map.records[u->record_hint].id == u->location_id)
		i = u->record_hint;
	else
		i = tdb_map_find(&D.map, u->location_id);
	if (i < 0)
	{
		/* the map changed under the writer: filed like a feed reject */
		D.put_rejected++;
		if (D.nput_rejects < lengthof(D.put_reject_id))
		{
			D.put_reject_id[D.nput_rejects] = (int64) u->location_id;
			D.put_reject_ticket[D.nput_rejects] = (int64) ticket;
			D.put_reject_lane[D.nput_rejects] = lane;
			D.nput_rejects++;
		}
		else
			D.put_rejects_unfiled++;
		return;
	}
	if (u->incident)
	{
		memcpy(put_incident, u->incident, Min(u->incident_len, TDB_VALID_MAX_INCIDENT));
		put_incident[Min(u->incident_len, TDB_VALID_MAX_INCIDENT)] = '\0';
	}
	/* ring updates come after the feed rows of their generation: the largest seq */
	apply_traffic((uint64) i, u->observed_at_us, PG_INT64_MAX, u->speed_kmh, u->free_flow_kmh,
				  u->congestion == TDB_RING_UNKNOWN ? -1 : u->congestion,
				  u->confidence == TDB_RING_UNKNOWN ? -1 : u->confidence,
				  u->incident ? put_incident : NULL, D.generation + 1);
	D.dirty = true;
	D.put_applied++;
}

/*
 * Updates are applied in small batches so that the lines each one touches
 * (its map record, to check the writer's hint, and its working entry) are
 * fetched a few updates ahead: one at a time, each update waited for those
 * misses in turn (the drain ran at about 3.5 M updates/s on a 1 M map).
 */
#define PUT_BATCH 64
#define PUT_AHEAD 8
typedef struct BatchedPut
{
	TdbRingUpdate u;
	uint32		lane;
	uint64		ticket;
} BatchedPut;
static BatchedPut put_batch[PUT_BATCH];
static int	nput_batch;

static void
flush_puts(void)
{
	for (int k = 0; k < nput_batch; k++)
	{
		if (k + PUT_AHEAD < nput_batch)
		{
			uint32		h = put_batch[k + PUT_AHEAD].u.record_hint;

			if (h < D.map.count)
			{
				__builtin_prefetch(&D.map.records[h]);
				__builtin_prefetch(&D.traffic[h], 1);
				__builtin_prefetch(&D.win_seq[h], 1);
				if (D.incident_count > 0)
					__builtin_prefetch(&D.incidents[h]);
			}
		}
		apply_put(&put_batch[k].u, put_batch[k].lane, put_batch[k].ticket);
	}
	nput_batch = 0;
}

static int
ring_apply(void *arg, const TdbRingUpdate *u, uint32_t lane, uint64_t ticket)
{
	(void) arg;
	if (u->incident)
	{
		/* its text is valid only during this call: in order, now */
		flush_puts();
		apply_put(u, lane, ticket);
		return 0;
	}
	put_batch[nput_batch].u = *u;
	put_batch[nput_batch].lane = lane;
	put_batch[nput_batch].ticket = ticket;
	if (++nput_batch == PUT_BATCH)
		flush_puts();
	return 0;
}

typedef struct DrainArg
{
	TdbRingDrainStats st;
	uint64		n;
	bool		sync_wanted;	/* tdb_ring_sync_wanted after the drain, or an end of batch drained */
} DrainArg;

static void
drain_guarded(void *p)
{
	DrainArg   *a = p;

	nput_batch = 0;
	a->n = tdb_ring_drain(&D.ring, 0, ring_apply, NULL, &a->st);
	flush_puts();
	/*
	 * a writer waits for a commit of what was drained from its lane (what it
	 * says of itself); a new end of batch at once, one whose generation
	 * failed when its retry is due
	 */
	if (!a->st.truncated)
		a->sync_wanted = a->st.marks > 0 ||
			(tdb_ring_batch_ended(&D.ring) && GetCurrentTimestamp() >= D.batch_retry_at) ||
			tdb_ring_sync_wanted(&D.ring);
}

static void
ring_remove_guarded(void *p)
{
	(void) p;
	tdb_ring_remove(&D.ring);
}

static gid_t ring_create_gid;
static char *ring_create_err;
static int	ring_create_rc;

static void
ring_create_guarded(void *p)
{
	(void) p;
	ring_create_rc = tdb_ring_create(&D.ring, D.prefix, (uint32) tdb_max_writers,
									 (uint32) tdb_writer_ring_slots, ring_create_gid,
									 D.writer.ctl->instance_id, ring_create_err);
}

void
open_ring(void)
{
	char		err[TDB_SHM_ERRLEN];
	gid_t		gid = (gid_t) -1;

	if (tdb_max_writers == 0)
		return;
	if (tdb_writer_group && tdb_writer_group[0] != '\0')
	{
		struct group *g = getgrnam(tdb_writer_group);

		if (g == NULL)
		{
			ereport(WARNING,
					(errmsg("trafficdb: trafficdb.writer_group names group \"%s\", which does not exist: no writers' ring", tdb_writer_group),
					 errhint("Create the group, or set trafficdb.writer_group to '' for owner-only access.")));
			return;
		}
		gid = g->gr_gid;
	}
	/* adopting reads and writes a file a member of writer_group may be truncating right now */
	ring_create_gid = gid;
	ring_create_err = err;
	if (!tdb_writer_guarded(ring_create_guarded, NULL))
	{
		tdb_ring_close(&D.ring);
		snprintf(err, sizeof(err), "%s.writers was truncated while it was opened", D.prefix);
		ring_create_rc = TDB_SHM_ESYS;
	}
	if (ring_create_rc != TDB_SHM_OK)
	{
		ereport(WARNING, (errmsg("trafficdb: no writers' ring: %s", err)));
		return;
	}
	D.ring_open = true;
	ring_set_state(TDB_RING_REBUILDING);
	ereport(LOG, (errmsg("trafficdb: writers' ring %s.writers: %d lanes of %d slots%s", D.prefix,
						 tdb_max_writers, tdb_writer_ring_slots, D.ring.adopted ? ", adopted with its undrained updates" : "")));
}

/*
 * Drain the writers' ring into the working traffic (between transactions).
 * Returns true when TRAFFICDB_SYNC writers wait for what was drained, or a
 * writer ended a batch (trafficdb_end_batch: its lane is drained no further
 * until what came before is committed): the next generation should not
 * wait for publish_interval (group commit).
 */
bool
drain_ring(void)
{
	DrainArg	a;
	bool		drained;

	if (!D.ring_open || !D.have_map)
		return false;
	memset(&a, 0, sizeof(a));
	drained = tdb_writer_guarded(drain_guarded, &a);
	if (drained && a.st.header_damaged)
	{
		/*
		 * Zeroed or overwritten (a truncation and regrowth, or a scribble on
		 * the header): no new writer can open it, and the drains would go on
		 * as if nothing happened.  Its writers are told to reopen (stopped)
		 * and it is made anew.
		 */
		report_damage("the writers' ring", "writers", D.ring.damage, "trafficdb.writer_group", " and was made anew",
					  "Writers attached before must reopen; what they put and the daemon had not drained is lost.");
		if (!tdb_writer_guarded(ring_remove_guarded, NULL))
			tdb_ring_close(&D.ring);
		D.ring_open = false;
		open_ring();
		ring_set_state(TDB_RING_RUNNING);
		return false;
	}
	if (!drained || a.st.truncated)
	{
		/* a member of writer_group truncated it: make it anew */
		report_damage("the writers' ring", "writers", "truncated", "trafficdb.writer_group", " and was made anew",
					  "Writers attached before must reopen; what they put and the daemon had not drained is lost.");
		shm_unlink(D.ring.name);
		tdb_ring_close(&D.ring);
		D.ring_open = false;
		open_ring();
		ring_set_state(TDB_RING_RUNNING);
		return false;
	}
	if (a.st.slots > 0 || a.st.lanes_reset > 0)
		D.ring_active_at = GetCurrentTimestamp();
	if (a.st.lanes_reset > 0)
		ereport(LOG, (errmsg("trafficdb: reset " UINT64_FORMAT " damaged writer lane(s), dropping " UINT64_FORMAT " slot(s): %s",
							 a.st.lanes_reset, a.st.dropped_slots, a.st.reset_reason)));
	if (a.sync_wanted && D.npend == 0 && D.nput_rejects == 0 && D.put_rejects_unfiled == 0)
	{
		/*
		 * What the waiting writers put changed nothing (older than what is
		 * stored: newest wins) and nothing else waits to be committed: the
		 * working traffic is the committed generation's, so what they put
		 * is as durable as it will ever be.  Tell them now, not at the next
		 * publication (and drain past the ends of batches again).
		 */
		ring_committed(D.generation);
		return false;
	}
	/* (puts for unknown locations are filed by the cycle, in feed_rejects) */
	return a.sync_wanted;
}

/* A question about the ring's lanes, asked guarded against SIGBUS (a member of writer_group may truncate it). */
typedef struct RingQuestion
{
	bool		(*question) (const TdbRing *r);
	bool		answer;
} RingQuestion;

static void
ask_guarded(void *p)
{
	RingQuestion *a = p;

	a->answer = a->question(&D.ring);
}

static bool
ring_ask(bool (*question) (const TdbRing *r))
{
	RingQuestion a = {question, false};

	return D.ring_open && tdb_writer_guarded(ask_guarded, &a) && a.answer;
}

/* Is a lane drained up to an end of batch whose generation has not committed? */
bool
ring_batch_ended(void)
{
	return ring_ask(tdb_ring_batch_ended);
}

/* Does a lane hold a put not drained yet? */
bool
ring_undrained(void)
{
	return ring_ask(tdb_ring_undrained);
}

static void
release_guarded(void *p)
{
	(void) p;
	tdb_ring_release_batches(&D.ring);
}

/* Every lane drained past its end of batch again (an orderly stop, publish_ring_at_stop). */
void
ring_release_batches(void)
{
	if (D.ring_open)
		(void) tdb_writer_guarded(release_guarded, NULL);
}

/*
 * After a publication cycle: when it failed while a lane waits at an end of
 * batch, the next attempt for it waits 10 ms, then twice as long each time,
 * up to 1 s; a cycle that committed forgets the wait.
 */
void
batch_cycle_done(bool committed)
{
	if (committed || !ring_batch_ended())
	{
		D.batch_backoff_ms = 0;
		D.batch_retry_at = 0;
		return;
	}
	D.batch_backoff_ms = D.batch_backoff_ms == 0 ? 10 : Min(D.batch_backoff_ms * 2, 1000);
	D.batch_retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), D.batch_backoff_ms);
}

/* wait_ms, or less: the daemon wakes for a batch's next attempt. */
long
batch_retry_wait_ms(long wait_ms)
{
	long		left;

	if (D.batch_retry_at == 0)
		return wait_ms;
	left = (long) ((D.batch_retry_at - GetCurrentTimestamp()) / 1000) + 1;
	return Max(Min(wait_ms, left), 1);
}
