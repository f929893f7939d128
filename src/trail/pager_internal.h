/*
 * pager_internal.h
 *	  The pager's state, shared by pager.c and pager_exact.c (the exact
 *	  reads of version 3's footer chunks) and no one else: callers use
 *	  pager.h.  It does not include pager.h (its types come from types.h),
 *	  so that pager.c including it makes no include cycle.
 */
#ifndef TDB_TRAIL_PAGER_INTERNAL_H
#define TDB_TRAIL_PAGER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../clock.h"
#include "cache.h"
#include "remote.h"
#include "trail.h"
#include "types.h"

#define TAIL_BYTES			(16u * 1024)
#define TAIL_BYTES_MIN		(4u * 1024)	/* the least tail_bytes asks for */
#define TAIL_EXTEND_MAX		(256u << 20)	/* a longer footer is read by blocks */
#define MAX_RANGE_BYTES		(16u << 20)	/* one GET carries at most this */
#define MAX_FETCH_BLOCKS	1024
#define DEFAULT_BLOCK		(16u * 1024)	/* a point read fetches little */
#define DEFAULT_READAHEAD	64	/* blocks: 1 MiB of 16 KiB blocks */
#define BRIDGE_MAX_BLOCKS	16	/* gaps an announced scan fetches through */
#define PREFETCH_MAX_BLOCKS	4096	/* one announcement; and half the LRU */

/* The read-ahead thread's job (pager_async.c). */
typedef struct PagerAsync
{
	bool		ready;			/* mu and cv initialised: async on */
	bool		started;		/* a thread to join */
	pthread_t	thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t   *blocks;			/* the job: sorted, distinct */
	int			nblocks;
	/*
	 * A copy of blocks that nobody writes while the job runs, for the
	 * caller's trail_pager_async_covers (the thread's fetch sorts its
	 * groups of blocks in place); NULL when it could not be allocated.
	 */
	uint64_t   *announced;
	/*
	 * Called by the fetch in the read-ahead thread once its blocks below
	 * this one are in the LRU (before the disk cache has them); NULL
	 * elsewhere.
	 */
	void		(*lru_filled) (struct TdbPager *p, uint64_t below);
	/*
	 * The job is a bulk read (more than BULK_JOB_BYTES): its blocks skip
	 * the disk cache.  Set before the thread starts, read by its fetches.
	 */
	bool		bulk;
	/* fetches blocks into the caches in GETs of at most max_range bytes (pager.c's) */
	int			(*fetch) (struct TdbPager *p, uint64_t *blocks, int n, uint64_t max_range,
						  TdbTrailError *err);
	/* under mu: */
	uint64_t	done_below;		/* every job block below this is dealt with */
	bool		finished;
	atomic_int	abort;			/* close: stop now */
} PagerAsync;

struct TdbPager
{
	bool		local;
	int			fd;
	uint64_t	size;
	char		etag[256];
	TdbRemote  *remote;
	char	   *cache_id;
	uint32_t	bs;
	uint8_t    *tail;
	uint64_t	tail_off;
	uint64_t	tail_len;
	uint64_t	tail_cap;		/* bytes allocated at tail */
	TdbBlockLru *lru;
	bool		own_lru;
	TdbDiskCache *disk;
	int			max_parallel;
	uint32_t	readahead_max;
	uint64_t	next_seq_block; /* the block a sequential reader reads next */
	uint32_t	ra_window;
	int			hinted;			/* callers announcing their ranges: no blind read-ahead */
	/*
	 * Announced windows: gaps of at most this many blocks between the
	 * blocks a window needs are fetched with them (one range GET instead of
	 * two); 0 for the first window of a scan, doubling with each next one
	 * up to BRIDGE_MAX_BLOCKS, so a point read fetches only its blocks and
	 * a long scan sends fewer, longer requests.
	 */
	uint32_t	bridge;
	/*
	 * Blocks the pager keeps itself, whatever the LRU does: [HELD_LAST] the
	 * block the last read ended in, where a reader going through the file
	 * reads next; [HELD_EDGE] the first block of the read that reached into
	 * the tail (the footer's, which also holds the last pages).
	 */
	struct
	{
		uint8_t    *data;
		uint64_t	blk;
		uint64_t	len;		/* 0: none */
	}			held[2];
	bool		reused;			/* size and ETag from the validation registry */
	bool		remember;		/* keep validations in the registry */
	uint64_t	token;			/* validation token (0: none) */
	double		reused_age;
	bool		reused_token;	/* ... because the token matched */
	TdbPagerStats stats;
	/* the caller's cancel callback (the remote object calls trail_pager_cancel) */
	int			(*user_cancel) (void *arg);
	void	   *user_cancel_arg;
	PagerAsync	as;
};

/* GET ranges[0 .. n-1] into bufs concurrently (pager.c). */
int			trail_pager_remote_get(struct TdbPager *p, const TdbByteRange *ranges, uint8_t **bufs,
								   int n, TdbTrailError *err);
/* Block numbers in ascending order (qsort, bsearch). */
static inline int
trail_block_cmp(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a,
				y = *(const uint64_t *) b;

	return (x > y) - (x < y);
}

/*
 * The blocks b0 .. b1 of range r that a fetch would bring: false for an
 * empty range, or one at or past the tail (read already) or past the
 * object's end (the reads report those).
 */
static inline bool
trail_range_blocks(const struct TdbPager *p, const TdbByteRange *r, uint64_t *b0, uint64_t *b1)
{
	if (r->len == 0 || r->off >= p->tail_off || r->off + r->len > p->size)
		return false;
	*b0 = r->off / p->bs;
	*b1 = (r->off + r->len - 1) / p->bs;
	return true;
}

/* pager_async.c */
int			trail_pager_cancel(void *arg);
void		trail_pager_async_init(struct TdbPager *p);
void		trail_pager_async_destroy(struct TdbPager *p);
bool		trail_pager_async_start(struct TdbPager *p, uint64_t *blocks, int n,
									int (*fetch) (struct TdbPager *p, uint64_t *blocks, int n,
												  uint64_t max_range, TdbTrailError *err));
bool		trail_pager_async_covers(const struct TdbPager *p, const TdbByteRange *ranges, int n);
int			trail_pager_async_wait(struct TdbPager *p, const uint64_t *missing, int n, TdbTrailError *err);
void		trail_pager_async_join(struct TdbPager *p, bool abort);

/* Read a local file's bytes (pager.c). */
int			trail_pager_read_local(struct TdbPager *p, uint64_t off, size_t len, uint8_t *dst,
								   TdbTrailError *err);

/* pager_validated.c: the process's memo of objects' size, ETag and tail. */
bool		trail_validated_get(struct TdbPager *p, double max_age);
void		trail_validated_put(const struct TdbPager *p);
void		trail_validated_forget(const struct TdbPager *p);

#endif							/* TDB_TRAIL_PAGER_INTERNAL_H */
