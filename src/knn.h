/*
 * knn.h
 *	  Incremental nearest-neighbour scans over the packed R-tree (rtree.h):
 *	  best-first, yielding entries one at a time in non-decreasing exact
 *	  distance, so that a consumer with a filter (SQL's
 *	  WHERE ... ORDER BY geom <-> p LIMIT n) reads only as far as it needs.
 *	  Also the distance functions of the query shapes it serves: planar
 *	  distances in degrees as PostGIS's geometry <-> (point, line or polygon
 *	  query to a polyline), the box distance of <#>, and a lower bound in
 *	  metres for geodesic (geography) distances.
 *
 * The scan.  A binary min-heap holds tree nodes keyed by a lower bound of
 * the distance to anything under them (the caller's bound function of the
 * node's box) and leaf entries keyed first by the bound of their box, then,
 * once they surface, by their exact distance (the caller's exact function);
 * an entry is reported only when it surfaces with its exact key.  As long
 * as bound(box) <= exact(e) for every entry e under box, the output is in
 * non-decreasing exact distance, ties (equal exact distance) by smaller
 * entry index: at equal keys anything not yet exact surfaces first, since
 * it may still hold an entry at that distance with a smaller index.
 *
 * Memory.  The heap grows through an allocator hook (realloc-like), so a
 * PostgreSQL caller can pass palloc/repalloc; with no hook it uses malloc.
 * The heap holds at most (fanout - 1) * (levels) + (entries visited) items.
 *
 * No PostgreSQL headers.
 */
#ifndef TDB_KNN_H
#define TDB_KNN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "geo.h"
#include "rtree.h"

/*
 * Allocator hook.  grow(ctx, p, size) returns a block of size bytes holding
 * the contents of p (p NULL: a new block), like realloc; NULL means out of
 * memory (a palloc-based hook may instead throw).  release(ctx, p) frees.
 */
typedef struct TdbKnnAlloc
{
	void	   *(*grow) (void *ctx, void *p, size_t size);
	void		(*release) (void *ctx, void *p);
	void	   *ctx;
} TdbKnnAlloc;

/*
 * Lower bound of the distance from the query to anything inside box b
 * (a node's box or an entry's box).  Must be <= exact(e) for every entry e
 * under b; that alone keeps the order (a child's bound may even be below
 * its parent's: it then surfaces at once).
 */
typedef double (*TdbKnnBound) (const TdbBoxF *b, void *arg);

/* Exact distance from the query to entry (leaf index) e. */
typedef double (*TdbKnnExact) (uint64_t e, void *arg);

/*
 * Optional, between the two: a lower bound of exact(e) from entry e itself
 * (its shape, not only its box), cheaper than exact: an entry surfaces
 * with its box bound, then with this one, and only then is it measured.
 * (A NaN is taken as 0.)
 */
typedef double (*TdbKnnRefine) (uint64_t e, void *arg);

/* Optional: whether entry e may be reported at all (false: never measured). */
typedef bool (*TdbKnnFilter) (uint64_t e, void *arg);

typedef struct TdbKnnItem TdbKnnItem;

/* An incremental scan; the fields are private. */
typedef struct TdbKnnIter
{
	TdbRtree	tree;
	TdbKnnBound bound;
	void	   *bound_arg;
	TdbKnnExact exact;
	void	   *exact_arg;
	TdbKnnRefine refine;
	void	   *refine_arg;
	TdbKnnBound tight;
	void	   *tight_arg;
	TdbKnnFilter filter;
	void	   *filter_arg;
	TdbKnnAlloc alloc;
	TdbKnnItem *items;
	size_t		n;
	size_t		cap;
	bool		started;
	uint64_t	nexact;			/* calls of exact so far (statistics) */
	uint64_t	nrefined;		/* calls of refine so far */
} TdbKnnIter;

/*
 * Start a scan of t (the TdbRtree is copied; its boxes must stay mapped
 * until tdb_knn_end).  exact NULL: the bound of an entry's own box is its
 * exact distance (the box distance of <#>).  alloc NULL: malloc.  Allocates
 * nothing yet.
 */
void		tdb_knn_begin(TdbKnnIter *it, const TdbRtree *t, TdbKnnBound bound, void *bound_arg,
						  TdbKnnExact exact, void *exact_arg, const TdbKnnAlloc *alloc);

