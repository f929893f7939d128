/*
 * put_server.c
 *	  trafficdb_put against a running server, through the daemon, with the
 *	  public API only (include/trafficdb.h):
 *
 *	  async   one producer, TRAFFICDB_ASYNC: latency of each call (p50, p99)
 *	          and updates per second until the last one is committed and
 *	          published (trafficdb_sync after the last put)
 *	  sync    PRODUCERS threads (default 4), each putting batches of BATCH (1,000)
 *	          with trafficdb_put_many(TRAFFICDB_SYNC): updates per second and
 *	          the acknowledgement latency of a batch (p50, p99)
 *
 *	  put_server NAME LOCATIONS [ASYNC_CALLS [PRODUCERS [SYNC_BATCHES [BATCH [QUIET_MS]]]]]
 *
 * ASYNC_CALLS 0 skips the async part; QUIET_MS > 0 makes each sync batch
 * wait that long first, with nothing put (bench/idle.sh: a sync put into
 * a sleeping ring, what waking the daemon costs), after an untimed first
 * put (a writer's first put reads and checks the map).
 *
 * Location ids 1 .. LOCATIONS must be in the published map.  Output: CSV
 * lines name,value,unit.  Every loop is bounded by its count.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "trafficdb.h"

static const char *name;
static uint64_t nloc;
static long sync_batches;
static pthread_barrier_t sync_start;
static int batch_size = 1000;
static long quiet_ms;			/* > 0: each sync batch after this long with nothing put */

static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *) a;
	int64_t		y = *(const int64_t *) b;

	return x < y ? -1 : x > y;
}

static uint64_t
rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void
die(const char *what, int rc, trafficdb_writer *w)
{
	fprintf(stderr, "put_server: %s: %s (%s)\n", what, trafficdb_strerror(rc),
			w ? trafficdb_writer_errmsg(w) : "");
	exit(1);
}

/* put one update, retrying (bounded) while the lane is full */
static int
put_retry(trafficdb_writer *w, const trafficdb_update *u, int flags)
{
	int			rc = TRAFFICDB_BUSY;

	for (int k = 0; k < 100000 && rc == TRAFFICDB_BUSY; k++)
	{
		rc = trafficdb_put(w, u, flags);
		if (rc == TRAFFICDB_BUSY)
			usleep(trafficdb_retry_after_us(w) > 0 ? trafficdb_retry_after_us(w) : 100);
	}
	return rc;
}

typedef struct SyncArg
{
	uint64_t	seed;
	int64_t    *lat;			/* per batch, ns */
	long		done;
	int			rc;
	int64_t		first_put_ns;	/* the warming put: attach, validate, commit */
} SyncArg;

static void *
sync_producer(void *p)
{
	SyncArg    *a = p;
	trafficdb_writer *w;
	trafficdb_update *u = calloc((size_t) batch_size, sizeof(trafficdb_update));
	int			rc = trafficdb_writer_open(name, &w);

	if (rc != TRAFFICDB_OK || u == NULL)
	{
		a->rc = rc != TRAFFICDB_OK ? rc : TRAFFICDB_NOMEM;
		free(u);
		pthread_barrier_wait(&sync_start);
		return NULL;
	}
	trafficdb_writer_set_timeout(w, 60000);
	{
		/*
		 * Warm: a writer's first put attaches the map and validates it (a
		 * second at 1 M locations): measured apart, before the clock starts.
		 */
		int64_t		t0 = now_ns();

		u[0].location_id = 1;
		u[0].speed_kmh = 50;
		u[0].has = TRAFFICDB_HAS_SPEED;
		rc = trafficdb_put_many(w, u, 1, TRAFFICDB_SYNC | TRAFFICDB_WAIT, NULL);
		a->first_put_ns = now_ns() - t0;
		pthread_barrier_wait(&sync_start);
		if (rc != TRAFFICDB_OK)
		{
			a->rc = rc;
			trafficdb_writer_close(w);
			free(u);
			return NULL;
		}
	}
	for (long b = 0; b < sync_batches && a->rc == TRAFFICDB_OK; b++)
	{
		size_t		acc = 0;
		int64_t		t0;

		if (quiet_ms > 0)
			usleep((useconds_t) (quiet_ms * 1000));

		for (int k = 0; k < batch_size; k++)
		{
			u[k].location_id = 1 + rnd(&a->seed) % nloc;
			u[k].speed_kmh = (float) (rnd(&a->seed) % 120);
			u[k].has = TRAFFICDB_HAS_SPEED;
		}
		t0 = now_ns();
		rc = trafficdb_put_many(w, u, (size_t) batch_size, TRAFFICDB_SYNC | TRAFFICDB_WAIT, &acc);
		if (rc != TRAFFICDB_OK)
		{
			a->rc = rc;
			break;
		}
		a->lat[b] = now_ns() - t0;
		a->done++;
	}
	trafficdb_writer_close(w);
	free(u);
	return NULL;
}

