/*
 * test_v6_hostile.c
 *	  Version-6 footers written by a hostile author: the head's bytes of
 *	  each kind of chunk of a page chunk's pages (which place every chunk)
 *	  overflowing, past the page region, below the pages' least, moved
 *	  from one kind or one page chunk to another; page chunk lengths that
 *	  move a page's chunk into its neighbour's.  Each must be a clean
 *	  TDB_TRAIL_ECORRUPT naming what is wrong, never a read out of bounds
 *	  (the ASan build runs these too) nor rows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../checksum.h"
#include "footer3.h"
#include "format.h"
#include "test_footer3_hostile.h"
#include "trail_fixture.h"
#include "trail_fixture_s3.h"
#include "trail_unit.h"
#include "test_v6_hostile.h"

/*
 * A copy of buf (a version-6 file) with the head's bytes of kind k of page
 * chunk j replaced by nv[k] (k < 2 + ncolumns, the others as z has them),
 * the head re-signed; NULL if the directory entry is not found.
 */
static uint8_t *
patch_kind_bytes(const uint8_t *buf, size_t len, const TdbTrailFooter *f, uint32_t j, const uint64_t *nv,
				 size_t *outlen)
{
	const F3Lazy *z = f->lazy;
	const F3Chunk *ch = &z->chunks[TRAIL3_PAGES][j];
	int			kinds = 2 + f->schema.ncolumns;
	TdbTrailTrailer t;
	TdbTrailError err;
	CodecBuf	pat,
				out;
	uint8_t		tr[TDB_TRAIL_TRAILER_SIZE],
				crc[4];
	const uint8_t *h,
			   *hit = NULL;
	size_t		at;

	if (tdb_trail_trailer_decode(buf + len - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE, len, &t, &err) < 0)
		return NULL;
	h = buf + t.footer_offset;
	/* the entry: length, CRC, then the kinds' bytes */
	codec_buf_init(&pat);
	codec_put_varint(&pat, ch->len);
	codec_put_u32le(crc, ch->crc);
	codec_put_bytes(&pat, crc, 4);
	for (int k = 0; k < kinds; k++)
		codec_put_varint(&pat, z->col_bytes[(size_t) j * kinds + k]);
	for (size_t i = 0; i + pat.len <= t.footer_length; i++)
		if (memcmp(h + i, pat.data, pat.len) == 0)
			hit = h + i;
	if (hit == NULL)
	{
		codec_buf_free(&pat);
		return NULL;
	}
	at = (size_t) (hit - buf);
	codec_buf_init(&out);
	codec_put_bytes(&out, buf, at);
	codec_put_varint(&out, ch->len);
	codec_put_bytes(&out, crc, 4);
	for (int k = 0; k < kinds; k++)
		codec_put_varint(&out, nv[k]);
	at += pat.len;
	codec_buf_free(&pat);
	codec_put_bytes(&out, buf + at, len - TDB_TRAIL_TRAILER_SIZE - at);
	t.footer_length = out.len - t.footer_offset;
	t.footer_crc = tdb_crc32c(out.data + t.footer_offset, t.footer_length);
	t.file_size = out.len + TDB_TRAIL_TRAILER_SIZE;
	trail_trailer_encode(tr, &t);
	codec_put_bytes(&out, tr, sizeof(tr));
	*outlen = out.len;
	return out.data;
}

/* Open, load every chunk, read every row, verify: the first error, or 0. */
static int
read_all(const uint8_t *buf, size_t len, TdbTrailError *err)
{
	FxOpened	o;
	uint64_t	n;
	int			rc;

	memset(err, 0, sizeof(*err));
	if ((rc = hostile_open(&o, buf, len, err)) == 0)
	{
		if ((rc = tdb_trail_need_all(o.r, err)) == 0 &&
			(rc = (int) hostile_count_events(o.r, NULL, err)) >= 0)
			rc = tdb_trail_verify(o.r, &n, err);
		fx_close_opened(&o);
	}
	tdb_trail_footer_cache_clear();
	return rc < 0 ? rc : 0;
}

