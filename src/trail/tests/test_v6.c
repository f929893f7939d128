/*
 * test_v6.c
 *	  Format version 6: the pages of a file whose pages total at most
 *	  TDB_TRAIL_COLMAJOR_MAX_BYTES laid out column-major (every page's core
 *	  chunk, then every page's positions, then each extra column's).  The
 *	  same events as the row-major version-5 file of the same data, for
 *	  every kind of query, locally and on MinIO; the file just over the bound
 *	  is version 5 byte for byte; a projection fetches fewer bytes; hostile
 *	  chunk lengths are refused cleanly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../checksum.h"
#include "footer3.h"
#include "format.h"
#include "pager.h"
#include "trail_fixture.h"
#include "trail_fixture_s3.h"
#include "trail_unit.h"

#define T0 1600000000000000LL

/*
 * n events of ntrails trails (event i of trail i % ntrails, a second after
 * the previous one of its trail), columns: a float64 with 8 raw bytes of
 * noise (so that the pages grow with n), an int64 counter, a string of few
 * values with NULLs.  version 0: the default.
 */
static uint8_t *
v6_write(int version, int ntrails, int n, size_t *len)
{
	TdbTrailSchema sc = fx_schema(TDB_TRAIL_INT64, 3, TDB_TRAIL_FLOAT64);
	TdbTrailWriterOptions o;
	TdbTrailWriter *w;
	TdbTrailError err;
	uint64_t	rng = 66;

	sc.columns[1].type = TDB_TRAIL_INT64;
	sc.columns[2].type = TDB_TRAIL_STRING;
	memset(&o, 0, sizeof(o));
	o.version = version;
	o.order = TDB_TRAIL_ORDER_TRAIL;
	if (tdb_trail_writer_create(&sc, &o, &w, &err) < 0)
		return NULL;
	for (int i = 0; i < n; i++)
	{
		static const char *const names[3] = {"moored", "under way", "anchored"};
		TdbTrailEvent ev;
		TdbTrailValue vals[3];
		int			k = i % ntrails;
		uint64_t	bits = unit_rand(&rng);

		memset(&ev, 0, sizeof(ev));
		memset(vals, 0, sizeof(vals));
		ev.key.i = 7LL * k + 100;
		ev.time_us = T0 + (int64_t) (i / ntrails) * 1000000 + k;
		ev.lon = -74 + k * 0.001 + (i / ntrails) * 0.00001;
		ev.lat = 40.5 + (bits % 1000) * 0.00001;
		vals[0].f = (double) (bits >> 11) / 9007199254740992.0;
		vals[1].i = i / ntrails;
		vals[2].isnull = i % 7 == 0;
		vals[2].s = names[(i / ntrails) % 3];
		ev.values = vals;
		if (tdb_trail_writer_add(w, &ev, &err) < 0)
		{
			tdb_trail_writer_free(w);
			return NULL;
		}
	}
	return fx_writer_done(w, len);
}

/* The version field of a file's header and of its trailer (0 when they disagree). */
static int
file_version(const uint8_t *buf, size_t len)
{
	int			h = (int) codec_get_u32le(buf + 8),
				t = buf[len - TDB_TRAIL_TRAILER_SIZE + 28] | buf[len - TDB_TRAIL_TRAILER_SIZE + 29] << 8;

	return h == t ? h : 0;
}

/* ---- what a scan returns, as a digest -------------------------------------------- */

typedef struct Digest
{
	uint64_t	h;
	uint64_t	n;
	uint64_t	bytes;			/* the scan's page bytes read */
	int			rc;
} Digest;

static void
mix(uint64_t *h, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		*h = (*h ^ ((const uint8_t *) p)[i]) * 1099511628211ull;
}

