/*
 * csvtime.h
 *	  Times in CSV input, read the same way by both command-line tools
 *	  (trafficdb-stream append/dump, trafficdb-trail write/cat): one rule,
 *	  one implementation.
 *
 *	  A time is ISO 8601 ("2020-06-30", "2020-06-30T00:00:05",
 *	  "2020-06-30 00:00:05.25Z" in UTC; a time of day may carry an offset
 *	  from UTC, "...+02:00", "...-0530", "...+02") or an integer count since the
 *	  Unix epoch in a unit:
 *
 *	    s, ms, us   the caller says (--time-unit)
 *	    auto        by magnitude: |v| < 1e11 seconds, < 1e14 milliseconds,
 *	                else microseconds.  Right for any time from 1973-03-03
 *	                to the year 5138 in any of the three units.
 *
 *	  In auto mode one column must keep one unit: a value the rule reads in
 *	  another unit than the column's first integer time is refused
 *	  (1593475200 seconds next to 1593475201000000 microseconds is a mixed
 *	  file, not two times 50 years apart).
 */
#ifndef TDB_CSVTIME_H
#define TDB_CSVTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum TdbTimeUnit
{
	TDB_TIME_AUTO = 0, TDB_TIME_S, TDB_TIME_MS, TDB_TIME_US
} TdbTimeUnit;

/* "s", "ms", "us" or "auto"; false for anything else. */
bool		tdb_time_unit_parse(const char *name, TdbTimeUnit *out);
/* "seconds", "milliseconds", "microseconds", "auto". */
const char *tdb_time_unit_name(TdbTimeUnit unit);

/*
 * One time: microseconds since the epoch in *us.  *used (may be NULL) is
 * the unit an integer was read in, TDB_TIME_AUTO for ISO text.  False for
 * anything else, or an integer whose microseconds overflow 64 bits.
 */
bool		tdb_time_parse(const char *s, TdbTimeUnit unit, int64_t *us, TdbTimeUnit *used);

/* A column of times: the unit asked for and the one auto found first. */
typedef struct TdbTimeColumn
{
	TdbTimeUnit unit;			/* as asked (AUTO by default) */
	TdbTimeUnit found;			/* AUTO until an integer time is read */
	long		found_line;		/* where (the caller's numbering) */
} TdbTimeColumn;

/*
 * A time of the column on line `line`; on failure err says why (without
 * the line: the caller names it and the column).
 */
bool		tdb_time_column_parse(TdbTimeColumn *c, const char *s, long line, int64_t *us,
								  char *err, size_t errlen);

#endif							/* TDB_CSVTIME_H */
