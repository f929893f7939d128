/*-------------------------------------------------------------------------
 *
 * trails_agg.c
 *	  The trail foreign data wrapper's aggregates from the footer: count,
 *	  min, max, bool_and and bool_or of a whole file or per trail id,
 *	  filtered by trail ids only, planned as an upper path
 *	  (GetForeignUpperPaths) and answered from the footer's per-trail
 *	  summaries without fetching a page, with PostgreSQL's own semantics.
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
#include "fdw/trails_internal.h"
#include "module/geometry.h"
#include "module/trafficdb.h"
#include "trail/cache.h"
#include "trail/pager.h"
#include "trail/trail.h"

/* ---- planning aggregates from the footer ---------------------------------------------- */

/* A version-2 or later footer: per-trail column summaries (version 3: read when needed). */
static bool
footer_has_stats(const TdbTrailFooter *f)
{
	return f->version >= 3 || (f->version == 2 && (f->ntrails == 0 || f->trails[0].stats != NULL));
}

/*
 * The file's columns whose summaries the scan's aggregates read (a mask:
 * bit c for column c), so that a version-5 footer's summary chunks of the
 * others are never fetched.
 */
static uint64
agg_columns(const TrlScan *st, const TdbTrailFooter *f)
{
	ListCell   *la;
	uint64		cols = 0;

	foreach(la, st->agg_atts)
	{
		AttrNumber	att = lfirst_int(la);
		TdbTrailType t;
		int			src = att > 0 ? trl_attr_source(&f->schema, TupleDescAttr(st->tupdesc, att - 1), &t) : SRC_NONE;

		if (src >= 0 && src < 64)
			cols |= (uint64) 1 << src;
	}
	return cols;
}

/* AGG_WHOLE in an index list: the whole file as one trail (a version-3 head's summary). */
#define AGG_WHOLE PG_UINT32_MAX

static inline const TdbTrailInfo *
agg_info(const TdbTrailFooter *f, uint32 t)
{
	return t == AGG_WHOLE ? &f->whole : &f->trails[t];
}

/*
 * The AGG_* the footer computes for aggregate ag over relation relid
 * (columns td, file schema sc, column summaries or not), *att its column;
 * -1 if it cannot be computed exactly.  The declared type must be one the
 * scan makes directly from the file's values (trl_direct_type), so that the
 * footer's minimum is the minimum of what the scan would return.
 */
static int
footer_agg(const Aggref *ag, Index relid, TupleDesc td, const TdbTrailSchema *sc, bool stats,
		   AttrNumber *att)
{
	Var		   *v;
	Form_pg_attribute a;
	TdbTrailType t;
	int			src;
	bool		summary;

	*att = 0;
	if (ag->aggfilter != NULL || ag->aggdistinct != NIL || ag->aggorder != NIL || ag->aggvariadic ||
		ag->aggkind != AGGKIND_NORMAL || ag->agglevelsup != 0 || ag->aggsplit != AGGSPLIT_SIMPLE)
		return -1;
	if (ag->aggfnoid == F_COUNT_ && ag->aggstar)
		return AGG_COUNT_STAR;
	if (list_length(ag->args) != 1 || ag->aggstar)
		return -1;
	v = (Var *) ((TargetEntry *) linitial(ag->args))->expr;
	if (!IsA(v, Var) || v->varno != (int) relid || v->varlevelsup != 0 || v->varattno <= 0 ||
		v->varattno > td->natts)
		return -1;
	a = TupleDescAttr(td, v->varattno - 1);
	if (a->attisdropped || (src = trl_attr_source(sc, a, &t)) == SRC_NONE)
		return -1;
	*att = v->varattno;
	summary = src >= 0 && stats;
	switch (ag->aggfnoid)
	{
		case F_COUNT_ANY:
			/* id, time and position are never NULL; a column's count is in its summary */
			if (src == SRC_TIME || src == SRC_GEOM || (trl_direct_type(t, a->atttypid) && (src < 0 || summary)))
				return AGG_COUNT;
			return -1;
		case F_MIN_INT8:
		case F_MAX_INT8:
			if (t == TDB_TRAIL_INT64 && (src == SRC_ID || summary))
				return ag->aggfnoid == F_MIN_INT8 ? AGG_MIN : AGG_MAX;
			return -1;
		case F_MIN_FLOAT8:
		case F_MAX_FLOAT8:
			if (src == SRC_LON || src == SRC_LAT ||
				(summary && (t == TDB_TRAIL_FLOAT64 || t == TDB_TRAIL_INT64)))
				return ag->aggfnoid == F_MIN_FLOAT8 ? AGG_MIN : AGG_MAX;
			return -1;
		case F_MIN_TIMESTAMPTZ:
		case F_MIN_TIMESTAMP:
			return src == SRC_TIME ? AGG_MIN : -1;
		case F_MAX_TIMESTAMPTZ:
		case F_MAX_TIMESTAMP:
			return src == SRC_TIME ? AGG_MAX : -1;
		case F_BOOL_AND:
		case F_EVERY:
			return summary && t == TDB_TRAIL_BOOL ? AGG_BOOL_AND : -1;
		case F_BOOL_OR:
			return summary && t == TDB_TRAIL_BOOL ? AGG_BOOL_OR : -1;
		default:
			return -1;
	}
}