/* One producer, TRAFFICDB_ASYNC: trafficdb_put per call, then trafficdb_put_many of 1,000. */
static void
async_part(long calls)
{
	trafficdb_writer *w;
	int64_t    *lat;
	uint64_t	seed = 88172645463325252ull;
	int64_t		t0,
				t1;
	int			rc;

	/* async, one producer */
	rc = trafficdb_writer_open(name, &w);
	if (rc != TRAFFICDB_OK)
		die("trafficdb_writer_open", rc, NULL);
	trafficdb_writer_set_timeout(w, 60000);
	lat = malloc(sizeof(int64_t) * (size_t) calls);
	if (lat == NULL)
		die("malloc", TRAFFICDB_NOMEM, NULL);
	t0 = now_ns();
	for (long i = 0; i < calls; i++)
	{
		trafficdb_update u = {0};
		int64_t		c0;

		u.location_id = 1 + rnd(&seed) % nloc;
		u.speed_kmh = (float) (i % 120);
		u.congestion = (uint8_t) (i % 5);
		u.has = TRAFFICDB_HAS_SPEED | TRAFFICDB_HAS_CONGESTION;
		c0 = now_ns();
		rc = trafficdb_put(w, &u, TRAFFICDB_ASYNC);
		lat[i] = now_ns() - c0;
		if (rc == TRAFFICDB_BUSY)
			rc = put_retry(w, &u, TRAFFICDB_ASYNC);
		if (rc != TRAFFICDB_OK)
			die("trafficdb_put", rc, w);
	}
	rc = trafficdb_sync(w, 60000);
	t1 = now_ns();
	if (rc != TRAFFICDB_OK)
		die("trafficdb_sync", rc, w);
	qsort(lat, (size_t) calls, sizeof(int64_t), cmp_i64);
	printf("put_async_p50,%lld,ns\n", (long long) lat[calls / 2]);
	printf("put_async_p99,%lld,ns\n", (long long) lat[calls * 99 / 100]);
	printf("put_async_committed_per_s,%.0f,updates/s\n", calls / ((t1 - t0) / 1e9));
	free(lat);

	/* the same through trafficdb_put_many, batches of 1,000, ASYNC */
	{
		trafficdb_update *u = calloc(1000, sizeof(trafficdb_update));
		long		nb = (calls + 999) / 1000;

		if (u == NULL)
			die("calloc", TRAFFICDB_NOMEM, NULL);
		t0 = now_ns();
		for (long b = 0; b < nb; b++)
		{
			size_t		acc = 0;

			for (int k = 0; k < 1000; k++)
			{
				u[k].location_id = 1 + rnd(&seed) % nloc;
				u[k].speed_kmh = (float) ((b + k) % 120);
				u[k].has = TRAFFICDB_HAS_SPEED;
			}
			rc = trafficdb_put_many(w, u, 1000, TRAFFICDB_ASYNC | TRAFFICDB_WAIT, &acc);
			if (rc != TRAFFICDB_OK)
				die("trafficdb_put_many", rc, w);
		}
		t1 = now_ns();
		printf("put_many_async_enqueued_per_s,%.0f,updates/s\n", nb * 1000.0 / ((t1 - t0) / 1e9));
		rc = trafficdb_sync(w, 60000);
		t1 = now_ns();
		if (rc != TRAFFICDB_OK)
			die("trafficdb_sync", rc, w);
		printf("put_many_async_committed_per_s,%.0f,updates/s\n", nb * 1000.0 / ((t1 - t0) / 1e9));
		free(u);
	}
	trafficdb_writer_close(w);
}

