/*
 * test_footer3_hostile.c
 *	  Version-3 footers written by a hostile author: a valid file from the
 *	  writer, its footer decoded whole, changed (entries, trail ranges,
 *	  directory), and encoded again with every CRC recomputed, so that only
 *	  the checks of content can find the lie.  Each must be a clean
 *	  TDB_TRAIL_ECORRUPT where it is read, never wrong rows or a huge
 *	  allocation.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../checksum.h"
#include "footer3.h"
#include "pager.h"
#include "remote.h"
#include "test_footer3_hostile.h"
#include "trail_fixture.h"
#include "trail_unit.h"

#define T0 1600000000000000LL

/* ---- the crafter --------------------------------------------------------------- */

typedef struct Dir
{
	TdbTrailKey key;			/* trail chunks */
	uint64_t	len;
	uint32_t	crc;
	uint64_t	bytes;			/* page chunks */
	uint64_t	nevents;
	int64_t		tmin,
				tmax;
	int32_t		xmin,
				ymin,
				xmax,
				ymax;
} Dir;

typedef struct Model
{
	const TdbTrailFooter *f;	/* the good file's, every chunk loaded */
	const uint8_t *good;
	uint32_t	ntr,
				npg;
	TdbTrailInfo *tr;			/* copies, free to change */
	uint32_t  **lists;			/* tr[i].page_list, owned */
	TdbTrailPageInfo *pg;
	uint32_t   *tlo,
			   *thi;
	uint32_t	per[2];			/* K, P */
	uint64_t	nevents;		/* the head's total */
	int64_t		q;
	int			e;
	/* changes to a directory entry, or to a chunk's bytes before its CRC */
	void		(*dir_hook) (struct Model *m, int kind, uint32_t j, Dir *d);
	void		(*chunk_hook) (struct Model *m, int kind, uint32_t j, CodecBuf *b);
	/* raw_len > 0: the one trail chunk is raw_len zero bytes, its directory tr[0]'s */
	uint64_t	raw_len;
	TdbTrailKey last;			/* with raw_len: the head's last id */
	const char *save;			/* the file also to $TRAIL_HOSTILE_OUT/save.trail (t/085) */
	int			arg;			/* for the hooks */
} Model;

static void
model_free(Model *m)
{
	for (uint32_t i = 0; m->lists && i < m->ntr; i++)
		free(m->lists[i]);
	free(m->lists);
	free(m->tr);
	free(m->pg);
	free(m->tlo);
	free(m->thi);
	memset(m, 0, sizeof(*m));
}

/* The model of an opened file (every chunk loaded: fx_open_buf with need_all). */
static void
model_init(Model *m, const FxOpened *o, const uint8_t *good)
{
	const TdbTrailFooter *f = tdb_trail_footer(o->r);
	const F3Lazy *z = f->lazy;

	memset(m, 0, sizeof(*m));
	m->f = f;
	m->good = good;
	m->ntr = f->ntrails;
	m->npg = f->npages;
	m->tr = calloc(m->ntr + 1, sizeof(TdbTrailInfo));
	m->lists = calloc(m->ntr + 1, sizeof(uint32_t *));
	m->pg = calloc(m->npg + 1, sizeof(TdbTrailPageInfo));
	m->tlo = calloc(m->npg + 1, sizeof(uint32_t));
	m->thi = calloc(m->npg + 1, sizeof(uint32_t));
	memcpy(m->tr, f->trails, m->ntr * sizeof(TdbTrailInfo));
	memcpy(m->pg, f->pages, m->npg * sizeof(TdbTrailPageInfo));
	memcpy(m->tlo, z->ptlo, m->npg * sizeof(uint32_t));
	memcpy(m->thi, z->pthi, m->npg * sizeof(uint32_t));
	for (uint32_t i = 0; i < m->ntr; i++)
	{
		m->lists[i] = malloc((m->tr[i].npages + 1) * sizeof(uint32_t));
		memcpy(m->lists[i], f->trails[i].page_list, m->tr[i].npages * sizeof(uint32_t));
		m->tr[i].page_list = m->lists[i];
	}
	m->per[0] = z->per[0];
	m->per[1] = z->per[1];
	m->nevents = f->nevents;
	m->q = z->q;
	for (m->e = 0; ipow10_tab[m->e] != m->q; m->e++)
		;
}

