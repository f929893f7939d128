/*-------------------------------------------------------------------------
 *
 * locations_classify.c
 *	  The locations foreign data wrapper: what can be pushed down.  Which
 *	  WHERE clauses (and which ORDER BY ... LIMIT) narrow a scan of the
 *	  locations table, to what (a Push), and the best of them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_operator.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/paths.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "fdw/locations_internal.h"
#include "fdw/pushdown.h"
#include "module/geometry.h"

/* The relation seen from the other argument: inside becomes around. */
static int
box_rel_swapped(int rel)
{
	return ((rel & BOX_INSIDE) ? BOX_AROUND : 0) | ((rel & BOX_AROUND) ? BOX_INSIDE : 0);
}

/* ---- PostGIS recognition ---------------------------------------------------------- */

/* An integer Datum of type typid as int64. */
int64
loc_datum_to_int64(Datum d, Oid typid)
{
	switch (typid)
	{
		case INT2OID:
			return DatumGetInt16(d);
		case INT4OID:
			return DatumGetInt32(d);
		default:
			return DatumGetInt64(d);
	}
}

int
loc_column_of(Var *v, Index relid, const int *colmap)
{
	if (!IsA(v, Var) || v->varno != (int) relid || v->varlevelsup != 0 || v->varattno <= 0)
		return -1;
	return colmap[v->varattno - 1];
}

bool
loc_is_geom_var(Expr *e, Index relid, const int *colmap)
{
	return IsA(e, Var) && loc_column_of((Var *) e, relid, colmap) == COL_GEOM;
}

/* loc_is_geom_var for the shared recognition (fdw/pushdown.c): arg is the colmap. */
static bool
geom_column(Expr *e, Index relid, const void *colmap)
{
	return loc_is_geom_var(e, relid, (const int *) colmap);
}

/* geom::geography (PostGIS's geography(geometry) cast of our column). */
static bool
is_geog_of_geom(Expr *e, Index relid, const int *colmap)
{
	return tdb_is_geography_of(e, relid, geom_column, colmap);
}

/*
 * Whether clause can narrow the scan; if so, what to push.  Clauses may
 * name other tables' columns on the far side (join clauses of a
 * parameterized path).
 */
static bool classify_more(Expr *clause, Index relid, const int *colmap, Push *push);

bool
loc_classify_clause(Expr *clause, Index relid, const int *colmap, Push *push)
{
	TdbGeoClause geo;

	push->k = 0;
	push->rinfo = NULL;
	push->exact = false;
	push->flags = 0;
	push->what = NULL;
	push->parts = NIL;
	if (classify_more(clause, relid, colmap, push))
		return true;
	if (tdb_geo_clause(clause, relid, geom_column, colmap, &geo))
	{
		/* ST_DWithin's use_spheroid must be known at planning */
		if (geo.spheroid != NULL && (!IsA(geo.spheroid, Const) || ((Const *) geo.spheroid)->constisnull))
			return false;
		/*
		 * The box query compares the same float boxes PostGIS's && compares:
		 * it needs no recheck (t/004_locations.pl holds it to the heap's
		 * answers).
		 */
		push->exact = geo.kind == TDB_GEO_BOX && IsA(clause, OpExpr);
		push->kind = geo.kind == TDB_GEO_BOX ? PUSH_BOX :
			geo.kind == TDB_GEO_DWITHIN_DEG ? PUSH_DWITHIN_DEG : PUSH_DWITHIN_M;
		push->args = geo.kind == TDB_GEO_BOX ? list_make1(geo.arg) : list_make2(geo.arg, geo.distance);
		/* on geography the scan checks the clause itself (see loc_radius_check) */
		if (geo.kind == TDB_GEO_DWITHIN_M)
			push->args = lappend(push->args, clause);
		return true;
	}
	if (IsA(clause, OpExpr))
	{
		OpExpr	   *op = (OpExpr *) clause;
		Expr	   *l,
				   *r;

		if (list_length(op->args) != 2)
			return false;
		l = linitial(op->args);
		r = lsecond(op->args);
		/* our column on the left, whichever way the clause was written */
		if (!(IsA(l, Var) && loc_column_of((Var *) l, relid, colmap) >= 0) &&
			IsA(r, Var) && loc_column_of((Var *) r, relid, colmap) >= 0)
		{
			Expr	   *t = l;

			l = r;
			r = t;
		}
		if (!IsA(l, Var) || !tdb_is_scan_constant(r, relid))
			return false;
		/*
		 * A hash lookup finds exactly the equal keys: no recheck
		 * (t/004_locations.pl holds it to the heap's answers).
		 */
		if (loc_column_of((Var *) l, relid, colmap) == COL_LOCATION_ID && tdb_is_int8_equality(op->opno))
		{
			push->kind = PUSH_KEY;
			push->args = list_make1(r);
			push->exact = true;
			return true;
		}
		return false;
	}
	if (IsA(clause, ScalarArrayOpExpr))
	{
		ScalarArrayOpExpr *sa = (ScalarArrayOpExpr *) clause;
		Expr	   *l = linitial(sa->args);
		Expr	   *r = lsecond(sa->args);

		if (sa->useOr && tdb_is_int8_equality(sa->opno) && IsA(l, Var) &&
			loc_column_of((Var *) l, relid, colmap) == COL_LOCATION_ID && tdb_is_scan_constant(r, relid))
		{
			push->kind = PUSH_KEYS;
			push->args = list_make1(r);
			push->exact = true;
			return true;
		}
		return false;
	}
	return false;
}

