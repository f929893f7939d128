/*
 * pagecache.h
 *	  The reader's side of a decoded-page cache (trail.h has the caller's):
 *	  look a page up, hand a freshly decoded page over.
 *	  Not for use outside src/trail.
 */
#ifndef TDB_TRAIL_PAGECACHE_H
#define TDB_TRAIL_PAGECACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "trail.h"

/*
 * Page pageno of footer f decoded with at least these chunks (lon and lat
 * when position; every extra column whose bit is clear in skip_columns),
 * or NULL.  The page stays valid until the next lookup or put (one scan
 * at a time uses a cache, one page at a time).
 */
const TdbTrailPage *trail_page_cache_get(TdbTrailPageCache *c, const TdbTrailFooter *f, uint32_t pageno,
										 bool position, uint64_t skip_columns);

/*
 * Keep *page (page pageno, decoded with those chunks), valid as a hit
 * is: the cache owns its arrays from now on and *page is zeroed.  NULL when it does
 * not fit the bound even with every other page evicted: *page is the
 * caller's still.
 */
const TdbTrailPage *trail_page_cache_put(TdbTrailPageCache *c, const TdbTrailFooter *f, uint32_t pageno,
										 bool position, uint64_t skip_columns, TdbTrailPage *page);

/*
 * true the first time it is asked for the file version of f (the caller
 * then fetches what all the lookups will need), false after.
 */
bool		trail_page_cache_first_scan(TdbTrailPageCache *c, const TdbTrailFooter *f);
/* Whether trail_page_cache_first_scan said true for f already (asks nothing). */
bool		trail_page_cache_seen(const TdbTrailPageCache *c, const TdbTrailFooter *f);

/* Would a lookup of this page hit?  (Not counted: for read-ahead.) */
bool		trail_page_cache_has(const TdbTrailPageCache *c, const TdbTrailFooter *f, uint32_t pageno,
								 bool position, uint64_t skip_columns);

#endif							/* TDB_TRAIL_PAGECACHE_H */
