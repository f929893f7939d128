/*
 * test_v4_hostile.c
 *	  Review of trail format version 4: pages of a real version-4 (and
 *	  version-3) file rewritten as a hostile author would, chunk CRCs and
 *	  the footer's chunk lengths made to match, then decoded.  Each must be
 *	  refused as TDB_TRAIL_ECORRUPT (or, where the bytes are legal, decode
 *	  to what they say), never crash or read out of bounds (run under ASan:
 *	  make src/trail/tests/trail_tests_asan).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../checksum.h"
#include "codec.h"
#include "colenc.h"
#include "format.h"
#include "trail_memfile.h"
#include "trail_unit.h"

#define HX_NTRAILS	6
#define HX_EVENTS	5			/* per trail: 6 small trails share a page in version 4 */

static uint8_t *
hx_write(int version, TdbTrailOrder order, int ntrails, int nev, size_t *len)
{
	TdbTrailSchema sc;
	TdbTrailWriter *w;
	TdbTrailWriterOptions wo = {.version = version, .order = order, .bucket_us = 3600000000LL};
	TdbTrailError err;
	uint8_t    *buf = NULL;

	memset(&sc, 0, sizeof(sc));
	strcpy(sc.id_name, "id");
	sc.id_type = TDB_TRAIL_INT64;
	sc.ncolumns = 2;
	strcpy(sc.columns[0].name, "i");
	sc.columns[0].type = TDB_TRAIL_INT64;
	strcpy(sc.columns[1].name, "f");
	sc.columns[1].type = TDB_TRAIL_FLOAT64;
	if (tdb_trail_writer_create(&sc, &wo, &w, &err) != 0)
		return NULL;
	for (int tr = 0; tr < ntrails; tr++)
		for (int e = 0; e < nev; e++)
		{
			TdbTrailEvent ev;
			TdbTrailValue v[2];

			memset(&ev, 0, sizeof(ev));
			memset(v, 0, sizeof(v));
			ev.key.i = tr + 1;
			ev.time_us = 1593475200000000LL + (int64_t) e * 1000000 + tr * 7;
			ev.lon = 2.0 + tr * 0.01 + e * 1e-5;
			ev.lat = 48.0 + e * 1e-5;
			v[0].i = tr * 100 + e;
			v[1].f = e * 0.5;
			ev.values = v;
			if (tdb_trail_writer_add(w, &ev, &err) != 0)
				return NULL;
		}
	if (tdb_trail_writer_finish(w, &buf, len, &err) != 0)
		buf = NULL;
	tdb_trail_writer_free(w);
	return buf;
}

typedef struct Hx
{
	uint8_t    *file;
	size_t		len;
	TdbTrailFooter f;
	uint32_t	multi;			/* a page of several trails, or UINT32_MAX */
	uint32_t	single;			/* a page of one trail, or UINT32_MAX */
	uint32_t   *orig;			/* each page's chunk lengths and length as written */
} Hx;

static bool
hx_open(Hx *h, int version, TdbTrailOrder order, int ntrails, int nev)
{
	TdbTrailTrailer t;
	TdbTrailError err;

	memset(h, 0, sizeof(*h));
	h->file = hx_write(version, order, ntrails, nev, &h->len);
	if (h->file == NULL)
		return false;
	if (tdb_trail_trailer_decode(h->file + h->len - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE,
								 h->len, &t, &err) != 0 ||
		fx_decode_footer_whole(h->file, h->len, &t, &h->f, &err) != 0)
		return false;
	h->multi = h->single = UINT32_MAX;
	h->orig = malloc((size_t) h->f.npages * (3 + h->f.schema.ncolumns) * sizeof(uint32_t));
	for (uint32_t p = 0; p < h->f.npages; p++)
	{
		uint32_t   *o = h->orig + (size_t) p * (3 + h->f.schema.ncolumns);

		memcpy(o, h->f.pages[p].chunk_len, (2 + h->f.schema.ncolumns) * sizeof(uint32_t));
		o[2 + h->f.schema.ncolumns] = h->f.pages[p].length;
	}
	for (uint32_t p = 0; p < h->f.npages; p++)
		if (h->f.pages[p].trail == UINT32_MAX && h->multi == UINT32_MAX)
			h->multi = p;
		else if (h->f.pages[p].trail != UINT32_MAX && h->single == UINT32_MAX)
			h->single = p;
	return true;
}

static void
hx_close(Hx *h)
{
	tdb_trail_footer_release(&h->f);
	free(h->file);
	free(h->orig);
}

