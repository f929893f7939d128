/*
 * test_knn.c
 *	  The incremental nearest-neighbour scan (knn.h) against brute force:
 *	  full output, the first k, filtered consumption, for point, line and
 *	  polygon queries, box distance and metres; the planar helpers against
 *	  sampling; the metres lower bound against Vincenty's ellipsoidal
 *	  distance.
 */
#include "unit.h"
#include "knn.h"
#include "object.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- planar helpers -------------------------------------------------------- */

/* Smallest distance from p to n + 1 evenly spaced points of a-b. */
static double
sampled_point_segment(double px, double py, double ax, double ay, double bx, double by, int n)
{
	double		best = INFINITY;

	for (int i = 0; i <= n; i++)
	{
		double		t = (double) i / n;
		double		x = ax + t * (bx - ax),
					y = ay + t * (by - ay);

		best = fmin(best, hypot(x - px, y - py));
	}
	return best;
}

UNIT_TEST(test_knn_planar_helpers_match_sampling)
{
	uint64_t	seed = 41;
	int			zero = 0;

	for (int c = 0; c < 3000; c++)
	{
		double		v[8];
		double		exact,
					brute,
					gap;

		/* small integer grids make touching, collinear and crossing cases common */
		for (int i = 0; i < 8; i++)
			v[i] = c % 2 ? (double) (unit_rand(&seed) % 5) : unit_rand_double(&seed, -2, 2);
		if (c % 50 == 0)
		{
			v[2] = v[0];		/* zero-length segments */
			v[3] = v[1];
		}

		exact = tdb_dist_point_segment(v[4], v[5], v[0], v[1], v[2], v[3]);
		brute = sampled_point_segment(v[4], v[5], v[0], v[1], v[2], v[3], 2000);
		gap = hypot(v[2] - v[0], v[3] - v[1]) / 2000;
		CHECK(exact <= brute + 1e-12);
		CHECK(exact >= brute - gap - 1e-12);

		/* segment-segment: sample one, measure to the other exactly */
		exact = tdb_dist_segment_segment(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
		brute = INFINITY;
		for (int i = 0; i <= 2000; i++)
		{
			double		t = i / 2000.0;

			brute = fmin(brute, tdb_dist_point_segment(v[0] + t * (v[2] - v[0]), v[1] + t * (v[3] - v[1]),
													   v[4], v[5], v[6], v[7]));
		}
		if (!(exact <= brute + 1e-12 && exact >= brute - gap - 1e-12))
			unit_fail(__FILE__, __LINE__, "case %d: segment distance %.17g, sampled %.17g", c, exact, brute);
		CHECK(exact == tdb_dist_segment_segment(v[4], v[5], v[6], v[7], v[0], v[1], v[2], v[3]));
		CHECK(!tdb_segments_intersect(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]) || exact == 0.0);
		zero += exact == 0.0;
	}
	CHECK(zero > 300);			/* the grid cases did exercise intersections */

	/* known values */
	CHECK(tdb_dist_point_segment(0, 1, -1, 0, 1, 0) == 1.0);
	CHECK(tdb_dist_point_segment(3, 4, 0, 0, 0, 0) == 5.0);
	CHECK(tdb_dist_segment_segment(0, 0, 2, 2, 0, 2, 2, 0) == 0.0);
	CHECK(tdb_dist_segment_segment(0, 0, 1, 0, 2, 0, 3, 0) == 1.0);	/* collinear, apart */
	CHECK(tdb_dist_segment_segment(0, 0, 2, 0, 1, 0, 3, 0) == 0.0);	/* collinear, overlapping */
	CHECK(tdb_dist_segment_segment(0, 0, 1, 0, 1, 0, 1, 5) == 0.0);	/* touching ends */
}

/* ---- random maps ------------------------------------------------------------- */

typedef struct TestMap
{
	void	   *obj;
	TdbMapView	v;
} TestMap;

/*
 * n records in [0, 1]^2 + (20, 50): 2-5 points, every 9th a copy of an
 * earlier shape (equal distances: ties), every 11th with a repeated point
 * (a zero-length segment), every 13th with all points equal.
 */
static void
make_map(TestMap *m, uint64_t seed, uint32_t n)
{
	TdbMapBuilder *b = tdb_map_builder_create();
	char		err[TDB_ERRLEN];
	double	   *shapes = malloc(sizeof(double) * 10 * (n ? n : 1));
	uint32_t   *np = malloc(sizeof(uint32_t) * (n ? n : 1));

	for (uint32_t i = 0; i < n; i++)
	{
		double	   *xy = shapes + 10 * i;

		if (i % 9 == 8)
		{
			uint32_t	from = (uint32_t) (unit_rand(&seed) % i);

			memcpy(xy, shapes + 10 * from, sizeof(double) * 10);
			np[i] = np[from];
		}
		else
		{
			double		x = 20 + unit_rand_double(&seed, 0, 1),
						y = 50 + unit_rand_double(&seed, 0, 1);

			np[i] = 2 + (uint32_t) (unit_rand(&seed) % 4);
			for (uint32_t p = 0; p < np[i]; p++)
			{
				xy[2 * p] = x;
				xy[2 * p + 1] = y;
				if (i % 13 != 12)
				{
					x += unit_rand_double(&seed, -0.02, 0.02);
					y += unit_rand_double(&seed, -0.02, 0.02);
				}
			}
			if (i % 11 == 10)
			{
				xy[2] = xy[0];
				xy[3] = xy[1];
			}
		}
		CHECK(tdb_map_builder_add(b, 1 + i, xy, np[i], "r", NULL, 0, 0, err) == TDB_OBJ_OK);
	}
	CHECK(tdb_map_builder_finish(b, err) == TDB_OBJ_OK);
	m->obj = malloc(tdb_map_builder_size(b));
	tdb_map_builder_write(b, m->obj, 1, 0);
	tdb_map_view_init(&m->v, m->obj);
	tdb_map_builder_free(b);
	free(shapes);
	free(np);
}