/* The columns of a footer-aggregate scan, as they are collected. */
typedef struct AggBuild
{
	Index		relid;
	AttrNumber	id;
	bool		grouped;
	TupleDesc	td;
	const TdbTrailSchema *sc;
	bool		stats;
	List	   *tlist;
	List	   *ops;
	List	   *atts;
	StringInfoData text;
} AggBuild;

static void
agg_add(AggBuild *b, Expr *e, int op, AttrNumber att, const Aggref *ag)
{
	if (tlist_member(e, b->tlist) != NULL)
		return;
	b->tlist = lappend(b->tlist, makeTargetEntry(copyObject(e), list_length(b->tlist) + 1, NULL, false));
	b->ops = lappend_int(b->ops, op);
	b->atts = lappend_int(b->atts, att);
	if (ag != NULL)
		appendStringInfo(&b->text, "%s%s(%s)", b->text.len ? ", " : "", get_func_name(ag->aggfnoid),
						 att == 0 ? "*" : quote_identifier(NameStr(TupleDescAttr(b->td, att - 1)->attname)));
}

/*
 * The aggregates and grouped ids in expression e (of the target list or
 * HAVING), added to the scan's columns; false if one of them is not
 * computed from the footer, or e is volatile.
 */
static bool
agg_add_expr(AggBuild *b, Node *e)
{
	List	   *items;
	ListCell   *lc;

	if (contain_volatile_functions(e))
		return false;
	items = pull_var_clause(e, PVC_INCLUDE_AGGREGATES | PVC_INCLUDE_WINDOWFUNCS | PVC_INCLUDE_PLACEHOLDERS);
	foreach(lc, items)
	{
		Node	   *n = lfirst(lc);
		AttrNumber	att;
		int			op;

		if (IsA(n, Var) && b->grouped && trl_is_col((Expr *) n, b->relid, b->id))
			agg_add(b, (Expr *) n, AGG_GROUP_ID, b->id, NULL);
		else if (IsA(n, Aggref) && (op = footer_agg((Aggref *) n, b->relid, b->td, b->sc, b->stats, &att)) >= 0)
			agg_add(b, (Expr *) n, op, att, (Aggref *) n);
		else
			return false;
	}
	return true;
}

/*
 * GetForeignUpperPaths: a path for the grouping step that reads the footer
 * only, when the query is one it answers exactly (the rules of
 * docs/trail-format.md, "Aggregates from the footer").
 */
