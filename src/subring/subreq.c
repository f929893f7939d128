/*
 * subreq.c
 *	  Request-response over the subscribers' slots (subring.h, "the request
 *	  area"; docs/subscriptions-rings.md): a requester posts a request to a
 *	  group, one member takes it, answers, and the requester wakes.  No
 *	  daemon on the way: the daemon only puts back the requests of a slot
 *	  whose owner died, which a waiting requester also does by itself when
 *	  it finds the member that took its request gone.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE				/* F_OFD_GETLK */
#endif
#include "subring/subring.h"

#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* How often a waiting requester looks whether the member working on its request still lives. */
#define PROBE_MS			50
/* The longest single FUTEX_WAIT of a member waiting for a request: STOPPED is seen at least this often. */
#define TAKE_POLL_MS		1000
/* Compare-and-swap retries on one cell before the daemon leaves it for its next sweep. */
#define RECLAIM_TRIES		64

static long
futex_wait_ms(_Atomic uint32_t *word, uint32_t val, int64_t ms)
{
	struct timespec ts = {(time_t) (ms / 1000), (long) (ms % 1000) * 1000000};

	return syscall(SYS_futex, (uint32_t *) word, FUTEX_WAIT, val, &ts, NULL, 0);
}

/* Returns how many were woken (0: nobody slept there, or the call failed). */
static long
futex_wake(_Atomic uint32_t *word, int n)
{
	long		rc = syscall(SYS_futex, (uint32_t *) word, FUTEX_WAKE, n, NULL, NULL, 0);

	return rc > 0 ? rc : 0;
}

static inline uint64_t
next_ticket(uint64_t w)
{
	return (TDB_SUBREQ_TICKET(w) + 1) & TDB_SUBREQ_TICKET_MASK;
}

/*
 * Wake one member of group g that sleeps waiting for a request, starting at
 * slot start.  The member's flag is taken (1 -> 0) by whoever wakes it, so
 * two requests posted together wake two members, not one twice.  A member
 * not waiting scans the cells before it sleeps, so nothing is missed.
 *
 * A flag taken from a member that was not asleep in FUTEX_WAIT (woken by
 * nobody) does not count: the member may be dead (kill -9 in its wait
 * leaves its flag set), or about to return with another request it found
 * in its scan, or between its scan and its FUTEX_WAIT (then the word bumped
 * sends it back to its scan).  In the first two cases nobody would look at
 * the new request until some member's next poll, so we go on to the next
 * member; in the third one member too many wakes, which costs a scan.
 */
static bool
wake_member(void *area, uint32_t nslots, uint64_t g, uint32_t start)
{
	for (uint32_t k = 0; k < nslots; k++)
	{
		TdbSubBell *b = tdb_subreq_bell(area, (start + k) % nslots);
		uint32_t	one = 1;

		if (atomic_load_explicit(&b->group_id, memory_order_relaxed) != g ||
			atomic_load_explicit(&b->waiters, memory_order_relaxed) == 0)
			continue;
		if (!atomic_compare_exchange_strong_explicit(&b->waiters, &one, 0, memory_order_seq_cst,
													 memory_order_relaxed))
			continue;
		atomic_fetch_add_explicit(&b->word, 1, memory_order_seq_cst);
		if (futex_wake(&b->word, 1) > 0)
			return true;
	}
	return false;
}

/* ---- the producer ------------------------------------------------------------- */

