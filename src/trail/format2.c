/*
 * format2.c
 *	  Version 2 of the trail file's footer and its column summaries
 *	  (docs/trail-format.md; the pages are page2.c's): the footer gives every trail's
 *	  page list and a summary of each extra column per trail and per page
 *	  (count, minimum, maximum), which answer aggregates without pages.
 *
 * The decoders trust nothing, as in format.c: every count is checked
 * against the bytes there before it sizes an allocation, page lists must
 * ascend inside the page count, chunk lengths must fill the page and pages
 * the data region, and a page's events must lie in its zone map and in their
 * trail's, and its columns must agree with the page's summaries.
 */
#include "format2.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../checksum.h"
#include "colenc.h"

/* ---- column summaries ---------------------------------------------------- */

/*
 * Values are folded in file order, and a tie replaces the kept value, as
 * PostgreSQL's float8larger/float8smaller keep the later of two equal
 * values: so a summary's -0 or 0 is the one max()/min() would return over
 * the same rows in file order.
 */
void
trail_stats_add(TdbTrailStats *st, TdbTrailType type, int64_t bits)
{
	if (type == TDB_TRAIL_FLOAT64)
	{
		double		v;

		memcpy(&v, &bits, 8);
		st->count++;
		if (isnan(v))
		{
			st->has_nan = true;
			return;
		}
		if (!st->has_range)
		{
			st->fmin = st->fmax = v;
			st->has_range = true;
			return;
		}
		if (!(st->fmax > v))
			st->fmax = v;
		if (!(st->fmin < v))
			st->fmin = v;
		return;
	}
	if (type == TDB_TRAIL_INT64 || type == TDB_TRAIL_BOOL)
	{
		if (st->count == 0 || bits < st->imin)
			st->imin = bits;
		if (st->count == 0 || bits > st->imax)
			st->imax = bits;
		st->has_range = true;
	}
	st->count++;
}

bool
trail_stats_equal(TdbTrailType type, const TdbTrailStats *a, const TdbTrailStats *b)
{
	if (a->count != b->count)
		return false;
	if (type == TDB_TRAIL_FLOAT64)
		return a->has_nan == b->has_nan && a->has_range == b->has_range &&
			(!a->has_range || (memcmp(&a->fmin, &b->fmin, 8) == 0 &&
							   memcmp(&a->fmax, &b->fmax, 8) == 0));
	if (type == TDB_TRAIL_INT64 || type == TDB_TRAIL_BOOL)
		return a->count == 0 || (a->imin == b->imin && a->imax == b->imax);
	return true;
}

void
trail_put_stats(CodecBuf *b, TdbTrailType type, const TdbTrailStats *st, bool scaled)
{
	codec_put_varint(b, st->count);
	if (st->count == 0)
		return;
	if (type == TDB_TRAIL_INT64)
	{
		codec_put_svarint(b, st->imin);
		codec_put_varint(b, (uint64_t) st->imax - (uint64_t) st->imin);
	}
	else if (type == TDB_TRAIL_BOOL)
		codec_put_u8(b, (uint8_t) (st->imin | (st->imax << 1)));
	else if (type == TDB_TRAIL_FLOAT64)
	{
		uint8_t		le[8];
		uint64_t	u;

		int64_t		mmin = 0,
					mmax = 0;
		int			k = scaled && st->has_range ? colenc_scale_pair(st->fmin, st->fmax, &mmin, &mmax) : -1;

		codec_put_u8(b, (uint8_t) ((st->has_range ? 1 : 0) | (st->has_nan ? 2 : 0) | (k + 1) << 2));
		if (k >= 0)
		{
			/* exact decimals: m / 10^k each, the max as its distance from the min */
			codec_put_svarint(b, mmin);
			codec_put_varint(b, (uint64_t) mmax - (uint64_t) mmin);
		}
		else if (st->has_range)
		{
			memcpy(&u, &st->fmin, 8);
			codec_put_u64le(le, u);
			codec_put_bytes(b, le, 8);
			memcpy(&u, &st->fmax, 8);
			codec_put_u64le(le, u);
			codec_put_bytes(b, le, 8);
		}
	}
}

