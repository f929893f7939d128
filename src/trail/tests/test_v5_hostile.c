/*
 * test_v5_hostile.c
 *	  Version-5 footers written by a hostile author (review of 895e7f0):
 *	  summary directory lengths, summary chunks that lie under a good CRC,
 *	  int64 id gaps, relative zone maps at the ends of their ranges, and the
 *	  shapes (0 / 64 columns, string ids, 0 / 1 / many trails).  Each must be
 *	  a clean TDB_TRAIL_ECORRUPT or the right answer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../checksum.h"
#include "footer3.h"
#include "format.h"
#include "format2.h"
#include "pager.h"
#include "test_footer3_hostile.h"
#include "trail_fixture.h"
#include "trail_unit.h"

#define T0 1600000000000000LL

/* ntrails trails of n events, nc columns (types cycle int64, float64, string, bool unless all_int) */
static uint8_t *
v5_write(int version, int ntrails, int n, int nc, bool string_ids, uint32_t page_events, size_t *len)
{
	static const TdbTrailType types[3] = {TDB_TRAIL_INT64, TDB_TRAIL_FLOAT64, TDB_TRAIL_STRING};
	TdbTrailSchema sc = fx_schema(string_ids ? TDB_TRAIL_STRING : TDB_TRAIL_INT64, nc, TDB_TRAIL_INT64);
	TdbTrailWriterOptions o;
	TdbTrailWriter *w;
	TdbTrailError err;
	TdbTrailValue vals[TDB_TRAIL_MAX_COLUMNS];
	char		sid[32];

	for (int c = 0; c < nc; c++)
		sc.columns[c].type = types[c % 3];
	memset(&o, 0, sizeof(o));
	o.version = version;
	o.order = TDB_TRAIL_ORDER_TRAIL;
	o.page_max_events = page_events;
	if (tdb_trail_writer_create(&sc, &o, &w, &err) < 0)
		return NULL;
	for (int k = 0; k < ntrails; k++)
		for (int i = 0; i < n; i++)
		{
			TdbTrailEvent ev;

			memset(&ev, 0, sizeof(ev));
			memset(vals, 0, sizeof(vals));
			if (string_ids)
			{
				snprintf(sid, sizeof(sid), "v%08d", k);
				ev.key.s = sid;
			}
			else
				ev.key.i = 3LL * k + 1;
			ev.time_us = T0 + (int64_t) i * 1000000 + k;
			ev.lon = -10 + (k % 100) * 0.01;
			ev.lat = 40 + i * 0.001;
			for (int c = 0; c < nc; c++)
			{
				vals[c].isnull = (c % 5 == 4) || ((i + c) % 3 == 0 && c % 2);
				if (types[c % 3] == TDB_TRAIL_INT64)
					vals[c].i = k * 100 + i + c;
				else if (types[c % 3] == TDB_TRAIL_FLOAT64)
					vals[c].f = (i % 4 == 1) ? -0.0 : k * 0.25 + i;
				else
					vals[c].s = (k + i) % 2 ? "odd" : "even";
			}
			ev.values = vals;
			if (tdb_trail_writer_add(w, &ev, &err) < 0)
			{
				tdb_trail_writer_free(w);
				return NULL;
			}
		}
	return fx_writer_done(w, len);
}

/*
 * Re-encode the (fully loaded) footer of o as version `version` after mut()
 * changed a copy of its trails (stats copied too, free to change).
 */
typedef void (*Mut) (TdbTrailFooter *f, TdbTrailStats *st, int arg);

