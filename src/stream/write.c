/*
 * write.c
 *	  Writing stream files (stream.h): inserting records, sealing chunks,
 *	  allocating (and reusing) blocks, and the flush that commits.  How the
 *	  guarantee is kept is summed up in open.c.
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

/* ---- writing -------------------------------------------------------------------- */

/* Write the open chunk of stream s (sealing it) and start the next one. */
static int
seal_chunk(TdbStreamDB *db, int s)
{
	StreamState *st = &db->st[s];
	uint8_t    *sec = st->chunk;
	const IdxEntry *tail = &st->tail;
	ChunkHdr	h = {0};
	int			rc;

	h.stream = (uint16_t) s;
	h.nrec = (uint16_t) st->open_nrec;
	h.block_seq = tail->seq;
	h.chunk_no = (uint16_t) st->chunks_done;
	memcpy(sec, &h, sizeof(h));
	memset(sec + CHUNK_HDR + (size_t) st->open_nrec * st->rec_size, 0,
		   TDB_STREAM_SECTOR - CHUNK_HDR - (size_t) st->open_nrec * st->rec_size);
	h.crc = tdb_crc32c(sec + 4, TDB_STREAM_SECTOR - 4);
	memcpy(sec, &h.crc, 4);
	rc = stream_io_write(db, stream_data_off(&db->durable, tail->block) + (uint64_t) st->chunks_done * TDB_STREAM_SECTOR,
				  sec, TDB_STREAM_SECTOR);
	if (rc != TDB_STREAM_OK)
		return rc;
	st->chunks_done++;
	st->open_nrec = 0;
	return TDB_STREAM_OK;
}

/*
 * The stream owning data block b in the working state, or -1: allocation
 * goes round the blocks in order, so an owned block the allocator reaches
 * is its owner's oldest; the owner is the stream whose oldest entry names
 * it.  The block's first chunk names a candidate (two sector reads); only
 * when it is not the owner are the other streams' oldest entries read (one
 * index sector each, kept until that stream's oldest block changes).
 */
static int
block_owner(TdbStreamDB *db, uint32_t b, int *owner)
{
	uint8_t		sec[TDB_STREAM_SECTOR];
	ChunkHdr	h;
	int			rc;

	*owner = -1;
	/* the first lap round the file: no block from here on was ever given out */
	if (db->alloc_seq < db->durable.ndata)
		return TDB_STREAM_OK;
	/* the stream the block's first chunk names, if that stream's oldest entry is the block */
	if ((rc = stream_io_read(db, stream_data_off(&db->durable, b), sec, TDB_STREAM_SECTOR)) != TDB_STREAM_OK)
		return rc;
	memcpy(&h, sec, sizeof(h));
	if (h.crc == tdb_crc32c(sec + 4, TDB_STREAM_SECTOR - 4) && h.stream < db->schema.nstreams &&
		db->st[h.stream].idx_count > 0)
	{
		IdxEntry	e;

		if ((rc = stream_idx_head_entry(db, h.stream, &e)) != TDB_STREAM_OK)
			return rc;
		if (e.block == b)
		{
			*owner = h.stream;
			return TDB_STREAM_OK;
		}
	}
	/* else every stream's oldest entry */
	for (uint32_t o = 0; o < db->schema.nstreams; o++)
	{
		IdxEntry	e;

		if (db->st[o].idx_count == 0)
			continue;
		if ((rc = stream_idx_head_entry(db, (int) o, &e)) != TDB_STREAM_OK)
			return rc;
		if (e.block == b)
		{
			*owner = (int) o;
			break;
		}
	}
	return TDB_STREAM_OK;
}

/*
 * Give stream s a new block: the next one in the circle.  If it holds the
 * oldest data of some stream, that block leaves its owner first, and the
 * removal is committed (on top of the last commit) before anything is
 * written into it, so a crash never leaves a committed index entry
 * pointing at another stream's data.
 */
