/*
 * writer.c
 *	  libtrafficdb's writers (include/trafficdb.h, "Writers"): trafficdb_put
 *	  and friends over the writers' ring of src/ring/ring.h
 *	  (docs/design-write-path.md section 5).
 *
 * A handle owns one lane (an OFD lock on its byte of <name>.writers) and
 * reads the published map through a reader of its own (src/reader.c), to
 * refuse unknown ids and to give the daemon a record hint.  A put validates
 * (src/validate.h, the feed's rules), writes its slots and publishes them
 * with one release store of the lane's tail; then, if the daemon sleeps
 * (a fence and a load of the header's bell line), it rings the daemon's
 * bell (src/ring/ring.h, "The bell").  Nothing else is shared between
 * writers.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "trafficdb.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "busguard.h"
#include "client.h"
#include "reader.h"
#include "ring/ring.h"


#define DEFAULT_TIMEOUT_MS	10000
#define SYNC_REPUTS			3	/* a SYNC put whose update a crash lost puts it again this often */
#define WAIT_ROUNDS			100000	/* futex waits of one call, beyond one per STOP_POLL_MS until the deadline */

/*
 * The longest single futex wait of a SYNC or WAIT put.  At an orderly stop
 * the daemon marks the ring stopped and wakes its waiters, but when no
 * daemon is there to do it (it died, or never had a map) only the control
 * block is marked stopped (the postmaster's tdb_writer_stop_instance, after
 * every child exited) and nobody bumps the ring's futex words: so a waiter
 * looks at the state again this often and returns TRAFFICDB_STALE within
 * this time, not at the end of its timeout.
 */
#define STOP_POLL_MS		100

_Static_assert(TRAFFICDB_HAS_SPEED == TDB_RING_HAS_SPEED && TRAFFICDB_HAS_FREE_FLOW == TDB_RING_HAS_FREE_FLOW &&
			   TRAFFICDB_HAS_CONGESTION == TDB_RING_HAS_CONGESTION &&
			   TRAFFICDB_HAS_CONFIDENCE == TDB_RING_HAS_CONFIDENCE &&
			   TRAFFICDB_HAS_INCIDENT == TDB_RING_HAS_INCIDENT, "the public bits are the ring's");

struct trafficdb_writer
{
	/* the put path's fields first */
	TdbPutSlot *slots;			/* our lane's */
	TdbLane    *lane;
	TdbWritersHeader *hdr;
	uint32_t	lane_slots;
	uint32_t	lane_idx;
	uint64_t	tail;			/* ours: only we write the lane's tail */
	const TdbControl *ctl;
	uint64_t	active_seen;	/* the active word the map below belongs to */
	const TdbMapView *map;		/* stays mapped until the reader's next acquire */
	uint64_t	map_id;
	uint64_t	sync_from;		/* trafficdb_sync waits for tickets [sync_from, tail) */
	uint32_t	sync_seq;		/* the lane's lost_seq when sync_from was set */
	int			timeout_ms;
	int			fd;
	void	   *base;
	size_t		size;
	uint32_t	nlanes;
	int			bus;			/* busguard handle of base (0: none): writer_group members can truncate it */
	int			bell_fd;		/* our socket to ring the sleeping daemon's bell (-1: none yet) */
	TdbReader	reader;
	char		err[TDB_ERRLEN];
};

/* why the calling thread's last trafficdb_writer_open failed */
static __thread char open_err[TDB_ERRLEN];

static inline int64_t
monotonic_ms(void)
{
	return tdb_mono_us() / 1000;
}

/*
 * FUTEX_WAIT on a word of the shared mapping for at most ms (and at most
 * STOP_POLL_MS); false on a failure other than a wakeup.
 */
static bool
futex_wait_ms(_Atomic uint32_t *word, uint32_t seen, int64_t ms)
{
	struct timespec ts;

	if (ms > STOP_POLL_MS)
		ms = STOP_POLL_MS;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000;
	return syscall(SYS_futex, (uint32_t *) word, FUTEX_WAIT, seen, &ts, NULL, 0) == 0 ||
		errno == EAGAIN || errno == EINTR || errno == ETIMEDOUT;
}

