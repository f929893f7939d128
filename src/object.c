/*
 * object.c
 *	  Map and traffic objects: building, validating, reading.  See object.h
 *	  for the contract and docs/object-format.md for the bytes.
 *
 * The builder keeps shapes and names in growing buffers as locations come
 * in, then sorts records into R-tree order once, at finish.  Shapes are
 * stored as zigzag varint deltas at 1e-7 degree (OpenStreetMap's own
 * precision) when that round-trips every coordinate exactly, and as raw
 * doubles otherwise, so readers always get back the exact input.
 */
#include "object.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"

#define SHAPE_E7	0
#define SHAPE_RAW	1

#define ALIGN_UP(x, a) (((x) + ((a) - 1)) & ~((uint64_t) (a) - 1))

/* ---- small growing buffers -------------------------------------------------- */

typedef struct Buf
{
	uint8_t    *data;
	size_t		len;
	size_t		cap;
} Buf;

static int
buf_reserve(Buf *b, size_t extra)
{
	if (b->len + extra > b->cap)
	{
		size_t		ncap = b->cap ? b->cap * 2 : 4096;
		uint8_t    *nd;

		while (ncap < b->len + extra)
			ncap *= 2;
		nd = realloc(b->data, ncap);
		if (nd == NULL)
			return -1;
		b->data = nd;
		b->cap = ncap;
	}
	return 0;
}

static int
buf_append(Buf *b, const void *p, size_t n)
{
	if (buf_reserve(b, n) != 0)
		return -1;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

static void
put_varint(Buf *b, uint64_t v)
{
	while (v >= 0x80)
	{
		b->data[b->len++] = (uint8_t) (v | 0x80);
		v >>= 7;
	}
	b->data[b->len++] = (uint8_t) v;
}

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

static inline uint64_t
zigzag(int64_t v)
{
	return ((uint64_t) v << 1) ^ (uint64_t) (v >> 63);
}

static inline int64_t
unzigzag(uint64_t v)
{
	return (int64_t) (v >> 1) ^ -(int64_t) (v & 1);
}

/* ---- the builder ------------------------------------------------------------ */

typedef struct BuildEntry
{
	uint64_t	id;
	uint64_t	shape_off;
	TdbBox		box;
	float		length_m;
	uint32_t	name_off;
	uint32_t	npoints;
	uint16_t	speed_limit_kmh;
	uint8_t		road_class;
	uint8_t		flags;
} BuildEntry;

struct TdbMapBuilder
{
	BuildEntry *entries;
	size_t		n;
	size_t		cap;
	Buf			shapes;
	Buf			strings;
	/* string interning: open addressing over offsets into strings (0 = empty) */
	uint32_t   *intern;
	size_t		intern_cap;
	size_t		intern_used;
	uint32_t	classes[256];
	uint32_t	nclasses;

	/* set by finish */
	bool		finished;
	uint32_t   *perm;
	TdbBoxF    *boxes;
	uint64_t	nboxes;
	TdbRtreeLevel levels[TDB_RTREE_MAX_LEVELS];
	uint32_t	nlevels;
	uint64_t   *hash;
	uint64_t	hash_cap;
	TdbSection	sections[TDB_MAP_NSECTIONS];
	size_t		total_size;
};

TdbMapBuilder *
tdb_map_builder_create(void)
{
	TdbMapBuilder *b = calloc(1, sizeof(TdbMapBuilder));

	if (b == NULL)
		return NULL;
	/* offset 0 of STRINGS is the empty string, meaning "no name" */
	if (buf_append(&b->strings, "", 1) != 0)
	{
		free(b);
		return NULL;
	}
	return b;
}

void
tdb_map_builder_free(TdbMapBuilder *b)
{
	if (b == NULL)
		return;
	free(b->entries);
	free(b->shapes.data);
	free(b->strings.data);
	free(b->intern);
	free(b->perm);
	free(b->boxes);
	free(b->hash);
	free(b);
}

static uint64_t
hash_string(const char *s)
{
	uint64_t	h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (uint8_t) *s++) * 1099511628211ull;
	return h;
}

