/*
 * consumer.c
 *	  Subscribers' event rings (subring.h): the consumer's side (open,
 *	  subscribe, peek and consume, wait, receive, close).  The daemon's
 *	  side is producer.c.
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

/* The longest single FUTEX_WAIT of a receive: the header's state is re-read at least this often. */
#define WAIT_POLL_MS		1000

/* ---- consumer ------------------------------------------------------------------ */

static void
consumer_unmap(TdbSubConsumer *c)
{
	/* before the munmaps: the handler never maps over what is no longer ours */
	tdb_bus_unguard(c->bus_req);
	tdb_bus_unguard(c->bus_slot);
	tdb_bus_unguard(c->bus_map);
	c->bus_req = c->bus_slot = c->bus_map = 0;
	if (c->req_map != NULL)
		munmap(c->req_map, c->req_size);
	c->req_map = NULL;
	c->req_area = NULL;
	if (c->slot_map != NULL)
		munmap(c->slot_map, tdb_subring_slot_size(c->ring_events));
	if (c->map != NULL)
		munmap(c->map, c->map_size);
	if (c->fd >= 0)
		close(c->fd);
	c->slot_map = NULL;
	c->map = NULL;
	c->fd = -1;
	c->slot = NULL;
	c->ring = NULL;
	c->hdr = NULL;
	c->slot_idx = -1;
}

static int
consumer_fail(TdbSubConsumer *c, char *err, int code)
{
	if (err != NULL)
		memcpy(err, c->err, TDB_SHM_ERRLEN);
	consumer_unmap(c);
	return code;
}

