/*
 * test_v4.c
 *	  Trail format version 4 (issue 33): small trails share pages in trail
 *	  order, and a page of several trails may encode a column by runs
 *	  (COLENC_RUNS) and its deltas with exceptions (COLENC_PATCHED).  The
 *	  same events as a version-3 file of the same input, in fewer pages and
 *	  bytes; the codecs read back bit for bit and refuse damage cleanly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colenc.h"
#include "format.h"
#include "trail_memfile.h"
#include "trail_unit.h"

#define NTRAILS		400
#define BIG_TRAIL	200			/* 9,000 events: pages of its own */

static int
trail_events(int tr)
{
	return tr == BIG_TRAIL ? 9000 : tr % 40 + 1;
}

static const char *const words[4] = {"alpha", "bravo", "charlie", "delta"};

/* event e of trail tr, deterministic */
static void
event_of(int tr, int e, TdbTrailEvent *ev, TdbTrailValue *vals)
{
	memset(ev, 0, sizeof(*ev));
	memset(vals, 0, 5 * sizeof(*vals));
	ev->key.i = (int64_t) tr * 7919;	/* ids ascend with tr */
	/* trails out of time order: each trail's clock starts elsewhere */
	ev->time_us = 1593475200000000LL + (int64_t) ((tr * 37) % 400) * 1000000 + (int64_t) e * 10000000;
	ev->lon = 2.0 + tr * 0.01 + e * 1e-5;
	ev->lat = 48.0 + (tr % 7) * 0.02 - e * 3e-6;
	vals[0].isnull = tr % 5 == 0;	/* a float constant within each trail, or every one NULL */
	vals[0].f = 12.5 + tr * 0.1;
	vals[1].i = (int64_t) (e * 2654435761u % 1000) - 500;	/* varies */
	vals[2].s = words[tr % 4];	/* a string constant within each trail */
	vals[3].i = (tr + e) % 3 == 0;	/* a boolean */
	vals[4].isnull = true;		/* never a value */
	ev->values = vals;
}

static uint8_t *
write_file(int version, size_t *len)
{
	TdbTrailSchema sc;
	TdbTrailWriter *w;
	TdbTrailWriterOptions wo = {.version = version};
	TdbTrailError err;
	uint8_t    *buf = NULL;
	static const struct
	{
		const char *name;
		TdbTrailType type;
	}			cols[5] = {{"f", TDB_TRAIL_FLOAT64}, {"i", TDB_TRAIL_INT64}, {"s", TDB_TRAIL_STRING},
	{"b", TDB_TRAIL_BOOL}, {"nothing", TDB_TRAIL_FLOAT64}};

	memset(&sc, 0, sizeof(sc));
	strcpy(sc.id_name, "id");
	sc.id_type = TDB_TRAIL_INT64;
	sc.ncolumns = 5;
	for (int c = 0; c < 5; c++)
	{
		strcpy(sc.columns[c].name, cols[c].name);
		sc.columns[c].type = cols[c].type;
	}
	CHECK(tdb_trail_writer_create(&sc, &wo, &w, &err) == 0);
	/* added in reverse: the writer sorts */
	for (int tr = NTRAILS - 1; tr >= 0; tr--)
		for (int e = 0; e < trail_events(tr); e++)
		{
			TdbTrailEvent ev;
			TdbTrailValue vals[5];

			event_of(tr, e, &ev, vals);
			CHECK(tdb_trail_writer_add(w, &ev, &err) == 0);
		}
	CHECK(tdb_trail_writer_finish(w, &buf, len, &err) == 0);
	tdb_trail_writer_free(w);
	return buf;
}

/* Every page decoded: each event equals the input; counts per trail. */
static uint32_t
check_file(const uint8_t *buf, size_t len, int version, uint32_t *several)
{
	TdbTrailTrailer t;
	TdbTrailFooter f;
	TdbTrailError err;
	TdbTrailPage pg;
	uint32_t	seen[NTRAILS] = {0},
				npages;
	int			next[NTRAILS] = {0};

	CHECK(tdb_trail_trailer_decode(buf + len - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE, len, &t, &err) == 0);
	CHECK(t.version == version);
	CHECK(fx_decode_footer_whole(buf, len, &t, &f, &err) == 0);
	CHECK(f.version == version && f.ntrails == NTRAILS);
	memset(&pg, 0, sizeof(pg));
	*several = 0;
	for (uint32_t p = 0; p < f.npages; p++)
	{
		const TdbTrailPageInfo *pi = &f.pages[p];

		if (tdb_trail_page_decode(&f, p, buf + pi->offset, pi->length, &pg, &err) != 0)
		{
			unit_fail(__FILE__, __LINE__, "version %d, page %u: %s", version, p, err.msg);
			break;
		}
		*several += pi->trail == UINT32_MAX;
		for (uint32_t i = 0; i < pg.nevents; i++)
		{
			int			tr = (int) pg.trail[i],
						e = next[tr]++;
			TdbTrailEvent ev;
			TdbTrailValue vals[5];

			event_of(tr, e, &ev, vals);
			CHECK(f.trails[tr].key.i == ev.key.i);
			CHECK(pg.time[i] == ev.time_us);
			CHECK(pg.lon[i] == tdb_trail_coord_fix(ev.lon) && pg.lat[i] == tdb_trail_coord_fix(ev.lat));
			CHECK(pg.cols[0][i].isnull == vals[0].isnull &&
				  (vals[0].isnull || memcmp(&pg.cols[0][i].f, &vals[0].f, 8) == 0));
			CHECK(!pg.cols[1][i].isnull && pg.cols[1][i].i == vals[1].i);
			CHECK(!pg.cols[2][i].isnull && strcmp(pg.cols[2][i].s, vals[2].s) == 0);
			CHECK(!pg.cols[3][i].isnull && pg.cols[3][i].i == vals[3].i);
			CHECK(pg.cols[4][i].isnull);
			seen[tr]++;
		}
	}
	for (int tr = 0; tr < NTRAILS; tr++)
		if (seen[tr] != (uint32_t) trail_events(tr))
			unit_fail(__FILE__, __LINE__, "version %d: trail %d read %u events of %d", version, tr,
					  seen[tr], trail_events(tr));
	npages = f.npages;
	tdb_trail_page_release(&pg);
	tdb_trail_footer_release(&f);
	return npages;
}

