/*
 * codec.h
 *	  Byte-level encoding shared by the trail writer and decoders:
 *	  little-endian fixed integers, LEB128 varints, zigzag, a growable output
 *	  buffer and a bounds-checked input cursor.
 *
 * The cursor never reads past its end: every get returns false instead, and
 * callers turn that into TDB_TRAIL_ECORRUPT.  That is what lets the footer
 * and page decoders take arbitrary bytes (the fuzz target does).
 */
#ifndef TDB_TRAIL_CODEC_H
#define TDB_TRAIL_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * What a decoder says ("what is wrong") when an allocation failed: not
 * damage, reported as TDB_TRAIL_ENOMEM (format.h, trail_why_code).
 */
#define TRAIL_OOM "out of memory"

static inline uint64_t
codec_zigzag(int64_t v)
{
	return ((uint64_t) v << 1) ^ (uint64_t) (v >> 63);
}

static inline int64_t
codec_unzigzag(uint64_t u)
{
	return (int64_t) ((u >> 1) ^ (~(u & 1) + 1));
}

/* A LEB128 varint at p (at most 10 bytes); returns the byte after it. */
static inline uint8_t *
codec_varint_at(uint8_t *p, uint64_t v)
{
	while (v >= 0x80)
	{
		*p++ = (uint8_t) (v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t) v;
	return p;
}

static inline void
codec_put_u32le(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t) (v >> (8 * i));
}

static inline void
codec_put_u64le(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t) (v >> (8 * i));
}

static inline uint32_t
codec_get_u32le(const uint8_t *p)
{
	uint32_t	v = 0;

	for (int i = 0; i < 4; i++)
		v |= (uint32_t) p[i] << (8 * i);
	return v;
}

static inline uint64_t
codec_get_u64le(const uint8_t *p)
{
	uint64_t	v;

	/* one load (GCC 12 kept the byte loop of the portable form) */
	memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

/* Growable output; ok turns false once an allocation failed. */
typedef struct CodecBuf
{
	uint8_t    *data;
	size_t		len;
	size_t		cap;
	bool		ok;
} CodecBuf;

void		codec_buf_init(CodecBuf *b);
bool		codec_buf_reserve(CodecBuf *b, size_t extra);
void		codec_buf_free(CodecBuf *b);
void		codec_put_bytes(CodecBuf *b, const void *p, size_t n);
void		codec_put_varint(CodecBuf *b, uint64_t v);
void		codec_put_str(CodecBuf *b, const char *s);

static inline void
codec_put_u8(CodecBuf *b, uint8_t v)
{
	codec_put_bytes(b, &v, 1);
}

static inline void
codec_put_svarint(CodecBuf *b, int64_t v)
{
	codec_put_varint(b, codec_zigzag(v));
}

/* Bounds-checked input. */
typedef struct CodecCur
{
	const uint8_t *p;
	const uint8_t *end;
} CodecCur;

/* A LEB128 varint (inline: a page's plain and run-length columns read one per value). */
static inline bool
codec_get_varint(CodecCur *c, uint64_t *v)
{
	uint64_t	r = 0;

	for (int shift = 0; shift < 64; shift += 7)
	{
		uint8_t		byte;

		if (c->p >= c->end)
			return false;
		byte = *c->p++;
		/* the tenth byte may carry only the top bit of a u64 */
		if (shift == 63 && byte > 1)
			return false;
		r |= (uint64_t) (byte & 0x7F) << shift;
		if (!(byte & 0x80))
		{
			*v = r;
			return true;
		}
	}
	return false;
}

static inline bool
codec_get_svarint(CodecCur *c, int64_t *v)
{
	uint64_t	u;

	if (!codec_get_varint(c, &u))
		return false;
	*v = codec_unzigzag(u);
	return true;
}

static inline bool
codec_get_u8(CodecCur *c, uint8_t *v)
{
	if (c->p >= c->end)
		return false;
	*v = *c->p++;
	return true;
}

static inline bool
codec_get_bytes(CodecCur *c, void *dst, size_t n)
{
	if ((size_t) (c->end - c->p) < n)
		return false;
	memcpy(dst, c->p, n);
	c->p += n;
	return true;
}

static inline size_t
codec_left(const CodecCur *c)
{
	return (size_t) (c->end - c->p);
}

/* A length-prefixed string of at most maxlen bytes, no NUL inside. */
bool		codec_get_str(CodecCur *c, size_t maxlen, const uint8_t **s, size_t *len);

#endif							/* TDB_TRAIL_CODEC_H */
