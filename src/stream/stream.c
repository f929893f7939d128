/*
 * stream.c
 *	  The stream file engine (see stream.h for the contract and
 *	  docs/stream-format.md for the layout).
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
#include "stream/stream.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "checksum.h"

#define SB_MAGIC		"TDBSTRM1"
#define SB_VERSION		1
#define META_MAGIC		0x4154454du	/* "META" */
#define CHUNK_HDR		16
#define IDX_HDR			16
#define IDX_PER_SECTOR	((TDB_STREAM_SECTOR - IDX_HDR) / 16)
#define REC_DISCONT		0x01

/* ---- on-disk structures (little-endian hosts only; checked at create) ---- */

typedef struct SbStream			/* per-stream committed state */
{
	uint64_t	idx_head;		/* logical position of the oldest index entry */
	uint32_t	idx_count;		/* committed entries (blocks) */
	uint32_t	tail_chunks;	/* committed chunks of the newest block */
	uint64_t	records;		/* records in committed chunks */
	int64_t		last_ts;		/* INT64_MIN = none yet */
} SbStream;

typedef struct Superblock
{
	char		magic[8];
	uint32_t	version;
	uint32_t	crc;			/* over the whole structure with crc = 0 */
	uint64_t	seq;			/* commit number; the higher valid copy wins */
	uint32_t	block_size;
	uint32_t	nblocks;
	uint32_t	nstreams;
	uint32_t	meta_blocks;
	uint32_t	idx_sectors;	/* per stream, per copy */
	uint32_t	idx_cap;		/* entries per stream */
	uint32_t	data_first;		/* block number of the first data block */
	uint32_t	ndata;
	uint32_t	alloc_next;		/* data block (0-based) the next allocation takes */
	uint32_t	pad;
	uint64_t	alloc_seq;		/* sequence number of the next allocation */
	SbStream	streams[TDB_STREAM_MAX_STREAMS];
} Superblock;

typedef struct IdxEntry
{
	uint32_t	block;			/* data block, 0-based */
	uint32_t	seq;			/* low bits of its allocation sequence */
	int64_t		first_ts;
} IdxEntry;

typedef struct ChunkHdr
{
	uint32_t	crc;			/* over bytes 4..511 */
	uint16_t	stream;
	uint16_t	nrec;
	uint32_t	block_seq;		/* allocation sequence of its block (low bits) */
	uint16_t	chunk_no;
	uint16_t	pad;
} ChunkHdr;

_Static_assert(sizeof(ChunkHdr) == CHUNK_HDR, "chunk header");
_Static_assert(sizeof(IdxEntry) == 16, "index entry");
_Static_assert(sizeof(Superblock) <= 4096, "a superblock of 64 streams fits a 4 KB block");

/* ---- in memory ------------------------------------------------------------ */

/*
 * Index sectors are read on demand and kept in a bounded cache per handle
 * (IDX_CACHE clean sectors; sectors changed since the last flush stay until
 * it writes them).  A committed entry never changes while its position is
 * in its stream's committed range, so a cached sector stays right for those
 * positions until the stream's committed state changes (tdb_stream_refresh
 * then drops the stream's sectors).
 */
#define IDX_CACHE		256

typedef struct IdxSec
{
	int32_t		s;				/* stream */
	uint32_t	k;				/* sector number in the stream's index */
	uint64_t	used;			/* for LRU eviction */
	bool		dirty;			/* changed since the last flush: never evicted */
	IdxEntry	e[IDX_PER_SECTOR];
} IdxSec;

typedef struct StreamState
{
	/* the working (not yet committed) view */
	uint64_t	idx_head;
	uint32_t	idx_count;
	bool		ready;			/* prepared for appending: tail and last_stored loaded */
	IdxEntry	tail;			/* the newest block's entry (when ready and has_block) */
	uint64_t	head_pos;		/* position head_e was read for (UINT64_MAX: none) */
	IdxEntry	head_e;			/* the oldest entry, for finding a block's owner */
	uint8_t		chunk[TDB_STREAM_SECTOR];	/* the chunk being filled */
	bool		has_block;
	uint32_t	chunks_done;	/* chunks of the newest block written to the device */
	uint32_t	open_nrec;		/* records in the chunk being filled */
	uint64_t	records;		/* records in written chunks and the open one */
	int64_t		last_ts;		/* last inserted */
	bool		has_stored;
	TdbStreamRecord last_stored;	/* what the codecs compare with */
	uint32_t	rec_size;
	uint32_t	per_chunk;
	uint64_t	inserts;
	uint64_t	stored;
} StreamState;

