/*
 * mvt_geom.c
 *	  ST_AsMVTGeom for one road, restated: Web Mercator, the half-pixel
 *	  shortcut, the affine map to tile space, the integer snap, the removal
 *	  of points on straight lines, the rectangle clip and the second snap;
 *	  then the MVT geometry commands.
 *
 * Every expression below is evaluated as PostGIS 3.3 (with PROJ 9 and
 * GEOS 3.11) evaluates it, in the same order, so that the doubles and
 * therefore the rounded integers are the same: docs/design-tiles.md
 * section 1 gives each rule and where it lives in their sources.  This
 * file must be compiled without floating-point contraction (the Makefile
 * passes -ffp-contract=off): a fused multiply-add rounds once where
 * PostGIS rounds twice.
 */
#include "tile/mvt.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "rtree.h"

#define MERC_A 6378137.0
#define DEG_TO_RAD 0.017453292519943296 /* PROJ's factor of unit "deg" */

void
tdb_mvt_project(double lon, double lat, double *x, double *y)
{
	double		lam = lon * DEG_TO_RAD;
	double		phi = lat * DEG_TO_RAD;

	/* PROJ clamps a latitude a rounding beyond a pole to the pole */
	if (fabs(phi) > M_PI_2)
		phi = phi < 0 ? -M_PI_2 : M_PI_2;
	/* webmerc: k0 = 1, x0 = 0, fr_meter = 1: x = a * lam, y = a * asinh(tan(phi)) */
	*x = 1.0 * (MERC_A * (1.0 * lam) + 0.0);
	*y = 1.0 * (MERC_A * (1.0 * asinh(tan(phi))) + 0.0);
}

static double
inverse_lat(double y)
{
	return atan(sinh(y / MERC_A)) * (180.0 / M_PI);
}

void
tdb_mvt_tile_init(TdbMvtTile *t, uint32_t z, uint32_t x, uint32_t y, uint32_t extent, uint32_t buffer)
{
	const double wmin = -TDB_MVT_WORLD;
	const double wmax = TDB_MVT_WORLD;
	int32_t		side = (int32_t) (UINT32_C(1) << z);
	double		size = (wmax - wmin) / side;	/* ST_TileEnvelope: boundsWidth / worldTileSize */
	double		width;
	double		height;
	double		px;
	double		mx;
	double		xlo;
	double		xhi;
	double		ylo;
	double		yhi;

	memset(t, 0, sizeof(*t));
	t->z = z;
	t->x = x;
	t->y = y;
	t->extent = extent;
	t->buffer = buffer;
	/* margin 0: (x - 0.0), (x + 1 + 0.0) with x + 1 in integers */
	t->xmin = wmin + size * ((double) x - 0.0);
	t->xmax = wmin + size * ((double) ((int64_t) x + 1) + 0.0);
	t->ymin = wmax - size * ((double) ((int64_t) y + 1) + 0.0);
	t->ymax = wmax - size * ((double) y - 0.0);
	if (t->ymin < wmin)
		t->ymin = wmin;
	if (t->ymax > wmax)
		t->ymax = wmax;

	width = t->xmax - t->xmin;
	height = t->ymax - t->ymin;
	t->fx = (double) extent / width;
	t->fy = -((double) extent / height);
	t->xoff = -t->xmin * t->fx;
	t->yoff = -t->ymax * t->fy;
	t->half_w = (width / (double) extent) / 2.0;
	t->half_h = (height / (double) extent) / 2.0;
	t->clip_lo = -(double) buffer;
	t->clip_hi = (double) extent + (double) buffer;

	/*
	 * Candidates: the buffered tile plus a pixel (the snap moves a point by
	 * up to half of one), back in degrees and widened; rows at the top and
	 * bottom of the grid reach the poles, as PostGIS does not clamp
	 * latitudes to the Mercator limit.  A superset is harmless: the
	 * pipeline decides.
	 */
	px = size / (double) extent;
	mx = ((double) buffer + 1.0) * px;
	xlo = (t->xmin - mx) / MERC_A * (180.0 / M_PI) - 1e-6;
	xhi = (t->xmax + mx) / MERC_A * (180.0 / M_PI) + 1e-6;
	ylo = inverse_lat(t->ymin - mx) - 1e-6;
	yhi = inverse_lat(t->ymax + mx) + 1e-6;
	if (y == 0)
		yhi = 90.0;
	if ((int64_t) y == (int64_t) side - 1)
		ylo = -90.0;
	t->lonlat.xmin = fmax(xlo, -180.0);
	t->lonlat.xmax = fmin(xhi, 180.0);
	t->lonlat.ymin = fmax(ylo, -90.0);
	t->lonlat.ymax = fmin(yhi, 90.0);
}

