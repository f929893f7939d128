/*
 * pager.c
 *	  Reads byte ranges of one trail file from a local path or a remote
 *	  object, through the in-process LRU and the shared disk cache.
 *
 * Remote reads go by fixed-size blocks (block n = bytes [n*bs, (n+1)*bs)),
 * the unit of both caches.  Missing blocks of one read are fetched together:
 * adjacent ones as one range GET, separate runs concurrently.  When reads
 * follow each other through the file, the pager also fetches the blocks
 * after the read, doubling that read-ahead window (up to readahead_max) as
 * long as access stays sequential and dropping it on the first jump, so a
 * point lookup fetches one block and a scan streams.  Blocks are 16 KiB by
 * default (issue 33; 1 MiB before): a point read fetches little, and a
 * scan's announced windows go out as long range GETs all the same, later
 * windows also bridging small gaps between their runs (bridge_gaps).
 *
 * The object's size and ETag come from the first request, a suffix range
 * GET of its last 16 KiB (the trailer and a small footer; the reader asks
 * for the rest of a larger footer exactly, tdb_pager_extend_tail), or of
 * as few as 4 KiB when the caller expects to need the footer's head alone
 * (tail_bytes: the FDW's footer aggregates, count(*)); the
 * ETag is part of every cache key and pinned with If-Match on every later
 * GET.  Local files are read with pread and bypass both caches (the kernel
 * page cache does that job).  With revalidate_seconds, an open within that
 * many seconds of the process's last tail request for the same object
 * reuses what it learnt (size, ETag, tail bytes) and sends nothing; so
 * does an open under the same validation token (one per FDW statement).
 *
 * No byte is fetched twice by one pager: blocks overlapping the tail are
 * completed from it rather than fetched again, and the pager keeps two
 * blocks itself, whatever the LRU does (trafficdb.trail_memory_cache = 0,
 * or a scan longer than the LRU): the block its last read ended in, where a
 * reader going through the file reads next, and the first block of the
 * footer (read at open), which also holds the last pages.
 */
#include "pager.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bridge.h"
#include "cache.h"
#include "pager_internal.h"
#include "remote.h"

