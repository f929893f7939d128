/*
 * subring.h
 *	  Subscribers' event rings, <prefix>.subs: the daemon evaluates
 *	  subscriptions at each publication and delivers events to each
 *	  subscriber through a single-producer/single-consumer ring of its own in
 *	  shared memory, with a futex wake-up (docs/subscriptions-rings.md).
 *	  The mirror image of the writers' ring (src/ring/ring.h): there the
 *	  external processes produce and the daemon consumes; here the daemon
 *	  produces and the external processes consume.
 *
 * Slots.  The segment holds nslots subscriber slots.  A consumer owns slot i
 * for as long as it holds an OFD write lock on byte i of the file (bytes
 * [0, nslots), inside the header; locks are advisory).  The kernel drops the
 * lock when the owner exits however it exits (kill -9 included), so the
 * producer tells a live owner from a dead one by trying the lock itself.
 *
 * A slot's state moves FREE -> CLAIMED -> ACTIVE -> CLOSED (or its owner
 * dies) -> FREE.  Consumers make the first three moves, and only under
 * their lock; only the producer makes a slot FREE again, under its own lock
 * on the byte, after it has taken back the events the consumer never took
 * (group handover) - so a new owner never inherits a dead one's events.
 *
 * Positions.  head (written by the producer only) and tail (by the owner
 * only) count events since the segment was made; they never go back, and
 * an event at position p is at ring[p & (ring_events - 1)] with seq p + 1.
 * The producer writes events at head and publishes them with one release
 * store of head; the consumer copies [tail, head) out and gives the room
 * back with one release store of tail.  The producer never writes at a
 * position p >= tail + ring_events: it never overwrites an unread event.
 *
 * Delivery rule.  An event is delivered when the consumer's release store
 * of tail passes it.  tdb_subring_receive copies events out, stores tail,
 * and only then returns them (at most once for the application: a consumer
 * killed after the tail store and before using them has lost them);
 * tdb_subring_peek + tdb_subring_consume lets an application use them
 * first and store the tail after (at least once).  Either way an event is
 * either below the tail (delivered) or at/after it (the producer hands it
 * over when the owner dies), never both, never neither.
 *
 * Overrun rule.  When a ring is full the producer neither blocks nor
 * overwrites: it drops events and remembers the generation of the first
 * one dropped.  As soon as the consumer has made room, the next event is
 * preceded by an OVERRUN event naming that generation (and how many were
 * dropped): the consumer resyncs with changes_since(generation - 1).  The
 * daemon's wake and sweep put a pending OVERRUN on its own as soon as one
 * event fits, so a consumer learns of the loss even when nothing else comes.
 *
 * Trust.  A member of the segment's group can write all of it.  The
 * producer keeps geometry, heads and slot states in TdbSubring and never
 * re-reads them; a tail out of [head - ring_events, head] makes pushes fail
 * with TDB_SHM_ECORRUPT; events it takes back are checked (seq) before
 * use.  The consumer checks the header and the file size before mapping,
 * bounds head - tail by ring_events and checks each event's seq and kind.
 *
 * Memory ordering is C11 atomics throughout, argued for any CPU.
 * No PostgreSQL headers: linked into the module and into libtrafficdb.
 */
#ifndef TDB_SUBRING_H
#define TDB_SUBRING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "busguard.h"
#include "shm.h"

#define TDB_SUBS_MAGIC				0x42534454u /* "TDSB" */
#define TDB_SUBS_VERSION			2	/* 2: the request area after the slots */
#define TDB_SUBRING_HEADER_SIZE		4096
#define TDB_SUBRING_CONTROL_SIZE	4096	/* a slot's control page (its first 256 bytes used) */
#define TDB_SUBRING_FILTER_SIZE		4096	/* the filter area: opaque bytes for the ring */
#define TDB_SUBRING_EVENT_SIZE		64
#define TDB_SUBRING_MAX_SLOTS		1024	/* lock bytes [0, nslots) stay inside the header */
#define TDB_SUBRING_MIN_EVENTS		64		/* slot sizes stay multiples of 4096 */
#define TDB_SUBRING_MAX_EVENTS		(1u << 20)

/* TdbSubsHeader.state */
#define TDB_SUBRING_STARTING		0
#define TDB_SUBRING_RUNNING			1
#define TDB_SUBRING_STOPPED			2	/* orderly stop or replaced: receive says TDB_SHM_ESTALE */

