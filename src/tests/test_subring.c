/*
 * test_subring.c
 *	  The subscribers' event rings (src/subring/) in /dev/shm, the daemon's
 *	  side played by the test: order and consecutive seq, the overrun rule
 *	  (exact event sequences), reclaim of a dead slot, damaged headers and
 *	  out-of-range values, threads (ThreadSanitizer: the consumers borrow
 *	  the producer's mapping), group handover with members leaving (threads)
 *	  and killed with SIGKILL (processes), wake-up latency, STOPPED, EINTR.
 */
#include "unit.h"
#include "subring/subring.h"
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

#define INSTANCE	4242u
#define GROUP		7u

typedef struct SubEnv
{
	char		prefix[64];
	TdbSubring	r;
} SubEnv;

static int	senv_counter;

static bool
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

static void
senv_close(SubEnv *e)
{
	tdb_subring_remove(&e->r);
}

static void
sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

static TdbSubEvent
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

static bool
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
static uint32_t
sweep(SubEnv *e, TdbSubChange *ch, uint32_t max)
{
	uint32_t	n = 0;

	CHECK_EQ_U64(tdb_subring_sweep(&e->r, ch, max, &n), TDB_SHM_OK);
	return n;
}

/* Sweep until slot is attached (bounded). */
static bool
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

UNIT_TEST(test_subring_layout)
{
	CHECK_EQ_U64(sizeof(TdbSubEvent), 64);
	CHECK_EQ_U64(tdb_subring_slot_size(64) % 4096, 0);
	CHECK_EQ_U64(tdb_subring_slot_offset(64, 1), 4096 + 8192 + 64 * 64);
	CHECK(tdb_subring_geometry_ok(1, 64));
	CHECK(tdb_subring_geometry_ok(TDB_SUBRING_MAX_SLOTS, TDB_SUBRING_MAX_EVENTS));
	CHECK(!tdb_subring_geometry_ok(0, 64));
	CHECK(!tdb_subring_geometry_ok(TDB_SUBRING_MAX_SLOTS + 1, 64));
	CHECK(!tdb_subring_geometry_ok(1, 32));
	CHECK(!tdb_subring_geometry_ok(1, 96));
	CHECK(!tdb_subring_geometry_ok(1, TDB_SUBRING_MAX_EVENTS * 2));
}

UNIT_TEST(test_subring_order_and_seq)
{
	SubEnv		e;
	TdbSubConsumer c;
	TdbSubChange ch[8];
	TdbSubEvent buf[64];
	TdbSubEvent ev = mkev(1, 1);
	char		filter[16];
	uint64_t	pushed = 0;
	uint64_t	got = 0;
	uint32_t	n;

	if (!senv_open(&e, 4, 256))
		return;
	if (!open_consumer(&c, &e, NULL))
		goto done;
	CHECK_EQ_U64(tdb_subring_subscribe(&c, "hello", 5, 0, TDB_SUBGROUP_NONE), TDB_SHM_OK);
	CHECK_EQ_U64(c.slot_idx, 0);
	/* not attached before a sweep saw it ACTIVE */
	CHECK_EQ_U64(tdb_subring_push(&e.r, 0, &ev), (uint64_t) TDB_SHM_EINVAL);
	n = sweep(&e, ch, 8);
	CHECK_EQ_U64(n, 1);
	CHECK_EQ_U64(ch[0].kind, TDB_SUBCHANGE_ATTACHED);
	CHECK_EQ_U64(ch[0].slot, 0);
	CHECK_EQ_U64(ch[0].pid, getpid());
	CHECK_EQ_U64(ch[0].filter_len, 5);
	CHECK_EQ_U64(ch[0].group_id, 0);
	CHECK_EQ_U64(tdb_subring_filter(&e.r, 0, filter, sizeof(filter)), 5);
	CHECK(memcmp(filter, "hello", 5) == 0);
	CHECK_EQ_U64(tdb_subring_filter(&e.r, 0, filter, 4), (uint64_t) -1);
	CHECK_EQ_U64(sweep(&e, ch, 8), 0);	/* alive and attached: nothing new */
	CHECK_EQ_U64(tdb_subring_wait(&c, 0), 0);
	CHECK_EQ_U64(tdb_subring_receive(&c, buf, 64, 0), 0);
	CHECK_EQ_U64(tdb_subring_space(&e.r, 0), 256);

	for (int iter = 0; iter < 10000 && got < 1000; iter++)
	{
		int			m;

		for (int k = 0; k < 50 && pushed < 1000 && tdb_subring_space(&e.r, 0) > 0; k++)
		{
			ev = mkev(pushed + 1, pushed / 10 + 1);
			CHECK_EQ_U64(tdb_subring_push(&e.r, 0, &ev), TDB_SUBRING_PUSHED);
			pushed++;
		}
		tdb_subring_wake_pending(&e.r);
		m = tdb_subring_receive(&c, buf, 37, 100);
		CHECK(m > 0);
		if (m <= 0)
			break;
		for (int k = 0; k < m; k++)
		{
			got++;
			CHECK_EQ_U64(buf[k].kind, TDB_SUBEV_CHANGE);
			CHECK_EQ_U64(buf[k].location_id, got);
			CHECK_EQ_U64(buf[k].seq, got);
			CHECK_EQ_U64(buf[k].generation, (got - 1) / 10 + 1);
			CHECK_EQ_U64(buf[k].flags, 0);
			CHECK(buf[k].new_speed_kmh == 20 && buf[k].new_congestion == 3);
		}
	}
	CHECK_EQ_U64(got, 1000);
	/* the consumer never waited: no publication cost a system call */
	CHECK_EQ_U64(e.r.wakes_total, 0);

	/* closed: reclaimed with nothing undelivered, FREE at once, seq goes on */
	tdb_subring_consumer_close(&c);
	n = sweep(&e, ch, 8);
	CHECK_EQ_U64(n, 1);
	CHECK_EQ_U64(ch[0].kind, TDB_SUBCHANGE_RECLAIMED);
	CHECK_EQ_U64(ch[0].tail, 1000);
	CHECK_EQ_U64(ch[0].undelivered, 0);
	if (open_consumer(&c, &e, NULL))
	{
		CHECK_EQ_U64(tdb_subring_subscribe(&c, NULL, 0, 0, TDB_SUBGROUP_NONE), TDB_SHM_OK);
		CHECK_EQ_U64(c.slot_idx, 0);
		attach(&e, 0);
		ev = mkev(5000, 500);
		CHECK_EQ_U64(tdb_subring_push(&e.r, 0, &ev), TDB_SUBRING_PUSHED);
		CHECK_EQ_U64(tdb_subring_receive(&c, buf, 64, 100), 1);
		CHECK_EQ_U64(buf[0].seq, 1001);
		CHECK_EQ_U64(buf[0].location_id, 5000);
		tdb_subring_consumer_close(&c);
	}
done:
	senv_close(&e);
}

static void
check_ev(const TdbSubEvent *ev, uint16_t kind, uint64_t id, uint64_t gen, uint64_t seq)
{
	CHECK_EQ_U64(ev->kind, kind);
	CHECK_EQ_U64(ev->location_id, id);
	CHECK_EQ_U64(ev->generation, gen);
	CHECK_EQ_U64(ev->seq, seq);
}

UNIT_TEST(test_subring_overrun_then_resync)
{
	SubEnv		e;
	TdbSubConsumer c;
	TdbSubEvent buf[256];
	TdbSubEvent ev;
	TdbSubSlot *s;

	if (!senv_open(&e, 1, 64))
		return;
	if (!open_consumer(&c, &e, NULL) || tdb_subring_subscribe(&c, NULL, 0, 0, 0) != TDB_SHM_OK || !attach(&e, 0))
		goto done;
	s = tdb_subring_slot(e.r.base, 64, 0);

	/* episode 1: 70 into a ring of 64, 6 dropped; the OVERRUN comes before the next event */
	for (uint64_t i = 1; i <= 70; i++)
	{
		ev = mkev(i, 100 + i);
		CHECK_EQ_U64(tdb_subring_push(&e.r, 0, &ev), i <= 64 ? TDB_SUBRING_PUSHED : TDB_SUBRING_DROPPED);
	}
	CHECK_EQ_U64(tdb_subring_space(&e.r, 0), 0);
	CHECK_EQ_U64(atomic_load(&s->overrun), 1);
	CHECK_EQ_U64(atomic_load(&s->overrun_generation), 165);
	CHECK_EQ_U64(tdb_subring_receive(&c, buf, 256, 0), 64);
	for (uint64_t i = 1; i <= 64; i++)
		check_ev(&buf[i - 1], TDB_SUBEV_CHANGE, i, 100 + i, i);
	CHECK_EQ_U64(tdb_subring_space(&e.r, 0), 63);	/* one is for the owed OVERRUN */
	ev = mkev(71, 171);
	CHECK_EQ_U64(tdb_subring_push(&e.r, 0, &ev), TDB_SUBRING_PUSHED);
	CHECK_EQ_U64(tdb_subring_receive(&c, buf, 256, 0), 2);
	check_ev(&buf[0], TDB_SUBEV_OVERRUN, 6, 165, 65); /* resync: changes_since(164) */
	check_ev(&buf[1], TDB_SUBEV_CHANGE, 71, 171, 66);
	CHECK_EQ_U64(atomic_load(&s->overrun), 0);

	/* episode 2: full again, the consumer makes room for one only: still dropping */
	for (uint64_t i = 72; i <= 138; i++)
	{
		ev = mkev(i, 100 + i);
		CHECK_EQ_U64(tdb_subring_push(&e.r, 0, &ev), i <= 135 ? TDB_SUBRING_PUSHED : TDB_SUBRING_DROPPED);
	}
	CHECK_EQ_U64(tdb_subring_receive(&c, buf, 1, 0), 1);
	check_ev(&buf[0], TDB_SUBEV_CHANGE, 72, 172, 67);
	CHECK_EQ_U64(tdb_subring_space(&e.r, 0), 0);
	ev = mkev(139, 239);
	CHECK_EQ_U64(tdb_subring_push(&e.r, 0, &ev), TDB_SUBRING_DROPPED);
	/* the end of the batch puts the owed OVERRUN into the one free place, no next event needed */
	CHECK(!tdb_subring_wake(&e.r, 0));
	CHECK_EQ_U64(tdb_subring_receive(&c, buf, 256, 0), 64);
	for (uint64_t i = 73; i <= 135; i++)
		check_ev(&buf[i - 73], TDB_SUBEV_CHANGE, i, 100 + i, i - 5);
	check_ev(&buf[63], TDB_SUBEV_OVERRUN, 4, 236, 131);
	ev = mkev(140, 240);
	CHECK_EQ_U64(tdb_subring_push(&e.r, 0, &ev), TDB_SUBRING_PUSHED);
	CHECK_EQ_U64(tdb_subring_receive(&c, buf, 256, 0), 1);
	check_ev(&buf[0], TDB_SUBEV_CHANGE, 140, 240, 132);
	CHECK_EQ_U64(atomic_load(&s->dropped), 10);
	CHECK_EQ_U64(atomic_load(&s->pushed), 132);
	tdb_subring_consumer_close(&c);
done:
	senv_close(&e);
}

/*
 * push_deferred: nothing is visible before head is stored; it is stored
 * every quarter ring (ring_events 64: every 16 events) and by wake; a full
 * ring publishes at once; pushed counts each event once; a dead owner's
 * unpublished events are handed over like the others.
 */
