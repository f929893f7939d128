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
#include "trail_unit.h"

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
