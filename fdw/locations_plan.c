/*-------------------------------------------------------------------------
 *
 * locations_plan.c
 *	  The locations foreign data wrapper's planning: the size estimate,
 *	  paths and their costs (with the parameterized paths of joins on
 *	  location_id and of spatial joins), and the plan, which carries what
 *	  the scan pushes down (fdw_private) and its EXPLAIN words.  What can be
 *	  pushed is decided by locations_classify.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/table.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"

#include "fdw/locations_internal.h"
#include "module/geometry.h"
#include "module/shared.h"
#include "module/trafficdb.h"

/* Each column's name and type, by LocColumn. */
static const struct
{
	const char *name;
	Oid			type;			/* InvalidOid: geometry */
} loc_columns[NUM_LOC_COLUMNS] = {
	{"location_id", INT8OID},
	{"geom", InvalidOid},
	{"road_class", TEXTOID},
	{"name", TEXTOID},
	{"length_m", FLOAT8OID},
	{"speed_limit_kmh", INT2OID},
	{"oneway", BOOLOID},
	{"speed_kmh", FLOAT4OID},
	{"free_flow_kmh", FLOAT4OID},
	{"congestion", INT2OID},
	{"confidence", INT2OID},
	{"incident", TEXTOID},
	{"updated_at", TIMESTAMPTZOID},
	{"generation", INT8OID},
	{"changed_generation", INT8OID},
};

/* Column map of a foreign table: every column must be one we know. */
static int *
build_colmap(Relation rel, int *natts)
{
	TupleDesc	td = RelationGetDescr(rel);
	int		   *map = palloc(sizeof(int) * Max(td->natts, 1));

	for (int a = 0; a < td->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(td, a);
		int			c;

		map[a] = -1;
		if (att->attisdropped)
			continue;
		for (c = 0; c < NUM_LOC_COLUMNS; c++)
			if (strcmp(NameStr(att->attname), loc_columns[c].name) == 0)
				break;
		if (c == NUM_LOC_COLUMNS)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_COLUMN_NAME_NOT_FOUND),
					 errmsg("column \"%s\" of foreign table %s is not a trafficdb location column",
							NameStr(att->attname), RelationGetRelationName(rel)),
					 errhint("Columns can be location_id, geom, road_class, name, length_m, speed_limit_kmh, oneway, "
							 "speed_kmh, free_flow_kmh, congestion, confidence, incident, updated_at, generation, "
							 "changed_generation.")));
		if ((c == COL_GEOM ? tdb_geometry_oid() : loc_columns[c].type) != att->atttypid)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
					 errmsg("column \"%s\" of foreign table %s has type %s; trafficdb provides %s",
							NameStr(att->attname), RelationGetRelationName(rel),
							format_type_be(att->atttypid),
							c == COL_GEOM ? "geometry" : format_type_be(loc_columns[c].type))));
		map[a] = c;
	}
	*natts = td->natts;
	return map;
}

/* ---- planning -------------------------------------------------------------------- */

typedef struct LocPlanInfo
{
	int		   *colmap;
	int			natts;
	Push		push;			/* for the unparameterized path */
	double		count;			/* locations in the published map, or a guess */
	double		extent[4];		/* its extent (all 0: unknown) */
	double		mean_box[2];	/* its records' mean box width and height */
} LocPlanInfo;

void
locGetForeignRelSize(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	LocPlanInfo *info = palloc0(sizeof(LocPlanInfo));
	Relation	rel = table_open(foreigntableid, AccessShareLock);
	double		rows;

	info->colmap = build_colmap(rel, &info->natts);
	table_close(rel, AccessShareLock);

	/* the size of what is published now (as the daemon reports it), or a guess */
	SpinLockAcquire(&tdb_shared->mutex);
	info->count = (double) tdb_shared->locations;
	memcpy(info->extent, tdb_shared->map_extent, sizeof(info->extent));
	memcpy(info->mean_box, tdb_shared->map_mean_box, sizeof(info->mean_box));
	SpinLockRelease(&tdb_shared->mutex);
	if (info->count <= 0)
		info->count = 10000;
	baserel->tuples = info->count;

	if (!loc_best_push(baserel->baserestrictinfo, baserel, info->colmap, &info->push) &&
		!loc_knn_push(root, baserel, info->colmap, &info->push))
		info->push.kind = PUSH_NONE;
	baserel->fdw_private = info;

	/* keys give at most one row each; otherwise PostgreSQL's own estimate */
	rows = info->count * clauselist_selectivity(root, baserel->baserestrictinfo, 0, JOIN_INNER, NULL);
	if (info->push.kind == PUSH_KEY)
		rows = 1;
	else if (info->push.kind == PUSH_KNN)
		rows = (double) info->push.k;
	else if (info->push.kind == PUSH_KEYS)
	{
		Expr	   *arr = linitial(info->push.args);

		rows = 10;
		if (IsA(arr, Const) && !((Const *) arr)->constisnull)
			rows = ArrayGetNItems(ARR_NDIM(DatumGetArrayTypeP(((Const *) arr)->constvalue)),
								  ARR_DIMS(DatumGetArrayTypeP(((Const *) arr)->constvalue)));
	}
	baserel->rows = clamp_row_est(rows);
}