/*
 * Page p with chunk k's payload (after its CRC) replaced: a new page in a
 * fresh buffer, its CRC computed, the footer's lengths made to match (the
 * footer is the test's own decode: a hostile file's footer says the same).
 */
static uint8_t *
hx_replace(Hx *h, uint32_t p, int k, const uint8_t *payload, size_t plen, size_t *outlen)
{
	TdbTrailPageInfo *pi = &h->f.pages[p];
	int			nchunks = 2 + h->f.schema.ncolumns;
	const uint8_t *src = h->file + pi->offset;
	const uint32_t *orig = h->orig + (size_t) p * (nchunks + 1);
	uint8_t    *out = malloc(orig[nchunks] + plen + 8);
	size_t		o = 0,
				off = 0;

	memcpy((uint32_t *) pi->chunk_len, orig, nchunks * sizeof(uint32_t));

	for (int i = 0; i < nchunks; i++)
	{
		uint32_t	cl = pi->chunk_len[i];

		if (i == k)
		{
			uint32_t	crc = tdb_crc32c(payload, plen);

			codec_put_u32le(out + o, crc);
			memcpy(out + o + 4, payload, plen);
			o += 4 + plen;
		}
		else
		{
			memcpy(out + o, src + off, cl);
			o += cl;
		}
		off += cl;
	}
	((uint32_t *) pi->chunk_len)[k] = (uint32_t) (4 + plen);
	pi->length = (uint32_t) o;
	*outlen = o;
	return out;
}

/* decode page p from buf: the return code, err's message into why */
static int
hx_decode(Hx *h, uint32_t p, const uint8_t *buf, size_t len, char *why, size_t whylen)
{
	TdbTrailPage pg;
	TdbTrailError err;
	int			rc;

	memset(&pg, 0, sizeof(pg));
	memset(&err, 0, sizeof(err));
	rc = tdb_trail_page_decode(&h->f, p, buf, len, &pg, &err);
	snprintf(why, whylen, "%s", rc == 0 ? "decoded" : err.msg);
	tdb_trail_page_release(&pg);
	return rc;
}

/* column 0 (int64) of page p replaced by nulls byte 0 and enc[0, elen) */
static int
hx_column(Hx *h, uint32_t p, const CodecBuf *enc, char *why)
{
	size_t		len;
	uint8_t    *pl = malloc(enc->len + 1),
			   *page;
	int			rc;

	pl[0] = 0;
	memcpy(pl + 1, enc->data, enc->len);
	page = hx_replace(h, p, TRAIL_CHUNK_COLUMN0, pl, enc->len + 1, &len);
	rc = hx_decode(h, p, page, len, why, 200);
	free(pl);
	free(page);
	return rc;
}

#define EXPECT_CORRUPT(rc, why, what) \
	do { if ((rc) != TDB_TRAIL_ECORRUPT) \
		unit_fail(__FILE__, __LINE__, "%s: rc %d (%s), expected TDB_TRAIL_ECORRUPT", what, rc, why); \
		else printf("# %s: refused (%s)\n", what, why); } while (0)