int
tdb_pager_open(const TdbPagerOptions *o, TdbPager **out, TdbTrailError *err)
{
	TdbPager   *p;
	int			rc;

	*out = NULL;
	if (o->url == NULL || o->url[0] == '\0')
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "no file or URL given");
	if (o->block_size && (o->block_size < 4096 || o->block_size > (64u << 20) ||
						  (o->block_size & (o->block_size - 1))))
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL,
							  "block size %u: must be a power of two from 4 KiB to 64 MiB", o->block_size);
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	p->fd = -1;
	p->bs = o->block_size ? o->block_size : DEFAULT_BLOCK;
	p->max_parallel = o->max_parallel > 0 ? o->max_parallel : 4;
	p->readahead_max = o->readahead_max > 0 ? (uint32_t) o->readahead_max : o->readahead_max < 0 ? 0 :
		DEFAULT_READAHEAD;

	if (strstr(o->url, "://") == NULL)
	{
		struct stat st;

		p->local = true;
		/* O_NONBLOCK: a FIFO must not block the open (it is refused below) */
		p->fd = open(o->url, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (p->fd < 0)
		{
			int			e = errno;

			free(p);
			return tdb_trail_fail(err, e == ENOENT ? TDB_TRAIL_ENOTFOUND : TDB_TRAIL_EIO,
								  "could not open trail file \"%s\": %s", o->url, strerror(e));
		}
		if (fstat(p->fd, &st) != 0)
		{
			tdb_pager_close(p);
			return tdb_trail_fail(err, TDB_TRAIL_EIO, "could not stat \"%s\"", o->url);
		}
		if (!S_ISREG(st.st_mode))
		{
			tdb_pager_close(p);
			return tdb_trail_fail(err, TDB_TRAIL_EIO, "\"%s\" is not a regular file", o->url);
		}
		p->size = (uint64_t) st.st_size;
		snprintf(p->etag, sizeof(p->etag), "%llx:%llx-%llx-%lx.%09ld", (unsigned long long) st.st_dev,
				 (unsigned long long) st.st_ino, (unsigned long long) st.st_size, (long) st.st_mtime,
				 (long) st.st_mtim.tv_nsec);
		/* for a local file the identity is its path (cache_id: remote objects' endpoint|name) */
		if ((p->cache_id = strdup(o->url)) == NULL)
		{
			tdb_pager_close(p);
			return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
		}
		*out = p;
		return 0;
	}

	{
		/* the remote object asks the pager, which asks the caller (or stops a job at close) */
		TdbNetOptions net = o->net;

		p->user_cancel = o->net.cancel;
		p->user_cancel_arg = o->net.cancel_arg;
		net.cancel = trail_pager_cancel;
		net.cancel_arg = p;
		if ((rc = tdb_remote_open(o->url, &o->s3, &net, &p->remote, err)) < 0)
		{
			free(p);
			return rc;
		}
	}
	if (o->async)
		trail_pager_async_init(p);
	{
		const char *ep = strncmp(o->url, "s3://", 5) == 0 && o->s3.endpoint ? o->s3.endpoint : "";
		size_t		n = strlen(ep) + strlen(tdb_remote_name(p->remote)) + 2;

		p->cache_id = malloc(n);
		if (p->cache_id)
			snprintf(p->cache_id, n, "%s|%s", ep, tdb_remote_name(p->remote));
	}
	p->tail_cap = o->tail_bytes == 0 ? TAIL_BYTES :
		o->tail_bytes < TAIL_BYTES_MIN ? TAIL_BYTES_MIN :
		o->tail_bytes > TAIL_BYTES ? TAIL_BYTES : o->tail_bytes;
	p->tail = malloc(p->tail_cap);
	if (p->cache_id == NULL || p->tail == NULL)
	{
		tdb_pager_close(p);
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	}
	if (o->lru)
		p->lru = o->lru;
	else
	{
		p->lru = tdb_lru_create(o->lru_bytes ? o->lru_bytes : (64u << 20));
		p->own_lru = true;
		if (p->lru == NULL)
		{
			tdb_pager_close(p);
			return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
		}
	}
	if (o->cache_dir && (rc = tdb_disk_cache_open(o->cache_dir, o->cache_max_bytes, &p->disk, err)) < 0)
	{
		tdb_pager_close(p);
		return rc;
	}
	p->token = o->validation_token;
	p->remember = o->revalidate_seconds > 0 || o->validation_token != 0;
	if (p->remember && trail_validated_get(p, (double) o->revalidate_seconds))
		p->reused = true;
	else
	{
		double		t0 = tdb_mono_s();

		rc = tdb_remote_get_tail(p->remote, p->tail_cap, p->tail, &p->tail_len, &p->size,
								 p->etag, sizeof(p->etag), err);
		p->stats.wait_seconds += tdb_mono_s() - t0;
		if (rc < 0)
		{
			tdb_pager_close(p);
			return rc;
		}
		p->stats.bytes_network += p->tail_len;
		if (p->remember)
			trail_validated_put(p);
	}
	p->tail_off = p->size - p->tail_len;
	*out = p;
	return 0;
}

uint64_t
tdb_pager_size(const TdbPager *p)
{
	return p->size;
}

const char *
tdb_pager_etag(const TdbPager *p)
{
	return p->etag;
}

const char *
tdb_pager_identity(const TdbPager *p)
{
	return p->cache_id;
}

/* After a failed GET: an object replaced is asked for again at the next open. */
static void
note_replaced(TdbPager *p, int rc, TdbTrailError *err)
{
	if (rc != TDB_TRAIL_EREPLACED)
		return;
	trail_validated_forget(p);
	if (p->reused && err)
	{
		size_t		l = strlen(err->msg);

		snprintf(err->msg + l, sizeof(err->msg) - l,
				 " (this query read the version validated %.0f s earlier, within the revalidation interval)",
				 p->reused_age);
	}
}

/*
 * Range GETs pinned by the ETag, counted in the pager's statistics; an
 * object replaced is forgotten (note_replaced).
 */
