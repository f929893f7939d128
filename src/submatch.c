/*
 * submatch.c
 *	  Subscriptions matched against a publication's changes: see submatch.h.
 */
#include "submatch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* tdb_sub_match fetches the index and entries of the changed record this far ahead */
#define MATCH_AHEAD 8

bool
tdb_sub_filter_check(const TdbSubFilter *f, char *err)
{
	switch (f->area)
	{
		case TDB_SUB_IDS:
			if (f->nids == 0 || f->ids == NULL)
			{
				snprintf(err, TDB_ERRLEN, "subscription %u: the list of location ids is empty", f->id);
				return false;
			}
			break;
		case TDB_SUB_BOX:
			if (!isfinite(f->box.xmin) || !isfinite(f->box.ymin) || !isfinite(f->box.xmax) || !isfinite(f->box.ymax))
			{
				snprintf(err, TDB_ERRLEN, "subscription %u: box (%g, %g, %g, %g) has a coordinate that is not a finite number",
						 f->id, f->box.xmin, f->box.ymin, f->box.xmax, f->box.ymax);
				return false;
			}
			if (f->box.xmin > f->box.xmax || f->box.ymin > f->box.ymax)
			{
				snprintf(err, TDB_ERRLEN, "subscription %u: box (%g, %g, %g, %g) is inverted: expected xmin <= xmax and ymin <= ymax",
						 f->id, f->box.xmin, f->box.ymin, f->box.xmax, f->box.ymax);
				return false;
			}
			break;
		case TDB_SUB_RADIUS:
			if (!isfinite(f->lon) || !isfinite(f->lat) || fabs(f->lon) > 180 || fabs(f->lat) > 90)
			{
				snprintf(err, TDB_ERRLEN, "subscription %u: centre (%g, %g) is not a longitude in [-180, 180] and a latitude in [-90, 90]",
						 f->id, f->lon, f->lat);
				return false;
			}
			if (!isfinite(f->radius_m) || f->radius_m < 0)
			{
				snprintf(err, TDB_ERRLEN, "subscription %u: radius %g m is not a finite number of metres >= 0",
						 f->id, f->radius_m);
				return false;
			}
			break;
		case TDB_SUB_POLYGON:
			if (f->polygon.shape != TDB_KNN_POLYGON || f->polygon.npoints < 3 || f->polygon.nrings == 0 ||
				!(f->polygon.box.xmax > f->polygon.box.xmin) || !(f->polygon.box.ymax > f->polygon.box.ymin))
			{
				snprintf(err, TDB_ERRLEN, "subscription %u: the polygon is empty (%u points): expected a ring of at least 3 points enclosing an area",
						 f->id, f->polygon.npoints);
				return false;
			}
			break;
		case TDB_SUB_NONE:
			return true;		/* nothing to match: conditions are moot */
		case TDB_SUB_ALL_SQL:
			if (f->cond != TDB_SUB_ANY || f->on != TDB_SUB_ON_CHANGE)
			{
				snprintf(err, TDB_ERRLEN, "subscription %u: the events of every subscription take no condition of their own", f->id);
				return false;
			}
			return true;
		default:
			snprintf(err, TDB_ERRLEN, "subscription %u: unknown area kind %d", f->id, (int) f->area);
			return false;
	}
	switch (f->cond)
	{
		case TDB_SUB_ANY:
		case TDB_SUB_INCIDENT:
			break;
		case TDB_SUB_CONGESTION_AT_LEAST:
			if (!(f->value >= 0 && f->value <= 4))
			{
				snprintf(err, TDB_ERRLEN, "subscription %u: congestion %g is out of range: expected 0 (free) to 4 (standstill)",
						 f->id, f->value);
				return false;
			}
			break;
		case TDB_SUB_SPEED_BELOW:
			if (!(f->value >= 0 && f->value <= 400))
			{
				snprintf(err, TDB_ERRLEN, "subscription %u: speed %g km/h is out of range: expected 0 to 400",
						 f->id, f->value);
				return false;
			}
			break;
		case TDB_SUB_SPEED_BELOW_PCT:
			if (!(f->value >= 0 && f->value <= 1000))
			{
				snprintf(err, TDB_ERRLEN, "subscription %u: %g %% of free flow is out of range: expected 0 to 1000",
						 f->id, f->value);
				return false;
			}
			break;
		default:
			snprintf(err, TDB_ERRLEN, "subscription %u: unknown condition %d", f->id, (int) f->cond);
			return false;
	}
	if (f->on != TDB_SUB_ON_CHANGE && f->on != TDB_SUB_ON_ENTER_EXIT)
	{
		snprintf(err, TDB_ERRLEN, "subscription %u: unknown event kind %d", f->id, (int) f->on);
		return false;
	}
	if (f->on == TDB_SUB_ON_ENTER_EXIT && f->cond == TDB_SUB_ANY)
	{
		snprintf(err, TDB_ERRLEN, "subscription %u: enter and exit events need a condition", f->id);
		return false;
	}
	return true;
}

