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

#define TDB_LIBRARY_VERSION "0.1.0"

extern char *tdb_database;
extern int	tdb_publish_interval_ms;
extern int	tdb_reader_pin_timeout_ms;
extern char *tdb_shm_group;
extern char *tdb_shm_name_setting;
extern int	tdb_max_external_readers;
extern int	tdb_trail_memory_cache_kb;

/* ERROR with a hint unless the postmaster preloaded the library. */
extern void tdb_require_preload(void);

/* bgworker/daemon.c */
extern void tdb_daemon_register(void);

#endif							/* TDB_MODULE_TRAFFICDB_H */
