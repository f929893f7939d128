/*
 * accessor.c
 *	  libtrafficdb through its public API, as a routing engine would use it:
 *	  GETs per second (single, get_traffic, batched 64 at a time) over 1 and
 *	  2 threads, and box / radius queries per second.  One handle per thread.
 *
 *	  accessor PREFIX MAX_ID SECONDS [REPS]
 *	  accessor PREFIX wakeups COUNT       publish-to-wakeup latency of trafficdb_wait
 *	                                      (something else must publish COUNT times)
 *
 * Ids are drawn uniformly from 1..MAX_ID (the map bench/accessor.sh loads),
 * generated before the clock starts (an array of 1 M, read in order) so the
 * figures are the library's, not the random generator's.  Rates are per
 * second of CPU time of the measuring threads (the sum over the threads),
 * so that on a shared machine the time slices other processes take do not
 * count (their use of the caches and memory still does); wall_* lines
 * give the same per wall-clock second (as redis-benchmark counts).  A snapshot is
 * pinned for every 1,000 GETs (every query for boxes), as a reader would
 * between two publications.  The baseline measured in the same run: a bare
 * open-addressing probe (16-byte key/value slots, half full) over 1 GiB of
 * private memory with the same id stream, the floor of one cache miss per
 * lookup, twice: on 4 kB pages (MADV_NOHUGEPAGE) and on transparent huge
 * pages where the kernel grants them (MADV_HUGEPAGE; the kB it granted is
 * printed).  The GET figures are taken REPS times (default 1), every
 * measure of a round right after the other, so the bare probe and the GETs
 * see the same machine; printed are the medians over the rounds, and the
 * medians of the per-round ratios to the bare probes.  Also printed: how
 * much of the shared memory this process maps is on huge pages.
 * ACCESSOR_GETS_ONLY=1 skips the box, radius and nearest queries;
 * ACCESSOR_ONLY=bare_probe_thp,get (names of measures, comma-separated)
 * takes only those GET measures.
 * Output: CSV lines name,value,unit.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/* CPU time of the calling thread: what it ran, not what other processes took */
static double
cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
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

/*
 * The baseline: a bare open-addressing table, key and value in the slot, on
 * 4 kB pages (bare_t[0]) and on transparent huge pages (bare_t[1]).
 */
#define BARE_BYTES (1ull << 30)
static uint64_t *bare_t[2];
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

/*
 * kB of [lo, lo + len) (or, with lo NULL, of every mapping whose path holds
 * name) on huge pages and in all, from /proc/self/smaps.
 */
static void
smaps_kb(const void *lo, size_t len, const char *name, uint64_t *huge_kb, uint64_t *rss_kb)
{
	FILE	   *f = fopen("/proc/self/smaps", "r");
	char		line[512];
	bool		in = false;

	*huge_kb = *rss_kb = 0;
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL)
	{
		unsigned long a,
					b;
		unsigned long long kb;
		char		field[64];

		if (sscanf(line, "%lx-%lx ", &a, &b) == 2)	/* a mapping's first line */
		{
			if (lo != NULL)
				in = a < (uintptr_t) lo + len && b > (uintptr_t) lo;
			else
				in = strstr(line, name) != NULL;
			continue;
		}
		if (!in || sscanf(line, "%63[^:]: %llu kB", field, &kb) != 2)
			continue;
		if (strcmp(field, "Rss") == 0)
			*rss_kb += kb;
		else if (strcmp(field, "AnonHugePages") == 0 || strcmp(field, "ShmemPmdMapped") == 0 ||
				 strcmp(field, "FilePmdMapped") == 0)
			*huge_kb += kb;
	}
	fclose(f);
}