int
trail_pager_remote_get(TdbPager *p, const TdbByteRange *ranges, uint8_t **bufs, int n, TdbTrailError *err)
{
	uint64_t	req0,
				retr0,
				bytes0,
				req1,
				retr1,
				bytes1;
	int			rc;

	tdb_remote_counters(p->remote, &req0, &retr0, &bytes0);
	rc = tdb_remote_get_ranges(p->remote, ranges, bufs, n, p->max_parallel, p->etag, p->size, err);
	tdb_remote_counters(p->remote, &req1, &retr1, &bytes1);
	p->stats.requests += req1 - req0;
	p->stats.retries += retr1 - retr0;
	p->stats.bytes_network += bytes1 - bytes0;
	/* the next open asks again; say why this one read an old version */
	note_replaced(p, rc, err);
	return rc;
}

int
tdb_pager_extend_tail(TdbPager *p, uint64_t off, TdbTrailError *err)
{
	TdbByteRange r;
	uint8_t    *nt;
	char		key[1200];
	int			rc;
	double		t0;

	if (p->local || off >= p->tail_off || p->tail_off - off > TAIL_EXTEND_MAX)
		return 0;
	t0 = tdb_mono_s();
	trail_pager_async_join(p, false);	/* its thread reads the tail */
	p->stats.wait_seconds += tdb_mono_s() - t0;
	r.off = off;
	r.len = p->tail_off - off;
	if ((nt = malloc(r.len + p->tail_len)) == NULL)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory for %llu bytes of footer",
							  (unsigned long long) r.len);
	/*
	 * The range is cached as one piece of its own (keyed like a block, by
	 * object, ETag and range), not as blocks: a warm open finds it whole,
	 * a cold one fetches exactly it.
	 */
	snprintf(key, sizeof(key), "%s\n%s\nrange\n%llu+%llu", p->cache_id, p->etag,
			 (unsigned long long) r.off, (unsigned long long) r.len);
	if (tdb_lru_get(p->lru, key, 0, r.len, nt))
		p->stats.bytes_memory += r.len;
	else if (p->disk != NULL && tdb_disk_cache_get(p->disk, key, nt, r.len))
	{
		p->stats.bytes_disk_cache += r.len;
		tdb_lru_put(p->lru, key, nt, r.len);
	}
	else
	{
		t0 = tdb_mono_s();
		rc = trail_pager_remote_get(p, &r, &nt, 1, err);
		p->stats.wait_seconds += tdb_mono_s() - t0;
		if (rc < 0)
		{
			free(nt);
			return rc;
		}
		tdb_lru_put(p->lru, key, nt, r.len);
		if (p->disk)
			tdb_disk_cache_put(p->disk, key, nt, r.len);
	}
	memcpy(nt + r.len, p->tail, p->tail_len);
	free(p->tail);
	p->tail = nt;
	p->tail_len += r.len;
	p->tail_cap = p->tail_len;
	p->tail_off = off;
	if (p->remember)
		trail_validated_put(p);
	return 0;
}

static uint64_t
block_len(const TdbPager *p, uint64_t blk)
{
	uint64_t	start = blk * p->bs;

	return p->size - start < p->bs ? p->size - start : p->bs;
}

static void
block_key(const TdbPager *p, uint64_t blk, char *out, size_t outlen)
{
	snprintf(out, outlen, "%s\n%s\n%u\n%llu", p->cache_id, p->etag, p->bs, (unsigned long long) blk);
}

/*
 * Copy [off, off + len) of block blk from a cache into dst: the LRU, else
 * the disk cache (promoting the block to the LRU).
 */
static bool
cached_block(TdbPager *p, uint64_t blk, size_t off, size_t len, uint8_t *dst)
{
	char		key[1200];
	uint64_t	bl = block_len(p, blk);
	uint8_t    *tmp;

	for (int h = 0; h < 2; h++)
		if (p->held[h].len > 0 && p->held[h].blk == blk)
		{
			if (len > 0)
				memcpy(dst, p->held[h].data + off, len);
			p->stats.bytes_memory += len;
			return true;
		}
	block_key(p, blk, key, sizeof(key));
	if (tdb_lru_get(p->lru, key, off, len, dst))
	{
		p->stats.bytes_memory += len;
		return true;
	}
	if (p->disk == NULL || (tmp = malloc(bl)) == NULL)
		return false;
	if (!tdb_disk_cache_get(p->disk, key, tmp, bl))
	{
		free(tmp);
		return false;
	}
	p->stats.bytes_disk_cache += bl;
	tdb_lru_put(p->lru, key, tmp, bl);
	if (dst)
		memcpy(dst, tmp + off, len);
	free(tmp);
	return true;
}