/* ---- scratch ------------------------------------------------------------ */

void
tdb_mvt_scratch_free(TdbMvtScratch *s)
{
	tdb_mvt_release(s->alloc, s->xy);
	tdb_mvt_release(s->alloc, s->clip);
	tdb_mvt_release(s->alloc, s->parts);
	tdb_mvt_release(s->alloc, s->cmd);
	s->xy = s->clip = NULL;
	s->parts = s->cmd = NULL;
	s->xy_cap = s->clip_cap = s->parts_cap = s->cmd_cap = 0;
}

/* ---- the half-pixel shortcut -------------------------------------------- */

/*
 * PostGIS reads the serialized box: the exact box of the projected points,
 * rounded outward to floats (next_float_down/up, as tdb_boxf_from_boxd),
 * and returns NULL when it is narrower AND lower than half a pixel.
 */
static bool
too_small(const TdbMvtTile *t, double xmin, double ymin, double xmax, double ymax)
{
	TdbBox		b = {xmin, ymin, xmax, ymax};
	TdbBoxF		f = tdb_boxf_from_boxd(&b);
	double		w = (double) f.xmax - (double) f.xmin;
	double		h = (double) f.ymax - (double) f.ymin;

	return w < t->half_w && h < t->half_h;
}

bool
tdb_mvt_box_too_small(const TdbMvtTile *t, const TdbBoxF *b)
{
	double		x0,
				y0,
				x1,
				y1;
	TdbBox		p;
	TdbBoxF		f;

	tdb_mvt_project(b->xmin, b->ymin, &x0, &y0);
	tdb_mvt_project(b->xmax, b->ymax, &x1, &y1);
	p.xmin = x0;
	p.ymin = y0;
	p.xmax = x1;
	p.ymax = y1;
	f = tdb_boxf_from_boxd(&p);
	/* a margin for libm's last-bit non-monotonicity: only sure cases */
	return ((double) f.xmax - (double) f.xmin) < t->half_w * (1.0 - 1e-6) &&
		((double) f.ymax - (double) f.ymin) < t->half_h * (1.0 - 1e-6);
}

/* ---- snap and straight lines -------------------------------------------- */

/*
 * ptarray_grid_in_place with size 1: rint (ties to even) and drop a point
 * equal to the last one kept.  Returns the points left.
 */
static uint32_t
snap(double *xy, uint32_t n)
{
	uint32_t	j = 0;

	for (uint32_t i = 0; i < n; i++)
	{
		double		x = rint((xy[2 * i] - 0.0) / 1.0) * 1.0 + 0.0;
		double		y = rint((xy[2 * i + 1] - 0.0) / 1.0) * 1.0 + 0.0;

		if (j > 0 && xy[2 * (j - 1)] == x && xy[2 * (j - 1) + 1] == y)
			continue;
		xy[2 * j] = x;
		xy[2 * j + 1] = y;
		j++;
	}
	return j;
}

/*
 * ptarray_simplify_in_place with tolerance 0: drop a point lying on the
 * segment from the last point kept to the next point, ends included.
 */