static void
put_u32(CodecBuf *b, uint32_t v)
{
	uint8_t		le[4];

	codec_put_u32le(le, v);
	codec_put_bytes(b, le, 4);
}

/* Grow d's zone map by one entry's. */
static void
dir_zone(Dir *d, bool first, int64_t tmin, int64_t tmax, int32_t xmin, int32_t ymin, int32_t xmax,
		 int32_t ymax)
{
	if (first || tmin < d->tmin)
		d->tmin = tmin;
	if (first || tmax > d->tmax)
		d->tmax = tmax;
	if (first || xmin < d->xmin)
		d->xmin = xmin;
	if (first || ymin < d->ymin)
		d->ymin = ymin;
	if (first || xmax > d->xmax)
		d->xmax = xmax;
	if (first || ymax > d->ymax)
		d->ymax = ymax;
}

/* The file of model m: the good file's pages, the chunks, its lexicon, a head, a trailer. */
static uint8_t *
craft(Model *m, size_t *outlen)
{
	const TdbTrailFooter *f = m->f;
	const F3Lazy *z = f->lazy;
	const TdbTrailSchema *s = &f->schema;
	int			nc = s->ncolumns;
	uint32_t	nch[2] = {(uint32_t) (((uint64_t) m->ntr + m->per[0] - 1) / m->per[0]),
		(uint32_t) (((uint64_t) m->npg + m->per[1] - 1) / m->per[1])};
	Dir		   *dirs[2];
	CodecBuf	out,
				h;
	TdbTrailTrailer t;
	uint8_t		magic[4],
				tr[TDB_TRAIL_TRAILER_SIZE];

	codec_buf_init(&out);
	codec_buf_init(&h);
	codec_put_bytes(&out, m->good, f->data_end);
	for (int kind = 0; kind < 2; kind++)
	{
		dirs[kind] = calloc(nch[kind] + 1, sizeof(Dir));
		for (uint32_t j = 0; j < nch[kind]; j++)
		{
			Dir		   *d = &dirs[kind][j];
			CodecBuf	b;
			uint32_t	n = kind == 0 ? m->ntr : m->npg;
			int64_t		pt = 0,
						px = 0,
						py = 0,
						plo = 0;

			codec_buf_init(&b);
			if (kind == 0 && m->raw_len > 0)
			{
				for (uint64_t i = 0; i < m->raw_len; i++)
					codec_put_u8(&b, 0);
				d->key = m->tr[0].key;
				d->nevents = m->nevents;
				dir_zone(d, true, m->tr[0].tmin, m->tr[0].tmax, m->tr[0].xmin, m->tr[0].ymin,
						 m->tr[0].xmax, m->tr[0].ymax);
				n = 0;
			}
			for (uint64_t i = (uint64_t) j * m->per[kind]; i < n && i < ((uint64_t) j + 1) * m->per[kind]; i++)
			{
				bool		first = i == (uint64_t) j * m->per[kind];

				if (kind == 0)
				{
					const TdbTrailInfo *ti = &m->tr[i];

					if (first)
						d->key = ti->key;
					trail_put_key(&b, s->id_type, &ti->key);
					codec_put_varint(&b, ti->nevents);
					put_zone3(&b, m->q, ti->tmin, ti->tmax, ti->xmin, ti->ymin, ti->xmax, ti->ymax);
					codec_put_varint(&b, ti->npages);
					for (uint32_t k = 0; k < ti->npages; k++)
						codec_put_varint(&b, k == 0 ? ti->page_list[0] :
										 ti->page_list[k] - ti->page_list[k - 1] - 1);
					for (int c = 0; c < nc; c++)
						trail_put_stats(&b, s->columns[c].type, &ti->stats[c], true);
					d->nevents += ti->nevents;
					dir_zone(d, first, ti->tmin, ti->tmax, ti->xmin, ti->ymin, ti->xmax, ti->ymax);
				}
				else
				{
					const TdbTrailPageInfo *p = &m->pg[i];

					codec_put_varint(&b, p->nevents);
					for (int k = 0; k < 2 + nc; k++)
						codec_put_varint(&b, p->chunk_len[k]);
					codec_put_svarint(&b, (int64_t) m->tlo[i] - plo);
					codec_put_varint(&b, m->thi[i] - m->tlo[i]);
					plo = m->tlo[i];
					codec_put_svarint(&b, (int64_t) ((uint64_t) (p->tmin / m->q) - (uint64_t) pt));
					codec_put_varint(&b, ((uint64_t) p->tmax - (uint64_t) p->tmin) / (uint64_t) m->q);
					codec_put_svarint(&b, p->xmin - px);
					codec_put_svarint(&b, p->ymin - py);
					codec_put_varint(&b, (uint64_t) ((int64_t) p->xmax - p->xmin));
					codec_put_varint(&b, (uint64_t) ((int64_t) p->ymax - p->ymin));
					pt = p->tmin / m->q;
					px = p->xmin;
					py = p->ymin;
					d->nevents += p->nevents;
					d->bytes += p->length;
					dir_zone(d, first, p->tmin, p->tmax, p->xmin, p->ymin, p->xmax, p->ymax);
				}
			}
			if (m->chunk_hook)
				m->chunk_hook(m, kind, j, &b);
			d->len = b.len;
			d->crc = tdb_crc32c(b.data, b.len);
			codec_put_bytes(&out, b.data, b.len);
			codec_buf_free(&b);
			if (m->dir_hook)
				m->dir_hook(m, kind, j, d);
		}
	}
	if (z->nstrings > 0)
		codec_put_bytes(&out, m->good + z->lex_off, z->lex_len);

	codec_put_u32le(magic, TRAIL_FOOTER_MAGIC);
	codec_put_bytes(&h, magic, 4);
	codec_put_varint(&h, 3);
	trail_put_schema(&h, s);
	codec_put_u8(&h, (uint8_t) f->order);
	codec_put_varint(&h, (uint64_t) f->bucket_us);
	codec_put_u8(&h, (uint8_t) m->e);
	codec_put_varint(&h, f->data_end);
	codec_put_varint(&h, m->nevents);
	codec_put_varint(&h, m->ntr);
	codec_put_varint(&h, m->npg);
	codec_put_varint(&h, z->nstrings);
	if (z->nstrings > 0)
	{
		codec_put_varint(&h, z->lex_len);
		put_u32(&h, z->lex_crc);
	}
	if (m->ntr > 0)
	{
		put_zone3(&h, m->q, f->whole.tmin, f->whole.tmax, f->whole.xmin, f->whole.ymin,
				  f->whole.xmax, f->whole.ymax);
		trail_put_key(&h, s->id_type, m->raw_len ? &m->last : &m->tr[m->ntr - 1].key);
		for (int c = 0; c < nc; c++)
			trail_put_stats(&h, s->columns[c].type, &f->whole.stats[c], true);
	}
	codec_put_varint(&h, m->per[0]);
	codec_put_varint(&h, m->per[1]);
	for (int kind = 0; kind < 2; kind++)
		for (uint32_t j = 0; j < nch[kind]; j++)
		{
			const Dir  *d = &dirs[kind][j];

			if (kind == 0)
				trail_put_key(&h, s->id_type, &d->key);
			codec_put_varint(&h, d->len);
			put_u32(&h, d->crc);
			if (kind == 1)
				codec_put_varint(&h, d->bytes);
			codec_put_varint(&h, d->nevents);
			put_zone3(&h, m->q, d->tmin, d->tmax, d->xmin, d->ymin, d->xmax, d->ymax);
		}
	free(dirs[0]);
	free(dirs[1]);
	memset(&t, 0, sizeof(t));
	t.footer_offset = out.len;
	t.footer_length = h.len;
	t.footer_crc = tdb_crc32c(h.data, h.len);
	t.version = 3;
	codec_put_bytes(&out, h.data, h.len);
	t.file_size = out.len + TDB_TRAIL_TRAILER_SIZE;
	trail_trailer_encode(tr, &t);
	codec_put_bytes(&out, tr, sizeof(tr));
	codec_buf_free(&h);
	*outlen = out.len;
	return out.data;
}

