/*
 * test_auto_order.c
 *	  Page order "auto" (issue 33): the writer lays out by time when the
 *	  trails are short beside the file's time span (TDB_TRAIL_AUTO_SPAN_RATIO),
 *	  else by trail; byte for byte what the order it took writes when asked
 *	  for by name, and the note says which and why.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "trail_memfile.h"
#include "trail_unit.h"

#define T0 1593475200000000LL	/* 2020-06-30 */
#define HOUR 3600000000LL

/*
 * Trails of a shape: ntrails trails of nev events each, trail tr starting
 * at tr * start_step_us and lasting span_us; added newest first (the
 * writer sorts).
 */
typedef struct Shape
{
	int			ntrails;
	int			nev;
	int64_t		start_step_us;
	int64_t		span_us;
} Shape;

static size_t memory_limit;		/* 0: the writer's default */
static char last_error[512];
static int64_t id_shift;		/* ids are 1000 + 3 tr, shifted left this much */

static uint8_t *
write_shape(const Shape *s, TdbTrailOrder order, bool by_time, int version, int64_t bucket_us,
			size_t *len, char *note, size_t notelen)
{
	TdbTrailSchema sc;
	TdbTrailWriter *w;
	TdbTrailWriterOptions wo = {.version = version, .order = order, .by_time = by_time, .bucket_us = bucket_us,
	.memory_limit = memory_limit};
	TdbTrailError err;
	uint8_t    *buf = NULL;

	memset(&sc, 0, sizeof(sc));
	strcpy(sc.id_name, "id");
	sc.id_type = TDB_TRAIL_INT64;
	sc.ncolumns = 1;
	strcpy(sc.columns[0].name, "speed");
	sc.columns[0].type = TDB_TRAIL_FLOAT64;
	if (tdb_trail_writer_create(&sc, &wo, &w, &err) != 0)
	{
		unit_fail(__FILE__, __LINE__, "create: %s", err.msg);
		return NULL;
	}
	for (int tr = s->ntrails - 1; tr >= 0; tr--)
		for (int e = s->nev - 1; e >= 0; e--)
		{
			TdbTrailEvent ev;
			TdbTrailValue v;

			memset(&ev, 0, sizeof(ev));
			memset(&v, 0, sizeof(v));
			ev.key.i = (int64_t) ((uint64_t) (1000 + (int64_t) tr * 3) << id_shift);
			ev.time_us = T0 + tr * s->start_step_us + (s->nev > 1 ? s->span_us * e / (s->nev - 1) : 0);
			ev.lon = -74.0 + (tr % 10000) * 1e-3 + e * 1e-5;
			ev.lat = 40.6 + (tr % 13) * 1e-3;
			v.f = 10.0 + e % 7;
			ev.values = &v;
			if (tdb_trail_writer_add(w, &ev, &err) != 0)
			{
				snprintf(last_error, sizeof(last_error), "%s", err.msg);
				tdb_trail_writer_free(w);
				return NULL;
			}
		}
	if (tdb_trail_writer_finish(w, &buf, len, &err) != 0)
	{
		snprintf(last_error, sizeof(last_error), "%s", err.msg);
		buf = NULL;
	}
	snprintf(note, notelen, "%s", tdb_trail_writer_order_note(w));
	tdb_trail_writer_free(w);
	return buf;
}

/* The file's order and bucket, and every event read back once. */
static void
check_shape_file(const uint8_t *buf, size_t len, const Shape *s, TdbTrailOrder order, int64_t bucket_us)
{
	TdbTrailTrailer t;
	TdbTrailFooter f;
	TdbTrailError err;
	TdbTrailPage pg;
	uint64_t	events = 0;

	CHECK(tdb_trail_trailer_decode(buf + len - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE, len, &t, &err) == 0);
	CHECK(fx_decode_footer_whole(buf, len, &t, &f, &err) == 0);
	CHECK(f.order == order);
	CHECK(order != TDB_TRAIL_ORDER_SPACETIME || f.bucket_us == bucket_us);
	CHECK(f.ntrails == (uint32_t) s->ntrails);
	memset(&pg, 0, sizeof(pg));
	for (uint32_t p = 0; p < f.npages; p++)
	{
		CHECK(tdb_trail_page_decode(&f, p, buf + f.pages[p].offset, f.pages[p].length, &pg, &err) == 0);
		events += pg.nevents;
	}
	CHECK(events == (uint64_t) s->ntrails * s->nev);
	tdb_trail_page_release(&pg);
	tdb_trail_footer_release(&f);
}

