/*-------------------------------------------------------------------------
 *
 * locations.c
 *	  The locations foreign data wrapper: trafficdb's published map and
 *	  traffic as a table, read from shared memory.
 *
 * What is pushed down, so that results are always those of the same query
 * on a heap table:
 *	 - location_id = expr, = ANY(array expr), IN (...): hash lookups, and a
 *	   parameterized path for joins on location_id (one lookup per outer row);
 *	 - geom && expr: an R-tree query comparing the same outward-rounded float
 *	   boxes as PostGIS's && (exact: neither needs a recheck);
 *	 - ST_Intersects(geom, expr), ST_DWithin on geometry (degrees) and on
 *	   geography (metres): an R-tree query on a box that holds every answer
 *	   (on geography, with the poleward bulge of the query's great-circle
 *	   edges), rechecked by PostgreSQL;
 *	 - ORDER BY geom <-> expr LIMIT k with no WHERE, expr a point: the k
 *	   nearest and their ties, which PostgreSQL sorts;
 *	 - ORDER BY geom <-> expr, geom <#> expr, geom::geography <-> expr with
 *	   any WHERE and any LIMIT: nearest first, incrementally (src/knn.c),
 *	   each candidate measured by the query's own ORDER BY expression;
 *	 - spatial joins (the spatial forms above and the predicates below with
 *	   expr naming other tables' columns, e.g. ST_DWithin(l.geom, p.geom, d),
 *	   ST_Within(l.geom, ST_Buffer(p.geom, r))): a path parameterized by
 *	   those tables, one R-tree query per outer row of a nested loop
 *	   (add_spatial_join_paths).
 *	 - rechecked by PostgreSQL, like a GiST index's candidates:
 *	   ST_Within, ST_Contains, ST_Covers, ST_CoveredBy, ST_Crosses,
 *	   ST_Touches, ST_Equals, ST_3DIntersects (either argument geom): an
 *	   R-tree query on box2d(expr); ST_DFullyWithin and ST_3DDWithin: on
 *	   box2d(expr) grown by the distance; geom @ expr, geom ~ expr, geom ~=
 *	   expr (either way round): on box2d(expr); ST_Intersects, ST_Covers and
 *	   ST_CoveredBy of geom::geography: on the geography box of expr grown by
 *	   a metre (see box_predicates);
 *	 - location_id <, <=, >, >= expr, BETWEEN: an id range (a hash lookup per
 *	   id when short, else a pass over the records' ids, not their shapes);
 *	 - a OR b OR ...: the union of the parts' candidates when each part is
 *	   one of the above (an AND part by its best conjunct).
 * Key filters are preferred to boxes, and boxes to id ranges.  A pushed
 * clause f(geom, expr[, d]) that needs a recheck is rechecked by the scan
 * with the values of expr and d it evaluated once (own_recheck), not by
 * PostgreSQL's filter, which would evaluate expr again per candidate.
 * PostGIS is found through the extension catalog, whatever its schema.  expr
 * may be a constant, a parameter or any stable expression of them (and of an
 * outer row's columns in a join): it is evaluated once per scan (or per
 * rescan).
 *
 * A scan reads the snapshot of its statement (READ COMMITTED) or
 * transaction (REPEATABLE READ, SERIALIZABLE): one generation throughout.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/reloptions.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/explain.h"
#include "miscadmin.h"
#include "executor/executor.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "parser/parse_func.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "fdw/locations_internal.h"
#include "fdw/timebound.h"
#include "knn.h"
#include "module/geometry.h"
#include "module/shared.h"
#include "module/snapshot.h"
#include "module/trafficdb.h"

PG_FUNCTION_INFO_V1(trafficdb_locations_handler);
PG_FUNCTION_INFO_V1(trafficdb_locations_validator);

#define UNIX_TO_PG_US ((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

/* Each column's name and type, by LocColumn. */
static const struct
{
	const char *name;
	Oid			type;			/* InvalidOid: geometry */
} loc_columns[NUM_LOC_COLUMNS] = {
	{"location_id", INT8OID},
	{"geom", InvalidOid},
	{"road_class", TEXTOID},
	{"name", TEXTOID},
	{"length_m", FLOAT8OID},
	{"speed_limit_kmh", INT2OID},
	{"oneway", BOOLOID},
	{"speed_kmh", FLOAT4OID},
	{"free_flow_kmh", FLOAT4OID},
	{"congestion", INT2OID},
	{"confidence", INT2OID},
	{"incident", TEXTOID},
	{"updated_at", TIMESTAMPTZOID},
	{"generation", INT8OID},
	{"changed_generation", INT8OID},
};

/* Column map of a foreign table: every column must be one we know. */
int *
build_colmap(Relation rel, int *natts)
{
	TupleDesc	td = RelationGetDescr(rel);
	int		   *map = palloc(sizeof(int) * Max(td->natts, 1));

	for (int a = 0; a < td->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(td, a);
		int			c;

		map[a] = -1;
		if (att->attisdropped)
			continue;
		for (c = 0; c < NUM_LOC_COLUMNS; c++)
			if (strcmp(NameStr(att->attname), loc_columns[c].name) == 0)
				break;
		if (c == NUM_LOC_COLUMNS)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_COLUMN_NAME_NOT_FOUND),
					 errmsg("column \"%s\" of foreign table %s is not a trafficdb location column",
							NameStr(att->attname), RelationGetRelationName(rel)),
					 errhint("Columns can be location_id, geom, road_class, name, length_m, speed_limit_kmh, oneway, "
							 "speed_kmh, free_flow_kmh, congestion, confidence, incident, updated_at, generation, "
							 "changed_generation.")));
		if ((c == COL_GEOM ? tdb_geometry_oid() : loc_columns[c].type) != att->atttypid)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
					 errmsg("column \"%s\" of foreign table %s has type %s; trafficdb provides %s",
							NameStr(att->attname), RelationGetRelationName(rel),
							format_type_be(att->atttypid),
							c == COL_GEOM ? "geometry" : format_type_be(loc_columns[c].type))));
		map[a] = c;
	}
	*natts = td->natts;
	return map;
}

