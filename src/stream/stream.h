/*
 * stream.h
 *	  Stream files: a crash-safe, fixed-size time-series store in the manner
 *	  of RealDB, for devices that log sensor streams on unreliable hardware.
 *	  No PostgreSQL headers: used by the CLI (tools/trafficdb-stream), the
 *	  tests and the stream FDW alike.
 *
 *	  One file (or block device, or memory region) of fixed size holds
 *	  streams of fixed records (a 64-bit timestamp, ascending per stream,
 *	  and typed, optionally nullable fields).  The guarantee: after a power
 *	  loss at any instant the file opens, everything written before the last
 *	  successful tdb_stream_flush() is there byte for byte, and anything
 *	  later is whole or absent.  When the file is full the oldest block of
 *	  the file is reused.  Opening does work fixed by the configuration,
 *	  never by the amount of data.  The on-disk format and the reasoning
 *	  behind it are in docs/stream-format.md.
 *
 *	  Every call returns TDB_STREAM_OK (0) or a negative code;
 *	  tdb_stream_strerror() names it and tdb_stream_errmsg() gives details.
 */
#ifndef TDB_STREAM_H
#define TDB_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TDB_STREAM_OK			0
#define TDB_STREAM_EIO			(-30800)	/* the I/O layer failed; the handle needs reopening */
#define TDB_STREAM_ECORRUPT		(-30801)	/* the file is damaged beyond what recovery repairs */
#define TDB_STREAM_EFORMAT		(-30802)	/* not a stream file, or another format version */
#define TDB_STREAM_EINVAL		(-30803)	/* a bad argument or schema */
#define TDB_STREAM_EORDER		(-30804)	/* timestamp not after the stream's last one */
#define TDB_STREAM_ENOTFOUND	(-30805)	/* no such stream, or no sample at or before t */
#define TDB_STREAM_ENOMEM		(-30806)
#define TDB_STREAM_EBROKEN		(-30807)	/* an earlier I/O failure: reopen to recover */
#define TDB_STREAM_ENOSPC		(-30808)	/* the file is too small for its configuration */
#define TDB_STREAM_ESTALE		(-30809)	/* tdb_stream_refresh: the file was re-created: reopen it */

#define TDB_STREAM_SECTOR		512		/* the unit a device writes whole, or tears at */
#define TDB_STREAM_MAX_STREAMS	64
#define TDB_STREAM_MAX_FIELDS	32
#define TDB_STREAM_NAMELEN		32

/*
 * Field types, stored in the file by these codes (never by name).  Sizes
 * in bits: TDB_ST_INT8 is one byte (RDL i8), not PostgreSQL's int8.
 */
typedef enum TdbStreamType
{
	TDB_ST_INT8 = 1, TDB_ST_INT16, TDB_ST_INT32, TDB_ST_INT64,
	TDB_ST_FLOAT32, TDB_ST_FLOAT64, TDB_ST_BOOL
} TdbStreamType;

/*
 * When an insert stores a record: SAMPLED fields always; STEP fields when
 * their value changed; DEADBAND fields when it moved more than the
 * threshold from the last stored value.  A record is stored when any field
 * asks for it (every field of a stored record is kept); reconstruction
 * answers "value at time t" with the last stored record at or before t.
 */
typedef enum TdbStreamCodec
{
	TDB_CODEC_SAMPLED = 0, TDB_CODEC_STEP, TDB_CODEC_DEADBAND
} TdbStreamCodec;

typedef struct TdbStreamField
{
	char		name[TDB_STREAM_NAMELEN];
	uint8_t		type;			/* TdbStreamType */
	uint8_t		nullable;
	uint8_t		codec;			/* TdbStreamCodec */
	double		threshold;		/* DEADBAND */
} TdbStreamField;

typedef struct TdbStreamDef
{
	uint32_t	id;
	char		name[TDB_STREAM_NAMELEN];
	uint32_t	nfields;
	TdbStreamField fields[TDB_STREAM_MAX_FIELDS];
} TdbStreamDef;

typedef struct TdbStreamSchema
{
	uint32_t	block_size;		/* a multiple of TDB_STREAM_SECTOR */
	uint64_t	file_size;
	uint32_t	nstreams;
	TdbStreamDef streams[TDB_STREAM_MAX_STREAMS];
} TdbStreamSchema;

/* One field's value in a record. */
typedef struct TdbStreamValue
{
	bool		isnull;
	union
	{
		int64_t		i;			/* ints and bools */
		double		f;			/* floats */
	}			v;
} TdbStreamValue;

/*
 * All I/O goes through this, so tests can intercept it (power loss, torn
 * and garbage writes, failing operations).  Each returns 0 or -1; a short
 * read or write counts as a failure.
 */
typedef struct TdbStreamIO
{
	void	   *ctx;
	int			(*read) (void *ctx, uint64_t off, void *buf, size_t len);
	int			(*write) (void *ctx, uint64_t off, const void *buf, size_t len);
	int			(*sync) (void *ctx);
	uint64_t	size;			/* bytes available */
} TdbStreamIO;

/* POSIX file or block device (pread/pwrite/fdatasync); *io owns fd. */
int			tdb_stream_io_file(const char *path, bool create, uint64_t size, TdbStreamIO *io,
							   char *err, size_t errlen);
/*
 * The same, read-only (O_RDONLY: a reader of a file it may not write);
 * anything but a regular file or a block device is refused (a FIFO would
 * block the open).  Writing through such an io fails.
 */
