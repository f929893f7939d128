/*
 * format.h
 *	  Internal constants and encoders of the trail file format, shared by
 *	  the writer, the reader and the tests (docs/trail-format.md).
 */
#ifndef TDB_TRAIL_FORMAT_H
#define TDB_TRAIL_FORMAT_H

#include <string.h>

#include "codec.h"
#include "trail.h"

#define TRAIL_HEADER_MAGIC		"TDBTRAIL"	/* first 8 bytes of the file */
#define TRAIL_TRAILER_MAGIC		0x4C544454u /* "TDTL" in file order */
#define TRAIL_FOOTER_MAGIC		0x46544454u /* "TDTF" */
#define TRAIL_PAGE_MAGIC		0x50544454u /* "TDTP" */
#define TRAIL_PAGE_HEADER_SIZE	16
#define TRAIL_PAGE2_MAGIC		0x32504454u /* "TDP2": version-2 core chunk */
#define TRAIL_CHUNK_CORE		0	/* version-2 chunks of a page */
#define TRAIL_CHUNK_POSITION	1
#define TRAIL_CHUNK_COLUMN0		2	/* extra column c is chunk 2 + c */
#define TRAIL_PAGE_MAX_BYTES	(64u << 20)
/* version 3: a page may hold more events than bytes, up to this many */
#define TRAIL_V3_PAGE_MAX_EVENTS	65536
#define TRAIL_LON_MAX			1800000000	/* 180 degrees, fixed */
#define TRAIL_LAT_MAX			900000000

/*
 * The writer hands column values to the page encoder through this: returns
 * true for NULL, else stores the value's bits (int64, double bits or
 * lexicon id) in *bits when bits is not NULL.
 */
typedef bool (*TrailColumnGetter) (void *arg, uint32_t i, int col, int64_t *bits);

/* Shared by both versions' footer codecs (fields.c). */
bool		trail_get_name(CodecCur *c, char *dst, size_t cap);
bool		trail_get_zone(CodecCur *c, int64_t *tmin, int64_t *tmax, int32_t *xmin,
						   int32_t *ymin, int32_t *xmax, int32_t *ymax);
void		trail_put_zone(CodecBuf *b, int64_t tmin, int64_t tmax, int32_t xmin,
						   int32_t ymin, int32_t xmax, int32_t ymax);
void		trail_put_key(CodecBuf *b, TdbTrailType type, const TdbTrailKey *k);
void		trail_put_schema(CodecBuf *b, const TdbTrailSchema *s);
void		trail_put_lexicon(CodecBuf *b, const TdbTrailFooter *f);
/* The error code of a decoder's "what is wrong": ENOMEM for TRAIL_OOM, else ECORRUPT. */
static inline int
trail_why_code(const char *why)
{
	return strcmp(why, TRAIL_OOM) == 0 ? TDB_TRAIL_ENOMEM : TDB_TRAIL_ECORRUPT;
}

/* How a footer error's message starts: the footer is not called corrupted when memory ran out. */
static inline const char *
trail_footer_why(const char *why)
{
	return trail_why_code(why) == TDB_TRAIL_ENOMEM ? "trail file footer" : "corrupted trail file footer";
}

/* Decoders: NULL or what is wrong (the footer decoders' message). */
const char *trail_get_schema(CodecCur *c, TdbTrailSchema *s, TdbTrailType max_type);
const char *trail_get_lexicon(CodecCur *c, TdbTrailFooter *f, char *arena, size_t *used);
bool		trail_get_key(CodecCur *c, TdbTrailType type, TdbTrailKey *k, char *arena, size_t *used);
char	   *trail_arena_str(char *arena, size_t *used, const uint8_t *sp, size_t sl);
int			trail_key_cmp(TdbTrailType type, const TdbTrailKey *a, const TdbTrailKey *b);

void		trail_trailer_encode(uint8_t *out, const TdbTrailTrailer *t);
void		trail_footer_encode(CodecBuf *b, const TdbTrailFooter *f);
void		trail_page_encode(CodecBuf *b, uint32_t trail, uint32_t n,
							  const int64_t *time, const int32_t *lon,
							  const int32_t *lat, int ncols,
							  const TdbTrailType *types, TrailColumnGetter get,
							  void *arg);

/* ---- version 2 (pages: page2.c; footer and summaries: format2.c) ---- */

/* One page's events as the version-2 encoder takes them. */
typedef struct TrailPage2In
{
	uint32_t	n;
	const uint32_t *trail;		/* each event's trail number, ascending */
	const int64_t *time;		/* non-decreasing within a trail */
	const int32_t *lon;
	const int32_t *lat;
	int			ncols;
	const TdbTrailType *types;
	TrailColumnGetter get;
	void	   *arg;
	int			version;		/* 2, or 3 and 4: columns in colenc.c's encodings */
} TrailPage2In;

