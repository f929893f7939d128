/*
 * test_s3_async.c
 *	  The pager's read-ahead thread (TdbPagerOptions.async, pager_async.c)
 *	  against MinIO and the fault proxy: the bytes are those a pager
 *	  without it reads, with the same bytes from the network; every fault
 *	  the thread meets ends in the exact bytes (the caller fetches what a
 *	  failed job left out) or the caller's own error; cancel and close stop
 *	  a job stuck in a stalled response promptly.
 *
 * src/trail/tests/run.sh runs these with the other tests against MinIO;
 * make test also runs them under ThreadSanitizer.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pager.h"
#include "trail_fixture.h"
#include "trail_fixture_s3.h"
#include "trail_unit.h"

#define OBJ_BYTES (6u << 20)
#define NRANGES 48

static _Atomic double deadline;	/* the read-ahead thread calls the cancel callback */

static int
cancel_at_deadline(void *arg)
{
	(void) arg;
	return fx_now() >= deadline;
}

static int
open_pager_cached(const TdbS3Config *c, bool async, const char *cache_dir, TdbPager **p, TdbTrailError *err)
{
	TdbPagerOptions o;

	fx_pager_options(&o, c, "s3://" BUCKET "/async.bin");
	o.net.cancel = cancel_at_deadline;
	o.async = async;
	o.cache_dir = cache_dir;
	return tdb_pager_open(&o, p, err);
}

static int
open_pager(const TdbS3Config *c, bool async, TdbPager **p, TdbTrailError *err)
{
	return open_pager_cached(c, async, NULL, p, err);
}

/* 48 ranges of 20-150 kB in file order, with gaps: a scan's announcement */
static void
make_ranges(TdbByteRange *r)
{
	uint64_t	rng = 41,
				off = 30000;

	for (int i = 0; i < NRANGES; i++)
	{
		r[i].off = off;
		r[i].len = 20000 + unit_rand(&rng) % 130000;
		off += r[i].len + unit_rand(&rng) % 60000;
	}
}

/* Announce, then read every range (and one never announced) and compare. */
static bool
read_all(TdbPager *p, const uint8_t *want, uint8_t *got, const char *what)
{
	TdbByteRange r[NRANGES];
	TdbTrailError err;
	bool		ok = true;

	make_ranges(r);
	/* all, then a part of them again (a join's lookup after the union) */
	if (tdb_pager_prefetch(p, r, NRANGES, &err) < 0 || tdb_pager_prefetch(p, r + 3, 5, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "%s: prefetch: %s", what, err.msg);
		return false;
	}
	for (int i = 0; i < NRANGES && ok; i++)
	{
		if (i == NRANGES / 2)
		{
			/* a read the job does not bring, while it runs: the caller's own */
			ok = tdb_pager_read(p, OBJ_BYTES - 300000, 70000, got, &err) == 0 &&
				memcmp(got, want + OBJ_BYTES - 300000, 70000) == 0;
			if (!ok)
				unit_fail(__FILE__, __LINE__, "%s: a read outside the announcement: %s", what, err.msg);
		}
		if (ok && (tdb_pager_read(p, r[i].off, r[i].len, got, &err) != 0 ||
				   memcmp(got, want + r[i].off, r[i].len) != 0))
		{
			unit_fail(__FILE__, __LINE__, "%s: range %d (%llu+%llu): %s", what, i,
					  (unsigned long long) r[i].off, (unsigned long long) r[i].len, err.msg);
			ok = false;
		}
	}
	return ok;
}

/*
 * The same bytes as without the thread, and the same bytes from the
 * network; with a disk cache (written by the thread after the LRU, while
 * the caller reads), a second pager then finds every block there.
 */