/* TdbSubSlot.state */
#define TDB_SUBSLOT_FREE			0	/* set by the producer only */
#define TDB_SUBSLOT_CLAIMED			1	/* locked by a consumer filling its filter in */
#define TDB_SUBSLOT_ACTIVE			2	/* filter and group final: the producer may attach */
#define TDB_SUBSLOT_CLOSED			3	/* the owner left; the producer reclaims it as a dead one */

/* TdbSubSlot.group_mode (group_id != 0) */
#define TDB_SUBGROUP_NONE			0
#define TDB_SUBGROUP_ROUND_ROBIN	1	/* each event to the next live member */
#define TDB_SUBGROUP_STICKY			2	/* a location to the same member while it lives */

/* TdbSubEvent.kind: 0 is never an event; unknown kinds are to be skipped */
#define TDB_SUBEV_CHANGE			1	/* a matching entry changed */
#define TDB_SUBEV_ENTER				2	/* an entry started to match the condition */
#define TDB_SUBEV_EXIT				3	/* an entry stopped matching it */
#define TDB_SUBEV_OVERRUN			4	/* events were dropped: resync (see TdbSubEvent) */
#define TDB_SUBEV_KIND_MAX			255 /* room for later kinds: 1 .. 255 are valid */

/* TdbSubEvent.flags */
#define TDB_SUBEV_HANDED_OVER		0x0001	/* taken back from a dead group member and re-pushed */

/* push results (>= 0; errors are negative TdbShmResult codes) */
#define TDB_SUBRING_PUSHED			0
#define TDB_SUBRING_DROPPED			1	/* the ring is full: dropped, overrun recorded */

/* receive: a signal interrupted the wait (nothing was taken) */
#define TDB_SUBRING_EINTR			(-40)

/*
 * An event: one cache line.  Floats are NaN and u8 values 255 when absent
 * (as in the writers' ring).
 */
typedef struct TdbSubEvent
{
	uint64_t	generation;		/* the publication that made the change; OVERRUN: the first
								 * generation of which events were dropped (resync with
								 * changes_since(generation - 1)) */
	uint64_t	location_id;	/* the entry's location id; OVERRUN: how many events were dropped */
	uint64_t	seq;			/* position in the slot's ring + 1: consecutive per slot (set by push) */
	int64_t		created_us;		/* the publication's time, Unix microseconds */
	uint32_t	subscription;	/* the daemon's id of the subscription that matched */
	uint16_t	kind;			/* TDB_SUBEV_* */
	uint16_t	flags;			/* TDB_SUBEV_HANDED_OVER */
	float		old_speed_kmh;	/* before the publication */
	float		new_speed_kmh;	/* after it */
	float		old_free_flow_kmh;
	float		new_free_flow_kmh;
	uint8_t		old_congestion; /* 0 .. 4, 255 absent */
	uint8_t		new_congestion;
	uint8_t		old_confidence; /* 0 .. 100, 255 absent */
	uint8_t		new_confidence;
	uint8_t		old_incident;	/* 1: an incident was present, 0: none */
	uint8_t		new_incident;
	uint8_t		reserved[2];	/* 0 */
} TdbSubEvent;

typedef struct TdbSubsHeader
{
	uint32_t	magic;			/* TDB_SUBS_MAGIC, stored last at creation */
	uint16_t	version;		/* TDB_SUBS_VERSION */
	uint16_t	header_size;	/* TDB_SUBRING_HEADER_SIZE */
	uint64_t	instance_id;	/* = TdbControl.instance_id */
	uint32_t	nslots;
	uint32_t	ring_events;	/* a power of two */
	_Atomic uint32_t state;		/* TDB_SUBRING_* */
	uint32_t	filter_size;	/* TDB_SUBRING_FILTER_SIZE */
	uint64_t	slot_size;		/* informative: tdb_subring_slot_size(ring_events) */
	uint64_t	slots_offset;	/* informative: TDB_SUBRING_HEADER_SIZE */
	uint32_t	req_cells;		/* tdb_subreq_cells(nslots) */
	uint32_t	req_max_bytes;	/* TDB_SUBREQ_MAX_BYTES */
	uint64_t	req_offset;		/* informative: tdb_subreq_offset(nslots, ring_events) */
	char		pad[TDB_SUBRING_HEADER_SIZE - 64];
} TdbSubsHeader;

