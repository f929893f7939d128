/*
 * test_footer3.c
 *	  Version 3's footer read in pieces (footer3.c, footer3_load.c): a
 *	  lookup reads its one trail chunk and its pages' chunks, whole-file
 *	  aggregates the head alone; a trail in every position of a chunk, one
 *	  trail, 100,000 trails; a damaged chunk is a clean error that leaves the
 *	  other chunks readable; lying zone maps (a chunk's, a page's) are found.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../checksum.h"
#include "footer3.h"
#include "format.h"
#include "pager.h"
#include "remote.h"
#include "trail_fixture.h"
#include "trail_unit.h"

#define T0 FX_SMALL_T0

/* Trail k: id 3k + 1, n events a second apart, pages of at most page_events. */
static uint8_t *write_v(int version, int ntrails, int n, uint32_t page_events, TdbTrailOrder order,
						size_t *len);

static uint8_t *
write3(int ntrails, int n, uint32_t page_events, TdbTrailOrder order, size_t *len)
{
	return write_v(3, ntrails, n, page_events, order, len);
}

static uint8_t *
write_v(int version, int ntrails, int n, uint32_t page_events, TdbTrailOrder order, size_t *len)
{
	return fx_write_small(version, ntrails, n, page_events, order, -1, len);
}

/* Events of trail id (all, or in a time window when from <= to); < 0: the error. */
static int64_t
scan_count(TdbTrailReader *r, const int64_t *id, int64_t from, int64_t to, TdbTrailError *err)
{
	TdbTrailQuery q;
	TdbTrailScan *s;
	TdbTrailEvent ev;
	int64_t		n = 0,
				prev = INT64_MIN;
	int			rc;

	memset(&q, 0, sizeof(q));
	if (id)
	{
		q.ids_int = id;
		q.nids = 1;
	}
	q.has_time = from <= to;
	q.time_from = from;
	q.time_to = to;
	if ((rc = tdb_trail_scan_begin(r, &q, &s, err)) < 0)
		return rc;
	while ((rc = tdb_trail_scan_next(s, &ev, err)) > 0)
	{
		if (id)
		{
			int64_t		k = (*id - 1) / 3;

			/* the event written: its trail, a second apart, its value and string */
			CHECK(ev.key.i == *id && ev.time_us > prev);
			CHECK(ev.values[0].f == k + (double) ((ev.time_us - T0 - k) / 1000000) * 0.5);
			CHECK(strcmp(ev.values[1].s, k % 2 ? "odd" : "even") == 0);
			prev = ev.time_us;
		}
		n++;
	}
	tdb_trail_scan_end(s);
	return rc < 0 ? rc : n;
}

/* The page chunks holding trail t's pages. */
static uint32_t
page_chunks_of(const TdbTrailFooter *f, uint32_t t)
{
	uint32_t	n = 0,
				nch = trail_footer3_nchunks(f, TRAIL3_PAGES);

	for (uint32_t j = 0; j < nch; j++)
	{
		uint32_t	first,
					count;
		int64_t		a,
					b;
		int32_t		box[4];
		bool		has = false;

		trail_footer3_chunk(f, TRAIL3_PAGES, j, &first, &count, &a, &b, box);
		for (uint32_t k = 0; k < f->trails[t].npages; k++)
			has |= f->trails[t].page_list[k] >= first && f->trails[t].page_list[k] < first + count;
		n += has;
	}
	return n;
}

/*
 * 131 trails (chunks of 64: two full, one of 3), 5 events each in pages of
 * 2: each trail looked up alone reads its one trail chunk and the page
 * chunks of its pages, nothing else; ids absent, before the first and after
 * the last read at most one chunk and find nothing; opening reads the head
 * alone, which answers the whole file's count and summaries.
 */