TDB_API const char *
trafficdb_writer_errmsg(const trafficdb_writer *w)
{
	return w ? w->err : open_err;
}

/* Why a member of the wrong groups cannot write <name>.writers, naming the setting. */
static void
permission_message(char *err, const char *wname)
{
	char		path[TDB_SHM_NAME_MAX + 40];
	struct stat st;

	snprintf(path, sizeof(path), "/dev/shm%s", wname);
	if (stat(path, &st) == 0 && (st.st_mode & 0060) == 0060)
	{
		struct group grp;
		struct group *res = NULL;
		char		buf[2048];

		if (getgrgid_r(st.st_gid, &grp, buf, sizeof(buf), &res) == 0 && res != NULL)
			snprintf(err, TDB_ERRLEN, "no write access to \"%s\": not a member of trafficdb.writer_group \"%.64s\"",
					 wname, res->gr_name);
		else
			snprintf(err, TDB_ERRLEN, "no write access to \"%s\": not a member of trafficdb.writer_group (gid %u)",
					 wname, (unsigned) st.st_gid);
	}
	else
		snprintf(err, TDB_ERRLEN, "no write access to \"%s\": trafficdb.writer_group is not set, so only the server's OS user can put",
				 wname);
}

static void
writer_free(trafficdb_writer *w)
{
	if (w->lane != NULL)
	{
		atomic_store_explicit(&w->lane->pid, 0, memory_order_relaxed);
		tdb_ring_lane_release(w->fd, w->lane_idx);
	}
	tdb_bus_unguard(w->bus);
	tdb_shm_unmap(w->base, w->size);
	if (w->fd >= 0)
		close(w->fd);
	if (w->bell_fd >= 0)
		close(w->bell_fd);
	tdb_reader_close(&w->reader);
	free(w);
}

static int
open_failed(trafficdb_writer *w, int code)
{
	memcpy(open_err, w->err, sizeof(open_err));
	writer_free(w);
	return code;
}

