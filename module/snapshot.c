/*-------------------------------------------------------------------------
 *
 * snapshot.c
 *	  Pinning published versions from SQL backends (see snapshot.h).
 *
 * A backend uses the reader slot of its PGPROC number, in the server's own
 * shared memory (tdb_backend_pins), so it never has to claim one.  The pin is released at the end of the transaction (commit,
 * abort or prepare) and when a new READ COMMITTED statement wants a newer
 * version; a backend that exits releases it in its exit callback.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "utils/timestamp.h"

#include "module/shared.h"
#include "module/snapshot.h"
#include "module/trafficdb.h"

static TdbReader reader;
static bool reader_open = false;
static TdbSnapshot snap;
static bool snap_held = false;
static LocalTransactionId snap_lxid;
static TimestampTz snap_stmt;
static bool callbacks_registered = false;
static int	snap_users = 0;		/* open scans (cursors) reading the held snapshot */

/* executor nesting, to release a READ COMMITTED pin when the statement ends */
static int	executor_depth = 0;
static ExecutorStart_hook_type prev_executor_start = NULL;
static ExecutorEnd_hook_type prev_executor_end = NULL;

static void
release_snapshot(void)
{
	if (snap_held)
		tdb_reader_release(&reader);
	snap_held = false;
}

static void
snapshot_xact_callback(XactEvent event, void *arg)
{
	(void) arg;
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
			release_snapshot();
			executor_depth = 0;
			snap_users = 0;
			break;
		default:
			break;
	}
}

/* executor depth at the start of each open subtransaction, by nesting level */
static int	depth_at_level[64];

static void
snapshot_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();

	(void) mySubid;
	(void) parentSubid;
	(void) arg;
	if (level < 0 || level >= (int) lengthof(depth_at_level))
		return;
	if (event == SUBXACT_EVENT_START_SUB)
		depth_at_level[level] = executor_depth;
	else if (event == SUBXACT_EVENT_ABORT_SUB)
		executor_depth = depth_at_level[level];	/* the aborted executors never ended */
}

static void
snapshot_exit_callback(int code, Datum arg)
{
	(void) code;
	(void) arg;
	release_snapshot();
	if (reader_open)
		tdb_reader_close(&reader);
	reader_open = false;
}

static void
open_reader(void)
{
	char		err[TDB_ERRLEN];
	int			rc;
	bool		owned;
	char		why[TDB_ERRMSG_LEN];
	char		live[64];

	/* what is under the prefix is ours only while this server holds its lock */
	SpinLockAcquire(&tdb_shared->mutex);
	owned = tdb_shared->prefix_owned;
	strlcpy(why, tdb_shared->prefix_error, sizeof(why));
	SpinLockRelease(&tdb_shared->mutex);
	if (!owned)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("trafficdb's shared memory \"%s\" belongs to another server", tdb_shm_prefix()),
				 errdetail("%s", why[0] ? why : "This server does not hold the prefix lock."),
				 errhint("Set trafficdb.shm_name to a name no other server uses, and restart.")));
	if (MyProc->pgprocno < 0 || (uint32) MyProc->pgprocno >= tdb_nbackend_slots())
		elog(ERROR, "trafficdb: process number %d is beyond the %u reader slots",
			 MyProc->pgprocno, tdb_nbackend_slots());
	/* the daemon's names: trafficdb.shm_name, or private ones if another user holds those */
	tdb_live_prefix(live);
	rc = tdb_reader_open(&reader, live, &tdb_backend_pins[MyProc->pgprocno],
						 TDB_VALIDATE_HEADER, err);
	if (rc == TDB_SHM_ENOENT)
	{
		bool		starting;

		/* the daemon runs and has not made its shared memory yet (after an orderly restart) */
		SpinLockAcquire(&tdb_shared->mutex);
		starting = tdb_shared->daemon_pid != 0 && !tdb_shared->daemon_started;
		SpinLockRelease(&tdb_shared->mutex);
		if (starting)
			ereport(ERROR,
					(errcode(ERRCODE_CANNOT_CONNECT_NOW),
					 errmsg("trafficdb is starting: nothing is published yet"),
					 errdetail("The daemon has started and not yet made its shared memory: it rebuilds the published map and traffic from the generation log, then publishes the last committed generation."),
					 errhint("Retry in a moment; if it does not end, trafficdb.status.last_error and the server log (\"trafficdb\") say why.")));
	}
	if (rc == TDB_SHM_ENOENT)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("trafficdb has published nothing yet"),
				 errdetail("%s", err),
				 errhint("The daemon creates shared memory when it starts; check the server log for \"trafficdb daemon\".")));
	if (rc != TDB_SHM_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("cannot attach to trafficdb's shared memory"),
				 errdetail("%s", err)));
	reader_open = true;
	if (!callbacks_registered)
	{
		RegisterXactCallback(snapshot_xact_callback, NULL);
		RegisterSubXactCallback(snapshot_subxact_callback, NULL);
		before_shmem_exit(snapshot_exit_callback, (Datum) 0);
		callbacks_registered = true;
	}
}

