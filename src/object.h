/*
 * object.h
 *	  trafficdb's two kinds of object, as in the TrafficDB paper: the map
 *	  object (static: location records, shapes, names, a hash index by
 *	  location id, a packed R-tree) and the traffic object (dynamic: current
 *	  traffic per location, in the map's record order).
 *
 * Both are single contiguous, position-independent buffers (offsets, never
 * pointers) that start with TdbObjectHeader: magic, format version, the
 * object's size, a section table and a CRC-32C.  The daemon writes them into
 * shared memory; readers map them read-only and check them with
 * tdb_*_validate() before use.  docs/object-format.md describes the bytes.
 *
 * Publishing new traffic writes a new traffic object only: entry i of a
 * traffic object is the traffic of record i of the map object it names.
 *
 * No PostgreSQL headers: the module, libtrafficdb and the tests share this.
 */
#ifndef TDB_OBJECT_H
#define TDB_OBJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "geo.h"
#include "knn.h"
#include "rtree.h"

#define TDB_MAP_MAGIC		0x4D424454u /* "TDBM" in memory order */
#define TDB_TRAFFIC_MAGIC	0x54424454u /* "TDBT" */
#define TDB_FORMAT_VERSION	2		/* map objects: shapes from their leaf box's corner */
#define TDB_TRAFFIC_FORMAT_VERSION 2	/* traffic objects: a digest updated per entry */
#define TDB_MAX_SECTIONS	8
#define TDB_SECTION_ALIGN	64	/* every section starts on a cache line */

typedef struct TdbSection
{
	uint64_t	offset;			/* from the start of the object */
	uint64_t	size;			/* bytes */
} TdbSection;

typedef struct TdbObjectHeader
{
	uint32_t	magic;
	uint16_t	format_version;
	uint16_t	header_size;	/* sizeof(TdbObjectHeader) */
	uint32_t	checksum;		/* map: CRC-32C of bytes [12, total_size); traffic: of the header and its DIGEST */
	uint32_t	nsections;
	uint64_t	total_size;
	uint64_t	map_id;			/* map: its id; traffic: the map it belongs to */
	uint64_t	generation;		/* traffic: publication generation; map: 0 */
	uint64_t	count;			/* locations */
	int64_t		created_at_us;	/* Unix time, microseconds */
	uint32_t	aux;			/* map: R-tree levels; traffic: 0 */
	uint32_t	reserved;
	TdbSection	sections[TDB_MAX_SECTIONS];
} TdbObjectHeader;

/* Map object sections. */
enum
{
	TDB_MAP_RECORDS = 0,		/* TdbLocation[count], in R-tree leaf order */
	TDB_MAP_BOXES,				/* TdbBoxF[], all R-tree levels */
	TDB_MAP_LEVELS,				/* TdbRtreeLevel[levels] */
	TDB_MAP_HASH,				/* uint64_t slots[], a power of two */
	TDB_MAP_SHAPES,				/* encoded LineStrings */
	TDB_MAP_STRINGS,			/* NUL-terminated names; offset 0 is "" */
	TDB_MAP_CLASSES,			/* uint32_t offsets into STRINGS, one per road class */
	TDB_MAP_NSECTIONS
};

/*
 * Traffic object sections.  The header's checksum covers the header and the
 * DIGEST section only; DIGEST holds the sum of a 64-bit hash of each entry
 * and its index (tdb_traffic_entry_hash), and the CRC-32C of INCIDENTS: a
 * publication that changed k entries updates the sum in O(k)
 * (docs/object-format.md).
 */
enum
{
	TDB_TRAFFIC_ENTRIES = 0,	/* TdbTraffic[count] */
	TDB_TRAFFIC_DIGEST,			/* TdbTrafficDigest */
	TDB_TRAFFIC_INCIDENTS,		/* uint32_t length + bytes, per incident; offset 0 unused */
	TDB_TRAFFIC_NSECTIONS
};

#define TDB_LOC_ONEWAY		0x01

/* One road segment of the map: 32 bytes. */
typedef struct TdbLocation
{
	uint64_t	id;
	uint64_t	shape_off;		/* into SHAPES */
	float		length_m;
	uint32_t	name_off;		/* into STRINGS; 0 = no name */
	uint16_t	speed_limit_kmh;	/* 0 = unknown */
	uint8_t		road_class;		/* index into CLASSES */
	uint8_t		flags;			/* TDB_LOC_* */
	uint32_t	npoints;
} TdbLocation;

#define TDB_CONGESTION_UNKNOWN 255
#define TDB_CONFIDENCE_UNKNOWN 255	/* a NULL confidence (not 0: that is a value) */
#define TDB_CONGESTION_MAX 4