bool
trail_get_stats(CodecCur *c, TdbTrailType type, uint64_t max_count, bool scaled, TdbTrailStats *st)
{
	memset(st, 0, sizeof(*st));
	if (!codec_get_varint(c, &st->count) || st->count > max_count)
		return false;
	if (st->count == 0)
		return true;
	if (type == TDB_TRAIL_INT64)
	{
		uint64_t	d;

		if (!codec_get_svarint(c, &st->imin) || !codec_get_varint(c, &d) ||
			d > (uint64_t) INT64_MAX - (uint64_t) st->imin)
			return false;
		st->imax = (int64_t) ((uint64_t) st->imin + d);
		st->has_range = true;
	}
	else if (type == TDB_TRAIL_BOOL)
	{
		uint8_t		u;

		if (!codec_get_u8(c, &u) || u > 3 || u == 1)	/* min 1 and max 0 */
			return false;
		st->imin = u & 1;
		st->imax = u >> 1;
		st->has_range = true;
	}
	else if (type == TDB_TRAIL_FLOAT64)
	{
		uint8_t		fl,
					le[8];
		uint64_t	u;

		int			k;

		if (!codec_get_u8(c, &fl) || (fl & 3) == 0 || fl >> 2 > (scaled ? COLENC_MAX_SCALE + 1 : 0))
			return false;
		st->has_range = fl & 1;
		st->has_nan = (fl & 2) != 0;
		k = (fl >> 2) - 1;
		if (k >= 0)
		{
			int64_t		m;
			uint64_t	d;

			/* a scale without a range, or a max past 2^53, is malformed */
			if (!st->has_range || !codec_get_svarint(c, &m) || !codec_get_varint(c, &d) ||
				d > (UINT64_C(1) << 54) || !colenc_unscale(m, k, &st->fmin) ||
				!colenc_unscale((int64_t) ((uint64_t) m + d), k, &st->fmax))
				return false;
		}
		else if (st->has_range)
		{
			if (!codec_get_bytes(c, le, 8))
				return false;
			u = codec_get_u64le(le);
			memcpy(&st->fmin, &u, 8);
			if (!codec_get_bytes(c, le, 8))
				return false;
			u = codec_get_u64le(le);
			memcpy(&st->fmax, &u, 8);
			if (isnan(st->fmin) || isnan(st->fmax) || st->fmin > st->fmax)
				return false;
		}
	}
	return true;
}


/* ---- footer -------------------------------------------------------------- */

/*
 * Zone maps in the version-2 footer: times in units of 10^E microseconds
 * (E, the footer's time exponent, the largest that divides every zone
 * time: 6 for whole seconds), a trail's absolute, a page's relative to its
 * trail's when it holds one trail (non-negative offsets: it cannot reach
 * outside), else relative to the previous page's corner.
 */
static void
put_page_zone2(CodecBuf *b, const TdbTrailPageInfo *p, const TdbTrailInfo *t,
			   const TdbTrailPageInfo *prev, int64_t q)
{
	if (t)
	{
		codec_put_varint(b, ((uint64_t) p->tmin - (uint64_t) t->tmin) / (uint64_t) q);
		codec_put_varint(b, ((uint64_t) p->tmax - (uint64_t) p->tmin) / (uint64_t) q);
		codec_put_varint(b, (uint64_t) ((int64_t) p->xmin - t->xmin));
		codec_put_varint(b, (uint64_t) ((int64_t) p->ymin - t->ymin));
	}
	else
	{
		/* modulo 2^64, as the decoder adds it back */
		codec_put_svarint(b, (int64_t) ((uint64_t) (p->tmin / q) - (uint64_t) (prev ? prev->tmin / q : 0)));
		codec_put_varint(b, ((uint64_t) p->tmax - (uint64_t) p->tmin) / (uint64_t) q);
		codec_put_svarint(b, (int64_t) p->xmin - (prev ? prev->xmin : 0));
		codec_put_svarint(b, (int64_t) p->ymin - (prev ? prev->ymin : 0));
	}
	codec_put_varint(b, (uint64_t) ((int64_t) p->xmax - p->xmin));
	codec_put_varint(b, (uint64_t) ((int64_t) p->ymax - p->ymin));
}

