/*
 * test_cache.c
 *	  The disk block cache and the in-process LRU: exact bytes back, damaged
 *	  block files never served, the size bound kept, and crash safety: kill -9
 *	  of writers in the middle of filling the cache leaves only valid blocks.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "trail_fixture.h"
#include "trail_unit.h"

/* The content every test expects under key: a function of the key only. */
static size_t
expected_block(const char *key, uint8_t *out, size_t cap)
{
	uint64_t	st = 1469598103934665603ull;
	size_t		n;

	for (const char *p = key; *p; p++)
		st = (st ^ (uint8_t) *p) * 1099511628211ull;
	n = 1 + unit_rand(&st) % (cap - 1);
	for (size_t i = 0; i < n; i++)
		out[i] = (uint8_t) unit_rand(&st);
	return n;
}

UNIT_TEST(test_trail_disk_cache_roundtrip_and_damage)
{
	char		dir[256];
	TdbDiskCache *c;
	TdbTrailError err;
	uint8_t		want[20000],
				got[20000];
	TdbDiskCacheReport rep;

	fx_tmpdir(dir, sizeof(dir), "dc");
	CHECK(tdb_disk_cache_open(dir, 64 << 20, &c, &err) == 0);
	for (int i = 0; i < 100; i++)
	{
		char		key[64];
		size_t		n;

		snprintf(key, sizeof(key), "s3://b/k\netag\n16384\n%d", i);
		n = expected_block(key, want, sizeof(want));
		tdb_disk_cache_put(c, key, want, n);
	}
	for (int i = 0; i < 100; i++)
	{
		char		key[64];
		size_t		n;

		snprintf(key, sizeof(key), "s3://b/k\netag\n16384\n%d", i);
		n = expected_block(key, want, sizeof(want));
		memset(got, 0, sizeof(got));
		CHECK(tdb_disk_cache_get(c, key, got, n));
		CHECK(memcmp(got, want, n) == 0);
		/* a different length, a different ETag: misses */
		CHECK(!tdb_disk_cache_get(c, key, got, n + 1));
	}
	CHECK(!tdb_disk_cache_get(c, "s3://b/k\nother-etag\n16384\n1", got, 10));

	/* damage three block files in three ways: flip, truncate, empty */
	{
		char		cmd[700];
		FILE	   *f;
		char		path[512];
		int			k = 0;

		snprintf(cmd, sizeof(cmd), "find '%s/blocks' -type f | head -3", dir);
		f = popen(cmd, "r");
		while (f && fgets(path, sizeof(path), f))
		{
			FILE	   *b;

			path[strcspn(path, "\n")] = '\0';
			if (k == 0 && (b = fopen(path, "r+b")) != NULL)
			{
				int			ch;

				fseek(b, -5, SEEK_END);
				ch = fgetc(b);
				fseek(b, -5, SEEK_END);
				fputc(0x5A ^ ch, b);
				fclose(b);
			}
			else if (k == 1)
				CHECK(truncate(path, 40) == 0);
			else if (k == 2)
				CHECK(truncate(path, 0) == 0);
			k++;
		}
		if (f)
			pclose(f);
		CHECK_EQ_U64(k, 3);
	}
	CHECK(tdb_disk_cache_verify(dir, &rep, &err) == 0);
	CHECK_EQ_U64(rep.blocks_bad, 3);
	CHECK_EQ_U64(rep.blocks_ok, 97);
	/* every remaining block still reads back exactly; the damaged ones miss */
	{
		int			hits = 0;

		for (int i = 0; i < 100; i++)
		{
			char		key[64];
			size_t		n;

			snprintf(key, sizeof(key), "s3://b/k\netag\n16384\n%d", i);
			n = expected_block(key, want, sizeof(want));
			if (tdb_disk_cache_get(c, key, got, n))
			{
				hits++;
				CHECK(memcmp(got, want, n) == 0);
			}
		}
		CHECK_EQ_U64(hits, 97);
	}
	tdb_disk_cache_close(c);
	fx_rmtree(dir);
}

