/*
 * format2.c
 *	  Version 2 of the trail file's pages and footer (docs/trail-format.md):
 *	  a page is a row of chunks, one for the runs and times, one for the
 *	  positions and one per extra column, each with its own CRC, so a query
 *	  fetches only the chunks of the columns it uses; a page may hold runs of
 *	  several trails (the space-time order); the footer gives every trail's
 *	  page list and a summary of each extra column per trail and per page
 *	  (count, minimum, maximum), which answer aggregates without pages.
 *
 * The decoders trust nothing, as in format.c: every count is checked
 * against the bytes there before it sizes an allocation, page lists must
 * ascend inside the page count, chunk lengths must fill the page and pages
 * the data region, and a page's events must lie in its zone map and in their
 * trail's, and its columns must agree with the page's summaries.
 */
#include "format.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../checksum.h"

#define CHUNK_CRC_SIZE		4
#define CORE_MIN_SIZE		(CHUNK_CRC_SIZE + 4 + 1 + 1 + 1 + 1)
#define MAX_SCALE			15	/* decimal exponents of scaled values */

static const double pow10_tab[MAX_SCALE + 1] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15
};

static const int64_t ipow10_tab[MAX_SCALE + 1] = {
	1LL, 10LL, 100LL, 1000LL, 10000LL, 100000LL, 1000000LL, 10000000LL, 100000000LL,
	1000000000LL, 10000000000LL, 100000000000LL, 1000000000000LL, 10000000000000LL,
	100000000000000LL, 1000000000000000LL
};

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

static void
put_stats(CodecBuf *b, TdbTrailType type, const TdbTrailStats *st)
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

		codec_put_u8(b, (uint8_t) ((st->has_range ? 1 : 0) | (st->has_nan ? 2 : 0)));
		if (st->has_range)
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

static bool
get_stats(CodecCur *c, TdbTrailType type, uint64_t max_count, TdbTrailStats *st)
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

		if (!codec_get_u8(c, &fl) || fl == 0 || fl > 3)
			return false;
		st->has_range = fl & 1;
		st->has_nan = (fl & 2) != 0;
		if (st->has_range)
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

/* ---- pages --------------------------------------------------------------- */

/* Largest e <= 15 such that every value is a multiple of 10^e (18 if all 0). */
static int
common_exponent(const int64_t *v, uint32_t n, int stride)
{
	int			e = MAX_SCALE;

	for (uint32_t i = 0; i < n && e > 0; i++)
	{
		int64_t		x = v[(size_t) i * stride];

		while (e > 0 && x % ipow10_tab[e] != 0)
			e--;
	}
	return e;
}

/*
 * The smallest decimal exponent k such that every finite value of the
 * column is an integer s / 10^k that reads back bit for bit (s exact in a
 * double); -1 when there is none (then the values are stored raw).
 */
static int
float_scale(const TrailPage2In *in, int col)
{
	for (int k = 0; k <= 9; k++)
	{
		bool		ok = true;

		for (uint32_t i = 0; i < in->n && ok; i++)
		{
			int64_t		bits;
			double		v,
						s;

			if (in->get(in->arg, i, col, &bits))
				continue;
			memcpy(&v, &bits, 8);
			s = nearbyint(v * pow10_tab[k]);
			/* -0, NaN, infinities and values past 2^53 go raw */
			ok = isfinite(v) && !(v == 0 && signbit(v)) && fabs(s) < 9007199254740992.0 &&
				s / pow10_tab[k] == v;
		}
		if (ok)
			return k;
	}
	return -1;
}

static void
chunk_begin(CodecBuf *b, size_t *start)
{
	uint8_t		crc[CHUNK_CRC_SIZE] = {0};

	*start = b->len;
	codec_put_bytes(b, crc, sizeof(crc));
}

static uint32_t
chunk_end(CodecBuf *b, size_t start)
{
	if (!b->ok)
		return 0;
	codec_put_u32le(b->data + start, tdb_crc32c(b->data + start + CHUNK_CRC_SIZE,
												b->len - start - CHUNK_CRC_SIZE));
	return (uint32_t) (b->len - start);
}

