/*
 * test_s3.c
 *	  The pager against a real S3 server (MinIO on 127.0.0.1) and, through
 *	  fault_proxy.py, against the faults S3 really has.
 *
 * src/trail/tests/run.sh starts MinIO and the proxy and sets
 * TRAIL_TEST_S3_ENDPOINT, TRAIL_TEST_S3_ACCESS_KEY, TRAIL_TEST_S3_SECRET_KEY
 * and TRAIL_TEST_PROXY_ENDPOINT.  Without them these tests say "# skip" and
 * pass, so `make unit-trail` runs anywhere.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "http.h"
#include "pager.h"
#include "trail_fixture.h"
#include "trail_fixture_s3.h"
#include "trail_unit.h"





static int
open_s3(const TdbS3Config *c, const char *key, uint32_t bs, const char *cache_dir,
		TdbPager **p, TdbTrailError *err)
{
	TdbPagerOptions o;
	char		url[256];

	memset(&o, 0, sizeof(o));
	snprintf(url, sizeof(url), "s3://%s/%s", BUCKET, key);
	o.url = url;
	o.s3 = *c;
	o.net = fx_fast_net();
	o.block_size = bs;
	o.cache_dir = cache_dir;
	return tdb_pager_open(&o, p, err);
}


/* Single PUT and multipart upload, each read back byte-exact by ranges. */
UNIT_TEST(test_s3_upload_and_read_back)
{
	TdbS3Config c;
	size_t		sizes[] = {100000, 12u << 20};	/* one PUT; 3 parts of 5 MiB */

	if (!fx_s3_env(&c, false) || !fx_ensure_bucket(&c))
		return;
	for (int k = 0; k < 2; k++)
	{
		size_t		n = sizes[k];
		uint8_t    *want = fx_random_bytes(n, 100 + (uint64_t) k);
		uint8_t    *got = calloc(1, n);
		char		key[64];
		TdbPager   *p;
		TdbTrailError err;
		uint64_t	rng = 5;

		snprintf(key, sizeof(key), "raw-%d.bin", k);
		if (!fx_put(&c, key, want, n, 5u << 20))
			continue;
		if (open_s3(&c, key, 65536, NULL, &p, &err) < 0)
		{
			unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
			continue;
		}
		CHECK_EQ_U64(tdb_pager_size(p), n);
		CHECK(tdb_pager_read(p, 0, n, got, &err) == 0);
		CHECK(memcmp(got, want, n) == 0);
		/* random ranges, unaligned, across blocks */
		for (int i = 0; i < 50; i++)
		{
			uint64_t	off = unit_rand(&rng) % n;
			size_t		len = 1 + unit_rand(&rng) % (n - off < 300000 ? n - off : 300000);

			memset(got, 0, len);
			CHECK(tdb_pager_read(p, off, len, got, &err) == 0);
			if (memcmp(got, want + off, len) != 0)
				unit_fail(__FILE__, __LINE__, "bytes differ at %llu+%zu", (unsigned long long) off, len);
		}
		tdb_pager_close(p);
		free(want);
		free(got);
	}
}

/*
 * A trail file on S3: queries equal brute force, and a one-trail query
 * fetches a small part of the object.
 */
UNIT_TEST(test_s3_pruned_queries)
{
	TdbS3Config c;
	uint64_t	rng = 31;
	FxSet		s;
	size_t		len;
	uint8_t    *buf;
	TdbPager   *p;
	TdbTrailReader *r;
	TdbTrailError err;

	if (!fx_s3_env(&c, false) || !fx_ensure_bucket(&c))
		return;
	fx_make(&s, &rng, false, 150, 600);
	buf = fx_encode(&s, 8192, 0, &len);
	if (!fx_put(&c, "q.trail", buf, len, 0))
		goto out;
	for (int iter = 0; iter < 40; iter++)
	{
		TdbTrailQuery q;
		int64_t		id = s.keys_i[unit_rand(&rng) % (uint64_t) s.nkeys];
		TdbTrailScan *sc;
		TdbTrailEvent ev;
		TdbPagerStats ps;
		size_t		want = 0,
					got = 0,
					k = 0;
		int			rc;

		if (open_s3(&c, "q.trail", 16384, NULL, &p, &err) < 0 || tdb_trail_open(p, &r, &err) < 0)
		{
			unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
			break;
		}
		memset(&q, 0, sizeof(q));
		if (iter < 20)
		{
			q.nids = 1;
			q.ids_int = &id;
		}
		else if (iter < 39)
		{
			const FxEvent *e = &s.ev[unit_rand(&rng) % s.n];

			q.has_bbox = true;
			q.xmin = tdb_trail_coord_unfix(e->lon) - 0.5;
			q.xmax = q.xmin + 1;
			q.ymin = tdb_trail_coord_unfix(e->lat) - 0.5;
			q.ymax = q.ymin + 1;
		}
		/* iter 39: a full scan, read ahead and concurrent GETs at work */
		for (size_t i = 0; i < s.n; i++)
			want += fx_matches(&s, &s.ev[i], &q);
		CHECK(tdb_trail_scan_begin(r, &q, &sc, &err) == 0);
		while ((rc = tdb_trail_scan_next(sc, &ev, &err)) > 0)
		{
			while (k < s.n && !fx_matches(&s, &s.ev[k], &q))
				k++;
			if (k >= s.n || !fx_same(&s, &s.ev[k], &ev))
			{
				unit_fail(__FILE__, __LINE__, "query %d: row %zu differs", iter, got);
				break;
			}
			k++;
			got++;
		}
		if (rc < 0)
			unit_fail(__FILE__, __LINE__, "query %d: %s", iter, err.msg);
		CHECK_EQ_U64(got, want);
		tdb_pager_stats(p, &ps);
		if (iter == 0)
			printf("# one trail of %u: %llu bytes fetched of %llu (%.1f %%)\n", s.nkeys,
				   (unsigned long long) ps.bytes_network, (unsigned long long) len,
				   100.0 * ps.bytes_network / len);
		if (iter < 20)
			CHECK(ps.bytes_network * 4 < len);
		if (iter == 39)
			CHECK(ps.bytes_network >= len - 65536);
		tdb_trail_scan_end(sc);
		tdb_trail_close(r);
		tdb_pager_close(p);
	}
out:
	free(buf);
	fx_free(&s);
}