UNIT_TEST(test_trail_v4_small_trails_share_pages)
{
	size_t		len3,
				len4;
	uint8_t    *f3 = write_file(3, &len3),
			   *f4 = write_file(4, &len4);
	uint32_t	several3 = 0,
				several4 = 0,
				p3,
				p4;

	CHECK(f3 != NULL && f4 != NULL);
	if (f3 == NULL || f4 == NULL)
		return;
	p3 = check_file(f3, len3, 3, &several3);
	p4 = check_file(f4, len4, 4, &several4);
	printf("# version 3: %u pages, %zu bytes; version 4: %u pages (%u of several trails), %zu bytes\n",
		   p3, len3, p4, several4, len4);
	CHECK(several3 == 0);
	CHECK(several4 > 0 && p4 * 4 < p3);
	CHECK(len4 < len3);
	free(f3);
	free(f4);
}

/* COLENC_RUNS: read back with the runs given, refused without them or truncated. */
UNIT_TEST(test_trail_v4_runs_roundtrip)
{
	/* a run of none, constants, a ramp, a run of one, scattered values */
	static const uint32_t runs[6] = {0, 50, 50, 1, 0, 99};
	int64_t		v[200],
				got[200];
	CodecBuf	b;
	bool		byruns = false;

	for (int i = 0; i < 200; i++)
		v[i] = i < 50 ? 7 : i < 100 ? 1000 + 3 * i : i == 100 ? -5 : (int64_t) ((i * 2654435761u) % 100000);
	codec_buf_init(&b);
	for (int version = 3; version <= 4; version++)
	{
		b.len = 0;
		CHECK(colenc_put_runs(&b, TDB_TRAIL_INT64, v, 200, version, false, runs, 6));
		byruns |= b.data[0] == COLENC_RUNS;
		CHECK(version == 4 || b.data[0] != COLENC_RUNS);
		{
			CodecCur	c = {b.data, b.data + b.len};

			CHECK(colenc_get(&c, TDB_TRAIL_INT64, 200, 0, got, runs, 6) == NULL && c.p == c.end);
			CHECK(memcmp(got, v, sizeof(v)) == 0);
		}
	}
	CHECK(byruns);				/* version 4 took the runs: smaller here */
	{
		CodecCur	c = {b.data, b.data + b.len};

		CHECK(colenc_get(&c, TDB_TRAIL_INT64, 200, 0, got, NULL, 0) != NULL);
	}
	for (size_t cut = 0; cut < b.len; cut++)
	{
		CodecCur	c = {b.data, b.data + cut};

		if (colenc_get(&c, TDB_TRAIL_INT64, 200, 0, got, runs, 6) == NULL)
			unit_fail(__FILE__, __LINE__, "a prefix of %zu bytes of %zu decodes", cut, b.len);
	}
	{
		/* runs that do not add up to the values are refused, never read past */
		static const uint32_t fewer[2] = {50, 50},
					more[2] = {150, 100};
		CodecCur	c = {b.data, b.data + b.len};

		CHECK(colenc_get(&c, TDB_TRAIL_INT64, 200, 0, got, fewer, 2) != NULL);
		c = (CodecCur) {b.data, b.data + b.len};
		CHECK(colenc_get(&c, TDB_TRAIL_INT64, 200, 0, got, more, 2) != NULL);
	}
	codec_buf_free(&b);
}

/* COLENC_PATCHED is chosen for deltas with a few jumps, and only from version 4. */
UNIT_TEST(test_trail_v4_patched_deltas)
{
	int64_t		v[1000],
				got[1000];
	CodecBuf	b3,
				b4;

	/* a ramp of small steps that jumps back 30 times (a page of 30 trails' times) */
	for (int i = 0; i < 1000; i++)
		v[i] = (int64_t) (i % 33) * 10 + (i / 33) * 1000000007LL % 86400 + (i * 7 % 3);
	codec_buf_init(&b3);
	codec_buf_init(&b4);
	CHECK(colenc_put_sequence(&b3, v, 1000, 3));
	CHECK(colenc_put_sequence(&b4, v, 1000, 4));
	printf("# 1000 values with 30 jumps: %zu bytes in version 3, %zu in version 4 (encoding %u)\n",
		   b3.len, b4.len, b4.data[0]);
	CHECK(b3.data[0] != COLENC_PATCHED);
	CHECK(b4.data[0] == COLENC_PATCHED && b4.len * 2 < b3.len);
	{
		CodecCur	c = {b4.data, b4.data + b4.len};

		CHECK(colenc_get(&c, TDB_TRAIL_INT64, 1000, 0, got, NULL, 0) == NULL && c.p == c.end);
		CHECK(memcmp(got, v, sizeof(v)) == 0);
	}
	codec_buf_free(&b3);
	codec_buf_free(&b4);
}
