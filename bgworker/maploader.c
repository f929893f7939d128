/*-------------------------------------------------------------------------
 *
 * maploader.c
 *	  Map loading: the daemon builds a map from its source (a
 *	  trafficdb.load_map() request, or at start the recorded map source
 *	  after the generation log's replay), carries the traffic over by
 *	  location id, and prepares the map's first generation.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "portability/instr_time.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "bgworker/daemon_internal.h"
#include "hugepage.h"
#include "module/trafficdb.h"

/* ---- map loading ---------------------------------------------------------------- */

/* What the last map load skipped, for its caller ("" = nothing). */
char map_warning[TDB_ERRMSG_LEN];

/*
 * Build a new map from req (inside a transaction), carrying traffic over
 * by location id, and prepare its first generation (published once the
 * transaction commits).  At start (rr not NULL) the traffic is the
 * replayed log's: the map is built again with the logged map's id and time,
 * and if the source has not changed it is the same map byte for byte, so
 * the replayed state is taken as it is.  Returns the number of locations.
 */
static uint64
load_map(const TdbMapRequest *req, bool record_source, TdbReplay *rr)
{
	LoadCounts	counts;
	TdbMapBuilder *b;
	char		err[TDB_ERRLEN];
	uint32		seg;
	void	   *addr;
	TdbMapView	view;
	instr_time	start,
				dur;
	uint64		map_id;
	int64		map_created;
	uint64		gen = 0;
	uint64		skipped;
	WorkingTraffic wt;
	DaemonState saved;
	volatile bool same_map = false;
	bool		replaced;

	INSTR_TIME_SET_CURRENT(start);
	b = read_map_source(req, &counts);
	if (tdb_map_builder_finish(b, err) != TDB_OBJ_OK)
	{
		tdb_map_builder_free(b);
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("cannot load the map from %s: %s", get_rel_name(req->relid), err),
				 errhint("Location ids (column \"%s\") must be unique.", NameStr(req->id_column))));
	}
	skipped = counts.null_id + counts.null_geom + counts.not_linestring + counts.bad_points;
	map_warning[0] = '\0';
	if (skipped > 0)
	{
		/* to the server log here, and to the caller of load_map (map_warning) */
		snprintf(map_warning, sizeof(map_warning),
				 "skipped " UINT64_FORMAT " of " UINT64_FORMAT " rows of %s while loading the map "
				 "(NULL id: " UINT64_FORMAT ", NULL or empty geometry: " UINT64_FORMAT
				 ", not a LineString: " UINT64_FORMAT ", invalid coordinates: " UINT64_FORMAT "%s%s)",
				 skipped, skipped + counts.loaded, get_rel_name(req->relid),
				 counts.null_id, counts.null_geom, counts.not_linestring, counts.bad_points,
				 counts.bad_points ? "; first: " : "", counts.first_bad);
		ereport(WARNING, (errmsg("trafficdb: %s", map_warning)));
	}

	if (tdb_writer_new_segment(&D.writer, TDB_SEG_MAP, tdb_map_builder_size(b), &seg, &addr, err) != TDB_SHM_OK)
	{
		tdb_map_builder_free(b);
		ereport(ERROR, (errmsg("could not create the map object: %s", err)));
	}
	if (rr && rr->found)
	{
		/* the logged map again, if the source still makes it */
		tdb_map_builder_write(b, addr, rr->state.map_id, rr->map.map_created_us);
		same_map = ((TdbObjectHeader *) addr)->checksum == rr->map.map_crc &&
			((TdbObjectHeader *) addr)->count == rr->state.count;
		if (!same_map)
			ereport(WARNING,
					(errmsg("trafficdb: the map source changed since generation " UINT64_FORMAT
							" (the map the generation log was written for): traffic is carried over by location id",
							rr->map.map_generation),
					 errdetail("The first generation published now is not byte-identical to the last one before the restart.")));
	}
	if (!same_map)
	{
		if (pg_strong_random(&map_id, sizeof(map_id)) == false || map_id == 0)
			map_id = (uint64) GetCurrentTimestamp() | 1;
		map_created = now_us();
		tdb_map_builder_write(b, addr, map_id, map_created);
	}
	tdb_map_builder_free(b);
	tdb_map_view_init(&view, addr);

	/*
	 * Switch to the new map, keeping the old state to put back if anything
	 * below fails: a failed load must leave the daemon as it was.
	 */
	replaced = D.have_map || (rr && rr->found);
	if (same_map)
	{
		/* the replayed arrays become the working ones */
		wt.traffic = rr->state.traffic;
		wt.incidents = rr->state.incidents;
		wt.incident_count = rr->state.incident_count;
		wt.win_seq = tdb_huge_fresh(MemoryContextAllocHuge(D.cxt, Max(view.count, 1) * sizeof(int64)),
									Max(view.count, 1) * sizeof(int64), true);	/* as alloc_working */
		wt.pend = MemoryContextAllocHuge(D.cxt, Max(view.count, 1) * sizeof(uint32));
		wt.pend_bit = MemoryContextAllocExtended(D.cxt, view.count / 8 + 1, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
		rr->state.traffic = NULL;
		rr->state.incidents = NULL;
	}
	else if (rr && rr->found)
		remap_traffic(&view, rr->state.count, rr->state.ids, rr->state.traffic, rr->state.incidents, &wt);
	else
	{
		uint64	   *old_ids = MemoryContextAllocHuge(CurrentMemoryContext, Max(D.have_map ? D.map.count : 0, 1) * sizeof(uint64));

		for (uint64 o = 0; D.have_map && o < D.map.count; o++)
			old_ids[o] = D.map.records[o].id;
		remap_traffic(&view, D.have_map ? D.map.count : 0, old_ids, D.traffic, D.incidents, &wt);
		pfree(old_ids);
	}
	saved = D;
	D.map_seg = seg;
	D.map_addr = addr;
	D.map = view;
	D.have_map = true;
	D.region = req->region;
	set_daemon_working(&wt);
	if (same_map)
	{
		/* the log goes on where it ended */
		D.mapinfo = rr->map;
		D.need_checkpoint = false;
		if (rr->last < D.generation)
		{
			/*
			 * It ended before the generations published (repair_log gave
			 * them up, or a restore on a server whose readers saw later
			 * ones): values go back without their changed_generation moving,
			 * so changes_since must answer only from this generation on,
			 * as after a map reload.
			 */
			D.mapinfo.replaced = true;
			D.need_checkpoint = true;
		}
	}
	else
	{
		D.mapinfo.map_created_us = ((TdbObjectHeader *) addr)->created_at_us;
		D.mapinfo.map_crc = ((TdbObjectHeader *) addr)->checksum;
		D.mapinfo.replaced = replaced;
		D.need_checkpoint = true;	/* map_generation: set by the checkpoint */
	}
	PG_TRY();
	{
		/*
		 * At startup, the feed rows a dead daemon consumed in a transaction
		 * that never committed are in the feed again: absorb them into the
		 * first generation.
		 */
		if (!record_source && !follower_mode)
			absorb_feed(D.generation + 1, true);

		INSTR_TIME_SET_CURRENT(dur);
		INSTR_TIME_SUBTRACT(dur, start);
		if (record_source)
		{
			Oid			types[10] = {OIDOID, NAMEOID, NAMEOID, NAMEOID, NAMEOID, NAMEOID, NAMEOID, INT8OID, OIDOID, TEXTOID};
			Datum		vals[10];
			char		nulls[10] = "          ";
			const NameData *cols[6] = {&req->id_column, &req->geom_column, &req->class_column,
			&req->name_column, &req->speed_column, &req->oneway_column};

			vals[0] = ObjectIdGetDatum(req->relid);
			for (int c = 0; c < 6; c++)
			{
				vals[c + 1] = NameGetDatum(cols[c]);
				if (NameStr(*cols[c])[0] == '\0')
					nulls[c + 1] = 'n';
			}
			vals[7] = Int64GetDatum((int64) view.count);
			vals[8] = ObjectIdGetDatum(req->userid);
			vals[9] = CStringGetTextDatum(NameStr(req->region));
			if (NameStr(req->region)[0] == '\0')
				nulls[9] = 'n';
			SPI_execute("DELETE FROM trafficdb.map_source", false, 0);
			SPI_execute_with_args("INSERT INTO trafficdb.map_source (source, id_column, geom_column, "
								  "class_column, name_column, speed_limit_column, oneway_column, locations, loaded_by, region) "
								  "VALUES ($1::regclass, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
								  10, types, vals, nulls, false, 0);
		}
		if (follower_mode)
		{
			/* the log's newest generation, as the primary published it */
			TdbLogState ls = daemon_log_state();

			gen = rr->last;
			follower_publish(&ls, gen, rr->last_created_us, false, 0);
		}
		else
		{
			gen = D.generation + 1;
			prepare_generation(gen);
		}
	}
	PG_CATCH();
	{
		/* nothing was published: put the old state back */
		D.pub.ready = false;
		free_working(&wt, view.count);
		D = saved;
		PG_RE_THROW();
	}
	PG_END_TRY();
	{
		WorkingTraffic old = {saved.traffic, saved.win_seq, saved.incidents, saved.incident_count,
		saved.pend, saved.pend_bit};

		free_working(&old, saved.have_map ? saved.map.count : 0);
	}

	SpinLockAcquire(&tdb_shared->mutex);
	tdb_shared->last_map_build_ms = INSTR_TIME_GET_MILLISEC(dur);
	SpinLockRelease(&tdb_shared->mutex);
	elog(LOG, "trafficdb: loaded map of " UINT64_FORMAT " locations from %s (%.0f ms), generation " UINT64_FORMAT "%s",
		 view.count, get_rel_name(req->relid), INSTR_TIME_GET_MILLISEC(dur), gen,
		 same_map ? " (the logged map)" : "");
	return view.count;
}

