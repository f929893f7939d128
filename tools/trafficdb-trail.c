/*
 * trafficdb-trail.c
 *	  Command-line tool for trail files: write one from CSV, show its footer,
 *	  query it (CSV out) through the pruning reader, verify every page.
 *
 *	  trafficdb-trail write OUT [--id C] [--time C] [--lon C] [--lat C]
 *	                  [--type COL=int|float|string|bool]... [--time-unit s|ms|us]
 *	                  [--page-bytes N] [--page-seconds N] [--part-mb N]
 *	                  [--format-version 1|2|3] [--order trail|space-time]
 *	                  [--bucket-seconds N] < data.csv
 *	  trafficdb-trail info FILE [--trails] [--pages]
 *	  trafficdb-trail cat FILE [--trail ID]... [--from T] [--to T]
 *	                  [--bbox xmin,ymin,xmax,ymax] [--limit N] [--stats]
 *	  trafficdb-trail verify FILE
 *	  trafficdb-trail mb s3://bucket		(create a bucket: tests, demo)
 *
 * FILE/OUT: a path, http(s)://... (read only) or s3://bucket/key.  For S3
 * the tool (not the library) takes credentials from AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, the endpoint from
 * AWS_ENDPOINT_URL or --endpoint (path-style addressing then) and the
 * region from AWS_REGION or --region.  Pager options: --block-size N,
 * --cache-dir DIR, --cache-mb N, --parallel N, --readahead BLOCKS (-1: off).
 *
 * CSV: a header row names the columns (a UTF-8 byte order mark before it is
 * skipped); fields may be quoted ("" escapes a quote); an empty field is
 * NULL.  Times are ISO 8601 ("2020-06-30T00:00:00" and "...Z" are UTC,
 * "2020-06-30 02:00:00.5+02:00" has an offset) or integers in --time-unit
 * s, ms or us (default auto: seconds below 1e11, milliseconds below 1e14,
 * else microseconds; one column keeps one unit).  The rule is
 * tools/csvtime.c's, shared with trafficdb-stream.
 * A page holds at most --page-bytes (64 KiB) and --page-seconds of one trail
 * (3600; 0 for no limit).  Extra columns' types are inferred (all true/false:
 * bool, all integers: int, all numbers: float, else string; a value with a
 * leading zero, "0412", keeps a column a string) unless --type says; the
 * trail id is int or string the same way.  Booleans are stored as booleans
 * (TDB_TRAIL_BOOL), or as int64 1/0 with --format-version 1 (which has no
 * boolean type).  Files are format version 3 unless --format-version 1
 * says (for readers built before version 2).  --order trail (the default)
 * keeps each page to one trail; --order space-time (version 2) makes pages
 * of one time bucket (--bucket-seconds, default 600) ordered by place, for
 * queries by area and time over many trails.  Every value that does not fit its
 * column's type, and every unknown --type column or type, is an error naming
 * the line, the column and the value: nothing is dropped or turned into NULL.
 * Typing is tools/csv_fields.c.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "csv_fields.h"
#include "csvtime.h"
#include "trail/pager.h"
#include "trail/trail.h"

static void
usage(void)
{
	fprintf(stderr,
			"usage: trafficdb-trail write OUT [--id C] [--time C] [--lon C] [--lat C] [--type COL=int|float|string|bool]... [--time-unit s|ms|us|auto]\n"
			"                       [--page-bytes N] [--page-seconds N] [--format-version 1|2|3] [--order trail|space-time] [--bucket-seconds N] < CSV\n"
			"       trafficdb-trail info FILE [--trails] [--pages]\n"
			"       trafficdb-trail cat FILE [--trail ID]... [--from T] [--to T] [--bbox x0,y0,x1,y1] [--limit N] [--stats]\n"
			"       trafficdb-trail verify FILE\n"
			"       trafficdb-trail mb s3://bucket\n"
			"FILE: path, http(s)://..., s3://bucket/key (AWS_* environment, --endpoint, --region)\n");
	exit(2);
}

static void
die_err(const TdbTrailError *e)
{
	fprintf(stderr, "trafficdb-trail: %s (%s)\n", e->msg, tdb_trail_strerror(e->code));
	exit(1);
}

/* ---- CSV ---------------------------------------------------------------- */