/* ---- execution ------------------------------------------------------------------- */

/* The parts push_encode() wrote. */
static void
push_decode(LocScanState *st, List *l)
{
	if (list_length(l) <= 3)
		return;
	st->nparts = list_nth_int(l, 3);
	st->part_kind = palloc(sizeof(int) * st->nparts);
	st->part_nargs = palloc(sizeof(int) * st->nparts);
	st->part_flags = palloc(sizeof(int) * st->nparts);
	for (int p = 0; p < st->nparts; p++)
	{
		st->part_kind[p] = list_nth_int(l, 4 + 3 * p);
		st->part_nargs[p] = list_nth_int(l, 5 + 3 * p);
		st->part_flags[p] = list_nth_int(l, 6 + 3 * p);
		if (st->part_nargs[p] > 2)
			elog(ERROR, "trafficdb: a pushed-down part with %d arguments", st->part_nargs[p]);
	}
}

/* The call own_recheck planned: function, collation, argument map, description. */
static void
own_recheck_begin(ForeignScanState *node, LocScanState *st, List *own, char *text)
{
	MemoryContext cxt = node->ss.ps.state->es_query_cxt;
	FmgrInfo   *flinfo;
	int			nargs;

	if (own == NIL)
		return;
	nargs = list_length(own) - 2;
	flinfo = MemoryContextAlloc(cxt, sizeof(FmgrInfo));
	/* in the query's memory: PostGIS keeps its prepared shape in fn_extra */
	fmgr_info_cxt((Oid) list_nth_int(own, 0), flinfo, cxt);
	st->recheck = MemoryContextAllocZero(cxt, SizeForFunctionCallInfo(nargs));
	InitFunctionCallInfoData(*st->recheck, flinfo, nargs, (Oid) list_nth_int(own, 1), NULL, NULL);
	st->recheck_arg = MemoryContextAlloc(cxt, sizeof(int) * nargs);
	for (int i = 0; i < nargs; i++)
	{
		st->recheck_arg[i] = list_nth_int(own, 2 + i);
		if (st->recheck_arg[i] >= st->nargs)
			elog(ERROR, "trafficdb: a recheck argument %d of %d", st->recheck_arg[i], st->nargs);
	}
	st->recheck_desc = text;
}

/*
 * The pushed clause on entry i, whose geom is g: false also when an
 * argument is NULL (the function is strict) or the answer is NULL.
 */
static bool
own_recheck_passes(LocScanState *st, Datum g)
{
	FunctionCallInfo fcinfo = st->recheck;
	Datum		r;

	for (int a = 0; a < fcinfo->nargs; a++)
	{
		int			j = st->recheck_arg[a];

		if (j >= 0 && st->argnull[j])
			return false;
		fcinfo->args[a].value = j >= 0 ? st->argv[j] : g;
		fcinfo->args[a].isnull = false;
	}
	fcinfo->isnull = false;
	r = FunctionCallInvoke(fcinfo);
	return !fcinfo->isnull && DatumGetBool(r);
}

static void
locBeginForeignScan(ForeignScanState *node, int eflags)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	LocScanState *st = palloc0(sizeof(LocScanState));
	List	   *cols = list_nth(plan->fdw_private, FdwPrivateColumns);
	ListCell   *lc;

	st->natts = list_length(cols);
	st->colmap = palloc(sizeof(int) * Max(st->natts, 1));
	foreach(lc, cols)
	{
		st->colmap[foreach_current_index(lc)] = lfirst_int(lc);
		if (lfirst_int(lc) == COL_GEOM)
			st->need_geom = true;
	}
	st->kind = (PushKind) linitial_int((List *) list_nth(plan->fdw_private, FdwPrivatePush));
	st->k = lsecond_int((List *) list_nth(plan->fdw_private, FdwPrivatePush));
	st->geom_att = lthird_int((List *) list_nth(plan->fdw_private, FdwPrivatePush));
	st->description = strVal(list_nth(plan->fdw_private, FdwPrivateDescription));
	st->knn_arg = strVal(list_nth(plan->fdw_private, FdwPrivateKnnArg));
	push_decode(st, list_nth(plan->fdw_private, FdwPrivatePush));
	if (st->kind == PUSH_KNN_ORDER)
	{
		/* the argument once per (re)scan; the distance expression per measured entry */
		st->expr_states = ExecInitExprList(list_make1(linitial(plan->fdw_exprs)), (PlanState *) node);
		st->order_state = ExecInitExpr(lsecond(plan->fdw_exprs), (PlanState *) node);
		st->knn_metric = (int) st->k;
		st->knn_slot = ExecInitExtraTupleSlot(node->ss.ps.state,
											  node->ss.ss_ScanTupleSlot->tts_tupleDescriptor,
											  &TTSOpsVirtual);
		st->knn_cxt = AllocSetContextCreate(node->ss.ps.state->es_query_cxt, "trafficdb nearest-first",
											ALLOCSET_DEFAULT_SIZES);
	}
	else
		st->expr_states = ExecInitExprList(plan->fdw_exprs, (PlanState *) node);
	if (st->kind == PUSH_DWITHIN_M && list_length(st->expr_states) == 3)
		st->radius_clause = lthird(st->expr_states);
	st->nargs = linitial_int((List *) list_nth(plan->fdw_private, FdwPrivateNargs));
	st->argv = palloc0(sizeof(Datum) * Max(st->nargs, 1));
	st->argnull = palloc0(sizeof(bool) * Max(st->nargs, 1));
	own_recheck_begin(node, st, list_nth(plan->fdw_private, FdwPrivateRecheck),
					  strVal(list_nth(plan->fdw_private, FdwPrivateRecheckText)));
	st->eval_cxt = AllocSetContextCreate(node->ss.ps.state->es_query_cxt, "trafficdb scan arguments",
										 ALLOCSET_SMALL_SIZES);
	node->fdw_state = st;
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	if (st->need_geom)
		tdb_geometry_oid();
}

typedef struct Collect
{
	uint64	   *items;
	uint64		n;
	uint64		cap;
	MemoryContext cxt;			/* where the array lives (the scan's lifetime) */
} Collect;

