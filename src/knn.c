/*
 * knn.c
 *	  The incremental best-first scan of knn.h over the packed R-tree (and
 *	  rtree.h's k-nearest query, its first k results), and the distances
 *	  and lower bounds of its query shapes.
 */
#include "knn.h"

#include <math.h>
#include <stdlib.h>

#define F TDB_RTREE_FANOUT
#define DEG2RAD (M_PI / 180.0)

struct TdbKnnItem
{
	double		dist;
	uint64_t	index;			/* box index within its level */
	uint32_t	level;
	uint32_t	exact;			/* ITEM_*: how far its key is known */
};

#define ITEM_BOUND 0			/* the box's bound */
#define ITEM_TIGHT 1			/* the box's tight bound (tdb_knn_set_tight) */
#define ITEM_REFINED 2			/* a leaf's refined bound */
#define ITEM_FINAL 3			/* a leaf's exact distance */

/* ---- the scan ------------------------------------------------------------- */

static void *
std_grow(void *ctx, void *p, size_t size)
{
	(void) ctx;
	return realloc(p, size);
}

static void
std_release(void *ctx, void *p)
{
	(void) ctx;
	free(p);
}

void
tdb_knn_begin(TdbKnnIter *it, const TdbRtree *t, TdbKnnBound bound, void *bound_arg,
			  TdbKnnExact exact, void *exact_arg, const TdbKnnAlloc *alloc)
{
	it->tree = *t;
	it->bound = bound;
	it->bound_arg = bound_arg;
	it->exact = exact;
	it->exact_arg = exact_arg;
	it->refine = NULL;
	it->refine_arg = NULL;
	it->tight = NULL;
	it->tight_arg = NULL;
	it->filter = NULL;
	it->filter_arg = NULL;
	it->nrefined = 0;
	if (alloc)
		it->alloc = *alloc;
	else
	{
		it->alloc.grow = std_grow;
		it->alloc.release = std_release;
		it->alloc.ctx = NULL;
	}
	it->items = NULL;
	it->n = 0;
	it->cap = 0;
	it->started = false;
	it->nexact = 0;
}

void
tdb_knn_set_refine(TdbKnnIter *it, TdbKnnRefine refine, void *refine_arg)
{
	it->refine = it->exact ? refine : NULL;
	it->refine_arg = refine_arg;
}

void
tdb_knn_set_tight(TdbKnnIter *it, TdbKnnBound tight, void *tight_arg)
{
	it->tight = tight;
	it->tight_arg = tight_arg;
}

void
tdb_knn_set_filter(TdbKnnIter *it, TdbKnnFilter filter, void *filter_arg)
{
	it->filter = filter;
	it->filter_arg = filter_arg;
}

void
tdb_knn_end(TdbKnnIter *it)
{
	if (it->items)
		it->alloc.release(it->alloc.ctx, it->items);
	it->items = NULL;
	it->n = 0;
	it->cap = 0;
}

/*
 * At equal distance anything not yet final comes first: it may still hold
 * an entry at that distance with a smaller index.  Then nodes before
 * leaves, and index order, which makes the order total.  With a refining
 * bound (final_first) a final entry comes first instead: it is reported
 * as soon as nothing left can be nearer, so that a shape touching many
 * entries (all at distance 0) does not measure them all before the first
 * row; ties then come in the order they become final.
 */
static inline bool
item_before(const TdbKnnItem *a, const TdbKnnItem *b, bool final_first)
{
	if (a->dist != b->dist)
		return a->dist < b->dist;
	if (a->exact != b->exact)
		return final_first ? a->exact > b->exact : a->exact < b->exact;
	if (a->level != b->level)
		return a->level > b->level;
	return a->index < b->index;
}

static bool
heap_push(TdbKnnIter *it, double dist, uint64_t index, uint32_t level, uint32_t exact)
{
	TdbKnnItem	x;
	size_t		i;

	if (it->n == it->cap)
	{
		size_t		cap = it->cap ? it->cap * 2 : 64;
		TdbKnnItem *items = it->alloc.grow(it->alloc.ctx, it->items, cap * sizeof(TdbKnnItem));

		if (items == NULL)
			return false;
		it->items = items;
		it->cap = cap;
	}
	/* a NaN would break the heap order; it sorts as farthest */
	x.dist = isnan(dist) ? INFINITY : dist;
	x.index = index;
	x.level = level;
	x.exact = exact;

	i = it->n++;
	while (i > 0)
	{
		size_t		parent = (i - 1) / 2;

		if (!item_before(&x, &it->items[parent], it->refine != NULL || it->tight != NULL))
			break;
		it->items[i] = it->items[parent];
		i = parent;
	}
	it->items[i] = x;
	return true;
}

