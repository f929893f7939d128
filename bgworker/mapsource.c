/*-------------------------------------------------------------------------
 *
 * mapsource.c
 *	  The map's source reader: the daemon reads the source table a map is
 *	  loaded from (with the privileges of the role that asked for the
 *	  load), parses each row's geometry and adds it to a map builder.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "port/pg_bswap.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "bgworker/daemon_internal.h"

/*
 * Parse a 2D WKB LineString (or a MultiLineString of one part) into xy, a
 * buffer that grows in cxt and outlives the per-batch context the caller
 * resets.  Returns the point count, 0 for an empty one, -1 if it is another
 * type.
 */
static int64
parse_wkb_linestring(const bytea *wkb, MemoryContext cxt, double **xy, Size *cap)
{
	const unsigned char *p = (const unsigned char *) VARDATA_ANY(wkb);
	Size		len = VARSIZE_ANY_EXHDR(wkb);
	Size		pos = 0;
	uint32		type;
	uint32		n;
	bool		le;

	for (int depth = 0; depth < 2; depth++)
	{
		if (len - pos < 9)
			return -1;
		le = p[pos] == 1;
		memcpy(&type, p + pos + 1, 4);
		memcpy(&n, p + pos + 5, 4);
		if (!le)
		{
			type = pg_bswap32(type);
			n = pg_bswap32(n);
		}
		pos += 9;
		if (type == 5 && depth == 0)
		{
			/* MultiLineString: one part only */
			if (n != 1)
				return n == 0 ? 0 : -1;
			continue;
		}
		if (type != 2)
			return -1;
		if (n == 0)
			return 0;
		if ((Size) n * 16 > len - pos)
			return -1;
		if (*cap < (Size) n * 2)
		{
			*cap = (Size) n * 2;
			*xy = *xy ? repalloc(*xy, *cap * sizeof(double))
				: MemoryContextAlloc(cxt, *cap * sizeof(double));
		}
		memcpy(*xy, p + pos, (Size) n * 16);
		if (!le)
			for (uint32 i = 0; i < 2 * n; i++)
			{
				uint64		v;

				memcpy(&v, &(*xy)[i], 8);
				v = pg_bswap64(v);
				memcpy(&(*xy)[i], &v, 8);
			}
		return n;
	}
	return -1;
}

static const char *
col_or_null(const NameData *col, const char *cast)
{
	if (NameStr(*col)[0] == '\0')
		return psprintf("NULL::pg_catalog.%s", cast);
	return psprintf("(%s)::pg_catalog.%s", quote_identifier(NameStr(*col)), cast);
}

/*
 * Read the source table into a map builder.  Runs inside a transaction with
 * SPI connected; raises ERROR on anything that makes the whole load wrong.
 */