/* The DIGEST section of a traffic object: 16 bytes. */
typedef struct TdbTrafficDigest
{
	uint64_t	entries;		/* sum mod 2^64 of tdb_traffic_entry_hash(i, entry i) */
	uint32_t	incidents_crc;	/* CRC-32C of the INCIDENTS section */
	uint32_t	zero;
} TdbTrafficDigest;

/* Current traffic of one location: 32 bytes, two per cache line. */
typedef struct TdbTraffic
{
	int64_t		updated_at_us;	/* observation time; 0 = no traffic known */
	uint64_t	changed_gen;	/* generation that last changed this entry */
	float		speed_kmh;		/* NaN = unknown */
	float		free_flow_kmh;	/* NaN = unknown */
	uint32_t	incident_off;	/* into INCIDENTS; 0 = no incident */
	uint8_t		congestion;		/* 0 (free) .. 4 (standstill), 255 unknown */
	uint8_t		confidence;		/* 0 .. 100, 255 unknown */
	uint16_t	flags;
} TdbTraffic;

/* Result codes of this file's functions (negative = error). */
typedef enum TdbObjResult
{
	TDB_OBJ_OK = 0,
	TDB_OBJ_ENOMEM = -1,
	TDB_OBJ_EINVAL = -2,		/* bad input: see the error text */
	TDB_OBJ_EDUPLICATE = -3,	/* a location id given twice */
	TDB_OBJ_ECORRUPT = -4,		/* validation failed: see the error text */
	TDB_OBJ_ELIMIT = -5			/* a format limit (e.g. 256 road classes): the whole input is refused */
} TdbObjResult;

#define TDB_ERRLEN 256

/* ---- building a map object (the daemon) ----------------------------------- */

typedef struct TdbMapBuilder TdbMapBuilder;

TdbMapBuilder *tdb_map_builder_create(void);

/*
 * Room for n locations in one allocation (optional: adding grows the
 * builder as needed, doubling, which at 100 M locations holds up to twice
 * the memory).  TDB_OBJ_ENOMEM when it cannot.
 */
int			tdb_map_builder_reserve(TdbMapBuilder *b, uint64_t n);
void		tdb_map_builder_free(TdbMapBuilder *b);

/*
 * Add one location.  xy holds npoints (x = longitude, y = latitude) pairs in
 * degrees, EPSG:4326.  Refuses (TDB_OBJ_EINVAL, with a reason in err) fewer
 * than 2 points, non-finite or out-of-range coordinates, more than 255
 * distinct road classes.  name and road_class may be NULL.  Duplicate ids
 * are found by tdb_map_builder_finish().
 */
int			tdb_map_builder_add(TdbMapBuilder *b, uint64_t id, const double *xy, uint32_t npoints,
								const char *road_class, const char *name, uint16_t speed_limit_kmh,
								uint8_t flags, char *err);

/*
 * Sort into R-tree order, build the index structures and compute the
 * object's size.  After this, tdb_map_builder_size() is valid.  Fails with
 * TDB_OBJ_EDUPLICATE (naming the id in err) if an id was added twice.
 */
int			tdb_map_builder_finish(TdbMapBuilder *b, char *err);
size_t		tdb_map_builder_size(const TdbMapBuilder *b);
uint64_t	tdb_map_builder_count(const TdbMapBuilder *b);

/* Write the finished object (tdb_map_builder_size() bytes) to dst. */
void		tdb_map_builder_write(const TdbMapBuilder *b, void *dst, uint64_t map_id, int64_t now_us);

/* ---- building a traffic object ------------------------------------------- */

/* Size of a traffic object with count entries and incident_bytes of incident text. */
size_t		tdb_traffic_size(uint64_t count, size_t incident_bytes);

/*
 * Write a traffic object: entries[count] in map record order, incidents the
 * INCIDENTS section body (its first 4 bytes unused so that offset 0 means
 * none), incident_bytes its length (0 for none).
 */
void		tdb_traffic_write(void *dst, uint64_t map_id, uint64_t generation, uint64_t count,
							  const TdbTraffic *entries, const void *incidents,
							  size_t incident_bytes, int64_t now_us);

/* Sorted or not, with repeats or not: the records an in-place update copies. */
typedef struct TdbIndexSpan
{
	const uint32_t *idx;
	uint64_t	n;
} TdbIndexSpan;

/*
 * Bring a traffic object written by tdb_traffic_write (or updated by this)
 * for the same map and count up to date in place, in O(changed entries +
 * incident bytes): copy entries[idx] for every index of the spans (indices
 * >= count are ignored; repeats cost nothing), updating the digest by the
 * difference of each entry's hash, replace INCIDENTS and reseal the header.
 * The caller guarantees that every entry not named in a span is equal in
 * dst and entries, and that dst has room for tdb_traffic_size(count,
 * incident_bytes) bytes.  The result is byte-identical to tdb_traffic_write's.
 */
