/*-------------------------------------------------------------------------
 *
 * daemon.c
 *	  The trafficdb daemon: one background worker, the only writer of
 *	  trafficdb's shared memory.  This file is its main loop (signals, the
 *	  latch, the cycle); each stage of the cycle is a file of its own.
 *
 * Each cycle (every trafficdb.publish_interval, or at once when a backend
 * asks) it serves a pending map-load request, then consumes the feed: in one
 * transaction it deletes a batch of committed rows from trafficdb.feed,
 * checks them, applies the good ones to its in-memory traffic array, files
 * the bad ones in trafficdb.feed_rejects, writes the next traffic object into
 * a free buffer, appends the generation's record (the entries it changed,
 * with the object's checksum) to the generation log trafficdb.generations,
 * and commits.  Only then does it publish the object and notify.
 *
 * Durability: every committed feed row is either still in trafficdb.feed
 * or in the generation log (the deletion and the record commit together),
 * and readers never see a generation that has not committed.  On start,
 * the daemon adopts whatever valid objects a previous run left in shared
 * memory (readers keep reading them), replays the log (the newest checkpoint
 * and the records after it, each replayed generation checked against the
 * checksum recorded at its publication), rebuilds the map and publishes the
 * next generation.  See docs/write-path.md.
 *
 * Readers are never waited for: see src/writer.h.
 *
 * The stages (bgworker/, sharing daemon_internal.h), each calling only
 * those below it:
 *	 follower.c      the follower's replay, on a hot standby
 *	 maploader.c     map loading, and the rebuild at start after the replay
 *	 mapsource.c     the map's source reader
 *	 publish.c       publication and the generation log (genlog_store.c:
 *	                 the log's table)
 *	 putdrain.c      the writers' ring (trafficdb_put) and its drain
 *	 idle.c          the waits: draining while writers put, sleeping when idle
 *	 feed.c          feed intake
 *	 matching.c      subscription matching and NOTIFYs
 *	 subscribers.c   external subscribers' rings: sweeps and delivery
 *	 sweeps.c        readers' pins, taken shared memory names
 *	 working.c       the working traffic
 *	 daemon_state.c  the state D and the helpers every stage uses
 * module/ reaches the daemon through daemon.h only.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "bgworker/daemon.h"
#include "bgworker/daemon_internal.h"
#include "module/trafficdb.h"

/* The longest time between two checks of the segments others can write (see the main loop). */
#define DAMAGE_CHECK_MS 1000

/* ---- registration ------------------------------------------------------------- */

void
tdb_daemon_register(void)
{
	BackgroundWorker bgw;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	/* on a hot standby too, as a follower of the primary's generation log */
	bgw.bgw_start_time = BgWorkerStart_ConsistentState;
	bgw.bgw_restart_time = 1;
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "trafficdb");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "tdb_daemon_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "trafficdb daemon");
	snprintf(bgw.bgw_type, BGW_MAXLEN, "trafficdb daemon");
	RegisterBackgroundWorker(&bgw);
}

static void
daemon_sigterm(SIGNAL_ARGS)
{
	int			save_errno = errno;

	ShutdownRequestPending = true;
	if (in_commit)
		QueryCancelPending = true;
	SetLatch(MyLatch);
	errno = save_errno;
}

static void
feed_cycle(bool force)
{
	uint64		gen = D.generation + 1;

	if (!D.have_map)
		return;
	absorb_feed(gen, false);
	persist_put_rejects();
	if (D.dirty || force || D.unpublished || D.need_checkpoint)
		prepare_generation(gen);
}

/* ---- requests ------------------------------------------------------------------------ */

static void
finish_map_request(uint64 seq, TdbRequestStatus status, const char *msg, uint64 count)
{
	SpinLockAcquire(&tdb_shared->mutex);
	tdb_shared->map_status = status;
	tdb_shared->map_loaded_count = count;
	strlcpy(tdb_shared->map_error, msg ? msg : "", TDB_ERRMSG_LEN);
	tdb_shared->map_done_seq = seq;
	SpinLockRelease(&tdb_shared->mutex);
	ConditionVariableBroadcast(&tdb_shared->cv);
}

static void
feed_tx(void *p)
{
	/* DROP EXTENSION: stop consuming; what is published stays readable */
	if (!extension_installed())
	{
		D.have_map = false;
		return;
	}
	/* the subscribers' index (the rows' is loaded after the publication: subscriptions_tx) */
	if (D.have_map && (D.targets_dirty || D.subs_map_id != D.map.hdr->map_id))
		rebuild_subscription_index();
	feed_cycle(*(bool *) p);
}

