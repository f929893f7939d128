/*
 * geo_sphere.c
 *	  Lines and polygons on the unit sphere, as PostGIS's geography has them
 *	  (edges are minor great-circle arcs): the angle from one to a lon/lat
 *	  box and to a polyline, the lower bounds of geography <-> from a line or
 *	  a polygon (knn.h); see geo.h.
 */
#include "geo.h"

#include <math.h>
#include <stdint.h>

#define DEG2RAD (M_PI / 180.0)
#define RAD2DEG (180.0 / M_PI)

/* ---- shapes on the unit sphere ------------------------------------------------- */

/* Angle between unit vectors a and b, accurate at any size. */
static double
angle_between(const double a[3], const double b[3])
{
	double		c[3];

	tdb_geo_cross(a, b, c);
	return atan2(sqrt(tdb_geo_dot(c, c)), tdb_geo_dot(a, b));
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

	tdb_geo_cross(a, b, n);
	nn = tdb_geo_dot(n, n);
	if (nn > TDB_GEO_ARC_TINY * TDB_GEO_ARC_TINY)
	{
		s = tdb_geo_dot(p, n);
		for (int k = 0; k < 3; k++)
			q[k] = p[k] - s * n[k] / nn;
		tdb_geo_cross(a, q, t);
		if (tdb_geo_dot(t, n) >= 0)
		{
			tdb_geo_cross(q, b, t);
			if (tdb_geo_dot(t, n) >= 0 && tdb_geo_dot(q, q) > 0)
			{
				double		sn2 = s * s / nn;

				return 2.0 * sn2 / (1.0 + sqrt(tdb_geo_dot(q, q)));
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

	tdb_geo_cross(a, b, n1);
	tdb_geo_cross(c, d, n2);
	s1 = tdb_geo_dot(n1, c);
	s2 = tdb_geo_dot(n1, d);
	s3 = tdb_geo_dot(n2, a);
	s4 = tdb_geo_dot(n2, b);
	if (!((s1 > 0 && s2 < 0) || (s1 < 0 && s2 > 0)) || !((s3 > 0 && s4 < 0) || (s3 < 0 && s4 > 0)))
		return false;
	tdb_geo_cross(n1, n2, x);
	for (int k = 0; k < 3; k++)
	{
		m1[k] = a[k] + b[k];
		m2[k] = c[k] + d[k];
	}
	if (tdb_geo_dot(x, m1) < 0)
		for (int k = 0; k < 3; k++)
			x[k] = -x[k];
	return tdb_geo_dot(x, m2) > 0;
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
	double		ae = tdb_geo_dot(a, e),
				ce = tdb_geo_dot(c, e);
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
	double		ab = tdb_geo_dot(a, b),
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
	cl = sqrt(tdb_geo_dot(c, c));
	if (cl < TDB_GEO_ARC_TINY)
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

/* The unit vector of a point from its longitude's and latitude's cosine and sine (as tdb_geo_unit_vector). */
static inline void
corner_vector(double v[3], double cl, double sl, double cp, double sp)
{
	v[0] = cp * cl;
	v[1] = cp * sl;
	v[2] = sp;
}

/* A box (degrees, at most 90 each way) made ready for arc_box. */
static void
sph_box_prepare(SphBox *x, double lon1, double lat1, double lon2, double lat2)
{
	/* the four corners' vectors as tdb_geo_unit_vector makes them, from four sines and cosines */
	double		sl1 = sin(lon1 * DEG2RAD),
				cl1 = cos(lon1 * DEG2RAD),
				sl2 = sin(lon2 * DEG2RAD),
				cl2 = cos(lon2 * DEG2RAD),
				sp1 = sin(lat1 * DEG2RAD),
				cp1 = cos(lat1 * DEG2RAD),
				sp2 = sin(lat2 * DEG2RAD),
				cp2 = cos(lat2 * DEG2RAD);

	corner_vector(x->m1a, cl1, sl1, cp1, sp1);
	corner_vector(x->m1b, cl1, sl1, cp2, sp2);
	corner_vector(x->m2a, cl2, sl2, cp1, sp1);
	corner_vector(x->m2b, cl2, sl2, cp2, sp2);
	x->e1[0] = -sl1;
	x->e1[1] = cl1;
	x->e1[2] = 0;
	x->e2[0] = sl2;
	x->e2[1] = -cl2;
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
	tdb_geo_cross(p, s->outside, n);
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

			if ((tdb_geo_dot(n, a) >= 0) == (tdb_geo_dot(n, b) >= 0))
				continue;
			tdb_geo_cross(a, b, e);
			tdb_geo_cross(n, e, x);
			if (tdb_geo_dot(x, a) + tdb_geo_dot(x, b) < 0)
				for (int k = 0; k < 3; k++)
					x[k] = -x[k];
			tdb_geo_cross(p, x, t);
			if (tdb_geo_dot(t, n) < 0)
				continue;
			tdb_geo_cross(x, s->outside, t);
			if (tdb_geo_dot(t, n) < 0)
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
	len = sqrt(tdb_geo_dot(c, c));
	s->cap_r = M_PI;
	s->cap_lon = s->cap_lat = 0;
	s->cap_coslat = 1;
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
	s->cap_coslat = cos(s->cap_lat * DEG2RAD);
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
		tdb_geo_unit_vector(x, y, v + 3 * i);
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
	tdb_geo_unit_vector(s->box.xmin - 1.0, s->box.ymin - 1.0, s->outside);
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
		tdb_geo_unit_vector(xmin, ymin, c);
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
	tdb_geo_unit_vector(lonlat[0], lonlat[1], p[0]);
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
		tdb_geo_unit_vector(lonlat[2 * i], lonlat[2 * i + 1], p[i & 1]);
		x.a = p[(i - 1) & 1];
		x.b = p[i & 1];
		sph_edges(s, sph_arc_edge, &x);
	}
	return key_angle(x.best);
}