typedef struct Res
{
	uint64_t	e;
	double		d;
} Res;

static int
cmp_res(const void *pa, const void *pb)
{
	const Res  *a = pa,
			   *b = pb;

	if (a->d != b->d)
		return a->d < b->d ? -1 : 1;
	return (a->e > b->e) - (a->e < b->e);
}

/*
 * Compare a scan with brute force (want, sorted): all of it, then the first
 * k of a fresh scan, then entries with index % 7 == 0 until 5 are found.
 */
static void
check_scan(const char *what, int q, const TdbRtree *t, TdbKnnBound bound, void *barg,
		   TdbKnnExact exact, void *earg, const Res *want, uint64_t n, uint64_t limit)
{
	TdbKnnIter	it;
	uint64_t	e;
	double		d;
	uint64_t	i = 0;
	uint64_t	k = n ? 1 + (uint64_t) q % n : 0;
	int			rc = 1;

	tdb_knn_begin(&it, t, bound, barg, exact, earg, NULL);
	for (i = 0; i < limit && (rc = tdb_knn_next(&it, &e, &d)) == 1; i++)
		if (i >= n || e != want[i].e || d != want[i].d)
		{
			unit_fail(__FILE__, __LINE__, "%s query %d: result %" PRIu64 " is %" PRIu64 " at %.17g, expected %" PRIu64 " at %.17g",
					  what, q, i, e, d, i < n ? want[i].e : 0, i < n ? want[i].d : 0);
			break;
		}
	if (limit >= n && i == n)
		CHECK(tdb_knn_next(&it, &e, &d) == 0);
	CHECK(rc >= 0);
	tdb_knn_end(&it);

	tdb_knn_begin(&it, t, bound, barg, exact, earg, NULL);
	for (i = 0; i < k; i++)
		if (tdb_knn_next(&it, &e, &d) != 1 || e != want[i].e)
			unit_fail(__FILE__, __LINE__, "%s query %d: first %" PRIu64 " differ at %" PRIu64, what, q, k, i);
	tdb_knn_end(&it);

	{
		uint64_t	found = 0,
					w = 0;

		tdb_knn_begin(&it, t, bound, barg, exact, earg, NULL);
		while (found < 5 && tdb_knn_next(&it, &e, &d) == 1)
		{
			if (e % 7 != 0)
				continue;
			while (w < n && want[w].e % 7 != 0)
				w++;
			if (w >= n || want[w].e != e || want[w].d != d)
				unit_fail(__FILE__, __LINE__, "%s query %d: filtered result %" PRIu64 " differs", what, q, found);
			w++;
			found++;
		}
		tdb_knn_end(&it);
	}
}

/* A star-shaped (so simple) ring of m points around (cx, cy), radii in [r0, r1]. */
static void
star(uint64_t *seed, double cx, double cy, double r0, double r1, int m, double *xy)
{
	for (int i = 0; i < m; i++)
	{
		double		a = 2 * M_PI * (i + unit_rand_double(seed, 0.1, 0.9)) / m;
		double		r = unit_rand_double(seed, r0, r1);

		xy[2 * i] = cx + r * cos(a);
		xy[2 * i + 1] = cy + r * sin(a);
	}
}

/* Random query of kind q % 6: point, 1-point line, line, polygon, polygon with a hole, two polygons. */
static void
make_query(uint64_t *seed, int q, TdbKnnQuery *out, double *xy, uint32_t *ring_end)
{
	double		cx = unit_rand_double(seed, 19.8, 21.2),
				cy = unit_rand_double(seed, 49.8, 51.2);
	int			kind = q % 6;
	uint32_t	np = 0,
				nr = 0;

	switch (kind)
	{
		case 0:
		case 1:
			xy[0] = cx;
			xy[1] = cy;
			np = 1;
			break;
		case 2:
			np = 2 + (uint32_t) (unit_rand(seed) % 4);
			for (uint32_t i = 0; i < np; i++)
			{
				xy[2 * i] = cx + unit_rand_double(seed, -0.2, 0.2);
				xy[2 * i + 1] = cy + unit_rand_double(seed, -0.2, 0.2);
			}
			break;
		case 3:
			star(seed, cx, cy, 0.02, 0.15, 7, xy);
			np = ring_end[0] = 7;
			nr = 1;
			break;
		case 4:
			star(seed, cx, cy, 0.1, 0.2, 8, xy);
			star(seed, cx, cy, 0.02, 0.08, 5, xy + 16);
			ring_end[0] = 8;
			np = ring_end[1] = 13;
			nr = 2;
			break;
		default:
			star(seed, cx, cy, 0.02, 0.1, 6, xy);
			star(seed, cx + 0.3, cy, 0.02, 0.1, 5, xy + 12);
			ring_end[0] = 6;
			np = ring_end[1] = 11;
			nr = 2;
			break;
	}
	CHECK(tdb_knn_query_init(out, kind == 0 ? TDB_KNN_POINT : kind < 3 ? TDB_KNN_LINE : TDB_KNN_POLYGON,
							 xy, np, ring_end, nr));
}