TDB_API int
trafficdb_writer_open(const char *name, trafficdb_writer **out)
{
	trafficdb_writer *w;
	char		wname[TDB_SHM_NAME_MAX + 24];
	const TdbWritersHeader *h;
	int			rc;
	int			lane;
	size_t		off;
	size_t		len;

	if (name == NULL || out == NULL)
	{
		snprintf(open_err, sizeof(open_err), "trafficdb_writer_open: %s is NULL", name == NULL ? "name" : "out");
		return TRAFFICDB_BADARG;
	}
	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (w == NULL)
	{
		snprintf(open_err, sizeof(open_err), "trafficdb_writer_open: out of memory");
		return TRAFFICDB_NOMEM;
	}
	w->fd = -1;
	w->bell_fd = -1;
	w->reader.slots_fd = -1;
	w->reader.slot_idx = -1;
	w->timeout_ms = DEFAULT_TIMEOUT_MS;

	/* a writer reads the map too: ids are checked against it */
	rc = tdb_reader_open(&w->reader, name, NULL, TDB_VALIDATE_FULL, w->err);
	if (rc != TDB_SHM_OK)
	{
		if (rc == TDB_SHM_EACCES)
		{
			char		why[TDB_ERRLEN];

			memcpy(why, w->err, sizeof(why));
			snprintf(w->err, sizeof(w->err), "a writer reads the published map to check ids: %.200s", why);
		}
		return open_failed(w, tdb_client_from_shm(rc));
	}
	w->ctl = w->reader.ctl;

	tdb_shm_name(wname, name, "writers");
	rc = tdb_shm_map_fd(wname, true, false, sizeof(TdbWritersHeader), &w->base, &w->size, &w->fd);
	if (rc == TDB_SHM_ENOENT)
	{
		snprintf(w->err, sizeof(w->err), "\"%s\" does not exist: this server takes no local writes (trafficdb.max_writers = 0, or a version without them)",
				 wname);
		return open_failed(w, TRAFFICDB_NOTRUNNING);
	}
	if (rc == TDB_SHM_EACCES)
	{
		permission_message(w->err, wname);
		return open_failed(w, TRAFFICDB_PERMISSION);
	}
	if (rc == TDB_SHM_ETAKEN)
	{
		tdb_shm_foreign_error(wname, w->err);
		w->base = NULL;
		return open_failed(w, TRAFFICDB_PERMISSION);
	}
	if (rc != TDB_SHM_OK)
	{
		snprintf(w->err, sizeof(w->err), "cannot map \"%s\": %s", wname,
				 rc == TDB_SHM_EINVAL ? "too small to be a writers' ring" : strerror(errno));
		w->base = NULL;
		return open_failed(w, tdb_client_from_shm(rc));
	}
	/* before the first read: a member of writer_group may truncate it at any time */
	w->bus = tdb_bus_guard(w->base, w->size, PROT_READ | PROT_WRITE);
	if (w->bus == 0)
	{
		snprintf(w->err, sizeof(w->err), "cannot guard the mapping of \"%s\" against truncation: %s", wname,
				 strerror(errno));
		return open_failed(w, TRAFFICDB_SYSTEM);
	}
	h = w->base;
	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != TDB_WRITERS_MAGIC || h->version != TDB_WRITERS_VERSION ||
		h->header_size != TDB_RING_HEADER_SIZE || !tdb_ring_geometry_ok(h->nlanes, h->lane_slots) ||
		w->size < tdb_ring_size(h->nlanes, h->lane_slots))
	{
		snprintf(w->err, sizeof(w->err), "\"%s\" is not a writers' ring of format %d", wname, TDB_WRITERS_VERSION);
		return open_failed(w, TRAFFICDB_INVALID);
	}
	if (h->instance_id != w->reader.instance_id ||
		atomic_load_explicit(&h->state, memory_order_acquire) == TDB_RING_STOPPED)
	{
		snprintf(w->err, sizeof(w->err), "\"%s\" belongs to a stopped server (or one not yet started): open again later",
				 wname);
		return open_failed(w, TRAFFICDB_STALE);
	}
	w->hdr = w->base;
	w->nlanes = h->nlanes;
	w->lane_slots = h->lane_slots;

	lane = tdb_ring_lane_claim(w->fd, w->nlanes);
	if (lane < 0)
	{
		snprintf(w->err, sizeof(w->err), "all %u writer lanes are owned (trafficdb.max_writers)", w->nlanes);
		return open_failed(w, TRAFFICDB_NOSLOT);
	}
	w->lane_idx = (uint32_t) lane;

	/* the lane's pages now: a full /dev/shm is this error, not a SIGBUS in a put */
	off = tdb_ring_slots_offset(w->nlanes) + (size_t) w->lane_idx * w->lane_slots * TDB_RING_SLOT_SIZE;
	len = (size_t) w->lane_slots * TDB_RING_SLOT_SIZE;
	rc = EINTR;
	for (int tries = 0; rc == EINTR && tries < 100; tries++)
		rc = posix_fallocate(w->fd, (off_t) off, (off_t) len);
	if (rc != 0)
	{
		snprintf(w->err, sizeof(w->err), "cannot reserve %zu bytes of \"%s\" for lane %u: %s", len, wname,
				 w->lane_idx, strerror(rc));
		tdb_ring_lane_release(w->fd, w->lane_idx);
		return open_failed(w, TRAFFICDB_SYSTEM);
	}
	w->lane = tdb_ring_lane(w->base, w->lane_idx);
	w->slots = tdb_ring_lane_slots(w->base, w->nlanes, w->lane_slots, w->lane_idx);
	/* a dead owner's published slots stay valid; what it had not published we overwrite */
	w->tail = atomic_load_explicit(&w->lane->tail, memory_order_acquire);
	w->sync_from = w->tail;
	w->sync_seq = (atomic_load_explicit(&w->lane->lost_seq, memory_order_acquire) + 1) & ~1u;
	atomic_store_explicit(&w->lane->pid, (int32_t) getpid(), memory_order_relaxed);
	open_err[0] = '\0';
	*out = w;
	return TRAFFICDB_OK;
}

TDB_API void
trafficdb_writer_close(trafficdb_writer *w)
{
	if (w != NULL)
		writer_free(w);
}

TDB_API int
trafficdb_writer_set_timeout(trafficdb_writer *w, int timeout_ms)
{
	if (w == NULL || timeout_ms < 0)
		return TRAFFICDB_BADARG;
	w->timeout_ms = timeout_ms;
	return TRAFFICDB_OK;
}

