/*
 * rtree.h
 *	  Packed, immutable R-tree over float boxes: STR bulk-load order, an
 *	  implicit node layout, and box / radius / k-nearest queries.
 *
 * Layout.  The tree is a stack of levels stored in one contiguous array of
 * TdbBoxF.  Level 0 holds one box per entry (in the order tdb_rtree_order()
 * chose; the map object stores its records in that same order, so entry i of
 * level 0 is record i).  Level L+1 has ceil(n_L / TDB_RTREE_FANOUT) boxes, box
 * j covering children [j*F, min((j+1)*F, n_L)) of level L.  The last level has
 * exactly one box (the root).  An empty tree has no levels.  Nothing in the
 * layout is a pointer, so it can live in shared memory at any address.
 *
 * A node's 16 child boxes are 256 bytes: four cache lines read in sequence.
 *
 * Boxes are floats rounded outward (a float box always contains the double
 * box it was made from), as PostGIS's GiST does; queries therefore return a
 * superset of the entries whose double boxes qualify, and callers recheck
 * with exact geometry where they need exact answers.
 *
 * No PostgreSQL headers; no allocation in box and radius queries.
 */
#ifndef TDB_RTREE_H
#define TDB_RTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "geo.h"

#define TDB_RTREE_FANOUT 16
#define TDB_RTREE_MAX_LEVELS 16	/* 16^15 entries: far more than any map */

typedef struct TdbBoxF
{
	float		xmin;
	float		ymin;
	float		xmax;
	float		ymax;
} TdbBoxF;

typedef struct TdbRtreeLevel
{
	uint64_t	first;			/* index of the level's first box in the box array */
	uint64_t	count;			/* number of boxes in the level */
} TdbRtreeLevel;

/* A read-only view of a tree: where its levels and boxes are. */
typedef struct TdbRtree
{
	const TdbBoxF *boxes;
	const TdbRtreeLevel *levels;	/* levels[0] = leaves, levels[nlevels-1] = root */
	uint32_t	nlevels;
} TdbRtree;

/* The float box that surely contains a double box (outward rounding). */
TdbBoxF		tdb_boxf_from_boxd(const TdbBox *b);

/*
 * Sort-Tile-Recursive order: fills perm[0..n-1] with a permutation of
 * 0..n-1 such that entries perm[0], perm[1], ... are in STR leaf order
 * (sorted into vertical slices by box centre x, each slice by centre y).
 * Returns 0, or -1 if memory could not be allocated.
 */
int			tdb_rtree_order(const TdbBox *boxes, size_t n, uint32_t *perm);
/* The same, for boxes stride bytes apart (first: the first one), e.g. inside larger records. */
int			tdb_rtree_order_strided(const TdbBox *first, size_t stride, size_t n, uint32_t *perm);

/* Number of levels, and total number of boxes over all levels, for n entries. */
uint32_t	tdb_rtree_nlevels(uint64_t n);
uint64_t	tdb_rtree_nboxes(uint64_t n);

/*
 * Build the upper levels in place.  On entry boxes[0..n-1] holds the leaf
 * boxes (already in tree order); on return boxes holds all
 * tdb_rtree_nboxes(n) boxes and levels[0..nlevels-1] describes them.
 */
void		tdb_rtree_build(TdbBoxF *boxes, uint64_t n, TdbRtreeLevel *levels);

/*
 * Visitor: called with the leaf index of each entry whose box qualifies.
 * Return 0 to go on, nonzero to stop the query (the query then returns
 * that value).
 */
typedef int (*TdbRtreeVisit) (uint64_t entry, void *arg);

/* Entries whose box intersects q (boundaries included). */
int			tdb_rtree_query_box(const TdbRtree *t, const TdbBox *q, TdbRtreeVisit visit, void *arg);

/*
 * tdb_rtree_query_box with wholesale acceptance, for queries whose shape
 * (a circle) lies in the query box: contained(b, arg) returns true when
 * every entry whose geometry lies in box b surely qualifies.  Visits the
 * same entries as tdb_rtree_query_box, in the same order, with inside =
 * true for those under a box inside the query box that contained()
 * accepted (no need to measure them) and false for the rest (measure).
 */
typedef bool (*TdbRtreeContained) (const TdbBoxF *b, void *arg);
typedef int (*TdbRtreeVisitIn) (uint64_t entry, bool inside, void *arg);

int			tdb_rtree_query_box_within(const TdbRtree *t, const TdbBox *q, TdbRtreeContained contained,
									   TdbRtreeVisitIn visit, void *arg);

/*
 * Distance metric for k-nearest queries.
 * PLANAR: Euclidean distance in degrees, as PostGIS's geometry <-> operator.
 * METRES: metres in a local equirectangular projection centred on the query
 *         point (x scaled by cos(latitude of the query point)); within 0.5 %
 *         of the great-circle distance up to about 50 km at mid latitudes.
 */
typedef enum TdbMetric
{
	TDB_METRIC_PLANAR = 0,
	TDB_METRIC_METRES = 1
} TdbMetric;

/*
 * Distance from point (x, y) to an entry, under a metric: the caller knows
 * the exact geometry (the R-tree only knows boxes).  Must never be less than
 * the box distance of the entry's box, which holds for any geometry inside
 * the box.
 */
typedef double (*TdbRtreeEntryDist) (uint64_t entry, double x, double y, TdbMetric metric, void *arg);

/* Lower bound of the distance from (x, y) to any point of box b. */
double		tdb_rtree_box_dist(const TdbBoxF *b, double x, double y, TdbMetric metric);

typedef struct TdbKnnResult
{
	uint64_t	entry;
	double		dist;
} TdbKnnResult;

/*
 * Defined in knn.c (the first k results of its incremental scan), so that
 * the tree itself does not depend on the scan.
 *
 * The k entries nearest to (x, y), nearest first, ties broken by smaller
 * entry index.  Best-first search over boxes, with entry_dist giving exact
 * distances at the leaves (if entry_dist is NULL the box distance is used).
 * Writes up to k results to out and returns how many (fewer than k only if
 * the tree has fewer entries), or -1 if memory could not be allocated.
 */
int64_t		tdb_rtree_knn(const TdbRtree *t, double x, double y, TdbMetric metric, uint64_t k,
						  TdbRtreeEntryDist entry_dist, void *arg, TdbKnnResult *out);

#endif							/* TDB_RTREE_H */