UNIT_TEST(test_trail_v3_every_chunk_position)
{
	size_t		len;
	uint8_t    *buf = write3(131, 5, 2, TDB_TRAIL_ORDER_TRAIL, &len);
	TdbTrailError err;

	CHECK(buf != NULL);
	if (buf == NULL)
		return;
	for (int k = 0; k < 131; k++)
	{
		FxOpened		o;
		int64_t		id = 3LL * k + 1;
		const TdbTrailFooter *f;
		uint32_t	nt,
					np;

		if (!fx_open_buf(&o, buf, len, "v3", false, true))
			break;
		f = tdb_trail_footer(o.r);
		CHECK(f->version == 3 && f->ntrails == 131 && f->npages == 131 * 3 && f->nevents == 655);
		trail_footer3_loaded(f, TRAIL3_TRAILS, &nt);
		trail_footer3_loaded(f, TRAIL3_PAGES, &np);
		CHECK(nt == 0 && np == 0);
		if (k == 0)
		{
			/* the whole file from the head: v from 0 to 130 + 2, both strings */
			CHECK(f->has_whole && f->whole.nevents == 655 && f->whole.stats[0].count == 655);
			CHECK(f->whole.stats[0].fmin == 0 && f->whole.stats[0].fmax == 132);
			CHECK(f->whole.stats[1].count == 655);
			CHECK(f->whole.tmin == T0 && f->whole.tmax == T0 + 4000000 + 130);
		}
		CHECK(scan_count(o.r, &id, 1, 0, &err) == 5);
		trail_footer3_loaded(f, TRAIL3_TRAILS, &nt);
		trail_footer3_loaded(f, TRAIL3_PAGES, &np);
		CHECK_EQ_U64(nt, 1);
		CHECK_EQ_U64(np, page_chunks_of(f, (uint32_t) k));
		/* a time window of its second event only */
		CHECK(scan_count(o.r, &id, T0 + 1000000 + k, T0 + 1000000 + k, &err) == 1);
		id = 3LL * k + 2;		/* between two trails */
		CHECK(scan_count(o.r, &id, 1, 0, &err) == 0);
		fx_close_opened(&o);
	}
	{
		FxOpened		o;
		int64_t		before = 0,
					after = 3 * 131 + 1;
		uint64_t	n = 0;
		uint32_t	nt;

		if (fx_open_buf(&o, buf, len, "v3", false, true))
		{
			CHECK(scan_count(o.r, &before, 1, 0, &err) == 0);
			trail_footer3_loaded(tdb_trail_footer(o.r), TRAIL3_TRAILS, &nt);
			CHECK_EQ_U64(nt, 0);
			CHECK(scan_count(o.r, &after, 1, 0, &err) == 0);	/* past the head's last id: nothing read */
			trail_footer3_loaded(tdb_trail_footer(o.r), TRAIL3_TRAILS, &nt);
			CHECK_EQ_U64(nt, 0);
			CHECK(tdb_trail_footer(o.r)->whole.key.i == 1 && tdb_trail_footer(o.r)->whole_last.i == 3 * 130 + 1);
			CHECK(scan_count(o.r, NULL, 1, 0, &err) == 655);
			CHECK(tdb_trail_verify(o.r, &n, &err) == 0);
			CHECK_EQ_U64(n, 655);
			fx_close_opened(&o);
		}
	}
	free(buf);
}

/* One trail: one event, then many; space-time order too. */
UNIT_TEST(test_trail_v3_one_trail)
{
	for (int order = 0; order < 2; order++)
		for (int n = 1; n <= 300; n += 299)
		{
			size_t		len;
			uint8_t    *buf = write3(1, n, 7, (TdbTrailOrder) order, &len);
			FxOpened		o;
			TdbTrailError err;
			int64_t		id = 1;
			uint64_t	got = 0;

			CHECK(buf != NULL);
			if (buf == NULL || !fx_open_buf(&o, buf, len, "v3", false, true))
			{
				free(buf);
				continue;
			}
			CHECK(tdb_trail_footer(o.r)->whole.nevents == (uint64_t) n);
			CHECK(scan_count(o.r, &id, 1, 0, &err) == n);
			CHECK(scan_count(o.r, NULL, T0, T0 + 1000000, &err) == (n > 1 ? 2 : 1));
			CHECK(tdb_trail_verify(o.r, &got, &err) == 0);
			CHECK_EQ_U64(got, n);
			fx_close_opened(&o);
			free(buf);
		}
}

/*
 * 100,000 trails of one event: opening reads no chunk (the head has 64
 * entries per directory), a lookup one trail chunk and one page chunk,
 * wherever the trail is; verify reads them all.
 */
