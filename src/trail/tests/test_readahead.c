/*
 * test_readahead.c
 *	  The pager's default blocks and adaptive read-ahead, in bytes counted
 *	  (never speed): a point read with the defaults fetches no more than a
 *	  fixed 1 MiB block would (and only its 16 KiB block), a sequential
 *	  reader fetches each byte once in fewer requests as its read-ahead
 *	  grows, and a full scan fetches exactly the object.  Needs MinIO
 *	  (src/trail/tests/run.sh); skipped without it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pager.h"
#include "trail_fixture.h"
#include "trail_unit.h"

#define BUCKET "trail-tests"
#define TAIL 16384				/* the pager's first request */

static int
ra_open(const TdbS3Config *c, const char *key, uint32_t bs, TdbPager **p, TdbTrailError *err)
{
	TdbPagerOptions o;
	char		url[256];

	memset(&o, 0, sizeof(o));
	snprintf(url, sizeof(url), "s3://%s/%s", BUCKET, key);
	o.url = url;
	o.s3 = *c;
	o.net.max_retries = 4;
	o.net.retry_base_ms = 20;
	o.net.retry_max_ms = 200;
	o.block_size = bs;			/* 0: the default */
	return tdb_pager_open(&o, p, err);
}

static bool
ra_put(const TdbS3Config *c, const char *key, const void *buf, size_t len)
{
	TdbTrailError err;
	TdbNetOptions n;
	char		url[256];

	memset(&n, 0, sizeof(n));
	snprintf(url, sizeof(url), "s3://%s/%s", BUCKET, key);
	if (tdb_s3_create_bucket(c, &n, BUCKET, &err) < 0 ||
		tdb_trail_store(url, buf, len, c, &n, 0, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "store %s: %s", url, err.msg);
		return false;
	}
	return true;
}

/*
 * Raw pager reads of a 3 MB object: a 100-byte read in the middle costs
 * the tail and one 16 KiB block with the defaults (a 1 MiB block's worth
 * with block_size 1 MiB); 4 KiB reads from the start to the tail fetch
 * each byte once, in far fewer requests than blocks (the read-ahead grows
 * to 64 blocks).
 */
UNIT_TEST(test_trail_readahead_point_and_sequential)
{
	TdbS3Config c;
	size_t		len = 3u << 20;
	uint8_t    *obj = malloc(len),
			   *got = malloc(len);
	uint64_t	x = 33;

	if (obj == NULL || got == NULL || !fx_s3_env(&c, false))
		goto out;
	for (size_t i = 0; i < len; i++)
	{
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		obj[i] = (uint8_t) (x >> 56);
	}
	if (!ra_put(&c, "readahead.bin", obj, len))
		goto out;
	{
		uint64_t	bytes[2];
		uint32_t	bss[2] = {0, 1u << 20};

		for (int b = 0; b < 2; b++)
		{
			TdbPager   *p;
			TdbTrailError err;
			TdbPagerStats ps;
			uint64_t	off = 1500000;

			CHECK(ra_open(&c, "readahead.bin", bss[b], &p, &err) == 0);
			CHECK(tdb_pager_read(p, off, 100, got, &err) == 0);
			CHECK(memcmp(got, obj + off, 100) == 0);
			tdb_pager_stats(p, &ps);
			bytes[b] = ps.bytes_network;
			tdb_pager_close(p);
		}
		/* the defaults: the tail, then the read's own 16 KiB block */
		CHECK_EQ_U64(bytes[0], TAIL + 16384);
		CHECK_EQ_U64(bytes[1], TAIL + (1u << 20));
		CHECK(bytes[0] <= bytes[1]);
	}
	{
		TdbPager   *p;
		TdbTrailError err;
		TdbPagerStats ps;
		size_t		end = len - TAIL;

		CHECK(ra_open(&c, "readahead.bin", 0, &p, &err) == 0);
		for (size_t off = 0; off < end; off += 4096)
		{
			size_t		n = end - off < 4096 ? end - off : 4096;

			if (tdb_pager_read(p, off, n, got + off, &err) < 0)
			{
				unit_fail(__FILE__, __LINE__, "read at %zu: %s", off, err.msg);
				break;
			}
		}
		CHECK(memcmp(got, obj, end) == 0);
		tdb_pager_stats(p, &ps);
		/* every byte once (the tail included) */
		CHECK_EQ_U64(ps.bytes_network, len);
		/* 191 blocks before the tail: 1, 2, 4 ... 64 blocks a request, not one each */
		if (ps.requests > 12)
			unit_fail(__FILE__, __LINE__, "%llu requests for %zu blocks read in order",
					  (unsigned long long) ps.requests, end / 16384);
		tdb_pager_close(p);
	}
out:
	free(obj);
	free(got);
}

/*
 * The trail reader through the defaults: one trail fetches no more than
 * with 1 MiB blocks, and less on a file of several MiB; a full scan
 * fetches exactly the object (the announced windows, bridged or not,
 * never fetch a byte twice nor a byte past the file).
 */