uint32_t
tdb_subreq_reclaim(void *area, uint32_t nslots, uint32_t slot)
{
	uint32_t	ncells = tdb_subreq_cells(nslots);
	uint32_t	changed = 0;

	/* a member killed in its wait left its bell set: nobody sleeps there any more */
	if (slot < nslots)
	{
		TdbSubBell *b = tdb_subreq_bell(area, slot);

		atomic_store_explicit(&b->waiters, 0, memory_order_relaxed);
		atomic_store_explicit(&b->group_id, 0, memory_order_relaxed);
	}
	for (uint32_t i = 0; i < ncells; i++)
	{
		TdbSubReqCell *c = tdb_subreq_cell(area, nslots, i);

		int			moves = 0;

		/* at most two moves per cell (a slot that took its own request has two), whatever a writer does */
		for (int tries = 0; tries < RECLAIM_TRIES && moves < 2; tries++)
		{
			uint64_t	w = atomic_load_explicit(&c->word, memory_order_acquire);
			uint32_t	st = TDB_SUBREQ_STATE(w);
			bool		busy = st == TDB_SUBREQ_TAKEN || st == TDB_SUBREQ_WRITING;
			bool		repost = false;
			uint64_t	nw;

			if (TDB_SUBREQ_OWNER(w) == slot &&
				(st == TDB_SUBREQ_FILLING || st == TDB_SUBREQ_POSTED || st == TDB_SUBREQ_ANSWERED))
				nw = TDB_SUBREQ_WORD(TDB_SUBREQ_FREE, 0, 0, TDB_SUBREQ_TICKET(w));
			else if (TDB_SUBREQ_OWNER(w) == slot && busy)
				nw = TDB_SUBREQ_WORD(st == TDB_SUBREQ_WRITING ? TDB_SUBREQ_ORPHANED_WRITING : TDB_SUBREQ_ORPHANED,
									 slot, TDB_SUBREQ_TAKER(w), TDB_SUBREQ_TICKET(w));
			else if (TDB_SUBREQ_TAKER(w) == slot && busy)
			{
				nw = TDB_SUBREQ_WORD(TDB_SUBREQ_POSTED, TDB_SUBREQ_OWNER(w), 0, TDB_SUBREQ_TICKET(w));
				repost = true;
			}
			else if (TDB_SUBREQ_TAKER(w) == slot && TDB_SUBREQ_IS_ORPHANED(st))
				nw = TDB_SUBREQ_WORD(TDB_SUBREQ_FREE, 0, 0, TDB_SUBREQ_TICKET(w));
			else
				break;			/* nothing of this slot's */
			if (!atomic_compare_exchange_strong_explicit(&c->word, &w, nw, memory_order_seq_cst,
														 memory_order_relaxed))
				continue;		/* moved meanwhile: judge it again */
			changed++;
			if (repost)
				wake_member(area, nslots, atomic_load_explicit(&c->group_id, memory_order_relaxed), i % nslots);
			moves++;
		}
	}
	return changed;
}

/* ---- both sides of the consumer ---------------------------------------------- */

static int
map_area(TdbSubConsumer *c)
{
	size_t		off = tdb_subreq_offset(c->nslots, c->ring_events);

	if (c->req_area != NULL)
		return TDB_SHM_OK;
	if (c->slot == NULL)
	{
		snprintf(c->err, sizeof(c->err), "not subscribed");
		return TDB_SHM_EINVAL;
	}
	c->req_size = tdb_subreq_area_size(c->nslots);
	if (c->borrowed != NULL)
	{
		c->req_area = (char *) c->borrowed + off;
		return TDB_SHM_OK;
	}
	c->req_map = mmap(NULL, c->req_size, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, (off_t) off);
	if (c->req_map == MAP_FAILED)
	{
		c->req_map = NULL;
		snprintf(c->err, sizeof(c->err), "cannot map the request area of \"%s\": %s", c->name, strerror(errno));
		return TDB_SHM_ESYS;
	}
	c->bus_req = tdb_bus_guard(c->req_map, c->req_size, PROT_READ | PROT_WRITE);
	if (c->bus_req == 0)
	{
		snprintf(c->err, sizeof(c->err), "cannot guard the request area of \"%s\" against truncation: %s", c->name,
				 strerror(errno));
		munmap(c->req_map, c->req_size);
		c->req_map = NULL;
		return TDB_SHM_ESYS;
	}
	c->req_area = c->req_map;
	return TDB_SHM_OK;
}

/* Stopped, or our mappings faulted (truncated by a member of the group: the callers' ESTALE) */
static bool
stopped(const TdbSubConsumer *c)
{
	return atomic_load_explicit(&c->hdr->state, memory_order_acquire) == TDB_SUBRING_STOPPED ||
		tdb_subring_consumer_broken(c);
}

