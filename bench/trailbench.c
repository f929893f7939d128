/*
 * trailbench.c
 *	  Trail files read by ranges against the seed's way (download the whole
 *	  object, then read it locally), for bench/trails.sh.
 *
 *	  trailbench gen OUT TRAILS EVENTS_PER_TRAIL       synthetic file (seeded)
 *	  trailbench put FILE URL                          upload (multipart when large)
 *	  trailbench probe FILE                            the box and window queries
 *	      for this file, as QUERY arguments: a 0.02 x 0.01 degree box centred
 *	      on a real event (the middle event of the middle trail) and the 10
 *	      minutes from the middle of the file's time span
 *	  trailbench query URL QUERY BLOCK_SIZE MODE [CACHE_DIR]
 *	      QUERY: ids:N (N trails spread evenly over the index), all,
 *	             box:XMIN,YMIN,XMAX,YMAX (degrees), window:FROM,TO
 *	             (microseconds, inclusive), box and window (what probe
 *	             prints, computed from the footer of URL)
 *	      MODE:  range (pager with BLOCK_SIZE blocks, cold unless CACHE_DIR
 *	             holds blocks), whole (one download of the object into a
 *	             temporary file, then the same query on it), local (URL is
 *	             a path)
 *	  prints: first_row_ms total_ms events bytes_network requests pages_read
 *	          bytes_disk_cache bytes_memory bytes_local
 *	  (in whole mode bytes_network and requests include the download)
 *	  trailbench warm URL BLOCK_SIZE REVALIDATE_SECONDS N
 *	      N + 1 queries of one trail in one process sharing one LRU, each
 *	      opening the file as an FDW query does (revalidate_interval
 *	      REVALIDATE_SECONDS); the first fills the cache.  prints: the median
 *	      ms of the N warm queries, their requests, their bytes_network
 *	  trailbench lookups URL BLOCK_SIZE K
 *	      what a nested loop of K ids does: one open, then K scans of one
 *	      trail each (ids spread evenly over the index), cold.  prints:
 *	      total_ms events bytes_network requests
 *
 * S3 settings come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
 * AWS_ENDPOINT_URL, as the CLI takes them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>

#include "trail/cache.h"
#include "trail/pager.h"
#include "trail/trail.h"

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void
die(const char *what, const TdbTrailError *e)
{
	fprintf(stderr, "trailbench: %s: %s\n", what, e ? e->msg : "");
	exit(1);
}

static uint64_t
rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * Vehicles driving around a city for a day: a report every 1-10 s, a
 * heading, a speed, a road class from a small lexicon.
 */
