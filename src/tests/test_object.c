/*
 * test_object.c
 *	  Map and traffic objects: round trips, every query against brute force
 *	  on random maps, and the validator against corrupted objects.
 */
#include "unit.h"
#include "checksum.h"
#include "object.h"
#include "halves.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct TestLoc
{
	uint64_t	id;
	uint32_t	npoints;
	double		xy[2 * 8];
	char		name[16];
	const char *cls;
} TestLoc;

static const char *classes[] = {"motorway", "primary", "residential", NULL, "service"};

/*
 * A random map of n segments in a 0.5 x 0.5 degree area around Helsinki:
 * mostly 1e-7-degree coordinates (as OpenStreetMap's), some arbitrary
 * doubles, some zero-length segments and some exact duplicates.
 */
static TestLoc *
random_locations(uint64_t *seed, int n)
{
	TestLoc    *locs = calloc(n, sizeof(TestLoc));

	for (int i = 0; i < n; i++)
	{
		TestLoc    *l = &locs[i];
		double		x = unit_rand_double(seed, 24.7, 25.2);
		double		y = unit_rand_double(seed, 60.1, 60.3);

		l->id = (i % 3 == 0) ? (uint64_t) i : unit_rand(seed);
		l->npoints = 2 + (uint32_t) (unit_rand(seed) % 7);
		for (uint32_t p = 0; p < l->npoints; p++)
		{
			l->xy[2 * p] = x;
			l->xy[2 * p + 1] = y;
			if (i % 11 != 0)	/* every 11th is zero-length */
			{
				x += unit_rand_double(seed, -0.002, 0.002);
				y += unit_rand_double(seed, -0.001, 0.001);
			}
		}
		if (i % 5 != 0)
			for (uint32_t p = 0; p < 2 * l->npoints; p++)
				l->xy[p] = (double) llround(l->xy[p] * 1e7) / 1e7;
		if (i % 13 == 1 && i > 1)	/* same geometry as the previous one */
		{
			l->npoints = locs[i - 1].npoints;
			memcpy(l->xy, locs[i - 1].xy, sizeof(l->xy));
		}
		if (i % 4 != 0)
			snprintf(l->name, sizeof(l->name), "Katu %d", i % 50);
		l->cls = classes[i % 5];
	}
	return locs;
}

/* Build a map object from locs; returns malloc'd bytes and the size. */
static void *
build_map(const TestLoc *locs, int n, size_t *size)
{
	TdbMapBuilder *b = tdb_map_builder_create();
	char		err[TDB_ERRLEN];
	void	   *obj;

	for (int i = 0; i < n; i++)
		if (tdb_map_builder_add(b, locs[i].id, locs[i].xy, locs[i].npoints, locs[i].cls,
								locs[i].name, (uint16_t) (i % 120), (uint8_t) (i & 1), err) != 0)
			unit_fail(__FILE__, __LINE__, "add %d: %s", i, err);
	if (tdb_map_builder_finish(b, err) != 0)
		unit_fail(__FILE__, __LINE__, "finish: %s", err);
	*size = tdb_map_builder_size(b);
	obj = malloc(*size);
	tdb_map_builder_write(b, obj, 77, 1000);
	tdb_map_builder_free(b);
	return obj;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a,
				y = *(const uint64_t *) b;

	return (x > y) - (x < y);
}

typedef struct Collect
{
	uint64_t   *items;
	size_t		n;
} Collect;

static int
collect(uint64_t entry, void *arg)
{
	Collect    *c = arg;

	c->items[c->n++] = entry;
	return 0;
}

