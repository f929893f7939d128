/*
 * test_shm.c
 *	  The reader protocol against the writer, in one process with threads
 *	  and real POSIX shared memory: every snapshot is consistent while the
 *	  writer publishes continuously, pins keep versions alive, nothing
 *	  leaks, adoption after a writer crash, orderly stop.
 */
#include "unit.h"
#include "reader.h"
#include "writer.h"

#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fixture.h"

static char test_prefix[64];

typedef struct ReaderArg
{
	int			iterations;
	uint64_t	snapshots;
	uint64_t	inconsistent;
	uint64_t	errors;
	uint64_t	last_gen;
	uint64_t	went_back;
} ReaderArg;

static void *
reader_thread(void *p)
{
	ReaderArg  *a = p;
	TdbReader	r;
	char		err[TDB_ERRLEN];

	if (tdb_reader_open(&r, test_prefix, NULL, TDB_VALIDATE_FULL, err) != TDB_SHM_OK)
	{
		a->errors++;
		return NULL;
	}
	for (int it = 0; it < a->iterations; it++)
	{
		TdbSnapshot s;

		if (tdb_reader_acquire(&r, &s, err) != TDB_SHM_OK)
		{
			a->errors++;
			continue;
		}
		a->snapshots++;
		if (s.generation < a->last_gen)
			a->went_back++;
		a->last_gen = s.generation;
		for (int i = 0; i < NLOC; i += (it % 7) + 1)
			if (s.entries[i].speed_kmh != (float) s.generation ||
				s.entries[i].changed_gen != s.generation)
			{
				a->inconsistent++;
				break;
			}
		if (tdb_map_find(s.map, 1000 + (it % NLOC)) < 0)
			a->inconsistent++;
		tdb_reader_release(&r);
	}
	tdb_reader_close(&r);
	return NULL;
}

UNIT_TEST(test_shm_readers_see_consistent_versions)
{
	TdbWriter	w;
	TdbWriterOpenInfo info;
	uint32_t	map_seg;
	void	   *map_addr;
	pthread_t	th[3];
	ReaderArg	args[3];
	uint64_t	gen;

	snprintf(test_prefix, sizeof(test_prefix), "/tdbtest.%d", (int) getpid());
	CHECK_EQ_U64(open_published(&w, test_prefix, 8, 1, &map_seg, &map_addr, &info), TDB_SHM_OK);
	CHECK(!info.adopted);

	memset(args, 0, sizeof(args));
	for (int t = 0; t < 3; t++)
	{
		args[t].iterations = 20000;
		pthread_create(&th[t], NULL, reader_thread, &args[t]);
	}
	/* the writer never waits: it publishes as fast as it can meanwhile */
	for (gen = 2; gen < 3000; gen++)
		if (publish_traffic(&w, map_seg, gen) != TDB_SHM_OK)
			unit_fail(__FILE__, __LINE__, "publish of generation %llu refused", (unsigned long long) gen);
	for (int t = 0; t < 3; t++)
	{
		pthread_join(th[t], NULL);
		CHECK_EQ_U64(args[t].errors, 0);
		CHECK_EQ_U64(args[t].inconsistent, 0);
		CHECK_EQ_U64(args[t].went_back, 0);
		CHECK_EQ_U64(args[t].snapshots, 20000);
	}
	/* nothing leaked: the map, the active buffer and at most two spares */
	tdb_writer_reclaim(&w, map_seg);
	CHECK(tdb_writer_bytes(&w) <= w.ctl->segments[map_seg].size +
		  3 * fixture_traffic_size());
	tdb_writer_close(&w, true);
}

