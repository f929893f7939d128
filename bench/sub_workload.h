/*
 * bench/sub_workload.h: the subscription benchmark's workload (issue 18),
 * shared by every side measured on it: the Redis and LISTEN/NOTIFY baselines
 * (bench/sub_baselines.c) and trafficdb's own subscriptions and rings.
 * Header-only: include it in one C file.
 *
 * A workload is deterministic (a seed) and written once to a file:
 *
 *   - a map of n locations, ids 1..n, a point each on a grid of side x rows
 *     cells over Helsinki (lon 24.75 + col * dx, lat 60.10 + row * dy, cells
 *     of about 88 x 88 m at n = 100,000); location id i is at col = (i-1) %
 *     side, row = (i-1) / side; its initial speed (10-120 km/h, whole) and
 *     congestion (0-4);
 *   - s subscriptions, each a box whose edges lie half a cell between grid
 *     points (so a point is never within dx/2 or dy/2 of an edge: a short
 *     segment from the point gives the same answer), 3 to 6 cells a side (9
 *     to 36 locations); even indexes: no condition, 'change' events (every
 *     change); odd ones: congestion_at_least 3, 'enter_exit' events;
 *   - r rounds of k changes each: k distinct locations per round, a new
 *     speed (always different from the old) and a new congestion (0-4, may
 *     be the same); the record carries the old values too;
 *   - the expected events, by brute force (every change against every
 *     subscription): changes in a 'change' subscription's box, and ENTER or
 *     EXIT where the congestion crosses the threshold.
 *
 * A side that publishes each round as one generation (one transaction,
 * one trafficdb publication) must find exactly the expected count.
 *
 * File layout (native little-endian x86-64, read it with sub_wl_read()):
 *   struct sub_wl_header
 *   double lon[n], lat[n]
 *   int16_t speed[n]; uint8_t congestion[n]          (initial values)
 *   struct sub_box subs[s]
 *   struct sub_change changes[r * k]                 (round after round)
 */
#ifndef SUB_WORKLOAD_H
#define SUB_WORKLOAD_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUB_WL_MAGIC "TDBSUBW1"
#define SUB_COND_NONE 0
#define SUB_COND_CONGESTION_AT_LEAST 1
#define SUB_EVENTS_CHANGE 0
#define SUB_EVENTS_ENTER_EXIT 1
/* what sub_event() returns */
#define SUB_EV_NONE 0
#define SUB_EV_CHANGE 1
#define SUB_EV_ENTER 2
#define SUB_EV_EXIT 3

struct sub_wl_header {
	char magic[8];
	uint32_t n, s, r, k;
	uint64_t seed;
	uint64_t expected_events, expected_change, expected_enter, expected_exit;
	double lon0, lat0, dx, dy;
	uint32_t side, rows;
};

struct sub_box {
	double xmin, ymin, xmax, ymax;
	uint8_t cond, value, events, pad[5];
};

struct sub_change {
	uint32_t id; /* 1..n */
	int16_t old_speed, new_speed;
	uint8_t old_cong, new_cong, pad[2];
};

struct sub_workload {
	struct sub_wl_header h;
	double *lon, *lat; /* by id - 1 */
	int16_t *speed;
	uint8_t *cong;
	struct sub_box *subs;
	struct sub_change *changes; /* r * k */
};

