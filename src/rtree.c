/*
 * rtree.c
 *	  The packed R-tree of rtree.h: outward float rounding, Sort-Tile-
 *	  Recursive leaf order, building the upper levels, and box and
 *	  k-nearest-neighbour queries over the implicit layout.
 *
 * Box queries walk the tree with one cursor per level (no allocation, no
 * recursion) and compare in float: for a float f and a double d, f <= d
 * exactly when f <= (the largest float <= d), and f >= d exactly when
 * f >= (the smallest float >= d), so rounding the query box inward once
 * gives the same answer as comparing every box in double.
 *
 * k-nearest search (tdb_rtree_knn) is the first k results of knn.h's
 * incremental best-first scan, and lives in knn.c with it.
 */
#include "rtree.h"

#include "halves.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define F TDB_RTREE_FANOUT

/* ---- outward rounding ---------------------------------------------------- */

/* The largest float <= d (NaN stays NaN). */
static float
float_down(double d)
{
	float		f;

	if (isnan(d) || isinf(d))
		return (float) d;
	if (d > FLT_MAX)
		return FLT_MAX;
	if (d < -FLT_MAX)
		return -INFINITY;
	f = (float) d;
	if ((double) f > d)
		f = nextafterf(f, -INFINITY);
	return f;
}

/* The smallest float >= d (NaN stays NaN). */
static float
float_up(double d)
{
	float		f;

	if (isnan(d) || isinf(d))
		return (float) d;
	if (d < -FLT_MAX)
		return -FLT_MAX;
	if (d > FLT_MAX)
		return INFINITY;
	f = (float) d;
	if ((double) f < d)
		f = nextafterf(f, INFINITY);
	return f;
}

TdbBoxF
tdb_boxf_from_boxd(const TdbBox *b)
{
	TdbBoxF		r;

	r.xmin = float_down(b->xmin);
	r.ymin = float_down(b->ymin);
	r.xmax = float_up(b->xmax);
	r.ymax = float_up(b->ymax);
	return r;
}

/* ---- STR order ----------------------------------------------------------- */

typedef struct StrKey
{
	double		cx;
	double		cy;
	uint32_t	idx;
} StrKey;

/* A total order on doubles (NaN last), so qsort sees a consistent comparator. */
static int
cmp_coord(double a, double b)
{
	if (a < b)
		return -1;
	if (a > b)
		return 1;
	if (isnan(a))
		return isnan(b) ? 0 : 1;
	return isnan(b) ? -1 : 0;
}

static int
cmp_idx(uint32_t a, uint32_t b)
{
	return (a > b) - (a < b);
}

static int
cmp_str_x(const void *pa, const void *pb)
{
	const StrKey *a = pa;
	const StrKey *b = pb;
	int			r = cmp_coord(a->cx, b->cx);

	return r != 0 ? r : cmp_idx(a->idx, b->idx);
}

static int
cmp_str_y(const void *pa, const void *pb)
{
	const StrKey *a = pa;
	const StrKey *b = pb;
	int			r = cmp_coord(a->cy, b->cy);

	return r != 0 ? r : cmp_idx(a->idx, b->idx);
}

/* ---- radix sort for large inputs ---------------------------------------- */

typedef struct RadixKey
{
	uint64_t	key;
	uint32_t	idx;
	uint32_t	pad;
} RadixKey;

#define RADIX_BITS 11
#define RADIX_BUCKETS (1u << RADIX_BITS)
#define RADIX_PASSES ((64 + RADIX_BITS - 1) / RADIX_BITS)
#define RADIX_MIN 2048			/* below this, qsort is as fast */
#define GATHER_AHEAD 16			/* prefetch distance of a random gather */

/*
 * An unsigned integer that sorts as cmp_coord() orders doubles: negative
 * numbers below positive ones, both zeros equal, NaN last.
 */
static inline uint64_t
order_key(double v)
{
	uint64_t	b;

	if (isnan(v))
		return UINT64_MAX;
	if (v == 0.0)
		v = 0.0;
	memcpy(&b, &v, sizeof(b));
	return (b >> 63) ? ~b : b | (1ull << 63);
}

/*
 * Stable LSD radix sort of a[0..n) by key, using tmp[0..n); passes whose
 * digit is the same for every key (common: nearby coordinates share their
 * high bits) are skipped.  The result ends up in a.  Large inputs run in
 * two halves (halves.h): each half counts its own digits, then moves its
 * keys to offsets after the first half's, so the order is the same.
 */
