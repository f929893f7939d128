/*
 * ring.h
 *	  The writers' ring, <prefix>.writers: local writes from other processes
 *	  (trafficdb_put, libtrafficdb) to the daemon, through shared memory
 *	  (docs/design-write-path.md section 5, docs/shared-memory.md).
 *
 * Lanes.  Each writer handle owns one lane, a single-producer/single-
 * consumer ring of lane_slots 64-byte slots, for as long as it holds an OFD
 * write lock on byte <lane> of the file (the lock area: bytes [0, nlanes),
 * which the header happens to occupy; locks are advisory and touch no data).
 * Only the owner writes the lane's tail, only the daemon its head, durable
 * and lost range.  A put writes its slots (each slot's seq, = its ticket + 1,
 * last) and then publishes them with one release store of tail: a writer
 * killed before that store has published nothing, and the next owner of the
 * lane overwrites what it left.
 *
 * An update takes one slot (kind 1); an incident of len bytes follows in
 * ceil(len / 56) continuation slots (56 bytes of text, then seq).  An end
 * of batch (kind 3) takes one slot: the daemon drains nothing of the lane
 * past it until the generation holding what came before it has committed
 * (tdb_ring_committed), and publishes that generation at once.
 *
 * Durability.  After each committed generation the daemon sets every lane's
 * durable to the tail it had drained into it (tdb_ring_committed) and bumps
 * commit_word, a futex sync writers sleep on.  Updates drained and not
 * committed when the daemon died are lost: the restarted daemon records the
 * lane's lost range [lost_from, lost_below) (and a damaged lane's dropped
 * range the same way), under a per-lane sequence counter lost_seq (odd while
 * the range is being written), so a sync writer learns it instead of
 * hanging (TRAFFICDB_LOST).
 *
 * The daemon trusts nothing it reads from the file (a member of
 * trafficdb.writer_group can write all of it): geometry, heads and drained
 * tails live in TdbRing; slots are copied before they are validated; a lane
 * whose tail or slots make no sense is reset and counted.
 *
 * Memory ordering is C11 atomics throughout, argued for any CPU.
 * No PostgreSQL headers: linked into the module and into libtrafficdb.
 */
#ifndef TDB_RING_H
#define TDB_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "clock.h"
#include "shm.h"
#include "validate.h"

#define TDB_WRITERS_MAGIC		0x57544454u /* "TDTW" */
#define TDB_WRITERS_VERSION		4	/* 2: writers ring the sleeping daemon's bell; 3: a lane says what its sync writer waits for; 4: ends of batches (kind 3) */
#define TDB_RING_HEADER_SIZE	4096
#define TDB_RING_LANE_SIZE		256
#define TDB_RING_SLOT_SIZE		64
#define TDB_RING_TEXT_PER_SLOT	56
#define TDB_RING_MAX_LANES		1024	/* trafficdb.max_writers */
#define TDB_RING_MIN_SLOTS		128		/* >= the largest put (75 slots), a power of two */
#define TDB_RING_MAX_SLOTS		(1u << 24)
#define TDB_RING_MAX_NEED		(1 + (TDB_VALID_MAX_INCIDENT + TDB_RING_TEXT_PER_SLOT - 1) / TDB_RING_TEXT_PER_SLOT)

/* TdbWritersHeader.state */
#define TDB_RING_STARTING		0
#define TDB_RING_RUNNING		1
#define TDB_RING_REBUILDING		2	/* puts are queued; drain_period_us is the daemon's estimate */
#define TDB_RING_STOPPED		3	/* orderly shutdown or replaced: writers reopen */

/* TdbPutSlot.kind */
#define TDB_RING_KIND_UPDATE	1
#define TDB_RING_KIND_INCIDENT	2	/* informative: continuation slots hold text where kind would be */
#define TDB_RING_KIND_MARK		3	/* an end of batch (trafficdb_end_batch): one slot, nothing but kind and seq */

/* present bits: the generation log codec's column 2 (src/genlog/genlog.h) */
#define TDB_RING_HAS_SPEED		0x01
#define TDB_RING_HAS_FREE_FLOW	0x02
#define TDB_RING_HAS_CONGESTION	0x04
#define TDB_RING_HAS_CONFIDENCE	0x08
#define TDB_RING_HAS_INCIDENT	0x10
#define TDB_RING_HAS_MASK		0x1F