UNIT_TEST(test_shm_pins_keep_versions)
{
	TdbWriter	w;
	char		err[TDB_ERRLEN];
	uint32_t	map_seg;
	void	   *map_addr;
	TdbReader	readers[TDB_MAX_VERSIONS];
	TdbSnapshot snaps[TDB_MAX_VERSIONS];
	TdbReader	held;
	TdbSnapshot hs;

	snprintf(test_prefix, sizeof(test_prefix), "/tdbtest.%d", (int) getpid());
	CHECK_EQ_U64(open_published(&w, test_prefix, TDB_MAX_VERSIONS + 2, 1, &map_seg, &map_addr, NULL), TDB_SHM_OK);

	/* one long-held snapshot: hundreds of publications go on around it */
	CHECK_EQ_U64(tdb_reader_open(&held, test_prefix, NULL, TDB_VALIDATE_FULL, err), TDB_SHM_OK);
	CHECK_EQ_U64(tdb_reader_acquire(&held, &hs, err), TDB_SHM_OK);
	CHECK_EQ_U64(hs.generation, 1);
	for (uint64_t g = 2; g <= 500; g++)
		CHECK_EQ_U64(publish_traffic(&w, map_seg, g), TDB_SHM_OK);
	for (int i = 0; i < NLOC; i++)
		if (hs.entries[i].speed_kmh != 1.0f)
		{
			unit_fail(__FILE__, __LINE__, "pinned generation 1 was overwritten at entry %d", i);
			break;
		}
	tdb_reader_release(&held);

	/* every descriptor pinned by a different reader: publication is refused, never blocks */
	for (int v = 0; v < TDB_MAX_VERSIONS; v++)
	{
		CHECK_EQ_U64(tdb_reader_open(&readers[v], test_prefix, NULL, TDB_VALIDATE_FULL, err), TDB_SHM_OK);
		CHECK_EQ_U64(tdb_reader_acquire(&readers[v], &snaps[v], err), TDB_SHM_OK);
		if (v < TDB_MAX_VERSIONS - 1)
			CHECK_EQ_U64(publish_traffic(&w, map_seg, 501 + v), TDB_SHM_OK);
	}
	CHECK_EQ_U64(publish_traffic(&w, map_seg, 600), TDB_SHM_ENOSLOT);
	tdb_reader_release(&readers[3]);
	CHECK_EQ_U64(publish_traffic(&w, map_seg, 601), TDB_SHM_OK);
	for (int v = 0; v < TDB_MAX_VERSIONS; v++)
		tdb_reader_close(&readers[v]);
	tdb_reader_close(&held);
	tdb_writer_close(&w, true);
}

UNIT_TEST(test_shm_adopt_and_stop)
{
	TdbWriter	w;
	TdbWriterOpenInfo info;
	char		err[TDB_ERRLEN];
	uint32_t	map_seg;
	void	   *map_addr;
	TdbReader	r;
	TdbSnapshot s;

	snprintf(test_prefix, sizeof(test_prefix), "/tdbtest.%d", (int) getpid());
	CHECK_EQ_U64(open_published(&w, test_prefix, 4, 7, &map_seg, &map_addr, NULL), TDB_SHM_OK);

	/* the writer "crashes" (detaches without stopping); a reader keeps reading */
	CHECK_EQ_U64(tdb_reader_open(&r, test_prefix, NULL, TDB_VALIDATE_FULL, err), TDB_SHM_OK);
	tdb_writer_close(&w, false);
	CHECK_EQ_U64(tdb_reader_acquire(&r, &s, err), TDB_SHM_OK);
	CHECK_EQ_U64(s.generation, 7);
	tdb_reader_release(&r);

	/* a new writer adopts the published version; the reader goes on */
	CHECK_EQ_U64(test_writer_open(&w, test_prefix, 4, 0, &info, err), TDB_SHM_OK);
	CHECK(info.adopted);
	CHECK_EQ_U64(info.last_generation, 7);
	CHECK_EQ_U64(info.segments_dropped, 0);
	CHECK_EQ_U64(publish_traffic(&w, map_seg, 8), TDB_SHM_OK);
	CHECK_EQ_U64(tdb_reader_acquire(&r, &s, err), TDB_SHM_OK);
	CHECK_EQ_U64(s.generation, 8);
	tdb_reader_release(&r);

	/* the active traffic object is damaged while no writer runs: dropped at adoption */
	tdb_writer_close(&w, false);
	{
		TdbControl *c = (TdbControl *) r.ctl;
		uint64_t	a = atomic_load(&c->active);
		uint32_t	tseg = c->versions[TDB_ACTIVE_IDX(a)].traffic_seg;
		char		name[TDB_SHM_NAME_MAX + 24];
		void	   *p;
		size_t		sz;

		tdb_shm_seg_name(name, test_prefix, c->segments[tseg].seq);
		CHECK_EQ_U64(tdb_shm_map(name, true, true, 64, &p, &sz), TDB_SHM_OK);
		((char *) p)[sz - 100] ^= 0x5A;
		tdb_shm_unmap(p, sz);
	}
	CHECK_EQ_U64(test_writer_open(&w, test_prefix, 4, 0, &info, err), TDB_SHM_OK);
	CHECK(info.adopted);
	CHECK(info.segments_dropped >= 1);
	CHECK_EQ_U64(tdb_reader_acquire(&r, &s, err), TDB_SHM_EEMPTY);
	CHECK_EQ_U64(publish_traffic(&w, map_seg, 9), TDB_SHM_OK);
	CHECK_EQ_U64(tdb_reader_acquire(&r, &s, err), TDB_SHM_OK);
	CHECK_EQ_U64(s.generation, 9);
	tdb_reader_release(&r);

	/* orderly stop: readers are told to reopen, every name is gone */
	tdb_writer_close(&w, true);
	CHECK_EQ_U64(tdb_reader_acquire(&r, &s, err), TDB_SHM_ESTALE);
	tdb_reader_close(&r);
	CHECK_EQ_U64(tdb_reader_open(&r, test_prefix, NULL, TDB_VALIDATE_FULL, err), TDB_SHM_ENOENT);
	CHECK(strstr(err, "does not exist") != NULL);
}

