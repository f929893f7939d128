/*
 * trafficdb.h
 *	  libtrafficdb: read trafficdb's published road map and live traffic
 *	  straight from shared memory, with no SQL and no PostgreSQL headers.
 *
 * Usage:
 *	  trafficdb_handle *h;
 *	  if (trafficdb_open("/trafficdb.5432", &h) != TRAFFICDB_OK) ...   // SHOW trafficdb.shm_name, or /trafficdb.<port>
 *	  uint64_t gen;
 *	  trafficdb_begin(h, &gen);                                   // pin a version: no lock, no system call
 *	  trafficdb_location loc;
 *	  if (trafficdb_get(h, 45314201, &loc) == TRAFFICDB_OK)
 *	      printf("%s %.1f km/h\n", loc.name, loc.traffic->speed_kmh);
 *	  if (trafficdb_end(h) == TRAFFICDB_REVOKED) ...              // held too long: read again (see below)
 *	  trafficdb_close(h);
 *
 * Every call returns an int: TRAFFICDB_OK (0) or a negative code outside the errno
 * range; trafficdb_strerror() describes it, trafficdb_errmsg() gives the details of the
 * last failure on a handle (trafficdb_errmsg(NULL): of the calling thread's last failed
 * trafficdb_open).
 *
 * Holding a version: publication never waits for a reader.  A version superseded
 * longer than trafficdb.reader_pin_timeout ago (10 s by default) is revoked even
 * if a reader still pins it; its memory is not reused under the reader, so what
 * was read stays intact, and trafficdb_end() (or trafficdb_check()) returns
 * TRAFFICDB_REVOKED to say the snapshot was taken away.  The same code says that
 * the version was rewritten under the reader (another process with write access
 * to the reader slots cleared its pin): then what was read may be mixed, and the
 * caller should read again.
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

/* The version of this header; trafficdb_version() gives the library's. */
#define TRAFFICDB_VERSION_MAJOR	0
#define TRAFFICDB_VERSION_MINOR	2
#define TRAFFICDB_VERSION_PATCH	0
#define TRAFFICDB_VERSION_STRING	"0.2.0"
#define TRAFFICDB_VERSION_NUMBER	(TRAFFICDB_VERSION_MAJOR * 10000 + TRAFFICDB_VERSION_MINOR * 100 + TRAFFICDB_VERSION_PATCH)

#define TRAFFICDB_OK				0
#define TRAFFICDB_NOTFOUND		(-30700)	/* no location with that id */
#define TRAFFICDB_NOTRUNNING		(-30701)	/* no shared memory under that name: server down, or not preloaded */
#define TRAFFICDB_PERMISSION		(-30702)	/* not allowed to map it (see trafficdb.shm_group) */
#define TRAFFICDB_INVALID			(-30703)	/* not trafficdb's shared memory, or another format version */
#define TRAFFICDB_NOSLOT			(-30704)	/* every external reader slot is taken (trafficdb.max_external_readers) */
#define TRAFFICDB_EMPTY			(-30705)	/* nothing published yet (no map loaded) */
#define TRAFFICDB_STALE			(-30706)	/* the server stopped: trafficdb_close, then trafficdb_open again */
#define TRAFFICDB_CORRUPT			(-30707)	/* an object failed validation */
#define TRAFFICDB_SYSTEM			(-30708)	/* a system call failed (see trafficdb_errmsg) */
#define TRAFFICDB_NOSNAPSHOT		(-30709)	/* the call needs trafficdb_begin first */
#define TRAFFICDB_BADARG			(-30710)	/* an argument is out of range (NULL, NaN, negative radius) */
#define TRAFFICDB_TIMEOUT			(-30711)	/* trafficdb_wait: no publication within the timeout */
#define TRAFFICDB_NOMEM			(-30712)
#define TRAFFICDB_REVOKED			(-30713)	/* the pinned version was revoked (reader_pin_timeout): read again */

typedef struct trafficdb_handle trafficdb_handle;

/* Current traffic of a location, as published (zero-copy, read-only). */
typedef struct trafficdb_traffic
{
	int64_t		updated_at_us;	/* Unix microseconds; 0 = no traffic known */
	uint64_t	changed_generation;
	float		speed_kmh;		/* NaN = unknown */
	float		free_flow_kmh;	/* NaN = unknown */
	uint32_t	incident_offset;	/* use trafficdb_location.incident */
	uint8_t		congestion;		/* 0 free .. 4 standstill, 255 unknown */
	uint8_t		confidence;		/* 0 .. 100, 255 unknown (NULL in the feed) */
	uint16_t	flags;
} trafficdb_traffic;

