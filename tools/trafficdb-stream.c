/*
 * trafficdb-stream.c
 *	  The command-line tool of stream files (src/stream/), usable without
 *	  PostgreSQL:
 *
 *	    trafficdb-stream create FILE SCHEMA.rdl     lay out a new file (preallocated)
 *	    trafficdb-stream append FILE STREAM [CSV] [--no-header] [--time-unit U] [--time-window FROM..TO] [--skip-bad]
 *	                                                append CSV rows (stdin by default)
 *	    trafficdb-stream dump FILE STREAM [FROM [TO]] [--time-unit U]  records as CSV
 *	    trafficdb-stream stats FILE                 streams, records, blocks, sizes
 *	    trafficdb-stream verify FILE                check everything committed
 *	    trafficdb-stream recover FILE               open (recovering), report, commit
 *
 *	  CSV input: a header names the columns, ts and every field of the
 *	  stream, in any order (matched by name, case-insensitively); a header
 *	  naming anything else, naming a column twice or missing one is refused
 *	  with the names.  --no-header: no header, ts then the fields in schema
 *	  order.  An empty value is NULL.  Times are read by tools/csvtime.c, the
 *	  rule trafficdb-trail uses: ISO 8601 in UTC, or integers since 1970 in
 *	  --time-unit s, ms, us or ns (auto by default: |v| < 1e11 seconds, < 1e14
 *	  milliseconds, else microseconds; one file keeps one unit), each in
 *	  --time-window FROM..TO (default 1971-01-01..2200-01-01), else refused
 *	  naming the unit that would fit.  Floats take NaN, Infinity and
 *	  -Infinity as PostgreSQL spells them; dump writes them so.
 *
 *	  All or nothing: the input is read twice, first to check every line
 *	  (each bad one is reported with its file line, column and value), then,
 *	  only if none was bad, to insert; one flush at the end.  --skip-bad
 *	  appends the good lines and reports how many were skipped.  Input that
 *	  cannot be read twice (a pipe) is copied to a temporary file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "csv_fields.h"
#include "csvtime.h"
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

/* ---- append: CSV rows, all or nothing ------------------------------------ */

#define MAX_COLUMNS		(TDB_STREAM_MAX_FIELDS + 1)
#define MAX_REPORTED	20		/* bad lines printed; the rest are counted */

typedef struct AppendOpts
{
	bool		header;			/* the first line names the columns (default) */
	bool		skip_bad;		/* append the good lines, report the bad */
	TdbTimeUnit unit;
	TdbTimeWindow window;		/* times accepted */
} AppendOpts;

typedef struct Append
{
	const char *input;			/* for messages: the CSV's path or "stdin" */
	const TdbStreamDef *d;
	const AppendOpts *o;
	int			ncols;
	int			colmap[MAX_COLUMNS];	/* column -> field number, -1 for ts */
	TdbTimeColumn times;
	int64_t		last;			/* the stream's last timestamp, then each good line's */
	long		last_line;		/* 0: the stream's */
	long		lines,			/* data lines */
				good,
				bad,
				first_bad;
} Append;

static void
format_us(int64_t us, char *out, size_t outlen)
{
	time_t		s = (time_t) (us >= 0 ? us / 1000000 : -((-(us + 1)) / 1000000) - 1);
	int64_t		frac = us - (int64_t) s * 1000000;
	struct tm	tm;
	size_t		n;

	if (gmtime_r(&s, &tm) == NULL)
	{
		snprintf(out, outlen, "%lld us", (long long) us);
		return;
	}
	n = strftime(out, outlen, "%Y-%m-%dT%H:%M:%S", &tm);
	if (frac)
		snprintf(out + n, outlen - n, ".%06lldZ", (long long) frac);
	else
		snprintf(out + n, outlen - n, "Z");
}

static const char *
type_range(uint8_t t)
{
	return t == TDB_ST_INT8 ? "-128 to 127" : t == TDB_ST_INT16 ? "-32768 to 32767" :
		t == TDB_ST_INT32 ? "-2147483648 to 2147483647" : "-9223372036854775808 to 9223372036854775807";
}

