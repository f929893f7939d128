/*-------------------------------------------------------------------------
 *
 * daemon_internal.h
 *	  The daemon's state and the interfaces between its stages: private to
 *	  bgworker/ (module/ reaches the daemon through bgworker/daemon.h only).
 *
 * The daemon is one background worker (bgworker/daemon.c, its main loop);
 * the state it holds between cycles is the one DaemonState D below, which
 * every stage reads and changes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TDB_BGWORKER_DAEMON_INTERNAL_H
#define TDB_BGWORKER_DAEMON_INTERNAL_H

#include "postgres.h"

#include <signal.h>

#include "datatype/timestamp.h"
#include "utils/array.h"

#include "bgworker/genlog_store.h"
#include "module/shared.h"
#include "object.h"
#include "ring/ring.h"
#include "subfilter.h"
#include "subring/subring.h"
#include "writer.h"

#define UNIX_TO_PG_US ((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

/* What the daemon holds between cycles. */
typedef struct DaemonState
{
	TdbWriter	writer;
	bool		writer_open;
	uint64		generation;		/* last published (or adopted) */

	/* the current map */
	uint32		map_seg;
	void	   *map_addr;
	TdbMapView	map;
	bool		have_map;

	/* working traffic, in map record order */
	TdbTraffic *traffic;
	int64	   *win_seq;		/* feed seq of each entry's value: ties on observed_at go to the later row */
	char	  **incidents;		/* per record, palloc'd text or NULL */
	uint64		incident_count;
	bool		dirty;			/* changes not yet published */
	bool		offsets_zero;	/* every entry's incident_off is 0 (no incident laid out) */
	uint64		work_id;		/* changes with the working arrays (set_daemon_working): never reused */
	char		refusal[TDB_ERRMSG_LEN];	/* why the last publication was refused */

	/* records changed since the last committed log record (each once) */
	uint32	   *pend;
	uint8	   *pend_bit;
	uint64		npend;

	/* the generation log */
	uint64		log_last;		/* newest generation committed in it */
	uint64		log_first;		/* oldest it keeps */
	uint64		ckpt_gen;		/* newest checkpoint */
	uint64		logged_since_ckpt;	/* entries in the D records after it */
	TimestampTz ckpt_at;
	bool		need_checkpoint;	/* a new map: the next record must be a checkpoint */
	TdbLogMapInfo mapinfo;		/* the current map's first generation, time, checksum */
	NameData	region;			/* the region whose map it is (empty: the whole source) */

	/* subscriptions (trafficdb.subscriptions), indexed for the current map */
	TdbSubFilter *subs;
	uint32	   *subs_events;	/* per filter: events of the publication being prepared */
	uint32		nsubs;
	TdbSubIndex subix;			/* the SQL rows someone receives (filters 0 .. nsql - 1) */
	TdbSubIndex tix;			/* the targets (filters nsql ..) */
	uint64		sql_loaded;		/* bumped at each load of the rows */
	uint64		sqlix_loaded;	/* subix: of that load ... */
	uint64		sqlix_map_id;	/* ... that map ... */
	bool		sqlix_taps;		/* ... with taps or not */
	MemoryContext subs_cxt;
	uint64		subs_version;	/* of tdb_shared->subs_version, when loaded */
	uint64		subs_map_id;	/* the map subix was built for */
	uint32		last_pub_seg;	/* traffic object of the last generation published ... */
	uint64		last_pub_map_id;	/* ... for this map (0: none) */

	/*
	 * External subscribers (trafficdb_subscribe): <prefix>.subs, one slot
	 * each.  A subscriber outside a group is a target of its own; the slots
	 * of one group make one target, with the filter of its lowest slot.  The
	 * matcher's filters are the SQL subscriptions (D.nsql of them) followed
	 * by one per target.
	 */
	TdbSubring	subring;
	bool		subring_open;
	bool		subring_lost;	/* closed because it was damaged: made anew at the next sweep */
	bool	   *slot_live;		/* attached, with a valid filter */
	TdbSubFilter *slot_filter;
	TdbSubFilterStore *slot_store;
	uint64	   *slot_group;
	uint32	   *slot_gmode;
	bool		targets_dirty;	/* slots changed: index again */
	TdbSubFilter *sql_subs;		/* in subs_cxt */
	bool	   *sql_notify;
	char	  **sql_channel;	/* NOTIFY channel of each notify one: trafficdb_subscription_<id>_<notify_key> */
	uint64	   *sql_owed_from;	/* per SQL subscription: first generation its NOTIFYs missed (0: none) */
	bool	   *sql_left_out;	/* per filter of subs: over trafficdb.subscription_index_mb */
	bool	   *sql_left_told;	/* ... and its notify subscription told so (once per index) */
	uint32		nsql;
	uint64		sql_map_id;		/* the map the SQL filters' ids were checked against */
	int32	   *target_first;	/* per target: its lowest slot */
	uint32	   *target_rr;		/* per target: round-robin position */
	uint32		ntargets;
	/* taps: targets given the events of every SQL subscription (TDB_SUB_ALL_SQL) */
	int32	   *tap_first;
	uint32	   *tap_rr;
	uint32		ntaps;
	/* the events of the generation being prepared, delivered once it is published */
	struct PendingEvent *ev;
	uint64		nev,
				evcap;
	uint64		sub_gap_from;	/* a generation whose events could not be made (0: none) */
	bool		unpublished;	/* a committed generation readers have not been given */

	/* the writers' ring (trafficdb_put) */
	TdbRing		ring;
	bool		ring_open;
	TimestampTz ring_active_at; /* the last drain that found something (idle.c sleeps after a while) */
	bool		sync_served;	/* the last cycle acknowledged TRAFFICDB_SYNC writers (idle.c) */
	/*
	 * An end of batch whose generation failed: the next attempt not before
	 * batch_retry_at, the wait doubling from 10 ms to 1 s while they fail
	 * (putdrain.c), so that a lane stopped at an end does not make a failing
	 * generation every drain for as long as the failure lasts
	 */
	TimestampTz batch_retry_at;
	int			batch_backoff_ms;
	uint64		put_rejected;	/* updates for unknown locations */
	uint64		put_applied;
	uint32		nput_rejects;	/* waiting for feed_rejects */
	uint64		put_rejects_unfiled;	/* beyond put_reject_id's room: filed as one summary row */
	int64		put_reject_id[256];
	int64		put_reject_ticket[256];
	uint32		put_reject_lane[256];

	/* a publication prepared in this transaction, made once it commits */
	struct
	{
		bool		ready;
		uint64		gen;
		uint32		seg;
		int64		created_us;
		int64		published_us;	/* when it was made visible (events carry it) */
		Size		traffic_bytes;
		uint64		entries;		/* entries copied into the buffer */
		uint64		logged;			/* entries in its D record */
		bool		checkpoint;
		uint64		log_first;
		Size		log_bytes;
	}			pub;

	/* the names published under (see tdb_live_prefix) */
	char		prefix[64];
	bool		private_names;	/* another user holds a fixed name under tdb_shm_prefix() */
	char		taken[TDB_ERRMSG_LEN];	/* which, and whose */
	TimestampTz names_check_at; /* when to see whether it is free again */
	int			names_check_ms; /* back-off: doubles up to NAMES_CHECK_MAX_MS */
	bool		names_moving;	/* free again: stop, and start again under them */
	int			private_picks;	/* private names found taken, picked anew */
	uint64		skipped_reported;	/* segment names found taken, already logged */

	/* reader events already reported */
	uint64		revoked_reported;
	uint64		rebuilt_reported;
	uint64		repaired_reported;	/* D.writer.slots_repaired already reported */

	MemoryContext cxt;			/* lives as long as the daemon */
} DaemonState;