/* A location of the pinned version: pointers into shared memory, valid until trafficdb_end. */
typedef struct trafficdb_location
{
	uint64_t	id;
	uint64_t	index;			/* record number in this map (for trafficdb_shape) */
	const char *name;			/* "" when none */
	const char *road_class;		/* "" when none */
	float		length_m;
	uint16_t	speed_limit_kmh;	/* 0 = unknown */
	uint8_t		oneway;
	uint32_t	npoints;
	const trafficdb_traffic *traffic;
	const char *incident;		/* NULL when none; not NUL-terminated: incident_len bytes */
	uint32_t	incident_len;
} trafficdb_location;

/* Called for each location a query finds; return nonzero to stop. */
typedef int (*trafficdb_visit_fn) (const trafficdb_location *loc, void *arg);

/* The library's version as TRAFFICDB_VERSION_NUMBER (major * 10000 + minor * 100 + patch). */
int			trafficdb_version(void);

const char *trafficdb_strerror(int code);
const char *trafficdb_errmsg(const trafficdb_handle *h);

int			trafficdb_open(const char *name, trafficdb_handle **out);
void		trafficdb_close(trafficdb_handle *h);

/* Pin the active version; *generation receives its generation (may be NULL). */
int			trafficdb_begin(trafficdb_handle *h, uint64_t *generation);

/*
 * Unpin.  TRAFFICDB_OK, or TRAFFICDB_REVOKED if the version was revoked or
 * rewritten while pinned (see "Holding a version" above); TRAFFICDB_NOSNAPSHOT
 * without a trafficdb_begin.
 */
int			trafficdb_end(trafficdb_handle *h);

/* Is the pinned version still intact?  TRAFFICDB_OK or TRAFFICDB_REVOKED; two loads. */
int			trafficdb_check(const trafficdb_handle *h);

/* When the pinned version was published (Unix microseconds). */
int			trafficdb_published_at(trafficdb_handle *h, int64_t *unix_us);

/* The location with that id (TRAFFICDB_NOTFOUND when the pinned map has none). */
int			trafficdb_get(trafficdb_handle *h, uint64_t id, trafficdb_location *out);

/*
 * Only its traffic: the fastest single lookup (no view to fill), for
 * callers that need the live speed of a known id, as a router does.
 */
int			trafficdb_get_traffic(trafficdb_handle *h, uint64_t id, const trafficdb_traffic **out);

/* n lookups with prefetching; found[i] is 1 or 0; returns the number found. */
int			trafficdb_get_many(trafficdb_handle *h, const uint64_t *ids, size_t n, trafficdb_location *out, uint8_t *found);

/* The shape of a location: 2 * npoints doubles (lon, lat) into xy. */
int			trafficdb_shape(trafficdb_handle *h, const trafficdb_location *loc, double *xy);

/* Locations whose bounding box meets the box (degrees, EPSG:4326). */
int			trafficdb_bbox(trafficdb_handle *h, double xmin, double ymin, double xmax, double ymax,
					 trafficdb_visit_fn fn, void *arg);

/* Locations within metres of (lon, lat) (local equirectangular distance). */
int			trafficdb_radius(trafficdb_handle *h, double lon, double lat, double metres, trafficdb_visit_fn fn, void *arg);

/* The k nearest locations to (lon, lat), nearest first (metres). */
int			trafficdb_knn(trafficdb_handle *h, double lon, double lat, uint32_t k, trafficdb_visit_fn fn, void *arg);

/* Locations whose traffic changed after generation since, in the pinned version. */
int			trafficdb_changes_since(trafficdb_handle *h, uint64_t since, trafficdb_visit_fn fn, void *arg);

/*
 * Block until a generation newer than after is published, or timeout_ms
 * passes (TRAFFICDB_TIMEOUT); no polling: a futex on the shared notify word.
 * Needs no snapshot.  *generation receives the newest generation.
 */
int			trafficdb_wait(trafficdb_handle *h, uint64_t after, int timeout_ms, uint64_t *generation);

#ifdef __cplusplus
}
#endif

#endif							/* TRAFFICDB_H */
