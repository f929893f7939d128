/*-------------------------------------------------------------------------
 *
 * locations_knn.c
 *	  The locations foreign data wrapper: nearest first (PUSH_KNN_ORDER).
 *	  The incremental search of src/knn.c over the map's R-tree with the
 *	  query's bounds (degrees, <#> boxes, metres from a point, and from a
 *	  geography line or polygon: a cap, then the arcs, then the entry's own
 *	  arcs), each entry measured by the query's own ORDER BY expression; and
 *	  within an id range, from the map's ids in order (built per backend and
 *	  map).  Also the helpers the other candidates share: a geometry's box,
 *	  the map's arc slack, an id range's bounds, a record's shape.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>
#include <string.h>

#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "utils/memutils.h"

#include "fdw/locations_internal.h"
#include "knn.h"
#include "module/geometry.h"
#include "module/shared.h"
#include "module/snapshot.h"
#include "module/trafficdb.h"

/*
 * The bounding box of a geometry Datum, exactly (double precision).  false:
 * NULL or empty.  as_postgis: round it outward to floats, as PostGIS's &&
 * sees it.
 */
bool
loc_geometry_box_ex(Datum geom, TdbBox *box, bool as_postgis)
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

/*
 * The ids [*lo, *hi] of a range's evaluated bounds (RANGE_* flags); false:
 * none (a NULL bound matches nothing, as the comparison does; lo > hi).
 */
bool
loc_id_range_bounds(int flags, const Datum *v, const bool *isnull, const Oid *type, int64 *lo_out, int64 *hi_out)
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

/*
 * How far, in metres, the records' geography edges (great-circle arcs) can
 * leave their lon/lat vertex boxes, which are what the R-tree holds: a
 * geography query grows its box by this much so that a road bulging
 * poleward past its own vertices is not missed.  The daemon measures it
 * once per map; a backend reading another map than the daemon's current one
 * (a long transaction) measures it itself, once.  +infinity: an edge spans
 * 180 degrees or more (every record is then a candidate).
 */
double
loc_map_arc_slack(const TdbMapView *map)
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

static bool knn_walk_filter(uint64_t e, void *arg);

/*
 * PostGIS's distance of entry e: the query's own ORDER BY expression,
 * evaluated on it (a float8, by value: it outlives knn_cxt's reset).
 */
Datum
loc_knn_measure(ForeignScanState *node, uint64 e, bool *isnull)
{
	LocScanState *st = node->fdw_state;
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	TupleTableSlot *slot = st->knn_slot;
	TupleTableSlot *saved = econtext->ecxt_scantuple;
	MemoryContext old;
	Datum		d;

	CHECK_FOR_INTERRUPTS();
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
	d = ExecEvalExpr(st->order_state, econtext, isnull);
	econtext->ecxt_scantuple = saved;
	MemoryContextSwitchTo(old);
	return *isnull ? (Datum) 0 : d;
}

/* The same as a double for the walk (NULL: NaN, which it keeps as infinity). */
static double
knn_exact(uint64_t e, void *arg)
{
	ForeignScanState *node = arg;
	LocScanState *st = node->fdw_state;
	bool		isnull;
	Datum		d;

	/* (an entry refined first was counted there) */
	if (st->knn.refine == NULL)
		st->knn_measured++;
	d = loc_knn_measure(node, e, &isnull);
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
	if (!isnull && st->knn_metric != KNN_GEOGRAPHY && loc_geometry_box_ex(v, &box, false))
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
			 loc_geometry_box_ex(tdb_geography_to_geometry(v, type), &box, false) &&
			 box.xmin == box.xmax && box.ymin == box.ymax)
	{
		/* from a point: a lower bound in metres (any other shape: 0, still exact) */
		st->knn_geo.lon = box.xmin;
		st->knn_geo.lat = box.ymin;
		st->knn_geo.slack_m = loc_map_arc_slack(st->snap->map);
		st->knn_geo.coslat = cos(box.ymin * (M_PI / 180.0));
		if (isfinite(st->knn_geo.slack_m))
		{
			/* trig-free for the boxes pushed, the exact angle for those that surface */
			bound = tdb_knn_geodesic_bound_lb;
			bound_arg = &st->knn_geo;
			tight = tdb_knn_geodesic_bound;
		}
	}
	else if (!isnull && st->knn_metric == KNN_GEOGRAPHY && isfinite(loc_map_arc_slack(st->snap->map)) &&
			 knn_geo_shape(st, v, type))
	{
		st->knn_geo_shape.slack_m = loc_map_arc_slack(st->snap->map);
		bound = tdb_knn_geodesic_shape_crude;
		bound_arg = &st->knn_geo_shape;
		tight = tdb_knn_geodesic_shape_bound;
		refine = knn_geo_refine;
	}
	tdb_knn_begin(&st->knn, &st->snap->map->rtree, bound, bound_arg, knn_exact, node, &alloc);
	tdb_knn_set_refine(&st->knn, refine, node);
	st->knn_range_walk = false;
	if (st->prefilter != NULL)
		tdb_knn_set_filter(&st->knn, knn_walk_filter, node);
	if (tight)
		tdb_knn_set_tight(&st->knn, tight, bound_arg);
	st->knn_active = true;
}