void
trail_page2_encode(CodecBuf *b, const TrailPage2In *in, uint32_t *chunk_len,
				   TdbTrailPageInfo *pi)
{
	size_t		page_start = b->len,
				start;
	uint32_t	nruns = 0;
	uint8_t		magic[4];
	int			e;
	int64_t		prev;

	pi->tmin = INT64_MAX;
	pi->tmax = INT64_MIN;
	pi->xmin = pi->ymin = INT32_MAX;
	pi->xmax = pi->ymax = INT32_MIN;
	for (uint32_t i = 0; i < in->n; i++)
	{
		if (i == 0 || in->trail[i] != in->trail[i - 1])
			nruns++;
		if (in->time[i] < pi->tmin) pi->tmin = in->time[i];
		if (in->time[i] > pi->tmax) pi->tmax = in->time[i];
		if (in->lon[i] < pi->xmin) pi->xmin = in->lon[i];
		if (in->lon[i] > pi->xmax) pi->xmax = in->lon[i];
		if (in->lat[i] < pi->ymin) pi->ymin = in->lat[i];
		if (in->lat[i] > pi->ymax) pi->ymax = in->lat[i];
	}

	/* core: magic, n, runs, then times as multiples of 10^e microseconds */
	chunk_begin(b, &start);
	codec_put_u32le(magic, TRAIL_PAGE2_MAGIC);
	codec_put_bytes(b, magic, 4);
	codec_put_varint(b, in->n);
	codec_put_varint(b, nruns);
	for (uint32_t i = 0, last = 0; i < in->n;)
	{
		uint32_t	j = i;

		while (j < in->n && in->trail[j] == in->trail[i])
			j++;
		codec_put_varint(b, i == 0 ? in->trail[i] : in->trail[i] - last);
		codec_put_varint(b, j - i);
		last = in->trail[i];
		i = j;
	}
	e = common_exponent(in->time, in->n, 1);
	codec_put_u8(b, (uint8_t) e);
	prev = 0;
	for (uint32_t i = 0; i < in->n; i++)
	{
		int64_t		q = in->time[i] / ipow10_tab[e];

		codec_put_svarint(b, (int64_t) ((uint64_t) q - (uint64_t) prev));
		prev = q;
	}
	chunk_len[TRAIL_CHUNK_CORE] = chunk_end(b, start);

	/* positions: lon then lat deltas, multiples of 10^e fixed units */
	chunk_begin(b, &start);
	{
		int			el = MAX_SCALE;

		for (uint32_t i = 0; i < in->n && el > 0; i++)
		{
			while (el > 0 && (in->lon[i] % ipow10_tab[el] != 0 || in->lat[i] % ipow10_tab[el] != 0))
				el--;
		}
		if (el > 9)
			el = 9;
		codec_put_u8(b, (uint8_t) el);
		for (int k = 0; k < 2; k++)
		{
			const int32_t *xs = k == 0 ? in->lon : in->lat;

			prev = 0;
			for (uint32_t i = 0; i < in->n; i++)
			{
				int64_t		q = xs[i] / ipow10_tab[el];

				codec_put_svarint(b, q - prev);
				prev = q;
			}
		}
	}
	chunk_len[TRAIL_CHUNK_POSITION] = chunk_end(b, start);

	for (int c = 0; c < in->ncols; c++)
	{
		TdbTrailType type = in->types[c];
		uint32_t	nn = 0;
		int			scale = 0;
		uint8_t		acc = 0;
		int			nbits = 0;

		chunk_begin(b, &start);
		for (uint32_t i = 0; i < in->n; i++)
			if (!in->get(in->arg, i, c, NULL))
				nn++;
		if (type == TDB_TRAIL_FLOAT64)
			scale = float_scale(in, c) + 1;	/* 0: raw */
		codec_put_u8(b, (uint8_t) ((nn < in->n ? 1 : 0) | (scale << 1)));
		if (nn < in->n)
		{
			for (uint32_t i = 0; i < in->n; i += 8)
			{
				uint8_t		byte = 0;

				for (uint32_t j = i; j < in->n && j < i + 8; j++)
					if (in->get(in->arg, j, c, NULL))
						byte |= (uint8_t) (1 << (j - i));
				codec_put_u8(b, byte);
			}
		}
		prev = 0;
		for (uint32_t i = 0; i < in->n; i++)
		{
			int64_t		bits;

			if (in->get(in->arg, i, c, &bits))
				continue;
			if (type == TDB_TRAIL_FLOAT64 && scale == 0)
			{
				uint8_t		le[8];

				codec_put_u64le(le, (uint64_t) bits);
				codec_put_bytes(b, le, 8);
			}
			else if (type == TDB_TRAIL_FLOAT64)
			{
				double		v;
				int64_t		q;

				memcpy(&v, &bits, 8);
				q = (int64_t) nearbyint(v * pow10_tab[scale - 1]);
				codec_put_svarint(b, (int64_t) ((uint64_t) q - (uint64_t) prev));
				prev = q;
			}
			else if (type == TDB_TRAIL_STRING)
				codec_put_varint(b, (uint64_t) bits);
			else if (type == TDB_TRAIL_BOOL)
			{
				acc |= (uint8_t) ((bits ? 1 : 0) << nbits);
				if (++nbits == 8)
				{
					codec_put_u8(b, acc);
					acc = 0;
					nbits = 0;
				}
			}
			else
			{
				codec_put_svarint(b, (int64_t) ((uint64_t) bits - (uint64_t) prev));
				prev = bits;
			}
		}
		if (nbits > 0)
			codec_put_u8(b, acc);
		chunk_len[TRAIL_CHUNK_COLUMN0 + c] = chunk_end(b, start);
	}
	pi->length = (uint32_t) (b->len - page_start);
	pi->nevents = in->n;
	pi->trail = in->n > 0 && in->trail[0] == in->trail[in->n - 1] ? in->trail[0] : UINT32_MAX;
}

