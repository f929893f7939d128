/*
 * geo.h
 *	  Geodesy on WGS 84 longitude/latitude: great-circle distances in metres
 *	  and the degree box that is sure to hold a circle of a given radius
 *	  (geo.c); lines and polygons on the unit sphere, whose angles to boxes
 *	  and polylines bound geography <-> from them (geo_sphere.c).
 *
 * Distances use a sphere of the WGS 84 mean radius (haversine), whose error
 * against the ellipsoid is below 0.5 %.  Callers that must match PostGIS
 * exactly (the locations wrapper) use tdb_geo_circle_box() as a superset
 * filter and leave the exact test to PostGIS.
 *
 * No PostgreSQL headers here: the unit tests build this without a server.
 */
#ifndef TDB_GEO_H
#define TDB_GEO_H

#include <stdbool.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>

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
 * Geodesic distance in metres on the WGS 84 ellipsoid between two lon/lat
 * points in degrees (Vincenty's inverse formula, within a tenth of a
 * millimetre where it converges), or -1: nearly antipodal points where it
 * does not, or a coordinate not finite or outside [-180, 180] x [-90, 90].
 */
double		tdb_geo_wgs84_m(double lon1, double lat1, double lon2, double lat2);

/*
 * Great-circle distance in metres on the sphere of radius (2a + b) / 3 of
 * WGS 84 (PostGIS's for a geography with use_spheroid false), from the
 * angle between the two points' unit vectors (accurate at every distance,
 * antipodes too), or -1 for a coordinate as above.
 */
double		tdb_geo_wgs84_sphere_m(double lon1, double lat1, double lon2, double lat2);

/*
 * The smallest lon/lat box (degrees) that holds every point within radius_m
 * metres of (lon, lat), widened by a safety margin for the sphere/ellipsoid
 * difference.  Returns false if the inputs are not finite, the radius is
 * negative, or the circle reaches a pole or the antimeridian (the caller
 * then falls back to a full scan).
 */
bool		tdb_geo_circle_box(double lon, double lat, double radius_m, TdbBox *box);

/*
 * Latitude range (degrees) of the minor great-circle arc between two
 * lon/lat points: PostGIS's geography edges are such arcs (on the sphere),
 * and they bulge poleward past their ends' latitudes, by about 11 m for a
 * 25 km east-west edge at 42.5 N.  The arc's longitudes stay between its
 * ends'.  Returns false if the inputs are not finite or out of range, or if
 * the ends are 180 degrees or more apart in longitude (the arc crosses the
 * antimeridian or passes over a pole: the caller then falls back to a full
 * scan).  No margin is added for rounding (about 1e-13 degrees).
 */
bool		tdb_geo_arc_lat_range(double lon1, double lat1, double lon2, double lat2,
								  double *latmin, double *latmax);

/*
 * The lon/lat box of a geography given as WKB (ISO or extended, either byte
 * order; Z and M are ignored): its vertices, and the latitudes its edges
 * reach between them (tdb_geo_arc_lat_range) in lines, polygon rings and
 * the members of multi-geometries and collections.  Returns 1 with *box
 * set, 0 if it has no vertex, -1 if the WKB is malformed, holds a type other
 * than point, line, polygon, multi or collection, or an edge that
 * tdb_geo_arc_lat_range refuses.
 */
int			tdb_geo_wkb_arc_box(const unsigned char *wkb, size_t len, TdbBox *box);

/*
 * The vertices of a WKB LineString or Polygon (ISO or extended WKB, either
 * byte order; Z and M are ignored): returns 2 (a line) or 3 (a polygon)
 * with *npoints and *nrings (0 for a line) set and, where xy and ring_end
 * are not NULL, the x, y pairs and each ring's end (one past its last
 * vertex) written there: call once with NULLs to learn the sizes.  Returns
 * 0 for other types, empty shapes and rings of fewer than 4 vertices, -1
 * for malformed WKB or non-finite coordinates.
 */
