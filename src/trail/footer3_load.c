/*
 * footer3_load.c
 *	  The chunks of a version-3 footer (footer3.c has its head), fetched,
 *	  checked and decoded when a query needs their entries: a trail chunk
 *	  into the footer's trails, a page chunk into its pages, the lexicon.
 *	  A chunk's CRC (in the head) is checked before a byte of it is parsed;
 *	  every entry must lie inside its chunk's zone map, which pruned it.
 */
#include "footer3.h"

#include <stdlib.h>
#include <string.h>

#include "../checksum.h"

/* ---- chunks ---------------------------------------------------------------------- */

#define CHUNK_BAD(what) \
	do { why = (what); goto bad; } while (0)

/*
 * The fewest bytes of a chunk's entry, its columns aside: a trail's id,
 * events, zone map (6), page count and one page; a page's events, its two
 * core chunk lengths, trail range (2) and zone map (6).
 */
#define ENTRY_MIN_BYTES		10

/* Trail chunk j from its bytes (CRC checked by the caller) into f->trails. */
static const char *
decode_trail_chunk(TdbTrailFooter *f, F3Lazy *z, uint32_t j, const uint8_t *buf, size_t *where)
{
	F3Chunk    *ch = &z->chunks[TRAIL3_TRAILS][j];
	const TdbTrailSchema *s = &f->schema;
	int			nc = s->ncolumns;
	int			inline_nc = z->sums_apart ? 0 : nc;	/* summaries in the entries */
	CodecCur	c = {buf, buf + ch->len};
	const char *why = NULL;
	size_t		arena_used = 0;
	size_t		arena_cap = 2 * ch->len + 1;
	/* strings, page lists (an entry a byte at least), summaries */
	size_t		need = arena_cap + 8 + ch->len * sizeof(uint32_t) + 8 +
		(size_t) ch->count * (nc ? nc : 1) * sizeof(TdbTrailStats) + 8;
	char	   *mem;
	uint32_t   *lists;
	TdbTrailStats *stats;
	uint64_t	evsum = 0;
	int64_t		base[3] = {0, 0, 0};

	/*
	 * An entry takes ENTRY_MIN_BYTES and a byte per column summary at least:
	 * checked before the summaries (48 bytes a column) are sized by count.
	 */
	if (ch->count > ch->len / (ENTRY_MIN_BYTES + inline_nc))
	{
		*where = 0;
		return "chunk too short for its entries";
	}
	if ((mem = malloc(need)) == NULL)
		return TRAIL_OOM;
	lists = (uint32_t *) (mem + ((arena_cap + 7) & ~(size_t) 7));
	stats = (TdbTrailStats *) ((char *) lists + ((ch->len * sizeof(uint32_t) + 7) & ~(size_t) 7));
	ch->stats = stats;
	if (z->sums_apart)			/* filled as each column's summary chunk is loaded */
		memset(stats, 0, (size_t) ch->count * nc * sizeof(TdbTrailStats));
	for (uint32_t i = ch->first; i < ch->first + ch->count; i++)
	{
		TdbTrailInfo *ti = &f->trails[i];
		uint64_t	np;
		int32_t		box[4];

		if (z->sums_apart && s->id_type == TDB_TRAIL_INT64 && i > ch->first)
		{
			uint64_t	gap;

			/* version 5: the gap to the previous id, minus one */
			if (!codec_get_varint(&c, &gap) || gap >= (uint64_t) INT64_MAX - (uint64_t) f->trails[i - 1].key.i)
				CHUNK_BAD("bad trail id");
			ti->key.i = (int64_t) ((uint64_t) f->trails[i - 1].key.i + gap + 1);
		}
		else if (!trail_get_key(&c, s->id_type, &ti->key, mem, &arena_used))
			CHUNK_BAD("bad trail id");
		if (i == ch->first ? trail_key_cmp(s->id_type, &ch->key, &ti->key) != 0 :
			trail_key_cmp(s->id_type, &f->trails[i - 1].key, &ti->key) >= 0)
			CHUNK_BAD("trail ids not ascending from the chunk's first");
		if (j + 1 < z->nchunks[TRAIL3_TRAILS] &&
			trail_key_cmp(s->id_type, &ti->key, &z->chunks[TRAIL3_TRAILS][j + 1].key) >= 0)
			CHUNK_BAD("a trail id past the next chunk's first");
		if (!codec_get_varint(&c, &ti->nevents) || ti->nevents == 0 ||
			ti->nevents > ch->nevents - evsum)
			CHUNK_BAD("bad trail event count");
		evsum += ti->nevents;
		if (!get_zone3(&c, z->q, z->sums_apart ? base : NULL, &ti->tmin, &ti->tmax, box))
			CHUNK_BAD("bad trail zone map");
		if (!inside(ti->tmin, ti->tmax, box, ch->tmin, ch->tmax, ch->xmin, ch->ymin, ch->xmax, ch->ymax))
			CHUNK_BAD("a trail's zone map outside its chunk's");
		ti->xmin = box[0];
		ti->ymin = box[1];
		ti->xmax = box[2];
		ti->ymax = box[3];
		if (!codec_get_varint(&c, &np) || np == 0 || np > codec_left(&c) || np > f->npages)
			CHUNK_BAD("bad page count of a trail");
		for (uint64_t k = 0; k < np; k++)
		{
			uint64_t	d;

			if (!codec_get_varint(&c, &d) || d >= f->npages ||
				(k > 0 && d >= (uint64_t) f->npages - lists[k - 1] - 1))
				CHUNK_BAD("bad page list");
			lists[k] = k == 0 ? (uint32_t) d : lists[k - 1] + 1 + (uint32_t) d;
		}
		ti->page_list = lists;
		ti->npages = (uint32_t) np;
		ti->first_page = lists[0];
		lists += np;
		for (int k = 0; k < inline_nc; k++)
			if (!trail_get_stats(&c, s->columns[k].type, ti->nevents, true, &stats[k]))
				CHUNK_BAD("bad column summary of a trail");
		ti->stats = stats;
		stats += nc;
	}
	if (evsum != ch->nevents)
		CHUNK_BAD("trail event counts disagree with the chunk's");
	if (j + 1 == z->nchunks[TRAIL3_TRAILS] &&
		trail_key_cmp(s->id_type, &f->trails[ch->first + ch->count - 1].key, &f->whole_last) != 0)
		CHUNK_BAD("the last trail id disagrees with the head's");
	if (codec_left(&c) != 0)
		CHUNK_BAD("trailing bytes");
	ch->mem = mem;
	z->loaded_bytes += need;
	return NULL;

bad:
	*where = (size_t) (c.p - buf);
	free(mem);
	ch->stats = NULL;
	memset(&f->trails[ch->first], 0, ch->count * sizeof(TdbTrailInfo));
	return why;
}