/*
 * Take (F_WRLCK) or let go (F_UNLCK) of slot i's lock without waiting.
 * Taking it succeeds only when nobody holds it: its owner is gone, and
 * while we hold it neither the daemon can reclaim the slot nor a new owner
 * claim it, so a request it took can be posted again exactly once.
 */
static bool
slot_lock_nb(const TdbSubConsumer *c, uint32_t i, short type)
{
	struct flock fl;

	memset(&fl, 0, sizeof(fl));
	fl.l_type = type;
	fl.l_whence = SEEK_SET;
	fl.l_start = (off_t) i;
	fl.l_len = 1;
	return fcntl(c->fd, F_OFD_SETLK, &fl) == 0;
}

static const TdbSubSlot *
slot_of(const TdbSubConsumer *c, uint32_t i)
{
	return (const TdbSubSlot *) ((const char *) c->hdr + tdb_subring_slot_offset(c->ring_events, i));
}

/* Is there an ACTIVE slot of group g?  (A dead one not yet reclaimed counts: its requests come back.) */
static bool
group_has_member(const TdbSubConsumer *c, uint64_t g)
{
	for (uint32_t i = 0; i < c->nslots; i++)
	{
		const TdbSubSlot *s = slot_of(c, i);

		/* not ourselves: a lone member asking its own group would wait for nobody */
		if (i != (uint32_t) c->slot_idx &&
			atomic_load_explicit(&s->state, memory_order_acquire) == TDB_SUBSLOT_ACTIVE && s->group_id == g)
			return true;
	}
	return false;
}

/* ---- the requester ------------------------------------------------------------- */

/*
 * Take the request back.  Returns true when it was answered meanwhile (the
 * caller reads the answer), false when withdrawn: a cell still POSTED is
 * FREE again, one a member works on is ORPHANED (TAKEN) or ORPHANED_WRITING
 * (the member frees it).
 */
static bool
withdraw(TdbSubReqCell *cell, uint32_t me, uint64_t ticket)
{
	for (;;)
	{
		uint64_t	w = atomic_load_explicit(&cell->word, memory_order_acquire);
		uint32_t	st = TDB_SUBREQ_STATE(w);
		uint64_t	nw;

		if (TDB_SUBREQ_TICKET(w) != ticket || TDB_SUBREQ_OWNER(w) != me)
			return false;		/* not ours any more (the daemon took it back) */
		if (st == TDB_SUBREQ_ANSWERED)
			return true;
		if (st == TDB_SUBREQ_FILLING || st == TDB_SUBREQ_POSTED)
			nw = TDB_SUBREQ_WORD(TDB_SUBREQ_FREE, 0, 0, ticket);
		else if (st == TDB_SUBREQ_TAKEN || st == TDB_SUBREQ_WRITING)
			nw = TDB_SUBREQ_WORD(st == TDB_SUBREQ_WRITING ? TDB_SUBREQ_ORPHANED_WRITING : TDB_SUBREQ_ORPHANED, me,
								 TDB_SUBREQ_TAKER(w), ticket);
		else
			return false;
		if (atomic_compare_exchange_strong_explicit(&cell->word, &w, nw, memory_order_seq_cst,
													memory_order_relaxed))
			return false;
	}
}

/* Read the answer of an ANSWERED cell of ours and free it. */
static int
take_answer(TdbSubConsumer *c, TdbSubReqCell *cell, uint32_t idx, uint64_t ticket, void *resp, uint32_t cap)
{
	uint32_t	n = atomic_load_explicit(&cell->resp_len, memory_order_relaxed);
	uint64_t	w;
	int			rc;

	if (n > TDB_SUBREQ_MAX_BYTES)
	{
		snprintf(c->err, sizeof(c->err), "request cell %u: an answer of %u bytes (at most %d): dropped", idx, n,
				 TDB_SUBREQ_MAX_BYTES);
		rc = TDB_SHM_ECORRUPT;
	}
	else if (n > cap)
	{
		snprintf(c->err, sizeof(c->err), "an answer of %u bytes does not fit the %u bytes given: dropped", n, cap);
		rc = TDB_SHM_EINVAL;
	}
	else
	{
		if (n > 0)
			memcpy(resp, tdb_subreq_payload(c->req_area, c->nslots, idx) + TDB_SUBREQ_MAX_BYTES, n);
		rc = (int) n;
	}
	/* release: the copy above happened before anyone claims the cell again */
	w = atomic_load_explicit(&cell->word, memory_order_relaxed);
	if (TDB_SUBREQ_STATE(w) == TDB_SUBREQ_ANSWERED && TDB_SUBREQ_TICKET(w) == ticket)
		atomic_compare_exchange_strong_explicit(&cell->word, &w, TDB_SUBREQ_WORD(TDB_SUBREQ_FREE, 0, 0, ticket),
												memory_order_release, memory_order_relaxed);
	return rc;
}