/* The object replaced between two range GETs: an error, never mixed data. */
UNIT_TEST(test_s3_object_replaced)
{
	TdbS3Config c;
	uint8_t    *a = fx_random_bytes(200000, 1),
			   *b = fx_random_bytes(200000, 2);
	uint8_t    *got = calloc(1, 200000);
	TdbPager   *p;
	TdbTrailError err;
	int			rc;

	if (!fx_s3_env(&c, false) || !fx_ensure_bucket(&c))
		goto out;
	if (!fx_put(&c, "replaced.bin", a, 200000, 0))
		goto out;
	CHECK(open_s3(&c, "replaced.bin", 16384, NULL, &p, &err) == 0);
	CHECK(tdb_pager_read(p, 0, 50000, got, &err) == 0);
	CHECK(memcmp(got, a, 50000) == 0);
	/* same size, other bytes: only the ETag tells */
	if (!fx_put(&c, "replaced.bin", b, 200000, 0))
		goto out;
	rc = tdb_pager_read(p, 60000, 50000, got, &err);
	CHECK(rc == TDB_TRAIL_EREPLACED);
	CHECK(strstr(err.msg, "object replaced") != NULL);
	CHECK(strstr(err.msg, "s3://" BUCKET "/replaced.bin") != NULL);
	printf("# %s\n", err.msg);
	/* what was cached before stays readable: it belongs to the old ETag */
	CHECK(tdb_pager_read(p, 0, 50000, got, &err) == 0 && memcmp(got, a, 50000) == 0);
	tdb_pager_close(p);
out:
	free(a);
	free(b);
	free(got);
}

UNIT_TEST(test_s3_bad_credentials_and_missing_object)
{
	TdbS3Config c;
	TdbPager   *p;
	TdbTrailError err;
	uint8_t		small[10] = {0};
	char		secret[] = "Sup3rSecretValueNeverPrinted";

	if (!fx_s3_env(&c, false) || !fx_ensure_bucket(&c) || !fx_put(&c, "creds.bin", small, 10, 0))
		return;
	c.secret_key = secret;
	CHECK(open_s3(&c, "creds.bin", 16384, NULL, &p, &err) == TDB_TRAIL_EAUTH);
	CHECK(strstr(err.msg, "access denied") != NULL);
	CHECK(strstr(err.msg, "secret key") != NULL);
	CHECK(strstr(err.msg, secret) == NULL);
	CHECK(strstr(err.msg, "Sup3r") == NULL);
	printf("# %s\n", err.msg);
	/* the uploader says the same */
	{
		TdbNetOptions n = fx_fast_net();

		CHECK(tdb_trail_store("s3://" BUCKET "/x.bin", small, 10, &c, &n, 0, &err) == TDB_TRAIL_EAUTH);
		CHECK(strstr(err.msg, secret) == NULL);
	}
	fx_s3_env(&c, false);
	CHECK(open_s3(&c, "no/such/key.trail", 16384, NULL, &p, &err) == TDB_TRAIL_ENOTFOUND);
	CHECK(strstr(err.msg, "bucket \"" BUCKET "\"") != NULL);
	CHECK(strstr(err.msg, "key \"no/such/key.trail\"") != NULL);
	printf("# %s\n", err.msg);
	{
		TdbPagerOptions o;

		memset(&o, 0, sizeof(o));
		o.url = "s3://no-such-bucket-here/k";
		o.s3 = c;
		o.net = fx_fast_net();
		CHECK(tdb_pager_open(&o, &p, &err) == TDB_TRAIL_ENOTFOUND);
		CHECK(strstr(err.msg, "no-such-bucket-here") != NULL);
	}
}