static uint32_t
drop_straight(double *xy, uint32_t n)
{
	uint32_t	kept = 0;
	double		kx = xy[0];
	double		ky = xy[1];

	if (n < 3)
		return n;
	for (uint32_t i = 1; i < n - 1; i++)
	{
		double		cx = xy[2 * i];
		double		cy = xy[2 * i + 1];
		double		ba_x = xy[2 * (i + 1)] - kx;
		double		ba_y = xy[2 * (i + 1) + 1] - ky;
		double		ab_length_sqr = ba_x * ba_x + ba_y * ba_y;
		double		ca_x = cx - kx;
		double		ca_y = cy - ky;
		double		dot_ac_ab = ca_x * ba_x + ca_y * ba_y;
		double		s_numerator = ca_x * ba_y - ca_y * ba_x;

		if (dot_ac_ab < 0.0 || dot_ac_ab > ab_length_sqr || s_numerator != 0)
		{
			kept++;
			kx = cx;
			ky = cy;
			xy[2 * kept] = cx;
			xy[2 * kept + 1] = cy;
		}
	}
	kept++;
	xy[2 * kept] = xy[2 * (n - 1)];
	xy[2 * kept + 1] = xy[2 * (n - 1) + 1];
	return kept + 1;
}

/* ---- GEOS's rectangle clip of a linestring ------------------------------ */

enum
{
	POS_INSIDE = 1,
	POS_OUTSIDE = 2,
	POS_LEFT = 4,
	POS_TOP = 8,
	POS_RIGHT = 16,
	POS_BOTTOM = 32
};

static inline int
position(double x, double y, double lo, double hi)
{
	int			pos = 0;

	if (x > lo && x < hi && y > lo && y < hi)
		return POS_INSIDE;
	if (x < lo || x > hi || y < lo || y > hi)
		return POS_OUTSIDE;
	if (x == lo)
		pos |= POS_LEFT;
	else if (x == hi)
		pos |= POS_RIGHT;
	if (y == lo)
		pos |= POS_BOTTOM;
	else if (y == hi)
		pos |= POS_TOP;
	return pos;
}

static inline bool
on_edge(int pos)
{
	return pos > POS_OUTSIDE;
}

static inline bool
on_same_edge(int a, int b)
{
	return on_edge(a & b);
}

static inline bool
different(double x1, double y1, double x2, double y2)
{
	return !(x1 == x2 && y1 == y2);
}

static inline void
clip_one_edge(double *x1, double *y1, double x2, double y2, double limit)
{
	if (x2 == limit)
	{
		*y1 = y2;
		*x1 = x2;
	}
	if (*x1 != x2)
	{
		*y1 += (y2 - *y1) * (limit - *x1) / (x2 - *x1);
		*x1 = limit;
	}
}

/* Move (x1, y1), outside, to the rectangle along the segment to (x2, y2). */
static inline void
clip_to_edges(double *x1, double *y1, double x2, double y2, double lo, double hi)
{
	if (*x1 < lo)
		clip_one_edge(x1, y1, x2, y2, lo);
	else if (*x1 > hi)
		clip_one_edge(x1, y1, x2, y2, hi);
	if (*y1 < lo)
		clip_one_edge(y1, x1, y2, x2, lo);
	else if (*y1 > hi)
		clip_one_edge(y1, x1, y2, x2, hi);
}

typedef struct ClipOut
{
	TdbMvtScratch *s;
	size_t		npts;			/* points written to s->clip */
	size_t		nparts;
	bool		oom;
} ClipOut;

static void
part_begin(ClipOut *o)
{
	if (!tdb_mvt_grow(o->s->alloc, (void **) &o->s->parts, &o->s->parts_cap, o->nparts + 1, sizeof(uint32_t)))
	{
		o->oom = true;
		return;
	}
	o->s->parts[o->nparts++] = 0;
}

