/*
 * spill.h
 *	  An external sort of fixed-size records within a memory budget, for
 *	  the trail writer (spill.c): records are buffered up to the budget;
 *	  each full buffer is sorted and written as a run to an unnamed
 *	  temporary file (O_TMPFILE, or a name unlinked at once: nothing is
 *	  left behind by a crash), and the runs are merged k ways (in several
 *	  passes when there are more runs than the budget has read buffers for).
 *	  The comparison must be a total order (ties broken by a unique field),
 *	  so the output does not depend on how the records were cut into runs.
 */
#ifndef TDB_TRAIL_SPILL_H
#define TDB_TRAIL_SPILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trail.h"

typedef int (*TrailRecCmp) (const void *a, const void *b, void *arg);

typedef struct TrailRun
{
	uint64_t	off;			/* byte offset in the temporary file */
	uint64_t	n;				/* records */
} TrailRun;

typedef struct TrailMergeIn TrailMergeIn;

typedef struct TrailSorter
{
	size_t		recsize;		/* a multiple of 8 */
	TrailRecCmp cmp;
	void	   *arg;
	const char *tmpdir;			/* NULL: $TMPDIR, else /tmp */
	size_t		limit;			/* bytes the buffer may take; the caller may change it */
	int			(*cancel) (void *arg);	/* nonzero: stop (TDB_TRAIL_ECANCELED); may be NULL */
	void	   *cancel_arg;
	/* bytes of temporary files written, shared with others (NULL: not counted), and their limit (0: none) */
	uint64_t   *temp_used;
	uint64_t	temp_limit;
	/* buffered records */
	uint8_t    *buf;
	uint32_t   *ix;
	size_t		n,
				cap;
	/* runs in the temporary file */
	int			fd;				/* -1: none yet */
	uint64_t	fend;
	TrailRun   *runs;
	uint32_t	nruns,
				runcap;
	uint32_t	spilled;		/* runs written, merge passes' runs included */
	uint64_t	total;			/* records put */
	/* reading: 0 putting, 1 from memory, 2 merging runs, 3 done */
	int			mode;
	size_t		pos;
	TrailMergeIn *in;
	uint32_t   *heap;
	uint32_t	nheap;
	/* the first error: rc < 0, message in err */
	int			rc;
	TdbTrailError err;
} TrailSorter;

void		trail_sorter_init(TrailSorter *s, size_t recsize, TrailRecCmp cmp, void *arg,
							  const char *tmpdir, size_t limit);
/* Copy one record in; spills a run when the buffer reached the limit. */
int			trail_sorter_put(TrailSorter *s, const void *rec, TdbTrailError *err);
/*
 * No more records: sort what is buffered, or spill it and prepare the
 * merge (merge_bytes: the read buffers' budget).
 */
int			trail_sorter_finish(TrailSorter *s, size_t merge_bytes, TdbTrailError *err);
/* The next record in order (valid until trail_sorter_skip), NULL at the end or on error (s->rc). */
const void *trail_sorter_peek(TrailSorter *s);
void		trail_sorter_skip(TrailSorter *s);
/* The buffer's bytes now (for the caller's accounting). */
size_t		trail_sorter_bytes(const TrailSorter *s);
void		trail_sorter_free(TrailSorter *s);

#endif							/* TDB_TRAIL_SPILL_H */
