/*
 * trail_fixture.c
 *	  Random trail data sets and the brute-force oracle (trail_fixture.h).
 */
#define _GNU_SOURCE				/* qsort_r */
#include "trail_fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../tests/unit.h"
#include "codec.h"
#include "pager.h"

static const char *const words[] = {"cargo", "tanker", "fishing", "tug", "pilot", "sailing",
"passenger", "a \"quoted\", word", "", "ünïcode"};

static int
fx_cmp(const void *a, const void *b, void *arg)
{
	const FxEvent *x = a,
			   *y = b;
	bool		str = *(bool *) arg;
	int			c;

	c = str ? strcmp(x->key_s, y->key_s) : (x->key_i > y->key_i) - (x->key_i < y->key_i);
	if (c)
		return c;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

void
fx_make(FxSet *s, uint64_t *rng, bool string_ids, int ntrails, int max_len)
{
	size_t		cap = (size_t) ntrails * (size_t) max_len + 1;

	memset(s, 0, sizeof(*s));
	strcpy(s->schema.id_name, "mmsi");
	s->schema.id_type = string_ids ? TDB_TRAIL_STRING : TDB_TRAIL_INT64;
	strcpy(s->schema.time_name, "ts");
	strcpy(s->schema.lon_name, "lon");
	strcpy(s->schema.lat_name, "lat");
	s->schema.ncolumns = 3;
	strcpy(s->schema.columns[0].name, "sog");
	s->schema.columns[0].type = TDB_TRAIL_FLOAT64;
	strcpy(s->schema.columns[1].name, "heading");
	s->schema.columns[1].type = TDB_TRAIL_INT64;
	strcpy(s->schema.columns[2].name, "kind");
	s->schema.columns[2].type = TDB_TRAIL_STRING;
	s->ev = calloc(cap, sizeof(FxEvent));
	s->keys_i = calloc((size_t) ntrails, sizeof(int64_t));
	s->keys_s = calloc((size_t) ntrails, sizeof(char *));

	for (int t = 0; t < ntrails; t++)
	{
		int64_t		key = (int64_t) (unit_rand(rng) % 2000000000) - 1000000000;
		char		ks[24];
		int			len = 1 + (int) (unit_rand(rng) % (uint64_t) max_len);
		int64_t		time = 1593475200000000LL + (int64_t) (unit_rand(rng) % 86400000000ULL);
		double		lon = unit_rand_double(rng, -179, 179),
					lat = unit_rand_double(rng, -85, 85);
		bool		dup = false;

		snprintf(ks, sizeof(ks), "v%lld", (long long) key);
		for (int k = 0; k < s->nkeys; k++)
			dup |= string_ids ? strcmp(s->keys_s[k], ks) == 0 : s->keys_i[k] == key;
		if (dup)
			continue;
		s->keys_i[s->nkeys] = key;
		s->keys_s[s->nkeys] = strdup(ks);
		s->nkeys++;
		for (int i = 0; i < len; i++)
		{
			FxEvent    *e = &s->ev[s->n];

			e->key_i = string_ids ? 0 : key;
			strcpy(e->key_s, string_ids ? ks : "");
			/* time steps of 0..120 s, some repeated timestamps */
			time += (int64_t) (unit_rand(rng) % 4 == 0 ? 0 : unit_rand(rng) % 120000000);
			e->time = time;
			lon += unit_rand_double(rng, -0.05, 0.05);
			lat += unit_rand_double(rng, -0.05, 0.05);
			lon = lon < -180 ? -180 : lon > 180 ? 180 : lon;
			lat = lat < -90 ? -90 : lat > 90 ? 90 : lat;
			e->lon = tdb_trail_coord_fix(lon);
			e->lat = tdb_trail_coord_fix(lat);
			e->seq = (uint32_t) s->n;
			e->vals[0].isnull = unit_rand(rng) % 10 == 0;
			e->vals[0].f = e->vals[0].isnull ? 0 : unit_rand_double(rng, -1e6, 1e6);
			/* half the trails carry decimals (version 2 stores them scaled) */
			if (t % 2 == 0)
				e->vals[0].f = round(e->vals[0].f * 10) / 10;
			e->vals[1].isnull = unit_rand(rng) % 7 == 0;
			e->vals[1].i = e->vals[1].isnull ? 0 : (int64_t) unit_rand(rng);
			e->vals[2].isnull = unit_rand(rng) % 5 == 0;
			e->vals[2].s = e->vals[2].isnull ? NULL : words[unit_rand(rng) % 10];
			/* a quarter of the trails hold their values in runs (version 3's constants, runs, dictionaries) */
			if (t % 4 == 1 && i > 0 && unit_rand(rng) % 4 != 0)
				memcpy(e->vals, s->ev[s->n - 1].vals, sizeof(e->vals));
			s->n++;
		}
	}
	{
		bool		str = string_ids;

		qsort_r(s->ev, s->n, sizeof(FxEvent), fx_cmp, &str);
	}
}

int			fx_version = 0;
TdbTrailOrder fx_order = TDB_TRAIL_ORDER_TRAIL;
int64_t		fx_bucket_us = 0;
bool		fx_by_time = false;
size_t		fx_memory_limit = 0;
uint32_t	fx_runs = 0;

static void
fx_progress(void *arg, const TdbTrailProgress *p)
{
	(void) arg;
	if (p->runs > fx_runs)
		fx_runs = p->runs;
}
int64_t		fx_page_span_us = 0;
uint32_t	fx_colmajor_files = 0;

void
fx_free(FxSet *s)
{
	for (int k = 0; k < s->nkeys; k++)
		free(s->keys_s[k]);
	free(s->keys_s);
	free(s->keys_i);
	free(s->ev);
}

uint8_t *
fx_encode(const FxSet *s, uint32_t page_bytes, uint32_t page_events, size_t *len)
{
	TdbTrailWriterOptions o = {.page_target_bytes = page_bytes, .page_max_events = page_events,
		.version = fx_version, .order = fx_order, .bucket_us = fx_bucket_us, .by_time = fx_by_time,
		.memory_limit = fx_memory_limit, .progress = fx_progress,
		.page_max_span_us = fx_page_span_us};
	TdbTrailWriter *w;
	TdbTrailError err;
	uint8_t    *buf = NULL;
	size_t	   *order = malloc((s->n + 1) * sizeof(size_t));

	fx_runs = 0;
	/* add in insertion (seq) order: trails interleaved, as a CSV might be */
	for (size_t i = 0; i < s->n; i++)
		order[s->ev[i].seq] = i;
	if (tdb_trail_writer_create(&s->schema, &o, &w, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "writer_create: %s", err.msg);
		free(order);
		return NULL;
	}
	for (size_t k = 0; k < s->n; k++)
	{
		const FxEvent *e = &s->ev[order[k]];
		TdbTrailEvent ev;
		TdbTrailValue vals[3];

		memcpy(vals, e->vals, sizeof(vals));
		ev.key.i = e->key_i;
		ev.key.s = e->key_s;
		ev.time_us = e->time;
		ev.lon = tdb_trail_coord_unfix(e->lon);
		ev.lat = tdb_trail_coord_unfix(e->lat);
		ev.values = vals;
		if (tdb_trail_writer_add(w, &ev, &err) < 0)
			unit_fail(__FILE__, __LINE__, "writer_add: %s", err.msg);
	}
	if (tdb_trail_writer_finish(w, &buf, len, &err) < 0)
		unit_fail(__FILE__, __LINE__, "writer_finish: %s", err.msg);
	else if (*len >= TDB_TRAIL_HEADER_SIZE && codec_get_u32le(buf + 8) == 6)
		fx_colmajor_files++;	/* version 6: its pages laid out column-major */
	tdb_trail_writer_free(w);
	free(order);
	return buf;
}

bool
fx_write_file(const char *path, const void *buf, size_t len)
{
	FILE	   *f = fopen(path, "wb");
	bool		ok;

	if (f == NULL)
		return false;
	ok = fwrite(buf, 1, len, f) == len;
	return fclose(f) == 0 && ok;
}

size_t
fx_write(const FxSet *s, const char *path, uint32_t page_bytes, uint32_t page_events)
{
	size_t		len = 0;
	uint8_t    *buf = fx_encode(s, page_bytes, page_events, &len);

	if (buf == NULL || !fx_write_file(path, buf, len))
		unit_fail(__FILE__, __LINE__, "could not write %s", path);
	free(buf);
	return len;
}

bool
fx_matches(const FxSet *s, const FxEvent *e, const TdbTrailQuery *q)
{
	if (q->nids > 0)
	{
		bool		hit = false;

		for (int k = 0; k < q->nids && !hit; k++)
			hit = s->schema.id_type == TDB_TRAIL_STRING ? strcmp(q->ids_str[k], e->key_s) == 0
				: q->ids_int[k] == e->key_i;
		if (!hit)
			return false;
	}
	if (q->has_time && (e->time < q->time_from || e->time > q->time_to))
		return false;
	if (q->has_bbox)
	{
		double		x = tdb_trail_coord_unfix(e->lon),
					y = tdb_trail_coord_unfix(e->lat);

		if (!(x >= q->xmin && x <= q->xmax && y >= q->ymin && y <= q->ymax))
			return false;
	}
	return true;
}

static bool
same_value(TdbTrailType t, const TdbTrailValue *a, const TdbTrailValue *b)
{
	if (a->isnull || b->isnull)
		return a->isnull == b->isnull;
	if (t == TDB_TRAIL_FLOAT64)
		return memcmp(&a->f, &b->f, sizeof(double)) == 0;
	if (t == TDB_TRAIL_INT64)
		return a->i == b->i;
	return strcmp(a->s, b->s) == 0;
}

bool
fx_same(const FxSet *s, const FxEvent *e, const TdbTrailEvent *ev)
{
	if (s->schema.id_type == TDB_TRAIL_STRING ? strcmp(ev->key.s, e->key_s) != 0 : ev->key.i != e->key_i)
		return false;
	if (ev->time_us != e->time || tdb_trail_coord_fix(ev->lon) != e->lon ||
		tdb_trail_coord_fix(ev->lat) != e->lat ||
		ev->lon != tdb_trail_coord_unfix(e->lon) || ev->lat != tdb_trail_coord_unfix(e->lat))
		return false;
	for (int c = 0; c < 3; c++)
		if (!same_value(s->schema.columns[c].type, &e->vals[c], &ev->values[c]))
			return false;
	return true;
}

void
fx_rmtree(const char *dir)
{
	char		cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		unit_fail(__FILE__, __LINE__, "could not remove %s", dir);
}

void
fx_tmpdir(char *out, size_t outlen, const char *tag)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

	snprintf(out, outlen, "%s/trail-%s-XXXXXX", base, tag);
	if (mkdtemp(out) == NULL)
		unit_fail(__FILE__, __LINE__, "mkdtemp %s failed", out);
}