UNIT_TEST(test_map_roundtrip)
{
	uint64_t	seed = 1;
	int			n = 3000;
	TestLoc    *locs = random_locations(&seed, n);
	size_t		size;
	void	   *obj = build_map(locs, n, &size);
	char		err[TDB_ERRLEN];
	TdbMapView	v;

	CHECK_EQ_U64(tdb_map_validate(obj, size, TDB_VALIDATE_FULL, err), TDB_OBJ_OK);
	tdb_map_view_init(&v, obj);
	CHECK_EQ_U64(v.count, n);
	for (int i = 0; i < n; i++)
	{
		int64_t		r = tdb_map_find(&v, locs[i].id);
		double		xy[2 * 8];

		if (r < 0)
		{
			unit_fail(__FILE__, __LINE__, "id %llu not found", (unsigned long long) locs[i].id);
			continue;
		}
		CHECK_EQ_U64(v.records[r].id, locs[i].id);
		CHECK_EQ_U64(v.records[r].npoints, locs[i].npoints);
		tdb_map_shape(&v, r, xy);
		/* exact, to the bit: readers get back what was loaded */
		CHECK(memcmp(xy, locs[i].xy, 16 * locs[i].npoints) == 0);
		CHECK(strcmp(tdb_map_name(&v, r), locs[i].name) == 0);
		CHECK(strcmp(tdb_map_class(&v, r), locs[i].cls ? locs[i].cls : "") == 0);
		CHECK_EQ_U64(v.records[r].speed_limit_kmh, i % 120);
		CHECK_EQ_U64(v.records[r].flags, i & 1);
	}
	/* ids that are not there */
	for (int i = 0; i < 2000; i++)
	{
		uint64_t	id = unit_rand(&seed) | (1ull << 63);
		int			known = 0;

		for (int j = 0; j < n && !known; j++)
			known = locs[j].id == id;
		if (!known)
			CHECK(tdb_map_find(&v, id) == -1);
	}
	free(obj);
	free(locs);
}

