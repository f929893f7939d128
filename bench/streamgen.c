/*
 * streamgen.c
 *	  The workload of RealDB's benchmark, synthetic and reproducible: a
 *	  vehicle's log of 8 sensor streams (engine RPM, fuel rate, accelerator
 *	  pedal, battery volts, fuel economy, speed, gear, status flags) at their
 *	  own rates, N records in time order.
 *
 *	  streamgen csv N                 the records as CSV (stream,ts,value) on stdout
 *	  streamgen tsf FILE N FILESIZE   load them into a new stream file, flushing
 *	                                  every 100,000 records; prints
 *	                                  name,value,unit lines: wall and CPU time,
 *	                                  bytes written, file size, records kept
 *	  streamgen fill64 FILE MB        a file of 64 streams filled until it wraps
 *	                                  (bench/streams.sh's query and INSERT costs)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "stream/stream.h"

#define NSTREAMS 8
static const char *names[NSTREAMS] = {"rpm", "fuel_rate", "pedal", "battery_volts", "fuel_economy",
"speed", "gear", "status_flags"};
static const int period[NSTREAMS] = {1, 2, 1, 10, 10, 1, 20, 20};	/* in 10 ms ticks */

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double
cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* The next record: stream, time (microseconds), value (a bounded random walk). */
typedef struct Gen
{
	uint64_t	tick;
	int			next_stream;
	double		v[NSTREAMS];
	uint64_t	rng;
} Gen;

static double
urand(Gen *g)
{
	g->rng ^= g->rng << 13;
	g->rng ^= g->rng >> 7;
	g->rng ^= g->rng << 17;
	return (g->rng >> 11) / 9007199254740992.0;
}

static void
gen_next(Gen *g, int *s, int64_t *ts, double *value)
{
	for (;;)
	{
		while (g->next_stream < NSTREAMS && g->tick % period[g->next_stream] != 0)
			g->next_stream++;
		if (g->next_stream < NSTREAMS)
			break;
		g->tick++;
		g->next_stream = 0;
	}
	*s = g->next_stream++;
	*ts = 1593475200000000LL + (int64_t) g->tick * 10000;
	g->v[*s] += (urand(g) - 0.5) * 2;
	if (g->v[*s] < 0)
		g->v[*s] = -g->v[*s];
	if (*s == 0)
		*value = (double) (int) (800 + g->v[*s] * 40);	/* rpm */
	else if (*s == 6)
		*value = (double) (1 + (int) g->v[*s] % 6);	/* gear */
	else if (*s == 7)
		*value = (double) ((int) g->v[*s] & 0xff);	/* flags */
	else
		*value = g->v[*s];
}