UNIT_TEST(test_trail_v3_100k_trails)
{
	size_t		len;
	uint8_t    *buf = write3(100000, 1, 0, TDB_TRAIL_ORDER_TRAIL, &len);
	FxOpened		o;
	TdbTrailError err;
	/* chunks of 1,563 trails (the head keeps at most 64 per directory): five different ones */
	int64_t		ids[] = {1, 3LL * 99999 + 1, 3LL * 50000 + 1, 3LL * 10000 + 1, 3LL * 30000 + 1};
	uint32_t	nt,
				np;
	uint64_t	n = 0;

	CHECK(buf != NULL);
	if (buf == NULL || !fx_open_buf(&o, buf, len, "v3", false, true))
	{
		free(buf);
		return;
	}
	CHECK(tdb_trail_footer(o.r)->ntrails == 100000 && tdb_trail_footer(o.r)->whole.nevents == 100000);
	CHECK(trail_footer3_nchunks(tdb_trail_footer(o.r), TRAIL3_TRAILS) == 64);
	CHECK(trail_footer3_nchunks(tdb_trail_footer(o.r), TRAIL3_PAGES) == 64);
	for (int i = 0; i < 5; i++)
	{
		CHECK(scan_count(o.r, &ids[i], 1, 0, &err) == 1);
		trail_footer3_loaded(tdb_trail_footer(o.r), TRAIL3_TRAILS, &nt);
		trail_footer3_loaded(tdb_trail_footer(o.r), TRAIL3_PAGES, &np);
		CHECK_EQ_U64(nt, i + 1);	/* each in a chunk of its own */
		CHECK_EQ_U64(np, i + 1);
	}
	CHECK(tdb_trail_verify(o.r, &n, &err) == 0);
	CHECK_EQ_U64(n, 100000);
	fx_close_opened(&o);
	free(buf);
}

/* Flip a bit at off, open, and check a lookup of id: want 0 = fine, else an error naming what. */
static void
damaged(const uint8_t *good, size_t len, size_t off, const int64_t *ok_id, const int64_t *bad_id,
		const char *what)
{
	uint8_t    *bad = malloc(len);
	FxOpened		o;
	TdbTrailError err;
	uint64_t	n;

	memcpy(bad, good, len);
	bad[off] ^= 0x10;
	if (fx_open_buf(&o, bad, len, "v3", false, true))
	{
		/* the damage is found where it is read, and only there */
		if (ok_id)
			CHECK(scan_count(o.r, ok_id, 1, 0, &err) == 5);
		CHECK(scan_count(o.r, bad_id, 1, 0, &err) == TDB_TRAIL_ECORRUPT);
		CHECK(strstr(err.msg, what) != NULL);
		CHECK(tdb_trail_verify(o.r, &n, &err) == TDB_TRAIL_ECORRUPT);
		fx_close_opened(&o);
	}
	free(bad);
}

/* A damaged trail chunk, page chunk or lexicon: a clean error when read, the rest readable. */
UNIT_TEST(test_trail_v3_damaged_chunk)
{
	size_t		len;
	uint8_t    *buf = write3(131, 5, 2, TDB_TRAIL_ORDER_TRAIL, &len);
	FxOpened		o;
	TdbTrailError err;
	int64_t		first = 1,
				second = 3LL * 64 + 1,
				last = 3LL * 130 + 1;
	uint64_t	data_end = 0,
				c0 = 0,
				tbytes = 0,
				pbytes = 0;
	uint32_t	n;

	if (buf == NULL || !fx_open_buf(&o, buf, len, "v3", false, true))
	{
		free(buf);
		return;
	}
	data_end = tdb_trail_footer(o.r)->data_end;
	CHECK(scan_count(o.r, &first, 1, 0, &err) == 5);
	c0 = trail_footer3_loaded(tdb_trail_footer(o.r), TRAIL3_TRAILS, &n);
	CHECK(tdb_trail_need_all(o.r, &err) == 0);
	tbytes = trail_footer3_loaded(tdb_trail_footer(o.r), TRAIL3_TRAILS, &n);
	pbytes = trail_footer3_loaded(tdb_trail_footer(o.r), TRAIL3_PAGES, &n);
	fx_close_opened(&o);
	/* trail chunk 1 (the second trail's), page chunk 0 (the first trail's pages), the lexicon */
	damaged(buf, len, data_end + c0 + 3, &first, &second, "checksum mismatch in trail chunk 1");
	damaged(buf, len, data_end + tbytes + 1, &last, &first, "checksum mismatch in page chunk 0");
	damaged(buf, len, data_end + tbytes + pbytes + 1, NULL, &first, "checksum mismatch in the lexicon");
	free(buf);
}