UNIT_TEST(test_shm_pin_timeout_revokes)
{
	TdbWriter	w;
	char		err[TDB_ERRLEN];
	uint32_t	map_seg;
	void	   *map_addr;
	TdbReader	readers[TDB_MAX_VERSIONS];
	TdbSnapshot snaps[TDB_MAX_VERSIONS];

	snprintf(test_prefix, sizeof(test_prefix), "/tdbtest.%d", (int) getpid());
	/* no pin timeout while the readers attach (slow under sanitizers) */
	CHECK_EQ_U64(open_with_map(&w, test_prefix, TDB_MAX_VERSIONS + 2, 0, &map_seg, &map_addr, NULL), TDB_SHM_OK);

	/* every descriptor pinned by a reader that then idles (REPEATABLE READ sessions) */
	for (int v = 0; v < TDB_MAX_VERSIONS; v++)
	{
		CHECK_EQ_U64(publish_traffic(&w, map_seg, 1 + v), TDB_SHM_OK);
		CHECK_EQ_U64(tdb_reader_open(&readers[v], test_prefix, NULL, TDB_VALIDATE_FULL, err), TDB_SHM_OK);
		CHECK_EQ_U64(tdb_reader_acquire(&readers[v], &snaps[v], err), TDB_SHM_OK);
		CHECK_EQ_U64(snaps[v].generation, 1 + v);
	}
	/* within the timeout: refused, loudly */
	CHECK_EQ_U64(publish_traffic(&w, map_seg, 100), TDB_SHM_ENOSLOT);
	CHECK(!tdb_reader_revoked(&readers[0], &snaps[0]));

	/* a 1 s timeout; past it: publication goes on, the late readers are told, their memory is intact */
	w.pin_timeout_us = 1000000;
	usleep(1100000);
	for (uint64_t g = 101; g < 299; g++)
		CHECK_EQ_U64(publish_traffic(&w, map_seg, g), TDB_SHM_OK);
	CHECK_EQ_U64(w.revoked, TDB_MAX_VERSIONS - 1);
	/* the last one was superseded only now: it gets its full timeout */
	CHECK(!tdb_reader_revoked(&readers[TDB_MAX_VERSIONS - 1], &snaps[TDB_MAX_VERSIONS - 1]));
	usleep(1100000);
	CHECK_EQ_U64(publish_traffic(&w, map_seg, 299), TDB_SHM_OK);
	CHECK_EQ_U64(w.revoked, TDB_MAX_VERSIONS);
	for (int v = 0; v < TDB_MAX_VERSIONS; v++)
	{
		CHECK(tdb_reader_revoked(&readers[v], &snaps[v]));
		CHECK(snapshot_intact(&snaps[v], 1 + v));
		tdb_reader_release(&readers[v]);
		/* the next acquire is of the active version, and valid */
		CHECK_EQ_U64(tdb_reader_acquire(&readers[v], &snaps[v], err), TDB_SHM_OK);
		CHECK_EQ_U64(snaps[v].generation, 299);
		CHECK(!tdb_reader_revoked(&readers[v], &snaps[v]));
		tdb_reader_close(&readers[v]);
	}
	/* nothing leaked: the map, the active buffer and at most two spares */
	tdb_writer_reclaim(&w, map_seg);
	CHECK(tdb_writer_bytes(&w) <= ((TdbObjectHeader *) map_addr)->total_size +
		  3 * tdb_traffic_size(NLOC, 0));
	tdb_writer_close(&w, true);
}