static bool
get_page_zone2(CodecCur *c, TdbTrailPageInfo *p, const TdbTrailInfo *t,
			   const TdbTrailPageInfo *prev, int64_t q)
{
	uint64_t	u0,
				dt,
				dx,
				dy;
	int64_t		x0,
				y0;

	if (t)
	{
		uint64_t	ux,
					uy;
		uint64_t	span = ((uint64_t) t->tmax - (uint64_t) t->tmin) / (uint64_t) q;

		if (!codec_get_varint(c, &u0) || !codec_get_varint(c, &dt) ||
			!codec_get_varint(c, &ux) || !codec_get_varint(c, &uy) ||
			!codec_get_varint(c, &dx) || !codec_get_varint(c, &dy))
			return false;
		/* non-negative offsets that stay inside the trail's zone map */
		if (u0 > span || dt > span - u0 ||
			ux > (uint64_t) ((int64_t) t->xmax - t->xmin) ||
			uy > (uint64_t) ((int64_t) t->ymax - t->ymin) ||
			dx > (uint64_t) ((int64_t) t->xmax - t->xmin) - ux ||
			dy > (uint64_t) ((int64_t) t->ymax - t->ymin) - uy)
			return false;
		p->tmin = (int64_t) ((uint64_t) t->tmin + u0 * (uint64_t) q);
		p->tmax = (int64_t) ((uint64_t) p->tmin + dt * (uint64_t) q);
		x0 = t->xmin + (int64_t) ux;
		y0 = t->ymin + (int64_t) uy;
	}
	else
	{
		int64_t		a,
					sx,
					sy;

		if (!codec_get_svarint(c, &a) || !codec_get_varint(c, &dt) ||
			!codec_get_svarint(c, &sx) || !codec_get_svarint(c, &sy) ||
			!codec_get_varint(c, &dx) || !codec_get_varint(c, &dy))
			return false;
		if (prev)
			a = (int64_t) ((uint64_t) a + (uint64_t) (prev->tmin / q));
		/* a span may exceed INT64_MAX (INT64_MIN .. INT64_MAX): scaled_times is exact */
		if (!trail_scaled_times(a, dt, q, &p->tmin, &p->tmax))
			return false;
		if (sx > 4LL * TRAIL_LON_MAX || sx < -4LL * TRAIL_LON_MAX ||
			sy > 4LL * TRAIL_LAT_MAX || sy < -4LL * TRAIL_LAT_MAX)
			return false;
		x0 = sx + (prev ? prev->xmin : 0);
		y0 = sy + (prev ? prev->ymin : 0);
	}
	if (x0 < -TRAIL_LON_MAX || x0 > TRAIL_LON_MAX || y0 < -TRAIL_LAT_MAX || y0 > TRAIL_LAT_MAX ||
		dx > (uint64_t) (TRAIL_LON_MAX - x0) || dy > (uint64_t) (TRAIL_LAT_MAX - y0))
		return false;
	p->xmin = (int32_t) x0;
	p->ymin = (int32_t) y0;
	p->xmax = (int32_t) (x0 + (int64_t) dx);
	p->ymax = (int32_t) (y0 + (int64_t) dy);
	return true;
}

