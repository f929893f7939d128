/*-------------------------------------------------------------------------
 *
 * trails.c
 *	  The trail foreign data wrapper: a trail file (src/trail/) on a local
 *	  disk, an HTTP server or S3 as a foreign table of events, read page by
 *	  page through the pager's caches; and trafficdb.trail_write(), which
 *	  writes the rows of a query as a trail file.
 *
 *	  CREATE SERVER s3 FOREIGN DATA WRAPPER trafficdb_trails
 *	      OPTIONS (endpoint 'http://127.0.0.1:9000', region 'us-east-1');
 *	  CREATE USER MAPPING FOR CURRENT_USER SERVER s3
 *	      OPTIONS (access_key '...', secret_key '...');
 *	  IMPORT FOREIGN SCHEMA "s3://trails/ais.trail" FROM SERVER s3 INTO public;
 *
 * A table has the trail id column, the time column (timestamptz), geom
 * (geometry(Point, 4326)) and the file's other columns, matched by name.
 * Pushed down to page pruning (the footer's trail index and zone maps):
 * id = x and id = ANY(array); time compared with =, <, <=, >, >=, BETWEEN;
 * geom && box, ST_Intersects(geom, g), ST_DWithin(geom, g, d) and
 * ST_DWithin(geom::geography, g, metres).  Arguments may be constants,
 * parameters or stable expressions.  PostgreSQL checks every clause again,
 * so the results are those of the same query on a table; the pushdown only
 * decides which pages are fetched.  Pages are fetched as rows are asked
 * for, so LIMIT stops fetching.  Of a version-2 page only the chunks of the
 * columns the query uses are fetched.
 *
 * Aggregates (count, min, max, bool_and, bool_or) of the whole file or per
 * trail id, filtered by trail ids only, are answered from the footer's
 * per-trail summaries without fetching a page (GetForeignUpperPaths;
 * trafficdb.trail_footer_aggregates), with PostgreSQL's own semantics.
 *
 * Credentials live in user mappings only (access_key, secret_key,
 * session_token) and appear in no message.  Local paths need
 * pg_read_server_files (reading) or pg_write_server_files (trail_write,
 * a server's cache_dir), as file_fdw's rules.
 *
 * This file holds the handler, the validator, EXPLAIN and IMPORT FOREIGN
 * SCHEMA; options and opening a file are in trails_access.c, planning in
 * trails_plan.c (with pushdown.c, shared with the locations FDW), the scan
 * in trails_scan.c, the footer's aggregates in trails_agg.c and
 * trail_write() in trails_write.c.
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

PG_FUNCTION_INFO_V1(trafficdb_trails_handler);
PG_FUNCTION_INFO_V1(trafficdb_trails_validator);

/*
 * EXPLAIN VERBOSE: the table's columns whose values are fetched.  The trail
 * id and the time always are (they make a page's core); a geometry column,
 * lon or lat stands for the positions.  A version-1 file (known once the
 * scan opened it) is read whole whatever the query uses.
 */
static char *
columns_fetched(ForeignScanState *node, TrlScan *st, const char *idname, const char *timename)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	Bitmapset  *used = trl_plan_used_attrs(plan);
	TupleDesc	td = st->tupdesc;
	StringInfoData b;

	initStringInfo(&b);
	if (bms_is_member(0 - FirstLowInvalidHeapAttributeNumber, used))
		appendStringInfoString(&b, "all (a whole-row reference)");
	else
	{
		appendStringInfo(&b, "%s, %s", quote_identifier(idname), quote_identifier(timename));
		for (int i = 0; i < td->natts; i++)
		{
			Form_pg_attribute a = TupleDescAttr(td, i);

			if (!a->attisdropped && bms_is_member(a->attnum - FirstLowInvalidHeapAttributeNumber, used) &&
				strcmp(NameStr(a->attname), idname) != 0 && strcmp(NameStr(a->attname), timename) != 0)
				appendStringInfo(&b, ", %s", quote_identifier(NameStr(a->attname)));
		}
	}
	if (st->h != NULL && st->h->reader != NULL && tdb_trail_footer(st->h->reader)->version < 2)
		appendStringInfoString(&b, " (the file is version 1: its pages are read whole)");
	return b.data;
}