static int
gen(const char *out, int ntrails, int per)
{
	TdbTrailSchema sc;
	TdbTrailWriterOptions wo;
	TdbTrailWriter *w;
	TdbTrailError err;
	TdbTrailValue vals[3];
	uint64_t	s = 0x9E3779B97F4A7C15ull;
	static const char *classes[] = {"motorway", "primary", "secondary", "residential", "service"};
	uint8_t    *buf;
	size_t		len;
	TdbS3Config s3;
	TdbNetOptions net;

	memset(&sc, 0, sizeof(sc));
	strcpy(sc.id_name, "vehicle");
	sc.id_type = TDB_TRAIL_INT64;
	strcpy(sc.time_name, "time");
	strcpy(sc.lon_name, "lon");
	strcpy(sc.lat_name, "lat");
	sc.ncolumns = 3;
	strcpy(sc.columns[0].name, "speed");
	sc.columns[0].type = TDB_TRAIL_FLOAT64;
	strcpy(sc.columns[1].name, "heading");
	sc.columns[1].type = TDB_TRAIL_INT64;
	strcpy(sc.columns[2].name, "road_class");
	sc.columns[2].type = TDB_TRAIL_STRING;
	memset(&wo, 0, sizeof(wo));
	if (tdb_trail_writer_create(&sc, &wo, &w, &err) < 0)
		die("writer", &err);
	for (int v = 0; v < ntrails; v++)
	{
		double		lon = 24.6 + (rng_next(&s) % 100000) / 100000.0 * 0.6;
		double		lat = 60.1 + (rng_next(&s) % 100000) / 100000.0 * 0.3;
		int64_t		t = 1709251200000000LL + (int64_t) (rng_next(&s) % 43200) * 1000000;
		double		heading = rng_next(&s) % 360;

		for (int i = 0; i < per; i++)
		{
			TdbTrailEvent ev;
			double		speed = 5 + (rng_next(&s) % 2500) / 100.0;

			heading += (double) ((int) (rng_next(&s) % 41) - 20);
			lon += speed * 1e-6 * cos(heading * M_PI / 180);
			lat += speed * 0.5e-6 * sin(heading * M_PI / 180);
			t += 1000000 * (1 + (int64_t) (rng_next(&s) % 10));
			vals[0].isnull = false;
			vals[0].f = round(speed * 10) / 10;
			vals[1].isnull = false;
			vals[1].i = ((int64_t) heading % 360 + 360) % 360;
			vals[2].isnull = rng_next(&s) % 20 == 0;
			vals[2].s = classes[rng_next(&s) % 5];
			ev.key.i = 1000000 + v;
			ev.key.s = NULL;
			ev.time_us = t;
			ev.lon = lon;
			ev.lat = lat;
			ev.values = vals;
			if (tdb_trail_writer_add(w, &ev, &err) < 0)
				die("add", &err);
		}
		if (v % 1000 == 999)
			fprintf(stderr, "trailbench gen: %d of %d trails\r", v + 1, ntrails);
	}
	fprintf(stderr, "\n");
	if (tdb_trail_writer_finish(w, &buf, &len, &err) < 0)
		die("finish", &err);
	tdb_trail_writer_free(w);
	{
		struct rusage ru;

		getrusage(RUSAGE_SELF, &ru);
		fprintf(stderr, "trailbench gen: %zu bytes, peak RSS %ld MB\n", len, ru.ru_maxrss / 1024);
	}
	memset(&s3, 0, sizeof(s3));
	memset(&net, 0, sizeof(net));
	if (tdb_trail_store(out, buf, len, &s3, &net, 0, &err) < 0)
		die("store", &err);
	printf("%zu\n", len);
	free(buf);
	return 0;
}

static void
s3_from_env(TdbS3Config *s3)
{
	memset(s3, 0, sizeof(*s3));
	s3->access_key = getenv("AWS_ACCESS_KEY_ID");
	s3->secret_key = getenv("AWS_SECRET_ACCESS_KEY");
	s3->endpoint = getenv("AWS_ENDPOINT_URL");
	s3->region = getenv("AWS_REGION");
	s3->path_style = s3->endpoint != NULL;
}

/* box:XMIN,YMIN,XMAX,YMAX or window:FROM,TO into q; false if neither */
static bool
parse_query(const char *what, TdbTrailQuery *q)
{
	long long	t0,
				t1;

	if (sscanf(what, "box:%lf,%lf,%lf,%lf", &q->xmin, &q->ymin, &q->xmax, &q->ymax) == 4)
		return q->has_bbox = true;
	if (sscanf(what, "window:%lld,%lld", &t0, &t1) == 2)
	{
		q->time_from = t0;
		q->time_to = t1;
		return q->has_time = true;
	}
	return false;
}

/*
 * The box and window queries of a file, as query arguments: a 0.02 x 0.01
 * degree box centred on the middle event of the middle trail (a real
 * position), and the 10 minutes from the middle of the file's time span.
 */
static void
probe_queries(TdbTrailReader *r, char *box, size_t boxlen, char *window, size_t windowlen)
{
	const TdbTrailFooter *f = tdb_trail_footer(r);
	TdbTrailQuery q;
	TdbTrailScan *sc;
	TdbTrailError err;
	TdbTrailEvent ev;
	const TdbTrailInfo *mid;
	uint64_t	n = 0;
	int64_t		lo = INT64_MAX,
				hi = INT64_MIN;
	double		x = 0,
				y = 0;
	int			rc;

	if (f->ntrails == 0)
		die("probe", NULL);
	if (tdb_trail_need_all(r, &err) < 0)	/* version 3: every trail's entry */
		die("probe", &err);
	mid = &f->trails[f->ntrails / 2];
	memset(&q, 0, sizeof(q));
	if (f->schema.id_type == TDB_TRAIL_STRING)
	{
		q.ids_str = &mid->key.s;
		q.nids = 1;
	}
	else
	{
		q.ids_int = &mid->key.i;
		q.nids = 1;
	}
	/* two passes over one trail: count its events, then take the middle one */
	for (int pass = 0; pass < 2; pass++)
	{
		uint64_t	i = 0;

		if (tdb_trail_scan_begin(r, &q, &sc, &err) < 0)
			die("probe", &err);
		while ((rc = tdb_trail_scan_next(sc, &ev, &err)) > 0)
		{
			if (pass == 1 && i == n / 2)
			{
				x = ev.lon;
				y = ev.lat;
			}
			i++;
		}
		if (rc < 0)
			die("probe", &err);
		tdb_trail_scan_end(sc);
		n = i;
	}
	for (uint32_t t = 0; t < f->ntrails; t++)
	{
		lo = f->trails[t].tmin < lo ? f->trails[t].tmin : lo;
		hi = f->trails[t].tmax > hi ? f->trails[t].tmax : hi;
	}
	snprintf(box, boxlen, "box:%.7f,%.7f,%.7f,%.7f", x - 0.01, y - 0.005, x + 0.01, y + 0.005);
	snprintf(window, windowlen, "window:%lld,%lld", (long long) (lo + (hi - lo) / 2),
			 (long long) (lo + (hi - lo) / 2 + 600 * 1000000LL - 1));
}

