/*
 * test_stream.c
 *	  Stream files (src/stream/): the crash guarantee proven by simulated
 *	  power loss at every write, failing I/O operations, bit flips in every
 *	  structure, kill -9 of a writer process, the recovery bound, codecs and
 *	  the schema language.
 *
 *	  The power-loss model (CrashIO): writes land in a page cache; a sync
 *	  makes them durable.  At the crash, each 512-byte sector of every write
 *	  since the last sync independently reached the disk or not, and the
 *	  write in flight is torn (some sectors), dropped, or leaves garbage in
 *	  some of its sectors.  After each crash the file must open, hold every
 *	  record acknowledged by a successful flush byte for byte, and anything
 *	  later whole or not at all.
 */
#include "unit.h"

#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stream/stream.h"

#define SEC TDB_STREAM_SECTOR

/* ---- the intercepting I/O layer ---------------------------------------------- */

typedef struct Range
{
	uint64_t	off;
	uint64_t	len;
} Range;

typedef struct CrashIO
{
	uint8_t    *disk;			/* durable */
	uint8_t    *cache;			/* what reads see */
	uint64_t	size;
	Range	   *pend;
	int			npend,
				cap;
	long		writes;			/* write calls so far */
	long		crash_at;		/* the write in flight when power goes (0 = never) */
	int			mode;			/* 0 torn, 1 dropped, 2 garbage */
	bool		crashed;
	long		ops;			/* read, write and sync calls so far */
	long		fail_at;		/* this operation fails (0 = none) */
	bool		fail_persist;	/* and every later one */
	uint64_t	rng;
} CrashIO;

static void
crash_apply_sectors(CrashIO *c, uint8_t *img, uint64_t off, uint64_t len, int mode)
{
	for (uint64_t s = off; s < off + len; s += SEC)
	{
		uint64_t	n = off + len - s < SEC ? off + len - s : SEC;
		uint64_t	r = unit_rand(&c->rng) % 3;

		if (mode == 1)
			continue;
		if (mode == 2 && r == 0)
		{
			for (uint64_t i = 0; i < n; i++)
				img[s + i] = (uint8_t) unit_rand(&c->rng);
		}
		else if (r != 2)
			memcpy(img + s, c->cache + s, n);
	}
}

static int
cio_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	CrashIO    *c = ctx;

	c->ops++;
	if (c->crashed || (c->fail_at && (c->ops == c->fail_at || (c->fail_persist && c->ops > c->fail_at))))
		return -1;
	memcpy(buf, c->cache + off, len);
	return 0;
}

static int
cio_write(void *ctx, uint64_t off, const void *buf, size_t len)
{
	CrashIO    *c = ctx;

	c->ops++;
	if (c->crashed)
		return -1;
	c->writes++;
	if (c->fail_at && (c->ops == c->fail_at || (c->fail_persist && c->ops > c->fail_at)))
	{
		/* a failing write may still have written part of its data (a short write) */
		if (unit_rand(&c->rng) % 2)
		{
			memcpy(c->cache + off, buf, len / 2);
			if (c->npend < c->cap)
				c->pend[c->npend++] = (Range) {off, len / 2};
		}
		return -1;
	}
	memcpy(c->cache + off, buf, len);
	if (c->npend < c->cap)
		c->pend[c->npend++] = (Range) {off, len};
	if (c->crash_at && c->writes == c->crash_at)
	{
		c->crashed = true;
		return -1;
	}
	return 0;
}

static int
cio_sync(void *ctx)
{
	CrashIO    *c = ctx;

	c->ops++;
	if (c->crashed || (c->fail_at && (c->ops == c->fail_at || (c->fail_persist && c->ops > c->fail_at))))
		return -1;
	for (int i = 0; i < c->npend; i++)
		memcpy(c->disk + c->pend[i].off, c->cache + c->pend[i].off, c->pend[i].len);
	c->npend = 0;
	return 0;
}

static void
cio_init(CrashIO *c, uint64_t size, TdbStreamIO *io)
{
	memset(c, 0, sizeof(*c));
	c->size = size;
	c->disk = calloc(1, size);
	c->cache = calloc(1, size);
	c->cap = 1 << 16;
	c->pend = calloc((size_t) c->cap, sizeof(Range));
	io->ctx = c;
	io->read = cio_read;
	io->write = cio_write;
	io->sync = cio_sync;
	io->size = size;
}

static void
cio_free(CrashIO *c)
{
	free(c->disk);
	free(c->cache);
	free(c->pend);
}

/*
 * The image after power loss: the durable disk, plus each sector of the
 * unsynced writes (in order) that happened to reach it; the last of them is
 * the write in flight, treated by mode.  Afterwards the cache is the image.
 */
static void
cio_power_loss(CrashIO *c, int inflight_mode)
{
	uint8_t    *img = malloc(c->size);

	memcpy(img, c->disk, c->size);
	for (int i = 0; i < c->npend; i++)
		crash_apply_sectors(c, img, c->pend[i].off, c->pend[i].len, i == c->npend - 1 ? inflight_mode : 0);
	memcpy(c->disk, img, c->size);
	memcpy(c->cache, img, c->size);
	free(img);
	c->npend = 0;
	c->crashed = false;
	c->crash_at = 0;
	c->fail_at = 0;
}

/* ---- a workload and its model ---------------------------------------------------- */

#define W_STREAMS 2
#define W_MAX 4000

static const char *w_schema =
"SET blockSize = 1024;\n"
"SET fileSize = 64KB;\n"
"CREATE STREAM speed WITH ID 1 { sog int32, cog float64 NULL };\n"
"CREATE STREAM engine WITH ID 2 { rpm int64, volts float32, flag bool NULL, temp int16 };\n";

typedef struct Model
{
	int64_t		ts[W_STREAMS][W_MAX];
	TdbStreamValue vals[W_STREAMS][W_MAX][4];
	int			n[W_STREAMS];	/* inserted */
	int			acked[W_STREAMS];	/* inserted when the last flush succeeded */
	int			pending[W_STREAMS];	/* inserted when a flush was under way */
} Model;

