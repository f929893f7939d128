/*
 * crash_reader.c
 *	  The crash loop's external reader (test/crash_loop.pl), through the
 *	  public libtrafficdb API only (include/trafficdb.h): reads continuously
 *	  while the server is killed around it, and checks each pinned snapshot
 *	  against what the feed writer makes checkable (crash_batch.h).
 *
 *	  crash_reader watch NAME STATSFILE MAX_SECONDS
 *		read until SIGTERM (or MAX_SECONDS), rewriting STATSFILE with the
 *		counters about every 200 ms; the same line on stdout at the end
 *	  crash_reader dump NAME
 *		one snapshot: "generation G" then "set S BATCH" per set (BATCH -1 if
 *		the set is mixed: an inconsistent snapshot)
 *	  crash_reader killnext NAME PID TIMEOUT_MS
 *		sleep until the next publication (trafficdb_wait), then kill -9 PID
 *		at once: the daemon dies between storing a new version and
 *		committing the transaction that consumed its feed rows, when the
 *		wake-up is quick enough.  Prints "generation G" (the one it saw).
 *
 * Checks of one snapshot (one trafficdb_begin .. trafficdb_end):
 *	  - every location of the map's sets is found;
 *	  - each location's fields are those of the batch its incident names;
 *	  - all locations of a set show the same batch (a batch is one transaction);
 *	  - changed_generation is not beyond the pinned generation;
 *	  - re-reading a set under the same pin, sometimes after holding the pin
 *		for tens of milliseconds while the daemon publishes, gives the same
 *		values.
 * Across snapshots: the generation must never go back (went_back), and, on
 * one handle, a set whose batch differs from the previous snapshot's must be
 * listed by trafficdb_changes_since(previous generation) (changes_missed); a
 * set showing an older batch than before is counted too (set_went_back).
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <trafficdb.h>

#include "crash_batch.h"

#define NLOC (CRASH_SETS * CRASH_SET_SIZE)

/* What one location showed in the pinned snapshot. */
typedef struct Seen
{
	uint64_t	batch;
	float		speed;
	float		free_flow;
	uint8_t		congestion;
	uint8_t		confidence;
	uint64_t	changed_gen;
	int64_t		updated_at;
} Seen;

typedef struct Counters
{
	unsigned long long reads,
				inconsistent,
				went_back,
				reopens,
				empty,
				errors,
				corrupt,
				holds,
				changes_missed,
				set_went_back;
	uint64_t	first_gen,
				last_gen;
} Counters;

static volatile sig_atomic_t stop_requested = 0;
static Counters C;
static int	complaints = 0;

