/*
 * object_build.c
 *	  Making map and traffic objects: the map builder (locations in, sorted
 *	  into R-tree order once at finish, written as one object) and the
 *	  traffic object's writer.  Validation and reading are object.c's; see
 *	  object.h for the contract and docs/object-format.md for the bytes.
 *
 * The builder keeps shapes and names in growing buffers as locations come
 * in, then sorts records into R-tree order once, at finish.  Shapes are
 * stored as zigzag varint deltas at 1e-7 degree (OpenStreetMap's own
 * precision) when that round-trips every coordinate exactly, and as raw
 * doubles otherwise, so readers always get back the exact input.
 */
#include "object.h"
#include "object_shape.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "halves.h"

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

static inline uint64_t
zigzag(int64_t v)
{
	return ((uint64_t) v << 1) ^ (uint64_t) (v >> 63);
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
encode_shape(Buf *out, const double *xy, uint32_t npoints, const TdbBox *box)
{
	if (shape_fits_e7(xy, npoints))
	{
		TdbBoxF		leaf = tdb_boxf_from_boxd(box);	/* the leaf box the map will hold */
		int64_t		px,
					py;

		shape_box_origin(&leaf, &px, &py);

		/* worst case: 1 byte encoding + 10 bytes per varint */
		if (buf_reserve(out, 1 + (size_t) npoints * 20) != 0)
			return -1;
		out->data[out->len++] = SHAPE_E7_BOX;
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

int
tdb_map_builder_reserve(TdbMapBuilder *b, uint64_t n)
{
	BuildEntry *ne;

	if (n <= b->cap)
		return TDB_OBJ_OK;
	if (n > SIZE_MAX / sizeof(BuildEntry))
		return TDB_OBJ_ENOMEM;
	ne = realloc(b->entries, (size_t) n * sizeof(BuildEntry));
	if (ne == NULL)
		return TDB_OBJ_ENOMEM;
	b->entries = ne;
	b->cap = (size_t) n;
	return TDB_OBJ_OK;
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
	if (encode_shape(&b->shapes, xy, npoints, &e.box) != 0)
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

/* prefetch distance of the random gathers and scatters below */
#define GATHER_AHEAD 16

/* One of the builder's passes over the entries, in two halves (halves.h). */
typedef struct BuildPass
{
	const TdbMapBuilder *b;
	BuildEntry *sorted;			/* gather_half: the entries in tree order */
	char	   *dst;			/* zero_half, records_half: the object */
} BuildPass;

static void
gather_half(void *arg, int half)
{
	BuildPass  *bp = arg;
	const TdbMapBuilder *b = bp->b;
	uint64_t	lo,
				hi;

	tdb_half_range(b->n, half, &lo, &hi);
	for (uint64_t i = lo; i < hi; i++)
	{
		if (i + GATHER_AHEAD < hi)
		{
			const char *e = (const char *) &b->entries[b->perm[i + GATHER_AHEAD]];

			__builtin_prefetch(e);
			__builtin_prefetch(e + sizeof(BuildEntry) - 1);
		}
		bp->sorted[i] = b->entries[b->perm[i]];
	}
}

static void
leaf_boxes_half(void *arg, int half)
{
	const TdbMapBuilder *b = ((BuildPass *) arg)->b;
	uint64_t	lo,
				hi;

	tdb_half_range(b->n, half, &lo, &hi);
	for (uint64_t i = lo; i < hi; i++)
		b->boxes[i] = tdb_boxf_from_boxd(&b->entries[i].box);
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

	/* R-tree order, read from the entries' boxes in place */
	b->perm = malloc((n ? n : 1) * sizeof(uint32_t));
	if (b->perm == NULL ||
		tdb_rtree_order_strided(n ? &b->entries[0].box : NULL, sizeof(BuildEntry), n, b->perm) != 0)
		goto nomem;

	/*
	 * Put the entries in tree order once (one random gather), so that the
	 * boxes, the hash and the records below read them sequentially.
	 */
	{
		BuildEntry *sorted = malloc((n ? n : 1) * sizeof(BuildEntry));
		BuildPass	bp = {b, sorted, NULL};

		if (sorted == NULL)
			goto nomem;
		tdb_halves(gather_half, &bp, n);
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
	{
		BuildPass	bp = {b, NULL, NULL};

		tdb_halves(leaf_boxes_half, &bp, n);
	}
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

		/* slots are a random scatter: the one GATHER_AHEAD entries on is fetched now */
		if (i + GATHER_AHEAD < n)
			__builtin_prefetch(&b->hash[tdb_hash_id(b->entries[i + GATHER_AHEAD].id) & (b->hash_cap - 1)], 1);

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

static void
zero_half(void *arg, int half)
{
	BuildPass  *bp = arg;
	uint64_t	lo,
				hi;

	tdb_half_range(bp->b->total_size, half, &lo, &hi);
	memset(bp->dst + lo, 0, hi - lo);
}

static void
records_half(void *arg, int half)
{
	BuildPass  *bp = arg;
	const TdbMapBuilder *b = bp->b;
	TdbLocation *rec = (TdbLocation *) (bp->dst + b->sections[TDB_MAP_RECORDS].offset);
	uint64_t	lo,
				hi;

	tdb_half_range(b->n, half, &lo, &hi);
	for (uint64_t i = lo; i < hi; i++)
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
}

void
tdb_map_builder_write(const TdbMapBuilder *b, void *dst, uint64_t map_id, int64_t now_us)
{
	TdbObjectHeader *h = dst;
	char	   *base = dst;

	/* fresh pages fault on first touch: two threads take them twice as fast */
	{
		BuildPass	bp = {b, NULL, dst};

		tdb_halves(zero_half, &bp, b->total_size >> 6);
		tdb_halves(records_half, &bp, b->n);
	}
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

/*
 * Layout (format 2): header | ENTRIES | DIGEST | INCIDENTS, each on a
 * 64-byte boundary, every gap zero.  Only INCIDENTS moves the end.
 */
static void
traffic_layout(uint64_t count, size_t incident_bytes, TdbSection *sec, uint64_t *total)
{
	uint64_t	off = ALIGN_UP(sizeof(TdbObjectHeader), TDB_SECTION_ALIGN);

	sec[TDB_TRAFFIC_ENTRIES].offset = off;
	sec[TDB_TRAFFIC_ENTRIES].size = count * sizeof(TdbTraffic);
	off = ALIGN_UP(off + count * sizeof(TdbTraffic), TDB_SECTION_ALIGN);
	sec[TDB_TRAFFIC_DIGEST].offset = off;
	sec[TDB_TRAFFIC_DIGEST].size = sizeof(TdbTrafficDigest);
	off = ALIGN_UP(off + sizeof(TdbTrafficDigest), TDB_SECTION_ALIGN);
	sec[TDB_TRAFFIC_INCIDENTS].offset = off;
	sec[TDB_TRAFFIC_INCIDENTS].size = incident_bytes;
	*total = ALIGN_UP(off + incident_bytes, TDB_SECTION_ALIGN);
}

size_t
tdb_traffic_size(uint64_t count, size_t incident_bytes)
{
	TdbSection	sec[TDB_TRAFFIC_NSECTIONS];
	uint64_t	total;

	traffic_layout(count, incident_bytes, sec, &total);
	return total;
}

/* The header of a traffic object, generation 0 (set last, when the content is complete). */
static void
traffic_header(TdbObjectHeader *h, uint64_t map_id, uint64_t count, size_t incident_bytes,
			   int64_t now_us)
{
	uint64_t	total;

	memset(h, 0, sizeof(*h));
	h->magic = TDB_TRAFFIC_MAGIC;
	h->format_version = TDB_TRAFFIC_FORMAT_VERSION;
	h->header_size = sizeof(TdbObjectHeader);
	h->nsections = TDB_TRAFFIC_NSECTIONS;
	h->map_id = map_id;
	h->count = count;
	h->created_at_us = now_us;
	traffic_layout(count, incident_bytes, h->sections, &total);
	h->total_size = total;
}

uint32_t
tdb_traffic_root_crc(const TdbObjectHeader *h, const TdbTrafficDigest *d)
{
	uint32_t	crc = tdb_crc32c_update(TDB_CRC32C_INIT, (const char *) h + 12, sizeof(*h) - 12);

	return tdb_crc32c_final(tdb_crc32c_update(crc, d, sizeof(*d)));
}

static inline TdbTrafficDigest *
traffic_digest(TdbObjectHeader *h)
{
	return (TdbTrafficDigest *) ((char *) h + h->sections[TDB_TRAFFIC_DIGEST].offset);
}

/* INCIDENTS, the zero tail after it and its CRC; then the generation and the checksum */
static void
traffic_finish(TdbObjectHeader *h, uint64_t generation, uint64_t entries_sum, const void *incidents,
			   size_t incident_bytes)
{
	char	   *base = (char *) h;
	const TdbSection *sec = &h->sections[TDB_TRAFFIC_INCIDENTS];
	TdbTrafficDigest *d = traffic_digest(h);

	if (incident_bytes)
		memcpy(base + sec->offset, incidents, incident_bytes);
	memset(base + sec->offset + incident_bytes, 0, h->total_size - sec->offset - incident_bytes);
	d->entries = entries_sum;
	d->incidents_crc = tdb_crc32c(base + sec->offset, incident_bytes);
	d->zero = 0;
	/* the generation last: a buffer rewritten in place says 0 until its content is complete */
	__atomic_store_n(&h->generation, generation, __ATOMIC_RELEASE);
	h->checksum = tdb_traffic_root_crc(h, d);
}

void
tdb_traffic_write(void *dst, uint64_t map_id, uint64_t generation, uint64_t count,
				  const TdbTraffic *entries, const void *incidents, size_t incident_bytes,
				  int64_t now_us)
{
	TdbObjectHeader *h = dst;
	char	   *base = dst;
	TdbTraffic *out;
	uint64_t	sum = 0;
	const TdbSection *sec;

	/* a reused buffer keeps generation 0 until the end (see traffic_finish) */
	__atomic_store_n(&h->generation, 0, __ATOMIC_RELEASE);
	{
		TdbObjectHeader hdr;

		traffic_header(&hdr, map_id, count, incident_bytes, now_us);
		memcpy(base + 8, (char *) &hdr + 8, sizeof(hdr) - 8);
		memcpy(base, &hdr, 8);
	}
	out = (TdbTraffic *) (base + h->sections[TDB_TRAFFIC_ENTRIES].offset);
	memcpy(out, entries, count * sizeof(TdbTraffic));
	for (uint64_t i = 0; i < count; i++)
		sum += tdb_traffic_entry_hash(i, &out[i]);
	/* every gap zero: a reused buffer (or a scratch one) holds anything there */
	sec = &h->sections[TDB_TRAFFIC_ENTRIES];
	memset(base + sec->offset + sec->size, 0, sec[1].offset - sec->offset - sec->size);
	sec = &h->sections[TDB_TRAFFIC_DIGEST];
	memset(base + sec->offset + sec->size, 0, sec[1].offset - sec->offset - sec->size);
	traffic_finish(h, generation, sum, incidents, incident_bytes);
}

void
tdb_traffic_update(void *dst, uint64_t generation, const TdbTraffic *entries,
				   const TdbIndexSpan *spans, int nspans, const void *incidents,
				   size_t incident_bytes, int64_t now_us)
{
	TdbObjectHeader *h = dst;
	uint64_t	count = h->count;
	TdbTraffic *out = (TdbTraffic *) ((char *) dst + h->sections[TDB_TRAFFIC_ENTRIES].offset);
	uint64_t	sum = traffic_digest(h)->entries;
	uint64_t	total;

	__atomic_store_n(&h->generation, 0, __ATOMIC_RELEASE);
	for (int s = 0; s < nspans; s++)
		for (uint64_t k = 0; k < spans[s].n; k++)
		{
			uint32_t	i = spans[s].idx[k];

			if (i >= count)
				continue;
			if (k + 8 < spans[s].n)
			{
				__builtin_prefetch(&out[spans[s].idx[k + 8]], 1);
				__builtin_prefetch(&entries[spans[s].idx[k + 8]]);
			}
			sum -= tdb_traffic_entry_hash(i, &out[i]);
			out[i] = entries[i];
			sum += tdb_traffic_entry_hash(i, &out[i]);
		}
	h->created_at_us = now_us;
	traffic_layout(count, incident_bytes, h->sections, &total);
	h->total_size = total;
	traffic_finish(h, generation, sum, incidents, incident_bytes);
}

uint32_t
tdb_traffic_checksum_sum(uint64_t map_id, uint64_t generation, uint64_t count, uint64_t entries_sum,
						 const void *incidents, size_t incident_bytes, int64_t now_us)
{
	TdbObjectHeader h;
	TdbTrafficDigest d = {entries_sum, 0, 0};

	traffic_header(&h, map_id, count, incident_bytes, now_us);
	h.generation = generation;
	d.incidents_crc = tdb_crc32c(incidents, incident_bytes);
	return tdb_traffic_root_crc(&h, &d);
}

uint32_t
tdb_traffic_checksum_of(uint64_t map_id, uint64_t generation, uint64_t count,
						const TdbTraffic *entries, const void *incidents, size_t incident_bytes,
						int64_t now_us)
{
	uint64_t	sum = 0;

	for (uint64_t i = 0; i < count; i++)
		sum += tdb_traffic_entry_hash(i, &entries[i]);
	return tdb_traffic_checksum_sum(map_id, generation, count, sum, incidents, incident_bytes, now_us);
}