/* ---- main ---------------------------------------------------------------------------- */

static void
daemon_detach(int code, Datum arg)
{
	bool		own_lock = D.writer_open && D.writer.own_lock;

	(void) code;
	(void) arg;
	/* leave the objects in place: readers keep them, the next daemon adopts them */
	if (D.ring_open)
		tdb_ring_close(&D.ring);
	D.ring_open = false;
	if (D.writer_open)
		tdb_writer_close(&D.writer, false);
	D.writer_open = false;
	if (tdb_shared)
	{
		SpinLockAcquire(&tdb_shared->mutex);
		if (own_lock)
			tdb_shared->prefix_owned = false;	/* our lock went with the writer */
		tdb_shared->daemon_latch = NULL;
		tdb_shared->daemon_pid = 0;
		SpinLockRelease(&tdb_shared->mutex);
		ConditionVariableBroadcast(&tdb_shared->cv);
	}
}

/*
 * Open trafficdb's shared memory as its writer, under the configured names
 * or, while another user holds one of them, under private ones; while
 * another server owns the prefix, wait for it to go (failing the requests
 * meanwhile).  Says what it adopted or created.
 */
static void
open_shared_memory(void)
{
	TdbWriterOpenInfo info;
	char		err[TDB_ERRLEN];

	for (bool reported = false;; reported = true)
	{
		TdbWriterConfig cfg;
		int			rc;

		memset(&cfg, 0, sizeof(cfg));
		strlcpy(D.prefix, D.private_names ? tdb_private_prefix : tdb_shm_prefix(), sizeof(D.prefix));
		cfg.nexternal_slots = (uint32) tdb_max_external_readers;
		cfg.gid = shm_gid();
		/* the postmaster's lock, inherited; if it had none, try ours */
		cfg.lock_fd = D.private_names ? -1 : tdb_prefix_lock_fd;
		cfg.postmaster_pid = (int32) PostmasterPid;
		cfg.backend_pins = tdb_backend_pins;
		cfg.nbackend_pins = tdb_nbackend_slots();
		cfg.pin_timeout_us = (int64) tdb_reader_pin_timeout_ms * 1000;
		cfg.huge_pages = tdb_huge_pages;
		rc = tdb_writer_open(&D.writer, D.prefix, &cfg, &info, err);
		if (rc == TDB_SHM_OK)
			break;
		if (rc == TDB_SHM_ETAKEN && !D.private_names)
		{
			/*
			 * Another local user created one of our fixed names first (in
			 * sticky /dev/shm we cannot remove it).  That must not stop the
			 * server: publish under private names, which SQL backends find
			 * through tdb_shared; external processes, which know only the
			 * configured names, cannot attach until the admin frees them.
			 */
			snprintf(D.taken, sizeof(D.taken),
					 "%s; until then external readers, writers and subscribers cannot attach, and SQL is served from private names %s",
					 err, tdb_private_prefix);
			set_last_error(D.taken);
			ereport(WARNING,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("trafficdb: %s", err),
					 errdetail("External readers, writers and subscribers cannot reach this server under \"%s\"; it publishes for SQL under the private names \"%s\" meanwhile.",
							   tdb_shm_prefix(), tdb_private_prefix),
					 errhint("As root, remove the other user's file (the server's user cannot remove it), or set trafficdb.shm_name to a name nobody holds and restart; the daemon looks again after %d s, then less and less often.",
							 NAMES_CHECK_FIRST_MS / 1000)));
			D.private_names = true;
			D.names_check_ms = NAMES_CHECK_FIRST_MS;
			D.names_check_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), D.names_check_ms);
			continue;
		}
		if (rc == TDB_SHM_ETAKEN && D.private_names && ++D.private_picks <= 8)
		{
			uint64		r = 0;

			/*
			 * Someone saw our private names in /dev/shm and took one we had
			 * not made yet: leave what is ours there (readers are told) and
			 * pick other names.  The postmaster finds every instance of its
			 * own at exit, whatever its name.
			 */
			ereport(WARNING,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("trafficdb: %s", err),
					 errdetail("Choosing other private names than \"%s\".", D.prefix)));
			tdb_writer_stop_instance(D.prefix);
			if (!pg_strong_random(&r, sizeof(r)))
				r = (uint64) GetCurrentTimestamp() ^ ((uint64) MyProcPid << 32);
			snprintf(tdb_private_prefix, sizeof(tdb_private_prefix), "%.46s-%016llx",
					 tdb_shm_prefix(), (unsigned long long) r);
			continue;
		}
		SpinLockAcquire(&tdb_shared->mutex);
		strlcpy(tdb_shared->last_error, err, TDB_ERRMSG_LEN);
		tdb_shared->last_error_at = GetCurrentTimestamp();
		SpinLockRelease(&tdb_shared->mutex);
		if (rc != TDB_SHM_EBUSY)
			ereport(ERROR, (errmsg("trafficdb: cannot set up shared memory: %s", err)));

		/*
		 * Another server owns the prefix: say so once, then wait for it to
		 * go (checking every 10 s) instead of failing and restarting.
		 */
		if (!reported)
			ereport(WARNING,
					(errmsg("trafficdb: not publishing: %s", err),
					 errhint("Set trafficdb.shm_name to a prefix no other server uses, and restart.")));
		/* requests meanwhile fail at once, saying why */
		{
			uint64		map_req;
			bool		map_pending;

			SpinLockAcquire(&tdb_shared->mutex);
			if (tdb_shared->publish_requested > tdb_shared->publish_done)
			{
				tdb_shared->publish_failed = tdb_shared->publish_requested;
				strlcpy(tdb_shared->publish_error, err, TDB_ERRMSG_LEN);
				tdb_shared->publish_done = tdb_shared->publish_requested;
			}
			map_req = tdb_shared->map_req_seq;
			map_pending = map_req > tdb_shared->map_done_seq;
			SpinLockRelease(&tdb_shared->mutex);
			if (map_pending)
				finish_map_request(map_req, TDB_REQ_FAILED, err, 0);
			ConditionVariableBroadcast(&tdb_shared->cv);
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10000,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ShutdownRequestPending)
			proc_exit(0);
	}
	D.writer_open = true;
	D.skipped_reported = 0;
	SpinLockAcquire(&tdb_shared->mutex);
	tdb_shared->prefix_owned = true;
	tdb_shared->prefix_error[0] = '\0';
	strlcpy(tdb_shared->live_prefix, D.prefix, sizeof(tdb_shared->live_prefix));
	SpinLockRelease(&tdb_shared->mutex);
	D.generation = info.last_generation;
	if (info.adopted)
		ereport(LOG,
				(errmsg("trafficdb: adopted shared memory %s at generation " UINT64_FORMAT "%s",
						D.prefix, info.last_generation,
						info.segments_dropped ? ", dropping corrupt objects" : ""),
				 errdetail("%d object(s) failed validation and were discarded.", info.segments_dropped)));
	else
		ereport(LOG, (errmsg("trafficdb: created shared memory %s", D.prefix)));
}

