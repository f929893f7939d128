/*
 * tdbread.c
 *	  An external reader of trafficdb's shared memory, for operators and
 *	  tests: prints what is published, or reads continuously for a while and
 *	  checks every snapshot, reopening when the server restarts.
 *
 *	  tdbread PREFIX                 one snapshot: generation, counts
 *	  tdbread PREFIX watch SECONDS   read continuously, then report
 *	  tdbread PREFIX hold SECONDS    pin one snapshot and keep it (tests of late
 *	                                 and killed readers)
 *
 * PREFIX is the shared memory name prefix, "/trafficdb.<port>" unless
 * trafficdb.shm_name says otherwise.  Exit status 0 when every snapshot was
 * consistent, 1 otherwise, 2 on bad usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "reader.h"


/* A snapshot is consistent if its traffic object matches its version. */
static int
check_snapshot(const TdbSnapshot *s)
{
	const TdbObjectHeader *t = s->traffic;

	if (t->generation != s->generation || t->count != s->map->count ||
		t->map_id != s->map->hdr->map_id)
		return 0;
	for (uint64_t i = 0; i < s->map->count; i += 1 + s->map->count / 64)
		if (s->entries[i].changed_gen > s->generation ||
			tdb_map_find(s->map, s->map->records[i].id) != (int64_t) i)
			return 0;
	return 1;
}

int
main(int argc, char **argv)
{
	TdbReader	r;
	TdbSnapshot s;
	char		err[TDB_ERRLEN];
	int			rc;
	double		seconds = 0,
				end;
	unsigned long long reads = 0,
				bad = 0,
				reopens = 0,
				empty = 0,
				errors = 0;
	uint64_t	first_gen = 0,
				last_gen = 0,
				went_back = 0;
	int			open = 0;

	if (argc == 4 && strcmp(argv[2], "hold") == 0)
	{
		rc = tdb_reader_open(&r, argv[1], NULL, TDB_VALIDATE_FULL, err);
		if (rc == TDB_SHM_OK)
			rc = tdb_reader_acquire(&r, &s, err);
		if (rc != TDB_SHM_OK)
		{
			fprintf(stderr, "tdbread: %s (code %d)\n", err, rc);
			return 1;
		}
		printf("holding generation %llu in slot %d\n", (unsigned long long) s.generation, r.slot_idx);
		fflush(stdout);
		sleep((unsigned) atoi(argv[3]));
		/* told whether the version was revoked meanwhile (pin timeout) */
		printf("released generation %llu revoked=%d consistent=%d\n", (unsigned long long) s.generation,
			   tdb_reader_revoked(&r, &s), check_snapshot(&s));
		tdb_reader_release(&r);
		tdb_reader_close(&r);
		return 0;
	}
	if (argc == 4 && strcmp(argv[2], "watch") == 0)
		seconds = atof(argv[3]);
	else if (argc != 2)
	{
		fprintf(stderr, "usage: tdbread PREFIX [watch SECONDS | hold SECONDS]\n");
		return 2;
	}

	if (seconds == 0)
	{
		rc = tdb_reader_open(&r, argv[1], NULL, TDB_VALIDATE_FULL, err);
		if (rc == TDB_SHM_OK)
			rc = tdb_reader_acquire(&r, &s, err);
		if (rc != TDB_SHM_OK)
		{
			fprintf(stderr, "tdbread: %s (code %d)\n", err, rc);
			return 1;
		}
		printf("generation=%llu locations=%llu map_id=%llu consistent=%d\n",
			   (unsigned long long) s.generation, (unsigned long long) s.map->count,
			   (unsigned long long) s.map->hdr->map_id, check_snapshot(&s));
		tdb_reader_release(&r);
		tdb_reader_close(&r);
		return 0;
	}

	end = tdb_mono_s() + seconds;
	while (tdb_mono_s() < end)
	{
		if (!open)
		{
			if (tdb_reader_open(&r, argv[1], NULL, TDB_VALIDATE_FULL, err) != TDB_SHM_OK)
			{
				errors++;
				usleep(20000);
				continue;
			}
			open = 1;
		}
		rc = tdb_reader_acquire(&r, &s, err);
		if (rc == TDB_SHM_ESTALE)
		{
			tdb_reader_close(&r);
			open = 0;
			reopens++;
			continue;
		}
		if (rc == TDB_SHM_EEMPTY)
		{
			empty++;
			usleep(1000);
			continue;
		}
		if (rc != TDB_SHM_OK)
		{
			fprintf(stderr, "tdbread: %s\n", err);
			errors++;
			usleep(1000);
			continue;
		}
		reads++;
		if (!check_snapshot(&s))
			bad++;
		if (first_gen == 0)
			first_gen = s.generation;
		if (s.generation < last_gen)
			went_back++;
		last_gen = s.generation;
		tdb_reader_release(&r);
	}
	if (open)
		tdb_reader_close(&r);
	printf("reads=%llu inconsistent=%llu went_back=%llu first_generation=%llu last_generation=%llu reopens=%llu empty=%llu errors=%llu\n",
		   reads, bad, (unsigned long long) went_back, (unsigned long long) first_gen,
		   (unsigned long long) last_gen, reopens, empty, errors);
	return (bad == 0 && went_back == 0) ? 0 : 1;
}
