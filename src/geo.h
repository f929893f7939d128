/*
 * geo.h
 *	  Geodesy on WGS 84 longitude/latitude: great-circle distances in metres
 *	  and the degree box that is sure to hold a circle of a given radius.
 *
 * Distances use a sphere of the WGS 84 mean radius (haversine), whose error
 * against the ellipsoid is below 0.5 %.  Callers that must match PostGIS
 * exactly (the locations wrapper) use tdb_geo_circle_box() as a superset
 * filter and leave the exact test to PostGIS.
 */
#ifndef TDB_GEO_H
#define TDB_GEO_H

#include <stdbool.h>

/* Mean radius of the WGS 84 ellipsoid, (2a + b) / 3, in metres. */
#define TDB_EARTH_RADIUS_M 6371008.7714

typedef struct TdbBox
{
	double		xmin;
	double		ymin;
	double		xmax;
	double		ymax;
} TdbBox;

/* Great-circle distance in metres between two lon/lat points in degrees. */
double		tdb_geo_distance_m(double lon1, double lat1, double lon2, double lat2);

/*
 * The smallest lon/lat box (degrees) that holds every point within radius_m
 * metres of (lon, lat), widened by a safety margin for the sphere/ellipsoid
 * difference.  Returns false if the inputs are not finite, the radius is
 * negative, or the circle reaches a pole or the antimeridian (the caller
 * then falls back to a full scan).
 */
bool		tdb_geo_circle_box(double lon, double lat, double radius_m, TdbBox *box);

#endif							/* TDB_GEO_H */