UNIT_TEST(test_trail_v4_hostile_runs_codec)
{
	Hx			h;
	char		why[600];
	CodecBuf	b;
	uint32_t	n;

	CHECK(hx_open(&h, 4, TDB_TRAIL_ORDER_TRAIL, HX_NTRAILS, HX_EVENTS));
	CHECK(h.multi != UINT32_MAX);
	if (h.multi == UINT32_MAX)
		return;
	n = h.f.pages[h.multi].nevents;
	codec_buf_init(&b);

	/* 1. codec 9 inside codec 9 */
	codec_put_u8(&b, COLENC_RUNS);
	for (int r = 0; r < HX_NTRAILS; r++)
	{
		codec_put_u8(&b, COLENC_RUNS);
		codec_put_u8(&b, COLENC_CONST);
		codec_put_svarint(&b, 1);
	}
	EXPECT_CORRUPT(hx_column(&h, h.multi, &b, why), why, "codec 9 inside codec 9");

	/* 2. runs, one too few (fewer values than the column) */
	b.len = 0;
	codec_put_u8(&b, COLENC_RUNS);
	for (int r = 0; r < HX_NTRAILS - 1; r++)
	{
		codec_put_u8(&b, COLENC_CONST);
		codec_put_svarint(&b, 1);
	}
	EXPECT_CORRUPT(hx_column(&h, h.multi, &b, why), why, "runs: one run missing");

	/* 3. runs, one too many (trailing bytes) */
	b.len = 0;
	codec_put_u8(&b, COLENC_RUNS);
	for (int r = 0; r < HX_NTRAILS + 1; r++)
	{
		codec_put_u8(&b, COLENC_CONST);
		codec_put_svarint(&b, 1);
	}
	EXPECT_CORRUPT(hx_column(&h, h.multi, &b, why), why, "runs: one run too many");

	/* 4. patched, nexc huge */
	b.len = 0;
	codec_put_u8(&b, COLENC_PATCHED);
	codec_put_svarint(&b, 0);
	codec_put_svarint(&b, 0);
	codec_put_u8(&b, 0);
	codec_put_varint(&b, UINT64_C(1) << 62);
	EXPECT_CORRUPT(hx_column(&h, h.multi, &b, why), why, "patched: nexc 2^62");

	/* 5. patched, bw 65 */
	b.len = 0;
	codec_put_u8(&b, COLENC_PATCHED);
	codec_put_svarint(&b, 0);
	codec_put_svarint(&b, 0);
	codec_put_u8(&b, 65);
	codec_put_varint(&b, 0);
	for (uint32_t i = 0; i < 65 * n / 8 + 1; i++)
		codec_put_u8(&b, 0xff);
	EXPECT_CORRUPT(hx_column(&h, h.multi, &b, why), why, "patched: bw 65");

	/* 6. patched, bw 64, every delta all ones: legal bytes, must decode or be refused, no UB */
	b.len = 0;
	codec_put_u8(&b, COLENC_PATCHED);
	codec_put_svarint(&b, INT64_MAX);
	codec_put_svarint(&b, INT64_MIN);
	codec_put_u8(&b, 64);
	codec_put_varint(&b, 0);
	for (uint32_t i = 0; i < 8 * (n - 1); i++)
		codec_put_u8(&b, 0xff);
	{
		int			rc = hx_column(&h, h.multi, &b, why);

		printf("# patched bw 64: rc %d (%s)\n", rc, why);
		CHECK(rc == 0 || rc == TDB_TRAIL_ECORRUPT);
	}

	/* 7. patched, the exception at the last delta (legal), then one past it */
	for (int past = 0; past < 2; past++)
	{
		int			rc;

		b.len = 0;
		codec_put_u8(&b, COLENC_PATCHED);
		codec_put_svarint(&b, 5);
		codec_put_svarint(&b, 1);
		codec_put_u8(&b, 0);
		codec_put_varint(&b, 1);
		codec_put_varint(&b, n - 2 + past);
		codec_put_svarint(&b, 1000);
		rc = hx_column(&h, h.multi, &b, why);
		if (past)
			EXPECT_CORRUPT(rc, why, "patched: exception index past the last delta");
		else
		{
			printf("# patched: exception at the last delta: rc %d (%s)\n", rc, why);
			CHECK(rc == 0);
		}
	}

	/* 8. patched, two exceptions at one index (gap such that at overflows) */
	b.len = 0;
	codec_put_u8(&b, COLENC_PATCHED);
	codec_put_svarint(&b, 5);
	codec_put_svarint(&b, 1);
	codec_put_u8(&b, 0);
	codec_put_varint(&b, 2);
	codec_put_varint(&b, n - 2);
	codec_put_svarint(&b, 1000);
	codec_put_varint(&b, 0);
	codec_put_svarint(&b, 1000);
	EXPECT_CORRUPT(hx_column(&h, h.multi, &b, why), why, "patched: a second exception after the last delta");

	/* 9. codec 9 in a page of one run (a version-4 single-trail page) */
	hx_close(&h);
	CHECK(hx_open(&h, 4, TDB_TRAIL_ORDER_TRAIL, 2, 9000));	/* big trails: pages of their own */
	CHECK(h.single != UINT32_MAX);
	if (h.single != UINT32_MAX)
	{
		b.len = 0;
		codec_put_u8(&b, COLENC_RUNS);
		codec_put_u8(&b, COLENC_CONST);
		codec_put_svarint(&b, 1);
		EXPECT_CORRUPT(hx_column(&h, h.single, &b, why), why, "codec 9 in a one-run page");
	}
	hx_close(&h);

	/* 10. codec 9 in a version-3 page of several runs (space-time order) */
	CHECK(hx_open(&h, 3, TDB_TRAIL_ORDER_SPACETIME, HX_NTRAILS, HX_EVENTS));
	CHECK(h.multi != UINT32_MAX);
	if (h.multi != UINT32_MAX)
	{
		b.len = 0;
		codec_put_u8(&b, COLENC_RUNS);
		for (int r = 0; r < HX_NTRAILS; r++)
		{
			codec_put_u8(&b, COLENC_CONST);
			codec_put_svarint(&b, 1);
		}
		EXPECT_CORRUPT(hx_column(&h, h.multi, &b, why), why, "codec 9 in a version-3 file");

		/* 11. codec 8 (version 4's) in a version-3 file: a version-3 reader refuses it */
		n = h.f.pages[h.multi].nevents;
		b.len = 0;
		codec_put_u8(&b, COLENC_PATCHED);
		codec_put_svarint(&b, 5);
		codec_put_svarint(&b, 1);
		codec_put_u8(&b, 0);
		codec_put_varint(&b, 0);
		EXPECT_CORRUPT(hx_column(&h, h.multi, &b, why), why, "codec 8 in a version-3 file");
	}
	hx_close(&h);
	codec_buf_free(&b);
}

