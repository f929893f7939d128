/*
 * test_ring.c
 *	  The writers' ring (src/ring/ring.c) and libtrafficdb's writers
 *	  (src/client/writer.c) against a real published map and a real
 *	  <prefix>.writers in /dev/shm, the daemon's side played by the test:
 *	  round trips of every field, validation, BUSY and WAIT, SPSC and
 *	  several producers with threads, unpublished slots, damaged lanes,
 *	  adoption after a restart with lost updates, SYNC puts, and writers
 *	  killed with SIGKILL mid-put.
 */
#include "unit.h"
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

typedef struct RingEnv
{
	char		prefix[64];
	TdbWriter	w;
	uint32_t	map_seg;
	void	   *map_addr;
	TdbRing		ring;
} RingEnv;

static int	env_counter;

static bool
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

static void
env_close(RingEnv *e)
{
	tdb_ring_remove(&e->ring);
	tdb_writer_close(&e->w, true);
}

static trafficdb_writer *
open_writer(RingEnv *e)
{
	trafficdb_writer *w = NULL;
	int			rc = trafficdb_writer_open(e->prefix, &w);

	if (rc != TRAFFICDB_OK)
		printf("# trafficdb_writer_open: %s: %s\n", trafficdb_strerror(rc), trafficdb_writer_errmsg(NULL));
	CHECK_EQ_U64(rc, TRAFFICDB_OK);
	return w;
}

/* What the test's "daemon" got: copies of the updates. */
typedef struct Got
{
	TdbRingUpdate u;
	char		text[TDB_VALID_MAX_INCIDENT];
	uint32_t	lane;
	uint64_t	ticket;
} Got;

typedef struct Collect
{
	Got		   *got;
	size_t		n;
	size_t		cap;
} Collect;

static int
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

static uint64_t
drain_all(RingEnv *e, Collect *c, TdbRingDrainStats *st)
{
	return tdb_ring_drain(&e->ring, 0, ring_collect, c, st);
}

static int64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void
sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

/* An incident text of len bytes that says which k it belongs to (ASCII). */
static void
incident_text(char *out, uint32_t len, uint64_t k)
{
	for (uint32_t i = 0; i < len; i++)
		out[i] = (char) ('a' + (k * 7 + i) % 26);
}

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

/*
 * Threads: producers put updates whose observed_at says (producer, k);
 * the consumer checks that every lane delivers each producer's k = 0, 1, 2,
 * ... once and in order.
 */
/* ThreadSanitizer runs about 10 times slower: fewer updates there */
#ifdef __SANITIZE_THREAD__
#define RING_SCALE 10
#else
#define RING_SCALE 1
#endif

#define SEQ_BASE	INT64_C(1600000000000000)
#define SEQ_STRIDE	INT64_C(100000000)

typedef struct Producer
{
	RingEnv    *e;
	pthread_barrier_t *all_open;	/* every producer holds its lane at once */
	int			p;
	uint64_t	n;
	int			rc;
	uint64_t	busy;
} Producer;

static void *
producer_main(void *arg)
{
	Producer   *pr = arg;
	trafficdb_writer *w = NULL;
	char		text[200];

	pr->rc = trafficdb_writer_open(pr->e->prefix, &w);
	pthread_barrier_wait(pr->all_open);
	if (pr->rc != TRAFFICDB_OK)
		return NULL;
	for (uint64_t k = 0; k < pr->n; k++)
	{
		trafficdb_update u = {.location_id = 1000 + (k % NLOC), .speed_kmh = (float) (k % 400),
		.observed_at_us = SEQ_BASE + pr->p * SEQ_STRIDE + (int64_t) k, .has = TRAFFICDB_HAS_SPEED};
		int			rc = TRAFFICDB_BUSY;

		if (k % 97 == 0)
		{
			u.incident_len = (uint32_t) (k % 200);
			incident_text(text, u.incident_len, k);
			u.incident = text;
			u.has |= TRAFFICDB_HAS_INCIDENT;
		}
		for (int tries = 0; tries < 1000000 && rc == TRAFFICDB_BUSY; tries++)
		{
			rc = trafficdb_put(w, &u, TRAFFICDB_ASYNC);
			if (rc == TRAFFICDB_BUSY)
			{
				pr->busy++;
				sched_yield();
			}
		}
		if (rc != TRAFFICDB_OK)
		{
			pr->rc = rc;
			break;
		}
	}
	trafficdb_writer_close(w);
	return NULL;
}

