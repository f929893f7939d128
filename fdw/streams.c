/*-------------------------------------------------------------------------
 *
 * streams.c
 *	  The stream foreign data wrapper: a stream file (src/stream/) as
 *	  foreign tables, one per stream, and functions that aggregate a time
 *	  window with the codecs' reconstruction.
 *
 *	  CREATE SERVER s FOREIGN DATA WRAPPER trafficdb_streams
 *	      OPTIONS (filename '/var/lib/sensors/vessel.tsf');
 *	  IMPORT FOREIGN SCHEMA trafficdb_streams FROM SERVER s INTO public;
 *
 * A table has ts timestamptz (the record's time, stored as microseconds
 * since the Unix epoch) and one column per field, matched by name.
 * Pushed down: ts compared (=, <, <=, >, >=, BETWEEN) with constants,
 * parameters or stable expressions of them: the scan starts at the block
 * holding the lower bound (a binary search) and stops after the upper.
 * Every clause is also checked by PostgreSQL, so results are those of the
 * same query on a table.
 *
 * INSERT is transactional as far as a file outside PostgreSQL allows: each
 * statement checks its rows (time order against the file's last record and
 * the rows the transaction inserted before, NULLs, ranges) and keeps them in
 * backend memory, per file; a subtransaction's abort drops the rows it
 * inserted; the transaction's pre-commit writes and flushes them (an error
 * there aborts the transaction), an abort drops them.  The flush precedes
 * PostgreSQL's commit record, so a crash between the two keeps rows of a
 * transaction that PostgreSQL then counts as aborted.  Reads do not see the
 * transaction's own unwritten rows.  PREPARE TRANSACTION is refused while
 * rows wait.
 *
 * Files are locked: many scans or one writer at a time (flock).  Naming a
 * file needs superuser or pg_read_server_files; inserting needs
 * pg_write_server_files too, as file_fdw's rules.
 *
 * This file: planning, scanning, IMPORT FOREIGN SCHEMA, the handler and the
 * validator.  Opening a table's stream is fdw/stream_open.c, the INSERT
 * path and its transaction fdw/stream_insert.c, the window aggregates
 * fdw/stream_agg.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <math.h>

#include "access/reloptions.h"
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "fdw/timebound.h"
#include "module/trafficdb.h"
#include "stream/stream.h"
#include "fdw/stream_insert.h"
#include "fdw/stream_open.h"
#include "fdw/streams.h"

PG_FUNCTION_INFO_V1(trafficdb_streams_handler);
PG_FUNCTION_INFO_V1(trafficdb_streams_validator);

/* ---- planning: the time range --------------------------------------------- */

/* fdw_private: the kinds of the pushed bounds (TdbTimeBound, one per fdw_exprs entry). */

static int
ts_attno(RelOptInfo *baserel, Oid relid)
{
	(void) baserel;
	return get_attnum(relid, "ts");
}

/*
 * Is clause "ts op expr" (or "expr op ts") with expr free of this table's
 * columns and volatile functions?  Sets the bound kind and the expression.
 */
static bool
time_bound(Expr *clause, Index relid, AttrNumber ts, int *kind, Expr **value)
{
	OpExpr	   *op;
	Expr	   *l,
			   *r;
	bool		swap;

	if (!IsA(clause, OpExpr) || list_length(((OpExpr *) clause)->args) != 2)
		return false;
	op = (OpExpr *) clause;
	l = linitial(op->args);
	r = lsecond(op->args);
	if (IsA(l, Var) && (Index) ((Var *) l)->varno == relid && ((Var *) l)->varattno == ts && ((Var *) l)->varlevelsup == 0)
		swap = false;
	else if (IsA(r, Var) && (Index) ((Var *) r)->varno == relid && ((Var *) r)->varattno == ts && ((Var *) r)->varlevelsup == 0)
	{
		swap = true;
		r = l;
	}
	else
		return false;
	if (exprType((Node *) r) != TIMESTAMPTZOID || contain_volatile_functions((Node *) r) ||
		bms_is_member(relid, pull_varnos(NULL, (Node *) r)))
		return false;
	/* the default btree comparisons of timestamptz only */
	if ((*kind = tdb_time_bound_of(op->opno, swap)) < 0)
		return false;
	*value = r;
	return true;
}

typedef struct PlanInfo
{
	List	   *bounds;			/* Expr of each pushed bound */
	List	   *kinds;			/* int of each */
} PlanInfo;

