/*
 * pager_exact.c
 *	  tdb_pager_read_exact (pager.h): byte ranges read exactly, not by
 *	  blocks, for the chunks of a version-3 footer (a few kB each, which a
 *	  block would round up): from the tail, the caches, or range GETs of
 *	  those bytes, runs of adjacent ranges as one GET.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pager.h"
#include "pager_internal.h"

/*
 * A gap of at most this many bytes between two footer chunks a read needs
 * is fetched with them, while the gaps fetched add up to at most the bytes
 * needed: one GET for chunks a little apart (on 2 cores where MinIO runs
 * too, a GET costs about as much as 300 kB more in one: bridge_gaps in
 * pager.c).  A 5-minute window over 5.4 M ADS-B reports
 * (bench/trails_parquet.sh, TRAIL_SCALE=18) needed 13 trail chunks of
 * 6-30 kB over 330 kB of footer: 13 GETs of the query's 42, now 4.
 */
#define EXACT_BRIDGE_BYTES	(64u * 1024)

/*
 * GET ranges r[0 .. n-1] into bufs, ranges that follow each other in the
 * file (the chunks of one footer section), or that a gap of at most
 * EXACT_BRIDGE_BYTES separates, as one GET up to MAX_RANGE_BYTES, then
 * split: one request for a run of chunks, not one each.  A range that
 * repeats or overlaps the run before it adds only the bytes past its end.
 */
static int
fetch_merged(TdbPager *p, const TdbByteRange *r, uint8_t **bufs, int n, TdbTrailError *err)
{
	TdbByteRange *g = malloc(n * sizeof(*g));
	uint8_t   **gb = calloc(n, sizeof(*gb));
	int		   *first = malloc(n * sizeof(*first));
	int			ng = 0,
				rc = 0;
	uint64_t	want = 0,
				bridged = 0;
	double		t0 = tdb_mono_s();	/* the caller waits from here to the GET's end */

	/* the network, and then the disk cache, are the read-ahead thread's until it ends */
	trail_pager_async_join(p, false);
	if (g == NULL || gb == NULL || first == NULL)
		rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	for (int i = 0; i < n; i++)
		want += r[i].len;
	for (int i = 0; rc == 0 && i < n; i++)
	{
		uint64_t	end = ng > 0 ? g[ng - 1].off + g[ng - 1].len : 0,
					gap = ng > 0 && r[i].off >= end ? r[i].off - end : UINT64_MAX,
					r_end = r[i].off + r[i].len;

		if (ng > 0 && r[i].off >= g[ng - 1].off && r[i].off < end &&
			(r_end <= end || r_end - g[ng - 1].off <= MAX_RANGE_BYTES))
		{
			/* the same bytes again, or overlapping the run's end: fetched once */
			if (r_end > end)
				g[ng - 1].len = r_end - g[ng - 1].off;
		}
		else if (gap <= EXACT_BRIDGE_BYTES && bridged + gap <= want &&
			g[ng - 1].len + gap + r[i].len <= MAX_RANGE_BYTES)
		{
			g[ng - 1].len += gap + r[i].len;
			bridged += gap;
		}
		else
		{
			g[ng] = r[i];
			first[ng++] = i;
		}
	}
	for (int k = 0; k < ng && rc == 0; k++)
		if ((gb[k] = malloc(g[k].len)) == NULL)
			rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory for %llu bytes", (unsigned long long) g[k].len);
	if (rc == 0)
		rc = trail_pager_remote_get(p, g, gb, ng, err);
	p->stats.wait_seconds += tdb_mono_s() - t0;
	if (rc < 0)
		goto done;
	/* each range of group k at its offset within the group's bytes */
	for (int k = 0; k < ng; k++)
		for (int i = first[k]; i < n && (k + 1 == ng || i < first[k + 1]); i++)
			memcpy(bufs[i], gb[k] + (r[i].off - g[k].off), r[i].len);
done:
	for (int k = 0; gb && k < ng; k++)
		free(gb[k]);
	free(gb);
	free(g);
	free(first);
	return rc;
}

