/*-------------------------------------------------------------------------
 *
 * regions.c
 *	  A fleet of region nodes (docs/fleet.md):
 *	  - trafficdb._feed_owned(), the feed's CHECK: on a node serving a
 *	    region's map, a feed row for a location another region owns is
 *	    refused at once, naming that region and its server;
 *	  - a planner hook that leaves out of a query the foreign tables of
 *	    trafficdb_global (one per region) whose bounds the query's spatial
 *	    clauses cannot touch, so that a box in one region contacts only that
 *	    region's node.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_operator.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/guc.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "miscadmin.h"

#include "module/geometry.h"
#include "module/regions.h"
#include "module/shared.h"
#include "module/snapshot.h"
#include "module/trafficdb.h"

PG_FUNCTION_INFO_V1(trafficdb_feed_owned);

/* ---- the feed's check -------------------------------------------------------- */

/*
 * The map's source, its columns and the role that loaded it, from
 * trafficdb.map_source, read directly: the feed's writers have no SELECT on
 * it.  False when there is none, or its table or role is gone.
 */
static bool
map_source_of(Oid *relid, NameData *idcol, NameData *geomcol, Oid *loaded_by)
{
	Oid			nsp = get_namespace_oid("trafficdb", true);
	Oid			msrc = OidIsValid(nsp) ? get_relname_relid("map_source", nsp) : InvalidOid;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	bool		found = false;
	Snapshot	snap;

	if (!OidIsValid(msrc))
		return false;
	rel = table_open(msrc, AccessShareLock);
	snap = RegisterSnapshot(GetLatestSnapshot());
	scan = table_beginscan(rel, snap, 0, NULL);
	if ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		TupleDesc	td = RelationGetDescr(rel);
		bool		n1, n2, n3, n4;
		Datum		src = heap_getattr(tup, 2, td, &n1);	/* source */
		Datum		id = heap_getattr(tup, 3, td, &n2); /* id_column */
		Datum		geom = heap_getattr(tup, 4, td, &n3);	/* geom_column */
		Datum		by;
		int			by_att = -1;

		for (int i = 0; i < td->natts; i++)
			if (!TupleDescAttr(td, i)->attisdropped && strcmp(NameStr(TupleDescAttr(td, i)->attname), "loaded_by") == 0)
				by_att = i + 1;
		by = by_att > 0 ? heap_getattr(tup, by_att, td, &n4) : (Datum) 0;
		if (!n1 && !n2 && !n3 && by_att > 0 && !n4)
		{
			*relid = DatumGetObjectId(src);
			namestrcpy(idcol, NameStr(*DatumGetName(id)));
			namestrcpy(geomcol, NameStr(*DatumGetName(geom)));
			*loaded_by = DatumGetObjectId(by);
			found = get_rel_name(*relid) != NULL &&
				SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(*loaded_by));
		}
	}
	table_endscan(scan);
	UnregisterSnapshot(snap);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * The region of location id in the map's source, read as the role that
 * loaded the map (as the daemon reads it: that role's grants and row
 * security, no code of the source's running as the feed's writer), as a
 * restricted operation whose setting changes are undone; NULL if none.
 */
static char *
source_region_of(int64 id, MemoryContext caller)
{
	Oid			relid;
	NameData	idcol;
	NameData	geomcol;
	Oid			loaded_by;
	volatile Oid loaded_by_v;
	Oid			save_userid;
	int			save_sec;
	int			guc_nest;
	char	   *volatile region = NULL;
	char	   *query;
	Oid			argtype = INT8OID;
	Datum		arg = Int64GetDatum(id);

	if (!map_source_of(&relid, &idcol, &geomcol, &loaded_by))
		return NULL;
	loaded_by_v = loaded_by;
	query = psprintf("SELECT trafficdb.region_of(%s) FROM %s WHERE %s OPERATOR(pg_catalog.=) $1 LIMIT 1",
					 quote_identifier(NameStr(geomcol)),
					 quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), get_rel_name(relid)),
					 quote_identifier(NameStr(idcol)));
	GetUserIdAndSecContext(&save_userid, &save_sec);
	guc_nest = NewGUCNestLevel();
	PG_TRY();
	{
		SetUserIdAndSecContext(loaded_by_v, save_sec | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
		if (SPI_execute_with_args(query, 1, &argtype, &arg, NULL, true, 1) == SPI_OK_SELECT && SPI_processed == 1)
		{
			char	   *v = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

			if (v)
				region = MemoryContextStrdup(caller, v);
		}
	}
	PG_FINALLY();
	{
		AtEOXact_GUC(false, guc_nest);
		SetUserIdAndSecContext(save_userid, save_sec);
	}
	PG_END_TRY();
	return region;
}

