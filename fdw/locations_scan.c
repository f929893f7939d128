/*-------------------------------------------------------------------------
 *
 * locations_scan.c
 *	  The locations foreign data wrapper's scan: BeginForeignScan (what the
 *	  plan pushed, the pushed clause's own recheck), the rows of the
 *	  candidates (locations_candidates.c) from the scan's snapshot, checked
 *	  by that recheck and a geography radius, and rescans.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "executor/executor.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "fdw/locations_internal.h"
#include "fdw/pushdown.h"
#include "module/geometry.h"
#include "module/shared.h"
#include "module/snapshot.h"
#include "module/trafficdb.h"

/* ---- execution ------------------------------------------------------------------- */

/* The parts push_encode() wrote. */
static void
push_decode(LocScanState *st, List *l)
{
	if (list_length(l) <= 3)
		return;
	st->nparts = list_nth_int(l, 3);
	st->part_kind = palloc(sizeof(int) * st->nparts);
	st->part_nargs = palloc(sizeof(int) * st->nparts);
	st->part_flags = palloc(sizeof(int) * st->nparts);
	for (int p = 0; p < st->nparts; p++)
	{
		st->part_kind[p] = list_nth_int(l, 4 + 3 * p);
		st->part_nargs[p] = list_nth_int(l, 5 + 3 * p);
		st->part_flags[p] = list_nth_int(l, 6 + 3 * p);
		if (st->part_nargs[p] > 2)
			elog(ERROR, "trafficdb: a pushed-down part with %d arguments", st->part_nargs[p]);
	}
}

/* The call own_recheck planned: function, collation, argument map, description. */
static void
own_recheck_begin(ForeignScanState *node, LocScanState *st, List *own, char *text)
{
	MemoryContext cxt = node->ss.ps.state->es_query_cxt;
	FmgrInfo   *flinfo;
	int			nargs;

	if (own == NIL)
		return;
	nargs = list_length(own) - 2;
	flinfo = MemoryContextAlloc(cxt, sizeof(FmgrInfo));
	/* in the query's memory: PostGIS keeps its prepared shape in fn_extra */
	fmgr_info_cxt((Oid) list_nth_int(own, 0), flinfo, cxt);
	st->recheck = MemoryContextAllocZero(cxt, SizeForFunctionCallInfo(nargs));
	InitFunctionCallInfoData(*st->recheck, flinfo, nargs, (Oid) list_nth_int(own, 1), NULL, NULL);
	st->recheck_arg = MemoryContextAlloc(cxt, sizeof(int) * nargs);
	for (int i = 0; i < nargs; i++)
	{
		st->recheck_arg[i] = list_nth_int(own, 2 + i);
		if (st->recheck_arg[i] >= st->nargs)
			elog(ERROR, "trafficdb: a recheck argument %d of %d", st->recheck_arg[i], st->nargs);
	}
	st->recheck_desc = text;
}

/*
 * The pushed clause on entry i, whose geom is g: false also when an
 * argument is NULL (the function is strict) or the answer is NULL.
 */
static bool
own_recheck_passes(LocScanState *st, Datum g)
{
	FunctionCallInfo fcinfo = st->recheck;
	Datum		r;

	for (int a = 0; a < fcinfo->nargs; a++)
	{
		int			j = st->recheck_arg[a];

		if (j >= 0 && st->argnull[j])
			return false;
		fcinfo->args[a].value = j >= 0 ? st->argv[j] : g;
		fcinfo->args[a].isnull = false;
	}
	fcinfo->isnull = false;
	r = FunctionCallInvoke(fcinfo);
	return !fcinfo->isnull && DatumGetBool(r);
}

