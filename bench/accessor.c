/*
 * accessor.c
 *	  libtrafficdb through its public API, as a routing engine would use it:
 *	  GETs per second (single, batched 64 at a time) over 1 and 2 threads,
 *	  and box / radius queries per second.  One handle per thread.
 *
 *	  accessor PREFIX MAX_ID SECONDS
 *	  accessor PREFIX wakeups COUNT       publish-to-wakeup latency of trafficdb_wait
 *	                                      (something else must publish COUNT times)
 *
 * Ids are drawn uniformly from 1..MAX_ID (the map bench/accessor.sh loads),
 * generated before the clock starts (an array of 1 M, read in order) so the
 * figures are the library's, not the random generator's.  A snapshot is
 * pinned for every 1,000 GETs (every query for boxes), as a reader would
 * between two publications.  The baseline measured in the same run: a bare
 * open-addressing probe (16-byte key/value slots, half full) over 1 GiB of
 * private memory with the same id stream, the floor of one cache miss per
 * lookup.  Output: CSV lines name,value,unit.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "trafficdb.h"
#include "../tools/slice.h"

static const char *prefix;
static uint64_t max_id;
static double seconds;
static int threads_max;

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t
rnd(uint64_t *s)
{
	uint64_t	z = (*s += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

#define NIDS (1 << 20)
static uint64_t *ids_all;		/* NIDS random ids in 1..max_id */
static uint64_t *ids_bare;		/* NIDS random keys of the whole baseline table */

/* The baseline: a bare open-addressing table, key and value in the slot. */
static uint64_t *bare;
static uint64_t bare_mask;

static inline uint64_t
mix(uint64_t id)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdull;
	id ^= id >> 33;
	id *= 0xc4ceb9fe1a85ec53ull;
	id ^= id >> 33;
	return id;
}

static void
bare_build(void)
{
	uint64_t	nslots = (1ull << 30) / 16;

	bare_mask = nslots - 1;
	bare = calloc(nslots, 16);
	if (bare == NULL)
	{
		fprintf(stderr, "accessor: no memory for the 1 GiB baseline table\n");
		exit(1);
	}
	/* half full, keys 1..nslots/2; probes draw from all of them */
	for (uint64_t key = 1; key <= nslots / 2; key++)
	{
		uint64_t	p = mix(key) & bare_mask;

		while (bare[2 * p] != 0)
			p = (p + 1) & bare_mask;
		bare[2 * p] = key;
		bare[2 * p + 1] = key * 3;
	}
}

typedef struct Job
{
	int			batched;		/* 0 single, 1 batched, 2 the bare baseline,
								 * 3 trafficdb_get_traffic */
	uint64_t	seed;
	uint64_t	ops;
	double		checksum;
} Job;

static void *
get_worker(void *p)
{
	Job		   *job = p;
	trafficdb_handle *h;
	double		end = now_s() + seconds;
	trafficdb_location out[64];
	uint8_t		found[64];

	if (trafficdb_open(prefix, &h) != TRAFFICDB_OK)
	{
		fprintf(stderr, "accessor: cannot open %s\n", prefix);
		exit(1);
	}
	size_t		next = (size_t) (job->seed * 7919) % NIDS;

	while (now_s() < end)
	{
		if (next + 1024 > NIDS)
			next = 0;
		if (job->batched == 2)
		{
			for (int r = 0; r < 1024; r++)
			{
				uint64_t	id = ids_bare[next++];
				uint64_t	p = mix(id) & bare_mask;

				while (bare[2 * p] != id && bare[2 * p] != 0)
					p = (p + 1) & bare_mask;
				job->checksum += (double) bare[2 * p + 1];
			}
			job->ops += 1024;
			continue;
		}
		trafficdb_begin(h, NULL);
		for (int r = 0; r < 1024 / (job->batched == 1 ? 64 : 1); r++)
		{
			if (job->batched == 1)
			{
				trafficdb_get_many(h, &ids_all[next], 64, out, found);
				next += 64;
				job->checksum += out[0].traffic->speed_kmh;
				job->ops += 64;
			}
			else if (job->batched == 3)
			{
				const trafficdb_traffic *t;

				if (trafficdb_get_traffic(h, ids_all[next++], &t) == TRAFFICDB_OK)
					job->checksum += t->speed_kmh;
				job->ops++;
			}
			else
			{
				trafficdb_location loc;

				if (trafficdb_get(h, ids_all[next++], &loc) == TRAFFICDB_OK)
					job->checksum += loc.traffic->speed_kmh;
				job->ops++;
			}
		}
		trafficdb_end(h);
	}
	trafficdb_close(h);
	return NULL;
}

static double
run_gets(int threads, int batched)
{
	pthread_t	th[8];
	Job			jobs[8];
	uint64_t	total = 0;
	double		t0 = now_s(),
				t1;

	for (int t = 0; t < threads; t++)
	{
		memset(&jobs[t], 0, sizeof(Job));
		jobs[t].batched = batched;
		jobs[t].seed = 17 + (uint64_t) t;
		pthread_create(&th[t], NULL, get_worker, &jobs[t]);
	}
	for (int t = 0; t < threads; t++)
	{
		pthread_join(th[t], NULL);
		total += jobs[t].ops;
	}
	t1 = now_s();
	return total / (t1 - t0);
}