static void
trlExplainForeignScan(ForeignScanState *node, ExplainState *es)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	TrlScan    *st = node->fdw_state;
	List	   *context = set_deparse_context_plan(es->deparse_cxt, (Plan *) plan, NIL);
	ForeignTable *ft = GetForeignTable(RelationGetRelid(st->rel));
	const char *idname = ID_COLUMN(ft);
	const char *timename = TIME_COLUMN(ft);
	StringInfoData ids,
				times,
				area;
	ListCell   *lk,
			   *la = list_head(plan->fdw_exprs);
	bool		parameterized = intVal(list_nth(plan->fdw_private, TRLP_LOOKUPS)) != 0;
	bool		said_lookup = false;

	initStringInfo(&ids);
	initStringInfo(&times);
	initStringInfo(&area);
	foreach(lk, st->kinds)
	{
		int			kind = lfirst_int(lk);
		char	   *a = deparse_expression(lfirst(la), context, false, false);
		char	   *d = NULL;

		la = lnext(plan->fdw_exprs, la);
		if (kind == PUSH_DWITHIN_DEG || kind == PUSH_DWITHIN_M)
		{
			d = deparse_expression(lfirst(la), context, false, false);
			la = lnext(plan->fdw_exprs, la);
		}
		if (kind <= TDB_BOUND_EQ)
			appendStringInfo(&times, "%s%s %s %s", times.len ? " AND " : "",
							 quote_identifier(timename), tdb_time_bound_ops[kind], a);
		else if (kind == PUSH_ID)
			appendStringInfo(&ids, "%s%s = %s", ids.len ? " AND " : "",
							 quote_identifier(idname), a);
		else if (kind == PUSH_IDS)
			appendStringInfo(&ids, "%s%s = ANY (%s)", ids.len ? " AND " : "",
							 quote_identifier(idname), a);
		else if (kind == PUSH_BOX)
			appendStringInfo(&area, "%sbox of %s", area.len ? " AND " : "", a);
		else
			appendStringInfo(&area, "%sbox of %s grown by %s%s", area.len ? " AND " : "", a, d,
							 kind == PUSH_DWITHIN_M ? " metres" : "");
		if ((kind == PUSH_ID || kind == PUSH_IDS) && parameterized && !said_lookup)
		{
			appendStringInfoString(&ids, " (the outer row's value: one pruned lookup per outer row)");
			said_lookup = true;
		}
	}
	ExplainPropertyText("Trail File", trl_table_option_or(ft, "url", "(none)"), es);
	if (ids.len)
		ExplainPropertyText("Trail Ids Pushed Down", ids.data, es);
	if (times.len)
		ExplainPropertyText("Time Range Pushed Down", times.data, es);
	if (area.len)
		ExplainPropertyText("Area Pushed Down", area.data, es);
	if (st->exact)
	{
		/* PostgreSQL's Filter no longer shows it: say who checks it, and what it removed */
		ExplainPropertyText("Area Checked By The Scan",
							psprintf("ST_Intersects(%s, rectangle %.17g %.17g, %.17g %.17g), exactly: no recheck",
									 quote_identifier(NameStr(TupleDescAttr(st->tupdesc,
																			  trail_cols(RelationGetRelid(st->rel)).geom - 1)->attname)),
									 st->exact_box[0], st->exact_box[1], st->exact_box[2], st->exact_box[3]), es);
		if (es->analyze)
			ExplainPropertyUInteger("Rows Removed by Area Check", NULL, st->exact_removed, es);
	}
	if (st->id_state != NULL)
	{
		/* no Filter repeats it on every row: say who checks it */
		ExplainPropertyText("Trail Id Checked By The Scan",
							psprintf("%s: the rows of the trails looked up are those it holds for",
									 deparse_expression((Node *) st->id_state->expr, context, false, false)), es);
		if (es->analyze && st->id_asked > 0)
		{
			/* the file could not answer it (a bigint column over string ids) */
			ExplainPropertyUInteger("Rows Removed by Id Check", NULL, st->id_removed, es);
			ExplainPropertyUInteger("Rows Checked by PostgreSQL", NULL, st->id_asked, es);
		}
	}
	if (st->band)
	{
		ExplainPropertyText("Distance Checked By The Scan",
							psprintf("%s: the great-circle distance settles the rows 1 %% and 1 m or more from the circle, the WGS 84 geodesic (or the sphere, use_spheroid false) those 1 cm or more, PostGIS the others",
									 deparse_expression(llast(plan->fdw_exprs), context, false, false)), es);
		if (es->analyze)
		{
			ExplainPropertyUInteger("Rows Removed by Distance Check", NULL, st->band_removed, es);
			ExplainPropertyUInteger("Rows Checked by PostGIS", NULL, st->band_asked, es);
		}
	}
	if (st->agg)
	{
		ExplainPropertyText("Aggregates From Footer", strVal(list_nth(plan->fdw_private, AGGP_TEXT)), es);
		if (st->grouped)
			ExplainPropertyText("Grouped By Trail Id", quote_identifier(idname), es);
		if (es->analyze && st->scanned)
			ExplainPropertyText("Footer Summaries", "missing (the file was replaced since planning): computed from its pages", es);
	}
	else if (es->verbose)
		ExplainPropertyText("Columns Fetched", columns_fetched(node, st, idname, timename), es);
	if (es->analyze && st->h != NULL && st->h->pager != NULL)
	{
		TdbPagerStats ps;
		const TdbTrailFooter *f = tdb_trail_footer(st->h->reader);
		bool		remote = trl_is_remote_url(st->h->url);

		trl_end_scan(st);
		tdb_pager_stats(st->h->pager, &ps);
		if (parameterized)
			ExplainPropertyInteger("Trail Lookups", NULL, st->nscans, es);
		ExplainPropertyUInteger("Trail Pages Read", NULL, st->stats.pages_read, es);
		if (st->h->page_cache != NULL)
		{
			TdbTrailPageCacheStats cs;

			/* lookups after the first: pages taken decoded from the earlier ones */
			tdb_trail_page_cache_stats(st->h->page_cache, &cs);
			ExplainPropertyUInteger("Trail Pages Reused", NULL, st->stats.pages_reused, es);
			ExplainPropertyUInteger("Trail Page Cache Peak", "bytes", cs.peak_bytes, es);
			/* what every scan's cache of the backend held together, at most */
			ExplainPropertyUInteger("Trail Page Cache Backend Peak", "bytes", cs.pool_peak_bytes, es);
			if (parameterized)
				ExplainPropertyText("Trail Pages Fetched Ahead",
									st->stats.union_exact ?
									psprintf("those of the %d %s of the outer VALUES list, at the first lookup", st->outer_nids,
											 st->outer_nids == 1 ? "id" : "ids") :
									st->stats.union_prefetched ?
									psprintf("those of all %d lookups expected, at the first", intVal(list_nth(plan->fdw_private, TRLP_LOOKUPS))) :
									"each lookup's own", es);
		}
		ExplainPropertyUInteger("Trail Pages Pruned", NULL, st->stats.pages_pruned, es);
		ExplainPropertyUInteger("Trail Pages In File", NULL, f->npages, es);
		/* rounds of concurrent range GETs the scans announced (remote files) */
		if (remote)
			ExplainPropertyUInteger("Trail Read-Ahead Windows", NULL, st->stats.windows, es);
		/* of the pages read: all their bytes, or (version 2) the chunks of the columns used */
		ExplainPropertyUInteger("Trail Page Bytes Read", "bytes", st->stats.bytes_read, es);
		if (remote)
		{
			ExplainPropertyUInteger(strncmp(st->h->url, "s3://", 5) == 0 ? "Bytes From S3" : "Bytes From HTTP",
									"bytes", ps.bytes_network, es);
			ExplainPropertyUInteger("Bytes From Disk Cache", "bytes", ps.bytes_disk_cache, es);
			ExplainPropertyUInteger("Bytes From Memory Cache", "bytes", ps.bytes_memory, es);
			ExplainPropertyUInteger("Requests", NULL, ps.requests, es);
			ExplainPropertyUInteger("Retries", NULL, ps.retries, es);
			/* as track_io_timing's I/O Timings: only with the nodes' own timing */
			if (es->timing)
				ExplainPropertyFloat("Time Waiting For Reads", "ms", ps.wait_seconds * 1000.0, 3, es);
			/* whether this query asked the server for size and ETag */
			if (ps.validation_by_token)
				ExplainPropertyText("Object Validated",
									"by this statement's planning (its requests and bytes are not counted here)", es);
			else if (ps.validation_reused)
				ExplainPropertyText("Object Validated",
									psprintf("%.0f s earlier (revalidate_interval)", ps.validation_age), es);
			else
				ExplainPropertyText("Object Validated", "by this query", es);
		}
		else
			ExplainPropertyUInteger("Bytes From Local File", "bytes", ps.bytes_local, es);
		ExplainPropertyUInteger("File Size", "bytes", tdb_pager_size(st->h->pager), es);
	}
}

