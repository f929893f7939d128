/*
 * test_geo.c
 *	  Distances against closed forms on the sphere; circle boxes against
 *	  points sampled on the circle's edge.
 */
#include "unit.h"
#include "geo.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#define ARC_1DEG (TDB_EARTH_RADIUS_M * M_PI / 180.0)

UNIT_TEST(test_geo_known_distances)
{
	CHECK_NEAR(tdb_geo_distance_m(24.94, 60.17, 24.94, 60.17), 0.0, 1e-9);
	CHECK_NEAR(tdb_geo_distance_m(0, 0, 1, 0), ARC_1DEG, 1e-6);
	CHECK_NEAR(tdb_geo_distance_m(10, 45, 10, 46), ARC_1DEG, 1e-6);
	CHECK_NEAR(tdb_geo_distance_m(0, 0, 180, 0), M_PI * TDB_EARTH_RADIUS_M, 1e-3);
	CHECK_NEAR(tdb_geo_distance_m(0, 90, 0, -90), M_PI * TDB_EARTH_RADIUS_M, 1e-3);
	/* at 60 degrees north a degree of longitude is about half as long */
	CHECK_NEAR(tdb_geo_distance_m(24, 60, 25, 60), ARC_1DEG * 0.5, 100.0);
	/* symmetric */
	CHECK_NEAR(tdb_geo_distance_m(24.9, 60.1, -75.5, 39.7),
			   tdb_geo_distance_m(-75.5, 39.7, 24.9, 60.1), 1e-6);
}

/*
 * WGS 84 geodesics against published values: Vincenty's own example
 * (Flinders Peak to Buninyong), a degree along the equator (a times its
 * angle), the first degree of a meridian and half a meridian (pole to
 * pole); antipodes and bad coordinates give -1.  And the sphere of radius
 * (2a + b) / 3.
 */
UNIT_TEST(test_geo_wgs84_known)
{
	double		r = (2 * 6378137.0 + 6378137.0 * (1 - 1 / 298.257223563)) / 3;

	CHECK_NEAR(tdb_geo_wgs84_m(144 + 25 / 60.0 + 29.52440 / 3600, -(37 + 57 / 60.0 + 3.72030 / 3600),
							   143 + 55 / 60.0 + 35.38390 / 3600, -(37 + 39 / 60.0 + 10.15610 / 3600)),
			   54972.271, 0.001);
	CHECK_NEAR(tdb_geo_wgs84_m(0, 0, 1, 0), 6378137.0 * M_PI / 180, 1e-6);
	CHECK_NEAR(tdb_geo_wgs84_m(0, 0, 0, 1), 110574.389, 0.001);
	CHECK_NEAR(tdb_geo_wgs84_m(30, 90, 30, -90), 20003931.459, 0.001);
	CHECK_NEAR(tdb_geo_wgs84_m(24.94, 60.17, 24.94, 60.17), 0.0, 1e-9);
	CHECK_NEAR(tdb_geo_wgs84_m(179.5, 10, -179.5, 10), tdb_geo_wgs84_m(-0.5, 10, 0.5, 10), 1e-6);
	CHECK(tdb_geo_wgs84_m(0, 0, 180, 0) == -1);
	CHECK(tdb_geo_wgs84_m(0, 0.0001, 179.9, -0.0001) == -1);
	CHECK(tdb_geo_wgs84_m(NAN, 0, 1, 0) == -1);
	CHECK(tdb_geo_wgs84_m(0, 91, 1, 0) == -1);
	CHECK(tdb_geo_wgs84_m(181, 0, 1, 0) == -1);
	CHECK_NEAR(tdb_geo_wgs84_sphere_m(0, 0, 180, 0), M_PI * r, 1e-6);
	CHECK_NEAR(tdb_geo_wgs84_sphere_m(10, 45, 10, 46), r * M_PI / 180, 1e-6);
	CHECK_NEAR(tdb_geo_wgs84_sphere_m(24.94, 60.17, 24.94, 60.17), 0.0, 1e-9);
	CHECK(tdb_geo_wgs84_sphere_m(0, -90.5, 1, 0) == -1);
}

/* The point at distance d (metres) and bearing theta (radians) from (lon, lat). */
static void
destination(double lon, double lat, double d, double theta, double *lon2, double *lat2)
{
	double		phi1 = lat * M_PI / 180.0;
	double		lam1 = lon * M_PI / 180.0;
	double		delta = d / TDB_EARTH_RADIUS_M;
	double		phi2 = asin(sin(phi1) * cos(delta) + cos(phi1) * sin(delta) * cos(theta));
	double		lam2 = lam1 + atan2(sin(theta) * sin(delta) * cos(phi1),
									cos(delta) - sin(phi1) * sin(phi2));

	*lat2 = phi2 * 180.0 / M_PI;
	*lon2 = lam2 * 180.0 / M_PI;
}