static void
make_values(uint64_t *rng, int s, TdbStreamValue *v)
{
	memset(v, 0, 4 * sizeof(*v));
	if (s == 0)
	{
		v[0].v.i = (int32_t) unit_rand(rng);
		v[1].isnull = unit_rand(rng) % 5 == 0;
		v[1].v.f = v[1].isnull ? 0 : unit_rand_double(rng, -1e6, 1e6);
	}
	else
	{
		v[0].v.i = (int64_t) unit_rand(rng);
		v[1].v.f = (float) unit_rand_double(rng, 0, 30);
		v[2].isnull = unit_rand(rng) % 3 == 0;
		v[2].v.i = v[2].isnull ? 0 : (int64_t) (unit_rand(rng) % 2);
		v[3].v.i = (int16_t) unit_rand(rng);
	}
}

/*
 * Run ninserts inserts with flushes at random intervals, recording the
 * model; stops at the first failure (a crash or an I/O error) and returns
 * its code.
 */
static int
run_workload(TdbStreamDB *db, Model *m, uint64_t seed, int ninserts)
{
	uint64_t	rng = seed;

	for (int k = 0; k < ninserts; k++)
	{
		int			s = (int) (unit_rand(&rng) % W_STREAMS);
		int			i = m->n[s];
		int			rc;

		if (i >= W_MAX)
			continue;
		m->ts[s][i] = (i == 0 ? 1000 : m->ts[s][i - 1]) + 1 + (int64_t) (unit_rand(&rng) % 100);
		make_values(&rng, s, m->vals[s][i]);
		if ((rc = tdb_stream_insert(db, s, m->ts[s][i], m->vals[s][i])) != TDB_STREAM_OK)
			return rc;
		m->n[s]++;
		if (unit_rand(&rng) % 6 == 0)
		{
			memcpy(m->pending, m->n, sizeof(m->n));
			if ((rc = tdb_stream_flush(db)) != TDB_STREAM_OK)
				return rc;
			memcpy(m->acked, m->n, sizeof(m->n));
		}
	}
	return TDB_STREAM_OK;
}

typedef struct Collect
{
	int64_t		ts[W_MAX];
	TdbStreamRecord recs[W_MAX];
	int			n;
} Collect;

static int
collect(const TdbStreamRecord *r, void *p)
{
	Collect    *c = p;

	if (c->n < W_MAX)
		c->recs[c->n++] = *r;
	return 0;
}

static bool
same_value(const TdbStreamValue *a, const TdbStreamValue *b, bool is_float)
{
	if (a->isnull || b->isnull)
		return a->isnull == b->isnull;
	return is_float ? a->v.f == b->v.f : a->v.i == b->v.i;
}

/*
 * The guarantee, per stream: what is there is a contiguous run of the
 * inserted records, byte for byte, ending at or after the last acknowledged
 * one (and at most at what the interrupted flush covered).  Returns false
 * (and reports) if not.
 */
static bool
check_against_model(TdbStreamDB *db, const Model *m, const char *what)
{
	static Collect c;
	bool		good = true;

	for (int s = 0; s < W_STREAMS; s++)
	{
		const TdbStreamDef *d = &tdb_stream_schema(db)->streams[s];
		int			lo = -1,
					rc;

		c.n = 0;
		rc = tdb_stream_range(db, s, INT64_MIN + 1, INT64_MAX, collect, &c);
		if (rc != TDB_STREAM_OK)
		{
			unit_fail(__FILE__, __LINE__, "%s: stream %d unreadable: %s", what, s, tdb_stream_errmsg(db));
			return false;
		}
		if (c.n > 0)
			for (int i = 0; i < m->n[s]; i++)
				if (m->ts[s][i] == c.recs[0].ts)
					lo = i;
		if (c.n > 0 && lo < 0)
		{
			unit_fail(__FILE__, __LINE__, "%s: stream %d starts at ts %lld, never inserted", what, s,
					  (long long) c.recs[0].ts);
			return false;
		}
		for (int k = 0; k < c.n; k++)
		{
			int			i = lo + k;

			good = i < m->n[s] && c.recs[k].ts == m->ts[s][i] && !c.recs[k].discontinuity;
			for (uint32_t f = 0; good && f < d->nfields; f++)
				good = same_value(&c.recs[k].vals[f], &m->vals[s][i][f],
								  d->fields[f].type == TDB_ST_FLOAT32 || d->fields[f].type == TDB_ST_FLOAT64);
			if (!good)
			{
				unit_fail(__FILE__, __LINE__, "%s: stream %d record %d (ts %lld) differs from insert %d",
						  what, s, k, (long long) c.recs[k].ts, i);
				return false;
			}
		}
		{
			int			hi = c.n > 0 ? lo + c.n : 0;

			if (hi < m->acked[s] || hi > (m->pending[s] > m->acked[s] ? m->pending[s] : m->acked[s]) ||
				(m->acked[s] > 0 && c.n == 0))
			{
				unit_fail(__FILE__, __LINE__, "%s: stream %d holds inserts [%d, %d); acknowledged %d, flushing %d",
						  what, s, lo, hi, m->acked[s], m->pending[s]);
				return false;
			}
		}
	}
	return true;
}

static void
create_file(TdbStreamIO *io)
{
	TdbStreamSchema schema;
	char		err[256];

	if (tdb_stream_parse_rdl(w_schema, &schema, err, sizeof(err)) != TDB_STREAM_OK)
		unit_fail(__FILE__, __LINE__, "schema: %s", err);
	if (tdb_stream_create(io, &schema, err, sizeof(err)) != TDB_STREAM_OK)
		unit_fail(__FILE__, __LINE__, "create: %s", err);
}

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

static bool
same_records(const Collect *a, const Collect *b, const TdbStreamDef *d)
{
	if (a->n != b->n)
		return false;
	for (int k = 0; k < a->n; k++)
	{
		if (a->recs[k].ts != b->recs[k].ts || a->recs[k].discontinuity != b->recs[k].discontinuity)
			return false;
		for (uint32_t f = 0; f < d->nfields; f++)
			if (!same_value(&a->recs[k].vals[f], &b->recs[k].vals[f],
							d->fields[f].type == TDB_ST_FLOAT32 || d->fields[f].type == TDB_ST_FLOAT64))
				return false;
	}
	return true;
}

