/*
 * trail_write.c
 *	  trafficdb-trail write OUT < CSV: a trail file from CSV, in bounded
 *	  memory.
 *
 * The CSV is read twice: once to check its shape and infer the columns'
 * types (from all rows, as before), once to parse the values and hand the
 * events to the writer, which keeps at most --memory-limit of them and
 * sorts the rest in runs on disk.  Standard input that is not a regular
 * file is copied to an unnamed temporary file during the first pass.  The
 * output is made in an unnamed file (O_TMPFILE) in the destination's
 * directory and given its name only when complete, so a crash or a kill
 * leaves neither a partial file nor a temporary one (where O_TMPFILE is
 * missing, a "OUT.tmp.PID" name is used and removed on exit and on
 * SIGINT, SIGTERM and SIGHUP).  An s3:// destination is written to an
 * unnamed temporary file, then uploaded from it.  On a terminal (unless
 * --quiet) a progress line says the rows read, the runs spilled and the
 * events written.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csv_fields.h"
#include "csvtime.h"
#include "trail_write.h"

#define PROGRESS_ROWS 1000000

/* ---- CSV ---------------------------------------------------------------- */

typedef struct Csv
{
	int			ncols;
	char	  **names;
	size_t		nrows;
	CsvInfer   *infer;			/* per column, over the non-empty values */
	/* reading */
	char	   *line;
	size_t		cap;
	size_t		lineno;
	char	   *fields[TDB_TRAIL_MAX_COLUMNS + 8];
} Csv;

/* Split one line into fields; returns the count or -1 on a bad quote. */
static int
csv_split(char *line, char **fields, int max)
{
	int			n = 0;
	char	   *p = line;

	for (;;)
	{
		char	   *out = p,
				   *start = p;

		if (n >= max)
			return -1;
		if (*p == '"')
		{
			p++;
			start = out = p;
			for (;;)
			{
				if (*p == '\0')
					return -1;
				if (*p == '"' && p[1] == '"')
				{
					*out++ = '"';
					p += 2;
				}
				else if (*p == '"')
				{
					p++;
					break;
				}
				else
					*out++ = *p++;
			}
			if (*p != ',' && *p != '\0')
				return -1;
		}
		else
		{
			while (*p && *p != ',')
				p++;
			out = p;
		}
		fields[n++] = start;
		if (*p == '\0')
		{
			*out = '\0';
			return n;
		}
		*out = '\0';
		p++;
	}
}

/*
 * The next row of in (the header first) split into csv->fields, empty
 * fields NULL; its field count, 0 at the end.  Copies the raw lines to
 * spool when given.  Exits on bad quoting or a row of the wrong width.
 */
static int
csv_next(Csv *csv, FILE *in, FILE *spool)
{
	ssize_t		len;

	while ((len = getline(&csv->line, &csv->cap, in)) >= 0)
	{
		char	   *line = csv->line;
		int			n;

		if (spool != NULL && fwrite(line, 1, (size_t) len, spool) != (size_t) len)
		{
			fprintf(stderr, "trafficdb-trail: cannot copy the input to a temporary file: %s\n", strerror(errno));
			exit(1);
		}
		csv->lineno++;
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (csv->lineno == 1 && csv_bom_length(line) > 0)
		{
			/* a UTF-8 byte order mark (spreadsheets write one) */
			line += 3;
			len -= 3;
		}
		if (len == 0)
			continue;
		n = csv_split(line, csv->fields, TDB_TRAIL_MAX_COLUMNS + 8);
		if (n < 0)
		{
			fprintf(stderr, "trafficdb-trail: CSV line %zu: bad quoting or too many columns\n", csv->lineno);
			exit(1);
		}
		if (csv->names != NULL && n != csv->ncols)
		{
			fprintf(stderr, "trafficdb-trail: CSV line %zu: %d fields, the header has %d\n",
					csv->lineno, n, csv->ncols);
			exit(1);
		}
		for (int i = 0; i < n; i++)
			if (csv->fields[i][0] == '\0')
				csv->fields[i] = NULL;
		return n;
	}
	if (ferror(in))
	{
		fprintf(stderr, "trafficdb-trail: cannot read the CSV: %s\n", strerror(errno));
		exit(1);
	}
	return 0;
}