/* ---- more clauses narrowed by the R-tree or the ids, rechecked by PostgreSQL ---- */

/*
 * PostGIS predicates that hold only where their two arguments share a
 * point (or, with a distance d third, come within d of each other): every
 * answer's box overlaps the box of the other argument (grown by d),
 * whichever argument our column is.  A 3D predicate implies the 2D one of
 * the projections (PostGIS takes a missing Z as any value), and
 * ST_DFullyWithin's maximum distance is at least the minimum one.  Each of
 * them is false for an empty argument, like &&.  On geography the box is
 * that of the argument's great-circle edges, grown by a metre (PostGIS
 * decides a touch within 1e-5 m).
 */
static const struct
{
	const char *name;			/* in pg_proc */
	const char *shown;			/* in EXPLAIN */
	int			nargs;			/* 3: a distance third */
	bool		geography;		/* on geom::geography */
	int			rel;			/* BOX_*: the first argument's box to the second's */
}			box_predicates[] = {
	{"st_within", "ST_Within", 2, false, BOX_INSIDE},
	{"st_contains", "ST_Contains", 2, false, BOX_AROUND},
	{"st_covers", "ST_Covers", 2, false, BOX_AROUND},
	{"st_coveredby", "ST_CoveredBy", 2, false, BOX_INSIDE},
	{"st_crosses", "ST_Crosses", 2, false, 0},
	{"st_touches", "ST_Touches", 2, false, 0},
	{"st_equals", "ST_Equals", 2, false, BOX_INSIDE | BOX_AROUND},
	{"st_3dintersects", "ST_3DIntersects", 2, false, 0},
	{"st_dfullywithin", "ST_DFullyWithin", 3, false, 0},
	{"st_3ddwithin", "ST_3DDWithin", 3, false, 0},
	{"st_intersects", "ST_Intersects on geography", 2, true, 0},
	{"st_covers", "ST_Covers on geography", 2, true, 0},
	{"st_coveredby", "ST_CoveredBy on geography", 2, true, 0},
};