UNIT_TEST(test_geo_circle_box_is_superset)
{
	uint64_t	seed = 7;

	for (int i = 0; i < 2000; i++)
	{
		double		lon = unit_rand_double(&seed, -170, 170);
		double		lat = unit_rand_double(&seed, -80, 80);
		double		r = (i % 4 == 0) ? 0.0 : exp(unit_rand_double(&seed, 0, log(200000.0)));
		TdbBox		box;

		if (!tdb_geo_circle_box(lon, lat, r, &box))
		{
			unit_fail(__FILE__, __LINE__, "no box for (%g, %g) r=%g", lon, lat, r);
			continue;
		}
		CHECK(box.xmin <= lon && lon <= box.xmax && box.ymin <= lat && lat <= box.ymax);
		for (int b = 0; b < 360; b += 3)
		{
			double		x,
						y;

			/* 1e-9 degrees (0.1 mm) absorbs the rounding of destination() */
			destination(lon, lat, r, b * M_PI / 180.0, &x, &y);
			if (!(box.xmin - 1e-9 <= x && x <= box.xmax + 1e-9 &&
				  box.ymin - 1e-9 <= y && y <= box.ymax + 1e-9))
				unit_fail(__FILE__, __LINE__, "(%g, %g) r=%g bearing %d: edge point (%.9f, %.9f) outside box",
						  lon, lat, r, b, x, y);
		}
		/* and not absurdly large: under 2 % wider than the circle */
		CHECK((box.ymax - box.ymin) / 2 <= r * 1.02 / ARC_1DEG + 1e-12);
	}
}

UNIT_TEST(test_geo_circle_box_rejects_bad_input)
{
	TdbBox		box;

	CHECK(!tdb_geo_circle_box(NAN, 60, 100, &box));
	CHECK(!tdb_geo_circle_box(24, INFINITY, 100, &box));
	CHECK(!tdb_geo_circle_box(24, 60, -1, &box));
	CHECK(!tdb_geo_circle_box(24, 60, NAN, &box));
	CHECK(!tdb_geo_circle_box(24, 91, 100, &box));
	CHECK(!tdb_geo_circle_box(181, 60, 100, &box));
	/* reaches the pole or the antimeridian */
	CHECK(!tdb_geo_circle_box(24, 89.99, 5000, &box));
	CHECK(!tdb_geo_circle_box(179.99, 0, 5000, &box));
	CHECK(tdb_geo_circle_box(179.9, 0, 5000, &box));
}

/* ---- great-circle arcs -------------------------------------------------- */

static void
to_vector(double lon, double lat, double v[3])
{
	v[0] = cos(lat * M_PI / 180.0) * cos(lon * M_PI / 180.0);
	v[1] = cos(lat * M_PI / 180.0) * sin(lon * M_PI / 180.0);
	v[2] = sin(lat * M_PI / 180.0);
}

/* Latitude (degrees) of the point at fraction t of the arc a..b of angle omega (slerp). */
static double
slerp_lat(const double a[3], const double b[3], double omega, double t)
{
	double		wa = sin((1 - t) * omega) / sin(omega);
	double		wb = sin(t * omega) / sin(omega);
	double		x = wa * a[0] + wb * b[0];
	double		y = wa * a[1] + wb * b[1];
	double		z = wa * a[2] + wb * b[2];

	return atan2(z, sqrt(x * x + y * y)) * 180.0 / M_PI;
}

/*
 * The extreme latitude (north when sign is 1, south when -1) of the arc by
 * sampling: 2,000 points, then 2,000 between the neighbours of the best one,
 * three times over (steps of 1e-12 of the arc at the end).  Every sample
 * must be within the range from the formula.
 */
static double
sampled_extreme(const double a[3], const double b[3], double omega, int sign,
				double latmin, double latmax, const char *what)
{
	double		lo = 0,
				hi = 1,
				best = -INFINITY,
				best_t = 0;

	for (int round = 0; round < 4; round++)
	{
		for (int i = 0; i <= 2000; i++)
		{
			double		t = lo + (hi - lo) * i / 2000.0;
			double		lat = slerp_lat(a, b, omega, t);

			/* 1e-12 degrees (0.1 micrometre): the rounding of either side */
			if (lat > latmax + 1e-12 || lat < latmin - 1e-12)
			{
				unit_fail(__FILE__, __LINE__, "%s: sample t=%.15g at latitude %.15g outside [%.15g, %.15g]",
						  what, t, lat, latmin, latmax);
				return NAN;
			}
			if (sign * lat > best)
			{
				best = sign * lat;
				best_t = t;
			}
		}
		{
			double		step = (hi - lo) / 2000.0;

			lo = fmax(0, best_t - step);
			hi = fmin(1, best_t + step);
		}
	}
	return sign * best;
}

