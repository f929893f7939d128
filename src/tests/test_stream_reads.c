/*
 * test_stream_reads.c
 *	  What readers of stream files see and what it costs: sectors read by
 *	  a window and an insert on large files, refresh of kept handles between
 *	  two writers, and a file re-created in place under a kept handle.
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