/* One value of field f; on failure err says why (the caller names line and column). */
static bool
parse_value(const TdbStreamField *f, const char *s, TdbStreamValue *v, char *err, size_t errlen)
{
	char	   *end;

	memset(v, 0, sizeof(*v));
	if (*s == '\0')
	{
		v->isnull = true;
		if (!f->nullable)
			snprintf(err, errlen, "empty (NULL), but field %s is NOT NULL", f->name);
		return f->nullable;
	}
	errno = 0;
	switch (f->type)
	{
		case TDB_ST_FLOAT32:
		case TDB_ST_FLOAT64:
			/* decimals, NaN, [+-]Infinity, [+-]inf (csv_fields.c): not hex, "nan(...)" or blanks */
			if (!csv_float_literal(s))
				break;
			v->v.f = strtod(s, &end);
			if (end == s || *end != '\0')
				break;
			if (errno == ERANGE && (v->v.f > 1 || v->v.f < -1))
			{
				snprintf(err, errlen, "\"%s\" is out of range for %s", s, tdb_stream_type_name(f->type));
				return false;
			}
			if (f->type == TDB_ST_FLOAT32 && isfinite(v->v.f) && fabs(v->v.f) > FLT_MAX)
			{
				snprintf(err, errlen, "\"%s\" is out of range for %s (at most %g in magnitude)", s,
						 tdb_stream_type_name(f->type), (double) FLT_MAX);
				return false;
			}
			return true;
		case TDB_ST_BOOL:
			if (strcasecmp(s, "t") == 0 || strcasecmp(s, "true") == 0 || strcmp(s, "1") == 0)
			{
				v->v.i = 1;
				return true;
			}
			if (strcasecmp(s, "f") == 0 || strcasecmp(s, "false") == 0 || strcmp(s, "0") == 0)
				return true;
			break;
		default:
			{
				long long	x = strtoll(s, &end, 10);
				int			bits = f->type == TDB_ST_INT8 ? 8 : f->type == TDB_ST_INT16 ? 16 :
					f->type == TDB_ST_INT32 ? 32 : 64;

				if (end == s || *end != '\0')
					break;
				if (errno == ERANGE || (bits < 64 && (x < -(1LL << (bits - 1)) || x >= (1LL << (bits - 1)))))
				{
					snprintf(err, errlen, "\"%s\" is out of range for %s (%s)", s, tdb_stream_type_name(f->type),
							 type_range(f->type));
					return false;
				}
				v->v.i = x;
				return true;
			}
	}
	snprintf(err, errlen, "\"%s\" is not a%s %s", s, f->nullable ? "" : " non-null", tdb_stream_type_name(f->type));
	return false;
}

/*
 * Split line at commas into fields; at most max + 1 (the last then holds
 * the rest of the line).  Returns the count.
 */
static int
split(char *line, char **fields, int max)
{
	int			n = 0;
	char	   *p = line;

	for (;;)
	{
		fields[n++] = p;
		if (n == max + 1 || (p = strchr(p, ',')) == NULL)
			return n;
		*p++ = '\0';
	}
}

static void
field_list(const TdbStreamDef *d, char *out, size_t outlen)
{
	size_t		n = (size_t) snprintf(out, outlen, "ts");

	for (uint32_t f = 0; f < d->nfields && n < outlen; f++)
		n += (size_t) snprintf(out + n, outlen - n, ", %s", d->fields[f].name);
}

/* Append ", what" (or "what" first) to a message of at most len bytes. */
static void
add(char *msg, size_t len, const char *sep, const char *what)
{
	size_t		n = strlen(msg);

	if (n < len)
		snprintf(msg + n, len - n, "%s%s", n ? sep : "", what);
}

/*
 * The header: every column named once, by the stream's field names (or ts),
 * in any order, each field present.  Prints what is wrong and returns false.
 */