static int
alloc_block(TdbStreamDB *db, int s, int64_t first_ts)
{
	StreamState *st = &db->st[s];
	uint32_t	b = db->alloc_next;
	int			o;
	IdxEntry	e;
	int			rc;

	if ((rc = block_owner(db, b, &o)) != TDB_STREAM_OK)
		return rc;
	if (o >= 0)
	{
		StreamState *os = &db->st[o];
		SbStream   *ds = &db->durable.streams[o];

		if (o == s && os->idx_count == 1)
			return stream_fail(db, NULL, 0, TDB_STREAM_ENOSPC, "stream %d would reuse its only block", s);
		os->idx_head++;
		os->idx_count--;
		if (os->idx_count == 0)
		{
			/* a stream whose only block became the oldest of the file */
			os->has_block = false;
			os->chunks_done = 0;
			os->open_nrec = 0;
			os->records = 0;
		}
		/* commit the removal: the last commit, less that block */
		if (ds->idx_count > 0 && ds->idx_head == os->idx_head - 1)
		{
			ds->idx_head++;
			ds->idx_count--;
			if (ds->idx_count == 0)
			{
				ds->tail_chunks = 0;
				ds->records = 0;
			}
			db->durable.seq++;
			if ((rc = stream_write_superblock(db, &db->durable)) != TDB_STREAM_OK)
				return rc;
		}
	}
	e.block = b;
	e.seq = (uint32_t) db->alloc_seq;
	e.first_ts = first_ts;
	if ((rc = stream_idx_put(db, s, st->idx_head + st->idx_count, &e)) != TDB_STREAM_OK)
		return rc;
	st->tail = e;
	st->idx_count++;
	st->has_block = true;
	st->chunks_done = 0;
	st->open_nrec = 0;
	db->alloc_seq++;
	db->alloc_next = (b + 1) % db->durable.ndata;
	return TDB_STREAM_OK;
}

/* Should this record be stored, given the codecs and the last stored one? */
static bool
codec_wants(const TdbStreamDef *d, const StreamState *st, const TdbStreamValue *vals)
{
	if (!st->has_stored || st->last_stored.discontinuity)
		return true;
	for (uint32_t f = 0; f < d->nfields; f++)
	{
		const TdbStreamField *fd = &d->fields[f];
		const TdbStreamValue *a = &st->last_stored.vals[f];
		const TdbStreamValue *b = &vals[f];

		if (fd->codec == TDB_CODEC_SAMPLED || a->isnull != b->isnull)
			return true;
		if (b->isnull)
			continue;
		if (stream_type_is_float(fd->type))
		{
			double		x = fd->type == TDB_ST_FLOAT32 ? (double) (float) b->v.f : b->v.f;
			double		delta = fabs(x - a->v.f);

			if (fd->codec == TDB_CODEC_STEP ? x != a->v.f : !(delta <= fd->threshold))
				return true;
		}
		else
		{
			int64_t		x = b->v.i;

			if (fd->codec == TDB_CODEC_STEP ? x != a->v.i
				: fabs((double) x - (double) a->v.i) > fd->threshold)
				return true;
		}
	}
	return false;
}

static int
append(TdbStreamDB *db, int s, const TdbStreamRecord *rec)
{
	StreamState *st = &db->st[s];
	const TdbStreamDef *d = &db->schema.streams[s];
	int			rc;

	if (!st->has_block || st->chunks_done == db->chunks_per_block)
	{
		if ((rc = alloc_block(db, s, rec->ts)) != TDB_STREAM_OK)
			return rc;
	}
	stream_encode_record(d, rec, st->chunk + CHUNK_HDR + (size_t) st->open_nrec * st->rec_size);
	st->open_nrec++;
	st->records++;
	st->last_ts = rec->ts;
	st->last_stored = *rec;
	st->has_stored = true;
	st->stored++;
	if (st->open_nrec == st->per_chunk)
		return seal_chunk(db, s);
	return TDB_STREAM_OK;
}

static int
check_insert(TdbStreamDB *db, int s, int64_t ts)
{
	if (db->broken)
		return stream_fail(db, NULL, 0, TDB_STREAM_EBROKEN, "an earlier I/O error left the handle unusable");
	if (s < 0 || (uint32_t) s >= db->schema.nstreams)
		return stream_fail(db, NULL, 0, TDB_STREAM_EINVAL, "no stream number %d", s);
	if (db->st[s].last_ts != INT64_MIN && ts <= db->st[s].last_ts)
		return stream_fail(db, NULL, 0, TDB_STREAM_EORDER,
					"timestamp %lld is not after the last one of stream %s (%lld)", (long long) ts,
					db->schema.streams[s].name, (long long) db->st[s].last_ts);
	if (ts == INT64_MIN)
		return stream_fail(db, NULL, 0, TDB_STREAM_EINVAL, "timestamp out of range");
	return stream_ready(db, s);
}

int
tdb_stream_insert(TdbStreamDB *db, int s, int64_t ts, const TdbStreamValue *vals)
{
	const TdbStreamDef *d;
	TdbStreamRecord rec;
	int			rc = check_insert(db, s, ts);

	if (rc != TDB_STREAM_OK)
		return rc;
	d = &db->schema.streams[s];
	for (uint32_t f = 0; f < d->nfields; f++)
		if (vals[f].isnull && !d->fields[f].nullable)
			return stream_fail(db, NULL, 0, TDB_STREAM_EINVAL, "field %s of stream %s is not nullable",
						d->fields[f].name, d->name);
	db->st[s].inserts++;
	if (!codec_wants(d, &db->st[s], vals))
	{
		db->st[s].last_ts = ts;	/* not stored, but later inserts must still be after it */
		return TDB_STREAM_OK;
	}
	memset(&rec, 0, sizeof(rec));
	rec.ts = ts;
	memcpy(rec.vals, vals, d->nfields * sizeof(TdbStreamValue));
	for (uint32_t f = 0; f < d->nfields; f++)
		if (!rec.vals[f].isnull && d->fields[f].type == TDB_ST_FLOAT32)
			rec.vals[f].v.f = (float) rec.vals[f].v.f;	/* as stored */
	return append(db, s, &rec);
}

