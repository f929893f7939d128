/*
 * test_spill.c
 *	  The writer's bounded memory (spill.c, writer.c): a file written under
 *	  the smallest memory limit, through many sorted runs merged in several
 *	  passes, is byte for byte the file written in memory, for every layout,
 *	  integer and string ids, NULLs, strings and equal times; the external
 *	  sort alone gives every record once in order and leaves no named file;
 *	  and the limits give clear errors.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spill.h"
#include "trail_fixture.h"
#include "trail_unit.h"

void
test_trail_writer_spill_same_bytes(void)
{
	uint64_t	rng = 33;

	for (int layout = 0; layout < FX_LAYOUTS; layout++)
		for (int str = 0; str < 2; str++)
		{
			FxSet		s;

			fx_make(&s, &rng, str == 1, 120, 400);
			fx_layout(layout);
			/* hour-long pages: the footer's state of 15-minute ones would not fit 256 kB */
			fx_page_span_us = 3600LL * 1000000;
			if (fx_by_time)
				fx_bucket_us = 3600LL * 1000000;	/* its pages are a trail's bucket */
			/* default pages; small pages (space-time: segments larger than a page) */
			for (int pe = 0; pe < 2; pe++)
			{
				size_t		la = 0,
							lb = 0;
				uint8_t    *a,
						   *b;
				uint32_t	runs;

				fx_memory_limit = 0;
				a = fx_encode(&s, pe ? 2048 : 0, pe ? 40 : 0, &la);
				CHECK(fx_runs == 0);
				fx_memory_limit = TDB_TRAIL_WRITER_MEMORY_MIN;
				b = fx_encode(&s, pe ? 2048 : 0, pe ? 40 : 0, &lb);
				runs = fx_runs;
				CHECK(a != NULL && b != NULL);
				/* ~25k events of 64 bytes in 256 kB: many runs */
				CHECK(runs >= 4);
				CHECK(la == lb && la > 0);
				if (a && b && la == lb)
					CHECK(memcmp(a, b, la) == 0);
				free(a);
				free(b);
			}
			fx_free(&s);
		}
	fx_memory_limit = 0;
	fx_page_span_us = 0;
	fx_layout(1);
}

static int
u64_cmp(const void *a, const void *b, void *arg)
{
	uint64_t	x = *(const uint64_t *) a,
				y = *(const uint64_t *) b;

	(void) arg;
	return (x > y) - (x < y);
}

void
test_trail_sorter_many_runs(void)
{
	TrailSorter s;
	TdbTrailError err;
	uint64_t	rng = 7;
	enum
	{
	N = 60000};
	uint64_t	rec[2],
				prev = 0,
				sum_in = 0,
				sum_out = 0,
				n = 0;
	struct stat st;
	bool		ordered = true;

	/* 16-byte records, 64 kB: about 3,000 each; 2-way merges: many passes */
	trail_sorter_init(&s, sizeof(rec), u64_cmp, NULL, NULL, 64 << 10);
	for (uint64_t i = 0; i < N; i++)
	{
		rec[0] = (unit_rand(&rng) % 1000) << 20 | i;	/* equal keys, a unique tail */
		rec[1] = i;
		sum_in += rec[0];
		CHECK(trail_sorter_put(&s, rec, &err) == 0);
	}
	CHECK(s.spilled >= 10);
	CHECK(trail_sorter_finish(&s, 64 << 10, &err) == 0);
	CHECK(s.nruns == 2);		/* fan-in 2: merged down to two runs */
	/* the runs' file has no name */
	CHECK(s.fd >= 0 && fstat(s.fd, &st) == 0 && st.st_nlink == 0 && (st.st_mode & 0777) == 0600);
	for (const uint64_t *r; (r = trail_sorter_peek(&s)) != NULL; trail_sorter_skip(&s))
	{
		if (n > 0 && r[0] <= prev)
			ordered = false;
		prev = r[0];
		sum_out += r[0];
		n++;
	}
	CHECK(s.rc == 0);
	CHECK(ordered);
	CHECK(n == N && sum_in == sum_out);
	trail_sorter_free(&s);
}

static int	cancel_calls;

static int
cancel_after(void *arg)
{
	return ++cancel_calls > *(int *) arg;
}

/* The cancel callback stops a long write, while spilling or while merging, cleanly. */
void
test_trail_writer_cancel(void)
{
	uint64_t	rng = 5;
	FxSet		s;

	fx_make(&s, &rng, false, 100, 300);
	for (int after = 0; after < 40; after += 13)
	{
		TdbTrailWriterOptions o = {.memory_limit = TDB_TRAIL_WRITER_MEMORY_MIN, .cancel = cancel_after,
		.cancel_arg = &after, .order = after % 2 ? TDB_TRAIL_ORDER_SPACETIME : TDB_TRAIL_ORDER_TRAIL};
		TdbTrailWriter *w;
		TdbTrailError err;
		uint8_t    *buf = NULL;
		size_t		len = 0;
		int			rc = 0;

		cancel_calls = 0;
		CHECK(tdb_trail_writer_create(&s.schema, &o, &w, &err) == 0);
		for (size_t k = 0; k < s.n && rc == 0; k++)
		{
			TdbTrailEvent ev;

			ev.key.i = s.ev[k].key_i;
			ev.time_us = s.ev[k].time;
			ev.lon = tdb_trail_coord_unfix(s.ev[k].lon);
			ev.lat = tdb_trail_coord_unfix(s.ev[k].lat);
			ev.values = s.ev[k].vals;
			rc = tdb_trail_writer_add(w, &ev, &err);
		}
		if (rc == 0)
			rc = tdb_trail_writer_finish(w, &buf, &len, &err);
		CHECK(rc == TDB_TRAIL_ECANCELED);
		CHECK(buf == NULL);
		tdb_trail_writer_free(w);
	}
	fx_free(&s);
}

