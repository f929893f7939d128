/*-------------------------------------------------------------------------
 *
 * sql.c
 *	  The daemon's SQL surface: load a map, publish, status, readers,
 *	  changes since a generation, and the current traffic as rows.
 *
 * Requests go to the daemon through tdb_shared (module/shared.h); the
 * caller sleeps on a condition variable until the daemon answers, and can
 * cancel the wait (the daemon finishes the request regardless).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "module/geometry.h"
#include "module/shared.h"
#include "module/snapshot.h"
#include "module/trafficdb.h"

PG_FUNCTION_INFO_V1(trafficdb_load_map);
PG_FUNCTION_INFO_V1(trafficdb_publish);
PG_FUNCTION_INFO_V1(trafficdb_status);
PG_FUNCTION_INFO_V1(trafficdb_readers);
PG_FUNCTION_INFO_V1(trafficdb_check_changes_since);
PG_FUNCTION_INFO_V1(trafficdb_feed_part);

#define UNIX_TO_PG_US ((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

/*
 * Wake the daemon; ERROR if it is not running.  Just after the server
 * starts the daemon may not be up yet: give it a few seconds.
 */
static void
wake_daemon(void)
{
	Latch	   *latch = NULL;

	for (int tries = 0; tries < 100; tries++)
	{
		SpinLockAcquire(&tdb_shared->mutex);
		latch = tdb_shared->daemon_latch;
		SpinLockRelease(&tdb_shared->mutex);
		if (latch != NULL)
			break;
		CHECK_FOR_INTERRUPTS();
		pg_usleep(50000);
	}
	if (latch == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the trafficdb daemon is not running"),
				 errhint("It starts with the server and restarts within a second after a failure; "
						 "check the server log for \"trafficdb daemon\".")));
	SetLatch(latch);
}

/* Sleep until done() is true; the daemon broadcasts tdb_shared->cv. */
static void
wait_for_daemon(bool (*done) (uint64), uint64 arg)
{
	ConditionVariablePrepareToSleep(&tdb_shared->cv);
	for (;;)
	{
		if (done(arg))
			break;
		/* wake up now and then to notice a daemon that went away */
		ConditionVariableTimedSleep(&tdb_shared->cv, 1000, PG_WAIT_EXTENSION);
		CHECK_FOR_INTERRUPTS();
	}
	ConditionVariableCancelSleep();
}

/* publish() and load_map() write: on a hot standby the daemon follows the primary instead. */
static void
refuse_on_standby(const char *func)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("%s cannot run on a standby: its trafficdb daemon follows the primary's generation log", func),
				 errhint("Call it on the primary; this server publishes the primary's generations as they are replicated.")));
}

/* ---- load_map --------------------------------------------------------------- */

static bool
map_done(uint64 seq)
{
	bool		d;

	SpinLockAcquire(&tdb_shared->mutex);
	d = tdb_shared->map_done_seq >= seq;
	SpinLockRelease(&tdb_shared->mutex);
	return d;
}

/* Check that column name exists in rel and has one of the types allowed. */
static void
check_column(Oid relid, Name col, const char *role, const Oid *types, int ntypes,
			 const char *expected)
{
	AttrNumber	att;
	Oid			typ;

	if (col == NULL || NameStr(*col)[0] == '\0')
		return;
	att = get_attnum(relid, NameStr(*col));
	if (att == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" (the %s column) does not exist in table %s",
						NameStr(*col), role, get_rel_name(relid))));
	if (ntypes == 0)
		return;
	typ = get_atttype(relid, att);
	for (int i = 0; i < ntypes; i++)
		if (typ == types[i])
			return;
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("column \"%s\" of %s has type %s; the %s column must be %s",
					NameStr(*col), get_rel_name(relid), format_type_be(typ), role, expected)));
}

/*
 * Geometries with SRID 0 (unknown) cannot be placed on the map: refuse them
 * up front.  Other SRIDs are transformed to EPSG:4326 by the daemon.  A
 * column whose type modifier names an SRID needs no scan.
 */
