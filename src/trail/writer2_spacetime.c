/*
 * writer2_spacetime.c
 *	  The version-2 writer's space-time order (TDB_TRAIL_ORDER_SPACETIME,
 *	  and by time): segments of trails by time bucket and Hilbert cell,
 *	  several to a page.  Split from writer2.c, which has trail order.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE				/* qsort_r */
#endif
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "writer2.h"

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
				used = w->dict_bytes + w2_footer_bytes(ss->x) + b / 8;

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
	if (!w2_encode_page2(x, &ss->win, x->ident, ss->win.n, x->cl, &(TdbTrailPageInfo) {0}))
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
			if ((rc = w2_new_trail(x, r, err)) < 0)
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

int
w2_emit_spacetime(Writer2 *x, TdbTrailError *err)
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
				w2_cut_encode2, w2_cut_emit2, x};

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
		rc = w2_emit_page2(x, &win, js, win.n, err);
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