static void
on_term(int sig)
{
	(void) sig;
	stop_requested = 1;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Say what was wrong, for the first few problems only (the log stays short). */
static void
complain(const char *fmt, uint64_t gen, uint64_t a, uint64_t b)
{
	if (complaints++ < 50)
	{
		fprintf(stderr, "crash_reader: generation %" PRIu64 ": ", gen);
		fprintf(stderr, fmt, a, b);
		fputc('\n', stderr);
		fflush(stderr);
	}
}

static void
format_counters(char *buf, size_t len)
{
	snprintf(buf, len,
			 "reads=%llu inconsistent=%llu went_back=%llu reopens=%llu empty=%llu errors=%llu corrupt=%llu "
			 "holds=%llu changes_missed=%llu set_went_back=%llu first_generation=%" PRIu64
			 " last_generation=%" PRIu64 "\n",
			 C.reads, C.inconsistent, C.went_back, C.reopens, C.empty, C.errors, C.corrupt,
			 C.holds, C.changes_missed, C.set_went_back, C.first_gen, C.last_gen);
}

static void
write_stats(const char *path)
{
	char		tmp[4200];
	char		line[512];
	FILE	   *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	format_counters(line, sizeof(line));
	f = fopen(tmp, "w");
	if (f == NULL)
		return;
	fputs(line, f);
	if (fclose(f) == 0)
		rename(tmp, path);
}

/*
 * Read location i into *s; returns 0 if it is not found or its fields do not
 * match the batch its incident names.
 */
static int
read_location(trafficdb_handle *h, int i, uint64_t gen, Seen *s)
{
	trafficdb_location loc;
	const trafficdb_traffic *t;
	uint64_t	id = CRASH_FIRST_ID + (uint64_t) i;
	int			rc = trafficdb_get(h, id, &loc);

	if (rc != TRAFFICDB_OK)
	{
		complain("location %" PRIu64 " not found (code %" PRIu64 ")", gen, id, (uint64_t) (-rc));
		return 0;
	}
	t = loc.traffic;
	s->batch = crash_parse_incident(loc.incident, loc.incident_len);
	s->speed = t->speed_kmh;
	s->free_flow = t->free_flow_kmh;
	s->congestion = t->congestion;
	s->confidence = t->confidence;
	s->changed_gen = t->changed_generation;
	s->updated_at = t->updated_at_us;
	if (s->changed_gen > gen)
	{
		complain("location %" PRIu64 " changed at generation %" PRIu64 ", after the pinned one", gen, id,
				 s->changed_gen);
		return 0;
	}
	if (s->batch == 0)
	{
		/* no traffic yet: nothing may be known */
		if (loc.incident != NULL || t->updated_at_us != 0 || !isnan(t->speed_kmh))
		{
			complain("location %" PRIu64 " has traffic but no batch (incident length %" PRIu64 ")", gen, id,
					 loc.incident_len);
			return 0;
		}
		return 1;
	}
	if (s->speed != crash_speed(s->batch) || s->free_flow != crash_free_flow(s->batch) ||
		s->congestion != crash_congestion(s->batch) || s->confidence != crash_confidence(s->batch))
	{
		complain("location %" PRIu64 ": fields do not match batch %" PRIu64, gen, id, s->batch);
		return 0;
	}
	return 1;
}

/* Read set k into seen[]; returns its batch, or -1 if it is inconsistent. */
static int64_t
read_set(trafficdb_handle *h, int k, uint64_t gen, Seen *seen)
{
	int			ok = 1;

	for (int j = 0; j < CRASH_SET_SIZE; j++)
	{
		int			i = k * CRASH_SET_SIZE + j;

		if (!read_location(h, i, gen, &seen[i]))
			ok = 0;
		else if (seen[i].batch != seen[k * CRASH_SET_SIZE].batch)
		{
			complain("set mixes batches %" PRIu64 " and %" PRIu64, gen, seen[k * CRASH_SET_SIZE].batch,
					 seen[i].batch);
			ok = 0;
		}
	}
	return ok ? (int64_t) seen[k * CRASH_SET_SIZE].batch : -1;
}

static int
same(const Seen *a, const Seen *b)
{
	return a->batch == b->batch && a->changed_gen == b->changed_gen && a->updated_at == b->updated_at &&
		memcmp(&a->speed, &b->speed, sizeof(float)) == 0 &&
		memcmp(&a->free_flow, &b->free_flow, sizeof(float)) == 0 &&
		a->congestion == b->congestion && a->confidence == b->confidence;
}

static int
mark_changed(const trafficdb_location *loc, void *arg)
{
	uint8_t    *changed = arg;

	if (loc->id >= CRASH_FIRST_ID && loc->id < CRASH_FIRST_ID + NLOC)
		changed[loc->id - CRASH_FIRST_ID] = 1;
	return 0;
}

static int
dump(const char *name)
{
	trafficdb_handle *h;
	uint64_t	gen;
	Seen		seen[NLOC];
	int			rc = trafficdb_open(name, &h);

	if (rc == TRAFFICDB_OK && (rc = trafficdb_begin(h, &gen)) != TRAFFICDB_OK)
		trafficdb_close(h);
	if (rc != TRAFFICDB_OK)
	{
		fprintf(stderr, "crash_reader: %s\n", trafficdb_strerror(rc));
		return 1;
	}
	printf("generation %" PRIu64 "\n", gen);
	for (int k = 0; k < CRASH_SETS; k++)
		printf("set %d %" PRId64 "\n", k, read_set(h, k, gen, seen));
	trafficdb_end(h);
	trafficdb_close(h);
	return 0;
}

static int
kill_next(const char *name, pid_t pid, int timeout_ms)
{
	trafficdb_handle *h;
	uint64_t	gen = 0;
	int			rc = trafficdb_open(name, &h);

	if (rc == TRAFFICDB_OK)
	{
		if (trafficdb_begin(h, &gen) == TRAFFICDB_OK)
			trafficdb_end(h);
		rc = trafficdb_wait(h, gen, timeout_ms, &gen);
		if (rc == TRAFFICDB_OK && kill(pid, SIGKILL) != 0)
		{
			perror("crash_reader: kill");
			rc = TRAFFICDB_SYSTEM;
		}
		trafficdb_close(h);
	}
	if (rc != TRAFFICDB_OK)
	{
		fprintf(stderr, "crash_reader: %s\n", trafficdb_strerror(rc));
		return 1;
	}
	printf("generation %" PRIu64 "\n", gen);
	return 0;
}

int
main(int argc, char **argv)
{
	trafficdb_handle *h = NULL;
	const char *name;
	const char *stats;
	double		end,
				next_stats = 0;
	unsigned int seed = (unsigned int) getpid();
	Seen		seen[NLOC],
				again[NLOC];
	int64_t		prev_batch[CRASH_SETS];
	uint64_t	prev_gen = 0;	/* of the previous snapshot on this handle */
	char		line[512];

	if (argc == 3 && strcmp(argv[1], "dump") == 0)
		return dump(argv[2]);
	if (argc == 5 && strcmp(argv[1], "killnext") == 0)
		return kill_next(argv[2], (pid_t) atol(argv[3]), atoi(argv[4]));
	if (argc != 5 || strcmp(argv[1], "watch") != 0)
	{
		fprintf(stderr, "usage: crash_reader watch NAME STATSFILE MAX_SECONDS | crash_reader dump NAME | "
				"crash_reader killnext NAME PID TIMEOUT_MS\n");
		return 2;
	}
	name = argv[2];
	stats = argv[3];
	end = now_s() + atof(argv[4]);
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);

	while (!stop_requested && now_s() < end)
	{
		uint64_t	gen;
		int			rc;
		int			ok = 1;
		int64_t		batch[CRASH_SETS];

		if (now_s() >= next_stats)
		{
			write_stats(stats);
			next_stats = now_s() + 0.2;
		}
		if (h == NULL)
		{
			rc = trafficdb_open(name, &h);
			if (rc != TRAFFICDB_OK)
			{
				h = NULL;
				C.errors++;		/* the server is down: expected while it restarts */
				usleep(20000);
				continue;
			}
			prev_gen = 0;
		}
		rc = trafficdb_begin(h, &gen);
		if (rc == TRAFFICDB_STALE)
		{
			/* an orderly stop: reopen when the server is back */
			trafficdb_close(h);
			h = NULL;
			C.reopens++;
			continue;
		}
		if (rc == TRAFFICDB_EMPTY)
		{
			C.empty++;
			usleep(2000);
			continue;
		}
		if (rc != TRAFFICDB_OK)
		{
			if (rc == TRAFFICDB_CORRUPT)
				C.corrupt++;
			else
				C.errors++;
			if (complaints++ < 50)
				fprintf(stderr, "crash_reader: begin: %s: %s\n", trafficdb_strerror(rc), trafficdb_errmsg(h));
			usleep(2000);
			continue;
		}

		C.reads++;
		if (C.first_gen == 0)
			C.first_gen = gen;
		if (gen < C.last_gen)
		{
			C.went_back++;
			complain("generation went back from %" PRIu64 " (now %" PRIu64 ")", gen, C.last_gen, gen);
		}
		C.last_gen = gen;

		for (int k = 0; k < CRASH_SETS; k++)
			if ((batch[k] = read_set(h, k, gen, seen)) < 0)
				ok = 0;

		/* re-read under the same pin: now and then after holding it a while */
		if (rand_r(&seed) % 50 == 0)
		{
			C.holds++;
			usleep(20000 + rand_r(&seed) % 40000);
			for (int k = 0; k < CRASH_SETS; k++)
				read_set(h, k, gen, again);
		}
		else
		{
			int			k = (int) (rand_r(&seed) % CRASH_SETS);

			memcpy(again, seen, sizeof(seen));
			read_set(h, k, gen, again);
		}
		for (int i = 0; i < NLOC; i++)
			if (!same(&seen[i], &again[i]))
			{
				complain("location %" PRIu64 " changed under one pin (batch %" PRIu64 ")", gen,
						 (uint64_t) (CRASH_FIRST_ID + i), seen[i].batch);
				ok = 0;
				break;
			}

		/* against the previous snapshot of this handle */
		if (ok && prev_gen != 0 && gen > prev_gen)
		{
			uint8_t		changed[NLOC] = {0};

			if (trafficdb_changes_since(h, prev_gen, mark_changed, changed) != TRAFFICDB_OK)
				C.errors++;
			else
				for (int k = 0; k < CRASH_SETS; k++)
				{
					if (batch[k] < prev_batch[k])
					{
						C.set_went_back++;
						complain("set %" PRIu64 " went back to an older batch (was %" PRIu64 ")", gen,
								 (uint64_t) k, (uint64_t) prev_batch[k]);
					}
					if (batch[k] != prev_batch[k] && !changed[k * CRASH_SET_SIZE])
					{
						C.changes_missed++;
						complain("set %" PRIu64 " changed but changes_since(%" PRIu64 ") omits it", gen,
								 (uint64_t) k, prev_gen);
					}
				}
		}
		if (!ok)
			C.inconsistent++;
		else if (gen >= prev_gen)
		{
			prev_gen = gen;
			memcpy(prev_batch, batch, sizeof(batch));
		}
		trafficdb_end(h);
		usleep(500);
	}
	if (h)
		trafficdb_close(h);
	write_stats(stats);
	format_counters(line, sizeof(line));
	fputs(line, stdout);
	return 0;
}
