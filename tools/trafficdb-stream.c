/*
 * trafficdb-stream.c
 *	  The command-line tool of stream files (src/stream/), usable without
 *	  PostgreSQL:
 *
 *	    trafficdb-stream create FILE SCHEMA.rdl     lay out a new file (preallocated)
 *	    trafficdb-stream append FILE STREAM [CSV]   append CSV rows (stdin by default)
 *	    trafficdb-stream dump FILE STREAM [FROM [TO]]  records as CSV
 *	    trafficdb-stream stats FILE                 streams, records, blocks, sizes
 *	    trafficdb-stream verify FILE                check everything committed
 *	    trafficdb-stream recover FILE               open (recovering), report, commit
 *
 *	  CSV rows: the timestamp (integer microseconds since the epoch, or
 *	  ISO 8601 "2020-06-30 00:00:05[.123][Z]" in UTC), then the stream's fields in
 *	  schema order; an empty field is NULL.  A header line (first field not a
 *	  time) is skipped.  An out-of-order or malformed row stops the append
 *	  with its line number; the rows before it are kept (flushed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stream/stream.h"

static int
die(const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "trafficdb-stream: ");
	fprintf(stderr, fmt, a, b);
	fputc('\n', stderr);
	return 1;
}

static char *
slurp(const char *path)
{
	FILE	   *f = fopen(path, "r");
	char	   *buf = NULL;
	size_t		len = 0;

	if (f == NULL)
		return NULL;
	if (getdelim(&buf, &len, '\0', f) < 0)
	{
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

/* Open FILE as a stream file; prints the error and returns NULL on failure. */
static TdbStreamDB *
open_file(const char *path, TdbStreamIO *io)
{
	char		err[256];
	TdbStreamDB *db;
	int			rc;

	if (tdb_stream_io_file(path, false, 0, io, err, sizeof(err)) != TDB_STREAM_OK)
	{
		fprintf(stderr, "trafficdb-stream: %s\n", err);
		return NULL;
	}
	/* every command may write (a recovery commit, an append): one at a time */
	tdb_stream_io_lock(io, true);
	if ((rc = tdb_stream_open(io, &db, err, sizeof(err))) != TDB_STREAM_OK)
	{
		fprintf(stderr, "trafficdb-stream: %s: %s (%s)\n", path, err, tdb_stream_strerror(rc));
		tdb_stream_io_file_close(io);
		return NULL;
	}
	return db;
}

/* Microseconds since the epoch from an integer or ISO 8601 UTC text. */
static bool
parse_time(const char *s, int64_t *out)
{
	char	   *end;
	struct tm	tm = {0};
	long long	v;
	const char *p;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (end != s && *end == '\0' && errno == 0)
	{
		*out = v;
		return true;
	}
	p = strptime(s, "%Y-%m-%d", &tm);
	if (p == NULL)
		return false;
	if (*p == 'T' || *p == ' ')
	{
		p = strptime(p + 1, "%H:%M:%S", &tm);
		if (p == NULL)
			return false;
	}
	*out = (int64_t) timegm(&tm) * 1000000;
	if (*p == '.')
	{
		double		frac = strtod(p, &end);

		*out += (int64_t) (frac * 1e6 + 0.5);
		p = end;
	}
	if (*p == 'Z')
		p++;
	return *p == '\0';
}

static bool
parse_value(const TdbStreamField *f, const char *s, TdbStreamValue *v)
{
	char	   *end;

	memset(v, 0, sizeof(*v));
	if (*s == '\0')
	{
		v->isnull = true;
		return f->nullable;
	}
	errno = 0;
	switch (f->type)
	{
		case TDB_ST_FLOAT32:
		case TDB_ST_FLOAT64:
			v->v.f = strtod(s, &end);
			return end != s && *end == '\0';
		case TDB_ST_BOOL:
			if (strcmp(s, "t") == 0 || strcmp(s, "true") == 0 || strcmp(s, "1") == 0)
				v->v.i = 1;
			else if (!(strcmp(s, "f") == 0 || strcmp(s, "false") == 0 || strcmp(s, "0") == 0))
				return false;
			return true;
		default:
			{
				long long	x = strtoll(s, &end, 10);
				int			bits = f->type == TDB_ST_INT8 ? 8 : f->type == TDB_ST_INT16 ? 16 :
					f->type == TDB_ST_INT32 ? 32 : 64;

				if (end == s || *end != '\0' || errno != 0)
					return false;
				if (bits < 64 && (x < -(1LL << (bits - 1)) || x >= (1LL << (bits - 1))))
					return false;
				v->v.i = x;
				return true;
			}
	}
}

