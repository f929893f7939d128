/*-------------------------------------------------------------------------
 *
 * shared.h
 *	  State the daemon shares with SQL backends through PostgreSQL's main
 *	  shared memory: requests (load a map, publish now), their results, and
 *	  status figures for the trafficdb.status and trafficdb.readers views.
 *
 * This lives in PostgreSQL's shared memory, not in trafficdb's own objects:
 * it is about this server's processes only and is rebuilt from scratch on
 * a crash-restart, which is right for requests and counters.  The published
 * objects themselves are in src/shm.h's segments.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TDB_MODULE_SHARED_H
#define TDB_MODULE_SHARED_H

#include "postgres.h"

#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/spin.h"

#define TDB_ERRMSG_LEN 1024

typedef enum TdbRequestStatus
{
	TDB_REQ_NONE = 0,
	TDB_REQ_PENDING,
	TDB_REQ_DONE,
	TDB_REQ_FAILED
} TdbRequestStatus;

/* A map load request: the source and its columns, as the caller named them. */
typedef struct TdbMapRequest
{
	Oid			relid;
	Oid			userid;			/* whose privileges read the source */
	NameData	id_column;
	NameData	geom_column;
	NameData	class_column;	/* empty = none */
	NameData	name_column;
	NameData	speed_column;
	NameData	oneway_column;
	NameData	region;			/* load only this region's locations; empty = all */
} TdbMapRequest;

/*
 * Per reader slot, what the daemon observed (for trafficdb.readers): backend
 * slots first, then external ones (which backends do not map).
 */
typedef struct TdbSlotWatch
{
	uint64		pin;			/* pin value last seen, 0 = none */
	TimestampTz since;			/* when that pin stopped naming the active version */
	int32		pid;			/* external: the pid the reader wrote (its namespace) */
	bool		reported;		/* logged as late */
} TdbSlotWatch;

/* partitions of trafficdb.feed (feed_0 .. feed_3) */
#define TDB_FEED_PARTS 4

