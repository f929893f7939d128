/*
 * test_pagecache.c
 *	  The decoded-page cache a join's lookups share (pagecache.c): lookups
 *	  of one id each, with a cache, return exactly what they return without
 *	  one, whatever the bound (a tiny one included) and the columns each
 *	  asks for; with room for every page, the lookups together decode each
 *	  page they need once; the cache never holds more than its bound.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pager.h"
#include "trail_fixture.h"
#include "trail_unit.h"

/* The same event, the columns the query asked for compared exactly. */
static bool
same_event(const TdbTrailSchema *sc, const TdbTrailQuery *q, const TdbTrailEvent *a, const TdbTrailEvent *b)
{
	if (a->key.i != b->key.i || a->time_us != b->time_us)
		return false;
	if ((!q->skip_position) && (a->lon != b->lon || a->lat != b->lat))
		return false;
	for (int c = 0; c < sc->ncolumns; c++)
	{
		const TdbTrailValue *x = &a->values[c],
				   *y = &b->values[c];

		if ((q->skip_columns >> c) & 1)
			continue;
		if (x->isnull != y->isnull)
			return false;
		if (x->isnull)
			continue;
		if (sc->columns[c].type == TDB_TRAIL_STRING ? strcmp(x->s, y->s) != 0 :
			sc->columns[c].type == TDB_TRAIL_FLOAT64 ? memcmp(&x->f, &y->f, sizeof(double)) != 0 : x->i != y->i)
			return false;
	}
	return true;
}

/*
 * One lookup of id (its columns: proj) with cache and without: the same
 * events in the same order.  Adds the cached scan's counters to *st, the
 * plain one's pages to *plain_pages.
 */
static void
lookup_both(FxOpened *o, int64_t id, uint64_t proj, TdbTrailPageCache *cache, TdbTrailScanStats *st,
			uint64_t *plain_pages, uint64_t *rows)
{
	const TdbTrailFooter *f = tdb_trail_footer(o->r);
	TdbTrailQuery q;
	TdbTrailScan *a,
			   *b;
	TdbTrailEvent ea,
				eb;
	TdbTrailScanStats sa,
				sb;
	TdbTrailError err;
	int			ra,
				rb;

	memset(&q, 0, sizeof(q));
	q.ids_int = &id;
	q.nids = 1;
	q.skip_columns = proj & 7;
	q.skip_position = (proj >> 3) & 1;
	CHECK(tdb_trail_scan_begin(o->r, &q, &b, &err) == 0);
	q.page_cache = cache;
	CHECK(tdb_trail_scan_begin(o->r, &q, &a, &err) == 0);
	for (int guard = 0; guard < 1000000; guard++)
	{
		/* a page of the plain scan is its own: interleaving them proves nothing is shared by mistake */
		rb = tdb_trail_scan_next(b, &eb, &err);
		ra = tdb_trail_scan_next(a, &ea, &err);
		if (ra != rb)
		{
			unit_fail(__FILE__, __LINE__, "id %lld: %d against %d (%s)", (long long) id, ra, rb, err.msg);
			break;
		}
		if (ra <= 0)
			break;
		(*rows)++;
		if (!same_event(&f->schema, &q, &ea, &eb))
		{
			unit_fail(__FILE__, __LINE__, "id %lld: an event differs with the page cache", (long long) id);
			break;
		}
	}
	tdb_trail_scan_stats(a, &sa);
	tdb_trail_scan_stats(b, &sb);
	CHECK(sa.events_returned == sb.events_returned);
	CHECK(sa.pages_read + sa.pages_reused == sb.pages_read);
	CHECK(sb.pages_reused == 0);
	st->pages_read += sa.pages_read;
	st->pages_reused += sa.pages_reused;
	*plain_pages += sb.pages_read;
	tdb_trail_scan_end(a);
	tdb_trail_scan_end(b);
}

