/*
 * test_subring_threads.c
 *	  The subscribers' rings under threads (ThreadSanitizer: the consumers
 *	  borrow the producer's mapping): single producer and consumer, plain
 *	  and deferred, the overrun rule under load; then wake-up latency,
 *	  STOPPED, a replaced segment and EINTR for a waiting receiver.
 */
#include "unit.h"
#include "subring_fixture.h"
#include "clock.h"

#include <errno.h>
#include <fcntl.h>
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

/* ---- threads (ThreadSanitizer): consumers borrow the producer's mapping ---------- */

/*
 * A consumer thread's subscription, alone, on the producer's mapping (so
 * ThreadSanitizer sees both sides); ready says its slot + 1, or -1.
 */
static bool
subscribe_alone(SubEnv *e, TdbSubConsumer *c, _Atomic int *ready)
{
	char		err[TDB_SHM_ERRLEN];

	if (tdb_subring_consumer_open(c, e->prefix, INSTANCE, e->r.base, err) != TDB_SHM_OK ||
		tdb_subring_subscribe(c, NULL, 0, 0, 0) != TDB_SHM_OK)
	{
		atomic_store(ready, -1);
		return false;
	}
	atomic_store(ready, c->slot_idx + 1);
	return true;
}

static void *
spsc_consumer(void *arg)
{
	Member	   *m = arg;
	TdbSubConsumer c;
	TdbSubEvent buf[64];
	uint64_t	first_seq = 0;
	int64_t		deadline = tdb_mono_us() + 60 * INT64_C(1000000);

	if (!subscribe_alone(m->e, &c, &m->ready))
	{
		m->bad++;
		return NULL;
	}
	while (m->got < m->want && tdb_mono_us() < deadline)
	{
		int			n = tdb_subring_receive(&c, buf, 1 + (uint32_t) (unit_rand(&m->seed) % 64), 200);

		if (n < 0)
		{
			m->bad++;
			break;
		}
		for (int k = 0; k < n; k++)
		{
			if (first_seq == 0)
				first_seq = buf[k].seq;
			if (buf[k].kind != TDB_SUBEV_CHANGE || buf[k].location_id != m->got + 1 ||
				buf[k].seq != first_seq + m->got)
				m->bad++;
			m->got++;
		}
	}
	tdb_subring_consumer_close(&c);
	return NULL;
}

/* Wait (bounded) until every member has subscribed, then sweep until all are attached. */
static bool
members_ready(SubEnv *e, Member *m, int nm)
{
	int			attached = 0;

	for (int i = 0; i < 5000 && attached < nm; i++)
	{
		TdbSubChange ch[8];
		uint32_t	n;
		bool		all = true;

		for (int k = 0; k < nm; k++)
			if (atomic_load(&m[k].ready) <= 0)
				all = false;
		if (!all)
		{
			sleep_us(1000);
			continue;
		}
		n = sweep(e, ch, 8);
		for (uint32_t k = 0; k < n; k++)
			attached += ch[k].kind == TDB_SUBCHANGE_ATTACHED;
		if (attached < nm)
			sleep_us(1000);
	}
	CHECK_EQ_U64(attached, nm);
	return attached == nm;
}

/*
 * Two consumer threads, 20,000 events each.  deferred: the daemon's large
 * batches (push_deferred, interleaved between the two as the daemon's
 * events for two subscribers are): head stored every quarter ring and at
 * the wake, the consumers woken in mid-batch.
 */
static void
spsc_run(bool deferred, uint64_t seed)
{
	SubEnv		e;
	Member		m[2];
	pthread_t	t[2];
	uint64_t	want = 20000;
	uint64_t	pushed[2] = {0, 0};
	int64_t		deadline;

	if (!senv_open(&e, 2, 256))
		return;
	for (int i = 0; i < 2; i++)
	{
		memset(&m[i], 0, sizeof(m[i]));
		m[i].e = &e;
		m[i].want = want;
		m[i].seed = seed + (uint64_t) i;
		pthread_create(&t[i], NULL, spsc_consumer, &m[i]);
	}
	if (members_ready(&e, m, 2))
	{
		deadline = tdb_mono_us() + 60 * INT64_C(1000000);
		while ((pushed[0] < want || pushed[1] < want) && tdb_mono_us() < deadline)
		{
			bool		progress = false;

			for (uint32_t k = 0; k < (deferred ? 1000u : 100u); k++)
				for (int i = 0; i < 2; i++)
				{
					uint32_t	slot = (uint32_t) atomic_load(&m[i].ready) - 1;

					if (pushed[i] < want && tdb_subring_space(&e.r, slot) > 0)
					{
						TdbSubEvent ev = mkev(pushed[i] + 1, pushed[i] / 100 + 1);

						CHECK_EQ_U64(deferred ? tdb_subring_push_deferred(&e.r, slot, &ev) :
									 tdb_subring_push(&e.r, slot, &ev), TDB_SUBRING_PUSHED);
						pushed[i]++;
						progress = true;
					}
				}
			tdb_subring_wake_pending(&e.r);
			if (!progress)
				sched_yield();
		}
	}
	for (int i = 0; i < 2; i++)
	{
		pthread_join(t[i], NULL);
		CHECK_EQ_U64(m[i].got, want);
		CHECK_EQ_U64(m[i].bad, 0);
	}
	printf("# 2 x %llu events, %llu wakes\n", (unsigned long long) want, (unsigned long long) e.r.wakes_total);
	senv_close(&e);
}

