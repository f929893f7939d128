/*
 * test_footer3_shared.c
 *	  One decoded version-3 footer shared: two readers loading its chunks
 *	  alternately, its loaded chunks counted by the footer cache, an object
 *	  replaced between chunk loads, threads sharing it (make
 *	  unit-trail-tsan).  The files come from test_footer3_hostile.c's
 *	  writer.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "footer3.h"
#include "pager.h"
#include "remote.h"
#include "test_footer3_hostile.h"
#include "trail_fixture.h"
#include "trail_unit.h"

/* ---- one decoded footer, two readers ----------------------------------------------- */

/*
 * Two readers of one file share its decoded footer: each loads chunks the
 * other has not, alternately; the first closed, the second still reads,
 * and the footer goes with the last.  (Under ASan: no use after free.)
 */
UNIT_TEST(test_trail_v3_two_readers_share_a_footer)
{
	size_t		len;
	uint8_t    *good = hostile_write_file(131, 5, 2, 2, TDB_TRAIL_ORDER_TRAIL, &len);
	FxOpened	a;
	TdbPagerOptions po;
	TdbPager   *pb = NULL;
	TdbTrailReader *rb = NULL;
	TdbTrailError err;
	uint64_t	n;

	if (good == NULL || !fx_open_buf(&a, good, len, "hostile3s", false, true))
	{
		free(good);
		return;
	}
	memset(&po, 0, sizeof(po));
	po.url = a.path;
	if (tdb_pager_open(&po, &pb, &err) < 0 || tdb_trail_open(pb, &rb, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "second open: %s", err.msg);
		tdb_pager_close(pb);
		fx_close_opened(&a);
		free(good);
		return;
	}
	CHECK(tdb_trail_footer(a.r) == tdb_trail_footer(rb));
	for (int k = 0; k < 131; k += 13)
	{
		int64_t		id = 3LL * k + 1;

		CHECK(hostile_count_events(k % 2 ? a.r : rb, &id, &err) == 5);
	}
	CHECK(hostile_count_events(a.r, NULL, &err) == 131 * 5);
	tdb_trail_close(a.r);
	tdb_pager_close(a.pager);
	tdb_trail_footer_cache_clear();	/* the footer now lives by rb's reference alone */
	for (int k = 130; k >= 0; k -= 11)
	{
		int64_t		id = 3LL * k + 1;

		CHECK(hostile_count_events(rb, &id, &err) == 5);
	}
	CHECK(tdb_trail_verify(rb, &n, &err) == 0);
	CHECK_EQ_U64(n, 131 * 5);
	tdb_trail_close(rb);
	tdb_pager_close(pb);
	unlink(a.path);
	rmdir(a.dir);
	free(good);
}

/* ---- the decoded-footer cache's bound ------------------------------------------------ */

/*
 * The footer cache holds at most 64 MiB of decoded footers, and a footer
 * over half of that is not kept.  A version-3 footer is small when opened
 * and grows with the chunks its readers load: 12,000 trails of 64 columns
 * decode to about 37 MB of summaries.  Once loaded, the cache must count
 * them (and so drop that footer when its reader closes, decoding it again
 * at the next open) rather than keep them beyond its bound.
 */
UNIT_TEST(test_trail_v3_footer_cache_counts_loaded_chunks)
{
	size_t		len;
	uint8_t    *good = hostile_write_file(12000, 1, 2, 64, TDB_TRAIL_ORDER_TRAIL, &len);
	FxOpened	o;
	uint64_t	opened,
				decodes;
	TdbTrailError err;
	int64_t		id = 1;

	if (good == NULL || !fx_open_buf(&o, good, len, "hostile3c", false, true))
	{
		free(good);
		return;
	}
	opened = tdb_trail_footer_cache_bytes();
	CHECK(opened > 0 && opened < (4u << 20));	/* the head and the entry arrays */
	CHECK(hostile_count_events(o.r, &id, &err) == 1);
	tdb_trail_close(o.r);
	/* one trail chunk loaded: counted, the footer kept */
	CHECK(tdb_trail_footer_cache_bytes() > opened);
	CHECK(tdb_trail_footer_cache_bytes() < opened + (1u << 20));
	decodes = tdb_trail_footer_decodes();
	if (tdb_trail_open(o.pager, &o.r, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "reopen: %s", err.msg);
		tdb_pager_close(o.pager);
		free(good);
		return;
	}
	CHECK_EQ_U64(tdb_trail_footer_decodes(), decodes);	/* from the cache */
	CHECK(tdb_trail_need_all(o.r, &err) == 0);
	tdb_trail_close(o.r);
	/* every chunk: over half the bound, no longer kept */
	CHECK_EQ_U64(tdb_trail_footer_cache_bytes(), 0);
	if (tdb_trail_open(o.pager, &o.r, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "reopen: %s", err.msg);
		tdb_pager_close(o.pager);
		free(good);
		return;
	}
	CHECK_EQ_U64(tdb_trail_footer_decodes(), decodes + 1);
	fx_close_opened(&o);
	tdb_trail_footer_cache_clear();
	free(good);
}

/* ---- an object replaced between chunk loads --------------------------------------- */

/*
 * s3://trail-tests/replaced.trail read with a revalidation interval, then
 * replaced by another file: an open within the interval reuses the old
 * version (its tail and its decoded footer, chunk 0 loaded), so a chunk or
 * page it still has to fetch is TDB_TRAIL_EREPLACED, never the new
 * version's bytes under the old footer; the next open reads the new one.
 */