UNIT_TEST(test_map_queries_match_brute_force)
{
	uint64_t	seed = 2;
	int			sizes[] = {0, 1, 17, 600, 5000};

	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
	{
		int			n = sizes[si];
		TestLoc    *locs = random_locations(&seed, n ? n : 1);
		size_t		size;
		void	   *obj = build_map(locs, n, &size);
		TdbMapView	v;
		Collect		got = {malloc(sizeof(uint64_t) * (n + 1)), 0};
		uint64_t   *want = malloc(sizeof(uint64_t) * (n + 1));
		TdbKnnResult *knn = malloc(sizeof(TdbKnnResult) * (n + 4));
		TdbKnnResult *bf = malloc(sizeof(TdbKnnResult) * (n + 4));
		char		err[TDB_ERRLEN];

		CHECK_EQ_U64(tdb_map_validate(obj, size, TDB_VALIDATE_FULL, err), TDB_OBJ_OK);
		tdb_map_view_init(&v, obj);

		/* boxes: every record whose exact box intersects is returned */
		for (int q = 0; q < 400; q++)
		{
			TdbBox		box;
			size_t		nw = 0;

			box.xmin = unit_rand_double(&seed, 24.6, 25.3);
			box.ymin = unit_rand_double(&seed, 60.0, 60.4);
			box.xmax = box.xmin + (q % 7 == 0 ? 0.0 : unit_rand_double(&seed, 0, 0.1));
			box.ymax = box.ymin + (q % 7 == 0 ? 0.0 : unit_rand_double(&seed, 0, 0.05));
			if (q % 50 == 3 && n > 0)	/* exactly a record's box: edges touch */
				tdb_map_bbox(&v, unit_rand(&seed) % n, &box);
			got.n = 0;
			tdb_map_query_box(&v, &box, collect, &got);
			for (uint64_t i = 0; i < (uint64_t) n; i++)
			{
				TdbBox		b;

				tdb_map_bbox(&v, i, &b);
				if (b.xmin <= box.xmax && b.xmax >= box.xmin && b.ymin <= box.ymax && b.ymax >= box.ymin)
					want[nw++] = i;
			}
			qsort(got.items, got.n, sizeof(uint64_t), cmp_u64);
			/* superset of the exact answer, and nothing returned twice */
			for (size_t a = 0, g = 0; a < nw; a++)
			{
				while (g < got.n && got.items[g] < want[a])
					g++;
				if (g == got.n || got.items[g] != want[a])
				{
					unit_fail(__FILE__, __LINE__, "box query %d misses record %llu", q,
							  (unsigned long long) want[a]);
					break;
				}
			}
			for (size_t g = 1; g < got.n; g++)
				CHECK(got.items[g] != got.items[g - 1]);
		}

		/* radius in metres: exactly the records within the radius */
		for (int q = 0; q < 400; q++)
		{
			double		x = unit_rand_double(&seed, 24.7, 25.2);
			double		y = unit_rand_double(&seed, 60.1, 60.3);
			double		r = (q % 9 == 0) ? 0.0 : unit_rand_double(&seed, 1, 20000);
			size_t		nw = 0;

			if (q % 17 == 0 && n > 0)	/* a point on a segment's vertex */
			{
				double		xy[16];
				uint64_t	i = unit_rand(&seed) % n;

				tdb_map_shape(&v, i, xy);
				x = xy[0];
				y = xy[1];
			}
			got.n = 0;
			CHECK_EQ_U64(tdb_map_query_radius(&v, x, y, r, collect, &got), 0);
			for (uint64_t i = 0; i < (uint64_t) n; i++)
				if (tdb_map_distance(&v, i, x, y, TDB_METRIC_METRES) <= r)
					want[nw++] = i;
			qsort(got.items, got.n, sizeof(uint64_t), cmp_u64);
			CHECK_EQ_U64(got.n, nw);
			if (got.n == nw && memcmp(got.items, want, nw * sizeof(uint64_t)) != 0)
				unit_fail(__FILE__, __LINE__, "radius query %d: different records", q);
		}
		CHECK(tdb_map_query_radius(&v, 24.9, 60.2, -1, collect, &got) == TDB_OBJ_EINVAL);
		CHECK(tdb_map_query_radius(&v, NAN, 60.2, 10, collect, &got) == TDB_OBJ_EINVAL);

		/* k nearest, both metrics */
		for (int q = 0; q < 300; q++)
		{
			double		x = unit_rand_double(&seed, 24.6, 25.3);
			double		y = unit_rand_double(&seed, 60.0, 60.4);
			TdbMetric	m = (q & 1) ? TDB_METRIC_METRES : TDB_METRIC_PLANAR;
			uint64_t	k = (uint64_t[]) {1, 5, 17, 100, (uint64_t) n, (uint64_t) n + 3}[q % 6];
			int64_t		got_k = tdb_map_knn(&v, x, y, m, k, knn);
			uint64_t	want_k = k < (uint64_t) n ? k : (uint64_t) n;

			/* brute force: selection of the k smallest (distance, index) */
			for (uint64_t i = 0; i < (uint64_t) n; i++)
			{
				bf[i].entry = i;
				bf[i].dist = tdb_map_distance(&v, i, x, y, m);
			}
			for (uint64_t a = 0; a < want_k; a++)
			{
				uint64_t	best = a;

				for (uint64_t b = a + 1; b < (uint64_t) n; b++)
					if (bf[b].dist < bf[best].dist ||
						(bf[b].dist == bf[best].dist && bf[b].entry < bf[best].entry))
						best = b;
				{
					TdbKnnResult t = bf[a];

					bf[a] = bf[best];
					bf[best] = t;
				}
			}
			CHECK_EQ_U64(got_k, want_k);
			for (uint64_t a = 0; a < want_k && (int64_t) a < got_k; a++)
				if (knn[a].entry != bf[a].entry || knn[a].dist != bf[a].dist)
				{
					unit_fail(__FILE__, __LINE__, "knn %d (k=%llu) rank %llu: got %llu at %.17g, expected %llu at %.17g",
							  q, (unsigned long long) k, (unsigned long long) a,
							  (unsigned long long) knn[a].entry, knn[a].dist,
							  (unsigned long long) bf[a].entry, bf[a].dist);
					break;
				}
		}
		free(got.items);
		free(want);
		free(knn);
		free(bf);
		free(obj);
		free(locs);
	}
}

