/*
 * colenc.c
 *	  The column encodings of trail format version 3 (colenc.h;
 *	  docs/trail-format.md, "Version 3: page column encodings").
 *
 * Every value is first a 64-bit word of one of four kinds: a signed integer
 * (int64 values, and float64 values scaled by 10^k when every value of the
 * page reads back exactly so), an unsigned lexicon id (strings), a 0/1
 * (booleans), or the 8 raw bytes of a double.  The words are then encoded
 * by one codec; the writer encodes every codec that applies and keeps the
 * smallest, so the choice is per page and column, and exact.  The decoder
 * trusts nothing: every count is checked against the bytes present and the
 * values wanted before it is used.
 */
#include "colenc.h"
#include "colenc_bits.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum Kind
{
	K_INT,						/* signed: svarints, deltas */
	K_ID,						/* unsigned lexicon id: varints */
	K_BOOL,						/* 0 or 1 */
	K_RAW						/* the 8 bytes of a double */
} Kind;

static const double pow10d[COLENC_MAX_SCALE + 1] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14
};

#define SCALED_MAX	9007199254740992.0	/* 2^53: |m| of a scaled float */

/* ---- words and bits ------------------------------------------------------ */

static bool
word_lt(Kind k, int64_t a, int64_t b)
{
	return k == K_INT ? a < b : (uint64_t) a < (uint64_t) b;
}

static void
put_word(CodecBuf *b, Kind k, int64_t w)
{
	if (k == K_INT)
		codec_put_svarint(b, w);
	else if (k == K_RAW)
	{
		uint8_t		le[8];

		codec_put_u64le(le, (uint64_t) w);
		codec_put_bytes(b, le, 8);
	}
	else
		codec_put_varint(b, (uint64_t) w);
}

static bool
get_word(CodecCur *c, Kind k, int64_t *w)
{
	uint64_t	u;

	if (k == K_INT)
		return codec_get_svarint(c, w);
	if (k == K_RAW)
	{
		uint8_t		le[8];

		if (!codec_get_bytes(c, le, 8))
			return false;
		*w = (int64_t) codec_get_u64le(le);
		return true;
	}
	if (!codec_get_varint(c, &u) || (k == K_BOOL && u > 1))
		return false;
	*w = (int64_t) u;
	return true;
}

/* ---- the encoder --------------------------------------------------------- */

/* The sorted distinct words of a page and each value's index among them. */
typedef struct Dict
{
	int64_t    *u;
	uint32_t	d;
	uint32_t   *idx;
} Dict;

/*
 * The sorted distinct words and each value's index: an LSD radix sort of
 * (key, position) pairs by bytes, skipping the bytes every key shares
 * (signed words with the sign bit flipped, so that unsigned order is
 * theirs), then one pass numbering the distinct keys.
 */
typedef struct KeyPos
{
	uint64_t	key;
	uint32_t	pos;
} KeyPos;

static bool
dict_build(Dict *dc, Kind k, const int64_t *w, uint32_t nn)
{
	uint64_t	flip = k == K_INT ? (uint64_t) 1 << 63 : 0;
	KeyPos	   *a = malloc((size_t) nn * sizeof(KeyPos));
	KeyPos	   *t = malloc((size_t) nn * sizeof(KeyPos));
	uint32_t	(*hist)[256] = calloc(8, sizeof(*hist));
	bool		ok;

	dc->u = malloc((size_t) nn * sizeof(int64_t));
	dc->idx = malloc((size_t) nn * sizeof(uint32_t));
	dc->d = 0;
	ok = a && t && hist && dc->u && dc->idx;
	if (ok)
	{
		for (uint32_t i = 0; i < nn; i++)
		{
			a[i].key = (uint64_t) w[i] ^ flip;
			a[i].pos = i;
			for (int by = 0; by < 8; by++)
				hist[by][(a[i].key >> (8 * by)) & 0xff]++;
		}
		for (int by = 0; by < 8; by++)
		{
			uint32_t	sum = 0;
			KeyPos	   *x;

			if (hist[by][(a[0].key >> (8 * by)) & 0xff] == nn)
				continue;		/* every key has this byte */
			for (int v = 0; v < 256; v++)
			{
				uint32_t	c = hist[by][v];

				hist[by][v] = sum;
				sum += c;
			}
			for (uint32_t i = 0; i < nn; i++)
				t[hist[by][(a[i].key >> (8 * by)) & 0xff]++] = a[i];
			x = a;
			a = t;
			t = x;
		}
		for (uint32_t i = 0; i < nn; i++)
		{
			if (dc->d == 0 || (uint64_t) dc->u[dc->d - 1] != (a[i].key ^ flip))
				dc->u[dc->d++] = (int64_t) (a[i].key ^ flip);
			dc->idx[a[i].pos] = dc->d - 1;
		}
	}
	free(a);
	free(t);
	free(hist);
	return ok;
}

