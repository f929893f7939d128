/*
 * writer2.c
 *	  Version 2 of the trail writer (tdb_trail_writer_finish for a
 *	  version-2 schema): pages cut by trail or by space and time, encoded in
 *	  chunks, with per-trail page lists and column summaries; and what both
 *	  versions share: the memory bound's checks, progress, the output sink
 *	  and cutting a trail into pages.  The events, their order and version 1
 *	  are writer.c's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE				/* qsort_r, O_TMPFILE, mkostemp */
#endif
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../checksum.h"
#include "format.h"
#include "writer.h"

/* ---- shared by both versions: memory, progress, output, cutting ------- */

size_t
trail_writer_budget(const TdbTrailWriter *w)
{
	return w->opts.memory_limit;
}

/*
 * The dictionaries and the footer's state (fixed: bytes) stay in memory;
 * past 3/4 of the limit the writer stops, saying what took it.
 */
int
trail_writer_check_memory(const TdbTrailWriter *w, size_t fixed, uint32_t ntrails, uint32_t npages,
						  TdbTrailError *err)
{
	size_t		b = trail_writer_budget(w);

	if (w->dict_bytes + fixed <= b / 4 * 3)
		return 0;
	return tdb_trail_fail(err, TDB_TRAIL_ENOMEM,
						  "the writer's memory limit of %.1f MB is too small for this file: %u distinct string trail ids and %u distinct string values take %.1f MB, the footer's state for %u trails and %u pages %.1f MB; together they may take 3/4 of the limit: raise it",
						  b / 1048576.0, w->keys.n, w->lexicon.n, w->dict_bytes / 1048576.0, ntrails, npages,
						  fixed / 1048576.0);
}

int
trail_writer_canceled(const TdbTrailWriter *w, TdbTrailError *err)
{
	if (w->opts.cancel == NULL || !w->opts.cancel(w->opts.cancel_arg))
		return 0;
	return tdb_trail_fail(err, TDB_TRAIL_ECANCELED, "canceled while writing the trail file");
}

void
trail_writer_progress(const TdbTrailWriter *w, const char *phase, uint64_t done, uint64_t total)
{
	TdbTrailProgress p;

	if (w->opts.progress == NULL)
		return;
	p.phase = phase;
	p.events = w->n;
	p.runs = w->sort.spilled;
	p.done = done;
	p.total = total;
	w->opts.progress(w->opts.progress_arg, &p);
}

int
trail_out_flush(TrailOut *o, bool all, TdbTrailError *err)
{
	if (!o->buf.ok)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory writing the file");
	if (o->failed)
		return TDB_TRAIL_EIO;
	if (o->buf.len == 0 || (!all && o->buf.len < ((size_t) 1 << 20)))
		return 0;
	if (o->sink(o->arg, o->buf.data, o->buf.len, err) < 0)
	{
		o->failed = true;
		return err ? err->code : TDB_TRAIL_EIO;
	}
	o->base += o->buf.len;
	o->buf.len = 0;
	return 0;
}

bool
trail_win_reserve(TrailWin *win, uint32_t n)
{
	uint32_t	nc;
	uint8_t    *nr;
	uint32_t   *nt;

	if (n <= win->cap)
		return true;
	nc = win->cap ? win->cap * 2 : 1024;
	if (nc < n)
		nc = n;
	nr = realloc(win->recs, (size_t) nc * win->rs);
	if (nr == NULL)
		return false;
	win->recs = nr;
	nt = realloc(win->tnum, (size_t) nc * sizeof(uint32_t));
	if (nt == NULL)
		return false;
	win->tnum = nt;
	win->cap = nc;
	return true;
}