static uint8_t *
reencode(const FxOpened *o, const uint8_t *good, int version, Mut mut, int arg, size_t *outlen)
{
	const TdbTrailFooter *f = tdb_trail_footer(o->r);
	TdbTrailFooter c = *f;
	int			nc = f->schema.ncolumns ? f->schema.ncolumns : 1;
	TdbTrailStats *st = calloc((size_t) f->ntrails * nc + 1, sizeof(TdbTrailStats));
	TdbTrailPageInfo *pg = calloc(f->npages + 1, sizeof(TdbTrailPageInfo));
	CodecBuf	out;
	TdbTrailTrailer t;
	uint8_t		tr[TDB_TRAIL_TRAILER_SIZE];

	c.trails = calloc(f->ntrails + 1, sizeof(TdbTrailInfo));
	memcpy(c.trails, f->trails, f->ntrails * sizeof(TdbTrailInfo));
	for (uint32_t i = 0; i < f->ntrails; i++)
	{
		if (f->schema.ncolumns)
			memcpy(&st[(size_t) i * nc], f->trails[i].stats, f->schema.ncolumns * sizeof(TdbTrailStats));
		c.trails[i].stats = &st[(size_t) i * nc];
	}
	memcpy(pg, f->pages, f->npages * sizeof(TdbTrailPageInfo));
	c.pages = pg;
	c.version = (uint16_t) version;
	if (mut)
		mut(&c, st, arg);
	codec_buf_init(&out);
	codec_put_bytes(&out, good, f->data_end);
	memset(&t, 0, sizeof(t));
	trail_footer3_encode(&out, 0, &c, &t);
	t.file_size = out.len + TDB_TRAIL_TRAILER_SIZE;
	t.version = (uint16_t) version;
	trail_trailer_encode(tr, &t);
	codec_put_bytes(&out, tr, sizeof(tr));
	free(c.trails);
	free(st);
	free(pg);
	*outlen = out.len;
	return out.data;
}

/* ---- head surgery: the summary directory ----------------------------------------- */

static size_t
varint_len(uint64_t v)
{
	size_t		n = 1;

	while (v >= 0x80)
		v >>= 7, n++;
	return n;
}

/*
 * A copy of buf (a version-5 file) with summary directory entry k's length
 * replaced by newlen (the head re-signed); NULL if the directory is not found.
 */
static uint8_t *
patch_sums_len(const uint8_t *buf, size_t len, const F3Lazy *z, uint32_t k, uint64_t newlen, size_t *outlen)
{
	TdbTrailTrailer t;
	TdbTrailError err;
	CodecBuf	pat,
				out;
	uint8_t		tr[TDB_TRAIL_TRAILER_SIZE];
	const uint8_t *h,
			   *hit = NULL;
	size_t		off;

	if (tdb_trail_trailer_decode(buf + len - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE, len, &t, &err) < 0)
		return NULL;
	h = buf + t.footer_offset;
	codec_buf_init(&pat);
	codec_put_varint(&pat, z->per[0]);
	codec_put_varint(&pat, z->per[1]);
	for (uint32_t i = 0; i < z->nchunks[TRAIL3_SUMS]; i++)
		codec_put_varint(&pat, z->chunks[TRAIL3_SUMS][i].len);
	for (size_t i = 0; i + pat.len <= t.footer_length; i++)
		if (memcmp(h + i, pat.data, pat.len) == 0)
		{
			hit = h + i;		/* the last match: the directory is near the end */
		}
	codec_buf_free(&pat);
	if (hit == NULL)
		return NULL;
	off = (size_t) (hit - buf) + varint_len(z->per[0]) + varint_len(z->per[1]);
	for (uint32_t i = 0; i < k; i++)
		off += varint_len(z->chunks[TRAIL3_SUMS][i].len);
	codec_buf_init(&out);
	codec_put_bytes(&out, buf, off);
	codec_put_varint(&out, newlen);
	off += varint_len(z->chunks[TRAIL3_SUMS][k].len);
	codec_put_bytes(&out, buf + off, len - TDB_TRAIL_TRAILER_SIZE - off);
	t.footer_length = out.len - t.footer_offset;
	t.footer_crc = tdb_crc32c(out.data + t.footer_offset, t.footer_length);
	t.file_size = out.len + TDB_TRAIL_TRAILER_SIZE;
	trail_trailer_encode(tr, &t);
	codec_put_bytes(&out, tr, sizeof(tr));
	*outlen = out.len;
	return out.data;
}