void
test_trail_writer_memory_limit_errors(void)
{
	TdbTrailSchema sc;
	TdbTrailWriterOptions o = {.memory_limit = 1000};
	TdbTrailWriter *w;
	TdbTrailError err;
	TdbTrailValue v;
	TdbTrailEvent ev;
	char		name[64];
	int			rc = 0;
	uint32_t	i;

	memset(&sc, 0, sizeof(sc));
	strcpy(sc.id_name, "id");
	strcpy(sc.time_name, "t");
	strcpy(sc.lon_name, "lon");
	strcpy(sc.lat_name, "lat");
	sc.id_type = TDB_TRAIL_INT64;
	sc.ncolumns = 1;
	strcpy(sc.columns[0].name, "s");
	sc.columns[0].type = TDB_TRAIL_STRING;
	CHECK(tdb_trail_writer_create(&sc, &o, &w, &err) == TDB_TRAIL_EINVAL);
	CHECK(strstr(err.msg, "memory limit of 1000 bytes") != NULL);

	/* distinct strings past 3/4 of the limit: a clear error, not a crash */
	o.memory_limit = TDB_TRAIL_WRITER_MEMORY_MIN;
	CHECK(tdb_trail_writer_create(&sc, &o, &w, &err) == 0);
	memset(&ev, 0, sizeof(ev));
	ev.values = &v;
	memset(&v, 0, sizeof(v));
	v.s = name;
	for (i = 0; i < 100000 && rc == 0; i++)
	{
		snprintf(name, sizeof(name), "a distinct string, number %u", i);
		ev.key.i = i % 10;
		ev.time_us = i;
		rc = tdb_trail_writer_add(w, &ev, &err);
	}
	CHECK(rc == TDB_TRAIL_ENOMEM);
	CHECK(i > 1000 && i < 100000);
	CHECK(strstr(err.msg, "distinct string values") != NULL && strstr(err.msg, "raise it") != NULL);
	tdb_trail_writer_free(w);

	/* many trails: the footer's state past 3/4 of the limit is an error at finish */
	CHECK(tdb_trail_writer_create(&sc, &o, &w, &err) == 0);
	rc = 0;
	for (i = 0; i < 20000 && rc == 0; i++)
	{
		snprintf(name, sizeof(name), "s%u", i % 5);
		ev.key.i = i;
		ev.time_us = i;
		rc = tdb_trail_writer_add(w, &ev, &err);
	}
	CHECK(rc == 0);
	{
		uint8_t    *buf = NULL;
		size_t		len = 0;

		CHECK(tdb_trail_writer_finish(w, &buf, &len, &err) == TDB_TRAIL_ENOMEM);
		CHECK(buf == NULL);
		CHECK(strstr(err.msg, "the footer's state for") != NULL && strstr(err.msg, "raise it") != NULL);
	}
	tdb_trail_writer_free(w);

	/* a temporary directory that does not exist: the error names it */
	o.temp_dir = "/nonexistent/trafficdb-spill";
	CHECK(tdb_trail_writer_create(&sc, &o, &w, &err) == 0);
	rc = 0;
	for (i = 0; i < 100000 && rc == 0; i++)
	{
		snprintf(name, sizeof(name), "s%u", i % 5);
		ev.key.i = i;
		ev.time_us = i;
		rc = tdb_trail_writer_add(w, &ev, &err);
	}
	CHECK(rc == TDB_TRAIL_EIO);
	CHECK(strstr(err.msg, "/nonexistent/trafficdb-spill") != NULL);
	tdb_trail_writer_free(w);
}

/* Spilled runs keep within temp_limit (the SQL function's temp_file_limit), counted together, given back when freed. */
void
test_trail_sorter_temp_limit(void)
{
	TrailSorter s;
	TdbTrailError err;
	uint64_t	rec[2],
				used = 0;
	int			rc = 0;

	trail_sorter_init(&s, sizeof(rec), u64_cmp, NULL, NULL, 64 << 10);
	s.temp_used = &used;
	s.temp_limit = 200 << 10;
	for (uint64_t i = 0; i < 60000 && rc == 0; i++)
	{
		rec[0] = (i * 2654435761u) % 1000003;
		rec[1] = i;
		rc = trail_sorter_put(&s, rec, &err);
	}
	CHECK(rc == TDB_TRAIL_EIO);
	CHECK(strstr(err.msg, "temporary files would exceed their limit (200kB") != NULL);
	CHECK(used > 0 && used <= 200 << 10);
	CHECK(used == s.fend);
	trail_sorter_free(&s);
	CHECK(used == 0);
}