int
trail_cut_pages(TrailCut *c, TrailWin *win, TdbTrailError *err)
{
	TdbTrailWriter *w = c->w;
	uint32_t	maxn = w->opts.page_max_events;

	win->n = 0;
	/* each round writes at least one event of a finite input */
	for (uint64_t round = 0; round <= w->n; round++)
	{
		uint32_t	n;
		int			rc;

		while (win->n < maxn)
		{
			const uint8_t *r = trail_sorter_peek(c->src);

			if (r == NULL || *(const int64_t *) (r + c->grp_off) != c->grp)
				break;
			if (!trail_win_reserve(win, win->n + 1))
				return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
			memcpy(win->recs + (size_t) win->n * win->rs, r + c->rec_off, win->rs);
			win->tnum[win->n++] = c->tnum;
			trail_sorter_skip(c->src);
		}
		if (c->src->rc < 0)
		{
			*err = c->src->err;
			return c->src->rc;
		}
		if (win->n == 0)
			return 0;
		n = win->n;
		if (w->opts.page_max_span_us > 0)
		{
			/* events are in time order: stop before the span is exceeded */
			int64_t		t0 = trail_win_rec(win, 0)->time;

			for (uint32_t k = 1; k < n; k++)
				if ((uint64_t) trail_win_rec(win, k)->time - (uint64_t) t0 > (uint64_t) w->opts.page_max_span_us)
				{
					n = k;
					break;
				}
		}
		/* shrink until the page fits the target (a single event always fits) */
		for (int tries = 0;; tries++)
		{
			uint32_t	len = c->encode(c->ctx, win, n);

			if (len == 0)
				return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
			if (len <= w->opts.page_target_bytes || n == 1 || tries == 8)
				break;
			n = (uint32_t) ((uint64_t) n * w->opts.page_target_bytes / len);
			if (n == 0)
				n = 1;
		}
		if ((rc = c->emit(c->ctx, win, n, err)) < 0)
			return rc;
		memmove(win->recs, win->recs + (size_t) n * win->rs, (size_t) (win->n - n) * win->rs);
		memmove(win->tnum, win->tnum + n, (size_t) (win->n - n) * sizeof(uint32_t));
		win->n -= n;
	}
	return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "internal error: pages cut from more events than taken");
}

/* ---- version 2 ------------------------------------------------------------ */

/*
 * What version 2 adds to the writer: pages cut by trail (as version 1) or
 * by space and time (a time bucket, then segments of trails in that bucket
 * in Hilbert order of their centres, several to a page), each page encoded
 * in chunks by trail_page2_encode, and per trail its page list and column
 * summaries, folded in file order.
 */
typedef struct Writer2
{
	TdbTrailWriter *w;
	TrailOut   *out;
	CodecBuf	tmp;
	TdbTrailFooter f;
	uint32_t	pagecap,
				trailcap;
	uint32_t   *pairs;			/* (trail, page) of every run, in page order */
	uint64_t	npairs,
				paircap;
	TdbTrailStats *tstats;		/* ntrails x ncolumns */
	uint32_t   *ident;			/* 0, 1, ... page_max_events - 1 */
	uint32_t   *cl;				/* scratch chunk lengths */
	uint64_t	chunk_bytes;	/* the pages' chunk_len arrays */
	uint64_t	done;			/* events in pages */
} Writer2;

typedef struct Page2Arg
{
	const TdbTrailWriter *w;
	const TrailWin *win;
	const uint32_t *js;
} Page2Arg;

static bool
page2_get(void *arg, uint32_t i, int col, int64_t *bits)
{
	Page2Arg   *pa = arg;
	const TrailRec *r = trail_win_rec(pa->win, pa->js[i]);

	if (trail_rec_null(r, pa->w->schema.ncolumns, col))
		return true;
	if (bits)
		*bits = trail_rec_bits(r)[col];
	return false;
}

/* The footer's state in memory, as the writer's limit counts it. */
static size_t
footer_bytes(const Writer2 *x)
{
	return (size_t) x->trailcap * (sizeof(TdbTrailInfo) +
								   (size_t) x->w->schema.ncolumns * sizeof(TdbTrailStats)) +
		(size_t) x->pagecap * sizeof(TdbTrailPageInfo) + x->chunk_bytes +
		x->paircap * 2 * sizeof(uint32_t);
}

/*
 * Encode the page of window events js[0, n) (their trail numbers
 * ascending, times ascending within a trail) into tmp; pi gets its zone map
 * and sizes, chunk_len and stats are the caller's.
 */
