/*
 * stream_insert.c
 *	  INSERT into a stream table (streams.c explains the rules): the
 *	  transaction's waiting rows per file, checked as they come, dropped
 *	  with their subtransaction, written and flushed at pre-commit.
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

/* ---- the transaction's inserted rows ----------------------------------------- */

/*
 * Inserted rows wait here, per stream file, until the transaction commits.
 * The memory is a child of TopTransactionContext, so the end of the
 * transaction frees it (its reset callback forgets it).  The rows of a
 * file are kept in the order inserted, so the rows a subtransaction and its
 * children inserted are the tail of the list: every row inserted since a
 * subtransaction began carries its id or a child's, which is greater.
 */
typedef struct XactStream
{
	TdbStreamDef def;			/* as the INSERT saw it: the file must still have it at commit */
	char	   *relname;		/* the first table that inserted into it, for messages */
	int64		last_ts;		/* its last waiting row's ts (Unix us), INT64_MIN if none */
	int			at_commit;		/* its number in the file opened at commit */
	bool		checked;		/* at commit: its first row was checked against the file */
} XactStream;

typedef struct XactRow
{
	int64		ts;				/* Unix microseconds */
	int64		prev_ts;		/* its stream's last_ts before it, restored if it is dropped */
	int64		val;			/* its values: the file's vals[val], one per field */
	XactStream *xs;
	SubTransactionId subid;		/* the subtransaction that inserted it */
} XactRow;

typedef struct XactFile
{
	dev_t		dev;
	ino_t		ino;
	char	   *filename;
	List	   *streams;		/* of XactStream * */
	XactRow    *rows;
	int64		nrows;
	int64		rowcap;
	TdbStreamValue *vals;
	int64		nvals;
	int64		valcap;
} XactFile;

static MemoryContext xact_cxt = NULL;
static List *xact_files = NIL;	/* of XactFile *, in xact_cxt */
static MemoryContextCallback xact_cxt_cb;

static void stream_xact_callback(XactEvent event, void *arg);
static void stream_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
									SubTransactionId parentSubid, void *arg);

static void
xact_forget(void *arg)
{
	(void) arg;
	xact_cxt = NULL;
	xact_files = NIL;
}

/*
 * A time stored in a stream file (Unix microseconds) as PostgreSQL shows a
 * timestamptz; the CLI may have stored times PostgreSQL cannot show.
 */
static char *
unix_ts_str(int64 us)
{
	if (us >= MIN_TIMESTAMP + UNIX_TO_PG_US && us - UNIX_TO_PG_US < END_TIMESTAMP)
		return pstrdup(timestamptz_to_str(us - UNIX_TO_PG_US));
	return psprintf(INT64_FORMAT " microseconds since 1970-01-01 00:00:00+00", us);
}

/*
 * Why ts (Unix us) cannot follow last: "ts X is before Y, <what>" or, when
 * they are the same, "ts X equals <what>": each timestamp once.
 */
static char *
order_problem(int64 ts, int64 last, const char *what)
{
	if (ts == last)
		return psprintf("ts %s equals %s", unix_ts_str(ts), what);
	return psprintf("ts %s is before %s, %s", unix_ts_str(ts), unix_ts_str(last), what);
}

/* The waiting rows of the file h has open (by device and inode). */
static XactFile *
xact_file(StreamHandle *h)
{
	static bool registered = false;
	struct stat st;
	ListCell   *lc;
	XactFile   *xf;

	if (!registered)
	{
		RegisterXactCallback(stream_xact_callback, NULL);
		RegisterSubXactCallback(stream_subxact_callback, NULL);
		registered = true;
	}
	if (fstat(tdb_stream_io_fd(&h->kf->io), &st) != 0)
		ereport(ERROR, (errcode_for_file_access(), errmsg("could not stat stream file \"%s\": %m", h->filename)));
	if (xact_cxt == NULL)
	{
		xact_cxt = AllocSetContextCreate(TopTransactionContext, "trafficdb stream inserts",
										 ALLOCSET_DEFAULT_SIZES);
		xact_cxt_cb.func = xact_forget;
		xact_cxt_cb.arg = NULL;
		MemoryContextRegisterResetCallback(xact_cxt, &xact_cxt_cb);
	}
	foreach(lc, xact_files)
	{
		xf = lfirst(lc);
		if (xf->dev == st.st_dev && xf->ino == st.st_ino)
			return xf;
	}
	xf = MemoryContextAllocZero(xact_cxt, sizeof(XactFile));
	xf->dev = st.st_dev;
	xf->ino = st.st_ino;
	xf->filename = MemoryContextStrdup(xact_cxt, h->filename);
	{
		MemoryContext old = MemoryContextSwitchTo(xact_cxt);

		xact_files = lappend(xact_files, xf);
		MemoryContextSwitchTo(old);
	}
	return xf;
}

