/*-------------------------------------------------------------------------
 *
 * locations.c
 *	  The locations foreign data wrapper: trafficdb's published map and
 *	  traffic as a table, read from shared memory.
 *
 * What is pushed down, so that results are always those of the same query
 * on a heap table:
 *	 - location_id = expr, = ANY(array expr), IN (...): hash lookups, and a
 *	   parameterized path for joins on location_id (one lookup per outer row);
 *	 - geom && expr: an R-tree query comparing the same outward-rounded float
 *	   boxes as PostGIS's && (exact: neither needs a recheck);
 *	 - ST_Intersects(geom, expr), ST_DWithin on geometry (degrees) and on
 *	   geography (metres): an R-tree query on a box that holds every answer
 *	   (on geography, with the poleward bulge of the query's great-circle
 *	   edges), rechecked by PostgreSQL;
 *	 - ORDER BY geom <-> expr LIMIT k with no WHERE, expr a point: the k
 *	   nearest and their ties, which PostgreSQL sorts;
 *	 - ORDER BY geom <-> expr, geom <#> expr, geom::geography <-> expr with
 *	   any WHERE and any LIMIT: nearest first, incrementally (src/knn.c),
 *	   each candidate measured by the query's own ORDER BY expression;
 *	 - spatial joins (the spatial forms above and the predicates below with
 *	   expr naming other tables' columns, e.g. ST_DWithin(l.geom, p.geom, d),
 *	   ST_Within(l.geom, ST_Buffer(p.geom, r))): a path parameterized by
 *	   those tables, one R-tree query per outer row of a nested loop
 *	   (add_spatial_join_paths).
 *	 - rechecked by PostgreSQL, like a GiST index's candidates:
 *	   ST_Within, ST_Contains, ST_Covers, ST_CoveredBy, ST_Crosses,
 *	   ST_Touches, ST_Equals, ST_3DIntersects (either argument geom): an
 *	   R-tree query on box2d(expr); ST_DFullyWithin and ST_3DDWithin: on
 *	   box2d(expr) grown by the distance; geom @ expr, geom ~ expr, geom ~=
 *	   expr (either way round): on box2d(expr); ST_Intersects, ST_Covers and
 *	   ST_CoveredBy of geom::geography: on the geography box of expr grown by
 *	   a metre (see box_predicates);
 *	 - location_id <, <=, >, >= expr, BETWEEN: an id range (a hash lookup per
 *	   id when short, else a pass over the records' ids, not their shapes);
 *	 - a OR b OR ...: the union of the parts' candidates when each part is
 *	   one of the above (an AND part by its best conjunct).
 * Key filters are preferred to boxes, and boxes to id ranges.  A pushed
 * clause f(geom, expr[, d]) that needs a recheck is rechecked by the scan
 * with the values of expr and d it evaluated once (own_recheck), not by
 * PostgreSQL's filter, which would evaluate expr again per candidate.
 * PostGIS is found through the extension catalog, whatever its schema.  expr
 * may be a constant, a parameter or any stable expression of them (and of an
 * outer row's columns in a join): it is evaluated once per scan (or per
 * rescan).
 *
 * A scan reads the snapshot of its statement (READ COMMITTED) or
 * transaction (REPEATABLE READ, SERIALIZABLE): one generation throughout.
 *
 * This file holds the handler, the validator, EXPLAIN and IMPORT FOREIGN
 * SCHEMA; what is pushable is decided in locations_classify.c (with
 * pushdown.c, shared with the trail FDW), planned in locations_plan.c,
 * and scanned in locations_scan.c and locations_candidates.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/reloptions.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/explain.h"
#include "miscadmin.h"
#include "executor/executor.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "parser/parse_func.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "fdw/locations_internal.h"
#include "fdw/timebound.h"
#include "knn.h"
#include "module/geometry.h"
#include "module/shared.h"
#include "module/snapshot.h"
#include "module/trafficdb.h"

PG_FUNCTION_INFO_V1(trafficdb_locations_handler);
PG_FUNCTION_INFO_V1(trafficdb_locations_validator);

static void
locExplainForeignScan(ForeignScanState *node, ExplainState *es)
{
	LocScanState *st = node->fdw_state;
	const char *desc = st->description;

	/*
	 * Say what the scans did: a k-nearest search from an argument that was
	 * not a point read everything.
	 */
	if (es->analyze && st->kind == PUSH_KNN && st->knn_full_scans > 0 && st->knn_scans == 0)
		desc = psprintf("none (full scan: %s is not a point)", st->knn_arg);
	else if (es->analyze && st->kind == PUSH_KNN && st->knn_scans > 0)
		desc = psprintf("the " INT64_FORMAT " nearest to %s, and their ties", st->k, st->knn_arg);
	ExplainPropertyText("TrafficDB Pushdown", desc, es);
	if (st->recheck != NULL)
		ExplainPropertyText("TrafficDB Recheck", psprintf("%s, its arguments evaluated once per scan", st->recheck_desc), es);
	if (es->analyze && st->kind == PUSH_KNN && st->knn_full_scans > 0 && st->knn_scans > 0)
		ExplainPropertyInteger("Full Scans, Not From a Point", NULL, (int64) st->knn_full_scans, es);
	if (es->analyze)
	{
		/* nearest first: every location whose shape was read to measure or bound it */
		ExplainPropertyInteger("Locations Examined", NULL,
							   (int64) (st->kind == PUSH_KNN_ORDER ? st->knn_measured + st->knn_refined : st->examined), es);
		if (st->kind == PUSH_KNN_ORDER && st->knn_refined > 0)
			ExplainPropertyInteger("Distances Measured by PostGIS", NULL, (int64) st->knn_postgis, es);
		if (st->kind == PUSH_KNN_ORDER && st->prefilter != NULL)
			ExplainPropertyInteger("Rows Removed Before Measuring", NULL, (int64) st->knn_prefiltered, es);
		if (st->radius_clause != NULL)
			ExplainPropertyInteger("Radius Decided by PostGIS", NULL, (int64) st->radius_postgis, es);
		if (st->recheck != NULL)
			ExplainPropertyInteger("Rows Removed by Recheck", NULL, (int64) st->recheck_removed, es);
		if (st->snap)
			ExplainPropertyInteger("Generation", NULL, (int64) st->snap->generation, es);
	}
}