int
tdb_subring_consumer_open(TdbSubConsumer *c, const char *prefix, uint64_t instance_id, void *borrow, char *err)
{
	struct stat st;
	const TdbSubsHeader *h;
	void	   *p;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->slot_idx = -1;
	if (!tdb_shm_prefix_ok(prefix, c->err))
		return consumer_fail(c, err, TDB_SHM_EINVAL);
	tdb_shm_name(c->name, prefix, "subs");
	c->fd = shm_open(c->name, O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
	if (c->fd < 0 && (errno == EACCES || errno == ELOOP) && tdb_shm_untrusted(c->name, false))
	{
		tdb_shm_foreign_error(c->name, c->err);
		return consumer_fail(c, err, TDB_SHM_ETAKEN);
	}
	if (c->fd < 0)
	{
		int			code = tdb_shm_errno_result();

		snprintf(c->err, sizeof(c->err), "cannot open \"%s\": %s", c->name, strerror(errno));
		return consumer_fail(c, err, code);
	}
	if (fstat(c->fd, &st) != 0)
	{
		snprintf(c->err, sizeof(c->err), "cannot stat \"%s\": %s", c->name, strerror(errno));
		return consumer_fail(c, err, TDB_SHM_ESYS);
	}
	if (!S_ISREG(st.st_mode) || (st.st_mode & S_IWOTH) != 0)
	{
		snprintf(c->err, sizeof(c->err), "\"%s\" is writable by everyone (or not a file): refused", c->name);
		return consumer_fail(c, err, TDB_SHM_EACCES);
	}
	/* another user may have made it first: only the server's user's object is trusted */
	if (!tdb_shm_owner_trusted(st.st_uid))
	{
		tdb_shm_foreign_error(c->name, c->err);
		return consumer_fail(c, err, TDB_SHM_ETAKEN);
	}
	if ((size_t) st.st_size < sizeof(TdbSubsHeader))
	{
		snprintf(c->err, sizeof(c->err), "\"%s\" has %lld bytes: too small to be a subscriptions segment",
				 c->name, (long long) st.st_size);
		return consumer_fail(c, err, TDB_SHM_EINVAL);
	}
	p = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_SHARED, c->fd, 0);
	if (p == MAP_FAILED)
	{
		int			code = tdb_shm_errno_result();

		snprintf(c->err, sizeof(c->err), "cannot map \"%s\": %s", c->name, strerror(errno));
		return consumer_fail(c, err, code);
	}
	c->map = p;
	c->map_size = (size_t) st.st_size;
	/* before the first read: a member of the group may be truncating it right now */
	c->bus_map = tdb_bus_guard(p, c->map_size, PROT_READ);
	if (c->bus_map == 0)
	{
		snprintf(c->err, sizeof(c->err), "cannot guard the mapping of \"%s\" against truncation: %s", c->name,
				 strerror(errno));
		return consumer_fail(c, err, TDB_SHM_ESYS);
	}
	h = p;
	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != TDB_SUBS_MAGIC || h->version != TDB_SUBS_VERSION ||
		h->header_size != TDB_SUBRING_HEADER_SIZE || h->filter_size != TDB_SUBRING_FILTER_SIZE ||
		!tdb_subring_geometry_ok(h->nslots, h->ring_events) || h->req_cells != tdb_subreq_cells(h->nslots) ||
		h->req_max_bytes != TDB_SUBREQ_MAX_BYTES)
	{
		snprintf(c->err, sizeof(c->err), "\"%s\" is not a subscriptions segment of format %d", c->name,
				 TDB_SUBS_VERSION);
		return consumer_fail(c, err, TDB_SHM_EINVAL);
	}
	c->nslots = h->nslots;
	c->ring_events = h->ring_events;
	c->instance_id = h->instance_id;
	if ((size_t) st.st_size < tdb_subring_size(c->nslots, c->ring_events))
	{
		snprintf(c->err, sizeof(c->err), "\"%s\" has %lld bytes, %zu expected for %u slots of %u events: truncated",
				 c->name, (long long) st.st_size, tdb_subring_size(c->nslots, c->ring_events), c->nslots,
				 c->ring_events);
		return consumer_fail(c, err, TDB_SHM_EINVAL);
	}
	if ((instance_id != 0 && c->instance_id != instance_id) ||
		atomic_load_explicit(&h->state, memory_order_acquire) == TDB_SUBRING_STOPPED)
	{
		snprintf(c->err, sizeof(c->err), "\"%s\" belongs to a stopped server (or another instance): open again later",
				 c->name);
		return consumer_fail(c, err, TDB_SHM_ESTALE);
	}
	if (tdb_subring_consumer_broken(c))
	{
		snprintf(c->err, sizeof(c->err), "\"%s\" was truncated while it was opened", c->name);
		return consumer_fail(c, err, TDB_SHM_EINVAL);
	}
	if (borrow != NULL)
	{
		/* tests: every access through the producer's mapping */
		tdb_bus_unguard(c->bus_map);
		c->bus_map = 0;
		munmap(c->map, c->map_size);
		c->map = NULL;
		c->borrowed = borrow;
		c->hdr = borrow;
	}
	else
		c->hdr = h;
	c->err[0] = '\0';
	return TDB_SHM_OK;
}

static bool
consumer_stopped(const TdbSubConsumer *c)
{
	return atomic_load_explicit(&c->hdr->state, memory_order_acquire) == TDB_SUBRING_STOPPED;
}