UNIT_TEST(test_s3_async_reads_what_sync_reads)
{
	TdbS3Config c;
	uint8_t    *want = fx_random_bytes(OBJ_BYTES, 91);
	uint8_t    *got = malloc(OBJ_BYTES);
	uint64_t	net[3] = {0, 0, 0};
	char		dir[256];

	deadline = 1e18;
	if (!fx_s3_env(&c, false) || !fx_ensure_bucket(&c) || !fx_put(&c, "async.bin", want, OBJ_BYTES, 0))
		goto out;
	fx_tmpdir(dir, sizeof(dir), "async-cache");
	for (int run = 0; run < 4; run++)
	{
		TdbPager   *p;
		TdbTrailError err;
		TdbPagerStats st;
		bool		async = run > 0;

		if (open_pager_cached(&c, async, run >= 2 ? dir : NULL, &p, &err) < 0)
		{
			unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
			goto out;
		}
		tdb_pager_hinted(p, true);
		CHECK(read_all(p, want, got, async ? "async" : "sync"));
		tdb_pager_hinted(p, false);
		tdb_pager_stats(p, &st);
		printf("# %s: %llu bytes in %llu requests, %llu from the disk cache\n",
			   run == 0 ? "sync" : run == 1 ? "async" : run == 2 ? "async, disk cache" : "async, disk cache again",
			   (unsigned long long) st.bytes_network, (unsigned long long) st.requests,
			   (unsigned long long) st.bytes_disk_cache);
		if (run < 3)
			net[run] = st.bytes_network;
		else
			CHECK(st.bytes_network <= 16384);	/* the tail: every block from the disk cache */
		tdb_pager_close(p);
	}
	CHECK(net[0] == net[1]);
	CHECK(net[0] == net[2]);
out:
	free(want);
	free(got);
}

/*
 * Faults met by the thread: retried there, or its job fails and the caller
 * fetches the blocks itself; either way the exact bytes.
 */
UNIT_TEST(test_s3_async_faults)
{
	TdbS3Config c;
	uint8_t    *want = fx_random_bytes(OBJ_BYTES, 92);
	uint8_t    *got = malloc(OBJ_BYTES);
	static const char *const plans[] = {
		"500", "503,503", "reset,reset", "short", "stall", "slice", "reset,short,503",
		"etag", "badrange", "503,503,503,503,503,503,503",
	};

	deadline = 1e18;
	if (!fx_put_for_proxy(&c, "async.bin", want, OBJ_BYTES))
		goto out;
	for (size_t k = 0; k < sizeof(plans) / sizeof(plans[0]); k++)
	{
		TdbPager   *p;
		TdbTrailError err;
		TdbPagerStats st;
		double		t0 = fx_now();

		if (!fx_proxy_plan(""))
			break;
		if (open_pager(&c, true, &p, &err) < 0)
		{
			unit_fail(__FILE__, __LINE__, "%s: open: %s", plans[k], err.msg);
			continue;
		}
		if (!fx_proxy_plan(plans[k]))
			break;
		tdb_pager_hinted(p, true);
		CHECK(read_all(p, want, got, plans[k]));
		tdb_pager_stats(p, &st);
		printf("# %-28s %llu requests, %llu retries, %.2f s\n", plans[k], (unsigned long long) st.requests,
			   (unsigned long long) st.retries, fx_now() - t0);
		tdb_pager_close(p);
	}
	fx_proxy_plan("");
out:
	free(want);
	free(got);
}

/*
 * A job stuck in stalled responses (8 s each): the caller's cancel ends
 * its wait promptly, and close ends the job, each within the 100 ms polls.
 */
