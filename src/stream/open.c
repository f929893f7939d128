/*
 * open.c
 *	  The stream file engine (see stream.h for the contract and
 *	  docs/stream-format.md for the layout): opening and recovery, the
 *	  index sector cache, refresh and close.  Its other files (file.c,
 *	  write.c, read.c) are listed in engine.h; stream.h is the contract.
 *
 *	  How the guarantee is kept, in short:
 *	  - data lives in 512-byte chunks (the device's unit of tearing), each
 *	    with its own CRC and written exactly once: a flush seals the chunk
 *	    it is filling, so no write ever covers a byte already acknowledged;
 *	  - which chunks and blocks count is decided only by the superblock, of
 *	    which there are two copies written in turn with a sync between, each
 *	    with a sequence number and a CRC: a torn or garbage write of one
 *	    leaves the other whole (this commit or the previous one);
 *	  - the per-stream circular index of blocks is rewritten a sector at a
 *	    time, so it has a primary and a backup copy written in turn with a
 *	    sync between them: one of the two always holds every committed entry;
 *	  - reusing the oldest block commits its removal from its stream before
 *	    anything is written into it (the allocation log is that commit);
 *	  - a failed write or sync marks the handle broken: it refuses further
 *	    work, and reopening recovers from the last commit (never a retry
 *	    that trusts the page cache).
 *	  Opening reads the superblocks, the schema, the index (both copies only
 *	  where a sector fails its CRC) and one chunk per stream: bounded by the
 *	  configuration, whatever the file holds.
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

/* ---- opening and recovery ---------------------------------------------------- */

static bool
sb_valid(const Superblock *sb, uint64_t size)
{
	if (memcmp(sb->magic, SB_MAGIC, 8) != 0 || sb->version != SB_VERSION ||
		sb->nstreams < 1 || sb->nstreams > TDB_STREAM_MAX_STREAMS || sb->crc != stream_sb_crc(sb) ||
		stream_sb_size(sb->nstreams) > sb->block_size)
		return false;
	/* sizes the rest of the code relies on */
	return sb->block_size >= 1024 && (sb->block_size & (sb->block_size - 1)) == 0 &&
		sb->block_size <= (1u << 24) && sb->nstreams >= 1 && sb->nstreams <= TDB_STREAM_MAX_STREAMS &&
		(uint64_t) sb->nblocks * sb->block_size <= size && sb->ndata >= 2 && sb->idx_cap == sb->ndata &&
		sb->idx_sectors == (sb->ndata + IDX_PER_SECTOR - 1) / IDX_PER_SECTOR &&
		(uint64_t) sb->data_first + sb->ndata <= sb->nblocks && sb->alloc_next < sb->ndata &&
		stream_idx_sector_off(sb, sb->meta_blocks, (int) sb->nstreams, 1, 0) <= stream_block_off(sb, sb->data_first) &&
		(uint64_t) 2 + sb->meta_blocks <= sb->data_first;
}

/* Read index sector k of stream s, primary or else backup; false if neither is valid. */
static int
read_idx_sector(TdbStreamDB *db, int s, uint32_t k, uint8_t *sec)
{
	for (int c = 0; c < 2; c++)
	{
		uint32_t	crc,
					no;
		uint16_t	st;
		int			rc = stream_io_read(db, stream_idx_sector_off(&db->durable, db->durable.meta_blocks, s, c, k),
								 sec, TDB_STREAM_SECTOR);

		if (rc != TDB_STREAM_OK)
			return rc;
		memcpy(&crc, sec, 4);
		memcpy(&st, sec + 4, 2);
		memcpy(&no, sec + 8, 4);
		if (crc == tdb_crc32c(sec + 4, TDB_STREAM_SECTOR - 4) && st == s && no == k)
			return TDB_STREAM_OK;
	}
	return stream_fail(db, NULL, 0, TDB_STREAM_ECORRUPT,
				"index sector %u of stream %d is damaged in both copies", k, s);
}

/*
 * The cached index sector k of stream s, read (primary, else backup) on a
 * miss; NULL with the error recorded when neither copy can be read.  The
 * least recently used clean sector makes room beyond IDX_CACHE.
 */
