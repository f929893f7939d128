/*
 * test_submatch.c
 *	  Subscriptions matched against publications (src/submatch.c): events
 *	  equal a brute-force evaluation of every filter against consecutive
 *	  generations, and bad filters are refused naming the value.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "submatch.h"
#include "unit.h"

#define NREC 3000
#define NSUB 400
#define NPUB 1000

typedef struct Map
{
	void	   *obj;
	TdbMapView	v;
} Map;

static void
make_map(Map *m, uint64_t seed)
{
	TdbMapBuilder *b = tdb_map_builder_create();
	char		err[TDB_ERRLEN];

	for (uint32_t i = 0; i < NREC; i++)
	{
		double		xy[8];
		uint32_t	np = 2 + (uint32_t) (unit_rand(&seed) % 3);
		double		x = 24.8 + unit_rand_double(&seed, 0, 0.3),
					y = 60.1 + unit_rand_double(&seed, 0, 0.15);

		for (uint32_t p = 0; p < np; p++)
		{
			xy[2 * p] = x;
			xy[2 * p + 1] = y;
			x += unit_rand_double(&seed, -0.003, 0.003);
			y += unit_rand_double(&seed, -0.002, 0.002);
		}
		CHECK(tdb_map_builder_add(b, 100 + i, xy, np, "r", NULL, 0, 0, err) == TDB_OBJ_OK);
	}
	CHECK(tdb_map_builder_finish(b, err) == TDB_OBJ_OK);
	m->obj = malloc(tdb_map_builder_size(b));
	tdb_map_builder_write(b, m->obj, 1, 0);
	tdb_map_view_init(&m->v, m->obj);
	tdb_map_builder_free(b);
}

/* Filters of every kind; ids, polygon points and rings in the arrays given. */
static void
make_filters(TdbSubFilter *f, uint32_t n, uint64_t *ids, double *poly, uint32_t *rings, uint64_t *seed)
{
	for (uint32_t i = 0; i < n; i++)
	{
		double		x = 24.8 + unit_rand_double(seed, 0, 0.3),
					y = 60.1 + unit_rand_double(seed, 0, 0.15);

		memset(&f[i], 0, sizeof(f[i]));
		f[i].id = 1 + i;
		f[i].area = i % 10 == 9 ? TDB_SUB_NONE : (TdbSubArea) (i % 4);	/* NONE: matches nothing */
		switch (f[i].area)
		{
			case TDB_SUB_IDS:
				f[i].ids = ids + 8 * i;
				f[i].nids = 1 + (uint32_t) (unit_rand(seed) % 8);
				for (uint32_t k = 0; k < f[i].nids; k++)
					ids[8 * i + k] = 100 + unit_rand(seed) % NREC;
				break;
			case TDB_SUB_BOX:
				f[i].box = (TdbBox) {x, y, x + unit_rand_double(seed, 0, 0.03), y + unit_rand_double(seed, 0, 0.02)};
				break;
			case TDB_SUB_RADIUS:
				f[i].lon = x;
				f[i].lat = y;
				f[i].radius_m = unit_rand_double(seed, 0, 1500);
				break;
			case TDB_SUB_POLYGON:
				{
					double	   *p = poly + 8 * i;
					double		r = unit_rand_double(seed, 0.002, 0.02);

					/* a triangle */
					p[0] = x;
					p[1] = y;
					p[2] = x + r;
					p[3] = y + unit_rand_double(seed, -r, r);
					p[4] = x + unit_rand_double(seed, -r, r);
					p[5] = y + r;
					rings[i] = 3;
					CHECK(tdb_knn_query_init(&f[i].polygon, TDB_KNN_POLYGON, p, 3, &rings[i], 1));
				}
				break;
			case TDB_SUB_ALL_SQL:
			case TDB_SUB_NONE:
				break;			/* ALL_SQL: not made here */
		}
		f[i].cond = (TdbSubCond) (unit_rand(seed) % 5);
		f[i].value = f[i].cond == TDB_SUB_CONGESTION_AT_LEAST ? (double) (unit_rand(seed) % 5) :
			f[i].cond == TDB_SUB_SPEED_BELOW ? unit_rand_double(seed, 10, 80) :
			f[i].cond == TDB_SUB_SPEED_BELOW_PCT ? unit_rand_double(seed, 20, 90) : 0;
		f[i].on = f[i].cond == TDB_SUB_ANY ? TDB_SUB_ON_CHANGE : (TdbSubOn) (unit_rand(seed) % 2);
	}
}

