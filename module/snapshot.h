/*-------------------------------------------------------------------------
 *
 * snapshot.h
 *	  A backend's view of the published objects: one pinned version per
 *	  statement (READ COMMITTED) or per transaction (REPEATABLE READ and
 *	  SERIALIZABLE), through the reader protocol of src/reader.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TDB_MODULE_SNAPSHOT_H
#define TDB_MODULE_SNAPSHOT_H

#include "reader.h"

/*
 * The snapshot for the current statement or transaction, pinning a version
 * if none is pinned yet.  Raises a clear ERROR when nothing can be read.
 * The result stays valid until the end of the statement (READ COMMITTED) or
 * of the transaction.
 */
extern const TdbSnapshot *tdb_backend_snapshot(void);

/*
 * For a scan that may outlive its statement (a cursor fetched by later
 * statements): the snapshot is kept, for every statement of this backend,
 * until scan_cxt (the scan's executor memory) is reset or deleted, or the
 * transaction ends.
 */
extern const TdbSnapshot *tdb_backend_snapshot_for_scan(MemoryContext scan_cxt);

/*
 * The map record index of location id in the active version, or -1.  Pins
 * a version only for the lookup unless the statement already holds one, so
 * that a long COPY calling it per row pins nothing between rows.
 */
extern int64 tdb_backend_find_location(uint64 id);

/* Executor hooks that end READ COMMITTED pins with the statement (_PG_init). */
extern void tdb_snapshot_hooks(void);

/*
 * The generation readers are served now (0: none), without pinning it and
 * without an error: what trafficdb.status reports while the daemon has not
 * published since a restart.
 */
extern uint64 tdb_backend_served_generation(void);

/* The backend's reader, for callers that need the raw control block. */
extern TdbReader *tdb_backend_reader(void);

#endif							/* TDB_MODULE_SNAPSHOT_H */