int
tdb_subring_subscribe(TdbSubConsumer *c, const void *filter, uint32_t filter_len, uint64_t group_id,
					  uint32_t group_mode)
{
	size_t		slot_size = tdb_subring_slot_size(c->ring_events);

	if (c->hdr == NULL || c->slot_idx >= 0)
	{
		snprintf(c->err, sizeof(c->err), "not open, or subscribed already");
		return TDB_SHM_EINVAL;
	}
	if (filter_len > TDB_SUBRING_FILTER_SIZE || (filter_len > 0 && filter == NULL) ||
		(group_id != 0 && group_mode != TDB_SUBGROUP_ROUND_ROBIN && group_mode != TDB_SUBGROUP_STICKY) ||
		(group_id == 0 && group_mode != TDB_SUBGROUP_NONE))
	{
		snprintf(c->err, sizeof(c->err), "a filter of %u bytes (at most %d) or group %llu mode %u is not valid",
				 filter_len, TDB_SUBRING_FILTER_SIZE, (unsigned long long) group_id, group_mode);
		return TDB_SHM_EINVAL;
	}
	if (consumer_stopped(c))
	{
		snprintf(c->err, sizeof(c->err), "\"%s\" belongs to a stopped server: open again later", c->name);
		return TDB_SHM_ESTALE;
	}
	for (uint32_t i = 0; i < c->nslots; i++)
	{
		size_t		off = tdb_subring_slot_offset(c->ring_events, i);
		const TdbSubSlot *ro = (const TdbSubSlot *) ((const char *) c->hdr + off);
		TdbSubSlot *s;
		uint64_t	head;
		int			rc;

		/* a dead owner's slot stays non-FREE until the producer has taken its events back */
		if (atomic_load_explicit(&ro->state, memory_order_acquire) != TDB_SUBSLOT_FREE)
			continue;
		if (slot_lock(c->fd, F_OFD_SETLK, F_WRLCK, i) != 0)
			continue;
		if (atomic_load_explicit(&ro->state, memory_order_acquire) != TDB_SUBSLOT_FREE)
		{
			slot_lock(c->fd, F_OFD_SETLK, F_UNLCK, i);
			continue;
		}
		/* ours: its pages now, so a full /dev/shm is this error and not a SIGBUS later */
		rc = EINTR;
		for (int tries = 0; rc == EINTR && tries < 100; tries++)
			rc = posix_fallocate(c->fd, (off_t) off, (off_t) slot_size);
		if (rc != 0)
		{
			snprintf(c->err, sizeof(c->err), "cannot reserve %zu bytes of \"%s\" for slot %u: %s", slot_size,
					 c->name, i, strerror(rc));
			slot_lock(c->fd, F_OFD_SETLK, F_UNLCK, i);
			return TDB_SHM_ESYS;
		}
		if (c->borrowed != NULL)
			s = (TdbSubSlot *) ((char *) c->borrowed + off);
		else
		{
			void	   *m = mmap(NULL, slot_size, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, (off_t) off);

			if (m == MAP_FAILED)
			{
				snprintf(c->err, sizeof(c->err), "cannot map slot %u of \"%s\": %s", i, c->name, strerror(errno));
				slot_lock(c->fd, F_OFD_SETLK, F_UNLCK, i);
				return TDB_SHM_ESYS;
			}
			c->slot_map = m;
			c->bus_slot = tdb_bus_guard(m, slot_size, PROT_READ | PROT_WRITE);
			if (c->bus_slot == 0)
			{
				snprintf(c->err, sizeof(c->err), "cannot guard slot %u of \"%s\" against truncation: %s", i, c->name,
						 strerror(errno));
				munmap(m, slot_size);
				c->slot_map = NULL;
				slot_lock(c->fd, F_OFD_SETLK, F_UNLCK, i);
				return TDB_SHM_ESYS;
			}
			s = m;
		}
		atomic_store_explicit(&s->state, TDB_SUBSLOT_CLAIMED, memory_order_seq_cst);
		atomic_store_explicit(&s->pid, (int32_t) getpid(), memory_order_relaxed);
		atomic_store_explicit(&s->waiters, 0, memory_order_relaxed);
		/* the producer left tail = head when it freed the slot; start there in any case */
		head = atomic_load_explicit(&s->head, memory_order_acquire);
		c->tail = head;
		atomic_store_explicit(&s->tail, head, memory_order_release);
		if (filter_len > 0)
			memcpy(tdb_subring_filter_area(s), filter, filter_len);
		s->filter_len = filter_len;
		s->group_id = group_id;
		s->group_mode = group_mode;
		/* release: the producer that sees ACTIVE sees the filter and the group */
		atomic_store_explicit(&s->state, TDB_SUBSLOT_ACTIVE, memory_order_release);
		c->slot = s;
		c->ring = tdb_subring_events(s);
		c->slot_idx = (int32_t) i;
		if (tdb_subring_consumer_broken(c))
		{
			snprintf(c->err, sizeof(c->err), "\"%s\" was truncated while we subscribed (by a process with write access to it): subscribe again",
					 c->name);
			return TDB_SHM_ECORRUPT;
		}
		return TDB_SHM_OK;
	}
	snprintf(c->err, sizeof(c->err), "all %u subscriber slots of \"%s\" are owned (or awaiting their reclaim): trafficdb.max_subscribers",
			 c->nslots, c->name);
	return TDB_SHM_ENOSLOT;
}

