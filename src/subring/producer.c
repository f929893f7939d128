/*
 * producer.c
 *	  Subscribers' event rings (subring.h): the daemon's side (create,
 *	  sweep, push, wake, handover).  The consumer's (open, subscribe,
 *	  receive, close) is consumer.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE				/* F_OFD_SETLK */
#endif
#include "subring/subring.h"
#include "subring/slot_io.h"

#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* TdbSubLocal.mode */
#define SUBLOCAL_DETACHED	0		/* pushes refused */
#define SUBLOCAL_ATTACHED	1		/* ACTIVE, alive when last swept: pushes accepted */
#define SUBLOCAL_RECLAIMING 2		/* owner gone; we hold its lock until take_undelivered ends */

static void
futex_wake_all(_Atomic uint32_t *word)
{
	/* shared futex: the word lives in a mapping other processes share */
	syscall(SYS_futex, (uint32_t *) word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* ---- producer ------------------------------------------------------------------ */

static int
producer_fail(TdbSubring *r, char *err, int code, const char *what)
{
	int			save = errno;

	snprintf(err, TDB_SHM_ERRLEN, "%s \"%s\": %s", what, r->name, strerror(save));
	tdb_subring_close(r);
	return code;
}

/*
 * Mark a subscriptions object left by someone else stopped and wake its
 * consumers, so that they learn to subscribe again (it is unlinked next).
 */
static void
stop_previous(int fd)
{
	struct stat st;
	void	   *p;
	TdbSubsHeader *h;
	uint32_t	nslots,
				ring_events;

	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
		(size_t) st.st_size < sizeof(TdbSubsHeader))
		return;
	p = mmap(NULL, (size_t) st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return;
	h = p;
	/* the geometry read once: the file is writable by its group, who may change it meanwhile */
	nslots = __atomic_load_n(&h->nslots, __ATOMIC_RELAXED);
	ring_events = __atomic_load_n(&h->ring_events, __ATOMIC_RELAXED);
	if (h->magic == TDB_SUBS_MAGIC)
	{
		atomic_store_explicit(&h->state, TDB_SUBRING_STOPPED, memory_order_seq_cst);
		/* geometry from the file: checked against its size before any slot is touched */
		if (tdb_subring_geometry_ok(nslots, ring_events) &&
			(size_t) st.st_size >= tdb_subring_size(nslots, ring_events))
			for (uint32_t i = 0; i < nslots; i++)
			{
				TdbSubSlot *s = tdb_subring_slot(p, ring_events, i);

				if (atomic_load_explicit(&s->state, memory_order_relaxed) == TDB_SUBSLOT_FREE)
					continue;	/* never touch pages nobody reserved */
				atomic_fetch_add_explicit(&s->wake_word, 1, memory_order_seq_cst);
				futex_wake_all(&s->wake_word);
			}
		/*
		 * Members waiting for requests, requesters waiting for answers.
		 * Only those whose flag says so (Dekker with STOPPED stored above,
		 * seq_cst store then seq_cst loads: one stored later sees STOPPED
		 * before it sleeps), so that no page of a file someone made sparse
		 * is written.
		 */
		if (h->version == TDB_SUBS_VERSION && tdb_subring_geometry_ok(nslots, ring_events) &&
			(size_t) st.st_size >= tdb_subring_size(nslots, ring_events))
		{
			void	   *area = (char *) p + tdb_subreq_offset(nslots, ring_events);

			for (uint32_t i = 0; i < nslots; i++)
			{
				TdbSubBell *b = tdb_subreq_bell(area, i);

				if (atomic_load_explicit(&b->waiters, memory_order_seq_cst) == 0)
					continue;
				atomic_fetch_add_explicit(&b->word, 1, memory_order_seq_cst);
				futex_wake_all(&b->word);
			}
			for (uint32_t i = 0; i < tdb_subreq_cells(nslots); i++)
			{
				TdbSubReqCell *c = tdb_subreq_cell(area, nslots, i);

				if (atomic_load_explicit(&c->waiters, memory_order_seq_cst) == 0)
					continue;
				atomic_fetch_add_explicit(&c->futex, 1, memory_order_seq_cst);
				futex_wake_all(&c->futex);
			}
		}
	}
	munmap(p, (size_t) st.st_size);
}

int
tdb_subring_create(TdbSubring *r, const char *prefix, uint32_t nslots, uint32_t ring_events, gid_t gid,
				   uint64_t instance_id, char *err)
{
	int			fd;
	const char *what;
	mode_t		mode = gid == (gid_t) -1 ? 0600 : 0660;
	TdbSubsHeader *h;

	memset(r, 0, sizeof(*r));
	r->fd = -1;
	if (!tdb_shm_prefix_ok(prefix, err))
		return TDB_SHM_EINVAL;
	if (!tdb_subring_geometry_ok(nslots, ring_events))
	{
		snprintf(err, TDB_SHM_ERRLEN, "subscriber rings: %u slots of %u events: slots must be 1 .. %d, events a power of two in %d .. %u",
				 nslots, ring_events, TDB_SUBRING_MAX_SLOTS, TDB_SUBRING_MIN_EVENTS, TDB_SUBRING_MAX_EVENTS);
		return TDB_SHM_EINVAL;
	}
	tdb_shm_name(r->name, prefix, "subs");
	r->nslots = nslots;
	r->ring_events = ring_events;
	r->instance_id = instance_id;
	r->size = tdb_subring_size(nslots, ring_events);
	r->local = calloc(nslots, sizeof(TdbSubLocal));
	if (r->local == NULL)
	{
		errno = ENOMEM;
		return producer_fail(r, err, TDB_SHM_ESYS, "cannot allocate the state of");
	}

	fd = shm_open(r->name, O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
	if (fd >= 0)
	{
		stop_previous(fd);
		close(fd);
		shm_unlink(r->name);
	}
	else if (errno != ENOENT)
		return producer_fail(r, err, tdb_shm_errno_result(), "cannot open");

	/* sparse: consumers reserve their slot's pages; the header now, so a full /dev/shm fails here */
	fd = tdb_shm_create_fd(r->name, r->size, TDB_SUBRING_HEADER_SIZE, mode, gid, &r->base, &what);
	if (fd < 0)
	{
		r->base = NULL;
		return producer_fail(r, err, tdb_shm_errno_result(), what);
	}
	r->fd = fd;
	h = r->base;
	h->version = TDB_SUBS_VERSION;
	h->header_size = TDB_SUBRING_HEADER_SIZE;
	h->instance_id = instance_id;
	h->nslots = nslots;
	h->ring_events = ring_events;
	h->filter_size = TDB_SUBRING_FILTER_SIZE;
	h->slot_size = tdb_subring_slot_size(ring_events);
	h->slots_offset = TDB_SUBRING_HEADER_SIZE;
	h->req_cells = tdb_subreq_cells(nslots);
	h->req_max_bytes = TDB_SUBREQ_MAX_BYTES;
	h->req_offset = tdb_subreq_offset(nslots, ring_events);
	/* the request area's pages now: everyone writes there, and nobody may get a SIGBUS */
	{
		int			rc = EINTR;

		for (int tries = 0; rc == EINTR && tries < 100; tries++)
			rc = posix_fallocate(fd, (off_t) h->req_offset, (off_t) tdb_subreq_area_size(nslots));
		if (rc != 0)
		{
			errno = rc;
			shm_unlink(r->name);
			return producer_fail(r, err, tdb_shm_errno_result(), "cannot reserve the request area of");
		}
	}
	atomic_store_explicit(&h->state, TDB_SUBRING_STARTING, memory_order_relaxed);
	/* the magic last: a consumer that opens the object before sees no segment yet */
	__atomic_store_n(&h->magic, TDB_SUBS_MAGIC, __ATOMIC_RELEASE);
	return TDB_SHM_OK;
}

bool
tdb_subring_intact(const TdbSubring *r)
{
	struct stat sb;

	return r->base != NULL && fstat(r->fd, &sb) == 0 && (size_t) sb.st_size >= r->size;
}

static bool
header_ok(TdbSubring *r)
{
	const TdbSubsHeader *h = r->base;
	uint32_t	state;

	if (!(__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) == TDB_SUBS_MAGIC && h->version == TDB_SUBS_VERSION &&
		  h->header_size == TDB_SUBRING_HEADER_SIZE && h->instance_id == r->instance_id &&
		  h->nslots == r->nslots && h->ring_events == r->ring_events && h->filter_size == TDB_SUBRING_FILTER_SIZE &&
		  h->req_cells == tdb_subreq_cells(r->nslots) && h->req_max_bytes == TDB_SUBREQ_MAX_BYTES))
	{
		snprintf(r->damage, sizeof(r->damage), "its header was overwritten (magic %08x, format %u, %u slots of %u events)",
				 h->magic, h->version, h->nslots, h->ring_events);
		return false;
	}
	state = atomic_load_explicit(&h->state, memory_order_acquire);
	if (state != r->state)
	{
		snprintf(r->damage, sizeof(r->damage), "its state word was set to %u (%u expected), which %s", state, r->state,
				 state == TDB_SUBRING_STOPPED ? "refuses every subscriber" : "is not ours");
		return false;
	}
	return true;
}

void
tdb_subring_abandon(TdbSubring *r)
{
	if (r->base != NULL)
	{
		/* still as large as made: every store below lands in pages that exist */
		if (tdb_subring_intact(r))
			tdb_subring_set_state(r, TDB_SUBRING_STOPPED);
		shm_unlink(r->name);
	}
	tdb_subring_close(r);
}

static inline TdbSubSlot *
pslot(const TdbSubring *r, uint32_t i)
{
	return tdb_subring_slot(r->base, r->ring_events, i);
}

/* Write ev at position pos of slot s (seq = pos + 1); published by the caller's head store. */
static inline void
put_at(TdbSubring *r, TdbSubSlot *s, uint64_t pos, const TdbSubEvent *ev)
{
	TdbSubEvent *e = &tdb_subring_events(s)[pos & (r->ring_events - 1)];

	copy_event(e, ev);
	e->seq = pos + 1;
	e->reserved[0] = e->reserved[1] = 0;
}

static inline void
put_overrun(TdbSubring *r, TdbSubSlot *s, TdbSubLocal *L, uint64_t pos)
{
	TdbSubEvent ov;

	memset(&ov, 0, sizeof(ov));
	ov.kind = TDB_SUBEV_OVERRUN;
	ov.generation = L->overrun_generation;
	ov.location_id = L->overrun_dropped;
	ov.created_us = 0;
	put_at(r, s, pos, &ov);
	L->overrun = false;
	L->overrun_dropped = 0;
	atomic_store_explicit(&s->overrun, 0, memory_order_relaxed);
}

/* Events in the slot's ring not yet delivered: head - tail, or > ring_events when the tail is bad. */
static inline uint64_t
used_of(TdbSubSlot *s, const TdbSubLocal *L)
{
	/* acquire: the consumer's copies of the events below tail happened before */
	uint64_t	tail = atomic_load_explicit(&s->tail, memory_order_acquire);

	return L->head - tail;		/* unsigned: a tail past head is huge too */
}

/* Store head over what was written since the last store: one release, one count. */
static inline void
publish_head(TdbSubSlot *s, TdbSubLocal *L)
{
	if (L->deferred > 0)
		atomic_fetch_add_explicit(&s->pushed, L->deferred, memory_order_relaxed);
	L->deferred = 0;
	/* release: the events written above are visible to whoever sees this head */
	atomic_store_explicit(&s->head, L->head, memory_order_release);
}

/* The wake-up of tdb_subring_wake, for a slot whose head is stored. */
static bool
wake_waiter(TdbSubring *r, TdbSubSlot *s)
{
	/*
	 * Dekker with the consumer: it stores waiters, fences, re-reads head;
	 * we stored head (release, in publish_head), fence, read waiters.
	 * Either it sees our head and does not sleep, or we see its flag and
	 * wake it (the word bumped first, so a FUTEX_WAIT that has not started
	 * yet returns EAGAIN).
	 */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&s->waiters, memory_order_relaxed) == 0)
		return false;
	atomic_fetch_add_explicit(&s->wake_word, 1, memory_order_seq_cst);
	futex_wake_all(&s->wake_word);
	r->wakes_total++;
	return true;
}