/*
 * An orderly stop: publish what writers queued, a generation per batch
 * (each end of batch stops the drain of its lane) for up to
 * trafficdb.stop_batches_timeout (2 s),
 * then whatever is left in one last generation, so that a stop with tens of
 * thousands of batches queued does not take a commit each (1.4 ms each on
 * ext4 with fsync: 46 s for 32,769 batches, past pg_ctl's 60 s on a slower
 * disk).  After each commit the lanes are drained past their ends whether
 * or not a synchronous standby confirmed it (a stop does not wait for one:
 * commit_unconfirmed; with max_wal_senders > 0 PostgreSQL asks for one even
 * without synchronous_standby_names), and the loop goes on while any lane
 * holds a put, not only while one is stopped at an end (a batch that
 * changed nothing releases its lane without a generation).
 */
static void
publish_ring_at_stop(void)
{
	TimestampTz start = GetCurrentTimestamp();
	bool		published = false;
	char		msg[TDB_ERRMSG_LEN];
	bool		force = false;

	/* bounded: stop_batches_timeout of rounds (each a drain, maybe a commit), then one merged round */
	for (;;)
	{
		(void) drain_ring();
		if (D.dirty || D.npend > 0)
		{
			D.refusal[0] = '\0';
			if (!run_in_tx("trafficdb final publication", feed_tx, &force, msg))
				break;
			published = true;
		}
		ring_release_batches();
		if (D.ring.merge_batches || !ring_undrained())
			break;
		if (TimestampDifferenceExceeds(start, GetCurrentTimestamp(), tdb_stop_batches_ms))
		{
			ereport(LOG, (errmsg("trafficdb: stopping: the writers' batches still queued after %d ms go into one generation",
								 tdb_stop_batches_ms)));
			D.ring.merge_batches = true;
		}
	}
	if (published)
		ereport(LOG, (errmsg("trafficdb: stopping after generation " UINT64_FORMAT " (the writers' ring drained)",
							 D.generation)));
}