UNIT_TEST(test_s3_v3_replaced_between_chunk_loads)
{
	TdbS3Config c;
	TdbNetOptions net;
	TdbPagerOptions po;
	TdbPager   *p = NULL;
	TdbTrailReader *r = NULL;
	TdbTrailError err;
	size_t		l1,
				l2;
	uint8_t    *v1 = hostile_write_file(3000, 5, 2, 2, TDB_TRAIL_ORDER_TRAIL, &l1),
			   *v2 = hostile_write_file(3000, 6, 2, 2, TDB_TRAIL_ORDER_TRAIL, &l2);
	const char *url = "s3://trail-tests/replaced.trail";
	int64_t		first = 1,
				mid = 3 * 1500 + 1;

	memset(&net, 0, sizeof(net));
	net.max_retries = -1;
	if (!fx_s3_env(&c, false))
		goto out;
	CHECK(v1 != NULL && v2 != NULL && l1 > (64u << 10));
	if (tdb_s3_create_bucket(&c, &net, "trail-tests", &err) < 0 ||
		tdb_trail_store(url, v1, l1, &c, &net, 0, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "store: %s", err.msg);
		goto out;
	}
	memset(&po, 0, sizeof(po));
	po.url = url;
	po.s3 = c;
	po.net = net;
	po.block_size = 16384;
	po.revalidate_seconds = 600;
	tdb_trail_footer_cache_clear();
	for (int round = 0; round < 3; round++)
	{
		if (round == 1 && tdb_trail_store(url, v2, l2, &c, &net, 0, &err) < 0)
		{
			unit_fail(__FILE__, __LINE__, "store: %s", err.msg);
			break;
		}
		if (tdb_pager_open(&po, &p, &err) < 0 || tdb_trail_open(p, &r, &err) < 0)
		{
			unit_fail(__FILE__, __LINE__, "open, round %d: %s", round, err.msg);
			tdb_pager_close(p);
			break;
		}
		if (round == 0)
			CHECK(hostile_count_events(r, &first, &err) == 5);
		else if (round == 1)
		{
			/* the old version's footer, chunk 0 loaded: its pages, and another chunk, are fetched */
			CHECK(hostile_count_events(r, &first, &err) == TDB_TRAIL_EREPLACED);
			CHECK(hostile_count_events(r, &mid, &err) == TDB_TRAIL_EREPLACED);
		}
		else
		{
			CHECK(hostile_count_events(r, &first, &err) == 6);
			CHECK(hostile_count_events(r, &mid, &err) == 6);
		}
		tdb_trail_close(r);
		tdb_pager_close(p);
	}
out:
	tdb_trail_footer_cache_clear();
	free(v1);
	free(v2);
}

/* ---- threads ----------------------------------------------------------------------- */

typedef struct LookupThread
{
	const char *path;
	int			first;			/* trails first, first + 2, ... */
	int			bad;			/* lookups that did not give 5 events */
} LookupThread;

static void *
lookup_thread(void *arg)
{
	LookupThread *lt = arg;
	TdbPagerOptions po;
	TdbPager   *p = NULL;
	TdbTrailReader *r = NULL;
	TdbTrailError err;

	memset(&po, 0, sizeof(po));
	po.url = lt->path;
	if (tdb_pager_open(&po, &p, &err) < 0 || tdb_trail_open(p, &r, &err) < 0)
	{
		lt->bad = -1;
		tdb_pager_close(p);
		return NULL;
	}
	for (int k = lt->first; k < 131; k += 2)
	{
		int64_t		id = 3LL * k + 1;

		lt->bad += hostile_count_events(r, &id, &err) != 5;
	}
	tdb_trail_close(r);
	tdb_pager_close(p);
	return NULL;
}

/*
 * Two threads, each its own pager and reader of one file, share its
 * decoded footer and load its chunks at the same time (the F3Lazy lock);
 * run under ThreadSanitizer by make unit-trail-tsan.
 */
UNIT_TEST(test_trail_v3_threads_share_a_footer)
{
	size_t		len;
	uint8_t    *good = hostile_write_file(131, 5, 2, 2, TDB_TRAIL_ORDER_TRAIL, &len);
	FxOpened	o;
	pthread_t	th[2];
	LookupThread lt[2];

	if (good == NULL || !fx_open_buf(&o, good, len, "hostile3t", false, true))
	{
		free(good);
		return;
	}
	tdb_trail_close(o.r);
	for (int round = 0; round < 20; round++)
	{
		TdbTrailError err;

		/* a footer decoded anew and cached, no chunk loaded: the threads load them all */
		tdb_trail_footer_cache_clear();
		if (tdb_trail_open(o.pager, &o.r, &err) < 0)
		{
			unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
			break;
		}
		for (int i = 0; i < 2; i++)
		{
			lt[i].path = o.path;
			lt[i].first = i;
			lt[i].bad = 0;
			pthread_create(&th[i], NULL, lookup_thread, &lt[i]);
		}
		for (int i = 0; i < 2; i++)
		{
			pthread_join(th[i], NULL);
			CHECK(lt[i].bad == 0);
		}
		tdb_trail_close(o.r);
	}
	tdb_pager_close(o.pager);
	unlink(o.path);
	rmdir(o.dir);
	tdb_trail_footer_cache_clear();
	free(good);
}