static void
part_point(ClipOut *o, double x, double y)
{
	if (o->oom)
		return;
	if (!tdb_mvt_grow(o->s->alloc, (void **) &o->s->clip, &o->s->clip_cap, 2 * (o->npts + 1), sizeof(double)))
	{
		o->oom = true;
		return;
	}
	o->s->clip[2 * o->npts] = x;
	o->s->clip[2 * o->npts + 1] = y;
	o->npts++;
	o->s->parts[o->nparts - 1]++;
}

/* A part: the entry point (if any), original points [from, to), the exit (if any). */
static void
emit_part(ClipOut *o, const double *cs, bool start, double x0, double y0,
		  int from, int to, bool end, double x1, double y1)
{
	part_begin(o);
	if (o->oom)
		return;
	if (start)
		part_point(o, x0, y0);
	for (int k = from; k < to; k++)
		part_point(o, cs[2 * k], cs[2 * k + 1]);
	if (end)
		part_point(o, x1, y1);
}

/*
 * RectangleIntersection::clip_linestring_parts: walk the line, keeping
 * what is inside or on the rectangle, never travel along an edge.  Returns
 * true if everything is in (no part written).
 */
static bool
clip_walk(const double *cs, int n, double lo, double hi, ClipOut *o)
{
	double		x0 = 0;
	double		y0 = 0;
	bool		add_start = false;
	int			i = 0;

	while (i < n && !o->oom)
	{
		double		x = cs[2 * i];
		double		y = cs[2 * i + 1];
		int			pos = position(x, y, lo, hi);

		if (pos == POS_OUTSIDE)
		{
			++i;
			if (x < lo)
				while (i < n && cs[2 * i] < lo)
					++i;
			else if (x > hi)
				while (i < n && cs[2 * i] > hi)
					++i;
			else if (y < lo)
				while (i < n && cs[2 * i + 1] < lo)
					++i;
			else if (y > hi)
				while (i < n && cs[2 * i + 1] > hi)
					++i;
			if (i >= n)
				return false;

			x = cs[2 * i];
			y = cs[2 * i + 1];
			pos = position(x, y, lo, hi);
			x0 = cs[2 * (i - 1)];
			y0 = cs[2 * (i - 1) + 1];
			clip_to_edges(&x0, &y0, x, y, lo, hi);

			if (pos == POS_INSIDE)
				add_start = true;
			else if (pos == POS_OUTSIDE)
			{
				int			prev_pos;

				clip_to_edges(&x, &y, x0, y0, lo, hi);
				prev_pos = position(x0, y0, lo, hi);
				pos = position(x, y, lo, hi);
				if (different(x0, y0, x, y) && on_edge(prev_pos) && on_edge(pos) &&
					!on_same_edge(prev_pos, pos))
				{
					part_begin(o);
					part_point(o, x0, y0);
					part_point(o, x, y);
				}
			}
			else
			{
				int			newpos = position(x0, y0, lo, hi);

				if (!on_same_edge(pos, newpos))
					add_start = true;
			}
		}
		else
		{
			int			start_index = i;
			bool		go_outside = false;

			while (!go_outside && ++i < n)
			{
				int			prev_pos = pos;

				x = cs[2 * i];
				y = cs[2 * i + 1];
				pos = position(x, y, lo, hi);
				if (pos == POS_INSIDE)
				{
					/* keep going */
				}
				else if (pos == POS_OUTSIDE)
				{
					bool		through_box;

					go_outside = true;
					clip_to_edges(&x, &y, cs[2 * (i - 1)], cs[2 * (i - 1) + 1], lo, hi);
					pos = position(x, y, lo, hi);
					through_box = different(x, y, cs[2 * i], cs[2 * i + 1]) &&
						!on_same_edge(prev_pos, pos);
					if (start_index < i - 1 || add_start || through_box)
					{
						emit_part(o, cs, add_start, x0, y0, start_index, i, through_box, x, y);
						add_start = false;
					}
				}
				else if (on_same_edge(prev_pos, pos))
				{
					if (start_index < i - 1 || add_start)
					{
						emit_part(o, cs, add_start, x0, y0, start_index, i, false, 0, 0);
						add_start = false;
					}
					start_index = i;
				}
			}
			if (start_index == 0 && i >= n)
				return true;
			if (!go_outside && (start_index < i - 1 || add_start))
			{
				emit_part(o, cs, add_start, x0, y0, start_index, i, false, 0, 0);
				add_start = false;
			}
		}
	}
	return false;
}