static void
check_map_queries(uint64_t seed, uint32_t n, int nqueries)
{
	TestMap		m;
	Res		   *want = malloc(sizeof(Res) * (n ? n : 1));
	double	   *shape = malloc(sizeof(double) * 10);
	const TdbRtree *t;

	make_map(&m, seed, n);
	t = &m.v.rtree;
	for (int q = 0; q < nqueries; q++)
	{
		double		xy[32];
		uint32_t	ring_end[2];
		TdbKnnQuery query;
		TdbMapQuery mq;
		uint64_t	limit = n <= 400 ? n : 60;

		make_query(&seed, q, &query, xy, ring_end);
		mq.map = &m.v;
		mq.query = &query;
		for (uint64_t i = 0; i < n; i++)
		{
			want[i].e = i;
			want[i].d = tdb_map_query_dist(&m.v, i, &query);
			/* the decoding walk agrees with the helper on the decoded shape */
			tdb_map_shape(&m.v, i, shape);
			if (tdb_knn_query_polyline_dist(&query, shape, m.v.records[i].npoints) != want[i].d)
				unit_fail(__FILE__, __LINE__, "record %" PRIu64 ": walk and decoded shape disagree", i);
		}
		qsort(want, n, sizeof(Res), cmp_res);
		check_scan("planar", q, t, tdb_knn_query_bound, &query, tdb_map_query_exact, &mq, want, n, limit);

		/* <#>: the query's box (rounded outward, as PostGIS's) to the records' boxes */
		{
			TdbBoxF		qb = tdb_boxf_from_boxd(&query.box);

			for (uint64_t i = 0; i < n; i++)
			{
				want[i].e = i;
				want[i].d = tdb_knn_box_dist(&t->boxes[t->levels[0].first + i], &qb);
			}
			qsort(want, n, sizeof(Res), cmp_res);
			check_scan("box", q, t, tdb_knn_box_dist, &qb, NULL, NULL, want, n, limit);
		}
	}
	free(want);
	free(shape);
	free(m.obj);
}

UNIT_TEST(test_knn_scan_matches_brute_force)
{
	static const uint32_t sizes[] = {1, 2, 16, 17, 100, 257, 400};

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		check_map_queries(900 + s, sizes[s], 300);
	check_map_queries(950, 3000, 120);
	check_map_queries(951, 20000, 24);
}

/* A polygon around a record gives 0; a point on a record gives 0. */
UNIT_TEST(test_knn_polygon_contains_and_touches)
{
	TestMap		m;
	TdbKnnQuery q;
	double		ring[8] = {19, 49, 22, 49, 22, 52, 19, 52};
	double		hole[16] = {19, 49, 22, 49, 22, 52, 19, 52, 10, 10, 11, 10, 11, 11, 10, 11};
	uint32_t	one = 4;
	uint32_t	two[2] = {4, 8};
	double		shape[10];
	TdbKnnIter	it;
	uint64_t	e;
	double		d;
	uint64_t	n = 0;

	make_map(&m, 77, 300);
	CHECK(tdb_knn_query_init(&q, TDB_KNN_POLYGON, ring, 4, &one, 1));
	for (uint64_t i = 0; i < m.v.count; i++)
		CHECK(tdb_map_query_dist(&m.v, i, &q) == 0.0);
	/* a far-away hole-like ring changes nothing (even-odd) */
	CHECK(tdb_knn_query_init(&q, TDB_KNN_POLYGON, hole, 8, two, 2));
	for (uint64_t i = 0; i < m.v.count; i++)
		CHECK(tdb_map_query_dist(&m.v, i, &q) == 0.0);
	tdb_knn_begin(&it, &m.v.rtree, tdb_knn_query_bound, &q, tdb_map_query_exact,
				  &(TdbMapQuery) {&m.v, &q}, NULL);
	while (tdb_knn_next(&it, &e, &d) == 1)
	{
		CHECK(d == 0.0);
		CHECK_EQ_U64(e, n);		/* all ties: index order */
		n++;
	}
	tdb_knn_end(&it);
	CHECK_EQ_U64(n, 300);

	tdb_map_shape(&m.v, 5, shape);
	CHECK(tdb_knn_query_init(&q, TDB_KNN_POINT, shape + 2, 1, NULL, 0));
	CHECK(tdb_map_query_dist(&m.v, 5, &q) == 0.0);
	/* the point metric agrees bit for bit with tdb_map_distance */
	for (uint64_t i = 0; i < m.v.count; i++)
		CHECK(tdb_map_query_dist(&m.v, i, &q) == tdb_map_distance(&m.v, i, shape[2], shape[3], TDB_METRIC_PLANAR));

	/* bad queries */
	CHECK(!tdb_knn_query_init(&q, TDB_KNN_POINT, ring, 2, NULL, 0));
	CHECK(!tdb_knn_query_init(&q, TDB_KNN_LINE, ring, 0, NULL, 0));
	CHECK(!tdb_knn_query_init(&q, TDB_KNN_POLYGON, ring, 4, two, 2));
	CHECK(!tdb_knn_query_init(&q, TDB_KNN_POLYGON, ring, 4, NULL, 0));
	ring[3] = NAN;
	CHECK(!tdb_knn_query_init(&q, TDB_KNN_LINE, ring, 4, NULL, 0));
	free(m.obj);
}