static void
put_dict(CodecBuf *b, Kind k, const Dict *dc)
{
	codec_put_varint(b, dc->d);
	put_word(b, k, dc->u[0]);
	for (uint32_t i = 1; i < dc->d; i++)
		codec_put_varint(b, (uint64_t) dc->u[i] - (uint64_t) dc->u[i - 1] - 1);
}

/*
 * The words w[0, nn) of kind k with one codec; false when the codec does
 * not apply to the kind or the values (or memory ran out).
 */
static bool
encode_words(CodecBuf *b, Kind k, const int64_t *w, uint32_t nn, int codec, const Dict *dc)
{
	switch (codec)
	{
		case COLENC_PLAIN:
			if (k == K_BOOL)
			{
				uint8_t    *p = put_zeros(b, ((size_t) nn + 7) / 8);

				if (p == NULL)
					return false;
				for (uint32_t i = 0; i < nn; i++)
					p[i / 8] |= (uint8_t) ((w[i] & 1) << (i % 8));
			}
			else if (k == K_INT)
				for (uint32_t i = 0; i < nn; i++)
					codec_put_svarint(b, (int64_t) ((uint64_t) w[i] - (uint64_t) (i ? w[i - 1] : 0)));
			else
				for (uint32_t i = 0; i < nn; i++)
					put_word(b, k, w[i]);
			return true;
		case COLENC_CONST:
			for (uint32_t i = 1; i < nn; i++)
				if (w[i] != w[0])
					return false;
			put_word(b, k, w[0]);
			return true;
		case COLENC_RLE:
			{
				uint32_t	r = 1;
				int64_t		prev = 0;

				for (uint32_t i = 1; i < nn; i++)
					r += w[i] != w[i - 1];
				codec_put_varint(b, r);
				for (uint32_t i = 0; i < nn;)
				{
					uint32_t	j = i + 1;

					while (j < nn && w[j] == w[i])
						j++;
					if (k == K_INT)
						codec_put_svarint(b, (int64_t) ((uint64_t) w[i] - (uint64_t) prev));
					else
						put_word(b, k, w[i]);
					codec_put_varint(b, j - i);
					prev = w[i];
					i = j;
				}
				return true;
			}
		case COLENC_DICT:
		case COLENC_DICT_RLE:
			if (k == K_BOOL || dc == NULL)
				return false;
			put_dict(b, k, dc);
			if (codec == COLENC_DICT)
			{
				int			bw = bit_width(dc->d - 1);
				uint8_t    *p;

				codec_put_u8(b, (uint8_t) bw);
				p = put_zeros(b, ((uint64_t) nn * bw + 7) / 8);
				if (p == NULL)
					return false;
				for (uint32_t i = 0; i < nn; i++)
					pack_bits(p, (uint64_t) i * bw, dc->idx[i], bw);
			}
			else
			{
				uint32_t	r = 1;

				for (uint32_t i = 1; i < nn; i++)
					r += w[i] != w[i - 1];
				codec_put_varint(b, r);
				for (uint32_t i = 0; i < nn;)
				{
					uint32_t	j = i + 1;

					while (j < nn && w[j] == w[i])
						j++;
					codec_put_varint(b, dc->idx[i]);
					codec_put_varint(b, j - i);
					i = j;
				}
			}
			return true;
		case COLENC_FOR:
			{
				int64_t		lo = w[0],
							hi = w[0];
				int			bw;
				uint8_t    *p;

				if (k != K_INT && k != K_ID)
					return false;
				for (uint32_t i = 1; i < nn; i++)
				{
					if (word_lt(k, w[i], lo))
						lo = w[i];
					if (word_lt(k, hi, w[i]))
						hi = w[i];
				}
				bw = bit_width((uint64_t) hi - (uint64_t) lo);
				put_word(b, k, lo);
				codec_put_u8(b, (uint8_t) bw);
				p = put_zeros(b, ((uint64_t) nn * bw + 7) / 8);
				if (p == NULL)
					return false;
				for (uint32_t i = 0; i < nn; i++)
					pack_bits(p, (uint64_t) i * bw, (uint64_t) w[i] - (uint64_t) lo, bw);
				return true;
			}
		case COLENC_DELTA:
			{
				int64_t		mind = INT64_MAX;
				uint64_t	span = 0;
				int			bw;
				uint8_t    *p;

				if (k != K_INT)
					return false;
				codec_put_svarint(b, w[0]);
				if (nn == 1)
					return true;
				for (uint32_t i = 1; i < nn; i++)
				{
					int64_t		d = (int64_t) ((uint64_t) w[i] - (uint64_t) w[i - 1]);

					if (d < mind)
						mind = d;
				}
				for (uint32_t i = 1; i < nn; i++)
				{
					uint64_t	e = (uint64_t) w[i] - (uint64_t) w[i - 1] - (uint64_t) mind;

					if (e > span)
						span = e;
				}
				bw = bit_width(span);
				codec_put_svarint(b, mind);
				codec_put_u8(b, (uint8_t) bw);
				p = put_zeros(b, ((uint64_t) (nn - 1) * bw + 7) / 8);
				if (p == NULL)
					return false;
				for (uint32_t i = 1; i < nn; i++)
					pack_bits(p, (uint64_t) (i - 1) * bw,
							  (uint64_t) w[i] - (uint64_t) w[i - 1] - (uint64_t) mind, bw);
				return true;
			}
		case COLENC_PATCHED:
			return k == K_INT && colenc_put_patched(b, w, nn);
		case COLENC_XOR:
			if (k != K_RAW)
				return false;
			put_word(b, k, w[0]);
			for (uint32_t i = 1; i < nn; i++)
			{
				uint64_t	x = (uint64_t) w[i] ^ (uint64_t) w[i - 1];
				int			lead = x ? __builtin_clzll(x) / 8 : 8,
							trail = x ? __builtin_ctzll(x) / 8 : 0,
							nb = 8 - lead - trail;
				uint8_t		le[8];

				codec_put_u8(b, (uint8_t) (lead << 4 | nb));
				codec_put_u64le(le, nb ? x >> (8 * trail) : 0);
				codec_put_bytes(b, le, (size_t) nb);
			}
			return true;
	}
	return false;
}

