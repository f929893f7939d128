/*
 * writer.c
 *	  Builds a trail file from events given in any order.
 *
 * The writer sorts the events by (trail, time, arrival) within a memory
 * limit: a buffer of compact records (about 40 bytes plus 8 per extra
 * column each) is sorted and spilled as a run to an unnamed temporary file
 * when full, and the runs are merged (spill.c) while pages are cut, so a
 * file of any size needs the limit's memory, plus the string dictionaries
 * and the footer's state, which are accounted against it.  The order is
 * total, so the file is the same whatever the limit.  Trails are written
 * in ascending id order (the reader binary-searches the index), each
 * trail's pages one after another (version 1 and version 2's trail order),
 * events in time order (stable for equal times).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../checksum.h"
#include "format.h"
#include "writer.h"

#define PROGRESS_EVERY ((uint64_t) 1 << 20)


static uint64_t
intern_hash(const char *s)
{
	uint64_t	h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (uint8_t) *s) * 1099511628211ull;
	return h;
}

static bool
intern_grow(Interner *in)
{
	uint32_t	ns = in->nslots ? in->nslots * 2 : 1024;
	uint32_t   *slots = calloc(ns, sizeof(uint32_t));

	if (slots == NULL)
		return false;
	for (uint32_t id = 0; id < in->n; id++)
	{
		uint64_t	h = intern_hash(in->strs[id]) & (ns - 1);

		while (slots[h])
			h = (h + 1) & (ns - 1);
		slots[h] = id + 1;
	}
	free(in->slots);
	in->bytes += (size_t) (ns - in->nslots) * sizeof(uint32_t);
	in->slots = slots;
	in->nslots = ns;
	return true;
}

bool
tdb_trail_order_by_name(const char *name, TdbTrailOrder *order, bool *by_time)
{
	*by_time = strcmp(name, "time") == 0;
	if (strcmp(name, "trail") == 0)
		*order = TDB_TRAIL_ORDER_TRAIL;
	else if (strcmp(name, "auto") == 0)
		*order = TDB_TRAIL_ORDER_AUTO;
	else if (strcmp(name, "space-time") == 0 || *by_time)
		*order = TDB_TRAIL_ORDER_SPACETIME;
	else
		return false;
	return true;
}

/*
 * ORDER_AUTO records the first this many trails it meets (a table of at
 * most 16 MB): their events' mean span decides, the file's span is every
 * event's.
 */
#define TRAIL_AUTO_SAMPLE_TRAILS (1u << 18)

/* ORDER_AUTO's record of one trail (TdbTrailWriter.spans). */
typedef struct TrailSpan
{
	int64_t		key;			/* the sort's key: the id, or a string id's intern number */
	int64_t		tmin,
				tmax;
	uint64_t	n;				/* 0: an empty slot */
} TrailSpan;

/* A slot for key: every bit of the key mixed in (MurmurHash3's finalizer), as ids of a few high bits are common. */
static uint32_t
span_slot(int64_t key, uint32_t cap)
{
	uint64_t	h = (uint64_t) key;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return (uint32_t) h & (cap - 1);
}

/* key's slot in the table: its own, or the empty one where it would go. */
static TrailSpan *
span_find(TrailSpan *spans, uint32_t cap, int64_t key)
{
	uint32_t	i;

	for (i = span_slot(key, cap); spans[i].n > 0 && spans[i].key != key; i = (i + 1) & (cap - 1))
		;
	return &spans[i];
}

/* The table twice as large, within the memory limit: both count while it is copied. */
static int
span_grow(TdbTrailWriter *w, TdbTrailError *err)
{
	uint32_t	cap = w->spancap ? w->spancap * 2 : 1024;
	TrailSpan  *ns;
	int			rc;

	if ((rc = trail_writer_check_memory(w, (size_t) cap * sizeof(TrailSpan), 0, 0, err)) < 0)
		return rc;
	if ((ns = calloc(cap, sizeof(TrailSpan))) == NULL)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	for (uint32_t j = 0; j < w->spancap; j++)
		if (w->spans[j].n > 0)
			*span_find(ns, cap, w->spans[j].key) = w->spans[j];
	free(w->spans);
	w->spans = ns;
	w->spancap = cap;
	w->span_bytes = (size_t) cap * sizeof(TrailSpan);
	return 0;
}