static void
strGetForeignRelSize(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	PlanInfo   *pi = palloc0(sizeof(PlanInfo));
	AttrNumber	ts = ts_attno(baserel, foreigntableid);
	ListCell   *lc;
	double		sel = 1.0;

	(void) root;
	foreach(lc, baserel->baserestrictinfo)
	{
		RestrictInfo *ri = lfirst(lc);
		int			kind;
		Expr	   *value;

		if (ts != InvalidAttrNumber && time_bound(ri->clause, baserel->relid, ts, &kind, &value))
		{
			pi->bounds = lappend(pi->bounds, value);
			pi->kinds = lappend_int(pi->kinds, kind);
			sel *= kind == TDB_BOUND_EQ ? 0.0001 : 0.3;
		}
	}
	baserel->fdw_private = pi;
	/* no statistics: a stream is long, a time window much shorter */
	baserel->rows = Max(1.0, 100000.0 * sel);
}

static void
strGetForeignPaths(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	(void) foreigntableid;
	add_path(baserel, (Path *) create_foreignscan_path(root, baserel, NULL, baserel->rows,
													   10, 10 + baserel->rows * 0.01,
													   NIL, NULL, NULL, NIL));
}

static ForeignScan *
strGetForeignPlan(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid, ForeignPath *best_path,
				  List *tlist, List *scan_clauses, Plan *outer_plan)
{
	PlanInfo   *pi = baserel->fdw_private;

	(void) root;
	(void) foreigntableid;
	(void) best_path;
	/* every clause stays for PostgreSQL to check: the bounds only narrow the scan */
	scan_clauses = extract_actual_clauses(scan_clauses, false);
	return make_foreignscan(tlist, scan_clauses, baserel->relid, pi->bounds, list_make1(pi->kinds),
							NIL, NIL, outer_plan);
}

/* ---- scanning ------------------------------------------------------------- */

typedef struct StrScan
{
	StreamHandle *h;
	int		   *colmap;
	List	   *bound_states;	/* ExprState per bound */
	List	   *kinds;
	Tuplestorestate *rows;
	TupleTableSlot *mslot;		/* the tuplestore's minimal tuples come out here */
	bool		filled;
	TupleDesc	tupdesc;
	int64		from_pg,
				to_pg;			/* the evaluated range, for EXPLAIN ANALYZE */
	bool		empty;
	uint64		sectors;		/* sectors read (revalidation or opening included), for EXPLAIN ANALYZE */
} StrScan;

typedef struct FillArg
{
	StrScan  *st;
	const TdbStreamDef *d;
	Datum	   *values;
	bool	   *nulls;
} FillArg;

static int
fill_visit(const TdbStreamRecord *rec, void *p)
{
	FillArg    *a = p;
	StrScan  *st = a->st;

	if (rec->discontinuity)
		return 0;
	for (int c = 0; c < st->tupdesc->natts; c++)
	{
		int			f = st->colmap[c];

		if (f == -1)
		{
			a->values[c] = TimestampTzGetDatum(rec->ts - UNIX_TO_PG_US);
			a->nulls[c] = false;
		}
		else if (f >= 0)
		{
			a->nulls[c] = rec->vals[f].isnull;
			a->values[c] = a->nulls[c] ? (Datum) 0 : stream_field_datum(a->d->fields[f].type, &rec->vals[f]);
		}
		else
			a->nulls[c] = true;
	}
	tuplestore_putvalues(st->rows, st->tupdesc, a->values, a->nulls);
	CHECK_FOR_INTERRUPTS();
	return 0;
}

void
strBeginForeignScan(ForeignScanState *node, int eflags)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	EState	   *estate = node->ss.ps.state;
	Relation	rel = node->ss.ss_currentRelation;
	StrScan  *st = palloc0(sizeof(StrScan));
	ListCell   *lc;

	node->fdw_state = st;
	st->tupdesc = RelationGetDescr(rel);
	st->kinds = linitial(plan->fdw_private);
	foreach(lc, plan->fdw_exprs)
		st->bound_states = lappend(st->bound_states, ExecInitExpr(lfirst(lc), (PlanState *) node));
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	/* the file is opened (and locked) only while the scan reads its range */
	st->mslot = ExecInitExtraTupleSlot(estate, st->tupdesc, &TTSOpsMinimalTuple);
}

/* Evaluate the bounds into [from, to] (Unix microseconds); false if empty. */
static bool
eval_range(ForeignScanState *node, StrScan *st, int64 *from, int64 *to)
{
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	ListCell   *lb,
			   *lk;

	*from = PG_INT64_MIN + 1;
	*to = PG_INT64_MAX;
	forboth(lb, st->bound_states, lk, st->kinds)
	{
		bool		isnull;
		Datum		d = ExecEvalExpr(lfirst(lb), econtext, &isnull);

		if (isnull || !tdb_time_bound_apply(lfirst_int(lk), DatumGetTimestampTz(d), from, to))
			return false;		/* ts op NULL is never true; nor ts < -infinity */
	}
	return *from <= *to;
}

