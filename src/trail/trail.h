/*
 * trail.h
 *	  Trail files: the time-ordered events of many entities (vessels,
 *	  vehicles), laid out so that a reader far from the file (S3, HTTP) can
 *	  fetch only the pages a query needs.
 *
 * A trail file is immutable: pages of events grouped by trail (a page holds
 * events of one trail only), then a footer (schema, lexicon, trail index,
 * per-page zone maps), then a fixed-size trailer at the very end that says
 * where the footer is.  docs/trail-format.md describes the bytes.
 *
 * Every call returns an int: 0 (or a count) on success, a negative
 * TDB_TRAIL_E* code on failure, with a message for people in a TdbTrailError
 * the caller passes in.  Nothing here exits, prints or reads the environment.
 * No PostgreSQL headers: the FDW, the CLI and the tests share this code.
 */
#ifndef TDB_TRAIL_H
#define TDB_TRAIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TDB_TRAIL_VERSION		6	/* newest version written and read */
/*
 * Written by default: version 6 (pages column-major) when the pages total at
 * most TDB_TRAIL_COLMAJOR_MAX_BYTES, else version 5 (the same file, pages
 * row-major): asking for 6 writes a larger file as version 5.
 */
#define TDB_TRAIL_VERSION_DEFAULT	6
#define TDB_TRAIL_VERSION_ROWMAJOR	5	/* the newest version with row-major pages */
/*
 * Version 6: a file whose pages total at most this many bytes lays them out
 * column-major (every page's core chunk, then every page's position chunk,
 * then each extra column's), so that a scan of a few columns reads one run
 * of bytes per column instead of touching every page's every block.  The
 * price is a lookup's: one trail's chunks then lie in every column's run,
 * so it reads up to the whole page region where row-major pages give it one
 * or two blocks.  64 KiB is four of the pager's default 16 KiB blocks: such
 * a lookup costs at most four blocks in one GET (with the footer's tail it
 * read two or three before), while one hour of New York Harbor AIS (51 kB of
 * pages) maps its positions from 49 kB instead of the whole 71 kB file
 * (bench/trails_parquet.sh q7).  With the first bound, 256 KiB, a lookup of
 * 2 of 200 trails in a 207 kB file read 153 kB instead of a sixth of it
 * (t/022).  The bound also stays below the writer's 1 MiB output buffer
 * (writer.h, TRAIL_OUT_FLUSH_BYTES), so the pages are still all in memory
 * when the writer lays them out at finish.
 */
#define TDB_TRAIL_COLMAJOR_MAX_BYTES	(64u << 10)
#define TDB_TRAIL_VERSION_MIN	1	/* oldest version read */
#define TDB_TRAIL_TRAILER_SIZE	48
#define TDB_TRAIL_HEADER_SIZE	16
#define TDB_TRAIL_MAX_COLUMNS	64
#define TDB_TRAIL_COORD_SCALE	10000000.0	/* lon/lat stored in 1e-7 degree */

/* Error codes: negative, outside the errno range like LMDB's. */
enum
{
	TDB_TRAIL_OK = 0,
	TDB_TRAIL_EINVAL = -30001,	/* bad argument or input (e.g. a CSV row) */
	TDB_TRAIL_ENOMEM = -30002,
	TDB_TRAIL_EIO = -30003,		/* local file I/O */
	TDB_TRAIL_ECORRUPT = -30004,	/* file, footer or page fails validation */
	TDB_TRAIL_EVERSION = -30005,	/* a format version this build cannot read */
	TDB_TRAIL_ENOTFOUND = -30006,	/* object or file missing */
	TDB_TRAIL_EAUTH = -30007,	/* credentials refused */
	TDB_TRAIL_EREPLACED = -30008,	/* object replaced while being read */
	TDB_TRAIL_EPROTO = -30009,	/* server broke the HTTP range contract */
	TDB_TRAIL_ENET = -30010,	/* network failure after retries */
	TDB_TRAIL_ECANCELED = -30011,	/* the cancel callback asked to stop */
	TDB_TRAIL_EORDER = -30012,	/* writer input out of order */
	TDB_TRAIL_EHTTP = -30013	/* other HTTP status */
};

