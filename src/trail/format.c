/*
 * format.c
 *	  Encoding and validating decoding of the three parts of a trail file:
 *	  pages, the footer and the trailer (docs/trail-format.md).
 *
 * The decoders assume nothing about their input: lengths and counts are
 * checked against the bytes that are there before anything is allocated,
 * every cross-reference (page -> trail, trail -> pages, offsets) is checked,
 * and a page's events must lie inside the zone map the footer gives for it,
 * because pruning trusts zone maps.  Any failure is TDB_TRAIL_ECORRUPT with
 * a sentence saying what and where.
 */
#include "format.h"

#include <stdlib.h>
#include <string.h>

#include "../checksum.h"

/* ---- trailer ------------------------------------------------------------ */

void
trail_trailer_encode(uint8_t *out, const TdbTrailTrailer *t)
{
	memset(out, 0, TDB_TRAIL_TRAILER_SIZE);
	codec_put_u64le(out + 0, t->footer_offset);
	codec_put_u64le(out + 8, t->footer_length);
	codec_put_u64le(out + 16, t->file_size);
	codec_put_u32le(out + 24, t->footer_crc);
	out[28] = (uint8_t) (t->version & 0xFF);
	out[29] = (uint8_t) (t->version >> 8);
	out[30] = TDB_TRAIL_TRAILER_SIZE;
	out[31] = 0;
	codec_put_u32le(out + 40, tdb_crc32c(out, 40));
	codec_put_u32le(out + 44, TRAIL_TRAILER_MAGIC);
}

int
tdb_trail_trailer_decode(const uint8_t *buf, size_t len, uint64_t file_size,
						 TdbTrailTrailer *t, TdbTrailError *err)
{
	uint16_t	tsize;

	if (len != TDB_TRAIL_TRAILER_SIZE || file_size < TDB_TRAIL_HEADER_SIZE + TDB_TRAIL_TRAILER_SIZE)
		return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT,
							  "not a trail file: %llu bytes is too small",
							  (unsigned long long) file_size);
	if (codec_get_u32le(buf + 44) != TRAIL_TRAILER_MAGIC)
		return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT,
							  "not a trail file: no trailer magic in the last 48 bytes (truncated or another format)");
	if (codec_get_u32le(buf + 40) != tdb_crc32c(buf, 40))
		return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT, "trailer checksum mismatch");
	t->footer_offset = codec_get_u64le(buf + 0);
	t->footer_length = codec_get_u64le(buf + 8);
	t->file_size = codec_get_u64le(buf + 16);
	t->footer_crc = codec_get_u32le(buf + 24);
	t->version = (uint16_t) (buf[28] | (buf[29] << 8));
	tsize = (uint16_t) (buf[30] | (buf[31] << 8));
	if (t->version < TDB_TRAIL_VERSION_MIN || t->version > TDB_TRAIL_VERSION)
		return tdb_trail_fail(err, TDB_TRAIL_EVERSION,
							  "trail file format version %u; this build reads versions %d to %d",
							  t->version, TDB_TRAIL_VERSION_MIN, TDB_TRAIL_VERSION);
	if (tsize != TDB_TRAIL_TRAILER_SIZE)
		return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT, "trailer size %u, expected %d",
							  tsize, TDB_TRAIL_TRAILER_SIZE);
	if (t->file_size != file_size)
		return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT,
							  "trailer says the file has %llu bytes, it has %llu (truncated or appended to)",
							  (unsigned long long) t->file_size, (unsigned long long) file_size);
	if (t->footer_offset < TDB_TRAIL_HEADER_SIZE ||
		t->footer_length > file_size ||
		t->footer_offset > file_size - TDB_TRAIL_TRAILER_SIZE - t->footer_length ||
		t->footer_offset + t->footer_length != file_size - TDB_TRAIL_TRAILER_SIZE)
		return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT,
							  "trailer places the footer at [%llu, +%llu) in a file of %llu bytes",
							  (unsigned long long) t->footer_offset,
							  (unsigned long long) t->footer_length,
							  (unsigned long long) file_size);
	return 0;
}

/* ---- footer ------------------------------------------------------------- */