/* A slot's control block; the filter area and the ring follow in the slot. */
typedef struct TdbSubSlot
{
	/* line 0: the owner's */
	_Atomic uint64_t tail;		/* events < tail are delivered; release-stored after the copy */
	_Atomic uint32_t waiters;	/* nonzero while the owner is (about to be) in FUTEX_WAIT */
	_Atomic int32_t pid;		/* the owner's pid in its namespace: display only */
	char		p0[48];
	/* line 1: the producer's */
	_Atomic uint64_t head;		/* events < head are written; release-stored after them */
	_Atomic uint32_t wake_word; /* futex: +1 before each FUTEX_WAKE */
	_Atomic uint32_t overrun;	/* 1 while events are being dropped (an OVERRUN pending) */
	_Atomic uint64_t overrun_generation;	/* the generation the OVERRUN will name */
	_Atomic uint64_t dropped;	/* events dropped, all episodes: display */
	_Atomic uint64_t pushed;	/* events written: display */
	char		p1[24];
	/* line 2: the state, and what the owner sets before ACTIVE */
	_Atomic uint32_t state;		/* TDB_SUBSLOT_* */
	uint32_t	filter_len;		/* bytes of the filter area used */
	uint64_t	group_id;		/* 0: no group */
	uint32_t	group_mode;		/* TDB_SUBGROUP_* */
	uint32_t	reserved;
	char		p2[40];
	/* line 3: spare */
	char		p3[64];
} TdbSubSlot;

_Static_assert(sizeof(TdbSubEvent) == TDB_SUBRING_EVENT_SIZE, "an event is one cache line");
_Static_assert(offsetof(TdbSubEvent, old_speed_kmh) == 40, "TdbSubEvent: no padding before the floats");
_Static_assert(offsetof(TdbSubEvent, reserved) == 62, "TdbSubEvent: no padding before reserved");
_Static_assert(sizeof(TdbSubsHeader) == TDB_SUBRING_HEADER_SIZE, "the header is one page");
_Static_assert(sizeof(TdbSubSlot) == 256, "a slot's control block is four cache lines");
_Static_assert(TDB_SUBRING_MAX_SLOTS <= TDB_SUBRING_HEADER_SIZE, "lock bytes inside the header");

/* ---- geometry ------------------------------------------------------------------ */

static inline bool
tdb_subring_geometry_ok(uint32_t nslots, uint32_t ring_events)
{
	return nslots >= 1 && nslots <= TDB_SUBRING_MAX_SLOTS && ring_events >= TDB_SUBRING_MIN_EVENTS &&
		ring_events <= TDB_SUBRING_MAX_EVENTS && (ring_events & (ring_events - 1)) == 0;
}

/* A slot: control page, filter area, ring; a multiple of 4096 bytes. */
static inline size_t
tdb_subring_slot_size(uint32_t ring_events)
{
	return TDB_SUBRING_CONTROL_SIZE + TDB_SUBRING_FILTER_SIZE + (size_t) ring_events * TDB_SUBRING_EVENT_SIZE;
}

static inline size_t
tdb_subring_slot_offset(uint32_t ring_events, uint32_t slot)
{
	return TDB_SUBRING_HEADER_SIZE + (size_t) slot * tdb_subring_slot_size(ring_events);
}

/* ---- the request area (request-response over the slots; subreq.c) -----------
 *
 * After the slots: one bell per slot (a member of a group waiting for a
 * request sleeps on its bell), then the cells' control lines, then the
 * cells' payloads (a request and its response).  A requester and a member
 * are both subscribers: each owns a slot (its OFD lock), and the slot is
 * what says it is alive.  The state word of a cell:
 *
 *	 FREE --requester--> FILLING --requester--> POSTED --member--> TAKEN
 *	 TAKEN --member--> WRITING --member--> ANSWERED --requester--> FREE
 *	 POSTED --requester gives up--> FREE
 *	 TAKEN --requester gives up or dies--> ORPHANED --member (answer, or its next take)--> FREE
 *	 WRITING --requester gives up or dies--> ORPHANED_WRITING --member (answer)--> FREE
 *	 TAKEN, WRITING --member dies (requester or daemon)--> POSTED
 *	 FILLING, POSTED, ANSWERED --requester dies (daemon)--> FREE
 *
 * Every move is one compare-and-swap of the whole word (state, owner,
 * taker, ticket), so a move made on a stale view fails; the ticket grows at
 * each claim, so a cell used again is never mistaken for the old one.
 */
#define TDB_SUBREQ_MAX_BYTES		4096	/* a request, and a response, at most */
#define TDB_SUBREQ_CELL_BYTES		(2 * TDB_SUBREQ_MAX_BYTES)	/* the request, then the response */