/*
 * The generation readers are served now (the active version of the
 * published objects), without pinning it and without an error: 0 when
 * nothing is published or the objects cannot be attached.  After a restart
 * of the daemon or a crash-restart the objects published before stay and are
 * served at once, while PostgreSQL's shared memory (trafficdb.status) starts
 * from zero until the new daemon publishes: the status reports this one.
 */
uint64
tdb_backend_served_generation(void)
{
	char		err[TDB_ERRLEN];
	bool		owned;

	tdb_require_preload();
	SpinLockAcquire(&tdb_shared->mutex);
	owned = tdb_shared->prefix_owned;
	SpinLockRelease(&tdb_shared->mutex);
	if (!owned)
		return 0;
	if (reader_open && !snap_held && tdb_reader_stale(&reader))
	{
		/* the instance we knew was stopped: look at the current one */
		tdb_reader_close(&reader);
		reader_open = false;
	}
	if (!reader_open)
	{
		if (MyProc->pgprocno < 0 || (uint32) MyProc->pgprocno >= tdb_nbackend_slots())
			return 0;
		if (tdb_reader_open(&reader, tdb_shm_prefix(), &tdb_backend_pins[MyProc->pgprocno],
							TDB_VALIDATE_HEADER, err) != TDB_SHM_OK)
			return 0;
		reader_open = true;
		if (!callbacks_registered)
		{
			RegisterXactCallback(snapshot_xact_callback, NULL);
			RegisterSubXactCallback(snapshot_subxact_callback, NULL);
			before_shmem_exit(snapshot_exit_callback, (Datum) 0);
			callbacks_registered = true;
		}
	}
	if (tdb_reader_stale(&reader))
		return 0;
	return TDB_ACTIVE_GEN(atomic_load_explicit(&reader.ctl->active, memory_order_acquire));
}

TdbReader *
tdb_backend_reader(void)
{
	tdb_require_preload();
	if (!reader_open)
		open_reader();
	return &reader;
}