/*
 * Liveness of external readers comes from their slot lock, not their pid:
 * a live reader whose pid field says something else (another PID
 * namespace, a recycled pid) keeps its version; a killed reader's pin is
 * void at once and its slot goes to the next reader.
 */
UNIT_TEST(test_shm_liveness_by_lock)
{
	TdbWriter	w;
	char		err[TDB_ERRLEN];
	uint32_t	map_seg;
	void	   *map_addr;
	int			pipefd[2];
	pid_t		child;
	char		c;
	TdbReader	r;
	TdbSnapshot s;

	snprintf(test_prefix, sizeof(test_prefix), "/tdbtest.%d", (int) getpid());
	CHECK_EQ_U64(open_published(&w, test_prefix, 2, 1, &map_seg, &map_addr, NULL), TDB_SHM_OK);

	CHECK(pipe(pipefd) == 0);
	child = fork();
	if (child == 0)
	{
		TdbReader	cr;
		TdbSnapshot cs;

		if (tdb_reader_open(&cr, test_prefix, NULL, TDB_VALIDATE_FULL, err) != TDB_SHM_OK ||
			tdb_reader_acquire(&cr, &cs, err) != TDB_SHM_OK)
			_exit(1);
		/* a pid the daemon cannot see: as from another PID namespace */
		atomic_store(&cr.slot->pid, 1);
		if (write(pipefd[1], "x", 1) != 1)
			_exit(1);
		for (int i = 0; i < 600; i++)
		{
			if (!snapshot_intact(&cs, 1) || tdb_reader_revoked(&cr, &cs))
				_exit(2);
			usleep(10000);
		}
		_exit(0);
	}
	CHECK(read(pipefd[0], &c, 1) == 1);
	/* the child pins generation 1: it survives 200 publications */
	for (uint64_t g = 2; g < 200; g++)
		CHECK_EQ_U64(publish_traffic(&w, map_seg, g), TDB_SHM_OK);
	tdb_writer_scan_external(&w);
	CHECK(w.ext_alive[0]);
	CHECK_EQ_U64(TDB_ACTIVE_GEN(w.ext_pin[0]), 1);

	/* kill -9: the kernel drops its lock; the pin is void and the slot free */
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	tdb_writer_scan_external(&w);
	CHECK(!w.ext_alive[0]);
	for (uint64_t g = 200; g < 300; g++)
		CHECK_EQ_U64(publish_traffic(&w, map_seg, g), TDB_SHM_OK);
	tdb_writer_reclaim(&w, map_seg);
	CHECK(tdb_writer_bytes(&w) <= ((TdbObjectHeader *) map_addr)->total_size +
		  3 * tdb_traffic_size(NLOC, 0));
	CHECK_EQ_U64(tdb_reader_open(&r, test_prefix, NULL, TDB_VALIDATE_FULL, err), TDB_SHM_OK);
	CHECK_EQ_U64(r.slot_idx, 0);
	CHECK_EQ_U64(tdb_reader_acquire(&r, &s, err), TDB_SHM_OK);
	CHECK_EQ_U64(s.generation, 299);
	tdb_reader_close(&r);
	close(pipefd[0]);
	close(pipefd[1]);
	tdb_writer_close(&w, true);
}

/*
 * What a process with write access to <prefix>.readers (a member of
 * shm_group) can do: a second writer on the prefix is refused; a slot count
 * written into the segment is never used; a truncated segment costs the
 * writer nothing (it would be a SIGBUS) and is made anew; a pin cleared
 * under a reader is detected by that reader.
 */
