/*
 * stream_agg.c
 *	  The stream FDW's window functions: trafficdb_stream_aggregate and
 *	  trafficdb_stream_resample over a stream table's time window, with the
 *	  codecs' reconstruction.
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
#include "fdw/stream_open.h"
#include "fdw/streams.h"

PG_FUNCTION_INFO_V1(trafficdb_stream_aggregate);
PG_FUNCTION_INFO_V1(trafficdb_stream_resample);

/* ---- aggregates over a time window ----------------------------------------------- */

/* Field number of a column name in the table's stream, with a clear error. */
static int
field_of(StreamHandle *h, const char *field)
{
	const TdbStreamDef *d = &tdb_stream_schema(h->db)->streams[h->stream];

	for (uint32 f = 0; f < d->nfields; f++)
		if (strcmp(d->fields[f].name, field) == 0)
		{
			if (d->fields[f].type == TDB_ST_BOOL)
				break;
			return (int) f;
		}
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_COLUMN),
			 errmsg("stream \"%s\" has no numeric field \"%s\"", d->name, field)));
	return -1;
}

/*
 * Argument tbl of SQL function func: a foreign table of a trafficdb_streams
 * server (locked until the transaction ends), or an error saying what it is.
 */
static void
stream_table_arg(Oid relid, const char *func)
{
	char		kind = tdb_relation_arg(relid, func, "tbl", "a stream foreign table");
	ForeignServer *server;
	ForeignDataWrapper *fdw;

	if (kind != RELKIND_FOREIGN_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a stream foreign table", get_rel_name(relid)),
				 errdetail("It is %s; argument tbl of %s must be a foreign table of a trafficdb_streams server.",
						   tdb_relkind_name(kind), func)));
	server = GetForeignServer(GetForeignTable(relid)->serverid);
	fdw = GetForeignDataWrapper(server->fdwid);
	/* by its code, not its name: any wrapper may be called trafficdb_streams */
	if (!OidIsValid(fdw->fdwhandler) || GetFdwRoutine(fdw->fdwhandler)->BeginForeignScan != strBeginForeignScan)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a stream foreign table", get_rel_name(relid)),
				 errdetail("It is a foreign table of server \"%s\" (foreign-data wrapper %s); argument tbl of %s must be a foreign table of a trafficdb_streams server.",
						   server->servername, fdw->fdwname, func)));
}

static void
check_select(Oid relid)
{
	AclResult	acl = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);

	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_FOREIGN_TABLE, get_rel_name(relid));
}

static double
num(const TdbStreamDef *d, int f, const TdbStreamValue *v)
{
	return (d->fields[f].type == TDB_ST_FLOAT32 || d->fields[f].type == TDB_ST_FLOAT64) ? v->v.f : (double) v->v.i;
}

/*
 * How long the last value holds.  A stored value holds until the next
 * record.  After the last one the stream says nothing more: HOLD_STREAM
 * (the default) holds it only until the stream's last timestamp (the last
 * insert, stored or dropped by the codecs, as the file committed it), so
 * no value is invented past the data; HOLD_WINDOW holds it to the end of
 * the window (or forever, for resampling), the rule before there was a
 * choice.
 */
typedef enum StrHold
{
	HOLD_STREAM, HOLD_WINDOW
} StrHold;

static StrHold
hold_arg(const char *hold)
{
	if (strcmp(hold, "stream") == 0)
		return HOLD_STREAM;
	if (strcmp(hold, "window") == 0)
		return HOLD_WINDOW;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("hold must be 'stream' or 'window', not \"%s\"", hold),
			 errdetail("'stream' (the default): the last value holds until the stream's last timestamp; 'window': it holds to the end of the window.")));
	return HOLD_STREAM;
}

/* The time until which the last value of the stream may hold (INT64 max: no limit). */
static int64
hold_end(StreamHandle *h, StrHold hold)
{
	int64		last;

	if (hold == HOLD_WINDOW)
		return PG_INT64_MAX;
	if (tdb_stream_last_ts(h->db, h->stream, &last) != TDB_STREAM_OK)
		ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("%s", tdb_stream_errmsg(h->db))));
	return last;
}

typedef struct StrAgg
{
	const TdbStreamDef *d;
	int			f;
	int64		end;			/* no value holds after this (hold_end) */
	/* the value holding since `since` (none after a discontinuity or NULL) */
	bool		holding;
	double		value;
	int64		since;
	double		integral;		/* value x seconds */
	double		covered;		/* seconds with a value */
	double		min,
				max;
	int64		samples;		/* values that held at some instant of the window */
	int64		records;		/* stored records in the window, NULL or not */
} StrAgg;

static void
agg_hold(StrAgg *a, int64 until)
{
	until = Min(until, a->end);
	if (a->holding && until > a->since)
	{
		double		secs = (until - a->since) / 1e6;

		a->integral += a->value * secs;
		a->covered += secs;
	}
}

static void
agg_start(StrAgg *a, const TdbStreamRecord *r, int64 at)
{
	const TdbStreamValue *v = &r->vals[a->f];

	/* a value from before the window that stopped holding before it is not in it */
	a->holding = !r->discontinuity && !v->isnull && at <= a->end;
	a->since = at;
	if (a->holding)
	{
		a->value = num(a->d, a->f, v);
		a->min = a->samples ? Min(a->min, a->value) : a->value;
		a->max = a->samples ? Max(a->max, a->value) : a->value;
		a->samples++;
	}
}

static int
agg_visit(const TdbStreamRecord *r, void *p)
{
	StrAgg	   *a = p;

	CHECK_FOR_INTERRUPTS();
	agg_hold(a, r->ts);
	agg_start(a, r, r->ts);
	a->records++;
	return 0;
}

