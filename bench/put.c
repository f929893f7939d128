/*
 * put.c
 *	  trafficdb_put (libtrafficdb's writers, src/client/writer.c) from one
 *	  producer, TRAFFICDB_ASYNC, with a consumer thread draining the ring
 *	  as the daemon would (tdb_ring_drain, applying nothing): the latency of
 *	  each call (clock_gettime around it) as p50 / p99, and updates per
 *	  second over the whole run.  No server: the bench publishes a map of
 *	  10,000 locations and creates <prefix>.writers itself, under a prefix
 *	  of its own that it removes at the end.
 *
 *	  put [CALLS]        (default 1,000,000)
 *
 * A call that finds the lane full (TRAFFICDB_BUSY) is retried and counted;
 * its latency is not in the percentiles.  Output: CSV lines name,value,unit.
 */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "ring/ring.h"
#include "trafficdb.h"
#include "writer.h"

#define NLOC 10000

static _Atomic int stop;
static TdbRing ring;

static int
apply_nothing(void *arg, const TdbRingUpdate *u, uint32_t lane, uint64_t ticket)
{
	(void) u;
	(void) lane;
	(void) ticket;
	(*(uint64_t *) arg)++;
	return 0;
}

static void *
consumer(void *arg)
{
	uint64_t   *n = arg;

	/* bounded by the producer: it sets stop when done */
	while (!atomic_load(&stop))
		if (tdb_ring_drain(&ring, 0, apply_nothing, n, NULL) == 0)
			sched_yield();
	tdb_ring_drain(&ring, 0, apply_nothing, n, NULL);
	return NULL;
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *) a;
	int64_t		y = *(const int64_t *) b;

	return (x > y) - (x < y);
}

/* A map of NLOC segments, published with its (empty) traffic as generation 1. */
static int
publish(TdbWriter *w, const char *prefix, char *err)
{
	TdbWriterConfig cfg = {.nexternal_slots = 4, .gid = (gid_t) -1, .lock_fd = -1, .postmaster_pid = 1};
	TdbWriterOpenInfo info;
	TdbMapBuilder *b;
	uint32_t	map_seg;
	uint32_t	tseg;
	void	   *addr;
	static TdbTraffic t[NLOC];
	int			rc;

	if ((rc = tdb_writer_open(w, prefix, &cfg, &info, err)) != TDB_SHM_OK)
		return rc;
	b = tdb_map_builder_create();
	for (int i = 0; i < NLOC; i++)
	{
		double		x = 24.9 + (i % 100) * 0.001;
		double		y = 60.15 + (i / 100) * 0.001;
		double		xy[4] = {x, y, x + 0.0005, y + 0.0003};

		tdb_map_builder_add(b, 1 + i, xy, 2, "primary", NULL, 50, 0, err);
	}
	tdb_map_builder_finish(b, err);
	rc = tdb_writer_new_segment(w, TDB_SEG_MAP, tdb_map_builder_size(b), &map_seg, &addr, err);
	if (rc == TDB_SHM_OK)
		tdb_map_builder_write(b, addr, 7, 0);
	tdb_map_builder_free(b);
	if (rc != TDB_SHM_OK)
		return rc;
	for (int i = 0; i < NLOC; i++)
	{
		t[i].speed_kmh = NAN;
		t[i].free_flow_kmh = NAN;
		t[i].congestion = TDB_CONGESTION_UNKNOWN;
		t[i].confidence = TDB_CONFIDENCE_UNKNOWN;
	}
	if ((rc = tdb_writer_traffic_segment(w, tdb_traffic_size(NLOC, 0), NULL, &tseg, &addr, err)) != TDB_SHM_OK)
		return rc;
	tdb_traffic_write(addr, 7, 1, NLOC, t, NULL, 0, 1);
	return tdb_writer_publish(w, 1, 7, map_seg, tseg, 1);
}

int
main(int argc, char **argv)
{
	long		calls = argc > 1 ? atol(argv[1]) : 1000000;
	char		prefix[64];
	char		err[TDB_ERRLEN];
	TdbWriter	w;
	trafficdb_writer *pw;
	pthread_t	t;
	uint64_t	drained = 0;
	int64_t    *lat;
	uint64_t	busy = 0;
	int64_t		t0;
	int64_t		t1;
	int			rc;

	if (calls < 1 || calls > 100000000)
	{
		fprintf(stderr, "usage: put [CALLS]   (1 .. 100,000,000)\n");
		return 2;
	}
	lat = malloc((size_t) calls * sizeof(int64_t));
	snprintf(prefix, sizeof(prefix), "/tdbbenchput.%d", (int) getpid());
	if (lat == NULL || (rc = publish(&w, prefix, err)) != TDB_SHM_OK)
	{
		fprintf(stderr, "put: cannot publish a map: %s\n", lat ? err : "out of memory");
		return 1;
	}
	if ((rc = tdb_ring_create(&ring, prefix, 4, 65536, (gid_t) -1, w.ctl->instance_id, err)) != TDB_SHM_OK)
	{
		fprintf(stderr, "put: %s\n", err);
		tdb_writer_close(&w, true);
		return 1;
	}
	tdb_ring_set_state(&ring, TDB_RING_RUNNING, 0);
	if ((rc = trafficdb_writer_open(prefix, &pw)) != TRAFFICDB_OK)
	{
		fprintf(stderr, "put: %s: %s\n", trafficdb_strerror(rc), trafficdb_writer_errmsg(NULL));
		tdb_ring_remove(&ring);
		tdb_writer_close(&w, true);
		return 1;
	}
	pthread_create(&t, NULL, consumer, &drained);
	t0 = tdb_mono_ns();
	for (long i = 0; i < calls; i++)
	{
		trafficdb_update u = {.location_id = 1 + (uint64_t) (i % NLOC), .speed_kmh = (float) (i % 120),
		.confidence = 80, .has = TRAFFICDB_HAS_SPEED | TRAFFICDB_HAS_CONFIDENCE};
		int64_t		a;

		for (long tries = 0; tries < 100000000; tries++)
		{
			a = tdb_mono_ns();
			rc = trafficdb_put(pw, &u, TRAFFICDB_ASYNC);
			lat[i] = tdb_mono_ns() - a;
			if (rc != TRAFFICDB_BUSY)
				break;
			busy++;
			sched_yield();
		}
		if (rc != TRAFFICDB_OK)
		{
			fprintf(stderr, "put: %s: %s\n", trafficdb_strerror(rc), trafficdb_writer_errmsg(pw));
			break;
		}
	}
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	t1 = tdb_mono_ns();
	qsort(lat, (size_t) calls, sizeof(int64_t), cmp_i64);
	printf("put_async_p50,%lld,ns\n", (long long) lat[calls / 2]);
	printf("put_async_p99,%lld,ns\n", (long long) lat[calls * 99 / 100]);
	printf("put_async_max,%lld,ns\n", (long long) lat[calls - 1]);
	printf("put_async_rate,%.0f,updates/s\n", (double) calls / ((double) (t1 - t0) / 1e9));
	printf("put_async_busy,%llu,calls\n", (unsigned long long) busy);
	printf("put_drained,%llu,updates\n", (unsigned long long) drained);
	trafficdb_writer_close(pw);
	tdb_ring_remove(&ring);
	tdb_writer_close(&w, true);
	free(lat);
	return drained == (uint64_t) calls ? 0 : 1;
}