/* an absent congestion or confidence */
#define TDB_RING_UNKNOWN		255

typedef struct TdbWritersHeader
{
	uint32_t	magic;
	uint16_t	version;
	uint16_t	header_size;	/* TDB_RING_HEADER_SIZE */
	uint64_t	instance_id;	/* = TdbControl.instance_id */
	uint32_t	nlanes;			/* trafficdb.max_writers */
	uint32_t	lane_slots;		/* trafficdb.writer_ring_slots, a power of two */
	_Atomic uint32_t state;		/* TDB_RING_* */
	_Atomic uint32_t commit_word;	/* futex: +1 after every commit of a generation */
	_Atomic uint64_t committed_generation;
	_Atomic uint64_t restart_epoch; /* +1 at each daemon start that adopts the ring */
	_Atomic uint32_t drain_period_us;	/* EWMA of the drain period: the TRAFFICDB_BUSY hint */
	_Atomic uint32_t sync_waiters;	/* nonzero: some writer waits on commit_word */
	uint64_t	slots_offset;	/* informative: where lane 0's slots start */
	/* line 1: the daemon's sleep (the bell, below); every put reads it, it rarely changes */
	_Atomic uint32_t daemon_asleep; /* 1: the daemon sleeps until a writer rings */
	uint32_t	bell_pad;
	_Atomic uint64_t bell_nonce;	/* names the daemon's bell (0: none, it never sleeps) */
	_Atomic uint64_t bells;		/* rung so far (display, tests) */
	char		pad[TDB_RING_HEADER_SIZE - 88];
} TdbWritersHeader;

typedef struct TdbLane
{
	/* line 0: the owner's */
	_Atomic uint64_t tail;		/* next ticket; release-stored after the slots */
	_Atomic uint64_t sync_until;	/* a TRAFFICDB_SYNC writer waits until durable reaches it (0: none) */
	char		p0[48];
	/* line 1: the daemon's */
	_Atomic uint64_t head;		/* tickets < head are consumed: their slots are free */
	_Atomic uint64_t durable;	/* tickets < durable are in a committed generation */
	_Atomic uint64_t lost_below;	/* tickets in [lost_from, lost_below) were lost */
	_Atomic uint32_t space_word;	/* futex: +1 when head moves and space_waiters > 0 */
	_Atomic uint32_t lost_seq;	/* +1 before and after each change of the lost range */
	_Atomic uint64_t lost_from;
	char		p1[24];
	/* line 2: the owner's, display only */
	_Atomic uint32_t space_waiters;
	_Atomic int32_t pid;
	_Atomic uint64_t puts;
	_Atomic uint64_t busy;
	char		p2[40];
	/* line 3: spare */
	char		p3[64];
} TdbLane;

typedef struct TdbPutSlot
{
	uint64_t	location_id;
	uint64_t	map_id;			/* the map the hint refers to */
	uint32_t	record_hint;	/* record index in that map (the daemon re-checks the id) */
	uint32_t	incident_len;	/* bytes; the text follows in continuation slots */
	int64_t		observed_at_us; /* Unix microseconds, never 0 */
	float		speed_kmh;		/* NaN when absent */
	float		free_flow_kmh;
	uint8_t		present;		/* TDB_RING_HAS_* */
	uint8_t		congestion;		/* 255 when absent */
	uint8_t		confidence;		/* 255 when absent */
	uint8_t		kind;			/* TDB_RING_KIND_UPDATE */
	uint32_t	reserved;
	uint64_t	reserved2;
	uint64_t	seq;			/* ticket + 1, written last */
} TdbPutSlot;

typedef struct TdbTextSlot
{
	char		text[TDB_RING_TEXT_PER_SLOT];
	uint64_t	seq;
} TdbTextSlot;

_Static_assert(sizeof(TdbWritersHeader) == TDB_RING_HEADER_SIZE, "writers header is 4096 bytes");
_Static_assert(offsetof(TdbWritersHeader, daemon_asleep) == 64, "the bell's line is the header's second");
_Static_assert(sizeof(TdbLane) == TDB_RING_LANE_SIZE, "a lane header is 256 bytes");
_Static_assert(sizeof(TdbPutSlot) == TDB_RING_SLOT_SIZE, "a slot is one cache line");
_Static_assert(sizeof(TdbTextSlot) == TDB_RING_SLOT_SIZE, "a continuation slot is one cache line");
_Static_assert(offsetof(TdbPutSlot, seq) == offsetof(TdbTextSlot, seq), "seq is at the same place in both");