static void
check_arc(double lon1, double lat1, double lon2, double lat2)
{
	double		a[3],
				b[3];
	double		latmin,
				latmax,
				omega;
	char		what[200];

	snprintf(what, sizeof(what), "arc (%.9g %.9g) - (%.9g %.9g)", lon1, lat1, lon2, lat2);
	if (!tdb_geo_arc_lat_range(lon1, lat1, lon2, lat2, &latmin, &latmax))
	{
		unit_fail(__FILE__, __LINE__, "%s: refused", what);
		return;
	}
	CHECK(latmin <= fmin(lat1, lat2) && latmax >= fmax(lat1, lat2));
	to_vector(lon1, lat1, a);
	to_vector(lon2, lat2, b);
	omega = acos(fmin(1, a[0] * b[0] + a[1] * b[1] + a[2] * b[2]));
	if (omega < 1e-9)
		return;					/* slerp is mostly rounding there; checked in test_geo_arc_known */
	{
		double		north = sampled_extreme(a, b, omega, 1, latmin, latmax, what);
		double		south = sampled_extreme(a, b, omega, -1, latmin, latmax, what);

		if (!(fabs(north - latmax) <= 1e-9 && fabs(south - latmin) <= 1e-9))
			unit_fail(__FILE__, __LINE__, "%s: range [%.15g, %.15g], sampled [%.15g, %.15g]",
					  what, latmin, latmax, south, north);
	}
}

UNIT_TEST(test_geo_arc_matches_sampling)
{
	uint64_t	seed = 11;

	/* east-west edges of 10 to 100 km at mid latitudes, both hemispheres */
	for (double lat = -70; lat <= 70; lat += 7.5)
		for (double km = 10; km <= 100; km += 30)
		{
			double		dlon = km * 1000 / (TDB_EARTH_RADIUS_M * cos(lat * M_PI / 180)) * 180 / M_PI;

			check_arc(1.45, lat, 1.45 + dlon, lat);
			check_arc(1.45 + dlon, lat, 1.45, lat);
		}
	/* random arcs of every length and direction, long ones over the equator too */
	for (int i = 0; i < 3000; i++)
	{
		double		lon1 = unit_rand_double(&seed, -180, 180);
		double		lat1 = unit_rand_double(&seed, -89.9, 89.9);
		double		span = (i % 3 == 0) ? 179.9 : (i % 3 == 1) ? 5 : 0.01;
		double		lon2 = fmax(-180, fmin(180, lon1 + unit_rand_double(&seed, -span, span)));
		double		lat2 = fmax(-90, fmin(90, lat1 + unit_rand_double(&seed, -span, span)));

		check_arc(lon1, lat1, lon2, lat2);
	}
	/* near the poles: the arc passes within a hair of one */
	check_arc(0, 89, 179, 89);
	check_arc(-90, -80, 89.999, -80);
	check_arc(10, 89.9999, 12, 89.9999);
}