/* auto gives the bytes of the order it names, and says so */
static void
check_auto(const Shape *s, bool want_time, int64_t bucket_us)
{
	size_t		la,
				lx;
	char		note[160],
				none[160];
	uint8_t    *a = write_shape(s, TDB_TRAIL_ORDER_AUTO, false, 4, bucket_us, &la, note, sizeof(note));
	uint8_t    *x = want_time ?
		write_shape(s, TDB_TRAIL_ORDER_SPACETIME, true, 4, bucket_us, &lx, none, sizeof(none)) :
		write_shape(s, TDB_TRAIL_ORDER_TRAIL, false, 4, 0, &lx, none, sizeof(none));

	CHECK(a != NULL && x != NULL);
	if (a == NULL || x == NULL)
		goto out;
	printf("# %d trails of %d events, %.2f h each, one every %.2f h: %s\n", s->ntrails, s->nev,
		   (double) s->span_us / HOUR, (double) s->start_step_us / HOUR, note);
	CHECK(strncmp(note, want_time ? "page order time (auto:" : "page order trail (auto:", 22) == 0);
	CHECK(none[0] == '\0');		/* an order asked for by name: nothing decided */
	CHECK(la == lx && memcmp(a, x, la) == 0);
	check_shape_file(a, la, s, want_time ? TDB_TRAIL_ORDER_SPACETIME : TDB_TRAIL_ORDER_TRAIL,
					 bucket_us ? bucket_us : HOUR);
out:
	free(a);
	free(x);
}

UNIT_TEST(test_trail_auto_order)
{
	/* flights: 30 min each, one starting every 2 h (the file spans 10,000 h: many buckets) */
	Shape		flights = {5000, 20, 2 * HOUR, HOUR / 2};
	/* vessels present the whole day: trails as long as the file */
	Shape		vessels = {300, 50, 0, 24 * HOUR};
	/* just under the ratio: trails of 3 h, the file 3 h * 2 - 1 us */
	Shape		under = {2, 40, 3 * HOUR - 1, 3 * HOUR};
	/* just at it: the file spans exactly twice the mean */
	Shape		at = {2, 40, 3 * HOUR, 3 * HOUR};
	/* short trails in a file of one bucket: by trail (time order would be the same pages, unpacked) */
	Shape		one_bucket = {100, 10, 30000000LL, 60000000LL};
	/* vessels seen for 9 h in a file of 23 h (the US coast's AIS): by time */
	Shape		coast = {3, 40, 7 * HOUR, 9 * HOUR};
	/* trails of 12 h, the most buckets a lookup may read, in a file of 1,200 h */
	Shape		at_cap = {100, 30, 12 * HOUR, 12 * HOUR};
	/* trails of 13 h in a file of 5,200 h: a lookup would read a stretch per hour */
	Shape		long_trails = {400, 30, 13 * HOUR, 13 * HOUR};

	check_auto(&flights, true, 0);
	check_auto(&flights, true, 4 * HOUR);	/* a bucket given: time order with it */
	check_auto(&vessels, false, 0);
	check_auto(&under, false, 0);
	check_auto(&at, true, 0);
	check_auto(&one_bucket, false, 0);
	check_auto(&coast, true, 0);
	check_auto(&at_cap, true, 0);
	check_auto(&long_trails, false, 0);
	check_auto(&long_trails, true, 2 * HOUR);	/* of 2-hour buckets: 6.5 of them */
}