#define TDB_SUBREQ_FREE				0
#define TDB_SUBREQ_FILLING			1
#define TDB_SUBREQ_POSTED			2
#define TDB_SUBREQ_TAKEN			3
#define TDB_SUBREQ_WRITING			4
#define TDB_SUBREQ_ANSWERED			5
#define TDB_SUBREQ_ORPHANED			6	/* given up while TAKEN: no answer is being written */
#define TDB_SUBREQ_ORPHANED_WRITING	7	/* given up while WRITING: only the writer frees it */
#define TDB_SUBREQ_IS_ORPHANED(st)	((st) == TDB_SUBREQ_ORPHANED || (st) == TDB_SUBREQ_ORPHANED_WRITING)

/* the state word: state 4 bits, owner slot 12, taker slot 12, ticket 36 */
#define TDB_SUBREQ_STATE(w)			((uint32_t) ((w) & 0xF))
#define TDB_SUBREQ_OWNER(w)			((uint32_t) (((w) >> 4) & 0xFFF))
#define TDB_SUBREQ_TAKER(w)			((uint32_t) (((w) >> 16) & 0xFFF))
#define TDB_SUBREQ_TICKET(w)		((w) >> 28)
#define TDB_SUBREQ_WORD(state, owner, taker, ticket) \
	((uint64_t) (state) | ((uint64_t) (owner) << 4) | ((uint64_t) (taker) << 16) | ((uint64_t) (ticket) << 28))
#define TDB_SUBREQ_TICKET_MASK		((UINT64_C(1) << 36) - 1)

/* A slot's bell: a member waiting for a request of its group sleeps on word. */
typedef struct TdbSubBell
{
	_Atomic uint32_t word;		/* futex: +1 before each FUTEX_WAKE */
	_Atomic uint32_t waiters;	/* 1 while the member is (about to be) in FUTEX_WAIT */
	_Atomic uint64_t group_id;	/* the waiting member's group */
	char		pad[48];
} TdbSubBell;

/* A cell's control line; its payload is elsewhere (tdb_subreq_payload). */
typedef struct TdbSubReqCell
{
	_Atomic uint64_t word;		/* TDB_SUBREQ_WORD */
	_Atomic uint64_t group_id;	/* written while FILLING */
	_Atomic uint32_t futex;		/* the requester sleeps on it: +1 before each FUTEX_WAKE */
	_Atomic uint32_t waiters;	/* 1 while the requester is (about to be) in FUTEX_WAIT */
	_Atomic uint32_t req_len;	/* written while FILLING */
	_Atomic uint32_t resp_len;	/* written while WRITING */
	_Atomic int32_t owner_pid;	/* display */
	_Atomic int32_t taker_pid;	/* display */
	_Atomic int64_t posted_us;	/* CLOCK_MONOTONIC µs at POSTED: display */
	char		pad[16];
} TdbSubReqCell;

_Static_assert(sizeof(TdbSubBell) == 64, "a bell is a cache line");
_Static_assert(sizeof(TdbSubReqCell) == 64, "a cell's control is a cache line");
_Static_assert(TDB_SUBRING_MAX_SLOTS <= 0x1000, "slot numbers fit the state word's 12 bits");

/* Cells: four per slot, 64 .. 4096. */
static inline uint32_t
tdb_subreq_cells(uint32_t nslots)
{
	uint32_t	n = nslots * 4;

	return n < 64 ? 64 : n > 4096 ? 4096 : n;
}

static inline size_t
tdb_subreq_align(size_t n)
{
	return (n + 4095) & ~(size_t) 4095;
}

/* Where the request area starts, and its size: bells, cells' control, payloads. */
static inline size_t
tdb_subreq_offset(uint32_t nslots, uint32_t ring_events)
{
	return tdb_subring_slot_offset(ring_events, nslots);
}

static inline size_t
tdb_subreq_cells_offset(uint32_t nslots)
{
	return tdb_subreq_align((size_t) nslots * sizeof(TdbSubBell));
}

static inline size_t
tdb_subreq_payload_offset(uint32_t nslots)
{
	return tdb_subreq_cells_offset(nslots) + tdb_subreq_align((size_t) tdb_subreq_cells(nslots) * sizeof(TdbSubReqCell));
}

static inline size_t
tdb_subreq_area_size(uint32_t nslots)
{
	return tdb_subreq_payload_offset(nslots) + (size_t) tdb_subreq_cells(nslots) * TDB_SUBREQ_CELL_BYTES;
}

static inline size_t
tdb_subring_size(uint32_t nslots, uint32_t ring_events)
{
	return tdb_subreq_offset(nslots, ring_events) + tdb_subreq_area_size(nslots);
}

/* Given the request area's base: */
static inline TdbSubBell *
tdb_subreq_bell(void *area, uint32_t slot)
{
	return (TdbSubBell *) area + slot;
}

