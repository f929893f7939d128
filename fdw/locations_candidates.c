/*-------------------------------------------------------------------------
 *
 * locations_candidates.c
 *	  The locations foreign data wrapper: a scan's candidates.  From the
 *	  pushed arguments' values of a (re)scan, the records that may answer:
 *	  hash lookups of keys, R-tree queries on boxes (geometry and geography),
 *	  id ranges, unions of those, the k nearest, or an incremental
 *	  nearest-first search (src/knn.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "fdw/locations_internal.h"
#include "knn.h"
#include "module/geometry.h"
#include "module/shared.h"
#include "module/snapshot.h"
#include "module/trafficdb.h"

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
		int64		i = tdb_map_find(st->snap->map, (uint64) loc_datum_to_int64(v, type));

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
			i = tdb_map_find(st->snap->map, (uint64) loc_datum_to_int64(elems[e], elemtype));
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
/*
 * The ids [*lo, *hi] of a range's evaluated bounds (RANGE_* flags); false:
 * none (a NULL bound matches nothing, as the comparison does; lo > hi).
 */
static bool
id_range_bounds(int flags, const Datum *v, const bool *isnull, const Oid *type, int64 *lo_out, int64 *hi_out)
{
	int64		lo = PG_INT64_MIN;
	int64		hi = PG_INT64_MAX;
	int			a = 0;

	if (flags & RANGE_LO)
	{
		if (isnull[a])
			return false;
		lo = loc_datum_to_int64(v[a], type[a]);
		if (!(flags & RANGE_LO_INCL))
		{
			if (lo == PG_INT64_MAX)
				return false;
			lo++;
		}
		a++;
	}
	if (flags & RANGE_HI)
	{
		if (isnull[a])
			return false;
		hi = loc_datum_to_int64(v[a], type[a]);
		if (!(flags & RANGE_HI_INCL))
		{
			if (hi == PG_INT64_MIN)
				return false;
			hi--;
		}
	}
	*lo_out = lo;
	*hi_out = hi;
	return lo <= hi;
}