void
fx_layout(int layout)
{
	bool		st = layout == 2 || layout == 4 || layout == 5 || layout == 7 || layout == 9;

	fx_version = layout == 0 ? 1 : layout <= 2 ? 2 : layout <= 5 ? 3 : layout <= 7 ? 5 : 6;
	fx_order = st ? TDB_TRAIL_ORDER_SPACETIME : TDB_TRAIL_ORDER_TRAIL;
	fx_by_time = layout == 5;
	/* small buckets, so that the random sets' trails share pages and split */
	fx_bucket_us = st ? 20LL * 60 * 1000000 : 0;
}

size_t *
fx_cursor_new(const FxSet *s)
{
	/* a start per key, then a used flag per event (space-time order) */
	size_t	   *cur = calloc((size_t) s->nkeys + s->n + 1, sizeof(size_t));

	for (int k = 0; k < s->nkeys; k++)
	{
		size_t		i = 0;

		/* the set is sorted by key: start at the key's first event */
		while (i < s->n && (s->schema.id_type == TDB_TRAIL_STRING ?
							strcmp(s->ev[i].key_s, s->keys_s[k]) != 0 :
							s->ev[i].key_i != s->keys_i[k]))
			i++;
		cur[k] = i;
	}
	return cur;
}

bool
fx_cursor_same(const FxSet *s, size_t *cur, const TdbTrailQuery *q, const TdbTrailEvent *ev)
{
	int			k;

	for (k = 0; k < s->nkeys; k++)
		if (s->schema.id_type == TDB_TRAIL_STRING ? strcmp(ev->key.s, s->keys_s[k]) == 0 :
			ev->key.i == s->keys_i[k])
			break;
	if (k == s->nkeys)
		return false;
	if (fx_order == TDB_TRAIL_ORDER_SPACETIME)
	{
		/*
		 * a trail's events come in time order within a page, not across
		 * pages (its cells in one bucket may lie in several): any unused
		 * matching event of the trail
		 */
		size_t	   *used = cur + s->nkeys;

		for (size_t i = cur[k]; i < s->n; i++)
		{
			const FxEvent *e = &s->ev[i];

			if (s->schema.id_type == TDB_TRAIL_STRING ? strcmp(e->key_s, s->keys_s[k]) != 0 :
				e->key_i != s->keys_i[k])
				break;
			if (!used[i] && fx_matches(s, e, q) && fx_same(s, e, ev))
			{
				used[i] = 1;
				return true;
			}
		}
		return false;
	}
	while (cur[k] < s->n && !fx_matches(s, &s->ev[cur[k]], q))
		cur[k]++;
	if (cur[k] >= s->n || !fx_same(s, &s->ev[cur[k]], ev))
		return false;
	cur[k]++;
	return true;
}

