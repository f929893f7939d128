/*-------------------------------------------------------------------------
 *
 * locations.c
 *	  The locations foreign data wrapper: trafficdb's published map and
 *	  traffic as a table, read from shared memory.
 *
 * What is pushed down (everything else, and these too, is rechecked by
 * PostgreSQL, so results are always those of the same query on a heap
 * table; pushdown only narrows the candidates):
 *	 - location_id = expr, location_id = ANY(array expr): hash lookups;
 *	 - geom && expr and ST_Intersects(geom, expr) (PostGIS found through the
 *	   extension catalog, whatever its schema): an R-tree box query on the
 *	   bounding box of expr.
 * expr may be a constant, a parameter or any stable expression of them
 * (ST_MakeEnvelope(...), a geometry literal): it is evaluated once per scan.
 *
 * A scan reads the snapshot of its statement (READ COMMITTED) or
 * transaction (REPEATABLE READ, SERIALIZABLE): one generation throughout.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/reloptions.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "parser/parse_func.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "module/geometry.h"
#include "module/snapshot.h"
#include "module/trafficdb.h"

PG_FUNCTION_INFO_V1(trafficdb_locations_handler);
PG_FUNCTION_INFO_V1(trafficdb_locations_validator);

#define UNIX_TO_PG_US ((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

/* The columns a locations table may have, recognised by name. */
typedef enum LocColumn
{
	COL_LOCATION_ID,
	COL_GEOM,
	COL_ROAD_CLASS,
	COL_NAME,
	COL_LENGTH_M,
	COL_SPEED_LIMIT,
	COL_ONEWAY,
	COL_SPEED,
	COL_FREE_FLOW,
	COL_CONGESTION,
	COL_CONFIDENCE,
	COL_INCIDENT,
	COL_UPDATED_AT,
	COL_GENERATION,
	NUM_LOC_COLUMNS
} LocColumn;

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
};

/* What a scan pushes down: at most one key filter and one box filter. */
typedef enum PushKind
{
	PUSH_KEY = 1,				/* location_id = expr */
	PUSH_KEYS = 2,				/* location_id = ANY(expr) */
	PUSH_BOX = 3				/* geom && expr / ST_Intersects(geom, expr) */
} PushKind;

/* fdw_private of the plan, by position. */
enum FdwPrivateIndex
{
	FdwPrivateColumns,			/* integer list: LocColumn of each attribute (-1 = unknown) */
	FdwPrivateKinds,			/* integer list: PushKind of each fdw_exprs entry */
	FdwPrivateDescriptions		/* string list: for EXPLAIN */
};

typedef struct LocScanState
{
	int		   *colmap;			/* per attribute: LocColumn or -1 */
	int			natts;
	List	   *kinds;
	List	   *expr_states;
	List	   *descriptions;
	bool		need_geom;
	const TdbSnapshot *snap;
	uint64	   *cand;			/* candidate record indexes, or NULL for all */
	uint64		ncand;
	uint64		next;
	uint64		examined;
	double	   *xy;
	uint32		xy_cap;
} LocScanState;

/* ---- PostGIS recognition ---------------------------------------------------------- */

static bool
is_geometry_overlap_op(Oid opno)
{
	HeapTuple	tup;
	Form_pg_operator op;
	bool		ok;
	Oid			geom = tdb_geometry_oid();

	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	if (!HeapTupleIsValid(tup))
		return false;
	op = (Form_pg_operator) GETSTRUCT(tup);
	ok = strcmp(NameStr(op->oprname), "&&") == 0 && op->oprleft == geom && op->oprright == geom &&
		op->oprnamespace == tdb_extension_schema("postgis");
	ReleaseSysCache(tup);
	return ok;
}

static bool
is_st_intersects(Oid funcid)
{
	char	   *name = get_func_name(funcid);

	return name != NULL && strcmp(name, "st_intersects") == 0 &&
		get_func_namespace(funcid) == tdb_extension_schema("postgis");
}