/* ---- nearest first within an id range ---- */

/*
 * The map's records in id order (as bigint), built in this backend the
 * first time a nearest-first scan with an id range reads a map, and kept
 * for that map (its id): the map object has no id order, its index is a
 * hash.  4 bytes per location kept (and 32 while sorting), a radix sort
 * (about 1 ms for Delaware's 52,362 locations); not for maps over
 * SORTED_IDS_MAX, which fall back to hash probes or the walk with its
 * filter.
 */
#define SORTED_IDS_MAX 20000000

static uint64 sorted_map_id = 0;
static uint32 *sorted_ids = NULL;
static uint64 sorted_n = 0;

typedef struct IdRec
{
	uint64		key;			/* the id as bigint, its sign bit flipped: unsigned order */
	uint32		rec;
} IdRec;

/*
 * LSD radix sort of n records by key, 16 bits a pass (a pass whose digit is
 * the same for all is skipped); stable, so equal ids stay in record order.
 * The result is in a or b, returned.  (glibc's qsort took 19 ms for
 * Delaware's 52,362 on this 2-core machine; this about 1 ms.)
 */
static IdRec *
radix_sort_ids(IdRec *a, IdRec *b, uint64 n)
{
	uint64	   *count = palloc(sizeof(uint64) * 65536);

	for (int shift = 0; shift < 64; shift += 16)
	{
		uint64		sum = 0;
		IdRec	   *t;

		memset(count, 0, sizeof(uint64) * 65536);
		for (uint64 i = 0; i < n; i++)
			count[(a[i].key >> shift) & 0xffff]++;
		if (n > 0 && count[(a[0].key >> shift) & 0xffff] == n)
			continue;
		for (int d = 0; d < 65536; d++)
		{
			uint64		c = count[d];

			count[d] = sum;
			sum += c;
		}
		for (uint64 i = 0; i < n; i++)
			b[count[(a[i].key >> shift) & 0xffff]++] = a[i];
		t = a;
		a = b;
		b = t;
	}
	pfree(count);
	return a;
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
	{
		/* sorted with their ids beside them (not read through the records at each comparison) */
		IdRec	   *a = MemoryContextAllocExtended(CurrentMemoryContext, sizeof(IdRec) * Max(map->count, 1),
												   MCXT_ALLOC_HUGE);
		IdRec	   *b = MemoryContextAllocExtended(CurrentMemoryContext, sizeof(IdRec) * Max(map->count, 1),
												   MCXT_ALLOC_HUGE);
		IdRec	   *sorted;
		uint32	   *ids = MemoryContextAllocExtended(TopMemoryContext, sizeof(uint32) * Max(map->count, 1),
													 MCXT_ALLOC_HUGE);

		for (uint64 i = 0; i < map->count; i++)
		{
			a[i].key = map->records[i].id ^ ((uint64) 1 << 63);
			a[i].rec = (uint32) i;
		}
		sorted = radix_sort_ids(a, b, map->count);
		for (uint64 i = 0; i < map->count; i++)
			ids[i] = sorted[i].rec;
		pfree(a);
		pfree(b);
		sorted_ids = ids;
	}
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
 * Does entry e pass the quals the scan checks before measuring it
 * (knn_prefilter)?  Its columns but geom, in a slot of the scan tuple's
 * shape, in memory reset at each entry.
 */
static bool
knn_prefilter_passes(ForeignScanState *node, LocScanState *st, uint64 e)
{
	ExprContext *econtext = st->pre_econtext;
	TupleTableSlot *slot = st->pre_slot;
	MemoryContext old;
	bool		ok;

	CHECK_FOR_INTERRUPTS();
	ResetExprContext(econtext);
	old = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
	ExecClearTuple(slot);
	/* (loc_fill_row sets the table's columns; the distance after them, if any, is NULL) */
	for (int a = st->natts; a < slot->tts_tupleDescriptor->natts; a++)
		slot->tts_isnull[a] = true;
	loc_fill_row(node, st, slot, e, (Datum) 0, false, false);
	ExecStoreVirtualTuple(slot);
	econtext->ecxt_scantuple = slot;
	ok = ExecQual(st->prefilter, econtext);
	MemoryContextSwitchTo(old);
	if (!ok)
		st->knn_prefiltered++;
	return ok;
}

/* The walk's filter: the id range it skips outside of, the quals it checks first. */
static bool
knn_walk_filter(uint64_t e, void *arg)
{
	ForeignScanState *node = arg;
	LocScanState *st = node->fdw_state;

	if (st->knn_range_walk && !knn_range_filter(e, st))
		return false;
	return st->prefilter == NULL || knn_prefilter_passes(node, st, e);
}

/*
 * A nearest-first scan with an id range: no id in it, no row at once; a
 * few (at most 10 per row the query asks for, and 100,000): each measured,
 * the rows in the walk's order (distance, then entry); more: the walk,
 * skipping entries outside the range before measuring them.
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
	return loc_id_range_bounds(st->part_flags[0], v, isnull, type, &st->knn_lo, &st->knn_hi);
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
	uint64		few = Min((uint64) Max(st->knn_limit, 1) * 10, 100000);
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
		st->knn_range_walk = true;
		tdb_knn_set_filter(&st->knn, knn_walk_filter, node);
		return;
	}
	r = palloc(sizeof(KnnRanked) * (ids != NULL ? Max(to - from, 1) : (uint64) st->knn_hi - (uint64) st->knn_lo + 1));
	st->knn_nlist = 0;
	/* (what the quals checked first remove is not measured) */
	if (ids != NULL)
	{
		for (uint64 k = from; k < to; k++)
			if (st->prefilter == NULL || knn_prefilter_passes(node, st, ids[k]))
				r[st->knn_nlist++].entry = ids[k];
	}
	else
		for (int64 id = st->knn_lo;; id++)
		{
			int64		i = tdb_map_find(map, (uint64) id);

			if (i >= 0 && (st->prefilter == NULL || knn_prefilter_passes(node, st, (uint64) i)))
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
	st->knn_list_dist = palloc(sizeof(double) * Max(st->knn_nlist, 1));
	for (uint64 k = 0; k < st->knn_nlist; k++)
	{
		st->knn_list[k] = r[k].entry;
		st->knn_list_dist[k] = r[k].dist;
	}
	st->knn_next = 0;
	st->knn_listed = true;
}


/*
 * Start a (re)scan's nearest-first search from query argument v (isnull:
 * every distance is NULL), within its id range if it has one.
 */
void
loc_knn_begin(ForeignScanState *node, LocScanState *st, Datum v, bool isnull, Oid type)
{
	/* the iterator lives in eval_cxt, reset by the caller: start afresh */
	st->knn_active = false;
	st->knn_listed = false;
	/* an id range with no id in it: no row, nothing to start */
	if (st->knn_range && knn_range_empty(st))
		return;
	knn_start(node, st, v, isnull, type);
	if (st->knn_range)
		knn_range_setup(node, st);
}