UNIT_TEST(test_map_builder_rejects_bad_input)
{
	TdbMapBuilder *b = tdb_map_builder_create();
	char		err[TDB_ERRLEN];
	double		one[2] = {24.9, 60.2};
	double		nan_xy[4] = {24.9, 60.2, NAN, 60.3};
	double		far[4] = {24.9, 60.2, 190.0, 60.3};
	double		ok[4] = {24.9, 60.2, 24.91, 60.21};

	CHECK(tdb_map_builder_add(b, 1, one, 1, NULL, NULL, 0, 0, err) == TDB_OBJ_EINVAL);
	CHECK(strstr(err, "at least 2") != NULL);
	CHECK(tdb_map_builder_add(b, 2, nan_xy, 2, NULL, NULL, 0, 0, err) == TDB_OBJ_EINVAL);
	CHECK(strstr(err, "location 2 point 2") != NULL);
	CHECK(tdb_map_builder_add(b, 3, far, 2, NULL, NULL, 0, 0, err) == TDB_OBJ_EINVAL);
	CHECK(tdb_map_builder_add(b, 4, ok, 2, "primary", "A", 0, 0, err) == TDB_OBJ_OK);
	CHECK(tdb_map_builder_add(b, 5, ok, 2, "primary", "B", 0, 0, err) == TDB_OBJ_OK);
	CHECK(tdb_map_builder_add(b, 4, ok, 2, "primary", "C", 0, 0, err) == TDB_OBJ_OK);
	CHECK(tdb_map_builder_finish(b, err) == TDB_OBJ_EDUPLICATE);
	CHECK(strstr(err, "location id 4 appears more than once") != NULL);
	tdb_map_builder_free(b);

	/* 256 road classes fit, the 257th does not */
	b = tdb_map_builder_create();
	for (int c = 0; c < 257; c++)
	{
		char		cls[24];
		int			rc;

		snprintf(cls, sizeof(cls), "class%d", c);
		rc = tdb_map_builder_add(b, c, ok, 2, cls, NULL, 0, 0, err);
		CHECK(rc == (c < 256 ? TDB_OBJ_OK : TDB_OBJ_ELIMIT));
	}
	tdb_map_builder_free(b);
}

/* Recompute the checksum after a deliberate change, to reach deeper checks. */
static void
reseal_sized(void *obj, size_t size)
{
	TdbObjectHeader *h = obj;
	size_t		covered = h->total_size < size ? h->total_size : size;

	if (covered >= 12)
		h->checksum = tdb_crc32c((char *) h + 12, covered - 12);
}

#define reseal(obj) reseal_sized((obj), size)