UNIT_TEST(test_s3_async_cancel_and_close)
{
	TdbS3Config c;
	uint8_t    *want = fx_random_bytes(OBJ_BYTES, 93);
	uint8_t    *got = malloc(OBJ_BYTES);
	TdbByteRange r[NRANGES];

	deadline = 1e18;
	if (!fx_put_for_proxy(&c, "async.bin", want, OBJ_BYTES))
		goto out;
	make_ranges(r);
	for (int close_first = 0; close_first < 2; close_first++)
	{
		TdbPager   *p;
		TdbTrailError err;
		double		t0;

		deadline = 1e18;
		if (!fx_proxy_plan("") || open_pager(&c, true, &p, &err) < 0 ||
			!fx_proxy_plan("stall,stall,stall,stall,stall,stall,stall,stall"))
		{
			unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
			break;
		}
		tdb_pager_hinted(p, true);
		CHECK(tdb_pager_prefetch(p, r, NRANGES, &err) == 0);
		t0 = fx_now();
		if (!close_first)
		{
			int			rc;

			deadline = t0 + 0.3;
			rc = tdb_pager_read(p, r[0].off, r[0].len, got, &err);
			CHECK(rc == TDB_TRAIL_ECANCELED);
			printf("# the wait canceled after %.2f s (asked at 0.30 s): rc %d\n", fx_now() - t0, rc);
			CHECK(fx_now() - t0 < 2.0);
			deadline = 1e18;
		}
		t0 = fx_now();
		tdb_pager_close(p);
		printf("# %s closed in %.2f s\n", close_first ? "a running job" : "after the cancel,", fx_now() - t0);
		CHECK(fx_now() - t0 < 1.0);
	}
	fx_proxy_plan("");
out:
	free(want);
	free(got);
}

/*
 * An announcement of blocks the running job brings returns at once: it
 * waited for the whole job before (a join's every lookup announces its
 * pages after the first asked for the union of all of them: on the 100-id
 * join of issue 33 the second lookup waited for 4.7 MB and their disk-cache
 * writes).  Announcing a block the job does not bring still waits for it.
 */
UNIT_TEST(test_s3_async_covered_announcement_does_not_wait)
{
	TdbS3Config c;
	uint8_t    *want = fx_random_bytes(OBJ_BYTES, 95);
	TdbByteRange r[NRANGES];
	TdbPager   *p;
	TdbTrailError err;
	double		t0;

	deadline = 1e18;
	if (!fx_put_for_proxy(&c, "async.bin", want, OBJ_BYTES))
		goto out;
	make_ranges(r);
	if (!fx_proxy_plan("") || open_pager(&c, true, &p, &err) < 0 ||
		!fx_proxy_plan("stall,stall,stall,stall,stall,stall,stall,stall"))
	{
		unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
		goto out;
	}
	tdb_pager_hinted(p, true);
	CHECK(tdb_pager_prefetch(p, r, NRANGES, &err) == 0);
	t0 = fx_now();
	CHECK(tdb_pager_prefetch(p, r + 10, 6, &err) == 0);
	CHECK(tdb_pager_prefetch(p, r + NRANGES - 1, 1, &err) == 0);
	printf("# two covered announcements while the job stalls: %.2f s\n", fx_now() - t0);
	CHECK(fx_now() - t0 < 0.5);
	tdb_pager_close(p);
	fx_proxy_plan("");
out:
	free(want);
}

/*
 * A bulk read (a job over 16 MiB) fills the LRU but not the disk cache;
 * a smaller one fills both (test_s3_async_reads_what_sync_reads).
 */
UNIT_TEST(test_s3_async_bulk_skips_disk_cache)
{
	TdbS3Config c;
	size_t		n = 20u << 20;
	uint8_t    *want = fx_random_bytes(n, 94);
	uint8_t    *got = malloc(n);
	char		dir[256];
	TdbByteRange r = {0, 18u << 20};

	deadline = 1e18;
	fx_tmpdir(dir, sizeof(dir), "async-bulk");
	if (!fx_s3_env(&c, false) || !fx_ensure_bucket(&c) || !fx_put(&c, "async.bin", want, n, 0))
		goto out;
	for (int run = 0; run < 2; run++)
	{
		TdbPager   *p;
		TdbTrailError err;
		TdbPagerStats st;

		if (open_pager_cached(&c, true, dir, &p, &err) < 0)
		{
			unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
			break;
		}
		tdb_pager_hinted(p, true);
		CHECK(tdb_pager_prefetch(p, &r, 1, &err) == 0);
		CHECK(tdb_pager_read(p, r.off, r.len, got, &err) == 0 && memcmp(got, want, r.len) == 0);
		tdb_pager_stats(p, &st);
		printf("# run %d: %llu bytes from the network, %llu from the disk cache\n", run,
			   (unsigned long long) st.bytes_network, (unsigned long long) st.bytes_disk_cache);
		/* the second pager finds nothing of the bulk read on disk */
		CHECK(st.bytes_network >= r.len);
		CHECK(st.bytes_disk_cache == 0);
		tdb_pager_close(p);
	}
out:
	free(want);
	free(got);
}

