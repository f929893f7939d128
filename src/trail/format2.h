/*
 * format2.h
 *	  Constants of trail format version 2 that its page codec (page2.c)
 *	  and its footer codec (format2.c) share.  Private to those two files.
 */
#ifndef TDB_TRAIL_FORMAT2_H
#define TDB_TRAIL_FORMAT2_H

#include <stdbool.h>
#include <stdint.h>

#include "format.h"

#define CHUNK_CRC_SIZE		4
#define CORE_MIN_SIZE		(CHUNK_CRC_SIZE + 4 + 1 + 1 + 1 + 1)
#define MAX_SCALE			15	/* decimal exponents of scaled values */

static const int64_t ipow10_tab[MAX_SCALE + 1] = {
	1LL, 10LL, 100LL, 1000LL, 10000LL, 100000LL, 1000000LL, 10000000LL, 100000000LL,
	1000000000LL, 10000000000LL, 100000000000LL, 1000000000000LL, 10000000000000LL,
	100000000000000LL, 1000000000000000LL
};

/*
 * The footers' time exponent E (versions 2 and 3): the largest that divides
 * every zone time of trails and pages (6 for whole seconds).
 */
static inline int
trail_zone_exponent(const TdbTrailFooter *f)
{
	int			e = MAX_SCALE;

	for (uint32_t i = 0; i < f->ntrails && e > 0; i++)
		while (e > 0 && (f->trails[i].tmin % ipow10_tab[e] != 0 || f->trails[i].tmax % ipow10_tab[e] != 0))
			e--;
	for (uint32_t i = 0; i < f->npages && e > 0; i++)
		while (e > 0 && (f->pages[i].tmin % ipow10_tab[e] != 0 || f->pages[i].tmax % ipow10_tab[e] != 0))
			e--;
	return e;
}

/* tmin = a x q and tmax = (a + d) x q, both in int64; false if either overflows */
static inline bool
trail_scaled_times(int64_t a, uint64_t d, int64_t q, int64_t *tmin, int64_t *tmax)
{
	__int128	lo = (__int128) a * q,
				hi = ((__int128) a + (__int128) d) * q;

	if (lo < INT64_MIN || hi > INT64_MAX)
		return false;
	*tmin = (int64_t) lo;
	*tmax = (int64_t) hi;
	return true;
}

#endif							/* TDB_TRAIL_FORMAT2_H */
