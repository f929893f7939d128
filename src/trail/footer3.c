/*
 * footer3.c
 *	  Version 3 of the trail file's footer (docs/trail-format.md, "Version 3:
 *	  footer"): a small head, read with the trailer, and chunks read only
 *	  when a query needs them.
 *
 * The head holds the counts, the schema, the whole file's zone map and
 * column summaries, and two directories: one entry per chunk of K trail
 * entries (its first trail id, length, CRC, events and zone map) and one
 * per chunk of P page entries (length, CRC, page bytes, events, zone map).
 * So count(*) and whole-file aggregates need the head alone, one trail's
 * lookup a binary search of the directory, its one trail chunk and the page
 * chunks of its pages, and a time or box query only the page chunks whose
 * zone maps meet it.
 *
 * Nothing is trusted: the head's CRC is the trailer's, every chunk's CRC is
 * in the head and checked before the chunk is parsed, every count is checked
 * against the bytes that hold it before it sizes an allocation, and an entry
 * must lie inside its chunk's zone map (a lying directory would hide events).
 * A chunk that fails leaves its entries zeroed and unloaded.
 */
#include "footer3.h"

#include <stdlib.h>
#include <string.h>

#include "../checksum.h"

/* ---- encoding ---------------------------------------------------------------- */

/* b += a, a summary of later values (so a tie keeps b's, as a fold in this order) */
static void
stats_combine(TdbTrailType type, TdbTrailStats *acc, const TdbTrailStats *b)
{
	if (b->count == 0)
		return;
	if (type == TDB_TRAIL_FLOAT64)
	{
		acc->has_nan |= b->has_nan;
		if (b->has_range)
		{
			if (!acc->has_range || !(acc->fmax > b->fmax))
				acc->fmax = b->fmax;
			if (!acc->has_range || !(acc->fmin < b->fmin))
				acc->fmin = b->fmin;
			acc->has_range = true;
		}
	}
	else if (type == TDB_TRAIL_INT64 || type == TDB_TRAIL_BOOL)
	{
		if (acc->count == 0 || b->imin < acc->imin)
			acc->imin = b->imin;
		if (acc->count == 0 || b->imax > acc->imax)
			acc->imax = b->imax;
		acc->has_range = true;
	}
	acc->count += b->count;
}

/* The union of zone maps (a directory entry's, the file's), folded one entry at a time. */
typedef struct ZoneAcc
{
	int64_t		tmin,
				tmax;
	int32_t		xmin,
				ymin,
				xmax,
				ymax;
} ZoneAcc;

static void
zone_init(ZoneAcc *a)
{
	a->tmin = INT64_MAX;
	a->tmax = INT64_MIN;
	a->xmin = a->ymin = INT32_MAX;
	a->xmax = a->ymax = INT32_MIN;
}

static void
zone_add(ZoneAcc *a, int64_t tmin, int64_t tmax, int32_t xmin, int32_t ymin, int32_t xmax, int32_t ymax)
{
	a->tmin = tmin < a->tmin ? tmin : a->tmin;
	a->tmax = tmax > a->tmax ? tmax : a->tmax;
	a->xmin = xmin < a->xmin ? xmin : a->xmin;
	a->ymin = ymin < a->ymin ? ymin : a->ymin;
	a->xmax = xmax > a->xmax ? xmax : a->xmax;
	a->ymax = ymax > a->ymax ? ymax : a->ymax;
}

static void
put_zone_acc(CodecBuf *b, int64_t q, const ZoneAcc *a)
{
	put_zone3(b, q, a->tmin, a->tmax, a->xmin, a->ymin, a->xmax, a->ymax);
}

static void
put_crc_u32(CodecBuf *b, uint32_t v)
{
	uint8_t		le[4];

	codec_put_u32le(le, v);
	codec_put_bytes(b, le, 4);
}