int
tdb_pager_read_exact(TdbPager *p, const TdbByteRange *r, int n, uint8_t **bufs, TdbTrailError *err)
{
	TdbByteRange *miss = NULL;
	uint8_t   **mbuf = NULL;
	int			nmiss = 0,
				rc = 0;
	uint64_t	lo = p->tail_off,
				want = 0;

	for (int i = 0; i < n; i++)
		if (r[i].off > p->size || r[i].len > p->size - r[i].off)
			return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT, "read of %llu bytes at offset %llu past the end (%llu bytes)",
								  (unsigned long long) r[i].len, (unsigned long long) r[i].off,
								  (unsigned long long) p->size);
	for (int i = 0; p->local && i < n && rc == 0; i++, p->stats.reads++)
		rc = trail_pager_read_local(p, r[i].off, r[i].len, bufs[i], err);
	if (p->local)
		return rc;
	/*
	 * Ranges that, with the gap to the tail, are at most 1.25 times their bytes
	 * (a query needing most of a footer's chunks): the tail extended down to
	 * them in one GET, so that block reads of the last pages complete from it
	 * rather than fetching those bytes again.
	 */
	for (int i = 0; i < n; i++)
		if (r[i].off < p->tail_off)
			lo = r[i].off < lo ? r[i].off : lo, want += r[i].len;
	if (lo < p->tail_off && p->tail_off - lo <= want + want / 4 && (rc = tdb_pager_extend_tail(p, lo, err)) < 0)
		return rc;
	if ((miss = malloc(n * sizeof(*miss))) == NULL || (mbuf = malloc(n * sizeof(*mbuf))) == NULL)
	{
		rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
		goto done;
	}
	for (int i = 0; i < n; i++)
	{
		char		key[1200];
		uint64_t	len = r[i].len;

		p->stats.reads++;
		if (len == 0)
			continue;
		if (r[i].off >= p->tail_off)
		{
			memcpy(bufs[i], p->tail + (r[i].off - p->tail_off), len);
			p->stats.bytes_memory += len;
			continue;
		}
		if (len > MAX_RANGE_BYTES)
		{
			/* too long for one GET: by blocks */
			if ((rc = tdb_pager_read(p, r[i].off, len, bufs[i], err)) < 0)
				goto done;
			continue;
		}
		if (r[i].off + len > p->tail_off)
		{
			/* its end lies in the tail (a lexicon read with a chunk far below): from there */
			len = p->tail_off - r[i].off;
			memcpy(bufs[i] + len, p->tail, r[i].len - len);
			p->stats.bytes_memory += r[i].len - len;
		}
		snprintf(key, sizeof(key), "%s\n%s\nrange\n%llu+%llu", p->cache_id, p->etag,
				 (unsigned long long) r[i].off, (unsigned long long) len);
		if (tdb_lru_get(p->lru, key, 0, len, bufs[i]))
			p->stats.bytes_memory += len;
		else if (p->disk != NULL && tdb_disk_cache_get(p->disk, key, bufs[i], len))
		{
			p->stats.bytes_disk_cache += len;
			tdb_lru_put(p->lru, key, bufs[i], len);
		}
		else
		{
			miss[nmiss].off = r[i].off;
			miss[nmiss].len = len;
			mbuf[nmiss++] = bufs[i];
		}
	}
	if (nmiss > 0 && (rc = fetch_merged(p, miss, mbuf, nmiss, err)) < 0)
		goto done;
	for (int k = 0; k < nmiss; k++)
	{
		char		key[1200];

		snprintf(key, sizeof(key), "%s\n%s\nrange\n%llu+%llu", p->cache_id, p->etag,
				 (unsigned long long) miss[k].off, (unsigned long long) miss[k].len);
		tdb_lru_put(p->lru, key, mbuf[k], miss[k].len);
		if (p->disk)
			tdb_disk_cache_put(p->disk, key, mbuf[k], miss[k].len);
	}
done:
	free(miss);
	free(mbuf);
	return rc;
}
