/*
 * test_rtree.c
 *	  The packed R-tree against brute force: box queries and k-nearest
 *	  searches on seeded random data (duplicates, points, shared edges,
 *	  touching and degenerate queries), the tree's structure and STR order,
 *	  outward float rounding, and box distances as lower bounds.
 */
#include "unit.h"
#include "rtree.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
static void
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

static void
tree_free(Tree *t)
{
	free(t->perm);
	free(t->boxes);
}

static void *
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
static double
grid(uint64_t *seed)
{
	return (double) (unit_rand(seed) % 41) * 0.25;
}

enum
{
	DATA_MIXED,
	DATA_DUPLICATES,
	DATA_GRID
};

/*
 * Boxes in [0, 10]^2: small random ones, points, copies of earlier boxes,
 * grid-aligned cells and points that share edges and corners, larger ones.
 */
static void
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

static int
boxf_contains(const TdbBoxF *outer, const TdbBoxF *inner)
{
	return outer->xmin <= inner->xmin && outer->ymin <= inner->ymin &&
		outer->xmax >= inner->xmax && outer->ymax >= inner->ymax;
}

typedef struct Centre
{
	double		c;
	uint32_t	idx;
} Centre;

/* (c, idx) lexicographic: the order the STR sort is specified with. */
static int
centre_less(double c1, uint32_t i1, double c2, uint32_t i2)
{
	return c1 < c2 || (c1 == c2 && i1 < i2);
}

/* perm is a permutation in STR order: slices by (centre x, index), each by (centre y, index). */
static void
check_str_order(const TdbBox *in, uint64_t n, const uint32_t *perm)
{
	uint8_t    *seen = calloc(n ? n : 1, 1);
	uint64_t	pages = (n + F - 1) / F;
	uint64_t	s = 0;
	uint64_t	slice;

	if (seen == NULL)
		exit(2);
	for (uint64_t i = 0; i < n; i++)
	{
		if (perm[i] >= n || seen[perm[i]])
		{
			unit_fail(__FILE__, __LINE__, "n=%" PRIu64 ": perm[%" PRIu64 "] = %u repeated or out of range",
					  n, i, perm[i]);
			free(seen);
			return;
		}
		seen[perm[i]] = 1;
	}
	free(seen);
	while (s * s < pages)
		s++;
	slice = s * F;
	for (uint64_t i = 0; i + 1 < n; i++)
	{
		const TdbBox *a = &in[perm[i]];
		const TdbBox *b = &in[perm[i + 1]];

		if ((i + 1) % slice != 0)
		{
			if (!centre_less(0.5 * a->ymin + 0.5 * a->ymax, perm[i],
							 0.5 * b->ymin + 0.5 * b->ymax, perm[i + 1]))
				unit_fail(__FILE__, __LINE__, "n=%" PRIu64 ": slice not sorted by y at %" PRIu64, n, i);
		}
	}
	/* every entry of a slice comes before every entry of the next in x */
	for (uint64_t start = 0; start + slice < n; start += slice)
	{
		double		maxc = -INFINITY;
		uint32_t	maxi = 0;
		double		minc = INFINITY;
		uint32_t	mini = UINT32_MAX;

		for (uint64_t i = start; i < start + slice; i++)
		{
			double		c = 0.5 * in[perm[i]].xmin + 0.5 * in[perm[i]].xmax;

			if (i == start || centre_less(maxc, maxi, c, perm[i]))
			{
				maxc = c;
				maxi = perm[i];
			}
		}
		for (uint64_t i = start + slice; i < start + 2 * slice && i < n; i++)
		{
			double		c = 0.5 * in[perm[i]].xmin + 0.5 * in[perm[i]].xmax;

			if (centre_less(c, perm[i], minc, mini))
			{
				minc = c;
				mini = perm[i];
			}
		}
		if (!centre_less(maxc, maxi, minc, mini))
			unit_fail(__FILE__, __LINE__, "n=%" PRIu64 ": slices at %" PRIu64 " overlap in x", n, start);
	}
}