/* Offset of s in STRINGS, adding it once; 0 for NULL or "", UINT32_MAX on failure. */
static uint32_t
intern_string(TdbMapBuilder *b, const char *s)
{
	size_t		pos;

	if (s == NULL || *s == '\0')
		return 0;
	if ((b->intern_used + 1) * 2 > b->intern_cap)
	{
		size_t		ncap = b->intern_cap ? b->intern_cap * 2 : 1024;
		uint32_t   *nt = calloc(ncap, sizeof(uint32_t));

		if (nt == NULL)
			return UINT32_MAX;
		for (size_t i = 0; i < b->intern_cap; i++)
		{
			uint32_t	off = b->intern[i];

			if (off == 0)
				continue;
			pos = hash_string((char *) b->strings.data + off) & (ncap - 1);
			while (nt[pos] != 0)
				pos = (pos + 1) & (ncap - 1);
			nt[pos] = off;
		}
		free(b->intern);
		b->intern = nt;
		b->intern_cap = ncap;
	}
	pos = hash_string(s) & (b->intern_cap - 1);
	while (b->intern[pos] != 0)
	{
		if (strcmp((char *) b->strings.data + b->intern[pos], s) == 0)
			return b->intern[pos];
		pos = (pos + 1) & (b->intern_cap - 1);
	}
	{
		size_t		len = strlen(s) + 1;
		size_t		off = b->strings.len;

		if (off + len > UINT32_MAX || buf_append(&b->strings, s, len) != 0)
			return UINT32_MAX;
		b->intern[pos] = (uint32_t) off;
		b->intern_used++;
		return (uint32_t) off;
	}
}

/* True when every coordinate survives the trip through 1e-7 degree integers. */
static bool
shape_fits_e7(const double *xy, uint32_t npoints)
{
	for (uint32_t i = 0; i < 2 * npoints; i++)
	{
		double		v = xy[i];
		long long	q = llround(v * 1e7);

		if ((double) q / 1e7 != v)
			return false;
	}
	return true;
}

