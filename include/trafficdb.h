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
#define TRAFFICDB_NOSLOT			(-30704)	/* every slot is taken: readers (trafficdb.max_external_readers), subscribers (trafficdb.max_subscribers), writers (trafficdb.max_writers) or request cells */
#define TRAFFICDB_EMPTY			(-30705)	/* nothing published yet (no map loaded) */
#define TRAFFICDB_STALE			(-30706)	/* the server stopped: trafficdb_close, then trafficdb_open again */
#define TRAFFICDB_CORRUPT			(-30707)	/* an object failed validation */
#define TRAFFICDB_SYSTEM			(-30708)	/* a system call failed (see trafficdb_errmsg) */
#define TRAFFICDB_NOSNAPSHOT		(-30709)	/* the call needs trafficdb_begin first */
#define TRAFFICDB_BADARG			(-30710)	/* an argument is out of range (NULL, NaN, negative radius) */
#define TRAFFICDB_TIMEOUT			(-30711)	/* trafficdb_wait: no publication within the timeout */
#define TRAFFICDB_NOMEM			(-30712)
#define TRAFFICDB_REVOKED			(-30713)	/* the pinned version was revoked (reader_pin_timeout): read again */
#define TRAFFICDB_BUSY			(-30714)	/* the writer's lane is full: retry after trafficdb_retry_after_us() */
#define TRAFFICDB_LOST			(-30715)	/* a crash lost updates not yet committed: put them again */
#define TRAFFICDB_TRIMMED			(-30716)	/* changes_since: older than the generation log's trim point */
#define TRAFFICDB_GONE			(-30717)	/* trafficdb_answer: the requester gave up or left; the answer was dropped */

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

/*
 * What a code means, in a few words (a static string; "unknown trafficdb
 * error code" for others).  trafficdb_errmsg: the details of h's last
 * failure, or for NULL of the calling thread's last failed trafficdb_open
 * ("" when none).
 */
const char *trafficdb_strerror(int code);
const char *trafficdb_errmsg(const trafficdb_handle *h);

/*
 * Open the server's shared memory under name.  Any local user can create
 * names in /dev/shm first, so every object (control block, reader slots,
 * published objects; the writers' ring and the subscribers' rings for
 * trafficdb_writer_open and trafficdb_subscribe) must be owned by the
 * server's OS user: this process's own user, or the one the environment
 * variable TDB_SERVER_USER names (a user name or uid; default "postgres").
 * Anything else is refused (TRAFFICDB_PERMISSION, the message naming the
 * file and its owner) and never mapped.
 */
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

/*
 * Locations whose traffic changed after generation since, in the pinned
 * version; TRAFFICDB_TRIMMED if the generation log no longer keeps the
 * changes after since (or the map was reloaded since): read the current
 * state and continue from its generation.
 */
int			trafficdb_changes_since(trafficdb_handle *h, uint64_t since, trafficdb_visit_fn fn, void *arg);

/*
 * Block until a generation newer than after is published, or timeout_ms
 * passes (TRAFFICDB_TIMEOUT); no polling: a futex on the shared notify word.
 * Needs no snapshot.  *generation receives the newest generation.
 */
int			trafficdb_wait(trafficdb_handle *h, uint64_t after, int timeout_ms, uint64_t *generation);

/*
 * Writers: local writes from this process to the server, through a shared
 * memory ring (<name>.writers), with no SQL.  Each handle owns a lane of the
 * ring; one handle per thread, as for readers.
 *
 *	  trafficdb_writer *w;
 *	  if (trafficdb_writer_open("/trafficdb.5432", &w) != TRAFFICDB_OK) ...   // errmsg: trafficdb_writer_errmsg(NULL)
 *	  trafficdb_update u = {.location_id = 45314201, .speed_kmh = 37.5f, .has = TRAFFICDB_HAS_SPEED};
 *	  int rc = trafficdb_put(w, &u, TRAFFICDB_ASYNC);                  // ~100 ns: in shared memory
 *	  if (rc == TRAFFICDB_BUSY) usleep(trafficdb_retry_after_us(w));     // lane full: nothing was written
 *	  rc = trafficdb_sync(w, 5000);                                     // every put so far is committed
 *	  trafficdb_writer_close(w);
 *
 * Durability: TRAFFICDB_ASYNC returns once the update is in shared memory;
 * it is published by the next generation the server commits after draining
 * it, and lost only if the server (or the machine) crashes before that
 * commit.  TRAFFICDB_SYNC returns once the generation holding it has
 * committed (group commit: every update of a generation shares it).  If the
 * server's daemon died between draining and committing, a SYNC put puts its
 * update again (up to 3 times) and trafficdb_sync returns TRAFFICDB_LOST.
 *
 * Validation comes first and nothing is written on an error:
 * TRAFFICDB_NOTFOUND for an id the published map lacks, TRAFFICDB_BADARG (the
 * field and value in trafficdb_writer_errmsg) for a speed or free flow speed
 * that is not NaN and not in [0, 400], congestion > 4, confidence > 100, an
 * incident over 4,096 bytes or not valid UTF-8 (or with a NUL byte), an
 * observed_at more than 5 minutes in the future: the rules of the SQL feed.
 *
 * Other codes: TRAFFICDB_TIMEOUT (a SYNC put or trafficdb_sync: not committed
 * within the timeout; the update is still in the ring and will be published),
 * TRAFFICDB_STALE (the server stopped: close and reopen), TRAFFICDB_EMPTY (no
 * map published yet), TRAFFICDB_PERMISSION (trafficdb_writer_open: not a member
 * of trafficdb.writer_group, or not of trafficdb.shm_group to read the map),
 * TRAFFICDB_NOSLOT (every lane is owned: trafficdb.max_writers; a writer also
 * takes an external reader slot), TRAFFICDB_NOTRUNNING.
 */