void
trail_footer_encode(CodecBuf *b, const TdbTrailFooter *f)
{
	const TdbTrailSchema *s = &f->schema;
	uint8_t		magic[4];

	if (f->version >= 2)
	{
		trail_footer2_encode(b, f);
		return;
	}
	codec_put_u32le(magic, TRAIL_FOOTER_MAGIC);
	codec_put_bytes(b, magic, 4);
	codec_put_varint(b, 1);
	trail_put_schema(b, s);
	trail_put_lexicon(b, f);
	codec_put_varint(b, f->ntrails);
	for (uint32_t i = 0; i < f->ntrails; i++)
	{
		const TdbTrailInfo *t = &f->trails[i];

		trail_put_key(b, s->id_type, &t->key);
		codec_put_varint(b, t->npages);
		codec_put_varint(b, t->nevents);
		trail_put_zone(b, t->tmin, t->tmax, t->xmin, t->ymin, t->xmax, t->ymax);
	}
	codec_put_varint(b, f->npages);
	for (uint32_t i = 0; i < f->npages; i++)
	{
		const TdbTrailPageInfo *p = &f->pages[i];

		const TdbTrailInfo *t = &f->trails[p->trail];

		codec_put_varint(b, p->length);
		codec_put_varint(b, p->nevents);
		/* relative to the trail's zone map: small numbers, short varints */
		codec_put_varint(b, (uint64_t) p->tmin - (uint64_t) t->tmin);
		codec_put_varint(b, (uint64_t) p->tmax - (uint64_t) p->tmin);
		codec_put_varint(b, (uint64_t) ((int64_t) p->xmin - t->xmin));
		codec_put_varint(b, (uint64_t) ((int64_t) p->ymin - t->ymin));
		codec_put_varint(b, (uint64_t) ((int64_t) p->xmax - p->xmin));
		codec_put_varint(b, (uint64_t) ((int64_t) p->ymax - p->ymin));
	}
	codec_put_varint(b, f->nevents);
}

/*
 * A page's zone map is stored relative to its trail's, every field an
 * unsigned offset; anything reaching outside the trail's box is refused.
 */
static bool
get_page_zone(CodecCur *c, const TdbTrailInfo *t, TdbTrailPageInfo *p)
{
	uint64_t	d[6];

	for (int i = 0; i < 6; i++)
		if (!codec_get_varint(c, &d[i]))
			return false;
	if (d[0] > (uint64_t) t->tmax - (uint64_t) t->tmin ||
		d[1] > (uint64_t) t->tmax - (uint64_t) t->tmin - d[0] ||
		d[2] > (uint64_t) ((int64_t) t->xmax - t->xmin) ||
		d[3] > (uint64_t) ((int64_t) t->ymax - t->ymin) ||
		d[4] > (uint64_t) ((int64_t) t->xmax - t->xmin) - d[2] ||
		d[5] > (uint64_t) ((int64_t) t->ymax - t->ymin) - d[3])
		return false;
	p->tmin = (int64_t) ((uint64_t) t->tmin + d[0]);
	p->tmax = (int64_t) ((uint64_t) p->tmin + d[1]);
	p->xmin = (int32_t) (t->xmin + (int64_t) d[2]);
	p->ymin = (int32_t) (t->ymin + (int64_t) d[3]);
	p->xmax = (int32_t) (p->xmin + (int64_t) d[4]);
	p->ymax = (int32_t) (p->ymin + (int64_t) d[5]);
	return true;
}

#define FOOTER_BAD(what) \
	do { why = (what); goto bad; } while (0)