/* ---- commands ----------------------------------------------------------- */

static inline uint32_t
zigzag32(int32_t v)
{
	return ((uint32_t) v << 1) ^ (uint32_t) (v >> 31);
}

/* Append the commands of one part (n >= 2 snapped points), cursor in (px, py). */
static void
encode_part(TdbMvtScratch *s, const double *p, uint32_t n, int32_t *px, int32_t *py)
{
	uint32_t   *c = s->cmd + s->ncmd;

	c[0] = 1 | (1u << 3);		/* MoveTo(1) */
	c[3] = 2 | ((n - 1) << 3);	/* LineTo(n - 1) */
	for (uint32_t i = 0, o = 1; i < n; i++)
	{
		int32_t		x = (int32_t) p[2 * i];
		int32_t		y = (int32_t) p[2 * i + 1];

		c[o++] = zigzag32((int32_t) ((uint32_t) x - (uint32_t) *px));
		c[o++] = zigzag32((int32_t) ((uint32_t) y - (uint32_t) *py));
		*px = x;
		*py = y;
		if (i == 0)
			o++;				/* room for LineTo */
	}
	s->ncmd += 2 + 2 * n;
}

static bool from_tile_space(const TdbMvtTile *t, uint32_t n, TdbMvtScratch *s, bool *oom);

void
tdb_mvt_project_shape(const double *lonlat, uint32_t n, double *merc)
{
	for (uint32_t i = 0; i < n; i++)
		tdb_mvt_project(lonlat[2 * i], lonlat[2 * i + 1], &merc[2 * i], &merc[2 * i + 1]);
}

bool
tdb_mvt_feature(const TdbMvtTile *t, const double *merc, uint32_t n, TdbMvtScratch *s, bool *oom)
{
	double	   *xy;
	double		bx0 = INFINITY,
				by0 = INFINITY,
				bx1 = -INFINITY,
				by1 = -INFINITY;

	*oom = false;
	s->ncmd = 0;
	if (n < 2)
		return false;
	if (!tdb_mvt_grow(s->alloc, (void **) &s->xy, &s->xy_cap, 2 * (size_t) n, sizeof(double)))
	{
		*oom = true;
		return false;
	}
	xy = s->xy;

	/* the exact box of ST_Transform's result */
	for (uint32_t i = 0; i < n; i++)
	{
		double		X = merc[2 * i];
		double		Y = merc[2 * i + 1];

		bx0 = X < bx0 ? X : bx0;
		bx1 = X > bx1 ? X : bx1;
		by0 = Y < by0 ? Y : by0;
		by1 = Y > by1 ? Y : by1;
	}
	if (too_small(t, bx0, by0, bx1, by1))
		return false;

	/* affine to tile space: x' = a x + b y + xoff, y' = d x + e y + yoff */
	for (uint32_t i = 0; i < n; i++)
	{
		double		X = merc[2 * i];
		double		Y = merc[2 * i + 1];

		xy[2 * i] = t->fx * X + 0.0 * Y + t->xoff;
		xy[2 * i + 1] = 0.0 * X + t->fy * Y + t->yoff;
	}
	return from_tile_space(t, n, s, oom);
}

bool
tdb_mvt_feature_tile_xy(const TdbMvtTile *t, const double *xy, uint32_t n, TdbMvtScratch *s, bool *oom)
{
	*oom = false;
	s->ncmd = 0;
	if (n < 2)
		return false;
	if (!tdb_mvt_grow(s->alloc, (void **) &s->xy, &s->xy_cap, 2 * (size_t) n, sizeof(double)))
	{
		*oom = true;
		return false;
	}
	memcpy(s->xy, xy, 2 * (size_t) n * sizeof(double));
	return from_tile_space(t, n, s, oom);
}

