/*
 * mvt_cache.c
 *	  What a backend keeps per map for its tiles (src/tile/mvt.h): the
 *	  low-zoom ranking of the roads and their shapes in Web Mercator.
 */
#include "tile/mvt_cache.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- ranking --------------------------------------------------------------- */

static const char *const class_order[] = {
	"motorway", "trunk", "primary", "secondary", "tertiary",
	"motorway_link", "trunk_link", "primary_link", "secondary_link", "tertiary_link",
	"unclassified", "residential", "living_street", "service", "track"
};
#define NCLASS_ORDER (sizeof(class_order) / sizeof(class_order[0]))

static const TdbMapView *sort_map;	/* for the class-name comparator only */

static int
cmp_class_name(const void *a, const void *b)
{
	uint32_t	x = *(const uint32_t *) a;
	uint32_t	y = *(const uint32_t *) b;

	return strcmp(sort_map->strings + sort_map->classes[x], sort_map->strings + sort_map->classes[y]);
}

/* prio[c]: 0.. for known classes, then others by name, 255 for none. */
void
tdb_mvt_class_priorities(const TdbMapView *map, uint8_t prio[256])
{
	uint32_t	others[256];
	uint32_t	nothers = 0;

	memset(prio, 255, 256);
	for (uint32_t c = 0; c < map->nclasses && c < 256; c++)
	{
		const char *name = map->strings + map->classes[c];
		bool		known = false;

		if (name[0] == '\0')
			continue;
		for (uint32_t k = 0; k < NCLASS_ORDER; k++)
			if (strcmp(name, class_order[k]) == 0)
			{
				prio[c] = (uint8_t) k;
				known = true;
				break;
			}
		if (!known)
			others[nothers++] = c;
	}
	sort_map = map;
	qsort(others, nothers, sizeof(uint32_t), cmp_class_name);
	sort_map = NULL;
	for (uint32_t i = 0; i < nothers; i++)
		prio[others[i]] = (uint8_t) (NCLASS_ORDER + i < 254 ? NCLASS_ORDER + i : 254);
}

int
tdb_mvt_cmp_rank(const void *a, const void *b)
{
	const TdbMvtRankKey *x = a;
	const TdbMvtRankKey *y = b;

	if (x->prio != y->prio)
		return x->prio < y->prio ? -1 : 1;
	if (x->length != y->length)
		return x->length > y->length ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return 0;
}

TdbMvtRankKey
tdb_mvt_rank_key(const TdbMapView *map, const uint8_t prio[256], uint64_t rec, uint32_t idx)
{
	TdbMvtRankKey k;
	float		len = map->records[rec].length_m;

	k.id = map->records[rec].id;
	k.length = isnan(len) ? -INFINITY : len;
	k.idx = idx;
	k.prio = prio[map->records[rec].road_class];
	return k;
}

bool
tdb_mvt_rank_build(const TdbMapView *map, TdbMvtRank *rank, const TdbKnnAlloc *alloc)
{
	uint8_t		prio[256];
	TdbMvtRankKey *keys;
	uint32_t   *order;

	tdb_mvt_class_priorities(map, prio);
	keys = alloc->grow(alloc->ctx, NULL, (map->count ? map->count : 1) * sizeof(TdbMvtRankKey));
	if (keys == NULL)
		return false;
	order = alloc->grow(alloc->ctx, NULL, (map->count ? map->count : 1) * sizeof(uint32_t));
	if (order == NULL)
	{
		alloc->release(alloc->ctx, keys);
		return false;
	}
	for (uint64_t i = 0; i < map->count; i++)
		keys[i] = tdb_mvt_rank_key(map, prio, i, (uint32_t) i);
	qsort(keys, map->count, sizeof(TdbMvtRankKey), tdb_mvt_cmp_rank);
	for (uint64_t i = 0; i < map->count; i++)
		order[i] = keys[i].idx;
	alloc->release(alloc->ctx, keys);
	rank->map_id = map->hdr->map_id;
	rank->map_obj = map->hdr;
	rank->count = map->count;
	rank->order = order;
	return true;
}

/* ---- the projection cache ---------------------------------------------------- */

uint64_t
tdb_mvt_proj_bytes(const TdbMapView *map)
{
	uint64_t	points = 0;

	for (uint64_t i = 0; i < map->count; i++)
		points += map->records[i].npoints;
	return 8 * (map->count + 1) + 16 * points + 8 * (map->count / 64 + 1);
}

static void
proj_release(const TdbMvtEnv *env)
{
	TdbMvtProj *p = env->proj;

	tdb_mvt_release(env->rank_alloc, p->off);
	tdb_mvt_release(env->rank_alloc, p->merc);
	tdb_mvt_release(env->rank_alloc, p->done);
	memset(p, 0, sizeof(*p));
}

/* The cache for this map, (re)built empty when the map changed; NULL: none. */
TdbMvtProj *
tdb_mvt_proj_for(const TdbMapView *map, const TdbMvtEnv *env)
{
	TdbMvtProj *p = env->proj;
	const TdbKnnAlloc *a = env->rank_alloc;
	uint64_t	at = 0;

	if (p == NULL)
		return NULL;
	if (p->map_obj == (const void *) map->hdr && p->map_id == map->hdr->map_id && p->count == map->count)
		return p->failed ? NULL : p;
	proj_release(env);
	p->map_obj = map->hdr;
	p->map_id = map->hdr->map_id;
	p->count = map->count;
	if (tdb_mvt_proj_bytes(map) > env->proj_cap)
	{
		p->failed = true;
		return NULL;
	}
	p->off = a->grow(a->ctx, NULL, 8 * (map->count + 1));
	p->done = a->grow(a->ctx, NULL, 8 * (map->count / 64 + 1));
	if (p->off == NULL || p->done == NULL)
		goto fail;
	for (uint64_t i = 0; i < map->count; i++)
	{
		p->off[i] = at;
		at += map->records[i].npoints;
	}
	p->off[map->count] = at;
	p->merc = a->grow(a->ctx, NULL, 16 * (at ? at : 1));
	if (p->merc == NULL)
		goto fail;
	memset(p->done, 0, 8 * (map->count / 64 + 1));
	return p;

fail:
	proj_release(env);
	p->map_obj = map->hdr;
	p->map_id = map->hdr->map_id;
	p->count = map->count;
	p->failed = true;
	return NULL;
}

