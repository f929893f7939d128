/*
 * test_colenc.c
 *	  Version 3's page column encodings (colenc.c): every encoding that
 *	  applies reads back bit for bit (NaN payloads, -0, infinities,
 *	  denormals, int64 extremes, one value, 8192 values), the writer's choice
 *	  is the smallest, every strict prefix and damaged bytes are refused
 *	  cleanly, and files of version 3 round-trip through the writer and the
 *	  page decoder (all-NULL columns, one event, 8192 events) while version 2
 *	  is still written on request.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "colenc.h"
#include "format.h"
#include "trail_fixture.h"
#include "trail_memfile.h"
#include "trail_unit.h"



#define NSTRINGS 1000

static int64_t
dbits(double v)
{
	int64_t		b;

	memcpy(&b, &v, 8);
	return b;
}

/*
 * Value family f of a type, nn values: specials, decimals, runs, constants,
 * extremes.  Returns false when the family does not exist for the type.
 */
static bool
family(TdbTrailType type, int f, uint32_t nn, uint64_t *rng, int64_t *v)
{
	static const uint64_t specials[] = {
		0x7ff8000000000000ULL,	/* NaN */
		0x7ff0000000000123ULL,	/* signalling NaN with a payload */
		0xfff8000000000001ULL,	/* negative NaN with a payload */
		0x8000000000000000ULL,	/* -0 */
		0x0000000000000000ULL,	/* +0 */
		0x7ff0000000000000ULL,	/* +inf */
		0xfff0000000000000ULL,	/* -inf */
		0x0000000000000001ULL,	/* smallest denormal */
		0x000fffffffffffffULL,	/* largest denormal */
		0x8000000000000001ULL,	/* negative denormal */
		0x7fefffffffffffffULL,	/* DBL_MAX */
	};

	for (uint32_t i = 0; i < nn; i++)
	{
		uint64_t	r = unit_rand(rng);

		switch (type)
		{
			case TDB_TRAIL_FLOAT64:
				switch (f)
				{
					case 0: v[i] = (int64_t) specials[r % 11]; break;
					case 1: v[i] = dbits(round(unit_rand_double(rng, -1e4, 1e4) * 1e2) / 1e2); break;
					case 2: v[i] = dbits(unit_rand_double(rng, 0, 360)); break;	/* full precision */
					case 3:		/* held full-precision values: runs */
						v[i] = i > 0 && r % 8 != 0 ? v[i - 1] : dbits(unit_rand_double(rng, 0, 360));
						break;
					case 4: v[i] = dbits(123.456789012); break;
					case 5:		/* a few values, repeated out of order: a dictionary */
						v[i] = dbits((double) (r % 5) * 0.1 + 1e-9);
						break;
					case 6:		/* 6 to 9 decimals, held */
						v[i] = i > 0 && r % 4 != 0 ? v[i - 1] :
							dbits(round(unit_rand_double(rng, -5, 5) * 1e9) / 1e9);
						break;
					case 7: v[i] = dbits(-0.0); break;
					case 8: v[i] = dbits(i % 2 ? 1e-300 : 5e-324); break;
					default: return false;
				}
				break;
			case TDB_TRAIL_INT64:
				switch (f)
				{
					case 0: v[i] = (int64_t) r; break;
					case 1: v[i] = r % 2 ? INT64_MIN : INT64_MAX; break;
					case 2: v[i] = INT64_MIN; break;
					case 3: v[i] = 1593475200000000LL + (int64_t) i * 5000000 + (int64_t) (r % 3); break;
					case 4: v[i] = i > 0 && r % 8 != 0 ? v[i - 1] : (int64_t) (r % 100000) - 50000; break;
					case 5: v[i] = (int64_t) (r % 7) * 25 - 1000; break;
					case 6: v[i] = INT64_MAX - (int64_t) (r % 1000); break;
					default: return false;
				}
				break;
			case TDB_TRAIL_STRING:
				switch (f)
				{
					case 0: v[i] = (int64_t) (r % NSTRINGS); break;
					case 1: v[i] = NSTRINGS - 1; break;
					case 2: v[i] = i > 0 && r % 16 != 0 ? v[i - 1] : (int64_t) (r % NSTRINGS); break;
					case 3: v[i] = 990 + (int64_t) (r % 3); break;
					default: return false;
				}
				break;
			case TDB_TRAIL_BOOL:
				switch (f)
				{
					case 0: v[i] = (int64_t) (r & 1); break;
					case 1: v[i] = 1; break;
					case 2: v[i] = i > 0 && r % 50 != 0 ? v[i - 1] : (int64_t) (r & 1); break;
					default: return false;
				}
				break;
		}
	}
	return true;
}