/*
 * True unless location_id belongs to another region than the one whose map
 * is published here.  Costs an atomic read per row when the map is not a
 * region's, and one hash lookup when it is; only a location missing from the
 * map looks further (an unknown location is rejected at publication, as on
 * a node without regions).
 */
Datum
trafficdb_feed_owned(PG_FUNCTION_ARGS)
{
	int64		id;
	NameData	mine;
	Datum		arg;
	Oid			argtype = TEXTOID;
	char	   *owner = NULL;
	char	   *server = NULL;
	char	   *reach = NULL;
	MemoryContext caller = CurrentMemoryContext;

	/* NOT NULL reports a NULL id; a server without the library checks nothing */
	if (PG_ARGISNULL(0) || tdb_shared == NULL)
		PG_RETURN_BOOL(true);
	if (pg_atomic_read_u32(&tdb_shared->map_regional) == 0)
		PG_RETURN_BOOL(true);
	id = PG_GETARG_INT64(0);
	if (tdb_backend_find_location((uint64) id) >= 0)
		PG_RETURN_BOOL(true);

	SpinLockAcquire(&tdb_shared->mutex);
	mine = tdb_shared->map_region;
	SpinLockRelease(&tdb_shared->mutex);
	if (NameStr(mine)[0] == '\0')
		PG_RETURN_BOOL(true);

	SPI_connect();
	owner = source_region_of(id, caller);
	if (owner != NULL && strcmp(owner, NameStr(mine)) != 0)
	{
		arg = CStringGetTextDatum(owner);
		if (SPI_execute_with_args("SELECT r.server::pg_catalog.text, "
								  "(SELECT pg_catalog.string_agg(o, ' ') FROM pg_catalog.unnest(s.srvoptions) o "
								  "  WHERE o OPERATOR(pg_catalog.~) '^(host|hostaddr|port|dbname)=') "
								  "FROM trafficdb.regions r LEFT JOIN pg_catalog.pg_foreign_server s "
								  "  ON s.srvname OPERATOR(pg_catalog.=) r.server "
								  "WHERE r.name OPERATOR(pg_catalog.=) $1",
								  1, &argtype, &arg, NULL, true, 1) == SPI_OK_SELECT && SPI_processed == 1)
		{
			HeapTuple	tup = SPI_tuptable->vals[0];
			TupleDesc	td = SPI_tuptable->tupdesc;

			server = SPI_getvalue(tup, td, 1);
			reach = SPI_getvalue(tup, td, 2);
			if (server)
				server = MemoryContextStrdup(caller, server);
			if (reach)
				reach = MemoryContextStrdup(caller, reach);
		}
	}
	SPI_finish();
	if (owner == NULL || strcmp(owner, NameStr(mine)) == 0)
		PG_RETURN_BOOL(true);
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("location " INT64_FORMAT " belongs to region \"%s\", not to region \"%s\" that this node serves",
					id, owner, NameStr(mine)),
			 server ? errdetail("Region \"%s\" is served through server \"%s\"%s%s%s.", owner, server,
								reach ? " (" : "", reach ? reach : "", reach ? ")" : "")
			 : errdetail("trafficdb.regions names no server for region \"%s\".", owner),
			 errhint("Send a location's feed rows to the node of its region; trafficdb.region_of(geom) names the region of a location.")));
	PG_RETURN_BOOL(false);		/* not reached */
}

