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

PG_FUNCTION_INFO_V1(trafficdb_streams_handler);
PG_FUNCTION_INFO_V1(trafficdb_streams_validator);
PG_FUNCTION_INFO_V1(trafficdb_stream_aggregate);
PG_FUNCTION_INFO_V1(trafficdb_stream_resample);

/* ---- opening a table's stream -------------------------------------------- */

/*
 * The backend's locks on stream files: one lock descriptor per file (by
 * device and inode), shared by every handle of the backend on that file.
 * flock locks belong to open file descriptions, so two handles of one
 * backend each locking through its own descriptor waited for each other
 * (INSERT INTO b SELECT FROM a on two streams of one file hung for good).
 * A shared request while the backend holds the file exclusive is satisfied
 * by it; an exclusive request while it holds it shared is an error, never
 * a wait on itself.  Waits poll with LOCK_NB on the latch, so cancel,
 * statement_timeout, termination and shutdown all interrupt them.
 */
typedef struct StreamLock
{
	dev_t		dev;
	ino_t		ino;
	int			fd;				/* the descriptor holding the flock */
	int			nshared;
	int			nexclusive;
} StreamLock;

static List *stream_locks = NIL;	/* of StreamLock *, in TopMemoryContext */
static int	pending_lock_fd = -1;	/* of a wait an interrupt ended */

static StreamLock *
stream_lock_acquire(const char *filename, TdbStreamIO *io, bool exclusive)
{
	struct stat st;
	StreamLock *l = NULL;
	ListCell   *lc;
	long		wait_ms = 1;
	int			fd;

	if (pending_lock_fd >= 0)
	{
		close(pending_lock_fd);
		pending_lock_fd = -1;
	}
	if (fstat(tdb_stream_io_fd(io), &st) != 0)
		ereport(ERROR, (errcode_for_file_access(), errmsg("could not stat stream file \"%s\": %m", filename)));
	foreach(lc, stream_locks)
	{
		StreamLock *c = lfirst(lc);

		if (c->dev == st.st_dev && c->ino == st.st_ino)
			l = c;
	}
	if (l != NULL && l->nexclusive > 0)
	{
		/* this backend writes the file already: reads and writes share that */
		if (exclusive)
			l->nexclusive++;
		else
			l->nshared++;
		return l;
	}
	if (l != NULL && !exclusive)
	{
		l->nshared++;
		return l;
	}
	if (l != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("cannot write stream file \"%s\" while this session is reading it", filename),
				 errhint("Close the open cursor on a table of this file first.")));

	fd = open(filename, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		ereport(ERROR, (errcode_for_file_access(), errmsg("could not open stream file \"%s\" to lock it: %m", filename)));
	for (;;)
	{
		if (flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0)
			break;
		if (errno != EWOULDBLOCK && errno != EINTR)
		{
			int			save = errno;

			close(fd);
			errno = save;
			ereport(ERROR, (errcode_for_file_access(), errmsg("could not lock stream file \"%s\": %m", filename)));
		}

		/*
		 * Another process holds it (the CLI writing, another backend).  If
		 * an interrupt ends the wait, the descriptor (which holds no lock)
		 * is closed by the next call.
		 */
		pending_lock_fd = fd;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, wait_ms,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		pending_lock_fd = -1;
		wait_ms = Min(wait_ms * 2, 100);
	}
	l = MemoryContextAllocZero(TopMemoryContext, sizeof(StreamLock));
	l->dev = st.st_dev;
	l->ino = st.st_ino;
	l->fd = fd;
	if (exclusive)
		l->nexclusive = 1;
	else
		l->nshared = 1;
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		stream_locks = lappend(stream_locks, l);
		MemoryContextSwitchTo(old);
	}
	return l;
}

