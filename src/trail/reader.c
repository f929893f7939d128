/*
 * reader.c
 *	  Opens a trail file through a pager and answers queries by trail ids,
 *	  time range and bounding box, fetching only pages whose zone maps
 *	  intersect the query.
 *
 * Zone maps only prune: every event of a fetched page is still tested
 * against the query, so results are exact whatever the page layout.  The
 * page decoder checks that events lie inside their page's zone map, so a
 * file whose zone maps lie is rejected rather than silently pruned wrong.
 *
 * Read-ahead: a scan knows the exact pages it will read, so it asks the
 * pager to fetch the next few at once (concurrent range GETs); the window
 * doubles while the scan keeps going, and starts at one page when the
 * query has a small limit, so a LIMIT 10 fetches little.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "pager.h"

#define READAHEAD_MAX_PAGES 1024
#define READAHEAD_MAX_BYTES (32u << 20)

struct TdbTrailReader
{
	TdbPager   *pager;
	TdbTrailFooter footer;
};

int
tdb_trail_open(TdbPager *pager, TdbTrailReader **out, TdbTrailError *err)
{
	uint64_t	size = tdb_pager_size(pager);
	uint8_t		tbuf[TDB_TRAIL_TRAILER_SIZE];
	TdbTrailTrailer t;
	TdbTrailReader *r;
	uint8_t    *fbuf;
	int			rc;

	*out = NULL;
	if (size < TDB_TRAIL_HEADER_SIZE + TDB_TRAIL_TRAILER_SIZE)
		return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT,
							  "not a trail file: %llu bytes is too small", (unsigned long long) size);
	if ((rc = tdb_pager_read(pager, size - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE, tbuf, err)) < 0)
		return rc;
	if ((rc = tdb_trail_trailer_decode(tbuf, sizeof(tbuf), size, &t, err)) < 0)
		return rc;
	fbuf = malloc(t.footer_length ? t.footer_length : 1);
	r = calloc(1, sizeof(*r));
	if (fbuf == NULL || r == NULL)
	{
		free(fbuf);
		free(r);
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory for a footer of %llu bytes",
							  (unsigned long long) t.footer_length);
	}
	rc = tdb_pager_read(pager, t.footer_offset, t.footer_length, fbuf, err);
	if (rc == 0)
		rc = tdb_trail_footer_decode(fbuf, t.footer_length, &t, &r->footer, err);
	free(fbuf);
	if (rc < 0)
	{
		free(r);
		return rc;
	}
	r->pager = pager;
	*out = r;
	return 0;
}

const TdbTrailFooter *
tdb_trail_footer(const TdbTrailReader *r)
{
	return &r->footer;
}

void
tdb_trail_close(TdbTrailReader *r)
{
	if (r == NULL)
		return;
	tdb_trail_footer_release(&r->footer);
	free(r);
}

struct TdbTrailScan
{
	TdbTrailReader *r;
	TdbTrailQuery q;
	bool		has_bbox;
	int32_t		qxmin, qymin, qxmax, qymax;	/* the box in fixed point */
	uint32_t   *pages;			/* candidate pages after pruning, file order */
	uint32_t	npages;
	uint32_t	next;			/* next index into pages to read */
	uint32_t	prefetched;		/* pages[0, prefetched) asked for */
	uint32_t	window;			/* read-ahead in pages */
	TdbTrailPage page;
	uint32_t	cur_page;		/* page number decoded in .page */
	uint32_t	cur_event;
	bool		have_page;
	uint8_t    *buf;
	size_t		bufcap;
	TdbTrailValue values[TDB_TRAIL_MAX_COLUMNS];
	TdbTrailScanStats stats;
};

static bool
zone_hits(const TdbTrailScan *s, int64_t tmin, int64_t tmax, int32_t xmin, int32_t ymin,
		  int32_t xmax, int32_t ymax)
{
	if (s->q.has_time && (tmax < s->q.time_from || tmin > s->q.time_to))
		return false;
	if (s->has_bbox && (xmax < s->qxmin || xmin > s->qxmax || ymax < s->qymin || ymin > s->qymax))
		return false;
	return true;
}