/* Snap, straight lines, clip, snap again, commands: s->xy holds n points in tile space. */
static bool
from_tile_space(const TdbMvtTile *t, uint32_t n, TdbMvtScratch *s, bool *oom)
{
	double	   *xy = s->xy;
	double		bx0,
				by0,
				bx1,
				by1;
	ClipOut		o;
	int32_t		px = 0;
	int32_t		py = 0;
	size_t		need;

	n = snap(xy, n);
	if (n < 2)
		return false;
	n = drop_straight(xy, n);
	if (n == 2 && xy[0] == xy[2] && xy[1] == xy[3])
		return false;

	bx0 = by0 = INFINITY;
	bx1 = by1 = -INFINITY;
	for (uint32_t i = 0; i < n; i++)
	{
		bx0 = xy[2 * i] < bx0 ? xy[2 * i] : bx0;
		bx1 = xy[2 * i] > bx1 ? xy[2 * i] : bx1;
		by0 = xy[2 * i + 1] < by0 ? xy[2 * i + 1] : by0;
		by1 = xy[2 * i + 1] > by1 ? xy[2 * i + 1] : by1;
	}
	/* gbox_overlaps_2d, inclusive */
	if (bx1 < t->clip_lo || by1 < t->clip_lo || bx0 > t->clip_hi || by0 > t->clip_hi)
		return false;

	memset(&o, 0, sizeof(o));
	o.s = s;
	/*
	 * gbox_contains_2d, inclusive: the line as it is, but for the second
	 * snap, which still drops repeated points (A B C B became A B B).
	 */
	if (bx0 >= t->clip_lo && bx1 <= t->clip_hi && by0 >= t->clip_lo && by1 <= t->clip_hi)
	{
		n = snap(xy, n);
		if (n < 2)
			return false;
		if (!tdb_mvt_grow(s->alloc, (void **) &s->cmd, &s->cmd_cap, 2 + 2 * (size_t) n, sizeof(uint32_t)))
		{
			*oom = true;
			return false;
		}
		encode_part(s, xy, n, &px, &py);
		return true;
	}

	if (clip_walk(xy, (int) n, t->clip_lo, t->clip_hi, &o))
	{
		/* everything in: GEOS returns the line itself */
		part_begin(&o);
		for (uint32_t i = 0; i < n && !o.oom; i++)
			part_point(&o, xy[2 * i], xy[2 * i + 1]);
	}
	if (o.oom)
	{
		*oom = true;
		return false;
	}

	/* the second snap; parts left with fewer than 2 points go */
	need = 0;
	{
		size_t		at = 0;
		size_t		kept_parts = 0;
		size_t		w = 0;

		for (size_t k = 0; k < o.nparts; k++)
		{
			uint32_t	len = s->parts[k];
			uint32_t	m = snap(s->clip + 2 * at, len);

			if (m >= 2)
			{
				memmove(s->clip + 2 * w, s->clip + 2 * at, 2 * (size_t) m * sizeof(double));
				s->parts[kept_parts++] = m;
				w += m;
				need += 2 + 2 * (size_t) m;
			}
			at += len;
		}
		o.nparts = kept_parts;
	}
	if (o.nparts == 0)
		return false;
	if (!tdb_mvt_grow(s->alloc, (void **) &s->cmd, &s->cmd_cap, need, sizeof(uint32_t)))
	{
		*oom = true;
		return false;
	}
	{
		size_t		at = 0;

		for (size_t k = 0; k < o.nparts; k++)
		{
			encode_part(s, s->clip + 2 * at, s->parts[k], &px, &py);
			at += s->parts[k];
		}
	}
	return true;
}