static const char *
type_name(uint8_t t)
{
	static const char *names[] = {"?", "int8", "int16", "int32", "int64", "float32", "float64", "bool"};

	return t < 8 ? names[t] : "?";
}

static int
cmd_create(const char *path, const char *rdl_path)
{
	char	   *text = slurp(rdl_path);
	TdbStreamSchema schema;
	TdbStreamIO io;
	char		err[256];
	int			rc;

	if (text == NULL)
		return die("cannot read schema \"%s\": %s", rdl_path, strerror(errno));
	rc = tdb_stream_parse_rdl(text, &schema, err, sizeof(err));
	free(text);
	if (rc != TDB_STREAM_OK)
		return die("%s: %s", rdl_path, err);
	if (tdb_stream_io_file(path, true, schema.file_size, &io, err, sizeof(err)) != TDB_STREAM_OK)
		return die("%s%s", err, "");
	rc = tdb_stream_create(&io, &schema, err, sizeof(err));
	tdb_stream_io_file_close(&io);
	if (rc != TDB_STREAM_OK)
	{
		remove(path);
		return die("%s: %s", path, err);
	}
	printf("created %s: %u stream(s), %llu bytes, blocks of %u bytes\n", path, schema.nstreams,
		   (unsigned long long) schema.file_size, schema.block_size);
	return 0;
}

static int
cmd_append(const char *path, const char *stream, const char *csv)
{
	TdbStreamIO io;
	TdbStreamDB *db = open_file(path, &io);
	FILE	   *in = csv ? fopen(csv, "r") : stdin;
	char	   *line = NULL;
	size_t		cap = 0;
	long		lineno = 0,
				rows = 0;
	int			s,
				rc = 0;
	const TdbStreamDef *d;
	bool		progress = isatty(2);

	if (db == NULL)
		return 1;
	if (in == NULL)
		return die("cannot read \"%s\": %s", csv, strerror(errno));
	if ((s = tdb_stream_find(db, stream)) < 0)
		return die("%s has no stream \"%s\"", path, stream);
	d = &tdb_stream_schema(db)->streams[s];
	while (getline(&line, &cap, in) > 0)
	{
		char	   *fields[TDB_STREAM_MAX_FIELDS + 2];
		int			nf = 0;
		char	   *p = line;
		int64_t		ts;
		TdbStreamValue vals[TDB_STREAM_MAX_FIELDS];

		lineno++;
		line[strcspn(line, "\r\n")] = '\0';
		if (*line == '\0')
			continue;
		while (nf < TDB_STREAM_MAX_FIELDS + 2)
		{
			fields[nf++] = p;
			p = strchr(p, ',');
			if (p == NULL)
				break;
			*p++ = '\0';
		}
		if (!parse_time(fields[0], &ts))
		{
			if (lineno == 1)
				continue;		/* a header */
			fprintf(stderr, "trafficdb-stream: line %ld: \"%s\" is not a time (expected microseconds or ISO 8601)\n",
					lineno, fields[0]);
			rc = 1;
			break;
		}
		if ((uint32_t) nf != d->nfields + 1)
		{
			fprintf(stderr, "trafficdb-stream: line %ld: %d fields; stream %s expects a time and %u field(s)\n",
					lineno, nf, d->name, d->nfields);
			rc = 1;
			break;
		}
		for (uint32_t f = 0; f < d->nfields && rc == 0; f++)
			if (!parse_value(&d->fields[f], fields[f + 1], &vals[f]))
			{
				fprintf(stderr, "trafficdb-stream: line %ld: field %s: \"%s\" is not a%s %s\n", lineno,
						d->fields[f].name, fields[f + 1], d->fields[f].nullable ? "" : " non-null",
						type_name(d->fields[f].type));
				rc = 1;
			}
		if (rc != 0)
			break;
		if (tdb_stream_insert(db, s, ts, vals) != TDB_STREAM_OK)
		{
			fprintf(stderr, "trafficdb-stream: line %ld: %s\n", lineno, tdb_stream_errmsg(db));
			rc = 1;
			break;
		}
		if (++rows % 1000000 == 0)
		{
			if (tdb_stream_flush(db) != TDB_STREAM_OK)
			{
				fprintf(stderr, "trafficdb-stream: flush: %s\n", tdb_stream_errmsg(db));
				rc = 1;
				break;
			}
			if (progress)
				fprintf(stderr, "\r%ld rows", rows);
		}
	}
	if (progress && rows >= 1000000)
		fputc('\n', stderr);
	/* the rows before an error are kept */
	if (tdb_stream_flush(db) != TDB_STREAM_OK)
	{
		fprintf(stderr, "trafficdb-stream: flush: %s\n", tdb_stream_errmsg(db));
		rc = 1;
	}
	else
	{
		TdbStreamStats st;

		tdb_stream_stats(db, s, &st);
		fprintf(stderr, "appended %ld rows to %s (%llu inserted this run, %llu stored by the codecs)\n",
				rows, d->name, (unsigned long long) st.inserts, (unsigned long long) st.stored);
	}
	free(line);
	if (in != stdin)
		fclose(in);
	tdb_stream_close(db);
	tdb_stream_io_file_close(&io);
	return rc;
}