static int64_t
count_events(TdbTrailReader *r, TdbTrailError *err)
{
	TdbTrailQuery q;
	TdbTrailScan *s;
	TdbTrailEvent ev;
	int64_t		n = 0;
	int			rc;

	memset(&q, 0, sizeof(q));
	if ((rc = tdb_trail_scan_begin(r, &q, &s, err)) < 0)
		return rc;
	while ((rc = tdb_trail_scan_next(s, &ev, err)) > 0)
		n++;
	tdb_trail_scan_end(s);
	return rc < 0 ? rc : n;
}

/* Summary directory lengths: too small, one more/less, overflowing, shifted. */
UNIT_TEST(test_v5_hostile_sums_dir_lengths)
{
	size_t		len;
	uint8_t    *good = v5_write(5, 300, 4, 3, false, 4, &len);
	FxOpened	o;
	TdbTrailError err;
	const F3Lazy *z;
	uint32_t	ns;
	uint64_t	l0;
	struct
	{
		uint32_t	k;
		int64_t		delta;		/* added to the length; INT64_MIN: 2^63; INT64_MAX: 2^64-1 */
		bool		open_fails;
	}			cases[] = {
		{0, -1, true}, {0, 1, true}, {1, INT64_MIN, true}, {1, INT64_MAX, true},
		{0, -100000, true}, {2, 1 << 20, true},
	};

	CHECK(good != NULL);
	if (good == NULL || !fx_open_buf(&o, good, len, "v5h", false, true))
	{
		free(good);
		return;
	}
	z = tdb_trail_footer(o.r)->lazy;
	ns = z->nchunks[TRAIL3_SUMS];
	CHECK(ns >= 3 && ns % 3 == 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		uint64_t	nl;
		size_t		blen;
		uint8_t    *bad;
		FxOpened	b;
		int			rc;

		l0 = z->chunks[TRAIL3_SUMS][cases[i].k].len;
		nl = cases[i].delta == INT64_MIN ? (uint64_t) 1 << 63 : cases[i].delta == INT64_MAX ? UINT64_MAX :
			(cases[i].delta < 0 && (uint64_t) - cases[i].delta > l0) ? 0 : l0 + cases[i].delta;
		bad = patch_sums_len(good, len, z, cases[i].k, nl, &blen);
		CHECK(bad != NULL);
		if (!bad)
			continue;
		rc = hostile_open(&b, bad, blen, &err);
		if (rc == 0)
		{
			int			r2 = tdb_trail_need_summaries(b.r, 0, 300, 7, &err);

			if (cases[i].open_fails)
				unit_fail(__FILE__, __LINE__, "case %zu: length %llu opened (need_summaries rc %d)", i,
						  (unsigned long long) nl, r2);
			fx_close_opened(&b);
		}
		else
			CHECK(rc == TDB_TRAIL_ECORRUPT);
		free(bad);
	}
	/* shifted boundary: chunk 0 one byte shorter, chunk 1 one longer (sum unchanged) */
	{
		size_t		l1,
					l2;
		uint8_t    *b1 = patch_sums_len(good, len, z, 0, z->chunks[TRAIL3_SUMS][0].len - 1, &l1);
		uint8_t    *b2 = NULL;
		FxOpened	b;

		if (b1)
		{
			/* the directory of b1 differs only in entry 0's value */
			TdbTrailFooter dummy;

			(void) dummy;
			b2 = NULL;
			{
				/* patch entry 1 of b1: same lengths as z except entry 0 */
				F3Lazy		z2 = *z;
				F3Chunk    *cc = malloc(ns * sizeof(F3Chunk));

				memcpy(cc, z->chunks[TRAIL3_SUMS], ns * sizeof(F3Chunk));
				cc[0].len--;
				z2.chunks[TRAIL3_SUMS] = cc;
				b2 = patch_sums_len(b1, l1, &z2, 1, z->chunks[TRAIL3_SUMS][1].len + 1, &l2);
				free(cc);
			}
		}
		CHECK(b2 != NULL);
		if (b2 && hostile_open(&b, b2, l2, &err) == 0)
		{
			int64_t		n;

			CHECK(tdb_trail_need_summaries(b.r, 0, 300, 1, &err) == TDB_TRAIL_ECORRUPT);
			CHECK(tdb_trail_need_summaries(b.r, 0, 300, 2, &err) == 0);
			n = count_events(b.r, &err);
			CHECK_EQ_U64((uint64_t) n, 1200);
			fx_close_opened(&b);
		}
		else if (b2)
			CHECK(err.code == TDB_TRAIL_ECORRUPT);
		free(b1);
		free(b2);
	}
	fx_close_opened(&o);
	free(good);
}

