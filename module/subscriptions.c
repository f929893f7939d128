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
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
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

static Datum
column(TupleDesc td, HeapTuple tup, const char *name, bool *isnull)
{
	int			att = SPI_fnumber(td, name);

	if (att <= 0)
		elog(ERROR, "trafficdb.subscriptions has no column \"%s\"", name);
	return heap_getattr(tup, att, td, isnull);
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
	d = column(td, tup, "id", &isnull);
	id = isnull ? 0 : DatumGetInt32(d);
	f->id = (uint32) id;

	d = column(td, tup, "location_ids", &isnull);
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

	d = column(td, tup, "area", &isnull);
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

	d = column(td, tup, "center", &isnull);
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
		r = column(td, tup, "radius_m", &rn);
		f->radius_m = rn ? -1 : DatumGetFloat8(r);
		f->area = TDB_SUB_RADIUS;
	}

	cond = TextDatumGetCString(column(td, tup, "condition", &isnull));
	f->cond = strcmp(cond, "congestion_at_least") == 0 ? TDB_SUB_CONGESTION_AT_LEAST :
		strcmp(cond, "speed_below") == 0 ? TDB_SUB_SPEED_BELOW :
		strcmp(cond, "speed_below_pct") == 0 ? TDB_SUB_SPEED_BELOW_PCT :
		strcmp(cond, "incident") == 0 ? TDB_SUB_INCIDENT : TDB_SUB_ANY;
	d = column(td, tup, "value", &isnull);
	f->value = isnull ? 0 : DatumGetFloat8(d);
	if (isnull && (f->cond == TDB_SUB_CONGESTION_AT_LEAST || f->cond == TDB_SUB_SPEED_BELOW ||
				   f->cond == TDB_SUB_SPEED_BELOW_PCT))
		refuse(id, "condition %s has no value", cond, "a value: congestion 0-4, km/h, or % of free flow");
	events = TextDatumGetCString(column(td, tup, "events", &isnull));
	f->on = strcmp(events, "enter_exit") == 0 ? TDB_SUB_ON_ENTER_EXIT : TDB_SUB_ON_CHANGE;

	if (!tdb_sub_filter_check(f, err))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s", err)));
}

/* ---- the row check -------------------------------------------------------------- */

Datum
trafficdb_subscription_check(PG_FUNCTION_ARGS)
{
	TriggerData *trig = (TriggerData *) fcinfo->context;
	HeapTuple	tup;
	TdbSubFilter f;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BEFORE(trig->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trig->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trafficdb._subscription_check() is the BEFORE ROW trigger of trafficdb.subscriptions")));
	tup = TRIGGER_FIRED_BY_UPDATE(trig->tg_event) ? trig->tg_newtuple : trig->tg_trigtuple;
	tdb_subscription_filter(trig->tg_relation->rd_att, tup, &f, CurrentMemoryContext);

	/* ids the published map lacks (when one is published) */
	if (f.area == TDB_SUB_IDS && tdb_shared != NULL && tdb_shared->map_id != 0)
		for (uint32 i = 0; i < f.nids; i++)
			if (tdb_backend_find_location(f.ids[i]) < 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("location id " UINT64_FORMAT " is not in the published map", f.ids[i]),
						 errdetail("Subscription %u: expected ids of trafficdb.locations.", f.id)));
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
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trafficdb._subscriptions_changed() is a trigger of trafficdb.subscriptions")));
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

/* This session's slot for subscription id: made at the first call from its row. */
static SessionSub *
session_sub(int32 id)
{
	SessionSub *free_one = NULL;
	TdbSubFilter f;
	static unsigned char buf[TDB_SUBFILTER_BYTES];
	char		err[TDB_ERRLEN];
	size_t		len;
	Datum		arg = Int32GetDatum(id);
	Oid			argtype = INT4OID;
	int			rc;
	MemoryContext cxt = CurrentMemoryContext;

	for (int i = 0; i < MAX_SESSION_SUBS; i++)
	{
		if (session_subs[i].open && session_subs[i].id == id)
			return &session_subs[i];
		if (!session_subs[i].open && free_one == NULL)
			free_one = &session_subs[i];
	}
	if (free_one == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a session reads the events of at most %d subscriptions", MAX_SESSION_SUBS)));

	SPI_connect();
	if (SPI_execute_with_args("SELECT * FROM trafficdb.subscriptions WHERE id = $1", 1, &argtype, &arg,
							  NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("subscription %d does not exist", id),
				 errhint("Its rows are in trafficdb.subscriptions.")));
	tdb_subscription_filter(SPI_tuptable->tupdesc, SPI_tuptable->vals[0], &f, cxt);
	f.id = (uint32) id;
	len = tdb_subfilter_encode(&f, buf, sizeof(buf), err);
	SPI_finish();
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("subscription %d cannot be read by a session: %s", id, err),
				 errhint("Use LISTEN trafficdb_subscription_%d (notify => true), or a smaller polygon or id list.", id)));

	rc = tdb_subring_consumer_open(&free_one->c, tdb_shm_prefix(), 0, NULL, err);
	if (rc == TDB_SHM_OK)
	{
		/* the sessions reading one subscription are a group: each event to one of them */
		rc = tdb_subring_subscribe(&free_one->c, buf, (uint32) len, 0x5351000000000000ull | (uint32) id,
								   TDB_SUBGROUP_ROUND_ROBIN);
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
				 rc == TDB_SHM_ENOSLOT ? errhint("Raise trafficdb.max_subscribers.") :
				 rc == TDB_SHM_ESTALE || rc == TDB_SHM_EINVAL || rc == TDB_SHM_ECORRUPT ?
				 errhint("The daemon makes the subscribers' segment anew within a second of finding it damaged (see trafficdb.status.last_error): call again.") : 0));
	if (!session_exit_registered)
	{
		before_shmem_exit(close_session_subs, (Datum) 0);
		session_exit_registered = true;
	}
	free_one->id = id;
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
