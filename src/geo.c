/*
 * geo.c
 *	  Great-circle distance and circle-to-box conversion; see geo.h.
 */
#include "geo.h"

#include <math.h>

#define DEG2RAD (M_PI / 180.0)
#define RAD2DEG (180.0 / M_PI)

/*
 * The sphere can be off by up to ~0.56 % against WGS 84 distances; widen
 * boxes by 1 % so that they are supersets of the ellipsoidal circle.
 */
#define CIRCLE_BOX_MARGIN 1.01

double
tdb_geo_distance_m(double lon1, double lat1, double lon2, double lat2)
{
	double		phi1 = lat1 * DEG2RAD;
	double		phi2 = lat2 * DEG2RAD;
	double		dphi = phi2 - phi1;
	double		dlambda = (lon2 - lon1) * DEG2RAD;
	double		s1 = sin(dphi / 2.0);
	double		s2 = sin(dlambda / 2.0);
	double		h = s1 * s1 + cos(phi1) * cos(phi2) * s2 * s2;

	if (h > 1.0)
		h = 1.0;
	return 2.0 * TDB_EARTH_RADIUS_M * asin(sqrt(h));
}

bool
tdb_geo_circle_box(double lon, double lat, double radius_m, TdbBox *box)
{
	double		dlat;
	double		dlon;
	double		coslat_far;

	if (!isfinite(lon) || !isfinite(lat) || !isfinite(radius_m) || radius_m < 0.0)
		return false;
	if (lat < -90.0 || lat > 90.0 || lon < -180.0 || lon > 180.0)
		return false;

	dlat = radius_m * CIRCLE_BOX_MARGIN / TDB_EARTH_RADIUS_M * RAD2DEG;
	if (lat + dlat >= 90.0 || lat - dlat <= -90.0)
		return false;

	/*
	 * The circle is widest in longitude at the latitude nearest a pole that
	 * it reaches; using that latitude's cosine gives a superset.
	 */
	coslat_far = cos((fabs(lat) + dlat) * DEG2RAD);
	if (coslat_far <= 0.0)
		return false;
	{
		double		ratio = sin(radius_m * CIRCLE_BOX_MARGIN / TDB_EARTH_RADIUS_M) / coslat_far;

		if (ratio >= 1.0)
			return false;
		dlon = asin(ratio) * RAD2DEG;
	}
	if (lon - dlon < -180.0 || lon + dlon > 180.0)
		return false;

	box->xmin = lon - dlon;
	box->xmax = lon + dlon;
	box->ymin = lat - dlat;
	box->ymax = lat + dlat;
	return true;
}
