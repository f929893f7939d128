/*-------------------------------------------------------------------------
 *
 * subscriptions.c
 *	  Rows of trafficdb.subscriptions as the matcher's filters
 *	  (src/submatch.h): the check of each row on INSERT and UPDATE, the
 *	  daemon's reading, and the version the daemon reloads on.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "module/geometry.h"
#include "module/shared.h"
#include "module/snapshot.h"
#include "module/subscriptions.h"
#include "module/trafficdb.h"
#include "subfilter.h"
#include "subring/subring.h"

PG_FUNCTION_INFO_V1(trafficdb_subscription_check);
PG_FUNCTION_INFO_V1(trafficdb_subscriptions_changed);

/*
 * A column of a row of trafficdb.subscriptions, checked to have the type
 * the table gives it (typid; InvalidOid: PostGIS's geometry): whatever
 * tuple descriptor arrives, nothing is read as another type.
 */
static Datum
column(TupleDesc td, HeapTuple tup, const char *name, Oid typid, bool *isnull)
{
	int			att = SPI_fnumber(td, name);
	Oid			have;

	if (att <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("trafficdb.subscriptions has no column \"%s\"", name),
				 errhint("The table was altered: reinstall the extension.")));
	if (!OidIsValid(typid))
		typid = tdb_geometry_oid();
	have = TupleDescAttr(td, att - 1)->atttypid;
	if (have != typid)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of trafficdb.subscriptions is of type %s, expected %s",
						name, format_type_be(have), format_type_be(typid)),
				 errhint("The table was altered: reinstall the extension.")));
	return heap_getattr(tup, att, td, isnull);
}

/* A NOT NULL column's value, refused as PostgreSQL's constraint would when NULL. */
static Datum
column_not_null(TupleDesc td, HeapTuple tup, const char *name, Oid typid)
{
	bool		isnull;
	Datum		d = column(td, tup, name, typid, &isnull);

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("null value in column \"%s\" of relation \"subscriptions\" violates not-null constraint", name),
				 errdetail("trafficdb.subscriptions.%s is NOT NULL.", name),
				 errhint("Leave the column out to get its default.")));
	return d;
}

static void
refuse(int32 id, const char *fmt, const char *value, const char *expected)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg(fmt, value),
			 errdetail("Subscription %d: expected %s.", id, expected)));
}

