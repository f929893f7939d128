/*
 * writer.h
 *	  The trail writer's state, private to its two files: writer.c (taking
 *	  events, sorting them within the memory limit through spill.c,
 *	  version-1 files) and writer2.c (version-2 files: pages by trail or by
 *	  space and time, chunks, summaries; and the memory checks, progress,
 *	  output and page cutting both versions share).
 */
#ifndef TDB_TRAIL_WRITER_H
#define TDB_TRAIL_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "codec.h"
#include "spill.h"
#include "trail.h"

/* String interner: a string's id is its order of first appearance. */
typedef struct Interner
{
	char	  **strs;
	uint32_t	n,
				cap;
	uint32_t   *slots;			/* id + 1; 0 = empty */
	uint32_t	nslots;
	size_t		bytes;			/* memory taken, as accounted */
} Interner;

/*
 * An event as the writer sorts it: this head, then the extra columns'
 * value bits (int64 each) and their NULL bitmap, padded to 8 bytes
 * (trail_rec_size).  ord is the arrival number while events are sorted by
 * (trail, time, arrival), then the event's position in that order.
 */
typedef struct TrailRec
{
	int64_t		key;			/* id, or interned key string id */
	int64_t		time;
	uint64_t	ord;
	int32_t		lon,
				lat;
} TrailRec;

static inline size_t
trail_rec_size(int ncols)
{
	return (sizeof(TrailRec) + 8 * (size_t) ncols + ((size_t) ncols + 7) / 8 + 7) & ~(size_t) 7;
}

static inline const int64_t *
trail_rec_bits(const TrailRec *r)
{
	return (const int64_t *) (r + 1);
}

static inline bool
trail_rec_null(const TrailRec *r, int ncols, int c)
{
	const uint8_t *nb = (const uint8_t *) (r + 1) + 8 * (size_t) ncols;

	return (nb[c >> 3] >> (c & 7)) & 1;
}

/* Events being cut into pages: copies of records, with trail numbers. */
typedef struct TrailWin
{
	uint8_t    *recs;
	uint32_t   *tnum;
	size_t		rs;				/* record size */
	uint32_t	n,
				cap;
} TrailWin;

static inline const TrailRec *
trail_win_rec(const TrailWin *win, uint32_t i)
{
	return (const TrailRec *) (win->recs + (size_t) i * win->rs);
}

/* The file as it is written: a buffer flushed to the sink past 1 MiB. */
/*
 * The output buffer goes to the sink once it holds this much.  Version 6's
 * column-major layout rearranges the pages in it at finish, so they must
 * all still be there: a file whose pages total more is written row-major
 * (version 5) as it streams, and memory stays bounded by this buffer.
 */
#define TRAIL_OUT_FLUSH_BYTES	((size_t) 1 << 20)
_Static_assert(TDB_TRAIL_HEADER_SIZE + TDB_TRAIL_COLMAJOR_MAX_BYTES < TRAIL_OUT_FLUSH_BYTES,
			   "the pages of a column-major file must never leave the output buffer before finish");

typedef struct TrailOut
{
	CodecBuf	buf;
	uint64_t	base;			/* bytes already given to the sink */
	TdbTrailSink sink;
	void	   *arg;
	bool		failed;			/* the sink failed (its error is in the writer's err) */
} TrailOut;

static inline uint64_t
trail_out_offset(const TrailOut *o)
{
	return o->base + o->buf.len;
}

struct TdbTrailWriter
{
	TdbTrailSchema schema;
	TdbTrailWriterOptions opts;
	TdbTrailType types[TDB_TRAIL_MAX_COLUMNS];
	size_t		rs;				/* trail_rec_size */
	uint8_t    *rec;			/* scratch record */
	TrailSorter sort;			/* (trail, time, arrival) */
	uint64_t	temp_used;		/* bytes every sorter has spilled (opts.temp_limit) */
	uint64_t	n;
	Interner	keys;
	Interner	lexicon;
	size_t		dict_bytes;		/* both interners, as accounted */
	int32_t		gx0,
				gy0,
				gx1,
				gy1;			/* the events' extent */
	/* ORDER_AUTO: each trail's first and last time and events, by key (open addressing) */
	struct TrailSpan *spans;
	uint32_t	nspans,
				spancap;		/* 0 or a power of two */
	size_t		span_bytes;		/* the table's, counted against the memory limit */
	uint64_t	span_events;	/* events of the trails recorded */
	int64_t		span_t0,
				span_t1;		/* every event's first and last time */
	char		order_note[128];	/* what ORDER_AUTO decided, and why (after finish) */
	bool		finished;
};


/* The memory bound's parts (writer.c): what sorting may use now. */
size_t		trail_writer_budget(const TdbTrailWriter *w);
int			trail_writer_check_memory(const TdbTrailWriter *w, size_t fixed, uint32_t ntrails,
									  uint32_t npages, TdbTrailError *err);
int			trail_writer_canceled(const TdbTrailWriter *w, TdbTrailError *err);
void		trail_writer_progress(const TdbTrailWriter *w, const char *phase, uint64_t done,
								  uint64_t total);
int			trail_out_flush(TrailOut *o, bool all, TdbTrailError *err);
bool		trail_win_reserve(TrailWin *win, uint32_t n);
/* Compare records by (trail, time, ord): the sort of writer.c. */
int			trail_rec_cmp(const void *a, const void *b, void *arg);

/*
 * Cut the events of one group (one trail; or one segment of space-time
 * order) into pages as version 1 did: at most page_max_events,
 * page_max_span_us and near page_target_bytes each.  The events come from
 * src while the int64 at grp_off of its records equals grp; each record's
 * event is at rec_off.  encode returns the page's length (0: out of
 * memory), emit writes the first n events of the window as a page.
 */
typedef struct TrailCut
{
	TdbTrailWriter *w;
	TrailSorter *src;
	size_t		rec_off;
	size_t		grp_off;
	int64_t		grp;
	uint32_t	tnum;
	uint32_t	(*encode) (void *ctx, TrailWin *win, uint32_t n);
	int			(*emit) (void *ctx, TrailWin *win, uint32_t n, TdbTrailError *err);
	void	   *ctx;
} TrailCut;

int			trail_cut_pages(TrailCut *c, TrailWin *win, TdbTrailError *err);

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
 * Write a version-2 file from the writer's sorted events to out
 * (writer2.c); tdb_trail_writer_finish's second half.
 */
int			trail_writer_finish2(TdbTrailWriter *w, TrailOut *out, TdbTrailError *err);

#endif							/* TDB_TRAIL_WRITER_H */