static void
collect_id_range(LocScanState *st, int flags, const Datum *v, const bool *isnull, const Oid *type,
				 Collect *c)
{
	const TdbMapView *map = st->snap->map;
	int64		lo;
	int64		hi;

	if (!id_range_bounds(flags, v, isnull, type, &lo, &hi))
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

/* Record i's points into st->xy (grown as needed); returns their count. */
static uint32
loc_record_geom_xy(ForeignScanState *node, LocScanState *st, uint64 i)
{
	const TdbLocation *rec = &st->snap->map->records[i];

	if (st->xy_cap < rec->npoints)
	{
		st->xy_cap = rec->npoints;
		st->xy = st->xy ? repalloc(st->xy, sizeof(double) * 2 * st->xy_cap)
			: MemoryContextAlloc(node->ss.ps.state->es_query_cxt, sizeof(double) * 2 * st->xy_cap);
	}
	tdb_map_shape(st->snap->map, i, st->xy);
	return rec->npoints;
}

/* Record i's shape as a geometry Datum (its points go through st->xy). */
Datum
loc_record_geom(ForeignScanState *node, LocScanState *st, uint64 i)
{
	uint32		n = loc_record_geom_xy(node, st, i);

	return tdb_linestring_datum(st->xy, n);
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
	/* (an entry refined first was counted there) */
	if (st->knn.refine == NULL)
		st->knn_measured++;
	st->knn_postgis++;
	MemoryContextReset(st->knn_cxt);
	old = MemoryContextSwitchTo(st->knn_cxt);
	ExecClearTuple(slot);
	for (int a = 0; a < slot->tts_tupleDescriptor->natts; a++)
		slot->tts_isnull[a] = true;
	slot->tts_values[st->geom_att] = loc_record_geom(node, st, e);
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

/*
 * From a geography line or polygon (at most 4,096 vertices; a polygon small
 * enough for tdb_sph_shape_init), a lower bound in metres: the great-circle
 * angle from its edges (and a polygon's inside) to a box, then to an
 * entry's own shape, each below PostGIS's sphere distance.  Other shapes
 * (multi-geometries, collections, huge polygons, edges of 179 degrees or
 * more) keep the zero bound: every entry is measured, still exact.
 */
static bool
knn_geo_shape(LocScanState *st, Datum geog, Oid type)
{
	bytea	   *wkb = tdb_geometry_wkb(tdb_geography_to_geometry(geog, type));
	const unsigned char *p = (const unsigned char *) VARDATA_ANY(wkb);
	size_t		len = VARSIZE_ANY_EXHDR(wkb);
	uint32		n,
				rings;
	int			kind = tdb_geo_wkb_shape(p, len, NULL, &n, NULL, &rings);
	double	   *xy;
	uint32	   *ring_end = NULL;

	if ((kind != 2 && kind != 3) || n < 1 || n > 4096 || rings > n)
		return false;
	xy = palloc(sizeof(double) * 2 * n);
	if (kind == 3)
		ring_end = palloc(sizeof(uint32) * Max(rings, 1));
	if (tdb_geo_wkb_shape(p, len, xy, &n, ring_end, &rings) != kind ||
		!tdb_sph_shape_init(&st->knn_geo_shape.shape, xy, n, ring_end, rings, palloc(sizeof(double) * 3 * n)))
		return false;
	st->knn_geo_nq = n;
	return true;
}

/* TdbKnnRefine from a line or polygon: the bound to entry e's own great-circle edges. */
static double
knn_geo_refine(uint64_t e, void *arg)
{
	ForeignScanState *node = arg;
	LocScanState *st = node->fdw_state;
	const TdbLocation *rec = &st->snap->map->records[e];

	/* a long query against a long road: cheaper to let PostGIS measure it */
	st->knn_refined++;
	if ((uint64) rec->npoints * st->knn_geo_nq > 100000)
		return 0.0;
	(void) loc_record_geom_xy(node, st, e);
	return tdb_knn_geodesic_polyline_bound(&st->knn_geo_shape, st->xy, rec->npoints);
}

/* Start the nearest-first scan for query argument v (isnull: every distance is NULL). */
static void
knn_start(ForeignScanState *node, LocScanState *st, Datum v, bool isnull, Oid type)
{
	TdbKnnAlloc alloc = {knn_grow, knn_release, st->eval_cxt};
	TdbKnnBound bound = knn_zero_bound;
	void	   *bound_arg = NULL;
	TdbKnnRefine refine = NULL;
	TdbKnnBound tight = NULL;
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
	else if (!isnull && st->knn_metric == KNN_GEOGRAPHY && isfinite(map_arc_slack(st->snap->map)) &&
			 knn_geo_shape(st, v, type))
	{
		st->knn_geo_shape.slack_m = map_arc_slack(st->snap->map);
		bound = tdb_knn_geodesic_shape_crude;
		bound_arg = &st->knn_geo_shape;
		tight = tdb_knn_geodesic_shape_bound;
		refine = knn_geo_refine;
	}
	tdb_knn_begin(&st->knn, &st->snap->map->rtree, bound, bound_arg, knn_exact, node, &alloc);
	tdb_knn_set_refine(&st->knn, refine, node);
	if (tight)
		tdb_knn_set_tight(&st->knn, tight, bound_arg);
	st->knn_active = true;
}

/* ---- nearest first within an id range ---- */

/*
 * The map's records in id order (as bigint), built in this backend the
 * first time a nearest-first scan with an id range reads a map, and kept
 * for that map (its id): the map object has no id order, its index is a
 * hash.  4 bytes per location and a sort (about 4 ms for Delaware's 52,362
 * locations, 0.1 s per million); not for maps over SORTED_IDS_MAX, which
 * fall back to hash probes or the walk with its filter.
 */
#define SORTED_IDS_MAX 20000000

static uint64 sorted_map_id = 0;
static uint32 *sorted_ids = NULL;
static uint64 sorted_n = 0;
static const TdbLocation *sorted_recs;	/* for the comparator */

static int
cmp_rec_id(const void *a, const void *b)
{
	int64		x = (int64) sorted_recs[*(const uint32 *) a].id;
	int64		y = (int64) sorted_recs[*(const uint32 *) b].id;

	return (x > y) - (x < y);
}

static const uint32 *
map_sorted_ids(const TdbMapView *map)
{
	if (map->count > SORTED_IDS_MAX)
		return NULL;
	if (sorted_ids != NULL && sorted_map_id == map->hdr->map_id && sorted_n == map->count)
		return sorted_ids;
	if (sorted_ids != NULL)
		pfree(sorted_ids);
	sorted_ids = NULL;
	sorted_ids = MemoryContextAllocExtended(TopMemoryContext, sizeof(uint32) * Max(map->count, 1), MCXT_ALLOC_HUGE);
	for (uint64 i = 0; i < map->count; i++)
		sorted_ids[i] = (uint32) i;
	sorted_recs = map->records;
	qsort(sorted_ids, map->count, sizeof(uint32), cmp_rec_id);
	sorted_map_id = map->hdr->map_id;
	sorted_n = map->count;
	return sorted_ids;
}

/* The first position of ids whose id is >= id (after == false) or > id (after). */
static uint64
sorted_bound(const TdbMapView *map, const uint32 *ids, int64 id, bool after)
{
	uint64		lo = 0,
				hi = map->count;

	while (lo < hi)
	{
		uint64		mid = lo + (hi - lo) / 2;
		int64		m = (int64) map->records[ids[mid]].id;

		if (m < id || (after && m == id))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

typedef struct KnnRanked
{
	double		dist;
	uint64		entry;
} KnnRanked;

static int
cmp_ranked(const void *a, const void *b)
{
	const KnnRanked *x = a,
			   *y = b;

	if (x->dist != y->dist)
		return x->dist < y->dist ? -1 : 1;
	return (x->entry > y->entry) - (x->entry < y->entry);
}

static bool
knn_range_filter(uint64_t e, void *arg)
{
	LocScanState *st = arg;
	int64		id = (int64) st->snap->map->records[e].id;

	return id >= st->knn_lo && id <= st->knn_hi;
}

/*
 * A nearest-first scan with an id range: no id in it, no row at once; a
 * few (at most 10 per row the query asks for): each measured, the rows in
 * the walk's order (distance, then entry); more: the walk, skipping
 * entries outside the range before measuring them.
 */
static bool
knn_range_bounds(LocScanState *st)
{
	Datum		v[2] = {0, 0};
	bool		isnull[2] = {true, true};
	Oid			type[2] = {InvalidOid, InvalidOid};
	ListCell   *lc;

	for_each_from(lc, st->expr_states, 1)
	{
		int			a = foreach_current_index(lc) - 1;

		if (a >= 2)
			break;
		v[a] = st->argv[a + 1];
		isnull[a] = st->argnull[a + 1];
		type[a] = exprType((Node *) ((ExprState *) lfirst(lc))->expr);
	}
	return id_range_bounds(st->part_flags[0], v, isnull, type, &st->knn_lo, &st->knn_hi);
}

/* Whether the range holds no id of the map (then the scan reads an empty list). */
static bool
knn_range_empty(LocScanState *st)
{
	const uint32 *ids;
	bool		empty = !knn_range_bounds(st);

	if (!empty && (ids = map_sorted_ids(st->snap->map)) != NULL)
		empty = sorted_bound(st->snap->map, ids, st->knn_lo, false) ==
			sorted_bound(st->snap->map, ids, st->knn_hi, true);
	if (empty)
	{
		st->knn_listed = true;
		st->knn_nlist = 0;
		st->knn_next = 0;
	}
	return empty;
}

static void
knn_range_setup(ForeignScanState *node, LocScanState *st)
{
	const TdbMapView *map = st->snap->map;
	const uint32 *ids;
	uint64		few = (uint64) Max(st->knn_limit, 1) * 10;
	uint64		from = 0,
				to = 0;
	bool		listed = false;
	KnnRanked  *r;

	/* (knn_range_empty set knn_lo and knn_hi) */
	ids = map_sorted_ids(map);
	if (ids != NULL)
	{
		from = sorted_bound(map, ids, st->knn_lo, false);
		to = sorted_bound(map, ids, st->knn_hi, true);
		listed = to - from <= few;
	}
	else if ((uint64) st->knn_hi - (uint64) st->knn_lo < few)
		listed = true;			/* a hash probe per id */
	if (!listed)
	{
		tdb_knn_set_filter(&st->knn, knn_range_filter, st);
		return;
	}
	r = palloc(sizeof(KnnRanked) * Max(few, 1));
	st->knn_nlist = 0;
	if (ids != NULL)
		for (uint64 k = from; k < to; k++)
			r[st->knn_nlist++].entry = ids[k];
	else
		for (int64 id = st->knn_lo;; id++)
		{
			int64		i = tdb_map_find(map, (uint64) id);

			if (i >= 0)
				r[st->knn_nlist++].entry = (uint64) i;
			if (id == st->knn_hi)
				break;
		}
	for (uint64 k = 0; k < st->knn_nlist; k++)
	{
		double		d = knn_exact(r[k].entry, node);

		r[k].dist = isnan(d) ? INFINITY : d;
	}
	if (st->knn.refine != NULL)
		st->knn_measured += st->knn_nlist;	/* (knn_exact leaves them to the refining bound) */
	qsort(r, st->knn_nlist, sizeof(KnnRanked), cmp_ranked);
	st->knn_list = palloc(sizeof(uint64) * Max(st->knn_nlist, 1));
	for (uint64 k = 0; k < st->knn_nlist; k++)
		st->knn_list[k] = r[k].entry;
	st->knn_next = 0;
	st->knn_listed = true;
}

void
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
			st->knn_listed = false;
			/* an id range with no id in it: no row, nothing to start */
			if (st->knn_range && knn_range_empty(st))
				break;
			knn_start(node, st, v[0], isnull[0], type0);
			if (st->knn_range)
				knn_range_setup(node, st);
			break;
		case PUSH_KNN:
			{
				double		x,
							y;

				/* counted for EXPLAIN ANALYZE: a non-point reads everything */
				if (loc_knn_origin(v[0], isnull[0], &x, &y))
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