/*
 * Appends the page's chunks to b; fills pi's zone map, length and event
 * count, and chunk_len (2 + ncols entries).
 */
void		trail_page2_encode(CodecBuf *b, const TrailPage2In *in, uint32_t *chunk_len,
							   TdbTrailPageInfo *pi);
void		trail_footer2_encode(CodecBuf *b, const TdbTrailFooter *f);
int			trail_footer2_decode(CodecCur *c, const uint8_t *buf, size_t len,
								 const TdbTrailTrailer *t, TdbTrailFooter *f,
								 TdbTrailError *err);
int			trail_page2_decode(const TdbTrailFooter *f, uint32_t pageno, const uint8_t *buf,
							   size_t len, bool skip_position, uint64_t skip_columns,
							   TdbTrailPage *pg, TdbTrailError *err);
/* Folds value bits of a column of the given type into a summary. */
void		trail_stats_add(TdbTrailStats *st, TdbTrailType type, int64_t bits);
bool		trail_stats_equal(TdbTrailType type, const TdbTrailStats *a, const TdbTrailStats *b);
/*
 * A summary as the footers store it (format2.c), count bounded by max_count;
 * scaled (version 3): a float summary whose min and max are exact decimals
 * is stored as them.
 */
void		trail_put_stats(CodecBuf *b, TdbTrailType type, const TdbTrailStats *st, bool scaled);
bool		trail_get_stats(CodecCur *c, TdbTrailType type, uint64_t max_count, bool scaled,
							TdbTrailStats *st);

/* ---- version 3 footer (footer3.c): a head read at open, chunks when needed ---- */

#include "types.h"

/*
 * The byte ranges of page pageno that a scan reads (page2.c): the whole page
 * (version 1), or chunk 0, the positions if need_position and each extra
 * column not in skip_columns; chunks next to each other both in the file and
 * in the page (always, but in version 6) as one range.  pos (if not NULL)
 * gets where each range starts within the page's bytes as the decoder takes
 * them.  Returns the number of ranges, at most 2 + ncolumns.
 */
int			trail_page_ranges(const TdbTrailFooter *f, uint32_t pageno, bool need_position,
							  uint64_t skip_columns, TdbByteRange *out, uint32_t *pos);

/* Reads n exact byte ranges of the file into bufs[i] (each r[i].len bytes). */
typedef int (*TrailRangeRead) (void *arg, const TdbByteRange *r, int n, uint8_t **bufs,
							   TdbTrailError *err);

enum
{
	TRAIL3_TRAILS = 0,			/* chunks of trail entries */
	TRAIL3_PAGES = 1,			/* chunks of page entries */
	TRAIL3_SUMS = 2				/* version 5: one column's summaries of a trail chunk's trails */
};

/*
 * Appends the version-3 footer (trail chunks, page chunks, lexicon, head)
 * to out, whose first byte is at file offset base (the writer flushes its
 * buffer as it goes); sets t's footer offset, length and CRC (the head's).
 * f as for trail_footer2_encode.
 */
void		trail_footer3_encode(CodecBuf *out, uint64_t base, const TdbTrailFooter *f,
								 TdbTrailTrailer *t);
/* Decodes the head (from after its version varint). */
int			trail_footer3_decode_head(CodecCur *c, const uint8_t *buf, size_t len,
									  const TdbTrailTrailer *t, TdbTrailFooter *f,
									  TdbTrailError *err);
void		trail_footer3_release(TdbTrailFooter *f);
/* The columns mask of every column of a schema of nc columns (nc <= 64). */
#define TRAIL_ALL_COLUMNS(nc)	((nc) >= 64 ? ~(uint64_t) 0 : ((uint64_t) 1 << (nc)) - 1)
/*
 * Load the chunks holding entries [lo, hi) of kind (TRAIL3_TRAILS or
 * TRAIL3_PAGES) that are not loaded; for trail entries, with the summaries
 * of the columns in mask cols (bit c: column c) too, in the same read.
 */
int			trail_footer3_load(TdbTrailFooter *f, int kind, uint32_t lo, uint32_t hi, uint64_t cols,
							   TrailRangeRead rd, void *arg, TdbTrailError *err);
/* Load chunks by number (kind's directory order), those not loaded. */
int			trail_footer3_load_chunks(TdbTrailFooter *f, int kind, const uint32_t *chunks, int n,
									  TrailRangeRead rd, void *arg, TdbTrailError *err);