/* Count an event of trail key at time t (the table doubles at half full). */
static int
span_note(TdbTrailWriter *w, int64_t key, int64_t t, TdbTrailError *err)
{
	TrailSpan  *sp;
	int			rc;

	if (w->n == 0 || t < w->span_t0)
		w->span_t0 = t;
	if (w->n == 0 || t > w->span_t1)
		w->span_t1 = t;
	if ((uint64_t) w->nspans * 2 >= w->spancap && w->nspans < TRAIL_AUTO_SAMPLE_TRAILS &&
		(rc = span_grow(w, err)) < 0)
		return rc;
	sp = span_find(w->spans, w->spancap, key);
	if (sp->n == 0)
	{
		/* a sample of the trails is enough to decide: the first ones met, and only they */
		if (w->nspans >= TRAIL_AUTO_SAMPLE_TRAILS)
			return 0;
		sp->key = key;
		sp->tmin = sp->tmax = t;
		w->nspans++;
	}
	if (t < sp->tmin)
		sp->tmin = t;
	if (t > sp->tmax)
		sp->tmax = t;
	sp->n++;
	w->span_events++;
	return 0;
}

/*
 * ORDER_AUTO at finish: whether the recorded trails are short beside the
 * file's time span (TDB_TRAIL_AUTO_*); *mean_us and *file_us say by how
 * much (the order note).
 */
static bool
trail_writer_trails_short(const TdbTrailWriter *w, double *mean_us, double *file_us)
{
	double		weighted = 0;

	*mean_us = *file_us = 0;
	if (w->n == 0 || w->span_events == 0)
		return false;
	for (uint32_t j = 0; j < w->spancap; j++)
		if (w->spans[j].n > 0)
		{
			const TrailSpan *sp = &w->spans[j];

			weighted += (double) sp->n * ((double) sp->tmax - (double) sp->tmin);
		}
	*mean_us = weighted / (double) w->span_events;
	*file_us = (double) w->span_t1 - (double) w->span_t0;
	return *file_us >= TDB_TRAIL_AUTO_SPAN_RATIO * *mean_us && *file_us > (double) w->opts.bucket_us &&
		*mean_us <= TDB_TRAIL_AUTO_MAX_BUCKETS * (double) w->opts.bucket_us;
}

/* Returns the id of s, adding a copy if new; -1 on out of memory. */
static int64_t
intern(Interner *in, const char *s)
{
	uint64_t	h;

	if ((in->n + 1) * 2 > in->nslots && !intern_grow(in))
		return -1;
	h = intern_hash(s) & (in->nslots - 1);
	while (in->slots[h])
	{
		if (strcmp(in->strs[in->slots[h] - 1], s) == 0)
			return in->slots[h] - 1;
		h = (h + 1) & (in->nslots - 1);
	}
	if (in->n == in->cap)
	{
		uint32_t	nc = in->cap ? in->cap * 2 : 256;
		char	  **ns = realloc(in->strs, nc * sizeof(char *));

		if (ns == NULL)
			return -1;
		in->strs = ns;
		in->cap = nc;
	}
	if ((in->strs[in->n] = strdup(s)) == NULL)
		return -1;
	/* the copy, malloc's overhead and its pointer */
	in->bytes += strlen(s) + 1 + 16 + sizeof(char *);
	in->slots[h] = in->n + 1;
	return in->n++;
}

static void
intern_free(Interner *in)
{
	for (uint32_t i = 0; i < in->n; i++)
		free(in->strs[i]);
	free(in->strs);
	free(in->slots);
}