typedef struct Checker
{
	int64_t		next[8];		/* per producer: the k expected next */
	uint64_t	n;
	uint64_t	bad;
	int			lane_of[8];
} Checker;

static int
check_seq(void *arg, const TdbRingUpdate *u, uint32_t lane, uint64_t ticket)
{
	Checker    *c = arg;
	int64_t		v = u->observed_at_us - SEQ_BASE;
	int			p = (int) (v / SEQ_STRIDE);
	int64_t		k = v % SEQ_STRIDE;

	(void) ticket;
	c->n++;
	if (p < 0 || p >= 8 || k != c->next[p] || u->speed_kmh != (float) (k % 400) ||
		u->location_id != 1000 + (uint64_t) (k % NLOC) || (c->lane_of[p] >= 0 && c->lane_of[p] != (int) lane))
	{
		if (c->bad++ < 3)
			printf("# lane %u: producer %d k %lld, expected %lld\n", lane, p, (long long) k,
				   (long long) (p >= 0 && p < 8 ? c->next[p] : -1));
		return 0;
	}
	if (k % 97 == 0)
	{
		char		text[200];

		incident_text(text, (uint32_t) (k % 200), (uint64_t) k);
		if (u->incident == NULL || u->incident_len != (uint32_t) (k % 200) ||
			memcmp(u->incident, text, u->incident_len) != 0)
			c->bad++;
	}
	else if (u->incident != NULL)
		c->bad++;
	c->lane_of[p] = (int) lane;
	c->next[p] = k + 1;
	return 0;
}

static void
run_producers(int nproducers, uint64_t per, uint32_t nlanes, uint32_t lane_slots)
{
	RingEnv		e;
	Producer	pr[8];
	pthread_t	t[8];
	Checker		ck;
	uint64_t	want = (uint64_t) nproducers * per;
	pthread_barrier_t all_open;

	if (!env_open(&e, nlanes, lane_slots))
		return;
	pthread_barrier_init(&all_open, NULL, (unsigned) nproducers);
	memset(&ck, 0, sizeof(ck));
	for (int p = 0; p < 8; p++)
		ck.lane_of[p] = -1;
	for (int p = 0; p < nproducers; p++)
	{
		pr[p] = (Producer) {.e = &e, .all_open = &all_open, .p = p, .n = per};
		pthread_create(&t[p], NULL, producer_main, &pr[p]);
	}
	/* the consumer: this thread, bounded by time */
	for (int64_t deadline = now_us() + 120 * INT64_C(1000000); ck.n < want && now_us() < deadline;)
	{
		TdbRingDrainStats st;

		if (tdb_ring_drain(&e.ring, 0, check_seq, &ck, &st) == 0)
			sched_yield();
		CHECK_EQ_U64(st.lanes_reset, 0);
		if (st.lanes_reset)
		{
			printf("# %s\n", st.reset_reason);
			break;
		}
	}
	for (int p = 0; p < nproducers; p++)
	{
		pthread_join(t[p], NULL);
		CHECK_EQ_U64(pr[p].rc, TRAFFICDB_OK);
		CHECK_EQ_U64(ck.next[p], per);
	}
	CHECK_EQ_U64(tdb_ring_drain(&e.ring, 0, check_seq, &ck, NULL), 0);
	CHECK_EQ_U64(ck.n, want);
	CHECK_EQ_U64(ck.bad, 0);
	/* each producer had a lane of its own */
	for (int p = 0; p < nproducers; p++)
		for (int q = p + 1; q < nproducers; q++)
			CHECK(ck.lane_of[p] != ck.lane_of[q]);
	pthread_barrier_destroy(&all_open);
	env_close(&e);
}