/*
 * trafficdb.stream_aggregate(tbl, field, t_from, t_to, hold): the field over
 * [t_from, t_to] as the codecs reconstruct it (each stored value holds until
 * the next record, the last one as `hold` says; nothing holds across a
 * discontinuity or a NULL): time-weighted average over the time a value
 * held, min, max, integral (value x seconds), samples (the non-NULL values
 * that held at some instant of the window: the one holding at t_from and
 * each record's after it), records (the stored records in the window, NULL
 * or not) and covered (seconds of the window in which a value held).
 */
Datum
trafficdb_stream_aggregate(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	char	   *field = text_to_cstring(PG_GETARG_TEXT_PP(1));
	int64		from = PG_GETARG_TIMESTAMPTZ(2) + UNIX_TO_PG_US;
	int64		to = PG_GETARG_TIMESTAMPTZ(3) + UNIX_TO_PG_US;
	StrHold		hold = hold_arg(text_to_cstring(PG_GETARG_TEXT_PP(4)));
	StreamHandle *h;
	StrAgg		a = {0};
	TdbStreamRecord first;
	TupleDesc	tupdesc;
	Datum		values[7];
	bool		nulls[7] = {0};
	int			rc;

	tdb_require_preload();
	if (TIMESTAMP_NOT_FINITE(PG_GETARG_TIMESTAMPTZ(2)) || TIMESTAMP_NOT_FINITE(PG_GETARG_TIMESTAMPTZ(3)) ||
		from > to)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("time window [%s, %s] is not a finite window with t_from <= t_to",
						pstrdup(timestamptz_to_str(PG_GETARG_TIMESTAMPTZ(2))),	/* a static buffer */
						timestamptz_to_str(PG_GETARG_TIMESTAMPTZ(3)))));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "stream_aggregate must return a record");
	stream_table_arg(relid, "trafficdb.stream_aggregate");
	check_select(relid);
	h = stream_open(relid, false, CurrentMemoryContext);
	a.d = &tdb_stream_schema(h->db)->streams[h->stream];
	a.f = field_of(h, field);
	a.end = hold_end(h, hold);
	/* the value holding at t_from */
	rc = tdb_stream_at(h->db, h->stream, from, &first);
	if (rc == TDB_STREAM_OK)
	{
		agg_start(&a, &first, from);
		if (first.ts == from)
			a.records++;
	}
	else if (rc != TDB_STREAM_ENOTFOUND)
		ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("%s", tdb_stream_errmsg(h->db))));
	if (from < to && (rc = tdb_stream_range(h->db, h->stream, from + 1, to, agg_visit, &a)) != TDB_STREAM_OK)
		ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("%s", tdb_stream_errmsg(h->db))));
	agg_hold(&a, to);
	stream_handle_close(h);
	values[0] = Float8GetDatum(a.covered > 0 ? a.integral / a.covered : 0);
	nulls[0] = a.covered <= 0;
	values[1] = Float8GetDatum(a.min);
	nulls[1] = a.samples == 0;
	values[2] = Float8GetDatum(a.max);
	nulls[2] = a.samples == 0;
	values[3] = Float8GetDatum(a.integral);
	nulls[3] = a.samples == 0;
	values[4] = Int64GetDatum(a.samples);
	values[5] = Int64GetDatum(a.records);
	values[6] = Float8GetDatum(a.covered);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}

/*
 * trafficdb.stream_resample(tbl, field, times, hold): the field's
 * reconstructed value at each time (O(log n) each; NULL where nothing
 * holds: before the first record, after a NULL or a discontinuity, and with
 * hold 'stream' after the stream's last timestamp).
 */
Datum
trafficdb_stream_resample(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			relid = PG_GETARG_OID(0);
	char	   *field = text_to_cstring(PG_GETARG_TEXT_PP(1));
	ArrayType  *times = PG_GETARG_ARRAYTYPE_P(2);
	StrHold		hold = hold_arg(text_to_cstring(PG_GETARG_TEXT_PP(3)));
	int64		end;
	Datum	   *elems;
	bool	   *enulls;
	int			n;
	StreamHandle *h;
	const TdbStreamDef *d;
	int			f;

	tdb_require_preload();
	InitMaterializedSRF(fcinfo, 0);
	stream_table_arg(relid, "trafficdb.stream_resample");
	check_select(relid);
	deconstruct_array(times, TIMESTAMPTZOID, 8, true, TYPALIGN_DOUBLE, &elems, &enulls, &n);
	h = stream_open(relid, false, CurrentMemoryContext);
	d = &tdb_stream_schema(h->db)->streams[h->stream];
	f = field_of(h, field);
	end = hold_end(h, hold);
	for (int i = 0; i < n; i++)
	{
		Datum		values[2];
		bool		nulls[2] = {enulls[i], true};
		TdbStreamRecord r;

		CHECK_FOR_INTERRUPTS();
		values[0] = elems[i];
		if (!enulls[i] && !TIMESTAMP_NOT_FINITE(DatumGetTimestampTz(elems[i])))
		{
			int64		t = DatumGetTimestampTz(elems[i]) + UNIX_TO_PG_US;
			int			rc = tdb_stream_at(h->db, h->stream, t, &r);

			if (rc == TDB_STREAM_OK && !r.discontinuity && !r.vals[f].isnull && t <= end)
			{
				values[1] = Float8GetDatum(num(d, f, &r.vals[f]));
				nulls[1] = false;
			}
			else if (rc != TDB_STREAM_OK && rc != TDB_STREAM_ENOTFOUND)
				ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("%s", tdb_stream_errmsg(h->db))));
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	stream_handle_close(h);
	return (Datum) 0;
}
