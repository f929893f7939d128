/*
 * test_ring_bell.c
 *	  The sleeping daemon's bell (src/ring/ring.h, "The bell"): no put is
 *	  left undrained while the daemon sleeps (a producer thread against a
 *	  "daemon" that sleeps whenever a drain finds nothing, on one mapping so
 *	  that ThreadSanitizer sees both sides), one ring per sleep, and
 *	  libtrafficdb's puts ring it (put, put_many once per batch, a SYNC
 *	  waiter).
 */
#include "unit.h"
#include "ring_fixture.h"
#include "ring/ring.h"
#include "trafficdb.h"

#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#ifdef __SANITIZE_THREAD__
#define BELL_PUTS 300
#else
#define BELL_PUTS 3000
#endif

/* Wait for the bell: true if it rang within ms. */
static bool
bell_rang(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

typedef struct BellProducer
{
	RingEnv    *e;
	uint64_t	n;
	uint64_t	seed;
	uint64_t	rang;			/* rings this producer made */
	uint64_t	lost;			/* puts not drained within 2 s: a lost wake-up */
	int			fd;
} BellProducer;

/*
 * Puts n updates on lane 0, each followed by the bell's check, then waits
 * until the "daemon" drained it (each put is the last of its burst: one the
 * daemon slept through would never be drained), then pauses 0 to 300 us.
 */
static void *
bell_producer_main(void *arg)
{
	BellProducer *bp = arg;
	TdbRing    *r = &bp->e->ring;
	TdbWritersHeader *h = r->base;
	TdbLane    *lane = tdb_ring_lane(r->base, 0);
	TdbPutSlot *slots = tdb_ring_lane_slots(r->base, r->nlanes, r->lane_slots, 0);
	uint64_t	tail = atomic_load_explicit(&lane->tail, memory_order_relaxed);

	for (uint64_t k = 0; k < bp->n && bp->lost == 0; k++)
	{
		TdbRingUpdate u = {.location_id = 1000 + k % 16, .map_id = 42, .present = TDB_RING_HAS_SPEED,
		.speed_kmh = (float) (k % 400), .free_flow_kmh = NAN, .congestion = TDB_RING_UNKNOWN,
		.confidence = TDB_RING_UNKNOWN, .observed_at_us = now_us() - 1000};
		uint64_t	head;
		int64_t		deadline = now_us() + 2000000;

		if (!tdb_ring_try_put(lane, slots, r->lane_slots, &tail, &u, &head))
		{
			bp->lost++;			/* cannot be: the lane is empty after each put */
			break;
		}
		if (tdb_ring_daemon_asleep(h) && tdb_ring_ring_bell(h, &bp->fd))
			bp->rang++;
		while (atomic_load_explicit(&lane->head, memory_order_acquire) != tail)
		{
			if (now_us() > deadline)
			{
				bp->lost++;
				break;
			}
			sleep_us(20);
		}
		sleep_us((long) (unit_rand(&bp->seed) % 300));
	}
	return NULL;
}

UNIT_TEST(test_ring_bell_no_lost_wakeup)
{
	RingEnv		e;
	Collect		c = {0};
	BellProducer bp;
	pthread_t	t;
	uint64_t	nonce = 0;
	uint64_t	sleeps = 0;
	uint64_t	seed = 11;
	char		err[TDB_SHM_ERRLEN];
	int			bell;

	if (!env_open(&e, 1, 128))
		return;
	bell = tdb_ring_bell_open(&nonce, err);
	if (bell < 0)
		printf("# tdb_ring_bell_open: %s\n", err);
	CHECK(bell >= 0);
	CHECK(nonce != 0);
	if (bell < 0)
	{
		env_close(&e);
		return;
	}
	bp = (BellProducer) {.e = &e, .n = BELL_PUTS, .seed = 7, .fd = -1};
	pthread_create(&t, NULL, bell_producer_main, &bp);
	/* bounded: every round drains, or sleeps at most 5 s */
	for (int round = 0; round < 4 * BELL_PUTS && c.n < bp.n && bp.lost == 0; round++)
	{
		if (drain_all(&e, &c, NULL) > 0)
			continue;
		/* the daemon's work between its drain and its sleep: a put may land here */
		if (round % 2 == 0)
			sleep_us((long) (unit_rand(&seed) % 100));
		if (!tdb_ring_sleep(&e.ring, nonce, false))
			continue;			/* a put came between the drain and the announcement */
		sleeps++;
		(void) bell_rang(bell, 5000);
		tdb_ring_awake(&e.ring);
		(void) tdb_ring_bell_drain(bell);
	}
	pthread_join(t, NULL);
	(void) drain_all(&e, &c, NULL);
	printf("# %llu puts, %llu sleeps, %llu rings\n", (unsigned long long) c.n, (unsigned long long) sleeps,
		   (unsigned long long) bp.rang);
	CHECK_EQ_U64(c.n, bp.n);
	CHECK_EQ_U64(bp.lost, 0);
	/* the producer's pauses let the daemon sleep: the bell was exercised */
	CHECK(sleeps > 10);
	CHECK(bp.rang > 10);
	/* one ring per sleep at most */
	CHECK(bp.rang <= sleeps);
	CHECK_EQ_U64(atomic_load(&((TdbWritersHeader *) e.ring.base)->bells), bp.rang);
	if (bp.fd >= 0)
		close(bp.fd);
	close(bell);
	env_close(&e);
}

UNIT_TEST(test_ring_bell_rung_once_and_by_writers)
{
	RingEnv		e;
	Collect		c = {0};
	uint64_t	nonce = 0;
	char		err[TDB_SHM_ERRLEN];
	int			bell;
	int			fd = -1;
	TdbWritersHeader *h;
	trafficdb_writer *w;
	trafficdb_update u = {.location_id = 1001, .speed_kmh = 30, .has = TRAFFICDB_HAS_SPEED};
	trafficdb_update batch[100];

	if (!env_open(&e, 2, 128))
		return;
	h = e.ring.base;
	bell = tdb_ring_bell_open(&nonce, err);
	CHECK(bell >= 0);
	if (bell < 0)
	{
		env_close(&e);
		return;
	}

	/* awake: nobody rings; asleep: the first ring wins, the second finds it rung */
	CHECK(!tdb_ring_daemon_asleep(h));
	CHECK(!tdb_ring_ring_bell(h, &fd));
	CHECK(tdb_ring_sleep(&e.ring, nonce, false));
	CHECK(tdb_ring_daemon_asleep(h));
	CHECK(tdb_ring_ring_bell(h, &fd));
	CHECK(!tdb_ring_ring_bell(h, &fd));
	CHECK(bell_rang(bell, 1000));
	CHECK_EQ_U64(tdb_ring_bell_drain(bell), 1);
	CHECK(!bell_rang(bell, 0));

	/*
	 * A sync writer keeps the daemon awake only when a commit is pending and
	 * what its lane says it waits for is drained and not durable; the
	 * header's count alone (a writer that died waiting) does not.
	 */
	atomic_store(&h->sync_waiters, 1);
	CHECK(tdb_ring_sleep(&e.ring, nonce, true));
	tdb_ring_awake(&e.ring);
	atomic_store(&tdb_ring_lane(e.ring.base, 0)->tail, 5);
	e.ring.head[0] = 5;
	atomic_store(&tdb_ring_lane(e.ring.base, 0)->sync_until, 5);
	CHECK(tdb_ring_sync_wanted(&e.ring));
	CHECK(!tdb_ring_sleep(&e.ring, nonce, true));
	CHECK(!tdb_ring_daemon_asleep(h));
	CHECK(tdb_ring_sleep(&e.ring, nonce, false));
	tdb_ring_awake(&e.ring);
	e.ring.durable[0] = 5;
	CHECK(!tdb_ring_sync_wanted(&e.ring));
	CHECK(tdb_ring_sleep(&e.ring, nonce, true));
	tdb_ring_awake(&e.ring);
	atomic_store(&tdb_ring_lane(e.ring.base, 0)->sync_until, 0);
	atomic_store(&tdb_ring_lane(e.ring.base, 0)->tail, 0);
	e.ring.head[0] = e.ring.durable[0] = 0;
	atomic_store(&h->sync_waiters, 0);

	/* libtrafficdb: a put into a sleeping ring rings; the daemon's re-check sees a put not drained */
	w = open_writer(&e);
	if (w != NULL)
	{
		CHECK(tdb_ring_sleep(&e.ring, nonce, false));
		CHECK_EQ_U64(trafficdb_put(w, &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);
		CHECK(bell_rang(bell, 1000));
		CHECK(!tdb_ring_daemon_asleep(h));
		(void) tdb_ring_bell_drain(bell);
		CHECK(!tdb_ring_sleep(&e.ring, nonce, false));
		CHECK_EQ_U64(drain_all(&e, &c, NULL), 1);

		/* put_many rings once for its batch */
		for (int i = 0; i < 100; i++)
			batch[i] = (trafficdb_update) {.location_id = 1000 + i % 16, .speed_kmh = (float) i,
		.has = TRAFFICDB_HAS_SPEED};
		CHECK(tdb_ring_sleep(&e.ring, nonce, false));
		{
			uint64_t	before = atomic_load(&h->bells);
			size_t		acc = 0;

			CHECK_EQ_U64(trafficdb_put_many(w, batch, 100, TRAFFICDB_ASYNC, &acc), TRAFFICDB_OK);
			CHECK_EQ_U64(acc, 100);
			CHECK_EQ_U64(atomic_load(&h->bells), before + 1);
		}
		CHECK(bell_rang(bell, 1000));
		(void) tdb_ring_bell_drain(bell);
		CHECK_EQ_U64(drain_all(&e, &c, NULL), 100);

		/* awake: a put rings nothing */
		{
			uint64_t	before = atomic_load(&h->bells);

			CHECK_EQ_U64(trafficdb_put(w, &u, TRAFFICDB_ASYNC), TRAFFICDB_OK);
			CHECK_EQ_U64(atomic_load(&h->bells), before);
			CHECK(!bell_rang(bell, 0));
			CHECK_EQ_U64(drain_all(&e, &c, NULL), 1);
		}
		trafficdb_writer_close(w);
	}

	/* a bell whose name is gone (the daemon died): ringing fails quietly */
	close(bell);
	CHECK(tdb_ring_sleep(&e.ring, nonce, false));
	CHECK(!tdb_ring_ring_bell(h, &fd));
	CHECK(!tdb_ring_daemon_asleep(h));
	if (fd >= 0)
		close(fd);
	env_close(&e);
}