static int
collect_entry(uint64_t entry, void *arg)
{
	Collect    *c = arg;

	if (c->n == c->cap)
	{
		c->cap = c->cap ? c->cap * 2 : 256;
		c->items = c->items ? repalloc_huge(c->items, c->cap * sizeof(uint64))
			: MemoryContextAllocExtended(c->cxt, c->cap * sizeof(uint64), MCXT_ALLOC_HUGE);
	}
	c->items[c->n++] = entry;
	return 0;
}

/* Entries whose leaf box is also inside or around the query's box (BOX_*). */
typedef struct BoxRelCollect
{
	Collect    *c;
	const TdbBoxF *leaves;
	TdbBoxF		q;
	int			rel;
} BoxRelCollect;

static int
collect_box_rel(uint64_t entry, void *arg)
{
	BoxRelCollect *b = arg;
	const TdbBoxF *e = &b->leaves[entry];

	if ((b->rel & BOX_INSIDE) &&
		!(e->xmin >= b->q.xmin && e->xmax <= b->q.xmax && e->ymin >= b->q.ymin && e->ymax <= b->q.ymax))
		return 0;
	if ((b->rel & BOX_AROUND) &&
		!(e->xmin <= b->q.xmin && e->xmax >= b->q.xmax && e->ymin <= b->q.ymin && e->ymax >= b->q.ymax))
		return 0;
	return collect_entry(entry, b->c);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64		x = *(const uint64 *) a,
				y = *(const uint64 *) b;

	return (x > y) - (x < y);
}

/* Each record once, in record order (parts of a union may find the same). */
static void
collect_sort_unique(Collect *c)
{
	uint64		w = 0;

	if (c->n > 1)
		qsort(c->items, c->n, sizeof(uint64), cmp_u64);
	for (uint64 k = 0; k < c->n; k++)
		if (w == 0 || c->items[w - 1] != c->items[k])
			c->items[w++] = c->items[k];
	c->n = w;
}

/* PostGIS functions the scan calls, looked up once per session (until invalidated). */
static void
collect_keys(LocScanState *st, Datum v, Oid type, bool array, Collect *c)
{
	if (!array)
	{
		int64		i = tdb_map_find(st->snap->map, (uint64) datum_to_int64(v, type));

		if (i >= 0)
			collect_entry((uint64) i, c);
		return;
	}
	{
		ArrayType  *arr = DatumGetArrayTypeP(v);
		Oid			elemtype = ARR_ELEMTYPE(arr);
		int16		elemlen;
		bool		elembyval;
		char		elemalign;
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		get_typlenbyvalalign(elemtype, &elemlen, &elembyval, &elemalign);
		deconstruct_array(arr, elemtype, elemlen, elembyval, elemalign, &elems, &nulls, &n);
		for (int e = 0; e < n; e++)
		{
			int64		i;

			if (nulls[e])
				continue;
			i = tdb_map_find(st->snap->map, (uint64) datum_to_int64(elems[e], elemtype));
			if (i >= 0)
				collect_entry((uint64) i, c);
		}
		/* the same id twice in the list must give one row, as on a heap */
		collect_sort_unique(c);
	}
}

/*
 * The bounding box of a geometry Datum, exactly (double precision).  false:
 * NULL or empty.  as_postgis: round it outward to floats, as PostGIS's &&
 * sees it.
 */
static bool
geometry_box_ex(Datum geom, TdbBox *box, bool as_postgis)
{
	double		b[4];

	if (!tdb_geometry_bounds(geom, b))
		return false;
	box->xmin = b[0];
	box->ymin = b[1];
	box->xmax = b[2];
	box->ymax = b[3];
	if (!as_postgis)
		return true;

	/*
	 * PostGIS's && compares float boxes rounded outward, both sides: a row
	 * whose exact box misses the query box by less than a float step still
	 * overlaps.  Round the query box the same way, so the candidates are
	 * exactly PostGIS's (the map's leaf boxes are rounded like PostGIS's).
	 */
	{
		TdbBoxF		f = tdb_boxf_from_boxd(box);

		box->xmin = f.xmin;
		box->ymin = f.ymin;
		box->xmax = f.xmax;
		box->ymax = f.ymax;
	}
	return true;
}

/* The box as PostGIS's && sees it (float, rounded outward). */
static bool
geometry_box(Datum geom, TdbBox *box)
{
	return geometry_box_ex(geom, box, true);
}

/*
 * Rounding allowance (degrees, 0.1 mm) for a geography's box: its edges'
 * latitudes are computed (geo.c), unlike vertices.
 */
#define GEOG_BOX_MARGIN 1e-9

/*
 * A lon/lat box holding every point of a geography: its vertices, and the
 * latitudes its edges reach between them.  An edge of a geography is a
 * great-circle arc, which bulges poleward past its ends (11 m for 25 km
 * east-west at 42.5 N): the box of the vertices alone misses the roads
 * there.  false: empty, or an edge across the antimeridian or over a pole
 * (the caller then scans everything).
 */
static bool
geography_box(Datum geog, Oid type, TdbBox *box)
{
	bytea	   *wkb = tdb_geometry_wkb(tdb_geography_to_geometry(geog, type));

	if (tdb_geo_wkb_arc_box((const unsigned char *) VARDATA_ANY(wkb), VARSIZE_ANY_EXHDR(wkb), box) != 1)
		return false;
	box->xmin -= GEOG_BOX_MARGIN;
	box->ymin -= GEOG_BOX_MARGIN;
	box->xmax += GEOG_BOX_MARGIN;
	box->ymax += GEOG_BOX_MARGIN;
	return true;
}