static inline TdbSubReqCell *
tdb_subreq_cell(void *area, uint32_t nslots, uint32_t cell)
{
	return (TdbSubReqCell *) ((char *) area + tdb_subreq_cells_offset(nslots)) + cell;
}

static inline unsigned char *
tdb_subreq_payload(void *area, uint32_t nslots, uint32_t cell)
{
	return (unsigned char *) area + tdb_subreq_payload_offset(nslots) + (size_t) cell * TDB_SUBREQ_CELL_BYTES;
}

static inline TdbSubSlot *
tdb_subring_slot(void *base, uint32_t ring_events, uint32_t slot)
{
	return (TdbSubSlot *) ((char *) base + tdb_subring_slot_offset(ring_events, slot));
}

static inline unsigned char *
tdb_subring_filter_area(TdbSubSlot *s)
{
	return (unsigned char *) s + TDB_SUBRING_CONTROL_SIZE;
}

static inline TdbSubEvent *
tdb_subring_events(TdbSubSlot *s)
{
	return (TdbSubEvent *) ((char *) s + TDB_SUBRING_CONTROL_SIZE + TDB_SUBRING_FILTER_SIZE);
}

/* ---- producer (the daemon; one thread) -------------------------------------------- */

/* The producer's own view of a slot (never read back from the file). */
typedef struct TdbSubLocal
{
	uint8_t		mode;			/* SUBLOCAL_DETACHED / ATTACHED / RECLAIMING (producer.c) */
	bool		overrun;		/* dropping: an OVERRUN is owed */
	bool		wake_pending;	/* pushed since the last wake */
	uint32_t	deferred;		/* written at head - deferred .. head, head not stored yet (push_deferred) */
	uint64_t	head;			/* next position to write */
	uint64_t	overrun_generation;
	uint64_t	overrun_dropped;	/* events dropped in this episode */
	uint64_t	reclaim_pos;	/* RECLAIMING: next undelivered position */
	uint64_t	group_id;		/* copied at attach */
	uint32_t	group_mode;
	uint32_t	filter_len;
	int32_t		pid;
} TdbSubLocal;

typedef struct TdbSubring
{
	char		name[TDB_SHM_NAME_MAX + 24];
	void	   *base;
	size_t		size;			/* what we mapped and expect */
	int			fd;				/* our open file description: size checks and slot locks */
	uint32_t	nslots;			/* ours, never re-read from the file */
	uint32_t	ring_events;
	uint64_t	instance_id;
	uint32_t	sweep_next;		/* where a sweep that ran out of room goes on */
	TdbSubLocal *local;			/* nslots */
	uint64_t	wakes_total;	/* FUTEX_WAKE calls */
	uint64_t	damaged_total;	/* pushes refused for a tail out of range, bad events taken back */
	uint64_t	requests_reclaimed; /* request cells of dead slots put back (posted again or freed) */
	uint32_t	state;			/* the state we stored last (tdb_subring_set_state): the header must say it */
	char		damage[160];	/* sweep's TDB_SHM_ECORRUPT: what was found damaged */
} TdbSubring;

/* What a sweep found. */
#define TDB_SUBCHANGE_ATTACHED		1	/* a new ACTIVE subscriber: parse its filter */
#define TDB_SUBCHANGE_RECLAIMED		2	/* its owner died or left: take_undelivered, or discard */

typedef struct TdbSubChange
{
	uint32_t	kind;			/* TDB_SUBCHANGE_* */
	uint32_t	slot;
	int32_t		pid;			/* as the owner said: display only */
	uint32_t	group_mode;
	uint64_t	group_id;		/* as copied at attach (RECLAIMED: the dead member's group) */
	uint32_t	filter_len;		/* ATTACHED: bytes to read with tdb_subring_filter */
	bool		tail_damaged;	/* RECLAIMED: the tail made no sense: nothing to hand over */
	uint64_t	tail;			/* RECLAIMED: the owner's last tail (events below it were delivered) */
	uint64_t	undelivered;	/* RECLAIMED: events the owner never took (tail .. head) */
	uint64_t	overrun_generation; /* RECLAIMED with overrun_dropped > 0: the owed OVERRUN */
	uint64_t	overrun_dropped;	/* RECLAIMED: events dropped and never reported to it */
} TdbSubChange;

