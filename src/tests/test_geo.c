/*
 * test_geo.c
 *	  Distances against closed forms on the sphere; circle boxes against
 *	  points sampled on the circle's edge.
 */
#include "unit.h"
#include "geo.h"

#include <math.h>

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