UNIT_TEST(test_shm_hostile_slots_segment)
{
	TdbWriter	w;
	TdbWriter	w2;
	TdbWriterOpenInfo info;
	char		err[TDB_ERRLEN];
	char		name[TDB_SHM_NAME_MAX + 24];
	uint32_t	map_seg;
	void	   *map_addr;
	TdbReader	r;
	TdbSnapshot s;
	int			fd;

	snprintf(test_prefix, sizeof(test_prefix), "/tdbtest.%d", (int) getpid());
	CHECK_EQ_U64(open_published(&w, test_prefix, 4, 1, &map_seg, &map_addr, NULL), TDB_SHM_OK);

	/* a second writer (another server with the same trafficdb.shm_name) */
	CHECK_EQ_U64(test_writer_open(&w2, test_prefix, 4, 0, &info, err), TDB_SHM_EBUSY);
	CHECK(strstr(err, "in use by another running server") != NULL);

	/* a huge slot count in the segment: ignored by writer and readers */
	CHECK_EQ_U64(tdb_reader_open(&r, test_prefix, NULL, TDB_VALIDATE_FULL, err), TDB_SHM_OK);
	r.slots->nslots = 0x7fffffff;
	for (uint64_t g = 2; g < 10; g++)
		CHECK_EQ_U64(publish_traffic(&w, map_seg, g), TDB_SHM_OK);
	CHECK_EQ_U64(tdb_reader_acquire(&r, &s, err), TDB_SHM_OK);
	CHECK_EQ_U64(s.generation, 9);

	/* the pin taken away under the reader: the in-place rewrite is detected */
	atomic_store(&r.slot->pin, 0);
	for (uint64_t g = 10; g < 20; g++)
		CHECK_EQ_U64(publish_traffic(&w, map_seg, g), TDB_SHM_OK);
	CHECK(tdb_reader_revoked(&r, &s));
	tdb_reader_release(&r);
	tdb_reader_close(&r);

	/* truncated to nothing: no SIGBUS in the writer, a new segment, readers attach again */
	tdb_shm_name(name, test_prefix, "readers");
	fd = shm_open(name, O_RDWR, 0);
	CHECK(fd >= 0);
	CHECK(ftruncate(fd, 0) == 0);
	close(fd);
	for (uint64_t g = 20; g < 30; g++)
		CHECK_EQ_U64(publish_traffic(&w, map_seg, g), TDB_SHM_OK);
	CHECK_EQ_U64(w.slots_rebuilt, 1);
	CHECK_EQ_U64(tdb_reader_open(&r, test_prefix, NULL, TDB_VALIDATE_FULL, err), TDB_SHM_OK);
	CHECK_EQ_U64(tdb_reader_acquire(&r, &s, err), TDB_SHM_OK);
	CHECK_EQ_U64(s.generation, 29);
	CHECK(snapshot_intact(&s, 29));
	tdb_reader_close(&r);
	tdb_writer_close(&w, true);

	/* stopped: the prefix is free again */
	CHECK_EQ_U64(test_writer_open(&w2, test_prefix, 4, 0, &info, err), TDB_SHM_OK);
	tdb_writer_close(&w2, true);
}

/*
 * The pin-protocol stress test: reader processes re-read their snapshot
 * under a pin, for up to 3x the pin timeout, while the writer publishes
 * without pause and an adversary does what issue 13 listed: other writers
 * (a second server) try the prefix, readers are killed with kill -9 and
 * replaced, garbage pins appear in free slots, and (phase 2 only) pins are
 * cleared under readers, as a member of shm_group can.  A snapshot that
 * changed while its reader was not told (tdb_reader_revoked) is the
 * failure; in phase 1 no snapshot may change at all.
 */
typedef struct StressCounts
{
	uint64_t	snapshots;
	uint64_t	rereads;
	uint64_t	changed;
	uint64_t	changed_untold;
	uint64_t	revoked;
	uint64_t	errors;
} StressCounts;

static double
entries_sum(const TdbSnapshot *s)
{
	double		sum = 0;

	for (int i = 0; i < NLOC; i++)
		sum += s->entries[i].speed_kmh + (double) s->entries[i].changed_gen;
	return sum;
}

static void
stress_reader(int fd, uint64_t seed, double seconds)
{
	TdbReader	r;
	StressCounts c = {0};
	char		err[TDB_ERRLEN];
	struct timespec t0,
				t;

	if (tdb_reader_open(&r, test_prefix, NULL, TDB_VALIDATE_FULL, err) != TDB_SHM_OK)
		_exit(3);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;)
	{
		TdbSnapshot s;
		double		first;
		int			hold_ms = (int) (unit_rand(&seed) % 60);

		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((double) (t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 > seconds)
			break;
		if (tdb_reader_acquire(&r, &s, err) != TDB_SHM_OK)
		{
			c.errors++;
			if (write(fd, &c, sizeof(c)) != sizeof(c))
				_exit(4);
			memset(&c, 0, sizeof(c));
			continue;
		}
		c.snapshots++;
		first = entries_sum(&s);
		for (int k = 0; k <= hold_ms; k++)
		{
			bool		changed = entries_sum(&s) != first || !snapshot_intact(&s, s.generation);

			c.rereads++;
			if (changed)
			{
				c.changed++;
				if (!tdb_reader_revoked(&r, &s))
					c.changed_untold++;
				break;
			}
			usleep(1000);
		}
		if (tdb_reader_revoked(&r, &s))
			c.revoked++;
		tdb_reader_release(&r);
		/* each write is atomic (< PIPE_BUF): a killed reader sends a whole record or none */
		if (write(fd, &c, sizeof(c)) != sizeof(c))
			_exit(4);
		memset(&c, 0, sizeof(c));
	}
	tdb_reader_close(&r);
	_exit(0);
}

