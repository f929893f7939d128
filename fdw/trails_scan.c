/*-------------------------------------------------------------------------
 *
 * trails_scan.c
 *	  The trail foreign data wrapper's scan: which file columns feed which
 *	  table columns, the pushed clauses' values as a pruning query
 *	  (TdbTrailQuery), the file opened and its events as rows, page by page
 *	  as rows are asked for; rescans.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
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
#include "lib/qunique.h"
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

#include "fdw/pushdown.h"
#include "fdw/timebound.h"
#include "fdw/trails_internal.h"
#include "module/geometry.h"
#include "module/trafficdb.h"
#include "geo.h"
#include "trail/cache.h"
#include "trail/pager.h"
#include "trail/trail.h"

/*
 * Query boxes are widened by this much (degrees) before pruning: PostGIS's
 * && compares float boxes rounded outward, so a point a float step outside
 * the exact box still overlaps it.  PostgreSQL rechecks every row.
 */
#define BOX_MARGIN_DEG	1e-4

/* ---- scanning -------------------------------------------------------------------- */


void
trlBeginForeignScan(ForeignScanState *node, int eflags)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	TrlScan    *st = palloc0(sizeof(TrlScan));
	ListCell   *lc;

	node->fdw_state = st;
	st->agg = plan->scan.scanrelid == 0;	/* aggregates from the footer (trlGetForeignPlan) */
	if (st->agg)
	{
		/* no scan relation: the foreign table is among the plan's relids */
		Oid			relid = linitial_oid(list_nth(plan->fdw_private, AGGP_TABLE));
		EState	   *estate = node->ss.ps.state;

		for (int x = -1; (x = bms_next_member(plan->fs_relids, x)) >= 0;)
			if (exec_rt_fetch(x, estate)->relid == relid)
			{
				st->rel = ExecOpenScanRelation(estate, x, eflags);
				break;
			}
		if (st->rel == NULL)
			elog(ERROR, "trail aggregate scan: foreign table %u is not in the plan's range table", relid);
		st->agg_ops = list_nth(plan->fdw_private, AGGP_OPS);
		st->agg_atts = list_nth(plan->fdw_private, AGGP_ATTS);
		st->grouped = intVal(list_nth(plan->fdw_private, AGGP_GROUPED)) != 0;
	}
	else
		st->rel = node->ss.ss_currentRelation;
	st->tupdesc = RelationGetDescr(st->rel);
	st->kinds = list_nth(plan->fdw_private, TRLP_KINDS);
	/* a base scan's rectangle it checks itself, or NIL */
	if (!st->agg && list_nth(plan->fdw_private, TRLP_EXACT) != NIL)
	{
		List	   *b = list_nth(plan->fdw_private, TRLP_EXACT);

		st->exact = true;
		for (int k = 0; k < 4; k++)
			st->exact_box[k] = strtod(strVal(list_nth(b, k)), NULL);
	}
	foreach(lc, plan->fdw_exprs)
		st->arg_states = lappend(st->arg_states, ExecInitExpr(lfirst(lc), (PlanState *) node));
	/* the distance clause it settles itself (its expression is the last of fdw_exprs) */
	if (!st->agg && list_nth(plan->fdw_private, TRLP_BAND) != NIL)
	{
		List	   *b = list_nth(plan->fdw_private, TRLP_BAND);

		st->band = true;
		st->band_lon = strtod(strVal(linitial(b)), NULL);
		st->band_lat = strtod(strVal(lsecond(b)), NULL);
		st->band_d = strtod(strVal(lthird(b)), NULL);
		st->band_spheroid = boolVal(lfourth(b));
		st->band_state = llast(st->arg_states);
	}
	/* where among fdw_exprs the id clause the scan prunes with is (-1: none) */
	if (!st->agg && intVal(list_nth(plan->fdw_private, TRLP_ID_ARG)) >= 0)
		st->id_state = list_nth(st->arg_states, intVal(list_nth(plan->fdw_private, TRLP_ID_ARG)));
	st->scan_cxt = AllocSetContextCreate(node->ss.ps.state->es_query_cxt, "trail scan",
										 ALLOCSET_SMALL_SIZES);
}

/*
 * Where table column a's values come from in a file of schema sc (SRC_*,
 * or SRC_NONE when the file has no such column), and their type in the
 * file (*t).  The time and geometry columns have no file type.
 */