/* ---- what a query costs: sectors read ------------------------------------------- */

#define BIG_STREAMS 64
#define BIG_STEP 1000			/* microseconds between a stream's records */
#define BIG_Q 17				/* the stream queried */

typedef struct BigFile
{
	uint8_t    *region;
	uint64_t	size;
	TdbStreamIO io;
	uint64_t	per_stream;		/* records inserted into each stream */
	uint32_t	idx_sectors;	/* a stream's index, sectors per copy */
} BigFile;

static int64_t
big_ts(uint64_t i)
{
	return 1000000 + (int64_t) i * BIG_STEP;
}

/*
 * A file of size MB with 64 streams of eight float64 fields (6 records to a
 * chunk, 48 to a 4 KB block), filled round-robin until it wrapped: every
 * block in use, each stream's index about ndata / 64 entries long.
 */
static bool
big_file(BigFile *b, uint64_t mb)
{
	TdbStreamSchema schema;
	TdbStreamDB *db;
	TdbStreamFileInfo info;
	char	   *rdl = malloc(BIG_STREAMS * 160 + 100);
	char		err[256];
	size_t		n;
	uint64_t	total;
	TdbStreamValue v[8];

	memset(b, 0, sizeof(*b));
	b->size = mb << 20;
	b->region = calloc(1, b->size);
	n = (size_t) snprintf(rdl, 100, "SET blockSize = 4096;\nSET fileSize = %lluMB;\n", (unsigned long long) mb);
	for (int s = 0; s < BIG_STREAMS; s++)
		n += (size_t) snprintf(rdl + n, 160, "CREATE STREAM s%d WITH ID %d { a float64, b float64, c float64, "
							   "d float64, e float64, f float64, g float64, h float64 };\n", s, s + 1);
	tdb_stream_io_memory(b->region, b->size, &b->io);
	if (b->region == NULL || tdb_stream_parse_rdl(rdl, &schema, err, sizeof(err)) != TDB_STREAM_OK ||
		tdb_stream_create(&b->io, &schema, err, sizeof(err)) != TDB_STREAM_OK ||
		tdb_stream_open(&b->io, &db, err, sizeof(err)) != TDB_STREAM_OK)
	{
		unit_fail(__FILE__, __LINE__, "big file of %llu MB: %s", (unsigned long long) mb, err);
		free(rdl);
		return false;
	}
	free(rdl);
	tdb_stream_info(db, &info);
	b->idx_sectors = (info.data_blocks + 30) / 31;
	/* 10 % more than the file holds, so it wraps; whole blocks, so both files end alike */
	total = (uint64_t) info.data_blocks * 48 * 11 / 10 / BIG_STREAMS / 48 * 48;
	memset(v, 0, sizeof(v));
	for (uint64_t i = 0; i < total; i++)
	{
		for (int s = 0; s < BIG_STREAMS; s++)
		{
			v[0].v.f = (double) i;
			v[1].v.f = (double) s;
			if (tdb_stream_insert(db, s, big_ts(i), v) != TDB_STREAM_OK)
			{
				unit_fail(__FILE__, __LINE__, "filling: %s", tdb_stream_errmsg(db));
				tdb_stream_close(db);
				return false;
			}
		}
		/* flushes at block ends: no chunk sealed part full, the same layout on both files */
		if (i % 960 == 959 && tdb_stream_flush(db) != TDB_STREAM_OK)
			unit_fail(__FILE__, __LINE__, "flush: %s", tdb_stream_errmsg(db));
	}
	CHECK_EQ_U64(tdb_stream_flush(db), TDB_STREAM_OK);
	tdb_stream_info(db, &info);
	CHECK_EQ_U64(info.free_blocks, 0);
	b->per_stream = total;
	tdb_stream_close(db);
	return unit_failures == 0;
}

typedef struct WindowArg
{
	int			n;
	int64_t		first;
	bool		right;
} WindowArg;

static int
window_visit(const TdbStreamRecord *r, void *p)
{
	WindowArg  *w = p;

	if (w->n == 0)
		w->first = r->ts;
	w->right &= r->vals[0].v.f == (double) ((r->ts - 1000000) / BIG_STEP) && r->vals[1].v.f == BIG_Q;
	w->n++;
	return 0;
}

static uint64_t
sectors(TdbStreamDB *db)
{
	TdbStreamFileInfo info;

	tdb_stream_info(db, &info);
	return info.sectors_read;
}

typedef struct Cost
{
	uint64_t	open,
				cold,
				refresh,
				warm,
				other,
				insert_cold,
				insert_warm;
} Cost;

/* A 5-row window 1,000 records before the end of stream BIG_Q, starting at record i. */
static void
window(TdbStreamDB *db, const BigFile *b, uint64_t i, uint64_t *cost)
{
	WindowArg	w = {0, 0, true};
	uint64_t	before = sectors(db);

	CHECK_EQ_U64(tdb_stream_range(db, BIG_Q, big_ts(i), big_ts(i + 4), window_visit, &w), TDB_STREAM_OK);
	*cost = sectors(db) - before;
	if (w.n != 5 || w.first != big_ts(i) || !w.right)
		unit_fail(__FILE__, __LINE__, "window at record %llu: %d records from %lld%s", (unsigned long long) i,
				  w.n, (long long) w.first, w.right ? "" : ", wrong values");
	(void) b;
}

/* 50 rows appended to stream BIG_Q after ts `after`, flushed. */
static void
insert50(TdbStreamDB *db, int64_t after, uint64_t *cost)
{
	TdbStreamValue v[8];
	uint64_t	before = sectors(db);

	memset(v, 0, sizeof(v));
	for (int k = 1; k <= 50; k++)
	{
		v[0].v.f = (double) ((after + k * BIG_STEP - 1000000) / BIG_STEP);
		v[1].v.f = BIG_Q;
		CHECK_EQ_U64(tdb_stream_insert(db, BIG_Q, after + k * BIG_STEP, v), TDB_STREAM_OK);
	}
	CHECK_EQ_U64(tdb_stream_flush(db), TDB_STREAM_OK);
	*cost = sectors(db) - before;
}