/* read_all must fail with ECORRUPT naming what (one of its |-separated phrases). */
static void
refused(const uint8_t *buf, size_t len, const char *what, int line)
{
	TdbTrailError err;
	int			rc = read_all(buf, len, &err);
	bool		named = false;
	char		one[128];

	for (const char *p = what; *p;)
	{
		size_t		l = strcspn(p, "|");

		snprintf(one, sizeof(one), "%.*s", (int) l, p);
		named |= strstr(err.msg, one) != NULL;
		p += l + (p[l] == '|');
	}
	if (rc == 0)
		unit_fail(__FILE__, line, "a hostile file read without an error (expected \"%s\")", what);
	else if (rc != TDB_TRAIL_ECORRUPT || !named)
		unit_fail(__FILE__, line, "rc %d: %s (expected ECORRUPT naming \"%s\")", rc, err.msg, what);
}

/* The head's bytes of each kind of chunk: overflowing, too many, too few, moved. */
UNIT_TEST(test_v6_hostile_kind_bytes)
{
	size_t		len;
	/* 100 trails of 30 events, pages of at most 40 events: 75 pages, two page chunks */
	uint8_t    *good = fx_write_small(6, 100, 30, 40, TDB_TRAIL_ORDER_TRAIL, 5, &len);
	FxOpened	o;
	const TdbTrailFooter *f;
	const F3Lazy *z;
	uint64_t	v[2][4],
				c0,
				c1;

	CHECK(good != NULL && codec_get_u32le(good + 8) == 6);
	if (good == NULL || !fx_open_buf(&o, good, len, "v6h", true, true))
	{
		free(good);
		return;
	}
	{
		TdbTrailError err;

		CHECK(read_all(good, len, &err) == 0);	/* the file untouched reads */
	}
	f = tdb_trail_footer(o.r);
	z = f->lazy;
	CHECK(f->schema.ncolumns == 2 && z->colmajor && z->nchunks[TRAIL3_PAGES] == 2);
	if (f->schema.ncolumns != 2 || z->nchunks[TRAIL3_PAGES] != 2)
	{
		fx_close_opened(&o);
		free(good);
		return;
	}
	memcpy(v[0], &z->col_bytes[0], sizeof(v[0]));
	memcpy(v[1], &z->col_bytes[4], sizeof(v[1]));
	c0 = z->chunks[TRAIL3_PAGES][0].count;
	c1 = z->chunks[TRAIL3_PAGES][1].count;
	{
		struct
		{
			uint32_t	j;
			int			k;
			uint64_t	val;
			int			k2;		/* -1, or a kind given val2 */
			uint64_t	val2;
			const char *what;
		}			cases[] = {
			/* a sum past 2^64 (each term alone huge) */
			{0, 0, UINT64_MAX, -1, 0, "bad page bytes of a chunk"},
			{0, 0, (uint64_t) 1 << 63, 1, (uint64_t) 1 << 63, "bad page bytes of a chunk"},
			{1, 3, UINT64_MAX - 5, -1, 0, "bad page bytes of a chunk"},
			/* past the page region by one byte, and the pages short of it by one */
			{1, 3, v[1][3] + 1, -1, 0, "bad page bytes of a chunk"},
			{0, 2, v[0][2] - 1, -1, 0, "pages do not fill the data region"},
			/* below the least a page's chunks take (5 bytes each; the core 12) */
			{0, 1, 5 * c0 - 1, 0, v[0][0] + v[0][1] - (5 * c0 - 1), "bad page bytes of a chunk"},
			{1, 0, 12 * c1 - 1, 3, v[1][3] + v[1][0] - (12 * c1 - 1), "bad page bytes of a chunk"},
			/* a byte moved from one kind to the next: the sums hold, a page's chunk runs past its kind's */
			{0, 0, v[0][0] + 1, 1, v[0][1] - 1, "runs past its kind's bytes|checksum mismatch"},
			{0, 1, v[0][1] - 1, 2, v[0][2] + 1, "runs past its kind's bytes|checksum mismatch"},
			/* everything in one kind (the others 0) */
			{0, 0, v[0][0] + v[0][1] + v[0][2] + v[0][3], 1, 0, "bad page bytes of a chunk"},
		};

		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		{
			uint64_t	nv[4];
			size_t		blen;
			uint8_t    *bad;

			memcpy(nv, v[cases[i].j], sizeof(nv));
			nv[cases[i].k] = cases[i].val;
			if (cases[i].k2 >= 0)
				nv[cases[i].k2] = cases[i].val2;
			bad = patch_kind_bytes(good, len, f, cases[i].j, nv, &blen);
			CHECK(bad != NULL);
			if (bad)
				refused(bad, blen, cases[i].what, __LINE__);
			free(bad);
		}
	}
	/* a byte of the core chunks moved from page chunk 1 to page chunk 0: both see it */
	{
		uint64_t	n0[4],
					n1[4];
		size_t		l1,
					l2;
		uint8_t    *b1,
				   *b2 = NULL;

		memcpy(n0, v[0], sizeof(n0));
		memcpy(n1, v[1], sizeof(n1));
		n0[0]++;
		n1[0]--;
		b1 = patch_kind_bytes(good, len, f, 0, n0, &l1);
		if (b1)
		{
			/* the second entry patched in the first's output (its CRC and length unchanged) */
			b2 = patch_kind_bytes(b1, l1, f, 1, n1, &l2);
		}
		CHECK(b2 != NULL);
		if (b2)
			refused(b2, l2, "page lengths disagree with the chunk's bytes|runs past its kind's bytes", __LINE__);
		free(b1);
		free(b2);
	}
	fx_close_opened(&o);
	free(good);
}

