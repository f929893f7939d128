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
 * doubles while the scan keeps going (a lookup by id: at least 256 kB),
 * and starts at one page under a small LIMIT.  A page cache (pagecache.c)
 * carries decoded pages from scan to scan: a page found there is neither
 * fetched nor decoded, and a lookup of a join given one asks for all its
 * other pages at once (one round of concurrent requests).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "pagecache.h"
#include "pager.h"
#include "reader_open.h"
#include "reader_stage.h"

#define READAHEAD_MAX_PAGES 1024
#define READAHEAD_MAX_BYTES (32u << 20)
/* a version-3 footer (head, chunks, lexicon) a scan by time or area reads whole at once */
#define SMALL_FOOTER_BYTES (64u << 10)
/*
 * A lookup by trail id (a join's rescans) also takes pages into a window
 * until it holds this many bytes (small pages: a trail of several pages is
 * one announcement, one range GET), except under a small LIMIT.  Other scans
 * keep the 4-page start: a LIMIT the FDW cannot push still stops early.
 */
#define READAHEAD_MIN_BYTES (256u << 10)
#define READAHEAD_MAX_RANGES 2048

struct TdbTrailScan
{
	TdbTrailReader *r;
	TdbTrailQuery q;
	bool		has_bbox;
	int32_t		qxmin, qymin, qxmax, qymax;	/* the box in fixed point */
	uint8_t    *want;			/* ids given: a byte per trail, 1 if asked for */
	bool		need_position;	/* lon/lat chunks read (asked for, or a box) */
	uint32_t   *pages;			/* candidate pages after pruning, file order */
	uint32_t	npages;
	uint32_t	next;			/* next index into pages to read */
	uint32_t	prefetched;		/* pages[0, prefetched) asked for */
	uint32_t	window;			/* read-ahead in pages */
	uint64_t	window_min_bytes;	/* ... and at least this many bytes */
	bool		ahead;			/* next window asked for halfway through the last */
	bool		ahead_now;		/* ... this one (it fits the cache twice) */
	uint32_t	last_npg;		/* the last window's pages */
	TdbTrailPage page;			/* the scan's own decoded page */
	const TdbTrailPage *cur;	/* the page read: &page, or the page cache's */
	uint32_t	cur_page;		/* its number */
	uint32_t	cur_event;
	bool		have_page;
	uint8_t    *buf;
	size_t		bufcap;
	TrailStage	stage;			/* version 6: a window's chunks, when the cache cannot hold them */
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

/* Page k of a trail's pages, in file order. */
static inline uint32_t
trail_page(const TdbTrailInfo *ti, uint32_t k)
{
	return ti->page_list ? ti->page_list[k] : ti->first_page + k;
}

static int
trail_order(const void *a, const void *b)
{
	uint32_t	x = *(const uint32_t *) a,
				y = *(const uint32_t *) b;

	return (x > y) - (x < y);
}

static bool union_reads_all(TdbTrailReader *r, const TdbTrailQuery *q);

/*
 * A lookup of a join (a page cache, trail ids, more lookups expected):
 * its first window fetches the union's pages (prefetch_union) when its
 * page cache has not seen the file yet.
 */
static bool
union_lookup(const TdbTrailQuery *q)
{
	return q->page_cache != NULL && q->nids > 0 && q->lookups_expected > 1;
}

/* Whether a scan skipping these columns decodes a string column (and needs the lexicon). */
static bool
reads_strings(const TdbTrailFooter *f, uint64_t skip_columns)
{
	for (int c = 0; c < f->schema.ncolumns; c++)
		if (f->schema.columns[c].type == TDB_TRAIL_STRING && !(c < 64 && (skip_columns >> c) & 1))
			return true;
	return false;
}

int
tdb_trail_scan_begin(TdbTrailReader *r, const TdbTrailQuery *q, TdbTrailScan **out,
					 TdbTrailError *err)
{
	const TdbTrailFooter *f = r->footer;
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
	s->need_position = !q->skip_position || q->has_bbox;
	/*
	 * Read-ahead: under a small LIMIT one page at a time; when the caller
	 * may stop early, 4 pages doubling; else every page at once (bounded by
	 * READAHEAD_MAX_*).  Measured on the ADS-B box of issue 33 (0.3 M
	 * reports, 168 of 518 pages, MinIO behind bench/trails_parquet.py's
	 * proxy): windows 4, 8, .. 128 took 20 GETs and 72 ms, every page at
	 * once with gaps bridged 15 GETs and 62 ms (decoding alone: 27 ms).
	 */
	s->window = q->limit > 0 && q->limit < 1000 ? 1 : q->may_stop_early ? 4 : READAHEAD_MAX_PAGES;
	/* a lookup with a page cache (a join): its missing pages in one round */
	if (q->page_cache != NULL && q->nids > 0 && s->window > 1)
		s->window = READAHEAD_MAX_PAGES;
	/* a lookup by id reads all its trails' pages: no reason to fetch them in two goes */
	s->window_min_bytes = q->nids > 0 && !(q->limit > 0 && q->limit < 1000) ? READAHEAD_MIN_BYTES : 0;
	/* reading every page: the next window asked for halfway through the last (scan_prefetch) */
	s->ahead = s->window == READAHEAD_MAX_PAGES && q->nids == 0;
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
		TdbTrailFooter *lf = trail_lazy_footer(r);
		int			rc = 0;

		/*
		 * The lexicon, which decoding a string column needs, in the same read
		 * as the first footer chunks rather than after the pages: a round trip
		 * less (one vessel of the US coast's AIS: 5 one after the other before).
		 */
		bool		lex = lf && reads_strings(f, q->skip_columns);

		/*
		 * The first lookup of a join whose first window will load every trail
		 * and page entry (prefetch_union, a small file): all of them now, in
		 * one read with this lookup's own, not one read for its trail chunk,
		 * one for its page chunks, then one per kind for the rest.
		 */
		if (lf && union_lookup(q) && !trail_page_cache_seen(q->page_cache, f) && union_reads_all(r, q))
			rc = trail_footer3_load_entries_all(lf, 0, lex, trail_reader_read, r->pager, err);
		if (lf && rc == 0)		/* version 3: the trail chunks of every id, in one batch */
			rc = trail_need_ids_lex(r, q->ids_int, q->ids_str, q->nids, 0, lex, err);
		for (int k = 0; k < q->nids && rc >= 0; k++)
		{
			int			t;

			if (f->schema.id_type == TDB_TRAIL_STRING)
				t = tdb_trail_lookup(r, 0, q->ids_str[k], err);
			else
				t = tdb_trail_lookup(r, q->ids_int[k], NULL, err);
			if (t >= 0)
				trails[ntr++] = (uint32_t) t;
			else if (t < -1)
				rc = t;
		}
		if (rc < 0)
		{
			free(trails);
			free(s);
			return rc;
		}
		qsort(trails, ntr, sizeof(uint32_t), trail_order);
	}