static void
check_srid(Oid relid, Name geom)
{
	AttrNumber	att = get_attnum(relid, NameStr(*geom));
	Oid			typ;
	int32		typmod;
	Oid			coll;
	char	   *pg;
	uint64		bad;

	get_atttypetypmodcoll(relid, att, &typ, &typmod, &coll);
	if (typmod >= 0 && ((typmod & 0x0FFFFF00) - (typmod & 0x10000000)) >> 8 > 0)
		return;
	pg = get_namespace_name(tdb_postgis_schema());
	SPI_connect();
	if (SPI_execute(psprintf("SELECT count(*) FROM %s WHERE %s.ST_SRID(%s) = 0",
							 quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
														get_rel_name(relid)),
							 quote_identifier(pg), quote_identifier(NameStr(*geom))),
					true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not check the SRIDs of %s", get_rel_name(relid));
	bad = (uint64) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
											   &(bool){false}));
	SPI_finish();
	if (bad > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%llu geometries in %s.%s have SRID 0 (unknown); trafficdb needs to know their coordinate system",
						(unsigned long long) bad, get_rel_name(relid), NameStr(*geom)),
				 errhint("Set it, e.g. SELECT UpdateGeometrySRID('%s', '%s', 4326); other SRIDs are transformed to EPSG:4326.",
						 get_rel_name(relid), NameStr(*geom))));
}

Datum
trafficdb_load_map(PG_FUNCTION_ARGS)
{
	Oid			relid;
	TdbMapRequest req;
	uint64		seq;
	TdbRequestStatus status;
	char		msg[TDB_ERRMSG_LEN];
	uint64		count;
	static const Oid id_types[] = {INT2OID, INT4OID, INT8OID};
	static const Oid num_types[] = {INT2OID, INT4OID, INT8OID, FLOAT4OID, FLOAT8OID, NUMERICOID};
	static const Oid bool_types[] = {BOOLOID};
	Oid			geom_types[1];

	tdb_require_preload();
	refuse_on_standby("trafficdb.load_map()");
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source, id_column and geom_column must not be NULL")));
	relid = PG_GETARG_OID(0);
	{
		char		kind = tdb_relation_arg(relid, "trafficdb.load_map", "source",
											"a table or view holding the road segments");

		if (kind != RELKIND_RELATION && kind != RELKIND_PARTITIONED_TABLE && kind != RELKIND_VIEW &&
			kind != RELKIND_MATVIEW && kind != RELKIND_FOREIGN_TABLE)
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("\"%s\" is not a table or view", get_rel_name(relid)),
					 errdetail("It is %s; argument source of trafficdb.load_map must be a table, view, materialized view or foreign table holding the road segments.",
							   tdb_relkind_name(kind))));
	}
	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to read table %s", get_rel_name(relid)),
				 errdetail("The daemon loads the map with its own rights; the caller must be able to read the source.")));

	memset(&req, 0, sizeof(req));
	req.relid = relid;
	req.userid = GetUserId();
	namestrcpy(&req.id_column, NameStr(*PG_GETARG_NAME(1)));
	namestrcpy(&req.geom_column, NameStr(*PG_GETARG_NAME(2)));
	if (!PG_ARGISNULL(3))
		namestrcpy(&req.class_column, NameStr(*PG_GETARG_NAME(3)));
	if (!PG_ARGISNULL(4))
		namestrcpy(&req.name_column, NameStr(*PG_GETARG_NAME(4)));
	if (!PG_ARGISNULL(5))
		namestrcpy(&req.speed_column, NameStr(*PG_GETARG_NAME(5)));
	if (!PG_ARGISNULL(6))
		namestrcpy(&req.oneway_column, NameStr(*PG_GETARG_NAME(6)));
	if (PG_NARGS() > 7 && !PG_ARGISNULL(7))
	{
		char	   *region = text_to_cstring(PG_GETARG_TEXT_PP(7));

		if (strlen(region) >= NAMEDATALEN || region[0] == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("region \"%s\" is not the name of a region of trafficdb.regions", region),
					 errdetail("Region names are 1 to 63 lower-case letters, digits and underscores.")));
		namestrcpy(&req.region, region);
	}

	geom_types[0] = tdb_geometry_oid();
	check_column(relid, &req.id_column, "id", id_types, 3, "smallint, integer or bigint");
	check_column(relid, &req.geom_column, "geometry", geom_types, 1, "geometry (LineStrings)");
	check_column(relid, &req.class_column, "class", NULL, 0, NULL);
	check_column(relid, &req.speed_column, "speed limit", num_types, 6, "numeric (km/h)");
	check_column(relid, &req.oneway_column, "oneway", bool_types, 1, "boolean");
	check_column(relid, &req.name_column, "name", NULL, 0, NULL);
	check_srid(relid, &req.geom_column);

	/* one request at a time: check and claim the request slot together */
	ConditionVariablePrepareToSleep(&tdb_shared->cv);
	for (;;)
	{
		SpinLockAcquire(&tdb_shared->mutex);
		if (tdb_shared->map_done_seq >= tdb_shared->map_req_seq)
		{
			tdb_shared->map_req = req;
			seq = ++tdb_shared->map_req_seq;
			tdb_shared->map_status = TDB_REQ_PENDING;
			SpinLockRelease(&tdb_shared->mutex);
			break;
		}
		SpinLockRelease(&tdb_shared->mutex);
		ConditionVariableTimedSleep(&tdb_shared->cv, 1000, PG_WAIT_EXTENSION);
		CHECK_FOR_INTERRUPTS();
	}
	ConditionVariableCancelSleep();
	wake_daemon();
	wait_for_daemon(map_done, seq);

	SpinLockAcquire(&tdb_shared->mutex);
	status = tdb_shared->map_done_seq == seq ? tdb_shared->map_status : TDB_REQ_DONE;
	strlcpy(msg, tdb_shared->map_error, sizeof(msg));
	count = tdb_shared->map_loaded_count;
	SpinLockRelease(&tdb_shared->mutex);
	if (status == TDB_REQ_FAILED)
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("trafficdb could not load the map from %s", get_rel_name(relid)),
				 errdetail("%s", msg)));
	/* a load that skipped rows says so to its caller, not only to the server log */
	if (msg[0] != '\0')
		ereport(WARNING, (errmsg("trafficdb: %s", msg)));
	PG_RETURN_INT64((int64) count);
}