static bool
read_header(Append *a, char *line)
{
	char	   *names[MAX_COLUMNS + 1];
	int			n = split(line, names, MAX_COLUMNS);
	bool		seen[TDB_STREAM_MAX_FIELDS + 1] = {0};	/* [0]: ts */
	char		unknown[600] = "",
				dup[600] = "",
				missing[600] = "",
				fields[1200],
				q[80];
	int64_t		us;

	field_list(a->d, fields, sizeof(fields));
	if (tdb_time_parse(names[0], a->o->unit, &us, NULL))
	{
		fprintf(stderr, "trafficdb-stream: %s line 1: expected a header naming the columns (%s), found data "
				"(\"%s\" is a time); pass --no-header if the file has no header and its columns are in that order\n",
				a->input, fields, names[0]);
		return false;
	}
	if (n > MAX_COLUMNS)
	{
		fprintf(stderr, "trafficdb-stream: %s line 1: the header names more than %d columns; stream %s has %u (%s)\n",
				a->input, MAX_COLUMNS, a->d->name, a->d->nfields + 1, fields);
		return false;
	}
	for (int c = 0; c < n; c++)
	{
		int			k = -2;

		if (strcasecmp(names[c], "ts") == 0)
			k = -1;
		for (uint32_t f = 0; f < a->d->nfields && k == -2; f++)
			if (strcasecmp(names[c], a->d->fields[f].name) == 0)
				k = (int) f;
		snprintf(q, sizeof(q), "\"%.70s\"", names[c]);
		if (k == -2)
			add(unknown, sizeof(unknown), ", ", q);
		else if (seen[k + 1])
			add(dup, sizeof(dup), ", ", q);
		else
			seen[k + 1] = true;
		a->colmap[c] = k;
	}
	for (uint32_t k = 0; k <= a->d->nfields; k++)
		if (!seen[k])
			add(missing, sizeof(missing), ", ", k == 0 ? "ts" : a->d->fields[k - 1].name);
	if (unknown[0] || dup[0] || missing[0])
	{
		char		msg[2000] = "";
		char		part[700];

		if (unknown[0])
		{
			snprintf(part, sizeof(part), "unknown column(s) %s", unknown);
			add(msg, sizeof(msg), "; ", part);
		}
		if (dup[0])
		{
			snprintf(part, sizeof(part), "named twice: %s", dup);
			add(msg, sizeof(msg), "; ", part);
		}
		if (missing[0])
		{
			snprintf(part, sizeof(part), "missing: %s", missing);
			add(msg, sizeof(msg), "; ", part);
		}
		fprintf(stderr, "trafficdb-stream: %s line 1: the header does not match stream %s (%s): %s\n"
				"  (columns are matched by name, in any order; pass --no-header if the file has no header "
				"and its columns are in that order)\n", a->input, a->d->name, fields, msg);
		return false;
	}
	a->ncols = n;
	return true;
}

/*
 * One data line: true with the record in ts/vals, or false with err naming
 * the column and the bad value (the caller adds file and line).
 */
static bool
read_row(Append *a, char *line, long lineno, int64_t *ts, TdbStreamValue *vals, char *err, size_t errlen)
{
	char	   *cols[MAX_COLUMNS + 1];
	int			n = split(line, cols, a->ncols);
	char		why[600];

	if (n != a->ncols)
	{
		if (n < a->ncols)
			snprintf(err, errlen, "column %s: missing (the line has %d value(s), the %s %d)",
					 a->colmap[n] < 0 ? "ts" : a->d->fields[a->colmap[n]].name, n,
					 a->o->header ? "header names" : "stream has", a->ncols);
		else
			snprintf(err, errlen, "extra value \"%s\" after column %s (the %s %d)", cols[a->ncols],
					 a->colmap[a->ncols - 1] < 0 ? "ts" : a->d->fields[a->colmap[a->ncols - 1]].name,
					 a->o->header ? "header names" : "stream has", a->ncols);
		return false;
	}
	for (int c = 0; c < n; c++)
	{
		int			k = a->colmap[c];

		if (k >= 0)
		{
			if (!parse_value(&a->d->fields[k], cols[c], &vals[k], why, sizeof(why)))
			{
				snprintf(err, errlen, "column %s: %s", a->d->fields[k].name, why);
				return false;
			}
			continue;
		}
		if (!tdb_time_column_parse(&a->times, cols[c], lineno, ts, why, sizeof(why)))
		{
			snprintf(err, errlen, "column ts: %s", why);
			return false;
		}
		if (a->last != INT64_MIN && *ts <= a->last)
		{
			char		t1[64],
						t2[64],
						where[64];

			format_us(*ts, t1, sizeof(t1));
			format_us(a->last, t2, sizeof(t2));
			if (a->last_line > 0)
				snprintf(where, sizeof(where), "the time on line %ld", a->last_line);
			else
				snprintf(where, sizeof(where), "the last timestamp of stream %s", a->d->name);
			snprintf(err, errlen, "column ts: \"%s\" (%s) is %s %s, %s: times must ascend", cols[c], t1,
					 *ts == a->last ? "equal to" : "before", t2, where);
			return false;
		}
	}
	return true;
}