/* Why a call failed, for people: code plus a sentence without secrets. */
typedef struct TdbTrailError
{
	int			code;
	char		msg[512];
} TdbTrailError;

const char *tdb_trail_strerror(int code);

/* Sets err (if not NULL) and returns code. */
int			tdb_trail_fail(TdbTrailError *err, int code, const char *fmt,...)
			__attribute__((format(printf, 3, 4)));

/* Column types; the trail id is INT64 or STRING. */
typedef enum TdbTrailType
{
	TDB_TRAIL_INT64 = 1,
	TDB_TRAIL_FLOAT64 = 2,
	TDB_TRAIL_STRING = 3,		/* lexicon-encoded */
	TDB_TRAIL_BOOL = 4			/* version 2: value in i, 0 or 1 */
} TdbTrailType;

/* Page order of a version-2 file, chosen at write time. */
typedef enum TdbTrailOrder
{
	TDB_TRAIL_ORDER_TRAIL = 0,	/* by trail id, then time: a page holds one trail */
	TDB_TRAIL_ORDER_SPACETIME = 1,	/* by time bucket, then place: pages hold
									 * nearby trails of one time bucket */
	/*
	 * Writers only, never in a file: trail order, or by time (by_time) when
	 * the trails are short beside the file's time span (TDB_TRAIL_AUTO_*, below).
	 */
	TDB_TRAIL_ORDER_AUTO = 2
} TdbTrailOrder;

/*
 * ORDER_AUTO's rule, on the events' mean trail span (each event counting
 * its trail's span from its first to its last event): by time when the
 * file spans at least TDB_TRAIL_AUTO_SPAN_RATIO times that mean and more
 * than one time bucket (a window then reads a stretch of the file instead
 * of a page of every trail it meets: by trail, where pages are smaller
 * than the reader's blocks, that is nearly every block of the file), and
 * that mean is at most TDB_TRAIL_AUTO_MAX_BUCKETS buckets (a trail's
 * lookup then reads at most about a dozen stretches, which the reader
 * fetches four at a time, not one per bucket of a long trail); else by
 * trail.
 */
#define TDB_TRAIL_AUTO_SPAN_RATIO 2
#define TDB_TRAIL_AUTO_MAX_BUCKETS 12

/*
 * Schema.  Every event has a timestamp (Unix microseconds), lon and lat
 * (WGS 84 degrees, stored to 1e-7 degree) and any number of extra columns.
 */
typedef struct TdbTrailColumn
{
	char		name[64];
	TdbTrailType type;
} TdbTrailColumn;

typedef struct TdbTrailSchema
{
	char		id_name[64];
	TdbTrailType id_type;		/* INT64 or STRING */
	char		time_name[64];
	char		lon_name[64];
	char		lat_name[64];
	int			ncolumns;		/* extra columns */
	TdbTrailColumn columns[TDB_TRAIL_MAX_COLUMNS];
} TdbTrailSchema;

/*
 * One value of an extra column: the member of its column's type (a column
 * has one type, so they share their 8 bytes).  16 bytes, not 32: a decoded
 * page holds a value per event and column, and a scan reads each row's
 * across every column it returns.
 */
typedef struct TdbTrailValue
{
	union
	{
		int64_t		i;			/* INT64, BOOL (0 or 1) */
		double		f;			/* FLOAT64 */
		const char *s;			/* STRING: NUL-terminated, owned by the reader */
	};
	bool		isnull;
} TdbTrailValue;
_Static_assert(sizeof(TdbTrailValue) <= 16, "TdbTrailValue: one 8-byte member and its flag");

/* A trail id. */
typedef struct TdbTrailKey
{
	int64_t		i;				/* id_type INT64 */
	const char *s;				/* id_type STRING */
} TdbTrailKey;