void
tdb_subscription_filter(TupleDesc td, HeapTuple tup, TdbSubFilter *f, MemoryContext cxt)
{
	bool		isnull;
	Datum		d;
	int32		id;
	char		err[TDB_ERRLEN];
	char	   *cond;
	char	   *events;

	memset(f, 0, sizeof(*f));
	d = column(td, tup, "id", INT4OID, &isnull);
	id = isnull ? 0 : DatumGetInt32(d);
	f->id = (uint32) id;

	d = column(td, tup, "location_ids", INT8ARRAYOID, &isnull);
	if (!isnull)
	{
		ArrayType  *a = DatumGetArrayTypeP(d);
		Datum	   *elems;
		bool	   *nulls;
		int			n;
		uint64	   *ids;

		deconstruct_array(a, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &elems, &nulls, &n);
		ids = MemoryContextAlloc(cxt, sizeof(uint64) * Max(n, 1));
		for (int i = 0; i < n; i++)
		{
			if (nulls[i])
				refuse(id, "location_ids holds a NULL at position %s", psprintf("%d", i + 1), "location ids, no NULLs");
			ids[i] = (uint64) DatumGetInt64(elems[i]);
		}
		f->area = TDB_SUB_IDS;
		f->ids = ids;
		f->nids = (uint32) n;
	}

	d = column(td, tup, "area", InvalidOid, &isnull);
	if (!isnull)
	{
		char	   *type = tdb_geometry_type(d);
		int32		srid = tdb_geometry_srid(d);
		bytea	   *wkb;
		uint32		npoints,
					nrings;
		double	   *xy;
		uint32	   *ring_end;
		int			rc;

		if (strcmp(type, "POLYGON") != 0)
			refuse(id, "area is a %s", type, "a Polygon (one subscription per part of a MultiPolygon)");
		if (srid != 4326)
			refuse(id, "area has SRID %s", psprintf("%d", srid), "SRID 4326 (lon/lat); use ST_Transform(area, 4326)");
		wkb = tdb_geometry_wkb(d);
		rc = tdb_geo_wkb_shape((const unsigned char *) VARDATA_ANY(wkb), VARSIZE_ANY_EXHDR(wkb), NULL, &npoints,
							   NULL, &nrings);
		if (rc != 3 || npoints > 100000)
			refuse(id, "area is %s", rc == 0 ? "an empty polygon" : rc < 0 ? "a polygon with invalid coordinates" :
				   psprintf("a polygon of %u points", npoints),
				   "a Polygon of finite lon/lat coordinates enclosing an area, at most 100,000 points");
		xy = MemoryContextAlloc(cxt, sizeof(double) * 2 * npoints);
		ring_end = MemoryContextAlloc(cxt, sizeof(uint32) * nrings);
		(void) tdb_geo_wkb_shape((const unsigned char *) VARDATA_ANY(wkb), VARSIZE_ANY_EXHDR(wkb), xy, &npoints,
								 ring_end, &nrings);
		if (!tdb_knn_query_init(&f->polygon, TDB_KNN_POLYGON, xy, npoints, ring_end, nrings))
			refuse(id, "area is %s", "a polygon the matcher cannot use", "a Polygon of finite lon/lat coordinates");
		f->area = TDB_SUB_POLYGON;
	}

	d = column(td, tup, "center", InvalidOid, &isnull);
	if (!isnull)
	{
		int32		srid;
		char	   *what;
		bool		rn;
		Datum		r;

		if (!tdb_geometry_point(d, &f->lon, &f->lat, &srid, &what))
			refuse(id, "center is %s", what, "a Point");
		if (srid != 4326)
			refuse(id, "center has SRID %s", psprintf("%d", srid), "SRID 4326 (lon/lat)");
		r = column(td, tup, "radius_m", FLOAT8OID, &rn);
		f->radius_m = rn ? -1 : DatumGetFloat8(r);
		f->area = TDB_SUB_RADIUS;
	}

	cond = TextDatumGetCString(column_not_null(td, tup, "condition", TEXTOID));
	f->cond = strcmp(cond, "congestion_at_least") == 0 ? TDB_SUB_CONGESTION_AT_LEAST :
		strcmp(cond, "speed_below") == 0 ? TDB_SUB_SPEED_BELOW :
		strcmp(cond, "speed_below_pct") == 0 ? TDB_SUB_SPEED_BELOW_PCT :
		strcmp(cond, "incident") == 0 ? TDB_SUB_INCIDENT : TDB_SUB_ANY;
	d = column(td, tup, "value", FLOAT8OID, &isnull);
	f->value = isnull ? 0 : DatumGetFloat8(d);
	if (isnull && (f->cond == TDB_SUB_CONGESTION_AT_LEAST || f->cond == TDB_SUB_SPEED_BELOW ||
				   f->cond == TDB_SUB_SPEED_BELOW_PCT))
		refuse(id, "condition %s has no value", cond, "a value: congestion 0-4, km/h, or % of free flow");
	events = TextDatumGetCString(column_not_null(td, tup, "events", TEXTOID));
	f->on = strcmp(events, "enter_exit") == 0 ? TDB_SUB_ON_ENTER_EXIT : TDB_SUB_ON_CHANGE;

	if (!tdb_sub_filter_check(f, err))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s", err)));
}

/* ---- the row check -------------------------------------------------------------- */

/* the most location ids one subscription lists (README, Subscriptions) */
#define MAX_SUBSCRIPTION_IDS 10000
/* half the Earth's circumference (WGS 84 equator): no point is further away */
#define MAX_RADIUS_M 20037508.0

/*
 * trafficdb.subscriptions: the table of that name in schema trafficdb, the
 * schema the extension's script creates (a member of the extension), never
 * through search_path.
 */
static Oid
subscriptions_relid(void)
{
	Oid			ext = get_extension_oid("trafficdb", true);
	Oid			nsp = get_namespace_oid("trafficdb", true);
	Oid			relid = InvalidOid;

	if (OidIsValid(ext) && OidIsValid(nsp) && getExtensionOfObject(NamespaceRelationId, nsp) == ext)
		relid = get_relname_relid("subscriptions", nsp);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the extension trafficdb has no table subscriptions in this database"),
				 errhint("CREATE EXTENSION trafficdb;")));
	return relid;
}