int
tdb_trail_writer_create(const TdbTrailSchema *schema, const TdbTrailWriterOptions *opts,
						TdbTrailWriter **out, TdbTrailError *err)
{
	TdbTrailWriter *w;

	*out = NULL;
	if (schema->id_type != TDB_TRAIL_INT64 && schema->id_type != TDB_TRAIL_STRING)
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "the trail id must be an integer or a string");
	if (schema->ncolumns < 0 || schema->ncolumns > TDB_TRAIL_MAX_COLUMNS)
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "%d extra columns; at most %d",
							  schema->ncolumns, TDB_TRAIL_MAX_COLUMNS);
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	w->schema = *schema;
	for (int c = 0; c < schema->ncolumns; c++)
	{
		TdbTrailType t = schema->columns[c].type;

		if (t != TDB_TRAIL_INT64 && t != TDB_TRAIL_FLOAT64 && t != TDB_TRAIL_STRING &&
			!(t == TDB_TRAIL_BOOL && (opts == NULL || opts->version != 1)))
		{
			free(w);
			return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "column %s: unknown type %d",
								  schema->columns[c].name, (int) t);
		}
		w->types[c] = t;
	}
	if (opts)
		w->opts = *opts;
	if (w->opts.page_target_bytes == 0)
		w->opts.page_target_bytes = opts && opts->order == TDB_TRAIL_ORDER_SPACETIME && !opts->by_time ?
			16 * 1024 : 64 * 1024;
	if (w->opts.page_max_events == 0)
		w->opts.page_max_events = 8192;
	if (w->opts.page_max_span_us == 0)
		w->opts.page_max_span_us = TDB_TRAIL_PAGE_SPAN_DEFAULT_US;
	if (w->opts.version == 0)
		w->opts.version = TDB_TRAIL_VERSION_DEFAULT;
	if (w->opts.bucket_us == 0)
		w->opts.bucket_us = (w->opts.by_time || w->opts.order == TDB_TRAIL_ORDER_AUTO ? 3600LL : 600LL) * 1000000;
	/* version 1 has trail order only: what auto decides there */
	if (w->opts.order == TDB_TRAIL_ORDER_AUTO && w->opts.version == 1)
		w->opts.order = TDB_TRAIL_ORDER_TRAIL;
	if (w->opts.memory_limit == 0)
		w->opts.memory_limit = TDB_TRAIL_WRITER_MEMORY_DEFAULT;
	if (w->opts.version < TDB_TRAIL_VERSION_MIN || w->opts.version > TDB_TRAIL_VERSION ||
		(w->opts.version == 1 && w->opts.order != TDB_TRAIL_ORDER_TRAIL) ||
		(w->opts.order != TDB_TRAIL_ORDER_TRAIL && w->opts.order != TDB_TRAIL_ORDER_SPACETIME &&
		 w->opts.order != TDB_TRAIL_ORDER_AUTO) ||
		(w->opts.by_time && w->opts.order != TDB_TRAIL_ORDER_SPACETIME) ||
		w->opts.bucket_us < 0)
	{
		int			v = w->opts.version;

		free(w);
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL,
							  "format version %d with page order %d; expected version 1 (trail order), or 2 to %d (trail, space-time or auto order, a positive time bucket)",
							  v, (int) (opts ? opts->order : 0), TDB_TRAIL_VERSION);
	}
	if (w->opts.version >= 3 && w->opts.page_max_events > TRAIL_V3_PAGE_MAX_EVENTS)
	{
		uint32_t	m = w->opts.page_max_events;

		free(w);
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL,
							  "page_max_events %u; format versions 3 and 4 take at most %d", m,
							  TRAIL_V3_PAGE_MAX_EVENTS);
	}
	if (w->opts.memory_limit < TDB_TRAIL_WRITER_MEMORY_MIN)
	{
		size_t		m = w->opts.memory_limit;

		free(w);
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "a writer memory limit of %zu bytes; at least %zu",
							  m, TDB_TRAIL_WRITER_MEMORY_MIN);
	}
	w->rs = trail_rec_size(schema->ncolumns);
	w->rec = calloc(1, w->rs);
	if (w->rec == NULL)
	{
		free(w);
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	}
	w->gx0 = w->gy0 = INT32_MAX;
	w->gx1 = w->gy1 = INT32_MIN;
	trail_sorter_init(&w->sort, w->rs, trail_rec_cmp, w, w->opts.temp_dir, w->opts.memory_limit);
	w->sort.cancel = w->opts.cancel;
	w->sort.cancel_arg = w->opts.cancel_arg;
	w->sort.temp_used = &w->temp_used;
	w->sort.temp_limit = w->opts.temp_limit;
	*out = w;
	return 0;
}

