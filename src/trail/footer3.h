/*
 * footer3.h
 *	  What the two halves of the version-3 footer codec share: footer3.c
 *	  (encoder, head) and footer3_load.c (chunks read when needed).
 *	  Private to those two files.
 */
#ifndef TDB_TRAIL_FOOTER3_H
#define TDB_TRAIL_FOOTER3_H

#include <pthread.h>

#include "format2.h"

/*
 * Entries per chunk: 64, or more when a directory would otherwise pass
 * DIR_MAX entries, so that the head (about 40 bytes a directory entry, two
 * directories: at most about 6 kB) stays within the reader's first request
 * whatever the file, and a cold count(*) within 8 KiB (issue 33: half of
 * what DuckDB reads for its Parquet footer).  A reader takes the K and P a
 * head gives: files written with 128 (before) read the same.
 */
#define ENTRIES_PER_CHUNK	64
#define DIR_MAX				64

typedef struct F3Chunk
{
	uint64_t	off;			/* in the file */
	uint64_t	len;
	uint32_t	crc;
	uint32_t	first,
				count;			/* entries [first, first + count) */
	uint64_t	nevents;
	uint64_t	bytes;			/* page chunks: the bytes of its pages */
	uint64_t	data_off;		/* page chunks: offset of its first page */
	int64_t		tmin,
				tmax;
	int32_t		xmin,
				ymin,
				xmax,
				ymax;
	TdbTrailKey key;			/* trail chunks: the first id */
	void	   *mem;			/* loaded: what its entries point into */
	TdbTrailStats *stats;		/* trail chunks: count x ncolumns summaries, in mem */
	bool		loaded;
} F3Chunk;

typedef struct F3Lazy
{
	pthread_mutex_t lock;
	int64_t		q;				/* 10^E: zone-map time unit */
	uint32_t	nchunks[3];
	F3Chunk    *chunks[3];		/* TRAIL3_SUMS: column c of trail chunk j at c * ntc + j */
	uint32_t	per[2];			/* K, P */
	int			sums_apart;		/* version 5: summaries in TRAIL3_SUMS chunks, trail entries delta-coded */
	uint64_t	entries_off;	/* where the trail chunks begin (after the summary chunks) */
	uint32_t	nstrings;
	uint64_t	lex_off,
				lex_len;
	uint32_t	lex_crc;
	bool		lex_loaded;
	char	   *lex_arena;
	uint32_t   *ptlo,
			   *pthi;			/* each page's trail range */
	/*
	 * Version 6, pages column-major: for page chunk j and chunk kind k (core,
	 * positions, each extra column), at j * (2 + ncolumns) + k, the bytes of
	 * its pages' chunks of kind k and the file offset of the first of them.
	 */
	bool		colmajor;
	uint64_t   *col_bytes,
			   *col_off;
	char	   *head_arena;		/* first ids of the directory */
	TdbTrailStats *whole_stats;
	size_t		loaded_bytes;	/* memory of the chunks and lexicon loaded */
} F3Lazy;

/*
 * A chunk's loaded flag is set under the F3Lazy lock once its entries are
 * written, and read without it (is there anything to load?) by readers in
 * other threads: a release store and acquire loads, so that a reader that
 * sees it set sees the entries too.
 */
static inline bool
chunk_loaded(const F3Chunk *ch)
{
	return __atomic_load_n(&ch->loaded, __ATOMIC_ACQUIRE);
}

static inline void
chunk_set_loaded(F3Chunk *ch)
{
	__atomic_store_n(&ch->loaded, true, __ATOMIC_RELEASE);
}

/* ---- zone maps ------------------------------------------------------------- */

/* An absolute zone map with times in units of q. */
static inline void
put_zone3(CodecBuf *b, int64_t q, int64_t tmin, int64_t tmax, int32_t xmin, int32_t ymin,
		  int32_t xmax, int32_t ymax)
{
	codec_put_svarint(b, tmin / q);
	codec_put_varint(b, ((uint64_t) tmax - (uint64_t) tmin) / (uint64_t) q);
	codec_put_svarint(b, xmin);
	codec_put_svarint(b, ymin);
	codec_put_varint(b, (uint64_t) ((int64_t) xmax - xmin));
	codec_put_varint(b, (uint64_t) ((int64_t) ymax - ymin));
}

