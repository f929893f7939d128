/*
 * writer.c
 *	  Builds a trail file from events given in any order.
 *
 * The writer keeps every event in memory (about 40 bytes plus 16 per extra
 * column each), so a file is limited by RAM; trail files are written once
 * by a batch job, which can afford that, and holding everything is what
 * lets it group events by trail and sort them by time without the caller's
 * help.  Trails are written in ascending id order (the reader binary-searches
 * the index), each trail's pages one after another, events in time order
 * (stable for equal times).
 */
#include <stdlib.h>
#include <string.h>

#include "../checksum.h"
#include "format.h"
#include "writer.h"


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
	in->slots = slots;
	in->nslots = ns;
	return true;
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
		w->opts.page_target_bytes = opts && opts->order == TDB_TRAIL_ORDER_SPACETIME ?
			16 * 1024 : 64 * 1024;
	if (w->opts.page_max_events == 0)
		w->opts.page_max_events = 8192;
	if (w->opts.page_max_span_us == 0)
		w->opts.page_max_span_us = 3600LL * 1000000;
	if (w->opts.version == 0)
		w->opts.version = TDB_TRAIL_VERSION_DEFAULT;
	if (w->opts.bucket_us == 0)
		w->opts.bucket_us = 600LL * 1000000;
	if (w->opts.version < TDB_TRAIL_VERSION_MIN || w->opts.version > TDB_TRAIL_VERSION ||
		(w->opts.version == 1 && w->opts.order != TDB_TRAIL_ORDER_TRAIL) ||
		(w->opts.order != TDB_TRAIL_ORDER_TRAIL && w->opts.order != TDB_TRAIL_ORDER_SPACETIME) ||
		w->opts.bucket_us < 0)
	{
		int			v = w->opts.version;

		free(w);
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL,
							  "format version %d with page order %d; expected version 1 (trail order), 2 or 3 (trail or space-time order, a positive time bucket)",
							  v, (int) (opts ? opts->order : 0));
	}
	*out = w;
	return 0;
}

int
tdb_trail_writer_add(TdbTrailWriter *w, const TdbTrailEvent *ev, TdbTrailError *err)
{
	int			nc = w->schema.ncolumns;
	WEvent	   *e;

	if (!(ev->lon >= -180.0 && ev->lon <= 180.0 && ev->lat >= -90.0 && ev->lat <= 90.0))
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL,
							  "coordinate (%g, %g) outside [-180, 180] x [-90, 90]", ev->lon, ev->lat);
	if (w->n == w->cap)
	{
		uint64_t	ncap = w->cap ? w->cap * 2 : 4096;
		WEvent	   *ne = realloc(w->ev, ncap * sizeof(WEvent));
		WVal	   *nv;

		if (ne == NULL)
			return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory at event %llu",
								  (unsigned long long) w->n);
		w->ev = ne;
		nv = realloc(w->vals, (ncap * (uint64_t) nc + 1) * sizeof(WVal));
		if (nv == NULL)
			return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory at event %llu",
								  (unsigned long long) w->n);
		w->vals = nv;
		w->cap = ncap;
	}
	e = &w->ev[w->n];
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
	for (int c = 0; c < nc; c++)
	{
		const TdbTrailValue *v = &ev->values[c];
		WVal	   *o = &w->vals[w->n * nc + c];

		o->isnull = v->isnull;
		o->bits = 0;
		if (v->isnull)
			continue;
		if (w->types[c] == TDB_TRAIL_FLOAT64)
			memcpy(&o->bits, &v->f, 8);
		else if (w->types[c] == TDB_TRAIL_STRING)
		{
			if (v->s == NULL || strlen(v->s) > (1 << 20))
				return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "column %s: string missing or over 1 MiB",
									  w->schema.columns[c].name);
			if ((o->bits = intern(&w->lexicon, v->s)) < 0)
				return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
		}
		else if (w->types[c] == TDB_TRAIL_BOOL)
			o->bits = v->i != 0;
		else
			o->bits = v->i;
	}
	w->n++;
	return 0;
}

/* qsort has no context argument; the sort is single-threaded per process. */
static const TdbTrailWriter *sort_writer;

