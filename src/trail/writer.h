/*
 * writer.h
 *	  The trail writer's state, private to its two files: writer.c (taking
 *	  events, sorting them, version-1 files) and writer2.c (version-2
 *	  files: pages by trail or by space and time, chunks, summaries).
 */
#ifndef TDB_TRAIL_WRITER_H
#define TDB_TRAIL_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "trail.h"

/* String interner: a string's id is its order of first appearance. */
typedef struct Interner
{
	char	  **strs;
	uint32_t	n,
				cap;
	uint32_t   *slots;			/* id + 1; 0 = empty */
	uint32_t	nslots;
} Interner;

typedef struct WVal
{
	int64_t		bits;
	bool		isnull;
} WVal;

typedef struct WEvent
{
	int64_t		key;			/* id, or interned key string id */
	int64_t		time;
	int32_t		lon,
				lat;
} WEvent;

struct TdbTrailWriter
{
	TdbTrailSchema schema;
	TdbTrailWriterOptions opts;
	TdbTrailType types[TDB_TRAIL_MAX_COLUMNS];
	WEvent	   *ev;
	WVal	   *vals;
	uint64_t	n,
				cap;
	Interner	keys;
	Interner	lexicon;
};

/* Append *pi to a growing page list; false when out of memory. */
static inline bool
trail_push_page(TdbTrailPageInfo **pages, uint32_t *npages, uint32_t *cap, const TdbTrailPageInfo *pi)
{
	if (*npages == *cap)
	{
		uint32_t	nc = *cap ? *cap * 2 : 256;
		TdbTrailPageInfo *np = realloc(*pages, nc * sizeof(TdbTrailPageInfo));

		if (np == NULL)
			return false;
		*pages = np;
		*cap = nc;
	}
	(*pages)[(*npages)++] = *pi;
	return true;
}

/*
 * Write a version-2 file from the events sorted by (trail, time, arrival)
 * in idx (writer2.c); tdb_trail_writer_finish's second half.
 */
int			trail_writer_finish2(TdbTrailWriter *w, uint32_t *idx, uint8_t **bufp, size_t *lenp,
								 TdbTrailError *err);

#endif							/* TDB_TRAIL_WRITER_H */