static Digest
digest(TdbTrailReader *r, const TdbTrailQuery *q)
{
	const TdbTrailFooter *f = tdb_trail_footer(r);
	Digest		d = {1469598103934665603ull, 0, 0, 0};
	TdbTrailScan *s;
	TdbTrailEvent ev;
	TdbTrailScanStats st;
	TdbTrailError err;

	if ((d.rc = tdb_trail_scan_begin(r, q, &s, &err)) < 0)
		return d;
	while ((d.rc = tdb_trail_scan_next(s, &ev, &err)) > 0)
	{
		d.n++;
		mix(&d.h, &ev.key.i, sizeof(ev.key.i));
		mix(&d.h, &ev.time_us, sizeof(ev.time_us));
		mix(&d.h, &ev.lon, sizeof(ev.lon));
		mix(&d.h, &ev.lat, sizeof(ev.lat));
		for (int c = 0; c < f->schema.ncolumns; c++)
		{
			const TdbTrailValue *v = &ev.values[c];

			mix(&d.h, &v->isnull, sizeof(v->isnull));
			if (v->isnull)
				continue;
			if (f->schema.columns[c].type == TDB_TRAIL_STRING)
				mix(&d.h, v->s, strlen(v->s) + 1);
			else if (f->schema.columns[c].type == TDB_TRAIL_FLOAT64)
				mix(&d.h, &v->f, sizeof(v->f));
			else
				mix(&d.h, &v->i, sizeof(v->i));
		}
	}
	if (d.rc < 0)
		unit_fail(__FILE__, __LINE__, "scan: %s", err.msg);
	tdb_trail_scan_stats(s, &st);
	d.bytes = st.bytes_read;
	tdb_trail_scan_end(s);
	return d;
}

/* A random query of the set: ids, a time window, a box, a projection, a limit, in any mix. */
static void
random_query(uint64_t *rng, const int64_t *ids, int nids, TdbTrailQuery *q, int64_t *qids)
{
	int			what = (int) (unit_rand(rng) % 32);

	memset(q, 0, sizeof(*q));
	if (what & 1)
	{
		q->nids = 1 + (int) (unit_rand(rng) % 4);
		for (int i = 0; i < q->nids; i++)
			qids[i] = i == 3 ? 5 : ids[unit_rand(rng) % nids];	/* 5: no such trail */
		q->ids_int = qids;
	}
	if (what & 2)
	{
		q->has_time = true;
		q->time_from = T0 + (int64_t) (unit_rand(rng) % 2000) * 1000000;
		q->time_to = q->time_from + 300LL * 1000000;	/* 5 minutes */
	}
	if (what & 4)
	{
		q->has_bbox = true;
		q->xmin = -74 + (unit_rand(rng) % 20) * 0.001;
		q->xmax = q->xmin + 0.01;
		q->ymin = 40.5 + (unit_rand(rng) % 5) * 0.001;
		q->ymax = q->ymin + 0.004;
	}
	if (what & 8)
	{
		q->skip_columns = unit_rand(rng) % 8;
		q->skip_position = unit_rand(rng) % 2;
	}
	if (what & 16)
		q->limit = 1 + unit_rand(rng) % 300;
	q->may_stop_early = unit_rand(rng) % 2;
}

/* The lookups of a join: one scan per id sharing a page cache, the union announced. */
static Digest
join_digest(TdbTrailReader *r, const int64_t *ids, int nids, bool known)
{
	TdbTrailPageCache *cache = tdb_trail_page_cache_create(8u << 20);
	Digest		all = {0, 0, 0, 0};

	for (int i = 0; i < nids; i++)
	{
		TdbTrailQuery q;
		Digest		d;

		memset(&q, 0, sizeof(q));
		q.ids_int = &ids[(i * 7) % nids];
		q.nids = 1;
		q.page_cache = cache;
		q.lookups_expected = (uint32_t) nids;
		q.skip_columns = 2;
		if (known)
		{
			q.union_ids_int = ids;
			q.union_nids = nids;
		}
		d = digest(r, &q);
		all.h = all.h * 31 + d.h;
		all.n += d.n;
		all.rc |= d.rc;
	}
	tdb_trail_page_cache_free(cache);
	return all;
}

/*
 * Every chunk's offset as an independent reader computes it from the page
 * entries alone (docs/trail-format.md, "Version 6"): kind k's chunks of all
 * pages in page order after kind k - 1's, from byte 16.
 */
static bool
offsets_as_documented(const TdbTrailFooter *f)
{
	uint64_t	at = TDB_TRAIL_HEADER_SIZE;

	for (int k = 0; k < 2 + f->schema.ncolumns; k++)
		for (uint32_t p = 0; p < f->npages; p++)
		{
			uint64_t	off;
			uint32_t	len;

			tdb_trail_chunk_range(f, p, k, &off, &len);
			if (off != at || f->pages[p].chunk_off == NULL || f->pages[p].chunk_off[k] != at)
				return false;
			at += len;
		}
	return at == f->data_end;
}