/* A column with NULLs: run counts of non-NULL values from the bitmap, a run of none skipped. */
UNIT_TEST(test_trail_v4_hostile_runs_and_nulls)
{
	Hx			h;
	char		why[600];
	uint32_t	n;
	uint8_t		pl[256];
	size_t		len;

	CHECK(hx_open(&h, 4, TDB_TRAIL_ORDER_TRAIL, HX_NTRAILS, HX_EVENTS));
	if (h.multi == UINT32_MAX)
		return;
	n = h.f.pages[h.multi].nevents;
	CHECK(n == HX_NTRAILS * HX_EVENTS && n <= 64);
	for (int variant = 0; variant < 3; variant++)
	{
		size_t		o = 0;
		uint8_t    *page;
		int			rc;

		/* the first run (trail) every value NULL */
		pl[o++] = 1;
		memset(pl + o, 0, (n + 7) / 8);
		for (uint32_t i = 0; i < HX_EVENTS; i++)
			pl[o + i / 8] |= (uint8_t) (1 << (i % 8));
		o += (n + 7) / 8;
		pl[o++] = COLENC_RUNS;
		/* variant 0: a value for each non-empty run; 1: one for the empty run too; 2: one run short */
		for (int r = variant == 1 ? 0 : 1; r < HX_NTRAILS - (variant == 2); r++)
		{
			pl[o++] = COLENC_CONST;
			pl[o++] = 2 * r;	/* svarint r */
		}
		page = hx_replace(&h, h.multi, TRAIL_CHUNK_COLUMN0, pl, o, &len);
		rc = hx_decode(&h, h.multi, page, len, why, sizeof(why));
		if (variant == 0)
		{
			printf("# runs with an all-NULL run: rc %d (%s)\n", rc, why);
			CHECK(rc == 0);
		}
		else
			EXPECT_CORRUPT(rc, why, variant == 1 ? "runs: a value for the all-NULL run" :
						   "runs: fewer runs than the bitmap's");
		free(page);
	}
	hx_close(&h);
}

/* The page core: a run of no event, and codec 9 for the times of a one-run page. */
UNIT_TEST(test_trail_v4_hostile_core)
{
	Hx			h;
	char		why[600];
	CodecBuf	b;
	uint8_t    *page;
	size_t		len;
	uint32_t	n;
	int			rc;

	CHECK(hx_open(&h, 4, TDB_TRAIL_ORDER_TRAIL, HX_NTRAILS, HX_EVENTS));
	if (h.multi == UINT32_MAX)
		return;
	n = h.f.pages[h.multi].nevents;
	codec_buf_init(&b);
	/* runs: trail 0 with 0 events, then every trail but the last */
	{
		uint8_t		magic[4];

		codec_put_u32le(magic, TRAIL_PAGE2_MAGIC);
		codec_put_bytes(&b, magic, 4);
		codec_put_varint(&b, n);
		codec_put_varint(&b, HX_NTRAILS + 1);
		codec_put_varint(&b, 0);
		codec_put_varint(&b, 0);	/* a zero-length run */
		for (int r = 0; r < HX_NTRAILS; r++)
		{
			codec_put_varint(&b, r == 0 ? 0 : 1);
			codec_put_varint(&b, HX_EVENTS);
		}
		codec_put_u8(&b, 0);
		codec_put_u8(&b, COLENC_PLAIN);
		for (uint32_t i = 0; i < n; i++)
			codec_put_svarint(&b, 0);
	}
	page = hx_replace(&h, h.multi, TRAIL_CHUNK_CORE, b.data, b.len, &len);
	rc = hx_decode(&h, h.multi, page, len, why, sizeof(why));
	EXPECT_CORRUPT(rc, why, "a zero-length run in the page core");
	free(page);
	codec_buf_free(&b);
	hx_close(&h);
}
