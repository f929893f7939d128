/*
 * test_client.c
 *	  libtrafficdb's public API against a writer in the same process:
 *	  error codes, lookups, batched lookups, visitors, changes, waiting for
 *	  a publication, and a stopped server.
 */
#include "unit.h"
#include "fixture.h"
#include "trafficdb.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Two views of one location agree field for field (padding aside). */
static bool
same_view(const trafficdb_location *a, const trafficdb_location *b)
{
	return a->id == b->id && a->index == b->index && a->name == b->name &&
		a->road_class == b->road_class && a->length_m == b->length_m &&
		a->speed_limit_kmh == b->speed_limit_kmh && a->oneway == b->oneway &&
		a->npoints == b->npoints && a->traffic == b->traffic && a->incident == b->incident &&
		a->incident_len == b->incident_len;
}

static char client_prefix[64];

static int
count_visit(const trafficdb_location *loc, void *arg)
{
	(void) loc;
	(*(int *) arg)++;
	return 0;
}

typedef struct Knn
{
	uint64_t	ids[16];
	int			n;
} Knn;

static int
knn_visit(const trafficdb_location *loc, void *arg)
{
	Knn		   *k = arg;

	k->ids[k->n++] = loc->id;
	return 0;
}

UNIT_TEST(test_client_api)
{
	TdbWriter	w;
	TdbWriterOpenInfo info;
	char		err[TDB_ERRLEN];
	uint32_t	map_seg;
	void	   *map_addr;
	uint64_t	count;
	trafficdb_handle *h = NULL;
	trafficdb_location loc;
	uint64_t	gen;
	double		xy[4];
	int			n;

	snprintf(client_prefix, sizeof(client_prefix), "/tdbclient.%d", (int) getpid());
	CHECK_EQ_U64(trafficdb_open(client_prefix, &h), (uint64_t) TRAFFICDB_NOTRUNNING);
	CHECK(h == NULL);
	CHECK(strstr(trafficdb_strerror(TRAFFICDB_NOTRUNNING), "server down") != NULL);
	/* a failed open says why, per thread */
	CHECK(strstr(trafficdb_errmsg(NULL), "does not exist") != NULL);
	CHECK(strstr(trafficdb_errmsg(NULL), client_prefix) != NULL);

	CHECK_EQ_U64(test_writer_open(&w, client_prefix, 4, 0, &info, err), TDB_SHM_OK);
	CHECK_EQ_U64(trafficdb_open(client_prefix, &h), TRAFFICDB_OK);
	CHECK_EQ_U64(trafficdb_begin(h, &gen), (uint64_t) TRAFFICDB_EMPTY);
	CHECK_EQ_U64(trafficdb_get(h, 1000, &loc), (uint64_t) TRAFFICDB_NOSNAPSHOT);

	publish_map(&w, &map_seg, &map_addr, &count);
	publish_traffic(&w, map_seg, 3);
	CHECK_EQ_U64(trafficdb_begin(h, &gen), TRAFFICDB_OK);
	CHECK_EQ_U64(gen, 3);
	{
		int64_t		pub = 0;

		CHECK_EQ_U64(trafficdb_published_at(h, &pub), TRAFFICDB_OK);
		CHECK_EQ_U64(pub, 3);	/* the fixture publishes generation g at "time" g */
	}

	CHECK_EQ_U64(trafficdb_get(h, 1041, &loc), TRAFFICDB_OK);
	CHECK_EQ_U64(loc.id, 1041);
	CHECK(strcmp(loc.road_class, "primary") == 0 && strcmp(loc.name, "") == 0);
	CHECK_EQ_U64(loc.speed_limit_kmh, 50);
	CHECK(loc.traffic->speed_kmh == 3.0f && loc.traffic->changed_generation == 3);
	CHECK(loc.incident == NULL);
	CHECK_EQ_U64(loc.npoints, 2);
	CHECK_EQ_U64(trafficdb_shape(h, &loc, xy), TRAFFICDB_OK);
	CHECK_NEAR(xy[0], 24.901, 1e-12);
	CHECK_NEAR(xy[1], 60.151, 1e-12);
	CHECK_EQ_U64(trafficdb_get(h, 999999, &loc), (uint64_t) TRAFFICDB_NOTFOUND);

	{
		const trafficdb_traffic *t = NULL;

		CHECK_EQ_U64(trafficdb_get_traffic(h, 1041, &t), TRAFFICDB_OK);
		CHECK(t == loc.traffic);
		CHECK_EQ_U64(trafficdb_get_traffic(h, 999999, &t), (uint64_t) TRAFFICDB_NOTFOUND);
		CHECK_EQ_U64(trafficdb_get_traffic(h, 1041, NULL), (uint64_t) TRAFFICDB_BADARG);
	}

	/*
	 * Batched, with misses and repeats, at every length around the
	 * prefetch pipeline's depth: each answer equals trafficdb_get's.
	 */
	for (size_t n = 0; n <= 50; n++)
	{
		uint64_t	ids[50];
		trafficdb_location out[50];
		uint8_t		found[50];
		int			expect = 0;

		for (size_t k = 0; k < n; k++)
		{
			ids[k] = (k % 5 == 0) ? 5 + (uint64_t) k : 1000 + (uint64_t) ((k * 13) % 7);
			expect += k % 5 != 0;
		}
		CHECK_EQ_U64(trafficdb_get_many(h, ids, n, out, found), (uint64_t) expect);
		for (size_t k = 0; k < n; k++)
		{
			trafficdb_location one;

			CHECK(found[k] == (k % 5 != 0));
			if (found[k])
			{
				CHECK_EQ_U64(trafficdb_get(h, ids[k], &one), TRAFFICDB_OK);
				CHECK(same_view(&one, &out[k]));
			}
		}
	}

	/* visitors against the map's own queries */
	n = 0;
	CHECK_EQ_U64(trafficdb_bbox(h, 24.9, 60.15, 24.91, 60.155, count_visit, &n), TRAFFICDB_OK);
	CHECK(n > 10 && n < NLOC);
	{
		int			m = 0;

		CHECK_EQ_U64(trafficdb_radius(h, 24.905, 60.152, 300, count_visit, &m), TRAFFICDB_OK);
		CHECK(m > 0 && m < NLOC);
	}
	CHECK_EQ_U64(trafficdb_radius(h, 24.9, 60.15, -1, count_visit, &n), (uint64_t) TRAFFICDB_BADARG);
	CHECK_EQ_U64(trafficdb_bbox(h, NAN, 60.15, 24.91, 60.155, count_visit, &n), (uint64_t) TRAFFICDB_BADARG);
	{
		Knn			k = {{0}, 0};

		CHECK_EQ_U64(trafficdb_knn(h, 24.9, 60.15, 5, knn_visit, &k), TRAFFICDB_OK);
		CHECK_EQ_U64(k.n, 5);
		CHECK_EQ_U64(k.ids[0], 1000);	/* the segment that starts at the point */
	}
	n = 0;
	CHECK_EQ_U64(trafficdb_changes_since(h, 2, count_visit, &n), TRAFFICDB_OK);
	CHECK_EQ_U64(n, NLOC);
	n = 0;
	CHECK_EQ_U64(trafficdb_changes_since(h, 3, count_visit, &n), TRAFFICDB_OK);
	CHECK_EQ_U64(n, 0);
	CHECK_EQ_U64(trafficdb_check(h), TRAFFICDB_OK);
	CHECK_EQ_U64(trafficdb_end(h), TRAFFICDB_OK);
	CHECK_EQ_U64(trafficdb_end(h), (uint64_t) TRAFFICDB_NOSNAPSHOT);
	CHECK_EQ_U64(trafficdb_get(h, 1041, &loc), (uint64_t) TRAFFICDB_NOSNAPSHOT);

	/* waiting: a timeout, then a publication that wakes the waiter at once */
	CHECK_EQ_U64(trafficdb_wait(h, 3, 50, &gen), (uint64_t) TRAFFICDB_TIMEOUT);
	publish_traffic(&w, map_seg, 4);
	CHECK_EQ_U64(trafficdb_wait(h, 3, 5000, &gen), TRAFFICDB_OK);
	CHECK_EQ_U64(gen, 4);

	/* an orderly stop: the handle says so; a new one finds nothing */
	tdb_writer_close(&w, true);
	CHECK_EQ_U64(trafficdb_begin(h, &gen), (uint64_t) TRAFFICDB_STALE);
	CHECK_EQ_U64(trafficdb_wait(h, 4, 10, &gen), (uint64_t) TRAFFICDB_STALE);
	trafficdb_close(h);
	CHECK_EQ_U64(trafficdb_open(client_prefix, &h), (uint64_t) TRAFFICDB_NOTRUNNING);
}

