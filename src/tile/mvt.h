/*
 * mvt.h
 *	  Mapbox Vector Tiles (MVT 2.1) of the live traffic, encoded straight
 *	  from a pinned map object and traffic object: no PostGIS geometry per
 *	  row.
 *
 * The contract (docs/tiles.md, docs/design-tiles.md): a tile whose features
 * fit its byte budget is byte for byte the tile PostGIS 3.3 makes with
 *
 *   ST_AsMVT(row, 'traffic', extent, 'geom', 'location_id')
 *   over ST_AsMVTGeom(ST_Transform(geom, 3857), ST_TileEnvelope(z, x, y),
 *                     extent, buffer, true)
 *
 * over the same rows of trafficdb.locations fed in map record order.  Each
 * step of PostGIS's pipeline (Web Mercator as PROJ computes it, the
 * half-pixel shortcut, the affine map, the integer snap, the removal of
 * points on straight lines, GEOS's rectangle clip, the second snap, the
 * value table, protobuf-c's byte layout) is restated in mvt_geom.c and
 * mvt.c.  A tile over its budget keeps the longest prefix of its features,
 * ranked by road class, then length, then id, whose encoding fits.
 *
 * No PostgreSQL headers: the module (module/tile.c) and the unit tests
 * share this.  Build with -ffp-contract=off (Makefile): the arithmetic must
 * round as PostGIS's does.
 */
#ifndef TDB_TILE_MVT_H
#define TDB_TILE_MVT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "knn.h"
#include "object.h"
#include "tile/mvt_cache.h"

#define TDB_MVT_MAX_ZOOM		30
#define TDB_MVT_DEFAULT_EXTENT	4096
#define TDB_MVT_DEFAULT_BUFFER	64
#define TDB_MVT_DEFAULT_BUDGET	512000
#define TDB_MVT_MIN_EXTENT		1
#define TDB_MVT_MAX_EXTENT		65536
#define TDB_MVT_MIN_BUDGET		1024
#define TDB_MVT_MAX_BUDGET		16777216
#define TDB_MVT_LAYER			"traffic"

/* ---- geometry (mvt_geom.c) ---------------------------------------------- */

/* Half the width of the Web Mercator world, metres (ST_TileEnvelope's). */
#define TDB_MVT_WORLD			20037508.342789244

/* Everything about one tile that the per-feature pipeline needs. */
typedef struct TdbMvtTile
{
	uint32_t	z;
	uint32_t	x;
	uint32_t	y;
	uint32_t	extent;
	uint32_t	buffer;
	double		xmin;			/* ST_TileEnvelope(z, x, y), metres */
	double		ymin;
	double		xmax;
	double		ymax;
	double		fx;				/* ST_AsMVTGeom's affine map */
	double		fy;
	double		xoff;
	double		yoff;
	double		half_w;			/* the "smaller than half a pixel" limits */
	double		half_h;
	double		clip_lo;		/* -buffer */
	double		clip_hi;		/* extent + buffer */
	TdbBox		lonlat;			/* candidate box, degrees: a superset */
} TdbMvtTile;

/*
 * Fill t for tile z/x/y.  The caller has checked z <= 30, x and y < 2^z,
 * 1 <= extent <= 65536 and buffer <= extent.
 */
void		tdb_mvt_tile_init(TdbMvtTile *t, uint32_t z, uint32_t x, uint32_t y,
							  uint32_t extent, uint32_t buffer);

/* EPSG:4326 degrees to EPSG:3857 metres, as PostGIS's ST_Transform (PROJ 9). */
void		tdb_mvt_project(double lon, double lat, double *x, double *y);

/* Reusable scratch of the per-feature pipeline (grown through alloc). */
typedef struct TdbMvtScratch
{
	const TdbKnnAlloc *alloc;
	double	   *xy;				/* projected, then tile space */
	size_t		xy_cap;			/* doubles */
	double	   *clip;			/* clipped parts */
	size_t		clip_cap;
	uint32_t   *parts;			/* part lengths (points) */
	size_t		parts_cap;
	uint32_t   *cmd;			/* the feature's geometry commands */
	size_t		cmd_cap;
	uint32_t	ncmd;
} TdbMvtScratch;

/* ST_Transform of a shape: n lon/lat points to Web Mercator (2n doubles). */
void		tdb_mvt_project_shape(const double *lonlat, uint32_t n, double *merc);

/*
 * Run ST_AsMVTGeom's pipeline on a shape of n points in Web Mercator and
 * encode the result as MVT geometry commands into s->cmd[0 .. s->ncmd).
 * Returns true if there is a feature, false where ST_AsMVTGeom gives NULL.
 * Returns false with *oom set when the allocator failed.
 */
bool		tdb_mvt_feature(const TdbMvtTile *t, const double *merc, uint32_t n,
							TdbMvtScratch *s, bool *oom);

/*
 * The same from tile space on (n points after ST_Transform and the affine
 * map): the snap, the straight lines, the clip.  For the unit tests.
 */
bool		tdb_mvt_feature_tile_xy(const TdbMvtTile *t, const double *xy, uint32_t n,
									TdbMvtScratch *s, bool *oom);

/* True if a shape inside the lon/lat box b is surely too small for the tile. */
bool		tdb_mvt_box_too_small(const TdbMvtTile *t, const TdbBoxF *b);

void		tdb_mvt_scratch_free(TdbMvtScratch *s);

/* ---- tiles (mvt.c) ------------------------------------------------------ */

typedef struct TdbMvtOptions
{
	uint32_t	extent;
	uint32_t	buffer;
	uint32_t	budget;			/* bytes */
} TdbMvtOptions;

typedef struct TdbMvtResult
{
	uint8_t    *data;			/* header bytes, then the tile */
	size_t		size;			/* bytes of the tile (after the header) */
	uint64_t	features;
	uint64_t	candidates;
	uint64_t	max_changed_gen;	/* of the features kept: the ETag's G */
	bool		truncated;		/* the budget left features out */
} TdbMvtResult;

typedef enum TdbMvtStatus
{
	TDB_MVT_OK = 0,
	TDB_MVT_ENOMEM = -1
} TdbMvtStatus;

/*
 * Encode tile z/x/y of a map and its traffic.  An empty tile has size 0 (as
 * ST_AsMVT over no rows).  The caller validated the arguments (see
 * tdb_mvt_tile_init) and the objects.
 */
int			tdb_mvt_encode(const TdbMapView *map, const void *traffic, const TdbTraffic *entries,
						   uint32_t z, uint32_t x, uint32_t y, const TdbMvtOptions *opt,
						   const TdbMvtEnv *env, TdbMvtResult *out);

#endif							/* TDB_TILE_MVT_H */