void
trail_footer3_encode(CodecBuf *out, uint64_t base, const TdbTrailFooter *f, TdbTrailTrailer *t)
{
	const TdbTrailSchema *s = &f->schema;
	int			nc = s->ncolumns;
	int			e = trail_zone_exponent(f);
	int64_t		q = ipow10_tab[e];
	uint32_t	kt = f->ntrails / DIR_MAX + 1 > ENTRIES_PER_CHUNK ? f->ntrails / DIR_MAX + 1 : ENTRIES_PER_CHUNK,
				kp = f->npages / DIR_MAX + 1 > ENTRIES_PER_CHUNK ? f->npages / DIR_MAX + 1 : ENTRIES_PER_CHUNK;
	uint32_t	ntc = (uint32_t) (((uint64_t) f->ntrails + kt - 1) / kt),
				npc = (uint32_t) (((uint64_t) f->npages + kp - 1) / kp);
	uint32_t   *tlo = malloc((f->npages + 1) * sizeof(uint32_t)),
			   *thi = malloc((f->npages + 1) * sizeof(uint32_t));
	bool		apart = f->version >= 5;
	uint32_t	nsc = apart ? ntc * (uint32_t) nc : 0;	/* summary chunks, column by column */
	uint64_t   *slen = calloc((size_t) nsc + ntc + npc + 1, sizeof(uint64_t));
	uint64_t   *clen = slen ? slen + nsc : NULL;	/* trail chunks, then page chunks */
	uint32_t   *ccrc = calloc((size_t) ntc + npc + 1, sizeof(uint32_t));
	TdbTrailStats whole[TDB_TRAIL_MAX_COLUMNS];
	CodecBuf	h;
	uint8_t		magic[4];
	size_t		start;
	uint64_t	lex_len = 0;
	uint32_t	lex_crc = 0;

	codec_buf_init(&h);
	if (tlo == NULL || thi == NULL || clen == NULL || ccrc == NULL)
	{
		out->ok = false;
		goto done;
	}
	for (uint32_t p = 0; p < f->npages; p++)
	{
		tlo[p] = UINT32_MAX;
		thi[p] = 0;
	}
	for (uint32_t i = 0; i < f->ntrails; i++)
		for (uint32_t k = 0; k < f->trails[i].npages; k++)
		{
			uint32_t	p = f->trails[i].page_list[k];

			tlo[p] = i < tlo[p] ? i : tlo[p];
			thi[p] = i > thi[p] ? i : thi[p];
		}

	/*
	 * Version 5: the summaries first, a chunk per column and trail chunk, a
	 * column's chunks together (an aggregate of one column reads one run of
	 * them), the trail chunks after them (nearer the head: a scan that needs
	 * trail entries but no summaries reads the chunks down from the tail).
	 */
	for (uint32_t k = 0; k < nsc; k++)
	{
		int			c = (int) (k / ntc);
		uint32_t	j = k % ntc;

		start = out->len;
		for (uint32_t i = j * kt; i < f->ntrails && i < (j + 1) * kt; i++)
			trail_put_stats(out, s->columns[c].type, &f->trails[i].stats[c], true);
		if (!out->ok)
			goto done;
		/* its own CRC last: the head gives a length only (a byte or two, not five) */
		put_crc_u32(out, tdb_crc32c(out->data + start, out->len - start));
		slen[k] = out->len - start;
	}
	/* trail chunks */
	for (uint32_t j = 0; j < ntc; j++)
	{
		int64_t		base[3] = {0, 0, 0};

		start = out->len;
		for (uint32_t i = j * kt; i < f->ntrails && i < (j + 1) * kt; i++)
		{
			const TdbTrailInfo *ti = &f->trails[i];

			/* version 5: an int id after the first as its gap minus one, the zone map relative */
			if (apart && s->id_type == TDB_TRAIL_INT64 && i > j * kt)
				codec_put_varint(out, (uint64_t) ti->key.i - (uint64_t) f->trails[i - 1].key.i - 1);
			else
				trail_put_key(out, s->id_type, &ti->key);
			codec_put_varint(out, ti->nevents);
			if (apart)
				put_zone3_rel(out, q, base, ti->tmin, ti->tmax, ti->xmin, ti->ymin, ti->xmax, ti->ymax);
			else
				put_zone3(out, q, ti->tmin, ti->tmax, ti->xmin, ti->ymin, ti->xmax, ti->ymax);
			codec_put_varint(out, ti->npages);
			for (uint32_t k = 0; k < ti->npages; k++)
				codec_put_varint(out, k == 0 ? ti->page_list[0] : ti->page_list[k] - ti->page_list[k - 1] - 1);
			for (int c = 0; !apart && c < nc; c++)
				trail_put_stats(out, s->columns[c].type, &ti->stats[c], true);
		}
		if (!out->ok)
			goto done;
		clen[j] = out->len - start;
		ccrc[j] = tdb_crc32c(out->data + start, out->len - start);
	}
	/* page chunks */
	for (uint32_t j = 0; j < npc; j++)
	{
		int64_t		base[3] = {0, 0, 0},
					plo = 0;

		start = out->len;
		for (uint32_t i = j * kp; i < f->npages && i < (j + 1) * kp; i++)
		{
			const TdbTrailPageInfo *p = &f->pages[i];

			codec_put_varint(out, p->nevents);
			for (int k = 0; k < 2 + nc; k++)
				codec_put_varint(out, p->chunk_len[k]);
			codec_put_svarint(out, (int64_t) tlo[i] - plo);
			codec_put_varint(out, thi[i] - tlo[i]);
			plo = tlo[i];
			put_zone3_rel(out, q, base, p->tmin, p->tmax, p->xmin, p->ymin, p->xmax, p->ymax);
		}
		if (!out->ok)
			goto done;
		clen[ntc + j] = out->len - start;
		ccrc[ntc + j] = tdb_crc32c(out->data + start, out->len - start);
	}
	/* the lexicon */
	if (f->nstrings > 0)
	{
		start = out->len;
		trail_put_lexicon(out, f);
		if (!out->ok)
			goto done;
		lex_len = out->len - start;
		lex_crc = tdb_crc32c(out->data + start, lex_len);
	}

	/* the head */
	codec_put_u32le(magic, TRAIL_FOOTER_MAGIC);
	codec_put_bytes(&h, magic, 4);
	codec_put_varint(&h, f->version);
	trail_put_schema(&h, s);
	codec_put_u8(&h, (uint8_t) f->order);
	codec_put_varint(&h, (uint64_t) f->bucket_us);
	codec_put_u8(&h, (uint8_t) e);
	codec_put_varint(&h, f->data_end);
	codec_put_varint(&h, f->nevents);
	codec_put_varint(&h, f->ntrails);
	codec_put_varint(&h, f->npages);
	codec_put_varint(&h, f->nstrings);
	if (f->nstrings > 0)
	{
		codec_put_varint(&h, lex_len);
		put_crc_u32(&h, lex_crc);
	}
	if (f->ntrails > 0)
	{
		ZoneAcc		za;

		zone_init(&za);
		memset(whole, 0, sizeof(whole));
		for (uint32_t i = 0; i < f->ntrails; i++)
		{
			const TdbTrailInfo *ti = &f->trails[i];

			zone_add(&za, ti->tmin, ti->tmax, ti->xmin, ti->ymin, ti->xmax, ti->ymax);
			for (int c = 0; c < nc; c++)
				stats_combine(s->columns[c].type, &whole[c], &ti->stats[c]);
		}
		put_zone_acc(&h, q, &za);
		trail_put_key(&h, s->id_type, &f->trails[f->ntrails - 1].key);	/* the last id */
		for (int c = 0; c < nc; c++)
			trail_put_stats(&h, s->columns[c].type, &whole[c], true);
	}
	codec_put_varint(&h, kt);
	codec_put_varint(&h, kp);
	for (uint32_t k = 0; k < nsc; k++)
		codec_put_varint(&h, slen[k]);
	for (uint32_t j = 0; j < ntc; j++)
	{
		uint32_t	a = j * kt,
					b = a + kt < f->ntrails ? a + kt : f->ntrails;
		ZoneAcc		za;
		uint64_t	ev = 0;

		zone_init(&za);
		for (uint32_t i = a; i < b; i++)
		{
			const TdbTrailInfo *ti = &f->trails[i];

			zone_add(&za, ti->tmin, ti->tmax, ti->xmin, ti->ymin, ti->xmax, ti->ymax);
			ev += ti->nevents;
		}
		trail_put_key(&h, s->id_type, &f->trails[a].key);
		codec_put_varint(&h, clen[j]);
		put_crc_u32(&h, ccrc[j]);
		codec_put_varint(&h, ev);
		put_zone_acc(&h, q, &za);
	}
	for (uint32_t j = 0; j < npc; j++)
	{
		uint32_t	a = j * kp,
					b = a + kp < f->npages ? a + kp : f->npages;
		ZoneAcc		za;
		uint64_t	ev = 0,
					bytes = 0;

		zone_init(&za);
		for (uint32_t i = a; i < b; i++)
		{
			const TdbTrailPageInfo *p = &f->pages[i];

			zone_add(&za, p->tmin, p->tmax, p->xmin, p->ymin, p->xmax, p->ymax);
			ev += p->nevents;
			bytes += p->length;
		}
		codec_put_varint(&h, clen[ntc + j]);
		put_crc_u32(&h, ccrc[ntc + j]);
		if (f->version >= 6)
			/* pages column-major: the bytes of each kind of chunk of its pages, which place them */
			for (int k = 0; k < 2 + nc; k++)
			{
				uint64_t	kb = 0;

				for (uint32_t i = a; i < b; i++)
					kb += f->pages[i].chunk_len[k];
				codec_put_varint(&h, kb);
			}
		else
			codec_put_varint(&h, bytes);
		codec_put_varint(&h, ev);
		put_zone_acc(&h, q, &za);
	}
	if (!h.ok)
	{
		out->ok = false;
		goto done;
	}
	t->footer_offset = base + out->len;
	t->footer_length = h.len;
	t->footer_crc = tdb_crc32c(h.data, h.len);
	codec_put_bytes(out, h.data, h.len);

done:
	codec_buf_free(&h);
	free(tlo);
	free(thi);
	free(slen);
	free(ccrc);
}