typedef struct Waker
{
	TdbWriter  *w;
	uint32_t	map_seg;
} Waker;

static void *
waker(void *p)
{
	Waker	   *wk = p;
	struct timespec ts = {0, 50 * 1000 * 1000};

	nanosleep(&ts, NULL);
	publish_traffic(wk->w, wk->map_seg, 8);
	return NULL;
}

UNIT_TEST(test_client_wait_is_woken)
{
	TdbWriter	w;
	uint32_t	map_seg;
	void	   *map_addr;
	trafficdb_handle *h;
	uint64_t	gen = 0;
	pthread_t	th;
	Waker		wk;

	snprintf(client_prefix, sizeof(client_prefix), "/tdbclient.%d", (int) getpid());
	CHECK_EQ_U64(open_published(&w, client_prefix, 4, 7, &map_seg, &map_addr, NULL), TDB_SHM_OK);
	CHECK_EQ_U64(trafficdb_open(client_prefix, &h), TRAFFICDB_OK);
	wk.w = &w;
	wk.map_seg = map_seg;
	pthread_create(&th, NULL, waker, &wk);
	/* blocks in the futex until the other thread publishes generation 8 */
	CHECK_EQ_U64(trafficdb_wait(h, 7, 10000, &gen), TRAFFICDB_OK);
	CHECK_EQ_U64(gen, 8);
	pthread_join(th, NULL);
	trafficdb_close(h);
	tdb_writer_close(&w, true);
}