/* ---- IMPORT FOREIGN SCHEMA "url" --------------------------------------------------------- */

static const char *
trail_type_sql(TdbTrailType t)
{
	return t == TDB_TRAIL_INT64 ? "bigint" : t == TDB_TRAIL_FLOAT64 ? "double precision" :
		t == TDB_TRAIL_BOOL ? "boolean" : "text";
}

static List *
trlImportForeignSchema(ImportForeignSchemaStmt *stmt, Oid serverOid)
{
	ForeignServer *server = GetForeignServer(serverOid);
	const char *url = stmt->remote_schema;
	char	   *table = NULL;
	const char *base;
	char	   *dot;
	TrailHandle *h;
	const TdbTrailSchema *sc;
	StringInfoData sql;
	ListCell   *lc;
	bool		wanted;
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "trail import", ALLOCSET_SMALL_SIZES);

	foreach(lc, stmt->options)
	{
		DefElem    *d = lfirst(lc);

		if (strcmp(d->defname, "table_name") == 0)
			table = defGetString(d);
		else
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("invalid IMPORT FOREIGN SCHEMA option \"%s\" for trafficdb_trails", d->defname),
					 errhint("The only option is table_name.")));
	}
	trl_check_url(url, false);
	if (table == NULL)
	{
		/* the file's name without its extension */
		base = strrchr(url, '/') ? strrchr(url, '/') + 1 : url;
		table = pstrdup(base);
		if ((dot = strchr(table, '.')) != NULL && dot != table)
			*dot = '\0';
	}
	wanted = stmt->list_type != FDW_IMPORT_SCHEMA_LIMIT_TO;
	foreach(lc, stmt->table_list)
		if (strcmp(((RangeVar *) lfirst(lc))->relname, table) == 0)
			wanted = stmt->list_type == FDW_IMPORT_SCHEMA_LIMIT_TO;
	if (!wanted)
		return NIL;
	h = trail_open_ext(server, NULL, url, cxt, false, true);	/* the schema: the head alone */
	sc = &tdb_trail_footer(h->reader)->schema;
	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE FOREIGN TABLE %s (%s %s NOT NULL, %s timestamptz NOT NULL, geom %s.geometry(Point, 4326) NOT NULL",
					 quote_identifier(table), quote_identifier(sc->id_name),
					 sc->id_type == TDB_TRAIL_STRING ? "text" : "bigint", quote_identifier(sc->time_name),
					 quote_identifier(get_namespace_name(tdb_postgis_schema())));
	for (int c = 0; c < sc->ncolumns; c++)
		appendStringInfo(&sql, ", %s %s", quote_identifier(sc->columns[c].name), trail_type_sql(sc->columns[c].type));
	appendStringInfo(&sql, ") SERVER %s OPTIONS (url %s, id_column %s, time_column %s)",
					 quote_identifier(server->servername), quote_literal_cstr(url),
					 quote_literal_cstr(sc->id_name), quote_literal_cstr(sc->time_name));
	MemoryContextDelete(cxt);	/* closes the file */
	return list_make1(sql.data);
}