/* Summary chunk k of column col: a byte changed (CRC recomputed). */
static uint8_t *
lie_in_chunk(const uint8_t *good, size_t len, const F3Chunk *sc, size_t at, uint8_t val)
{
	uint8_t    *bad = malloc(len);

	memcpy(bad, good, len);
	bad[sc->off + at] = val;
	codec_put_u32le(bad + sc->off + sc->len - 4, tdb_crc32c(bad + sc->off, sc->len - 4));
	return bad;
}

/*
 * Summary chunks that lie under a good CRC: a count with nothing after it
 * (trailing bytes), the last summary cut (truncated), bad float flags; and
 * what a failed load leaves in the stats.
 */
UNIT_TEST(test_v5_hostile_sum_chunk_lies)
{
	size_t		len;
	uint8_t    *good = v5_write(5, 200, 6, 3, false, 6, &len);	/* c0 int64, c1 float64, c2 string */
	FxOpened	o;
	TdbTrailError err;
	const TdbTrailFooter *f;
	const F3Lazy *z;
	uint32_t	ntc;

	CHECK(good != NULL);
	if (good == NULL || !fx_open_buf(&o, good, len, "v5h", false, true))
	{
		free(good);
		return;
	}
	f = tdb_trail_footer(o.r);
	z = f->lazy;
	ntc = z->nchunks[TRAIL3_TRAILS];
	CHECK(ntc >= 2);
	for (int which = 0; which < 5; which++)
	{
		/* which: 0 count -> 0 (trailing bytes), 1 float flags 0xFF, 2 float flags scale 15, 3 count of last -> 6 with no room, 4 the float flag byte 0 (no range, count > 0) in the middle */
		int			col = which == 0 || which == 3 ? 0 : 1;
		const F3Chunk *sc = &z->chunks[TRAIL3_SUMS][col * ntc + 1];
		uint8_t    *bad;
		size_t		at = 0;
		uint8_t		val = 0;
		FxOpened	b;
		int			rc;

		if (which == 0)
			at = 0, val = 0;
		else if (which == 1)
			at = 1, val = 0xFF;
		else if (which == 2)
			at = 1, val = (uint8_t) (1 | (15 << 2));
		else if (which == 3)
			at = sc->len - 5, val = 0x80;	/* last byte of the last summary: a varint that runs into the CRC */
		else
			at = 1, val = 0;	/* float flags: neither range nor NaN with a count */
		bad = lie_in_chunk(good, len, sc, at, val);
		rc = hostile_open(&b, bad, len, &err);
		CHECK(rc == 0);
		if (rc == 0)
		{
			const TdbTrailFooter *bf = tdb_trail_footer(b.r);
			uint32_t	first = sc->first;
			int			r1;

			r1 = tdb_trail_need_summaries(b.r, first, first + sc->count, (uint64_t) 1 << col, &err);
			if (r1 != TDB_TRAIL_ECORRUPT)
				unit_fail(__FILE__, __LINE__, "case %d: need_summaries rc %d, expected ECORRUPT", which, r1);
			/* the other columns still load; the rows still scan */
			CHECK(tdb_trail_need_summaries(b.r, 0, 200, 4, &err) == 0);
			CHECK(count_events(b.r, &err) == 1200);
			/*
			 * a failed column: none of its summaries may read as loaded (the
			 * documented "count 0 until asked for")
			 */
			if (r1 < 0)
			{
				uint32_t	half = 0;

				for (uint32_t i = first; i < first + sc->count; i++)
					half += bf->trails[i].stats[col].count != 0;
				if (half)
					unit_fail(__FILE__, __LINE__,
							  "case %d: %u trails of the failed summary chunk hold summaries of column %d",
							  which, half, col);
			}
			fx_close_opened(&b);
		}
		free(bad);
	}
	fx_close_opened(&o);
	free(good);
}