/* One event as the writer takes it and the reader returns it. */
typedef struct TdbTrailEvent
{
	TdbTrailKey key;
	int64_t		time_us;
	double		lon;
	double		lat;
	TdbTrailValue *values;		/* schema.ncolumns entries; NULL under
								 * TdbTrailQuery.values_in_page */
	/*
	 * Under values_in_page: extra column c's value is cols[c][index] (the
	 * decoded page's, not copied; nothing for the columns skip_columns
	 * leaves out), valid until the next call.
	 */
	TdbTrailValue *const *cols;
	uint32_t	index;
} TdbTrailEvent;

/*
 * Summary of one extra column over a trail (version 2 footers):
 * count of non-NULL values; for INT64 and BOOL (0/1) the minimum and
 * maximum when count > 0; for FLOAT64 the minimum and maximum of the
 * values that are not NaN (has_range) and whether a NaN occurs (has_nan).
 * Strings have the count only.
 */
typedef struct TdbTrailStats
{
	uint64_t	count;
	int64_t		imin,
				imax;
	bool		has_range;
	bool		has_nan;
	double		fmin,
				fmax;
} TdbTrailStats;

/* Quantise a coordinate as the file stores it (round to 1e-7 degree). */
int32_t		tdb_trail_coord_fix(double deg);
/* (inline: a scan calls it twice per event) */
static inline double
tdb_trail_coord_unfix(int32_t fixed)
{
	return (double) fixed / TDB_TRAIL_COORD_SCALE;
}

/* ---- Writer ------------------------------------------------------------ */

typedef struct TdbTrailWriter TdbTrailWriter;

/* What the writer is doing, for a progress line. */
typedef struct TdbTrailProgress
{
	const char *phase;			/* "sorting", "writing pages", "ordering segments" */
	uint64_t	events;			/* events taken */
	uint32_t	runs;			/* sorted runs spilled to disk so far */
	uint64_t	done,
				total;			/* events of this phase done, of total */
} TdbTrailProgress;
/*
 * The default page span: an hour.  With pages by trail (the default order)
 * and the pager's 16 KiB blocks, a trail's pages stay contiguous for id
 * queries and joins, and version 3's pages are small enough that a time
 * window or an area reads little more than it needs; 15-minute pages
 * (tried in issue 33) made sparse data such as AIS nearly twice as large
 * for no gain in bytes fetched (docs/trails.md, "Defaults").
 */
#define TDB_TRAIL_PAGE_SPAN_DEFAULT_US (3600LL * 1000000)

typedef struct TdbTrailWriterOptions
{
	uint32_t	page_target_bytes;	/* close a page near this size; 0: 64 KiB */
	uint32_t	page_max_events;	/* and at this many events; 0: 8192 */
	/*
	 * and when it would span more time than this (microseconds; 0:
	 * TDB_TRAIL_PAGE_SPAN_DEFAULT_US, negative: no limit), so that a time
	 * window or an area prunes pages of a long trail too, not only whole
	 * trails
	 */
	int64_t		page_max_span_us;
	/*
	 * 0: TDB_TRAIL_VERSION_DEFAULT; 6: column-major when the pages total at
	 * most TDB_TRAIL_COLMAJOR_MAX_BYTES, else written as version 5; 1: the
	 * version-1 layout
	 */
	int			version;
	TdbTrailOrder order;		/* version 2; ORDER_AUTO: decided at finish */
	/* ORDER_SPACETIME: the time bucket (microseconds; 0: 10 minutes, 1 hour by_time or auto) */
	int64_t		bucket_us;
	/*
	 * ORDER_SPACETIME without the place: a page holds one trail's events of
	 * one time bucket, and pages follow each other by bucket, then trail id
	 * (the "time" order of the CLI and trafficdb.trail_write).  A time
	 * window then reads one stretch of the file, and a trail's lookup only
	 * that trail's pages (space-time's shared pages are decoded by every
	 * trail they hold).  The footer says space-time; readers need nothing
	 * new.
	 */
	bool		by_time;
	/*
	 * Memory the writer may use (bytes; 0: TDB_TRAIL_WRITER_MEMORY_DEFAULT,
	 * at least TDB_TRAIL_WRITER_MEMORY_MIN): events beyond it are sorted in
	 * runs spilled to unnamed temporary files in temp_dir (NULL: $TMPDIR,
	 * else /tmp) and merged.  The string dictionaries and the footer's
	 * per-trail and per-page state stay in memory: past 3/4 of the limit
	 * the writer fails with TDB_TRAIL_ENOMEM saying so.
	 */
	size_t		memory_limit;
	const char *temp_dir;
	/* called now and then on long work (may be NULL) */
	void		(*progress) (void *arg, const TdbTrailProgress *p);
	void	   *progress_arg;
	/* asked as often (each page, run or 64k events; may be NULL): nonzero stops with TDB_TRAIL_ECANCELED */
	int			(*cancel) (void *arg);
	void	   *cancel_arg;
	/* bytes the spilled runs may take together (0: no limit): past it, TDB_TRAIL_EIO */
	uint64_t	temp_limit;
} TdbTrailWriterOptions;