/* Decodes b's bytes as nn values: equal to want, every byte used. */
static bool
reads_back(const CodecBuf *b, TdbTrailType type, uint32_t nn, const int64_t *want, int64_t *got)
{
	CodecCur	c = {b->data, b->data + b->len};
	const char *why = colenc_get(&c, type, nn, NSTRINGS, got, NULL, 0);

	if (why != NULL)
	{
		unit_fail(__FILE__, __LINE__, "type %d, %u values, encoding 0x%02x: %s", (int) type, nn,
				  b->data[0], why);
		return false;
	}
	return codec_left(&c) == 0 && memcmp(got, want, (size_t) nn * 8) == 0;
}

/* Every strict prefix of b is refused. */
static bool
prefixes_refused(const CodecBuf *b, TdbTrailType type, uint32_t nn, int64_t *got)
{
	for (size_t l = 0; l < b->len; l++)
	{
		CodecCur	c = {b->data, b->data + l};

		if (colenc_get(&c, type, nn, NSTRINGS, got, NULL, 0) == NULL)
			return false;
	}
	return true;
}

/*
 * Every encoding byte forced on every family of every type at several
 * sizes: when it applies it reads back exactly and is never smaller than
 * the writer's choice; the choice reads back too; every codec applies
 * somewhere for each type it is defined for.
 */
UNIT_TEST(test_trail_v3_encodings_roundtrip)
{
	static const TdbTrailType types[] = {TDB_TRAIL_FLOAT64, TDB_TRAIL_INT64, TDB_TRAIL_STRING, TDB_TRAIL_BOOL};
	static const uint32_t sizes[] = {1, 2, 3, 8, 9, 100, 8192};
	uint64_t	rng = 33;
	int64_t    *v = malloc(8192 * sizeof(int64_t));
	int64_t    *got = malloc(8192 * sizeof(int64_t));

	for (int t = 0; t < 4; t++)
	{
		uint32_t	used[16] = {0};	/* per codec: scales seen, as bits */

		for (int f = 0; family(types[t], f, 1, &rng, v); f++)
			for (int si = 0; si < 7; si++)
			{
				uint32_t	nn = sizes[si];
				CodecBuf	best,
							b;

				family(types[t], f, nn, &rng, v);
				codec_buf_init(&best);
				CHECK(colenc_put(&best, types[t], v, nn, TDB_TRAIL_VERSION));
				CHECK(reads_back(&best, types[t], nn, v, got));
				if (nn <= 100)
					CHECK(prefixes_refused(&best, types[t], nn, got));
				codec_buf_init(&b);
				for (int enc = 0; enc < 256; enc++)
				{
					b.len = 0;
					if (!colenc_put_as(&b, types[t], v, nn, (uint8_t) enc))
					{
						CHECK(b.ok);
						/* types other than float64 have no scale; codecs stop at 8 (9, by runs, takes runs) */
						CHECK(enc >> 4 == 0 || types[t] == TDB_TRAIL_FLOAT64 || b.len == 0);
						continue;
					}
					CHECK((enc & 15) < COLENC_NCODECS);
					CHECK(b.data[0] == enc);
					used[enc & 15] |= 1u << (enc >> 4);
					if (!reads_back(&b, types[t], nn, v, got))
						unit_fail(__FILE__, __LINE__, "type %d family %d, %u values, encoding 0x%02x",
								  (int) types[t], f, nn, enc);
					if (b.len < best.len)
						unit_fail(__FILE__, __LINE__, "type %d family %d: encoding 0x%02x takes %zu bytes, the choice %zu",
								  (int) types[t], f, enc, b.len, best.len);
					if (nn <= 9 && !prefixes_refused(&b, types[t], nn, got))
						unit_fail(__FILE__, __LINE__, "a prefix of encoding 0x%02x decodes", enc);
				}
				codec_buf_free(&b);
				codec_buf_free(&best);
			}
		/* which codecs each type has (raw floats: bit 0 of the scales) */
		for (int codec = 0; codec < COLENC_NCODECS; codec++)
		{
			bool		want;

			switch (types[t])
			{
				case TDB_TRAIL_FLOAT64:
					want = codec != COLENC_FOR && codec != COLENC_DELTA && codec != COLENC_PATCHED &&
						codec != COLENC_RUNS;
					CHECK(!want || (used[codec] & 1));
					/* scaled: every integer codec, and never XOR (nor by runs, never forced) */
					CHECK((codec == COLENC_XOR || codec == COLENC_RUNS) == !(used[codec] & ~1u));
					break;
				case TDB_TRAIL_INT64:
					want = codec != COLENC_XOR && codec != COLENC_RUNS;
					CHECK(want == (used[codec] == 1));
					break;
				case TDB_TRAIL_STRING:
					want = codec <= COLENC_FOR;
					CHECK(want == (used[codec] == 1));
					break;
				default:
					want = codec <= COLENC_RLE;
					CHECK(want == (used[codec] == 1));
					break;
			}
		}
	}
	free(v);
	free(got);
}