static inline bool
cond_holds(TdbSubCond cond, double value, const TdbTraffic *t)
{
	switch (cond)
	{
		case TDB_SUB_ANY:
			return true;
		case TDB_SUB_CONGESTION_AT_LEAST:
			return t->congestion != 255 && t->congestion >= value;
		case TDB_SUB_SPEED_BELOW:
			return !isnan(t->speed_kmh) && t->speed_kmh < value;
		case TDB_SUB_SPEED_BELOW_PCT:
			return !isnan(t->speed_kmh) && !isnan(t->free_flow_kmh) && t->free_flow_kmh > 0 &&
				t->speed_kmh < value / 100.0 * t->free_flow_kmh;
		case TDB_SUB_INCIDENT:
			return t->incident_off != 0;
	}
	return false;
}

bool
tdb_sub_cond_holds(TdbSubCond cond, double value, const TdbTraffic *t)
{
	return cond_holds(cond, value, t);
}

/* tdb_sub_event_kind over a packed filter (tdb_sub_match's inner loop) */
static inline uint16_t
match_kind(const TdbSubMatchFilter *f, const TdbTraffic *o, const TdbTraffic *n)
{
	bool		now = cond_holds((TdbSubCond) f->cond, f->value, n);

	if (f->on == TDB_SUB_ON_CHANGE)
		return now ? TDB_SUB_EV_CHANGE : 0;
	if (cond_holds((TdbSubCond) f->cond, f->value, o) == now)
		return 0;
	return now ? TDB_SUB_EV_ENTER : TDB_SUB_EV_EXIT;
}

uint16_t
tdb_sub_event_kind(const TdbSubFilter *f, const TdbTraffic *o, const TdbTraffic *n)
{
	bool		now = tdb_sub_cond_holds(f->cond, f->value, n);

	if (f->on == TDB_SUB_ON_CHANGE)
		return now ? TDB_SUB_EV_CHANGE : 0;
	if (tdb_sub_cond_holds(f->cond, f->value, o) == now)
		return 0;
	return now ? TDB_SUB_EV_ENTER : TDB_SUB_EV_EXIT;
}

/* (record, filter) pairs while building */
typedef struct Pairs
{
	uint64_t   *v;				/* record << 32 | filter */
	uint64_t	n,
				cap;
	const TdbMapView *map;
	const TdbSubFilter *f;
	uint32_t	fi;
	uint64_t	max;			/* pairs allowed in all */
	bool		oom;
	bool		full;			/* the filter being added reached max */
} Pairs;

static bool
add_pair(Pairs *p, uint64_t record)
{
	if (p->n >= p->max)
	{
		p->full = true;
		return false;
	}
	if (p->n == p->cap)
	{
		uint64_t	cap = p->cap ? p->cap * 2 : 1024;
		uint64_t   *v;

		if (cap > p->max)
			cap = p->max;
		v = realloc(p->v, cap * sizeof(uint64_t));

		if (v == NULL)
		{
			p->oom = true;
			return false;
		}
		p->v = v;
		p->cap = cap;
	}
	p->v[p->n++] = record << 32 | p->fi;
	return true;
}