#define TDB_TRAIL_WRITER_MEMORY_DEFAULT ((size_t) 256 << 20)
#define TDB_TRAIL_WRITER_MEMORY_MIN ((size_t) 256 << 10)


/* Where tdb_trail_writer_finish_to writes the file: 0, or < 0 with err set. */
typedef int (*TdbTrailSink) (void *arg, const void *buf, size_t len, TdbTrailError *err);

/*
 * A page order by the name the CLI and trafficdb.trail_write take:
 * "trail", "time" (space-time with by_time) or "space-time".  false for
 * any other name (the callers say what they expect).
 */
bool		tdb_trail_order_by_name(const char *name, TdbTrailOrder *order, bool *by_time);

/*
 * Events may arrive in any order: the writer sorts them by (trail, time,
 * arrival) within its memory limit (spilling sorted runs to disk), then
 * writes pages.  The file does not depend on the limit.
 */
int			tdb_trail_writer_create(const TdbTrailSchema *schema,
									const TdbTrailWriterOptions *opts,
									TdbTrailWriter **out, TdbTrailError *err);
int			tdb_trail_writer_add(TdbTrailWriter *w, const TdbTrailEvent *ev,
								 TdbTrailError *err);

/* Encode the whole file into a malloc'd buffer (the caller frees it). */
int			tdb_trail_writer_finish(TdbTrailWriter *w, uint8_t **buf,
									size_t *len, TdbTrailError *err);
/* Write the file to a sink, in order, a piece at a time (*len: its size). */
int			tdb_trail_writer_finish_to(TdbTrailWriter *w, TdbTrailSink sink, void *arg,
									   uint64_t *len, TdbTrailError *err);
void		tdb_trail_writer_free(TdbTrailWriter *w);

/*
 * After finish, when the page order was TDB_TRAIL_ORDER_AUTO: which order
 * the writer took and why, e.g. "page order time (auto: its trails span
 * 2.09 h on average, the file 16.52 h)"; else "".
 */
const char *tdb_trail_writer_order_note(const TdbTrailWriter *w);

/* Bytes of temporary files (spilled runs) the writer holds now. */
uint64_t	tdb_trail_writer_temp_bytes(const TdbTrailWriter *w);

/* ---- Decoding (shared by the reader and the fuzz target) --------------- */

typedef struct TdbTrailPageInfo
{
	uint64_t	offset;
	uint32_t	length;
	uint32_t	nevents;
	uint32_t	trail;			/* index into the trail table; UINT32_MAX:
								 * several trails (version 2) */
	int64_t		tmin, tmax;
	int32_t		xmin, ymin, xmax, ymax;	/* fixed 1e-7 degree */
	/*
	 * Version 2: the lengths of the page's 2 + ncolumns chunks (core: runs
	 * and times; positions; each extra column).  NULL in version 1 (the page
	 * is one piece).
	 */
	const uint32_t *chunk_len;
	/*
	 * Version 6 (pages column-major): each chunk's offset in the file (2 +
	 * ncolumns entries; offset is the core chunk's).  NULL: the chunks lie
	 * back to back from offset (versions 1 to 5).
	 */
	const uint64_t *chunk_off;
} TdbTrailPageInfo;