void
tdb_trail_chunk_range(const TdbTrailFooter *f, uint32_t pageno, int k, uint64_t *off,
					  uint32_t *len)
{
	const TdbTrailPageInfo *pi = &f->pages[pageno];
	uint64_t	o = pi->offset;

	for (int i = 0; i < k; i++)
		o += pi->chunk_len[i];
	*off = o;
	*len = pi->chunk_len[k];
}

#define PAGE_BAD(what) \
	do { why = (what); goto bad; } while (0)

/* Opens chunk k of the page: checks its CRC and positions c after it. */
static bool
chunk_open(const TdbTrailPageInfo *pi, const uint8_t *page, int k, CodecCur *c)
{
	size_t		off = 0;
	uint32_t	len = pi->chunk_len[k];

	for (int i = 0; i < k; i++)
		off += pi->chunk_len[i];
	if (codec_get_u32le(page + off) != tdb_crc32c(page + off + CHUNK_CRC_SIZE, len - CHUNK_CRC_SIZE))
		return false;
	c->p = page + off + CHUNK_CRC_SIZE;
	c->end = page + off + len;
	return true;
}

static bool
trail_has_page(const TdbTrailInfo *ti, uint32_t pageno)
{
	uint32_t	lo = 0,
				hi = ti->npages;

	while (lo < hi)
	{
		uint32_t	mid = lo + (hi - lo) / 2;

		if (ti->page_list[mid] == pageno)
			return true;
		if (ti->page_list[mid] < pageno)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

int
trail_page2_decode(const TdbTrailFooter *f, uint32_t pageno, const uint8_t *buf, size_t len,
				   bool skip_position, uint64_t skip_columns, TdbTrailPage *pg,
				   TdbTrailError *err)
{
	const TdbTrailPageInfo *pi = &f->pages[pageno];
	const TdbTrailSchema *s = &f->schema;
	const char *why = NULL;
	CodecCur	c;
	uint64_t	n,
				nruns;
	uint8_t		e;
	int64_t		prev;
	int			badchunk = 0;
	bool		multi;

	pg->nevents = 0;
	if (len != pi->length)
		return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT, "page %u: %zu bytes, footer says %u",
							  pageno, len, pi->length);
	if (!chunk_open(pi, buf, TRAIL_CHUNK_CORE, &c))
		PAGE_BAD("checksum mismatch in its runs and times");
	if (codec_left(&c) < 4 || codec_get_u32le(c.p) != TRAIL_PAGE2_MAGIC)
		PAGE_BAD("no page magic");
	c.p += 4;
	if (!codec_get_varint(&c, &n) || n != pi->nevents)
		PAGE_BAD("event count disagrees with the footer");
	if (!trail_page_reserve(pg, (uint32_t) n, s->ncolumns))
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory for page %u", pageno);
	if (!codec_get_varint(&c, &nruns) || nruns == 0 || nruns > n)
		PAGE_BAD("bad run count");
	{
		uint64_t	at = 0,
					trail = 0;

		for (uint64_t r = 0; r < nruns; r++)
		{
			uint64_t	d,
						cnt;
			const TdbTrailInfo *ti;

			if (!codec_get_varint(&c, &d) || !codec_get_varint(&c, &cnt) ||
				(r > 0 && d == 0) || d >= f->ntrails || trail + d >= f->ntrails ||
				cnt == 0 || cnt > n - at)
				PAGE_BAD("bad run");
			trail += d;
			ti = &f->trails[trail];
			/* every event must be reachable through its trail's page list */
			if (!trail_has_page(ti, pageno))
				PAGE_BAD("a run of a trail whose page list does not name the page");
			for (uint64_t i = at; i < at + cnt; i++)
				pg->trail[i] = (uint32_t) trail;
			at += cnt;
		}
		if (at != n)
			PAGE_BAD("runs do not add up to the event count");
	}
	if (!codec_get_u8(&c, &e) || e > MAX_SCALE)
		PAGE_BAD("bad time exponent");
	prev = 0;
	/*
	 * Events must lie in the page's zone map and in their trail's; a page of
	 * one trail has its zone map inside the trail's (the footer decoder
	 * checked), so only a page of several trails checks each event's trail.
	 */
	multi = pi->trail == UINT32_MAX;
	{
		const int64_t m = ipow10_tab[e],
					qmax = INT64_MAX / m,
					qmin = INT64_MIN / m;

		for (uint32_t i = 0; i < n; i++)
		{
			int64_t		d,
						q;

			if (!codec_get_svarint(&c, &d))
				PAGE_BAD("truncated time column");
			q = (int64_t) ((uint64_t) prev + (uint64_t) d);
			if (q > qmax || q < qmin)
				PAGE_BAD("time out of range");
			prev = q;
			pg->time[i] = q * m;
			if (pg->time[i] < pi->tmin || pg->time[i] > pi->tmax ||
				(multi && (pg->time[i] < f->trails[pg->trail[i]].tmin ||
						   pg->time[i] > f->trails[pg->trail[i]].tmax)))
				PAGE_BAD("time outside the page's or its trail's zone map");
			if (i > 0 && pg->trail[i] == pg->trail[i - 1] && pg->time[i] < pg->time[i - 1])
				PAGE_BAD("times of a trail out of order");
		}
	}
	if (codec_left(&c) != 0)
		PAGE_BAD("trailing bytes in the runs and times");

	if (!skip_position)
	{
		uint8_t		el;

		badchunk = TRAIL_CHUNK_POSITION;
		if (!chunk_open(pi, buf, TRAIL_CHUNK_POSITION, &c))
			PAGE_BAD("checksum mismatch in its positions");
		if (!codec_get_u8(&c, &el) || el > 9)
			PAGE_BAD("bad position exponent");
		for (int k = 0; k < 2; k++)
		{
			int32_t    *xs = k == 0 ? pg->lon : pg->lat;
			int32_t		lo = k == 0 ? pi->xmin : pi->ymin;
			int32_t		hi = k == 0 ? pi->xmax : pi->ymax;
			const int64_t m = ipow10_tab[el],
						pmax = INT32_MAX / m,
						pmin = INT32_MIN / m;
			int64_t		p = 0;

			for (uint32_t i = 0; i < n; i++)
			{
				int64_t		d,
							x;

				if (!codec_get_svarint(&c, &d) || d > INT32_MAX * 2LL || d < INT32_MIN * 2LL)
					PAGE_BAD("truncated coordinate column");
				p += d;
				if (p > pmax || p < pmin)
					PAGE_BAD("coordinate out of range");
				x = p * m;
				if (x < lo || x > hi)
					PAGE_BAD("coordinate outside the page's or its trail's zone map");
				if (multi)
				{
					const TdbTrailInfo *ti = &f->trails[pg->trail[i]];

					if (x < (k == 0 ? ti->xmin : ti->ymin) || x > (k == 0 ? ti->xmax : ti->ymax))
						PAGE_BAD("coordinate outside the page's or its trail's zone map");
				}
				xs[i] = (int32_t) x;
			}
		}
		if (codec_left(&c) != 0)
			PAGE_BAD("trailing bytes in the positions");
	}
	else
	{
		memset(pg->lon, 0, n * sizeof(int32_t));
		memset(pg->lat, 0, n * sizeof(int32_t));
	}

	for (int col = 0; col < s->ncolumns; col++)
	{
		TdbTrailType type = s->columns[col].type;
		TdbTrailValue *vals = pg->cols[col];
		uint8_t		flags;
		int			scale;
		const uint8_t *bitmap = NULL;
		const uint8_t *bools = NULL;
		uint32_t	nn = 0;
		int64_t		p = 0;

		if (col < 64 && (skip_columns >> col) & 1)
		{
			for (uint32_t i = 0; i < n; i++)
			{
				memset(&vals[i], 0, sizeof(vals[i]));
				vals[i].isnull = true;
			}
			continue;
		}
		badchunk = TRAIL_CHUNK_COLUMN0 + col;
		if (!chunk_open(pi, buf, badchunk, &c))
			PAGE_BAD("checksum mismatch in a column");
		if (!codec_get_u8(&c, &flags))
			PAGE_BAD("bad column flags");
		scale = flags >> 1;
		if (scale > 10 || (scale > 0 && type != TDB_TRAIL_FLOAT64))
			PAGE_BAD("bad column encoding");
		if (!trail_get_null_bitmap(&c, n, flags & 1, &bitmap))
			PAGE_BAD("truncated null bitmap");
		for (uint32_t i = 0; i < n; i++)
			if (!(bitmap && (bitmap[i / 8] >> (i % 8)) & 1))
				nn++;
		if (type == TDB_TRAIL_BOOL)
		{
			size_t		nb = (nn + 7) / 8;

			if (codec_left(&c) < nb)
				PAGE_BAD("truncated boolean column");
			bools = c.p;
			c.p += nb;
		}
		for (uint32_t i = 0, k = 0; i < n; i++)
		{
			TdbTrailValue *v = &vals[i];

			trail_value_clear(v);
			if (bitmap && (bitmap[i / 8] >> (i % 8)) & 1)
			{
				v->isnull = true;
				continue;
			}
			if (type == TDB_TRAIL_FLOAT64 && scale == 0)
			{
				uint8_t		le[8];
				uint64_t	bits;

				if (!codec_get_bytes(&c, le, 8))
					PAGE_BAD("truncated float column");
				bits = codec_get_u64le(le);
				memcpy(&v->f, &bits, 8);
			}
			else if (type == TDB_TRAIL_FLOAT64)
			{
				int64_t		d;

				if (!codec_get_svarint(&c, &d))
					PAGE_BAD("truncated float column");
				p = (int64_t) ((uint64_t) p + (uint64_t) d);
				if (p > (1LL << 53) || p < -(1LL << 53))
					PAGE_BAD("scaled float out of range");
				v->f = (double) p / pow10_tab[scale - 1];
			}
			else if (type == TDB_TRAIL_STRING)
			{
				uint64_t	id;

				if (!codec_get_varint(&c, &id) || id >= f->nstrings)
					PAGE_BAD("string id outside the lexicon");
				v->s = f->strings[id];
			}
			else if (type == TDB_TRAIL_BOOL)
			{
				v->i = (bools[k / 8] >> (k % 8)) & 1;
			}
			else
			{
				int64_t		d;

				if (!codec_get_svarint(&c, &d))
					PAGE_BAD("truncated integer column");
				p = (int64_t) ((uint64_t) p + (uint64_t) d);
				v->i = p;
			}
			k++;
		}
		if (codec_left(&c) != 0)
			PAGE_BAD("trailing bytes in a column");
	}
	pg->nevents = (uint32_t) n;
	return 0;

bad:
	pg->nevents = 0;
	if (badchunk >= TRAIL_CHUNK_COLUMN0)
		return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT,
							  "corrupted trail file: page %u (offset %llu), column %s: %s",
							  pageno, (unsigned long long) pi->offset,
							  s->columns[badchunk - TRAIL_CHUNK_COLUMN0].name, why);
	return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT,
						  "corrupted trail file: page %u (offset %llu): %s",
						  pageno, (unsigned long long) pi->offset, why);
}

