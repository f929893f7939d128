/*
 * ring_fixture.c
 *	  The shared helpers of the writers' ring's tests (ring_fixture.h): the
 *	  ring and its map under a fresh prefix, writers, draining, the clock.
 */
#include "unit.h"
#include "ring_fixture.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int	env_counter;

bool
env_open(RingEnv *e, uint32_t nlanes, uint32_t lane_slots)
{
	char		err[TDB_SHM_ERRLEN];
	int			rc;

	memset(e, 0, sizeof(*e));
	snprintf(e->prefix, sizeof(e->prefix), "/tdbring.%d.%d", (int) getpid(), env_counter++);
	rc = open_published(&e->w, e->prefix, 16, 1, &e->map_seg, &e->map_addr, NULL);
	CHECK_EQ_U64(rc, TDB_SHM_OK);
	if (rc != TDB_SHM_OK)
		return false;
	rc = tdb_ring_create(&e->ring, e->prefix, nlanes, lane_slots, (gid_t) -1, e->w.ctl->instance_id, err);
	if (rc != TDB_SHM_OK)
		printf("# tdb_ring_create: %s\n", err);
	CHECK_EQ_U64(rc, TDB_SHM_OK);
	if (rc != TDB_SHM_OK)
	{
		tdb_writer_close(&e->w, true);
		return false;
	}
	CHECK(!e->ring.adopted);
	tdb_ring_set_state(&e->ring, TDB_RING_RUNNING, 0);
	return true;
}

void
env_close(RingEnv *e)
{
	tdb_ring_remove(&e->ring);
	tdb_writer_close(&e->w, true);
}

trafficdb_writer *
open_writer(RingEnv *e)
{
	trafficdb_writer *w = NULL;
	int			rc = trafficdb_writer_open(e->prefix, &w);

	if (rc != TRAFFICDB_OK)
		printf("# trafficdb_writer_open: %s: %s\n", trafficdb_strerror(rc), trafficdb_writer_errmsg(NULL));
	CHECK_EQ_U64(rc, TRAFFICDB_OK);
	return w;
}

int
ring_collect(void *arg, const TdbRingUpdate *u, uint32_t lane, uint64_t ticket)
{
	Collect    *c = arg;

	if (c->n < c->cap)
	{
		Got		   *g = &c->got[c->n];

		g->u = *u;
		if (u->incident)
			memcpy(g->text, u->incident, u->incident_len);
		g->u.incident = u->incident ? g->text : NULL;
		g->lane = lane;
		g->ticket = ticket;
	}
	c->n++;
	return 0;
}

uint64_t
drain_all(RingEnv *e, Collect *c, TdbRingDrainStats *st)
{
	return tdb_ring_drain(&e->ring, 0, ring_collect, c, st);
}

int64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* An incident text of len bytes that says which k it belongs to (ASCII). */
void
incident_text(char *out, uint32_t len, uint64_t k)
{
	for (uint32_t i = 0; i < len; i++)
		out[i] = (char) ('a' + (k * 7 + i) % 26);
}