/* Download the whole object into a temporary file: the baseline. */
static char *
download(const char *url, uint64_t *bytes, uint64_t *requests)
{
	TdbPagerOptions po;
	TdbPager   *p;
	TdbTrailError err;
	TdbPagerStats st;
	static char path[] = "/var/tmp/trailbench.XXXXXX";
	uint8_t    *buf;
	uint64_t	size;
	int			fd;

	memset(&po, 0, sizeof(po));
	po.url = url;
	s3_from_env(&po.s3);
	po.block_size = 16u << 20;
	po.max_parallel = 4;
	po.lru_bytes = 1;			/* nothing kept: this is a download */
	if (tdb_pager_open(&po, &p, &err) < 0)
		die("open for download", &err);
	size = tdb_pager_size(p);
	buf = malloc(size);
	/* one read of everything: 16 MB range GETs, four at a time */
	if (tdb_pager_read(p, 0, size, buf, &err) < 0)
		die("download", &err);
	tdb_pager_stats(p, &st);
	*bytes = st.bytes_network;
	*requests = st.requests;
	tdb_pager_close(p);
	fd = mkstemp(path);
	if (fd < 0 || write(fd, buf, size) != (ssize_t) size)
		die("write temporary file", NULL);
	close(fd);
	free(buf);
	return path;
}

static int
query(const char *url, const char *what, uint32_t bs, const char *mode, const char *cache)
{
	double		t0 = now_ms(),
				first = -1,
				total;
	TdbPagerOptions po;
	TdbPager   *p;
	TdbTrailReader *r;
	TdbTrailScan *sc;
	TdbTrailQuery q;
	TdbTrailError err;
	TdbTrailEvent ev;
	TdbTrailScanStats ss;
	TdbPagerStats st;
	const TdbTrailFooter *f;
	uint64_t	n = 0,
				dl_bytes = 0,
				dl_requests = 0;
	char	   *tmp = NULL;
	int64_t    *ids = NULL;
	const char **sids = NULL;
	int			rc;

	if (strcmp(mode, "whole") == 0)
		url = tmp = download(url, &dl_bytes, &dl_requests);
	memset(&po, 0, sizeof(po));
	po.url = url;
	s3_from_env(&po.s3);
	po.block_size = bs;
	po.cache_dir = cache;
	if (tdb_pager_open(&po, &p, &err) < 0 || tdb_trail_open(p, &r, &err) < 0)
		die("open", &err);
	f = tdb_trail_footer(r);
	memset(&q, 0, sizeof(q));
	if (strncmp(what, "ids:", 4) == 0)
	{
		int			k = atoi(what + 4);

		if (k < 1 || (uint32_t) k > f->ntrails)
			k = (int) f->ntrails;
		ids = malloc(sizeof(int64_t) * (size_t) k);
		sids = malloc(sizeof(char *) * (size_t) k);
		for (int i = 0; i < k; i++)
		{
			uint32_t	t = (uint32_t) ((uint64_t) i * f->ntrails / (uint64_t) k);
			const TdbTrailKey *key;

			/* version 3: the chunk of that trail (counted in the query's bytes) */
			if (tdb_trail_need_trails(r, t, t + 1, &err) < 0)
				die("open", &err);
			key = &f->trails[t].key;

			ids[i] = key->i;
			sids[i] = key->s;
		}
		if (f->schema.id_type == TDB_TRAIL_STRING)
			q.ids_str = sids;
		else
			q.ids_int = ids;
		q.nids = k;
	}
	else if (strcmp(what, "box") == 0 || strcmp(what, "window") == 0)
	{
		/* computed here from the footer: reads the middle trail first */
		char		b[128],
					wnd[128];

		probe_queries(r, b, sizeof(b), wnd, sizeof(wnd));
		parse_query(strcmp(what, "box") == 0 ? b : wnd, &q);
	}
	else if (strcmp(what, "all") != 0 && !parse_query(what, &q))
	{
		fprintf(stderr, "trailbench: unknown query %s\n", what);
		exit(2);
	}
	if (tdb_trail_scan_begin(r, &q, &sc, &err) < 0)
		die("scan", &err);
	while ((rc = tdb_trail_scan_next(sc, &ev, &err)) > 0)
	{
		if (n++ == 0)
			first = now_ms() - t0;
	}
	if (rc < 0)
		die("read", &err);
	tdb_trail_scan_stats(sc, &ss);
	tdb_pager_stats(p, &st);
	total = now_ms() - t0;
	printf("%.2f %.2f %llu %llu %llu %llu %llu %llu %llu\n", first < 0 ? total : first, total,
		   (unsigned long long) n, (unsigned long long) (st.bytes_network + dl_bytes),
		   (unsigned long long) (st.requests + dl_requests), (unsigned long long) ss.pages_read,
		   (unsigned long long) st.bytes_disk_cache, (unsigned long long) st.bytes_memory,
		   (unsigned long long) st.bytes_local);
	tdb_trail_scan_end(sc);
	tdb_trail_close(r);
	tdb_pager_close(p);
	if (tmp)
		unlink(tmp);
	free(ids);
	free(sids);
	return 0;
}