static int
push_one(TdbSubring *r, uint32_t slot, const TdbSubEvent *ev, bool defer)
{
	TdbSubLocal *L;
	TdbSubSlot *s;
	uint64_t	used;
	uint64_t	room;

	if (slot >= r->nslots || r->local[slot].mode != SUBLOCAL_ATTACHED)
		return TDB_SHM_EINVAL;
	L = &r->local[slot];
	s = pslot(r, slot);
	used = used_of(s, L);
	if (used > r->ring_events)
	{
		r->damaged_total++;
		return TDB_SHM_ECORRUPT;
	}
	room = r->ring_events - used;
	if (L->overrun)
	{
		/* the OVERRUN goes right before the next event: both must fit */
		if (room < 2)
		{
			L->overrun_dropped++;
			atomic_fetch_add_explicit(&s->dropped, 1, memory_order_relaxed);
			if (L->deferred > 0)
			{
				/* full: the consumer must see all that the ring holds to make room */
				publish_head(s, L);
				(void) wake_waiter(r, s);
			}
			return TDB_SUBRING_DROPPED;
		}
		put_overrun(r, s, L, L->head);
		L->head++;
		L->deferred++;
	}
	else if (room < 1)
	{
		L->overrun = true;
		L->overrun_generation = ev->generation;
		L->overrun_dropped = 1;
		atomic_store_explicit(&s->overrun_generation, ev->generation, memory_order_relaxed);
		atomic_store_explicit(&s->overrun, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&s->dropped, 1, memory_order_relaxed);
		L->wake_pending = true; /* the consumer should come and make room */
		if (L->deferred > 0)
		{
			publish_head(s, L);
			(void) wake_waiter(r, s);
		}
		return TDB_SUBRING_DROPPED;
	}
	put_at(r, s, L->head, ev);
	L->head++;
	L->deferred++;
	L->wake_pending = true;
	if (!defer)
		publish_head(s, L);
	else if (L->deferred >= TDB_SUBRING_PUBLISH_EVERY || L->deferred >= r->ring_events / 4)
	{
		/* a long batch: let the consumer drain while it goes on */
		publish_head(s, L);
		(void) wake_waiter(r, s);
	}
	return TDB_SUBRING_PUSHED;
}