/*
 * Version 5: summary chunk k (column k / ntc of trail chunk k % ntc) into
 * that trail chunk's entries, which must be loaded (their event counts bound
 * the summaries' counts).
 */
static const char *
decode_sum_chunk(TdbTrailFooter *f, F3Lazy *z, uint32_t k, const uint8_t *buf, size_t *where)
{
	F3Chunk    *ch = &z->chunks[TRAIL3_SUMS][k];
	uint32_t	ntc = z->nchunks[TRAIL3_TRAILS];
	int			col = (int) (k / ntc),
				nc = f->schema.ncolumns;
	const F3Chunk *tc = &z->chunks[TRAIL3_TRAILS][k % ntc];
	CodecCur	c = {buf, buf + ch->len - 4};	/* its CRC after its summaries */
	TdbTrailStats *st;
	const char *why = NULL;

	*where = 0;
	if (!chunk_loaded(tc) || tc->stats == NULL)
		return "summaries before their trails";
	/* decoded apart, then copied whole: a chunk that fails leaves its column's summaries at count 0 */
	if ((st = malloc(((size_t) ch->count + 1) * sizeof(TdbTrailStats))) == NULL)
		return TRAIL_OOM;
	for (uint32_t i = 0; i < ch->count && why == NULL; i++)
		if (!trail_get_stats(&c, f->schema.columns[col].type, f->trails[ch->first + i].nevents, true, &st[i]))
			why = "bad column summary of a trail";
	if (why == NULL && codec_left(&c) != 0)
		why = "trailing bytes";
	if (why != NULL)
		*where = (size_t) (c.p - buf);
	else
		for (uint32_t i = 0; i < ch->count; i++)
			tc->stats[(size_t) i * nc + col] = st[i];
	free(st);
	return why;
}