/* The part of block blk within the read [off, off + len) into dst, from a cache. */
static bool
cached_part(TdbPager *p, uint64_t blk, uint64_t off, size_t len, uint8_t *dst)
{
	uint64_t	bs0 = blk * p->bs;
	uint64_t	s = off > bs0 ? off : bs0;
	uint64_t	e = off + len < bs0 + block_len(p, blk) ? off + len : bs0 + block_len(p, blk);

	return cached_block(p, blk, s - bs0, e - s, dst + (s - off));
}

#define HELD_LAST 0
#define HELD_EDGE 1
#define NO_BLOCK UINT64_MAX

/* Keep block blk (bl bytes at data) in the pager's own slot h. */
static void
hold_block(TdbPager *p, int h, uint64_t blk, const uint8_t *data, uint64_t bl)
{
	if (p->held[h].data == NULL && (p->held[h].data = malloc(p->bs)) == NULL)
		return;
	memcpy(p->held[h].data, data, bl);
	p->held[h].blk = blk;
	p->held[h].len = bl;
}

/*
 * Fetch blocks (sorted, distinct) from the network into both caches;
 * the part overlapping [off, off + len) also lands in dst, and block hold[h]
 * (NO_BLOCK: none) in the pager's slot h.  Bytes the tail request already
 * brought are copied from it, not fetched again.
 */
static int
fetch_blocks(TdbPager *p, uint64_t *blocks, int n, uint64_t off, size_t len, uint8_t *dst,
			 const uint64_t *hold, uint64_t max_range, TdbTrailError *err)
{
	TdbByteRange *ranges = malloc(sizeof(TdbByteRange) * (size_t) n);
	TdbByteRange *get = malloc(sizeof(TdbByteRange) * (size_t) n);
	uint8_t   **bufs = calloc((size_t) n, sizeof(uint8_t *));
	uint8_t   **getbufs = calloc((size_t) n, sizeof(uint8_t *));
	uint64_t   *first = malloc(sizeof(uint64_t) * (size_t) n);
	int			nr = 0,
				ng = 0;
	int			rc = 0;

	if (!ranges || !get || !bufs || !getbufs || !first)
	{
		rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
		goto done;
	}
	qsort(blocks, (size_t) n, sizeof(uint64_t), trail_block_cmp);
	for (int i = 0; i < n; i++)
	{
		uint64_t	bo = blocks[i] * p->bs,
					bl = block_len(p, blocks[i]);

		if (nr > 0 && ranges[nr - 1].off + ranges[nr - 1].len == bo &&
			ranges[nr - 1].len + bl <= max_range)
			ranges[nr - 1].len += bl;
		else
		{
			ranges[nr].off = bo;
			ranges[nr].len = bl;
			first[nr] = blocks[i];
			nr++;
		}
	}
	for (int i = 0; i < nr; i++)
	{
		if ((bufs[i] = malloc(ranges[i].len)) == NULL)
		{
			rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
			goto done;
		}
		/* what lies in the tail comes from it; the rest from the network */
		if (ranges[i].off < p->tail_off)
		{
			get[ng].off = ranges[i].off;
			get[ng].len = ranges[i].off + ranges[i].len <= p->tail_off ? ranges[i].len :
				p->tail_off - ranges[i].off;
			getbufs[ng++] = bufs[i];
		}
		if (ranges[i].off + ranges[i].len > p->tail_off)
		{
			uint64_t	s = ranges[i].off > p->tail_off ? ranges[i].off : p->tail_off;

			memcpy(bufs[i] + (s - ranges[i].off), p->tail + (s - p->tail_off),
				   ranges[i].off + ranges[i].len - s);
		}
	}
	rc = ng > 0 ? trail_pager_remote_get(p, get, getbufs, ng, err) : 0;
	if (rc < 0)
		goto done;
	for (int i = 0; i < nr; i++)
	{
		for (uint64_t bo = 0; bo < ranges[i].len;)
		{
			uint64_t	blk = first[i] + bo / p->bs;
			uint64_t	bl = block_len(p, blk);
			uint64_t	abs = ranges[i].off + bo;
			char		key[1200];

			block_key(p, blk, key, sizeof(key));
			tdb_lru_put(p->lru, key, bufs[i] + bo, bl);
			/* the overlap of this block with the caller's read */
			if (dst && abs < off + len && abs + bl > off)
			{
				uint64_t	s = abs > off ? abs : off;
				uint64_t	e = abs + bl < off + len ? abs + bl : off + len;

				memcpy(dst + (s - off), bufs[i] + bo + (s - abs), e - s);
			}
			for (int h = 0; h < 2; h++)
				if (blk == hold[h])
					hold_block(p, h, blk, bufs[i] + bo, bl);
			bo += bl;
		}
	}
	/*
	 * The blocks are in the LRU: a reader waiting for them may go on (the
	 * read-ahead thread tells it) while they are written to the disk cache,
	 * a file each (27 ms of a 91 ms cold box query at 0.3 M reports).
	 */
	if (p->as.lru_filled != NULL && nr > 0)
		p->as.lru_filled(p, first[nr - 1] + (ranges[nr - 1].len - 1) / p->bs + 1);
	for (int i = 0; p->disk && !p->as.bulk && i < nr; i++)
		for (uint64_t bo = 0; bo < ranges[i].len;)
		{
			uint64_t	blk = first[i] + bo / p->bs;
			uint64_t	bl = block_len(p, blk);
			char		key[1200];

			block_key(p, blk, key, sizeof(key));
			tdb_disk_cache_put(p->disk, key, bufs[i] + bo, bl);
			bo += bl;
		}
done:
	for (int i = 0; bufs && i < nr; i++)
		free(bufs[i]);
	free(bufs);
	free(getbufs);
	free(ranges);
	free(get);
	free(first);
	return rc;
}