UNIT_TEST(test_subring_push_deferred)
{
	SubEnv		e;
	TdbSubConsumer c;
	TdbSubEvent buf[256];
	TdbSubEvent ev;
	TdbSubSlot *s;
	TdbSubChange ch[8];

	if (!senv_open(&e, 1, 64))
		return;
	if (!open_consumer(&c, &e, NULL) || tdb_subring_subscribe(&c, NULL, 0, GROUP, TDB_SUBGROUP_ROUND_ROBIN) != TDB_SHM_OK ||
		!attach(&e, 0))
		goto done;
	s = tdb_subring_slot(e.r.base, 64, 0);

	for (uint64_t i = 1; i <= 15; i++)
	{
		ev = mkev(i, 1);
		CHECK_EQ_U64(tdb_subring_push_deferred(&e.r, 0, &ev), TDB_SUBRING_PUSHED);
	}
	CHECK_EQ_U64(tdb_subring_receive(&c, buf, 256, 0), 0);	/* not published yet */
	CHECK_EQ_U64(atomic_load(&s->pushed), 0);
	CHECK_EQ_U64(tdb_subring_space(&e.r, 0), 49);	/* but they take room */
	ev = mkev(16, 1);
	CHECK_EQ_U64(tdb_subring_push_deferred(&e.r, 0, &ev), TDB_SUBRING_PUSHED);
	CHECK_EQ_U64(atomic_load(&s->head), 16);	/* a quarter of the ring: published */
	CHECK_EQ_U64(atomic_load(&s->pushed), 16);
	ev = mkev(17, 1);
	CHECK_EQ_U64(tdb_subring_push_deferred(&e.r, 0, &ev), TDB_SUBRING_PUSHED);
	CHECK_EQ_U64(tdb_subring_receive(&c, buf, 256, 0), 16);
	for (uint64_t i = 1; i <= 16; i++)
		check_ev(&buf[i - 1], TDB_SUBEV_CHANGE, i, 1, i);
	CHECK(!tdb_subring_wake(&e.r, 0));	/* publishes the 17th; nobody waits */
	CHECK_EQ_U64(tdb_subring_receive(&c, buf, 256, 0), 1);
	check_ev(&buf[0], TDB_SUBEV_CHANGE, 17, 1, 17);

	/* a full ring: what it holds is published at the first drop, the OVERRUN follows as usual */
	ev = mkev(18, 2);
	CHECK_EQ_U64(tdb_subring_push_deferred(&e.r, 0, &ev), TDB_SUBRING_PUSHED);
	CHECK(!tdb_subring_wake(&e.r, 0));
	for (uint64_t i = 19; i <= 90; i++)
	{
		ev = mkev(i, 2);
		CHECK_EQ_U64(tdb_subring_push_deferred(&e.r, 0, &ev), i <= 81 ? TDB_SUBRING_PUSHED : TDB_SUBRING_DROPPED);
		if (i == 81)
			CHECK_EQ_U64(atomic_load(&s->head), 66);	/* 15 written, not yet published */
	}
	CHECK_EQ_U64(atomic_load(&s->head), 81);
	CHECK_EQ_U64(atomic_load(&s->pushed), 81);
	CHECK_EQ_U64(atomic_load(&s->dropped), 9);
	CHECK_EQ_U64(tdb_subring_receive(&c, buf, 256, 0), 64);
	check_ev(&buf[63], TDB_SUBEV_CHANGE, 81, 2, 81);
	ev = mkev(91, 3);
	CHECK_EQ_U64(tdb_subring_push_deferred(&e.r, 0, &ev), TDB_SUBRING_PUSHED);
	CHECK_EQ_U64(tdb_subring_receive(&c, buf, 256, 0), 0);
	tdb_subring_wake_pending(&e.r);
	CHECK_EQ_U64(tdb_subring_receive(&c, buf, 256, 0), 2);
	check_ev(&buf[0], TDB_SUBEV_OVERRUN, 9, 2, 82);
	check_ev(&buf[1], TDB_SUBEV_CHANGE, 91, 3, 83);
	CHECK_EQ_U64(atomic_load(&s->pushed), 83);

	/* the owner leaves with 5 events never published: they are handed over */
	for (uint64_t i = 92; i <= 96; i++)
	{
		ev = mkev(i, 4);
		CHECK_EQ_U64(tdb_subring_push_deferred(&e.r, 0, &ev), TDB_SUBRING_PUSHED);
	}
	tdb_subring_consumer_close(&c);
	CHECK_EQ_U64(sweep(&e, ch, 8), 1);
	CHECK_EQ_U64(ch[0].kind, TDB_SUBCHANGE_RECLAIMED);
	CHECK_EQ_U64(ch[0].undelivered, 5);
	CHECK_EQ_U64(tdb_subring_take_undelivered(&e.r, 0, buf, 256), 5);
	for (uint64_t i = 92; i <= 96; i++)
	{
		CHECK_EQ_U64(buf[i - 92].location_id, i);
		CHECK_EQ_U64(buf[i - 92].seq, i - 8);
		CHECK_EQ_U64(buf[i - 92].flags, TDB_SUBEV_HANDED_OVER);
	}
	CHECK_EQ_U64(atomic_load(&s->state), TDB_SUBSLOT_FREE);
	CHECK_EQ_U64(atomic_load(&s->head), 88);
	goto out;
done:
	tdb_subring_consumer_close(&c);
out:
	senv_close(&e);
}

/* A child consumer that takes 4 events and then waits to be killed. */
static void
child_take4(const char *prefix, int wfd)
{
	TdbSubConsumer c;
	TdbSubEvent buf[4];
	char		err[TDB_SHM_ERRLEN];
	int			got = 0;

	if (tdb_subring_consumer_open(&c, prefix, INSTANCE, NULL, err) != TDB_SHM_OK ||
		tdb_subring_subscribe(&c, NULL, 0, GROUP, TDB_SUBGROUP_ROUND_ROBIN) != TDB_SHM_OK)
		_exit(2);
	if (write(wfd, "r", 1) != 1)
		_exit(3);
	for (int i = 0; i < 100 && got < 4; i++)
	{
		int			n = tdb_subring_receive(&c, buf, (uint32_t) (4 - got), 100);

		if (n < 0)
			_exit(4);
		got += n;
	}
	if (write(wfd, "g", 1) != 1)
		_exit(5);
	sleep_us(20 * 1000000);
	_exit(0);
}

UNIT_TEST(test_subring_reclaim_dead_slot)
{
	SubEnv		e;
	TdbSubChange ch[8];
	TdbSubEvent buf[8];
	TdbSubConsumer c;
	int			pfd[2];
	pid_t		pid;
	char		x;
	int			status;
	uint32_t	n;

	if (!senv_open(&e, 1, 64))
		return;
	CHECK(pipe(pfd) == 0);
	fflush(stdout);
	pid = fork();
	if (pid == 0)
	{
		close(pfd[0]);
		child_take4(e.prefix, pfd[1]);
	}
	close(pfd[1]);
	CHECK(pid > 0);
	if (pid <= 0 || read(pfd[0], &x, 1) != 1)
		goto done;
	attach(&e, 0);
	for (uint64_t i = 1; i <= 10; i++)
	{
		TdbSubEvent ev = mkev(i, 1);

		CHECK_EQ_U64(tdb_subring_push(&e.r, 0, &ev), TDB_SUBRING_PUSHED);
	}
	tdb_subring_wake(&e.r, 0);
	CHECK(read(pfd[0], &x, 1) == 1 && x == 'g');
	CHECK_EQ_U64(sweep(&e, ch, 8), 0);	/* alive: left alone */
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

	n = sweep(&e, ch, 8);
	CHECK_EQ_U64(n, 1);
	CHECK_EQ_U64(ch[0].kind, TDB_SUBCHANGE_RECLAIMED);
	CHECK_EQ_U64(ch[0].slot, 0);
	CHECK_EQ_U64(ch[0].pid, pid);
	CHECK_EQ_U64(ch[0].group_id, GROUP);
	CHECK_EQ_U64(ch[0].group_mode, TDB_SUBGROUP_ROUND_ROBIN);
	CHECK_EQ_U64(ch[0].tail, 4);
	CHECK_EQ_U64(ch[0].undelivered, 6);
	CHECK(!ch[0].tail_damaged);
	CHECK_EQ_U64(sweep(&e, ch, 8), 0);	/* reported once */

	/* until its events are taken back, nobody claims it and nothing is pushed there */
	if (open_consumer(&c, &e, NULL))
	{
		TdbSubEvent ev = mkev(99, 2);

		CHECK_EQ_U64(tdb_subring_subscribe(&c, NULL, 0, 0, 0), (uint64_t) TDB_SHM_ENOSLOT);
		CHECK_EQ_U64(tdb_subring_push(&e.r, 0, &ev), (uint64_t) TDB_SHM_EINVAL);
		CHECK_EQ_U64(tdb_subring_take_undelivered(&e.r, 0, buf, 4), 4);
		for (int i = 0; i < 4; i++)
		{
			CHECK_EQ_U64(buf[i].location_id, 5 + i);
			CHECK_EQ_U64(buf[i].kind, TDB_SUBEV_CHANGE);
			CHECK_EQ_U64(buf[i].flags, TDB_SUBEV_HANDED_OVER);
		}
		CHECK_EQ_U64(tdb_subring_subscribe(&c, NULL, 0, 0, 0), (uint64_t) TDB_SHM_ENOSLOT);
		CHECK_EQ_U64(tdb_subring_take_undelivered(&e.r, 0, buf, 4), 2);
		CHECK_EQ_U64(buf[0].location_id, 9);
		CHECK_EQ_U64(buf[1].location_id, 10);
		CHECK_EQ_U64(tdb_subring_take_undelivered(&e.r, 0, buf, 4), 0);
		/* FREE again: claimable, and the new owner sees nothing of the old one's */
		CHECK_EQ_U64(tdb_subring_subscribe(&c, NULL, 0, 0, 0), TDB_SHM_OK);
		CHECK_EQ_U64(tdb_subring_wait(&c, 0), 0);
		attach(&e, 0);
		CHECK_EQ_U64(tdb_subring_push(&e.r, 0, &ev), TDB_SUBRING_PUSHED);
		CHECK_EQ_U64(tdb_subring_receive(&c, buf, 8, 100), 1);
		CHECK_EQ_U64(buf[0].seq, 11);
		CHECK_EQ_U64(buf[0].flags, 0);
		tdb_subring_consumer_close(&c);
	}
done:
	close(pfd[0]);
	senv_close(&e);
}

/* Open should fail with want (and not crash). */
static void
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

