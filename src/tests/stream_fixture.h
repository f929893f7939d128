/*
 * stream_fixture.h
 *	  What the tests of stream files share (stream_fixture.c): the
 *	  intercepting I/O layer that simulates power loss and failing
 *	  operations (CrashIO), and a workload with its model.
 *
 *	  The power-loss model (CrashIO): writes land in a page cache; a sync
 *	  makes them durable.  At the crash, each 512-byte sector of every write
 *	  since the last sync independently reached the disk or not, and the
 *	  write in flight is torn (some sectors), dropped, or leaves garbage in
 *	  some of its sectors.
 */
#ifndef TDB_TEST_STREAM_FIXTURE_H
#define TDB_TEST_STREAM_FIXTURE_H

#include <stdbool.h>

#include "stream/stream.h"

/* ---- the intercepting I/O layer ---------------------------------------------- */

typedef struct Range
{
	uint64_t	off;
	uint64_t	len;
} Range;

typedef struct CrashIO
{
	uint8_t    *disk;			/* durable */
	uint8_t    *cache;			/* what reads see */
	uint64_t	size;
	Range	   *pend;
	int			npend,
				cap;
	long		writes;			/* write calls so far */
	long		crash_at;		/* the write in flight when power goes (0 = never) */
	int			mode;			/* 0 torn, 1 dropped, 2 garbage */
	bool		crashed;
	long		ops;			/* read, write and sync calls so far */
	long		fail_at;		/* this operation fails (0 = none) */
	bool		fail_persist;	/* and every later one */
	uint64_t	rng;
} CrashIO;

/* A memory file of size bytes behind io (its ctx is c). */
void		cio_init(CrashIO *c, uint64_t size, TdbStreamIO *io);
void		cio_free(CrashIO *c);
/* Power goes: the image is what reached the disk (inflight_mode: 0 torn, 1 dropped, 2 garbage). */
void		cio_power_loss(CrashIO *c, int inflight_mode);

/* ---- a workload and its model ---------------------------------------------------- */

#define W_STREAMS 2
#define W_MAX 4000

typedef struct Model
{
	int64_t		ts[W_STREAMS][W_MAX];
	TdbStreamValue vals[W_STREAMS][W_MAX][4];
	int			n[W_STREAMS];	/* inserted */
	int			acked[W_STREAMS];	/* inserted when the last flush succeeded */
	int			pending[W_STREAMS];	/* inserted when a flush was under way */
} Model;

typedef struct Collect
{
	int64_t		ts[W_MAX];
	TdbStreamRecord recs[W_MAX];
	int			n;
} Collect;

/* Random values for stream s of the workload's schema (4 of them). */
void		make_values(uint64_t *rng, int s, TdbStreamValue *v);
/* ninserts inserts with flushes at random intervals into m; the first failure's code. */
int			run_workload(TdbStreamDB *db, Model *m, uint64_t seed, int ninserts);
/* A tdb_stream_read visitor appending to a Collect (p). */
int			collect(const TdbStreamRecord *r, void *p);
bool		same_value(const TdbStreamValue *a, const TdbStreamValue *b, bool is_float);
/* The crash guarantee for every stream of m; false (and reported) if broken. */
bool		check_against_model(TdbStreamDB *db, const Model *m, const char *what);
/* A file of the workload's schema behind io. */
void		create_file(TdbStreamIO *io);

#endif							/* TDB_TEST_STREAM_FIXTURE_H */
