/*
 * stream_open.h
 *	  Opening a stream table's file (stream_open.c), for the stream FDW's
 *	  other files: handles on the backend's kept files, and the mapping of
 *	  a table's columns to a stream's fields.
 */
#ifndef TDB_FDW_STREAM_OPEN_H
#define TDB_FDW_STREAM_OPEN_H

#include <sys/types.h>

#include "foreign/foreign.h"
#include "utils/palloc.h"
#include "utils/rel.h"

#include "stream/stream.h"

/* A stream file the backend keeps open (stream_open.c explains). */
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
typedef struct StreamLock StreamLock;

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

StreamHandle *stream_open(Oid relid, bool write, MemoryContext cxt);
StreamHandle *stream_open_file(const char *filename, const char *relname, const char *stream, bool write,
													MemoryContext cxt);
void		stream_handle_close(StreamHandle *h);
uint64		stream_handle_sectors(StreamHandle *h);
char	   *stream_server_filename(ForeignServer *server);
Oid			stream_field_pg_type(uint8_t t);
int		   *stream_column_map(Relation rel, const TdbStreamDef *d);
Datum		stream_field_datum(uint8_t type, const TdbStreamValue *v);

#endif							/* TDB_FDW_STREAM_OPEN_H */