int
main(int argc, char **argv)
{
	Gen			g = {.rng = 88172645463325252ull};

	if (argc == 3 && strcmp(argv[1], "csv") == 0)
	{
		long		n = atol(argv[2]);

		for (long i = 0; i < n; i++)
		{
			int			s;
			int64_t		ts;
			double		v;

			gen_next(&g, &s, &ts, &v);
			printf("%d,%lld,%.6g\n", s, (long long) ts, v);
		}
		return 0;
	}
	if (argc == 5 && strcmp(argv[1], "tsf") == 0)
	{
		const char *path = argv[2];
		long		n = atol(argv[3]);
		TdbStreamSchema schema = {.block_size = 65536, .file_size = (uint64_t) atoll(argv[4]), .nstreams = NSTREAMS};
		TdbStreamIO io;
		TdbStreamDB *db;
		char		err[256];
		double		t0,
					c0;
		uint64_t	kept = 0;
		TdbStreamFileInfo info;
		struct stat st;

		for (int s = 0; s < NSTREAMS; s++)
		{
			TdbStreamDef *d = &schema.streams[s];

			d->id = (uint32_t) s + 1;
			snprintf(d->name, sizeof(d->name), "%s", names[s]);
			d->nfields = 1;
			snprintf(d->fields[0].name, sizeof(d->fields[0].name), "value");
			d->fields[0].type = TDB_ST_FLOAT64;
		}
		if (tdb_stream_io_file(path, true, schema.file_size, &io, err, sizeof(err)) != TDB_STREAM_OK ||
			tdb_stream_create(&io, &schema, err, sizeof(err)) != TDB_STREAM_OK ||
			tdb_stream_open(&io, &db, err, sizeof(err)) != TDB_STREAM_OK)
		{
			fprintf(stderr, "streamgen: %s\n", err);
			return 1;
		}
		t0 = now_s();
		c0 = cpu_s();
		for (long i = 0; i < n; i++)
		{
			int			s;
			int64_t		ts;
			TdbStreamValue v = {0};

			gen_next(&g, &s, &ts, &v.v.f);
			if (tdb_stream_insert(db, s, ts, &v) != TDB_STREAM_OK ||
				((i + 1) % 100000 == 0 && tdb_stream_flush(db) != TDB_STREAM_OK))
			{
				fprintf(stderr, "streamgen: %s\n", tdb_stream_errmsg(db));
				return 1;
			}
		}
		if (tdb_stream_flush(db) != TDB_STREAM_OK)
		{
			fprintf(stderr, "streamgen: %s\n", tdb_stream_errmsg(db));
			return 1;
		}
		printf("load_s,%.3f,s\ncpu_s,%.3f,s\n", now_s() - t0, cpu_s() - c0);
		tdb_stream_info(db, &info);
		for (int s = 0; s < NSTREAMS; s++)
		{
			TdbStreamStats ss;

			tdb_stream_stats(db, s, &ss);
			kept += ss.records;
		}
		stat(path, &st);
		printf("bytes_written,%llu,B\nfile_bytes,%lld,B\nrecords_kept,%llu,records\n",
			   (unsigned long long) info.bytes_written, (long long) st.st_size, (unsigned long long) kept);
		tdb_stream_close(db);
		tdb_stream_io_file_close(&io);
		return 0;
	}
	if (argc == 4 && strcmp(argv[1], "fill64") == 0)
	{
		/*
		 * A file of MB megabytes with 64 streams s0..s63 of eight float64
		 * fields (4 kB blocks), filled round-robin, one record a second per
		 * stream from 2024-01-01, until it wrapped (10 % more than it
		 * holds).  Prints the first and last record index each stream keeps.
		 */
		const char *path = argv[2];
		uint64_t	mb = (uint64_t) atoll(argv[3]);
		TdbStreamSchema schema = {.block_size = 4096, .file_size = mb << 20, .nstreams = 64};
		TdbStreamIO io;
		TdbStreamDB *db;
		TdbStreamFileInfo info;
		TdbStreamStats ss;
		TdbStreamValue v[8];
		char		err[256];
		uint64_t	total;

		for (int s = 0; s < 64; s++)
		{
			TdbStreamDef *d = &schema.streams[s];

			d->id = (uint32_t) s + 1;
			snprintf(d->name, sizeof(d->name), "s%d", s);
			d->nfields = 8;
			for (int f = 0; f < 8; f++)
			{
				snprintf(d->fields[f].name, sizeof(d->fields[f].name), "%c", 'a' + f);
				d->fields[f].type = TDB_ST_FLOAT64;
			}
		}
		if (tdb_stream_io_file(path, true, schema.file_size, &io, err, sizeof(err)) != TDB_STREAM_OK ||
			tdb_stream_create(&io, &schema, err, sizeof(err)) != TDB_STREAM_OK ||
			tdb_stream_open(&io, &db, err, sizeof(err)) != TDB_STREAM_OK)
		{
			fprintf(stderr, "streamgen: %s\n", err);
			return 1;
		}
		tdb_stream_info(db, &info);
		/* 6 records of 74 bytes to a chunk, 48 to a block */
		total = (uint64_t) info.data_blocks * 48 * 11 / 10 / 64;
		memset(v, 0, sizeof(v));
		for (uint64_t i = 0; i < total; i++)
		{
			for (int s = 0; s < 64; s++)
			{
				for (int f = 0; f < 8; f++)
					v[f].v.f = (double) i + f;
				if (tdb_stream_insert(db, s, 1704067200000000LL + (int64_t) i * 1000000, v) != TDB_STREAM_OK)
				{
					fprintf(stderr, "streamgen: %s\n", tdb_stream_errmsg(db));
					return 1;
				}
			}
			if (i % 10000 == 9999 && tdb_stream_flush(db) != TDB_STREAM_OK)
			{
				fprintf(stderr, "streamgen: %s\n", tdb_stream_errmsg(db));
				return 1;
			}
		}
		if (tdb_stream_flush(db) != TDB_STREAM_OK || tdb_stream_stats(db, 0, &ss) != TDB_STREAM_OK)
		{
			fprintf(stderr, "streamgen: %s\n", tdb_stream_errmsg(db));
			return 1;
		}
		/* every stream keeps about the same: report stream 0's */
		printf("%llu %llu\n", (unsigned long long) ((ss.first_ts - 1704067200000000LL) / 1000000),
			   (unsigned long long) (total - 1));
		tdb_stream_close(db);
		tdb_stream_io_file_close(&io);
		return 0;
	}
	fprintf(stderr, "usage: streamgen csv N | streamgen tsf FILE N FILESIZE | streamgen fill64 FILE MB\n");
	return 2;
}