/* Keep block blk, a cache hit, in the pager's slot h. */
static void
hold_cached(TdbPager *p, int h, uint64_t blk)
{
	char		key[1200];
	uint64_t	bl = block_len(p, blk);

	if (p->held[h].len > 0 && p->held[h].blk == blk)
		return;
	if (p->held[h].data == NULL && (p->held[h].data = malloc(p->bs)) == NULL)
		return;
	for (int o = 0; o < 2; o++)
		if (o != h && p->held[o].len > 0 && p->held[o].blk == blk)
		{
			memcpy(p->held[h].data, p->held[o].data, bl);
			p->held[h].blk = blk;
			p->held[h].len = bl;
			return;
		}
	block_key(p, blk, key, sizeof(key));
	if (tdb_lru_get(p->lru, key, 0, bl, p->held[h].data) ||
		(p->disk != NULL && tdb_disk_cache_get(p->disk, key, p->held[h].data, bl)))
	{
		p->held[h].blk = blk;
		p->held[h].len = bl;
	}
	else
		p->held[h].len = 0;
}

int
trail_pager_read_local(TdbPager *p, uint64_t off, size_t len, uint8_t *dst, TdbTrailError *err)
{
	while (len > 0)
	{
		ssize_t		r = pread(p->fd, dst, len, (off_t) off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return tdb_trail_fail(err, TDB_TRAIL_EIO, "read of %zu bytes at offset %llu failed: %s",
								  len, (unsigned long long) off, r < 0 ? strerror(errno) : "end of file");
		p->stats.bytes_local += (uint64_t) r;
		dst += r;
		off += (uint64_t) r;
		len -= (size_t) r;
	}
	return 0;
}

int
tdb_pager_read(TdbPager *p, uint64_t off, size_t len, void *buf, TdbTrailError *err)
{
	uint8_t    *dst = buf;
	uint64_t	b0,
				b1;
	uint64_t	missing[MAX_FETCH_BLOCKS];
	int			nmiss = 0;
	int			rc;
	uint64_t	hold[2];

	p->stats.reads++;
	if (off > p->size || len > p->size - off)
		return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT, "read of %zu bytes at offset %llu past the end (%llu bytes)",
							  len, (unsigned long long) off, (unsigned long long) p->size);
	if (len == 0)
		return 0;
	if (p->local)
		return trail_pager_read_local(p, off, len, dst, err);
	if (off >= p->tail_off)
	{
		memcpy(dst, p->tail + (off - p->tail_off), len);
		p->stats.bytes_memory += len;
		return 0;
	}

	b0 = off / p->bs;
	b1 = (off + len - 1) / p->bs;
	/* a read reaching into the tail (the footer): its first block holds the last pages too */
	hold[HELD_LAST] = b1;
	hold[HELD_EDGE] = off + len > p->tail_off ? b0 : NO_BLOCK;
	if (b1 - b0 + 1 > MAX_FETCH_BLOCKS / 2)
	{
		/* a huge read: in pieces, each within the block budget */
		uint64_t	piece = (uint64_t) (MAX_FETCH_BLOCKS / 4) * p->bs;

		for (uint64_t done = 0; done < len; done += piece)
			if ((rc = tdb_pager_read(p, off + done, len - done < piece ? len - done : piece,
									 dst + done, err)) < 0)
				return rc;
		if (hold[HELD_EDGE] != NO_BLOCK)
			hold_cached(p, HELD_EDGE, b0);
		return 0;
	}
	for (uint64_t blk = b0; blk <= b1; blk++)
		if (!cached_part(p, blk, off, len, dst))
			missing[nmiss++] = blk;
	/*
	 * Blocks the read-ahead thread is bringing: wait for their group, then
	 * look again; what it did not bring is fetched here, once it has ended.
	 */
	if (nmiss > 0 && p->as.started)
	{
		int			k = 0;
		double		t0 = tdb_mono_s();

		rc = trail_pager_async_wait(p, missing, nmiss, err);
		p->stats.wait_seconds += tdb_mono_s() - t0;
		if (rc < 0)
			return rc;
		for (int i = 0; i < nmiss; i++)
			if (!cached_part(p, missing[i], off, len, dst))
				missing[k++] = missing[i];
		nmiss = k;
		if (nmiss > 0)
		{
			t0 = tdb_mono_s();
			trail_pager_async_join(p, false);
			p->stats.wait_seconds += tdb_mono_s() - t0;
		}
	}
	/* adaptive read-ahead: grows while reads continue where the last ended */
	if (p->readahead_max > 0 && p->hinted == 0 && (b0 == p->next_seq_block || b0 + 1 == p->next_seq_block))
		p->ra_window = p->ra_window ? (p->ra_window * 2 > p->readahead_max ? p->readahead_max : p->ra_window * 2) : 1;
	else
		p->ra_window = 0;
	p->next_seq_block = (off + len) / p->bs;
	if (nmiss > 0)
	{
		uint64_t	nblocks = (p->size + p->bs - 1) / p->bs;
		/* blocks read ahead wait in the LRU: no more than half of it */
		uint64_t	room = tdb_lru_capacity(p->lru) / 2 / p->bs;
		uint64_t	ra = p->ra_window < room ? p->ra_window : room;
		double		t0;

		for (uint64_t blk = b1 + 1; blk <= b1 + ra && blk < nblocks &&
			 nmiss < MAX_FETCH_BLOCKS; blk++)
		{
			char		key[1200];

			block_key(p, blk, key, sizeof(key));
			if (!tdb_lru_get(p->lru, key, 0, 0, NULL))
				missing[nmiss++] = blk;
		}
		t0 = tdb_mono_s();
		rc = fetch_blocks(p, missing, nmiss, off, len, dst, hold, MAX_RANGE_BYTES, err);
		p->stats.wait_seconds += tdb_mono_s() - t0;
		if (rc < 0)
			return rc;
	}
	hold_cached(p, HELD_LAST, b1);
	if (hold[HELD_EDGE] != NO_BLOCK)
		hold_cached(p, HELD_EDGE, b0);
	return 0;
}