/*
 * Refuse to run as anything but a trigger of trafficdb.subscriptions (the
 * functions are not executable by PUBLIC, but a superuser could still
 * attach them elsewhere): on another table the columns read are not ours.
 */
static TriggerData *
own_trigger(FunctionCallInfo fcinfo, const char *fname, bool before_row)
{
	TriggerData *trig = (TriggerData *) fcinfo->context;
	Relation	rel;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trafficdb.%s() is a trigger function of trafficdb.subscriptions", fname),
				 errhint("It is not called directly.")));
	rel = trig->tg_relation;
	if (RelationGetRelid(rel) != subscriptions_relid())
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trafficdb.%s() fires only on trafficdb.subscriptions, not on %s", fname,
						quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												   RelationGetRelationName(rel))),
				 errdetail("It reads and checks the columns of trafficdb.subscriptions."),
				 errhint("DROP TRIGGER %s ON %s;", quote_identifier(trig->tg_trigger->tgname),
						 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
													RelationGetRelationName(rel)))));
	if (before_row && (!TRIGGER_FIRED_BEFORE(trig->tg_event) || !TRIGGER_FIRED_FOR_ROW(trig->tg_event) ||
					   !(TRIGGER_FIRED_BY_INSERT(trig->tg_event) || TRIGGER_FIRED_BY_UPDATE(trig->tg_event))))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trafficdb.%s() is the BEFORE INSERT OR UPDATE ROW trigger of trafficdb.subscriptions", fname)));
	return trig;
}

/*
 * A role owns its subscriptions: owner is the current role, unless a
 * superuser writes the row (a restore, an administrator).
 */
static const char *
check_owner(TupleDesc td, HeapTuple tup)
{
	const char *owner = NameStr(*DatumGetName(column_not_null(td, tup, "owner", NAMEOID)));
	char	   *me = GetUserNameFromId(GetUserId(), false);

	if (!superuser() && strcmp(owner, me) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("owner \"%s\" is not the current role \"%s\"", owner, me),
				 errdetail("A role writes subscriptions of its own only."),
				 errhint("Leave owner out: it defaults to current_user.")));
	return owner;
}

/*
 * trafficdb.max_subscriptions_per_role, counted for owner at an INSERT
 * (superusers are not counted).  Inserts of one role are serialized by a
 * transaction-level advisory lock on the role's name, so that concurrent
 * sessions of one role cannot pass the limit together.
 */
static void
check_budget(Relation rel, const char *owner)
{
	LOCKTAG		tag;
	Datum		arg = CStringGetDatum(owner);
	Oid			argtype = NAMEOID;
	int64		n;
	bool		isnull;
	Oid			save_userid;
	int			save_sec;
	SPIPlanPtr	plan;

	if (superuser())
		return;
	/*
	 * key: ('tdbs', hash of the name), with field4 3: SQL's advisory lock
	 * functions make only 1 (one int8 key) and 2 (two int4 keys), so no
	 * role can take this lock itself and hold another role's INSERTs.
	 */
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, 0x74646273u,
						 DatumGetUInt32(hash_any((const unsigned char *) owner, (int) strlen(owner))), 3);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);

	/*
	 * Counted as the bootstrap superuser (in a security-restricted
	 * operation), so that neither row-level security nor a role granted
	 * INSERT without SELECT changes what is counted; not read-only, to see
	 * the rows this statement inserted before.
	 */
	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID, save_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	SPI_connect();
	/*
	 * In the latest snapshot, not the transaction's: in REPEATABLE READ or
	 * SERIALIZABLE a snapshot taken before another session of the role
	 * committed its rows would not count them (each session would get the
	 * whole limit).  The advisory lock above makes that session's rows
	 * committed before we count.
	 */
	plan = SPI_prepare(psprintf("SELECT count(*) FROM %s WHERE owner OPERATOR(pg_catalog.=) $1",
								quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
														   RelationGetRelationName(rel))),
					   1, &argtype);
	if (plan == NULL ||
		SPI_execute_snapshot(plan, &arg, NULL, GetLatestSnapshot(), InvalidSnapshot, false, false, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not count the subscriptions of role \"%s\"", owner);
	n = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	SetUserIdAndSecContext(save_userid, save_sec);
	if (n >= tdb_max_subscriptions_per_role)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("role \"%s\" has " INT64_FORMAT " subscriptions: trafficdb.max_subscriptions_per_role is %d",
						owner, n, tdb_max_subscriptions_per_role),
				 errdetail("Each subscription costs the daemon matching time at every publication."),
				 errhint("Delete subscriptions the role no longer needs, or ask a superuser to raise "
						 "trafficdb.max_subscriptions_per_role (ALTER ROLE ... SET).")));
}