static int
count_visit(const trafficdb_location *loc, void *arg)
{
	(void) loc;
	(*(uint64_t *) arg)++;
	return 0;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	trafficdb_handle *h;
	uint64_t	seed = 5;
	static const int kms[] = {2, 5, 10, 20, 50};

	if (argc == 4 && strcmp(argv[2], "wakeups") == 0)
	{
		/* from the daemon's publication (its clock) to this process running */
		int			n = atoi(argv[3]);
		double	   *lat = calloc((size_t) n, sizeof(double));
		uint64_t	gen;
		int			got = 0;

		if (getenv("TDB_SLICE_US") != NULL)
			tdb_set_slice("accessor", atol(getenv("TDB_SLICE_US")));
		if (trafficdb_open(argv[1], &h) != TRAFFICDB_OK || trafficdb_begin(h, &gen) != TRAFFICDB_OK)
			return 1;
		trafficdb_end(h);
		printf("ready\n");
		fflush(stdout);
		while (got < n && trafficdb_wait(h, gen, 30000, &gen) == TRAFFICDB_OK)
		{
			struct timespec ts;
			int64_t		pub;

			clock_gettime(CLOCK_REALTIME, &ts);
			trafficdb_begin(h, &gen);
			trafficdb_published_at(h, &pub);
			trafficdb_end(h);
			lat[got++] = ((double) ts.tv_sec * 1e6 + ts.tv_nsec / 1e3) - (double) pub;
		}
		if (got > 0)
		{
			double		sum = 0,
						max = 0;

			for (int i = 0; i < got; i++)
			{
				sum += lat[i];
				max = lat[i] > max ? lat[i] : max;
			}
			printf("wakeup_latency_avg,%.1f,us\nwakeup_latency_max,%.1f,us\nwakeups,%d,count\n",
				   sum / got, max, got);
			qsort(lat, (size_t) got, sizeof(double), cmp_double);
			printf("wakeup_latency_p50,%.1f,us\nwakeup_latency_p99,%.1f,us\n",
				   lat[(int) (got * 0.5 + 0.5) - 1 < 0 ? 0 : (int) (got * 0.5 + 0.5) - 1],
				   lat[(int) (got * 0.99 + 0.5) - 1 < 0 ? 0 : (int) (got * 0.99 + 0.5) - 1]);
		}
		trafficdb_close(h);
		return got == n ? 0 : 1;
	}
	if (argc != 4)
	{
		fprintf(stderr, "usage: accessor PREFIX MAX_ID SECONDS | accessor PREFIX wakeups COUNT\n");
		return 2;
	}
	prefix = argv[1];
	max_id = strtoull(argv[2], NULL, 10);
	seconds = atof(argv[3]);
	threads_max = (int) sysconf(_SC_NPROCESSORS_ONLN);
	threads_max = threads_max < 1 ? 1 : threads_max > 8 ? 8 : threads_max;

	ids_all = malloc(NIDS * sizeof(uint64_t));
	ids_bare = malloc(NIDS * sizeof(uint64_t));
	bare_build();
	for (size_t i = 0; i < NIDS; i++)
	{
		ids_all[i] = 1 + rnd(&seed) % max_id;
		ids_bare[i] = 1 + rnd(&seed) % ((bare_mask + 1) / 2);
	}
	for (int t = 1; t <= threads_max; t++)
	{
		printf("bare_probe_%dthread,%.0f,ops/s\n", t, run_gets(t, 2));
		printf("get_%dthread,%.0f,ops/s\n", t, run_gets(t, 0));
		printf("get_traffic_%dthread,%.0f,ops/s\n", t, run_gets(t, 3));
		printf("get_batched64_%dthread,%.0f,ops/s\n", t, run_gets(t, 1));
		fflush(stdout);
	}
	free(bare);

	if (trafficdb_open(prefix, &h) != TRAFFICDB_OK)
		return 1;
	for (size_t b = 0; b < sizeof(kms) / sizeof(kms[0]); b++)
	{
		double		end = now_s() + seconds,
					t0 = now_s();
		uint64_t	queries = 0,
					rows = 0;

		while (now_s() < end)
		{
			double		x = 10 + (rnd(&seed) % 1000000) / 1e6;
			double		y = 45 + (rnd(&seed) % 1000000) / 1e6;

			trafficdb_begin(h, NULL);
			trafficdb_bbox(h, x, y, x + kms[b] / 78.8, y + kms[b] / 111.2, count_visit, &rows);
			trafficdb_end(h);
			queries++;
		}
		printf("bbox_%dkm,%.0f,queries/s\n", kms[b], queries / (now_s() - t0));
		fflush(stdout);
	}
	for (size_t b = 0; b < sizeof(kms) / sizeof(kms[0]); b++)
	{
		double		end = now_s() + seconds,
					t0 = now_s();
		uint64_t	queries = 0,
					rows = 0;

		while (now_s() < end)
		{
			trafficdb_begin(h, NULL);
			trafficdb_radius(h, 10 + (rnd(&seed) % 1000000) / 1e6, 45 + (rnd(&seed) % 1000000) / 1e6,
					   kms[b] * 1000.0, count_visit, &rows);
			trafficdb_end(h);
			queries++;
		}
		printf("radius_%dkm,%.0f,queries/s\n", kms[b], queries / (now_s() - t0));
		fflush(stdout);
	}
	{
		double		end = now_s() + seconds,
					t0 = now_s();
		uint64_t	queries = 0,
					rows = 0;

		while (now_s() < end)
		{
			trafficdb_begin(h, NULL);
			trafficdb_knn(h, 10 + (rnd(&seed) % 1000000) / 1e6, 45 + (rnd(&seed) % 1000000) / 1e6, 10,
					count_visit, &rows);
			trafficdb_end(h);
			queries++;
		}
		printf("knn_10,%.0f,queries/s\n", queries / (now_s() - t0));
	}
	trafficdb_close(h);
	return 0;
}
