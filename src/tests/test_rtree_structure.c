/*
 * test_rtree_structure.c
 *	  The packed R-tree's structure and STR order, outward float rounding
 *	  of boxes, and box distances as lower bounds of exact distances.
 */
#include "unit.h"
#include "rtree_fixture.h"
#include "rtree.h"
#include "halves.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/*
 * The STR order is the same whether its passes run in two threads or one,
 * and read from boxes inside larger records (as the map builder's entries)
 * or from an array of boxes: a map rebuilt from the same source must be
 * byte-identical (the generation log compares checksums).
 */
UNIT_TEST(test_rtree_order_in_two_threads)
{
	static const uint64_t sizes[] = {2047, 2048, 4097, 65537, 300001};
	uint64_t	saved = tdb_halves_min;

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
	{
		uint64_t	n = sizes[s];
		uint64_t	seed = 900 + s;
		TdbBox	   *in = xmalloc(n * sizeof(TdbBox));
		struct
		{
			uint64_t	before;
			TdbBox		box;
			uint32_t	after;
		}		   *wide = xmalloc(n * sizeof(*wide));
		uint32_t   *one = xmalloc(n * sizeof(uint32_t));
		uint32_t   *two = xmalloc(n * sizeof(uint32_t));
		uint32_t   *strided = xmalloc(n * sizeof(uint32_t));

		gen_boxes(&seed, in, n, s % 2 == 0 ? DATA_GRID : DATA_MIXED);
		for (uint64_t i = 0; i < n; i++)
			wide[i].box = in[i];
		tdb_halves_min = UINT64_MAX;
		CHECK(tdb_rtree_order(in, n, one) == 0);
		tdb_halves_min = 0;
		CHECK(tdb_rtree_order(in, n, two) == 0);
		CHECK(tdb_rtree_order_strided(&wide[0].box, sizeof(*wide), n, strided) == 0);
		tdb_halves_min = saved;
		check_str_order(in, n, one);
		if (memcmp(one, two, n * sizeof(uint32_t)) != 0)
			unit_fail(__FILE__, __LINE__, "n=%" PRIu64 ": two threads give another order", n);
		if (memcmp(one, strided, n * sizeof(uint32_t)) != 0)
			unit_fail(__FILE__, __LINE__, "n=%" PRIu64 ": strided boxes give another order", n);
		free(in);
		free(wide);
		free(one);
		free(two);
		free(strided);
	}
}
