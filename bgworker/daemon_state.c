/*-------------------------------------------------------------------------
 *
 * daemon_state.c
 *	  The daemon's state (D) and the small helpers every stage of it uses:
 *	  the clock, status.last_error, transactions, what is installed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <grp.h>

#include "access/xact.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "replication/syncrep.h"
#include "replication/walsender.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "bgworker/daemon_internal.h"
#include "module/trafficdb.h"

DaemonState D;

/* ---- small helpers ------------------------------------------------------------- */

/* After a SIGHUP (primary and follower): the configuration file again, and the writer's settings from it. */
void
reload_settings(void)
{
	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
	D.writer.pin_timeout_us = (int64) tdb_reader_pin_timeout_ms * 1000;
	D.writer.huge_pages = tdb_huge_pages;
}

int64
now_us(void)
{
	TimestampTz now = GetCurrentTimestamp();

	/* PostgreSQL timestamps count from 2000-01-01 */
	return (int64) now + UNIX_TO_PG_US;
}

void
set_last_error(const char *msg)
{
	SpinLockAcquire(&tdb_shared->mutex);
	strlcpy(tdb_shared->last_error, msg, TDB_ERRMSG_LEN);
	tdb_shared->last_error_at = GetCurrentTimestamp();
	SpinLockRelease(&tdb_shared->mutex);
}

/*
 * A segment a group may write was found damaged (damage: how): a WARNING
 * and status.last_error name it, what was found and what the daemon did
 * (outcome), and the group whose members can write it.
 */
void
report_damage(const char *segment, const char *suffix, const char *damage, const char *group,
			  const char *outcome, const char *detail)
{
	char		msg[TDB_ERRMSG_LEN];

	snprintf(msg, sizeof(msg), "%s %s.%s was damaged (%s) by a process with write access to it (a member of %s)%s",
			 segment, D.prefix, suffix, damage, group, outcome);
	ereport(WARNING,
			(errmsg("trafficdb: %s", msg),
			 errdetail("%s", detail),
			 errhint("Check which members of %s write to %s.%s.", group, D.prefix, suffix)));
	set_last_error(msg);
}

gid_t
shm_gid(void)
{
	struct group *g;

	if (tdb_shm_group == NULL || tdb_shm_group[0] == '\0')
		return (gid_t) -1;
	g = getgrnam(tdb_shm_group);
	if (g == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("trafficdb.shm_group names group \"%s\", which does not exist",
						tdb_shm_group),
				 errhint("Create the group, or set trafficdb.shm_group to '' for owner-only access.")));
	return g->gr_gid;
}

void
begin_tx(const char *what)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, what);
}

/*
 * A commit waits for the synchronous standbys (synchronous_standby_names),
 * like any backend's.  A backend asked to stop gives that wait up (its
 * transaction stays committed here); the daemon must too, or a server whose
 * standby is gone would never stop: a stop request during a commit cancels
 * the wait, and SYNC writers are then not told that the generation
 * committed (commit_unconfirmed): they learn that the server stopped.
 */
volatile sig_atomic_t in_commit = false;	/* in a wait for the standby */
bool commit_unconfirmed = false;

void
commit_tx(void)
{
	SPI_finish();
	PopActiveSnapshot();
	in_commit = true;
	if (ShutdownRequestPending)
		QueryCancelPending = true;
	CommitTransactionCommand();
	in_commit = false;
	/* a stop may have cut the wait short: the commit is local, maybe not yet on the standby */
	commit_unconfirmed = ShutdownRequestPending && SyncRepRequested();
	if (ShutdownRequestPending)
		QueryCancelPending = false;
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* The schema PostGIS is installed in, quoted, or NULL if it is not installed. */
char *
postgis_schema(void)
{
	if (SPI_execute("SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_extension e "
					"JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace "
					"WHERE e.extname = 'postgis'", true, 1) != SPI_OK_SELECT || SPI_processed == 0)
		return NULL;
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}

bool
extension_installed(void)
{
	/* a catalog index lookup, not a planned query: this runs at every cycle */
	return OidIsValid(get_extension_oid("trafficdb", true));
}

/* ---- following the primary (a hot standby) ------------------------------------- */

/*
 * On a hot standby the daemon is a follower: it writes nothing, rebuilds
 * the map and the traffic from the replicated generation log and publishes
 * the primary's generations with their numbers, each object written with
 * its recorded created_at and checked against its recorded checksum, so
 * that readers here see byte for byte what readers of the primary saw.
 */
bool follower_mode = false;

/*
 * The first rebuild attempt since the daemon started is over (published, or
 * nothing to publish, or failed: status.last_error says why): readers that
 * find nothing published are told so, no longer that trafficdb is starting.
 */
void
note_started(void)
{
	SpinLockAcquire(&tdb_shared->mutex);
	tdb_shared->daemon_started = true;
	SpinLockRelease(&tdb_shared->mutex);
}