/*
 * After tdb_knn_begin, before the first tdb_knn_next: a refining bound
 * (with exact, not NULL) and a filter; either may be NULL.  With a
 * refining bound, entries at equal distance come as they become final,
 * not by index (the order is still non-decreasing exact distance).
 */
void		tdb_knn_set_refine(TdbKnnIter *it, TdbKnnRefine refine, void *refine_arg);
void		tdb_knn_set_filter(TdbKnnIter *it, TdbKnnFilter filter, void *filter_arg);

/*
 * After tdb_knn_begin: a second, tighter (and dearer) bound of a box, also
 * never above any exact distance under it.  Boxes are pushed with the
 * cheap bound and measured with this one only when they surface, then
 * pushed again; like a refining bound it makes ties come as they become
 * final.
 */
void		tdb_knn_set_tight(TdbKnnIter *it, TdbKnnBound tight, void *tight_arg);

/*
 * The next entry: returns 1 and sets *entry and *dist (a NaN distance is
 * reported as +infinity, after every finite one), 0 when every entry has
 * been returned, -1 when the heap could not grow (the scan can then only
 * be ended).
 */
int			tdb_knn_next(TdbKnnIter *it, uint64_t *entry, double *dist);

/* Free the heap; the iterator may be begun again. */
void		tdb_knn_end(TdbKnnIter *it);

/* ---- planar exact distances (degrees, as PostGIS geometry) --------------- */

/* Distance from point p to segment a-b (a zero-length segment is a point). */
double		tdb_dist_point_segment(double px, double py, double ax, double ay, double bx, double by);

/* Whether segments a-b and c-d share a point (touching counts). */
bool		tdb_segments_intersect(double ax, double ay, double bx, double by,
								   double cx, double cy, double dx, double dy);

/* Distance between segments a-b and c-d: 0 if they intersect. */
double		tdb_dist_segment_segment(double ax, double ay, double bx, double by,
									 double cx, double cy, double dx, double dy);

/* ---- query shapes --------------------------------------------------------- */

typedef enum TdbKnnShape
{
	TDB_KNN_POINT = 0,			/* xy holds 1 point */
	TDB_KNN_LINE = 1,			/* xy holds npoints >= 1 vertices: npoints - 1 segments */
	TDB_KNN_POLYGON = 2			/* rings (closed or not), area by the even-odd rule */
} TdbKnnShape;

/*
 * A planar query geometry (degrees).  A polygon's rings are consecutive in
 * xy: ring r is points [ring_end[r - 1], ring_end[r]) (ring_end[-1] = 0),
 * each implicitly closed; with the even-odd rule over all rings, holes and
 * the disjoint parts of a multipolygon need nothing more.  The arrays are
 * the caller's and must outlive the query.
 */
typedef struct TdbKnnQuery
{
	TdbKnnShape shape;
	const double *xy;
	uint32_t	npoints;
	const uint32_t *ring_end;
	uint32_t	nrings;
	TdbBox		box;			/* of the vertices (set by tdb_knn_query_init) */
} TdbKnnQuery;

/*
 * Set up q; returns false for no point, non-finite coordinates, or rings
 * that do not partition the points (ends not increasing, last != npoints).
 */
bool		tdb_knn_query_init(TdbKnnQuery *q, TdbKnnShape shape, const double *xy, uint32_t npoints,
							   const uint32_t *ring_end, uint32_t nrings);

/* Whether (x, y) is inside the polygon query (even-odd; boundary unspecified). */
bool		tdb_knn_query_contains(const TdbKnnQuery *q, double x, double y);

/* Exact planar distance from the query to segment a-b (a = b: a point). */
double		tdb_knn_query_segment_dist(const TdbKnnQuery *q, double ax, double ay, double bx, double by);

/*
 * Exact planar distance from the query to a polyline of n >= 1 points
 * (ST_Distance of the two 2-D geometries): 0 when they intersect, or when
 * the polyline lies in the polygon query.
 */
double		tdb_knn_query_polyline_dist(const TdbKnnQuery *q, const double *xy, uint32_t n);

/*
 * TdbKnnBound for a TdbKnnQuery *: planar lower bound to a box, shrunk by a
 * relative 1e-12 and an absolute 1e-12 degrees so that rounding in the
 * exact distances can never put them below it.
 */