void		tdb_traffic_update(void *dst, uint64_t generation, const TdbTraffic *entries,
							   const TdbIndexSpan *spans, int nspans, const void *incidents,
							   size_t incident_bytes, int64_t now_us);

/*
 * The checksum tdb_traffic_write would store for these contents, computed
 * without writing an object (replay's check of each generation).
 */
uint32_t	tdb_traffic_checksum_of(uint64_t map_id, uint64_t generation, uint64_t count,
									const TdbTraffic *entries, const void *incidents,
									size_t incident_bytes, int64_t now_us);

/* A traffic object's header checksum: CRC-32C of header bytes [12, header_size), then the digest. */
uint32_t	tdb_traffic_root_crc(const TdbObjectHeader *h, const TdbTrafficDigest *d);

/* The same from the entries' digest (the sum of tdb_traffic_entry_hash), kept up to date elsewhere. */
uint32_t	tdb_traffic_checksum_sum(uint64_t map_id, uint64_t generation, uint64_t count,
									 uint64_t entries_sum, const void *incidents, size_t incident_bytes,
									 int64_t now_us);

/* ---- validation ------------------------------------------------------------ */

typedef enum TdbValidateLevel
{
	TDB_VALIDATE_HEADER = 0,	/* O(1): header, section table, sizes vs count */
	TDB_VALIDATE_FULL = 1		/* O(n): also checksum and every invariant */
} TdbValidateLevel;

/*
 * Check an object of size bytes at obj before reading it.  Returns TDB_OBJ_OK
 * or TDB_OBJ_ECORRUPT with a description in err (TDB_ERRLEN bytes).  After
 * TDB_VALIDATE_FULL every accessor below is memory-safe on the object.
 */
int			tdb_map_validate(const void *obj, size_t size, TdbValidateLevel level, char *err);
int			tdb_traffic_validate(const void *obj, size_t size, TdbValidateLevel level,
								 const TdbObjectHeader *map, char *err);

/* ---- reading a map object ------------------------------------------------ */

/* A validated map object, viewed through its sections. */
typedef struct TdbMapView
{
	const TdbObjectHeader *hdr;
	const TdbLocation *records;
	const uint64_t *hash;
	uint64_t	hash_mask;
	const uint8_t *shapes;
	uint64_t	shapes_size;
	const char *strings;
	uint64_t	strings_size;
	const uint32_t *classes;
	uint32_t	nclasses;
	TdbRtree	rtree;
	uint64_t	count;
} TdbMapView;

void		tdb_map_view_init(TdbMapView *v, const void *obj);

/* Decode the shape of record i into xy (2 * npoints doubles). */
void		tdb_map_shape(const TdbMapView *v, uint64_t i, double *xy);

/* Exact bounding box of record i (from its shape). */
void		tdb_map_bbox(const TdbMapView *v, uint64_t i, TdbBox *box);

/*
 * Distance from (x, y) to the shape of record i under a metric (see
 * rtree.h); for TDB_METRIC_METRES the projection is centred on (x, y).
 */
double		tdb_map_distance(const TdbMapView *v, uint64_t i, double x, double y, TdbMetric metric);

/* Records whose float box intersects q (a superset of the exact answer). */
int			tdb_map_query_box(const TdbMapView *v, const TdbBox *q, TdbRtreeVisit visit, void *arg);

/*
 * Records whose shape lies within radius_m metres of (x, y) (metric
 * TDB_METRIC_METRES).  Returns the visitor's stop value, 0, or
 * TDB_OBJ_EINVAL for a negative or non-finite radius or point.
 */
int			tdb_map_query_radius(const TdbMapView *v, double x, double y, double radius_m,
								 TdbRtreeVisit visit, void *arg);

/*
 * Exact planar distance (degrees, ST_Distance of the 2-D geometries) from
 * a knn.h query to the shape of record i.
 */
double		tdb_map_query_dist(const TdbMapView *v, uint64_t i, const TdbKnnQuery *q);

/* A TdbKnnExact for incremental scans of a map: arg is a TdbMapQuery *. */
typedef struct TdbMapQuery
{
	const TdbMapView *map;
	const TdbKnnQuery *query;
} TdbMapQuery;

double		tdb_map_query_exact(uint64_t e, void *query_map);

/*
 * How far, in metres, the map's edges taken as geography (great-circle
 * arcs) can leave the records' lon/lat vertex boxes: the slack_m of a
 * TdbKnnGeoPoint.  +infinity when an edge spans 180 degrees of longitude or
 * more.  O(points of the map): compute once per map.
 */