	/*
	 * Version 3, a full scan (no id, time or box): every chunk is needed, so
	 * all of them at once, in one GET that extends the tail down to them;
	 * read window by window, the last page block reached into chunks already
	 * read exactly and fetched their bytes again (6.9-47 kB of a 2.7 MB file:
	 * test_s3_full_scan_fetches_each_byte_once, in both page orders).  Not
	 * with a LIMIT, which may stop after a page or two.
	 */
	if (q->nids == 0 && !q->has_time && !q->has_bbox && q->limit == 0 && !q->may_stop_early &&
		trail_lazy_footer(r))
	{
		int			rc = trail_need_everything(r, false, err);

		if (rc < 0)
		{
			free(trails);
			free(s);
			return rc;
		}
	}

	/*
	 * Candidates: with ids, the pages of those trails whose zone maps meet
	 * the query (a page of several trails once); without, every page whose
	 * zone map meets it.  Either way in file order.
	 */
	{
		uint64_t	cand = 0;

		if (q->nids > 0)
		{
			for (uint32_t k = 0; k < ntr; k++)
				if (k == 0 || trails[k] != trails[k - 1])
					cand += f->trails[trails[k]].npages;
		}
		else
			cand = f->npages;
		s->pages = malloc((cand + 1) * sizeof(uint32_t));
		if (q->nids > 0)
			s->want = calloc(f->ntrails + 1, 1);
		if (s->pages == NULL || (q->nids > 0 && s->want == NULL))
		{
			free(trails);
			free(s->pages);
			free(s);
			return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
		}
		s->stats.pages_candidate = cand;
	}
	if (q->nids > 0)
	{
		bool		sorted = true;

		for (uint32_t k = 0; k < ntr; k++)
		{
			const TdbTrailInfo *ti = &f->trails[trails[k]];

			if (k > 0 && trails[k] == trails[k - 1])
				continue;
			s->want[trails[k]] = 1;
			if (!zone_hits(s, ti->tmin, ti->tmax, ti->xmin, ti->ymin, ti->xmax, ti->ymax))
				continue;
			for (uint32_t j = 0; j < ti->npages; j++)
			{
				uint32_t	p = trail_page(ti, j);

				if (s->npages > 0 && p <= s->pages[s->npages - 1])
					sorted = false;
				s->pages[s->npages++] = p;
			}
		}
		/* version 3: their page entries, the chunks holding them in one batch */
		if (trail_lazy_footer(r))
		{
			int			rc = trail_footer3_load_entries(trail_lazy_footer(r), TRAIL3_PAGES, s->pages,
														s->npages, trail_reader_read, r->pager, err);

			/* each trail's page list against its pages' entries */
			for (uint32_t k = 0; k < ntr && rc == 0; k++)
				if ((k == 0 || trails[k] != trails[k - 1]) &&
					zone_hits(s, f->trails[trails[k]].tmin, f->trails[trails[k]].tmax,
							  f->trails[trails[k]].xmin, f->trails[trails[k]].ymin,
							  f->trails[trails[k]].xmax, f->trails[trails[k]].ymax))
					rc = trail_footer3_trail_ready(f, trails[k], err);

			if (rc < 0)
			{
				free(trails);
				free(s->want);
				free(s->pages);
				free(s);
				return rc;
			}
		}
		{
			uint32_t	m = 0;

			for (uint32_t k = 0; k < s->npages; k++)
			{
				const TdbTrailPageInfo *pi = &f->pages[s->pages[k]];

				if (zone_hits(s, pi->tmin, pi->tmax, pi->xmin, pi->ymin, pi->xmax, pi->ymax))
					s->pages[m++] = s->pages[k];
			}
			s->npages = m;
		}
		if (!sorted)
		{
			/* pages shared by several trails asked for: file order, once */
			uint32_t	m = 0;

			qsort(s->pages, s->npages, sizeof(uint32_t), trail_order);
			for (uint32_t k = 0; k < s->npages; k++)
				if (m == 0 || s->pages[k] != s->pages[m - 1])
					s->pages[m++] = s->pages[k];
			s->npages = m;
		}
	}
	else if (trail_lazy_footer(r))
	{
		/* version 3: the page chunks whose zone maps meet the query, in one batch */
		uint32_t	nch = trail_footer3_nchunks(f, TRAIL3_PAGES),
					m = 0;
		int			rc = 0;

		for (uint32_t j = 0; j < nch; j++)
		{
			uint32_t	first,
						count;
			int64_t		tmin,
						tmax;
			int32_t		box[4];

			trail_footer3_chunk(f, TRAIL3_PAGES, j, &first, &count, &tmin, &tmax, box);
			if (zone_hits(s, tmin, tmax, box[0], box[1], box[2], box[3]))
				for (uint32_t p = first; p < first + count; p++)
					s->pages[m++] = p;
		}

		/*
		 * A small footer, or chunks of 7/8 of the pages or more and no LIMIT:
		 * all of it (but version 5's summary chunks, which no scan reads) in
		 * the GET that brings the page chunks, the trail chunks
		 * the pages name with them (a window of the 0.3 M ADS-B set: 8.5 kB
		 * of page chunks, then 17.9 kB of trail chunks; a box over a week of
		 * New York Harbor AIS: 103 kB, then 9.6 kB; one round trip each now)
		 */
		if (tdb_pager_size(r->pager) - trail_footer3_entries_off(f) <= SMALL_FOOTER_BYTES ||
			(m > 0 && q->limit == 0 && !q->may_stop_early && 8 * (uint64_t) (f->npages - m) <= f->npages))
			rc = tdb_pager_extend_tail(r->pager, trail_footer3_entries_off(f), err);
		/* and the lexicon, when strings are decoded: not after the pages, a round trip more */
		if (rc == 0)
			rc = trail_footer3_load_entries_lex(trail_lazy_footer(r), TRAIL3_PAGES, s->pages, m,
												reads_strings(f, q->skip_columns), trail_reader_read,
												r->pager, err);
		if (rc < 0)
		{
			free(trails);
			free(s->pages);
			free(s);
			return rc;
		}
		for (uint32_t k = 0; k < m; k++)
		{
			const TdbTrailPageInfo *pi = &f->pages[s->pages[k]];

			if (zone_hits(s, pi->tmin, pi->tmax, pi->xmin, pi->ymin, pi->xmax, pi->ymax))
				s->pages[s->npages++] = s->pages[k];
		}
	}
	else
		for (uint32_t p = 0; p < f->npages; p++)
		{
			const TdbTrailPageInfo *pi = &f->pages[p];

			if (zone_hits(s, pi->tmin, pi->tmax, pi->xmin, pi->ymin, pi->xmax, pi->ymax))
				s->pages[s->npages++] = p;
		}
	s->stats.pages_pruned = s->stats.pages_candidate > s->npages ?
		s->stats.pages_candidate - s->npages : 0;
	free(trails);
	/* the scan announces its pages (scan_prefetch): nothing blind */
	tdb_pager_hinted(r->pager, true);
	/* one window of every page: its gaps bridged as a long scan's later windows are */
	if (s->window == READAHEAD_MAX_PAGES && q->nids == 0)
		tdb_pager_bridge_widest(r->pager);
	*out = s;
	return 0;
}