UNIT_TEST(test_geo_arc_known)
{
	double		lo,
				hi;

	/* the tracker's line: 25 km east-west at 42.5 N reaches 10.9 m north of its ends */
	CHECK(tdb_geo_arc_lat_range(1.45, 42.5, 1.75, 42.5, &lo, &hi));
	CHECK_NEAR(hi, atan(tan(42.5 * M_PI / 180) / cos(0.15 * M_PI / 180)) * 180 / M_PI, 1e-12);
	CHECK_NEAR((hi - 42.5) * TDB_EARTH_RADIUS_M * M_PI / 180, 10.875, 0.001);
	CHECK(lo == 42.5);
	/* in the south it bulges south */
	CHECK(tdb_geo_arc_lat_range(150.6, -35, 150.0, -35, &lo, &hi));
	CHECK_NEAR(lo, -atan(tan(35 * M_PI / 180) / cos(0.3 * M_PI / 180)) * 180 / M_PI, 1e-12);
	CHECK(hi == -35);
	/* meridians, the equator and points do not bulge */
	CHECK(tdb_geo_arc_lat_range(24.9, 60.1, 24.9, 60.3, &lo, &hi));
	CHECK(lo == 60.1 && hi == 60.3);
	CHECK(tdb_geo_arc_lat_range(-10, 0, 100, 0, &lo, &hi));
	CHECK(fabs(lo) < 1e-12 && fabs(hi) < 1e-12);
	CHECK(tdb_geo_arc_lat_range(24.9, 60.1, 24.9, 60.1, &lo, &hi));
	CHECK(lo == 60.1 && hi == 60.1);
	CHECK(tdb_geo_arc_lat_range(24.9, 60.1, 24.9 + 1e-13, 60.1, &lo, &hi));
	CHECK(lo == 60.1 && hi == 60.1);
	/* a tiny edge still gets its exact ends */
	CHECK(tdb_geo_arc_lat_range(24.9, 60.1, 24.9000001, 60.1000001, &lo, &hi));
	CHECK(lo == 60.1 && hi == 60.1000001);
	/* across the antimeridian, over a pole, antipodes, bad input: refused */
	CHECK(!tdb_geo_arc_lat_range(179.5, 10, -179.5, 10, &lo, &hi));
	CHECK(!tdb_geo_arc_lat_range(-90, 80, 90, 80, &lo, &hi));
	CHECK(!tdb_geo_arc_lat_range(0, 90, 0, -90, &lo, &hi));
	CHECK(!tdb_geo_arc_lat_range(NAN, 10, 1, 10, &lo, &hi));
	CHECK(!tdb_geo_arc_lat_range(0, 10, 1, INFINITY, &lo, &hi));
	CHECK(!tdb_geo_arc_lat_range(0, 90.5, 1, 10, &lo, &hi));
	CHECK(!tdb_geo_arc_lat_range(0, 10, 180.5, 10, &lo, &hi));
	CHECK(tdb_geo_arc_lat_range(-180, 10, -0.5, 10, &lo, &hi));
}

/* ---- WKB ---------------------------------------------------------------- */

typedef struct Wkb
{
	unsigned char buf[4096];
	size_t		len;
	bool		big;
} Wkb;

static void
put_u32(Wkb *w, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		w->buf[w->len++] = (unsigned char) (v >> (8 * (w->big ? 3 - i : i)));
}

static void
put_double(Wkb *w, double d)
{
	uint64_t	u;

	memcpy(&u, &d, 8);
	for (int i = 0; i < 8; i++)
		w->buf[w->len++] = (unsigned char) (u >> (8 * (w->big ? 7 - i : i)));
}

/* A header: byte order, then type (flags or thousands already in it). */
static void
put_header(Wkb *w, uint32_t type)
{
	w->buf[w->len++] = w->big ? 0 : 1;
	put_u32(w, type);
}

/* A point array: n lon/lat pairs, each followed by extra zeros (Z, M). */
static void
put_points(Wkb *w, const double *xy, uint32_t n, int extra)
{
	put_u32(w, n);
	for (uint32_t i = 0; i < n; i++)
	{
		put_double(w, xy[2 * i]);
		put_double(w, xy[2 * i + 1]);
		for (int e = 0; e < extra; e++)
			put_double(w, 0);
	}
}

static double
arc_north(double lon1, double lat1, double lon2, double lat2)
{
	double		lo,
				hi;

	return tdb_geo_arc_lat_range(lon1, lat1, lon2, lat2, &lo, &hi) ? hi : NAN;
}

static double
arc_south(double lon1, double lat1, double lon2, double lat2)
{
	double		lo,
				hi;

	return tdb_geo_arc_lat_range(lon1, lat1, lon2, lat2, &lo, &hi) ? lo : NAN;
}

#define CHECK_BOX(w, x0, y0, x1, y1) \
	do { \
		TdbBox b_; \
		int r_ = tdb_geo_wkb_arc_box((w)->buf, (w)->len, &b_); \
		CHECK(r_ == 1); \
		if (r_ == 1) \
		{ \
			CHECK(b_.xmin == (x0)); \
			CHECK(b_.ymin == (y0)); \
			CHECK(b_.xmax == (x1)); \
			CHECK(b_.ymax == (y1)); \
		} \
	} while (0)

/* Every shorter prefix of a valid WKB, and one with a byte more, is refused. */
static void
check_truncations(const Wkb *w)
{
	TdbBox		b;

	for (size_t n = 0; n < w->len; n++)
		if (tdb_geo_wkb_arc_box(w->buf, n, &b) != -1)
			unit_fail(__FILE__, __LINE__, "a prefix of %zu of %zu bytes was accepted", n, w->len);
	{
		Wkb			longer = *w;

		longer.buf[longer.len++] = 0;
		CHECK(tdb_geo_wkb_arc_box(longer.buf, longer.len, &b) == -1);
	}
}

