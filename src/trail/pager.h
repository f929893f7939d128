/*
 * pager.h
 *	  Byte-range access to one trail file wherever it lives: a local path,
 *	  http(s):// (read only) or s3://bucket/key (SigV4), through an
 *	  in-process LRU of blocks and an on-disk block cache shared by many
 *	  processes.
 *
 * The first request to a remote object learns its size and ETag (a suffix
 * range GET of the tail); every later range GET pins that ETag with
 * If-Match, so an object replaced mid-read is an error (TDB_TRAIL_EREPLACED),
 * never mixed data.  Credentials come from the caller only; they never
 * appear in error messages.
 */
#ifndef TDB_TRAIL_PAGER_H
#define TDB_TRAIL_PAGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "remote.h"			/* tdb_trail_store and the s3:// names, for the pager's callers */
#include "trail.h"
#include "types.h"

struct TdbBlockLru;

typedef struct TdbPagerOptions
{
	const char *url;			/* path, http(s)://..., s3://bucket/key */
	TdbS3Config s3;
	TdbNetOptions net;
	uint32_t	block_size;		/* 4 KiB .. 64 MiB, power of two; 0: 16 KiB */
	/*
	 * Remote objects: the first request's bytes, the object's last ones
	 * (trailer and footer head; the rest of a longer footer is then asked
	 * for exactly).  0: 16 KiB, also the most; at least 4 KiB.  A caller
	 * that needs the footer alone (count(*)) asks for less.
	 */
	uint32_t	tail_bytes;
	const char *cache_dir;		/* on-disk shared cache; NULL: none */
	uint64_t	cache_max_bytes;	/* bound of cache_dir; 0: 1 GiB */
	struct TdbBlockLru *lru;	/* shared in-process LRU; NULL: own */
	size_t		lru_bytes;		/* size of the own LRU; 0: 64 MiB */
	int			max_parallel;	/* concurrent range GETs; 0: 4 */
	/*
	 * Remote objects: fetch announced ranges (tdb_pager_prefetch) in a
	 * thread of the pager's own, in groups in file order, while the caller
	 * reads what the groups before brought (pager_async.c).  The caller's
	 * net.cancel is then also called from that thread: it must be safe to
	 * call from any thread (read flags, nothing more).
	 */
	bool		async;
	int			readahead_max;	/* blocks; 0: 64, negative: none */
	/*
	 * Remote objects: reuse the size, ETag and tail this process learnt of
	 * the object less than this many seconds ago instead of asking again
	 * (0: ask at every open).  The version so reused is still pinned: its
	 * blocks are keyed by its ETag and every GET carries If-Match, so a
	 * reader never mixes versions; an object replaced within the interval
	 * is read as the old version from the caches, or fails with
	 * TDB_TRAIL_EREPLACED when a byte must come from the network (and the
	 * next open asks again).
	 */
	int			revalidate_seconds;
	/*
	 * Also reuse a validation made under the same non-zero token, however
	 * old (the FDW passes one per statement, so that planning and execution
	 * ask for an object's size and ETag once).
	 */
	uint64_t	validation_token;
} TdbPagerOptions;

/* TdbPagerStats: types.h */
typedef struct TdbPager TdbPager;

int			tdb_pager_open(const TdbPagerOptions *opts, TdbPager **out,
						   TdbTrailError *err);
uint64_t	tdb_pager_size(const TdbPager *p);
const char *tdb_pager_etag(const TdbPager *p);

/* Which object: "endpoint|name" for a remote one, the path of a local file. */
const char *tdb_pager_identity(const TdbPager *p);
/* A local file (read with pread: no blocks, no caches). */
bool		tdb_pager_is_local(const TdbPager *p);

/*
 * Make the bytes [off, size) come from memory, as the tail's do: fetch
 * [off, tail) exactly, in one range GET pinned by the ETag (no block
 * rounding), and keep it with the tail.  For a footer longer than the first
 * request's tail.  Nothing to do for local files or when off lies in the
 * tail already.
 */
int			tdb_pager_extend_tail(TdbPager *p, uint64_t off, TdbTrailError *err);

/*
 * Read n ranges exactly, into bufs[i] (r[i].len bytes each): from the tail
 * when there, else from the caches or by concurrent range GETs of exactly
 * those bytes (no block rounding; each kept in the caches as a piece of its
 * own, keyed by object, ETag and range).  For the chunks of a version-3
 * footer, a few kB each, which a block would make a megabyte.
 */
int			tdb_pager_read_exact(TdbPager *p, const TdbByteRange *r, int n, uint8_t **bufs,
								 TdbTrailError *err);

/* Read exactly len bytes at off (off + len <= size). */
int			tdb_pager_read(TdbPager *p, uint64_t off, size_t len, void *buf,
						   TdbTrailError *err);

/*
 * Hint that these ranges will be read soon: their missing blocks are
 * fetched now, adjacent blocks as one range GET, ranges concurrently.
 */
int			tdb_pager_prefetch(TdbPager *p, const TdbByteRange *ranges, int n,
							   TdbTrailError *err);
/*
 * A caller that announces every range it will read with tdb_pager_prefetch
 * (the trail reader, which knows its pages from the footer) turns the
 * pager's blind sequential read-ahead off while it does (calls nest).
 */
void		tdb_pager_hinted(TdbPager *p, bool on);

/*
 * The scan just announced (tdb_pager_hinted) reads all its ranges: bridge
 * its gaps as widely as a long scan's later windows, from the first
 * announcement on.
 */
void		tdb_pager_bridge_widest(TdbPager *p);

/*
 * How many bytes (in whole blocks) one tdb_pager_prefetch call fetches at
 * most: half the LRU, where they wait until read; 0 for a local file
 * (nothing to prefetch).
 */
uint64_t	tdb_pager_prefetch_room(const TdbPager *p);
uint32_t	tdb_pager_block_size(const TdbPager *p);
void		tdb_pager_stats(const TdbPager *p, TdbPagerStats *out);
void		tdb_pager_close(TdbPager *p);

#endif							/* TDB_TRAIL_PAGER_H */
