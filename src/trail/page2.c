/*
 * page2.c
 *	  The pages of trail format version 2 (docs/trail-format.md): a page is
 *	  a row of chunks, one for the runs and times, one for the positions and
 *	  one per extra column, each with its own CRC, so a query fetches only
 *	  the chunks of the columns it uses; a page may hold runs of several
 *	  trails (the space-time order).  Encoding, the chunk ranges, and the
 *	  decoder, which trusts nothing (see format2.c).
 */
#include "format2.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../checksum.h"
#include "colenc.h"

static const double pow10_tab[MAX_SCALE + 1] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15
};

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

/* rl[r]: the events of run r (events in a row of one trail) among trail[0, n) */
static void
run_lengths(const uint32_t *trail, uint32_t n, uint32_t *rl)
{
	for (uint32_t i = 0, r = 0; i < n; i++)
	{
		if (i > 0 && trail[i] != trail[i - 1])
			r++;
		rl[r] = i > 0 && trail[i] == trail[i - 1] ? rl[r] + 1 : 1;
	}
}

/* Null bitmap, bit i set when event i is NULL (both versions). */
static void
put_null_bitmap(CodecBuf *b, const TrailPage2In *in, int c)
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

/*
 * A version-3 column chunk after its CRC: the nulls byte (0 none, 1 a
 * bitmap follows, 2 every value NULL), then colenc.c's encoding of the nn
 * non-NULL values; rl: the page's run lengths (nruns), made each run's count
 * of them for colenc_put_runs.
 */
static void
encode_column3(CodecBuf *b, const TrailPage2In *in, int c, uint32_t nn, uint32_t *rl, uint32_t nruns)
{
	int64_t    *bits;
	uint32_t	k = 0;

	if (nn == 0)
	{
		codec_put_u8(b, 2);
		return;
	}
	codec_put_u8(b, nn < in->n ? 1 : 0);
	if (nn < in->n)
		put_null_bitmap(b, in, c);
	bits = malloc((size_t) nn * sizeof(int64_t));
	if (bits == NULL)
	{
		b->ok = false;
		return;
	}
	rl[0] = 0;
	for (uint32_t i = 0, r = 0; i < in->n; i++)
	{
		if (i > 0 && in->trail[i] != in->trail[i - 1])
			rl[++r] = 0;
		if (!in->get(in->arg, i, c, &bits[k]))
		{
			k++;
			rl[r]++;
		}
	}
	colenc_put_runs(b, in->types[c], bits, nn, in->version, false, rl, nruns);
	free(bits);
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
	int64_t    *words = NULL;	/* version 3: times, then positions */
	uint32_t   *rl = NULL;		/* version 4: values per run */

	if (in->version >= 3 && (words = malloc((in->n ? in->n : 1) * sizeof(int64_t))) == NULL)
		b->ok = false;
	if (in->version >= 3 && (rl = malloc((in->n ? in->n : 1) * sizeof(uint32_t))) == NULL)
		b->ok = false;
	if (!b->ok)
	{
		free(words);
		free(rl);
		pi->length = 0;
		return;
	}
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

		if (in->version >= 3)
			words[i] = q;
		else
			codec_put_svarint(b, (int64_t) ((uint64_t) q - (uint64_t) prev));
		prev = q;
	}
	/* version 3: the times, then lon and lat, as int64 columns of colenc.c */
	if (in->version >= 3)
	{
		run_lengths(in->trail, in->n, rl);
		colenc_put_runs(b, TDB_TRAIL_INT64, words, in->n, in->version, true, rl, nruns);
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

				if (in->version >= 3)
					words[i] = q;
				else
					codec_put_svarint(b, q - prev);
				prev = q;
			}
			if (in->version >= 3)
				colenc_put_runs(b, TDB_TRAIL_INT64, words, in->n, in->version, true, rl, nruns);
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
		if (in->version >= 3)
		{
			encode_column3(b, in, c, nn, rl, nruns);
			chunk_len[TRAIL_CHUNK_COLUMN0 + c] = chunk_end(b, start);
			continue;
		}
		if (type == TDB_TRAIL_FLOAT64)
			scale = float_scale(in, c) + 1;	/* 0: raw */
		codec_put_u8(b, (uint8_t) ((nn < in->n ? 1 : 0) | (scale << 1)));
		if (nn < in->n)
			put_null_bitmap(b, in, c);
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
	free(words);
	free(rl);
	pi->length = (uint32_t) (b->len - page_start);
	pi->nevents = in->n;
	pi->trail = in->n > 0 && in->trail[0] == in->trail[in->n - 1] ? in->trail[0] : UINT32_MAX;
}

void
tdb_trail_chunk_place(const TdbTrailFooter *f, uint32_t pageno, int k, uint64_t *off,
					  uint32_t *len, uint32_t *pos)
{
	const TdbTrailPageInfo *pi = &f->pages[pageno];
	uint32_t	o = 0;

	for (int i = 0; i < k; i++)
		o += pi->chunk_len[i];
	/* version 6: the chunk where its column's lie; else back to back from the page's offset */
	*off = pi->chunk_off ? pi->chunk_off[k] : pi->offset + o;
	*len = pi->chunk_len[k];
	if (pos)
		*pos = o;
}