typedef struct TdbTrailInfo
{
	TdbTrailKey key;			/* s points into the footer's string area */
	uint32_t	first_page;
	uint32_t	npages;
	/* the trail's pages, ascending; NULL: first_page .. first_page + npages - 1 */
	const uint32_t *page_list;
	uint64_t	nevents;
	int64_t		tmin, tmax;
	int32_t		xmin, ymin, xmax, ymax;
	const TdbTrailStats *stats;	/* ncolumns entries; NULL in version 1 */
} TdbTrailInfo;

typedef struct TdbTrailFooter
{
	uint16_t	version;		/* 1 to 4 */
	TdbTrailOrder order;
	int64_t		bucket_us;		/* ORDER_SPACETIME: the writer's time bucket */
	TdbTrailSchema schema;
	uint32_t	nstrings;		/* lexicon */
	char	  **strings;
	uint32_t	ntrails;
	TdbTrailInfo *trails;		/* sorted by key */
	uint32_t	npages;
	TdbTrailPageInfo *pages;	/* in file order */
	uint64_t	nevents;
	uint64_t	data_end;		/* = footer offset */
	void	   *arena;			/* owns strings */
	void	   *arena2;			/* version 2: owns page lists, chunk lengths, stats */
	size_t		arena2_bytes;	/* its size */
	/*
	 * Version 3 (footer3.c): the footer is read in pieces.  Opening reads
	 * its head only: the counts, the schema, the whole file's summary and
	 * the directories of the trail and page chunks.  trails[] and pages[]
	 * are allocated in full, but an entry is valid only once its chunk is
	 * loaded (tdb_trail_need_trails, tdb_trail_need_pages, tdb_trail_lookup,
	 * tdb_trail_need_all), strings[] once tdb_trail_need_lexicon ran.  NULL
	 * for versions 1 and 2, whose footers are decoded whole.
	 */
	void	   *lazy;
	/*
	 * version 3: the whole file as one trail (events, zone map, summaries;
	 * key: the first trail's id) and the last trail's id
	 */
	bool		has_whole;
	TdbTrailInfo whole;
	TdbTrailKey whole_last;
} TdbTrailFooter;

typedef struct TdbTrailTrailer
{
	uint64_t	footer_offset;
	uint64_t	footer_length;
	uint64_t	file_size;
	uint32_t	footer_crc;
	uint16_t	version;
} TdbTrailTrailer;

int			tdb_trail_trailer_decode(const uint8_t *buf, size_t len,
									 uint64_t file_size, TdbTrailTrailer *t,
									 TdbTrailError *err);
int			tdb_trail_footer_decode(const uint8_t *buf, size_t len,
									const TdbTrailTrailer *t,
									TdbTrailFooter *f, TdbTrailError *err);
void		tdb_trail_footer_release(TdbTrailFooter *f);

/*
 * A decoded page: nevents events of one trail, columns unpacked.  Strings
 * point into the footer's lexicon.
 */
typedef struct TdbTrailPage
{
	uint32_t	nevents;
	uint32_t	cap;
	uint32_t   *trail;			/* each event's trail number */
	int64_t    *time;
	int32_t    *lon;
	int32_t    *lat;
	int			ncolumns;
	TdbTrailValue *cols[TDB_TRAIL_MAX_COLUMNS];	/* cols[c][i] */
	/*
	 * Bit c: extra column c was not decoded (tdb_trail_page_decode_some's
	 * skip_columns): its values are NULL, and cols[c] holds nothing (not
	 * written: n stores of a NULL each cost more than the decoding, 80 %
	 * of it on a map's query, which skips every extra column).
	 */
	uint64_t	skipped;
} TdbTrailPage;

int			tdb_trail_page_decode(const TdbTrailFooter *f, uint32_t pageno,
								  const uint8_t *buf, size_t len,
								  TdbTrailPage *page, TdbTrailError *err);