/*
 * id at an INSERT by a role that is not a superuser: one the identity's
 * sequence has handed out.  INSERT ... OVERRIDING SYSTEM VALUE needs no more
 * than INSERT, and a row taking an id the sequence hands out next would make
 * another role's INSERT fail with a duplicate key.  (UPDATE of id is refused
 * by PostgreSQL: it is GENERATED ALWAYS.)  Superusers, restoring rows, are
 * not checked.
 */
static void
check_id(Relation rel, HeapTuple tup)
{
	TupleDesc	td = RelationGetDescr(rel);
	bool		isnull;
	Datum		d = column(td, tup, "id", INT4OID, &isnull);
	int32		id = isnull ? 0 : DatumGetInt32(d);
	Oid			seq;
	Datum		last;
	LOCAL_FCINFO(lfcinfo, 1);
	Oid			save_userid;
	int			save_sec;

	if (superuser())
		return;
	seq = getIdentitySequence(RelationGetRelid(rel), (AttrNumber) SPI_fnumber(td, "id"), false);
	/* read as the bootstrap superuser: INSERT alone does not give SELECT on the sequence */
	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID, save_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	InitFunctionCallInfoData(*lfcinfo, NULL, 1, InvalidOid, NULL, NULL);
	lfcinfo->args[0].value = ObjectIdGetDatum(seq);
	lfcinfo->args[0].isnull = false;
	last = pg_sequence_last_value(lfcinfo);
	SetUserIdAndSecContext(save_userid, save_sec);
	if (isnull || id < 1 || lfcinfo->isnull || (int64) id > DatumGetInt64(last))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("id %d was not handed out by trafficdb.subscriptions_id_seq", id),
				 errdetail("A role that is not a superuser takes the id the sequence gives (ids 1 to " INT64_FORMAT " are handed out so far).",
						   lfcinfo->isnull ? (int64) 0 : DatumGetInt64(last)),
				 errhint("Leave id out (no OVERRIDING SYSTEM VALUE).")));
}

static int
cmp_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return x < y ? -1 : x > y;
}

/*
 * location_ids as the matcher wants them: one dimension, no NULL, at most
 * MAX_SUBSCRIPTION_IDS, each once and in order.  Returns the row with the
 * normalized array when it changed.
 */
