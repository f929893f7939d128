/*
 * format2.h
 *	  Constants of trail format version 2 that its page codec (page2.c)
 *	  and its footer codec (format2.c) share.  Private to those two files.
 */
#ifndef TDB_TRAIL_FORMAT2_H
#define TDB_TRAIL_FORMAT2_H

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

#endif							/* TDB_TRAIL_FORMAT2_H */