/* Our mappings faulted: what they held is gone. */
static int
broken_error(TdbSubConsumer *c)
{
	snprintf(c->err, sizeof(c->err), "\"%s\" was truncated by a process with write access to it (a member of its group): this subscription is void; subscribe again",
			 c->name);
	return TDB_SHM_ECORRUPT;
}

/* Events there now (head - tail), or a negative code when head is out of range. */
static int64_t
available(TdbSubConsumer *c)
{
	uint64_t	head = atomic_load_explicit(&c->slot->head, memory_order_acquire);

	if (__builtin_expect(tdb_subring_consumer_broken(c), 0))
		return broken_error(c);

	if (head - c->tail > c->ring_events)
	{
		snprintf(c->err, sizeof(c->err), "slot %d of \"%s\": head %llu is out of range of our tail %llu, ring of %u",
				 c->slot_idx, c->name, (unsigned long long) head, (unsigned long long) c->tail, c->ring_events);
		return TDB_SHM_ECORRUPT;
	}
	return (int64_t) (head - c->tail);
}

int
tdb_subring_peek(TdbSubConsumer *c, TdbSubEvent *out, uint32_t max)
{
	int64_t		avail;
	uint32_t	n;

	if (c->slot == NULL)
	{
		snprintf(c->err, sizeof(c->err), "not subscribed");
		return TDB_SHM_EINVAL;
	}
	avail = available(c);
	if (avail < 0)
		return (int) avail;
	n = (uint64_t) avail < max ? (uint32_t) avail : max;
	for (uint32_t k = 0; k < n; k++)
	{
		uint64_t	pos = c->tail + k;

		copy_event(&out[k], &c->ring[pos & (c->ring_events - 1)]);
		if (out[k].seq != pos + 1 || out[k].kind == 0 || out[k].kind > TDB_SUBEV_KIND_MAX)
		{
			if (tdb_subring_consumer_broken(c))
				return broken_error(c);
			snprintf(c->err, sizeof(c->err), "slot %d of \"%s\": the event at %llu has seq %llu and kind %u",
					 c->slot_idx, c->name, (unsigned long long) pos, (unsigned long long) out[k].seq,
					 out[k].kind);
			return TDB_SHM_ECORRUPT;
		}
	}
	/* a fault during the copies made the rest zeros: the seq checks caught it, or this does */
	if (__builtin_expect(tdb_subring_consumer_broken(c), 0))
		return broken_error(c);
	return (int) n;
}

int
tdb_subring_consume(TdbSubConsumer *c, uint32_t n)
{
	uint64_t	head;

	if (c->slot == NULL)
		return TDB_SHM_EINVAL;
	head = atomic_load_explicit(&c->slot->head, memory_order_acquire);
	if (n > head - c->tail)
		return TDB_SHM_EINVAL;
	c->tail += n;
	/* release: our copies of the events happened before the producer reuses their room */
	atomic_store_explicit(&c->slot->tail, c->tail, memory_order_release);
	return TDB_SHM_OK;
}

/*
 * Is our file still the subscribers' segment, as large as it was?  The
 * daemon unlinks a segment it found damaged (or left by a daemon that died)
 * and makes a new one; a member of the group can overwrite every byte of
 * the old one (its state word too), but it cannot link it again.
 */
static int
check_file(TdbSubConsumer *c)
{
	struct stat st;

	if (fstat(c->fd, &st) != 0)
	{
		snprintf(c->err, sizeof(c->err), "cannot stat \"%s\": %s", c->name, strerror(errno));
		return TDB_SHM_ESYS;
	}
	if (st.st_nlink == 0)
	{
		snprintf(c->err, sizeof(c->err), "the subscribers' segment \"%s\" was rebuilt by the server (it was damaged, or the daemon restarted): subscribe again",
				 c->name);
		return TDB_SHM_ESTALE;
	}
	if ((size_t) st.st_size < tdb_subring_size(c->nslots, c->ring_events))
		return broken_error(c);
	return TDB_SHM_OK;
}