struct TdbStreamDB
{
	TdbStreamIO io;
	TdbStreamSchema schema;
	uint32_t	schema_crc;		/* of the schema section, to notice a re-created file */
	uint32_t	create_id;		/* the schema header's fourth word: a creation id (0 in older files) */
	Superblock	durable;		/* the last commit */
	uint32_t	chunks_per_block;
	uint32_t	alloc_next;		/* working allocator */
	uint64_t	alloc_seq;
	IdxSec	   *isec;			/* the index sector cache */
	uint32_t	nisec,
				isec_cap;
	uint64_t	isec_tick;
	StreamState st[TDB_STREAM_MAX_STREAMS];
	bool		broken;
	uint64_t	open_reads;
	uint64_t	sectors_read;
	uint64_t	bytes_read;
	uint64_t	bytes_written;
	uint8_t		sector[TDB_STREAM_SECTOR];
	char		err[256];
};

static int
stream_fail(TdbStreamDB *db, char *err, size_t errlen, int code, const char *fmt,...)
	__attribute__((format(printf, 5, 6)));

/* Record an error message (in err when given, else in the handle). */
static int
stream_fail(TdbStreamDB *db, char *err, size_t errlen, int code, const char *fmt,...)
{
	va_list		ap;
	char		buf[256];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "%s", buf);
	if (db != NULL)
		snprintf(db->err, sizeof(db->err), "%s", buf);
	return code;
}

const char *
tdb_stream_strerror(int code)
{
	switch (code)
	{
		case TDB_STREAM_OK:
			return "success";
		case TDB_STREAM_EIO:
			return "I/O error: the file needs to be reopened, which recovers it";
		case TDB_STREAM_ECORRUPT:
			return "the stream file is damaged";
		case TDB_STREAM_EFORMAT:
			return "not a trafficdb stream file, or another format version";
		case TDB_STREAM_EINVAL:
			return "invalid argument";
		case TDB_STREAM_EORDER:
			return "timestamp is not after the stream's last timestamp";
		case TDB_STREAM_ENOTFOUND:
			return "not found";
		case TDB_STREAM_ENOMEM:
			return "out of memory";
		case TDB_STREAM_EBROKEN:
			return "an earlier I/O error left the handle unusable: reopen the file to recover";
		case TDB_STREAM_ENOSPC:
			return "the file is too small for its configuration";
		case TDB_STREAM_ESTALE:
			return "the file was re-created since the handle opened it: reopen it";
	}
	return "unknown error";
}

const char *
tdb_stream_errmsg(const TdbStreamDB *db)
{
	return db ? db->err : "";
}

static uint32_t
stream_type_size(uint8_t t)
{
	switch (t)
	{
		case TDB_ST_INT8:
		case TDB_ST_BOOL:
			return 1;
		case TDB_ST_INT16:
			return 2;
		case TDB_ST_INT32:
		case TDB_ST_FLOAT32:
			return 4;
		case TDB_ST_INT64:
		case TDB_ST_FLOAT64:
			return 8;
	}
	return 0;
}

static bool
stream_type_is_float(uint8_t t)
{
	return t == TDB_ST_FLOAT32 || t == TDB_ST_FLOAT64;
}

/* Record layout: ts (8), flags (1), null bitmap, then each field's bytes. */
static uint32_t
stream_record_size(const TdbStreamDef *d)
{
	uint32_t	n = 9 + (d->nfields + 7) / 8;

	for (uint32_t f = 0; f < d->nfields; f++)
		n += stream_type_size(d->fields[f].type);
	return n;
}

/* ---- I/O with accounting; any failure breaks the handle ------------------ */