/* Never raises an error: called from memory context reset callbacks. */
static void
stream_lock_release(StreamLock *l, bool exclusive)
{
	if (exclusive)
		l->nexclusive--;
	else
		l->nshared--;
	if (l->nexclusive > 0 || l->nshared > 0)
		return;
	(void) flock(l->fd, LOCK_UN);
	close(l->fd);
	stream_locks = list_delete_ptr(stream_locks, l);
	pfree(l);
}

/*
 * The backend's kept stream files.  Opening a file reads its superblocks
 * and schema (about 100 kB for 64 streams); a stream's index is then read a
 * sector at a time as lookups need it and cached in the handle.  So the
 * handle is kept, per file (device and inode), between statements: each
 * use takes the file's lock and then revalidates it with
 * tdb_stream_refresh() (superblock copy 0 and the schema's header: one
 * read each), which forgets what it cached of a stream whose commit changed.
 * Rows are therefore never stale: every statement reads the file's last
 * commit, as a freshly opened handle would.
 *
 * A file replaced under its name (a rename, a new inode) is noticed by the
 * stat of its path before each use: the old handle is closed, which also
 * lets go of the old inode.  One re-created in place (another schema or
 * layout) is noticed by the refresh, and reopened; so is one whose size
 * changed.  The backend's own INSERTs are written through the kept handle,
 * so after its flush the handle holds that commit; a write that failed
 * part way, or any error while a handle was in use, closes it.
 *
 * Memory: at most KEPT_MAX files (the least recently used is closed), each
 * with its schema, one state per stream and at most 256 cached index
 * sectors (512 bytes each): a few hundred kB per file.  Handles are
 * closed when the backend exits.
 */
#define KEPT_MAX 8

typedef struct KeptFile
{
	dev_t		dev;
	ino_t		ino;
	off_t		size;
	char	   *filename;		/* the path it was opened by */
	TdbStreamIO io;
	TdbStreamDB *db;			/* NULL until opened under the lock */
	bool		writable;
	bool		doomed;			/* close when no handle uses it */
	int			refs;			/* handles using it now */
	uint64		used;			/* for LRU */
} KeptFile;

static List *kept_files = NIL;	/* of KeptFile *, in TopMemoryContext */
static uint64 kept_tick = 0;

static void
kept_close(KeptFile *kf)
{
	kept_files = list_delete_ptr(kept_files, kf);
	if (kf->db != NULL)
		tdb_stream_close(kf->db);
	if (kf->io.ctx != NULL)
		tdb_stream_io_file_close(&kf->io);
	pfree(kf->filename);
	pfree(kf);
}

static void
kept_exit(int code, Datum arg)
{
	(void) code;
	(void) arg;
	while (kept_files != NIL)
		kept_close(linitial(kept_files));
}

/*
 * The kept file at filename, or a new one (opened read-only, or read-write
 * to write; not yet locked, nor its stream file opened).
 */
