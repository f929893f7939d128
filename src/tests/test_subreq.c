/*
 * test_subreq.c
 *	  Request-response over the subscribers' rings (src/subring/subreq.c):
 *	  load sharing between servers, a member leaving with a request, timeouts
 *	  and errors, a killed requester, members killed holding requests.
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

/* ---- request-response (subreq.c) --------------------------------------------------- */

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
