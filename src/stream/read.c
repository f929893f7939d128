/*
 * read.c
 *	  Reading stream files (stream.h): range scans over blocks and chunks,
 *	  the record at a time, statistics, file information and verification.
 */
#include "stream/engine.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "checksum.h"

/* ---- reading ---------------------------------------------------------------------- */

/*
 * Records of chunk c of the block at logical index position pos of stream
 * s (entry e), into sec; returns the count or a negative code.  Chunks not
 * yet written are read from memory (the open one included).
 */
static int
load_chunk(TdbStreamDB *db, int s, uint64_t pos, const IdxEntry *e, uint32_t c, uint8_t *sec)
{
	StreamState *st = &db->st[s];
	bool		newest = pos == st->idx_head + st->idx_count - 1;
	int			n;

	if (newest && c >= st->chunks_done)
	{
		if (c > st->chunks_done || st->open_nrec == 0)
			return 0;
		memcpy(sec, st->chunk, TDB_STREAM_SECTOR);
		return (int) st->open_nrec;
	}
	if ((n = stream_io_read(db, stream_data_off(&db->durable, e->block) + (uint64_t) c * TDB_STREAM_SECTOR, sec,
					 TDB_STREAM_SECTOR)) != TDB_STREAM_OK)
		return n;
	n = stream_chunk_check(db, s, e, c, sec);
	if (n < 0)
		return stream_fail(db, NULL, 0, TDB_STREAM_ECORRUPT, "stream %s: block %u chunk %u is damaged",
					db->schema.streams[s].name, e->block, c);
	return n;
}

/* Chunks a block of stream s holds (the newest: as far as written). */
static uint32_t
block_chunks(const TdbStreamDB *db, int s, uint64_t pos)
{
	const StreamState *st = &db->st[s];

	if (pos == st->idx_head + st->idx_count - 1)
		return st->chunks_done + (st->open_nrec > 0 ? 1 : 0);
	return db->chunks_per_block;
}

typedef struct Cursor
{
	int			s;
	int64_t		from,
				to;
	TdbStreamVisit fn;
	void	   *arg;
	int64_t		seek;			/* the first block read starts at the chunk holding this time */
} Cursor;

/*
 * The chunk of a block to start reading at for records from cur->seek on:
 * the last whose first record is at or before it (a binary search over the
 * chunks, which are in time order), or the first chunk.
 */
static int
start_chunk(TdbStreamDB *db, const Cursor *cur, uint64_t pos, const IdxEntry *e, uint32_t nc, uint32_t *out)
{
	uint32_t	lo = 1,
				hi = nc;		/* chunk 0 starts at or before from, or from is before the block */
	uint8_t		sec[TDB_STREAM_SECTOR];

	*out = 0;
	if (cur->seek <= e->first_ts)
		return TDB_STREAM_OK;
	while (lo < hi)
	{
		uint32_t	mid = lo + (hi - lo) / 2;
		int			n = load_chunk(db, cur->s, pos, e, mid, sec);
		int64_t		ts;

		if (n < 0)
			return n;
		memcpy(&ts, sec + CHUNK_HDR, 8);
		if (n > 0 && ts <= cur->seek)
			lo = mid + 1;
		else
			hi = mid;
	}
	*out = lo - 1;
	return TDB_STREAM_OK;
}