/* ---- files and queries ------------------------------------------------------------ */

/* Trail k: id 3k + 1, n events a second apart, nc int64 columns, pages of page_events. */
uint8_t *
hostile_write_file(int ntrails, int n, uint32_t page_events, int nc, TdbTrailOrder order, size_t *len)
{
	TdbTrailSchema sc = fx_schema(TDB_TRAIL_INT64, nc, TDB_TRAIL_INT64);
	TdbTrailWriterOptions o;
	TdbTrailWriter *w;
	TdbTrailError err;
	TdbTrailValue vals[TDB_TRAIL_MAX_COLUMNS];

	memset(&o, 0, sizeof(o));
	o.version = 3;
	o.order = order;
	o.page_max_events = page_events;
	if (tdb_trail_writer_create(&sc, &o, &w, &err) < 0)
		return NULL;
	for (int k = 0; k < ntrails; k++)
		for (int i = 0; i < n; i++)
		{
			TdbTrailEvent ev;

			memset(&ev, 0, sizeof(ev));
			memset(vals, 0, sizeof(vals));
			ev.key.i = 3LL * k + 1;
			ev.time_us = T0 + (int64_t) i * 1000000 + k;
			ev.lon = -10 + (k % 100) * 0.01;
			ev.lat = 40 + i * 0.001;
			for (int c = 0; c < nc; c++)
				vals[c].i = k * 100 + i + c;
			ev.values = vals;
			if (tdb_trail_writer_add(w, &ev, &err) < 0)
			{
				tdb_trail_writer_free(w);
				return NULL;
			}
		}
	return fx_writer_done(w, len);
}

