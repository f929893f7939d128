/*
 * stream_fixture.c
 *	  The shared helpers of the stream files' tests (stream_fixture.h): the
 *	  power-loss I/O layer and the workload with its model.
 */
#include "unit.h"
#include "stream_fixture.h"

#include <stdlib.h>
#include <string.h>

#define SEC TDB_STREAM_SECTOR

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

void
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

void
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
void
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

static const char *w_schema =
"SET blockSize = 1024;\n"
"SET fileSize = 64KB;\n"
"CREATE STREAM speed WITH ID 1 { sog int32, cog float64 NULL };\n"
"CREATE STREAM engine WITH ID 2 { rpm int64, volts float32, flag bool NULL, temp int16 };\n";

void
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
int
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

int
collect(const TdbStreamRecord *r, void *p)
{
	Collect    *c = p;

	if (c->n < W_MAX)
		c->recs[c->n++] = *r;
	return 0;
}

bool
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
bool
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

void
create_file(TdbStreamIO *io)
{
	TdbStreamSchema schema;
	char		err[256];

	if (tdb_stream_parse_rdl(w_schema, &schema, err, sizeof(err)) != TDB_STREAM_OK)
		unit_fail(__FILE__, __LINE__, "schema: %s", err);
	if (tdb_stream_create(io, &schema, err, sizeof(err)) != TDB_STREAM_OK)
		unit_fail(__FILE__, __LINE__, "create: %s", err);
}