void
locBeginForeignScan(ForeignScanState *node, int eflags)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	LocScanState *st = palloc0(sizeof(LocScanState));
	List	   *cols = list_nth(plan->fdw_private, FdwPrivateColumns);
	ListCell   *lc;

	st->dist_att = -1;
	st->natts = list_length(cols);
	st->colmap = palloc(sizeof(int) * Max(st->natts, 1));
	foreach(lc, cols)
	{
		st->colmap[foreach_current_index(lc)] = lfirst_int(lc);
		if (lfirst_int(lc) == COL_GEOM)
			st->need_geom = true;
	}
	st->kind = (PushKind) linitial_int((List *) list_nth(plan->fdw_private, FdwPrivatePush));
	st->k = lsecond_int((List *) list_nth(plan->fdw_private, FdwPrivatePush));
	st->geom_att = lthird_int((List *) list_nth(plan->fdw_private, FdwPrivatePush));
	st->description = strVal(list_nth(plan->fdw_private, FdwPrivateDescription));
	st->knn_arg = strVal(list_nth(plan->fdw_private, FdwPrivateKnnArg));
	push_decode(st, list_nth(plan->fdw_private, FdwPrivatePush));
	if (st->kind == PUSH_KNN_ORDER)
	{
		/* the argument once per (re)scan; the distance expression per measured entry */
		List	   *push = list_nth(plan->fdw_private, FdwPrivatePush);
		Expr	   *order_expr = list_nth(plan->fdw_private, FdwPrivateOrderExpr);
		List	   *prefilter = list_nth(plan->fdw_private, FdwPrivatePrefilter);

		st->expr_states = ExecInitExprList(list_delete_nth_cell(list_copy(plan->fdw_exprs), 1), (PlanState *) node);
		/* with fdw_scan_tlist the expression is in fdw_private, and the scan's tuple has its column last */
		st->order_state = ExecInitExpr(order_expr != NULL ? order_expr : lsecond(plan->fdw_exprs), (PlanState *) node);
		st->dist_att = order_expr != NULL ? st->natts : -1;
		if (prefilter != NIL)
		{
			st->prefilter = ExecInitQual(prefilter, (PlanState *) node);
			st->pre_econtext = CreateExprContext(node->ss.ps.state);
			st->pre_slot = ExecInitExtraTupleSlot(node->ss.ps.state,
												  node->ss.ss_ScanTupleSlot->tts_tupleDescriptor,
												  &TTSOpsVirtual);
		}
		/* an id range: its bounds follow the argument (push_encode) */
		st->knn_range = st->nparts == 1 && st->part_kind[0] == PUSH_ID_RANGE;
		st->knn_limit = list_length(push) > 7 ? list_nth_int(push, 7) : 10;
		st->knn_metric = (int) st->k;
		st->knn_slot = ExecInitExtraTupleSlot(node->ss.ps.state,
											  node->ss.ss_ScanTupleSlot->tts_tupleDescriptor,
											  &TTSOpsVirtual);
		st->knn_cxt = AllocSetContextCreate(node->ss.ps.state->es_query_cxt, "trafficdb nearest-first",
											ALLOCSET_DEFAULT_SIZES);
	}
	else
		st->expr_states = ExecInitExprList(plan->fdw_exprs, (PlanState *) node);
	if (st->kind == PUSH_DWITHIN_M && list_length(st->expr_states) == 3)
		st->radius_clause = lthird(st->expr_states);
	st->nargs = linitial_int((List *) list_nth(plan->fdw_private, FdwPrivateNargs));
	st->argv = palloc0(sizeof(Datum) * Max(st->nargs, 1));
	st->argnull = palloc0(sizeof(bool) * Max(st->nargs, 1));
	own_recheck_begin(node, st, list_nth(plan->fdw_private, FdwPrivateRecheck),
					  strVal(list_nth(plan->fdw_private, FdwPrivateRecheckText)));
	st->eval_cxt = AllocSetContextCreate(node->ss.ps.state->es_query_cxt, "trafficdb scan arguments",
										 ALLOCSET_SMALL_SIZES);
	node->fdw_state = st;
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	if (st->need_geom)
		tdb_geometry_oid();
}

TupleTableSlot *
locIterateForeignScan(ForeignScanState *node)
{
	LocScanState *st = node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
	const TdbSnapshot *snap;
	uint64		i;
	bool		check;
	Datum		own_geom;
	double		knn_dist = NAN;

	if (st->snap == NULL)
	{
		st->snap = tdb_backend_snapshot_for_scan(node->ss.ps.state->es_query_cxt);
		loc_find_candidates(node, st);
	}
	snap = st->snap;
next_candidate:
	ExecClearTuple(slot);
	if (st->kind == PUSH_KNN_ORDER && st->knn_listed)
	{
		if (st->knn_next >= st->knn_nlist)
			return slot;
		knn_dist = st->knn_list_dist[st->knn_next];
		i = st->knn_list[st->knn_next++];
	}
	else if (st->kind == PUSH_KNN_ORDER)
	{
		uint64_t	entry;
		double		dist;
		int			rc = st->knn_active ? tdb_knn_next(&st->knn, &entry, &dist) : 0;

		if (rc < 0)
			ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory in a nearest-first scan")));
		if (rc == 0)
			return slot;
		i = entry;
		knn_dist = dist;
	}
	else
	{
		if (st->next >= st->ncand)
			return slot;
		i = st->cand ? st->cand[st->next] : st->next;
		st->next++;
	}
	st->examined++;
	check = false;
	own_geom = (Datum) 0;
	if (st->recheck != NULL)
	{
		own_geom = loc_record_geom(node, st, i);
		if (!own_recheck_passes(st, own_geom))
		{
			st->recheck_removed++;
			ResetExprContext(node->ss.ps.ps_ExprContext);
			goto next_candidate;
		}
	}
	if (st->radius_clause != NULL)
	{
		if (st->radius_fast)
		{
			double		dist = tdb_map_distance(snap->map, i, st->radius_x, st->radius_y,
												TDB_METRIC_METRES);

			if (dist > st->radius_hi)
				goto next_candidate;
			check = dist > st->radius_lo;
		}
		else
			check = true;
	}
	loc_fill_row(node, st, slot, i, own_geom, true, check);
	if (st->dist_att >= 0)
	{
		/*
		 * The distance PostGIS measured for this entry, PostgreSQL's ORDER BY
		 * value: a finite one as it was; NULL, NaN or infinity (the walk
		 * keeps all three as infinity) measured again, exactly as the
		 * executor would have.
		 */
		slot->tts_isnull[st->dist_att] = false;
		if (isfinite(knn_dist))
			slot->tts_values[st->dist_att] = Float8GetDatum(knn_dist);
		else
			slot->tts_values[st->dist_att] = loc_knn_measure(node, i, &slot->tts_isnull[st->dist_att]);
	}
	ExecStoreVirtualTuple(slot);
	if (check)
	{
		st->radius_postgis++;
		if (!tdb_clause_holds(st->radius_clause, node->ss.ps.ps_ExprContext, slot))
			goto next_candidate;
	}
	return slot;
}

void
locReScanForeignScan(ForeignScanState *node)
{
	LocScanState *st = node->fdw_state;

	/* parameters may have changed: find the candidates again, same snapshot */
	if (st->snap != NULL)
		loc_find_candidates(node, st);
}

void
locEndForeignScan(ForeignScanState *node)
{
	/* the scan's hold on its version ends with its executor memory (snapshot.c) */
	(void) node;
}