static TupleTableSlot *
strIterateForeignScan(ForeignScanState *node)
{
	StrScan  *st = node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;

	if (!st->filled)
	{
		int64		from,
					to;
		MemoryContext old = MemoryContextSwitchTo(node->ss.ps.state->es_query_cxt);
		FillArg		a;
		int			rc;

		st->rows = tuplestore_begin_heap(false, false, work_mem);
		st->filled = true;
		/*
		 * Read the range into the tuplestore under the lock, then let go of
		 * the file: an open cursor does not keep writers waiting.
		 */
		st->h = stream_open(RelationGetRelid(node->ss.ss_currentRelation), false,
							node->ss.ps.state->es_query_cxt);
		if (st->colmap == NULL)
			st->colmap = stream_column_map(node->ss.ss_currentRelation,
									&tdb_stream_schema(st->h->db)->streams[st->h->stream]);
		st->empty = !eval_range(node, st, &from, &to);
		st->from_pg = from;
		st->to_pg = to;
		if (!st->empty)
		{
			a.st = st;
			a.d = &tdb_stream_schema(st->h->db)->streams[st->h->stream];
			a.values = palloc(sizeof(Datum) * st->tupdesc->natts);
			a.nulls = palloc(sizeof(bool) * st->tupdesc->natts);
			rc = tdb_stream_range(st->h->db, st->h->stream, from, to, fill_visit, &a);
			if (rc != TDB_STREAM_OK)
				ereport(ERROR,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("could not read stream \"%s\" of \"%s\": %s", a.d->name, st->h->filename,
								tdb_stream_errmsg(st->h->db))));
		}
		st->sectors += stream_handle_sectors(st->h);
		stream_handle_close(st->h);
		st->h = NULL;
		MemoryContextSwitchTo(old);
	}

	/*
	 * A tuplestore spilled to disk reads each tuple into memory of the
	 * current context, and the slot frees it when the next one comes: not
	 * the per-tuple context this runs in, which is reset in between.
	 */
	{
		MemoryContext old = MemoryContextSwitchTo(node->ss.ps.state->es_query_cxt);
		bool		got = tuplestore_gettupleslot(st->rows, true, false, st->mslot);

		MemoryContextSwitchTo(old);
		if (!got)
			return ExecClearTuple(slot);
	}
	return ExecCopySlot(slot, st->mslot);
}

static void
strReScanForeignScan(ForeignScanState *node)
{
	StrScan  *st = node->fdw_state;

	/* parameters may have changed: read again */
	if (st->rows)
		tuplestore_end(st->rows);
	st->rows = NULL;
	st->filled = false;
}

static void
strEndForeignScan(ForeignScanState *node)
{
	StrScan  *st = node->fdw_state;

	if (st != NULL && st->rows)
		tuplestore_end(st->rows);
	if (st != NULL && st->h != NULL)
		stream_handle_close(st->h);
}

static void
strExplainForeignScan(ForeignScanState *node, ExplainState *es)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	StrScan  *st = node->fdw_state;
	List	   *context = set_deparse_context_plan(es->deparse_cxt, (Plan *) plan, NIL);
	StringInfoData buf;
	ListCell   *lb,
			   *lk;

	initStringInfo(&buf);
	forboth(lb, plan->fdw_exprs, lk, st->kinds)
		appendStringInfo(&buf, "%sts %s %s", buf.len ? " AND " : "", tdb_time_bound_ops[lfirst_int(lk)],
						 deparse_expression(lfirst(lb), context, false, false));
	ExplainPropertyText("Stream File", stream_server_filename(GetForeignServer(GetForeignTable(
									RelationGetRelid(node->ss.ss_currentRelation))->serverid)), es);
	ExplainPropertyText("Time Range Pushed Down", buf.len ? buf.data : "none (whole stream)", es);
	if (es->analyze && st->filled)
	{
		/* timestamptz_to_str() returns a static buffer: copy each in turn */
		char	   *from = pstrdup(st->from_pg == PG_INT64_MIN + 1 ? "-infinity" :
								   timestamptz_to_str(st->from_pg - UNIX_TO_PG_US));
		char	   *to = pstrdup(st->to_pg == PG_INT64_MAX ? "infinity" :
								 timestamptz_to_str(st->to_pg - UNIX_TO_PG_US));

		ExplainPropertyText("Time Range Read", st->empty ? "empty" : psprintf("%s to %s", from, to), es);
		/* 512-byte sectors the scans read, the revalidation of the kept file (or its opening) included */
		ExplainPropertyUInteger("Sectors Read", NULL, st->sectors, es);
	}
}

/* ---- IMPORT FOREIGN SCHEMA --------------------------------------------------- */

