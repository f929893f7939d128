/*
 * format.h
 *	  Internal constants and encoders of the trail file format, shared by
 *	  the writer, the reader and the tests (docs/trail-format.md).
 */
#ifndef TDB_TRAIL_FORMAT_H
#define TDB_TRAIL_FORMAT_H

#include "codec.h"
#include "trail.h"

#define TRAIL_HEADER_MAGIC		"TDBTRAIL"	/* first 8 bytes of the file */
#define TRAIL_TRAILER_MAGIC		0x4C544454u /* "TDTL" in file order */
#define TRAIL_FOOTER_MAGIC		0x46544454u /* "TDTF" */
#define TRAIL_PAGE_MAGIC		0x50544454u /* "TDTP" */
#define TRAIL_PAGE_HEADER_SIZE	16
#define TRAIL_PAGE_MAX_BYTES	(64u << 20)
#define TRAIL_LON_MAX			1800000000	/* 180 degrees, fixed */
#define TRAIL_LAT_MAX			900000000

/*
 * The writer hands column values to the page encoder through this: returns
 * true for NULL, else stores the value's bits (int64, double bits or
 * lexicon id) in *bits when bits is not NULL.
 */
typedef bool (*TrailColumnGetter) (void *arg, uint32_t i, int col, int64_t *bits);

void		trail_trailer_encode(uint8_t *out, const TdbTrailTrailer *t);
void		trail_footer_encode(CodecBuf *b, const TdbTrailFooter *f);
void		trail_page_encode(CodecBuf *b, uint32_t trail, uint32_t n,
							  const int64_t *time, const int32_t *lon,
							  const int32_t *lat, int ncols,
							  const TdbTrailType *types, TrailColumnGetter get,
							  void *arg);

#endif							/* TDB_TRAIL_FORMAT_H */
