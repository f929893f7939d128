/*
 * geo.c
 *	  Great-circle distance, circle-to-box conversion and the latitude
 *	  reach of great-circle arcs and of WKB geographies; see geo.h.
 */
#include "geo.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

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

#define WGS84_A		6378137.0
#define WGS84_F		(1.0 / 298.257223563)
#define WGS84_B		(WGS84_A * (1.0 - WGS84_F))

static bool
lonlat_ok(double lon, double lat)
{
	return lon >= -180 && lon <= 180 && lat >= -90 && lat <= 90;	/* false for NaN */
}

double
tdb_geo_wgs84_m(double lon1, double lat1, double lon2, double lat2)
{
	double		L,
				u1,
				u2,
				su1,
				cu1,
				su2,
				cu2,
				lambda,
				prev,
				ss = 0,
				cs = 0,
				sigma = 0,
				c2a = 0,
				c2sm = 0,
				usq,
				A,
				B,
				ds;
	int			iter = 0;

	if (!lonlat_ok(lon1, lat1) || !lonlat_ok(lon2, lat2))
		return -1;
	L = (lon2 - lon1) * DEG2RAD;
	if (L > M_PI)
		L -= 2 * M_PI;
	else if (L < -M_PI)
		L += 2 * M_PI;
	/* reduced latitudes (tan of +-90 degrees is huge, not infinite: atan gives +-pi/2) */
	u1 = atan((1 - WGS84_F) * tan(lat1 * DEG2RAD));
	u2 = atan((1 - WGS84_F) * tan(lat2 * DEG2RAD));
	su1 = sin(u1), cu1 = cos(u1), su2 = sin(u2), cu2 = cos(u2);
	lambda = L;
	do
	{
		double		sl = sin(lambda),
					cl = cos(lambda),
					sa,
					C;

		ss = sqrt((cu2 * sl) * (cu2 * sl) + (cu1 * su2 - su1 * cu2 * cl) * (cu1 * su2 - su1 * cu2 * cl));
		cs = su1 * su2 + cu1 * cu2 * cl;
		if (ss == 0)
			return cs > 0 ? 0 : -1; /* the same point; or antipodes, where it does not converge */
		sigma = atan2(ss, cs);
		sa = cu1 * cu2 * sl / ss;
		c2a = 1 - sa * sa;
		c2sm = c2a != 0 ? cs - 2 * su1 * su2 / c2a : 0;	/* on the equator */
		C = WGS84_F / 16 * c2a * (4 + WGS84_F * (4 - 3 * c2a));
		prev = lambda;
		lambda = L + (1 - C) * WGS84_F * sa * (sigma + C * ss * (c2sm + C * cs * (-1 + 2 * c2sm * c2sm)));
	} while (fabs(lambda - prev) > 1e-12 && ++iter < 200);
	if (iter >= 200 || !(fabs(lambda) <= M_PI))
		return -1;				/* nearly antipodal: no convergence */
	usq = c2a * (WGS84_A * WGS84_A - WGS84_B * WGS84_B) / (WGS84_B * WGS84_B);
	A = 1 + usq / 16384 * (4096 + usq * (-768 + usq * (320 - 175 * usq)));
	B = usq / 1024 * (256 + usq * (-128 + usq * (74 - 47 * usq)));
	ds = B * ss * (c2sm + B / 4 * (cs * (-1 + 2 * c2sm * c2sm) -
								  B / 6 * c2sm * (-3 + 4 * ss * ss) * (-3 + 4 * c2sm * c2sm)));
	return WGS84_B * A * (sigma - ds);
}