/* Whether filter f covers record r, evaluated directly on the record's shape. */
static bool
covers(const TdbMapView *v, const TdbSubFilter *f, uint64_t r)
{
	TdbBox		b;

	switch (f->area)
	{
		case TDB_SUB_IDS:
			for (uint32_t k = 0; k < f->nids; k++)
				if (f->ids[k] == v->records[r].id)
					return true;
			return false;
		case TDB_SUB_BOX:
			tdb_map_bbox(v, r, &b);
			return b.xmax >= f->box.xmin && b.xmin <= f->box.xmax && b.ymax >= f->box.ymin && b.ymin <= f->box.ymax;
		case TDB_SUB_RADIUS:
			return tdb_map_distance(v, r, f->lon, f->lat, TDB_METRIC_METRES) <= f->radius_m;
		case TDB_SUB_POLYGON:
			return tdb_map_query_dist(v, r, &f->polygon) == 0;
		case TDB_SUB_ALL_SQL:
		case TDB_SUB_NONE:
			return false;		/* a tap covers nothing itself */
	}
	return false;
}

/* A brute-force evaluation of one condition, written from the definitions. */
static bool
holds(const TdbSubFilter *f, const TdbTraffic *t)
{
	switch (f->cond)
	{
		case TDB_SUB_ANY:
			return true;
		case TDB_SUB_CONGESTION_AT_LEAST:
			return t->congestion <= 4 && t->congestion >= f->value;
		case TDB_SUB_SPEED_BELOW:
			return t->speed_kmh == t->speed_kmh && t->speed_kmh < f->value;
		case TDB_SUB_SPEED_BELOW_PCT:
			return t->speed_kmh == t->speed_kmh && t->free_flow_kmh == t->free_flow_kmh && t->free_flow_kmh > 0 &&
				t->speed_kmh * 100.0 < f->value * t->free_flow_kmh;
		case TDB_SUB_INCIDENT:
			return t->incident_off != 0;
	}
	return false;
}

typedef struct Got
{
	uint64_t   *ev;				/* record << 32 | filter << 2 | kind */
	uint64_t	n,
				cap;
} Got;

static int
collect(uint32_t filter, uint64_t record, uint16_t kind, void *arg)
{
	Got		   *g = arg;

	if (g->n == g->cap)
	{
		g->cap = g->cap ? 2 * g->cap : 4096;
		g->ev = realloc(g->ev, g->cap * sizeof(uint64_t));
	}
	g->ev[g->n++] = record << 32 | (uint64_t) filter << 2 | kind;
	return 0;
}

static void
random_entry(TdbTraffic *t, uint64_t *seed)
{
	uint64_t	r = unit_rand(seed);

	t->speed_kmh = r % 7 == 0 ? NAN : (float) unit_rand_double(seed, 0, 120);
	t->free_flow_kmh = r % 11 == 0 ? NAN : (float) unit_rand_double(seed, 20, 120);
	t->congestion = r % 13 == 0 ? 255 : (uint8_t) (unit_rand(seed) % 5);
	t->incident_off = unit_rand(seed) % 4 == 0 ? 4 : 0;
	t->changed_gen++;
}