/* The whole object at key, read back through a pager, equals want. */
static void
check_read_back(const TdbS3Config *c, const char *key, const uint8_t *want, size_t n)
{
	TdbPager   *p;
	TdbTrailError err;
	uint8_t    *got = calloc(1, n);

	if (open_s3(c, key, 65536, NULL, &p, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "open %s: %s", key, err.msg);
		free(got);
		return;
	}
	CHECK_EQ_U64(tdb_pager_size(p), n);
	if (tdb_pager_read(p, 0, n, got, &err) != 0 || memcmp(got, want, n) != 0)
		unit_fail(__FILE__, __LINE__, "%s: not read back (%s)", key, err.msg);
	tdb_pager_close(p);
	free(got);
}

/*
 * Keys that S3's URI encoding changes, each written (single PUT, and one
 * multipart upload) and read back byte-exact: curl signs the path as sent,
 * so a wrong encoding is a SignatureDoesNotMatch here.  Keys with "." or
 * ".." segments are refused before any request: curl would have written
 * "dots/../dotdot.bin" as "dotdot.bin".
 */
UNIT_TEST(test_s3_keys_with_special_characters)
{
	TdbS3Config c;
	static const char *const keys[] = {
		"odd/sp ace+plus=eq&amp;semi;comma,at@dollar$excl!star*quote'paren()",
		"odd/pct%41%2F%zz",
		"odd/q?mark#hash",
		"odd/utf8-\xc3\xa9t\xc3\xa9-\xc3\xbc",
		"odd/tilde~under_score-dash.dot",
	};
	size_t		n = 70000;
	uint8_t    *want = fx_random_bytes(n, 31);
	uint8_t    *big = NULL;
	TdbTrailError err;
	TdbNetOptions net = fx_fast_net();
	TdbPager   *p;

	if (!fx_s3_env(&c, false) || !fx_ensure_bucket(&c))
		goto out;
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		if (fx_put(&c, keys[k], want, n, 0))
			check_read_back(&c, keys[k], want, n);
	/* multipart: the key in the path of every part, the upload id in the query */
	big = fx_random_bytes(6u << 20, 32);
	if (fx_put(&c, keys[0], big, 6u << 20, 5u << 20))
		check_read_back(&c, keys[0], big, 6u << 20);

	{
		static const char *const dotted[] = {"dots/../dotdot.bin", "./dotdot.bin", "dots/.", ".."};

		for (size_t k = 0; k < sizeof(dotted) / sizeof(dotted[0]); k++)
		{
			char		url[128];

			snprintf(url, sizeof(url), "s3://%s/%s", BUCKET, dotted[k]);
			CHECK(tdb_trail_store(url, want, n, &c, &net, 0, &err) == TDB_TRAIL_EINVAL);
			CHECK(strstr(err.msg, "segments are not supported") != NULL);
			CHECK(open_s3(&c, dotted[k], 65536, NULL, &p, &err) == TDB_TRAIL_EINVAL);
		}
		printf("# %s\n", err.msg);
		CHECK(open_s3(&c, "dotdot.bin", 65536, NULL, &p, &err) == TDB_TRAIL_ENOTFOUND);
		/* dots inside a segment are ordinary characters */
		if (fx_put(&c, "dots/..x/.y./...", want, n, 0))
			check_read_back(&c, "dots/..x/.y./...", want, n);
	}
out:
	free(want);
	free(big);
}

/* The text of <tag> in an XML body. */
static bool
xml_text(const TdbHttpReq *q, const char *tag, char *out, size_t outlen)
{
	char		open[64],
				close[64];
	char	   *s = strndup((const char *) q->out, q->out_len);
	char	   *a,
			   *b;
	bool		ok = false;

	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	if (s && (a = strstr(s, open)) != NULL && (b = strstr(a, close)) != NULL &&
		(size_t) (b - a) - strlen(open) < outlen)
	{
		a += strlen(open);
		snprintf(out, outlen, "%.*s", (int) (b - a), a);
		ok = true;
	}
	free(s);
	return ok;
}

/*
 * Temporary credentials from MinIO's STS on the same endpoint: AssumeRole,
 * signed with the root key for service "sts" (curl hashes this POST body
 * itself).
 */