UNIT_TEST(test_ring_spsc_threads)
{
	run_producers(1, 300000 / RING_SCALE, 1, 1024);
}

UNIT_TEST(test_ring_producers_on_lanes)
{
	run_producers(4, 60000 / RING_SCALE, 6, 256);
}

/*
 * The protocol itself (tdb_ring_try_put, what trafficdb_put runs) on the
 * daemon's own mapping, so that ThreadSanitizer, which cannot relate two
 * mappings of one file, sees the producer's and the consumer's accesses.
 */
typedef struct RawProducer
{
	RingEnv    *e;
	uint64_t	n;
	uint64_t	busy;
} RawProducer;

static void *
raw_producer_main(void *arg)
{
	RawProducer *rp = arg;
	TdbRing    *r = &rp->e->ring;
	TdbLane    *lane = tdb_ring_lane(r->base, 0);
	TdbPutSlot *slots = tdb_ring_lane_slots(r->base, r->nlanes, r->lane_slots, 0);
	uint64_t	tail = atomic_load_explicit(&lane->tail, memory_order_relaxed);
	char		text[200];

	for (uint64_t k = 0; k < rp->n; k++)
	{
		TdbRingUpdate u = {.location_id = 1000 + (k % NLOC), .map_id = 42, .present = TDB_RING_HAS_SPEED,
		.speed_kmh = (float) (k % 400), .free_flow_kmh = NAN, .congestion = TDB_RING_UNKNOWN,
		.confidence = TDB_RING_UNKNOWN, .observed_at_us = SEQ_BASE + (int64_t) k};
		uint64_t	head;

		if (k % 97 == 0)
		{
			u.incident_len = (uint32_t) (k % 200);
			incident_text(text, u.incident_len, k);
			u.incident = text;
			u.present |= TDB_RING_HAS_INCIDENT;
		}
		for (int tries = 0; tries < 10000000 && !tdb_ring_try_put(lane, slots, r->lane_slots, &tail, &u, &head);
			 tries++)
		{
			rp->busy++;
			sched_yield();
		}
	}
	return NULL;
}