int
tdb_trail_footer_decode(const uint8_t *buf, size_t len, const TdbTrailTrailer *t,
						TdbTrailFooter *f, TdbTrailError *err)
{
	CodecCur	c = {buf, buf + len};
	TdbTrailSchema *s = &f->schema;
	const char *why = NULL;
	uint64_t	v,
				n;
	char	   *arena;
	size_t		arena_used = 0;
	uint64_t	offset = TDB_TRAIL_HEADER_SIZE;
	uint32_t	page = 0;

	memset(f, 0, sizeof(*f));
	if (len != t->footer_length || tdb_crc32c(buf, len) != t->footer_crc)
		return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT,
							  "footer checksum mismatch (footer at offset %llu, %llu bytes)",
							  (unsigned long long) t->footer_offset,
							  (unsigned long long) t->footer_length);
	f->data_end = t->footer_offset;
	/* every string needs at least its one length byte: 2 * len is enough */
	arena = f->arena = malloc(2 * len + 1);
	if (arena == NULL)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory for a footer of %zu bytes", len);

	if (len < 4 || codec_get_u32le(buf) != TRAIL_FOOTER_MAGIC)
		FOOTER_BAD("no footer magic");
	c.p += 4;
	if (!codec_get_varint(&c, &v) || v != t->version)
		FOOTER_BAD("footer version disagrees with the trailer's");
	f->version = (uint16_t) v;
	if (v >= 2 && v <= TDB_TRAIL_VERSION)
	{
		int			rc = v == 2 ? trail_footer2_decode(&c, buf, len, t, f, err) :
			trail_footer3_decode_head(&c, buf, len, t, f, err);

		if (rc < 0)
			tdb_trail_footer_release(f);
		return rc;
	}
	if ((why = trail_get_schema(&c, s, TDB_TRAIL_STRING)) != NULL)	/* version 1: no boolean */
		goto bad;
	if ((why = trail_get_lexicon(&c, f, arena, &arena_used)) != NULL)
		goto bad;

	/* trail index */
	if (!codec_get_varint(&c, &n) || n > codec_left(&c) / 8)
		FOOTER_BAD("bad trail count");
	f->ntrails = (uint32_t) n;
	f->trails = calloc(n ? n : 1, sizeof(TdbTrailInfo));
	if (f->trails == NULL)
		FOOTER_BAD(TRAIL_OOM);
	for (uint32_t i = 0; i < f->ntrails; i++)
	{
		TdbTrailInfo *ti = &f->trails[i];
		uint64_t	np;

		if (!trail_get_key(&c, s->id_type, &ti->key, arena, &arena_used))
			FOOTER_BAD("bad trail id");
		if (i > 0 && trail_key_cmp(s->id_type, &f->trails[i - 1].key, &ti->key) >= 0)
			FOOTER_BAD("trail ids not strictly ascending");
		if (!codec_get_varint(&c, &np) || np == 0 || np > UINT32_MAX - page ||
			!codec_get_varint(&c, &ti->nevents) ||
			!trail_get_zone(&c, &ti->tmin, &ti->tmax, &ti->xmin, &ti->ymin, &ti->xmax, &ti->ymax))
			FOOTER_BAD("bad trail entry");
		ti->first_page = page;
		ti->npages = (uint32_t) np;
		page += (uint32_t) np;
	}

	/* pages and zone maps */
	if (!codec_get_varint(&c, &n) || n != page || n > codec_left(&c) / 8)
		FOOTER_BAD("page count disagrees with the trail index");
	f->npages = (uint32_t) n;
	f->pages = calloc(n ? n : 1, sizeof(TdbTrailPageInfo));
	if (f->pages == NULL)
		FOOTER_BAD(TRAIL_OOM);
	{
		uint32_t	trail = 0;
		uint64_t	trail_events = 0;

		for (uint32_t i = 0; i < f->npages; i++)
		{
			TdbTrailPageInfo *pi = &f->pages[i];
			const TdbTrailInfo *ti;
			uint64_t	plen,
						pev;

			while (trail < f->ntrails && i >= f->trails[trail].first_page + f->trails[trail].npages)
				trail++;
			if (trail >= f->ntrails)
				FOOTER_BAD("page outside every trail");
			ti = &f->trails[trail];
			if (i == ti->first_page)
				trail_events = 0;
			if (!codec_get_varint(&c, &plen) || !codec_get_varint(&c, &pev) ||
				!get_page_zone(&c, ti, pi))
				FOOTER_BAD("bad page entry or page zone map outside its trail's");
			if (plen < TRAIL_PAGE_HEADER_SIZE || plen > TRAIL_PAGE_MAX_BYTES ||
				plen > t->footer_offset - offset)
				FOOTER_BAD("page length runs past the data region");
			if (pev == 0 || pev > plen)
				FOOTER_BAD("bad page event count");
			pi->offset = offset;
			pi->length = (uint32_t) plen;
			pi->nevents = (uint32_t) pev;
			pi->trail = trail;
			offset += plen;
			/* pruning by the trail's zone map must never hide a page's event */
			if (pi->tmin < ti->tmin || pi->tmax > ti->tmax || pi->xmin < ti->xmin ||
				pi->ymin < ti->ymin || pi->xmax > ti->xmax || pi->ymax > ti->ymax)
				FOOTER_BAD("page zone map outside its trail's");
			if (i > ti->first_page && pi->tmin < f->pages[i - 1].tmax)
				FOOTER_BAD("pages of a trail out of time order");
			trail_events += pev;
			if (i == ti->first_page + ti->npages - 1 && trail_events != ti->nevents)
				FOOTER_BAD("trail event count disagrees with its pages");
			f->nevents += pev;
		}
	}
	if (offset != t->footer_offset)
		FOOTER_BAD("pages do not fill the data region");
	if (!codec_get_varint(&c, &v) || v != f->nevents)
		FOOTER_BAD("event total disagrees with the pages");
	if (codec_left(&c) != 0)
		FOOTER_BAD("trailing bytes after the footer");
	return 0;

