/*
 * test_rtree.c
 *	  The packed R-tree's box queries against brute force on seeded random
 *	  data (duplicates, points, shared edges, touching and degenerate
 *	  queries), and stopping early.  The structure, rounding and box
 *	  distances: test_rtree_structure.c; k nearest: test_rtree_knn.c.
 */
#include "unit.h"
#include "rtree_fixture.h"
#include "rtree.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * A query box: random, point, touching a leaf's edge or corner from outside,
 * missing it by one double, grid-aligned, inverted, NaN, or covering
 * everything.
 */
static void
gen_query(uint64_t *seed, const TdbBoxF *leaves, uint64_t n, TdbBox *q)
{
	unsigned	kind = (unsigned) (unit_rand(seed) % 13);
	double		x = unit_rand_double(seed, -1, 11);
	double		y = unit_rand_double(seed, -1, 11);
	const TdbBoxF *l = n > 0 ? &leaves[unit_rand(seed) % n] : NULL;

	if (l == NULL && (kind == 4 || kind == 5 || kind == 6 || kind == 11))
		kind = 0;
	switch (kind)
	{
		case 3:
			q->xmin = q->xmax = x;
			q->ymin = q->ymax = y;
			break;
		case 4:
			/* a corner of a leaf, as a point */
			q->xmin = q->xmax = (unit_rand(seed) & 1) ? l->xmin : l->xmax;
			q->ymin = q->ymax = (unit_rand(seed) & 1) ? l->ymin : l->ymax;
			break;
		case 5:
			/* starts exactly on the leaf's right edge */
			q->xmin = l->xmax;
			q->xmax = l->xmax + unit_rand_double(seed, 0, 1);
			q->ymin = l->ymin - unit_rand_double(seed, 0, 0.5);
			q->ymax = l->ymin + unit_rand_double(seed, 0, 0.5);
			break;
		case 6:
			/* ends exactly on the leaf's lower-left corner */
			q->xmin = l->xmin - unit_rand_double(seed, 0, 1);
			q->xmax = l->xmin;
			q->ymin = l->ymin - unit_rand_double(seed, 0, 1);
			q->ymax = l->ymin;
			break;
		case 11:
			/* misses a leaf by one double: float rounding must not catch it */
			q->xmin = nextafter((double) l->xmax, INFINITY);
			q->xmax = q->xmin + unit_rand_double(seed, 0, 0.5);
			q->ymax = nextafter((double) l->ymin, -INFINITY);
			q->ymin = q->ymax - unit_rand_double(seed, 0, 0.5);
			if (unit_rand(seed) & 1)
			{
				q->xmax = nextafter((double) l->xmin, -INFINITY);
				q->xmin = q->xmax - unit_rand_double(seed, 0, 0.5);
				q->ymin = nextafter((double) l->ymax, INFINITY);
				q->ymax = q->ymin + unit_rand_double(seed, 0, 0.5);
			}
			break;
		case 7:
			q->xmin = grid(seed);
			q->ymin = grid(seed);
			q->xmax = q->xmin + 0.25 * (double) (unit_rand(seed) % 4);
			q->ymax = q->ymin + 0.25 * (double) (unit_rand(seed) % 4);
			break;
		case 8:
			/* inverted in x or in y */
			q->xmin = x;
			q->ymin = y;
			q->xmax = x + 1;
			q->ymax = y + 1;
			if (unit_rand(seed) & 1)
			{
				q->xmin = x + 1e-9;
				q->xmax = x;
			}
			else
			{
				q->ymin = -1;
				q->ymax = -2;
			}
			break;
		case 9:
			q->xmin = -1;
			q->ymin = -1;
			q->xmax = 11;
			q->ymax = 11;
			switch (unit_rand(seed) % 4)
			{
				case 0:
					q->xmin = NAN;
					break;
				case 1:
					q->ymax = NAN;
					break;
				case 2:
					q->xmax = NAN;
					q->ymin = NAN;
					break;
				default:
					q->xmin = q->xmax = q->ymin = q->ymax = NAN;
					break;
			}
			break;
		case 10:
			if (unit_rand(seed) & 1)
			{
				q->xmin = q->ymin = -1e30;
				q->xmax = q->ymax = 1e300;
			}
			else
			{
				q->xmin = q->ymin = -INFINITY;
				q->xmax = q->ymax = INFINITY;
			}
			break;
		default:
			q->xmin = x;
			q->ymin = y;
			q->xmax = x + unit_rand_double(seed, 0, kind == 0 ? 0.05 : 2);
			q->ymax = y + unit_rand_double(seed, 0, kind == 0 ? 0.05 : 2);
			break;
	}
}

