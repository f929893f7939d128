/*
 * reader_stage.c
 *	  A scan's own copy of its next pages' chunks (reader_stage.h).
 */
#include <stdlib.h>
#include <string.h>

#include "reader_stage.h"

void
trail_range_add(TdbByteRange *ranges, int *n, TdbByteRange x, int back)
{
	for (int j = *n - 1; j >= 0 && j >= *n - back; j--)
		if (ranges[j].off + ranges[j].len == x.off)
		{
			ranges[j].len += x.len;
			return;
		}
	ranges[(*n)++] = x;
}

static int
range_cmp(const void *a, const void *b)
{
	uint64_t	x = ((const TdbByteRange *) a)->off,
				y = ((const TdbByteRange *) b)->off;

	return (x > y) - (x < y);
}

int
trail_stage_read(TrailStage *st, TdbPager *p, const TdbByteRange *ranges, int n, TdbTrailError *err)
{
	uint64_t	bytes = 0;

	st->n = 0;
	if (n > st->rcap)
	{
		TdbByteRange *nr = realloc(st->r, (size_t) n * sizeof(TdbByteRange));
		uint64_t   *na = nr ? realloc(st->at, (size_t) n * sizeof(uint64_t)) : NULL;

		if (nr != NULL)
			st->r = nr;
		if (na == NULL)
			return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
		st->at = na;
		st->rcap = n;
	}
	memcpy(st->r, ranges, (size_t) n * sizeof(TdbByteRange));
	/* in file order: a block a range ends in is the one the next starts in (the pager keeps it) */
	qsort(st->r, (size_t) n, sizeof(TdbByteRange), range_cmp);
	for (int i = 0; i < n; i++)
	{
		st->at[i] = bytes;
		bytes += st->r[i].len;
	}
	if (bytes > st->cap)
	{
		uint8_t    *nb = realloc(st->buf, bytes);

		if (nb == NULL)
			return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory for %llu bytes of pages",
								  (unsigned long long) bytes);
		st->buf = nb;
		st->cap = bytes;
	}
	for (int i = 0; i < n; i++)
	{
		int			rc = tdb_pager_read(p, st->r[i].off, st->r[i].len, st->buf + st->at[i], err);

		if (rc < 0)
			return rc;
	}
	st->n = n;
	return 0;
}

bool
trail_stage_copy(const TrailStage *st, uint64_t off, uint32_t len, uint8_t *dst)
{
	int			lo = 0,
				hi = st->n;

	/* the last range starting at or before off */
	while (hi - lo > 1)
	{
		int			mid = (lo + hi) / 2;

		if (st->r[mid].off <= off)
			lo = mid;
		else
			hi = mid;
	}
	if (st->n == 0 || st->r[lo].off > off || off - st->r[lo].off > st->r[lo].len ||
		len > st->r[lo].len - (off - st->r[lo].off))
		return false;
	memcpy(dst, st->buf + st->at[lo] + (off - st->r[lo].off), len);
	return true;
}

void
trail_stage_free(TrailStage *st)
{
	free(st->buf);
	free(st->r);
	free(st->at);
	memset(st, 0, sizeof(*st));
}