/* Page chunk j from its bytes into f->pages. */
static const char *
decode_page_chunk(TdbTrailFooter *f, F3Lazy *z, uint32_t j, const uint8_t *buf, size_t *where)
{
	F3Chunk    *ch = &z->chunks[TRAIL3_PAGES][j];
	int			nc = f->schema.ncolumns;
	CodecCur	c = {buf, buf + ch->len};
	const char *why = NULL;
	uint32_t   *mem,
			   *cl;
	uint64_t   *co = NULL;		/* version 6: each page's chunk offsets */
	const uint64_t *cend = NULL;	/* ... and the bytes of each kind's in this chunk */
	uint64_t	run[2 + TDB_TRAIL_MAX_COLUMNS];	/* ... and where the next page's lie */
	uint64_t	offset = ch->data_off,
				evsum = 0;
	size_t		lens = (size_t) ch->count * (2 + nc) * sizeof(uint32_t) + 8,
				need = lens + (z->colmajor ? (size_t) ch->count * (2 + nc) * sizeof(uint64_t) + 8 : 0);
	int64_t		base[3] = {0, 0, 0},
				tlo = 0;

	/* an entry: at least ENTRY_MIN_BYTES and a byte per column's chunk length */
	if (ch->count > ch->len / (ENTRY_MIN_BYTES + nc))
	{
		*where = 0;
		return "chunk too short for its entries";
	}
	if ((mem = cl = malloc(need)) == NULL)
		return TRAIL_OOM;
	if (z->colmajor)
	{
		co = (uint64_t *) ((char *) mem + (lens & ~(size_t) 7));
		cend = &z->col_bytes[(size_t) j * (2 + nc)];
		memcpy(run, &z->col_off[(size_t) j * (2 + nc)], (2 + nc) * sizeof(uint64_t));
	}
	for (uint32_t i = ch->first; i < ch->first + ch->count; i++)
	{
		TdbTrailPageInfo *pi = &f->pages[i];
		uint64_t	pev,
					plen = 0,
					span,
					d;
		int64_t		dlo;
		int32_t		box[4];

		/* a page may hold more events than bytes (constant columns), up to the limit */
		if (!codec_get_varint(&c, &pev) || pev == 0 || pev > TRAIL_V3_PAGE_MAX_EVENTS ||
			pev > ch->nevents - evsum)
			CHUNK_BAD("bad page event count");
		evsum += pev;
		for (int k = 0; k < 2 + nc; k++)
		{
			uint64_t	min = k == TRAIL_CHUNK_CORE ? CORE_MIN_SIZE : CHUNK_CRC_SIZE + 1;

			if (!codec_get_varint(&c, &d) || d < min || d > TRAIL_PAGE_MAX_BYTES)
				CHUNK_BAD("bad chunk length");
			cl[k] = (uint32_t) d;
			plen += d;
			if (co != NULL)
			{
				/* version 6: inside what the head gives this chunk's pages of kind k */
				uint64_t	k0 = z->col_off[(size_t) j * (2 + nc) + k];

				if (d > cend[k] - (run[k] - k0))
					CHUNK_BAD("a page's chunk runs past its kind's bytes in the chunk");
				co[k] = run[k];
				run[k] += d;
			}
		}
		if (plen > TRAIL_PAGE_MAX_BYTES || plen > ch->data_off + ch->bytes - offset)
			CHUNK_BAD("page length runs past the chunk's pages");
		if (!codec_get_svarint(&c, &dlo) || !codec_get_varint(&c, &span) ||
			dlo < -(int64_t) f->ntrails || dlo > (int64_t) f->ntrails ||
			tlo + dlo < 0 || tlo + dlo >= (int64_t) f->ntrails ||
			span >= f->ntrails - (uint64_t) (tlo + dlo))
			CHUNK_BAD("bad trail range of a page");
		tlo += dlo;
		z->ptlo[i] = (uint32_t) tlo;
		z->pthi[i] = (uint32_t) (tlo + (int64_t) span);
		if (!get_zone3(&c, z->q, base, &pi->tmin, &pi->tmax, box))
			CHUNK_BAD("bad page zone map");
		if (!inside(pi->tmin, pi->tmax, box, ch->tmin, ch->tmax, ch->xmin, ch->ymin, ch->xmax, ch->ymax))
			CHUNK_BAD("a page's zone map outside its chunk's");
		pi->xmin = box[0];
		pi->ymin = box[1];
		pi->xmax = box[2];
		pi->ymax = box[3];
		pi->offset = co != NULL ? co[0] : offset;
		pi->length = (uint32_t) plen;
		pi->nevents = (uint32_t) pev;
		pi->trail = span == 0 ? (uint32_t) tlo : UINT32_MAX;
		pi->chunk_len = cl;
		pi->chunk_off = co;
		cl += 2 + nc;
		co = co != NULL ? co + 2 + nc : NULL;
		offset += plen;
	}
	/* (version 6: each kind's within its bytes, so all of them exactly when their sum is) */
	if (offset != ch->data_off + ch->bytes)
		CHUNK_BAD("page lengths disagree with the chunk's bytes");
	if (evsum != ch->nevents)
		CHUNK_BAD("page event counts disagree with the chunk's");
	if (codec_left(&c) != 0)
		CHUNK_BAD("trailing bytes");
	ch->mem = mem;
	z->loaded_bytes += need;
	return NULL;

bad:
	*where = (size_t) (c.p - buf);
	free(mem);
	memset(&f->pages[ch->first], 0, ch->count * sizeof(TdbTrailPageInfo));
	return why;
}

