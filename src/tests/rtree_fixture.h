/*
 * rtree_fixture.h
 *	  What the tests of the packed R-tree share (rtree_fixture.c): a tree
 *	  built the way the map builder builds it, and seeded random boxes.
 */
#ifndef TDB_TEST_RTREE_FIXTURE_H
#define TDB_TEST_RTREE_FIXTURE_H

#include "rtree.h"

#include <math.h>

#define F TDB_RTREE_FANOUT
#define DEG_M (TDB_EARTH_RADIUS_M * M_PI / 180.0)

typedef struct Tree
{
	uint64_t	n;
	uint32_t   *perm;
	TdbBoxF    *boxes;
	TdbRtreeLevel levels[TDB_RTREE_MAX_LEVELS];
	TdbRtree	view;
} Tree;

/* Build a tree the way the map builder does: STR order, float leaves, build. */
void		tree_build(Tree *t, const TdbBox *in, uint64_t n);
void		tree_free(Tree *t);
/* calloc that exits on failure. */
void	   *xmalloc(size_t size);
/* A multiple of 1/4 in [0, 10]: exact in float, so grid boxes share edges exactly. */
double		grid(uint64_t *seed);

enum
{
	DATA_MIXED,
	DATA_DUPLICATES,
	DATA_GRID
};

/* n random boxes in [0, 10]^2 of a DATA_ mode. */
void		gen_boxes(uint64_t *seed, TdbBox *b, uint64_t n, int mode);

#endif							/* TDB_TEST_RTREE_FIXTURE_H */
