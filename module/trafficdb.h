/*-------------------------------------------------------------------------
 *
 * trafficdb.h
 *	  What the PostgreSQL-side components (module, daemon, wrappers) share:
 *	  the settings and the preload check.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TDB_MODULE_TRAFFICDB_H
#define TDB_MODULE_TRAFFICDB_H

#include "postgres_ext.h"

#define TDB_LIBRARY_VERSION "0.1.0"

extern char *tdb_database;
extern int	tdb_publish_interval_ms;
extern int	tdb_reader_pin_timeout_ms;
extern bool tdb_huge_pages;
extern char *tdb_shm_group;
extern char *tdb_shm_name_setting;
extern int	tdb_max_external_readers;
extern int	tdb_trail_memory_cache_kb;
extern int	tdb_trail_page_cache_kb;
extern bool tdb_trail_footer_aggregates;
/* the generation log (bgworker/genlog_store.c) */
extern int	tdb_checkpoint_interval;
extern int	tdb_checkpoint_timeout_s;
extern double tdb_checkpoint_min_changed;
extern int	tdb_checkpoint_part_entries;
extern int	tdb_log_retention_s;
extern int	tdb_log_retention_generations;
extern int	tdb_replay_verify;
extern int	tdb_log_trim_method;
/* the writers' ring (trafficdb_put) */
extern int	tdb_max_writers;
/* subscribers' rings (trafficdb_subscribe) */
extern int	tdb_max_subscribers;
extern int	tdb_subscriber_ring_events;
extern int	tdb_writer_ring_slots;
extern char *tdb_writer_group;
extern int	tdb_writer_drain_interval_ms;
extern int	tdb_stop_batches_ms;
extern int	tdb_feed_lock_timeout_ms;
/* rows of trafficdb.subscriptions per role (subscriptions.c) */
extern int	tdb_max_subscriptions_per_role;
extern int	tdb_match_budget_ms;
extern int	tdb_subscription_index_mb;
extern double tdb_notify_queue_max_usage;
extern int	tdb_max_subscriber_slots_per_role;

#define TDB_REPLAY_VERIFY_FULL 0
#define TDB_REPLAY_VERIFY_LAST 1
#define TDB_LOG_TRIM_TRUNCATE 0
#define TDB_LOG_TRIM_DELETE 1

/* Define every trafficdb.* setting (_PG_init). */
extern void tdb_define_settings(void);

/* True when the postmaster loaded the library through shared_preload_libraries (set by _PG_init). */
extern bool tdb_loaded_at_startup;

/* ERROR with a hint unless the postmaster preloaded the library. */
extern void tdb_require_preload(void);

/*
 * A relation given to SQL function func as argument argname (a regclass or
 * an oid: any number the caller may have made up): an error naming the
 * argument and what it must be (expected, e.g. "a table or view") if no
 * relation has that OID; otherwise it is locked AccessShareLock until the
 * transaction ends (it cannot be dropped while in use) and its relkind is
 * returned.
 */
extern char tdb_relation_arg(Oid relid, const char *func, const char *argname, const char *expected);
/* "a table", "a view", "an index", ...: a relkind in words, for messages. */
extern const char *tdb_relkind_name(char relkind);

#endif							/* TDB_MODULE_TRAFFICDB_H */
