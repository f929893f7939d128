/*
 * test_shm_attack.c
 *	  Attacks on the reader-liveness protocol (shm.h) that the protocol
 *	  must survive: pins that name superseded descriptors, as a reader
 *	  stopped inside tdb_pin() or a member of shm_group can leave.
 */
#include "unit.h"
#include "reader.h"
#include "writer.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"

static char attack_prefix[64];

/*
 * A pin of a superseded descriptor that still holds its generation: a
 * reader that loaded the active word in tdb_pin(), was stopped for longer
 * than the pin timeout, and stored it just as the writer scanned (it would
 * retry at its next load), or a member of shm_group writing that word into
 * a slot it holds.  The writer may revoke that descriptor; it must not
 * unlink the traffic object of the active version, which the descriptor
 * names only because its own object was reused or freed since.
 */
UNIT_TEST(test_shm_stale_pin_does_not_revoke_active_object)
{
	TdbWriter	w;
	TdbWriterOpenInfo info;
	char		err[TDB_ERRLEN];
	uint32_t	map_seg;
	void	   *map_addr;
	uint64_t	count;
	TdbReader	held[5];
	TdbSnapshot hs[5];
	TdbReader	r;
	TdbSnapshot s;
	uint64_t	gen = 1;
	uint64_t	words[TDB_MAX_VERSIONS];
	int			nwords = 0;

	snprintf(attack_prefix, sizeof(attack_prefix), "/tdbattack.%d", (int) getpid());
	CHECK_EQ_U64(test_writer_open(&w, attack_prefix, 8, 0, &info, err), TDB_SHM_OK);
	CHECK_EQ_U64(publish_map(&w, &map_seg, &map_addr, &count), TDB_SHM_OK);
	CHECK_EQ_U64(publish_traffic(&w, map_seg, gen), TDB_SHM_OK);

	/* five readers hold five versions: five traffic objects */
	for (int k = 0; k < 5; k++)
	{
		CHECK_EQ_U64(tdb_reader_open(&held[k], attack_prefix, NULL, TDB_VALIDATE_FULL, err), TDB_SHM_OK);
		CHECK_EQ_U64(tdb_reader_acquire(&held[k], &hs[k], err), TDB_SHM_OK);
		/* the word a reader stopped in tdb_pin() now would store later */
		words[nwords++] = held[k].pinned;
		CHECK_EQ_U64(publish_traffic(&w, map_seg, ++gen), TDB_SHM_OK);
	}
	/* they let go (and release their slots); publication goes on normally */
	for (int k = 0; k < 5; k++)
		tdb_reader_close(&held[k]);
	for (int i = 0; i < 10; i++)
		CHECK_EQ_U64(publish_traffic(&w, map_seg, ++gen), TDB_SHM_OK);

	/*
	 * Then the traffic object's size changes (incidents grew): new objects.
	 * After each publication, each of those words appears in a live slot
	 * (its lock held), long after its version was superseded (a short pin
	 * timeout), and the writer scans.  The active version stays readable.
	 */
	CHECK_EQ_U64(tdb_reader_open(&r, attack_prefix, NULL, TDB_VALIDATE_FULL, err), TDB_SHM_OK);
	for (int i = 0; i < 6; i++)
	{
		TdbReader	r2;
		int			rc;

		w.pin_timeout_us = 0;
		CHECK_EQ_U64(publish_traffic_sized(&w, map_seg, ++gen, tdb_traffic_size(NLOC, 0) + 65536), TDB_SHM_OK);
		w.pin_timeout_us = 1000;
		usleep(2000);
		for (int k = 0; k < nwords; k++)
		{
			atomic_store(&r.slot->pin, words[k]);
			tdb_writer_reclaim(&w, map_seg);
		}
		atomic_store(&r.slot->pin, 0);
		CHECK_EQ_U64(tdb_reader_open(&r2, attack_prefix, NULL, TDB_VALIDATE_FULL, err), TDB_SHM_OK);
		rc = tdb_reader_acquire(&r2, &s, err);
		if (rc != TDB_SHM_OK)
			unit_fail(__FILE__, __LINE__, "generation %llu: acquire of the active version: %d: %s",
					  (unsigned long long) gen, rc, err);
		else
		{
			CHECK_EQ_U64(s.generation, gen);
			CHECK(snapshot_intact(&s, gen));
		}
		tdb_reader_close(&r2);
	}

	/* and the next publications must not reuse its object under its readers */
	w.pin_timeout_us = 0;
	if (tdb_reader_acquire(&r, &s, err) == TDB_SHM_OK)
	{
		CHECK_EQ_U64(s.generation, gen);
		for (uint64_t g = gen + 1; g < gen + 5; g++)
			CHECK_EQ_U64(publish_traffic_sized(&w, map_seg, g, tdb_traffic_size(NLOC, 0) + 65536), TDB_SHM_OK);
		CHECK(!tdb_reader_revoked(&r, &s));
		CHECK(snapshot_intact(&s, gen));
		tdb_reader_release(&r);
	}
	else
		unit_fail(__FILE__, __LINE__, "acquire of the active version failed: %s", err);
	CHECK_EQ_U64(w.revoked, 0);
	tdb_reader_close(&r);
	tdb_writer_close(&w, true);
}

