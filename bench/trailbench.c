/*
 * trailbench.c
 *	  Trail files read by ranges against the seed's way (download the whole
 *	  object, then read it locally), for bench/trails.sh.
 *
 *	  trailbench gen OUT TRAILS EVENTS_PER_TRAIL       synthetic file (seeded)
 *	  trailbench put FILE URL                          upload (multipart when large)
 *	  trailbench query URL QUERY BLOCK_SIZE MODE [CACHE_DIR]
 *	      QUERY: ids:N (N trails spread over the index), all,
 *	             box (a 0.02 degree box around a real event),
 *	             window (10 minutes in the middle of the file's time)
 *	      MODE:  range (pager with BLOCK_SIZE blocks, cold unless CACHE_DIR
 *	             holds blocks), whole (one download of the object into a
 *	             temporary file, then the same query on it), local (URL is
 *	             a path)
 *	  prints: first_row_ms total_ms events bytes_fetched requests pages_read
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
				first = -1;
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

		ids = malloc(sizeof(int64_t) * (size_t) k);
		for (int i = 0; i < k; i++)
			ids[i] = f->trails[(uint64_t) i * f->ntrails / (uint64_t) k].key.i;
		q.ids_int = ids;
		q.nids = k;
	}
	else if (strcmp(what, "box") == 0)
	{
		const TdbTrailPageInfo *pi = &f->pages[f->npages / 2];
		double		x = tdb_trail_coord_unfix(pi->xmin),
					y = tdb_trail_coord_unfix(pi->ymin);

		q.has_bbox = true;
		q.xmin = x;
		q.ymin = y;
		q.xmax = x + 0.02;
		q.ymax = y + 0.01;
	}
	else if (strcmp(what, "window") == 0)
	{
		int64_t		lo = INT64_MAX,
					hi = INT64_MIN;

		for (uint32_t t = 0; t < f->ntrails; t++)
		{
			lo = f->trails[t].tmin < lo ? f->trails[t].tmin : lo;
			hi = f->trails[t].tmax > hi ? f->trails[t].tmax : hi;
		}
		q.has_time = true;
		q.time_from = lo + (hi - lo) / 2;
		q.time_to = q.time_from + 600 * 1000000LL - 1;
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
	printf("%.2f %.2f %llu %llu %llu %llu\n", first < 0 ? now_ms() - t0 : first, now_ms() - t0,
		   (unsigned long long) n, (unsigned long long) (st.bytes_network + dl_bytes),
		   (unsigned long long) (st.requests + dl_requests), (unsigned long long) ss.pages_read);
	tdb_trail_scan_end(sc);
	tdb_trail_close(r);
	tdb_pager_close(p);
	if (tmp)
		unlink(tmp);
	free(ids);
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

int
main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "put") == 0)
		return put(argv[2], argv[3]);
	if (argc == 5 && strcmp(argv[1], "gen") == 0)
		return gen(argv[2], atoi(argv[3]), atoi(argv[4]));
	if ((argc == 6 || argc == 7) && strcmp(argv[1], "query") == 0)
		return query(argv[2], argv[3], (uint32_t) strtoul(argv[4], NULL, 10), argv[5],
					 argc == 7 ? argv[6] : NULL);
	fprintf(stderr, "usage: trailbench gen OUT TRAILS EVENTS_PER_TRAIL\n"
			"       trailbench query URL ids:N|all|box|window BLOCK_SIZE range|whole|local [CACHE_DIR]\n");
	return 2;
}