/* The waiting rows' state of the stream h has open, in file xf. */
static XactStream *
xact_stream(XactFile *xf, StreamHandle *h)
{
	const TdbStreamDef *d = &tdb_stream_schema(h->db)->streams[h->stream];
	ListCell   *lc;
	XactStream *xs;

	foreach(lc, xf->streams)
	{
		xs = lfirst(lc);
		if (strcmp(xs->def.name, d->name) != 0)
			continue;
		if (memcmp(&xs->def, d, sizeof(TdbStreamDef)) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("stream \"%s\" of stream file \"%s\" changed its definition since this transaction inserted into it",
							d->name, h->filename)));
		return xs;
	}
	xs = MemoryContextAllocZero(xact_cxt, sizeof(XactStream));
	memcpy(&xs->def, d, sizeof(TdbStreamDef));
	xs->relname = MemoryContextStrdup(xact_cxt, h->relname);
	xs->last_ts = INT64_MIN;
	{
		MemoryContext old = MemoryContextSwitchTo(xact_cxt);

		xf->streams = lappend(xf->streams, xs);
		MemoryContextSwitchTo(old);
	}
	return xs;
}

/* Keep a checked row (ts in Unix us) until the transaction ends. */
static void
xact_add(XactFile *xf, XactStream *xs, int64 ts, const TdbStreamValue *vals)
{
	uint32		n = xs->def.nfields;
	XactRow    *row;

	if (xf->nrows == xf->rowcap)
	{
		int64		cap = Max(1024, xf->rowcap * 2);

		xf->rows = xf->rows ? repalloc_huge(xf->rows, cap * sizeof(XactRow)) :
			MemoryContextAllocHuge(xact_cxt, cap * sizeof(XactRow));
		xf->rowcap = cap;
	}
	if (xf->nvals + n > xf->valcap)
	{
		int64		cap = Max(xf->nvals + n, Max(4096, xf->valcap * 2));

		xf->vals = xf->vals ? repalloc_huge(xf->vals, cap * sizeof(TdbStreamValue)) :
			MemoryContextAllocHuge(xact_cxt, cap * sizeof(TdbStreamValue));
		xf->valcap = cap;
	}
	row = &xf->rows[xf->nrows++];
	row->ts = ts;
	row->prev_ts = xs->last_ts;
	row->val = xf->nvals;
	row->xs = xs;
	row->subid = GetCurrentSubTransactionId();
	memcpy(&xf->vals[xf->nvals], vals, n * sizeof(TdbStreamValue));
	xf->nvals += n;
	xs->last_ts = ts;
}

/* ROLLBACK TO SAVEPOINT, or an error caught in a subtransaction: drop its rows. */
static void
stream_subxact_callback(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid,
						void *arg)
{
	ListCell   *lc;

	(void) parentSubid;
	(void) arg;
	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	foreach(lc, xact_files)
	{
		XactFile   *xf = lfirst(lc);

		/* newest first, so each stream ends with the last_ts before its first dropped row */
		while (xf->nrows > 0 && xf->rows[xf->nrows - 1].subid >= mySubid)
		{
			XactRow    *row = &xf->rows[--xf->nrows];

			row->xs->last_ts = row->prev_ts;
			xf->nvals = row->val;
		}
	}
}

static int
xact_file_cmp(const ListCell *a, const ListCell *b)
{
	const XactFile *x = lfirst(a);
	const XactFile *y = lfirst(b);

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return 0;
}