int
trl_attr_source(const TdbTrailSchema *sc, Form_pg_attribute a, TdbTrailType *t)
{
	const char *name = NameStr(a->attname);

	*t = TDB_TRAIL_INT64;
	if (strcmp(name, sc->id_name) == 0)
	{
		*t = sc->id_type;
		return SRC_ID;
	}
	if (strcmp(name, sc->time_name) == 0)
		return SRC_TIME;
	if (a->atttypid == tdb_geometry_oid())
		return SRC_GEOM;
	*t = TDB_TRAIL_FLOAT64;
	if (strcmp(name, sc->lon_name) == 0)
		return SRC_LON;
	if (strcmp(name, sc->lat_name) == 0)
		return SRC_LAT;
	for (int c = 0; c < sc->ncolumns; c++)
		if (strcmp(name, sc->columns[c].name) == 0)
		{
			*t = sc->columns[c].type;
			return c;
		}
	return SRC_NONE;
}

/*
 * The declared types a file type is made into directly (the others go
 * through the type's input function, from the value as text).
 */
bool
trl_direct_type(TdbTrailType t, Oid typid)
{
	switch (t)
	{
		case TDB_TRAIL_INT64:
		case TDB_TRAIL_BOOL:
			return typid == INT8OID || typid == FLOAT8OID || typid == BOOLOID;
		case TDB_TRAIL_FLOAT64:
			return typid == FLOAT8OID;
		case TDB_TRAIL_STRING:
			return typid == TEXTOID;
	}
	return false;
}

/* The attributes a plan reads (fdw_private's TRLP_USED) as a Bitmapset. */
Bitmapset *
trl_plan_used_attrs(ForeignScan *plan)
{
	Bitmapset  *used = NULL;
	ListCell   *lc;

	foreach(lc, (List *) list_nth(plan->fdw_private, TRLP_USED))
		used = bms_add_member(used, lfirst_int(lc));
	return used;
}

/* Map the table's columns to the file's; errors name what does not fit. */
static void
map_columns(ForeignScanState *node, TrlScan *st)
{
	Relation	rel = st->rel;
	ForeignTable *ft = GetForeignTable(RelationGetRelid(rel));
	const TdbTrailSchema *sc = &tdb_trail_footer(st->h->reader)->schema;
	const char *idname = ID_COLUMN(ft);
	const char *timename = TIME_COLUMN(ft);
	int			natts = st->tupdesc->natts;
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	Bitmapset  *used = trl_plan_used_attrs(plan);
	bool		whole = bms_is_member(0 - FirstLowInvalidHeapAttributeNumber, used);

	/* the id and time columns the planner pushed must be the file's */
	if (strcmp(idname, sc->id_name) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_COLUMN_NAME),
				 errmsg("trail file \"%s\" names its trail id \"%s\", foreign table \"%s\" expects \"%s\"",
						st->h->url, sc->id_name, RelationGetRelationName(rel), idname),
				 errhint("ALTER FOREIGN TABLE %s OPTIONS (ADD id_column %s), or IMPORT FOREIGN SCHEMA.",
						 quote_identifier(RelationGetRelationName(rel)), quote_literal_cstr(sc->id_name))));
	if (strcmp(timename, sc->time_name) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_COLUMN_NAME),
				 errmsg("trail file \"%s\" names its time \"%s\", foreign table \"%s\" expects \"%s\"",
						st->h->url, sc->time_name, RelationGetRelationName(rel), timename),
				 errhint("ALTER FOREIGN TABLE %s OPTIONS (ADD time_column %s), or IMPORT FOREIGN SCHEMA.",
						 quote_identifier(RelationGetRelationName(rel)), quote_literal_cstr(sc->time_name))));

	/*
	 * Only the columns the query reads (its target list and every clause,
	 * as the planner listed them) are formed, and a version-2 file fetches
	 * only their chunks: the others are left out of the scan.
	 */
	st->src = MemoryContextAlloc(node->ss.ps.state->es_query_cxt, sizeof(int) * natts);
	st->inputs = MemoryContextAllocZero(node->ss.ps.state->es_query_cxt, sizeof(FmgrInfo) * natts);
	st->ioparams = MemoryContextAllocZero(node->ss.ps.state->es_query_cxt, sizeof(Oid) * natts);
	st->text_src = MemoryContextAllocZero(node->ss.ps.state->es_query_cxt, sizeof(char *) * natts);
	st->text_buf = MemoryContextAllocZero(node->ss.ps.state->es_query_cxt, sizeof(text *) * natts);
	st->point_buf = MemoryContextAlloc(node->ss.ps.state->es_query_cxt, TDB_POINT_DATUM_SIZE);
	st->text_cap = MemoryContextAllocZero(node->ss.ps.state->es_query_cxt, sizeof(int) * natts);
	st->skip_columns = sc->ncolumns >= 64 ? ~UINT64CONST(0) : (UINT64CONST(1) << sc->ncolumns) - 1;
	st->skip_position = true;
	for (int i = 0; i < natts; i++)
	{
		Form_pg_attribute a = TupleDescAttr(st->tupdesc, i);
		const char *name = NameStr(a->attname);
		TdbTrailType t;
		int			src;

		st->src[i] = SRC_NONE;
		if (a->attisdropped)
			continue;
		src = trl_attr_source(sc, a, &t);
		if (src == SRC_TIME && a->atttypid != TIMESTAMPTZOID && a->atttypid != TIMESTAMPOID)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
					 errmsg("column \"%s\" of foreign table \"%s\" holds the trail's times: it must be timestamptz, not %s",
							name, RelationGetRelationName(rel), format_type_be(a->atttypid))));
		if (src == SRC_NONE)
		{
			StringInfoData cols;

			initStringInfo(&cols);
			appendStringInfo(&cols, "%s, %s, geom (or any geometry column), %s, %s",
							 sc->id_name, sc->time_name, sc->lon_name, sc->lat_name);
			for (int c = 0; c < sc->ncolumns; c++)
				appendStringInfo(&cols, ", %s", sc->columns[c].name);
			ereport(ERROR,
					(errcode(ERRCODE_FDW_COLUMN_NAME_NOT_FOUND),
					 errmsg("column \"%s\" of foreign table \"%s\" is not in trail file \"%s\"",
							name, RelationGetRelationName(rel), st->h->url),
					 errdetail("The file has: %s.", cols.data)));
		}
		/* types made directly; any other through the type's input function */
		if (src != SRC_TIME && src != SRC_GEOM && !trl_direct_type(t, a->atttypid))
		{
			Oid			infunc;

			getTypeInputInfo(a->atttypid, &infunc, &st->ioparams[i]);
			fmgr_info_cxt(infunc, &st->inputs[i], node->ss.ps.state->es_query_cxt);
		}
		if (whole || bms_is_member(a->attnum - FirstLowInvalidHeapAttributeNumber, used))
		{
			st->src[i] = src;
			if (src >= 0)
				st->skip_columns &= ~(UINT64CONST(1) << src);
			else if (src == SRC_GEOM || src == SRC_LON || src == SRC_LAT)
				st->skip_position = false;
		}
	}
	if (whole)
	{
		st->skip_columns = 0;
		st->skip_position = false;
	}
}