UNIT_TEST(test_trail_readahead_scans)
{
	TdbS3Config c;
	FxSet		s;
	uint64_t	rng = 33;
	uint8_t    *buf = NULL;
	size_t		len = 0;
	uint64_t	one[2] = {0, 0};
	uint32_t	bss[2] = {0, 1u << 20};

	memset(&s, 0, sizeof(s));
	if (!fx_s3_env(&c, false))
		return;
	fx_layout(1);				/* version 2 by trail */
	fx_make(&s, &rng, false, 400, 900);
	buf = fx_encode(&s, 4096, 0, &len);
	if (buf == NULL || !ra_put(&c, "readahead.trail", buf, len))
		goto out;
	CHECK(len > (3u << 20));
	for (int b = 0; b < 2; b++)
		for (int full = 0; full < 2; full++)
		{
			TdbPager   *p;
			TdbTrailReader *r;
			TdbTrailScan *sc;
			TdbTrailQuery q;
			TdbTrailEvent ev;
			TdbTrailError err;
			TdbPagerStats ps;
			int64_t		id = s.keys_i[s.nkeys / 2];
			uint64_t	n = 0;
			int			rc;

			tdb_trail_footer_cache_clear();
			if (ra_open(&c, "readahead.trail", bss[b], &p, &err) < 0 || tdb_trail_open(p, &r, &err) < 0)
			{
				unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
				goto out;
			}
			memset(&q, 0, sizeof(q));
			if (!full)
			{
				q.ids_int = &id;
				q.nids = 1;
			}
			CHECK(tdb_trail_scan_begin(r, &q, &sc, &err) == 0);
			while ((rc = tdb_trail_scan_next(sc, &ev, &err)) > 0)
				n++;
			CHECK(rc == 0);
			tdb_pager_stats(p, &ps);
			if (full)
			{
				CHECK_EQ_U64(n, s.n);
				if (b == 0)
					CHECK_EQ_U64(ps.bytes_network, len);
			}
			else
				one[b] = ps.bytes_network;
			tdb_trail_scan_end(sc);
			tdb_trail_close(r);
			tdb_pager_close(p);
		}
	/* one trail: the defaults fetch less than 1 MiB blocks would */
	if (!(one[0] < one[1]))
		unit_fail(__FILE__, __LINE__, "one trail: %llu bytes with the defaults, %llu with 1 MiB blocks",
				  (unsigned long long) one[0], (unsigned long long) one[1]);
out:
	free(buf);
	fx_free(&s);
}

/*
 * A time window on a version-3 file whose footer is small (over the first
 * request's 16 KiB tail, within 64 KiB): scan_begin fetches the whole
 * footer in its one request, so the trail chunks its pages name come from
 * the tail rather than a round trip after the page chunks; the rows equal
 * the brute-force answer.
 */
UNIT_TEST(test_trail_readahead_small_footer_whole)
{
	TdbS3Config c;
	FxSet		s;
	uint64_t	rng = 77;
	uint8_t    *buf = NULL;
	size_t		len = 0;
	TdbPager   *p = NULL;
	TdbTrailReader *r = NULL;
	TdbTrailScan *sc = NULL;
	TdbTrailQuery q;
	TdbTrailEvent ev;
	TdbTrailError err;
	TdbPagerStats ps;
	int64_t		tmin = INT64_MAX,
				tmax = INT64_MIN;
	uint64_t	want = 0,
				n = 0,
				footer;
	int			rc;

	memset(&s, 0, sizeof(s));
	if (!fx_s3_env(&c, false))
		return;
	fx_layout(3);				/* version 3 by trail */
	fx_make(&s, &rng, false, 300, 200);
	buf = fx_encode(&s, 4096, 0, &len);
	if (buf == NULL || !ra_put(&c, "small-footer.trail", buf, len))
		goto out;
	for (size_t i = 0; i < s.n; i++)
	{
		tmin = s.ev[i].time < tmin ? s.ev[i].time : tmin;
		tmax = s.ev[i].time > tmax ? s.ev[i].time : tmax;
	}
	memset(&q, 0, sizeof(q));
	q.has_time = true;
	q.time_from = tmin + (tmax - tmin) / 2;
	q.time_to = q.time_from + (tmax - tmin) / 50;
	for (size_t i = 0; i < s.n; i++)
		want += s.ev[i].time >= q.time_from && s.ev[i].time <= q.time_to;

	tdb_trail_footer_cache_clear();
	if (ra_open(&c, "small-footer.trail", 0, &p, &err) < 0 || tdb_trail_open(p, &r, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
		goto out;
	}
	footer = len - tdb_trail_footer(r)->data_end;
	if (footer <= TAIL || footer > (64u << 10))
	{
		unit_fail(__FILE__, __LINE__, "the fixture's footer is %llu bytes, not over %u and within 64 KiB",
				  (unsigned long long) footer, TAIL);
		goto out;
	}
	CHECK(tdb_trail_scan_begin(r, &q, &sc, &err) == 0);
	if (sc == NULL)
		goto out;
	tdb_pager_stats(p, &ps);
	/* the tail, then the rest of the footer: every footer byte, once */
	CHECK_EQ_U64(ps.requests, 2);
	CHECK_EQ_U64(ps.bytes_network, footer);
	while ((rc = tdb_trail_scan_next(sc, &ev, &err)) > 0)
		n++;
	CHECK(rc == 0);
	CHECK(want > 0);
	CHECK_EQ_U64(n, want);
out:
	tdb_trail_scan_end(sc);
	if (r)
		tdb_trail_close(r);
	if (p)
		tdb_pager_close(p);
	free(buf);
	fx_free(&s);
}