/* The query's definition, in double: closed intervals, nothing for inverted or NaN. */
static int
brute_hits(const TdbBoxF *b, const TdbBox *q)
{
	return q->xmin <= q->xmax && q->ymin <= q->ymax &&
		(double) b->xmin <= q->xmax && (double) b->xmax >= q->xmin &&
		(double) b->ymin <= q->ymax && (double) b->ymax >= q->ymin;
}

typedef struct Collect
{
	uint64_t   *got;
	uint64_t	n;
	uint64_t	cap;
} Collect;

static int
collect_visit(uint64_t entry, void *arg)
{
	Collect    *c = arg;

	if (c->n < c->cap)
		c->got[c->n] = entry;
	c->n++;
	return 0;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a;
	uint64_t	y = *(const uint64_t *) b;

	return (x > y) - (x < y);
}

/* nqueries random queries on one tree, each against brute force. */
static void
check_box_queries(uint64_t seed, uint64_t n, int mode, int nqueries)
{
	TdbBox	   *in = xmalloc(n * sizeof(TdbBox));
	uint64_t   *want = xmalloc(n * sizeof(uint64_t));
	Collect		c;
	Tree		t;

	gen_boxes(&seed, in, n, mode);
	tree_build(&t, in, n);
	c.cap = n;
	c.got = xmalloc(n * sizeof(uint64_t));
	for (int qi = 0; qi < nqueries; qi++)
	{
		TdbBox		q;
		uint64_t	nwant = 0;
		int			rc;

		gen_query(&seed, t.boxes, n, &q);
		for (uint64_t i = 0; i < n; i++)
			if (brute_hits(&t.boxes[i], &q))
				want[nwant++] = i;
		c.n = 0;
		rc = tdb_rtree_query_box(&t.view, &q, collect_visit, &c);
		if (rc != 0 || c.n != nwant)
		{
			unit_fail(__FILE__, __LINE__,
					  "n=%" PRIu64 " mode %d query %d [%.17g %.17g %.17g %.17g]: rc %d, %" PRIu64
					  " visits, %" PRIu64 " expected",
					  n, mode, qi, q.xmin, q.ymin, q.xmax, q.ymax, rc, c.n, nwant);
			continue;
		}
		qsort(c.got, c.n, sizeof(uint64_t), cmp_u64);
		if (nwant > 0 && memcmp(c.got, want, nwant * sizeof(uint64_t)) != 0)
			unit_fail(__FILE__, __LINE__, "n=%" PRIu64 " mode %d query %d: wrong entries",
					  n, mode, qi);
	}
	free(c.got);
	free(want);
	free(in);
	tree_free(&t);
}

UNIT_TEST(test_rtree_query_box_matches_brute_force)
{
	static const uint64_t sizes[] = {0, 1, 2, 15, 16, 17, 255, 256, 257, 4097, 20000};

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		check_box_queries(100 + s, sizes[s], DATA_MIXED, sizes[s] > 5000 ? 1500 : 2000);
	check_box_queries(200, 257, DATA_DUPLICATES, 1000);
	check_box_queries(201, 3000, DATA_DUPLICATES, 500);
	check_box_queries(202, 256, DATA_GRID, 1000);
	check_box_queries(203, 5000, DATA_GRID, 1000);
}