TDB_API uint32_t
trafficdb_retry_after_us(const trafficdb_writer *w)
{
	uint32_t	us;

	if (w == NULL)
		return 1000;
	us = atomic_load_explicit(&w->hdr->drain_period_us, memory_order_relaxed);
	return us == 0 ? 1000 : us;
}

/*
 * After publishing (or before waiting on the daemon): if the daemon sleeps,
 * wake it (ring.h, "The bell").  A fence and one load when it is awake.
 */
static inline void
bell(trafficdb_writer *w)
{
	if (tdb_ring_daemon_asleep(w->hdr))
		(void) tdb_ring_ring_bell(w->hdr, &w->bell_fd);
}

/* Stopped, or a mapping of ours shrank under us (busguard: it reads zeros now). */
static bool
stopped(const trafficdb_writer *w)
{
	return atomic_load_explicit(&w->hdr->state, memory_order_acquire) == TDB_RING_STOPPED ||
		tdb_bus_broken(w->bus) || tdb_reader_stale(&w->reader);
}

/*
 * In the waits only (they make system calls anyway): has the daemon made
 * the ring anew?  It unlinks one it found damaged; a member of writer_group
 * may have rewritten the old one's state so that it never says STOPPED,
 * but cannot link it again.
 */
static bool
ring_unlinked(trafficdb_writer *w)
{
	struct stat st;

	if (fstat(w->fd, &st) == 0 && st.st_nlink == 0)
	{
		snprintf(w->err, sizeof(w->err), "the writers' ring %.64s.writers was made anew by the server (it was damaged, or the server restarted): close and reopen",
				 w->reader.prefix);
		return true;
	}
	return false;
}

/* The message of a put refused by stopped(). */
static void
stopped_message(trafficdb_writer *w, const char *otherwise)
{
	if (tdb_bus_broken(w->bus))
		snprintf(w->err, sizeof(w->err), "the writers' ring %.64s.writers was truncated by a process with write access to it (a member of trafficdb.writer_group): close and reopen; puts not yet drained are lost",
				 w->reader.prefix);
	else if (tdb_bus_broken(w->reader.bus_slots))
		snprintf(w->err, sizeof(w->err), "the external readers' segment %.64s.readers was truncated by a process with write access to it (a member of trafficdb.shm_group): close and reopen",
				 w->reader.prefix);
	else
		snprintf(w->err, sizeof(w->err), "%s", otherwise);
}

/* The published map, as of the active word now (one load when it has not changed). */
static int
current_map(trafficdb_writer *w)
{
	uint64_t	a = atomic_load_explicit(&w->ctl->active, memory_order_acquire);
	TdbSnapshot snap;
	int			rc;

	if (__builtin_expect(a == w->active_seen && a != 0, 1))
		return TRAFFICDB_OK;
	/*
	 * Maps are never rewritten, and the reader keeps a map mapped until
	 * its next acquire: we pin only to reach and check it.
	 */
	rc = tdb_reader_acquire(&w->reader, &snap, w->err);
	if (rc != TDB_SHM_OK)
	{
		w->map = NULL;
		w->active_seen = 0;
		return tdb_client_from_shm(rc);
	}
	w->map = snap.map;
	w->map_id = snap.map->hdr->map_id;
	w->active_seen = w->reader.pinned;
	tdb_reader_release(&w->reader);
	return TRAFFICDB_OK;
}

/*
 * Validate u and make the ring's update of it (nothing is written); now is
 * the wall clock of the call (an observed_at_us of 0 says now).
 */