/* Equivalence members that are our location_id column (join keys). */
static bool
ec_member_is_location_id(PlannerInfo *root, RelOptInfo *rel, EquivalenceClass *ec,
						 EquivalenceMember *em, void *arg)
{
	(void) root;
	(void) ec;
	return IsA(em->em_expr, Var) &&
		loc_column_of((Var *) em->em_expr, rel->relid, (const int *) arg) == COL_LOCATION_ID;
}

/*
 * The cost of reading n candidates from shared memory: a hash probe or an
 * R-tree visit each, plus forming the tuple.  Far below a heap page.
 */
#define LOC_COST_PER_ROW 0.002

/* ---- parameterized spatial joins ------------------------------------------------- */

/*
 * points p JOIN locations l ON ST_DWithin(l.geom, p.geom, 0.001): a path
 * parameterized by p, whose scan evaluates p's side of the clause for each
 * outer row and queries the R-tree with it (loc_classify_clause already accepts
 * other relations' columns there; createplan turns them into the nestloop's
 * parameters, and loc_find_candidates evaluates them at each rescan).
 */

/*
 * A guess, before any outer row is known, of the width and height
 * (degrees) of the box of e: a constant's own; ST_Buffer / ST_Expand of
 * something by a constant, that something's grown on each side; a cast,
 * its argument's; anything else (an outer column), a point.
 */
static void
guess_expr_box(Expr *e, double *w, double *h)
{
	*w = *h = 0;
	if (IsA(e, RelabelType))
		e = ((RelabelType *) e)->arg;
	if (IsA(e, Const) && !((Const *) e)->constisnull && ((Const *) e)->consttype == tdb_geometry_oid())
	{
		double		b[4];

		if (tdb_geometry_bounds(((Const *) e)->constvalue, b))
		{
			*w = b[2] - b[0];
			*h = b[3] - b[1];
		}
		return;
	}
	if (IsA(e, FuncExpr))
	{
		FuncExpr   *f = (FuncExpr *) e;
		int			nargs = list_length(f->args);

		if (nargs == 1 && (tdb_is_postgis_func(f->funcid, "geography") ||
						   tdb_is_postgis_func(f->funcid, "geometry")))
			guess_expr_box(linitial(f->args), w, h);
		else if (nargs >= 2 && (tdb_is_postgis_func(f->funcid, "st_buffer") ||
								tdb_is_postgis_func(f->funcid, "st_expand")) &&
				 exprType((Node *) linitial(f->args)) == tdb_geometry_oid() &&
				 IsA(lsecond(f->args), Const) && !((Const *) lsecond(f->args))->constisnull &&
				 exprType((Node *) lsecond(f->args)) == FLOAT8OID)
		{
			double		r = DatumGetFloat8(((Const *) lsecond(f->args))->constvalue);

			guess_expr_box(linitial(f->args), w, h);
			if (r > 0)
			{
				*w += 2 * r;
				*h += 2 * r;
			}
		}
	}
}

/* A distance argument known at planning time, else -1. */
static double
const_distance(Expr *e)
{
	if (IsA(e, Const) && !((Const *) e)->constisnull && ((Const *) e)->consttype == FLOAT8OID)
		return Max(DatumGetFloat8(((Const *) e)->constvalue), 0);
	return -1;
}

/*
 * How many records a spatial push finds per outer row: the map's count
 * times the chance that a record's box (of the mean size) meets the query
 * box, records spread evenly over the map's extent.  An unknown distance
 * counts as one mean record box; an unknown map (nothing published yet), a
 * thousandth of it.
 */
static double
spatial_join_candidates(const LocPlanInfo *info, const Push *push)
{
	double		w,
				h,
				d,
				mapw = info->extent[2] - info->extent[0],
				maph = info->extent[3] - info->extent[1],
				fx,
				fy;

	if (!(mapw > 0 || maph > 0))
		return Max(1, info->count / 1000);
	guess_expr_box(linitial(push->args), &w, &h);
	if (push->kind == PUSH_DWITHIN_DEG || push->kind == PUSH_EXPAND_OF)
	{
		d = const_distance(lsecond(push->args));
		if (d < 0)
			d = Max(info->mean_box[0], info->mean_box[1]);
		w += 2 * d;
		h += 2 * d;
	}
	else if (push->kind == PUSH_DWITHIN_M || (push->kind == PUSH_GEOG_BOX && list_length(push->args) > 1))
	{
		/* metres to degrees at the map's middle latitude (the box grows by as much) */
		double		lat = fabs(info->extent[1] + info->extent[3]) / 2;

		d = const_distance(lsecond(push->args));
		d = d < 0 ? Max(info->mean_box[0], info->mean_box[1]) : d / 111195.0;
		w += 2 * d / cos(Min(lat, 80.0) * M_PI / 180);
		h += 2 * d;
	}
	/* per axis, so that a map along one line (or a single point) still counts right */
	fx = mapw > 0 ? Min(1.0, (w + info->mean_box[0]) / mapw) : 1.0;
	fy = maph > 0 ? Min(1.0, (h + info->mean_box[1]) / maph) : 1.0;
	return Max(1, info->count * fx * fy);
}