UNIT_TEST(test_subring_rejects_damage)
{
	SubEnv		e;
	TdbSubring	bad;
	TdbSubsHeader *h;
	TdbSubConsumer c;
	TdbSubChange ch[8];
	TdbSubEvent buf[8];
	TdbSubEvent ev = mkev(1, 1);
	TdbSubSlot *s;
	char		err[TDB_SHM_ERRLEN];
	uint32_t	n;

	/* the producer refuses bad geometry and names */
	CHECK_EQ_U64(tdb_subring_create(&bad, "/x", 0, 64, (gid_t) -1, 1, err), (uint64_t) TDB_SHM_EINVAL);
	CHECK_EQ_U64(tdb_subring_create(&bad, "/x", 1, 100, (gid_t) -1, 1, err), (uint64_t) TDB_SHM_EINVAL);
	CHECK_EQ_U64(tdb_subring_create(&bad, "x", 1, 64, (gid_t) -1, 1, err), (uint64_t) TDB_SHM_EINVAL);

	if (!senv_open(&e, 2, 64))
		return;
	h = e.r.base;
	{
		SubEnv		none = e;

		snprintf(none.prefix, sizeof(none.prefix), "/tdbsub.%d.none", (int) getpid());
		open_fails(&none, INSTANCE, TDB_SHM_ENOENT);
	}
	open_fails(&e, 999, TDB_SHM_ESTALE);	/* another instance */
	tdb_subring_set_state(&e.r, TDB_SUBRING_STOPPED);
	open_fails(&e, INSTANCE, TDB_SHM_ESTALE);
	tdb_subring_set_state(&e.r, TDB_SUBRING_RUNNING);

	/* header fields out of range, one at a time: the consumer refuses, the producer's sweep too */
	{
		uint32_t	saved;

		h->magic ^= 1;
		open_fails(&e, INSTANCE, TDB_SHM_EINVAL);
		CHECK_EQ_U64(tdb_subring_sweep(&e.r, ch, 8, &n), (uint64_t) TDB_SHM_ECORRUPT);
		h->magic ^= 1;
		saved = h->ring_events;
		uint32_t	bad_events[] = {0, 63, 100, TDB_SUBRING_MAX_EVENTS * 2, 0x80000000u, 128};

		for (size_t i = 0; i < sizeof(bad_events) / sizeof(bad_events[0]); i++)
		{
			h->ring_events = bad_events[i];
			/* 128: valid geometry, but then the file is too small for it */
			open_fails(&e, INSTANCE, TDB_SHM_EINVAL);
			CHECK_EQ_U64(tdb_subring_sweep(&e.r, ch, 8, &n), (uint64_t) TDB_SHM_ECORRUPT);
		}
		h->ring_events = saved;
		saved = h->nslots;
		uint32_t	bad_slots[] = {0, TDB_SUBRING_MAX_SLOTS + 1, 0xFFFFFFFFu, 3};

		for (size_t i = 0; i < sizeof(bad_slots) / sizeof(bad_slots[0]); i++)
		{
			h->nslots = bad_slots[i];
			open_fails(&e, INSTANCE, TDB_SHM_EINVAL);
			CHECK_EQ_U64(tdb_subring_sweep(&e.r, ch, 8, &n), (uint64_t) TDB_SHM_ECORRUPT);
		}
		h->nslots = saved;
		h->version = 99;
		open_fails(&e, INSTANCE, TDB_SHM_EINVAL);
		h->version = TDB_SUBS_VERSION;
		h->filter_size = 1;
		open_fails(&e, INSTANCE, TDB_SHM_EINVAL);
		h->filter_size = TDB_SUBRING_FILTER_SIZE;
	}
	/* truncated: refused before mapping (consumer) and before touching a slot (producer) */
	CHECK(ftruncate(e.r.fd, (off_t) e.r.size - 4096) == 0);
	open_fails(&e, INSTANCE, TDB_SHM_EINVAL);
	CHECK_EQ_U64(tdb_subring_sweep(&e.r, ch, 8, &n), (uint64_t) TDB_SHM_ECORRUPT);
	CHECK(ftruncate(e.r.fd, 100) == 0);
	open_fails(&e, INSTANCE, TDB_SHM_EINVAL);
	CHECK(ftruncate(e.r.fd, (off_t) e.r.size) == 0);
	/* writable by everyone: anyone could have put it there */
	CHECK(fchmod(e.r.fd, 0666) == 0);
	open_fails(&e, INSTANCE, TDB_SHM_EACCES);
	CHECK(fchmod(e.r.fd, 0600) == 0);

	/* a header restored: the producer sweeps again, the consumer opens */
	CHECK_EQ_U64(tdb_subring_sweep(&e.r, ch, 8, &n), TDB_SHM_OK);
	if (!open_consumer(&c, &e, NULL))
		goto done;
	/* bad subscriptions */
	CHECK_EQ_U64(tdb_subring_receive(&c, buf, 8, 0), (uint64_t) TDB_SHM_EINVAL);	/* not subscribed */
	CHECK_EQ_U64(tdb_subring_subscribe(&c, buf, TDB_SUBRING_FILTER_SIZE + 1, 0, 0), (uint64_t) TDB_SHM_EINVAL);
	CHECK_EQ_U64(tdb_subring_subscribe(&c, NULL, 0, 5, TDB_SUBGROUP_NONE), (uint64_t) TDB_SHM_EINVAL);
	CHECK_EQ_U64(tdb_subring_subscribe(&c, NULL, 0, 0, TDB_SUBGROUP_STICKY), (uint64_t) TDB_SHM_EINVAL);
	CHECK_EQ_U64(tdb_subring_subscribe(&c, NULL, 0, 5, 77), (uint64_t) TDB_SHM_EINVAL);
	CHECK_EQ_U64(tdb_subring_subscribe(&c, NULL, 0, 0, 0), TDB_SHM_OK);
	CHECK_EQ_U64(tdb_subring_subscribe(&c, NULL, 0, 0, 0), (uint64_t) TDB_SHM_EINVAL);	/* twice */
	attach(&e, c.slot_idx);
	s = tdb_subring_slot(e.r.base, 64, (uint32_t) c.slot_idx);
	/* producer calls with slots out of range */
	CHECK_EQ_U64(tdb_subring_push(&e.r, 2, &ev), (uint64_t) TDB_SHM_EINVAL);
	CHECK_EQ_U64(tdb_subring_push(&e.r, 0xFFFFFFFFu, &ev), (uint64_t) TDB_SHM_EINVAL);
	CHECK_EQ_U64(tdb_subring_take_undelivered(&e.r, 5, buf, 8), 0);
	CHECK_EQ_U64(tdb_subring_filter(&e.r, 5, buf, 8), (uint64_t) -1);
	CHECK(!tdb_subring_wake(&e.r, 9));
	CHECK_EQ_U64(tdb_subring_space(&e.r, 9), 0);
	for (uint64_t i = 1; i <= 3; i++)
	{
		ev = mkev(i, i);
		CHECK_EQ_U64(tdb_subring_push(&e.r, (uint32_t) c.slot_idx, &ev), TDB_SUBRING_PUSHED);
	}
	/* a head out of range of the tail, an event's seq or kind damaged: an error, nothing taken */
	atomic_store(&s->head, 3 + 65);
	CHECK_EQ_U64(tdb_subring_receive(&c, buf, 8, 0), (uint64_t) TDB_SHM_ECORRUPT);
	atomic_store(&s->head, (uint64_t) -5);
	CHECK_EQ_U64(tdb_subring_peek(&c, buf, 8), (uint64_t) TDB_SHM_ECORRUPT);
	CHECK_EQ_U64(tdb_subring_wait(&c, 0), (uint64_t) TDB_SHM_ECORRUPT);
	atomic_store(&s->head, 3);
	tdb_subring_events(s)[1].seq = 77;
	CHECK_EQ_U64(tdb_subring_receive(&c, buf, 8, 0), (uint64_t) TDB_SHM_ECORRUPT);
	tdb_subring_events(s)[1].seq = 2;
	tdb_subring_events(s)[2].kind = 0;
	CHECK_EQ_U64(tdb_subring_receive(&c, buf, 8, 0), (uint64_t) TDB_SHM_ECORRUPT);
	tdb_subring_events(s)[2].kind = 300;
	CHECK_EQ_U64(tdb_subring_receive(&c, buf, 8, 0), (uint64_t) TDB_SHM_ECORRUPT);
	tdb_subring_events(s)[2].kind = TDB_SUBEV_CHANGE;
	CHECK_EQ_U64(c.tail, 0);
	CHECK_EQ_U64(tdb_subring_receive(&c, buf, 8, 0), 3);
	CHECK_EQ_U64(tdb_subring_consume(&c, 1), (uint64_t) TDB_SHM_EINVAL);	/* nothing left to consume */
	/* a tail past head, or more than a ring behind it: pushes refused, no space */
	atomic_store(&s->tail, 4);
	CHECK_EQ_U64(tdb_subring_push(&e.r, (uint32_t) c.slot_idx, &ev), (uint64_t) TDB_SHM_ECORRUPT);
	CHECK_EQ_U64(tdb_subring_space(&e.r, (uint32_t) c.slot_idx), 0);
	atomic_store(&s->tail, (uint64_t) -100);
	CHECK_EQ_U64(tdb_subring_push(&e.r, (uint32_t) c.slot_idx, &ev), (uint64_t) TDB_SHM_ECORRUPT);
	CHECK(e.r.damaged_total >= 2);
	/* the owner leaves with its tail damaged: reclaimed, nothing handed over, FREE */
	tdb_subring_consumer_close(&c);
	n = sweep(&e, ch, 8);
	CHECK_EQ_U64(n, 1);
	CHECK_EQ_U64(ch[0].kind, TDB_SUBCHANGE_RECLAIMED);
	CHECK(ch[0].tail_damaged);
	CHECK_EQ_U64(ch[0].undelivered, 0);
	CHECK_EQ_U64(atomic_load(&s->state), TDB_SUBSLOT_FREE);
	CHECK_EQ_U64(atomic_load(&s->tail), 3);

	/* a slot state written by someone without the lock: reset by the sweep, never attached */
	atomic_store(&tdb_subring_slot(e.r.base, 64, 1)->state, TDB_SUBSLOT_ACTIVE);
	CHECK_EQ_U64(sweep(&e, ch, 8), 0);
	CHECK_EQ_U64(atomic_load(&tdb_subring_slot(e.r.base, 64, 1)->state), TDB_SUBSLOT_FREE);
	atomic_store(&tdb_subring_slot(e.r.base, 64, 1)->state, 12345);
	CHECK_EQ_U64(sweep(&e, ch, 8), 0);
	CHECK_EQ_U64(atomic_load(&tdb_subring_slot(e.r.base, 64, 1)->state), TDB_SUBSLOT_FREE);
done:
	senv_close(&e);
}

/* ---- threads (ThreadSanitizer): consumers borrow the producer's mapping ---------- */

typedef struct Member
{
	SubEnv	   *e;
	uint64_t	want;			/* spsc / overrun: events to get */
	uint64_t	group;
	_Atomic int ready;			/* subscribed: slot + 1 */
	_Atomic int *stop;
	_Atomic uint8_t *seen;		/* group: per id */
	uint64_t	got;
	uint64_t	bad;
	uint64_t	dropped;		/* overrun: sum of the OVERRUN counts */
	uint64_t	overruns;
	uint64_t	sessions;
	uint64_t	seed;
} Member;

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

/*
 * A group of three: each member subscribes, takes a random number of events,
 * leaves (its undelivered events are handed over), joins again; every event
 * is seen exactly once across the group.
 */
static void *
group_member(void *arg)
{
	Member	   *m = arg;
	TdbSubEvent buf[32];
	char		err[TDB_SHM_ERRLEN];
	int64_t		deadline = tdb_mono_us() + 60 * INT64_C(1000000);

	while (!atomic_load(m->stop) && tdb_mono_us() < deadline)
	{
		TdbSubConsumer c;
		uint64_t	quota = 50 + unit_rand(&m->seed) % 400;
		uint64_t	taken = 0;
		int			rc = tdb_subring_consumer_open(&c, m->e->prefix, INSTANCE, m->e->r.base, err);

		if (rc == TDB_SHM_OK)
			rc = tdb_subring_subscribe(&c, NULL, 0, m->group, TDB_SUBGROUP_ROUND_ROBIN);
		if (rc == TDB_SHM_ENOSLOT)
		{
			tdb_subring_consumer_close(&c);
			sleep_us(500);
			continue;
		}
		if (rc != TDB_SHM_OK)
		{
			m->bad++;
			tdb_subring_consumer_close(&c);
			break;
		}
		m->sessions++;
		atomic_store(&m->ready, c.slot_idx + 1);
		while (taken < quota && !atomic_load(m->stop) && tdb_mono_us() < deadline)
		{
			int			n = tdb_subring_receive(&c, buf, 1 + (uint32_t) (unit_rand(&m->seed) % 32), 50);

			if (n < 0)
			{
				m->bad++;
				break;
			}
			for (int k = 0; k < n; k++)
			{
				if (buf[k].kind != TDB_SUBEV_CHANGE)
					m->bad++;
				else
					atomic_fetch_add(&m->seen[buf[k].location_id], 1);
			}
			taken += (uint64_t) n;
			m->got += (uint64_t) n;
		}
		tdb_subring_consumer_close(&c);
	}
	return NULL;
}

/* The test's daemon for a group: members, handed-over events, round robin. */
typedef struct GroupDaemon
{
	SubEnv	   *e;
	bool		live[16];
	uint32_t	rr;
	TdbSubEvent *pending;		/* handed-over events waiting for a member with room */
	uint32_t	npending;
	uint32_t	cap;
	uint64_t	handed_over;
	uint64_t	reclaims;
	uint64_t	overflow;
	/* kill test: incarnations */
	int			owner[16];		/* slot -> incarnation */
	pid_t	   *inc_pid;
	int			ninc;
	int64_t    *final_tail;		/* per incarnation, -1 until reclaimed */
} GroupDaemon;