/*
 * Create <prefix>.subs for nslots slots of ring_events events (a power of
 * two, TDB_SUBRING_MIN_EVENTS .. TDB_SUBRING_MAX_EVENTS).  An object left
 * by a previous run is marked stopped (its consumers get TDB_SHM_ESTALE and
 * subscribe again) and replaced: subscriptions do not outlive the daemon.
 * gid == (gid_t) -1: mode 0600, else 0660 with that group.  Sparse: each
 * consumer reserves its slot's pages when it claims it.  State starts
 * TDB_SUBRING_STARTING: tdb_subring_set_state(RUNNING) when delivering.
 * Returns TDB_SHM_OK or a TdbShmResult with a message in err.
 */
int			tdb_subring_create(TdbSubring *r, const char *prefix, uint32_t nslots, uint32_t ring_events,
							   gid_t gid, uint64_t instance_id, char *err);

/*
 * Find what changed: slots that became ACTIVE (attached: pushes are
 * accepted from now on) and slots whose owner died or left (one OFD lock
 * attempt per occupied slot; the producer keeps the byte locked until the
 * slot is FREE again, so nobody claims it meanwhile).  Also puts owed
 * OVERRUN events that now fit.  At most max changes into out (*nout);
 * the rest at the next sweep.  Checks the file's size and header first
 * (magic, geometry, instance, and the state we set: a member of the group
 * who stores STOPPED there would refuse every subscriber):
 * TDB_SHM_ECORRUPT (nothing done, r->damage says what) when either is
 * damaged - tdb_subring_abandon it and make it anew.
 */
int			tdb_subring_sweep(TdbSubring *r, TdbSubChange *out, uint32_t max, uint32_t *nout);

/*
 * Push one event into an attached slot (ev->seq is set here).  Never
 * blocks and never overwrites: TDB_SUBRING_PUSHED, or TDB_SUBRING_DROPPED
 * when the ring is full (the overrun rule), or TDB_SHM_EINVAL (not an
 * attached slot) or TDB_SHM_ECORRUPT (the slot's tail makes no sense: the
 * daemon should stop delivering there).  Visible to the consumer at once;
 * its wake-up waits for tdb_subring_wake.
 */
int			tdb_subring_push(TdbSubring *r, uint32_t slot, const TdbSubEvent *ev);

/*
 * The same for a large batch: the event is written but head is stored (one
 * release store, and one count) only every TDB_SUBRING_PUBLISH_EVERY events
 * of the slot (a quarter of a smaller ring), by tdb_subring_wake and by the
 * next tdb_subring_push; at each such store a consumer that waits is woken,
 * so that it drains while the batch goes on.  End the batch with
 * tdb_subring_wake or tdb_subring_wake_pending, which publish what is left.
 */
#define TDB_SUBRING_PUBLISH_EVERY 4096
int			tdb_subring_push_deferred(TdbSubring *r, uint32_t slot, const TdbSubEvent *ev);

/* Events that fit now (0 when not attached, damaged, or an OVERRUN is owed and no two fit). */
uint32_t	tdb_subring_space(const TdbSubring *r, uint32_t slot);

/*
 * End of a publication batch for slot: put an owed OVERRUN if one fits,
 * then FUTEX_WAKE its consumer if it waits (no system call otherwise).
 * Returns whether a wake was made.  tdb_subring_wake_pending does it for
 * every slot pushed to since its last wake and returns the wakes made.
 */
bool		tdb_subring_wake(TdbSubring *r, uint32_t slot);
uint32_t	tdb_subring_wake_pending(TdbSubring *r);

/*
 * Group handover, after a sweep reported slot RECLAIMED: copy up to max of
 * the events its owner never took (tail .. head at the sweep), in order,
 * flagged TDB_SUBEV_HANDED_OVER, for the daemon to push to other live
 * members; each is returned once.  When the last one has been returned the
 * slot is FREE again (claimable).  Events failing their seq check are
 * skipped and counted.  Returns the number copied (0: nothing left, or the
 * slot is not being reclaimed).  tdb_subring_discard frees it without them.
 */
uint32_t	tdb_subring_take_undelivered(TdbSubring *r, uint32_t slot, TdbSubEvent *out, uint32_t max);
void		tdb_subring_discard(TdbSubring *r, uint32_t slot);

/*
 * Copy an attached slot's filter (filter_len bytes, as at attach) into buf
 * (cap bytes).  Returns its length, or -1 (not attached, or cap too small).
 * The daemon parses this copy and trusts nothing in it.
 */
int			tdb_subring_filter(const TdbSubring *r, uint32_t slot, void *buf, uint32_t cap);

/* TDB_SUBRING_RUNNING or STOPPED; wakes every occupied slot's consumer. */
void		tdb_subring_set_state(TdbSubring *r, uint32_t state);