/*
 * Read the input once.  Pass 1 (!insert) checks every line and reports the
 * bad ones; pass 2 inserts the good ones (the same checks, silently: they
 * give the same answers).  Returns false on a fatal error (the header, an
 * insert).
 */
static bool
append_pass(Append *a, FILE *in, FILE *spool, TdbStreamDB *db, int s, bool insert)
{
	char	   *line = NULL;
	size_t		cap = 0;
	ssize_t		len;
	long		lineno = 0;
	bool		ok = true,
				have_header = !a->o->header;
	bool		progress = insert && isatty(2);

	a->lines = a->good = a->bad = a->first_bad = 0;
	a->times = (TdbTimeColumn) {.unit = a->o->unit, .window = &a->o->window};
	a->last_line = 0;
	if (tdb_stream_last_ts(db, s, &a->last) != TDB_STREAM_OK)
		a->last = INT64_MIN;
	while (ok && (len = getline(&line, &cap, in)) > 0)
	{
		int64_t		ts = 0;
		TdbStreamValue vals[TDB_STREAM_MAX_FIELDS];
		char		err[800];

		if (spool != NULL && fwrite(line, 1, (size_t) len, spool) != (size_t) len)
		{
			fprintf(stderr, "trafficdb-stream: cannot copy the input to a temporary file: %s\n", strerror(errno));
			ok = false;
			break;
		}
		lineno++;
		line[strcspn(line, "\r\n")] = '\0';
		if (lineno == 1 && memcmp(line, "\xEF\xBB\xBF", 3) == 0)
			memmove(line, line + 3, strlen(line + 3) + 1);	/* a UTF-8 byte order mark */
		if (*line == '\0')
			continue;
		if (!have_header)
		{
			have_header = true;
			if (!insert && !read_header(a, line))
				ok = false;
			continue;
		}
		a->lines++;
		if (!read_row(a, line, lineno, &ts, vals, err, sizeof(err)))
		{
			if (!insert && a->bad < MAX_REPORTED)
				fprintf(stderr, "trafficdb-stream: %s line %ld, %s\n", a->input, lineno, err);
			if (a->bad++ == 0)
				a->first_bad = lineno;
			continue;
		}
		a->good++;
		a->last = ts;
		a->last_line = lineno;
		if (insert && tdb_stream_insert(db, s, ts, vals) != TDB_STREAM_OK)
		{
			fprintf(stderr, "trafficdb-stream: %s line %ld: %s\n", a->input, lineno, tdb_stream_errmsg(db));
			ok = false;
		}
		if (progress && a->good % 1000000 == 0)
			fprintf(stderr, "\r%ld rows", a->good);
	}
	if (progress && a->good >= 1000000)
		fputc('\n', stderr);
	if (ok && ferror(in))
	{
		fprintf(stderr, "trafficdb-stream: cannot read %s: %s\n", a->input, strerror(errno));
		ok = false;
	}
	free(line);
	return ok;
}