/* ---- leaving out regions a query cannot touch ---------------------------------- */

static set_rel_pathlist_hook_type prev_set_rel_pathlist = NULL;

/*
 * Spatial predicates p(g, ...) that stay true when g grows: p(g, q) and g
 * inside b imply p(b, q), where g is one of the predicate's geometry
 * arguments (either of the first two; only the first for ~, "contains").
 * PostGIS's functions (of operators too), in PostGIS's schema: anyone's
 * st_intersects elsewhere may mean anything.
 */
static bool
monotone_predicate(Oid funcid, bool *first_only)
{
	static const char *const names[] = {
		"geometry_overlaps", "geography_overlaps", "overlaps_2d",
		"st_intersects", "_st_intersects", "st_dwithin", "_st_dwithin",
	};
	char	   *name = get_func_name(funcid);
	bool		ok = false;

	if (name == NULL)
		return false;
	*first_only = false;
	if (strcmp(name, "geometry_contains") == 0)
		ok = *first_only = true;
	for (size_t i = 0; i < lengthof(names); i++)
		if (strcmp(name, names[i]) == 0)
			ok = true;
	pfree(name);
	return ok && get_func_namespace(funcid) == tdb_extension_schema("postgis");
}

typedef struct BoundsSubst
{
	Index		relid;
	AttrNumber	attno;
	Const	   *bounds;
	bool		other_var;		/* a Var of another column or relation */
	bool		found;
} BoundsSubst;

/* expr with the geometry column replaced by the bounds */
static Node *
subst_bounds(Node *node, BoundsSubst *b)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var))
	{
		Var		   *v = (Var *) node;

		if ((Index) v->varno == b->relid && v->varattno == b->attno && v->varlevelsup == 0)
		{
			b->found = true;
			return (Node *) copyObject(b->bounds);
		}
		b->other_var = true;
		return node;
	}
	if (IsA(node, Param) || IsA(node, SubLink) || IsA(node, SubPlan) || IsA(node, PlaceHolderVar))
	{
		b->other_var = true;
		return node;
	}
	return expression_tree_mutator(node, subst_bounds, (void *) b);
}

/*
 * Is arg the geometry column itself (or its cast to geography, which keeps
 * "inside")?  Anything else of the column (ST_Centroid(geom),
 * ST_StartPoint(geom), ST_Boundary(geom) ...) is not monotone: its value
 * for the bounds says nothing of its value for a row.
 */
static bool
is_the_column(Node *arg, BoundsSubst *b)
{
	while (arg && IsA(arg, RelabelType))
		arg = (Node *) ((RelabelType *) arg)->arg;
	if (arg && IsA(arg, FuncExpr) && list_length(((FuncExpr *) arg)->args) == 1)
	{
		FuncExpr   *f = (FuncExpr *) arg;
		char	   *name = get_func_name(f->funcid);

		if (name == NULL || strcmp(name, "geography") != 0 ||
			get_func_namespace(f->funcid) != tdb_extension_schema("postgis"))
			return false;
		arg = (Node *) linitial(f->args);
		while (arg && IsA(arg, RelabelType))
			arg = (Node *) ((RelabelType *) arg)->arg;
	}
	return arg && IsA(arg, Var) && (Index) ((Var *) arg)->varno == b->relid &&
		((Var *) arg)->varattno == b->attno && ((Var *) arg)->varlevelsup == 0;
}

/*
 * The clause with the bounds in place of the column, when the clause is a
 * monotone predicate of the column and of constants (see above); else NULL.
 */