/* A decoded, validated update (what the daemon applies). */
typedef struct TdbRingUpdate
{
	uint64_t	location_id;
	uint64_t	map_id;			/* the map record_hint refers to */
	uint32_t	record_hint;
	uint8_t		present;		/* TDB_RING_HAS_* */
	uint8_t		congestion;		/* 255 when absent */
	uint8_t		confidence;		/* 255 when absent */
	int64_t		observed_at_us;
	float		speed_kmh;		/* NaN when absent */
	float		free_flow_kmh;	/* NaN when absent */
	const char *incident;		/* NULL when absent; not NUL-terminated; valid during the call */
	uint32_t	incident_len;
} TdbRingUpdate;

/* ---- clocks (both sides) ---------------------------------------------------------- */

/* ---- geometry ------------------------------------------------------------------ */

static inline size_t
tdb_ring_slots_offset(uint32_t nlanes)
{
	size_t		end = TDB_RING_HEADER_SIZE + (size_t) nlanes * TDB_RING_LANE_SIZE;

	return (end + 4095) & ~(size_t) 4095;
}

static inline size_t
tdb_ring_size(uint32_t nlanes, uint32_t lane_slots)
{
	return tdb_ring_slots_offset(nlanes) + (size_t) nlanes * lane_slots * TDB_RING_SLOT_SIZE;
}

static inline TdbLane *
tdb_ring_lane(void *base, uint32_t lane)
{
	return (TdbLane *) ((char *) base + TDB_RING_HEADER_SIZE + (size_t) lane * TDB_RING_LANE_SIZE);
}

/* The first slot of a lane; ticket t is at slots[t & (lane_slots - 1)]. */
static inline TdbPutSlot *
tdb_ring_lane_slots(void *base, uint32_t nlanes, uint32_t lane_slots, uint32_t lane)
{
	return (TdbPutSlot *) ((char *) base + tdb_ring_slots_offset(nlanes) +
						   (size_t) lane * lane_slots * TDB_RING_SLOT_SIZE);
}

/* Slots a put takes: one, and the incident's continuation slots. */
static inline uint32_t
tdb_ring_need(uint32_t incident_len)
{
	return 1 + (incident_len + TDB_RING_TEXT_PER_SLOT - 1) / TDB_RING_TEXT_PER_SLOT;
}

static inline bool
tdb_ring_geometry_ok(uint32_t nlanes, uint32_t lane_slots)
{
	return nlanes >= 1 && nlanes <= TDB_RING_MAX_LANES && lane_slots >= TDB_RING_MIN_SLOTS &&
		lane_slots <= TDB_RING_MAX_SLOTS && (lane_slots & (lane_slots - 1)) == 0;
}

/*
 * Shared validation of an update's values (validate.h), the one the writer
 * runs before writing and the daemon after reading.  observed_at_us must
 * already be concrete (not 0).  TDB_VALID_OK or TDB_VALID_BAD with msg.
 */
int			tdb_ring_validate(const TdbRingUpdate *u, int64_t now_us, char *msg);

/* ---- producer ------------------------------------------------------------------ */

/*
 * Write the tdb_ring_need(u->incident_len) slots of u at tickets t .. of
 * a lane's slots (each slot's seq last), without publishing them: the
 * caller then stores tail = t + need with release.  u is validated.
 */
void		tdb_ring_write_slots(TdbPutSlot *slots, uint32_t lane_slots, uint64_t t, const TdbRingUpdate *u);

/* Write an end of batch (one slot) at ticket t, without publishing it (as tdb_ring_write_slots). */
void		tdb_ring_write_mark(TdbPutSlot *slots, uint32_t lane_slots, uint64_t t);