/*
 * f (every chunk and summary loaded) encoded again after the pages' chunk
 * lengths (a copy) went through mut, behind good's pages.
 */
static uint8_t *
reencode_lengths(const TdbTrailFooter *f, const uint8_t *good, void (*mut) (uint32_t *cl, int kinds, uint32_t npages),
				 size_t *outlen)
{
	int			kinds = 2 + f->schema.ncolumns;
	TdbTrailFooter c = *f;
	TdbTrailPageInfo *pg = calloc(f->npages, sizeof(TdbTrailPageInfo));
	uint32_t   *cl = calloc((size_t) f->npages * kinds, sizeof(uint32_t));
	CodecBuf	out;
	TdbTrailTrailer t;
	uint8_t		tr[TDB_TRAIL_TRAILER_SIZE];

	memcpy(pg, f->pages, f->npages * sizeof(TdbTrailPageInfo));
	for (uint32_t p = 0; p < f->npages; p++)
	{
		memcpy(&cl[(size_t) p * kinds], f->pages[p].chunk_len, kinds * sizeof(uint32_t));
		pg[p].chunk_len = &cl[(size_t) p * kinds];
	}
	mut(cl, kinds, f->npages);
	for (uint32_t p = 0; p < f->npages; p++)
	{
		pg[p].length = 0;
		for (int k = 0; k < kinds; k++)
			pg[p].length += cl[(size_t) p * kinds + k];
	}
	c.pages = pg;
	codec_buf_init(&out);
	codec_put_bytes(&out, good, f->data_end);
	memset(&t, 0, sizeof(t));
	trail_footer3_encode(&out, 0, &c, &t);
	t.file_size = out.len + TDB_TRAIL_TRAILER_SIZE;
	t.version = 6;
	trail_trailer_encode(tr, &t);
	codec_put_bytes(&out, tr, sizeof(tr));
	free(pg);
	free(cl);
	*outlen = out.len;
	return out.data;
}

static void
unchanged(uint32_t *cl, int kinds, uint32_t npages)
{
	(void) cl, (void) kinds, (void) npages;
}

/* a byte of page 0's core chunk given to page 1's: the head's sums hold */
static void
core_to_next(uint32_t *cl, int kinds, uint32_t npages)
{
	(void) npages;
	cl[0]--;
	cl[kinds]++;
}

/* a byte of page 5's positions given to page 6's core: the page lengths hold */
static void
across_kinds(uint32_t *cl, int kinds, uint32_t npages)
{
	(void) npages;
	cl[(size_t) 5 * kinds + 1]--;
	cl[(size_t) 6 * kinds]++;
}