UNIT_TEST(test_submatch_equals_brute_force)
{
	Map			m;
	uint64_t	seed = 1818;
	TdbSubFilter *f = calloc(NSUB, sizeof(TdbSubFilter));
	uint64_t   *ids = calloc(8 * NSUB, sizeof(uint64_t));
	double	   *poly = calloc(8 * NSUB, sizeof(double));
	uint32_t   *rings = calloc(NSUB, sizeof(uint32_t));
	TdbTraffic *cur = calloc(NREC, sizeof(TdbTraffic));
	TdbTraffic *next = calloc(NREC, sizeof(TdbTraffic));
	uint32_t   *changed = calloc(NREC, sizeof(uint32_t));
	uint8_t    *is_changed = calloc(NREC, 1);
	uint8_t    *cov = calloc((size_t) NREC * NSUB / 8 + 1, 1);
	TdbSubIndex ix;
	char		err[TDB_ERRLEN];
	Got			got = {0};
	uint64_t	total = 0,
				mismatches = 0,
				covered_pairs = 0;

	make_map(&m, 7);
	make_filters(f, NSUB, ids, poly, rings, &seed);
	CHECK(tdb_sub_index_build(&m.v, f, NSUB, &ix, err) == TDB_OBJ_OK);

	/* the index holds exactly the covered pairs (evaluated once, record by record) */
	for (uint64_t r = 0; r < NREC; r++)
		for (uint32_t i = 0; i < NSUB; i++)
			if (covers(&m.v, &f[i], r))
			{
				cov[(r * NSUB + i) / 8] |= 1 << ((r * NSUB + i) % 8);
				covered_pairs++;
			}
	CHECK_EQ_U64(ix.npairs, covered_pairs);

	for (uint64_t r = 0; r < NREC; r++)
	{
		cur[r].speed_kmh = NAN;
		cur[r].free_flow_kmh = NAN;
		cur[r].congestion = 255;
	}
	for (int pub = 0; pub < NPUB; pub++)
	{
		uint64_t	nchanged = 0,
					want = 0;
		uint64_t	k = 1 + unit_rand(&seed) % (pub % 10 == 0 ? NREC : 60);

		memcpy(next, cur, NREC * sizeof(TdbTraffic));
		memset(is_changed, 0, NREC);
		for (uint64_t j = 0; j < k; j++)
		{
			uint64_t	r = unit_rand(&seed) % NREC;

			random_entry(&next[r], &seed);
			if (!is_changed[r])
			{
				is_changed[r] = 1;
				changed[nchanged++] = (uint32_t) r;
			}
		}
		got.n = 0;
		CHECK(tdb_sub_match(&ix, f, cur, next, changed, nchanged, collect, &got) == (int64_t) got.n);

		/* brute force, in the same order: changed records, then filters */
		for (uint64_t c = 0, g = 0; c < nchanged; c++)
		{
			uint64_t	r = changed[c];

			for (uint32_t i = 0; i < NSUB; i++)
			{
				bool		was = holds(&f[i], &cur[r]),
							now = holds(&f[i], &next[r]);
				uint16_t	kind = 0;

				if (!(cov[(r * NSUB + i) / 8] & (1 << ((r * NSUB + i) % 8))))
					continue;
				if (f[i].on == TDB_SUB_ON_CHANGE)
					kind = now ? TDB_SUB_EV_CHANGE : 0;
				else if (was != now)
					kind = now ? TDB_SUB_EV_ENTER : TDB_SUB_EV_EXIT;
				if (kind == 0)
					continue;
				want++;
				if (g >= got.n || got.ev[g] != (r << 32 | (uint64_t) i << 2 | kind))
					mismatches++;
				g++;
			}
		}
		if (want != got.n)
			mismatches++;
		total += want;
		memcpy(cur, next, NREC * sizeof(TdbTraffic));
	}
	CHECK_EQ_U64(mismatches, 0);
	CHECK(total > 10000);		/* the test exercised something */
	printf("# %d publications, %llu events, %llu covered (record, subscription) pairs: equal to brute force\n",
		   NPUB, (unsigned long long) total, (unsigned long long) covered_pairs);

	tdb_sub_index_free(&ix);
	free(got.ev);
	free(f);
	free(ids);
	free(poly);
	free(rings);
	free(cur);
	free(next);
	free(changed);
	free(is_changed);
	free(cov);
	free(m.obj);
}

/*
 * tdb_sub_index_build_limited: skipped filters get no pairs; at the first
 * filter (in the order given) that would take the index past max_pairs,
 * it and every later one are left out; what is indexed is exactly what the
 * unbounded index holds for those filters.
 */
