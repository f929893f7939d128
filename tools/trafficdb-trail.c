/*
 * trafficdb-trail.c
 *	  Command-line tool for trail files: write one from CSV, show its footer,
 *	  query it (CSV out) through the pruning reader, verify every page.
 *
 *	  trafficdb-trail write OUT [--id C] [--time C] [--lon C] [--lat C]
 *	                  [--type COL=int|float|string|bool]... [--time-unit s|ms|us|ns|auto]
 *	                  [--time-window FROM..TO]
 *	                  [--page-bytes N] [--page-seconds N] [--part-mb N]
 *	                  [--format-version 1|2|3|4|5|6] [--order auto|trail|time|space-time]
 *	                  [--bucket-seconds N] [--memory-limit SIZE]
 *	                  [--temp-dir DIR] [--quiet] < data.csv
 *	  trafficdb-trail info FILE [--trails] [--pages]
 *	  trafficdb-trail cat FILE [--trail ID]... [--from T] [--to T]
 *	                  [--bbox xmin,ymin,xmax,ymax] [--limit N] [--columns A,B,...]
 *	                  [--no-position] [--stats]
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
 * s, ms, us or ns (default auto: seconds below 1e11, milliseconds below 1e14,
 * else microseconds; one column keeps one unit), and every time must fall in
 * --time-window FROM..TO (default 1971-01-01..2200-01-01; "..": any): a time
 * outside is refused naming the unit that would put it inside.  The rule is
 * tools/csvtime.c's, shared with trafficdb-stream.
 * A page holds at most --page-bytes (64 KiB) and --page-seconds of one trail
 * (3600; 0 for no limit).  Extra columns' types are inferred (all true/false:
 * bool, all integers: int, all numbers, NaN and [-]Infinity included: float,
 * else string; a value with a leading zero, "0412", keeps a column a string;
 * an integer beyond 64 bits is an error, not a float) unless --type says; the
 * trail id is int or string the same way.  Booleans are stored as booleans
 * (TDB_TRAIL_BOOL), or as int64 1/0 with --format-version 1 (which has no
 * boolean type).  Files are format version 6 (pages column-major) when
 * their pages total at most 64 KiB, else version 5, unless
 * --format-version 1 to 5 says (5: row-major whatever the size, for readers
 * built before version 6; for readers built before version 5: version 4 keeps each
 * trail's column summaries with its entry; version 3 gives each
 * trail pages of its own and has no patched deltas; version 2 stores
 * columns without the per-page encodings of version 3 and reads its footer
 * whole).  --order trail (the default) keeps each trail's events together,
 * small trails sharing pages in version 4; --order
 * space-time (version 2) makes pages of one time bucket (--bucket-seconds,
 * default 600) ordered by place, for queries by area and time over many
 * trails; --order time keeps each page to one trail and one bucket
 * (default 3600 s) and lays the pages out by bucket, then trail (a time
 * window reads one stretch of the file).  Every value that does not fit its
 * column's type, and every unknown --type column or type, is an error naming
 * the line, the column and the value: nothing is dropped or turned into NULL.
 * Typing is tools/csv_fields.c.  The write command is tools/trail_write.c:
 * it reads the CSV twice (types, then events; a pipe is copied to an
 * unnamed temporary file first) and keeps at most --memory-limit (default
 * 256MB) of events, sorting the rest in runs on disk (--temp-dir, else
 * $TMPDIR, else /tmp), with a progress line on a terminal unless --quiet.
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
#include "trail_write.h"

void
usage(void)
{
	fprintf(stderr,
			"usage: trafficdb-trail write OUT [--id C] [--time C] [--lon C] [--lat C] [--type COL=int|float|string|bool]...\n"
			"                       [--time-unit s|ms|us|ns|auto] [--time-window FROM..TO]\n"
			"                       [--page-bytes N] [--page-seconds N] [--format-version 1|2|3|4|5|6] [--order auto|trail|time|space-time] [--bucket-seconds N]\n"
			"                       [--memory-limit SIZE] [--temp-dir DIR] [--quiet] < CSV\n"
			"       trafficdb-trail info FILE [--trails] [--pages]\n"
			"       trafficdb-trail cat FILE [--trail ID]... [--from T] [--to T] [--bbox x0,y0,x1,y1] [--limit N]\n"
			"                       [--columns A,B,...] [--no-position] [--stats]\n"
			"       trafficdb-trail verify FILE\n"
			"       trafficdb-trail mb s3://bucket\n"
			"FILE: path, http(s)://..., s3://bucket/key (AWS_* environment, --endpoint, --region)\n"
			"Times: ISO 8601 or integers since 1970 in --time-unit (auto: |v| < 1e11 seconds, < 1e14 milliseconds,\n"
			"else microseconds; ns is never guessed), each in --time-window (default " TDB_TIME_WINDOW_DEFAULT ",\n"
			"up to but not including TO; \"..\": any time), else refused naming the unit that fits.\n");
	exit(2);
}

void
die_err(const TdbTrailError *e)
{
	fprintf(stderr, "trafficdb-trail: %s (%s)\n", e->msg, tdb_trail_strerror(e->code));
	exit(1);
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

/* "256MB", "1GB", "512kB", "300" (MB): bytes. */
static bool
parse_size(const char *s, size_t *out)
{
	char	   *end;
	unsigned long long v;
	size_t		mult = (size_t) 1 << 20;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return false;
	if (strcmp(end, "kB") == 0 || strcmp(end, "KB") == 0 || strcmp(end, "k") == 0 || strcmp(end, "K") == 0)
		mult = (size_t) 1 << 10;
	else if (strcmp(end, "GB") == 0 || strcmp(end, "G") == 0)
		mult = (size_t) 1 << 30;
	else if (*end != '\0' && strcmp(end, "MB") != 0 && strcmp(end, "M") != 0)
		return false;
	if (v > SIZE_MAX / mult)
		return false;
	*out = (size_t) v * mult;
	return true;
}