UNIT_TEST(test_map_validator_rejects_corruption)
{
	uint64_t	seed = 3;
	int			n = 500;
	TestLoc    *locs = random_locations(&seed, n);
	size_t		size;
	void	   *obj = build_map(locs, n, &size);
	void	   *bad = malloc(size);
	char		err[TDB_ERRLEN];
	TdbObjectHeader *h = bad;
	TdbMapView	v;

	/* any single flipped bit is caught by the full check */
	for (int t = 0; t < 3000; t++)
	{
		size_t		at = unit_rand(&seed) % size;

		memcpy(bad, obj, size);
		((uint8_t *) bad)[at] ^= (uint8_t) (1u << (unit_rand(&seed) % 8));
		if (tdb_map_validate(bad, size, TDB_VALIDATE_FULL, err) != TDB_OBJ_ECORRUPT)
			unit_fail(__FILE__, __LINE__, "flip at byte %zu not detected", at);
	}

	/* header-level problems, each with its own message */
	memcpy(bad, obj, size);
	h->magic = 0x12345678;
	CHECK(tdb_map_validate(bad, size, TDB_VALIDATE_HEADER, err) == TDB_OBJ_ECORRUPT);
	CHECK(strstr(err, "bad magic") != NULL);
	memcpy(bad, obj, size);
	h->format_version = 99;
	CHECK(tdb_map_validate(bad, size, TDB_VALIDATE_HEADER, err) == TDB_OBJ_ECORRUPT);
	CHECK(strstr(err, "format version 99") != NULL);
	CHECK(tdb_map_validate(obj, size - 64, TDB_VALIDATE_HEADER, err) == TDB_OBJ_ECORRUPT);
	CHECK(tdb_map_validate(obj, 10, TDB_VALIDATE_HEADER, err) == TDB_OBJ_ECORRUPT);
	CHECK(tdb_map_validate(NULL, 0, TDB_VALIDATE_HEADER, err) == TDB_OBJ_ECORRUPT);
	memcpy(bad, obj, size);
	h->sections[TDB_MAP_SHAPES].offset = h->total_size;
	h->sections[TDB_MAP_SHAPES].size = 64;
	CHECK(tdb_map_validate(bad, size, TDB_VALIDATE_HEADER, err) == TDB_OBJ_ECORRUPT);
	memcpy(bad, obj, size);
	h->count += 1;
	CHECK(tdb_map_validate(bad, size, TDB_VALIDATE_HEADER, err) == TDB_OBJ_ECORRUPT);

	/* resealed damage inside sections is caught by the invariants */
	tdb_map_view_init(&v, obj);
	{
		size_t		rec_off = h->sections[TDB_MAP_RECORDS].offset;
		TdbLocation *r;

		memcpy(bad, obj, size);
		r = (TdbLocation *) ((char *) bad + rec_off);
		r[10].shape_off = h->sections[TDB_MAP_SHAPES].size + 5;
		reseal(bad);
		CHECK(tdb_map_validate(bad, size, TDB_VALIDATE_FULL, err) == TDB_OBJ_ECORRUPT);
		CHECK(strstr(err, "malformed") != NULL);

		memcpy(bad, obj, size);
		r = (TdbLocation *) ((char *) bad + rec_off);
		r[10].id ^= 1;			/* the hash no longer finds it */
		reseal(bad);
		CHECK(tdb_map_validate(bad, size, TDB_VALIDATE_FULL, err) == TDB_OBJ_ECORRUPT);

		memcpy(bad, obj, size);
		r = (TdbLocation *) ((char *) bad + rec_off);
		r[3].name_off = (uint32_t) h->sections[TDB_MAP_STRINGS].size;
		reseal(bad);
		CHECK(tdb_map_validate(bad, size, TDB_VALIDATE_FULL, err) == TDB_OBJ_ECORRUPT);

		memcpy(bad, obj, size);
		((TdbBoxF *) ((char *) bad + h->sections[TDB_MAP_BOXES].offset))[7].xmax -= 1.0f;
		reseal(bad);
		CHECK(tdb_map_validate(bad, size, TDB_VALIDATE_FULL, err) == TDB_OBJ_ECORRUPT);
	}

	/*
	 * Fuzz: random byte damage, resealed, must never crash the validator;
	 * whatever it accepts must be safe to query.
	 */
	for (int t = 0; t < 2000; t++)
	{
		memcpy(bad, obj, size);
		for (int k = 0; k < 1 + (int) (unit_rand(&seed) % 8); k++)
			((uint8_t *) bad)[12 + unit_rand(&seed) % (size - 12)] = (uint8_t) unit_rand(&seed);
		reseal(bad);
		if (tdb_map_validate(bad, size, TDB_VALIDATE_FULL, err) == TDB_OBJ_OK)
		{
			TdbMapView	bv;
			TdbKnnResult out[8];
			Collect		c = {malloc(sizeof(uint64_t) * (n + 1)), 0};
			TdbBox		all = {-180, -90, 180, 90};

			tdb_map_view_init(&bv, bad);
			for (int i = 0; i < n; i += 37)
				(void) tdb_map_find(&bv, locs[i].id);
			tdb_map_query_box(&bv, &all, collect, &c);
			CHECK(c.n <= (size_t) bv.count);
			(void) tdb_map_knn(&bv, 24.9, 60.2, TDB_METRIC_PLANAR, 8, out);
			free(c.items);
		}
	}
	free(bad);
	free(obj);
	free(locs);
}