/*
 * Leave a segment found damaged (sweep's TDB_SHM_ECORRUPT): when it is still
 * as large as it was made, mark it STOPPED and wake every consumer (from
 * our own geometry, never the file's), so that they learn at once to
 * subscribe again; then unlink and close it.  A consumer also finds the
 * file unlinked at its next wait.  Run under the SIGBUS guard.
 */
void		tdb_subring_abandon(TdbSubring *r);

/* Is the file still as large as it was made? (sweep checks it itself) */
bool		tdb_subring_intact(const TdbSubring *r);

/* Unmap and close (nothing unlinked). */
void		tdb_subring_close(TdbSubring *r);

/* An orderly stop: STOPPED, everyone woken, <prefix>.subs unlinked, closed. */
void		tdb_subring_remove(TdbSubring *r);

/* ---- consumer (libtrafficdb; one thread per consumer at a time) -------------------- */

typedef struct TdbSubConsumer
{
	char		name[TDB_SHM_NAME_MAX + 24];
	int			fd;				/* O_RDWR: the slot's lock and its pages */
	const TdbSubsHeader *hdr;	/* the header (read-only mapping) */
	void	   *map;			/* our read-only mapping of the file (NULL: borrowed) */
	size_t		map_size;
	void	   *slot_map;		/* our read-write mapping of the slot (NULL: borrowed) */
	TdbSubSlot *slot;			/* NULL until subscribed */
	TdbSubEvent *ring;
	uint32_t	nslots;			/* validated at open, never re-read */
	uint32_t	ring_events;
	uint64_t	instance_id;
	int32_t		slot_idx;		/* -1 until subscribed */
	uint64_t	tail;			/* our copy of the tail (only we write it) */
	void	   *req_area;		/* the request area, read-write (NULL until the first request) */
	void	   *req_map;		/* our mapping of it (NULL: borrowed) */
	size_t		req_size;
	uint32_t	req_next;		/* where the next scan for a cell starts */
	void	   *borrowed;		/* tests: another mapping of the file used instead of ours */
	int			bus_map;		/* busguard handles of map, slot_map, req_map (0: none) */
	int			bus_slot;
	int			bus_req;
	int64_t		next_check_ms;	/* tdb_mono_ms when wait next fstats the file (0: at once) */
	char		err[TDB_SHM_ERRLEN];
} TdbSubConsumer;

/*
 * Did a mapping of ours fault (a member of the segment's group truncated
 * it)?  Its pages are zeros now (busguard.h): what was read is garbage and
 * the subscription is void.  Three loads, no system call.
 */
static inline bool
tdb_subring_consumer_broken(const TdbSubConsumer *c)
{
	return tdb_bus_broken(c->bus_map) || tdb_bus_broken(c->bus_slot) || tdb_bus_broken(c->bus_req);
}

/*
 * Every mapping a consumer makes of the file is SIGBUS-safe (busguard.h):
 * a member of the group truncating it costs the consumer an error
 * (TDB_SHM_ECORRUPT, "truncated"), never its process.  A consumer that
 * finds no event also checks, at most once a second (so before each sleep,
 * and also when it polls with timeout 0), that the file is still linked
 * (the daemon unlinks a segment it found damaged and makes a new one:
 * TDB_SHM_ESTALE, subscribe again) and as large as it was.
 *
 * Open <prefix>.subs: size checked with fstat before mapping, header and
 * geometry validated; instance_id != 0 must match the header's (the
 * control block's).  TDB_SHM_OK, ENOENT, EACCES, EINVAL (not a
 * subscriptions segment or truncated), ESTALE (stopped or another
 * instance), ESYS.  On failure err says why and nothing stays open.
 * borrow: NULL; tests pass the producer's mapping so ThreadSanitizer sees
 * both sides of the ring (it cannot relate two mappings of one file).
 */
int			tdb_subring_consumer_open(TdbSubConsumer *c, const char *prefix, uint64_t instance_id,
									  void *borrow, char *err);

/*
 * Claim a free slot (OFD lock), reserve its pages, write the filter
 * (filter_len <= TDB_SUBRING_FILTER_SIZE bytes, opaque here) and the group
 * (group_id 0: none), then make it ACTIVE.  TDB_SHM_OK, ENOSLOT (every slot
 * owned or awaiting its reclaim), EINVAL, ESTALE, ESYS.
 */
int			tdb_subring_subscribe(TdbSubConsumer *c, const void *filter, uint32_t filter_len,
								  uint64_t group_id, uint32_t group_mode);