bool
fx_open_buf(FxOpened *o, const uint8_t *buf, size_t len, const char *tag, bool need_all, bool fresh)
{
	TdbPagerOptions po;
	TdbTrailError err;

	fx_tmpdir(o->dir, sizeof(o->dir), tag);
	snprintf(o->path, sizeof(o->path), "%s/f.trail", o->dir);
	if (!fx_write_file(o->path, buf, len))
		return false;
	if (fresh)
		tdb_trail_footer_cache_clear();
	memset(&po, 0, sizeof(po));
	po.url = o->path;
	if (tdb_pager_open(&po, &o->pager, &err) < 0)
		return false;
	if (tdb_trail_open(o->pager, &o->r, &err) < 0 || (need_all && tdb_trail_need_all(o->r, &err) < 0))
	{
		unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
		tdb_pager_close(o->pager);
		return false;
	}
	return true;
}

void
fx_close_opened(FxOpened *o)
{
	tdb_trail_close(o->r);
	tdb_pager_close(o->pager);
	unlink(o->path);
	rmdir(o->dir);
}

bool
fx_s3_env(TdbS3Config *c, bool via_proxy)
{
	const char *ep = getenv(via_proxy ? "TRAIL_TEST_PROXY_ENDPOINT" : "TRAIL_TEST_S3_ENDPOINT");

	memset(c, 0, sizeof(*c));
	if (ep == NULL || getenv("TRAIL_TEST_S3_ACCESS_KEY") == NULL)
	{
		printf("# skip: %s not set (src/trail/tests/run.sh sets it)\n",
			   via_proxy ? "TRAIL_TEST_PROXY_ENDPOINT" : "TRAIL_TEST_S3_ENDPOINT");
		return false;
	}
	c->endpoint = ep;
	c->region = "us-east-1";
	c->access_key = getenv("TRAIL_TEST_S3_ACCESS_KEY");
	c->secret_key = getenv("TRAIL_TEST_S3_SECRET_KEY");
	c->path_style = true;
	return true;
}