/*
 * String s as attribute att's text value.  The strings of a row are the
 * file's (its lexicon's and trail ids'), the same pointer for the same
 * string while the scan runs, and a trail's constant columns repeat theirs
 * row after row: the value made for the row before is returned again, and
 * a new string is copied into the attribute's buffer (the value lives, as
 * one made in the per-tuple context would, until the next row is asked for).
 */
static inline Datum
trl_text_datum(TrlScan *st, int att, const char *s)
{
	size_t		len;

	if (s == NULL)
		s = "";
	if (st->text_src[att] == s)
		return PointerGetDatum(st->text_buf[att]);
	len = strlen(s);
	if (len + VARHDRSZ > (size_t) st->text_cap[att])
	{
		int			cap = (int) Max(len + VARHDRSZ, 64);

		if (len > MaxAllocSize - VARHDRSZ)
			return PointerGetDatum(cstring_to_text(s));
		if (st->text_buf[att] != NULL)
			pfree(st->text_buf[att]);
		/* in the statement's context, as the arrays */
		st->text_buf[att] = MemoryContextAlloc(GetMemoryChunkContext(st->text_src), cap);
		st->text_cap[att] = cap;
	}
	SET_VARSIZE(st->text_buf[att], len + VARHDRSZ);
	memcpy(VARDATA(st->text_buf[att]), s, len);
	st->text_src[att] = s;
	return PointerGetDatum(st->text_buf[att]);
}

