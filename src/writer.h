/*
 * writer.h
 *	  The publishing side of trafficdb's shared memory: the control block,
 *	  object segments, publication and reclamation.  Only the daemon uses it
 *	  (one writer), but it has no PostgreSQL dependency so that the unit
 *	  tests can run the whole protocol with threads.
 *
 * The writer never waits for readers: reclamation looks at the reader slots
 * and frees only what no slot pins; when every version descriptor is pinned
 * publication is refused (TDB_SHM_ENOSLOT) and retried later, and the
 * caller reports the readers responsible.
 */
#ifndef TDB_WRITER_H
#define TDB_WRITER_H

#include "object.h"
#include "shm.h"

typedef struct TdbWriter
{
	char		prefix[TDB_SHM_NAME_MAX];
	TdbControl *ctl;
	TdbSlotsHeader *slots;
	size_t		slots_size;
	gid_t		gid;			/* (gid_t) -1: owner only */
	void	   *seg_addr[TDB_MAX_SEGMENTS]; /* read-write mappings */
	bool		version_live[TDB_MAX_VERSIONS]; /* from the last reclaim */
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
 * postmaster_pid identifies the server: a control block that another live
 * server owns is refused (TDB_SHM_EACCES), never shared.
 */
int			tdb_writer_open(TdbWriter *w, const char *prefix, uint32_t nbackend_slots,
							uint32_t nexternal_slots, gid_t gid, int32_t postmaster_pid,
							TdbWriterOpenInfo *info, char *err);

/*
 * Clear the pins of backend slots [0, nbackend_slots): the postmaster calls
 * this whenever it (re)creates its shared memory, before any backend
 * starts, because pins of backends that died in a crash are stale.
 */
void		tdb_writer_clear_backend_pins(const char *prefix, uint32_t nbackend_slots);

/*
 * Detach.  stopping: an orderly shutdown; mark the instance stopped (readers
 * get TDB_SHM_ESTALE and reopen later) and unlink every name, so memory is
 * freed as soon as the last reader unmaps.
 */
void		tdb_writer_close(TdbWriter *w, bool stopping);

/*
 * The server is shutting down for good (called by the postmaster at exit):
 * if the instance under prefix belongs to postmaster_pid, mark it stopped so
 * readers reopen later, and unlink every name under prefix.  Mapped objects
 * stay readable until their readers unmap.
 */
void		tdb_writer_stop_instance(const char *prefix, int32_t postmaster_pid);

/* A new segment for an object of size bytes; *addr is its read-write mapping. */
int			tdb_writer_new_segment(TdbWriter *w, TdbSegKind kind, size_t size, uint32_t *seg,
								   void **addr, char *err);

/*
 * A traffic segment of exactly size bytes that no live version uses,
 * reused in place when one exists (readers keep their mappings), else new.
 */
int			tdb_writer_traffic_segment(TdbWriter *w, size_t size, uint32_t *seg, void **addr,
									   char *err);

/*
 * Make (generation, map_seg, traffic_seg) the active version: fill a free
 * descriptor, store the active word, wake waiters.  TDB_SHM_ENOSLOT when
 * every descriptor is live (readers pin them all).
 */
int			tdb_writer_publish(TdbWriter *w, uint64_t generation, uint64_t map_id,
							   uint32_t map_seg, uint32_t traffic_seg, int64_t now_us);

/*
 * Find what readers still pin and free the rest: map segments no live
 * version uses (except keep_map_seg), traffic segments beyond a spare pool.
 * Returns the number of segments freed.
 */
int			tdb_writer_reclaim(TdbWriter *w, uint32_t keep_map_seg);

/* Free an external slot if it still belongs to dead_pid (see tdb_slot_reap). */
bool		tdb_writer_reap_slot(TdbWriter *w, uint32_t idx, int32_t dead_pid);

/* Bytes of shared memory held by live segments. */
uint64_t	tdb_writer_bytes(const TdbWriter *w);

#endif							/* TDB_WRITER_H */
