/*
 * test_mvt.c
 *	  The tile encoder (src/tile/) against PostGIS 3.3's answers, recorded
 *	  from ST_Transform and ST_AsMVTGeom on this machine: the projection bit
 *	  for bit, the pipeline from tile space on (edge travel, corners, the .5
 *	  tie, out-and-back roads, repeated points); then whole tiles decoded
 *	  by a decoder of our own against MVT 2.1's rules, and the byte budget
 *	  keeping the best-ranked roads.
 */
#include "unit.h"
#include "object.h"
#include "tile/mvt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *
t_grow(void *ctx, void *p, size_t size)
{
	(void) ctx;
	return realloc(p, size);
}

static void
t_release(void *ctx, void *p)
{
	(void) ctx;
	free(p);
}

static const TdbKnnAlloc talloc = {t_grow, t_release, NULL};

UNIT_TEST(test_mvt_projection_matches_postgis)
{
	/* lon, lat, then ST_Transform(..., 3857) as PostGIS 3.3.2 / PROJ 9.1.1 print it */
	static const char *const cases[][4] = {
		{"24.9384", "60.1699", "2776129.9891989734", "8437661.782002585"},
		{"-75.5277", "39.7391", "-8407705.104787128", "4828101.119457601"},
		{"180", "85.0511287798", "20037508.342789244", "20037508.342780728"},
		{"-180", "-89.9", "-20037508.342789244", "-44927335.42709685"},
		{"0.000001", "90", "0.11131949079327356", "242528680.94374272"},
		{"179.99999", "-90", "20037507.229594335", "-242528680.94374272"},
		{"12.3456789", "-45.678", "1374314.6886452618", "-5728897.793673827"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		double		x,
					y;

		tdb_mvt_project(strtod(cases[i][0], NULL), strtod(cases[i][1], NULL), &x, &y);
		if (x != strtod(cases[i][2], NULL) || y != strtod(cases[i][3], NULL))
			unit_fail(__FILE__, __LINE__, "(%s %s) -> (%.17g %.17g), PostGIS (%s %s)",
					  cases[i][0], cases[i][1], x, y, cases[i][2], cases[i][3]);
	}
}

/* The commands in s as absolute parts: "x y,x y|x y,..." ("" for none). */
static void
parts_text(const TdbMvtScratch *s, char *out, size_t len)
{
	int32_t		x = 0,
				y = 0;
	size_t		o = 0;

	out[0] = '\0';
	for (uint32_t i = 0; i < s->ncmd;)
	{
		uint32_t	c = s->cmd[i++];
		uint32_t	id = c & 7,
					n = c >> 3;

		for (uint32_t k = 0; k < n && i + 1 < s->ncmd + 1; k++)
		{
			uint32_t	zx = s->cmd[i++],
						zy = s->cmd[i++];

			x += (int32_t) ((zx >> 1) ^ (~(zx & 1) + 1));
			y += (int32_t) ((zy >> 1) ^ (~(zy & 1) + 1));
			o += (size_t) snprintf(out + o, len - o, "%s%d %d",
								   o == 0 ? "" : (id == 1 ? "|" : ","), x, y);
		}
	}
}

UNIT_TEST(test_mvt_pipeline_matches_postgis)
{
	/*
	 * Input in PostGIS's tile-space query: ST_AsMVTGeom(line,
	 * ST_MakeBox2D((0 0), (4096 4096)), 4096, buffer, true); its y is
	 * flipped (4096 - y) by the affine map.  Expected: its ST_AsText.
	 */
	static const struct
	{
		const char *name;
		int			buffer;
		double		xy[10];
		int			n;
		const char *want;
	}			cases[] = {
		{"edge travel", 0, {-10, 10, 0, 10, 0, 100, 50, 100}, 4, "0 3996,50 3996"},
		{"along an edge, contained", 0, {0, 10, 0, 100, 50, 150, 60, 200}, 4, "0 4086,0 3996,50 3946,60 3896"},
		{"corner crossing", 0, {-10, -5, 10, 15}, 2, "0 4091,10 4081"},
		{"outside, through, outside", 0, {-100, 2000, 5000, 2100}, 2, "0 2094,4096 2014"},
		{"in at a corner", 0, {-10, 4106, 10, 4086}, 2, "0 0,10 10"},
		{"the .5 tie rounds to even", 256, {-258, 4096, -254, 4095}, 2, "-256 0,-254 1"},
		{"in, out, in", 64, {100, 100, 5000, 100, 5000, 200, 100, 200}, 4, "100 3996,4160 3996|4160 3896,100 3896"},
		{"out and back vanishes", 64, {10, 10, 20, 20, 10, 10}, 3, ""},
		{"a repeated point after straight lines", 64, {10, 10, 20, 20, 30, 10, 20, 20}, 4, "10 4086,20 4076"},
		{"points on a straight line", 64, {0, 0, 500, 500, 1000, 1000}, 3, "0 4096,1000 3096"},
		{"contained along the buffer edge", 64, {-64, 100, -64, 200, 100, 200}, 3, "-64 3996,-64 3896,100 3896"},
		{"fractions round half to even", 64, {0.5, 0.5, 1.5, 1.5, 2.5, 7.5, 3.49, 9.51}, 4, "0 4096,2 4094,2 4088,3 4086"},
		{"touching the buffer edge from outside", 64, {-100, 50, -64, 60, -100, 70}, 3, ""},
		{"corner to corner", 64, {-100, -100, 4200, 4200}, 2, "-64 4160,4160 -64"},
	};
	TdbMvtTile	t;
	TdbMvtScratch s = {.alloc = &talloc};
	char		got[512];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		double		xy[10];
		bool		oom;
		bool		have;

		memset(&t, 0, sizeof(t));
		t.extent = 4096;
		t.buffer = (uint32_t) cases[i].buffer;
		t.clip_lo = -(double) cases[i].buffer;
		t.clip_hi = 4096.0 + cases[i].buffer;
		for (int k = 0; k < cases[i].n; k++)
		{
			xy[2 * k] = 1.0 * cases[i].xy[2 * k] + 0.0 * cases[i].xy[2 * k + 1] + -0.0;
			xy[2 * k + 1] = 0.0 * cases[i].xy[2 * k] + -1.0 * cases[i].xy[2 * k + 1] + 4096.0;
		}
		have = tdb_mvt_feature_tile_xy(&t, xy, (uint32_t) cases[i].n, &s, &oom);
		CHECK(!oom);
		if (have)
			parts_text(&s, got, sizeof(got));
		else
			got[0] = '\0';
		if (strcmp(got, cases[i].want) != 0)
			unit_fail(__FILE__, __LINE__, "%s: got \"%s\", PostGIS \"%s\"", cases[i].name, got, cases[i].want);
	}
	tdb_mvt_scratch_free(&s);
}