Datum
trl_value_datum(TrlScan *st, int att, TdbTrailType t, int64 i, double f, const char *s)
{
	Form_pg_attribute a = TupleDescAttr(st->tupdesc, att);
	char		buf[64];

	if (st->inputs[att].fn_oid == InvalidOid)
	{
		if (t == TDB_TRAIL_INT64 || t == TDB_TRAIL_BOOL)
			return a->atttypid == INT8OID ? Int64GetDatum(i) :
				a->atttypid == BOOLOID ? BoolGetDatum(i != 0) : Float8GetDatum((double) i);
		if (t == TDB_TRAIL_FLOAT64)
			return Float8GetDatum(f);
		return PointerGetDatum(cstring_to_text(s));
	}
	if (t == TDB_TRAIL_INT64)
		snprintf(buf, sizeof(buf), INT64_FORMAT, i);
	else if (t == TDB_TRAIL_BOOL)
		/* a number type takes 1 and 0, any other true and false */
		snprintf(buf, sizeof(buf), "%s", TypeCategory(a->atttypid) == TYPCATEGORY_NUMERIC ?
				 (i ? "1" : "0") : (i ? "true" : "false"));
	else if (t == TDB_TRAIL_FLOAT64)
		snprintf(buf, sizeof(buf), "%.17g", f);
	return InputFunctionCall(&st->inputs[att], t == TDB_TRAIL_STRING ? (char *) s : buf,
							 st->ioparams[att], a->atttypmod);
}

/*
 * Is s an int64 exactly as INT64_FORMAT writes it (no sign but a minus, no
 * leading zero, no space)?  Its value in *v.
 */
static bool
trl_canonical_int64(const char *s, int64 *v)
{
	char		buf[32];
	char	   *end;
	long long	x;

	if (*s == '\0' || strlen(s) >= sizeof(buf) || !(*s == '-' || (*s >= '0' && *s <= '9')))
		return false;
	errno = 0;
	x = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return false;
	snprintf(buf, sizeof(buf), INT64_FORMAT, (int64) x);
	if (strcmp(buf, s) != 0)
		return false;
	*v = (int64) x;
	return true;
}

/*
 * The trail ids of elems[0 .. n-1] of type elemtype, NULLs left out, as
 * the file's id type has them (palloc'd in the current context): a file of
 * string ids takes text (the caller checks), one of integer ids integers,
 * and a text only when it is an id's decimal exactly, as a text column over
 * integer ids shows each (trl_value_datum; it was read as a pointer).
 */
static void
trl_ids_of(const TdbTrailFooter *f, Datum *elems, bool *nulls, int n, Oid elemtype,
		   const int64 **ids_int, const char *const **ids_str, int *nids)
{
	*nids = 0;
	if (f->schema.id_type == TDB_TRAIL_STRING)
	{
		const char **ids = palloc(sizeof(char *) * (n + 1));

		for (int e = 0; e < n; e++)
			if (!nulls[e])
				ids[(*nids)++] = TextDatumGetCString(elems[e]);
		*ids_str = ids;
		return;
	}
	{
		int64	   *ids = palloc(sizeof(int64) * (n + 1));

		for (int e = 0; e < n; e++)
			if (!nulls[e] && elemtype == TEXTOID)
			{
				int64		id;

				if (trl_canonical_int64(TextDatumGetCString(elems[e]), &id))
					ids[(*nids)++] = id;
			}
			else if (!nulls[e])
				ids[(*nids)++] = elemtype == INT2OID ? DatumGetInt16(elems[e]) :
					elemtype == INT4OID ? DatumGetInt32(elems[e]) : DatumGetInt64(elems[e]);
		*ids_int = ids;
	}
}

static int
trl_int64_cmp(const void *a, const void *b)
{
	int64		x = *(const int64 *) a,
				y = *(const int64 *) b;

	return (x > y) - (x < y);
}

/* Sort the n items of size bytes at base by cmp, keep each once; how many are kept. */
static int
trl_sort_unique(void *base, int n, size_t size, int (*cmp) (const void *, const void *))
{
	qsort(base, n, size, cmp);
	return (int) qunique(base, n, size, cmp);
}

/*
 * A join's lookups of a VALUES list's ids (TRLP_OUTER_IDS): those ids, each
 * once, once per statement, for the first lookup to fetch all their pages
 * at once.
 */