/* Grow a lon/lat box by radius_m metres (a superset); false near poles or the antimeridian. */
static bool
grow_box_metres(TdbBox *box, double radius_m)
{
	double		corners[4][2] = {{box->xmin, box->ymin}, {box->xmin, box->ymax},
	{box->xmax, box->ymin}, {box->xmax, box->ymax}};
	TdbBox		out = {INFINITY, INFINITY, -INFINITY, -INFINITY};

	for (int c = 0; c < 4; c++)
	{
		TdbBox		cb;

		if (!tdb_geo_circle_box(corners[c][0], corners[c][1], radius_m, &cb))
			return false;
		out.xmin = Min(out.xmin, cb.xmin);
		out.ymin = Min(out.ymin, cb.ymin);
		out.xmax = Max(out.xmax, cb.xmax);
		out.ymax = Max(out.ymax, cb.ymax);
	}
	*box = out;
	return true;
}

/*
 * The k nearest records by planar distance, then every record within that
 * distance (plus a hair, for PostGIS's own rounding): PostgreSQL sorts
 * these with <-> and keeps k, which are then exactly the heap's.
 */
static void
collect_knn(LocScanState *st, double x, double y, int64 k, Collect *c)
{
	TdbKnnResult *res;
	int64		got;
	double		r;
	TdbBox		q;

	if (k <= 0)
	{
		for (uint64 i = 0; i < st->snap->map->count; i++)
			collect_entry(i, c);
		return;
	}
	res = palloc_extended(sizeof(TdbKnnResult) * (Size) k, MCXT_ALLOC_HUGE);
	got = tdb_map_knn(st->snap->map, x, y, TDB_METRIC_PLANAR, (uint64) k, res);
	if (got < k)
	{
		for (uint64 i = 0; i < st->snap->map->count; i++)
			collect_entry(i, c);
		return;
	}
	r = res[got - 1].dist * (1 + 1e-9) + 1e-12;
	q.xmin = x - r;
	q.xmax = x + r;
	q.ymin = y - r;
	q.ymax = y + r;
	tdb_map_query_box(st->snap->map, &q, collect_entry, c);
	{
		uint64		w = 0;

		for (uint64 i = 0; i < c->n; i++)
			if (tdb_map_distance(st->snap->map, c->items[i], x, y, TDB_METRIC_PLANAR) <= r)
				c->items[w++] = c->items[i];
		c->n = w;
	}
}

/*
 * The records whose id is in a range.  The map has no id order (records
 * are in R-tree order, the index is a hash): a short range is a hash lookup
 * per id in it, a longer one a pass over the records' ids, never their
 * shapes.  A NULL bound matches nothing, as the comparison does.
 */
static void
collect_id_range(LocScanState *st, int flags, const Datum *v, const bool *isnull, const Oid *type,
				 Collect *c)
{
	const TdbMapView *map = st->snap->map;
	int64		lo = PG_INT64_MIN;
	int64		hi = PG_INT64_MAX;
	int			a = 0;

	if (flags & RANGE_LO)
	{
		if (isnull[a])
			return;
		lo = datum_to_int64(v[a], type[a]);
		if (!(flags & RANGE_LO_INCL))
		{
			if (lo == PG_INT64_MAX)
				return;
			lo++;
		}
		a++;
	}
	if (flags & RANGE_HI)
	{
		if (isnull[a])
			return;
		hi = datum_to_int64(v[a], type[a]);
		if (!(flags & RANGE_HI_INCL))
		{
			if (hi == PG_INT64_MIN)
				return;
			hi--;
		}
	}
	if (lo > hi)
		return;
	if ((uint64) hi - (uint64) lo < map->count / 8)
	{
		for (int64 id = lo;; id++)
		{
			int64		i = tdb_map_find(map, (uint64) id);

			if (i >= 0)
				collect_entry((uint64) i, c);
			if (id == hi)
				break;
		}
		collect_sort_unique(c);
		return;
	}
	for (uint64 i = 0; i < map->count; i++)
	{
		int64		id = (int64) map->records[i].id;

		if (id >= lo && id <= hi)
			collect_entry(i, c);
	}
}

/*
 * Metres added to a geography box for a predicate that needs a touch:
 * PostGIS decides one within 1e-5 m.
 */
#define GEOG_TOUCH_M 1.0

/*
 * How far, in metres, the records' geography edges (great-circle arcs) can
 * leave their lon/lat vertex boxes, which are what the R-tree holds: a
 * geography query grows its box by this much so that a road bulging
 * poleward past its own vertices is not missed.  The daemon measures it
 * once per map; a backend reading another map than the daemon's current one
 * (a long transaction) measures it itself, once.  +infinity: an edge spans
 * 180 degrees or more (every record is then a candidate).
 */
static double
map_arc_slack(const TdbMapView *map)
{
	static uint64 map_id = 0;
	static double slack = 0;

	if (map_id != map->hdr->map_id || map_id == 0)
	{
		bool		published;

		SpinLockAcquire(&tdb_shared->mutex);
		published = tdb_shared->map_id == map->hdr->map_id;
		slack = tdb_shared->map_arc_slack_m;
		SpinLockRelease(&tdb_shared->mutex);
		if (!published)
			slack = tdb_map_arc_slack_m(map);
		map_id = map->hdr->map_id;
	}
	return slack;
}

/*
 * The candidates of one part of a push, from its evaluated arguments.
 * true: every record is one (the narrowing cannot be computed: a bad
 * distance, a box over a pole), and PostgreSQL's recheck decides.
 */