static int
idx_sector(TdbStreamDB *db, int s, uint32_t k, IdxSec **out)
{
	IdxSec	   *x = NULL;
	uint8_t		sec[TDB_STREAM_SECTOR];
	int			rc;

	for (uint32_t i = 0; i < db->nisec; i++)
		if (db->isec[i].s == s && db->isec[i].k == k)
		{
			db->isec[i].used = ++db->isec_tick;
			*out = &db->isec[i];
			return TDB_STREAM_OK;
		}
	if ((rc = read_idx_sector(db, s, k, sec)) != TDB_STREAM_OK)
		return rc;
	if (db->nisec >= IDX_CACHE)
		for (uint32_t i = 0; i < db->nisec; i++)
			if (!db->isec[i].dirty && (x == NULL || db->isec[i].used < x->used))
				x = &db->isec[i];
	if (x == NULL)
	{
		if (db->nisec == db->isec_cap)
		{
			uint32_t	cap = db->isec_cap ? db->isec_cap * 2 : 16;
			IdxSec	   *n = realloc(db->isec, cap * sizeof(IdxSec));

			if (n == NULL)
				return stream_fail(db, NULL, 0, TDB_STREAM_ENOMEM, "out of memory");
			db->isec = n;
			db->isec_cap = cap;
		}
		x = &db->isec[db->nisec++];
	}
	x->s = s;
	x->k = k;
	x->used = ++db->isec_tick;
	x->dirty = false;
	memcpy(x->e, sec + IDX_HDR, sizeof(x->e));
	*out = x;
	return TDB_STREAM_OK;
}

/* Entry at logical position pos of stream s's index (a committed or working one). */
int
stream_idx_get(TdbStreamDB *db, int s, uint64_t pos, IdxEntry *out)
{
	uint32_t	slot = (uint32_t) (pos % db->durable.idx_cap);
	IdxSec	   *x;
	int			rc = idx_sector(db, s, slot / IDX_PER_SECTOR, &x);

	if (rc != TDB_STREAM_OK)
		return rc;
	*out = x->e[slot % IDX_PER_SECTOR];
	if (out->block >= db->durable.ndata)
		return stream_fail(db, NULL, 0, TDB_STREAM_ECORRUPT, "stream %s: index entry %llu names block %u, out of range",
					db->schema.streams[s].name, (unsigned long long) pos, out->block);
	return TDB_STREAM_OK;
}

/* Set the entry at position pos of stream s (written by the next flush). */
int
stream_idx_put(TdbStreamDB *db, int s, uint64_t pos, const IdxEntry *e)
{
	uint32_t	slot = (uint32_t) (pos % db->durable.idx_cap);
	IdxSec	   *x;
	int			rc = idx_sector(db, s, slot / IDX_PER_SECTOR, &x);

	if (rc != TDB_STREAM_OK)
		return rc;
	x->e[slot % IDX_PER_SECTOR] = *e;
	x->dirty = true;
	return TDB_STREAM_OK;
}

/* The oldest entry of stream s (kept: a writer asks for it at every allocation). */
int
stream_idx_head_entry(TdbStreamDB *db, int s, IdxEntry *out)
{
	StreamState *st = &db->st[s];
	int			rc;

	if (st->head_pos != st->idx_head)
	{
		if ((rc = stream_idx_get(db, s, st->idx_head, &st->head_e)) != TDB_STREAM_OK)
			return rc;
		st->head_pos = st->idx_head;
	}
	*out = st->head_e;
	return TDB_STREAM_OK;
}

/* Forget the cached index sectors of stream s (its committed state changed). */
static void
idx_forget(TdbStreamDB *db, int s)
{
	uint32_t	j = 0;

	for (uint32_t i = 0; i < db->nisec; i++)
		if (db->isec[i].s != s)
			db->isec[j++] = db->isec[i];
	db->nisec = j;
	db->st[s].head_pos = UINT64_MAX;
}

/*
 * Check a chunk read from the device: CRC, owner, block and position.
 * Returns its record count, or -1.
 */
int
stream_chunk_check(const TdbStreamDB *db, int s, const IdxEntry *e, uint32_t chunk_no, const uint8_t *sec)
{
	ChunkHdr	h;

	memcpy(&h, sec, sizeof(h));
	if (h.crc != tdb_crc32c(sec + 4, TDB_STREAM_SECTOR - 4) || h.stream != s || h.block_seq != e->seq ||
		h.chunk_no != chunk_no || h.nrec == 0 || h.nrec > db->st[s].per_chunk)
		return -1;
	return h.nrec;
}