static int
event_cmp(const void *a, const void *b)
{
	uint32_t	ia = *(const uint32_t *) a,
				ib = *(const uint32_t *) b;
	const WEvent *ea = &sort_writer->ev[ia],
			   *eb = &sort_writer->ev[ib];

	if (ea->key != eb->key)
	{
		if (sort_writer->schema.id_type == TDB_TRAIL_STRING)
			return strcmp(sort_writer->keys.strs[ea->key], sort_writer->keys.strs[eb->key]);
		return ea->key < eb->key ? -1 : 1;
	}
	if (ea->time != eb->time)
		return ea->time < eb->time ? -1 : 1;
	return (ia > ib) - (ia < ib);
}

typedef struct PageArg
{
	const TdbTrailWriter *w;
	const uint32_t *idx;
} PageArg;

static bool
page_get(void *arg, uint32_t i, int col, int64_t *bits)
{
	PageArg    *pa = arg;
	const WVal *v = &pa->w->vals[(uint64_t) pa->idx[i] * pa->w->schema.ncolumns + col];

	if (v->isnull)
		return true;
	if (bits)
		*bits = v->bits;
	return false;
}

/* Encode events idx[0, n) as one page into out; false on out of memory. */
static bool
encode_page(const TdbTrailWriter *w, uint32_t trail, const uint32_t *idx, uint32_t n,
			CodecBuf *out, TdbTrailPageInfo *pi)
{
	int64_t    *time = malloc(n * sizeof(int64_t));
	int32_t    *lon = malloc(n * sizeof(int32_t));
	int32_t    *lat = malloc(n * sizeof(int32_t));
	PageArg		pa = {w, idx};
	size_t		start = out->len;
	bool		ok = time && lon && lat;

	if (ok)
	{
		pi->tmin = INT64_MAX;
		pi->tmax = INT64_MIN;
		pi->xmin = pi->ymin = INT32_MAX;
		pi->xmax = pi->ymax = INT32_MIN;
		for (uint32_t i = 0; i < n; i++)
		{
			const WEvent *e = &w->ev[idx[i]];

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
		trail_page_encode(out, trail, n, time, lon, lat, w->schema.ncolumns, w->types,
						  page_get, &pa);
		ok = out->ok;
		pi->length = (uint32_t) (out->len - start);
		pi->nevents = n;
		pi->trail = trail;
	}
	free(time);
	free(lon);
	free(lat);
	return ok;
}

int
tdb_trail_writer_finish(TdbTrailWriter *w, uint8_t **bufp, size_t *lenp, TdbTrailError *err)
{
	uint32_t   *idx = NULL;
	CodecBuf	out,
				tmp;
	TdbTrailFooter f;
	uint32_t	pagecap = 0;
	uint32_t	trailcap = 0;
	TdbTrailTrailer t;
	uint8_t		hdr[TDB_TRAIL_HEADER_SIZE];
	int			rc = TDB_TRAIL_ENOMEM;

	*bufp = NULL;
	*lenp = 0;
	if (w->n > UINT32_MAX)
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "more than 2^32 events in one file");
	memset(&f, 0, sizeof(f));
	f.schema = w->schema;
	f.nstrings = w->lexicon.n;
	f.strings = w->lexicon.strs;
	codec_buf_init(&out);
	codec_buf_init(&tmp);

	idx = malloc((w->n ? w->n : 1) * sizeof(uint32_t));
	if (idx == NULL)
		goto done;
	for (uint32_t i = 0; i < w->n; i++)
		idx[i] = i;
	sort_writer = w;
	qsort(idx, w->n, sizeof(uint32_t), event_cmp);
	sort_writer = NULL;
	if (w->opts.version >= 2)
	{
		rc = trail_writer_finish2(w, idx, bufp, lenp, err);
		goto done;
	}

	memset(hdr, 0, sizeof(hdr));
	memcpy(hdr, TRAIL_HEADER_MAGIC, 8);
	codec_put_u32le(hdr + 8, 1);
	codec_put_bytes(&out, hdr, sizeof(hdr));

	for (uint64_t a = 0; a < w->n;)
	{
		uint64_t	b = a;
		TdbTrailInfo ti;

		while (b < w->n && w->ev[idx[b]].key == w->ev[idx[a]].key)
			b++;
		memset(&ti, 0, sizeof(ti));
		if (w->schema.id_type == TDB_TRAIL_STRING)
			ti.key.s = w->keys.strs[w->ev[idx[a]].key];
		else
			ti.key.i = w->ev[idx[a]].key;
		ti.first_page = f.npages;
		ti.nevents = b - a;
		ti.tmin = INT64_MAX;
		ti.tmax = INT64_MIN;
		ti.xmin = ti.ymin = INT32_MAX;
		ti.xmax = ti.ymax = INT32_MIN;
		for (uint64_t s = a; s < b;)
		{
			uint32_t	n = (uint32_t) ((b - s) < w->opts.page_max_events ? (b - s) : w->opts.page_max_events);
			TdbTrailPageInfo pi;

			if (w->opts.page_max_span_us > 0)
			{
				/* events are in time order: stop before the span is exceeded */
				int64_t		t0 = w->ev[idx[s]].time;

				for (uint32_t k = 1; k < n; k++)
					if ((uint64_t) w->ev[idx[s + k]].time - (uint64_t) t0 > (uint64_t) w->opts.page_max_span_us)
					{
						n = k;
						break;
					}
			}

			/* shrink until the page fits the target (a single event always fits) */
			for (int tries = 0;; tries++)
			{
				tmp.len = 0;
				if (!encode_page(w, f.ntrails, idx + s, n, &tmp, &pi))
					goto done;
				if (pi.length <= w->opts.page_target_bytes || n == 1 || tries == 8)
					break;
				n = (uint32_t) ((uint64_t) n * w->opts.page_target_bytes / pi.length);
				if (n == 0)
					n = 1;
			}
			if (pi.length > TRAIL_PAGE_MAX_BYTES)
			{
				rc = tdb_trail_fail(err, TDB_TRAIL_EINVAL, "a page of %u bytes; lower page_max_events",
									pi.length);
				goto done;
			}
			pi.offset = out.len;
			codec_put_bytes(&out, tmp.data, tmp.len);
			if (!out.ok || !trail_push_page(&f.pages, &f.npages, &pagecap, &pi))
				goto done;
			if (pi.tmin < ti.tmin) ti.tmin = pi.tmin;
			if (pi.tmax > ti.tmax) ti.tmax = pi.tmax;
			if (pi.xmin < ti.xmin) ti.xmin = pi.xmin;
			if (pi.xmax > ti.xmax) ti.xmax = pi.xmax;
			if (pi.ymin < ti.ymin) ti.ymin = pi.ymin;
			if (pi.ymax > ti.ymax) ti.ymax = pi.ymax;
			ti.npages++;
			s += n;
		}
		if (f.ntrails == trailcap)
		{
			uint32_t	nc = trailcap ? trailcap * 2 : 256;
			TdbTrailInfo *nt = realloc(f.trails, nc * sizeof(TdbTrailInfo));

			if (nt == NULL)
				goto done;
			f.trails = nt;
			trailcap = nc;
		}
		f.trails[f.ntrails++] = ti;
		a = b;
	}
	f.nevents = w->n;

	memset(&t, 0, sizeof(t));
	t.footer_offset = out.len;
	tmp.len = 0;
	trail_footer_encode(&tmp, &f);
	if (!tmp.ok)
		goto done;
	t.footer_length = tmp.len;
	t.footer_crc = tdb_crc32c(tmp.data, tmp.len);
	codec_put_bytes(&out, tmp.data, tmp.len);
	t.file_size = out.len + TDB_TRAIL_TRAILER_SIZE;
	t.version = 1;
	if (codec_buf_reserve(&out, TDB_TRAIL_TRAILER_SIZE))
	{
		trail_trailer_encode(out.data + out.len, &t);
		out.len += TDB_TRAIL_TRAILER_SIZE;
	}
	if (!out.ok)
		goto done;
	*bufp = out.data;
	*lenp = out.len;
	codec_buf_init(&out);
	rc = 0;

done:
	if (rc == TDB_TRAIL_ENOMEM)
		tdb_trail_fail(err, rc, "out of memory writing %llu events", (unsigned long long) w->n);
	free(idx);
	free(f.pages);
	free(f.trails);
	codec_buf_free(&out);
	codec_buf_free(&tmp);
	return rc;
}

void
tdb_trail_writer_free(TdbTrailWriter *w)
{
	if (w == NULL)
		return;
	free(w->ev);
	free(w->vals);
	intern_free(&w->keys);
	intern_free(&w->lexicon);
	free(w);
}
