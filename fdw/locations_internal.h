/*-------------------------------------------------------------------------
 *
 * locations_internal.h
 *	  The locations foreign data wrapper's private header: the types its
 *	  files share (the table's columns, what a scan pushes down, a scan's
 *	  state) and the functions one file gives another.  Not for use outside
 *	  fdw/locations*.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TDB_FDW_LOCATIONS_INTERNAL_H
#define TDB_FDW_LOCATIONS_INTERNAL_H

#include "postgres.h"

#include "nodes/execnodes.h"
#include "nodes/pathnodes.h"
#include "nodes/plannodes.h"
#include "utils/relcache.h"

#include "knn.h"
#include "module/snapshot.h"

/* The columns a locations table may have, recognised by name. */
typedef enum LocColumn
{
	COL_LOCATION_ID,
	COL_GEOM,
	COL_ROAD_CLASS,
	COL_NAME,
	COL_LENGTH_M,
	COL_SPEED_LIMIT,
	COL_ONEWAY,
	COL_SPEED,
	COL_FREE_FLOW,
	COL_CONGESTION,
	COL_CONFIDENCE,
	COL_INCIDENT,
	COL_UPDATED_AT,
	COL_GENERATION,
	COL_CHANGED_GENERATION,
	NUM_LOC_COLUMNS
} LocColumn;


/*
 * What a scan pushes down: one of these (a key filter is preferred), with
 * its argument expressions, evaluated once per scan (or per rescan when they
 * hold parameters of an outer join side).
 */
typedef enum PushKind
{
	PUSH_NONE = 0,
	PUSH_KEY,					/* location_id = a */
	PUSH_KEYS,					/* location_id = ANY(a) */
	PUSH_BOX,					/* geom && a, ST_Intersects(geom, a): box2d(a) */
	PUSH_DWITHIN_DEG,			/* ST_DWithin(geom, a, d): box2d(a) grown by d degrees */
	PUSH_DWITHIN_M,				/* ST_DWithin(geom::geography, a, d[, s]): grown by d metres */
	PUSH_KNN,					/* ORDER BY geom <-> a LIMIT k: the k nearest and their ties */
	PUSH_KNN_ORDER,				/* ORDER BY <distance of geom to a>: rows nearest first, incrementally */
	/* the kinds below are collected by collect_parts(), from one part or more */
	PUSH_BOX_OF,				/* ST_Within(geom, a), geom @ a, ...: box2d(a), rechecked */
	PUSH_EXPAND_OF,				/* ST_DFullyWithin(geom, a, d), ST_3DDWithin: box2d(a) grown by d */
	PUSH_GEOG_BOX,				/* ST_Intersects(geom::geography, a[, d]): a's box grown by metres */
	PUSH_ID_RANGE,				/* location_id > a, <= b, BETWEEN a AND b: see RANGE_* */
	PUSH_UNION					/* p1 OR p2 OR ...: the union of its parts' candidates */
} PushKind;

/* Push.flags of PUSH_ID_RANGE: which bounds its arguments are (lower first). */
#define RANGE_LO		0x01
#define RANGE_LO_INCL	0x02
#define RANGE_HI		0x04
#define RANGE_HI_INCL	0x08

/*
 * Push.flags of PUSH_BOX_OF: what an answer's box must be besides
 * overlapping the argument's (geom inside a implies box inside box, both
 * as PostGIS's float boxes, rounded outward, which keeps the order): the
 * GiST strategy PostGIS's support functions give ST_Within (@) and
 * ST_Contains (~).
 */
#define BOX_INSIDE		0x01	/* inside the argument's box */
#define BOX_AROUND		0x02	/* around it */

typedef struct Push
{
	PushKind	kind;
	List	   *args;			/* expressions */
	int64		k;				/* PUSH_KNN */
	RestrictInfo *rinfo;		/* the clause pushed, if any */
	bool		exact;			/* the candidates are exactly the clause's rows */
	int			flags;			/* PUSH_ID_RANGE: RANGE_* */
	const char *what;			/* for EXPLAIN: the function or operator behind the box */
	List	   *parts;			/* PUSH_UNION: its parts (Push *), whose args make args */
} Push;