/* Blocks announced: into the caches, no caller's buffer, nothing held. */
static int
fetch_ahead(TdbPager *p, uint64_t *blocks, int n, uint64_t max_range, TdbTrailError *err)
{
	uint64_t	none[2] = {NO_BLOCK, NO_BLOCK};

	return fetch_blocks(p, blocks, n, 0, 0, NULL, none, max_range, err);
}

/* trail_bridge_plan's gap_ok: no block of the gap is cached already */
static bool
gap_uncached(void *arg, uint64_t from, uint64_t to)
{
	for (uint64_t b = from; b < to; b++)
		if (cached_block((TdbPager *) arg, b, 0, 0, NULL))
			return false;
	return true;
}

/*
 * Sequential read-ahead of an announced scan: fill the gaps of at most
 * p->bridge blocks between the sorted, distinct missing blocks, so that
 * the blocks around them come in one range GET; a gap with a block already
 * cached is not filled.  The blocks added are at most half of those the
 * window needs (and the list stays within max), so bridging costs at most
 * 50 % more bytes than the exact blocks; the smallest gaps are filled
 * first, since each gap filled saves a GET whatever its size.
 *
 * Measured on the ADS-B set of bench/trails_parquet.sh (issue 33): gaps
 * of up to 2 blocks and a sixteenth cost 3-5 % more bytes for 5-18 % fewer
 * requests; gaps of up to 16 blocks and a quarter, filled in file order
 * until the quarter was spent, left the box on 5.4 M reports at 245 GETs
 * of 79 MB in 450-590 ms (bench/trailbench query URL box:... 16384 range);
 * the smallest gaps first, 112 GETs of 79 MB in 364-372 ms; with a third
 * or a half, every gap (the whole 85 MB object in 11 GETs), 270-290 ms.
 * Here a GET costs about as much as 300 kB more in one (on a network
 * farther away, more), so a gap of up to 16 blocks (256 kB) is worth
 * filling while the budget lasts.
 */
