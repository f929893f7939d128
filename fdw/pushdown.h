/*-------------------------------------------------------------------------
 *
 * pushdown.h
 *	  What the locations and trail foreign data wrappers both push down in
 *	  the same way: the PostGIS clauses that narrow a scan to a box (geom
 *	  && a, ST_Intersects(geom, a), ST_DWithin(geom, a, d) in degrees and
 *	  ST_DWithin(geom::geography, a, d[, s]) in metres) and equality of a
 *	  bigint with any integer type.  Each wrapper says which expression is
 *	  its geometry column; the rest of their classification is their own.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TDB_FDW_PUSHDOWN_H
#define TDB_FDW_PUSHDOWN_H

#include "postgres.h"

#include "nodes/primnodes.h"

/* The box a clause narrows a scan to. */
typedef enum TdbGeoKind
{
	TDB_GEO_NONE = 0,
	TDB_GEO_BOX,				/* geom && a, ST_Intersects(geom, a): box2d(a) */
	TDB_GEO_DWITHIN_DEG,		/* ST_DWithin(geom, a, d): box2d(a) grown by d degrees */
	TDB_GEO_DWITHIN_M			/* ST_DWithin(geom::geography, a, d[, s]): grown by d metres */
} TdbGeoKind;

typedef struct TdbGeoClause
{
	TdbGeoKind	kind;
	Expr	   *arg;			/* a: the other argument, constant for a scan */
	Expr	   *distance;		/* d (ST_DWithin), constant for a scan */
	Expr	   *spheroid;		/* ST_DWithin's fourth argument, or NULL */
} TdbGeoClause;

/* Whether e is the table's geometry column (of relation relid). */
typedef bool (*TdbIsGeomColumn) (Expr *e, Index relid, const void *arg);

extern bool tdb_is_int8_equality(Oid opno);
extern bool tdb_is_geography_of(Expr *e, Index relid, TdbIsGeomColumn is_geom, const void *arg);
extern bool tdb_geo_clause(Expr *clause, Index relid, TdbIsGeomColumn is_geom, const void *arg,
						   TdbGeoClause *out);

/*
 * A clause a scan left out of the plan's quals and decides itself (the
 * locations wrapper's geography radius, the trail wrapper's distance band),
 * asked of PostgreSQL on the row the scan formed in slot: true when it
 * holds; false when it is false or NULL, econtext's per-tuple memory then
 * reset (the row is dropped: its values and the clause's work go).
 */
struct ExprState;
struct ExprContext;
struct TupleTableSlot;
extern bool tdb_clause_holds(struct ExprState *clause, struct ExprContext *econtext,
							 struct TupleTableSlot *slot);

#endif							/* TDB_FDW_PUSHDOWN_H */