/*
 * The put protocol (design 5.3) on a lane this thread owns: if the
 * tdb_ring_need() slots of u (u NULL: the one slot of an end of batch) fit
 * (tail + need - head <= lane_slots, head loaded with acquire), write them
 * and publish them with one release store of the tail; *tail is the
 * owner's copy of it.  False when the lane is full (*head_seen says how far
 * the daemon got).  libtrafficdb's put and end of batch are this; the tests
 * run it on the daemon's own mapping so ThreadSanitizer sees both sides (it
 * cannot relate two mappings of one file).
 */
static inline bool
tdb_ring_try_put(TdbLane *lane, TdbPutSlot *slots, uint32_t lane_slots, uint64_t *tail,
				 const TdbRingUpdate *u, uint64_t *head_seen)
{
	uint64_t	t = *tail;
	uint32_t	need = u == NULL ? 1 : tdb_ring_need((u->present & TDB_RING_HAS_INCIDENT) ? u->incident_len : 0);
	uint64_t	head = atomic_load_explicit(&lane->head, memory_order_acquire);

	*head_seen = head;
	/* unsigned: a head past our tail (a damaged lane the daemon will reset) is full too */
	if (__builtin_expect(t + need - head > lane_slots, 0))
		return false;
	if (u == NULL)
		tdb_ring_write_mark(slots, lane_slots, t);
	else
		tdb_ring_write_slots(slots, lane_slots, t, u);
	atomic_store_explicit(&lane->tail, t + need, memory_order_release);
	*tail = t + need;
	return true;
}

/*
 * The bell.  An idle daemon sleeps instead of draining every
 * writer_drain_interval: it stores daemon_asleep = 1, then (full fence)
 * looks at every lane's tail once more, and sleeps only if nothing was
 * published (tdb_ring_sleep).  A writer, after publishing (the release
 * store of tail, then a full fence), reads daemon_asleep; if set, the one
 * writer whose compare-exchange 1 -> 0 succeeds rings: a one-byte datagram
 * to the daemon's Unix socket in the abstract namespace, named by
 * bell_nonce (a random number the daemon draws at each start; only who can
 * read the ring knows it).  Either the daemon's re-check sees the tail or
 * the writer sees the flag (the two fences are ordered one way or the
 * other): no put is left undrained while the daemon sleeps.  Writers that
 * cannot reach the socket (another network namespace) wait for the
 * daemon's longest sleep instead (one second).
 *
 * tdb_ring_daemon_asleep is the check each put makes (a fence and a load of
 * a line the daemon rarely writes); tdb_ring_ring_bell rings when it says
 * so.  A writer waiting for a commit (after sync_waiters++) checks as well.
 */
static inline bool
tdb_ring_daemon_asleep(TdbWritersHeader *h)
{
#ifdef __SANITIZE_THREAD__
	/* GCC's ThreadSanitizer refuses fences: a locked read-modify-write is a full barrier too (tests only) */
	return atomic_fetch_or_explicit(&h->daemon_asleep, 0, memory_order_seq_cst) != 0;
#else
	atomic_thread_fence(memory_order_seq_cst);
	return __builtin_expect(atomic_load_explicit(&h->daemon_asleep, memory_order_relaxed) != 0, 0);
#endif
}

/*
 * Ring (daemon_asleep 1 -> 0, then the datagram); *fd is the caller's
 * socket, made at the first ring (-1 before; close it when done).  True if
 * this call rang, false if another writer did or the daemon woke first, or
 * the datagram could not be sent (then the daemon wakes at the end of its
 * longest sleep).
 */
bool		tdb_ring_ring_bell(TdbWritersHeader *h, int *fd);

/*
 * Claim a lane: the first byte of [0, nlanes) of the file open as fd that
 * this open file description can OFD-write-lock without waiting.  -1 when
 * every lane is owned.  The lock lasts until tdb_ring_lane_release or the
 * last close of the descriptor, however the process ends.
 */
int			tdb_ring_lane_claim(int fd, uint32_t nlanes);
void		tdb_ring_lane_release(int fd, uint32_t lane);

/*
 * The lane's lost range, read consistently (lost_seq even and unchanged
 * across the reads).  False if the daemon kept changing it (retry later).
 */
bool		tdb_ring_read_lost(const TdbLane *lane, uint32_t *seq, uint64_t *from, uint64_t *below);

/* ---- consumer (the daemon) ----------------------------------------------------- */