/*
 * A parameterized path for each spatial join clause whose other side names
 * only other relations (and nothing volatile): one R-tree query per outer
 * row, costed by the records it finds, not by the map.  The path remembers
 * its clause (fdw_private) for locGetForeignPlan.  Hash and merge joins
 * cannot use these clauses anyway; the planner weighs this path in a nested
 * loop (locations inner) against full scans and the other join order.
 */
static void
add_spatial_join_paths(PlannerInfo *root, RelOptInfo *baserel, LocPlanInfo *info)
{
	ListCell   *lc;
	double		levels = info->count > 1 ? ceil(log(info->count) / log(TDB_RTREE_FANOUT)) : 1;

	foreach(lc, baserel->joininfo)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		Push		p;
		Relids		outer;
		ParamPathInfo *ppi;
		double		cand,
					rows;
		Cost		startup,
					per_cand;

		if (!join_clause_is_movable_to(ri, baserel) ||
			ri->security_level > baserel->baserestrict_min_security ||
			!loc_classify_clause(ri->clause, baserel->relid, info->colmap, &p) ||
			(p.kind != PUSH_BOX && p.kind != PUSH_DWITHIN_DEG && p.kind != PUSH_DWITHIN_M &&
			 p.kind != PUSH_BOX_OF && p.kind != PUSH_EXPAND_OF && p.kind != PUSH_GEOG_BOX))
			continue;
		outer = bms_difference(ri->clause_relids, baserel->relids);
		if (bms_is_empty(outer))
			continue;
		outer = bms_add_members(outer, baserel->lateral_relids);
		ppi = get_baserel_parampathinfo(root, baserel, outer);
		cand = spatial_join_candidates(info, &p);

		/*
		 * Candidates are the clause's rows (&&) or a superset PostgreSQL
		 * rechecks, at the clause's cost (a geography radius is mostly
		 * decided by the scan, without PostGIS).
		 */
		per_cand = LOC_COST_PER_ROW;
		rows = cand;
		if (!p.exact)
		{
			QualCost	qc;

			rows = Min(cand, ppi->ppi_rows);
			cost_qual_eval_node(&qc, (Node *) ri->clause, root);
			per_cand += p.kind == PUSH_DWITHIN_M ? qc.per_tuple / 10 : qc.per_tuple;
		}
		startup = 0.001 + levels * TDB_RTREE_FANOUT * LOC_COST_PER_ROW / 4;
		add_path(baserel, (Path *) create_foreignscan_path(root, baserel, NULL, clamp_row_est(rows),
														   startup, startup + cand * per_cand,
														   NIL, outer, NULL, list_make1(ri)));
	}
}

/*
 * The push of a parameterized path: the clause add_spatial_join_paths
 * built it for, or (a location_id join) the best among its clauses.
 */
static bool
param_path_push(ForeignPath *path, List *scan_clauses, RelOptInfo *baserel, const int *colmap, Push *push)
{
	if (path->fdw_private != NIL)
	{
		RestrictInfo *ri = linitial(path->fdw_private);

		if (list_member_ptr(scan_clauses, ri) &&
			loc_classify_clause(ri->clause, baserel->relid, colmap, push))
		{
			push->rinfo = ri;
			return true;
		}
	}
	return loc_best_push(scan_clauses, baserel, colmap, push);
}

/*
 * A PlaceHolderVar (an outer-joined subquery's output, e.g. the b of
 * "LEFT JOIN LATERAL (SELECT ST_Buffer(p.geom, r) AS b ...) s ON true JOIN
 * locations l ON ST_Within(l.geom, s.b)") is planner-only: ruleutils cannot
 * deparse it, and every query with such a clause failed with "unrecognized
 * node type".  Say its expression instead.
 */
static Node *
strip_placeholders(Node *node, void *context)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, PlaceHolderVar))
		return strip_placeholders((Node *) ((PlaceHolderVar *) node)->phexpr, context);
	return expression_tree_mutator(node, strip_placeholders, context);
}

/*
 * EXPLAIN's words for a pushed clause (of a join, or rechecked by the
 * scan): our columns unqualified and other relations' qualified
 * ("ST_DWithin(geom, p.geom, 0.001)").  Written while planning, when the
 * outer side is still columns (the plan has parameters there); names as
 * EXPLAIN picks them for the query's relations.
 */