/* A chunk of any kind: (kind << 32) | its number in kind's directory; or the lexicon. */
#define TRAIL3_LEX		3
#define REF(kind, j)	(((uint64_t) (kind) << 32) | (j))
#define REF_KIND(r)		((int) ((r) >> 32))
#define REF_NUM(r)		((uint32_t) (r))

static const char *const kind_name[3] = {"trail", "page", "summary"};

static int	lexicon_from(TdbTrailFooter *f, F3Lazy *z, const uint8_t *buf, TdbTrailError *err);

/*
 * Fetch, check and decode chunks refs[0 .. n-1] (those not loaded; the
 * lexicon too, REF(TRAIL3_LEX, 0)), all in one read; lock held.  Decoded
 * in the order given: a summary chunk after its trail chunk.
 */
static int
load_locked(TdbTrailFooter *f, F3Lazy *z, const uint64_t *refs, int n, TrailRangeRead rd,
			void *arg, TdbTrailError *err)
{
	TdbByteRange *r = malloc((n + 1) * sizeof(TdbByteRange));
	uint8_t   **bufs = calloc(n + 1, sizeof(uint8_t *));
	uint64_t   *todo = malloc((n + 1) * sizeof(uint64_t));
	int			m = 0,
				rc = 0;

	if (r == NULL || bufs == NULL || todo == NULL)
	{
		rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
		goto done;
	}
	for (int i = 0; i < n; i++)
	{
		const F3Chunk *ch;

		if (m > 0 && todo[m - 1] == refs[i])
			continue;
		if (REF_KIND(refs[i]) == TRAIL3_LEX)
		{
			if (z->lex_loaded || z->nstrings == 0)
				continue;
			r[m].off = z->lex_off;
			r[m].len = z->lex_len;
		}
		else
		{
			ch = &z->chunks[REF_KIND(refs[i])][REF_NUM(refs[i])];
			if (chunk_loaded(ch))
				continue;
			r[m].off = ch->off;
			r[m].len = ch->len;
		}
		if ((bufs[m] = malloc(r[m].len ? r[m].len : 1)) == NULL)
		{
			rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory for a footer %s of %llu bytes",
								REF_KIND(refs[i]) == TRAIL3_LEX ? "lexicon" : "chunk",
								(unsigned long long) r[m].len);
			goto done;
		}
		todo[m++] = refs[i];
	}
	if (m == 0)
		goto done;
	if ((rc = rd(arg, r, m, bufs, err)) < 0)
		goto done;
	for (int i = 0; i < m; i++)
	{
		int			kind = REF_KIND(todo[i]);
		uint32_t	j = REF_NUM(todo[i]);
		F3Chunk    *ch;
		const char *why;
		size_t		where = 0;

		if (kind == TRAIL3_LEX)
		{
			if ((rc = lexicon_from(f, z, bufs[i], err)) < 0)
				goto done;
			continue;
		}
		ch = &z->chunks[kind][j];
		if (chunk_loaded(ch))
			continue;
		/* a summary chunk's CRC is its last 4 bytes (the head gives its length only) */
		if (kind == TRAIL3_SUMS ? tdb_crc32c(bufs[i], ch->len - 4) != codec_get_u32le(bufs[i] + ch->len - 4) :
			tdb_crc32c(bufs[i], ch->len) != ch->crc)
		{
			rc = tdb_trail_fail(err, TDB_TRAIL_ECORRUPT,
								"corrupted trail file footer: checksum mismatch in %s chunk %u (offset %llu, %llu bytes)",
								kind_name[kind], j, (unsigned long long) ch->off, (unsigned long long) ch->len);
			goto done;
		}
		why = kind == TRAIL3_TRAILS ? decode_trail_chunk(f, z, j, bufs[i], &where) :
			kind == TRAIL3_PAGES ? decode_page_chunk(f, z, j, bufs[i], &where) :
			decode_sum_chunk(f, z, j, bufs[i], &where);
		if (why != NULL)
		{
			rc = tdb_trail_fail(err, trail_why_code(why), "%s: %s in %s chunk %u (chunk byte %zu of %llu)",
								trail_footer_why(why), why, kind_name[kind], j, where, (unsigned long long) ch->len);
			goto done;
		}
		chunk_set_loaded(ch);
	}
