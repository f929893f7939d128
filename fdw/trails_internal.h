/*-------------------------------------------------------------------------
 *
 * trails_internal.h
 *	  The trail foreign data wrapper's private header: the types its files
 *	  share (a server's options, an open trail file, the pushed clauses, a
 *	  scan's state, the footer aggregates' plan) and the functions one file
 *	  gives another.  Not for use outside fdw/trails*.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TDB_FDW_TRAILS_INTERNAL_H
#define TDB_FDW_TRAILS_INTERNAL_H

#include "postgres.h"

#include "access/tupdesc.h"
#include "fdw/timebound.h"
#include "catalog/pg_attribute.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "nodes/execnodes.h"
#include "nodes/pathnodes.h"
#include "nodes/pg_list.h"
#include "nodes/plannodes.h"
#include "utils/palloc.h"
#include "utils/relcache.h"

#include "trail/pager.h"
#include "trail/trail.h"

/* A server's options, with the user mapping's credentials. */
typedef struct TrailOptions
{
	char	   *servername;
	char	   *endpoint;
	char	   *region;
	bool		path_style;
	uint32		block_size;
	char	   *cache_dir;		/* NULL: no disk cache */
	uint64		cache_bytes;
	int			parallel;
	int			readahead;
	int			retries;
	int			revalidate;		/* seconds; 0: every query */
	char	   *access_key;
	char	   *secret_key;
	char	   *session_token;
} TrailOptions;

/* revalidate_interval: seconds, up to a day */
#define REVALIDATE_MAX 86400


/* An open trail file, closed by a memory context reset (errors included). */
typedef struct TrailHandle
{
	TdbPager   *pager;
	TdbTrailReader *reader;
	TdbTrailScan *scan;
	/* a join's lookups: the pages they decoded (trafficdb.trail_page_cache) */
	TdbTrailPageCache *page_cache;
	char	   *url;
	MemoryContextCallback cb;
} TrailHandle;

/* What one pushed clause does; its arguments follow in fdw_exprs. */
enum
{
	/* 0 .. TDB_BOUND_EQ: time compared with a (TdbTimeBound) */
	PUSH_ID = TDB_BOUND_EQ + 1,					/* id = a */
	PUSH_IDS,					/* id = ANY (a) */
	PUSH_BOX,					/* geom && a, ST_Intersects(geom, a) */
	PUSH_DWITHIN_DEG,			/* ST_DWithin(geom, a, d) */
	PUSH_DWITHIN_M				/* ST_DWithin(geom::geography, a, d[, s]) */
};

typedef struct TrailCols
{
	AttrNumber	id;
	AttrNumber	time;
	AttrNumber	geom;
	Oid			id_type;
} TrailCols;


/* ---- aggregates from the footer ------------------------------------------------------ */

/*
 * SELECT count(*), max(altitude) FROM t [WHERE id = ...] [GROUP BY id]: the
 * footer's per-trail summaries (events, time range, zone map and, in
 * version 2, each column's count, minimum and maximum) answer it without a
 * page.  What each output column of such a scan is:
 */
enum
{
	AGG_GROUP_ID,				/* the trail id (GROUP BY id) */
	AGG_COUNT_STAR,
	AGG_COUNT,
	AGG_MIN,
	AGG_MAX,
	AGG_BOOL_AND,				/* bool_and, every */
	AGG_BOOL_OR
};

/* fdw_private of a base scan's plan (trlGetForeignPlan) */
enum
{
	TRLP_KINDS,					/* PUSH_* and TDB_BOUND_* of the pushed clauses (their arguments: fdw_exprs) */
	TRLP_LOOKUPS,				/* 0, or (a parameterized scan) the lookups the planner expects */
	TRLP_USED,					/* the attributes the scan forms */
	TRLP_MAY_STOP,				/* 1: the executor may stop before the last row */
	TRLP_EXACT,					/* the rectangle the scan checks itself (4 strings), or NIL */
	TRLP_BAND,					/* the distance band it settles itself (3 strings; its clause last in fdw_exprs), or NIL */
	TRLP_ID_ARG,				/* where in fdw_exprs the id clause it prunes with and checks is, or -1 */
	TRLP_OUTER_IDS,				/* a join's lookups: the outer VALUES list's ids (Consts), or NIL */
	TRLP_COUNT
};

/*
 * fdw_private of an aggregate scan's plan: its first items are a base
 * scan's (trails.c reads them from either); it scans no relation
 * (scanrelid 0), which is how trlBeginForeignScan tells the two apart
 */