/* Start reading again (the second pass): the header is skipped. */
static void
csv_rewind(Csv *csv, FILE *in, off_t start)
{
	if (fseeko(in, start, SEEK_SET) != 0)
	{
		fprintf(stderr, "trafficdb-trail: cannot read the CSV again: %s\n", strerror(errno));
		exit(1);
	}
	csv->lineno = 0;
	{
		char	  **names = csv->names;

		csv->names = NULL;		/* the header row: no width check */
		if (csv_next(csv, in, NULL) == 0)
		{
			fprintf(stderr, "trafficdb-trail: the CSV changed while it was read\n");
			exit(1);
		}
		csv->names = names;
	}
}

static int
csv_col(const Csv *csv, const char *name)
{
	for (int i = 0; i < csv->ncols; i++)
		if (strcmp(csv->names[i], name) == 0)
			return i;
	return -1;
}

/* ---- progress and temporary files ---------------------------------------- */

typedef struct Progress
{
	bool		on;
	bool		shown;
	uint32_t	runs;
} Progress;

static void
progress_line(Progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
progress_line(Progress *p, const char *fmt, ...)
{
	va_list		ap;

	if (!p->on)
		return;
	fputs("\rtrafficdb-trail: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\033[K", stderr);
	fflush(stderr);
	p->shown = true;
}

static void
progress_end(Progress *p)
{
	if (p->shown)
		fputc('\n', stderr);
	p->shown = false;
}

static void
writer_progress(void *arg, const TdbTrailProgress *tp)
{
	Progress   *p = arg;

	p->runs = tp->runs;
	if (tp->total > 0)
		progress_line(p, "%s: %" PRIu64 " of %" PRIu64 " events (%d%%), %u sorted runs spilled",
					  tp->phase, tp->done, tp->total, (int) (tp->done * 100 / tp->total), tp->runs);
	else
		progress_line(p, "%" PRIu64 " rows read, %u sorted runs spilled", tp->events, tp->runs);
}

/* An unnamed file (O_TMPFILE; else a name unlinked at once) in dir. */
static int
open_unnamed(const char *dir, int flags, mode_t mode)
{
	char		path[4096];
	int			fd = open(dir, O_TMPFILE | flags | O_CLOEXEC, mode);

	if (fd >= 0)
		return fd;
	if (snprintf(path, sizeof(path), "%s/trafficdb-trail-XXXXXX", dir) >= (int) sizeof(path))
	{
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = mkostemp(path, O_CLOEXEC);
	if (fd >= 0)
		unlink(path);
	return fd;
}

static const char *
temp_dir(const Opts *o)
{
	const char *d = o->temp_dir;

	if (d == NULL || *d == '\0')
		d = getenv("TMPDIR");
	return d != NULL && *d != '\0' ? d : "/tmp";
}

/* A named temporary output (no O_TMPFILE here): removed on exit and signals. */
static char tmp_named[4200];

static void
tmp_named_remove(void)
{
	if (tmp_named[0])
		unlink(tmp_named);
}

static void
tmp_named_signal(int sig)
{
	tmp_named_remove();
	signal(sig, SIG_DFL);
	raise(sig);
}

typedef struct Output
{
	const char *dest;
	int			fd;
	bool		unnamed;		/* O_TMPFILE: linked in at the end */
	bool		s3;
} Output;

static int
fd_sink(void *arg, const void *buf, size_t len, TdbTrailError *err)
{
	Output	   *out = arg;
	const uint8_t *p = buf;

	while (len > 0)
	{
		ssize_t		w = write(out->fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return tdb_trail_fail(err, TDB_TRAIL_EIO, "could not write %s: %s", out->dest,
								  w < 0 ? strerror(errno) : "no space");
		p += w;
		len -= (size_t) w;
	}
	return 0;
}

static void
output_open(Output *out, const char *dest, const Opts *o)
{
	char		dir[4096];

	memset(out, 0, sizeof(*out));
	out->dest = dest;
	if (strncmp(dest, "http://", 7) == 0 || strncmp(dest, "https://", 8) == 0)
	{
		fprintf(stderr, "trafficdb-trail: %s: http(s) destinations are read only; use s3://\n", dest);
		exit(1);
	}
	if (strncmp(dest, "s3://", 5) == 0)
	{
		out->s3 = true;
		out->fd = open_unnamed(temp_dir(o), O_RDWR, 0600);
		if (out->fd < 0)
		{
			fprintf(stderr, "trafficdb-trail: cannot create a temporary file in %s: %s\n", temp_dir(o), strerror(errno));
			exit(1);
		}
		return;
	}
	snprintf(dir, sizeof(dir), "%s", dest);
	out->fd = open(dirname(dir), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
	if (out->fd >= 0)
	{
		out->unnamed = true;
		return;
	}
	if (snprintf(tmp_named, sizeof(tmp_named), "%s.tmp.%d", dest, (int) getpid()) >= (int) sizeof(tmp_named))
	{
		fprintf(stderr, "trafficdb-trail: %s: path too long\n", dest);
		exit(1);
	}
	atexit(tmp_named_remove);
	signal(SIGINT, tmp_named_signal);
	signal(SIGTERM, tmp_named_signal);
	signal(SIGHUP, tmp_named_signal);
	/* a FIFO or a symlink planted at the name must not block or redirect us */
	out->fd = open(tmp_named, O_WRONLY | O_CREAT | O_EXCL | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (out->fd < 0)
	{
		fprintf(stderr, "trafficdb-trail: could not create \"%s\": %s\n", tmp_named, strerror(errno));
		tmp_named[0] = '\0';
		exit(1);
	}
}

/* The file is complete: give it its name (or upload it). */
static void
output_close(Output *out, uint64_t len, const Opts *o)
{
	TdbTrailError err;

	if (out->s3)
	{
		void	   *map = len ? mmap(NULL, (size_t) len, PROT_READ, MAP_SHARED, out->fd, 0) : NULL;

		if (len && map == MAP_FAILED)
		{
			fprintf(stderr, "trafficdb-trail: cannot map the temporary file: %s\n", strerror(errno));
			exit(1);
		}
		if (tdb_trail_store(out->dest, map, (size_t) len, &o->pager.s3, &o->pager.net, o->part_mb << 20, &err) < 0)
			die_err(&err);
		if (map)
			munmap(map, (size_t) len);
		close(out->fd);
		return;
	}
	if (fsync(out->fd) != 0)
	{
		fprintf(stderr, "trafficdb-trail: could not fsync %s: %s\n", out->dest, strerror(errno));
		exit(1);
	}
	if (out->unnamed)
	{
		char		proc[64];

		snprintf(tmp_named, sizeof(tmp_named), "%s.tmp.%d", out->dest, (int) getpid());
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", out->fd);
		atexit(tmp_named_remove);
		if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp_named, AT_SYMLINK_FOLLOW) != 0)
		{
			fprintf(stderr, "trafficdb-trail: could not name %s: %s\n", tmp_named, strerror(errno));
			tmp_named[0] = '\0';
			exit(1);
		}
	}
	if (rename(tmp_named, out->dest) != 0)
	{
		fprintf(stderr, "trafficdb-trail: could not rename to \"%s\": %s\n", out->dest, strerror(errno));
		exit(1);
	}
	tmp_named[0] = '\0';
	close(out->fd);
}

/* ---- write -------------------------------------------------------------- */

/* A refusal of one CSV value: line, column and value, then what it is not. */
static void
die_value(const Csv *csv, int c, const char *value, const char *what)
{
	if (value == NULL)
		fprintf(stderr, "trafficdb-trail: CSV line %zu, column %s: empty %s\n", csv->lineno, csv->names[c], what);
	else
		fprintf(stderr, "trafficdb-trail: CSV line %zu, column %s: \"%s\" %s\n", csv->lineno, csv->names[c],
				value, what);
	exit(1);
}

/* --type COL=TYPE for column name, or NULL; an unknown column or type is an error. */
static void
check_types(const Csv *csv, const Opts *o, const char **given)
{
	for (int c = 0; c < csv->ncols; c++)
		given[c] = NULL;
	for (int t = 0; t < o->ntypes; t++)
	{
		const char *eq = strchr(o->types[t], '=');
		CsvType		ty;
		int			c = -1;

		if (eq != NULL)
			for (int k = 0; k < csv->ncols && c < 0; k++)
				if (strlen(csv->names[k]) == (size_t) (eq - o->types[t]) &&
					strncmp(csv->names[k], o->types[t], (size_t) (eq - o->types[t])) == 0)
					c = k;
		if (eq == NULL || !csv_type_by_name(eq + 1, &ty))
		{
			fprintf(stderr, "trafficdb-trail: --type %s: expected COLUMN=int, COLUMN=float, COLUMN=string or COLUMN=bool\n",
					o->types[t]);
			exit(2);
		}
		if (c < 0)
		{
			fprintf(stderr, "trafficdb-trail: --type %s: the CSV header has no column \"%.*s\" (it has:",
					o->types[t], (int) (eq - o->types[t]), o->types[t]);
			for (int k = 0; k < csv->ncols; k++)
				fprintf(stderr, "%s %s", k ? "," : "", csv->names[k]);
			fprintf(stderr, ")\n");
			exit(2);
		}
		given[c] = eq + 1;
	}
}

/*
 * The first pass: the header, every row's shape, the types inferred from
 * all rows.  Returns the offset of the CSV's start in *in (a regular file),
 * or copies a pipe to an unnamed file and makes *in that.
 */
static off_t
first_pass(Csv *csv, FILE **in, const Opts *o, Progress *pg)
{
	struct stat st;
	off_t		start = -1;
	FILE	   *spool = NULL;
	int			n;

	if (fstat(fileno(*in), &st) == 0 && S_ISREG(st.st_mode))
		start = ftello(*in);
	if (start < 0)
	{
		int			fd = open_unnamed(temp_dir(o), O_RDWR, 0600);

		if (fd < 0 || (spool = fdopen(fd, "w+")) == NULL)
		{
			fprintf(stderr, "trafficdb-trail: cannot create a temporary file in %s for the input: %s\n",
					temp_dir(o), strerror(errno));
			exit(1);
		}
	}
	memset(csv, 0, sizeof(*csv));
	n = csv_next(csv, *in, spool);
	if (n == 0)
	{
		fprintf(stderr, "trafficdb-trail: empty CSV (a header row is required)\n");
		exit(1);
	}
	csv->ncols = n;
	csv->names = malloc(sizeof(char *) * (size_t) n);
	csv->infer = malloc(sizeof(CsvInfer) * (size_t) n);
	if (csv->names == NULL || csv->infer == NULL)
	{
		fprintf(stderr, "trafficdb-trail: out of memory\n");
		exit(1);
	}
	/* every column a name of its own: a file's columns become a table's (IMPORT FOREIGN SCHEMA) */
	for (int i = 0; i < n; i++)
	{
		csv->names[i] = strdup(csv->fields[i] ? csv->fields[i] : "");
		csv_infer_init(&csv->infer[i]);
		if (csv->names[i] == NULL)
		{
			fprintf(stderr, "trafficdb-trail: out of memory\n");
			exit(1);
		}
		if (csv->names[i][0] == '\0')
		{
			fprintf(stderr, "trafficdb-trail: CSV header: column %d has no name (each column needs one; "
					"pandas writes its index so: to_csv(..., index=False))\n", i + 1);
			exit(1);
		}
		for (int j = 0; j < i; j++)
			if (strcmp(csv->names[i], csv->names[j]) == 0)
			{
				fprintf(stderr, "trafficdb-trail: CSV header: columns %d and %d are both named \"%s\" (each column needs a name of its own)\n",
						j + 1, i + 1, csv->names[i]);
				exit(1);
			}
	}
	while (csv_next(csv, *in, spool) > 0)
	{
		for (int i = 0; i < n; i++)
			if (csv->fields[i])
				csv_infer_add(&csv->infer[i], csv->fields[i]);
		if (++csv->nrows % PROGRESS_ROWS == 0)
			progress_line(pg, "%zu rows checked", csv->nrows);
	}
	if (spool != NULL)
	{
		if (fflush(spool) != 0)
		{
			fprintf(stderr, "trafficdb-trail: cannot copy the input to a temporary file: %s\n", strerror(errno));
			exit(1);
		}
		*in = spool;
		start = 0;
	}
	return start;
}

int
cmd_write(const char *out, Opts *o)
{
	Csv			csv;
	FILE	   *in = stdin;
	off_t		start;
	int			cid, ct, cx, cy;
	int			extra[TDB_TRAIL_MAX_COLUMNS];
	CsvType		extra_type[TDB_TRAIL_MAX_COLUMNS];
	const char **given;
	TdbTrailSchema schema;
	TdbTrailWriter *w;
	TdbTrailError err;
	TdbTrailValue vals[TDB_TRAIL_MAX_COLUMNS];
	Progress	pg = {.on = !o->quiet && isatty(2)};
	TdbTrailWriterOptions wo = {
		.page_target_bytes = o->page_bytes,
		.page_max_span_us = o->page_seconds > 0 ? o->page_seconds * 1000000 : -1,
		.version = o->format_version,
		.order = o->order,
		.by_time = o->by_time,
		.bucket_us = o->bucket_seconds * 1000000,
		.memory_limit = o->memory_limit,
		.temp_dir = o->temp_dir,
		.progress = writer_progress,
		.progress_arg = &pg,
	};
	TdbTimeColumn times = {0};
	char		note[160];
	Output		output;
	uint64_t	len;
	size_t		nrows = 0;
	CsvType		id_type;

	if (o->order == TDB_TRAIL_ORDER_SPACETIME && o->format_version < 2)
	{
		fprintf(stderr, "trafficdb-trail: --order %s needs format version 2 or later (not --format-version 1)\n",
				o->by_time ? "time" : "space-time");
		return 2;
	}
	if (o->bucket_seconds != 0 && (o->order == TDB_TRAIL_ORDER_TRAIL || o->format_version == 1))
	{
		fprintf(stderr, "trafficdb-trail: --bucket-seconds applies to --order time, space-time and auto only, and not to --format-version 1 (by trail only)\n");
		return 2;
	}
	start = first_pass(&csv, &in, o, &pg);
	cid = csv_col(&csv, o->id);
	ct = csv_col(&csv, o->time);
	cx = csv_col(&csv, o->lon);
	cy = csv_col(&csv, o->lat);
	if (cid < 0 || ct < 0 || cx < 0 || cy < 0)
	{
		progress_end(&pg);
		fprintf(stderr, "trafficdb-trail: the CSV header lacks the column \"%s\" (see --id --time --lon --lat; it has:",
				cid < 0 ? o->id : ct < 0 ? o->time : cx < 0 ? o->lon : o->lat);
		for (int k = 0; k < csv.ncols; k++)
			fprintf(stderr, "%s %s", k ? "," : "", csv.names[k]);
		fprintf(stderr, ")\n");
		return 1;
	}
	given = calloc((size_t) csv.ncols, sizeof(char *));
	check_types(&csv, o, given);
	if (given[ct] || given[cx] || given[cy])
	{
		fprintf(stderr, "trafficdb-trail: --type %s=%s: the time, lon and lat columns have fixed types\n",
				csv.names[given[ct] ? ct : given[cx] ? cx : cy], given[ct] ? given[ct] : given[cx] ? given[cx] : given[cy]);
		return 2;
	}
	memset(&schema, 0, sizeof(schema));
	snprintf(schema.id_name, sizeof(schema.id_name), "%s", o->id);
	snprintf(schema.time_name, sizeof(schema.time_name), "%s", o->time);
	snprintf(schema.lon_name, sizeof(schema.lon_name), "%s", o->lon);
	snprintf(schema.lat_name, sizeof(schema.lat_name), "%s", o->lat);

	/* the trail id: int or string; "0412" keeps it a string */
	if (given[cid])
	{
		if (!csv_type_by_name(given[cid], &id_type) || (id_type != CSV_INT && id_type != CSV_STRING))
		{
			fprintf(stderr, "trafficdb-trail: --type %s=%s: a trail id is int or string\n", o->id, given[cid]);
			return 2;
		}
	}
	else
		id_type = csv.infer[cid].any && csv.infer[cid].all_int ? CSV_INT : CSV_STRING;
	schema.id_type = id_type == CSV_INT ? TDB_TRAIL_INT64 : TDB_TRAIL_STRING;

	for (int c = 0; c < csv.ncols; c++)
	{
		TdbTrailColumn *col;
		CsvType		t;

		if (c == cid || c == ct || c == cx || c == cy)
			continue;
		if (schema.ncolumns == TDB_TRAIL_MAX_COLUMNS)
		{
			fprintf(stderr, "trafficdb-trail: more than %d columns besides id, time, lon and lat\n", TDB_TRAIL_MAX_COLUMNS);
			return 1;
		}
		col = &schema.columns[schema.ncolumns];
		if (strlen(csv.names[c]) >= sizeof(col->name))
		{
			fprintf(stderr, "trafficdb-trail: column name \"%s\" is longer than %zu bytes\n", csv.names[c], sizeof(col->name) - 1);
			return 1;
		}
		snprintf(col->name, sizeof(col->name), "%s", csv.names[c]);
		if (given[c])
			csv_type_by_name(given[c], &t);
		else
			t = csv_infer_result(&csv.infer[c]);
		/* format version 1 has no boolean type: booleans are int64 1 and 0 there */
		col->type = t == CSV_BOOL ? (o->format_version >= 2 ? TDB_TRAIL_BOOL : TDB_TRAIL_INT64) :
			t == CSV_INT ? TDB_TRAIL_INT64 : t == CSV_FLOAT ? TDB_TRAIL_FLOAT64 : TDB_TRAIL_STRING;
		extra_type[schema.ncolumns] = t;
		extra[schema.ncolumns++] = c;
	}
	if (tdb_trail_writer_create(&schema, &wo, &w, &err) < 0)
		die_err(&err);
	times.unit = o->time_unit;
	times.window = &o->time_window;

	/* the second pass: the events */
	csv_rewind(&csv, in, start);
	while (csv_next(&csv, in, NULL) > 0)
	{
		char	  **row = csv.fields;
		TdbTrailEvent ev;
		int			need[4] = {cid, ct, cx, cy};
		char		terr[600];

		memset(&ev, 0, sizeof(ev));
		for (int k = 0; k < 4; k++)
			if (row[need[k]] == NULL)
				die_value(&csv, need[k], NULL, "(every event needs its trail id, time, lon and lat)");
		/* the same time rule as trafficdb-stream (tools/csvtime.c) */
		if (!tdb_time_column_parse(&times, row[ct], (long) csv.lineno, &ev.time_us, terr, sizeof(terr)))
		{
			progress_end(&pg);
			fprintf(stderr, "trafficdb-trail: CSV line %zu, column %s: %s\n", csv.lineno, csv.names[ct], terr);
			return 1;
		}
		/* written so that NaN, now a float, is refused too */
		if (!csv_parse_float(row[cx], &ev.lon) || !(ev.lon >= -180 && ev.lon <= 180))
			die_value(&csv, cx, row[cx], "is not a longitude (a number from -180 to 180)");
		if (!csv_parse_float(row[cy], &ev.lat) || !(ev.lat >= -90 && ev.lat <= 90))
			die_value(&csv, cy, row[cy], "is not a latitude (a number from -90 to 90)");
		if (id_type == CSV_INT)
		{
			if (!csv_parse_int(row[cid], &ev.key.i))
				die_value(&csv, cid, row[cid], csv_int_literal(row[cid]) ?
						  "is out of range for an integer id (int64: -9223372036854775808 to 9223372036854775807); "
						  "--type ID=string keeps its digits" : "is not an integer (--type ID=string for string ids)");
		}
		else
			ev.key.s = row[cid];
		for (int k = 0; k < schema.ncolumns; k++)
		{
			const char *s = row[extra[k]];
			bool		b;
			char		why[400];

			memset(&vals[k], 0, sizeof(vals[k]));
			vals[k].isnull = s == NULL;
			if (s == NULL)
				continue;
			switch (extra_type[k])
			{
				case CSV_INT:
					if (!csv_parse_int(s, &vals[k].i))
					{
						const char *n = csv.names[extra[k]];

						if (csv_int_literal(s))
							snprintf(why, sizeof(why), "is out of range for an integer column (int64: -9223372036854775808 "
									 "to 9223372036854775807); --type %s=float stores it rounded to a double, "
									 "--type %s=string keeps its digits", n, n);
						else
							snprintf(why, sizeof(why), "is not an integer (--type %s=string keeps such a column as text)", n);
						die_value(&csv, extra[k], s, why);
					}
					break;
				case CSV_FLOAT:
					if (!csv_parse_float(s, &vals[k].f))
						die_value(&csv, extra[k], s, csv_float_literal(s) ?
								  "is beyond a double's range (about 1.8e308; Infinity and -Infinity are written so)" :
								  "is not a number (NaN, Infinity and -Infinity are; --type COLUMN=string keeps such a column as text)");
					break;
				case CSV_BOOL:
					if (!csv_parse_bool(s, &b))
						die_value(&csv, extra[k], s, "is not a boolean (true/false, t/f, yes/no, on/off, 1/0)");
					vals[k].i = b ? 1 : 0;
					break;
				case CSV_STRING:
					vals[k].s = s;
					break;
			}
		}
		ev.values = vals;
		if (tdb_trail_writer_add(w, &ev, &err) < 0)
		{
			progress_end(&pg);
			fprintf(stderr, "trafficdb-trail: CSV line %zu: ", csv.lineno);
			die_err(&err);
		}
		if (++nrows % PROGRESS_ROWS == 0)
			progress_line(&pg, "%zu of %zu rows read, %u sorted runs spilled", nrows, csv.nrows, pg.runs);
	}
	if (nrows != csv.nrows)
	{
		fprintf(stderr, "trafficdb-trail: the CSV changed while it was read (%zu rows, then %zu)\n", csv.nrows, nrows);
		return 1;
	}
	if (in != stdin)
		fclose(in);				/* the input's copy: gone */
	output_open(&output, out, o);
	if (tdb_trail_writer_finish_to(w, fd_sink, &output, &len, &err) < 0)
	{
		progress_end(&pg);
		die_err(&err);
	}
	snprintf(note, sizeof(note), "%s", tdb_trail_writer_order_note(w));
	tdb_trail_writer_free(w);
	output_close(&output, len, o);
	progress_end(&pg);
	fprintf(stderr, "trafficdb-trail: wrote %s: %" PRIu64 " bytes, %zu events%s%s\n", out, len, nrows,
			note[0] ? ", " : "", note);
	for (int c = 0; c < csv.ncols; c++)
		free(csv.names[c]);
	free(csv.names);
	free(csv.infer);
	free(csv.line);
	free(given);
	return 0;
}