typedef struct RadixPass
{
	RadixKey   *src;
	RadixKey   *dst;
	size_t		n;
	int			shift;
	uint32_t	(*count)[RADIX_BUCKETS];	/* [2], per half: its digit counts (count_half), then its offsets */
} RadixPass;

static void
count_half(void *arg, int half)
{
	RadixPass  *rp = arg;
	uint64_t	lo,
				hi;
	uint32_t   *c = rp->count[half];

	tdb_half_range(rp->n, half, &lo, &hi);
	memset(c, 0, sizeof(rp->count[half]));
	for (uint64_t i = lo; i < hi; i++)
		c[(rp->src[i].key >> rp->shift) & (RADIX_BUCKETS - 1)]++;
}

static void
move_half(void *arg, int half)
{
	RadixPass  *rp = arg;
	uint64_t	lo,
				hi;
	uint32_t   *off = rp->count[half];

	tdb_half_range(rp->n, half, &lo, &hi);
	for (uint64_t i = lo; i < hi; i++)
		rp->dst[off[(rp->src[i].key >> rp->shift) & (RADIX_BUCKETS - 1)]++] = rp->src[i];
}

typedef uint32_t RadixCounts[2][RADIX_BUCKETS];

/*
 * count: the caller's, one per concurrent sort (builders may run in several
 * threads).  The sort allocates nothing: in the second thread of
 * tdb_halves() a malloc would make glibc reserve an arena of 64 MB of
 * address space for the rest of the process.
 */
static void
radix_sort(RadixKey *a, RadixKey *tmp, size_t n, RadixCounts *counts)
{
	uint32_t	(*count)[RADIX_BUCKETS] = *counts;
	RadixPass	rp = {a, tmp, n, 0, count};

	for (int p = 0; p < RADIX_PASSES; p++)
	{
		uint32_t	sum = 0;
		bool		trivial = false;

		rp.shift = p * RADIX_BITS;
		tdb_halves(count_half, &rp, n);
		for (uint32_t d = 0; d < RADIX_BUCKETS; d++)
		{
			uint32_t	c0 = count[0][d];
			uint32_t	c1 = count[1][d];

			if (c0 + c1 == n)
				trivial = true;
			count[0][d] = sum;
			count[1][d] = sum + c0;
			sum += c0 + c1;
		}
		if (trivial)
			continue;
		tdb_halves(move_half, &rp, n);
		{
			RadixKey   *t = rp.src;

			rp.src = rp.dst;
			rp.dst = t;
		}
	}
	if (rp.src != a)
		memcpy(a, rp.src, n * sizeof(RadixKey));
}

static int
cmp_radix_idx(const void *pa, const void *pb)
{
	return cmp_idx(((const RadixKey *) pa)->idx, ((const RadixKey *) pb)->idx);
}

/* Within runs of equal keys, order by index (the tie rule of the qsort path). */
static void
ties_by_index(RadixKey *a, size_t n)
{
	size_t		run = 0;

	for (size_t i = 1; i <= n; i++)
		if (i == n || a[i].key != a[run].key)
		{
			if (i - run > 1)
				qsort(a + run, i - run, sizeof(RadixKey), cmp_radix_idx);
			run = i;
		}
}

/* The boxes, each stride bytes after the one before. */
typedef struct StridedBoxes
{
	const char *first;
	size_t		stride;
} StridedBoxes;

static inline const TdbBox *
box_at(const StridedBoxes *b, uint64_t i)
{
	return (const TdbBox *) (b->first + i * b->stride);
}

typedef struct StrOrder
{
	StridedBoxes boxes;
	size_t		n;
	uint64_t	slice;
	RadixKey   *keys;
	RadixKey   *tmp;
	RadixCounts *counts;		/* [2]: the x sort's, then each half's for its slices */
} StrOrder;

static void
x_keys_half(void *arg, int half)
{
	StrOrder   *so = arg;
	uint64_t	lo,
				hi;

	tdb_half_range(so->n, half, &lo, &hi);
	for (uint64_t i = lo; i < hi; i++)
	{
		const TdbBox *b = box_at(&so->boxes, i);

		so->keys[i].key = order_key(0.5 * b->xmin + 0.5 * b->xmax);
		so->keys[i].idx = (uint32_t) i;
	}
}