/*
 * Whether every value is an integer m / 10^k, |m| <= 2^53, that reads back
 * bit for bit as the double (double) m / 10^k (never a -0, NaN or
 * infinity); the m go to out.
 */
static bool
scale_fits(const int64_t *bits, uint32_t nn, int k, int64_t *out)
{
	for (uint32_t i = 0; i < nn; i++)
	{
		double		v,
					s;

		memcpy(&v, &bits[i], 8);
		if (!isfinite(v) || (v == 0 && signbit(v)))
			return false;
		s = nearbyint(v * pow10d[k]);
		if (!(fabs(s) <= SCALED_MAX) || s / pow10d[k] != v)
			return false;
		out[i] = (int64_t) s;
	}
	return true;
}

/*
 * The smallest scale k (0..COLENC_MAX_SCALE) at which both a and b are
 * integers m / 10^k as scale_fits says (the footers' float summaries), or
 * -1; the m go to ma and mb.
 */
int
colenc_scale_pair(double a, double b, int64_t *ma, int64_t *mb)
{
	int64_t		bits[2],
				m[2];

	memcpy(&bits[0], &a, 8);
	memcpy(&bits[1], &b, 8);
	if (!isfinite(a) || (a == 0 && signbit(a)))
		return -1;
	for (int k = 0; k <= COLENC_MAX_SCALE; k++)
		if (scale_fits(bits, 2, k, m))
		{
			*ma = m[0];
			*mb = m[1];
			return k;
		}
	return -1;
}

