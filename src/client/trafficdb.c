/*
 * trafficdb.c
 *	  libtrafficdb: the public C accessor (include/trafficdb.h) over the
 *	  reader protocol of src/reader.c, which SQL backends use too.
 */
#include "trafficdb.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "clock.h"
#include "reader.h"


/*
 * The pinned version's sections, copied flat at trafficdb_begin so a lookup
 * touches one cache line of the handle and then only the shared memory:
 * every instruction on the GET path counts, because independent lookups
 * overlap their cache misses only as far as the CPU's reorder window
 * reaches.
 */
typedef struct FastView
{
	const uint64_t *hash;
	uint64_t	hash_mask;
	const TdbLocation *records;
	const TdbTraffic *entries;
	const char *strings;
	const uint32_t *classes;
	const void *traffic;		/* the traffic object (its incidents) */
	uint64_t	count;
} FastView;

struct trafficdb_handle
{
	FastView	fv;
	bool		pinned;
	TdbReader	reader;
	TdbSnapshot snap;
	char		err[TDB_ERRLEN];
};

int
tdb_client_from_shm(int rc)
{
	switch (rc)
	{
		case TDB_SHM_OK:
			return TRAFFICDB_OK;
		case TDB_SHM_ENOENT:
			return TRAFFICDB_NOTRUNNING;
		case TDB_SHM_EACCES:
			return TRAFFICDB_PERMISSION;
		case TDB_SHM_EINVAL:
			return TRAFFICDB_INVALID;
		case TDB_SHM_ENOSLOT:
			return TRAFFICDB_NOSLOT;
		case TDB_SHM_EEMPTY:
			return TRAFFICDB_EMPTY;
		case TDB_SHM_ESTALE:
			return TRAFFICDB_STALE;
		case TDB_SHM_ECORRUPT:
			return TRAFFICDB_CORRUPT;
		case TDB_SHM_EREVOKED:
			return TRAFFICDB_REVOKED;
		case TDB_SHM_EBUSY:
			return TRAFFICDB_INVALID;
		case TDB_SHM_ETAKEN:
			return TRAFFICDB_PERMISSION;	/* another user's object: refused */
		default:
			return TRAFFICDB_SYSTEM;
	}
}

TDB_API int
trafficdb_version(void)
{
	return TRAFFICDB_VERSION_NUMBER;
}

TDB_API const char *
trafficdb_strerror(int code)
{
	switch (code)
	{
		case TRAFFICDB_OK:
			return "success";
		case TRAFFICDB_NOTFOUND:
			return "not found (no location with that id, or no member in the group)";
		case TRAFFICDB_NOTRUNNING:
			return "no trafficdb shared memory under that name (server down, or trafficdb not preloaded)";
		case TRAFFICDB_PERMISSION:
			return "permission denied (run as the server's user or set trafficdb.shm_group)";
		case TRAFFICDB_INVALID:
			return "not trafficdb shared memory, or an incompatible format version";
		case TRAFFICDB_NOSLOT:
			return "every slot is taken: reader slots (trafficdb.max_external_readers), subscriber slots (trafficdb.max_subscribers), writer lanes (trafficdb.max_writers) or request cells, as the call says";
		case TRAFFICDB_EMPTY:
			return "nothing published yet (no map loaded)";
		case TRAFFICDB_STALE:
			return "the server stopped; close the handle and open it again";
		case TRAFFICDB_CORRUPT:
			return "a published object failed validation";
		case TRAFFICDB_SYSTEM:
			return "a system call failed";
		case TRAFFICDB_NOSNAPSHOT:
			return "no snapshot: call trafficdb_begin first";
		case TRAFFICDB_BADARG:
			return "an argument is out of range";
		case TRAFFICDB_TIMEOUT:
			return "not done within the timeout (no publication, or a sync put not yet committed)";
		case TRAFFICDB_NOMEM:
			return "out of memory";
		case TRAFFICDB_REVOKED:
			return "the pinned version was revoked (held past trafficdb.reader_pin_timeout) or rewritten: read again";
		case TRAFFICDB_BUSY:
			return "the writer's lane is full: retry after trafficdb_retry_after_us()";
		case TRAFFICDB_LOST:
			return "a server crash lost updates not yet committed: put them again";
		case TRAFFICDB_TRIMMED:
			return "older than the generation log's trim point";
		case TRAFFICDB_GONE:
			return "the requester gave up or left: the answer was dropped";
		default:
			return "unknown trafficdb error code";
	}
}

