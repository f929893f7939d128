/*
 * writer2.c
 *	  Version 2 of the trail writer (tdb_trail_writer_finish for a
 *	  version-2 schema): pages cut by trail or by space and time, encoded in
 *	  chunks, with per-trail page lists and column summaries.  The events,
 *	  their order and version 1 are writer.c's.
 */
#include <stdlib.h>
#include <string.h>

#include "../checksum.h"
#include "format.h"
#include "writer.h"

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
	const uint32_t *idx;		/* events sorted by (trail, time, arrival) */
	uint32_t   *tnum;			/* trail number of sorted event j */
	CodecBuf	out;
	CodecBuf	tmp;
	TdbTrailFooter f;
	uint32_t	pagecap;
	uint32_t   *pairs;			/* (trail, page) of every run, in page order */
	uint64_t	npairs,
				paircap;
	TdbTrailStats *tstats;		/* ntrails x ncolumns */
	uint32_t   *page_idx;		/* scratch: the events of the page being cut */
	uint32_t   *page_trail;
} Writer2;

typedef struct Page2Arg
{
	const TdbTrailWriter *w;
	const uint32_t *ev;			/* event numbers (into w->ev) */
} Page2Arg;

static bool
page2_get(void *arg, uint32_t i, int col, int64_t *bits)
{
	Page2Arg   *pa = arg;
	const WVal *v = &pa->w->vals[(uint64_t) pa->ev[i] * pa->w->schema.ncolumns + col];

	if (v->isnull)
		return true;
	if (bits)
		*bits = v->bits;
	return false;
}

/*
 * Encode the page of sorted events js[0, n) (their trail numbers ascending,
 * times ascending within a trail) into tmp; pi gets its zone map and sizes,
 * chunk_len and stats are the caller's.
 */