UNIT_TEST(test_geo_wkb_arc_box)
{
	static const double line[] = {1.45, 42.5, 1.75, 42.5};
	static const double ring[] = {24.6, 59.9, 25.4, 59.9, 25.4, 60.0, 24.6, 60.0, 24.6, 59.9};
	static const double south[] = {150.0, -35.0, 150.6, -35.0, 150.6, -34.9, 150.0, -35.0};
	double		north42 = arc_north(1.45, 42.5, 1.75, 42.5);
	double		north60 = arc_north(25.4, 60.0, 24.6, 60.0);
	double		south35 = arc_south(150.0, -35.0, 150.6, -35.0);
	TdbBox		b;

	CHECK(north42 > 42.5 + 9e-5 && north60 > 60.0 + 6e-4 && south35 < -35.0 - 3e-4);
	for (int big = 0; big <= 1; big++)
	{
		Wkb			w = {.big = big};

		/* POINT */
		w.len = 0;
		put_header(&w, 1);
		put_double(&w, 24.9);
		put_double(&w, 60.1);
		CHECK_BOX(&w, 24.9, 60.1, 24.9, 60.1);
		check_truncations(&w);

		/* LINESTRING, plain, ISO Z, extended with SRID and Z and M */
		w.len = 0;
		put_header(&w, 2);
		put_points(&w, line, 2, 0);
		CHECK_BOX(&w, 1.45, 42.5, 1.75, north42);
		check_truncations(&w);
		w.len = 0;
		put_header(&w, 1002);
		put_points(&w, line, 2, 1);
		CHECK_BOX(&w, 1.45, 42.5, 1.75, north42);
		w.len = 0;
		put_header(&w, 3002);
		put_points(&w, line, 2, 2);
		CHECK_BOX(&w, 1.45, 42.5, 1.75, north42);
		w.len = 0;
		put_header(&w, 2 | 0x80000000u | 0x40000000u | 0x20000000u);
		put_u32(&w, 4326);
		put_points(&w, line, 2, 2);
		CHECK_BOX(&w, 1.45, 42.5, 1.75, north42);
		check_truncations(&w);

		/* POLYGON: the north edge bulges north; in the south the south edge south */
		w.len = 0;
		put_header(&w, 3);
		put_u32(&w, 1);
		put_points(&w, ring, 5, 0);
		CHECK_BOX(&w, 24.6, 59.9, 25.4, north60);
		check_truncations(&w);
		w.len = 0;
		put_header(&w, 3 | 0x20000000u);
		put_u32(&w, 4326);
		put_u32(&w, 1);
		put_points(&w, south, 4, 0);
		CHECK_BOX(&w, 150.0, south35, 150.6, -34.9);

		/* GEOMETRYCOLLECTION(MULTIPOINT, MULTILINESTRING, MULTIPOLYGON with a hole) */
		w.len = 0;
		put_header(&w, 7);
		put_u32(&w, 3);
		put_header(&w, 4);
		put_u32(&w, 2);
		put_header(&w, 1);
		put_double(&w, 30.0);
		put_double(&w, 10.0);
		put_header(&w, 1);
		put_double(&w, NAN);	/* POINT EMPTY */
		put_double(&w, NAN);
		put_header(&w, 5);
		put_u32(&w, 1);
		put_header(&w, 2);
		put_points(&w, line, 2, 0);
		put_header(&w, 6);
		put_u32(&w, 1);
		put_header(&w, 3);
		put_u32(&w, 2);
		put_points(&w, south, 4, 0);
		put_points(&w, ring, 5, 0);
		/* an empty part beside others: PostGIS raises its error on every row, no box */
		CHECK(tdb_geo_wkb_arc_box(w.buf, w.len, &b) == -1);
		check_truncations(&w);

		/* empty: no vertex */
		w.len = 0;
		put_header(&w, 2);
		put_u32(&w, 0);
		CHECK(tdb_geo_wkb_arc_box(w.buf, w.len, &b) == 0);
		w.len = 0;
		put_header(&w, 7);
		put_u32(&w, 1);
		put_header(&w, 1);
		put_double(&w, NAN);
		put_double(&w, NAN);
		CHECK(tdb_geo_wkb_arc_box(w.buf, w.len, &b) == 0);

		/* refused: an edge across the antimeridian, NaN in a line, curves, unknown dimensions */
		w.len = 0;
		put_header(&w, 2);
		put_points(&w, (const double[]) {179.5, 10, -179.5, 10}, 2, 0);
		CHECK(tdb_geo_wkb_arc_box(w.buf, w.len, &b) == -1);
		w.len = 0;
		put_header(&w, 2);
		put_points(&w, (const double[]) {1, 10, NAN, 10}, 2, 0);
		CHECK(tdb_geo_wkb_arc_box(w.buf, w.len, &b) == -1);
		w.len = 0;
		put_header(&w, 1);
		put_double(&w, NAN);
		put_double(&w, 10);
		CHECK(tdb_geo_wkb_arc_box(w.buf, w.len, &b) == -1);
		w.len = 0;
		put_header(&w, 8);		/* CIRCULARSTRING */
		put_points(&w, line, 2, 0);
		CHECK(tdb_geo_wkb_arc_box(w.buf, w.len, &b) == -1);
		w.len = 0;
		put_header(&w, 4002);
		put_points(&w, line, 2, 0);
		CHECK(tdb_geo_wkb_arc_box(w.buf, w.len, &b) == -1);
		/* a point count larger than the bytes */
		w.len = 0;
		put_header(&w, 2);
		put_u32(&w, 0xffffffffu);
		put_double(&w, 1);
		put_double(&w, 2);
		CHECK(tdb_geo_wkb_arc_box(w.buf, w.len, &b) == -1);
	}

	/* a bad byte order; collections nested deeper than 32 */
	{
		Wkb			w = {.big = false};

		put_header(&w, 1);
		put_double(&w, 1);
		put_double(&w, 2);
		w.buf[0] = 2;
		CHECK(tdb_geo_wkb_arc_box(w.buf, w.len, &b) == -1);
		for (int depth = 30; depth <= 40; depth += 10)
		{
			w.len = 0;
			for (int i = 0; i < depth; i++)
			{
				put_header(&w, 7);
				put_u32(&w, 1);
			}
			put_header(&w, 1);
			put_double(&w, 1);
			put_double(&w, 2);
			CHECK(tdb_geo_wkb_arc_box(w.buf, w.len, &b) == (depth <= 32 ? 1 : -1));
		}
	}
}

