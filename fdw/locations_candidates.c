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

/* The box as PostGIS's && sees it (float, rounded outward). */
static bool
geometry_box(Datum geom, TdbBox *box)
{
	return loc_geometry_box_ex(geom, box, true);
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
	int64		lo;
	int64		hi;

	if (!loc_id_range_bounds(flags, v, isnull, type, &lo, &hi))
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
			if (!(d >= 0) || tdb_geography_box(v[0], type[0], &box) != 1 ||
				!tdb_box_grow_metres(&box, d + TDB_GEOG_TOUCH_M + loc_map_arc_slack(st->snap->map)))
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
				double		slack = loc_map_arc_slack(st->snap->map);
				TdbBox		exact;

				st->radius_fast = false;
				if (isnull[0])
					break;
				if (!(d >= 0) || tdb_geography_box(v[0], type0, &box) != 1 ||
					!tdb_box_grow_metres(&box, d + slack))
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
				if (d <= 20000 && loc_geometry_box_ex(tdb_geography_to_geometry(v[0], type0), &exact, false) &&
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
			loc_knn_begin(node, st, v[0], isnull[0], type0);
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