enum
{
	AGGP_KINDS,					/* the id clauses, as a base scan's */
	AGGP_PARAMETERIZED,			/* 0 */
	AGGP_USED,					/* NIL */
	AGGP_OPS,					/* AGG_* of each fdw_scan_tlist entry */
	AGGP_ATTS,					/* and its column (0: none) */
	AGGP_TEXT,					/* "count(*), max(altitude)" for EXPLAIN */
	AGGP_TABLE,					/* the foreign table's OID (an OidList) */
	AGGP_GROUPED,				/* GROUP BY the trail id */
	AGGP_COUNT
};

StaticAssertDecl((int) AGGP_KINDS == (int) TRLP_KINDS && (int) AGGP_PARAMETERIZED == (int) TRLP_LOOKUPS &&
				 (int) AGGP_USED == (int) TRLP_USED, "an aggregate scan's first items are a base scan's");

/* The path's fdw_private: the same, then what the plan takes apart. */
enum
{
	AGGPATH_ARGS = AGGP_COUNT,	/* the id clauses' arguments (fdw_exprs) */
	AGGPATH_TLIST,				/* fdw_scan_tlist */
	AGGPATH_LOCAL				/* HAVING, checked on the scan's rows */
};

/*
 * Costs.  There are no statistics: a file is taken to hold a million
 * events, and a scan pays a round trip (the tail, the first pages) before
 * its first row, then TRAIL_ROW_COST per event for the bytes on the wire
 * and their decoding.  A lookup of one trail id (a parameterized scan, once
 * per outer row of a nested loop) reads only that trail's pages, fetched in
 * one request: TRAIL_LOOKUP_COST, plus TRAIL_LOOKUP_ROW_COST per event.  So
 * a nested loop of a few ids up to several hundred beats scanning the whole
 * file once for a hash join (2 ids: 32 against 10,100 for the scan alone),
 * and an outer side of a few thousand (by its statistics) does not.
 */
#define TRAIL_OPEN_COST		100.0
#define TRAIL_ROW_COST		0.01
#define TRAIL_LOOKUP_COST	5.0
#define TRAIL_LOOKUP_ROW_COST 0.001

typedef struct TrailPlan
{
	List	   *kinds;
	List	   *args;
	struct RestrictInfo *first_id;	/* the clause of kinds' first id kind, or NULL */
} TrailPlan;

/* Where a table column's values come from. */
enum
{
	SRC_NONE = -100,			/* not fetched by this query: NULL */
	SRC_ID = -1,
	SRC_TIME = -2,
	SRC_GEOM = -3,
	SRC_LON = -4,
	SRC_LAT = -5
	/* >= 0: extra column c */
};

typedef struct TrlScan
{
	TrailHandle *h;
	List	   *kinds;
	List	   *arg_states;		/* ExprState per argument */
	int		   *src;			/* per attribute */
	FmgrInfo   *inputs;			/* per attribute, for types made from text */
	Oid		   *ioparams;
	/*
	 * per attribute of type text: the string the last row's value was made
	 * of and that value, in a buffer of text_cap bytes rewritten when the
	 * string changes (the strings are the file's lexicon's: one pointer per
	 * distinct string while the scan runs; trl_text_datum)
	 */
	const char **text_src;
	text	  **text_buf;
	int		   *text_cap;
	/* the row's point, rewritten per row: no palloc (and context reset) per row */
	char	   *point_buf;
	TupleDesc	tupdesc;
	MemoryContext scan_cxt;		/* query arguments, reset per (re)scan */
	bool		started;
	bool		empty;			/* the pushed clauses match nothing */
	TdbTrailScanStats stats;	/* summed over rescans */
	int			nscans;
	/* what the last scan pushed, for EXPLAIN ANALYZE */
	int			last_nids;
	bool		last_time,
				last_box;
	/* a join's lookups of a VALUES list's ids (TRLP_OUTER_IDS), once per statement */
	bool		outer_ids_done;
	const int64 *outer_ids_int;
	const char *const *outer_ids_str;
	int			outer_nids;
	/* the file's columns the query does not read (TdbTrailQuery) */
	uint64		skip_columns;
	bool		skip_position;
	/*
	 * ST_Intersects(geom, a rectangle) the planner left to the scan
	 * (trails_plan.c exact_box): each point checked against exact_box (xmin, ymin,
	 * xmax, ymax); the points outside counted for EXPLAIN ANALYZE
	 */
	bool		exact;
	double		exact_box[4];
	uint64		exact_removed;
	/*
	 * ST_DWithin(geom::geography, point, d) the planner left to the scan
	 * (trails_plan.c geog_band): settled by the great-circle distance where it is
	 * certain (trl_band_settles), else by band_state, the clause itself
	 * (the last of the plan's fdw_exprs), on the formed row
	 */
	bool		band;
	double		band_lon,
				band_lat,
				band_d;
	bool		band_spheroid;	/* ST_DWithin's use_spheroid */
	ExprState  *band_state;
	uint64		band_removed;	/* rows outside, all told */
	uint64		band_asked;		/* rows PostGIS was asked about */
	/*
	 * The id clause the scan prunes with, which the planner left to it
	 * (trails_plan.c id_ri): the rows of the trails it looked up are those
	 * the clause holds for (id_exact, set by each scan's build_query); when
	 * the file could not answer it (a bigint column over string ids),
	 * id_state, the clause itself, on each formed row
	 */
	ExprState  *id_state;
	bool		id_exact;
	uint64		id_removed;		/* rows the clause failed, all told */
	uint64		id_asked;		/* rows it was evaluated on */
	TdbTrailQuery q;
	Relation	rel;			/* the foreign table */
	/* aggregates from the footer (AGGP_*) */
	bool		agg;
	bool		grouped;
	List	   *agg_ops;
	List	   *agg_atts;
	bool	   *member;			/* per trail: matches the id clauses */
	uint32		next;			/* grouped: the next trail */
	bool		done;
	/* summaries the footer lacks (a file replaced since planning): by reading pages */
	TdbTrailStats **computed;
	bool		scanned;
} TrlScan;