static int
stream_io_read(TdbStreamDB *db, uint64_t off, void *buf, size_t len)
{
	if (off + len > db->io.size || db->io.read(db->io.ctx, off, buf, len) != 0)
	{
		/*
		 * Reads happen while writing too (an index sector, a stream's last
		 * chunk): a handle that could not read what it needed is not to be
		 * trusted with a flush either.
		 */
		db->broken = true;
		return stream_fail(db, NULL, 0, TDB_STREAM_EIO, "read of %zu bytes at offset %llu failed", len,
					(unsigned long long) off);
	}
	/* the I/O counter: sectors touched (a read of part of a sector counts it) */
	db->sectors_read += (off + len + TDB_STREAM_SECTOR - 1) / TDB_STREAM_SECTOR - off / TDB_STREAM_SECTOR;
	db->bytes_read += len;
	return TDB_STREAM_OK;
}

static int
stream_io_write(TdbStreamDB *db, uint64_t off, const void *buf, size_t len)
{
	if (db->broken)
		return stream_fail(db, NULL, 0, TDB_STREAM_EBROKEN, "an earlier I/O error left the handle unusable");
	if (off + len > db->io.size || db->io.write(db->io.ctx, off, buf, len) != 0)
	{
		db->broken = true;
		return stream_fail(db, NULL, 0, TDB_STREAM_EIO, "write of %zu bytes at offset %llu failed", len,
					(unsigned long long) off);
	}
	db->bytes_written += len;
	return TDB_STREAM_OK;
}

static int
stream_io_sync(TdbStreamDB *db)
{
	if (db->broken)
		return stream_fail(db, NULL, 0, TDB_STREAM_EBROKEN, "an earlier I/O error left the handle unusable");
	if (db->io.sync(db->io.ctx) != 0)
	{
		/* the page cache may have dropped the writes: never trust it again */
		db->broken = true;
		return stream_fail(db, NULL, 0, TDB_STREAM_EIO, "sync failed; reopen the file to recover");
	}
	return TDB_STREAM_OK;
}

/* Bytes of a superblock on disk: the header and one entry per stream. */
static size_t
stream_sb_size(uint32_t nstreams)
{
	if (nstreams > TDB_STREAM_MAX_STREAMS)
		nstreams = TDB_STREAM_MAX_STREAMS;
	return offsetof(Superblock, streams) + nstreams * sizeof(SbStream);
}

/* ---- layout ----------------------------------------------------------------- */

static uint64_t
stream_block_off(const Superblock *sb, uint32_t block)
{
	return (uint64_t) block * sb->block_size;
}

static uint64_t
stream_data_off(const Superblock *sb, uint32_t dblock)
{
	return stream_block_off(sb, sb->data_first + dblock);
}

/* Offset of index sector k of stream s in copy c (0 primary, 1 backup). */
static uint64_t
stream_idx_sector_off(const Superblock *sb, uint32_t meta_blocks, int s, int c, uint32_t k)
{
	uint64_t	base = stream_block_off(sb, 2 + meta_blocks);

	return base + ((uint64_t) c * sb->nstreams + (uint64_t) s) * sb->idx_sectors * TDB_STREAM_SECTOR +
		(uint64_t) k * TDB_STREAM_SECTOR;
}

static uint32_t
meta_bytes(const TdbStreamSchema *schema)
{
	return 16 + schema->nstreams * (uint32_t) sizeof(TdbStreamDef);
}

/*
 * Fit the sections into the file: superblocks, schema, index (two copies,
 * idx_cap = ndata entries per stream, as one stream may own every block)
 * and ndata data blocks.
 */