static char *
deparse_join_clause(PlannerInfo *root, RelOptInfo *baserel, Expr *clause)
{
	PlannedStmt *ps = makeNode(PlannedStmt);
	List	   *names;

	clause = (Expr *) strip_placeholders((Node *) clause, NULL);

	ps->rtable = root->parse->rtable;
	names = select_rtable_names_for_explain(ps->rtable, bms_union(root->all_baserels, baserel->relids));
	lfirst(list_nth_cell(names, baserel->relid - 1)) = NULL;
	return deparse_expression((Node *) clause, deparse_context_for_plan_tree(ps, names), true, false);
}

static char *
describe_join_push(PlannerInfo *root, RelOptInfo *baserel, const Push *push)
{
	return psprintf("%s per outer row", deparse_join_clause(root, baserel, push->rinfo->clause));
}

void
locGetForeignPaths(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	LocPlanInfo *info = baserel->fdw_private;
	List	   *join_clauses;
	ListCell   *lc;
	Cost		total;

	(void) foreigntableid;
	total = 0.01 + (info->push.kind == PUSH_NONE ? info->count : baserel->rows) * LOC_COST_PER_ROW;
	add_path(baserel, (Path *) create_foreignscan_path(root, baserel, NULL, baserel->rows,
													   0.01, total, NIL, NULL, NULL, NIL));

	/*
	 * Nearest first: rows in the order of the query's ORDER BY distance, one
	 * R-tree step at a time, so that a LIMIT stops the scan after about as
	 * many rows as it needs, whatever the filter.  (Unfiltered ORDER BY ...
	 * LIMIT k with a constant k keeps the k-nearest push above.)
	 */
	if (info->push.kind != PUSH_KNN)
	{
		PathKey    *pk;
		Expr	   *order_expr;
		Expr	   *arg;
		KnnMetric	metric;

		if (loc_knn_order_key(root, baserel, info->colmap, &pk, &order_expr, &arg, &metric))
		{
			/* a distance per entry measured (PostGIS), and a heap step */
			Cost		per_row = LOC_COST_PER_ROW + 2 * cpu_operator_cost;
			/*
			 * With an id range the scan measures only ids in it (a short
			 * range: just those, sorted), about the rows it returns.
			 */
			double		measured = info->push.kind == PUSH_ID_RANGE ?
				Min(info->count, 2 * baserel->rows) : info->count;

			add_path(baserel, (Path *) create_foreignscan_path(root, baserel, NULL, baserel->rows, 0.05,
															   0.05 + measured * per_row,
															   list_make1(pk), NULL, NULL,
															   list_make4(makeString("knn"), order_expr, arg,
																		  list_make1_int(metric))));
		}
	}

	/*
	 * Parameterized paths: route JOIN locations ON location_id = route.seg
	 * becomes a hash lookup per outer row.  Join keys come from equivalence
	 * classes (inner joins) and from join clauses (outer joins).
	 */
	join_clauses = generate_implied_equalities_for_column(root, baserel, ec_member_is_location_id,
														  info->colmap, baserel->lateral_referencers);
	foreach(lc, baserel->joininfo)
		join_clauses = lappend(join_clauses, lfirst(lc));
	foreach(lc, join_clauses)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		Push		p;
		Relids		outer;
		ParamPathInfo *ppi;

		if (!join_clause_is_movable_to(ri, baserel) ||
			ri->security_level > baserel->baserestrict_min_security ||
			!loc_classify_clause(ri->clause, baserel->relid, info->colmap, &p) || p.kind != PUSH_KEY)
			continue;
		outer = bms_difference(ri->clause_relids, baserel->relids);
		if (bms_is_empty(outer))
			continue;
		ppi = get_baserel_parampathinfo(root, baserel, outer);
		add_path(baserel, (Path *) create_foreignscan_path(root, baserel, NULL, Min(ppi->ppi_rows, 1),
														   0.001, 0.001 + LOC_COST_PER_ROW,
														   NIL, outer, NULL, NIL));
	}
	add_spatial_join_paths(root, baserel, info);
}

/*
 * EXPLAIN's words for a push of the kinds collect_parts() runs (and, inside
 * an OR, of the others).
 */