bad:
	tdb_trail_footer_release(f);
	return tdb_trail_fail(err, trail_why_code(why), "%s: %s (footer byte %zu of %zu)",
						  trail_footer_why(why), why, (size_t) (c.p - buf), len);
}

void
tdb_trail_footer_release(TdbTrailFooter *f)
{
	trail_footer3_release(f);
	free(f->strings);
	free(f->trails);
	free(f->pages);
	free(f->arena);
	free(f->arena2);
	f->arena2 = NULL;
	f->strings = NULL;
	f->trails = NULL;
	f->pages = NULL;
	f->arena = NULL;
}

/* ---- pages -------------------------------------------------------------- */

/*
 * Encode events [0, n) of one trail as a page.  Columns are stored one after
 * another: time, lon, lat as zigzag varint deltas, then each extra column
 * with a null bitmap when it has nulls.
 */
void
trail_page_encode(CodecBuf *b, uint32_t trail, uint32_t n, const int64_t *time,
				  const int32_t *lon, const int32_t *lat, int ncols,
				  const TdbTrailType *types, TrailColumnGetter get, void *arg)
{
	size_t		start = b->len;
	uint8_t		hdr[TRAIL_PAGE_HEADER_SIZE];
	uint64_t	prev;

	memset(hdr, 0, sizeof(hdr));
	codec_put_bytes(b, hdr, sizeof(hdr));

	prev = 0;
	for (uint32_t i = 0; i < n; i++)
	{
		codec_put_svarint(b, (int64_t) ((uint64_t) time[i] - prev));
		prev = (uint64_t) time[i];
	}
	for (int k = 0; k < 2; k++)
	{
		const int32_t *xs = k == 0 ? lon : lat;
		int64_t		p = 0;

		for (uint32_t i = 0; i < n; i++)
		{
			codec_put_svarint(b, (int64_t) xs[i] - p);
			p = xs[i];
		}
	}
	for (int c = 0; c < ncols; c++)
	{
		bool		nulls = false;
		int64_t		p = 0;

		for (uint32_t i = 0; i < n && !nulls; i++)
			nulls = get(arg, i, c, NULL);
		codec_put_u8(b, nulls ? 1 : 0);
		if (nulls)
		{
			for (uint32_t i = 0; i < n; i += 8)
			{
				uint8_t		byte = 0;

				for (uint32_t j = i; j < n && j < i + 8; j++)
					if (get(arg, j, c, NULL))
						byte |= (uint8_t) (1 << (j - i));
				codec_put_u8(b, byte);
			}
		}
		for (uint32_t i = 0; i < n; i++)
		{
			int64_t		bits;

			if (get(arg, i, c, &bits))
				continue;
			if (types[c] == TDB_TRAIL_FLOAT64)
			{
				uint8_t		le[8];

				codec_put_u64le(le, (uint64_t) bits);
				codec_put_bytes(b, le, 8);
			}
			else if (types[c] == TDB_TRAIL_STRING)
				codec_put_varint(b, (uint64_t) bits);
			else
			{
				codec_put_svarint(b, (int64_t) ((uint64_t) bits - (uint64_t) p));
				p = bits;
			}
		}
	}
	if (!b->ok)
		return;
	codec_put_u32le(b->data + start + 4, TRAIL_PAGE_MAGIC);
	codec_put_u32le(b->data + start + 8, trail);
	codec_put_u32le(b->data + start + 12, n);
	codec_put_u32le(b->data + start, tdb_crc32c(b->data + start + 4, b->len - start - 4));
}

#define PAGE_BAD(what) \
	do { why = (what); goto bad; } while (0)

int
tdb_trail_page_decode(const TdbTrailFooter *f, uint32_t pageno, const uint8_t *buf,
					  size_t len, TdbTrailPage *pg, TdbTrailError *err)
{
	return tdb_trail_page_decode_some(f, pageno, buf, len, false, 0, pg, err);
}