static HeapTuple
normalize_ids(Relation rel, HeapTuple tup)
{
	TupleDesc	td = RelationGetDescr(rel);
	bool		isnull;
	Datum		d = column(td, tup, "location_ids", INT8ARRAYOID, &isnull);
	ArrayType  *a;
	Datum	   *elems;
	bool	   *nulls;
	int			n,
				k;
	int64	   *ids;
	int			att;
	Datum		newval;
	bool		newnull = false;

	if (isnull)
		return tup;
	a = DatumGetArrayTypeP(d);
	if (ARR_ELEMTYPE(a) != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("location_ids is an array of %s, expected bigint", format_type_be(ARR_ELEMTYPE(a)))));
	if (ARR_NDIM(a) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("location_ids is a %d-dimensional array", ARR_NDIM(a)),
				 errdetail("Expected a one-dimensional list of location ids, e.g. '{5, 6, 7}'.")));
	n = ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a));
	if (n > MAX_SUBSCRIPTION_IDS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("location_ids holds %d ids: at most %d", n, MAX_SUBSCRIPTION_IDS),
				 errdetail("A subscription lists at most %d location ids.", MAX_SUBSCRIPTION_IDS),
				 errhint("Subscribe to an area (a polygon or a radius), or split the list into several subscriptions.")));
	if (n == 0)
		return tup;				/* tdb_sub_filter_check names it */
	deconstruct_array(a, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &elems, &nulls, &n);
	ids = palloc(sizeof(int64) * n);
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("location_ids holds a NULL at position %d", i + 1),
					 errdetail("Expected location ids, no NULLs.")));
		ids[i] = DatumGetInt64(elems[i]);
	}
	qsort(ids, n, sizeof(int64), cmp_int64);
	k = 0;
	for (int i = 0; i < n; i++)
		if (k == 0 || ids[k - 1] != ids[i])
			ids[k++] = ids[i];
	for (int i = 0; i < k; i++)
		elems[i] = Int64GetDatum(ids[i]);
	/* a lower bound other than 1 or another order: store the normalized list */
	newval = PointerGetDatum(construct_array(elems, k, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	att = SPI_fnumber(td, "location_ids");
	return heap_modify_tuple_by_cols(tup, td, 1, &att, &newval, &newnull);
}

Datum
trafficdb_subscription_check(PG_FUNCTION_ARGS)
{
	TriggerData *trig = own_trigger(fcinfo, "_subscription_check", true);
	Relation	rel = trig->tg_relation;
	TupleDesc	td = RelationGetDescr(rel);
	HeapTuple	tup;
	TdbSubFilter f;
	const char *owner;
	bool		isnull;
	Datum		d;

	tup = TRIGGER_FIRED_BY_UPDATE(trig->tg_event) ? trig->tg_newtuple : trig->tg_trigtuple;
	owner = check_owner(td, tup);
	if (TRIGGER_FIRED_BY_INSERT(trig->tg_event))
	{
		check_id(rel, tup);
		check_budget(rel, owner);
	}
	tup = normalize_ids(rel, tup);
	tdb_subscription_filter(td, tup, &f, CurrentMemoryContext);

	/* what the matcher would take but means nothing on Earth */
	if (f.area == TDB_SUB_RADIUS && f.radius_m > MAX_RADIUS_M)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("radius %g m is out of range: expected 0 to %.0f m", f.radius_m, MAX_RADIUS_M),
				 errdetail("Subscription %d: no point on Earth is further than half its circumference (%.0f m).",
						   (int32) f.id, MAX_RADIUS_M),
				 errhint("For the whole map, use an area covering it.")));
	if (f.area == TDB_SUB_POLYGON)
	{
		double		b[4];
		char	   *why;

		d = column(td, tup, "area", InvalidOid, &isnull);
		if (!tdb_geometry_bounds(d, b) || !(b[0] >= -180 && b[2] <= 180 && b[1] >= -90 && b[3] <= 90))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("area (%g, %g, %g, %g) reaches outside longitudes [-180, 180] and latitudes [-90, 90]",
							b[0], b[1], b[2], b[3]),
					 errdetail("Subscription %d: expected a Polygon of lon/lat coordinates (SRID 4326).", (int32) f.id)));
		why = tdb_geometry_invalid_reason(d);
		if (why != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("area is not a valid polygon: %s", why),
					 errdetail("Subscription %d: expected a valid Polygon (ST_IsValid).", (int32) f.id),
					 errhint("ST_MakeValid() repairs it; a MultiPolygon it makes is one subscription per part.")));
	}

	/* ids the published map lacks (when one is published) */
	if (f.area == TDB_SUB_IDS && tdb_shared != NULL && tdb_shared->map_id != 0)
		for (uint32 i = 0; i < f.nids; i++)
			if (tdb_backend_find_location(f.ids[i]) < 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("location id " INT64_FORMAT " is not in the published map", (int64) f.ids[i]),
						 errdetail("Subscription %d: expected ids of trafficdb.locations.", (int32) f.id)));
	return PointerGetDatum(tup);
}

/* ---- the version the daemon reloads on ------------------------------------------- */

static bool changed_in_xact = false;
static bool callback_registered = false;

static void
subs_xact_callback(XactEvent event, void *arg)
{
	(void) arg;
	if (event == XACT_EVENT_COMMIT && changed_in_xact && tdb_shared != NULL)
	{
		Latch	   *latch;

		pg_atomic_fetch_add_u64(&tdb_shared->subs_version, 1);
		SpinLockAcquire(&tdb_shared->mutex);
		latch = tdb_shared->daemon_latch;
		SpinLockRelease(&tdb_shared->mutex);
		if (latch)
			SetLatch(latch);
	}
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
		changed_in_xact = false;
}

Datum
trafficdb_subscriptions_changed(PG_FUNCTION_ARGS)
{
	(void) own_trigger(fcinfo, "_subscriptions_changed", false);
	if (!callback_registered)
	{
		RegisterXactCallback(subs_xact_callback, NULL);
		callback_registered = true;
	}
	changed_in_xact = true;
	return PointerGetDatum(NULL);
}