UNIT_TEST(test_subring_threads_spsc)
{
	spsc_run(false, 11);
}

UNIT_TEST(test_subring_threads_spsc_deferred)
{
	spsc_run(true, 21);
}

static void *
overrun_consumer(void *arg)
{
	Member	   *m = arg;
	TdbSubConsumer c;
	TdbSubEvent buf[16];
	uint64_t	next_id = 1;	/* the next id we may see */
	uint64_t	next_seq = 0;
	int64_t		deadline = tdb_mono_us() + 60 * INT64_C(1000000);

	if (!subscribe_alone(m->e, &c, &m->ready))
	{
		m->bad++;
		return NULL;
	}
	while (next_id <= m->want && tdb_mono_us() < deadline)
	{
		int			n = tdb_subring_receive(&c, buf, 16, 200);

		if (n < 0)
		{
			m->bad++;
			break;
		}
		for (int k = 0; k < n; k++)
		{
			if (next_seq != 0 && buf[k].seq != next_seq)
				m->bad++;
			next_seq = buf[k].seq + 1;
			if (buf[k].kind == TDB_SUBEV_OVERRUN)
			{
				/* the dropped ones are exactly next_id .. next_id + count - 1 (generation = id) */
				if (buf[k].generation != next_id || buf[k].location_id == 0)
					m->bad++;
				m->overruns++;
				m->dropped += buf[k].location_id;
				next_id += buf[k].location_id;
			}
			else
			{
				if (buf[k].kind != TDB_SUBEV_CHANGE || buf[k].location_id != next_id)
					m->bad++;
				m->got++;
				next_id = buf[k].location_id + 1;
			}
		}
		/* slow down now and then, so that the producer overruns us */
		if (unit_rand(&m->seed) % 16 == 0)
			sleep_us(300);
	}
	tdb_subring_consumer_close(&c);
	return NULL;
}

UNIT_TEST(test_subring_threads_overrun)
{
	SubEnv		e;
	Member		m;
	pthread_t	t;
	uint64_t	want = 20000;
	uint64_t	dropped = 0;

	if (!senv_open(&e, 1, 64))
		return;
	memset(&m, 0, sizeof(m));
	m.e = &e;
	m.want = want;
	m.seed = 5;
	pthread_create(&t, NULL, overrun_consumer, &m);
	if (members_ready(&e, &m, 1))
	{
		for (uint64_t id = 1; id <= want; id++)
		{
			TdbSubEvent ev = mkev(id, id);
			int			rc = tdb_subring_push(&e.r, 0, &ev);

			CHECK(rc == TDB_SUBRING_PUSHED || rc == TDB_SUBRING_DROPPED);
			dropped += rc == TDB_SUBRING_DROPPED;
			if (id % 32 == 0)
			{
				tdb_subring_wake_pending(&e.r);
				if (id % 128 == 0)
					sleep_us(100);
			}
		}
		/* the last episode's OVERRUN goes in as soon as it fits, with no next event (bounded) */
		for (int i = 0; i < 20000 && e.r.local[0].overrun; i++)
		{
			tdb_subring_wake_pending(&e.r);
			sleep_us(100);
		}
		tdb_subring_wake_pending(&e.r);
	}
	pthread_join(t, NULL);
	CHECK_EQ_U64(m.bad, 0);
	CHECK_EQ_U64(m.got + m.dropped, want);
	CHECK_EQ_U64(m.dropped, dropped);
	printf("# %llu events: %llu delivered, %llu dropped in %llu overruns\n", (unsigned long long) want,
		   (unsigned long long) m.got, (unsigned long long) m.dropped, (unsigned long long) m.overruns);
	senv_close(&e);
}

/* ---- wake-up latency, STOPPED, EINTR --------------------------------------------- */