UNIT_TEST(test_trail_auto_order_edges)
{
	Shape		flights = {50, 10, 2 * HOUR, HOUR / 2};
	Shape		none = {0, 0, 0, 0};
	Shape		single = {1, 1, 0, 0};
	size_t		len;
	char		note[160];
	uint8_t    *b;

	/* version 1 has trail order only: auto is that, decided at once */
	b = write_shape(&flights, TDB_TRAIL_ORDER_AUTO, false, 1, 0, &len, note, sizeof(note));
	CHECK(b != NULL && note[0] == '\0');
	if (b != NULL)
	{
		TdbTrailTrailer t;
		TdbTrailError err;

		CHECK(tdb_trail_trailer_decode(b + len - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE, len, &t, &err) == 0);
		CHECK(t.version == 1);
	}
	free(b);
	/* no events, one event: by trail */
	b = write_shape(&none, TDB_TRAIL_ORDER_AUTO, false, 4, 0, &len, note, sizeof(note));
	CHECK(b != NULL && strncmp(note, "page order trail", 16) == 0);
	free(b);
	b = write_shape(&single, TDB_TRAIL_ORDER_AUTO, false, 4, 0, &len, note, sizeof(note));
	CHECK(b != NULL && strncmp(note, "page order trail", 16) == 0);
	if (b != NULL)
		check_shape_file(b, len, &single, TDB_TRAIL_ORDER_TRAIL, 0);
	free(b);
	/* by name, as before */
	{
		TdbTrailOrder o;
		bool		by_time;

		CHECK(tdb_trail_order_by_name("auto", &o, &by_time) && o == TDB_TRAIL_ORDER_AUTO && !by_time);
		CHECK(!tdb_trail_order_by_name("Auto", &o, &by_time));
	}
}

/*
 * From the review: the record auto keeps of the trails counts against the
 * memory limit while events come (doubling included), and not after the
 * writer decided (it is freed then): a file by trail that fits a limit
 * fits it as auto too.  Ids whose low bits are all zero hash as well as any.
 */
UNIT_TEST(test_trail_auto_order_memory)
{
	Shape		wide = {30000, 2, 0, 1000 * HOUR};	/* every trail spans the file: by trail */
	Shape		tiny = {140000, 1, HOUR, 0};	/* one event each: a record of 16 MB past 131,072 */
	size_t		lo = 8,
				hi = 72,
				la,
				lt;
	char		note[160];
	uint8_t    *a,
			   *t;

	/* the least limit (MB) at which order trail writes wide: bounded bisection */
	while (lo < hi)
	{
		size_t		mid = (lo + hi) / 2;
		uint8_t    *b;

		memory_limit = mid << 20;
		b = write_shape(&wide, TDB_TRAIL_ORDER_TRAIL, false, 4, 0, &lt, note, sizeof(note));
		if (b != NULL)
			hi = mid;
		else
			lo = mid + 1;
		free(b);
	}
	memory_limit = lo << 20;
	printf("# %zu trails by trail fit %zu MB\n", (size_t) wide.ntrails, lo);
	t = write_shape(&wide, TDB_TRAIL_ORDER_TRAIL, false, 4, 0, &lt, note, sizeof(note));
	a = write_shape(&wide, TDB_TRAIL_ORDER_AUTO, false, 4, 0, &la, note, sizeof(note));
	if (a == NULL)
		unit_fail(__FILE__, __LINE__, "auto at %zu MB: %s", lo, last_error);
	CHECK(t != NULL && a != NULL && la == lt && memcmp(a, t, la) == 0);
	free(a);
	free(t);

	/* a limit too small for the record: refused while adding, saying what took it */
	memory_limit = 16 << 20;
	last_error[0] = '\0';
	a = write_shape(&tiny, TDB_TRAIL_ORDER_AUTO, false, 4, 0, &la, note, sizeof(note));
	if (a != NULL || strstr(last_error, "page order auto's record of") == NULL)
		unit_fail(__FILE__, __LINE__, "140,000 trails at 16 MB: %s", a ? "written" : last_error);
	else
		printf("# %s\n", last_error);
	free(a);

	/* more trails than auto records (2^18): decided on those it met first, the same file as by time */
	memory_limit = 0;
	{
		Shape		many = {300000, 1, HOUR / 60, 0};

		check_auto(&many, true, 0);
	}

	/* ids that are multiples of 2^48 (and negative ones): the same file as by time */
	memory_limit = 0;
	id_shift = 48;
	{
		Shape		shifted = {20000, 2, HOUR, HOUR / 4};

		check_auto(&shifted, true, 0);
	}
	id_shift = 0;
}
