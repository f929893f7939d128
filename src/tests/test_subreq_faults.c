/*
 * test_subreq_faults.c
 *	  Request-response under faults (the review of issue 18): no lost
 *	  wake-up when a member dies, members told of a replaced segment,
 *	  unanswered cells coming back, kill -9 at random points of requesters
 *	  and members (no cell leaked), and tickets wrapping.
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
