/*
 * file.c
 *	  The stream file itself (docs/stream-format.md): error messages, I/O
 *	  with accounting (any failure breaks the handle), where everything
 *	  lies, superblocks, the record encoding, and creating a file.  The
 *	  rest of the engine (engine.h) builds on these.
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

/* Record an error message (in err when given, else in the handle). */
int
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

bool
stream_type_is_float(uint8_t t)
{
	return t == TDB_ST_FLOAT32 || t == TDB_ST_FLOAT64;
}

/* Record layout: ts (8), flags (1), null bitmap, then each field's bytes. */
uint32_t
stream_record_size(const TdbStreamDef *d)
{
	uint32_t	n = 9 + (d->nfields + 7) / 8;

	for (uint32_t f = 0; f < d->nfields; f++)
		n += stream_type_size(d->fields[f].type);
	return n;
}

/* ---- I/O with accounting; any failure breaks the handle ------------------ */

int
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

int
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

int
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
size_t
stream_sb_size(uint32_t nstreams)
{
	if (nstreams > TDB_STREAM_MAX_STREAMS)
		nstreams = TDB_STREAM_MAX_STREAMS;
	return offsetof(Superblock, streams) + nstreams * sizeof(SbStream);
}

/* ---- layout ----------------------------------------------------------------- */

uint64_t
stream_block_off(const Superblock *sb, uint32_t block)
{
	return (uint64_t) block * sb->block_size;
}

uint64_t
stream_data_off(const Superblock *sb, uint32_t dblock)
{
	return stream_block_off(sb, sb->data_first + dblock);
}

/* Offset of index sector k of stream s in copy c (0 primary, 1 backup). */
uint64_t
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

int
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

uint32_t
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
int
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

void
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

void
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