/*
 * The same for a version-2 page of which only some chunks were read: buf
 * holds the page's bytes at their offsets within the page, len its whole
 * length; the chunks skipped (skip_position: lon and lat; bit c of
 * skip_columns: extra column c) are not looked at and decode as 0 / NULL.
 * Version-1 pages are always decoded whole.
 */
int			tdb_trail_page_decode_some(const TdbTrailFooter *f, uint32_t pageno,
									   const uint8_t *buf, size_t len,
									   bool skip_position, uint64_t skip_columns,
									   TdbTrailPage *page, TdbTrailError *err);

/*
 * The byte range [*off, *off + *len) of chunk k of a version-2 page in the
 * file (version 6: where its column's chunks lie), and *pos, where it starts
 * within the page's bytes as the page decoder takes them (the chunks back to
 * back in order, as versions 2 to 5 store them); pos may be NULL.
 */
void		tdb_trail_chunk_range(const TdbTrailFooter *f, uint32_t pageno, int k,
								  uint64_t *off, uint32_t *len);
void		tdb_trail_chunk_place(const TdbTrailFooter *f, uint32_t pageno, int k,
								  uint64_t *off, uint32_t *len, uint32_t *pos);

/*
 * Page pageno's bytes as the page decoder takes them, copied from the whole
 * file (data, size bytes) into dst (pages[pageno].length bytes): its chunks
 * gathered from their columns in version 6.  false: a chunk past the end.
 */
bool		tdb_trail_page_gather(const TdbTrailFooter *f, uint32_t pageno, const uint8_t *data,
								  uint64_t size, uint8_t *dst);

/* The index of a trail id in f->trails, or -1. */
int			tdb_trail_find_int(const TdbTrailFooter *f, int64_t id);
int			tdb_trail_find_str(const TdbTrailFooter *f, const char *id);
void		tdb_trail_page_release(TdbTrailPage *page);

/* ---- Reader with pruning ----------------------------------------------- */

struct TdbPager;

typedef struct TdbTrailReader TdbTrailReader;

/*
 * Reads the trailer (one small read at the end of the file), then the
 * footer.  The reader borrows the pager; close the pager after the reader.
 */
int			tdb_trail_open(struct TdbPager *pager, TdbTrailReader **out,
						   TdbTrailError *err);
const TdbTrailFooter *tdb_trail_footer(const TdbTrailReader *r);

/*
 * Version 3 footers are read in chunks when needed (docs/trail-format.md,
 * "Version 3: footer"); these make entries of tdb_trail_footer(r) valid,
 * fetching and checking the chunks that hold them (several at once).  For
 * versions 1 and 2 they do nothing.  Trails [lo, hi), pages [lo, hi), the
 * lexicon, everything.
 */
int			tdb_trail_need_trails(TdbTrailReader *r, uint32_t lo, uint32_t hi,
								  TdbTrailError *err);
int			tdb_trail_need_pages(TdbTrailReader *r, uint32_t lo, uint32_t hi,
								 TdbTrailError *err);
int			tdb_trail_need_lexicon(TdbTrailReader *r, TdbTrailError *err);
int			tdb_trail_need_all(TdbTrailReader *r, TdbTrailError *err);

/*
 * A version-3 or later footer's parts (trafficdb-trail info): the bytes
 * and number of each kind of chunk, from the head alone; the head's bytes
 * are the rest of the footer.  All zero before version 3.
 */
typedef struct TdbTrailFooterParts
{
	uint64_t	trail_bytes,
				page_bytes,
				summary_bytes,
				lexicon_bytes;
	uint32_t	trail_chunks,
				page_chunks,
				summary_chunks;
} TdbTrailFooterParts;

void		tdb_trail_footer_parts(const TdbTrailReader *r, TdbTrailFooterParts *out);