static int
prepare(trafficdb_writer *w, const trafficdb_update *u, TdbRingUpdate *ru, int64_t now)
{
	char		msg[TDB_VALID_MSGLEN];
	int64_t		i;
	int			rc;

	if (__builtin_expect(u->has & ~TDB_RING_HAS_MASK, 0))
	{
		snprintf(w->err, sizeof(w->err), "location %llu: has = 0x%02x sets unknown bits",
				 (unsigned long long) u->location_id, u->has);
		return TRAFFICDB_BADARG;
	}
	ru->location_id = u->location_id;
	ru->present = u->has;
	ru->speed_kmh = (u->has & TRAFFICDB_HAS_SPEED) ? u->speed_kmh : NAN;
	ru->free_flow_kmh = (u->has & TRAFFICDB_HAS_FREE_FLOW) ? u->free_flow_kmh : NAN;
	if (isnan(ru->speed_kmh))
		ru->present &= ~TDB_RING_HAS_SPEED;
	if (isnan(ru->free_flow_kmh))
		ru->present &= ~TDB_RING_HAS_FREE_FLOW;
	ru->congestion = (u->has & TRAFFICDB_HAS_CONGESTION) ? u->congestion : TDB_RING_UNKNOWN;
	ru->confidence = (u->has & TRAFFICDB_HAS_CONFIDENCE) ? u->confidence : TDB_RING_UNKNOWN;
	ru->incident = (u->has & TRAFFICDB_HAS_INCIDENT) ? u->incident : NULL;
	ru->incident_len = (u->has & TRAFFICDB_HAS_INCIDENT) ? u->incident_len : 0;
	ru->observed_at_us = u->observed_at_us != 0 ? u->observed_at_us : now;
	if (tdb_ring_validate(ru, now, msg) != TDB_VALID_OK)
	{
		snprintf(w->err, sizeof(w->err), "location %llu: %.200s", (unsigned long long) u->location_id, msg);
		return TRAFFICDB_BADARG;
	}
	if ((rc = current_map(w)) != TRAFFICDB_OK)
		return rc;
	i = tdb_map_find(w->map, u->location_id);
	if (i < 0)
	{
		snprintf(w->err, sizeof(w->err), "location %llu is not in the published map (map %llu)",
				 (unsigned long long) u->location_id, (unsigned long long) w->map_id);
		return TRAFFICDB_NOTFOUND;
	}
	ru->record_hint = (uint32_t) i;
	ru->map_id = w->map_id;
	return TRAFFICDB_OK;
}

/* How many rounds a wait until deadline may take: one per STOP_POLL_MS, and WAIT_ROUNDS more. */
static int64_t
wait_rounds(int64_t deadline)
{
	int64_t		left = deadline - monotonic_ms();

	return WAIT_ROUNDS + (left > 0 ? left / STOP_POLL_MS + 1 : 0);
}

/* Wait (TRAFFICDB_WAIT) until tickets below end fit in the lane, or the deadline. */
static int
wait_space(trafficdb_writer *w, uint64_t end, int64_t deadline)
{
	int			rc = TRAFFICDB_BUSY;
	int64_t		rounds = wait_rounds(deadline);

	atomic_fetch_add_explicit(&w->lane->space_waiters, 1, memory_order_seq_cst);
	for (int64_t round = 0; round < rounds; round++)
	{
		uint32_t	word = atomic_load_explicit(&w->lane->space_word, memory_order_seq_cst);
		uint64_t	head = atomic_load_explicit(&w->lane->head, memory_order_seq_cst);
		int64_t		left;

		if (end - head <= w->lane_slots)
		{
			rc = TRAFFICDB_OK;
			break;
		}
		if (stopped(w))
		{
			stopped_message(w, "the server stopped while this writer waited for space: close and reopen");
			rc = TRAFFICDB_STALE;
			break;
		}
		if (ring_unlinked(w))
		{
			rc = TRAFFICDB_STALE;
			break;
		}
		left = deadline - monotonic_ms();
		if (left <= 0)
		{
			snprintf(w->err, sizeof(w->err), "lane %u stayed full (%u slots) for %d ms: retry after %u us",
					 w->lane_idx, w->lane_slots, w->timeout_ms, trafficdb_retry_after_us(w));
			break;
		}
		if (!futex_wait_ms(&w->lane->space_word, word, left))
		{
			snprintf(w->err, sizeof(w->err), "futex wait failed: %s", strerror(errno));
			rc = TRAFFICDB_SYSTEM;
			break;
		}
	}
	atomic_fetch_sub_explicit(&w->lane->space_waiters, 1, memory_order_seq_cst);
	return rc;
}

