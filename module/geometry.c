/*-------------------------------------------------------------------------
 *
 * geometry.c
 *	  Finding PostGIS's geometry type and building geometry values; see
 *	  geometry.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_proc.h"
#include "lib/stringinfo.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "module/geometry.h"
#include "geo.h"

#ifdef WORDS_BIGENDIAN
#error "trafficdb objects and EWKB here are little-endian; big-endian hosts are not supported"
#endif

#define WKB_POINT		1
#define WKB_LINESTRING	2
#define EWKB_SRID_FLAG	0x20000000
#define SRID_WGS84		4326

static Oid	geometry_oid = InvalidOid;
static Oid	postgis_nsp = InvalidOid;
static FmgrInfo geometry_recv;
static Oid	geometry_ioparam;
static bool inval_registered = false;

/* PostGIS may be dropped and re-created: forget the cached type then. */
static void
geometry_inval(Datum arg, int cacheid, uint32 hashvalue)
{
	(void) arg;
	(void) cacheid;
	(void) hashvalue;
	geometry_oid = InvalidOid;
	postgis_nsp = InvalidOid;
}

/*
 * Schema of an installed extension, or InvalidOid.  (PostgreSQL 15 keeps
 * its own get_extension_schema() static.)
 */
Oid
tdb_extension_schema(const char *extname)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tup;
	Oid			nsp = InvalidOid;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum(extname));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		nsp = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return nsp;
}

Oid
tdb_geometry_oid(void)
{
	Oid			nsp;
	Oid			typ;
	Oid			recv;

	if (OidIsValid(geometry_oid))
		return geometry_oid;

	nsp = tdb_extension_schema("postgis");
	if (!OidIsValid(nsp))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("PostGIS is not installed in this database"),
				 errhint("CREATE EXTENSION postgis;")));
	typ = GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid, CStringGetDatum("geometry"),
						  ObjectIdGetDatum(nsp));
	if (!OidIsValid(typ))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("type geometry not found in PostGIS's schema \"%s\"", get_namespace_name(nsp))));
	getTypeBinaryInputInfo(typ, &recv, &geometry_ioparam);
	fmgr_info_cxt(recv, &geometry_recv, TopMemoryContext);
	if (!inval_registered)
	{
		CacheRegisterSyscacheCallback(TYPEOID, geometry_inval, (Datum) 0);
		inval_registered = true;
	}
	postgis_nsp = nsp;
	geometry_oid = typ;
	return typ;
}

Oid
tdb_postgis_schema(void)
{
	tdb_geometry_oid();
	return postgis_nsp;
}

Datum
tdb_linestring_datum(const double *xy, uint32 npoints)
{
	StringInfoData buf;
	uint32		type = WKB_LINESTRING | EWKB_SRID_FLAG;
	uint32		srid = SRID_WGS84;

	tdb_geometry_oid();
	initStringInfo(&buf);
	enlargeStringInfo(&buf, 13 + npoints * 16);
	/* little-endian EWKB (see the #error above) */
	appendStringInfoChar(&buf, 1);
	appendBinaryStringInfo(&buf, (char *) &type, 4);
	appendBinaryStringInfo(&buf, (char *) &srid, 4);
	appendBinaryStringInfo(&buf, (char *) &npoints, 4);
	appendBinaryStringInfo(&buf, (const char *) xy, npoints * 16);
	return ReceiveFunctionCall(&geometry_recv, &buf, geometry_ioparam, -1);
}

/*
 * Whether funcid's declared arguments are (t, t[, float8[, bool]]): a
 * function of PostGIS's name in PostGIS's schema may be anyone's (a user
 * with CREATE there can add st_within(geometry, bytea)), and the scan reads
 * its arguments as the geometry, geography and distance PostGIS's own takes.
 * t is geometry, or the type geom::geography has when geog.
 */