/* fdw_private of the plan, by position. */
enum FdwPrivateIndex
{
	FdwPrivateColumns,			/* integer list: LocColumn of each attribute (-1 = unknown) */
	FdwPrivatePush,				/* integer list: kind, k (fdw_exprs holds the arguments) */
	FdwPrivateDescription,		/* string: for EXPLAIN */
	FdwPrivateKnnArg,			/* string: PUSH_KNN's argument, for EXPLAIN ANALYZE */
	FdwPrivateNargs,			/* integer: how many arguments the scan evaluates once per (re)scan */
	FdwPrivateRecheck,			/* integer list: the pushed clause's own recheck (own_recheck), or NIL */
	FdwPrivateRecheckText,		/* string: that clause, for EXPLAIN */
	FdwPrivateOrderExpr,		/* nearest first with fdw_scan_tlist: the distance expression, or NIL */
	FdwPrivatePrefilter			/* nearest first: the quals it checks before measuring an entry (NIL: none) */
};

typedef struct LocScanState
{
	int		   *colmap;			/* per attribute: LocColumn or -1 */
	int			natts;
	PushKind	kind;
	int64		k;
	int			geom_att;		/* attribute index of geom, or -1 */
	List	   *expr_states;
	int			nargs;			/* the pushed arguments: the first nargs of expr_states */
	Datum	   *argv;			/* their values in this (re)scan */
	bool	   *argnull;
	/* the pushed clause, rechecked by the scan with its arguments' values (own_recheck) */
	FunctionCallInfo recheck;
	int		   *recheck_arg;	/* per call argument: the pushed argument, or -1 for geom */
	char	   *recheck_desc;	/* for EXPLAIN */
	uint64		recheck_removed;
	char	   *description;
	char	   *knn_arg;
	/* kinds from PUSH_BOX_OF on: the parts, their arguments in order in expr_states */
	int			nparts;
	int		   *part_kind;
	int		   *part_nargs;
	int		   *part_flags;
	uint64		knn_scans;		/* (re)scans that searched the k nearest */
	uint64		knn_full_scans; /* and those that could not: not from a point */
	/* geography radius checked in the scan */
	ExprState  *radius_clause;
	bool		radius_fast;
	double		radius_x;
	double		radius_y;
	double		radius_lo;		/* at or below: surely within */
	double		radius_hi;		/* above: surely not */
	uint64		radius_postgis;	/* candidates PostGIS had to decide */
	MemoryContext eval_cxt;		/* per (re)scan: arguments, boxes; reset each time */
	bool		need_geom;
	const TdbSnapshot *snap;
	uint64	   *cand;			/* candidate record indexes, or NULL for all */
	uint64		ncand;
	uint64		next;
	uint64		examined;
	double	   *xy;
	uint32		xy_cap;
	/* PUSH_KNN_ORDER: an incremental nearest-first scan */
	ExprState  *order_state;	/* the ORDER BY distance, PostGIS's own, per entry */
	TupleTableSlot *knn_slot;	/* holds the entry's geom while it is measured */
	int			dist_att;		/* the scan tuple's attribute of that distance (fdw_scan_tlist), or -1 */
	double	   *knn_list_dist;	/* knn_list's measured distances (NaN: not a number, or NULL) */
	ExprState  *prefilter;		/* quals checked before an entry is measured (knn_prefilter), or NULL */
	ExprContext *pre_econtext;	/* their own, reset per entry */
	TupleTableSlot *pre_slot;
	uint64		knn_prefiltered;	/* entries they removed before measuring */
	bool		knn_range_walk;	/* the walk skips ids outside [knn_lo, knn_hi] */
	ExprContext *knn_econtext;
	MemoryContext knn_cxt;		/* per measured entry */
	TdbKnnIter	knn;
	bool		knn_active;
	int			knn_metric;		/* KnnMetric */
	TdbBoxF		knn_qbox;		/* planar: the query's box */
	TdbKnnQuery knn_query;		/* planar from a line: the line (knn_line_query) */
	TdbKnnGeoPoint knn_geo;		/* metres, from a point */
	bool		knn_geo_point;
	TdbKnnGeoShape knn_geo_shape;	/* metres, from a line or a polygon */
	uint32		knn_geo_nq;		/* its vertices */
	uint64		knn_measured;	/* entries measured and not refined first (examined) */
	uint64		knn_refined;	/* entries bounded by their own shape (examined) */
	uint64		knn_postgis;	/* distances PostGIS measured */
	/* PUSH_KNN_ORDER with an id range (knn_range): ids in [knn_lo, knn_hi] only */
	bool		knn_range;
	int64		knn_lo;
	int64		knn_hi;
	uint64	   *knn_list;		/* few ids in range: their entries, nearest first */
	uint64		knn_nlist;
	uint64		knn_next;
	bool		knn_listed;		/* the scan reads knn_list, not the walk */
	int			knn_limit;		/* the query's LIMIT as planned (10 if none) */
} LocScanState;