/* ---- allocator hook, empty tree ------------------------------------------------ */

typedef struct CountingAlloc
{
	int			grows;
	int			releases;
	int			fail_after;		/* grows allowed; -1: any */
} CountingAlloc;

static void *
counting_grow(void *ctx, void *p, size_t size)
{
	CountingAlloc *c = ctx;

	if (c->fail_after >= 0 && c->grows >= c->fail_after)
		return NULL;
	c->grows++;
	return realloc(p, size);
}

static void
counting_release(void *ctx, void *p)
{
	CountingAlloc *c = ctx;

	c->releases++;
	free(p);
}

UNIT_TEST(test_knn_allocator_and_empty)
{
	TestMap		m;
	TdbRtree	empty = {NULL, NULL, 0};
	CountingAlloc c = {0, 0, -1};
	TdbKnnAlloc a = {counting_grow, counting_release, &c};
	TdbKnnIter	it;
	TdbKnnQuery q;
	double		p[2] = {20.5, 50.5};
	uint64_t	e,
				n = 0;
	double		d,
				last = 0;

	CHECK(tdb_knn_query_init(&q, TDB_KNN_POINT, p, 1, NULL, 0));
	tdb_knn_begin(&it, &empty, tdb_knn_query_bound, &q, NULL, NULL, &a);
	CHECK(tdb_knn_next(&it, &e, &d) == 0);
	CHECK(tdb_knn_next(&it, &e, &d) == 0);
	tdb_knn_end(&it);
	CHECK(c.grows == 0 && c.releases == 0);

	make_map(&m, 5, 5000);
	tdb_knn_begin(&it, &m.v.rtree, tdb_knn_query_bound, &q, tdb_map_query_exact,
				  &(TdbMapQuery) {&m.v, &q}, &a);
	while (tdb_knn_next(&it, &e, &d) == 1)
	{
		CHECK(d >= last);
		last = d;
		n++;
	}
	tdb_knn_end(&it);
	CHECK_EQ_U64(n, 5000);
	CHECK(c.grows > 1 && c.releases == 1);
	CHECK(it.nexact == 5000);

	/* a hook that runs out: -1, and ending is still safe */
	c.grows = c.releases = 0;
	c.fail_after = 2;
	tdb_knn_begin(&it, &m.v.rtree, tdb_knn_query_bound, &q, tdb_map_query_exact,
				  &(TdbMapQuery) {&m.v, &q}, &a);
	{
		int			rc;

		while ((rc = tdb_knn_next(&it, &e, &d)) == 1)
			;
		CHECK(rc == -1);
	}
	tdb_knn_end(&it);
	CHECK(c.releases == 1);

	/* a few first results need little heap */
	c.grows = c.releases = 0;
	c.fail_after = -1;
	tdb_knn_begin(&it, &m.v.rtree, tdb_knn_query_bound, &q, tdb_map_query_exact,
				  &(TdbMapQuery) {&m.v, &q}, &a);
	CHECK(tdb_knn_next(&it, &e, &d) == 1);
	CHECK(it.nexact < 200);
	tdb_knn_end(&it);
	free(m.obj);
}

/* ---- metres ------------------------------------------------------------------------- */