typedef struct DumpArg
{
	const TdbStreamDef *d;
} DumpArg;

static int
dump_visit(const TdbStreamRecord *r, void *p)
{
	const TdbStreamDef *d = ((DumpArg *) p)->d;

	printf("%lld", (long long) r->ts);
	for (uint32_t f = 0; f < d->nfields; f++)
	{
		const TdbStreamValue *v = &r->vals[f];

		if (v->isnull)
			fputs(",", stdout);
		else if (d->fields[f].type == TDB_ST_FLOAT32)
			printf(",%.9g", v->v.f);
		else if (d->fields[f].type == TDB_ST_FLOAT64)
			printf(",%.17g", v->v.f);
		else if (d->fields[f].type == TDB_ST_BOOL)
			printf(",%s", v->v.i ? "true" : "false");
		else
			printf(",%lld", (long long) v->v.i);
	}
	if (r->discontinuity)
		fputs(",# discontinuity", stdout);
	putchar('\n');
	return 0;
}

static int
cmd_dump(const char *path, const char *stream, const char *from, const char *to)
{
	TdbStreamIO io;
	TdbStreamDB *db = open_file(path, &io);
	int64_t		lo = INT64_MIN + 1,
				hi = INT64_MAX;
	DumpArg		a;
	int			s,
				rc;

	if (db == NULL)
		return 1;
	if ((s = tdb_stream_find(db, stream)) < 0)
		return die("%s has no stream \"%s\"", path, stream);
	if ((from && !parse_time(from, &lo)) || (to && !parse_time(to, &hi)))
		return die("bad time \"%s\": expected microseconds or ISO 8601%s", from, "");
	a.d = &tdb_stream_schema(db)->streams[s];
	printf("ts");
	for (uint32_t f = 0; f < a.d->nfields; f++)
		printf(",%s", a.d->fields[f].name);
	putchar('\n');
	rc = tdb_stream_range(db, s, lo, hi, dump_visit, &a);
	if (rc != TDB_STREAM_OK)
		fprintf(stderr, "trafficdb-stream: %s\n", tdb_stream_errmsg(db));
	tdb_stream_close(db);
	tdb_stream_io_file_close(&io);
	return rc != TDB_STREAM_OK;
}

