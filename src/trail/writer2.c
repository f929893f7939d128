/*
 * writer2.c
 *	  Versions 2 to 4 of the trail writer: pages encoded in chunks with
 *	  per-trail page lists and column summaries, and trail order (small
 *	  trails sharing pages from version 4); and what all versions share: the
 *	  memory bound's checks, progress, the output sink and cutting a trail
 *	  into pages.  Space-time order is writer2_spacetime.c's, the footer and
 *	  trailer writer2_finish.c's; the events, their order and version 1 are
 *	  writer.c's.
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
#include "writer2.h"

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

	if (w->dict_bytes + w->span_bytes + fixed <= b / 4 * 3)
		return 0;
	if (ntrails == 0 && npages == 0 && w->span_bytes + fixed > 0)
		/* (while events are added: page order auto's record of the trails) */
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM,
							  "the writer's memory limit of %.1f MB is too small for this file: %u distinct string trail ids and %u distinct string values take %.1f MB, page order auto's record of %u trails %.1f MB; together they may take 3/4 of the limit: raise it, or name a page order",
							  b / 1048576.0, w->keys.n, w->lexicon.n, w->dict_bytes / 1048576.0, w->nspans,
							  (w->span_bytes + fixed) / 1048576.0);
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
	if (o->buf.len == 0 || (!all && o->buf.len < TRAIL_OUT_FLUSH_BYTES))
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

/* More of the group's events into win, up to page_max_events: 0, or the error */
static int
take_group(TrailCut *c, TrailWin *win, TdbTrailError *err)
{
	while (win->n < c->w->opts.page_max_events)
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
	return 0;
}

