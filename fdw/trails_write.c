/*-------------------------------------------------------------------------
 *
 * trails_write.c
 *	  trafficdb.trail_write(query, destination, ...): the rows of a query
 *	  written as a trail file (src/trail/), to a local path, an HTTP server
 *	  or S3 through a trail server's options.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <math.h>
#include <sys/mman.h>
#include <unistd.h>

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
#include "utils/guc.h"
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

PG_FUNCTION_INFO_V1(trafficdb_trail_write);

/* ---- trafficdb.trail_write(query, destination, ...) ---------------------------------------- */

/*
 * The writer keeps at most its default memory limit of events (256 MB,
 * TDB_TRAIL_WRITER_MEMORY_DEFAULT; the rest is sorted in runs in unnamed
 * files of the server's $TMPDIR, else /tmp), and the file is written to an
 * unnamed temporary file there, then stored from a read-only mapping of
 * it: neither grows the backend's memory with the data.
 */
typedef struct WriteState
{
	TdbTrailWriter *w;
	int			fd;				/* the file as written; -1: none */
	uint64		written;		/* its bytes so far (temp_file_limit) */
	void	   *map;
	size_t		maplen;
	MemoryContextCallback cb;
} WriteState;

static void
write_state_free(void *arg)
{
	WriteState *ws = arg;

	tdb_trail_writer_free(ws->w);
	ws->w = NULL;
	if (ws->map != NULL)
		munmap(ws->map, ws->maplen);
	ws->map = NULL;
	if (ws->fd >= 0)
		close(ws->fd);
	ws->fd = -1;
}

static int
write_sink(void *arg, const void *buf, size_t len, TdbTrailError *err)
{
	WriteState *ws = arg;
	const char *p = buf;

	/* the file and the writer's spilled runs together within temp_file_limit, as PostgreSQL's own */
	if (temp_file_limit >= 0 &&
		ws->written + len + tdb_trail_writer_temp_bytes(ws->w) > (uint64) temp_file_limit * 1024)
		return tdb_trail_fail(err, TDB_TRAIL_EIO, "temporary file size exceeds temp_file_limit (%dkB)",
							  temp_file_limit);
	ws->written += len;
	while (len > 0)
	{
		ssize_t		w = write(ws->fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return tdb_trail_fail(err, TDB_TRAIL_EIO, "could not write a temporary file: %s",
								  w < 0 ? strerror(errno) : "no space");
		p += w;
		len -= (size_t) w;
	}
	return 0;
}

/* Query cancel, statement_timeout and termination stop a long sort or merge. */
static int
write_cancel(void *arg)
{
	(void) arg;
	return QueryCancelPending || ProcDiePending;
}

/* An unnamed file (O_TMPFILE; else a name unlinked at once) in $TMPDIR or /tmp. */
static int
open_unnamed_tmp(void)
{
	const char *dir = getenv("TMPDIR");
	char		path[MAXPGPATH];
	int			fd;

	if (dir == NULL || *dir == '\0')
		dir = "/tmp";
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0)
		return fd;
	snprintf(path, sizeof(path), "%s/trafficdb-trail-XXXXXX", dir);
	fd = mkostemp(path, O_CLOEXEC);
	if (fd >= 0)
		unlink(path);
	return fd;
}

static TdbTrailType
column_trail_type(Oid type, int version)
{
	switch (type)
	{
		case BOOLOID:
			/* 1 and 0 in version 1, which has no boolean type */
			return version >= 2 ? TDB_TRAIL_BOOL : TDB_TRAIL_INT64;
		case INT2OID:
		case INT4OID:
		case INT8OID:
			return TDB_TRAIL_INT64;
		case FLOAT4OID:
		case FLOAT8OID:
		case NUMERICOID:
			return TDB_TRAIL_FLOAT64;
		default:
			return TDB_TRAIL_STRING;
	}
}

static int64
int_datum(Datum d, Oid type)
{
	return type == INT2OID ? DatumGetInt16(d) : type == INT4OID ? DatumGetInt32(d) :
		type == BOOLOID ? (DatumGetBool(d) ? 1 : 0) : DatumGetInt64(d);
}

