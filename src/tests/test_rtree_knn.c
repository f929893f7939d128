/*
 * test_rtree_knn.c
 *	  The packed R-tree's k-nearest searches against brute force on seeded
 *	  random segments, planar and in metres, with exact distances far above
 *	  the box distances, and edge cases.
 */
#include "unit.h"
#include "rtree_fixture.h"
#include "rtree.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