/* Rewrite the trailer for a changed head (its CRC) in place. */
static void
retrail(uint8_t *buf, size_t len, const TdbTrailTrailer *t)
{
	uint8_t    *tr = buf + len - TDB_TRAIL_TRAILER_SIZE;

	codec_put_u32le(tr + 24, tdb_crc32c(buf + t->footer_offset, t->footer_length));
	codec_put_u32le(tr + 40, tdb_crc32c(tr, 40));
}

/*
 * The head's last page chunk claims a box one unit lower than its pages
 * (CRCs valid): opening succeeds, a query that reads the chunk and verify
 * fail naming it; a query whose zone map misses that chunk is answered.
 */
UNIT_TEST(test_trail_v3_lying_chunk_zone_map_found)
{
	size_t		len;
	uint8_t    *buf = write3(131, 5, 2, TDB_TRAIL_ORDER_TRAIL, &len);
	FxOpened		o;
	TdbTrailError err;
	TdbTrailTrailer t;
	uint32_t	first,
				count,
				nch;
	int64_t		a,
				b,
				id = 1;
	int32_t		box[4];
	uint8_t		want[10],
				lie[10];
	CodecBuf	cb;
	size_t		wl;
	uint64_t	n;

	if (buf == NULL || !fx_open_buf(&o, buf, len, "v3", false, true))
	{
		free(buf);
		return;
	}
	nch = trail_footer3_nchunks(tdb_trail_footer(o.r), TRAIL3_PAGES);
	trail_footer3_chunk(tdb_trail_footer(o.r), TRAIL3_PAGES, nch - 1, &first, &count, &a, &b, box);
	fx_close_opened(&o);
	CHECK(tdb_trail_trailer_decode(buf + len - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE, len, &t, &err) == 0);
	/* the head ends with that chunk's height, a varint: one less, same length */
	codec_buf_init(&cb);
	codec_put_varint(&cb, (uint64_t) (box[3] - box[1]));
	wl = cb.len;
	memcpy(want, cb.data, wl);
	cb.len = 0;
	codec_put_varint(&cb, (uint64_t) (box[3] - box[1] - 1));
	CHECK(cb.len == wl && memcmp(buf + t.footer_offset + t.footer_length - wl, want, wl) == 0);
	memcpy(lie, cb.data, wl);
	codec_buf_free(&cb);
	memcpy(buf + t.footer_offset + t.footer_length - wl, lie, wl);
	retrail(buf, len, &t);
	if (fx_open_buf(&o, buf, len, "v3", false, true))
	{
		CHECK(scan_count(o.r, &id, 1, 0, &err) == 5);	/* trail 0: chunk 0's pages */
		CHECK(scan_count(o.r, NULL, 1, 0, &err) == TDB_TRAIL_ECORRUPT);
		CHECK(strstr(err.msg, "outside its chunk's") != NULL);
		CHECK(tdb_trail_verify(o.r, &n, &err) == TDB_TRAIL_ECORRUPT);
		CHECK(strstr(err.msg, "outside its chunk's") != NULL);
		fx_close_opened(&o);
	}
	free(buf);
}

/* ---- over S3: what a cold open and a lookup fetch ------------------------------------ */

/*
 * Network bytes and requests of a cold open (with count(*) from the head)
 * and then of one trail's lookup, s3://trail-tests/<key> read in 16 kB blocks.
 */