void
trlGetForeignUpperPaths(PlannerInfo *root, UpperRelationKind stage, RelOptInfo *input_rel,
						RelOptInfo *output_rel, void *extra)
{
	GroupPathExtraData *gx = extra;
	Query	   *parse = root->parse;
	RangeTblEntry *rte;
	ForeignTable *ft;
	TrailCols	c;
	AggBuild	b;
	List	   *kinds = NIL,
			   *args = NIL,
			   *local = NIL,
			   *priv;
	ListCell   *lc;
	char	   *url,
			   *v;
	MemoryContext cxt;
	TrailHandle *h;
	TdbTrailSchema sc;
	uint32		ntrails;
	Relation	rel;
	bool		ok = true;
	double		rows;
	int			i;
	ForeignPath *path;

	if (stage != UPPERREL_GROUP_AGG || output_rel->fdw_private != NULL || !tdb_trail_footer_aggregates ||
		input_rel->reloptkind != RELOPT_BASEREL || input_rel->fdw_private == NULL ||
		gx == NULL || gx->patype != PARTITIONWISE_AGGREGATE_NONE)
		return;
	if (parse->groupingSets != NIL || parse->hasTargetSRFs || root->hasPseudoConstantQuals ||
		list_length(parse->groupClause) > 1)
		return;
	rte = planner_rt_fetch(input_rel->relid, root);
	ft = GetForeignTable(rte->relid);
	if ((v = tdb_fdw_option(ft->options, "footer_aggregates")) != NULL &&
		!defGetBoolean(makeDefElem("footer_aggregates", (Node *) makeString(v), -1)))
		return;
	if ((url = tdb_fdw_option(ft->options, "url")) == NULL)
		return;
	c = trail_cols(rte->relid);

	/* WHERE: nothing, or trail id clauses, each applied exactly */
	foreach(lc, input_rel->baserestrictinfo)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		List	   *k = NIL,
				   *a = NIL;

		/* (trl_classify takes text ids under a deterministic collation only) */
		if (!trl_classify(ri->clause, input_rel->relid, &c, &k, &a) ||
			(linitial_int(k) != PUSH_ID && linitial_int(k) != PUSH_IDS))
			return;
		kinds = list_concat(kinds, k);
		args = list_concat(args, a);
	}

	/* GROUP BY: nothing, or the trail id by its type's equality */
	memset(&b, 0, sizeof(b));
	b.relid = input_rel->relid;
	b.id = c.id;
	if (parse->groupClause != NIL)
	{
		SortGroupClause *sgc = linitial(parse->groupClause);
		Expr	   *ge = (Expr *) get_sortgroupclause_expr(sgc, parse->targetList);
		Oid			eqfn = get_opcode(sgc->eqop);

		if (!trl_is_col(ge, input_rel->relid, c.id) ||
			!((c.id_type == INT8OID && eqfn == F_INT8EQ) ||
			  (c.id_type == TEXTOID && eqfn == F_TEXTEQ && trl_collation_is_bytes(exprCollation((Node *) ge)))))
			return;
		b.grouped = true;
	}

	/*
	 * The file's schema and whether it has column summaries: read its footer
	 * (a file that cannot be read is the scan's error, at execution)
	 */
	cxt = AllocSetContextCreate(CurrentMemoryContext, "trail footer aggregates", ALLOCSET_SMALL_SIZES);
	/*
	 * Whole-file aggregates need the head alone, GROUP BY id also every trail
	 * chunk and its columns' summary chunks, read exactly after it: a small
	 * first request either way (GROUP BY over an hour of New York Harbor AIS
	 * read 16 kB for the head where 4 kB hold it, 17.6 kB in all against
	 * DuckDB's 25.6 kB).  Ids look up a chunk or two, the tail may hold them.
	 */
	h = trail_open_ext(GetForeignServer(ft->serverid), ft, url, cxt, true, kinds == NIL);
	if (h == NULL)
	{
		MemoryContextDelete(cxt);
		return;
	}
	sc = tdb_trail_footer(h->reader)->schema;
	b.stats = footer_has_stats(tdb_trail_footer(h->reader));
	ntrails = tdb_trail_footer(h->reader)->ntrails;
	MemoryContextDelete(cxt);	/* closes the file */
	b.sc = &sc;

	/*
	 * The table must fit the file as a scan of it would (else the scan's
	 * error, not a footer's answer); the id's type must be the file's.
	 */
	rel = table_open(rte->relid, NoLock);
	b.td = RelationGetDescr(rel);
	if (strcmp(ID_COLUMN(ft), sc.id_name) != 0 || strcmp(TIME_COLUMN(ft), sc.time_name) != 0)
		ok = false;
	if ((kinds != NIL || b.grouped) &&
		!((sc.id_type == TDB_TRAIL_INT64 && c.id_type == INT8OID) ||
		  (sc.id_type == TDB_TRAIL_STRING && c.id_type == TEXTOID)))
		ok = false;
	for (i = 0; ok && i < b.td->natts; i++)
	{
		Form_pg_attribute a = TupleDescAttr(b.td, i);
		TdbTrailType t;
		int			src;

		if (a->attisdropped)
			continue;
		src = trl_attr_source(&sc, a, &t);
		if (src == SRC_NONE ||
			(src == SRC_TIME && a->atttypid != TIMESTAMPTZOID && a->atttypid != TIMESTAMPOID))
			ok = false;
	}

	/* the output: grouped ids and aggregates the footer answers, nothing else */
	initStringInfo(&b.text);
	i = 0;
	foreach(lc, output_rel->reltarget->exprs)
	{
		Expr	   *e = lfirst(lc);
		Index		ref = get_pathtarget_sortgroupref(output_rel->reltarget, i);

		i++;
		if (!ok)
			break;
		if (ref != 0 && get_sortgroupref_clause_noerr(ref, parse->groupClause) != NULL)
		{
			if (!trl_is_col(e, input_rel->relid, c.id))
				ok = false;
			else
				agg_add(&b, e, AGG_GROUP_ID, c.id, NULL);
		}
		else
			ok = agg_add_expr(&b, (Node *) e);
	}
	/* HAVING: checked on the scan's rows; its aggregates come from the footer too */
	foreach(lc, (List *) gx->havingQual)
	{
		if (!ok)
			break;
		ok = agg_add_expr(&b, lfirst(lc));
		local = lappend(local, lfirst(lc));
	}
	table_close(rel, NoLock);
	if (!ok || b.tlist == NIL)
		return;

	priv = list_make5(kinds, makeInteger(0), NIL, b.ops, b.atts);
	priv = lappend(priv, makeString(b.text.len ? b.text.data : pstrdup("(none)")));
	priv = lappend(priv, list_make1_oid(rte->relid));
	priv = lappend(priv, makeInteger(b.grouped));
	priv = lappend(priv, args);
	priv = lappend(priv, b.tlist);
	priv = lappend(priv, local);
	Assert(list_length(priv) == AGGPATH_LOCAL + 1);

	/* one round trip for the tail, then nothing: cheaper than any scan */
	rows = b.grouped ? Max(1.0, kinds != NIL ? Min(ntrails, 10.0) : ntrails) : 1.0;
	path = create_foreign_upper_path(root, output_rel, output_rel->reltarget, rows,
									 TRAIL_LOOKUP_COST, TRAIL_LOOKUP_COST + rows * cpu_tuple_cost,
									 NIL, NULL, priv);
	add_path(output_rel, (Path *) path);
	output_rel->fdw_private = path;
}