typedef struct Csv
{
	int			ncols;
	char	  **names;
	size_t		nrows;
	size_t		cap;
	char	 ***rows;			/* rows[r][c], NULL = empty field */
	size_t	   *lines;			/* line number of each row */
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

static void
csv_read(FILE *in, Csv *csv)
{
	char	   *line = NULL;
	size_t		cap = 0;
	ssize_t		len;
	char	   *fields[TDB_TRAIL_MAX_COLUMNS + 8];
	size_t		lineno = 0;

	memset(csv, 0, sizeof(*csv));
	while ((len = getline(&line, &cap, in)) >= 0)
	{
		int			n;

		lineno++;
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (lineno == 1 && csv_bom_length(line) > 0)
		{
			/* a UTF-8 byte order mark (spreadsheets write one) */
			memmove(line, line + 3, (size_t) len - 2);
			len -= 3;
		}
		if (len == 0)
			continue;
		n = csv_split(line, fields, TDB_TRAIL_MAX_COLUMNS + 8);
		if (n < 0)
		{
			fprintf(stderr, "trafficdb-trail: CSV line %zu: bad quoting or too many columns\n", lineno);
			exit(1);
		}
		if (csv->names == NULL)
		{
			csv->ncols = n;
			csv->names = malloc(sizeof(char *) * (size_t) n);
			for (int i = 0; i < n; i++)
				csv->names[i] = strdup(fields[i]);
			continue;
		}
		if (n != csv->ncols)
		{
			fprintf(stderr, "trafficdb-trail: CSV line %zu: %d fields, the header has %d\n",
					lineno, n, csv->ncols);
			exit(1);
		}
		if (csv->nrows == csv->cap)
		{
			csv->cap = csv->cap ? csv->cap * 2 : 4096;
			csv->rows = realloc(csv->rows, csv->cap * sizeof(char **));
			csv->lines = realloc(csv->lines, csv->cap * sizeof(size_t));
			if (csv->rows == NULL || csv->lines == NULL)
			{
				fprintf(stderr, "trafficdb-trail: out of memory\n");
				exit(1);
			}
		}
		csv->lines[csv->nrows] = lineno;
		csv->rows[csv->nrows] = malloc(sizeof(char *) * (size_t) n);
		for (int i = 0; i < n; i++)
			csv->rows[csv->nrows][i] = fields[i][0] ? strdup(fields[i]) : NULL;
		csv->nrows++;
	}
	free(line);
	if (csv->names == NULL)
	{
		fprintf(stderr, "trafficdb-trail: empty CSV (a header row is required)\n");
		exit(1);
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

static bool
parse_int(const char *s, int64_t *v)
{
	char	   *end;
	long long	x;

	errno = 0;
	x = strtoll(s, &end, 10);
	if (errno || end == s || *end)
		return false;
	*v = x;
	return true;
}

static void
format_time(int64_t us, char *out, size_t outlen)
{
	time_t		s = (time_t) (us >= 0 ? us / 1000000 : -((-us + 999999) / 1000000));
	int64_t		frac = us - (int64_t) s * 1000000;
	struct tm	tm;
	size_t		n;

	gmtime_r(&s, &tm);
	n = strftime(out, outlen, "%Y-%m-%dT%H:%M:%S", &tm);
	if (frac)
		snprintf(out + n, outlen - n, ".%06" PRId64 "Z", frac);
	else
		snprintf(out + n, outlen - n, "Z");
}

/* ---- options shared by commands ---------------------------------------- */

typedef struct Opts
{
	TdbPagerOptions pager;
	const char *id, *time, *lon, *lat;
	TdbTimeUnit time_unit;
	const char *types[TDB_TRAIL_MAX_COLUMNS + 1];
	int			ntypes;
	uint32_t	page_bytes;
	int64_t		page_seconds;
	int			format_version;
	TdbTrailOrder order;
	int64_t		bucket_seconds;	/* 0: not given */
	size_t		part_mb;
	int64_t		ids[4096];
	const char *sids[4096];
	int			nids;
	bool		has_from, has_to, has_bbox, stats, list_trails, list_pages;
	int64_t		from, to;
	double		bbox[4];
	uint64_t	limit;
} Opts;

static void
parse_opts(int argc, char **argv, int first, Opts *o)
{
	memset(o, 0, sizeof(*o));
	o->id = "id";
	o->time = "time";
	o->lon = "lon";
	o->lat = "lat";
	o->time_unit = TDB_TIME_AUTO;
	o->page_seconds = 3600;
	o->format_version = TDB_TRAIL_VERSION_DEFAULT;
	o->order = TDB_TRAIL_ORDER_TRAIL;
	o->pager.s3.access_key = getenv("AWS_ACCESS_KEY_ID");
	o->pager.s3.secret_key = getenv("AWS_SECRET_ACCESS_KEY");
	o->pager.s3.session_token = getenv("AWS_SESSION_TOKEN");
	o->pager.s3.region = getenv("AWS_REGION");
	o->pager.s3.endpoint = getenv("AWS_ENDPOINT_URL");
	for (int i = first; i < argc; i++)
	{
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

#define NEEDV() do { if (v == NULL) usage(); i++; } while (0)
		if (strcmp(a, "--id") == 0) { NEEDV(); o->id = v; }
		else if (strcmp(a, "--time") == 0) { NEEDV(); o->time = v; }
		else if (strcmp(a, "--lon") == 0) { NEEDV(); o->lon = v; }
		else if (strcmp(a, "--lat") == 0) { NEEDV(); o->lat = v; }
		else if (strcmp(a, "--type") == 0)
		{
			NEEDV();
			if (o->ntypes == TDB_TRAIL_MAX_COLUMNS + 1)
			{
				fprintf(stderr, "trafficdb-trail: more --type options than columns\n");
				exit(2);
			}
			o->types[o->ntypes++] = v;
		}
		else if (strcmp(a, "--time-unit") == 0)
		{
			NEEDV();
			if (!tdb_time_unit_parse(v, &o->time_unit))
			{
				fprintf(stderr, "trafficdb-trail: --time-unit %s: expected s, ms, us or auto\n", v);
				exit(2);
			}
		}
		else if (strcmp(a, "--page-bytes") == 0) { NEEDV(); o->page_bytes = (uint32_t) strtoul(v, NULL, 10); }
		else if (strcmp(a, "--page-seconds") == 0) { NEEDV(); o->page_seconds = strtoll(v, NULL, 10); }
		else if (strcmp(a, "--part-mb") == 0) { NEEDV(); o->part_mb = strtoul(v, NULL, 10); }
		else if (strcmp(a, "--format-version") == 0)
		{
			NEEDV();
			if (strcmp(v, "1") != 0 && strcmp(v, "2") != 0 && strcmp(v, "3") != 0)
			{
				fprintf(stderr, "trafficdb-trail: --format-version %s: expected 3 (the default), 2 or 1\n", v);
				exit(2);
			}
			o->format_version = atoi(v);
		}
		else if (strcmp(a, "--order") == 0)
		{
			NEEDV();
			if (strcmp(v, "trail") == 0)
				o->order = TDB_TRAIL_ORDER_TRAIL;
			else if (strcmp(v, "space-time") == 0)
				o->order = TDB_TRAIL_ORDER_SPACETIME;
			else
			{
				fprintf(stderr, "trafficdb-trail: --order %s: expected trail or space-time\n", v);
				exit(2);
			}
		}
		else if (strcmp(a, "--bucket-seconds") == 0)
		{
			int64_t		b;

			NEEDV();
			if (!csv_parse_int(v, &b) || b < 1 || b > 31 * 86400)
			{
				fprintf(stderr, "trafficdb-trail: --bucket-seconds %s: expected a whole number of seconds from 1 to 2678400 (31 days)\n", v);
				exit(2);
			}
			o->bucket_seconds = b;
		}
		else if (strcmp(a, "--endpoint") == 0) { NEEDV(); o->pager.s3.endpoint = v; }
		else if (strcmp(a, "--region") == 0) { NEEDV(); o->pager.s3.region = v; }
		else if (strcmp(a, "--block-size") == 0) { NEEDV(); o->pager.block_size = (uint32_t) strtoul(v, NULL, 10); }
		else if (strcmp(a, "--cache-dir") == 0) { NEEDV(); o->pager.cache_dir = v; }
		else if (strcmp(a, "--cache-mb") == 0) { NEEDV(); o->pager.cache_max_bytes = strtoull(v, NULL, 10) << 20; }
		else if (strcmp(a, "--readahead") == 0) { NEEDV(); o->pager.readahead_max = atoi(v); }
		else if (strcmp(a, "--parallel") == 0) { NEEDV(); o->pager.max_parallel = atoi(v); }
		else if (strcmp(a, "--trail") == 0)
		{
			NEEDV();
			if (o->nids >= 4096) usage();
			o->sids[o->nids] = v;
			if (!parse_int(v, &o->ids[o->nids])) o->ids[o->nids] = INT64_MIN;
			o->nids++;
		}
		else if (strcmp(a, "--from") == 0) { NEEDV(); if (!tdb_time_parse(v, o->time_unit, &o->from, NULL)) usage(); o->has_from = true; }
		else if (strcmp(a, "--to") == 0) { NEEDV(); if (!tdb_time_parse(v, o->time_unit, &o->to, NULL)) usage(); o->has_to = true; }
		else if (strcmp(a, "--bbox") == 0)
		{
			NEEDV();
			if (sscanf(v, "%lf,%lf,%lf,%lf", &o->bbox[0], &o->bbox[1], &o->bbox[2], &o->bbox[3]) != 4) usage();
			o->has_bbox = true;
		}
		else if (strcmp(a, "--limit") == 0) { NEEDV(); o->limit = strtoull(v, NULL, 10); }
		else if (strcmp(a, "--stats") == 0) o->stats = true;
		else if (strcmp(a, "--trails") == 0) o->list_trails = true;
		else if (strcmp(a, "--pages") == 0) o->list_pages = true;
		else
		{
			fprintf(stderr, "trafficdb-trail: unknown option %s\n", a);
			usage();
		}
#undef NEEDV
	}
	/* a custom endpoint is MinIO or alike: path-style addressing */
	o->pager.s3.path_style = o->pager.s3.endpoint != NULL;
}

/* ---- write -------------------------------------------------------------- */

/* A refusal of one CSV value: line, column and value, then what it is not. */
static void
die_value(const Csv *csv, size_t r, int c, const char *value, const char *what)
{
	if (value == NULL)
		fprintf(stderr, "trafficdb-trail: CSV line %zu, column %s: empty %s\n", csv->lines[r], csv->names[c], what);
	else
		fprintf(stderr, "trafficdb-trail: CSV line %zu, column %s: \"%s\" %s\n", csv->lines[r], csv->names[c],
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

static int
cmd_write(const char *out, Opts *o)
{
	Csv			csv;
	int			cid, ct, cx, cy;
	int			extra[TDB_TRAIL_MAX_COLUMNS];
	CsvType		extra_type[TDB_TRAIL_MAX_COLUMNS];
	const char **given;
	TdbTrailSchema schema;
	TdbTrailWriter *w;
	TdbTrailError err;
	TdbTrailValue vals[TDB_TRAIL_MAX_COLUMNS];
	TdbTrailWriterOptions wo = {
		.page_target_bytes = o->page_bytes,
		.page_max_span_us = o->page_seconds > 0 ? o->page_seconds * 1000000 : -1,
		.version = o->format_version,
		.order = o->order,
		.bucket_us = o->bucket_seconds * 1000000,
	};
	TdbTimeColumn times = {0};
	uint8_t    *buf;
	size_t		len;
	CsvType		id_type;

	if (o->order == TDB_TRAIL_ORDER_SPACETIME && o->format_version < 2)
	{
		fprintf(stderr, "trafficdb-trail: --order space-time needs format version 2 (not --format-version 1)\n");
		return 2;
	}
	if (o->bucket_seconds != 0 && o->order != TDB_TRAIL_ORDER_SPACETIME)
	{
		fprintf(stderr, "trafficdb-trail: --bucket-seconds applies to --order space-time only\n");
		return 2;
	}
	csv_read(stdin, &csv);
	cid = csv_col(&csv, o->id);
	ct = csv_col(&csv, o->time);
	cx = csv_col(&csv, o->lon);
	cy = csv_col(&csv, o->lat);
	if (cid < 0 || ct < 0 || cx < 0 || cy < 0)
	{
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
	{
		CsvInfer	in;

		csv_infer_init(&in);
		for (size_t r = 0; r < csv.nrows; r++)
			if (csv.rows[r][cid])
				csv_infer_add(&in, csv.rows[r][cid]);
		id_type = in.any && in.all_int ? CSV_INT : CSV_STRING;
	}
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
		{
			CsvInfer	in;

			csv_infer_init(&in);
			for (size_t r = 0; r < csv.nrows; r++)
				if (csv.rows[r][c])
					csv_infer_add(&in, csv.rows[r][c]);
			t = csv_infer_result(&in);
		}
		/* format version 1 has no boolean type: booleans are int64 1 and 0 there */
		col->type = t == CSV_BOOL ? (o->format_version >= 2 ? TDB_TRAIL_BOOL : TDB_TRAIL_INT64) :
			t == CSV_INT ? TDB_TRAIL_INT64 : t == CSV_FLOAT ? TDB_TRAIL_FLOAT64 : TDB_TRAIL_STRING;
		extra_type[schema.ncolumns] = t;
		extra[schema.ncolumns++] = c;
	}
	if (tdb_trail_writer_create(&schema, &wo, &w, &err) < 0)
		die_err(&err);
	times.unit = o->time_unit;
	for (size_t r = 0; r < csv.nrows; r++)
	{
		char	  **row = csv.rows[r];
		TdbTrailEvent ev;
		int			need[4] = {cid, ct, cx, cy};
		char		terr[300];

		memset(&ev, 0, sizeof(ev));
		for (int k = 0; k < 4; k++)
			if (row[need[k]] == NULL)
				die_value(&csv, r, need[k], NULL, "(every event needs its trail id, time, lon and lat)");
		/* the same time rule as trafficdb-stream (tools/csvtime.c) */
		if (!tdb_time_column_parse(&times, row[ct], (long) csv.lines[r], &ev.time_us, terr, sizeof(terr)))
		{
			fprintf(stderr, "trafficdb-trail: CSV line %zu, column %s: %s\n", csv.lines[r], csv.names[ct], terr);
			return 1;
		}
		if (!csv_parse_float(row[cx], &ev.lon) || ev.lon < -180 || ev.lon > 180)
			die_value(&csv, r, cx, row[cx], "is not a longitude (a number from -180 to 180)");
		if (!csv_parse_float(row[cy], &ev.lat) || ev.lat < -90 || ev.lat > 90)
			die_value(&csv, r, cy, row[cy], "is not a latitude (a number from -90 to 90)");
		if (id_type == CSV_INT)
		{
			if (!csv_parse_int(row[cid], &ev.key.i))
				die_value(&csv, r, cid, row[cid], "is not an integer (--type ID=string for string ids)");
		}
		else
			ev.key.s = row[cid];
		for (int k = 0; k < schema.ncolumns; k++)
		{
			const char *s = row[extra[k]];
			bool		b;

			memset(&vals[k], 0, sizeof(vals[k]));
			vals[k].isnull = s == NULL;
			if (s == NULL)
				continue;
			switch (extra_type[k])
			{
				case CSV_INT:
					if (!csv_parse_int(s, &vals[k].i))
						die_value(&csv, r, extra[k], s, "is not an integer (--type COLUMN=string keeps such a column as text)");
					break;
				case CSV_FLOAT:
					if (!csv_parse_float(s, &vals[k].f))
						die_value(&csv, r, extra[k], s, "is not a number (--type COLUMN=string keeps such a column as text)");
					break;
				case CSV_BOOL:
					if (!csv_parse_bool(s, &b))
						die_value(&csv, r, extra[k], s, "is not a boolean (true/false, t/f, yes/no, on/off, 1/0)");
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
			fprintf(stderr, "trafficdb-trail: CSV line %zu: ", csv.lines[r]);
			die_err(&err);
		}
	}
	if (tdb_trail_writer_finish(w, &buf, &len, &err) < 0)
		die_err(&err);
	if (tdb_trail_store(out, buf, len, &o->pager.s3, &o->pager.net, o->part_mb << 20, &err) < 0)
		die_err(&err);
	fprintf(stderr, "trafficdb-trail: wrote %s: %zu bytes, %zu events\n", out, len, csv.nrows);
	free(buf);
	free(given);
	tdb_trail_writer_free(w);
	return 0;
}

/* ---- read commands ------------------------------------------------------ */

static void
open_file(const char *url, Opts *o, TdbPager **p, TdbTrailReader **r)
{
	TdbTrailError err;

	o->pager.url = url;
	if (tdb_pager_open(&o->pager, p, &err) < 0 || tdb_trail_open(*p, r, &err) < 0)
		die_err(&err);
}

static const char *
type_name(TdbTrailType t)
{
	return t == TDB_TRAIL_INT64 ? "int64" : t == TDB_TRAIL_FLOAT64 ? "float64" :
		t == TDB_TRAIL_BOOL ? "bool" : "string";
}

static void
print_key(FILE *f, TdbTrailType t, const TdbTrailKey *k)
{
	if (t == TDB_TRAIL_STRING)
		fprintf(f, "%s", k->s);
	else
		fprintf(f, "%" PRId64, k->i);
}

static int
cmd_info(const char *url, Opts *o)
{
	TdbPager   *p;
	TdbTrailReader *r;
	const TdbTrailFooter *f;
	int64_t		tmin = INT64_MAX, tmax = INT64_MIN;
	int32_t		x0 = INT32_MAX, y0 = INT32_MAX, x1 = INT32_MIN, y1 = INT32_MIN;
	char		a[64], b[64];
	uint64_t	data = 0;

	open_file(url, o, &p, &r);
	{
		TdbTrailError err;

		/* version 3: the whole footer, not only its head */
		if (tdb_trail_need_all(r, &err) < 0)
			die_err(&err);
	}
	f = tdb_trail_footer(r);
	for (uint32_t i = 0; i < f->ntrails; i++)
	{
		const TdbTrailInfo *t = &f->trails[i];

		if (t->tmin < tmin) tmin = t->tmin;
		if (t->tmax > tmax) tmax = t->tmax;
		if (t->xmin < x0) x0 = t->xmin;
		if (t->ymin < y0) y0 = t->ymin;
		if (t->xmax > x1) x1 = t->xmax;
		if (t->ymax > y1) y1 = t->ymax;
	}
	for (uint32_t i = 0; i < f->npages; i++)
		data += f->pages[i].length;
	printf("file:        %s\n", url);
	printf("bytes:       %" PRIu64 " (pages %" PRIu64 ", footer %" PRIu64 ")\n", tdb_pager_size(p), data,
		   tdb_pager_size(p) - data - TDB_TRAIL_HEADER_SIZE - TDB_TRAIL_TRAILER_SIZE);
	printf("version:     %d\n", f->version);
	if (f->order == TDB_TRAIL_ORDER_SPACETIME)
		printf("order:       space-time (time buckets of %" PRId64 " s)\n", f->bucket_us / 1000000);
	else
		printf("order:       trail\n");
	printf("trails:      %u\npages:       %u\nevents:      %" PRIu64 "\nlexicon:     %u strings\n",
		   f->ntrails, f->npages, f->nevents, f->nstrings);
	if (f->ntrails)
	{
		format_time(tmin, a, sizeof(a));
		format_time(tmax, b, sizeof(b));
		printf("time:        %s .. %s\n", a, b);
		printf("bbox:        %.7f,%.7f,%.7f,%.7f\n", tdb_trail_coord_unfix(x0), tdb_trail_coord_unfix(y0),
			   tdb_trail_coord_unfix(x1), tdb_trail_coord_unfix(y1));
	}
	printf("columns:     %s (trail id, %s), %s (time), %s (lon), %s (lat)", f->schema.id_name,
		   type_name(f->schema.id_type), f->schema.time_name, f->schema.lon_name, f->schema.lat_name);
	for (int c = 0; c < f->schema.ncolumns; c++)
		printf(", %s (%s)", f->schema.columns[c].name, type_name(f->schema.columns[c].type));
	printf("\n");
	if (o->list_trails)
		for (uint32_t i = 0; i < f->ntrails; i++)
		{
			const TdbTrailInfo *t = &f->trails[i];

			print_key(stdout, f->schema.id_type, &t->key);
			format_time(t->tmin, a, sizeof(a));
			format_time(t->tmax, b, sizeof(b));
			printf(" pages=%u events=%" PRIu64 " time=%s..%s\n", t->npages, t->nevents, a, b);
		}
	/* each page: where it is, and (version 2) the lengths of its chunks */
	if (o->list_pages)
		for (uint32_t i = 0; i < f->npages; i++)
		{
			const TdbTrailPageInfo *pg = &f->pages[i];

			printf("page %u offset=%" PRIu64 " length=%u events=%u", i, pg->offset, pg->length, pg->nevents);
			if (pg->trail == UINT32_MAX)
				printf(" trails=several");
			else
			{
				printf(" trail=");
				print_key(stdout, f->schema.id_type, &f->trails[pg->trail].key);
			}
			if (pg->chunk_len != NULL)
			{
				printf(" chunks=core:%u,position:%u", pg->chunk_len[0], pg->chunk_len[1]);
				for (int c = 0; c < f->schema.ncolumns; c++)
					printf(",%s:%u", f->schema.columns[c].name, pg->chunk_len[2 + c]);
			}
			printf("\n");
		}
	tdb_trail_close(r);
	tdb_pager_close(p);
	return 0;
}

static void
csv_field(const char *s)
{
	if (strpbrk(s, ",\"\n") == NULL)
	{
		fputs(s, stdout);
		return;
	}
	putchar('"');
	for (; *s; s++)
	{
		if (*s == '"')
			putchar('"');
		putchar(*s);
	}
	putchar('"');
}

static int
cmd_cat(const char *url, Opts *o)
{
	TdbPager   *p;
	TdbTrailReader *r;
	const TdbTrailFooter *f;
	TdbTrailQuery q;
	TdbTrailScan *s;
	TdbTrailEvent ev;
	TdbTrailError err;
	int			rc;

	open_file(url, o, &p, &r);
	f = tdb_trail_footer(r);
	memset(&q, 0, sizeof(q));
	q.nids = o->nids;
	if (f->schema.id_type == TDB_TRAIL_STRING)
		q.ids_str = o->sids;
	else
	{
		for (int i = 0; i < o->nids; i++)
			if (o->ids[i] == INT64_MIN)
			{
				fprintf(stderr, "trafficdb-trail: --trail %s: trail ids of this file are integers\n", o->sids[i]);
				return 1;
			}
		q.ids_int = o->ids;
	}
	if (o->has_from || o->has_to)
	{
		q.has_time = true;
		q.time_from = o->has_from ? o->from : INT64_MIN;
		q.time_to = o->has_to ? o->to : INT64_MAX;
	}
	if (o->has_bbox)
	{
		q.has_bbox = true;
		q.xmin = o->bbox[0];
		q.ymin = o->bbox[1];
		q.xmax = o->bbox[2];
		q.ymax = o->bbox[3];
	}
	q.limit = o->limit;
	if (tdb_trail_scan_begin(r, &q, &s, &err) < 0)
		die_err(&err);
	printf("%s,%s,%s,%s", f->schema.id_name, f->schema.time_name, f->schema.lon_name, f->schema.lat_name);
	for (int c = 0; c < f->schema.ncolumns; c++)
		printf(",%s", f->schema.columns[c].name);
	printf("\n");
	while ((rc = tdb_trail_scan_next(s, &ev, &err)) > 0)
	{
		char		t[64];

		format_time(ev.time_us, t, sizeof(t));
		if (f->schema.id_type == TDB_TRAIL_STRING)
			csv_field(ev.key.s);
		else
			printf("%" PRId64, ev.key.i);
		printf(",%s,%.15g,%.15g", t, ev.lon, ev.lat);
		for (int c = 0; c < f->schema.ncolumns; c++)
		{
			const TdbTrailValue *v = &ev.values[c];

			putchar(',');
			if (v->isnull)
				continue;
			if (f->schema.columns[c].type == TDB_TRAIL_INT64)
				printf("%" PRId64, v->i);
			else if (f->schema.columns[c].type == TDB_TRAIL_BOOL)
				fputs(v->i ? "true" : "false", stdout);
			else if (f->schema.columns[c].type == TDB_TRAIL_FLOAT64)
				printf("%.17g", v->f);
			else
				csv_field(v->s);
		}
		putchar('\n');
	}
	if (rc < 0)
		die_err(&err);
	if (o->stats)
	{
		TdbTrailScanStats ss;
		TdbPagerStats ps;

		tdb_trail_scan_stats(s, &ss);
		tdb_pager_stats(p, &ps);
		fprintf(stderr,
				"pages: %" PRIu64 " read of %u (%" PRIu64 " candidates, %" PRIu64 " pruned); events %" PRIu64 "\n"
				"bytes: object %" PRIu64 ", network %" PRIu64 " in %" PRIu64 " requests (%" PRIu64 " retries), "
				"disk cache %" PRIu64 ", memory %" PRIu64 ", local %" PRIu64 "\n",
				ss.pages_read, f->npages, ss.pages_candidate, ss.pages_pruned, ss.events_returned,
				tdb_pager_size(p), ps.bytes_network, ps.requests, ps.retries, ps.bytes_disk_cache,
				ps.bytes_memory, ps.bytes_local);
	}
	tdb_trail_scan_end(s);
	tdb_trail_close(r);
	tdb_pager_close(p);
	return 0;
}

static int
cmd_verify(const char *url, Opts *o)
{
	TdbPager   *p;
	TdbTrailReader *r;
	TdbTrailError err;
	uint64_t	n;

	open_file(url, o, &p, &r);
	if (tdb_trail_verify(r, &n, &err) < 0)
		die_err(&err);
	printf("%s: ok, %u trails, %u pages, %" PRIu64 " events\n", url, tdb_trail_footer(r)->ntrails,
		   tdb_trail_footer(r)->npages, n);
	tdb_trail_close(r);
	tdb_pager_close(p);
	return 0;
}

static int
cmd_mb(const char *url, Opts *o)
{
	char		bucket[64];
	const char *key;
	TdbTrailError err;

	if (tdb_s3_parse_url(url, bucket, sizeof(bucket), &key) < 0)
	{
		fprintf(stderr, "trafficdb-trail: %s is not s3://bucket\n", url);
		return 1;
	}
	if (tdb_s3_create_bucket(&o->pager.s3, &o->pager.net, bucket, &err) < 0)
		die_err(&err);
	return 0;
}

int
main(int argc, char **argv)
{
	Opts		o;

	if (argc < 3)
		usage();
	parse_opts(argc, argv, 3, &o);
	if (strcmp(argv[1], "write") == 0)
		return cmd_write(argv[2], &o);
	if (strcmp(argv[1], "info") == 0)
		return cmd_info(argv[2], &o);
	if (strcmp(argv[1], "cat") == 0)
		return cmd_cat(argv[2], &o);
	if (strcmp(argv[1], "verify") == 0)
		return cmd_verify(argv[2], &o);
	if (strcmp(argv[1], "mb") == 0)
		return cmd_mb(argv[2], &o);
	usage();
	return 2;
}