static KeptFile *
kept_get(const char *filename, const char *relname, bool write)
{
	static bool registered = false;
	struct stat st;
	bool		have_stat = stat(filename, &st) == 0;
	KeptFile   *kf = NULL;
	ListCell   *lc;
	char		err[256];
	int			live = 0;

	if (!registered)
	{
		on_proc_exit(kept_exit, (Datum) 0);
		registered = true;
	}
	foreach(lc, kept_files)
	{
		KeptFile   *c = lfirst(lc);

		if (c->doomed)
			continue;
		if (have_stat && c->dev == st.st_dev && c->ino == st.st_ino && c->size == st.st_size &&
			(c->writable || !write))
			kf = c;
		else if (strcmp(c->filename, filename) == 0 || (have_stat && c->dev == st.st_dev && c->ino == st.st_ino))
			c->doomed = true;	/* replaced, resized, or needed writable */
	}
	/*
	 * close what is doomed and unused, and the least recently used beyond
	 * KEPT_MAX (kept_close deletes from kept_files: not inside a foreach,
	 * which would skip the next file, or read the list freed with the last)
	 */
	for (int i = 0; i < list_length(kept_files);)
	{
		KeptFile   *c = list_nth(kept_files, i);

		if (c->doomed && c->refs == 0)
			kept_close(c);
		else
		{
			live++;
			i++;
		}
	}
	while (kf == NULL && live >= KEPT_MAX)
	{
		KeptFile   *lru = NULL;

		foreach(lc, kept_files)
		{
			KeptFile   *c = lfirst(lc);

			if (c->refs == 0 && (lru == NULL || c->used < lru->used))
				lru = c;
		}
		if (lru == NULL)
			break;
		kept_close(lru);
		live--;
	}
	if (kf != NULL)
	{
		kf->used = ++kept_tick;
		return kf;
	}

	kf = MemoryContextAllocZero(TopMemoryContext, sizeof(KeptFile));
	/* readers open read-only: a file the server may read but not write is readable */
	if ((write ? tdb_stream_io_file(filename, false, 0, &kf->io, err, sizeof(err)) :
		 tdb_stream_io_file_readonly(filename, &kf->io, err, sizeof(err))) != TDB_STREAM_OK)
	{
		pfree(kf);
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open stream file for \"%s\": %s", relname, err)));
	}
	if (fstat(tdb_stream_io_fd(&kf->io), &st) != 0)
	{
		int			save = errno;

		tdb_stream_io_file_close(&kf->io);
		pfree(kf);
		errno = save;
		ereport(ERROR, (errcode_for_file_access(), errmsg("could not stat stream file \"%s\": %m", filename)));
	}
	kf->dev = st.st_dev;
	kf->ino = st.st_ino;
	kf->size = st.st_size;
	kf->writable = write;
	kf->filename = MemoryContextStrdup(TopMemoryContext, filename);
	kf->used = ++kept_tick;
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		kept_files = lappend(kept_files, kf);
		MemoryContextSwitchTo(old);
	}
	return kf;
}

/* A stream file in use, released by a memory context reset (errors included). */
typedef struct StreamHandle
{
	KeptFile   *kf;				/* NULL once released */
	TdbStreamDB *db;			/* kf->db */
	int			stream;
	char	   *filename;
	char	   *relname;
	StreamLock *lock;			/* NULL until locked */
	bool		exclusive;
	uint64		sectors_at_start;	/* the I/O counter when this use began */
	MemoryContextCallback cb;
} StreamHandle;

static void
stream_handle_release(StreamHandle *h, bool ok)
{
	KeptFile   *kf = h->kf;

	h->kf = NULL;
	h->db = NULL;
	if (kf != NULL)
	{
		/* an error while in use may have left the handle part way through something */
		if (!ok)
			kf->doomed = true;
		kf->refs--;
		if (kf->doomed && kf->refs == 0)
			kept_close(kf);
	}
	if (h->lock != NULL)
		stream_lock_release(h->lock, h->exclusive);
	h->lock = NULL;
}

/* Done with the file: the handle stays kept, the lock goes. */
static void
stream_handle_close(StreamHandle *h)
{
	stream_handle_release(h, true);
}

/* The memory context went away with the handle still in use: an error. */
static void
stream_handle_abort(void *arg)
{
	stream_handle_release(arg, false);
}

/* Sectors read through h since it was taken (revalidation or opening included). */
static uint64
stream_handle_sectors(StreamHandle *h)
{
	TdbStreamFileInfo info;

	if (h->db == NULL)
		return 0;
	tdb_stream_info(h->db, &info);
	return info.sectors_read - h->sectors_at_start;
}

static char *
stream_server_filename(ForeignServer *server)
{
	char	   *f = tdb_fdw_option(server->options, "filename");

	if (f == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("server \"%s\" has no filename option", server->servername),
				 errhint("ALTER SERVER %s OPTIONS (ADD filename '/path/to/file.tsf').",
						 quote_identifier(server->servername))));
	return f;
}

/*
 * Open stream file filename (locked shared, or exclusive to write) for the
 * life of memory context cxt, and find stream in it (NULL: none); relname
 * names the table in messages.
 */