/* Slices [first, last) of half h: half 0 takes the first half of the slices. */
static void
y_slices_half(void *arg, int half)
{
	StrOrder   *so = arg;
	uint64_t	nslices = (so->n + so->slice - 1) / so->slice;
	uint64_t	first,
				last;

	tdb_half_range(nslices, half, &first, &last);
	for (uint64_t s = first; s < last; s++)
	{
		uint64_t	start = s * so->slice;
		uint64_t	len = so->n - start < so->slice ? so->n - start : so->slice;
		RadixKey   *k = so->keys + start;

		/* boxes in x order are a random gather: fetched GATHER_AHEAD entries ahead */
		for (uint64_t i = 0; i < len; i++)
		{
			if (i + GATHER_AHEAD < len)
			{
				const TdbBox *ahead = box_at(&so->boxes, k[i + GATHER_AHEAD].idx);

				__builtin_prefetch(&ahead->ymin);
				__builtin_prefetch(&ahead->ymax);
			}
			k[i].key = order_key(0.5 * box_at(&so->boxes, k[i].idx)->ymin +
								 0.5 * box_at(&so->boxes, k[i].idx)->ymax);
		}
		if (len < RADIX_MIN)
		{
			/* (key, idx) order directly */
			for (uint64_t i = 1; i < len; i++)
			{
				RadixKey	v = k[i];
				uint64_t	j = i;

				while (j > 0 && (k[j - 1].key > v.key || (k[j - 1].key == v.key && k[j - 1].idx > v.idx)))
				{
					k[j] = k[j - 1];
					j--;
				}
				k[j] = v;
			}
		}
		else
		{
			/* each slice has its own part of tmp, each half its own counts */
			radix_sort(k, so->tmp + start, len, &so->counts[half]);
			ties_by_index(k, len);
		}
	}
}

/*
 * STR order with radix sorts: x centres over everything (the input is in
 * index order and the sort is stable, so ties are already by index), then y
 * centres within each slice, ties by index.  Same order as the qsort path.
 */
static int
str_order_radix(const StridedBoxes *boxes, size_t n, uint64_t slice, uint32_t *perm)
{
	StrOrder	so = {*boxes, n, slice, malloc(n * sizeof(RadixKey)), malloc(n * sizeof(RadixKey)),
	malloc(2 * sizeof(RadixCounts))};
	int			rc = -1;

	if (so.keys == NULL || so.tmp == NULL || so.counts == NULL)
		goto done;
	tdb_halves(x_keys_half, &so, n);
	radix_sort(so.keys, so.tmp, n, &so.counts[0]);
	tdb_halves(y_slices_half, &so, n);
	for (size_t i = 0; i < n; i++)
		perm[i] = so.keys[i].idx;
	rc = 0;
done:
	free(so.keys);
	free(so.tmp);
	free(so.counts);
	return rc;
}

/*
 * Slices of S*F entries, S = ceil(sqrt(leaf pages)), make leaves roughly
 * square, which is what keeps the upper levels' boxes small.  Ties go to the
 * smaller index so that the same input always gives the same tree.
 */
int
tdb_rtree_order_strided(const TdbBox *first, size_t stride, size_t n, uint32_t *perm)
{
	StridedBoxes boxes = {(const char *) first, stride};
	StrKey	   *keys;
	uint64_t	pages;
	uint64_t	s;
	uint64_t	slice;

	if (n == 0)
		return 0;
	if ((uint64_t) n > (uint64_t) UINT32_MAX + 1)
		return -1;				/* perm cannot name the entries */

	pages = ((uint64_t) n + F - 1) / F;
	s = (uint64_t) ceil(sqrt((double) pages));
	while (s * s < pages)
		s++;
	while (s > 1 && (s - 1) * (s - 1) >= pages)
		s--;
	slice = s * F;
	if (n >= RADIX_MIN)
		return str_order_radix(&boxes, n, slice, perm);

	keys = malloc(n * sizeof(StrKey));
	if (keys == NULL)
		return -1;
	for (size_t i = 0; i < n; i++)
	{
		const TdbBox *b = box_at(&boxes, i);

		keys[i].cx = 0.5 * b->xmin + 0.5 * b->xmax;
		keys[i].cy = 0.5 * b->ymin + 0.5 * b->ymax;
		keys[i].idx = (uint32_t) i;
	}

	qsort(keys, n, sizeof(StrKey), cmp_str_x);
	for (uint64_t start = 0; start < n; start += slice)
	{
		uint64_t	len = n - start < slice ? n - start : slice;

		qsort(keys + start, len, sizeof(StrKey), cmp_str_y);
	}
	for (size_t i = 0; i < n; i++)
		perm[i] = keys[i].idx;
	free(keys);
	return 0;
}

