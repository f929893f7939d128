/*
 * test_subring_group.c
 *	  Consumer groups of the subscribers' rings: round-robin handover with
 *	  members leaving and joining (threads) and killed with SIGKILL
 *	  (processes); every event is seen exactly once across the group.
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