/* m / 10^k, as the decoders read a scaled float; false if |m| > 2^53 or k > COLENC_MAX_SCALE */
bool
colenc_unscale(int64_t m, int k, double *v)
{
	if (k < 0 || k > COLENC_MAX_SCALE || m > (int64_t) SCALED_MAX || m < -(int64_t) SCALED_MAX)
		return false;
	*v = (double) m / pow10d[k];
	return true;
}

/* The smallest such scale k (0..COLENC_MAX_SCALE), or -1. */
static int
float_scale(const int64_t *bits, uint32_t nn, int64_t *out)
{
	double		v;

	memcpy(&v, &bits[0], 8);
	if (!isfinite(v) || (v == 0 && signbit(v)))
		return -1;
	for (int k = 0; k <= COLENC_MAX_SCALE; k++)
		if (scale_fits(bits, nn, k, out))
			return k;
	return -1;
}

static Kind
type_kind(TdbTrailType type)
{
	return type == TDB_TRAIL_STRING ? K_ID : type == TDB_TRAIL_BOOL ? K_BOOL :
		type == TDB_TRAIL_FLOAT64 ? K_RAW : K_INT;
}

/*
 * Encodes with the given encoding byte into b, or with the smallest when
 * force < 0.
 */
static bool
colenc_encode(CodecBuf *b, TdbTrailType type, const int64_t *bits, uint32_t nn, int force,
			  bool dicts, int ncodecs)
{
	Kind		kinds[2];
	const int64_t *words[2];
	int			scales[2];
	int			nk = 1;
	int64_t    *scaled = NULL;
	CodecBuf	cur,
				best;
	int			best_enc = -1;
	bool		ok = true;

	if (nn == 0)
		return false;
	kinds[0] = type_kind(type);
	words[0] = bits;
	scales[0] = 0;
	if (type == TDB_TRAIL_FLOAT64 && (force < 0 || (force >> 4) != 0))
	{
		int			k;

		scaled = malloc((size_t) nn * sizeof(int64_t));
		if (scaled == NULL)
		{
			b->ok = false;
			return false;
		}
		if (force < 0)
			k = float_scale(bits, nn, scaled);
		else
			k = scale_fits(bits, nn, (force >> 4) - 1, scaled) ? (force >> 4) - 1 : -1;
		if (k >= 0)
		{
			kinds[nk] = K_INT;
			words[nk] = scaled;
			scales[nk] = k + 1;
			nk++;
		}
	}
	codec_buf_init(&cur);
	codec_buf_init(&best);
	for (int ki = 0; ki < nk && ok; ki++)
	{
		Dict		dc = {NULL, 0, NULL};
		bool		have_dict = dicts && kinds[ki] != K_BOOL;

		if (force >= 0 && (force >> 4) != scales[ki])
			continue;
		for (int codec = 0; codec < ncodecs && ok; codec++)
		{
			int			enc = codec | scales[ki] << 4;

			if (force >= 0 && enc != force)
				continue;
			/* constant values: no other codec of this kind is smaller than CONST */
			if (best_enc == (COLENC_CONST | scales[ki] << 4))
				break;
			/* the dictionary when a codec first needs it */
			if (have_dict && dc.u == NULL && (codec == COLENC_DICT || codec == COLENC_DICT_RLE) &&
				!dict_build(&dc, kinds[ki], words[ki], nn))
			{
				ok = false;
				break;
			}
			cur.len = 0;
			codec_put_u8(&cur, (uint8_t) enc);
			if (!encode_words(&cur, kinds[ki], words[ki], nn, codec, have_dict ? &dc : NULL))
			{
				if (!cur.ok)
					ok = false;
				continue;
			}
			if (!cur.ok)
				ok = false;
			else if (best_enc < 0 || cur.len < best.len)
			{
				CodecBuf	t = best;

				best = cur;
				cur = t;
				best_enc = enc;
			}
		}
		free(dc.u);
		free(dc.idx);
	}
	if (ok && best_enc >= 0)
		codec_put_bytes(b, best.data, best.len);
	if (!ok)
		b->ok = false;
	codec_buf_free(&cur);
	codec_buf_free(&best);
	free(scaled);
	return ok && best_enc >= 0 && b->ok;
}