/* ---- re-encoded footers ---------------------------------------------------------- */

static void
mut_count_above(TdbTrailFooter *f, TdbTrailStats *st, int arg)
{
	(void) st;
	/* one more than its events, its neighbour one fewer: the file's sum unchanged */
	st[(size_t) arg * f->schema.ncolumns].count = f->trails[arg].nevents + 1;
	st[(size_t) (arg - 1) * f->schema.ncolumns].count -= 1;
}

static void
mut_ids(TdbTrailFooter *f, TdbTrailStats *st, int arg)
{
	(void) st;
	if (arg == 0)				/* a duplicate id: the gap wraps */
		f->trails[5].key.i = f->trails[4].key.i;
	else if (arg == 1)			/* descending */
		f->trails[5].key.i = f->trails[4].key.i - 2;
	else if (arg == 2)			/* the ends of int64: valid, the gap 2^64 - 2 */
	{
		for (uint32_t i = 0; i < f->ntrails; i++)
			f->trails[i].key.i = i == 0 ? INT64_MIN : INT64_MAX - (int64_t) (f->ntrails - 1 - i);
	}
	else if (arg == 3)			/* negatives around 0 */
	{
		for (uint32_t i = 0; i < f->ntrails; i++)
			f->trails[i].key.i = (int64_t) i - 3;
	}
}

static void
mut_zones(TdbTrailFooter *f, TdbTrailStats *st, int arg)
{
	(void) st;
	/* trail 0 at the far ends of time and space, trail 1 at the other */
	for (uint32_t p = 0; p < f->npages; p++)
		if (f->pages[p].trail <= 1)
		{
			TdbTrailPageInfo *pg = (TdbTrailPageInfo *) &f->pages[p];
			int			t = (int) f->pages[p].trail;

			if (arg == 0)
				pg->tmin = t ? INT64_MAX - 7 : INT64_MIN + 1, pg->tmax = t ? INT64_MAX : INT64_MIN + 7;
			else
				pg->xmin = t ? 1800000000 : -1800000000, pg->ymin = t ? 900000000 : -900000000,
					pg->xmax = t ? 1800000000 : pg->xmax, pg->ymax = t ? 900000000 : pg->ymax;
		}
	if (arg == 0)
	{
		f->trails[0].tmin = INT64_MIN + 1;
		f->trails[0].tmax = INT64_MIN + 7;
		f->trails[1].tmin = INT64_MAX - 7;
		f->trails[1].tmax = INT64_MAX;
	}
	else
	{
		f->trails[0].xmin = -1800000000;
		f->trails[0].ymin = -900000000;
		f->trails[1].xmin = 1800000000;
		f->trails[1].xmax = 1800000000;
		f->trails[1].ymin = 900000000;
		f->trails[1].ymax = 900000000;
	}
}

/* Every trail's entry and summaries, v5 against v4 of the same footer. */
static void
same_entries(const TdbTrailFooter *a, const TdbTrailFooter *b, const char *what)
{
	int			bad = 0;

	CHECK(a->ntrails == b->ntrails);
	for (uint32_t i = 0; i < a->ntrails && i < b->ntrails && bad < 3; i++)
	{
		const TdbTrailInfo *x = &a->trails[i],
				   *y = &b->trails[i];
		bool		ok = trail_key_cmp(a->schema.id_type, &x->key, &y->key) == 0 && x->nevents == y->nevents &&
			x->tmin == y->tmin && x->tmax == y->tmax && x->xmin == y->xmin && x->ymin == y->ymin &&
			x->xmax == y->xmax && x->ymax == y->ymax && x->npages == y->npages;

		for (int c = 0; ok && c < a->schema.ncolumns; c++)
			ok = trail_stats_equal(a->schema.columns[c].type, &x->stats[c], &y->stats[c]);
		if (!ok)
		{
			unit_fail(__FILE__, __LINE__, "%s: trail %u differs between version 5 and version 4", what, i);
			bad++;
		}
	}
}