UNIT_TEST(test_trail_disk_cache_bounded)
{
	char		dir[256];
	TdbDiskCache *c;
	TdbTrailError err;
	uint8_t		want[20000];
	TdbDiskCacheReport rep;
	const uint64_t max = 300000;

	fx_tmpdir(dir, sizeof(dir), "dcb");
	CHECK(tdb_disk_cache_open(dir, max, &c, &err) == 0);
	for (int i = 0; i < 200; i++)
	{
		char		key[64];
		size_t		n;

		snprintf(key, sizeof(key), "u\ne\n16384\n%d", i);
		n = expected_block(key, want, sizeof(want));
		tdb_disk_cache_put(c, key, want, n);
	}
	CHECK(tdb_disk_cache_verify(dir, &rep, &err) == 0);
	CHECK(rep.bytes <= max);
	CHECK(rep.blocks_ok > 5);
	CHECK_EQ_U64(rep.blocks_bad, 0);
	tdb_disk_cache_close(c);
	/*
	 * a cache is opened per query: later opens in this process reuse what
	 * it knows of the directory's size instead of walking it again, and
	 * still keep it bounded
	 */
	{
		uint64_t	scans = tdb_disk_cache_scans();

		for (int q = 0; q < 50; q++)
		{
			char		key[64];
			size_t		n;

			CHECK(tdb_disk_cache_open(dir, max, &c, &err) == 0);
			snprintf(key, sizeof(key), "u\ne\n16384\n%d", 1000 + q);
			n = expected_block(key, want, sizeof(want));
			tdb_disk_cache_put(c, key, want, n);
			tdb_disk_cache_close(c);
		}
		/* only the sweeps the bound asked for walked it, not the 50 opens */
		CHECK(tdb_disk_cache_scans() - scans < 50);
		CHECK(tdb_disk_cache_verify(dir, &rep, &err) == 0);
		CHECK(rep.bytes <= max);
	}
	fx_rmtree(dir);
}

UNIT_TEST(test_trail_lru)
{
	TdbBlockLru *l = tdb_lru_create(10000);
	uint8_t		buf[4000],
				got[4000];

	for (int i = 0; i < 4000; i++)
		buf[i] = (uint8_t) i;
	tdb_lru_put(l, "a", buf, 4000);
	tdb_lru_put(l, "b", buf + 1, 3000);
	CHECK(tdb_lru_get(l, "a", 100, 50, got));
	CHECK(memcmp(got, buf + 100, 50) == 0);
	tdb_lru_put(l, "c", buf, 4000);	/* evicts b, the least recently used */
	CHECK(!tdb_lru_get(l, "b", 0, 1, got));
	CHECK(tdb_lru_get(l, "a", 0, 4000, got));
	CHECK(tdb_lru_get(l, "c", 3999, 1, got) && got[0] == buf[3999]);
	CHECK(!tdb_lru_get(l, "c", 3999, 2, got));	/* past the block */
	tdb_lru_put(l, "huge", buf, 4000);
	tdb_lru_put(l, "toolarge", NULL, 20000);	/* bigger than the LRU: ignored */
	CHECK(!tdb_lru_get(l, "toolarge", 0, 1, got));
	tdb_lru_free(l);
}

/*
 * 50 times: a child fills the cache (many blocks, a small bound so it also
 * evicts) and is killed with SIGKILL after a random few milliseconds.  Then
 * every block file must be valid, and each must hold exactly its key's bytes.
 */
