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

static void
unit_vector(double lon, double lat, double v[3])
{
	double		phi = lat * DEG2RAD;
	double		lambda = lon * DEG2RAD;

	v[0] = cos(phi) * cos(lambda);
	v[1] = cos(phi) * sin(lambda);
	v[2] = sin(phi);
}

static void
cross(const double a[3], const double b[3], double out[3])
{
	out[0] = a[1] * b[2] - a[2] * b[1];
	out[1] = a[2] * b[0] - a[0] * b[2];
	out[2] = a[0] * b[1] - a[1] * b[0];
}

static double
dot(const double a[3], const double b[3])
{
	return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

/*
 * Arcs shorter than this (radians, 6 micrometres) are taken as their ends:
 * their normal's direction is mostly rounding, and they bulge by nothing.
 */
#define ARC_TINY 1e-12

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
	unit_vector(lon1, lat1, a);
	unit_vector(lon2, lat2, b);
	cross(a, b, n);
	nlen = sqrt(dot(n, n));
	if (nlen < ARC_TINY)
		return dot(a, b) > 0;	/* the same point; antipodes have no minor arc */

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

		cross(a, p, t);
		after_a = dot(t, n);
		cross(p, b, t);
		before_b = dot(t, n);
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

	return wkb_point_array(r, big, ndims, arc_box_vertex, &w, &n);
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
					return true;
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
	if (!wkb_geometry(&r, 0) || r.p != r.end)
		return -1;
	if (!r.any)
		return 0;
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
	WkbReader	r = {wkb, wkb + len, false, {0, 0, 0, 0}};
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

/* ---- shapes on the unit sphere ------------------------------------------------- */

/* Angle between unit vectors a and b, accurate at any size. */
static double
angle_between(const double a[3], const double b[3])
{
	double		c[3];

	cross(a, b, c);
	return atan2(sqrt(dot(c, c)), dot(a, b));
}

/*
 * Distances on the unit sphere are compared as keys: the squared chord,
 * 2 - 2 cos(angle), which grows with the angle and costs no arc function;
 * key_angle turns the least of them into an angle once.
 */
static inline double
chord2(const double a[3], const double b[3])
{
	double		x = a[0] - b[0],
				y = a[1] - b[1],
				z = a[2] - b[2];

	return x * x + y * y + z * z;
}

static inline double
key_angle(double key)
{
	return isinf(key) ? INFINITY : 2.0 * asin(fmin(1.0, sqrt(key) / 2.0));
}

static inline double
angle_key(double angle)
{
	double		h = sin(fmin(angle, M_PI) / 2.0);

	return 4.0 * h * h;
}

/*
 * Key of the angle from p to the minor arc a-b: to the arc's great circle
 * when p's projection on it lies between a and b (about their normal),
 * else to the nearer end.  To the circle, sin = |p.n| / |n| and cos =
 * |projection|, and 2 - 2 cos = 2 sin^2 / (1 + cos) keeps small angles.
 */
static double
point_arc(const double p[3], const double a[3], const double b[3])
{
	double		n[3],
				t[3],
				q[3];
	double		nn,
				s;

	cross(a, b, n);
	nn = dot(n, n);
	if (nn > ARC_TINY * ARC_TINY)
	{
		s = dot(p, n);
		for (int k = 0; k < 3; k++)
			q[k] = p[k] - s * n[k] / nn;
		cross(a, q, t);
		if (dot(t, n) >= 0)
		{
			cross(q, b, t);
			if (dot(t, n) >= 0 && dot(q, q) > 0)
			{
				double		sn2 = s * s / nn;

				return 2.0 * sn2 / (1.0 + sqrt(dot(q, q)));
			}
		}
	}
	return fmin(chord2(p, a), chord2(p, b));
}

/*
 * Whether the minor arcs a-b and c-d cross at a point inside both: each
 * straddles the other's great circle, and the crossing on a-b (the one of
 * the two circles' common points nearer a-b's middle) is also on c-d.
 * Touching is not crossing: the distance of the ends is then ~0 anyway.
 */
static bool
arcs_cross(const double a[3], const double b[3], const double c[3], const double d[3])
{
	double		n1[3],
				n2[3],
				x[3],
				m1[3],
				m2[3];
	double		s1,
				s2,
				s3,
				s4;

	cross(a, b, n1);
	cross(c, d, n2);
	s1 = dot(n1, c);
	s2 = dot(n1, d);
	s3 = dot(n2, a);
	s4 = dot(n2, b);
	if (!((s1 > 0 && s2 < 0) || (s1 < 0 && s2 > 0)) || !((s3 > 0 && s4 < 0) || (s3 < 0 && s4 > 0)))
		return false;
	cross(n1, n2, x);
	for (int k = 0; k < 3; k++)
	{
		m1[k] = a[k] + b[k];
		m2[k] = c[k] + d[k];
	}
	if (dot(x, m1) < 0)
		for (int k = 0; k < 3; k++)
			x[k] = -x[k];
	return dot(x, m2) > 0;
}

/* Key of the angle between minor arcs a-b and c-d: 0 if they cross, else from an end of one to the other. */
static double
arc_arc(const double a[3], const double b[3], const double c[3], const double d[3])
{
	double		best;

	if (arcs_cross(a, b, c, d))
		return 0.0;
	best = fmin(point_arc(a, c, d), point_arc(b, c, d));
	best = fmin(best, point_arc(c, a, b));
	return fmin(best, point_arc(d, a, b));
}

/* t (radians) in [lo, hi] (a part of [0, pi)) once brought into [0, 2 pi). */
static inline bool
angle_in(double t, double lo, double hi)
{
	t = fmod(t, 2.0 * M_PI);
	if (t < 0)
		t += 2.0 * M_PI;
	return t >= lo && t <= hi;
}

/*
 * Narrow [lo, hi] to where f(t) = (a.e) cos t + (c.e) sin t >= 0 on the
 * arc a cos t + c sin t, t in [0, theta] (theta < pi): a sinusoid, >= 0 on
 * half its period, so on [0, theta] that set is one interval whose ends are
 * 0, theta or the sinusoid's root between them.  false: nothing left.
 */
static bool
clip_half(const double a[3], const double c[3], double theta, const double e[3], double *lo, double *hi)
{
	double		ae = dot(a, e),
				ce = dot(c, e);
	double		f0 = ae,
				f1 = ae * cos(theta) + ce * sin(theta);
	double		r;

	if (f0 >= 0 && f1 >= 0)
		return *lo <= *hi;
	if (f0 < 0 && f1 < 0)
		return false;
	r = fmod(atan2(-ae, ce), 2.0 * M_PI);
	if (r < 0)
		r += 2.0 * M_PI;
	if (r > theta)
		r = r >= M_PI ? r - M_PI : theta;
	if (r > theta)
		r = theta;
	if (f0 >= 0)
		*hi = fmin(*hi, r);
	else
		*lo = fmax(*lo, r);
	return *lo <= *hi;
}

/*
 * The latitude gap (radians) from the part of arc a-b whose longitudes lie
 * within [lon1, lon2] (at most 90 degrees apart; e1 and e2 the normals of
 * their meridian planes, facing inward) to the latitudes [p1, p2]
 * (radians): from there the box's nearest point is straight north or
 * south.  +infinity when no part of the arc is within those longitudes.
 */
static double
arc_lat_gap(const double a[3], const double b[3], const double e1[3], const double e2[3], double p1, double p2)
{
	double		ab = dot(a, b),
				c[3],
				cl,
				theta = 0,
				lo = 0,
				hi,
				za,
				zb,
				zmax,
				zmin,
				tz,
				rz,
				latmax,
				latmin;

	for (int k = 0; k < 3; k++)
		c[k] = b[k] - ab * a[k];
	cl = sqrt(dot(c, c));
	if (cl < ARC_TINY)
		c[0] = c[1] = c[2] = 0;	/* a point: theta 0 */
	else
	{
		for (int k = 0; k < 3; k++)
			c[k] /= cl;
		theta = atan2(cl, ab);
	}
	hi = theta;
	if (!clip_half(a, c, theta, e1, &lo, &hi) || !clip_half(a, c, theta, e2, &lo, &hi))
		return INFINITY;
	za = a[2] * cos(lo) + c[2] * sin(lo);
	zb = a[2] * cos(hi) + c[2] * sin(hi);
	zmax = fmax(za, zb);
	zmin = fmin(za, zb);
	tz = atan2(c[2], a[2]);
	rz = sqrt(a[2] * a[2] + c[2] * c[2]);
	if (angle_in(tz, lo, hi))
		zmax = rz;
	if (angle_in(tz + M_PI, lo, hi))
		zmin = -rz;
	latmax = asin(fmin(1.0, zmax));
	latmin = asin(fmax(-1.0, zmin));
	if (latmax < p1)
		return p1 - latmax;
	if (latmin > p2)
		return latmin - p2;
	return 0.0;
}

/*
 * Angle from the minor arc a-b to the lon/lat box (degrees).  A point of
 * the arc within the box's longitudes is nearest the box straight north or
 * south of it; a point outside them is nearest the box on the nearer of
 * its two meridian edges (see tdb_knn_angle_to_box), and no nearer any
 * meridian edge than the box.  So the angle is the least of the latitude
 * gap of the arc's part within the longitudes and the arc's angles to the
 * two meridian edges (great-circle arcs themselves).  Boxes wider than 90
 * degrees either way are halved first (tdb_sph_shape_box_angle).
 */
typedef struct SphBox
{
	double		m1a[3],			/* the meridian edges' ends */
				m1b[3],
				m2a[3],
				m2b[3];
	double		e1[3],			/* the meridian planes' inward normals */
				e2[3];
	double		p1,				/* latitudes, radians */
				p2;
	double		best;
} SphBox;

/* A box (degrees, at most 90 each way) made ready for arc_box. */
static void
sph_box_prepare(SphBox *x, double lon1, double lat1, double lon2, double lat2)
{
	double		l1 = lon1 * DEG2RAD,
				l2 = lon2 * DEG2RAD;

	unit_vector(lon1, lat1, x->m1a);
	unit_vector(lon1, lat2, x->m1b);
	unit_vector(lon2, lat1, x->m2a);
	unit_vector(lon2, lat2, x->m2b);
	x->e1[0] = -sin(l1);
	x->e1[1] = cos(l1);
	x->e1[2] = 0;
	x->e2[0] = sin(l2);
	x->e2[1] = -cos(l2);
	x->e2[2] = 0;
	x->p1 = lat1 * DEG2RAD;
	x->p2 = lat2 * DEG2RAD;
}

/* Key of the angle from arc a-b to the prepared box. */
static double
arc_box(const double a[3], const double b[3], const SphBox *x)
{
	double		d = fmin(arc_arc(a, b, x->m1a, x->m1b), arc_arc(a, b, x->m2a, x->m2b));

	if (d > 0)
		d = fmin(d, angle_key(arc_lat_gap(a, b, x->e1, x->e2, x->p1, x->p2)));
	return d;
}

/* Calls fn on each edge of the shape (a lone point: one zero-length edge); stops when it returns true. */
typedef bool (*SphEdgeFn) (const double *a, const double *b, void *arg);

static bool
sph_edges(const TdbSphShape *s, SphEdgeFn fn, void *arg)
{
	const double *v = s->v;

	if (s->ring_end == NULL)
	{
		if (s->npoints == 1)
			return fn(v, v, arg);
		for (uint32_t i = 1; i < s->npoints; i++)
			if (fn(v + 3 * (i - 1), v + 3 * i, arg))
				return true;
		return false;
	}
	for (uint32_t r = 0, start = 0; r < s->nrings; start = s->ring_end[r], r++)
		for (uint32_t i = start; i < s->ring_end[r]; i++)
		{
			uint32_t	j = i + 1 < s->ring_end[r] ? i + 1 : start;

			if (fn(v + 3 * i, v + 3 * j, arg))
				return true;
		}
	return false;
}

/*
 * Whether p lies inside a ring of the polygon: the parity of the ring's
 * crossings of the minor arc from p to a point outside every ring (vertices
 * on that arc's great circle count on its positive side, so that a crossing
 * at a vertex counts once).
 */
static bool
sph_contains(const TdbSphShape *s, const double p[3])
{
	const double *v = s->v;
	double		n[3],
				lon = atan2(p[1], p[0]) * RAD2DEG,
				lat = asin(fmax(-1.0, fmin(1.0, p[2]))) * RAD2DEG;

	if (s->ring_end == NULL || lon < s->box.xmin || lon > s->box.xmax || lat < s->box.ymin || lat > s->box.ymax)
		return false;
	cross(p, s->outside, n);
	for (uint32_t r = 0, start = 0; r < s->nrings; start = s->ring_end[r], r++)
	{
		bool		odd = false;

		for (uint32_t i = start; i < s->ring_end[r]; i++)
		{
			uint32_t	j = i + 1 < s->ring_end[r] ? i + 1 : start;
			const double *a = v + 3 * i,
					   *b = v + 3 * j;
			double		e[3],
						x[3],
						t[3];

			if ((dot(n, a) >= 0) == (dot(n, b) >= 0))
				continue;
			cross(a, b, e);
			cross(n, e, x);
			if (dot(x, a) + dot(x, b) < 0)
				for (int k = 0; k < 3; k++)
					x[k] = -x[k];
			cross(p, x, t);
			if (dot(t, n) < 0)
				continue;
			cross(x, s->outside, t);
			if (dot(t, n) < 0)
				continue;
			odd = !odd;
		}
		if (odd)
			return true;
	}
	return false;
}

/*
 * The cap around the vertices' mean direction reaching the farthest vertex:
 * under 90 degrees a cap is convex (it holds the minor arcs between its
 * points), so it holds the edges too.
 */
static void
sph_cap(TdbSphShape *s)
{
	double		c[3] = {0, 0, 0},
				len,
				r = 0;

	for (uint32_t i = 0; i < s->npoints; i++)
		for (int k = 0; k < 3; k++)
			c[k] += s->v[3 * i + k];
	len = sqrt(dot(c, c));
	s->cap_r = M_PI;
	s->cap_lon = s->cap_lat = 0;
	if (!(len > 1e-9))
		return;
	for (int k = 0; k < 3; k++)
		c[k] /= len;
	for (uint32_t i = 0; i < s->npoints; i++)
		r = fmax(r, angle_between(c, s->v + 3 * i));
	if (r >= M_PI / 2 * 0.99)
		return;
	s->cap_lon = atan2(c[1], c[0]) * RAD2DEG;
	s->cap_lat = asin(fmax(-1.0, fmin(1.0, c[2]))) * RAD2DEG;
	/* (the centre's degrees round: a micrometre more) */
	s->cap_r = r * (1 + 1e-12) + 1e-12;
}

bool
tdb_sph_shape_init(TdbSphShape *s, const double *lonlat, uint32_t npoints,
				   const uint32_t *ring_end, uint32_t nrings, double *v)
{
	if (npoints == 0 || lonlat == NULL || v == NULL || (ring_end != NULL && nrings == 0))
		return false;
	s->v = v;
	s->npoints = npoints;
	s->ring_end = ring_end;
	s->nrings = ring_end ? nrings : 0;
	s->box.xmin = s->box.ymin = INFINITY;
	s->box.xmax = s->box.ymax = -INFINITY;
	for (uint32_t i = 0; i < npoints; i++)
	{
		double		x = lonlat[2 * i],
					y = lonlat[2 * i + 1];

		if (!(x >= -180.0 && x <= 180.0 && y >= -90.0 && y <= 90.0))
			return false;
		unit_vector(x, y, v + 3 * i);
		s->box.xmin = fmin(s->box.xmin, x);
		s->box.xmax = fmax(s->box.xmax, x);
		s->box.ymin = fmin(s->box.ymin, y);
		s->box.ymax = fmax(s->box.ymax, y);
		if (i > 0 && angle_between(v + 3 * (i - 1), v + 3 * i) >= 179.0 * DEG2RAD)
			return false;
	}
	sph_cap(s);
	if (ring_end == NULL)
		return true;
	for (uint32_t r = 0, prev = 0; r < nrings; prev = ring_end[r], r++)
		if (ring_end[r] <= prev || ring_end[r] > npoints || (r == nrings - 1 && ring_end[r] != npoints))
			return false;
	if (s->box.xmax - s->box.xmin >= 60.0)
		return false;
	for (uint32_t r = 0, start = 0; r < nrings; start = ring_end[r], r++)
		for (uint32_t i = start; i < ring_end[r]; i++)
		{
			uint32_t	j = i + 1 < ring_end[r] ? i + 1 : start;
			double		lo,
						hi;

			if (!tdb_geo_arc_lat_range(lonlat[2 * i], lonlat[2 * i + 1], lonlat[2 * j], lonlat[2 * j + 1], &lo, &hi))
				return false;
			s->box.ymin = fmin(s->box.ymin, lo);
			s->box.ymax = fmax(s->box.ymax, hi);
		}
	if (s->box.ymin <= -80.0 || s->box.ymax >= 80.0)
		return false;
	/* the rings stay in their box (their edges' longitudes between their ends'): go out of it */
	unit_vector(s->box.xmin - 1.0, s->box.ymin - 1.0, s->outside);
	return true;
}

static bool
sph_box_edge(const double *a, const double *b, void *arg)
{
	SphBox	   *x = arg;

	x->best = fmin(x->best, arc_box(a, b, x));
	return x->best == 0.0;
}

double
tdb_sph_shape_box_angle(const TdbSphShape *s, double xmin, double ymin, double xmax, double ymax)
{
	SphBox		x;
	double		c[3];

	/* halves until at most 90 degrees each way (arc_box's wedges) */
	if (xmax - xmin > 90.0)
	{
		double		mid = (xmin + xmax) / 2.0;

		return fmin(tdb_sph_shape_box_angle(s, xmin, ymin, mid, ymax),
					tdb_sph_shape_box_angle(s, mid, ymin, xmax, ymax));
	}
	if (ymax - ymin > 90.0)
	{
		double		mid = (ymin + ymax) / 2.0;

		return fmin(tdb_sph_shape_box_angle(s, xmin, ymin, xmax, mid),
					tdb_sph_shape_box_angle(s, xmin, mid, xmax, ymax));
	}
	sph_box_prepare(&x, xmin, ymin, xmax, ymax);
	x.best = INFINITY;
	if (sph_edges(s, sph_box_edge, &x))
		return 0.0;
	/* no edge reaches the box: it is all inside a ring or all outside */
	if (s->ring_end != NULL)
	{
		unit_vector(xmin, ymin, c);
		if (sph_contains(s, c))
			return 0.0;
	}
	return key_angle(x.best);
}

typedef struct SphArc
{
	const double *a;
	const double *b;
	double		best;
} SphArc;

static bool
sph_arc_edge(const double *a, const double *b, void *arg)
{
	SphArc	   *x = arg;

	x->best = fmin(x->best, arc_arc(a, b, x->a, x->b));
	return x->best == 0.0;
}

double
tdb_sph_shape_polyline_angle(const TdbSphShape *s, const double *lonlat, uint32_t n)
{
	double		p[2][3];
	SphArc		x = {NULL, NULL, INFINITY};

	if (n == 0)
		return INFINITY;
	unit_vector(lonlat[0], lonlat[1], p[0]);
	if (s->ring_end != NULL && sph_contains(s, p[0]))
		return 0.0;
	if (n == 1)
	{
		x.a = x.b = p[0];
		sph_edges(s, sph_arc_edge, &x);
		return key_angle(x.best);
	}
	for (uint32_t i = 1; i < n && x.best > 0.0; i++)
	{
		unit_vector(lonlat[2 * i], lonlat[2 * i + 1], p[i & 1]);
		x.a = p[(i - 1) & 1];
		x.b = p[i & 1];
		sph_edges(s, sph_arc_edge, &x);
	}
	return key_angle(x.best);
}