/*
 * Up to max events, delivered (tail stored) before returning.  With none,
 * waits up to timeout_ms (0: do not wait) in FUTEX_WAIT.  Returns the
 * count (0: timed out), TDB_SUBRING_EINTR (a signal), TDB_SHM_ESTALE (the
 * daemon stopped; events already there are returned first),
 * TDB_SHM_ECORRUPT (head out of range or an event failing its seq/kind
 * check: nothing taken), TDB_SHM_EINVAL (not subscribed).
 */
int			tdb_subring_receive(TdbSubConsumer *c, TdbSubEvent *out, uint32_t max, int timeout_ms);

/*
 * Wait up to timeout_ms until events are there, without taking any.
 * Returns how many are there (> 0), 0 (timed out), TDB_SUBRING_EINTR,
 * TDB_SHM_ESTALE, TDB_SHM_ECORRUPT, TDB_SHM_EINVAL.
 */
int			tdb_subring_wait(TdbSubConsumer *c, int timeout_ms);

/* Copy up to max available events without delivering them (no wait). Same codes as receive. */
int			tdb_subring_peek(TdbSubConsumer *c, TdbSubEvent *out, uint32_t max);

/* Deliver the first n events peeked (release store of the tail). */
int			tdb_subring_consume(TdbSubConsumer *c, uint32_t n);

/* Leave: the slot becomes CLOSED (the producer hands over what is left), unlocked, unmapped. */
void		tdb_subring_consumer_close(TdbSubConsumer *c);

/* ---- request-response (subreq.c) ------------------------------------------------ */

/* results (errors are negative TdbShmResult codes or these) */
#define TDB_SUBREQ_ETIMEDOUT		(-41)	/* no answer in time: the request is withdrawn */
#define TDB_SUBREQ_EGONE			(-42)	/* answer: the requester gave up or died; dropped */
#define TDB_SUBREQ_ENOMEMBER		(-43)	/* call: no live member of the group waits or works */

/* A request a member took: what tdb_subreq_answer needs. */
typedef struct TdbSubReqTaken
{
	uint32_t	cell;
	uint64_t	ticket;
	uint32_t	len;			/* bytes of the request copied out */
	int32_t		requester_pid;	/* as the requester said: display only */
} TdbSubReqTaken;

/*
 * A requester (any subscriber): post req (len <= TDB_SUBREQ_MAX_BYTES) to
 * the group group_id, wait up to timeout_ms for the answer of the member
 * that takes it and copy the answer to resp (cap bytes).  A member that
 * dies or leaves before answering has the request posted again for the
 * others.  Returns the answer's length (>= 0), TDB_SUBREQ_ETIMEDOUT (the
 * request is withdrawn: a member still working on it has its answer
 * dropped), TDB_SUBREQ_ENOMEMBER (the group has no live member),
 * TDB_SHM_ENOSLOT (every cell is in use), TDB_SUBRING_EINTR (a signal; the
 * request is withdrawn), TDB_SHM_ESTALE, TDB_SHM_EINVAL (cap smaller than
 * the answer: it is dropped), TDB_SHM_ESYS.
 */
int			tdb_subreq_call(TdbSubConsumer *c, uint64_t group_id, const void *req, uint32_t len, void *resp,
							uint32_t cap, int timeout_ms);

/*
 * A member (a subscriber of a group): take the next request posted to its
 * group, waiting up to timeout_ms; buf holds TDB_SUBREQ_MAX_BYTES.
 * Returns 1 (taken: answer it with tdb_subreq_answer), 0 (timed out),
 * TDB_SUBRING_EINTR, TDB_SHM_ESTALE, TDB_SHM_EINVAL (not in a group).
 */
int			tdb_subreq_take(TdbSubConsumer *c, TdbSubReqTaken *taken, void *buf, int timeout_ms);

/* Answer a request taken (len <= TDB_SUBREQ_MAX_BYTES): TDB_SHM_OK, TDB_SUBREQ_EGONE, TDB_SHM_EINVAL. */
int			tdb_subreq_answer(TdbSubConsumer *c, const TdbSubReqTaken *taken, const void *resp, uint32_t len);

/*
 * The producer, for a slot whose owner is gone (under its lock, before the
 * slot is FREE again): its requests are withdrawn, the requests it had
 * taken are posted again and a member of their group woken.  Returns the
 * cells changed.  area: the request area of a mapping of nslots slots.
 */
uint32_t	tdb_subreq_reclaim(void *area, uint32_t nslots, uint32_t slot);

#endif							/* TDB_SUBRING_H */