static char *
describe_push(const Push *p, List *dctx)
{
	char	   *a[2] = {NULL, NULL};
	ListCell   *lc;

	foreach(lc, p->args)
		if (foreach_current_index(lc) < 2 && p->kind != PUSH_UNION)
			a[foreach_current_index(lc)] = deparse_expression(lfirst(lc), dctx, false, false);
	switch (p->kind)
	{
		case PUSH_KEY:
			return psprintf("location_id = %s", a[0]);
		case PUSH_KEYS:
			return psprintf("location_id = ANY (%s)", a[0]);
		case PUSH_BOX:
			return psprintf("geom && box2d(%s)", a[0]);
		case PUSH_DWITHIN_DEG:
			return psprintf("geom && ST_Expand(box2d(%s), %s)", a[0], a[1]);
		case PUSH_BOX_OF:
			/* an operator: "for geom @ a"; a function: "for ST_Within" */
			return strncmp(p->what, "geom ", 5) == 0 ?
				psprintf("geom && box2d(%s) for %s %s", a[0], p->what, a[0]) :
				psprintf("geom && box2d(%s) for %s", a[0], p->what);
		case PUSH_EXPAND_OF:
			return psprintf("geom && ST_Expand(box2d(%s), %s) for %s", a[0], a[1], p->what);
		case PUSH_GEOG_BOX:
			return psprintf("geom && the box of %s grown by %s%s m on the sphere for %s",
							a[0], a[1] ? a[1] : "", a[1] ? " + 1" : "1", p->what);
		case PUSH_ID_RANGE:
			{
				char	   *lo = (p->flags & RANGE_LO) ? a[0] : NULL;
				char	   *hi = (p->flags & RANGE_HI) ? a[lo ? 1 : 0] : NULL;

				return psprintf("location_id%s%s%s%s%s (by id: a hash lookup each in a short range, else the ids alone are read)",
								lo ? ((p->flags & RANGE_LO_INCL) ? " >= " : " > ") : "", lo ? lo : "",
								lo && hi ? " AND location_id" : "",
								hi ? ((p->flags & RANGE_HI_INCL) ? " <= " : " < ") : "", hi ? hi : "");
			}
		case PUSH_UNION:
			{
				StringInfoData buf;

				initStringInfo(&buf);
				appendStringInfoString(&buf, "union of ");
				foreach(lc, p->parts)
					appendStringInfo(&buf, "%s(%s)", foreach_current_index(lc) > 0 ? " OR " : "",
									 describe_push(lfirst(lc), dctx));
				return buf.data;
			}
		default:
			return pstrdup("?");
	}
}

/*
 * The parts of a push for the executor, after kind, k and geom_att: their
 * number, then kind, number of arguments and flags of each (a push of the
 * kinds collect_parts() runs is one part unless it is a union).
 */
static List *
push_encode(const Push *p, double limit)
{
	List	   *l;
	ListCell   *lc;

	if (p->kind == PUSH_KNN_ORDER && p->flags != 0)
		return list_make5_int(1, PUSH_ID_RANGE, list_length(p->args) - 2, p->flags, (int) Min(limit, 1000000));
	if (p->kind < PUSH_BOX_OF)
		return NIL;
	if (p->kind != PUSH_UNION)
		return list_make4_int(1, p->kind, list_length(p->args), p->flags);
	l = list_make1_int(list_length(p->parts));
	foreach(lc, p->parts)
	{
		Push	   *part = lfirst(lc);

		l = lappend_int(l, part->kind);
		l = lappend_int(l, list_length(part->args));
		l = lappend_int(l, part->flags);
	}
	return l;
}

/*
 * How many of a push's arguments are values the scan evaluates once per
 * (re)scan: the nearest-first distance expression (second) and a geography
 * radius's clause (third) are evaluated per entry instead.
 */
static int
pushed_arg_count(const Push *p)
{
	if (p->kind == PUSH_NONE)
		return 0;
	if (p->kind == PUSH_KNN_ORDER)
		return list_length(p->args) - 1;	/* all but the distance expression */
	if (p->kind == PUSH_DWITHIN_M)
		return Min(list_length(p->args), 2);
	return list_length(p->args);
}

/*
 * The pushed clause, when the scan can recheck it by calling its function
 * on each candidate's geom and the values of the pushed arguments, which it
 * evaluates once per (re)scan: f(geom, a[, d]) with a and d among the
 * pushed arguments, either way round.  PostgreSQL would evaluate a again
 * for every candidate; in a generic plan (ST_Within(geom, ST_Buffer($1,
 * 0.01))) that is a buffer per candidate.  Returns the function and its
 * collation (as integers), then per argument the pushed argument it is
 * (-1: geom); NIL if the clause is not of that form.
 */