/* ---- aggregates from the footer: execution ------------------------------------------ */

static int
cmp_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a,
				y = *(const int64 *) b;

	return x < y ? -1 : x > y;
}

static int
cmp_cstring(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/*
 * st->member: the trails whose id satisfies every pushed id clause (the
 * planner let only id clauses through, so this is the WHERE clause).
 */
static void
agg_members(ForeignScanState *node, TrlScan *st, const TdbTrailFooter *f)
{
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	ListCell   *lk,
			   *la = list_head(st->arg_states);
	MemoryContext old = MemoryContextSwitchTo(st->scan_cxt);
	bool		str = f->schema.id_type == TDB_TRAIL_STRING;

	st->member = palloc(sizeof(bool) * Max(1, f->ntrails));
	for (uint32 t = 0; t < f->ntrails; t++)
		st->member[t] = true;
	foreach(lk, st->kinds)
	{
		int			kind = lfirst_int(lk);
		ExprState  *es = lfirst(la);
		bool		isnull;
		Datum		v = ExecEvalExpr(es, econtext, &isnull);
		Oid			elemtype = exprType((Node *) es->expr);
		Datum	   *elems = &v;
		bool	   *nulls = &isnull;
		int			n = 1,
					nv = 0;
		int64	   *ivals;
		char	  **svals;

		la = lnext(st->arg_states, la);
		Assert(kind == PUSH_ID || kind == PUSH_IDS);
		if (isnull)
			n = 0;				/* id = NULL, id = ANY(NULL): no row */
		else if (kind == PUSH_IDS)
			elemtype = trl_id_array_elems(v, &elems, &nulls, &n);
		ivals = palloc(sizeof(int64) * Max(1, n));
		svals = palloc(sizeof(char *) * Max(1, n));
		for (int e = 0; e < n; e++)
		{
			if (nulls[e])
				continue;
			if (str)
				svals[nv++] = TextDatumGetCString(elems[e]);
			else
				ivals[nv++] = elemtype == INT2OID ? DatumGetInt16(elems[e]) :
					elemtype == INT4OID ? DatumGetInt32(elems[e]) : DatumGetInt64(elems[e]);
		}
		if (f->lazy)
		{
			/* version 3: each id looked up (its trail chunk read), not every trail */
			bool	   *hit = palloc0(sizeof(bool) * Max(1, f->ntrails));
			TdbTrailError err;

			/* their chunks at once, then each id in its chunk */
			if (tdb_trail_need_ids(st->h->reader, str ? NULL : ivals, str ? (const char *const *) svals : NULL,
								   nv, agg_columns(st, f), &err) < 0)
				trail_error(&err, psprintf("could not read trail file \"%s\"", st->h->url));
			for (int e = 0; e < nv; e++)
			{
				int			t = tdb_trail_lookup(st->h->reader, str ? 0 : ivals[e], str ? svals[e] : NULL, &err);

				if (t < -1)
					trail_error(&err, psprintf("could not read trail file \"%s\"", st->h->url));
				if (t >= 0)
					hit[t] = true;
				CHECK_FOR_INTERRUPTS();
			}
			for (uint32 t = 0; t < f->ntrails; t++)
				st->member[t] = st->member[t] && hit[t];
			pfree(hit);
			continue;
		}
		if (str)
			qsort(svals, nv, sizeof(char *), cmp_cstring);
		else
			qsort(ivals, nv, sizeof(int64), cmp_int64);
		for (uint32 t = 0; t < f->ntrails; t++)
		{
			const TdbTrailKey *k = &f->trails[t].key;

			if (st->member[t])
				st->member[t] = nv > 0 &&
					(str ? bsearch(&k->s, svals, nv, sizeof(char *), cmp_cstring) != NULL :
					 bsearch(&k->i, ivals, nv, sizeof(int64), cmp_int64) != NULL);
		}
	}
	MemoryContextSwitchTo(old);
}

/*
 * The column summaries of trail t: the footer's, or (a file without them,
 * replaced since the query was planned) computed by reading its pages.
 */
static const TdbTrailStats *
trail_stats(ForeignScanState *node, TrlScan *st, const TdbTrailFooter *f, uint32 t)
{
	TdbTrailStats *cs;
	TdbTrailQuery q;
	TdbTrailEvent ev;
	TdbTrailError err;
	int			rc;
	int			ncols = f->schema.ncolumns;

	if (agg_info(f, t)->stats != NULL)
		return agg_info(f, t)->stats;
	if (st->computed == NULL)
		st->computed = MemoryContextAllocZero(node->ss.ps.state->es_query_cxt,
											  sizeof(TdbTrailStats *) * Max(1, f->ntrails));
	if (st->computed[t] != NULL)
		return st->computed[t];
	cs = MemoryContextAllocZero(node->ss.ps.state->es_query_cxt, sizeof(TdbTrailStats) * Max(1, ncols));
	memset(&q, 0, sizeof(q));
	q.nids = 1;
	if (f->schema.id_type == TDB_TRAIL_STRING)
		q.ids_str = &f->trails[t].key.s;
	else
		q.ids_int = &f->trails[t].key.i;
	q.skip_position = true;
	if (tdb_trail_scan_begin(st->h->reader, &q, &st->h->scan, &err) < 0)
		trail_error(&err, psprintf("could not scan trail file \"%s\"", st->h->url));
	while ((rc = tdb_trail_scan_next(st->h->scan, &ev, &err)) > 0)
	{
		for (int c = 0; c < ncols; c++)
		{
			const TdbTrailValue *v = &ev.values[c];
			TdbTrailStats *x = &cs[c];

			if (v->isnull)
				continue;
			switch (f->schema.columns[c].type)
			{
				case TDB_TRAIL_INT64:
				case TDB_TRAIL_BOOL:
					if (x->count == 0 || v->i < x->imin)
						x->imin = v->i;
					if (x->count == 0 || v->i > x->imax)
						x->imax = v->i;
					break;
				case TDB_TRAIL_FLOAT64:
					if (isnan(v->f))
						x->has_nan = true;
					else
					{
						/* a tie (-0, 0) keeps the later value, as float8smaller/larger */
						if (!x->has_range || !(x->fmin < v->f))
							x->fmin = v->f;
						if (!x->has_range || !(x->fmax > v->f))
							x->fmax = v->f;
						x->has_range = true;
					}
					break;
				case TDB_TRAIL_STRING:
					break;
			}
			x->count++;
		}
		CHECK_FOR_INTERRUPTS();
	}
	if (rc < 0)
		trail_error(&err, psprintf("could not read trail file \"%s\"", st->h->url));
	trl_end_scan(st);
	st->scanned = true;
	st->computed[t] = cs;
	return cs;
}

/*
 * min or max of float column src over trails idx[0 .. n-1], folded from
 * their events in file order as PostgreSQL does over the scan's rows (a tie
 * keeps the later value); NaNs are left to the caller.
 */
static double
float_extreme_by_scan(TrlScan *st, const TdbTrailFooter *f, const uint32 *idx, uint32 n, int src,
					  bool max)
{
	TdbTrailQuery q;
	TdbTrailEvent ev;
	TdbTrailError err;
	int64	   *ids_int = palloc(sizeof(int64) * Max(1, n));
	const char **ids_str = palloc(sizeof(char *) * Max(1, n));
	bool		any = false;
	double		fv = 0;
	int			rc;

	for (uint32 j = 0; j < n; j++)
	{
		ids_int[j] = f->trails[idx[j]].key.i;
		ids_str[j] = f->trails[idx[j]].key.s;
	}
	memset(&q, 0, sizeof(q));
	q.nids = (int) n;
	if (f->schema.id_type == TDB_TRAIL_STRING)
		q.ids_str = ids_str;
	else
		q.ids_int = ids_int;
	q.skip_position = true;
	q.skip_columns = src < 64 ? ~((uint64) 1 << src) : 0;
	if (tdb_trail_scan_begin(st->h->reader, &q, &st->h->scan, &err) < 0)
		trail_error(&err, psprintf("could not scan trail file \"%s\"", st->h->url));
	while ((rc = tdb_trail_scan_next(st->h->scan, &ev, &err)) > 0)
	{
		const TdbTrailValue *v = &ev.values[src];

		if (!v->isnull && !isnan(v->f) && (!any || (max ? !(fv > v->f) : !(fv < v->f))))
			fv = v->f;
		any = any || (!v->isnull && !isnan(v->f));
		CHECK_FOR_INTERRUPTS();
	}
	if (rc < 0)
		trail_error(&err, psprintf("could not read trail file \"%s\"", st->h->url));
	trl_end_scan(st);
	return fv;
}

/* The trail file changed since planning so that an aggregate no longer fits it. */
static void
agg_replaced(TrlScan *st, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
			 errmsg("trail file \"%s\" changed since the query was planned: %s", st->h->url, what),
			 errhint("Plan the query again (DISCARD PLANS), or SET trafficdb.trail_footer_aggregates = off.")));
}

