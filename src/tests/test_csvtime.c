/*
 * test_csvtime.c
 *	  The CLIs' shared time rule (tools/csvtime.c): units asked for and
 *	  detected, the thresholds' both sides, ISO 8601 forms and non-dates,
 *	  overflow, a column that mixes units, the time window (each wrong unit
 *	  refused naming the one that fits) and nanoseconds; and the CLIs' float
 *	  and integer fields (tools/csv_fields.c): NaN and the infinities are
 *	  floats, an integer past 64 bits keeps a column int (and is refused).
 */
#include <math.h>
#include <string.h>

#include "csv_fields.h"
#include "csvtime.h"
#include "unit.h"

static int64_t
t(const char *s, TdbTimeUnit unit, TdbTimeUnit want_used)
{
	int64_t		us = -1;
	TdbTimeUnit used = (TdbTimeUnit) 99;

	if (!tdb_time_parse(s, unit, &us, &used))
	{
		unit_fail(__FILE__, __LINE__, "\"%s\" refused", s);
		return -1;
	}
	if (used != want_used)
		unit_fail(__FILE__, __LINE__, "\"%s\" read as %s, expected %s", s, tdb_time_unit_name(used),
				  tdb_time_unit_name(want_used));
	return us;
}

/* the column's error for s, or "" when s is accepted */
static const char *
column_err(TdbTimeColumn *c, const char *s)
{
	static char err[600];
	int64_t		us;

	if (tdb_time_column_parse(c, s, 2, &us, err, sizeof(err)))
		err[0] = '\0';
	return err;
}

#define CHECK_STR(got, want) \
	do { \
		const char *g_ = (got); \
		if (strcmp(g_, (want)) != 0) \
			unit_fail(__FILE__, __LINE__, "got \"%s\", expected \"%s\"", g_, (want)); \
	} while (0)

