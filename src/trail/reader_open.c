/*
 * reader_open.c
 *	  Opening a trail file (trail.h's tdb_trail_open): the trailer, then the
 *	  footer from the process's decoded-footer cache (footer_cache.c) or read
 *	  and decoded; and for version 3, whose footer is read in pieces, the
 *	  chunks a caller needs (tdb_trail_need_*), fetched through the pager.
 *	  The scans over an open file are reader.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "reader_open.h"

int
trail_read_footer(TdbPager *pager, const TdbTrailTrailer *t, uint8_t *fbuf, TdbTrailFooter *f,
				  TdbTrailError *err)
{
	int			rc = tdb_pager_read(pager, t->footer_offset, t->footer_length, fbuf, err);

	return rc < 0 ? rc : tdb_trail_footer_decode(fbuf, t->footer_length, t, f, err);
}

int
tdb_trail_open(TdbPager *pager, TdbTrailReader **out, TdbTrailError *err)
{
	uint64_t	size = tdb_pager_size(pager);
	uint8_t		tbuf[TDB_TRAIL_TRAILER_SIZE];
	TdbTrailTrailer t;
	TdbTrailReader *r;
	SharedFooter *sf;
	uint8_t    *fbuf;
	char		key[2048];
	int			rc;

	*out = NULL;
	if (size < TDB_TRAIL_HEADER_SIZE + TDB_TRAIL_TRAILER_SIZE)
		return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT,
							  "not a trail file: %llu bytes is too small", (unsigned long long) size);
	if ((rc = tdb_pager_read(pager, size - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE, tbuf, err)) < 0)
		return rc;
	if ((rc = tdb_trail_trailer_decode(tbuf, sizeof(tbuf), size, &t, err)) < 0)
		return rc;
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	r->pager = pager;
	/* the object's identity too: another file cannot bring a forged footer of the same shape */
	if (snprintf(key, sizeof(key), "%llu %llu %llu %08x v%u %s\n%s", (unsigned long long) size,
				 (unsigned long long) t.footer_offset, (unsigned long long) t.footer_length,
				 t.footer_crc, t.version, tdb_pager_etag(pager),
				 tdb_pager_identity(pager)) >= (int) sizeof(key))
		key[0] = '\0';			/* too long to key: not cached */
	if (key[0] != '\0' && (sf = footer_cache_get(key)) != NULL)
	{
		r->sf = sf;
		r->footer = &sf->f;
		*out = r;
		return 0;
	}

	/* a footer longer than the first request's tail: the rest exactly, at once */
	if ((rc = tdb_pager_extend_tail(pager, t.footer_offset, err)) < 0)
	{
		free(r);
		return rc;
	}
	fbuf = malloc(t.footer_length ? t.footer_length : 1);
	sf = calloc(1, sizeof(*sf));
	if (fbuf == NULL || sf == NULL || (sf->key = strdup(key)) == NULL)
	{
		free(fbuf);
		free(sf);
		free(r);
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory for a footer of %llu bytes",
							  (unsigned long long) t.footer_length);
	}
	rc = trail_read_footer(pager, &t, fbuf, &sf->f, err);
	free(fbuf);
	if (rc < 0)
	{
		free(sf->key);
		free(sf);
		free(r);
		return rc;
	}
	footer_cache_count_decode();
	sf->refs = 1;
	/* decoded: the arrays, the strings, a page-list entry per trail page */
	sf->cost = sizeof(TdbTrailFooter) + 2 * (size_t) t.footer_length +
		(size_t) sf->f.ntrails * sizeof(TdbTrailInfo) + (size_t) sf->f.npages * sizeof(TdbTrailPageInfo) +
		(size_t) sf->f.nstrings * sizeof(char *) + sf->f.arena2_bytes;
	sf->base_cost = sf->cost;
	if (key[0] != '\0')
		footer_cache_put(sf);
	r->sf = sf;
	r->footer = &sf->f;
	*out = r;
	return 0;
}

const TdbTrailFooter *
tdb_trail_footer(const TdbTrailReader *r)
{
	return r->footer;
}

/* Version 3: the footer's chunks come through the pager, each range exactly. */
int
trail_reader_read(void *arg, const TdbByteRange *rg, int n, uint8_t **bufs, TdbTrailError *err)
{
	return tdb_pager_read_exact((TdbPager *) arg, rg, n, bufs, err);
}

TdbTrailFooter *
trail_lazy_footer(TdbTrailReader *r)
{
	return r->sf->f.lazy ? &r->sf->f : NULL;
}

/* Trail id lookups: the footer's trails, in id order (a version-3 footer: its chunk read first). */
static int
find_key(const TdbTrailFooter *f, int64_t id, const char *sid)
{
	TdbTrailKey k = {id, sid};

	return trail_find_between(f, 0, f->ntrails, &k);
}

int
tdb_trail_find_int(const TdbTrailFooter *f, int64_t id)
{
	return f->schema.id_type == TDB_TRAIL_STRING ? -1 : find_key(f, id, NULL);
}

int
tdb_trail_find_str(const TdbTrailFooter *f, const char *id)
{
	return f->schema.id_type != TDB_TRAIL_STRING || id == NULL ? -1 : find_key(f, 0, id);
}

int
tdb_trail_lookup(TdbTrailReader *r, int64_t id, const char *sid, TdbTrailError *err)
{
	TdbTrailFooter *f = trail_lazy_footer(r);

	if (r->footer->schema.id_type == TDB_TRAIL_STRING && sid == NULL)
		return -1;
	if (f == NULL)
		return find_key(r->footer, id, sid);
	return trail_footer3_find(f, id, sid, trail_reader_read, r->pager, err);
}