int
tdb_subreq_call(TdbSubConsumer *c, uint64_t group_id, const void *req, uint32_t len, void *resp, uint32_t cap,
				int timeout_ms)
{
	uint32_t	me,
				ncells,
				idx = 0;
	TdbSubReqCell *cell = NULL;
	uint64_t	ticket = 0;
	int64_t		deadline,
				next_probe;
	int			rc;

	if (len > TDB_SUBREQ_MAX_BYTES || (len > 0 && req == NULL) || (cap > 0 && resp == NULL) || group_id == 0 ||
		timeout_ms < 0)
	{
		snprintf(c->err, sizeof(c->err),
				 "a request of %u bytes (at most %d) to group %llu with a timeout of %d ms is not valid",
				 len, TDB_SUBREQ_MAX_BYTES, (unsigned long long) group_id, timeout_ms);
		return TDB_SHM_EINVAL;
	}
	if ((rc = map_area(c)) != TDB_SHM_OK)
		return rc;
	if (stopped(c))
	{
		snprintf(c->err, sizeof(c->err), "\"%s\": the server stopped: open again later", c->name);
		return TDB_SHM_ESTALE;
	}
	if (!group_has_member(c, group_id))
	{
		snprintf(c->err, sizeof(c->err), "group %llu has no member", (unsigned long long) group_id);
		return TDB_SUBREQ_ENOMEMBER;
	}
	me = (uint32_t) c->slot_idx;
	ncells = tdb_subreq_cells(c->nslots);
	for (uint32_t k = 0; k < ncells && cell == NULL; k++)
	{
		uint32_t	i = (c->req_next + k) % ncells;
		TdbSubReqCell *x = tdb_subreq_cell(c->req_area, c->nslots, i);
		uint64_t	w = atomic_load_explicit(&x->word, memory_order_relaxed);

		if (TDB_SUBREQ_STATE(w) != TDB_SUBREQ_FREE)
			continue;
		ticket = next_ticket(w);
		/* acquire: the last user's reads of the payload happened before we write it */
		if (atomic_compare_exchange_strong_explicit(&x->word, &w, TDB_SUBREQ_WORD(TDB_SUBREQ_FILLING, me, 0, ticket),
													memory_order_acquire, memory_order_relaxed))
		{
			cell = x;
			idx = i;
			c->req_next = i + 1;
		}
	}
	if (cell == NULL)
	{
		snprintf(c->err, sizeof(c->err), "all %u request cells of \"%s\" are in use", ncells, c->name);
		return TDB_SHM_ENOSLOT;
	}
	if (len > 0)
		memcpy(tdb_subreq_payload(c->req_area, c->nslots, idx), req, len);
	atomic_store_explicit(&cell->req_len, len, memory_order_relaxed);
	atomic_store_explicit(&cell->resp_len, 0, memory_order_relaxed);
	atomic_store_explicit(&cell->group_id, group_id, memory_order_relaxed);
	atomic_store_explicit(&cell->waiters, 0, memory_order_relaxed);
	atomic_store_explicit(&cell->owner_pid, (int32_t) getpid(), memory_order_relaxed);
	atomic_store_explicit(&cell->taker_pid, 0, memory_order_relaxed);
	atomic_store_explicit(&cell->posted_us, tdb_mono_us(), memory_order_relaxed);
	{
		uint64_t	w = TDB_SUBREQ_WORD(TDB_SUBREQ_FILLING, me, 0, ticket);

		/* release: a member that sees POSTED sees the request, its length and group */
		if (!atomic_compare_exchange_strong_explicit(&cell->word, &w, TDB_SUBREQ_WORD(TDB_SUBREQ_POSTED, me, 0, ticket),
													 memory_order_seq_cst, memory_order_relaxed))
		{
			snprintf(c->err, sizeof(c->err), "request cell %u was taken from us while we filled it", idx);
			return TDB_SHM_ECORRUPT;
		}
	}
	wake_member(c->req_area, c->nslots, group_id, (uint32_t) (ticket % c->nslots));

	deadline = tdb_mono_us() + (int64_t) timeout_ms * 1000;
	next_probe = tdb_mono_us() + PROBE_MS * 1000;
	for (;;)
	{
		uint32_t	f = atomic_load_explicit(&cell->futex, memory_order_acquire);
		uint64_t	w;
		uint32_t	st;
		int64_t		now,
					left_ms;
		long		frc;

		/* Dekker with the member's answer: we store waiters, fence, read the word; it the reverse */
		atomic_store_explicit(&cell->waiters, 1, memory_order_relaxed);
		atomic_thread_fence(memory_order_seq_cst);
		w = atomic_load_explicit(&cell->word, memory_order_acquire);
		st = TDB_SUBREQ_STATE(w);
		if (TDB_SUBREQ_TICKET(w) != ticket || TDB_SUBREQ_OWNER(w) != me || st == TDB_SUBREQ_FREE)
		{
			atomic_store_explicit(&cell->waiters, 0, memory_order_relaxed);
			snprintf(c->err, sizeof(c->err), "request cell %u was taken from us while we waited", idx);
			return TDB_SHM_ECORRUPT;
		}
		if (st == TDB_SUBREQ_ANSWERED)
		{
			atomic_store_explicit(&cell->waiters, 0, memory_order_relaxed);
			return take_answer(c, cell, idx, ticket, resp, cap);
		}
		now = tdb_mono_us();
		if ((st == TDB_SUBREQ_TAKEN || st == TDB_SUBREQ_WRITING) && now >= next_probe)
		{
			uint32_t	taker = TDB_SUBREQ_TAKER(w);

			next_probe = now + PROBE_MS * 1000;
			if (taker != me && taker < c->nslots && slot_lock_nb(c, taker, F_WRLCK))
			{
				/* the member died or left with our request: post it again for the others */
				bool		reposted = atomic_compare_exchange_strong_explicit(&cell->word, &w,
																			   TDB_SUBREQ_WORD(TDB_SUBREQ_POSTED, me, 0, ticket),
																			   memory_order_seq_cst, memory_order_relaxed);

				slot_lock_nb(c, taker, F_UNLCK);
				if (reposted)
					wake_member(c->req_area, c->nslots, group_id, (taker + 1) % c->nslots);
				atomic_store_explicit(&cell->waiters, 0, memory_order_relaxed);
				continue;
			}
		}
		left_ms = (deadline - now + 999) / 1000;
		if (stopped(c) || left_ms <= 0)
		{
			atomic_store_explicit(&cell->waiters, 0, memory_order_relaxed);
			if (withdraw(cell, me, ticket))
				return take_answer(c, cell, idx, ticket, resp, cap);
			if (stopped(c))
			{
				snprintf(c->err, sizeof(c->err), "\"%s\": the server stopped: open again later", c->name);
				return TDB_SHM_ESTALE;
			}
			snprintf(c->err, sizeof(c->err), "no answer from group %llu within %d ms: the request is withdrawn",
					 (unsigned long long) group_id, timeout_ms);
			return TDB_SUBREQ_ETIMEDOUT;
		}
		frc = futex_wait_ms(&cell->futex, f, left_ms < PROBE_MS ? left_ms : PROBE_MS);
		atomic_store_explicit(&cell->waiters, 0, memory_order_relaxed);
		if (frc != 0 && errno == EINTR)
		{
			if (withdraw(cell, me, ticket))
				return take_answer(c, cell, idx, ticket, resp, cap);
			snprintf(c->err, sizeof(c->err), "a signal interrupted the wait: the request is withdrawn");
			return TDB_SUBRING_EINTR;
		}
	}
}