static TdbKnnItem
heap_pop(TdbKnnIter *it)
{
	TdbKnnItem	top = it->items[0];
	TdbKnnItem	last = it->items[--it->n];
	size_t		i = 0;

	for (;;)
	{
		size_t		c = 2 * i + 1;

		if (c >= it->n)
			break;
		if (c + 1 < it->n && item_before(&it->items[c + 1], &it->items[c], it->refine != NULL || it->tight != NULL))
			c++;
		if (!item_before(&it->items[c], &last, it->refine != NULL || it->tight != NULL))
			break;
		it->items[i] = it->items[c];
		i = c;
	}
	if (it->n > 0)
		it->items[i] = last;
	return top;
}

int
tdb_knn_next(TdbKnnIter *it, uint64_t *entry, double *dist)
{
	const TdbRtree *t = &it->tree;

	if (!it->started)
	{
		uint32_t	top;

		it->started = true;
		if (t->nlevels == 0 || t->nlevels > TDB_RTREE_MAX_LEVELS)
			return 0;
		top = t->nlevels - 1;
		if (top == 0 && it->filter && !it->filter(0, it->filter_arg))
			return 0;
		if (!heap_push(it, it->bound(&t->boxes[t->levels[top].first], it->bound_arg),
					   0, top, top == 0 && it->exact == NULL ? ITEM_FINAL : ITEM_BOUND))
			return -1;
	}
	while (it->n > 0)
	{
		TdbKnnItem	x = heap_pop(it);
		const TdbRtreeLevel *cl;
		uint64_t	from;
		uint64_t	to;
		bool		leaves_final;

		/* a tighter bound of the box, computed only once it surfaces */
		if (x.exact == ITEM_BOUND && it->tight)
		{
			const TdbBoxF *b = &t->boxes[t->levels[x.level].first + x.index];
			double		d = it->tight(b, it->tight_arg);

			if (!heap_push(it, isnan(d) || d < x.dist ? x.dist : d, x.index, x.level, ITEM_TIGHT))
				return -1;
			continue;
		}
		if (x.level == 0)
		{
			if (x.exact == ITEM_FINAL)
			{
				*entry = x.index;
				*dist = x.dist;
				return 1;
			}
			if (x.exact < ITEM_REFINED && it->refine)
			{
				double		r = it->refine(x.index, it->refine_arg);

				it->nrefined++;
				if (!heap_push(it, isnan(r) || r < x.dist ? x.dist : r, x.index, 0, ITEM_REFINED))
					return -1;
				continue;
			}
			it->nexact++;
			if (!heap_push(it, it->exact(x.index, it->exact_arg), x.index, 0, ITEM_FINAL))
				return -1;
			continue;
		}
		cl = &t->levels[x.level - 1];
		from = x.index * F;
		to = from + F < cl->count ? from + F : cl->count;
		leaves_final = x.level == 1 && it->exact == NULL;
		for (uint64_t c = from; c < to; c++)
		{
			if (x.level == 1 && it->filter && !it->filter(c, it->filter_arg))
				continue;
			if (!heap_push(it, it->bound(&t->boxes[cl->first + c], it->bound_arg),
						   c, x.level - 1, leaves_final ? ITEM_FINAL : ITEM_BOUND))
				return -1;
		}
	}
	return 0;
}

/* ---- k nearest ----------------------------------------------------------- */

/* tdb_rtree_knn (rtree.h): the first k of an incremental scan. */
typedef struct KnnCtx
{
	double		x;
	double		y;
	TdbMetric	metric;
	TdbRtreeEntryDist entry_dist;
	void	   *arg;
} KnnCtx;

static double
knn_bound(const TdbBoxF *b, void *arg)
{
	KnnCtx	   *c = arg;

	return tdb_rtree_box_dist(b, c->x, c->y, c->metric);
}

static double
knn_exact(uint64_t e, void *arg)
{
	KnnCtx	   *c = arg;

	return c->entry_dist(e, c->x, c->y, c->metric, c->arg);
}