/* Visit the records of blocks from position pos on, within [from, to]. */
static int
scan(TdbStreamDB *db, Cursor *cur, uint64_t pos)
{
	StreamState *st = &db->st[cur->s];
	const TdbStreamDef *d = &db->schema.streams[cur->s];
	uint8_t		sec[TDB_STREAM_SECTOR];
	bool		first = true;

	for (; pos < st->idx_head + st->idx_count; pos++)
	{
		uint32_t	nc = block_chunks(db, cur->s, pos);
		uint32_t	c0 = 0;
		IdxEntry	e;
		int			rc;

		if ((rc = stream_idx_get(db, cur->s, pos, &e)) != TDB_STREAM_OK)
			return rc;
		if (first && (rc = start_chunk(db, cur, pos, &e, nc, &c0)) != TDB_STREAM_OK)
			return rc;
		first = false;
		for (uint32_t c = c0; c < nc; c++)
		{
			int			n = load_chunk(db, cur->s, pos, &e, c, sec);

			if (n < 0)
				return n;
			if (n == 0)
				break;			/* the newest block, as far as written */
			for (int r = 0; r < n; r++)
			{
				TdbStreamRecord rec;

				stream_decode_record(d, sec + CHUNK_HDR + (size_t) r * st->rec_size, &rec);
				if (rec.ts > cur->to)
					return TDB_STREAM_OK;
				if (rec.ts >= cur->from && cur->fn(&rec, cur->arg))
					return 1;
			}
		}
	}
	return TDB_STREAM_OK;
}

/*
 * Index position of the last block of stream s whose first timestamp is
 * <= t, or the oldest (a binary search: it reads the index sectors it
 * probes, log2 of the stream's blocks / 31 of them, and no others).
 */