TdbTrailSchema
fx_schema(TdbTrailType id_type, int ncolumns, TdbTrailType type)
{
	TdbTrailSchema s;

	memset(&s, 0, sizeof(s));
	strcpy(s.id_name, "id");
	s.id_type = id_type;
	strcpy(s.time_name, "t");
	strcpy(s.lon_name, "lon");
	strcpy(s.lat_name, "lat");
	s.ncolumns = ncolumns;
	for (int c = 0; c < ncolumns; c++)
	{
		snprintf(s.columns[c].name, sizeof(s.columns[c].name), "c%d", c);
		s.columns[c].type = type;
	}
	return s;
}

uint8_t *
fx_writer_done(TdbTrailWriter *w, size_t *len)
{
	TdbTrailError err;
	uint8_t    *buf = NULL;

	if (tdb_trail_writer_finish(w, &buf, len, &err) < 0)
		buf = NULL;
	tdb_trail_writer_free(w);
	return buf;
}

uint8_t *
fx_write_small(int version, int ntrails, int n, uint32_t page_events, TdbTrailOrder order, int ndistinct,
			   size_t *len)
{
	TdbTrailSchema sc = fx_schema(TDB_TRAIL_INT64, 2, TDB_TRAIL_FLOAT64);
	TdbTrailWriterOptions o;
	TdbTrailWriter *w;
	TdbTrailError err;
	TdbTrailValue vals[2];
	char		name[32];

	strcpy(sc.columns[0].name, "v");
	sc.columns[0].type = TDB_TRAIL_FLOAT64;
	strcpy(sc.columns[1].name, "s");
	sc.columns[1].type = TDB_TRAIL_STRING;
	memset(&o, 0, sizeof(o));
	o.version = version;
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
			ev.time_us = FX_SMALL_T0 + (int64_t) i * 1000000 + k;
			ev.lon = -10 + (k % 100) * 0.01;
			ev.lat = 40 + i * 0.001 + (k % 7) * 0.1;
			vals[0].f = k + i * 0.5;
			if (ndistinct < 0)
				vals[1].s = k % 2 ? "odd" : "even";
			else if (ndistinct > 0)
			{
				snprintf(name, sizeof(name), "name-%05d", k % ndistinct);
				vals[1].s = name;
			}
			else
				vals[1].isnull = true;
			ev.values = vals;
			if (tdb_trail_writer_add(w, &ev, &err) < 0)
			{
				tdb_trail_writer_free(w);
				return NULL;
			}
		}
	return fx_writer_done(w, len);
}
