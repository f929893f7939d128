/*
 * test_ring_producers.c
 *	  The writers' ring with live producers: SPSC and several producers
 *	  with threads, the put protocol under ThreadSanitizer, SYNC puts, waiters
 *	  at an orderly stop, adoption after a restart with lost updates,
 *	  writers killed with SIGKILL mid-put, and the Python binding.
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