/* The vertices of lines and polygons, in either byte order and WKB flavour; other input refused. */
UNIT_TEST(test_geo_wkb_shape)
{
	static const double line[] = {1.0, 2.0, 3.5, -4.25, 5.0, 6.0};
	static const double shell[] = {0, 0, 10, 0, 10, 10, 0, 10, 0, 0};
	static const double hole[] = {2, 2, 3, 2, 3, 3, 2, 2};
	double		xy[32];
	uint32_t	ends[4],
				n,
				rings;

	for (int big = 0; big <= 1; big++)
	{
		Wkb			w = {.big = big};

		/* a line, ISO Z (1002): the Z values are skipped */
		put_header(&w, 1002);
		put_points(&w, line, 3, 1);
		CHECK(tdb_geo_wkb_shape(w.buf, w.len, NULL, &n, NULL, &rings) == 2);
		CHECK(n == 3 && rings == 0);
		CHECK(tdb_geo_wkb_shape(w.buf, w.len, xy, &n, NULL, &rings) == 2);
		for (int i = 0; i < 6; i++)
			CHECK(xy[i] == line[i]);
		for (size_t k = 0; k < w.len; k++)
			CHECK(tdb_geo_wkb_shape(w.buf, k, xy, &n, NULL, &rings) == -1);

		/* a polygon with a hole, extended WKB with an SRID */
		w.len = 0;
		put_header(&w, 3 | 0x20000000u);
		put_u32(&w, 4326);
		put_u32(&w, 2);
		put_points(&w, shell, 5, 0);
		put_points(&w, hole, 4, 0);
		CHECK(tdb_geo_wkb_shape(w.buf, w.len, NULL, &n, NULL, &rings) == 3);
		CHECK(n == 9 && rings == 2);
		CHECK(tdb_geo_wkb_shape(w.buf, w.len, xy, &n, ends, &rings) == 3);
		CHECK(ends[0] == 5 && ends[1] == 9);
		CHECK(xy[10] == 2 && xy[17] == 2);
		w.buf[w.len++] = 0;		/* a byte too many */
		CHECK(tdb_geo_wkb_shape(w.buf, w.len, NULL, &n, NULL, &rings) == -1);

		/* a ring of 3 vertices, a point, an empty line, a collection: not shapes */
		w.len = 0;
		put_header(&w, 3);
		put_u32(&w, 1);
		put_points(&w, hole, 3, 0);
		CHECK(tdb_geo_wkb_shape(w.buf, w.len, NULL, &n, NULL, &rings) == 0);
		w.len = 0;
		put_header(&w, 1);
		put_double(&w, 1);
		put_double(&w, 2);
		CHECK(tdb_geo_wkb_shape(w.buf, w.len, NULL, &n, NULL, &rings) == 0);
		w.len = 0;
		put_header(&w, 2);
		put_u32(&w, 0);
		CHECK(tdb_geo_wkb_shape(w.buf, w.len, NULL, &n, NULL, &rings) == 0);
		w.len = 0;
		put_header(&w, 7);
		put_u32(&w, 0);
		CHECK(tdb_geo_wkb_shape(w.buf, w.len, NULL, &n, NULL, &rings) == 0);

		/* a non-finite coordinate, a huge count */
		w.len = 0;
		put_header(&w, 2);
		put_u32(&w, 2);
		put_double(&w, 1);
		put_double(&w, NAN);
		put_double(&w, 2);
		put_double(&w, 3);
		CHECK(tdb_geo_wkb_shape(w.buf, w.len, NULL, &n, NULL, &rings) == -1);
		w.len = 0;
		put_header(&w, 2);
		put_u32(&w, 0xffffffffu);
		CHECK(tdb_geo_wkb_shape(w.buf, w.len, NULL, &n, NULL, &rings) == -1);
	}
}