static List *
own_recheck(const Push *push, Index relid, const int *colmap)
{
	Expr	   *clause = push->rinfo ? push->rinfo->clause : NULL;
	List	   *args;
	Oid			funcid,
				collid;
	List	   *map = NIL;
	bool		geom = false;
	ListCell   *lc;

	if (clause == NULL || push->exact || push->kind == PUSH_NONE || push->kind == PUSH_DWITHIN_M || push->kind == PUSH_UNION ||
		push->kind == PUSH_KNN || push->kind == PUSH_KNN_ORDER)
		return NIL;
	if (IsA(clause, FuncExpr))
	{
		funcid = ((FuncExpr *) clause)->funcid;
		collid = ((FuncExpr *) clause)->inputcollid;
		args = ((FuncExpr *) clause)->args;
	}
	else if (IsA(clause, OpExpr))
	{
		set_opfuncid((OpExpr *) clause);
		funcid = ((OpExpr *) clause)->opfuncid;
		collid = ((OpExpr *) clause)->inputcollid;
		args = ((OpExpr *) clause)->args;
	}
	else
		return NIL;
	if (!func_strict(funcid) || get_func_rettype(funcid) != BOOLOID || get_func_retset(funcid))
		return NIL;
	foreach(lc, args)
	{
		int			j = -1;

		if (!geom && loc_is_geom_var(lfirst(lc), relid, colmap))
			geom = true;
		else
		{
			ListCell   *la;

			foreach(la, push->args)
				if (equal(lfirst(lc), lfirst(la)))
					j = foreach_current_index(la);
			if (j < 0)
				return NIL;
		}
		map = lappend_int(map, j);
	}
	return geom ? list_concat(list_make2_int((int) funcid, (int) collid), map) : NIL;
}

/*
 * A nearest-first scan hands PostgreSQL the distance it measured for each
 * row it returns, so that the row's ORDER BY expression (in the plan's
 * target list, where the LIMIT reads it) is not evaluated a second time:
 * PostGIS's geography distance is most of such a query's time.  The scan's
 * tuple is then the table's columns in order and that distance
 * (fdw_scan_tlist), which PostgreSQL matches with the target list it gives
 * the scan (often only after this: a projection's, CP_IGNORE_TLIST; a list
 * without the expression leaves the column unread).  Only for a plain
 * SELECT (no row marks: EvalPlanQual would hand the scan a row of the
 * table's own shape), with every column there (none dropped) and no
 * whole-row reference or system column (other_columns: the tuple holds
 * neither).  NIL: the scan's tuple stays the table's row.
 */
static List *
knn_scan_tlist(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid, const Push *push,
			   bool other_columns)
{
	Expr	   *order_expr;
	List	   *scan_tlist = NIL;
	Relation	rel;
	TupleDesc	td;
	bool		ok = true;

	if (push->kind != PUSH_KNN_ORDER || list_length(push->args) < 2 || other_columns ||
		root->parse->commandType != CMD_SELECT || root->parse->rowMarks != NIL || root->rowMarks != NIL)
		return NIL;
	order_expr = lsecond(push->args);
	if (exprType((Node *) order_expr) != FLOAT8OID)
		return NIL;
	rel = table_open(foreigntableid, NoLock);
	td = RelationGetDescr(rel);
	for (int a = 0; a < td->natts && ok; a++)
	{
		Form_pg_attribute att = TupleDescAttr(td, a);

		if (att->attisdropped)
			ok = false;
		else
			scan_tlist = lappend(scan_tlist,
								 makeTargetEntry((Expr *) makeVar(baserel->relid, (AttrNumber) (a + 1), att->atttypid,
																  att->atttypmod, att->attcollation, 0),
												 (AttrNumber) (a + 1), NULL, false));
	}
	table_close(rel, NoLock);
	if (!ok)
		return NIL;
	return lappend(scan_tlist, makeTargetEntry((Expr *) copyObject(order_expr),
											   (AttrNumber) (list_length(scan_tlist) + 1), NULL, false));
}

/*
 * The quals a nearest-first scan checks itself before it measures an entry:
 * an entry PostgreSQL would filter out costs no PostGIS distance (a map
 * matcher asks for a few road classes, and most roads are of others).
 * The scan checks them on entries PostgreSQL may never read (past the
 * LIMIT, before its other quals), so only those that cannot fail or leak
 * whatever they are given: every function in them leakproof (on columns,
 * parameters and constants alike), made only of the nodes below, no
 * executor parameter (a subquery's), nothing volatile; and that read only
 * columns other than geom (the others cost a lookup, geom a geometry).
 * PostgreSQL still checks them on the rows returned.
 */
static bool
not_leakproof(Oid funcid, void *context)
{
	(void) context;
	return !get_func_leakproof(funcid);
}

static bool
prefilter_unsafe(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Param) && ((Param *) node)->paramkind != PARAM_EXTERN)
		return true;
	if (!IsA(node, Var) && !IsA(node, Const) && !IsA(node, Param) && !IsA(node, FuncExpr) &&
		!IsA(node, OpExpr) && !IsA(node, DistinctExpr) && !IsA(node, NullIfExpr) &&
		!IsA(node, ScalarArrayOpExpr) && !IsA(node, BoolExpr) && !IsA(node, NullTest) &&
		!IsA(node, BooleanTest) && !IsA(node, RelabelType) && !IsA(node, List))
		return true;
	if (check_functions_in_node(node, not_leakproof, NULL))
		return true;
	return expression_tree_walker(node, prefilter_unsafe, context);
}