int
tdb_trail_writer_add(TdbTrailWriter *w, const TdbTrailEvent *ev, TdbTrailError *err)
{
	int			nc = w->schema.ncolumns;
	TrailRec   *e = (TrailRec *) w->rec;
	int64_t    *bits = (int64_t *) (e + 1);
	uint8_t    *nulls = (uint8_t *) (bits + nc);
	uint32_t	spilled = w->sort.spilled;
	int			rc;

	if (w->finished)
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "the writer has finished");
	if (!(ev->lon >= -180.0 && ev->lon <= 180.0 && ev->lat >= -90.0 && ev->lat <= 90.0))
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL,
							  "coordinate (%g, %g) outside [-180, 180] x [-90, 90]", ev->lon, ev->lat);
	if (w->n >= UINT32_MAX)
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "more than 2^32 events in one file");
	memset(w->rec, 0, w->rs);
	if (w->schema.id_type == TDB_TRAIL_STRING)
	{
		if (ev->key.s == NULL || strlen(ev->key.s) > 65535)
			return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "a string trail id is missing or too long");
		if ((e->key = intern(&w->keys, ev->key.s)) < 0)
			return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	}
	else
		e->key = ev->key.i;
	e->time = ev->time_us;
	e->lon = tdb_trail_coord_fix(ev->lon);
	e->lat = tdb_trail_coord_fix(ev->lat);
	e->ord = w->n;
	for (int c = 0; c < nc; c++)
	{
		const TdbTrailValue *v = &ev->values[c];

		if (v->isnull)
		{
			nulls[c >> 3] |= (uint8_t) (1u << (c & 7));
			continue;
		}
		if (w->types[c] == TDB_TRAIL_FLOAT64)
			memcpy(&bits[c], &v->f, 8);
		else if (w->types[c] == TDB_TRAIL_STRING)
		{
			if (v->s == NULL || strlen(v->s) > (1 << 20))
				return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "column %s: string missing or over 1 MiB",
									  w->schema.columns[c].name);
			if ((bits[c] = intern(&w->lexicon, v->s)) < 0)
				return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
		}
		else if (w->types[c] == TDB_TRAIL_BOOL)
			bits[c] = v->i != 0;
		else
			bits[c] = v->i;
	}
	w->dict_bytes = w->keys.bytes + w->lexicon.bytes;
	if (w->opts.order == TDB_TRAIL_ORDER_AUTO && (rc = span_note(w, e->key, e->time, err)) < 0)
		return rc;
	if ((rc = trail_writer_check_memory(w, 0, 0, 0, err)) < 0)
		return rc;
	w->sort.limit = trail_writer_budget(w) - w->dict_bytes - w->span_bytes;
	if ((rc = trail_sorter_put(&w->sort, w->rec, err)) < 0)
		return rc;
	if (e->lon < w->gx0) w->gx0 = e->lon;
	if (e->lon > w->gx1) w->gx1 = e->lon;
	if (e->lat < w->gy0) w->gy0 = e->lat;
	if (e->lat > w->gy1) w->gy1 = e->lat;
	w->n++;
	if (w->sort.spilled != spilled)
		trail_writer_progress(w, "sorting", w->n, 0);
	return 0;
}

int
trail_rec_cmp(const void *a, const void *b, void *arg)
{
	const TdbTrailWriter *w = arg;
	const TrailRec *ea = a,
			   *eb = b;

	if (ea->key != eb->key)
	{
		if (w->schema.id_type == TDB_TRAIL_STRING)
			return strcmp(w->keys.strs[ea->key], w->keys.strs[eb->key]);
		return ea->key < eb->key ? -1 : 1;
	}
	if (ea->time != eb->time)
		return ea->time < eb->time ? -1 : 1;
	return (ea->ord > eb->ord) - (ea->ord < eb->ord);
}