static inline uint64_t sub_rng(uint64_t *st) /* splitmix64 */
{
	uint64_t z = (*st += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline int sub_in_box(const struct sub_box *b, double lon, double lat)
{
	return lon >= b->xmin && lon <= b->xmax && lat >= b->ymin && lat <= b->ymax;
}

/* The event a change of a location inside b's box gives (SUB_EV_*).
 * Congestion 255 (unknown) never satisfies a condition. */
static inline int sub_event(const struct sub_box *b, const struct sub_change *c)
{
	int was, is;

	if (b->cond == SUB_COND_NONE)
		return b->events == SUB_EVENTS_CHANGE ? SUB_EV_CHANGE : SUB_EV_NONE;
	was = c->old_cong != 255 && c->old_cong >= b->value;
	is = c->new_cong != 255 && c->new_cong >= b->value;
	if (b->events == SUB_EVENTS_CHANGE)
		return is ? SUB_EV_CHANGE : SUB_EV_NONE;
	return was == is ? SUB_EV_NONE : is ? SUB_EV_ENTER : SUB_EV_EXIT;
}

static inline void sub_wl_free(struct sub_workload *w)
{
	free(w->lon);
	free(w->lat);
	free(w->speed);
	free(w->cong);
	free(w->subs);
	free(w->changes);
	memset(w, 0, sizeof(*w));
}

static int sub_wl_alloc(struct sub_workload *w)
{
	const struct sub_wl_header *h = &w->h;

	w->lon = calloc(h->n, sizeof(double));
	w->lat = calloc(h->n, sizeof(double));
	w->speed = calloc(h->n, sizeof(int16_t));
	w->cong = calloc(h->n, 1);
	w->subs = calloc(h->s ? h->s : 1, sizeof(struct sub_box));
	w->changes = calloc((size_t)h->r * h->k + 1, sizeof(struct sub_change));
	if (!w->lon || !w->lat || !w->speed || !w->cong || !w->subs || !w->changes) {
		sub_wl_free(w);
		return -1;
	}
	return 0;
}

/* The expected events: every change against every subscription. */
static void sub_wl_expect(struct sub_workload *w)
{
	struct sub_wl_header *h = &w->h;
	uint64_t by[4] = {0, 0, 0, 0};
	size_t i, total = (size_t)h->r * h->k;
	uint32_t j;

	for (i = 0; i < total; i++) {
		const struct sub_change *c = &w->changes[i];
		double lon = w->lon[c->id - 1], lat = w->lat[c->id - 1];

		for (j = 0; j < h->s; j++)
			if (sub_in_box(&w->subs[j], lon, lat))
				by[sub_event(&w->subs[j], c)]++;
	}
	h->expected_change = by[SUB_EV_CHANGE];
	h->expected_enter = by[SUB_EV_ENTER];
	h->expected_exit = by[SUB_EV_EXIT];
	h->expected_events = by[1] + by[2] + by[3];
}

/* Generate a workload (see the top of this file); 0 or -1 (errno). */
static inline int sub_wl_generate(struct sub_workload *w, uint32_t n, uint32_t s, uint32_t r, uint32_t k, uint64_t seed)
{
	struct sub_wl_header *h = &w->h;
	uint64_t st = seed;
	uint32_t *perm, i, j, round;
	int16_t *speed;
	uint8_t *cong;

	if (n == 0 || k > n) {
		errno = EINVAL;
		return -1;
	}
	memset(w, 0, sizeof(*w));
	memcpy(h->magic, SUB_WL_MAGIC, 8);
	h->n = n;
	h->s = s;
	h->r = r;
	h->k = k;
	h->seed = seed;
	h->side = (uint32_t)ceil(sqrt((double)n));
	h->rows = (n + h->side - 1) / h->side;
	h->lon0 = 24.75;
	h->lat0 = 60.10;
	h->dx = 0.5 / h->side;
	h->dy = 0.25 / h->side;
	if (sub_wl_alloc(w) < 0)
		return -1;
	for (i = 0; i < n; i++) {
		w->lon[i] = h->lon0 + (i % h->side) * h->dx;
		w->lat[i] = h->lat0 + (i / h->side) * h->dy;
		w->speed[i] = (int16_t)(10 + sub_rng(&st) % 111);
		w->cong[i] = (uint8_t)(sub_rng(&st) % 5);
	}
	for (j = 0; j < s; j++) {
		struct sub_box *b = &w->subs[j];
		uint32_t cx = (uint32_t)(sub_rng(&st) % h->side), cy = (uint32_t)(sub_rng(&st) % h->rows);
		uint32_t bw = 3 + (uint32_t)(sub_rng(&st) % 4), bh = 3 + (uint32_t)(sub_rng(&st) % 4);

		b->xmin = h->lon0 + (cx - 0.5) * h->dx;
		b->xmax = h->lon0 + (cx + bw - 0.5) * h->dx;
		b->ymin = h->lat0 + (cy - 0.5) * h->dy;
		b->ymax = h->lat0 + (cy + bh - 0.5) * h->dy;
		if (j % 2 == 0) {
			b->cond = SUB_COND_NONE;
			b->events = SUB_EVENTS_CHANGE;
		} else {
			b->cond = SUB_COND_CONGESTION_AT_LEAST;
			b->value = 3;
			b->events = SUB_EVENTS_ENTER_EXIT;
		}
	}
	/* the rounds: k distinct locations each (a partial Fisher-Yates shuffle
	 * of a permutation carried from round to round), applied to the state */
	perm = malloc(sizeof(uint32_t) * n);
	speed = malloc(sizeof(int16_t) * n);
	cong = malloc(n);
	if (!perm || !speed || !cong) {
		free(perm);
		free(speed);
		free(cong);
		sub_wl_free(w);
		errno = ENOMEM;
		return -1;
	}
	for (i = 0; i < n; i++)
		perm[i] = i;
	memcpy(speed, w->speed, sizeof(int16_t) * n);
	memcpy(cong, w->cong, n);
	for (round = 0; round < r; round++) {
		for (i = 0; i < k; i++) {
			uint32_t pick = i + (uint32_t)(sub_rng(&st) % (n - i)), loc = perm[pick];
			struct sub_change *c = &w->changes[(size_t)round * k + i];

			perm[pick] = perm[i];
			perm[i] = loc;
			c->id = loc + 1;
			c->old_speed = speed[loc];
			c->old_cong = cong[loc];
			c->new_speed = (int16_t)(10 + (speed[loc] - 10 + 1 + sub_rng(&st) % 110) % 111);
			c->new_cong = (uint8_t)(sub_rng(&st) % 5);
			speed[loc] = c->new_speed;
			cong[loc] = c->new_cong;
		}
	}
	free(perm);
	free(speed);
	free(cong);
	sub_wl_expect(w);
	return 0;
}

static inline int sub_wl_write(const struct sub_workload *w, const char *path)
{
	const struct sub_wl_header *h = &w->h;
	size_t nc = (size_t)h->r * h->k;
	FILE *f = fopen(path, "wb");
	int ok;

	if (!f)
		return -1;
	ok = fwrite(h, sizeof(*h), 1, f) == 1 && fwrite(w->lon, sizeof(double), h->n, f) == h->n &&
	     fwrite(w->lat, sizeof(double), h->n, f) == h->n && fwrite(w->speed, sizeof(int16_t), h->n, f) == h->n &&
	     fwrite(w->cong, 1, h->n, f) == h->n && fwrite(w->subs, sizeof(struct sub_box), h->s, f) == h->s &&
	     fwrite(w->changes, sizeof(struct sub_change), nc, f) == nc;
	if (fclose(f) != 0 || !ok)
		return -1;
	return 0;
}

/* Read a workload file; 0, or -1 with a message on stderr. */
static inline int sub_wl_read(struct sub_workload *w, const char *path)
{
	struct sub_wl_header *h = &w->h;
	FILE *f = fopen(path, "rb");
	size_t nc;
	int ok;

	memset(w, 0, sizeof(*w));
	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fread(h, sizeof(*h), 1, f) != 1 || memcmp(h->magic, SUB_WL_MAGIC, 8) != 0 || h->n == 0 || h->k > h->n ||
	    h->n > 100000000 || h->s > 100000000 || (uint64_t)h->r * h->k > 1000000000ULL) {
		fprintf(stderr, "%s: not a subscription workload (%s)\n", path, SUB_WL_MAGIC);
		fclose(f);
		return -1;
	}
	if (sub_wl_alloc(w) < 0) {
		fclose(f);
		fprintf(stderr, "%s: out of memory\n", path);
		return -1;
	}
	nc = (size_t)h->r * h->k;
	ok = fread(w->lon, sizeof(double), h->n, f) == h->n && fread(w->lat, sizeof(double), h->n, f) == h->n &&
	     fread(w->speed, sizeof(int16_t), h->n, f) == h->n && fread(w->cong, 1, h->n, f) == h->n &&
	     fread(w->subs, sizeof(struct sub_box), h->s, f) == h->s &&
	     fread(w->changes, sizeof(struct sub_change), nc, f) == nc;
	fclose(f);
	if (!ok) {
		fprintf(stderr, "%s: truncated\n", path);
		sub_wl_free(w);
		return -1;
	}
	for (size_t i = 0; i < nc; i++)
		if (w->changes[i].id == 0 || w->changes[i].id > h->n) {
			fprintf(stderr, "%s: change %zu names location %u of %u\n", path, i, w->changes[i].id, h->n);
			sub_wl_free(w);
			return -1;
		}
	return 0;
}

#endif