static StreamHandle *
stream_open_file(const char *filename, const char *relname, const char *stream, bool write,
				 MemoryContext cxt)
{
	StreamHandle *h = MemoryContextAllocZero(cxt, sizeof(StreamHandle));
	KeptFile   *kf;
	char		err[256];
	int			rc = TDB_STREAM_OK;

	h->filename = MemoryContextStrdup(cxt, filename);
	h->relname = MemoryContextStrdup(cxt, relname);
	h->stream = -1;
	kf = kept_get(h->filename, h->relname, write);
	kf->refs++;
	h->kf = kf;
	h->cb.func = stream_handle_abort;
	h->cb.arg = h;
	MemoryContextRegisterResetCallback(cxt, &h->cb);
	h->exclusive = write;
	h->lock = stream_lock_acquire(h->filename, &kf->io, write);
	/* under the lock: bring the kept handle to the last commit, or open the file */
	if (kf->db != NULL)
	{
		TdbStreamFileInfo info;
		bool		changed;

		tdb_stream_info(kf->db, &info);
		h->sectors_at_start = info.sectors_read;
		if (tdb_stream_refresh(kf->db, &changed) != TDB_STREAM_OK)
		{
			/* re-created in place, or left unusable: open it again */
			tdb_stream_close(kf->db);
			kf->db = NULL;
		}
	}
	if (kf->db == NULL)
	{
		h->sectors_at_start = 0;
		rc = tdb_stream_open(&kf->io, &kf->db, err, sizeof(err));
	}
	if (rc != TDB_STREAM_OK)
		ereport(ERROR,
				(errcode(rc == TDB_STREAM_EFORMAT ? ERRCODE_FDW_INVALID_DATA_TYPE : ERRCODE_DATA_CORRUPTED),
				 errmsg("could not open stream file \"%s\": %s", h->filename, err),
				 errdetail("%s", tdb_stream_strerror(rc))));
	h->db = kf->db;
	if (stream != NULL && (h->stream = tdb_stream_find(h->db, stream)) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_TABLE_NOT_FOUND),
				 errmsg("stream file \"%s\" has no stream \"%s\"", h->filename, stream),
				 errhint("IMPORT FOREIGN SCHEMA lists the streams of a file.")));
	return h;
}

/*
 * Open the stream file of foreign table relid (locked shared, or exclusive
 * to write) for the life of memory context cxt.
 */
static StreamHandle *
stream_open(Oid relid, bool write, MemoryContext cxt)
{
	ForeignTable *ft = GetForeignTable(relid);
	ForeignServer *server = GetForeignServer(ft->serverid);
	char	   *filename = stream_server_filename(server);
	char	   *relname = get_rel_name(relid);
	char	   *stream = tdb_fdw_option(ft->options, "stream");

	if (write && !has_privs_of_role(GetUserId(), ROLE_PG_WRITE_SERVER_FILES))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to write stream file \"%s\"", filename),
				 errdetail("Only roles with privileges of the \"%s\" role may insert into stream files.",
						   "pg_write_server_files")));
	return stream_open_file(filename, relname, stream != NULL ? stream : relname, write, cxt);
}

static Oid
stream_field_pg_type(uint8_t t)
{
	switch (t)
	{
		case TDB_ST_INT8:
		case TDB_ST_INT16:
			return INT2OID;
		case TDB_ST_INT32:
			return INT4OID;
		case TDB_ST_INT64:
			return INT8OID;
		case TDB_ST_FLOAT32:
			return FLOAT4OID;
		case TDB_ST_FLOAT64:
			return FLOAT8OID;
		case TDB_ST_BOOL:
			return BOOLOID;
	}
	return InvalidOid;
}

/*
 * Map the table's columns to the stream: colmap[attno - 1] is a field
 * number, -1 for ts, or -2 for a column the stream does not have (an error
 * names it).
 */