/* Vincenty's inverse formula on WGS 84: metres, or -1 if it does not converge. */
static double
vincenty(double lon1, double lat1, double lon2, double lat2)
{
	const double a = 6378137.0,
				f = 1 / 298.257223563,
				b = (1 - f) * a;
	double		L = (lon2 - lon1) * M_PI / 180;
	double		U1 = atan((1 - f) * tan(lat1 * M_PI / 180));
	double		U2 = atan((1 - f) * tan(lat2 * M_PI / 180));
	double		sU1 = sin(U1),
				cU1 = cos(U1),
				sU2 = sin(U2),
				cU2 = cos(U2);
	double		lambda = L,
				sinS = 0,
				cosS = 0,
				sigma = 0,
				cos2a = 0,
				c2sm = 0;
	int			iter;

	for (iter = 0; iter < 500; iter++)
	{
		double		sl = sin(lambda),
					cl = cos(lambda);
		double		sina,
					C,
					prev;

		sinS = sqrt((cU2 * sl) * (cU2 * sl) + (cU1 * sU2 - sU1 * cU2 * cl) * (cU1 * sU2 - sU1 * cU2 * cl));
		if (sinS == 0)
			return 0;
		cosS = sU1 * sU2 + cU1 * cU2 * cl;
		sigma = atan2(sinS, cosS);
		sina = cU1 * cU2 * sl / sinS;
		cos2a = 1 - sina * sina;
		c2sm = cos2a != 0 ? cosS - 2 * sU1 * sU2 / cos2a : 0;
		C = f / 16 * cos2a * (4 + f * (4 - 3 * cos2a));
		prev = lambda;
		lambda = L + (1 - C) * f * sina * (sigma + C * sinS * (c2sm + C * cosS * (-1 + 2 * c2sm * c2sm)));
		if (fabs(lambda - prev) < 1e-13)
			break;
	}
	if (iter == 500)
		return -1;
	{
		double		u2 = cos2a * (a * a - b * b) / (b * b);
		double		A = 1 + u2 / 16384 * (4096 + u2 * (-768 + u2 * (320 - 175 * u2)));
		double		B = u2 / 1024 * (256 + u2 * (-128 + u2 * (74 - 47 * u2)));
		double		ds = B * sinS * (c2sm + B / 4 * (cosS * (-1 + 2 * c2sm * c2sm) -
													 B / 6 * c2sm * (-3 + 4 * sinS * sinS) * (-3 + 4 * c2sm * c2sm)));

		return b * A * (sigma - ds);
	}
}

/* The great-circle angle of tdb_geo_distance_m's haversine, radians. */
static double
angle_of(double lon1, double lat1, double lon2, double lat2)
{
	return tdb_geo_distance_m(lon1, lat1, lon2, lat2) / TDB_EARTH_RADIUS_M;
}

UNIT_TEST(test_knn_geodesic_bound)
{
	uint64_t	seed = 1234;
	int			checked = 0;

	for (int c = 0; c < 1500; c++)
	{
		double		lon = unit_rand_double(&seed, -180, 180);
		double		lat = unit_rand_double(&seed, -89, 89);
		double		w = c % 3 == 0 ? unit_rand_double(&seed, 0, 0.05) : unit_rand_double(&seed, 0, 40);
		double		h = c % 3 == 0 ? unit_rand_double(&seed, 0, 0.05) : unit_rand_double(&seed, 0, 30);
		double		x0,
					y0;
		TdbBox		bd;
		TdbBoxF		b;
		TdbKnnGeoPoint g = {lon, lat, 0, cos(lat * M_PI / 180)};
		double		bound,
					angle,
					min_angle = INFINITY,
					min_v = INFINITY;
		const int	S = 48;

		/* boxes near the point (often spanning its latitude or longitude), or anywhere */
		if (c % 4 == 3)
		{
			x0 = unit_rand_double(&seed, -180, 180 - w);
			y0 = unit_rand_double(&seed, -90, 90 - h);
		}
		else
		{
			x0 = lon + unit_rand_double(&seed, -w - 2, 2);
			y0 = lat + unit_rand_double(&seed, -h - 2, 2);
			if (c % 5 == 0)
				y0 = lat - h / 2;	/* spans the point's latitude */
			x0 = fmax(-180, fmin(x0, 180 - w));
			y0 = fmax(-90, fmin(y0, 90 - h));
		}
		bd.xmin = x0;
		bd.ymin = y0;
		bd.xmax = x0 + w;
		bd.ymax = y0 + h;
		b = tdb_boxf_from_boxd(&bd);
		bound = tdb_knn_geodesic_bound(&b, &g);
		angle = tdb_knn_angle_to_box(lon, lat, &b);
		/* the point form's first bound (its tight one is the bound above) */
		if (!(tdb_knn_geodesic_bound_lb(&b, &g) <= bound))
			unit_fail(__FILE__, __LINE__, "case %d: trig-free bound %.6f m above %.6f m", c,
					  tdb_knn_geodesic_bound_lb(&b, &g), bound);
		for (int i = 0; i <= S; i++)
			for (int j = 0; j <= S; j++)
			{
				double		x = b.xmin + (b.xmax - (double) b.xmin) * i / S;
				double		y = b.ymin + (b.ymax - (double) b.ymin) * j / S;
				double		v = vincenty(lon, lat, x, y);

				min_angle = fmin(min_angle, angle_of(lon, lat, x, y));
				if (v >= 0)
					min_v = fmin(min_v, v);
			}
		/* the point's own meridian and parallel through the box, where the nearest point may be */
		for (int j = 0; j <= S; j++)
		{
			double		y = b.ymin + (b.ymax - (double) b.ymin) * j / S;
			double		x = fmax(b.xmin, fmin(lon, b.xmax));
			double		v = vincenty(lon, lat, x, y);

			min_angle = fmin(min_angle, angle_of(lon, lat, x, y));
			if (v >= 0)
				min_v = fmin(min_v, v);
		}
		/* the trig-free bound: below the exact angle, and near it for near boxes */
		{
			double		lb = tdb_knn_angle_to_box_lb(lon, lat, cos(lat * M_PI / 180), &b);

			if (!(lb <= angle * (1 + 1e-12) + 1e-15))
				unit_fail(__FILE__, __LINE__, "case %d: trig-free %.17g above angle %.17g", c, lb, angle);
			if (c % 3 == 0 && angle < 0.05 && fabs(lat) < 80 && !(lb >= angle * 0.995 - 1e-15))
				unit_fail(__FILE__, __LINE__, "case %d: trig-free %.17g loose against %.17g", c, lb, angle);
		}
		/* a lower bound of the sphere's angle and of the ellipsoid's metres */
		if (!(angle <= min_angle + 1e-12))
			unit_fail(__FILE__, __LINE__, "case %d: angle %.17g above sampled %.17g", c, angle, min_angle);
		if (!(bound <= min_v))
			unit_fail(__FILE__, __LINE__, "case %d: bound %.6f m above Vincenty %.6f m", c, bound, min_v);
		if (!(bound <= min_angle * TDB_EARTH_RADIUS_M))
			unit_fail(__FILE__, __LINE__, "case %d: bound above the mean sphere", c);
		/* and tight: the sampling's spacing is all that separates them (small boxes) */
		if (c % 3 == 0 && !(angle >= min_angle - 0.05 * M_PI / 180 / S * 2 - 1e-12))
			unit_fail(__FILE__, __LINE__, "case %d: angle %.17g far below sampled %.17g", c, angle, min_angle);
		if (c % 3 == 0 && min_v < 1e6 && !(bound >= 0.985 * min_v - 0.05 * 111320.0 / S * 2 - 1.0))
			unit_fail(__FILE__, __LINE__, "case %d: bound %.3f m loose against %.3f m", c, bound, min_v);
		checked++;
	}
	CHECK(checked == 1500);

	/* inside the box: 0; on the same meridian: the latitude gap */
	{
		TdbBox		bd = {10, 40, 11, 41};
		TdbBoxF		b = tdb_boxf_from_boxd(&bd);
		TdbKnnGeoPoint in = {10.5, 40.5, 0, cos(40.5 * M_PI / 180)},
					north = {10.5, 42, 0, cos(42 * M_PI / 180)},
					slack = {10.5, 42, 1e9, cos(42 * M_PI / 180)};

		CHECK(tdb_knn_geodesic_bound(&b, &in) == 0.0);
		CHECK_NEAR(tdb_knn_angle_to_box(10.5, 42, &b), M_PI / 180, 1e-6);
		CHECK(tdb_knn_geodesic_bound(&b, &north) < vincenty(10.5, 42, 10.5, 41));
		CHECK(tdb_knn_geodesic_bound(&b, &north) > 0.99 * vincenty(10.5, 42, 10.5, 41));
		CHECK(tdb_knn_geodesic_bound(&b, &slack) == 0.0);
	}
}