static bool
classify_box_predicate(FuncExpr *f, Index relid, const int *colmap, Push *push)
{
	int			nargs = list_length(f->args);
	char	   *fname;

	if (nargs < 2 || get_func_namespace(f->funcid) != tdb_postgis_schema() ||
		(fname = get_func_name(f->funcid)) == NULL)
		return false;
	for (int i = 0; i < (int) lengthof(box_predicates); i++)
	{
		bool		(*ours) (Expr *, Index, const int *) =
			box_predicates[i].geography ? is_geog_of_geom : loc_is_geom_var;
		Expr	   *l = linitial(f->args);
		Expr	   *r = lsecond(f->args);
		int			rel = box_predicates[i].rel;

		/* the geometry and geography functions share names: the argument tells */
		if (strcmp(fname, box_predicates[i].name) != 0 || nargs != box_predicates[i].nargs)
			continue;
		if (!ours(l, relid, colmap))
		{
			Expr	   *t = l;

			l = r;
			r = t;
			rel = box_rel_swapped(rel);
		}
		if (!ours(l, relid, colmap) || !tdb_is_scan_constant(r, relid) ||
			!tdb_postgis_signature_is(f->funcid, nargs, box_predicates[i].geography, l))
			continue;
		if (nargs == 3 && !tdb_is_scan_constant(lthird(f->args), relid))
			return false;
		push->kind = box_predicates[i].geography ? PUSH_GEOG_BOX : nargs == 3 ? PUSH_EXPAND_OF : PUSH_BOX_OF;
		push->args = nargs == 3 ? list_make2(r, lthird(f->args)) : list_make1(r);
		push->what = box_predicates[i].shown;
		push->flags = push->kind == PUSH_BOX_OF ? rel : 0;
		return true;
	}
	return false;
}

/* The name of a PostGIS operator on (geometry, geometry), or NULL. */
static char *
postgis_geometry_op_name(Oid opno)
{
	HeapTuple	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	Form_pg_operator op;
	char	   *name = NULL;

	if (!HeapTupleIsValid(tup))
		return NULL;
	op = (Form_pg_operator) GETSTRUCT(tup);
	if (op->oprleft == tdb_geometry_oid() && op->oprright == tdb_geometry_oid() &&
		op->oprnamespace == tdb_postgis_schema())
		name = pstrdup(NameStr(op->oprname));
	ReleaseSysCache(tup);
	return name;
}

/*
 * Operators on our columns: location_id <, <=, >, >= an integer (an id
 * range); geom @ a, geom ~ a, geom ~= a (either way round).  PostGIS defines
 * @, ~ and ~= on the same float boxes as &&: a box inside, around or equal
 * to a's box overlaps it, so the rows whose boxes overlap a's box (none
 * when a is empty, as PostGIS answers false then) hold every answer.
 */
static bool
classify_more_op(OpExpr *op, Index relid, const int *colmap, Push *push)
{
	Expr	   *l = linitial(op->args);
	Expr	   *r = lsecond(op->args);
	bool		swapped = false;
	char	   *name;

	if (!(IsA(l, Var) && loc_column_of((Var *) l, relid, colmap) >= 0) &&
		IsA(r, Var) && loc_column_of((Var *) r, relid, colmap) >= 0)
	{
		Expr	   *t = l;

		l = r;
		r = t;
		swapped = true;
	}
	if (!IsA(l, Var) || !tdb_is_scan_constant(r, relid))
		return false;
	if (loc_column_of((Var *) l, relid, colmap) == COL_LOCATION_ID)
	{
		/* bigint with any integer type: the integer btree family knows them all */
		int			s = get_op_opfamily_strategy(op->opno, INTEGER_BTREE_FAM_OID);

		if (s == 0 || s == BTEqualStrategyNumber)
			return false;
		if (swapped)
			s = BTGreaterStrategyNumber + 1 - s;	/* a < id is id > a */
		push->flags = s == BTLessStrategyNumber ? RANGE_HI :
			s == BTLessEqualStrategyNumber ? RANGE_HI | RANGE_HI_INCL :
			s == BTGreaterStrategyNumber ? RANGE_LO : RANGE_LO | RANGE_LO_INCL;
		push->kind = PUSH_ID_RANGE;
		push->args = list_make1(r);
		return true;
	}
	if (loc_column_of((Var *) l, relid, colmap) == COL_GEOM &&
		(name = postgis_geometry_op_name(op->opno)) != NULL &&
		(strcmp(name, "@") == 0 || strcmp(name, "~") == 0 || strcmp(name, "~=") == 0))
	{
		push->kind = PUSH_BOX_OF;
		push->args = list_make1(r);
		/* a ~ geom is geom @ a: say it with geom first */
		push->what = strcmp(name, "~=") == 0 ? "geom ~=" :
			(strcmp(name, "@") == 0) != swapped ? "geom @" : "geom ~";
		push->flags = strcmp(name, "~=") == 0 ? BOX_INSIDE | BOX_AROUND :
			(strcmp(name, "@") == 0) != swapped ? BOX_INSIDE : BOX_AROUND;
		return true;
	}
	return false;
}