UNIT_TEST(test_rtree_structure)
{
	static const uint64_t sizes[] = {0, 1, 2, 15, 16, 17, 255, 256, 257, 4096, 4097, 20000, 65537};

	/* hand-computed level shapes */
	CHECK_EQ_U64(tdb_rtree_nlevels(0), 0);
	CHECK_EQ_U64(tdb_rtree_nboxes(0), 0);
	CHECK_EQ_U64(tdb_rtree_nlevels(1), 1);
	CHECK_EQ_U64(tdb_rtree_nboxes(1), 1);
	CHECK_EQ_U64(tdb_rtree_nlevels(2), 2);
	CHECK_EQ_U64(tdb_rtree_nboxes(2), 3);
	CHECK_EQ_U64(tdb_rtree_nlevels(16), 2);
	CHECK_EQ_U64(tdb_rtree_nboxes(16), 17);
	CHECK_EQ_U64(tdb_rtree_nlevels(17), 3);
	CHECK_EQ_U64(tdb_rtree_nboxes(17), 20);
	CHECK_EQ_U64(tdb_rtree_nlevels(256), 3);
	CHECK_EQ_U64(tdb_rtree_nboxes(256), 273);
	CHECK_EQ_U64(tdb_rtree_nlevels(257), 4);
	CHECK_EQ_U64(tdb_rtree_nboxes(257), 277);
	CHECK_EQ_U64(tdb_rtree_nlevels(UINT32_MAX), 9);
	CHECK(tdb_rtree_nlevels(UINT64_MAX) <= TDB_RTREE_MAX_LEVELS + 1);

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
	{
		uint64_t	n = sizes[s];
		uint64_t	seed = 500 + s;
		TdbBox	   *in = xmalloc(n * sizeof(TdbBox));
		uint32_t	nl = tdb_rtree_nlevels(n);
		uint64_t	count = n;
		uint64_t	first = 0;
		Tree		t;

		gen_boxes(&seed, in, n, s % 3 == 0 ? DATA_GRID : DATA_MIXED);
		tree_build(&t, in, n);
		check_str_order(in, n, t.perm);

		for (uint32_t l = 0; l < nl; l++)
		{
			CHECK_EQ_U64(t.levels[l].first, first);
			CHECK_EQ_U64(t.levels[l].count, count);
			first += count;
			count = (count + F - 1) / F;
		}
		CHECK_EQ_U64(first, tdb_rtree_nboxes(n));
		if (nl > 0)
			CHECK_EQ_U64(t.levels[nl - 1].count, 1);

		for (uint32_t l = 1; l < nl; l++)
		{
			const TdbRtreeLevel *pl = &t.levels[l];
			const TdbRtreeLevel *cl = &t.levels[l - 1];

			for (uint64_t j = 0; j < pl->count; j++)
			{
				const TdbBoxF *p = &t.boxes[pl->first + j];
				TdbBoxF		u = {INFINITY, INFINITY, -INFINITY, -INFINITY};

				for (uint64_t c = j * F; c < (j + 1) * F && c < cl->count; c++)
				{
					const TdbBoxF *b = &t.boxes[cl->first + c];

					if (!boxf_contains(p, b))
						unit_fail(__FILE__, __LINE__, "n=%" PRIu64 " level %u node %" PRIu64
								  " does not contain child %" PRIu64, n, l, j, c);
					u.xmin = fminf(u.xmin, b->xmin);
					u.ymin = fminf(u.ymin, b->ymin);
					u.xmax = fmaxf(u.xmax, b->xmax);
					u.ymax = fmaxf(u.ymax, b->ymax);
				}
				if (memcmp(&u, p, sizeof(u)) != 0)
					unit_fail(__FILE__, __LINE__, "n=%" PRIu64 " level %u node %" PRIu64
							  " is not the union of its children", n, l, j);
			}
		}
		/* leaves are the rounded boxes of the permuted input */
		for (uint64_t i = 0; i < n; i++)
		{
			TdbBoxF		b = tdb_boxf_from_boxd(&in[t.perm[i]]);

			if (memcmp(&b, &t.boxes[i], sizeof(b)) != 0)
				unit_fail(__FILE__, __LINE__, "n=%" PRIu64 " leaf %" PRIu64 " changed by build", n, i);
		}
		free(in);
		tree_free(&t);
	}
}