static int
find_block(TdbStreamDB *db, int s, int64_t t, uint64_t *out)
{
	const StreamState *st = &db->st[s];
	uint64_t	lo = st->idx_head,
				hi = st->idx_head + st->idx_count;	/* first with first_ts > t */

	while (lo < hi)
	{
		uint64_t	mid = lo + (hi - lo) / 2;
		IdxEntry	e;
		int			rc = stream_idx_get(db, s, mid, &e);

		if (rc != TDB_STREAM_OK)
			return rc;
		if (e.first_ts <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	*out = lo > st->idx_head ? lo - 1 : st->idx_head;
	return TDB_STREAM_OK;
}

int
tdb_stream_range(TdbStreamDB *db, int s, int64_t from, int64_t to, TdbStreamVisit fn, void *arg)
{
	Cursor		cur = {s, from, to, fn, arg, from};
	int			rc;
	uint64_t	pos;

	if (s < 0 || (uint32_t) s >= db->schema.nstreams)
		return stream_fail(db, NULL, 0, TDB_STREAM_EINVAL, "no stream number %d", s);
	if (db->st[s].idx_count == 0 || from > to)
		return TDB_STREAM_OK;
	if ((rc = find_block(db, s, from, &pos)) != TDB_STREAM_OK)
		return rc;
	rc = scan(db, &cur, pos);
	return rc > 0 ? TDB_STREAM_OK : rc;
}

typedef struct AtArg
{
	int64_t		t;
	bool		found;
	TdbStreamRecord *out;
} AtArg;

static int
at_visit(const TdbStreamRecord *rec, void *p)
{
	AtArg	   *a = p;

	*a->out = *rec;
	a->found = true;
	return 0;
}

int
tdb_stream_at(TdbStreamDB *db, int s, int64_t t, TdbStreamRecord *out)
{
	AtArg		a = {t, false, out};
	Cursor		cur = {s, INT64_MIN, t, at_visit, &a, t};
	int			rc;
	uint64_t	pos;

	if (s < 0 || (uint32_t) s >= db->schema.nstreams)
		return stream_fail(db, NULL, 0, TDB_STREAM_EINVAL, "no stream number %d", s);
	if (db->st[s].idx_count == 0)
		return TDB_STREAM_ENOTFOUND;
	/* the block holding t, or if t is before its first record, the one before */
	if ((rc = find_block(db, s, t, &pos)) != TDB_STREAM_OK)
		return rc;
	rc = scan(db, &cur, pos);
	if (rc < 0)
		return rc;
	return a.found ? TDB_STREAM_OK : TDB_STREAM_ENOTFOUND;
}

static int
count_visit(const TdbStreamRecord *rec, void *p)
{
	(void) rec;
	(*(uint64_t *) p)++;
	return 0;
}

/* Counts the records by reading them: O(n), for tools. */
int
tdb_stream_stats(TdbStreamDB *db, int s, TdbStreamStats *out)
{
	StreamState *st;

	if (s < 0 || (uint32_t) s >= db->schema.nstreams)
		return stream_fail(db, NULL, 0, TDB_STREAM_EINVAL, "no stream number %d", s);
	st = &db->st[s];
	memset(out, 0, sizeof(*out));
	out->blocks = st->idx_count;
	out->inserts = st->inserts;
	out->stored = st->stored;
	if (st->idx_count > 0)
	{
		IdxEntry	e;
		int			rc;

		if ((rc = stream_idx_head_entry(db, s, &e)) != TDB_STREAM_OK || (rc = stream_ready(db, s)) != TDB_STREAM_OK)
			return rc;
		out->first_ts = e.first_ts;
	}
	out->last_ts = st->has_stored ? st->last_stored.ts : 0;
	return tdb_stream_range(db, s, INT64_MIN + 1, INT64_MAX, count_visit, &out->records);
}

void
tdb_stream_info(const TdbStreamDB *db, TdbStreamFileInfo *out)
{
	uint64_t	used = 0;

	memset(out, 0, sizeof(*out));
	out->block_size = db->durable.block_size;
	out->data_blocks = db->durable.ndata;
	/* each block belongs to at most one stream's index */
	for (uint32_t s = 0; s < db->schema.nstreams; s++)
		used += db->st[s].idx_count;
	out->free_blocks = used < db->durable.ndata ? db->durable.ndata - (uint32_t) used : 0;
	out->commit_seq = db->durable.seq;
	out->open_reads = db->open_reads;
	out->sectors_read = db->sectors_read;
	out->bytes_read = db->bytes_read;
	out->index_sectors_cached = db->nisec;
	out->bytes_written = db->bytes_written;
	for (uint32_t s = 0; s < db->schema.nstreams; s++)
		out->record_size[s] = db->st[s].rec_size;
}

typedef struct VerifyArg
{
	int64_t		prev;
	bool		first;
	bool		bad;
	uint64_t	n;
} VerifyArg;

static int
verify_visit(const TdbStreamRecord *rec, void *p)
{
	VerifyArg  *v = p;

	if (!v->first && rec->ts <= v->prev)
		v->bad = true;
	v->first = false;
	v->prev = rec->ts;
	v->n++;
	return 0;
}

/*
 * Every committed entry names a block in range that no other entry names
 * (opening no longer reads the whole index, so this is checked here), and
 * every stream's chunks read back in time order.
 */
int
tdb_stream_verify(TdbStreamDB *db)
{
	uint8_t    *taken = calloc(db->durable.ndata / 8 + 1, 1);

	if (taken == NULL)
		return stream_fail(db, NULL, 0, TDB_STREAM_ENOMEM, "out of memory");
	for (uint32_t s = 0; s < db->schema.nstreams; s++)
		for (uint32_t i = 0; i < db->st[s].idx_count; i++)
		{
			IdxEntry	e;
			int			rc = stream_idx_get(db, (int) s, db->st[s].idx_head + i, &e);

			if (rc == TDB_STREAM_OK && (taken[e.block / 8] >> (e.block % 8)) & 1)
				rc = stream_fail(db, NULL, 0, TDB_STREAM_ECORRUPT, "stream %s: index entry %u names block %u, taken",
						  db->schema.streams[s].name, i, e.block);
			if (rc != TDB_STREAM_OK)
			{
				free(taken);
				return rc;
			}
			taken[e.block / 8] |= (uint8_t) (1u << (e.block % 8));
		}
	free(taken);
	for (uint32_t s = 0; s < db->schema.nstreams; s++)
	{
		VerifyArg	v = {0, true, false, 0};
		int			rc = tdb_stream_range(db, (int) s, INT64_MIN + 1, INT64_MAX, verify_visit, &v);

		if (rc != TDB_STREAM_OK)
			return rc;
		if (v.bad)
			return stream_fail(db, NULL, 0, TDB_STREAM_ECORRUPT, "stream %s: timestamps out of order",
						db->schema.streams[s].name);
	}
	return TDB_STREAM_OK;
}
