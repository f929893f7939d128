/*
 * footer_cache.h
 *	  Decoded footers, shared by the readers of one process (footer_cache.c;
 *	  reader.c is its one user).
 *
 * A footer is decoded at the first open of a file version and reused by
 * later opens (a query opens its file each time; a footer of a large file
 * takes milliseconds to decode).  The key is the trailer's description of
 * the footer (its offset, length and CRC) with the object's size and ETag:
 * equal keys mean equal footer bytes, so a cached footer is never another
 * version's.  Entries are refcounted; an entry evicted while a reader holds
 * it is freed by its last reader.  The bound is on decoded memory (for a
 * version-3 footer: its head and arrays when opened, and the chunks its
 * readers loaded since, counted as each reader closes: a footer grown past
 * half the bound then leaves the table, others are evicted to make room).
 */
#ifndef TDB_TRAIL_FOOTER_CACHE_H
#define TDB_TRAIL_FOOTER_CACHE_H

#include "trail.h"

typedef struct SharedFooter
{
	char	   *key;
	TdbTrailFooter f;
	size_t		cost;			/* about the decoded size */
	size_t		base_cost;		/* ... when opened (version 3: the head) */
	int			refs;
	bool		cached;			/* still in the table */
	uint64_t	used;			/* last use, for eviction */
} SharedFooter;

/* The entry of key with a reference taken, or NULL. */
SharedFooter *footer_cache_get(const char *key);

/* Keep sf (refs 1, its opener's) in the table if it fits the bound. */
void		footer_cache_put(SharedFooter *sf);

/* Drop a reference; the last one of an entry no longer cached frees it. */
void		footer_cache_release(SharedFooter *sf);

/* One more footer decoded (tdb_trail_footer_decodes). */
void		footer_cache_count_decode(void);

#endif							/* TDB_TRAIL_FOOTER_CACHE_H */
