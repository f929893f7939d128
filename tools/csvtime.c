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
	}			units[] = {{"auto", TDB_TIME_AUTO}, {"s", TDB_TIME_S}, {"ms", TDB_TIME_MS}, {"us", TDB_TIME_US},
	{"ns", TDB_TIME_NS}};

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
		unit == TDB_TIME_US ? "microseconds" : unit == TDB_TIME_NS ? "nanoseconds" : "auto";
}

const char *
tdb_time_unit_option(TdbTimeUnit unit)
{
	return unit == TDB_TIME_S ? "s" : unit == TDB_TIME_MS ? "ms" : unit == TDB_TIME_US ? "us" :
		unit == TDB_TIME_NS ? "ns" : "auto";
}

/* The automatic rule: |v| < 1e11 seconds, < 1e14 milliseconds, else microseconds. */
static TdbTimeUnit
auto_unit(int64_t iv)
{
	/* |iv| without overflow at INT64_MIN */
	uint64_t	a = iv < 0 ? (uint64_t) 0 - (uint64_t) iv : (uint64_t) iv;

	return a < UINT64_C(100000000000) ? TDB_TIME_S : a < UINT64_C(100000000000000) ? TDB_TIME_MS : TDB_TIME_US;
}

/* iv in unit as microseconds; false if they overflow 64 bits. */
static bool
to_us(int64_t iv, TdbTimeUnit unit, int64_t *us)
{
	int64_t		mul = unit == TDB_TIME_S ? 1000000 : unit == TDB_TIME_MS ? 1000 : 1;

	if (unit == TDB_TIME_NS)
	{
		/* kept to the microsecond, rounding down: -1 ns is the microsecond before 1970 */
		*us = iv / 1000 - (iv % 1000 < 0 ? 1 : 0);
		return true;
	}
	if (iv > INT64_MAX / mul || iv < INT64_MIN / mul)
		return false;
	*us = iv * mul;
	return true;
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

	if (csv_parse_int(s, &iv))
	{
		if (unit == TDB_TIME_AUTO)
			unit = auto_unit(iv);
		if (!to_us(iv, unit, us))
			return false;
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

void
tdb_time_format(int64_t us, char *out, size_t outlen)
{
	int64_t		frac = us % 1000000;
	time_t		sec;
	struct tm	tm;
	size_t		n;

	/* rounding down, without overflow at INT64_MIN */
	sec = (time_t) (us / 1000000 - (frac < 0 ? 1 : 0));
	if (frac < 0)
		frac += 1000000;
	if (gmtime_r(&sec, &tm) == NULL)
	{
		snprintf(out, outlen, "%" PRId64 " microseconds since 1970", us);
		return;
	}
	if (tm.tm_year + 1900 < 0 || tm.tm_year + 1900 > 9999)
	{
		snprintf(out, outlen, "the year %d", tm.tm_year + 1900);
		return;
	}
	n = strftime(out, outlen, "%Y-%m-%dT%H:%M:%S", &tm);
	if (frac)
		snprintf(out + n, outlen - n, ".%06" PRId64 "Z", frac);
	else
		snprintf(out + n, outlen - n, "Z");
}

/* A bound: a date alone at midnight (years 0 to 9999), else a time. */
static void
bound_format(int64_t us, char *out, size_t outlen)
{
	tdb_time_format(us, out, outlen);
	if (us % (INT64_C(86400) * 1000000) == 0 && strncmp(out, "the year", 8) != 0 && strlen(out) > 10)
		out[10] = '\0';
}

void
tdb_time_window_format(const TdbTimeWindow *w, char *out, size_t outlen)
{
	char		a[64] = "",
				b[64] = "";

	if (w->from != INT64_MIN)
		bound_format(w->from, a, sizeof(a));
	if (w->to != INT64_MAX)
		bound_format(w->to, b, sizeof(b));
	snprintf(out, outlen, "%s..%s", a, b);
}

bool
tdb_time_window_parse(const char *s, TdbTimeWindow *w, char *err, size_t errlen)
{
	const char *dots = strstr(s, "..");
	char		from[64];

	if (dots == NULL || (size_t) (dots - s) >= sizeof(from))
	{
		snprintf(err, errlen, "expected FROM..TO, each an ISO 8601 time (2020-06-30, 2020-06-30T12:00:00Z) "
				 "or empty for no bound");
		return false;
	}
	memcpy(from, s, (size_t) (dots - s));
	from[dots - s] = '\0';
	w->from = INT64_MIN;
	w->to = INT64_MAX;
	if ((from[0] && !iso_time(from, &w->from)) || (dots[2] && !iso_time(dots + 2, &w->to)))
	{
		snprintf(err, errlen, "\"%s\" is not an ISO 8601 time (2020-06-30, 2020-06-30T12:00:00Z; an integer's "
				 "unit would be ambiguous)", from[0] && !iso_time(from, &w->from) ? from : dots + 2);
		return false;
	}
	if (w->from >= w->to)
	{
		snprintf(err, errlen, "FROM (%s) is not before TO (%s)", from, dots + 2);
		return false;
	}
	return true;
}

static bool
in_window(const TdbTimeWindow *w, int64_t us)
{
	/* TO is exclusive; none (INT64_MAX) lets every time in, INT64_MAX itself too */
	return w == NULL || (us >= w->from && (w->to == INT64_MAX || us < w->to));
}

/*
 * Integer iv (text s) read in unit is outside the column's window, or
 * overflows (!ok): say what it is, and the units that would fit.
 */
static void
window_error(const TdbTimeColumn *c, const char *s, int64_t iv, TdbTimeUnit unit, bool ok, int64_t us,
			 char *err, size_t errlen)
{
	static const TdbTimeUnit all[] = {TDB_TIME_S, TDB_TIME_MS, TDB_TIME_US, TDB_TIME_NS};
	TdbTimeWindow any = {INT64_MIN, INT64_MAX};
	const TdbTimeWindow *w = c->window ? c->window : &any;
	char		what[64],
				win[200] = "",
				how[64];
	size_t		n;
	int			nfit = 0;
	TdbTimeUnit fit = TDB_TIME_AUTO;

	if (ok)
		tdb_time_format(us, what, sizeof(what));
	else
		snprintf(what, sizeof(what), "past the range of a time (64-bit microseconds)");
	if (c->window && (c->window->from != INT64_MIN || c->window->to != INT64_MAX))
	{
		char		f[140];

		tdb_time_window_format(c->window, f, sizeof(f));
		snprintf(win, sizeof(win), ", outside the time window %s", f);
	}
	if (c->unit != TDB_TIME_AUTO)
		snprintf(how, sizeof(how), "--time-unit %s", tdb_time_unit_option(unit));
	else
		snprintf(how, sizeof(how), "by the automatic rule, %s", unit == TDB_TIME_S ? "|v| < 1e11" :
				 unit == TDB_TIME_MS ? "1e11 <= |v| < 1e14" : "|v| >= 1e14");
	n = (size_t) snprintf(err, errlen, "\"%s\" read as %s (%s) is %s%s", s, tdb_time_unit_name(unit), how, what, win);
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
	{
		int64_t		u;
		char		t[64];

		if (all[i] == unit || !to_us(iv, all[i], &u) || !in_window(w, u))
			continue;
		tdb_time_format(u, t, sizeof(t));
		if (n < errlen)
			n += (size_t) snprintf(err + n, errlen - n, "%s as %s it is %s", nfit ? "," : ";",
								   tdb_time_unit_name(all[i]), t);
		nfit++;
		fit = all[i];
	}
	if (n >= errlen)
		return;
	if (nfit == 1)
		snprintf(err + n, errlen - n, ": pass --time-unit %s", tdb_time_unit_option(fit));
	else if (nfit > 1)
		snprintf(err + n, errlen - n, ": pass --time-unit with the right one");
	else
		snprintf(err + n, errlen - n, "; no unit (s, ms, us, ns) puts it in the window: if the time is right, "
				 "widen the window with --time-window FROM..TO");
}

bool
tdb_time_column_parse(TdbTimeColumn *c, const char *s, long line, int64_t *us, char *err, size_t errlen)
{
	TdbTimeUnit used;
	int64_t		iv;

	if (csv_parse_int(s, &iv))
	{
		int64_t		v = 0;
		bool		ok;

		used = c->unit == TDB_TIME_AUTO ? auto_unit(iv) : c->unit;
		ok = to_us(iv, used, &v);
		*us = v;
		if (!ok || !in_window(c->window, v))
		{
			window_error(c, s, iv, used, ok, v, err, errlen);
			return false;
		}
	}
	else if (!iso_time(s, us))
	{
		if (c->unit == TDB_TIME_AUTO)
			snprintf(err, errlen, "\"%s\" is not a time (expected ISO 8601, in UTC or with an offset, or an integer of "
					 "seconds, milliseconds or microseconds since 1970, or of nanoseconds with --time-unit ns)", s);
		else
			snprintf(err, errlen, "\"%s\" is not a time (expected ISO 8601, in UTC or with an offset, or an integer of "
					 "%s since 1970 as --time-unit says)", s, tdb_time_unit_name(c->unit));
		return false;
	}
	else
	{
		if (!in_window(c->window, *us))
		{
			char		f[140];

			tdb_time_window_format(c->window, f, sizeof(f));
			snprintf(err, errlen, "\"%s\" is outside the time window %s: if the time is right, widen the window "
					 "with --time-window FROM..TO", s, f);
			return false;
		}
		return true;
	}
	if (c->unit != TDB_TIME_AUTO)
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