/* Push ev to the next live member with room; false when none has. */
static bool
group_push(GroupDaemon *g, const TdbSubEvent *ev)
{
	uint32_t	nslots = g->e->r.nslots;

	for (uint32_t k = 0; k < nslots; k++)
	{
		uint32_t	slot = (g->rr + k) % nslots;

		if (!g->live[slot] || tdb_subring_space(&g->e->r, slot) == 0)
			continue;
		CHECK_EQ_U64(tdb_subring_push(&g->e->r, slot, ev), TDB_SUBRING_PUSHED);
		g->rr = slot + 1;
		return true;
	}
	return false;
}

static void
group_service(GroupDaemon *g)
{
	TdbSubChange ch[16];
	uint32_t	n = 0;

	CHECK_EQ_U64(tdb_subring_sweep(&g->e->r, ch, 16, &n), TDB_SHM_OK);
	for (uint32_t i = 0; i < n; i++)
	{
		if (ch[i].kind == TDB_SUBCHANGE_ATTACHED)
		{
			CHECK_EQ_U64(ch[i].group_id, GROUP);
			g->live[ch[i].slot] = true;
			g->owner[ch[i].slot] = -1;
			for (int k = 0; k < g->ninc; k++)
				if (g->inc_pid != NULL && g->inc_pid[k] == ch[i].pid)
					g->owner[ch[i].slot] = k;
			continue;
		}
		g->live[ch[i].slot] = false;
		g->reclaims++;
		CHECK(!ch[i].tail_damaged);
		CHECK_EQ_U64(ch[i].overrun_dropped, 0);
		if (g->final_tail != NULL && g->owner[ch[i].slot] >= 0)
			g->final_tail[g->owner[ch[i].slot]] = (int64_t) ch[i].tail;
		for (int rounds = 0; rounds < 1000; rounds++)
		{
			uint32_t	room = g->cap - g->npending;
			uint32_t	got = tdb_subring_take_undelivered(&g->e->r, ch[i].slot, g->pending + g->npending,
														   room < 64 ? room : 64);

			g->npending += got;
			g->handed_over += got;
			if (got == 0)
				break;
		}
		if (g->npending == g->cap)
			g->overflow++;
	}
	/* handed-over events first, in order */
	{
		uint32_t	done = 0;

		while (done < g->npending && group_push(g, &g->pending[done]))
			done++;
		memmove(g->pending, g->pending + done, (g->npending - done) * sizeof(TdbSubEvent));
		g->npending -= done;
	}
}

UNIT_TEST(test_subring_threads_group_handover)
{
	SubEnv		e;
	Member		m[3];
	pthread_t	t[3];
	_Atomic int stop = 0;
	uint64_t	want = 6000;
	uint64_t	next = 1;
	_Atomic uint8_t *seen = calloc(want + 1, 1);
	GroupDaemon g;
	int64_t		deadline = tdb_mono_us() + 60 * INT64_C(1000000);
	uint64_t	once = 0;
	uint64_t	sessions = 0;

	memset(&g, 0, sizeof(g));
	g.cap = 4096;
	g.pending = calloc(g.cap, sizeof(TdbSubEvent));
	if (seen == NULL || g.pending == NULL || !senv_open(&e, 4, 128))
	{
		free(seen);
		free(g.pending);
		return;
	}
	g.e = &e;
	for (int i = 0; i < 3; i++)
	{
		memset(&m[i], 0, sizeof(m[i]));
		m[i].e = &e;
		m[i].group = GROUP;
		m[i].stop = &stop;
		m[i].seen = seen;
		m[i].seed = 100 + (uint64_t) i;
		pthread_create(&t[i], NULL, group_member, &m[i]);
	}
	while (tdb_mono_us() < deadline)
	{
		bool		drained = true;

		group_service(&g);
		for (int k = 0; k < 16 && next <= want && g.npending == 0; k++)
		{
			TdbSubEvent ev = mkev(next, next / 16 + 1);

			if (!group_push(&g, &ev))
				break;
			next++;
		}
		tdb_subring_wake_pending(&e.r);
		for (uint32_t s = 0; s < e.r.nslots; s++)
			if (g.live[s] && tdb_subring_space(&e.r, s) != e.r.ring_events)
				drained = false;
		if (next > want && g.npending == 0 && drained)
			break;
		sched_yield();
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 3; i++)
	{
		pthread_join(t[i], NULL);
		CHECK_EQ_U64(m[i].bad, 0);
		sessions += m[i].sessions;
	}
	CHECK_EQ_U64(next, want + 1);
	CHECK_EQ_U64(g.overflow, 0);
	for (uint64_t id = 1; id <= want; id++)
		once += atomic_load(&seen[id]) == 1;
	CHECK_EQ_U64(once, want);
	CHECK_EQ_U64(m[0].got + m[1].got + m[2].got, want);
	printf("# %llu events across %llu sessions, %llu reclaims, %llu handed over\n", (unsigned long long) want,
		   (unsigned long long) sessions, (unsigned long long) g.reclaims, (unsigned long long) g.handed_over);
	senv_close(&e);
	free(seen);
	free(g.pending);
}

/* ---- kill -9 of group members (processes) ---------------------------------------- */

#define KILL_ROUNDS		60
#define KILL_MAX_EVENTS 60000
#define KILL_MAX_INC	(3 + KILL_ROUNDS + 3)

typedef struct IncLog
{
	_Atomic uint64_t count;
	struct
	{
		uint64_t	pos;
		uint64_t	id;
	}			e[KILL_MAX_EVENTS];
} IncLog;

/*
 * A member process: each batch peeked is logged (position, id) before its
 * tail store, so an entry below the final tail is exactly a delivered event.
 */
static void
kill_member(const char *prefix, IncLog *log)
{
	TdbSubConsumer c;
	TdbSubEvent buf[16];
	char		err[TDB_SHM_ERRLEN];
	int			rc = TDB_SHM_ENOSLOT;
	int64_t		deadline = tdb_mono_us() + 60 * INT64_C(1000000);
	uint64_t	seed = (uint64_t) getpid();

	if (tdb_subring_consumer_open(&c, prefix, INSTANCE, NULL, err) != TDB_SHM_OK)
		_exit(2);
	for (int i = 0; i < 5000 && rc == TDB_SHM_ENOSLOT; i++)
	{
		rc = tdb_subring_subscribe(&c, NULL, 0, GROUP, TDB_SUBGROUP_ROUND_ROBIN);
		if (rc == TDB_SHM_ENOSLOT)
			sleep_us(200);
	}
	if (rc != TDB_SHM_OK)
		_exit(3);
	while (tdb_mono_us() < deadline)
	{
		int			n = tdb_subring_wait(&c, 100);

		if (n < 0 && n != TDB_SUBRING_EINTR)
			_exit(4);
		n = tdb_subring_peek(&c, buf, 16);
		if (n < 0)
			_exit(5);
		for (int k = 0; k < n; k++)
		{
			uint64_t	i = atomic_load(&log->count);

			if (buf[k].kind != TDB_SUBEV_CHANGE || i >= KILL_MAX_EVENTS)
				_exit(6);
			log->e[i].pos = buf[k].seq - 1;
			log->e[i].id = buf[k].location_id;
			atomic_store_explicit(&log->count, i + 1, memory_order_release);
		}
		/*
		 * A slow member, with a backlog for the kill to leave behind;
		 * half the time it is slow between its log and its tail store,
		 * where a kill leaves events it saw and never consumed.
		 */
		if (n > 0 && unit_rand(&seed) % 2 == 0)
			sleep_us((long) (unit_rand(&seed) % 1500));
		if (n > 0 && tdb_subring_consume(&c, (uint32_t) n) != TDB_SHM_OK)
			_exit(7);
		sleep_us((long) (unit_rand(&seed) % 1500));
	}
	_exit(0);
}