int
tdb_subring_push(TdbSubring *r, uint32_t slot, const TdbSubEvent *ev)
{
	return push_one(r, slot, ev, false);
}

int
tdb_subring_push_deferred(TdbSubring *r, uint32_t slot, const TdbSubEvent *ev)
{
	return push_one(r, slot, ev, true);
}

uint32_t
tdb_subring_space(const TdbSubring *r, uint32_t slot)
{
	const TdbSubLocal *L;
	uint64_t	used;

	if (slot >= r->nslots || r->local[slot].mode != SUBLOCAL_ATTACHED)
		return 0;
	L = &r->local[slot];
	used = used_of(pslot(r, slot), L);
	if (used > r->ring_events)
		return 0;
	if (L->overrun)
		return r->ring_events - used >= 2 ? (uint32_t) (r->ring_events - used - 1) : 0;
	return (uint32_t) (r->ring_events - used);
}

/* Put an owed OVERRUN if one event fits (so the consumer learns of it without a next event). */
static void
flush_overrun(TdbSubring *r, uint32_t slot)
{
	TdbSubLocal *L = &r->local[slot];
	TdbSubSlot *s;
	uint64_t	used;

	if (!L->overrun || L->mode != SUBLOCAL_ATTACHED)
		return;
	s = pslot(r, slot);
	used = used_of(s, L);
	if (used >= r->ring_events)
		return;					/* still full, or a bad tail */
	put_overrun(r, s, L, L->head);
	L->head++;
	L->deferred++;
	publish_head(s, L);
	L->wake_pending = true;
}

