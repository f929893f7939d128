/*-------------------------------------------------------------------------
 *
 * shared.c
 *	  The daemon/backend shared state in PostgreSQL's main shared memory
 *	  (see shared.h), and the name of trafficdb's own shared memory.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "access/twophase.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"

#include "module/shared.h"
#include "module/trafficdb.h"
#include "writer.h"

TdbShared  *tdb_shared = NULL;

static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static void tdb_postmaster_exit(int code, Datum arg);
static shmem_request_hook_type prev_shmem_request_hook = NULL;

/*
 * Backends use the slot of their PGPROC number, so there is one backend slot
 * for every PGPROC the server can have.
 */
uint32
tdb_nbackend_slots(void)
{
	return (uint32) (MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts);
}

uint32
tdb_total_slots(void)
{
	return tdb_nbackend_slots() + (uint32) tdb_max_external_readers;
}

const char *
tdb_shm_prefix(void)
{
	static char prefix[64];

	if (tdb_shm_name_setting != NULL && tdb_shm_name_setting[0] != '\0')
		return tdb_shm_name_setting;
	if (prefix[0] == '\0')
		snprintf(prefix, sizeof(prefix), "/trafficdb.%d", PostPortNumber);
	return prefix;
}

static Size
tdb_shared_size(void)
{
	return add_size(offsetof(TdbShared, slots),
					mul_size(tdb_total_slots(), sizeof(TdbSlotWatch)));
}

static void
tdb_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(tdb_shared_size());
}

static void
tdb_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	tdb_shared = ShmemInitStruct("trafficdb", tdb_shared_size(), &found);
	if (!found)
	{
		memset(tdb_shared, 0, tdb_shared_size());
		SpinLockInit(&tdb_shared->mutex);
		ConditionVariableInit(&tdb_shared->cv);
		tdb_shared->nslots = tdb_total_slots();
		tdb_shared->nbackend_slots = tdb_nbackend_slots();
	}
	LWLockRelease(AddinShmemInitLock);

	/*
	 * In the postmaster, at start and after every crash-restart, before any
	 * backend exists: pins left in backend slots by processes that died are
	 * stale.  From here on the postmaster owns its port, so this is also
	 * the place to arrange the cleanup at exit (not _PG_init, which runs
	 * before the port is bound: a second server failing to start on the same
	 * port must not touch the first one's shared memory).
	 */
	if (!IsUnderPostmaster)
	{
		static bool exit_hook_registered = false;

		tdb_writer_clear_backend_pins(tdb_shm_prefix(), tdb_nbackend_slots());
		if (!exit_hook_registered)
		{
			on_proc_exit(tdb_postmaster_exit, (Datum) 0);
			exit_hook_registered = true;
		}
	}
}

/*
 * The postmaster exits only on a shutdown (a crash-restart keeps it alive):
 * tell external readers the instance is gone and free the shared memory
 * names, if the instance is this server's.  After a kill -9 of the
 * postmaster nothing runs here; the next daemon adopts or replaces what is
 * left.
 */
static void
tdb_postmaster_exit(int code, Datum arg)
{
	(void) code;
	(void) arg;
	tdb_writer_stop_instance(tdb_shm_prefix(), (int32) MyProcPid);
}

/* Called from _PG_init while preloading. */
void
tdb_shared_request(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = tdb_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = tdb_shmem_startup;
}