static bool
encode_page2(Writer2 *x, const TrailWin *win, const uint32_t *js, uint32_t n, uint32_t *chunk_len,
			 TdbTrailPageInfo *pi)
{
	const TdbTrailWriter *w = x->w;
	int64_t    *time = malloc(n * sizeof(int64_t));
	int32_t    *lon = malloc(n * sizeof(int32_t));
	int32_t    *lat = malloc(n * sizeof(int32_t));
	uint32_t   *tr = malloc(n * sizeof(uint32_t));
	bool		ok = time && lon && lat && tr;

	if (ok)
	{
		Page2Arg	pa = {w, win, js};
		TrailPage2In in = {n, tr, time, lon, lat, w->schema.ncolumns, w->types, page2_get, &pa,
			w->opts.version};

		for (uint32_t i = 0; i < n; i++)
		{
			const TrailRec *e = trail_win_rec(win, js[i]);

			tr[i] = win->tnum[js[i]];
			time[i] = e->time;
			lon[i] = e->lon;
			lat[i] = e->lat;
		}
		x->tmp.len = 0;
		trail_page2_encode(&x->tmp, &in, chunk_len, pi);
		ok = x->tmp.ok;
	}
	free(time);
	free(lon);
	free(lat);
	free(tr);
	return ok;
}

/*
 * Encode window events js[0, n) as the next page and append it: the
 * footer gets its entry, its trails their zone maps, page-list entries and
 * summaries (in file order).
 */
static int
emit_page2(Writer2 *x, const TrailWin *win, const uint32_t *js, uint32_t n, TdbTrailError *err)
{
	TdbTrailWriter *w = x->w;
	int			nc = w->schema.ncolumns;
	TdbTrailPageInfo pi;
	uint32_t   *cl = malloc((size_t) (2 + nc) * sizeof(uint32_t));
	uint32_t	pagecap = x->pagecap;
	uint64_t	paircap = x->paircap;
	int			rc;

	if (cl == NULL || !encode_page2(x, win, js, n, cl, &pi))
	{
		free(cl);
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	}
	if (pi.length > TRAIL_PAGE_MAX_BYTES)
	{
		free(cl);
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "a page of %u bytes; lower page_max_events",
							  pi.length);
	}
	if ((rc = trail_writer_canceled(w, err)) < 0)
	{
		free(cl);
		return rc;
	}
	pi.offset = trail_out_offset(x->out);
	pi.chunk_len = cl;
	codec_put_bytes(&x->out->buf, x->tmp.data, x->tmp.len);
	if (!trail_push_page(&x->f.pages, &x->f.npages, &x->pagecap, &pi))
	{
		free(cl);
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	}
	x->chunk_bytes += (uint64_t) (2 + nc) * sizeof(uint32_t) + 16;
	if ((rc = trail_out_flush(x->out, false, err)) < 0)
		return rc;
	for (uint32_t i = 0; i < n; i++)
	{
		uint32_t	t = win->tnum[js[i]];
		TdbTrailInfo *ti = &x->f.trails[t];
		const TrailRec *e = trail_win_rec(win, js[i]);

		if (i == 0 || t != win->tnum[js[i - 1]])
		{
			if (x->npairs == x->paircap)
			{
				uint64_t	nc2 = x->paircap ? x->paircap * 2 : 1024;
				uint32_t   *np = realloc(x->pairs, nc2 * 2 * sizeof(uint32_t));

				if (np == NULL)
					return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
				x->pairs = np;
				x->paircap = nc2;
			}
			x->pairs[2 * x->npairs] = t;
			x->pairs[2 * x->npairs + 1] = x->f.npages - 1;
			x->npairs++;
			ti->npages++;
		}
		if (e->time < ti->tmin) ti->tmin = e->time;
		if (e->time > ti->tmax) ti->tmax = e->time;
		if (e->lon < ti->xmin) ti->xmin = e->lon;
		if (e->lon > ti->xmax) ti->xmax = e->lon;
		if (e->lat < ti->ymin) ti->ymin = e->lat;
		if (e->lat > ti->ymax) ti->ymax = e->lat;
		ti->nevents++;
		for (int c = 0; c < nc; c++)
			if (!trail_rec_null(e, nc, c))
				trail_stats_add(&x->tstats[(size_t) t * nc + c], w->types[c], trail_rec_bits(e)[c]);
	}
	if ((x->pagecap != pagecap || x->paircap != paircap) &&
		(rc = trail_writer_check_memory(w, footer_bytes(x), x->f.ntrails, x->f.npages, err)) < 0)
		return rc;
	if ((x->done + n) / ((uint64_t) 1 << 20) != x->done / ((uint64_t) 1 << 20))
		trail_writer_progress(w, "writing pages", x->done + n, w->n);
	x->done += n;
	return 0;
}

