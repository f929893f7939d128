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
 *	    s, ms, us, ns  the caller says (--time-unit); nanoseconds are
 *	                kept to the microsecond (the last three digits dropped,
 *	                rounding down), as ISO fractions below it are
 *	    auto        by magnitude: |v| < 1e11 seconds, < 1e14 milliseconds,
 *	                else microseconds.  Right for any time from 1973-03-03
 *	                to the year 5138 in any of the three units; never
 *	                nanoseconds (dropping digits is asked for, not guessed).
 *
 *	  In auto mode one column must keep one unit: a value the rule reads in
 *	  another unit than the column's first integer time is refused
 *	  (1593475200 seconds next to 1593475201000000 microseconds is a mixed
 *	  file, not two times 50 years apart).
 *
 *	  A column's times must also fall in a window (--time-window FROM..TO,
 *	  from FROM up to but not including TO), by default 1971-01-01 to
 *	  2200-01-01.  That window spans less than a factor of 1000 of seconds
 *	  since 1970 (2200-01-01 is 230 times 1971-01-01), so no integer falls
 *	  in it in two units: an integer read in the wrong unit (nanoseconds as
 *	  microseconds: the year 53736; seconds as microseconds: 1970-01-01
 *	  00:27; milliseconds as microseconds or seconds as milliseconds: a day
 *	  in January 1970) is always outside, and the error names the one unit
 *	  that would put it inside.
 */
#ifndef TDB_CSVTIME_H
#define TDB_CSVTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum TdbTimeUnit
{
	TDB_TIME_AUTO = 0, TDB_TIME_S, TDB_TIME_MS, TDB_TIME_US, TDB_TIME_NS
} TdbTimeUnit;

/* "s", "ms", "us", "ns" or "auto"; false for anything else. */
bool		tdb_time_unit_parse(const char *name, TdbTimeUnit *out);
/* "seconds", "milliseconds", "microseconds", "nanoseconds", "auto". */
const char *tdb_time_unit_name(TdbTimeUnit unit);
/* "s", "ms", "us", "ns", "auto": the --time-unit value. */
const char *tdb_time_unit_option(TdbTimeUnit unit);

/* Times accepted in a column: from <= t < to, in microseconds since 1970. */
typedef struct TdbTimeWindow
{
	int64_t		from;			/* INT64_MIN: no lower bound */
	int64_t		to;				/* INT64_MAX: no upper bound */
} TdbTimeWindow;

#define TDB_TIME_WINDOW_DEFAULT "1971-01-01..2200-01-01"

/*
 * "FROM..TO", each an ISO 8601 time (UTC unless it has an offset) or empty
 * for no bound; FROM before TO.  On failure err says why.
 */
bool		tdb_time_window_parse(const char *s, TdbTimeWindow *w, char *err, size_t errlen);
/* The window as "FROM..TO" (a date alone when a bound is midnight). */
void		tdb_time_window_format(const TdbTimeWindow *w, char *out, size_t outlen);
/* A time for a message: ISO 8601 in UTC, or "the year N" past 9999 or before 0. */
void		tdb_time_format(int64_t us, char *out, size_t outlen);

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
	const TdbTimeWindow *window;	/* NULL: any time */
} TdbTimeColumn;

/*
 * A time of the column on line `line`; on failure err says why (without
 * the line: the caller names it and the column): not a time, a unit mixed
 * with the column's first, or outside the window (naming the value read
 * in its unit and each other unit that puts it in the window).
 */
bool		tdb_time_column_parse(TdbTimeColumn *c, const char *s, long line, int64_t *us,
								  char *err, size_t errlen);

#endif							/* TDB_CSVTIME_H */