static void
trl_outer_ids(ForeignScanState *node, TrlScan *st)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	List	   *consts = list_nth(plan->fdw_private, TRLP_OUTER_IDS);
	const TdbTrailFooter *f = tdb_trail_footer(st->h->reader);
	MemoryContext old;
	Datum	   *elems;
	bool	   *nulls;
	int			n = list_length(consts),
				i = 0;
	ListCell   *lc;

	st->outer_ids_done = true;
	if (n == 0 || (f->schema.id_type == TDB_TRAIL_STRING && linitial_node(Const, consts)->consttype != TEXTOID))
		return;
	old = MemoryContextSwitchTo(node->ss.ps.state->es_query_cxt);
	elems = palloc(sizeof(Datum) * n);
	nulls = palloc(sizeof(bool) * n);
	foreach(lc, consts)
	{
		elems[i] = lfirst_node(Const, lc)->constvalue;
		nulls[i++] = lfirst_node(Const, lc)->constisnull;
	}
	trl_ids_of(f, elems, nulls, n, linitial_node(Const, consts)->consttype,
			   &st->outer_ids_int, &st->outer_ids_str, &st->outer_nids);
	/* each id once (EXPLAIN counts them) */
	st->outer_nids = st->outer_ids_int != NULL ?
		trl_sort_unique((void *) st->outer_ids_int, st->outer_nids, sizeof(int64), trl_int64_cmp) :
		trl_sort_unique((void *) st->outer_ids_str, st->outer_nids, sizeof(char *), pg_qsort_strcmp);
	MemoryContextSwitchTo(old);
}

/*
 * Evaluate the pushed clauses into st->q (in scan_cxt).  false: they match
 * nothing.
 */
static bool
build_query(ForeignScanState *node, TrlScan *st)
{
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	const TdbTrailFooter *f = tdb_trail_footer(st->h->reader);
	TdbTrailQuery *q = &st->q;
	ListCell   *lk,
			   *la = list_head(st->arg_states);
	int64		from = PG_INT64_MIN + 1,
				to = PG_INT64_MAX;
	double		box[4] = {-1000, -1000, 1000, 1000};
	bool		has_box = false,
				has_ids = false,
				first_id = true;	/* the next id kind is kinds' first */
	MemoryContext old = MemoryContextSwitchTo(st->scan_cxt);

	memset(q, 0, sizeof(*q));
	st->id_exact = false;
	foreach(lk, st->kinds)
	{
		int			kind = lfirst_int(lk);
		ExprState  *es = lfirst(la);
		bool		isnull;
		Datum		v = ExecEvalExpr(es, econtext, &isnull);
		Oid			type = exprType((Node *) es->expr);

		la = lnext(st->arg_states, la);
		if (kind <= TDB_BOUND_EQ)
		{
			if (isnull || !tdb_time_bound_apply(kind, DatumGetTimestampTz(v), &from, &to))
				goto nothing;	/* time op NULL is never true; nor time < -infinity */
			continue;
		}
		if (kind == PUSH_ID || kind == PUSH_IDS)
		{
			Datum	   *elems;
			bool	   *nulls;
			int			n;
			Oid			elemtype;

			if (isnull)
				goto nothing;
			if (kind == PUSH_ID)
			{
				elems = &v;
				nulls = &isnull;
				n = 1;
				elemtype = type;
			}
			else
				elemtype = trl_id_array_elems(v, &elems, &nulls, &n);
			if (has_ids)
				continue;		/* the first id clause prunes; PostgreSQL checks the others */
			/*
			 * A bigint column over a file of string ids (its values made by
			 * int8in: '007' and '7' are both 7): no pruning, PostgreSQL's
			 * check alone (the scan's on the formed row when the planner
			 * left it the clause: id_exact stays false).  It pruned to the
			 * string of the value, or to nothing, and lost rows.
			 */
			if (f->schema.id_type == TDB_TRAIL_STRING && elemtype != TEXTOID)
			{
				first_id = false;
				continue;
			}
			/* the rows are those of the trails with these ids, exactly (reader.c's want[]) */
			st->id_exact = first_id;
			first_id = false;
			has_ids = true;
			trl_ids_of(f, elems, nulls, n, elemtype, &q->ids_int, &q->ids_str, &q->nids);
			if (q->nids == 0)
				goto nothing;
			continue;
		}
		/* the area kinds */
		{
			double		b[4];
			Datum		g = v;

			if (isnull)
				goto nothing;
			if (kind == PUSH_DWITHIN_M)
			{
				/* below: its box with the latitudes its edges reach, not its vertices' */
				b[0] = b[1] = b[2] = b[3] = 0;
			}
			else if (!tdb_geometry_bounds(g, b))
				goto nothing;	/* an empty geometry overlaps nothing */
			if (kind == PUSH_DWITHIN_DEG || kind == PUSH_DWITHIN_M)
			{
				ExprState  *des = lfirst(la);
				bool		dnull;
				Datum		dv = ExecEvalExpr(des, econtext, &dnull);
				double		d;

				la = lnext(st->arg_states, la);
				if (dnull)
					goto nothing;
				d = DatumGetFloat8(dv);
				if (!(d >= 0))
					continue;	/* no pruning: PostGIS says what a bad distance means (d < 0: an error) */
				if (kind == PUSH_DWITHIN_DEG)
				{
					b[0] -= d;
					b[1] -= d;
					b[2] += d;
					b[3] += d;
				}
				else
				{
					/*
					 * A geography: the box of its great-circle edges grown
					 * by circles at its corners, or no pruning when an edge
					 * or a circle reaches the antimeridian or a pole (the
					 * box of its vertices grown by degrees lost the rows of
					 * LINESTRING(179 3, -179 3) and of an edge bulging north)
					 */
					TdbBox		gb;
					int			rc = tdb_geography_box(v, type, &gb);

					if (rc == 0)
						goto nothing;	/* an empty geography is within no distance */
					if (rc < 0 || !tdb_box_grow_metres(&gb, d + TDB_GEOG_TOUCH_M))
						continue;
					b[0] = gb.xmin;
					b[1] = gb.ymin;
					b[2] = gb.xmax;
					b[3] = gb.ymax;
				}
			}
			box[0] = Max(box[0], b[0] - BOX_MARGIN_DEG);
			box[1] = Max(box[1], b[1] - BOX_MARGIN_DEG);
			box[2] = Min(box[2], b[2] + BOX_MARGIN_DEG);
			box[3] = Min(box[3], b[3] + BOX_MARGIN_DEG);
			has_box = true;
		}
	}
	if (from > to || (has_box && (box[0] > box[2] || box[1] > box[3])))
		goto nothing;
	if (from != PG_INT64_MIN + 1 || to != PG_INT64_MAX)
	{
		q->has_time = true;
		q->time_from = from;
		q->time_to = to;
	}
	if (has_box)
	{
		q->has_bbox = true;
		q->xmin = box[0];
		q->ymin = box[1];
		q->xmax = box[2];
		q->ymax = box[3];
	}
	MemoryContextSwitchTo(old);
	return true;
nothing:
	MemoryContextSwitchTo(old);
	return false;
}