/* The byte ranges of a page this scan reads, and (pos) where each lies in the page (page2.c). */
static int
page_ranges(const TdbTrailScan *s, uint32_t pageno, TdbByteRange *out, uint32_t *pos)
{
	return trail_page_ranges(s->r->footer, pageno, s->need_position, s->q.skip_columns, out, pos);
}

/*
 * The union's least expected share of the candidate pages: at most three
 * times the bytes the lookups need, in a round of long GETs rather than a
 * GET per lookup (issue 33: 100 lookups of a 200-trail file needed 39 % of
 * its pages and made 103 GETs, 3.9x DuckDB's time; it was 0.8 before).
 */
#define UNION_MIN_SHARE		(1.0 / 3)

/*
 * A round trip's worth in bytes, counted low: a GET cost about as much as
 * 300 kB more in one on 2 cores where MinIO runs too (bench/trailbench's
 * box on 5.4 M reports: 245 GETs of 79 MB against 11 of 85 MB; pager.c's
 * bridge_gaps), more on a network farther away; 64 kB keeps the bytes a
 * join may fetch for nothing small.  A join of L lookups whose file holds
 * at most L - 1 times this in pages reads them all at its first lookup,
 * whatever share it needs, rather than a round trip per lookup: 100
 * lookups of the US-coast AIS file (1.4 MB) made 56 GETs one after the
 * other, 125 ms against DuckDB's 30 ms for its whole Parquet file, and
 * 30 ms in 7 GETs read at once (bench/trails_parquet.sh q8).
 */