/* A map built with its passes in two threads is the same bytes as one built in one. */
UNIT_TEST(test_map_build_in_two_threads)
{
	uint64_t	seed = 21;
	int			n = 5000;
	TestLoc    *locs = random_locations(&seed, n);
	uint64_t	saved = tdb_halves_min;
	size_t		size1,
				size2;
	void	   *one,
			   *two;

	tdb_halves_min = UINT64_MAX;
	one = build_map(locs, n, &size1);
	tdb_halves_min = 0;
	two = build_map(locs, n, &size2);
	tdb_halves_min = saved;
	CHECK_EQ_U64(size2, size1);
	CHECK(size1 == size2 && memcmp(one, two, size1) == 0);
	free(one);
	free(two);
	free(locs);
}

UNIT_TEST(test_traffic_object)
{
	uint64_t	seed = 4;
	int			n = 300;
	TestLoc    *locs = random_locations(&seed, n);
	size_t		msize;
	void	   *map = build_map(locs, n, &msize);
	TdbTraffic *t = calloc(n, sizeof(TdbTraffic));
	char		incidents[64];
	size_t		ilen;
	size_t		size;
	void	   *obj;
	void	   *bad;
	char		err[TDB_ERRLEN];
	uint32_t	len;
	const char *text;

	/* INCIDENTS: 4 unused bytes, then one incident "accident" */
	memset(incidents, 0, sizeof(incidents));
	len = 8;
	memcpy(incidents + 4, &len, 4);
	memcpy(incidents + 8, "accident", 8);
	ilen = 16;
	for (int i = 0; i < n; i++)
	{
		t[i].updated_at_us = 1700000000000000 + i;
		t[i].changed_gen = (uint64_t) (i % 5);
		t[i].speed_kmh = (float) (i % 90);
		t[i].free_flow_kmh = 50;
		t[i].congestion = (uint8_t) (i % 5);
		t[i].confidence = (uint8_t) (i % 101);
		t[i].incident_off = (i == 7) ? 4 : 0;
	}
	size = tdb_traffic_size(n, ilen);
	obj = malloc(size);
	bad = malloc(size);
	tdb_traffic_write(obj, 77, 9, n, t, incidents, ilen, 5);
	CHECK_EQ_U64(tdb_traffic_validate(obj, size, TDB_VALIDATE_FULL, map, err), TDB_OBJ_OK);
	CHECK(memcmp(tdb_traffic_entries(obj), t, n * sizeof(TdbTraffic)) == 0);
	text = tdb_traffic_incident(obj, &tdb_traffic_entries(obj)[7], &len);
	CHECK(text != NULL && len == 8 && memcmp(text, "accident", 8) == 0);
	CHECK(tdb_traffic_incident(obj, &tdb_traffic_entries(obj)[8], &len) == NULL);

	/* a traffic object for another map */
	memcpy(bad, obj, size);
	((TdbObjectHeader *) bad)->map_id = 78;
	reseal(bad);
	CHECK(tdb_traffic_validate(bad, size, TDB_VALIDATE_HEADER, map, err) == TDB_OBJ_ECORRUPT);
	CHECK(strstr(err, "not map 77") != NULL);
	/* an incident offset past the end, a congestion level out of range */
	memcpy(bad, obj, size);
	((TdbTraffic *) ((char *) bad + ((TdbObjectHeader *) bad)->sections[0].offset))[3].incident_off = 13;
	reseal(bad);
	CHECK(tdb_traffic_validate(bad, size, TDB_VALIDATE_FULL, map, err) == TDB_OBJ_ECORRUPT);
	memcpy(bad, obj, size);
	((TdbTraffic *) ((char *) bad + ((TdbObjectHeader *) bad)->sections[0].offset))[3].congestion = 9;
	reseal(bad);
	CHECK(tdb_traffic_validate(bad, size, TDB_VALIDATE_FULL, map, err) == TDB_OBJ_ECORRUPT);
	/* any flipped bit */
	for (int k = 0; k < 1000; k++)
	{
		size_t		at = unit_rand(&seed) % size;

		memcpy(bad, obj, size);
		((uint8_t *) bad)[at] ^= (uint8_t) (1u << (k % 8));
		if (tdb_traffic_validate(bad, size, TDB_VALIDATE_FULL, map, err) != TDB_OBJ_ECORRUPT)
			unit_fail(__FILE__, __LINE__, "flip at byte %zu not detected", at);
	}
	free(bad);
	free(obj);
	free(t);
	free(map);
	free(locs);
}