UNIT_TEST(test_rtree_query_box_degenerate_queries)
{
	uint64_t	seed = 3;
	TdbBox		in[300];
	TdbBox		q;
	Collect		c;
	uint64_t	got[300];
	Tree		t;

	gen_boxes(&seed, in, 300, DATA_MIXED);
	tree_build(&t, in, 300);
	c.got = got;
	c.cap = 300;

	q.xmin = 5;
	q.xmax = 4;
	q.ymin = -100;
	q.ymax = 100;
	c.n = 0;
	CHECK(tdb_rtree_query_box(&t.view, &q, collect_visit, &c) == 0);
	CHECK_EQ_U64(c.n, 0);

	q.xmin = -100;
	q.xmax = 100;
	q.ymin = NAN;
	c.n = 0;
	CHECK(tdb_rtree_query_box(&t.view, &q, collect_visit, &c) == 0);
	CHECK_EQ_U64(c.n, 0);

	q.xmin = q.ymin = -INFINITY;
	q.xmax = q.ymax = INFINITY;
	c.n = 0;
	CHECK(tdb_rtree_query_box(&t.view, &q, collect_visit, &c) == 0);
	CHECK_EQ_U64(c.n, 300);
	/* children are visited in index order, so entries come out in order */
	for (uint64_t i = 0; i < 300 && i < c.n; i++)
		CHECK_EQ_U64(got[i], i);

	/* a point query exactly on a leaf's corner finds that leaf */
	for (uint64_t i = 0; i < 300; i++)
	{
		int			found = 0;

		q.xmin = q.xmax = t.boxes[i].xmax;
		q.ymin = q.ymax = t.boxes[i].ymin;
		c.n = 0;
		CHECK(tdb_rtree_query_box(&t.view, &q, collect_visit, &c) == 0);
		for (uint64_t j = 0; j < c.n && j < 300; j++)
			found |= got[j] == i;
		CHECK(found);
	}
	tree_free(&t);
}

typedef struct StopState
{
	uint64_t	calls;
	uint64_t	stop_at;
	int			rc;
	uint64_t	last;
} StopState;

static int
stop_visit(uint64_t entry, void *arg)
{
	StopState  *s = arg;

	s->calls++;
	s->last = entry;
	return s->calls == s->stop_at ? s->rc : 0;
}

UNIT_TEST(test_rtree_query_box_early_stop)
{
	uint64_t	seed = 11;
	TdbBox		in[1000];
	TdbBox		all = {-INFINITY, -INFINITY, INFINITY, INFINITY};
	TdbBox		some = {2, 2, 4, 4};
	Collect		c;
	uint64_t	got[1000];
	Tree		t;
	static const uint64_t stops[] = {1, 2, 5, 16, 17, 300, 999, 1000};

	gen_boxes(&seed, in, 1000, DATA_MIXED);
	tree_build(&t, in, 1000);
	for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++)
	{
		StopState	s = {0, stops[i], (i & 1) ? -3 : 42, UINT64_MAX};

		CHECK(tdb_rtree_query_box(&t.view, &all, stop_visit, &s) == s.rc);
		CHECK_EQ_U64(s.calls, stops[i]);
		CHECK_EQ_U64(s.last, stops[i] - 1);
	}

	/* stopping on the k-th hit of a partial query */
	c.got = got;
	c.cap = 1000;
	c.n = 0;
	CHECK(tdb_rtree_query_box(&t.view, &some, collect_visit, &c) == 0);
	CHECK(c.n > 3);
	for (uint64_t k = 1; k <= c.n; k++)
	{
		StopState	s = {0, k, 7, UINT64_MAX};

		CHECK(tdb_rtree_query_box(&t.view, &some, stop_visit, &s) == 7);
		CHECK_EQ_U64(s.calls, k);
		CHECK_EQ_U64(s.last, got[k - 1]);
	}
	/* never asked to stop: all hits, returns 0 */
	{
		StopState	s = {0, c.n + 1, 7, UINT64_MAX};

		CHECK(tdb_rtree_query_box(&t.view, &some, stop_visit, &s) == 0);
		CHECK_EQ_U64(s.calls, c.n);
	}
	tree_free(&t);
}