/* trail_cut_pages with the window's first win->n events already the group's */
static int
cut_from(TrailCut *c, TrailWin *win, TdbTrailError *err)
{
	TdbTrailWriter *w = c->w;

	/* each round writes at least one event of a finite input */
	for (uint64_t round = 0; round <= w->n; round++)
	{
		uint32_t	n;
		int			rc;

		if ((rc = take_group(c, win, err)) < 0)
			return rc;
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

int
trail_cut_pages(TrailCut *c, TrailWin *win, TdbTrailError *err)
{
	win->n = 0;
	return cut_from(c, win, err);
}

/* ---- version 2 (writer2.h; space-time order in writer2_spacetime.c) ------- */

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
size_t
w2_footer_bytes(const Writer2 *x)
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
bool
w2_encode_page2(Writer2 *x, const TrailWin *win, const uint32_t *js, uint32_t n, uint32_t *chunk_len,
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
int
w2_emit_page2(Writer2 *x, const TrailWin *win, const uint32_t *js, uint32_t n, TdbTrailError *err)
{
	TdbTrailWriter *w = x->w;
	int			nc = w->schema.ncolumns;
	TdbTrailPageInfo pi;
	uint32_t   *cl = malloc((size_t) (2 + nc) * sizeof(uint32_t));
	uint32_t	pagecap = x->pagecap;
	uint64_t	paircap = x->paircap;
	int			rc;

	if (cl == NULL || !w2_encode_page2(x, win, js, n, cl, &pi))
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
	pi.chunk_off = NULL;		/* row-major until finish may lay them out (writer2_finish.c) */
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
		(rc = trail_writer_check_memory(w, w2_footer_bytes(x), x->f.ntrails, x->f.npages, err)) < 0)
		return rc;
	if ((x->done + n) / ((uint64_t) 1 << 20) != x->done / ((uint64_t) 1 << 20))
		trail_writer_progress(w, "writing pages", x->done + n, w->n);
	x->done += n;
	return 0;
}

/* The cutter's callbacks (trail_cut_pages): the window's first n events. */
uint32_t
w2_cut_encode2(void *ctx, TrailWin *win, uint32_t n)
{
	Writer2    *x = ctx;
	TdbTrailPageInfo pi;

	if (!w2_encode_page2(x, win, x->ident, n, x->cl, &pi))
		return 0;
	return x->tmp.len ? (uint32_t) x->tmp.len : 1;
}

int
w2_cut_emit2(void *ctx, TrailWin *win, uint32_t n, TdbTrailError *err)
{
	Writer2    *x = ctx;

	return w2_emit_page2(x, win, x->ident, n, err);
}

/* A new trail (the next in id order) from its first sorted event. */
int
w2_new_trail(Writer2 *x, const TrailRec *r, TdbTrailError *err)
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
		if (trail_writer_check_memory(w, w2_footer_bytes(x), x->f.ntrails, x->f.npages, err) < 0)
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

/*
 * Small trails packed together (version 4): the trails that fit in one page
 * (page_max_events, page_target_bytes, page_max_span_us) share pages, in id
 * order, up to the same limits for the page; a larger trail gets pages of
 * its own.  Version 2 wrote a page per trail: on one hour of New York Harbor
 * AIS (295 vessels of 29 reports on average) that was 295 pages, each with
 * its 13 chunk CRCs, column headers and footer entry.
 */
#define TRAIL_PACK_BYTES	4096

typedef struct Pack
{
	TrailWin	win;			/* the packed trails' events, in id then time order */
	uint64_t	bytes;			/* their sizes, each encoded alone */
	int64_t		tmin,
				tmax;
} Pack;

static int
pack_flush(Writer2 *x, Pack *pk, TdbTrailError *err)
{
	int			rc = 0;

	if (pk->win.n > 0)
		rc = w2_emit_page2(x, &pk->win, x->ident, pk->win.n, err);
	pk->win.n = 0;
	pk->bytes = 0;
	return rc;
}

/*
 * The group's events into win, up to page_max_events; true when the whole
 * trail is there and fits one page alone (*bytes: its size).
 */
static bool
load_small_trail(Writer2 *x, TrailCut *c, TrailWin *win, uint32_t *bytes, TdbTrailError *err, int *rc)
{
	TdbTrailWriter *w = x->w;
	const uint8_t *r;

	win->n = 0;
	if ((*rc = take_group(c, win, err)) < 0 || win->n == 0)
		return false;
	r = trail_sorter_peek(c->src);
	if (r != NULL && *(const int64_t *) (r + c->grp_off) == c->grp)
		return false;
	if (w->opts.page_max_span_us > 0 &&
		(uint64_t) trail_win_rec(win, win->n - 1)->time - (uint64_t) trail_win_rec(win, 0)->time >
		(uint64_t) w->opts.page_max_span_us)
		return false;
	*bytes = w2_cut_encode2(x, win, win->n);
	if (*bytes == 0)
	{
		*rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
		return false;
	}
	return *bytes <= w->opts.page_target_bytes;
}

/*
 * A shared page's target, its trails' sizes each alone: a trail's lookup
 * decodes the whole page.  Smaller shared pages cost little (one hour of
 * New York Harbor AIS: 74.2 kB at 2 kB, 73.5 at 4 kB, 73.4 at 64 kB).
 */
static uint64_t
pack_bytes(const TdbTrailWriter *w)
{
	return TRAIL_PACK_BYTES < w->opts.page_target_bytes ? TRAIL_PACK_BYTES : w->opts.page_target_bytes;
}

static bool
pack_fits(const TdbTrailWriter *w, const Pack *pk, const TrailWin *win, uint32_t bytes)
{
	int64_t		t0 = trail_win_rec(win, 0)->time,
				t1 = trail_win_rec(win, win->n - 1)->time;

	if (pk->win.n == 0)
		return true;
	t0 = t0 < pk->tmin ? t0 : pk->tmin;
	t1 = t1 > pk->tmax ? t1 : pk->tmax;
	return (uint64_t) pk->win.n + win->n <= w->opts.page_max_events &&
		pk->bytes + bytes <= pack_bytes(w) &&
		(w->opts.page_max_span_us <= 0 || (uint64_t) t1 - (uint64_t) t0 <= (uint64_t) w->opts.page_max_span_us);
}

static int
pack_add(Pack *pk, const TrailWin *win, uint32_t bytes, TdbTrailError *err)
{
	int64_t		t0 = trail_win_rec(win, 0)->time,
				t1 = trail_win_rec(win, win->n - 1)->time;

	if (!trail_win_reserve(&pk->win, pk->win.n + win->n))
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	memcpy(pk->win.recs + (size_t) pk->win.n * pk->win.rs, win->recs, (size_t) win->n * win->rs);
	memcpy(pk->win.tnum + pk->win.n, win->tnum, (size_t) win->n * sizeof(uint32_t));
	if (pk->win.n == 0 || t0 < pk->tmin)
		pk->tmin = t0;
	if (pk->win.n == 0 || t1 > pk->tmax)
		pk->tmax = t1;
	pk->win.n += win->n;
	pk->bytes += bytes;
	return 0;
}

/* Trail order: each trail's pages in turn, cut as they stream from the merge. */
int
w2_emit_trails(Writer2 *x, TdbTrailError *err)
{
	TdbTrailWriter *w = x->w;
	TrailWin	win = {.rs = w->rs};
	Pack		pk = {.win = {.rs = w->rs}};
	bool		pack = x->f.version >= 4;
	int			rc = 0;

	for (uint64_t guard = 0; rc == 0 && guard <= w->n; guard++)
	{
		const TrailRec *r = trail_sorter_peek(&w->sort);
		TrailCut	c = {w, &w->sort, 0, offsetof(TrailRec, key), 0, 0, w2_cut_encode2, w2_cut_emit2, x};
		uint32_t	bytes = 0;

		if (r == NULL)
			break;
		if ((rc = w2_new_trail(x, r, err)) < 0)
			break;
		c.grp = r->key;
		c.tnum = x->f.ntrails - 1;
		if (!pack)
		{
			rc = trail_cut_pages(&c, &win, err);
			continue;
		}
		if (load_small_trail(x, &c, &win, &bytes, err, &rc))
		{
			if (!pack_fits(w, &pk, &win, bytes))
				rc = pack_flush(x, &pk, err);
			if (rc == 0)
				rc = pack_add(&pk, &win, bytes, err);
			continue;
		}
		if (rc == 0)
			rc = pack_flush(x, &pk, err);
		if (rc == 0)
			rc = cut_from(&c, &win, err);
	}
	if (rc == 0)
		rc = pack_flush(x, &pk, err);
	free(win.recs);
	free(win.tnum);
	free(pk.win.recs);
	free(pk.win.tnum);
	return rc;
}