static int
cmd_stats(const char *path, bool verify)
{
	TdbStreamIO io;
	TdbStreamDB *db = open_file(path, &io);
	const TdbStreamSchema *sc;
	TdbStreamFileInfo info;
	int			rc = 0;

	if (db == NULL)
		return 1;
	sc = tdb_stream_schema(db);
	tdb_stream_info(db, &info);
	printf("%s: %llu bytes, blocks of %u bytes, %u data blocks (%u free), commit %llu, "
		   "%llu sectors read to open\n", path, (unsigned long long) sc->file_size, info.block_size,
		   info.data_blocks, info.free_blocks, (unsigned long long) info.commit_seq,
		   (unsigned long long) info.open_reads);
	for (uint32_t s = 0; s < sc->nstreams; s++)
	{
		const TdbStreamDef *d = &sc->streams[s];
		TdbStreamStats st;

		if ((rc = tdb_stream_stats(db, (int) s, &st)) != TDB_STREAM_OK)
		{
			fprintf(stderr, "trafficdb-stream: stream %s: %s\n", d->name, tdb_stream_errmsg(db));
			break;
		}
		printf("stream %s (id %u): %llu records in %llu blocks, %u bytes each, from %lld to %lld;",
			   d->name, d->id, (unsigned long long) st.records, (unsigned long long) st.blocks,
			   info.record_size[s], (long long) st.first_ts, (long long) st.last_ts);
		for (uint32_t f = 0; f < d->nfields; f++)
			printf(" %s %s%s%s", d->fields[f].name, type_name(d->fields[f].type),
				   d->fields[f].nullable ? " null" : "",
				   d->fields[f].codec == TDB_CODEC_STEP ? " step" :
				   d->fields[f].codec == TDB_CODEC_DEADBAND ? " deadband" : "");
		putchar('\n');
	}
	if (verify && rc == TDB_STREAM_OK)
	{
		rc = tdb_stream_verify(db);
		if (rc == TDB_STREAM_OK)
			printf("verified: every committed chunk and index entry is sound\n");
		else
			fprintf(stderr, "trafficdb-stream: verify: %s\n", tdb_stream_errmsg(db));
	}
	tdb_stream_close(db);
	tdb_stream_io_file_close(&io);
	return rc != TDB_STREAM_OK;
}

static int
cmd_recover(const char *path)
{
	TdbStreamIO io;
	TdbStreamDB *db = open_file(path, &io);
	TdbStreamFileInfo info;
	int			rc;

	if (db == NULL)
		return 1;
	/* opening is the recovery; a flush commits its result */
	rc = tdb_stream_flush(db);
	tdb_stream_info(db, &info);
	if (rc == TDB_STREAM_OK)
		printf("%s: recovered to commit %llu (%llu sectors read)\n", path,
			   (unsigned long long) info.commit_seq, (unsigned long long) info.open_reads);
	else
		fprintf(stderr, "trafficdb-stream: %s\n", tdb_stream_errmsg(db));
	tdb_stream_close(db);
	tdb_stream_io_file_close(&io);
	return rc != TDB_STREAM_OK;
}

int
main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "";

	if (strcmp(cmd, "create") == 0 && argc == 4)
		return cmd_create(argv[2], argv[3]);
	if (strcmp(cmd, "append") == 0 && (argc == 4 || argc == 5))
		return cmd_append(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
	if (strcmp(cmd, "dump") == 0 && argc >= 4 && argc <= 6)
		return cmd_dump(argv[2], argv[3], argc > 4 ? argv[4] : NULL, argc > 5 ? argv[5] : NULL);
	if (strcmp(cmd, "stats") == 0 && argc == 3)
		return cmd_stats(argv[2], false);
	if (strcmp(cmd, "verify") == 0 && argc == 3)
		return cmd_stats(argv[2], true);
	if (strcmp(cmd, "recover") == 0 && argc == 3)
		return cmd_recover(argv[2]);
	fprintf(stderr,
			"usage: trafficdb-stream create FILE SCHEMA.rdl\n"
			"       trafficdb-stream append FILE STREAM [CSV]     (CSV from stdin by default)\n"
			"       trafficdb-stream dump FILE STREAM [FROM [TO]]\n"
			"       trafficdb-stream stats FILE | verify FILE | recover FILE\n");
	return 2;
}