/* A metres scan: Vincenty to the records' vertices as the exact distance. */
typedef struct VincentyArg
{
	const TdbMapView *v;
	double		lon,
				lat;
} VincentyArg;

static double
vincenty_exact(uint64_t e, void *arg)
{
	VincentyArg *a = arg;
	double		xy[10];
	double		best = INFINITY;

	tdb_map_shape(a->v, e, xy);
	for (uint32_t p = 0; p < a->v->records[e].npoints; p++)
		best = fmin(best, vincenty(a->lon, a->lat, xy[2 * p], xy[2 * p + 1]));
	return best;
}

/*
 * The trig-free bound where it could go wrong (review of f73eeb6): points
 * on and near the poles and the antimeridian (lon +-180), boxes touching or
 * spanning a pole, whole-world, zero-width or zero-height, glued to +-180,
 * tiny and huge; float boxes rounded outward as the tree holds them.  Never
 * above the exact angle, nor above a dense long-double sampling of the box.
 */
static double
lb_hav_angle(double lon1, double lat1, double lon2, double lat2)
{
	long double p1 = lat1 * (M_PI / 180),
				p2 = lat2 * (M_PI / 180),
				dl = (lon2 - lon1) * (M_PI / 180);
	long double s = sinl((p2 - p1) / 2),
				t = sinl(dl / 2);
	long double h = s * s + cosl(p1) * cosl(p2) * t * t;

	return (double) (2 * asinl(sqrtl(h > 1 ? 1 : h)));
}

