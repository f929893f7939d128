/*
 * fuzz_decode.c
 *	  libFuzzer target over everything that parses trail file bytes: the
 *	  trailer, the footer and every page the footer describes, and version
 *	  3's column encodings fed directly.
 *
 * The input is taken as a whole trail file (so the fuzzer can mutate a
 * real file's pages, footer and trailer together); footer and page
 * decoders are also fed the input directly with a trailer that vouches for
 * it (CRC computed here), so mutations reach the structural checks behind
 * the checksums.  Any crash, sanitizer report or timeout is a bug; a
 * rejection is the expected outcome.  Seeds: `make fuzz-trail` starts from
 * the corpus directory, which a first run fills from valid files written
 * by seed_corpus().
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../checksum.h"
#include "codec.h"
#include "colenc.h"
#include "footer3.h"
#include "format.h"
#include "trail.h"
#include "trail_memfile.h"

static void
decode_pages(const TdbTrailFooter *f, const uint8_t *data, size_t size)
{
	TdbTrailPage pg;
	TdbTrailError err;

	memset(&pg, 0, sizeof(pg));
	for (uint32_t i = 0; i < f->npages && i < 4096; i++)
	{
		const TdbTrailPageInfo *pi = &f->pages[i];
		/* the page's bytes as the decoder takes them (version 6: gathered from its columns) */
		uint8_t    *page = pi->length <= size ? malloc(pi->length ? pi->length : 1) : NULL;

		if (page == NULL || pi->length == 0 || !tdb_trail_page_gather(f, i, data, size, page))
		{
			free(page);
			break;
		}
		/* whole, and (versions 2 to 6) with the positions or a column skipped */
		tdb_trail_page_decode(f, i, page, pi->length, &pg, &err);
		if (f->version >= 2)
			tdb_trail_page_decode_some(f, i, page, pi->length, page[0] & 1, (uint64_t) 1 << (page[0] % 64),
									   &pg, &err);

		/*
		 * Then with every chunk's CRC recomputed, as a hostile author writes
		 * them: a mutated page otherwise never gets past its checksums, and
		 * the column codecs (version 4's COLENC_PATCHED and COLENC_RUNS
		 * among them) are reached only through valid seeds.
		 */
		if (f->version >= 2 && pi->chunk_len != NULL)
		{
			uint64_t	off = 0;
			bool		fits = true;

			for (int k = 0; fits && k < 2 + f->schema.ncolumns; k++)
			{
				uint32_t	cl = pi->chunk_len[k];

				if (cl < 4 || cl > pi->length - off)
					fits = false;
				else
				{
					codec_put_u32le(page + off, tdb_crc32c(page + off + 4, cl - 4));
					off += cl;
				}
			}
			if (fits)
				tdb_trail_page_decode(f, i, page, pi->length, &pg, &err);
		}
		free(page);
	}
	tdb_trail_page_release(&pg);
}