/* How good a narrowing is (lower is better): keys, then boxes, then id ranges. */
static int
push_rank(const Push *p)
{
	ListCell   *lc;

	switch (p->kind)
	{
		case PUSH_KEY:
		case PUSH_KEYS:
			return 0;
		case PUSH_UNION:
			foreach(lc, p->parts)
				if (push_rank(lfirst(lc)) > 0)
					return 2;
			return 1;
		case PUSH_ID_RANGE:
			return 3;
		default:
			return 2;
	}
}

/*
 * Give an id range the bound it lacks from another range on location_id
 * (BETWEEN a AND b arrives as two clauses).
 */
static void
range_add_bound(Push *range, const Push *other)
{
	if (range->kind != PUSH_ID_RANGE || other->kind != PUSH_ID_RANGE)
		return;
	if (!(range->flags & RANGE_LO) && (other->flags & RANGE_LO))
	{
		range->args = lcons(linitial(other->args), list_copy(range->args));
		range->flags |= other->flags & (RANGE_LO | RANGE_LO_INCL);
	}
	if (!(range->flags & RANGE_HI) && (other->flags & RANGE_HI))
	{
		range->args = lappend(list_copy(range->args), llast(other->args));
		range->flags |= other->flags & (RANGE_HI | RANGE_HI_INCL);
	}
}

/* One side of an OR: a clause, or an AND narrowed by its best conjunct. */
static bool
classify_branch(Expr *e, Index relid, const int *colmap, Push *push)
{
	ListCell   *lc;
	bool		found = false;

	if (!is_andclause(e))
		return loc_classify_clause(e, relid, colmap, push);
	foreach(lc, ((BoolExpr *) e)->args)
	{
		Push		p;

		if (!classify_branch(lfirst(lc), relid, colmap, &p))
			continue;
		if (!found || push_rank(&p) < push_rank(push))
			*push = p;
		found = true;
	}
	foreach(lc, ((BoolExpr *) e)->args)
	{
		Push		p;

		if (found && push->kind == PUSH_ID_RANGE && classify_branch(lfirst(lc), relid, colmap, &p))
			range_add_bound(push, &p);
	}
	return found;
}

/*
 * p1 OR p2 OR ...: the union of the parts' candidates, when every part
 * narrows (PostgreSQL rechecks the OR).  A geography radius in a part is
 * only its box there (the scan checks a radius only as the whole push).
 */
static bool
classify_or(BoolExpr *b, Index relid, const int *colmap, Push *push)
{
	List	   *parts = NIL;
	List	   *args = NIL;
	ListCell   *lc;

	foreach(lc, b->args)
	{
		Push		p;
		Push	   *part;

		if (!classify_branch(lfirst(lc), relid, colmap, &p))
			return false;
		if (p.kind == PUSH_UNION)
		{
			parts = list_concat(parts, p.parts);
			continue;
		}
		if (p.kind == PUSH_DWITHIN_M)
		{
			p.kind = PUSH_GEOG_BOX;
			p.args = list_truncate(list_copy(p.args), 2);
			p.what = "ST_DWithin on geography";
		}
		part = palloc(sizeof(Push));
		*part = p;
		parts = lappend(parts, part);
	}
	foreach(lc, parts)
		args = list_concat(args, ((Push *) lfirst(lc))->args);
	push->kind = PUSH_UNION;
	push->parts = parts;
	push->args = args;
	return true;
}