/* why the calling thread's last trafficdb_open failed */
static __thread char open_err[TDB_ERRLEN];

TDB_API const char *
trafficdb_errmsg(const trafficdb_handle *h)
{
	return h ? h->err : open_err;
}

TDB_API int
trafficdb_open(const char *name, trafficdb_handle **out)
{
	trafficdb_handle *h;
	int			rc;

	if (name == NULL || out == NULL)
	{
		snprintf(open_err, sizeof(open_err), "trafficdb_open: %s is NULL", name == NULL ? "name" : "out");
		return TRAFFICDB_BADARG;
	}
	*out = NULL;
	h = calloc(1, sizeof(*h));
	if (h == NULL)
	{
		snprintf(open_err, sizeof(open_err), "trafficdb_open: out of memory");
		return TRAFFICDB_NOMEM;
	}
	rc = tdb_reader_open(&h->reader, name, NULL, TDB_VALIDATE_FULL, h->err);
	if (rc != TDB_SHM_OK)
	{
		memcpy(open_err, h->err, sizeof(open_err));
		free(h);
		return tdb_client_from_shm(rc);
	}
	open_err[0] = '\0';
	*out = h;
	return TRAFFICDB_OK;
}

TDB_API void
trafficdb_close(trafficdb_handle *h)
{
	if (h == NULL)
		return;
	tdb_reader_close(&h->reader);
	free(h);
}

TDB_API int
trafficdb_begin(trafficdb_handle *h, uint64_t *generation)
{
	int			rc;

	if (h == NULL)
		return TRAFFICDB_BADARG;
	if (h->pinned)
		tdb_reader_release(&h->reader);
	h->pinned = false;
	rc = tdb_reader_acquire(&h->reader, &h->snap, h->err);
	if (rc == TDB_SHM_OK)
	{
		const TdbMapView *m = h->snap.map;
		h->fv.hash = m->hash;
		h->fv.hash_mask = m->hash_mask;
		h->fv.records = m->records;
		h->fv.entries = h->snap.entries;
		h->fv.strings = m->strings;
		h->fv.classes = m->classes;
		h->fv.traffic = h->snap.traffic;
		h->fv.count = m->count;
	}
	if (rc != TDB_SHM_OK)
		return tdb_client_from_shm(rc);
	h->pinned = true;
	if (generation)
		*generation = h->snap.generation;
	return TRAFFICDB_OK;
}

TDB_API int
trafficdb_check(const trafficdb_handle *h)
{
	if (h == NULL)
		return TRAFFICDB_BADARG;
	if (!h->pinned)
		return TRAFFICDB_NOSNAPSHOT;
	return tdb_reader_revoked(&h->reader, &h->snap) ? TRAFFICDB_REVOKED : TRAFFICDB_OK;
}

TDB_API int
trafficdb_end(trafficdb_handle *h)
{
	int			rc;

	if (h == NULL)
		return TRAFFICDB_BADARG;
	if (!h->pinned)
		return TRAFFICDB_NOSNAPSHOT;
	rc = trafficdb_check(h);
	if (rc == TRAFFICDB_REVOKED)
		snprintf(h->err, sizeof(h->err), "generation %llu was revoked or rewritten while pinned",
				 (unsigned long long) h->snap.generation);
	tdb_reader_release(&h->reader);
	h->pinned = false;
	return rc;
}

TDB_API int
trafficdb_published_at(trafficdb_handle *h, int64_t *unix_us)
{
	if (h == NULL || unix_us == NULL)
		return TRAFFICDB_BADARG;
	if (!h->pinned)
		return TRAFFICDB_NOSNAPSHOT;
	*unix_us = h->snap.published_at_us;
	return TRAFFICDB_OK;
}

/*
 * Record index of id (whose tdb_hash_id is h) in the pinned version, or -1
 * (see tdb_map_find).
 */