bool
tdb_postgis_signature_is(Oid funcid, int nargs, bool geog, Expr *geog_of_geom)
{
	Oid			rettype;
	Oid		   *argtypes;
	int			n;
	Oid			t = geog ? exprType((Node *) geog_of_geom) : tdb_geometry_oid();

	rettype = get_func_signature(funcid, &argtypes, &n);
	if (rettype != BOOLOID || n != nargs || n < 2 || argtypes[0] != t || argtypes[1] != t)
		return false;
	if (n >= 3 && argtypes[2] != FLOAT8OID)
		return false;
	if (n >= 4 && argtypes[3] != BOOLOID)
		return false;
	return n <= 4;
}

/* ---- recognising PostGIS in expressions -------------------------------------- */

bool
tdb_is_geometry_overlap_op(Oid opno)
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
		op->oprnamespace == tdb_postgis_schema();
	ReleaseSysCache(tup);
	return ok;
}

bool
tdb_is_postgis_func(Oid funcid, const char *name)
{
	char	   *fname = get_func_name(funcid);

	return fname != NULL && strcmp(fname, name) == 0 &&
		get_func_namespace(funcid) == tdb_postgis_schema();
}

typedef struct OwnVarContext
{
	Index		relid;
} OwnVarContext;

static bool
own_var_walker(Node *node, OwnVarContext *cxt)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
		return ((Var *) node)->varno == (int) cxt->relid && ((Var *) node)->varlevelsup == 0;
	return expression_tree_walker(node, own_var_walker, (void *) cxt);
}

bool
tdb_is_scan_constant(Expr *e, Index relid)
{
	OwnVarContext cxt = {relid};

	return !own_var_walker((Node *) e, &cxt) && !contain_volatile_functions((Node *) e);
}

/* ---- calling PostGIS functions -------------------------------------------------- */

static Oid	fn_box3d = InvalidOid;
static Oid	fn_xmin,
			fn_ymin,
			fn_xmax,
			fn_ymax,
			fn_x,
			fn_y,
			fn_srid,
			fn_asbinary,
			fn_geomtype,
			fn_isvalid,
			fn_isvalidreason;
static Oid	fn_geometry_of_geography = InvalidOid;

static void
postgis_fns_inval(Datum arg, int cacheid, uint32 hashvalue)
{
	(void) arg;
	(void) cacheid;
	(void) hashvalue;
	fn_box3d = InvalidOid;
	fn_geometry_of_geography = InvalidOid;
}

static Oid
postgis_func(const char *name, Oid argtype)
{
	Oid			argtypes[1] = {argtype};

	return LookupFuncName(list_make2(makeString(get_namespace_name(tdb_postgis_schema())),
									 makeString(pstrdup(name))), 1, argtypes, false);
}

static void
lookup_postgis_fns(void)
{
	static bool registered = false;
	Oid			box3d_type;

	if (OidIsValid(fn_box3d))
		return;
	if (!registered)
	{
		CacheRegisterSyscacheCallback(PROCOID, postgis_fns_inval, (Datum) 0);
		registered = true;
	}
	box3d_type = GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid, CStringGetDatum("box3d"),
								 ObjectIdGetDatum(tdb_postgis_schema()));
	fn_xmin = postgis_func("st_xmin", box3d_type);
	fn_ymin = postgis_func("st_ymin", box3d_type);
	fn_xmax = postgis_func("st_xmax", box3d_type);
	fn_ymax = postgis_func("st_ymax", box3d_type);
	fn_x = postgis_func("st_x", tdb_geometry_oid());
	fn_y = postgis_func("st_y", tdb_geometry_oid());
	fn_srid = postgis_func("st_srid", tdb_geometry_oid());
	fn_asbinary = postgis_func("st_asbinary", tdb_geometry_oid());
	fn_geomtype = postgis_func("geometrytype", tdb_geometry_oid());
	fn_isvalid = postgis_func("st_isvalid", tdb_geometry_oid());
	fn_isvalidreason = postgis_func("st_isvalidreason", tdb_geometry_oid());
	fn_box3d = postgis_func("box3d", tdb_geometry_oid());
}