typedef struct TdbShared
{
	slock_t		mutex;			/* protects everything below but the CV */
	ConditionVariable cv;		/* broadcast when a request completes or a publish happens */
	Latch	   *daemon_latch;
	pid_t		daemon_pid;
	/*
	 * The daemon has finished its first attempt to rebuild and publish since
	 * it started: until then a reader finding nothing published is told that
	 * trafficdb is starting, not that no map is loaded.
	 */
	bool		daemon_started;

	/* publish requests: requested counts up, published catches up */
	uint64		publish_requested;
	uint64		publish_done;
	uint64		publish_failed; /* the last request that could not publish */
	char		publish_error[TDB_ERRMSG_LEN];

	/* map load: one at a time */
	uint64		map_req_seq;	/* incremented by each request */
	uint64		map_done_seq;
	TdbRequestStatus map_status;
	TdbMapRequest map_req;
	char		map_error[TDB_ERRMSG_LEN];
	uint64		map_loaded_count;

	/* status */
	uint64		generation;
	uint64		map_id;
	uint64		locations;
	/*
	 * The published map's extent (its R-tree root box) and mean record box
	 * size, degrees: what the planner needs to guess how many records a box
	 * query finds.  All zero until a map is published.
	 */
	double		map_extent[4];	/* xmin, ymin, xmax, ymax */
	double		map_mean_box[2];	/* width, height */
	double		map_arc_slack_m;	/* tdb_map_arc_slack_m of the map of map_id */
	uint64		map_bytes;
	uint64		traffic_bytes;
	uint64		shm_bytes;
	uint64		shm_huge_bytes;	/* of shm_bytes, what the daemon made of huge pages */
	double		last_map_build_ms;
	double		last_publish_ms;
	uint64		last_publish_entries;	/* traffic entries the last publication copied (all: a whole write) */
	TimestampTz last_publish_at;
	uint64		feed_rows_consumed;
	uint64		feed_rows_rejected;
	double		last_feed_rows_per_sec;
	uint64		publishes;
	uint64		publishes_refused;	/* every version pinned at the time */
	uint64		versions_revoked;	/* pinned past reader_pin_timeout */
	char		last_error[TDB_ERRMSG_LEN];
	TimestampTz last_error_at;	/* when last_error was last set (0: never); it is kept once resolved */

	/*
	 * The region whose map is published (empty: not a region's map), and
	 * whether it is set: feed rows are checked against the map only then.
	 */
	pg_atomic_uint32 map_regional;
	NameData	map_region;

	/* subscriptions: bumped by each committed change of trafficdb.subscriptions */
	pg_atomic_uint64 subs_version;
	uint64		subscriptions;	/* loaded and indexed by the daemon */
	uint64		subscribers;	/* external subscribers (targets: a group counts once) */
	uint64		events_delivered;	/* pushed into subscribers' rings */
	uint64		events_dropped; /* a full ring: dropped, an OVERRUN owed */
	uint64		last_events;	/* events of the last publication */
	double		last_match_ms;
	uint64		match_overruns; /* publications whose matching trafficdb.match_budget_ms cut short */
	uint64		match_records_skipped;	/* changed locations not matched for it */
	uint64		subscriptions_unindexed;	/* over trafficdb.subscription_index_mb: no events */
	uint64		notify_sent;	/* NOTIFYs sent (trafficdb_publish and subscriptions') */
	uint64		notify_dropped; /* not sent: the queue over trafficdb.notify_queue_max_usage, or full */

	/* the feed partition new rows go to (trafficdb._feed_part()): 0 .. TDB_FEED_PARTS - 1 */
	pg_atomic_uint32 feed_part;
	uint64		feed_parts_skipped; /* cycles a partition could not be locked in time */

	/* the generation log */
	uint64		log_first;		/* oldest generation it keeps */
	uint64		log_checkpoint; /* newest checkpoint */
	uint64		changes_from;	/* changes_since(g) answers for g >= changes_from - 1 */
	uint64		map_generation; /* the generation that first published the current map */
	uint64		log_damaged_at; /* nonzero: replay stopped before this generation */
	uint64		replay_generations; /* records replayed at the last start */
	uint64		replay_mismatches;	/* replayed generations not byte-identical */
	double		last_replay_ms;
	uint64		last_log_bytes; /* codec bytes of the last publication's records */

	/* a hot standby's daemon follows the primary's generation log */
	bool		follower;
	uint64		follower_log_max;	/* newest generation in the replicated log */
	int64		follower_applied_at_us; /* created_at of the newest generation published here */
	uint64		follower_rebuilds;	/* rebuilds from a checkpoint (a map reload, a gap) */

	/*
	 * This server holds the lock of the shared memory prefix (the postmaster
	 * since start, or the daemon): what is under the prefix is ours to read.
	 */
	bool		prefix_owned;
	char		prefix_error[TDB_ERRMSG_LEN];

	/*
	 * The prefix the daemon publishes under: trafficdb.shm_name, or private
	 * names (tdb_private_prefix) while another user holds one of its fixed
	 * names.  Backends open what is named here (tdb_live_prefix).
	 */
	char		live_prefix[64];

	uint32		nslots;
	uint32		nbackend_slots;
	TdbSlotWatch slots[FLEXIBLE_ARRAY_MEMBER];
} TdbShared;

extern TdbShared *tdb_shared;

/* Backends' pins, by PGPROC number, in the server's own shared memory. */
struct TdbReaderSlot;
extern struct TdbReaderSlot *tdb_backend_pins;

/* The postmaster's lock on the prefix (inherited by its children), or -1. */
extern int	tdb_prefix_lock_fd;

/* Size of the reader slot array: every PGPROC, then external readers. */
extern uint32 tdb_nbackend_slots(void);
extern uint32 tdb_total_slots(void);

/* The POSIX shared memory prefix in force (trafficdb.shm_name or the default). */
extern const char *tdb_shm_prefix(void);

/*
 * Names the daemon falls back to when another user holds one of the fixed
 * names under tdb_shm_prefix(): "<prefix>-<64 random bits>", made once by the
 * postmaster (so a restarted daemon adopts the same objects) and inherited.
 */
extern char tdb_private_prefix[64];

/* The prefix the daemon publishes under now (TdbShared.live_prefix) into out[64]. */
extern void tdb_live_prefix(char *out);

extern void tdb_shared_request(void);
extern void tdb_shared_startup(void);

#endif							/* TDB_MODULE_SHARED_H */