/* the window: each wrong unit lands outside the default one, and the error names the unit that fits */
static void
csvtime_window(void)
{
	TdbTimeWindow w,
				any;
	TdbTimeColumn c;
	char		err[300],
				f[100];
	int64_t		us;

	CHECK(tdb_time_window_parse(TDB_TIME_WINDOW_DEFAULT, &w, err, sizeof(err)));
	CHECK_EQ_U64(w.from, INT64_C(31536000000000));
	CHECK_EQ_U64(w.to, INT64_C(7258118400000000));
	/* narrower than a factor of 1000: no integer is inside in two units */
	CHECK(w.to / w.from < 1000);
	tdb_time_window_format(&w, f, sizeof(f));
	CHECK_STR(f, "1971-01-01..2200-01-01");
	CHECK(tdb_time_window_parse("..", &any, err, sizeof(err)) && any.from == INT64_MIN && any.to == INT64_MAX);
	tdb_time_window_format(&any, f, sizeof(f));
	CHECK_STR(f, "..");
	CHECK(tdb_time_window_parse("2020-06-30T12:00:00.5+02:00..", &w, err, sizeof(err)));
	tdb_time_window_format(&w, f, sizeof(f));
	CHECK_STR(f, "2020-06-30T10:00:00.500000Z..");
	CHECK(!tdb_time_window_parse("2020", &w, err, sizeof(err)) && strstr(err, "expected FROM..TO") != NULL);
	CHECK(!tdb_time_window_parse("1593475200..", &w, err, sizeof(err)) &&
		  strstr(err, "\"1593475200\" is not an ISO 8601 time") != NULL);
	CHECK(!tdb_time_window_parse("2020-01-01..x", &w, err, sizeof(err)) && strstr(err, "\"x\" is not") != NULL);
	CHECK(!tdb_time_window_parse("2020-01-01..2020-01-01", &w, err, sizeof(err)) &&
		  strstr(err, "FROM (2020-01-01) is not before TO (2020-01-01)") != NULL);
	tdb_time_window_parse(TDB_TIME_WINDOW_DEFAULT, &w, err, sizeof(err));

	c = (TdbTimeColumn) {.window = &w};
	CHECK_STR(column_err(&c, "1633608000000000000"),
			  "\"1633608000000000000\" read as microseconds (by the automatic rule, |v| >= 1e14) is the year 53736, "
			  "outside the time window 1971-01-01..2200-01-01; as nanoseconds it is 2021-10-07T12:00:00Z: pass --time-unit ns");
	CHECK_STR(column_err(&c, "40000000000"),
			  "\"40000000000\" read as seconds (by the automatic rule, |v| < 1e11) is 3237-07-19T23:06:40Z, "
			  "outside the time window 1971-01-01..2200-01-01; as milliseconds it is 1971-04-08T23:06:40Z: pass --time-unit ms");
	CHECK_STR(column_err(&c, "-1633608000"),
			  "\"-1633608000\" read as seconds (by the automatic rule, |v| < 1e11) is 1918-03-27T12:00:00Z, outside the "
			  "time window 1971-01-01..2200-01-01; no unit (s, ms, us, ns) puts it in the window: if the time is right, "
			  "widen the window with --time-window FROM..TO");
	CHECK_STR(column_err(&c, "1970-12-31T23:59:59.999999Z"),
			  "\"1970-12-31T23:59:59.999999Z\" is outside the time window 1971-01-01..2200-01-01: if the time is right, "
			  "widen the window with --time-window FROM..TO");
	CHECK_STR(column_err(&c, "2200-01-01"), "\"2200-01-01\" is outside the time window 1971-01-01..2200-01-01: if the "
			  "time is right, widen the window with --time-window FROM..TO");
	CHECK(c.found == TDB_TIME_AUTO);	/* refused times set no unit */
	CHECK_STR(column_err(&c, "1971-01-01"), "");
	CHECK_STR(column_err(&c, "2199-12-31T23:59:59.999999Z"), "");
	CHECK_STR(column_err(&c, "1633608000"), "");
	CHECK(c.found == TDB_TIME_S);

	c = (TdbTimeColumn) {.unit = TDB_TIME_S, .window = &w};
	CHECK_STR(column_err(&c, "1633608000000"),
			  "\"1633608000000\" read as seconds (--time-unit s) is the year 53736, outside the time window "
			  "1971-01-01..2200-01-01; as milliseconds it is 2021-10-07T12:00:00Z: pass --time-unit ms");
	CHECK_STR(column_err(&c, "1633608000000000000"),
			  "\"1633608000000000000\" read as seconds (--time-unit s) is past the range of a time (64-bit microseconds), "
			  "outside the time window 1971-01-01..2200-01-01; as nanoseconds it is 2021-10-07T12:00:00Z: pass --time-unit ns");
	c = (TdbTimeColumn) {.unit = TDB_TIME_MS, .window = &w};
	CHECK_STR(column_err(&c, "1633608000"),
			  "\"1633608000\" read as milliseconds (--time-unit ms) is 1970-01-19T21:46:48Z, outside the time window "
			  "1971-01-01..2200-01-01; as seconds it is 2021-10-07T12:00:00Z: pass --time-unit s");
	c = (TdbTimeColumn) {.unit = TDB_TIME_US, .window = &w};
	CHECK_STR(column_err(&c, "1633608000"),
			  "\"1633608000\" read as microseconds (--time-unit us) is 1970-01-01T00:27:13.608000Z, outside the time "
			  "window 1971-01-01..2200-01-01; as seconds it is 2021-10-07T12:00:00Z: pass --time-unit s");
	c = (TdbTimeColumn) {.unit = TDB_TIME_NS, .window = &w};
	CHECK(tdb_time_column_parse(&c, "1633608000123456789", 2, &us, err, sizeof(err)) && us == INT64_C(1633608000123456));
	CHECK_STR(column_err(&c, "1633608000000000"),
			  "\"1633608000000000\" read as nanoseconds (--time-unit ns) is 1970-01-19T21:46:48Z, outside the time "
			  "window 1971-01-01..2200-01-01; as microseconds it is 2021-10-07T12:00:00Z: pass --time-unit us");
	/* an open window: only an overflow is refused, and every unit that reads it is listed */
	c = (TdbTimeColumn) {.unit = TDB_TIME_S, .window = &any};
	CHECK_STR(column_err(&c, "5"), "");
	CHECK_STR(column_err(&c, "9223372036855"),
			  "\"9223372036855\" read as seconds (--time-unit s) is past the range of a time (64-bit microseconds); "
			  "as milliseconds it is 2262-04-11T23:47:16.855000Z, as microseconds it is 1970-04-17T18:02:52.036855Z, "
			  "as nanoseconds it is 1970-01-01T02:33:43.372036Z: pass --time-unit with the right one");
	/* the mixed-unit rule still holds inside the window */
	c = (TdbTimeColumn) {.window = &w};
	CHECK_STR(column_err(&c, "1633608000"), "");
	CHECK(strstr(column_err(&c, "1633608001000"), "reads as milliseconds by the automatic rule") != NULL);

	/* nanoseconds round down to the microsecond, before 1970 too */
	CHECK_EQ_U64(t("1999", TDB_TIME_NS, TDB_TIME_NS), 1);
	CHECK_EQ_U64(t("-1", TDB_TIME_NS, TDB_TIME_NS), (uint64_t) -1);
	CHECK_EQ_U64(t("-1000", TDB_TIME_NS, TDB_TIME_NS), (uint64_t) -1);
	CHECK_EQ_U64(t("-9223372036854775808", TDB_TIME_NS, TDB_TIME_NS), (uint64_t) INT64_C(-9223372036854776));
	/* auto never reads nanoseconds */
	CHECK_EQ_U64(t("1633608000000000000", TDB_TIME_AUTO, TDB_TIME_US), INT64_C(1633608000000000000));
	tdb_time_format(INT64_MIN, f, sizeof(f));
	CHECK_STR(f, "the year -290308");
	tdb_time_format(-1, f, sizeof(f));
	CHECK_STR(f, "1969-12-31T23:59:59.999999Z");
}