void
map_load_tx(void *p)
{
	MapLoadArg *a = p;

	a->count = load_map(&a->req, a->record_source, NULL);
}

/*
 * Free what a replay left in D.cxt (what load_map took is NULL): a start
 * that fails (a damaged log) is retried at every publish(), and must not
 * keep a state of the whole map each time.
 */
static void
release_replay(TdbReplay *rr)
{
	if (rr->state.traffic)
	{
		for (uint64 i = 0; i < rr->state.count; i++)
			if (rr->state.incidents[i])
				pfree(rr->state.incidents[i]);
		pfree(rr->state.traffic);
		rr->state.traffic = NULL;
	}
	if (rr->state.incidents)
		pfree(rr->state.incidents);
	rr->state.incidents = NULL;
	if (rr->state.ids)
		pfree(rr->state.ids);
	rr->state.ids = NULL;
	if (rr->state.changed)
		pfree(rr->state.changed);	/* a full verification's list (genlog_store.c) */
	rr->state.changed = NULL;
}

/*
 * At start: replay the generation log, then rebuild the map from
 * trafficdb.map_source (if a map was ever loaded) and prepare the next
 * generation.
 */
void
startup_tx(void *p)
{
	MapLoadArg *a = p;
	TdbReplay	rr;
	char		err[TDB_ERRMSG_LEN];
	instr_time	start,
				dur;
	volatile bool ok;
	uint64		log_end = 0;

	a->count = 0;
	if (!extension_installed())
		return;
	if (SPI_execute(have_log_end() ? "SELECT generation, log_end FROM trafficdb.daemon_state" :
					"SELECT generation, NULL::pg_catalog.int8 FROM trafficdb.daemon_state", true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
	{
		bool		isnull;
		int64		g = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));

		if (!isnull && (uint64) g > D.generation)
			D.generation = (uint64) g;
		g = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
		if (!isnull && g > 0)
			log_end = (uint64) g;
	}

	INSTR_TIME_SET_CURRENT(start);
	ok = tdb_log_replay(&rr, tdb_replay_verify == TDB_REPLAY_VERIFY_FULL, D.cxt, err, sizeof(err));
	INSTR_TIME_SET_CURRENT(dur);
	INSTR_TIME_SUBTRACT(dur, start);

	/*
	 * The log must rebuild the last generation committed with it: one that
	 * ends before (its newest records deleted, the whole log deleted or
	 * truncated, a newest checkpoint lost with no records after the older
	 * one) would silently take back values readers saw.  repair_log gives
	 * the rest up (log_end NULL).
	 */
	if (ok && log_end != 0 && (!rr.found || rr.last < log_end))
	{
		ok = false;
		rr.damaged_at = rr.found ? rr.last + 1 : Max(rr.first, 1);
		snprintf(err, sizeof(err), "generation log damaged at generation " UINT64_FORMAT
				 ": the log %s, but generation " UINT64_FORMAT " was committed with it (records were deleted)",
				 rr.damaged_at, rr.found ? psprintf("ends at generation " UINT64_FORMAT, rr.last) :
				 "has no complete checkpoint", log_end);
	}
	if (!ok)
		release_replay(&rr);
	SpinLockAcquire(&tdb_shared->mutex);
	tdb_shared->replay_generations = rr.replayed;
	tdb_shared->replay_mismatches = rr.mismatches;
	tdb_shared->last_replay_ms = INSTR_TIME_GET_MILLISEC(dur);
	tdb_shared->log_damaged_at = rr.damaged_at;
	SpinLockRelease(&tdb_shared->mutex);
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("%s", err),
				 errdetail("Nothing is published until the log is repaired: publishing the state before that generation would take back values readers may have seen."),
				 errhint("SELECT trafficdb.repair_log(accept_loss => true) drops the records from generation " UINT64_FORMAT
						 " on and publishes the state before it.", rr.damaged_at)));
	if (rr.found)
	{
		ereport(LOG,
				(errmsg("trafficdb: replayed the generation log from the checkpoint of generation " UINT64_FORMAT
						" to generation " UINT64_FORMAT " (" UINT64_FORMAT " records, %.0f ms); "
						UINT64_FORMAT " of " UINT64_FORMAT " checked generations differ from their publication",
						rr.checkpoint, rr.last, rr.replayed, INSTR_TIME_GET_MILLISEC(dur), rr.mismatches, rr.verified)));
		/* generation numbers never go back */
		D.generation = Max(D.generation, rr.last);
		D.log_last = rr.last;
		D.log_first = rr.first;
		D.ckpt_gen = rr.checkpoint;
		D.ckpt_at = (TimestampTz) (rr.checkpoint_at_us - UNIX_TO_PG_US);
	}
	else if (follower_mode)
		return;					/* the primary has logged nothing yet */
	else
	{
		D.log_last = tdb_log_last_generation();
		D.generation = Max(D.generation, D.log_last);
	}

	if (SPI_execute("SELECT source, id_column, geom_column, class_column, name_column, "
					"speed_limit_column, oneway_column, loaded_by, region FROM trafficdb.map_source", true, 1) != SPI_OK_SELECT ||
		SPI_processed == 0)
		return;
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	td = SPI_tuptable->tupdesc;
		NameData   *cols[6] = {&a->req.id_column, &a->req.geom_column, &a->req.class_column,
		&a->req.name_column, &a->req.speed_column, &a->req.oneway_column};
		bool		isnull;

		a->req.relid = DatumGetObjectId(SPI_getbinval(tup, td, 1, &isnull));
		a->req.userid = DatumGetObjectId(SPI_getbinval(tup, td, 8, &isnull));
		for (int c = 0; c < 6; c++)
		{
			char	   *v = SPI_getvalue(tup, td, c + 2);

			namestrcpy(cols[c], v ? v : "");
		}
		{
			char	   *v = SPI_getvalue(tup, td, 9);

			namestrcpy(&a->req.region, v ? v : "");
		}
	}
	PG_TRY();
	{
		a->count = load_map(&a->req, false, &rr);
	}
	PG_FINALLY();
	{
		/* what load_map did not take */
		release_replay(&rr);
	}
	PG_END_TRY();
}