int
hostile_open(FxOpened *o, const uint8_t *buf, size_t len, TdbTrailError *err)
{
	TdbPagerOptions po;
	int			rc;

	fx_tmpdir(o->dir, sizeof(o->dir), "hostile3");
	snprintf(o->path, sizeof(o->path), "%s/f.trail", o->dir);
	if (!fx_write_file(o->path, buf, len))
		return TDB_TRAIL_EIO;
	tdb_trail_footer_cache_clear();
	memset(&po, 0, sizeof(po));
	po.url = o->path;
	if ((rc = tdb_pager_open(&po, &o->pager, err)) < 0)
		return rc;
	if ((rc = tdb_trail_open(o->pager, &o->r, err)) < 0)
	{
		tdb_pager_close(o->pager);
		unlink(o->path);
		rmdir(o->dir);
		o->r = NULL;
	}
	return rc;
}

/* Events of trail id (NULL: all); < 0 the error. */
int64_t
hostile_count_events(TdbTrailReader *r, const int64_t *id, TdbTrailError *err)
{
	TdbTrailQuery q;
	TdbTrailScan *s;
	TdbTrailEvent ev;
	int64_t		n = 0;
	int			rc;

	memset(&q, 0, sizeof(q));
	if (id)
	{
		q.ids_int = id;
		q.nids = 1;
	}
	if ((rc = tdb_trail_scan_begin(r, &q, &s, err)) < 0)
		return rc;
	while ((rc = tdb_trail_scan_next(s, &ev, err)) > 0)
		n++;
	tdb_trail_scan_end(s);
	return rc < 0 ? rc : n;
}

/*
 * The model of a good file of ntrails trails of n events, pages of
 * page_events, nc columns; the reader stays open (its footer backs the
 * model) until fx_close_opened.
 */
static bool
model_of(Model *m, FxOpened *o, uint8_t **good, size_t *len, int ntrails, int n,
		 uint32_t page_events, int nc)
{
	*good = hostile_write_file(ntrails, n, page_events, nc, TDB_TRAIL_ORDER_TRAIL, len);
	if (*good == NULL || !fx_open_buf(o, *good, *len, "hostile3g", true, true))
	{
		unit_fail(__FILE__, __LINE__, "cannot write or open the good file");
		free(*good);
		return false;
	}
	model_init(m, o, *good);
	return true;
}

/* Whether msg contains one of the '|'-separated phrases of what. */
static bool
names_one_of(const char *msg, const char *what)
{
	char		buf[256];
	char	   *save = NULL;

	snprintf(buf, sizeof(buf), "%s", what);
	for (char *w = strtok_r(buf, "|", &save); w != NULL; w = strtok_r(NULL, "|", &save))
		if (strstr(msg, w) != NULL)
			return true;
	return false;
}

