/*
 * test_stream_codecs.c
 *	  Stream files' codecs (what they keep, "value at t"), the last
 *	  timestamp a stream remembers, and the schema language's errors.
 */
#include "unit.h"
#include "stream_fixture.h"

#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stream/stream.h"

UNIT_TEST(test_stream_codecs)
{
	static const char *rdl =
		"SET blockSize = 1024; SET fileSize = 256KB;\n"
		"CREATE STREAM s WITH ID 7 { a int32 WITH CODEC step, b float64 WITH CODEC deadband PARAMS (0.5),"
		" c int16 NULL WITH CODEC step };\n";
	TdbStreamSchema schema;
	char		err[256];
	uint8_t    *mem = calloc(1, 256 * 1024);
	TdbStreamIO io;
	TdbStreamDB *db;
	int64_t		ts[3000];
	TdbStreamValue vals[3000][3];
	TdbStreamValue last[3] = {{0}};
	int			stored = 0;
	TdbStreamStats st;

	CHECK_EQ_U64(tdb_stream_parse_rdl(rdl, &schema, err, sizeof(err)), TDB_STREAM_OK);
	tdb_stream_io_memory(mem, 256 * 1024, &io);
	CHECK_EQ_U64(tdb_stream_create(&io, &schema, err, sizeof(err)), TDB_STREAM_OK);
	CHECK_EQ_U64(tdb_stream_open(&io, &db, err, sizeof(err)), TDB_STREAM_OK);
	for (int i = 0; i < 3000; i++)
	{
		bool		keep;

		ts[i] = 100 + i * 10;
		vals[i][0].isnull = false;
		vals[i][0].v.i = (int64_t) (i / 50);	/* steps every 50 */
		vals[i][1].isnull = false;
		vals[i][1].v.f = 20 + 3 * __builtin_sin(i / 40.0);
		vals[i][2].isnull = (i / 100) % 2 == 1;
		vals[i][2].v.i = vals[i][2].isnull ? 0 : 5;
		if (i == 2000)
		{
			CHECK_EQ_U64(tdb_stream_discontinuity(db, 0, ts[i] - 5), TDB_STREAM_OK);
			stored++;
			last[0].v.i = -1;	/* the record after a discontinuity is always kept */
		}
		/* the model of what the codecs keep */
		keep = i == 0 || vals[i][0].v.i != last[0].v.i || vals[i][2].isnull != last[2].isnull ||
			__builtin_fabs(vals[i][1].v.f - last[1].v.f) > 0.5;
		if (keep)
		{
			memcpy(last, vals[i], sizeof(last));
			stored++;
		}
		CHECK_EQ_U64(tdb_stream_insert(db, 0, ts[i], vals[i]), TDB_STREAM_OK);
	}
	CHECK_EQ_U64(tdb_stream_flush(db), TDB_STREAM_OK);
	CHECK_EQ_U64(tdb_stream_stats(db, 0, &st), TDB_STREAM_OK);
	CHECK_EQ_U64(st.records, (uint64_t) stored);
	CHECK(st.records < 600);	/* the codecs kept a fraction */
	/* reconstruction at every insert's time: step fields exact, deadband within its band */
	for (int i = 0; i < 3000; i += 7)
	{
		TdbStreamRecord r;

		CHECK_EQ_U64(tdb_stream_at(db, 0, ts[i], &r), TDB_STREAM_OK);
		CHECK_EQ_U64(r.vals[0].v.i, vals[i][0].v.i);
		CHECK(r.vals[2].isnull == vals[i][2].isnull);
		CHECK_NEAR(r.vals[1].v.f, vals[i][1].v.f, 0.5);
	}
	/* the discontinuity: just before the next record nothing holds */
	{
		TdbStreamRecord r;

		CHECK_EQ_U64(tdb_stream_at(db, 0, ts[2000] - 2, &r), TDB_STREAM_OK);
		CHECK(r.discontinuity);
	}
	tdb_stream_close(db);
	free(mem);
}

/*
 * tdb_stream_last_ts: what the next insert must be after (the stream FDW
 * checks buffered rows against it).  A row the codecs drop still counts,
 * unflushed or flushed, and a reopened file remembers it.
 */