void
tdb_trail_chunk_range(const TdbTrailFooter *f, uint32_t pageno, int k, uint64_t *off,
					  uint32_t *len)
{
	tdb_trail_chunk_place(f, pageno, k, off, len, NULL);
}

int
trail_page_ranges(const TdbTrailFooter *f, uint32_t pageno, bool need_position, uint64_t skip_columns,
				  TdbByteRange *out, uint32_t *pos)
{
	const TdbTrailPageInfo *pi = &f->pages[pageno];
	uint32_t	at[2 + TDB_TRAIL_MAX_COLUMNS];
	int			n = 0;

	if (pi->chunk_len == NULL)
	{
		out[0].off = pi->offset;
		out[0].len = pi->length;
		if (pos)
			pos[0] = 0;
		return 1;
	}
	for (int k = 0; k < 2 + f->schema.ncolumns; k++)
	{
		int			c = k - TRAIL_CHUNK_COLUMN0;
		uint64_t	off;
		uint32_t	len,
					p;

		if ((k == TRAIL_CHUNK_POSITION && !need_position) ||
			(c >= 0 && c < 64 && (skip_columns >> c) & 1))
			continue;
		tdb_trail_chunk_place(f, pageno, k, &off, &len, &p);
		if (n > 0 && out[n - 1].off + out[n - 1].len == off && at[n - 1] + out[n - 1].len == p)
			out[n - 1].len += len;
		else
		{
			out[n].off = off;
			out[n].len = len;
			at[n] = p;
			n++;
		}
	}
	if (pos)
		memcpy(pos, at, n * sizeof(uint32_t));
	return n;
}