UNIT_TEST(test_knn_angle_to_box_lb_extremes)
{
	static const double slat[] = {90, -90, 0, 89.9999999, -89.9999999, 85, 89.9, -0.0};
	static const double slon[] = {180, -180, 0, 179.9999999, -179.9999999, 179.5, -179.5, -0.0};
	uint64_t	seed = 4321;

	for (int c = 0; c < 300000; c++)
	{
		double		lon = c % 4 == 0 ? slon[c / 4 % 8] : (c % 4 == 1 ? unit_rand_double(&seed, 170, 180) * (c & 8 ? 1 : -1) : unit_rand_double(&seed, -180, 180));
		double		lat = c % 5 == 0 ? slat[c / 5 % 8] : (c % 5 == 1 ? unit_rand_double(&seed, 85, 90) * (c & 16 ? 1 : -1) : unit_rand_double(&seed, -90, 90));
		double		w = c & 1 ? unit_rand_double(&seed, 0, 0.05) : unit_rand_double(&seed, 0, 360),
					h = c & 2 ? unit_rand_double(&seed, 0, 0.05) : unit_rand_double(&seed, 0, 180),
					x0,
					x1,
					y0,
					y1;
		int			kind = c % 12;
		TdbBoxF		b;
		double		lb,
					exact;

		if (c % 7 == 0)
			w = 0;
		if (c % 11 == 0)
			h = 0;
		if (kind < 6)
		{
			x0 = lon + unit_rand_double(&seed, -w - 3, 3);
			y0 = lat + unit_rand_double(&seed, -h - 3, 3);
		}
		else
		{
			x0 = unit_rand_double(&seed, -180, 180);
			y0 = unit_rand_double(&seed, -90, 90);
		}
		x1 = x0 + w;
		y1 = y0 + h;
		if (kind == 6)
			y1 = 90;
		else if (kind == 7)
			y0 = -90;
		else if (kind == 8)
			y0 = -90, y1 = 90;
		else if (kind == 9)
			x0 = -180, x1 = 180;
		else if (kind == 10)
			x1 = 180, x0 = 180 - w;
		else if (kind == 11)
			x0 = -180, x1 = -180 + w;
		x0 = fmax(-180, fmin(x0, 180));
		x1 = fmax(-180, fmin(x1, 180));
		y0 = fmax(-90, fmin(y0, 90));
		y1 = fmax(-90, fmin(y1, 90));
		b.xmin = (float) fmin(x0, x1);
		b.xmax = (float) fmax(x0, x1);
		b.ymin = (float) fmin(y0, y1);
		b.ymax = (float) fmax(y0, y1);
		if ((double) b.xmin > fmin(x0, x1) && b.xmin > -180)
			b.xmin = nextafterf(b.xmin, -INFINITY);
		if ((double) b.xmax < fmax(x0, x1) && b.xmax < 180)
			b.xmax = nextafterf(b.xmax, INFINITY);
		if ((double) b.ymin > fmin(y0, y1) && b.ymin > -90)
			b.ymin = nextafterf(b.ymin, -INFINITY);
		if ((double) b.ymax < fmax(y0, y1) && b.ymax < 90)
			b.ymax = nextafterf(b.ymax, INFINITY);

		lb = tdb_knn_angle_to_box_lb(lon, lat, cos(lat * M_PI / 180), &b);
		exact = tdb_knn_angle_to_box(lon, lat, &b);
		if (!(lb >= 0 && lb <= exact * (1 + 1e-12) + 1e-15))
			unit_fail(__FILE__, __LINE__, "case %d: lon %.17g lat %.17g box [%.9g %.9g %.9g %.9g]: trig-free %.17g above exact %.17g",
					  c, lon, lat, b.xmin, b.ymin, b.xmax, b.ymax, lb, exact);
		if (c % 100 == 0)
		{
			const int	S = 24;
			double		m = INFINITY,
						xl = b.xmin,
						xh = b.xmax,
						yl = b.ymin,
						yh = b.ymax;

			for (int i = 0; i <= S; i++)
				for (int j = 0; j <= S; j++)
					m = fmin(m, lb_hav_angle(lon, lat, xl + (xh - xl) * i / S, yl + (yh - yl) * j / S));
			for (int j = 0; j <= 8 * S; j++)
			{
				double		y = yl + (yh - yl) * j / (8 * S),
							x = xl + (xh - xl) * j / (8 * S);

				m = fmin(m, fmin(lb_hav_angle(lon, lat, xl, y), lb_hav_angle(lon, lat, xh, y)));
				m = fmin(m, fmin(lb_hav_angle(lon, lat, x, yl), lb_hav_angle(lon, lat, x, yh)));
				if (lon >= xl && lon <= xh)
					m = fmin(m, lb_hav_angle(lon, lat, lon, y));
			}
			m = fmin(m, lb_hav_angle(lon, lat, fmax(xl, fmin(lon, xh)), fmax(yl, fmin(lat, yh))));
			if (!(lb <= m + 1e-12))
				unit_fail(__FILE__, __LINE__, "case %d: trig-free %.17g above sampled %.17g", c, lb, m);
		}
	}
}

UNIT_TEST(test_knn_geodesic_scan_matches_brute_force)
{
	TestMap		m;
	uint64_t	seed = 99;
	uint32_t	n = 2000;
	Res		   *want = malloc(sizeof(Res) * n);

	make_map(&m, 31, n);
	/* short edges: their arcs leave the vertex boxes by millimetres */
	CHECK(tdb_map_arc_slack_m(&m.v) > 0.0);
	CHECK(tdb_map_arc_slack_m(&m.v) < 1.0);
	for (int q = 0; q < 60; q++)
	{
		VincentyArg a = {&m.v, unit_rand_double(&seed, 19.5, 21.5), unit_rand_double(&seed, 49.5, 51.5)};
		TdbKnnGeoPoint g = {a.lon, a.lat, 0, cos(a.lat * M_PI / 180)};

		for (uint64_t i = 0; i < n; i++)
		{
			want[i].e = i;
			want[i].d = vincenty_exact(i, &a);
		}
		qsort(want, n, sizeof(Res), cmp_res);
		check_scan("metres", q, &m.v.rtree, tdb_knn_geodesic_bound, &g, vincenty_exact, &a, want, n, 40);
		/* the scan's way: trig-free bounds pushed, the exact angle when a box surfaces; the same distances */
		{
			TdbKnnIter	it;
			uint64_t	e;
			double		d;

			tdb_knn_begin(&it, &m.v.rtree, tdb_knn_geodesic_bound_lb, &g, vincenty_exact, &a, NULL);
			tdb_knn_set_tight(&it, tdb_knn_geodesic_bound, &g);
			for (uint64_t i = 0; i < 40 && i < n; i++)
				if (tdb_knn_next(&it, &e, &d) != 1 || d != want[i].d)
				{
					unit_fail(__FILE__, __LINE__, "two-level query %d: result %" PRIu64 " at %.17g, expected %.17g",
							  q, i, d, want[i].d);
					break;
				}
			tdb_knn_end(&it);
		}
	}
	free(want);
	free(m.obj);
}