/* ---- version 1 ---------------------------------------------------------- */

typedef struct Writer1
{
	TdbTrailWriter *w;
	TrailOut   *out;
	CodecBuf	tmp;			/* the last page encoded */
	TdbTrailPageInfo pi;
	TdbTrailFooter f;
	uint32_t	pagecap,
				trailcap;
	uint64_t	done;
} Writer1;

typedef struct PageArg
{
	const TdbTrailWriter *w;
	const TrailWin *win;
} PageArg;

static bool
page_get(void *arg, uint32_t i, int col, int64_t *bits)
{
	PageArg    *pa = arg;
	const TrailRec *r = trail_win_rec(pa->win, i);

	if (trail_rec_null(r, pa->w->schema.ncolumns, col))
		return true;
	if (bits)
		*bits = trail_rec_bits(r)[col];
	return false;
}

/* Encode the window's first n events as one page into x->tmp, x->pi; its length, 0 on out of memory. */
static uint32_t
encode_page1(void *ctx, TrailWin *win, uint32_t n)
{
	Writer1    *x = ctx;
	const TdbTrailWriter *w = x->w;
	int64_t    *time = malloc(n * sizeof(int64_t));
	int32_t    *lon = malloc(n * sizeof(int32_t));
	int32_t    *lat = malloc(n * sizeof(int32_t));
	PageArg		pa = {w, win};
	TdbTrailPageInfo *pi = &x->pi;
	bool		ok = time && lon && lat;

	x->tmp.len = 0;
	if (ok)
	{
		pi->tmin = INT64_MAX;
		pi->tmax = INT64_MIN;
		pi->xmin = pi->ymin = INT32_MAX;
		pi->xmax = pi->ymax = INT32_MIN;
		for (uint32_t i = 0; i < n; i++)
		{
			const TrailRec *e = trail_win_rec(win, i);

			time[i] = e->time;
			lon[i] = e->lon;
			lat[i] = e->lat;
			if (e->time < pi->tmin) pi->tmin = e->time;
			if (e->time > pi->tmax) pi->tmax = e->time;
			if (e->lon < pi->xmin) pi->xmin = e->lon;
			if (e->lon > pi->xmax) pi->xmax = e->lon;
			if (e->lat < pi->ymin) pi->ymin = e->lat;
			if (e->lat > pi->ymax) pi->ymax = e->lat;
		}
		trail_page_encode(&x->tmp, win->tnum[0], n, time, lon, lat, w->schema.ncolumns, w->types,
						  page_get, &pa);
		ok = x->tmp.ok;
		pi->length = (uint32_t) x->tmp.len;
		pi->nevents = n;
		pi->trail = win->tnum[0];
	}
	free(time);
	free(lon);
	free(lat);
	return ok ? (pi->length ? pi->length : 1) : 0;
}

/* Append the page encoded last (of n events) and fold it into its trail. */
static int
emit_page1(void *ctx, TrailWin *win, uint32_t n, TdbTrailError *err)
{
	Writer1    *x = ctx;
	TdbTrailPageInfo pi = x->pi;
	TdbTrailInfo *ti = &x->f.trails[x->f.ntrails - 1];
	int			rc;

	(void) win;
	if (pi.length > TRAIL_PAGE_MAX_BYTES)
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "a page of %u bytes; lower page_max_events",
							  pi.length);
	if ((rc = trail_writer_canceled(x->w, err)) < 0)
		return rc;
	pi.offset = trail_out_offset(x->out);
	codec_put_bytes(&x->out->buf, x->tmp.data, x->tmp.len);
	if (x->f.npages == x->pagecap &&
		(rc = trail_writer_check_memory(x->w, (size_t) x->trailcap * sizeof(TdbTrailInfo) +
										(size_t) x->pagecap * 2 * sizeof(TdbTrailPageInfo),
										x->f.ntrails, x->f.npages, err)) < 0)
		return rc;
	if (!trail_push_page(&x->f.pages, &x->f.npages, &x->pagecap, &pi))
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	if ((rc = trail_out_flush(x->out, false, err)) < 0)
		return rc;
	if (pi.tmin < ti->tmin) ti->tmin = pi.tmin;
	if (pi.tmax > ti->tmax) ti->tmax = pi.tmax;
	if (pi.xmin < ti->xmin) ti->xmin = pi.xmin;
	if (pi.xmax > ti->xmax) ti->xmax = pi.xmax;
	if (pi.ymin < ti->ymin) ti->ymin = pi.ymin;
	if (pi.ymax > ti->ymax) ti->ymax = pi.ymax;
	ti->npages++;
	ti->nevents += n;
	if ((x->done + n) / PROGRESS_EVERY != x->done / PROGRESS_EVERY)
		trail_writer_progress(x->w, "writing pages", x->done + n, x->w->n);
	x->done += n;
	return 0;
}