static bool
assume_role(const TdbS3Config *root, char *key, size_t keylen, char *secret, size_t secretlen,
			char *token, size_t tokenlen)
{
	static const char body[] = "Action=AssumeRole&DurationSeconds=900&Version=2011-06-15";
	TdbHttp    *h = tdb_http_new();
	TdbHttpReq	q;
	TdbHttpReq *qp = &q;
	TdbNetOptions n = fx_fast_net();
	char		url[300];
	bool		ok;

	memset(&q, 0, sizeof(q));
	snprintf(url, sizeof(url), "%s/", root->endpoint);
	q.url = strdup(url);
	q.method = "POST";
	q.body = (const uint8_t *) body;
	q.body_len = sizeof(body) - 1;
	q.out_grow = true;
	q.aws_sigv4 = "aws:amz:us-east-1:sts";
	q.aws_key = root->access_key;
	q.aws_secret = root->secret_key;
	ok = h != NULL && q.url != NULL && tdb_http_run(h, &qp, 1, &n) == 0 && q.status == 200 &&
		xml_text(&q, "AccessKeyId", key, keylen) &&
		xml_text(&q, "SecretAccessKey", secret, secretlen) &&
		xml_text(&q, "SessionToken", token, tokenlen);
	if (!ok)
		unit_fail(__FILE__, __LINE__, "STS AssumeRole: HTTP %ld %s %s", q.status, q.transport_msg,
				  q.errbody);
	tdb_http_req_clear(&q);
	tdb_http_free(h);
	return ok;
}

/*
 * Temporary credentials: with their session token (x-amz-security-token,
 * signed) an upload and a read succeed; without it, or with a wrong one,
 * MinIO refuses the key, so the token was sent and checked.
 */
UNIT_TEST(test_s3_session_token)
{
	TdbS3Config root,
				c;
	char		key[128],
				secret[128],
				token[4096],
				bad[4096];
	size_t		n = 50000;
	uint8_t    *want = fx_random_bytes(n, 41);
	TdbPager   *p;
	TdbTrailError err;

	if (!fx_s3_env(&root, false) || !fx_ensure_bucket(&root) ||
		!assume_role(&root, key, sizeof(key), secret, sizeof(secret), token, sizeof(token)))
		goto out;
	c = root;
	c.access_key = key;
	c.secret_key = secret;
	c.session_token = token;
	if (fx_put(&c, "token.bin", want, n, 0))
		check_read_back(&c, "token.bin", want, n);

	c.session_token = NULL;
	CHECK(open_s3(&c, "token.bin", 65536, NULL, &p, &err) == TDB_TRAIL_EAUTH);
	CHECK(strstr(err.msg, "HTTP 403 InvalidTokenId") != NULL);
	printf("# no token: %s\n", err.msg);

	snprintf(bad, sizeof(bad), "%s", token);
	bad[strlen(bad) - 2] = bad[strlen(bad) - 2] == 'A' ? 'B' : 'A';
	c.session_token = bad;
	CHECK(open_s3(&c, "token.bin", 65536, NULL, &p, &err) == TDB_TRAIL_EAUTH);
	CHECK(strstr(err.msg, "HTTP 403") != NULL);
	CHECK(strstr(err.msg, secret) == NULL && strstr(err.msg, bad) == NULL);
	printf("# wrong token: %s\n", err.msg);
out:
	free(want);
}

/*
 * A second pager (another process in real use) with the same cache
 * directory reads from disk, not the network; a process killed with -9
 * while filling the cache leaves nothing bad behind.
 */