/* The crafted file of m also to $TRAIL_HOSTILE_OUT/<save>.trail (t/085's files), when both are set. */
static void
save_crafted(const Model *m, const uint8_t *buf, size_t len)
{
	char		path[1024];

	if (m->save == NULL || getenv("TRAIL_HOSTILE_OUT") == NULL)
		return;
	snprintf(path, sizeof(path), "%s/%s.trail", getenv("TRAIL_HOSTILE_OUT"), m->save);
	CHECK(fx_write_file(path, buf, len));
}

/* The crafted file of m: opens, then query id (NULL: a full scan) gives want (< 0: that error, naming what). */
static void
expect(Model *m, const int64_t *id, int64_t want, const char *what)
{
	size_t		len;
	uint8_t    *buf = craft(m, &len);
	FxOpened	o;
	TdbTrailError err;
	int64_t		got;
	uint64_t	n;

	memset(&err, 0, sizeof(err));
	save_crafted(m, buf, len);
	if (hostile_open(&o, buf, len, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "crafted file refused at open: %s", err.msg);
		free(buf);
		return;
	}
	got = hostile_count_events(o.r, id, &err);
	if (got != want || (want < 0 && !names_one_of(err.msg, what)))
		unit_fail(__FILE__, __LINE__, "query %s: %lld (%s), expected %lld naming \"%s\"",
				  id ? "by id" : "of all", (long long) got, got < 0 ? err.msg : "rows", (long long) want,
				  what ? what : "");
	if (want < 0)
		CHECK(tdb_trail_verify(o.r, &n, &err) == TDB_TRAIL_ECORRUPT);
	fx_close_opened(&o);
	tdb_trail_footer_cache_clear();
	free(buf);
}

/* ---- the tests ------------------------------------------------------------------- */

/* The crafter unchanged writes the writer's bytes: what the tests change is all that differs. */
UNIT_TEST(test_trail_v3_hostile_crafter_identity)
{
	Model		m;
	FxOpened	o;
	uint8_t    *good,
			   *again;
	size_t		len,
				alen;

	if (!model_of(&m, &o, &good, &len, 131, 5, 2, 2))
		return;
	again = craft(&m, &alen);
	CHECK_EQ_U64(alen, len);
	CHECK(alen == len && memcmp(again, good, len) == 0);
	free(again);
	/* K = 1 and K = 2^32 - 1, P likewise: any K and P the head gives are read */
	for (int v = 0; v < 2; v++)
	{
		int64_t		id = 3 * 130 + 1;

		m.per[0] = m.per[1] = v ? UINT32_MAX : 1;
		expect(&m, &id, 5, NULL);
		expect(&m, NULL, 131 * 5, NULL);
	}
	model_free(&m);
	fx_close_opened(&o);
	free(good);
}

/*
 * Page 3 (trail 1's first) claims trail 0 alone (its trail range), trail
 * 0's zone map is widened to hold it and trail 1's narrowed past it: the
 * run of trail 1 in that page is outside the range the footer gives, and
 * trail 1's events there outside its zone map (a query of trail 1 in their
 * time would prune them).  A scan that reads the page must refuse it.
 */
UNIT_TEST(test_trail_v3_hostile_run_outside_trail_range)
{
	Model		m;
	FxOpened	o;
	uint8_t    *good;
	size_t		len;

	if (!model_of(&m, &o, &good, &len, 3, 5, 2, 2))
		return;
	CHECK(m.tlo[3] == 1 && m.thi[3] == 1 && m.tr[1].page_list[0] == 3);
	m.tlo[3] = m.thi[3] = 0;
	m.tr[0].tmax = m.tr[1].tmax;
	m.tr[0].xmax = m.tr[1].xmax;
	m.tr[0].ymax = m.tr[1].ymax > m.tr[0].ymax ? m.tr[1].ymax : m.tr[0].ymax;
	m.tr[1].tmin = m.pg[4].tmin;
	m.save = "run_outside_range";
	/* a full scan loads every chunk first, and the page list's check sees the lie before the page's */
	expect(&m, NULL, TDB_TRAIL_ECORRUPT, "outside the page's trail range|names page 3, whose trails are 0 to 0");
	model_free(&m);
	fx_close_opened(&o);
	free(good);
}

/*
 * Trail 0's page list names trail 1's page 3 instead of its own pages 0-2:
 * a lookup of trail 0 would read page 3, find none of its events and
 * answer nothing.  Its pages must hold its trail.
 */
