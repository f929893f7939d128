/*-------------------------------------------------------------------------
 *
 * pushdown.c
 *	  The part of deciding what is pushable that the locations and trail
 *	  foreign data wrappers share: the PostGIS clauses both narrow to a box
 *	  (&&, ST_Intersects, ST_DWithin on geometry and on geography), found
 *	  whichever way round they are written, PostGIS's own functions only
 *	  (tdb_postgis_signature_is), and bigint equality.  The locations
 *	  wrapper's other clauses (the box predicates, id ranges, ORs, nearest
 *	  first) are in locations_classify.c; the trail wrapper's time bounds
 *	  in timebound.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/executor.h"
#include "nodes/nodeFuncs.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"

#include "fdw/pushdown.h"
#include "module/geometry.h"

/* Equality of a bigint with any integer type, either way round. */
bool
tdb_is_int8_equality(Oid opno)
{
	switch (get_opcode(opno))
	{
		case F_INT8EQ:
		case F_INT84EQ:
		case F_INT82EQ:
		case F_INT48EQ:
		case F_INT28EQ:
			return true;
		default:
			return false;
	}
}

/* geom::geography (PostGIS's geography(geometry) cast of the geometry column). */
bool
tdb_is_geography_of(Expr *e, Index relid, TdbIsGeomColumn is_geom, const void *arg)
{
	return IsA(e, FuncExpr) && list_length(((FuncExpr *) e)->args) == 1 &&
		tdb_is_postgis_func(((FuncExpr *) e)->funcid, "geography") &&
		is_geom(linitial(((FuncExpr *) e)->args), relid, arg);
}

/*
 * geom && a, ST_Intersects(geom, a), ST_DWithin(geom, a, d) or
 * ST_DWithin(geom::geography, a, d[, use_spheroid]), either argument the
 * column, a and d constant for a scan (tdb_is_scan_constant: they may name
 * other relations' columns, a join's parameters): the box that holds every
 * answer.  && compares the same float boxes a box query does; the others
 * need a recheck.
 */
bool
tdb_geo_clause(Expr *clause, Index relid, TdbIsGeomColumn is_geom, const void *arg, TdbGeoClause *out)
{
	Expr	   *l,
			   *r;

	memset(out, 0, sizeof(*out));
	if (IsA(clause, OpExpr) && list_length(((OpExpr *) clause)->args) == 2)
	{
		OpExpr	   *op = (OpExpr *) clause;

		l = linitial(op->args);
		r = lsecond(op->args);
		if (!is_geom(l, relid, arg))
		{
			Expr	   *t = l;

			l = r;
			r = t;
		}
		if (!is_geom(l, relid, arg) || !tdb_is_scan_constant(r, relid) ||
			!tdb_is_geometry_overlap_op(op->opno))
			return false;
		out->kind = TDB_GEO_BOX;
		out->arg = r;
		return true;
	}
	if (IsA(clause, FuncExpr))
	{
		FuncExpr   *f = (FuncExpr *) clause;
		int			nargs = list_length(f->args);

		if (nargs < 2)
			return false;
		l = linitial(f->args);
		r = lsecond(f->args);
		if (is_geom(r, relid, arg) || tdb_is_geography_of(r, relid, is_geom, arg))
		{
			Expr	   *t = l;

			l = r;
			r = t;
		}
		if (!tdb_is_scan_constant(r, relid))
			return false;
		/* PostGIS's own functions only, not another of the same name (tdb_postgis_signature_is) */
		if (nargs == 2 && is_geom(l, relid, arg) && tdb_is_postgis_func(f->funcid, "st_intersects") &&
			tdb_postgis_signature_is(f->funcid, 2, false, NULL))
		{
			out->kind = TDB_GEO_BOX;
			out->arg = r;
			return true;
		}
		if (nargs >= 3 && nargs <= 4 && tdb_is_postgis_func(f->funcid, "st_dwithin") &&
			tdb_is_scan_constant(lthird(f->args), relid))
		{
			bool		geog = tdb_is_geography_of(l, relid, is_geom, arg);

			if ((geog || is_geom(l, relid, arg)) && tdb_postgis_signature_is(f->funcid, nargs, geog, l))
			{
				out->kind = geog ? TDB_GEO_DWITHIN_M : TDB_GEO_DWITHIN_DEG;
				out->arg = r;
				out->distance = lthird(f->args);
				out->spheroid = nargs == 4 ? lfourth(f->args) : NULL;
				return true;
			}
		}
	}
	return false;
}

bool
tdb_clause_holds(ExprState *clause, ExprContext *econtext, TupleTableSlot *slot)
{
	bool		isnull;
	Datum		v;

	econtext->ecxt_scantuple = slot;
	v = ExecEvalExpr(clause, econtext, &isnull);
	if (!isnull && DatumGetBool(v))
		return true;
	ResetExprContext(econtext);
	return false;
}