/*
 * Pre-commit: write and flush the waiting rows of every file.  Every file
 * is locked and every stream's first row checked against the file (another
 * writer may have appended since the INSERT) before anything is written,
 * so those errors leave every file as it was.  An error aborts the
 * transaction.
 */
static void
xact_write(void)
{
	List	   *files = NIL;
	MemoryContext cxt;
	StreamHandle **h;
	ListCell   *lc;
	int			i;

	foreach(lc, xact_files)
		if (((XactFile *) lfirst(lc))->nrows > 0)
			files = lappend(files, lfirst(lc));
	if (files == NIL)
		return;
	/* one order, so that two sessions committing into the same files never wait for each other */
	list_sort(files, xact_file_cmp);
	cxt = AllocSetContextCreate(TopTransactionContext, "trafficdb stream commit", ALLOCSET_DEFAULT_SIZES);
	h = MemoryContextAlloc(cxt, sizeof(StreamHandle *) * list_length(files));

	i = 0;
	foreach(lc, files)
	{
		XactFile   *xf = lfirst(lc);
		struct stat st;
		ListCell   *ls;
		int			unchecked = 0;

		/* the rows were checked, and the privilege to write, when inserted */
		h[i] = stream_open_file(xf->filename, ((XactStream *) linitial(xf->streams))->relname, NULL, true, cxt);
		if (fstat(tdb_stream_io_fd(&h[i]->kf->io), &st) != 0 || st.st_dev != xf->dev || st.st_ino != xf->ino)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("stream file \"%s\" was replaced since this transaction inserted into it", xf->filename),
					 errdetail("The transaction is rolled back; the file keeps none of its rows.")));
		foreach(ls, xf->streams)
		{
			XactStream *xs = lfirst(ls);
			int			s = tdb_stream_find(h[i]->db, xs->def.name);

			if (s < 0 || memcmp(&tdb_stream_schema(h[i]->db)->streams[s], &xs->def, sizeof(TdbStreamDef)) != 0)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("stream \"%s\" of stream file \"%s\" changed its definition since this transaction inserted into it",
								xs->def.name, xf->filename),
						 errdetail("The transaction is rolled back; the file keeps none of its rows.")));
			xs->at_commit = s;
			xs->checked = false;
			unchecked++;
		}
		for (int64 r = 0; r < xf->nrows && unchecked > 0; r++)
		{
			XactRow    *row = &xf->rows[r];
			int64		last;

			if (row->xs->checked)
				continue;
			row->xs->checked = true;
			unchecked--;
			(void) tdb_stream_last_ts(h[i]->db, row->xs->at_commit, &last);
			if (last != INT64_MIN && row->ts <= last)
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("could not write the rows this transaction inserted into \"%s\": the first one's %s",
								row->xs->relname, order_problem(row->ts, last, "the stream's last timestamp now")),
						 errdetail("Another writer appended to stream \"%s\" of stream file \"%s\" after this transaction inserted into it. "
								   "The transaction is rolled back; the file keeps none of its rows.",
								   row->xs->def.name, xf->filename),
						 errhint("Retry the transaction.")));
		}
		i++;
	}

	i = 0;
	foreach(lc, files)
	{
		XactFile   *xf = lfirst(lc);
		int			rc = TDB_STREAM_OK;

		for (int64 r = 0; r < xf->nrows && rc == TDB_STREAM_OK; r++)
			rc = tdb_stream_insert(h[i]->db, xf->rows[r].xs->at_commit, xf->rows[r].ts, &xf->vals[xf->rows[r].val]);
		if (rc == TDB_STREAM_OK)
			rc = tdb_stream_flush(h[i]->db);
		if (rc != TDB_STREAM_OK)
			ereport(ERROR,
					(errcode(rc == TDB_STREAM_EIO || rc == TDB_STREAM_EBROKEN ? ERRCODE_IO_ERROR : ERRCODE_DATA_EXCEPTION),
					 errmsg("could not write the rows this transaction inserted into stream file \"%s\": %s",
							xf->filename, tdb_stream_errmsg(h[i]->db)),
					 i == 0 ? errdetail("The transaction is rolled back; the file keeps none of its rows.") :
					 errdetail_plural("The transaction is rolled back, but the rows it inserted into %d other stream file were written already.",
									  "The transaction is rolled back, but the rows it inserted into %d other stream files were written already.",
									  i, i),
					 errhint("The file recovers when it is opened again.")));
		/* written: a failure later in the commit cannot take them back */
		stream_handle_close(h[i]);
		xf->nrows = 0;
		xf->nvals = 0;
		i++;
	}
	MemoryContextDelete(cxt);
}