int64_t
tdb_rtree_knn(const TdbRtree *t, double x, double y, TdbMetric metric, uint64_t k,
			  TdbRtreeEntryDist entry_dist, void *arg, TdbKnnResult *out)
{
	KnnCtx		c = {x, y, metric, entry_dist, arg};
	TdbKnnIter	it;
	uint64_t	found = 0;

	tdb_knn_begin(&it, t, knn_bound, &c, entry_dist ? knn_exact : NULL, &c, NULL);
	while (found < k)
	{
		int			rc = tdb_knn_next(&it, &out[found].entry, &out[found].dist);

		if (rc < 0)
		{
			tdb_knn_end(&it);
			return -1;
		}
		if (rc == 0)
			break;
		found++;
	}
	tdb_knn_end(&it);
	return (int64_t) found;
}

/* ---- planar distances ----------------------------------------------------- */

/*
 * Measured from the point, as tdb_map_distance() measures (same operations
 * in the same order), so that both give the same value for a segment.
 */
double
tdb_dist_point_segment(double px, double py, double ax, double ay, double bx, double by)
{
	double		x0 = ax - px,
				y0 = ay - py;
	double		x1 = bx - px,
				y1 = by - py;
	double		dx = x1 - x0,
				dy = y1 - y0;
	double		len2 = dx * dx + dy * dy;
	double		t = 0.0;
	double		cx,
				cy;

	if (len2 > 0.0)
	{
		t = -(x0 * dx + y0 * dy) / len2;
		if (t < 0.0)
			t = 0.0;
		else if (t > 1.0)
			t = 1.0;
	}
	cx = x0 + t * dx;
	cy = y0 + t * dy;
	return sqrt(cx * cx + cy * cy);
}

/* Sign of the turn a -> b -> c: > 0 left, < 0 right, 0 collinear. */
static inline double
orient(double ax, double ay, double bx, double by, double cx, double cy)
{
	return (bx - ax) * (cy - ay) - (by - ay) * (cx - ax);
}

/* c, collinear with a-b, lies within a-b's box (so on the segment). */
static inline bool
on_segment(double ax, double ay, double bx, double by, double cx, double cy)
{
	return cx >= fmin(ax, bx) && cx <= fmax(ax, bx) && cy >= fmin(ay, by) && cy <= fmax(ay, by);
}

bool
tdb_segments_intersect(double ax, double ay, double bx, double by,
					   double cx, double cy, double dx, double dy)
{
	double		o1 = orient(ax, ay, bx, by, cx, cy);
	double		o2 = orient(ax, ay, bx, by, dx, dy);
	double		o3 = orient(cx, cy, dx, dy, ax, ay);
	double		o4 = orient(cx, cy, dx, dy, bx, by);

	if (((o1 > 0 && o2 < 0) || (o1 < 0 && o2 > 0)) &&
		((o3 > 0 && o4 < 0) || (o3 < 0 && o4 > 0)))
		return true;
	if (o1 == 0 && on_segment(ax, ay, bx, by, cx, cy))
		return true;
	if (o2 == 0 && on_segment(ax, ay, bx, by, dx, dy))
		return true;
	if (o3 == 0 && on_segment(cx, cy, dx, dy, ax, ay))
		return true;
	if (o4 == 0 && on_segment(cx, cy, dx, dy, bx, by))
		return true;
	return false;
}

/* Disjoint segments are nearest at an end of one of them. */
double
tdb_dist_segment_segment(double ax, double ay, double bx, double by,
						 double cx, double cy, double dx, double dy)
{
	double		d;

	if (tdb_segments_intersect(ax, ay, bx, by, cx, cy, dx, dy))
		return 0.0;
	d = tdb_dist_point_segment(ax, ay, cx, cy, dx, dy);
	d = fmin(d, tdb_dist_point_segment(bx, by, cx, cy, dx, dy));
	d = fmin(d, tdb_dist_point_segment(cx, cy, ax, ay, bx, by));
	d = fmin(d, tdb_dist_point_segment(dx, dy, ax, ay, bx, by));
	return d;
}

/* ---- query shapes ----------------------------------------------------------- */