/* A double in one of several ranges, or exactly a float, or halfway between two floats. */
static double
gen_coord(uint64_t *seed)
{
	double		sign = (unit_rand(seed) & 1) ? -1.0 : 1.0;
	float		f;

	switch (unit_rand(seed) % 6)
	{
		case 0:
			return unit_rand_double(seed, -180, 180);
		case 1:
			return sign * pow(10.0, unit_rand_double(seed, -46, 40));
		case 2:
			return (double) (float) unit_rand_double(seed, -180, 180);
		case 3:
			f = (float) unit_rand_double(seed, -180, 180);
			return 0.5 * (double) f + 0.5 * (double) nextafterf(f, INFINITY);
		case 4:
			return sign * unit_rand_double(seed, 0, 1e-38);
		default:
			return sign * (double) FLT_MAX * unit_rand_double(seed, 0.999999, 1.000001);
	}
}

/* f is the nearest float on the far side of d (or the end of the float range). */
static void
check_down(float f, double d)
{
	if (!((double) f <= d))
		unit_fail(__FILE__, __LINE__, "min %.17g rounded up to %.9g", d, (double) f);
	else if (d < -FLT_MAX)
		CHECK(f == -INFINITY);
	else if (d > FLT_MAX)
		CHECK(f == FLT_MAX);
	else if (!((double) nextafterf(f, INFINITY) > d))
		unit_fail(__FILE__, __LINE__, "min %.17g rounded further than needed to %.9g", d, (double) f);
}

static void
check_up(float f, double d)
{
	if (!((double) f >= d))
		unit_fail(__FILE__, __LINE__, "max %.17g rounded down to %.9g", d, (double) f);
	else if (d > FLT_MAX)
		CHECK(f == INFINITY);
	else if (d < -FLT_MAX)
		CHECK(f == -FLT_MAX);
	else if (!((double) nextafterf(f, -INFINITY) < d))
		unit_fail(__FILE__, __LINE__, "max %.17g rounded further than needed to %.9g", d, (double) f);
}

UNIT_TEST(test_rtree_boxf_rounds_outward)
{
	uint64_t	seed = 21;
	TdbBox		b;
	TdbBoxF		f;

	for (int i = 0; i < 200000; i++)
	{
		double		a = gen_coord(&seed);
		double		c = gen_coord(&seed);

		b.xmin = fmin(a, c);
		b.xmax = fmax(a, c);
		a = gen_coord(&seed);
		c = (unit_rand(&seed) % 4 == 0) ? a : gen_coord(&seed);
		b.ymin = fmin(a, c);
		b.ymax = fmax(a, c);
		f = tdb_boxf_from_boxd(&b);
		check_down(f.xmin, b.xmin);
		check_down(f.ymin, b.ymin);
		check_up(f.xmax, b.xmax);
		check_up(f.ymax, b.ymax);
	}

	/* 0.1 is not a float: the box must widen on both sides */
	b.xmin = b.xmax = b.ymin = b.ymax = 0.1;
	f = tdb_boxf_from_boxd(&b);
	CHECK((double) f.xmin < 0.1 && (double) f.xmax > 0.1);
	CHECK(nextafterf(f.xmin, INFINITY) == f.xmax);
	/* exact floats stay put */
	b.xmin = -1.5;
	b.xmax = 24.25;
	f = tdb_boxf_from_boxd(&b);
	CHECK(f.xmin == -1.5f && f.xmax == 24.25f);

	/* never passed by callers, but must not crash */
	b.xmin = -INFINITY;
	b.xmax = INFINITY;
	b.ymin = NAN;
	b.ymax = NAN;
	f = tdb_boxf_from_boxd(&b);
	CHECK(f.xmin == -INFINITY && f.xmax == INFINITY);
	CHECK(isnan(f.ymin) && isnan(f.ymax));
}