static void
stream_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	(void) arg;
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			xact_write();
			break;
		case XACT_EVENT_PRE_PREPARE:
			foreach(lc, xact_files)
			{
				XactFile   *xf = lfirst(lc);

				if (xf->nrows > 0)
					ereport(ERROR,
							(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							 errmsg("cannot PREPARE a transaction that inserted into stream file \"%s\"", xf->filename),
							 errdetail("Inserted rows wait in the session's memory until the transaction commits; a prepared transaction cannot keep them."),
							 errhint("Insert into stream files in a transaction that is not prepared.")));
			}
			break;
		default:
			/* the end of the transaction frees xact_cxt */
			break;
	}
}

/* ---- INSERT ---------------------------------------------------------------- */

typedef struct ModifyState
{
	StreamHandle *h;
	XactFile   *xf;				/* where the rows wait for the commit */
	XactStream *xs;
	int		   *colmap;
	int			tscol;
	TdbStreamValue vals[TDB_STREAM_MAX_FIELDS];
	uint64		rows;
} ModifyState;

static void begin_insert(EState *estate, ResultRelInfo *rinfo, bool explain_only);

void
strBeginForeignModify(ModifyTableState *mtstate, ResultRelInfo *rinfo, List *fdw_private,
					  int subplan_index, int eflags)
{
	(void) fdw_private;
	(void) subplan_index;
	begin_insert(mtstate->ps.state, rinfo, (eflags & EXEC_FLAG_EXPLAIN_ONLY) != 0);
}

/* COPY FROM, and rows routed to a stream table that is a partition. */
void
strBeginForeignInsert(ModifyTableState *mtstate, ResultRelInfo *rinfo)
{
	begin_insert(mtstate->ps.state, rinfo, false);
}

/* Open the file for the statement's checks; rows wait for the commit. */
static void
begin_insert(EState *estate, ResultRelInfo *rinfo, bool explain_only)
{
	Relation	rel = rinfo->ri_RelationDesc;
	ModifyState *ms = MemoryContextAllocZero(estate->es_query_cxt, sizeof(ModifyState));
	const TdbStreamDef *d;

	rinfo->ri_FdwState = ms;
	if (explain_only)
		return;
	ms->h = stream_open(RelationGetRelid(rel), true, estate->es_query_cxt);
	d = &tdb_stream_schema(ms->h->db)->streams[ms->h->stream];
	ms->xf = xact_file(ms->h);
	ms->xs = xact_stream(ms->xf, ms->h);
	ms->colmap = stream_column_map(rel, d);
	ms->tscol = -1;
	for (int c = 0; c < RelationGetDescr(rel)->natts; c++)
		if (ms->colmap[c] == -1)
			ms->tscol = c;
	if (ms->tscol < 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_COLUMN_NAME_NOT_FOUND),
				 errmsg("\"%s\" has no ts column to insert by", RelationGetRelationName(rel))));
}