/* Equality of a bigint with any integer type, either way round. */
static bool
is_int8_equality(Oid opno)
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

/* An integer Datum of type typid as int64. */
static int64
datum_to_int64(Datum d, Oid typid)
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

/* An expression we can evaluate once per scan: no vars, nothing volatile. */
static bool
is_scan_constant(Expr *e)
{
	return !contain_var_clause((Node *) e) && !contain_volatile_functions((Node *) e);
}

static int
column_of(Var *v, Index relid, const int *colmap)
{
	if (!IsA(v, Var) || v->varno != (int) relid || v->varlevelsup != 0 || v->varattno <= 0)
		return -1;
	return colmap[v->varattno - 1];
}

/*
 * Whether clause can narrow the scan; if so, the expression to evaluate and
 * its kind.
 */
static bool
classify_clause(Expr *clause, Index relid, const int *colmap, Expr **arg, PushKind *kind)
{
	if (IsA(clause, OpExpr))
	{
		OpExpr	   *op = (OpExpr *) clause;
		Expr	   *l,
				   *r;

		if (list_length(op->args) != 2)
			return false;
		l = linitial(op->args);
		r = lsecond(op->args);
		if (!IsA(l, Var) && IsA(r, Var))
		{
			Expr	   *t = l;

			l = r;
			r = t;
		}
		if (!IsA(l, Var) || !is_scan_constant(r))
			return false;
		if (column_of((Var *) l, relid, colmap) == COL_LOCATION_ID && is_int8_equality(op->opno))
		{
			*arg = r;
			*kind = PUSH_KEY;
			return true;
		}
		if (column_of((Var *) l, relid, colmap) == COL_GEOM && is_geometry_overlap_op(op->opno))
		{
			*arg = r;
			*kind = PUSH_BOX;
			return true;
		}
		return false;
	}
	if (IsA(clause, ScalarArrayOpExpr))
	{
		ScalarArrayOpExpr *sa = (ScalarArrayOpExpr *) clause;
		Expr	   *l = linitial(sa->args);
		Expr	   *r = lsecond(sa->args);

		if (sa->useOr && is_int8_equality(sa->opno) && IsA(l, Var) &&
			column_of((Var *) l, relid, colmap) == COL_LOCATION_ID && is_scan_constant(r))
		{
			*arg = r;
			*kind = PUSH_KEYS;
			return true;
		}
		return false;
	}
	if (IsA(clause, FuncExpr) && is_st_intersects(((FuncExpr *) clause)->funcid) &&
		list_length(((FuncExpr *) clause)->args) == 2)
	{
		Expr	   *l = linitial(((FuncExpr *) clause)->args);
		Expr	   *r = lsecond(((FuncExpr *) clause)->args);

		if (!IsA(l, Var))
		{
			Expr	   *t = l;

			l = r;
			r = t;
		}
		if (IsA(l, Var) && column_of((Var *) l, relid, colmap) == COL_GEOM && is_scan_constant(r))
		{
			*arg = r;
			*kind = PUSH_BOX;
			return true;
		}
	}
	return false;
}

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
							 "speed_kmh, free_flow_kmh, congestion, confidence, incident, updated_at, generation.")));
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
	List	   *push_exprs;
	List	   *push_kinds;
	double		count;			/* locations in the published map, or a guess */
} LocPlanInfo;