/*
 * The committed superblock: copy 0, or copy 1 where copy 0 is damaged or
 * older.  Copy 1 sits one block further; when copy 0 is damaged its block
 * size is unknown, and as block sizes are powers of two each is tried (a
 * bounded number of reads).
 */
static int
read_superblock(TdbStreamDB *db, Superblock *out, char *err, size_t errlen)
{
	Superblock	copies[2];
	bool		ok[2];
	bool		was_broken = db->broken;
	uint64_t	size = db->io.size;

	memset(copies, 0, sizeof(copies));
	ok[0] = stream_io_read(db, 0, &copies[0], sizeof(Superblock)) == TDB_STREAM_OK && sb_valid(&copies[0], size);
	ok[1] = false;
	for (uint32_t bs = 1024; !ok[1] && bs <= (1u << 24) && (uint64_t) bs * 2 <= size; bs *= 2)
	{
		if (ok[0] && bs != copies[0].block_size)
			continue;
		ok[1] = stream_io_read(db, bs, &copies[1], sizeof(Superblock)) == TDB_STREAM_OK &&
			sb_valid(&copies[1], size) && copies[1].block_size == bs;
	}
	/* probing reads past the end of a small file: not a failure of the handle */
	db->broken = was_broken;
	if (!ok[0] && !ok[1])
	{
		bool		magic = memcmp(copies[0].magic, SB_MAGIC, 8) == 0;

		return stream_fail(db, err, errlen, magic ? TDB_STREAM_ECORRUPT : TDB_STREAM_EFORMAT,
					magic ? "both superblocks are damaged" :
					"no stream file here (no superblock with magic %s and format version %d)",
					SB_MAGIC, SB_VERSION);
	}
	if (ok[0] && ok[1] && (copies[0].block_size != copies[1].block_size ||
						   copies[0].data_first != copies[1].data_first))
		ok[copies[0].seq > copies[1].seq ? 1 : 0] = false;
	*out = (ok[0] && (!ok[1] || copies[0].seq >= copies[1].seq)) ? copies[0] : copies[1];
	return TDB_STREAM_OK;
}

/* The working state of stream s from the last commit: no I/O (the rest comes on demand). */
static void
stream_reset(TdbStreamDB *db, int s)
{
	StreamState *st = &db->st[s];
	const SbStream *ds = &db->durable.streams[s];

	st->idx_head = ds->idx_head;
	st->idx_count = ds->idx_count;
	st->records = ds->records;
	st->last_ts = ds->last_ts;
	st->has_block = ds->idx_count > 0;
	st->chunks_done = ds->idx_count > 0 ? ds->tail_chunks : 0;
	st->open_nrec = 0;
	st->ready = false;
	st->has_stored = false;
	st->head_pos = UINT64_MAX;
}

static int
check_committed(TdbStreamDB *db, const Superblock *sb)
{
	for (uint32_t s = 0; s < sb->nstreams; s++)
	{
		const SbStream *ds = &sb->streams[s];

		if (ds->idx_count > sb->idx_cap || (ds->idx_count == 0 && (ds->tail_chunks != 0 || ds->records != 0)) ||
			ds->tail_chunks > sb->block_size / TDB_STREAM_SECTOR)
			return stream_fail(db, NULL, 0, TDB_STREAM_ECORRUPT, "stream %s: inconsistent committed state",
						db->schema.streams[s].name);
	}
	return TDB_STREAM_OK;
}

/*
 * Prepare stream s for appending: the newest block's entry and, for the
 * codecs, the last committed record (one index sector and one chunk).
 */
int
stream_ready(TdbStreamDB *db, int s)
{
	StreamState *st = &db->st[s];
	const SbStream *ds = &db->durable.streams[s];
	const TdbStreamDef *d = &db->schema.streams[s];
	int			rc;

	if (st->ready)
		return TDB_STREAM_OK;
	if (st->idx_count > 0)
	{
		uint8_t		sec[TDB_STREAM_SECTOR];
		int			n;

		if ((rc = stream_idx_get(db, s, st->idx_head + st->idx_count - 1, &st->tail)) != TDB_STREAM_OK)
			return rc;
		if (ds->tail_chunks > 0)
		{
			rc = stream_io_read(db, stream_data_off(&db->durable, st->tail.block) +
						 (uint64_t) (ds->tail_chunks - 1) * TDB_STREAM_SECTOR, sec, TDB_STREAM_SECTOR);
			if (rc != TDB_STREAM_OK)
				return rc;
			if ((n = stream_chunk_check(db, s, &st->tail, ds->tail_chunks - 1, sec)) < 0)
				return stream_fail(db, NULL, 0, TDB_STREAM_ECORRUPT,
							"stream %s: the last committed chunk (block %u, chunk %u) is damaged",
							d->name, st->tail.block, ds->tail_chunks - 1);
			stream_decode_record(d, sec + CHUNK_HDR + (size_t) (n - 1) * st->rec_size, &st->last_stored);
			st->has_stored = true;
		}
	}
	st->ready = true;
	return TDB_STREAM_OK;
}