TupleTableSlot *
strExecForeignInsert(EState *estate, ResultRelInfo *rinfo, TupleTableSlot *slot, TupleTableSlot *plan_slot)
{
	ModifyState *ms = rinfo->ri_FdwState;
	const TdbStreamDef *d = &tdb_stream_schema(ms->h->db)->streams[ms->h->stream];
	int64		ts;
	int64		last;
	bool		mine;

	(void) estate;
	(void) plan_slot;
	slot_getallattrs(slot);
	if (slot->tts_isnull[ms->tscol])
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("row %llu inserted into \"%s\" has a NULL ts", (unsigned long long) ms->rows + 1,
						ms->h->relname)));
	ts = DatumGetTimestampTz(slot->tts_values[ms->tscol]);
	if (TIMESTAMP_NOT_FINITE(ts))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("row %llu inserted into \"%s\" has an infinite ts", (unsigned long long) ms->rows + 1,
						ms->h->relname)));
	/* the file keeps ts as microseconds since the Unix epoch in 64 bits */
	if (ts > PG_INT64_MAX - UNIX_TO_PG_US)
	{
		char	   *val = pstrdup(timestamptz_to_str(ts));
		char	   *lo = pstrdup(timestamptz_to_str(MIN_TIMESTAMP));

		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("row %llu inserted into \"%s\": ts = %s is out of range for a stream timestamp (%s to %s)",
						(unsigned long long) ms->rows + 1, ms->h->relname, val, lo,
						timestamptz_to_str(PG_INT64_MAX - UNIX_TO_PG_US))));
	}
	for (uint32 f = 0; f < d->nfields; f++)
		ms->vals[f].isnull = true;
	for (int c = 0; c < slot->tts_tupleDescriptor->natts; c++)
	{
		int			f = ms->colmap[c];
		TdbStreamValue *v;
		Datum		x = slot->tts_values[c];

		if (f < 0)
			continue;
		v = &ms->vals[f];
		v->isnull = slot->tts_isnull[c];
		if (v->isnull)
		{
			if (!d->fields[f].nullable)
				ereport(ERROR,
						(errcode(ERRCODE_NOT_NULL_VIOLATION),
						 errmsg("row %llu inserted into \"%s\" (ts %s) has a NULL %s, which the stream does not allow",
								(unsigned long long) ms->rows + 1, ms->h->relname, timestamptz_to_str(ts),
								d->fields[f].name)));
			continue;
		}
		switch (d->fields[f].type)
		{
			case TDB_ST_INT8:
				if (DatumGetInt16(x) < -128 || DatumGetInt16(x) > 127)
					ereport(ERROR,
							(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
							 errmsg("row %llu inserted into \"%s\": %s = %d is out of range for int8 (-128 to 127)",
									(unsigned long long) ms->rows + 1, ms->h->relname, d->fields[f].name,
									DatumGetInt16(x))));
				/* FALLTHROUGH */
			case TDB_ST_INT16:
				v->v.i = DatumGetInt16(x);
				break;
			case TDB_ST_INT32:
				v->v.i = DatumGetInt32(x);
				break;
			case TDB_ST_INT64:
				v->v.i = DatumGetInt64(x);
				break;
			case TDB_ST_FLOAT32:
				v->v.f = DatumGetFloat4(x);
				break;
			case TDB_ST_FLOAT64:
				v->v.f = DatumGetFloat8(x);
				break;
			case TDB_ST_BOOL:
				v->v.i = DatumGetBool(x);
				break;
		}
	}
	/*
	 * After the file's last record (this statement holds the file) and the
	 * rows this transaction inserted before, this statement's included.
	 */
	ts += UNIX_TO_PG_US;
	(void) tdb_stream_last_ts(ms->h->db, ms->h->stream, &last);
	mine = ms->xs->last_ts != INT64_MIN && ms->xs->last_ts >= last;
	if (mine)
		last = ms->xs->last_ts;
	if (last != INT64_MIN && ts <= last)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("row %llu inserted into \"%s\" is out of time order: %s",
						(unsigned long long) ms->rows + 1, ms->h->relname,
						order_problem(ts, last, mine ? "the last ts this transaction inserted into the stream" :
									  "the stream's last timestamp")),
				 errhint("Insert rows in ascending ts order (ORDER BY ts), after the stream's last row.")));
	xact_add(ms->xf, ms->xs, ts, ms->vals);
	ms->rows++;
	return slot;
}

void
strEndForeignModify(EState *estate, ResultRelInfo *rinfo)
{
	ModifyState *ms = rinfo->ri_FdwState;

	(void) estate;
	if (ms == NULL || ms->h == NULL)
		return;
	/* the rows wait for the commit (stream_xact_callback) */
	stream_handle_close(ms->h);
}

int
strIsForeignRelUpdatable(Relation rel)
{
	(void) rel;
	return 1 << CMD_INSERT;
}