/* Open the table's file (once per scan node) and map its columns. */
void
trl_open_file(ForeignScanState *node, TrlScan *st)
{
	MemoryContext old;
	ForeignTable *ft;
	char	   *url;

	if (st->h != NULL)
		return;
	old = MemoryContextSwitchTo(node->ss.ps.state->es_query_cxt);
	ft = GetForeignTable(RelationGetRelid(st->rel));
	url = tdb_fdw_option(ft->options, "url");
	if (url == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("foreign table \"%s\" has no url option", RelationGetRelationName(st->rel))));
	st->h = trail_open(GetForeignServer(ft->serverid), ft, url, node->ss.ps.state->es_query_cxt);
	map_columns(node, st);
	MemoryContextSwitchTo(old);
}


/*
 * The bytes every trail scan's page cache of this backend holds: together
 * they stay within trafficdb.trail_page_cache (any role may set it, and a
 * statement may join any number of trail tables).  A cache gives its bytes
 * back when freed, with its handle at the end of the statement or on error.
 */
static size_t trl_page_cache_pool = 0;

/*
 * Whether the point (lon, lat) is within d metres of (plon, plat), as
 * PostGIS's ST_DWithin on geography says, when the great-circle distance
 * settles it: 1 within, 0 not, -1 too near the circle to tell (PostGIS
 * decides).  The WGS 84 ellipsoid maps onto the sphere of the mean radius R
 * (same latitude and longitude) with every length scaled by a factor
 * between M/R and N/R, its meridional and normal radii of curvature: from
 * a(1 - e^2)/R = 0.99442 (M at the equator) to a/sqrt(1 - e^2)/R = 1.00447
 * (N at the poles).  So the geodesic length s between two points lies
 * within [0.99442, 1.00447] times their great-circle distance on that
 * sphere, which is PostGIS's own when use_spheroid is false.  A margin of
 * 1 % and 1 m covers both and every rounding.
 */