done:
	for (int i = 0; bufs && i < n; i++)
		free(bufs[i]);
	free(bufs);
	free(r);
	free(todo);
	return rc;
}

/* Whether a chunk of refs[0 .. n-1] is still to be read. */
static bool
any_unloaded(const F3Lazy *z, const uint64_t *refs, int n)
{
	for (int i = 0; i < n; i++)
		if (!chunk_loaded(&z->chunks[REF_KIND(refs[i])][REF_NUM(refs[i])]))
			return true;
	return false;
}

/*
 * Into refs from m on: trail chunks chunks[0 .. n-1] (NULL: 0 .. n-1),
 * then, version 5, the summary chunks of the columns in cols of each
 * (decoded after their trail chunk); the new count.
 */
static int
trail_refs(const TdbTrailFooter *f, uint64_t *refs, int m, const uint32_t *chunks, uint32_t n, uint64_t cols)
{
	const F3Lazy *z = f->lazy;
	int			nc = z->sums_apart ? f->schema.ncolumns : 0;

	for (uint32_t i = 0; i < n; i++)
		refs[m++] = REF(TRAIL3_TRAILS, chunks ? chunks[i] : i);
	for (int c = 0; c < nc && c < 64; c++)
		for (uint32_t i = 0; ((cols >> c) & 1) && i < n; i++)
			refs[m++] = REF(TRAIL3_SUMS, (uint32_t) c * z->nchunks[TRAIL3_TRAILS] + (chunks ? chunks[i] : i));
	return m;
}

/*
 * Load refs[0 .. m-1] in one read, under the lock; with lexicon, the
 * lexicon too when a chunk is still to read (refs has room for it): it
 * rides along with a read that goes out anyway, never in one of its own (a
 * lookup whose chunks are loaded and whose id has no page needs none).
 */
static int
load_refs(TdbTrailFooter *f, uint64_t *refs, int m, bool lexicon, TrailRangeRead rd, void *arg,
		  TdbTrailError *err)
{
	F3Lazy	   *z = f->lazy;
	int			rc;

	if (lexicon && any_unloaded(z, refs, m))
		refs[m++] = REF(TRAIL3_LEX, 0);
	pthread_mutex_lock(&z->lock);
	rc = load_locked(f, z, refs, m, rd, arg, err);
	pthread_mutex_unlock(&z->lock);
	return rc;
}

/*
 * Chunks of kind by number; with kind TRAIL3_TRAILS and cols, also those
 * columns' summary chunks of the same trail chunks (version 5; before,
 * the summaries are in the trail chunks); with lexicon, the lexicon; all
 * in one read.
 */
static int
load_kind(TdbTrailFooter *f, int kind, const uint32_t *chunks, int n, uint64_t cols, bool lexicon,
		  TrailRangeRead rd, void *arg, TdbTrailError *err)
{
	F3Lazy	   *z = f->lazy;
	int			nc = z->sums_apart && kind == TRAIL3_TRAILS ? f->schema.ncolumns : 0;
	int			per = 1,
				m = 0,
				rc;
	uint64_t   *refs;

	for (int c = 0; c < nc; c++)
		per += (cols >> c) & 1;
	if ((refs = malloc(((size_t) n * per + 2) * sizeof(uint64_t))) == NULL)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	if (kind == TRAIL3_TRAILS)
		m = trail_refs(f, refs, 0, chunks, (uint32_t) n, cols);
	else
		for (int i = 0; i < n; i++)
			refs[m++] = REF(kind, chunks[i]);
	rc = load_refs(f, refs, m, lexicon, rd, arg, err);
	free(refs);
	return rc;
}

int
trail_footer3_load_chunks(TdbTrailFooter *f, int kind, const uint32_t *chunks, int n,
						  TrailRangeRead rd, void *arg, TdbTrailError *err)
{
	return trail_footer3_load_summaries(f, kind, chunks, n, 0, rd, arg, err);
}

int
trail_footer3_load_summaries(TdbTrailFooter *f, int kind, const uint32_t *chunks, int n, uint64_t cols,
							 TrailRangeRead rd, void *arg, TdbTrailError *err)
{
	return trail_footer3_load_with(f, kind, chunks, n, cols, false, rd, arg, err);
}