/* ---- publish ------------------------------------------------------------------ */

static bool
publish_done(uint64 seq)
{
	bool		d;

	SpinLockAcquire(&tdb_shared->mutex);
	d = tdb_shared->publish_done >= seq || tdb_shared->daemon_latch == NULL;
	SpinLockRelease(&tdb_shared->mutex);
	return d;
}

Datum
trafficdb_publish(PG_FUNCTION_ARGS)
{
	bool		wait = PG_ARGISNULL(0) ? true : PG_GETARG_BOOL(0);
	uint64		seq;
	uint64		gen;
	uint64		map_id;
	bool		failed;
	char		why[TDB_ERRMSG_LEN];

	tdb_require_preload();
	refuse_on_standby("trafficdb.publish()");
	SpinLockAcquire(&tdb_shared->mutex);
	seq = ++tdb_shared->publish_requested;
	SpinLockRelease(&tdb_shared->mutex);
	wake_daemon();
	if (wait)
		wait_for_daemon(publish_done, seq);
	SpinLockAcquire(&tdb_shared->mutex);
	gen = tdb_shared->generation;
	map_id = tdb_shared->map_id;
	failed = tdb_shared->publish_failed >= seq;
	strlcpy(why, tdb_shared->publish_error, sizeof(why));
	if (wait && tdb_shared->publish_done < seq)
	{
		/* the daemon went away while we waited */
		failed = true;
		strlcpy(why, "the trafficdb daemon stopped before it published", sizeof(why));
	}
	SpinLockRelease(&tdb_shared->mutex);
	if (wait && failed)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("trafficdb could not publish"),
				 errdetail("%s", why),
				 errhint("See trafficdb.readers and trafficdb.status; generation " UINT64_FORMAT " stays the active one.", gen)));
	if (wait && map_id == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("trafficdb has no map loaded, so there is nothing to publish"),
				 errhint("Load one with SELECT trafficdb.load_map('roads', 'id', 'geom').")));
	PG_RETURN_INT64((int64) gen);
}

/* ---- status -------------------------------------------------------------------- */

