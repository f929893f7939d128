/*
 * object.c
 *	  Map and traffic objects: validating and reading them (building them
 *	  is object_build.c's).  See object.h for the contract and
 *	  docs/object-format.md for the bytes.
 */
#include "object.h"
#include "object_shape.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"

/* Reads a varint from p[*pos..end); returns -1 if it runs past end or is too long. */
static inline int
get_varint(const uint8_t *p, uint64_t end, uint64_t *pos, uint64_t *out)
{
	uint64_t	v = 0;
	int			shift = 0;

	while (*pos < end)
	{
		uint8_t		c = p[(*pos)++];

		v |= (uint64_t) (c & 0x7F) << shift;
		if ((c & 0x80) == 0)
		{
			*out = v;
			return 0;
		}
		shift += 7;
		if (shift > 63)
			return -1;
	}
	return -1;
}

static inline int64_t
unzigzag(uint64_t v)
{
	return (int64_t) (v >> 1) ^ -(int64_t) (v & 1);
}

/* Point-by-point decoder of one encoded shape, bounds-checked. */
typedef struct ShapeIter
{
	const uint8_t *shapes;
	uint64_t	size;
	uint64_t	pos;
	int			encoding;
	int64_t		qx;
	int64_t		qy;
} ShapeIter;

/* leaf: the record's leaf box (the origin of SHAPE_E7_BOX) */
static bool
shape_iter_init(ShapeIter *it, const uint8_t *shapes, uint64_t size, uint64_t off, const TdbBoxF *leaf)
{
	if (off >= size)
		return false;
	it->shapes = shapes;
	it->size = size;
	it->pos = off + 1;
	it->encoding = shapes[off];
	it->qx = it->qy = 0;
	if (it->encoding == SHAPE_E7_BOX)
	{
		shape_box_origin(leaf, &it->qx, &it->qy);
		it->encoding = SHAPE_E7;
	}
	return it->encoding == SHAPE_E7 || it->encoding == SHAPE_RAW;
}

static inline bool
shape_iter_next(ShapeIter *it, double *x, double *y)
{
	if (it->encoding == SHAPE_E7)
	{
		uint64_t	dx,
					dy;

		if (get_varint(it->shapes, it->size, &it->pos, &dx) != 0 ||
			get_varint(it->shapes, it->size, &it->pos, &dy) != 0)
			return false;
		it->qx += unzigzag(dx);
		it->qy += unzigzag(dy);
		*x = (double) it->qx / 1e7;
		*y = (double) it->qy / 1e7;
		return true;
	}
	if (it->size - it->pos < 16)
		return false;
	memcpy(x, it->shapes + it->pos, 8);
	memcpy(y, it->shapes + it->pos + 8, 8);
	it->pos += 16;
	return true;
}

/*
 * Decode a shape at shapes[off..size) with npoints points into xy (may be
 * NULL to only check it).  Returns false if it is malformed.
 */
static bool
decode_shape(const uint8_t *shapes, uint64_t size, uint64_t off, uint32_t npoints, const TdbBoxF *leaf,
			 double *xy)
{
	ShapeIter	it;

	if (npoints < 2 || !shape_iter_init(&it, shapes, size, off, leaf))
		return false;
	for (uint32_t i = 0; i < npoints; i++)
	{
		double		x,
					y;

		if (!shape_iter_next(&it, &x, &y))
			return false;
		if (xy)
		{
			xy[2 * i] = x;
			xy[2 * i + 1] = y;
		}
	}
	return true;
}

/* ---- validation --------------------------------------------------------------- */

#define CORRUPT(...) \
	do { snprintf(err, TDB_ERRLEN, __VA_ARGS__); return TDB_OBJ_ECORRUPT; } while (0)