static void
locGetForeignRelSize(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	LocPlanInfo *info = palloc0(sizeof(LocPlanInfo));
	Relation	rel = table_open(foreigntableid, AccessShareLock);
	ListCell   *lc;
	double		rows;

	info->colmap = build_colmap(rel, &info->natts);
	table_close(rel, AccessShareLock);

	/* the size of what is published now; planning must not fail without it */
	info->count = 10000;
	PG_TRY();
	{
		info->count = (double) tdb_backend_snapshot()->map->count;
	}
	PG_CATCH();
	{
		FlushErrorState();
	}
	PG_END_TRY();

	foreach(lc, baserel->baserestrictinfo)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		Expr	   *arg;
		PushKind	kind;

		if (!classify_clause(ri->clause, baserel->relid, info->colmap, &arg, &kind))
			continue;
		/* a key filter beats a box filter: keep the first of those, else the first box */
		if (kind == PUSH_KEY || kind == PUSH_KEYS)
		{
			info->push_exprs = list_make1(arg);
			info->push_kinds = list_make1_int(kind);
			break;
		}
		if (info->push_exprs == NIL)
		{
			info->push_exprs = list_make1(arg);
			info->push_kinds = list_make1_int(kind);
		}
	}
	baserel->fdw_private = info;

	/* keys give at most one row each; otherwise PostgreSQL's own estimate */
	rows = info->count * clauselist_selectivity(root, baserel->baserestrictinfo, 0, JOIN_INNER, NULL);
	if (info->push_kinds != NIL && linitial_int(info->push_kinds) == PUSH_KEY)
		rows = 1;
	else if (info->push_kinds != NIL && linitial_int(info->push_kinds) == PUSH_KEYS)
	{
		Expr	   *arr = linitial(info->push_exprs);

		rows = 10;
		if (IsA(arr, Const) && !((Const *) arr)->constisnull)
			rows = ArrayGetNItems(ARR_NDIM(DatumGetArrayTypeP(((Const *) arr)->constvalue)),
								  ARR_DIMS(DatumGetArrayTypeP(((Const *) arr)->constvalue)));
	}
	baserel->rows = clamp_row_est(rows);
}

static void
locGetForeignPaths(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	LocPlanInfo *info = baserel->fdw_private;
	Cost		startup = 1;
	Cost		total;

	(void) foreigntableid;
	/* reading shared memory: about a hash probe per key, a node visit per box candidate */
	if (info->push_exprs == NIL)
		total = startup + info->count * 0.005;
	else
		total = startup + baserel->rows * 0.002;
	add_path(baserel, (Path *) create_foreignscan_path(root, baserel, NULL, baserel->rows,
													   startup, total, NIL, NULL, NULL, NIL));
}

static ForeignScan *
locGetForeignPlan(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid,
				  ForeignPath *best_path, List *tlist, List *scan_clauses, Plan *outer_plan)
{
	LocPlanInfo *info = baserel->fdw_private;
	List	   *cols = NIL;
	List	   *descs = NIL;
	ListCell   *lc;

	(void) root;
	(void) best_path;
	for (int a = 0; a < info->natts; a++)
		cols = lappend_int(cols, info->colmap[a]);
	foreach(lc, info->push_exprs)
	{
		int			kind = list_nth_int(info->push_kinds, foreach_current_index(lc));
		char	   *arg = deparse_expression(lfirst(lc),
											 deparse_context_for("locations", foreigntableid),
											 false, false);

		descs = lappend(descs, makeString(psprintf(kind == PUSH_KEY ? "location_id = %s" :
												   kind == PUSH_KEYS ? "location_id = ANY (%s)" :
												   "geom && box2d(%s)", arg)));
	}

	/* every clause is rechecked: pushdown only narrows the candidates */
	scan_clauses = extract_actual_clauses(scan_clauses, false);
	return make_foreignscan(tlist, scan_clauses, baserel->relid, info->push_exprs,
							list_make3(cols, info->push_kinds, descs), NIL, NIL, outer_plan);
}

/* ---- execution ------------------------------------------------------------------- */