#define UNION_GET_BYTES		(64u << 10)

/*
 * Whether the first lookup of a join (q: lookups expected) reads every page
 * of the file at once: they fit the pager's room and are fewer bytes than
 * the later lookups' round trips are worth.
 */
static bool
union_reads_all(TdbTrailReader *r, const TdbTrailQuery *q)
{
	const TdbTrailFooter *f = r->footer;
	uint64_t	room = tdb_pager_prefetch_room(r->pager);

	return room > 0 && f->ntrails > 0 && q->lookups_expected > 1 && f->data_end <= room &&
		f->data_end <= ((uint64_t) q->lookups_expected - 1) * UNION_GET_BYTES;
}

/*
 * The first lookup of a join (a page cache, trail ids, lookups expected)
 * fetches now, in as few rounds of concurrent requests as the pager's room
 * allows (else nothing), rather than a round per lookup: when the caller
 * knows every lookup's id (q.union_ids: a VALUES list) and their pages are
 * under UNION_MIN_SHARE of the file's, those pages' needed chunks; else
 * when the lookups' pages are expected to be that share of the candidates
 * (a page of k of T trails is needed by one of L random lookups with
 * probability 1 - (1 - k/T)^L) or the file is small (UNION_GET_BYTES), all.
 */
static int
prefetch_union(TdbTrailScan *s, TdbTrailError *err)
{
	const TdbTrailFooter *f = s->r->footer;
	uint64_t	room = tdb_pager_prefetch_room(s->r->pager);
	uint64_t	bs = tdb_pager_block_size(s->r->pager);
	uint32_t   *k;
	double		expect = 0,
				cand = 0;
	uint64_t	blocks = 0,
				last_block = UINT64_MAX;
	TdbByteRange *ranges = NULL;
	size_t		cap = 0;
	int			n = 0,
				rc = 0;
	bool		small;
	TdbTrailScan *u = NULL;		/* the known ids' own scan: their candidate pages */
	bool		exact = false;

	if (room == 0 || f->ntrails == 0)
		return 0;
	small = union_reads_all(s->r, &s->q);
	if (s->q.union_nids > 0 && !small)
	{
		TdbTrailQuery uq = s->q;

		uq.ids_int = s->q.union_ids_int, uq.ids_str = s->q.union_ids_str, uq.nids = s->q.union_nids;
		uq.union_nids = 0, uq.page_cache = NULL, uq.lookups_expected = 0, uq.limit = 0;
		/* version 3: it loads the entries of those ids and their pages only */
		if ((rc = tdb_trail_scan_begin(s->r, &uq, &u, err)) < 0)
			return rc;
		/* a third of the file's pages or more: all, in fewer and longer GETs (100 of 200
		 * flights, 0.3 M reports: 33 GETs of 4.0 MB for their own, 9 of 4.7 MB for all) */
		if (u->npages >= UNION_MIN_SHARE * f->npages)
		{
			tdb_trail_scan_end(u);
			u = NULL;
			small = true;
		}
	}
	/* version 3, all pages: every trail and page entry, when the lookups would load most anyway or it is small */
	if (u == NULL && trail_lazy_footer(s->r) &&
		((!small && 1 - pow(1 - 1.0 / trail_footer3_nchunks(f, TRAIL3_TRAILS), (double) s->q.lookups_expected) < 0.8) ||
		 (rc = tdb_trail_need_trails(s->r, 0, f->ntrails, err)) < 0 ||
		 (rc = tdb_trail_need_pages(s->r, 0, f->npages, err)) < 0))
		return rc;
	if ((k = calloc(f->npages + 1, sizeof(uint32_t))) == NULL)
	{
		tdb_trail_scan_end(u);
		return 0;
	}
	for (uint32_t i = 0; u != NULL && i < u->npages; i++)
		k[u->pages[i]] = 1;
	for (uint32_t t = 0; u == NULL && t < f->ntrails; t++)
		for (uint32_t j = 0; j < f->trails[t].npages; j++)
			k[trail_page(&f->trails[t], j)]++;
	for (uint32_t p = 0; p < f->npages; p++)
	{
		const TdbTrailPageInfo *pi = &f->pages[p];

		if (k[p] == 0 || !zone_hits(s, pi->tmin, pi->tmax, pi->xmin, pi->ymin, pi->xmax, pi->ymax))
		{
			k[p] = 0;
			continue;
		}
		cand++;
		expect += u != NULL ? 1 : 1 - pow(1 - (double) k[p] / f->ntrails, (double) s->q.lookups_expected);
	}
	exact = u != NULL;
	tdb_trail_scan_end(u);
	if (cand == 0 || (expect < UNION_MIN_SHARE * cand && !small))
	{
		free(k);
		return 0;				/* the lookups' own pages, each lookup in its turn */
	}
	/* every candidate page's needed chunks, merged, while the blocks they span fit */
	for (uint32_t p = 0; p < f->npages && blocks * bs <= room; p++)
	{
		TdbByteRange pr[2 + TDB_TRAIL_MAX_COLUMNS];
		int			npr;

		if (k[p] == 0 || trail_page_cache_has(s->q.page_cache, f, p, s->need_position, s->q.skip_columns))
			continue;
		npr = page_ranges(s, p, pr, NULL);
		if ((size_t) n + npr > cap)
		{
			TdbByteRange *nr = realloc(ranges, sizeof(TdbByteRange) * (cap = cap * 2 + npr + 64));

			if (nr == NULL)
			{
				blocks = UINT64_MAX / bs;	/* out of memory: no union, each lookup its own */
				break;
			}
			ranges = nr;
		}
		for (int i = 0; i < npr; i++)
		{
			uint64_t	b0 = pr[i].off / bs,
						b1 = (pr[i].off + pr[i].len - 1) / bs;

			blocks += b1 - b0 + 1 - (b0 == last_block);
			last_block = b1;
			trail_range_add(ranges, &n, pr[i], 2 + f->schema.ncolumns);
		}
	}
	free(k);
	if (n > 0 && blocks * bs <= room)
	{
		/* the known ids' pages: their gaps bridged, fewer GETs for at most half as many bytes more */
		if (exact)
			tdb_pager_bridge_widest(s->r->pager);
		for (int i = 0; i < n && rc == 0; i += READAHEAD_MAX_RANGES)
			rc = tdb_pager_prefetch(s->r->pager, ranges + i,
									n - i < READAHEAD_MAX_RANGES ? n - i : READAHEAD_MAX_RANGES, err);
		if (rc == 0)
		{
			s->stats.union_prefetched = true;
			s->stats.union_exact = exact;
		}
	}
	free(ranges);
	return rc < 0 ? rc : 0;
}