int			tdb_geo_wkb_shape(const unsigned char *wkb, size_t len, double *xy, uint32_t *npoints,
							  uint32_t *ring_end, uint32_t *nrings);

/* ---- unit vectors (geo.c, geo_sphere.c) --------------------------------------- */

/*
 * Arcs shorter than this (radians, 6 micrometres) are taken as their ends:
 * their normal's direction is mostly rounding, and they bulge by nothing.
 */
#define TDB_GEO_ARC_TINY 1e-12

/* The unit vector of lon/lat degrees (x towards 0 E on the equator, z north). */
static inline void
tdb_geo_unit_vector(double lon, double lat, double v[3])
{
	double		phi = lat * (M_PI / 180.0);
	double		lambda = lon * (M_PI / 180.0);

	v[0] = cos(phi) * cos(lambda);
	v[1] = cos(phi) * sin(lambda);
	v[2] = sin(phi);
}

static inline void
tdb_geo_cross(const double a[3], const double b[3], double out[3])
{
	out[0] = a[1] * b[2] - a[2] * b[1];
	out[1] = a[2] * b[0] - a[0] * b[2];
	out[2] = a[0] * b[1] - a[1] * b[0];
}

static inline double
tdb_geo_dot(const double a[3], const double b[3])
{
	return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

/* ---- shapes on the unit sphere (lower bounds for geography <->) -------------- */

/*
 * A line or polygon query of geography <-> on the unit sphere: its vertices
 * as unit vectors, its edges the minor great-circle arcs between them, as
 * PostGIS's geography has them.  A polygon's rings are consecutive (ring r
 * ends at ring_end[r], implicitly closed); inside means inside the outer
 * ring of ANY of its rings by crossing parity (holes are ignored, which
 * only ever says "inside" more often: a lower bound stays a lower bound).
 */
typedef struct TdbSphShape
{
	const double *v;			/* 3 * npoints unit vectors */
	uint32_t	npoints;
	const uint32_t *ring_end;	/* polygon: ring ends; NULL: a line */
	uint32_t	nrings;
	double		outside[3];		/* polygon: a point outside every ring */
	TdbBox		box;			/* polygon: lon/lat box of the rings with their arcs' bulge */
	/* a cap holding the whole shape (its edges too): centre and angular radius */
	double		cap_lon;		/* degrees */
	double		cap_lat;
	double		cap_coslat;		/* cos(cap_lat) */
	double		cap_r;			/* radians; M_PI when no cap under 90 degrees holds it */
} TdbSphShape;

/*
 * Set up s from npoints lon/lat pairs (degrees) into v (3 * npoints
 * doubles, the caller's).  false (the caller then has no bound): a
 * non-finite or out-of-range coordinate, an edge of 179 degrees or more
 * (its great circle is PostGIS's guess), or a polygon that is not small
 * (longitudes spanning 60 degrees or more, a latitude beyond 80): only for
 * small ones is "inside" surely the same as PostGIS's.
 */
bool		tdb_sph_shape_init(TdbSphShape *s, const double *lonlat, uint32_t npoints,
							   const uint32_t *ring_end, uint32_t nrings, double *v);

/*
 * Great-circle angle (radians) from the shape to anything in the lon/lat
 * box (degrees, xmin <= xmax within [-180, 180]): exact but for rounding
 * (the caller shrinks it), 0 when the box touches an edge or lies inside a
 * polygon.
 */
double		tdb_sph_shape_box_angle(const TdbSphShape *s, double xmin, double ymin, double xmax, double ymax);

/*
 * Great-circle angle (radians) from the shape to a polyline of n >= 1
 * lon/lat points (degrees) whose edges are great-circle arcs: 0 when they
 * cross, or when the polyline's first point is inside a polygon (as PostGIS
 * decides a line against a polygon).
 */
double		tdb_sph_shape_polyline_angle(const TdbSphShape *s, const double *lonlat, uint32_t n);

#endif							/* TDB_GEO_H */