bool
colenc_put(CodecBuf *b, TdbTrailType type, const int64_t *bits, uint32_t nn, int version)
{
	return colenc_encode(b, type, bits, nn, -1, true, colenc_ncodecs(version));
}

bool
colenc_put_sequence(CodecBuf *b, const int64_t *v, uint32_t nn, int version)
{
	return colenc_encode(b, TDB_TRAIL_INT64, v, nn, -1, false, colenc_ncodecs(version));
}

bool
colenc_put_runs(CodecBuf *b, TdbTrailType type, const int64_t *bits, uint32_t nn, int version,
				bool sequence, const uint32_t *runs, uint32_t nruns)
{
	int			ncodecs = colenc_ncodecs(version);
	size_t		start = b->len;
	CodecBuf	per;
	uint64_t	at = 0;

	if (!colenc_encode(b, type, bits, nn, -1, !sequence, ncodecs))
		return false;
	if (version < 4 || runs == NULL || nruns < 2)
		return true;
	codec_buf_init(&per);
	codec_put_u8(&per, COLENC_RUNS);
	for (uint32_t r = 0; r < nruns && per.ok; r++)
	{
		if (runs[r] == 0)
			continue;
		if (runs[r] > nn - at ||
			!colenc_encode(&per, type, bits + at, runs[r], -1, !sequence, ncodecs))
			break;
		at += runs[r];
	}
	if (!per.ok)
		b->ok = false;
	else if (at == nn && per.len < b->len - start)
	{
		b->len = start;
		codec_put_bytes(b, per.data, per.len);
	}
	codec_buf_free(&per);
	return b->ok;
}

bool
colenc_put_as(CodecBuf *b, TdbTrailType type, const int64_t *bits, uint32_t nn, uint8_t enc)
{
	return colenc_encode(b, type, bits, nn, enc, true, COLENC_NCODECS);
}

/* ---- the decoder --------------------------------------------------------- */

/* Reads a dictionary of d entries (1 <= d <= nn), strictly ascending. */
static const char *
get_dict(CodecCur *c, Kind k, uint32_t nn, int64_t **up, uint32_t *dp)
{
	uint64_t	d;
	int64_t    *u;

	*up = NULL;
	if (!codec_get_varint(c, &d) || d == 0 || d > nn || d > codec_left(c))
		return "bad dictionary size";
	u = malloc((size_t) d * sizeof(int64_t));
	if (u == NULL)
		return TRAIL_OOM;
	*up = u;
	*dp = (uint32_t) d;
	if (!get_word(c, k, &u[0]))
		return "truncated dictionary";
	for (uint64_t i = 1; i < d; i++)
	{
		uint64_t	gap,
					room;

		if (!codec_get_varint(c, &gap))
			return "truncated dictionary";
		/* the next entry, prev + gap + 1, must not pass the largest word */
		room = k == K_INT ? (uint64_t) INT64_MAX - (uint64_t) u[i - 1] : UINT64_MAX - (uint64_t) u[i - 1];
		if (gap >= room)
			return "dictionary out of range";
		u[i] = (int64_t) ((uint64_t) u[i - 1] + gap + 1);
	}
	return NULL;
}

