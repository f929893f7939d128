/*
 * tippy_client.c
 *	  The client side of bench/tippy.sh (TippyDB's geo-placement experiment):
 *	  clients in region A write feed rows and read locations, each on the
 *	  node that owns the location under one placement, through libpq.
 *
 *	  tippy_client PLACEMENT_CSV COLUMN WRITES READS THREADS SEED NEAR_PCT
 *	               MAX_SECONDS CONNINFO_A CONNINFO_B CONNINFO_C
 *
 *	  PLACEMENT_CSV  lines "location_id,area,hash": area is the region whose
 *	                 part of the map holds the location (0 = A, 1 = B, 2 = C),
 *	                 hash the region that owns it under the hash placement
 *	  COLUMN         "geo" (the owner is the area) or "hash"
 *	  WRITES, READS  operations of each kind; each picks a location: with
 *	                 probability NEAR_PCT % one of A's area, else one of the
 *	                 other two areas, uniformly, from an RNG seeded with SEED
 *	                 (the same picks for either COLUMN)
 *	  THREADS        client threads; each holds one connection per region,
 *	                 opened (and its statements prepared) before timing
 *
 *	  Writes: INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES
 *	  ($1, $2), autocommit; then reads: SELECT speed_kmh FROM
 *	  trafficdb.locations WHERE location_id = $1, which must find the row.
 *	  Every loop is bounded by its count and by MAX_SECONDS (operations not
 *	  started by then are reported as not done).  Output: CSV lines
 *	  name,value,unit on stdout.  Exit status 1 on any failed operation.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#define NREGIONS 3

typedef struct Op
{
	int64_t		id;				/* location */
	int			speed;			/* km/h, writes only */
	int			owner;			/* region of the node it goes to */
	int			done;			/* 1 ok, -1 failed, 0 not started */
	int64_t		ns;				/* latency */
} Op;

typedef struct Phase
{
	const char *name;			/* "write" or "read" */
	Op		   *ops;
	int			n;
	int			next;			/* next op to take (atomic) */
	int64_t		deadline_ns;
} Phase;

static const char *conninfo[NREGIONS];
static Phase phases[2];
static int	nthreads;
static int	max_seconds;
static pthread_barrier_t barrier;
static int	failures;			/* atomic */
static int64_t phase_ns[2];

static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t
rnd(uint64_t *s)
{
	/* splitmix64: any seed, including 0, gives a good sequence */
	uint64_t	z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *) a;
	int64_t		y = *(const int64_t *) b;

	return x < y ? -1 : x > y;
}

static void
fatal(const char *fmt, const char *arg)
{
	fprintf(stderr, "tippy_client: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	exit(2);
}

/* one statement on a connection, before timing; exits on failure */
static void
setup_exec(PGconn *c, const char *sql)
{
	PGresult   *r = PQexec(c, sql);

	if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
		fatal("%s", PQerrorMessage(c));
	PQclear(r);
}

static void
prepare(PGconn *c, const char *name, const char *sql)
{
	PGresult   *r = PQprepare(c, name, sql, 0, NULL);

	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		fatal("prepare: %s", PQerrorMessage(c));
	PQclear(r);
}

static int
run_op(PGconn *c, int is_write, const Op *op)
{
	char		idbuf[24],
				speedbuf[16];
	const char *params[2] = {idbuf, speedbuf};
	PGresult   *r;
	int			ok;

	snprintf(idbuf, sizeof(idbuf), "%lld", (long long) op->id);
	snprintf(speedbuf, sizeof(speedbuf), "%d", op->speed);
	if (is_write)
	{
		r = PQexecPrepared(c, "w", 2, params, NULL, NULL, 0);
		ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	}
	else
	{
		r = PQexecPrepared(c, "r", 1, params, NULL, NULL, 0);
		ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
	}
	if (!ok && __atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED) < 5)
		fprintf(stderr, "tippy_client: %s of location %s on region %c failed: %s%s\n",
				is_write ? "write" : "read", idbuf, 'A' + op->owner,
				PQresultStatus(r) == PGRES_TUPLES_OK ? "no row" : PQresultErrorMessage(r),
				PQresultStatus(r) == PGRES_TUPLES_OK ? "\n" : "");
	PQclear(r);
	return ok;
}