/* The cutter's callbacks (trail_cut_pages): the window's first n events. */
static uint32_t
cut_encode2(void *ctx, TrailWin *win, uint32_t n)
{
	Writer2    *x = ctx;
	TdbTrailPageInfo pi;

	if (!encode_page2(x, win, x->ident, n, x->cl, &pi))
		return 0;
	return x->tmp.len ? (uint32_t) x->tmp.len : 1;
}

static int
cut_emit2(void *ctx, TrailWin *win, uint32_t n, TdbTrailError *err)
{
	Writer2    *x = ctx;

	return emit_page2(x, win, x->ident, n, err);
}

/* A new trail (the next in id order) from its first sorted event. */
static int
new_trail(Writer2 *x, const TrailRec *r, TdbTrailError *err)
{
	TdbTrailWriter *w = x->w;
	int			nc = w->schema.ncolumns;
	TdbTrailInfo *ti;

	if (x->f.ntrails == x->trailcap)
	{
		uint32_t	cap = x->trailcap * 2;
		TdbTrailInfo *nt = realloc(x->f.trails, cap * sizeof(TdbTrailInfo));
		TdbTrailStats *ns;

		if (nt == NULL)
			return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
		x->f.trails = nt;
		ns = realloc(x->tstats, (size_t) cap * (nc ? nc : 1) * sizeof(TdbTrailStats));
		if (ns == NULL)
			return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
		x->tstats = ns;
		x->trailcap = cap;
		if (trail_writer_check_memory(w, footer_bytes(x), x->f.ntrails, x->f.npages, err) < 0)
			return err->code;
	}
	ti = &x->f.trails[x->f.ntrails];
	memset(ti, 0, sizeof(*ti));
	memset(&x->tstats[(size_t) x->f.ntrails * nc], 0, (size_t) nc * sizeof(TdbTrailStats));
	if (w->schema.id_type == TDB_TRAIL_STRING)
		ti->key.s = w->keys.strs[r->key];
	else
		ti->key.i = r->key;
	ti->tmin = INT64_MAX;
	ti->tmax = INT64_MIN;
	ti->xmin = ti->ymin = INT32_MAX;
	ti->xmax = ti->ymax = INT32_MIN;
	x->f.ntrails++;
	return 0;
}

/* Trail order: each trail's pages in turn, cut as they stream from the merge. */
static int
emit_trails(Writer2 *x, TdbTrailError *err)
{
	TdbTrailWriter *w = x->w;
	TrailWin	win = {.rs = w->rs};
	int			rc = 0;

	for (uint64_t guard = 0; rc == 0 && guard <= w->n; guard++)
	{
		const TrailRec *r = trail_sorter_peek(&w->sort);
		TrailCut	c = {w, &w->sort, 0, offsetof(TrailRec, key), 0, 0, cut_encode2, cut_emit2, x};

		if (r == NULL)
			break;
		if ((rc = new_trail(x, r, err)) < 0)
			break;
		c.grp = r->key;
		c.tnum = x->f.ntrails - 1;
		rc = trail_cut_pages(&c, &win, err);
	}
	free(win.recs);
	free(win.tnum);
	return rc;
}

/* Cells of the space-time order: a 256 x 256 grid over the file's extent. */
#define CELL_SHIFT 8

/* Hilbert index of (px, py) on a 65536 x 65536 grid. */
static uint64_t
hilbert(uint32_t px, uint32_t py)
{
	uint64_t	d = 0;

	for (uint32_t s = 1u << 15; s > 0; s >>= 1)
	{
		uint32_t	rx = (px & s) > 0,
					ry = (py & s) > 0;

		d += (uint64_t) s * s * ((3 * rx) ^ ry);
		if (ry == 0)
		{
			if (rx == 1)
			{
				px = 65535 - px;
				py = 65535 - py;
			}
			{
				uint32_t	t = px;

				px = py;
				py = t;
			}
		}
	}
	return d;
}

