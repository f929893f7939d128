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

#include "reader.h"

#define TDB_API __attribute__((visibility("default")))

struct tdb_handle
{
	TdbReader	reader;
	TdbSnapshot snap;
	bool		pinned;
	char		err[TDB_ERRLEN];
};

static int
from_shm(int rc)
{
	switch (rc)
	{
		case TDB_SHM_OK:
			return TDB_OK;
		case TDB_SHM_ENOENT:
			return TDB_NOTRUNNING;
		case TDB_SHM_EACCES:
			return TDB_PERMISSION;
		case TDB_SHM_EINVAL:
			return TDB_INVALID;
		case TDB_SHM_ENOSLOT:
			return TDB_NOSLOT;
		case TDB_SHM_EEMPTY:
			return TDB_EMPTY;
		case TDB_SHM_ESTALE:
			return TDB_STALE;
		case TDB_SHM_ECORRUPT:
			return TDB_CORRUPT;
		default:
			return TDB_SYSTEM;
	}
}

TDB_API const char *
tdb_strerror(int code)
{
	switch (code)
	{
		case TDB_OK:
			return "success";
		case TDB_NOTFOUND:
			return "no location with that id";
		case TDB_NOTRUNNING:
			return "no trafficdb shared memory under that name (server down, or trafficdb not preloaded)";
		case TDB_PERMISSION:
			return "permission denied (run as the server's user or set trafficdb.shm_group)";
		case TDB_INVALID:
			return "not trafficdb shared memory, or an incompatible format version";
		case TDB_NOSLOT:
			return "every external reader slot is taken (trafficdb.max_external_readers)";
		case TDB_EMPTY:
			return "nothing published yet (no map loaded)";
		case TDB_STALE:
			return "the server stopped; close the handle and open it again";
		case TDB_CORRUPT:
			return "a published object failed validation";
		case TDB_SYSTEM:
			return "a system call failed";
		case TDB_NOSNAPSHOT:
			return "no snapshot: call tdb_begin first";
		case TDB_BADARG:
			return "an argument is out of range";
		case TDB_TIMEOUT:
			return "no publication within the timeout";
		case TDB_NOMEM:
			return "out of memory";
		default:
			return "unknown trafficdb error code";
	}
}

TDB_API const char *
tdb_errmsg(const tdb_handle *h)
{
	return h ? h->err : "no handle";
}

TDB_API int
tdb_open(const char *name, tdb_handle **out)
{
	tdb_handle *h;
	int			rc;

	if (name == NULL || out == NULL)
		return TDB_BADARG;
	*out = NULL;
	h = calloc(1, sizeof(*h));
	if (h == NULL)
		return TDB_NOMEM;
	rc = tdb_reader_open(&h->reader, name, -1, TDB_VALIDATE_FULL, h->err);
	if (rc != TDB_SHM_OK)
	{
		free(h);
		return from_shm(rc);
	}
	*out = h;
	return TDB_OK;
}

TDB_API void
tdb_close(tdb_handle *h)
{
	if (h == NULL)
		return;
	tdb_reader_close(&h->reader);
	free(h);
}

TDB_API int
tdb_begin(tdb_handle *h, uint64_t *generation)
{
	int			rc;

	if (h == NULL)
		return TDB_BADARG;
	if (h->pinned)
		tdb_reader_release(&h->reader);
	h->pinned = false;
	rc = tdb_reader_acquire(&h->reader, &h->snap, h->err);
	if (rc != TDB_SHM_OK)
		return from_shm(rc);
	h->pinned = true;
	if (generation)
		*generation = h->snap.generation;
	return TDB_OK;
}

TDB_API void
tdb_end(tdb_handle *h)
{
	if (h != NULL && h->pinned)
	{
		tdb_reader_release(&h->reader);
		h->pinned = false;
	}
}

TDB_API int
tdb_published_at(tdb_handle *h, int64_t *unix_us)
{
	if (h == NULL || unix_us == NULL)
		return TDB_BADARG;
	if (!h->pinned)
		return TDB_NOSNAPSHOT;
	*unix_us = h->snap.published_at_us;
	return TDB_OK;
}

/* The view of record i of the pinned version. */
static void
fill(const tdb_handle *h, uint64_t i, tdb_location *out)
{
	const TdbMapView *m = h->snap.map;
	const TdbLocation *r = &m->records[i];
	const TdbTraffic *t = &h->snap.entries[i];
	uint32_t	len = 0;

	out->id = r->id;
	out->index = i;
	out->name = tdb_map_name(m, i);
	out->road_class = tdb_map_class(m, i);
	out->length_m = r->length_m;
	out->speed_limit_kmh = r->speed_limit_kmh;
	out->oneway = (r->flags & TDB_LOC_ONEWAY) != 0;
	out->npoints = r->npoints;
	/* the public struct mirrors TdbTraffic field for field */
	out->traffic = (const tdb_traffic *) t;
	out->incident = tdb_traffic_incident(h->snap.traffic, t, &len);
	out->incident_len = out->incident ? len : 0;
}

_Static_assert(sizeof(tdb_traffic) == sizeof(TdbTraffic), "tdb_traffic mirrors TdbTraffic");

TDB_API int
tdb_get(tdb_handle *h, uint64_t id, tdb_location *out)
{
	int64_t		i;

	if (h == NULL || out == NULL)
		return TDB_BADARG;
	if (!h->pinned)
		return TDB_NOSNAPSHOT;
	i = tdb_map_find(h->snap.map, id);
	if (i < 0)
		return TDB_NOTFOUND;
	fill(h, (uint64_t) i, out);
	return TDB_OK;
}

