/*
 * codec.c
 *	  Varints, strings and the growable buffer of codec.h, plus the error
 *	  helpers every trail file uses.
 */
#include "codec.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "trail.h"

void
codec_buf_init(CodecBuf *b)
{
	b->data = NULL;
	b->len = b->cap = 0;
	b->ok = true;
}

bool
codec_buf_reserve(CodecBuf *b, size_t extra)
{
	size_t		want;
	uint8_t    *n;

	if (!b->ok)
		return false;
	if (b->len + extra <= b->cap)
		return true;
	want = b->cap ? b->cap : 256;
	while (want < b->len + extra)
		want *= 2;
	n = realloc(b->data, want);
	if (n == NULL)
	{
		b->ok = false;
		return false;
	}
	b->data = n;
	b->cap = want;
	return true;
}

void
codec_buf_free(CodecBuf *b)
{
	free(b->data);
	codec_buf_init(b);
}

void
codec_put_bytes(CodecBuf *b, const void *p, size_t n)
{
	if (n == 0 || !codec_buf_reserve(b, n))
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

void
codec_put_varint(CodecBuf *b, uint64_t v)
{
	uint8_t		tmp[10];

	codec_put_bytes(b, tmp, (size_t) (codec_varint_at(tmp, v) - tmp));
}

void
codec_put_str(CodecBuf *b, const char *s)
{
	size_t		n = strlen(s);

	codec_put_varint(b, n);
	codec_put_bytes(b, s, n);
}

bool
codec_get_str(CodecCur *c, size_t maxlen, const uint8_t **s, size_t *len)
{
	uint64_t	n;

	if (!codec_get_varint(c, &n) || n > maxlen || n > codec_left(c))
		return false;
	if (memchr(c->p, 0, (size_t) n) != NULL)
		return false;
	*s = c->p;
	*len = (size_t) n;
	c->p += n;
	return true;
}

/* ---- errors ------------------------------------------------------------- */

const char *
tdb_trail_strerror(int code)
{
	switch (code)
	{
		case TDB_TRAIL_OK:
			return "success";
		case TDB_TRAIL_EINVAL:
			return "invalid argument or input";
		case TDB_TRAIL_ENOMEM:
			return "out of memory";
		case TDB_TRAIL_EIO:
			return "file I/O error";
		case TDB_TRAIL_ECORRUPT:
			return "trail file is corrupted";
		case TDB_TRAIL_EVERSION:
			return "unsupported trail file version";
		case TDB_TRAIL_ENOTFOUND:
			return "object not found";
		case TDB_TRAIL_EAUTH:
			return "access denied (credentials)";
		case TDB_TRAIL_EREPLACED:
			return "object replaced while being read";
		case TDB_TRAIL_EPROTO:
			return "server broke the HTTP range contract";
		case TDB_TRAIL_ENET:
			return "network failure";
		case TDB_TRAIL_ECANCELED:
			return "canceled";
		case TDB_TRAIL_EORDER:
			return "input out of order";
		case TDB_TRAIL_EHTTP:
			return "HTTP error";
	}
	return "unknown error";
}

int
tdb_trail_fail(TdbTrailError *err, int code, const char *fmt,...)
{
	va_list		ap;

	if (err == NULL)
		return code;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return code;
}

int32_t
tdb_trail_coord_fix(double deg)
{
	return (int32_t) lround(deg * TDB_TRAIL_COORD_SCALE);
}