/*
 * A waiter blocked in trafficdb_wait when the next writer finds the control
 * block incompatible and marks it stopped: it wakes at once with
 * TRAFFICDB_STALE (it used to sleep to its timeout).
 */
typedef struct StopWaiter
{
	trafficdb_handle *h;
	int			rc;
	double		seconds;
} StopWaiter;

static void *
stop_waiter(void *p)
{
	StopWaiter *sw = p;
	struct timespec a,
				b;
	uint64_t	gen;

	clock_gettime(CLOCK_MONOTONIC, &a);
	sw->rc = trafficdb_wait(sw->h, 7, 10000, &gen);
	clock_gettime(CLOCK_MONOTONIC, &b);
	sw->seconds = (double) (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
	return NULL;
}

UNIT_TEST(test_client_stopped_wakes_waiters)
{
	TdbWriter	w;
	TdbWriterOpenInfo info;
	char		err[TDB_ERRLEN];
	uint32_t	map_seg;
	void	   *map_addr;
	pthread_t	th;
	StopWaiter	sw = {0};
	struct timespec ts = {0, 100 * 1000 * 1000};

	snprintf(client_prefix, sizeof(client_prefix), "/tdbclient.%d", (int) getpid());
	CHECK_EQ_U64(open_published(&w, client_prefix, 4, 7, &map_seg, &map_addr, NULL), TDB_SHM_OK);
	CHECK_EQ_U64(trafficdb_open(client_prefix, &sw.h), TRAFFICDB_OK);
	tdb_writer_close(&w, false);	/* the daemon dies */
	pthread_create(&th, NULL, stop_waiter, &sw);
	nanosleep(&ts, NULL);
	/* the next daemon has another slot count: incompatible, so it stops the old block */
	CHECK_EQ_U64(test_writer_open(&w, client_prefix, 8, 0, &info, err), TDB_SHM_OK);
	CHECK(!info.adopted);
	pthread_join(th, NULL);
	CHECK_EQ_U64(sw.rc, (uint64_t) TRAFFICDB_STALE);
	CHECK(sw.seconds < 5.0);
	trafficdb_close(sw.h);
	tdb_writer_close(&w, true);
}

/*
 * Threads, each with its own handle (the documented rule), read while the
 * writer publishes: every snapshot is consistent.  Run under
 * ThreadSanitizer by `make unit-tsan`.
 */
typedef struct ThreadArg
{
	int			iterations;
	uint64_t	bad;
	uint64_t	errors;
} ThreadArg;

static void *
reader_thread_fn(void *p)
{
	ThreadArg  *a = p;
	trafficdb_handle *h;

	if (trafficdb_open(client_prefix, &h) != TRAFFICDB_OK)
	{
		a->errors++;
		return NULL;
	}
	for (int it = 0; it < a->iterations; it++)
	{
		uint64_t	gen;
		trafficdb_location loc;

		if (trafficdb_begin(h, &gen) != TRAFFICDB_OK)
		{
			a->errors++;
			continue;
		}
		for (uint64_t id = 1000 + (uint64_t) (it % 7); id < 1000 + NLOC; id += 97)
			if (trafficdb_get(h, id, &loc) != TRAFFICDB_OK || loc.traffic->speed_kmh != (float) gen)
				a->bad++;
		trafficdb_end(h);
	}
	trafficdb_close(h);
	return NULL;
}

UNIT_TEST(test_client_threads)
{
	TdbWriter	w;
	uint32_t	map_seg;
	void	   *map_addr;
	pthread_t	th[2];
	ThreadArg	args[2];

	snprintf(client_prefix, sizeof(client_prefix), "/tdbclient.%d", (int) getpid());
	CHECK_EQ_U64(open_published(&w, client_prefix, 8, 1, &map_seg, &map_addr, NULL), TDB_SHM_OK);
	memset(args, 0, sizeof(args));
	for (int t = 0; t < 2; t++)
	{
		args[t].iterations = 3000;
		pthread_create(&th[t], NULL, reader_thread_fn, &args[t]);
	}
	for (uint64_t g = 2; g < 400; g++)
		publish_traffic(&w, map_seg, g);
	for (int t = 0; t < 2; t++)
	{
		pthread_join(th[t], NULL);
		CHECK_EQ_U64(args[t].errors, 0);
		CHECK_EQ_U64(args[t].bad, 0);
	}
	tdb_writer_close(&w, true);
}

/*
 * A corrupted or foreign control block is refused with a code, never a
 * crash: named fields first, then random damage to the header.
 */
UNIT_TEST(test_client_rejects_bad_control_block)
{
	TdbWriter	w;
	char		name[TDB_SHM_NAME_MAX + 24];
	uint32_t	map_seg;
	void	   *map_addr;
	void	   *p;
	size_t		sz;
	unsigned char *saved;
	trafficdb_handle *h;
	uint64_t	seed = 99;

	snprintf(client_prefix, sizeof(client_prefix), "/tdbclient.%d", (int) getpid());
	CHECK_EQ_U64(open_published(&w, client_prefix, 4, 5, &map_seg, &map_addr, NULL), TDB_SHM_OK);
	tdb_shm_name(name, client_prefix, "ctl");
	CHECK_EQ_U64(tdb_shm_map(name, true, true, sizeof(TdbControl), &p, &sz), TDB_SHM_OK);
	saved = malloc(sz);
	memcpy(saved, p, sz);

	((TdbControl *) p)->magic = 0xDEADBEEF;
	CHECK_EQ_U64(trafficdb_open(client_prefix, &h), (uint64_t) TRAFFICDB_INVALID);
	memcpy(p, saved, sz);
	((TdbControl *) p)->version = 99;
	CHECK_EQ_U64(trafficdb_open(client_prefix, &h), (uint64_t) TRAFFICDB_INVALID);
	memcpy(p, saved, sz);
	((TdbControl *) p)->nslots = 1u << 30;
	CHECK_EQ_U64(trafficdb_open(client_prefix, &h), (uint64_t) TRAFFICDB_INVALID);
	memcpy(p, saved, sz);
	memset(((TdbControl *) p)->prefix, 'x', TDB_SHM_NAME_MAX);
	CHECK_EQ_U64(trafficdb_open(client_prefix, &h), (uint64_t) TRAFFICDB_INVALID);
	memcpy(p, saved, sz);
	((TdbControl *) p)->instance_id ^= 1;	/* the slots belong to another instance */
	CHECK_EQ_U64(trafficdb_open(client_prefix, &h), (uint64_t) TRAFFICDB_INVALID);
	memcpy(p, saved, sz);

	/* random damage anywhere in the block: a code, never a crash */
	for (int t = 0; t < 2000; t++)
	{
		uint64_t	gen;
		trafficdb_location loc;

		memcpy(p, saved, sz);
		for (int k = 0; k < 1 + (int) (unit_rand(&seed) % 6); k++)
			((unsigned char *) p)[unit_rand(&seed) % sizeof(TdbControl)] = (unsigned char) unit_rand(&seed);
		if (trafficdb_open(client_prefix, &h) != TRAFFICDB_OK)
			continue;
		if (trafficdb_begin(h, &gen) == TRAFFICDB_OK)
		{
			(void) trafficdb_get(h, 1041, &loc);
			trafficdb_end(h);
		}
		trafficdb_close(h);
	}
	memcpy(p, saved, sz);
	CHECK_EQ_U64(trafficdb_open(client_prefix, &h), TRAFFICDB_OK);
	trafficdb_close(h);
	free(saved);
	tdb_shm_unmap(p, sz);
	tdb_writer_close(&w, true);
}