/* ---- from geography lines and polygons (issue 32) ---------------------------- */

typedef struct ShapeArg
{
	const TdbMapView *v;
	const TdbKnnGeoShape *g;
} ShapeArg;

/* The sphere distance from the shape to record e (metres, PostGIS's radius). */
static double
shape_exact(uint64_t e, void *arg)
{
	ShapeArg   *a = arg;
	double		xy[64];

	tdb_map_shape(a->v, e, xy);
	return tdb_sph_shape_polyline_angle(&a->g->shape, xy, a->v->records[e].npoints) * TDB_EARTH_RADIUS_M;
}

static double
shape_refine(uint64_t e, void *arg)
{
	ShapeArg   *a = arg;
	double		xy[64];

	tdb_map_shape(a->v, e, xy);
	return tdb_knn_geodesic_polyline_bound(a->g, xy, a->v->records[e].npoints);
}

static bool
every_seventh(uint64_t e, void *arg)
{
	(void) arg;
	return e % 7 == 0;
}

/*
 * The cap bound, the arc-to-box bound when a box surfaces, the entry's own
 * bound, then the exact distance: the scan gives brute force's distances in
 * order (ties as they come), with and without a filter, from lines and
 * polygons, measuring far fewer than all.
 */
UNIT_TEST(test_knn_geodesic_shape_scan_matches_brute_force)
{
	TestMap		m;
	uint64_t	seed = 32;
	uint32_t	n = 2000;
	Res		   *want = malloc(sizeof(Res) * n);
	double		xy[2 * 13],
				v[3 * 13];
	uint32_t	ring_end = 13;

	make_map(&m, 31, n);
	for (int q = 0; q < 40; q++)
	{
		TdbKnnGeoShape g;
		ShapeArg	a = {&m.v, &g};
		bool		poly = q % 2 == 1;
		uint32_t	np = poly ? 13 : 2 + (uint32_t) q % 3;
		double		x = unit_rand_double(&seed, 19.5, 21.5),
					y = unit_rand_double(&seed, 49.5, 51.5),
					r = unit_rand_double(&seed, 0.001, 0.05);
		TdbKnnIter	it;
		uint64_t	e,
					got = 0,
					w = 0;
		double		d;
		bool		filtered = q % 4 >= 2;

		for (uint32_t i = 0; i < np; i++)
		{
			xy[2 * i] = poly ? x + r * cos(i * M_PI / 6) : x + unit_rand_double(&seed, -0.1, 0.1);
			xy[2 * i + 1] = poly ? y + r * sin(i * M_PI / 6) : y + unit_rand_double(&seed, -0.1, 0.1);
		}
		if (poly)
		{
			xy[24] = xy[0];
			xy[25] = xy[1];
		}
		CHECK(tdb_sph_shape_init(&g.shape, xy, np, poly ? &ring_end : NULL, poly ? 1 : 0, v));
		g.slack_m = tdb_map_arc_slack_m(&m.v);
		for (uint64_t i = 0; i < n; i++)
		{
			want[i].e = i;
			want[i].d = shape_exact(i, &a);
		}
		qsort(want, n, sizeof(Res), cmp_res);
		tdb_knn_begin(&it, &m.v.rtree, tdb_knn_geodesic_shape_crude, &g, shape_exact, &a, NULL);
		tdb_knn_set_tight(&it, tdb_knn_geodesic_shape_bound, &g);
		tdb_knn_set_refine(&it, shape_refine, &a);
		if (filtered)
			tdb_knn_set_filter(&it, every_seventh, NULL);
		while (got < 30 && tdb_knn_next(&it, &e, &d) == 1)
		{
			while (filtered && w < n && want[w].e % 7 != 0)
				w++;
			if (w >= n || d != want[w].d || d != shape_exact(e, &a) || (filtered && e % 7 != 0))
			{
				unit_fail(__FILE__, __LINE__, "shape query %d: result %" PRIu64 " is %" PRIu64 " at %.17g, expected %.17g",
						  q, got, e, d, w < n ? want[w].d : -1.0);
				break;
			}
			got++;
			w++;
		}
		CHECK_EQ_U64(got, 30);
		/* (inside a polygon every road is at 0 and measured; else a few) */
		if (want[40].d > 0)
			CHECK(it.nexact < 400);
		tdb_knn_end(&it);
	}
	free(want);
	free(m.obj);
}