/* the last page's last column as long as every column's chunks */
static void
last_swallows(uint32_t *cl, int kinds, uint32_t npages)
{
	uint64_t	all = 0;

	for (size_t i = 0; i < (size_t) npages * kinds; i++)
		all += cl[i];
	cl[(size_t) npages * kinds - 1] = (uint32_t) all;
}

/* a column's chunk of 64 MiB + 1 (past a page's largest) */
static void
too_long(uint32_t *cl, int kinds, uint32_t npages)
{
	(void) npages;
	cl[(size_t) 3 * kinds + 2] = (64u << 20) + 1;
}

/*
 * Page chunk lengths that lie under good CRCs, the head's sums made to
 * agree with them: a chunk read at its neighbour's place fails its CRC;
 * lengths past the region or a page's largest are refused from the head.
 */
UNIT_TEST(test_v6_hostile_page_chunk_lengths)
{
	size_t		len;
	uint8_t    *good = fx_write_small(6, 100, 30, 40, TDB_TRAIL_ORDER_TRAIL, 5, &len);
	FxOpened	o;
	TdbTrailError err;
	const TdbTrailFooter *f;
	struct
	{
		void		(*mut) (uint32_t *cl, int kinds, uint32_t npages);
		const char *what;
	}			cases[] = {
		{core_to_next, "checksum mismatch"},
		{across_kinds, "checksum mismatch"},
		{last_swallows, "bad page bytes of a chunk"},
		{too_long, "bad page bytes of a chunk|bad chunk length"},
	};

	if (good == NULL || !fx_open_buf(&o, good, len, "v6l", true, true))
	{
		unit_fail(__FILE__, __LINE__, "cannot write or open the file");
		free(good);
		return;
	}
	f = tdb_trail_footer(o.r);
	CHECK(tdb_trail_need_summaries(o.r, 0, f->ntrails, TRAIL_ALL_COLUMNS(f->schema.ncolumns), &err) == 0);
	CHECK(f->npages > 7);
	/* re-encoded unchanged, it reads (the encoder is the writer's) */
	{
		size_t		blen;
		uint8_t    *same = reencode_lengths(f, good, unchanged, &blen);

		CHECK(blen == len && memcmp(same, good, len) == 0);
		CHECK(read_all(same, blen, &err) == 0);
		free(same);
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]) && f->npages > 7; i++)
	{
		size_t		blen;
		uint8_t    *bad = reencode_lengths(f, good, cases[i].mut, &blen);

		refused(bad, blen, cases[i].what, __LINE__);
		free(bad);
	}
	fx_close_opened(&o);
	free(good);
}

/* ---- hostile-v6 review: version flips, layouts, truncation, shapes ------------------ */

/*
 * A file of ntrails trails of n events, pages of page_events, nc int64
 * columns, written as version (6: column-major when small).
 */
uint8_t *
h2_write(int version, int ntrails, int n, uint32_t page_events, int nc, size_t *len)
{
	TdbTrailSchema sc = fx_schema(TDB_TRAIL_INT64, nc, TDB_TRAIL_INT64);
	TdbTrailWriterOptions o;
	TdbTrailWriter *w;
	TdbTrailError err;
	TdbTrailValue vals[TDB_TRAIL_MAX_COLUMNS];
	uint64_t	rng = 4242;

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
			ev.key.i = 5LL * k + 2;
			ev.time_us = FX_SMALL_T0 + (int64_t) i * 1000000 + k;
			ev.lon = -10 + (k % 100) * 0.01 + (double) (unit_rand(&rng) % 1000) * 1e-6;
			ev.lat = 40 + i * 0.001;
			for (int c = 0; c < nc; c++)
				vals[c].i = (int64_t) (unit_rand(&rng) % (1000u << 4 * (c % 6))) + c;	/* columns of different widths */
			ev.values = vals;
			if (tdb_trail_writer_add(w, &ev, &err) < 0)
			{
				tdb_trail_writer_free(w);
				return NULL;
			}
		}
	return fx_writer_done(w, len);
}

