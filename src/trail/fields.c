/*
 * fields.c
 *	  The pieces both versions of the trail format share (format.h): trail
 *	  ids, zone maps, the schema and the lexicon as the footers write and
 *	  read them, null bitmaps and the decoded page's buffers.  Version 1
 *	  (format.c) and version 2 (format2.c) both build on these, so neither
 *	  depends on the other's helpers.
 */
#include "format.h"

#include <stdlib.h>
#include <string.h>

void
trail_put_key(CodecBuf *b, TdbTrailType type, const TdbTrailKey *k)
{
	if (type == TDB_TRAIL_STRING)
		codec_put_str(b, k->s);
	else
		codec_put_svarint(b, k->i);
}

void
trail_put_zone(CodecBuf *b, int64_t tmin, int64_t tmax, int32_t xmin, int32_t ymin,
		 int32_t xmax, int32_t ymax)
{
	codec_put_svarint(b, tmin);
	codec_put_varint(b, (uint64_t) tmax - (uint64_t) tmin);
	codec_put_svarint(b, xmin);
	codec_put_svarint(b, ymin);
	codec_put_varint(b, (uint64_t) ((int64_t) xmax - xmin));
	codec_put_varint(b, (uint64_t) ((int64_t) ymax - ymin));
}

/* The schema as both footer versions begin: id, time, lon, lat, the extra columns. */
void
trail_put_schema(CodecBuf *b, const TdbTrailSchema *s)
{
	codec_put_str(b, s->id_name);
	codec_put_u8(b, (uint8_t) s->id_type);
	codec_put_str(b, s->time_name);
	codec_put_str(b, s->lon_name);
	codec_put_str(b, s->lat_name);
	codec_put_varint(b, (uint64_t) s->ncolumns);
	for (int c = 0; c < s->ncolumns; c++)
	{
		codec_put_str(b, s->columns[c].name);
		codec_put_u8(b, (uint8_t) s->columns[c].type);
	}
}

void
trail_put_lexicon(CodecBuf *b, const TdbTrailFooter *f)
{
	codec_put_varint(b, f->nstrings);
	for (uint32_t i = 0; i < f->nstrings; i++)
		codec_put_str(b, f->strings[i]);
}

bool
trail_get_name(CodecCur *c, char *dst, size_t cap)
{
	const uint8_t *s;
	size_t		n;

	if (!codec_get_str(c, cap - 1, &s, &n))
		return false;
	memcpy(dst, s, n);
	dst[n] = '\0';
	return true;
}

/*
 * Decode the schema (trail_put_schema) with column types 1 .. max_type;
 * NULL, or what is wrong.
 */
const char *
trail_get_schema(CodecCur *c, TdbTrailSchema *s, TdbTrailType max_type)
{
	uint64_t	n;
	uint8_t		u8;

	if (!trail_get_name(c, s->id_name, sizeof(s->id_name)) || !codec_get_u8(c, &u8) ||
		(u8 != TDB_TRAIL_INT64 && u8 != TDB_TRAIL_STRING))
		return "bad trail id column";
	s->id_type = (TdbTrailType) u8;
	if (!trail_get_name(c, s->time_name, sizeof(s->time_name)) ||
		!trail_get_name(c, s->lon_name, sizeof(s->lon_name)) ||
		!trail_get_name(c, s->lat_name, sizeof(s->lat_name)))
		return "bad column names";
	if (!codec_get_varint(c, &n) || n > TDB_TRAIL_MAX_COLUMNS)
		return "bad column count";
	s->ncolumns = (int) n;
	for (int i = 0; i < s->ncolumns; i++)
	{
		if (!trail_get_name(c, s->columns[i].name, sizeof(s->columns[i].name)) ||
			!codec_get_u8(c, &u8) || u8 < TDB_TRAIL_INT64 || u8 > max_type)
			return "bad column";
		s->columns[i].type = (TdbTrailType) u8;
	}
	return NULL;
}

/* A string of the footer copied into its arena, NUL-terminated. */
char *
trail_arena_str(char *arena, size_t *used, const uint8_t *sp, size_t sl)
{
	char	   *d = arena + *used;

	memcpy(d, sp, sl);
	d[sl] = '\0';
	*used += sl + 1;
	return d;
}

