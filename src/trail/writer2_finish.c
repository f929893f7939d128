/*
 * writer2_finish.c
 *	  tdb_trail_writer_finish for versions 2 to 6: the pages in trail order
 *	  (writer2.c) or space-time order (writer2_spacetime.c), version 6's
 *	  column-major layout of small files' pages, then the page lists, the
 *	  footer and the trailer.
 */
#include <stdlib.h>
#include <string.h>

#include "../checksum.h"
#include "writer2.h"

/*
 * Version 6: the pages, all still in the output buffer at [16, data_end)
 * (row-major as emitted), laid out column-major: every page's core chunk in
 * page order, then every page's position chunk, then each extra column's.
 * The footer's page entries are unchanged (chunk lengths); the reader finds
 * each chunk from them (docs/trail-format.md, "Version 6").
 */
static int
lay_out_columns(Writer2 *x, TdbTrailError *err)
{
	TrailOut   *out = x->out;
	int			nc = x->w->schema.ncolumns;
	uint64_t	start = TDB_TRAIL_HEADER_SIZE,
				bytes = x->f.data_end - start,
				at = start;
	uint8_t    *rows = malloc(bytes ? bytes : 1);

	if (rows == NULL)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory laying out the pages");
	memcpy(rows, out->buf.data + start, bytes);
	for (int k = 0; k < 2 + nc; k++)
		for (uint32_t p = 0; p < x->f.npages; p++)
		{
			const TdbTrailPageInfo *pi = &x->f.pages[p];
			uint64_t	pos = pi->offset - start;

			for (int i = 0; i < k; i++)
				pos += pi->chunk_len[i];
			memcpy(out->buf.data + at, rows + pos, pi->chunk_len[k]);
			at += pi->chunk_len[k];
		}
	free(rows);
	codec_put_u32le(out->buf.data + 8, 6);	/* the header's version */
	x->f.version = 6;
	return 0;
}

int
trail_writer_finish2(TdbTrailWriter *w, TrailOut *out, TdbTrailError *err)
{
	Writer2		x;
	int			nc = w->schema.ncolumns;
	uint32_t   *lists = NULL;
	uint8_t		hdr[TDB_TRAIL_HEADER_SIZE];
	TdbTrailTrailer t;
	int			rc = 0;

	memset(&x, 0, sizeof(x));
	x.w = w;
	x.out = out;
	codec_buf_init(&x.tmp);
	/* version 6 is written as 5 (row-major) until finish finds the pages small enough */
	x.f.version = (uint16_t) (w->opts.version > TDB_TRAIL_VERSION_ROWMAJOR ? TDB_TRAIL_VERSION_ROWMAJOR :
							  w->opts.version);
	x.f.order = w->opts.order;
	x.f.bucket_us = w->opts.order == TDB_TRAIL_ORDER_SPACETIME ? w->opts.bucket_us : 0;
	x.f.schema = w->schema;
	x.f.nstrings = w->lexicon.n;
	x.f.strings = w->lexicon.strs;
	x.trailcap = 256;
	x.f.trails = calloc(x.trailcap, sizeof(TdbTrailInfo));
	x.tstats = calloc((size_t) x.trailcap * (nc ? nc : 1), sizeof(TdbTrailStats));
	x.ident = malloc((size_t) w->opts.page_max_events * sizeof(uint32_t));
	x.cl = malloc((size_t) (2 + nc) * sizeof(uint32_t));
	if (x.f.trails == NULL || x.tstats == NULL || x.ident == NULL || x.cl == NULL)
	{
		rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
		goto done;
	}
	for (uint32_t i = 0; i < w->opts.page_max_events; i++)
		x.ident[i] = i;

	memset(hdr, 0, sizeof(hdr));
	memcpy(hdr, TRAIL_HEADER_MAGIC, 8);
	codec_put_u32le(hdr + 8, x.f.version);
	codec_put_bytes(&out->buf, hdr, sizeof(hdr));

	if (w->opts.order == TDB_TRAIL_ORDER_SPACETIME)
		rc = w2_emit_spacetime(&x, err);
	else
		rc = w2_emit_trails(&x, err);
	if (rc == 0 && w->sort.rc < 0)
	{
		*err = w->sort.err;
		rc = w->sort.rc;
	}
	if (rc < 0)
		goto done;
	for (uint32_t k = 0; k < x.f.ntrails; k++)
		x.f.trails[k].stats = &x.tstats[(size_t) k * nc];

	/* page lists: the (trail, page) pairs grouped by trail, pages ascending */
	lists = malloc((x.npairs ? x.npairs : 1) * sizeof(uint32_t));
	if (lists == NULL)
	{
		rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
		goto done;
	}
	{
		uint64_t	at = 0;

		for (uint32_t k = 0; k < x.f.ntrails; k++)
		{
			x.f.trails[k].page_list = lists + at;
			x.f.trails[k].first_page = UINT32_MAX;
			at += x.f.trails[k].npages;
			x.f.trails[k].npages = 0;
		}
		for (uint64_t p = 0; p < x.npairs; p++)
		{
			TdbTrailInfo *ti = &x.f.trails[x.pairs[2 * p]];

			((uint32_t *) ti->page_list)[ti->npages++] = x.pairs[2 * p + 1];
		}
		for (uint32_t k = 0; k < x.f.ntrails; k++)
			x.f.trails[k].first_page = x.f.trails[k].page_list[0];
	}
	x.f.nevents = w->n;

	memset(&t, 0, sizeof(t));
	x.f.data_end = trail_out_offset(out);
	/* small pages: column-major (they are all in the buffer, TRAIL_OUT_FLUSH_BYTES) */
	if (w->opts.version >= 6 && x.f.data_end - TDB_TRAIL_HEADER_SIZE <= TDB_TRAIL_COLMAJOR_MAX_BYTES &&
		out->base == 0 && (rc = lay_out_columns(&x, err)) < 0)
		goto done;
	if (x.f.version >= 3)
	{
		/* chunks, then the head the trailer names */
		trail_footer3_encode(&out->buf, out->base, &x.f, &t);
		if (!out->buf.ok)
		{
			rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory encoding the footer");
			goto done;
		}
	}
	else
	{
		t.footer_offset = trail_out_offset(out);
		x.tmp.len = 0;
		trail_footer2_encode(&x.tmp, &x.f);
		if (!x.tmp.ok)
		{
			rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory encoding the footer");
			goto done;
		}
		t.footer_length = x.tmp.len;
		t.footer_crc = tdb_crc32c(x.tmp.data, x.tmp.len);
		codec_put_bytes(&out->buf, x.tmp.data, x.tmp.len);
	}
	t.file_size = trail_out_offset(out) + TDB_TRAIL_TRAILER_SIZE;
	t.version = x.f.version;
	if (codec_buf_reserve(&out->buf, TDB_TRAIL_TRAILER_SIZE))
	{
		trail_trailer_encode(out->buf.data + out->buf.len, &t);
		out->buf.len += TDB_TRAIL_TRAILER_SIZE;
	}
	rc = trail_out_flush(out, true, err);

done:
	for (uint32_t p = 0; p < x.f.npages; p++)
		free((void *) x.f.pages[p].chunk_len);
	free(x.f.pages);
	free(x.f.trails);
	free(x.tstats);
	free(x.pairs);
	free(x.ident);
	free(x.cl);
	free(lists);
	codec_buf_free(&x.tmp);
	return rc;
}