static int
visit_box(uint64_t e, void *arg)
{
	Pairs	   *p = arg;
	TdbBox		b;

	/* the float boxes of the R-tree are a superset: the exact box decides (as geom && box) */
	tdb_map_bbox(p->map, e, &b);
	if (b.xmax >= p->f->box.xmin && b.xmin <= p->f->box.xmax && b.ymax >= p->f->box.ymin && b.ymin <= p->f->box.ymax)
		return add_pair(p, e) ? 0 : 1;
	return 0;
}

static int
visit_all(uint64_t e, void *arg)
{
	return add_pair(arg, e) ? 0 : 1;
}

static int
visit_polygon(uint64_t e, void *arg)
{
	Pairs	   *p = arg;

	if (tdb_map_query_dist(p->map, e, &p->f->polygon) == 0)
		return add_pair(p, e) ? 0 : 1;
	return 0;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a,
				y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

int
tdb_sub_index_build(const TdbMapView *map, const TdbSubFilter *f, uint32_t n, TdbSubIndex *out, char *err)
{
	return tdb_sub_index_build_limited(map, f, n, NULL, NULL, 0, NULL, out, err);
}

int
tdb_sub_index_build_limited(const TdbMapView *map, const TdbSubFilter *f, uint32_t n,
							const uint32_t *order, const bool *skip, uint64_t max_pairs,
							bool *left_out, TdbSubIndex *out, char *err)
{
	Pairs		p = {.map = map, .max = max_pairs ? max_pairs : UINT64_MAX};
	uint32_t	nleft = 0;

	memset(out, 0, sizeof(*out));
	if (left_out != NULL)
		memset(left_out, 0, sizeof(bool) * n);
	for (uint32_t o = 0; o < n; o++)
	{
		uint32_t	i = order != NULL ? order[o] : o;
		uint64_t	mark = p.n;

		if (i >= n)
		{
			snprintf(err, TDB_ERRLEN, "filter order names filter %u of %u", i, n);
			goto invalid;
		}
		if (skip != NULL && skip[i])
			continue;			/* not indexed: not checked either */
		if (!tdb_sub_filter_check(&f[i], err))
			goto invalid;
		if (nleft > 0)
		{
			/* past the bound: every later filter is left out too */
			if (left_out != NULL)
				left_out[i] = true;
			nleft++;
			continue;
		}
		p.f = &f[i];
		p.fi = i;
		switch (f[i].area)
		{
			case TDB_SUB_IDS:
				for (uint32_t k = 0; k < f[i].nids; k++)
				{
					int64_t		r = tdb_map_find(map, f[i].ids[k]);

					if (r < 0)
					{
						snprintf(err, TDB_ERRLEN, "subscription %u: location id %llu is not in the map",
								 f[i].id, (unsigned long long) f[i].ids[k]);
						goto invalid;
					}
					if (!add_pair(&p, (uint64_t) r))
					{
						if (p.full)
							break;
						goto oom;
					}
				}
				break;
			case TDB_SUB_BOX:
				tdb_map_query_box(map, &f[i].box, visit_box, &p);
				break;
			case TDB_SUB_RADIUS:
				tdb_map_query_radius(map, f[i].lon, f[i].lat, f[i].radius_m, visit_all, &p);
				break;
			case TDB_SUB_POLYGON:
				tdb_map_query_box(map, &f[i].polygon.box, visit_polygon, &p);
				break;
			case TDB_SUB_ALL_SQL:
			case TDB_SUB_NONE:
				break;			/* routed by the daemon, or nothing: not matched */
		}
		if (p.oom)
			goto oom;
		if (p.full)
		{
			/* its pairs do not fit: none of them, and no later filter */
			p.n = mark;
			p.full = false;
			if (left_out != NULL)
				left_out[i] = true;
			nleft++;
		}
	}
	/* by record, then filter; an id listed twice counts once */
	if (p.n > 0)
		qsort(p.v, p.n, sizeof(uint64_t), cmp_u64);
	out->nrecords = map->count;
	out->start = calloc(map->count + 1, sizeof(uint64_t));
	out->subs = malloc((p.n ? p.n : 1) * sizeof(uint32_t));
	if (out->start == NULL || out->subs == NULL)
		goto oom;
	for (uint64_t k = 0; k < p.n; k++)
	{
		if (k > 0 && p.v[k] == p.v[k - 1])
			continue;
		out->subs[out->npairs++] = (uint32_t) p.v[k];
		out->start[(p.v[k] >> 32) + 1]++;
	}
	for (uint64_t r = 0; r < map->count; r++)
		out->start[r + 1] += out->start[r];
	out->nleft_out = nleft;
	out->mf = malloc((n ? n : 1) * sizeof(TdbSubMatchFilter));
	if (out->mf == NULL)
		goto oom;
	out->nfilters = n;
	for (uint32_t i = 0; i < n; i++)
	{
		memset(&out->mf[i], 0, sizeof(out->mf[i]));
		out->mf[i].value = f[i].value;
		out->mf[i].id = f[i].id;
		out->mf[i].cond = (uint8_t) f[i].cond;
		out->mf[i].on = (uint8_t) f[i].on;
	}
	free(p.v);
	return TDB_OBJ_OK;

invalid:
	free(p.v);
	return TDB_OBJ_EINVAL;
oom:
	free(p.v);
	tdb_sub_index_free(out);
	snprintf(err, TDB_ERRLEN, "out of memory building the index of %u subscriptions", n);
	return TDB_OBJ_ENOMEM;
}

void
tdb_sub_index_free(TdbSubIndex *ix)
{
	free(ix->start);
	free(ix->subs);
	free(ix->mf);
	memset(ix, 0, sizeof(*ix));
}

int64_t
tdb_sub_match(const TdbSubIndex *ix, const TdbSubFilter *f, const TdbTraffic *old_entries,
			  const TdbTraffic *new_entries, const uint32_t *changed, uint64_t nchanged,
			  TdbSubEmit emit, void *arg)
{
	int64_t		events = 0;

	for (uint64_t c = 0; c < nchanged; c++)
	{
		uint64_t	r = changed[c];

		/*
		 * Changed records are scattered over the map: what each needs is
		 * fetched ahead, in the order it depends on (its index range, then
		 * its pairs and entries, then its first filter).
		 */
		if (c + 2 * MATCH_AHEAD < nchanged && changed[c + 2 * MATCH_AHEAD] < ix->nrecords)
			__builtin_prefetch(&ix->start[changed[c + 2 * MATCH_AHEAD]]);
		if (c + MATCH_AHEAD < nchanged && changed[c + MATCH_AHEAD] < ix->nrecords)
		{
			uint64_t	a = changed[c + MATCH_AHEAD];

			__builtin_prefetch(&ix->subs[ix->start[a]]);
			__builtin_prefetch(&old_entries[a]);
			__builtin_prefetch(&new_entries[a]);
		}
		if (ix->mf != NULL && c + MATCH_AHEAD / 2 < nchanged && changed[c + MATCH_AHEAD / 2] < ix->nrecords)
		{
			uint64_t	a = changed[c + MATCH_AHEAD / 2];

			if (ix->start[a] < ix->start[a + 1] && ix->subs[ix->start[a]] < ix->nfilters)
				__builtin_prefetch(&ix->mf[ix->subs[ix->start[a]]]);
		}
		if (r >= ix->nrecords)
			continue;
		for (uint64_t k = ix->start[r]; k < ix->start[r + 1]; k++)
		{
			uint32_t	fi = ix->subs[k];
			uint16_t	kind = ix->mf != NULL && fi < ix->nfilters ?
				match_kind(&ix->mf[fi], &old_entries[r], &new_entries[r]) :
				tdb_sub_event_kind(&f[fi], &old_entries[r], &new_entries[r]);
			int			stop;

			if (kind == 0)
				continue;
			events++;
			if ((stop = emit(fi, r, kind, arg)) != 0)
				return -(int64_t) stop;
		}
	}
	return events;
}
