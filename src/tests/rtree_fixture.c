/*
 * rtree_fixture.c
 *	  The shared helpers of the R-tree's tests (rtree_fixture.h): building
 *	  and freeing a tree, random boxes.
 */
#include "unit.h"
#include "rtree_fixture.h"

#include <stdlib.h>
#include <string.h>

/* Build a tree the way the map builder does: STR order, float leaves, build. */
void
tree_build(Tree *t, const TdbBox *in, uint64_t n)
{
	uint64_t	nboxes = tdb_rtree_nboxes(n);

	t->n = n;
	t->perm = malloc((n ? n : 1) * sizeof(uint32_t));
	t->boxes = malloc((nboxes ? nboxes : 1) * sizeof(TdbBoxF));
	if (t->perm == NULL || t->boxes == NULL)
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	CHECK(tdb_rtree_order(in, n, t->perm) == 0);
	for (uint64_t i = 0; i < n; i++)
		t->boxes[i] = tdb_boxf_from_boxd(&in[t->perm[i]]);
	memset(t->levels, 0xAB, sizeof(t->levels));
	tdb_rtree_build(t->boxes, n, t->levels);
	t->view.boxes = t->boxes;
	t->view.levels = t->levels;
	t->view.nlevels = tdb_rtree_nlevels(n);
}

void
tree_free(Tree *t)
{
	free(t->perm);
	free(t->boxes);
}

void *
xmalloc(size_t size)
{
	void	   *p = calloc(1, size ? size : 1);

	if (p == NULL)
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	return p;
}

/* A multiple of 1/4 in [0, 10]: exact in float, so grid boxes share edges exactly. */
double
grid(uint64_t *seed)
{
	return (double) (unit_rand(seed) % 41) * 0.25;
}

/*
 * Boxes in [0, 10]^2: small random ones, points, copies of earlier boxes,
 * grid-aligned cells and points that share edges and corners, larger ones.
 */
void
gen_boxes(uint64_t *seed, TdbBox *b, uint64_t n, int mode)
{
	for (uint64_t i = 0; i < n; i++)
	{
		unsigned	kind = (unsigned) (unit_rand(seed) % 8);
		double		x,
					y;

		if (mode == DATA_DUPLICATES)
			kind = (i < 3) ? 0 : 4;
		else if (mode == DATA_GRID)
			kind = 5 + (unsigned) (unit_rand(seed) % 2);
		switch (kind)
		{
			case 3:
				x = unit_rand_double(seed, 0, 10);
				y = unit_rand_double(seed, 0, 10);
				b[i].xmin = b[i].xmax = x;
				b[i].ymin = b[i].ymax = y;
				break;
			case 4:
				if (i > 0)
				{
					b[i] = b[unit_rand(seed) % i];
					break;
				}
				/* FALLTHROUGH */
			case 0:
			case 1:
			case 2:
				x = unit_rand_double(seed, 0, 10);
				y = unit_rand_double(seed, 0, 10);
				b[i].xmin = x;
				b[i].ymin = y;
				b[i].xmax = x + unit_rand_double(seed, 0, 0.3);
				b[i].ymax = y + unit_rand_double(seed, 0, 0.3);
				break;
			case 5:
				x = grid(seed);
				y = grid(seed);
				b[i].xmin = x;
				b[i].ymin = y;
				b[i].xmax = x + 0.25 * (double) (1 + unit_rand(seed) % 2);
				b[i].ymax = y + 0.25 * (double) (1 + unit_rand(seed) % 2);
				break;
			case 6:
				b[i].xmin = b[i].xmax = grid(seed);
				b[i].ymin = b[i].ymax = grid(seed);
				break;
			default:
				x = unit_rand_double(seed, 0, 10);
				y = unit_rand_double(seed, 0, 10);
				b[i].xmin = x;
				b[i].ymin = y;
				b[i].xmax = x + unit_rand_double(seed, 0, 2);
				b[i].ymax = y + unit_rand_double(seed, 0, 2);
				break;
		}
	}
}