int
tdb_trail_page_decode_some(const TdbTrailFooter *f, uint32_t pageno, const uint8_t *buf,
						   size_t len, bool skip_position, uint64_t skip_columns,
						   TdbTrailPage *pg, TdbTrailError *err)
{
	const TdbTrailPageInfo *pi;
	const TdbTrailSchema *s = &f->schema;
	CodecCur	c;
	const char *why = NULL;
	uint32_t	n;
	uint64_t	prev;

	if (pageno >= f->npages)
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "page %u of %u", pageno, f->npages);
	if (f->version >= 2 && f->pages[pageno].chunk_len == NULL)	/* version 3: not loaded */
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "page %u: its footer entry is not loaded", pageno);
	if (f->version >= 2)
		return trail_page2_decode(f, pageno, buf, len, skip_position, skip_columns, pg, err);
	pi = &f->pages[pageno];
	if (len != pi->length || len < TRAIL_PAGE_HEADER_SIZE)
		return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT, "page %u: %zu bytes, footer says %u",
							  pageno, len, pi->length);
	if (codec_get_u32le(buf) != tdb_crc32c(buf + 4, len - 4))
		return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT,
							  "corrupted trail file: page %u checksum mismatch (offset %llu, %zu bytes)",
							  pageno, (unsigned long long) pi->offset, len);
	c.p = buf + TRAIL_PAGE_HEADER_SIZE;
	c.end = buf + len;
	n = codec_get_u32le(buf + 12);
	if (codec_get_u32le(buf + 4) != TRAIL_PAGE_MAGIC)
		PAGE_BAD("no page magic");
	if (codec_get_u32le(buf + 8) != pi->trail || n != pi->nevents)
		PAGE_BAD("page header disagrees with the footer");
	if (!trail_page_reserve(pg, n, s->ncolumns))
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory for page %u", pageno);
	pg->nevents = 0;

	prev = 0;
	for (uint32_t i = 0; i < n; i++)
	{
		int64_t		d;

		if (!codec_get_svarint(&c, &d))
			PAGE_BAD("truncated time column");
		prev += (uint64_t) d;
		pg->time[i] = (int64_t) prev;
		pg->trail[i] = pi->trail;
		if (pg->time[i] < pi->tmin || pg->time[i] > pi->tmax ||
			(i > 0 && pg->time[i] < pg->time[i - 1]))
			PAGE_BAD("time outside the page's zone map or out of order");
	}
	for (int k = 0; k < 2; k++)
	{
		int32_t    *xs = k == 0 ? pg->lon : pg->lat;
		int32_t		lo = k == 0 ? pi->xmin : pi->ymin;
		int32_t		hi = k == 0 ? pi->xmax : pi->ymax;
		int64_t		p = 0;

		for (uint32_t i = 0; i < n; i++)
		{
			int64_t		d;

			if (!codec_get_svarint(&c, &d) || d > INT32_MAX * 2LL || d < INT32_MIN * 2LL)
				PAGE_BAD("truncated coordinate column");
			p += d;
			if (p < lo || p > hi)
				PAGE_BAD("coordinate outside the page's zone map");
			xs[i] = (int32_t) p;
		}
	}
	for (int col = 0; col < s->ncolumns; col++)
	{
		TdbTrailValue *vals = pg->cols[col];
		uint8_t		flags;
		const uint8_t *bitmap = NULL;
		int64_t		p = 0;

		if (!codec_get_u8(&c, &flags) || flags > 1)
			PAGE_BAD("bad column flags");
		if (!trail_get_null_bitmap(&c, n, flags & 1, &bitmap))
			PAGE_BAD("truncated null bitmap");
		for (uint32_t i = 0; i < n; i++)
		{
			TdbTrailValue *v = &vals[i];

			trail_value_clear(v);
			if (bitmap && (bitmap[i / 8] >> (i % 8)) & 1)
			{
				v->isnull = true;
				continue;
			}
			if (s->columns[col].type == TDB_TRAIL_FLOAT64)
			{
				uint8_t		le[8];
				uint64_t	bits;

				if (!codec_get_bytes(&c, le, 8))
					PAGE_BAD("truncated float column");
				bits = codec_get_u64le(le);
				memcpy(&v->f, &bits, 8);
			}
			else if (s->columns[col].type == TDB_TRAIL_STRING)
			{
				uint64_t	id;

				if (!codec_get_varint(&c, &id) || id >= f->nstrings)
					PAGE_BAD("string id outside the lexicon");
				v->s = f->strings[id];
			}
			else
			{
				int64_t		d;

				if (!codec_get_svarint(&c, &d))
					PAGE_BAD("truncated integer column");
				p = (int64_t) ((uint64_t) p + (uint64_t) d);
				v->i = p;
			}
		}
	}
	if (codec_left(&c) != 0)
		PAGE_BAD("trailing bytes in the page");
	pg->nevents = n;
	return 0;

bad:
	pg->nevents = 0;
	return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT,
						  "corrupted trail file: page %u (offset %llu): %s",
						  pageno, (unsigned long long) pi->offset, why);
}
