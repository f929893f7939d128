/*
 * subfilter.h
 *	  A subscription filter as bytes (issue 18): what an external subscriber
 *	  writes into its slot of the subscriber rings and the daemon reads
 *	  back.  The bytes are another process's: decoding validates every field
 *	  and copies what it keeps, so a subscriber changing them meanwhile
 *	  cannot change what was checked.
 *
 * Layout (little-endian host order; both sides run on one machine):
 *   TdbSubFilterWire header (64 bytes), then
 *   - TDB_SUB_IDS:     count uint64 location ids
 *   - TDB_SUB_POLYGON: count (x, y) doubles, one ring, implicitly closed
 *   - TDB_SUB_BOX:     nothing more (box in header.geo: xmin ymin xmax ymax)
 *   - TDB_SUB_RADIUS:  nothing more (header.geo: lon lat radius_m 0)
 */
#ifndef TDB_SUBFILTER_H
#define TDB_SUBFILTER_H

#include <stddef.h>
#include <stdint.h>

#include "submatch.h"

#define TDB_SUBFILTER_BYTES 4096
#define TDB_SUBFILTER_MAGIC 0x54424653u	/* "SFBT" */
#define TDB_SUBFILTER_VERSION 1

typedef struct TdbSubFilterWire
{
	uint32_t	magic;
	uint16_t	version;
	uint8_t		area;			/* TdbSubArea */
	uint8_t		cond;			/* TdbSubCond */
	uint8_t		on;				/* TdbSubOn */
	uint8_t		pad[3];
	uint32_t	count;			/* ids or polygon points after the header */
	double		value;			/* of cond */
	double		geo[4];			/* box, or lon lat radius_m */
	uint32_t	id;				/* subscription id (the daemon assigns it) */
	uint32_t	pad2;
} TdbSubFilterWire;

/* the most ids or polygon points that fit */
#define TDB_SUBFILTER_MAX_IDS ((TDB_SUBFILTER_BYTES - sizeof(TdbSubFilterWire)) / sizeof(uint64_t))
#define TDB_SUBFILTER_MAX_POINTS ((TDB_SUBFILTER_BYTES - sizeof(TdbSubFilterWire)) / (2 * sizeof(double)))

/*
 * Write f into buf (size bytes, at least TDB_SUBFILTER_BYTES).  A polygon
 * must have one ring.  Returns the bytes used, or 0 with err set (a filter
 * tdb_sub_filter_check refuses, or too many ids or points).
 */
size_t		tdb_subfilter_encode(const TdbSubFilter *f, void *buf, size_t size, char *err);

/*
 * Storage a decoded filter points into (ids or points), the caller's:
 * TDB_SUBFILTER_MAX_IDS ids, 2 * TDB_SUBFILTER_MAX_POINTS doubles, one ring end.
 */
typedef struct TdbSubFilterStore
{
	uint64_t	ids[TDB_SUBFILTER_MAX_IDS];
	double		xy[2 * TDB_SUBFILTER_MAX_POINTS];
	uint32_t	ring_end[1];
} TdbSubFilterStore;

/*
 * Read a filter from size bytes at buf (another process's), copying what it
 * keeps into store.  Returns false with err naming what is wrong: a bad
 * magic or version, a count beyond the bytes, an unknown kind, or anything
 * tdb_sub_filter_check refuses.
 */
bool		tdb_subfilter_decode(const void *buf, size_t size, TdbSubFilter *f, TdbSubFilterStore *store, char *err);

#endif							/* TDB_SUBFILTER_H */