typedef struct PendingEvent
{
	uint32		filter;
	uint32		record;
	uint16		kind;
} PendingEvent;

extern DaemonState D;

/* ---- daemon_state.c: the state and the helpers every stage uses ---- */

/* A hot standby's daemon follows the primary (bgworker/follower.c). */
extern bool follower_mode;
/* in a commit's wait for the synchronous standby (daemon_sigterm cancels it) */
extern volatile sig_atomic_t in_commit;
/* the last commit was not confirmed by the standby: SYNC writers are not told */
extern bool commit_unconfirmed;

extern int64 now_us(void);
extern void set_last_error(const char *msg);
extern void report_damage(const char *segment, const char *suffix, const char *damage, const char *group,
						  const char *outcome, const char *detail);
extern gid_t shm_gid(void);
/* daemon_state.c: a SIGHUP, for the primary's loop and the follower's */
extern void reload_settings(void);
extern void begin_tx(const char *what);
extern void commit_tx(void);
extern char *postgis_schema(void);
extern bool extension_installed(void);
extern void note_started(void);

/* ---- working.c: the working traffic ---- */

/* Working traffic for a new map: what ids still match keep their values. */
typedef struct WorkingTraffic
{
	TdbTraffic *traffic;
	int64	   *win_seq;
	char	  **incidents;
	uint64		incident_count;
	uint32	   *pend;
	uint8	   *pend_bit;
} WorkingTraffic;

extern void remap_traffic(const TdbMapView *newmap, uint64 old_count, const uint64 *old_ids,
						  const TdbTraffic *old_traffic, char **old_incidents, WorkingTraffic *out);
extern void free_working(WorkingTraffic *w, uint64 count);
extern void set_daemon_working(const WorkingTraffic *w);
extern int	cmp_uint32(const void *a, const void *b);	/* qsort of uint32 */
/* apply_traffic(): bgworker/working.h (inline: once per update) */

