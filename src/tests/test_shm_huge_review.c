/*
 * test_shm_huge_review.c
 *	  Review tests of tdb_shm_make_huge (ef53b93): every byte of an object
 *	  survives the collapse whatever its size, how much of it was written,
 *	  and however the caller passes addr/size; and the stress tests of the
 *	  reader/writer protocol with huge_pages on and objects of 2 MB or more.
 */
#include "unit.h"
#include "reader.h"
#include "writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fixture.h"

#define MB ((size_t) 1 << 20)

static unsigned char
pat(uint64_t seed, size_t i)
{
	uint64_t	s = seed ^ (i * 0x9E3779B97F4A7C15ull);

	return (unsigned char) (unit_rand(&s) >> 56);
}

/* first index in [0, n) whose byte differs from pat(seed, i) (or zero past written), n if none */
static size_t
first_bad(const unsigned char *b, size_t n, uint64_t seed, size_t written)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != (i < written ? pat(seed, i) : 0))
			return i;
	return n;
}


/* Sizes around the page boundaries, each written whole, partly, or not at all. */
UNIT_TEST(test_shm_make_huge_review_sizes_and_partial_writes)
{
	const size_t sizes[] = {0, 1, 4096, 2 * MB - 1, 2 * MB, 2 * MB + 1, 4 * MB - 4096, 6 * MB + 12345, 33 * MB + 7};
	const bool	collapses = fixture_kernel_makes_huge();

	if (!collapses)
		fprintf(stderr, "    (this kernel collapses nothing: only unchanged bytes are checked)\n");
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
		for (int part = 0; part < 3; part++)
		{
			size_t		size = sizes[k];
			size_t		written = part == 0 ? size : part == 1 ? size / 2 + 4093 : 0;
			char		name[64];
			void	   *p = NULL;
			void	   *q = NULL;
			size_t		qsize = 0;
			uint64_t	seed = 1000 * k + part;
			size_t		got,
						bad;
			int			rc;

			if (written > size)
				written = size;
			snprintf(name, sizeof(name), "/tdbhuger.%d.%zu.%d", (int) getpid(), k, part);
			rc = tdb_shm_create(name, size, (gid_t) -1, false, &p);
			if (size == 0)
			{
				/* mmap of 0 bytes fails: tdb_shm_create refuses; make_huge of (p, 0) is a no-op */
				CHECK_EQ_U64(tdb_shm_make_huge(p, 0, 10000), 0);
				if (rc == TDB_SHM_OK)
					tdb_shm_unmap(p, size);
				shm_unlink(name);
				continue;
			}
			CHECK_EQ_U64(rc, TDB_SHM_OK);
			if (rc != TDB_SHM_OK)
				continue;
			for (size_t i = 0; i < written; i++)
				((unsigned char *) p)[i] = pat(seed, i);
			got = tdb_shm_make_huge(p, size, 10000);
			if (collapses)
				CHECK_EQ_U64(got, size / (2 * MB) * (2 * MB));
			else
				CHECK(got == 0 || got == size / (2 * MB) * (2 * MB));
			bad = first_bad(p, size, seed, written);
			if (bad != size)
				unit_fail(__FILE__, __LINE__, "size %zu written %zu: byte %zu changed by the collapse", size, written, bad);
			/* a second collapse of what is huge already: success, nothing changed */
			CHECK_EQ_U64(tdb_shm_make_huge(p, size, 10000), got);
			/* writes after the collapse land, and another mapping sees all */
			if (size > 0)
			{
				((unsigned char *) p)[size - 1] = 0x5A;
				((unsigned char *) p)[0] = 0xA5;
			}
			CHECK_EQ_U64(tdb_shm_map(name, false, true, 0, &q, &qsize), TDB_SHM_OK);
			if (q != NULL)
			{
				CHECK_EQ_U64(qsize, size);
				CHECK(memcmp(p, q, size) == 0);
				tdb_shm_unmap(q, qsize);
			}
			tdb_shm_unmap(p, size);
			shm_unlink(name);
		}
}