typedef struct Waiter
{
	SubEnv	   *e;
	int			rounds;
	_Atomic int ready;
	int64_t    *lat_ns;
	_Atomic int got;
	int			last_rc;
	int64_t		waited_us;
	uint64_t	bad;
} Waiter;

static void *
latency_consumer(void *arg)
{
	Waiter	   *w = arg;
	TdbSubConsumer c;
	TdbSubEvent ev;

	if (!subscribe_alone(w->e, &c, &w->ready))
		return NULL;
	while (w->got < w->rounds)
	{
		int			n = tdb_subring_receive(&c, &ev, 1, 2000);

		if (n <= 0)
		{
			w->bad++;
			break;
		}
		/* the producer put its clock into location_id */
		w->lat_ns[atomic_load(&w->got)] = tdb_mono_ns() - (int64_t) ev.location_id;
		atomic_fetch_add(&w->got, 1);
	}
	tdb_subring_consumer_close(&c);
	return NULL;
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *) a;
	int64_t		y = *(const int64_t *) b;

	return (x > y) - (x < y);
}

UNIT_TEST(test_subring_wake_latency)
{
	SubEnv		e;
	Waiter		w;
	pthread_t	t;
	static int64_t lat[300];
	int			sent = 0;

	if (!senv_open(&e, 1, 64))
		return;
	memset(&w, 0, sizeof(w));
	w.e = &e;
	w.rounds = 300;
	w.lat_ns = lat;
	pthread_create(&t, NULL, latency_consumer, &w);
	for (int i = 0; i < 2000 && atomic_load(&w.ready) == 0; i++)
		sleep_us(1000);
	if (atomic_load(&w.ready) > 0 && attach(&e, 0))
	{
		TdbSubSlot *s = tdb_subring_slot(e.r.base, 64, 0);

		for (; sent < w.rounds; sent++)
		{
			TdbSubEvent ev;

			/* until it took the last one and sleeps again (bounded): each round is a real wake-up */
			for (int k = 0; k < 20000 && (atomic_load(&w.got) < sent || atomic_load(&s->waiters) == 0); k++)
				sleep_us(50);
			sleep_us(100);		/* into the FUTEX_WAIT, not only the flag */
			ev = mkev((uint64_t) tdb_mono_ns(), (uint64_t) sent + 1);
			CHECK_EQ_U64(tdb_subring_push(&e.r, 0, &ev), TDB_SUBRING_PUSHED);
			tdb_subring_wake(&e.r, 0);
		}
	}
	pthread_join(t, NULL);
	CHECK_EQ_U64(w.bad, 0);
	CHECK_EQ_U64(w.got, sent);
	if (w.got > 0)
	{
		qsort(lat, (size_t) w.got, sizeof(int64_t), cmp_i64);
		printf("# push -> wake-up (threads, %d rounds, %llu FUTEX_WAKEs): p50 %.1f us, p99 %.1f us, max %.1f us\n",
			   w.got, (unsigned long long) e.r.wakes_total, lat[w.got / 2] / 1000.0,
			   lat[(w.got * 99) / 100] / 1000.0, lat[w.got - 1] / 1000.0);
	}
	senv_close(&e);
}

static void *
stop_consumer(void *arg)
{
	Waiter	   *w = arg;
	TdbSubConsumer c;
	TdbSubEvent ev[4];
	int64_t		t0;

	if (!subscribe_alone(w->e, &c, &w->ready))
		return NULL;
	t0 = tdb_mono_us();
	w->last_rc = tdb_subring_receive(&c, ev, 4, 10000);
	w->waited_us = tdb_mono_us() - t0;
	tdb_subring_consumer_close(&c);
	return NULL;
}

