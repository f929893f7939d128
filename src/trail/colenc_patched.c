/*
 * colenc_patched.c
 *	  COLENC_PATCHED, the packed deltas with exceptions of trail format
 *	  version 4 (docs/trail-format.md, "Version 4"): colenc.c's other codecs
 *	  choose it when it is the smallest, as they choose among themselves.
 */
#include <stdlib.h>

#include "colenc.h"
#include "colenc_bits.h"

static int
cmp_i64(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *) a,
				y = *(const int64_t *) b;

	return (x > y) - (x < y);
}

static int
svarint_len(int64_t v)
{
	uint64_t	u = ((uint64_t) v << 1) ^ (uint64_t) (v >> 63);
	int			n = 1;

	while (u >= 0x80)
	{
		u >>= 7;
		n++;
	}
	return n;
}

/*
 * COLENC_PATCHED: w[0], then the deltas packed as COLENC_DELTA's in bw bits
 * above a base, except the few outside [base, base + 2^bw): those are
 * exceptions, listed after the packed bits (their packed fields 0) as the
 * gap to the previous one's index and the delta itself.  A page of several
 * trails in trail order (version 4) steps back in time and jumps in place at
 * each new trail: plain packed deltas took the width of those jumps for
 * every event.  bw and base: the window of 2^bw values holding the most
 * deltas, for each width below the one that holds them all, the smallest
 * total (an exception counted as its delta's svarint and a byte of gap).
 * false: fewer than 3 values, nothing to gain, or no memory.
 */
bool
colenc_put_patched(CodecBuf *b, const int64_t *w, uint32_t nn)
{
	uint32_t	m = nn - 1,
				nexc = 0,
				prev = 0;
	int64_t    *s;
	uint64_t   *cost;			/* cost[i]: svarint bytes of s[0, i) */
	int			full,
				best_bw = -1;
	uint64_t	best = UINT64_MAX;
	int64_t		base = 0;
	uint8_t    *p;

	if (nn < 3)
		return false;
	s = malloc((size_t) m * sizeof(int64_t));
	cost = malloc(((size_t) m + 1) * sizeof(uint64_t));
	if (s == NULL || cost == NULL)
	{
		free(s);
		free(cost);
		b->ok = false;
		return false;
	}
	for (uint32_t i = 0; i < m; i++)
		s[i] = (int64_t) ((uint64_t) w[i + 1] - (uint64_t) w[i]);
	qsort(s, m, sizeof(int64_t), cmp_i64);
	cost[0] = 0;
	for (uint32_t i = 0; i < m; i++)
		cost[i + 1] = cost[i] + 1 + (uint64_t) svarint_len(s[i]);
	full = bit_width((uint64_t) s[m - 1] - (uint64_t) s[0]);
	for (int bw = 0; bw < full; bw++)
	{
		uint64_t	maxv = (UINT64_C(1) << bw) - 1;

		for (uint32_t i = 0, j = 0; i < m; i++)
		{
			uint64_t	total;

			if (j < i)
				j = i;
			while (j + 1 < m && (uint64_t) s[j + 1] - (uint64_t) s[i] <= maxv)
				j++;
			/* exceptions: s[0, i) and s(j, m) */
			total = packed_bytes(m, bw) + cost[i] + (cost[m] - cost[j + 1]);
			if (total < best)
			{
				best = total;
				best_bw = bw;
				base = s[i];
			}
			if (j + 1 == m)
				break;
		}
	}
	free(s);
	free(cost);
	if (best_bw < 0)
		return false;
	{
		uint64_t	maxv = (UINT64_C(1) << best_bw) - 1;

		for (uint32_t i = 0; i < m; i++)
			if ((uint64_t) w[i + 1] - (uint64_t) w[i] - (uint64_t) base > maxv)
				nexc++;
		codec_put_svarint(b, w[0]);
		codec_put_svarint(b, base);
		codec_put_u8(b, (uint8_t) best_bw);
		codec_put_varint(b, nexc);
		p = put_zeros(b, packed_bytes(m, best_bw));
		if (p == NULL)
			return false;
		for (uint32_t i = 0; i < m; i++)
		{
			uint64_t	e = (uint64_t) w[i + 1] - (uint64_t) w[i] - (uint64_t) base;

			if (e <= maxv)
				pack_bits(p, (uint64_t) i * best_bw, e, best_bw);
		}
		for (uint32_t i = 0, n = 0; i < m; i++)
		{
			uint64_t	e = (uint64_t) w[i + 1] - (uint64_t) w[i] - (uint64_t) base;

			if (e <= maxv)
				continue;
			codec_put_varint(b, n == 0 ? i : i - prev - 1);
			codec_put_svarint(b, (int64_t) ((uint64_t) w[i + 1] - (uint64_t) w[i]));
			prev = i;
			n++;
		}
	}
	return b->ok;
}

/*
 * The decoder trusts nothing: the exception count is checked against the
 * bytes left (2 at least each) and every exception's index against the
 * deltas before it is written.
 */
const char *
colenc_get_patched(CodecCur *c, uint32_t nn, int64_t *out)
{
	int64_t		base;
	uint64_t	nexc,
				at = 0;
	uint8_t		bw;
	const uint8_t *p;

	if (!codec_get_svarint(c, &out[0]))
		return "truncated patched deltas";
	if (nn == 1)
		return NULL;
	if (!codec_get_svarint(c, &base) || !codec_get_u8(c, &bw) || bw > 64 ||
		!codec_get_varint(c, &nexc) || !get_packed(c, nn - 1, bw, &p))
		return "truncated patched deltas";
	/* an exception takes 2 bytes or more */
	if (nexc > nn - 1 || nexc > codec_left(c) / 2)
		return "bad exception count";
	unpack_all(p, packed_bytes(nn - 1, bw), nn - 1, bw, (uint64_t *) out + 1);
	for (uint64_t j = 0; j < nexc; j++)
	{
		uint64_t	gap;
		int64_t		d;

		if (!codec_get_varint(c, &gap) || gap >= nn - 1 - at || !codec_get_svarint(c, &d))
			return "bad exception";
		at += gap;
		out[1 + at] = (int64_t) ((uint64_t) d - (uint64_t) base);
		at++;
	}
	for (uint32_t i = 1; i < nn; i++)
		out[i] = (int64_t) ((uint64_t) out[i - 1] + (uint64_t) base + (uint64_t) out[i]);
	return NULL;
}