/* ---- shapes on the unit sphere ------------------------------------------------ */

static void
sph_unit(double lon, double lat, double v[3])
{
	double		p = lat * M_PI / 180.0,
				l = lon * M_PI / 180.0;

	v[0] = cos(p) * cos(l);
	v[1] = cos(p) * sin(l);
	v[2] = sin(p);
}

static double
sph_angle(const double a[3], const double b[3])
{
	double		c[3] = {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};

	return atan2(sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2]), a[0] * b[0] + a[1] * b[1] + a[2] * b[2]);
}

/* Point t of n + 1 along the great-circle arc a-b (slerp). */
static void
sph_along(const double a[3], const double b[3], int t, int n, double out[3])
{
	double		w = sph_angle(a, b),
				f = (double) t / n,
				s = sin(w);

	for (int k = 0; k < 3; k++)
		out[k] = s < 1e-15 ? a[k] : (sin((1 - f) * w) * a[k] + sin(f * w) * b[k]) / s;
}

/* The least angle between points sampled along a line's arcs and a grid over the box (boundary included). */
static double
sph_sampled_box(const double *lonlat, int n, const TdbBox *b)
{
	double		best = INFINITY;

	for (int i = 0; i + 1 < n; i++)
	{
		double		a[3],
					c[3];

		sph_unit(lonlat[2 * i], lonlat[2 * i + 1], a);
		sph_unit(lonlat[2 * i + 2], lonlat[2 * i + 3], c);
		for (int t = 0; t <= 100; t++)
		{
			double		p[3];

			sph_along(a, c, t, 100, p);
			for (int gx = 0; gx <= 24; gx++)
				for (int gy = 0; gy <= 24; gy++)
				{
					double		q[3];

					sph_unit(b->xmin + (b->xmax - b->xmin) * gx / 24, b->ymin + (b->ymax - b->ymin) * gy / 24, q);
					best = fmin(best, sph_angle(p, q));
				}
		}
	}
	return best;
}

/*
 * The line-to-box angle is never above the angle between any sampled pair
 * (it is a lower bound of the true one) and close to the least of them
 * (the sampling's spacing): random lines, some across the antimeridian,
 * against boxes from a hundredth of a degree to 150 degrees wide.
 */
UNIT_TEST(test_geo_sph_box_matches_sampling)
{
	uint64_t	seed = 32;
	double		v[3 * 4];

	for (int i = 0; i < 120; i++)
	{
		double		xy[8];
		int			n = 2 + (int) unit_rand_double(&seed, 0, 2.99);
		double		len = exp(unit_rand_double(&seed, log(0.01), log(40)));
		TdbSphShape s;
		TdbBox		b;
		double		w = exp(unit_rand_double(&seed, log(0.01), log(150))),
					h = exp(unit_rand_double(&seed, log(0.01), log(60))),
					got,
					sampled,
					spacing;

		xy[0] = unit_rand_double(&seed, -179, 179);
		xy[1] = unit_rand_double(&seed, -70, 70);
		for (int k = 1; k < n; k++)
		{
			double		x = xy[2 * k - 2] + unit_rand_double(&seed, -len, len);

			xy[2 * k] = x > 180 ? x - 360 : (x < -180 ? x + 360 : x);
			xy[2 * k + 1] = fmax(-85, fmin(85, xy[2 * k - 1] + unit_rand_double(&seed, -len, len)));
		}
		b.xmin = fmax(-180, xy[0] + unit_rand_double(&seed, -3 * len - w, 3 * len));
		b.xmax = fmin(180, b.xmin + w);
		b.ymin = fmax(-89, xy[1] + unit_rand_double(&seed, -3 * len - h, 3 * len));
		b.ymax = fmin(89, b.ymin + h);
		CHECK(tdb_sph_shape_init(&s, xy, (uint32_t) n, NULL, 0, v));
		got = tdb_sph_shape_box_angle(&s, b.xmin, b.ymin, b.xmax, b.ymax);
		sampled = sph_sampled_box(xy, n, &b);
		spacing = (2 * len / 100 + (w + h) / 24) * M_PI / 180.0;
		CHECK(got <= sampled + 1e-12);
		CHECK(got >= sampled - spacing);
	}
}