UNIT_TEST(test_subring_stop_wakes_receiver)
{
	SubEnv		e;
	Waiter		w;
	pthread_t	t;
	TdbSubSlot *s = NULL;

	if (!senv_open(&e, 2, 64))
		return;
	memset(&w, 0, sizeof(w));
	w.e = &e;
	pthread_create(&t, NULL, stop_consumer, &w);
	for (int i = 0; i < 2000 && atomic_load(&w.ready) == 0; i++)
		sleep_us(1000);
	if (atomic_load(&w.ready) > 0)
	{
		s = tdb_subring_slot(e.r.base, 64, (uint32_t) atomic_load(&w.ready) - 1);
		for (int k = 0; k < 2000 && atomic_load(&s->waiters) == 0; k++)
			sleep_us(1000);
		tdb_subring_set_state(&e.r, TDB_SUBRING_STOPPED);
	}
	pthread_join(t, NULL);
	CHECK_EQ_U64(w.last_rc, (uint64_t) TDB_SHM_ESTALE);
	CHECK(w.waited_us < 5000000);	/* woken, not timed out (the poll is 1 s) */

	/* events already there come first, then STALE; no new subscriptions */
	tdb_subring_set_state(&e.r, TDB_SUBRING_RUNNING);
	{
		TdbSubConsumer c;
		TdbSubConsumer c2;
		TdbSubEvent buf[4];
		TdbSubEvent ev = mkev(1, 1);

		if (open_consumer(&c, &e, NULL) && tdb_subring_subscribe(&c, NULL, 0, 0, 0) == TDB_SHM_OK &&
			attach(&e, c.slot_idx))
		{
			CHECK_EQ_U64(tdb_subring_push(&e.r, (uint32_t) c.slot_idx, &ev), TDB_SUBRING_PUSHED);
			CHECK(open_consumer(&c2, &e, NULL));
			tdb_subring_set_state(&e.r, TDB_SUBRING_STOPPED);
			CHECK_EQ_U64(tdb_subring_subscribe(&c2, NULL, 0, 0, 0), (uint64_t) TDB_SHM_ESTALE);
			tdb_subring_consumer_close(&c2);
			CHECK_EQ_U64(tdb_subring_receive(&c, buf, 4, 1000), 1);
			CHECK_EQ_U64(tdb_subring_receive(&c, buf, 4, 1000), (uint64_t) TDB_SHM_ESTALE);
			tdb_subring_consumer_close(&c);
		}
	}
	senv_close(&e);
}

/* A replaced segment (a restarted daemon) says STOPPED to the old one's consumers. */
UNIT_TEST(test_subring_replaced_segment_is_stale)
{
	SubEnv		e;
	SubEnv		e2;
	TdbSubConsumer c;
	TdbSubEvent buf[4];
	char		err[TDB_SHM_ERRLEN];

	if (!senv_open(&e, 1, 64))
		return;
	if (open_consumer(&c, &e, NULL) && tdb_subring_subscribe(&c, NULL, 0, 0, 0) == TDB_SHM_OK)
	{
		/* the daemon dies without a word; the next one makes the segment anew */
		e2 = e;
		tdb_subring_close(&e.r);
		CHECK_EQ_U64(tdb_subring_create(&e2.r, e2.prefix, 1, 64, (gid_t) -1, INSTANCE + 1, err), TDB_SHM_OK);
		CHECK_EQ_U64(tdb_subring_receive(&c, buf, 4, 1000), (uint64_t) TDB_SHM_ESTALE);
		tdb_subring_consumer_close(&c);
		tdb_subring_set_state(&e2.r, TDB_SUBRING_RUNNING);
		open_fails(&e2, INSTANCE, TDB_SHM_ESTALE);	/* the old instance id */
		CHECK_EQ_U64(tdb_subring_consumer_open(&c, e2.prefix, INSTANCE + 1, NULL, err), TDB_SHM_OK);
		tdb_subring_consumer_close(&c);
		senv_close(&e2);
	}
	else
		senv_close(&e);
}

static void
on_usr1(int sig)
{
	(void) sig;
}

static void *
eintr_consumer(void *arg)
{
	Waiter	   *w = arg;
	TdbSubConsumer c;
	TdbSubEvent ev;

	if (!subscribe_alone(w->e, &c, &w->ready))
		return NULL;
	w->last_rc = tdb_subring_receive(&c, &ev, 1, 5000);
	tdb_subring_consumer_close(&c);
	return NULL;
}

UNIT_TEST(test_subring_eintr)
{
	SubEnv		e;
	Waiter		w;
	pthread_t	t;
	struct sigaction sa;
	struct sigaction old;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;	/* no SA_RESTART */
	sigaction(SIGUSR1, &sa, &old);
	if (!senv_open(&e, 1, 64))
		return;
	memset(&w, 0, sizeof(w));
	w.e = &e;
	pthread_create(&t, NULL, eintr_consumer, &w);
	for (int i = 0; i < 2000 && atomic_load(&w.ready) == 0; i++)
		sleep_us(1000);
	if (atomic_load(&w.ready) > 0)
	{
		TdbSubSlot *s = tdb_subring_slot(e.r.base, 64, 0);

		for (int k = 0; k < 2000 && atomic_load(&s->waiters) == 0; k++)
			sleep_us(1000);
		sleep_us(20000);		/* into the FUTEX_WAIT */
		pthread_kill(t, SIGUSR1);
	}
	pthread_join(t, NULL);
	CHECK_EQ_U64(w.last_rc, (uint64_t) TDB_SUBRING_EINTR);
	sigaction(SIGUSR1, &old, NULL);
	senv_close(&e);
}