static bool
classify_more(Expr *clause, Index relid, const int *colmap, Push *push)
{
	if (is_orclause(clause))
		return classify_or((BoolExpr *) clause, relid, colmap, push);
	if (IsA(clause, OpExpr) && list_length(((OpExpr *) clause)->args) == 2)
		return classify_more_op((OpExpr *) clause, relid, colmap, push);
	if (IsA(clause, FuncExpr))
		return classify_box_predicate((FuncExpr *) clause, relid, colmap, push);
	return false;
}

/*
 * Where a k-nearest search starts: a point (or any shape of a single
 * location).  NULL, empty and larger shapes have none: every record is then
 * a candidate.
 */
bool
loc_knn_origin(Datum geom, bool isnull, double *x, double *y)
{
	double		b[4];

	if (isnull || !tdb_geometry_bounds(geom, b) || b[0] != b[2] || b[1] != b[3])
		return false;
	*x = b[0];
	*y = b[1];
	return true;
}

/* PostGIS's geography type, or InvalidOid. */
static Oid
postgis_geography_oid(void)
{
	return GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid, CStringGetDatum("geography"),
						   ObjectIdGetDatum(tdb_postgis_schema()));
}

/*
 * PostGIS's own <-> or <#> on geometry, or <-> on geography: another <->
 * returning float8 (one a user defined in another schema, say) orders by
 * something else entirely.
 */
static bool
is_postgis_order_op(Oid opno, KnnMetric *metric)
{
	HeapTuple	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	Form_pg_operator op;
	bool		ok = false;

	if (!HeapTupleIsValid(tup))
		return false;
	op = (Form_pg_operator) GETSTRUCT(tup);
	if (op->oprresult == FLOAT8OID && op->oprnamespace == tdb_postgis_schema())
	{
		Oid			geog = postgis_geography_oid();

		if (op->oprleft == tdb_geometry_oid() && op->oprright == tdb_geometry_oid())
		{
			if (strcmp(NameStr(op->oprname), "<->") == 0)
			{
				*metric = KNN_PLANAR;
				ok = true;
			}
			else if (strcmp(NameStr(op->oprname), "<#>") == 0)
			{
				*metric = KNN_BOX;
				ok = true;
			}
		}
		else if (OidIsValid(geog) && op->oprleft == geog && op->oprright == geog &&
				 strcmp(NameStr(op->oprname), "<->") == 0)
		{
			*metric = KNN_GEOGRAPHY;
			ok = true;
		}
	}
	ReleaseSysCache(tup);
	return ok;
}

/*
 * ORDER BY (geom <-> a), (geom <#> a) or (geom::geography <-> a), a
 * constant, parameter or stable expression, ascending: the pathkey, the
 * whole distance expression and a.  Any WHERE clause may come with it:
 * PostgreSQL filters the rows, which come nearest first, and stops at its
 * LIMIT (a constant, a parameter of a generic plan, or none).
 */
bool
loc_knn_order_key(PlannerInfo *root, RelOptInfo *baserel, const int *colmap, PathKey **pk_out,
			  Expr **order_expr, Expr **arg, KnnMetric *metric)
{
	PathKey    *pk;
	ListCell   *lc;

	if (root->query_pathkeys == NIL)
		return false;
	pk = linitial(root->query_pathkeys);
	if (pk->pk_strategy != BTLessStrategyNumber || pk->pk_nulls_first)
		return false;
	foreach(lc, pk->pk_eclass->ec_members)
	{
		EquivalenceMember *em = lfirst(lc);
		OpExpr	   *op = (OpExpr *) em->em_expr;
		Expr	   *l,
				   *r;
		KnnMetric	m;

		if (!IsA(op, OpExpr) || list_length(op->args) != 2 || !is_postgis_order_op(op->opno, &m))
			continue;
		l = linitial(op->args);
		r = lsecond(op->args);
		if (m == KNN_GEOGRAPHY ? !is_geog_of_geom(l, baserel->relid, colmap) : !loc_is_geom_var(l, baserel->relid, colmap))
		{
			Expr	   *t = l;

			l = r;
			r = t;
		}
		if ((m == KNN_GEOGRAPHY ? !is_geog_of_geom(l, baserel->relid, colmap) : !loc_is_geom_var(l, baserel->relid, colmap)) ||
			!tdb_is_scan_constant(r, baserel->relid))
			continue;
		*pk_out = pk;
		*order_expr = (Expr *) op;
		*arg = r;
		*metric = m;
		return true;
	}
	return false;
}