int			tdb_stream_io_file_readonly(const char *path, TdbStreamIO *io, char *err, size_t errlen);
/* The file descriptor of a file io (for the caller's own locking), or -1. */
int			tdb_stream_io_fd(const TdbStreamIO *io);
void		tdb_stream_io_file_close(TdbStreamIO *io);
/*
 * One writer or many readers per file, across processes (flock; released
 * by tdb_stream_io_file_close or the process's exit).  Waits.
 */
int			tdb_stream_io_lock(TdbStreamIO *io, bool exclusive);
/* A memory region of size bytes (no sync needed). */
void		tdb_stream_io_memory(void *region, uint64_t size, TdbStreamIO *io);

typedef struct TdbStreamDB TdbStreamDB;

/* Parse an RDL schema; on error err names the line and column. */
int			tdb_stream_parse_rdl(const char *text, TdbStreamSchema *out, char *err, size_t errlen);
/* The RDL name of a type code: i8, i16, i32, i64, f32, f64, bool ("?" if none). */
const char *tdb_stream_type_name(uint8_t type);

/* Lay out and initialise a new file (every section preallocated). */
int			tdb_stream_create(TdbStreamIO *io, const TdbStreamSchema *schema, char *err, size_t errlen);

/*
 * Open (recovering from a crash: bounded work).  Reads the superblocks and
 * the schema only; a stream's index is read a sector at a time as lookups
 * need it (kept in a bounded cache), its last chunk when it is appended to.
 */
int			tdb_stream_open(TdbStreamIO *io, TdbStreamDB **out, char *err, size_t errlen);
/*
 * Bring an open handle to the file's last commit, made since by another
 * handle or process (hold the file's lock): one read of superblock copy 0
 * and of the schema's header when nothing changed.  What the handle cached
 * of a stream whose commit changed is forgotten.  *changed says whether
 * the commit changed.  TDB_STREAM_ESTALE: the file was re-created with
 * another layout or schema (close and open it again); TDB_STREAM_EINVAL:
 * the handle holds unflushed records.
 */
int			tdb_stream_refresh(TdbStreamDB *db, bool *changed);
void		tdb_stream_close(TdbStreamDB *db);	/* does not flush */

const char *tdb_stream_strerror(int code);
const char *tdb_stream_errmsg(const TdbStreamDB *db);

const TdbStreamSchema *tdb_stream_schema(const TdbStreamDB *db);
/* Index of a stream by name (or by decimal id), or TDB_STREAM_ENOTFOUND. */
int			tdb_stream_find(const TdbStreamDB *db, const char *name);

/*
 * Append a record (vals: one per field) to stream s.  ts must be after the
 * stream's last timestamp (TDB_STREAM_EORDER otherwise).  O(1).
 */
int			tdb_stream_insert(TdbStreamDB *db, int s, int64_t ts, const TdbStreamValue *vals);
/*
 * The timestamp the next insert into stream s must be after: the last one
 * given to tdb_stream_insert or tdb_stream_discontinuity (stored or not: the
 * codecs may have dropped it), flushed or not; INT64_MIN if none ever was.
 * O(1).
 */
int			tdb_stream_last_ts(const TdbStreamDB *db, int s, int64_t *out);
/* A discontinuity at ts: no value holds across it. */
int			tdb_stream_discontinuity(TdbStreamDB *db, int s, int64_t ts);
/* Make everything inserted so far durable. */
int			tdb_stream_flush(TdbStreamDB *db);

/* A stored record, as iterators and lookups return it. */
typedef struct TdbStreamRecord
{
	int64_t		ts;
	bool		discontinuity;
	TdbStreamValue vals[TDB_STREAM_MAX_FIELDS];
} TdbStreamRecord;

/* Last stored record of stream s at or before t: O(log n). */
int			tdb_stream_at(TdbStreamDB *db, int s, int64_t t, TdbStreamRecord *out);

/* Records of stream s with from <= ts <= to, in order; fn returns nonzero to stop. */
typedef int (*TdbStreamVisit) (const TdbStreamRecord *rec, void *arg);
int			tdb_stream_range(TdbStreamDB *db, int s, int64_t from, int64_t to,
							 TdbStreamVisit fn, void *arg);

typedef struct TdbStreamStats
{
	uint64_t	records;		/* stored and readable now */
	uint64_t	blocks;
	int64_t		first_ts;
	int64_t		last_ts;
	uint64_t	inserts;		/* offered to tdb_stream_insert since open */
	uint64_t	stored;			/* of which stored (the codecs kept them) */
} TdbStreamStats;

int			tdb_stream_stats(TdbStreamDB *db, int s, TdbStreamStats *out);

typedef struct TdbStreamFileInfo
{
	uint32_t	block_size;
	uint32_t	data_blocks;
	uint32_t	free_blocks;
	uint64_t	commit_seq;
	uint64_t	open_reads;		/* sectors read while opening (the recovery bound) */
	uint64_t	sectors_read;	/* the I/O counter: 512-byte sectors read since open, opening included */
	uint64_t	bytes_read;		/* bytes read since open */
	uint64_t	bytes_written;	/* since open */
	uint32_t	index_sectors_cached;	/* index sectors the handle holds in memory now */
	uint32_t	record_size[TDB_STREAM_MAX_STREAMS];
} TdbStreamFileInfo;

void		tdb_stream_info(const TdbStreamDB *db, TdbStreamFileInfo *out);

/* Check every committed chunk and index entry; TDB_STREAM_OK or ECORRUPT with details. */
int			tdb_stream_verify(TdbStreamDB *db);

#endif							/* TDB_STREAM_H */