bool
tdb_knn_query_init(TdbKnnQuery *q, TdbKnnShape shape, const double *xy, uint32_t npoints,
				   const uint32_t *ring_end, uint32_t nrings)
{
	if (npoints == 0 || xy == NULL)
		return false;
	if (shape == TDB_KNN_POINT && npoints != 1)
		return false;
	if (shape == TDB_KNN_POLYGON)
	{
		uint32_t	prev = 0;

		if (nrings == 0 || ring_end == NULL)
			return false;
		for (uint32_t r = 0; r < nrings; r++)
		{
			if (ring_end[r] <= prev)
				return false;
			prev = ring_end[r];
		}
		if (prev != npoints)
			return false;
	}
	else if (shape != TDB_KNN_POINT && shape != TDB_KNN_LINE)
		return false;
	q->shape = shape;
	q->xy = xy;
	q->npoints = npoints;
	q->ring_end = shape == TDB_KNN_POLYGON ? ring_end : NULL;
	q->nrings = shape == TDB_KNN_POLYGON ? nrings : 0;
	q->box.xmin = q->box.ymin = INFINITY;
	q->box.xmax = q->box.ymax = -INFINITY;
	for (uint32_t i = 0; i < npoints; i++)
	{
		double		x = xy[2 * i],
					y = xy[2 * i + 1];

		if (!isfinite(x) || !isfinite(y))
			return false;
		q->box.xmin = fmin(q->box.xmin, x);
		q->box.xmax = fmax(q->box.xmax, x);
		q->box.ymin = fmin(q->box.ymin, y);
		q->box.ymax = fmax(q->box.ymax, y);
	}
	return true;
}

/*
 * Call fn on each boundary segment of the query: the line's segments (one
 * zero-length one for a single point), or each ring's edges with the
 * closing one.  Stops early when fn returns true; returns whether it did.
 */
typedef bool (*SegFn) (double ax, double ay, double bx, double by, void *arg);

static bool
query_segments(const TdbKnnQuery *q, SegFn fn, void *arg)
{
	const double *p = q->xy;

	if (q->shape != TDB_KNN_POLYGON)
	{
		if (q->npoints == 1)
			return fn(p[0], p[1], p[0], p[1], arg);
		for (uint32_t i = 1; i < q->npoints; i++)
			if (fn(p[2 * i - 2], p[2 * i - 1], p[2 * i], p[2 * i + 1], arg))
				return true;
		return false;
	}
	for (uint32_t r = 0, start = 0; r < q->nrings; start = q->ring_end[r], r++)
	{
		uint32_t	end = q->ring_end[r];

		for (uint32_t i = start; i < end; i++)
		{
			uint32_t	j = i + 1 < end ? i + 1 : start;

			if (fn(p[2 * i], p[2 * i + 1], p[2 * j], p[2 * j + 1], arg))
				return true;
		}
	}
	return false;
}

bool
tdb_knn_query_contains(const TdbKnnQuery *q, double x, double y)
{
	const double *p = q->xy;
	bool		in = false;

	if (q->shape != TDB_KNN_POLYGON)
		return false;
	for (uint32_t r = 0, start = 0; r < q->nrings; start = q->ring_end[r], r++)
	{
		uint32_t	end = q->ring_end[r];

		for (uint32_t i = start, j = end - 1; i < end; j = i++)
		{
			double		xi = p[2 * i],
						yi = p[2 * i + 1],
						xj = p[2 * j],
						yj = p[2 * j + 1];

			if ((yi > y) != (yj > y) && x < (xj - xi) * (y - yi) / (yj - yi) + xi)
				in = !in;
		}
	}
	return in;
}

typedef struct SegDist
{
	double		ax,
				ay,
				bx,
				by;
	double		best;
} SegDist;

static bool
seg_dist_fn(double ax, double ay, double bx, double by, void *arg)
{
	SegDist    *s = arg;
	double		d;

	if (ax == bx && ay == by)
		d = tdb_dist_point_segment(ax, ay, s->ax, s->ay, s->bx, s->by);
	else if (s->ax == s->bx && s->ay == s->by)
		d = tdb_dist_point_segment(s->ax, s->ay, ax, ay, bx, by);
	else
		d = tdb_dist_segment_segment(ax, ay, bx, by, s->ax, s->ay, s->bx, s->by);
	if (d < s->best)
		s->best = d;
	return s->best == 0.0;
}

/*
 * A point query measures point to segment exactly as tdb_map_distance()
 * does, so that the planar metric agrees with it bit for bit.
 */
double
tdb_knn_query_segment_dist(const TdbKnnQuery *q, double ax, double ay, double bx, double by)
{
	SegDist		s = {ax, ay, bx, by, INFINITY};

	if (q->shape == TDB_KNN_POINT)
		return tdb_dist_point_segment(q->xy[0], q->xy[1], ax, ay, bx, by);
	query_segments(q, seg_dist_fn, &s);
	return s.best;
}