/* Distance from (x, y) to (px, py), measured as the map's exact distances are. */
static double
point_dist(double px, double py, double x, double y, TdbMetric metric)
{
	double		sx = 1.0,
				sy = 1.0;
	double		dx,
				dy;

	if (metric == TDB_METRIC_METRES)
	{
		sx = DEG_M * cos(y * M_PI / 180.0);
		sy = DEG_M;
	}
	dx = (px - x) * sx;
	dy = (py - y) * sy;
	return sqrt(dx * dx + dy * dy);
}

UNIT_TEST(test_rtree_box_dist_is_lower_bound)
{
	uint64_t	seed = 31;
	TdbBoxF		u = {0, 0, 1, 1};
	TdbBoxF		b2 = {11, 59, 12, 61};

	CHECK(tdb_rtree_box_dist(&u, 4, 5, TDB_METRIC_PLANAR) == 5.0);
	CHECK(tdb_rtree_box_dist(&u, -3, -4, TDB_METRIC_PLANAR) == 5.0);
	CHECK(tdb_rtree_box_dist(&u, 0.5, 3, TDB_METRIC_PLANAR) == 2.0);
	CHECK(tdb_rtree_box_dist(&u, 0.5, 0.5, TDB_METRIC_PLANAR) == 0.0);
	CHECK(tdb_rtree_box_dist(&u, 1, 0, TDB_METRIC_METRES) == 0.0);
	CHECK_NEAR(tdb_rtree_box_dist(&u, 0.5, -1, TDB_METRIC_METRES), DEG_M, 1e-6);
	CHECK_NEAR(tdb_rtree_box_dist(&u, 2, 0, TDB_METRIC_METRES), DEG_M, 1e-6);
	/* a degree of longitude at 60 degrees north is half as long */
	CHECK_NEAR(tdb_rtree_box_dist(&b2, 10, 60, TDB_METRIC_METRES), DEG_M * 0.5, 1e-6);
	CHECK(isnan(tdb_rtree_box_dist(&u, NAN, 0, TDB_METRIC_PLANAR)));

	for (int i = 0; i < 20000; i++)
	{
		TdbBox		d;
		TdbBoxF		b;
		double		x = unit_rand_double(&seed, 20, 30);
		double		y = unit_rand_double(&seed, 55, 65);

		d.xmin = unit_rand_double(&seed, 20, 30);
		d.ymin = unit_rand_double(&seed, 55, 65);
		d.xmax = d.xmin + ((i % 5 == 0) ? 0.0 : unit_rand_double(&seed, 0, 1));
		d.ymax = d.ymin + ((i % 7 == 0) ? 0.0 : unit_rand_double(&seed, 0, 1));
		b = tdb_boxf_from_boxd(&d);
		if (i % 3 == 0)
		{
			/* inside the box or on its boundary */
			x = (i % 2) ? (double) b.xmin : unit_rand_double(&seed, b.xmin, b.xmax);
			y = unit_rand_double(&seed, b.ymin, b.ymax);
		}
		for (int m = 0; m < 2; m++)
		{
			TdbMetric	metric = m ? TDB_METRIC_METRES : TDB_METRIC_PLANAR;
			double		bd = tdb_rtree_box_dist(&b, x, y, metric);
			double		eps = 1e-12 * (1.0 + bd);

			if (x >= b.xmin && x <= b.xmax && y >= b.ymin && y <= b.ymax)
				CHECK(bd == 0.0);
			for (int j = 0; j < 24; j++)
			{
				double		px,
							py,
							pd;

				if (j < 4)
				{
					px = (j & 1) ? b.xmax : b.xmin;
					py = (j & 2) ? b.ymax : b.ymin;
				}
				else
				{
					px = unit_rand_double(&seed, b.xmin, b.xmax);
					py = unit_rand_double(&seed, b.ymin, b.ymax);
				}
				pd = point_dist(px, py, x, y, metric);
				if (!(bd <= pd + eps))
					unit_fail(__FILE__, __LINE__, "metric %d: box distance %.17g > %.17g to (%.17g, %.17g)",
							  m, bd, pd, px, py);
			}
		}
	}
}