UNIT_TEST(test_stream_last_ts)
{
	static const char *rdl =
		"SET blockSize = 1024; SET fileSize = 64KB;\n"
		"CREATE STREAM a WITH ID 1 { x int32 WITH CODEC step };\n"
		"CREATE STREAM b WITH ID 2 { y float64 };\n";
	TdbStreamSchema schema;
	char		err[256];
	uint8_t    *mem = calloc(1, 64 * 1024);
	TdbStreamIO io;
	TdbStreamDB *db;
	TdbStreamValue v = {0};
	int64_t		t = 0;

	CHECK_EQ_U64(tdb_stream_parse_rdl(rdl, &schema, err, sizeof(err)), TDB_STREAM_OK);
	tdb_stream_io_memory(mem, 64 * 1024, &io);
	CHECK_EQ_U64(tdb_stream_create(&io, &schema, err, sizeof(err)), TDB_STREAM_OK);
	CHECK_EQ_U64(tdb_stream_open(&io, &db, err, sizeof(err)), TDB_STREAM_OK);
	CHECK_EQ_U64(tdb_stream_last_ts(db, 0, &t), TDB_STREAM_OK);
	CHECK(t == INT64_MIN);
	CHECK_EQ_U64(tdb_stream_insert(db, 0, 100, &v), TDB_STREAM_OK);
	CHECK_EQ_U64(tdb_stream_insert(db, 0, 200, &v), TDB_STREAM_OK);	/* same value: dropped by the codec */
	CHECK_EQ_U64(tdb_stream_last_ts(db, 0, &t), TDB_STREAM_OK);
	CHECK_EQ_U64(t, 200);
	CHECK_EQ_U64(tdb_stream_last_ts(db, 1, &t), TDB_STREAM_OK);
	CHECK(t == INT64_MIN);
	CHECK_EQ_U64(tdb_stream_last_ts(db, 2, &t), (uint64_t) TDB_STREAM_EINVAL);
	CHECK_EQ_U64(tdb_stream_flush(db), TDB_STREAM_OK);
	tdb_stream_close(db);
	CHECK_EQ_U64(tdb_stream_open(&io, &db, err, sizeof(err)), TDB_STREAM_OK);
	CHECK_EQ_U64(tdb_stream_last_ts(db, 0, &t), TDB_STREAM_OK);
	CHECK_EQ_U64(t, 200);
	tdb_stream_close(db);
	free(mem);
}

