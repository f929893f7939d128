/*
 * stream_open.c
 *	  Opening a stream table's file for the stream FDW (streams.c): the
 *	  backend's locks on stream files, the files it keeps open, handles
 *	  released with their memory context, and the mapping of a table's
 *	  columns to the stream's fields.
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

/* KeptFile: stream_open.h */
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
void
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
uint64
stream_handle_sectors(StreamHandle *h)
{
	TdbStreamFileInfo info;

	if (h->db == NULL)
		return 0;
	tdb_stream_info(h->db, &info);
	return info.sectors_read - h->sectors_at_start;
}

char *
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
StreamHandle *
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
StreamHandle *
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

Oid
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
int *
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

Datum
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