/* ---- events for SQL sessions ---------------------------------------------------- */

PG_FUNCTION_INFO_V1(trafficdb_subscription_events);

/* this session's slots, one per subscription it reads */
typedef struct SessionSub
{
	int32		id;
	Oid			role;			/* the role that opened it */
	TdbSubConsumer c;
	bool		open;
} SessionSub;

#define MAX_SESSION_SUBS 16
static SessionSub session_subs[MAX_SESSION_SUBS];
static bool session_exit_registered = false;

static void
close_session_subs(int code, Datum arg)
{
	(void) code;
	(void) arg;
	for (int i = 0; i < MAX_SESSION_SUBS; i++)
		if (session_subs[i].open)
		{
			tdb_subring_consumer_close(&session_subs[i].c);
			session_subs[i].open = false;
		}
}

/*
 * Subscription id is not among the rows the current role sees: another
 * role's (permission denied, naming the id) or none (does not exist).
 * Whether it exists is looked up as the bootstrap superuser, in a
 * security-restricted operation, by id only.
 */
static void
refuse_unseen(int32 id)
{
	Oid			save_userid;
	int			save_sec;
	Datum		arg = Int32GetDatum(id);
	Oid			argtype = INT4OID;
	bool		exists;

	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID, save_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	exists = SPI_execute_with_args("SELECT 1 FROM trafficdb.subscriptions WHERE id OPERATOR(pg_catalog.=) $1",
								   1, &argtype, &arg, NULL, true, 1) == SPI_OK_SELECT && SPI_processed == 1;
	SetUserIdAndSecContext(save_userid, save_sec);
	if (exists)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for subscription %d", id),
				 errdetail("Subscription %d belongs to another role; a role receives the events of its own subscriptions only.", id),
				 errhint("Read the events as the role that owns it.")));
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("subscription %d does not exist", id),
			 errhint("Its rows are in trafficdb.subscriptions.")));
}

/*
 * A slot this session opened for id as another role (SET ROLE since): the
 * current role must see the row too.
 */
