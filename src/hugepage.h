/*
 * hugepage.h
 *	  Asking for transparent huge pages on large private arrays that are
 *	  read and written at random (the daemon's working traffic, the
 *	  benchmarks' copies): with 4 kB pages every random access to a
 *	  gigabyte-sized array also misses the TLB, and the page walk misses
 *	  the cache in turn.  The kernel grants them when
 *	  /sys/kernel/mm/transparent_hugepage/enabled is "always" or "madvise"
 *	  (Debian's default); otherwise this does nothing.  Shared memory in
 *	  /dev/shm (tmpfs) follows shmem_enabled instead, "never" by default.
 */
#ifndef TDB_HUGEPAGE_H
#define TDB_HUGEPAGE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define TDB_HUGE_PAGE ((uintptr_t) 2 * 1024 * 1024)

/* Advise the whole 2 MB pages inside [p, p + len); a no-op for smaller arrays. */
static inline void
tdb_advise_huge(void *p, size_t len)
{
#ifdef MADV_HUGEPAGE
	uintptr_t	from = ((uintptr_t) p + TDB_HUGE_PAGE - 1) & ~(TDB_HUGE_PAGE - 1);
	uintptr_t	to = ((uintptr_t) p + len) & ~(TDB_HUGE_PAGE - 1);

	if (p != NULL && to > from)
		(void) madvise((void *) from, to - from, MADV_HUGEPAGE);
#else
	(void) p;
	(void) len;
#endif
}

/*
 * A freshly allocated array p of len bytes, not touched yet, advised and
 * then zeroed if zero: the advice counts only for pages not yet touched,
 * so a zeroing (or a zeroing allocator) before it gets 4 kB pages.
 * Returns p.
 */
static inline void *
tdb_huge_fresh(void *p, size_t len, int zero)
{
	tdb_advise_huge(p, len);
	if (zero && p != NULL)
		memset(p, 0, len);
	return p;
}

#endif							/* TDB_HUGEPAGE_H */