void
tdb_daemon_main(Datum main_arg)
{
	MapLoadArg	start_arg;
	TimestampTz startup_failed_at = 0;
	char		startup_error[TDB_ERRMSG_LEN] = "";
	TimestampTz last_cycle_at = 0;
	TimestampTz last_check_at = 0;
	bool		force_sync = false;
	bool		ring_running = false;

	(void) main_arg;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, daemon_sigterm);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(tdb_database, NULL, 0);

	/*
	 * The daemon runs SQL as a superuser: nothing a user controls may change
	 * what its names mean.  search_path is pg_catalog at override level (no
	 * SET, set_config() or database/role setting can change it afterwards),
	 * and every name of its own SQL is schema-qualified as well.
	 */
	SetConfigOption("search_path", "pg_catalog", PGC_SUSET, PGC_S_OVERRIDE);
	/* a committed generation is a promise to writers: it is on disk */
	SetConfigOption("synchronous_commit", "on", PGC_SUSET, PGC_S_OVERRIDE);
	/* (multi-argument unnest in FROM must stay unqualified: it is syntax there) */

	memset(&D, 0, sizeof(D));
	D.cxt = AllocSetContextCreate(TopMemoryContext, "trafficdb daemon", ALLOCSET_DEFAULT_SIZES);

	SpinLockAcquire(&tdb_shared->mutex);
	tdb_shared->daemon_latch = MyLatch;
	tdb_shared->daemon_pid = MyProcPid;
	tdb_shared->daemon_started = false;
	SpinLockRelease(&tdb_shared->mutex);
	before_shmem_exit(daemon_detach, (Datum) 0);

	open_shared_memory();

	/* subscribers are served on a standby too, from the generations it follows */
	open_subring();
	/* a hot standby follows the primary until it is promoted */
	if (RecoveryInProgress())
		follower_loop();
	open_ring();
	open_bell();

	for (;;)
	{
		uint64		pub_req;
		uint64		map_req;
		bool		map_pending;
		MapLoadArg	map_arg;
		bool		force;
		bool		sync_cycle = false;
		long		wait_ms;

		if (ShutdownRequestPending)
			break;
		if (ConfigReloadPending)
			reload_settings();
		if (names_free_again())
		{
			/* stop in order, and start again under the configured names */
			D.names_moving = true;
			break;
		}

		/*
		 * Without a map (a fresh start, a restart, the extension not created
		 * yet) rebuild from the tables; after a failure, retry once a minute.
		 */
		SpinLockAcquire(&tdb_shared->mutex);
		force = tdb_shared->publish_requested > tdb_shared->publish_done;
		SpinLockRelease(&tdb_shared->mutex);
		if (!D.have_map &&
			(startup_failed_at == 0 || force ||
			 TimestampDifferenceExceeds(startup_failed_at, GetCurrentTimestamp(), 60000)))
		{
			startup_failed_at = run_in_tx("trafficdb startup", startup_tx, &start_arg, startup_error) ?
				0 : GetCurrentTimestamp();
			note_started();
		}

		if (D.ring_open && D.have_map && !ring_running)
		{
			ring_set_state(TDB_RING_RUNNING);
			ring_running = true;
		}

		SpinLockAcquire(&tdb_shared->mutex);
		pub_req = tdb_shared->publish_requested;
		map_req = tdb_shared->map_req_seq;
		map_pending = map_req > tdb_shared->map_done_seq;
		map_arg.req = tdb_shared->map_req;
		force = pub_req > tdb_shared->publish_done;
		SpinLockRelease(&tdb_shared->mutex);

		/*
		 * Between publications only the writers' ring is drained, unless
		 * TRAFFICDB_SYNC writers wait for what it held: then the next
		 * generation is made now (group commit: all of them share it).
		 */
		if (drain_ring())
			force_sync = true;
		if (!force && !force_sync && !map_pending &&
			!TimestampDifferenceExceeds(last_cycle_at, GetCurrentTimestamp(), tdb_publish_interval_ms))
			goto wait;
		last_cycle_at = GetCurrentTimestamp();
		/* the cycle sweeps and watches readers too: the next check is DAMAGE_CHECK_MS from here */
		last_check_at = last_cycle_at;
		sync_cycle = force_sync;
		force_sync = false;
		sweep_subscribers();

		if (map_pending)
		{
			MapLoadArg	a = map_arg;
			char		msg[TDB_ERRMSG_LEN];

			a.record_source = true;
			a.count = 0;
			if (run_in_tx("trafficdb map load", map_load_tx, &a, msg))
				finish_map_request(map_req, TDB_REQ_DONE, map_warning[0] ? map_warning : NULL, a.count);
			else
				finish_map_request(map_req, TDB_REQ_FAILED, msg, 0);
		}

		{
			char		msg[TDB_ERRMSG_LEN];
			bool		ok = true;

			msg[0] = '\0';
			D.refusal[0] = '\0';
			if (D.have_map)
				ok = run_in_tx("trafficdb feed", feed_tx, &force, msg);
			/* only a cycle that committed: a failing one is retried at the drain interval */
			D.sync_served = sync_cycle && ok && D.refusal[0] == '\0';
			/* (a failing one an end of batch asked for, later and later) */
			if (D.have_map)
				batch_cycle_done(ok);
			/* after the publication: a reload of the subscriptions never delays one */
			if (subscriptions_stale())
				(void) run_in_tx("trafficdb subscriptions", subscriptions_tx, NULL, NULL);
			if (force)
			{
				/* publish() callers learn that it failed, and why */
				SpinLockAcquire(&tdb_shared->mutex);
				tdb_shared->publish_done = pub_req;
				if (!D.have_map && startup_failed_at != 0)
				{
					/* the start failed (a damaged log, a missing map source): say why */
					tdb_shared->publish_failed = pub_req;
					strlcpy(tdb_shared->publish_error, startup_error, TDB_ERRMSG_LEN);
				}
				else if (!ok || D.refusal[0] != '\0')
				{
					tdb_shared->publish_failed = pub_req;
					strlcpy(tdb_shared->publish_error, ok ? D.refusal : msg, TDB_ERRMSG_LEN);
				}
				SpinLockRelease(&tdb_shared->mutex);
				ConditionVariableBroadcast(&tdb_shared->cv);
			}
		}
		watch_readers();
		tdb_writer_reclaim(&D.writer, D.have_map ? D.map_seg : TDB_MAX_SEGMENTS);
		report_skipped_names();

wait:

		/*
		 * The segments members of a group can write (<prefix>.subs,
		 * .readers; .writers at each drain) are checked at least every
		 * DAMAGE_CHECK_MS, publication or not: damage is repaired or the
		 * segment made anew, and status.last_error says what was found.
		 */
		if (TimestampDifferenceExceeds(last_check_at, GetCurrentTimestamp(), DAMAGE_CHECK_MS))
		{
			last_check_at = GetCurrentTimestamp();
			sweep_subscribers();
			watch_readers();
		}
		{
			long		sec;
			int			usec;

			TimestampDifference(GetCurrentTimestamp(),
								TimestampTzPlusMilliseconds(last_cycle_at, tdb_publish_interval_ms), &sec, &usec);
			wait_ms = Max(sec * 1000 + usec / 1000, 0);
			if (wait_ms == 0 && !TimestampDifferenceExceeds(last_cycle_at, GetCurrentTimestamp(), tdb_publish_interval_ms))
				wait_ms = 1;
			wait_ms = Min(wait_ms, DAMAGE_CHECK_MS);
		}
		/* also the damage check's */
		wait_ms = Min(wait_ms, Max(DAMAGE_CHECK_MS - (long) ((GetCurrentTimestamp() - last_check_at) / 1000), 1));

		/*
		 * Writers put between publications: drain them every
		 * writer_drain_interval while they do; once they stopped, sleep
		 * until a writer rings (idle.c).
		 */
		daemon_wait(batch_retry_wait_ms(ring_wait_ms(wait_ms)));
	}

	/*
	 * An orderly stop: what writers put and were told is in shared memory
	 * (TRAFFICDB_ASYNC) must not go with it.  Tell them the ring is stopped
	 * (their next put is TRAFFICDB_STALE), give a put that passed that check
	 * a moment to publish its slots, drain, and commit a last generation
	 * (a generation per batch still queued, for a while: putdrain.c).
	 */
	if (D.ring_open && D.have_map)
	{
		ring_set_state(TDB_RING_STOPPED);
		pg_usleep(20000);
		publish_ring_at_stop();
	}
	/* subscribers are told the daemon stopped (they subscribe again) */
	if (D.subring_open && !tdb_writer_guarded(subring_remove_guarded, NULL))
		tdb_subring_close(&D.subring);
	/* leaving private names for the configured ones: readers reopen, nothing stays behind */
	if (D.names_moving)
		tdb_writer_stop_instance(D.prefix);
	/* 1: if this was not a server shutdown, the postmaster starts us again */
	proc_exit(1);
}
