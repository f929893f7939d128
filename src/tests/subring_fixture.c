/*
 * subring_fixture.c
 *	  The shared helpers of the subscribers' rings' tests (subring_fixture.h):
 *	  a ring under a fresh prefix, events, consumers, request servers and
 *	  requesters.
 */
#include "unit.h"
#include "subring_fixture.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int	senv_counter;

bool
senv_open(SubEnv *e, uint32_t nslots, uint32_t ring_events)
{
	char		err[TDB_SHM_ERRLEN];
	int			rc;

	memset(e, 0, sizeof(*e));
	snprintf(e->prefix, sizeof(e->prefix), "/tdbsub.%d.%d", (int) getpid(), senv_counter++);
	rc = tdb_subring_create(&e->r, e->prefix, nslots, ring_events, (gid_t) -1, INSTANCE, err);
	if (rc != TDB_SHM_OK)
		printf("# tdb_subring_create: %s\n", err);
	CHECK_EQ_U64(rc, TDB_SHM_OK);
	if (rc != TDB_SHM_OK)
		return false;
	tdb_subring_set_state(&e->r, TDB_SUBRING_RUNNING);
	return true;
}

void
senv_close(SubEnv *e)
{
	tdb_subring_remove(&e->r);
}

TdbSubEvent
mkev(uint64_t id, uint64_t gen)
{
	TdbSubEvent ev;

	memset(&ev, 0, sizeof(ev));
	ev.kind = TDB_SUBEV_CHANGE;
	ev.location_id = id;
	ev.generation = gen;
	ev.created_us = 1700000000000000 + (int64_t) gen;
	ev.subscription = 1;
	ev.old_speed_kmh = 50;
	ev.new_speed_kmh = 20;
	ev.old_free_flow_kmh = ev.new_free_flow_kmh = 80;
	ev.old_congestion = 1;
	ev.new_congestion = 3;
	ev.old_confidence = ev.new_confidence = 90;
	return ev;
}

bool
open_consumer(TdbSubConsumer *c, SubEnv *e, void *borrow)
{
	char		err[TDB_SHM_ERRLEN];
	int			rc = tdb_subring_consumer_open(c, e->prefix, INSTANCE, borrow, err);

	if (rc != TDB_SHM_OK)
		printf("# tdb_subring_consumer_open: %s\n", err);
	CHECK_EQ_U64(rc, TDB_SHM_OK);
	return rc == TDB_SHM_OK;
}

/* Sweep into ch (up to max); returns how many changes. */
uint32_t
sweep(SubEnv *e, TdbSubChange *ch, uint32_t max)
{
	uint32_t	n = 0;

	CHECK_EQ_U64(tdb_subring_sweep(&e->r, ch, max, &n), TDB_SHM_OK);
	return n;
}

/* Sweep until slot is attached (bounded). */
bool
attach(SubEnv *e, int slot)
{
	for (int i = 0; i < 2000; i++)
	{
		TdbSubChange ch[8];
		uint32_t	n = sweep(e, ch, 8);

		for (uint32_t k = 0; k < n; k++)
			if (ch[k].kind == TDB_SUBCHANGE_ATTACHED && (int) ch[k].slot == slot)
				return true;
		sleep_us(1000);
	}
	CHECK(!"slot attached");
	return false;
}

/* Open should fail with want (and not crash). */
void
open_fails(SubEnv *e, uint64_t instance, int want)
{
	TdbSubConsumer c;
	char		err[TDB_SHM_ERRLEN];
	int			rc = tdb_subring_consumer_open(&c, e->prefix, instance, NULL, err);

	CHECK_EQ_U64(rc, (uint64_t) want);
	if (rc == TDB_SHM_OK)
		tdb_subring_consumer_close(&c);
	CHECK_EQ_U64(c.fd, (uint64_t) -1);	/* nothing left open */
}

/* The answer to a request: "<server id>:" then the request's bytes reversed. */
uint32_t
make_answer(int id, const unsigned char *req, uint32_t len, unsigned char *out)
{
	int			n = snprintf((char *) out, 16, "%d:", id);

	for (uint32_t i = 0; i < len; i++)
		out[n + i] = req[len - 1 - i];
	return (uint32_t) n + len;
}