double
tdb_geo_wgs84_sphere_m(double lon1, double lat1, double lon2, double lat2)
{
	double		a[3],
				b[3],
				x[3];

	if (!lonlat_ok(lon1, lat1) || !lonlat_ok(lon2, lat2))
		return -1;
	tdb_geo_unit_vector(lon1, lat1, a);
	tdb_geo_unit_vector(lon2, lat2, b);
	tdb_geo_cross(a, b, x);
	return (2 * WGS84_A + WGS84_B) / 3 * atan2(sqrt(tdb_geo_dot(x, x)), tdb_geo_dot(a, b));
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

/* ---- great-circle arcs ------------------------------------------------------ */


bool
tdb_geo_arc_lat_range(double lon1, double lat1, double lon2, double lat2,
					  double *latmin, double *latmax)
{
	double		a[3],
				b[3],
				n[3],
				p[3],
				t[3];
	double		nlen,
				horiz,
				reach;

	if (!isfinite(lon1) || !isfinite(lat1) || !isfinite(lon2) || !isfinite(lat2))
		return false;
	if (lat1 < -90.0 || lat1 > 90.0 || lat2 < -90.0 || lat2 > 90.0 ||
		lon1 < -180.0 || lon1 > 180.0 || lon2 < -180.0 || lon2 > 180.0)
		return false;
	/*
	 * The minor arc spans less than 180 degrees of longitude, monotonically:
	 * between the ends this way round, or across the antimeridian.
	 */
	if (fabs(lon2 - lon1) >= 180.0)
		return false;

	*latmin = fmin(lat1, lat2);
	*latmax = fmax(lat1, lat2);
	tdb_geo_unit_vector(lon1, lat1, a);
	tdb_geo_unit_vector(lon2, lat2, b);
	tdb_geo_cross(a, b, n);
	nlen = sqrt(tdb_geo_dot(n, n));
	if (nlen < TDB_GEO_ARC_TINY)
		return tdb_geo_dot(a, b) > 0;	/* the same point; antipodes have no minor arc */

	/*
	 * The circle's northernmost point is p = z - (z.n)n / |...| (n the unit
	 * normal), at latitude atan2(|n_xy|, |n_z|), and its southernmost is
	 * -p.  Either is on the minor arc a..b when it is after a and before b
	 * about n: (a x p).n >= 0 and (p x b).n >= 0.
	 */
	horiz = sqrt(n[0] * n[0] + n[1] * n[1]);
	reach = atan2(horiz, fabs(n[2])) * RAD2DEG;
	p[0] = -n[2] * n[0];
	p[1] = -n[2] * n[1];
	p[2] = horiz * horiz;		/* |n|^2 z - (z.n) n, a positive multiple of p */
	{
		double		after_a,
					before_b;

		tdb_geo_cross(a, p, t);
		after_a = tdb_geo_dot(t, n);
		tdb_geo_cross(p, b, t);
		before_b = tdb_geo_dot(t, n);
		if (after_a >= 0 && before_b >= 0)
			*latmax = fmax(*latmax, reach);
		if (after_a <= 0 && before_b <= 0)
			*latmin = fmin(*latmin, -reach);
	}
	return true;
}

/* ---- WKB --------------------------------------------------------------------- */

#define WKB_MAX_DEPTH 32

typedef struct WkbReader
{
	const unsigned char *p;
	const unsigned char *end;
	bool		any;			/* a vertex was seen */
	TdbBox		box;
	bool		empty_part;		/* an empty point, line, polygon or collection was seen */
} WkbReader;

static bool
wkb_u32(WkbReader *r, bool big, uint32_t *out)
{
	const unsigned char *p = r->p;

	if (r->end - p < 4)
		return false;
	*out = big ? ((uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 | (uint32_t) p[2] << 8 | p[3])
		: ((uint32_t) p[3] << 24 | (uint32_t) p[2] << 16 | (uint32_t) p[1] << 8 | p[0]);
	r->p += 4;
	return true;
}

static double
wkb_double_at(const unsigned char *p, bool big)
{
	uint64_t	u = 0;
	double		d;

	for (int i = 0; i < 8; i++)
		u |= (uint64_t) p[big ? 7 - i : i] << (8 * i);
	memcpy(&d, &u, sizeof(d));
	return d;
}

static void
box_add(WkbReader *r, double x, double y)
{
	if (!r->any)
	{
		r->box.xmin = r->box.xmax = x;
		r->box.ymin = r->box.ymax = y;
		r->any = true;
		return;
	}
	r->box.xmin = fmin(r->box.xmin, x);
	r->box.xmax = fmax(r->box.xmax, x);
	r->box.ymin = fmin(r->box.ymin, y);
	r->box.ymax = fmax(r->box.ymax, y);
}

/* What a point array's walker does with vertex i (false: refuse the WKB). */
typedef bool (*WkbVertexFn) (void *arg, uint32_t i, double x, double y);

/*
 * A point array: a count, then that many vertices of ndims doubles each,
 * all finite, each given to fn.
 */
static bool
wkb_point_array(WkbReader *r, bool big, uint32_t ndims, WkbVertexFn fn, void *arg, uint32_t *npoints)
{
	size_t		stride = 8 * (size_t) ndims;

	if (!wkb_u32(r, big, npoints) || (size_t) (r->end - r->p) / stride < *npoints)
		return false;
	for (uint32_t i = 0; i < *npoints; i++, r->p += stride)
	{
		double		x = wkb_double_at(r->p, big);
		double		y = wkb_double_at(r->p + 8, big);

		if (!isfinite(x) || !isfinite(y) || !fn(arg, i, x, y))
			return false;
	}
	return true;
}

/* The box of the vertices, and with edges, of the arcs between consecutive ones. */
typedef struct ArcBoxWalk
{
	WkbReader  *r;
	bool		edges;
	double		px,
				py;
} ArcBoxWalk;

static bool
arc_box_vertex(void *arg, uint32_t i, double x, double y)
{
	ArcBoxWalk *w = arg;

	box_add(w->r, x, y);
	if (w->edges && i > 0)
	{
		double		lo,
					hi;

		if (!tdb_geo_arc_lat_range(w->px, w->py, x, y, &lo, &hi))
			return false;
		w->r->box.ymin = fmin(w->r->box.ymin, lo);
		w->r->box.ymax = fmax(w->r->box.ymax, hi);
	}
	w->px = x;
	w->py = y;
	return true;
}

/* npoints vertices; edges between consecutive ones when edges (a line or a ring). */
static bool
wkb_points(WkbReader *r, bool big, uint32_t ndims, bool edges)
{
	ArcBoxWalk	w = {r, edges, 0, 0};
	uint32_t	n;

	if (!wkb_point_array(r, big, ndims, arc_box_vertex, &w, &n))
		return false;
	r->empty_part |= n == 0;
	return true;
}

/*
 * A geometry's header: byte order, type (1 point .. 7 collection) and the
 * doubles per vertex.  Extended WKB keeps Z, M and SRID flags in the high
 * bits; ISO WKB adds 1000, 2000 or 3000 to the type.
 */
static bool
wkb_header(WkbReader *r, bool *big, uint32_t *type, uint32_t *ndims)
{
	if (r->p >= r->end || *r->p > 1)
		return false;
	*big = *r->p++ == 0;
	*ndims = 2;
	if (!wkb_u32(r, *big, type))
		return false;
	if (*type & 0x80000000u)
		(*ndims)++;
	if (*type & 0x40000000u)
		(*ndims)++;
	if (*type & 0x20000000u)
	{
		uint32_t	srid;

		if (!wkb_u32(r, *big, &srid))
			return false;
	}
	*type &= 0x0fffffffu;
	if (*type >= 1000)
	{
		if (*type >= 4000 || *ndims != 2)
			return false;
		*ndims += *type / 1000 == 3 ? 2 : 1;
		*type %= 1000;
	}
	return true;
}

static bool
wkb_geometry(WkbReader *r, int depth)
{
	uint32_t	type,
				ndims,
				n;
	bool		big;

	if (depth > WKB_MAX_DEPTH || !wkb_header(r, &big, &type, &ndims))
		return false;
	switch (type)
	{
		case 1:					/* point; NaN coordinates: POINT EMPTY */
			{
				double		x,
							y;

				if ((size_t) (r->end - r->p) < 8 * (size_t) ndims)
					return false;
				x = wkb_double_at(r->p, big);
				y = wkb_double_at(r->p + 8, big);
				r->p += 8 * (size_t) ndims;
				if (isnan(x) && isnan(y))
				{
					r->empty_part = true;
					return true;
				}
				if (!isfinite(x) || !isfinite(y))
					return false;
				box_add(r, x, y);
				return true;
			}
		case 2:					/* line */
			return wkb_points(r, big, ndims, true);
		case 3:					/* polygon: rings */
			if (!wkb_u32(r, big, &n))
				return false;
			r->empty_part |= n == 0;
			for (uint32_t i = 0; i < n; i++)
				if (!wkb_points(r, big, ndims, true))
					return false;
			return true;
		case 4:					/* multipoint, multiline, multipolygon, collection */
		case 5:
		case 6:
		case 7:
			if (!wkb_u32(r, big, &n))
				return false;
			r->empty_part |= n == 0;
			for (uint32_t i = 0; i < n; i++)
				if (!wkb_geometry(r, depth + 1))
					return false;
			return true;
		default:
			return false;
	}
}

int
tdb_geo_wkb_arc_box(const unsigned char *wkb, size_t len, TdbBox *box)
{
	WkbReader	r;

	r.p = wkb;
	r.end = wkb + len;
	r.any = false;
	r.empty_part = false;
	if (!wkb_geometry(&r, 0) || r.p != r.end)
		return -1;
	if (!r.any)
		return 0;
	/* an empty part beside others: PostGIS raises an error on every row (prune nothing) */
	if (r.empty_part)
		return -1;
	*box = r.box;
	return 1;
}

/* Vertices copied into xy (when not NULL) from index base on. */
typedef struct ShapeWalk
{
	double	   *xy;
	uint32_t	base;
} ShapeWalk;

static bool
shape_vertex(void *arg, uint32_t i, double x, double y)
{
	ShapeWalk  *w = arg;

	if (w->xy != NULL)
	{
		w->xy[2 * (size_t) (w->base + i)] = x;
		w->xy[2 * (size_t) (w->base + i) + 1] = y;
	}
	return true;
}

/* One ring or line's vertices after the *n already read; *n grows by their count. */
static bool
wkb_shape_points(WkbReader *r, bool big, uint32_t ndims, double *xy, uint32_t *n)
{
	ShapeWalk	w = {xy, *n};
	uint32_t	count;

	/* (a count over what the data holds is refused before any vertex) */
	if (!wkb_point_array(r, big, ndims, shape_vertex, &w, &count) || count > UINT32_MAX / 2 - *n)
		return false;
	*n += count;
	return true;
}

int
tdb_geo_wkb_shape(const unsigned char *wkb, size_t len, double *xy, uint32_t *npoints,
				  uint32_t *ring_end, uint32_t *nrings)
{
	WkbReader	r = {wkb, wkb + len, false, {0, 0, 0, 0}, false};
	uint32_t	type,
				ndims,
				n = 0,
				rings = 0;
	bool		big;

	if (!wkb_header(&r, &big, &type, &ndims))
		return -1;
	if (type == 2)
	{
		if (!wkb_shape_points(&r, big, ndims, xy, &n))
			return -1;
	}
	else if (type == 3)
	{
		if (!wkb_u32(&r, big, &rings))
			return -1;
		for (uint32_t i = 0; i < rings; i++)
		{
			uint32_t	before = n;

			if (!wkb_shape_points(&r, big, ndims, xy, &n))
				return -1;
			if (n - before < 4)
				return 0;		/* not a closed ring PostGIS would accept */
			if (ring_end != NULL)
				ring_end[i] = n;
		}
	}
	else
		return 0;
	if (r.p != r.end)
		return -1;
	*npoints = n;
	*nrings = rings;
	return n == 0 ? 0 : (int) type;
}