static bool
collect_part(LocScanState *st, int kind, int nargs, int flags, const Datum *v, const bool *isnull,
			 const Oid *type, Collect *c)
{
	TdbBox		box;
	double		d;

	switch (kind)
	{
		case PUSH_KEY:
		case PUSH_KEYS:
			if (!isnull[0])
				collect_keys(st, v[0], type[0], kind == PUSH_KEYS, c);
			return false;
		case PUSH_BOX:
			if (!isnull[0] && geometry_box(v[0], &box))
				tdb_map_query_box(st->snap->map, &box, collect_entry, c);
			return false;
		case PUSH_BOX_OF:
			if (!isnull[0] && geometry_box(v[0], &box))
			{
				BoxRelCollect brc = {c, st->snap->map->rtree.boxes + st->snap->map->rtree.levels[0].first,
				tdb_boxf_from_boxd(&box), flags};

				tdb_map_query_box(st->snap->map, &box, flags ? collect_box_rel : collect_entry,
								  flags ? (void *) &brc : (void *) c);
			}
			return false;
		case PUSH_DWITHIN_DEG:
		case PUSH_EXPAND_OF:
			/* the functions are strict: a NULL argument, no row */
			if (isnull[0] || isnull[1])
				return false;
			d = DatumGetFloat8(v[1]);
			if (!(d >= 0))
				return true;	/* let PostGIS say what a bad distance means */
			if (geometry_box(v[0], &box))
			{
				box.xmin -= d;
				box.ymin -= d;
				box.xmax += d;
				box.ymax += d;
				tdb_map_query_box(st->snap->map, &box, collect_entry, c);
			}
			return false;
		case PUSH_GEOG_BOX:
			if (isnull[0] || (nargs > 1 && isnull[1]))
				return false;
			d = nargs > 1 ? DatumGetFloat8(v[1]) : 0;
			if (!(d >= 0) || !geography_box(v[0], type[0], &box) ||
				!grow_box_metres(&box, d + GEOG_TOUCH_M + map_arc_slack(st->snap->map)))
				return true;
			tdb_map_query_box(st->snap->map, &box, collect_entry, c);
			return false;
		case PUSH_ID_RANGE:
			collect_id_range(st, flags, v, isnull, type, c);
			return false;
		default:
			return true;
	}
}

/*
 * Evaluate the pushed arguments, once per (re)scan, in the current memory
 * context (the scan's per-(re)scan one).
 */
static void
loc_eval_args(ForeignScanState *node, LocScanState *st)
{
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	ListCell   *lc;

	foreach(lc, st->expr_states)
	{
		int			n = foreach_current_index(lc);

		if (n >= st->nargs)
			break;
		st->argv[n] = ExecEvalExpr(lfirst(lc), econtext, &st->argnull[n]);
	}
}

/* The union of the candidates of each part, from its arguments. */
static bool
collect_parts(LocScanState *st, Collect *c)
{
	ListCell   *lc = list_head(st->expr_states);
	int			n = 0;

	for (int p = 0; p < st->nparts; p++)
	{
		Datum		v[2] = {0, 0};
		bool		isnull[2] = {true, true};
		Oid			type[2] = {InvalidOid, InvalidOid};

		for (int a = 0; a < st->part_nargs[p]; a++)
		{
			ExprState  *es = lfirst(lc);

			v[a] = st->argv[n];
			isnull[a] = st->argnull[n];
			type[a] = exprType((Node *) es->expr);
			lc = lnext(st->expr_states, lc);
			n++;
		}
		if (collect_part(st, st->part_kind[p], st->part_nargs[p], st->part_flags[p], v, isnull, type, c))
			return true;
	}
	if (st->nparts > 1)
		collect_sort_unique(c);
	return false;
}

/*
 * Evaluate the pushed-down expressions and collect the candidates.  When a
 * narrowing cannot be computed (NULL distance, a box over a pole), every
 * record is a candidate: PostgreSQL's recheck keeps the answer exact.
 */
/* ---- nearest first ---- */

static void *
knn_grow(void *ctx, void *p, size_t size)
{
	return p ? repalloc(p, size) : MemoryContextAlloc((MemoryContext) ctx, size);
}

static void
knn_release(void *ctx, void *p)
{
	(void) ctx;
	pfree(p);
}

/*
 * A lower bound of the planar distance (<-> and <#>) from the query's box
 * to anything in box b: the box distance, shrunk so that rounding in
 * PostGIS's exact distance can never put it below.
 */
static double
knn_planar_bound(const TdbBoxF *b, void *arg)
{
	double		d = tdb_knn_box_dist(b, arg);

	return Max(0.0, d * (1 - 1e-12) - 1e-12);
}

static double
knn_zero_bound(const TdbBoxF *b, void *arg)
{
	(void) b;
	(void) arg;
	return 0;
}

/* Record i's shape as a geometry Datum (its points go through st->xy, grown as needed). */
static Datum
record_geom(ForeignScanState *node, LocScanState *st, uint64 i)
{
	const TdbLocation *rec = &st->snap->map->records[i];

	if (st->xy_cap < rec->npoints)
	{
		st->xy_cap = rec->npoints;
		st->xy = st->xy ? repalloc(st->xy, sizeof(double) * 2 * st->xy_cap)
			: MemoryContextAlloc(node->ss.ps.state->es_query_cxt, sizeof(double) * 2 * st->xy_cap);
	}
	tdb_map_shape(st->snap->map, i, st->xy);
	return tdb_linestring_datum(st->xy, rec->npoints);
}

/* PostGIS's distance of entry e: the query's own ORDER BY expression, evaluated on it. */
static double
knn_exact(uint64_t e, void *arg)
{
	ForeignScanState *node = arg;
	LocScanState *st = node->fdw_state;
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	TupleTableSlot *slot = st->knn_slot;
	TupleTableSlot *saved = econtext->ecxt_scantuple;
	MemoryContext old;
	Datum		d;
	bool		isnull;

	CHECK_FOR_INTERRUPTS();
	st->knn_measured++;
	MemoryContextReset(st->knn_cxt);
	old = MemoryContextSwitchTo(st->knn_cxt);
	ExecClearTuple(slot);
	for (int a = 0; a < slot->tts_tupleDescriptor->natts; a++)
		slot->tts_isnull[a] = true;
	slot->tts_values[st->geom_att] = record_geom(node, st, e);
	slot->tts_isnull[st->geom_att] = false;
	ExecStoreVirtualTuple(slot);
	econtext->ecxt_scantuple = slot;
	d = ExecEvalExpr(st->order_state, econtext, &isnull);
	econtext->ecxt_scantuple = saved;
	MemoryContextSwitchTo(old);
	return isnull ? NAN : DatumGetFloat8(d);
}

/*
 * From a line, the planar bound can be the distance from the line itself to
 * a box, not from the line's box: a long diagonal line's box holds far more
 * than the line's neighbours.  The line's vertices (at most 4,096: each
 * bound measures every segment) go into q, in the current (per-scan)
 * memory.  Polygons keep the box bound: PostGIS calls what a ring winds
 * around twice inside, which an even-odd test (tdb_knn_query_contains) does
 * not, and a bound must never exceed PostGIS's distance.
 */