/*
 * Version 3: the trail chunks of the next window's pages (the first and
 * last trail of each), fetched at once rather than page by page.
 */
static int
window_trails(TdbTrailScan *s, TdbTrailError *err)
{
	TdbTrailFooter *lf = trail_lazy_footer(s->r);
	uint32_t	n = 0,
				end = s->prefetched + s->window < s->npages ? s->prefetched + s->window : s->npages;
	uint32_t   *t = malloc(2 * (size_t) (end - s->prefetched + 1) * sizeof(uint32_t));
	int			rc;

	if (t == NULL)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	for (uint32_t k = s->prefetched; k < end; k++, n += 2)
		trail_footer3_page_trails(lf, s->pages[k], &t[n], &t[n + 1]);
	rc = trail_footer3_load_entries(lf, TRAIL3_TRAILS, t, n, trail_reader_read, s->r->pager, err);
	free(t);
	return rc;
}

/*
 * Version 6: whether the scan reads the window's chunks itself, a column's
 * run at a time (reader_stage.c), rather than announcing them: when they
 * span more blocks than the memory cache has room for.  Its pages read one
 * by one would jump from column to column, and without a cache to keep the
 * blocks fetch one for each chunk (a full scan of an 80 kB file with no
 * memory cache: 577 kB in 34 GETs).
 */