/*
 * Trails [lo, hi) with the column summaries (TdbTrailInfo.stats) of the
 * columns in mask cols (bit c: column c) valid: version 5 keeps each
 * column's summaries in chunks of their own, read only when asked for;
 * the other columns' summaries read as count 0 until asked for.  Before
 * version 5 every column's come with the trails.
 */
int			tdb_trail_need_summaries(TdbTrailReader *r, uint32_t lo, uint32_t hi, uint64_t cols,
									 TdbTrailError *err);

/*
 * The trail chunks of these ids (by id_type, NULLs skipped), and the
 * summaries of the columns in cols, fetched at once.
 */
int			tdb_trail_need_ids(TdbTrailReader *r, const int64_t *ids_int,
							   const char *const *ids_str, int n, uint64_t cols,
							   TdbTrailError *err);

/*
 * The index of trail id (id_type INT64: id; STRING: sid) in the footer's
 * trails, its entry loaded; -1 when the file has no such trail; or a
 * TDB_TRAIL_E* code (all below -30000).
 */
int			tdb_trail_lookup(TdbTrailReader *r, int64_t id, const char *sid,
							 TdbTrailError *err);

/*
 * Footers are decoded once per file version and process and shared by its
 * readers (keyed by the trailer's footer offset, length and CRC, the
 * object's size and ETag; at most 64 MB of decoded footers).  How many
 * footers this process decoded, for tests.
 */
uint64_t	tdb_trail_footer_decodes(void);

/* What the footer cache counts against its bound, for tests. */
uint64_t	tdb_trail_footer_cache_bytes(void);

/* Forget the decoded footers (readers still open keep theirs). */
void		tdb_trail_footer_cache_clear(void);
void		tdb_trail_close(TdbTrailReader *r);

/*
 * Decoded pages shared by the scans of one statement: a join on N trail
 * ids runs N scans of the file, and in space-time order their pages
 * overlap.  A scan given a cache (TdbTrailQuery.page_cache) takes each page
 * it needs from it when there, and leaves each page it decodes in it, so a
 * page is fetched and decoded once for all of them while the bound allows.
 * The bound counts each page's decoded arrays and a pointer per page of
 * the file; the least recently used pages go first.  One scan at a time
 * uses a cache; it belongs to one file version (another footer empties it).
 * Not thread-safe.
 */
typedef struct TdbTrailPageCache TdbTrailPageCache;

typedef struct TdbTrailPageCacheStats
{
	uint64_t	hits;			/* pages a scan took from the cache */
	uint64_t	inserts;		/* pages decoded and kept */
	uint64_t	evictions;		/* pages dropped for room */
	uint64_t	refused;		/* pages too large for the bound, not kept */
	uint64_t	pages;			/* pages held now */
	uint64_t	bytes,			/* held now */
				peak_bytes,
				max_bytes,		/* the bound */
				pool_peak_bytes;	/* its pool's largest total while it grew (0: no pool) */
} TdbTrailPageCacheStats;

/* NULL when out of memory; max_bytes 0 keeps nothing. */
TdbTrailPageCache *tdb_trail_page_cache_create(size_t max_bytes);

/*
 * Caches given one pool (a counter of the bytes all of them hold, zero at
 * first) keep together at most each one's max_bytes: a cache that finds
 * the pool spent evicts its own pages or keeps no more, never another's.
 * The counter must outlive the caches (freeing one gives its bytes back).
 */
void		tdb_trail_page_cache_share(TdbTrailPageCache *c, size_t *pool);
void		tdb_trail_page_cache_stats(const TdbTrailPageCache *c, TdbTrailPageCacheStats *out);
void		tdb_trail_page_cache_free(TdbTrailPageCache *c);