/* The queries on the version-5 (a) and version-6 (b) readers of the same data. */
static void
compare_readers(TdbTrailReader *a, TdbTrailReader *b, const int64_t *ids, int nids, int nqueries, uint64_t seed)
{
	uint64_t	rng = seed;
	TdbTrailQuery q;
	int64_t		qids[4];
	Digest		da,
				db;

	memset(&q, 0, sizeof(q));
	da = digest(a, &q);
	db = digest(b, &q);
	CHECK(da.n > 0 && da.rc == 0 && db.rc == 0);
	CHECK(da.h == db.h && da.n == db.n && da.bytes == db.bytes);
	for (int i = 0; i < nqueries; i++)
	{
		random_query(&rng, ids, nids, &q, qids);
		da = digest(a, &q);
		db = digest(b, &q);
		if (da.h != db.h || da.n != db.n || da.bytes != db.bytes || da.rc != db.rc)
			unit_fail(__FILE__, __LINE__, "query %d: version 5 %llu events (%llu page bytes), version 6 %llu (%llu)",
					  i, (unsigned long long) da.n, (unsigned long long) da.bytes,
					  (unsigned long long) db.n, (unsigned long long) db.bytes);
	}
	for (int known = 0; known < 2; known++)
	{
		da = join_digest(a, ids, nids, known);
		db = join_digest(b, ids, nids, known);
		CHECK(da.n > 0 && da.rc == 0 && db.rc == 0);
		CHECK(da.h == db.h && da.n == db.n);
	}
}

/*
 * A small file written column-major reads back event by event as the same
 * data written row-major: every event, projections, windows, boxes, ids,
 * limits, a join's lookups through a page cache, the footer's summaries,
 * verify; the pages' bytes identical once gathered.
 */
UNIT_TEST(test_v6_colmajor_reads_as_rowmajor)
{
	size_t		la,
				lb;
	uint8_t    *a = v6_write(5, 40, 6000, &la),
			   *b = v6_write(0, 40, 6000, &lb);
	FxOpened	oa,
				ob;
	int64_t		ids[40];

	if (a == NULL || b == NULL || !fx_open_buf(&oa, a, la, "v6a", true, true))
	{
		unit_fail(__FILE__, __LINE__, "cannot write or open the files");
		free(a);
		free(b);
		return;
	}
	if (!fx_open_buf(&ob, b, lb, "v6b", true, false))
	{
		fx_close_opened(&oa);
		free(a);
		free(b);
		return;
	}
	CHECK(file_version(a, la) == 5);
	CHECK(file_version(b, lb) == 6);
	for (int k = 0; k < 40; k++)
		ids[k] = 7LL * k + 100;
	{
		const TdbTrailFooter *fa = tdb_trail_footer(oa.r),
				   *fb = tdb_trail_footer(ob.r);
		uint8_t    *pa = malloc(1 << 20),
				   *pb = malloc(1 << 20);
		uint64_t	ev;
		TdbTrailError err;

		CHECK(fb->version == 6 && fa->npages == fb->npages && fa->npages > 10 && fa->data_end == fb->data_end);
		CHECK(offsets_as_documented(fb));
		for (uint32_t p = 0; p < fa->npages && pa && pb; p++)
		{
			CHECK(fa->pages[p].chunk_off == NULL && fa->pages[p].length == fb->pages[p].length);
			CHECK(tdb_trail_page_gather(fa, p, a, la, pa) && tdb_trail_page_gather(fb, p, b, lb, pb));
			CHECK(memcmp(pa, pb, fa->pages[p].length) == 0);
		}
		/* the aggregates' summaries: the same footer but for the layout */
		CHECK(tdb_trail_need_summaries(oa.r, 0, fa->ntrails, TRAIL_ALL_COLUMNS(3), &err) == 0);
		CHECK(tdb_trail_need_summaries(ob.r, 0, fb->ntrails, TRAIL_ALL_COLUMNS(3), &err) == 0);
		for (uint32_t t = 0; t < fa->ntrails; t++)
			for (int c = 0; c < 3; c++)
				CHECK(trail_stats_equal(fa->schema.columns[c].type, &fa->trails[t].stats[c], &fb->trails[t].stats[c]));
		CHECK(tdb_trail_verify(ob.r, &ev, &err) == 0);
		CHECK_EQ_U64(ev, 6000);
		free(pa);
		free(pb);
	}
	compare_readers(oa.r, ob.r, ids, 40, 400, 606);
	fx_close_opened(&oa);
	fx_close_opened(&ob);
	free(a);
	free(b);
}