/* What an incremental nearest-first scan orders by. */
typedef enum KnnMetric
{
	KNN_PLANAR = 0,				/* geom <-> a (degrees) */
	KNN_BOX = 1,				/* geom <#> a (box distance, degrees) */
	KNN_GEOGRAPHY = 2			/* geom::geography <-> a (metres) */
} KnnMetric;

/* locations_classify.c: what can be pushed down */
extern int64 loc_datum_to_int64(Datum d, Oid typid);
extern int	loc_column_of(Var *v, Index relid, const int *colmap);
extern bool loc_is_geom_var(Expr *e, Index relid, const int *colmap);
extern bool loc_classify_clause(Expr *clause, Index relid, const int *colmap, Push *push);
extern bool loc_knn_origin(Datum geom, bool isnull, double *x, double *y);
extern bool loc_knn_order_key(PlannerInfo *root, RelOptInfo *baserel, const int *colmap, PathKey **pk_out,
						  Expr **order_expr, Expr **arg, KnnMetric *metric);
extern bool loc_knn_push(PlannerInfo *root, RelOptInfo *baserel, const int *colmap, Push *push);
extern bool loc_best_push(List *rinfos, RelOptInfo *baserel, const int *colmap, Push *best);

/* locations_plan.c: the table's columns, sizes, paths, costs, the plan */
extern void locGetForeignRelSize(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid);
extern void locGetForeignPaths(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid);
extern ForeignScan *locGetForeignPlan(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid,
									  ForeignPath *best_path, List *tlist, List *scan_clauses, Plan *outer_plan);

/* locations_scan.c: the scan */
extern void locBeginForeignScan(ForeignScanState *node, int eflags);
extern TupleTableSlot *locIterateForeignScan(ForeignScanState *node);
extern void locReScanForeignScan(ForeignScanState *node);
extern void locEndForeignScan(ForeignScanState *node);

/* locations_candidates.c: the records a (re)scan examines */
extern void loc_find_candidates(ForeignScanState *node, LocScanState *st);

/* locations_knn.c: nearest first, and what the candidates share */
extern void loc_knn_begin(ForeignScanState *node, LocScanState *st, Datum v, bool isnull, Oid type);
/* locations_row.c */
extern uint32 loc_record_geom_xy(ForeignScanState *node, LocScanState *st, uint64 i);
extern Datum loc_record_geom(ForeignScanState *node, LocScanState *st, uint64 i);
extern Datum loc_knn_measure(ForeignScanState *node, uint64 e, bool *isnull);
extern void loc_fill_row(ForeignScanState *node, LocScanState *st, TupleTableSlot *slot, uint64 i,
						 Datum own_geom, bool with_geom, bool geom_too);
extern bool loc_geometry_box_ex(Datum geom, TdbBox *box, bool as_postgis);
extern double loc_map_arc_slack(const TdbMapView *map);
extern bool loc_id_range_bounds(int flags, const Datum *v, const bool *isnull, const Oid *type,
								int64 *lo_out, int64 *hi_out);

#endif							/* TDB_FDW_LOCATIONS_INTERNAL_H */