/* ---- k nearest ----------------------------------------------------------- */

typedef struct Seg
{
	double		x0;
	double		y0;
	double		x1;
	double		y1;
} Seg;

/* Distance from (x, y) to segment s, computed as the map computes it. */
static double
seg_dist(const Seg *s, double x, double y, TdbMetric metric)
{
	double		sx = 1.0,
				sy = 1.0;
	double		ax,
				ay,
				bx,
				by,
				dx,
				dy,
				len2,
				t = 0.0,
				px,
				py;

	if (metric == TDB_METRIC_METRES)
	{
		sx = DEG_M * cos(y * M_PI / 180.0);
		sy = DEG_M;
	}
	ax = (s->x0 - x) * sx;
	ay = (s->y0 - y) * sy;
	bx = (s->x1 - x) * sx;
	by = (s->y1 - y) * sy;
	dx = bx - ax;
	dy = by - ay;
	len2 = dx * dx + dy * dy;
	if (len2 > 0.0)
	{
		t = -(ax * dx + ay * dy) / len2;
		if (t < 0.0)
			t = 0.0;
		else if (t > 1.0)
			t = 1.0;
	}
	px = ax + t * dx;
	py = ay + t * dy;
	return sqrt(px * px + py * py);
}

typedef struct KnnCtx
{
	const Seg  *segs;			/* in tree order */
	const TdbBoxF *leaves;
	uint64_t	n;
	double		inflate;		/* 0: exact segment distance; else box distance + pseudo-random */
	uint32_t   *stamp;			/* query number that last evaluated each entry */
	uint32_t	query;
	uint64_t	calls;
	uint64_t	repeats;
	uint64_t	below;
} KnnCtx;

static double
knn_dist(uint64_t entry, double x, double y, TdbMetric metric, void *arg)
{
	KnnCtx	   *c = arg;
	double		bd;
	double		d;

	if (entry >= c->n)
	{
		c->below++;
		return 0;
	}
	bd = tdb_rtree_box_dist(&c->leaves[entry], x, y, metric);
	if (c->stamp[entry] == c->query)
		c->repeats++;
	c->stamp[entry] = c->query;
	c->calls++;
	if (c->inflate > 0.0)
		d = bd + c->inflate * (double) ((entry * 2654435761u) % 1000);
	else
		d = seg_dist(&c->segs[entry], x, y, metric);
	if (d < bd)
		c->below++;
	return d;
}

static int
cmp_result(const void *pa, const void *pb)
{
	const TdbKnnResult *a = pa;
	const TdbKnnResult *b = pb;

	if (a->dist != b->dist)
		return a->dist < b->dist ? -1 : 1;
	return (a->entry > b->entry) - (a->entry < b->entry);
}

/*
 * Points and short segments around (25, 60), with copies (equal distances,
 * so ties) and float-exact grid points; stored in tree order.
 */
