/*
 * test_csvtime.c
 *	  The CLIs' shared time rule (tools/csvtime.c): units asked for and
 *	  detected, the thresholds' both sides, ISO 8601 forms and non-dates,
 *	  overflow, and a column that mixes units.
 */
#include <string.h>

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
}
