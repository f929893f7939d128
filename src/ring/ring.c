/*
 * ring.c
 *	  The writers' ring (ring.h): the daemon's side (create or adopt, drain,
 *	  commit) and the producer's primitives libtrafficdb builds
 *	  trafficdb_put on (src/client/writer.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE				/* F_OFD_SETLK */
#endif
#include "ring/ring.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Wake every process waiting on a futex word of the shared mapping (not FUTEX_PRIVATE). */
static void
futex_wake_all(_Atomic uint32_t *word)
{
	syscall(SYS_futex, (uint32_t *) word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

int
tdb_ring_validate(const TdbRingUpdate *u, int64_t now_us, char *msg)
{
	if ((u->present & TDB_RING_HAS_SPEED) &&
		tdb_valid_speed("speed_kmh", u->speed_kmh, msg) != TDB_VALID_OK)
		return TDB_VALID_BAD;
	if ((u->present & TDB_RING_HAS_FREE_FLOW) &&
		tdb_valid_speed("free_flow_kmh", u->free_flow_kmh, msg) != TDB_VALID_OK)
		return TDB_VALID_BAD;
	if ((u->present & TDB_RING_HAS_CONGESTION) &&
		tdb_valid_congestion(u->congestion, msg) != TDB_VALID_OK)
		return TDB_VALID_BAD;
	if ((u->present & TDB_RING_HAS_CONFIDENCE) &&
		tdb_valid_confidence(u->confidence, msg) != TDB_VALID_OK)
		return TDB_VALID_BAD;
	if ((u->present & TDB_RING_HAS_INCIDENT) &&
		tdb_valid_incident(u->incident, u->incident_len, msg) != TDB_VALID_OK)
		return TDB_VALID_BAD;
	if (u->observed_at_us == 0)
	{
		snprintf(msg, TDB_VALID_MSGLEN, "observed_at is 0 (it should have been made the time of the put)");
		return TDB_VALID_BAD;
	}
	return tdb_valid_observed(u->observed_at_us, now_us, msg);
}

/* ---- producer ------------------------------------------------------------------ */

void
tdb_ring_write_slots(TdbPutSlot *slots, uint32_t lane_slots, uint64_t t, const TdbRingUpdate *u)
{
	uint64_t	mask = lane_slots - 1;
	TdbPutSlot *s = &slots[t & mask];
	uint32_t	len = (u->present & TDB_RING_HAS_INCIDENT) ? u->incident_len : 0;
	uint32_t	need = tdb_ring_need(len);

	s->location_id = u->location_id;
	s->map_id = u->map_id;
	s->record_hint = u->record_hint;
	s->incident_len = len;
	s->observed_at_us = u->observed_at_us;
	s->speed_kmh = u->speed_kmh;
	s->free_flow_kmh = u->free_flow_kmh;
	s->present = u->present;
	s->congestion = u->congestion;
	s->confidence = u->confidence;
	s->kind = TDB_RING_KIND_UPDATE;
	s->reserved = 0;
	s->reserved2 = 0;
	__atomic_store_n(&s->seq, t + 1, __ATOMIC_RELEASE);
	for (uint32_t i = 1; i < need; i++)
	{
		TdbTextSlot *c = (TdbTextSlot *) &slots[(t + i) & mask];
		uint32_t	off = (i - 1) * TDB_RING_TEXT_PER_SLOT;
		uint32_t	n = len - off < TDB_RING_TEXT_PER_SLOT ? len - off : TDB_RING_TEXT_PER_SLOT;

		memcpy(c->text, u->incident + off, n);
		if (n < TDB_RING_TEXT_PER_SLOT)
			memset(c->text + n, 0, TDB_RING_TEXT_PER_SLOT - n);
		__atomic_store_n(&c->seq, t + i + 1, __ATOMIC_RELEASE);
	}
}

void
tdb_ring_write_mark(TdbPutSlot *slots, uint32_t lane_slots, uint64_t t)
{
	TdbPutSlot *s = &slots[t & (lane_slots - 1)];

	memset(s, 0, offsetof(TdbPutSlot, seq));
	s->kind = TDB_RING_KIND_MARK;
	__atomic_store_n(&s->seq, t + 1, __ATOMIC_RELEASE);
}

/* The bell's address: "\0trafficdb-bell-<nonce>" in the abstract namespace. */
static socklen_t
bell_address(uint64_t nonce, struct sockaddr_un *a)
{
	int			n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "trafficdb-bell-%016llx", (unsigned long long) nonce);
	return (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

bool
tdb_ring_ring_bell(TdbWritersHeader *h, int *fd)
{
	uint32_t	asleep = 1;
	uint64_t	nonce;
	struct sockaddr_un a;
	socklen_t	len;
	char		b = 0;

	/* only one writer rings a sleep; the daemon clears the flag itself when it wakes otherwise */
	if (!atomic_compare_exchange_strong_explicit(&h->daemon_asleep, &asleep, 0, memory_order_seq_cst,
												 memory_order_relaxed))
		return false;
	atomic_fetch_add_explicit(&h->bells, 1, memory_order_relaxed);
	nonce = atomic_load_explicit(&h->bell_nonce, memory_order_relaxed);
	if (nonce == 0)
		return false;
	if (*fd < 0)
		*fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (*fd < 0)
		return false;
	len = bell_address(nonce, &a);
	/* a full queue (EAGAIN) has rung already; no daemon (ECONNREFUSED): nobody to wake */
	return sendto(*fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *) &a, len) == 1;
}

static int
lane_lock(int fd, int cmd, short type, uint32_t lane, struct flock *fl)
{
	int			rc;
	int			tries = 0;

	memset(fl, 0, sizeof(*fl));
	fl->l_type = type;
	fl->l_whence = SEEK_SET;
	fl->l_start = (off_t) lane;
	fl->l_len = 1;
	do
		rc = fcntl(fd, cmd, fl);
	while (rc != 0 && errno == EINTR && ++tries < 100);
	return rc;
}

int
tdb_ring_lane_claim(int fd, uint32_t nlanes)
{
	struct flock fl;

	for (uint32_t i = 0; i < nlanes; i++)
		if (lane_lock(fd, F_OFD_SETLK, F_WRLCK, i, &fl) == 0)
			return (int) i;
	return -1;
}

void
tdb_ring_lane_release(int fd, uint32_t lane)
{
	struct flock fl;

	lane_lock(fd, F_OFD_SETLK, F_UNLCK, lane, &fl);
}

bool
tdb_ring_read_lost(const TdbLane *lane, uint32_t *seq, uint64_t *from, uint64_t *below)
{
	for (int attempt = 0; attempt < 64; attempt++)
	{
		uint32_t	s1 = atomic_load_explicit(&lane->lost_seq, memory_order_acquire);
		uint64_t	f;
		uint64_t	b;

		if (s1 & 1)
			continue;			/* the daemon is writing it */
		f = atomic_load_explicit(&lane->lost_from, memory_order_acquire);
		b = atomic_load_explicit(&lane->lost_below, memory_order_acquire);
		/* the acquire loads above keep this load after them */
		if (atomic_load_explicit(&lane->lost_seq, memory_order_relaxed) == s1)
		{
			*seq = s1;
			*from = f;
			*below = b;
			return true;
		}
	}
	return false;
}

/* ---- consumer ------------------------------------------------------------------ */

/* Record that tickets [from, below) of lane L were lost (seqlock: odd while writing). */
static void
record_lost(TdbRing *r, uint32_t lane, uint64_t from, uint64_t below)
{
	TdbLane    *l = tdb_ring_lane(r->base, lane);

	atomic_store_explicit(&l->lost_seq, r->lost_seq[lane] + 1, memory_order_relaxed);
	/* release stores: the odd sequence above is visible before either */
	atomic_store_explicit(&l->lost_from, from, memory_order_release);
	atomic_store_explicit(&l->lost_below, below, memory_order_release);
	r->lost_seq[lane] += 2;
	atomic_store_explicit(&l->lost_seq, r->lost_seq[lane], memory_order_release);
}

static void
wake_space(TdbLane *l)
{
	if (atomic_load_explicit(&l->space_waiters, memory_order_seq_cst) != 0)
	{
		atomic_fetch_add_explicit(&l->space_word, 1, memory_order_seq_cst);
		futex_wake_all(&l->space_word);
	}
}

static void
wake_everyone(TdbRing *r)
{
	TdbWritersHeader *h = r->base;

	atomic_fetch_add_explicit(&h->commit_word, 1, memory_order_seq_cst);
	futex_wake_all(&h->commit_word);
	for (uint32_t i = 0; i < r->nlanes; i++)
	{
		TdbLane    *l = tdb_ring_lane(r->base, i);

		atomic_fetch_add_explicit(&l->space_word, 1, memory_order_seq_cst);
		futex_wake_all(&l->space_word);
	}
}

static void
ring_free_local(TdbRing *r)
{
	free(r->head);
	free(r->durable);
	free(r->lost_seq);
	free(r->blocked);
	free(r->text);
	r->head = r->durable = NULL;
	r->lost_seq = NULL;
	r->blocked = NULL;
	r->text = NULL;
}

static int
ring_fail(TdbRing *r, char *err, int code, const char *what)
{
	int			save = errno;

	snprintf(err, TDB_SHM_ERRLEN, "%s \"%s\": %s", what, r->name, strerror(save));
	tdb_ring_close(r);
	return code;
}

/*
 * Does the object open as fd look like a ring of ours to adopt?  Maps it
 * into r->base when it does.  Sets *stale_magic when it is a writers object
 * of another shape or instance (to be marked stopped).
 */
static bool
try_adopt(TdbRing *r, int fd, bool *foreign)
{
	struct stat st;
	void	   *p;
	const TdbWritersHeader *h;

	*foreign = false;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
		(size_t) st.st_size < sizeof(TdbWritersHeader))
		return false;
	p = mmap(NULL, (size_t) st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return false;
	h = p;
	if (h->magic == TDB_WRITERS_MAGIC && h->version == TDB_WRITERS_VERSION &&
		h->header_size == TDB_RING_HEADER_SIZE && h->instance_id == r->instance_id &&
		h->nlanes == r->nlanes && h->lane_slots == r->lane_slots && (size_t) st.st_size == r->size)
	{
		r->base = p;
		return true;
	}
	if (h->magic == TDB_WRITERS_MAGIC)
	{
		/* its writers must reopen: they would put into an object nobody drains */
		TdbWritersHeader *wh = p;

		atomic_store_explicit(&wh->state, TDB_RING_STOPPED, memory_order_seq_cst);
		atomic_fetch_add_explicit(&wh->commit_word, 1, memory_order_seq_cst);
		futex_wake_all(&wh->commit_word);
		*foreign = true;
	}
	munmap(p, (size_t) st.st_size);
	return false;
}

int
tdb_ring_create(TdbRing *r, const char *prefix, uint32_t nlanes, uint32_t lane_slots, gid_t gid,
				uint64_t instance_id, char *err)
{
	int			fd;
	const char *what;
	mode_t		mode = gid == (gid_t) -1 ? 0600 : 0660;
	TdbWritersHeader *h;
	bool		foreign = false;

	memset(r, 0, sizeof(*r));
	r->fd = -1;
	if (!tdb_shm_prefix_ok(prefix, err))
		return TDB_SHM_EINVAL;
	if (!tdb_ring_geometry_ok(nlanes, lane_slots))
	{
		snprintf(err, TDB_SHM_ERRLEN, "writers' ring of %u lanes of %u slots: lanes must be 1 .. %d, slots a power of two in %d .. %u",
				 nlanes, lane_slots, TDB_RING_MAX_LANES, TDB_RING_MIN_SLOTS, TDB_RING_MAX_SLOTS);
		return TDB_SHM_EINVAL;
	}
	tdb_shm_name(r->name, prefix, "writers");
	r->nlanes = nlanes;
	r->lane_slots = lane_slots;
	r->instance_id = instance_id;
	r->size = tdb_ring_size(nlanes, lane_slots);
	r->head = calloc(nlanes, sizeof(uint64_t));
	r->durable = calloc(nlanes, sizeof(uint64_t));
	r->lost_seq = calloc(nlanes, sizeof(uint32_t));
	r->blocked = calloc(nlanes, 1);
	r->text = malloc(TDB_VALID_MAX_INCIDENT);
	if (r->head == NULL || r->durable == NULL || r->lost_seq == NULL || r->blocked == NULL || r->text == NULL)
	{
		errno = ENOMEM;
		return ring_fail(r, err, TDB_SHM_ESYS, "cannot allocate the state of");
	}

	fd = shm_open(r->name, O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
	if (fd >= 0)
	{
		if (try_adopt(r, fd, &foreign))
		{
			r->fd = fd;
			r->adopted = true;
			/* the setting may have changed since: mode and group as configured now */
			if ((gid != (gid_t) -1 && fchown(fd, (uid_t) -1, gid) != 0) || fchmod(fd, mode) != 0)
				return ring_fail(r, err, tdb_shm_errno_result(), "cannot set the mode of");
			h = r->base;
			for (uint32_t i = 0; i < nlanes; i++)
			{
				TdbLane    *l = tdb_ring_lane(r->base, i);
				uint64_t	head = atomic_load_explicit(&l->head, memory_order_acquire);
				uint64_t	durable = atomic_load_explicit(&l->durable, memory_order_acquire);

				r->head[i] = head;
				r->durable[i] = durable;
				/* a sequence left odd by a daemon that died writing it */
				r->lost_seq[i] = (atomic_load_explicit(&l->lost_seq, memory_order_relaxed) + 1) & ~1u;
				atomic_store_explicit(&l->lost_seq, r->lost_seq[i], memory_order_release);
				/* drained by the previous run and not committed: lost with it */
				if (durable != head)
					record_lost(r, i, durable, head);
			}
			atomic_fetch_add_explicit(&h->restart_epoch, 1, memory_order_seq_cst);
			/* a daemon that died asleep: its bell is gone; ours is named when we first sleep */
			atomic_store_explicit(&h->daemon_asleep, 0, memory_order_relaxed);
			atomic_store_explicit(&h->bell_nonce, 0, memory_order_relaxed);
			atomic_store_explicit(&h->state, TDB_RING_STARTING, memory_order_seq_cst);
			wake_everyone(r);
			return TDB_SHM_OK;
		}
		close(fd);
		shm_unlink(r->name);
	}
	else if (errno != ENOENT)
		return ring_fail(r, err, tdb_shm_errno_result(), "cannot open");

	/*
	 * Sparse: slots are reserved by the writer that claims their lane.  The
	 * header and the lane headers, which the daemon writes, are reserved
	 * now, so a full /dev/shm is an error here and not a SIGBUS later.
	 */
	fd = tdb_shm_create_fd(r->name, r->size, tdb_ring_slots_offset(nlanes), mode, gid, &r->base, &what);
	if (fd < 0)
	{
		r->base = NULL;
		return ring_fail(r, err, tdb_shm_errno_result(), what);
	}
	r->fd = fd;
	h = r->base;
	h->version = TDB_WRITERS_VERSION;
	h->header_size = TDB_RING_HEADER_SIZE;
	h->instance_id = instance_id;
	h->nlanes = nlanes;
	h->lane_slots = lane_slots;
	h->slots_offset = tdb_ring_slots_offset(nlanes);
	atomic_store_explicit(&h->restart_epoch, 1, memory_order_relaxed);
	atomic_store_explicit(&h->drain_period_us, 1000, memory_order_relaxed);
	/* the magic last: a writer that opens the object before sees no ring yet */
	__atomic_store_n(&h->magic, TDB_WRITERS_MAGIC, __ATOMIC_RELEASE);
	return TDB_SHM_OK;
}

/*
 * Decode and validate the update at ticket t of a lane whose tail is tail
 * (copying every slot before looking at it).  On success fills u (its
 * incident in r->text) and *need; else writes why into reason.
 */
/*
 * Copy a slot out.  Under ThreadSanitizer through the memcpy interceptor:
 * GCC expands a fixed-size memcpy into vector moves it does not instrument,
 * which would hide a missing release or acquire from the thread tests.
 */
static inline void
slot_copy(void *dst, const void *src, size_t n)
{
#ifdef __SANITIZE_THREAD__
	void	   *(*volatile cpy) (void *, const void *, size_t) = memcpy;

	cpy(dst, src, n);
#else
	memcpy(dst, src, n);
#endif
}

/*
 * Is the slot of ticket t an end of batch (kind 3, its seq right)?  The
 * other fields of such a slot mean nothing and are not read; anything else
 * is decode()'s to judge.
 */
static bool
is_mark(TdbRing *r, const TdbPutSlot *slots, uint64_t t)
{
	const TdbPutSlot *p = &slots[t & (r->lane_slots - 1)];

	return __atomic_load_n(&p->kind, __ATOMIC_RELAXED) == TDB_RING_KIND_MARK &&
		__atomic_load_n(&p->seq, __ATOMIC_RELAXED) == t + 1;
}

static bool
decode(TdbRing *r, const TdbPutSlot *slots, uint64_t t, uint64_t tail, int64_t now_us, TdbRingUpdate *u,
	   uint32_t *need, char *reason)
{
	uint64_t	mask = r->lane_slots - 1;
	TdbPutSlot	s;
	uint32_t	len;
	char		msg[TDB_VALID_MSGLEN];

	slot_copy(&s, &slots[t & mask], sizeof(s));
	if (s.seq != t + 1)
	{
		snprintf(reason, TDB_SHM_ERRLEN, "slot of ticket %llu holds seq %llu",
				 (unsigned long long) t, (unsigned long long) s.seq);
		return false;
	}
	if (s.kind != TDB_RING_KIND_UPDATE || (s.present & ~TDB_RING_HAS_MASK) != 0)
	{
		snprintf(reason, TDB_SHM_ERRLEN, "slot of ticket %llu has kind %u and present bits 0x%02x",
				 (unsigned long long) t, s.kind, s.present);
		return false;
	}
	len = s.incident_len;
	if (len > TDB_VALID_MAX_INCIDENT || (len != 0 && !(s.present & TDB_RING_HAS_INCIDENT)))
	{
		snprintf(reason, TDB_SHM_ERRLEN, "slot of ticket %llu has an incident of %u bytes%s",
				 (unsigned long long) t, len, (s.present & TDB_RING_HAS_INCIDENT) ? "" : " without its present bit");
		return false;
	}
	*need = tdb_ring_need(len);
	if (*need > tail - t)
	{
		snprintf(reason, TDB_SHM_ERRLEN, "the incident of ticket %llu (%u bytes) runs past the tail %llu",
				 (unsigned long long) t, len, (unsigned long long) tail);
		return false;
	}
	for (uint32_t i = 1; i < *need; i++)
	{
		TdbTextSlot c;
		uint32_t	off = (i - 1) * TDB_RING_TEXT_PER_SLOT;
		uint32_t	n = len - off < TDB_RING_TEXT_PER_SLOT ? len - off : TDB_RING_TEXT_PER_SLOT;

		slot_copy(&c, &slots[(t + i) & mask], sizeof(c));
		if (c.seq != t + i + 1)
		{
			snprintf(reason, TDB_SHM_ERRLEN, "continuation slot of ticket %llu holds seq %llu",
					 (unsigned long long) (t + i), (unsigned long long) c.seq);
			return false;
		}
		memcpy(r->text + off, c.text, n);
	}
	u->location_id = s.location_id;
	u->map_id = s.map_id;
	u->record_hint = s.record_hint;
	u->present = s.present;
	u->observed_at_us = s.observed_at_us;
	/* absent fields as absent, whatever the slot held */
	u->speed_kmh = (s.present & TDB_RING_HAS_SPEED) ? s.speed_kmh : NAN;
	u->free_flow_kmh = (s.present & TDB_RING_HAS_FREE_FLOW) ? s.free_flow_kmh : NAN;
	u->congestion = (s.present & TDB_RING_HAS_CONGESTION) ? s.congestion : TDB_RING_UNKNOWN;
	u->confidence = (s.present & TDB_RING_HAS_CONFIDENCE) ? s.confidence : TDB_RING_UNKNOWN;
	u->incident = (s.present & TDB_RING_HAS_INCIDENT) ? r->text : NULL;
	u->incident_len = len;
	if (isnan(u->speed_kmh))
		u->present &= ~TDB_RING_HAS_SPEED;
	if (isnan(u->free_flow_kmh))
		u->present &= ~TDB_RING_HAS_FREE_FLOW;
	if (tdb_ring_validate(u, now_us, msg) != TDB_VALID_OK)
	{
		snprintf(reason, TDB_SHM_ERRLEN, "ticket %llu (location %llu): %.190s", (unsigned long long) t,
				 (unsigned long long) s.location_id, msg);
		return false;
	}
	return true;
}

/* Drop lane's tickets [from, tail): head = tail, the range recorded as lost. */
static void
reset_lane(TdbRing *r, uint32_t lane, uint64_t from, uint64_t tail, TdbRingDrainStats *st,
		   const char *why)
{
	TdbLane    *l = tdb_ring_lane(r->base, lane);

	record_lost(r, lane, from, tail);
	st->lanes_reset++;
	st->dropped_slots += tail - from;
	r->lanes_reset_total++;
	snprintf(st->reset_reason, sizeof(st->reset_reason), "writers' lane %u reset, %llu slots dropped: %.180s",
			 lane, (unsigned long long) (tail - from), why);
	r->head[lane] = tail;
	atomic_store_explicit(&l->head, tail, memory_order_seq_cst);
	wake_space(l);
}

uint64_t
tdb_ring_drain(TdbRing *r, uint64_t max_updates, tdb_ring_apply_fn fn, void *arg, TdbRingDrainStats *st)
{
	TdbRingDrainStats local;
	TdbWritersHeader *h = r->base;
	int64_t		now = tdb_wall_us();
	int64_t		mono = tdb_mono_us();
	uint64_t	total = 0;
	uint32_t	start = r->next_lane;
	char		why[TDB_SHM_ERRLEN];

	if (st == NULL)
		st = &local;
	memset(st, 0, sizeof(*st));
	if (!tdb_ring_intact(r))
	{
		st->truncated = true;
		return 0;
	}
	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != TDB_WRITERS_MAGIC || h->version != TDB_WRITERS_VERSION ||
		h->header_size != TDB_RING_HEADER_SIZE || h->instance_id != r->instance_id ||
		h->nlanes != r->nlanes || h->lane_slots != r->lane_slots)
	{
		snprintf(r->damage, sizeof(r->damage), "its header was overwritten (magic %08x, format %u, %u lanes of %u slots)",
				 h->magic, h->version, h->nlanes, h->lane_slots);
		st->header_damaged = true;
		return 0;
	}
	if (r->state != 0 && atomic_load_explicit(&h->state, memory_order_acquire) != r->state)
	{
		uint32_t	was = atomic_load_explicit(&h->state, memory_order_relaxed);

		snprintf(r->damage, sizeof(r->damage), "its state word was set to %u (%u expected), which %s", was, r->state,
				 was == TDB_RING_STOPPED ? "refuses every put" : "is not ours");
		st->header_damaged = true;
		return 0;
	}

	/* the drain period's EWMA: the hint TRAFFICDB_BUSY gives */
	if (r->last_drain_us != 0)
	{
		int64_t		period = mono - r->last_drain_us;

		if (period < 1)
			period = 1;
		if (period > 10000000)
			period = 10000000;
		r->drain_ewma_us = r->drain_ewma_us == 0 ? (uint32_t) period :
			(uint32_t) (((uint64_t) r->drain_ewma_us * 7 + (uint64_t) period) / 8);
		if (atomic_load_explicit(&h->state, memory_order_relaxed) == TDB_RING_RUNNING)
			atomic_store_explicit(&h->drain_period_us, r->drain_ewma_us, memory_order_relaxed);
	}
	r->last_drain_us = mono;

	for (uint32_t k = 0; k < r->nlanes && !st->stopped; k++)
	{
		uint32_t	lane = (start + k) % r->nlanes;
		TdbLane    *l = tdb_ring_lane(r->base, lane);
		const TdbPutSlot *slots = tdb_ring_lane_slots(r->base, r->nlanes, r->lane_slots, lane);
		uint64_t	head = r->head[lane];
		uint64_t	tail = atomic_load_explicit(&l->tail, memory_order_acquire);
		bool		limited = false;

		if (tail == head)
			continue;
		st->lanes_nonempty++;
		/* past an end of batch: nothing more of this lane until that generation committed */
		if (r->blocked[lane])
			continue;
		if (tail - head > r->lane_slots)
		{
			snprintf(why, sizeof(why), "tail %llu is %llu tickets from head %llu, more than the lane's %u slots",
					 (unsigned long long) tail, (unsigned long long) (tail - head),
					 (unsigned long long) head, r->lane_slots);
			reset_lane(r, lane, head, tail, st, why);
			continue;
		}
		/* bounded: each step consumes at least one of at most lane_slots tickets */
		while (head != tail)
		{
			TdbRingUpdate u;
			uint32_t	need;

			if (max_updates != 0 && total >= max_updates)
			{
				limited = true;
				break;
			}
			if (is_mark(r, slots, head))
			{
				/* an end of batch: the lane's next updates go to a later generation */
				head++;
				st->slots++;
				if (r->merge_batches)
					continue;
				st->marks++;
				r->blocked[lane] = 1;
				break;
			}
			if (!decode(r, slots, head, tail, now, &u, &need, why))
			{
				reset_lane(r, lane, head, tail, st, why);
				head = tail;
				break;
			}
			total++;
			st->slots += need;
			if (fn(arg, &u, lane, head) != 0)
				st->stopped = true;
			head += need;
			if (st->stopped)
				break;
		}
		if (head != r->head[lane])
		{
			r->head[lane] = head;
			atomic_store_explicit(&l->head, head, memory_order_seq_cst);
			wake_space(l);
		}
		if (limited || st->stopped)
		{
			/* the next drain starts where this one stopped */
			r->next_lane = lane;
			st->updates = total;
			r->updates_total += total;
			return total;
		}
	}
	r->next_lane = (start + 1) % r->nlanes;
	st->updates = total;
	r->updates_total += total;
	return total;
}

void
tdb_ring_committed(TdbRing *r, uint64_t generation)
{
	TdbWritersHeader *h = r->base;

	if (h == NULL)
		return;
	for (uint32_t i = 0; i < r->nlanes; i++)
	{
		if (r->durable[i] != r->head[i])
		{
			r->durable[i] = r->head[i];
			atomic_store_explicit(&tdb_ring_lane(r->base, i)->durable, r->head[i], memory_order_release);
		}
		/* what came before each end of batch is committed: drain past them again */
		r->blocked[i] = 0;
	}
	atomic_store_explicit(&h->committed_generation, generation, memory_order_release);
	atomic_fetch_add_explicit(&h->commit_word, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&h->sync_waiters, memory_order_seq_cst) != 0)
		futex_wake_all(&h->commit_word);
}

void
tdb_ring_release_batches(TdbRing *r)
{
	if (r->base != NULL)
		memset(r->blocked, 0, r->nlanes);
}

bool
tdb_ring_undrained(const TdbRing *r)
{
	if (r->base == NULL)
		return false;
	for (uint32_t i = 0; i < r->nlanes; i++)
		if (atomic_load_explicit(&tdb_ring_lane(r->base, i)->tail, memory_order_acquire) != r->head[i])
			return true;
	return false;
}

bool
tdb_ring_batch_ended(const TdbRing *r)
{
	if (r->base == NULL)
		return false;
	for (uint32_t i = 0; i < r->nlanes; i++)
		if (r->blocked[i])
			return true;
	return false;
}

bool
tdb_ring_sync_wanted(const TdbRing *r)
{
	if (r->base == NULL)
		return false;
	for (uint32_t i = 0; i < r->nlanes; i++)
		if (r->head[i] > r->durable[i] &&
			atomic_load_explicit(&tdb_ring_lane(r->base, i)->sync_until, memory_order_acquire) > r->durable[i])
			return true;
	return false;
}

void
tdb_ring_set_state(TdbRing *r, uint32_t state, uint32_t retry_hint_us)
{
	TdbWritersHeader *h = r->base;

	if (h == NULL)
		return;
	if (retry_hint_us != 0)
		atomic_store_explicit(&h->drain_period_us, retry_hint_us, memory_order_relaxed);
	else if (r->drain_ewma_us != 0)
		atomic_store_explicit(&h->drain_period_us, r->drain_ewma_us, memory_order_relaxed);
	r->state = state;
	atomic_store_explicit(&h->state, state, memory_order_seq_cst);
	wake_everyone(r);
}

/* ---- the daemon's bell (ring.h, "The bell") ------------------------------------------- */

int
tdb_ring_bell_open(uint64_t *nonce, char *err)
{
	int			fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
	{
		snprintf(err, TDB_SHM_ERRLEN, "cannot make the bell's socket: %s", strerror(errno));
		return -1;
	}
	/* bounded: a taken name is another random draw */
	for (int attempt = 0; attempt < 8; attempt++)
	{
		struct sockaddr_un a;
		uint64_t	n = 0;

		if (getrandom(&n, sizeof(n), 0) != (ssize_t) sizeof(n) || n == 0)
		{
			snprintf(err, TDB_SHM_ERRLEN, "cannot draw the bell's name: %s", strerror(errno));
			break;
		}
		if (bind(fd, (struct sockaddr *) &a, bell_address(n, &a)) == 0)
		{
			*nonce = n;
			return fd;
		}
		if (errno != EADDRINUSE)
		{
			snprintf(err, TDB_SHM_ERRLEN, "cannot bind the bell's socket: %s", strerror(errno));
			break;
		}
		snprintf(err, TDB_SHM_ERRLEN, "every name drawn for the bell's socket was taken");
	}
	close(fd);
	return -1;
}

int
tdb_ring_bell_drain(int fd)
{
	char		buf[64];
	int			n = 0;

	while (n < 4096 && recv(fd, buf, sizeof(buf), MSG_DONTWAIT) >= 0)
		n++;
	return n;
}

bool
tdb_ring_sleep(TdbRing *r, uint64_t nonce, bool sync_matters)
{
	TdbWritersHeader *h = r->base;

	if (h == NULL || nonce == 0)
		return false;
	atomic_store_explicit(&h->bell_nonce, nonce, memory_order_relaxed);
	atomic_store_explicit(&h->daemon_asleep, 1, memory_order_relaxed);
	/* pairs with the writers' fence between their tail store and their read of daemon_asleep */
	atomic_thread_fence(memory_order_seq_cst);
	/* (a lane stopped at an end of batch is drained after that generation commits, not before) */
	for (uint32_t lane = 0; lane < r->nlanes; lane++)
		if (!r->blocked[lane] &&
			atomic_load_explicit(&tdb_ring_lane(r->base, lane)->tail, memory_order_relaxed) != r->head[lane])
			goto awake;
	if (sync_matters && tdb_ring_sync_wanted(r))
		goto awake;
	/* a sleep is not a drain period: the next drain does not count it in the BUSY hint */
	r->last_drain_us = 0;
	return true;
awake:
	atomic_store_explicit(&h->daemon_asleep, 0, memory_order_relaxed);
	return false;
}

void
tdb_ring_awake(TdbRing *r)
{
	TdbWritersHeader *h = r->base;

	if (h != NULL && atomic_load_explicit(&h->daemon_asleep, memory_order_relaxed) != 0)
		atomic_store_explicit(&h->daemon_asleep, 0, memory_order_relaxed);
}

void
tdb_ring_close(TdbRing *r)
{
	if (r->base != NULL)
		munmap(r->base, r->size);
	if (r->fd >= 0)
		close(r->fd);
	ring_free_local(r);
	r->base = NULL;
	r->fd = -1;
}

bool
tdb_ring_intact(const TdbRing *r)
{
	struct stat sb;

	return r->base != NULL && fstat(r->fd, &sb) == 0 && (size_t) sb.st_size >= r->size;
}

void
tdb_ring_remove(TdbRing *r)
{
	if (r->base != NULL)
	{
		/* a truncated file would make the wakeups' stores a SIGBUS */
		if (tdb_ring_intact(r))
			tdb_ring_set_state(r, TDB_RING_STOPPED, 0);
		shm_unlink(r->name);
	}
	tdb_ring_close(r);
}

bool
tdb_ring_lane_owned(const TdbRing *r, uint32_t lane)
{
	return lane < r->nlanes && tdb_slot_alive(r->fd, lane);
}