/* Write ru (NULL: an end of batch) into the lane and publish it: tickets [*t0, *t1). */
static int
enqueue(trafficdb_writer *w, const TdbRingUpdate *ru, int flags, int64_t deadline, uint64_t *t0, uint64_t *t1)
{
	uint64_t	t = w->tail;
	uint32_t	need = ru != NULL ? tdb_ring_need(ru->incident_len) : 1;
	uint64_t	head;

	/* the ring's state, and the control block's: an orderly stop marks only that one */
	if (__builtin_expect(stopped(w), 0))
	{
		stopped_message(w, "the server stopped its writers' ring: close and reopen");
		return TRAFFICDB_STALE;
	}
	/* bounded: a second attempt only after wait_space saw the space */
	for (int attempt = 0; !tdb_ring_try_put(w->lane, w->slots, w->lane_slots, &w->tail, ru, &head); attempt++)
	{
		int			rc = TRAFFICDB_BUSY;

		/* what fills the lane is drained only by an awake daemon (put_many rings at its end) */
		bell(w);

		if ((flags & TRAFFICDB_WAIT) && attempt == 0)
			rc = wait_space(w, t + need, deadline);
		else
			snprintf(w->err, sizeof(w->err), "lane %u is full (%u slots, %llu queued): retry after %u us",
					 w->lane_idx, w->lane_slots, (unsigned long long) (t - head), trafficdb_retry_after_us(w));
		if (rc != TRAFFICDB_OK)
		{
			atomic_store_explicit(&w->lane->busy, atomic_load_explicit(&w->lane->busy, memory_order_relaxed) + 1,
								  memory_order_relaxed);
			return rc;
		}
	}
	atomic_store_explicit(&w->lane->puts, atomic_load_explicit(&w->lane->puts, memory_order_relaxed) + 1,
						  memory_order_relaxed);
	*t0 = t;
	*t1 = t + need;
	return TRAFFICDB_OK;
}

/* The lane's lost_seq as a put records it: an event being written counts as seen. */
static uint32_t
seen_seq(const trafficdb_writer *w)
{
	return (atomic_load_explicit(&w->lane->lost_seq, memory_order_acquire) + 1) & ~1u;
}

/*
 * Did a loss event since sequence s0 take tickets of [p0, p1)?  1 yes
 * (*nlost: how many), 0 no, -1 cannot tell yet.  One event since: its range
 * says; more (we slept through several): any ticket below the last range's
 * end may have been lost.
 */
static int
lost_since(const trafficdb_writer *w, uint64_t p0, uint64_t p1, uint32_t s0, uint64_t *nlost)
{
	uint32_t	s;
	uint64_t	from;
	uint64_t	below;
	uint64_t	lo;
	uint64_t	hi;

	if (!tdb_ring_read_lost(w->lane, &s, &from, &below))
		return -1;
	if (s == s0)
		return 0;
	lo = p0;
	if ((uint32_t) (s - s0) == 2 && from > lo)
		lo = from;
	hi = p1 < below ? p1 : below;
	if (lo >= hi)
		return 0;
	*nlost = hi - lo;
	return 1;
}