bool
tdb_geometry_bounds(Datum geom, double *b)
{
	FmgrInfo	flinfo;
	Datum		box;
	LOCAL_FCINFO(fcinfo, 1);

	lookup_postgis_fns();
	fmgr_info(fn_box3d, &flinfo);
	InitFunctionCallInfoData(*fcinfo, &flinfo, 1, InvalidOid, NULL, NULL);
	fcinfo->args[0].value = geom;
	fcinfo->args[0].isnull = false;
	box = FunctionCallInvoke(fcinfo);
	if (fcinfo->isnull)
		return false;			/* empty geometry */
	b[0] = DatumGetFloat8(OidFunctionCall1(fn_xmin, box));
	b[1] = DatumGetFloat8(OidFunctionCall1(fn_ymin, box));
	b[2] = DatumGetFloat8(OidFunctionCall1(fn_xmax, box));
	b[3] = DatumGetFloat8(OidFunctionCall1(fn_ymax, box));
	return true;
}

Datum
tdb_geography_to_geometry(Datum geog, Oid geog_type)
{
	lookup_postgis_fns();
	if (!OidIsValid(fn_geometry_of_geography))
		fn_geometry_of_geography = postgis_func("geometry", getBaseType(geog_type));
	return OidFunctionCall1(fn_geometry_of_geography, geog);
}

bytea *
tdb_geometry_wkb(Datum geom)
{
	lookup_postgis_fns();
	return DatumGetByteaPP(OidFunctionCall1(fn_asbinary, geom));
}

int32
tdb_geometry_srid(Datum geom)
{
	lookup_postgis_fns();
	return DatumGetInt32(OidFunctionCall1(fn_srid, geom));
}

/* ST_AsBinary of a 2D POLYGON of one ring of five positions: no room for Z or M */
#define RECT_WKB_SIZE	(1 + 4 + 4 + 4 + 5 * 16)

bool
tdb_geometry_rectangle(Datum geom, double *b)
{
	bytea	   *wkb;
	double		xy[10],
				x[5],
				y[5];
	uint32		n,
				rings;

	if (tdb_geometry_srid(geom) != SRID_WGS84)
		return false;
	wkb = tdb_geometry_wkb(geom);
	/* the size bounds the positions tdb_geo_wkb_shape writes to five, and leaves no room for Z or M */
	if (VARSIZE_ANY_EXHDR(wkb) != RECT_WKB_SIZE ||
		tdb_geo_wkb_shape((const unsigned char *) VARDATA_ANY(wkb), VARSIZE_ANY_EXHDR(wkb), xy, &n, NULL, &rings) != 3 ||
		n != 5 || rings != 1)
		return false;
	for (int i = 0; i < 5; i++)
	{
		x[i] = xy[2 * i];
		y[i] = xy[2 * i + 1];
	}
	if (x[4] != x[0] || y[4] != y[0])
		return false;
	b[0] = Min(Min(x[0], x[1]), Min(x[2], x[3]));
	b[2] = Max(Max(x[0], x[1]), Max(x[2], x[3]));
	b[1] = Min(Min(y[0], y[1]), Min(y[2], y[3]));
	b[3] = Max(Max(y[0], y[1]), Max(y[2], y[3]));
	if (!(b[0] < b[2] && b[1] < b[3]))
		return false;
	for (int i = 0; i < 4; i++)
	{
		/* each corner a corner of the box, each edge along one axis */
		if ((x[i] != b[0] && x[i] != b[2]) || (y[i] != b[1] && y[i] != b[3]))
			return false;
		if ((x[i] == x[i + 1]) == (y[i] == y[i + 1]))
			return false;
		/* the four corners, each once (not a ring that goes back on itself) */
		for (int j = 0; j < i; j++)
			if (x[i] == x[j] && y[i] == y[j])
				return false;
	}
	return true;
}

char *
tdb_geometry_invalid_reason(Datum geom)
{
	lookup_postgis_fns();
	if (DatumGetBool(OidFunctionCall1(fn_isvalid, geom)))
		return NULL;
	return TextDatumGetCString(OidFunctionCall1(fn_isvalidreason, geom));
}

char *
tdb_geometry_type(Datum geom)
{
	lookup_postgis_fns();
	return TextDatumGetCString(OidFunctionCall1(fn_geomtype, geom));
}