typedef struct TdbRing
{
	char		name[TDB_SHM_NAME_MAX + 24];
	void	   *base;
	size_t		size;			/* what we mapped and expect */
	int			fd;				/* for the size check and lock tests */
	uint32_t	nlanes;			/* ours, never re-read from the file */
	uint32_t	lane_slots;
	uint64_t	instance_id;
	bool		adopted;		/* tdb_ring_create found and adopted the previous run's ring */
	bool		merge_batches;	/* ends of batches are consumed and end nothing (an orderly stop's last drain) */
	uint32_t	next_lane;		/* where the next drain starts (fairness under max_updates) */
	int64_t		last_drain_us;
	uint32_t	drain_ewma_us;
	uint64_t	lanes_reset_total;
	uint64_t	updates_total;
	uint64_t   *head;			/* per lane: what we consumed (we write it to the file) */
	uint64_t   *durable;		/* per lane: what we told the file is committed */
	uint32_t   *lost_seq;		/* per lane: the lost range's sequence counter (even) */
	uint8_t    *blocked;		/* per lane: drained up to an end of batch, not committed yet */
	char	   *text;			/* TDB_VALID_MAX_INCIDENT bytes: the incident being applied */
	uint32_t	state;			/* the state we stored last (0: none yet): the header must say it */
	char		damage[160];	/* drain's header_damaged: what was found */
} TdbRing;

typedef struct TdbRingDrainStats
{
	uint64_t	updates;		/* applied (fn called) */
	uint64_t	slots;			/* slots consumed, continuation slots included */
	uint64_t	lanes_nonempty; /* lanes that had something */
	uint64_t	lanes_reset;	/* damaged lanes reset (head = tail) */
	uint64_t	marks;			/* ends of batches consumed: publish now */
	uint64_t	dropped_slots;	/* slots dropped by those resets */
	bool		truncated;		/* the file is shorter than it was made: nothing was read */
	bool		header_damaged; /* its header no longer names this ring (magic, version, instance,
								 * geometry) or its state word is not the one we stored (STOPPED
								 * refuses every put): nothing was read; r->damage says what */
	bool		stopped;		/* fn asked to stop */
	char		reset_reason[TDB_SHM_ERRLEN];	/* why the last lane was reset (for the log) */
} TdbRingDrainStats;

/*
 * Called for each good update, in lane order.  u (and its incident) is
 * valid only during the call.  Return 0 to go on; nonzero stops the drain
 * after this update (it counts as consumed).
 */
typedef int (*tdb_ring_apply_fn) (void *arg, const TdbRingUpdate *u, uint32_t lane, uint64_t ticket);

/*
 * Create <prefix>.writers for nlanes lanes of lane_slots slots (a power of
 * two, TDB_RING_MIN_SLOTS .. TDB_RING_MAX_SLOTS), or adopt the one left by
 * a previous run of the daemon when its instance id and geometry match: its
 * undrained slots are drained by this run; what the previous run drained
 * and did not commit is recorded as lost (lost range, restart_epoch and
 * commit_word bumped, waiters woken).  An object that does not match is
 * marked stopped (its writers reopen) and replaced.  gid == (gid_t) -1:
 * mode 0600, else 0660 with that group (trafficdb.writer_group).  The
 * header, lane headers and slots are created sparse; writers reserve their
 * lane's pages when they claim it.  State starts TDB_RING_STARTING: call
 * tdb_ring_set_state(RUNNING) when draining starts.
 * Returns TDB_SHM_OK or a TdbShmResult with a message in err (TDB_SHM_ERRLEN).
 */
int			tdb_ring_create(TdbRing *r, const char *prefix, uint32_t nlanes, uint32_t lane_slots, gid_t gid,
							uint64_t instance_id, char *err);

/*
 * Drain every lane (from where the last drain stopped), at most
 * max_updates updates (0: no limit).  Checks the file's size first (a
 * truncated file: st->truncated, nothing read; SIGBUS during the drain is
 * the caller's to catch), then that the header still names this ring (a
 * file zeroed or overwritten by a member of writer_group, which no new
 * writer could open: st->header_damaged, nothing read; make the ring anew).
 * A lane is drained up to its first end of batch (consumed, counted in
 * st->marks), then not at all until tdb_ring_committed.  st (may be NULL)
 * is overwritten.  Returns the number of updates applied.
 */