/*
 * A time as cat prints it, so that write reads it back: ISO 8601 for the
 * years 0 to 9999 (always 4 digits), else the integer of microseconds
 * (the automatic rule reads |v| >= 1e14 as microseconds).
 */
static void
format_time(int64_t us, char *out, size_t outlen)
{
	int64_t		frac = us % 1000000;
	time_t		s;
	struct tm	tm;

	/* rounding down, without negating INT64_MIN */
	if (frac < 0)
		frac += 1000000;
	s = (time_t) (us / 1000000 - (us % 1000000 < 0 ? 1 : 0));
	if (gmtime_r(&s, &tm) == NULL || tm.tm_year < -1900 || tm.tm_year > 9999 - 1900)
	{
		snprintf(out, outlen, "%" PRId64, us);
		return;
	}
	snprintf(out, outlen, "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
			 tm.tm_hour, tm.tm_min, tm.tm_sec);
	if (frac)
		snprintf(out + strlen(out), outlen - strlen(out), ".%06" PRId64 "Z", frac);
	else
		snprintf(out + strlen(out), outlen - strlen(out), "Z");
}

/* ---- options shared by commands ---------------------------------------- */


static void
parse_opts(int argc, char **argv, int first, Opts *o)
{
	memset(o, 0, sizeof(*o));
	o->id = "id";
	o->time = "time";
	o->lon = "lon";
	o->lat = "lat";
	o->time_unit = TDB_TIME_AUTO;
	tdb_time_window_parse(TDB_TIME_WINDOW_DEFAULT, &o->time_window, NULL, 0);
	o->page_seconds = TDB_TRAIL_PAGE_SPAN_DEFAULT_US / 1000000;
	o->format_version = TDB_TRAIL_VERSION_DEFAULT;
	o->order = TDB_TRAIL_ORDER_AUTO;
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
				fprintf(stderr, "trafficdb-trail: --time-unit %s: expected s, ms, us, ns or auto\n", v);
				exit(2);
			}
		}
		else if (strcmp(a, "--time-window") == 0)
		{
			char		why[200];

			NEEDV();
			if (!tdb_time_window_parse(v, &o->time_window, why, sizeof(why)))
			{
				fprintf(stderr, "trafficdb-trail: --time-window %s: %s\n", v, why);
				exit(2);
			}
		}
		else if (strcmp(a, "--page-bytes") == 0) { NEEDV(); o->page_bytes = (uint32_t) strtoul(v, NULL, 10); }
		else if (strcmp(a, "--page-seconds") == 0) { NEEDV(); o->page_seconds = strtoll(v, NULL, 10); }
		else if (strcmp(a, "--part-mb") == 0) { NEEDV(); o->part_mb = strtoul(v, NULL, 10); }
		else if (strcmp(a, "--memory-limit") == 0)
		{
			NEEDV();
			if (!parse_size(v, &o->memory_limit) || o->memory_limit < TDB_TRAIL_WRITER_MEMORY_MIN)
			{
				fprintf(stderr, "trafficdb-trail: --memory-limit %s: expected a size of at least 256kB (a number with kB, MB or GB; a bare number is MB)\n", v);
				exit(2);
			}
		}
		else if (strcmp(a, "--temp-dir") == 0) { NEEDV(); o->temp_dir = v; }
		else if (strcmp(a, "--quiet") == 0) o->quiet = true;
		else if (strcmp(a, "--format-version") == 0)
		{
			NEEDV();
			if (strlen(v) != 1 || v[0] < '1' || v[0] > '0' + TDB_TRAIL_VERSION)
			{
				fprintf(stderr, "trafficdb-trail: --format-version %s: expected 6 (the default: 5 when the pages pass 64 KiB), 5, 4, 3, 2 or 1\n", v);
				exit(2);
			}
			o->format_version = atoi(v);
		}
		else if (strcmp(a, "--order") == 0)
		{
			NEEDV();
			if (!tdb_trail_order_by_name(v, &o->order, &o->by_time))
			{
				fprintf(stderr, "trafficdb-trail: --order %s: expected auto, trail, time or space-time\n", v);
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
		else if (strcmp(a, "--columns") == 0) { NEEDV(); o->columns = v; }
		else if (strcmp(a, "--no-position") == 0) o->no_position = true;
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
	if (f->version >= 3)
	{
		TdbTrailFooterParts fp;
		uint64_t	footer = tdb_pager_size(p) - data - TDB_TRAIL_HEADER_SIZE - TDB_TRAIL_TRAILER_SIZE;

		tdb_trail_footer_parts(r, &fp);
		printf("footer:      head %" PRIu64 ", trail chunks %" PRIu64 " (%u)", footer - fp.trail_bytes -
			   fp.page_bytes - fp.summary_bytes - fp.lexicon_bytes, fp.trail_bytes, fp.trail_chunks);
		if (fp.summary_chunks > 0)
			printf(", summary chunks %" PRIu64 " (%u)", fp.summary_bytes, fp.summary_chunks);
		printf(", page chunks %" PRIu64 " (%u), lexicon %" PRIu64 "\n", fp.page_bytes, fp.page_chunks,
			   fp.lexicon_bytes);
	}
	printf("version:     %d%s\n", f->version, f->version >= 6 ? " (pages column-major)" : "");
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
			/* version 6: each chunk's offset too, as they lie in their columns */
			if (pg->chunk_len != NULL)
				for (int k = 0; k < 2 + f->schema.ncolumns; k++)
				{
					printf("%s%s:%u", k == 0 ? " chunks=" : ",", k == 0 ? "core" : k == 1 ? "position" :
						   f->schema.columns[k - 2].name, pg->chunk_len[k]);
					if (pg->chunk_off != NULL)
						printf("@%" PRIu64, pg->chunk_off[k]);
				}
			printf("\n");
		}
	tdb_trail_close(r);
	tdb_pager_close(p);
	return 0;
}