/* Header, section table and overall size: shared by both kinds. */
static int
validate_header(const void *obj, size_t size, uint32_t magic, uint16_t version, uint32_t nsections,
				char *err)
{
	const TdbObjectHeader *h = obj;
	uint64_t	prev_end;

	if (obj == NULL || size < sizeof(TdbObjectHeader))
		CORRUPT("object of %zu bytes is smaller than its %zu-byte header", size,
				sizeof(TdbObjectHeader));
	if (h->magic != magic)
		CORRUPT("bad magic 0x%08x, expected 0x%08x", h->magic, magic);
	if (h->format_version != version)
		CORRUPT("format version %u, this reader understands %u", h->format_version, version);
	if (h->header_size != sizeof(TdbObjectHeader))
		CORRUPT("header size %u, expected %zu", h->header_size, sizeof(TdbObjectHeader));
	if (h->total_size < sizeof(TdbObjectHeader) || h->total_size > size)
		CORRUPT("object claims %llu bytes; %zu are mapped", (unsigned long long) h->total_size,
				size);
	if (h->nsections != nsections)
		CORRUPT("%u sections, expected %u", h->nsections, nsections);
	prev_end = sizeof(TdbObjectHeader);
	for (uint32_t s = 0; s < nsections; s++)
	{
		const TdbSection *sec = &h->sections[s];

		if (sec->offset % TDB_SECTION_ALIGN != 0 || sec->offset < prev_end ||
			sec->offset > h->total_size || sec->size > h->total_size - sec->offset)
			CORRUPT("section %u at offset %llu size %llu lies outside the object or overlaps (object size %llu)",
					s, (unsigned long long) sec->offset, (unsigned long long) sec->size,
					(unsigned long long) h->total_size);
		prev_end = sec->offset + sec->size;
	}
	return TDB_OBJ_OK;
}

static int
validate_checksum(const TdbObjectHeader *h, char *err)
{
	uint32_t	crc = tdb_crc32c((const char *) h + 12, h->total_size - 12);

	if (crc != h->checksum)
		CORRUPT("checksum 0x%08x does not match the stored 0x%08x", crc, h->checksum);
	return TDB_OBJ_OK;
}

/*
 * A traffic object's checksums: the digest against its entries and
 * incidents, the header and the digest against the header's checksum, and
 * every gap zero (so the checksum still decides every byte).
 */
static int
validate_traffic_checksums(const TdbObjectHeader *h, char *err)
{
	const char *base = (const char *) h;
	const TdbSection *sec = h->sections;
	const TdbTraffic *t = (const TdbTraffic *) (base + sec[TDB_TRAFFIC_ENTRIES].offset);
	const TdbTrafficDigest *d = (const TdbTrafficDigest *) (base + sec[TDB_TRAFFIC_DIGEST].offset);
	uint64_t	sum = 0;
	uint32_t	crc;

	crc = tdb_traffic_root_crc(h, d);
	if (crc != h->checksum)
		CORRUPT("checksum 0x%08x does not match the stored 0x%08x", crc, h->checksum);
	for (uint64_t i = 0; i < h->count; i++)
		sum += tdb_traffic_entry_hash(i, &t[i]);
	if (sum != d->entries)
		CORRUPT("the entries' digest is 0x%016llx, the object says 0x%016llx",
				(unsigned long long) sum, (unsigned long long) d->entries);
	crc = tdb_crc32c(base + sec[TDB_TRAFFIC_INCIDENTS].offset, sec[TDB_TRAFFIC_INCIDENTS].size);
	if (crc != d->incidents_crc || d->zero != 0)
		CORRUPT("incidents have checksum 0x%08x, the digest says 0x%08x", crc, d->incidents_crc);
	for (uint32_t s = 0; s < TDB_TRAFFIC_NSECTIONS; s++)
	{
		uint64_t	from = sec[s].offset + sec[s].size;
		uint64_t	to = s + 1 < TDB_TRAFFIC_NSECTIONS ? sec[s + 1].offset : h->total_size;

		for (uint64_t b = from; b < to; b++)
			if (base[b] != 0)
				CORRUPT("byte %llu, between sections, is not zero", (unsigned long long) b);
	}
	for (uint64_t b = sizeof(*h); b < sec[0].offset; b++)
		if (base[b] != 0)
			CORRUPT("byte %llu, between sections, is not zero", (unsigned long long) b);
	return TDB_OBJ_OK;
}

static inline bool
boxf_contains(const TdbBoxF *outer, const TdbBoxF *inner)
{
	return outer->xmin <= inner->xmin && outer->ymin <= inner->ymin &&
		outer->xmax >= inner->xmax && outer->ymax >= inner->ymax;
}