static void *
client(void *arg)
{
	PGconn	   *conn[NREGIONS];
	int			i,
				p;

	(void) arg;
	for (i = 0; i < NREGIONS; i++)
	{
		conn[i] = PQconnectdb(conninfo[i]);
		if (PQstatus(conn[i]) != CONNECTION_OK)
			fatal("connect: %s", PQerrorMessage(conn[i]));
		prepare(conn[i], "w", "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES ($1, $2)");
		prepare(conn[i], "r", "SELECT speed_kmh FROM trafficdb.locations WHERE location_id = $1");
		/* warm the session (catalogs, the foreign table's first scan): not timed */
		setup_exec(conn[i], "SELECT count(*) FROM trafficdb.locations WHERE location_id = 0");
	}
	pthread_barrier_wait(&barrier);	/* every connection is open */
	for (p = 0; p < 2; p++)
	{
		Phase	   *ph = &phases[p];

		pthread_barrier_wait(&barrier);
		for (;;)				/* bounded: ph->n ops, and the deadline */
		{
			int			k = __atomic_fetch_add(&ph->next, 1, __ATOMIC_RELAXED);
			Op		   *op;
			int64_t		t0;

			if (k >= ph->n || now_ns() > ph->deadline_ns)
				break;
			op = &ph->ops[k];
			t0 = now_ns();
			op->done = run_op(conn[op->owner], p == 0, op) ? 1 : -1;
			op->ns = now_ns() - t0;
		}
		pthread_barrier_wait(&barrier);
	}
	for (i = 0; i < NREGIONS; i++)
		PQfinish(conn[i]);
	return NULL;
}

static void
report(int p)
{
	Phase	   *ph = &phases[p];
	int64_t    *lat = malloc(sizeof(int64_t) * (ph->n > 0 ? ph->n : 1));
	int			n = 0,
				nfail = 0,
				remote = 0,
				i;
	double		sum = 0,
				sum_local = 0,
				sum_remote = 0;

	if (lat == NULL)
		fatal("%s", "out of memory");
	for (i = 0; i < ph->n; i++)
	{
		Op		   *op = &ph->ops[i];

		if (op->done == -1)
			nfail++;
		if (op->done != 1)
			continue;
		lat[n++] = op->ns;
		sum += op->ns;
		if (op->owner == 0)
			sum_local += op->ns;
		else
		{
			sum_remote += op->ns;
			remote++;
		}
	}
	qsort(lat, n, sizeof(int64_t), cmp_i64);
#define MS(ns) ((double) (ns) / 1e6)
	printf("%s_ops,%d,count\n", ph->name, ph->n);
	printf("%s_done,%d,count\n", ph->name, n);
	printf("%s_failed,%d,count\n", ph->name, nfail);
	printf("%s_remote_pct,%.1f,%%\n", ph->name, n ? 100.0 * remote / n : 0);
	if (n > 0)
	{
		printf("%s_mean_ms,%.2f,ms\n", ph->name, MS(sum / n));
		printf("%s_p50_ms,%.2f,ms\n", ph->name, MS(lat[(n - 1) / 2]));
		printf("%s_p99_ms,%.2f,ms\n", ph->name, MS(lat[(99 * n + 99) / 100 - 1]));
		printf("%s_max_ms,%.2f,ms\n", ph->name, MS(lat[n - 1]));
		if (n > remote)
			printf("%s_local_mean_ms,%.2f,ms\n", ph->name, MS(sum_local / (n - remote)));
		if (remote > 0)
			printf("%s_remote_mean_ms,%.2f,ms\n", ph->name, MS(sum_remote / remote));
		printf("%s_per_s,%.1f,ops/s\n", ph->name, n / (phase_ns[p] / 1e9));
	}
	free(lat);
}