int
trail_footer3_load_with(TdbTrailFooter *f, int kind, const uint32_t *chunks, int n, uint64_t cols,
						bool lexicon, TrailRangeRead rd, void *arg, TdbTrailError *err)
{
	F3Lazy	   *z = f->lazy;

	if (z == NULL || n <= 0)
		return 0;
	if (kind < TRAIL3_TRAILS || kind > TRAIL3_PAGES)
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "footer chunk kind %d", kind);
	for (int i = 0; i < n; i++)
		if (chunks[i] >= z->nchunks[kind])
			return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "footer chunk %u of %u", chunks[i],
								  z->nchunks[kind]);
	return load_kind(f, kind, chunks, n, cols, lexicon, rd, arg, err);
}

int
trail_footer3_load(TdbTrailFooter *f, int kind, uint32_t lo, uint32_t hi, uint64_t cols,
				   TrailRangeRead rd, void *arg, TdbTrailError *err)
{
	F3Lazy	   *z = f->lazy;
	uint32_t   *idx;
	uint32_t	a,
				b;
	int			n = 0,
				rc;

	if (z == NULL || lo >= hi)
		return 0;
	if (hi > (kind == TRAIL3_TRAILS ? f->ntrails : f->npages))
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "footer entries [%u, %u) past the last", lo, hi);
	a = lo / z->per[kind];
	b = (hi - 1) / z->per[kind];
	if ((idx = malloc(((size_t) b - a + 1) * sizeof(uint32_t))) == NULL)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	for (uint32_t j = a; j <= b; j++)
		if (cols != 0 || !chunk_loaded(&z->chunks[kind][j]))
			idx[n++] = j;
	rc = trail_footer3_load_summaries(f, kind, idx, n, cols, rd, arg, err);
	free(idx);
	return rc;
}

/*
 * The lexicon from buf (its lex_len bytes as read): checked, decoded into
 * a new arena, marked loaded; lock held.
 */
static int
lexicon_from(TdbTrailFooter *f, F3Lazy *z, const uint8_t *buf, TdbTrailError *err)
{
	CodecCur	c = {buf, buf + z->lex_len};
	size_t		used = 0;
	const char *why;

	if (tdb_crc32c(buf, z->lex_len) != z->lex_crc)
		return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT, "corrupted trail file footer: checksum mismatch in the lexicon");
	if ((z->lex_arena = malloc(2 * z->lex_len + 1)) == NULL)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory for a lexicon of %llu bytes",
							  (unsigned long long) z->lex_len);
	why = trail_get_lexicon(&c, f, z->lex_arena, &used);
	if (why == NULL && f->nstrings != z->nstrings)
		why = "lexicon size disagrees with the head's";
	if (why == NULL && codec_left(&c) != 0)
		why = "trailing bytes";
	if (why != NULL)
	{
		free(f->strings);
		f->strings = NULL;
		f->nstrings = 0;
		free(z->lex_arena);
		z->lex_arena = NULL;
		return tdb_trail_fail(err, trail_why_code(why), "%s: %s in the lexicon", trail_footer_why(why), why);
	}
	z->lex_loaded = true;
	z->loaded_bytes += 2 * z->lex_len + 1 + (size_t) z->nstrings * sizeof(char *);
	return 0;
}

int
trail_footer3_load_lexicon(TdbTrailFooter *f, TrailRangeRead rd, void *arg, TdbTrailError *err)
{
	F3Lazy	   *z = f->lazy;
	uint64_t	ref = REF(TRAIL3_LEX, 0);

	if (z == NULL || z->nstrings == 0)
		return 0;
	return load_refs(f, &ref, 1, false, rd, arg, err);
}

int
trail_footer3_find(TdbTrailFooter *f, int64_t id, const char *sid, TrailRangeRead rd, void *arg,
				   TdbTrailError *err)
{
	F3Lazy	   *z = f->lazy;
	TdbTrailKey k = {id, sid};
	uint32_t	lo = 0,
				hi,
				j;
	int			rc;

	/* the last chunk whose first id is <= id */
	if ((rc = trail_footer3_chunk_of(f, id, sid)) < 0)
		return -1;
	j = (uint32_t) rc;
	if ((rc = trail_footer3_load_chunks(f, TRAIL3_TRAILS, &j, 1, rd, arg, err)) < 0)
		return rc;
	lo = z->chunks[TRAIL3_TRAILS][j].first;
	hi = lo + z->chunks[TRAIL3_TRAILS][j].count;
	return trail_find_between(f, lo, hi, &k);
}