int
tdb_map_validate(const void *obj, size_t size, TdbValidateLevel level, char *err)
{
	const TdbObjectHeader *h = obj;
	const char *base = obj;
	const TdbSection *sec;
	TdbMapView	v;
	int			rc;
	uint64_t	n;
	uint64_t	nslots;

	rc = validate_header(obj, size, TDB_MAP_MAGIC, TDB_FORMAT_VERSION, TDB_MAP_NSECTIONS, err);
	if (rc != TDB_OBJ_OK)
		return rc;
	sec = h->sections;
	n = h->count;
	if (n >= UINT32_MAX || sec[TDB_MAP_RECORDS].size != n * sizeof(TdbLocation))
		CORRUPT("records section of %llu bytes does not hold %llu locations",
				(unsigned long long) sec[TDB_MAP_RECORDS].size, (unsigned long long) n);
	if (h->aux != tdb_rtree_nlevels(n) ||
		sec[TDB_MAP_LEVELS].size != (uint64_t) h->aux * sizeof(TdbRtreeLevel) ||
		sec[TDB_MAP_BOXES].size != tdb_rtree_nboxes(n) * sizeof(TdbBoxF))
		CORRUPT("R-tree of %u levels and %llu bytes of boxes does not fit %llu locations",
				h->aux, (unsigned long long) sec[TDB_MAP_BOXES].size, (unsigned long long) n);
	{
		const TdbRtreeLevel *lv = (const TdbRtreeLevel *) (base + sec[TDB_MAP_LEVELS].offset);
		uint64_t	first = 0,
					cnt = n;

		for (uint32_t l = 0; l < h->aux; l++)
		{
			if (lv[l].first != first || lv[l].count != cnt)
				CORRUPT("R-tree level %u is [%llu, +%llu), expected [%llu, +%llu)", l,
						(unsigned long long) lv[l].first, (unsigned long long) lv[l].count,
						(unsigned long long) first, (unsigned long long) cnt);
			first += cnt;
			cnt = (cnt + TDB_RTREE_FANOUT - 1) / TDB_RTREE_FANOUT;
		}
	}
	nslots = sec[TDB_MAP_HASH].size / sizeof(uint64_t);
	if (sec[TDB_MAP_HASH].size % sizeof(uint64_t) != 0 || nslots < 16 ||
		(nslots & (nslots - 1)) != 0 || nslots <= n)
		CORRUPT("hash index of %llu slots cannot index %llu locations",
				(unsigned long long) nslots, (unsigned long long) n);
	if (sec[TDB_MAP_STRINGS].size < 1 || base[sec[TDB_MAP_STRINGS].offset] != '\0' ||
		base[sec[TDB_MAP_STRINGS].offset + sec[TDB_MAP_STRINGS].size - 1] != '\0')
		CORRUPT("strings section does not start and end with a NUL byte");
	if (sec[TDB_MAP_CLASSES].size % sizeof(uint32_t) != 0 ||
		sec[TDB_MAP_CLASSES].size > 256 * sizeof(uint32_t))
		CORRUPT("classes section of %llu bytes", (unsigned long long) sec[TDB_MAP_CLASSES].size);

	if (level == TDB_VALIDATE_HEADER)
		return TDB_OBJ_OK;

	rc = validate_checksum(h, err);
	if (rc != TDB_OBJ_OK)
		return rc;

	tdb_map_view_init(&v, obj);
	for (uint32_t c = 0; c < v.nclasses; c++)
		if (v.classes[c] >= v.strings_size)
			CORRUPT("road class %u names string offset %u beyond %llu", c, v.classes[c],
					(unsigned long long) v.strings_size);
	for (uint64_t i = 0; i < n; i++)
	{
		const TdbLocation *r = &v.records[i];
		TdbBox		bb;
		TdbBoxF		bf;

		if (r->name_off >= v.strings_size || r->road_class >= v.nclasses)
			CORRUPT("location %llu (record %llu) has name offset %u / class %u out of range",
					(unsigned long long) r->id, (unsigned long long) i, r->name_off, r->road_class);
		if (!decode_shape(v.shapes, v.shapes_size, r->shape_off, r->npoints, &v.rtree.boxes[i], NULL))
			CORRUPT("location %llu (record %llu): shape at offset %llu with %u points is malformed",
					(unsigned long long) r->id, (unsigned long long) i,
					(unsigned long long) r->shape_off, r->npoints);
		tdb_map_bbox(&v, i, &bb);
		bf = tdb_boxf_from_boxd(&bb);
		if (!boxf_contains(&v.rtree.boxes[i], &bf))
			CORRUPT("location %llu (record %llu): R-tree leaf box does not contain its shape",
					(unsigned long long) r->id, (unsigned long long) i);
		if (tdb_map_find(&v, r->id) != (int64_t) i)
			CORRUPT("location %llu (record %llu) is not found through the hash index",
					(unsigned long long) r->id, (unsigned long long) i);
	}
	for (uint32_t l = 1; l < v.rtree.nlevels; l++)
	{
		const TdbRtreeLevel *lv = &v.rtree.levels[l];
		const TdbRtreeLevel *cl = &v.rtree.levels[l - 1];

		for (uint64_t c = 0; c < cl->count; c++)
			if (!boxf_contains(&v.rtree.boxes[lv->first + c / TDB_RTREE_FANOUT],
							   &v.rtree.boxes[cl->first + c]))
				CORRUPT("R-tree level %u node %llu does not contain child %llu", l,
						(unsigned long long) (c / TDB_RTREE_FANOUT), (unsigned long long) c);
	}
	{
		uint64_t	used_slots = 0;

		for (uint64_t s = 0; s < nslots; s++)
		{
			uint64_t	slot = v.hash[s];

			if (slot == 0)
				continue;
			used_slots++;
			if ((uint32_t) slot == 0 || (uint32_t) slot > n)
				CORRUPT("hash slot %llu points at record %u of %llu", (unsigned long long) s,
						(uint32_t) slot, (unsigned long long) n);
		}
		if (used_slots != n)
			CORRUPT("hash index holds %llu entries for %llu locations",
					(unsigned long long) used_slots, (unsigned long long) n);
	}
	return TDB_OBJ_OK;
}

