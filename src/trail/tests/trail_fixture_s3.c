/*
 * trail_fixture_s3.c
 *	  Helpers of the tests against MinIO (trail_fixture_s3.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http.h"
#include "pager.h"
#include "trail_fixture.h"
#include "trail_fixture_s3.h"
#include "trail_unit.h"

TdbNetOptions
fx_fast_net(void)
{
	TdbNetOptions n;

	memset(&n, 0, sizeof(n));
	n.max_retries = 4;
	n.retry_base_ms = 20;
	n.retry_max_ms = 200;
	n.low_speed_bytes = 1024;
	n.low_speed_seconds = 2;
	return n;
}

void
fx_pager_options(TdbPagerOptions *o, const TdbS3Config *c, const char *url)
{
	memset(o, 0, sizeof(*o));
	o->url = url;
	o->s3 = *c;
	o->net = fx_fast_net();
	o->block_size = 16384;
}

bool
fx_ensure_bucket(const TdbS3Config *c)
{
	TdbTrailError err;
	TdbNetOptions n = fx_fast_net();

	if (tdb_s3_create_bucket(c, &n, BUCKET, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "create bucket: %s", err.msg);
		return false;
	}
	return true;
}

bool
fx_put(const TdbS3Config *c, const char *key, const void *buf, size_t len, size_t part)
{
	char		url[256];
	TdbTrailError err;
	TdbNetOptions n = fx_fast_net();

	snprintf(url, sizeof(url), "s3://%s/%s", BUCKET, key);
	if (tdb_trail_store(url, buf, len, c, &n, part, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "store %s: %s", url, err.msg);
		return false;
	}
	return true;
}

uint8_t *
fx_random_bytes(size_t n, uint64_t seed)
{
	uint8_t    *b = malloc(n);

	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t) unit_rand(&seed);
	return b;
}

bool
fx_put_for_proxy(TdbS3Config *proxied, const char *key, const void *buf, size_t len)
{
	TdbS3Config direct;

	return fx_s3_env(&direct, false) && fx_s3_env(proxied, true) && fx_ensure_bucket(&direct) &&
		fx_put(&direct, key, buf, len, 0);
}

bool
fx_proxy_plan(const char *plan)
{
	TdbHttp    *h = tdb_http_new();
	TdbHttpReq	q;
	TdbHttpReq *qp = &q;
	TdbNetOptions n = fx_fast_net();
	char		url[512];
	bool		ok;

	memset(&q, 0, sizeof(q));
	snprintf(url, sizeof(url), "%s/__fault__?plan=%s", getenv("TRAIL_TEST_PROXY_ENDPOINT"), plan);
	q.method = "GET";
	q.url = strdup(url);
	q.out_grow = true;
	ok = h && tdb_http_run(h, &qp, 1, &n) == 0 && q.status == 200;
	if (!ok)
		unit_fail(__FILE__, __LINE__, "could not set the proxy plan %s", plan);
	tdb_http_req_clear(&q);
	tdb_http_free(h);
	return ok;
}

double
fx_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* url opened on S3 (c), a fresh process's view (trail_fixture_s3.h). */
bool
fx_s3_open_fresh(const TdbS3Config *c, const char *url, size_t lru_bytes, TdbPager **p, TdbTrailReader **r)
{
	TdbPagerOptions o;
	TdbTrailError err;

	fx_pager_options(&o, c, url);
	o.lru_bytes = lru_bytes;
	tdb_trail_footer_cache_clear();
	if (tdb_pager_open(&o, p, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "open %s: %s", url, err.msg);
		return false;
	}
	if (tdb_trail_open(*p, r, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "open %s: %s", url, err.msg);
		tdb_pager_close(*p);
		return false;
	}
	return true;
}