void
tdb_trail_footer_parts(const TdbTrailReader *r, TdbTrailFooterParts *out)
{
	trail_footer3_parts(r->footer, out);
}

int
tdb_trail_need_trails(TdbTrailReader *r, uint32_t lo, uint32_t hi, TdbTrailError *err)
{
	TdbTrailFooter *f = trail_lazy_footer(r);

	return f ? trail_footer3_load(f, TRAIL3_TRAILS, lo, hi, 0, trail_reader_read, r->pager, err) : 0;
}

int
tdb_trail_need_summaries(TdbTrailReader *r, uint32_t lo, uint32_t hi, uint64_t cols, TdbTrailError *err)
{
	TdbTrailFooter *f = trail_lazy_footer(r);

	return f ? trail_footer3_load(f, TRAIL3_TRAILS, lo, hi, cols, trail_reader_read, r->pager, err) : 0;
}

int
tdb_trail_need_pages(TdbTrailReader *r, uint32_t lo, uint32_t hi, TdbTrailError *err)
{
	TdbTrailFooter *f = trail_lazy_footer(r);

	return f ? trail_footer3_load(f, TRAIL3_PAGES, lo, hi, 0, trail_reader_read, r->pager, err) : 0;
}

int
tdb_trail_need_lexicon(TdbTrailReader *r, TdbTrailError *err)
{
	TdbTrailFooter *f = trail_lazy_footer(r);

	return f ? trail_footer3_load_lexicon(f, trail_reader_read, r->pager, err) : 0;
}

int
tdb_trail_need_all(TdbTrailReader *r, TdbTrailError *err)
{
	return trail_need_everything(r, true, err);
}

int
trail_need_everything(TdbTrailReader *r, bool summaries, TdbTrailError *err)
{
	TdbTrailFooter *f = trail_lazy_footer(r);
	int			rc;

	if (f == NULL)
		return 0;
	/*
	 * Every chunk and the lexicon: the whole region between the pages and
	 * the head, as the tail extended down to it in one GET, so that a block
	 * of the last pages reaching into it completes from the tail rather
	 * than fetching chunk bytes a second time (kinds read one after the
	 * other were each read exactly, and the last block fetched them again)
	 */
	if ((rc = tdb_pager_extend_tail(r->pager, f->data_end, err)) < 0)
		return rc;
	return trail_footer3_load_all(f, summaries, trail_reader_read, r->pager, err);
}

static int
chunk_order(const void *a, const void *b)
{
	uint32_t	x = *(const uint32_t *) a,
				y = *(const uint32_t *) b;

	return (x > y) - (x < y);
}

int
tdb_trail_need_ids(TdbTrailReader *r, const int64_t *ids_int, const char *const *ids_str, int n,
				   uint64_t cols, TdbTrailError *err)
{
	return trail_need_ids_lex(r, ids_int, ids_str, n, cols, false, err);
}

int
trail_need_ids_lex(TdbTrailReader *r, const int64_t *ids_int, const char *const *ids_str, int n,
				   uint64_t cols, bool lexicon, TdbTrailError *err)
{
	TdbTrailFooter *f = trail_lazy_footer(r);
	uint32_t   *ch;
	uint32_t	m = 0;
	int			rc;

	if (f == NULL || n <= 0)
		return 0;
	if ((ch = malloc((size_t) n * sizeof(uint32_t))) == NULL)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	for (int k = 0; k < n; k++)
	{
		int			j = f->schema.id_type == TDB_TRAIL_STRING ?
			(ids_str ? trail_footer3_chunk_of(f, 0, ids_str[k]) : -1) :
			(ids_int ? trail_footer3_chunk_of(f, ids_int[k], NULL) : -1);

		if (j >= 0)
			ch[m++] = (uint32_t) j;
	}
	qsort(ch, m, sizeof(uint32_t), chunk_order);
	rc = trail_footer3_load_with(f, TRAIL3_TRAILS, ch, (int) m, cols, lexicon, trail_reader_read, r->pager, err);
	free(ch);
	return rc;
}

void
tdb_trail_close(TdbTrailReader *r)
{
	if (r == NULL)
		return;
	footer_cache_release(r->sf);
	free(r);
}

/*
 * The footer's bytes as they are now, not the decode shared since the
 * first open (a damaged footer under an unchanged trailer would have the
 * same key): read, checked and decoded again, then dropped (tdb_trail_verify).
 */
int
trail_reread_footer(TdbTrailReader *r, TdbTrailError *err)
{
	uint64_t	size = tdb_pager_size(r->pager);
	uint8_t		tbuf[TDB_TRAIL_TRAILER_SIZE];
	TdbTrailTrailer t;
	TdbTrailFooter fresh;
	uint8_t    *fbuf;
	int			rc;

	if ((rc = tdb_pager_read(r->pager, size - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE, tbuf, err)) < 0 ||
		(rc = tdb_trail_trailer_decode(tbuf, sizeof(tbuf), size, &t, err)) < 0)
		return rc;
	if ((fbuf = malloc(t.footer_length ? t.footer_length : 1)) == NULL)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory for a footer of %llu bytes",
							  (unsigned long long) t.footer_length);
	rc = trail_read_footer(r->pager, &t, fbuf, &fresh, err);
	free(fbuf);
	if (rc < 0)
		return rc;
	/* version 3: every chunk too, read and checked again */
	if (fresh.lazy)
		rc = trail_footer3_load_all(&fresh, true, trail_reader_read, r->pager, err);
	tdb_trail_footer_release(&fresh);
	return rc;
}