/* FNV over every event of a full scan (key, time, position, values); n the count; rc < 0 on error. */
uint64_t
h2_digest(TdbTrailReader *r, uint64_t *n, int *rc, TdbTrailError *err)
{
	const TdbTrailFooter *f = tdb_trail_footer(r);
	TdbTrailQuery q;
	TdbTrailScan *s;
	TdbTrailEvent ev;
	uint64_t	h = 1469598103934665603ull;

	memset(&q, 0, sizeof(q));
	*n = 0;
	if ((*rc = tdb_trail_scan_begin(r, &q, &s, err)) < 0)
		return 0;
	while ((*rc = tdb_trail_scan_next(s, &ev, err)) > 0)
	{
		int64_t		x[4] = {ev.key.i, ev.time_us, (int64_t) (ev.lon * 1e7), (int64_t) (ev.lat * 1e7)};

		(*n)++;
		for (int i = 0; i < 4; i++)
			h = (h ^ (uint64_t) x[i]) * 1099511628211ull;
		for (int c = 0; c < f->schema.ncolumns; c++)
			h = (h ^ (ev.values[c].isnull ? 0x5a5a : (uint64_t) ev.values[c].i)) * 1099511628211ull;
	}
	tdb_trail_scan_end(s);
	return h;
}

/* The version of buf set to v in the header, the footer and the trailer, the checksums made good. */
static void
h2_set_version(uint8_t *buf, size_t len, int v)
{
	uint8_t    *tr = buf + len - TDB_TRAIL_TRAILER_SIZE;
	uint64_t	foff = codec_get_u64le(tr),
				flen = codec_get_u64le(tr + 8);

	codec_put_u32le(buf + 8, (uint32_t) v);
	buf[foff + 4] = (uint8_t) v;	/* the footer's version varint, after its magic */
	codec_put_u32le(tr + 24, tdb_crc32c(buf + foff, flen));
	tr[28] = (uint8_t) v;
	tr[29] = 0;
	codec_put_u32le(tr + 40, tdb_crc32c(tr, 40));
}

/*
 * A version-5 file claiming version 6 and a version-6 file claiming 5
 * (every checksum made good): the head's page chunk entries then parse as
 * the other layout's.  Each must be refused, never read as rows: except an
 * empty file, whose two layouts are the same bytes.
 */
UNIT_TEST(test_v6_hostile_version_flips)
{
	struct
	{
		int			ntrails,
					n,
					nc;
		uint32_t	page_events;
	}			shapes[] = {
		{100, 30, 2, 40},		/* two page chunks */
		{100, 30, 0, 40},		/* no extra column: 2 kinds */
		{3, 10, 1, 40},			/* three pages, one page chunk */
		{1, 5, 3, 40},			/* one page: both layouts hold the same bytes */
		{200, 3, 5, 2},			/* many small pages */
	};

	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		for (int from = 5; from <= 6; from++)
		{
			size_t		len;
			uint8_t    *buf = h2_write(from, shapes[i].ntrails, shapes[i].n, shapes[i].page_events,
									   shapes[i].nc, &len);
			TdbTrailError err;
			int			rc;

			CHECK(buf != NULL);
			if (buf == NULL)
				continue;
			CHECK(codec_get_u32le(buf + 8) == (uint32_t) from);
			CHECK(read_all(buf, len, &err) == 0);
			h2_set_version(buf, len, from == 5 ? 6 : 5);
			rc = read_all(buf, len, &err);
			if (rc == 0)
				unit_fail(__FILE__, __LINE__, "shape %zu: a version-%d file claiming %d read without an error",
						  i, from, from == 5 ? 6 : 5);
			else if (rc != TDB_TRAIL_ECORRUPT)
				unit_fail(__FILE__, __LINE__, "shape %zu, version %d claiming %d: rc %d: %s", i, from,
						  from == 5 ? 6 : 5, rc, err.msg);
			free(buf);
		}
	/* an empty file: no page chunk, the layouts agree, it reads as empty either way */
	{
		size_t		len;
		uint8_t    *buf = h2_write(6, 0, 0, 40, 2, &len);
		TdbTrailError err;

		CHECK(buf != NULL);
		if (buf)
		{
			CHECK(read_all(buf, len, &err) == 0);
			h2_set_version(buf, len, 5);
			CHECK(read_all(buf, len, &err) == 0);
			free(buf);
		}
	}
}

