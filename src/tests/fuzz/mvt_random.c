/*
 * mvt_random.c
 *	  The tile encoder (src/tile/) under AddressSanitizer and UBSan: random
 *	  maps (identical points, lon +-180, lat +-90, up to 300,000 vertices a
 *	  road, ids up to 2^64-1, NaN and infinite speeds) and random tiles z0-30
 *	  with random extents, buffers, budgets and projection caps.  Not a
 *	  differential test (test/tiles_diff.sh is): it checks only that nothing
 *	  reads or writes out of bounds and that a tile never fails.
 *	  make fuzz-mvt [FUZZ_SECONDS=N] [MVT_SEED=S]
 */
#include "object.h"
#include "tile/mvt.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t st;
static uint64_t rnd(void) { uint64_t z = (st += 0x9e3779b97f4a7c15ull); z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull; z = (z ^ (z >> 27)) * 0x94d049bb133111ebull; return z ^ (z >> 31); }
static double urand(void) { return (double) (rnd() >> 11) / 9007199254740992.0; }
static void *g(void *c, void *p, size_t s) { (void) c; return realloc(p, s); }
static void r(void *c, void *p) { (void) c; free(p); }
static const TdbKnnAlloc A = {g, r, NULL};
static int nint;
static void intr(void) { nint++; }

