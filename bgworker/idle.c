/*-------------------------------------------------------------------------
 *
 * idle.c
 *	  The daemon's waits: how long it sleeps between two turns of its loop
 *	  and what wakes it (docs/write-path.md, "An idle daemon").
 *
 * While writers put, the daemon drains the writers' ring every
 * trafficdb.writer_drain_interval (1 ms).  Once nothing has been drained for
 * RING_IDLE_AFTER_MS it announces in the ring that it sleeps and looks at
 * the lanes once more (tdb_ring_sleep: no put published meanwhile is left
 * behind); then it waits only for what else is due (the next publication,
 * the sweeps: at most DAMAGE_CHECK_MS), for its latch (SQL backends:
 * publish(), load_map(), SIGTERM, SIGHUP) or for the bell, a datagram on a
 * socket of its own that the first writer to publish into a sleeping ring
 * sends (src/ring/ring.h, "The bell").  Writers outside PostgreSQL have no
 * way to set a latch; a signal (kill SIGUSR1) would need the server's OS
 * user (writer_group members are others) and could hit another process
 * once the daemon's pid is reused; a socket in the abstract namespace needs
 * neither, and waking is all it can do.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "bgworker/daemon_internal.h"
#include "module/trafficdb.h"

/*
 * How long the daemon keeps draining every writer_drain_interval after the
 * last drain that found something: a writer putting more often than this
 * never pays for a wake-up, and one putting less often pays one datagram.
 */
#define RING_IDLE_AFTER_MS 50

static WaitEventSet *waits;		/* the latch and the postmaster */
static WaitEventSet *bell_waits;	/* the same and the bell: only while asleep */
static int	bell_fd = -1;
static uint64 bell_nonce;
static bool asleep;				/* announced in the ring */

/*
 * The wait sets: the latch and the postmaster's death; and those with the
 * bell, waited on only while the ring says the daemon sleeps.  Any local
 * user can send datagrams to an abstract socket (its name is listed in
 * /proc/net/unix): awake, the daemon does not listen to the bell at all,
 * and a datagram that wakes it keeps it awake, draining every
 * writer_drain_interval, for RING_IDLE_AFTER_MS.  A flood of datagrams thus
 * costs the daemon what draining every interval did before it slept (at
 * most 1,000 wake-ups a second), never more.
 */
static void
make_wait_set(void)
{
	waits = CreateWaitEventSet(TopMemoryContext, 2);
	AddWaitEventToSet(waits, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(waits, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	if (bell_fd >= 0)
	{
		bell_waits = CreateWaitEventSet(TopMemoryContext, 3);
		AddWaitEventToSet(bell_waits, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
		AddWaitEventToSet(bell_waits, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
		AddWaitEventToSet(bell_waits, WL_SOCKET_READABLE, bell_fd, NULL, NULL);
	}
}

/*
 * The bell (once per daemon: it outlives rings made anew).  Without one the
 * daemon drains every writer_drain_interval whenever the ring is open, as
 * it did before it slept.
 */
void
open_bell(void)
{
	char		err[TDB_SHM_ERRLEN];

	if (waits != NULL || !D.ring_open)
		return;
	bell_fd = tdb_ring_bell_open(&bell_nonce, err);
	if (bell_fd < 0)
		ereport(WARNING,
				(errmsg("trafficdb: the daemon has no bell for writers: %s", err),
				 errdetail("It drains the writers' ring every trafficdb.writer_drain_interval instead of sleeping.")));
	make_wait_set();
}

static bool sleep_ok;

static void
sleep_guarded(void *p)
{
	sleep_ok = tdb_ring_sleep(&D.ring, bell_nonce, *(bool *) p);
}

static void
awake_guarded(void *p)
{
	(void) p;
	tdb_ring_awake(&D.ring);
}

/*
 * How long to wait, given that nothing but the writers' ring is due before
 * wait_ms: the drain interval while writers put (or when there is no bell),
 * else wait_ms once the ring says the daemon sleeps.
 */
long
ring_wait_ms(long wait_ms)
{
	bool		sync_matters = D.npend > 0;
	bool		after_sync = D.sync_served;

	D.sync_served = false;
	if (!D.ring_open || !D.have_map || wait_ms <= 0)
		return wait_ms;
	if (after_sync && bell_fd >= 0)
	{
		/*
		 * A cycle just acknowledged TRAFFICDB_SYNC writers, who put their
		 * next batch as soon as they are told: drain it now if it is there,
		 * else sleep until the first put rings (at most the drain
		 * interval), not the drain interval whatever.  Once after each such
		 * cycle, which only a writer can cause: a datagram alone never
		 * makes the daemon listen.
		 */
		sleep_ok = false;
		if (!tdb_writer_guarded(sleep_guarded, &(bool){false}) || !sleep_ok)
			return 0;
		asleep = true;
		return Min(wait_ms, tdb_writer_drain_interval_ms);
	}
	if (wait_ms <= tdb_writer_drain_interval_ms)
		return wait_ms;
	if (bell_fd < 0 ||
		!TimestampDifferenceExceeds(D.ring_active_at, GetCurrentTimestamp(), RING_IDLE_AFTER_MS))
		return tdb_writer_drain_interval_ms;
	/* a member of writer_group may have truncated it: the next drain makes it anew */
	sleep_ok = false;
	if (!tdb_writer_guarded(sleep_guarded, &sync_matters) || !sleep_ok)
		return tdb_writer_drain_interval_ms;
	asleep = true;
	return wait_ms;
}

/*
 * Wait up to wait_ms for the latch, the bell or the postmaster's death
 * (which exits), then reset the latch and say in the ring that the daemon
 * is awake.
 */
void
daemon_wait(long wait_ms)
{
	WaitEvent	ev[3];
	int			n;

	if (waits == NULL)
		make_wait_set();
	n = WaitEventSetWait(asleep && bell_waits != NULL ? bell_waits : waits, wait_ms, ev, lengthof(ev),
						 PG_WAIT_EXTENSION);
	for (int i = 0; i < n; i++)
		if (ev[i].events & WL_SOCKET_READABLE)
		{
			(void) tdb_ring_bell_drain(bell_fd);
			/* woken by the bell: awake, draining, for RING_IDLE_AFTER_MS (see make_wait_set) */
			D.ring_active_at = GetCurrentTimestamp();
		}
	ResetLatch(MyLatch);
	if (asleep)
	{
		asleep = false;
		if (D.ring_open)
			(void) tdb_writer_guarded(awake_guarded, NULL);
	}
	CHECK_FOR_INTERRUPTS();
}