UNIT_TEST(test_trail_page_cache_lookups)
{
	uint64_t	rng = 3131;
	FxSet		s;

	fx_make(&s, &rng, false, 60, 300);
	for (int layout = 1; layout < FX_LAYOUTS; layout++)
	{
		size_t		len;
		uint8_t    *buf;
		FxOpened		o;
		const TdbTrailFooter *f;
		/* room for all, for a few pages, for less than one page, for nothing */
		size_t		bounds[4] = {64u << 20, 40u << 10, 2000, 0};

		fx_layout(layout);
		buf = fx_encode(&s, 2000, 100, &len);
		if (buf == NULL || !fx_open_buf(&o, buf, len, "pc", false, false))
		{
			unit_fail(__FILE__, __LINE__, "cannot write or open the file");
			free(buf);
			continue;
		}
		f = tdb_trail_footer(o.r);
		for (int bi = 0; bi < 4; bi++)
		{
			TdbTrailPageCache *cache = tdb_trail_page_cache_create(bounds[bi]);
			TdbTrailPageCacheStats cs;
			TdbTrailScanStats st;
			uint64_t	plain = 0,
						rows = 0,
						distinct = 0;
			uint8_t    *need = calloc(f->npages + 1, 1);

			memset(&st, 0, sizeof(st));
			CHECK(cache != NULL && need != NULL);
			if (cache == NULL || need == NULL)
			{
				free(need);
				tdb_trail_page_cache_free(cache);
				continue;
			}
			/* every other trail, in an order that jumps about, all columns */
			for (int k = 0; k < s.nkeys; k += 2)
			{
				TdbTrailError err;
				int			t;

				lookup_both(&o, s.keys_i[(k * 7) % s.nkeys], 0, cache, &st, &plain, &rows);
				/* version 3: its entry loaded (the footer is read in pieces) */
				t = tdb_trail_lookup(o.r, s.keys_i[(k * 7) % s.nkeys], NULL, &err);
				for (uint32_t j = 0; t >= 0 && j < f->trails[t].npages; j++)
				{
					uint32_t	p = f->trails[t].page_list ? f->trails[t].page_list[j] : f->trails[t].first_page + j;

					distinct += !need[p];
					need[p] = 1;
				}
			}
			tdb_trail_page_cache_stats(cache, &cs);
			CHECK(rows > 0);
			CHECK(cs.peak_bytes <= bounds[bi]);
			CHECK(cs.max_bytes == bounds[bi]);
			if (bi == 0)
			{
				/* room for every page: each page needed decoded once */
				CHECK(st.pages_read == distinct);
				CHECK(cs.evictions == 0);
				if (layout == 2)
					CHECK(plain > distinct);	/* space-time: lookups share pages */
			}
			if (bi == 3)
				CHECK(st.pages_reused == 0 && cs.pages == 0);	/* nothing fits */
			/* projections that differ: a page decoded without a column serves no scan that wants it */
			for (int k = 1; k < s.nkeys; k += 3)
				lookup_both(&o, s.keys_i[k], (uint64_t) (k % 16), cache, &st, &plain, &rows);
			tdb_trail_page_cache_stats(cache, &cs);
			CHECK(cs.peak_bytes <= bounds[bi]);
			free(need);
			tdb_trail_page_cache_free(cache);
		}
		fx_close_opened(&o);
		free(buf);
	}
	fx_free(&s);
}

/*
 * Caches sharing one pool (the FDW's: every scan node's of a backend) hold
 * together at most the bound, each giving back what it held when freed;
 * every lookup still returns what a scan without a cache returns.
 */
UNIT_TEST(test_trail_page_cache_pool)
{
	uint64_t	rng = 4242;
	FxSet		s;
	size_t		len;
	uint8_t    *buf;
	FxOpened		o;
	size_t		bound = 150u << 10,
				pool = 0;
	TdbTrailPageCache *c[3];
	TdbTrailPageCacheStats cs;
	TdbTrailScanStats st;
	uint64_t	plain = 0,
				rows = 0,
				held = 0,
				peak = 0,
				pool_peak = 0;

	fx_make(&s, &rng, false, 60, 300);
	fx_layout(2);				/* space-time: pages several trails share */
	buf = fx_encode(&s, 2000, 100, &len);
	if (buf == NULL || !fx_open_buf(&o, buf, len, "pc", false, false))
	{
		unit_fail(__FILE__, __LINE__, "cannot write or open the file");
		free(buf);
		fx_free(&s);
		return;
	}
	memset(&st, 0, sizeof(st));
	for (int i = 0; i < 3; i++)
	{
		c[i] = tdb_trail_page_cache_create(bound);
		CHECK(c[i] != NULL);
		if (c[i] == NULL)
			return;
		tdb_trail_page_cache_share(c[i], &pool);
	}
	/* the three take turns, as a 3-way join's lookups do */
	for (int k = 0; k < s.nkeys; k++)
	{
		lookup_both(&o, s.keys_i[(k * 7) % s.nkeys], 0, c[k % 3], &st, &plain, &rows);
		held = 0;
		for (int i = 0; i < 3; i++)
		{
			tdb_trail_page_cache_stats(c[i], &cs);
			held += cs.bytes;
			peak += k == s.nkeys - 1 ? cs.peak_bytes : 0;
			pool_peak = cs.pool_peak_bytes > pool_peak ? cs.pool_peak_bytes : pool_peak;
		}
		CHECK(held == pool);
		CHECK(pool <= bound);
	}
	CHECK(rows > 0);
	CHECK(st.pages_reused > 0);
	CHECK(pool_peak > 0 && pool_peak <= bound);
	CHECK(peak > bound);		/* each held a share in its turn */
	for (int i = 0; i < 3; i++)
		tdb_trail_page_cache_free(c[i]);
	CHECK(pool == 0);
	fx_close_opened(&o);
	free(buf);
	fx_free(&s);
}