static void
measure_file(BigFile *b, Cost *c)
{
	TdbStreamDB *db;
	char		err[256];
	bool		changed;
	uint64_t	i = b->per_stream - 1000,
				before;
	int64_t		last;

	memset(c, 0, sizeof(*c));
	CHECK_EQ_U64(tdb_stream_open(&b->io, &db, err, sizeof(err)), TDB_STREAM_OK);
	c->open = sectors(db);
	window(db, b, i, &c->cold);
	/* the handle kept: the next query revalidates it, then reads only data */
	before = sectors(db);
	CHECK_EQ_U64(tdb_stream_refresh(db, &changed), TDB_STREAM_OK);
	c->refresh = sectors(db) - before;
	CHECK(!changed);
	window(db, b, i, &c->warm);
	/* an older window of the stream: the binary search ends in other index sectors */
	window(db, b, b->per_stream / 2, &c->other);
	tdb_stream_close(db);
	/* INSERT on a fresh handle, then on the kept one after a refresh */
	CHECK_EQ_U64(tdb_stream_open(&b->io, &db, err, sizeof(err)), TDB_STREAM_OK);
	CHECK_EQ_U64(tdb_stream_last_ts(db, BIG_Q, &last), TDB_STREAM_OK);
	insert50(db, last, &c->insert_cold);
	before = sectors(db);
	CHECK_EQ_U64(tdb_stream_refresh(db, &changed), TDB_STREAM_OK);
	CHECK(!changed);
	insert50(db, last + 50 * BIG_STEP, &c->insert_warm);
	c->insert_warm = sectors(db) - before;
	tdb_stream_close(db);
}

/*
 * The cost bound, as sectors read (tdb_stream_info's I/O counter), on a
 * 64 MB and a 512 MB file of 64 full streams: opening reads the same; a
 * 5-row window on a kept handle (revalidated: superblock copy 0 and the
 * schema's header) reads the same few sectors; a cold window adds only the
 * index sectors its binary search probes (log2 of the stream's index); a
 * 50-row INSERT reads the same on both.  Before, opening read every index
 * sector of every stream (64 x the index of one stream).
 */
UNIT_TEST(test_stream_window_reads_bounded)
{
	BigFile		b[2];
	Cost		c[2];
	uint64_t	mb[2] = {64, 512};

	for (int f = 0; f < 2; f++)
	{
		if (!big_file(&b[f], mb[f]))
		{
			free(b[f].region);
			return;
		}
		measure_file(&b[f], &c[f]);
		printf("# %llu MB, %llu records per stream: open %llu sectors (before: %llu index sectors more), "
			   "5-row window cold %llu, revalidation %llu, window again %llu, another window %llu, "
			   "50-row insert %llu (fresh handle) / %llu (kept, revalidated)\n",
			   (unsigned long long) mb[f], (unsigned long long) b[f].per_stream, (unsigned long long) c[f].open,
			   (unsigned long long) BIG_STREAMS * b[f].idx_sectors, (unsigned long long) c[f].cold,
			   (unsigned long long) c[f].refresh, (unsigned long long) c[f].warm,
			   (unsigned long long) c[f].other, (unsigned long long) c[f].insert_cold,
			   (unsigned long long) c[f].insert_warm);
		free(b[f].region);
	}
	/* opening: superblocks and schema, whatever the size */
	CHECK_EQ_U64(c[1].open, c[0].open);
	/* revalidation: superblock copy 0 (72 + 32 x 64 bytes: 5 sectors) and the schema's header */
	CHECK_EQ_U64(c[0].refresh, 6);
	CHECK_EQ_U64(c[1].refresh, 6);
	/* the same window on a kept handle: data sectors only, the same on both */
	CHECK_EQ_U64(c[1].warm, c[0].warm);
	CHECK(c[0].warm <= 5);
	/* cold: plus the index sectors of the binary search, at most log2(index sectors) + 1 */
	for (int f = 0; f < 2; f++)
	{
		uint64_t	probes = 1;

		for (uint64_t n = b[f].idx_sectors; n > 1; n = (n + 1) / 2)
			probes++;
		CHECK(c[f].cold <= c[f].warm + probes);
		CHECK(c[f].other <= c[f].warm + probes);
	}
	/* INSERT: the stream's newest entry and last chunk, and a new block's owner: the same on both */
	CHECK_EQ_U64(c[1].insert_cold, c[0].insert_cold);
	CHECK_EQ_U64(c[1].insert_warm, c[0].insert_warm);
	CHECK(c[0].insert_cold <= 8);
}

/*
 * Two handles on one file take turns writing, each refreshing before it
 * writes and after the other did (as two backends with kept handles), on a
 * small file that wraps many times, so cached index sectors are reused for
 * other blocks: after every turn both read exactly what a freshly opened
 * handle reads.  Refresh refuses a handle with unflushed records and
 * reports a re-created file.
 */