int
tdb_rtree_order(const TdbBox *boxes, size_t n, uint32_t *perm)
{
	return tdb_rtree_order_strided(boxes, sizeof(TdbBox), n, perm);
}

/* ---- layout and build ---------------------------------------------------- */

uint32_t
tdb_rtree_nlevels(uint64_t n)
{
	uint32_t	levels;

	if (n == 0)
		return 0;
	levels = 1;
	while (n > 1)
	{
		n = (n + F - 1) / F;
		levels++;
	}
	return levels;
}

uint64_t
tdb_rtree_nboxes(uint64_t n)
{
	uint64_t	total;

	if (n == 0)
		return 0;
	total = n;
	while (n > 1)
	{
		n = (n + F - 1) / F;
		total += n;
	}
	return total;
}

/* fminf/fmaxf skip a NaN child rather than poisoning the whole subtree. */
void
tdb_rtree_build(TdbBoxF *boxes, uint64_t n, TdbRtreeLevel *levels)
{
	uint32_t	l = 0;

	if (n == 0)
		return;
	levels[0].first = 0;
	levels[0].count = n;
	while (levels[l].count > 1)
	{
		const TdbRtreeLevel *c = &levels[l];
		TdbRtreeLevel *p = &levels[l + 1];

		p->first = c->first + c->count;
		p->count = (c->count + F - 1) / F;
		for (uint64_t j = 0; j < p->count; j++)
		{
			uint64_t	from = j * F;
			uint64_t	to = from + F < c->count ? from + F : c->count;
			TdbBoxF		u = boxes[c->first + from];

			for (uint64_t i = from + 1; i < to; i++)
			{
				const TdbBoxF *b = &boxes[c->first + i];

				u.xmin = fminf(u.xmin, b->xmin);
				u.ymin = fminf(u.ymin, b->ymin);
				u.xmax = fmaxf(u.xmax, b->xmax);
				u.ymax = fmaxf(u.ymax, b->ymax);
			}
			boxes[p->first + j] = u;
		}
		l++;
	}
}

/* ---- box query ----------------------------------------------------------- */

/* q is the query box rounded inward (see the file header). */
static inline bool
boxf_hits(const TdbBoxF *b, const TdbBoxF *q)
{
	return b->xmin <= q->xmax && b->xmax >= q->xmin &&
		b->ymin <= q->ymax && b->ymax >= q->ymin;
}

static inline int
scan_leaves(const TdbRtree *t, const TdbBoxF *q, uint64_t from, uint64_t to,
			TdbRtreeVisit visit, void *arg)
{
	const TdbBoxF *leaves = t->boxes + t->levels[0].first;

	for (uint64_t i = from; i < to; i++)
	{
		if (boxf_hits(&leaves[i], q))
		{
			int			rc = visit(i, arg);

			if (rc != 0)
				return rc;
		}
	}
	return 0;
}

/*
 * The float box of a box query, rounded inward (a float box of an entry
 * overlaps it only if the double boxes may overlap), and whether the query
 * can find anything: inverted or NaN query boxes hold no point, and an
 * empty or malformed tree has nothing.
 */
static bool
query_boxf(const TdbRtree *t, const TdbBox *q, TdbBoxF *qf)
{
	if (!(q->xmin <= q->xmax && q->ymin <= q->ymax))
		return false;
	if (t->nlevels == 0 || t->nlevels > TDB_RTREE_MAX_LEVELS)
		return false;
	qf->xmin = float_up(q->xmin);
	qf->ymin = float_up(q->ymin);
	qf->xmax = float_down(q->xmax);
	qf->ymax = float_down(q->ymax);
	return true;
}

/*
 * Depth first with one cursor per level: cur[l]..end[l] are the boxes of
 * level l still to look at under the node being walked one level up.
 */