static int
probe(const char *path)
{
	TdbPagerOptions po;
	TdbPager   *p;
	TdbTrailReader *r;
	TdbTrailError err;
	char		box[128],
				window[128];

	memset(&po, 0, sizeof(po));
	po.url = path;
	if (tdb_pager_open(&po, &p, &err) < 0 || tdb_trail_open(p, &r, &err) < 0)
		die(path, &err);
	probe_queries(r, box, sizeof(box), window, sizeof(window));
	printf("%s %s\n", box, window);
	tdb_trail_close(r);
	tdb_pager_close(p);
	return 0;
}

static int
put(const char *path, const char *url)
{
	FILE	   *fp = fopen(path, "rb");
	TdbS3Config s3;
	TdbNetOptions net;
	TdbTrailError err;
	uint8_t    *buf;
	long		len;

	if (fp == NULL || fseek(fp, 0, SEEK_END) != 0 || (len = ftell(fp)) < 0)
		die(path, NULL);
	rewind(fp);
	buf = malloc((size_t) len + 1);
	if (fread(buf, 1, (size_t) len, fp) != (size_t) len)
		die(path, NULL);
	fclose(fp);
	s3_from_env(&s3);
	memset(&net, 0, sizeof(net));
	if (tdb_trail_store(url, buf, (size_t) len, &s3, &net, 0, &err) < 0)
		die("upload", &err);
	free(buf);
	return 0;
}