/*
 * Polygons: a box inside one is at 0, a polyline whose first point is
 * inside too; outside, the angle to the rings; lines against lines equal
 * sampling; huge polygons, poles and 179-degree edges are refused.
 */
UNIT_TEST(test_geo_sph_polygon_and_polyline)
{
	double		square[10] = {24, 60, 26, 60, 26, 61, 24, 61, 24, 60};
	double		holed[20] = {24, 60, 26, 60, 26, 61, 24, 61, 24, 60,
	24.5, 60.2, 25.5, 60.2, 25.5, 60.8, 24.5, 60.8, 24.5, 60.2};
	uint32_t	one = 5,
				two[2] = {5, 10};
	double		v[30];
	double		line_in[4] = {25, 60.5, 30, 62};
	double		line_out[4] = {27, 60.5, 28, 60.5};
	double		huge[10] = {-170, -70, 170, -70, 170, 70, -170, 70, -170, -70};
	double		polar[8] = {0, 85, 120, 85, -120, 85, 0, 85};
	double		wide[4] = {0, 0, 179.5, 0};
	TdbSphShape s;
	double		a[3],
				b[3];
	uint64_t	seed = 5;

	CHECK(tdb_sph_shape_init(&s, square, 5, &one, 1, v));
	CHECK(tdb_sph_shape_box_angle(&s, 24.9, 60.4, 25.1, 60.6) == 0.0);
	CHECK(tdb_sph_shape_polyline_angle(&s, line_in, 2) == 0.0);
	/* 1 degree of longitude east of 26 E at 60.5 N: the ring's meridian edge */
	sph_unit(26, 60.5, a);
	sph_unit(27, 60.5, b);
	CHECK_NEAR(tdb_sph_shape_polyline_angle(&s, line_out, 2), sph_angle(a, b), 1e-4);
	CHECK(tdb_sph_shape_box_angle(&s, 27, 60.4, 28, 60.6) > 0.0);
	/* a hole is ignored: still inside (a lower bound stays one) */
	CHECK(tdb_sph_shape_init(&s, holed, 10, two, 2, v));
	CHECK(tdb_sph_shape_box_angle(&s, 24.9, 60.4, 25.1, 60.6) == 0.0);
	CHECK(!tdb_sph_shape_init(&s, huge, 5, &one, 1, v));
	CHECK(!tdb_sph_shape_init(&s, polar, 4, &one, 1, v));
	CHECK(!tdb_sph_shape_init(&s, wide, 2, NULL, 0, v));

	/* line to polyline against sampling */
	for (int i = 0; i < 60; i++)
	{
		double		q[4],
					r[6],
					got,
					sampled = INFINITY;

		q[0] = unit_rand_double(&seed, -179, 179);
		q[1] = unit_rand_double(&seed, -60, 60);
		q[2] = q[0] + unit_rand_double(&seed, -1, 1);
		q[3] = q[1] + unit_rand_double(&seed, -1, 1);
		for (int k = 0; k < 3; k++)
		{
			r[2 * k] = q[0] + unit_rand_double(&seed, -2, 2);
			r[2 * k + 1] = q[1] + unit_rand_double(&seed, -2, 2);
		}
		CHECK(tdb_sph_shape_init(&s, q, 2, NULL, 0, v));
		got = tdb_sph_shape_polyline_angle(&s, r, 3);
		for (int e = 0; e < 2; e++)
		{
			double		p0[3],
						p1[3],
						q0[3],
						q1[3];

			sph_unit(q[0], q[1], q0);
			sph_unit(q[2], q[3], q1);
			sph_unit(r[2 * e], r[2 * e + 1], p0);
			sph_unit(r[2 * e + 2], r[2 * e + 3], p1);
			for (int t = 0; t <= 150; t++)
				for (int u = 0; u <= 150; u++)
				{
					double		x[3],
								y[3];

					sph_along(q0, q1, t, 150, x);
					sph_along(p0, p1, u, 150, y);
					sampled = fmin(sampled, sph_angle(x, y));
				}
		}
		CHECK(got <= sampled + 1e-12);
		CHECK(got >= sampled - 4.0 / 150 * M_PI / 180.0);
	}
}