UNIT_TEST(test_submatch_index_bounded)
{
	Map			m;
	uint64_t	seed = 2828;
	TdbSubFilter *f = calloc(NSUB, sizeof(TdbSubFilter));
	uint64_t   *ids = calloc(8 * NSUB, sizeof(uint64_t));
	double	   *poly = calloc(8 * NSUB, sizeof(double));
	uint32_t   *rings = calloc(NSUB, sizeof(uint32_t));
	uint32_t   *order = calloc(NSUB, sizeof(uint32_t));
	bool	   *skip = calloc(NSUB, sizeof(bool));
	bool	   *left = calloc(NSUB, sizeof(bool));
	uint64_t   *pairs_of = calloc(NSUB, sizeof(uint64_t));
	TdbSubIndex full,
				ix;
	char		err[TDB_ERRLEN];
	uint64_t	max_pairs,
				want_pairs = 0;
	uint32_t	first_left = NSUB,
				nleft = 0;

	make_map(&m, 9);
	make_filters(f, NSUB, ids, poly, rings, &seed);
	CHECK(tdb_sub_index_build(&m.v, f, NSUB, &full, err) == TDB_OBJ_OK);
	for (uint64_t k = 0; k < full.npairs; k++)
		pairs_of[full.subs[k]]++;
	max_pairs = full.npairs / 3;
	for (uint32_t i = 0; i < NSUB; i++)
	{
		order[i] = NSUB - 1 - i;	/* the last filters first */
		skip[i] = i % 5 == 0;
	}
	CHECK(tdb_sub_index_build_limited(&m.v, f, NSUB, order, skip, max_pairs, left, &ix, err) == TDB_OBJ_OK);
	CHECK(ix.npairs <= max_pairs);
	/* the expected cut: taken in order until one does not fit (ids listed twice count twice then: a bound, not exact) */
	{
		uint64_t	used = 0;

		for (uint32_t o = 0; o < NSUB; o++)
		{
			uint32_t	i = order[o];

			if (skip[i])
				continue;
			if (first_left == NSUB && used + pairs_of[i] > max_pairs)
				first_left = o;
			if (first_left != NSUB)
				nleft++;
			else
			{
				used += pairs_of[i];
				want_pairs += pairs_of[i];
			}
		}
	}
	CHECK(first_left < NSUB);	/* the bound cut something */
	CHECK_EQ_U64(ix.nleft_out, nleft);
	CHECK_EQ_U64(ix.npairs, want_pairs);
	for (uint32_t o = 0; o < NSUB; o++)
	{
		uint32_t	i = order[o];

		CHECK(left[i] == (!skip[i] && o >= first_left));
	}
	/* each record's list: the full index's, minus skipped and left-out filters */
	for (uint64_t r = 0; r < m.v.count; r++)
	{
		uint64_t	k = ix.start[r];

		for (uint64_t j = full.start[r]; j < full.start[r + 1]; j++)
		{
			uint32_t	i = full.subs[j];

			if (skip[i] || left[i])
				continue;
			CHECK(k < ix.start[r + 1] && ix.subs[k] == i);
			k++;
		}
		CHECK_EQ_U64(k, ix.start[r + 1]);
	}
	printf("# bounded index: %llu of %llu pairs, %u filters left out, %u skipped\n",
		   (unsigned long long) ix.npairs, (unsigned long long) full.npairs, ix.nleft_out, (NSUB + 4) / 5);
	tdb_sub_index_free(&ix);
	tdb_sub_index_free(&full);
	free(f);
	free(ids);
	free(poly);
	free(rings);
	free(order);
	free(skip);
	free(left);
	free(pairs_of);
	free(m.obj);
}

UNIT_TEST(test_submatch_refuses_bad_filters)
{
	Map			m;
	char		err[TDB_ERRLEN];
	TdbSubIndex ix;
	uint64_t	unknown = 99999;
	double		line[6] = {24.9, 60.1, 24.91, 60.1, 24.92, 60.1};
	uint32_t	ring = 3;
	TdbSubFilter f;

	make_map(&m, 8);
#define REFUSED(setup, expect) \
	do { \
		memset(&f, 0, sizeof(f)); \
		f.id = 5; \
		setup; \
		err[0] = '\0'; \
		CHECK(tdb_sub_index_build(&m.v, &f, 1, &ix, err) == TDB_OBJ_EINVAL); \
		if (strstr(err, expect) == NULL) \
			unit_fail(__FILE__, __LINE__, "error \"%s\" lacks \"%s\"", err, expect); \
	} while (0)

	REFUSED((f.area = TDB_SUB_RADIUS, f.lon = 24.9, f.lat = 60.1, f.radius_m = -3), "radius -3 m");
	REFUSED((f.area = TDB_SUB_RADIUS, f.lon = NAN, f.lat = 60.1, f.radius_m = 3), "centre (nan, 60.1)");
	REFUSED((f.area = TDB_SUB_BOX, f.box = (TdbBox) {25, 60, 24, 61}), "is inverted");
	REFUSED((f.area = TDB_SUB_BOX, f.box = (TdbBox) {25, NAN, 26, 61}), "not a finite number");
	REFUSED((f.area = TDB_SUB_IDS, f.ids = &unknown, f.nids = 1), "location id 99999 is not in the map");
	REFUSED((f.area = TDB_SUB_IDS, f.ids = &unknown, f.nids = 0), "list of location ids is empty");
	/* a "polygon" whose points are on one line encloses nothing */
	REFUSED((f.area = TDB_SUB_POLYGON, (void) tdb_knn_query_init(&f.polygon, TDB_KNN_POLYGON, line, 3, &ring, 1)),
			"the polygon is empty");
	REFUSED((f.area = TDB_SUB_RADIUS, f.radius_m = 10, f.cond = TDB_SUB_CONGESTION_AT_LEAST, f.value = 7), "congestion 7");
	REFUSED((f.area = TDB_SUB_RADIUS, f.radius_m = 10, f.cond = TDB_SUB_SPEED_BELOW, f.value = NAN), "speed nan km/h");
	REFUSED((f.area = TDB_SUB_RADIUS, f.radius_m = 10, f.on = TDB_SUB_ON_ENTER_EXIT), "need a condition");
	REFUSED((f.area = (TdbSubArea) 9), "unknown area kind 9");
#undef REFUSED
	free(m.obj);
}