static void
gen_segs(uint64_t *seed, Seg *segs, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
	{
		Seg		   *s = &segs[i];

		switch (unit_rand(seed) % 6)
		{
			case 0:
				s->x0 = s->x1 = unit_rand_double(seed, 24, 26);
				s->y0 = s->y1 = unit_rand_double(seed, 59, 61);
				break;
			case 1:
				if (i > 0)
				{
					*s = segs[unit_rand(seed) % i];
					break;
				}
				/* FALLTHROUGH */
			case 2:
				s->x0 = s->x1 = 24.0 + 0.125 * (double) (unit_rand(seed) % 17);
				s->y0 = s->y1 = 59.0 + 0.125 * (double) (unit_rand(seed) % 17);
				break;
			default:
				s->x0 = unit_rand_double(seed, 24, 26);
				s->y0 = unit_rand_double(seed, 59, 61);
				s->x1 = s->x0 + unit_rand_double(seed, -0.05, 0.05);
				s->y1 = s->y0 + unit_rand_double(seed, -0.05, 0.05);
				break;
		}
	}
}

static void
check_knn(uint64_t seed, uint64_t n, int nqueries, double inflate_planar)
{
	Seg		   *raw = xmalloc(n * sizeof(Seg));
	Seg		   *segs = xmalloc(n * sizeof(Seg));
	TdbBox	   *in = xmalloc(n * sizeof(TdbBox));
	TdbKnnResult *want = xmalloc((n + 3) * sizeof(TdbKnnResult));
	TdbKnnResult *got = xmalloc((n + 4) * sizeof(TdbKnnResult));
	KnnCtx		ctx;
	Tree		t;
	uint64_t	ks[6] = {1, 5, 17, 100, n, n + 3};

	gen_segs(&seed, raw, n);
	for (uint64_t i = 0; i < n; i++)
	{
		in[i].xmin = fmin(raw[i].x0, raw[i].x1);
		in[i].xmax = fmax(raw[i].x0, raw[i].x1);
		in[i].ymin = fmin(raw[i].y0, raw[i].y1);
		in[i].ymax = fmax(raw[i].y0, raw[i].y1);
	}
	tree_build(&t, in, n);
	for (uint64_t i = 0; i < n; i++)
		segs[i] = raw[t.perm[i]];
	memset(&ctx, 0, sizeof(ctx));
	ctx.segs = segs;
	ctx.leaves = t.boxes;
	ctx.n = n;
	ctx.stamp = calloc(n ? n : 1, sizeof(uint32_t));
	if (ctx.stamp == NULL)
		exit(2);

	for (int qi = 0; qi < nqueries; qi++)
	{
		double		x,
					y;

		switch (unit_rand(&seed) % 5)
		{
			case 0:
				if (n > 0)
				{
					/* on a vertex: distance 0, shared with its copies */
					const Seg  *s = &segs[unit_rand(&seed) % n];

					x = s->x0;
					y = s->y0;
					break;
				}
				/* FALLTHROUGH */
			case 1:
				x = unit_rand_double(&seed, 10, 40);
				y = unit_rand_double(&seed, 40, 80);
				break;
			default:
				x = unit_rand_double(&seed, 23.5, 26.5);
				y = unit_rand_double(&seed, 58.5, 61.5);
				break;
		}
		for (int mode = 0; mode < 4; mode++)
		{
			TdbMetric	metric = (mode & 1) ? TDB_METRIC_METRES : TDB_METRIC_PLANAR;
			int			with_cb = (mode & 2) != 0;

			ctx.inflate = inflate_planar * (metric == TDB_METRIC_METRES ? DEG_M : 1.0);
			ctx.query++;
			for (uint64_t i = 0; i < n; i++)
			{
				want[i].entry = i;
				want[i].dist = with_cb ? knn_dist(i, x, y, metric, &ctx)
					: tdb_rtree_box_dist(&t.boxes[i], x, y, metric);
			}
			qsort(want, n, sizeof(TdbKnnResult), cmp_result);

			for (size_t ki = 0; ki < 6; ki++)
			{
				uint64_t	k = ks[ki];
				uint64_t	expect = k < n ? k : n;
				int64_t		r;

				ctx.query++;
				ctx.calls = 0;
				got[expect].entry = UINT64_MAX;
				r = tdb_rtree_knn(&t.view, x, y, metric, k, with_cb ? knn_dist : NULL, &ctx, got);
				if (r != (int64_t) expect)
				{
					unit_fail(__FILE__, __LINE__, "n=%" PRIu64 " k=%" PRIu64 " mode %d: %" PRId64
							  " results, expected %" PRIu64, n, k, mode, r, expect);
					continue;
				}
				CHECK_EQ_U64(got[expect].entry, UINT64_MAX);
				CHECK(ctx.calls <= n);
				for (uint64_t i = 0; i < expect; i++)
				{
					if (got[i].entry != want[i].entry || got[i].dist != want[i].dist)
					{
						unit_fail(__FILE__, __LINE__, "n=%" PRIu64 " k=%" PRIu64 " mode %d query (%.17g, %.17g)"
								  " result %" PRIu64 ": entry %" PRIu64 " at %.17g, expected %" PRIu64 " at %.17g",
								  n, k, mode, x, y, i, got[i].entry, got[i].dist,
								  want[i].entry, want[i].dist);
						break;
					}
				}
			}
		}
	}
	CHECK_EQ_U64(ctx.repeats, 0);
	CHECK_EQ_U64(ctx.below, 0);
	free(ctx.stamp);
	free(raw);
	free(segs);
	free(in);
	free(want);
	free(got);
	tree_free(&t);
}

