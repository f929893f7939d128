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
#include "lib/stringinfo.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "module/geometry.h"

#ifdef WORDS_BIGENDIAN
#error "trafficdb objects and EWKB here are little-endian; big-endian hosts are not supported"
#endif

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