static int
encode_shape(Buf *out, const double *xy, uint32_t npoints)
{
	if (shape_fits_e7(xy, npoints))
	{
		int64_t		px = 0,
					py = 0;

		/* worst case: 1 byte encoding + 10 bytes per varint */
		if (buf_reserve(out, 1 + (size_t) npoints * 20) != 0)
			return -1;
		out->data[out->len++] = SHAPE_E7;
		for (uint32_t i = 0; i < npoints; i++)
		{
			int64_t		qx = llround(xy[2 * i] * 1e7);
			int64_t		qy = llround(xy[2 * i + 1] * 1e7);

			put_varint(out, zigzag(qx - px));
			put_varint(out, zigzag(qy - py));
			px = qx;
			py = qy;
		}
		return 0;
	}
	if (buf_reserve(out, 1 + (size_t) npoints * 16) != 0)
		return -1;
	out->data[out->len++] = SHAPE_RAW;
	memcpy(out->data + out->len, xy, (size_t) npoints * 16);
	out->len += (size_t) npoints * 16;
	return 0;
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

static bool
shape_iter_init(ShapeIter *it, const uint8_t *shapes, uint64_t size, uint64_t off)
{
	if (off >= size)
		return false;
	it->shapes = shapes;
	it->size = size;
	it->pos = off + 1;
	it->encoding = shapes[off];
	it->qx = it->qy = 0;
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
decode_shape(const uint8_t *shapes, uint64_t size, uint64_t off, uint32_t npoints, double *xy)
{
	ShapeIter	it;

	if (npoints < 2 || !shape_iter_init(&it, shapes, size, off))
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

int
tdb_map_builder_add(TdbMapBuilder *b, uint64_t id, const double *xy, uint32_t npoints,
					const char *road_class, const char *name, uint16_t speed_limit_kmh,
					uint8_t flags, char *err)
{
	BuildEntry	e;
	uint32_t	cls_off;

	if (b->finished)
	{
		snprintf(err, TDB_ERRLEN, "the map builder is already finished");
		return TDB_OBJ_EINVAL;
	}
	if (npoints < 2)
	{
		snprintf(err, TDB_ERRLEN, "location %llu has %u point(s); a LineString needs at least 2",
				 (unsigned long long) id, npoints);
		return TDB_OBJ_EINVAL;
	}
	e.box.xmin = e.box.ymin = INFINITY;
	e.box.xmax = e.box.ymax = -INFINITY;
	e.length_m = 0;
	for (uint32_t i = 0; i < npoints; i++)
	{
		double		x = xy[2 * i],
					y = xy[2 * i + 1];

		if (!isfinite(x) || !isfinite(y) || x < -180.0 || x > 180.0 || y < -90.0 || y > 90.0)
		{
			snprintf(err, TDB_ERRLEN,
					 "location %llu point %u is (%g, %g); expected finite longitude in [-180, 180] and latitude in [-90, 90]",
					 (unsigned long long) id, i + 1, x, y);
			return TDB_OBJ_EINVAL;
		}
		if (x < e.box.xmin)
			e.box.xmin = x;
		if (x > e.box.xmax)
			e.box.xmax = x;
		if (y < e.box.ymin)
			e.box.ymin = y;
		if (y > e.box.ymax)
			e.box.ymax = y;
		if (i > 0)
			e.length_m += (float) tdb_geo_distance_m(xy[2 * i - 2], xy[2 * i - 1], x, y);
	}

	cls_off = intern_string(b, road_class);
	if (cls_off == UINT32_MAX)
		goto nomem;
	{
		uint32_t	c;

		for (c = 0; c < b->nclasses; c++)
			if (b->classes[c] == cls_off)
				break;
		if (c == b->nclasses)
		{
			if (b->nclasses == 256)
			{
				snprintf(err, TDB_ERRLEN,
						 "location %llu has road class \"%s\", the 257th distinct one; a map holds at most 256",
						 (unsigned long long) id, road_class ? road_class : "");
				return TDB_OBJ_ELIMIT;
			}
			b->classes[b->nclasses++] = cls_off;
		}
		e.road_class = (uint8_t) c;
	}
	e.name_off = intern_string(b, name);
	if (e.name_off == UINT32_MAX)
		goto nomem;

	e.id = id;
	e.npoints = npoints;
	e.speed_limit_kmh = speed_limit_kmh;
	e.flags = flags;
	e.shape_off = b->shapes.len;
	if (encode_shape(&b->shapes, xy, npoints) != 0)
		goto nomem;

	if (b->n == b->cap)
	{
		size_t		ncap = b->cap ? b->cap * 2 : 1024;
		BuildEntry *ne = realloc(b->entries, ncap * sizeof(BuildEntry));

		if (ne == NULL)
			goto nomem;
		b->entries = ne;
		b->cap = ncap;
	}
	b->entries[b->n++] = e;
	return TDB_OBJ_OK;

nomem:
	snprintf(err, TDB_ERRLEN, "out of memory adding location %llu", (unsigned long long) id);
	return TDB_OBJ_ENOMEM;
}

static uint64_t
hash_capacity(uint64_t count)
{
	uint64_t	cap = 16;

	/* load factor at most 0.8, and always one empty slot to end probes */
	while (cap * 4 < count * 5 + 4)
		cap *= 2;
	return cap;
}

int
tdb_map_builder_finish(TdbMapBuilder *b, char *err)
{
	uint64_t	n = b->n;
	TdbBox	   *dboxes = NULL;
	uint64_t	off;
	uint64_t	sizes[TDB_MAP_NSECTIONS];

	if (b->finished)
		return TDB_OBJ_OK;
	if (n >= UINT32_MAX)
	{
		snprintf(err, TDB_ERRLEN, "%llu locations; at most %u fit in one map",
				 (unsigned long long) n, UINT32_MAX - 1);
		return TDB_OBJ_EINVAL;
	}

	/* R-tree order */
	b->perm = malloc((n ? n : 1) * sizeof(uint32_t));
	dboxes = calloc(n ? n : 1, sizeof(TdbBox));
	if (b->perm == NULL || dboxes == NULL)
	{
		free(dboxes);
		goto nomem;
	}
	for (uint64_t i = 0; i < n; i++)
		dboxes[i] = b->entries[i].box;
	if (tdb_rtree_order(dboxes, n, b->perm) != 0)
	{
		free(dboxes);
		goto nomem;
	}
	free(dboxes);

	/*
	 * Put the entries in tree order once (one random gather), so that the
	 * boxes, the hash and the records below read them sequentially.
	 */
	{
		BuildEntry *sorted = malloc((n ? n : 1) * sizeof(BuildEntry));

		if (sorted == NULL)
			goto nomem;
		for (uint64_t i = 0; i < n; i++)
			sorted[i] = b->entries[b->perm[i]];
		free(b->entries);
		b->entries = sorted;
		b->cap = n;
		free(b->perm);
		b->perm = NULL;
	}

	b->nlevels = tdb_rtree_nlevels(n);
	b->nboxes = tdb_rtree_nboxes(n);
	b->boxes = malloc((b->nboxes ? b->nboxes : 1) * sizeof(TdbBoxF));
	if (b->boxes == NULL)
		goto nomem;
	for (uint64_t i = 0; i < n; i++)
		b->boxes[i] = tdb_boxf_from_boxd(&b->entries[i].box);
	tdb_rtree_build(b->boxes, n, b->levels);

	/* hash index over record positions; finds duplicate ids */
	b->hash_cap = hash_capacity(n);
	b->hash = calloc(b->hash_cap, sizeof(uint64_t));
	if (b->hash == NULL)
		goto nomem;
	for (uint64_t i = 0; i < n; i++)
	{
		uint64_t	id = b->entries[i].id;
		uint64_t	h = tdb_hash_id(id);
		uint64_t	pos = h & (b->hash_cap - 1);

		while (b->hash[pos] != 0)
		{
			uint64_t	s = b->hash[pos];

			if ((s >> 32) == (h >> 32) &&
				b->entries[(uint32_t) s - 1].id == id)
			{
				snprintf(err, TDB_ERRLEN, "location id %llu appears more than once",
						 (unsigned long long) id);
				return TDB_OBJ_EDUPLICATE;
			}
			pos = (pos + 1) & (b->hash_cap - 1);
		}
		b->hash[pos] = ((h >> 32) << 32) | (i + 1);
	}

	sizes[TDB_MAP_RECORDS] = n * sizeof(TdbLocation);
	sizes[TDB_MAP_BOXES] = b->nboxes * sizeof(TdbBoxF);
	sizes[TDB_MAP_LEVELS] = b->nlevels * sizeof(TdbRtreeLevel);
	sizes[TDB_MAP_HASH] = b->hash_cap * sizeof(uint64_t);
	sizes[TDB_MAP_SHAPES] = b->shapes.len;
	sizes[TDB_MAP_STRINGS] = b->strings.len;
	sizes[TDB_MAP_CLASSES] = b->nclasses * sizeof(uint32_t);
	off = ALIGN_UP(sizeof(TdbObjectHeader), TDB_SECTION_ALIGN);
	for (int s = 0; s < TDB_MAP_NSECTIONS; s++)
	{
		b->sections[s].offset = off;
		b->sections[s].size = sizes[s];
		off = ALIGN_UP(off + sizes[s], TDB_SECTION_ALIGN);
	}
	b->total_size = off;
	b->finished = true;
	return TDB_OBJ_OK;

nomem:
	snprintf(err, TDB_ERRLEN, "out of memory building a map of %llu locations",
			 (unsigned long long) n);
	return TDB_OBJ_ENOMEM;
}

size_t
tdb_map_builder_size(const TdbMapBuilder *b)
{
	return b->finished ? b->total_size : 0;
}

uint64_t
tdb_map_builder_count(const TdbMapBuilder *b)
{
	return b->n;
}

static void
finish_header(TdbObjectHeader *h)
{
	h->checksum = tdb_crc32c((const char *) h + 12, h->total_size - 12);
}

void
tdb_map_builder_write(const TdbMapBuilder *b, void *dst, uint64_t map_id, int64_t now_us)
{
	TdbObjectHeader *h = dst;
	char	   *base = dst;
	TdbLocation *rec;

	memset(dst, 0, b->total_size);
	h->magic = TDB_MAP_MAGIC;
	h->format_version = TDB_FORMAT_VERSION;
	h->header_size = sizeof(TdbObjectHeader);
	h->nsections = TDB_MAP_NSECTIONS;
	h->total_size = b->total_size;
	h->map_id = map_id;
	h->generation = 0;
	h->count = b->n;
	h->created_at_us = now_us;
	h->aux = b->nlevels;
	memcpy(h->sections, b->sections, sizeof(b->sections));

	rec = (TdbLocation *) (base + b->sections[TDB_MAP_RECORDS].offset);
	for (uint64_t i = 0; i < b->n; i++)
	{
		const BuildEntry *e = &b->entries[i];

		rec[i].id = e->id;
		rec[i].shape_off = e->shape_off;
		rec[i].length_m = e->length_m;
		rec[i].name_off = e->name_off;
		rec[i].speed_limit_kmh = e->speed_limit_kmh;
		rec[i].road_class = e->road_class;
		rec[i].flags = e->flags;
		rec[i].npoints = e->npoints;
	}
	memcpy(base + b->sections[TDB_MAP_BOXES].offset, b->boxes, b->sections[TDB_MAP_BOXES].size);
	memcpy(base + b->sections[TDB_MAP_LEVELS].offset, b->levels, b->sections[TDB_MAP_LEVELS].size);
	memcpy(base + b->sections[TDB_MAP_HASH].offset, b->hash, b->sections[TDB_MAP_HASH].size);
	if (b->shapes.len > 0)		/* an empty map has no shape buffer */
		memcpy(base + b->sections[TDB_MAP_SHAPES].offset, b->shapes.data, b->shapes.len);
	memcpy(base + b->sections[TDB_MAP_STRINGS].offset, b->strings.data, b->strings.len);
	memcpy(base + b->sections[TDB_MAP_CLASSES].offset, b->classes, b->sections[TDB_MAP_CLASSES].size);
	finish_header(h);
}

/* ---- traffic objects ------------------------------------------------------- */

size_t
tdb_traffic_size(uint64_t count, size_t incident_bytes)
{
	uint64_t	off = ALIGN_UP(sizeof(TdbObjectHeader), TDB_SECTION_ALIGN);

	off = ALIGN_UP(off + count * sizeof(TdbTraffic), TDB_SECTION_ALIGN);
	return ALIGN_UP(off + incident_bytes, TDB_SECTION_ALIGN);
}

void
tdb_traffic_write(void *dst, uint64_t map_id, uint64_t generation, uint64_t count,
				  const TdbTraffic *entries, const void *incidents, size_t incident_bytes,
				  int64_t now_us)
{
	TdbObjectHeader *h = dst;
	uint64_t	off = ALIGN_UP(sizeof(TdbObjectHeader), TDB_SECTION_ALIGN);

	memset(h, 0, off);
	h->magic = TDB_TRAFFIC_MAGIC;
	h->format_version = TDB_FORMAT_VERSION;
	h->header_size = sizeof(TdbObjectHeader);
	h->nsections = TDB_TRAFFIC_NSECTIONS;
	h->map_id = map_id;
	h->count = count;
	h->created_at_us = now_us;
	h->sections[TDB_TRAFFIC_ENTRIES].offset = off;
	h->sections[TDB_TRAFFIC_ENTRIES].size = count * sizeof(TdbTraffic);
	memcpy((char *) dst + off, entries, count * sizeof(TdbTraffic));
	/* the alignment gap after the entries too: the checksum covers it, and a
	 * reused buffer (or a scratch one) holds anything there */
	memset((char *) dst + off + count * sizeof(TdbTraffic), 0,
		   ALIGN_UP(off + count * sizeof(TdbTraffic), TDB_SECTION_ALIGN) - (off + count * sizeof(TdbTraffic)));
	off = ALIGN_UP(off + count * sizeof(TdbTraffic), TDB_SECTION_ALIGN);
	h->sections[TDB_TRAFFIC_INCIDENTS].offset = off;
	h->sections[TDB_TRAFFIC_INCIDENTS].size = incident_bytes;
	if (incident_bytes)
		memcpy((char *) dst + off, incidents, incident_bytes);
	h->total_size = tdb_traffic_size(count, incident_bytes);
	/* zero the alignment tail so the checksum covers defined bytes */
	memset((char *) dst + off + incident_bytes, 0, h->total_size - off - incident_bytes);

	/*
	 * The generation last: a buffer rewritten in place says 0 (set by the
	 * memset above, or earlier by the writer) until its content is complete.
	 */
	__atomic_store_n(&h->generation, generation, __ATOMIC_RELEASE);
	finish_header(h);
}

/* ---- validation --------------------------------------------------------------- */

#define CORRUPT(...) \
	do { snprintf(err, TDB_ERRLEN, __VA_ARGS__); return TDB_OBJ_ECORRUPT; } while (0)

/* Header, section table and overall size: shared by both kinds. */
static int
validate_header(const void *obj, size_t size, uint32_t magic, uint32_t nsections, char *err)
{
	const TdbObjectHeader *h = obj;
	uint64_t	prev_end;

	if (obj == NULL || size < sizeof(TdbObjectHeader))
		CORRUPT("object of %zu bytes is smaller than its %zu-byte header", size,
				sizeof(TdbObjectHeader));
	if (h->magic != magic)
		CORRUPT("bad magic 0x%08x, expected 0x%08x", h->magic, magic);
	if (h->format_version != TDB_FORMAT_VERSION)
		CORRUPT("format version %u, this reader understands %u", h->format_version,
				TDB_FORMAT_VERSION);
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

	rc = validate_header(obj, size, TDB_MAP_MAGIC, TDB_MAP_NSECTIONS, err);
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
		if (!decode_shape(v.shapes, v.shapes_size, r->shape_off, r->npoints, NULL))
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

	rc = validate_header(obj, size, TDB_TRAFFIC_MAGIC, TDB_TRAFFIC_NSECTIONS, err);
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
	if (level == TDB_VALIDATE_HEADER)
		return TDB_OBJ_OK;

	rc = validate_checksum(h, err);
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
	decode_shape(v->shapes, v->shapes_size, v->records[i].shape_off, v->records[i].npoints, xy);
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

	if (!shape_iter_init(&it, v->shapes, v->shapes_size, r->shape_off) ||
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

		if (shape_iter_init(&it, v->shapes, v->shapes_size, v->records[i].shape_off) &&
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