int
main(int argc, char **argv)
{
	long		calls;
	int			producers;
	int64_t		t0,
				t1;

	if (argc < 3)
	{
		fprintf(stderr, "usage: put_server NAME LOCATIONS [ASYNC_CALLS [PRODUCERS [SYNC_BATCHES [BATCH [QUIET_MS]]]]]\n");
		return 2;
	}
	name = argv[1];
	nloc = strtoull(argv[2], NULL, 10);
	calls = argc > 3 ? atol(argv[3]) : 1000000;
	producers = argc > 4 ? atoi(argv[4]) : 4;
	sync_batches = argc > 5 ? atol(argv[5]) : 500;
	batch_size = argc > 6 ? atoi(argv[6]) : 1000;
	quiet_ms = argc > 7 ? atol(argv[7]) : 0;
	if (nloc == 0 || calls < 0 || producers <= 0 || producers > 64 || sync_batches <= 0 ||
		batch_size <= 0 || batch_size > 100000 || quiet_ms < 0 || quiet_ms > 60000)
	{
		fprintf(stderr, "put_server: LOCATIONS, PRODUCERS (1-64), SYNC_BATCHES and BATCH (1-100000) must be positive, ASYNC_CALLS not negative, QUIET_MS 0-60000\n");
		return 2;
	}

	if (calls > 0)
		async_part(calls);

	/* sync, several producers */
	{
		pthread_t	th[64];
		SyncArg		a[64];
		int64_t    *all;
		long		n = 0;

		memset(a, 0, sizeof(a));
		pthread_barrier_init(&sync_start, NULL, (unsigned) producers + 1);
		for (int p = 0; p < producers; p++)
		{
			a[p].seed = 0x9E3779B97F4A7C15ull * (uint64_t) (p + 1);
			a[p].lat = calloc((size_t) sync_batches, sizeof(int64_t));
			if (a[p].lat == NULL || pthread_create(&th[p], NULL, sync_producer, &a[p]) != 0)
				return 1;
		}
		/* the clock starts when every producer has its first (warming) put acknowledged */
		pthread_barrier_wait(&sync_start);
		t0 = now_ns();
		for (int p = 0; p < producers; p++)
			pthread_join(th[p], NULL);
		t1 = now_ns();
		all = malloc(sizeof(int64_t) * (size_t) sync_batches * producers);
		for (int p = 0; p < producers; p++)
		{
			if (a[p].rc != TRAFFICDB_OK)
				die("sync producer", a[p].rc, NULL);
			memcpy(all + n, a[p].lat, sizeof(int64_t) * a[p].done);
			n += a[p].done;
			free(a[p].lat);
		}
		qsort(all, (size_t) n, sizeof(int64_t), cmp_i64);
		printf("put_sync_per_s,%.0f,updates/s\n", (double) n * batch_size / ((t1 - t0) / 1e9));
		printf("put_sync_ack_p50,%.2f,ms\n", all[n / 2] / 1e6);
		printf("put_sync_ack_p99,%.2f,ms\n", all[n * 99 / 100] / 1e6);
		{
			int64_t		first = 0;

			for (int p = 0; p < producers; p++)
				first = a[p].first_put_ns > first ? a[p].first_put_ns : first;
			printf("put_sync_first_put_ms,%.2f,ms\n", first / 1e6);
		}
		free(all);
	}
	return 0;
}