static int
finish1(TdbTrailWriter *w, TrailOut *out, TdbTrailError *err)
{
	Writer1		x;
	TrailWin	win = {.rs = w->rs};
	TdbTrailTrailer t;
	uint8_t		hdr[TDB_TRAIL_HEADER_SIZE];
	int			rc = 0;

	memset(&x, 0, sizeof(x));
	x.w = w;
	x.out = out;
	codec_buf_init(&x.tmp);
	x.f.schema = w->schema;
	x.f.nstrings = w->lexicon.n;
	x.f.strings = w->lexicon.strs;

	memset(hdr, 0, sizeof(hdr));
	memcpy(hdr, TRAIL_HEADER_MAGIC, 8);
	codec_put_u32le(hdr + 8, 1);
	codec_put_bytes(&out->buf, hdr, sizeof(hdr));

	for (uint64_t guard = 0; rc == 0 && guard <= w->n; guard++)
	{
		const TrailRec *r = trail_sorter_peek(&w->sort);
		TrailCut	c = {w, &w->sort, 0, offsetof(TrailRec, key), 0, 0, encode_page1, emit_page1, &x};
		TdbTrailInfo *ti;

		if (r == NULL)
			break;
		if (x.f.ntrails == x.trailcap)
		{
			uint32_t	nc = x.trailcap ? x.trailcap * 2 : 256;
			TdbTrailInfo *nt = realloc(x.f.trails, nc * sizeof(TdbTrailInfo));

			if (nt == NULL)
			{
				rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
				break;
			}
			x.f.trails = nt;
			x.trailcap = nc;
			if ((rc = trail_writer_check_memory(w, (size_t) nc * sizeof(TdbTrailInfo) +
												(size_t) x.pagecap * sizeof(TdbTrailPageInfo),
												x.f.ntrails, x.f.npages, err)) < 0)
				break;
		}
		ti = &x.f.trails[x.f.ntrails];
		memset(ti, 0, sizeof(*ti));
		if (w->schema.id_type == TDB_TRAIL_STRING)
			ti->key.s = w->keys.strs[r->key];
		else
			ti->key.i = r->key;
		ti->first_page = x.f.npages;
		ti->tmin = INT64_MAX;
		ti->tmax = INT64_MIN;
		ti->xmin = ti->ymin = INT32_MAX;
		ti->xmax = ti->ymax = INT32_MIN;
		c.grp = r->key;
		c.tnum = x.f.ntrails++;
		rc = trail_cut_pages(&c, &win, err);
	}
	if (rc == 0 && w->sort.rc < 0)
	{
		*err = w->sort.err;
		rc = w->sort.rc;
	}
	if (rc == 0)
	{
		x.f.nevents = w->n;
		memset(&t, 0, sizeof(t));
		t.footer_offset = trail_out_offset(out);
		x.tmp.len = 0;
		trail_footer_encode(&x.tmp, &x.f);
		if (!x.tmp.ok)
			rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory encoding the footer");
	}
	if (rc == 0)
	{
		t.footer_length = x.tmp.len;
		t.footer_crc = tdb_crc32c(x.tmp.data, x.tmp.len);
		codec_put_bytes(&out->buf, x.tmp.data, x.tmp.len);
		t.file_size = trail_out_offset(out) + TDB_TRAIL_TRAILER_SIZE;
		t.version = 1;
		if (codec_buf_reserve(&out->buf, TDB_TRAIL_TRAILER_SIZE))
		{
			trail_trailer_encode(out->buf.data + out->buf.len, &t);
			out->buf.len += TDB_TRAIL_TRAILER_SIZE;
		}
		rc = trail_out_flush(out, true, err);
	}
	free(win.recs);
	free(win.tnum);
	free(x.f.pages);
	free(x.f.trails);
	codec_buf_free(&x.tmp);
	return rc;
}

