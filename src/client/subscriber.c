/*
 * subscriber.c
 *	  libtrafficdb's subscribers (include/trafficdb.h, "Subscribers"): a
 *	  slot of <name>.subs (src/subring) holding the filter, and its ring.
 */
#include "trafficdb.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "object.h"
#include "subfilter.h"
#include "subring/subring.h"

_Static_assert(sizeof(trafficdb_event) == sizeof(TdbSubEvent), "trafficdb_event is TdbSubEvent");
_Static_assert(offsetof(trafficdb_event, kind) == offsetof(TdbSubEvent, kind), "same layout");
_Static_assert(offsetof(trafficdb_event, new_incident) == offsetof(TdbSubEvent, new_incident), "same layout");

struct trafficdb_subscriber
{
	TdbSubConsumer c;
	char		err[TDB_ERRLEN];
};

static __thread char open_err[TDB_ERRLEN];

TDB_API const char *
trafficdb_subscriber_errmsg(const trafficdb_subscriber *s)
{
	return s ? s->err : open_err;
}

/* FNV-1a of the group's name: its id in the rings (0 is "no group") */
static uint64_t
group_id(const char *name)
{
	uint64_t	h = 1469598103934665603ull;

	for (const unsigned char *p = (const unsigned char *) name; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return h ? h : 1;
}

/* Ids the published map lacks: TRAFFICDB_NOTFOUND naming the first. */
static int
check_ids(const char *name, const uint64_t *ids, uint32_t n)
{
	trafficdb_handle *h;
	int			rc = trafficdb_open(name, &h);

	if (rc != TRAFFICDB_OK)
	{
		snprintf(open_err, sizeof(open_err), "cannot check the location ids: %s", trafficdb_errmsg(NULL));
		return rc;
	}
	if ((rc = trafficdb_begin(h, NULL)) == TRAFFICDB_OK)
	{
		for (uint32_t i = 0; i < n && rc == TRAFFICDB_OK; i++)
		{
			const trafficdb_traffic *t;

			if (trafficdb_get_traffic(h, ids[i], &t) == TRAFFICDB_NOTFOUND)
			{
				snprintf(open_err, sizeof(open_err), "location id %llu is not in the published map",
						 (unsigned long long) ids[i]);
				rc = TRAFFICDB_NOTFOUND;
			}
		}
		(void) trafficdb_end(h);
	}
	else
		snprintf(open_err, sizeof(open_err), "cannot check the location ids: %s", trafficdb_errmsg(h));
	trafficdb_close(h);
	return rc;
}

TDB_API int
trafficdb_subscribe(const char *name, const trafficdb_filter *f, const char *group, int group_mode,
					trafficdb_subscriber **out)
{
	TdbSubFilter sf;
	static __thread unsigned char buf[TDB_SUBFILTER_BYTES];
	uint32_t	ring_end[1];
	size_t		len;
	trafficdb_subscriber *s;
	int			rc;

	if (name == NULL || f == NULL || out == NULL)
	{
		snprintf(open_err, sizeof(open_err), "trafficdb_subscribe: %s is NULL",
				 name == NULL ? "name" : f == NULL ? "the filter" : "out");
		return TRAFFICDB_BADARG;
	}
	*out = NULL;
	if (group != NULL && group_mode != TRAFFICDB_GROUP_ROUND_ROBIN && group_mode != TRAFFICDB_GROUP_STICKY)
	{
		snprintf(open_err, sizeof(open_err), "group mode %d: expected TRAFFICDB_GROUP_ROUND_ROBIN or TRAFFICDB_GROUP_STICKY",
				 group_mode);
		return TRAFFICDB_BADARG;
	}
	memset(&sf, 0, sizeof(sf));
	sf.area = (TdbSubArea) f->area;
	sf.ids = f->ids;
	sf.nids = f->nids;
	sf.box = (TdbBox) {f->box[0], f->box[1], f->box[2], f->box[3]};
	sf.lon = f->lon;
	sf.lat = f->lat;
	sf.radius_m = f->radius_m;
	sf.cond = (TdbSubCond) f->condition;
	sf.value = f->value;
	sf.on = (TdbSubOn) f->events;
	if (f->area == TRAFFICDB_AREA_POLYGON)
	{
		ring_end[0] = f->npoints;
		if (f->polygon == NULL || f->npoints < 3 ||
			!tdb_knn_query_init(&sf.polygon, TDB_KNN_POLYGON, f->polygon, f->npoints, ring_end, 1))
		{
			snprintf(open_err, sizeof(open_err), "the polygon (%u points) is empty or has a coordinate that is not a finite number",
					 f->npoints);
			return TRAFFICDB_BADARG;
		}
	}
	if (f->area == TRAFFICDB_AREA_IDS && f->nids > 0 && f->ids == NULL)
	{
		snprintf(open_err, sizeof(open_err), "the filter's ids are NULL");
		return TRAFFICDB_BADARG;
	}
	len = tdb_subfilter_encode(&sf, buf, sizeof(buf), open_err);
	if (len == 0)
		return TRAFFICDB_BADARG;
	if (f->area == TRAFFICDB_AREA_IDS && (rc = check_ids(name, f->ids, f->nids)) != TRAFFICDB_OK)
		return rc;

	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return TRAFFICDB_NOMEM;
	rc = tdb_subring_consumer_open(&s->c, name, 0, NULL, open_err);
	if (rc == TDB_SHM_OK)
	{
		rc = tdb_subring_subscribe(&s->c, buf, (uint32_t) len, group ? group_id(group) : 0,
								   group ? (uint32_t) group_mode : TDB_SUBGROUP_NONE);
		if (rc != TDB_SHM_OK)
		{
			snprintf(open_err, sizeof(open_err), "%s", s->c.err);
			tdb_subring_consumer_close(&s->c);
		}
	}
	if (rc != TDB_SHM_OK)
	{
		free(s);
		return tdb_client_from_shm(rc);
	}
	*out = s;
	return TRAFFICDB_OK;
}

static int
sub_error(trafficdb_subscriber *s, int n)
{
	snprintf(s->err, sizeof(s->err), "%s", s->c.err);
	/* the segment shrank under us (a member of its group): subscribe again, as after a stop */
	if (tdb_subring_consumer_broken(&s->c))
		return TRAFFICDB_STALE;
	return n == TDB_SUBRING_EINTR ? TRAFFICDB_SYSTEM : tdb_client_from_shm(n);
}

TDB_API int
trafficdb_receive(trafficdb_subscriber *s, trafficdb_event *out, int max, int timeout_ms)
{
	int			n;

	if (s == NULL || out == NULL || max <= 0)
		return TRAFFICDB_BADARG;
	n = tdb_subring_receive(&s->c, (TdbSubEvent *) out, (uint32_t) max, timeout_ms < 0 ? 0 : timeout_ms);
	return n >= 0 ? n : sub_error(s, n);
}

TDB_API int
trafficdb_peek(trafficdb_subscriber *s, trafficdb_event *out, int max, int timeout_ms)
{
	int			n;

	if (s == NULL || out == NULL || max <= 0)
		return TRAFFICDB_BADARG;
	n = tdb_subring_peek(&s->c, (TdbSubEvent *) out, (uint32_t) max);
	if (n == 0 && timeout_ms > 0)
	{
		n = tdb_subring_wait(&s->c, timeout_ms);
		if (n > 0)
			n = tdb_subring_peek(&s->c, (TdbSubEvent *) out, (uint32_t) max);
	}
	return n >= 0 ? n : sub_error(s, n);
}

TDB_API int
trafficdb_ack(trafficdb_subscriber *s, int n)
{
	int			rc;

	if (s == NULL || n < 0)
		return TRAFFICDB_BADARG;
	rc = tdb_subring_consume(&s->c, (uint32_t) n);
	return rc >= 0 ? TRAFFICDB_OK : sub_error(s, rc);
}

static int
req_error(trafficdb_subscriber *s, int rc)
{
	snprintf(s->err, sizeof(s->err), "%s", s->c.err);
	switch (rc)
	{
		case TDB_SUBREQ_ETIMEDOUT:
			return TRAFFICDB_TIMEOUT;
		case TDB_SUBREQ_EGONE:
			return TRAFFICDB_GONE;
		case TDB_SUBREQ_ENOMEMBER:
			return TRAFFICDB_NOTFOUND;
		case TDB_SHM_EINVAL:
			return TRAFFICDB_BADARG;
		case TDB_SUBRING_EINTR:
			return TRAFFICDB_SYSTEM;
		default:
			return tdb_client_from_shm(rc);
	}
}

TDB_API int
trafficdb_request(trafficdb_subscriber *s, const char *group, const void *req, size_t len, void *answer, size_t cap,
				  int timeout_ms)
{
	int			rc;

	if (s == NULL)
		return TRAFFICDB_BADARG;
	if (group == NULL || group[0] == '\0' || len > TRAFFICDB_REQUEST_MAX || (len > 0 && req == NULL) ||
		(cap > 0 && answer == NULL))
	{
		snprintf(s->err, sizeof(s->err), "trafficdb_request: %s",
				 group == NULL || group[0] == '\0' ? "the group is NULL or empty" :
				 len > TRAFFICDB_REQUEST_MAX ? "the request is longer than TRAFFICDB_REQUEST_MAX (4096) bytes" :
				 "a NULL buffer");
		return TRAFFICDB_BADARG;
	}
	rc = tdb_subreq_call(&s->c, group_id(group), req, (uint32_t) len, answer,
						 cap > TRAFFICDB_REQUEST_MAX ? TRAFFICDB_REQUEST_MAX : (uint32_t) cap,
						 timeout_ms < 0 ? 0 : timeout_ms);
	return rc >= 0 ? rc : req_error(s, rc);
}

_Static_assert(sizeof(trafficdb_req) == 24, "trafficdb_req is 24 bytes");

TDB_API int
trafficdb_take_request(trafficdb_subscriber *s, trafficdb_req *r, void *buf, int timeout_ms)
{
	TdbSubReqTaken t;
	int			rc;

	if (s == NULL)
		return TRAFFICDB_BADARG;
	if (r == NULL || buf == NULL)
	{
		snprintf(s->err, sizeof(s->err), "trafficdb_take_request: %s is NULL", r == NULL ? "the request" : "the buffer");
		return TRAFFICDB_BADARG;
	}
	rc = tdb_subreq_take(&s->c, &t, buf, timeout_ms < 0 ? 0 : timeout_ms);
	if (rc == 1)
	{
		memset(r, 0, sizeof(*r));
		r->cell = t.cell;
		r->len = t.len;
		r->ticket = t.ticket;
		r->requester_pid = t.requester_pid;
	}
	return rc >= 0 ? rc : req_error(s, rc);
}

TDB_API int
trafficdb_answer(trafficdb_subscriber *s, const trafficdb_req *r, const void *answer, size_t len)
{
	TdbSubReqTaken t;
	int			rc;

	if (s == NULL)
		return TRAFFICDB_BADARG;
	if (r == NULL || len > TRAFFICDB_REQUEST_MAX || (len > 0 && answer == NULL))
	{
		snprintf(s->err, sizeof(s->err), "trafficdb_answer: %s", r == NULL ? "the request is NULL" :
				 len > TRAFFICDB_REQUEST_MAX ? "the answer is longer than TRAFFICDB_REQUEST_MAX (4096) bytes" :
				 "the answer is NULL");
		return TRAFFICDB_BADARG;
	}
	memset(&t, 0, sizeof(t));
	t.cell = r->cell;
	t.ticket = r->ticket;
	rc = tdb_subreq_answer(&s->c, &t, answer, (uint32_t) len);
	return rc == TDB_SHM_OK ? TRAFFICDB_OK : req_error(s, rc);
}

TDB_API void
trafficdb_unsubscribe(trafficdb_subscriber *s)
{
	if (s == NULL)
		return;
	tdb_subring_consumer_close(&s->c);
	free(s);
}