bool
tdb_subring_wake(TdbSubring *r, uint32_t slot)
{
	TdbSubSlot *s;

	if (slot >= r->nslots || r->local[slot].mode != SUBLOCAL_ATTACHED)
		return false;
	s = pslot(r, slot);
	if (r->local[slot].deferred > 0)
		publish_head(s, &r->local[slot]);	/* the rest of a push_deferred batch */
	flush_overrun(r, slot);
	r->local[slot].wake_pending = false;
	return wake_waiter(r, s);
}

uint32_t
tdb_subring_wake_pending(TdbSubring *r)
{
	uint32_t	n = 0;

	for (uint32_t i = 0; i < r->nslots; i++)
		if (r->local[i].wake_pending || r->local[i].overrun)
			n += tdb_subring_wake(r, i) ? 1 : 0;
	return n;
}

/* Make a slot we hold the lock of FREE again and let it go. */
static void
free_slot(TdbSubring *r, uint32_t i)
{
	TdbSubSlot *s = pslot(r, i);
	TdbSubLocal *L = &r->local[i];

	/* the next owner starts where we are: nothing of the last one's is readable */
	atomic_store_explicit(&s->tail, L->head, memory_order_relaxed);
	atomic_store_explicit(&s->head, L->head, memory_order_relaxed);
	atomic_store_explicit(&s->waiters, 0, memory_order_relaxed);
	atomic_store_explicit(&s->pid, 0, memory_order_relaxed);
	atomic_store_explicit(&s->overrun, 0, memory_order_relaxed);
	/* release: a consumer that sees FREE (and takes the lock after us) sees the above */
	atomic_store_explicit(&s->state, TDB_SUBSLOT_FREE, memory_order_release);
	L->mode = SUBLOCAL_DETACHED;
	L->overrun = false;
	L->overrun_dropped = 0;
	L->wake_pending = false;
	L->deferred = 0;
	L->reclaim_pos = L->head;
	slot_lock(r->fd, F_OFD_SETLK, F_UNLCK, i);
}