UNIT_TEST(test_trail_v3_hostile_page_list_of_another_trail)
{
	Model		m;
	FxOpened	o;
	uint8_t    *good;
	size_t		len;
	int64_t		id = 1;

	if (!model_of(&m, &o, &good, &len, 3, 5, 2, 2))
		return;
	CHECK(m.tr[0].npages == 3);
	m.lists[0][0] = 3;
	m.tr[0].npages = 1;
	m.tr[0].first_page = 3;
	m.save = "list_of_another_trail";
	expect(&m, &id, TDB_TRAIL_ECORRUPT, "names page 3, whose trails are 1 to 1");
	model_free(&m);
	fx_close_opened(&o);
	free(good);
}

/*
 * Trail 0's page list leaves out its last page: a lookup would answer 4
 * of its 5 events.  The events of its one-trail pages must add up to its
 * count.
 */
UNIT_TEST(test_trail_v3_hostile_page_list_missing_a_page)
{
	Model		m;
	FxOpened	o;
	uint8_t    *good;
	size_t		len;
	int64_t		id = 1;

	if (!model_of(&m, &o, &good, &len, 3, 5, 2, 2))
		return;
	CHECK(m.tr[0].npages == 3 && m.pg[2].nevents == 1);
	m.tr[0].npages = 2;
	m.save = "list_missing_a_page";
	expect(&m, &id, TDB_TRAIL_ECORRUPT, "pages hold 4 of its events, the footer says 5");
	model_free(&m);
	fx_close_opened(&o);
	free(good);
}

static void
page_chunk_total(Model *m, int kind, uint32_t j, Dir *d)
{
	(void) j;
	if (kind == TRAIL3_PAGES)
		d->nevents = m->nevents;
}

/*
 * The head counts 8 M trails in one trail chunk of 64 MB (8 bytes each, as
 * the head checks), each of 64 columns: decoding the chunk would size its
 * summaries for 8 M x 64 before reading a byte (25 GB).  An entry takes at
 * least 10 bytes and one per column: the chunk is refused as too short.
 */
UNIT_TEST(test_trail_v3_hostile_chunk_too_short_for_its_trails)
{
	Model		m;
	FxOpened	o;
	uint8_t    *good;
	size_t		len;
	int64_t		id = 0;
	const uint32_t n = 8u << 20;

	/* 128 pages of one trail: room for 8 M events (65,536 a page) */
	if (!model_of(&m, &o, &good, &len, 1, 256, 2, 64))
		return;
	CHECK_EQ_U64(m.npg, 128);
	m.per[1] = 128;
	/* its first trail id 0 (a zero byte is the svarint 0), its last n - 1 */
	m.tr[0].key.i = 0;
	m.last.i = n - 1;
	m.raw_len = 8 * (uint64_t) n;
	m.ntr = n;
	m.nevents = n;
	m.per[0] = n;
	m.dir_hook = page_chunk_total;
	expect(&m, &id, TDB_TRAIL_ECORRUPT, "too short for its entries");
	m.ntr = 1;
	model_free(&m);
	fx_close_opened(&o);
	free(good);
}

/* ---- lies the head's checks find at open ----------------------------------------- */

static void
lie_dir(Model *m, int kind, uint32_t j, Dir *d)
{
	switch (m->arg)
	{
		case 0:					/* trail chunk 1 starts at chunk 0's first id */
			if (kind == TRAIL3_TRAILS && j == 1)
				d->key = m->tr[0].key;
			break;
		case 1:					/* trail chunk 0 one byte longer than it is */
			if (kind == TRAIL3_TRAILS && j == 0)
				d->len++;
			break;
		case 2:					/* page chunk 0 claims a page byte of chunk 1 */
			if (kind == TRAIL3_PAGES)
				d->bytes += j == 0 ? 1 : j == 1 ? -1 : 0;
			break;
		case 3:					/* trail chunk 0 claims an event of chunk 1 */
			if (kind == TRAIL3_TRAILS)
				d->nevents += j == 0 ? 1 : j == 1 ? -1 : 0;
			break;
		case 4:					/* page chunk 1 an event of chunk 0 */
			if (kind == TRAIL3_PAGES)
				d->nevents += j == 0 ? -1 : j == 1 ? 1 : 0;
			break;
		case 5:					/* trail chunk 1's CRC */
			if (kind == TRAIL3_TRAILS && j == 1)
				d->crc ^= 1;
			break;
		case 6:					/* 2^63 more events in chunk 0 of each directory */
			if (j == 0)
				d->nevents += (uint64_t) 1 << 63;
			break;
	}
}