Datum
trafficdb_status(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		v[46];
	bool		n[46] = {0};
	TdbShared	s;

	tdb_require_preload();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	SpinLockAcquire(&tdb_shared->mutex);
	memcpy(&s, tdb_shared, offsetof(TdbShared, slots));
	SpinLockRelease(&tdb_shared->mutex);

	v[0] = Int32GetDatum(s.daemon_pid);
	n[0] = s.daemon_pid == 0;
	/*
	 * A status that monitoring polls never goes back: after a restart of the
	 * daemon or a crash-restart (which resets this shared memory) readers are
	 * served the generation published before at once, and the new daemon
	 * says nothing until it publishes again.
	 */
	v[1] = Int64GetDatum((int64) Max(s.generation, tdb_backend_served_generation()));
	v[2] = Int64GetDatum((int64) s.map_id);
	v[3] = Int64GetDatum((int64) s.locations);
	v[4] = Int64GetDatum((int64) s.map_bytes);
	v[5] = Int64GetDatum((int64) s.traffic_bytes);
	v[6] = Float8GetDatum(s.locations ? (double) (s.map_bytes + s.traffic_bytes) / s.locations : 0);
	n[6] = s.locations == 0;
	v[7] = Int64GetDatum((int64) s.shm_bytes);
	v[8] = Float8GetDatum(s.last_map_build_ms);
	v[9] = Float8GetDatum(s.last_publish_ms);
	v[10] = TimestampTzGetDatum(s.last_publish_at);
	n[10] = s.last_publish_at == 0;
	v[11] = Int64GetDatum((int64) s.publishes);
	v[12] = Int64GetDatum((int64) s.publishes_refused);
	v[13] = Int64GetDatum((int64) s.feed_rows_consumed);
	v[14] = Int64GetDatum((int64) s.feed_rows_rejected);
	v[15] = Float8GetDatum(s.last_feed_rows_per_sec);
	v[16] = CStringGetTextDatum(s.last_error);
	n[16] = s.last_error[0] == '\0';
	v[17] = Int64GetDatum((int64) s.versions_revoked);
	v[18] = Int64GetDatum((int64) s.log_first);
	n[18] = s.log_first == 0;
	v[19] = Int64GetDatum((int64) s.log_checkpoint);
	n[19] = s.log_checkpoint == 0;
	v[20] = Int64GetDatum((int64) s.map_generation);
	n[20] = s.map_generation == 0;
	v[21] = Int64GetDatum((int64) s.changes_from);
	n[21] = s.changes_from == 0;
	v[22] = Int64GetDatum((int64) s.log_damaged_at);
	n[22] = s.log_damaged_at == 0;
	v[23] = Int64GetDatum((int64) s.last_log_bytes);
	v[24] = Int64GetDatum((int64) s.replay_generations);
	v[25] = Int64GetDatum((int64) s.replay_mismatches);
	v[26] = Float8GetDatum(s.last_replay_ms);
	v[27] = Int64GetDatum((int64) s.feed_parts_skipped);
	/* a follower (a hot standby): how far its published generation is behind the replicated log */
	v[28] = CStringGetTextDatum(s.follower ? "follower" : "primary");
	v[29] = Int64GetDatum(s.follower && s.follower_log_max > s.generation ? (int64) (s.follower_log_max - s.generation) : 0);
	n[29] = !s.follower;
	v[30] = Float8GetDatum(s.follower_applied_at_us > 0 && s.follower_log_max > s.generation ?
						   (double) ((int64) GetCurrentTimestamp() + UNIX_TO_PG_US - s.follower_applied_at_us) / 1000.0 : 0.0);
	n[30] = !s.follower;
	v[31] = CStringGetTextDatum(NameStr(s.map_region));
	n[31] = NameStr(s.map_region)[0] == '\0';
	v[32] = Int64GetDatum((int64) s.subscriptions);
	v[33] = Int64GetDatum((int64) s.last_events);
	v[34] = Float8GetDatum(s.last_match_ms);
	v[35] = Int64GetDatum((int64) s.subscribers);
	v[36] = Int64GetDatum((int64) s.events_delivered);
	v[37] = Int64GetDatum((int64) s.events_dropped);
	v[38] = Int64GetDatum((int64) s.match_overruns);
	v[39] = Int64GetDatum((int64) s.match_records_skipped);
	v[40] = Int64GetDatum((int64) s.subscriptions_unindexed);
	v[41] = Int64GetDatum((int64) s.notify_sent);
	v[42] = Int64GetDatum((int64) s.notify_dropped);
	/* when last_error happened: it stays after it is resolved (compare with last_publish_at) */
	v[43] = TimestampTzGetDatum(s.last_error_at);
	n[43] = s.last_error_at == 0 || s.last_error[0] == '\0';
	v[44] = Int64GetDatum((int64) s.last_publish_entries);
	v[45] = Int64GetDatum((int64) s.shm_huge_bytes);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, v, n)));
}

/* ---- readers ------------------------------------------------------------------- */

