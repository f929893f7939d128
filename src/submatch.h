/*
 * submatch.h
 *	  Subscriptions matched against a publication's changes (issue 18).
 *
 * A subscription is a filter: where (location ids, a box, a radius in
 * metres around a point, or a polygon), an optional condition on the
 * traffic, and which events (every change, or entering and leaving the
 * condition).  The index maps each record of one map to the subscriptions
 * whose area covers it (built once per map and set of subscriptions, in
 * O(covered records)); matching a publication walks only the records that
 * changed, so k changes cost k times the subscriptions per record, however
 * many subscriptions there are elsewhere.
 *
 * Plain C, no PostgreSQL headers: the daemon and the tests use it.
 */
#ifndef TDB_SUBMATCH_H
#define TDB_SUBMATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "knn.h"
#include "object.h"

typedef enum TdbSubArea
{
	TDB_SUB_IDS = 0,			/* ids[nids] */
	TDB_SUB_BOX = 1,			/* box: lon/lat min and max, inclusive */
	TDB_SUB_RADIUS = 2,			/* within radius_m metres of (lon, lat), the locations table's metric */
	TDB_SUB_POLYGON = 3,		/* intersecting polygon (a knn.h polygon query) */
	TDB_SUB_ALL_SQL = 4,		/* a subscriber's tap: the events of every row of
								 * trafficdb.subscriptions (never indexed itself) */
	TDB_SUB_NONE = 5			/* no events: a requester, or a member answering requests only */
} TdbSubArea;

typedef enum TdbSubCond
{
	TDB_SUB_ANY = 0,			/* no condition */
	TDB_SUB_CONGESTION_AT_LEAST = 1,	/* congestion known and >= value (0..4) */
	TDB_SUB_SPEED_BELOW = 2,	/* speed known and < value km/h */
	TDB_SUB_SPEED_BELOW_PCT = 3,	/* speed and free flow known, speed < value % of free flow */
	TDB_SUB_INCIDENT = 4		/* an incident is reported */
} TdbSubCond;

typedef enum TdbSubOn
{
	TDB_SUB_ON_CHANGE = 0,		/* every change of a location in the area where the condition holds afterwards */
	TDB_SUB_ON_ENTER_EXIT = 1	/* the condition starts (ENTER) or stops (EXIT) holding */
} TdbSubOn;

/* Event kinds (the rings of src/subring share them). */
#define TDB_SUB_EV_CHANGE 1
#define TDB_SUB_EV_ENTER 2
#define TDB_SUB_EV_EXIT 3

typedef struct TdbSubFilter
{
	uint32_t	id;				/* the subscription's id, carried into events */
	TdbSubArea	area;
	const uint64_t *ids;		/* TDB_SUB_IDS: the caller's array */
	uint32_t	nids;
	TdbBox		box;			/* TDB_SUB_BOX */
	double		lon,
				lat,
				radius_m;		/* TDB_SUB_RADIUS */
	TdbKnnQuery polygon;		/* TDB_SUB_POLYGON: initialised with tdb_knn_query_init */
	TdbSubCond	cond;
	double		value;			/* of cond */
	TdbSubOn	on;
} TdbSubFilter;

/*
 * Refuse a filter that cannot mean anything: NaN or infinite numbers, a
 * negative radius, an inverted box, an empty polygon or id list, a value out
 * of its condition's range, an unknown enum.  Names the value in err
 * (TDB_ERRLEN bytes).  Ids are checked against a map by tdb_sub_index_build.
 */
bool		tdb_sub_filter_check(const TdbSubFilter *f, char *err);

/* Whether the condition holds for a traffic entry (false when its inputs are unknown). */
bool		tdb_sub_cond_holds(TdbSubCond cond, double value, const TdbTraffic *t);

/*
 * What matching and delivery read of a filter, packed: 16 bytes against
 * TdbSubFilter's 176, so that the filters of 10,000 subscriptions stay in
 * cache while the pairs of a generation are matched in record order.
 */
typedef struct TdbSubMatchFilter
{
	double		value;			/* of cond */
	uint32_t	id;				/* the subscription's id */
	uint8_t		cond;			/* TdbSubCond */
	uint8_t		on;				/* TdbSubOn */
	uint8_t		pad[2];
} TdbSubMatchFilter;

/* The subscriptions covering each record of one map (CSR). */
typedef struct TdbSubIndex
{
	uint64_t	nrecords;
	uint64_t   *start;			/* nrecords + 1 */
	uint32_t   *subs;			/* indices into the filter array, start[r] .. start[r + 1] */
	uint64_t	npairs;
	uint32_t	nleft_out;		/* filters left out by tdb_sub_index_build_limited's max_pairs */
	uint32_t	nfilters;		/* the filter array's n when built */
	TdbSubMatchFilter *mf;		/* nfilters: each filter's condition, events and id, as built */
} TdbSubIndex;

/*
 * Build the index of n filters over map.  TDB_OBJ_EINVAL with err naming
 * the subscription and the value for a filter tdb_sub_filter_check refuses
 * or an id the map does not hold; TDB_OBJ_ENOMEM.
 */
int			tdb_sub_index_build(const TdbMapView *map, const TdbSubFilter *f, uint32_t n,
								TdbSubIndex *out, char *err);

/*
 * The same with a bound on memory: filters are taken in the order given
 * (NULL: 0 .. n - 1); those with skip[i] (skip may be NULL) get no pairs
 * and are not checked.
 * At the first filter whose pairs would take the index past max_pairs
 * (0: no bound), that filter and every later one in the order are left
 * out: left_out[i] set (left_out may be NULL), out->nleft_out counts them.
 * The work is O(max_pairs + n) however large the filters are.
 */
int			tdb_sub_index_build_limited(const TdbMapView *map, const TdbSubFilter *f, uint32_t n,
										const uint32_t *order, const bool *skip, uint64_t max_pairs,
										bool *left_out, TdbSubIndex *out, char *err);
void		tdb_sub_index_free(TdbSubIndex *ix);

/* One event: filter index, map record, kind (TDB_SUB_EV_*).  Nonzero stops the match. */
typedef int (*TdbSubEmit) (uint32_t filter, uint64_t record, uint16_t kind, void *arg);

/*
 * Match the records changed[0 .. nchanged) between two traffic arrays of
 * the index's map (old: the previous publication, new: this one); calls
 * emit in record order of changed, then filter order.  Returns the events
 * emitted (or the emitter's stop value, negated).  The conditions are those
 * of f as the index was built (ix->mf; f only for an index without them).
 */
int64_t		tdb_sub_match(const TdbSubIndex *ix, const TdbSubFilter *f, const TdbTraffic *old_entries,
						  const TdbTraffic *new_entries, const uint32_t *changed, uint64_t nchanged,
						  TdbSubEmit emit, void *arg);

/* What tdb_sub_match decides for one filter and one record's old and new entries (0: no event). */
uint16_t	tdb_sub_event_kind(const TdbSubFilter *f, const TdbTraffic *old_entry, const TdbTraffic *new_entry);

#endif							/* TDB_SUBMATCH_H */