int main(int argc, char **argv)
{
	int secs = argc > 1 ? atoi(argv[1]) : 60;
	time_t end = time(NULL) + secs;
	st = argc > 2 ? strtoull(argv[2], NULL, 10) : (uint64_t) time(NULL);
	long maps = 0, tiles = 0, feats = 0;
	static const char *cls[] = {"motorway", "residential", "x", "", NULL, "track", "zzz"};
	printf("mvt_random: seed %llu\n", (unsigned long long) st);
	fflush(stdout);
	while (time(NULL) < end)
	{
		TdbMapBuilder *b = tdb_map_builder_create();
		char err[TDB_ERRLEN];
		int kind = (int) (rnd() % 8);
		/* kind 7: past 2^18 candidates, the rank walk of low zooms (mvt.c LARGE_TILE) */
		uint64_t n = kind == 5 ? 1 + rnd() % 3 : kind == 7 ? 270000 + rnd() % 30000 : 1 + rnd() % 3000;
		double cx = -180 + 360 * urand(), cy = -90 + 180 * urand();
		uint64_t added = 0;
		for (uint64_t i = 0; i < n; i++)
		{
			uint32_t np = kind == 5 ? 2 + (uint32_t) (rnd() % 300000) :
				kind == 7 ? 2 + (uint32_t) (rnd() % 3) : 2 + (uint32_t) (rnd() % (rnd() % 8 == 0 ? 2000 : 6));
			double *xy = malloc(16 * (size_t) np);
			double x = cx, y = cy, sc = pow(10, -(double) (rnd() % 9));
			int ex = (int) (rnd() % 8);

			if (kind == 7)
			{
				cx = -10 + 20 * urand();	/* spread over 20 x 20 degrees */
				cy = 40 + 20 * urand();
				ex = 4 + (int) (rnd() % 4);
				sc = 1e-3;
				x = cx;
				y = cy;
			}
			for (uint32_t k = 0; k < np; k++)
			{
				if (ex == 0) { x = cx; y = cy; }						/* identical points */
				else if (ex == 1) { x = (rnd() & 1) ? 180 : -180; y = -90 + 180 * urand(); }
				else if (ex == 2) { x = -180 + 360 * urand(); y = (rnd() & 1) ? 90 : -90; }
				else if (ex == 3) { x = -180 + 360 * urand(); y = -90 + 180 * urand(); }
				else { x += (urand() - 0.5) * sc; y += (urand() - 0.5) * sc; }
				x = x > 180 ? 180 : x < -180 ? -180 : x;
				y = y > 90 ? 90 : y < -90 ? -90 : y;
				xy[2 * k] = x; xy[2 * k + 1] = y;
			}
			uint64_t id = rnd() % 4 == 0 ? rnd() : i + 1;
			if (tdb_map_builder_add(b, id, xy, np, cls[rnd() % 7], rnd() & 1 ? "N\xc3\xa9" : NULL, (uint16_t) rnd(), (uint8_t) (rnd() & 1), err) == 0)
				added++;
			free(xy);
		}
		if (tdb_map_builder_finish(b, err) != 0) { tdb_map_builder_free(b); continue; }
		size_t size = tdb_map_builder_size(b);
		void *obj = aligned_alloc(64, (size + 63) / 64 * 64);
		tdb_map_builder_write(b, obj, rnd(), 0);
		tdb_map_builder_free(b);
		TdbMapView v;
		tdb_map_view_init(&v, obj);
		TdbTraffic *e = calloc(v.count ? v.count : 1, sizeof(TdbTraffic));
		for (uint64_t i = 0; i < v.count; i++)
		{
			e[i].speed_kmh = rnd() % 5 == 0 ? NAN : (float) (rnd() % 200) - 50;
			e[i].free_flow_kmh = rnd() % 3 == 0 ? INFINITY : (float) (rnd() % 100);
			e[i].congestion = (uint8_t) rnd();
			e[i].changed_gen = rnd() % 4 == 0 ? rnd() : rnd() % 10;
		}
		void *traffic = aligned_alloc(64, (tdb_traffic_size(v.count, 0) + 63) / 64 * 64);
		tdb_traffic_write(traffic, 1, 2, v.count, e, NULL, 0, 0);
		TdbMvtRank rank = {0};
		TdbMvtProj proj = {0};
		for (int t = 0; t < (kind == 7 ? 12 : 40) && time(NULL) < end; t++)
		{
			TdbMvtOptions o;
			uint32_t z = (uint32_t) (kind == 7 && rnd() % 2 ? rnd() % 7 : rnd() % 31), side = 1u << z;
			double lon = v.count ? cx : 0, lat = cy;
			uint32_t x, y;
			if (rnd() % 3) {	/* a tile near the map */
				double n2 = (double) side;
				double lr = lat * M_PI / 180;
				double fx = (lon + 180) / 360 * n2, fy = (1 - log(tan(lr) + 1 / cos(lr)) / M_PI) / 2 * n2;
				x = fx >= 0 && fx < n2 ? (uint32_t) fx : (uint32_t) (rnd() % side);
				y = fy >= 0 && fy < n2 ? (uint32_t) fy : (uint32_t) (rnd() % side);
			} else { x = (uint32_t) (rnd() % side); y = (uint32_t) (rnd() % side); }
			if (rnd() % 4 == 0) { x = rnd() & 1 ? 0 : side - 1; y = rnd() & 1 ? 0 : side - 1; }
			o.extent = rnd() % 3 ? 4096 : 1 + (uint32_t) (rnd() % 65536);
			o.buffer = rnd() % 3 ? (o.extent < 64 ? o.extent : 64) : (uint32_t) (rnd() % (o.extent + 1));
			o.budget = rnd() % 2 ? 512000 : 1024 + (uint32_t) (rnd() % (16777216 - 1024 + 1));
			if (rnd() % 4 == 0) o.budget = 1024 + (uint32_t) (rnd() % 4000);
			TdbMvtEnv env = {.alloc = &A, .header = 4, .rank = &rank, .rank_alloc = &A, .proj = rnd() & 1 ? &proj : NULL,
				.proj_cap = rnd() & 1 ? (64u << 20) : rnd() % 100000, .interrupt = intr};
			TdbMvtResult out;
			if (tdb_mvt_encode(&v, traffic, tdb_traffic_entries(traffic), z, x, y, &o, &env, &out) != TDB_MVT_OK)
			{ printf("ENOMEM? z%u %u %u\n", z, x, y); return 1; }
			if (out.size > o.budget)
			{
				printf("over budget %zu > %u z%u/%u/%u\n", out.size, o.budget, z, x, y);
				return 1;
			}
			feats += (long) out.features;
			free(out.data);
			tiles++;
		}
		free(rank.order);
		free(proj.off); free(proj.merc); free(proj.done);
		free(traffic); free(e); free(obj);
		maps++;
		(void) added;
	}
	printf("mvt_random: %ld maps, %ld tiles, %ld features, %d interrupt calls\n", maps, tiles, feats, nint);
	return 0;
}