static void
cold_costs(const TdbS3Config *c, const char *key, int64_t id, uint32_t block_size, uint32_t tail_bytes,
		   uint64_t *open_bytes, uint64_t *open_req, uint64_t *look_bytes, uint64_t *look_req,
		   uint64_t *events)
{
	TdbPagerOptions o;
	TdbPager   *p;
	TdbTrailReader *r;
	TdbTrailError err;
	TdbPagerStats st;
	char		url[256];

	memset(&o, 0, sizeof(o));
	snprintf(url, sizeof(url), "s3://trail-tests/%s", key);
	o.url = url;
	o.s3 = *c;
	o.block_size = block_size;	/* 0: the pager's default */
	o.tail_bytes = tail_bytes;	/* 0: the pager's default, 16 KiB */
	tdb_trail_footer_cache_clear();
	*open_bytes = *look_bytes = *open_req = *look_req = *events = 0;
	if (tdb_pager_open(&o, &p, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "open %s: %s", url, err.msg);
		return;
	}
	if (tdb_trail_open(p, &r, &err) == 0)
	{
		*events = tdb_trail_footer(r)->nevents;
		tdb_pager_stats(p, &st);
		*open_bytes = st.bytes_network;
		*open_req = st.requests;
		/* every trail of these files has the same events */
		CHECK(scan_count(r, &id, 1, 0, &err) == (int) (*events / tdb_trail_footer(r)->ntrails));
		tdb_pager_stats(p, &st);
		*look_bytes = st.bytes_network - *open_bytes;
		*look_req = st.requests - *open_req;
		tdb_trail_close(r);
	}
	else
		unit_fail(__FILE__, __LINE__, "open %s: %s", url, err.msg);
	tdb_pager_close(p);
	tdb_trail_footer_cache_clear();
}

/*
 * A file of 300 trails and one of 6,000 (20 times the bytes): a cold open of
 * either fetches the last 16 KiB in one request and knows the count; a
 * lookup adds the same handful of requests.  Version 2 fetches its whole
 * footer, which grows with the file (printed for comparison).
 */
UNIT_TEST(test_s3_v3_footer_bytes_do_not_grow)
{
	char		url_buf[128];
	TdbS3Config c;
	TdbNetOptions n;
	TdbTrailError err;
	uint64_t	ob[2][2],
				oq[2][2],
				lb[2][2],
				lq[2][2],
				ev[2][2];

	if (!fx_s3_env(&c, false))
		return;
	memset(&n, 0, sizeof(n));
	if (tdb_s3_create_bucket(&c, &n, "trail-tests", &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "create bucket: %s", err.msg);
		return;
	}
	for (int v = 0; v < 2; v++)
		for (int big = 0; big < 2; big++)
		{
			int			ntr = big ? 6000 : 300;
			size_t		len = 0;
			uint8_t    *buf = write_v(v ? 3 : 2, ntr, 40, 8, TDB_TRAIL_ORDER_TRAIL, &len);
			char		url[128];

			snprintf(url, sizeof(url), "s3://trail-tests/v%d-%d.trail", v ? 3 : 2, ntr);
			CHECK(buf != NULL && tdb_trail_store(url, buf, len, &c, &n, 0, &err) == 0);
			free(buf);
			cold_costs(&c, url + strlen("s3://trail-tests/"), 3LL * (ntr / 2) + 1, 16384, 0, &ob[v][big],
					   &oq[v][big], &lb[v][big], &lq[v][big], &ev[v][big]);
			printf("# version %d, %d trails (%zu bytes): open %llu bytes in %llu requests, "
				   "a lookup %llu bytes in %llu more\n", v ? 3 : 2, ntr, len,
				   (unsigned long long) ob[v][big], (unsigned long long) oq[v][big],
				   (unsigned long long) lb[v][big], (unsigned long long) lq[v][big]);
			CHECK_EQ_U64(ev[v][big], (uint64_t) ntr * 40);
		}
	/* version 3: the same whatever the size (the lookup: its chunks and its 5 pages) */
	CHECK_EQ_U64(ob[1][0], 16384);
	CHECK_EQ_U64(ob[1][1], 16384);
	CHECK_EQ_U64(oq[1][0], 1);
	CHECK_EQ_U64(oq[1][1], 1);
	CHECK(lq[1][1] <= 3 && lb[1][1] <= 3 * 16384);
	/* version 2: the whole footer, 20 times larger in the larger file */
	CHECK(ob[0][1] > 10 * ob[1][1]);

	/*
	 * The writer's and the pager's defaults (version 3, 8,192 events and 15
	 * minutes a page, 16 kB blocks): the head is in the first request too, so
	 * a cold count(*) (the FDW's from the head) costs that request alone.
	 */
	{
		size_t		len = 0;
		uint8_t    *buf = write_v(3, 6000, 40, 0, TDB_TRAIL_ORDER_TRAIL, &len);
		uint64_t	b,
					q,
					l,
					lr,
					e;

		CHECK(buf != NULL && len > 4 * 16384 &&
			  tdb_trail_store("s3://trail-tests/v3-defaults.trail", buf, len, &c, &n, 0, &err) == 0);
		free(buf);
		cold_costs(&c, "v3-defaults.trail", 3LL * 3000 + 1, 0, 0, &b, &q, &l, &lr, &e);
		printf("# version 3, the defaults, 6000 trails (%zu bytes): open %llu bytes in %llu requests\n",
			   len, (unsigned long long) b, (unsigned long long) q);
		CHECK_EQ_U64(b, 16384);
		CHECK_EQ_U64(q, 1);
		CHECK_EQ_U64(e, 6000 * 40);
	}

	/*
	 * Issue 33: count(*) at most half of DuckDB's 16 KiB.  A first request of
	 * 4 KiB (the FDW's footer aggregates ask for it): the open costs 4 KiB in
	 * one request when the head fits it, else exactly the head and trailer in
	 * two, under 8 KiB at 300, 6,000 and 100,000 trails; the lookup after it
	 * still finds its 40 events.
	 */
	for (int k = 0; k < 3; k++)
	{
		int			ntr = k == 0 ? 300 : k == 1 ? 6000 : 100000;
		size_t		len = 0;
		uint8_t    *buf = write_v(3, ntr, k == 2 ? 2 : 40, 0, TDB_TRAIL_ORDER_TRAIL, &len);
		TdbTrailTrailer t;
		uint64_t	b,
					q,
					l,
					lr,
					e,
					need;
		char		key[64];

		snprintf(key, sizeof(key), "v3-tail4k-%d.trail", ntr);
		snprintf(url_buf, sizeof(url_buf), "s3://trail-tests/%s", key);
		CHECK(buf != NULL && tdb_trail_trailer_decode(buf + len - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE,
													  len, &t, &err) == 0 &&
			  tdb_trail_store(url_buf, buf, len, &c, &n, 0, &err) == 0);
		free(buf);
		need = t.footer_length + TDB_TRAIL_TRAILER_SIZE;
		cold_costs(&c, key, 3LL * (ntr / 2) + 1, 0, 4096, &b, &q, &l, &lr, &e);
		printf("# version 3, %d trails (%zu bytes), a 4 KiB first request: head and trailer %llu bytes, "
			   "open %llu bytes in %llu requests\n", ntr, len, (unsigned long long) need,
			   (unsigned long long) b, (unsigned long long) q);
		CHECK_EQ_U64(b, need <= 4096 ? 4096 : need);
		CHECK_EQ_U64(q, need <= 4096 ? 1 : 2);
		CHECK(b <= 8192);
		CHECK_EQ_U64(e, (uint64_t) ntr * (k == 2 ? 2 : 40));
	}
}