/*
 * A zone map relative to the previous entry's of its chunk (base: its
 * tmin / q, xmin, ymin; zeros before the first), then base set to this
 * one's: page chunk entries, and version 5's trail chunk entries.  Read
 * back by get_zone3 with the same base.
 */
static inline void
put_zone3_rel(CodecBuf *b, int64_t q, int64_t *base, int64_t tmin, int64_t tmax, int32_t xmin,
			  int32_t ymin, int32_t xmax, int32_t ymax)
{
	codec_put_svarint(b, (int64_t) ((uint64_t) (tmin / q) - (uint64_t) base[0]));
	codec_put_varint(b, ((uint64_t) tmax - (uint64_t) tmin) / (uint64_t) q);
	codec_put_svarint(b, xmin - base[1]);
	codec_put_svarint(b, ymin - base[2]);
	codec_put_varint(b, (uint64_t) ((int64_t) xmax - xmin));
	codec_put_varint(b, (uint64_t) ((int64_t) ymax - ymin));
	base[0] = tmin / q;
	base[1] = xmin;
	base[2] = ymin;
}

static inline bool
box_ok(int64_t x0, int64_t y0, uint64_t dx, uint64_t dy)
{
	return x0 >= -TRAIL_LON_MAX && x0 <= TRAIL_LON_MAX && y0 >= -TRAIL_LAT_MAX &&
		y0 <= TRAIL_LAT_MAX && dx <= (uint64_t) (TRAIL_LON_MAX - x0) &&
		dy <= (uint64_t) (TRAIL_LAT_MAX - y0);
}

/*
 * An absolute zone map (put_zone3); or, base given, a relative one
 * (put_zone3_rel): base is added to (a, x0, y0) first, then set to this
 * entry's, as the writer's was.
 */
static inline bool
get_zone3(CodecCur *c, int64_t q, int64_t *base, int64_t *tmin, int64_t *tmax,
		  int32_t *box)
{
	int64_t		a,
				x0,
				y0;
	uint64_t	dt,
				dx,
				dy;

	if (!codec_get_svarint(c, &a) || !codec_get_varint(c, &dt) ||
		!codec_get_svarint(c, &x0) || !codec_get_svarint(c, &y0) ||
		!codec_get_varint(c, &dx) || !codec_get_varint(c, &dy))
		return false;
	if (base)
	{
		if (x0 > 4LL * TRAIL_LON_MAX || x0 < -4LL * TRAIL_LON_MAX ||
			y0 > 4LL * TRAIL_LAT_MAX || y0 < -4LL * TRAIL_LAT_MAX)
			return false;
		a = (int64_t) ((uint64_t) a + (uint64_t) base[0]);	/* modulo 2^64 */
		x0 += base[1];
		y0 += base[2];
	}
	if (!trail_scaled_times(a, dt, q, tmin, tmax) || !box_ok(x0, y0, dx, dy))
		return false;
	box[0] = (int32_t) x0;
	box[1] = (int32_t) y0;
	box[2] = (int32_t) (x0 + (int64_t) dx);
	box[3] = (int32_t) (y0 + (int64_t) dy);
	if (base)
	{
		base[0] = *tmin / q;
		base[1] = box[0];
		base[2] = box[1];
	}
	return true;
}

static inline bool
inside(int64_t tmin, int64_t tmax, const int32_t *box, int64_t otmin, int64_t otmax,
	   int32_t oxmin, int32_t oymin, int32_t oxmax, int32_t oymax)
{
	return tmin >= otmin && tmax <= otmax && box[0] >= oxmin && box[1] >= oymin &&
		box[2] <= oxmax && box[3] <= oymax;
}

#endif							/* TDB_TRAIL_FOOTER3_H */
