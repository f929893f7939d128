/*
 * pager_async.c
 *	  The pager's read-ahead in a thread of its own (TdbPagerOptions.async):
 *	  the blocks a scan announced are fetched in groups, in file order,
 *	  while the caller decodes the pages the groups before brought.
 *
 * Fetching and decoding then overlap, as DuckDB's threads overlap them: on
 * the ADS-B box of issue 33 (5.4 M reports, 79 MB in 252 range GETs behind
 * bench/trails_parquet.py's proxy) the scan waited about 500 ms for the
 * network and decoded for about 460 ms, one after the other.
 *
 * One job at a time, one thread per job.  While it runs, the thread alone
 * uses the pager's remote object (its curl handles and counters) and
 * writes to the disk cache; the caller's thread only reads blocks from the
 * LRU (which has its own lock) and waits, on the job's condition variable,
 * for the groups that hold the blocks it misses.  Anything else of the
 * caller's that would touch the network, the tail or the disk cache (a
 * block the job does not bring, an exact read of footer chunks, a longer
 * tail, the next announcement, the statistics, close) first waits for the
 * job to end and joins the thread (trail_pager_async_join).
 *
 * The thread never runs the caller's code but its cancel callback (the
 * FDW's reads two signal flags), starts with every signal blocked (they
 * stay the caller's thread's business: PostgreSQL's handlers set latches),
 * and allocates with malloc only.  Close aborts a job: the transfers stop
 * at the next poll (100 ms at most).  A failed job leaves its blocks out
 * of the LRU; the caller then fetches them itself and reports the error
 * with its own message.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pager.h"
#include "pager_internal.h"

/*
 * Each group: max_parallel range GETs of at most a piece, so that the first
 * pages arrive after one round and later groups keep the network busy while
 * they are decoded; the first group is one piece, so that decoding starts
 * once one piece has come, not max_parallel of them (the cold join of 100
 * ids at 0.3 M reports, 4.7 MB in 9 GETs, no disk cache: medians of 5 runs
 * 62.8-64.5 ms against 65.4-70.9, three alternating rounds; a first group
 * of 512 kB: 67.8-73.3; with the disk cache, the cold box and join at
 * 0.3 M: 32-53 and 75-96 ms against 85-120 and 127-160, runs alternating:
 * bench/results/2026-11-30-readahead-first-group.md).  A piece is 1 MB, or
 * 2 MB for a job of more than 32 MB.
 * Smaller pieces cost more than the overlap gains on two cores where MinIO
 * runs too (each GET costs it about 2 ms of CPU): on the 4.4 MB box at
 * 0.3 M reports, 128-256 kB pieces took 56-63 ms where one round took
 * 47-52; on the 79 MB box at 5.4 M, 1-2 MB pieces took 730-800 ms where
 * the scan without the thread took 790-960 (8192 kB: 860-900).
 */
#define PIECE (1u << 20)
#define THREAD_STACK (1u << 20)

/*
 * A job of more than this many bytes is a bulk read: its blocks go to the
 * LRU but not to the disk cache, as PostgreSQL's large sequential scans go
 * through a small ring instead of shared buffers.  The disk cache stores a
 * file per block (about 100 us each here): on the 5.4 M box of issue 33
 * (79 MB, 4,800 files) writing them took the cold query from 730-800 ms to
 * 1,531, and would have pushed 79 MB of other queries' blocks out of a
 * 1 GiB cache.  Point reads, lookups and windows of up to 16 MiB are still
 * cached.
 */
#define BULK_JOB_BYTES (16u << 20)

/* The remote object's cancel callback: the caller's, or close aborting the job. */
int
trail_pager_cancel(void *arg)
{
	TdbPager   *p = arg;

	if (atomic_load(&p->as.abort))
		return 1;
	return p->user_cancel != NULL && p->user_cancel(p->user_cancel_arg);
}

/* In the thread: the blocks of the group below below are in the LRU. */
static void
lru_filled(TdbPager *p, uint64_t below)
{
	PagerAsync *a = &p->as;

	pthread_mutex_lock(&a->mu);
	if (below > a->done_below)
		a->done_below = below;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
}

