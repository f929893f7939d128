/*-------------------------------------------------------------------------
 *
 * trails_plan.c
 *	  The trail foreign data wrapper's planning: which clauses narrow a
 *	  scan (page pruning by trail ids, time and boxes), the size estimate,
 *	  paths and their costs (with a parameterized path per trail id of a
 *	  join), and the plan.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/reloptions.h"
#include "access/table.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_user_mapping.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/paths.h"
#include "optimizer/pathnode.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "optimizer/tlist.h"
#include "parser/parse_coerce.h"
#include "parser/parsetree.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/timestamp.h"

#include "fdw/timebound.h"
#include "fdw/pushdown.h"
#include "fdw/trails_internal.h"
#include "module/geometry.h"
#include "module/trafficdb.h"
#include "trail/cache.h"
#include "trail/pager.h"
#include "trail/trail.h"

/* ---- planning -------------------------------------------------------------------- */

/* The id, time and geom columns of a trail table (InvalidAttrNumber: none). */
TrailCols
trail_cols(Oid relid)
{
	ForeignTable *ft = GetForeignTable(relid);
	const char *idname = ID_COLUMN(ft);
	const char *timename = TIME_COLUMN(ft);
	Relation	rel = table_open(relid, NoLock);
	TupleDesc	td = RelationGetDescr(rel);
	TrailCols	c = {InvalidAttrNumber, InvalidAttrNumber, InvalidAttrNumber, InvalidOid};
	Oid			geom = tdb_geometry_oid();

	for (int i = 0; i < td->natts; i++)
	{
		Form_pg_attribute a = TupleDescAttr(td, i);

		if (a->attisdropped)
			continue;
		if (strcmp(NameStr(a->attname), idname) == 0)
		{
			c.id = a->attnum;
			c.id_type = a->atttypid;
		}
		else if (strcmp(NameStr(a->attname), timename) == 0 &&
				 a->atttypid == TIMESTAMPTZOID)
			c.time = a->attnum;
		else if (a->atttypid == geom && c.geom == InvalidAttrNumber)
			c.geom = a->attnum;
	}
	table_close(rel, NoLock);
	return c;
}

bool
trl_is_col(Expr *e, Index relid, AttrNumber att)
{
	return att != InvalidAttrNumber && e != NULL && IsA(e, Var) && ((Var *) e)->varno == (int) relid &&
		((Var *) e)->varlevelsup == 0 && ((Var *) e)->varattno == att;
}

/* trl_is_col of the geometry column for the shared recognition (fdw/pushdown.c): arg is its AttrNumber. */
static bool
geom_column(Expr *e, Index relid, const void *geom)
{
	return trl_is_col(e, relid, *(const AttrNumber *) geom);
}

/* Is a text comparison under collation coll byte equality? */
bool
trl_collation_is_bytes(Oid coll)
{
	return OidIsValid(coll) && get_collation_isdeterministic(coll);
}

/*
 * Equality of the id column's type with a value of the same kind, which
 * the file's ids answer exactly: text under a deterministic collation only
 * (under a nondeterministic one, 'afr1' = 'AFR1' may be true, and pruning
 * to the trail whose id has those bytes lost the others' rows).
 */
static bool
is_id_equality(Oid opno, Oid coll, Oid idtype)
{
	if (tdb_is_int8_equality(opno))
		return idtype == INT8OID;
	return get_opcode(opno) == F_TEXTEQ && idtype == TEXTOID && trl_collation_is_bytes(coll);
}