/* ---- the head ------------------------------------------------------------------ */

#define HEAD_BAD(what) \
	do { why = (what); goto bad; } while (0)

static bool
get_crc_u32(CodecCur *c, uint32_t *v)
{
	uint8_t		le[4];

	if (!codec_get_bytes(c, le, 4))
		return false;
	*v = codec_get_u32le(le);
	return true;
}

/*
 * Version 5's summary directory: a length per column and trail chunk
 * (column by column; each chunk ends with its own CRC), the chunks from *at
 * on; a summary takes a byte at least.  Their entry ranges are the trail
 * chunks'.
 */
static const char *
decode_sums_dir(CodecCur *c, const TdbTrailFooter *f, F3Lazy *z, uint64_t region, uint64_t *at)
{
	uint64_t	ntc = (f->ntrails + (uint64_t) z->per[TRAIL3_TRAILS] - 1) / z->per[TRAIL3_TRAILS];
	uint64_t	n = ntc * (uint64_t) f->schema.ncolumns;

	if (n > codec_left(c))		/* a varint length each */
		return "bad summary chunk count";
	if ((z->chunks[TRAIL3_SUMS] = calloc(n, sizeof(F3Chunk))) == NULL)
		return TRAIL_OOM;
	z->nchunks[TRAIL3_SUMS] = (uint32_t) n;
	for (uint64_t k = 0; k < n; k++)
	{
		F3Chunk    *ch = &z->chunks[TRAIL3_SUMS][k];
		uint64_t	j = k % ntc;

		ch->first = (uint32_t) (j * z->per[TRAIL3_TRAILS]);
		ch->count = f->ntrails - ch->first < z->per[TRAIL3_TRAILS] ?
			f->ntrails - ch->first : z->per[TRAIL3_TRAILS];
		/* a summary takes a byte at least, and the chunk's CRC four */
		if (!codec_get_varint(c, &ch->len) || ch->len > region - (*at - f->data_end) ||
			ch->len < (uint64_t) ch->count + 4)
			return "bad summary chunk length";
		ch->off = *at;
		*at += ch->len;
	}
	return NULL;
}