static uint64_t *
bare_build(bool huge)
{
	uint64_t	nslots = BARE_BYTES / 16;
	uint64_t   *bare;

	/* 2 MB aligned (a huge page needs it): map 2 MB more and use the aligned part */
	bare = mmap(NULL, BARE_BYTES + (2u << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (bare == MAP_FAILED)
	{
		fprintf(stderr, "accessor: no memory for the 1 GiB baseline table: %s\n", strerror(errno));
		exit(1);
	}
	bare = (uint64_t *) (((uintptr_t) bare + (2u << 20) - 1) & ~(uintptr_t) ((2u << 20) - 1));
	/* before the first touch: the pages are chosen at the first fault */
	if (madvise(bare, BARE_BYTES, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0)
		fprintf(stderr, "accessor: madvise(%s) failed: %s\n", huge ? "MADV_HUGEPAGE" : "MADV_NOHUGEPAGE",
				strerror(errno));
	/* half full, keys 1..nslots/2; probes draw from all of them */
	for (uint64_t key = 1; key <= nslots / 2; key++)
	{
		uint64_t	p = mix(key) & bare_mask;

		while (bare[2 * p] != 0)
			p = (p + 1) & bare_mask;
		bare[2 * p] = key;
		bare[2 * p + 1] = key * 3;
	}
	return bare;
}

typedef struct Job
{
	int			batched;		/* 0 single, 1 batched, 2 the bare baseline
								 * (4 kB pages), 3 trafficdb_get_traffic, 4
								 * the bare baseline on huge pages */
	uint64_t	seed;
	uint64_t	ops;
	double		checksum;
	double		t0;				/* CPU time of the thread at the start and */
	double		t1;				/* the end of the measure */
	double		w0;				/* the same in wall-clock time */
	double		w1;
} __attribute__((aligned(128))) Job;	/* each thread's on lines of its own: no false sharing */

static pthread_barrier_t start_line;	/* every thread opened: go */

static void *
get_worker(void *p)
{
	Job		   *job = p;
	trafficdb_handle *h;
	double		end;
	trafficdb_location out[64];
	uint8_t		found[64];
	size_t		next = (size_t) (job->seed * 7919) % NIDS;
	uint64_t	ops = 0;		/* in registers, not written to *job at every lookup */
	double		checksum = 0;

	/* opening (the map's validation, once per handle) is not what is measured */
	if (trafficdb_open(prefix, &h) != TRAFFICDB_OK || trafficdb_begin(h, NULL) != TRAFFICDB_OK)
	{
		fprintf(stderr, "accessor: cannot open %s: %s\n", prefix, trafficdb_errmsg(NULL));
		exit(1);
	}
	trafficdb_end(h);
	pthread_barrier_wait(&start_line);
	job->w0 = now_s();
	end = job->w0 + seconds;
	job->t0 = cpu_s();

	while (now_s() < end)
	{
		if (next + 1024 > NIDS)
			next = 0;
		if (job->batched == 2 || job->batched == 4)
		{
			const uint64_t *bare = bare_t[job->batched == 4];

			for (int r = 0; r < 1024; r++)
			{
				uint64_t	id = ids_bare[next++];
				uint64_t	p = mix(id) & bare_mask;

				while (bare[2 * p] != id && bare[2 * p] != 0)
					p = (p + 1) & bare_mask;
				checksum += (double) bare[2 * p + 1];
			}
			ops += 1024;
			continue;
		}
		trafficdb_begin(h, NULL);
		for (int r = 0; r < 1024 / (job->batched == 1 ? 64 : 1); r++)
		{
			if (job->batched == 1)
			{
				trafficdb_get_many(h, &ids_all[next], 64, out, found);
				next += 64;
				checksum += out[0].traffic->speed_kmh;
				ops += 64;
			}
			else if (job->batched == 3)
			{
				const trafficdb_traffic *t;

				if (trafficdb_get_traffic(h, ids_all[next++], &t) == TRAFFICDB_OK)
					checksum += t->speed_kmh;
				ops++;
			}
			else
			{
				trafficdb_location loc;

				if (trafficdb_get(h, ids_all[next++], &loc) == TRAFFICDB_OK)
					checksum += loc.traffic->speed_kmh;
				ops++;
			}
		}
		trafficdb_end(h);
	}
	job->ops = ops;
	job->checksum = checksum;
	job->t1 = cpu_s();
	job->w1 = now_s();
	trafficdb_close(h);
	return NULL;
}

/* ops per CPU second, summed over the threads; *wall: per wall-clock second */
static double
run_gets(int threads, int batched, double *wall)
{
	pthread_t	th[8];
	Job			jobs[8];
	double		rate = 0;

	*wall = 0;

	pthread_barrier_init(&start_line, NULL, (unsigned) threads);
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
		rate += jobs[t].ops / (jobs[t].t1 - jobs[t].t0);
		*wall += jobs[t].ops / (jobs[t].w1 - jobs[t].w0);
	}
	pthread_barrier_destroy(&start_line);
	return rate;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

/* the measures of a round, in the order they run */
static const struct
{
	const char *name;
	int			mode;			/* Job.batched */
}			measures[] = {
	{"bare_probe", 2}, {"bare_probe_thp", 4}, {"get", 0}, {"get_traffic", 3}, {"get_batched64", 1},
};
#define NMEASURES (int) (sizeof(measures) / sizeof(measures[0]))
#define MAX_REPS 99

static int	reps;

/* Is measure m taken?  ACCESSOR_ONLY=name,name... takes only those. */
static bool
measured(int m)
{
	const char *only = getenv("ACCESSOR_ONLY");

	if (only == NULL || only[0] == '\0')
		return true;
	for (const char *p = only; (p = strstr(p, measures[m].name)) != NULL; p++)
		if ((p == only || p[-1] == ',') && (p[strlen(measures[m].name)] == ',' || p[strlen(measures[m].name)] == '\0'))
			return true;
	return false;
}

static double
median(double *v, int n)
{
	qsort(v, (size_t) n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * REPS rounds over 1..threads_max threads, each measure right after the
 * other; then per thread count the median of every measure and of the
 * per-round ratios of the GETs to the two bare probes, and the page sizes.
 */
static void
run_get_rounds(void)
{
	static double v[8][NMEASURES][MAX_REPS];
	static double w[8][NMEASURES][MAX_REPS];	/* wall-clock rates */
	double		tmp[MAX_REPS];
	uint64_t	huge_kb,
				rss_kb;

	for (int r = 0; r < reps; r++)
		for (int t = 1; t <= threads_max; t++)
		{
			fprintf(stderr, "accessor: round %d/%d, %d thread%s:", r + 1, reps, t, t > 1 ? "s" : "");
			for (int m = 0; m < NMEASURES; m++)
			{
				if (!measured(m))
					continue;
				v[t - 1][m][r] = run_gets(t, measures[m].mode, &w[t - 1][m][r]);
				fprintf(stderr, " %s %.0f", measures[m].name, v[t - 1][m][r]);
			}
			fprintf(stderr, "\n");
		}
	for (int t = 1; t <= threads_max; t++)
	{
		for (int m = 0; m < NMEASURES; m++)
		{
			if (!measured(m))
				continue;
			memcpy(tmp, v[t - 1][m], sizeof(double) * (size_t) reps);
			printf("%s_%dthread,%.0f,ops/s\n", measures[m].name, t, median(tmp, reps));
			memcpy(tmp, w[t - 1][m], sizeof(double) * (size_t) reps);
			printf("wall_%s_%dthread,%.0f,ops/s\n", measures[m].name, t, median(tmp, reps));
		}
		for (int m = 2; m < NMEASURES; m++)
			for (int b = 0; b < 2; b++)
			{
				if (!measured(m) || !measured(b))
					continue;
				for (int r = 0; r < reps; r++)
					tmp[r] = v[t - 1][m][r] / v[t - 1][b][r];
				printf("ratio_%s_vs_%s_%dthread,%.3f,x\n", measures[m].name, measures[b].name, t,
					   median(tmp, reps));
			}
	}
	for (int b = 0; b < 2; b++)
	{
		if (bare_t[b] == NULL)
			continue;
		smaps_kb(bare_t[b], BARE_BYTES, NULL, &huge_kb, &rss_kb);
		printf("pages_%s_huge,%llu,kB\npages_%s_rss,%llu,kB\n", measures[b].name, (unsigned long long) huge_kb,
			   measures[b].name, (unsigned long long) rss_kb);
	}
	/* the objects a handle maps, as they are mapped here once touched */
	{
		trafficdb_handle *h;
		trafficdb_location loc;

		if (trafficdb_open(prefix, &h) == TRAFFICDB_OK)
		{
			trafficdb_begin(h, NULL);
			for (size_t i = 0; i < NIDS; i++)
				trafficdb_get(h, ids_all[i], &loc);
			smaps_kb(NULL, 0, "/dev/shm/", &huge_kb, &rss_kb);
			printf("pages_shm_huge,%llu,kB\npages_shm_rss,%llu,kB\n", (unsigned long long) huge_kb,
				   (unsigned long long) rss_kb);
			trafficdb_end(h);
			trafficdb_close(h);
		}
	}
	fflush(stdout);
}

static int
count_visit(const trafficdb_location *loc, void *arg)
{
	(void) loc;
	(*(uint64_t *) arg)++;
	return 0;
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
	if (argc != 4 && argc != 5)
	{
		fprintf(stderr, "usage: accessor PREFIX MAX_ID SECONDS [REPS] | accessor PREFIX wakeups COUNT\n");
		return 2;
	}
	prefix = argv[1];
	max_id = strtoull(argv[2], NULL, 10);
	seconds = atof(argv[3]);
	reps = argc == 5 ? atoi(argv[4]) : 1;
	if (max_id == 0 || !(seconds > 0) || reps < 1 || reps > MAX_REPS)
	{
		fprintf(stderr, "accessor: MAX_ID %s, SECONDS %s, REPS %s: expected MAX_ID >= 1, SECONDS > 0, 1 <= REPS <= %d\n",
				argv[2], argv[3], argc == 5 ? argv[4] : "1", MAX_REPS);
		return 2;
	}
	threads_max = (int) sysconf(_SC_NPROCESSORS_ONLN);
	threads_max = threads_max < 1 ? 1 : threads_max > 8 ? 8 : threads_max;

	ids_all = malloc(NIDS * sizeof(uint64_t));
	ids_bare = malloc(NIDS * sizeof(uint64_t));
	bare_mask = BARE_BYTES / 16 - 1;
	for (int b = 0; b < 2; b++)
		bare_t[b] = measured(b) ? bare_build(b == 1) : NULL;
	for (size_t i = 0; i < NIDS; i++)
	{
		ids_all[i] = 1 + rnd(&seed) % max_id;
		ids_bare[i] = 1 + rnd(&seed) % ((bare_mask + 1) / 2);
	}
	run_get_rounds();
	for (int b = 0; b < 2; b++)
		if (bare_t[b] != NULL)
			munmap(bare_t[b], BARE_BYTES);
	if (getenv("ACCESSOR_GETS_ONLY") != NULL && strcmp(getenv("ACCESSOR_GETS_ONLY"), "1") == 0)
		return 0;

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