/* A sweep's report of slot i, as our view L of it says. */
static TdbSubChange *
new_change(TdbSubChange *c, uint32_t kind, uint32_t i, const TdbSubLocal *L)
{
	memset(c, 0, sizeof(*c));
	c->kind = kind;
	c->slot = i;
	c->pid = L->pid;
	c->group_id = L->group_id;
	c->group_mode = L->group_mode;
	return c;
}

int
tdb_subring_sweep(TdbSubring *r, TdbSubChange *out, uint32_t max, uint32_t *nout)
{
	uint32_t	n = 0;
	uint32_t	k;

	*nout = 0;
	if (!tdb_subring_intact(r))
	{
		struct stat sb;

		snprintf(r->damage, sizeof(r->damage), "it was truncated to %lld bytes (%zu expected)",
				 fstat(r->fd, &sb) == 0 ? (long long) sb.st_size : -1LL, r->size);
		return TDB_SHM_ECORRUPT;
	}
	if (!header_ok(r))
		return TDB_SHM_ECORRUPT;
	for (k = 0; k < r->nslots && n < max; k++)
	{
		uint32_t	i = (r->sweep_next + k) % r->nslots;
		TdbSubLocal *L = &r->local[i];
		TdbSubSlot *s = pslot(r, i);
		uint32_t	state;

		if (L->mode == SUBLOCAL_RECLAIMING)
			continue;			/* ours until take_undelivered or discard ends it */
		state = atomic_load_explicit(&s->state, memory_order_acquire);
		if (state == TDB_SUBSLOT_FREE && L->mode == SUBLOCAL_DETACHED)
			continue;
		if (slot_lock(r->fd, F_OFD_SETLK, F_WRLCK, i) == 0)
		{
			/* nobody holds it: the owner died or left (or made it FREE, which is ours to do) */
			/* its requests first, while nobody can own the slot: withdrawn, or posted again */
			r->requests_reclaimed += tdb_subreq_reclaim((char *) r->base + tdb_subreq_offset(r->nslots, r->ring_events),
														r->nslots, i);
			if (L->mode == SUBLOCAL_ATTACHED)
			{
				uint64_t	used = used_of(s, L);
				TdbSubChange *c = new_change(&out[n++], TDB_SUBCHANGE_RECLAIMED, i, L);

				if (used > r->ring_events)
				{
					c->tail_damaged = true;
					r->damaged_total++;
					used = 0;
				}
				c->tail = L->head - used;
				c->undelivered = used;
				if (L->overrun)
				{
					c->overrun_generation = L->overrun_generation;
					c->overrun_dropped = L->overrun_dropped;
				}
				L->mode = SUBLOCAL_RECLAIMING;
				L->reclaim_pos = L->head - used;
				L->overrun = false;
				L->wake_pending = false;
				if (used == 0)
					free_slot(r, i);	/* nothing to hand over: claimable at once */
			}
			else
				free_slot(r, i);	/* it never got attached: nothing of ours in it */
			continue;
		}
		if (errno != EAGAIN && errno != EACCES)
			continue;			/* cannot judge: leave it as it is */
		/* alive */
		if (state == TDB_SUBSLOT_ACTIVE && L->mode == SUBLOCAL_DETACHED)
		{
			TdbSubChange *c = &out[n++];
			uint32_t	flen = s->filter_len;

			L->mode = SUBLOCAL_ATTACHED;
			L->overrun = false;
			L->overrun_dropped = 0;
			L->wake_pending = false;
			L->group_id = s->group_id;
			L->group_mode = s->group_mode;
			L->filter_len = flen > TDB_SUBRING_FILTER_SIZE ? TDB_SUBRING_FILTER_SIZE : flen;
			L->pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
			new_change(c, TDB_SUBCHANGE_ATTACHED, i, L)->filter_len = L->filter_len;
		}
		else if (L->mode == SUBLOCAL_ATTACHED)
			flush_overrun(r, i);
	}
	r->sweep_next = (r->sweep_next + k) % r->nslots;
	*nout = n;
	return TDB_SHM_OK;
}