static List *
knn_prefilter(PlannerInfo *root, RelOptInfo *baserel, const LocPlanInfo *info, const Push *push, List *quals)
{
	List	   *pre = NIL;
	ListCell   *lc;

	if (push->kind != PUSH_KNN_ORDER)
		return NIL;
	foreach(lc, quals)
	{
		Node	   *q = lfirst(lc);
		Bitmapset  *attrs = NULL;
		bool		ok = true;
		int			x = -1;

		if (contain_volatile_functions(q) || contain_subplans(q) || prefilter_unsafe(q, NULL) ||
			!bms_equal(pull_varnos(root, q), bms_make_singleton(baserel->relid)))
			continue;
		pull_varattnos(q, baserel->relid, &attrs);
		while ((x = bms_next_member(attrs, x)) >= 0)
		{
			int			a = x + FirstLowInvalidHeapAttributeNumber;

			if (a <= 0 || a > info->natts || info->colmap[a - 1] < 0 || info->colmap[a - 1] == COL_GEOM)
				ok = false;
		}
		if (ok)
			pre = lappend(pre, q);
	}
	return pre;
}

ForeignScan *
locGetForeignPlan(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid,
				  ForeignPath *best_path, List *tlist, List *scan_clauses, Plan *outer_plan)
{
	LocPlanInfo *info = baserel->fdw_private;
	List	   *cols = NIL;
	Push		push = info->push;
	char	   *desc = NULL;
	char	   *knn_arg = NULL;
	char	   *range_desc = NULL;
	Bitmapset  *attrs = NULL;
	List	   *recheck = NIL;
	List	   *own = NIL;
	char	   *own_desc = "";
	List	   *fdw_private;
	List	   *scan_tlist;
	bool		whole_row;
	int			geom_att;
	ListCell   *lc;

	/* the nearest-first path: everything else is rechecked by PostgreSQL */
	if (best_path->path.param_info == NULL && best_path->fdw_private != NIL &&
		IsA(linitial(best_path->fdw_private), String))
	{
		/* as loc_knn_order_key found them: the distance expression, its argument, the metric */
		Expr	   *order_expr = lsecond(best_path->fdw_private);
		Expr	   *arg = lthird(best_path->fdw_private);

		push.kind = PUSH_KNN_ORDER;
		push.rinfo = NULL;
		push.exact = false;
		push.k = linitial_int((List *) lfourth(best_path->fdw_private));
		push.args = list_make2(arg, order_expr);
		push.flags = 0;
		/* an id range (the best narrowing there is): only its ids are measured */
		if (info->push.kind == PUSH_ID_RANGE)
		{
			push.args = list_concat(push.args, info->push.args);
			push.flags = info->push.flags;
			range_desc = describe_push(&info->push, deparse_context_for("locations", foreigntableid));
			/* without describe_push's " (by id: ...)" */
			if (strstr(range_desc, " (by id: ") != NULL)
				*strstr(range_desc, " (by id: ") = '\0';
		}
	}
	/* a parameterized path pushes its join clause (it is among scan_clauses) */
	if (best_path->path.param_info != NULL &&
		!param_path_push(best_path, scan_clauses, baserel, info->colmap, &push))
		push.kind = PUSH_NONE;

	/*
	 * An exact pushdown needs no recheck; a geography radius is checked by
	 * the scan itself (mostly without PostGIS), so neither stays a qual.
	 */
	if (push.kind != PUSH_NONE && push.rinfo != NULL &&
		(push.exact || push.kind == PUSH_DWITHIN_M))
	{
		scan_clauses = list_delete_ptr(list_copy(scan_clauses), push.rinfo);
		/*
		 * EvalPlanQual rechecks it on the row it re-reads (a whole-row copy,
		 * so every column is there).
		 */
		recheck = list_make1(push.rinfo->clause);
	}
	if (push.kind == PUSH_DWITHIN_M && push.rinfo == NULL)
		push.args = list_truncate(list_copy(push.args), 2);	/* (never: keep PostgreSQL's qual) */
	else if ((own = own_recheck(&push, baserel->relid, info->colmap)) != NIL)
	{
		/* the scan rechecks it; EvalPlanQual too, on the row it re-reads */
		own_desc = deparse_join_clause(root, baserel, push.rinfo->clause);
		scan_clauses = list_delete_ptr(list_copy(scan_clauses), push.rinfo);
		recheck = list_make1(push.rinfo->clause);
	}

	/*
	 * Only the columns the query uses are formed (a geometry costs far more
	 * than a hash probe); the others stay NULL.
	 */
	pull_varattnos((Node *) baserel->reltarget->exprs, baserel->relid, &attrs);
	foreach(lc, scan_clauses)
		pull_varattnos((Node *) lfirst_node(RestrictInfo, lc)->clause, baserel->relid, &attrs);
	whole_row = bms_is_member(0 - FirstLowInvalidHeapAttributeNumber, attrs);
	geom_att = -1;
	for (int a = 0; a < info->natts; a++)
	{
		cols = lappend_int(cols, whole_row ||
						   bms_is_member(a + 1 - FirstLowInvalidHeapAttributeNumber, attrs) ?
						   info->colmap[a] : -1);
		if (info->colmap[a] == COL_GEOM)
			geom_att = a;
	}

	if (push.kind != PUSH_NONE && best_path->path.param_info != NULL)
	{
		/* the arguments name the outer side's columns: say what happens instead */
		desc = push.kind == PUSH_KEY ?
			pstrdup("location_id = the outer row's key (a hash lookup per row)") :
			push.rinfo != NULL ? describe_join_push(root, baserel, &push) :
			pstrdup("a key or box from the outer row");
	}
	else if (push.kind != PUSH_NONE)
	{
		List	   *dctx = deparse_context_for("locations", foreigntableid);
		char	   *a0 = deparse_expression(linitial(push.args), dctx, false, false);
		char	   *a1 = list_length(push.args) > 1 && push.kind != PUSH_KNN_ORDER ?
			deparse_expression(lsecond(push.args), dctx, false, false) : NULL;

		switch (push.kind)
		{
			case PUSH_KEY:
				desc = psprintf("location_id = %s", a0);
				break;
			case PUSH_KEYS:
				desc = psprintf("location_id = ANY (%s)", a0);
				break;
			case PUSH_BOX:
				desc = psprintf("geom && box2d(%s)", a0);
				break;
			case PUSH_DWITHIN_DEG:
				desc = psprintf("geom && ST_Expand(box2d(%s), %s)", a0, a1);
				break;
			case PUSH_DWITHIN_M:
				desc = psprintf("ST_DWithin(geom::geography, %s, %s) checked in the scan", a0, a1);
				break;
			case PUSH_KNN_ORDER:
				desc = psprintf("nearest first by %s %s, until the query has its rows%s%s",
								push.k == KNN_BOX ? "geom <#>" :
								push.k == KNN_GEOGRAPHY ? "geom::geography <->" : "geom <->", a0,
								range_desc ? "; ids only of " : "",
								range_desc ? psprintf("%s, found in the map's ids in order, measured all and sorted when few, else skipped in the walk unmeasured",
													  range_desc) : "");
				break;
			case PUSH_KNN:
				/* a constant is a point (loc_knn_push); anything else is known only when run */
				desc = IsA(linitial(push.args), Const) ?
					psprintf("the " INT64_FORMAT " nearest to %s, and their ties", push.k, a0) :
					psprintf("the " INT64_FORMAT " nearest to %s and their ties if it is a point, else none (full scan)",
							 push.k, a0);
				knn_arg = a0;
				break;
			case PUSH_BOX_OF:
			case PUSH_EXPAND_OF:
			case PUSH_GEOG_BOX:
			case PUSH_ID_RANGE:
			case PUSH_UNION:
				desc = describe_push(&push, dctx);
				break;
			case PUSH_NONE:
				break;
		}
	}

	/* every other clause is rechecked by PostgreSQL */
	scan_clauses = extract_actual_clauses(scan_clauses, false);
	fdw_private = list_make5(cols, list_concat(list_make3_int(push.kind, (int) push.k, geom_att), push_encode(&push, root->limit_tuples > 0 ? root->limit_tuples : 10)),
							 makeString(desc ? desc : "none (full scan)"),
							 makeString(knn_arg ? knn_arg : ""),
							 list_make1_int(pushed_arg_count(&push)));
	fdw_private = lappend(lappend(fdw_private, own), makeString(own_desc));
	scan_tlist = knn_scan_tlist(root, baserel, foreigntableid, &push,
								whole_row || bms_next_member(attrs, -1) < -FirstLowInvalidHeapAttributeNumber);
	{
		/* (expressions in fdw_private are not fixed by set_plan_references: their operators' functions here) */
		Node	   *order_expr = scan_tlist != NIL ? copyObject(lsecond(push.args)) : NULL;
		List	   *pre = copyObject(knn_prefilter(root, baserel, info, &push, scan_clauses));

		fix_opfuncids(order_expr);
		fix_opfuncids((Node *) pre);
		fdw_private = lappend(lappend(fdw_private, order_expr), pre);
	}
	if (scan_tlist != NIL)
	{
		/*
		 * PostgreSQL matches fdw_exprs against fdw_scan_tlist too: the
		 * distance expression would become a reference to the scan's own
		 * column.  It travels in fdw_private instead (its Vars need no
		 * fixing: a scan's Vars are read by attribute number), a NULL in
		 * its place keeps the arguments' positions.
		 */
		push.args = list_copy(push.args);
		lsecond(push.args) = makeNullConst(FLOAT8OID, -1, InvalidOid);
	}
	return make_foreignscan(tlist, scan_clauses, baserel->relid,
							push.kind == PUSH_NONE ? NIL : push.args, fdw_private,
							scan_tlist, recheck, outer_plan);
}
