/*
 * test_subring.c
 *	  The subscribers' event rings (src/subring/) in /dev/shm, the daemon's
 *	  side played by the test (subring_fixture.h): layout, order and
 *	  consecutive seq, the overrun rule (exact event sequences), deferred
 *	  pushes, reclaim of a dead slot, damaged headers and out-of-range
 *	  values, and a segment truncated, zeroed, replaced or unlinked under its
 *	  consumers.  Threads: test_subring_threads.c; groups:
 *	  test_subring_group.c; request-response: test_subreq*.c.
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