UNIT_TEST(test_stream_refresh)
{
	CrashIO		c;
	TdbStreamIO io;
	TdbStreamDB *h[2],
			   *fresh;
	char		err[256];
	uint64_t	rng = 4242;
	static Collect got,
				want;
	bool		changed;
	int64_t		last[W_STREAMS];

	cio_init(&c, 64 * 1024, &io);
	create_file(&io);
	CHECK_EQ_U64(tdb_stream_open(&io, &h[0], err, sizeof(err)), TDB_STREAM_OK);
	CHECK_EQ_U64(tdb_stream_open(&io, &h[1], err, sizeof(err)), TDB_STREAM_OK);
	for (int s = 0; s < W_STREAMS; s++)
		last[s] = 1000;
	for (int round = 0; round < 300 && unit_failures == 0; round++)
	{
		int			w = (int) (unit_rand(&rng) % 2);
		int			k = 1 + (int) (unit_rand(&rng) % 120);

		CHECK_EQ_U64(tdb_stream_refresh(h[w], &changed), TDB_STREAM_OK);
		for (int i = 0; i < k; i++)
		{
			int			s = (int) (unit_rand(&rng) % W_STREAMS);
			TdbStreamValue v[4];

			make_values(&rng, s, v);
			last[s] += 1 + (int64_t) (unit_rand(&rng) % 50);
			CHECK_EQ_U64(tdb_stream_insert(h[w], s, last[s], v), TDB_STREAM_OK);
		}
		if (round % 50 == 7)
		{
			/* unflushed records: refresh refuses rather than drop or keep them */
			CHECK_EQ_U64(tdb_stream_refresh(h[w], &changed), (uint64_t) TDB_STREAM_EINVAL);
		}
		CHECK_EQ_U64(tdb_stream_flush(h[w]), TDB_STREAM_OK);
		CHECK_EQ_U64(tdb_stream_refresh(h[1 - w], &changed), TDB_STREAM_OK);
		CHECK(changed);
		CHECK_EQ_U64(tdb_stream_refresh(h[1 - w], &changed), TDB_STREAM_OK);
		CHECK(!changed);
		CHECK_EQ_U64(tdb_stream_open(&io, &fresh, err, sizeof(err)), TDB_STREAM_OK);
		for (int s = 0; s < W_STREAMS; s++)
		{
			/* the whole stream and a window, by both handles, against the fresh one */
			int64_t		from = last[s] - (int64_t) (unit_rand(&rng) % 3000);

			for (int q = 0; q < 2; q++)
			{
				int64_t		lo = q == 0 ? INT64_MIN + 1 : from;

				want.n = 0;
				CHECK_EQ_U64(tdb_stream_range(fresh, s, lo, INT64_MAX, collect, &want), TDB_STREAM_OK);
				for (int x = 0; x < 2; x++)
				{
					int64_t		lt;

					got.n = 0;
					CHECK_EQ_U64(tdb_stream_range(h[x], s, lo, INT64_MAX, collect, &got), TDB_STREAM_OK);
					CHECK_EQ_U64(tdb_stream_last_ts(h[x], s, &lt), TDB_STREAM_OK);
					CHECK(lt == last[s]);
					if (!same_records(&got, &want, &tdb_stream_schema(fresh)->streams[s]))
					{
						unit_fail(__FILE__, __LINE__, "round %d: handle %d reads %d records of stream %d from %lld, a fresh handle %d",
								  round, x, got.n, s, (long long) lo, want.n);
						break;
					}
				}
			}
		}
		tdb_stream_close(fresh);
	}
	/* the file re-created (another schema) under the kept handle */
	{
		TdbStreamSchema schema;

		/* the same layout (block size, file size, two streams): only the schema differs */
		CHECK_EQ_U64(tdb_stream_parse_rdl("SET blockSize = 1024; SET fileSize = 64KB;\n"
										  "CREATE STREAM speed WITH ID 1 { sog int64 };\n"
										  "CREATE STREAM engine WITH ID 2 { rpm int64 };\n", &schema, err, sizeof(err)),
					 TDB_STREAM_OK);
		CHECK_EQ_U64(tdb_stream_create(&io, &schema, err, sizeof(err)), TDB_STREAM_OK);
		CHECK_EQ_U64(tdb_stream_refresh(h[0], &changed), (uint64_t) TDB_STREAM_ESTALE);
	}
	tdb_stream_close(h[0]);
	tdb_stream_close(h[1]);
	cio_free(&c);
}

/* Codecs keep what they must, and reconstruction answers "value at t". */
static int
count_rows(const TdbStreamRecord *r, void *p)
{
	(void) r;
	(*(uint64_t *) p)++;
	return 0;
}

/* Fill a 64 KB memory image: stream b first (b_rows), then stream a (ts 1..a_rows, x = i * mul). */
static void
recreated_image(uint8_t *img, int b_rows, int a_rows, int64_t mul)
{
	TdbStreamSchema sc;
	TdbStreamIO io;
	TdbStreamDB *db;
	char		err[256];

	memset(img, 0, 64 * 1024);
	CHECK_EQ_U64(tdb_stream_parse_rdl("SET blockSize = 1024; SET fileSize = 64KB;"
									  "CREATE STREAM a WITH ID 1 { x int64 };"
									  "CREATE STREAM b WITH ID 2 { z int64 };", &sc, err, sizeof(err)), TDB_STREAM_OK);
	tdb_stream_io_memory(img, 64 * 1024, &io);
	CHECK_EQ_U64(tdb_stream_create(&io, &sc, err, sizeof(err)), TDB_STREAM_OK);
	CHECK_EQ_U64(tdb_stream_open(&io, &db, err, sizeof(err)), TDB_STREAM_OK);
	for (int i = 1; i <= b_rows; i++)
	{
		TdbStreamValue v = {.v.i = -i};

		CHECK_EQ_U64(tdb_stream_insert(db, 1, i, &v), TDB_STREAM_OK);
	}
	CHECK_EQ_U64(tdb_stream_flush(db), TDB_STREAM_OK);
	for (int i = 1; i <= a_rows; i++)
	{
		TdbStreamValue v = {.v.i = i * mul};

		CHECK_EQ_U64(tdb_stream_insert(db, 0, i, &v), TDB_STREAM_OK);
	}
	CHECK_EQ_U64(tdb_stream_flush(db), TDB_STREAM_OK);
	tdb_stream_close(db);
}

/*
 * A file re-created in place (cp of another file with the same schema and
 * size: the same inode) whose stream a has the same committed counters as
 * the kept handle saw: the refresh must not keep a's cached index or tail
 * (they name blocks that now belong to b).  Either ESTALE, or reads and an
 * append that match a fresh handle and leave b whole.
 */