static void
locBeginForeignScan(ForeignScanState *node, int eflags)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	LocScanState *st = palloc0(sizeof(LocScanState));
	List	   *cols = list_nth(plan->fdw_private, FdwPrivateColumns);
	ListCell   *lc;

	st->natts = list_length(cols);
	st->colmap = palloc(sizeof(int) * Max(st->natts, 1));
	foreach(lc, cols)
	{
		st->colmap[foreach_current_index(lc)] = lfirst_int(lc);
		if (lfirst_int(lc) == COL_GEOM)
			st->need_geom = true;
	}
	st->kinds = list_nth(plan->fdw_private, FdwPrivateKinds);
	st->descriptions = list_nth(plan->fdw_private, FdwPrivateDescriptions);
	st->expr_states = ExecInitExprList(plan->fdw_exprs, (PlanState *) node);
	node->fdw_state = st;
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	if (st->need_geom)
		tdb_geometry_oid();
}

typedef struct Collect
{
	uint64	   *items;
	uint64		n;
	uint64		cap;
} Collect;

static int
collect_entry(uint64_t entry, void *arg)
{
	Collect    *c = arg;

	if (c->n == c->cap)
	{
		c->cap = c->cap ? c->cap * 2 : 256;
		c->items = c->items ? repalloc_huge(c->items, c->cap * sizeof(uint64))
			: palloc_extended(c->cap * sizeof(uint64), MCXT_ALLOC_HUGE);
	}
	c->items[c->n++] = entry;
	return 0;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64		x = *(const uint64 *) a,
				y = *(const uint64 *) b;

	return (x > y) - (x < y);
}

/* The bounding box of a geometry Datum, via PostGIS's own box2d(). false: NULL or empty. */
static bool
geometry_box(Datum geom, TdbBox *box)
{
	static Oid	box2d_fn = InvalidOid;
	Datum		b;
	char	   *text;
	Oid			out;
	bool		isvarlena;
	LOCAL_FCINFO(fcinfo, 1);

	if (!OidIsValid(box2d_fn))
	{
		Oid			argtypes[1] = {tdb_geometry_oid()};

		box2d_fn = LookupFuncName(list_make2(makeString(get_namespace_name(tdb_extension_schema("postgis"))),
											 makeString("box2d")), 1, argtypes, false);
	}
	InitFunctionCallInfoData(*fcinfo, NULL, 1, InvalidOid, NULL, NULL);
	{
		FmgrInfo	flinfo;

		fmgr_info(box2d_fn, &flinfo);
		fcinfo->flinfo = &flinfo;
		fcinfo->args[0].value = geom;
		fcinfo->args[0].isnull = false;
		b = FunctionCallInvoke(fcinfo);
		if (fcinfo->isnull)
			return false;
		getTypeOutputInfo(get_func_rettype(box2d_fn), &out, &isvarlena);
		text = OidOutputFunctionCall(out, b);
	}
	if (sscanf(text, "BOX(%lf %lf,%lf %lf)", &box->xmin, &box->ymin, &box->xmax, &box->ymax) != 4)
		return false;

	/*
	 * PostGIS's && compares float boxes rounded outward, both sides: a row
	 * whose exact box misses the query box by less than a float step still
	 * overlaps.  Round the query box the same way, so the candidates are
	 * exactly PostGIS's (the map's leaf boxes are rounded like PostGIS's).
	 */
	{
		TdbBoxF		f = tdb_boxf_from_boxd(box);

		box->xmin = f.xmin;
		box->ymin = f.ymin;
		box->xmax = f.xmax;
		box->ymax = f.ymax;
	}
	return true;
}