/*
 * Version 5: each column's per-trail summaries in chunks of their own,
 * read only when asked for; the trail chunks without them.  The same
 * summaries as version 4's, the trail chunks smaller (ids and zone maps
 * delta-coded); a damaged summary chunk fails only what reads it; one that
 * lies under a good CRC (a count above its trail's events) is corruption.
 */
UNIT_TEST(test_trail_v5_summaries_apart)
{
	size_t		len4,
				len5;
	uint8_t    *b4 = write_v(4, 200, 5, 2, TDB_TRAIL_ORDER_TRAIL, &len4);
	uint8_t    *b5 = write_v(5, 200, 5, 2, TDB_TRAIL_ORDER_TRAIL, &len5);
	FxOpened	o4,
				o5;
	const TdbTrailFooter *f4,
			   *f5;
	const F3Lazy *z;
	TdbTrailError err;
	uint32_t	n4,
				n5,
				ns,
				ntc;
	uint64_t	bytes4,
				bytes5,
				nev = 0;
	bool		same = true;

	CHECK(b4 != NULL && b5 != NULL);
	if (b4 == NULL || b5 == NULL || !fx_open_buf(&o4, b4, len4, "v5", false, true))
		goto out;
	if (!fx_open_buf(&o5, b5, len5, "v5", false, true))
	{
		fx_close_opened(&o4);
		goto out;
	}
	f4 = tdb_trail_footer(o4.r);
	f5 = tdb_trail_footer(o5.r);
	z = f5->lazy;
	ntc = trail_footer3_nchunks(f5, TRAIL3_TRAILS);
	CHECK(f5->version == 5 && f5->ntrails == 200 && ntc == 4);
	CHECK_EQ_U64(trail_footer3_nchunks(f5, TRAIL3_SUMS), 2 * ntc);
	CHECK_EQ_U64(trail_footer3_nchunks(f4, TRAIL3_SUMS), 0);
	/* the whole file's summary is the head's, as before */
	CHECK(f5->whole.stats[0].count == 1000 && trail_stats_equal(TDB_TRAIL_FLOAT64, &f5->whole.stats[0], &f4->whole.stats[0]));

	/* trail entries alone: no summary chunk read, the summaries count 0 */
	CHECK(tdb_trail_need_trails(o4.r, 0, 200, &err) == 0 && tdb_trail_need_trails(o5.r, 0, 200, &err) == 0);
	bytes4 = trail_footer3_loaded(f4, TRAIL3_TRAILS, &n4);
	bytes5 = trail_footer3_loaded(f5, TRAIL3_TRAILS, &n5);
	CHECK(n4 == ntc && n5 == ntc && bytes5 < bytes4);
	CHECK(trail_footer3_loaded(f5, TRAIL3_SUMS, &ns) == 0 && ns == 0);
	for (uint32_t t = 0; t < 200; t++)
		same &= f5->trails[t].stats[0].count == 0 && f5->trails[t].stats[1].count == 0;
	CHECK(same);
	/* column 1's: its chunks only, equal to version 4's; column 0's still not read */
	CHECK(tdb_trail_need_summaries(o5.r, 0, 200, 2, &err) == 0);
	CHECK(trail_footer3_loaded(f5, TRAIL3_SUMS, &ns) > 0 && ns == ntc);
	for (uint32_t j = 0; j < ntc; j++)
		CHECK(chunk_loaded(&z->chunks[TRAIL3_SUMS][ntc + j]) && !chunk_loaded(&z->chunks[TRAIL3_SUMS][j]));
	same = true;
	for (uint32_t t = 0; t < 200; t++)
		same &= trail_stats_equal(TDB_TRAIL_STRING, &f5->trails[t].stats[1], &f4->trails[t].stats[1]) &&
			f5->trails[t].stats[1].count == 5 && f5->trails[t].stats[0].count == 0;
	CHECK(same);
	/* then one trail's column 0: its chunk's alone */
	CHECK(tdb_trail_need_summaries(o5.r, 130, 131, 1, &err) == 0);
	CHECK(trail_footer3_loaded(f5, TRAIL3_SUMS, &ns) > 0 && ns == ntc + 1);
	CHECK(trail_stats_equal(TDB_TRAIL_FLOAT64, &f5->trails[130].stats[0], &f4->trails[130].stats[0]) &&
		  f5->trails[130].stats[0].fmax == 130 + 2.0);
	CHECK(tdb_trail_verify(o5.r, &nev, &err) == 0);
	CHECK_EQ_U64(nev, 1000);
	fx_close_opened(&o4);
	fx_close_opened(&o5);

	/* a summary chunk damaged: its column's summaries fail, naming it; the rows do not */
	{
		uint8_t    *bad = malloc(len5);
		const F3Chunk *sc;
		int64_t		id = 3 * 70 + 1;

		memcpy(bad, b5, len5);
		if (!fx_open_buf(&o5, b5, len5, "v5", false, true))
			goto out2;
		sc = &((const F3Lazy *) tdb_trail_footer(o5.r)->lazy)->chunks[TRAIL3_SUMS][ntc + 1];
		bad[sc->off + sc->len / 2] ^= 0x40;
		fx_close_opened(&o5);
		if (!fx_open_buf(&o5, bad, len5, "v5", false, true))
			goto out2;
		CHECK(tdb_trail_need_summaries(o5.r, 0, 200, 1, &err) == 0);
		CHECK(tdb_trail_need_summaries(o5.r, 0, 200, 2, &err) == TDB_TRAIL_ECORRUPT &&
			  strstr(err.msg, "checksum mismatch in summary chunk 5") != NULL);
		CHECK(scan_count(o5.r, &id, 1, 0, &err) == 5);
		CHECK(scan_count(o5.r, NULL, 1, 0, &err) == 1000);
		CHECK(tdb_trail_verify(o5.r, &nev, &err) == TDB_TRAIL_ECORRUPT);
		fx_close_opened(&o5);
out2:
		free(bad);
	}

	/* a summary that lies under a good CRC (its own, last): a count above its trail's 5 events */
	{
		uint8_t    *bad = malloc(len5);
		const F3Chunk *sc;

		memcpy(bad, b5, len5);
		if (!fx_open_buf(&o5, b5, len5, "v5", false, true))
			goto out3;
		sc = &((const F3Lazy *) tdb_trail_footer(o5.r)->lazy)->chunks[TRAIL3_SUMS][0];
		CHECK(bad[sc->off] == 5);	/* the first trail's count of column 0 */
		bad[sc->off] = 6;
		codec_put_u32le(bad + sc->off + sc->len - 4, tdb_crc32c(bad + sc->off, sc->len - 4));
		fx_close_opened(&o5);
		if (!fx_open_buf(&o5, bad, len5, "v5", false, true))
			goto out3;
		CHECK(tdb_trail_need_summaries(o5.r, 0, 200, 2, &err) == 0);
		CHECK(tdb_trail_need_summaries(o5.r, 0, 1, 1, &err) == TDB_TRAIL_ECORRUPT &&
			  strstr(err.msg, "bad column summary of a trail in summary chunk 0") != NULL);
		fx_close_opened(&o5);
out3:
		free(bad);
	}
out:
	free(b4);
	free(b5);
}