/* Does clause narrow the scan?  Appends its kind and arguments. */
bool
trl_classify(Expr *clause, Index relid, const TrailCols *c, List **kinds, List **args)
{
	TdbGeoClause geo;

	/* geom && a, ST_Intersects, ST_DWithin (the pruning box ignores use_spheroid) */
	if (tdb_geo_clause(clause, relid, geom_column, &c->geom, &geo))
	{
		*kinds = lappend_int(*kinds, geo.kind == TDB_GEO_BOX ? PUSH_BOX :
							 geo.kind == TDB_GEO_DWITHIN_DEG ? PUSH_DWITHIN_DEG : PUSH_DWITHIN_M);
		*args = lappend(*args, geo.arg);
		if (geo.kind != TDB_GEO_BOX)
			*args = lappend(*args, geo.distance);
		return true;
	}
	if (IsA(clause, OpExpr) && list_length(((OpExpr *) clause)->args) == 2)
	{
		OpExpr	   *op = (OpExpr *) clause;
		Expr	   *l = linitial(op->args),
				   *r = lsecond(op->args);
		bool		swap = false;

		/* the column on the left (a join clause may name another relation's first) */
		if (IsA(r, Var) && ((Var *) r)->varno == (int) relid &&
			!(IsA(l, Var) && ((Var *) l)->varno == (int) relid))
		{
			Expr	   *t = l;

			l = r;
			r = t;
			swap = true;
		}
		if (!IsA(l, Var) || !tdb_is_scan_constant(r, relid))
			return false;
		if (trl_is_col(l, relid, c->id) && is_id_equality(op->opno, op->inputcollid, c->id_type))
		{
			*kinds = lappend_int(*kinds, PUSH_ID);
			*args = lappend(*args, r);
			return true;
		}
		if (trl_is_col(l, relid, c->time) && exprType((Node *) r) == TIMESTAMPTZOID)
		{
			int			k = tdb_time_bound_of(op->opno, swap);

			if (k < 0)
				return false;
			*kinds = lappend_int(*kinds, k);
			*args = lappend(*args, r);
			return true;
		}
		return false;
	}
	if (IsA(clause, ScalarArrayOpExpr))
	{
		ScalarArrayOpExpr *sa = (ScalarArrayOpExpr *) clause;
		Expr	   *l = linitial(sa->args),
				   *r = lsecond(sa->args);

		if (sa->useOr && trl_is_col(l, relid, c->id) && is_id_equality(sa->opno, sa->inputcollid, c->id_type) &&
			tdb_is_scan_constant(r, relid))
		{
			*kinds = lappend_int(*kinds, PUSH_IDS);
			*args = lappend(*args, r);
			return true;
		}
		return false;
	}
	return false;
}

/*
 * Is geo (tdb_geo_clause of a FuncExpr: ST_Intersects(geom, r), either way
 * round) against a constant axis-aligned rectangle r of SRID 4326
 * (tdb_geometry_rectangle)?  Its box into box.  The scan then checks it on
 * each point it forms, in the same doubles PostGIS would read from the
 * point (checked against ST_Intersects on 400,000 points within 1e-12
 * degrees of the edges, and in t/090_trail_exact_box.pl), and PostgreSQL
 * does not check it again: that check was half the CPU of a box query on
 * the week of New York Harbor AIS (111,139 of 173,000 reports in the box).
 */
static bool
exact_box(const TdbGeoClause *geo, double *box)
{
	const Const *a = (const Const *) geo->arg;

	/* a constant of PostGIS's geometry type, not NULL (NULL: PostgreSQL says no row) */
	return geo->kind == TDB_GEO_BOX && IsA(a, Const) && !a->constisnull &&
		a->consttype == tdb_geometry_oid() && tdb_geometry_rectangle(a->constvalue, box);
}

/*
 * Is geo ST_DWithin(geom::geography, p, d[, use_spheroid]) with p a
 * constant geography POINT of SRID 4326 and d a constant finite distance
 * >= 0 (use_spheroid, if given, a constant)?  p's longitude and latitude
 * and d into *px, *py, *d.  The scan then settles most rows itself by the
 * great-circle distance (trl_band_settles) and asks PostGIS only about
 * the rows near the circle.
 */
static bool
geog_band(const TdbGeoClause *geo, double *px, double *py, double *d, bool *spheroid)
{
	const Const *a = (const Const *) geo->arg,
			   *dc = (const Const *) geo->distance;
	int32		srid;
	char	   *what;

	if (geo->kind != TDB_GEO_DWITHIN_M || !IsA(a, Const) || !IsA(dc, Const) ||
		(geo->spheroid != NULL && (!IsA(geo->spheroid, Const) || ((Const *) geo->spheroid)->constisnull)))
		return false;
	if (a->constisnull || dc->constisnull || dc->consttype != FLOAT8OID)
		return false;
	*d = DatumGetFloat8(dc->constvalue);
	*spheroid = geo->spheroid == NULL || DatumGetBool(((Const *) geo->spheroid)->constvalue);
	if (!(*d >= 0) || isinf(*d))
		return false;			/* PostGIS's error for d < 0, NaN: its own answer */
	if (!tdb_geometry_point(tdb_geography_to_geometry(a->constvalue, a->consttype), px, py, &srid, &what))
		return false;
	return srid == 4326 && isfinite(*px) && isfinite(*py) && *py >= -90 && *py <= 90;
}