static bool
encode_page2(Writer2 *x, const uint32_t *js, uint32_t n, uint32_t *chunk_len,
			 TdbTrailPageInfo *pi)
{
	const TdbTrailWriter *w = x->w;
	int64_t    *time = malloc(n * sizeof(int64_t));
	int32_t    *lon = malloc(n * sizeof(int32_t));
	int32_t    *lat = malloc(n * sizeof(int32_t));
	uint32_t   *ev = malloc(n * sizeof(uint32_t));
	uint32_t   *tr = malloc(n * sizeof(uint32_t));
	bool		ok = time && lon && lat && ev && tr;

	if (ok)
	{
		Page2Arg	pa = {w, ev};
		TrailPage2In in = {n, tr, time, lon, lat, w->schema.ncolumns, w->types, page2_get, &pa};

		for (uint32_t i = 0; i < n; i++)
		{
			const WEvent *e;

			ev[i] = x->idx[js[i]];
			e = &w->ev[ev[i]];
			tr[i] = x->tnum[js[i]];
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
	free(ev);
	free(tr);
	return ok;
}

/*
 * Encode sorted events js[0, n) as the next page and append it: the footer
 * gets its entry, its trails their zone maps, page-list entries and
 * summaries (in file order).
 */
static int
emit_page2(Writer2 *x, const uint32_t *js, uint32_t n, TdbTrailError *err)
{
	TdbTrailWriter *w = x->w;
	int			nc = w->schema.ncolumns;
	TdbTrailPageInfo pi;
	uint32_t   *cl = malloc((size_t) (2 + nc) * sizeof(uint32_t));

	if (cl == NULL || !encode_page2(x, js, n, cl, &pi))
	{
		free(cl);
		return TDB_TRAIL_ENOMEM;
	}
	if (pi.length > TRAIL_PAGE_MAX_BYTES)
	{
		free(cl);
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "a page of %u bytes; lower page_max_events",
							  pi.length);
	}
	pi.offset = x->out.len;
	pi.chunk_len = cl;
	codec_put_bytes(&x->out, x->tmp.data, x->tmp.len);
	if (!x->out.ok || !trail_push_page(&x->f.pages, &x->f.npages, &x->pagecap, &pi))
	{
		free(cl);
		return TDB_TRAIL_ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++)
	{
		uint32_t	t = x->tnum[js[i]];
		TdbTrailInfo *ti = &x->f.trails[t];
		const WEvent *e = &w->ev[x->idx[js[i]]];

		if (i == 0 || t != x->tnum[js[i - 1]])
		{
			if (x->npairs == x->paircap)
			{
				uint64_t	nc2 = x->paircap ? x->paircap * 2 : 1024;
				uint32_t   *np = realloc(x->pairs, nc2 * 2 * sizeof(uint32_t));

				if (np == NULL)
					return TDB_TRAIL_ENOMEM;
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
		{
			const WVal *v = &w->vals[(uint64_t) x->idx[js[i]] * nc + c];

			if (!v->isnull)
				trail_stats_add(&x->tstats[(size_t) t * nc + c], w->types[c], v->bits);
		}
	}
	return 0;
}

/*
 * Cut sorted events js[0, n), all of one trail and in time order, into
 * pages as version 1 does: at most page_max_events, page_max_span_us and
 * near page_target_bytes each.
 */
static int
emit_trail_pages2(Writer2 *x, const uint32_t *js, uint32_t total, TdbTrailError *err)
{
	TdbTrailWriter *w = x->w;
	int			nc = w->schema.ncolumns;
	uint32_t   *cl = malloc((size_t) (2 + nc) * sizeof(uint32_t));
	int			rc = 0;

	if (cl == NULL)
		rc = TDB_TRAIL_ENOMEM;
	for (uint32_t s = 0; rc == 0 && s < total;)
	{
		uint32_t	n = total - s < w->opts.page_max_events ? total - s : w->opts.page_max_events;
		TdbTrailPageInfo pi;

		if (w->opts.page_max_span_us > 0)
		{
			int64_t		t0 = w->ev[x->idx[js[s]]].time;

			for (uint32_t k = 1; k < n; k++)
				if ((uint64_t) w->ev[x->idx[js[s + k]]].time - (uint64_t) t0 > (uint64_t) w->opts.page_max_span_us)
				{
					n = k;
					break;
				}
		}
		/* shrink until the page fits the target (a single event always fits) */
		for (int tries = 0;; tries++)
		{
			if (!encode_page2(x, js + s, n, cl, &pi))
			{
				rc = TDB_TRAIL_ENOMEM;
				break;
			}
			if (pi.length <= w->opts.page_target_bytes || n == 1 || tries == 8)
				break;
			n = (uint32_t) ((uint64_t) n * w->opts.page_target_bytes / pi.length);
			if (n == 0)
				n = 1;
		}
		if (rc == 0)
			rc = emit_page2(x, js + s, n, err);
		s += n;
	}
	free(cl);
	return rc;
}

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

/*
 * A trail's consecutive events in one time bucket and one cell: sorted
 * events [start, start + n).
 */
typedef struct Segment
{
	int64_t		bucket;
	uint64_t	hkey;			/* Hilbert index of the segment's cell */
	uint32_t	trail;
	uint32_t	start;
	uint32_t	n;
	uint32_t	bytes;			/* encoded alone */
} Segment;

/* Cells of the space-time order: a 256 x 256 grid over the file's extent. */
#define CELL_SHIFT 8

static int
segment_cmp(const void *a, const void *b)
{
	const Segment *x = a,
			   *y = b;

	if (x->bucket != y->bucket)
		return x->bucket < y->bucket ? -1 : 1;
	if (x->hkey != y->hkey)
		return x->hkey < y->hkey ? -1 : 1;
	return (x->trail > y->trail) - (x->trail < y->trail);
}

static int
js_cmp(const void *a, const void *b)
{
	uint32_t	x = *(const uint32_t *) a,
				y = *(const uint32_t *) b;

	return (x > y) - (x < y);
}

static int64_t
floor_div(int64_t a, int64_t b)
{
	int64_t		q = a / b;

	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/*
 * Emit the segments seg[0, n) as one page.  Sorted positions are in (trail,
 * time, arrival) order, so sorting the page's positions gives each trail
 * one run, its events (from several cells) in time order.
 */
static int
emit_segments(Writer2 *x, const Segment *seg, uint32_t n, TdbTrailError *err)
{
	uint32_t	m = 0;

	for (uint32_t i = 0; i < n; i++)
		for (uint32_t k = 0; k < seg[i].n; k++)
			x->page_idx[m++] = seg[i].start + k;
	qsort(x->page_idx, m, sizeof(uint32_t), js_cmp);
	return emit_page2(x, x->page_idx, m, err);
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
 * Space-time order: events are cut into segments (one trail's consecutive
 * events in one time bucket and one cell of a 256 x 256 grid over the
 * file's extent), the segments of a bucket are laid out along a Hilbert
 * curve by cell, and consecutive segments share a page up to the target
 * size and event count; a segment larger than a page gets pages of its
 * own.  A page never mixes buckets; a trail's segments in one page form
 * one run.  So a page covers a few neighbouring cells of one bucket, and a
 * window or an area reads few pages.
 */
static int
emit_spacetime(Writer2 *x, TdbTrailError *err)
{
	TdbTrailWriter *w = x->w;
	int64_t		bucket_us = w->opts.bucket_us;
	Segment    *seg = NULL;
	uint64_t	nseg = 0,
				cap = 0;
	int32_t		gx0 = INT32_MAX,
				gy0 = INT32_MAX,
				gx1 = INT32_MIN,
				gy1 = INT32_MIN;
	uint32_t   *cl = malloc((size_t) (2 + w->schema.ncolumns) * sizeof(uint32_t));
	uint32_t   *js = malloc((w->n ? w->n : 1) * sizeof(uint32_t));
	int			rc = 0;

	if (cl == NULL || js == NULL)
	{
		rc = TDB_TRAIL_ENOMEM;
		goto out;
	}
	for (uint64_t j = 0; j < w->n; j++)
	{
		const WEvent *e = &w->ev[x->idx[j]];

		js[j] = (uint32_t) j;
		if (e->lon < gx0) gx0 = e->lon;
		if (e->lon > gx1) gx1 = e->lon;
		if (e->lat < gy0) gy0 = e->lat;
		if (e->lat > gy1) gy1 = e->lat;
	}
	for (uint64_t a = 0; a < w->n;)
	{
		const WEvent *ea = &w->ev[x->idx[a]];
		int64_t		bk = floor_div(ea->time, bucket_us);
		double		wx = (double) gx1 - gx0 + 1,
					wy = (double) gy1 - gy0 + 1;
		uint64_t	cell = cell_of(ea->lon, ea->lat, gx0, gy0, wx, wy);
		uint64_t	b = a;
		Segment    *sg;

		while (b < w->n && x->tnum[b] == x->tnum[a] &&
			   floor_div(w->ev[x->idx[b]].time, bucket_us) == bk &&
			   cell_of(w->ev[x->idx[b]].lon, w->ev[x->idx[b]].lat, gx0, gy0, wx, wy) == cell)
			b++;
		if (nseg == cap)
		{
			uint64_t	nc = cap ? cap * 2 : 1024;
			Segment    *ns = realloc(seg, nc * sizeof(Segment));

			if (ns == NULL)
			{
				rc = TDB_TRAIL_ENOMEM;
				goto out;
			}
			seg = ns;
			cap = nc;
		}
		sg = &seg[nseg++];
		sg->bucket = bk;
		sg->trail = x->tnum[a];
		sg->start = (uint32_t) a;
		sg->n = (uint32_t) (b - a);
		sg->hkey = cell;
		if (!encode_page2(x, js + a, sg->n, cl, &(TdbTrailPageInfo) {0}))
		{
			rc = TDB_TRAIL_ENOMEM;
			goto out;
		}
		sg->bytes = (uint32_t) x->tmp.len;
		a = b;
	}
	qsort(seg, nseg, sizeof(Segment), segment_cmp);

	for (uint64_t i = 0; i < nseg && rc == 0;)
	{
		uint64_t	k = i;
		uint64_t	bytes = 0,
					events = 0;

		if (seg[i].bytes > w->opts.page_target_bytes || seg[i].n > w->opts.page_max_events)
		{
			/* a segment larger than a page: cut it alone, by size and count */
			rc = emit_trail_pages2(x, js + seg[i].start, seg[i].n, err);
			i++;
			continue;
		}
		while (k < nseg && seg[k].bucket == seg[i].bucket &&
			   seg[k].bytes <= w->opts.page_target_bytes && seg[k].n <= w->opts.page_max_events &&
			   (k == i || (bytes + seg[k].bytes <= w->opts.page_target_bytes &&
						   events + seg[k].n <= w->opts.page_max_events)))
		{
			bytes += seg[k].bytes;
			events += seg[k].n;
			k++;
		}
		rc = emit_segments(x, seg + i, (uint32_t) (k - i), err);
		i = k;
	}

out:
	free(seg);
	free(cl);
	free(js);
	return rc;
}

int
trail_writer_finish2(TdbTrailWriter *w, uint32_t *idx, uint8_t **bufp, size_t *lenp,
			   TdbTrailError *err)
{
	Writer2		x;
	int			nc = w->schema.ncolumns;
	uint32_t	ntrails = 0;
	uint32_t   *lists = NULL;
	uint8_t		hdr[TDB_TRAIL_HEADER_SIZE];
	TdbTrailTrailer t;
	int			rc = TDB_TRAIL_ENOMEM;

	memset(&x, 0, sizeof(x));
	x.w = w;
	x.idx = idx;
	codec_buf_init(&x.out);
	codec_buf_init(&x.tmp);
	x.f.version = (uint16_t) w->opts.version;
	x.f.order = w->opts.order;
	x.f.bucket_us = w->opts.order == TDB_TRAIL_ORDER_SPACETIME ? w->opts.bucket_us : 0;
	x.f.schema = w->schema;
	x.f.nstrings = w->lexicon.n;
	x.f.strings = w->lexicon.strs;

	/* trail numbers in id order */
	x.tnum = malloc((w->n ? w->n : 1) * sizeof(uint32_t));
	x.page_idx = malloc((w->n ? w->n : 1) * sizeof(uint32_t));
	if (x.tnum == NULL || x.page_idx == NULL)
		goto done;
	for (uint64_t j = 0; j < w->n; j++)
	{
		if (j > 0 && w->ev[idx[j]].key != w->ev[idx[j - 1]].key)
			ntrails++;
		x.tnum[j] = ntrails;
	}
	if (w->n > 0)
		ntrails++;
	x.f.ntrails = ntrails;
	x.f.trails = calloc(ntrails ? ntrails : 1, sizeof(TdbTrailInfo));
	x.tstats = calloc((size_t) (ntrails ? ntrails : 1) * (nc ? nc : 1), sizeof(TdbTrailStats));
	if (x.f.trails == NULL || x.tstats == NULL)
		goto done;
	for (uint64_t j = 0; j < w->n; j++)
		if (j == 0 || x.tnum[j] != x.tnum[j - 1])
		{
			TdbTrailInfo *ti = &x.f.trails[x.tnum[j]];

			if (w->schema.id_type == TDB_TRAIL_STRING)
				ti->key.s = w->keys.strs[w->ev[idx[j]].key];
			else
				ti->key.i = w->ev[idx[j]].key;
			ti->tmin = INT64_MAX;
			ti->tmax = INT64_MIN;
			ti->xmin = ti->ymin = INT32_MAX;
			ti->xmax = ti->ymax = INT32_MIN;
			ti->stats = &x.tstats[(size_t) x.tnum[j] * nc];
		}

	memset(hdr, 0, sizeof(hdr));
	memcpy(hdr, TRAIL_HEADER_MAGIC, 8);
	codec_put_u32le(hdr + 8, (uint32_t) w->opts.version);
	codec_put_bytes(&x.out, hdr, sizeof(hdr));

	if (w->opts.order == TDB_TRAIL_ORDER_SPACETIME)
		rc = emit_spacetime(&x, err);
	else
	{
		rc = 0;
		for (uint64_t a = 0; a < w->n && rc == 0;)
		{
			uint64_t	b = a;

			while (b < w->n && x.tnum[b] == x.tnum[a])
			{
				x.page_idx[b] = (uint32_t) b;
				b++;
			}
			rc = emit_trail_pages2(&x, x.page_idx + a, (uint32_t) (b - a), err);
			a = b;
		}
	}
	if (rc < 0)
		goto done;
	rc = TDB_TRAIL_ENOMEM;

	/* page lists: the (trail, page) pairs grouped by trail, pages ascending */
	lists = malloc((x.npairs ? x.npairs : 1) * sizeof(uint32_t));
	if (lists == NULL)
		goto done;
	{
		uint64_t	at = 0;

		for (uint32_t k = 0; k < ntrails; k++)
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
		for (uint32_t k = 0; k < ntrails; k++)
			x.f.trails[k].first_page = x.f.trails[k].page_list[0];
	}
	x.f.nevents = w->n;

	memset(&t, 0, sizeof(t));
	x.f.data_end = x.out.len;
	if (x.f.version >= 3)
		trail_footer3_encode(&x.out, &x.f, &t);	/* chunks, then the head the trailer names */
	else
	{
		t.footer_offset = x.out.len;
		x.tmp.len = 0;
		trail_footer2_encode(&x.tmp, &x.f);
		if (!x.tmp.ok)
			goto done;
		t.footer_length = x.tmp.len;
		t.footer_crc = tdb_crc32c(x.tmp.data, x.tmp.len);
		codec_put_bytes(&x.out, x.tmp.data, x.tmp.len);
	}
	if (!x.out.ok)
		goto done;
	t.file_size = x.out.len + TDB_TRAIL_TRAILER_SIZE;
	t.version = x.f.version;
	if (codec_buf_reserve(&x.out, TDB_TRAIL_TRAILER_SIZE))
	{
		trail_trailer_encode(x.out.data + x.out.len, &t);
		x.out.len += TDB_TRAIL_TRAILER_SIZE;
	}
	if (!x.out.ok)
		goto done;
	*bufp = x.out.data;
	*lenp = x.out.len;
	codec_buf_init(&x.out);
	rc = 0;

done:
	for (uint32_t p = 0; p < x.f.npages; p++)
	{
		free((void *) x.f.pages[p].chunk_len);
	}
	free(x.f.pages);
	free(x.f.trails);
	free(x.tstats);
	free(x.tnum);
	free(x.page_idx);
	free(x.pairs);
	free(lists);
	codec_buf_free(&x.out);
	codec_buf_free(&x.tmp);
	return rc;
}