/* ---- footer -------------------------------------------------------------- */

/*
 * Zone maps in the version-2 footer: times in units of 10^E microseconds
 * (E, the footer's time exponent, the largest that divides every zone
 * time: 6 for whole seconds), a trail's absolute, a page's relative to its
 * trail's when it holds one trail (non-negative offsets: it cannot reach
 * outside), else relative to the previous page's corner.
 */
static int
zone_exponent(const TdbTrailFooter *f)
{
	int			e = MAX_SCALE;

	for (uint32_t i = 0; i < f->ntrails && e > 0; i++)
		while (e > 0 && (f->trails[i].tmin % ipow10_tab[e] != 0 || f->trails[i].tmax % ipow10_tab[e] != 0))
			e--;
	for (uint32_t i = 0; i < f->npages && e > 0; i++)
		while (e > 0 && (f->pages[i].tmin % ipow10_tab[e] != 0 || f->pages[i].tmax % ipow10_tab[e] != 0))
			e--;
	return e;
}

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

/* tmin = a x q and tmax = (a + d) x q, both in int64 */
static bool
scaled_times(int64_t a, uint64_t d, int64_t q, int64_t *tmin, int64_t *tmax)
{
	__int128	lo = (__int128) a * q,
				hi = ((__int128) a + (__int128) d) * q;

	if (lo < INT64_MIN || hi > INT64_MAX)
		return false;
	*tmin = (int64_t) lo;
	*tmax = (int64_t) hi;
	return true;
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
		if (!scaled_times(a, dt, q, &p->tmin, &p->tmax))
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
	int			e = zone_exponent(f);
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
	codec_put_varint(b, 2);
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
			put_stats(b, s->columns[c].type, &t->stats[c]);
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
		FOOTER_BAD("out of memory");
	{
		/* page lists: <= len entries; summaries: <= len; chunk lengths: <= len */
		size_t		need = (len + 8) * (sizeof(uint32_t) * 2 + sizeof(TdbTrailStats)) + 64;

		f->arena2 = a2 = malloc(need);
		if (a2 == NULL)
			FOOTER_BAD("out of memory");
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
				!scaled_times(a, dt, q, &ti->tmin, &ti->tmax) ||
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
			if (!get_stats(c, s->columns[k].type, ti->nevents, &st[k]))
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
		FOOTER_BAD("out of memory");
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
			if (pev > plen)
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
			FOOTER_BAD("out of memory");
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
	return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT,
						  "corrupted trail file footer: %s (footer byte %zu of %zu)",
						  why, (size_t) (c->p - buf), len);
}