/* The next row: of events (trails_scan.c), or of aggregates from the footer (trails_agg.c). */
static TupleTableSlot *
trlIterate(ForeignScanState *node)
{
	TrlScan    *st = node->fdw_state;

	return st->agg ? trl_agg_iterate(node, st) : trlIterateForeignScan(node);
}

Datum
trafficdb_trails_handler(PG_FUNCTION_ARGS)
{
	FdwRoutine *r;

	/* every callback of this wrapper comes from here: check once */
	tdb_require_preload();
	r = makeNode(FdwRoutine);

	(void) fcinfo;
	r->GetForeignRelSize = trlGetForeignRelSize;
	r->GetForeignPaths = trlGetForeignPaths;
	r->GetForeignPlan = trlGetForeignPlan;
	r->BeginForeignScan = trlBeginForeignScan;
	r->IterateForeignScan = trlIterate;
	r->ReScanForeignScan = trlReScanForeignScan;
	r->EndForeignScan = trlEndForeignScan;
	r->ExplainForeignScan = trlExplainForeignScan;
	r->GetForeignUpperPaths = trlGetForeignUpperPaths;
	r->ImportForeignSchema = trlImportForeignSchema;
	PG_RETURN_POINTER(r);
}

/*
 * Options.  Servers: endpoint, region, path_style, block_size, cache_dir
 * (pg_write_server_files), cache_size, parallel, readahead, retries,
 * revalidate_interval.  Tables: url (a local path needs
 * pg_read_server_files), id_column, time_column, revalidate_interval,
 * footer_aggregates (on: aggregates may come from the footer).
 * User mappings: access_key, secret_key, session_token.
 */