UNIT_TEST(test_stream_rdl_errors)
{
	TdbStreamSchema s;
	char		err[256];
	static const struct
	{
		const char *text;
		const char *msg;
	}			bad[] = {
		{"CREATE STREAM a WITH ID 1 { x int9 };", "line 1, column 31: expected a type"},
		{"SET blockSize = 3000;\nCREATE STREAM a WITH ID 1 { x i8 };", "line 1, column 17: blockSize 3000: expected a power of two"},
		{"\n\nCREATE STREAM a WITH ID 1 { x i8 WITH CODEC deadband };", "line 3, column 54: expected PARAMS, found \"}\""},
		{"CREATE STREAM a WITH ID 1 { x i8 } ;\nCREATE STREAM a WITH ID 2 { y i8 };", "line 2, column 27: stream a (id 2) is defined twice"},
		{"CREATE STREAM a WITH ID 1 { x i8, x int16 };", "field x of stream a is defined twice"},
		{"SET fileSize = 10XB; CREATE STREAM a WITH ID 1 { x i8 };", "sizes take KB, MB or GB"},
		/* names that read as bits or as bytes: refused, with both readings */
		{"CREATE STREAM a WITH ID 1 { x int8 };", "line 1, column 31: type int8 of field x is ambiguous: write i8 for 8 bits (what int8 meant here before), or bigint / i64 for PostgreSQL's int8 (64 bits)"},
		{"CREATE STREAM a WITH ID 1 { x INT8 NULL };", "type INT8 of field x is ambiguous"},
		{"CREATE STREAM a WITH ID 1 { x float };", "type float of field x is ambiguous: write f32 or real (32 bits, what float meant here before), or f64 or double precision (SQL's float)"},
		{"CREATE STREAM a WITH ID 1 { x int4 };", "write i32 or integer"},
		{"CREATE STREAM a WITH ID 1 { x float8 };", "write f64 or double precision"},
		{"CREATE STREAM a WITH ID 1 { x u8 };", "expected a type (i8, i16, i32, i64, f32, f64, bool, or smallint, integer, bigint, real, double precision, boolean) for field x, found \"u8\""},
		{"-- nothing\n", "line 2: no CREATE STREAM"},
		{"SET colour = 1;", "unknown setting \"colour\""},
		{"CREATE TABLE t;", "expected STREAM, found \"TABLE\""},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
	{
		err[0] = '\0';
		CHECK_EQ_U64(tdb_stream_parse_rdl(bad[i].text, &s, err, sizeof(err)), (uint64_t) TDB_STREAM_EINVAL);
		if (strstr(err, bad[i].msg) == NULL)
			unit_fail(__FILE__, __LINE__, "schema %zu: got \"%s\", expected \"%s\"", i, err, bad[i].msg);
	}
	/* the limit of streams, said with the number */
	{
		char		text[65 * 48];
		size_t		n = 0;

		for (int i = 1; i <= 65; i++)
			n += (size_t) snprintf(text + n, sizeof(text) - n, "CREATE STREAM s%d WITH ID %d { v i8 };\n", i, i);
		CHECK_EQ_U64(tdb_stream_parse_rdl(text, &s, err, sizeof(err)), (uint64_t) TDB_STREAM_EINVAL);
		if (strstr(err, "line 65, column 15: a stream file holds at most 64 streams; this is stream 65: put the others in another file") == NULL)
			unit_fail(__FILE__, __LINE__, "65 streams: got \"%s\"", err);
		text[n - strlen("CREATE STREAM s65 WITH ID 65 { v i8 };\n")] = '\0';
		CHECK_EQ_U64(tdb_stream_parse_rdl(text, &s, err, sizeof(err)), TDB_STREAM_OK);
		CHECK(s.nstreams == 64);
	}
	/* every accepted name, and the code it is stored as */
	{
		static const struct
		{
			const char *name;
			TdbStreamType type;
		}			names[] = {
			{"i8", TDB_ST_INT8}, {"i16", TDB_ST_INT16}, {"int16", TDB_ST_INT16}, {"smallint", TDB_ST_INT16},
			{"i32", TDB_ST_INT32}, {"int32", TDB_ST_INT32}, {"integer", TDB_ST_INT32}, {"int", TDB_ST_INT32},
			{"i64", TDB_ST_INT64}, {"int64", TDB_ST_INT64}, {"bigint", TDB_ST_INT64}, {"BIGINT", TDB_ST_INT64},
			{"f32", TDB_ST_FLOAT32}, {"float32", TDB_ST_FLOAT32}, {"real", TDB_ST_FLOAT32},
			{"f64", TDB_ST_FLOAT64}, {"float64", TDB_ST_FLOAT64}, {"double", TDB_ST_FLOAT64},
			{"double precision", TDB_ST_FLOAT64}, {"bool", TDB_ST_BOOL}, {"boolean", TDB_ST_BOOL},
		};

		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		{
			char		text[128];

			snprintf(text, sizeof(text), "CREATE STREAM a WITH ID 1 { x %s NULL, y i8 };", names[i].name);
			if (tdb_stream_parse_rdl(text, &s, err, sizeof(err)) != TDB_STREAM_OK ||
				s.streams[0].fields[0].type != names[i].type || !s.streams[0].fields[0].nullable ||
				s.streams[0].nfields != 2)
				unit_fail(__FILE__, __LINE__, "type %s: %s", names[i].name, err);
		}
		/* the codes files store are those old schemas' int8 ... bool gave */
		CHECK(TDB_ST_INT8 == 1 && TDB_ST_INT16 == 2 && TDB_ST_INT32 == 3 && TDB_ST_INT64 == 4 &&
			  TDB_ST_FLOAT32 == 5 && TDB_ST_FLOAT64 == 6 && TDB_ST_BOOL == 7);
		/* a file with a one-byte field (an old schema's int8) reads its full range back */
		{
			static uint8_t region[64 * 1024];
			TdbStreamIO io;
			TdbStreamDB *db;
			TdbStreamValue v[1] = {{0}};
			TdbStreamRecord r;

			memset(region, 0, sizeof(region));
			tdb_stream_io_memory(region, sizeof(region), &io);
			CHECK_EQ_U64(tdb_stream_parse_rdl("SET blockSize = 1024; SET fileSize = 64KB; CREATE STREAM a WITH ID 1 { x i8 };",
											  &s, err, sizeof(err)), TDB_STREAM_OK);
			CHECK_EQ_U64(tdb_stream_create(&io, &s, err, sizeof(err)), TDB_STREAM_OK);
			CHECK_EQ_U64(tdb_stream_open(&io, &db, err, sizeof(err)), TDB_STREAM_OK);
			v[0].v.i = -128;
			CHECK_EQ_U64(tdb_stream_insert(db, 0, 1, v), TDB_STREAM_OK);
			v[0].v.i = 127;
			CHECK_EQ_U64(tdb_stream_insert(db, 0, 2, v), TDB_STREAM_OK);
			CHECK_EQ_U64(tdb_stream_flush(db), TDB_STREAM_OK);
			tdb_stream_close(db);
			CHECK_EQ_U64(tdb_stream_open(&io, &db, err, sizeof(err)), TDB_STREAM_OK);
			CHECK(tdb_stream_schema(db)->streams[0].fields[0].type == TDB_ST_INT8);
			CHECK(tdb_stream_at(db, 0, 1, &r) == TDB_STREAM_OK && r.vals[0].v.i == -128);
			CHECK(tdb_stream_at(db, 0, 2, &r) == TDB_STREAM_OK && r.vals[0].v.i == 127);
			tdb_stream_close(db);
		}
		CHECK(strcmp(tdb_stream_type_name(TDB_ST_INT8), "i8") == 0 && strcmp(tdb_stream_type_name(TDB_ST_FLOAT64), "f64") == 0 &&
			  strcmp(tdb_stream_type_name(0), "?") == 0 && strcmp(tdb_stream_type_name(8), "?") == 0);
	}
	CHECK_EQ_U64(tdb_stream_parse_rdl("SET blockSize = 64KB; SET fileSize = 1GB;\n"
									  "create stream vehicle with id 3 { rpm int16 not null with codec deadband params (25),"
									  " ok bool null with codec step, v float64 };", &s, err, sizeof(err)), TDB_STREAM_OK);
	CHECK(s.block_size == 65536 && s.file_size == (1ull << 30) && s.nstreams == 1 && s.streams[0].id == 3);
	CHECK(s.streams[0].nfields == 3 && s.streams[0].fields[0].codec == TDB_CODEC_DEADBAND &&
		  s.streams[0].fields[0].threshold == 25 && s.streams[0].fields[1].nullable &&
		  s.streams[0].fields[2].type == TDB_ST_FLOAT64);
}
