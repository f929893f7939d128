/*
 * trail_fixture.h
 *	  Random trail data sets for the tests: the events as the writer takes
 *	  them, what the file must give back (coordinates quantised, trails in
 *	  id order, events in time order), and a brute-force query to compare
 *	  the pruning reader against.
 */
#ifndef TDB_TRAIL_FIXTURE_H
#define TDB_TRAIL_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trail.h"
#include "types.h"

typedef struct FxEvent
{
	int64_t		key_i;
	char		key_s[24];
	int64_t		time;
	int32_t		lon,
				lat;			/* fixed point, as stored */
	uint32_t	seq;			/* insertion order, for stable sorting */
	TdbTrailValue vals[3];		/* f: float64, n: int64, s: string */
} FxEvent;

typedef struct FxSet
{
	TdbTrailSchema schema;
	FxEvent    *ev;				/* in the order the file returns them */
	size_t		n;
	int64_t    *keys_i;			/* distinct trail ids */
	char	  **keys_s;
	int			nkeys;
} FxSet;

/* A random set: string ids if string_ids, ntrails trails, up to max_len each. */
void		fx_make(FxSet *s, uint64_t *rng, bool string_ids, int ntrails, int max_len);

/*
 * A small file of format version: trail k has id 3k + 1 and n events a
 * second apart from FX_SMALL_T0 + k, in pages of at most page_events; a
 * float64 "v" (k + i / 2) and a string "s": "odd"/"even" by k when
 * ndistinct < 0, "name-%05d" of k % ndistinct when > 0, NULL when 0.
 */
#define FX_SMALL_T0 1600000000000000LL
/*
 * The schema the small test writers use: id (id_type), t, lon, lat and
 * ncolumns columns c0, c1, ... of type.
 */
TdbTrailSchema fx_schema(TdbTrailType id_type, int ncolumns, TdbTrailType type);

/* Finish w's file and free w: the file (*len bytes, malloc'd), or NULL if it failed. */
uint8_t    *fx_writer_done(TdbTrailWriter *w, size_t *len);

uint8_t    *fx_write_small(int version, int ntrails, int n, uint32_t page_events, TdbTrailOrder order,
							int ndistinct, size_t *len);
void		fx_free(FxSet *s);

/* Write s as a trail file at path with small pages; returns file size. */
size_t		fx_write(const FxSet *s, const char *path, uint32_t page_bytes, uint32_t page_events);

/* The file's bytes in memory (writer output). */
uint8_t    *fx_encode(const FxSet *s, uint32_t page_bytes, uint32_t page_events, size_t *len);

/* The layout fx_encode writes (tests loop over the three: see FX_LAYOUTS). */
extern int	fx_version;
extern TdbTrailOrder fx_order;
extern int64_t fx_bucket_us;
extern bool fx_by_time;			/* the "time" order: space-time without the place */
/* fx_encode's writer memory limit (0: the default) and the runs it spilled */
extern size_t fx_memory_limit;
extern uint32_t fx_runs;
/* The writer's page_max_span_us (0: the default, 15 minutes). */
extern int64_t fx_page_span_us;
/* Files fx_encode wrote as version 6 (pages column-major), so far. */
extern uint32_t fx_colmajor_files;

/*
 * Layouts: 0 version 1, 1 version 2 by trail, 2 version 2 space-time,
 * 3 version 3 by trail, 4 version 3 space-time, 5 version 3 by time
 * (pages of one trail and one bucket, by bucket then trail), 6 version 5
 * by trail (small trails share pages, summaries apart), 7 version 5
 * space-time, 8 version 6 by trail (pages column-major when they total at
 * most TDB_TRAIL_COLMAJOR_MAX_BYTES, else version 5), 9 version 6
 * space-time.
 */
#define FX_LAYOUTS 10
void		fx_layout(int layout);

/*
 * Reader output against the set whatever the page order: by trail, each
 * trail's events must come in the set's order (per trail, time then
 * insertion), trails may interleave; in space-time order each event must
 * match an event of the set not matched before (a trail's events are in
 * time order within a page only).  cur: fx_cursor_new, free.
 */
size_t	   *fx_cursor_new(const FxSet *s);
bool		fx_cursor_same(const FxSet *s, size_t *cur, const TdbTrailQuery *q,
						   const TdbTrailEvent *ev);

/* Does event e match q (the definition the reader must implement)? */
bool		fx_matches(const FxSet *s, const FxEvent *e, const TdbTrailQuery *q);

/* Same event as the reader returned?  Compares every field exactly. */
bool		fx_same(const FxSet *s, const FxEvent *e, const TdbTrailEvent *ev);

/* Remove a directory tree (rm -rf); a failure fails the test. */
void		fx_rmtree(const char *dir);

/* Write a buffer to a file; false on failure. */
bool		fx_write_file(const char *path, const void *buf, size_t len);

/* A fresh temporary directory path (created). */
void		fx_tmpdir(char *out, size_t outlen, const char *tag);

/* A trail file written from memory to a fresh directory and opened through a local pager. */
typedef struct FxOpened
{
	struct TdbPager *pager;
	struct TdbTrailReader *r;
	char		dir[256];
	char		path[300];
} FxOpened;

/*
 * buf to DIR/f.trail (DIR from fx_tmpdir with tag), opened; need_all loads
 * every chunk of a version-3 footer (tests that look at its entries);
 * fresh forgets the process's decoded footers first.  false after a
 * unit_fail naming why.
 */
bool		fx_open_buf(FxOpened *o, const uint8_t *buf, size_t len, const char *tag, bool need_all,
						bool fresh);
void		fx_close_opened(FxOpened *o);

/*
 * The MinIO the tests run against (src/trail/tests/run.sh sets the
 * TRAIL_TEST_* environment), directly or through the fault proxy; false,
 * after a "# skip" line, when it is not set.
 */
bool		fx_s3_env(TdbS3Config *c, bool via_proxy);

#endif							/* TDB_TRAIL_FIXTURE_H */
