/*
 * mvt_cache.h
 *	  The per-map pieces of src/tile/ that outlive a tile: the ranking of
 *	  roads for low zooms and the projection cache (mvt_cache.c).
 */
#ifndef TDB_TILE_MVT_CACHE_H
#define TDB_TILE_MVT_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "knn.h"
#include "object.h"

/*
 * The map's shapes in Web Mercator, projected on first use and kept by the
 * caller per map (projection is most of a tile's work).  off[i] is record
 * i's first point in merc; done is a bitmap of the records projected.
 */
typedef struct TdbMvtProj
{
	uint64_t	map_id;
	const void *map_obj;
	uint64_t	count;
	uint64_t   *off;			/* count + 1 */
	double	   *merc;
	uint64_t   *done;
	bool		failed;			/* too large for the cap, or no memory: not cached */
} TdbMvtProj;

/* Bytes a projection cache of this map takes. */
uint64_t	tdb_mvt_proj_bytes(const TdbMapView *map);

/* The map's records ranked for low zooms, cached by the caller per map. */
typedef struct TdbMvtRank
{
	uint64_t	map_id;
	const void *map_obj;
	uint64_t	count;
	uint32_t   *order;			/* record indices, most important first */
} TdbMvtRank;

/*
 * Build the rank of a map: road class (motorway, trunk, primary, secondary,
 * tertiary, their links, unclassified, residential, living_street,
 * service, track, then other classes by name, then none), then length
 * descending, then location id.  Returns false when out of memory.
 */
bool		tdb_mvt_rank_build(const TdbMapView *map, TdbMvtRank *rank, const TdbKnnAlloc *alloc);

/* What the encoder needs of a caller. */
typedef struct TdbMvtEnv
{
	const TdbKnnAlloc *alloc;	/* per-tile memory */
	size_t		header;			/* bytes reserved before the tile in data */
	/* the rank, built on first need (NULL: rank each tile's features) */
	TdbMvtRank *rank;
	const TdbKnnAlloc *rank_alloc;
	/* the projection cache (NULL: none) and its cap in bytes; rank_alloc's memory */
	TdbMvtProj *proj;
	uint64_t	proj_cap;
	/* called now and then during long work (cancel); may not return */
	void		(*interrupt) (void);
} TdbMvtEnv;


/*
 * The array helpers of src/tile/: grow *p (capacity *cap elements of elem
 * bytes) to hold need elements, doubling from 64; false when the allocator
 * failed (*p is then unchanged).  And release p unless NULL.
 */
static inline bool
tdb_mvt_grow(const TdbKnnAlloc *a, void **p, size_t *cap, size_t need, size_t elem)
{
	size_t		n;
	void	   *q;

	if (need <= *cap)
		return true;
	n = *cap ? *cap : 64;
	while (n < need)
		n *= 2;
	q = a->grow(a->ctx, *p, n * elem);
	if (q == NULL)
		return false;
	*p = q;
	*cap = n;
	return true;
}

static inline void
tdb_mvt_release(const TdbKnnAlloc *a, void *p)
{
	if (p)
		a->release(a->ctx, p);
}

/* One road in the low-zoom ranking: class, then length descending, then id. */
typedef struct TdbMvtRankKey
{
	uint64_t	id;
	float		length;
	uint32_t	idx;
	uint8_t		prio;
} TdbMvtRankKey;

/* prio[c]: the rank of road class c (known classes, others by name, none last = 255). */
void		tdb_mvt_class_priorities(const TdbMapView *map, uint8_t prio[256]);
TdbMvtRankKey tdb_mvt_rank_key(const TdbMapView *map, const uint8_t prio[256], uint64_t rec, uint32_t idx);
int			tdb_mvt_cmp_rank(const void *a, const void *b);

/* The projection cache of env for this map, (re)built empty if the map changed; NULL: none. */
TdbMvtProj *tdb_mvt_proj_for(const TdbMapView *map, const TdbMvtEnv *env);

#endif							/* TDB_TILE_MVT_CACHE_H */