static bool
stage_window(const TdbTrailScan *s, const TdbByteRange *ranges, int n)
{
	uint64_t	bs = tdb_pager_block_size(s->r->pager),
				blocks = 0;

	if (tdb_pager_is_local(s->r->pager))
		return false;
	for (int i = 0; i < n; i++)
		blocks += (ranges[i].off + ranges[i].len - 1) / bs - ranges[i].off / bs + 1;
	return blocks * bs > tdb_pager_prefetch_room(s->r->pager);
}

/* Ask the pager for the next window of candidate pages, then grow it. */
static int
scan_prefetch(TdbTrailScan *s, TdbTrailError *err)
{
	const TdbTrailFooter *f = s->r->footer;
	TdbByteRange ranges[READAHEAD_MAX_RANGES];
	int			n = 0,
				npg = 0;
	uint64_t	bytes = 0;
	int			rc;

	if (s->next == 0 && union_lookup(&s->q) && trail_page_cache_first_scan(s->q.page_cache, f) &&
		(rc = prefetch_union(s, err)) < 0)
		return rc;
	/*
	 * Reading every page: the next window asked for halfway through the last (its fetch
	 * overlaps decoding), while both fit twice in the memory cache's room (t/022: 64 kB).
	 */
	if (s->prefetched > s->next &&
		(!s->ahead_now || s->prefetched - s->next > s->last_npg / 2))
		return 0;
	s->prefetched = s->prefetched < s->next ? s->next : s->prefetched;
	if (s->prefetched >= s->npages)
		return 0;
	if (trail_lazy_footer(s->r) && (rc = window_trails(s, err)) < 0)
		return rc;
	/*
	 * Version 6 (column-major pages): every candidate page in one window.
	 * Each kind's chunks lie in a run of their own, so a window cuts every
	 * run, and a scan that reads its windows itself (stage_window: a memory
	 * cache smaller than a window) fetched the block at each cut twice (a
	 * 97,801-byte file of 1,500 pages, no memory cache: 138,004 bytes; its
	 * version-5 twin each byte once).  The writer lays out column-major only
	 * pages of at most TDB_TRAIL_COLMAJOR_MAX_BYTES, so this window is that
	 * small; a larger file claiming version 6 is bounded by the bytes and
	 * ranges below like any other.
	 */
	while (s->prefetched < s->npages &&
		   (f->version >= 6 ||
			((npg < (int) s->window || bytes < s->window_min_bytes) && npg < READAHEAD_MAX_PAGES)) &&
		   bytes < READAHEAD_MAX_BYTES &&
		   n + 2 + f->schema.ncolumns <= READAHEAD_MAX_RANGES)
	{
		uint32_t	pageno = s->pages[s->prefetched++];
		TdbByteRange pr[2 + TDB_TRAIL_MAX_COLUMNS];
		int			npr;

		if (trail_page_cache_has(s->q.page_cache, f, pageno, s->need_position, s->q.skip_columns))
			continue;			/* decoded already: nothing to fetch */
		npr = page_ranges(s, pageno, pr, NULL);

		for (int k = 0; k < npr; k++)
		{
			/* merge ranges that follow each other in the file (version 6: a column's chunks) */
			trail_range_add(ranges, &n, pr[k], 2 + f->schema.ncolumns);
			bytes += pr[k].len;
		}
		npg++;
	}
	if (s->window < READAHEAD_MAX_PAGES)
		s->window *= 2;
	s->last_npg = (uint32_t) npg;
	s->ahead_now = s->ahead && 2 * bytes <= tdb_pager_prefetch_room(s->r->pager);
	if (npg <= 1 && n <= 1)
		return 0;				/* a single range gains nothing from a hint */
	s->stats.windows++;
	if (f->version >= 6 && stage_window(s, ranges, n))
		rc = trail_stage_read(&s->stage, s->r->pager, ranges, n, err);
	else
		rc = tdb_pager_prefetch(s->r->pager, ranges, n, err);
	return rc < 0 ? rc : 0;
}