/*
 * Packed fields of every width from 0 to 64 bits, frame of reference and
 * deltas, at sizes around the 8-byte reads of the decoder's fast path
 * (unpack_all: a field within 8 bytes of the buffer's end is read bit
 * group by bit group): they read back exactly.
 */
UNIT_TEST(test_trail_v3_packed_widths_roundtrip)
{
	static const uint32_t sizes[] = {1, 2, 7, 8, 9, 15, 64, 65, 1000};
	uint64_t	rng = 57;
	int64_t    *v = malloc(1000 * sizeof(int64_t));
	int64_t    *got = malloc(1000 * sizeof(int64_t));
	int			widths_for = 0,
				widths_delta = 0;

	for (int w = 0; w <= 64; w++)
	{
		uint64_t	mask = w == 64 ? UINT64_MAX : (UINT64_C(1) << w) - 1;
		bool		for_ok = true,
					delta_ok = true;

		for (int si = 0; si < 9; si++)
		{
			uint32_t	nn = sizes[si];
			CodecBuf	b;

			/* frame of reference: offsets from the least of w bits, the largest among them */
			for (uint32_t i = 0; i < nn; i++)
				v[i] = (int64_t) (UINT64_C(0x8000000000000000) + (unit_rand(&rng) & mask));
			v[0] = INT64_MIN;
			v[nn - 1] = (int64_t) (UINT64_C(0x8000000000000000) + mask);
			codec_buf_init(&b);
			if (colenc_put_as(&b, TDB_TRAIL_INT64, v, nn, COLENC_FOR))
				CHECK(reads_back(&b, TDB_TRAIL_INT64, nn, v, got));
			else
				for_ok = false;
			/* deltas of w bits, one of them the largest */
			v[0] = (int64_t) (unit_rand(&rng) >> 40);
			for (uint32_t i = 1; i < nn; i++)
				v[i] = (int64_t) ((uint64_t) v[i - 1] + ((i == nn / 2 ? mask : unit_rand(&rng) & mask) >> 2));
			b.len = 0;
			if (colenc_put_as(&b, TDB_TRAIL_INT64, v, nn, COLENC_DELTA))
				CHECK(reads_back(&b, TDB_TRAIL_INT64, nn, v, got));
			else
				delta_ok = false;
			codec_buf_free(&b);
		}
		widths_for += for_ok;
		widths_delta += delta_ok;
	}
	printf("# frame of reference at %d widths of 65, deltas at %d\n", widths_for, widths_delta);
	CHECK(widths_for >= 64);
	CHECK(widths_delta >= 60);
	free(v);
	free(got);
}

/* What the writer picks for the data issue 33 names. */
UNIT_TEST(test_trail_v3_encoding_choices)
{
	int64_t    *v = malloc(8192 * sizeof(int64_t));
	uint64_t	rng = 7;
	CodecBuf	b;

	codec_buf_init(&b);
	/* a constant string, a constant 0/1 and a constant float: a few bytes whatever the count */
	for (int i = 0; i < 8192; i++)
		v[i] = 417;
	CHECK(colenc_put(&b, TDB_TRAIL_STRING, v, 8192, TDB_TRAIL_VERSION) && b.len == 3 && b.data[0] == COLENC_CONST);
	b.len = 0;
	for (int i = 0; i < 8192; i++)
		v[i] = i < 3000;
	CHECK(colenc_put(&b, TDB_TRAIL_BOOL, v, 8192, TDB_TRAIL_VERSION) && b.len == 8 && b.data[0] == COLENC_RLE);
	b.len = 0;
	for (int i = 0; i < 8192; i++)
		v[i] = dbits(60.0);
	CHECK(colenc_put(&b, TDB_TRAIL_FLOAT64, v, 8192, TDB_TRAIL_VERSION) && b.len == 2 && b.data[0] == (COLENC_CONST | 1 << 4));
	/* -0 stays raw (8 bytes), yet constant */
	b.len = 0;
	for (int i = 0; i < 8192; i++)
		v[i] = dbits(-0.0);
	CHECK(colenc_put(&b, TDB_TRAIL_FLOAT64, v, 8192, TDB_TRAIL_VERSION) && b.len == 9 && b.data[0] == COLENC_CONST);
	/* two decimals: scale 2 */
	b.len = 0;
	for (int i = 0; i < 100; i++)
		v[i] = dbits(round(unit_rand_double(&rng, 0, 1000) * 100) / 100);
	CHECK(colenc_put(&b, TDB_TRAIL_FLOAT64, v, 100, TDB_TRAIL_VERSION) && b.data[0] >> 4 == 3);
	/* full-precision values held in runs of 8: well under 2 bytes a value */
	b.len = 0;
	for (int i = 0; i < 8192; i++)
		v[i] = i % 8 ? v[i - 1] : dbits(unit_rand_double(&rng, 0, 360));
	CHECK(colenc_put(&b, TDB_TRAIL_FLOAT64, v, 8192, TDB_TRAIL_VERSION) && b.len < 8192 * 2);
	codec_buf_free(&b);
	free(v);
}

