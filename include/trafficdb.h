/*
 * trafficdb.h
 *	  libtrafficdb: read trafficdb's published road map and live traffic
 *	  straight from shared memory, with no SQL and no PostgreSQL headers.
 *
 * Usage:
 *	  tdb_handle *h;
 *	  if (tdb_open("/trafficdb.5432", &h) != TDB_OK) ...   // SHOW trafficdb.shm_name, or /trafficdb.<port>
 *	  uint64_t gen;
 *	  tdb_begin(h, &gen);                                   // pin a version: no lock, no system call
 *	  tdb_location loc;
 *	  if (tdb_get(h, 45314201, &loc) == TDB_OK)
 *	      printf("%s %.1f km/h\n", loc.name, loc.traffic->speed_kmh);
 *	  tdb_end(h);                                           // pointers into the version are now invalid
 *	  tdb_close(h);
 *
 * Every call returns an int: TDB_OK (0) or a negative code outside the errno
 * range; tdb_strerror() describes it, tdb_errmsg() gives the details of the
 * last failure on a handle.
 *
 * Threads: a handle belongs to one thread at a time (it holds that thread's
 * reader slot and snapshot).  Open one handle per thread; handles are
 * independent and lock-free.
 */
#ifndef TRAFFICDB_H
#define TRAFFICDB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C"
{
#endif

#define TDB_OK				0
#define TDB_NOTFOUND		(-30700)	/* no location with that id */
#define TDB_NOTRUNNING		(-30701)	/* no shared memory under that name: server down, or not preloaded */
#define TDB_PERMISSION		(-30702)	/* not allowed to map it (see trafficdb.shm_group) */
#define TDB_INVALID			(-30703)	/* not trafficdb's shared memory, or another format version */
#define TDB_NOSLOT			(-30704)	/* every external reader slot is taken (trafficdb.max_external_readers) */
#define TDB_EMPTY			(-30705)	/* nothing published yet (no map loaded) */
#define TDB_STALE			(-30706)	/* the server stopped: tdb_close, then tdb_open again */
#define TDB_CORRUPT			(-30707)	/* an object failed validation */
#define TDB_SYSTEM			(-30708)	/* a system call failed (see tdb_errmsg) */
#define TDB_NOSNAPSHOT		(-30709)	/* the call needs tdb_begin first */
#define TDB_BADARG			(-30710)	/* an argument is out of range (NULL, NaN, negative radius) */
#define TDB_TIMEOUT			(-30711)	/* tdb_wait: no publication within the timeout */
#define TDB_NOMEM			(-30712)

typedef struct tdb_handle tdb_handle;

/* Current traffic of a location, as published (zero-copy, read-only). */
typedef struct tdb_traffic
{
	int64_t		updated_at_us;	/* Unix microseconds; 0 = no traffic known */
	uint64_t	changed_generation;
	float		speed_kmh;		/* NaN = unknown */
	float		free_flow_kmh;	/* NaN = unknown */
	uint32_t	incident_offset;	/* use tdb_location.incident */
	uint8_t		congestion;		/* 0 free .. 4 standstill, 255 unknown */
	uint8_t		confidence;		/* 0 .. 100 */
	uint16_t	flags;
} tdb_traffic;

/* A location of the pinned version: pointers into shared memory, valid until tdb_end. */
typedef struct tdb_location
{
	uint64_t	id;
	uint64_t	index;			/* record number in this map (for tdb_shape) */
	const char *name;			/* "" when none */
	const char *road_class;		/* "" when none */
	float		length_m;
	uint16_t	speed_limit_kmh;	/* 0 = unknown */
	uint8_t		oneway;
	uint32_t	npoints;
	const tdb_traffic *traffic;
	const char *incident;		/* NULL when none; not NUL-terminated: incident_len bytes */
	uint32_t	incident_len;
} tdb_location;

/* Called for each location a query finds; return nonzero to stop. */
typedef int (*tdb_visit_fn) (const tdb_location *loc, void *arg);

const char *tdb_strerror(int code);
const char *tdb_errmsg(const tdb_handle *h);

int			tdb_open(const char *name, tdb_handle **out);
void		tdb_close(tdb_handle *h);

/* Pin the active version; *generation receives its generation (may be NULL). */
int			tdb_begin(tdb_handle *h, uint64_t *generation);
void		tdb_end(tdb_handle *h);

/* When the pinned version was published (Unix microseconds). */
int			tdb_published_at(tdb_handle *h, int64_t *unix_us);

/* The location with that id (TDB_NOTFOUND when the pinned map has none). */
int			tdb_get(tdb_handle *h, uint64_t id, tdb_location *out);

/*
 * Only its traffic: the fastest single lookup (no view to fill), for
 * callers that need the live speed of a known id, as a router does.
 */
int			tdb_get_traffic(tdb_handle *h, uint64_t id, const tdb_traffic **out);

/* n lookups with prefetching; found[i] is 1 or 0; returns the number found. */
int			tdb_get_many(tdb_handle *h, const uint64_t *ids, size_t n, tdb_location *out, uint8_t *found);

/* The shape of a location: 2 * npoints doubles (lon, lat) into xy. */
int			tdb_shape(tdb_handle *h, const tdb_location *loc, double *xy);

/* Locations whose bounding box meets the box (degrees, EPSG:4326). */
int			tdb_bbox(tdb_handle *h, double xmin, double ymin, double xmax, double ymax,
					 tdb_visit_fn fn, void *arg);

/* Locations within metres of (lon, lat) (local equirectangular distance). */
int			tdb_radius(tdb_handle *h, double lon, double lat, double metres, tdb_visit_fn fn, void *arg);

/* The k nearest locations to (lon, lat), nearest first (metres). */
int			tdb_knn(tdb_handle *h, double lon, double lat, uint32_t k, tdb_visit_fn fn, void *arg);

/* Locations whose traffic changed after generation since, in the pinned version. */
int			tdb_changes_since(tdb_handle *h, uint64_t since, tdb_visit_fn fn, void *arg);

/*
 * Block until a generation newer than after is published, or timeout_ms
 * passes (TDB_TIMEOUT); no polling: a futex on the shared notify word.
 * Needs no snapshot.  *generation receives the newest generation.
 */
int			tdb_wait(tdb_handle *h, uint64_t after, int timeout_ms, uint64_t *generation);

#ifdef __cplusplus
}
#endif

#endif							/* TRAFFICDB_H */