int
tdb_traffic_validate(const void *obj, size_t size, TdbValidateLevel level,
					 const TdbObjectHeader *map, char *err)
{
	const TdbObjectHeader *h = obj;
	const TdbTraffic *t;
	uint64_t	isize;
	int			rc;

	rc = validate_header(obj, size, TDB_TRAFFIC_MAGIC, TDB_TRAFFIC_FORMAT_VERSION, TDB_TRAFFIC_NSECTIONS, err);
	if (rc != TDB_OBJ_OK)
		return rc;
	if (map != NULL && (h->map_id != map->map_id || h->count != map->count))
		CORRUPT("traffic object is for map %llu with %llu locations, not map %llu with %llu",
				(unsigned long long) h->map_id, (unsigned long long) h->count,
				(unsigned long long) map->map_id, (unsigned long long) map->count);
	if (h->sections[TDB_TRAFFIC_ENTRIES].size != h->count * sizeof(TdbTraffic))
		CORRUPT("traffic section of %llu bytes does not hold %llu entries",
				(unsigned long long) h->sections[TDB_TRAFFIC_ENTRIES].size,
				(unsigned long long) h->count);
	if (h->sections[TDB_TRAFFIC_DIGEST].size != sizeof(TdbTrafficDigest))
		CORRUPT("digest section of %llu bytes, expected %zu",
				(unsigned long long) h->sections[TDB_TRAFFIC_DIGEST].size, sizeof(TdbTrafficDigest));
	if (level == TDB_VALIDATE_HEADER)
		return TDB_OBJ_OK;

	rc = validate_traffic_checksums(h, err);
	if (rc != TDB_OBJ_OK)
		return rc;
	t = tdb_traffic_entries(obj);
	isize = h->sections[TDB_TRAFFIC_INCIDENTS].size;
	for (uint64_t i = 0; i < h->count; i++)
	{
		uint32_t	len;

		if ((t[i].congestion > TDB_CONGESTION_MAX && t[i].congestion != TDB_CONGESTION_UNKNOWN) ||
			(t[i].confidence > 100 && t[i].confidence != TDB_CONFIDENCE_UNKNOWN) || t[i].changed_gen > h->generation)
			CORRUPT("traffic entry %llu has congestion %u, confidence %u, changed at generation %llu (object generation %llu)",
					(unsigned long long) i, t[i].congestion, t[i].confidence,
					(unsigned long long) t[i].changed_gen, (unsigned long long) h->generation);
		if (t[i].incident_off != 0 && tdb_traffic_incident(obj, &t[i], &len) == NULL)
			CORRUPT("traffic entry %llu names incident offset %u beyond %llu bytes",
					(unsigned long long) i, t[i].incident_off, (unsigned long long) isize);
	}
	return TDB_OBJ_OK;
}

/* ---- reading -------------------------------------------------------------------- */