bool
tdb_geometry_point(Datum geom, double *x, double *y, int32 *srid, char **what)
{
	char	   *type;
	FmgrInfo	flinfo;
	LOCAL_FCINFO(fcinfo, 1);

	lookup_postgis_fns();
	/* POINT, POINTM (ST_X takes both); MULTIPOINT and the rest are not one position */
	type = TextDatumGetCString(OidFunctionCall1(fn_geomtype, geom));
	if (strncmp(type, "POINT", 5) != 0)
	{
		*what = psprintf("a %s", type);
		return false;
	}
	/* ST_X of an empty point is NULL */
	fmgr_info(fn_x, &flinfo);
	InitFunctionCallInfoData(*fcinfo, &flinfo, 1, InvalidOid, NULL, NULL);
	fcinfo->args[0].value = geom;
	fcinfo->args[0].isnull = false;
	*x = DatumGetFloat8(FunctionCallInvoke(fcinfo));
	if (fcinfo->isnull)
	{
		*what = psprintf("an empty %s", type);
		return false;
	}
	*srid = DatumGetInt32(OidFunctionCall1(fn_srid, geom));
	*y = DatumGetFloat8(OidFunctionCall1(fn_y, geom));
	return true;
}

/* ---- points, fast ------------------------------------------------------------------ */

/*
 * A 2D point with an SRID, serialized as PostGIS 3 stores it (gserialized
 * version 2): varlena header, SRID in 3 bytes, flags (version bit), then
 * type, count and the coordinates.  Built directly, since a query over
 * trails makes millions; checked once per process against PostGIS's own
 * receive function, and made by it whenever the two ever disagree.
 */
#define POINT_SIZE		TDB_POINT_DATUM_SIZE
#define G2FLAG_VERSION	0x40

static int	point_mode = 0;		/* 0: unchecked, 1: direct, 2: through PostGIS */

static void
point_direct(double x, double y, char *out)
{
	uint32		type = WKB_POINT,
				one = 1;

	SET_VARSIZE(out, POINT_SIZE);
	out[4] = (char) ((SRID_WGS84 >> 16) & 0x1f);
	out[5] = (char) ((SRID_WGS84 >> 8) & 0xff);
	out[6] = (char) (SRID_WGS84 & 0xff);
	out[7] = G2FLAG_VERSION;
	memcpy(out + 8, &type, 4);
	memcpy(out + 12, &one, 4);
	memcpy(out + 16, &x, 8);
	memcpy(out + 24, &y, 8);
}

static Datum
point_received(double x, double y)
{
	StringInfoData buf;
	uint32		type = WKB_POINT | EWKB_SRID_FLAG;
	uint32		srid = SRID_WGS84;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, 1);
	appendBinaryStringInfo(&buf, (char *) &type, 4);
	appendBinaryStringInfo(&buf, (char *) &srid, 4);
	appendBinaryStringInfo(&buf, (char *) &x, 8);
	appendBinaryStringInfo(&buf, (char *) &y, 8);
	return ReceiveFunctionCall(&geometry_recv, &buf, geometry_ioparam, -1);
}

Datum
tdb_point_datum(double x, double y)
{
	return tdb_point_datum_in(x, y, NULL);
}

Datum
tdb_point_datum_in(double x, double y, void *buf)
{
	char	   *p;

	if (point_mode == 0 || !OidIsValid(geometry_oid))
	{
		char		mine[POINT_SIZE];
		Datum		theirs;

		tdb_geometry_oid();
		theirs = point_received(-73.9876543, 40.7654321);
		point_direct(-73.9876543, 40.7654321, mine);
		point_mode = VARSIZE_ANY(DatumGetPointer(theirs)) == POINT_SIZE &&
			memcmp(DatumGetPointer(theirs), mine, POINT_SIZE) == 0 ? 1 : 2;
	}
	if (point_mode == 2)
		return point_received(x, y);
	p = buf != NULL ? buf : palloc(POINT_SIZE);
	point_direct(x, y, p);
	return PointerGetDatum(p);
}

/* ---- tile()'s aggregate ----------------------------------------------------------- */

PG_FUNCTION_INFO_V1(trafficdb_asmvt_transfn);