static Node *
bounded_clause(Node *clause, BoundsSubst *b)
{
	List	   *args;
	List	   *newargs = NIL;
	bool		first_only;
	int			col = -1;
	int			i = 0;
	ListCell   *lc;
	Oid			fn;

	if (IsA(clause, OpExpr))
	{
		args = ((OpExpr *) clause)->args;
		fn = ((OpExpr *) clause)->opfuncid ? ((OpExpr *) clause)->opfuncid
			: get_opcode(((OpExpr *) clause)->opno);
	}
	else if (IsA(clause, FuncExpr))
	{
		args = ((FuncExpr *) clause)->args;
		fn = ((FuncExpr *) clause)->funcid;
	}
	else
		return NULL;
	if (!OidIsValid(fn) || list_length(args) < 2 || !monotone_predicate(fn, &first_only))
		return NULL;
	foreach(lc, args)
	{
		Node	   *arg = (Node *) lfirst(lc);

		if (col < 0 && i < (first_only ? 1 : 2) && is_the_column(arg, b))
		{
			col = i;
			newargs = lappend(newargs, subst_bounds(copyObject(arg), b));
		}
		else
		{
			BoundsSubst other = *b;

			other.found = other.other_var = false;
			(void) subst_bounds(arg, &other);
			if (other.found || other.other_var)
				return NULL;	/* the column (or another) elsewhere */
			newargs = lappend(newargs, arg);
		}
		i++;
	}
	if (col < 0)
		return NULL;
	clause = (Node *) copyObject(clause);
	if (IsA(clause, OpExpr))
		((OpExpr *) clause)->args = newargs;
	else
		((FuncExpr *) clause)->args = newargs;
	return clause;
}

/*
 * The bounds a CHECK constraint of rel states, as "col @ 'box'::geometry":
 * the column's attno and the box, or false.
 */
static bool
relation_bounds(Oid relid, AttrNumber *attno, Const **bounds)
{
	Relation	rel = table_open(relid, NoLock);
	TupleConstr *constr = rel->rd_att->constr;
	bool		found = false;

	for (int i = 0; constr != NULL && i < constr->num_check && !found; i++)
	{
		Node	   *e = stringToNode(constr->check[i].ccbin);
		OpExpr	   *op;
		char	   *opname;

		if (!IsA(e, OpExpr) || list_length(((OpExpr *) e)->args) != 2)
			continue;
		op = (OpExpr *) e;
		opname = get_opname(op->opno);
		if (opname != NULL && strcmp(opname, "@") == 0 &&
			IsA(linitial(op->args), Var) && IsA(lsecond(op->args), Const) &&
			!((Const *) lsecond(op->args))->constisnull &&
			((Var *) linitial(op->args))->vartype == ((Const *) lsecond(op->args))->consttype)
		{
			*attno = ((Var *) linitial(op->args))->varattno;
			*bounds = (Const *) lsecond(op->args);
			found = true;
		}
	}
	table_close(rel, NoLock);
	return found;
}

/*
 * A foreign table whose bounds refute one of its restriction clauses (a
 * member of the union trafficdb_global.locations, or queried alone) becomes
 * an empty relation: the plan has no scan of it, and its node is not
 * contacted.
 */
static void
regions_set_rel_pathlist(PlannerInfo *root, RelOptInfo *rel, Index rti, RangeTblEntry *rte)
{
	AttrNumber	attno;
	Const	   *bounds;
	ListCell   *lc;

	if (prev_set_rel_pathlist)
		prev_set_rel_pathlist(root, rel, rti, rte);
	if (rte->rtekind != RTE_RELATION || rte->relkind != RELKIND_FOREIGN_TABLE ||
		rel->baserestrictinfo == NIL || IS_DUMMY_REL(rel))
		return;
	if (!relation_bounds(rte->relid, &attno, &bounds))
		return;
	foreach(lc, rel->baserestrictinfo)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		BoundsSubst b = {rti, attno, bounds, false, false};
		Node	   *e = bounded_clause((Node *) ri->clause, &b);

		if (e == NULL)
			continue;
		e = eval_const_expressions(root, e);
		if (IsA(e, Const) && (((Const *) e)->constisnull || !DatumGetBool(((Const *) e)->constvalue)))
		{
			mark_dummy_rel(rel);
			return;
		}
	}
}

void
tdb_regions_hooks(void)
{
	prev_set_rel_pathlist = set_rel_pathlist_hook;
	set_rel_pathlist_hook = regions_set_rel_pathlist;
}