double
tdb_knn_query_polyline_dist(const TdbKnnQuery *q, const double *xy, uint32_t n)
{
	double		best = INFINITY;

	if (n == 0)
		return INFINITY;
	if (q->shape == TDB_KNN_POLYGON && tdb_knn_query_contains(q, xy[0], xy[1]))
		return 0.0;
	if (n == 1)
		return tdb_knn_query_segment_dist(q, xy[0], xy[1], xy[0], xy[1]);
	for (uint32_t i = 1; i < n && best > 0.0; i++)
		best = fmin(best, tdb_knn_query_segment_dist(q, xy[2 * i - 2], xy[2 * i - 1], xy[2 * i], xy[2 * i + 1]));
	return best;
}

/* ---- lower bounds -------------------------------------------------------------- */

static inline double
point_box(double x, double y, double xmin, double ymin, double xmax, double ymax)
{
	double		cx = x < xmin ? xmin : (x > xmax ? xmax : x);
	double		cy = y < ymin ? ymin : (y > ymax ? ymax : y);
	double		dx = cx - x,
				dy = cy - y;

	return sqrt(dx * dx + dy * dy);
}

typedef struct SegBox
{
	double		xmin,
				ymin,
				xmax,
				ymax;
	double		best;
} SegBox;

/* Distance from segment a-b to the box: a convex pair, nearest at a vertex of one. */
static bool
seg_box_fn(double ax, double ay, double bx, double by, void *arg)
{
	SegBox	   *s = arg;
	double		d;

	if ((ax >= s->xmin && ax <= s->xmax && ay >= s->ymin && ay <= s->ymax) ||
		(bx >= s->xmin && bx <= s->xmax && by >= s->ymin && by <= s->ymax) ||
		tdb_segments_intersect(ax, ay, bx, by, s->xmin, s->ymin, s->xmax, s->ymin) ||
		tdb_segments_intersect(ax, ay, bx, by, s->xmax, s->ymin, s->xmax, s->ymax) ||
		tdb_segments_intersect(ax, ay, bx, by, s->xmax, s->ymax, s->xmin, s->ymax) ||
		tdb_segments_intersect(ax, ay, bx, by, s->xmin, s->ymax, s->xmin, s->ymin))
		d = 0.0;
	else
	{
		d = point_box(ax, ay, s->xmin, s->ymin, s->xmax, s->ymax);
		d = fmin(d, point_box(bx, by, s->xmin, s->ymin, s->xmax, s->ymax));
		d = fmin(d, tdb_dist_point_segment(s->xmin, s->ymin, ax, ay, bx, by));
		d = fmin(d, tdb_dist_point_segment(s->xmax, s->ymin, ax, ay, bx, by));
		d = fmin(d, tdb_dist_point_segment(s->xmax, s->ymax, ax, ay, bx, by));
		d = fmin(d, tdb_dist_point_segment(s->xmin, s->ymax, ax, ay, bx, by));
	}
	if (d < s->best)
		s->best = d;
	return s->best == 0.0;
}

/*
 * The margin covers rounding: the exact distances take other paths through
 * floating point (projection onto a segment), a few ulps of the
 * coordinates (about 3e-14 at 180 degrees) at most.
 */
static inline double
shrink(double d, double rel, double abs)
{
	d = d - (d * rel + abs);
	return d > 0.0 ? d : 0.0;
}

double
tdb_knn_query_bound(const TdbBoxF *b, void *query)
{
	const TdbKnnQuery *q = query;
	SegBox		s = {b->xmin, b->ymin, b->xmax, b->ymax, INFINITY};

	if (q->shape == TDB_KNN_POINT)
		s.best = point_box(q->xy[0], q->xy[1], s.xmin, s.ymin, s.xmax, s.ymax);
	else
	{
		query_segments(q, seg_box_fn, &s);
		/* no ring edge crosses the box: it is all inside or all outside */
		if (s.best > 0.0 && q->shape == TDB_KNN_POLYGON &&
			tdb_knn_query_contains(q, s.xmin, s.ymin))
			s.best = 0.0;
	}
	return shrink(s.best, 1e-12, 1e-12);
}

