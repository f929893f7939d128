/*
 * writer2.h
 *	  What the parts of the version-2 writer share (private to writer2.c,
 *	  writer2_spacetime.c and writer2_finish.c): its state and the encoding
 *	  of one page.
 */
#ifndef TDB_TRAIL_WRITER2_H
#define TDB_TRAIL_WRITER2_H

#include "format.h"
#include "writer.h"

/*
 * What version 2 adds to the writer: pages cut by trail (as version 1) or
 * by space and time (a time bucket, then segments of trails in that bucket
 * in Hilbert order of their centres, several to a page), each page encoded
 * in chunks by trail_page2_encode, and per trail its page list and column
 * summaries, folded in file order.
 */
typedef struct Writer2
{
	TdbTrailWriter *w;
	TrailOut   *out;
	CodecBuf	tmp;
	TdbTrailFooter f;
	uint32_t	pagecap,
				trailcap;
	uint32_t   *pairs;			/* (trail, page) of every run, in page order */
	uint64_t	npairs,
				paircap;
	TdbTrailStats *tstats;		/* ntrails x ncolumns */
	uint32_t   *ident;			/* 0, 1, ... page_max_events - 1 */
	uint32_t   *cl;				/* scratch chunk lengths */
	uint64_t	chunk_bytes;	/* the pages' chunk_len arrays */
	uint64_t	done;			/* events in pages */
} Writer2;

/* The footer's state in memory, as the writer's limit counts it. */
size_t		w2_footer_bytes(const Writer2 *x);

/* Encode window events js[0, n) into x->tmp (pi: zone map and sizes); false: no memory. */
bool		w2_encode_page2(Writer2 *x, const TrailWin *win, const uint32_t *js, uint32_t n,
							uint32_t *chunk_len, TdbTrailPageInfo *pi);

/* Encode and append the page of window events js[0, n), its trails' entries updated. */
int			w2_emit_page2(Writer2 *x, const TrailWin *win, const uint32_t *js, uint32_t n,
						  TdbTrailError *err);

/* The cutter's callbacks (trail_cut_pages): the window's first n events. */
uint32_t	w2_cut_encode2(void *ctx, TrailWin *win, uint32_t n);
int			w2_cut_emit2(void *ctx, TrailWin *win, uint32_t n, TdbTrailError *err);

/* A new trail (the next in id order) from its first sorted event. */
int			w2_new_trail(Writer2 *x, const TrailRec *r, TdbTrailError *err);

/* Trail order (writer2.c): every page. */
int			w2_emit_trails(Writer2 *x, TdbTrailError *err);

/* Space-time order (writer2_spacetime.c): every page. */
int			w2_emit_spacetime(Writer2 *x, TdbTrailError *err);

#endif							/* TDB_TRAIL_WRITER2_H */