TdbMapBuilder *
read_map_source(const TdbMapRequest *req, LoadCounts *counts)
{
	char	   *pg = postgis_schema();
	bool		regional = NameStr(req->region)[0] != '\0';
	char	   *relname;
	char	   *query;
	Portal		portal;
	TdbMapBuilder *b;
	double	   *xy = NULL;
	Size		cap = 0;
	char		err[TDB_ERRLEN];
	Oid			save_userid;
	int			save_sec;
	int			guc_nest;
	MemoryContext batch_cxt;

	if (pg == NULL)
		ereport(ERROR, (errmsg("PostGIS is not installed in database \"%s\"", get_database_name(MyDatabaseId))));
	if (regional)
	{
		Oid			argtype = TEXTOID;
		Datum		arg = CStringGetTextDatum(NameStr(req->region));

		if (SPI_execute_with_args("SELECT 1 FROM trafficdb.regions WHERE name = $1", 1, &argtype, &arg,
								  NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("region \"%s\" is not in trafficdb.regions", NameStr(req->region)),
					 errhint("Add it (INSERT INTO trafficdb.regions ...) on every node of the fleet, or load the whole map (region => NULL).")));
	}
	relname = get_rel_name(req->relid);
	if (relname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the map source table (OID %u) no longer exists", req->relid),
				 errhint("Load a map again with trafficdb.load_map().")));
	relname = quote_qualified_identifier(get_namespace_name(get_rel_namespace(req->relid)), relname);

	/* only the columns we need, under names no source column can clash with */
	query = psprintf("SELECT tdb_id::int8, %s.ST_AsBinary(%s.ST_Force2D(CASE "
					 "WHEN %s.ST_SRID(tdb_geom) = 4326 THEN tdb_geom "
					 "WHEN %s.ST_SRID(tdb_geom) = 0 THEN NULL "
					 "ELSE %s.ST_Transform(tdb_geom, 4326) END)), "
					 "tdb_class, tdb_name, tdb_speed, tdb_oneway, tdb_fit "
					 "FROM (SELECT %s AS tdb_id, %s AS tdb_geom, %s AS tdb_class, %s AS tdb_name, "
					 "%s AS tdb_speed, %s AS tdb_oneway, %s AS tdb_fit FROM %s) src %s ORDER BY 1",
					 pg, pg, pg, pg, pg,
					 quote_identifier(NameStr(req->id_column)),
					 quote_identifier(NameStr(req->geom_column)),
					 col_or_null(&req->class_column, "text"),
					 col_or_null(&req->name_column, "text"),
					 col_or_null(&req->speed_column, "float8"),
					 col_or_null(&req->oneway_column, "bool"),
					 regional ? psprintf("trafficdb._region_fit(%s, %s)",
										 quote_identifier(NameStr(req->geom_column)),
										 quote_literal_cstr(NameStr(req->region))) : "1",
					 relname,
					 regional ? "WHERE tdb_fit > 0" : "");

	/*
	 * Read the source with the privileges of the role that asked for the
	 * load (row security, column grants, and no code of the table's owner
	 * running as the daemon's superuser), as a restricted operation.
	 */
	if (!OidIsValid(req->userid) || !SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(req->userid)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("the role that loaded the map (OID %u) no longer exists", req->userid),
				 errhint("Load the map again with trafficdb.load_map().")));
	GetUserIdAndSecContext(&save_userid, &save_sec);
	batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "trafficdb map load batch",
									  ALLOCSET_DEFAULT_SIZES);

	b = tdb_map_builder_create();
	if (b == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	memset(counts, 0, sizeof(*counts));

	/*
	 * Code in the source (a view calling a function) may change settings
	 * with set_config() or SET: undo every change at the end of the read,
	 * success or error, as PostgreSQL does around index expressions, so
	 * that nothing of the caller's outlives the read in the daemon.
	 */
	guc_nest = NewGUCNestLevel();
	PG_TRY();
	{
		SetUserIdAndSecContext(req->userid,
							   save_sec | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
		portal = SPI_cursor_open_with_args(NULL, query, 0, NULL, NULL, NULL, true, 0);
		for (;;)
		{
			MemoryContext oldcxt;

			SPI_cursor_fetch(portal, true, 10000);
			if (SPI_processed == 0)
				break;
			oldcxt = MemoryContextSwitchTo(batch_cxt);
			for (uint64 r = 0; r < SPI_processed; r++)
			{
				HeapTuple	tup = SPI_tuptable->vals[r];
				TupleDesc	td = SPI_tuptable->tupdesc;
				bool		isnull;
				Datum		d;
				int64		id;
				int64		npts;
				char	   *cls;
				char	   *name;
				double		speed = 0;
				bool		oneway = false;

				d = SPI_getbinval(tup, td, 1, &isnull);
				if (isnull)
				{
					counts->null_id++;
					continue;
				}
				id = DatumGetInt64(d);
				d = SPI_getbinval(tup, td, 2, &isnull);
				if (isnull)
				{
					counts->null_geom++;
					continue;
				}
				npts = parse_wkb_linestring(DatumGetByteaPP(d), oldcxt, &xy, &cap);
				if (npts < 2)
				{
					if (npts < 0)
						counts->not_linestring++;
					else
						counts->null_geom++;
					continue;
				}
				cls = SPI_getvalue(tup, td, 3);
				name = SPI_getvalue(tup, td, 4);
				d = SPI_getbinval(tup, td, 5, &isnull);
				if (!isnull)
					speed = DatumGetFloat8(d);
				d = SPI_getbinval(tup, td, 6, &isnull);
				if (!isnull)
					oneway = DatumGetBool(d);
				if (!(speed >= 0 && speed <= 65535))
					speed = 0;
				d = SPI_getbinval(tup, td, 7, &isnull);
				if (regional && (isnull || DatumGetInt32(d) != 1))
					ereport(ERROR,
							(errcode(ERRCODE_CHECK_VIOLATION),
							 errmsg("location " INT64_FORMAT " of region \"%s\" reaches out of the region's bounds",
									id, NameStr(req->region)),
							 errdetail("trafficdb.regions.bounds must hold every location of the region: the fleet's global table leaves the region out of queries beyond them."),
							 errhint("Widen the bounds of region \"%s\" on every node of the fleet (or set them to NULL), and load again.",
									 NameStr(req->region))));
				switch (tdb_map_builder_add(b, (uint64) id, xy, (uint32) npts, cls, name,
											(uint16) rint(speed), oneway ? TDB_LOC_ONEWAY : 0, err))
				{
					case TDB_OBJ_OK:
						counts->loaded++;
						break;
					case TDB_OBJ_EINVAL:
						if (counts->bad_points++ == 0)
							strlcpy(counts->first_bad, err, sizeof(counts->first_bad));
						break;
					case TDB_OBJ_ELIMIT:
						/* never load part of a map silently */
						ereport(ERROR,
								(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
								 errmsg("cannot load the map from %s: %s", relname, err),
								 errhint("Map the classes onto at most 256 (e.g. with a view over the source), "
										 "or load without class_column.")));
						break;
					default:
						ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("%s", err)));
				}
			}
			MemoryContextSwitchTo(oldcxt);
			MemoryContextReset(batch_cxt);
			SPI_freetuptable(SPI_tuptable);
		}
		SPI_cursor_close(portal);
		AtEOXact_GUC(false, guc_nest);
		SetUserIdAndSecContext(save_userid, save_sec);
	}
	PG_CATCH();
	{
		/* the transaction's abort undoes the GUC changes (AtEOXact_GUC) */
		SetUserIdAndSecContext(save_userid, save_sec);
		tdb_map_builder_free(b);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextDelete(batch_cxt);
	return b;
}