/*
 * The traffic object is a function of its inputs alone, whatever the
 * buffer held before: the generation log rebuilds objects in scratch
 * memory and compares checksums with the ones published from reused
 * shared-memory buffers.  (The alignment gap after the entries was left as
 * it was: a map of 201 locations replayed with another checksum.)
 */
UNIT_TEST(test_traffic_object_ignores_old_buffer_bytes)
{
	for (uint64_t n = 1; n <= 67; n += 3)
	{
		TdbTraffic *t = calloc(n, sizeof(TdbTraffic));
		size_t		size = tdb_traffic_size(n, 0);
		unsigned char *a = malloc(size);
		unsigned char *b = malloc(size);

		if (t == NULL || a == NULL || b == NULL)
			unit_fail(__FILE__, __LINE__, "out of memory");
		for (uint64_t i = 0; i < n; i++)
		{
			t[i].updated_at_us = (int64_t) (1000 + i);
			t[i].speed_kmh = (float) i;
			t[i].free_flow_kmh = 50;
		}
		memset(a, 0, size);
		memset(b, 0xA5, size);
		tdb_traffic_write(a, 7, 3, n, t, NULL, 0, 99);
		tdb_traffic_write(b, 7, 3, n, t, NULL, 0, 99);
		if (memcmp(a, b, size) != 0)
			unit_fail(__FILE__, __LINE__, "%llu locations: the object depends on what the buffer held",
					  (unsigned long long) n);
		free(t);
		free(a);
		free(b);
	}
}

/*
 * An object brought up to date in place (tdb_traffic_update, what a reused
 * buffer gets) is byte-identical to one written whole, whatever changed:
 * several spans with repeats and indices past the end, incidents that grow
 * and shrink; and it validates in full.
 * Its checksum is also what tdb_traffic_checksum_of computes without a buffer.
 */