/* Check that the file (opened now) still fits the planned aggregates. */
static void
agg_check(TrlScan *st, const TdbTrailFooter *f)
{
	ListCell   *lo,
			   *la;
	Oid			idtype = InvalidOid;

	forboth(lo, st->agg_ops, la, st->agg_atts)
	{
		int			op = lfirst_int(lo);
		AttrNumber	att = lfirst_int(la);
		Form_pg_attribute a;
		TdbTrailType t;
		int			src;
		bool		ok;

		if (att == 0)
			continue;
		a = TupleDescAttr(st->tupdesc, att - 1);
		src = trl_attr_source(&f->schema, a, &t);	/* map_columns checked it is there */
		switch (op)
		{
			case AGG_GROUP_ID:
				ok = src == SRC_ID;
				idtype = a->atttypid;
				break;
			case AGG_COUNT:
				ok = src == SRC_TIME || src == SRC_GEOM || trl_direct_type(t, a->atttypid);
				break;
			case AGG_MIN:
			case AGG_MAX:
				ok = src == SRC_TIME ||
					(src == SRC_ID && t == TDB_TRAIL_INT64 && a->atttypid == INT8OID) ||
					((src == SRC_LON || src == SRC_LAT) && a->atttypid == FLOAT8OID) ||
					(src >= 0 && ((t == TDB_TRAIL_INT64 && (a->atttypid == INT8OID || a->atttypid == FLOAT8OID)) ||
								  (t == TDB_TRAIL_FLOAT64 && a->atttypid == FLOAT8OID)));
				break;
			default:
				ok = src >= 0 && t == TDB_TRAIL_BOOL;
				break;
		}
		if (!ok)
			agg_replaced(st, psprintf("column \"%s\" is now of another type", NameStr(a->attname)));
	}
	if (st->kinds != NIL || st->grouped)
	{
		AttrNumber	id = InvalidAttrNumber;

		for (int i = 0; i < st->tupdesc->natts; i++)
			if (!TupleDescAttr(st->tupdesc, i)->attisdropped &&
				strcmp(NameStr(TupleDescAttr(st->tupdesc, i)->attname), f->schema.id_name) == 0)
				id = i + 1;
		idtype = id != InvalidAttrNumber ? TupleDescAttr(st->tupdesc, id - 1)->atttypid : idtype;
		if (!((f->schema.id_type == TDB_TRAIL_INT64 && idtype == INT8OID) ||
			  (f->schema.id_type == TDB_TRAIL_STRING && idtype == TEXTOID)))
			agg_replaced(st, "its trail ids are now of another type");
	}
}