const TdbSnapshot *
tdb_backend_snapshot(void)
{
	char		err[TDB_ERRLEN];
	int			rc;

	tdb_require_preload();
	if (snap_held)
	{
		/*
		 * Same statement, a transaction-wide snapshot, or a scan (an open
		 * cursor) still reading this version: keep it.
		 */
		if (snap_lxid == MyProc->lxid &&
			(IsolationUsesXactSnapshot() || snap_users > 0 ||
			 snap_stmt == GetCurrentStatementStartTimestamp()))
		{
			if (tdb_reader_revoked(&reader, &snap))
			{
				uint64		gen = snap.generation;

				release_snapshot();
				ereport(ERROR,
						(errcode(ERRCODE_SNAPSHOT_TOO_OLD),
						 errmsg("trafficdb generation " UINT64_FORMAT " is no longer available to this transaction", gen),
						 errdetail("It was superseded more than trafficdb.reader_pin_timeout (%d ms) ago and released, so that publication goes on.",
								   tdb_reader_pin_timeout_ms),
						 errhint("Start a new transaction, or keep REPEATABLE READ transactions shorter than trafficdb.reader_pin_timeout.")));
			}
			return &snap;
		}
		release_snapshot();
	}
	if (!reader_open)
		open_reader();
	rc = tdb_reader_acquire(&reader, &snap, err);
	if (rc == TDB_SHM_ESTALE)
	{
		/* the instance we knew was stopped; attach to the current one */
		tdb_reader_close(&reader);
		reader_open = false;
		open_reader();
		rc = tdb_reader_acquire(&reader, &snap, err);
	}
	if (rc == TDB_SHM_EREVOKED)
		ereport(ERROR,
				(errcode(ERRCODE_SNAPSHOT_TOO_OLD),
				 errmsg("could not pin a trafficdb version: each was revoked while attaching"),
				 errdetail("%s", err)));
	if (rc == TDB_SHM_EEMPTY)
	{
		bool		started;

		SpinLockAcquire(&tdb_shared->mutex);
		started = tdb_shared->daemon_started;
		SpinLockRelease(&tdb_shared->mutex);
		if (!started)
			ereport(ERROR,
					(errcode(ERRCODE_CANNOT_CONNECT_NOW),
					 errmsg("trafficdb is starting: nothing is published yet"),
					 errdetail("The daemon is rebuilding the published map and traffic from the generation log after a start or restart; it publishes the last committed generation when done."),
					 errhint("Retry in a moment; if it does not end, trafficdb.status.last_error and the server log (\"trafficdb\") say why.")));
	}
	if (rc == TDB_SHM_EEMPTY)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("trafficdb has no map loaded"),
				 errhint("Load one with SELECT trafficdb.load_map('roads', 'id', 'geom').")));
	if (rc != TDB_SHM_OK)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("cannot read trafficdb's published objects"),
				 errdetail("%s", err)));
	snap_held = true;
	snap_lxid = MyProc->lxid;
	snap_stmt = GetCurrentStatementStartTimestamp();
	return &snap;
}

int64
tdb_backend_find_location(uint64 id)
{
	bool		was_held = snap_held;
	const TdbSnapshot *s = tdb_backend_snapshot();
	int64		rec = tdb_map_find(s->map, id);

	if (!was_held)
		release_snapshot();
	return rec;
}

static void
snapshot_executor_start(QueryDesc *queryDesc, int eflags)
{
	executor_depth++;
	PG_TRY();
	{
		if (prev_executor_start)
			prev_executor_start(queryDesc, eflags);
		else
			standard_ExecutorStart(queryDesc, eflags);
	}
	PG_CATCH();
	{
		executor_depth--;
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/*
 * When the outermost statement ends, a READ COMMITTED backend has no reason
 * to keep its version: release it, so that a session idle in a transaction
 * holds nothing back.  REPEATABLE READ keeps it to the end of the
 * transaction, by design.
 */
static void
snapshot_executor_end(QueryDesc *queryDesc)
{
	if (prev_executor_end)
		prev_executor_end(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
	if (executor_depth > 0)
		executor_depth--;
	if (executor_depth == 0 && snap_held && snap_users == 0 && !IsolationUsesXactSnapshot())
		release_snapshot();
}

void
tdb_snapshot_hooks(void)
{
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = snapshot_executor_start;
	prev_executor_end = ExecutorEnd_hook;
	ExecutorEnd_hook = snapshot_executor_end;
}

/*
 * A scan's use of the snapshot ends when its executor memory goes away:
 * at the normal end of the query, but also when an error or a rolled-back
 * savepoint drops the portal without ending the scan.
 */
static void
scan_memory_gone(void *arg)
{
	(void) arg;
	if (snap_users > 0)
		snap_users--;
}

const TdbSnapshot *
tdb_backend_snapshot_for_scan(MemoryContext scan_cxt)
{
	const TdbSnapshot *s = tdb_backend_snapshot();
	MemoryContextCallback *cb = MemoryContextAllocZero(scan_cxt, sizeof(MemoryContextCallback));

	cb->func = scan_memory_gone;
	MemoryContextRegisterResetCallback(scan_cxt, cb);
	snap_users++;
	return s;
}