static void *
worker(void *arg)
{
	TdbPager   *p = arg;
	PagerAsync *a = &p->as;
	uint64_t	piece = (uint64_t) a->nblocks * p->bs > 32 * (uint64_t) PIECE ? 2 * (uint64_t) PIECE : PIECE,
				group = (uint64_t) p->max_parallel * piece;
	int			i = 0;

	while (i < a->nblocks)
	{
		TdbTrailError err;
		uint64_t	bytes = 0;
		int			j = i,
					rc;

		while (j < a->nblocks && (j == i || bytes < (i == 0 ? piece : group)))
		{
			bytes += p->bs;
			j++;
		}
		rc = atomic_load(&a->abort) ? TDB_TRAIL_ECANCELED :
			a->fetch(p, a->blocks + i, j - i, piece, &err);
		pthread_mutex_lock(&a->mu);
		a->done_below = a->blocks[j - 1] + 1;
		pthread_cond_broadcast(&a->cv);
		pthread_mutex_unlock(&a->mu);
		if (rc < 0)
			break;
		i = j;
	}
	pthread_mutex_lock(&a->mu);
	a->finished = true;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

void
trail_pager_async_init(TdbPager *p)
{
	pthread_mutex_init(&p->as.mu, NULL);
	pthread_cond_init(&p->as.cv, NULL);
	atomic_init(&p->as.abort, 0);
	p->as.ready = true;
}

void
trail_pager_async_destroy(TdbPager *p)
{
	if (!p->as.ready)
		return;
	trail_pager_async_join(p, true);
	pthread_cond_destroy(&p->as.cv);
	pthread_mutex_destroy(&p->as.mu);
	p->as.ready = false;
}

/* No job: the caller's own fetches tell no one and write the disk cache. */
static void
job_clear(PagerAsync *a)
{
	a->lru_filled = NULL;
	a->bulk = false;
	a->started = false;
	free(a->announced);
	a->announced = NULL;
	a->blocks = NULL;
	a->nblocks = 0;
	atomic_store(&a->abort, 0);
}

/*
 * Start fetching blocks[0 .. n-1] (sorted, distinct; taken over, freed by
 * the join) in a thread.  false when no thread could be started: blocks are
 * still the caller's, to fetch itself.
 */
bool
trail_pager_async_start(TdbPager *p, uint64_t *blocks, int n,
						int (*fetch) (TdbPager *p, uint64_t *blocks, int n, uint64_t max_range,
									  TdbTrailError *err))
{
	PagerAsync *a = &p->as;
	sigset_t	all,
				old;
	pthread_attr_t attr;
	int			rc;

	if (!a->ready || n <= 0)
		return false;
	trail_pager_async_join(p, false);
	a->blocks = blocks;
	a->nblocks = n;
	if ((a->announced = malloc(sizeof(uint64_t) * (size_t) n)) != NULL)
		memcpy(a->announced, blocks, sizeof(uint64_t) * (size_t) n);
	a->fetch = fetch;
	a->lru_filled = lru_filled;	/* read by the fetches of the thread only */
	a->bulk = (uint64_t) n * p->bs > BULK_JOB_BYTES;
	a->done_below = 0;
	a->finished = false;
	atomic_store(&a->abort, 0);
	a->started = true;
	/* the thread inherits this mask: every signal stays with the caller's thread */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* 1 MiB of stack (curl and OpenSSL need little), not the default 8 */
	rc = pthread_attr_init(&attr);
	if (rc == 0)
	{
		pthread_attr_setstacksize(&attr, THREAD_STACK);
		rc = pthread_create(&a->thread, &attr, worker, p);
		pthread_attr_destroy(&attr);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
	{
		job_clear(a);			/* blocks still the caller's */
		return false;
	}
	return true;
}

/*
 * Does the running job bring every block of ranges[0 .. n-1] (those the
 * announcement would fetch: in the object, before its tail)?  Then an
 * announcement of them needs no new job and must not wait for this one:
 * the lookups of a join each announce their pages, which the union of all
 * their pages (reader.c prefetch_union) already asked for; a join there
 * waited for the whole union, and its disk-cache writes, at the second
 * lookup.  Reads the job's announced copy of its blocks (the thread sorts
 * its own list in place).
 */
bool
trail_pager_async_covers(const TdbPager *p, const TdbByteRange *ranges, int n)
{
	const PagerAsync *a = &p->as;

	if (!a->started || a->announced == NULL)
		return false;
	for (int i = 0; i < n; i++)
	{
		uint64_t	b0,
					b1;

		if (!trail_range_blocks(p, &ranges[i], &b0, &b1))
			continue;
		for (uint64_t blk = b0; blk <= b1; blk++)
			if (bsearch(&blk, a->announced, (size_t) a->nblocks, sizeof(uint64_t), trail_block_cmp) == NULL)
				return false;
	}
	return true;
}

/* Are all of missing[0 .. n-1] below bound? */
static bool
all_below(const uint64_t *missing, int n, uint64_t bound)
{
	for (int i = 0; i < n; i++)
		if (missing[i] >= bound)
			return false;
	return true;
}

/*
 * Wait until the job has dealt with every block of missing (fetched it,
 * failed, or gone past it) or has ended.  0, or TDB_TRAIL_ECANCELED when the
 * caller's cancel callback said stop (the job is then aborted and joined).
 */
int
trail_pager_async_wait(TdbPager *p, const uint64_t *missing, int n, TdbTrailError *err)
{
	PagerAsync *a = &p->as;
	bool		canceled = false,
				done;

	if (!a->started)
		return 0;
	pthread_mutex_lock(&a->mu);
	while (!a->finished && !all_below(missing, n, a->done_below))
	{
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 20 * 1000 * 1000;
		if (ts.tv_nsec >= 1000 * 1000 * 1000)
		{
			ts.tv_sec++;
			ts.tv_nsec -= 1000 * 1000 * 1000;
		}
		pthread_cond_timedwait(&a->cv, &a->mu, &ts);
		if (p->user_cancel != NULL && p->user_cancel(p->user_cancel_arg))
		{
			canceled = true;
			break;
		}
	}
	done = a->finished;
	pthread_mutex_unlock(&a->mu);
	if (!canceled)
	{
		if (done)
			trail_pager_async_join(p, false);	/* its stack back now, not at the next announcement */
		return 0;
	}
	trail_pager_async_join(p, true);
	return tdb_trail_fail(err, TDB_TRAIL_ECANCELED, "read canceled");
}

/* Wait for the job to end (abort: stop it first) and join its thread. */
void
trail_pager_async_join(TdbPager *p, bool abort)
{
	PagerAsync *a = &p->as;

	if (!a->started)
		return;
	if (abort)
		atomic_store(&a->abort, 1);
	pthread_join(a->thread, NULL);
	free(a->blocks);
	job_clear(a);
}