/* One output row over trails idx[0 .. n-1] (n = 0: no row matched). */
static void
agg_row(ForeignScanState *node, TrlScan *st, const TdbTrailFooter *f, const uint32 *idx, uint32 n,
		TupleTableSlot *slot)
{
	ListCell   *lo,
			   *la;
	int			k = 0;

	forboth(lo, st->agg_ops, la, st->agg_atts)
	{
		int			op = lfirst_int(lo);
		AttrNumber	att = lfirst_int(la);
		Form_pg_attribute a = att > 0 ? TupleDescAttr(st->tupdesc, att - 1) : NULL;
		TdbTrailType t = TDB_TRAIL_INT64;
		int			src = a != NULL ? trl_attr_source(&f->schema, a, &t) : SRC_NONE;
		Datum		d = (Datum) 0;
		bool		isnull = false;

		switch (op)
		{
			case AGG_GROUP_ID:
				{
					const TdbTrailKey *key = &f->trails[idx[0]].key;

					d = trl_value_datum(st, att - 1, f->schema.id_type, key->i, 0, key->s);
					break;
				}
			case AGG_COUNT_STAR:
			case AGG_COUNT:
				{
					uint64		sum = 0;

					for (uint32 j = 0; j < n; j++)
						sum += op == AGG_COUNT && src >= 0 ? trail_stats(node, st, f, idx[j])[src].count :
							agg_info(f, idx[j])->nevents;
					d = Int64GetDatum((int64) sum);
					break;
				}
			case AGG_BOOL_AND:
			case AGG_BOOL_OR:
				{
					bool		any = false,
								all_true = true,
								one_true = false;

					for (uint32 j = 0; j < n; j++)
					{
						const TdbTrailStats *x = &trail_stats(node, st, f, idx[j])[src];

						if (x->count == 0)
							continue;
						any = true;
						all_true &= x->imin == 1;
						one_true |= x->imax == 1;
					}
					isnull = !any;
					d = BoolGetDatum(op == AGG_BOOL_AND ? all_true : one_true);
					break;
				}
			default:
				{
					bool		max = op == AGG_MAX;
					bool		any = false,
								nan = false;
					int64		iv = 0;
					double		fv = 0,
								y;
					bool		zero_tie = false;

					for (uint32 j = 0; j < n; j++)
					{
						const TdbTrailInfo *ti = agg_info(f, idx[j]);
						int64		x;

						if (src >= 0 && t == TDB_TRAIL_FLOAT64)
						{
							const TdbTrailStats *cs = &trail_stats(node, st, f, idx[j])[src];

							/* PostgreSQL orders NaN above every number */
							nan |= cs->has_nan;
							if (!cs->has_range)
								continue;
							y = max ? cs->fmax : cs->fmin;
							/* a tie keeps the later trail's value, as PostgreSQL the later row's */
							if (any && y == fv && memcmp(&y, &fv, sizeof(double)) != 0)
								zero_tie = true;
							if (!any || (max ? !(fv > y) : !(fv < y)))
								fv = y;
							any = true;
							continue;
						}
						if (src >= 0)
						{
							const TdbTrailStats *cs = &trail_stats(node, st, f, idx[j])[src];

							if (cs->count == 0)
								continue;
							x = max ? cs->imax : cs->imin;
						}
						else if (src == SRC_TIME)
							x = max ? ti->tmax : ti->tmin;
						else if (src == SRC_ID)	/* the whole file: its first and last ids */
							x = idx[j] == AGG_WHOLE && max ? f->whole_last.i : ti->key.i;
						else if (src == SRC_LON)
							x = max ? ti->xmax : ti->xmin;
						else
							x = max ? ti->ymax : ti->ymin;
						if (!any || (max ? x > iv : x < iv))
							iv = x;
						any = true;
					}
					/*
					 * -0 and 0 from different trails: the later row's in file
					 * order, which is the later trail's only in trail order
					 */
					if (zero_tie && f->order != TDB_TRAIL_ORDER_TRAIL)
						fv = float_extreme_by_scan(st, f, idx, n, src, max);
					if (src >= 0 && t == TDB_TRAIL_FLOAT64)
					{
						/* max: NaN if any; min: NaN only if every value is */
						isnull = !any && !nan;
						d = Float8GetDatum((max && nan) || !any ? get_float8_nan() : fv);
						break;
					}
					isnull = !any;
					if (src == SRC_TIME)
						d = trail_time_datum(iv);
					else if (src == SRC_LON || src == SRC_LAT)
						d = Float8GetDatum(tdb_trail_coord_unfix((int32) iv));
					else if (a->atttypid == FLOAT8OID)
						d = Float8GetDatum((double) iv);
					else
						d = Int64GetDatum(iv);
				}
		}
		slot->tts_values[k] = d;
		slot->tts_isnull[k] = isnull;
		k++;
	}
}