#include "subfilter.h"

/* A filter through its bytes indexes the same (record, subscription) pairs. */
UNIT_TEST(test_subfilter_roundtrip)
{
	Map			m;
	uint64_t	seed = 99;
	TdbSubFilter f[40];
	uint64_t	ids[8 * 40];
	double		poly[8 * 40];
	uint32_t	rings[40];
	static unsigned char buf[TDB_SUBFILTER_BYTES];
	static TdbSubFilterStore store;
	char		err[TDB_ERRLEN];

	make_map(&m, 9);
	make_filters(f, 40, ids, poly, rings, &seed);
	for (uint32_t i = 0; i < 40; i++)
	{
		TdbSubFilter back;
		TdbSubIndex a,
					b;

		CHECK(tdb_subfilter_encode(&f[i], buf, sizeof(buf), err) > 0);
		if (!tdb_subfilter_decode(buf, sizeof(buf), &back, &store, err))
		{
			unit_fail(__FILE__, __LINE__, "filter %u: %s", i, err);
			continue;
		}
		CHECK(back.id == f[i].id && back.area == f[i].area && back.cond == f[i].cond && back.on == f[i].on);
		CHECK(tdb_sub_index_build(&m.v, &f[i], 1, &a, err) == TDB_OBJ_OK);
		CHECK(tdb_sub_index_build(&m.v, &back, 1, &b, err) == TDB_OBJ_OK);
		CHECK_EQ_U64(b.npairs, a.npairs);
		CHECK(memcmp(a.start, b.start, (NREC + 1) * sizeof(uint64_t)) == 0);
		tdb_sub_index_free(&a);
		tdb_sub_index_free(&b);
	}
	free(m.obj);
}

/* Hostile bytes: never read past them, never accept what the checks refuse. */
UNIT_TEST(test_subfilter_decode_hostile)
{
	static unsigned char buf[TDB_SUBFILTER_BYTES];
	static TdbSubFilterStore store;
	uint64_t	seed = 4242;
	char		err[TDB_ERRLEN];
	TdbSubFilter f;
	uint64_t	accepted = 0;

	for (int round = 0; round < 20000; round++)
	{
		TdbSubFilterWire h;
		size_t		size = round % 7 == 0 ? (size_t) (unit_rand(&seed) % sizeof(buf)) : sizeof(buf);

		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = (unsigned char) unit_rand(&seed);
		memset(&h, 0, sizeof(h));
		h.magic = round % 11 == 0 ? 0x12345678 : TDB_SUBFILTER_MAGIC;
		h.version = TDB_SUBFILTER_VERSION;
		h.area = (uint8_t) (unit_rand(&seed) % 6);
		h.cond = (uint8_t) (unit_rand(&seed) % 6);
		h.on = (uint8_t) (unit_rand(&seed) % 3);
		h.count = round % 3 == 0 ? (uint32_t) unit_rand(&seed) : (uint32_t) (unit_rand(&seed) % 300);
		h.value = unit_rand_double(&seed, -2, 500);
		for (int k = 0; k < 4; k++)
			h.geo[k] = round % 5 == 0 ? NAN : unit_rand_double(&seed, -200, 200);
		memcpy(buf, &h, sizeof(h));
		if (tdb_subfilter_decode(buf, size, &f, &store, err))
		{
			accepted++;
			CHECK(tdb_sub_filter_check(&f, err));
			CHECK(h.area != TDB_SUB_IDS || f.nids <= TDB_SUBFILTER_MAX_IDS);
			CHECK(h.area != TDB_SUB_POLYGON || f.polygon.npoints <= TDB_SUBFILTER_MAX_POINTS);
		}
		else
			CHECK(err[0] != '\0');
	}
	CHECK(accepted > 100);
	/* a count beyond the bytes is named */
	{
		TdbSubFilterWire h = {.magic = TDB_SUBFILTER_MAGIC, .version = TDB_SUBFILTER_VERSION, .area = TDB_SUB_IDS, .count = 100000};

		memcpy(buf, &h, sizeof(h));
		CHECK(!tdb_subfilter_decode(buf, sizeof(buf), &f, &store, err));
		CHECK(strstr(err, "100000 location ids do not fit") != NULL);
	}
}