/* s as a CSV field: quoted when it holds a comma, a quote or a line break (CR too) */
static void
csv_field(const char *s)
{
	if (strpbrk(s, ",\"\n\r") == NULL)
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

/*
 * *skip: the skip_columns mask of every extra column not named in list
 * (names separated by commas; "" names none), and order[0, *n) the columns
 * named, in the order given (cat prints them so); false after a message
 * when a name is empty, repeated or not a column of the file.
 */
static bool
skip_mask(const TdbTrailFooter *f, const char *list, uint64_t *skip, int *order, int *n)
{
	uint64_t	keep = 0;

	*n = 0;
	/* "" names none; else each name up to the last, the one no comma follows */
	for (const char *p = list; *list != '\0';)
	{
		size_t		len = strcspn(p, ",");
		int			c = 0;

		if (len == 0)
		{
			fprintf(stderr, "trafficdb-trail: --columns: an empty name in \"%s\" (names separated by commas, e.g. sog,cog; \"\" for none)\n", list);
			return false;
		}
		while (c < f->schema.ncolumns &&
			   (strlen(f->schema.columns[c].name) != len || strncmp(f->schema.columns[c].name, p, len) != 0))
			c++;
		if (c == f->schema.ncolumns)
		{
			fprintf(stderr, "trafficdb-trail: --columns: %.*s is not an extra column of this file\n", (int) len, p);
			return false;
		}
		if ((keep >> c) & 1)
		{
			fprintf(stderr, "trafficdb-trail: --columns: %.*s is named twice\n", (int) len, p);
			return false;
		}
		keep |= (uint64_t) 1 << c;
		order[(*n)++] = c;
		if (p[len] == '\0')
			break;
		p += len + 1;
	}
	*skip = ~keep;
	return true;
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
	int			cols[TDB_TRAIL_MAX_COLUMNS],
				ncols;
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
	/* a projection: only the chunks of what is printed are read (version 2 on) */
	q.skip_position = o->no_position;
	if (o->columns == NULL)
		for (ncols = 0; ncols < f->schema.ncolumns; ncols++)
			cols[ncols] = ncols;
	else if (!skip_mask(f, o->columns, &q.skip_columns, cols, &ncols))
		return 2;
	if (tdb_trail_scan_begin(r, &q, &s, &err) < 0)
		die_err(&err);
	/* the header quoted as the rows are: a name may hold a comma or a quote */
	csv_field(f->schema.id_name);
	putchar(',');
	csv_field(f->schema.time_name);
	putchar(',');
	csv_field(f->schema.lon_name);
	putchar(',');
	csv_field(f->schema.lat_name);
	for (int k = 0; k < ncols; k++)
	{
		putchar(',');
		csv_field(f->schema.columns[cols[k]].name);
	}
	putchar('\n');
	while ((rc = tdb_trail_scan_next(s, &ev, &err)) > 0)
	{
		char		t[64];

		format_time(ev.time_us, t, sizeof(t));
		if (f->schema.id_type == TDB_TRAIL_STRING)
			csv_field(ev.key.s);
		else
			printf("%" PRId64, ev.key.i);
		if (o->no_position)
			printf(",%s,,", t);
		else
			printf(",%s,%.15g,%.15g", t, ev.lon, ev.lat);
		for (int k = 0; k < ncols; k++)
		{
			int			c = cols[k];
			const TdbTrailValue *v = &ev.values[c];

			putchar(',');
			if (v->isnull)
				continue;
			if (f->schema.columns[c].type == TDB_TRAIL_INT64)
				printf("%" PRId64, v->i);
			else if (f->schema.columns[c].type == TDB_TRAIL_BOOL)
				fputs(v->i ? "true" : "false", stdout);
			else if (f->schema.columns[c].type == TDB_TRAIL_FLOAT64 && !isfinite(v->f))
				fputs(isnan(v->f) ? "NaN" : v->f > 0 ? "Infinity" : "-Infinity", stdout);	/* as PostgreSQL spells them */
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