static int
stream_layout(const TdbStreamSchema *schema, Superblock *sb, char *err, size_t errlen)
{
	uint32_t	bs = schema->block_size;
	uint64_t	nblocks = schema->file_size / bs;
	uint32_t	meta_blocks = (meta_bytes(schema) + bs - 1) / bs;
	uint64_t	ndata = nblocks;

	if (bs < 1024 || (bs & (bs - 1)) != 0 || bs > (1u << 24))
		return stream_fail(NULL, err, errlen, TDB_STREAM_EINVAL,
					"blockSize %u: expected a power of two from 1024 to 16777216", bs);
	if (schema->nstreams == 0 || schema->nstreams > TDB_STREAM_MAX_STREAMS)
		return stream_fail(NULL, err, errlen, TDB_STREAM_EINVAL, "%u streams: expected 1 to %d",
					schema->nstreams, TDB_STREAM_MAX_STREAMS);
	if (stream_sb_size(schema->nstreams) > bs)
		return stream_fail(NULL, err, errlen, TDB_STREAM_EINVAL,
					"%u streams need a blockSize of at least %zu bytes for the superblock",
					schema->nstreams, stream_sb_size(schema->nstreams));
	if (nblocks > UINT32_MAX)
		return stream_fail(NULL, err, errlen, TDB_STREAM_EINVAL, "file of %llu blocks: at most 2^32",
					(unsigned long long) nblocks);
	/* shrink ndata until everything fits */
	for (;;)
	{
		uint64_t	sectors = (ndata + IDX_PER_SECTOR - 1) / IDX_PER_SECTOR;
		uint64_t	idx_bytes = 2 * (uint64_t) schema->nstreams * sectors * TDB_STREAM_SECTOR;
		uint64_t	idx_blocks = (idx_bytes + bs - 1) / bs;
		uint64_t	need = 2 + meta_blocks + idx_blocks + ndata;

		if (need <= nblocks)
		{
			memset(sb, 0, sizeof(*sb));
			memcpy(sb->magic, SB_MAGIC, 8);
			sb->version = SB_VERSION;
			sb->block_size = bs;
			sb->nblocks = (uint32_t) nblocks;
			sb->nstreams = schema->nstreams;
			sb->meta_blocks = meta_blocks;
			sb->idx_sectors = (uint32_t) sectors;
			sb->idx_cap = (uint32_t) ndata;
			sb->data_first = (uint32_t) (2 + meta_blocks + idx_blocks);
			sb->ndata = (uint32_t) ndata;
			break;
		}
		if (ndata == 0)
			break;
		ndata = need - nblocks > ndata ? 0 : ndata - (need - nblocks);
	}
	if (ndata < 2 * (uint64_t) schema->nstreams + 2)
		return stream_fail(NULL, err, errlen, TDB_STREAM_ENOSPC,
					"fileSize %llu with blockSize %u leaves %llu data blocks; %u streams need at least %u",
					(unsigned long long) schema->file_size, bs, (unsigned long long) ndata,
					schema->nstreams, 2 * schema->nstreams + 2);
	return TDB_STREAM_OK;
}

static int
stream_check_schema(const TdbStreamSchema *schema, char *err, size_t errlen)
{
	for (uint32_t s = 0; s < schema->nstreams; s++)
	{
		const TdbStreamDef *d = &schema->streams[s];

		if (d->nfields > TDB_STREAM_MAX_FIELDS)
			return stream_fail(NULL, err, errlen, TDB_STREAM_EINVAL, "stream %s has %u fields: at most %d",
						d->name, d->nfields, TDB_STREAM_MAX_FIELDS);
		for (uint32_t f = 0; f < d->nfields; f++)
			if (stream_type_size(d->fields[f].type) == 0 || d->fields[f].codec > TDB_CODEC_DEADBAND ||
				!(d->fields[f].threshold >= 0))
				return stream_fail(NULL, err, errlen, TDB_STREAM_EINVAL, "stream %s field %s: bad type or codec",
							d->name, d->fields[f].name);
		if (stream_record_size(d) > TDB_STREAM_SECTOR - CHUNK_HDR)
			return stream_fail(NULL, err, errlen, TDB_STREAM_EINVAL, "stream %s: a record of %u bytes exceeds %d",
						d->name, stream_record_size(d), TDB_STREAM_SECTOR - CHUNK_HDR);
		for (uint32_t t = 0; t < s; t++)
			if (schema->streams[t].id == d->id || strcmp(schema->streams[t].name, d->name) == 0)
				return stream_fail(NULL, err, errlen, TDB_STREAM_EINVAL, "stream %s (id %u) is defined twice",
							d->name, d->id);
	}
	return TDB_STREAM_OK;
}

