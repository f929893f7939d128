/*
 * writer.h
 *	  The publishing side of trafficdb's shared memory: the control block,
 *	  object segments, publication and reclamation.  Only the daemon uses it
 *	  (one writer), but it has no PostgreSQL dependency so that the unit
 *	  tests can run the whole protocol with threads.
 *
 * The writer never waits for readers: reclamation looks at the reader slots
 * and frees only what no live slot pins; a version superseded longer than
 * the pin timeout ago is revoked whoever pins it (shm.h); when every version
 * descriptor is pinned within the timeout, publication is refused
 * (TDB_SHM_ENOSLOT) and the caller reports it.
 */
#ifndef TDB_WRITER_H
#define TDB_WRITER_H

#include "object.h"
#include "shm.h"

typedef struct TdbWriterConfig
{
	uint32_t	nexternal_slots;	/* slots in <prefix>.readers */
	gid_t		gid;			/* (gid_t) -1: owner only */
	int			lock_fd;		/* the prefix lock, held by the caller; -1: take it */
	int32_t		postmaster_pid; /* for display */
	const TdbReaderSlot *backend_pins;	/* pins of the server's own processes */
	uint32_t	nbackend_pins;
	int64_t		pin_timeout_us; /* 0: a pin holds its version for ever */
	bool		huge_pages;		/* objects of 2 MB or more made of huge pages (tdb_shm_make_huge) */
} TdbWriterConfig;

typedef struct TdbWriter
{
	char		prefix[TDB_SHM_NAME_MAX];
	TdbControl *ctl;
	TdbSlotsHeader *slots;
	size_t		slots_size;
	int			slots_fd;		/* open on <prefix>.readers: lock tests */
	uint32_t	nslots;			/* external slots: our own count, never read back */
	gid_t		gid;
	int			lock_fd;
	bool		own_lock;		/* we took lock_fd: close it at the end */
	const TdbReaderSlot *backend_pins;
	uint32_t	nbackend_pins;
	int64_t		pin_timeout_us;
	bool		huge_pages;
	void	   *seg_addr[TDB_MAX_SEGMENTS]; /* read-write mappings */
	uint64_t	seg_huge[TDB_MAX_SEGMENTS]; /* bytes this writer made of huge pages (0: adopted) */
	bool		version_live[TDB_MAX_VERSIONS]; /* from the last scan */

	/* external slots as the last scan saw them (for display) */
	uint64_t   *ext_pin;
	int32_t    *ext_pid;
	bool	   *ext_alive;

	/* what happened, for the caller to report */
	uint64_t	revoked;		/* versions revoked after the pin timeout */
	uint64_t	last_revoked_generation;
	uint64_t	slots_rebuilt;	/* <prefix>.readers found damaged and made anew */
	uint64_t	names_skipped;	/* <prefix>.<seq> names found taken by another user */
	char		skipped_err[TDB_SHM_ERRLEN];	/* the last of them, described */
	uint64_t	slots_repaired; /* <prefix>.readers' header found overwritten and written again */
	char		slots_damage[128];	/* how it was damaged, the last time */
} TdbWriter;

typedef struct TdbWriterOpenInfo
{
	bool		adopted;		/* an existing, valid control block was taken over */
	uint64_t	last_generation;	/* adopted: the generation it had published */
	int			segments_dropped;	/* adopted: segments that failed validation */
} TdbWriterOpenInfo;

/*
 * Attach to the control block under prefix, or create it.  An existing block
 * with the same layout is adopted: its published version stays readable and
 * every live object is validated in full; what fails is dropped.  Otherwise
 * leftovers under the prefix are removed and a new instance is created.
 * The prefix must be ours: cfg->lock_fd holds its lock, or (lock_fd -1) we
 * take it here, and fail with TDB_SHM_EBUSY when another server has it.
 */
int			tdb_writer_open(TdbWriter *w, const char *prefix, const TdbWriterConfig *cfg,
							TdbWriterOpenInfo *info, char *err);

/*
 * Run fn(arg) so that a SIGBUS it takes (memory a group member truncated,
 * such as <prefix>.writers) jumps back here: false if it did.  fn must not
 * hold resources a jump out of it would leak.
 */
bool		tdb_writer_guarded(void (*fn) (void *), void *arg);

/*
 * Refresh the external slots' pins, pids and liveness (w->ext_*).  Safe
 * against a readers segment that a group member truncated: it is then made
 * anew (w->slots_rebuilt counts) and its old pins are ignored.  A header
 * a member overwrote (which refuses every new reader) is written again
 * (w->slots_repaired counts).  w->slots_damage says what was found.
 */
void		tdb_writer_scan_external(TdbWriter *w);

/*
 * Detach.  stopping: an orderly shutdown; mark the instance stopped (readers
 * get TDB_SHM_ESTALE and reopen later) and unlink every name, so memory is
 * freed as soon as the last reader unmaps.
 */
void		tdb_writer_close(TdbWriter *w, bool stopping);

/*
 * The server is shutting down for good (called by the postmaster at exit,
 * only while it holds the prefix lock): mark the instance stopped so
 * readers reopen later, and unlink every name under prefix.  Mapped objects
 * stay readable until their readers unmap.
 */
void		tdb_writer_stop_instance(const char *prefix);

/*
 * Is the control block under prefix the one a daemon of the server whose
 * postmaster is postmaster_pid made or adopted?  (Call with the prefix lock
 * held: then no other server can be using it.)
 */
bool		tdb_writer_instance_of(const char *prefix, int32_t postmaster_pid);

/* A new segment for an object of size bytes; *addr is its read-write mapping. */
int			tdb_writer_new_segment(TdbWriter *w, TdbSegKind kind, size_t size, uint32_t *seg,
								   void **addr, char *err);

/*
 * A traffic segment of exactly size bytes that no live version uses,
 * reused in place when one exists (readers keep their mappings), else new.
 * rank (NULL, or one value per segment slot) picks among several: the
 * highest first (the daemon ranks by how recently it wrote each, so that
 * the fewest entries need copying).
 */
int			tdb_writer_traffic_segment(TdbWriter *w, size_t size, const uint64_t *rank, uint32_t *seg,
									   void **addr, char *err);

/*
 * The size to ask tdb_writer_traffic_segment for, for an object of size
 * bytes: rounded up so that objects whose incidents vary a little fit the
 * same spare buffer (rewritten in place, no new mapping for readers).
 */
size_t		tdb_writer_traffic_capacity(size_t size);

/*
 * Make (generation, map_seg, traffic_seg) the active version: fill a free
 * descriptor, store the active word, wake waiters.  TDB_SHM_ENOSLOT when
 * every descriptor is live (readers pin them all, each within the pin
 * timeout of the version's supersession).
 */
int			tdb_writer_publish(TdbWriter *w, uint64_t generation, uint64_t map_id,
							   uint32_t map_seg, uint32_t traffic_seg, int64_t now_us);

/*
 * Find what readers still pin and free the rest: map segments no live
 * version uses (except keep_map_seg), traffic segments beyond a spare pool.
 * Returns the number of segments freed.
 */
int			tdb_writer_reclaim(TdbWriter *w, uint32_t keep_map_seg);

/* Bytes of shared memory held by live segments. */
uint64_t	tdb_writer_bytes(const TdbWriter *w);

/*
 * Of them, the bytes this writer made of huge pages when it created them
 * (huge_pages): objects adopted from a previous instance count 0.
 */
uint64_t	tdb_writer_huge_bytes(const TdbWriter *w);

#endif							/* TDB_WRITER_H */