void *
server_main(void *arg)
{
	Server	   *sv = arg;
	TdbSubConsumer c;
	char		err[TDB_SHM_ERRLEN];
	static _Thread_local unsigned char req[TDB_SUBREQ_MAX_BYTES];
	static _Thread_local unsigned char ans[TDB_SUBREQ_MAX_BYTES + 16];
	int			taken_count = 0;

	if (tdb_subring_consumer_open(&c, sv->e->prefix, INSTANCE, sv->e->r.base, err) != TDB_SHM_OK ||
		tdb_subring_subscribe(&c, NULL, 0, REQ_GROUP, TDB_SUBGROUP_ROUND_ROBIN) != TDB_SHM_OK)
	{
		atomic_store(&sv->ready, -1);
		return NULL;
	}
	atomic_store(&sv->ready, 1);
	while (!atomic_load(sv->stop))
	{
		TdbSubReqTaken t;
		int			rc = tdb_subreq_take(&c, &t, req, 20);

		if (rc == 0)
			continue;
		if (rc != 1)
		{
			sv->bad++;
			break;
		}
		if (sv->die_after > 0 && ++taken_count == sv->die_after)
			break;				/* leaves with the request taken: it must go to another */
		if (sv->work_us > 0)
			sleep_us(sv->work_us);
		rc = tdb_subreq_answer(&c, &t, ans, make_answer(sv->id, req, t.len, ans));
		if (rc == TDB_SHM_OK)
			sv->answered++;
		else if (rc == TDB_SUBREQ_EGONE)
			sv->gone++;
		else
			sv->bad++;
	}
	tdb_subring_consumer_close(&c);
	return NULL;
}

bool
start_servers(Server *sv, pthread_t *t, int n, SubEnv *e, _Atomic int *stop, int work_us)
{
	for (int i = 0; i < n; i++)
	{
		memset(&sv[i], 0, sizeof(sv[i]));
		sv[i].e = e;
		sv[i].id = i + 1;
		sv[i].work_us = work_us;
		sv[i].stop = stop;
		pthread_create(&t[i], NULL, server_main, &sv[i]);
	}
	for (int i = 0; i < n; i++)
	{
		for (int k = 0; k < 5000 && atomic_load(&sv[i].ready) == 0; k++)
			sleep_us(1000);
		if (atomic_load(&sv[i].ready) != 1)
			return false;
	}
	return true;
}


/* count calls of random bytes; each answer must be the request reversed, from one server */
void *
requester_main(void *arg)
{
	Requester  *rq = arg;
	TdbSubConsumer c;
	char		err[TDB_SHM_ERRLEN];
	unsigned char req[600];
	unsigned char ans[TDB_SUBREQ_MAX_BYTES];

	if (tdb_subring_consumer_open(&c, rq->e->prefix, INSTANCE, rq->e->r.base, err) != TDB_SHM_OK ||
		tdb_subring_subscribe(&c, NULL, 0, 0, 0) != TDB_SHM_OK)
	{
		rq->bad++;
		return NULL;
	}
	for (int i = 0; i < rq->count; i++)
	{
		uint32_t	len = (uint32_t) (unit_rand(&rq->seed) % sizeof(req));
		unsigned char want[sizeof(req) + 16];
		int			n;
		int			sid;

		for (uint32_t k = 0; k < len; k++)
			req[k] = (unsigned char) unit_rand(&rq->seed);
		n = tdb_subreq_call(&c, REQ_GROUP, req, len, ans, sizeof(ans), 20000);
		if (n < 2 || sscanf((const char *) ans, "%d:", &sid) != 1 || sid < 1 || sid > 7 ||
			(uint32_t) n != make_answer(sid, req, len, want) || memcmp(ans, want, (size_t) n) != 0)
		{
			if (rq->bad++ == 0)
				printf("# call %d: %d (%s)\n", i, n, c.err);
			continue;
		}
		rq->ok++;
		rq->by_server[sid]++;
	}
	tdb_subring_consumer_close(&c);
	return NULL;
}

/* Every cell FREE (nothing leaked) */
uint32_t
cells_in_use(SubEnv *e)
{
	void	   *area = (char *) e->r.base + tdb_subreq_offset(e->r.nslots, e->r.ring_events);
	uint32_t	n = 0;

	for (uint32_t i = 0; i < tdb_subreq_cells(e->r.nslots); i++)
		n += TDB_SUBREQ_STATE(atomic_load(&tdb_subreq_cell(area, e->r.nslots, i)->word)) != TDB_SUBREQ_FREE;
	return n;
}