void
tdb_map_view_init(TdbMapView *v, const void *obj)
{
	const TdbObjectHeader *h = obj;
	const char *base = obj;

	v->hdr = h;
	v->count = h->count;
	v->records = (const TdbLocation *) (base + h->sections[TDB_MAP_RECORDS].offset);
	v->hash = (const uint64_t *) (base + h->sections[TDB_MAP_HASH].offset);
	v->hash_mask = h->sections[TDB_MAP_HASH].size / sizeof(uint64_t) - 1;
	v->shapes = (const uint8_t *) (base + h->sections[TDB_MAP_SHAPES].offset);
	v->shapes_size = h->sections[TDB_MAP_SHAPES].size;
	v->strings = base + h->sections[TDB_MAP_STRINGS].offset;
	v->strings_size = h->sections[TDB_MAP_STRINGS].size;
	v->classes = (const uint32_t *) (base + h->sections[TDB_MAP_CLASSES].offset);
	v->nclasses = (uint32_t) (h->sections[TDB_MAP_CLASSES].size / sizeof(uint32_t));
	v->rtree.boxes = (const TdbBoxF *) (base + h->sections[TDB_MAP_BOXES].offset);
	v->rtree.levels = (const TdbRtreeLevel *) (base + h->sections[TDB_MAP_LEVELS].offset);
	v->rtree.nlevels = h->aux;
}

void
tdb_map_shape(const TdbMapView *v, uint64_t i, double *xy)
{
	decode_shape(v->shapes, v->shapes_size, v->records[i].shape_off, v->records[i].npoints,
				 &v->rtree.boxes[v->rtree.levels[0].first + i], xy);
}

/*
 * Call fn for each consecutive pair of points of record i, decoding as it
 * goes (no buffer, no allocation).  Records are validated, so decoding
 * cannot fail; a malformed shape would only end the walk early.
 */
typedef void (*PointPairFn) (double x0, double y0, double x1, double y1, void *arg);

static void
walk_shape(const TdbMapView *v, uint64_t i, PointPairFn fn, void *arg)
{
	const TdbLocation *r = &v->records[i];
	ShapeIter	it;
	double		x0,
				y0,
				x1,
				y1;

	if (!shape_iter_init(&it, v->shapes, v->shapes_size, r->shape_off,
						 &v->rtree.boxes[v->rtree.levels[0].first + i]) ||
		!shape_iter_next(&it, &x0, &y0))
		return;
	for (uint32_t p = 1; p < r->npoints; p++)
	{
		if (!shape_iter_next(&it, &x1, &y1))
			return;
		fn(x0, y0, x1, y1, arg);
		x0 = x1;
		y0 = y1;
	}
}

static void
bbox_pair(double x0, double y0, double x1, double y1, void *arg)
{
	TdbBox	   *b = arg;

	b->xmin = fmin(b->xmin, fmin(x0, x1));
	b->xmax = fmax(b->xmax, fmax(x0, x1));
	b->ymin = fmin(b->ymin, fmin(y0, y1));
	b->ymax = fmax(b->ymax, fmax(y0, y1));
}

void
tdb_map_bbox(const TdbMapView *v, uint64_t i, TdbBox *box)
{
	box->xmin = box->ymin = INFINITY;
	box->xmax = box->ymax = -INFINITY;
	walk_shape(v, i, bbox_pair, box);
}

typedef struct DistState
{
	double		x;
	double		y;
	double		sx;				/* scale of x differences */
	double		sy;				/* scale of y differences */
	double		best2;			/* squared distance so far */
} DistState;

static void
dist_pair(double x0, double y0, double x1, double y1, void *arg)
{
	DistState  *d = arg;
	double		ax = (x0 - d->x) * d->sx,
				ay = (y0 - d->y) * d->sy;
	double		bx = (x1 - d->x) * d->sx,
				by = (y1 - d->y) * d->sy;
	double		dx = bx - ax,
				dy = by - ay;
	double		len2 = dx * dx + dy * dy;
	double		t = 0.0;
	double		px,
				py,
				d2;

	/* closest point of segment a-b to the origin (the query point) */
	if (len2 > 0.0)
	{
		t = -(ax * dx + ay * dy) / len2;
		if (t < 0.0)
			t = 0.0;
		else if (t > 1.0)
			t = 1.0;
	}
	px = ax + t * dx;
	py = ay + t * dy;
	d2 = px * px + py * py;
	if (d2 < d->best2)
		d->best2 = d2;
}