UNIT_TEST(test_stream_refresh_recreated_same_schema)
{
	static uint8_t x[64 * 1024],
				y[64 * 1024],
				region[64 * 1024];
	TdbStreamIO io;
	TdbStreamDB *h,
			   *fresh;
	char		err[256];
	bool		changed;
	uint64_t	n;
	TdbStreamStats st;
	int			rc;

	recreated_image(x, 0, 200, 1);
	recreated_image(y, 200, 200, 7);
	memcpy(region, x, sizeof(region));
	tdb_stream_io_memory(region, sizeof(region), &io);
	CHECK_EQ_U64(tdb_stream_open(&io, &h, err, sizeof(err)), TDB_STREAM_OK);
	n = 0;
	CHECK_EQ_U64(tdb_stream_range(h, 0, INT64_MIN + 1, INT64_MAX, count_rows, &n), TDB_STREAM_OK);
	CHECK_EQ_U64(n, 200);
	CHECK_EQ_U64(tdb_stream_stats(h, 0, &st), TDB_STREAM_OK);	/* ready to append: tail loaded */
	memcpy(region, y, sizeof(region));	/* re-created in place */
	rc = tdb_stream_refresh(h, &changed);
	if (rc == TDB_STREAM_OK)
	{
		TdbStreamValue v = {.v.i = 5};
		TdbStreamRecord r;

		CHECK_EQ_U64(tdb_stream_at(h, 0, 100, &r), TDB_STREAM_OK);
		CHECK_EQ_U64((uint64_t) r.vals[0].v.i, 700);
		CHECK_EQ_U64(tdb_stream_insert(h, 0, 1000, &v), TDB_STREAM_OK);
		CHECK_EQ_U64(tdb_stream_flush(h), TDB_STREAM_OK);
		CHECK_EQ_U64(tdb_stream_open(&io, &fresh, err, sizeof(err)), TDB_STREAM_OK);
		CHECK_EQ_U64(tdb_stream_verify(fresh), TDB_STREAM_OK);
		n = 0;
		CHECK_EQ_U64(tdb_stream_range(fresh, 1, INT64_MIN + 1, INT64_MAX, count_rows, &n), TDB_STREAM_OK);
		CHECK_EQ_U64(n, 200);
		tdb_stream_close(fresh);
	}
	else
		CHECK_EQ_U64(rc, (uint64_t) TDB_STREAM_ESTALE);
	tdb_stream_close(h);
	/* an older copy of the same file put back in place: ESTALE too (its commit went backwards) */
	memcpy(region, x, sizeof(region));
	CHECK_EQ_U64(tdb_stream_open(&io, &h, err, sizeof(err)), TDB_STREAM_OK);
	CHECK_EQ_U64(tdb_stream_open(&io, &fresh, err, sizeof(err)), TDB_STREAM_OK);
	{
		TdbStreamValue v = {.v.i = 1};

		CHECK_EQ_U64(tdb_stream_insert(fresh, 1, 5, &v), TDB_STREAM_OK);
		CHECK_EQ_U64(tdb_stream_flush(fresh), TDB_STREAM_OK);
	}
	tdb_stream_close(fresh);
	CHECK_EQ_U64(tdb_stream_refresh(h, &changed), TDB_STREAM_OK);
	memcpy(region, x, sizeof(region));
	CHECK_EQ_U64(tdb_stream_refresh(h, &changed), (uint64_t) TDB_STREAM_ESTALE);
	tdb_stream_close(h);
}

UNIT_TEST(test_stream_codecs)
{
	static const char *rdl =
		"SET blockSize = 1024; SET fileSize = 256KB;\n"
		"CREATE STREAM s WITH ID 7 { a int32 WITH CODEC step, b float64 WITH CODEC deadband PARAMS (0.5),"
		" c int16 NULL WITH CODEC step };\n";
	TdbStreamSchema schema;
	char		err[256];
	uint8_t    *mem = calloc(1, 256 * 1024);
	TdbStreamIO io;
	TdbStreamDB *db;
	int64_t		ts[3000];
	TdbStreamValue vals[3000][3];
	TdbStreamValue last[3] = {{0}};
	int			stored = 0;
	TdbStreamStats st;

	CHECK_EQ_U64(tdb_stream_parse_rdl(rdl, &schema, err, sizeof(err)), TDB_STREAM_OK);
	tdb_stream_io_memory(mem, 256 * 1024, &io);
	CHECK_EQ_U64(tdb_stream_create(&io, &schema, err, sizeof(err)), TDB_STREAM_OK);
	CHECK_EQ_U64(tdb_stream_open(&io, &db, err, sizeof(err)), TDB_STREAM_OK);
	for (int i = 0; i < 3000; i++)
	{
		bool		keep;

		ts[i] = 100 + i * 10;
		vals[i][0].isnull = false;
		vals[i][0].v.i = (int64_t) (i / 50);	/* steps every 50 */
		vals[i][1].isnull = false;
		vals[i][1].v.f = 20 + 3 * __builtin_sin(i / 40.0);
		vals[i][2].isnull = (i / 100) % 2 == 1;
		vals[i][2].v.i = vals[i][2].isnull ? 0 : 5;
		if (i == 2000)
		{
			CHECK_EQ_U64(tdb_stream_discontinuity(db, 0, ts[i] - 5), TDB_STREAM_OK);
			stored++;
			last[0].v.i = -1;	/* the record after a discontinuity is always kept */
		}
		/* the model of what the codecs keep */
		keep = i == 0 || vals[i][0].v.i != last[0].v.i || vals[i][2].isnull != last[2].isnull ||
			__builtin_fabs(vals[i][1].v.f - last[1].v.f) > 0.5;
		if (keep)
		{
			memcpy(last, vals[i], sizeof(last));
			stored++;
		}
		CHECK_EQ_U64(tdb_stream_insert(db, 0, ts[i], vals[i]), TDB_STREAM_OK);
	}
	CHECK_EQ_U64(tdb_stream_flush(db), TDB_STREAM_OK);
	CHECK_EQ_U64(tdb_stream_stats(db, 0, &st), TDB_STREAM_OK);
	CHECK_EQ_U64(st.records, (uint64_t) stored);
	CHECK(st.records < 600);	/* the codecs kept a fraction */
	/* reconstruction at every insert's time: step fields exact, deadband within its band */
	for (int i = 0; i < 3000; i += 7)
	{
		TdbStreamRecord r;

		CHECK_EQ_U64(tdb_stream_at(db, 0, ts[i], &r), TDB_STREAM_OK);
		CHECK_EQ_U64(r.vals[0].v.i, vals[i][0].v.i);
		CHECK(r.vals[2].isnull == vals[i][2].isnull);
		CHECK_NEAR(r.vals[1].v.f, vals[i][1].v.f, 0.5);
	}
	/* the discontinuity: just before the next record nothing holds */
	{
		TdbStreamRecord r;

		CHECK_EQ_U64(tdb_stream_at(db, 0, ts[2000] - 2, &r), TDB_STREAM_OK);
		CHECK(r.discontinuity);
	}
	tdb_stream_close(db);
	free(mem);
}