/*
 * A member of shm_group truncates and regrows <prefix>.readers in a loop
 * while the writer starts again and again (a daemon restarting): checking
 * the segment it finds must not die of SIGBUS (that would be a crash of a
 * PostgreSQL child, a restart of the whole server).
 */
UNIT_TEST(test_shm_readers_truncated_during_adoption)
{
	TdbWriter	w;
	TdbWriterOpenInfo info;
	char		err[TDB_ERRLEN];
	char		name[TDB_SHM_NAME_MAX + 24];
	uint32_t	map_seg;
	void	   *map_addr;
	uint64_t	count;
	pid_t		child;
	int			opened = 0;
	int			status = 0;

	snprintf(attack_prefix, sizeof(attack_prefix), "/tdbattack.%d", (int) getpid());
	CHECK_EQ_U64(test_writer_open(&w, attack_prefix, 64, 0, &info, err), TDB_SHM_OK);
	CHECK_EQ_U64(publish_map(&w, &map_seg, &map_addr, &count), TDB_SHM_OK);
	CHECK_EQ_U64(publish_traffic(&w, map_seg, 1), TDB_SHM_OK);
	tdb_writer_close(&w, false);
	tdb_shm_name(name, attack_prefix, "readers");
	child = fork();
	if (child == 0)
	{
		struct timespec t0,
					t;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		do
		{
			/* by name each time: a writer that did not adopt made a new one */
			int			fd = shm_open(name, O_RDWR, 0);

			if (fd >= 0)
			{
				for (int k = 0; k < 100; k++)
					if (ftruncate(fd, 0) != 0 || ftruncate(fd, (off_t) tdb_slots_size(64)) != 0)
						_exit(2);
				close(fd);
			}
			clock_gettime(CLOCK_MONOTONIC, &t);
		} while (t.tv_sec - t0.tv_sec < 3);
		_exit(0);
	}
	/* the writer opens for as long as the child runs: each open adopts or starts afresh */
	while (waitpid(child, &status, WNOHANG) == 0)
	{
		if (test_writer_open(&w, attack_prefix, 64, 0, &info, err) == TDB_SHM_OK)
		{
			opened++;
			tdb_writer_close(&w, false);
		}
	}
	printf("# %d writer starts while the readers segment was truncated and regrown\n", opened);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(opened > 100);
	CHECK_EQ_U64(test_writer_open(&w, attack_prefix, 64, 0, &info, err), TDB_SHM_OK);
	tdb_writer_close(&w, true);
}