/* Version 3: every trail's entry (GROUP BY id without a WHERE clause), the aggregates' summaries with it. */
static void
need_every_trail(TrlScan *st)
{
	const TdbTrailFooter *f = tdb_trail_footer(st->h->reader);
	TdbTrailError err;

	if (f->lazy && tdb_trail_need_summaries(st->h->reader, 0, f->ntrails, agg_columns(st, f), &err) < 0)
		trail_error(&err, psprintf("could not read trail file \"%s\"", st->h->url));
}

/*
 * Whether the whole file's summary (a version-3 head's) answers the
 * query's aggregates over every trail exactly: yes, but for a minimum or
 * maximum the query asks of a float column whose minimum or maximum is
 * zero, in a file not in trail order, where -0 and 0 of different trails
 * tie and PostgreSQL keeps the later row's (the summary folds trails in
 * id order): then the trails' summaries decide.  (Any float column's zero
 * sent count(*) there too: 22 kB of trail summaries instead of the 4 kB
 * head on a file in time order.)
 */
static bool
whole_answers(const TrlScan *st, const TdbTrailFooter *f)
{
	ListCell   *lo,
			   *la;

	if (!f->has_whole || f->whole.stats == NULL)
		return false;
	if (f->order == TDB_TRAIL_ORDER_TRAIL)
		return true;
	forboth(lo, st->agg_ops, la, st->agg_atts)
	{
		int			op = lfirst_int(lo);
		AttrNumber	att = lfirst_int(la);
		TdbTrailType t = TDB_TRAIL_INT64;
		int			src = att > 0 ? trl_attr_source(&f->schema, TupleDescAttr(st->tupdesc, att - 1), &t) : SRC_NONE;
		const TdbTrailStats *x;

		if ((op != AGG_MIN && op != AGG_MAX) || src < 0 || t != TDB_TRAIL_FLOAT64)
			continue;
		x = &f->whole.stats[src];
		if (x->has_range && (x->fmin == 0 || x->fmax == 0))
			return false;
	}
	return true;
}