/* Wait until tickets [p0, p1) are durable: TRAFFICDB_OK, LOST, TIMEOUT or STALE. */
static int
wait_durable(trafficdb_writer *w, uint64_t p0, uint64_t p1, uint32_t s0, int64_t deadline, uint64_t *nlost)
{
	int			rc = TRAFFICDB_TIMEOUT;
	int64_t		rounds;

	*nlost = 0;
	if (p0 == p1)
		return TRAFFICDB_OK;
	rounds = wait_rounds(deadline);
	/* what this lane waits for (the daemon's test), then the count the futex wake looks at */
	atomic_store_explicit(&w->lane->sync_until, p1, memory_order_seq_cst);
	atomic_fetch_add_explicit(&w->hdr->sync_waiters, 1, memory_order_seq_cst);
	/* a daemon asleep since our put was drained makes the next generation now */
	bell(w);
	for (int64_t round = 0; round < rounds; round++)
	{
		uint32_t	word = atomic_load_explicit(&w->hdr->commit_word, memory_order_seq_cst);
		uint64_t	durable = atomic_load_explicit(&w->lane->durable, memory_order_seq_cst);
		int			lost = lost_since(w, p0, p1, s0, nlost);
		int64_t		left;

		/* the lost range is read after durable: what made durable move is visible */
		if (lost == 1)
		{
			rc = TRAFFICDB_LOST;
			break;
		}
		if (durable >= p1 && lost == 0)
		{
			rc = TRAFFICDB_OK;
			break;
		}
		if (stopped(w))
		{
			stopped_message(w, "the server stopped before committing this writer's puts: close and reopen");
			rc = TRAFFICDB_STALE;
			break;
		}
		if (ring_unlinked(w))
		{
			rc = TRAFFICDB_STALE;
			break;
		}
		left = deadline - monotonic_ms();
		if (left <= 0)
		{
			snprintf(w->err, sizeof(w->err), "not committed within %d ms (lane %u, tickets %llu..%llu, durable %llu): the updates stay queued",
					 w->timeout_ms, w->lane_idx, (unsigned long long) p0, (unsigned long long) (p1 - 1),
					 (unsigned long long) durable);
			break;
		}
		if (lost < 0)
		{
			sched_yield();		/* the daemon is writing the lost range: look again */
			continue;
		}
		if (!futex_wait_ms(&w->hdr->commit_word, word, left))
		{
			snprintf(w->err, sizeof(w->err), "futex wait failed: %s", strerror(errno));
			rc = TRAFFICDB_SYSTEM;
			break;
		}
	}
	atomic_fetch_sub_explicit(&w->hdr->sync_waiters, 1, memory_order_seq_cst);
	atomic_store_explicit(&w->lane->sync_until, 0, memory_order_release);
	return rc;
}

TDB_API int
trafficdb_put(trafficdb_writer *w, const trafficdb_update *u, int flags)
{
	TdbRingUpdate ru;
	int			rc;
	int64_t		deadline;

	if (__builtin_expect(w == NULL || u == NULL, 0))
	{
		if (w != NULL)
			snprintf(w->err, sizeof(w->err), "trafficdb_put: the update is NULL");
		return TRAFFICDB_BADARG;
	}
	if ((rc = prepare(w, u, &ru, tdb_wall_us())) != TRAFFICDB_OK)
		return rc;
	deadline = (flags & (TRAFFICDB_SYNC | TRAFFICDB_WAIT)) ? monotonic_ms() + w->timeout_ms : 0;
	if (!(flags & TRAFFICDB_SYNC))
	{
		uint64_t	t0;
		uint64_t	t1;

		rc = enqueue(w, &ru, flags, deadline, &t0, &t1);
		bell(w);
		return rc;
	}
	/* the same values again after a loss: newest-wins makes it idempotent */
	for (int attempt = 0; attempt <= SYNC_REPUTS; attempt++)
	{
		uint64_t	t0;
		uint64_t	t1;
		uint64_t	nlost;
		uint32_t	s0 = seen_seq(w);

		rc = enqueue(w, &ru, flags, deadline, &t0, &t1);
		bell(w);
		if (rc != TRAFFICDB_OK)
			return rc;
		rc = wait_durable(w, t0, t1, s0, deadline, &nlost);
		if (rc != TRAFFICDB_LOST)
			return rc;
	}
	snprintf(w->err, sizeof(w->err), "location %llu: put %d times, and a server crash lost it each time",
			 (unsigned long long) u->location_id, SYNC_REPUTS + 1);
	return TRAFFICDB_LOST;
}

/* How far ahead trafficdb_put_many prefetches a lookup's hash slot (twice this) and record. */
#define PUT_PIPE_D 8