UNIT_TEST(test_traffic_update_equals_write)
{
	uint64_t	seed = 12345;
	const char *blobs[3] = {"\0\0\0\0\3\0\0\0abc", "\0\0\0\0\11\0\0\0incidents", NULL};
	size_t		blen[3] = {11, 17, 0};

	for (uint64_t n = 1; n <= 800; n += 97)
	{
		size_t		cap = tdb_traffic_size(n, 64);
		TdbTraffic *t = calloc(n, sizeof(TdbTraffic));
		unsigned char *a = malloc(cap);
		unsigned char *b = malloc(cap);
		uint32_t	idx[3][40];
		char		err[TDB_ERRLEN];

		if (t == NULL || a == NULL || b == NULL)
			unit_fail(__FILE__, __LINE__, "out of memory");
		for (uint64_t i = 0; i < n; i++)
		{
			t[i].speed_kmh = NAN;
			t[i].free_flow_kmh = NAN;
			t[i].congestion = TDB_CONGESTION_UNKNOWN;
			t[i].confidence = TDB_CONFIDENCE_UNKNOWN;
		}
		memset(b, 0x5A, cap);
		tdb_traffic_write(b, 7, 1, n, t, NULL, 0, 1);
		for (uint64_t gen = 2; gen < 12; gen++)
		{
			TdbIndexSpan spans[3];
			int			which = (int) (gen % 3);
			size_t		size;

			for (int s = 0; s < 3; s++)
			{
				spans[s].idx = idx[s];
				spans[s].n = (gen + (uint64_t) s) % 4 == 0 ? 0 : 1 + (gen * 7 + (uint64_t) s) % 40;
				for (uint64_t k = 0; k < spans[s].n; k++)
				{
					uint64_t	i;

					seed = seed * 6364136223846793005ull + 1442695040888963407ull;
					i = (seed >> 33) % (n + 3);		/* a few past the end: ignored */
					idx[s][k] = (uint32_t) i;
					if (i < n)
					{
						t[i].updated_at_us = (int64_t) (gen * 1000 + i);
						t[i].speed_kmh = (float) (seed % 130);
						t[i].congestion = (uint8_t) (seed % 5);
						t[i].changed_gen = gen;
					}
				}
			}
			tdb_traffic_update(b, gen, t, spans, 3, blobs[which], blen[which], (int64_t) gen);
			size = tdb_traffic_size(n, blen[which]);
			memset(a, 0, cap);
			tdb_traffic_write(a, 7, gen, n, t, blobs[which], blen[which], (int64_t) gen);
			if (memcmp(a, b, size) != 0)
				unit_fail(__FILE__, __LINE__, "%llu locations, generation %llu: the updated object differs from the written one",
						  (unsigned long long) n, (unsigned long long) gen);
			CHECK_EQ_U64(tdb_traffic_validate(b, size, TDB_VALIDATE_FULL, NULL, err), TDB_OBJ_OK);
			CHECK_EQ_U64(tdb_traffic_checksum_of(7, gen, n, t, blobs[which], blen[which], (int64_t) gen),
						 ((TdbObjectHeader *) b)->checksum);
		}
		/* one changed byte in an entry, the digest, the incidents or a gap is found */
		{
			size_t		size = tdb_traffic_size(n, blen[11 % 3]);

			for (size_t off = 12; off < size; off += 61)
			{
				b[off] ^= 0x10;
				if (tdb_traffic_validate(b, size, TDB_VALIDATE_FULL, NULL, err) != TDB_OBJ_ECORRUPT)
					unit_fail(__FILE__, __LINE__, "%llu locations: a flip at byte %zu is not found",
							  (unsigned long long) n, off);
				b[off] ^= 0x10;
			}
		}
		free(t);
		free(a);
		free(b);
	}
}

/* tdb_map_builder_reserve: room made once, adding goes on past it, an impossible size is refused */
UNIT_TEST(test_map_builder_reserve)
{
	TdbMapBuilder *b = tdb_map_builder_create();
	char		err[TDB_ERRLEN];
	double		xy[4] = {24.9, 60.1, 24.91, 60.11};

	CHECK(b != NULL);
	CHECK_EQ_U64(tdb_map_builder_reserve(b, 3), TDB_OBJ_OK);
	CHECK_EQ_U64(tdb_map_builder_reserve(b, UINT64_MAX), TDB_OBJ_ENOMEM);
	for (uint64_t id = 1; id <= 5000; id++)
	{
		xy[0] = 24.9 + (double) id * 1e-5;
		CHECK_EQ_U64(tdb_map_builder_add(b, id, xy, 2, "primary", NULL, 0, 0, err), TDB_OBJ_OK);
	}
	CHECK_EQ_U64(tdb_map_builder_finish(b, err), TDB_OBJ_OK);
	CHECK_EQ_U64(tdb_map_builder_count(b), 5000);
	tdb_map_builder_free(b);
}