/* The crafted file of m is refused at open naming what. */
static void
expect_open(Model *m, const char *what)
{
	size_t		len;
	uint8_t    *buf = craft(m, &len);
	FxOpened	o;
	TdbTrailError err;
	int			rc;

	memset(&err, 0, sizeof(err));
	save_crafted(m, buf, len);
	rc = hostile_open(&o, buf, len, &err);
	if (rc != TDB_TRAIL_ECORRUPT || strstr(err.msg, what) == NULL)
		unit_fail(__FILE__, __LINE__, "open: %d (%s), expected a corrupt footer naming \"%s\"", rc,
				  err.msg, what);
	if (rc == 0)
		fx_close_opened(&o);
	tdb_trail_footer_cache_clear();
	free(buf);
}

/*
 * Directory lies with every CRC valid: ids out of order, chunk lengths and
 * event counts past what the pages can hold are refused at open; page bytes and event counts moved
 * between chunks, and a chunk's CRC, when the chunk is read (the chunks
 * before stay readable), and the same again when asked again.
 */
UNIT_TEST(test_trail_v3_hostile_directory_lies)
{
	Model		m;
	FxOpened	o;
	uint8_t    *good;
	size_t		len;
	int64_t		id0 = 1,
				id1 = 3 * 64 + 1,
				id_last = 3 * 130 + 1;
	static const char *const at_read[] = {
		"page lengths disagree with the chunk's bytes",
		"trail event counts disagree with the chunk's",
		"bad page event count",
		"checksum mismatch in trail chunk 1",
	};

	if (!model_of(&m, &o, &good, &len, 131, 5, 2, 2))
		return;
	m.dir_hook = lie_dir;
	m.arg = 0;
	expect_open(&m, "trail chunks not in id order");
	m.arg = 1;
	expect_open(&m, "bad chunk length");
	/*
	 * A total past 2^63 (count(*) answered from the head alone came out
	 * negative): a page holds at most 65,536 events, so a page chunk at
	 * most that many per page.
	 */
	m.arg = 6;
	m.nevents += (uint64_t) 1 << 63;
	m.save = "count_past_2_63";
	expect_open(&m, "bad event count of a chunk");
	m.save = NULL;
	m.nevents -= (uint64_t) 1 << 63;
	for (m.arg = 2; m.arg <= 5; m.arg++)
	{
		/* trail 0: trail chunk 0, page chunk 0; trail 64: trail chunk 1; trail 130: neither */
		const int64_t *bad = m.arg == 5 ? &id1 : &id0;
		size_t		clen;
		uint8_t    *buf = craft(&m, &clen);
		FxOpened	c;
		TdbTrailError err;
		uint64_t	n;

		if (hostile_open(&c, buf, clen, &err) < 0)
		{
			unit_fail(__FILE__, __LINE__, "lie %d refused at open: %s", m.arg, err.msg);
			free(buf);
			continue;
		}
		for (int again = 0; again < 2; again++)
		{
			int64_t		got = hostile_count_events(c.r, bad, &err);

			if (got != TDB_TRAIL_ECORRUPT || strstr(err.msg, at_read[m.arg - 2]) == NULL)
				unit_fail(__FILE__, __LINE__, "lie %d, read %d: %lld (%s), expected \"%s\"", m.arg, again,
						  (long long) got, got < 0 ? err.msg : "rows", at_read[m.arg - 2]);
		}
		/* a trail whose trail and page chunks the lie leaves alone */
		CHECK(hostile_count_events(c.r, m.arg == 5 ? &id0 : &id_last, &err) == 5);
		CHECK(tdb_trail_verify(c.r, &n, &err) == TDB_TRAIL_ECORRUPT);
		fx_close_opened(&c);
		tdb_trail_footer_cache_clear();
		free(buf);
	}
	model_free(&m);
	fx_close_opened(&o);
	free(good);
}