double
tdb_map_distance(const TdbMapView *v, uint64_t i, double x, double y, TdbMetric metric)
{
	DistState	d;

	d.x = x;
	d.y = y;
	if (metric == TDB_METRIC_METRES)
	{
		double		k = TDB_EARTH_RADIUS_M * M_PI / 180.0;

		d.sx = k * cos(y * M_PI / 180.0);
		d.sy = k;
	}
	else
		d.sx = d.sy = 1.0;
	d.best2 = INFINITY;
	walk_shape(v, i, dist_pair, &d);
	return sqrt(d.best2);
}

int
tdb_map_query_box(const TdbMapView *v, const TdbBox *q, TdbRtreeVisit visit, void *arg)
{
	return tdb_rtree_query_box(&v->rtree, q, visit, arg);
}

typedef struct RadiusState
{
	const TdbMapView *v;
	DistState	d;				/* the point and scales of tdb_map_distance() */
	double		r;
	double		r_in;			/* boxes within this are accepted unmeasured */
	TdbRtreeVisit visit;
	void	   *arg;
} RadiusState;

/*
 * A box lies in the circle when its farthest corner does (the metric is
 * Euclidean in the projection, so the disc is convex).  Every vertex of a
 * shape in the box is measured no farther than that corner (each step of
 * the computation is monotone), and a segment's points no farther than its
 * ends up to a few ulps, which the margin of r_in covers: such entries are
 * within r as tdb_map_distance() measures them, without decoding a shape.
 */
static bool
radius_contained(const TdbBoxF *b, void *arg)
{
	RadiusState *s = arg;
	double		dx = fmax(fabs((double) b->xmin - s->d.x), fabs((double) b->xmax - s->d.x)) * s->d.sx;
	double		dy = fmax(fabs((double) b->ymin - s->d.y), fabs((double) b->ymax - s->d.y)) * s->d.sy;

	return sqrt(dx * dx + dy * dy) <= s->r_in;
}

static int
radius_visit(uint64_t entry, bool inside, void *arg)
{
	RadiusState *s = arg;

	if (!inside)
	{
		DistState	d = s->d;

		walk_shape(s->v, entry, dist_pair, &d);
		if (!(sqrt(d.best2) <= s->r))
			return 0;
	}
	return s->visit(entry, s->arg);
}

int
tdb_map_query_radius(const TdbMapView *v, double x, double y, double radius_m,
					 TdbRtreeVisit visit, void *arg)
{
	RadiusState s;
	TdbBox		q;
	double		k = TDB_EARTH_RADIUS_M * M_PI / 180.0;
	double		c;

	if (!isfinite(x) || !isfinite(y) || !isfinite(radius_m) || radius_m < 0.0)
		return TDB_OBJ_EINVAL;

	/*
	 * The box that holds every point within radius_m in the projection
	 * tdb_map_distance() measures in; near the poles it is the full width.
	 */
	c = cos(y * M_PI / 180.0);
	q.ymin = y - radius_m / k;
	q.ymax = y + radius_m / k;
	if (c > 1e-9)
	{
		q.xmin = x - radius_m / (k * c);
		q.xmax = x + radius_m / (k * c);
	}
	else
	{
		q.xmin = -180.0;
		q.xmax = 180.0;
	}
	s.v = v;
	s.d.x = x;
	s.d.y = y;
	s.d.sx = k * cos(y * M_PI / 180.0);
	s.d.sy = k;
	s.d.best2 = INFINITY;
	s.r = radius_m;
	s.r_in = radius_m - (radius_m * 1e-9 + 1e-6);
	s.visit = visit;
	s.arg = arg;
	return tdb_rtree_query_box_within(&v->rtree, &q, radius_contained, radius_visit, &s);
}

/* The query's distance to record i's shape, decoded as it goes. */
typedef struct QueryDistState
{
	const TdbKnnQuery *q;
	double		best;
} QueryDistState;

static void
query_dist_pair(double x0, double y0, double x1, double y1, void *arg)
{
	QueryDistState *s = arg;

	if (s->best > 0.0)
		s->best = fmin(s->best, tdb_knn_query_segment_dist(s->q, x0, y0, x1, y1));
}