uint32_t
tdb_subring_take_undelivered(TdbSubring *r, uint32_t slot, TdbSubEvent *out, uint32_t max)
{
	TdbSubLocal *L;
	TdbSubSlot *s;
	const TdbSubEvent *ring;
	uint32_t	n = 0;

	if (slot >= r->nslots || r->local[slot].mode != SUBLOCAL_RECLAIMING)
		return 0;
	L = &r->local[slot];
	s = pslot(r, slot);
	ring = tdb_subring_events(s);
	while (n < max && L->reclaim_pos != L->head)
	{
		uint64_t	pos = L->reclaim_pos++;
		TdbSubEvent e;

		copy_event(&e, &ring[pos & (r->ring_events - 1)]);
		if (e.seq != pos + 1 || e.kind == 0)
		{
			r->damaged_total++;
			continue;
		}
		e.flags |= TDB_SUBEV_HANDED_OVER;
		out[n++] = e;
	}
	if (L->reclaim_pos == L->head)
		free_slot(r, slot);
	return n;
}

void
tdb_subring_discard(TdbSubring *r, uint32_t slot)
{
	if (slot < r->nslots && r->local[slot].mode == SUBLOCAL_RECLAIMING)
		free_slot(r, slot);
}

int
tdb_subring_filter(const TdbSubring *r, uint32_t slot, void *buf, uint32_t cap)
{
	const TdbSubLocal *L;

	if (slot >= r->nslots || r->local[slot].mode != SUBLOCAL_ATTACHED)
		return -1;
	L = &r->local[slot];
	if (L->filter_len > cap)
		return -1;
	memcpy(buf, tdb_subring_filter_area(pslot(r, slot)), L->filter_len);
	return (int) L->filter_len;
}

void
tdb_subring_set_state(TdbSubring *r, uint32_t state)
{
	TdbSubsHeader *h = r->base;

	if (h == NULL)
		return;
	r->state = state;
	atomic_store_explicit(&h->state, state, memory_order_seq_cst);
	for (uint32_t i = 0; i < r->nslots; i++)
	{
		TdbSubSlot *s = pslot(r, i);

		/* only slots whose pages a consumer reserved */
		if (r->local[i].mode == SUBLOCAL_DETACHED &&
			atomic_load_explicit(&s->state, memory_order_relaxed) == TDB_SUBSLOT_FREE)
			continue;
		atomic_fetch_add_explicit(&s->wake_word, 1, memory_order_seq_cst);
		futex_wake_all(&s->wake_word);
	}
	if (state == TDB_SUBRING_STOPPED)
	{
		/* members waiting for requests, requesters waiting for answers */
		void	   *area = (char *) r->base + tdb_subreq_offset(r->nslots, r->ring_events);

		for (uint32_t i = 0; i < r->nslots; i++)
		{
			TdbSubBell *b = tdb_subreq_bell(area, i);

			atomic_fetch_add_explicit(&b->word, 1, memory_order_seq_cst);
			futex_wake_all(&b->word);
		}
		for (uint32_t i = 0; i < tdb_subreq_cells(r->nslots); i++)
		{
			TdbSubReqCell *c = tdb_subreq_cell(area, r->nslots, i);

			atomic_fetch_add_explicit(&c->futex, 1, memory_order_seq_cst);
			futex_wake_all(&c->futex);
		}
	}
}

void
tdb_subring_close(TdbSubring *r)
{
	if (r->base != NULL)
		munmap(r->base, r->size);
	if (r->fd >= 0)
		close(r->fd);
	free(r->local);
	r->local = NULL;
	r->base = NULL;
	r->fd = -1;
}

void
tdb_subring_remove(TdbSubring *r)
{
	if (r->base != NULL)
	{
		/* a truncated file would make the wakeups' stores a SIGBUS */
		if (tdb_subring_intact(r))
			tdb_subring_set_state(r, TDB_SUBRING_STOPPED);
		shm_unlink(r->name);
	}
	tdb_subring_close(r);
}