int
tdb_stream_last_ts(const TdbStreamDB *db, int s, int64_t *out)
{
	if (s < 0 || (uint32_t) s >= db->schema.nstreams)
		return TDB_STREAM_EINVAL;
	*out = db->st[s].last_ts;
	return TDB_STREAM_OK;
}

int
tdb_stream_discontinuity(TdbStreamDB *db, int s, int64_t ts)
{
	TdbStreamRecord rec;
	int			rc = check_insert(db, s, ts);

	if (rc != TDB_STREAM_OK)
		return rc;
	memset(&rec, 0, sizeof(rec));
	rec.ts = ts;
	rec.discontinuity = true;
	for (uint32_t f = 0; f < db->schema.streams[s].nfields; f++)
		rec.vals[f].isnull = true;
	db->st[s].inserts++;
	return append(db, s, &rec);
}

/* Write the dirty index sectors of every stream to copy c. */
static int
write_index(TdbStreamDB *db, int c)
{
	for (uint32_t i = 0; i < db->nisec; i++)
	{
		IdxSec	   *x = &db->isec[i];
		uint8_t    *sec = db->sector;
		uint16_t	s16 = (uint16_t) x->s;
		uint32_t	crc;
		int			rc;

		if (!x->dirty)
			continue;
		memset(sec, 0, TDB_STREAM_SECTOR);
		memcpy(sec + 4, &s16, 2);
		memcpy(sec + 8, &x->k, 4);
		for (uint32_t j = 0; j < IDX_PER_SECTOR && x->k * IDX_PER_SECTOR + j < db->durable.idx_cap; j++)
			memcpy(sec + IDX_HDR + 16 * j, &x->e[j], 16);
		crc = tdb_crc32c(sec + 4, TDB_STREAM_SECTOR - 4);
		memcpy(sec, &crc, 4);
		if ((rc = stream_io_write(db, stream_idx_sector_off(&db->durable, db->durable.meta_blocks, x->s, c, x->k),
						   sec, TDB_STREAM_SECTOR)) != TDB_STREAM_OK)
			return rc;
	}
	return TDB_STREAM_OK;
}

int
tdb_stream_flush(TdbStreamDB *db)
{
	bool		index_changed = false;
	int			rc;

	if (db->broken)
		return stream_fail(db, NULL, 0, TDB_STREAM_EBROKEN, "an earlier I/O error left the handle unusable");
	/* 1. data: seal every open chunk (never written again) */
	for (uint32_t s = 0; s < db->schema.nstreams; s++)
		if (db->st[s].open_nrec > 0 && (rc = seal_chunk(db, (int) s)) != TDB_STREAM_OK)
			return rc;
	for (uint32_t i = 0; i < db->nisec; i++)
		index_changed |= db->isec[i].dirty;
	/* 2. the index, primary then backup, a sync between: one copy is always whole */
	if ((rc = write_index(db, 0)) != TDB_STREAM_OK || (rc = stream_io_sync(db)) != TDB_STREAM_OK)
		return rc;
	if (index_changed)
	{
		if ((rc = write_index(db, 1)) != TDB_STREAM_OK || (rc = stream_io_sync(db)) != TDB_STREAM_OK)
			return rc;
		for (uint32_t i = 0; i < db->nisec; i++)
			db->isec[i].dirty = false;
	}
	/* 3. commit */
	{
		Superblock	sb = db->durable;

		sb.seq++;
		sb.alloc_next = db->alloc_next;
		sb.alloc_seq = db->alloc_seq;
		for (uint32_t s = 0; s < db->schema.nstreams; s++)
		{
			StreamState *st = &db->st[s];

			sb.streams[s].idx_head = st->idx_head;
			sb.streams[s].idx_count = st->idx_count;
			sb.streams[s].tail_chunks = st->idx_count ? st->chunks_done : 0;
			sb.streams[s].records = st->records;
			sb.streams[s].last_ts = st->last_ts;
		}
		if ((rc = stream_write_superblock(db, &sb)) != TDB_STREAM_OK)
			return rc;
		db->durable = sb;
	}
	return TDB_STREAM_OK;
}

