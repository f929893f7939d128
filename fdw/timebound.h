/*-------------------------------------------------------------------------
 *
 * timebound.h
 *	  What the stream and trail foreign data wrappers share: options by
 *	  name, and time ranges pushed down from comparisons of a timestamptz
 *	  column with constants, parameters or stable expressions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TDB_FDW_TIMEBOUND_H
#define TDB_FDW_TIMEBOUND_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/timestamp.h"

/* Unix epoch microseconds <-> PostgreSQL timestamps (microseconds since 2000). */
#define UNIX_TO_PG_US	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

/* The bound a clause puts on the column; kept as ints in fdw_private. */
typedef enum TdbTimeBound
{
	TDB_BOUND_GE = 0,			/* column >= value */
	TDB_BOUND_GT,
	TDB_BOUND_LE,
	TDB_BOUND_LT,
	TDB_BOUND_EQ
} TdbTimeBound;

/* The operator of each bound, for EXPLAIN. */
extern const char *const tdb_time_bound_ops[];

/* The value of option name in options, or NULL. */
extern char *tdb_fdw_option(List *options, const char *name);

/*
 * A validator's second argument must be one of the catalogs whose options
 * PostgreSQL validates (pg_foreign_data_wrapper, pg_foreign_server,
 * pg_user_mapping, pg_foreign_table, pg_attribute): anyone may call the
 * function with any OID, and "invalid option" would name the wrong problem.
 */
extern void tdb_fdw_check_catalog(Oid catalog, const char *validator);

/*
 * The bound operator opno puts on a timestamptz column (swap: the column
 * is its right operand), or -1 when it is none of the default btree
 * comparisons of timestamptz.
 */
extern int	tdb_time_bound_of(Oid opno, bool swap);

/*
 * Narrow [*from, *to] (Unix microseconds, inclusive) by "column kind v";
 * false when no finite time can satisfy it.
 */
extern bool tdb_time_bound_apply(int kind, TimestampTz v, int64 *from, int64 *to);

#endif							/* TDB_FDW_TIMEBOUND_H */