/* floats: NaN and the infinities as PostgreSQL spells them; integers: past 64 bits stays int and is refused */
static void
csv_numbers(void)
{
	static const char *nan_[] = {"NaN", "nan", "NAN"};
	static const char *pinf[] = {"Infinity", "+Infinity", "infinity", "INF", "inf", "+inf"};
	static const char *ninf[] = {"-Infinity", "-INFINITY", "-inf", "-Inf"};
	static const char *notf[] = {"", "-nan", "+NaN", "nan(1)", "infinit", "Infinityx", "0x10", " 1", "1 ", ".", "1e", "e5"};
	double		v;
	int64_t		i;
	CsvInfer	in;

	for (size_t k = 0; k < sizeof(nan_) / sizeof(nan_[0]); k++)
		CHECK(csv_parse_float(nan_[k], &v) && isnan(v) && csv_float_literal(nan_[k]));
	for (size_t k = 0; k < sizeof(pinf) / sizeof(pinf[0]); k++)
		CHECK(csv_parse_float(pinf[k], &v) && isinf(v) && v > 0);
	for (size_t k = 0; k < sizeof(ninf) / sizeof(ninf[0]); k++)
		CHECK(csv_parse_float(ninf[k], &v) && isinf(v) && v < 0);
	for (size_t k = 0; k < sizeof(notf) / sizeof(notf[0]); k++)
		if (csv_parse_float(notf[k], &v) || csv_float_literal(notf[k]))
			unit_fail(__FILE__, __LINE__, "\"%s\" taken for a float", notf[k]);
	CHECK(!csv_parse_float("1e999", &v) && csv_float_literal("1e999"));
	CHECK(csv_parse_float("-1.5e-3", &v) && v == -1.5e-3);
	CHECK(!csv_parse_int("99999999999999999999", &i) && csv_int_literal("99999999999999999999"));
	CHECK(!csv_parse_int("9223372036854775808", &i) && csv_parse_int("-9223372036854775808", &i) && i == INT64_MIN);
	CHECK(!csv_int_literal("1.0") && !csv_int_literal("") && !csv_int_literal("-") && csv_int_literal("+7"));

	/* inference: one NaN keeps a float column float */
	csv_infer_init(&in);
	csv_infer_add(&in, "1.5");
	csv_infer_add(&in, "NaN");
	csv_infer_add(&in, "-Infinity");
	CHECK(csv_infer_result(&in) == CSV_FLOAT);
	csv_infer_init(&in);
	csv_infer_add(&in, "nan");
	CHECK(csv_infer_result(&in) == CSV_FLOAT);
	/* an integer past 64 bits keeps an integer column int (its parse then says why), not float */
	csv_infer_init(&in);
	csv_infer_add(&in, "1");
	csv_infer_add(&in, "99999999999999999999");
	CHECK(csv_infer_result(&in) == CSV_INT);
	/* a decimal past a double's range keeps a number column float, not text */
	csv_infer_init(&in);
	csv_infer_add(&in, "1.5");
	csv_infer_add(&in, "1e999");
	CHECK(csv_infer_result(&in) == CSV_FLOAT);
	/* unchanged: codes with a leading zero and words stay strings */
	csv_infer_init(&in);
	csv_infer_add(&in, "12");
	csv_infer_add(&in, "0412");
	CHECK(csv_infer_result(&in) == CSV_STRING);
	csv_infer_init(&in);
	csv_infer_add(&in, "1.5");
	csv_infer_add(&in, "fast");
	CHECK(csv_infer_result(&in) == CSV_STRING);
}