UNIT_TEST(test_subring_kill9_group)
{
	SubEnv		e;
	GroupDaemon g;
	IncLog	   *logs;
	size_t		logs_size = sizeof(IncLog) * KILL_MAX_INC;
	pid_t		inc_pid[KILL_MAX_INC];
	int64_t		final_tail[KILL_MAX_INC];
	int			child_inc[3];
	uint8_t    *count;
	uint64_t	next = 1;
	uint64_t	seed = 0xC0FFEEull;
	int			kills = 0;
	int64_t		deadline = tdb_mono_us() + 120 * INT64_C(1000000);
	uint64_t	delivered = 0;
	uint64_t	peeked_not_consumed = 0;
	uint64_t	once = 0;

	logs = mmap(NULL, logs_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	count = calloc(KILL_MAX_EVENTS + 1, 1);
	memset(&g, 0, sizeof(g));
	g.cap = 8192;
	g.pending = calloc(g.cap, sizeof(TdbSubEvent));
	CHECK(logs != MAP_FAILED && count != NULL && g.pending != NULL);
	if (logs == MAP_FAILED || count == NULL || g.pending == NULL || !senv_open(&e, 4, 256))
		goto out;
	g.e = &e;
	g.inc_pid = inc_pid;
	g.final_tail = final_tail;
	for (int k = 0; k < KILL_MAX_INC; k++)
		final_tail[k] = -1;

	for (int i = 0; i < 3; i++)
	{
		int			k = g.ninc++;

		fflush(stdout);
		inc_pid[k] = fork();
		if (inc_pid[k] == 0)
			kill_member(e.prefix, &logs[k]);
		child_inc[i] = k;
	}
	while (tdb_mono_us() < deadline)
	{
		int64_t		cycle_end = tdb_mono_us() + 3000 + (int64_t) (unit_rand(&seed) % 12000);
		int			victim;
		int			status;

		/* push for 3 .. 15 ms */
		while (tdb_mono_us() < cycle_end)
		{
			group_service(&g);
			for (int k = 0; k < 16 && next <= KILL_MAX_EVENTS && g.npending == 0 && kills < KILL_ROUNDS; k++)
			{
				TdbSubEvent ev = mkev(next, next / 16 + 1);

				if (!group_push(&g, &ev))
					break;
				next++;
			}
			tdb_subring_wake_pending(&e.r);
			sleep_us(200);
		}
		if (kills >= KILL_ROUNDS)
			break;
		victim = (int) (unit_rand(&seed) % 3);
		kill(inc_pid[child_inc[victim]], SIGKILL);
		waitpid(inc_pid[child_inc[victim]], &status, 0);
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		kills++;
		child_inc[victim] = g.ninc++;
		fflush(stdout);
		inc_pid[child_inc[victim]] = fork();
		if (inc_pid[child_inc[victim]] == 0)
			kill_member(e.prefix, &logs[child_inc[victim]]);
	}
	/* no new events: hand over and deliver what is left, then the survivors go too */
	for (int i = 0; i < 20000 && tdb_mono_us() < deadline; i++)
	{
		bool		drained = g.npending == 0;

		group_service(&g);
		tdb_subring_wake_pending(&e.r);
		for (uint32_t s = 0; s < e.r.nslots; s++)
			if (g.live[s] && tdb_subring_space(&e.r, s) != e.r.ring_events)
				drained = false;
		if (drained)
			break;
		sleep_us(500);
	}
	for (int i = 0; i < 3; i++)
	{
		int			status;

		kill(inc_pid[child_inc[i]], SIGKILL);
		waitpid(inc_pid[child_inc[i]], &status, 0);
		kills++;
	}
	for (int i = 0; i < 100; i++)
	{
		bool		any = false;

		group_service(&g);
		for (uint32_t s = 0; s < e.r.nslots; s++)
			any |= g.live[s];
		if (!any)
			break;
		sleep_us(1000);
	}
	CHECK_EQ_U64(g.npending, 0);
	CHECK_EQ_U64(g.overflow, 0);

	/* delivered = logged below the incarnation's final tail; every event exactly once */
	for (int k = 0; k < g.ninc; k++)
	{
		uint64_t	n = atomic_load(&logs[k].count);

		if (final_tail[k] < 0)
		{
			CHECK_EQ_U64(n, 0);	/* never attached: never got anything */
			continue;
		}
		for (uint64_t i = 0; i < n; i++)
			if (logs[k].e[i].pos < (uint64_t) final_tail[k])
			{
				CHECK(logs[k].e[i].id >= 1 && logs[k].e[i].id < next);
				if (logs[k].e[i].id >= 1 && logs[k].e[i].id < next)
					count[logs[k].e[i].id]++;
				delivered++;
			}
			else
				peeked_not_consumed++;	/* killed between its log and its tail store: handed over */
	}
	for (uint64_t id = 1; id < next; id++)
		once += count[id] == 1;
	CHECK(kills >= 50);
	CHECK(next > 1000);
	CHECK_EQ_U64(delivered, next - 1);
	CHECK_EQ_U64(once, next - 1);
	printf("# %d members killed with SIGKILL, %llu events, %llu handed over in %llu reclaims (%llu of them peeked by the dead, not consumed), each delivered once\n",
		   kills, (unsigned long long) (next - 1), (unsigned long long) g.handed_over,
		   (unsigned long long) g.reclaims, (unsigned long long) peeked_not_consumed);
	senv_close(&e);
out:
	if (logs != MAP_FAILED)
		munmap(logs, logs_size);
	free(count);
	free(g.pending);
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

/* ---- request-response (subreq.c) --------------------------------------------------- */

#define REQ_GROUP	9u

typedef struct Server
{
	SubEnv	   *e;
	int			id;				/* put in each answer */
	int			work_us;		/* per request */
	int			die_after;		/* > 0: take that many-th request and leave without answering */
	_Atomic int *stop;
	_Atomic int ready;
	uint64_t	answered;
	uint64_t	gone;
	uint64_t	bad;
} Server;

/* The answer to a request: "<server id>:" then the request's bytes reversed. */
static uint32_t
make_answer(int id, const unsigned char *req, uint32_t len, unsigned char *out)
{
	int			n = snprintf((char *) out, 16, "%d:", id);

	for (uint32_t i = 0; i < len; i++)
		out[n + i] = req[len - 1 - i];
	return (uint32_t) n + len;
}

static void *
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

static bool
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

typedef struct Requester
{
	SubEnv	   *e;
	int			count;
	uint64_t	seed;
	uint64_t	ok;
	uint64_t	bad;
	uint64_t	by_server[8];
} Requester;

/* count calls of random bytes; each answer must be the request reversed, from one server */
static void *
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
static uint32_t
cells_in_use(SubEnv *e)
{
	void	   *area = (char *) e->r.base + tdb_subreq_offset(e->r.nslots, e->r.ring_events);
	uint32_t	n = 0;

	for (uint32_t i = 0; i < tdb_subreq_cells(e->r.nslots); i++)
		n += TDB_SUBREQ_STATE(atomic_load(&tdb_subreq_cell(area, e->r.nslots, i)->word)) != TDB_SUBREQ_FREE;
	return n;
}

UNIT_TEST(test_subreq_threads_load_sharing)
{
	SubEnv		e;
	Server		sv[3];
	pthread_t	st[3],
				rt[2];
	Requester	rq[2];
	_Atomic int stop = 0;
	int			serving = 0;

	if (!senv_open(&e, 8, 64))
		return;
	CHECK(start_servers(sv, st, 3, &e, &stop, 300));
	for (int i = 0; i < 2; i++)
	{
		memset(&rq[i], 0, sizeof(rq[i]));
		rq[i].e = &e;
		rq[i].count = 400;
		rq[i].seed = 77 + (uint64_t) i;
		pthread_create(&rt[i], NULL, requester_main, &rq[i]);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(rt[i], NULL);
	atomic_store(&stop, 1);
	for (int i = 0; i < 3; i++)
	{
		pthread_join(st[i], NULL);
		CHECK_EQ_U64(sv[i].bad, 0);
		CHECK_EQ_U64(sv[i].gone, 0);
		serving += sv[i].answered > 0;
	}
	CHECK_EQ_U64(rq[0].bad + rq[1].bad, 0);
	CHECK_EQ_U64(rq[0].ok + rq[1].ok, 800);
	CHECK_EQ_U64(sv[0].answered + sv[1].answered + sv[2].answered, 800);
	for (int s = 1; s <= 3; s++)
		CHECK_EQ_U64(rq[0].by_server[s] + rq[1].by_server[s], sv[s - 1].answered);
	/* two requesters at once, 300 µs a request: one server cannot have taken them all */
	CHECK(serving >= 2);
	CHECK_EQ_U64(cells_in_use(&e), 0);
	printf("# answered by server: %llu %llu %llu\n", (unsigned long long) sv[0].answered,
		   (unsigned long long) sv[1].answered, (unsigned long long) sv[2].answered);
	senv_close(&e);
}

/* A member that leaves with a request taken: the requester posts it again, another answers. */
UNIT_TEST(test_subreq_member_leaves_with_request)
{
	SubEnv		e;
	Server		sv[2];
	pthread_t	st[2],
				rt;
	Requester	rq;
	_Atomic int stop = 0;

	if (!senv_open(&e, 8, 64))
		return;
	memset(sv, 0, sizeof(sv));
	/* server 1 takes one request and leaves; server 2 starts after, so 1 takes the first */
	sv[0].e = &e;
	sv[0].id = 1;
	sv[0].die_after = 1;
	sv[0].stop = &stop;
	pthread_create(&st[0], NULL, server_main, &sv[0]);
	for (int k = 0; k < 5000 && atomic_load(&sv[0].ready) == 0; k++)
		sleep_us(1000);
	memset(&rq, 0, sizeof(rq));
	rq.e = &e;
	rq.count = 20;
	rq.seed = 5;
	pthread_create(&rt, NULL, requester_main, &rq);
	pthread_join(st[0], NULL);	/* it took the first and left */
	sv[1].e = &e;
	sv[1].id = 2;
	sv[1].stop = &stop;
	pthread_create(&st[1], NULL, server_main, &sv[1]);
	pthread_join(rt, NULL);
	atomic_store(&stop, 1);
	pthread_join(st[1], NULL);
	CHECK_EQ_U64(rq.bad, 0);
	CHECK_EQ_U64(rq.ok, 20);
	CHECK_EQ_U64(rq.by_server[1], 0);
	CHECK_EQ_U64(rq.by_server[2], 20);
	CHECK_EQ_U64(sv[0].answered, 0);
	CHECK_EQ_U64(cells_in_use(&e), 0);
	senv_close(&e);
}

/* Timeouts withdraw; a late answer is dropped (EGONE) and the cell freed; errors name the value. */
UNIT_TEST(test_subreq_timeout_and_errors)
{
	SubEnv		e;
	TdbSubConsumer rq,
				m;
	char		err[TDB_SHM_ERRLEN];
	unsigned char buf[TDB_SUBREQ_MAX_BYTES + 1];
	TdbSubReqTaken t;

	if (!senv_open(&e, 4, 64))
		return;
	memset(buf, 'x', sizeof(buf));
	CHECK_EQ_U64(tdb_subring_consumer_open(&rq, e.prefix, INSTANCE, NULL, err), TDB_SHM_OK);
	CHECK_EQ_U64(tdb_subring_subscribe(&rq, NULL, 0, 0, 0), TDB_SHM_OK);
	/* nobody in the group */
	CHECK_EQ_U64(tdb_subreq_call(&rq, REQ_GROUP, "a", 1, buf, sizeof(buf), 100), (uint64_t) TDB_SUBREQ_ENOMEMBER);
	CHECK(strstr(rq.err, "has no member") != NULL);
	CHECK_EQ_U64(tdb_subring_consumer_open(&m, e.prefix, INSTANCE, NULL, err), TDB_SHM_OK);
	CHECK_EQ_U64(tdb_subring_subscribe(&m, NULL, 0, REQ_GROUP, TDB_SUBGROUP_ROUND_ROBIN), TDB_SHM_OK);
	/* a lone member asking its own group: nobody else to answer */
	CHECK_EQ_U64(tdb_subreq_call(&m, REQ_GROUP, "a", 1, buf, sizeof(buf), 100), (uint64_t) TDB_SUBREQ_ENOMEMBER);
	/* bad arguments */
	CHECK_EQ_U64(tdb_subreq_call(&rq, REQ_GROUP, buf, TDB_SUBREQ_MAX_BYTES + 1, buf, sizeof(buf), 100),
				 (uint64_t) TDB_SHM_EINVAL);
	CHECK(strstr(rq.err, "4097 bytes") != NULL);
	CHECK_EQ_U64(tdb_subreq_call(&rq, 0, "a", 1, buf, sizeof(buf), 100), (uint64_t) TDB_SHM_EINVAL);
	CHECK_EQ_U64(tdb_subreq_call(&rq, REQ_GROUP, "a", 1, buf, sizeof(buf), -1), (uint64_t) TDB_SHM_EINVAL);
	CHECK_EQ_U64(tdb_subreq_take(&rq, &t, buf, 10), (uint64_t) TDB_SHM_EINVAL);	/* not in a group */
	CHECK(strstr(rq.err, "member of a group") != NULL);
	/* posted, never taken: withdrawn at the timeout, the cell FREE */
	CHECK_EQ_U64(tdb_subreq_call(&rq, REQ_GROUP, "abc", 3, buf, sizeof(buf), 60), (uint64_t) TDB_SUBREQ_ETIMEDOUT);
	CHECK(strstr(rq.err, "within 60 ms") != NULL);
	CHECK_EQ_U64(cells_in_use(&e), 0);
	/* the member finds nothing (the withdrawn request is gone) */
	CHECK_EQ_U64(tdb_subreq_take(&m, &t, buf, 0), 0);
	CHECK_EQ_U64(tdb_subreq_answer(&m, NULL, "x", 1), (uint64_t) TDB_SHM_EINVAL);
	/* a member that never answers: the requester times out, the late answer is dropped, the cell freed */
	{
		pid_t		pid = fork();

		if (pid == 0)
		{
			TdbSubConsumer r2;
			unsigned char b2[64];
			int			rc;

			if (tdb_subring_consumer_open(&r2, e.prefix, INSTANCE, NULL, err) != TDB_SHM_OK ||
				tdb_subring_subscribe(&r2, NULL, 0, 0, 0) != TDB_SHM_OK)
				_exit(2);
			rc = tdb_subreq_call(&r2, REQ_GROUP, "late", 4, b2, sizeof(b2), 300);
			_exit(rc == TDB_SUBREQ_ETIMEDOUT ? 0 : 1);
		}
		else
		{
			int			status = -1;

			CHECK_EQ_U64(tdb_subreq_take(&m, &t, buf, 5000), 1);
			CHECK_EQ_U64(t.len, 4);
			CHECK(memcmp(buf, "late", 4) == 0);
			CHECK_EQ_U64(t.requester_pid, pid);
			waitpid(pid, &status, 0);
			CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
			CHECK_EQ_U64(tdb_subreq_answer(&m, &t, "tooLate", 7), (uint64_t) TDB_SUBREQ_EGONE);
			CHECK_EQ_U64(cells_in_use(&e), 0);
			/* the dead requester's slot: the producer takes it back */
			{
				TdbSubChange ch[8];

				(void) sweep(&e, ch, 8);
			}
		}
	}
	/* an answer larger than the requester's buffer: EINVAL, the cell freed */
	{
		pid_t		pid = fork();

		if (pid == 0)
		{
			TdbSubConsumer m2;
			TdbSubReqTaken t2;
			unsigned char b2[TDB_SUBREQ_MAX_BYTES];

			if (tdb_subring_consumer_open(&m2, e.prefix, INSTANCE, NULL, err) != TDB_SHM_OK ||
				tdb_subring_subscribe(&m2, NULL, 0, REQ_GROUP + 1, TDB_SUBGROUP_ROUND_ROBIN) != TDB_SHM_OK ||
				tdb_subreq_take(&m2, &t2, b2, 5000) != 1)
				_exit(2);
			memset(b2, 'y', 100);
			_exit(tdb_subreq_answer(&m2, &t2, b2, 100) == TDB_SHM_OK ? 0 : 1);
		}
		else
		{
			int			status = -1;
			unsigned char small[10];
			int			rc = TDB_SUBREQ_ENOMEMBER;

			/* until the child has subscribed */
			for (int k = 0; k < 5000 && rc == TDB_SUBREQ_ENOMEMBER; k++)
			{
				rc = tdb_subreq_call(&rq, REQ_GROUP + 1, "q", 1, small, sizeof(small), 5000);
				if (rc == TDB_SUBREQ_ENOMEMBER)
					sleep_us(1000);
			}
			CHECK_EQ_U64(rc, (uint64_t) TDB_SHM_EINVAL);
			CHECK(strstr(rq.err, "100 bytes does not fit the 10 bytes") != NULL);
			waitpid(pid, &status, 0);
			CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
			CHECK_EQ_U64(cells_in_use(&e), 0);
		}
	}
	tdb_subring_consumer_close(&m);
	tdb_subring_consumer_close(&rq);
	senv_close(&e);
}

/* The producer's sweep over a killed requester: a request taken is ORPHANED (the late answer dropped), one posted FREE. */
UNIT_TEST(test_subreq_requester_killed)
{
	SubEnv		e;
	TdbSubConsumer m;
	char		err[TDB_SHM_ERRLEN];
	unsigned char buf[TDB_SUBREQ_MAX_BYTES];
	TdbSubReqTaken t;

	if (!senv_open(&e, 4, 64))
		return;
	CHECK_EQ_U64(tdb_subring_consumer_open(&m, e.prefix, INSTANCE, NULL, err), TDB_SHM_OK);
	CHECK_EQ_U64(tdb_subring_subscribe(&m, NULL, 0, REQ_GROUP, TDB_SUBGROUP_ROUND_ROBIN), TDB_SHM_OK);
	for (int taken = 1; taken >= 0; taken--)
	{
		pid_t		pid = fork();
		int			status;

		if (pid == 0)
		{
			TdbSubConsumer r2;
			unsigned char b2[64];

			if (tdb_subring_consumer_open(&r2, e.prefix, INSTANCE, NULL, err) != TDB_SHM_OK ||
				tdb_subring_subscribe(&r2, NULL, 0, 0, 0) != TDB_SHM_OK)
				_exit(2);
			(void) tdb_subreq_call(&r2, REQ_GROUP, "doomed", 6, b2, sizeof(b2), 30000);
			_exit(3);
		}
		for (int k = 0; k < 5000 && cells_in_use(&e) == 0; k++)
			sleep_us(1000);
		CHECK_EQ_U64(cells_in_use(&e), 1);
		if (taken)
			CHECK_EQ_U64(tdb_subreq_take(&m, &t, buf, 5000), 1);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		{
			TdbSubChange ch[8];
			uint64_t	before = e.r.requests_reclaimed;

			(void) sweep(&e, ch, 8);
			CHECK_EQ_U64(e.r.requests_reclaimed - before, 1);
		}
		if (taken)
		{
			CHECK_EQ_U64(cells_in_use(&e), 1); /* ORPHANED: the member frees it */
			CHECK_EQ_U64(tdb_subreq_answer(&m, &t, "x", 1), (uint64_t) TDB_SUBREQ_EGONE);
		}
		CHECK_EQ_U64(cells_in_use(&e), 0);
		CHECK_EQ_U64(tdb_subreq_take(&m, &t, buf, 0), 0);
	}
	tdb_subring_consumer_close(&m);
	senv_close(&e);
}

/* ---- kill -9 of members holding requests (processes) ----------------------------- */

#define REQ_KILLS	10

typedef struct Sweeper
{
	SubEnv	   *e;
	pid_t		bad[REQ_KILLS];
	int			release_fd;		/* one byte: the good member may start */
	_Atomic int stop;
	int			killed;
} Sweeper;

/* The daemon's part: sweep; count the members killed; let the good one in once all are dead. */
static void *
sweeper_main(void *arg)
{
	Sweeper    *sw = arg;
	int64_t		deadline = tdb_mono_us() + 60 * INT64_C(1000000);

	while (!atomic_load(&sw->stop) && tdb_mono_us() < deadline)
	{
		TdbSubChange ch[16];
		uint32_t	n = 0;

		if (tdb_subring_sweep(&sw->e->r, ch, 16, &n) == TDB_SHM_OK)
			for (uint32_t i = 0; i < n; i++)
				if (ch[i].kind == TDB_SUBCHANGE_RECLAIMED)
					tdb_subring_discard(&sw->e->r, ch[i].slot);
		for (int i = 0; i < REQ_KILLS; i++)
		{
			int			status;

			if (sw->bad[i] > 0 && waitpid(sw->bad[i], &status, WNOHANG) == sw->bad[i])
			{
				sw->bad[i] = 0;
				if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
					sw->killed++;
				if (sw->killed == REQ_KILLS && write(sw->release_fd, "g", 1) != 1)
					break;
			}
		}
		sleep_us(2000);
	}
	return NULL;
}

/* A member process: take one request, then SIGKILL itself before answering. */
static void
doomed_member(SubEnv *e, int ready_fd)
{
	TdbSubConsumer c;
	char		err[TDB_SHM_ERRLEN];
	unsigned char buf[TDB_SUBREQ_MAX_BYTES];
	TdbSubReqTaken t;

	if (tdb_subring_consumer_open(&c, e->prefix, INSTANCE, NULL, err) != TDB_SHM_OK ||
		tdb_subring_subscribe(&c, NULL, 0, REQ_GROUP, TDB_SUBGROUP_ROUND_ROBIN) != TDB_SHM_OK)
		_exit(2);
	if (write(ready_fd, "r", 1) != 1)
		_exit(2);
	if (tdb_subreq_take(&c, &t, buf, 60000) == 1)
		raise(SIGKILL);
	_exit(4);
}

/* The good member process: waits for the release, then answers everything. */
static void
good_member(SubEnv *e, int release_fd)
{
	TdbSubConsumer c;
	char		err[TDB_SHM_ERRLEN];
	unsigned char buf[TDB_SUBREQ_MAX_BYTES];
	unsigned char ans[TDB_SUBREQ_MAX_BYTES + 16];
	char		b;

	if (read(release_fd, &b, 1) != 1)
		_exit(2);
	if (tdb_subring_consumer_open(&c, e->prefix, INSTANCE, NULL, err) != TDB_SHM_OK ||
		tdb_subring_subscribe(&c, NULL, 0, REQ_GROUP, TDB_SUBGROUP_ROUND_ROBIN) != TDB_SHM_OK)
		_exit(2);
	for (;;)
	{
		TdbSubReqTaken t;
		int			rc = tdb_subreq_take(&c, &t, buf, 60000);

		if (rc != 1)
			_exit(rc == 0 ? 0 : 5);
		(void) tdb_subreq_answer(&c, &t, ans, make_answer(1, buf, t.len, ans));
	}
}

UNIT_TEST(test_subreq_kill9_members)
{
	SubEnv		e;
	Sweeper		sw;
	int			ready[2],
				release[2];
	pid_t		good;
	pthread_t	th;
	Requester	rq;

	if (!senv_open(&e, 16, 64) || pipe(ready) != 0 || pipe(release) != 0)
		return;
	memset(&sw, 0, sizeof(sw));
	sw.e = &e;
	sw.release_fd = release[1];
	good = fork();
	if (good == 0)
		good_member(&e, release[0]);
	for (int i = 0; i < REQ_KILLS; i++)
	{
		sw.bad[i] = fork();
		if (sw.bad[i] == 0)
			doomed_member(&e, ready[1]);
	}
	for (int i = 0; i < REQ_KILLS; i++)
	{
		char		b;

		if (read(ready[0], &b, 1) != 1)
			break;
	}
	pthread_create(&th, NULL, sweeper_main, &sw);
	/* the first request goes from doomed member to doomed member, then to the good one */
	memset(&rq, 0, sizeof(rq));
	rq.e = &e;
	rq.count = 30;
	rq.seed = 11;
	requester_main(&rq);
	atomic_store(&sw.stop, 1);
	pthread_join(th, NULL);
	kill(good, SIGKILL);
	waitpid(good, NULL, 0);
	for (int i = 0; i < REQ_KILLS; i++)
		if (sw.bad[i] > 0)
		{
			kill(sw.bad[i], SIGKILL);
			waitpid(sw.bad[i], NULL, 0);
		}
	CHECK_EQ_U64(sw.killed, REQ_KILLS);
	CHECK_EQ_U64(rq.bad, 0);
	CHECK_EQ_U64(rq.ok, 30);
	CHECK_EQ_U64(rq.by_server[1], 30);
	printf("# %d members killed holding a request; the daemon's sweep put back %llu\n", sw.killed,
		   (unsigned long long) e.r.requests_reclaimed);
	close(ready[0]);
	close(ready[1]);
	close(release[0]);
	close(release[1]);
	senv_close(&e);
}

/* ---- review of issue 18: lost wake-ups, a hostile writer ------------------------- */

typedef struct OneShot
{
	SubEnv	   *e;
	_Atomic int subscribed;		/* 1 once subscribed */
	_Atomic int go;				/* 1: take now */
	int			rc;				/* take's result */
	int64_t		took_us;		/* when it returned */
} OneShot;

/* A live member (borrowed mapping): subscribe, wait for go, take one request (5 s), answer it. */
static void *
oneshot_member(void *arg)
{
	OneShot    *o = arg;
	TdbSubConsumer c;
	char		err[TDB_SHM_ERRLEN];
	static _Thread_local unsigned char buf[TDB_SUBREQ_MAX_BYTES];
	TdbSubReqTaken t;

	if (tdb_subring_consumer_open(&c, o->e->prefix, INSTANCE, o->e->r.base, err) != TDB_SHM_OK ||
		tdb_subring_subscribe(&c, NULL, 0, REQ_GROUP, TDB_SUBGROUP_ROUND_ROBIN) != TDB_SHM_OK)
	{
		o->rc = -1000;
		atomic_store(&o->subscribed, -1);
		return NULL;
	}
	atomic_store(&o->subscribed, 1);
	while (!atomic_load(&o->go))
		sleep_us(200);
	o->rc = tdb_subreq_take(&c, &t, buf, 5000);
	o->took_us = tdb_mono_us();
	if (o->rc == 1)
		(void) tdb_subreq_answer(&c, &t, "live", 4);
	tdb_subring_consumer_close(&c);
	return NULL;
}

static TdbSubBell *
test_bell(SubEnv *e, uint32_t slot)
{
	return tdb_subreq_bell((char *) e->r.base + tdb_subreq_offset(e->r.nslots, e->r.ring_events), slot);
}

/*
 * A member killed (kill -9) while it waited for a request leaves its bell
 * saying "waiting, group g".  The next request whose wake starts at that
 * bell must still wake a live idle member at once: not leave it asleep
 * until its next poll (up to a second), which times the request out.
 * (The same flag is lost when the member it belongs to is alive but about
 * to return with another request it found in its scan.)
 */
UNIT_TEST(test_subreq_dead_member_bell_no_lost_wakeup)
{
	SubEnv		e;
	TdbSubConsumer rq;
	char		err[TDB_SHM_ERRLEN];
	unsigned char ans[64];
	OneShot		o;
	pthread_t	th;
	pid_t		dead;
	int			status,
				rc;
	int64_t		t0;

	if (!senv_open(&e, 4, 64))
		return;
	/* slot 0: the requester; slot 1: the member to be killed; slot 2: the live member */
	CHECK_EQ_U64(tdb_subring_consumer_open(&rq, e.prefix, INSTANCE, NULL, err), TDB_SHM_OK);
	CHECK_EQ_U64(tdb_subring_subscribe(&rq, NULL, 0, 0, 0), TDB_SHM_OK);
	CHECK_EQ_U64(rq.slot_idx, 0);
	dead = fork();
	if (dead == 0)
	{
		TdbSubConsumer m;
		TdbSubReqTaken t;
		unsigned char b[TDB_SUBREQ_MAX_BYTES];

		if (tdb_subring_consumer_open(&m, e.prefix, INSTANCE, NULL, err) != TDB_SHM_OK ||
			tdb_subring_subscribe(&m, NULL, 0, REQ_GROUP, TDB_SUBGROUP_ROUND_ROBIN) != TDB_SHM_OK || m.slot_idx != 1)
			_exit(2);
		(void) tdb_subreq_take(&m, &t, b, 60000);
		_exit(3);
	}
	for (int k = 0; k < 5000 && atomic_load(&test_bell(&e, 1)->waiters) == 0; k++)
		sleep_us(1000);
	CHECK_EQ_U64(atomic_load(&test_bell(&e, 1)->waiters), 1);
	kill(dead, SIGKILL);
	waitpid(dead, &status, 0);
	memset(&o, 0, sizeof(o));
	o.e = &e;
	pthread_create(&th, NULL, oneshot_member, &o);
	for (int k = 0; k < 5000 && atomic_load(&o.subscribed) == 0; k++)
		sleep_us(1000);
	CHECK_EQ_U64(atomic_load(&o.subscribed), 1);
	/* (the daemon's sweep has not come by yet: between two sweeps) */
	atomic_store(&o.go, 1);
	for (int k = 0; k < 5000 && atomic_load(&test_bell(&e, 2)->waiters) == 0; k++)
		sleep_us(1000);
	sleep_us(20000);			/* the live member is in FUTEX_WAIT (polls every second) */
	t0 = tdb_mono_us();
	/* the first claim of cell 0: ticket 1, so the wake starts at bell 1 (the dead member's) */
	rc = tdb_subreq_call(&rq, REQ_GROUP, "q", 1, ans, sizeof(ans), 400);
	if (rc < 0)
		printf("# call: %d (%s) after %lld us\n", rc, rq.err, (long long) (tdb_mono_us() - t0));
	CHECK_EQ_U64(rc, 4);
	pthread_join(th, NULL);
	CHECK_EQ_U64(o.rc, 1);
	CHECK(o.took_us - t0 < 200000);
	tdb_subring_consumer_close(&rq);
	{
		TdbSubChange ch[8];

		(void) sweep(&e, ch, 8);
	}
	CHECK_EQ_U64(cells_in_use(&e), 0);
	senv_close(&e);
}

/*
 * The daemon dies without a word (kill -9) and the next one makes the
 * segment anew: a member waiting for a request in the old segment learns
 * it at once (TDB_SHM_ESTALE), as a receiver does, not at its next poll.
 */
UNIT_TEST(test_subreq_replaced_segment_wakes_members)
{
	SubEnv		e,
				e2;
	int			fds[2];
	pid_t		pid;
	int			status = -1;
	char		err[TDB_SHM_ERRLEN];
	int64_t		t0,
				took_ms = -1;
	int			rc = 0;

	if (!senv_open(&e, 2, 64) || pipe(fds) != 0)
		return;
	pid = fork();
	if (pid == 0)
	{
		TdbSubConsumer m;
		TdbSubReqTaken t;
		unsigned char b[TDB_SUBREQ_MAX_BYTES];
		int			r;
		int64_t		now;

		if (tdb_subring_consumer_open(&m, e.prefix, INSTANCE, NULL, err) != TDB_SHM_OK ||
			tdb_subring_subscribe(&m, NULL, 0, REQ_GROUP, TDB_SUBGROUP_ROUND_ROBIN) != TDB_SHM_OK)
			_exit(2);
		r = tdb_subreq_take(&m, &t, b, 10000);
		now = tdb_mono_us();
		if (write(fds[1], &r, sizeof(r)) != sizeof(r) || write(fds[1], &now, sizeof(now)) != sizeof(now))
			_exit(3);
		_exit(0);
	}
	for (int k = 0; k < 5000 && atomic_load(&test_bell(&e, 0)->waiters) == 0; k++)
		sleep_us(1000);
	CHECK_EQ_U64(atomic_load(&test_bell(&e, 0)->waiters), 1);
	sleep_us(20000);			/* in FUTEX_WAIT */
	e2 = e;
	tdb_subring_close(&e.r);	/* the daemon dies without a word */
	t0 = tdb_mono_us();
	CHECK_EQ_U64(tdb_subring_create(&e2.r, e2.prefix, 2, 64, (gid_t) -1, INSTANCE + 1, err), TDB_SHM_OK);
	if (read(fds[0], &rc, sizeof(rc)) == sizeof(rc) && read(fds[0], &took_ms, sizeof(took_ms)) == sizeof(took_ms))
		took_ms = (took_ms - t0) / 1000;
	waitpid(pid, &status, 0);
	printf("# the member's take returned %d after %lld ms\n", rc, (long long) took_ms);
	CHECK_EQ_U64(rc, (uint64_t) TDB_SHM_ESTALE);
	CHECK(took_ms >= 0 && took_ms < 300);
	close(fds[0]);
	close(fds[1]);
	senv_close(&e2);
}

/*
 * A live member that takes requests and never answers some of them (an
 * exception in a Python handler between take_request and answer): each
 * requester times out, the cell is ORPHANED, and nobody but that member
 * frees it.  Those cells must come back (at the member's next take at the
 * latest), not pile up until every request of every group gets ENOSLOT.
 */
UNIT_TEST(test_subreq_unanswered_cells_come_back)
{
	SubEnv		e;
	TdbSubConsumer m;
	char		err[TDB_SHM_ERRLEN];
	unsigned char buf[TDB_SUBREQ_MAX_BYTES];
	uint32_t	ncells;
	int			enoslot_at = -1;

	if (!senv_open(&e, 4, 64))
		return;
	ncells = tdb_subreq_cells(e.r.nslots);
	CHECK_EQ_U64(tdb_subring_consumer_open(&m, e.prefix, INSTANCE, NULL, err), TDB_SHM_OK);
	CHECK_EQ_U64(tdb_subring_subscribe(&m, NULL, 0, REQ_GROUP, TDB_SUBGROUP_ROUND_ROBIN), TDB_SHM_OK);
	for (uint32_t i = 0; i <= ncells && enoslot_at < 0; i++)
	{
		pid_t		pid = fork();
		int			status = -1;
		TdbSubReqTaken t;

		if (pid == 0)
		{
			TdbSubConsumer r2;
			unsigned char b2[64];
			int			rc;

			if (tdb_subring_consumer_open(&r2, e.prefix, INSTANCE, NULL, err) != TDB_SHM_OK ||
				tdb_subring_subscribe(&r2, NULL, 0, 0, 0) != TDB_SHM_OK)
				_exit(2);
			rc = tdb_subreq_call(&r2, REQ_GROUP, "x", 1, b2, sizeof(b2), 30);
			_exit(rc == TDB_SUBREQ_ETIMEDOUT ? 0 : rc == TDB_SHM_ENOSLOT ? 4 : 1);
		}
		/* took it, and never answers it */
		(void) tdb_subreq_take(&m, &t, buf, 2000);
		waitpid(pid, &status, 0);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 4)
			enoslot_at = (int) i;
		else
			CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		/* the daemon's sweep takes the requester's slot back */
		{
			TdbSubChange ch[8];

			(void) sweep(&e, ch, 8);
		}
	}
	if (enoslot_at >= 0)
		printf("# request %d got ENOSLOT: %u cells left ORPHANED by a live member\n", enoslot_at, cells_in_use(&e));
	CHECK_EQ_U64(enoslot_at, (uint64_t) -1);
	/* the member's next take gives back what it held for requesters that gave up */
	{
		TdbSubReqTaken t;

		CHECK_EQ_U64(tdb_subreq_take(&m, &t, buf, 0), 0);
	}
	CHECK_EQ_U64(cells_in_use(&e), 0);
	tdb_subring_consumer_close(&m);
	senv_close(&e);
}

/* ---- chaos: kill -9 at random points of requesters and members ------------------ */

static void
chaos_requester(SubEnv *e, uint64_t seed)
{
	TdbSubConsumer c;
	char		err[TDB_SHM_ERRLEN];
	unsigned char req[256],
				ans[TDB_SUBREQ_MAX_BYTES];

	if (tdb_subring_consumer_open(&c, e->prefix, INSTANCE, NULL, err) != TDB_SHM_OK ||
		tdb_subring_subscribe(&c, NULL, 0, 0, 0) != TDB_SHM_OK)
		_exit(2);
	for (int i = 0; i < 100000; i++)
	{
		uint32_t	len = (uint32_t) (unit_rand(&seed) % sizeof(req));
		unsigned char want[sizeof(req) + 16];
		int			n,
					sid;

		for (uint32_t k = 0; k < len; k++)
			req[k] = (unsigned char) unit_rand(&seed);
		n = tdb_subreq_call(&c, REQ_GROUP, req, len, ans, sizeof(ans), (int) (unit_rand(&seed) % 40));
		if (n == TDB_SUBREQ_ETIMEDOUT || n == TDB_SUBREQ_ENOMEMBER || n == TDB_SHM_ENOSLOT)
			continue;
		/* an answer must be the one to this request */
		if (n < 2 || sscanf((const char *) ans, "%d:", &sid) != 1 || (uint32_t) n != make_answer(sid, req, len, want) ||
			memcmp(ans, want, (size_t) n) != 0)
			_exit(7);
	}
	_exit(0);
}

static void
chaos_member(SubEnv *e, uint64_t seed, int id)
{
	TdbSubConsumer c;
	char		err[TDB_SHM_ERRLEN];
	unsigned char buf[TDB_SUBREQ_MAX_BYTES],
				ans[TDB_SUBREQ_MAX_BYTES + 16];

	if (tdb_subring_consumer_open(&c, e->prefix, INSTANCE, NULL, err) != TDB_SHM_OK ||
		tdb_subring_subscribe(&c, NULL, 0, REQ_GROUP, TDB_SUBGROUP_ROUND_ROBIN) != TDB_SHM_OK)
		_exit(2);
	for (;;)
	{
		TdbSubReqTaken t;
		int			rc = tdb_subreq_take(&c, &t, buf, 100);

		if (rc == 0)
			continue;
		if (rc != 1)
			_exit(5);
		if (unit_rand(&seed) % 4 == 0)
			sleep_us((long) (unit_rand(&seed) % 30000));
		if (unit_rand(&seed) % 10 == 0)
			continue;			/* drops it */
		rc = tdb_subreq_answer(&c, &t, ans, make_answer(id, buf, t.len, ans));
		if (rc != TDB_SHM_OK && rc != TDB_SUBREQ_EGONE)
			_exit(6);
	}
}

#define CHAOS_PROCS	8

UNIT_TEST(test_subreq_chaos_kill9_no_leak)
{
	SubEnv		e;
	pid_t		p[CHAOS_PROCS];
	bool		member[CHAOS_PROCS];
	uint64_t	seed = 4242;
	int			kills = 0,
				bad_exits = 0;
	int64_t		end;
	void	   *area;

	if (!senv_open(&e, 16, 64))
		return;
	area = (char *) e.r.base + tdb_subreq_offset(e.r.nslots, e.r.ring_events);
	for (int i = 0; i < CHAOS_PROCS; i++)
		p[i] = -1;
	end = tdb_mono_us() + 6 * INT64_C(1000000);
	while (tdb_mono_us() < end)
	{
		TdbSubChange ch[16];
		uint32_t	n = 0;

		for (int i = 0; i < CHAOS_PROCS; i++)
		{
			int			status;

			if (p[i] > 0 && waitpid(p[i], &status, WNOHANG) == p[i])
			{
				if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
				{
					bad_exits++;
					printf("# process %d (%s) ended with %d\n", i, member[i] ? "member" : "requester", status);
				}
				p[i] = -1;
			}
			if (p[i] < 0)
			{
				uint64_t	s = unit_rand(&seed);

				member[i] = i % 2 == 0;
				p[i] = fork();
				if (p[i] == 0)
				{
					if (member[i])
						chaos_member(&e, s, i + 1);
					else
						chaos_requester(&e, s);
				}
			}
		}
		sleep_us((long) (unit_rand(&seed) % 20000));
		{
			int			v = (int) (unit_rand(&seed) % CHAOS_PROCS);

			if (p[v] > 0)
			{
				kill(p[v], SIGKILL);
				kills++;
			}
		}
		if (tdb_subring_sweep(&e.r, ch, 16, &n) == TDB_SHM_OK)
			for (uint32_t k = 0; k < n; k++)
				if (ch[k].kind == TDB_SUBCHANGE_RECLAIMED)
					tdb_subring_discard(&e.r, ch[k].slot);
	}
	for (int i = 0; i < CHAOS_PROCS; i++)
		if (p[i] > 0)
		{
			kill(p[i], SIGKILL);
			waitpid(p[i], NULL, 0);
		}
	for (int round = 0; round < 4; round++)
	{
		TdbSubChange ch[16];
		uint32_t	n = 0;

		if (tdb_subring_sweep(&e.r, ch, 16, &n) == TDB_SHM_OK)
			for (uint32_t k = 0; k < n; k++)
				if (ch[k].kind == TDB_SUBCHANGE_RECLAIMED)
					tdb_subring_discard(&e.r, ch[k].slot);
	}
	printf("# %d kills; %llu request cells put back by the sweeps\n", kills, (unsigned long long) e.r.requests_reclaimed);
	CHECK_EQ_U64(bad_exits, 0);
	if (cells_in_use(&e) != 0)
		for (uint32_t i = 0; i < tdb_subreq_cells(e.r.nslots); i++)
		{
			uint64_t	w = atomic_load(&tdb_subreq_cell(area, e.r.nslots, i)->word);

			if (TDB_SUBREQ_STATE(w) != TDB_SUBREQ_FREE)
				printf("# cell %u: state %u owner %u taker %u\n", i, TDB_SUBREQ_STATE(w), TDB_SUBREQ_OWNER(w),
					   TDB_SUBREQ_TAKER(w));
		}
	CHECK_EQ_U64(cells_in_use(&e), 0);
	for (uint32_t i = 0; i < e.r.nslots; i++)
		CHECK_EQ_U64(atomic_load(&test_bell(&e, i)->waiters), 0);
	senv_close(&e);
}

/* Tickets wrap at 36 bits: a cell whose ticket is the last one still serves, at ticket 0 then 1. */
UNIT_TEST(test_subreq_ticket_wrap)
{
	SubEnv		e;
	Server		sv[1];
	pthread_t	st[1];
	Requester	rq;
	_Atomic int stop = 0;
	void	   *area;

	if (!senv_open(&e, 2, 64))
		return;
	area = (char *) e.r.base + tdb_subreq_offset(e.r.nslots, e.r.ring_events);
	for (uint32_t i = 0; i < tdb_subreq_cells(e.r.nslots); i++)
		atomic_store(&tdb_subreq_cell(area, e.r.nslots, i)->word,
					 TDB_SUBREQ_WORD(TDB_SUBREQ_FREE, 0, 0, TDB_SUBREQ_TICKET_MASK - 1));
	CHECK(start_servers(sv, st, 1, &e, &stop, 0));
	memset(&rq, 0, sizeof(rq));
	rq.e = &e;
	rq.count = 3 * (int) tdb_subreq_cells(e.r.nslots);	/* each cell: MASK, 0, 1 */
	rq.seed = 3;
	requester_main(&rq);
	atomic_store(&stop, 1);
	pthread_join(st[0], NULL);
	CHECK_EQ_U64(rq.bad, 0);
	CHECK_EQ_U64(rq.ok, (uint64_t) rq.count);
	CHECK_EQ_U64(cells_in_use(&e), 0);
	CHECK_EQ_U64(TDB_SUBREQ_TICKET(atomic_load(&tdb_subreq_cell(area, e.r.nslots, 0)->word)), 1);
	senv_close(&e);
}

/*
 * A member of the segment's group truncates it under a subscriber: the
 * subscriber gets an error (its mappings read zeros), never a SIGBUS.  In a
 * child, so that a SIGBUS fails this test instead of ending the run.
 */
UNIT_TEST(test_subring_consumer_survives_truncation)
{
	SubEnv		e;
	pid_t		pid;
	int			status = 0;

	if (!senv_open(&e, 2, 64))
		return;
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
	{
		TdbSubConsumer c;
		TdbSubEvent buf[4];
		char		err[TDB_SHM_ERRLEN];
		char		name[TDB_SHM_NAME_MAX + 24];
		int			fd;
		int			rc;

		if (tdb_subring_consumer_open(&c, e.prefix, INSTANCE, NULL, err) != TDB_SHM_OK ||
			tdb_subring_subscribe(&c, NULL, 0, 0, 0) != TDB_SHM_OK)
			_exit(2);
		tdb_shm_name(name, e.prefix, "subs");
		fd = shm_open(name, O_RDWR, 0);
		if (fd < 0 || ftruncate(fd, 0) != 0)
			_exit(2);
		rc = tdb_subring_receive(&c, buf, 4, 500);
		if (rc != TDB_SHM_ECORRUPT || strstr(c.err, "truncated") == NULL)
		{
			printf("# receive after truncation: %d %s\n", rc, c.err);
			_exit(1);
		}
		/* a second call says the same, and so does peek */
		if (tdb_subring_peek(&c, buf, 4) != TDB_SHM_ECORRUPT)
			_exit(1);
		tdb_subring_consumer_close(&c);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		printf("# child: %s %d\n", WIFSIGNALED(status) ? "killed by signal" : "exit", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* the producer's next sweep finds it damaged and says how */
	{
		TdbSubChange ch[4];
		uint32_t	n;

		CHECK_EQ_U64(tdb_subring_sweep(&e.r, ch, 4, &n), (uint64_t) TDB_SHM_ECORRUPT);
		CHECK(strstr(e.r.damage, "truncated") != NULL);
	}
	senv_close(&e);
}

/*
 * A member zeroes the header, or stores STOPPED in its state word: the
 * producer's sweep reports it, and once the daemon has made the segment
 * anew, a subscriber of the old one is told (ESTALE) within its wait
 * instead of waiting for events that never come.
 */
UNIT_TEST(test_subring_damaged_header_is_rebuilt_and_told)
{
	SubEnv		e;
	TdbSubConsumer c;
	TdbSubEvent buf[4];
	char		err[TDB_SHM_ERRLEN];
	char		name[TDB_SHM_NAME_MAX + 24];
	TdbSubChange ch[4];
	uint32_t	n;
	int			fd;
	TdbSubsHeader *h;

	for (int what = 0; what < 2; what++)
	{
		if (!senv_open(&e, 2, 64))
			return;
		if (!open_consumer(&c, &e, NULL) || tdb_subring_subscribe(&c, NULL, 0, 0, 0) != TDB_SHM_OK)
		{
			CHECK(false);
			senv_close(&e);
			return;
		}
		tdb_shm_name(name, e.prefix, "subs");
		fd = shm_open(name, O_RDWR, 0);
		CHECK(fd >= 0);
		h = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		CHECK(h != MAP_FAILED);
		if (what == 0)
			memset(h, 0, 4096);
		else
			atomic_store(&h->state, TDB_SUBRING_STOPPED);
		munmap(h, 4096);
		close(fd);
		CHECK_EQ_U64(tdb_subring_sweep(&e.r, ch, 4, &n), (uint64_t) TDB_SHM_ECORRUPT);
		CHECK(strstr(e.r.damage, what == 0 ? "header" : "state") != NULL);
		/* the daemon leaves it and makes it anew */
		tdb_subring_abandon(&e.r);
		CHECK_EQ_U64(tdb_subring_create(&e.r, e.prefix, 2, 64, (gid_t) -1, INSTANCE, err), TDB_SHM_OK);
		tdb_subring_set_state(&e.r, TDB_SUBRING_RUNNING);
		{
			int64_t		t0 = tdb_mono_ms();
			int			rc = tdb_subring_receive(&c, buf, 4, 3000);

			CHECK_EQ_U64(rc, (uint64_t) TDB_SHM_ESTALE);
			CHECK(tdb_mono_ms() - t0 < 2000);
		}
		tdb_subring_consumer_close(&c);
		/* new subscribers work */
		CHECK(open_consumer(&c, &e, NULL));
		CHECK_EQ_U64(tdb_subring_subscribe(&c, NULL, 0, 0, 0), TDB_SHM_OK);
		tdb_subring_consumer_close(&c);
		senv_close(&e);
	}
}

/* The producer's view: a zeroed header that nobody abandons still tells a waiting subscriber (the file is unlinked). */
UNIT_TEST(test_subring_unlinked_segment_is_stale)
{
	SubEnv		e;
	TdbSubConsumer c;
	TdbSubEvent buf[4];
	char		err[TDB_SHM_ERRLEN];
	char		name[TDB_SHM_NAME_MAX + 24];
	int			fd;
	void	   *h;

	if (!senv_open(&e, 1, 64))
		return;
	if (open_consumer(&c, &e, NULL) && tdb_subring_subscribe(&c, NULL, 0, 0, 0) == TDB_SHM_OK)
	{
		tdb_shm_name(name, e.prefix, "subs");
		fd = shm_open(name, O_RDWR, 0);
		h = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		CHECK(h != MAP_FAILED);
		memset(h, 0, 4096);
		munmap(h, 4096);
		close(fd);
		/* a daemon that died without a word: the next one makes it anew (stop_previous cannot read it) */
		tdb_subring_close(&e.r);
		CHECK_EQ_U64(tdb_subring_create(&e.r, e.prefix, 1, 64, (gid_t) -1, INSTANCE, err), TDB_SHM_OK);
		tdb_subring_set_state(&e.r, TDB_SUBRING_RUNNING);
		CHECK_EQ_U64(tdb_subring_receive(&c, buf, 4, 3000), (uint64_t) TDB_SHM_ESTALE);
		CHECK(strstr(c.err, "rebuilt") != NULL);
		tdb_subring_consumer_close(&c);
	}
	senv_close(&e);
}

/* The same for a consumer that only polls (timeout 0): told within a second or so, never silence. */
UNIT_TEST(test_subring_polling_consumer_learns_of_rebuild)
{
	SubEnv		e;
	TdbSubConsumer c;
	TdbSubEvent buf[4];
	char		err[TDB_SHM_ERRLEN];
	int			rc = 0;

	if (!senv_open(&e, 1, 64))
		return;
	if (open_consumer(&c, &e, NULL) && tdb_subring_subscribe(&c, NULL, 0, 0, 0) == TDB_SHM_OK)
	{
		CHECK_EQ_U64(tdb_subring_receive(&c, buf, 4, 0), 0);
		/* made anew without a word to the old one (as after a zeroed header) */
		shm_unlink(e.r.name);
		tdb_subring_close(&e.r);
		CHECK_EQ_U64(tdb_subring_create(&e.r, e.prefix, 1, 64, (gid_t) -1, INSTANCE, err), TDB_SHM_OK);
		tdb_subring_set_state(&e.r, TDB_SUBRING_RUNNING);
		for (int64_t t0 = tdb_mono_ms(); tdb_mono_ms() - t0 < 3000 && rc == 0; sleep_us(1000))
			rc = tdb_subring_receive(&c, buf, 4, 0);
		CHECK_EQ_U64(rc, (uint64_t) TDB_SHM_ESTALE);
		tdb_subring_consumer_close(&c);
	}
	senv_close(&e);
}