/* ---- the member ------------------------------------------------------------------ */

int
tdb_subreq_take(TdbSubConsumer *c, TdbSubReqTaken *taken, void *buf, int timeout_ms)
{
	uint32_t	me,
				ncells;
	uint64_t	g;
	TdbSubBell *bell;
	int64_t		deadline;
	int			rc;

	if (c->slot == NULL || c->slot->group_id == 0 || taken == NULL || buf == NULL || timeout_ms < 0)
	{
		snprintf(c->err, sizeof(c->err), "%s", c->slot == NULL ? "not subscribed" :
				 c->slot->group_id == 0 ? "only a member of a group takes requests" : "a NULL argument or a negative timeout");
		return TDB_SHM_EINVAL;
	}
	if ((rc = map_area(c)) != TDB_SHM_OK)
		return rc;
	me = (uint32_t) c->slot_idx;
	g = c->slot->group_id;
	ncells = tdb_subreq_cells(c->nslots);
	bell = tdb_subreq_bell(c->req_area, me);
	atomic_store_explicit(&bell->group_id, g, memory_order_relaxed);
	deadline = tdb_mono_us() + (int64_t) timeout_ms * 1000;
	for (;;)
	{
		uint32_t	word = atomic_load_explicit(&bell->word, memory_order_acquire);
		int64_t		left_ms;
		long		frc;

		/* Dekker with the requester: we store waiters, fence, scan; it posts, fences, reads waiters */
		atomic_store_explicit(&bell->waiters, 1, memory_order_relaxed);
		atomic_thread_fence(memory_order_seq_cst);
		for (uint32_t k = 0; k < ncells; k++)
		{
			uint32_t	i = (c->req_next + k) % ncells;
			TdbSubReqCell *x = tdb_subreq_cell(c->req_area, c->nslots, i);
			uint64_t	w = atomic_load_explicit(&x->word, memory_order_acquire);
			uint32_t	len;

			if (TDB_SUBREQ_STATE(w) == TDB_SUBREQ_ORPHANED && TDB_SUBREQ_TAKER(w) == me)
			{
				/*
				 * A request we took and did not answer (yet) whose requester
				 * gave up: nobody else frees it, and an answer to it would be
				 * dropped all the same (the ticket, or our slot as taker, no
				 * longer match).  Not ORPHANED_WRITING: an answer is being
				 * written there, and its writer frees it.
				 */
				atomic_compare_exchange_strong_explicit(&x->word, &w,
														TDB_SUBREQ_WORD(TDB_SUBREQ_FREE, 0, 0, TDB_SUBREQ_TICKET(w)),
														memory_order_release, memory_order_relaxed);
				continue;
			}
			if (TDB_SUBREQ_STATE(w) != TDB_SUBREQ_POSTED || atomic_load_explicit(&x->group_id, memory_order_relaxed) != g)
				continue;
			/* acquire: the request written before POSTED is ours to read */
			if (!atomic_compare_exchange_strong_explicit(&x->word, &w,
														 TDB_SUBREQ_WORD(TDB_SUBREQ_TAKEN, TDB_SUBREQ_OWNER(w), me,
																		 TDB_SUBREQ_TICKET(w)),
														 memory_order_seq_cst, memory_order_relaxed))
				continue;
			atomic_store_explicit(&bell->waiters, 0, memory_order_relaxed);
			atomic_store_explicit(&x->taker_pid, (int32_t) getpid(), memory_order_relaxed);
			len = atomic_load_explicit(&x->req_len, memory_order_relaxed);
			if (len > TDB_SUBREQ_MAX_BYTES)
				len = TDB_SUBREQ_MAX_BYTES; /* a requester's bad length: the cell holds no more */
			memcpy(buf, tdb_subreq_payload(c->req_area, c->nslots, i), len);
			taken->cell = i;
			taken->ticket = TDB_SUBREQ_TICKET(w);
			taken->len = len;
			taken->requester_pid = atomic_load_explicit(&x->owner_pid, memory_order_relaxed);
			c->req_next = i + 1;
			return 1;
		}
		if (stopped(c))
		{
			atomic_store_explicit(&bell->waiters, 0, memory_order_relaxed);
			snprintf(c->err, sizeof(c->err), "\"%s\": the server stopped: open again later", c->name);
			return TDB_SHM_ESTALE;
		}
		left_ms = (deadline - tdb_mono_us() + 999) / 1000;
		if (left_ms <= 0)
		{
			atomic_store_explicit(&bell->waiters, 0, memory_order_relaxed);
			return 0;
		}
		frc = futex_wait_ms(&bell->word, word, left_ms < TAKE_POLL_MS ? left_ms : TAKE_POLL_MS);
		atomic_store_explicit(&bell->waiters, 0, memory_order_relaxed);
		if (frc != 0 && errno == EINTR)
			return TDB_SUBRING_EINTR;
	}
}

