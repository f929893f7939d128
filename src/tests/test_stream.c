/*
 * test_stream.c
 *	  Stream files (src/stream/): the crash guarantee proven by simulated
 *	  power loss at every write (stream_fixture.h), failing I/O operations,
 *	  bit flips in every structure, kill -9 of a writer process and the
 *	  recovery bound.  After each crash the file must open, hold every
 *	  record acknowledged by a successful flush byte for byte, and anything
 *	  later whole or not at all.  Reads and refresh: test_stream_reads.c;
 *	  codecs and the schema language: test_stream_codecs.c.
 */
#include "unit.h"
#include "stream_fixture.h"

#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stream/stream.h"

/* ---- the tests -------------------------------------------------------------------- */

UNIT_TEST(test_stream_roundtrip_and_wrap)
{
	CrashIO		c;
	TdbStreamIO io;
	TdbStreamDB *db;
	static Model m;
	char		err[256];
	TdbStreamFileInfo info;

	cio_init(&c, 64 * 1024, &io);
	create_file(&io);
	memset(&m, 0, sizeof(m));
	CHECK_EQ_U64(tdb_stream_open(&io, &db, err, sizeof(err)), TDB_STREAM_OK);
	CHECK_EQ_U64(run_workload(db, &m, 7, 3000), TDB_STREAM_OK);
	CHECK_EQ_U64(tdb_stream_flush(db), TDB_STREAM_OK);
	memcpy(m.acked, m.n, sizeof(m.n));
	memcpy(m.pending, m.n, sizeof(m.n));
	tdb_stream_info(db, &info);
	/* 3,000 records of 22 and 28 bytes do not fit 64 KB: the file wrapped */
	CHECK(info.data_blocks < 60 && info.free_blocks == 0);
	CHECK(check_against_model(db, &m, "before reopening"));
	CHECK_EQ_U64(tdb_stream_verify(db), TDB_STREAM_OK);
	tdb_stream_close(db);
	CHECK_EQ_U64(tdb_stream_open(&io, &db, err, sizeof(err)), TDB_STREAM_OK);
	CHECK(check_against_model(db, &m, "after reopening"));
	/* point lookups: the last record at or before t */
	{
		TdbStreamRecord r;
		int			i = m.n[1] - 5;

		CHECK_EQ_U64(tdb_stream_at(db, 1, m.ts[1][i], &r), TDB_STREAM_OK);
		CHECK(r.ts == m.ts[1][i] && r.vals[0].v.i == m.vals[1][i][0].v.i);
		CHECK_EQ_U64(tdb_stream_at(db, 1, m.ts[1][i + 1] - 1, &r), TDB_STREAM_OK);
		CHECK(r.ts == m.ts[1][i]);
		CHECK_EQ_U64(tdb_stream_at(db, 1, 0, &r), (uint64_t) TDB_STREAM_ENOTFOUND);
	}
	/* order is enforced and named */
	{
		TdbStreamValue v[4] = {{0}};

		CHECK_EQ_U64(tdb_stream_insert(db, 0, m.ts[0][m.n[0] - 1], v), (uint64_t) TDB_STREAM_EORDER);
		CHECK(strstr(tdb_stream_errmsg(db), "is not after the last one of stream speed") != NULL);
		v[0].isnull = true;
		CHECK_EQ_U64(tdb_stream_insert(db, 0, m.ts[0][m.n[0] - 1] + 1, v), (uint64_t) TDB_STREAM_EINVAL);
	}
	tdb_stream_close(db);
	cio_free(&c);
}

/*
 * Power loss at every write of the workload, in each of the three ways a
 * write in flight can end; then the file opens, the guarantee holds, and
 * writing goes on.
 */