static uint32_t
stream_sb_crc(const Superblock *sb)
{
	Superblock	c = *sb;

	c.crc = 0;
	return tdb_crc32c(&c, stream_sb_size(c.nstreams));
}

/*
 * The commit point: copy 0, sync, copy 1, sync.  A write torn by a crash
 * leaves the other copy (the previous commit, or this one); damage to one
 * copy of a completed commit later leaves the other with the same commit.
 */
static int
stream_write_superblock(TdbStreamDB *db, Superblock *sb)
{
	int			rc = TDB_STREAM_OK;

	sb->crc = stream_sb_crc(sb);
	for (uint32_t c = 0; c < 2 && rc == TDB_STREAM_OK; c++)
	{
		rc = stream_io_write(db, stream_block_off(sb, c), sb, stream_sb_size(sb->nstreams));
		if (rc == TDB_STREAM_OK)
			rc = stream_io_sync(db);
	}
	return rc;
}

/*
 * A number that differs between two creations (of the same schema, at the
 * same path): a kept handle tells a file re-created in place by it.  Not
 * secret, only distinct: the clock, the process and a counter, mixed.
 */
static uint32_t
stream_create_id(void)
{
	static uint32_t counter;
	struct timespec ts;
	uint64_t	mix[4];
	uint32_t	id;

	clock_gettime(CLOCK_REALTIME, &ts);
	mix[0] = (uint64_t) ts.tv_sec;
	mix[1] = (uint64_t) ts.tv_nsec;
	mix[2] = (uint64_t) getpid();
	mix[3] = ++counter;
	id = tdb_crc32c(mix, sizeof(mix));
	return id != 0 ? id : 1;
}

int
tdb_stream_create(TdbStreamIO *io, const TdbStreamSchema *schema, char *err, size_t errlen)
{
	TdbStreamDB *db;
	Superblock	sb;
	uint8_t    *meta;
	uint32_t	mb;
	int			rc;
	uint16_t	endian = 1;

	if (*(uint8_t *) &endian != 1)
		return stream_fail(NULL, err, errlen, TDB_STREAM_EINVAL, "stream files are little-endian only");
	if ((rc = stream_check_schema(schema, err, errlen)) != TDB_STREAM_OK ||
		(rc = stream_layout(schema, &sb, err, errlen)) != TDB_STREAM_OK)
		return rc;
	if ((uint64_t) sb.nblocks * sb.block_size > io->size)
		return stream_fail(NULL, err, errlen, TDB_STREAM_ENOSPC, "the device holds %llu bytes; fileSize is %llu",
					(unsigned long long) io->size, (unsigned long long) schema->file_size);
	db = calloc(1, sizeof(*db));
	if (db == NULL)
		return stream_fail(NULL, err, errlen, TDB_STREAM_ENOMEM, "out of memory");
	db->io = *io;

	/* schema: magic, length, crc, then the definitions */
	mb = sb.meta_blocks * sb.block_size;
	meta = calloc(1, mb);
	if (meta == NULL)
	{
		free(db);
		return stream_fail(NULL, err, errlen, TDB_STREAM_ENOMEM, "out of memory");
	}
	{
		uint32_t	hdr[4] = {META_MAGIC, meta_bytes(schema), 0, stream_create_id()};

		memcpy(meta + 16, schema->streams, schema->nstreams * sizeof(TdbStreamDef));
		hdr[2] = tdb_crc32c(meta + 16, hdr[1] - 16);
		memcpy(meta, hdr, 16);
	}
	rc = stream_io_write(db, stream_block_off(&sb, 2), meta, mb);
	free(meta);

	/* empty index sectors, both copies, valid from the start */
	for (uint32_t s = 0; rc == TDB_STREAM_OK && s < sb.nstreams; s++)
		for (int c = 0; rc == TDB_STREAM_OK && c < 2; c++)
			for (uint32_t k = 0; rc == TDB_STREAM_OK && k < sb.idx_sectors; k++)
			{
				uint8_t		sec[TDB_STREAM_SECTOR] = {0};
				uint32_t	crc;

				memcpy(sec + 4, &s, 2);
				memcpy(sec + 8, &k, 4);
				crc = tdb_crc32c(sec + 4, TDB_STREAM_SECTOR - 4);
				memcpy(sec, &crc, 4);
				rc = stream_io_write(db, stream_idx_sector_off(&sb, sb.meta_blocks, (int) s, c, k), sec, sizeof(sec));
			}
	if (rc == TDB_STREAM_OK)
		rc = stream_io_sync(db);
	/* both superblock copies last: until then the file is not a stream file */
	for (uint32_t s = 0; s < TDB_STREAM_MAX_STREAMS; s++)
		sb.streams[s].last_ts = INT64_MIN;
	if (rc == TDB_STREAM_OK)
		rc = stream_write_superblock(db, &sb);
	if (rc != TDB_STREAM_OK)
		stream_fail(NULL, err, errlen, rc, "creating the file: %s", db->err);
	free(db);
	return rc;
}

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