void
trail_footer2_encode(CodecBuf *b, const TdbTrailFooter *f)
{
	const TdbTrailSchema *s = &f->schema;
	uint8_t		magic[4];
	int			nc = s->ncolumns;
	int			e = trail_zone_exponent(f);
	int64_t		q = ipow10_tab[e];
	uint32_t   *single = calloc(f->npages ? f->npages : 1, sizeof(uint32_t));

	if (single == NULL)
	{
		b->ok = false;
		return;
	}
	/* single[p]: 1 + the trail of a page named by one trail's list, else 0 */
	for (uint32_t i = 0; i < f->ntrails; i++)
		for (uint32_t k = 0; k < f->trails[i].npages; k++)
		{
			uint32_t	p = f->trails[i].page_list[k];

			single[p] = single[p] == 0 ? i + 1 : UINT32_MAX;
		}
	codec_put_u32le(magic, TRAIL_FOOTER_MAGIC);
	codec_put_bytes(b, magic, 4);
	codec_put_varint(b, f->version);
	trail_put_schema(b, s);
	codec_put_u8(b, (uint8_t) f->order);
	codec_put_varint(b, (uint64_t) f->bucket_us);
	codec_put_u8(b, (uint8_t) e);
	trail_put_lexicon(b, f);
	codec_put_varint(b, f->ntrails);
	for (uint32_t i = 0; i < f->ntrails; i++)
	{
		const TdbTrailInfo *t = &f->trails[i];

		trail_put_key(b, s->id_type, &t->key);
		codec_put_varint(b, t->nevents);
		codec_put_svarint(b, t->tmin / q);
		codec_put_varint(b, ((uint64_t) t->tmax - (uint64_t) t->tmin) / (uint64_t) q);
		codec_put_svarint(b, t->xmin);
		codec_put_svarint(b, t->ymin);
		codec_put_varint(b, (uint64_t) ((int64_t) t->xmax - t->xmin));
		codec_put_varint(b, (uint64_t) ((int64_t) t->ymax - t->ymin));
		codec_put_varint(b, t->npages);
		for (uint32_t k = 0; k < t->npages; k++)
			codec_put_varint(b, k == 0 ? t->page_list[0] : t->page_list[k] - t->page_list[k - 1] - 1);
		for (int c = 0; c < nc; c++)
			trail_put_stats(b, s->columns[c].type, &t->stats[c], false);
	}
	codec_put_varint(b, f->npages);
	for (uint32_t i = 0; i < f->npages; i++)
	{
		const TdbTrailPageInfo *p = &f->pages[i];

		codec_put_varint(b, p->nevents);
		for (int k = 0; k < 2 + nc; k++)
			codec_put_varint(b, p->chunk_len[k]);
		put_page_zone2(b, p,
					   single[i] != 0 && single[i] != UINT32_MAX ? &f->trails[single[i] - 1] : NULL,
					   i > 0 ? &f->pages[i - 1] : NULL, q);
	}
	codec_put_varint(b, f->nevents);
	free(single);
}

#define FOOTER_BAD(what) \
	do { why = (what); goto bad; } while (0)

/* Bump allocator over f->arena2, sized once from the footer's counts. */
static void *
arena2_take(char **cur, size_t n)
{
	void	   *p = *cur;

	*cur += (n + 7) & ~(size_t) 7;
	return p;
}

/*
 * Decodes a version-2 footer from after its version varint; f->arena (the
 * string arena, 2 x len + 1 bytes) is already allocated by the caller.
 */