/* Evaluate the pushed-down expressions and collect the candidates. */
static void
loc_find_candidates(ForeignScanState *node, LocScanState *st)
{
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	ListCell   *lc;
	Collect		c = {0};

	st->cand = NULL;
	st->ncand = 0;
	st->next = 0;
	foreach(lc, st->expr_states)
	{
		ExprState  *es = lfirst(lc);
		int			kind = list_nth_int(st->kinds, foreach_current_index(lc));
		bool		isnull;
		Datum		v = ExecEvalExpr(es, econtext, &isnull);

		if (kind == PUSH_KEY)
		{
			int64		i = isnull ? -1 :
				tdb_map_find(st->snap->map, (uint64) datum_to_int64(v, exprType((Node *) es->expr)));

			if (i >= 0)
				collect_entry((uint64) i, &c);
		}
		else if (kind == PUSH_KEYS)
		{
			ArrayType  *arr;
			Datum	   *elems;
			bool	   *nulls;
			int			n;

			if (!isnull)
			{
				Oid			elemtype;
				int16		elemlen;
				bool		elembyval;
				char		elemalign;

				arr = DatumGetArrayTypeP(v);
				elemtype = ARR_ELEMTYPE(arr);
				get_typlenbyvalalign(elemtype, &elemlen, &elembyval, &elemalign);
				deconstruct_array(arr, elemtype, elemlen, elembyval, elemalign, &elems, &nulls, &n);
				for (int e = 0; e < n; e++)
				{
					int64		i;

					if (nulls[e])
						continue;
					i = tdb_map_find(st->snap->map, (uint64) datum_to_int64(elems[e], elemtype));
					if (i >= 0)
						collect_entry((uint64) i, &c);
				}
				/* the same id twice in the list must give one row, as on a heap */
				qsort(c.items, c.n, sizeof(uint64), cmp_u64);
				{
					uint64		w = 0;

					for (uint64 k = 0; k < c.n; k++)
						if (w == 0 || c.items[w - 1] != c.items[k])
							c.items[w++] = c.items[k];
					c.n = w;
				}
			}
		}
		else
		{
			TdbBox		box;

			if (!isnull && geometry_box(v, &box) && !isnan(box.xmin) && !isnan(box.ymin) &&
				!isnan(box.xmax) && !isnan(box.ymax))
				tdb_map_query_box(st->snap->map, &box, collect_entry, &c);
		}
		st->cand = c.items ? c.items : palloc(sizeof(uint64));
		st->ncand = c.n;
		return;
	}
	/* nothing pushed down: every record */
	st->cand = NULL;
	st->ncand = st->snap->map->count;
}

static TupleTableSlot *
locIterateForeignScan(ForeignScanState *node)
{
	LocScanState *st = node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
	const TdbSnapshot *snap;
	uint64		i;
	const TdbLocation *rec;
	const TdbTraffic *t;

	if (st->snap == NULL)
	{
		st->snap = tdb_backend_snapshot();
		loc_find_candidates(node, st);
	}
	snap = st->snap;
	ExecClearTuple(slot);
	if (st->next >= st->ncand)
		return slot;
	i = st->cand ? st->cand[st->next] : st->next;
	st->next++;
	st->examined++;
	rec = &snap->map->records[i];
	t = &snap->entries[i];

	for (int a = 0; a < st->natts; a++)
	{
		Datum	   *v = &slot->tts_values[a];
		bool	   *n = &slot->tts_isnull[a];

		*n = false;
		switch (st->colmap[a])
		{
			case COL_LOCATION_ID:
				*v = Int64GetDatum((int64) rec->id);
				break;
			case COL_GEOM:
				if (st->xy_cap < rec->npoints)
				{
					st->xy_cap = rec->npoints;
					st->xy = st->xy ? repalloc(st->xy, sizeof(double) * 2 * st->xy_cap)
						: MemoryContextAlloc(node->ss.ps.state->es_query_cxt, sizeof(double) * 2 * st->xy_cap);
				}
				tdb_map_shape(snap->map, i, st->xy);
				*v = tdb_linestring_datum(st->xy, rec->npoints);
				break;
			case COL_ROAD_CLASS:
				{
					const char *s = tdb_map_class(snap->map, i);

					*n = s[0] == '\0';
					*v = *n ? (Datum) 0 : CStringGetTextDatum(s);
				}
				break;
			case COL_NAME:
				{
					const char *s = tdb_map_name(snap->map, i);

					*n = s[0] == '\0';
					*v = *n ? (Datum) 0 : CStringGetTextDatum(s);
				}
				break;
			case COL_LENGTH_M:
				*v = Float8GetDatum(rec->length_m);
				break;
			case COL_SPEED_LIMIT:
				*n = rec->speed_limit_kmh == 0;
				*v = Int16GetDatum((int16) Min(rec->speed_limit_kmh, PG_INT16_MAX));
				break;
			case COL_ONEWAY:
				*v = BoolGetDatum((rec->flags & TDB_LOC_ONEWAY) != 0);
				break;
			case COL_SPEED:
				*n = isnan(t->speed_kmh);
				*v = Float4GetDatum(t->speed_kmh);
				break;
			case COL_FREE_FLOW:
				*n = isnan(t->free_flow_kmh);
				*v = Float4GetDatum(t->free_flow_kmh);
				break;
			case COL_CONGESTION:
				*n = t->congestion == TDB_CONGESTION_UNKNOWN;
				*v = Int16GetDatum(t->congestion);
				break;
			case COL_CONFIDENCE:
				*n = t->updated_at_us == 0;
				*v = Int16GetDatum(t->confidence);
				break;
			case COL_INCIDENT:
				{
					uint32		len;
					const char *inc = tdb_traffic_incident(snap->traffic, t, &len);

					*n = inc == NULL;
					*v = inc ? PointerGetDatum(cstring_to_text_with_len(inc, (int) len)) : (Datum) 0;
				}
				break;
			case COL_UPDATED_AT:
				*n = t->updated_at_us == 0;
				*v = TimestampTzGetDatum(t->updated_at_us - UNIX_TO_PG_US);
				break;
			case COL_GENERATION:
				*v = Int64GetDatum((int64) snap->generation);
				break;
			default:
				*n = true;
				*v = (Datum) 0;
		}
	}
	return ExecStoreVirtualTuple(slot);
}