/* Re-encode as v4 and v5; both must agree (both open or both fail ECORRUPT). */
static void
differential(const FxOpened *o, const uint8_t *good, Mut mut, int arg, const char *what, int expect_v5)
{
	size_t		l4,
				l5;
	uint8_t    *b4 = reencode(o, good, 4, mut, arg, &l4),
			   *b5 = reencode(o, good, 5, mut, arg, &l5);
	FxOpened	o4,
				o5;
	TdbTrailError e4,
				e5;
	int			r4 = hostile_open(&o4, b4, l4, &e4),
				r5 = hostile_open(&o5, b5, l5, &e5);
	bool		op4 = r4 == 0,
				op5 = r5 == 0;

	if (r4 == 0)
		r4 = tdb_trail_need_all(o4.r, &e4);
	if (r5 == 0)
		r5 = tdb_trail_need_all(o5.r, &e5);
	if (expect_v5 != 1 && r5 != expect_v5)
		unit_fail(__FILE__, __LINE__, "%s: version 5 rc %d (%s), expected %d", what, r5, r5 ? e5.msg : "",
				  expect_v5);
	if (r4 == 0 && r5 == 0)
		same_entries(tdb_trail_footer(o4.r), tdb_trail_footer(o5.r), what);
	if (r5 == 0)
	{
		uint64_t	nev = 0;
		int			rv = tdb_trail_verify(o5.r, &nev, &e5);

		printf("# %s: v4 rc %d, v5 rc %d, v5 verify rc %d%s%s\n", what, r4, r5, rv, rv ? ": " : "",
			   rv ? e5.msg : "");
	}
	else
		printf("# %s: v4 rc %d (%s), v5 rc %d (%s)\n", what, r4, r4 ? e4.msg : "", r5, e5.msg);
	if (op4)
		fx_close_opened(&o4);
	if (op5)
		fx_close_opened(&o5);
	free(b4);
	free(b5);
}

UNIT_TEST(test_v5_hostile_reencoded)
{
	size_t		len;
	uint8_t    *good = v5_write(5, 150, 3, 2, false, 3, &len);
	FxOpened	o;

	CHECK(good != NULL);
	if (good == NULL || !fx_open_buf(&o, good, len, "v5h", true, true))
	{
		free(good);
		return;
	}
	/* round trip untouched */
	differential(&o, good, NULL, 0, "untouched", 0);
	differential(&o, good, mut_count_above, 3, "summary count above events, chunk 0", TDB_TRAIL_ECORRUPT);
	differential(&o, good, mut_count_above, 149, "summary count above events, last trail", TDB_TRAIL_ECORRUPT);
	differential(&o, good, mut_count_above, 64, "summary count above events, first of chunk 1", TDB_TRAIL_ECORRUPT);
	differential(&o, good, mut_ids, 0, "duplicate int id", TDB_TRAIL_ECORRUPT);
	differential(&o, good, mut_ids, 1, "descending int id", TDB_TRAIL_ECORRUPT);
	differential(&o, good, mut_ids, 2, "ids INT64_MIN then near INT64_MAX", 0);
	differential(&o, good, mut_ids, 3, "ids around zero", 0);
	differential(&o, good, mut_zones, 0, "times at INT64_MIN and INT64_MAX", 1);
	differential(&o, good, mut_zones, 1, "lon/lat at the range ends", 1);
	fx_close_opened(&o);
	free(good);
}