static bool
knn_line_query(Datum geom, TdbKnnQuery *q)
{
	bytea	   *wkb = tdb_geometry_wkb(geom);
	const unsigned char *p = (const unsigned char *) VARDATA_ANY(wkb);
	size_t		len = VARSIZE_ANY_EXHDR(wkb);
	uint32		n,
				rings;
	double	   *xy;

	if (tdb_geo_wkb_shape(p, len, NULL, &n, NULL, &rings) != 2 || n < 2 || n > 4096)
		return false;
	xy = palloc(sizeof(double) * 2 * n);
	return tdb_geo_wkb_shape(p, len, xy, &n, NULL, &rings) == 2 &&
		tdb_knn_query_init(q, TDB_KNN_LINE, xy, n, NULL, 0);
}

/* Start the nearest-first scan for query argument v (isnull: every distance is NULL). */
static void
knn_start(ForeignScanState *node, LocScanState *st, Datum v, bool isnull, Oid type)
{
	TdbKnnAlloc alloc = {knn_grow, knn_release, st->eval_cxt};
	TdbKnnBound bound = knn_zero_bound;
	void	   *bound_arg = NULL;
	TdbBox		box;

	if (st->knn_active)
		tdb_knn_end(&st->knn);
	st->knn_active = false;
	if (!isnull && st->knn_metric != KNN_GEOGRAPHY && geometry_box_ex(v, &box, false))
	{
		st->knn_qbox = tdb_boxf_from_boxd(&box);
		bound = knn_planar_bound;
		bound_arg = &st->knn_qbox;
		if (st->knn_metric == KNN_PLANAR && !(box.xmin == box.xmax && box.ymin == box.ymax) &&
			knn_line_query(v, &st->knn_query))
		{
			bound = tdb_knn_query_bound;
			bound_arg = &st->knn_query;
		}
	}
	else if (!isnull && st->knn_metric == KNN_GEOGRAPHY &&
			 geometry_box_ex(tdb_geography_to_geometry(v, type), &box, false) &&
			 box.xmin == box.xmax && box.ymin == box.ymax)
	{
		/* from a point: a lower bound in metres (any other shape: 0, still exact) */
		st->knn_geo.lon = box.xmin;
		st->knn_geo.lat = box.ymin;
		st->knn_geo.slack_m = map_arc_slack(st->snap->map);
		if (isfinite(st->knn_geo.slack_m))
		{
			bound = tdb_knn_geodesic_bound;
			bound_arg = &st->knn_geo;
		}
	}
	tdb_knn_begin(&st->knn, &st->snap->map->rtree, bound, bound_arg, knn_exact, node, &alloc);
	st->knn_active = true;
}

static void
loc_find_candidates(ForeignScanState *node, LocScanState *st)
{
	Collect		c = {NULL, 0, 0, node->ss.ps.state->es_query_cxt};
	Datum		v[2] = {0, 0};
	bool		isnull[2] = {true, true};
	Oid			type0 = InvalidOid;
	TdbBox		box;
	bool		all = false;
	MemoryContext oldcxt;

	st->next = 0;
	if (st->cand != NULL)
		pfree(st->cand);
	st->cand = NULL;
	MemoryContextReset(st->eval_cxt);
	oldcxt = MemoryContextSwitchTo(st->eval_cxt);
	if (st->kind == PUSH_NONE)
	{
		st->cand = NULL;
		st->ncand = st->snap->map->count;
		MemoryContextSwitchTo(oldcxt);
		return;
	}
	loc_eval_args(node, st);
	if (st->expr_states != NIL)
		type0 = exprType((Node *) ((ExprState *) linitial(st->expr_states))->expr);
	for (int n = 0; n < Min(st->nargs, 2); n++)
	{
		v[n] = st->argv[n];
		isnull[n] = st->argnull[n];
	}

	switch (st->kind)
	{
		case PUSH_KEY:
		case PUSH_KEYS:
			if (!isnull[0])
				collect_keys(st, v[0], type0, st->kind == PUSH_KEYS, &c);
			break;
		case PUSH_BOX:
			if (!isnull[0] && geometry_box(v[0], &box))
				tdb_map_query_box(st->snap->map, &box, collect_entry, &c);
			break;
		case PUSH_DWITHIN_DEG:
			{
				double		d = isnull[1] ? NAN : DatumGetFloat8(v[1]);

				if (isnull[0])
					break;
				if (!(d >= 0) || !geometry_box(v[0], &box))
				{
					all = !(d >= 0);	/* let PostGIS say what a bad distance means */
					break;
				}
				box.xmin -= d;
				box.ymin -= d;
				box.xmax += d;
				box.ymax += d;
				tdb_map_query_box(st->snap->map, &box, collect_entry, &c);
			}
			break;
		case PUSH_DWITHIN_M:
			{
				double		d = isnull[1] ? NAN : DatumGetFloat8(v[1]);
				double		slack = map_arc_slack(st->snap->map);
				TdbBox		exact;

				st->radius_fast = false;
				if (isnull[0])
					break;
				if (!(d >= 0) || !geography_box(v[0], type0, &box) ||
					!grow_box_metres(&box, d + slack))
				{
					all = true;
					break;
				}
				tdb_map_query_box(st->snap->map, &box, collect_entry, &c);

				/*
				 * From a point, within 20 km, away from the poles, our own
				 * distance (local equirectangular, see rtree.h) to a
				 * record's lon/lat polyline is within 1.5 % of PostGIS's
				 * spheroidal one to that polyline; the record's geodesic
				 * edges lie within the map's arc slack of it.  Decide by our
				 * distance outside a 2 % + 1 m band widened by the slack,
				 * and ask PostGIS only inside the band.
				 */
				if (d <= 20000 && geometry_box_ex(tdb_geography_to_geometry(v[0], type0), &exact, false) &&
					exact.xmin == exact.xmax && exact.ymin == exact.ymax && fabs(exact.ymin) <= 70 &&
					isfinite(slack))
				{
					st->radius_fast = true;
					st->radius_x = exact.xmin;
					st->radius_y = exact.ymin;
					st->radius_lo = (d - slack) * 0.98 - 1.0;
					st->radius_hi = d * 1.02 + 1.0 + slack;
				}
			}
			break;
		case PUSH_KNN_ORDER:
			/* the iterator lives in eval_cxt, reset above: start afresh */
			st->knn_active = false;
			knn_start(node, st, v[0], isnull[0], type0);
			break;
		case PUSH_KNN:
			{
				double		x,
							y;

				/* counted for EXPLAIN ANALYZE: a non-point reads everything */
				if (knn_origin(v[0], isnull[0], &x, &y))
				{
					collect_knn(st, x, y, st->k, &c);
					st->knn_scans++;
				}
				else
				{
					all = true;
					st->knn_full_scans++;
				}
			}
			break;
		case PUSH_BOX_OF:
		case PUSH_EXPAND_OF:
		case PUSH_GEOG_BOX:
		case PUSH_ID_RANGE:
		case PUSH_UNION:
			all = collect_parts(st, &c);
			break;
		case PUSH_NONE:
			break;
	}
	if (all)
	{
		if (c.items)
			pfree(c.items);
		st->cand = NULL;
		st->ncand = st->snap->map->count;
	}
	else
	{
		st->cand = c.items ? c.items : MemoryContextAlloc(c.cxt, sizeof(uint64));
		st->ncand = c.n;
	}
	MemoryContextSwitchTo(oldcxt);
}