/* As PostGIS's box2df_distance: the gap on each axis, in double. */
double
tdb_knn_box_dist(const TdbBoxF *b, void *qbox)
{
	const TdbBoxF *q = qbox;
	double		dx = 0.0,
				dy = 0.0;

	if ((double) q->xmin > (double) b->xmax)
		dx = (double) q->xmin - (double) b->xmax;
	else if ((double) b->xmin > (double) q->xmax)
		dx = (double) b->xmin - (double) q->xmax;
	if ((double) q->ymin > (double) b->ymax)
		dy = (double) q->ymin - (double) b->ymax;
	else if ((double) b->ymin > (double) q->ymax)
		dy = (double) b->ymin - (double) q->ymax;
	if (dx == 0.0)
		return dy;
	if (dy == 0.0)
		return dx;
	return sqrt(dx * dx + dy * dy);
}

/* ---- metres ---------------------------------------------------------------------- */

/*
 * The haversine angle between latitude p (cosine cp) and latitude q (cosine
 * cq) dl apart in longitude, given h2 = sin^2(dl / 2).
 */
static inline double
haversine_angle(double p, double cp, double q, double cq, double h2)
{
	double		s = sin((q - p) / 2.0);
	double		h = s * s + cp * cq * h2;

	return 2.0 * asin(sqrt(h > 1.0 ? 1.0 : h));
}

/*
 * Nearest point of the meridian arc dl away in longitude (0 <= dl <= pi),
 * latitudes [p1, p2], to latitude p (sp, cp: its sine and cosine): the
 * great-circle angle.  cos(angle) at latitude q is sin p sin q + cos p
 * cos q cos dl = A sin q + B cos q, a sinusoid in q whose maximum is at
 * q* = atan2(A, B): the arc's nearest point is q* when it lies strictly
 * inside [p1, p2] (then the sinusoid rises at p1 and falls at p2), else an
 * end.  The ends' angles are both measured by the haversine (comparing
 * cosines would pick a wrong end by rounding when both are centimetres
 * away), so a box costs about seven trigonometric calls.
 */
static double
angle_to_meridian(double p, double sp, double cp, double dl, double p1, double p2)
{
	double		h2 = sin(dl / 2.0),
				s1,
				c1,
				s2,
				c2,
				a = sp,
				b;

	h2 *= h2;
	b = cp * (1.0 - 2.0 * h2);	/* cp * cos(dl) */
	s1 = sin(p1);
	c1 = cos(p1);
	s2 = sin(p2);
	c2 = cos(p2);
	if (a * c1 - b * s1 > 0.0 && a * c2 - b * s2 < 0.0)
	{
		double		q = atan2(a, b);

		return haversine_angle(p, cp, q, cos(q), h2);
	}
	return fmin(haversine_angle(p, cp, p1, c1, h2), haversine_angle(p, cp, p2, c2, h2));
}

/* |a - b| in longitude, wrapped into [0, pi]. */
static inline double
lon_gap(double a, double b)
{
	double		d = fabs(a - b);

	if (d > 2.0 * M_PI)
		d = fmod(d, 2.0 * M_PI);

	return d > M_PI ? 2.0 * M_PI - d : d;
}

/*
 * Within the box's longitudes the nearest point is on the point's own
 * meridian (the angle is at least the latitude difference, reached there).
 * Outside, for any latitude q in the box, moving towards the point's
 * longitude shortens the way (cos(angle) grows as cos(dl) does, cos p cos q
 * being >= 0), so the nearest point is on the meridian edge nearer in
 * longitude (either, at a tie).
 */
double
tdb_knn_angle_to_box(double lon, double lat, const TdbBoxF *b)
{
	double		l = lon * DEG2RAD,
				p = lat * DEG2RAD;
	double		p1 = (double) b->ymin * DEG2RAD,
				p2 = (double) b->ymax * DEG2RAD;

	if (lon >= (double) b->xmin && lon <= (double) b->xmax)
		return p < p1 ? p1 - p : (p > p2 ? p - p2 : 0.0);
	return angle_to_meridian(p, sin(p), cos(p),
							 fmin(lon_gap(l, (double) b->xmin * DEG2RAD), lon_gap(l, (double) b->xmax * DEG2RAD)),
							 p1, p2);
}