/*
 * Damaged encodings: every single-bit flip and every byte set to 0xff or 0
 * of a few encodings decodes to something or is refused, never reads out
 * of bounds (the ASan build checks that), and hand-made bad payloads are
 * refused with their reason.
 */
UNIT_TEST(test_trail_v3_damaged_encodings_refused)
{
	static const TdbTrailType types[] = {TDB_TRAIL_FLOAT64, TDB_TRAIL_INT64, TDB_TRAIL_STRING, TDB_TRAIL_BOOL};
	uint64_t	rng = 99;
	int64_t		v[16],
				got[16];
	int			refused = 0;

	for (int t = 0; t < 4; t++)
		for (int f = 0; family(types[t], f, 16, &rng, v); f++)
			for (int enc = 0; enc < 256; enc++)
			{
				CodecBuf	b;

				codec_buf_init(&b);
				if (colenc_put_as(&b, types[t], v, 16, (uint8_t) enc))
					for (size_t i = 0; i < b.len; i++)
						for (int k = 0; k < 10; k++)
						{
							uint8_t		save = b.data[i];
							CodecCur	c = {b.data, b.data + b.len};

							b.data[i] = k < 8 ? save ^ (1 << k) : k == 8 ? 0xff : 0;
							refused += colenc_get(&c, types[t], 16, NSTRINGS, got, NULL, 0) != NULL;
							b.data[i] = save;
						}
				codec_buf_free(&b);
			}
	CHECK(refused > 0);

	/* hand-made: the reason each is refused */
	{
		static const struct
		{
			TdbTrailType type;
			uint32_t	nn;
			uint8_t		bytes[16];
			size_t		len;
			const char *why;
		}			bad[] = {
			{TDB_TRAIL_INT64, 2, {0x0a}, 1, "unknown encoding"},
			{TDB_TRAIL_INT64, 2, {COLENC_RUNS, COLENC_CONST, 0}, 3, "several runs"},	/* no runs given */
			{TDB_TRAIL_INT64, 3, {COLENC_PATCHED, 0, 0, 0, 2}, 5, "exception count"},	/* 2 of 2 bytes each, none there */
			{TDB_TRAIL_INT64, 2, {COLENC_PATCHED, 0, 0, 0, 1, 1, 0}, 7, "bad exception"},	/* index 1 of 1 delta */
			{TDB_TRAIL_INT64, 3, {COLENC_PATCHED, 0, 0, 65, 0}, 5, "truncated patched"},
			{TDB_TRAIL_INT64, 2, {0x13, 1, 0}, 3, "unknown encoding"},	/* a scale on an int */
			{TDB_TRAIL_INT64, 2, {COLENC_DICT, 3, 0, 0, 0}, 5, "dictionary size"},	/* d > nn */
			{TDB_TRAIL_INT64, 2, {COLENC_DICT, 2, 0, 0, 2, 0x0b}, 6, "index out of range"},
			{TDB_TRAIL_INT64, 2, {COLENC_RLE, 1, 2, 3}, 4, "run length"},
			{TDB_TRAIL_INT64, 2, {COLENC_RLE, 1, 2, 1}, 4, "add up"},
			{TDB_TRAIL_INT64, 2, {COLENC_RLE, 0}, 2, "run count"},
			{TDB_TRAIL_BOOL, 1, {COLENC_CONST, 2}, 2, "bad constant"},
			{TDB_TRAIL_BOOL, 1, {COLENC_DICT, 1, 0, 0, 0}, 5, "type"},
			{TDB_TRAIL_STRING, 1, {COLENC_CONST, 0xe8, 0x07}, 3, "lexicon"},	/* 1000 */
			{TDB_TRAIL_FLOAT64, 2, {COLENC_XOR, 0, 0, 0, 0, 0, 0, 0, 0, 0x54}, 10, "XOR"},
			{TDB_TRAIL_FLOAT64, 1, {COLENC_FOR, 0, 0}, 3, "type"},
			{TDB_TRAIL_FLOAT64, 1, {COLENC_CONST | 1 << 4, 0x82, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20}, 9, "out of range"},	/* 2^53 + 1 */
			{TDB_TRAIL_INT64, 2, {COLENC_FOR, 0, 65}, 3, "packed"},
			{TDB_TRAIL_INT64, 3, {COLENC_DICT, 2, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0}, 13, "dictionary out of range"},	/* INT64_MAX, then past it */
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		{
			CodecCur	c = {bad[i].bytes, bad[i].bytes + bad[i].len};
			const char *why = colenc_get(&c, bad[i].type, bad[i].nn, NSTRINGS, got, NULL, 0);

			if (why == NULL || strstr(why, bad[i].why) == NULL)
				unit_fail(__FILE__, __LINE__, "bad payload %zu: %s, expected \"%s\"", i,
						  why ? why : "accepted", bad[i].why);
		}
	}
}

/* A file of version 3 (or 2) with the edge cases, decoded page by page. */
static void
edge_file(int version)
{
	TdbTrailSchema sc;
	TdbTrailWriter *w;
	TdbTrailWriterOptions wo = {.version = version, .page_target_bytes = 1 << 20};
	TdbTrailError err;
	TdbTrailTrailer t;
	TdbTrailFooter f;
	TdbTrailPage pg;
	uint8_t    *buf;
	size_t		len;
	uint64_t	rng = 5,
				seen = 0;
	/* trail 0: one event; trail 1: 8192 (one full page); trail 2: 9000 */
	static const int ntr[3] = {1, 8192, 9000};
	const char *words[3] = {"3c6444", "4b1805", "a0b1c2"};

	memset(&sc, 0, sizeof(sc));
	strcpy(sc.id_name, "id");
	sc.id_type = TDB_TRAIL_INT64;
	sc.ncolumns = 6;
	strcpy(sc.columns[0].name, "f");
	sc.columns[0].type = TDB_TRAIL_FLOAT64;
	strcpy(sc.columns[1].name, "i");
	sc.columns[1].type = TDB_TRAIL_INT64;
	strcpy(sc.columns[2].name, "s");
	sc.columns[2].type = TDB_TRAIL_STRING;
	strcpy(sc.columns[3].name, "b");
	sc.columns[3].type = TDB_TRAIL_BOOL;
	strcpy(sc.columns[4].name, "nothing");
	sc.columns[4].type = TDB_TRAIL_FLOAT64;
	strcpy(sc.columns[5].name, "sparse");
	sc.columns[5].type = TDB_TRAIL_INT64;
	CHECK(tdb_trail_writer_create(&sc, &wo, &w, &err) == 0);
	for (int tr = 0; tr < 3; tr++)
		for (int e = 0; e < ntr[tr]; e++)
		{
			TdbTrailValue vals[6];
			TdbTrailEvent ev;
			int64_t		fb;

			memset(vals, 0, sizeof(vals));
			memset(&ev, 0, sizeof(ev));
			ev.key.i = tr;
			ev.time_us = 1593475200000000LL + (int64_t) e * 100000;
			ev.lon = 2.35 + e * 1e-6;
			ev.lat = 48.85;
			family(TDB_TRAIL_FLOAT64, e % 9, 1, &rng, &fb);
			memcpy(&vals[0].f, &fb, 8);
			vals[1].i = e % 3 == 0 ? INT64_MIN : e % 3 == 1 ? INT64_MAX : e;
			vals[2].s = words[tr];
			vals[3].i = e < 4000;
			vals[4].isnull = true;
			vals[5].isnull = e % 100 != 7;
			vals[5].i = e;
			ev.values = vals;
			CHECK(tdb_trail_writer_add(w, &ev, &err) == 0);
		}
	CHECK(tdb_trail_writer_finish(w, &buf, &len, &err) == 0);
	tdb_trail_writer_free(w);
	CHECK(tdb_trail_trailer_decode(buf + len - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE, len, &t, &err) == 0);
	CHECK(t.version == version);
	CHECK(fx_decode_footer_whole(buf, len, &t, &f, &err) == 0);
	CHECK(f.version == version);
	memset(&pg, 0, sizeof(pg));
	rng = 5;
	for (uint32_t p = 0; p < f.npages; p++)
	{
		const TdbTrailPageInfo *pi = &f.pages[p];

		if (tdb_trail_page_decode(&f, p, buf + pi->offset, pi->length, &pg, &err) != 0)
		{
			unit_fail(__FILE__, __LINE__, "page %u: %s", p, err.msg);
			break;
		}
		for (uint32_t i = 0; i < pg.nevents; i++)
		{
			int			e = (int) ((pg.time[i] - 1593475200000000LL) / 100000);
			int			tr = (int) pg.trail[i];
			int64_t		fb;
			const TdbTrailValue *vv[6];

			for (int c = 0; c < 6; c++)
				vv[c] = &pg.cols[c][i];
			family(TDB_TRAIL_FLOAT64, e % 9, 1, &rng, &fb);
			/* the float family draws from rng: the same draws in the same order */
			CHECK(!vv[0]->isnull && memcmp(&vv[0]->f, &fb, 8) == 0);
			CHECK(!vv[1]->isnull && vv[1]->i == (e % 3 == 0 ? INT64_MIN : e % 3 == 1 ? INT64_MAX : e));
			CHECK(!vv[2]->isnull && strcmp(vv[2]->s, words[tr]) == 0);
			CHECK(!vv[3]->isnull && vv[3]->i == (e < 4000));
			CHECK(vv[4]->isnull);
			CHECK(vv[5]->isnull == (e % 100 != 7) && (vv[5]->isnull || vv[5]->i == e));
			seen++;
		}
		if (version >= 3 && pg.nevents > 1)
		{
			/* constant and all-NULL chunks: CRC, nulls byte and at most a few bytes */
			CHECK(pi->chunk_len[2 + 2] <= 4 + 1 + 1 + 1);
			CHECK(pi->chunk_len[2 + 4] == 4 + 1);
			CHECK(pi->chunk_len[2 + 3] <= 4 + 1 + 1 + 1 + 2 * 3);
		}
	}
	CHECK_EQ_U64(seen, 1 + 8192 + 9000);
	tdb_trail_page_release(&pg);
	tdb_trail_footer_release(&f);
	free(buf);
}

UNIT_TEST(test_trail_v3_file_edges_roundtrip)
{
	edge_file(3);
	edge_file(2);
}

/*
 * A version-3 page whose chunks are damaged behind a valid CRC (every byte
 * of every chunk set to 0xff in turn, the chunk's CRC fixed): decoded or
 * refused as ECORRUPT (naming the column for a column's chunk), never a
 * crash.
 */
UNIT_TEST(test_trail_v3_damaged_page_refused)
{
	uint64_t	rng = 12;
	FxSet		s;
	size_t		len;
	uint8_t    *buf;
	TdbTrailTrailer t;
	TdbTrailFooter f;
	TdbTrailError err;
	TdbTrailPage pg;
	int			refused = 0;

	fx_layout(3);
	fx_make(&s, &rng, false, 8, 60);
	buf = fx_encode(&s, 4096, 1000, &len);
	CHECK(buf != NULL);
	CHECK(tdb_trail_trailer_decode(buf + len - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE, len, &t, &err) == 0);
	CHECK(fx_decode_footer_whole(buf, len, &t, &f, &err) == 0);
	CHECK(f.version == 3);
	memset(&pg, 0, sizeof(pg));
	for (uint32_t p = 0; p < f.npages && p < 4; p++)
	{
		const TdbTrailPageInfo *pi = &f.pages[p];
		uint8_t    *page = buf + pi->offset;
		uint64_t	off = 0;

		/* chunk 0 (times), 1 (positions), then the three columns */
		for (int ch = 0; ch < 5; ch++)
		{
			int			col = ch - 2;
			uint32_t	cl = pi->chunk_len[ch];

			for (uint32_t i = 4; i < cl; i++)
			{
				uint8_t		save = page[off + i];
				uint32_t	crc = codec_get_u32le(page + off);
				int			rc;

				page[off + i] = save == 0xff ? 0 : 0xff;
				codec_put_u32le(page + off, tdb_crc32c(page + off + 4, cl - 4));
				rc = tdb_trail_page_decode(&f, p, page, pi->length, &pg, &err);
				CHECK(rc == 0 || rc == TDB_TRAIL_ECORRUPT);
				if (rc == TDB_TRAIL_ECORRUPT)
				{
					refused++;
					CHECK(col < 0 || strstr(err.msg, s.schema.columns[col].name) != NULL);
				}
				page[off + i] = save;
				codec_put_u32le(page + off, crc);
			}
			off += cl;
		}
		CHECK(tdb_trail_page_decode(&f, p, page, pi->length, &pg, &err) == 0);
	}
	CHECK(refused > 0);
	tdb_trail_page_release(&pg);
	tdb_trail_footer_release(&f);
	free(buf);
	fx_free(&s);
	fx_layout(1);
}

/*
 * A version-3 page can hold more events than bytes (a parked vehicle: a
 * constant position and columns, a report every second): the footer
 * decoder must not take nevents > length for corruption then, while a
 * count past TRAIL_V3_PAGE_MAX_EVENTS still is, and the writer refuses
 * pages that large.
 */
UNIT_TEST(test_trail_v3_page_smaller_than_its_events)
{
	TdbTrailSchema sc;
	TdbTrailWriter *w;
	TdbTrailWriterOptions wo = {.page_max_events = 8192, .page_max_span_us = -1};	/* one page: no time limit */
	TdbTrailWriterOptions big = {.page_max_events = TRAIL_V3_PAGE_MAX_EVENTS + 1};
	TdbTrailError err;
	TdbTrailTrailer t;
	TdbTrailFooter f;
	TdbTrailPage pg;
	uint8_t    *buf = NULL;
	size_t		len = 0;
	uint64_t	seen = 0;

	memset(&sc, 0, sizeof(sc));
	strcpy(sc.id_name, "id");
	sc.id_type = TDB_TRAIL_INT64;
	sc.ncolumns = 2;
	strcpy(sc.columns[0].name, "speed");
	sc.columns[0].type = TDB_TRAIL_FLOAT64;
	strcpy(sc.columns[1].name, "parked");
	sc.columns[1].type = TDB_TRAIL_BOOL;
	CHECK(tdb_trail_writer_create(&sc, &big, &w, &err) == TDB_TRAIL_EINVAL);
	CHECK(strstr(err.msg, "page_max_events") != NULL);
	big.version = 2;
	CHECK(tdb_trail_writer_create(&sc, &big, &w, &err) == 0);
	tdb_trail_writer_free(w);
	CHECK(tdb_trail_writer_create(&sc, &wo, &w, &err) == 0);
	for (int e = 0; e < 3000; e++)
	{
		TdbTrailValue vals[2];
		TdbTrailEvent ev;

		memset(vals, 0, sizeof(vals));
		memset(&ev, 0, sizeof(ev));
		ev.key.i = 7;
		ev.time_us = 1593475200000000LL + (int64_t) e * 1000000;
		ev.lon = 2.35;
		ev.lat = 48.85;
		vals[0].f = 0;
		vals[1].i = 1;
		ev.values = vals;
		CHECK(tdb_trail_writer_add(w, &ev, &err) == 0);
	}
	CHECK(tdb_trail_writer_finish(w, &buf, &len, &err) == 0);
	tdb_trail_writer_free(w);
	CHECK(buf != NULL && tdb_trail_trailer_decode(buf + len - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE,
												  len, &t, &err) == 0);
	if (fx_decode_footer_whole(buf, len, &t, &f, &err) != 0)
	{
		unit_fail(__FILE__, __LINE__, "footer: %s", err.msg);
		free(buf);
		return;
	}
	CHECK(f.npages == 1 && f.pages[0].nevents == 3000 && f.pages[0].length < 100);
	memset(&pg, 0, sizeof(pg));
	CHECK(tdb_trail_page_decode(&f, 0, buf + f.pages[0].offset, f.pages[0].length, &pg, &err) == 0);
	for (uint32_t i = 0; i < pg.nevents; i++)
		seen += pg.time[i] == 1593475200000000LL + (int64_t) i * 1000000 && pg.lon[i] == 23500000 &&
			pg.cols[0][i].f == 0 && !signbit(pg.cols[0][i].f) && pg.cols[1][i].i == 1;
	CHECK_EQ_U64(seen, 3000);
	tdb_trail_page_release(&pg);
	tdb_trail_footer_release(&f);
	free(buf);
}

/* One float summary through the footers' encoding: its size, and whether it reads back bit for bit. */
static size_t
summary_roundtrip(double fmin, double fmax, bool has_nan, bool scaled, bool *same)
{
	TdbTrailStats st,
				got;
	CodecBuf	b;
	CodecCur	c;
	size_t		len;

	memset(&st, 0, sizeof(st));
	st.count = 5;
	st.has_range = !isnan(fmin);
	st.has_nan = has_nan;
	st.fmin = fmin;
	st.fmax = fmax;
	codec_buf_init(&b);
	trail_put_stats(&b, TDB_TRAIL_FLOAT64, &st, scaled);
	len = b.len;
	c.p = b.data;
	c.end = b.data + b.len;
	*same = b.ok && trail_get_stats(&c, TDB_TRAIL_FLOAT64, 5, scaled, &got) && codec_left(&c) == 0 &&
		trail_stats_equal(TDB_TRAIL_FLOAT64, &st, &got);
	codec_buf_free(&b);
	return len;
}

/* Bytes as a summary of count 5; whether trail_get_stats takes them (versions 3 and 2). */
static bool
summary_bytes_taken(const uint8_t *bytes, size_t n, bool scaled)
{
	TdbTrailStats got;
	CodecCur	c;

	c.p = bytes;
	c.end = bytes + n;
	return trail_get_stats(&c, TDB_TRAIL_FLOAT64, 5, scaled, &got) && codec_left(&c) == 0;
}

/*
 * Issue 33: version 3's float summaries store exact decimals as them (the
 * small AIS file's footer was mostly raw 8-byte minima and maxima), and
 * every other float raw, bit for bit; version 2 keeps its encoding.
 */
UNIT_TEST(test_trail_v3_scaled_summaries)
{
	const double two53 = 9007199254740992.0;
	struct
	{
		double		fmin,
					fmax;
		size_t		v3len;		/* bytes in version 3 (count, flags, values) */
	}			cases[] = {
		{-60.6, 246.0, 1 + 1 + 2 + 2},	/* scale 1: -606, then 3066 */
		{0.0, 0.0, 1 + 1 + 1 + 1},
		{21.0, 21.0, 1 + 1 + 1 + 1},
		{40.64409, 40.88444, 1 + 1 + 4 + 3},
		{-two53, two53, 1 + 1 + 8 + 8},	/* scale 0, |m| = 2^53 */
		{0.1 + 0.2, 1.0, 1 + 1 + 16},	/* 0.30000000000000004: raw */
		{-0.0, 1.0, 1 + 1 + 16},	/* -0 stays raw */
		{1.0, -0.0 + 1e300, 1 + 1 + 16},	/* past 2^53 at every scale: raw */
		{-INFINITY, 3.5, 1 + 1 + 16},
		{2.5, INFINITY, 1 + 1 + 16},
		{5e-324, 1.0, 1 + 1 + 16},	/* a denormal */
		{1e-14, 2e-14, 1 + 1 + 1 + 1},	/* scale 14 */
		{1e-15, 1.0, 1 + 1 + 16},	/* past scale 14 */
	};
	bool		same;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		size_t		n3 = summary_roundtrip(cases[i].fmin, cases[i].fmax, i % 2 == 1, true, &same);

		CHECK(same);
		if (n3 != cases[i].v3len)
			unit_fail(__FILE__, __LINE__, "case %zu (%.17g, %.17g): %zu bytes, want %zu", i,
					  cases[i].fmin, cases[i].fmax, n3, cases[i].v3len);
		CHECK_EQ_U64(summary_roundtrip(cases[i].fmin, cases[i].fmax, false, false, &same), 1 + 1 + 16);
		CHECK(same);
	}
	/* NaN only: flags alone, in both versions */
	CHECK_EQ_U64(summary_roundtrip(NAN, NAN, true, true, &same), 2);
	CHECK(same);

	{
		/* count 5, flags with scale 1 (k = 0), min 3 (svarint 6), max - min 2 */
		uint8_t		ok[] = {5, 1 | 1 << 2, 6, 2};
		uint8_t		noscale_v2[] = {5, 1 | 1 << 2, 6, 2};
		uint8_t		scale_without_range[] = {5, 2 | 1 << 2, 6, 2};
		uint8_t		scale_past_14[] = {5, 1 | 16 << 2, 6, 2};
		uint8_t		min_past_2_53[] = {5, 1 | 1 << 2, 0x82, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02, 0};
		uint8_t		max_past_2_53[] = {5, 1 | 1 << 2, 0, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10};
		uint8_t		truncated[] = {5, 1 | 1 << 2, 6};

		CHECK(summary_bytes_taken(ok, sizeof(ok), true));
		CHECK(!summary_bytes_taken(noscale_v2, sizeof(noscale_v2), false));
		CHECK(!summary_bytes_taken(scale_without_range, sizeof(scale_without_range), true));
		CHECK(!summary_bytes_taken(scale_past_14, sizeof(scale_past_14), true));
		CHECK(!summary_bytes_taken(min_past_2_53, sizeof(min_past_2_53), true));
		CHECK(!summary_bytes_taken(max_past_2_53, sizeof(max_past_2_53), true));
		CHECK(!summary_bytes_taken(truncated, sizeof(truncated), true));
	}
}