double		tdb_map_arc_slack_m(const TdbMapView *v);

/* k nearest records by exact shape distance; see tdb_rtree_knn(). */
int64_t		tdb_map_knn(const TdbMapView *v, double x, double y, TdbMetric metric, uint64_t k,
						TdbKnnResult *out);

/* ---- reading a traffic object -------------------------------------------- */

/*
 * The hash of entry i in the DIGEST: each step (xor a word, multiply by an
 * odd constant, xor-shift) is a bijection of the state, so a change in any
 * one word of an entry always changes its hash, and the index makes two
 * entries that trade places change the sum.
 */
static inline uint64_t
tdb_traffic_entry_hash(uint64_t i, const TdbTraffic *e)
{
	uint64_t	w[4];
	uint64_t	h = (i + 1) * 0x9e3779b97f4a7c15ull;

	memcpy(w, e, sizeof(w));
	for (int k = 0; k < 4; k++)
	{
		h = (h ^ w[k]) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	h *= 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 29);
}

static inline const TdbTraffic *
tdb_traffic_entries(const void *obj)
{
	const TdbObjectHeader *h = (const TdbObjectHeader *) obj;

	return (const TdbTraffic *) ((const char *) obj + h->sections[TDB_TRAFFIC_ENTRIES].offset);
}

/* ---- the lookup path, inline: it is the hot path of every reader -------- */

/* Hash of a location id, as used by the map's hash index. */
static inline uint64_t
tdb_hash_id(uint64_t id)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdull;
	id ^= id >> 33;
	id *= 0xc4ceb9fe1a85ec53ull;
	id ^= id >> 33;
	return id;
}

/*
 * Record index of a location id, or -1.  Slots hold (tag << 32 | index + 1):
 * the tag rejects most wrong slots without touching the record.  Bounded
 * even on a table with no empty slot.
 */
static inline int64_t
tdb_map_find(const TdbMapView *v, uint64_t id)
{
	uint64_t	h = tdb_hash_id(id);
	uint64_t	tag = h >> 32;
	uint64_t	pos = h & v->hash_mask;

	for (uint64_t probes = 0; probes <= v->hash_mask; probes++)
	{
		uint64_t	s = v->hash[pos];

		if (__builtin_expect(s == 0, 0))
			return -1;
		if ((s >> 32) == tag)
		{
			uint32_t	idx = (uint32_t) s - 1;

			if (__builtin_expect(idx < v->count && v->records[idx].id == id, 1))
				return idx;
		}
		pos = (pos + 1) & v->hash_mask;
	}
	return -1;
}

/*
 * Record indexes of n location ids (-1 for an unknown one), in a pipeline
 * that keeps about 16 lookups' cache misses in flight: the hash slot of
 * ids[k + 16], the record (and, when extra is not NULL, the line at
 * extra + index * extra_stride: the caller's per-record array it writes
 * next, e.g. its working traffic) of ids[k + 8], then ids[k] completed.
 * Random ids then cost about one memory latency per 8 instead of three
 * each.
 */
void		tdb_map_find_many(const TdbMapView *v, const uint64_t *ids, size_t n, int64_t *out,
							  const void *extra, size_t extra_stride);

/* Hint the CPU to fetch the hash slot of id (batched lookups). */
static inline void
tdb_map_prefetch(const TdbMapView *v, uint64_t id)
{
	__builtin_prefetch(&v->hash[tdb_hash_id(id) & v->hash_mask]);
}

/* Name and road class of record i ("" when absent; validated offsets). */
static inline const char *
tdb_map_name(const TdbMapView *v, uint64_t i)
{
	return v->strings + v->records[i].name_off;
}

static inline const char *
tdb_map_class(const TdbMapView *v, uint64_t i)
{
	return v->strings + v->classes[v->records[i].road_class];
}

/*
 * Incident text of an entry: sets *len and returns a pointer to its bytes
 * (not NUL-terminated), or NULL when the entry has none or its offset is
 * out of bounds.
 */
static inline const char *
tdb_traffic_incident(const void *obj, const TdbTraffic *t, uint32_t *len)
{
	const TdbObjectHeader *h = (const TdbObjectHeader *) obj;
	uint64_t	isize = h->sections[TDB_TRAFFIC_INCIDENTS].size;
	const char *base = (const char *) obj + h->sections[TDB_TRAFFIC_INCIDENTS].offset;
	uint32_t	l;

	if (__builtin_expect(t->incident_off == 0, 1) || isize < 4 || t->incident_off > isize - 4)
		return NULL;
	memcpy(&l, base + t->incident_off, 4);
	if (l > isize - 4 - t->incident_off)
		return NULL;
	*len = l;
	return base + t->incident_off + 4;
}

#endif							/* TDB_OBJECT_H */