/*
 * A lower bound of tdb_knn_angle_to_box without a trigonometric call, for
 * boxes pushed on the scan's heap (most never surface).  For any point of
 * the box, at latitude q, dq and dl away from (lon, lat) in latitude and
 * longitude: hav(angle) = hav(dq) + cos(lat) cos(q) hav(dl) (hav x =
 * sin^2(x/2)), at least s(dq)^2 + c s(dl)^2 where dq and dl are the box's
 * least gaps (0 within its range), s(x) = x/2 - (x/2)^3/6 <= sin(x/2) (x in
 * [0, pi]) and c = cos(lat) times cos_lb of the box's largest |latitude|
 * (cos is even and falls on [0, pi/2]); and angle = 2 asin(sqrt(hav)) >=
 * 2 sqrt(hav).  For a small box near the point it is within 0.5 % of the
 * exact angle (test_knn_geodesic_bound); it is looser for far boxes (asin y
 * >= y gives up to pi/2 at the antipode) and for tall ones (the cosine of
 * the latitude farthest from the equator, 0 for a box touching a pole): the
 * exact angle, taken when a box surfaces, makes up for it.
 */
static inline double
cos_lb(double x)
{
	double		x2 = x * x;

	/* alternating Taylor series cut after a negative term: <= cos x for |x| <= pi/2 */
	return 1.0 - x2 * 0.5 * (1.0 - x2 * (1.0 / 12.0) * (1.0 - x2 * (1.0 / 30.0)));
}

static inline double
sin_half_lb(double x)
{
	double		h = x * 0.5;

	return h - h * h * h * (1.0 / 6.0);
}

double
tdb_knn_angle_to_box_lb(double lon, double lat, double coslat, const TdbBoxF *b)
{
	double		ymin = b->ymin,
				ymax = b->ymax,
				xmin = b->xmin,
				xmax = b->xmax;
	double		dq = lat < ymin ? ymin - lat : (lat > ymax ? lat - ymax : 0.0);
	double		dl = 0.0,
				c = 0.0,
				qmax = fmax(fabs(ymin), fabs(ymax)) * DEG2RAD,
				s1,
				s2;

	if (!(lon >= xmin && lon <= xmax))
		dl = fmin(lon_gap(lon * DEG2RAD, xmin * DEG2RAD), lon_gap(lon * DEG2RAD, xmax * DEG2RAD));
	if (qmax < M_PI / 2)
		c = coslat * fmax(0.0, cos_lb(qmax));
	s1 = sin_half_lb(fmin(dq * DEG2RAD, M_PI));
	s2 = sin_half_lb(dl);
	return 2.0 * sqrt(s1 * s1 + c * s2 * s2);
}

double
tdb_knn_geodesic_bound(const TdbBoxF *b, void *point)
{
	const TdbKnnGeoPoint *g = point;
	double		d = tdb_knn_angle_to_box(g->lon, g->lat, b) * TDB_KNN_MIN_RADIUS_M;

	return shrink(d - g->slack_m, 1e-9, 1e-3);
}

double
tdb_knn_geodesic_bound_lb(const TdbBoxF *b, void *point)
{
	const TdbKnnGeoPoint *g = point;
	double		d = tdb_knn_angle_to_box_lb(g->lon, g->lat, g->coslat, b) * TDB_KNN_MIN_RADIUS_M;

	return shrink(d - g->slack_m, 1e-9, 1e-3);
}

double
tdb_knn_geodesic_shape_bound(const TdbBoxF *b, void *shape)
{
	const TdbKnnGeoShape *g = shape;
	double		d = tdb_sph_shape_box_angle(&g->shape, (double) b->xmin, (double) b->ymin,
											(double) b->xmax, (double) b->ymax) * TDB_KNN_MIN_RADIUS_M;

	return shrink(d - g->slack_m, 1e-9, 1e-3);
}

double
tdb_knn_geodesic_polyline_bound(const TdbKnnGeoShape *g, const double *xy, uint32_t n)
{
	return shrink(tdb_sph_shape_polyline_angle(&g->shape, xy, n) * TDB_KNN_MIN_RADIUS_M, 1e-9, 1e-3);
}

double
tdb_knn_geodesic_shape_crude(const TdbBoxF *b, void *shape)
{
	const TdbKnnGeoShape *g = shape;
	double		d;

	if (g->shape.cap_r >= M_PI / 2)
		return 0.0;
	d = (tdb_knn_angle_to_box_lb(g->shape.cap_lon, g->shape.cap_lat, g->shape.cap_coslat, b) -
		 g->shape.cap_r) * TDB_KNN_MIN_RADIUS_M;
	return shrink(d - g->slack_m, 1e-9, 1e-3);
}