double
tdb_map_query_dist(const TdbMapView *v, uint64_t i, const TdbKnnQuery *q)
{
	QueryDistState s = {q, INFINITY};

	if (q->shape == TDB_KNN_POLYGON)
	{
		ShapeIter	it;
		double		x0,
					y0;

		if (shape_iter_init(&it, v->shapes, v->shapes_size, v->records[i].shape_off, &v->rtree.boxes[i]) &&
			shape_iter_next(&it, &x0, &y0) && tdb_knn_query_contains(q, x0, y0))
			return 0.0;
	}
	walk_shape(v, i, query_dist_pair, &s);
	return s.best;
}

double
tdb_map_query_exact(uint64_t e, void *query_map)
{
	const TdbMapQuery *qm = query_map;

	return tdb_map_query_dist(qm->map, e, qm->query);
}

/*
 * An arc's points lie within its ends' longitudes and at most (latitude
 * reach - ends' latitude range) from the vertex box along a meridian:
 * converted at the largest meridional radius of WGS 84 (a^2 / b, 6399594 m,
 * rounded up; the mean sphere's is smaller).
 */
typedef struct SlackState
{
	double		worst_deg;
} SlackState;

static void
slack_pair(double x0, double y0, double x1, double y1, void *arg)
{
	SlackState *s = arg;
	double		lo,
				hi;

	if (!tdb_geo_arc_lat_range(x0, y0, x1, y1, &lo, &hi))
	{
		s->worst_deg = INFINITY;
		return;
	}
	s->worst_deg = fmax(s->worst_deg, fmax(fmin(y0, y1) - lo, hi - fmax(y0, y1)));
}

double
tdb_map_arc_slack_m(const TdbMapView *v)
{
	SlackState	s = {0.0};

	for (uint64_t i = 0; i < v->count && isfinite(s.worst_deg); i++)
		walk_shape(v, i, slack_pair, &s);
	if (!isfinite(s.worst_deg))
		return INFINITY;
	/* plus 1e-9 degrees for the arc latitudes' rounding */
	return (s.worst_deg + 1e-9) * M_PI / 180.0 * 6399600.0;
}

static double
knn_entry_dist(uint64_t entry, double x, double y, TdbMetric metric, void *arg)
{
	return tdb_map_distance((const TdbMapView *) arg, entry, x, y, metric);
}

int64_t
tdb_map_knn(const TdbMapView *v, double x, double y, TdbMetric metric, uint64_t k,
			TdbKnnResult *out)
{
	if (!isfinite(x) || !isfinite(y))
		return TDB_OBJ_EINVAL;
	return tdb_rtree_knn(&v->rtree, x, y, metric, k, knn_entry_dist, (void *) v, out);
}

/* ---- batched lookups ------------------------------------------------------------ */

#define FIND_D 8
#define FIND_RING (4 * FIND_D)		/* > 2 * FIND_D: a hash lives from stage 1 to 3 */

void
tdb_map_find_many(const TdbMapView *v, const uint64_t *ids, size_t n, int64_t *out,
				  const void *extra, size_t extra_stride)
{
	uint64_t	hashes[FIND_RING];

	for (size_t k = 0; k < n + 2 * FIND_D; k++)
	{
		if (k < n)
		{
			hashes[k % FIND_RING] = tdb_hash_id(ids[k]);
			__builtin_prefetch(&v->hash[hashes[k % FIND_RING] & v->hash_mask]);
		}
		if (k >= FIND_D && k - FIND_D < n)
		{
			uint64_t	s = v->hash[hashes[(k - FIND_D) % FIND_RING] & v->hash_mask];
			uint32_t	idx = (uint32_t) s - 1;

			if (s != 0 && idx < v->count)
			{
				__builtin_prefetch(&v->records[idx]);
				if (extra != NULL)
					__builtin_prefetch((const char *) extra + (size_t) idx * extra_stride, 1);
			}
		}
		if (k >= 2 * FIND_D)
		{
			size_t		j = k - 2 * FIND_D;
			uint64_t	h = hashes[j % FIND_RING];
			uint64_t	s = v->hash[h & v->hash_mask];
			uint32_t	idx = (uint32_t) s - 1;

			/* the common case from the lines fetched; anything else probes */
			if (s != 0 && (s >> 32) == (h >> 32) && idx < v->count && v->records[idx].id == ids[j])
				out[j] = idx;
			else
				out[j] = tdb_map_find(v, ids[j]);
		}
	}
}
