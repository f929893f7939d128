/*
 * busguard.h
 *	  Surviving a shared memory object that shrinks under us.
 *
 * A member of a segment's group (trafficdb.shm_group, writer_group) can
 * ftruncate it: the next access of every process mapping it is a SIGBUS,
 * which kills an external process and, in a backend, restarts the whole
 * cluster.  A mapping registered here is SIGBUS-safe at no cost to the code
 * that reads it: a process-wide SIGBUS handler (installed at the first
 * registration, chained to the previous one) replaces the pages of a
 * registered mapping that faults with anonymous zero pages (mmap MAP_FIXED,
 * async-signal-safe) and marks the mapping broken; the faulting instruction
 * runs again and reads zeros.  The code that uses the mapping checks
 * tdb_bus_broken (one load) where it decides what to return, and fails with
 * a clear error; it must also treat whatever it read since the last check
 * as garbage (it already validates what it reads from shared memory).
 * A fault outside every registered range goes to the previous handler, or
 * kills the process as SIGBUS always did.
 *
 * No PostgreSQL headers: linked into the module and into libtrafficdb.
 */
#ifndef TDB_BUSGUARD_H
#define TDB_BUSGUARD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#define TDB_BUS_MAX_RANGES 1024

/* TdbBusRange.state */
#define TDB_BUS_FREE	0
#define TDB_BUS_ACTIVE	1
#define TDB_BUS_BUSY	2			/* being registered, or its pages being replaced */
#define TDB_BUS_BROKEN	3			/* its pages were replaced with zeros */

typedef struct TdbBusRange
{
	_Atomic int state;
	_Atomic int prot;
	_Atomic(char *) start;
	_Atomic size_t len;
} TdbBusRange;

extern TdbBusRange tdb_bus_ranges[TDB_BUS_MAX_RANGES];

/*
 * Register the mapping [addr, addr + len) (as mmap returned it, prot as
 * mapped).  Returns a handle > 0, or 0 (errno: ENOSPC, the table is full;
 * or the handler could not be installed): the caller should refuse to use
 * the mapping.  0 is "no handle" everywhere, so zeroed structs are safe.
 */
int			tdb_bus_guard(void *addr, size_t len, int prot);

/* Forget a handle (0: nothing) before its mapping is unmapped. */
void		tdb_bus_unguard(int handle);

/* Did the mapping fault (its pages are now zeros)?  One load; 0 is never broken. */
static inline bool
tdb_bus_broken(int handle)
{
	return handle > 0 &&
		atomic_load_explicit(&tdb_bus_ranges[handle - 1].state, memory_order_acquire) == TDB_BUS_BROKEN;
}

/* Faults repaired in this process since it started (display, tests). */
unsigned long tdb_bus_repairs(void);

#endif							/* TDB_BUSGUARD_H */