void
trlGetForeignRelSize(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	TrailPlan  *tp = palloc0(sizeof(TrailPlan));
	TrailCols	c = trail_cols(foreigntableid);
	ListCell   *lc;
	double		sel = 1.0;

	(void) root;
	foreach(lc, baserel->baserestrictinfo)
	{
		RestrictInfo *ri = lfirst(lc);
		if (trl_classify(ri->clause, baserel->relid, &c, &tp->kinds, &tp->args))
		{
			if (tp->first_id == NULL && (llast_int(tp->kinds) == PUSH_ID || llast_int(tp->kinds) == PUSH_IDS))
				tp->first_id = ri;
			switch (llast_int(tp->kinds))
			{
				case PUSH_ID:
				case TDB_BOUND_EQ:
					sel *= 0.001;
					break;
				case PUSH_IDS:
					sel *= 0.01;
					break;
				case PUSH_BOX:
				case PUSH_DWITHIN_DEG:
				case PUSH_DWITHIN_M:
					sel *= 0.01;
					break;
				default:
					sel *= 0.3;
			}
		}
	}
	baserel->fdw_private = tp;
	/* no statistics: a trail file holds many events, a query wants few */
	baserel->rows = Max(1.0, 1000000.0 * sel);
}

static bool
ec_member_is_trail_id(PlannerInfo *root, RelOptInfo *rel, EquivalenceClass *ec,
					  EquivalenceMember *em, void *arg)
{
	const TrailCols *c = arg;

	(void) root;
	(void) ec;
	return trl_is_col(em->em_expr, rel->relid, c->id);
}

void
trlGetForeignPaths(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	TrailCols	c = trail_cols(foreigntableid);
	List	   *join_clauses;
	ListCell   *lc;

	/* a remote file costs a round trip before the first row */
	add_path(baserel, (Path *) create_foreignscan_path(root, baserel, NULL, baserel->rows,
													   TRAIL_OPEN_COST,
													   TRAIL_OPEN_COST + baserel->rows * TRAIL_ROW_COST,
													   NIL, NULL, NULL, NIL));

	/*
	 * Parameterized paths: ids JOIN trails t ON t.id = ids.x becomes one
	 * pruned lookup per outer row (the scan evaluates the outer value at each
	 * rescan and reads that trail's pages only).  Join keys come from
	 * equivalence classes (inner joins) and from join clauses (outer joins,
	 * id = ANY(outer array)).
	 */
	if (c.id == InvalidAttrNumber)
		return;
	join_clauses = generate_implied_equalities_for_column(root, baserel, ec_member_is_trail_id,
														  &c, baserel->lateral_referencers);
	foreach(lc, baserel->joininfo)
		join_clauses = lappend(join_clauses, lfirst(lc));
	foreach(lc, join_clauses)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		List	   *kinds = NIL,
				   *args = NIL;
		Relids		outer;
		double		rows;
		int			kind;

		if (!join_clause_is_movable_to(ri, baserel) ||
			ri->security_level > baserel->baserestrict_min_security ||
			!trl_classify(ri->clause, baserel->relid, &c, &kinds, &args))
			continue;
		kind = linitial_int(kinds);
		if (kind != PUSH_ID && kind != PUSH_IDS)
			continue;
		outer = bms_difference(ri->clause_relids, baserel->relids);
		if (bms_is_empty(outer))
			continue;
		/*
		 * The events of one trail, as trlGetForeignRelSize estimates an id's
		 * (not ppi_rows: without statistics on the id, PostgreSQL takes a
		 * join key to match 1/200 of the file, 5,000 events a lookup).
		 */
		rows = Max(1.0, baserel->rows * (kind == PUSH_ID ? 0.001 : 0.01));
		add_path(baserel, (Path *) create_foreignscan_path(root, baserel, NULL, rows,
														   TRAIL_LOOKUP_COST,
														   TRAIL_LOOKUP_COST + rows * TRAIL_LOOKUP_ROW_COST,
														   NIL, outer, NULL, NIL));
	}
}

/* A VALUES list of at most this many rows gives its ids to the lookups (TRLP_OUTER_IDS). */
#define OUTER_IDS_MAX 100000

/*
 * A join's lookups whose outer side is a VALUES list (FROM (VALUES ...)
 * AS ids(id) JOIN t ON t.id = ids.id, the outer value the column itself):
 * the constants of that column, whose trails' pages the first lookup
 * fetches at once (reader.c's prefetch_union).  NIL when the outer value
 * is anything else, or a row's is not a constant of the column's type.
 * Only a hint: each lookup still reads its own id's pages.
 */