UNIT_TEST(test_csvtime_rule)
{
	static const char *bad[] = {"", "x", "12x", " 12", "1.5", "2020-02-30", "2021-02-29", "2020-13-01",
		"2020-06-30T24:00:00", "2020-06-30 00:00", "2020-06-30T00:00:00.", "2020-06-30T00:00:00+1:00", "2020-06-30+01:00",
		"2020-6-30", "9223372036854775807000", "ts", "--1"};
	TdbTimeUnit u;
	int64_t		us;
	TdbTimeColumn c = {0};
	char		err[300];

	CHECK(tdb_time_unit_parse("s", &u) && u == TDB_TIME_S);
	CHECK(tdb_time_unit_parse("ms", &u) && u == TDB_TIME_MS);
	CHECK(tdb_time_unit_parse("us", &u) && u == TDB_TIME_US);
	CHECK(tdb_time_unit_parse("auto", &u) && u == TDB_TIME_AUTO);
	CHECK(tdb_time_unit_parse("ns", &u) && u == TDB_TIME_NS && strcmp(tdb_time_unit_name(u), "nanoseconds") == 0);
	CHECK(!tdb_time_unit_parse("sec", &u) && !tdb_time_unit_parse("m", &u) && !tdb_time_unit_parse("", &u));

	/* auto: the same instant in each unit, and both sides of each threshold */
	CHECK_EQ_U64(t("1593475200", TDB_TIME_AUTO, TDB_TIME_S), 1593475200000000);
	CHECK_EQ_U64(t("1593475200000", TDB_TIME_AUTO, TDB_TIME_MS), 1593475200000000);
	CHECK_EQ_U64(t("1593475200000000", TDB_TIME_AUTO, TDB_TIME_US), 1593475200000000);
	CHECK_EQ_U64(t("99999999999", TDB_TIME_AUTO, TDB_TIME_S), 99999999999000000);
	CHECK_EQ_U64(t("100000000000", TDB_TIME_AUTO, TDB_TIME_MS), 100000000000000);
	CHECK_EQ_U64(t("99999999999999", TDB_TIME_AUTO, TDB_TIME_MS), 99999999999999000);
	CHECK_EQ_U64(t("100000000000000", TDB_TIME_AUTO, TDB_TIME_US), 100000000000000);
	CHECK_EQ_U64(t("-5", TDB_TIME_AUTO, TDB_TIME_S), (uint64_t) -5000000);
	CHECK_EQ_U64(t("0", TDB_TIME_AUTO, TDB_TIME_S), 0);
	CHECK_EQ_U64(t("-9223372036854775808", TDB_TIME_AUTO, TDB_TIME_US), (uint64_t) INT64_MIN);
	/* a unit asked for is used whatever the magnitude */
	CHECK_EQ_U64(t("5", TDB_TIME_US, TDB_TIME_US), 5);
	CHECK_EQ_U64(t("5", TDB_TIME_MS, TDB_TIME_MS), 5000);
	CHECK_EQ_U64(t("1593475200000", TDB_TIME_S, TDB_TIME_S), 1593475200000000000);
	CHECK(!tdb_time_parse("9223372036855", TDB_TIME_S, &us, NULL));	/* x 1e6 overflows */
	CHECK(!tdb_time_parse("-9223372036854776", TDB_TIME_MS, &us, NULL));

	/* ISO 8601 in UTC */
	CHECK_EQ_U64(t("2020-06-30", TDB_TIME_AUTO, TDB_TIME_AUTO), 1593475200000000);
	CHECK_EQ_U64(t("2020-06-30T00:00:05", TDB_TIME_AUTO, TDB_TIME_AUTO), 1593475205000000);
	CHECK_EQ_U64(t("2020-06-30 00:00:05.25Z", TDB_TIME_S, TDB_TIME_AUTO), 1593475205250000);
	CHECK_EQ_U64(t("2020-06-30T00:00:05.1234567+00:00", TDB_TIME_AUTO, TDB_TIME_AUTO), 1593475205123456);
	CHECK_EQ_U64(t("2020-02-29 23:59:59+00", TDB_TIME_AUTO, TDB_TIME_AUTO), 1583020799000000);
	CHECK_EQ_U64(t("1969-12-31T23:59:59Z", TDB_TIME_AUTO, TDB_TIME_AUTO), (uint64_t) -1000000);
	/* a time of day with an offset from UTC */
	CHECK_EQ_U64(t("2020-06-30T00:00:00+01:00", TDB_TIME_AUTO, TDB_TIME_AUTO), 1593471600000000);
	CHECK_EQ_U64(t("2020-06-30 02:00:00.5+0200", TDB_TIME_AUTO, TDB_TIME_AUTO), 1593475200500000);
	CHECK_EQ_U64(t("2020-06-29T19:30:00-04:30", TDB_TIME_AUTO, TDB_TIME_AUTO), 1593475200000000);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (tdb_time_parse(bad[i], TDB_TIME_AUTO, &us, NULL))
			unit_fail(__FILE__, __LINE__, "\"%s\" accepted as %lld", bad[i], (long long) us);

	/* a column keeps the unit its first integer time had */
	CHECK(tdb_time_column_parse(&c, "2020-06-30", 2, &us, err, sizeof(err)));
	CHECK(tdb_time_column_parse(&c, "1593475201", 3, &us, err, sizeof(err)) && us == 1593475201000000);
	CHECK(tdb_time_column_parse(&c, "1593475202", 4, &us, err, sizeof(err)));
	CHECK(!tdb_time_column_parse(&c, "1593475203000000", 5, &us, err, sizeof(err)));
	CHECK(strstr(err, "\"1593475203000000\" reads as microseconds by the automatic rule") != NULL &&
		  strstr(err, "on line 3, was in seconds") != NULL);
	CHECK(!tdb_time_column_parse(&c, "yesterday", 6, &us, err, sizeof(err)));
	CHECK(strstr(err, "\"yesterday\" is not a time") != NULL);
	/* with a unit asked for, nothing is detected, so nothing can mix */
	c = (TdbTimeColumn) {.unit = TDB_TIME_US};
	CHECK(tdb_time_column_parse(&c, "5", 2, &us, err, sizeof(err)) && us == 5);
	CHECK(tdb_time_column_parse(&c, "1593475203000000", 3, &us, err, sizeof(err)));
	csvtime_window();
	csv_numbers();
}