/* The smallest event count of v6_write(., 20, n) whose pages pass the column-major bound. */
static int
first_over(void)
{
	int			lo = 1000,
				hi = 40000;		/* pages of lo events fit, of hi do not */

	while (hi - lo > 1)
	{
		int			mid = lo + (hi - lo) / 2;
		size_t		len;
		uint8_t    *buf = v6_write(5, 20, mid, &len);
		TdbTrailTrailer t;
		TdbTrailFooter f;
		TdbTrailError err;
		bool		over = false;

		if (buf == NULL || tdb_trail_trailer_decode(buf + len - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE,
													len, &t, &err) < 0 ||
			tdb_trail_footer_decode(buf + t.footer_offset, t.footer_length, &t, &f, &err) < 0)
		{
			free(buf);
			return -1;
		}
		over = f.data_end - TDB_TRAIL_HEADER_SIZE > TDB_TRAIL_COLMAJOR_MAX_BYTES;
		tdb_trail_footer_release(&f);
		free(buf);
		if (over)
			hi = mid;
		else
			lo = mid;
	}
	return hi;
}

/*
 * The bound: pages one event over TDB_TRAIL_COLMAJOR_MAX_BYTES are written
 * row-major, byte for byte the version-5 file (as before version 6); one
 * event fewer, column-major.  (tools' AIS sets and the larger test sets
 * were compared with cmp against the build before version 6: identical.)
 */
UNIT_TEST(test_v6_just_over_the_bound_is_version_5)
{
	int			n = first_over();
	size_t		l0,
				l5,
				l6,
				lu5;
	uint8_t    *over0,
			   *over5,
			   *under6,
			   *under5;
	FxOpened	o5,
				o6;

	CHECK(n > 1000);
	if (n <= 1000)
		return;
	over0 = v6_write(0, 20, n, &l0);
	over5 = v6_write(5, 20, n, &l5);
	under6 = v6_write(6, 20, n - 1, &l6);
	under5 = v6_write(5, 20, n - 1, &lu5);
	CHECK(over0 && over5 && under6 && under5);
	if (over0 && over5)
	{
		CHECK(l0 == l5 && memcmp(over0, over5, l0) == 0);
		CHECK(file_version(over0, l0) == 5);
	}
	if (under6 && under5 && fx_open_buf(&o5, under5, lu5, "v6u5", false, false))
	{
		if (fx_open_buf(&o6, under6, l6, "v6u6", false, false))
		{
			const TdbTrailFooter *f = tdb_trail_footer(o6.r);
			int64_t		ids[20];

			for (int k = 0; k < 20; k++)
				ids[k] = 7LL * k + 100;
			CHECK(file_version(under6, l6) == 6);
			CHECK(f->data_end - TDB_TRAIL_HEADER_SIZE <= TDB_TRAIL_COLMAJOR_MAX_BYTES);
			printf("# %d events: pages of %llu bytes, column-major; %d: version 5, %zu bytes\n", n - 1,
				   (unsigned long long) (f->data_end - TDB_TRAIL_HEADER_SIZE), n, l0);
			compare_readers(o5.r, o6.r, ids, 20, 60, 707);
			fx_close_opened(&o6);
		}
		fx_close_opened(&o5);
	}
	free(over0);
	free(over5);
	free(under6);
	free(under5);
}

/*
 * On MinIO: the same events from s3:// as locally, and the projection of
 * the ids, times and positions (a map's query) fetches the tail and the
 * blocks of the core and position chunks only, where the row-major file's
 * pages touch every block: the whole object.
 */