/* addr NULL, unaligned, or a range that is not the object's start: nothing changes. */
UNIT_TEST(test_shm_make_huge_review_odd_arguments)
{
	char		name[64];
	void	   *p = NULL;
	size_t		size = 8 * MB + 4096;
	unsigned char *b;
	size_t		got;
	uint64_t	seed = 77;

	snprintf(name, sizeof(name), "/tdbhugera.%d", (int) getpid());
	CHECK_EQ_U64(tdb_shm_create(name, size, (gid_t) -1, false, &p), TDB_SHM_OK);
	if (p == NULL)
		return;
	b = p;
	for (size_t i = 0; i < size; i++)
		b[i] = pat(seed, i);
	CHECK_EQ_U64(tdb_shm_make_huge(NULL, size, 10000), 0);
	CHECK_EQ_U64(tdb_shm_make_huge(NULL, 0, 10000), 0);
	CHECK_EQ_U64(tdb_shm_make_huge(p, 0, 10000), 0);
	CHECK_EQ_U64(tdb_shm_make_huge(b + 1, 2 * MB, 10000), 0);	/* no whole aligned page inside */
	/* unaligned start: the whole aligned pages inside only */
	got = tdb_shm_make_huge(b + 4096, size - 4096, 10000);
	CHECK(got == 0 || got == 6 * MB);
	got = tdb_shm_make_huge(b + 1, size - 1, 10000);
	CHECK(got == 0 || got == 6 * MB || got == 8 * MB);
	/* huge size (wrapping the address space): must not loop or touch others */
	got = tdb_shm_make_huge(b, SIZE_MAX - (uintptr_t) b + 1, 10000);
	printf("# make_huge(p, wrap) = %zu\n", got);
	got = tdb_shm_make_huge(b, size + 64 * MB, 10000);	/* past the mapping: stops at ENOMEM */
	printf("# make_huge(p, size + 64 MB) = %zu\n", got);
	CHECK(got <= size + 64 * MB);
	CHECK_EQ_U64(first_bad(b, size, seed, size), size);

	/*
	 * A mapping that is not 2 MB-aligned (a reader that maps it with plain
	 * mmap at an address 4 kB off): virtual and file offsets differ mod
	 * 2 MB, the kernel cannot collapse there (EINVAL): 0, nothing changed.
	 */
	{
		int			fd = shm_open(name, O_RDWR, 0);
		char	   *r = mmap(NULL, size + 4 * MB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		char	   *a = (char *) ((((uintptr_t) r + 2 * MB - 1) & ~(uintptr_t) (2 * MB - 1)) + 4096);
		unsigned char *m = mmap(a, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);

		CHECK(fd >= 0 && r != MAP_FAILED && m != MAP_FAILED);
		if (fd >= 0 && m != MAP_FAILED)
		{
			got = tdb_shm_make_huge(m, size, 10000);
			printf("# make_huge of a mapping 4 kB off 2 MB alignment = %zu\n", got);
			CHECK_EQ_U64(got, 0);
			CHECK_EQ_U64(first_bad(m, size, seed, size), size);
		}
		if (r != MAP_FAILED)
			munmap(r, size + 4 * MB);
		if (fd >= 0)
			close(fd);
	}
	tdb_shm_unmap(p, size);
	shm_unlink(name);
}

/*
 * The reader/writer stress tests with huge_pages on and objects big enough
 * to be collapsed (the fixture's are under 2 MB: huge_pages alone changes
 * nothing there): traffic buffers of 4 MB + 4 kB (two huge pages and a
 * tail), the map padded to 6 MB.  Readers map collapsed objects while the
 * writer publishes and rewrites reused buffers in place.
 */
static void
huge_fixture(bool on)
{
	fixture_huge_pages = on;
	fixture_traffic_bytes = on ? 4 * MB + 4096 : 0;
	fixture_map_bytes = on ? 6 * MB : 0;
}

UNIT_TEST(test_shm_readers_see_consistent_versions_huge)
{
	huge_fixture(true);
	test_shm_readers_see_consistent_versions();
	huge_fixture(false);
}

UNIT_TEST(test_shm_pin_stress_huge)
{
	huge_fixture(true);
	test_shm_pin_stress();
	huge_fixture(false);
}

/* The knobs do what they say: the writer's objects are collapsed (where the kernel can). */
UNIT_TEST(test_shm_huge_fixture_collapses)
{
	char		prefix[64];
	char		err[TDB_ERRLEN];
	TdbWriter	w;
	TdbWriterOpenInfo info;
	uint32_t	map_seg;
	void	   *map_addr;
	uint64_t	count;

	huge_fixture(true);
	snprintf(prefix, sizeof(prefix), "/tdbhugefx.%d", (int) getpid());
	CHECK_EQ_U64(test_writer_open(&w, prefix, 4, 0, &info, err), TDB_SHM_OK);
	CHECK_EQ_U64(publish_map(&w, &map_seg, &map_addr, &count), TDB_SHM_OK);
	CHECK_EQ_U64(publish_traffic(&w, map_seg, 1), TDB_SHM_OK);
	printf("# %llu bytes, %llu huge\n", (unsigned long long) tdb_writer_bytes(&w), (unsigned long long) tdb_writer_huge_bytes(&w));
	if (fixture_kernel_makes_huge())
		CHECK_EQ_U64(tdb_writer_huge_bytes(&w), 6 * MB + 4 * MB);
	tdb_writer_close(&w, true);
	huge_fixture(false);
}