TDB_API int
tdb_get_many(tdb_handle *h, const uint64_t *ids, size_t n, tdb_location *out, uint8_t *found)
{
	int			nfound = 0;

	if (h == NULL || (n > 0 && (ids == NULL || out == NULL || found == NULL)))
		return TDB_BADARG;
	if (!h->pinned)
		return TDB_NOSNAPSHOT;
	/* prefetch a few lookups ahead: the hash slots are the cache misses */
	for (size_t k = 0; k < n && k < 8; k++)
		tdb_map_prefetch(h->snap.map, ids[k]);
	for (size_t k = 0; k < n; k++)
	{
		int64_t		i;

		if (k + 8 < n)
			tdb_map_prefetch(h->snap.map, ids[k + 8]);
		i = tdb_map_find(h->snap.map, ids[k]);
		found[k] = i >= 0;
		if (i >= 0)
		{
			fill(h, (uint64_t) i, &out[k]);
			nfound++;
		}
	}
	return nfound;
}

TDB_API int
tdb_shape(tdb_handle *h, const tdb_location *loc, double *xy)
{
	if (h == NULL || loc == NULL || xy == NULL)
		return TDB_BADARG;
	if (!h->pinned)
		return TDB_NOSNAPSHOT;
	if (loc->index >= h->snap.map->count || h->snap.map->records[loc->index].id != loc->id)
		return TDB_BADARG;
	tdb_map_shape(h->snap.map, loc->index, xy);
	return TDB_OK;
}

typedef struct VisitArg
{
	tdb_handle *h;
	tdb_visit_fn fn;
	void	   *arg;
} VisitArg;

static int
visit_entry(uint64_t entry, void *p)
{
	VisitArg   *va = p;
	tdb_location loc;

	fill(va->h, entry, &loc);
	return va->fn(&loc, va->arg);
}

TDB_API int
tdb_bbox(tdb_handle *h, double xmin, double ymin, double xmax, double ymax, tdb_visit_fn fn,
		 void *arg)
{
	VisitArg	va = {h, fn, arg};
	TdbBox		q = {xmin, ymin, xmax, ymax};

	if (h == NULL || fn == NULL || isnan(xmin) || isnan(ymin) || isnan(xmax) || isnan(ymax))
		return TDB_BADARG;
	if (!h->pinned)
		return TDB_NOSNAPSHOT;
	tdb_map_query_box(h->snap.map, &q, visit_entry, &va);
	return TDB_OK;
}

TDB_API int
tdb_radius(tdb_handle *h, double lon, double lat, double metres, tdb_visit_fn fn, void *arg)
{
	VisitArg	va = {h, fn, arg};

	if (h == NULL || fn == NULL || !isfinite(lon) || !isfinite(lat) || !(metres >= 0))
		return TDB_BADARG;
	if (!h->pinned)
		return TDB_NOSNAPSHOT;
	tdb_map_query_radius(h->snap.map, lon, lat, metres, visit_entry, &va);
	return TDB_OK;
}

TDB_API int
tdb_knn(tdb_handle *h, double lon, double lat, uint32_t k, tdb_visit_fn fn, void *arg)
{
	TdbKnnResult *res;
	int64_t		n;

	if (h == NULL || fn == NULL || !isfinite(lon) || !isfinite(lat))
		return TDB_BADARG;
	if (!h->pinned)
		return TDB_NOSNAPSHOT;
	if (k == 0)
		return TDB_OK;
	res = malloc(sizeof(TdbKnnResult) * k);
	if (res == NULL)
		return TDB_NOMEM;
	n = tdb_map_knn(h->snap.map, lon, lat, TDB_METRIC_METRES, k, res);
	if (n < 0)
	{
		free(res);
		return TDB_NOMEM;
	}
	for (int64_t r = 0; r < n; r++)
	{
		tdb_location loc;

		fill(h, res[r].entry, &loc);
		if (fn(&loc, arg) != 0)
			break;
	}
	free(res);
	return TDB_OK;
}

TDB_API int
tdb_changes_since(tdb_handle *h, uint64_t since, tdb_visit_fn fn, void *arg)
{
	if (h == NULL || fn == NULL)
		return TDB_BADARG;
	if (!h->pinned)
		return TDB_NOSNAPSHOT;
	for (uint64_t i = 0; i < h->snap.map->count; i++)
		if (h->snap.entries[i].changed_gen > since)
		{
			tdb_location loc;

			fill(h, i, &loc);
			if (fn(&loc, arg) != 0)
				break;
		}
	return TDB_OK;
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

TDB_API int
tdb_wait(tdb_handle *h, uint64_t after, int timeout_ms, uint64_t *generation)
{
	const TdbControl *ctl;
	int64_t		deadline;

	if (h == NULL || timeout_ms < 0)
		return TDB_BADARG;
	ctl = h->reader.ctl;
	deadline = now_ms() + timeout_ms;
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
			return TDB_STALE;
		if (gen > after)
			return TDB_OK;
		left = deadline - now_ms();
		if (left <= 0)
			return TDB_TIMEOUT;
		ts.tv_sec = left / 1000;
		ts.tv_nsec = (left % 1000) * 1000000;
		/* shared futex: the word lives in a mapping other processes share */
		if (syscall(SYS_futex, &ctl->notify, FUTEX_WAIT, word, &ts, NULL, 0) != 0 &&
			errno != EAGAIN && errno != EINTR && errno != ETIMEDOUT)
		{
			snprintf(h->err, TDB_ERRLEN, "futex wait failed: %s", strerror(errno));
			return TDB_SYSTEM;
		}
	}
}