/*
 * tdb_stream_last_ts: what the next insert must be after (the stream FDW
 * checks buffered rows against it).  A row the codecs drop still counts,
 * unflushed or flushed, and a reopened file remembers it.
 */
UNIT_TEST(test_stream_last_ts)
{
	static const char *rdl =
		"SET blockSize = 1024; SET fileSize = 64KB;\n"
		"CREATE STREAM a WITH ID 1 { x int32 WITH CODEC step };\n"
		"CREATE STREAM b WITH ID 2 { y float64 };\n";
	TdbStreamSchema schema;
	char		err[256];
	uint8_t    *mem = calloc(1, 64 * 1024);
	TdbStreamIO io;
	TdbStreamDB *db;
	TdbStreamValue v = {0};
	int64_t		t = 0;

	CHECK_EQ_U64(tdb_stream_parse_rdl(rdl, &schema, err, sizeof(err)), TDB_STREAM_OK);
	tdb_stream_io_memory(mem, 64 * 1024, &io);
	CHECK_EQ_U64(tdb_stream_create(&io, &schema, err, sizeof(err)), TDB_STREAM_OK);
	CHECK_EQ_U64(tdb_stream_open(&io, &db, err, sizeof(err)), TDB_STREAM_OK);
	CHECK_EQ_U64(tdb_stream_last_ts(db, 0, &t), TDB_STREAM_OK);
	CHECK(t == INT64_MIN);
	CHECK_EQ_U64(tdb_stream_insert(db, 0, 100, &v), TDB_STREAM_OK);
	CHECK_EQ_U64(tdb_stream_insert(db, 0, 200, &v), TDB_STREAM_OK);	/* same value: dropped by the codec */
	CHECK_EQ_U64(tdb_stream_last_ts(db, 0, &t), TDB_STREAM_OK);
	CHECK_EQ_U64(t, 200);
	CHECK_EQ_U64(tdb_stream_last_ts(db, 1, &t), TDB_STREAM_OK);
	CHECK(t == INT64_MIN);
	CHECK_EQ_U64(tdb_stream_last_ts(db, 2, &t), (uint64_t) TDB_STREAM_EINVAL);
	CHECK_EQ_U64(tdb_stream_flush(db), TDB_STREAM_OK);
	tdb_stream_close(db);
	CHECK_EQ_U64(tdb_stream_open(&io, &db, err, sizeof(err)), TDB_STREAM_OK);
	CHECK_EQ_U64(tdb_stream_last_ts(db, 0, &t), TDB_STREAM_OK);
	CHECK_EQ_U64(t, 200);
	tdb_stream_close(db);
	free(mem);
}