static bool
event_matches(const TdbTrailScan *s, uint32_t i)
{
	const TdbTrailPage *pg = s->cur;

	if (s->want && !s->want[pg->trail[i]])
		return false;
	if (s->q.has_time && (pg->time[i] < s->q.time_from || pg->time[i] > s->q.time_to))
		return false;
	if (s->has_bbox && (pg->lon[i] < s->qxmin || pg->lon[i] > s->qxmax ||
						pg->lat[i] < s->qymin || pg->lat[i] > s->qymax))
		return false;
	return true;
}

/*
 * Version 3: before page pageno is decoded, the trails its runs may name
 * (their entries check its events and give their ids) and the lexicon if a
 * string column is read.
 */
static int
page_trails_ready(TdbTrailScan *s, uint32_t pageno, TdbTrailError *err)
{
	TdbTrailFooter *lf = trail_lazy_footer(s->r);
	uint32_t	lo,
				hi;
	int			rc;

	trail_footer3_page_trails(lf, pageno, &lo, &hi);
	if ((rc = trail_footer3_load(lf, TRAIL3_TRAILS, lo, hi + 1, 0, trail_reader_read, s->r->pager, err)) < 0 ||
		(rc = trail_footer3_page_ready(lf, pageno, err)) < 0)
		return rc;
	return reads_strings(lf, s->q.skip_columns) ? tdb_trail_need_lexicon(s->r, err) : 0;
}

/*
 * Page number pageno into s->cur: from the page cache, or fetched and
 * decoded (into the cache when the scan has one, the page holds several
 * trails and fits the cache's bound; else into s->page).
 */
static int
load_page(TdbTrailScan *s, uint32_t pageno, TdbTrailError *err)
{
	const TdbTrailFooter *f = s->r->footer;
	const TdbTrailPageInfo *pi = &f->pages[pageno];
	TdbTrailPageCache *cache = s->q.page_cache;
	int			rc;

	if (cache != NULL &&
		(s->cur = trail_page_cache_get(cache, f, pageno, s->need_position, s->q.skip_columns)) != NULL)
	{
		s->stats.pages_reused++;
		return 0;
	}
	s->cur = NULL;

	if (pi->length > s->bufcap)
	{
		uint8_t    *nb = realloc(s->buf, pi->length);

		if (nb == NULL)
			return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory for a page of %u bytes", pi->length);
		s->buf = nb;
		s->bufcap = pi->length;
	}
	{
		TdbByteRange pr[2 + TDB_TRAIL_MAX_COLUMNS];
		uint32_t	pos[2 + TDB_TRAIL_MAX_COLUMNS];
		int			npr = page_ranges(s, pageno, pr, pos);

		/* each range at its place in the page (version 6 gathers the chunks from their columns) */
		for (int k = 0; k < npr; k++)
		{
			if (!trail_stage_copy(&s->stage, pr[k].off, pr[k].len, s->buf + pos[k]) &&
				(rc = tdb_pager_read(s->r->pager, pr[k].off, pr[k].len, s->buf + pos[k], err)) < 0)
				return rc;
			s->stats.bytes_read += pr[k].len;
		}
	}
	if (trail_lazy_footer(s->r) && (rc = page_trails_ready(s, pageno, err)) < 0)
		return rc;
	/*
	 * A page of one trail (trail order, version 1) serves only lookups of
	 * that trail: not kept (PostgreSQL's Memoize serves repeated outer
	 * values), which spares the cache's allocations.
	 */
	if (cache == NULL || pi->trail != UINT32_MAX)
	{
		if ((rc = tdb_trail_page_decode_some(f, pageno, s->buf, pi->length, !s->need_position,
											 s->q.skip_columns, &s->page, err)) < 0)
			return rc;
		s->cur = &s->page;
	}
	else
	{
		TdbTrailPage fresh;

		memset(&fresh, 0, sizeof(fresh));
		if ((rc = tdb_trail_page_decode_some(f, pageno, s->buf, pi->length, !s->need_position,
											 s->q.skip_columns, &fresh, err)) < 0)
		{
			tdb_trail_page_release(&fresh);
			return rc;
		}
		s->cur = trail_page_cache_put(cache, f, pageno, s->need_position, s->q.skip_columns, &fresh);
		if (s->cur == NULL)
		{
			/* larger than the cache's bound: the scan's own, as without one */
			tdb_trail_page_release(&s->page);
			s->page = fresh;
			s->cur = &s->page;
		}
	}
	s->stats.pages_read++;
	return 0;
}