static inline int
trl_band_settles(double lon, double lat, double plon, double plat, double d, bool spheroid)
{
	double		s = tdb_geo_distance_m(lon, lat, plon, plat),
				margin;

	if (!(s >= 0))
		return -1;
	if (s * 1.01 + 1.0 <= d)
		return 1;
	if (s * 0.99 - 1.0 > d)
		return 0;

	/*
	 * Near the circle: the distance PostGIS compares for SRID 4326, on WGS
	 * 84 (GeographicLib's geodesic there, within nanometres; Vincenty's here,
	 * within a tenth of a millimetre) or on its sphere of radius (2a + b) / 3.
	 * A row a centimetre (and a billionth of d) or more from the circle is
	 * settled by it; the others, and nearly antipodal points where Vincenty
	 * does not converge, are PostGIS's.  Asking PostGIS even once costs its
	 * first spheroid lookup in the backend: PROJ and its database, 8-12 ms
	 * (a 3 km circle over an hour of New York Harbor AIS, cold).
	 */
	s = spheroid ? tdb_geo_wgs84_m(lon, lat, plon, plat) : tdb_geo_wgs84_sphere_m(lon, lat, plon, plat);
	if (!(s >= 0))
		return -1;
	margin = 0.01 + d * 1e-9;
	if (s + margin <= d)
		return 1;
	if (s - margin > d)
		return 0;
	return -1;
}

static void trl_form_row(TrlScan *st, TupleTableSlot *slot, const TdbTrailEvent *evp,
						 const TdbTrailSchema *sc);

/* One more row the scan dropped itself (*removed): answer cancel now and then in a long run of them. */
static inline void
trl_dropped(uint64 *removed)
{
	if ((++*removed & 4095) == 0)
		CHECK_FOR_INTERRUPTS();
}

TupleTableSlot *
trlIterateForeignScan(ForeignScanState *node)
{
	TrlScan    *st = node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
	TdbTrailEvent ev;
	TdbTrailError err;
	const TdbTrailSchema *sc;
	int			rc;

	ExecClearTuple(slot);
	if (!st->started)
	{
		trl_open_file(node, st);
		st->started = true;
		memset(st->text_src, 0, sizeof(char *) * st->tupdesc->natts);
		st->nscans++;
		st->empty = !build_query(node, st);
		st->q.skip_columns = st->skip_columns;
		st->q.skip_position = st->skip_position;
		st->q.values_in_page = true;	/* src[] names only columns not skipped */
		st->last_nids = st->q.nids;
		st->last_time = st->q.has_time;
		st->last_box = st->q.has_bbox;
		if (st->empty)
			return slot;

		/*
		 * Lookups (a parameterized scan, or any scan run again): the pages
		 * they decode are kept for the next ones, so a page several trails
		 * share is fetched and decoded once per statement.
		 */
		if (st->h->page_cache == NULL && tdb_trail_page_cache_kb > 0 &&
			(intVal(list_nth(((ForeignScan *) node->ss.ps.plan)->fdw_private, TRLP_LOOKUPS)) != 0 || st->nscans > 1))
		{
			st->h->page_cache = tdb_trail_page_cache_create((size_t) tdb_trail_page_cache_kb * 1024);
			if (st->h->page_cache == NULL)
				ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
			/* the setting bounds the backend: every scan's cache draws on one pool */
			tdb_trail_page_cache_share(st->h->page_cache, &trl_page_cache_pool);
		}
		st->q.page_cache = st->h->page_cache;
		/* the planner's estimate of the outer rows (trlGetForeignPlan) */
		st->q.lookups_expected = (uint32) Max(0, intVal(list_nth(((ForeignScan *) node->ss.ps.plan)->fdw_private, TRLP_LOOKUPS)));
		st->q.may_stop_early = intVal(list_nth(((ForeignScan *) node->ss.ps.plan)->fdw_private, TRLP_MAY_STOP)) != 0;
		if (!st->outer_ids_done)
			trl_outer_ids(node, st);
		st->q.union_ids_int = st->outer_ids_int;
		st->q.union_ids_str = st->outer_ids_str;
		st->q.union_nids = st->outer_nids;
		if (tdb_trail_scan_begin(st->h->reader, &st->q, &st->h->scan, &err) < 0)
			trail_error(&err, psprintf("could not scan trail file \"%s\"", st->h->url));
	}
	if (st->empty || st->h->scan == NULL)
		return slot;
	sc = &tdb_trail_footer(st->h->reader)->schema;
	for (;;)
	{
		bool		ask = false;

		rc = tdb_trail_scan_next(st->h->scan, &ev, &err);
		if (rc < 0)
			trail_error(&err, psprintf("could not read trail file \"%s\"", st->h->url));
		if (rc == 0)
			return slot;
		/* ST_Intersects(geom, the rectangle), boundary included, on the point's own doubles */
		if (st->exact && !(ev.lon >= st->exact_box[0] && ev.lon <= st->exact_box[2] &&
						   ev.lat >= st->exact_box[1] && ev.lat <= st->exact_box[3]))
		{
			trl_dropped(&st->exact_removed);
			continue;
		}
		if (st->band)
		{
			int			v = trl_band_settles(ev.lon, ev.lat, st->band_lon, st->band_lat, st->band_d,
											 st->band_spheroid);

			if (v == 0)
			{
				trl_dropped(&st->band_removed);
				continue;
			}
			ask = v < 0;
		}
		trl_form_row(st, slot, &ev, sc);
		/* the id clause, where the trail index did not answer it */
		if (st->id_state != NULL && !st->id_exact)
		{
			st->id_asked++;
			if (!tdb_clause_holds(st->id_state, node->ss.ps.ps_ExprContext, slot))
			{
				ExecClearTuple(slot);
				trl_dropped(&st->id_removed);
				continue;
			}
		}
		if (ask)
		{
			/* near the circle: PostGIS's own answer, on the row as formed */
			st->band_asked++;
			if (!tdb_clause_holds(st->band_state, node->ss.ps.ps_ExprContext, slot))
			{
				ExecClearTuple(slot);	/* the scan's end returns an empty slot */
				trl_dropped(&st->band_removed);
				continue;
			}
		}
		return slot;
	}
}