static inline int64_t
fv_find(const FastView *fv, uint64_t id, uint64_t h)
{
	uint64_t	tag = h >> 32;
	uint64_t	pos = h & fv->hash_mask;

	for (uint64_t probes = 0; probes <= fv->hash_mask; probes++)
	{
		uint64_t	s = fv->hash[pos];

		if (__builtin_expect(s == 0, 0))
			return -1;
		if ((s >> 32) == tag)
		{
			uint32_t	idx = (uint32_t) s - 1;

			if (__builtin_expect(idx < fv->count && fv->records[idx].id == id, 1))
				return idx;
		}
		pos = (pos + 1) & fv->hash_mask;
	}
	return -1;
}

/* The view of record i of the pinned version (validated offsets). */
static inline void
fill(const FastView *fv, uint64_t i, trafficdb_location *out)
{
	const TdbLocation *r = &fv->records[i];
	const TdbTraffic *t = &fv->entries[i];

	out->id = r->id;
	out->index = i;
	out->name = fv->strings + r->name_off;
	out->road_class = fv->strings + fv->classes[r->road_class];
	out->length_m = r->length_m;
	out->speed_limit_kmh = r->speed_limit_kmh;
	out->oneway = r->flags & TDB_LOC_ONEWAY;
	out->npoints = r->npoints;
	/* the public struct mirrors TdbTraffic field for field */
	out->traffic = (const trafficdb_traffic *) t;
	out->incident = NULL;
	out->incident_len = 0;
	if (__builtin_expect(t->incident_off != 0, 0))
	{
		/* bounded: traffic objects are checked at header level per snapshot */
		uint32_t	len = 0;

		out->incident = tdb_traffic_incident(fv->traffic, t, &len);
		out->incident_len = out->incident ? len : 0;
	}
}

_Static_assert(sizeof(trafficdb_traffic) == sizeof(TdbTraffic), "trafficdb_traffic mirrors TdbTraffic");

TDB_API int
trafficdb_get(trafficdb_handle *h, uint64_t id, trafficdb_location *out)
{
	int64_t		i;

	if (__builtin_expect(h == NULL || out == NULL, 0))
		return TRAFFICDB_BADARG;
	if (__builtin_expect(!h->pinned, 0))
		return TRAFFICDB_NOSNAPSHOT;
	i = fv_find(&h->fv, id, tdb_hash_id(id));
	if (i < 0)
		return TRAFFICDB_NOTFOUND;
	fill(&h->fv, (uint64_t) i, out);
	return TRAFFICDB_OK;
}

TDB_API int
trafficdb_get_traffic(trafficdb_handle *h, uint64_t id, const trafficdb_traffic **out)
{
	int64_t		i;

	if (__builtin_expect(h == NULL || out == NULL, 0))
		return TRAFFICDB_BADARG;
	if (__builtin_expect(!h->pinned, 0))
		return TRAFFICDB_NOSNAPSHOT;
	i = fv_find(&h->fv, id, tdb_hash_id(id));
	if (i < 0)
		return TRAFFICDB_NOTFOUND;
	*out = (const trafficdb_traffic *) &h->fv.entries[i];
	return TRAFFICDB_OK;
}

/*
 * Batched lookups as a three-stage software pipeline, so that many
 * independent cache misses are in flight at once instead of the two
 * dependent ones (hash slot, then record and traffic entry) of each lookup
 * in turn:
 *   k + 2D: prefetch the home hash slot of ids[k + 2D];
 *   k + D:  read that slot (now cached), keep it, and prefetch the record
 *           and the traffic entry it points at (a wrong guess costs a
 *           prefetch);
 *   k:      complete the lookup of ids[k] from the slot kept at stage 2
 *           when its tag and the record's id match (the record is cached
 *           now), else by the probe of fv_find (a collision or an unknown
 *           id).
 * The view is copied to the stack: the compiler then knows that the
 * results written through out do not change it.
 */
#define PIPE_D 8
#define PIPE_RING (4 * PIPE_D)	/* > 2 * PIPE_D: a hash lives from stage 1 to 3 */