static int64_t
floor_div(int64_t a, int64_t b)
{
	int64_t		q = a / b;

	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* The Hilbert index of a fixed-point position's cell over the extent. */
static uint64_t
cell_of(int32_t lon, int32_t lat, int32_t gx0, int32_t gy0, double wx, double wy)
{
	uint32_t	cx = (uint32_t) (((double) lon - gx0) / wx * (1 << CELL_SHIFT)),
				cy = (uint32_t) (((double) lat - gy0) / wy * (1 << CELL_SHIFT));

	if (cx >= (1u << CELL_SHIFT))
		cx = (1u << CELL_SHIFT) - 1;
	if (cy >= (1u << CELL_SHIFT))
		cy = (1u << CELL_SHIFT) - 1;
	/* the cell's corner on the 16-bit curve: cells stay contiguous on it */
	return hilbert(cx << (16 - CELL_SHIFT), cy << (16 - CELL_SHIFT));
}

/*
 * By time (opts.by_time), the grid is one cell and segments share no page:
 * each page holds one trail's events of one bucket, pages by bucket, then
 * trail.
 *
 * Space-time order: events are cut into segments (one trail's consecutive
 * events in one time bucket and one cell of a 256 x 256 grid over the
 * file's extent), the segments of a bucket are laid out along a Hilbert
 * curve by cell, and consecutive segments share a page up to the target
 * size and event count; a segment larger than a page gets pages of its
 * own.  A page never mixes buckets; a trail's segments in one page form
 * one run.  So a page covers a few neighbouring cells of one bucket, and a
 * window or an area reads few pages.
 *
 * Bounded memory: the events, merged in (trail, time, arrival) order, are
 * numbered by that position and cut into segments; each event goes with
 * its segment's head (bucket, cell, trail, first position, event count
 * and size encoded alone) into a second sort by (bucket, cell, trail,
 * position), which gives the segments in page order, each one's events
 * together; pages are then cut from that stream.  A segment's size is
 * needed only when it has at most page_max_events events (a larger one is
 * cut alone), so at most that many are held to encode it.
 */
typedef struct SegHead
{
	int64_t		bucket;
	uint64_t	hkey;			/* Hilbert index of the segment's cell */
	uint64_t	start;			/* position of its first event */
	uint32_t	trail;
	uint32_t	n;				/* events; 0: more than page_max_events */
	uint32_t	bytes;			/* encoded alone, when n > 0 */
	uint32_t	pad;
} SegHead;

static int
seg_cmp(const void *a, const void *b, void *arg)
{
	const SegHead *x = a,
			   *y = b;
	const TrailRec *rx = (const TrailRec *) (x + 1),
			   *ry = (const TrailRec *) (y + 1);

	(void) arg;
	if (x->bucket != y->bucket)
		return x->bucket < y->bucket ? -1 : 1;
	if (x->hkey != y->hkey)
		return x->hkey < y->hkey ? -1 : 1;
	if (x->trail != y->trail)
		return x->trail < y->trail ? -1 : 1;
	return (rx->ord > ry->ord) - (rx->ord < ry->ord);
}

static int
win_ord_cmp(const void *a, const void *b, void *arg)
{
	const TrailWin *win = arg;
	uint64_t	x = trail_win_rec(win, *(const uint32_t *) a)->ord,
				y = trail_win_rec(win, *(const uint32_t *) b)->ord;

	return (x > y) - (x < y);
}

typedef struct SegState
{
	Writer2    *x;
	TrailSorter *st;
	uint8_t    *rec;			/* SegHead + TrailRec */
	TrailWin	win;			/* the open segment's events, up to page_max_events */
	SegHead		h;
	bool		open;
} SegState;

static int
seg_put(SegState *ss, const uint8_t *r, TdbTrailError *err)
{
	TdbTrailWriter *w = ss->x->w;
	int			rc;

	size_t		b = trail_writer_budget(w),
				used = w->dict_bytes + footer_bytes(ss->x) + b / 8;

	/* the second sort's buffer gets what the footer and the first merge leave */
	ss->st->limit = used < b - b / 8 ? b - used : b / 8;
	memcpy(ss->rec, &ss->h, sizeof(SegHead));
	memcpy(ss->rec + sizeof(SegHead), r, w->rs);
	if ((rc = trail_sorter_put(ss->st, ss->rec, err)) < 0)
		return rc;
	return 0;
}

/* Close the open segment: its size, then its held events into the second sort. */
static int
seg_close(SegState *ss, TdbTrailError *err)
{
	Writer2    *x = ss->x;
	int			rc;

	if (!ss->open)
		return 0;
	ss->open = false;
	if (ss->h.n == 0)
		return 0;				/* a large segment: its events went already */
	if (!encode_page2(x, &ss->win, x->ident, ss->win.n, x->cl, &(TdbTrailPageInfo) {0}))
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	ss->h.bytes = (uint32_t) x->tmp.len;
	for (uint32_t i = 0; i < ss->win.n; i++)
		if ((rc = seg_put(ss, (const uint8_t *) trail_win_rec(&ss->win, i), err)) < 0)
			return rc;
	ss->win.n = 0;
	return 0;
}

/* First pass: number the merged events, cut segments, sort them into page order. */
static int
make_segments(Writer2 *x, SegState *ss, TdbTrailError *err)
{
	TdbTrailWriter *w = x->w;
	int64_t		bucket_us = w->opts.bucket_us;
	int32_t		gx0 = w->gx0,
				gy0 = w->gy0;
	double		wx = (double) w->gx1 - w->gx0 + 1,
				wy = (double) w->gy1 - w->gy0 + 1;
	int64_t		key = 0;
	int			rc = 0;

	for (uint64_t j = 0; rc == 0; j++)
	{
		const TrailRec *r = trail_sorter_peek(&w->sort);
		TrailRec   *e;
		int64_t		bk;
		uint64_t	cell;

		if (r == NULL)
			break;
		if (j == 0 || r->key != key)
		{
			if ((rc = new_trail(x, r, err)) < 0)
				break;
			key = r->key;
		}
		bk = floor_div(r->time, bucket_us);
		/* by time: one cell, the whole extent */
		cell = w->opts.by_time ? 0 : cell_of(r->lon, r->lat, gx0, gy0, wx, wy);
		if (ss->open && (ss->h.trail != x->f.ntrails - 1 || ss->h.bucket != bk || ss->h.hkey != cell) &&
			(rc = seg_close(ss, err)) < 0)
			break;
		if (!ss->open)
		{
			ss->open = true;
			ss->h.bucket = bk;
			ss->h.hkey = cell;
			ss->h.trail = x->f.ntrails - 1;
			ss->h.start = j;
			ss->h.n = 1;
			ss->h.bytes = 0;
			ss->win.n = 0;
		}
		else if (ss->h.n > 0)
			ss->h.n++;
		if (ss->h.n > 0)
		{
			if (!trail_win_reserve(&ss->win, ss->win.n + 1))
			{
				rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
				break;
			}
			e = (TrailRec *) (ss->win.recs + (size_t) ss->win.n * w->rs);
			memcpy(e, r, w->rs);
			e->ord = j;
			ss->win.tnum[ss->win.n++] = ss->h.trail;
			if (ss->h.n > w->opts.page_max_events)
			{
				/* larger than a page: cut alone, its size is not needed */
				ss->h.n = 0;
				for (uint32_t i = 0; i < ss->win.n && rc == 0; i++)
					rc = seg_put(ss, (const uint8_t *) trail_win_rec(&ss->win, i), err);
				ss->win.n = 0;
			}
		}
		else
		{
			memcpy(ss->win.recs, r, w->rs);
			((TrailRec *) ss->win.recs)->ord = j;
			rc = seg_put(ss, ss->win.recs, err);
		}
		trail_sorter_skip(&w->sort);
		if (rc == 0 && (j + 1) % ((uint64_t) 1 << 16) == 0)
			rc = trail_writer_canceled(w, err);
		if (rc == 0 && (j + 1) % ((uint64_t) 1 << 20) == 0)
			trail_writer_progress(w, "ordering segments", j + 1, w->n);
	}
	if (rc == 0 && w->sort.rc < 0)
	{
		*err = w->sort.err;
		rc = w->sort.rc;
	}
	if (rc == 0)
		rc = seg_close(ss, err);
	return rc;
}

static int
emit_spacetime(Writer2 *x, TdbTrailError *err)
{
	TdbTrailWriter *w = x->w;
	SegState	ss;
	TrailSorter *st;
	TrailWin	win = {.rs = w->rs};
	uint32_t   *js = NULL;
	size_t		hs = sizeof(SegHead);
	int			rc;

	memset(&ss, 0, sizeof(ss));
	ss.x = x;
	ss.win.rs = w->rs;
	ss.st = st = malloc(sizeof(TrailSorter));
	ss.rec = malloc(hs + w->rs);
	js = malloc((size_t) w->opts.page_max_events * sizeof(uint32_t));
	if (st == NULL || ss.rec == NULL || js == NULL)
	{
		free(st);
		free(ss.rec);
		free(js);
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	}
	trail_sorter_init(st, hs + w->rs, seg_cmp, NULL, w->opts.temp_dir, trail_writer_budget(w) / 2);
	st->cancel = w->opts.cancel;
	st->cancel_arg = w->opts.cancel_arg;
	st->temp_used = &w->temp_used;
	st->temp_limit = w->opts.temp_limit;
	rc = make_segments(x, &ss, err);
	free(ss.win.recs);
	free(ss.win.tnum);
	/* the first sort is done with: its read buffers go before the second merge */
	trail_sorter_free(&w->sort);
	if (rc == 0)
		rc = trail_sorter_finish(st, trail_writer_budget(w) / 8, err);

	for (uint64_t guard = 0; rc == 0 && guard <= w->n; guard++)
	{
		const SegHead *h = trail_sorter_peek(st);
		uint64_t	bytes = 0,
					events = 0;
		int64_t		bucket;

		if (h == NULL)
			break;
		if (h->n == 0 || h->bytes > w->opts.page_target_bytes || h->n > w->opts.page_max_events)
		{
			/* a segment larger than a page: cut alone, by size and count */
			TrailCut	c = {w, st, hs, offsetof(SegHead, start), (int64_t) h->start, h->trail,
				cut_encode2, cut_emit2, x};

			rc = trail_cut_pages(&c, &win, err);
			continue;
		}
		bucket = h->bucket;
		win.n = 0;
		while ((h = trail_sorter_peek(st)) != NULL && h->bucket == bucket &&
			   h->n > 0 && h->bytes <= w->opts.page_target_bytes && h->n <= w->opts.page_max_events &&
			   (win.n == 0 || (!w->opts.by_time && bytes + h->bytes <= w->opts.page_target_bytes &&
							   events + h->n <= w->opts.page_max_events)))
		{
			uint64_t	start = h->start;
			uint32_t	n = h->n;

			bytes += h->bytes;
			events += n;
			if (!trail_win_reserve(&win, win.n + n))
			{
				rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
				break;
			}
			for (uint32_t k = 0; k < n; k++)
			{
				const SegHead *e = trail_sorter_peek(st);

				if (e == NULL || e->start != start)
				{
					rc = st->rc < 0 ? (*err = st->err, st->rc) :
						tdb_trail_fail(err, TDB_TRAIL_EINVAL, "internal error: a segment's events are not together");
					break;
				}
				memcpy(win.recs + (size_t) win.n * w->rs, (const uint8_t *) e + hs, w->rs);
				win.tnum[win.n++] = e->trail;
				trail_sorter_skip(st);
			}
			if (rc < 0)
				break;
		}
		if (rc == 0 && st->rc < 0)
		{
			*err = st->err;
			rc = st->rc;
		}
		if (rc < 0)
			break;
		/*
		 * One page: sorting its events by position gives each trail one
		 * run, its events (from several cells) in time order.
		 */
		for (uint32_t i = 0; i < win.n; i++)
			js[i] = i;
		if (win.n > 1)
			qsort_r(js, win.n, sizeof(uint32_t), win_ord_cmp, &win);
		rc = emit_page2(x, &win, js, win.n, err);
	}
	if (rc == 0 && st->rc < 0)
	{
		*err = st->err;
		rc = st->rc;
	}
	trail_sorter_free(st);
	free(st);
	free(ss.rec);
	free(win.recs);
	free(win.tnum);
	free(js);
	return rc;
}

int
trail_writer_finish2(TdbTrailWriter *w, TrailOut *out, TdbTrailError *err)
{
	Writer2		x;
	int			nc = w->schema.ncolumns;
	uint32_t   *lists = NULL;
	uint8_t		hdr[TDB_TRAIL_HEADER_SIZE];
	TdbTrailTrailer t;
	int			rc = 0;

	memset(&x, 0, sizeof(x));
	x.w = w;
	x.out = out;
	codec_buf_init(&x.tmp);
	x.f.version = (uint16_t) w->opts.version;
	x.f.order = w->opts.order;
	x.f.bucket_us = w->opts.order == TDB_TRAIL_ORDER_SPACETIME ? w->opts.bucket_us : 0;
	x.f.schema = w->schema;
	x.f.nstrings = w->lexicon.n;
	x.f.strings = w->lexicon.strs;
	x.trailcap = 256;
	x.f.trails = calloc(x.trailcap, sizeof(TdbTrailInfo));
	x.tstats = calloc((size_t) x.trailcap * (nc ? nc : 1), sizeof(TdbTrailStats));
	x.ident = malloc((size_t) w->opts.page_max_events * sizeof(uint32_t));
	x.cl = malloc((size_t) (2 + nc) * sizeof(uint32_t));
	if (x.f.trails == NULL || x.tstats == NULL || x.ident == NULL || x.cl == NULL)
	{
		rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
		goto done;
	}
	for (uint32_t i = 0; i < w->opts.page_max_events; i++)
		x.ident[i] = i;

	memset(hdr, 0, sizeof(hdr));
	memcpy(hdr, TRAIL_HEADER_MAGIC, 8);
	codec_put_u32le(hdr + 8, w->opts.version);
	codec_put_bytes(&out->buf, hdr, sizeof(hdr));

	if (w->opts.order == TDB_TRAIL_ORDER_SPACETIME)
		rc = emit_spacetime(&x, err);
	else
		rc = emit_trails(&x, err);
	if (rc == 0 && w->sort.rc < 0)
	{
		*err = w->sort.err;
		rc = w->sort.rc;
	}
	if (rc < 0)
		goto done;
	for (uint32_t k = 0; k < x.f.ntrails; k++)
		x.f.trails[k].stats = &x.tstats[(size_t) k * nc];

	/* page lists: the (trail, page) pairs grouped by trail, pages ascending */
	lists = malloc((x.npairs ? x.npairs : 1) * sizeof(uint32_t));
	if (lists == NULL)
	{
		rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
		goto done;
	}
	{
		uint64_t	at = 0;

		for (uint32_t k = 0; k < x.f.ntrails; k++)
		{
			x.f.trails[k].page_list = lists + at;
			x.f.trails[k].first_page = UINT32_MAX;
			at += x.f.trails[k].npages;
			x.f.trails[k].npages = 0;
		}
		for (uint64_t p = 0; p < x.npairs; p++)
		{
			TdbTrailInfo *ti = &x.f.trails[x.pairs[2 * p]];

			((uint32_t *) ti->page_list)[ti->npages++] = x.pairs[2 * p + 1];
		}
		for (uint32_t k = 0; k < x.f.ntrails; k++)
			x.f.trails[k].first_page = x.f.trails[k].page_list[0];
	}
	x.f.nevents = w->n;

	memset(&t, 0, sizeof(t));
	x.f.data_end = trail_out_offset(out);
	if (x.f.version >= 3)
	{
		/* chunks, then the head the trailer names */
		trail_footer3_encode(&out->buf, out->base, &x.f, &t);
		if (!out->buf.ok)
		{
			rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory encoding the footer");
			goto done;
		}
	}
	else
	{
		t.footer_offset = trail_out_offset(out);
		x.tmp.len = 0;
		trail_footer2_encode(&x.tmp, &x.f);
		if (!x.tmp.ok)
		{
			rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory encoding the footer");
			goto done;
		}
		t.footer_length = x.tmp.len;
		t.footer_crc = tdb_crc32c(x.tmp.data, x.tmp.len);
		codec_put_bytes(&out->buf, x.tmp.data, x.tmp.len);
	}
	t.file_size = trail_out_offset(out) + TDB_TRAIL_TRAILER_SIZE;
	t.version = (uint16_t) w->opts.version;
	if (codec_buf_reserve(&out->buf, TDB_TRAIL_TRAILER_SIZE))
	{
		trail_trailer_encode(out->buf.data + out->buf.len, &t);
		out->buf.len += TDB_TRAIL_TRAILER_SIZE;
	}
	rc = trail_out_flush(out, true, err);

done:
	for (uint32_t p = 0; p < x.f.npages; p++)
		free((void *) x.f.pages[p].chunk_len);
	free(x.f.pages);
	free(x.f.trails);
	free(x.tstats);
	free(x.pairs);
	free(x.ident);
	free(x.cl);
	free(lists);
	codec_buf_free(&x.tmp);
	return rc;
}