UNIT_TEST(test_trail_disk_cache_kill9)
{
	char		dir[256];
	uint64_t	rng = 2024;
	TdbDiskCacheReport rep;
	TdbTrailError err;
	uint64_t	killed_mid = 0;

	fx_tmpdir(dir, sizeof(dir), "kill9");
	for (int iter = 0; iter < 50; iter++)
	{
		pid_t		pid = fork();

		if (pid == 0)
		{
			TdbDiskCache *c;
			uint8_t		want[20000];

			if (tdb_disk_cache_open(dir, 2 << 20, &c, NULL) < 0)
				_exit(1);
			/* bounded: 2000 blocks, far more than a few ms allows */
			for (int i = 0; i < 2000; i++)
			{
				char		key[64];
				size_t		n;

				snprintf(key, sizeof(key), "obj\netag\n16384\n%d", (iter * 37 + i) % 500);
				n = expected_block(key, want, sizeof(want));
				tdb_disk_cache_put(c, key, want, n);
			}
			_exit(0);
		}
		{
			struct timespec ts = {0, (long) (1 + unit_rand(&rng) % 30) * 1000000L};
			int			status;

			nanosleep(&ts, NULL);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			killed_mid += WIFSIGNALED(status);
		}
	}
	/* most children were killed mid-fill (some may finish on a slow machine) */
	CHECK(killed_mid > 25);
	CHECK(tdb_disk_cache_verify(dir, &rep, &err) == 0);
	CHECK_EQ_U64(rep.blocks_bad, 0);
	CHECK(rep.blocks_ok > 0);
	{
		TdbDiskCache *c;
		uint8_t		want[20000],
					got[20000];
		uint64_t	hits = 0;

		CHECK(tdb_disk_cache_open(dir, 2 << 20, &c, &err) == 0);
		for (int i = 0; i < 500; i++)
		{
			char		key[64];
			size_t		n;

			snprintf(key, sizeof(key), "obj\netag\n16384\n%d", i);
			n = expected_block(key, want, sizeof(want));
			if (tdb_disk_cache_get(c, key, got, n))
			{
				hits++;
				if (memcmp(got, want, n) != 0)
					unit_fail(__FILE__, __LINE__, "block %d has wrong bytes", i);
			}
		}
		CHECK_EQ_U64(hits, rep.blocks_ok);
		tdb_disk_cache_close(c);
	}
	printf("# kill -9 test: %llu of 50 writers killed mid-fill, %llu valid blocks, %llu tmp files removed\n",
		   (unsigned long long) killed_mid, (unsigned long long) rep.blocks_ok,
		   (unsigned long long) rep.tmp_removed);
	fx_rmtree(dir);
}

/*
 * Two disk caches of one process on one directory (two pagers of a backend,
 * one of them a read-ahead thread) writing blocks of equal length at once:
 * every block is found and is its own.  Their temporary names came from a
 * counter per cache, so both wrote the same file: 60 to 1,565 of 6,000
 * blocks lost per run, and a block could be found under another's key.
 */
#define TW_BLOCKS 1500
#define TW_LEN 4096

typedef struct TwArg
{
	TdbDiskCache *c;
	int			id;
	pthread_barrier_t *bar;
} TwArg;

static void
tw_block(int id, int i, char *key, size_t keylen, uint8_t *buf)
{
	snprintf(key, keylen, "obj%c\netag\n4096\n%05d", 'A' + id, i);
	memset(buf, 'A' + id, TW_LEN);
	memcpy(buf, &i, sizeof(i));
}

static void *
tw_writer(void *arg)
{
	TwArg	   *a = arg;
	uint8_t		buf[TW_LEN];
	char		key[64];

	for (int i = 0; i < TW_BLOCKS; i++)
	{
		tw_block(a->id, i, key, sizeof(key), buf);
		pthread_barrier_wait(a->bar);	/* in step: the same moment, the same counter */
		tdb_disk_cache_put(a->c, key, buf, TW_LEN);
	}
	return NULL;
}

UNIT_TEST(test_trail_disk_cache_writers_in_threads)
{
	char		dir[256];
	TwArg		a[2];
	pthread_t	t[2];
	pthread_barrier_t bar;
	TdbTrailError err;
	int			missing = 0,
				wrong = 0;

	fx_tmpdir(dir, sizeof(dir), "cache-threads");
	pthread_barrier_init(&bar, NULL, 2);
	for (int k = 0; k < 2; k++)
	{
		a[k].id = k;
		a[k].bar = &bar;
		CHECK(tdb_disk_cache_open(dir, 1ull << 34, &a[k].c, &err) == 0);
	}
	for (int k = 0; k < 2; k++)
		pthread_create(&t[k], NULL, tw_writer, &a[k]);
	for (int k = 0; k < 2; k++)
		pthread_join(t[k], NULL);
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < TW_BLOCKS; i++)
		{
			uint8_t		want[TW_LEN],
						got[TW_LEN];
			char		key[64];

			tw_block(k, i, key, sizeof(key), want);
			if (!tdb_disk_cache_get(a[k].c, key, got, TW_LEN))
				missing++;
			else if (memcmp(got, want, TW_LEN) != 0)
				wrong++;
		}
	printf("# %d blocks written by two threads: %d missing, %d another's\n", 2 * TW_BLOCKS, missing, wrong);
	CHECK(missing == 0);
	CHECK(wrong == 0);
	for (int k = 0; k < 2; k++)
		tdb_disk_cache_close(a[k].c);
	pthread_barrier_destroy(&bar);
}
