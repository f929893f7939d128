/*
 * reader.h
 *	  The reading side of trafficdb's shared memory, for any process: map the
 *	  control block, pin a version, reach its validated objects.  SQL backends
 *	  and libtrafficdb both read through this, so there is one
 *	  implementation of the reader protocol (shm.h).
 *
 * A TdbReader belongs to one thread at a time.  Acquire pins the active
 * version; the snapshot's pointers stay valid until release.  Acquire makes
 * system calls only when the version names a segment this process has not
 * mapped yet (a new map, a new traffic buffer); otherwise it is a few loads
 * and stores.
 */
#ifndef TDB_READER_H
#define TDB_READER_H

#include "object.h"
#include "shm.h"

typedef struct TdbReaderSeg
{
	uint64_t	seq;			/* 0 = nothing mapped */
	void	   *addr;
	size_t		size;
	bool		validated;		/* map objects: checked at map_check level */
	TdbMapView	view;			/* map objects */
} TdbReaderSeg;

typedef struct TdbReader
{
	char		prefix[TDB_SHM_NAME_MAX];
	const TdbControl *ctl;
	size_t		ctl_size;
	TdbSlotsHeader *slots;		/* external readers only */
	size_t		slots_size;
	int			slots_fd;		/* holds the OFD lock of our external slot */
	TdbReaderSlot *slot;
	int			slot_idx;		/* external slot index, -1 for a backend */
	bool		owns_slot;		/* claimed an external slot */
	int			bus_slots;		/* busguard handle of the slots' mapping (0: none) */
	uint64_t	instance_id;
	uint64_t	pinned;			/* active word, 0 = not pinned */
	TdbValidateLevel map_check; /* how much to check a map before first use */
	TdbReaderSeg segs[TDB_MAX_SEGMENTS];
} TdbReader;

typedef struct TdbSnapshot
{
	uint64_t	generation;
	int64_t		published_at_us;
	const TdbMapView *map;
	const void *traffic;		/* the traffic object */
	const TdbTraffic *entries;	/* entries[i] is the traffic of map record i */
} TdbSnapshot;

/*
 * Open the shared memory under prefix.  backend_slot != NULL pins through
 * that slot (SQL backends: theirs in PostgreSQL's shared memory); NULL
 * claims a free external slot of <prefix>.readers (and its lock).
 * map_check says how a map object is checked the first time this process
 * maps it: TDB_VALIDATE_FULL (checksum and every invariant, O(n) once per
 * map) for processes outside the server; SQL backends share the daemon's
 * trust domain and use TDB_VALIDATE_HEADER so a new connection does not pay
 * O(n).  Returns TDB_SHM_OK or a TdbShmResult with a message in err.
 */
int			tdb_reader_open(TdbReader *r, const char *prefix, TdbReaderSlot *backend_slot,
							TdbValidateLevel map_check, char *err);
void		tdb_reader_close(TdbReader *r);

/* Pin the active version and fill snap.  Release before the next acquire. */
int			tdb_reader_acquire(TdbReader *r, TdbSnapshot *snap, char *err);
void		tdb_reader_release(TdbReader *r);

/*
 * True if the daemon this reader is attached to has stopped (reopen), or
 * if <prefix>.readers, which every member of shm_group can write, shrank
 * under us: its mapping is SIGBUS-safe (busguard.h) and reads zeros, our
 * pin no longer counts, and acquire says so (TDB_SHM_ESTALE).  One load.
 */
bool		tdb_reader_stale(const TdbReader *r);

/*
 * True if the version this reader pins is no longer what it pinned: the
 * daemon revoked it (held longer than the pin timeout after it was
 * superseded) or rewrote its traffic object (the pin was taken away).  Two
 * loads, no system call: check it after reading to know that what was read
 * belongs to one version.  Revoked memory is never rewritten, so what a
 * revoked reader read is old, not torn, unless the pin was taken away.
 */
static inline bool
tdb_reader_revoked(const TdbReader *r, const TdbSnapshot *snap)
{
	uint64_t	gen = TDB_ACTIVE_GEN(r->pinned);

	/* the reads before must not move after the checks (ThreadSanitizer knows no fences) */
#ifdef __SANITIZE_THREAD__
	__asm__ volatile("":::"memory");
#else
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
#endif
	return r->pinned == 0 ||
		tdb_version_generation(&r->ctl->versions[TDB_ACTIVE_IDX(r->pinned)]) != gen ||
		__atomic_load_n(&((const TdbObjectHeader *) snap->traffic)->generation, __ATOMIC_ACQUIRE) != gen;
}

#endif							/* TDB_READER_H */
