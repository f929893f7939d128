/*-------------------------------------------------------------------------
 *
 * geometry.h
 *	  PostGIS geometry values without linking against PostGIS: the type is
 *	  found through the extension catalog (its OID differs per database and
 *	  its schema is the user's choice) and values are made by PostGIS's own
 *	  binary receive function from EWKB.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TDB_MODULE_GEOMETRY_H
#define TDB_MODULE_GEOMETRY_H

#include "postgres.h"

#include "fmgr.h"
#include "nodes/primnodes.h"

/* Schema of an installed extension, or InvalidOid. */
extern Oid	tdb_extension_schema(const char *extname);

/* PostGIS's schema, cached with the geometry type (ERROR if PostGIS is absent). */
extern Oid	tdb_postgis_schema(void);

/* OID of PostGIS's geometry type in this database; ERROR if PostGIS is absent. */
extern Oid	tdb_geometry_oid(void);

/* A geometry(LineString, 4326) Datum from npoints lon/lat pairs. */
extern Datum tdb_linestring_datum(const double *xy, uint32 npoints);

/* A geometry(Point, 4326) Datum. */
extern Datum tdb_point_datum(double x, double y);

/*
 * The same, written into buf (TDB_POINT_DATUM_SIZE bytes, int-aligned) when
 * buf is not NULL and PostGIS serializes points as this module does, so that
 * a scan forming a point per row can reuse one buffer (the value then lives
 * until the next row, as one in the per-tuple context would); else palloc'd.
 */
#define TDB_POINT_DATUM_SIZE 32
extern Datum tdb_point_datum_in(double x, double y, void *buf);

/* PostGIS's && on two geometries? */
extern bool tdb_is_geometry_overlap_op(Oid opno);

/* PostGIS's function of this (lower-case) name? */
extern bool tdb_is_postgis_func(Oid funcid, const char *name);
/* funcid's arguments are (t, t[, float8[, bool]]), t geometry or (geog) geog_of_geom's type. */
extern bool tdb_postgis_signature_is(Oid funcid, int nargs, bool geog, Expr *geog_of_geom);

/*
 * An expression a scan of relation relid can evaluate before reading:
 * nothing of that table in it (other tables' columns become parameters of a
 * parameterized scan), nothing volatile.
 */
extern bool tdb_is_scan_constant(Expr *e, Index relid);

/* Exact bounds (xmin, ymin, xmax, ymax) of a geometry; false when empty. */
extern bool tdb_geometry_bounds(Datum geom, double *b);

/* A geography Datum as geometry, via PostGIS's geometry(geography). */
extern Datum tdb_geography_to_geometry(Datum geog, Oid geog_type);

/* PostGIS's ST_AsBinary of a geometry: WKB (ISO, the server's byte order). */
extern bytea *tdb_geometry_wkb(Datum geom);

/*
 * A lon/lat box holding every point of a geography (its vertices, and the
 * latitudes its edges reach between them: an edge is a great-circle arc,
 * which bulges poleward past its ends), widened by a rounding allowance.
 * 1 with *box set; 0 when it is empty; -1 when an edge crosses the
 * antimeridian or passes over a pole (the caller then prunes nothing).
 * box is a TdbBox (src/geo.h).
 */
struct TdbBox;
extern int	tdb_geography_box(Datum geog, Oid geog_type, struct TdbBox *box);

/*
 * Metres added to a geography radius before tdb_box_grow_metres, for a
 * predicate that needs a touch: PostGIS decides one within 1e-5 m.
 */
#define TDB_GEOG_TOUCH_M 1.0

/*
 * Grow a lon/lat box by radius_m metres, corner by corner (a superset);
 * false when a corner's circle reaches a pole or the antimeridian.
 */
extern bool tdb_box_grow_metres(struct TdbBox *box, double radius_m);

/* ST_SRID and GeometryType ("POLYGON", ...) of a geometry. */
extern int32 tdb_geometry_srid(Datum geom);
extern char *tdb_geometry_type(Datum geom);

/*
 * Whether geom is an axis-aligned rectangle of SRID 4326 (the trail
 * wrappers' points): a 2D POLYGON of one ring of five positions, the last
 * the first, each edge parallel to an axis, of positive width and height;
 * b = (xmin, ymin, xmax, ymax).  A point intersects it (PostGIS's
 * ST_Intersects, boundary included) exactly when xmin <= x <= xmax and
 * ymin <= y <= ymax in double precision.
 */
extern bool tdb_geometry_rectangle(Datum geom, double *b);

/* NULL when PostGIS's ST_IsValid holds, else its ST_IsValidReason. */
extern char *tdb_geometry_invalid_reason(Datum geom);

/*
 * ST_X, ST_Y and ST_SRID of a point; false, with *what saying what geom is
 * instead ("a LINESTRING", "an empty POINT"), when it is not one position.
 */
extern bool tdb_geometry_point(Datum geom, double *x, double *y, int32 *srid, char **what);

#endif							/* TDB_MODULE_GEOMETRY_H */