static TupleTableSlot *
locIterateForeignScan(ForeignScanState *node)
{
	LocScanState *st = node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
	const TdbSnapshot *snap;
	uint64		i;
	const TdbLocation *rec;
	const TdbTraffic *t;
	bool		check;
	Datum		own_geom;

	if (st->snap == NULL)
	{
		st->snap = tdb_backend_snapshot_for_scan(node->ss.ps.state->es_query_cxt);
		loc_find_candidates(node, st);
	}
	snap = st->snap;
next_candidate:
	ExecClearTuple(slot);
	if (st->kind == PUSH_KNN_ORDER)
	{
		uint64_t	entry;
		double		dist;
		int			rc = st->knn_active ? tdb_knn_next(&st->knn, &entry, &dist) : 0;

		if (rc < 0)
			ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory in a nearest-first scan")));
		if (rc == 0)
			return slot;
		i = entry;
	}
	else
	{
		if (st->next >= st->ncand)
			return slot;
		i = st->cand ? st->cand[st->next] : st->next;
		st->next++;
	}
	st->examined++;
	rec = &snap->map->records[i];
	t = &snap->entries[i];
	check = false;
	own_geom = (Datum) 0;
	if (st->recheck != NULL)
	{
		own_geom = record_geom(node, st, i);
		if (!own_recheck_passes(st, own_geom))
		{
			st->recheck_removed++;
			ResetExprContext(node->ss.ps.ps_ExprContext);
			goto next_candidate;
		}
	}
	if (st->radius_clause != NULL)
	{
		if (st->radius_fast)
		{
			double		dist = tdb_map_distance(snap->map, i, st->radius_x, st->radius_y,
												TDB_METRIC_METRES);

			if (dist > st->radius_hi)
				goto next_candidate;
			check = dist > st->radius_lo;
		}
		else
			check = true;
	}
	for (int a = 0; a < st->natts; a++)
	{
		Datum	   *v = &slot->tts_values[a];
		bool	   *n = &slot->tts_isnull[a];

		*n = false;
		switch (check && a == st->geom_att ? COL_GEOM : st->colmap[a])
		{
			case COL_LOCATION_ID:
				*v = Int64GetDatum((int64) rec->id);
				break;
			case COL_GEOM:
				*v = own_geom != (Datum) 0 ? own_geom : record_geom(node, st, i);
				break;
			case COL_ROAD_CLASS:
				{
					const char *s = tdb_map_class(snap->map, i);

					*n = s[0] == '\0';
					*v = *n ? (Datum) 0 : CStringGetTextDatum(s);
				}
				break;
			case COL_NAME:
				{
					const char *s = tdb_map_name(snap->map, i);

					*n = s[0] == '\0';
					*v = *n ? (Datum) 0 : CStringGetTextDatum(s);
				}
				break;
			case COL_LENGTH_M:
				*v = Float8GetDatum(rec->length_m);
				break;
			case COL_SPEED_LIMIT:
				*n = rec->speed_limit_kmh == 0;
				*v = Int16GetDatum((int16) Min(rec->speed_limit_kmh, PG_INT16_MAX));
				break;
			case COL_ONEWAY:
				*v = BoolGetDatum((rec->flags & TDB_LOC_ONEWAY) != 0);
				break;
			case COL_SPEED:
				*n = isnan(t->speed_kmh);
				*v = Float4GetDatum(t->speed_kmh);
				break;
			case COL_FREE_FLOW:
				*n = isnan(t->free_flow_kmh);
				*v = Float4GetDatum(t->free_flow_kmh);
				break;
			case COL_CONGESTION:
				*n = t->congestion == TDB_CONGESTION_UNKNOWN;
				*v = Int16GetDatum(t->congestion);
				break;
			case COL_CONFIDENCE:
				*n = t->updated_at_us == 0 || t->confidence == TDB_CONFIDENCE_UNKNOWN;
				*v = Int16GetDatum(t->confidence);
				break;
			case COL_INCIDENT:
				{
					uint32		len;
					const char *inc = tdb_traffic_incident(snap->traffic, t, &len);

					*n = inc == NULL;
					*v = inc ? PointerGetDatum(cstring_to_text_with_len(inc, (int) len)) : (Datum) 0;
				}
				break;
			case COL_UPDATED_AT:
				*n = t->updated_at_us == 0;
				*v = TimestampTzGetDatum(t->updated_at_us - UNIX_TO_PG_US);
				break;
			case COL_GENERATION:
				*v = Int64GetDatum((int64) snap->generation);
				break;
			case COL_CHANGED_GENERATION:
				*n = t->changed_gen == 0;
				*v = Int64GetDatum((int64) t->changed_gen);
				break;
			default:
				*n = true;
				*v = (Datum) 0;
		}
	}
	ExecStoreVirtualTuple(slot);
	if (check)
	{
		ExprContext *econtext = node->ss.ps.ps_ExprContext;
		bool		isnull;
		Datum		ok;

		st->radius_postgis++;
		econtext->ecxt_scantuple = slot;
		ok = ExecEvalExpr(st->radius_clause, econtext, &isnull);
		if (isnull || !DatumGetBool(ok))
		{
			ResetExprContext(econtext);
			goto next_candidate;
		}
	}
	return slot;
}