UNIT_TEST(test_v6_s3_projection_fetches_fewer_bytes)
{
	TdbS3Config c;
	size_t		len[2];
	uint8_t    *buf[2];
	uint64_t	fetched[2] = {0, 0};
	Digest		d[2];
	int64_t		ids[20];

	if (!fx_s3_env(&c, false) || !fx_ensure_bucket(&c))
		return;
	for (int k = 0; k < 20; k++)
		ids[k] = 7LL * k + 100;
	buf[0] = v6_write(5, 20, 6500, &len[0]);
	buf[1] = v6_write(0, 20, 6500, &len[1]);
	CHECK(buf[0] && buf[1] && file_version(buf[1], len[1]) == 6);
	if (!buf[0] || !buf[1] || !fx_put(&c, "v6-rows.trail", buf[0], len[0], 0) ||
		!fx_put(&c, "v6-cols.trail", buf[1], len[1], 0))
		goto out;
	for (int v = 0; v < 2; v++)
	{
		TdbPager   *p;
		TdbTrailReader *r;
		const TdbTrailFooter *f;
		TdbPagerStats ps;
		TdbTrailQuery q;
		uint64_t	need_end = 0,
					tail = 16384,
					want;

		if (!fx_s3_open_fresh(&c, v ? "s3://" BUCKET "/v6-cols.trail" : "s3://" BUCKET "/v6-rows.trail", 0, &p, &r))
			goto out;
		f = tdb_trail_footer(r);
		/* the whole footer in the first request: the pages' blocks are all the rest fetches */
		CHECK(f->data_end >= len[v] - tail);
		memset(&q, 0, sizeof(q));
		q.skip_columns = TRAIL_ALL_COLUMNS(3);
		d[v] = digest(r, &q);
		tdb_pager_stats(p, &ps);
		fetched[v] = ps.bytes_network;
		/* what it needs: core and positions of every page; fetched in 16 kB blocks up to the tail */
		for (uint32_t pg = 0; pg < f->npages; pg++)
			for (int k = 0; k < 2; k++)
			{
				uint64_t	off;
				uint32_t	l;

				tdb_trail_chunk_range(f, pg, k, &off, &l);
				need_end = off + l > need_end ? off + l : need_end;
			}
		want = tail + ((need_end + 16383) / 16384 * 16384 < len[v] - tail ?
					   (need_end + 16383) / 16384 * 16384 : len[v] - tail);
		printf("# version %d, %zu bytes, %u pages: the ids, times and positions fetched %llu bytes (%llu requests)\n",
			   v ? 6 : 5, len[v], f->npages, (unsigned long long) fetched[v], (unsigned long long) ps.requests);
		CHECK_EQ_U64(fetched[v], want);
		tdb_trail_close(r);
		tdb_pager_close(p);
	}
	CHECK(d[0].n == 6500 && d[0].h == d[1].h && d[0].n == d[1].n);
	CHECK_EQ_U64(fetched[0], len[0]);
	CHECK(fetched[1] * 10 < fetched[0] * 7);

	/*
	 * A full scan fetches each byte once whatever the memory cache, as of
	 * the row-major file: with none (1 byte) or one too small for the
	 * window the scan reads the chunks column by column itself; read page
	 * by page they fetched 577 kB in 34 GETs (an 80 kB file).
	 */
	for (int l = 0; l < 3; l++)
	{
		TdbPager   *p;
		TdbTrailReader *r;
		TdbPagerStats ps;
		TdbTrailQuery q;
		size_t		lrus[3] = {1, 32768, 0};

		if (!fx_s3_open_fresh(&c, "s3://" BUCKET "/v6-cols.trail", lrus[l], &p, &r))
			goto out;
		memset(&q, 0, sizeof(q));
		CHECK(digest(r, &q).n == 6500);
		tdb_pager_stats(p, &ps);
		if (ps.bytes_network != len[1])
			unit_fail(__FILE__, __LINE__, "a memory cache of %zu bytes: %llu bytes fetched in %llu requests for a %zu-byte object",
					  lrus[l], (unsigned long long) ps.bytes_network, (unsigned long long) ps.requests, len[1]);
		tdb_trail_close(r);
		tdb_pager_close(p);
	}

	/* every query on S3 as on the row-major file (the memory cache of the pager: any size) */
	{
		TdbPager   *pa,
				   *pb;
		TdbTrailReader *ra,
				   *rb;

		if (fx_s3_open_fresh(&c, "s3://" BUCKET "/v6-rows.trail", 0, &pa, &ra))
		{
			if (fx_s3_open_fresh(&c, "s3://" BUCKET "/v6-cols.trail", 32768, &pb, &rb))
			{
				compare_readers(ra, rb, ids, 20, 80, 808);
				tdb_trail_close(rb);
				tdb_pager_close(pb);
			}
			tdb_trail_close(ra);
			tdb_pager_close(pa);
		}
	}
out:
	free(buf[0]);
	free(buf[1]);
}