int
trail_footer2_decode(CodecCur *c, const uint8_t *buf, size_t len, const TdbTrailTrailer *t,
					 TdbTrailFooter *f, TdbTrailError *err)
{
	TdbTrailSchema *s = &f->schema;
	const char *why = NULL;
	char	   *arena = f->arena;
	size_t		arena_used = 0;
	char	   *a2;
	uint64_t	n,
				v;
	uint8_t		u8;
	int			nc;
	uint64_t	list_total = 0;
	uint32_t   *refs = NULL;
	uint32_t   *single = NULL;
	int64_t		q;

	if ((why = trail_get_schema(c, s, TDB_TRAIL_BOOL)) != NULL)
		goto bad;
	nc = s->ncolumns;
	if (!codec_get_u8(c, &u8) || u8 > TDB_TRAIL_ORDER_SPACETIME)
		FOOTER_BAD("bad page order");
	f->order = (TdbTrailOrder) u8;
	if (!codec_get_varint(c, &v) || v > (uint64_t) INT64_MAX)
		FOOTER_BAD("bad time bucket");
	f->bucket_us = (int64_t) v;
	if (!codec_get_u8(c, &u8) || u8 > MAX_SCALE)
		FOOTER_BAD("bad zone map time exponent");
	q = ipow10_tab[u8];

	if ((why = trail_get_lexicon(c, f, arena, &arena_used)) != NULL)
		goto bad;

	/*
	 * Every trail entry takes at least 8 bytes and every page-list entry or
	 * summary at least one, so the counts below are bounded by len: one
	 * arena of a size known from len holds the lists, chunk lengths and
	 * summaries.
	 */
	if (!codec_get_varint(c, &n) || n > codec_left(c) / 8)
		FOOTER_BAD("bad trail count");
	f->ntrails = (uint32_t) n;
	f->trails = calloc(n ? n : 1, sizeof(TdbTrailInfo));
	if (f->trails == NULL)
		FOOTER_BAD(TRAIL_OOM);
	{
		/* page lists: <= len entries; summaries: <= len; chunk lengths: <= len */
		size_t		need = (len + 8) * (sizeof(uint32_t) * 2 + sizeof(TdbTrailStats)) + 64;

		f->arena2 = a2 = malloc(need);
		if (a2 == NULL)
			FOOTER_BAD(TRAIL_OOM);
	}
	for (uint32_t i = 0; i < f->ntrails; i++)
	{
		TdbTrailInfo *ti = &f->trails[i];
		uint64_t	np;
		uint32_t   *list;
		TdbTrailStats *st;

		if (!trail_get_key(c, s->id_type, &ti->key, arena, &arena_used))
			FOOTER_BAD("bad trail id");
		if (i > 0 && trail_key_cmp(s->id_type, &f->trails[i - 1].key, &ti->key) >= 0)
			FOOTER_BAD("trail ids not strictly ascending");
		if (!codec_get_varint(c, &ti->nevents) || ti->nevents == 0)
			FOOTER_BAD("bad trail entry");
		{
			int64_t		a,
						x0,
						y0;
			uint64_t	dt,
						dx,
						dy;

			if (!codec_get_svarint(c, &a) || !codec_get_varint(c, &dt) ||
				!trail_scaled_times(a, dt, q, &ti->tmin, &ti->tmax) ||
				!codec_get_svarint(c, &x0) || !codec_get_svarint(c, &y0) ||
				!codec_get_varint(c, &dx) || !codec_get_varint(c, &dy) ||
				x0 < -TRAIL_LON_MAX || x0 > TRAIL_LON_MAX || y0 < -TRAIL_LAT_MAX ||
				y0 > TRAIL_LAT_MAX || dx > (uint64_t) (TRAIL_LON_MAX - x0) ||
				dy > (uint64_t) (TRAIL_LAT_MAX - y0))
				FOOTER_BAD("bad trail zone map");
			ti->xmin = (int32_t) x0;
			ti->ymin = (int32_t) y0;
			ti->xmax = (int32_t) (x0 + (int64_t) dx);
			ti->ymax = (int32_t) (y0 + (int64_t) dy);
		}
		if (!codec_get_varint(c, &np) || np == 0 || np > codec_left(c) || np > UINT32_MAX)
			FOOTER_BAD("bad page count of a trail");
		list_total += np;
		list = arena2_take(&a2, np * sizeof(uint32_t));
		for (uint64_t k = 0; k < np; k++)
		{
			uint64_t	d;

			if (!codec_get_varint(c, &d) || d >= UINT32_MAX)
				FOOTER_BAD("bad page list");
			if (k == 0)
				list[k] = (uint32_t) d;
			else if (d >= (uint64_t) UINT32_MAX - list[k - 1] - 1)
				FOOTER_BAD("bad page list");
			else
				list[k] = list[k - 1] + 1 + (uint32_t) d;
		}
		ti->page_list = list;
		ti->npages = (uint32_t) np;
		ti->first_page = list[0];
		st = arena2_take(&a2, (size_t) nc * sizeof(TdbTrailStats));
		for (int k = 0; k < nc; k++)
			if (!trail_get_stats(c, s->columns[k].type, ti->nevents, false, &st[k]))
				FOOTER_BAD("bad column summary of a trail");
		ti->stats = st;
	}

	if (!codec_get_varint(c, &n) || n > codec_left(c) / 8 || n > UINT32_MAX)
		FOOTER_BAD("bad page count");
	f->npages = (uint32_t) n;
	f->pages = calloc(n ? n : 1, sizeof(TdbTrailPageInfo));
	refs = calloc(n ? n : 1, sizeof(uint32_t));
	single = calloc(n ? n : 1, sizeof(uint32_t));
	if (f->pages == NULL || refs == NULL || single == NULL)
		FOOTER_BAD(TRAIL_OOM);
	/* which trails name each page: every page by one at least */
	for (uint32_t i = 0; i < f->ntrails; i++)
		for (uint32_t k = 0; k < f->trails[i].npages; k++)
		{
			uint32_t	p = f->trails[i].page_list[k];

			if (p >= f->npages)
				FOOTER_BAD("a page list names a page past the last");
			refs[p]++;
			single[p] = i;
		}
	{
		uint64_t	offset = TDB_TRAIL_HEADER_SIZE;

		for (uint32_t i = 0; i < f->npages; i++)
		{
			TdbTrailPageInfo *pi = &f->pages[i];
			uint32_t   *cl = arena2_take(&a2, (size_t) (2 + nc) * sizeof(uint32_t));
			uint64_t	plen = 0,
						pev,
						d;

			if (refs[i] == 0)
				FOOTER_BAD("a page no trail's page list names");
			if (!codec_get_varint(c, &pev) || pev == 0 || pev > UINT32_MAX)
				FOOTER_BAD("bad page event count");
			for (int k = 0; k < 2 + nc; k++)
			{
				uint64_t	min = k == TRAIL_CHUNK_CORE ? CORE_MIN_SIZE :
					k == TRAIL_CHUNK_POSITION ? CHUNK_CRC_SIZE + 1 : CHUNK_CRC_SIZE + 1;

				if (!codec_get_varint(c, &d) || d < min || d > TRAIL_PAGE_MAX_BYTES)
					FOOTER_BAD("bad chunk length");
				cl[k] = (uint32_t) d;
				plen += d;
			}
			if (plen > TRAIL_PAGE_MAX_BYTES || plen > t->footer_offset - offset)
				FOOTER_BAD("page length runs past the data region");
			/* version 3 packs events into fewer bytes than events (constant columns) */
			if (pev > plen && (f->version < 3 || pev > TRAIL_V3_PAGE_MAX_EVENTS))
				FOOTER_BAD("bad page event count");
			if (!get_page_zone2(c, pi, refs[i] == 1 ? &f->trails[single[i]] : NULL,
								i > 0 ? &f->pages[i - 1] : NULL, q))
				FOOTER_BAD("bad page zone map");
			pi->offset = offset;
			pi->length = (uint32_t) plen;
			pi->nevents = (uint32_t) pev;
			pi->trail = refs[i] == 1 ? single[i] : UINT32_MAX;
			pi->chunk_len = cl;
			offset += plen;
			f->nevents += pev;
		}
		if (offset != t->footer_offset)
			FOOTER_BAD("pages do not fill the data region");
	}
	if (!codec_get_varint(c, &v) || v != f->nevents)
		FOOTER_BAD("event total disagrees with the pages");
	{
		uint64_t	sum = 0;

		for (uint32_t i = 0; i < f->ntrails; i++)
			sum += f->trails[i].nevents;
		if (sum != f->nevents)
			FOOTER_BAD("trail event counts disagree with the pages'");
	}
	if (codec_left(c) != 0)
		FOOTER_BAD("trailing bytes after the footer");
	(void) list_total;
	free(refs);
	free(single);
	refs = single = NULL;

	/*
	 * The arena was sized for the worst case (about 56 bytes a footer byte);
	 * a decoded footer is kept (the reader's footer cache), so it keeps only
	 * what it uses: moved to an exact allocation, its pointers with it.
	 */
	{
		char	   *old = f->arena2;
		size_t		used = (size_t) (a2 - old);
		char	   *nw = malloc(used ? used : 1);

		if (nw == NULL)
			FOOTER_BAD(TRAIL_OOM);
		memcpy(nw, old, used);
		for (uint32_t i = 0; i < f->ntrails; i++)
		{
			f->trails[i].page_list = (uint32_t *) (nw + ((const char *) f->trails[i].page_list - old));
			f->trails[i].stats = (TdbTrailStats *) (nw + ((const char *) f->trails[i].stats - old));
		}
		for (uint32_t i = 0; i < f->npages; i++)
			f->pages[i].chunk_len = (uint32_t *) (nw + ((const char *) f->pages[i].chunk_len - old));
		free(old);
		f->arena2 = nw;
		f->arena2_bytes = used;
	}
	return 0;

bad:
	free(refs);
	free(single);
	return tdb_trail_fail(err, trail_why_code(why), "%s: %s (footer byte %zu of %zu)",
						  trail_footer_why(why), why, (size_t) (c->p - buf), len);
}