static void
locReScanForeignScan(ForeignScanState *node)
{
	LocScanState *st = node->fdw_state;

	/* parameters may have changed: find the candidates again, same snapshot */
	if (st->snap != NULL)
		loc_find_candidates(node, st);
}

static void
locEndForeignScan(ForeignScanState *node)
{
	/* the scan's hold on its version ends with its executor memory (snapshot.c) */
	(void) node;
}

static void
locExplainForeignScan(ForeignScanState *node, ExplainState *es)
{
	LocScanState *st = node->fdw_state;
	const char *desc = st->description;

	/*
	 * Say what the scans did: a k-nearest search from an argument that was
	 * not a point read everything.
	 */
	if (es->analyze && st->kind == PUSH_KNN && st->knn_full_scans > 0 && st->knn_scans == 0)
		desc = psprintf("none (full scan: %s is not a point)", st->knn_arg);
	else if (es->analyze && st->kind == PUSH_KNN && st->knn_scans > 0)
		desc = psprintf("the " INT64_FORMAT " nearest to %s, and their ties", st->k, st->knn_arg);
	ExplainPropertyText("TrafficDB Pushdown", desc, es);
	if (st->recheck != NULL)
		ExplainPropertyText("TrafficDB Recheck", psprintf("%s, its arguments evaluated once per scan", st->recheck_desc), es);
	if (es->analyze && st->kind == PUSH_KNN && st->knn_full_scans > 0 && st->knn_scans > 0)
		ExplainPropertyInteger("Full Scans, Not From a Point", NULL, (int64) st->knn_full_scans, es);
	if (es->analyze)
	{
		/* nearest first: every location whose distance was measured */
		ExplainPropertyInteger("Locations Examined", NULL,
							   (int64) (st->kind == PUSH_KNN_ORDER ? st->knn_measured : st->examined), es);
		if (st->radius_clause != NULL)
			ExplainPropertyInteger("Radius Decided by PostGIS", NULL, (int64) st->radius_postgis, es);
		if (st->recheck != NULL)
			ExplainPropertyInteger("Rows Removed by Recheck", NULL, (int64) st->recheck_removed, es);
		if (st->snap)
			ExplainPropertyInteger("Generation", NULL, (int64) st->snap->generation, es);
	}
}

/*
 * IMPORT FOREIGN SCHEMA trafficdb FROM SERVER trafficdb INTO myschema: the
 * one table there is, "locations" (LIMIT TO / EXCEPT apply).
 */
static List *
locImportForeignSchema(ImportForeignSchemaStmt *stmt, Oid serverOid)
{
	StringInfoData sql;
	bool		wanted = true;
	ListCell   *lc;

	(void) serverOid;
	if (strcmp(stmt->remote_schema, "trafficdb") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_SCHEMA_NOT_FOUND),
				 errmsg("trafficdb has no schema \"%s\"", stmt->remote_schema),
				 errhint("IMPORT FOREIGN SCHEMA trafficdb FROM SERVER %s INTO ...", stmt->server_name)));
	if (stmt->list_type == FDW_IMPORT_SCHEMA_LIMIT_TO || stmt->list_type == FDW_IMPORT_SCHEMA_EXCEPT)
	{
		bool		listed = false;

		foreach(lc, stmt->table_list)
			listed |= strcmp(((RangeVar *) lfirst(lc))->relname, "locations") == 0;
		wanted = (stmt->list_type == FDW_IMPORT_SCHEMA_LIMIT_TO) == listed;
	}
	if (!wanted)
		return NIL;
	initStringInfo(&sql);
	appendStringInfo(&sql,
					 "CREATE FOREIGN TABLE locations (location_id bigint, geom %s.geometry(LineString, 4326), "
					 "road_class text, name text, length_m double precision, speed_limit_kmh smallint, "
					 "oneway boolean, speed_kmh real, free_flow_kmh real, congestion smallint, "
					 "confidence smallint, incident text, updated_at timestamptz, generation bigint, "
					 "changed_generation bigint) "
					 "SERVER %s",
					 quote_identifier(get_namespace_name(tdb_postgis_schema())),
					 quote_identifier(stmt->server_name));
	return list_make1(sql.data);
}

Datum
trafficdb_locations_handler(PG_FUNCTION_ARGS)
{
	FdwRoutine *r;

	/* every callback of this wrapper comes from here: check once */
	tdb_require_preload();
	r = makeNode(FdwRoutine);

	r->GetForeignRelSize = locGetForeignRelSize;
	r->GetForeignPaths = locGetForeignPaths;
	r->GetForeignPlan = locGetForeignPlan;
	r->BeginForeignScan = locBeginForeignScan;
	r->IterateForeignScan = locIterateForeignScan;
	r->ReScanForeignScan = locReScanForeignScan;
	r->EndForeignScan = locEndForeignScan;
	r->ExplainForeignScan = locExplainForeignScan;
	r->ImportForeignSchema = locImportForeignSchema;
	PG_RETURN_POINTER(r);
}

/* No options yet: refuse any, naming it. */
Datum
trafficdb_locations_validator(PG_FUNCTION_ARGS)
{
	List	   *options = untransformRelOptions(PG_GETARG_DATUM(0));

	tdb_require_preload();
	tdb_fdw_check_catalog(PG_GETARG_OID(1), "trafficdb.locations_fdw_validator");
	if (options != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("trafficdb_locations takes no options; \"%s\" given",
						((DefElem *) linitial(options))->defname)));
	PG_RETURN_VOID();
}