/*
 * IMPORT FOREIGN SCHEMA trafficdb FROM SERVER trafficdb INTO myschema: the
 * one table there is, "locations" (LIMIT TO / EXCEPT apply).
 */
static List *
locImportForeignSchema(ImportForeignSchemaStmt *stmt, Oid serverOid)
{
	StringInfoData sql;
	bool		wanted = true;
	ListCell   *lc;

	(void) serverOid;
	if (strcmp(stmt->remote_schema, "trafficdb") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_SCHEMA_NOT_FOUND),
				 errmsg("trafficdb has no schema \"%s\"", stmt->remote_schema),
				 errhint("IMPORT FOREIGN SCHEMA trafficdb FROM SERVER %s INTO ...", stmt->server_name)));
	if (stmt->list_type == FDW_IMPORT_SCHEMA_LIMIT_TO || stmt->list_type == FDW_IMPORT_SCHEMA_EXCEPT)
	{
		bool		listed = false;

		foreach(lc, stmt->table_list)
			listed |= strcmp(((RangeVar *) lfirst(lc))->relname, "locations") == 0;
		wanted = (stmt->list_type == FDW_IMPORT_SCHEMA_LIMIT_TO) == listed;
	}
	if (!wanted)
		return NIL;
	initStringInfo(&sql);
	appendStringInfo(&sql,
					 "CREATE FOREIGN TABLE locations (location_id bigint, geom %s.geometry(LineString, 4326), "
					 "road_class text, name text, length_m double precision, speed_limit_kmh smallint, "
					 "oneway boolean, speed_kmh real, free_flow_kmh real, congestion smallint, "
					 "confidence smallint, incident text, updated_at timestamptz, generation bigint, "
					 "changed_generation bigint) "
					 "SERVER %s",
					 quote_identifier(get_namespace_name(tdb_postgis_schema())),
					 quote_identifier(stmt->server_name));
	return list_make1(sql.data);
}

Datum
trafficdb_locations_handler(PG_FUNCTION_ARGS)
{
	FdwRoutine *r;

	/* every callback of this wrapper comes from here: check once */
	tdb_require_preload();
	r = makeNode(FdwRoutine);

	r->GetForeignRelSize = locGetForeignRelSize;
	r->GetForeignPaths = locGetForeignPaths;
	r->GetForeignPlan = locGetForeignPlan;
	r->BeginForeignScan = locBeginForeignScan;
	r->IterateForeignScan = locIterateForeignScan;
	r->ReScanForeignScan = locReScanForeignScan;
	r->EndForeignScan = locEndForeignScan;
	r->ExplainForeignScan = locExplainForeignScan;
	r->ImportForeignSchema = locImportForeignSchema;
	PG_RETURN_POINTER(r);
}

/* No options yet: refuse any, naming it. */
Datum
trafficdb_locations_validator(PG_FUNCTION_ARGS)
{
	List	   *options = untransformRelOptions(PG_GETARG_DATUM(0));

	tdb_require_preload();
	tdb_fdw_check_catalog(PG_GETARG_OID(1), "trafficdb.locations_fdw_validator");
	if (options != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("trafficdb_locations takes no options; \"%s\" given",
						((DefElem *) linitial(options))->defname)));
	PG_RETURN_VOID();
}
