/*-------------------------------------------------------------------------
 *
 * shared.c
 *	  The daemon/backend shared state in PostgreSQL's main shared memory
 *	  (see shared.h), and the name of trafficdb's own shared memory.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dirent.h>

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
TdbReaderSlot *tdb_backend_pins = NULL;
int			tdb_prefix_lock_fd = -1;
char		tdb_private_prefix[64];
static char prefix_lock_error[TDB_ERRMSG_LEN];

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

void
tdb_live_prefix(char *out)
{
	SpinLockAcquire(&tdb_shared->mutex);
	strlcpy(out, tdb_shared->live_prefix, 64);
	SpinLockRelease(&tdb_shared->mutex);
	if (out[0] == '\0')
		strlcpy(out, tdb_shm_prefix(), 64);
}

static Size
tdb_shared_size(void)
{
	return add_size(offsetof(TdbShared, slots),
					mul_size(tdb_total_slots(), sizeof(TdbSlotWatch)));
}

static Size
tdb_pins_size(void)
{
	return mul_size(tdb_nbackend_slots(), sizeof(TdbReaderSlot));
}

static void
tdb_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(tdb_shared_size());
	/* cache-line aligned by ShmemInitStruct; the slack covers our 64-byte alignment */
	RequestAddinShmemSpace(add_size(tdb_pins_size(), 64));
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
		pg_atomic_init_u32(&tdb_shared->feed_part, 0);
		pg_atomic_init_u32(&tdb_shared->map_regional, 0);
		pg_atomic_init_u64(&tdb_shared->subs_version, 1);
		SpinLockInit(&tdb_shared->mutex);
		ConditionVariableInit(&tdb_shared->cv);
		tdb_shared->nslots = tdb_total_slots();
		tdb_shared->nbackend_slots = tdb_nbackend_slots();
	}

	/*
	 * Backends pin here, in memory only this server's processes write: a
	 * crash-restart makes it anew (the pins of processes that died go with
	 * it), and no other server or group member can clear them.
	 */
	{
		char	   *p = ShmemInitStruct("trafficdb pins", add_size(tdb_pins_size(), 64), &found);

		tdb_backend_pins = (TdbReaderSlot *) TYPEALIGN(64, p);
		if (!found)
			memset(tdb_backend_pins, 0, tdb_pins_size());
	}
	LWLockRelease(AddinShmemInitLock);

	/*
	 * In the postmaster, at start and after every crash-restart, before any
	 * backend exists.  The prefix lock is taken here, not in _PG_init, which
	 * runs before the port is bound: a second server failing to start on the
	 * same port must not touch the first one's shared memory.  It is held
	 * for the postmaster's life and inherited by every child, so a server
	 * owns its prefix until its last process is gone.
	 */
	if (!IsUnderPostmaster && !IsPostmasterEnvironment)
	{
		/*
		 * Single-user mode (postgres --single, as pg_rewind runs it for the
		 * crash recovery of a node about to rejoin): no daemon, no readers.
		 * The objects in /dev/shm are left alone: its exit would otherwise
		 * stop and unlink them, and the server started next would have to
		 * rebuild everything before serving instead of adopting them.
		 */
		tdb_shared->prefix_owned = false;
		strlcpy(tdb_shared->prefix_error, "single-user mode: trafficdb's shared memory is left alone",
				TDB_ERRMSG_LEN);
	}
	else if (!IsUnderPostmaster)
	{
		static bool exit_hook_registered = false;

		if (tdb_private_prefix[0] == '\0')
		{
			uint64		r = 0;

			if (!pg_strong_random(&r, sizeof(r)))
				r = (uint64) MyStartTime * 1000003 ^ (uint64) MyProcPid;
			snprintf(tdb_private_prefix, sizeof(tdb_private_prefix), "%.46s-%016llx",
					 tdb_shm_prefix(), (unsigned long long) r);
		}
		if (tdb_prefix_lock_fd < 0)
		{
			char		err[TDB_SHM_ERRLEN];
			int			rc = tdb_prefix_lock(tdb_shm_prefix(), &tdb_prefix_lock_fd, err);

			if (rc != TDB_SHM_OK)
			{
				tdb_prefix_lock_fd = -1;
				strlcpy(prefix_lock_error, err, sizeof(prefix_lock_error));
				/* another user's file: the daemon says what to do, and serves SQL meanwhile */
				if (rc != TDB_SHM_ETAKEN)
					ereport(WARNING,
							(errmsg("trafficdb: %s", err),
							 errdetail("This server will not publish until the other one stops.")));
			}
		}
		strlcpy(tdb_shared->live_prefix, tdb_shm_prefix(), sizeof(tdb_shared->live_prefix));
		tdb_shared->prefix_owned = tdb_prefix_lock_fd >= 0;
		strlcpy(tdb_shared->prefix_error, tdb_prefix_lock_fd >= 0 ? "" : prefix_lock_error,
				TDB_ERRMSG_LEN);
		if (!exit_hook_registered)
		{
			on_proc_exit(tdb_postmaster_exit, (Datum) 0);
			exit_hook_registered = true;
		}
	}
}

/*
 * Private names "<prefix>-<random>" (used while another user held a fixed
 * name, see tdb_private_prefix) are this server's alone: at exit every such
 * instance whose control block names this postmaster is stopped, whichever
 * names the daemon picked.  (tdb_shared cannot say: the main shared memory
 * is detached before on_proc_exit callbacks run.)
 */
static void
stop_private_instances(void)
{
	DIR		   *d = opendir("/dev/shm");
	struct dirent *e;
	const char *pub = tdb_shm_prefix() + 1;
	size_t		plen = strlen(pub);

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL)
	{
		size_t		len = strlen(e->d_name);
		char		prefix[64];

		if (len <= plen + 5 || len - 4 + 2 > sizeof(prefix) || strncmp(e->d_name, pub, plen) != 0 ||
			e->d_name[plen] != '-' || strcmp(e->d_name + len - 4, ".ctl") != 0)
			continue;
		snprintf(prefix, sizeof(prefix), "/%.*s", (int) (len - 4), e->d_name);
		if (tdb_writer_instance_of(prefix, (int32) MyProcPid))
			tdb_writer_stop_instance(prefix);
	}
	closedir(d);
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
	stop_private_instances();
	if (tdb_prefix_lock_fd < 0)
	{
		char		err[TDB_SHM_ERRLEN];

		/*
		 * The prefix was another server's when we started, and our daemon
		 * may have taken it over once that one stopped: the daemon's lock
		 * went with it, and nobody else would tell its readers or free the
		 * names.  Every child has exited by now, so if the lock is free and
		 * the control block says it is this server's, the instance is ours
		 * to stop.
		 */
		if (tdb_prefix_lock(tdb_shm_prefix(), &tdb_prefix_lock_fd, err) != TDB_SHM_OK)
		{
			tdb_prefix_lock_fd = -1;
			return;
		}
		if (!tdb_writer_instance_of(tdb_shm_prefix(), (int32) MyProcPid))
		{
			close(tdb_prefix_lock_fd);
			tdb_prefix_lock_fd = -1;
			return;
		}
	}
	tdb_writer_stop_instance(tdb_shm_prefix());
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