TDB_API int
trafficdb_put_many(trafficdb_writer *w, const trafficdb_update *u, size_t n, int flags, size_t *accepted)
{
	int64_t		deadline;
	int			rc = TRAFFICDB_OK;

	if (accepted != NULL)
		*accepted = 0;
	if (w == NULL || (n > 0 && u == NULL))
	{
		if (w != NULL)
			snprintf(w->err, sizeof(w->err), "trafficdb_put_many: the updates are NULL");
		return TRAFFICDB_BADARG;
	}
	deadline = (flags & (TRAFFICDB_SYNC | TRAFFICDB_WAIT)) ? monotonic_ms() + w->timeout_ms : 0;
	for (int attempt = 0; attempt <= SYNC_REPUTS; attempt++)
	{
		/* the clock once a batch: a call per update was 7 % of a producer's time */
		int64_t		now = tdb_wall_us();
		uint64_t	first = w->tail;
		uint32_t	s0 = seen_seq(w);
		uint64_t	nlost;

		for (size_t i = 0; i < n; i++)
		{
			TdbRingUpdate ru;
			uint64_t	t0;
			uint64_t	t1;

			/*
			 * The map lookups of the updates ahead, in two stages (the hash
			 * slot, then the record it names), so that each lookup finds
			 * its lines in cache: a lookup is two dependent misses otherwise.
			 */
			if (w->map != NULL)
			{
				const TdbMapView *m = w->map;

				if (i + 2 * PUT_PIPE_D < n)
					__builtin_prefetch(&m->hash[tdb_hash_id(u[i + 2 * PUT_PIPE_D].location_id) & m->hash_mask]);
				if (i + PUT_PIPE_D < n)
				{
					uint64_t	sl = m->hash[tdb_hash_id(u[i + PUT_PIPE_D].location_id) & m->hash_mask];

					if (sl != 0 && (uint32_t) sl - 1 < m->count)
						__builtin_prefetch(&m->records[(uint32_t) sl - 1]);
				}
			}
			if ((rc = prepare(w, &u[i], &ru, now)) != TRAFFICDB_OK ||
				(rc = enqueue(w, &ru, flags, deadline, &t0, &t1)) != TRAFFICDB_OK)
			{
				if (accepted != NULL && attempt == 0)
					*accepted = i;
				bell(w);
				return rc;
			}
		}
		/* once for the batch: a fence per update would cost more than the batch saves */
		bell(w);
		if (accepted != NULL)
			*accepted = n;
		if (!(flags & TRAFFICDB_SYNC))
			return TRAFFICDB_OK;
		rc = wait_durable(w, first, w->tail, s0, deadline, &nlost);
		if (rc != TRAFFICDB_LOST)
			return rc;
	}
	snprintf(w->err, sizeof(w->err), "put the batch of %zu %d times, and a server crash lost some of it each time",
			 n, SYNC_REPUTS + 1);
	return TRAFFICDB_LOST;
}

TDB_API int
trafficdb_end_batch(trafficdb_writer *w, int flags)
{
	uint64_t	t0;
	uint64_t	t1;
	int			rc;

	if (w == NULL || (flags & ~(TRAFFICDB_SYNC | TRAFFICDB_WAIT)) != 0)
	{
		if (w != NULL)
			snprintf(w->err, sizeof(w->err), "trafficdb_end_batch: flags 0x%x: TRAFFICDB_SYNC and TRAFFICDB_WAIT only", flags);
		return TRAFFICDB_BADARG;
	}
	rc = enqueue(w, NULL, flags, (flags & TRAFFICDB_WAIT) ? monotonic_ms() + w->timeout_ms : 0, &t0, &t1);
	/* the daemon publishes at once what came before: wake it if it sleeps */
	bell(w);
	if (rc != TRAFFICDB_OK || !(flags & TRAFFICDB_SYNC))
		return rc;
	return trafficdb_sync(w, w->timeout_ms);
}

TDB_API int
trafficdb_sync(trafficdb_writer *w, int timeout_ms)
{
	uint64_t	p1;
	uint64_t	nlost;
	int			rc;

	if (w == NULL || timeout_ms < 0)
		return TRAFFICDB_BADARG;
	p1 = w->tail;
	rc = wait_durable(w, w->sync_from, p1, w->sync_seq, monotonic_ms() + timeout_ms, &nlost);
	if (rc == TRAFFICDB_LOST)
		snprintf(w->err, sizeof(w->err), "a crash of the server's daemon lost updates of this writer taking %llu ring slots of tickets %llu..%llu: put them again",
				 (unsigned long long) nlost, (unsigned long long) w->sync_from, (unsigned long long) (p1 - 1));
	if (rc == TRAFFICDB_OK || rc == TRAFFICDB_LOST)
	{
		/* nothing of ours lies above p1 yet, so no later event concerns the next range */
		w->sync_from = p1;
		w->sync_seq = seen_seq(w);
	}
	return rc;
}