static int *
stream_column_map(Relation rel, const TdbStreamDef *d)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	int		   *map = palloc(sizeof(int) * tupdesc->natts);

	for (int a = 0; a < tupdesc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, a);
		const char *name = NameStr(att->attname);
		Oid			want = InvalidOid;

		map[a] = -2;
		if (att->attisdropped)
			continue;
		if (strcmp(name, "ts") == 0)
		{
			map[a] = -1;
			want = TIMESTAMPTZOID;
		}
		else
			for (uint32 f = 0; f < d->nfields; f++)
				if (strcmp(d->fields[f].name, name) == 0)
				{
					map[a] = (int) f;
					want = stream_field_pg_type(d->fields[f].type);
				}
		if (map[a] == -2)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_COLUMN_NAME_NOT_FOUND),
					 errmsg("stream \"%s\" has no field \"%s\" (column of \"%s\")", d->name, name,
							RelationGetRelationName(rel))));
		if (att->atttypid != want)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
					 errmsg("column \"%s\" of \"%s\" is %s; the stream's field is %s", name,
							RelationGetRelationName(rel), format_type_be(att->atttypid),
							format_type_be(want))));
	}
	return map;
}

static Datum
stream_field_datum(uint8_t type, const TdbStreamValue *v)
{
	switch (type)
	{
		case TDB_ST_INT8:
		case TDB_ST_INT16:
			return Int16GetDatum((int16) v->v.i);
		case TDB_ST_INT32:
			return Int32GetDatum((int32) v->v.i);
		case TDB_ST_INT64:
			return Int64GetDatum(v->v.i);
		case TDB_ST_FLOAT32:
			return Float4GetDatum((float4) v->v.f);
		case TDB_ST_FLOAT64:
			return Float8GetDatum(v->v.f);
		case TDB_ST_BOOL:
			return BoolGetDatum(v->v.i != 0);
	}
	return (Datum) 0;
}

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

static void
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

static void
strBeginForeignModify(ModifyTableState *mtstate, ResultRelInfo *rinfo, List *fdw_private,
					  int subplan_index, int eflags)
{
	(void) fdw_private;
	(void) subplan_index;
	begin_insert(mtstate->ps.state, rinfo, (eflags & EXEC_FLAG_EXPLAIN_ONLY) != 0);
}

/* COPY FROM, and rows routed to a stream table that is a partition. */
static void
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

static TupleTableSlot *
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

static void
strEndForeignModify(EState *estate, ResultRelInfo *rinfo)
{
	ModifyState *ms = rinfo->ri_FdwState;

	(void) estate;
	if (ms == NULL || ms->h == NULL)
		return;
	/* the rows wait for the commit (stream_xact_callback) */
	stream_handle_close(ms->h);
}

static int
strIsForeignRelUpdatable(Relation rel)
{
	(void) rel;
	return 1 << CMD_INSERT;
}

/* ---- IMPORT FOREIGN SCHEMA --------------------------------------------------- */

static List *
strImportForeignSchema(ImportForeignSchemaStmt *stmt, Oid serverOid)
{
	ForeignServer *server = GetForeignServer(serverOid);
	char	   *filename = stream_server_filename(server);
	TdbStreamIO io;
	TdbStreamDB *db;
	char		err[256];
	List	   *cmds = NIL;
	const TdbStreamSchema *sc;
	int			rc;

	if (tdb_stream_io_file(filename, false, 0, &io, err, sizeof(err)) != TDB_STREAM_OK)
		ereport(ERROR, (errcode_for_file_access(), errmsg("could not open stream file: %s", err)));
	tdb_stream_io_lock(&io, false);
	if ((rc = tdb_stream_open(&io, &db, err, sizeof(err))) != TDB_STREAM_OK)
	{
		tdb_stream_io_file_close(&io);
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("could not open stream file \"%s\": %s", filename, err)));
	}
	sc = tdb_stream_schema(db);
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
	tdb_stream_close(db);
	tdb_stream_io_file_close(&io);
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