#define TRAFFICDB_ASYNC			0x0	/* acknowledged in shared memory */
#define TRAFFICDB_SYNC			0x1	/* acknowledged once committed in the generation log */
#define TRAFFICDB_WAIT			0x2	/* on a full lane, wait for space instead of TRAFFICDB_BUSY */

#define TRAFFICDB_HAS_SPEED		0x01
#define TRAFFICDB_HAS_FREE_FLOW	0x02
#define TRAFFICDB_HAS_CONGESTION	0x04
#define TRAFFICDB_HAS_CONFIDENCE	0x08
#define TRAFFICDB_HAS_INCIDENT	0x10

typedef struct trafficdb_update
{
	uint64_t	location_id;
	int64_t		observed_at_us;	/* Unix microseconds; 0 = now (trafficdb_put_many: the time of the call) */
	float		speed_kmh;		/* km/h; NaN = unknown even with TRAFFICDB_HAS_SPEED */
	float		free_flow_kmh;
	uint8_t		congestion;		/* 0 free .. 4 standstill */
	uint8_t		confidence;		/* 0 .. 100 */
	uint8_t		has;			/* TRAFFICDB_HAS_*: fields not set are unknown (NULL in SQL) */
	const char *incident;		/* UTF-8, not NUL-terminated: incident_len bytes (0: an empty text) */
	uint32_t	incident_len;
} trafficdb_update;

typedef struct trafficdb_writer trafficdb_writer;

/* Open a writer on the server's shared memory name (as trafficdb_open takes it). */
int			trafficdb_writer_open(const char *name, trafficdb_writer **out);
void		trafficdb_writer_close(trafficdb_writer *w);

/* The details of w's last failure; of the calling thread's last failed trafficdb_writer_open for NULL. */
const char *trafficdb_writer_errmsg(const trafficdb_writer *w);

/* Put one update (flags: TRAFFICDB_ASYNC or TRAFFICDB_SYNC, | TRAFFICDB_WAIT). */
int			trafficdb_put(trafficdb_writer *w, const trafficdb_update *u, int flags);

/*
 * Put n updates in order; stops at the first that fails (*accepted: how
 * many went in, may be NULL).  With TRAFFICDB_SYNC waits once, for all of
 * them, when all went in.
 */
int			trafficdb_put_many(trafficdb_writer *w, const trafficdb_update *u, size_t n, int flags,
							   size_t *accepted);

/*
 * Wait until every put of this handle so far is committed (TRAFFICDB_OK),
 * or timeout_ms passes (TRAFFICDB_TIMEOUT), or the server lost some of them
 * (TRAFFICDB_LOST, counted in trafficdb_writer_errmsg: put them again).
 */
int			trafficdb_sync(trafficdb_writer *w, int timeout_ms);

/*
 * End a batch: the updates this handle put so far are published in
 * generations that hold none of its later updates, and the server makes
 * the next generation at once (not at trafficdb.publish_interval).  Returns
 * without waiting for it (one slot of the lane; TRAFFICDB_BUSY when the
 * lane is full, or with TRAFFICDB_WAIT wait for space); with TRAFFICDB_SYNC
 * waits as trafficdb_sync does, within the handle's timeout.  A producer
 * that puts in rounds and ends each with this has each round published on
 * its own, while it puts the next (subscribers see enter and exit events
 * between consecutive rounds).  A batch may still be split over several
 * generations (the server publishes on other writers' demand too), and
 * other handles' updates may share its generations.
 */