static void
stream_decode_record(const TdbStreamDef *d, const uint8_t *p, TdbStreamRecord *out)
{
	const uint8_t *nulls = p + 9;
	const uint8_t *v = p + 9 + (d->nfields + 7) / 8;

	memcpy(&out->ts, p, 8);
	out->discontinuity = (p[8] & REC_DISCONT) != 0;
	for (uint32_t f = 0; f < d->nfields; f++)
	{
		uint8_t		t = d->fields[f].type;
		TdbStreamValue *o = &out->vals[f];

		o->isnull = (nulls[f / 8] >> (f % 8)) & 1;
		o->v.i = 0;
		switch (t)
		{
			case TDB_ST_INT8:
				o->v.i = (int8_t) v[0];
				break;
			case TDB_ST_BOOL:
				o->v.i = v[0] != 0;
				break;
			case TDB_ST_INT16:
				{
					int16_t		x;

					memcpy(&x, v, 2);
					o->v.i = x;
					break;
				}
			case TDB_ST_INT32:
				{
					int32_t		x;

					memcpy(&x, v, 4);
					o->v.i = x;
					break;
				}
			case TDB_ST_INT64:
				memcpy(&o->v.i, v, 8);
				break;
			case TDB_ST_FLOAT32:
				{
					float		x;

					memcpy(&x, v, 4);
					o->v.f = x;
					break;
				}
			case TDB_ST_FLOAT64:
				memcpy(&o->v.f, v, 8);
				break;
		}
		v += stream_type_size(t);
	}
}

static void
stream_encode_record(const TdbStreamDef *d, const TdbStreamRecord *r, uint8_t *p)
{
	uint8_t    *nulls = p + 9;
	uint8_t    *v = p + 9 + (d->nfields + 7) / 8;

	memcpy(p, &r->ts, 8);
	p[8] = r->discontinuity ? REC_DISCONT : 0;
	memset(nulls, 0, (d->nfields + 7) / 8);
	for (uint32_t f = 0; f < d->nfields; f++)
	{
		const TdbStreamValue *x = &r->vals[f];
		uint8_t		t = d->fields[f].type;

		if (x->isnull)
			nulls[f / 8] |= (uint8_t) (1u << (f % 8));
		switch (t)
		{
			case TDB_ST_INT8:
			case TDB_ST_BOOL:
				v[0] = x->isnull ? 0 : (uint8_t) x->v.i;
				break;
			case TDB_ST_INT16:
				{
					int16_t		y = x->isnull ? 0 : (int16_t) x->v.i;

					memcpy(v, &y, 2);
					break;
				}
			case TDB_ST_INT32:
				{
					int32_t		y = x->isnull ? 0 : (int32_t) x->v.i;

					memcpy(v, &y, 4);
					break;
				}
			case TDB_ST_INT64:
				{
					int64_t		y = x->isnull ? 0 : x->v.i;

					memcpy(v, &y, 8);
					break;
				}
			case TDB_ST_FLOAT32:
				{
					float		y = x->isnull ? 0.0f : (float) x->v.f;

					memcpy(v, &y, 4);
					break;
				}
			case TDB_ST_FLOAT64:
				{
					double		y = x->isnull ? 0.0 : x->v.f;

					memcpy(v, &y, 8);
					break;
				}
		}
		v += stream_type_size(t);
	}
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
static int
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
static int
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
static int
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
static int
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
static int
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