static int
dbl_cmp(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

/* One scan of trail number t of the footer; returns the events. */
static uint64_t
scan_one(TdbTrailReader *r, uint32_t t)
{
	const TdbTrailFooter *f = tdb_trail_footer(r);
	const TdbTrailKey *key;
	TdbTrailQuery q;
	TdbTrailScan *sc;
	TdbTrailEvent ev;
	TdbTrailError err;

	if (tdb_trail_need_trails(r, t, t + 1, &err) < 0)	/* version 3: its chunk */
		die("scan", &err);
	key = &f->trails[t].key;
	uint64_t	n = 0;
	int			rc;

	memset(&q, 0, sizeof(q));
	q.nids = 1;
	if (f->schema.id_type == TDB_TRAIL_STRING)
		q.ids_str = &key->s;
	else
		q.ids_int = &key->i;
	if (tdb_trail_scan_begin(r, &q, &sc, &err) < 0)
		die("scan", &err);
	while ((rc = tdb_trail_scan_next(sc, &ev, &err)) > 0)
		n++;
	if (rc < 0)
		die("read", &err);
	tdb_trail_scan_end(sc);
	return n;
}

static int
warm(const char *url, uint32_t bs, int revalidate, int nq)
{
	TdbBlockLru *lru = tdb_lru_create(64u << 20);
	double	   *ms = calloc((size_t) nq + 1, sizeof(double));
	uint64_t	requests = 0,
				bytes = 0;

	for (int i = 0; i <= nq; i++)
	{
		TdbPagerOptions po;
		TdbPager   *p;
		TdbTrailReader *r;
		TdbTrailError err;
		TdbPagerStats st;
		double		t0 = now_ms();

		memset(&po, 0, sizeof(po));
		po.url = url;
		s3_from_env(&po.s3);
		po.block_size = bs;
		po.lru = lru;
		po.revalidate_seconds = revalidate;
		if (tdb_pager_open(&po, &p, &err) < 0 || tdb_trail_open(p, &r, &err) < 0)
			die("open", &err);
		scan_one(r, tdb_trail_footer(r)->ntrails / 2);
		tdb_pager_stats(p, &st);
		ms[i] = now_ms() - t0;
		if (i > 0)
		{
			requests += st.requests;
			bytes += st.bytes_network;
		}
		tdb_trail_close(r);
		tdb_pager_close(p);
	}
	qsort(ms + 1, (size_t) nq, sizeof(double), dbl_cmp);
	printf("%.3f %.2f %.0f\n", ms[1 + nq / 2], (double) requests / nq, (double) bytes / nq);
	free(ms);
	tdb_lru_free(lru);
	return 0;
}

static int
lookups(const char *url, uint32_t bs, int k)
{
	TdbPagerOptions po;
	TdbPager   *p;
	TdbTrailReader *r;
	TdbTrailError err;
	TdbPagerStats st;
	const TdbTrailFooter *f;
	double		t0 = now_ms();
	uint64_t	n = 0;

	memset(&po, 0, sizeof(po));
	po.url = url;
	s3_from_env(&po.s3);
	po.block_size = bs;
	if (tdb_pager_open(&po, &p, &err) < 0 || tdb_trail_open(p, &r, &err) < 0)
		die("open", &err);
	f = tdb_trail_footer(r);
	if (k < 1 || (uint32_t) k > f->ntrails)
		k = (int) f->ntrails;
	for (int i = 0; i < k; i++)
		n += scan_one(r, (uint32_t) ((uint64_t) i * f->ntrails / (uint64_t) k + f->ntrails / (2 * (uint64_t) k)));
	tdb_pager_stats(p, &st);
	printf("%.2f %llu %llu %llu\n", now_ms() - t0, (unsigned long long) n,
		   (unsigned long long) st.bytes_network, (unsigned long long) st.requests);
	tdb_trail_close(r);
	tdb_pager_close(p);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "put") == 0)
		return put(argv[2], argv[3]);
	if (argc == 3 && strcmp(argv[1], "probe") == 0)
		return probe(argv[2]);
	if (argc == 5 && strcmp(argv[1], "gen") == 0)
		return gen(argv[2], atoi(argv[3]), atoi(argv[4]));
	if ((argc == 6 || argc == 7) && strcmp(argv[1], "query") == 0)
		return query(argv[2], argv[3], (uint32_t) strtoul(argv[4], NULL, 10), argv[5],
					 argc == 7 ? argv[6] : NULL);
	if (argc == 6 && strcmp(argv[1], "warm") == 0)
		return warm(argv[2], (uint32_t) strtoul(argv[3], NULL, 10), atoi(argv[4]), atoi(argv[5]));
	if (argc == 5 && strcmp(argv[1], "lookups") == 0)
		return lookups(argv[2], (uint32_t) strtoul(argv[3], NULL, 10), atoi(argv[4]));
	fprintf(stderr, "usage: trailbench gen OUT TRAILS EVENTS_PER_TRAIL\n"
			"       trailbench put FILE URL\n"
			"       trailbench probe FILE\n"
			"       trailbench query URL ids:N|all|box|window|box:X0,Y0,X1,Y1|window:T0,T1 BLOCK_SIZE\n"
			"                        range|whole|local [CACHE_DIR]\n"
			"       trailbench warm URL BLOCK_SIZE REVALIDATE_SECONDS N\n"
			"       trailbench lookups URL BLOCK_SIZE K\n");
	return 2;
}