/* The same, and for trail chunks the summaries of the columns in cols (version 5). */
int			trail_footer3_load_summaries(TdbTrailFooter *f, int kind, const uint32_t *chunks, int n,
										 uint64_t cols, TrailRangeRead rd, void *arg,
										 TdbTrailError *err);
/* The same, and with lexicon the lexicon, in the same read. */
int			trail_footer3_load_with(TdbTrailFooter *f, int kind, const uint32_t *chunks, int n,
									uint64_t cols, bool lexicon, TrailRangeRead rd, void *arg,
									TdbTrailError *err);
/* The chunks' sizes from the head (tdb_trail_footer_parts). */
void		trail_footer3_parts(const TdbTrailFooter *f, TdbTrailFooterParts *out);
/* Where the trail chunks begin: past version 5's summary chunks (else the end of the pages). */
uint64_t	trail_footer3_entries_off(const TdbTrailFooter *f);
int			trail_footer3_load_lexicon(TdbTrailFooter *f, TrailRangeRead rd, void *arg,
									   TdbTrailError *err);
/* Every trail and page chunk, the summary chunks of cols (version 5) and, asked, the lexicon, in one read. */
int			trail_footer3_load_entries_all(TdbTrailFooter *f, uint64_t cols, bool lexicon, TrailRangeRead rd,
										   void *arg, TdbTrailError *err);
/* Everything (version 5's summaries when asked), then the checks that need all of it (verify, info). */
int			trail_footer3_load_all(TdbTrailFooter *f, bool summaries, TrailRangeRead rd, void *arg,
								   TdbTrailError *err);
/* Index of a trail id, its chunk loaded; -1: none; or an error. */
int			trail_footer3_find(TdbTrailFooter *f, int64_t id, const char *sid, TrailRangeRead rd,
							   void *arg, TdbTrailError *err);
/* Index of key among trails [lo, hi) (loaded, in id order), or -1. */
int			trail_find_between(const TdbTrailFooter *f, uint32_t lo, uint32_t hi, const TdbTrailKey *k);
/* The trail chunk that would hold an id, from the head alone; -1: before the first. */
int			trail_footer3_chunk_of(const TdbTrailFooter *f, int64_t id, const char *sid);
/* Load the chunks holding these entries of kind (any order, duplicates welcome). */
int			trail_footer3_load_entries(TdbTrailFooter *f, int kind, const uint32_t *entries,
									   uint32_t n, TrailRangeRead rd, void *arg,
									   TdbTrailError *err);
/* The same, and with lexicon the lexicon, in the same read. */
int			trail_footer3_load_entries_lex(TdbTrailFooter *f, int kind, const uint32_t *entries, uint32_t n,
										   bool lexicon, TrailRangeRead rd, void *arg, TdbTrailError *err);
/* Bytes of kind's chunks loaded so far, and how many (tests, EXPLAIN). */
uint64_t	trail_footer3_loaded(const TdbTrailFooter *f, int kind, uint32_t *nloaded);
/* The memory the chunks and the lexicon loaded so far take (the footer cache's bound). */
size_t		trail_footer3_loaded_memory(TdbTrailFooter *f);
/* The directory of kind: n chunks, each one's zone map and entry range. */
uint32_t	trail_footer3_nchunks(const TdbTrailFooter *f, int kind);
void		trail_footer3_chunk(const TdbTrailFooter *f, int kind, uint32_t j, uint32_t *first,
								uint32_t *count, int64_t *tmin, int64_t *tmax, int32_t *box);
/*
 * Before page p (its chunk loaded) is decoded: the trails its runs may name
 * ([*lo, *hi]); once those are loaded, trail_footer3_page_ready checks the
 * page's zone map against its trail's.
 */
void		trail_footer3_page_trails(const TdbTrailFooter *f, uint32_t p, uint32_t *lo, uint32_t *hi);
int			trail_footer3_page_ready(const TdbTrailFooter *f, uint32_t p, TdbTrailError *err);
/* Before trail t's pages (their chunks loaded) are read: its page list against their entries. */
int			trail_footer3_trail_ready(const TdbTrailFooter *f, uint32_t t, TdbTrailError *err);
/* Page buffers and null bitmaps, both versions' page decoders (fields.c). */
bool		trail_page_reserve(TdbTrailPage *pg, uint32_t n, int ncols);
bool		trail_get_null_bitmap(CodecCur *c, uint32_t n, bool present, const uint8_t **bitmap);

/* A value set to "not NULL, zero": fields, not memset (GCC makes a memset per value a rep stos). */
static inline void
trail_value_clear(TdbTrailValue *v)
{
	v->isnull = false;
	v->i = 0;					/* f 0.0 and s NULL too: the members share their bytes */
}

#endif							/* TDB_TRAIL_FORMAT_H */