int
trail_find_between(const TdbTrailFooter *f, uint32_t lo, uint32_t hi, const TdbTrailKey *k)
{
	while (lo < hi)
	{
		uint32_t	mid = lo + (hi - lo) / 2;
		int			c = trail_key_cmp(f->schema.id_type, &f->trails[mid].key, k);

		if (c == 0)
			return (int) mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

void
trail_footer3_page_trails(const TdbTrailFooter *f, uint32_t p, uint32_t *lo, uint32_t *hi)
{
	const F3Lazy *z = f->lazy;

	*lo = z->ptlo[p];
	*hi = z->pthi[p];
}

int
trail_footer3_page_ready(const TdbTrailFooter *f, uint32_t p, TdbTrailError *err)
{
	const TdbTrailPageInfo *pi = &f->pages[p];
	const TdbTrailInfo *ti;
	int32_t		box[4] = {pi->xmin, pi->ymin, pi->xmax, pi->ymax};

	if (pi->trail == UINT32_MAX)
		return 0;				/* the page decoder checks each event against its trail */
	ti = &f->trails[pi->trail];
	if (!inside(pi->tmin, pi->tmax, box, ti->tmin, ti->tmax, ti->xmin, ti->ymin, ti->xmax, ti->ymax))
		return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT,
							  "corrupted trail file footer: page %u's zone map outside its trail's", p);
	return 0;
}

/*
 * Before trail t's pages are read (their page chunks loaded): what its
 * entry and theirs show together.  Each page its list names must hold it
 * (the page's trail range), and the pages of it alone must not hold more
 * events than it has, nor, with a page of several trails each holding at
 * least one of its events, fewer: a list naming another trail's pages or
 * leaving one out would otherwise answer a lookup with fewer rows.
 */
int
trail_footer3_trail_ready(const TdbTrailFooter *f, uint32_t t, TdbTrailError *err)
{
	const F3Lazy *z = f->lazy;
	const TdbTrailInfo *ti = &f->trails[t];
	uint64_t	alone = 0,
				shared = 0,
				all = 0;

	for (uint32_t k = 0; k < ti->npages; k++)
	{
		uint32_t	p = ti->page_list[k];

		if (t < z->ptlo[p] || t > z->pthi[p])
			return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT,
								  "corrupted trail file footer: trail %u names page %u, whose trails are %u to %u",
								  t, p, z->ptlo[p], z->pthi[p]);
		all += f->pages[p].nevents;
		if (z->ptlo[p] == z->pthi[p])
			alone += f->pages[p].nevents;
		else
			shared++;
	}
	if (alone + shared > ti->nevents || all < ti->nevents || (shared == 0 && alone != ti->nevents))
		return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT,
							  "corrupted trail file footer: trail %u's pages hold %llu of its events, the footer says %llu",
							  t, (unsigned long long) (shared == 0 ? alone : all),
							  (unsigned long long) ti->nevents);
	return 0;
}

/*
 * Every trail chunk, the summary chunks of the columns in cols (version 5)
 * and every page chunk not loaded yet, in one read: one GET for a footer's
 * entries (or the tail extended down to them) where a read per kind made
 * two after the tail, one after the other (a 100-id join over a week of New
 * York Harbor AIS: four GETs of footer chunks, 1.7 ms each here).
 */
int
trail_footer3_load_entries_all(TdbTrailFooter *f, uint64_t cols, bool lexicon, TrailRangeRead rd,
							   void *arg, TdbTrailError *err)
{
	F3Lazy	   *z = f->lazy;
	uint32_t	nt,
				np;
	int			nc,
				m,
				rc;
	uint64_t   *refs;

	if (z == NULL)
		return 0;
	nt = z->nchunks[TRAIL3_TRAILS];
	np = z->nchunks[TRAIL3_PAGES];
	nc = z->sums_apart ? f->schema.ncolumns : 0;
	if ((refs = malloc(((size_t) nt * (1 + nc) + np + 2) * sizeof(uint64_t))) == NULL)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	m = trail_refs(f, refs, 0, NULL, nt, cols);
	for (uint32_t j = 0; j < np; j++)
		refs[m++] = REF(TRAIL3_PAGES, j);
	rc = load_refs(f, refs, m, lexicon, rd, arg, err);
	free(refs);
	return rc;
}

