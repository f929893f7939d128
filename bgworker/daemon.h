/*-------------------------------------------------------------------------
 *
 * daemon.h
 *	  The trafficdb daemon as the rest of the module sees it: the one
 *	  public header of bgworker/ (its stages share daemon_internal.h).
 *	  Backends talk to the running daemon through module/shared.h's
 *	  requests, never by calling into it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TDB_BGWORKER_DAEMON_H
#define TDB_BGWORKER_DAEMON_H

#include "postgres.h"

/* Register the daemon's background worker (_PG_init, in the postmaster). */
extern void tdb_daemon_register(void);

/* The background worker's entry point (named in its registration). */
PGDLLEXPORT void tdb_daemon_main(Datum arg);

#endif							/* TDB_BGWORKER_DAEMON_H */