/* ---- whole tiles ------------------------------------------------------------ */

typedef struct Dec
{
	int			features;
	int			keys;
	int			values;
	uint64_t	ids[4096];
	int			classes[4096];	/* value index of road_class, -1 none */
	char		value_str[1024][32];
	bool		ok;
} Dec;

static uint64_t
rd_varint(const uint8_t **p, const uint8_t *end, bool *ok)
{
	uint64_t	v = 0;

	for (int s = 0; s < 64; s += 7)
	{
		if (*p >= end)
			break;
		v |= (uint64_t) (**p & 0x7f) << s;
		if (*(*p)++ < 0x80)
			return v;
	}
	*ok = false;
	return 0;
}

/* Decode and check MVT 2.1's rules: even tags, indexes in range, no zero LineTo. */
static void
decode(const uint8_t *b, size_t n, Dec *d)
{
	const uint8_t *p = b,
			   *end = b + n;
	const uint8_t *layer,
			   *lend;
	uint64_t	len;

	memset(d, 0, sizeof(*d));
	d->ok = true;
	if (n == 0)
		return;
	if (*p++ != 0x1A)
		d->ok = false;
	len = rd_varint(&p, end, &d->ok);
	layer = p;
	lend = p + len;
	if (lend != end)
		d->ok = false;
	/* first pass: count keys and values; second: features */
	for (int pass = 0; pass < 2 && d->ok; pass++)
	{
		p = layer;
		while (p < lend && d->ok)
		{
			uint64_t	key = rd_varint(&p, lend, &d->ok);
			uint64_t	l;
			const uint8_t *f,
					   *fend;

			if ((key & 7) == 0)
			{
				(void) rd_varint(&p, lend, &d->ok);
				continue;
			}
			l = rd_varint(&p, lend, &d->ok);
			f = p;
			fend = p + l;
			p = fend;
			if (pass == 0 && key == 0x1A)
				d->keys++;
			else if (pass == 0 && key == 0x22)
			{
				if (f[0] == 0x0A && d->values < 1024)
				{
					const uint8_t *q = f + 1;
					uint64_t	sl = rd_varint(&q, fend, &d->ok);

					snprintf(d->value_str[d->values], 32, "%.*s", (int) (sl < 31 ? sl : 31), q);
				}
				d->values++;
			}
			else if (pass == 1 && key == 0x12 && d->features < 4096)
			{
				int			fi = d->features++;

				d->classes[fi] = -1;
				while (f < fend && d->ok)
				{
					uint64_t	fk = rd_varint(&f, fend, &d->ok);

					if (fk == 0x08 || fk == 0x18)
					{
						uint64_t	v = rd_varint(&f, fend, &d->ok);

						if (fk == 0x08)
							d->ids[fi] = v;
					}
					else
					{
						uint64_t	pl = rd_varint(&f, fend, &d->ok);
						const uint8_t *q = f,
								   *qend = f + pl;
						int			ntag = 0;

						f = qend;
						while (q < qend && d->ok)
						{
							uint64_t	v = rd_varint(&q, qend, &d->ok);

							if (fk == 0x12)
							{
								if (ntag % 2 == 0 && v >= (uint64_t) d->keys)
									d->ok = false;
								if (ntag % 2 == 1 && v >= (uint64_t) d->values)
									d->ok = false;
								if (ntag % 2 == 1 && ntag > 0)
								{
									/* key 1 is road_class */
								}
								ntag++;
							}
							else if ((v & 7) == 2)
							{
								/* LineTo: no (0, 0) step */
								uint64_t	cnt = v >> 3;

								for (uint64_t k = 0; k < cnt && d->ok; k++)
								{
									uint64_t	dx = rd_varint(&q, qend, &d->ok);
									uint64_t	dy = rd_varint(&q, qend, &d->ok);

									if (dx == 0 && dy == 0)
										d->ok = false;
								}
							}
							else if ((v & 7) == 1)
							{
								(void) rd_varint(&q, qend, &d->ok);
								(void) rd_varint(&q, qend, &d->ok);
							}
						}
						if (fk == 0x12 && ntag % 2 != 0)
							d->ok = false;
					}
				}
			}
		}
	}
}