Datum
trafficdb_readers(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TimestampTz now = GetCurrentTimestamp();
	uint32		nbackend;
	uint32		nslots;

	tdb_require_preload();
	nbackend = tdb_shared->nbackend_slots;
	nslots = tdb_shared->nslots;
	InitMaterializedSRF(fcinfo, 0);

	/*
	 * Backends' pins are read where they live; external readers' as the
	 * daemon last saw them (backends do not map <prefix>.readers, which
	 * members of shm_group can write).
	 */
	for (uint32 s = 0; s < nslots; s++)
	{
		bool		backend = s < nbackend;
		uint64		pin;
		Datum		v[7];
		bool		n[7] = {0};
		TdbSlotWatch w;

		SpinLockAcquire(&tdb_shared->mutex);
		w = tdb_shared->slots[s];
		SpinLockRelease(&tdb_shared->mutex);
		pin = backend ? atomic_load(&tdb_backend_pins[s].pin) : w.pin;
		if (pin == 0)
			continue;
		v[0] = Int32GetDatum((int32) (backend ? s : s - nbackend));
		v[1] = CStringGetTextDatum(backend ? "backend" : "external");
		v[2] = Int32GetDatum(backend ? (s < ProcGlobal->allProcCount ? ProcGlobal->allProcs[s].pid : 0)
							 : w.pid);
		v[3] = Int64GetDatum((int64) TDB_ACTIVE_GEN(pin));
		if (w.pin == pin && w.since != 0)
		{
			v[4] = TimestampTzGetDatum(w.since);
			v[5] = Float8GetDatum((double) (now - w.since) / USECS_PER_SEC);
			v[6] = BoolGetDatum(now - w.since > (int64) tdb_reader_pin_timeout_ms * 1000);
		}
		else
		{
			/* the active version, or a pin the daemon has not looked at yet */
			n[4] = n[5] = true;
			v[6] = BoolGetDatum(false);
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, n);
	}
	return (Datum) 0;
}

/* ---- changes_since ----------------------------------------------------------- */

/*
 * ERROR unless the changes after generation g are all known: the generation
 * log keeps them back to its trim point, and a reloaded map starts over.
 */
Datum
trafficdb_check_changes_since(PG_FUNCTION_ARGS)
{
	int64		g = PG_GETARG_INT64(0);
	uint64		from;
	uint64		first;
	uint64		mapgen;

	tdb_require_preload();
	SpinLockAcquire(&tdb_shared->mutex);
	from = tdb_shared->changes_from;
	first = tdb_shared->log_first;
	mapgen = tdb_shared->map_generation;
	SpinLockRelease(&tdb_shared->mutex);
	if (g >= 0 && from > 0 && (uint64) g + 1 < from)
	{
		if (from > first)
			ereport(ERROR,
					(errcode(ERRCODE_SNAPSHOT_TOO_OLD),
					 errmsg("generation " INT64_FORMAT " is older than the map, which was reloaded at generation " UINT64_FORMAT,
							g, mapgen),
					 errdetail("Locations may have been added or removed since; changes are known from generation " UINT64_FORMAT " on.", mapgen),
					 errhint("Read the current state with trafficdb.current_traffic() and continue from its generation.")));
		ereport(ERROR,
				(errcode(ERRCODE_SNAPSHOT_TOO_OLD),
				 errmsg("generation " INT64_FORMAT " is older than the generation log's trim point " UINT64_FORMAT, g, first),
				 errdetail("Changes before generation " UINT64_FORMAT " are no longer kept (trafficdb.log_retention = %d s, "
						   "trafficdb.log_retention_generations = %d).", first, tdb_log_retention_s, tdb_log_retention_generations),
				 errhint("Read the current state with trafficdb.current_traffic() and continue from its generation.")));
	}
	PG_RETURN_VOID();
}

/* ---- the feed partition ---------------------------------------------------------- */

/*
 * The feed partition new rows go to: the default of trafficdb.feed.part.
 * One per transaction: the one the daemon names at the transaction's first
 * row.  The daemon takes a partition whole once no transaction holds it, so
 * a transaction whose rows all went to one partition is published in one
 * generation; rows of one transaction (or one long COPY) routed to two
 * partitions across a flip would be published in two, and readers would see
 * half of a committed transaction.
 */
static LocalTransactionId feed_part_lxid = InvalidLocalTransactionId;
static int16 feed_part_of_lxid;

Datum
trafficdb_feed_part(PG_FUNCTION_ARGS)
{
	(void) fcinfo;
	tdb_require_preload();
	if (MyProc == NULL || MyProc->lxid == InvalidLocalTransactionId)
		PG_RETURN_INT16((int16) (pg_atomic_read_u32(&tdb_shared->feed_part) % TDB_FEED_PARTS));
	if (feed_part_lxid != MyProc->lxid)
	{
		feed_part_of_lxid = (int16) (pg_atomic_read_u32(&tdb_shared->feed_part) % TDB_FEED_PARTS);
		feed_part_lxid = MyProc->lxid;
	}
	PG_RETURN_INT16(feed_part_of_lxid);
}