UNIT_TEST(test_rtree_knn_matches_brute_force)
{
	static const uint64_t sizes[] = {0, 1, 2, 15, 16, 17, 255, 256, 257};

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		check_knn(700 + s, sizes[s], 160, 0.0);
	check_knn(720, 3000, 40, 0.0);
	check_knn(721, 20000, 8, 0.0);
}

/* Exact distances far above the box distances: entries must wait for them. */
UNIT_TEST(test_rtree_knn_inflated_distances)
{
	check_knn(800, 17, 150, 0.001);
	check_knn(801, 257, 150, 0.001);
	check_knn(802, 3000, 25, 0.0005);
	check_knn(803, 2000, 25, 0.5);
}

UNIT_TEST(test_rtree_knn_edge_cases)
{
	TdbBox		in[40];
	TdbKnnResult out[41];
	Tree		t;
	Tree		empty;

	/* k = 0 and the empty tree */
	tree_build(&empty, NULL, 0);
	CHECK(tdb_rtree_knn(&empty.view, 0, 0, TDB_METRIC_PLANAR, 5, NULL, NULL, out) == 0);
	tree_free(&empty);

	/* forty copies of one point: all tie, so index order */
	for (int i = 0; i < 40; i++)
	{
		in[i].xmin = in[i].xmax = 25.1;
		in[i].ymin = in[i].ymax = 60.2;
	}
	tree_build(&t, in, 40);
	CHECK(tdb_rtree_knn(&t.view, 0, 0, TDB_METRIC_PLANAR, 0, NULL, NULL, out) == 0);
	CHECK(tdb_rtree_knn(&t.view, 25, 60, TDB_METRIC_METRES, 41, NULL, NULL, out) == 40);
	for (uint64_t i = 0; i < 40; i++)
	{
		CHECK_EQ_U64(out[i].entry, i);
		CHECK(out[i].dist == out[0].dist && out[i].dist > 0);
	}
	CHECK(tdb_rtree_knn(&t.view, 25.1, 60.2, TDB_METRIC_PLANAR, 7, NULL, NULL, out) == 7);
	for (uint64_t i = 0; i < 7; i++)
		CHECK(out[i].entry == i && out[i].dist == 0.0);
	/* a NaN point: no crash, still k answers */
	CHECK(tdb_rtree_knn(&t.view, NAN, 60, TDB_METRIC_PLANAR, 3, NULL, NULL, out) == 3);
	tree_free(&t);
}