int
tdb_trail_scan_next(TdbTrailScan *s, TdbTrailEvent *ev, TdbTrailError *err)
{
	const TdbTrailFooter *f = s->r->footer;

	if (s->q.limit > 0 && s->stats.events_returned >= s->q.limit)
		return 0;
	for (;;)
	{
		if (s->have_page)
		{
			while (s->cur_event < s->cur->nevents)
			{
				uint32_t	i = s->cur_event++;
				const TdbTrailInfo *ti;

				if (!event_matches(s, i))
					continue;
				ti = &f->trails[s->cur->trail[i]];
				ev->key = ti->key;
				ev->time_us = s->cur->time[i];
				ev->lon = tdb_trail_coord_unfix(s->cur->lon[i]);
				ev->lat = tdb_trail_coord_unfix(s->cur->lat[i]);
				ev->cols = s->cur->cols;
				ev->index = i;
				s->stats.events_returned++;
				if (s->q.values_in_page)
				{
					ev->values = NULL;
					return 1;
				}
				for (int c = 0; c < f->schema.ncolumns; c++)
				{
					if (c < 64 && (s->cur->skipped >> c) & 1)
					{
						memset(&s->values[c], 0, sizeof(s->values[c]));
						s->values[c].isnull = true;
					}
					else
						s->values[c] = s->cur->cols[c][i];
				}
				ev->values = s->values;
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
	free(s->want);
	free(s->pages);
	free(s->buf);
	trail_stage_free(&s->stage);
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

	const TdbTrailFooter *f = r->footer;
	int			nc = f->schema.ncolumns;
	uint64_t   *count = NULL;
	TdbTrailStats *st = NULL;

	if ((rc = tdb_trail_need_all(r, err)) < 0)
		return rc;

	/* the footer's bytes as they are now, not the decode shared since the first open */
	if ((rc = trail_reread_footer(r, err)) < 0)
		return rc;

	memset(&q, 0, sizeof(q));
	if ((rc = tdb_trail_scan_begin(r, &q, &s, err)) < 0)
		return rc;
	/* version 2: each trail's event count and column summaries, refolded */
	if (f->version >= 2)
	{
		count = calloc(f->ntrails + 1, sizeof(uint64_t));
		st = calloc((size_t) (f->ntrails + 1) * (nc ? nc : 1), sizeof(TdbTrailStats));
		if (count == NULL || st == NULL)
		{
			tdb_trail_scan_end(s);
			free(count);
			free(st);
			return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
		}
	}
	while ((rc = tdb_trail_scan_next(s, &ev, err)) > 0)
	{
		n++;
		if (count)
		{
			uint32_t	t = s->cur->trail[s->cur_event - 1];

			count[t]++;
			for (int c = 0; c < nc; c++)
			{
				const TdbTrailValue *v = &ev.values[c];
				TdbTrailType type = f->schema.columns[c].type;
				int64_t		bits = v->i;

				if (v->isnull)
					continue;
				if (type == TDB_TRAIL_FLOAT64)
					memcpy(&bits, &v->f, 8);
				trail_stats_add(&st[(size_t) t * nc + c], type, bits);
			}
		}
	}
	tdb_trail_scan_end(s);
	for (uint32_t t = 0; rc == 0 && count && t < f->ntrails; t++)
	{
		if (count[t] != f->trails[t].nevents)
			rc = tdb_trail_fail(err, TDB_TRAIL_ECORRUPT,
								"trail %u: %llu events in pages, the footer says %llu", t,
								(unsigned long long) count[t],
								(unsigned long long) f->trails[t].nevents);
		for (int c = 0; rc == 0 && c < nc; c++)
			if (!trail_stats_equal(f->schema.columns[c].type, &st[(size_t) t * nc + c],
								   &f->trails[t].stats[c]))
				rc = tdb_trail_fail(err, TDB_TRAIL_ECORRUPT,
									"trail %u: column %s disagrees with the footer's summary of it",
									t, f->schema.columns[c].name);
	}
	free(count);
	free(st);
	if (rc < 0)
		return rc;
	if (n != r->footer->nevents)
		return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT, "%llu events in pages, the footer says %llu",
							  (unsigned long long) n, (unsigned long long) r->footer->nevents);
	if (events)
		*events = n;
	return 0;
}