/* A version-3 footer: one lookup, then every chunk (errors expected), then the pages. */
static void
decode_lazy(TdbTrailFooter *f, const uint8_t *data, size_t size)
{
	FxMemFile	m = {data, size};
	TdbTrailError err;
	int64_t		id = 0;

	if (f->lazy == NULL)
		return;
	if (size >= 8)
		memcpy(&id, data + (size - 8) / 2, sizeof(id));
	trail_footer3_find(f, id, f->schema.id_type == TDB_TRAIL_STRING ? "a" : NULL, fx_mem_read, &m, &err);
	trail_footer3_load_all(f, true, fx_mem_read, &m, &err);

	/*
	 * Then the chunks' CRCs vouched for (computed here, as a hostile author
	 * would write them), so that mutations reach the chunks' structure
	 * checks: every chunk, then what a lookup checks of each trail and page.
	 */
	{
		F3Lazy	   *z = f->lazy;

		for (int kind = 0; kind < 2; kind++)
			for (uint32_t j = 0; j < z->nchunks[kind]; j++)
			{
				F3Chunk    *ch = &z->chunks[kind][j];

				if (ch->off <= size && ch->len <= size - ch->off)
					ch->crc = tdb_crc32c(data + ch->off, ch->len);
			}
		if (z->lex_off <= size && z->lex_len <= size - z->lex_off)
			z->lex_crc = tdb_crc32c(data + z->lex_off, z->lex_len);
	}
	trail_footer3_load(f, TRAIL3_TRAILS, 0, f->ntrails, TRAIL_ALL_COLUMNS(f->schema.ncolumns), fx_mem_read, &m, &err);
	trail_footer3_load(f, TRAIL3_PAGES, 0, f->npages, 0, fx_mem_read, &m, &err);
	trail_footer3_load_lexicon(f, fx_mem_read, &m, &err);
	{
		const F3Lazy *z = f->lazy;

		for (uint32_t t = 0; t < f->ntrails && t < 4096; t++)
		{
			bool		ready = z->chunks[TRAIL3_TRAILS][t / z->per[TRAIL3_TRAILS]].loaded;

			for (uint32_t k = 0; ready && k < f->trails[t].npages; k++)
			{
				uint32_t	p = f->trails[t].page_list[k];

				ready = z->chunks[TRAIL3_PAGES][p / z->per[TRAIL3_PAGES]].loaded;
			}
			if (ready)
				trail_footer3_trail_ready(f, t, &err);
		}
		for (uint32_t p = 0; p < f->npages && p < 4096; p++)
		{
			uint32_t	lo,
						hi;
			bool		ready = z->chunks[TRAIL3_PAGES][p / z->per[TRAIL3_PAGES]].loaded;

			if (!ready)
				continue;
			trail_footer3_page_trails(f, p, &lo, &hi);
			for (uint64_t t = lo; ready && t <= hi; t += z->per[TRAIL3_TRAILS] - (t % z->per[TRAIL3_TRAILS]))
				ready = z->chunks[TRAIL3_TRAILS][t / z->per[TRAIL3_TRAILS]].loaded;
			if (ready)
				trail_footer3_page_ready(f, p, &err);
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	TdbTrailTrailer t;
	TdbTrailFooter f;
	TdbTrailError err;

	/* 1. the input as a whole file */
	if (size >= TDB_TRAIL_TRAILER_SIZE &&
		tdb_trail_trailer_decode(data + size - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE,
								 size, &t, &err) == 0 &&
		tdb_trail_footer_decode(data + t.footer_offset, t.footer_length, &t, &f, &err) == 0)
	{
		decode_lazy(&f, data, size);
		decode_pages(&f, data, size);
		tdb_trail_footer_release(&f);
	}

	/*
	 * 2. the input as a footer with a matching CRC, at the end of a data
	 * region of the input's own bytes, so structure checks get exercised
	 */
	if (size > 4)
	{
		memset(&t, 0, sizeof(t));
		t.footer_offset = size;
		t.footer_length = size;
		t.footer_crc = tdb_crc32c(data, size);
		t.version = data[4] >= 1 && data[4] <= TDB_TRAIL_VERSION ? data[4] : 2;	/* the footer's own version varint */
		if (tdb_trail_footer_decode(data, size, &t, &f, &err) == 0)
		{
			decode_lazy(&f, data, size);
			decode_pages(&f, data, size);
			tdb_trail_footer_release(&f);
		}
	}

	/*
	 * 3. the input as one column's encoded values: byte 0 the type (1-4),
	 * bytes 1-2 the value count (1..8192), the rest the encoding byte and
	 * payload; what decodes must encode again and read back the same
	 */
	if (size > 3)
	{
		TdbTrailType type = (TdbTrailType) (1 + data[0] % 4);
		uint32_t	nn = 1 + (uint32_t) ((data[1] | data[2] << 8) % 8192);
		int64_t    *out = malloc((size_t) nn * sizeof(int64_t));
		int64_t    *again = malloc((size_t) nn * sizeof(int64_t));
		CodecCur	c = {data + 3, data + size};

		/* byte 1's top bit: the values in runs (a page of several trails), for COLENC_RUNS */
		uint32_t	runs[8],
					nruns = 0;

		if (data[1] & 0x80)
		{
			uint32_t	left = nn;

			for (uint32_t r = 0; r < 7 && 3 + r < size && left > 0; r++)
			{
				runs[nruns] = data[3 + r] % (left + 1);
				left -= runs[nruns++];
			}
			runs[nruns++] = left;
		}
		if (out && again && colenc_get(&c, type, nn, 1000, out, nruns ? runs : NULL, nruns) == NULL)
		{
			CodecBuf	b;
			CodecCur	c2;

			codec_buf_init(&b);
			if (nruns ? colenc_put_runs(&b, type, out, nn, TDB_TRAIL_VERSION, false, runs, nruns) :
				colenc_put(&b, type, out, nn, TDB_TRAIL_VERSION))
			{
				c2.p = b.data;
				c2.end = b.data + b.len;
				if (colenc_get(&c2, type, nn, 1000, again, nruns ? runs : NULL, nruns) != NULL || c2.p != c2.end ||
					memcmp(out, again, (size_t) nn * 8) != 0)
					__builtin_trap();
			}
			codec_buf_free(&b);
		}
		free(out);
		free(again);
	}
	return 0;
}

#ifdef TRAIL_FUZZ_MAIN
/* Seeds: small valid files, written once into the corpus directory. */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = NULL;

	for (int i = 1; i < *argc; i++)
		if ((*argv)[i][0] != '-')
			dir = (*argv)[i];
	if (dir == NULL)
		return 0;
	/* version 1, versions 2 and 3 by trail and space-time; int and string ids */
	for (int k = 0; k < 19; k++)
	{
		TdbTrailSchema s;
		TdbTrailWriter *w;
		/*
		 * k 10-12: version 4 in trail order, small trails sharing pages (and k
		 * 12 space-time); k 13-15: version 5 the same (summary chunks); k
		 * 16-18: version 6 (pages column-major), pages of at most 8 events so
		 * that there are several (one page reads the same in both layouts)
		 */
		TdbTrailWriterOptions o = {.page_target_bytes = k >= 10 ? 4096 : 200, .page_max_events = k >= 10 && k < 16 ? 64 : 8,
			.version = k < 2 ? 1 : k < 6 ? 2 : k < 10 ? 3 : k < 13 ? 4 : k < 16 ? 5 : 6,
			.order = k == 4 || k == 5 || k == 8 || k == 9 || k == 12 || k == 15 || k == 18 ? TDB_TRAIL_ORDER_SPACETIME : TDB_TRAIL_ORDER_TRAIL,
		.bucket_us = 5000000};
		uint8_t    *buf;
		size_t		len;
		char		path[1024];
		FILE	   *fp;

		memset(&s, 0, sizeof(s));
		strcpy(s.id_name, "id");
		s.id_type = k % 2 == 1 ? TDB_TRAIL_STRING : TDB_TRAIL_INT64;
		s.ncolumns = k < 2 ? 3 : 4;
		strcpy(s.columns[3].name, "b");
		s.columns[3].type = TDB_TRAIL_BOOL;
		strcpy(s.columns[0].name, "f");
		s.columns[0].type = TDB_TRAIL_FLOAT64;
		strcpy(s.columns[1].name, "i");
		s.columns[1].type = TDB_TRAIL_INT64;
		strcpy(s.columns[2].name, "s");
		s.columns[2].type = TDB_TRAIL_STRING;
		if (tdb_trail_writer_create(&s, &o, &w, NULL) < 0)
			continue;
		for (int e = 0; e < 40; e++)
		{
			TdbTrailValue v[4];
			TdbTrailEvent ev;
			char		key[16];

			memset(v, 0, sizeof(v));
			memset(&ev, 0, sizeof(ev));
			snprintf(key, sizeof(key), "k%d", k >= 10 ? e % 11 : e % 3);
			ev.key.i = k >= 10 ? e % 11 : e % 3;
			ev.key.s = key;
			ev.time_us = 1000000LL * e;
			ev.lon = -74 + e * 0.001;
			ev.lat = 40 + e * 0.002;
			v[0].f = k < 8 ? e * 1.5 : e % 4 ? 0.1 * (e / 4) : -0.0;
			v[1].i = k < 8 ? e * 7 : e / 5;
			v[1].isnull = e % 5 == 0;
			v[2].s = e % 2 ? "cargo" : "tug";
			v[3].i = e % 3 == 0;
			v[3].isnull = e % 7 == 0;
			ev.values = v;
			tdb_trail_writer_add(w, &ev, NULL);
		}
		if (tdb_trail_writer_finish(w, &buf, &len, NULL) == 0)
		{
			snprintf(path, sizeof(path), "%s/seed-%d.trail", dir, k);
			if ((fp = fopen(path, "wb")) != NULL)
			{
				fwrite(buf, 1, len, fp);
				fclose(fp);
			}
			free(buf);
		}
		tdb_trail_writer_free(w);
	}
	return 0;
}
#endif