int
main(int argc, char **argv)
{
	FILE	   *f;
	int64_t    *area_ids[NREGIONS] = {NULL};
	int			area_n[NREGIONS] = {0};
	int64_t    *owner_of = NULL;	/* by location id, for ids up to max_id */
	int64_t		max_id = 0;
	int			use_hash,
				near_pct,
				i,
				p;
	uint64_t	seed;
	long long	id;
	int			area,
				hash;
	pthread_t  *th;

	if (argc != 12)
	{
		fprintf(stderr, "usage: tippy_client PLACEMENT_CSV geo|hash WRITES READS THREADS SEED NEAR_PCT MAX_SECONDS CONNINFO_A CONNINFO_B CONNINFO_C\n");
		return 2;
	}
	if (strcmp(argv[2], "geo") != 0 && strcmp(argv[2], "hash") != 0)
		fatal("placement \"%s\": expected geo or hash", argv[2]);
	use_hash = strcmp(argv[2], "hash") == 0;
	phases[0].n = atoi(argv[3]);
	phases[1].n = atoi(argv[4]);
	nthreads = atoi(argv[5]);
	seed = strtoull(argv[6], NULL, 10);
	near_pct = atoi(argv[7]);
	max_seconds = atoi(argv[8]);
	for (i = 0; i < NREGIONS; i++)
		conninfo[i] = argv[9 + i];
	if (phases[0].n < 0 || phases[1].n < 0 || nthreads < 1 || nthreads > 256 ||
		near_pct < 0 || near_pct > 100 || max_seconds < 1)
		fatal("%s", "bad arguments");

	/* the placement: two passes over the file (sizes, then contents) */
	if ((f = fopen(argv[1], "r")) == NULL)
		fatal("cannot open %s", argv[1]);
	while (fscanf(f, "%lld,%d,%d", &id, &area, &hash) == 3)
	{
		if (id < 1 || area < 0 || area >= NREGIONS || hash < 0 || hash >= NREGIONS)
			fatal("%s: bad line", argv[1]);
		area_n[area]++;
		if (id > max_id)
			max_id = id;
	}
	if (max_id == 0 || max_id > 100000000)
		fatal("%s: no locations, or ids over 100 M", argv[1]);
	owner_of = malloc(sizeof(int64_t) * (max_id + 1));
	for (i = 0; i < NREGIONS; i++)
	{
		area_ids[i] = malloc(sizeof(int64_t) * (area_n[i] + 1));
		area_n[i] = 0;
	}
	if (owner_of == NULL || area_ids[0] == NULL || area_ids[1] == NULL || area_ids[2] == NULL)
		fatal("%s", "out of memory");
	rewind(f);
	while (fscanf(f, "%lld,%d,%d", &id, &area, &hash) == 3)
	{
		area_ids[area][area_n[area]++] = id;
		owner_of[id] = use_hash ? hash : area;
	}
	fclose(f);
	if (area_n[0] == 0 || area_n[1] + area_n[2] == 0)
		fatal("%s: region A's area or the far areas hold no location", argv[1]);

	/* the picks: NEAR_PCT % in A's area, the rest in B's and C's */
	for (p = 0; p < 2; p++)
	{
		Phase	   *ph = &phases[p];

		ph->name = p == 0 ? "write" : "read";
		ph->ops = calloc(ph->n > 0 ? ph->n : 1, sizeof(Op));
		if (ph->ops == NULL)
			fatal("%s", "out of memory");
		for (i = 0; i < ph->n; i++)
		{
			Op		   *op = &ph->ops[i];
			int			far = (int) (rnd(&seed) % 100) >= near_pct;
			uint64_t	k = rnd(&seed);

			if (!far)
				op->id = area_ids[0][k % area_n[0]];
			else
			{
				k %= (uint64_t) (area_n[1] + area_n[2]);
				op->id = k < (uint64_t) area_n[1] ? area_ids[1][k] : area_ids[2][k - area_n[1]];
			}
			op->speed = 5 + (int) (rnd(&seed) % 120);
			op->owner = (int) owner_of[op->id];
		}
	}

	pthread_barrier_init(&barrier, NULL, nthreads + 1);
	th = malloc(sizeof(pthread_t) * nthreads);
	if (th == NULL)
		fatal("%s", "out of memory");
	for (i = 0; i < nthreads; i++)
		if (pthread_create(&th[i], NULL, client, NULL) != 0)
			fatal("%s", "pthread_create failed");
	pthread_barrier_wait(&barrier);	/* every thread has its connections */
	for (p = 0; p < 2; p++)
	{
		int64_t		t0;

		t0 = now_ns();
		phases[p].deadline_ns = t0 + (int64_t) max_seconds * 1000000000;
		pthread_barrier_wait(&barrier);
		pthread_barrier_wait(&barrier);
		phase_ns[p] = now_ns() - t0;
	}
	for (i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	printf("threads,%d,count\n", nthreads);
	for (p = 0; p < 2; p++)
		report(p);
	return failures > 0 ? 1 : 0;
}