/*
 * f's pages (every chunk loaded) laid out column-major (to_colmajor) or
 * row-major from good's data region as f places them, behind a footer of
 * version v encoded by the writer's encoder: all sums agree with the
 * chunk lengths, only where the bytes lie may be wrong.
 */
uint8_t *
h2_relayout(const TdbTrailFooter *f, const uint8_t *good, bool to_colmajor, int v, size_t *outlen)
{
	int			kinds = 2 + f->schema.ncolumns;
	TdbTrailFooter c = *f;
	CodecBuf	out;
	TdbTrailTrailer t;
	uint8_t		tr[TDB_TRAIL_TRAILER_SIZE];

	codec_buf_init(&out);
	codec_put_bytes(&out, good, TDB_TRAIL_HEADER_SIZE);
	codec_put_u32le(out.data + 8, (uint32_t) v);
	for (int k = 0; k < (to_colmajor ? kinds : 1); k++)
		for (uint32_t p = 0; p < f->npages; p++)
			for (int kk = to_colmajor ? k : 0; kk < (to_colmajor ? k + 1 : kinds); kk++)
			{
				uint64_t	off;
				uint32_t	l;

				tdb_trail_chunk_range(f, p, kk, &off, &l);
				codec_put_bytes(&out, good + off, l);
			}
	if (out.len != f->data_end)
	{
		codec_buf_free(&out);
		return NULL;
	}
	c.version = (uint16_t) v;
	memset(&t, 0, sizeof(t));
	trail_footer3_encode(&out, 0, &c, &t);
	t.file_size = out.len + TDB_TRAIL_TRAILER_SIZE;
	t.version = (uint16_t) v;
	trail_trailer_encode(tr, &t);
	codec_put_bytes(&out, tr, sizeof(tr));
	*outlen = out.len;
	return out.data;
}

/*
 * Footers whose every sum agrees but whose pages lie in the other layout
 * (a version-5 data region behind a version-6 footer, and the reverse):
 * the chunk CRCs must refuse them.  And a version-6 file far past the
 * 64 KiB bound (no writer makes one, a hostile author can): read as its
 * version-5 twin, through the verifier, locally.
 */
UNIT_TEST(test_v6_hostile_layout_lies_and_large_colmajor)
{
	size_t		len5,
				len6;
	/* 400 trails of 60 events, 4 columns: some 400 kB of pages, version 5 whatever asked */
	uint8_t    *big5 = h2_write(6, 400, 60, 40, 4, &len5);
	uint8_t    *small6 = h2_write(6, 100, 30, 40, 2, &len6);
	FxOpened	o;
	TdbTrailError err;

	CHECK(big5 != NULL && small6 != NULL);
	if (big5 == NULL || small6 == NULL)
		goto out;
	CHECK(codec_get_u32le(big5 + 8) == 5 && codec_get_u32le(small6 + 8) == 6);
	CHECK(len5 > 4 * TDB_TRAIL_COLMAJOR_MAX_BYTES);
	/* the big file column-major under a version-6 footer: reads as the version-5 file */
	if (fx_open_buf(&o, big5, len5, "v6big", true, true))
	{
		const TdbTrailFooter *f = tdb_trail_footer(o.r);
		uint64_t	n5,
					n6,
					h5,
					h6,
					ev;
		int			rc5,
					rc6;
		size_t		blen,
					rlen;
		uint8_t    *b6,
				   *rowsunder6;

		CHECK(tdb_trail_need_summaries(o.r, 0, f->ntrails, TRAIL_ALL_COLUMNS(f->schema.ncolumns), &err) == 0);
		h5 = h2_digest(o.r, &n5, &rc5, &err);
		CHECK(rc5 == 0 && n5 == 400 * 60);
		b6 = h2_relayout(f, big5, true, 6, &blen);
		rowsunder6 = h2_relayout(f, big5, false, 6, &rlen);
		CHECK(b6 != NULL && rowsunder6 != NULL);
		if (b6 != NULL)
		{
			FxOpened	o6;

			CHECK(read_all(b6, blen, &err) == 0);
			if (hostile_open(&o6, b6, blen, &err) == 0)
			{
				h6 = h2_digest(o6.r, &n6, &rc6, &err);
				CHECK(rc6 == 0 && n6 == n5 && h6 == h5);
				CHECK(tdb_trail_verify(o6.r, &ev, &err) == 0 && ev == n5);
				fx_close_opened(&o6);
			}
			else
				unit_fail(__FILE__, __LINE__, "a large version-6 file refused: %s", err.msg);
			tdb_trail_footer_cache_clear();
		}
		/* the row-major pages under the version-6 footer: sums agree, chunks misplaced */
		if (rowsunder6 != NULL)
			refused(rowsunder6, rlen, "checksum mismatch", __LINE__);
		free(b6);
		free(rowsunder6);
		fx_close_opened(&o);
	}
	/* the small version-6 file's column-major pages under a version-5 footer */
	if (fx_open_buf(&o, small6, len6, "v6small", true, true))
	{
		const TdbTrailFooter *f = tdb_trail_footer(o.r);
		size_t		blen;
		uint8_t    *colsunder5;

		CHECK(tdb_trail_need_summaries(o.r, 0, f->ntrails, TRAIL_ALL_COLUMNS(f->schema.ncolumns), &err) == 0);
		colsunder5 = h2_relayout(f, small6, true, 5, &blen);
		CHECK(colsunder5 != NULL);
		if (colsunder5)
			refused(colsunder5, blen, "checksum mismatch", __LINE__);
		free(colsunder5);
		fx_close_opened(&o);
	}
out:
	free(big5);
	free(small6);
}