TDB_API int
trafficdb_get_many(trafficdb_handle *h, const uint64_t *ids, size_t n, trafficdb_location *out, uint8_t *found)
{
	FastView	fv;
	uint64_t	hashes[PIPE_RING];	/* hash of ids[k] at k % PIPE_RING */
	uint64_t	slots[PIPE_RING];	/* its home slot, read at stage 2 */
	int			nfound = 0;

	if (h == NULL || (n > 0 && (ids == NULL || out == NULL || found == NULL)))
		return TRAFFICDB_BADARG;
	if (!h->pinned)
		return TRAFFICDB_NOSNAPSHOT;
	fv = h->fv;
	for (size_t k = 0; k < n + 2 * PIPE_D; k++)
	{
		if (k < n)
		{
			hashes[k % PIPE_RING] = tdb_hash_id(ids[k]);
			__builtin_prefetch(&fv.hash[hashes[k % PIPE_RING] & fv.hash_mask]);
		}
		if (k >= PIPE_D && k - PIPE_D < n)
		{
			uint64_t	s = fv.hash[hashes[(k - PIPE_D) % PIPE_RING] & fv.hash_mask];
			uint32_t	idx = (uint32_t) s - 1;

			slots[(k - PIPE_D) % PIPE_RING] = s;
			if (s != 0 && idx < fv.count)
			{
				__builtin_prefetch(&fv.records[idx]);
				__builtin_prefetch(&fv.entries[idx]);
			}
		}
		if (k >= 2 * PIPE_D)
		{
			size_t		j = k - 2 * PIPE_D;
			uint64_t	hj = hashes[j % PIPE_RING];
			uint64_t	s = slots[j % PIPE_RING];
			uint32_t	idx = (uint32_t) s - 1;
			int64_t		i;

			if (__builtin_expect(s != 0 && (s >> 32) == (hj >> 32) && idx < fv.count &&
								 fv.records[idx].id == ids[j], 1))
				i = idx;
			else
				i = fv_find(&fv, ids[j], hj);
			found[j] = i >= 0;
			if (i >= 0)
			{
				fill(&fv, (uint64_t) i, &out[j]);
				nfound++;
			}
		}
	}
	return nfound;
}

TDB_API int
trafficdb_shape(trafficdb_handle *h, const trafficdb_location *loc, double *xy)
{
	if (h == NULL || loc == NULL || xy == NULL)
		return TRAFFICDB_BADARG;
	if (!h->pinned)
		return TRAFFICDB_NOSNAPSHOT;
	if (loc->index >= h->snap.map->count || h->snap.map->records[loc->index].id != loc->id)
		return TRAFFICDB_BADARG;
	tdb_map_shape(h->snap.map, loc->index, xy);
	return TRAFFICDB_OK;
}

typedef struct VisitArg
{
	trafficdb_handle *h;
	trafficdb_visit_fn fn;
	void	   *arg;
} VisitArg;

static int
visit_entry(uint64_t entry, void *p)
{
	VisitArg   *va = p;
	trafficdb_location loc;

	fill(&va->h->fv, entry, &loc);
	return va->fn(&loc, va->arg);
}

TDB_API int
trafficdb_bbox(trafficdb_handle *h, double xmin, double ymin, double xmax, double ymax, trafficdb_visit_fn fn,
		 void *arg)
{
	VisitArg	va = {h, fn, arg};
	TdbBox		q = {xmin, ymin, xmax, ymax};

	if (h == NULL || fn == NULL || isnan(xmin) || isnan(ymin) || isnan(xmax) || isnan(ymax))
		return TRAFFICDB_BADARG;
	if (!h->pinned)
		return TRAFFICDB_NOSNAPSHOT;
	tdb_map_query_box(h->snap.map, &q, visit_entry, &va);
	return TRAFFICDB_OK;
}

TDB_API int
trafficdb_radius(trafficdb_handle *h, double lon, double lat, double metres, trafficdb_visit_fn fn, void *arg)
{
	VisitArg	va = {h, fn, arg};

	if (h == NULL || fn == NULL || !isfinite(lon) || !isfinite(lat) || !(metres >= 0))
		return TRAFFICDB_BADARG;
	if (!h->pinned)
		return TRAFFICDB_NOSNAPSHOT;
	tdb_map_query_radius(h->snap.map, lon, lat, metres, visit_entry, &va);
	return TRAFFICDB_OK;
}

/* Metres in the projection centred on the query point, as tdb_map_knn(). */
typedef struct KnnPoint
{
	const TdbMapView *map;
	double		x;
	double		y;
} KnnPoint;

static double
knn_bound(const TdbBoxF *b, void *arg)
{
	const KnnPoint *p = arg;

	return tdb_rtree_box_dist(b, p->x, p->y, TDB_METRIC_METRES);
}