static int
bridge_gaps(TdbPager *p, uint64_t *missing, int nmiss, int max)
{
	uint64_t   *out;
	bool	   *fill;
	int64_t		added;
	int			n = 0;

	if (p->bridge == 0 || nmiss < 2)
		return nmiss;
	if ((fill = calloc((size_t) nmiss, sizeof(bool))) == NULL)
		return nmiss;
	added = trail_bridge_plan(missing, nmiss, p->bridge, (uint64_t) nmiss / 2, (uint64_t) max,
							  gap_uncached, p, fill);
	if (added <= 0 || (out = malloc(sizeof(uint64_t) * (size_t) (nmiss + added))) == NULL)
	{
		free(fill);
		return nmiss;
	}
	for (int i = 0; i < nmiss; i++)
	{
		if (fill[i])			/* never fill[0]: a gap is before a block */
			for (uint64_t b = missing[i - 1] + 1; b < missing[i]; b++)
				out[n++] = b;
		out[n++] = missing[i];
	}
	memcpy(missing, out, sizeof(uint64_t) * (size_t) n);
	free(out);
	free(fill);
	return n;
}

int
tdb_pager_prefetch(TdbPager *p, const TdbByteRange *ranges, int n, TdbTrailError *err)
{
	uint64_t   *missing;
	int			nmiss = 0;
	/*
	 * Fetched blocks wait in the LRU until read: ask for no more than half
	 * of it, or the last blocks would push out the first before they are
	 * used, and be fetched twice (the ranges come in reading order).
	 */
	uint64_t	room;
	int			max_blocks;
	int			rc;

	if (p->local)
		return 0;
	/* blocks the running job brings: nothing to do; else that job first */
	if (trail_pager_async_covers(p, ranges, n))
		return 0;
	if (p->as.started)
	{
		double		t0 = tdb_mono_s();

		trail_pager_async_join(p, false);
		p->stats.wait_seconds += tdb_mono_s() - t0;
	}
	room = tdb_lru_capacity(p->lru) / 2 / p->bs;
	if (room < 1)
		return 0;				/* the LRU could not keep them: reads fetch their own */
	max_blocks = room < PREFETCH_MAX_BLOCKS ? (int) room : PREFETCH_MAX_BLOCKS;
	if ((missing = malloc(sizeof(uint64_t) * (size_t) max_blocks)) == NULL)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	for (int i = 0; i < n && nmiss < max_blocks; i++)
	{
		uint64_t	b0,
					b1;

		if (!trail_range_blocks(p, &ranges[i], &b0, &b1))
			continue;
		for (uint64_t blk = b0; blk <= b1 && nmiss < max_blocks; blk++)
		{
			bool		dup = false;

			for (int k = nmiss - 1; k >= 0 && k >= nmiss - 4; k--)
				dup |= missing[k] == blk;
			if (!dup && !cached_block(p, blk, 0, 0, NULL))
				missing[nmiss++] = blk;
		}
	}
	if (nmiss == 0)
	{
		free(missing);
		return 0;
	}
	/* blocks may repeat across non-adjacent ranges: sort and drop repeats */
	qsort(missing, (size_t) nmiss, sizeof(uint64_t), trail_block_cmp);
	{
		int			k = 0;

		for (int i = 0; i < nmiss; i++)
			if (k == 0 || missing[k - 1] != missing[i])
				missing[k++] = missing[i];
		nmiss = k;
	}
	nmiss = bridge_gaps(p, missing, nmiss, max_blocks);
	/* the next window of this scan may bridge wider gaps */
	if (p->hinted > 0)
		p->bridge = p->bridge == 0 ? 1 : p->bridge * 2 > BRIDGE_MAX_BLOCKS ? BRIDGE_MAX_BLOCKS : p->bridge * 2;
	/* in the read-ahead thread, which frees the list; else here and now */
	if (p->as.ready && trail_pager_async_start(p, missing, nmiss, fetch_ahead))
		return 0;
	rc = fetch_ahead(p, missing, nmiss, MAX_RANGE_BYTES, err);
	free(missing);
	return rc;
}