/*
 * Opening reads the superblocks and the schema, nothing else: a stream's
 * index is read a sector at a time when a lookup needs it, and its last
 * chunk when something is appended to it.
 */
int
tdb_stream_open(TdbStreamIO *io, TdbStreamDB **out, char *err, size_t errlen)
{
	TdbStreamDB *db = calloc(1, sizeof(*db));
	int			rc = TDB_STREAM_OK;
	uint8_t    *meta = NULL;

	*out = NULL;
	if (db == NULL)
		return stream_fail(NULL, err, errlen, TDB_STREAM_ENOMEM, "out of memory");
	db->io = *io;
	if (io->size < 2 * 1024)
	{
		free(db);
		return stream_fail(NULL, err, errlen, TDB_STREAM_EFORMAT, "a file of %llu bytes is not a stream file",
					(unsigned long long) io->size);
	}
	if ((rc = read_superblock(db, &db->durable, err, errlen)) != TDB_STREAM_OK)
	{
		free(db);
		return rc;
	}

	/* the schema */
	meta = malloc((size_t) db->durable.meta_blocks * db->durable.block_size);
	if (meta == NULL)
		rc = TDB_STREAM_ENOMEM;
	else if ((rc = stream_io_read(db, stream_block_off(&db->durable, 2), meta,
						   (size_t) db->durable.meta_blocks * db->durable.block_size)) == TDB_STREAM_OK)
	{
		uint32_t	hdr[4];

		memcpy(hdr, meta, 16);
		if (hdr[0] != META_MAGIC || hdr[1] != 16 + db->durable.nstreams * sizeof(TdbStreamDef) ||
			hdr[1] > db->durable.meta_blocks * db->durable.block_size ||
			hdr[2] != tdb_crc32c(meta + 16, hdr[1] - 16))
			rc = stream_fail(db, NULL, 0, TDB_STREAM_ECORRUPT, "the schema section is damaged");
		else
		{
			db->schema_crc = hdr[2];
			db->create_id = hdr[3];
			db->schema.nstreams = db->durable.nstreams;
			db->schema.block_size = db->durable.block_size;
			db->schema.file_size = (uint64_t) db->durable.nblocks * db->durable.block_size;
			memcpy(db->schema.streams, meta + 16, db->durable.nstreams * sizeof(TdbStreamDef));
			if ((rc = stream_check_schema(&db->schema, db->err, sizeof(db->err))) != TDB_STREAM_OK)
				rc = TDB_STREAM_ECORRUPT;
		}
	}
	free(meta);

	db->chunks_per_block = db->durable.block_size / TDB_STREAM_SECTOR;
	db->alloc_next = db->durable.alloc_next;
	db->alloc_seq = db->durable.alloc_seq;
	if (rc == TDB_STREAM_OK)
		rc = check_committed(db, &db->durable);
	for (int s = 0; rc == TDB_STREAM_OK && s < (int) db->durable.nstreams; s++)
	{
		db->st[s].rec_size = stream_record_size(&db->schema.streams[s]);
		db->st[s].per_chunk = (TDB_STREAM_SECTOR - CHUNK_HDR) / db->st[s].rec_size;
		stream_reset(db, s);
	}
	if (rc != TDB_STREAM_OK)
	{
		if (err != NULL)
			snprintf(err, errlen, "%s", db->err[0] ? db->err : tdb_stream_strerror(rc));
		tdb_stream_close(db);
		return rc;
	}
	db->open_reads = db->sectors_read;
	*out = db;
	return TDB_STREAM_OK;
}

/*
 * Bring the handle to the file's last commit (another process may have
 * written since): reads the superblock copies and the schema's header, and
 * where a stream's committed state changed, forgets what was cached of it.
 */