static List *
strImportForeignSchema(ImportForeignSchemaStmt *stmt, Oid serverOid)
{
	ForeignServer *server = GetForeignServer(serverOid);
	char	   *filename = stream_server_filename(server);
	StreamHandle *h;
	List	   *cmds = NIL;
	const TdbStreamSchema *sc;

	/*
	 * Opened as the readers open it (stream_open.c): read-only, locked
	 * shared through the backend's lock of the file.  It opened the file
	 * read-write, so a file the server may read but not write could be
	 * queried through a table written by hand but not imported.
	 */
	h = stream_open_file(filename, psprintf("server %s", server->servername), NULL, false, CurrentMemoryContext);
	sc = tdb_stream_schema(h->db);
	for (uint32 s = 0; s < sc->nstreams; s++)
	{
		const TdbStreamDef *d = &sc->streams[s];
		StringInfoData sql;
		bool		wanted = stmt->list_type == FDW_IMPORT_SCHEMA_ALL;
		ListCell   *lc;

		foreach(lc, stmt->table_list)
		{
			bool		named = strcmp(((RangeVar *) lfirst(lc))->relname, d->name) == 0;

			if (stmt->list_type == FDW_IMPORT_SCHEMA_LIMIT_TO && named)
				wanted = true;
		}
		if (stmt->list_type == FDW_IMPORT_SCHEMA_EXCEPT)
		{
			wanted = true;
			foreach(lc, stmt->table_list)
				if (strcmp(((RangeVar *) lfirst(lc))->relname, d->name) == 0)
				wanted = false;
		}
		if (!wanted)
			continue;
		initStringInfo(&sql);
		appendStringInfo(&sql, "CREATE FOREIGN TABLE %s (ts timestamptz NOT NULL", quote_identifier(d->name));
		for (uint32 f = 0; f < d->nfields; f++)
			appendStringInfo(&sql, ", %s %s%s", quote_identifier(d->fields[f].name),
							 format_type_be(stream_field_pg_type(d->fields[f].type)),
							 d->fields[f].nullable ? "" : " NOT NULL");
		appendStringInfo(&sql, ") SERVER %s OPTIONS (stream %s)", quote_identifier(server->servername),
						 quote_literal_cstr(d->name));
		cmds = lappend(cmds, sql.data);
	}
	stream_handle_close(h);
	return cmds;
}

Datum
trafficdb_streams_handler(PG_FUNCTION_ARGS)
{
	FdwRoutine *r;

	/* every callback of this wrapper comes from here: check once */
	tdb_require_preload();
	r = makeNode(FdwRoutine);

	(void) fcinfo;
	r->GetForeignRelSize = strGetForeignRelSize;
	r->GetForeignPaths = strGetForeignPaths;
	r->GetForeignPlan = strGetForeignPlan;
	r->BeginForeignScan = strBeginForeignScan;
	r->IterateForeignScan = strIterateForeignScan;
	r->ReScanForeignScan = strReScanForeignScan;
	r->EndForeignScan = strEndForeignScan;
	r->ExplainForeignScan = strExplainForeignScan;
	r->BeginForeignModify = strBeginForeignModify;
	r->ExecForeignInsert = strExecForeignInsert;
	r->EndForeignModify = strEndForeignModify;
	r->BeginForeignInsert = strBeginForeignInsert;
	r->EndForeignInsert = strEndForeignModify;
	r->IsForeignRelUpdatable = strIsForeignRelUpdatable;
	r->ImportForeignSchema = strImportForeignSchema;
	PG_RETURN_POINTER(r);
}

/*
 * Options: filename on the server (superuser or pg_read_server_files, as
 * file_fdw), stream on a table.
 */
Datum
trafficdb_streams_validator(PG_FUNCTION_ARGS)
{
	List	   *options = untransformRelOptions(PG_GETARG_DATUM(0));
	Oid			catalog = PG_GETARG_OID(1);
	ListCell   *lc;

	tdb_require_preload();
	tdb_fdw_check_catalog(catalog, "trafficdb.streams_fdw_validator");
	foreach(lc, options)
	{
		DefElem    *d = lfirst(lc);

		if (catalog == ForeignServerRelationId && strcmp(d->defname, "filename") == 0)
		{
			if (!has_privs_of_role(GetUserId(), ROLE_PG_READ_SERVER_FILES))
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("permission denied to name a stream file"),
						 errdetail("Only roles with privileges of the \"%s\" role may set the filename option.",
								   "pg_read_server_files")));
			if (!is_absolute_path(defGetString(d)))
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
						 errmsg("filename \"%s\" is not an absolute path", defGetString(d))));
		}
		else if (catalog == ForeignTableRelationId && strcmp(d->defname, "stream") == 0)
			(void) defGetString(d);
		else
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("invalid option \"%s\" for trafficdb_streams", d->defname),
					 errhint("Servers take filename; foreign tables take stream.")));
	}
	PG_RETURN_VOID();
}