UNIT_TEST(test_stream_power_loss_at_every_write)
{
	CrashIO		c;
	TdbStreamIO io;
	static Model m;
	long		total;
	long		points = 0;
	char		err[256];

	/* count the workload's writes */
	{
		TdbStreamDB *db;

		cio_init(&c, 64 * 1024, &io);
		create_file(&io);
		memset(&m, 0, sizeof(m));
		tdb_stream_open(&io, &db, err, sizeof(err));
		c.writes = 0;
		run_workload(db, &m, 11, 1500);
		total = c.writes;
		tdb_stream_close(db);
		cio_free(&c);
	}
	CHECK(total > 500);
	for (int mode = 0; mode < 3; mode++)
		for (long at = 1; at <= total; at++)
		{
			TdbStreamDB *db;
			int			rc;
			char		what[64];

			cio_init(&c, 64 * 1024, &io);
			create_file(&io);
			memset(&m, 0, sizeof(m));
			c.rng = (uint64_t) at * 31 + (uint64_t) mode;
			tdb_stream_open(&io, &db, err, sizeof(err));
			c.writes = 0;
			c.crash_at = at;
			rc = run_workload(db, &m, 11, 1500);
			tdb_stream_close(db);
			snprintf(what, sizeof(what), "crash mode %d at write %ld", mode, at);
			if (rc == TDB_STREAM_OK)
			{
				cio_free(&c);
				continue;
			}
			cio_power_loss(&c, mode);
			points++;
			if ((rc = tdb_stream_open(&io, &db, err, sizeof(err))) != TDB_STREAM_OK)
			{
				unit_fail(__FILE__, __LINE__, "%s: open failed: %s", what, err);
				cio_free(&c);
				return;
			}
			if (!check_against_model(db, &m, what))
			{
				tdb_stream_close(db);
				cio_free(&c);
				return;
			}
			/* recovery leaves a file that takes more data */
			{
				int			inserted[W_STREAMS];

				Collect    *got = calloc(1, sizeof(Collect));

				memcpy(inserted, m.n, sizeof(m.n));
				memcpy(m.n, m.acked, sizeof(m.n));
				for (int s = 0; s < W_STREAMS; s++)
				{
					got->n = 0;
					tdb_stream_range(db, s, INT64_MIN + 1, INT64_MAX, collect, got);
					/* the model continues from what survived (the interrupted flush may have) */
					if (got->n > 0)
						while (m.n[s] < inserted[s] && m.ts[s][m.n[s]] <= got->recs[got->n - 1].ts)
							m.n[s]++;
				}
				free(got);
			}
			memcpy(m.acked, m.n, sizeof(m.n));
			memcpy(m.pending, m.n, sizeof(m.n));
			if (run_workload(db, &m, 99 + (uint64_t) at, 40) != TDB_STREAM_OK ||
				tdb_stream_flush(db) != TDB_STREAM_OK)
				unit_fail(__FILE__, __LINE__, "%s: writing after recovery failed: %s", what,
						  tdb_stream_errmsg(db));
			memcpy(m.acked, m.n, sizeof(m.n));
			memcpy(m.pending, m.n, sizeof(m.n));
			tdb_stream_close(db);
			if (tdb_stream_open(&io, &db, err, sizeof(err)) != TDB_STREAM_OK ||
				!check_against_model(db, &m, what))
				unit_fail(__FILE__, __LINE__, "%s: after writing on: %s", what, err);
			tdb_stream_close(db);
			cio_free(&c);
			if (unit_failures)
				return;
		}
	printf("# %ld crash points (%ld writes x 3 ways)\n", points, total);
	CHECK(points >= 3 * total - 3);
}

/*
 * The k-th I/O operation fails, once or from then on (EIO, a short write,
 * a failed sync): the call reports it, the handle refuses more work, and
 * after a power loss and reopening the guarantee holds.
 */
UNIT_TEST(test_stream_io_errors_at_every_operation)
{
	CrashIO		c;
	TdbStreamIO io;
	static Model m;
	long		total;
	char		err[256];

	{
		TdbStreamDB *db;

		cio_init(&c, 64 * 1024, &io);
		create_file(&io);
		memset(&m, 0, sizeof(m));
		tdb_stream_open(&io, &db, err, sizeof(err));
		c.ops = 0;
		run_workload(db, &m, 23, 600);
		total = c.ops;
		tdb_stream_close(db);
		cio_free(&c);
	}
	for (int persist = 0; persist < 2; persist++)
		for (long k = 1; k <= total; k++)
		{
			TdbStreamDB *db;
			int			rc;
			char		what[64];
			TdbStreamValue v[4] = {{0}};

			cio_init(&c, 64 * 1024, &io);
			create_file(&io);
			memset(&m, 0, sizeof(m));
			c.rng = (uint64_t) k;
			tdb_stream_open(&io, &db, err, sizeof(err));
			c.ops = 0;
			c.fail_at = k;
			c.fail_persist = persist;
			rc = run_workload(db, &m, 23, 600);
			snprintf(what, sizeof(what), "%s failure of operation %ld", persist ? "persistent" : "one", k);
			if (rc == TDB_STREAM_OK)
			{
				tdb_stream_close(db);
				cio_free(&c);
				continue;
			}
			/* reads fail as EIO too; a failed write or sync breaks the handle */
			CHECK(rc == TDB_STREAM_EIO);
			if (tdb_stream_flush(db) == TDB_STREAM_OK)
				unit_fail(__FILE__, __LINE__, "%s: a flush after the failure succeeded", what);
			(void) v;
			tdb_stream_close(db);
			cio_power_loss(&c, 0);
			if (tdb_stream_open(&io, &db, err, sizeof(err)) != TDB_STREAM_OK)
			{
				unit_fail(__FILE__, __LINE__, "%s: open failed: %s", what, err);
				cio_free(&c);
				return;
			}
			CHECK(check_against_model(db, &m, what));
			tdb_stream_close(db);
			cio_free(&c);
			if (unit_failures)
				return;
		}
}