/*
 * The transition function of trafficdb._asmvt (tile()'s ST_AsMVT): PostGIS's
 * pgis_asmvt_transfn(internal, anyelement, text, integer, text), found in
 * PostGIS's schema by its exact signature, called with this call's context
 * (the aggregate's), after refusing a NULL row, which PostGIS dereferences
 * (ST_AsMVT(NULL::some_row_type) kills the backend).  tile() calls the
 * aggregate by its schema, so no function another role defines can take
 * its place.
 */
Datum
trafficdb_asmvt_transfn(PG_FUNCTION_ARGS)
{
	FmgrInfo   *own = fcinfo->flinfo;
	FmgrInfo   *pgis = (FmgrInfo *) own->fn_extra;
	Datum		result;

	if (!AggCheckCallContext(fcinfo, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("trafficdb._asmvt_transfn() is the transition function of trafficdb._asmvt"),
				 errhint("It is not called directly.")));
	if (PG_NARGS() != 5 || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("trafficdb._asmvt() takes a row of each feature, not NULL"),
				 errhint("trafficdb.tile() makes vector tiles.")));
	if (pgis == NULL)
	{
		Oid			argtypes[5] = {INTERNALOID, ANYELEMENTOID, TEXTOID, INT4OID, TEXTOID};
		Oid			fn = LookupFuncName(list_make2(makeString(get_namespace_name(tdb_postgis_schema())),
												   makeString("pgis_asmvt_transfn")), 5, argtypes, false);

		pgis = MemoryContextAllocZero(own->fn_mcxt, sizeof(FmgrInfo));
		fmgr_info_cxt(fn, pgis, own->fn_mcxt);
		pgis->fn_expr = own->fn_expr;
		own->fn_extra = pgis;
	}
	fcinfo->flinfo = pgis;
	PG_TRY();
	{
		result = FunctionCallInvoke(fcinfo);
	}
	PG_FINALLY();
	{
		fcinfo->flinfo = own;
	}
	PG_END_TRY();
	return result;
}

/*
 * Rounding allowance (degrees, 0.1 mm) for a geography's box: its edges'
 * latitudes are computed (geo.c), unlike vertices.
 */
#define GEOG_BOX_MARGIN 1e-9

/*
 * The box of a geography: its vertices and the latitudes its edges reach
 * between them.  An edge of a geography is a great-circle arc, which bulges
 * poleward past its ends (11 m for 25 km east-west at 42.5 N; 37 km for
 * 20 degrees at 65.67 N): the box of the vertices alone misses the points
 * there.  Used by the locations and trail wrappers.
 */
int
tdb_geography_box(Datum geog, Oid geog_type, TdbBox *box)
{
	bytea	   *wkb = tdb_geometry_wkb(tdb_geography_to_geometry(geog, geog_type));
	int			rc = tdb_geo_wkb_arc_box((const unsigned char *) VARDATA_ANY(wkb), VARSIZE_ANY_EXHDR(wkb), box);

	if (rc != 1)
		return rc;
	box->xmin -= GEOG_BOX_MARGIN;
	box->ymin -= GEOG_BOX_MARGIN;
	box->xmax += GEOG_BOX_MARGIN;
	box->ymax += GEOG_BOX_MARGIN;
	return 1;
}

bool
tdb_box_grow_metres(TdbBox *box, double radius_m)
{
	double		corners[4][2] = {{box->xmin, box->ymin}, {box->xmin, box->ymax},
	{box->xmax, box->ymin}, {box->xmax, box->ymax}};
	TdbBox		out = {INFINITY, INFINITY, -INFINITY, -INFINITY};

	for (int c = 0; c < 4; c++)
	{
		TdbBox		cb;

		if (!tdb_geo_circle_box(corners[c][0], corners[c][1], radius_m, &cb))
			return false;
		out.xmin = Min(out.xmin, cb.xmin);
		out.ymin = Min(out.ymin, cb.ymin);
		out.xmax = Max(out.xmax, cb.xmax);
		out.ymax = Max(out.ymax, cb.ymax);
	}
	*box = out;
	return true;
}