int
tdb_subring_wait(TdbSubConsumer *c, int timeout_ms)
{
	int64_t		deadline;

	if (c->slot == NULL || timeout_ms < 0)
	{
		snprintf(c->err, sizeof(c->err), c->slot == NULL ? "not subscribed" : "a negative timeout");
		return TDB_SHM_EINVAL;
	}
	deadline = tdb_mono_ms() + timeout_ms;
	for (;;)
	{
		uint32_t	word;
		int64_t		avail;
		int64_t		left;
		int64_t		now;
		struct timespec ts;
		long		rc;

		avail = available(c);
		if (avail != 0)
			return (int) avail;
		if (consumer_stopped(c))
		{
			snprintf(c->err, sizeof(c->err), "\"%s\": the server stopped: open again later", c->name);
			return TDB_SHM_ESTALE;
		}
		now = tdb_mono_ms();
		if (c->borrowed == NULL && now >= c->next_check_ms)
		{
			/*
			 * Nothing there: at most once per WAIT_POLL_MS (and so before
			 * every sleep, which is never longer) one fstat tells a segment
			 * replaced or shrunk under us, also to a consumer that polls
			 * with timeout 0.  Never when events are there.
			 */
			int			crc = check_file(c);

			if (crc != TDB_SHM_OK)
				return crc;
			c->next_check_ms = now + WAIT_POLL_MS;
		}
		left = deadline - now;
		if (left <= 0)
			return 0;
		if (left > WAIT_POLL_MS)
			left = WAIT_POLL_MS;

		/*
		 * The word before the flag and the re-check: a wake after this
		 * load changes it (FUTEX_WAIT then returns EAGAIN).  Dekker with
		 * tdb_subring_wake: we store waiters, fence, re-read head; it
		 * stored head, fences, reads waiters - one of us sees the other.
		 */
		word = atomic_load_explicit(&c->slot->wake_word, memory_order_acquire);
		atomic_store_explicit(&c->slot->waiters, 1, memory_order_relaxed);
		atomic_thread_fence(memory_order_seq_cst);
		if (atomic_load_explicit(&c->slot->head, memory_order_relaxed) != c->tail || consumer_stopped(c) ||
			tdb_subring_consumer_broken(c))
		{
			atomic_store_explicit(&c->slot->waiters, 0, memory_order_relaxed);
			continue;
		}
		ts.tv_sec = left / 1000;
		ts.tv_nsec = (left % 1000) * 1000000;
		rc = syscall(SYS_futex, (uint32_t *) &c->slot->wake_word, FUTEX_WAIT, word, &ts, NULL, 0);
		atomic_store_explicit(&c->slot->waiters, 0, memory_order_relaxed);
		if (rc != 0)
		{
			if (errno == EINTR)
				return TDB_SUBRING_EINTR;
			if (errno != EAGAIN && errno != ETIMEDOUT)
			{
				snprintf(c->err, sizeof(c->err), "futex wait failed: %s", strerror(errno));
				return TDB_SHM_ESYS;
			}
		}
	}
}

int
tdb_subring_receive(TdbSubConsumer *c, TdbSubEvent *out, uint32_t max, int timeout_ms)
{
	int			n;

	if (max == 0)
	{
		snprintf(c->err, sizeof(c->err), "max is 0");
		return TDB_SHM_EINVAL;
	}
	n = tdb_subring_wait(c, timeout_ms);
	if (n <= 0)
		return n;
	n = tdb_subring_peek(c, out, max);
	/* delivered before the caller sees them: the tail store first (the delivery rule) */
	if (n > 0)
		tdb_subring_consume(c, (uint32_t) n);
	return n;
}

void
tdb_subring_consumer_close(TdbSubConsumer *c)
{
	if (c->slot != NULL)
	{
		atomic_store_explicit(&c->slot->waiters, 0, memory_order_relaxed);
		/* release: our last tail is visible to the producer that sees CLOSED */
		atomic_store_explicit(&c->slot->state, TDB_SUBSLOT_CLOSED, memory_order_release);
		slot_lock(c->fd, F_OFD_SETLK, F_UNLCK, (uint32_t) c->slot_idx);
	}
	consumer_unmap(c);
}