int
trail_footer3_decode_head(CodecCur *c, const uint8_t *buf, size_t len, const TdbTrailTrailer *t,
						  TdbTrailFooter *f, TdbTrailError *err)
{
	TdbTrailSchema *s = &f->schema;
	const char *why = NULL;
	F3Lazy	   *z;
	uint64_t	v,
				ntr,
				npg,
				nstr,
				region,
				at;
	uint8_t		u8;
	int			nc;
	size_t		arena_used = 0;

	if ((z = calloc(1, sizeof(*z))) == NULL)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory for a footer");
	pthread_mutex_init(&z->lock, NULL);
	f->lazy = z;
	if ((why = trail_get_schema(c, s, TDB_TRAIL_BOOL)) != NULL)
		goto bad;
	nc = s->ncolumns;
	if (!codec_get_u8(c, &u8) || u8 > TDB_TRAIL_ORDER_SPACETIME)
		HEAD_BAD("bad page order");
	f->order = (TdbTrailOrder) u8;
	if (!codec_get_varint(c, &v) || v > (uint64_t) INT64_MAX)
		HEAD_BAD("bad time bucket");
	f->bucket_us = (int64_t) v;
	if (!codec_get_u8(c, &u8) || u8 > MAX_SCALE)
		HEAD_BAD("bad zone map time exponent");
	z->q = ipow10_tab[u8];
	if (!codec_get_varint(c, &v) || v < TDB_TRAIL_HEADER_SIZE || v > t->footer_offset)
		HEAD_BAD("bad end of the pages");
	f->data_end = v;
	region = t->footer_offset - f->data_end;	/* chunks and lexicon */
	if (!codec_get_varint(c, &f->nevents) || !codec_get_varint(c, &ntr) ||
		!codec_get_varint(c, &npg) || !codec_get_varint(c, &nstr))
		HEAD_BAD("bad counts");
	/* every trail and page entry takes at least 8 bytes of the region, a string one */
	if (ntr > region / 8 || npg > region / 8 || nstr > region || npg > f->nevents ||
		ntr > UINT32_MAX || npg > UINT32_MAX || nstr > UINT32_MAX ||
		ntr > f->nevents || (f->nevents > 0) != (ntr > 0) || (ntr > 0) != (npg > 0) ||
		npg > (f->data_end - TDB_TRAIL_HEADER_SIZE) / CORE_MIN_SIZE)
		HEAD_BAD("bad counts");
	f->ntrails = (uint32_t) ntr;
	f->npages = (uint32_t) npg;
	z->nstrings = (uint32_t) nstr;
	if (nstr > 0 && (!codec_get_varint(c, &z->lex_len) || z->lex_len > region ||
					 z->lex_len < 1 + nstr || !get_crc_u32(c, &z->lex_crc)))
		HEAD_BAD("bad lexicon");
	if ((z->whole_stats = calloc(nc ? nc : 1, sizeof(TdbTrailStats))) == NULL ||
		(z->head_arena = malloc(2 * len + 1)) == NULL)
		HEAD_BAD(TRAIL_OOM);
	f->whole.stats = z->whole_stats;
	f->whole.nevents = f->nevents;
	f->whole.npages = f->npages;
	if (ntr > 0)
	{
		int32_t		box[4];

		if (!get_zone3(c, z->q, NULL, &f->whole.tmin, &f->whole.tmax, box))
			HEAD_BAD("bad zone map of the file");
		f->whole.xmin = box[0];
		f->whole.ymin = box[1];
		f->whole.xmax = box[2];
		f->whole.ymax = box[3];
		if (!trail_get_key(c, s->id_type, &f->whole_last, z->head_arena, &arena_used))
			HEAD_BAD("bad last trail id");
		for (int k = 0; k < nc; k++)
			if (!trail_get_stats(c, s->columns[k].type, f->nevents, true, &z->whole_stats[k]))
				HEAD_BAD("bad column summary of the file");
		f->has_whole = true;
	}
	if (!codec_get_varint(c, &v) || v == 0 || v > UINT32_MAX)
		HEAD_BAD("bad trails per chunk");
	z->per[TRAIL3_TRAILS] = (uint32_t) v;
	if (!codec_get_varint(c, &v) || v == 0 || v > UINT32_MAX)
		HEAD_BAD("bad pages per chunk");
	z->per[TRAIL3_PAGES] = (uint32_t) v;

	/* the directories: an entry takes at least 8 bytes of the head */
	at = f->data_end;
	z->sums_apart = f->version >= 5;	/* and the trail entries delta-coded */
	z->colmajor = f->version >= 6;
	if (f->version >= 5 && ntr > 0 && nc > 0 && (why = decode_sums_dir(c, f, z, region, &at)) != NULL)
		goto bad;
	z->entries_off = at;
	for (int kind = 0; kind < 2; kind++)
	{
		uint64_t	nent = kind == TRAIL3_TRAILS ? ntr : npg;
		uint64_t	nch = (nent + z->per[kind] - 1) / z->per[kind];
		uint64_t	evsum = 0,
					data = TDB_TRAIL_HEADER_SIZE;

		if (nch > codec_left(c) / 8)
			HEAD_BAD("bad chunk count");
		z->nchunks[kind] = (uint32_t) nch;
		if ((z->chunks[kind] = calloc(nch ? nch : 1, sizeof(F3Chunk))) == NULL)
			HEAD_BAD(TRAIL_OOM);
		if (kind == TRAIL3_PAGES && z->colmajor &&
			((z->col_bytes = calloc((nch ? nch : 1) * (2 + nc), sizeof(uint64_t))) == NULL ||
			 (z->col_off = calloc((nch ? nch : 1) * (2 + nc), sizeof(uint64_t))) == NULL))
			HEAD_BAD(TRAIL_OOM);
		for (uint32_t j = 0; j < nch; j++)
		{
			F3Chunk    *ch = &z->chunks[kind][j];
			int32_t		box[4];

			ch->first = j * z->per[kind];
			ch->count = nent - ch->first < z->per[kind] ? (uint32_t) (nent - ch->first) : z->per[kind];
			if (kind == TRAIL3_TRAILS)
			{
				if (!trail_get_key(c, s->id_type, &ch->key, z->head_arena, &arena_used))
					HEAD_BAD("bad first id of a trail chunk");
				if (j > 0 && trail_key_cmp(s->id_type, &z->chunks[kind][j - 1].key, &ch->key) >= 0)
					HEAD_BAD("trail chunks not in id order");
			}
			if (!codec_get_varint(c, &ch->len) || ch->len > region - (at - f->data_end) ||
				ch->len < (uint64_t) ch->count * 8 || !get_crc_u32(c, &ch->crc))
				HEAD_BAD("bad chunk length");
			ch->off = at;
			at += ch->len;
			if (kind == TRAIL3_PAGES && z->colmajor)
			{
				/* version 6: the bytes of each kind of chunk of its pages, their sum its pages' */
				ch->bytes = 0;
				for (int k = 0; k < 2 + nc; k++)
				{
					uint64_t	min = k == TRAIL_CHUNK_CORE ? CORE_MIN_SIZE : CHUNK_CRC_SIZE + 1;
					uint64_t   *kb = &z->col_bytes[(size_t) j * (2 + nc) + k];

					if (!codec_get_varint(c, kb) || *kb > f->data_end - data - ch->bytes ||
						*kb < (uint64_t) ch->count * min)
						HEAD_BAD("bad page bytes of a chunk");
					ch->bytes += *kb;
				}
				ch->data_off = data;
				data += ch->bytes;
			}
			else if (kind == TRAIL3_PAGES)
			{
				if (!codec_get_varint(c, &ch->bytes) || ch->bytes > f->data_end - data ||
					ch->bytes < (uint64_t) ch->count * CORE_MIN_SIZE)
					HEAD_BAD("bad page bytes of a chunk");
				ch->data_off = data;
				data += ch->bytes;
			}
			/* a page holds at most TRAIL_V3_PAGE_MAX_EVENTS: so the total fits an int8 count */
			if (!codec_get_varint(c, &ch->nevents) || ch->nevents < ch->count ||
				ch->nevents > f->nevents - evsum ||
				(kind == TRAIL3_PAGES && ch->nevents > (uint64_t) ch->count * TRAIL_V3_PAGE_MAX_EVENTS))
				HEAD_BAD("bad event count of a chunk");
			evsum += ch->nevents;
			if (!get_zone3(c, z->q, NULL, &ch->tmin, &ch->tmax, box))
				HEAD_BAD("bad zone map of a chunk");
			ch->xmin = box[0];
			ch->ymin = box[1];
			ch->xmax = box[2];
			ch->ymax = box[3];
			if (!inside(ch->tmin, ch->tmax, box, f->whole.tmin, f->whole.tmax, f->whole.xmin,
						f->whole.ymin, f->whole.xmax, f->whole.ymax))
				HEAD_BAD("a chunk's zone map outside the file's");
		}
		if (evsum != f->nevents)
			HEAD_BAD("chunk event counts disagree with the total");
		if (kind == TRAIL3_PAGES && data != f->data_end)
			HEAD_BAD("pages do not fill the data region");
		/*
		 * Version 6: kind k's chunks of every page after kind k - 1's, page
		 * chunk after page chunk; their bytes add up to the region's (above).
		 */
		data = TDB_TRAIL_HEADER_SIZE;
		for (int k = 0; kind == TRAIL3_PAGES && z->colmajor && k < 2 + nc; k++)
			for (uint32_t j = 0; j < nch; j++)
			{
				z->col_off[(size_t) j * (2 + nc) + k] = data;
				data += z->col_bytes[(size_t) j * (2 + nc) + k];
			}
	}
	if (ntr > 0)
	{
		/* the whole file's ids: from the first chunk's first to the last id, no lower than the last chunk's */
		f->whole.key = z->chunks[TRAIL3_TRAILS][0].key;
		if (trail_key_cmp(s->id_type, &z->chunks[TRAIL3_TRAILS][z->nchunks[TRAIL3_TRAILS] - 1].key,
						  &f->whole_last) > 0)
			HEAD_BAD("last trail id before the last chunk's first");
	}
	z->lex_off = at;
	if (at + (nstr > 0 ? z->lex_len : 0) != t->footer_offset)
		HEAD_BAD("chunks do not fill the footer region");
	if (codec_left(c) != 0)
		HEAD_BAD("trailing bytes after the head");
	/* entries, valid once their chunks are loaded */
	f->trails = calloc(ntr ? ntr : 1, sizeof(TdbTrailInfo));
	f->pages = calloc(npg ? npg : 1, sizeof(TdbTrailPageInfo));
	z->ptlo = calloc(npg ? npg : 1, sizeof(uint32_t));
	z->pthi = calloc(npg ? npg : 1, sizeof(uint32_t));
	if (f->trails == NULL || f->pages == NULL || z->ptlo == NULL || z->pthi == NULL)
		HEAD_BAD(TRAIL_OOM);
	return 0;

bad:
	return tdb_trail_fail(err, trail_why_code(why), "%s: %s (footer byte %zu of %zu)",
						  trail_footer_why(why), why, (size_t) (c->p - buf), len);
}

