/*
 * cache.h
 *	  Block caches of the pager: an on-disk directory shared by many
 *	  processes, and an in-process LRU.
 *
 * A block is keyed by (object name, ETag, block size, block number), so a
 * replaced object never hits old blocks and two block sizes never mix.
 *
 * Disk: one file per block, written as tmp + rename (no fsync), so a
 * running reader sees a whole block or none; each block file carries a header with its
 * full key and a CRC-32C of the data, verified on every read, so a file
 * damaged any other way (a power cut before the kernel wrote it, kill -9
 * during a copy, disk error, hash collision) is a miss, never wrong data.  The directory is bounded: when
 * an insert takes it past max_bytes, the oldest blocks (by mtime, which a
 * hit refreshes) are removed under an flock so concurrent processes do not
 * all sweep at once.
 */
#ifndef TDB_TRAIL_CACHE_H
#define TDB_TRAIL_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trail.h"

typedef struct TdbDiskCache TdbDiskCache;

int			tdb_disk_cache_open(const char *dir, uint64_t max_bytes, TdbDiskCache **out,
								TdbTrailError *err);
void		tdb_disk_cache_close(TdbDiskCache *c);

/* true and len bytes copied when a valid block is cached (len must match). */
bool		tdb_disk_cache_get(TdbDiskCache *c, const char *key, void *buf, size_t len);

/* Best effort: a failure to cache is not an error for the reader. */
void		tdb_disk_cache_put(TdbDiskCache *c, const char *key, const void *buf, size_t len);

/* Remove blocks until the directory holds at most max_bytes. */
void		tdb_disk_cache_evict(TdbDiskCache *c);

typedef struct TdbDiskCacheReport
{
	uint64_t	blocks_ok;
	uint64_t	blocks_bad;		/* failed validation; removed */
	uint64_t	tmp_removed;	/* leftovers of writers that died */
	uint64_t	bytes;			/* of valid blocks */
} TdbDiskCacheReport;

/*
 * Check every block file of dir (header, key hash = file name, CRC),
 * removing bad ones and stale temporaries.  Safe while others use the cache.
 */
int			tdb_disk_cache_verify(const char *dir, TdbDiskCacheReport *rep,
								  TdbTrailError *err);

/* In-process LRU of blocks, bounded by bytes. */
typedef struct TdbBlockLru TdbBlockLru;

TdbBlockLru *tdb_lru_create(size_t max_bytes);
void		tdb_lru_free(TdbBlockLru *l);
size_t		tdb_lru_capacity(const TdbBlockLru *l);

/*
 * Change the bound in place, evicting the least recently used blocks down to
 * it: pagers that share the LRU keep using it (never free an LRU a pager may
 * still hold).
 */
void		tdb_lru_resize(TdbBlockLru *l, size_t max_bytes);

/* Copy [off, off + len) of the cached block into dst; false on a miss. */
bool		tdb_lru_get(TdbBlockLru *l, const char *key, size_t off, size_t len, void *dst);
void		tdb_lru_put(TdbBlockLru *l, const char *key, const void *data, size_t len);

/* How many times this process walked a cache directory (opens, sweeps). */
uint64_t	tdb_disk_cache_scans(void);

#endif							/* TDB_TRAIL_CACHE_H */