Datum
trafficdb_trails_validator(PG_FUNCTION_ARGS)
{
	List	   *options = untransformRelOptions(PG_GETARG_DATUM(0));
	Oid			catalog = PG_GETARG_OID(1);
	ListCell   *lc;
	static const char *const server_opts[] = {"endpoint", "region", "path_style", "block_size", "cache_dir",
	"cache_size", "parallel", "readahead", "retries", "revalidate_interval", NULL};
	static const char *const table_opts[] = {"url", "id_column", "time_column", "revalidate_interval",
	"footer_aggregates", NULL};
	static const char *const mapping_opts[] = {"access_key", "secret_key", "session_token", NULL};

	tdb_require_preload();
	tdb_fdw_check_catalog(catalog, "trafficdb.trails_fdw_validator");
	foreach(lc, options)
	{
		DefElem    *d = lfirst(lc);
		const char *const *allowed = catalog == ForeignServerRelationId ? server_opts :
			catalog == ForeignTableRelationId ? table_opts :
			catalog == UserMappingRelationId ? mapping_opts : NULL;
		bool		ok = false;
		char	   *v;

		for (int i = 0; allowed != NULL && allowed[i] != NULL; i++)
			ok |= strcmp(allowed[i], d->defname) == 0;
		if (!ok)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("invalid option \"%s\" for trafficdb_trails", d->defname),
					 errhint("Servers take endpoint, region, path_style, block_size, cache_dir, cache_size, parallel, readahead, retries, revalidate_interval; "
							 "foreign tables take url, id_column, time_column, revalidate_interval, footer_aggregates; user mappings take access_key, secret_key, session_token.")));
		v = defGetString(d);
		if (strcmp(d->defname, "endpoint") == 0 &&
			strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("invalid value for option \"endpoint\": \"%s\"", v),
					 errdetail("Expected http://host[:port] or https://host[:port].")));
		else if (strcmp(d->defname, "path_style") == 0 || strcmp(d->defname, "footer_aggregates") == 0)
			(void) defGetBoolean(d);
		else if (strcmp(d->defname, "block_size") == 0)
			(void) trl_bytes_option("block_size", v, 16 << 10, 16 << 20, true);
		else if (strcmp(d->defname, "cache_size") == 0)
			(void) trl_bytes_option("cache_size", v, 1 << 20, INT64CONST(1) << 50, false);
		else if (strcmp(d->defname, "parallel") == 0)
			(void) trl_int_option("parallel", v, 1, 64);
		else if (strcmp(d->defname, "readahead") == 0)
			(void) trl_int_option("readahead", v, -1, 1024);
		else if (strcmp(d->defname, "retries") == 0)
			(void) trl_int_option("retries", v, 0, 100);
		else if (strcmp(d->defname, "revalidate_interval") == 0)
			(void) trl_int_option("revalidate_interval", v, 0, REVALIDATE_MAX);
		else if (strcmp(d->defname, "cache_dir") == 0 && strcmp(v, "none") != 0)
		{
			if (!is_absolute_path(v))
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("cache_dir \"%s\" is not an absolute path", v)));
			if (!has_privs_of_role(GetUserId(), ROLE_PG_WRITE_SERVER_FILES))
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("permission denied to set cache_dir"),
						 errdetail("Only roles with privileges of the \"%s\" role may name directories on the server.",
								   "pg_write_server_files")));
		}
		else if (strcmp(d->defname, "url") == 0)
			trl_check_url(v, false);
	}
	PG_RETURN_VOID();
}

