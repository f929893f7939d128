/*
 * genlog.h
 *	  The generation log's record codec ("TDBG", docs/design-write-path.md
 *	  section 2.2): the changed traffic entries of one publication (a D
 *	  record) or a part of the whole state (a C checkpoint part), as bytes
 *	  that every node decodes the same way.  Columnar, so that PostgreSQL's
 *	  column compression finds the runs.
 *
 * Issue 16, step 1: the codec only.  The daemon does not write the log yet
 * (see the design's plan); this is what it and its replay will use.  No
 * PostgreSQL headers: the daemon, tools and tests share it.
 */
#ifndef TDB_GENLOG_H
#define TDB_GENLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TDB_GENLOG_MAGIC		0x47424454u	/* "TDBG" in file order */
#define TDB_GENLOG_VERSION		1
#define TDB_GENLOG_HEADER_SIZE	48
#define TDB_GENLOG_DELTA		'D'
#define TDB_GENLOG_CHECKPOINT	'C'
#define TDB_GENLOG_MAX_INCIDENT	(1u << 20)	/* bytes of one incident text */

/* Which fields an entry carries (the others are unknown / absent). */
#define TDB_GENLOG_HAS_SPEED		0x01
#define TDB_GENLOG_HAS_FREE_FLOW	0x02
#define TDB_GENLOG_HAS_CONGESTION	0x04
#define TDB_GENLOG_HAS_CONFIDENCE	0x08
#define TDB_GENLOG_HAS_INCIDENT		0x10
#define TDB_GENLOG_HAS_FLAGS		0x20
#define TDB_GENLOG_PRESENT_MASK		0x3F

typedef struct TdbGenlogHeader
{
	char		kind;			/* TDB_GENLOG_DELTA or TDB_GENLOG_CHECKPOINT */
	uint8_t		flags;			/* 0 */
	uint64_t	generation;
	uint64_t	map_id;
	uint64_t	count;			/* locations of the map */
	uint32_t	n;				/* entries */
	uint32_t	first_record;	/* C: the part's first record; D: 0 */
	int64_t		time_base_us;	/* the entries' smallest observed time (encoder sets it) */
} TdbGenlogHeader;

/* One location's traffic as the log carries it: values, never offsets. */
typedef struct TdbGenlogEntry
{
	uint32_t	record;			/* index in the map; C: first_record + i */
	uint8_t		present;		/* TDB_GENLOG_HAS_* */
	int64_t		observed_us;	/* observation time (Unix microseconds) */
	float		speed_kmh;		/* bit pattern kept (NaN payloads too) */
	float		free_flow_kmh;
	uint8_t		congestion;
	uint8_t		confidence;
	uint16_t	flags;
	const char *incident;		/* not NUL-terminated; decode: points into the record */
	uint32_t	incident_len;
	uint64_t	changed_gen;	/* C only (D: the record's generation) */
	uint64_t	id;				/* C only: the location id, to remap onto another map */
} TdbGenlogEntry;

/*
 * Encode: h->kind, generation, map_id, count and first_record are the
 * caller's; n and time_base_us are set from the entries.  D entries must
 * have strictly ascending records below count; C entries are records
 * first_record .. first_record + n - 1 in order.  Returns a malloc'd
 * buffer (*len bytes), or NULL with a sentence in err (TDB_GENLOG_ERRLEN).
 */
#define TDB_GENLOG_ERRLEN 256
uint8_t    *tdb_genlog_encode(TdbGenlogHeader *h, const TdbGenlogEntry *e, uint32_t n,
							  size_t *len, char *err);

/*
 * The same, from entries the caller makes a slice at a time: get(arg,
 * first, n, buf) returns entries first .. first + n - 1, written into buf
 * (room for n) or anywhere else that stays valid until the next call.  It
 * is called twice for each slice, once when there is one slice (n at most
 * 4,096: what it returned is used for both passes).  The record starts front bytes into the
 * buffer returned (room for the caller's own header); *len excludes them.
 */
typedef const TdbGenlogEntry *(*TdbGenlogEntries) (void *arg, uint32_t first, uint32_t n,
												   TdbGenlogEntry *buf);
uint8_t    *tdb_genlog_encode_from(TdbGenlogHeader *h, uint32_t n, TdbGenlogEntries get, void *arg,
								   size_t front, size_t *len, char *err);

/*
 * Decode bytes from anywhere (a table, a replica, a fuzzer): everything is
 * checked before use.  *entries is malloc'd (free it); its incident
 * pointers point into buf.  Returns false with a sentence in err.
 */
bool		tdb_genlog_decode(const uint8_t *buf, size_t len, TdbGenlogHeader *h,
							  TdbGenlogEntry **entries, char *err);

#endif							/* TDB_GENLOG_H */
