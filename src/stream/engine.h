/*
 * engine.h
 *	  The stream engine's private state, shared by its files and by no one
 *	  else (stream.h is the contract): the on-disk structures, the handle,
 *	  and the helpers one file uses from another.
 *
 *	  file.c    errors, accounted I/O, where everything lies in the file,
 *	            superblocks, record encoding, creating a file
 *	  open.c    opening and recovery, the index sector cache, refresh, close
 *	  write.c   inserting, allocating blocks, flushing (the commit)
 *	  read.c    range scans, point lookups, statistics, verification
 */
#ifndef TDB_STREAM_ENGINE_H
#define TDB_STREAM_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stream/stream.h"

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

/* ---- file.c ---- */

int			stream_fail(TdbStreamDB *db, char *err, size_t errlen, int code, const char *fmt,...)
	__attribute__((format(printf, 5, 6)));
int			stream_io_read(TdbStreamDB *db, uint64_t off, void *buf, size_t len);
int			stream_io_write(TdbStreamDB *db, uint64_t off, const void *buf, size_t len);
int			stream_io_sync(TdbStreamDB *db);
size_t		stream_sb_size(uint32_t nstreams);
bool		stream_type_is_float(uint8_t t);
uint32_t	stream_record_size(const TdbStreamDef *d);
uint64_t	stream_block_off(const Superblock *sb, uint32_t block);
uint64_t	stream_data_off(const Superblock *sb, uint32_t dblock);
uint64_t	stream_idx_sector_off(const Superblock *sb, uint32_t meta_blocks, int s, int c, uint32_t k);
int			stream_check_schema(const TdbStreamSchema *schema, char *err, size_t errlen);
uint32_t	stream_sb_crc(const Superblock *sb);
int			stream_write_superblock(TdbStreamDB *db, Superblock *sb);
void		stream_decode_record(const TdbStreamDef *d, const uint8_t *p, TdbStreamRecord *out);
void		stream_encode_record(const TdbStreamDef *d, const TdbStreamRecord *r, uint8_t *p);

/* ---- open.c ---- */

int			stream_idx_get(TdbStreamDB *db, int s, uint64_t pos, IdxEntry *out);
int			stream_idx_put(TdbStreamDB *db, int s, uint64_t pos, const IdxEntry *e);
int			stream_idx_head_entry(TdbStreamDB *db, int s, IdxEntry *out);
int			stream_chunk_check(const TdbStreamDB *db, int s, const IdxEntry *e, uint32_t chunk_no, const uint8_t *sec);
int			stream_ready(TdbStreamDB *db, int s);

#endif							/* TDB_STREAM_ENGINE_H */