static void
locReScanForeignScan(ForeignScanState *node)
{
	LocScanState *st = node->fdw_state;

	/* parameters may have changed: find the candidates again, same snapshot */
	if (st->snap != NULL)
		loc_find_candidates(node, st);
}

static void
locEndForeignScan(ForeignScanState *node)
{
	/* the snapshot belongs to the statement or transaction, not to the scan */
	(void) node;
}

static void
locExplainForeignScan(ForeignScanState *node, ExplainState *es)
{
	LocScanState *st = node->fdw_state;
	ListCell   *lc;

	if (st->descriptions == NIL)
		ExplainPropertyText("TrafficDB Pushdown", "none (full scan)", es);
	foreach(lc, st->descriptions)
		ExplainPropertyText("TrafficDB Pushdown", strVal(lfirst(lc)), es);
	if (es->analyze)
	{
		ExplainPropertyInteger("Locations Examined", NULL, (int64) st->examined, es);
		if (st->snap)
			ExplainPropertyInteger("Generation", NULL, (int64) st->snap->generation, es);
	}
}

Datum
trafficdb_locations_handler(PG_FUNCTION_ARGS)
{
	FdwRoutine *r = makeNode(FdwRoutine);

	r->GetForeignRelSize = locGetForeignRelSize;
	r->GetForeignPaths = locGetForeignPaths;
	r->GetForeignPlan = locGetForeignPlan;
	r->BeginForeignScan = locBeginForeignScan;
	r->IterateForeignScan = locIterateForeignScan;
	r->ReScanForeignScan = locReScanForeignScan;
	r->EndForeignScan = locEndForeignScan;
	r->ExplainForeignScan = locExplainForeignScan;
	PG_RETURN_POINTER(r);
}

/* No options yet: refuse any, naming it. */
Datum
trafficdb_locations_validator(PG_FUNCTION_ARGS)
{
	List	   *options = untransformRelOptions(PG_GETARG_DATUM(0));

	if (options != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("trafficdb_locations takes no options; \"%s\" given",
						((DefElem *) linitial(options))->defname)));
	PG_RETURN_VOID();
}
