/*
 * test_shm_huge.c
 *	  Objects made of huge pages (tdb_shm_make_huge, the writer's
 *	  huge_pages): what is made huge is whole 2 MB pages only, the bytes
 *	  stay what they were, and a reader that maps the object finds it mapped
 *	  2 MB at a time.  Where the kernel cannot (before Linux 6.1, or no free
 *	  huge page) nothing is huge and everything else holds the same.
 */
#include "unit.h"
#include "reader.h"
#include "writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fixture.h"

#define MB ((size_t) 1 << 20)


/* kB of [addr, addr + len) that /proc/self/smaps says are mapped by PMD (-1: not found). */
static long
pmd_mapped_kb(const void *addr, size_t len)
{
	FILE	   *f = fopen("/proc/self/smaps", "r");
	char		line[512];
	long		kb = -1;
	int			inside = 0;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
	{
		unsigned long lo,
					hi;
		long		v;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
		{
			inside = lo < (uintptr_t) addr + len && hi > (uintptr_t) addr;
			continue;
		}
		if (inside && sscanf(line, "ShmemPmdMapped: %ld kB", &v) == 1)
			kb = (kb < 0 ? 0 : kb) + v;
	}
	fclose(f);
	return kb;
}

UNIT_TEST(test_shm_make_huge_whole_pages_same_bytes)
{
	char		name[64];
	void	   *p = NULL;
	void	   *q = NULL;
	size_t		qsize = 0;
	size_t		size = 6 * MB + 12345;
	size_t		got;
	unsigned char *b;

	snprintf(name, sizeof(name), "/tdbhuge.%d", (int) getpid());
	CHECK_EQ_U64(tdb_shm_create(name, size, (gid_t) -1, false, &p), TDB_SHM_OK);
	if (p == NULL)
		return;
	b = p;
	for (size_t i = 0; i < size; i += 4096)
		b[i] = (unsigned char) (i / 4096 * 7 + 1);
	b[size - 1] = 0xAB;

	/* nothing to do: no object, or one under 2 MB */
	CHECK_EQ_U64(tdb_shm_make_huge(NULL, size, 10000), 0);
	CHECK_EQ_U64(tdb_shm_make_huge(p, 2 * MB - 1, 10000), 0);
	/* no time: one page at most, then it stops */
	CHECK(tdb_shm_make_huge(p, size, 0) <= 2 * MB);

	got = tdb_shm_make_huge(p, size, 10000);
	/* whole 2 MB pages (the mapping is aligned), never the tail under 2 MB */
	CHECK(got == 0 || got == 6 * MB);
	for (size_t i = 0; i < size; i += 4096)
		if (b[i] != (unsigned char) (i / 4096 * 7 + 1))
		{
			CHECK_EQ_U64(b[i], (unsigned char) (i / 4096 * 7 + 1));
			break;
		}
	CHECK_EQ_U64(b[size - 1], 0xAB);

	/* another mapping (a reader's) sees the same bytes, 2 MB at a time when made huge */
	CHECK_EQ_U64(tdb_shm_map(name, false, true, 0, &q, &qsize), TDB_SHM_OK);
	if (q != NULL)
	{
		CHECK_EQ_U64(qsize, size);
		CHECK(memcmp(p, q, size) == 0);
		if (got > 0)
			CHECK_EQ_U64(pmd_mapped_kb(q, size), got / 1024);
		tdb_shm_unmap(q, qsize);
	}
	else
		fprintf(stderr, "    (tdb_shm_map failed)\n");
	if (got == 0)
		fprintf(stderr, "    (this kernel made no huge page: only the unchanged bytes were checked)\n");
	tdb_shm_unmap(p, size);
	shm_unlink(name);
}

UNIT_TEST(test_shm_writer_makes_objects_huge)
{
	char		prefix[64];
	TdbWriter	w;
	TdbWriterConfig cfg;
	TdbWriterOpenInfo info;
	char		err[TDB_ERRLEN];
	uint32_t	map_seg;
	void	   *map_addr;
	uint64_t	count;
	TdbReader	r;
	TdbSnapshot s;
	bool		on;
	unsigned	sink = 0;

	for (int k = 0; k < 2; k++)
	{
		on = k == 1;
		snprintf(prefix, sizeof(prefix), "/tdbhugew.%d.%d", (int) getpid(), k);
		memset(&cfg, 0, sizeof(cfg));
		cfg.nexternal_slots = 4;
		cfg.gid = (gid_t) -1;
		cfg.lock_fd = -1;
		cfg.postmaster_pid = 1;
		cfg.huge_pages = on;
		CHECK_EQ_U64(tdb_writer_open(&w, prefix, &cfg, &info, err), TDB_SHM_OK);
		CHECK_EQ_U64(publish_map(&w, &map_seg, &map_addr, &count), TDB_SHM_OK);
		/* a traffic buffer of 5 MB: two whole huge pages, and a tail */
		CHECK_EQ_U64(publish_traffic_sized(&w, map_seg, 1, 5 * MB), TDB_SHM_OK);
		if (!on)
			CHECK_EQ_U64(tdb_writer_huge_bytes(&w), 0);
		else if (fixture_kernel_makes_huge())
			CHECK_EQ_U64(tdb_writer_huge_bytes(&w), 4 * MB);
		else
			CHECK(tdb_writer_huge_bytes(&w) == 0 || tdb_writer_huge_bytes(&w) == 4 * MB);

		CHECK_EQ_U64(tdb_reader_open(&r, prefix, NULL, TDB_VALIDATE_FULL, err), TDB_SHM_OK);
		CHECK_EQ_U64(tdb_reader_acquire(&r, &s, err), TDB_SHM_OK);
		CHECK(snapshot_intact(&s, 1));
		/* smaps counts what is mapped: fault in the whole buffer first */
		for (size_t off = 0; off < 5 * MB; off += 4096)
			sink += ((const volatile unsigned char *) s.traffic)[off];
		if (tdb_writer_huge_bytes(&w) > 0)
			CHECK_EQ_U64(pmd_mapped_kb(s.traffic, 5 * MB), 4096);
		else if (!on)
			CHECK_EQ_U64(pmd_mapped_kb(s.traffic, 5 * MB), 0);
		tdb_reader_release(&r);
		tdb_reader_close(&r);
		tdb_writer_close(&w, true);
	}
	(void) sink;
}
