/*
 * halves.h
 *	  Work split in two halves, the second in a thread of its own: the map
 *	  builder's passes over 100 M entries are bound by memory (random
 *	  gathers, first touches of fresh pages), and a second core halves
 *	  them.  The result never depends on whether the thread ran: each half
 *	  writes only its own part.
 */
#ifndef TDB_HALVES_H
#define TDB_HALVES_H

#include <stddef.h>
#include <stdint.h>

/*
 * Run fn(arg, 0) in the caller and fn(arg, 1) in a second thread (every
 * signal blocked, so a PostgreSQL process's handlers stay with its own
 * thread), then wait for both.  When n is below tdb_halves_min, or no
 * thread can start, both halves run here, one after the other.  The
 * second half has 1 MiB of stack, and should not allocate: glibc gives the
 * first thread that calls malloc an arena of its own, 64 MB of address
 * space kept for the life of the process (a concern only under a tight
 * ulimit -v; the map builder's halves allocate nothing unless a run of more
 * than 64 equal keys sends qsort to malloc).
 */
void		tdb_halves(void (*fn) (void *arg, int half), void *arg, uint64_t n);

/* [*lo, *hi) of half h of [0, n) */
static inline void
tdb_half_range(uint64_t n, int half, uint64_t *lo, uint64_t *hi)
{
	*lo = half == 0 ? 0 : n / 2;
	*hi = half == 0 ? n / 2 : n;
}

/*
 * Inputs below this size run in one thread (default 1 M); tests set it to 0
 * to run the threaded paths on small inputs, or to UINT64_MAX for none.
 */
extern uint64_t tdb_halves_min;

#endif							/* TDB_HALVES_H */