int
tdb_rtree_query_box(const TdbRtree *t, const TdbBox *q, TdbRtreeVisit visit, void *arg)
{
	uint64_t	cur[TDB_RTREE_MAX_LEVELS];
	uint64_t	end[TDB_RTREE_MAX_LEVELS];
	uint32_t	top;
	uint32_t	l;
	TdbBoxF		qf;

	if (!query_boxf(t, q, &qf))
		return 0;

	top = t->nlevels - 1;
	if (top == 0)
		return scan_leaves(t, &qf, 0, t->levels[0].count, visit, arg);

	l = top;
	cur[l] = 0;
	end[l] = t->levels[l].count;
	for (;;)
	{
		uint64_t	i;
		uint64_t	from;
		uint64_t	to;

		if (cur[l] == end[l])
		{
			if (l == top)
				return 0;
			l++;
			continue;
		}
		i = cur[l]++;
		if (!boxf_hits(&t->boxes[t->levels[l].first + i], &qf))
			continue;
		from = i * F;
		to = from + F < t->levels[l - 1].count ? from + F : t->levels[l - 1].count;
		if (l == 1)
		{
			int			rc = scan_leaves(t, &qf, from, to, visit, arg);

			if (rc != 0)
				return rc;
		}
		else
		{
			l--;
			cur[l] = from;
			end[l] = to;
		}
	}
}

/* ---- box query with wholesale acceptance --------------------------------- */

static inline bool
boxf_inside(const TdbBoxF *b, const TdbBoxF *q)
{
	return b->xmin >= q->xmin && b->xmax <= q->xmax &&
		b->ymin >= q->ymin && b->ymax <= q->ymax;
}

/*
 * As tdb_rtree_query_box, same entries in the same (leaf index) order; a
 * box inside the query box that contained() accepts hands all its leaves
 * over at once, with no further box test.  The leaves under box j of level
 * l are [j F^l, (j + 1) F^l) of level 0, as each level's box j covers
 * children [j F, (j + 1) F) of the level below.
 */
int
tdb_rtree_query_box_within(const TdbRtree *t, const TdbBox *q, TdbRtreeContained contained,
						   TdbRtreeVisitIn visit, void *arg)
{
	uint64_t	cur[TDB_RTREE_MAX_LEVELS];
	uint64_t	end[TDB_RTREE_MAX_LEVELS];
	uint64_t	span[TDB_RTREE_MAX_LEVELS];
	uint64_t	nleaves;
	uint32_t	top;
	uint32_t	l;
	TdbBoxF		qf;

	if (!query_boxf(t, q, &qf))
		return 0;
	nleaves = t->levels[0].count;
	span[0] = 1;
	for (l = 1; l < t->nlevels; l++)
		span[l] = span[l - 1] * F;

	top = t->nlevels - 1;
	l = top;
	cur[l] = 0;
	end[l] = t->levels[l].count;
	for (;;)
	{
		uint64_t	i;
		uint64_t	from;
		uint64_t	to;
		const TdbBoxF *b;

		if (cur[l] == end[l])
		{
			if (l == top)
				return 0;
			l++;
			continue;
		}
		i = cur[l]++;
		b = &t->boxes[t->levels[l].first + i];
		if (!boxf_hits(b, &qf))
			continue;
		if (boxf_inside(b, &qf) && contained(b, arg))
		{
			from = i * span[l];
			to = from + span[l] < nleaves ? from + span[l] : nleaves;
			for (uint64_t e = from; e < to; e++)
			{
				int			rc = visit(e, true, arg);

				if (rc != 0)
					return rc;
			}
			continue;
		}
		if (l == 0)
		{
			int			rc = visit(i, false, arg);

			if (rc != 0)
				return rc;
			continue;
		}
		from = i * F;
		to = from + F < t->levels[l - 1].count ? from + F : t->levels[l - 1].count;
		l--;
		cur[l] = from;
		end[l] = to;
	}
}

/* ---- distances ----------------------------------------------------------- */

/*
 * Measured as callers measure a vertex, (vx - x) * scale, from the box point
 * nearest to (x, y): each rounding step is monotone, so the result is never
 * above the same computation for any point of the box.
 */
double
tdb_rtree_box_dist(const TdbBoxF *b, double x, double y, TdbMetric metric)
{
	double		bxmin = b->xmin,
				bxmax = b->xmax,
				bymin = b->ymin,
				bymax = b->ymax;
	double		cx = x < bxmin ? bxmin : (x > bxmax ? bxmax : x);
	double		cy = y < bymin ? bymin : (y > bymax ? bymax : y);
	double		dx = cx - x;
	double		dy = cy - y;

	if (metric == TDB_METRIC_METRES)
	{
		double		k = TDB_EARTH_RADIUS_M * M_PI / 180.0;

		dx *= k * cos(y * M_PI / 180.0);
		dy *= k;
	}
	return sqrt(dx * dx + dy * dy);
}