static int
find_trail(const TdbTrailFooter *f, const TdbTrailQuery *q, int k)
{
	uint32_t	lo = 0,
				hi = f->ntrails;

	while (lo < hi)
	{
		uint32_t	mid = lo + (hi - lo) / 2;
		const TdbTrailKey *key = &f->trails[mid].key;
		int			c;

		if (f->schema.id_type == TDB_TRAIL_STRING)
			c = strcmp(key->s, q->ids_str[k]);
		else
			c = (key->i > q->ids_int[k]) - (key->i < q->ids_int[k]);
		if (c == 0)
			return (int) mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static int
trail_order(const void *a, const void *b)
{
	uint32_t	x = *(const uint32_t *) a,
				y = *(const uint32_t *) b;

	return (x > y) - (x < y);
}

int
tdb_trail_scan_begin(TdbTrailReader *r, const TdbTrailQuery *q, TdbTrailScan **out,
					 TdbTrailError *err)
{
	const TdbTrailFooter *f = &r->footer;
	TdbTrailScan *s;
	uint32_t   *trails;
	uint32_t	ntr = 0;

	*out = NULL;
	if (q->nids < 0 || (q->nids > 0 && (f->schema.id_type == TDB_TRAIL_STRING ? q->ids_str == NULL : q->ids_int == NULL)))
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "trail ids of the wrong type for this file (id %s)",
							  f->schema.id_type == TDB_TRAIL_STRING ? "is a string" : "is an integer");
	s = calloc(1, sizeof(*s));
	trails = malloc(((q->nids > 0 ? (size_t) q->nids : f->ntrails) + 1) * sizeof(uint32_t));
	if (s == NULL || trails == NULL)
	{
		free(s);
		free(trails);
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	}
	s->r = r;
	s->q = *q;
	s->window = q->limit > 0 && q->limit < 1000 ? 1 : 4;
	if (q->has_bbox)
	{
		s->has_bbox = true;
		s->qxmin = 1;			/* matches nothing unless the box is sane */
		s->qxmax = 0;
		if (q->xmin <= q->xmax && q->ymin <= q->ymax)
		{
			/* clamp to the world; events lie on the 1e-7 grid, so round inwards */
			double		x0 = q->xmin < -180 ? -180 : q->xmin,
						x1 = q->xmax > 180 ? 180 : q->xmax;
			double		y0 = q->ymin < -90 ? -90 : q->ymin,
						y1 = q->ymax > 90 ? 90 : q->ymax;

			if (x0 <= x1 && y0 <= y1)
			{
				s->qxmin = (int32_t) ceil(x0 * TDB_TRAIL_COORD_SCALE);
				s->qxmax = (int32_t) floor(x1 * TDB_TRAIL_COORD_SCALE);
				s->qymin = (int32_t) ceil(y0 * TDB_TRAIL_COORD_SCALE);
				s->qymax = (int32_t) floor(y1 * TDB_TRAIL_COORD_SCALE);
			}
		}
	}
	if (q->nids > 0)
	{
		for (int k = 0; k < q->nids; k++)
		{
			int			t = find_trail(f, q, k);

			if (t >= 0)
				trails[ntr++] = (uint32_t) t;
		}
		qsort(trails, ntr, sizeof(uint32_t), trail_order);
	}
	else
		for (uint32_t t = 0; t < f->ntrails; t++)
			trails[ntr++] = t;

	/* count candidates first, then collect survivors of the zone maps */
	{
		uint64_t	cand = 0;

		for (uint32_t k = 0; k < ntr; k++)
			if (k == 0 || trails[k] != trails[k - 1])
				cand += f->trails[trails[k]].npages;
		s->pages = malloc((cand + 1) * sizeof(uint32_t));
		if (s->pages == NULL)
		{
			free(trails);
			free(s);
			return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
		}
		s->stats.pages_candidate = cand;
	}
	for (uint32_t k = 0; k < ntr; k++)
	{
		const TdbTrailInfo *ti = &f->trails[trails[k]];

		if (k > 0 && trails[k] == trails[k - 1])
			continue;
		if (!zone_hits(s, ti->tmin, ti->tmax, ti->xmin, ti->ymin, ti->xmax, ti->ymax))
			continue;
		for (uint32_t p = ti->first_page; p < ti->first_page + ti->npages; p++)
		{
			const TdbTrailPageInfo *pi = &f->pages[p];

			if (zone_hits(s, pi->tmin, pi->tmax, pi->xmin, pi->ymin, pi->xmax, pi->ymax))
				s->pages[s->npages++] = p;
		}
	}
	s->stats.pages_pruned = s->stats.pages_candidate - s->npages;
	free(trails);
	/* the scan announces its pages (scan_prefetch): nothing blind */
	tdb_pager_hinted(r->pager, true);
	*out = s;
	return 0;
}

/* Ask the pager for the next window of candidate pages, then grow it. */
static int
scan_prefetch(TdbTrailScan *s, TdbTrailError *err)
{
	const TdbTrailFooter *f = &s->r->footer;
	TdbByteRange ranges[READAHEAD_MAX_PAGES];
	int			n = 0,
				npg = 0;
	uint64_t	bytes = 0;
	int			rc;

	if (s->prefetched > s->next)
		return 0;
	s->prefetched = s->next;
	while (s->prefetched < s->npages && npg < (int) s->window && bytes < READAHEAD_MAX_BYTES)
	{
		const TdbTrailPageInfo *pi = &f->pages[s->pages[s->prefetched++]];

		/* merge pages that follow each other in the file */
		if (n > 0 && ranges[n - 1].off + ranges[n - 1].len == pi->offset)
			ranges[n - 1].len += pi->length;
		else
		{
			ranges[n].off = pi->offset;
			ranges[n].len = pi->length;
			n++;
		}
		bytes += pi->length;
		npg++;
	}
	if (s->window < READAHEAD_MAX_PAGES)
		s->window *= 2;
	if (npg <= 1)
		return 0;				/* a single page gains nothing from a hint */
	rc = tdb_pager_prefetch(s->r->pager, ranges, n, err);
	return rc < 0 ? rc : 0;
}

static bool
event_matches(const TdbTrailScan *s, uint32_t i)
{
	const TdbTrailPage *pg = &s->page;

	if (s->q.has_time && (pg->time[i] < s->q.time_from || pg->time[i] > s->q.time_to))
		return false;
	if (s->has_bbox && (pg->lon[i] < s->qxmin || pg->lon[i] > s->qxmax ||
						pg->lat[i] < s->qymin || pg->lat[i] > s->qymax))
		return false;
	return true;
}

/* Fetch and decode page number pageno into s->page. */
static int
load_page(TdbTrailScan *s, uint32_t pageno, TdbTrailError *err)
{
	const TdbTrailFooter *f = &s->r->footer;
	const TdbTrailPageInfo *pi = &f->pages[pageno];
	int			rc;

	if (pi->length > s->bufcap)
	{
		uint8_t    *nb = realloc(s->buf, pi->length);

		if (nb == NULL)
			return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory for a page of %u bytes", pi->length);
		s->buf = nb;
		s->bufcap = pi->length;
	}
	if ((rc = tdb_pager_read(s->r->pager, pi->offset, pi->length, s->buf, err)) < 0)
		return rc;
	if ((rc = tdb_trail_page_decode(f, pageno, s->buf, pi->length, &s->page, err)) < 0)
		return rc;
	s->stats.pages_read++;
	return 0;
}

int
tdb_trail_scan_next(TdbTrailScan *s, TdbTrailEvent *ev, TdbTrailError *err)
{
	const TdbTrailFooter *f = &s->r->footer;

	if (s->q.limit > 0 && s->stats.events_returned >= s->q.limit)
		return 0;
	for (;;)
	{
		if (s->have_page)
		{
			while (s->cur_event < s->page.nevents)
			{
				uint32_t	i = s->cur_event++;
				const TdbTrailInfo *ti;

				if (!event_matches(s, i))
					continue;
				ti = &f->trails[f->pages[s->cur_page].trail];
				ev->key = ti->key;
				ev->time_us = s->page.time[i];
				ev->lon = tdb_trail_coord_unfix(s->page.lon[i]);
				ev->lat = tdb_trail_coord_unfix(s->page.lat[i]);
				for (int c = 0; c < f->schema.ncolumns; c++)
					s->values[c] = s->page.cols[c][i];
				ev->values = s->values;
				s->stats.events_returned++;
				return 1;
			}
			s->have_page = false;
		}
		if (s->next >= s->npages)
			return 0;
		{
			int			rc = scan_prefetch(s, err);

			if (rc < 0)
				return rc;
			s->cur_page = s->pages[s->next++];
			if ((rc = load_page(s, s->cur_page, err)) < 0)
				return rc;
			s->cur_event = 0;
			s->have_page = true;
		}
	}
}

void
tdb_trail_scan_stats(const TdbTrailScan *s, TdbTrailScanStats *out)
{
	*out = s->stats;
}

void
tdb_trail_scan_end(TdbTrailScan *s)
{
	if (s == NULL)
		return;
	tdb_pager_hinted(s->r->pager, false);
	tdb_trail_page_release(&s->page);
	free(s->pages);
	free(s->buf);
	free(s);
}

int
tdb_trail_verify(TdbTrailReader *r, uint64_t *events, TdbTrailError *err)
{
	TdbTrailQuery q;
	TdbTrailScan *s;
	TdbTrailEvent ev;
	uint64_t	n = 0;
	int			rc;

	memset(&q, 0, sizeof(q));
	if ((rc = tdb_trail_scan_begin(r, &q, &s, err)) < 0)
		return rc;
	while ((rc = tdb_trail_scan_next(s, &ev, err)) > 0)
		n++;
	tdb_trail_scan_end(s);
	if (rc < 0)
		return rc;
	if (n != r->footer.nevents)
		return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT, "%llu events in pages, the footer says %llu",
							  (unsigned long long) n, (unsigned long long) r->footer.nevents);
	if (events)
		*events = n;
	return 0;
}