static double
knn_exact(uint64_t e, void *arg)
{
	const KnnPoint *p = arg;

	return tdb_map_distance(p->map, e, p->x, p->y, TDB_METRIC_METRES);
}

/*
 * An incremental scan (knn.h) handing each location over as it comes, so
 * nothing is sized by k and a visitor that stops early ends the search.
 */
TDB_API int
trafficdb_knn(trafficdb_handle *h, double lon, double lat, uint32_t k, trafficdb_visit_fn fn, void *arg)
{
	KnnPoint	p;
	TdbKnnIter	it;
	int			rc = TRAFFICDB_OK;

	if (h == NULL || fn == NULL || !isfinite(lon) || !isfinite(lat))
		return TRAFFICDB_BADARG;
	if (!h->pinned)
		return TRAFFICDB_NOSNAPSHOT;
	p.map = h->snap.map;
	p.x = lon;
	p.y = lat;
	tdb_knn_begin(&it, &h->snap.map->rtree, knn_bound, &p, knn_exact, &p, NULL);
	for (uint32_t r = 0; r < k; r++)
	{
		uint64_t	e;
		double		d;
		int			got = tdb_knn_next(&it, &e, &d);
		trafficdb_location loc;

		if (got < 0)
			rc = TRAFFICDB_NOMEM;
		if (got <= 0)
			break;
		fill(&h->fv, e, &loc);
		if (fn(&loc, arg) != 0)
			break;
	}
	tdb_knn_end(&it);
	return rc;
}

TDB_API int
trafficdb_changes_since(trafficdb_handle *h, uint64_t since, trafficdb_visit_fn fn, void *arg)
{
	if (h == NULL || fn == NULL)
		return TRAFFICDB_BADARG;
	if (!h->pinned)
		return TRAFFICDB_NOSNAPSHOT;
	{
		uint64_t	from = atomic_load_explicit(&((TdbControl *) h->reader.ctl)->changes_from, memory_order_acquire);

		if (from > 0 && since < from - 1)
		{
			snprintf(h->err, sizeof(h->err),
					 "generation %llu is older than the generation log's trim point %llu (or a map reload): "
					 "read the current state and continue from its generation",
					 (unsigned long long) since, (unsigned long long) from);
			return TRAFFICDB_TRIMMED;
		}
	}
	for (uint64_t i = 0; i < h->snap.map->count; i++)
		if (h->snap.entries[i].changed_gen > since)
		{
			trafficdb_location loc;

			fill(&h->fv, i, &loc);
			if (fn(&loc, arg) != 0)
				break;
		}
	return TRAFFICDB_OK;
}

TDB_API int
trafficdb_wait(trafficdb_handle *h, uint64_t after, int timeout_ms, uint64_t *generation)
{
	const TdbControl *ctl;
	int64_t		deadline;

	if (h == NULL || timeout_ms < 0)
		return TRAFFICDB_BADARG;
	ctl = h->reader.ctl;
	deadline = tdb_mono_ms() + timeout_ms;
	for (;;)
	{
		/* read the word before the generation: a publish in between changes it */
		uint32_t	word = atomic_load_explicit(&ctl->notify, memory_order_acquire);
		uint64_t	gen = TDB_ACTIVE_GEN(atomic_load_explicit(&ctl->active, memory_order_acquire));
		int64_t		left;
		struct timespec ts;

		if (generation)
			*generation = gen;
		if (tdb_reader_stale(&h->reader))
			return TRAFFICDB_STALE;
		if (gen > after)
			return TRAFFICDB_OK;
		left = deadline - tdb_mono_ms();
		if (left <= 0)
			return TRAFFICDB_TIMEOUT;
		ts.tv_sec = left / 1000;
		ts.tv_nsec = (left % 1000) * 1000000;
		/* shared futex: the word lives in a mapping other processes share */
		if (syscall(SYS_futex, &ctl->notify, FUTEX_WAIT, word, &ts, NULL, 0) != 0 &&
			errno != EAGAIN && errno != EINTR && errno != ETIMEDOUT)
		{
			snprintf(h->err, TDB_ERRLEN, "futex wait failed: %s", strerror(errno));
			return TRAFFICDB_SYSTEM;
		}
	}
}