static List *
outer_values_ids(PlannerInfo *root, Expr *outer)
{
	Var		   *v = (Var *) outer;
	RangeTblEntry *rte;
	List	   *out = NIL;
	ListCell   *lc;

	if (!IsA(outer, Var) || v->varlevelsup != 0 || v->varattno < 1 ||
		v->varno < 1 || v->varno >= root->simple_rel_array_size)
		return NIL;
	rte = root->simple_rte_array[v->varno];
	if (rte == NULL || rte->rtekind != RTE_VALUES || list_length(rte->values_lists) > OUTER_IDS_MAX)
		return NIL;
	foreach(lc, rte->values_lists)
	{
		List	   *row = lfirst(lc);
		Const	   *e = v->varattno <= list_length(row) ? list_nth(row, v->varattno - 1) : NULL;

		if (e == NULL || !IsA(e, Const) || e->consttype != v->vartype)
			return NIL;
		out = lappend(out, e);
	}
	return out;
}

ForeignScan *
trlGetForeignPlan(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid, ForeignPath *best_path,
				  List *tlist, List *scan_clauses, Plan *outer_plan)
{
	TrailPlan  *tp;
	List	   *kinds;
	List	   *args;
	ListCell   *lc;
	Bitmapset  *used = NULL;
	List	   *used_list = NIL;
	List	   *exact;
	List	   *band;
	int			lookups = 0;
	RestrictInfo *id_ri = NULL;	/* the id clause the scan prunes with */
	List	   *outer_ids = NIL;	/* TRLP_OUTER_IDS */
	List	   *recheck = NIL;	/* the clauses the scan decides: EvalPlanQual's (fdw_recheck_quals) */
	List	   *fdw_private;	/* TRLP_* */
	int			id_arg = -1;	/* its position in fdw_exprs (the scan checks it) */
	TrailCols	c;

	/* aggregates from the footer (trlGetForeignUpperPaths): no relation scanned */
	if (IS_UPPER_REL(baserel))
	{
		List	   *fp = best_path->fdw_private;

		return make_foreignscan(tlist, list_nth(fp, AGGPATH_LOCAL), 0, list_nth(fp, AGGPATH_ARGS),
								list_copy_head(fp, AGGP_COUNT), list_nth(fp, AGGPATH_TLIST), NIL, outer_plan);
	}
	tp = baserel->fdw_private;
	kinds = tp->kinds;
	args = tp->args;
	c = trail_cols(foreigntableid);

	/*
	 * A parameterized path also pushes its join clauses (among scan_clauses,
	 * not in baserestrictinfo); their outer columns become the nested
	 * loop's parameters, evaluated at each rescan.  They come first, in
	 * their order: the first id clause of kinds prunes (id_ri), PostgreSQL
	 * checks the others.
	 */
	if (best_path->path.param_info != NULL)
	{
		List	   *pk = NIL,
				   *pa = NIL;

		foreach(lc, best_path->path.param_info->ppi_clauses)
		{
			RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
			List	   *k = NIL,
					   *a = NIL;

			if (trl_classify(ri->clause, baserel->relid, &c, &k, &a) &&
				(linitial_int(k) == PUSH_ID || linitial_int(k) == PUSH_IDS))
			{
				pk = list_concat(pk, k);
				pa = list_concat(pa, a);
				if (id_ri == NULL)
				{
					id_ri = ri;
					if (linitial_int(k) == PUSH_ID)
						outer_ids = outer_values_ids(root, linitial(a));
				}
			}
		}
		kinds = list_concat(pk, kinds);
		args = list_concat(pa, list_copy(args));
	}
	if (id_ri == NULL)
		id_ri = tp->first_id;
	/*
	 * fdw_private's TRLP_LOOKUPS: 0, or (a parameterized scan) how many
	 * lookups the planner expects: the product of the outer relations' rows
	 * (the scan may fetch the pages of all of them at once when they would
	 * cover most of the file; trails_scan.c)
	 */
	if (best_path->path.param_info != NULL)
	{
		double		outer_rows = 1;

		for (int x = -1; (x = bms_next_member(best_path->path.param_info->ppi_req_outer, x)) >= 0;)
			if (x < root->simple_rel_array_size && root->simple_rel_array[x] != NULL)
				outer_rows *= Max(1.0, root->simple_rel_array[x]->rows);
		lookups = (int) Min(Max(outer_rows, 1.0), (double) PG_INT32_MAX);
	}
	/*
	 * Every clause stays for PostgreSQL to check (the pushdown only prunes
	 * pages), but three the scan decides itself: the id clause it prunes
	 * with (id_ri), ST_Intersects(geom, a rectangle known at planning),
	 * exactly on the points it forms (exact_box), and the first
	 * ST_DWithin(geom::geography, a point, d) (geog_band).  EvalPlanQual,
	 * which hands the scan no file row but a whole-row copy to recheck (a
	 * concurrent update of the outer row of FOR UPDATE, UPDATE ... FROM),
	 * evaluates them as they are (fdw_recheck_quals).
	 */
	{
		double		ebox[4] = {-INFINITY, -INFINITY, INFINITY, INFINITY},
					box[4],
					px,
					py,
					dist;
		bool		have_box = false,
					spheroid = true;
		List	   *kept = NIL;
		Expr	   *id_clause = NULL,
				   *band_clause = NULL;

		band = NIL;
		foreach(lc, scan_clauses)
		{
			RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
			TdbGeoClause geo;

			if (ri == id_ri && !ri->pseudoconstant)
			{
				/*
				 * The id clause the scan prunes with: the scan returns the
				 * rows of the trails whose ids equal the value(s) exactly
				 * (trl_classify takes the id type's own equality, text
				 * under a deterministic collation), so it is checked there,
				 * not again on every row; and where the file cannot answer
				 * it (a bigint column over string ids), by the scan on the
				 * formed row (trails_scan.c).  Its expression goes last
				 * among fdw_exprs.
				 */
				id_clause = ri->clause;
				pull_varattnos((Node *) ri->clause, baserel->relid, &used);
			}
			else if (ri->pseudoconstant || !IsA(ri->clause, FuncExpr) ||
				!tdb_geo_clause(ri->clause, baserel->relid, geom_column, &c.geom, &geo))
				kept = lappend(kept, ri);
			else if (band == NIL && geog_band(&geo, &px, &py, &dist, &spheroid))
			{
				/*
				 * the scan evaluates it, itself for the rows a great-circle
				 * bound settles, through PostGIS for the others: the clause
				 * goes last among the scan's expressions (fdw_exprs), not to
				 * the quals
				 */
				band = list_make4(makeString(psprintf("%.17g", px)), makeString(psprintf("%.17g", py)),
								  makeString(psprintf("%.17g", dist)), makeBoolean(spheroid));
				band_clause = ri->clause;
				pull_varattnos((Node *) ri->clause, baserel->relid, &used);
			}
			else if (exact_box(&geo, box))
			{
				/* several rectangles: their intersection (empty: no row) */
				ebox[0] = Max(ebox[0], box[0]);
				ebox[1] = Max(ebox[1], box[1]);
				ebox[2] = Min(ebox[2], box[2]);
				ebox[3] = Min(ebox[3], box[3]);
				have_box = true;
				recheck = lappend(recheck, ri->clause);
			}
			else
				kept = lappend(kept, ri);
		}
		exact = !have_box ? NIL :
			list_make4(makeString(psprintf("%.17g", ebox[0])), makeString(psprintf("%.17g", ebox[1])),
					   makeString(psprintf("%.17g", ebox[2])), makeString(psprintf("%.17g", ebox[3])));
		scan_clauses = extract_actual_clauses(kept, false);
		/* after the kinds' arguments: the id clause, then the distance clause (last) */
		if (id_clause != NULL)
		{
			id_arg = list_length(args);
			args = lappend(list_copy(args), id_clause);
			recheck = lappend(recheck, id_clause);
		}
		if (band_clause != NULL)
		{
			args = lappend(list_copy(args), band_clause);
			recheck = lappend(recheck, band_clause);
		}
	}

	/*
	 * The columns the scan must form: those above it (the relation's target,
	 * not tlist, which may be every column) and those of the clauses it
	 * checks.  The file's other columns are not fetched.
	 */
	pull_varattnos((Node *) baserel->reltarget->exprs, baserel->relid, &used);
	pull_varattnos((Node *) scan_clauses, baserel->relid, &used);
	for (int x = -1; (x = bms_next_member(used, x)) >= 0;)
		used_list = lappend_int(used_list, x);
	/*
	 * fdw_private's TRLP_MAY_STOP: 1 when the executor may stop before the
	 * last row (a LIMIT, a cursor, EXISTS: the planner wants a fraction of
	 * the rows), so the scan fetches in growing windows; 0 when every row
	 * will be read, so it announces all its pages at once (reader.c).
	 */
	fdw_private = list_make5(kinds, makeInteger(lookups), used_list,
							 makeInteger(root->tuple_fraction > 0 || root->limit_tuples >= 0), exact);
	fdw_private = lappend(lappend(lappend(fdw_private, band), makeInteger(id_arg)), outer_ids);
	Assert(list_length(fdw_private) == TRLP_COUNT);
	return make_foreignscan(tlist, scan_clauses, baserel->relid, args, fdw_private, NIL, recheck, outer_plan);
}
