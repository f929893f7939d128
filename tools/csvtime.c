/*
 * csvtime.c
 *	  Times in CSV input for the command-line tools: see csvtime.h.
 */
#include "csvtime.h"
#include "csv_fields.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool
tdb_time_unit_parse(const char *name, TdbTimeUnit *out)
{
	static const struct
	{
		const char *name;
		TdbTimeUnit unit;
	}			units[] = {{"auto", TDB_TIME_AUTO}, {"s", TDB_TIME_S}, {"ms", TDB_TIME_MS}, {"us", TDB_TIME_US}};

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcmp(name, units[i].name) == 0)
		{
			*out = units[i].unit;
			return true;
		}
	return false;
}

const char *
tdb_time_unit_name(TdbTimeUnit unit)
{
	return unit == TDB_TIME_S ? "seconds" : unit == TDB_TIME_MS ? "milliseconds" :
		unit == TDB_TIME_US ? "microseconds" : "auto";
}

/* Exactly n digits at *p, advancing it. */
static bool
digits(const char **p, int n, int *out)
{
	int			v = 0;

	for (int i = 0; i < n; i++)
	{
		if (!isdigit((unsigned char) (*p)[i]))
			return false;
		v = v * 10 + ((*p)[i] - '0');
	}
	*p += n;
	*out = v;
	return true;
}

static bool
iso_time(const char *s, int64_t *us)
{
	static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	const char *p = s;
	int			y, mo, d, h = 0, mi = 0, sec = 0;
	int64_t		frac = 0;
	int			offset_s = 0;
	bool		has_time = false;
	struct tm	tm;

	if (!digits(&p, 4, &y) || *p++ != '-' || !digits(&p, 2, &mo) || *p++ != '-' || !digits(&p, 2, &d))
		return false;
	if (*p == 'T' || *p == ' ')
	{
		p++;
		has_time = true;
		if (!digits(&p, 2, &h) || *p++ != ':' || !digits(&p, 2, &mi) || *p++ != ':' || !digits(&p, 2, &sec))
			return false;
		if (*p == '.')
		{
			int64_t		scale = 100000;

			if (!isdigit((unsigned char) p[1]))
				return false;
			/* below a microsecond is dropped */
			for (p++; isdigit((unsigned char) *p); p++, scale /= 10)
				frac += (*p - '0') * scale;
		}
	}
	if (*p == 'Z')
		p++;
	else if ((*p == '+' || *p == '-') && has_time)
	{
		/* an offset from UTC after a time of day: +HH, +HH:MM or +HHMM */
		int			sign = *p++ == '-' ? -1 : 1;
		int			oh,
					om = 0;

		if (!digits(&p, 2, &oh))
			return false;
		if (*p == ':')
			p++;
		if (isdigit((unsigned char) *p) && !digits(&p, 2, &om))
			return false;
		if (oh > 23 || om > 59)
			return false;
		offset_s = sign * (oh * 3600 + om * 60);
	}
	if (*p != '\0' || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] ||
		(mo == 2 && d == 29 && !(y % 4 == 0 && (y % 100 != 0 || y % 400 == 0))) ||
		h > 23 || mi > 59 || sec > 60)
		return false;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	*us = ((int64_t) timegm(&tm) - offset_s) * 1000000 + frac;
	return true;
}

bool
tdb_time_parse(const char *s, TdbTimeUnit unit, int64_t *us, TdbTimeUnit *used)
{
	int64_t		iv;
	int64_t		mul;

	if (csv_parse_int(s, &iv))
	{
		if (unit == TDB_TIME_AUTO)
		{
			/* |iv| without overflow at INT64_MIN */
			uint64_t	a = iv < 0 ? (uint64_t) 0 - (uint64_t) iv : (uint64_t) iv;

			unit = a < UINT64_C(100000000000) ? TDB_TIME_S :
				a < UINT64_C(100000000000000) ? TDB_TIME_MS : TDB_TIME_US;
		}
		mul = unit == TDB_TIME_S ? 1000000 : unit == TDB_TIME_MS ? 1000 : 1;
		if (iv > INT64_MAX / mul || iv < INT64_MIN / mul)
			return false;
		*us = iv * mul;
		if (used)
			*used = unit;
		return true;
	}
	if (!iso_time(s, us))
		return false;
	if (used)
		*used = TDB_TIME_AUTO;
	return true;
}

bool
tdb_time_column_parse(TdbTimeColumn *c, const char *s, long line, int64_t *us, char *err, size_t errlen)
{
	TdbTimeUnit used;

	if (!tdb_time_parse(s, c->unit, us, &used))
	{
		if (c->unit == TDB_TIME_AUTO)
			snprintf(err, errlen, "\"%s\" is not a time (expected ISO 8601, in UTC or with an offset, or an integer of "
					 "seconds, milliseconds or microseconds since 1970)", s);
		else
			snprintf(err, errlen, "\"%s\" is not a time (expected ISO 8601, in UTC or with an offset, or an integer of "
					 "%s since 1970 as --time-unit says)", s, tdb_time_unit_name(c->unit));
		return false;
	}
	if (c->unit != TDB_TIME_AUTO || used == TDB_TIME_AUTO)
		return true;
	if (c->found == TDB_TIME_AUTO)
	{
		c->found = used;
		c->found_line = line;
	}
	else if (used != c->found)
	{
		snprintf(err, errlen, "\"%s\" reads as %s by the automatic rule (|v| < 1e11 seconds, < 1e14 "
				 "milliseconds, else microseconds), but the column's first integer time, on line %ld, was in %s: "
				 "mixed units; say which with --time-unit",
				 s, tdb_time_unit_name(used), c->found_line, tdb_time_unit_name(c->found));
		return false;
	}
	return true;
}