UNIT_TEST(test_stream_rdl_errors)
{
	TdbStreamSchema s;
	char		err[256];
	static const struct
	{
		const char *text;
		const char *msg;
	}			bad[] = {
		{"CREATE STREAM a WITH ID 1 { x int9 };", "line 1, column 31: expected a type"},
		{"SET blockSize = 3000;\nCREATE STREAM a WITH ID 1 { x i8 };", "line 1, column 17: blockSize 3000: expected a power of two"},
		{"\n\nCREATE STREAM a WITH ID 1 { x i8 WITH CODEC deadband };", "line 3, column 54: expected PARAMS, found \"}\""},
		{"CREATE STREAM a WITH ID 1 { x i8 } ;\nCREATE STREAM a WITH ID 2 { y i8 };", "line 2, column 27: stream a (id 2) is defined twice"},
		{"CREATE STREAM a WITH ID 1 { x i8, x int16 };", "field x of stream a is defined twice"},
		{"SET fileSize = 10XB; CREATE STREAM a WITH ID 1 { x i8 };", "sizes take KB, MB or GB"},
		/* names that read as bits or as bytes: refused, with both readings */
		{"CREATE STREAM a WITH ID 1 { x int8 };", "line 1, column 31: type int8 of field x is ambiguous: write i8 for 8 bits (what int8 meant here before), or bigint / i64 for PostgreSQL's int8 (64 bits)"},
		{"CREATE STREAM a WITH ID 1 { x INT8 NULL };", "type INT8 of field x is ambiguous"},
		{"CREATE STREAM a WITH ID 1 { x float };", "type float of field x is ambiguous: write f32 or real (32 bits, what float meant here before), or f64 or double precision (SQL's float)"},
		{"CREATE STREAM a WITH ID 1 { x int4 };", "write i32 or integer"},
		{"CREATE STREAM a WITH ID 1 { x float8 };", "write f64 or double precision"},
		{"CREATE STREAM a WITH ID 1 { x u8 };", "expected a type (i8, i16, i32, i64, f32, f64, bool, or smallint, integer, bigint, real, double precision, boolean) for field x, found \"u8\""},
		{"-- nothing\n", "line 2: no CREATE STREAM"},
		{"SET colour = 1;", "unknown setting \"colour\""},
		{"CREATE TABLE t;", "expected STREAM, found \"TABLE\""},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
	{
		err[0] = '\0';
		CHECK_EQ_U64(tdb_stream_parse_rdl(bad[i].text, &s, err, sizeof(err)), (uint64_t) TDB_STREAM_EINVAL);
		if (strstr(err, bad[i].msg) == NULL)
			unit_fail(__FILE__, __LINE__, "schema %zu: got \"%s\", expected \"%s\"", i, err, bad[i].msg);
	}
	/* the limit of streams, said with the number */
	{
		char		text[65 * 48];
		size_t		n = 0;

		for (int i = 1; i <= 65; i++)
			n += (size_t) snprintf(text + n, sizeof(text) - n, "CREATE STREAM s%d WITH ID %d { v i8 };\n", i, i);
		CHECK_EQ_U64(tdb_stream_parse_rdl(text, &s, err, sizeof(err)), (uint64_t) TDB_STREAM_EINVAL);
		if (strstr(err, "line 65, column 15: a stream file holds at most 64 streams; this is stream 65: put the others in another file") == NULL)
			unit_fail(__FILE__, __LINE__, "65 streams: got \"%s\"", err);
		text[n - strlen("CREATE STREAM s65 WITH ID 65 { v i8 };\n")] = '\0';
		CHECK_EQ_U64(tdb_stream_parse_rdl(text, &s, err, sizeof(err)), TDB_STREAM_OK);
		CHECK(s.nstreams == 64);
	}
	/* every accepted name, and the code it is stored as */
	{
		static const struct
		{
			const char *name;
			TdbStreamType type;
		}			names[] = {
			{"i8", TDB_ST_INT8}, {"i16", TDB_ST_INT16}, {"int16", TDB_ST_INT16}, {"smallint", TDB_ST_INT16},
			{"i32", TDB_ST_INT32}, {"int32", TDB_ST_INT32}, {"integer", TDB_ST_INT32}, {"int", TDB_ST_INT32},
			{"i64", TDB_ST_INT64}, {"int64", TDB_ST_INT64}, {"bigint", TDB_ST_INT64}, {"BIGINT", TDB_ST_INT64},
			{"f32", TDB_ST_FLOAT32}, {"float32", TDB_ST_FLOAT32}, {"real", TDB_ST_FLOAT32},
			{"f64", TDB_ST_FLOAT64}, {"float64", TDB_ST_FLOAT64}, {"double", TDB_ST_FLOAT64},
			{"double precision", TDB_ST_FLOAT64}, {"bool", TDB_ST_BOOL}, {"boolean", TDB_ST_BOOL},
		};

		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		{
			char		text[128];

			snprintf(text, sizeof(text), "CREATE STREAM a WITH ID 1 { x %s NULL, y i8 };", names[i].name);
			if (tdb_stream_parse_rdl(text, &s, err, sizeof(err)) != TDB_STREAM_OK ||
				s.streams[0].fields[0].type != names[i].type || !s.streams[0].fields[0].nullable ||
				s.streams[0].nfields != 2)
				unit_fail(__FILE__, __LINE__, "type %s: %s", names[i].name, err);
		}
		/* the codes files store are those old schemas' int8 ... bool gave */
		CHECK(TDB_ST_INT8 == 1 && TDB_ST_INT16 == 2 && TDB_ST_INT32 == 3 && TDB_ST_INT64 == 4 &&
			  TDB_ST_FLOAT32 == 5 && TDB_ST_FLOAT64 == 6 && TDB_ST_BOOL == 7);
		/* a file with a one-byte field (an old schema's int8) reads its full range back */
		{
			static uint8_t region[64 * 1024];
			TdbStreamIO io;
			TdbStreamDB *db;
			TdbStreamValue v[1] = {{0}};
			TdbStreamRecord r;

			memset(region, 0, sizeof(region));
			tdb_stream_io_memory(region, sizeof(region), &io);
			CHECK_EQ_U64(tdb_stream_parse_rdl("SET blockSize = 1024; SET fileSize = 64KB; CREATE STREAM a WITH ID 1 { x i8 };",
											  &s, err, sizeof(err)), TDB_STREAM_OK);
			CHECK_EQ_U64(tdb_stream_create(&io, &s, err, sizeof(err)), TDB_STREAM_OK);
			CHECK_EQ_U64(tdb_stream_open(&io, &db, err, sizeof(err)), TDB_STREAM_OK);
			v[0].v.i = -128;
			CHECK_EQ_U64(tdb_stream_insert(db, 0, 1, v), TDB_STREAM_OK);
			v[0].v.i = 127;
			CHECK_EQ_U64(tdb_stream_insert(db, 0, 2, v), TDB_STREAM_OK);
			CHECK_EQ_U64(tdb_stream_flush(db), TDB_STREAM_OK);
			tdb_stream_close(db);
			CHECK_EQ_U64(tdb_stream_open(&io, &db, err, sizeof(err)), TDB_STREAM_OK);
			CHECK(tdb_stream_schema(db)->streams[0].fields[0].type == TDB_ST_INT8);
			CHECK(tdb_stream_at(db, 0, 1, &r) == TDB_STREAM_OK && r.vals[0].v.i == -128);
			CHECK(tdb_stream_at(db, 0, 2, &r) == TDB_STREAM_OK && r.vals[0].v.i == 127);
			tdb_stream_close(db);
		}
		CHECK(strcmp(tdb_stream_type_name(TDB_ST_INT8), "i8") == 0 && strcmp(tdb_stream_type_name(TDB_ST_FLOAT64), "f64") == 0 &&
			  strcmp(tdb_stream_type_name(0), "?") == 0 && strcmp(tdb_stream_type_name(8), "?") == 0);
	}
	CHECK_EQ_U64(tdb_stream_parse_rdl("SET blockSize = 64KB; SET fileSize = 1GB;\n"
									  "create stream vehicle with id 3 { rpm int16 not null with codec deadband params (25),"
									  " ok bool null with codec step, v float64 };", &s, err, sizeof(err)), TDB_STREAM_OK);
	CHECK(s.block_size == 65536 && s.file_size == (1ull << 30) && s.nstreams == 1 && s.streams[0].id == 3);
	CHECK(s.streams[0].nfields == 3 && s.streams[0].fields[0].codec == TDB_CODEC_DEADBAND &&
		  s.streams[0].fields[0].threshold == 25 && s.streams[0].fields[1].nullable &&
		  s.streams[0].fields[2].type == TDB_ST_FLOAT64);
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