bool
tdb_trail_page_gather(const TdbTrailFooter *f, uint32_t pageno, const uint8_t *data, uint64_t size,
					  uint8_t *dst)
{
	const TdbTrailPageInfo *pi = &f->pages[pageno];

	if (pi->chunk_len == NULL)
	{
		if (pi->offset > size || pi->length > size - pi->offset)
			return false;
		memcpy(dst, data + pi->offset, pi->length);
		return true;
	}
	for (int k = 0; k < 2 + f->schema.ncolumns; k++)
	{
		uint64_t	off;
		uint32_t	len,
					pos;

		tdb_trail_chunk_place(f, pageno, k, &off, &len, &pos);
		if (off > size || len > size - off || pos > pi->length || len > pi->length - pos)
			return false;
		memcpy(dst + pos, data + off, len);
	}
	return true;
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

/*
 * colenc_get for a page of a file of f's version: a version-3 page holds
 * only the codecs a version-3 reader knows (COLENC_PATCHED and COLENC_RUNS
 * came with version 4; RUNS is refused there anyway, having no runs).
 */
static const char *
page_colenc_get(const TdbTrailFooter *f, CodecCur *c, TdbTrailType type, uint32_t nn,
				int64_t *out, const uint32_t *runs, uint32_t nruns)
{
	if (codec_left(c) > 0 && (c->p[0] & 15) >= colenc_ncodecs(f->version) && (c->p[0] & 15) < COLENC_NCODECS)
		return "an encoding of a later format version";
	return colenc_get(c, type, nn, type == TDB_TRAIL_STRING ? f->nstrings : 0, out, runs, nruns);
}

/*
 * A version-3 column chunk after its CRC into vals (n events); words is
 * scratch of n entries; rl (version 4, else NULL): the page's nruns run
 * lengths, and nnrl scratch for each run's count of non-NULL values.  NULL
 * or what is wrong.
 */
static const char *
decode_column3(const TdbTrailFooter *f, CodecCur *c, uint32_t n, TdbTrailType type,
			   TdbTrailValue *vals, int64_t *words, const uint32_t *rl, uint32_t *nnrl,
			   uint32_t nruns)
{
	uint8_t		nulls;
	const uint8_t *bitmap = NULL;
	uint32_t	nn = 0;
	const char *why;

	if (!codec_get_u8(c, &nulls) || nulls > 2)
		return "bad nulls byte";
	if (nulls == 2)
	{
		for (uint32_t i = 0; i < n; i++)
		{
			trail_value_clear(&vals[i]);
			vals[i].isnull = true;
		}
		return codec_left(c) == 0 ? NULL : "trailing bytes in a column";
	}
	if (!trail_get_null_bitmap(c, n, nulls == 1, &bitmap))
		return "truncated null bitmap";
	if (bitmap == NULL)
		nn = n;
	else
		for (uint32_t i = 0; i < n; i++)
			nn += !((bitmap[i / 8] >> (i % 8)) & 1);
	if (nn == 0)
		return "a null bitmap of every value (nulls byte 2 says that)";
	if (rl != NULL)
		for (uint32_t r = 0, i = 0; r < nruns; r++)
		{
			uint32_t	nnr = rl[r];

			if (bitmap != NULL)
				for (uint32_t e = i + rl[r]; i < e; i++)
					nnr -= (bitmap[i / 8] >> (i % 8)) & 1;
			nnrl[r] = nnr;
		}
	if ((why = page_colenc_get(f, c, type, nn, words, rl ? nnrl : NULL, nruns)) != NULL)
		return why;
	if (codec_left(c) != 0)
		return "trailing bytes in a column";
	/* one loop per case: the type and the bitmap's presence do not change within a column */
	if (bitmap == NULL)
		switch (type)
		{
			case TDB_TRAIL_FLOAT64:
				for (uint32_t i = 0; i < n; i++)
				{
					trail_value_clear(&vals[i]);
					memcpy(&vals[i].f, &words[i], 8);
				}
				return NULL;
			case TDB_TRAIL_STRING:
				for (uint32_t i = 0; i < n; i++)
				{
					trail_value_clear(&vals[i]);
					vals[i].s = f->strings[words[i]];
				}
				return NULL;
			default:
				for (uint32_t i = 0; i < n; i++)
				{
					trail_value_clear(&vals[i]);
					vals[i].i = words[i];
				}
				return NULL;
		}
	for (uint32_t i = 0, k = 0; i < n; i++)
	{
		TdbTrailValue *v = &vals[i];

		trail_value_clear(v);
		if ((bitmap[i / 8] >> (i % 8)) & 1)
		{
			v->isnull = true;
			continue;
		}
		if (type == TDB_TRAIL_FLOAT64)
			memcpy(&v->f, &words[k], 8);
		else if (type == TDB_TRAIL_STRING)
			v->s = f->strings[words[k]];
		else
			v->i = words[k];
		k++;
	}
	return NULL;
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
	int64_t    *words = NULL;	/* version 3: a column's values */
	uint32_t   *rl = NULL;		/* version 4: the run lengths, then scratch */

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
		uint32_t	tlo = 0,
					thi = f->ntrails ? f->ntrails - 1 : 0;

		/*
		 * Version 3: the footer gives each page's trail range, by which the
		 * reader loaded the trails' entries and decided the page holds one
		 * trail (whose zone map then stands for its events'): every run
		 * must name a trail in it.
		 */
		if (f->lazy)
			trail_footer3_page_trails(f, pageno, &tlo, &thi);
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
			if (trail < tlo || trail > thi)
				PAGE_BAD("a run outside the page's trail range");
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
	if (f->version >= 3)
	{
		/* n words: times, then each position column and extra column in turn */
		if ((words = malloc(n * sizeof(int64_t))) == NULL ||
			(f->version >= 4 && (rl = malloc(2 * nruns * sizeof(uint32_t))) == NULL))
		{
			free(words);
			pg->nevents = 0;
			return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory for page %u", pageno);
		}
		if (rl != NULL)
			run_lengths(pg->trail, (uint32_t) n, rl);
		if ((why = page_colenc_get(f, &c, TDB_TRAIL_INT64, (uint32_t) n, words, rl, (uint32_t) nruns)) != NULL)
			goto bad;
	}
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

			if (words != NULL)
				q = words[i];
			else if (!codec_get_svarint(&c, &d))
				PAGE_BAD("truncated time column");
			else
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

			if (words != NULL &&
				(why = page_colenc_get(f, &c, TDB_TRAIL_INT64, (uint32_t) n, words, rl, (uint32_t) nruns)) != NULL)
				goto bad;
			for (uint32_t i = 0; i < n; i++)
			{
				int64_t		d,
							x;

				if (words != NULL)
					p = words[i];
				else if (!codec_get_svarint(&c, &d) || d > INT32_MAX * 2LL || d < INT32_MIN * 2LL)
					PAGE_BAD("truncated coordinate column");
				else
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
			pg->skipped |= UINT64_C(1) << col;	/* NULL, cols[col] untouched */
			continue;
		}
		badchunk = TRAIL_CHUNK_COLUMN0 + col;
		if (!chunk_open(pi, buf, badchunk, &c))
			PAGE_BAD("checksum mismatch in a column");
		if (f->version >= 3)
		{
			if ((why = decode_column3(f, &c, (uint32_t) n, type, vals, words, rl,
									  rl ? rl + nruns : NULL, (uint32_t) nruns)) != NULL)
				goto bad;
			continue;
		}
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
	free(words);
	free(rl);
	pg->nevents = (uint32_t) n;
	return 0;

bad:
	free(words);
	free(rl);
	pg->nevents = 0;
	/* out of memory is not damage: the same words, without "corrupted" */
	if (badchunk >= TRAIL_CHUNK_COLUMN0)
		return tdb_trail_fail(err, trail_why_code(why), "%strail file: page %u (offset %llu), column %s: %s",
							  trail_why_code(why) == TDB_TRAIL_ENOMEM ? "" : "corrupted ", pageno,
							  (unsigned long long) pi->offset, s->columns[badchunk - TRAIL_CHUNK_COLUMN0].name, why);
	return tdb_trail_fail(err, trail_why_code(why), "%strail file: page %u (offset %llu): %s",
						  trail_why_code(why) == TDB_TRAIL_ENOMEM ? "" : "corrupted ", pageno,
						  (unsigned long long) pi->offset, why);
}