static int
cmd_append(const char *path, const char *stream, const char *csv, const AppendOpts *o)
{
	TdbStreamIO io;
	TdbStreamDB *db;
	FILE	   *in,
			   *spool = NULL;
	off_t		start;
	int			s,
				rc = 1;
	Append		a = {.o = o, .input = csv ? csv : "stdin"};

	if (csv != NULL && strcmp(csv, "-") == 0)
		csv = NULL;
	a.input = csv ? csv : "stdin";
	in = csv ? fopen(csv, "r") : stdin;
	if (in == NULL)
		return die("cannot read \"%s\": %s", csv, strerror(errno));
	if ((db = open_file(path, &io)) == NULL)
		goto done_in;
	if ((s = tdb_stream_find(db, stream)) < 0)
	{
		die("%s has no stream \"%s\"", path, stream);
		goto done;
	}
	a.d = &tdb_stream_schema(db)->streams[s];
	if (!o->header)
	{
		a.ncols = (int) a.d->nfields + 1;
		a.colmap[0] = -1;
		for (uint32_t f = 0; f < a.d->nfields; f++)
			a.colmap[f + 1] = (int) f;
	}
	/* pass 1 checks everything; an input that cannot be read twice is kept in a temporary file */
	start = ftello(in);
	if (start < 0 && (spool = tmpfile()) == NULL)
	{
		fprintf(stderr, "trafficdb-stream: cannot create a temporary file: %s\n", strerror(errno));
		goto done;
	}
	if (!append_pass(&a, in, spool, db, s, false))
		goto done;
	if (a.bad > MAX_REPORTED)
		fprintf(stderr, "trafficdb-stream: ... and %ld more bad line(s) not shown\n", a.bad - MAX_REPORTED);
	if (a.bad > 0 && !o->skip_bad)
	{
		fprintf(stderr, "trafficdb-stream: nothing appended to %s: %ld bad line(s) of %ld (the first on line %ld); "
				"fix them, or pass --skip-bad to append the %ld good line(s) and skip the bad\n",
				a.d->name, a.bad, a.lines, a.first_bad, a.good);
		goto done;
	}
	if (a.good > 0)
	{
		Append		b = a;

		if ((spool != NULL ? fseeko(spool, 0, SEEK_SET) : fseeko(in, start, SEEK_SET)) != 0)
		{
			fprintf(stderr, "trafficdb-stream: cannot read %s again: %s\n", a.input, strerror(errno));
			goto done;
		}
		if (!append_pass(&b, spool != NULL ? spool : in, NULL, db, s, true))
			goto done;			/* nothing flushed by us: reopening finds the last commit */
		if (b.good != a.good)
		{
			fprintf(stderr, "trafficdb-stream: %s changed while it was read (%ld good lines, then %ld); nothing flushed\n",
					a.input, a.good, b.good);
			goto done;
		}
		if (tdb_stream_flush(db) != TDB_STREAM_OK)
		{
			fprintf(stderr, "trafficdb-stream: flush: %s\n", tdb_stream_errmsg(db));
			goto done;
		}
	}
	{
		TdbStreamStats st;

		tdb_stream_stats(db, s, &st);
		fprintf(stderr, "appended %ld rows to %s (%llu stored by the codecs)", a.good, a.d->name,
				(unsigned long long) st.stored);
		if (a.times.found != TDB_TIME_AUTO)
			fprintf(stderr, "; integer times read as %s (--time-unit auto)", tdb_time_unit_name(a.times.found));
		if (a.bad > 0)
			fprintf(stderr, "; skipped %ld bad line(s) of %ld, listed above", a.bad, a.lines);
		fputc('\n', stderr);
	}
	rc = 0;
done:
	tdb_stream_close(db);
	tdb_stream_io_file_close(&io);
done_in:
	if (spool != NULL)
		fclose(spool);
	if (in != stdin)
		fclose(in);
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
		else if ((d->fields[f].type == TDB_ST_FLOAT32 || d->fields[f].type == TDB_ST_FLOAT64) && !isfinite(v->v.f))
			printf(",%s", isnan(v->v.f) ? "NaN" : v->v.f > 0 ? "Infinity" : "-Infinity");	/* as PostgreSQL spells them */
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
cmd_dump(const char *path, const char *stream, const char *from, const char *to, TdbTimeUnit unit)
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
	if ((from && !tdb_time_parse(from, unit, &lo, NULL)) || (to && !tdb_time_parse(to, unit, &hi, NULL)))
		return die("bad time \"%s\": expected ISO 8601 in UTC or an integer of %s since 1970",
				   (from && !tdb_time_parse(from, unit, &lo, NULL)) ? from : to,
				   unit == TDB_TIME_AUTO ? "seconds, milliseconds or microseconds (--time-unit)" : tdb_time_unit_name(unit));
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
			printf(" %s %s%s%s", d->fields[f].name, tdb_stream_type_name(d->fields[f].type),
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
	const char *pos[8];
	int			npos = 0;
	AppendOpts	o = {.header = true, .unit = TDB_TIME_AUTO};
	char		why[200];
	bool		append_opts = false,
				unit_opt = false,
				window_opt = false;

	tdb_time_window_parse(TDB_TIME_WINDOW_DEFAULT, &o.window, NULL, 0);

	/* options anywhere after the command; the rest are positional */
	for (int i = 2; i < argc; i++)
	{
		if (strcmp(argv[i], "--no-header") == 0)
			o.header = false, append_opts = true;
		else if (strcmp(argv[i], "--skip-bad") == 0)
			o.skip_bad = true, append_opts = true;
		else if (strcmp(argv[i], "--time-unit") == 0 || strncmp(argv[i], "--time-unit=", 12) == 0)
		{
			const char *v = argv[i][11] == '=' ? argv[i] + 12 : i + 1 < argc ? argv[++i] : "";

			if (!tdb_time_unit_parse(v, &o.unit))
			{
				fprintf(stderr, "trafficdb-stream: --time-unit \"%s\": expected s, ms, us, ns or auto\n", v);
				return 2;
			}
			unit_opt = true;
		}
		else if (strcmp(argv[i], "--time-window") == 0 || strncmp(argv[i], "--time-window=", 14) == 0)
		{
			const char *v = argv[i][13] == '=' ? argv[i] + 14 : i + 1 < argc ? argv[++i] : "";

			if (!tdb_time_window_parse(v, &o.window, why, sizeof(why)))
			{
				fprintf(stderr, "trafficdb-stream: --time-window \"%s\": %s\n", v, why);
				return 2;
			}
			window_opt = true;
		}
		else if (strncmp(argv[i], "--", 2) == 0 && argv[i][2] != '\0')
		{
			fprintf(stderr, "trafficdb-stream: unknown option %s\n", argv[i]);
			npos = -1;
			break;
		}
		else if (npos < 8)
			pos[npos++] = argv[i];
		else
			npos = 9;
	}
	if (strcmp(cmd, "append") == 0 && (npos == 2 || npos == 3))
		return cmd_append(pos[0], pos[1], npos == 3 ? pos[2] : NULL, &o);
	if (append_opts || window_opt)
		npos = -1;				/* --no-header, --skip-bad, --time-window: append only */
	if (strcmp(cmd, "dump") == 0 && npos >= 2 && npos <= 4)
		return cmd_dump(pos[0], pos[1], npos > 2 ? pos[2] : NULL, npos > 3 ? pos[3] : NULL, o.unit);
	if (unit_opt)
		npos = -1;				/* --time-unit: append and dump */
	if (strcmp(cmd, "create") == 0 && npos == 2)
		return cmd_create(pos[0], pos[1]);
	if (strcmp(cmd, "stats") == 0 && npos == 1)
		return cmd_stats(pos[0], false);
	if (strcmp(cmd, "verify") == 0 && npos == 1)
		return cmd_stats(pos[0], true);
	if (strcmp(cmd, "recover") == 0 && npos == 1)
		return cmd_recover(pos[0]);
	fprintf(stderr,
			"usage: trafficdb-stream create FILE SCHEMA.rdl\n"
			"       trafficdb-stream append FILE STREAM [CSV|-] [--no-header] [--time-unit s|ms|us|ns|auto]\n"
			"                        [--time-window FROM..TO] [--skip-bad]\n"
			"       trafficdb-stream dump FILE STREAM [FROM [TO]] [--time-unit s|ms|us|ns|auto]\n"
			"       trafficdb-stream stats FILE | verify FILE | recover FILE\n"
			"append reads CSV (stdin by default) whose header names the columns: ts and the stream's fields,\n"
			"in any order; --no-header: no header, ts then the fields in schema order.  Times: ISO 8601 in UTC,\n"
			"or integers since 1970 in --time-unit (auto: |v| < 1e11 seconds, < 1e14 milliseconds, else\n"
			"microseconds; ns, kept to the microsecond, is never guessed).  Every time must fall in --time-window\n"
			"(default " TDB_TIME_WINDOW_DEFAULT ", up to but not including TO; \"..\": any time), else it is\n"
			"refused naming the unit that fits.  Floats: NaN, Infinity, -Infinity as PostgreSQL spells them.\n"
			"A bad line appends nothing unless --skip-bad.\n");
	return 2;
}