/* The row of event ev into slot, as the table's columns want it. */
static void
trl_form_row(TrlScan *st, TupleTableSlot *slot, const TdbTrailEvent *evp, const TdbTrailSchema *sc)
{
	const TdbTrailEvent ev = *evp;

	ExecClearTuple(slot);
	for (int i = 0; i < st->tupdesc->natts; i++)
	{
		int			src = st->src[i];

		slot->tts_isnull[i] = false;
		switch (src)
		{
			case SRC_NONE:
				slot->tts_isnull[i] = true;
				break;
			case SRC_ID:
				slot->tts_values[i] = sc->id_type == TDB_TRAIL_STRING && st->inputs[i].fn_oid == InvalidOid ?
					trl_text_datum(st, i, ev.key.s) :
					trl_value_datum(st, i, sc->id_type, ev.key.i, 0, ev.key.s);
				break;
			case SRC_TIME:
				slot->tts_values[i] = trail_time_datum(ev.time_us);
				break;
			case SRC_GEOM:
				slot->tts_values[i] = tdb_point_datum_in(ev.lon, ev.lat, st->point_buf);
				break;
			case SRC_LON:
			case SRC_LAT:
				slot->tts_values[i] = trl_value_datum(st, i, TDB_TRAIL_FLOAT64, 0,
												  src == SRC_LON ? ev.lon : ev.lat, NULL);
				break;
			default:
				{
					const TdbTrailValue *v = &ev.cols[src][ev.index];
					TdbTrailType t = sc->columns[src].type;

					if (v->isnull)
						slot->tts_isnull[i] = true;
					else if (st->inputs[i].fn_oid != InvalidOid)
						slot->tts_values[i] = trl_value_datum(st, i, t, v->i, v->f, v->s);
					else if (t == TDB_TRAIL_FLOAT64)
						slot->tts_values[i] = Float8GetDatum(v->f);
					else if (t == TDB_TRAIL_STRING)
						slot->tts_values[i] = trl_text_datum(st, i, v->s);
					else
						slot->tts_values[i] = trl_value_datum(st, i, t, v->i, v->f, v->s);
				}
		}
	}
	ExecStoreVirtualTuple(slot);
}

void
trl_end_scan(TrlScan *st)
{
	if (st->h != NULL && st->h->scan != NULL)
	{
		TdbTrailScanStats s;

		tdb_trail_scan_stats(st->h->scan, &s);
		st->stats.pages_candidate += s.pages_candidate;
		st->stats.pages_read += s.pages_read;
		st->stats.pages_reused += s.pages_reused;
		st->stats.windows += s.windows;
		st->stats.union_prefetched |= s.union_prefetched;
		st->stats.union_exact |= s.union_exact;
		st->stats.pages_pruned += s.pages_pruned;
		st->stats.events_returned += s.events_returned;
		st->stats.bytes_read += s.bytes_read;
		tdb_trail_scan_end(st->h->scan);
		st->h->scan = NULL;
	}
}

void
trlReScanForeignScan(ForeignScanState *node)
{
	TrlScan    *st = node->fdw_state;

	/* parameters may have changed: prune again; the file stays open */
	trl_end_scan(st);
	MemoryContextReset(st->scan_cxt);
	st->started = false;
}

void
trlEndForeignScan(ForeignScanState *node)
{
	TrlScan    *st = node->fdw_state;

	if (st == NULL)
		return;
	trl_end_scan(st);
	/* EXPLAIN ANALYZE reads the pager's counters after this: keep the file open */
}