static const char *
decode_words(CodecCur *c, Kind k, int codec, uint32_t nn, int64_t *out)
{
	const uint8_t *p;
	uint8_t		bw;

	switch (codec)
	{
		case COLENC_PLAIN:
			if (k == K_BOOL)
			{
				if (!get_packed(c, nn, 1, &p))
					return "truncated values";
				for (uint32_t i = 0; i < nn; i++)
					out[i] = (p[i / 8] >> (i % 8)) & 1;
				return NULL;
			}
			for (uint32_t i = 0; i < nn; i++)
			{
				if (!get_word(c, k, &out[i]))
					return "truncated values";
				if (k == K_INT && i > 0)
					out[i] = (int64_t) ((uint64_t) out[i] + (uint64_t) out[i - 1]);
			}
			return NULL;
		case COLENC_CONST:
			if (!get_word(c, k, &out[0]))
				return "truncated or bad constant";
			for (uint32_t i = 1; i < nn; i++)
				out[i] = out[0];
			return NULL;
		case COLENC_RLE:
		case COLENC_DICT_RLE:
		case COLENC_DICT:
			{
				int64_t    *u = NULL;
				uint32_t	d = 0;
				uint64_t	r,
							at = 0;
				int64_t		prev = 0;
				const char *why = NULL;

				if (codec != COLENC_RLE && k == K_BOOL)
					return "bad encoding for the column's type";
				if (codec != COLENC_RLE && (why = get_dict(c, k, nn, &u, &d)) != NULL)
				{
					free(u);
					return why;
				}
				if (codec == COLENC_DICT)
				{
					if (!codec_get_u8(c, &bw) || bw > 32 || !get_packed(c, nn, bw, &p))
						why = "bad dictionary indexes";
					else
						unpack_all(p, packed_bytes(nn, bw), nn, bw, (uint64_t *) out);
					for (uint32_t i = 0; i < nn && why == NULL; i++)
					{
						uint64_t	ix = (uint64_t) out[i];

						if (ix >= d)
							why = "dictionary index out of range";
						else
							out[i] = u[ix];
					}
					free(u);
					return why;
				}
				if (!codec_get_varint(c, &r) || r == 0 || r > nn)
					why = "bad run count";
				for (uint64_t j = 0; j < r && why == NULL; j++)
				{
					int64_t		v = 0;
					uint64_t	cnt;

					if (codec == COLENC_RLE)
					{
						if (!get_word(c, k, &v))
							why = "truncated or bad run value";
						else if (k == K_INT)
							v = (int64_t) ((uint64_t) v + (uint64_t) prev);
					}
					else
					{
						uint64_t	ix;

						if (!codec_get_varint(c, &ix) || ix >= d)
							why = "bad run dictionary index";
						else
							v = u[ix];
					}
					if (why == NULL && (!codec_get_varint(c, &cnt) || cnt == 0 || cnt > nn - at))
						why = "bad run length";
					for (uint64_t i = 0; why == NULL && i < cnt; i++)
						out[at + i] = v;
					at += why == NULL ? cnt : 0;
					prev = why == NULL ? v : prev;
				}
				if (why == NULL && at != nn)
					why = "runs do not add up to the values";
				free(u);
				return why;
			}
		case COLENC_FOR:
			{
				int64_t		base;

				if (k != K_INT && k != K_ID)
					return "bad encoding for the column's type";
				if (!get_word(c, k, &base) || !codec_get_u8(c, &bw) || bw > 64 ||
					!get_packed(c, nn, bw, &p))
					return "truncated packed values";
				unpack_all(p, packed_bytes(nn, bw), nn, bw, (uint64_t *) out);
				for (uint32_t i = 0; i < nn; i++)
					out[i] = (int64_t) ((uint64_t) base + (uint64_t) out[i]);
				return NULL;
			}
		case COLENC_DELTA:
			{
				int64_t		mind;

				if (k != K_INT)
					return "bad encoding for the column's type";
				if (!codec_get_svarint(c, &out[0]))
					return "truncated packed deltas";
				if (nn == 1)
					return NULL;
				if (!codec_get_svarint(c, &mind) || !codec_get_u8(c, &bw) || bw > 64 ||
					!get_packed(c, nn - 1, bw, &p))
					return "truncated packed deltas";
				unpack_all(p, packed_bytes(nn - 1, bw), nn - 1, bw, (uint64_t *) out + 1);
				for (uint32_t i = 1; i < nn; i++)
					out[i] = (int64_t) ((uint64_t) out[i - 1] + (uint64_t) mind + (uint64_t) out[i]);
				return NULL;
			}
		case COLENC_PATCHED:
			if (k != K_INT)
				return "bad encoding for the column's type";
			return colenc_get_patched(c, nn, out);
		case COLENC_XOR:
			if (k != K_RAW)
				return "bad encoding for the column's type";
			if (!get_word(c, k, &out[0]))
				return "truncated values";
			for (uint32_t i = 1; i < nn; i++)
			{
				uint8_t		ctl,
							le[8] = {0};
				int			lead,
							nb;
				uint64_t	x;

				if (!codec_get_u8(c, &ctl))
					return "truncated values";
				lead = ctl >> 4;
				nb = ctl & 15;
				if (lead + nb > 8)
					return "bad XOR control byte";
				if (!codec_get_bytes(c, le, (size_t) nb))
					return "truncated values";
				x = nb ? codec_get_u64le(le) << (8 * (8 - lead - nb)) : 0;
				out[i] = (int64_t) ((uint64_t) out[i - 1] ^ x);
			}
			return NULL;
	}
	return "unknown encoding";
}

