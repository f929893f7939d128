/*
 * reader_open.h
 *	  The reader as reader_open.c opens it, for reader.c's scans: the file's
 *	  pager and its shared decoded footer, and version 3's chunk reads.
 */
#ifndef TDB_TRAIL_READER_OPEN_H
#define TDB_TRAIL_READER_OPEN_H

#include "footer_cache.h"
#include "pager.h"
#include "trail.h"

struct TdbTrailReader
{
	TdbPager   *pager;
	const TdbTrailFooter *footer;	/* sf->f */
	SharedFooter *sf;
};

/* Read the footer the trailer t describes into fbuf and decode it into f. */
int			trail_read_footer(TdbPager *pager, const TdbTrailTrailer *t, uint8_t *fbuf,
							  TdbTrailFooter *f, TdbTrailError *err);

/* The footer read, checked and decoded again from the object, then dropped (tdb_trail_verify). */
int			trail_reread_footer(TdbTrailReader *r, TdbTrailError *err);

/* Reads n exact ranges through the pager (arg): version 3's footer chunks. */
int			trail_reader_read(void *arg, const TdbByteRange *rg, int n, uint8_t **bufs,
							  TdbTrailError *err);

/* The reader's footer when it is version 3's (read in pieces), else NULL. */
TdbTrailFooter *trail_lazy_footer(TdbTrailReader *r);

/*
 * Every chunk of a version-3 footer and the lexicon (tdb_trail_need_all),
 * version 5's summary chunks only when summaries (a full scan reads no
 * summary: a damaged summary chunk fails only what reads it).
 */
int			trail_need_everything(TdbTrailReader *r, bool summaries, TdbTrailError *err);
/* tdb_trail_need_ids, and with lexicon the lexicon in the same read (a scan that decodes strings). */
int			trail_need_ids_lex(TdbTrailReader *r, const int64_t *ids_int, const char *const *ids_str, int n,
							   uint64_t cols, bool lexicon, TdbTrailError *err);

#endif							/* TDB_TRAIL_READER_OPEN_H */