/*
 * Every bit of both superblocks, the schema and the index of a small
 * file, flipped in turn: superblock and index damage is repaired from the
 * other copy with every record intact; schema damage is a clear error.
 */
UNIT_TEST(test_stream_bit_flips)
{
	CrashIO		c;
	TdbStreamIO io;
	TdbStreamDB *db;
	static Model m;
	char		err[256];
	uint8_t    *good;
	long		repaired = 0,
				refused = 0;
	struct
	{
		uint64_t	off,
					len;
		bool		repairable;
	}			regions[] = {
		{0, 1024, true},		/* superblock copy 0 (block 0) */
		{1024, 1024, true},		/* copy 1 */
		{2048, 4096, false},	/* the schema */
		{6144, 4096, true},		/* the index, both copies */
	};

	cio_init(&c, 64 * 1024, &io);
	create_file(&io);
	memset(&m, 0, sizeof(m));
	tdb_stream_open(&io, &db, err, sizeof(err));
	run_workload(db, &m, 5, 200);
	tdb_stream_flush(db);
	memcpy(m.acked, m.n, sizeof(m.n));
	memcpy(m.pending, m.n, sizeof(m.n));
	tdb_stream_close(db);
	good = malloc(c.size);
	memcpy(good, c.cache, c.size);
	for (size_t r = 0; r < sizeof(regions) / sizeof(regions[0]); r++)
		for (uint64_t bit = 0; bit < regions[r].len * 8; bit += (regions[r].repairable ? 1 : 7))
		{
			uint64_t	byte = regions[r].off + bit / 8;
			int			rc;

			memcpy(c.cache, good, c.size);
			c.cache[byte] ^= (uint8_t) (1u << (bit % 8));
			rc = tdb_stream_open(&io, &db, err, sizeof(err));
			if (rc == TDB_STREAM_OK)
			{
				char		what[64];

				snprintf(what, sizeof(what), "bit %llu flipped", (unsigned long long) (byte * 8 + bit % 8));
				if (!check_against_model(db, &m, what))
				{
					tdb_stream_close(db);
					goto out;
				}
				repaired++;
				tdb_stream_close(db);
			}
			else
			{
				refused++;
				if (regions[r].repairable)
				{
					unit_fail(__FILE__, __LINE__, "a flip at byte %llu (repairable) refused: %s",
							  (unsigned long long) byte, err);
					goto out;
				}
				CHECK(rc == TDB_STREAM_ECORRUPT && strstr(err, "schema") != NULL);
			}
		}
	printf("# %ld flips repaired, %ld refused with a clear error\n", repaired, refused);
	/* foreign and truncated files */
	memset(c.cache, 0x5a, c.size);
	CHECK_EQ_U64(tdb_stream_open(&io, &db, err, sizeof(err)), (uint64_t) TDB_STREAM_EFORMAT);
	CHECK(strstr(err, "no stream file here") != NULL);
	memcpy(c.cache, good, c.size);
	io.size = 20 * 1024;		/* truncated below its data */
	CHECK(tdb_stream_open(&io, &db, err, sizeof(err)) != TDB_STREAM_OK);
	io.size = 1000;
	CHECK_EQ_U64(tdb_stream_open(&io, &db, err, sizeof(err)), (uint64_t) TDB_STREAM_EFORMAT);
	/* random garbage over every structure, 2,000 rounds: an error or a consistent file */
	io.size = c.size;
	{
		uint64_t	rng = 77;

		for (int round = 0; round < 2000; round++)
		{
			memcpy(c.cache, good, c.size);
			for (int k = 0; k < 1 + round % 20; k++)
				c.cache[unit_rand(&rng) % (10 * 1024)] = (uint8_t) unit_rand(&rng);
			if (tdb_stream_open(&io, &db, err, sizeof(err)) == TDB_STREAM_OK)
			{
				(void) tdb_stream_verify(db);
				tdb_stream_close(db);
			}
		}
	}
out:
	free(good);
	cio_free(&c);
}

