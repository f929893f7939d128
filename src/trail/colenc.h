/*
 * colenc.h
 *	  The column encodings of trail format version 3 (docs/trail-format.md,
 *	  "Version 3: page column encodings"): the non-NULL values of one extra
 *	  column of one page, encoded the smallest of several ways (constant,
 *	  runs, dictionary, bit packing, deltas, XOR of float bits, decimal
 *	  scaling), chosen per page and exact.  Private to page2.c, the footers'
 *	  float summaries (format2.c) and the tests.
 */
#ifndef TDB_TRAIL_COLENC_H
#define TDB_TRAIL_COLENC_H

#include <stdint.h>

#include "codec.h"
#include "trail.h"

/* Codecs: the low 4 bits of the encoding byte. */
#define COLENC_PLAIN		0
#define COLENC_CONST		1
#define COLENC_RLE			2
#define COLENC_DICT			3
#define COLENC_DICT_RLE		4
#define COLENC_FOR			5
#define COLENC_DELTA		6
#define COLENC_XOR			7
#define COLENC_PATCHED		8	/* version 4: packed deltas with exceptions */
#define COLENC_RUNS			9	/* version 4: each run's values on their own */
#define COLENC_NCODECS		10
#define COLENC_NCODECS_V3	8	/* the codecs a version-3 page may use */

/* The codecs a page of file format version v may use: 0 .. colenc_ncodecs(v) - 1 */
static inline int
colenc_ncodecs(int version)
{
	return version >= 4 ? COLENC_NCODECS : COLENC_NCODECS_V3;
}
#define COLENC_MAX_SCALE	14	/* float64: decimal scale k, 0..14 (high nibble k + 1) */

/*
 * Appends the encoding byte and the payload of the nn values (their bits:
 * int64, double bits, lexicon id or 0/1) of a column of the given type,
 * the smallest of the encodings that apply and that a page of the file
 * format version may hold (COLENC_PATCHED from version 4).  false: out of memory (b->ok
 * is then false too).
 */
bool		colenc_put(CodecBuf *b, TdbTrailType type, const int64_t *bits, uint32_t nn, int version);

/*
 * The same for an int64 column of times or coordinates, without trying the
 * dictionaries (values that seldom repeat out of order: sorting them for a
 * dictionary costs the writer more than it could save).
 */
bool		colenc_put_sequence(CodecBuf *b, const int64_t *v, uint32_t nn, int version);

/*
 * As colenc_put (sequence: as colenc_put_sequence) for the values of a page
 * of several runs (trails), runs[r] of them in run r (nruns entries, adding
 * up to nn; a run of no value allowed): from version 4, when it is smaller,
 * COLENC_RUNS, each run's values encoded on their own as colenc_put would.
 */
bool		colenc_put_runs(CodecBuf *b, TdbTrailType type, const int64_t *bits, uint32_t nn,
							int version, bool sequence, const uint32_t *runs, uint32_t nruns);

/*
 * The same with the encoding forced (the tests): enc is the encoding byte;
 * false when it does not apply to these values or memory ran out.
 */
bool		colenc_put_as(CodecBuf *b, TdbTrailType type, const int64_t *bits, uint32_t nn,
						  uint8_t enc);

/*
 * Decodes an encoding byte and payload of nn >= 1 values from c into out
 * (nn entries, the bits as colenc_put takes them); string ids must be below
 * nstrings.  runs: as colenc_put_runs's, for COLENC_RUNS (NULL: refused).
 * Returns NULL, or what is wrong (c is then anywhere).
 */
const char *colenc_get(CodecCur *c, TdbTrailType type, uint32_t nn, uint64_t nstrings,
					   int64_t *out, const uint32_t *runs, uint32_t nruns);

/*
 * Floats as exact decimals outside pages (the version-3 footer's float
 * summaries): colenc_scale_pair gives the smallest scale k at which a and b
 * are both m / 10^k read back bit for bit (|m| <= 2^53; never -0, NaN or an
 * infinity), with the m, or -1; colenc_unscale is its inverse, false for m
 * or k out of range.
 */
int			colenc_scale_pair(double a, double b, int64_t *ma, int64_t *mb);
bool		colenc_unscale(int64_t m, int k, double *v);

#endif							/* TDB_TRAIL_COLENC_H */