/* IterateForeignScan of a footer-aggregate plan: a row per trail, or one row. */
TupleTableSlot *
trl_agg_iterate(ForeignScanState *node, TrlScan *st)
{
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
	const TdbTrailFooter *f;

	ExecClearTuple(slot);
	if (!st->started)
	{
		trl_open_file(node, st);
		agg_check(st, tdb_trail_footer(st->h->reader));
		agg_members(node, st, tdb_trail_footer(st->h->reader));
		st->started = true;
		st->nscans++;
		st->next = 0;
		st->done = false;
	}
	f = tdb_trail_footer(st->h->reader);
	if (st->grouped)
	{
		uint32		t;

		if (st->next == 0 && st->kinds == NIL)
			need_every_trail(st);

		while (st->next < f->ntrails && !st->member[st->next])
			st->next++;
		if (st->next >= f->ntrails)
			return slot;
		t = st->next++;
		agg_row(node, st, f, &t, 1, slot);
	}
	else
	{
		uint32	   *idx;
		uint32		n = 0;

		if (st->done)
			return slot;
		st->done = true;
		if (st->kinds == NIL && whole_answers(st, f))
		{
			uint32		w = AGG_WHOLE;

			agg_row(node, st, f, &w, 1, slot);
			return ExecStoreVirtualTuple(slot);
		}
		if (st->kinds == NIL)
			need_every_trail(st);
		idx = MemoryContextAlloc(st->scan_cxt, sizeof(uint32) * Max(1, f->ntrails));
		for (uint32 t = 0; t < f->ntrails; t++)
			if (st->member[t])
				idx[n++] = t;
		agg_row(node, st, f, idx, n, slot);
	}
	return ExecStoreVirtualTuple(slot);
}