uint64_t	tdb_ring_drain(TdbRing *r, uint64_t max_updates, tdb_ring_apply_fn fn, void *arg,
						   TdbRingDrainStats *st);

/*
 * The generation holding everything drained so far has committed: every
 * lane's durable becomes the tail drained into it, committed_generation =
 * generation, commit_word + 1, sync writers woken, lanes stopped at an end
 * of batch drained again.  Call it with nothing
 * drained between building that generation and its commit (or only what
 * it holds).
 */
void		tdb_ring_committed(TdbRing *r, uint64_t generation);

/*
 * Does a TRAFFICDB_SYNC writer wait for updates the daemon has drained from
 * its lane and not yet made durable (its lane's sync_until above durable,
 * and head too)?  Per lane: a writer that died waiting asks for nothing
 * once what it put is durable (the count in sync_waiters stays).  The
 * caller guards it against SIGBUS as a drain.
 */
bool		tdb_ring_sync_wanted(const TdbRing *r);

/* Every lane drained past its end of batch again (an orderly stop, its commit not confirmed by a standby). */
void		tdb_ring_release_batches(TdbRing *r);

/* Does a lane hold a published put not drained yet? */
bool		tdb_ring_undrained(const TdbRing *r);

/*
 * Was a lane drained up to an end of batch whose generation has not
 * committed yet (the daemon should make it now, and again after a failure)?
 */
bool		tdb_ring_batch_ended(const TdbRing *r);

/*
 * TDB_RING_RUNNING, REBUILDING or STOPPED; retry_hint_us (0: keep the
 * drain EWMA) is what a writer's trafficdb_retry_after_us() says meanwhile.
 * Wakes every waiter so it re-reads the state.
 */
void		tdb_ring_set_state(TdbRing *r, uint32_t state, uint32_t retry_hint_us);

/*
 * The daemon's bell: a Unix datagram socket bound under a random name in
 * the abstract namespace, non-blocking.  Returns its descriptor and sets
 * *nonce (what the ring's bell_nonce must say), or -1 with err
 * (TDB_SHM_ERRLEN).  One per daemon: it outlives rings made anew.
 */
int			tdb_ring_bell_open(uint64_t *nonce, char *err);

/* Read away what was rung (bounded); returns the datagrams read. */
int			tdb_ring_bell_drain(int fd);

/*
 * Announce that the daemon sleeps (bell_nonce = nonce, daemon_asleep = 1,
 * full fence) and look once more: false (and the flag cleared) if a lane
 * holds a published put not drained yet (a lane stopped at an end of batch
 * does not count: it waits for a commit, which the daemon's own timer
 * retries), or if sync_matters and a writer waits for a commit; true if it
 * may sleep until the bell rings.  The next
 * drain does not count the sleep as a drain period (the BUSY hint).  The
 * caller guards it against SIGBUS as a drain.
 */
bool		tdb_ring_sleep(TdbRing *r, uint64_t nonce, bool sync_matters);

/* Awake again (daemon_asleep = 0): writers stop checking for a bell. */
void		tdb_ring_awake(TdbRing *r);

/* Unmap; nothing is unlinked: the next run of the daemon adopts it (a crash, a restart). */
void		tdb_ring_close(TdbRing *r);

/*
 * An orderly stop: mark the ring stopped (writers get TRAFFICDB_STALE and
 * reopen later), wake every waiter, unlink <prefix>.writers and close.
 * (tdb_writer_close(w, true) unlinks only the names it made;
 * tdb_writer_stop_instance removes every "<prefix>.*" anyway.)
 */
void		tdb_ring_remove(TdbRing *r);

/*
 * Is the file still as large as it was made?  tdb_ring_drain checks it
 * itself; tdb_ring_committed and tdb_ring_set_state store into the lanes
 * and header without checking: a member of writer_group who truncated the
 * file makes that a SIGBUS, the caller's to catch (or check this first).
 */
bool		tdb_ring_intact(const TdbRing *r);

/* Is lane's owner alive (OFD lock test, as tdb_slot_alive)?  For display. */
bool		tdb_ring_lane_owned(const TdbRing *r, uint32_t lane);

#endif							/* TDB_RING_H */
