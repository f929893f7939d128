/*
 * test_ring.c
 *	  The writers' ring (src/ring/ring.c) and libtrafficdb's writers
 *	  (src/client/writer.c) against a real published map and a real
 *	  <prefix>.writers in /dev/shm, the daemon's side played by the test
 *	  (ring_fixture.h), one thread: round trips of every field, validation,
 *	  BUSY and WAIT, unpublished slots, damaged lanes, open errors, and a
 *	  ring truncated, stopped or unlinked under its writers.  Live
 *	  producers (threads, processes): test_ring_producers.c.
 */
#include "unit.h"
#include "ring_fixture.h"
#include "fixture.h"
#include "ring/ring.h"
#include "trafficdb.h"

#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

UNIT_TEST(test_ring_roundtrip)
{
	RingEnv		e;
	trafficdb_writer *w;
	trafficdb_handle *h = NULL;
	static char text[TDB_VALID_MAX_INCIDENT];
	static Got	got[16];
	Collect		c = {got, 0, 16};
	uint32_t	lens[] = {0, 1, 56, 57, 4096};
	int64_t		before = now_us();
	TdbRingDrainStats st;

	if (!env_open(&e, 4, 256))
		return;
	w = open_writer(&e);
	if (w == NULL)
		goto done;
	incident_text(text, sizeof(text), 3);
	memcpy(text + 60, "Ålandsväg – closed ", strlen("Ålandsväg – closed "));	/* multibyte UTF-8 in the long one */

	for (int i = 0; i < 5; i++)
	{
		trafficdb_update u = {0};

		u.location_id = 1000 + i;
		u.observed_at_us = 1700000000000000 + i;
		u.speed_kmh = 10.5f + i;
		u.free_flow_kmh = 80 + i;
		u.congestion = (uint8_t) (i % 5);
		u.confidence = (uint8_t) (90 + i);
		u.incident = text;
		u.incident_len = lens[i];
		u.has = TRAFFICDB_HAS_SPEED | TRAFFICDB_HAS_FREE_FLOW | TRAFFICDB_HAS_CONGESTION |
			TRAFFICDB_HAS_CONFIDENCE | TRAFFICDB_HAS_INCIDENT;
		CHECK_EQ_U64(trafficdb_put(w, &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);
	}
	{
		/* nothing present but the id; observed_at 0 = now; a NaN speed "present" is absent */
		trafficdb_update u = {.location_id = 1999, .speed_kmh = NAN, .has = TRAFFICDB_HAS_SPEED};
		trafficdb_update v = {.location_id = 1500, .incident = "x", .incident_len = 1,
		.speed_kmh = 5, .congestion = 4};	/* has = 0: the fields are not set */

		CHECK_EQ_U64(trafficdb_put(w, &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);
		CHECK_EQ_U64(trafficdb_put(w, &v, TRAFFICDB_ASYNC), TRAFFICDB_OK);
	}
	CHECK_EQ_U64(drain_all(&e, &c, &st), 7);
	CHECK_EQ_U64(c.n, 7);
	CHECK_EQ_U64(st.lanes_reset, 0);
	/* slots: 1 + incidents' continuation slots 0, 1, 1, 2, 74 + 2 */
	CHECK_EQ_U64(st.slots, 5 + 0 + 1 + 1 + 2 + 74 + 2);
	CHECK_EQ_U64(trafficdb_open(e.prefix, &h), TRAFFICDB_OK);
	CHECK_EQ_U64(trafficdb_begin(h, NULL), TRAFFICDB_OK);
	for (int i = 0; i < 5 && c.n == 7; i++)
	{
		const TdbRingUpdate *u = &got[i].u;
		trafficdb_location loc;

		CHECK_EQ_U64(u->location_id, 1000 + i);
		CHECK_EQ_U64(u->observed_at_us, 1700000000000000 + i);
		CHECK(u->speed_kmh == 10.5f + i && u->free_flow_kmh == 80.0f + i);
		CHECK_EQ_U64(u->congestion, i % 5);
		CHECK_EQ_U64(u->confidence, 90 + i);
		CHECK_EQ_U64(u->present, TDB_RING_HAS_MASK);
		CHECK_EQ_U64(u->incident_len, lens[i]);
		CHECK(u->incident != NULL && memcmp(u->incident, text, lens[i]) == 0);
		CHECK_EQ_U64(u->map_id, 42);
		CHECK_EQ_U64(trafficdb_get(h, 1000 + i, &loc), TRAFFICDB_OK);
		CHECK_EQ_U64(u->record_hint, loc.index);
		CHECK_EQ_U64(got[i].lane, 0);
	}
	if (c.n == 7)
	{
		CHECK_EQ_U64(got[5].u.location_id, 1999);
		CHECK_EQ_U64(got[5].u.present, 0);
		CHECK(isnan(got[5].u.speed_kmh) && isnan(got[5].u.free_flow_kmh));
		CHECK_EQ_U64(got[5].u.congestion, TDB_RING_UNKNOWN);
		CHECK_EQ_U64(got[5].u.confidence, TDB_RING_UNKNOWN);
		CHECK(got[5].u.incident == NULL);
		CHECK(got[5].u.observed_at_us >= before && got[5].u.observed_at_us <= now_us());
		CHECK_EQ_U64(got[6].u.present, 0);
		CHECK(got[6].u.incident == NULL && isnan(got[6].u.speed_kmh));
		CHECK_EQ_U64(got[6].u.congestion, TDB_RING_UNKNOWN);
		/* tickets: consecutive, each update after the slots of the one before */
		CHECK_EQ_U64(got[0].ticket, 0);
		CHECK_EQ_U64(got[4].ticket, 1 + 2 + 2 + 3);
	}
	trafficdb_end(h);
	trafficdb_close(h);
	/* an empty lane drains nothing */
	c.n = 0;
	CHECK_EQ_U64(drain_all(&e, &c, &st), 0);
	CHECK_EQ_U64(st.lanes_nonempty, 0);
	/* an orderly stop marks the control block stopped (not the ring): puts say STALE */
	{
		trafficdb_update u = {.location_id = 1001, .speed_kmh = 1, .has = TRAFFICDB_HAS_SPEED};

		atomic_store(&e.w.ctl->state, TDB_DAEMON_STOPPED);
		CHECK_EQ_U64(trafficdb_put(w, &u, TRAFFICDB_ASYNC), (uint64_t) TRAFFICDB_STALE);
		atomic_store(&e.w.ctl->state, TDB_DAEMON_RUNNING);
		CHECK_EQ_U64(trafficdb_put(w, &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);
	}
	trafficdb_writer_close(w);
done:
	env_close(&e);
}

static uint64_t
lane_tail(RingEnv *e, uint32_t lane)
{
	return atomic_load(&tdb_ring_lane(e->ring.base, lane)->tail);
}


/*
 * trafficdb_put_many reads the clock once for its batch: every update whose
 * observed_at_us is 0 gets the time of the call (one value, between the
 * times before and after it), and one that says its time keeps it.
 */
UNIT_TEST(test_ring_put_many_reads_the_clock_once)
{
	RingEnv		e;
	trafficdb_writer *w;
	static trafficdb_update u[300];
	static Got	got[300];
	Collect		c = {got, 0, 300};
	TdbRingDrainStats st;
	int64_t		before,
				after;
	size_t		accepted = 0;

	if (!env_open(&e, 1, 1024))
		return;
	w = open_writer(&e);
	if (w == NULL)
		goto done;
	for (int i = 0; i < 300; i++)
		u[i] = (trafficdb_update) {.location_id = 1000 + i, .speed_kmh = 30, .has = TRAFFICDB_HAS_SPEED};
	u[150].observed_at_us = 1700000000000000;
	/* the first put reads and checks the map: not inside the timed call */
	CHECK_EQ_U64(trafficdb_put(w, &u[0], TRAFFICDB_ASYNC), TRAFFICDB_OK);
	CHECK_EQ_U64(drain_all(&e, &c, &st), 1);
	c.n = 0;
	before = now_us();
	CHECK_EQ_U64(trafficdb_put_many(w, u, 300, TRAFFICDB_ASYNC, &accepted), TRAFFICDB_OK);
	after = now_us();
	CHECK_EQ_U64(accepted, 300);
	CHECK_EQ_U64(drain_all(&e, &c, &st), 300);
	for (int i = 0; i < 300 && c.n == 300; i++)
	{
		if (i == 150)
			CHECK_EQ_U64(got[i].u.observed_at_us, 1700000000000000);
		else if (got[i].u.observed_at_us != got[0].u.observed_at_us)
		{
			CHECK_EQ_U64(got[i].u.observed_at_us, got[0].u.observed_at_us);
			break;
		}
	}
	CHECK(got[0].u.observed_at_us >= before && got[0].u.observed_at_us <= after);
	trafficdb_writer_close(w);
done:
	env_close(&e);
}
/* put u and expect TRAFFICDB_BADARG with all of the words in the message, nothing written */
static void
expect_bad(RingEnv *e, trafficdb_writer *w, const trafficdb_update *u, int code, const char *w1, const char *w2)
{
	uint64_t	tail = lane_tail(e, 0);
	int			rc = trafficdb_put(w, u, TRAFFICDB_ASYNC);

	CHECK_EQ_U64(rc, (uint64_t) code);
	if (strstr(trafficdb_writer_errmsg(w), w1) == NULL || (w2 && strstr(trafficdb_writer_errmsg(w), w2) == NULL))
		unit_fail(__FILE__, __LINE__, "message \"%s\" lacks \"%s\" / \"%s\"", trafficdb_writer_errmsg(w), w1,
				  w2 ? w2 : "");
	CHECK_EQ_U64(lane_tail(e, 0), tail);
}

UNIT_TEST(test_ring_validation)
{
	RingEnv		e;
	trafficdb_writer *w;
	static char big[TDB_VALID_MAX_INCIDENT + 1];
	Collect		c = {NULL, 0, 0};
	trafficdb_update good = {.location_id = 1001, .speed_kmh = 50, .has = TRAFFICDB_HAS_SPEED};
	trafficdb_update u;
	char		msg[TDB_VALID_MSGLEN];

	if (!env_open(&e, 2, 128))
		return;
	w = open_writer(&e);
	if (w == NULL)
		goto done;
	memset(big, 'a', sizeof(big));

	u = good, u.speed_kmh = 400.5f;
	expect_bad(&e, w, &u, TRAFFICDB_BADARG, "speed_kmh 400.5", "[0, 400]");
	u = good, u.speed_kmh = -1;
	expect_bad(&e, w, &u, TRAFFICDB_BADARG, "speed_kmh -1", NULL);
	u = good, u.speed_kmh = INFINITY;
	expect_bad(&e, w, &u, TRAFFICDB_BADARG, "speed_kmh inf", NULL);
	u = good, u.free_flow_kmh = 1000, u.has |= TRAFFICDB_HAS_FREE_FLOW;
	expect_bad(&e, w, &u, TRAFFICDB_BADARG, "free_flow_kmh 1000", NULL);
	u = good, u.congestion = 5, u.has |= TRAFFICDB_HAS_CONGESTION;
	expect_bad(&e, w, &u, TRAFFICDB_BADARG, "congestion 5", "[0, 4]");
	u = good, u.confidence = 101, u.has |= TRAFFICDB_HAS_CONFIDENCE;
	expect_bad(&e, w, &u, TRAFFICDB_BADARG, "confidence 101", "[0, 100]");
	u = good, u.incident = big, u.incident_len = sizeof(big), u.has |= TRAFFICDB_HAS_INCIDENT;
	expect_bad(&e, w, &u, TRAFFICDB_BADARG, "incident is 4097 bytes", "4096");
	u = good, u.incident = "ok\xC3(", u.incident_len = 4, u.has |= TRAFFICDB_HAS_INCIDENT;
	expect_bad(&e, w, &u, TRAFFICDB_BADARG, "incident is not valid UTF-8", "byte 2");
	u = good, u.incident = "a\0b", u.incident_len = 3, u.has |= TRAFFICDB_HAS_INCIDENT;
	expect_bad(&e, w, &u, TRAFFICDB_BADARG, "incident", "byte 1");
	u = good, u.incident = "\xED\xA0\x80", u.incident_len = 3, u.has |= TRAFFICDB_HAS_INCIDENT;	/* a surrogate */
	expect_bad(&e, w, &u, TRAFFICDB_BADARG, "not valid UTF-8", NULL);
	u = good, u.incident = "\xC0\xAF", u.incident_len = 2, u.has |= TRAFFICDB_HAS_INCIDENT;	/* overlong */
	expect_bad(&e, w, &u, TRAFFICDB_BADARG, "not valid UTF-8", NULL);
	u = good, u.observed_at_us = now_us() + 6 * 60 * INT64_C(1000000);
	expect_bad(&e, w, &u, TRAFFICDB_BADARG, "observed_at", "more than 5 minutes in the future");
	u = good, u.has = 0x40;
	expect_bad(&e, w, &u, TRAFFICDB_BADARG, "unknown bits", NULL);
	u = good, u.location_id = 999999;
	expect_bad(&e, w, &u, TRAFFICDB_NOTFOUND, "location 999999 is not in the published map", NULL);
	CHECK_EQ_U64(trafficdb_put(w, NULL, 0), (uint64_t) TRAFFICDB_BADARG);

	/* the limits themselves are fine */
	u = good, u.speed_kmh = 400, u.free_flow_kmh = 0, u.congestion = 4, u.confidence = 100,
		u.observed_at_us = now_us() + 4 * 60 * INT64_C(1000000), u.incident = big, u.incident_len = 4096,
		u.has = TRAFFICDB_HAS_SPEED | TRAFFICDB_HAS_FREE_FLOW | TRAFFICDB_HAS_CONGESTION |
		TRAFFICDB_HAS_CONFIDENCE | TRAFFICDB_HAS_INCIDENT;
	CHECK_EQ_U64(trafficdb_put(w, &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);
	u = good, u.incident = "Åland \xF0\x9F\x9A\xA7", u.incident_len = (uint32_t) strlen("Åland \xF0\x9F\x9A\xA7"),
		u.has |= TRAFFICDB_HAS_INCIDENT;
	CHECK_EQ_U64(trafficdb_put(w, &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);

	/* put_many stops at the first bad one */
	{
		trafficdb_update many[4] = {good, good, good, good};
		size_t		accepted = 99;

		many[2].congestion = 9;
		many[2].has |= TRAFFICDB_HAS_CONGESTION;
		CHECK_EQ_U64(trafficdb_put_many(w, many, 4, TRAFFICDB_ASYNC, &accepted), (uint64_t) TRAFFICDB_BADARG);
		CHECK_EQ_U64(accepted, 2);
		CHECK(strstr(trafficdb_writer_errmsg(w), "congestion 9") != NULL);
	}
	CHECK_EQ_U64(drain_all(&e, &c, NULL), 4);

	/* the shared rules directly, as the daemon's SQL feed uses them */
	CHECK_EQ_U64(tdb_valid_speed("speed_kmh", NAN, msg), TDB_VALID_OK);
	CHECK_EQ_U64(tdb_valid_speed("speed_kmh", 400.0001, msg), (uint64_t) TDB_VALID_BAD);
	CHECK(strcmp(msg, "speed_kmh 400 is outside [0, 400]") == 0 || strstr(msg, "speed_kmh 400") != NULL);
	CHECK_EQ_U64(tdb_valid_congestion(-1, msg), (uint64_t) TDB_VALID_BAD);
	CHECK(strcmp(msg, "congestion -1 is outside [0, 4]") == 0);
	CHECK_EQ_U64(tdb_valid_confidence(100, msg), TDB_VALID_OK);
	CHECK_EQ_U64(tdb_valid_incident("", 0, msg), TDB_VALID_OK);
	CHECK_EQ_U64(tdb_valid_incident("\xF4\x90\x80\x80", 4, msg), (uint64_t) TDB_VALID_BAD);	/* > U+10FFFF */
	CHECK_EQ_U64(tdb_valid_incident("\xE2\x82", 2, msg), (uint64_t) TDB_VALID_BAD);	/* truncated */
	CHECK_EQ_U64(tdb_valid_observed(2000000000000000, 2000000000000000 - 300000000, msg), TDB_VALID_OK);
	CHECK_EQ_U64(tdb_valid_observed(2000000000000001, 2000000000000000 - 300000000, msg), (uint64_t) TDB_VALID_BAD);
	CHECK(strstr(msg, "observed_at 2033-05-18 03:33:20.000001+00") != NULL);
	/* before or at the Unix epoch: the object's "no traffic", never shown: refused, not lost */
	CHECK_EQ_U64(tdb_valid_observed(-1, 2000000000000000, msg), (uint64_t) TDB_VALID_BAD);
	CHECK(strstr(msg, "not after 1970-01-01") != NULL);
	CHECK_EQ_U64(tdb_valid_observed(INT64_MIN, 2000000000000000, msg), (uint64_t) TDB_VALID_BAD);
	CHECK_EQ_U64(tdb_valid_observed(1, 2000000000000000, msg), TDB_VALID_OK);
	trafficdb_writer_close(w);
done:
	env_close(&e);
}

typedef struct Drainer
{
	RingEnv    *e;
	Collect		c;
	_Atomic int stop;
	int			delay_ms;
} Drainer;

static void *
drainer_main(void *arg)
{
	Drainer    *d = arg;

	sleep_us(d->delay_ms * 1000L);
	for (int i = 0; i < 200000 && !atomic_load(&d->stop); i++)
	{
		if (tdb_ring_drain(&d->e->ring, 0, ring_collect, &d->c, NULL) == 0)
			sleep_us(200);
	}
	return NULL;
}

/*
 * Review of 114cb17: a batch that waits for lane space (TRAFFICDB_WAIT, the
 * drain comes 1.2 s later) still stamps its updates of observed_at_us 0 with
 * the time of the call, though they enter the ring 1.2 s later; the daemon's
 * own check (the drain's, against its clock) accepts them.  The future check
 * is made against the time of the call too: stricter than against the time of
 * the enqueue (an update 5 min + 0.7 s ahead of the call is refused though it
 * is under 5 min ahead when it goes in), never looser.
 */
UNIT_TEST(test_ring_put_many_waited_batch_times)
{
	RingEnv		e;
	trafficdb_writer *w;
	trafficdb_update one = {.location_id = 1001, .speed_kmh = 50, .has = TRAFFICDB_HAS_SPEED};
	static trafficdb_update u[200];
	static Got	got[400];
	int64_t		before,
				after;
	size_t		accepted = 0;
	uint32_t	slots = 128;

	if (!env_open(&e, 1, slots))
		return;
	w = open_writer(&e);
	if (w == NULL)
		goto done;
	CHECK_EQ_U64(trafficdb_writer_set_timeout(w, 5000), TRAFFICDB_OK);
	for (int round = 0; round < 2; round++)
	{
		Drainer		d = {.e = &e, .c = {got, 0, 400}, .delay_ms = 1200};
		pthread_t	t;
		Collect		c = {NULL, 0, 0};
		int			rc;

		drain_all(&e, &c, NULL);
		for (uint32_t i = 0; i < slots; i++)
			CHECK_EQ_U64(trafficdb_put(w, &one, TRAFFICDB_ASYNC), TRAFFICDB_OK);
		for (int i = 0; i < 200; i++)
			u[i] = (trafficdb_update) {.location_id = 1000 + i, .speed_kmh = 30, .has = TRAFFICDB_HAS_SPEED};
		before = now_us();
		if (round == 0)
			u[100].observed_at_us = before + 300000000 - 200000;	/* 5 min - 0.2 s ahead of the call: valid */
		else
			u[100].observed_at_us = before + 300000000 + 700000;	/* 5 min + 0.7 s ahead of the call */
		pthread_create(&t, NULL, drainer_main, &d);
		rc = trafficdb_put_many(w, u, 200, TRAFFICDB_ASYNC | TRAFFICDB_WAIT, &accepted);
		after = now_us();
		sleep_us(300000);
		atomic_store(&d.stop, 1);
		pthread_join(t, NULL);
		printf("# round %d: put_many %d, accepted %zu, took %.3f s, %zu drained; %s\n", round, rc, accepted,
			   (after - before) / 1e6, d.c.n, rc ? trafficdb_writer_errmsg(w) : "");
		CHECK(after - before >= 1100000);
		if (round == 0)
		{
			CHECK_EQ_U64(rc, TRAFFICDB_OK);
			CHECK_EQ_U64(accepted, 200);
			CHECK_EQ_U64(d.c.n, slots + 200);
			/* every 0 stamped with the call's start, though it went in >= 1.1 s later */
			for (size_t i = slots; i < d.c.n; i++)
				if (i - slots != 100 && (got[i].u.observed_at_us < before || got[i].u.observed_at_us > before + 100000))
				{
					CHECK(got[i].u.observed_at_us >= before && got[i].u.observed_at_us <= before + 100000);
					break;
				}
			CHECK_EQ_U64(got[slots + 100].u.observed_at_us, u[100].observed_at_us);
		}
		else
		{
			/* refused at prepare: stricter than the time it would have gone in */
			CHECK_EQ_U64(rc, (uint64_t) TRAFFICDB_BADARG);
			CHECK_EQ_U64(accepted, 100);
			CHECK(strstr(trafficdb_writer_errmsg(w), "future") != NULL);
		}
	}
	trafficdb_writer_close(w);
done:
	env_close(&e);
}

/*
 * trafficdb_end_batch: a drain stops at the end of batch of a lane (one
 * slot, counted in marks) and drains nothing more of it until the
 * generation is committed (tdb_ring_committed), while other lanes go on;
 * tdb_ring_batch_ended says so meanwhile.  Bad flags are BADARG.
 */
UNIT_TEST(test_ring_end_batch)
{
	RingEnv		e;
	trafficdb_writer *a;
	trafficdb_writer *b;
	trafficdb_update u = {.location_id = 1001, .speed_kmh = 50, .has = TRAFFICDB_HAS_SPEED};
	Collect		c = {NULL, 0, 0};
	TdbRingDrainStats st;

	if (!env_open(&e, 2, 128))
		return;
	a = open_writer(&e);
	b = open_writer(&e);
	if (a == NULL || b == NULL)
		goto done;
	CHECK_EQ_U64(trafficdb_end_batch(a, 0x4), (uint64_t) TRAFFICDB_BADARG);
	CHECK(strstr(trafficdb_writer_errmsg(a), "flags 0x4") != NULL);
	CHECK_EQ_U64(trafficdb_end_batch(NULL, 0), (uint64_t) TRAFFICDB_BADARG);

	/* a: 2 updates, the end, 3 more; b: 4 updates */
	for (int i = 0; i < 2; i++)
		CHECK_EQ_U64(trafficdb_put(a, &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);
	CHECK_EQ_U64(trafficdb_end_batch(a, 0), TRAFFICDB_OK);
	for (int i = 0; i < 3; i++)
		CHECK_EQ_U64(trafficdb_put(a, &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);
	for (int i = 0; i < 4; i++)
		CHECK_EQ_U64(trafficdb_put(b, &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);
	CHECK(!tdb_ring_batch_ended(&e.ring));

	CHECK_EQ_U64(drain_all(&e, &c, &st), 2 + 4);
	CHECK_EQ_U64(st.marks, 1);
	CHECK_EQ_U64(st.slots, 2 + 1 + 4);
	CHECK(tdb_ring_batch_ended(&e.ring));
	/* b goes on; a waits at its end */
	CHECK_EQ_U64(trafficdb_put(b, &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);
	CHECK_EQ_U64(drain_all(&e, &c, &st), 1);
	CHECK_EQ_U64(st.marks, 0);
	CHECK_EQ_U64(drain_all(&e, &c, &st), 0);

	/* committed: a's 3 later updates are drained */
	tdb_ring_committed(&e.ring, 2);
	CHECK(!tdb_ring_batch_ended(&e.ring));
	CHECK_EQ_U64(drain_all(&e, &c, &st), 3);
	CHECK_EQ_U64(c.n, 2 + 4 + 1 + 3);

	/* two ends in a row: each needs its commit (an empty batch between) */
	CHECK_EQ_U64(trafficdb_end_batch(a, 0), TRAFFICDB_OK);
	CHECK_EQ_U64(trafficdb_end_batch(a, 0), TRAFFICDB_OK);
	CHECK_EQ_U64(trafficdb_put(a, &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);
	CHECK_EQ_U64(drain_all(&e, &c, &st), 0);
	CHECK_EQ_U64(st.marks, 1);
	tdb_ring_committed(&e.ring, 3);
	CHECK_EQ_U64(drain_all(&e, &c, &st), 0);
	CHECK_EQ_U64(st.marks, 1);
	tdb_ring_committed(&e.ring, 4);
	CHECK_EQ_U64(drain_all(&e, &c, &st), 1);

	/* a full lane: an end of batch is BUSY, and waits for space with TRAFFICDB_WAIT */
	for (int i = 0; i < 200 && trafficdb_put(a, &u, TRAFFICDB_ASYNC) == TRAFFICDB_OK; i++)
		;
	CHECK_EQ_U64(trafficdb_end_batch(a, 0), (uint64_t) TRAFFICDB_BUSY);
	CHECK_EQ_U64(drain_all(&e, &c, &st), 128);
	CHECK_EQ_U64(trafficdb_end_batch(a, TRAFFICDB_WAIT), TRAFFICDB_OK);
	CHECK_EQ_U64(drain_all(&e, &c, &st), 0);
	CHECK_EQ_U64(st.marks, 1);
	free(c.got);
done:
	if (a)
		trafficdb_writer_close(a);
	if (b)
		trafficdb_writer_close(b);
	env_close(&e);
}

UNIT_TEST(test_ring_busy_when_full)
{
	RingEnv		e;
	trafficdb_writer *w;
	trafficdb_update u = {.location_id = 1001, .speed_kmh = 50, .has = TRAFFICDB_HAS_SPEED};
	trafficdb_update inc = u;
	static char text[TDB_VALID_MAX_INCIDENT];
	Collect		c = {NULL, 0, 0};
	uint32_t	slots = 128;

	if (!env_open(&e, 1, slots))
		return;
	w = open_writer(&e);
	if (w == NULL)
		goto done;
	for (uint32_t i = 0; i < slots; i++)
		CHECK_EQ_U64(trafficdb_put(w, &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);
	CHECK_EQ_U64(trafficdb_put(w, &u, TRAFFICDB_ASYNC), (uint64_t) TRAFFICDB_BUSY);
	CHECK(strstr(trafficdb_writer_errmsg(w), "full") != NULL);
	CHECK(trafficdb_retry_after_us(w) > 0);
	CHECK_EQ_U64(lane_tail(&e, 0), slots);
	CHECK_EQ_U64(atomic_load(&tdb_ring_lane(e.ring.base, 0)->busy), 1);

	/* one drain frees the lane */
	CHECK_EQ_U64(drain_all(&e, &c, NULL), slots);
	CHECK_EQ_U64(trafficdb_put(w, &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);

	/* an incident of 4,096 bytes needs 75 slots: BUSY exactly when they do not fit */
	memset(text, 'i', sizeof(text));
	inc.incident = text;
	inc.incident_len = 4096;
	inc.has |= TRAFFICDB_HAS_INCIDENT;
	for (uint32_t i = 1; i < slots - 75; i++)
		CHECK_EQ_U64(trafficdb_put(w, &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);
	CHECK_EQ_U64(trafficdb_put(w, &inc, TRAFFICDB_ASYNC), TRAFFICDB_OK);	/* exactly full */
	CHECK_EQ_U64(trafficdb_put(w, &u, TRAFFICDB_ASYNC), (uint64_t) TRAFFICDB_BUSY);
	c.n = 0;
	CHECK_EQ_U64(drain_all(&e, &c, NULL), 1 + (slots - 76) + 1);
	/* wrapped: the incident spans the lane's end */
	CHECK_EQ_U64(trafficdb_put(w, &inc, TRAFFICDB_ASYNC), TRAFFICDB_OK);

	/* TRAFFICDB_WAIT: fill it, then a drain 50 ms later lets the put through */
	for (int i = 0; i < 200 && trafficdb_put(w, &u, TRAFFICDB_ASYNC) == TRAFFICDB_OK; i++)
		;
	{
		Drainer		d = {.e = &e, .c = {NULL, 0, 0}, .delay_ms = 50};
		pthread_t	t;

		pthread_create(&t, NULL, drainer_main, &d);
		CHECK_EQ_U64(trafficdb_put(w, &u, TRAFFICDB_ASYNC | TRAFFICDB_WAIT), TRAFFICDB_OK);
		atomic_store(&d.stop, 1);
		pthread_join(t, NULL);
	}
	/* ... and without a drain, TRAFFICDB_BUSY after the timeout */
	drain_all(&e, &c, NULL);
	for (int i = 0; i < 200 && trafficdb_put(w, &u, TRAFFICDB_ASYNC) == TRAFFICDB_OK; i++)
		;
	CHECK_EQ_U64(trafficdb_writer_set_timeout(w, 30), TRAFFICDB_OK);
	CHECK_EQ_U64(trafficdb_put(w, &u, TRAFFICDB_WAIT), (uint64_t) TRAFFICDB_BUSY);
	CHECK(strstr(trafficdb_writer_errmsg(w), "stayed full") != NULL);
	trafficdb_writer_close(w);
done:
	env_close(&e);
}

UNIT_TEST(test_ring_unpublished_slots_overwritten)
{
	RingEnv		e;
	trafficdb_writer *a;
	trafficdb_writer *b;
	static Got	got[8];
	Collect		c = {got, 0, 8};
	trafficdb_update u = {.location_id = 1001, .speed_kmh = 11, .has = TRAFFICDB_HAS_SPEED};

	if (!env_open(&e, 2, 128))
		return;
	a = open_writer(&e);
	if (a == NULL)
		goto done;
	for (int i = 0; i < 3; i++)
		CHECK_EQ_U64(trafficdb_put(a, &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);
	{
		/* a put "killed" between its slot writes and its tail store */
		TdbRingUpdate half = {.location_id = 1777, .map_id = 42, .present = TDB_RING_HAS_SPEED | TDB_RING_HAS_INCIDENT,
		.speed_kmh = 77, .free_flow_kmh = NAN, .congestion = 255, .confidence = 255,
		.observed_at_us = now_us(), .incident = "half-written incident text, more than fifty-six bytes long", .incident_len = 58};

		tdb_ring_write_slots(tdb_ring_lane_slots(e.ring.base, 2, 128, 0), 128, lane_tail(&e, 0), &half);
	}
	trafficdb_writer_close(a);
	CHECK_EQ_U64(drain_all(&e, &c, NULL), 3);
	CHECK_EQ_U64(drain_all(&e, &c, NULL), 0);	/* nothing past the tail is visible */

	b = open_writer(&e);		/* the lane is free again: the same one */
	if (b == NULL)
		goto done;
	u.location_id = 1002;
	u.speed_kmh = 22;
	CHECK_EQ_U64(trafficdb_put(b, &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);
	CHECK_EQ_U64(lane_tail(&e, 0), 4);
	c.n = 0;
	CHECK_EQ_U64(drain_all(&e, &c, NULL), 1);
	CHECK_EQ_U64(got[0].u.location_id, 1002);
	CHECK(got[0].u.speed_kmh == 22 && got[0].u.incident == NULL);
	CHECK_EQ_U64(got[0].ticket, 3);
	trafficdb_writer_close(b);
done:
	env_close(&e);
}

UNIT_TEST(test_ring_damaged_lanes_reset)
{
	RingEnv		e;
	trafficdb_writer *w[4] = {NULL};
	static Got	got[32];
	Collect		c = {got, 0, 32};
	TdbRingDrainStats st;
	trafficdb_update u = {.location_id = 1001, .speed_kmh = 30, .has = TRAFFICDB_HAS_SPEED};
	uint32_t	slots = 128;
	TdbLane    *l0 = NULL;

	if (!env_open(&e, 4, slots))
		return;
	for (int i = 0; i < 4; i++)
		if ((w[i] = open_writer(&e)) == NULL)
			goto done;
	l0 = tdb_ring_lane(e.ring.base, 0);
	for (int i = 0; i < 4; i++)
		for (int k = 0; k < 2; k++)
			CHECK_EQ_U64(trafficdb_put(w[i], &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);

	/* lane 0: its owner is gone and someone stored a tail far ahead */
	trafficdb_writer_close(w[0]);
	w[0] = NULL;
	atomic_store(&l0->tail, 2 + slots + 5);
	/* lane 1: the second slot's seq is wrong */
	tdb_ring_lane_slots(e.ring.base, 4, slots, 1)[1].seq = 77;
	/* lane 2: a field out of range in the second slot (speed 999) */
	tdb_ring_lane_slots(e.ring.base, 4, slots, 2)[1].speed_kmh = 999;
	/* lane 3: untouched */

	CHECK_EQ_U64(drain_all(&e, &c, &st), 1 + 1 + 2);
	CHECK_EQ_U64(st.lanes_reset, 3);
	CHECK_EQ_U64(e.ring.lanes_reset_total, 3);
	CHECK(strstr(st.reset_reason, "writers' lane") != NULL);
	CHECK_EQ_U64(st.dropped_slots, (slots + 5 + 2) + 1 + 1);
	{
		int			lane3 = 0;

		for (size_t i = 0; i < c.n; i++)
			lane3 += got[i].lane == 3;
		CHECK_EQ_U64(lane3, 2);
	}
	/* the dropped tickets are recorded as lost; heads are at the tails */
	{
		uint32_t	s;
		uint64_t	from;
		uint64_t	below;
		TdbLane    *l2 = tdb_ring_lane(e.ring.base, 2);

		CHECK(tdb_ring_read_lost(l2, &s, &from, &below));
		CHECK_EQ_U64(s, 2);
		CHECK_EQ_U64(from, 1);
		CHECK_EQ_U64(below, 2);
		CHECK_EQ_U64(atomic_load(&l2->head), 2);
		CHECK_EQ_U64(atomic_load(&l0->head), 2 + slots + 5);
	}
	/* a sync of lane 2's owner learns that one of its updates was dropped */
	tdb_ring_committed(&e.ring, 2);
	CHECK_EQ_U64(trafficdb_sync(w[2], 1000), (uint64_t) TRAFFICDB_LOST);
	CHECK(strstr(trafficdb_writer_errmsg(w[2]), "1 ring slots") != NULL);
	CHECK_EQ_U64(trafficdb_sync(w[3], 1000), TRAFFICDB_OK);
	CHECK_EQ_U64(trafficdb_sync(w[2], 1000), TRAFFICDB_OK);	/* reported once */

	/* every lane works again: lane 0 with a new owner */
	w[0] = open_writer(&e);
	if (w[0] == NULL)
		goto done;
	for (int i = 0; i < 4; i++)
		CHECK_EQ_U64(trafficdb_put(w[i], &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);
	c.n = 0;
	CHECK_EQ_U64(drain_all(&e, &c, &st), 4);
	CHECK_EQ_U64(st.lanes_reset, 0);

	/* a lane whose head is past its tail (a hostile head): reset, then usable */
	c.n = 0;
	atomic_store(&tdb_ring_lane(e.ring.base, 3)->tail, 1);	/* behind the head of 3 */
	CHECK_EQ_U64(drain_all(&e, &c, &st), 0);
	CHECK_EQ_U64(st.lanes_reset, 1);
done:
	for (int i = 0; i < 4; i++)
		trafficdb_writer_close(w[i]);
	env_close(&e);
}

UNIT_TEST(test_ring_truncated_file)
{
	RingEnv		e;
	TdbRingDrainStats st;
	Collect		c = {NULL, 0, 0};
	char		path[128];

	if (!env_open(&e, 2, 128))
		return;
	snprintf(path, sizeof(path), "/dev/shm%s.writers", e.prefix);
	CHECK(truncate(path, 4096) == 0);
	CHECK_EQ_U64(tdb_ring_drain(&e.ring, 0, ring_collect, &c, &st), 0);
	CHECK(st.truncated);
	env_close(&e);
}

UNIT_TEST(test_ring_open_errors)
{
	RingEnv		e;
	trafficdb_writer *w[3] = {NULL};
	trafficdb_writer *x = NULL;
	char		path[128];

	CHECK_EQ_U64(trafficdb_writer_open("/tdbring.nonexistent", &x), (uint64_t) TRAFFICDB_NOTRUNNING);
	CHECK(x == NULL);
	CHECK_EQ_U64(trafficdb_writer_open(NULL, &x), (uint64_t) TRAFFICDB_BADARG);
	if (!env_open(&e, 2, 128))
		return;
	w[0] = open_writer(&e);
	w[1] = open_writer(&e);
	CHECK_EQ_U64(trafficdb_writer_open(e.prefix, &w[2]), (uint64_t) TRAFFICDB_NOSLOT);
	CHECK(strstr(trafficdb_writer_errmsg(NULL), "trafficdb.max_writers") != NULL);
	trafficdb_writer_close(w[1]);
	w[1] = open_writer(&e);		/* a closed lane is free at once */
	trafficdb_writer_close(w[0]);
	trafficdb_writer_close(w[1]);

	/*
	 * No write access: the test runs as the owner, so take the owner's
	 * write bit away (root ignores modes: skip the check then).
	 */
	snprintf(path, sizeof(path), "/dev/shm%s.writers", e.prefix);
	if (geteuid() != 0)
	{
		CHECK(chmod(path, 0400) == 0);
		CHECK_EQ_U64(trafficdb_writer_open(e.prefix, &x), (uint64_t) TRAFFICDB_PERMISSION);
		CHECK(strstr(trafficdb_writer_errmsg(NULL), "trafficdb.writer_group") != NULL);
		CHECK(chmod(path, 0600) == 0);
	}
	/* no ring at all: the server takes no local writes */
	shm_unlink(path + strlen("/dev/shm"));
	CHECK_EQ_U64(trafficdb_writer_open(e.prefix, &x), (uint64_t) TRAFFICDB_NOTRUNNING);
	CHECK(strstr(trafficdb_writer_errmsg(NULL), "max_writers") != NULL);
	env_close(&e);
}

/*
 * A member of writer_group truncates <prefix>.writers under a writer, and a
 * member of shm_group <prefix>.readers: the writer's next put and the
 * reader's next begin are errors that say so, never a SIGBUS.  In a child,
 * so that a SIGBUS fails this test instead of ending the run.
 */
UNIT_TEST(test_ring_writer_and_reader_survive_truncation)
{
	RingEnv		e;
	pid_t		pid;
	int			status = 0;

	if (!env_open(&e, 2, 128))
		return;
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
	{
		trafficdb_writer *w = NULL;
		trafficdb_handle *h = NULL;
		trafficdb_update u = {.location_id = 1000, .speed_kmh = 20, .has = TRAFFICDB_HAS_SPEED};
		char		path[128];
		int			rc;

		if (trafficdb_writer_open(e.prefix, &w) != TRAFFICDB_OK || trafficdb_open(e.prefix, &h) != TRAFFICDB_OK)
			_exit(2);
		if (trafficdb_put(w, &u, TRAFFICDB_ASYNC) != TRAFFICDB_OK)
			_exit(3);
		snprintf(path, sizeof(path), "/dev/shm%s.writers", e.prefix);
		if (truncate(path, 0) != 0)
			_exit(2);
		rc = trafficdb_put(w, &u, TRAFFICDB_ASYNC);
		if (rc != TRAFFICDB_STALE || strstr(trafficdb_writer_errmsg(w), "truncated") == NULL)
		{
			printf("# put after truncation: %d %s\n", rc, trafficdb_writer_errmsg(w));
			_exit(4);
		}
		trafficdb_writer_close(w);
		snprintf(path, sizeof(path), "/dev/shm%s.readers", e.prefix);
		if (truncate(path, 0) != 0)
			_exit(2);
		rc = trafficdb_begin(h, NULL);
		if (rc != TRAFFICDB_STALE)
		{
			printf("# begin after truncation: %d %s\n", rc, trafficdb_errmsg(h));
			_exit(5);
		}
		trafficdb_close(h);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		printf("# child: %s %d\n", WIFSIGNALED(status) ? "killed by signal" : "exit",
			   WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	tdb_ring_close(&e.ring);	/* truncated: nothing to mark */
	{
		char		name[128];

		/* nor to remove through it: the name alone (left in /dev/shm otherwise) */
		snprintf(name, sizeof(name), "%s.writers", e.prefix);
		CHECK(shm_unlink(name) == 0);
	}
	tdb_writer_close(&e.w, true);
}

/* A member stores STOPPED in the ring's state word (every put refused): the drain reports it as damage. */
UNIT_TEST(test_ring_state_word_changed_is_damage)
{
	RingEnv		e;
	TdbRingDrainStats st;
	Collect		c = {NULL, 0, 0};
	char		path[128];
	int			fd;
	TdbWritersHeader *h;

	if (!env_open(&e, 2, 128))
		return;
	CHECK_EQ_U64(tdb_ring_drain(&e.ring, 0, ring_collect, &c, &st), 0);
	CHECK(!st.header_damaged);
	snprintf(path, sizeof(path), "%s.writers", e.prefix);
	fd = shm_open(path, O_RDWR, 0);
	CHECK(fd >= 0);
	h = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(h != MAP_FAILED);
	atomic_store(&h->state, TDB_RING_STOPPED);
	munmap(h, 4096);
	close(fd);
	CHECK_EQ_U64(tdb_ring_drain(&e.ring, 0, ring_collect, &c, &st), 0);
	CHECK(st.header_damaged);
	CHECK(strstr(e.ring.damage, "state word") != NULL);
	env_close(&e);
}

/*
 * The daemon made the ring anew (unlinked the old one), and a member of
 * writer_group rewrote the old one's state to RUNNING so that it never says
 * STOPPED: a writer still attached to it learns it in its next wait
 * instead of waiting for a commit that never comes.
 */
UNIT_TEST(test_ring_writer_told_of_unlinked_ring)
{
	RingEnv		e;
	trafficdb_writer *w;
	trafficdb_update u = {.location_id = 1000, .speed_kmh = 20, .has = TRAFFICDB_HAS_SPEED};
	char		path[128];
	int			fd;
	TdbWritersHeader *h;
	int			rc;

	if (!env_open(&e, 2, 128))
		return;
	w = open_writer(&e);
	if (w == NULL)
	{
		env_close(&e);
		return;
	}
	snprintf(path, sizeof(path), "%s.writers", e.prefix);
	fd = shm_open(path, O_RDWR, 0);
	CHECK(fd >= 0);
	h = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(h != MAP_FAILED);
	tdb_ring_remove(&e.ring);	/* STOPPED, unlinked */
	atomic_store(&h->state, TDB_RING_RUNNING);	/* the member's forgery */
	trafficdb_writer_set_timeout(w, 3000);
	rc = trafficdb_put(w, &u, TRAFFICDB_SYNC);
	CHECK_EQ_U64(rc, (uint64_t) TRAFFICDB_STALE);
	CHECK(strstr(trafficdb_writer_errmsg(w), "made anew") != NULL);
	if (rc != TRAFFICDB_STALE)
		printf("# %d %s\n", rc, trafficdb_writer_errmsg(w));
	trafficdb_writer_close(w);
	munmap(h, 4096);
	close(fd);
	tdb_writer_close(&e.w, true);
}