int
trail_footer3_load_all(TdbTrailFooter *f, bool summaries, TrailRangeRead rd, void *arg, TdbTrailError *err)
{
	F3Lazy	   *z = f->lazy;
	uint32_t   *refs;
	int			rc;

	if (z == NULL)
		return 0;
	if ((rc = trail_footer3_load_entries_all(f, summaries ? TRAIL_ALL_COLUMNS(f->schema.ncolumns) : 0,
											 true, rd, arg, err)) < 0)
		return rc;
	/* what only the whole footer shows: page lists and trail ranges agree */
	if ((refs = calloc(f->npages + 1, sizeof(uint32_t))) == NULL)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	for (uint32_t t = 0; t < f->ntrails && rc == 0; t++)
		for (uint32_t k = 0; k < f->trails[t].npages && rc == 0; k++)
		{
			uint32_t	p = f->trails[t].page_list[k];

			if (t < z->ptlo[p] || t > z->pthi[p])
				rc = tdb_trail_fail(err, TDB_TRAIL_ECORRUPT,
									"corrupted trail file footer: trail %u names page %u, whose trails are %u to %u",
									t, p, z->ptlo[p], z->pthi[p]);
			refs[p]++;
		}
	for (uint32_t p = 0; p < f->npages && rc == 0; p++)
		if (refs[p] == 0)
			rc = tdb_trail_fail(err, TDB_TRAIL_ECORRUPT,
								"corrupted trail file footer: page %u is in no trail's page list", p);
		else
			rc = trail_footer3_page_ready(f, p, err);
	free(refs);
	return rc;
}

/* The trail chunk that would hold id (the directory alone), or -1. */
int
trail_footer3_chunk_of(const TdbTrailFooter *f, int64_t id, const char *sid)
{
	const F3Lazy *z = f->lazy;
	TdbTrailKey k = {id, sid};
	uint32_t	lo = 0,
				hi = z->nchunks[TRAIL3_TRAILS];

	if ((f->schema.id_type == TDB_TRAIL_STRING && sid == NULL) || f->ntrails == 0 ||
		trail_key_cmp(f->schema.id_type, &k, &f->whole_last) > 0)
		return -1;				/* past the last id: no chunk to read */
	while (lo < hi)
	{
		uint32_t	mid = lo + (hi - lo) / 2;

		if (trail_key_cmp(f->schema.id_type, &z->chunks[TRAIL3_TRAILS][mid].key, &k) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (int) lo - 1;
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t	x = *(const uint32_t *) a,
				y = *(const uint32_t *) b;

	return (x > y) - (x < y);
}

int
trail_footer3_load_entries(TdbTrailFooter *f, int kind, const uint32_t *entries, uint32_t n,
						   TrailRangeRead rd, void *arg, TdbTrailError *err)
{
	return trail_footer3_load_entries_lex(f, kind, entries, n, false, rd, arg, err);
}

int
trail_footer3_load_entries_lex(TdbTrailFooter *f, int kind, const uint32_t *entries, uint32_t n,
							   bool lexicon, TrailRangeRead rd, void *arg, TdbTrailError *err)
{
	F3Lazy	   *z = f->lazy;
	uint32_t   *idx;
	uint32_t	m = 0;
	int			rc;

	if (z == NULL || n == 0)
		return 0;
	if ((idx = malloc((size_t) n * sizeof(uint32_t))) == NULL)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	for (uint32_t i = 0; i < n; i++)
	{
		uint32_t	j = entries[i] / z->per[kind];

		if (j < z->nchunks[kind] && !chunk_loaded(&z->chunks[kind][j]) && (m == 0 || idx[m - 1] != j))
			idx[m++] = j;
	}
	qsort(idx, m, sizeof(uint32_t), cmp_u32);
	rc = m > (uint32_t) INT32_MAX ? TDB_TRAIL_EINVAL :
		trail_footer3_load_with(f, kind, idx, (int) m, 0, lexicon, rd, arg, err);
	free(idx);
	return rc;
}

size_t
trail_footer3_loaded_memory(TdbTrailFooter *f)
{
	F3Lazy	   *z = f->lazy;
	size_t		n;

	if (z == NULL)
		return 0;
	pthread_mutex_lock(&z->lock);
	n = z->loaded_bytes;
	pthread_mutex_unlock(&z->lock);
	return n;
}

uint64_t
trail_footer3_loaded(const TdbTrailFooter *f, int kind, uint32_t *nloaded)
{
	const F3Lazy *z = f->lazy;
	uint64_t	bytes = 0;

	*nloaded = 0;
	for (uint32_t j = 0; z && j < z->nchunks[kind]; j++)
		if (chunk_loaded(&z->chunks[kind][j]))
		{
			(*nloaded)++;
			bytes += z->chunks[kind][j].len;
		}
	return bytes;
}