bool
tdb_pager_is_local(const TdbPager *p)
{
	return p->local;
}

uint64_t
tdb_pager_prefetch_room(const TdbPager *p)
{
	uint64_t	room;

	if (p->local)
		return 0;
	room = tdb_lru_capacity(p->lru) / 2 / p->bs;
	if (room > MAX_FETCH_BLOCKS)
		room = MAX_FETCH_BLOCKS;
	return room * p->bs;
}

uint32_t
tdb_pager_block_size(const TdbPager *p)
{
	return p->bs;
}

void
tdb_pager_hinted(TdbPager *p, bool on)
{
	p->hinted += on ? 1 : -1;
	/* a new scan starts with exact windows */
	p->bridge = 0;
}

void
tdb_pager_bridge_widest(TdbPager *p)
{
	p->bridge = BRIDGE_MAX_BLOCKS;
}

void
tdb_pager_stats(const TdbPager *p, TdbPagerStats *out)
{
	/*
	 * The read-ahead thread's requests counted too: a job still running is
	 * stopped (after a LIMIT, EXPLAIN ANALYZE counts what was sent, not the
	 * rest of a window nobody reads; p is the caller's, not a constant).
	 */
	trail_pager_async_join((TdbPager *) p, true);
	*out = p->stats;
	out->validation_reused = p->reused;
	out->validation_age = p->reused_age;
	out->validation_by_token = p->reused && p->reused_token;
	if (p->remote)
	{
		uint64_t	req,
					retr,
					bytes;

		tdb_remote_counters(p->remote, &req, &retr, &bytes);
		out->requests = req;
		out->retries = retr;
		out->bytes_network = bytes;
	}
}

void
tdb_pager_close(TdbPager *p)
{
	if (p == NULL)
		return;
	trail_pager_async_destroy(p);
	if (p->fd >= 0)
		close(p->fd);
	tdb_remote_close(p->remote);
	if (p->own_lru)
		tdb_lru_free(p->lru);
	tdb_disk_cache_close(p->disk);
	free(p->cache_id);
	free(p->tail);
	free(p->held[0].data);
	free(p->held[1].data);
	free(p);
}
