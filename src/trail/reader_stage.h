/*
 * reader_stage.h
 *	  A scan's own copy of the chunks of its next pages (reader_stage.c),
 *	  for version 6's column-major files when the pager's memory cache
 *	  cannot hold what the scan announces: read through the pager one run
 *	  of a column's chunks at a time, in file order, each block once,
 *	  where reading page by page jumps from column to column and, with no
 *	  cache to keep the blocks, fetches a block for every chunk.
 */
#ifndef TDB_TRAIL_READER_STAGE_H
#define TDB_TRAIL_READER_STAGE_H

#include "pager.h"
#include "types.h"

typedef struct TrailStage
{
	uint8_t    *buf;
	size_t		cap;
	TdbByteRange *r;			/* the ranges held, sorted by offset, disjoint */
	uint64_t   *at;				/* where each lies in buf */
	int			n,
				rcap;
} TrailStage;

/*
 * Add range x to ranges[0, *n): joined to one of the last back ranges that
 * ends where it starts (a column's chunks of consecutive pages lie end to
 * end in version 6; in other versions only the last range can), else
 * appended (the caller leaves room for it).
 */
void		trail_range_add(TdbByteRange *ranges, int *n, TdbByteRange x, int back);

/* Read ranges[0, n) into st (what it held is dropped). */
int			trail_stage_read(TrailStage *st, TdbPager *p, const TdbByteRange *ranges, int n,
							 TdbTrailError *err);

/* Copy [off, off + len) into dst if st holds it whole; false if not. */
bool		trail_stage_copy(const TrailStage *st, uint64_t off, uint32_t len, uint8_t *dst);

void		trail_stage_free(TrailStage *st);

#endif							/* TDB_TRAIL_READER_STAGE_H */