/*
 * Kinds out of order and page chunks swapped: the head's bytes of each
 * kind permuted so that every sum still fills the data region.
 */
UNIT_TEST(test_v6_hostile_kinds_permuted)
{
	size_t		len;
	uint8_t    *good = h2_write(6, 100, 30, 40, 3, &len);
	FxOpened	o;
	const TdbTrailFooter *f;
	const F3Lazy *z;
	int			kinds = 5;

	CHECK(good != NULL && codec_get_u32le(good + 8) == 6);
	if (good == NULL || !fx_open_buf(&o, good, len, "v6perm", true, true))
	{
		free(good);
		return;
	}
	f = tdb_trail_footer(o.r);
	z = f->lazy;
	CHECK(z->colmajor && z->nchunks[TRAIL3_PAGES] == 2 && f->schema.ncolumns == 3);
	if (z->nchunks[TRAIL3_PAGES] == 2 && f->schema.ncolumns == 3)
	{
		const uint64_t *v0 = &z->col_bytes[0],
				   *v1 = &z->col_bytes[kinds];
		int			perms[][5] = {
			{1, 0, 2, 3, 4},	/* core and positions swapped */
			{0, 1, 4, 3, 2},	/* the columns reversed */
			{4, 3, 2, 1, 0},	/* every kind reversed */
			{1, 2, 3, 4, 0},	/* rotated */
		};

		for (size_t i = 0; i < sizeof(perms) / sizeof(perms[0]); i++)
		{
			uint64_t	nv[5];
			size_t		blen;
			uint8_t    *bad;

			for (int k = 0; k < kinds; k++)
				nv[k] = v0[perms[i][k]];
			if (memcmp(nv, v0, sizeof(nv)) == 0)
			{
				unit_fail(__FILE__, __LINE__, "permutation %zu changes nothing", i);
				continue;
			}
			bad = patch_kind_bytes(good, len, f, 0, nv, &blen);
			CHECK(bad != NULL);
			if (bad)
				refused(bad, blen, "bad page bytes of a chunk|runs past its kind's bytes|checksum mismatch|"
						"pages do not fill", __LINE__);
			free(bad);
		}
		/* the two page chunks' vectors of kind bytes swapped (their totals differ: and when equal?) */
		{
			size_t		l1,
						l2;
			uint8_t    *b1 = patch_kind_bytes(good, len, f, 0, v1, &l1),
					   *b2 = NULL;

			if (b1)
				b2 = patch_kind_bytes(b1, l1, f, 1, v0, &l2);
			CHECK(b2 != NULL);
			if (b2)
				refused(b2, l2, "bad page bytes of a chunk|runs past its kind's bytes|page lengths disagree|"
						"checksum mismatch", __LINE__);
			free(b1);
			free(b2);
		}
	}
	fx_close_opened(&o);
	free(good);
}