/* Shapes: columns 0 and 64, string ids, 0, 1 and > 64 x 64 trails; v5 summaries = v4's. */
UNIT_TEST(test_v5_hostile_shapes)
{
	struct
	{
		int			ntr,
					n,
					nc;
		bool		str;
	}			shapes[] = {
		{0, 0, 2, false}, {1, 1, 2, false}, {1, 3, 0, false}, {40, 2, 0, true}, {30, 2, 64, false},
		{30, 2, 64, true}, {64 * 64 + 300, 1, 3, false}, {64 * 64 * 2 + 7, 1, 1, true},
	};

	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
	{
		size_t		l4 = 0,
					l5 = 0;
		uint8_t    *b4 = v5_write(4, shapes[i].ntr, shapes[i].n, shapes[i].nc, shapes[i].str, 4, &l4),
				   *b5 = v5_write(5, shapes[i].ntr, shapes[i].n, shapes[i].nc, shapes[i].str, 4, &l5);
		FxOpened	o4,
					o5;
		TdbTrailError err;
		uint64_t	nev = 0;
		char		what[64];

		snprintf(what, sizeof(what), "shape %zu (%d trails, %d columns%s)", i, shapes[i].ntr, shapes[i].nc,
				 shapes[i].str ? ", string ids" : "");
		if (b4 == NULL || b5 == NULL)
		{
			printf("# %s: the writer refused (%s)\n", what, b5 ? "v4" : "v5");
			if (shapes[i].ntr > 0)
				unit_fail(__FILE__, __LINE__, "%s: could not write", what);
			free(b4);
			free(b5);
			continue;
		}
		if (hostile_open(&o4, b4, l4, &err) != 0)
		{
			unit_fail(__FILE__, __LINE__, "%s: v4 open: %s", what, err.msg);
			free(b4);
			free(b5);
			continue;
		}
		if (hostile_open(&o5, b5, l5, &err) != 0)
		{
			unit_fail(__FILE__, __LINE__, "%s: v5 open: %s", what, err.msg);
			fx_close_opened(&o4);
			free(b4);
			free(b5);
			continue;
		}
		CHECK(tdb_trail_footer(o5.r)->version == 5);
		CHECK(tdb_trail_need_all(o4.r, &err) == 0);
		/* one column at a time, then the rest */
		for (int c = 0; c < shapes[i].nc; c += 7)
			CHECK(tdb_trail_need_summaries(o5.r, 0, (uint32_t) shapes[i].ntr, (uint64_t) 1 << c, &err) == 0);
		CHECK(tdb_trail_need_summaries(o5.r, 0, (uint32_t) shapes[i].ntr, ~(uint64_t) 0, &err) == 0);
		same_entries(tdb_trail_footer(o4.r), tdb_trail_footer(o5.r), what);
		CHECK(tdb_trail_verify(o5.r, &nev, &err) == 0);
		CHECK_EQ_U64(nev, (uint64_t) shapes[i].ntr * shapes[i].n);
		printf("# %s: v4 %zu B, v5 %zu B\n", what, l4, l5);
		fx_close_opened(&o4);
		fx_close_opened(&o5);
		free(b4);
		free(b5);
	}
}

/* need_ids with a column mask: the chunks of those ids get their summaries; others don't. */
UNIT_TEST(test_v5_hostile_need_ids_mask)
{
	size_t		len;
	uint8_t    *good = v5_write(5, 500, 2, 64, false, 2, &len);
	FxOpened	o;
	TdbTrailError err;
	int64_t		ids[2] = {1, 3 * 499 + 1};
	const TdbTrailFooter *f;

	CHECK(good != NULL);
	if (good == NULL || !fx_open_buf(&o, good, len, "v5h", false, true))
	{
		free(good);
		return;
	}
	f = tdb_trail_footer(o.r);
	CHECK(tdb_trail_need_ids(o.r, ids, NULL, 2, (uint64_t) 1 << 63, &err) == 0);
	CHECK(f->trails[0].stats[63].count == 1);
	CHECK(f->trails[499].nevents == 2);
	/* column 63 of trail 499 (int64, no NULLs unless c%5==4: 63%5=3) */
	CHECK(f->trails[499].stats[63].count == 1);
	CHECK(f->trails[499].stats[0].count == 0);	/* not asked for */
	fx_close_opened(&o);
	free(good);
}