UNIT_TEST(test_ring_protocol_threads)
{
	RingEnv		e;
	RawProducer rp;
	pthread_t	t;
	Checker		ck;
	TdbRingDrainStats st;

	if (!env_open(&e, 1, 128))
		return;
	memset(&ck, 0, sizeof(ck));
	for (int p = 0; p < 8; p++)
		ck.lane_of[p] = -1;
	rp = (RawProducer) {.e = &e, .n = 200000 / RING_SCALE};
	pthread_create(&t, NULL, raw_producer_main, &rp);
	for (int64_t deadline = now_us() + 60 * INT64_C(1000000); ck.n < rp.n && now_us() < deadline;)
	{
		if (tdb_ring_drain(&e.ring, 0, check_seq, &ck, &st) == 0)
			sched_yield();
		CHECK_EQ_U64(st.lanes_reset, 0);
		if (st.lanes_reset)
		{
			printf("# %s\n", st.reset_reason);
			break;
		}
	}
	pthread_join(t, NULL);
	CHECK_EQ_U64(ck.n, rp.n);
	CHECK_EQ_U64(ck.next[0], rp.n);
	CHECK_EQ_U64(ck.bad, 0);
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

typedef struct SyncPut
{
	trafficdb_writer *w;
	trafficdb_update u;
	int			flags;
	int			rc;
	int64_t		done_us;
	_Atomic int finished;
} SyncPut;

static void *
sync_put_main(void *arg)
{
	SyncPut    *s = arg;

	s->rc = trafficdb_put(s->w, &s->u, s->flags);
	s->done_us = now_us();
	atomic_store(&s->finished, 1);
	return NULL;
}

/* drain until n updates arrived (bounded by time) */
static void
drain_until(RingEnv *e, Collect *c, size_t n)
{
	for (int64_t deadline = now_us() + 5000000; c->n < n && now_us() < deadline;)
		if (tdb_ring_drain(&e->ring, 0, ring_collect, c, NULL) == 0)
			sleep_us(100);
}

UNIT_TEST(test_ring_sync_put_returns_after_commit)
{
	RingEnv		e;
	SyncPut		s = {0};
	pthread_t	t;
	static Got	got[4];
	Collect		c = {got, 0, 4};
	int64_t		committed_at;

	if (!env_open(&e, 2, 128))
		return;
	s.w = open_writer(&e);
	if (s.w == NULL)
		goto done;
	s.u = (trafficdb_update) {.location_id = 1003, .speed_kmh = 33, .has = TRAFFICDB_HAS_SPEED};
	s.flags = TRAFFICDB_SYNC;
	pthread_create(&t, NULL, sync_put_main, &s);
	drain_until(&e, &c, 1);
	CHECK_EQ_U64(c.n, 1);
	sleep_us(20000);
	CHECK(!atomic_load(&s.finished));	/* drained is not committed */
	committed_at = now_us();
	tdb_ring_committed(&e.ring, 9);
	pthread_join(t, NULL);
	CHECK_EQ_U64(s.rc, TRAFFICDB_OK);
	CHECK(s.done_us >= committed_at);
	CHECK_EQ_U64(atomic_load(&((TdbWritersHeader *) e.ring.base)->committed_generation), 9);
	CHECK_EQ_U64(atomic_load(&((TdbWritersHeader *) e.ring.base)->sync_waiters), 0);

	/* no commit: TRAFFICDB_TIMEOUT, the update stays queued */
	trafficdb_writer_set_timeout(s.w, 50);
	CHECK_EQ_U64(trafficdb_put(s.w, &s.u, TRAFFICDB_SYNC), (uint64_t) TRAFFICDB_TIMEOUT);
	CHECK(strstr(trafficdb_writer_errmsg(s.w), "not committed within 50 ms") != NULL);
	CHECK_EQ_U64(trafficdb_sync(s.w, 20), (uint64_t) TRAFFICDB_TIMEOUT);
	c.n = 0;
	CHECK_EQ_U64(drain_all(&e, &c, NULL), 1);
	tdb_ring_committed(&e.ring, 10);
	CHECK_EQ_U64(trafficdb_sync(s.w, 1000), TRAFFICDB_OK);

	/* a batch waits once */
	{
		trafficdb_update many[50];
		size_t		accepted = 0;

		for (int i = 0; i < 50; i++)
			many[i] = (trafficdb_update) {.location_id = 1000 + i, .confidence = 50, .has = TRAFFICDB_HAS_CONFIDENCE};
		trafficdb_writer_set_timeout(s.w, 50);
		CHECK_EQ_U64(trafficdb_put_many(s.w, many, 50, TRAFFICDB_SYNC, &accepted), (uint64_t) TRAFFICDB_TIMEOUT);
		CHECK_EQ_U64(accepted, 50);
	}
	/* a stopped ring wakes sync waiters with STALE */
	tdb_ring_set_state(&e.ring, TDB_RING_STOPPED, 0);
	CHECK_EQ_U64(trafficdb_sync(s.w, 1000), (uint64_t) TRAFFICDB_STALE);
	CHECK_EQ_U64(trafficdb_put(s.w, &s.u, TRAFFICDB_ASYNC), (uint64_t) TRAFFICDB_STALE);
	trafficdb_writer_close(s.w);
	{
		trafficdb_writer *w2 = NULL;

		CHECK_EQ_U64(trafficdb_writer_open(e.prefix, &w2), (uint64_t) TRAFFICDB_STALE);
		CHECK(w2 == NULL);
	}
done:
	env_close(&e);
}

/*
 * An orderly stop of the server with no daemon to mark the ring stopped
 * (it died, or had no map), as the postmaster makes it after its children
 * exited (tdb_writer_stop_instance): the control block is marked stopped
 * and the objects are unlinked, but nobody touches the ring's header or its
 * futex words.  Writers waiting in a TRAFFICDB_SYNC put (for
 * a commit that will never come) or in a TRAFFICDB_WAIT put (for space no
 * daemon will free) must still return TRAFFICDB_STALE soon, not at the end
 * of their timeout.  (Found by the kill -9 loop's clean restart: SYNC puts
 * returned STALE only after their whole timeout, 10 s by default.)
 */
UNIT_TEST(test_ring_waiters_see_orderly_stop)
{
	RingEnv		e;
	SyncPut		s = {0};
	SyncPut		f = {0};
	pthread_t	ts;
	pthread_t	tf;
	static Got	got[4];
	Collect		c = {got, 0, 4};
	int64_t		stopped_at;
	int			n = 0;

	if (!env_open(&e, 2, 128))
		return;
	s.w = open_writer(&e);
	f.w = open_writer(&e);
	if (s.w == NULL || f.w == NULL)
		goto done;
	trafficdb_writer_set_timeout(s.w, 5000);
	trafficdb_writer_set_timeout(f.w, 5000);

	/* one waits for a commit: drained, never committed */
	s.u = (trafficdb_update) {.location_id = 1004, .speed_kmh = 44, .has = TRAFFICDB_HAS_SPEED};
	s.flags = TRAFFICDB_SYNC;
	pthread_create(&ts, NULL, sync_put_main, &s);
	drain_until(&e, &c, 1);
	CHECK_EQ_U64(c.n, 1);

	/* the other waits for space in its full lane, which nobody drains now */
	f.u = (trafficdb_update) {.location_id = 1005, .speed_kmh = 55, .has = TRAFFICDB_HAS_SPEED};
	while (n < 1000 && trafficdb_put(f.w, &f.u, TRAFFICDB_ASYNC) == TRAFFICDB_OK)
		n++;
	CHECK_EQ_U64(n, 128);
	f.flags = TRAFFICDB_ASYNC | TRAFFICDB_WAIT;
	pthread_create(&tf, NULL, sync_put_main, &f);

	sleep_us(50000);
	CHECK(!atomic_load(&s.finished) && !atomic_load(&f.finished));
	stopped_at = now_us();
	tdb_writer_stop_instance(e.prefix);
	pthread_join(ts, NULL);
	pthread_join(tf, NULL);
	CHECK_EQ_U64(s.rc, (uint64_t) TRAFFICDB_STALE);
	CHECK_EQ_U64(f.rc, (uint64_t) TRAFFICDB_STALE);
	/* soon: well within a second, not after the 5 s timeout */
	if (s.done_us - stopped_at >= 1000000 || f.done_us - stopped_at >= 1000000)
		printf("# after the stop: the SYNC put returned in %lld ms, the WAIT put in %lld ms\n",
			   (long long) (s.done_us - stopped_at) / 1000, (long long) (f.done_us - stopped_at) / 1000);
	CHECK(s.done_us - stopped_at < 1000000);
	CHECK(f.done_us - stopped_at < 1000000);
	CHECK_EQ_U64(atomic_load(&((TdbWritersHeader *) e.ring.base)->sync_waiters), 0);
	CHECK_EQ_U64(atomic_load(&tdb_ring_lane(e.ring.base, 1)->space_waiters), 0);
done:
	if (s.w)
		trafficdb_writer_close(s.w);
	if (f.w)
		trafficdb_writer_close(f.w);
	env_close(&e);
}

/* The daemon "restarts": close its ring without committing, create it again (adopt). */
static bool
restart(RingEnv *e, uint64_t *epoch)
{
	char		err[TDB_SHM_ERRLEN];
	uint32_t	nlanes = e->ring.nlanes;
	uint32_t	lane_slots = e->ring.lane_slots;
	int			rc;

	tdb_ring_close(&e->ring);
	rc = tdb_ring_create(&e->ring, e->prefix, nlanes, lane_slots, (gid_t) -1, e->w.ctl->instance_id, err);
	CHECK_EQ_U64(rc, TDB_SHM_OK);
	if (rc != TDB_SHM_OK)
		return false;
	CHECK(e->ring.adopted);
	*epoch = atomic_load(&((TdbWritersHeader *) e->ring.base)->restart_epoch);
	tdb_ring_set_state(&e->ring, TDB_RING_RUNNING, 0);
	return true;
}

UNIT_TEST(test_ring_adoption_after_restart)
{
	RingEnv		e;
	trafficdb_writer *w;
	static Got	got[16];
	Collect		c = {got, 0, 16};
	uint64_t	epoch = 0;

	if (!env_open(&e, 2, 128))
		return;
	w = open_writer(&e);
	if (w == NULL)
		goto done;
	for (int i = 0; i < 7; i++)
	{
		trafficdb_update u = {.location_id = 1000 + i, .speed_kmh = (float) i, .has = TRAFFICDB_HAS_SPEED};

		CHECK_EQ_U64(trafficdb_put(w, &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);
		if (i == 2)
		{
			CHECK_EQ_U64(drain_all(&e, &c, NULL), 3);	/* 0 .. 2: drained and committed */
			tdb_ring_committed(&e.ring, 5);
		}
		if (i == 4)
			CHECK_EQ_U64(drain_all(&e, &c, NULL), 2);	/* 3, 4: drained, never committed */
	}
	CHECK_EQ_U64(trafficdb_sync(w, 10), (uint64_t) TRAFFICDB_TIMEOUT);

	if (!restart(&e, &epoch))
		goto done;
	CHECK_EQ_U64(epoch, 2);
	{
		uint32_t	s;
		uint64_t	from;
		uint64_t	below;

		CHECK(tdb_ring_read_lost(tdb_ring_lane(e.ring.base, 0), &s, &from, &below));
		CHECK_EQ_U64(from, 3);
		CHECK_EQ_U64(below, 5);
	}
	/* undrained slots survive: 5 and 6 */
	c.n = 0;
	CHECK_EQ_U64(drain_all(&e, &c, NULL), 2);
	CHECK_EQ_U64(got[0].u.location_id, 1005);
	CHECK_EQ_U64(got[1].u.location_id, 1006);
	tdb_ring_committed(&e.ring, 6);
	CHECK_EQ_U64(trafficdb_sync(w, 1000), (uint64_t) TRAFFICDB_LOST);
	CHECK(strstr(trafficdb_writer_errmsg(w), "2 ring slots") != NULL);
	CHECK_EQ_U64(trafficdb_sync(w, 1000), TRAFFICDB_OK);

	/* a SYNC put whose update is drained and then lost by a restart puts it again */
	{
		SyncPut		s = {0};
		pthread_t	t;

		s.w = w;
		s.u = (trafficdb_update) {.location_id = 1042, .speed_kmh = 42, .has = TRAFFICDB_HAS_SPEED};
		s.flags = TRAFFICDB_SYNC;
		c.n = 0;
		pthread_create(&t, NULL, sync_put_main, &s);
		drain_until(&e, &c, 1);
		CHECK_EQ_U64(c.n, 1);
		if (!restart(&e, &epoch))
		{
			pthread_join(t, NULL);
			goto done;
		}
		CHECK_EQ_U64(epoch, 3);
		drain_until(&e, &c, 2);	/* the second copy */
		CHECK_EQ_U64(c.n, 2);
		CHECK_EQ_U64(got[1].u.location_id, 1042);
		CHECK(!atomic_load(&s.finished));
		tdb_ring_committed(&e.ring, 7);
		pthread_join(t, NULL);
		CHECK_EQ_U64(s.rc, TRAFFICDB_OK);
	}

	/* geometry changed: not adopted; the old object's writers learn they must reopen */
	{
		char		err[TDB_SHM_ERRLEN];
		trafficdb_update u = {.location_id = 1001, .has = 0};

		tdb_ring_close(&e.ring);
		CHECK_EQ_U64(tdb_ring_create(&e.ring, e.prefix, 3, 128, (gid_t) -1, e.w.ctl->instance_id, err), TDB_SHM_OK);
		CHECK(!e.ring.adopted);
		CHECK_EQ_U64(trafficdb_put(w, &u, TRAFFICDB_ASYNC), (uint64_t) TRAFFICDB_STALE);
	}
	trafficdb_writer_close(w);
done:
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
 * kill -9: a child puts in a loop (incidents of varying length included)
 * while the parent drains; the child dies at a random point.  Everything
 * drained is complete and valid, each child's updates arrive as k = 0, 1,
 * ... with no gap, and the lane is claimable again.
 */
static int
check_child(void *arg, const TdbRingUpdate *u, uint32_t lane, uint64_t ticket)
{
	Checker    *c = arg;
	int64_t		k = u->observed_at_us - SEQ_BASE;

	(void) lane;
	(void) ticket;
	c->n++;
	if (k != c->next[0] || u->speed_kmh != (float) (k % 400) || u->location_id != 1000 + (uint64_t) (k % NLOC))
		c->bad++;
	else if (k % 3 == 0)
	{
		char		text[300];

		incident_text(text, (uint32_t) (k % 300), (uint64_t) k);
		if (u->incident == NULL || u->incident_len != (uint32_t) (k % 300) ||
			memcmp(u->incident, text, u->incident_len) != 0)
			c->bad++;
	}
	else if (u->incident != NULL)
		c->bad++;
	c->next[0] = k + 1;
	return 0;
}

static void
child_putter(const char *prefix)
{
	trafficdb_writer *w = NULL;
	char		text[300];

	if (trafficdb_writer_open(prefix, &w) != TRAFFICDB_OK)
		_exit(2);
	for (uint64_t k = 0; k < 100000000; k++)
	{
		trafficdb_update u = {.location_id = 1000 + (k % NLOC), .speed_kmh = (float) (k % 400),
		.observed_at_us = SEQ_BASE + (int64_t) k, .has = TRAFFICDB_HAS_SPEED};
		int			rc;

		if (k % 3 == 0)
		{
			u.incident_len = (uint32_t) (k % 300);
			incident_text(text, u.incident_len, k);
			u.incident = text;
			u.has |= TRAFFICDB_HAS_INCIDENT;
		}
		while ((rc = trafficdb_put(w, &u, TRAFFICDB_ASYNC)) == TRAFFICDB_BUSY)
			sched_yield();
		if (rc != TRAFFICDB_OK)
			_exit(3);
	}
	_exit(0);
}

UNIT_TEST(test_ring_kill9_writer)
{
	RingEnv		e;
	uint64_t	seed = 0x9E3779B97F4A7C15ull;
	uint64_t	total = 0;
	int			rounds = 30;

	if (!env_open(&e, 2, 256))
		return;
	for (int round = 0; round < rounds; round++)
	{
		Checker		ck;
		pid_t		pid;
		int			status;
		int64_t		until;
		TdbRingDrainStats st;

		memset(&ck, 0, sizeof(ck));
		fflush(stdout);
		pid = fork();
		if (pid == 0)
			child_putter(e.prefix);
		CHECK(pid > 0);
		if (pid <= 0)
			break;
		/* drain while it puts, for 0 .. 20 ms, then kill it wherever it is */
		until = now_us() + (int64_t) (unit_rand(&seed) % 20000);
		while (now_us() < until)
		{
			tdb_ring_drain(&e.ring, 0, check_child, &ck, &st);
			CHECK_EQ_U64(st.lanes_reset, 0);
		}
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		tdb_ring_drain(&e.ring, 0, check_child, &ck, &st);
		CHECK_EQ_U64(st.lanes_reset, 0);
		CHECK_EQ_U64(tdb_ring_drain(&e.ring, 0, check_child, &ck, &st), 0);
		CHECK_EQ_U64(ck.bad, 0);
		CHECK_EQ_U64(ck.n, (uint64_t) ck.next[0]);	/* 0 .. n-1, no gap */
		total += ck.n;
	}
	printf("# %d children killed, %llu of their updates drained\n", rounds, (unsigned long long) total);
	{
		/* the lane is claimable and works */
		trafficdb_writer *w = open_writer(&e);
		trafficdb_update u = {.location_id = 1234, .speed_kmh = 12, .has = TRAFFICDB_HAS_SPEED};
		static Got	got[2];
		Collect		c = {got, 0, 2};

		if (w != NULL)
		{
			CHECK_EQ_U64(trafficdb_put(w, &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);
			CHECK_EQ_U64(drain_all(&e, &c, NULL), 1);
			CHECK_EQ_U64(got[0].u.location_id, 1234);
			CHECK_EQ_U64(got[0].lane, 0);
			trafficdb_writer_close(w);
		}
	}
	env_close(&e);
}

/*
 * The Python binding (python/trafficdb, ctypes) from another process:
 * python/tests/ring_check.py puts while this thread drains and commits
 * every 20 ms.  Needs python3 and lib/libtrafficdb.so (make
 * lib/libtrafficdb.so); skipped with a note without them.
 */
typedef struct Committer
{
	RingEnv    *e;
	Collect		c;
	_Atomic int stop;
} Committer;

static void *
committer_main(void *arg)
{
	Committer  *cm = arg;

	for (int i = 0; i < 3000 && !atomic_load(&cm->stop); i++)
	{
		tdb_ring_drain(&cm->e->ring, 0, ring_collect, &cm->c, NULL);
		tdb_ring_committed(&cm->e->ring, 100 + (uint64_t) i);
		sleep_us(20000);
	}
	return NULL;
}

UNIT_TEST(test_ring_python)
{
	RingEnv		e;
	static Got	got[1024];
	Committer	cm;
	pthread_t	t;
	pid_t		pid;
	int			status = -1;

	if (access("lib/libtrafficdb.so", R_OK) != 0 || access("/usr/bin/python3", X_OK) != 0)
	{
		printf("# skipped: needs lib/libtrafficdb.so (make lib/libtrafficdb.so) and /usr/bin/python3\n");
		return;
	}
	if (!env_open(&e, 2, 128))
		return;
	memset(&cm, 0, sizeof(cm));
	cm.e = &e;
	cm.c = (Collect) {got, 0, 1024};
	pthread_create(&t, NULL, committer_main, &cm);
	fflush(stdout);
	pid = fork();
	if (pid == 0)
	{
		setenv("TRAFFICDB_LIB", "lib/libtrafficdb.so", 1);
		setenv("PYTHONPATH", "python", 1);
		execl("/usr/bin/python3", "python3", "python/tests/ring_check.py", e.prefix, (char *) NULL);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	atomic_store(&cm.stop, 1);
	pthread_join(t, NULL);
	tdb_ring_drain(&e.ring, 0, ring_collect, &cm.c, NULL);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(cm.c.n >= 6);
	if (cm.c.n >= 6)
	{
		const TdbRingUpdate *u = &got[0].u;

		CHECK_EQ_U64(u->location_id, 1001);
		CHECK(u->speed_kmh == 12.5f && u->free_flow_kmh == 50);
		CHECK_EQ_U64(u->congestion, 2);
		CHECK_EQ_U64(u->confidence, 90);
		CHECK_EQ_U64(u->observed_at_us, 1700000000000000);
		CHECK(u->incident_len == strlen("Åland: road works") &&
			  memcmp(u->incident, "Åland: road works", u->incident_len) == 0);
		CHECK_EQ_U64(got[1].u.location_id, 1002);
		CHECK_EQ_U64(got[2].u.location_id, 1003);
		CHECK(got[2].u.speed_kmh == 30.0f);
		CHECK_EQ_U64(got[3].u.location_id, 1004);	/* the first of a batch whose second was bad */
		CHECK_EQ_U64(got[4].u.location_id, 1006);
		CHECK_EQ_U64(got[cm.c.n - 1].u.location_id, 1008);
		CHECK_EQ_U64(got[cm.c.n - 1].u.present, TDB_RING_HAS_CONFIDENCE);
	}
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