void
trail_footer3_release(TdbTrailFooter *f)
{
	F3Lazy	   *z = f->lazy;

	if (z == NULL)
		return;
	for (int kind = 0; kind < 3; kind++)
	{
		for (uint32_t j = 0; z->chunks[kind] && j < z->nchunks[kind]; j++)
			free(z->chunks[kind][j].mem);
		free(z->chunks[kind]);
	}
	free(z->lex_arena);
	free(z->ptlo);
	free(z->pthi);
	free(z->col_bytes);
	free(z->col_off);
	free(z->head_arena);
	free(z->whole_stats);
	pthread_mutex_destroy(&z->lock);
	free(z);
	f->lazy = NULL;
}

uint32_t
trail_footer3_nchunks(const TdbTrailFooter *f, int kind)
{
	const F3Lazy *z = f->lazy;

	return z ? z->nchunks[kind] : 0;
}

void
trail_footer3_chunk(const TdbTrailFooter *f, int kind, uint32_t j, uint32_t *first,
					uint32_t *count, int64_t *tmin, int64_t *tmax, int32_t *box)
{
	const F3Chunk *ch = &((const F3Lazy *) f->lazy)->chunks[kind][j];

	*first = ch->first;
	*count = ch->count;
	*tmin = ch->tmin;
	*tmax = ch->tmax;
	box[0] = ch->xmin;
	box[1] = ch->ymin;
	box[2] = ch->xmax;
	box[3] = ch->ymax;
}

uint64_t
trail_footer3_entries_off(const TdbTrailFooter *f)
{
	const F3Lazy *z = f->lazy;

	return z ? z->entries_off : f->data_end;
}

void
trail_footer3_parts(const TdbTrailFooter *f, TdbTrailFooterParts *out)
{
	const F3Lazy *z = f->lazy;
	uint64_t   *bytes[3] = {&out->trail_bytes, &out->page_bytes, &out->summary_bytes};
	uint32_t   *n[3] = {&out->trail_chunks, &out->page_chunks, &out->summary_chunks};

	memset(out, 0, sizeof(*out));
	for (int kind = 0; z && kind < 3; kind++)
		for (uint32_t j = 0; j < z->nchunks[kind]; j++)
		{
			*bytes[kind] += z->chunks[kind][j].len;
			(*n[kind])++;
		}
	out->lexicon_bytes = z && z->nstrings > 0 ? z->lex_len : 0;
}