const char *
colenc_get(CodecCur *c, TdbTrailType type, uint32_t nn, uint64_t nstrings, int64_t *out,
		   const uint32_t *runs, uint32_t nruns)
{
	uint8_t		enc;
	int			scale;
	Kind		k = type_kind(type);
	const char *why;

	if (nn == 0)
		return "no values";
	if (!codec_get_u8(c, &enc))
		return "truncated encoding byte";
	if (enc == COLENC_RUNS)
	{
		uint64_t	at = 0;

		/* each run's values on their own, never again by runs */
		if (runs == NULL || nruns < 2)
			return "encoding by runs outside a page of several runs";
		for (uint32_t r = 0; r < nruns; r++)
		{
			if (runs[r] == 0)
				continue;
			if (runs[r] > nn - at)
				return "runs hold more values than the column";
			if ((why = colenc_get(c, type, runs[r], nstrings, out + at, NULL, 0)) != NULL)
				return why;
			at += runs[r];
		}
		return at == nn ? NULL : "runs hold fewer values than the column";
	}
	scale = enc >> 4;
	if ((enc & 15) >= COLENC_NCODECS || (enc & 15) == COLENC_RUNS ||
		(scale > 0 && type != TDB_TRAIL_FLOAT64))
		return "unknown encoding";
	if (scale > 0)
		k = K_INT;
	if ((why = decode_words(c, k, enc & 15, nn, out)) != NULL)
		return why;
	if (scale > 0)
	{
		for (uint32_t i = 0; i < nn; i++)
		{
			double		v;

			if (out[i] > (1LL << 53) || out[i] < -(1LL << 53))
				return "scaled float out of range";
			v = (double) out[i] / pow10d[scale - 1];
			memcpy(&out[i], &v, 8);
		}
	}
	else if (k == K_ID)
	{
		for (uint32_t i = 0; i < nn; i++)
			if ((uint64_t) out[i] >= nstrings)
				return "string id outside the lexicon";
	}
	else if (k == K_BOOL)
	{
		for (uint32_t i = 0; i < nn; i++)
			if ((uint64_t) out[i] > 1)
				return "boolean not 0 or 1";
	}
	return NULL;
}