/* Opening reads the same for an empty file and a full, wrapped one: the superblocks and the schema. */
UNIT_TEST(test_stream_recovery_is_bounded)
{
	CrashIO		a,
				b;
	TdbStreamIO ioa,
				iob;
	TdbStreamDB *db;
	static Model m;
	char		err[256];
	TdbStreamFileInfo ia,
				ib;

	cio_init(&a, 64 * 1024, &ioa);
	cio_init(&b, 64 * 1024, &iob);
	create_file(&ioa);
	create_file(&iob);
	memset(&m, 0, sizeof(m));
	tdb_stream_open(&iob, &db, err, sizeof(err));
	run_workload(db, &m, 3, 3000);
	tdb_stream_flush(db);
	tdb_stream_close(db);

	CHECK_EQ_U64(tdb_stream_open(&ioa, &db, err, sizeof(err)), TDB_STREAM_OK);
	tdb_stream_info(db, &ia);
	tdb_stream_close(db);
	CHECK_EQ_U64(tdb_stream_open(&iob, &db, err, sizeof(err)), TDB_STREAM_OK);
	tdb_stream_info(db, &ib);
	tdb_stream_close(db);
	CHECK(ib.free_blocks == 0 && ia.free_blocks == ia.data_blocks);
	/* superblocks and schema only: the index and the last chunks are read when needed */
	CHECK_EQ_U64(ib.open_reads, ia.open_reads);
	printf("# open reads %llu sectors (empty) and %llu (full, wrapped)\n",
		   (unsigned long long) ia.open_reads, (unsigned long long) ib.open_reads);
	cio_free(&a);
	cio_free(&b);
}

/*
 * A writer process killed with kill -9 at a random moment, 200 times: every
 * flush it acknowledged (through a pipe) is in the file when it reopens.
 */
UNIT_TEST(test_stream_kill9_writer)
{
	char		path[] = "/tmp/tdb-stream-kill-XXXXXX";
	int			fd = mkstemp(path);
	TdbStreamIO io;
	char		err[256];
	TdbStreamSchema schema;
	uint64_t	rng = 1234;

	close(fd);
	unlink(path);
	tdb_stream_parse_rdl("SET blockSize = 4096; SET fileSize = 1MB;\n"
						 "CREATE STREAM s WITH ID 1 { v int64, w float64 };", &schema, err, sizeof(err));
	CHECK_EQ_U64(tdb_stream_io_file(path, true, 1 << 20, &io, err, sizeof(err)), TDB_STREAM_OK);
	CHECK_EQ_U64(tdb_stream_create(&io, &schema, err, sizeof(err)), TDB_STREAM_OK);
	tdb_stream_io_file_close(&io);
	for (int round = 0; round < 200; round++)
	{
		int			p[2];
		pid_t		pid;
		int64_t		acked = 0,
					got;
		TdbStreamDB *db;
		TdbStreamRecord r;

		CHECK(pipe(p) == 0);
		pid = fork();
		if (pid == 0)
		{
			/* the child appends from where the file ends, acknowledging each flush */
			TdbStreamIO cio;
			TdbStreamDB *cdb;
			TdbStreamRecord last;
			int64_t		next = 1;

			close(p[0]);
			if (tdb_stream_io_file(path, false, 0, &cio, err, sizeof(err)) != TDB_STREAM_OK ||
				tdb_stream_open(&cio, &cdb, err, sizeof(err)) != TDB_STREAM_OK)
				_exit(2);
			if (tdb_stream_at(cdb, 0, INT64_MAX, &last) == TDB_STREAM_OK)
				next = last.ts + 1;
			for (int i = 0; i < 1000000; i++, next++)
			{
				TdbStreamValue v[2] = {{.v.i = next * 3}, {.v.f = (double) next / 7}};

				if (tdb_stream_insert(cdb, 0, next, v) != TDB_STREAM_OK)
					_exit(3);
				if (i % 17 == 16)
				{
					if (tdb_stream_flush(cdb) != TDB_STREAM_OK)
						_exit(4);
					if (write(p[1], &next, sizeof(next)) != sizeof(next))
						_exit(5);
				}
			}
			_exit(0);
		}
		close(p[1]);
		{
			struct timespec ts = {0, (long) (unit_rand(&rng) % 12) * 1000000L};

			nanosleep(&ts, NULL);
		}
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		while (read(p[0], &got, sizeof(got)) == sizeof(got))
			acked = got;
		close(p[0]);
		CHECK_EQ_U64(tdb_stream_io_file(path, false, 0, &io, err, sizeof(err)), TDB_STREAM_OK);
		if (tdb_stream_open(&io, &db, err, sizeof(err)) != TDB_STREAM_OK)
		{
			unit_fail(__FILE__, __LINE__, "round %d: open failed: %s", round, err);
			tdb_stream_io_file_close(&io);
			break;
		}
		/* the last acknowledged record is there, exact, and the file is sound */
		if (acked > 0)
		{
			CHECK_EQ_U64(tdb_stream_at(db, 0, acked, &r), TDB_STREAM_OK);
			CHECK(r.ts == acked && r.vals[0].v.i == acked * 3 && r.vals[1].v.f == (double) acked / 7);
		}
		CHECK_EQ_U64(tdb_stream_verify(db), TDB_STREAM_OK);
		tdb_stream_close(db);
		tdb_stream_io_file_close(&io);
		if (unit_failures)
			break;
	}
	unlink(path);
}