/* trails_access.c: options, URLs, errors, opening a trail file */
extern const char *trl_table_option_or(ForeignTable *ft, const char *option, const char *dflt);

#define ID_COLUMN(ft)	trl_table_option_or((ft), "id_column", "id")
#define TIME_COLUMN(ft) trl_table_option_or((ft), "time_column", "time")

extern int64 trl_bytes_option(const char *name, const char *value, int64 min, int64 max, bool pow2);
extern int	trl_int_option(const char *name, const char *value, int min, int max);
extern bool trl_is_remote_url(const char *url);
extern TrailOptions *trail_options(ForeignServer *server, bool s3);
extern void trl_check_url(const char *url, bool write);
extern void trl_net_options(const TrailOptions *o, TdbNetOptions *net);
extern void trl_s3_config(const TrailOptions *o, TdbS3Config *s3);
extern void trail_error(const TdbTrailError *err, const char *what);
/* head_only: the caller expects the footer's head to answer (a smaller first request) */
extern TrailHandle *trail_open_ext(ForeignServer *server, ForeignTable *ft, const char *url, MemoryContext cxt,
								  bool missing_ok, bool head_only);
extern TrailHandle *trail_open(ForeignServer *server, ForeignTable *ft, const char *url, MemoryContext cxt);
extern Oid	trl_id_array_elems(Datum v, Datum **elems, bool **nulls, int *n);
extern Datum trail_time_datum(int64 unix_us);

/* trails_plan.c: the table's columns, what narrows a scan, paths, costs, the plan */
extern TrailCols trail_cols(Oid relid);
extern bool trl_is_col(Expr *e, Index relid, AttrNumber att);
extern bool trl_classify(Expr *clause, Index relid, const TrailCols *c, List **kinds, List **args);
extern bool trl_collation_is_bytes(Oid coll);
extern void trlGetForeignRelSize(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid);
extern void trlGetForeignPaths(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid);
extern ForeignScan *trlGetForeignPlan(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid,
									  ForeignPath *best_path, List *tlist, List *scan_clauses, Plan *outer_plan);

/* trails_scan.c: the scan; where columns come from, opening and ending */
extern void trlBeginForeignScan(ForeignScanState *node, int eflags);
extern TupleTableSlot *trlIterateForeignScan(ForeignScanState *node);
extern void trlReScanForeignScan(ForeignScanState *node);
extern void trlEndForeignScan(ForeignScanState *node);
extern Bitmapset *trl_plan_used_attrs(ForeignScan *plan);
extern int	trl_attr_source(const TdbTrailSchema *sc, Form_pg_attribute a, TdbTrailType *t);
extern bool trl_direct_type(TdbTrailType t, Oid typid);
extern Datum trl_value_datum(TrlScan *st, int att, TdbTrailType t, int64 i, double f, const char *s);
extern void trl_open_file(ForeignScanState *node, TrlScan *st);
extern void trl_end_scan(TrlScan *st);

/* trails_agg.c: aggregates from the footer */
extern void trlGetForeignUpperPaths(PlannerInfo *root, UpperRelationKind stage, RelOptInfo *input_rel,
									RelOptInfo *output_rel, void *extra);
extern TupleTableSlot *trl_agg_iterate(ForeignScanState *node, TrlScan *st);

#endif							/* TDB_FDW_TRAILS_INTERNAL_H */