/*
 * An exact read of the same range twice and of one overlapping them: the
 * bytes are fetched once (each range was its own GET before: 3,000 bytes
 * for these 1,500).
 */
UNIT_TEST(test_s3_exact_read_fetches_repeated_ranges_once)
{
	TdbS3Config c;
	size_t		n = 100000;
	uint8_t    *want = fx_random_bytes(n, 78);
	uint8_t    *bufs[3] = {malloc(1000), malloc(1000), malloc(1000)};
	TdbByteRange r[3] = {{1000, 1000}, {1000, 1000}, {1500, 1000}};
	TdbPager   *p = NULL;
	TdbPagerOptions o;
	TdbPagerStats ps;
	TdbTrailError err;

	if (!fx_s3_env(&c, false) || !fx_ensure_bucket(&c) || !fx_put(&c, "exact-repeat.bin", want, n, 0))
		goto out;
	fx_pager_options(&o, &c, "s3://" BUCKET "/exact-repeat.bin");
	if (tdb_pager_open(&o, &p, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
		goto out;
	}
	CHECK(tdb_pager_read_exact(p, r, 3, bufs, &err) == 0);
	for (int i = 0; i < 3; i++)
		CHECK(memcmp(bufs[i], want + r[i].off, r[i].len) == 0);
	tdb_pager_stats(p, &ps);
	/* the 16 kB tail, then [1000, 2500) once */
	CHECK_EQ_U64(ps.bytes_network, 16384 + 1500);
out:
	tdb_pager_close(p);
	free(want);
	for (int i = 0; i < 3; i++)
		free(bufs[i]);
}

/*
 * An exact read of two ranges, one far below the tail and one whose end
 * lies in it (a trail chunk with the lexicon): the second's bytes in the
 * tail are not fetched again.  It fetched all 10,000 before.
 */
UNIT_TEST(test_s3_exact_read_ending_in_the_tail)
{
	TdbS3Config c;
	size_t		n = 100000;
	uint8_t    *want = fx_random_bytes(n, 77);
	uint8_t    *a = malloc(1000),
			   *b = malloc(10000);
	uint8_t    *bufs[2] = {a, b};
	TdbByteRange r[2] = {{1000, 1000}, {80000, 10000}};
	TdbPager   *p = NULL;
	TdbPagerOptions o;
	TdbPagerStats ps;
	TdbTrailError err;

	if (!fx_s3_env(&c, false) || !fx_ensure_bucket(&c) || !fx_put(&c, "exact-tail.bin", want, n, 0))
		goto out;
	fx_pager_options(&o, &c, "s3://" BUCKET "/exact-tail.bin");
	if (tdb_pager_open(&o, &p, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
		goto out;
	}
	CHECK(tdb_pager_read_exact(p, r, 2, bufs, &err) == 0);
	CHECK(memcmp(a, want + 1000, 1000) == 0);
	CHECK(memcmp(b, want + 80000, 10000) == 0);
	tdb_pager_stats(p, &ps);
	/* the 16 kB tail [83616, 100000), then 1,000 and the 3,616 below the tail */
	CHECK_EQ_U64(ps.bytes_network, 16384 + 1000 + 3616);
	/* again: from the memory cache, the same bytes */
	memset(b, 0, 10000);
	CHECK(tdb_pager_read_exact(p, r + 1, 1, bufs + 1, &err) == 0);
	CHECK(memcmp(b, want + 80000, 10000) == 0);
	tdb_pager_stats(p, &ps);
	CHECK_EQ_U64(ps.bytes_network, 16384 + 1000 + 3616);
out:
	tdb_pager_close(p);
	free(want);
	free(a);
	free(b);
}