/*
 * ORDER BY geom <-> a LIMIT k with no WHERE clause: the k nearest (and
 * their ties) are all PostgreSQL needs to sort.  Any filter could remove
 * some of them, so then nothing is pushed; nor when a is a constant that is
 * not a point (the scan would read everything anyway, and EXPLAIN must not
 * say otherwise).
 */
bool
loc_knn_push(PlannerInfo *root, RelOptInfo *baserel, const int *colmap, Push *push)
{
	PathKey    *pk;
	Expr	   *order_expr;
	Expr	   *arg;
	KnnMetric	metric;
	double		x,
				y;

	/* a cached plan must not keep a k that a stable expression computed */
	if (baserel->baserestrictinfo != NIL || root->query_pathkeys == NIL ||
		root->limit_tuples <= 0 || root->limit_tuples > 100000 ||
		bms_membership(root->all_baserels) != BMS_SINGLETON ||
		root->parse->limitCount == NULL || !IsA(root->parse->limitCount, Const) ||
		(root->parse->limitOffset != NULL && !IsA(root->parse->limitOffset, Const)))
		return false;

	/*
	 * Only geom <-> a constant point: anything else (a parameter, a line,
	 * another metric) goes nearest first, incrementally.
	 */
	if (!loc_knn_order_key(root, baserel, colmap, &pk, &order_expr, &arg, &metric) ||
		metric != KNN_PLANAR || !IsA(arg, Const) ||
		!loc_knn_origin(((Const *) arg)->constvalue, ((Const *) arg)->constisnull, &x, &y))
		return false;
	push->kind = PUSH_KNN;
	push->args = list_make1(arg);
	push->k = (int64) root->limit_tuples;
	return true;
}

/*
 * An id range from one clause gets its other bound from another (both stay
 * quals: PostgreSQL rechecks them).
 */
static void
range_complete(List *rinfos, RelOptInfo *baserel, const int *colmap, Push *range)
{
	ListCell   *lc;

	foreach(lc, rinfos)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		Push		p;

		if (ri != range->rinfo && ri->security_level <= baserel->baserestrict_min_security &&
			loc_classify_clause(ri->clause, baserel->relid, colmap, &p))
			range_add_bound(range, &p);
	}
}

/*
 * The best push among clauses: the first key filter, else the first of the
 * best rank (push_rank: an OR of keys, a spatial clause, an id range).
 */
bool
loc_best_push(List *rinfos, RelOptInfo *baserel, const int *colmap, Push *best)
{
	ListCell   *lc;
	bool		found = false;
	Index		relid = baserel->relid;

	foreach(lc, rinfos)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		Push		p;

		/*
		 * A clause under a security barrier or row security must not run
		 * (or decide rows) before the policies it is ordered after.
		 */
		if (ri->security_level > baserel->baserestrict_min_security)
			continue;
		if (!loc_classify_clause(ri->clause, relid, colmap, &p))
			continue;
		p.rinfo = ri;
		if (p.kind == PUSH_KEY || p.kind == PUSH_KEYS)
		{
			*best = p;
			return true;
		}
		if (!found || push_rank(&p) < push_rank(best))
		{
			*best = p;
			found = true;
		}
	}
	if (found && best->kind == PUSH_ID_RANGE)
		range_complete(rinfos, baserel, colmap, best);
	return found;
}