double		tdb_knn_query_bound(const TdbBoxF *b, void *query);

/*
 * TdbKnnBound for a const TdbBoxF * query box: PostGIS's <#>, the distance
 * between the two boxes (0 when they overlap or touch).  Used with exact
 * NULL, since <#> measures the entries' boxes themselves.
 */
double		tdb_knn_box_dist(const TdbBoxF *b, void *qbox);

/* ---- metres ---------------------------------------------------------------- */

/*
 * WGS 84's smallest radius of curvature, the meridional one at the equator,
 * a (1 - e^2) = b^2 / a = 6335439.327 m, rounded down.  In geodetic
 * coordinates the ellipsoid's line element is ds^2 = M^2 dphi^2 + N^2 cos^2
 * phi dlambda^2 with M >= b^2/a and N >= a, so every path, and the geodesic,
 * is at least b^2/a times the great-circle angle between the same lon/lat
 * points taken on a unit sphere.  The sphere of mean radius PostGIS's
 * geography <-> uses (6371008.77 m) is longer still.
 */
#define TDB_KNN_MIN_RADIUS_M 6335439.0

/* The query of tdb_knn_geodesic_bound. */
typedef struct TdbKnnGeoPoint
{
	double		lon;			/* degrees */
	double		lat;
	/*
	 * Metres by which the entries' geography edges (great-circle arcs,
	 * bulging poleward) can leave their vertex boxes: see
	 * tdb_map_arc_slack_m (object.h).  0 for points or when the caller's
	 * distance joins vertices by straight lon/lat lines.
	 */
	double		slack_m;
	double		coslat;			/* cos(lat): for tdb_knn_geodesic_bound_lb (0 makes it a latitude bound) */
} TdbKnnGeoPoint;

/*
 * TdbKnnBound for a TdbKnnGeoPoint *: a lower bound, in metres, of the
 * geodesic distance on the WGS 84 ellipsoid (or on PostGIS's mean sphere)
 * from the point to anything in the lon/lat box b: TDB_KNN_MIN_RADIUS_M
 * times the great-circle angle from the point to the box (its nearest point
 * lies on the point's meridian inside the box's longitudes, else on the
 * nearer of the box's two meridian edges), less slack_m, shrunk by 1e-9
 * relative and 1 mm.
 */
double		tdb_knn_geodesic_bound(const TdbBoxF *b, void *point);

/*
 * Its first step without trigonometry (with tdb_knn_set_tight taking the
 * one above): from tdb_knn_angle_to_box_lb.
 */
double		tdb_knn_geodesic_bound_lb(const TdbBoxF *b, void *point);

/* The query of tdb_knn_geodesic_shape_bound: a line or a polygon (geo.h). */
typedef struct TdbKnnGeoShape
{
	TdbSphShape shape;
	double		slack_m;		/* as TdbKnnGeoPoint's */
} TdbKnnGeoShape;

/*
 * TdbKnnBound for a TdbKnnGeoShape *: as tdb_knn_geodesic_bound, from the
 * shape's great-circle edges (and a polygon's inside) to the box.
 */
double		tdb_knn_geodesic_shape_bound(const TdbBoxF *b, void *shape);

/*
 * Its cheap first step (with tdb_knn_set_tight taking the one above): from
 * the cap that holds the shape, the angle from the cap's centre to the box
 * less the cap's radius.
 */
double		tdb_knn_geodesic_shape_crude(const TdbBoxF *b, void *shape);

/*
 * A lower bound, in metres, of the geodesic distance from the shape to a
 * polyline of n lon/lat points whose edges are great-circle arcs (an
 * entry's own shape: no slack): TDB_KNN_MIN_RADIUS_M times their angle,
 * shrunk as above.
 */
double		tdb_knn_geodesic_polyline_bound(const TdbKnnGeoShape *g, const double *xy, uint32_t n);

/* Great-circle angle (radians) from (lon, lat) to the lon/lat box b, exact on the sphere. */
double		tdb_knn_angle_to_box(double lon, double lat, const TdbBoxF *b);

/*
 * A lower bound of it without trigonometry (coslat: cos of lat in
 * degrees), near it for near boxes: the first bound of boxes that may never
 * surface.
 */
double		tdb_knn_angle_to_box_lb(double lon, double lat, double coslat, const TdbBoxF *b);

#endif							/* TDB_KNN_H */