int
tdb_subreq_answer(TdbSubConsumer *c, const TdbSubReqTaken *taken, const void *resp, uint32_t len)
{
	uint32_t	me;
	TdbSubReqCell *cell;
	uint64_t	w;

	if (c->slot == NULL || c->req_area == NULL || taken == NULL || taken->cell >= tdb_subreq_cells(c->nslots) ||
		len > TDB_SUBREQ_MAX_BYTES || (len > 0 && resp == NULL))
	{
		snprintf(c->err, sizeof(c->err), "an answer of %u bytes (at most %d) to cell %u is not valid", len,
				 TDB_SUBREQ_MAX_BYTES, taken ? taken->cell : 0);
		return TDB_SHM_EINVAL;
	}
	me = (uint32_t) c->slot_idx;
	cell = tdb_subreq_cell(c->req_area, c->nslots, taken->cell);
	for (int step = 0; step < 2;)
	{
		uint32_t	want = step == 0 ? TDB_SUBREQ_TAKEN : TDB_SUBREQ_WRITING;
		uint32_t	next = step == 0 ? TDB_SUBREQ_WRITING : TDB_SUBREQ_ANSWERED;

		w = atomic_load_explicit(&cell->word, memory_order_acquire);
		if (TDB_SUBREQ_TICKET(w) != taken->ticket || TDB_SUBREQ_TAKER(w) != me ||
			(TDB_SUBREQ_STATE(w) != want && !TDB_SUBREQ_IS_ORPHANED(TDB_SUBREQ_STATE(w))))
		{
			snprintf(c->err, sizeof(c->err), "request cell %u is no longer ours: answer dropped", taken->cell);
			return TDB_SUBREQ_EGONE;
		}
		if (TDB_SUBREQ_IS_ORPHANED(TDB_SUBREQ_STATE(w)))
		{
			/* the requester gave up or died: the cell is ours to free */
			atomic_compare_exchange_strong_explicit(&cell->word, &w,
													TDB_SUBREQ_WORD(TDB_SUBREQ_FREE, 0, 0, taken->ticket),
													memory_order_release, memory_order_relaxed);
			snprintf(c->err, sizeof(c->err), "the requester of cell %u gave up or left: answer dropped", taken->cell);
			return TDB_SUBREQ_EGONE;
		}
		/* release (ANSWERED): the answer written below is visible to the requester that sees it */
		if (!atomic_compare_exchange_strong_explicit(&cell->word, &w,
													 TDB_SUBREQ_WORD(next, TDB_SUBREQ_OWNER(w), me, taken->ticket),
													 memory_order_seq_cst, memory_order_relaxed))
			continue;			/* moved meanwhile (ORPHANED): judge it again */
		if (step == 0)
		{
			if (len > 0)
				memcpy(tdb_subreq_payload(c->req_area, c->nslots, taken->cell) + TDB_SUBREQ_MAX_BYTES, resp, len);
			atomic_store_explicit(&cell->resp_len, len, memory_order_relaxed);
		}
		step++;
	}
	/* Dekker with the requester's wait: the word stored (seq_cst CAS), fence, its flag read */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&cell->waiters, memory_order_relaxed) != 0)
	{
		atomic_fetch_add_explicit(&cell->futex, 1, memory_order_seq_cst);
		futex_wake(&cell->futex, 1);
	}
	return TDB_SHM_OK;
}
