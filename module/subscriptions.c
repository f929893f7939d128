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
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "module/geometry.h"
#include "module/shared.h"
#include "module/snapshot.h"
#include "module/subscriptions.h"
#include "module/trafficdb.h"

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