static void
stress_phase(bool clear_pins, StressCounts *total)
{
	enum
	{
	NREADERS = 4};
	TdbWriter	w;
	TdbWriterOpenInfo info;
	char		err[TDB_ERRLEN];
	uint32_t	map_seg;
	void	   *map_addr;
	int			pipefd[2];
	pid_t		pids[NREADERS];
	uint64_t	seed = clear_pins ? 7 : 3;
	TdbReader	adversary[2];
	uint64_t	gen = 1;
	int			kills = 0;
	int			refused = 0;
	struct timespec t0,
				t;

	snprintf(test_prefix, sizeof(test_prefix), "/tdbtest.%d", (int) getpid());
	/* a 20 ms pin timeout: readers hold up to 60 ms */
	CHECK_EQ_U64(open_with_map(&w, test_prefix, 16, 20000, &map_seg, &map_addr, NULL), TDB_SHM_OK);
	CHECK_EQ_U64(publish_traffic(&w, map_seg, gen), TDB_SHM_OK);
	/* the adversary holds two slots of its own */
	CHECK_EQ_U64(tdb_reader_open(&adversary[0], test_prefix, NULL, TDB_VALIDATE_FULL, err), TDB_SHM_OK);
	CHECK_EQ_U64(tdb_reader_open(&adversary[1], test_prefix, NULL, TDB_VALIDATE_FULL, err), TDB_SHM_OK);
	CHECK(pipe(pipefd) == 0);
	fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
	for (int i = 0; i < NREADERS; i++)
	{
		pids[i] = fork();
		if (pids[i] == 0)
			stress_reader(pipefd[1], seed * 100 + (uint64_t) i, 2.5);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int step = 0;; step++)
	{
		StressCounts c;
		uint32_t	victim;

		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((double) (t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 > 3.0)
			break;
		while (read(pipefd[0], &c, sizeof(c)) == sizeof(c))
		{
			total->snapshots += c.snapshots;
			total->rereads += c.rereads;
			total->changed += c.changed;
			total->changed_untold += c.changed_untold;
			total->revoked += c.revoked;
			total->errors += c.errors;
		}
		if (publish_traffic(&w, map_seg, gen + 1) == TDB_SHM_OK)
			gen++;
		victim = (uint32_t) (unit_rand(&seed) % 16);
		switch (unit_rand(&seed) % 8)
		{
			case 0:
				{
					/* another server on the prefix: refused, and it changes nothing */
					TdbWriter	w2;

					if (test_writer_open(&w2, test_prefix, 16, 0, &info, err) == TDB_SHM_EBUSY)
						refused++;
					else
						tdb_writer_close(&w2, false);
					break;
				}
			case 1:
				/*
				 * Garbage pins, in a slot nobody holds and in slots the
				 * adversary holds itself: the active word, an old one, nonsense.
				 */
				{
					uint64_t	word = atomic_load(&w.ctl->active);
					TdbReaderSlot *slot = unit_rand(&seed) % 2 ? adversary[unit_rand(&seed) % 2].slot
						: &w.slots->slots[victim];

					if (unit_rand(&seed) % 3 == 0)
						word = unit_rand(&seed);
					else if (unit_rand(&seed) % 2 == 0 && TDB_ACTIVE_GEN(word) > 5)
						word = TDB_ACTIVE_WORD(TDB_ACTIVE_GEN(word) - 5, (TDB_ACTIVE_IDX(word) + 59) % TDB_MAX_VERSIONS);
					if (slot == adversary[0].slot || slot == adversary[1].slot || !w.ext_alive[victim])
						atomic_store(&slot->pin, word);
				}
				break;
			case 2:
				if (clear_pins)
					atomic_store(&w.slots->slots[victim].pin, 0);
				break;
			case 3:
				if (unit_rand(&seed) % 16 == 0)
				{
					/* kill -9 a reader; another takes its place */
					int			i = (int) (unit_rand(&seed) % NREADERS);

					kill(pids[i], SIGKILL);
					waitpid(pids[i], NULL, 0);
					kills++;
					pids[i] = fork();
					if (pids[i] == 0)
						stress_reader(pipefd[1], seed, 1.0);
				}
				break;
			default:
				break;
		}
		usleep(500);
	}
	for (int i = 0; i < NREADERS; i++)
		waitpid(pids[i], NULL, 0);
	{
		StressCounts c;

		while (read(pipefd[0], &c, sizeof(c)) == sizeof(c))
		{
			total->snapshots += c.snapshots;
			total->rereads += c.rereads;
			total->changed += c.changed;
			total->changed_untold += c.changed_untold;
			total->revoked += c.revoked;
			total->errors += c.errors;
		}
	}
	printf("# %s: %llu publications, %llu snapshots, %llu re-reads, %llu revoked, %llu changed (%llu untold), %llu errors; %d readers killed, %d second writers refused\n",
			  clear_pins ? "pins cleared too" : "no pin cleared", (unsigned long long) gen,
			  (unsigned long long) total->snapshots, (unsigned long long) total->rereads,
			  (unsigned long long) total->revoked, (unsigned long long) total->changed,
			  (unsigned long long) total->changed_untold, (unsigned long long) total->errors, kills, refused);
	CHECK(gen > 100);
	CHECK(total->snapshots > 100);
	CHECK(refused > 0);
	CHECK_EQ_U64(total->changed_untold, 0);
	CHECK_EQ_U64(total->errors, 0);
	tdb_reader_close(&adversary[0]);
	tdb_reader_close(&adversary[1]);
	close(pipefd[0]);
	close(pipefd[1]);
	tdb_writer_close(&w, true);
}

UNIT_TEST(test_shm_pin_stress)
{
	StressCounts honest = {0};
	StressCounts hostile = {0};

	stress_phase(false, &honest);
	CHECK_EQ_U64(honest.changed, 0);
	CHECK(honest.revoked > 0);
	stress_phase(true, &hostile);
}

/*
 * Traffic objects whose incidents vary in length from one publication to
 * the next reuse the same buffers (rewritten in place: readers keep their
 * mappings); they used to need a new object whenever the size changed.
 */
UNIT_TEST(test_shm_traffic_buffers_reused_as_incidents_vary)
{
	TdbWriter	w;
	char		err[TDB_ERRLEN];
	uint32_t	map_seg;
	void	   *map_addr;
	static TdbTraffic t[NLOC];
	static char blob[8192];
	uint64_t	seq_before;
	uint64_t	seed = 11;

	snprintf(test_prefix, sizeof(test_prefix), "/tdbtest.%d", (int) getpid());
	CHECK_EQ_U64(open_with_map(&w, test_prefix, 4, 0, &map_seg, &map_addr, NULL), TDB_SHM_OK);
	seq_before = w.ctl->next_seq;
	for (uint64_t gen = 1; gen <= 200; gen++)
	{
		size_t		ibytes = 4 + (size_t) (unit_rand(&seed) % 4000);
		uint32_t	seg;
		void	   *addr;

		for (int i = 0; i < NLOC; i++)
		{
			t[i].speed_kmh = (float) gen;
			t[i].changed_gen = gen;
			t[i].congestion = TDB_CONGESTION_UNKNOWN;
		}
		CHECK_EQ_U64(tdb_writer_traffic_segment(&w, tdb_writer_traffic_capacity(tdb_traffic_size(NLOC, ibytes)),
												NULL, &seg, &addr, err), TDB_SHM_OK);
		tdb_traffic_write(addr, 42, gen, NLOC, t, blob, ibytes, (int64_t) gen);
		CHECK_EQ_U64(tdb_writer_publish(&w, gen, 42, map_seg, seg, (int64_t) gen), TDB_SHM_OK);
		tdb_writer_reclaim(&w, map_seg);
	}
	printf("# 200 publications with incidents of 4..4003 bytes made %llu traffic objects\n",
		   (unsigned long long) (w.ctl->next_seq - seq_before));
	CHECK(w.ctl->next_seq - seq_before <= 3);
	tdb_writer_close(&w, true);
}