typedef struct TdbTrailQuery
{
	/* trail ids: only these (NULL/0: all); int or string by id_type */
	const int64_t *ids_int;
	const char *const *ids_str;
	int			nids;
	bool		has_time;
	int64_t		time_from, time_to;	/* inclusive, microseconds */
	bool		has_bbox;
	double		xmin, ymin, xmax, ymax;	/* inclusive, degrees */
	uint64_t	limit;			/* 0: no limit */
	/*
	 * The caller may stop before the last row (a LIMIT it could not pass
	 * as limit, a cursor, EXISTS): the scan then announces its pages in
	 * windows that start at 4 pages and double, so that stopping early
	 * leaves little fetched for nothing.  Otherwise (the default) a scan
	 * without ids announces every page it will read at once, up to the
	 * read-ahead bound (32 MB), and has gaps between them bridged from the
	 * first window: one round of concurrent range GETs, not one per window.
	 */
	bool		may_stop_early;
	/*
	 * What the caller does not need (zero: everything): bit c of
	 * skip_columns leaves extra column c NULL, skip_position leaves lon and
	 * lat 0 unless a box needs them (then they are read and returned).  A
	 * version-2 file then fetches only the chunks of the columns asked for.
	 */
	uint64_t	skip_columns;
	bool		skip_position;
	/*
	 * Give each event's extra values where the page holds them
	 * (TdbTrailEvent.cols and index), without copying them into values: the
	 * caller reads only the columns it did not skip (the FDW; a copy of
	 * every column per row was a tenth of a 100-id join's time).
	 */
	bool		values_in_page;
	/*
	 * Pages decoded by earlier scans of the same file (NULL: none): those
	 * found there are neither fetched nor decoded again, and with a query
	 * of trail ids every page not there is fetched in one round of
	 * concurrent requests before the first row.
	 */
	TdbTrailPageCache *page_cache;
	/*
	 * With a page cache and trail ids: how many such scans (lookups, one
	 * id each) the caller expects in all (0: unknown).  When the pages they
	 * would need together are most of the file's candidate pages (space-time
	 * order: pages of many trails), the first scan fetches all of those at
	 * once, one round of concurrent requests instead of one per lookup, if
	 * they fit the pager's read-ahead room.
	 */
	uint32_t	lookups_expected;
	/*
	 * With lookups_expected: the ids all those lookups will ask for, when
	 * the caller knows them (a join's outer VALUES list; int or string by
	 * id_type; NULL/0: not known).  The first scan then fetches exactly
	 * their pages at once, their gaps bridged, if they fit the read-ahead
	 * room; all candidate pages when theirs are a third of the file's or
	 * more (or the file is small).
	 */
	const int64_t *union_ids_int;
	const char *const *union_ids_str;
	int			union_nids;
} TdbTrailQuery;

typedef struct TdbTrailScan TdbTrailScan;

int			tdb_trail_scan_begin(TdbTrailReader *r, const TdbTrailQuery *q,
								 TdbTrailScan **out, TdbTrailError *err);

/*
 * 1 and *ev filled (valid until the next call), 0 at the end, or an error.
 * Only pages whose zone maps intersect the query are fetched; the events
 * returned are exactly those matching the query.
 */
int			tdb_trail_scan_next(TdbTrailScan *s, TdbTrailEvent *ev,
								TdbTrailError *err);

typedef struct TdbTrailScanStats
{
	uint64_t	pages_candidate;	/* pages after the trail id filter */
	uint64_t	pages_read;		/* pages fetched and decoded */
	uint64_t	pages_reused;	/* pages taken decoded from the page cache */
	bool		union_prefetched;	/* this scan fetched every lookup's pages */
	bool		union_exact;	/* ... those of union_ids only */
	uint64_t	pages_pruned;	/* skipped by zone maps */
	uint64_t	events_returned;
	uint64_t	bytes_read;		/* page bytes asked of the pager */
	uint64_t	windows;		/* read-ahead announcements (rounds of range GETs) */
} TdbTrailScanStats;

void		tdb_trail_scan_stats(const TdbTrailScan *s, TdbTrailScanStats *out);
void		tdb_trail_scan_end(TdbTrailScan *s);

/*
 * Check every page of the file (CRC, decode, zone maps match contents,
 * trail index consistent).  Returns 0 or the first error.
 */
int			tdb_trail_verify(TdbTrailReader *r, uint64_t *events,
							 TdbTrailError *err);

#endif							/* TDB_TRAIL_H */
