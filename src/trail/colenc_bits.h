/*
 * colenc_bits.h
 *	  Bit packing shared by the column encodings (colenc.c) and the patched
 *	  deltas of version 4 (colenc_patched.c).  Private to those two.
 */
#ifndef TDB_TRAIL_COLENC_BITS_H
#define TDB_TRAIL_COLENC_BITS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "codec.h"

static inline int
bit_width(uint64_t u)
{
	return u == 0 ? 0 : 64 - __builtin_clzll(u);
}

/* Appends n zero bytes and returns where they start (NULL: no memory). */
static inline uint8_t *
put_zeros(CodecBuf *b, size_t n)
{
	if (!codec_buf_reserve(b, n))
		return NULL;
	memset(b->data + b->len, 0, n);
	b->len += n;
	return b->data + b->len - n;
}

/* Bits [pos, pos + w) of p, least significant first, set to v's low w bits. */
static inline void
pack_bits(uint8_t *p, uint64_t pos, uint64_t v, int w)
{
	while (w > 0)
	{
		int			off = (int) (pos & 7),
					take = 8 - off < w ? 8 - off : w;

		p[pos >> 3] |= (uint8_t) ((v & ((1u << take) - 1)) << off);
		v >>= take;
		pos += take;
		w -= take;
	}
}

static inline uint64_t
unpack_bits(const uint8_t *p, uint64_t pos, int w)
{
	uint64_t	v = 0;
	int			got = 0;

	while (got < w)
	{
		int			off = (int) (pos & 7),
					take = 8 - off < w - got ? 8 - off : w - got;

		v |= (uint64_t) ((p[pos >> 3] >> off) & ((1u << take) - 1)) << got;
		pos += take;
		got += take;
	}
	return v;
}

/*
 * n fields of w bits from p (nb bytes, which hold them all) into out: a
 * field of at most 56 bits lies within the 8 bytes from its first one, read
 * at once while they are inside the buffer (unpack_bits went bit group by
 * bit group: a third of a page's decoding on issue 33's box query).
 */
static inline void
unpack_all(const uint8_t *p, uint64_t nb, uint32_t n, int w, uint64_t *out)
{
	uint64_t	pos = 0;
	uint32_t	i = 0;

	if (w <= 56)
	{
		const uint64_t mask = (UINT64_C(1) << w) - 1;

		for (; i < n && (pos >> 3) + 8 <= nb; i++, pos += (uint64_t) w)
			out[i] = (codec_get_u64le(p + (pos >> 3)) >> (pos & 7)) & mask;
	}
	for (; i < n; i++, pos += (uint64_t) w)
		out[i] = unpack_bits(p, pos, w);
}

/* The bytes of n b-bit packed fields. */
static inline uint64_t
packed_bytes(uint32_t n, int bw)
{
	return ((uint64_t) n * bw + 7) / 8;
}

/* b-bit packed fields, n of them: the bytes must be there. */
static inline bool
get_packed(CodecCur *c, uint32_t n, int bw, const uint8_t **p)
{
	uint64_t	nb = packed_bytes(n, bw);

	if (nb > codec_left(c))
		return false;
	*p = c->p;
	c->p += nb;
	return true;
}

/*
 * COLENC_PATCHED (colenc_patched.c): the payload of nn int64 values after
 * the encoding byte; false when it does not apply (fewer than 3 values,
 * nothing to gain) or memory ran out (b->ok false).  The decoder returns
 * NULL or what is wrong.
 */
bool		colenc_put_patched(CodecBuf *b, const int64_t *w, uint32_t nn);
const char *colenc_get_patched(CodecCur *c, uint32_t nn, int64_t *out);

#endif							/* TDB_TRAIL_COLENC_BITS_H */
