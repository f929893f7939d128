/*
 * subring.c
 *	  Push -> wake-up latency of the subscribers' rings (src/subring/)
 *	  between two processes: this process is the producer (the daemon's
 *	  role), a forked child subscribes and sleeps in tdb_subring_receive.
 *	  Each round the producer waits until the child sleeps, pushes one
 *	  event carrying its CLOCK_MONOTONIC time and wakes it; the child
 *	  records when receive returned.  Prints p50 / p99 / max.  Not wired
 *	  into make bench yet.
 *
 *	  cc -std=gnu11 -O2 -Isrc -o bench/subring bench/subring.c src/subring/producer.c src/subring/consumer.c src/subring/subreq.c src/shm.c
 *	  bench/subring [rounds]	(default 2000)
 */
#include "subring/subring.h"
#include "clock.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void
sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *) a;
	int64_t		y = *(const int64_t *) b;

	return (x > y) - (x < y);
}

typedef struct Shared
{
	_Atomic int done;			/* rounds the child has received */
	_Atomic int ready;			/* slot + 1 */
	int64_t		lat_ns[];
} Shared;

int
main(int argc, char **argv)
{
	int			rounds = argc > 1 ? atoi(argv[1]) : 2000;
	char		prefix[64];
	char		err[TDB_SHM_ERRLEN];
	TdbSubring	r;
	Shared	   *sh;
	pid_t		pid;
	int			status;
	TdbSubSlot *s;

	if (rounds < 10 || rounds > 1000000)
	{
		fprintf(stderr, "rounds: 10 .. 1000000\n");
		return 2;
	}
	snprintf(prefix, sizeof(prefix), "/tdbsubbench.%d", (int) getpid());
	if (tdb_subring_create(&r, prefix, 1, 1024, (gid_t) -1, 1, err) != TDB_SHM_OK)
	{
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	tdb_subring_set_state(&r, TDB_SUBRING_RUNNING);
	sh = mmap(NULL, sizeof(Shared) + sizeof(int64_t) * (size_t) rounds, PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	fflush(stdout);
	pid = fork();
	if (pid == 0)
	{
		TdbSubConsumer c;
		TdbSubEvent ev;

		if (tdb_subring_consumer_open(&c, prefix, 1, NULL, err) != TDB_SHM_OK ||
			tdb_subring_subscribe(&c, NULL, 0, 0, 0) != TDB_SHM_OK)
			_exit(2);
		atomic_store(&sh->ready, c.slot_idx + 1);
		while (atomic_load(&sh->done) < rounds)
		{
			if (tdb_subring_receive(&c, &ev, 1, 5000) != 1)
				_exit(3);
			sh->lat_ns[atomic_load(&sh->done)] = tdb_mono_ns() - (int64_t) ev.location_id;
			atomic_fetch_add(&sh->done, 1);
		}
		tdb_subring_consumer_close(&c);
		_exit(0);
	}
	for (int i = 0; i < 5000 && atomic_load(&sh->ready) == 0; i++)
		sleep_us(1000);
	for (int i = 0; i < 5000; i++)
	{
		TdbSubChange ch[4];
		uint32_t	n = 0;

		tdb_subring_sweep(&r, ch, 4, &n);
		if (n == 1 && ch[0].kind == TDB_SUBCHANGE_ATTACHED)
			break;
		sleep_us(1000);
	}
	s = tdb_subring_slot(r.base, 1024, 0);
	for (int i = 0; i < rounds; i++)
	{
		TdbSubEvent ev;

		/* the child took the last one and sleeps again (bounded) */
		for (int k = 0; k < 100000 && (atomic_load(&sh->done) < i || atomic_load(&s->waiters) == 0); k++)
			sleep_us(20);
		sleep_us(200);			/* into FUTEX_WAIT */
		memset(&ev, 0, sizeof(ev));
		ev.kind = TDB_SUBEV_CHANGE;
		ev.location_id = (uint64_t) tdb_mono_ns();
		if (tdb_subring_push(&r, 0, &ev) != TDB_SUBRING_PUSHED)
			break;
		tdb_subring_wake_pending(&r);
	}
	waitpid(pid, &status, 0);
	if (atomic_load(&sh->done) == rounds)
	{
		int			n = rounds;

		qsort(sh->lat_ns, (size_t) n, sizeof(int64_t), cmp_i64);
		printf("push -> wake-up between two processes, %d rounds, %llu FUTEX_WAKEs: p50 %.1f us, p99 %.1f us, max %.1f us\n",
			   n, (unsigned long long) r.wakes_total, sh->lat_ns[n / 2] / 1000.0, sh->lat_ns[(n * 99) / 100] / 1000.0,
			   sh->lat_ns[n - 1] / 1000.0);
	}
	else
		fprintf(stderr, "the child got %d of %d rounds (status %d)\n", atomic_load(&sh->done), rounds, status);
	tdb_subring_remove(&r);
	return atomic_load(&sh->done) == rounds ? 0 : 1;
}