/*
 * Every truncation of a small version-6 file is refused at open; every
 * byte flipped past the header (which no checksum covers, by design) is
 * refused by open, a scan or the verifier, never read as rows (the ASan
 * build runs this too).
 */
UNIT_TEST(test_v6_hostile_truncated_and_flipped)
{
	size_t		len;
	uint8_t    *good = h2_write(6, 70, 6, 8, 2, &len);
	uint8_t    *bad;
	size_t		passed = 0,
				step;

	CHECK(good != NULL && codec_get_u32le(good + 8) == 6);
	if (good == NULL)
		return;
	bad = malloc(len);
	for (size_t l = 0; l < len; l++)
	{
		TdbTrailError err;
		int			rc = read_all(good, l, &err);

		if (rc == 0)
			unit_fail(__FILE__, __LINE__, "the file cut at %zu of %zu bytes read", l, len);
	}
	/* every byte of the footer and trailer, one in 5 of the pages */
	for (size_t at = TDB_TRAIL_HEADER_SIZE; at < len; at += step)
	{
		uint64_t	foff = codec_get_u64le(good + len - TDB_TRAIL_TRAILER_SIZE);

		step = at >= foff ? 1 : 5;
		for (int m = 0; m < 2; m++)
		{
			TdbTrailError err;
			int			rc;

			memcpy(bad, good, len);
			bad[at] ^= m ? 0xff : 0x01;
			rc = read_all(bad, len, &err);
			if (rc == 0)
			{
				if (passed++ < 5)
					unit_fail(__FILE__, __LINE__, "byte %zu of %zu (footer at %llu) xor %#x read without an error",
							  at, len, (unsigned long long) foff, m ? 0xff : 0x01);
			}
		}
	}
	if (passed > 0)
		printf("# %zu flipped files read without an error\n", passed);
	free(bad);
	free(good);
}

/*
 * The widest schema (64 extra columns: 66 kinds of chunk) and the
 * narrowest (none): version 6 written, read back, verified; the last
 * kind's bytes one more or one less refused.
 */
UNIT_TEST(test_v6_hostile_widest_and_narrowest)
{
	int			ncs[2] = {TDB_TRAIL_MAX_COLUMNS, 0};

	for (int i = 0; i < 2; i++)
	{
		int			nc = ncs[i];
		size_t		len;
		/* 66 pages of one event: two page chunks, under 64 KiB with 64 columns */
		uint8_t    *good = h2_write(6, 66, 1, 1, nc, &len);
		FxOpened	o;
		const TdbTrailFooter *f;
		const F3Lazy *z;
		TdbTrailError err;
		uint64_t	n;
		int			rc;

		CHECK(good != NULL);
		if (good == NULL)
			continue;
		if (codec_get_u32le(good + 8) != 6)
		{
			unit_fail(__FILE__, __LINE__, "%d columns: version %u (%zu bytes)", nc, codec_get_u32le(good + 8), len);
			free(good);
			continue;
		}
		CHECK(read_all(good, len, &err) == 0);
		if (!fx_open_buf(&o, good, len, "v6wide", true, true))
		{
			free(good);
			continue;
		}
		f = tdb_trail_footer(o.r);
		z = f->lazy;
		h2_digest(o.r, &n, &rc, &err);
		CHECK(rc == 0 && n == 66);
		CHECK(z->nchunks[TRAIL3_PAGES] >= 2);
		for (int d = -1; d <= 1; d += 2)
		{
			int			kinds = 2 + nc;
			uint64_t   *nv = malloc(kinds * sizeof(uint64_t));
			size_t		blen;
			uint8_t    *bad;

			memcpy(nv, &z->col_bytes[0], kinds * sizeof(uint64_t));
			nv[kinds - 1] += d;
			bad = patch_kind_bytes(good, len, f, 0, nv, &blen);
			CHECK(bad != NULL);
			if (bad)
				refused(bad, blen, "bad page bytes of a chunk|pages do not fill|runs past its kind's bytes", __LINE__);
			free(bad);
			free(nv);
		}
		fx_close_opened(&o);
		free(good);
	}
}