/* ---- finishing ---------------------------------------------------------- */

int
tdb_trail_writer_finish_to(TdbTrailWriter *w, TdbTrailSink sink, void *arg, uint64_t *len,
						   TdbTrailError *err)
{
	TrailOut	out;
	TdbTrailError scratch;
	int			rc;

	if (err == NULL)
		err = &scratch;
	*len = 0;
	if (w->finished)
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "the writer has finished");
	w->finished = true;
	if (w->opts.order == TDB_TRAIL_ORDER_AUTO)
	{
		double		mean_us,
					file_us;

		w->opts.by_time = trail_writer_trails_short(w, &mean_us, &file_us);
		w->opts.order = w->opts.by_time ? TDB_TRAIL_ORDER_SPACETIME : TDB_TRAIL_ORDER_TRAIL;
		free(w->spans);
		w->spans = NULL;
		w->nspans = w->spancap = 0;
		w->span_bytes = 0;
		snprintf(w->order_note, sizeof(w->order_note),
				 "page order %s (auto: its trails span %.2f h on average, the file %.2f h)",
				 w->opts.by_time ? "time" : "trail", mean_us / 3.6e9, file_us / 3.6e9);
	}
	trail_writer_progress(w, "merging", 0, w->n);
	if ((rc = trail_sorter_finish(&w->sort, trail_writer_budget(w) / 8, err)) < 0)
		return rc;
	memset(&out, 0, sizeof(out));
	codec_buf_init(&out.buf);
	out.sink = sink;
	out.arg = arg;
	if (w->opts.version >= 2)
		rc = trail_writer_finish2(w, &out, err);
	else
		rc = finish1(w, &out, err);
	if (rc == 0)
	{
		*len = out.base;
		if (w->n > 0)
			trail_writer_progress(w, "writing pages", w->n, w->n);
	}
	codec_buf_free(&out.buf);
	trail_sorter_free(&w->sort);
	return rc;
}

static int
buf_sink(void *arg, const void *p, size_t n, TdbTrailError *err)
{
	CodecBuf   *b = arg;

	codec_put_bytes(b, p, n);
	if (!b->ok)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory holding the file");
	return 0;
}

const char *
tdb_trail_writer_order_note(const TdbTrailWriter *w)
{
	return w->order_note;
}

int
tdb_trail_writer_finish(TdbTrailWriter *w, uint8_t **bufp, size_t *lenp, TdbTrailError *err)
{
	CodecBuf	b;
	uint64_t	len;
	int			rc;

	*bufp = NULL;
	*lenp = 0;
	codec_buf_init(&b);
	rc = tdb_trail_writer_finish_to(w, buf_sink, &b, &len, err);
	if (rc < 0)
	{
		codec_buf_free(&b);
		return rc;
	}
	*bufp = b.data;
	*lenp = b.len;
	return 0;
}

uint64_t
tdb_trail_writer_temp_bytes(const TdbTrailWriter *w)
{
	return w->temp_used;
}

void
tdb_trail_writer_free(TdbTrailWriter *w)
{
	if (w == NULL)
		return;
	trail_sorter_free(&w->sort);
	free(w->rec);
	free(w->spans);
	intern_free(&w->keys);
	intern_free(&w->lexicon);
	free(w);
}