/* A map of roads along parallel lines, classes cycling, lengths growing with the id. */
static int
build_map(void **obj, size_t *size)
{
	static const char *const classes[] = {"residential", "motorway", "service", "primary", "footway", NULL};
	TdbMapBuilder *b = tdb_map_builder_create();
	char		err[TDB_ERRLEN];

	for (uint64_t i = 1; i <= 3000; i++)
	{
		double		xy[6];
		double		x0 = 24.90 + (double) (i % 60) * 0.002;
		double		y0 = 60.15 + (double) (i / 60) * 0.001;
		double		l = 0.0002 + (double) (i % 7) * 0.0001;

		xy[0] = x0;
		xy[1] = y0;
		xy[2] = x0 + l;
		xy[3] = y0 + l / 3;
		xy[4] = x0 + 2 * l;
		xy[5] = y0;
		if (tdb_map_builder_add(b, i, xy, 3, classes[i % 6], i % 4 ? "Main Street" : NULL, 50, 0, err) != 0)
			return -1;
	}
	if (tdb_map_builder_finish(b, err) != 0)
		return -1;
	*size = tdb_map_builder_size(b);
	*obj = aligned_alloc(64, (*size + 63) / 64 * 64);
	tdb_map_builder_write(b, *obj, 7, 0);
	tdb_map_builder_free(b);
	return 0;
}

UNIT_TEST(test_mvt_tiles_are_valid_and_keep_the_best_roads_within_budget)
{
	void	   *obj;
	size_t		size;
	TdbMapView	v;
	TdbTraffic *entries;
	void	   *traffic;
	TdbMvtOptions opt = {4096, 64, TDB_MVT_MAX_BUDGET};
	TdbMvtRank	rank = {0};
	TdbMvtEnv	env = {.alloc = &talloc, .header = 4, .rank = &rank, .rank_alloc = &talloc};
	TdbMvtResult all,
				cut;
	Dec		   *d = malloc(sizeof(Dec));
	Dec		   *dc = malloc(sizeof(Dec));

	if (build_map(&obj, &size) != 0)
	{
		unit_fail(__FILE__, __LINE__, "map build failed");
		return;
	}
	tdb_map_view_init(&v, obj);
	entries = calloc(v.count, sizeof(TdbTraffic));
	for (uint64_t i = 0; i < v.count; i++)
	{
		entries[i].speed_kmh = (float) (i % 50);
		entries[i].free_flow_kmh = NAN;
		entries[i].congestion = (uint8_t) (i % 5);
		entries[i].changed_gen = i % 3;
	}
	traffic = aligned_alloc(64, (tdb_traffic_size(v.count, 0) + 63) / 64 * 64);
	tdb_traffic_write(traffic, 7, 3, v.count, entries, NULL, 0, 0);
	/* z9 holds every road of the map */
	CHECK_EQ_U64(tdb_mvt_encode(&v, traffic, tdb_traffic_entries(traffic), 9, 291, 148, &opt, &env, &all), TDB_MVT_OK);
	decode(all.data + 4, all.size, d);
	CHECK(d->ok);
	CHECK_EQ_U64(d->keys, 7);
	CHECK(d->features > 1000);
	CHECK_EQ_U64((uint64_t) d->features, all.features);
	CHECK(!all.truncated);
	CHECK_EQ_U64(all.max_changed_gen, 2);

	/* a budget of 8 kB: fits, and what is kept outranks what is not */
	opt.budget = 8192;
	CHECK_EQ_U64(tdb_mvt_encode(&v, traffic, tdb_traffic_entries(traffic), 9, 291, 148, &opt, &env, &cut), TDB_MVT_OK);
	decode(cut.data + 4, cut.size, dc);
	CHECK(dc->ok);
	CHECK(cut.truncated);
	CHECK(cut.size <= 8192 && cut.size > 4096);
	CHECK(dc->features > 0 && dc->features < d->features);
	{
		/* motorways (id % 6 == 1) come first: every kept road is one, or all are kept */
		int			kept_motorways = 0;

		for (int i = 0; i < dc->features; i++)
			kept_motorways += dc->ids[i] % 6 == 1;
		CHECK_EQ_U64((uint64_t) kept_motorways, (uint64_t) dc->features);
		/* and the kept ones are in map order, as any tile */
		for (int i = 1; i < dc->features; i++)
			CHECK(tdb_map_find(&v, dc->ids[i - 1]) < tdb_map_find(&v, dc->ids[i]));
	}
	free(all.data);
	free(cut.data);

	/* an empty tile is no bytes at all */
	opt.budget = TDB_MVT_DEFAULT_BUDGET;
	CHECK_EQ_U64(tdb_mvt_encode(&v, traffic, tdb_traffic_entries(traffic), 9, 0, 0, &opt, &env, &cut), TDB_MVT_OK);
	CHECK_EQ_U64(cut.size, 0);
	free(cut.data);
	free(rank.order);
	free(entries);
	free(traffic);
	free(obj);
	free(d);
	free(dc);
}