/* ---- feed.c: feed intake ---- */

/* Feed rows (and writers' updates) for feed_rejects, gathered in one transaction. */
typedef struct Rejects
{
	ArrayBuildState *seq,
			   *id,
			   *reason;
	uint64		n;
} Rejects;

extern void reject(Rejects *rj, int64 seq, int64 id, const char *reason);
extern void persist_rejects(Rejects *rj);
extern uint64 absorb_feed(uint64 gen, bool all);

/* ---- putdrain.c: the writers' ring ---- */

extern void ring_committed(uint64 gen);
extern void ring_set_state(uint32 state);
extern void persist_put_rejects(void);
extern void open_ring(void);
extern bool drain_ring(void);
extern bool ring_batch_ended(void);
extern bool ring_undrained(void);
extern void ring_release_batches(void);
extern void batch_cycle_done(bool committed);
extern long batch_retry_wait_ms(long wait_ms);

/* ---- idle.c: the daemon's waits ---- */

extern void open_bell(void);
extern long ring_wait_ms(long wait_ms);
extern void daemon_wait(long wait_ms);

/* ---- subscribers.c: external subscribers ---- */

/*
 * Does the live subscriber in slot sl take events?  A member that asked for
 * none (TDB_SUB_NONE: it only makes or answers requests) is a member of its
 * group for requests, never for events: it neither gives the group its
 * filter nor gets any of its events (it would never read them).
 */
static inline bool
takes_events(uint32 sl)
{
	return D.slot_live[sl] && D.slot_filter[sl].area != TDB_SUB_NONE;
}

extern void open_subring(void);
extern void sweep_subscribers(void);
extern void deliver_events(void);
extern void subring_remove_guarded(void *p);

/* ---- matching.c: subscription matching and NOTIFYs ---- */

extern void refresh_subscriptions(void);
extern void rebuild_subscription_index(void);
extern void owe_notifications(uint64 gen);
extern void match_subscriptions(bool prev_unpublished);
extern void send_notifications(uint64 gen);
extern bool subscriptions_stale(void);
extern void subscriptions_tx(void *p);

/* ---- publish.c: publication and the generation log ---- */

/*
 * Run fn inside its own transaction; on ERROR, abort it, log, keep the
 * message for the caller and return false.  The daemon survives errors in
 * one request or one cycle.
 */
typedef void (*TxFn) (void *arg);
extern bool run_in_tx(const char *what, TxFn fn, void *arg, char *errbuf);

extern TdbLogState daemon_log_state(void);
extern void prepare_generation(uint64 gen);
extern bool have_log_end(void);
extern void follower_publish(void *arg, uint64 gen, int64 created_us, bool has_crc, uint32 object_crc);

/* ---- trafficwrite.c: writing traffic objects in O(changes) ---- */

/*
 * Write the working traffic as generation gen, made at created_us, into a
 * free traffic buffer (not published): touched lists the records changed
 * since the previous call (NULL: not known; repeats allowed).  Sets *seg,
 * *bytes (the object's size) and *entries (entries copied: count when written
 * whole); returns its checksum.  ERROR when no buffer.
 */
extern uint32 write_traffic_object(uint64 gen, int64 created_us, const uint32 *touched, uint64 ntouched,
								   uint32 *seg, Size *bytes, uint64 *entries);

/* ---- mapsource.c: the map source reader ---- */

/* What a read of the map source loaded and skipped. */
typedef struct LoadCounts
{
	uint64		loaded;
	uint64		null_id;
	uint64		null_geom;
	uint64		not_linestring;
	uint64		bad_points;
	char		first_bad[TDB_ERRLEN];
} LoadCounts;

extern TdbMapBuilder *read_map_source(const TdbMapRequest *req, LoadCounts *counts);

/* ---- maploader.c: map loading ---- */

/* A map load (map_load_tx) or the rebuild at start (startup_tx): its request and result. */
typedef struct MapLoadArg
{
	TdbMapRequest req;
	bool		record_source;
	uint64		count;
} MapLoadArg;

/* What the last map load skipped, for its caller ("" = nothing). */
extern char map_warning[TDB_ERRMSG_LEN];
extern void map_load_tx(void *p);
extern void startup_tx(void *p);

/* ---- sweeps.c: readers and taken names ---- */

/* checks whether taken fixed names are free again: first after, then at most every */
#define NAMES_CHECK_FIRST_MS	10000
#define NAMES_CHECK_MAX_MS		300000

extern void watch_readers(void);
extern bool names_free_again(void);
extern void report_skipped_names(void);

/* ---- follower.c: the follower's replay ---- */

extern void follower_loop(void);

#endif							/* TDB_BGWORKER_DAEMON_INTERNAL_H */