/*
 * A scan that decodes a string column has the lexicon read with its first
 * footer chunks, when it begins (a lookup: with its trail chunk; a time
 * window: with its page chunks), not after its pages (a round trip less on
 * S3); one that skips the string column never reads it.  Both return the
 * events written.
 */
UNIT_TEST(test_trail_scan_reads_lexicon_with_footer_chunks)
{
	size_t		len;
	uint8_t    *buf = write_v(5, 40, 5, 2, TDB_TRAIL_ORDER_TRAIL, &len);
	TdbTrailError err;

	CHECK(buf != NULL);
	for (int kase = 0; buf != NULL && kase < 4; kase++)
	{
		int			skip = kase & 1;
		bool		window = kase >= 2;
		FxOpened	o;
		TdbTrailQuery q;
		TdbTrailScan *s = NULL;
		TdbTrailEvent ev;
		int64_t		id = 3 * 17 + 1;
		int			n = 0,
					rc;
		const F3Lazy *z;

		tdb_trail_footer_cache_clear();
		if (!fx_open_buf(&o, buf, len, "v5", false, true))
			break;
		z = tdb_trail_footer(o.r)->lazy;
		CHECK(z != NULL && z->nstrings == 2 && !z->lex_loaded);
		memset(&q, 0, sizeof(q));
		if (window)
		{
			/* trail 17's events only: each trail's times are offset by its number (write_v) */
			q.has_time = true;
			q.time_from = q.time_to = T0 + 17;
		}
		else
		{
			q.ids_int = &id;
			q.nids = 1;
		}
		q.skip_columns = skip ? 2 : 0;	/* column 1, "s" */
		CHECK(tdb_trail_scan_begin(o.r, &q, &s, &err) == 0);
		CHECK(z->lex_loaded == !skip);
		while (s != NULL && (rc = tdb_trail_scan_next(s, &ev, &err)) > 0)
		{
			CHECK(ev.key.i == id);
			if (!skip)
				CHECK(strcmp(ev.values[1].s, "odd") == 0);
			n++;
		}
		CHECK(n == (window ? 1 : 5));
		CHECK(z->lex_loaded == !skip);
		tdb_trail_scan_end(s);
		fx_close_opened(&o);
	}
	/* an id between two trails whose chunk is loaded already: nothing to ride along with, no lexicon */
	if (buf != NULL)
	{
		FxOpened	o;
		int64_t		in = 3 * 17 + 1,
					between = 3 * 17 + 2;
		const F3Lazy *z;

		tdb_trail_footer_cache_clear();
		if (fx_open_buf(&o, buf, len, "v5", false, true))
		{
			z = tdb_trail_footer(o.r)->lazy;
			CHECK(tdb_trail_need_ids(o.r, &in, NULL, 1, 0, &err) == 0 && !z->lex_loaded);
			CHECK(scan_count(o.r, &between, 1, 0, &err) == 0);
			CHECK(!z->lex_loaded);
			fx_close_opened(&o);
		}
	}
	free(buf);
}