int			trafficdb_end_batch(trafficdb_writer *w, int flags);

/* How long to wait after TRAFFICDB_BUSY (µs): the server's drain period, or its estimate during a rebuild. */
uint32_t	trafficdb_retry_after_us(const trafficdb_writer *w);

/* The timeout of TRAFFICDB_SYNC puts and of TRAFFICDB_WAIT (default 10,000 ms). */
int			trafficdb_writer_set_timeout(trafficdb_writer *w, int timeout_ms);

/*
 * Subscribers: events for the locations of an area (or a list of ids) whose
 * traffic changes, or enters or leaves a condition, pushed by the server at
 * each publication into this process's ring in shared memory (<name>.subs);
 * trafficdb_receive waits on a futex.  Subscribers of one group (a name)
 * share the events: each goes to exactly one live member, round robin or
 * sticky (a location to the same member while it lives); the events a dead
 * member never took go to the others.  A subscriber that falls behind its
 * ring gets a TRAFFICDB_EVENT_OVERRUN event naming the generation to resync
 * from (trafficdb_changes_since).  See docs/subscriptions.md.
 */
typedef struct trafficdb_subscriber trafficdb_subscriber;

#define TRAFFICDB_AREA_IDS		0
#define TRAFFICDB_AREA_BOX		1	/* box: xmin, ymin, xmax, ymax (lon/lat) */
#define TRAFFICDB_AREA_RADIUS		2	/* lon, lat, radius_m */
#define TRAFFICDB_AREA_POLYGON	3	/* polygon: npoints (x, y) pairs of one ring */
#define TRAFFICDB_AREA_SUBSCRIPTIONS	4	/* the events of every row of trafficdb.subscriptions
										 * (event.subscriber: the row's id); no condition */
#define TRAFFICDB_AREA_NONE		5	/* no events: a requester, or a member that only answers requests */

#define TRAFFICDB_COND_ANY				0
#define TRAFFICDB_COND_CONGESTION_AT_LEAST	1	/* value: 0 .. 4 */
#define TRAFFICDB_COND_SPEED_BELOW		2	/* value: km/h */
#define TRAFFICDB_COND_SPEED_BELOW_PCT	3	/* value: % of free flow */
#define TRAFFICDB_COND_INCIDENT			4

#define TRAFFICDB_EVENTS_CHANGE		0	/* every change after which the condition holds */
#define TRAFFICDB_EVENTS_ENTER_EXIT	1	/* the condition starts or stops holding */

#define TRAFFICDB_GROUP_ROUND_ROBIN	1
#define TRAFFICDB_GROUP_STICKY		2

typedef struct trafficdb_filter
{
	int			area;			/* TRAFFICDB_AREA_* */
	const uint64_t *ids;
	uint32_t	nids;			/* at most 504 */
	double		box[4];
	double		lon,
				lat,
				radius_m;
	const double *polygon;
	uint32_t	npoints;		/* at most 252 */
	int			condition;		/* TRAFFICDB_COND_* */
	double		value;
	int			events;			/* TRAFFICDB_EVENTS_* */
} trafficdb_filter;

#define TRAFFICDB_EVENT_CHANGE	1
#define TRAFFICDB_EVENT_ENTER		2
#define TRAFFICDB_EVENT_EXIT		3
#define TRAFFICDB_EVENT_OVERRUN	4	/* events were dropped: resync from generation - 1 (location_id: how many) */

/* One event (64 bytes).  Speeds NaN and levels 255 when unknown. */
typedef struct trafficdb_event
{
	uint64_t	generation;
	uint64_t	location_id;
	uint64_t	seq;			/* consecutive per subscriber */
	int64_t		published_us;	/* the publication's time, Unix microseconds */
	uint32_t	subscriber;		/* the server's number of the subscriber it went to
								 * (TRAFFICDB_AREA_SUBSCRIPTIONS: the id of the row that matched) */
	uint16_t	kind;			/* TRAFFICDB_EVENT_* */
	uint16_t	flags;			/* 1: handed over from a dead member of the group */
	float		old_speed_kmh,
				new_speed_kmh,
				old_free_flow_kmh,
				new_free_flow_kmh;
	uint8_t		old_congestion,
				new_congestion,
				old_confidence,
				new_confidence,
				old_incident,
				new_incident;
	uint8_t		reserved[2];
} trafficdb_event;

/*
 * Subscribe (group NULL: alone).  TRAFFICDB_BADARG names the bad value
 * (trafficdb_subscriber_errmsg(NULL)); TRAFFICDB_NOTFOUND for an id the
 * published map lacks; TRAFFICDB_NOSLOT when trafficdb.max_subscribers are
 * taken; TRAFFICDB_NOTRUNNING, TRAFFICDB_PERMISSION.
 */
int			trafficdb_subscribe(const char *name, const trafficdb_filter *f, const char *group, int group_mode,
								trafficdb_subscriber **out);

/*
 * Up to max events (taken: not given to another group member), waiting up
 * to timeout_ms when there are none.  Returns the count (0: timed out), or
 * TRAFFICDB_STALE (the server stopped: unsubscribe and subscribe again),
 * TRAFFICDB_CORRUPT, TRAFFICDB_SYSTEM (a signal: call again).
 */
int			trafficdb_receive(trafficdb_subscriber *s, trafficdb_event *out, int max, int timeout_ms);

/*
 * At-least-once processing: trafficdb_peek copies up to max events without
 * taking them (waiting up to timeout_ms when there are none);
 * trafficdb_ack takes the first n of them once they are processed.  Events
 * a group member peeked but never acknowledged before it died go to the
 * others (flag 1), so nothing is lost; an event processed but not yet
 * acknowledged at the death is processed again.  Same codes as receive.
 */
int			trafficdb_peek(trafficdb_subscriber *s, trafficdb_event *out, int max, int timeout_ms);
int			trafficdb_ack(trafficdb_subscriber *s, int n);

/*
 * Leave (and the group): release the ring's slot and free s (NULL: no-op).
 * trafficdb_subscriber_errmsg: the details of s's last failure, or for NULL
 * of the calling thread's last failed trafficdb_subscribe.
 */
void		trafficdb_unsubscribe(trafficdb_subscriber *s);
const char *trafficdb_subscriber_errmsg(const trafficdb_subscriber *s);

/*
 * Request-response over the same shared memory (DAL's request-response):
 * any subscriber posts a request to a group and waits for the answer of
 * the member that took it; the members of the group share the requests
 * (an idle member takes the next one).  A member that dies (kill -9) or
 * unsubscribes with a request taken and not answered has it posted again
 * for the others: the requester gets exactly one answer.  No server round
 * trip: the server only takes back the requests of dead processes.
 *
 *	  requester:	trafficdb_request(s, "routers", q, qlen, answer, sizeof(answer), 1000)
 *	  member:		while (trafficdb_take_request(m, &r, buf, 1000) >= 0) { ...; trafficdb_answer(m, &r, a, alen); }
 */
#define TRAFFICDB_REQUEST_MAX		4096	/* bytes of a request, and of an answer */

typedef struct trafficdb_req
{
	uint32_t	cell;			/* where it is (for trafficdb_answer) */
	uint32_t	len;			/* bytes of the request in the caller's buffer */
	uint64_t	ticket;
	int32_t		requester_pid;	/* as the requester said: display only */
	uint32_t	reserved;
} trafficdb_req;

/*
 * Post req (len <= TRAFFICDB_REQUEST_MAX bytes) to group and wait up to
 * timeout_ms (a negative one is 0) for the answer, copied to answer (cap bytes).  Returns the
 * answer's length (>= 0), or TRAFFICDB_TIMEOUT (the request is withdrawn:
 * a member still working on it gets TRAFFICDB_GONE), TRAFFICDB_NOTFOUND
 * (the group has no member but the caller), TRAFFICDB_NOSLOT (every request cell is in
 * use), TRAFFICDB_BADARG (an argument, or an answer larger than cap),
 * TRAFFICDB_STALE, TRAFFICDB_SYSTEM (a signal: the request is withdrawn).
 */
int			trafficdb_request(trafficdb_subscriber *s, const char *group, const void *req, size_t len, void *answer,
							  size_t cap, int timeout_ms);

/*
 * A member of a group (trafficdb_subscribe with a group): take the next
 * request of the group into buf (TRAFFICDB_REQUEST_MAX bytes), waiting up
 * to timeout_ms (a negative one is 0).  Returns 1 (r says where and how long), 0 (timed out),
 * TRAFFICDB_BADARG (not a member of a group), TRAFFICDB_STALE,
 * TRAFFICDB_SYSTEM (a signal).
 */
int			trafficdb_take_request(trafficdb_subscriber *s, trafficdb_req *r, void *buf, int timeout_ms);

/* Answer a request taken (len <= TRAFFICDB_REQUEST_MAX): TRAFFICDB_OK, TRAFFICDB_GONE, TRAFFICDB_BADARG. */
int			trafficdb_answer(trafficdb_subscriber *s, const trafficdb_req *r, const void *answer, size_t len);

#ifdef __cplusplus
}
#endif

#endif							/* TRAFFICDB_H */