int
tdb_stream_refresh(TdbStreamDB *db, bool *changed)
{
	Superblock	sb;
	uint32_t	hdr[4];
	bool		same;
	int			rc;

	*changed = false;
	if (db->broken)
		return stream_fail(db, NULL, 0, TDB_STREAM_EBROKEN, "an earlier I/O error left the handle unusable");
	for (uint32_t s = 0; s < db->schema.nstreams; s++)
		if (db->st[s].open_nrec > 0 || db->st[s].idx_count != db->durable.streams[s].idx_count ||
			db->st[s].idx_head != db->durable.streams[s].idx_head ||
			db->st[s].chunks_done != (db->durable.streams[s].idx_count ? db->durable.streams[s].tail_chunks : 0))
			return stream_fail(db, NULL, 0, TDB_STREAM_EINVAL, "the handle has unflushed records: flush or reopen");
	for (uint32_t i = 0; i < db->nisec; i++)
		if (db->isec[i].dirty)
			return stream_fail(db, NULL, 0, TDB_STREAM_EINVAL, "the handle has unflushed records: flush or reopen");
	/* copy 0 as this handle last committed or read it: the common case, one read */
	rc = stream_io_read(db, 0, &sb, stream_sb_size(db->durable.nstreams));
	same = rc == TDB_STREAM_OK && memcmp(&sb, &db->durable, stream_sb_size(db->durable.nstreams)) == 0;
	if (rc == TDB_STREAM_OK && !same)
	{
		if ((rc = read_superblock(db, &sb, NULL, 0)) != TDB_STREAM_OK)
			return rc;
		same = memcmp(&sb, &db->durable, stream_sb_size(db->durable.nstreams)) == 0;
	}
	if (rc == TDB_STREAM_OK)
		rc = stream_io_read(db, stream_block_off(&db->durable, 2), hdr, sizeof(hdr));
	if (rc != TDB_STREAM_OK)
		return rc;
	/*
	 * Another creation (its id), or a commit older than the one this handle
	 * holds (an older copy put back in place; commits only go forward): what
	 * is cached of an unchanged stream may name blocks that are now another's.
	 */
	if (hdr[0] != META_MAGIC || hdr[2] != db->schema_crc || hdr[3] != db->create_id ||
		(!same && sb.seq < db->durable.seq) ||
		(!same && (sb.block_size != db->durable.block_size || sb.nblocks != db->durable.nblocks ||
				   sb.nstreams != db->durable.nstreams || sb.meta_blocks != db->durable.meta_blocks ||
				   sb.idx_sectors != db->durable.idx_sectors || sb.data_first != db->durable.data_first ||
				   sb.ndata != db->durable.ndata)))
		return stream_fail(db, NULL, 0, TDB_STREAM_ESTALE, "the file was re-created or replaced in place (another creation, layout or schema, or an older commit)");
	if (same)
		return TDB_STREAM_OK;
	if ((rc = check_committed(db, &sb)) != TDB_STREAM_OK)
		return rc;
	*changed = true;
	{
		Superblock	old = db->durable;

		db->durable = sb;
		db->alloc_next = sb.alloc_next;
		db->alloc_seq = sb.alloc_seq;
		/* a stream whose commit did not change keeps what it loaded */
		for (uint32_t s = 0; s < db->schema.nstreams; s++)
			if (memcmp(&sb.streams[s], &old.streams[s], sizeof(SbStream)) != 0)
			{
				idx_forget(db, (int) s);
				stream_reset(db, (int) s);
			}
	}
	return TDB_STREAM_OK;
}

void
tdb_stream_close(TdbStreamDB *db)
{
	if (db == NULL)
		return;
	free(db->isec);
	free(db);
}

const TdbStreamSchema *
tdb_stream_schema(const TdbStreamDB *db)
{
	return &db->schema;
}

int
tdb_stream_find(const TdbStreamDB *db, const char *name)
{
	char	   *end;
	unsigned long id = strtoul(name, &end, 10);

	for (uint32_t s = 0; s < db->schema.nstreams; s++)
		if (strcmp(db->schema.streams[s].name, name) == 0 ||
			(*name != '\0' && *end == '\0' && db->schema.streams[s].id == id))
			return (int) s;
	return TDB_STREAM_ENOTFOUND;
}