static double
float_datum(Datum d, Oid type)
{
	if (type == FLOAT4OID)
		return DatumGetFloat4(d);
	if (type == NUMERICOID)
		return DatumGetFloat8(DirectFunctionCall1(numeric_float8, d));
	return DatumGetFloat8(d);
}

/*
 * trafficdb.trail_write(query text, destination text, server text,
 *     id_column text, time_column text, geom_column text,
 *     page_size int, page_seconds int, page_order text, bucket_seconds int,
 *     format_version int) returns bigint: the events written.
 */
static void
trail_write_require(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("trafficdb.trail_write: %s must not be NULL", name),
				 errhint("Call trafficdb.trail_write(query, destination, ...) with a query text and "
						 "an absolute path or s3://bucket/key; leave out the optional arguments "
						 "for their defaults.")));
}

Datum
trafficdb_trail_write(PG_FUNCTION_ARGS)
{
	char	   *query;
	char	   *dest;
	char	   *servername;
	char	   *idcol;
	char	   *timecol;
	char	   *geomcol;
	int32		page_size;
	int32		page_seconds;
	char	   *page_order;
	int32		format_version;
	TdbTrailOrder order;
	bool		by_time;
	int64		bucket_us = 0;
	bool		s3;
	TrailOptions *o = NULL;
	WriteState *ws = palloc0(sizeof(WriteState));
	TdbTrailSchema schema;
	TdbTrailWriterOptions wo;
	TdbTrailError err;
	TdbTrailValue *vals;
	Portal		portal;
	SPIPlanPtr	plan;
	int			idatt = -1,
				tatt = -1,
				gatt = -1;
	int		   *extra;			/* attribute of each extra column */
	Oid		   *extra_type;
	Oid			geomtype = tdb_geometry_oid();
	int64		nrows = 0;
	uint64_t	len;
	TupleDesc	td;

	tdb_require_preload();
	trail_write_require(fcinfo, 0, "query");
	trail_write_require(fcinfo, 1, "destination");
	trail_write_require(fcinfo, 3, "id_column");
	trail_write_require(fcinfo, 4, "time_column");
	trail_write_require(fcinfo, 5, "geom_column");
	trail_write_require(fcinfo, 7, "page_seconds");
	query = text_to_cstring(PG_GETARG_TEXT_PP(0));
	dest = text_to_cstring(PG_GETARG_TEXT_PP(1));
	servername = PG_ARGISNULL(2) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(2));
	idcol = text_to_cstring(PG_GETARG_TEXT_PP(3));
	timecol = text_to_cstring(PG_GETARG_TEXT_PP(4));
	geomcol = text_to_cstring(PG_GETARG_TEXT_PP(5));
	/* NULL: the writer's default (64 kB by trail, 16 kB space-time) */
	page_size = PG_ARGISNULL(6) ? 0 : PG_GETARG_INT32(6);
	page_seconds = PG_GETARG_INT32(7);
	trail_write_require(fcinfo, 8, "page_order");
	trail_write_require(fcinfo, 10, "format_version");
	page_order = text_to_cstring(PG_GETARG_TEXT_PP(8));
	format_version = PG_GETARG_INT32(10);
	if (format_version < 1 || format_version > TDB_TRAIL_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("format_version %d is not a trail file format version", format_version),
				 errdetail("Expected 6 (the default: pages column-major when they total at most 64 kB, else written as 5), 5 (for readers built before version 6), 4 (before version 5), 3 (before version 4), 2 (before version 3) or 1 (before version 2).")));
	if (!tdb_trail_order_by_name(page_order, &order, &by_time))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("page_order \"%s\" is not a page order", page_order),
				 errdetail("Expected 'auto' ('time' when the trails are short beside the file's time span, else 'trail'), 'trail' (pages of one trail, by trail id then time), 'time' (pages of one trail and one time bucket, by bucket then trail id) or 'space-time' (pages of one time bucket, by place).")));
	if (order == TDB_TRAIL_ORDER_SPACETIME && format_version == 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("page_order '%s' needs format_version 2 or later", page_order),
				 errdetail("Version-1 files hold their pages in trail order only.")));
	if (!PG_ARGISNULL(9))
	{
		int32		bucket_seconds = PG_GETARG_INT32(9);

		if (order == TDB_TRAIL_ORDER_TRAIL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("bucket_seconds applies to page_order 'time', 'space-time' and 'auto' only, not '%s'", page_order),
					 errhint("Pass page_order => 'time', 'space-time' or 'auto', or leave out bucket_seconds.")));
		if (format_version == 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("bucket_seconds does not apply to format_version 1"),
					 errdetail("Version-1 files hold their pages in trail order only.")));
		if (bucket_seconds < 1 || bucket_seconds > 31 * 86400)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("bucket_seconds %d is out of range", bucket_seconds),
					 errdetail("Expected seconds from 1 to 2678400 (31 days).")));
		bucket_us = (int64) bucket_seconds * USECS_PER_SEC;
	}
	s3 = strncmp(dest, "s3://", 5) == 0;
	trl_check_url(dest, true);
	if (!PG_ARGISNULL(6) && (page_size < 1024 || page_size > (64 << 20)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("page_size %d is out of range", page_size),
				 errdetail("Expected bytes from 1024 to 67108864.")));
	if (page_seconds < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("page_seconds %d is negative", page_seconds),
				 errdetail("Expected 0 (no limit) or a number of seconds.")));
	if (s3)
	{
		ForeignServer *server;

		if (servername == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("writing to \"%s\" needs a trafficdb_trails server", dest),
					 errhint("Pass server => 'name' (its endpoint and region, and your user mapping's credentials, are used).")));
		server = GetForeignServerByName(servername, false);
		if (strcmp(GetForeignDataWrapper(server->fdwid)->fdwname, "trafficdb_trails") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("server \"%s\" is not a trafficdb_trails server", servername)));
		/* as dblink and postgres_fdw: a user mapping alone is not enough */
		{
			AclResult	aclresult = pg_foreign_server_aclcheck(server->serverid, GetUserId(), ACL_USAGE);

			if (aclresult != ACLCHECK_OK)
				aclcheck_error(aclresult, OBJECT_FOREIGN_SERVER, server->servername);
		}
		o = trail_options(server, true);
	}
	ws->fd = -1;
	ws->cb.func = write_state_free;
	ws->cb.arg = ws;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, &ws->cb);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	plan = SPI_prepare(query, 0, NULL);
	if (plan == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("could not prepare the query of trail_write: %s", SPI_result_code_string(SPI_result))));
	if (!SPI_is_cursor_plan(plan))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the query of trail_write must return rows")));
	portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);
	td = portal->tupDesc;
	memset(&schema, 0, sizeof(schema));
	extra = palloc(sizeof(int) * td->natts);
	extra_type = palloc(sizeof(Oid) * td->natts);
	for (int i = 0; i < td->natts; i++)
	{
		Form_pg_attribute a = TupleDescAttr(td, i);
		const char *name = NameStr(a->attname);

		if (strcmp(name, idcol) == 0)
			idatt = i;
		else if (strcmp(name, timecol) == 0)
			tatt = i;
		else if (strcmp(name, geomcol) == 0)
			gatt = i;
		else
		{
			if (schema.ncolumns == TDB_TRAIL_MAX_COLUMNS)
				ereport(ERROR,
						(errcode(ERRCODE_TOO_MANY_COLUMNS),
						 errmsg("a trail file holds at most %d columns besides id, time and position",
								TDB_TRAIL_MAX_COLUMNS)));
			if (strlen(name) >= sizeof(schema.columns[0].name))
				ereport(ERROR, (errcode(ERRCODE_NAME_TOO_LONG), errmsg("column name \"%s\" is too long", name)));
			extra[schema.ncolumns] = i;
			extra_type[schema.ncolumns] = a->atttypid;
			strlcpy(schema.columns[schema.ncolumns].name, name, sizeof(schema.columns[0].name));
			schema.columns[schema.ncolumns].type = column_trail_type(a->atttypid, format_version);
			schema.ncolumns++;
		}
	}
	if (idatt < 0 || tatt < 0 || gatt < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("the query of trail_write has no column \"%s\"",
						idatt < 0 ? idcol : tatt < 0 ? timecol : geomcol),
				 errhint("Name the trail id, time and position columns with id_column, time_column and geom_column (now \"%s\", \"%s\", \"%s\").",
						 idcol, timecol, geomcol)));
	{
		Oid			it = TupleDescAttr(td, idatt)->atttypid,
					tt = TupleDescAttr(td, tatt)->atttypid,
					gt = TupleDescAttr(td, gatt)->atttypid;

		if (it != INT2OID && it != INT4OID && it != INT8OID && it != TEXTOID && it != VARCHAROID)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("trail id column \"%s\" is of type %s", idcol, format_type_be(it)),
					 errdetail("Expected an integer or text.")));
		if (tt != TIMESTAMPTZOID && tt != TIMESTAMPOID)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("time column \"%s\" is of type %s", timecol, format_type_be(tt)),
					 errdetail("Expected timestamp with time zone.")));
		if (gt != geomtype)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("position column \"%s\" is of type %s", geomcol, format_type_be(gt)),
					 errdetail("Expected geometry(Point, 4326).")));
		schema.id_type = it == TEXTOID || it == VARCHAROID ? TDB_TRAIL_STRING : TDB_TRAIL_INT64;
	}
	strlcpy(schema.id_name, idcol, sizeof(schema.id_name));
	strlcpy(schema.time_name, timecol, sizeof(schema.time_name));
	strlcpy(schema.lon_name, "lon", sizeof(schema.lon_name));
	strlcpy(schema.lat_name, "lat", sizeof(schema.lat_name));
	memset(&wo, 0, sizeof(wo));
	wo.page_target_bytes = (uint32) page_size;
	wo.page_max_span_us = page_seconds == 0 ? -1 : (int64) page_seconds * USECS_PER_SEC;
	wo.version = format_version;
	wo.order = order;
	wo.by_time = by_time;
	wo.bucket_us = bucket_us;
	wo.cancel = write_cancel;
	/* the spilled runs within temp_file_limit (the file written later counts them too: write_sink) */
	wo.temp_limit = temp_file_limit >= 0 ? (uint64) temp_file_limit * 1024 : 0;
	if (temp_file_limit == 0)
		wo.temp_limit = 1;		/* 0 kB: not even one byte */
	if (tdb_trail_writer_create(&schema, &wo, &ws->w, &err) < 0)
		trail_error(&err, "could not start a trail file");
	vals = palloc0(sizeof(TdbTrailValue) * (schema.ncolumns + 1));

	for (;;)
	{
		MemoryContext batch;
		MemoryContext old;

		SPI_cursor_fetch(portal, true, 10000);
		if (SPI_processed == 0)
			break;
		batch = AllocSetContextCreate(CurrentMemoryContext, "trail_write batch", ALLOCSET_DEFAULT_SIZES);
		old = MemoryContextSwitchTo(batch);
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	rtd = SPI_tuptable->tupdesc;
			TdbTrailEvent ev;
			bool		isnull;
			Datum		d;
			int32		srid;
			char	   *what;
			Oid			it = TupleDescAttr(rtd, idatt)->atttypid;

			nrows++;
			memset(&ev, 0, sizeof(ev));
			d = SPI_getbinval(tup, rtd, idatt + 1, &isnull);
			if (isnull)
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("row " INT64_FORMAT " of the query has a NULL trail id (\"%s\")", nrows, idcol)));
			if (schema.id_type == TDB_TRAIL_STRING)
				ev.key.s = TextDatumGetCString(d);
			else
				ev.key.i = int_datum(d, it);
			d = SPI_getbinval(tup, rtd, tatt + 1, &isnull);
			if (isnull)
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("row " INT64_FORMAT " of the query has a NULL time (\"%s\")", nrows, timecol)));
			if (TIMESTAMP_NOT_FINITE(DatumGetTimestamp(d)))
				ereport(ERROR,
						(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
						 errmsg("row " INT64_FORMAT " of the query has an infinite time", nrows)));
			if (DatumGetTimestamp(d) > PG_INT64_MAX - UNIX_TO_PG_US)
				ereport(ERROR,
						(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
						 errmsg("row " INT64_FORMAT " of the query has a time past what a trail file holds", nrows),
						 errdetail("Trail files hold microseconds since 1970 in 64 bits, up to the year 294247.")));
			ev.time_us = DatumGetTimestamp(d) + UNIX_TO_PG_US;
			d = SPI_getbinval(tup, rtd, gatt + 1, &isnull);
			if (isnull)
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("row " INT64_FORMAT " of the query has a NULL position (\"%s\")", nrows, geomcol)));
			if (!tdb_geometry_point(d, &ev.lon, &ev.lat, &srid, &what))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("row " INT64_FORMAT " of the query has a position (\"%s\") that is not one point but %s",
								nrows, geomcol, what),
						 errdetail("Each event of a trail is at one point: geometry(Point, 4326).")));
			if (srid != 4326)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("row " INT64_FORMAT " of the query has a position in SRID %d; expected 4326", nrows, srid),
						 errhint("Use ST_Transform(%s, 4326), or ST_SetSRID when the coordinates are already WGS 84.", geomcol)));
			if (!(ev.lon >= -180 && ev.lon <= 180 && ev.lat >= -90 && ev.lat <= 90))
				ereport(ERROR,
						(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
						 errmsg("row " INT64_FORMAT " of the query has a position (%g, %g) outside longitude -180..180, latitude -90..90",
								nrows, ev.lon, ev.lat)));
			for (int c = 0; c < schema.ncolumns; c++)
			{
				d = SPI_getbinval(tup, rtd, extra[c] + 1, &isnull);
				vals[c].isnull = isnull;
				if (isnull)
					continue;
				switch (schema.columns[c].type)
				{
					case TDB_TRAIL_INT64:
					case TDB_TRAIL_BOOL:
						vals[c].i = int_datum(d, extra_type[c]);
						break;
					case TDB_TRAIL_FLOAT64:
						vals[c].f = float_datum(d, extra_type[c]);
						break;
					default:
						vals[c].s = SPI_getvalue(tup, rtd, extra[c] + 1);
				}
			}
			ev.values = vals;
			if (tdb_trail_writer_add(ws->w, &ev, &err) < 0)
				trail_error(&err, psprintf("could not add row " INT64_FORMAT " to the trail file", nrows));
			CHECK_FOR_INTERRUPTS();
		}
		MemoryContextSwitchTo(old);
		MemoryContextDelete(batch);
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	SPI_finish();

	ws->fd = open_unnamed_tmp();
	if (ws->fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create a temporary file for the trail file: %m")));
	if (tdb_trail_writer_finish_to(ws->w, write_sink, ws, &len, &err) < 0)
		trail_error(&err, "could not encode the trail file");
	if (tdb_trail_writer_order_note(ws->w)[0] != '\0')
		ereport(DEBUG1, (errmsg("trail_write: %s", tdb_trail_writer_order_note(ws->w))));
	ws->maplen = (size_t) len;
	ws->map = mmap(NULL, ws->maplen, PROT_READ, MAP_SHARED, ws->fd, 0);
	if (ws->map == MAP_FAILED)
	{
		ws->map = NULL;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not map the temporary trail file: %m")));
	}
	{
		TdbS3Config s3c;
		TdbNetOptions net;
		TrailOptions defaults;

		memset(&defaults, 0, sizeof(defaults));
		defaults.retries = 5;
		if (o == NULL)
			o = &defaults;
		trl_s3_config(o, &s3c);
		trl_net_options(o, &net);
		if (tdb_trail_store(dest, ws->map, ws->maplen, &s3c, &net, 0, &err) < 0)
			trail_error(&err, psprintf("could not store trail file \"%s\"", dest));
	}
	write_state_free(ws);
	PG_RETURN_INT64(nrows);
}
