/*-------------------------------------------------------------------------
 *
 * genlog_store.h
 *	  The generation log in trafficdb.generations: writing a publication's
 *	  record and checkpoints, trimming, and replaying the log after a
 *	  restart (docs/write-path.md).  Used by the daemon only, inside its
 *	  transactions, with SPI connected.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TDB_GENLOG_STORE_H
#define TDB_GENLOG_STORE_H

#include "object.h"

/* A traffic state in one map's record order. */
typedef struct TdbLogState
{
	uint64		map_id;
	uint64		count;
	TdbTraffic *traffic;		/* count entries */
	char	  **incidents;		/* count: palloc'd text or NULL */
	uint64		incident_count;
	uint64	   *ids;			/* count: location id of each record (replay only) */
	uint32	   *changed;		/* NULL, or room for count: tdb_log_follow lists there the records */
	uint64		nchanged;		/* of the generation it passes to its callback */
	uint64	   *digest;			/* NULL, or the entries' digest tdb_log_follow keeps up to date */
} TdbLogState;

/* What the checkpoint marker (K) says besides its generation. */
typedef struct TdbLogMapInfo
{
	uint64		map_generation; /* the generation that first published this map */
	int64		map_created_us; /* the map object's created_at_us */
	uint32		map_crc;		/* the map object's header checksum */
	bool		replaced;		/* this map replaced another one at map_generation */
} TdbLogMapInfo;

/* The result of a replay. */
typedef struct TdbReplay
{
	bool		found;			/* the log had a usable checkpoint */
	TdbLogState state;			/* the state after generation last */
	TdbLogMapInfo map;
	uint64		checkpoint;		/* generation of the checkpoint replayed from */
	uint64		older_checkpoint;	/* the one before it, or 0 */
	int64		checkpoint_at_us;	/* its created_at */
	uint64		first;			/* the oldest generation in the log */
	uint64		last;			/* the newest generation replayed */
	int64		last_created_us;	/* its created_at: the object's created_at_us */
	uint64		replayed;		/* D records applied */
	uint64		verified;		/* generations whose object checksum was compared */
	uint64		mismatches;		/* ... and differed */
	uint64		damaged_at;		/* nonzero: replay stopped before this generation */
} TdbReplay;

/*
 * The INCIDENTS section of a traffic object for these entries, setting each
 * entry's incident_off: 4 unused bytes, then length + text of each incident
 * in record order.  Returns a palloc'd blob (NULL if there is none).
 */
extern char *tdb_incident_layout(TdbTraffic *traffic, char **incidents, uint64 count,
								 uint64 incident_count, Size *len);

/*
 * The same layout by difference: inc[0..*ninc) are the records that had an
 * incident at the previous layout, changed[0..nchanged) the records changed
 * since (both ascending; repeats allowed).  Only those are looked at: each
 * whose incident_off moves is set and passed to moved(arg, i, old_off).
 * inc is rewritten with the records that have one now (room for *ninc +
 * nchanged).  O(incidents + changes), the result byte-identical to
 * tdb_incident_layout's.
 */
typedef void (*TdbIncidentMovedFn) (void *arg, uint32 record, uint32 old_off);
extern char *tdb_incident_layout_delta(TdbTraffic *traffic, char **incidents, uint64 count,
									   uint64 incident_count, uint32 *inc, uint64 *ninc,
									   const uint32 *changed, uint64 nchanged,
									   TdbIncidentMovedFn moved, void *arg, Size *len);

/* The header checksum of the traffic object these entries make (scratch buffer). */
extern uint32 tdb_traffic_checksum(uint64 map_id, uint64 generation, int64 created_us,
								   TdbTraffic *traffic, char **incidents, uint64 count,
								   uint64 incident_count);

/* A D record: the entries of records recs[0..n) (ascending), changed at gen. */
extern Size tdb_log_write_delta(uint64 gen, int64 created_us, uint32 object_crc,
								const TdbLogState *s, const uint32 *recs, uint64 n);

/* A checkpoint of the whole state at gen: C parts, then the K marker. */
extern Size tdb_log_write_checkpoint(uint64 gen, int64 created_us, uint32 object_crc,
									 const TdbLogState *s, const TdbLogMapInfo *mi,
									 uint64 part_entries);

/*
 * The oldest generation after last that the log holds as a checkpoint
 * without a D record (a map reload, or a checkpoint after a gap): one a
 * follower reading the D records only would never see (0: none).
 */
extern uint64 tdb_log_checkpoint_alone_after(uint64 last);

/*
 * Before a checkpoint at gen: the log moves on to its next segment if that
 * one is empty and the current one spans a seventh of what the retention
 * settings keep (every checkpoint when they keep nothing), so that a
 * segment starts with a checkpoint.
 */
extern void tdb_log_next_segment(uint64 gen, int retention_s, int retention_generations);

/*
 * Empty the segments whose records are all older than what the retention
 * settings keep and than keep_from_checkpoint (replay's fallback), oldest
 * first, stopping at the first that must stay: by TRUNCATE once every
 * snapshot in the cluster is younger than the trim that found it aged out
 * (a checkpoint later at the soonest), or by_delete at once, deleting its
 * rows.  A segment someone holds a lock on is left for a later trim.
 * Returns the oldest generation left.
 */
extern uint64 tdb_log_trim(uint64 gen, uint64 keep_from_checkpoint, int retention_s,
						   int retention_generations, bool by_delete);

/*
 * Rebuild the state from the newest complete checkpoint and the D records
 * after it.  verify_all: compare the object checksum of every replayed
 * generation (else of the last one only).  Returns false with err set if
 * the log is damaged past its checkpoints (r->damaged_at says where).
 * Memory comes from cxt.
 */
extern bool tdb_log_replay(TdbReplay *r, bool verify_all, MemoryContext cxt, char *err, Size errlen);

/*
 * Apply the D records after *last (at most max; 0 = all), in order and
 * without a gap, to s, advancing *last; cb (may be NULL) after each one,
 * with what its publication recorded.  false with err on a gap or a damaged
 * record (*damaged_at = the generation).  A follower on a standby reads the
 * replicated log this way.
 */
typedef void (*tdb_log_gen_fn) (void *arg, uint64 gen, int64 created_us, bool has_crc, uint32 object_crc);
extern bool tdb_log_follow(TdbLogState *s, uint64 *last, uint64 max, tdb_log_gen_fn cb, void *arg,
						   MemoryContext cxt, uint64 *damaged_at, uint64 *applied, char *err, Size errlen);

/* The newest generation in the log, 0 if it is empty. */
extern uint64 tdb_log_last_generation(void);

/* ---- from genlog_segments.c, for genlog_store.c ---- */

/* The log's segments: partitions trafficdb_log.generations_0 .. _7 of trafficdb.generations (the extension's SQL). */
#define TDB_LOG_SEGMENTS 8

/* The segment records go to: the newest record's (0 for an empty log). */
extern int	tdb_log_current_segment(void);

/* The first column of sql's first row as a bigint, dflt if none or NULL. */
extern uint64 tdb_log_query_u64(const char *sql, int nargs, Oid *types, Datum *vals, uint64 dflt);

#endif							/* TDB_GENLOG_STORE_H */