/*
 * A low zoom over a large map (past 2^18 candidates: the rank walk) where no
 * road is big enough to show: an empty tile.  The walk kept no feature, so
 * its list was never allocated, and the copy back into it was
 * memcpy(NULL, ..., 0), undefined behaviour (make unit-asan runs this
 * under UBSan).
 */
UNIT_TEST(test_mvt_large_tile_without_features_is_empty)
{
	TdbMapBuilder *b = tdb_map_builder_create();
	char		err[TDB_ERRLEN];
	const uint64_t n = (UINT64_C(1) << 18) + 1000;
	void	   *obj;
	size_t		size;
	TdbMapView	v;
	TdbTraffic *entries;
	void	   *traffic;
	TdbMvtOptions opt = {4096, 64, TDB_MVT_DEFAULT_BUDGET};
	TdbMvtRank	rank = {0};
	TdbMvtEnv	env = {.alloc = &talloc, .header = 4, .rank = &rank, .rank_alloc = &talloc};
	TdbMvtResult out;

	for (uint64_t i = 1; i <= n; i++)
	{
		/* 10 cm roads on a 512 x 512 grid of 100 m: far below a z0 pixel */
		double		xy[4] = {24.9 + (double) (i % 512) * 0.001, 60.1 + (double) (i / 512 % 512) * 0.001, 0, 0};

		xy[2] = xy[0] + 0.000001;
		xy[3] = xy[1];
		if (tdb_map_builder_add(b, i, xy, 2, "residential", NULL, 50, 0, err) != 0)
		{
			unit_fail(__FILE__, __LINE__, "map build failed: %s", err);
			tdb_map_builder_free(b);
			return;
		}
	}
	if (tdb_map_builder_finish(b, err) != 0)
	{
		unit_fail(__FILE__, __LINE__, "map build failed: %s", err);
		tdb_map_builder_free(b);
		return;
	}
	size = tdb_map_builder_size(b);
	obj = aligned_alloc(64, (size + 63) / 64 * 64);
	tdb_map_builder_write(b, obj, 9, 0);
	tdb_map_builder_free(b);
	tdb_map_view_init(&v, obj);
	entries = calloc(v.count, sizeof(TdbTraffic));
	traffic = aligned_alloc(64, (tdb_traffic_size(v.count, 0) + 63) / 64 * 64);
	tdb_traffic_write(traffic, 9, 1, v.count, entries, NULL, 0, 0);
	CHECK_EQ_U64(tdb_mvt_encode(&v, traffic, tdb_traffic_entries(traffic), 0, 0, 0, &opt, &env, &out), TDB_MVT_OK);
	CHECK_EQ_U64(out.size, 0);
	CHECK_EQ_U64(out.features, 0);
	CHECK(out.candidates > (UINT64_C(1) << 18));	/* the rank walk ran */
	free(out.data);
	free(rank.order);
	free(traffic);
	free(entries);
	free(obj);
}