/* A trail id (trail_put_key); a string one copied into the arena. */
bool
trail_get_key(CodecCur *c, TdbTrailType type, TdbTrailKey *k, char *arena, size_t *used)
{
	const uint8_t *sp;
	size_t		sl;

	if (type != TDB_TRAIL_STRING)
		return codec_get_svarint(c, &k->i);
	if (!codec_get_str(c, 1 << 16, &sp, &sl))
		return false;
	k->s = trail_arena_str(arena, used, sp, sl);
	return true;
}

/* Decode the lexicon (trail_put_lexicon) into f; NULL, or what is wrong. */
const char *
trail_get_lexicon(CodecCur *c, TdbTrailFooter *f, char *arena, size_t *used)
{
	uint64_t	n;

	if (!codec_get_varint(c, &n) || n > codec_left(c))
		return "bad lexicon size";
	f->nstrings = (uint32_t) n;
	f->strings = calloc(n ? n : 1, sizeof(char *));
	if (f->strings == NULL)
		return TRAIL_OOM;
	for (uint32_t i = 0; i < f->nstrings; i++)
	{
		const uint8_t *sp;
		size_t		sl;

		if (!codec_get_str(c, 1 << 20, &sp, &sl))
			return "bad lexicon string";
		f->strings[i] = trail_arena_str(arena, used, sp, sl);
	}
	return NULL;
}

bool
trail_get_zone(CodecCur *c, int64_t *tmin, int64_t *tmax, int32_t *xmin, int32_t *ymin,
		 int32_t *xmax, int32_t *ymax)
{
	int64_t		t0,
				x0,
				y0;
	uint64_t	dt,
				dx,
				dy;

	if (!codec_get_svarint(c, &t0) || !codec_get_varint(c, &dt) ||
		!codec_get_svarint(c, &x0) || !codec_get_svarint(c, &y0) ||
		!codec_get_varint(c, &dx) || !codec_get_varint(c, &dy))
		return false;
	if (dt > (uint64_t) INT64_MAX - (uint64_t) t0)
		return false;
	if (x0 < -TRAIL_LON_MAX || x0 > TRAIL_LON_MAX || y0 < -TRAIL_LAT_MAX || y0 > TRAIL_LAT_MAX ||
		dx > (uint64_t) (TRAIL_LON_MAX - x0) || dy > (uint64_t) (TRAIL_LAT_MAX - y0))
		return false;
	*tmin = t0;
	*tmax = (int64_t) ((uint64_t) t0 + dt);
	if (*tmax < *tmin)
		return false;
	*xmin = (int32_t) x0;
	*ymin = (int32_t) y0;
	*xmax = (int32_t) (x0 + (int64_t) dx);
	*ymax = (int32_t) (y0 + (int64_t) dy);
	return true;
}

int
trail_key_cmp(TdbTrailType type, const TdbTrailKey *a, const TdbTrailKey *b)
{
	if (type == TDB_TRAIL_STRING)
		return strcmp(a->s, b->s);
	return (a->i > b->i) - (a->i < b->i);
}

void
tdb_trail_page_release(TdbTrailPage *page)
{
	free(page->trail);
	free(page->time);
	free(page->lon);
	free(page->lat);
	for (int c = 0; c < TDB_TRAIL_MAX_COLUMNS; c++)
		free(page->cols[c]);
	memset(page, 0, sizeof(*page));
}

/*
 * A column's null bitmap (ceil(n / 8) bytes) when it has one; *bitmap NULL
 * when not; false when the bytes are not there.
 */
bool
trail_get_null_bitmap(CodecCur *c, uint32_t n, bool present, const uint8_t **bitmap)
{
	size_t		nb = ((size_t) n + 7) / 8;

	*bitmap = NULL;
	if (!present)
		return true;
	if (codec_left(c) < nb)
		return false;
	*bitmap = c->p;
	c->p += nb;
	return true;
}

bool
trail_page_reserve(TdbTrailPage *pg, uint32_t n, int ncols)
{
	pg->skipped = 0;
	if (n <= pg->cap && ncols <= pg->ncolumns)
		return true;
	tdb_trail_page_release(pg);
	pg->trail = malloc(n * sizeof(uint32_t));
	pg->time = malloc(n * sizeof(int64_t));
	pg->lon = malloc(n * sizeof(int32_t));
	pg->lat = malloc(n * sizeof(int32_t));
	if (!pg->trail || !pg->time || !pg->lon || !pg->lat)
		return false;
	for (int c = 0; c < ncols; c++)
		if ((pg->cols[c] = malloc(n * sizeof(TdbTrailValue))) == NULL)
			return false;
	pg->cap = n;
	pg->ncolumns = ncols;
	return true;
}
