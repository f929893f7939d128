/*
 * fuzz_stream_open.c
 *	  libFuzzer target: any bytes as a stream file image.  Opening must
 *	  succeed or fail with a code, and an opened file must read, verify and
 *	  take an insert and a flush without a crash (AddressSanitizer and UBSan
 *	  watch).  The image is laid over a valid small file so the fuzzer starts
 *	  from the structures that matter (superblocks, schema, index).
 *
 *	  make fuzz-stream FUZZ_SECONDS=60
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stream/stream.h"

#define IMAGE (64 * 1024)

static uint8_t base[IMAGE];
static int	have_base;

static int
visit(const TdbStreamRecord *r, void *arg)
{
	(void) r;
	(*(int *) arg)++;
	return 0;
}

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t img[IMAGE];
	TdbStreamIO io;
	TdbStreamDB *db;
	char		err[256];

	if (!have_base)
	{
		TdbStreamSchema s;

		tdb_stream_parse_rdl("SET blockSize = 1024; SET fileSize = 64KB;"
							 "CREATE STREAM a WITH ID 1 { x int32, y float64 NULL WITH CODEC step };"
							 "CREATE STREAM b WITH ID 2 { z int16 WITH CODEC deadband PARAMS (2) };",
							 &s, err, sizeof(err));
		tdb_stream_io_memory(base, IMAGE, &io);
		tdb_stream_create(&io, &s, err, sizeof(err));
		if (tdb_stream_open(&io, &db, err, sizeof(err)) == TDB_STREAM_OK)
		{
			for (int i = 0; i < 500; i++)
			{
				TdbStreamValue v[2] = {{.v.i = i}, {.v.f = i / 3.0}};

				tdb_stream_insert(db, i % 2, 1000 + i, v);
				if (i % 37 == 0)
					tdb_stream_flush(db);
			}
			tdb_stream_flush(db);
			tdb_stream_close(db);
		}
		have_base = 1;
	}
	memcpy(img, base, IMAGE);
	/* the input overwrites the start of the file: superblocks, schema, index */
	memcpy(img, data, size < IMAGE ? size : IMAGE);
	tdb_stream_io_memory(img, IMAGE, &io);
	if (tdb_stream_open(&io, &db, err, sizeof(err)) == TDB_STREAM_OK)
	{
		int			n = 0;
		TdbStreamRecord r;
		TdbStreamValue v[2] = {{.v.i = 1}, {.v.f = 2}};

		(void) tdb_stream_verify(db);
		for (uint32_t s = 0; s < tdb_stream_schema(db)->nstreams; s++)
		{
			(void) tdb_stream_range(db, (int) s, INT64_MIN + 1, INT64_MAX, visit, &n);
			(void) tdb_stream_at(db, (int) s, 1200, &r);
			(void) tdb_stream_insert(db, (int) s, INT64_MAX - 1, v);
		}
		(void) tdb_stream_flush(db);
		tdb_stream_close(db);
	}
	return 0;
}