UNIT_TEST(test_s3_shared_disk_cache)
{
	TdbS3Config c;
	size_t		n = 3u << 20;
	uint8_t    *want = fx_random_bytes(n, 9);
	uint8_t    *got = calloc(1, n);
	char		dir[256];
	TdbPager   *p;
	TdbTrailError err;
	TdbPagerStats st;
	TdbDiskCacheReport rep;

	if (!fx_s3_env(&c, false) || !fx_ensure_bucket(&c) || !fx_put(&c, "cached.bin", want, n, 0))
		goto out;
	fx_tmpdir(dir, sizeof(dir), "s3cache");
	/* kill -9 readers mid-fill, 10 times */
	for (int i = 0; i < 10; i++)
	{
		pid_t		pid = fork();

		if (pid == 0)
		{
			TdbPager   *cp;
			uint8_t    *b = malloc(n);

			if (open_s3(&c, "cached.bin", 16384, dir, &cp, NULL) == 0)
				tdb_pager_read(cp, 0, n, b, NULL);
			_exit(0);
		}
		{
			struct timespec ts = {0, (long) (20 + 15 * i) * 1000000L};

			nanosleep(&ts, NULL);
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
	}
	CHECK(tdb_disk_cache_verify(dir, &rep, &err) == 0);
	CHECK_EQ_U64(rep.blocks_bad, 0);
	printf("# after 10 kill -9: %llu valid blocks cached\n", (unsigned long long) rep.blocks_ok);

	CHECK(open_s3(&c, "cached.bin", 16384, dir, &p, &err) == 0);
	CHECK(tdb_pager_read(p, 0, n, got, &err) == 0);
	CHECK(memcmp(got, want, n) == 0);
	tdb_pager_close(p);
	CHECK(open_s3(&c, "cached.bin", 16384, dir, &p, &err) == 0);
	memset(got, 0, n);
	CHECK(tdb_pager_read(p, 0, n, got, &err) == 0);
	CHECK(memcmp(got, want, n) == 0);
	tdb_pager_stats(p, &st);
	/* only the first request (the tail, for size and ETag) went out */
	CHECK_EQ_U64(st.requests, 1);
	CHECK(st.bytes_disk_cache >= n - 65536);
	tdb_pager_close(p);
	fx_rmtree(dir);
out:
	free(want);
	free(got);
}

/* ---- faults through fault_proxy.py ------------------------------------- */


typedef struct FaultCase
{
	const char *plan;
	int			want_rc;		/* 0: retried to success */
	const char *want_msg;
} FaultCase;

/*
 * Each fault on the read after open: retryable ones end in the exact bytes
 * (with retries counted), the others in their own clear error.
 */
UNIT_TEST(test_s3_faults_through_proxy)
{
	TdbS3Config c;
	size_t		n = 400000;
	uint8_t    *want = fx_random_bytes(n, 77);
	uint8_t    *got = malloc(n);
	static const FaultCase cases[] = {
		{"500", 0, NULL},
		{"503,503", 0, NULL},
		{"429", 0, NULL},
		{"slowdown,500", 0, NULL},
		{"reset,reset", 0, NULL},	/* curl itself retries a reused connection once */
		{"short", 0, NULL},
		{"stall", 0, NULL},
		{"slice", 0, NULL},		/* no fault: the body in tiny pieces */
		{"reset,short,503", 0, NULL},
		{"200", TDB_TRAIL_EPROTO, "where 206"},
		{"badrange", TDB_TRAIL_EPROTO, "Content-Range"},
		{"etag", TDB_TRAIL_EREPLACED, "object replaced"},
		{"503,503,503,503,503,503,503", TDB_TRAIL_ENET, "gave up"},
	};

	if (!fx_put_for_proxy(&c, "fault.bin", want, n))
		goto out;
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
	{
		TdbPager   *p;
		TdbTrailError err;
		TdbPagerStats st;
		int			rc;

		if (!fx_proxy_plan(""))
			break;
		if (open_s3(&c, "fault.bin", 16384, NULL, &p, &err) < 0)
		{
			unit_fail(__FILE__, __LINE__, "%s: open: %s", cases[k].plan, err.msg);
			continue;
		}
		if (!fx_proxy_plan(cases[k].plan))
			break;
		memset(got, 0, n);
		memset(&err, 0, sizeof(err));
		/* three blocks, one range GET */
		rc = tdb_pager_read(p, 1000, 40000, got, &err);
		tdb_pager_stats(p, &st);
		if (rc != cases[k].want_rc)
			unit_fail(__FILE__, __LINE__, "fault %s: rc %d (%s), expected %d", cases[k].plan, rc,
					  err.msg, cases[k].want_rc);
		else if (rc == 0)
		{
			if (memcmp(got, want + 1000, 40000) != 0)
				unit_fail(__FILE__, __LINE__, "fault %s: wrong bytes after retries", cases[k].plan);
			if (st.retries < 1 && strcmp(cases[k].plan, "slice") != 0)
				unit_fail(__FILE__, __LINE__, "fault %s: no retry counted", cases[k].plan);
		}
		else if (strstr(err.msg, cases[k].want_msg) == NULL)
			unit_fail(__FILE__, __LINE__, "fault %s: message \"%s\" lacks \"%s\"", cases[k].plan,
					  err.msg, cases[k].want_msg);
		printf("# %-28s rc %d, %llu requests, %llu retries%s%s\n", cases[k].plan, rc,
			   (unsigned long long) st.requests, (unsigned long long) st.retries,
			   rc ? ": " : "", rc ? err.msg : "");
		tdb_pager_close(p);
	}
	fx_proxy_plan("");
out:
	free(want);
	free(got);
}

static double cancel_deadline;


static int
cancel_after(void *arg)
{
	(void) arg;
	return fx_now() >= cancel_deadline;
}

/*
 * A stalled body while the query is canceled: the read returns
 * TDB_TRAIL_ECANCELED promptly, not after the stall or the low-speed limit.
 */
UNIT_TEST(test_s3_cancel_interrupts_a_stall)
{
	TdbS3Config c;
	size_t		n = 200000;
	uint8_t    *want = fx_random_bytes(n, 78);
	uint8_t    *got = malloc(n);
	TdbPagerOptions o;
	TdbPager   *p;
	TdbTrailError err;
	double		t0,
				waited;

	if (!fx_put_for_proxy(&c, "cancel.bin", want, n) || !fx_proxy_plan(""))
		goto out;
	fx_pager_options(&o, &c, "s3://" BUCKET "/cancel.bin");
	o.net.low_speed_seconds = 30;	/* only the cancel can end the stall early */
	o.net.cancel = cancel_after;
	cancel_deadline = 1e18;
	if (tdb_pager_open(&o, &p, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
		goto out;
	}
	fx_proxy_plan("stall");
	t0 = fx_now();
	cancel_deadline = t0 + 0.3;
	CHECK(tdb_pager_read(p, 0, 40000, got, &err) == TDB_TRAIL_ECANCELED);
	waited = fx_now() - t0;
	/* the stall lasts 8 s; the cancel came at 0.3 s and is polled every 100 ms */
	CHECK(waited < 2.0);
	printf("# canceled after %.2f s (cancel asked at 0.30 s): %s\n", waited, err.msg);
	tdb_pager_close(p);
	fx_proxy_plan("");
out:
	free(want);
	free(got);
}

/*
 * A full scan fetches each byte of the object once, however small the
 * in-process LRU (none at all included) and whatever the block size: the
 * bytes from the network equal the object's size (issue 15: with the caches
 * off, an 11 MB object cost 28.9 MB).
 */
UNIT_TEST(test_s3_full_scan_fetches_each_byte_once)
{
	TdbS3Config c;
	uint64_t	rng = 77;
	FxSet		s;
	size_t		len;
	uint8_t    *buf;
	size_t		lrus[] = {0, 16384, 65536, 1u << 20, 64u << 20};
	uint32_t	bss[] = {16384, 65536, 1u << 20};

	if (!fx_s3_env(&c, false) || !fx_ensure_bucket(&c))
		return;
	/*
	 * Version 2 and version 3 in both orders (before, the layout the tests
	 * before it had left set: alone, version 3 in trail order fetched 6,918
	 * bytes twice, in space-time order 47,786, where the suite had run an
	 * earlier version); 200 long trails (the footer in the tail), then 6,000
	 * short ones (a footer of ~200 kB)
	 */
	for (int lay = 0; lay < 3; lay++)
	for (int set = 0; set < 2; set++)
	{
	/* last version 2 in trail order, the layout the tests after this one have always had */
	fx_layout(lay == 2 ? 1 : lay + 3);
	fx_make(&s, &rng, false, set == 0 ? 200 : 6000, set == 0 ? 900 : 30);
	buf = fx_encode(&s, 3000, 0, &len);
	if (!fx_put(&c, "once.trail", buf, len, 0))
		goto out;
	for (size_t b = 0; b < sizeof(bss) / sizeof(bss[0]); b++)
		for (size_t l = 0; l < sizeof(lrus) / sizeof(lrus[0]); l++)
		{
			TdbPagerOptions o;
			TdbPager   *p;
			TdbTrailReader *r;
			TdbTrailScan *sc;
			TdbTrailQuery q;
			TdbTrailEvent ev;
			TdbTrailError err;
			TdbPagerStats ps;
			TdbBlockLru *lru = tdb_lru_create(lrus[l]);
			uint64_t	n = 0;
			int			rc;

			memset(&o, 0, sizeof(o));
			o.url = "s3://" BUCKET "/once.trail";
			o.s3 = c;
			o.net = fx_fast_net();
			o.block_size = bss[b];
			o.lru = lru;
			/* a fresh process's view: no footer decoded before (they are shared) */
			tdb_trail_footer_cache_clear();
			if (tdb_pager_open(&o, &p, &err) < 0 || tdb_trail_open(p, &r, &err) < 0)
			{
				unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
				tdb_lru_free(lru);
				goto out;
			}
			/* the second file's footer lies partly before the 64 kB tail */
			CHECK(set == 0 || len - 48 - tdb_trail_footer(r)->data_end > 65536);
			memset(&q, 0, sizeof(q));
			CHECK(tdb_trail_scan_begin(r, &q, &sc, &err) == 0);
			while ((rc = tdb_trail_scan_next(sc, &ev, &err)) > 0)
				n++;
			CHECK(rc == 0);
			CHECK_EQ_U64(n, s.n);
			tdb_pager_stats(p, &ps);
			if (ps.bytes_network != len)
				unit_fail(__FILE__, __LINE__, "version %d, order %d: footer %llu bytes, block size %u, LRU %zu bytes: %llu bytes fetched in %llu requests for a %zu-byte object",
						  fx_version, (int) fx_order, (unsigned long long) (len - 48 - tdb_trail_footer(r)->data_end), bss[b], lrus[l],
						  (unsigned long long) ps.bytes_network, (unsigned long long) ps.requests, len);
			tdb_trail_scan_end(sc);
			tdb_trail_close(r);
			tdb_pager_close(p);
			tdb_lru_free(lru);
		}
	free(buf);
	buf = NULL;
	fx_free(&s);
	}
	return;
out:
	free(buf);
	fx_free(&s);
}

/*
 * A scan by time or area, no LIMIT, whose page chunks hold 7/8 of the pages
 * or more, of a footer too large for a small one: the whole footer comes in one
 * GET, the trail chunks its pages name with the page chunks, not in a GET of
 * their own after them (a round trip saved: the open's tail, the footer, the
 * first window; 4 requests before).
 */
UNIT_TEST(test_s3_scan_of_most_chunks_fetches_footer_at_once)
{
	TdbS3Config c;
	uint64_t	rng = 78;
	FxSet		s;
	size_t		len;
	uint8_t    *buf;
	TdbPagerOptions o;
	TdbPager   *p = NULL;
	TdbTrailReader *r = NULL;
	TdbTrailScan *sc = NULL;
	TdbTrailQuery q;
	TdbTrailEvent ev;
	TdbTrailError err;
	TdbPagerStats ps;
	uint64_t	n = 0;
	int			rc;

	if (!fx_s3_env(&c, false) || !fx_ensure_bucket(&c))
		return;
	fx_layout(3);
	fx_make(&s, &rng, false, 6000, 30);
	buf = fx_encode(&s, 3000, 0, &len);
	if (!fx_put(&c, "most-chunks.trail", buf, len, 0))
		goto out;
	memset(&o, 0, sizeof(o));
	o.url = "s3://" BUCKET "/most-chunks.trail";
	o.s3 = c;
	o.net = fx_fast_net();
	tdb_trail_footer_cache_clear();
	if (tdb_pager_open(&o, &p, &err) < 0 || tdb_trail_open(p, &r, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
		goto out;
	}
	CHECK(len - 48 - tdb_trail_footer(r)->data_end > 65536);	/* not a small footer */
	memset(&q, 0, sizeof(q));
	q.has_time = true;
	q.time_from = INT64_MIN / 2;
	q.time_to = INT64_MAX / 2;
	CHECK(tdb_trail_scan_begin(r, &q, &sc, &err) == 0);
	CHECK(tdb_trail_scan_next(sc, &ev, &err) == 1);
	tdb_pager_stats(p, &ps);
	CHECK_EQ_U64(ps.requests, 3);
	n = 1;
	while ((rc = tdb_trail_scan_next(sc, &ev, &err)) > 0)
		n++;
	CHECK(rc == 0);
	CHECK_EQ_U64(n, s.n);
	tdb_pager_stats(p, &ps);
	CHECK_EQ_U64(ps.bytes_network, len);	/* and no byte twice */
out:
	fx_layout(1);				/* the layout the tests after this one have always had */
	if (sc != NULL)
		tdb_trail_scan_end(sc);
	if (r != NULL)
		tdb_trail_close(r);
	if (p != NULL)
		tdb_pager_close(p);
	free(buf);
	fx_free(&s);
}

/*
 * revalidate_seconds: a second open within the interval sends nothing and
 * reads the version the first one saw; replaced meanwhile, a byte that must
 * come from the network is TDB_TRAIL_EREPLACED (never the new version's
 * bytes), and the next open asks again and reads the new version.
 */
UNIT_TEST(test_s3_revalidate_interval)
{
	TdbS3Config c;
	uint8_t    *v1 = fx_random_bytes(300000, 5),
			   *v2 = fx_random_bytes(300000, 6);
	uint8_t		got[1000];
	TdbPagerOptions o;
	TdbPager   *p;
	TdbTrailError err;
	TdbPagerStats ps;
	char		etag1[256];

	if (!fx_s3_env(&c, false) || !fx_ensure_bucket(&c) || !fx_put(&c, "rv.bin", v1, 300000, 0))
		goto out;
	fx_pager_options(&o, &c, "s3://" BUCKET "/rv.bin");
	o.revalidate_seconds = 60;
	/* first open: asks (one request) */
	CHECK(tdb_pager_open(&o, &p, &err) == 0);
	tdb_pager_stats(p, &ps);
	CHECK_EQ_U64(ps.requests, 1);
	CHECK(!ps.validation_reused);
	snprintf(etag1, sizeof(etag1), "%s", tdb_pager_etag(p));
	tdb_pager_close(p);
	/* second: nothing sent, the same version, its tail in memory */
	CHECK(tdb_pager_open(&o, &p, &err) == 0);
	tdb_pager_stats(p, &ps);
	CHECK_EQ_U64(ps.requests, 0);
	CHECK(ps.validation_reused);
	CHECK(strcmp(tdb_pager_etag(p), etag1) == 0);
	CHECK(tdb_pager_read(p, 300000 - 1000, 1000, got, &err) == 0 && memcmp(got, v1 + 299000, 1000) == 0);
	tdb_pager_stats(p, &ps);
	CHECK_EQ_U64(ps.requests, 0);
	tdb_pager_close(p);
	/* replaced within the interval: the old version, or an error */
	if (!fx_put(&c, "rv.bin", v2, 300000, 0))
		goto out;
	CHECK(tdb_pager_open(&o, &p, &err) == 0);
	CHECK(strcmp(tdb_pager_etag(p), etag1) == 0);
	CHECK(tdb_pager_read(p, 1000, 1000, got, &err) == TDB_TRAIL_EREPLACED);
	CHECK(strstr(err.msg, "within the revalidation interval") != NULL);
	tdb_pager_close(p);
	/* the error made the next open ask again */
	CHECK(tdb_pager_open(&o, &p, &err) == 0);
	tdb_pager_stats(p, &ps);
	CHECK(!ps.validation_reused);
	CHECK(strcmp(tdb_pager_etag(p), etag1) != 0);
	CHECK(tdb_pager_read(p, 1000, 1000, got, &err) == 0 && memcmp(got, v2 + 1000, 1000) == 0);
	tdb_pager_close(p);
	/* interval 0: every open asks */
	o.revalidate_seconds = 0;
	for (int i = 0; i < 2; i++)
	{
		CHECK(tdb_pager_open(&o, &p, &err) == 0);
		tdb_pager_stats(p, &ps);
		CHECK_EQ_U64(ps.requests, 1);
		tdb_pager_close(p);
	}
out:
	free(v1);
	free(v2);
}

/*
 * One validation per token (the FDW's per statement): a second open under
 * the same token sends nothing, another token asks again; and a footer
 * longer than the 16 kB tail is fetched exactly, in one more request, and
 * kept with the tail (the reused validation holds it too).
 */
UNIT_TEST(test_s3_validation_token_and_long_footer)
{
	TdbS3Config c;
	uint64_t	rng = 808;
	FxSet		s;
	size_t		len;
	uint8_t    *buf = NULL;
	TdbPagerOptions o;
	TdbPager   *p;
	TdbTrailReader *r;
	TdbTrailError err;
	TdbPagerStats ps;
	TdbTrailTrailer t;
	char		dir[256];

	if (!fx_s3_env(&c, false) || !fx_ensure_bucket(&c))
		return;
	/* many small pages: a footer of tens of kB */
	fx_make(&s, &rng, false, 300, 40);
	buf = fx_encode(&s, 256, 8, &len);
	if (buf == NULL || !fx_put(&c, "longfooter.trail", buf, len, 0))
		goto out;
	CHECK(tdb_trail_trailer_decode(buf + len - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE, len, &t, &err) == 0);
	CHECK(t.footer_length + TDB_TRAIL_TRAILER_SIZE > 16384);
	fx_pager_options(&o, &c, "s3://" BUCKET "/longfooter.trail");
	o.validation_token = 0x1234;
	tdb_trail_footer_cache_clear();
	CHECK(tdb_pager_open(&o, &p, &err) == 0);
	CHECK(tdb_trail_open(p, &r, &err) == 0);
	tdb_pager_stats(p, &ps);
	/* the tail, then exactly the rest of the footer: nothing block-rounded */
	CHECK_EQ_U64(ps.requests, 2);
	CHECK_EQ_U64(ps.bytes_network, len - t.footer_offset);
	tdb_trail_close(r);
	tdb_pager_close(p);
	/* the same token: nothing sent, the whole footer from memory */
	CHECK(tdb_pager_open(&o, &p, &err) == 0);
	CHECK(tdb_trail_open(p, &r, &err) == 0);
	tdb_pager_stats(p, &ps);
	CHECK_EQ_U64(ps.requests, 0);
	CHECK(ps.validation_reused);
	CHECK(tdb_trail_verify(r, NULL, &err) == 0);
	tdb_trail_close(r);
	tdb_pager_close(p);
	/* another token: asks again */
	o.validation_token = 0x1235;
	CHECK(tdb_pager_open(&o, &p, &err) == 0);
	tdb_pager_stats(p, &ps);
	CHECK_EQ_U64(ps.requests, 1);
	CHECK(!ps.validation_reused);
	tdb_pager_close(p);
	/* with a disk cache: the footer's rest is cached as one piece, so a warm open asks once */
	fx_tmpdir(dir, sizeof(dir), "longfooter");
	o.cache_dir = dir;
	for (int k = 0; k < 2; k++)
	{
		o.validation_token = 0x2000 + (uint64_t) k;
		tdb_trail_footer_cache_clear();	/* measure the footer's bytes, not the shared decode */
		CHECK(tdb_pager_open(&o, &p, &err) == 0);
		CHECK(tdb_trail_open(p, &r, &err) == 0);
		tdb_pager_stats(p, &ps);
		CHECK_EQ_U64(ps.requests, k == 0 ? 2 : 1);
		CHECK_EQ_U64(ps.bytes_network, k == 0 ? len - t.footer_offset : 16384);
		CHECK_EQ_U64(ps.bytes_disk_cache, k == 0 ? 0 : len - t.footer_offset - 16384);
		CHECK(k == 0 || tdb_trail_verify(r, NULL, &err) == 0);
		tdb_trail_close(r);
		tdb_pager_close(p);
	}
	fx_rmtree(dir);
out:
	free(buf);
	fx_free(&s);
}