static void
check_still_visible(int32 id)
{
	Datum		arg = Int32GetDatum(id);
	Oid			argtype = INT4OID;

	SPI_connect();
	if (SPI_execute_with_args("SELECT 1 FROM trafficdb.subscriptions WHERE id OPERATOR(pg_catalog.=) $1",
							  1, &argtype, &arg, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		refuse_unseen(id);
	SPI_finish();
}

/*
 * Slots of <prefix>.subs held (claimed or active) by sessions of this
 * session's login role.  A slot's owner pid is a backend's when
 * BackendPidGetProc finds it: external subscribers are not sessions and are
 * not counted.
 */
static int
role_slots(const TdbSubConsumer *c)
{
	int			n = 0;

	for (uint32 i = 0; i < c->nslots; i++)
	{
		const TdbSubSlot *sl = (const TdbSubSlot *) ((const char *) c->hdr + tdb_subring_slot_offset(c->ring_events, i));
		uint32		state = atomic_load_explicit(&sl->state, memory_order_acquire);
		int32		pid;
		PGPROC	   *proc;

		if (state != TDB_SUBSLOT_CLAIMED && state != TDB_SUBSLOT_ACTIVE)
			continue;
		pid = atomic_load_explicit(&sl->pid, memory_order_relaxed);
		if (pid <= 0)
			continue;
		proc = BackendPidGetProc(pid);
		if (proc != NULL && proc->roleId == MyProc->roleId)
			n++;
	}
	return n;
}

/* This session's slot for subscription id: made at the first call from its row. */
static SessionSub *
session_sub(int32 id)
{
	SessionSub *free_one = NULL;
	TdbSubFilter f;
	static unsigned char buf[TDB_SUBFILTER_BYTES];
	char		err[TDB_ERRLEN];
	char		live[64];
	size_t		len;
	Datum		arg = Int32GetDatum(id);
	Oid			argtype = INT4OID;
	int			rc;
	MemoryContext cxt = CurrentMemoryContext;

	for (int i = 0; i < MAX_SESSION_SUBS; i++)
	{
		if (session_subs[i].open && session_subs[i].id == id)
		{
			if (session_subs[i].role != GetUserId())
				check_still_visible(id);
			return &session_subs[i];
		}
		if (!session_subs[i].open && free_one == NULL)
			free_one = &session_subs[i];
	}
	if (free_one == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a session reads the events of at most %d subscriptions", MAX_SESSION_SUBS)));

	SPI_connect();
	/* as the current role: row-level security shows it its own rows only */
	if (SPI_execute_with_args("SELECT * FROM trafficdb.subscriptions WHERE id OPERATOR(pg_catalog.=) $1",
							  1, &argtype, &arg, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		refuse_unseen(id);
	tdb_subscription_filter(SPI_tuptable->tupdesc, SPI_tuptable->vals[0], &f, cxt);
	f.id = (uint32) id;
	len = tdb_subfilter_encode(&f, buf, sizeof(buf), err);
	SPI_finish();
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("subscription %d cannot be read by a session: %s", id, err),
				 errhint("Use LISTEN trafficdb_subscription_%d_<notify_key> (notify => true), or a smaller polygon or id list.", id)));

	tdb_live_prefix(live);
	rc = tdb_subring_consumer_open(&free_one->c, live, 0, NULL, err);
	if (rc == TDB_SHM_OK)
	{
		LOCKTAG		tag;
		int			held;

		/*
		 * One role's sessions take at most
		 * trafficdb.max_subscriber_slots_per_role slots, so that other roles,
		 * external subscribers and request-response groups still get some.
		 * The count and the claim are one step for the role's sessions: a
		 * lock of our own (an advisory tag no SQL function makes, field4 3),
		 * released once the slot is claimed (it shows then), not held while
		 * this call waits for events.
		 */
		SET_LOCKTAG_ADVISORY(tag, InvalidOid, 0x74646273, (uint32) MyProc->roleId, 3);
		(void) LockAcquire(&tag, ExclusiveLock, false, false);
		held = role_slots(&free_one->c);
		if (held >= tdb_max_subscriber_slots_per_role)
		{
			char	   *role = GetUserNameFromId(MyProc->roleId, true);

			tdb_subring_consumer_close(&free_one->c);
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("cannot receive the events of subscription %d: role \"%s\" holds %d subscriber slots, the limit of trafficdb.max_subscriber_slots_per_role (%d)",
							id, role ? role : "?", held, tdb_max_subscriber_slots_per_role),
					 errdetail("Each session reading a subscription with trafficdb.subscription_events() holds a slot of %s.subs until it ends; the sessions of one login role share the limit.",
							   tdb_shm_prefix()),
					 errhint("End sessions of this role that read subscriptions, or have an administrator raise trafficdb.max_subscriber_slots_per_role.")));
		}
		/* the sessions reading one subscription are a group: each event to one of them */
		rc = tdb_subring_subscribe(&free_one->c, buf, (uint32) len, 0x5351000000000000ull | (uint32) id,
								   TDB_SUBGROUP_ROUND_ROBIN);
		/* claimed (its slot now shows, owned by our pid) or not: the role's next claim may go */
		LockRelease(&tag, ExclusiveLock, false);
		if (rc != TDB_SHM_OK)
		{
			strlcpy(err, free_one->c.err, sizeof(err));
			tdb_subring_consumer_close(&free_one->c);
		}
	}
	if (rc != TDB_SHM_OK)
		ereport(ERROR,
				(errcode(rc == TDB_SHM_ENOSLOT ? ERRCODE_TOO_MANY_CONNECTIONS : ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot receive the events of subscription %d: %s", id, err),
				 rc == TDB_SHM_ENOSLOT ? errhint("Every slot of trafficdb.max_subscribers is taken (sessions, external subscribers, request-response members): end some, or raise trafficdb.max_subscribers.") :
				 rc == TDB_SHM_ESTALE || rc == TDB_SHM_EINVAL || rc == TDB_SHM_ECORRUPT ?
				 errhint("The daemon makes the subscribers' segment anew within a second of finding it damaged (see trafficdb.status.last_error): call again.") : 0));
	if (!session_exit_registered)
	{
		before_shmem_exit(close_session_subs, (Datum) 0);
		session_exit_registered = true;
	}
	free_one->id = id;
	free_one->role = GetUserId();
	free_one->open = true;
	return free_one;
}

Datum
trafficdb_subscription_events(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int32		id;
	int32		max_events = PG_ARGISNULL(1) ? 1000 : PG_GETARG_INT32(1);
	int32		timeout_ms = PG_ARGISNULL(2) ? 0 : PG_GETARG_INT32(2);
	SessionSub *ss;
	TdbSubEvent ev[256];
	int			got = 0;
	TimestampTz deadline;
	static const char *const kinds[] = {"?", "change", "enter", "exit", "overrun"};

	tdb_require_preload();
	if (PG_ARGISNULL(0))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("subscription must not be NULL")));
	if (max_events < 1 || max_events > 1000000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_events %d is out of range: expected 1 to 1,000,000", max_events)));
	if (timeout_ms < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("timeout_ms %d is negative: expected 0 (do not wait) or more", timeout_ms)));
	id = PG_GETARG_INT32(0);
	InitMaterializedSRF(fcinfo, 0);
	ss = session_sub(id);
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	while (got < max_events)
	{
		/* wait in slices of at most 100 ms: cancel and statement_timeout are honoured */
		long		left = got > 0 ? 0 :
			Min(100, (long) ((deadline - GetCurrentTimestamp()) / 1000));
		int			n = tdb_subring_receive(&ss->c, ev, (uint32) Min(256, max_events - got), left > 0 ? (int) left : 0);

		CHECK_FOR_INTERRUPTS();
		if (n == TDB_SUBRING_EINTR)
			continue;
		if (n < 0)
		{
			char		err[TDB_SHM_ERRLEN];
			bool		broken = tdb_subring_consumer_broken(&ss->c);

			strlcpy(err, ss->c.err, sizeof(err));
			tdb_subring_consumer_close(&ss->c);
			ss->open = false;
			/* say what happened: only a stopped or remade segment is the daemon's doing */
			if (n == TDB_SHM_ECORRUPT)
				ereport(ERROR,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("the events of subscription %d stopped: its slot in %s.subs is corrupt: %s",
								id, tdb_shm_prefix(), err),
						 errdetail("The daemon never writes such values: a process with write access to %s.subs (the server's OS user or a member of trafficdb.shm_group) overwrote the slot. Events not yet received from it are lost.",
								   tdb_shm_prefix()),
						 errhint("Call again to receive its events from now on in a new slot; resynchronize with trafficdb.changes_since(), and check who can write %s.subs.",
								 tdb_shm_prefix())));
			ereport(ERROR,
					(errcode(n == TDB_SHM_ESTALE ? ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE : ERRCODE_DATA_CORRUPTED),
					 errmsg("the events of subscription %d stopped: %s", id, err),
					 errdetail(broken ? "The subscribers' segment shrank under this session; its pages now read as zeros and nothing was taken from them." :
							   n == TDB_SHM_ESTALE ? "The daemon stopped, restarted, or made the subscribers' segment anew (see trafficdb.status.last_error)." :
							   "This session's ring held values out of range."),
					 errhint("Call again to receive its events from now on; events of the current generation may have been lost: resync with changes_since().")));
		}
		for (int k = 0; k < n; k++)
		{
			Datum		v[10];
			bool		nulls[10] = {0};

			v[0] = CStringGetTextDatum(kinds[ev[k].kind <= 4 ? ev[k].kind : 0]);
			v[1] = Int64GetDatum((int64) ev[k].generation);
			v[2] = Int64GetDatum((int64) ev[k].location_id);
			v[3] = Float4GetDatum(ev[k].old_speed_kmh);
			nulls[3] = isnan(ev[k].old_speed_kmh);
			v[4] = Float4GetDatum(ev[k].new_speed_kmh);
			nulls[4] = isnan(ev[k].new_speed_kmh);
			v[5] = Int16GetDatum(ev[k].old_congestion);
			nulls[5] = ev[k].old_congestion == 255;
			v[6] = Int16GetDatum(ev[k].new_congestion);
			nulls[6] = ev[k].new_congestion == 255;
			v[7] = BoolGetDatum(ev[k].old_incident != 0);
			v[8] = BoolGetDatum(ev[k].new_incident != 0);
			v[9] = TimestampTzGetDatum((TimestampTz) (ev[k].created_us -
													  ((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)));
			if (ev[k].kind == 4)
			{
				/* overrun: location_id says how many were dropped; the values mean nothing */
				for (int c = 3; c < 9; c++)
					nulls[c] = true;
			}
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
		}
		got += n;
		if (n == 0 && (got > 0 || GetCurrentTimestamp() >= deadline))
			break;
	}
	return (Datum) 0;
}
