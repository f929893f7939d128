/*
 * remote.c
 *	  Range reads and uploads of one object over HTTP(S) or S3, with the
 *	  validation and retry rules of remote.h.
 *
 * S3 requests are addressed path-style (endpoint/bucket/key, what MinIO
 * wants) or virtual-host style (bucket.endpoint/key).  Messages name the
 * object as s3://bucket/key or as the URL without its query string
 * (presigned URLs carry signatures there) and never include credentials.
 *
 * libcurl signs S3 requests (AWS Signature Version 4, CURLOPT_AWS_SIGV4 in
 * http.c): it adds x-amz-date and Authorization and computes the HMAC
 * chain over every header the request carries (Range and If-Match
 * included).  Read against libcurl 7.88.1 (lib/http_aws_sigv4.c) and
 * checked against MinIO, its signer leaves these to us, done here:
 *
 *  - The canonical URI and query string.  curl signs the URL's path and
 *    query exactly as written: it neither URI-encodes them as S3 does nor
 *    sorts the query, so a key written "%41" where S3 canonicalises "A", or
 *    an unsorted query, is refused (SignatureDoesNotMatch).  We write the
 *    URL in S3's canonical form: the key through tdb_s3_uri_encode(), query
 *    parameters already sorted and encoded ("partNumber=..&uploadId=..",
 *    "uploads=" with its "=").
 *  - Keys with "." or ".." segments are refused (tdb_remote_open).  curl
 *    removes such segments from the URL before signing and sending it, so
 *    "a/../b" would be written as "b", another object.  CURLOPT_PATH_AS_IS
 *    stops that in 7.88, but curl 8.14 and later refuse SigV4 with it
 *    ("Cannot use sigv4 authentication with path-as-is flag"); MinIO
 *    refuses such keys anyway (XMinioInvalidResourceName).
 *  - The payload hash.  curl hashes CURLOPT_POSTFIELDS only, so a PUT body
 *    sent through the read callback would be signed as the empty string's
 *    hash, and it sends no x-amz-content-sha256 header, which AWS S3
 *    requires on every request.  When that header is present curl signs
 *    with its value: we send the body's SHA-256 (sha256.c, OpenSSL).
 *  - The session token: curl has no option for it.  We send it as the
 *    x-amz-security-token header, which curl signs like every header the
 *    request carries.
 *
 * And one thing not to do: an empty "Expect:" header (see http.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE				/* memmem, strndup */
#endif
#include "remote.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "sha256.h"

enum
{
	REMOTE_HTTP,
	REMOTE_S3
};

struct TdbRemote
{
	int			kind;
	char	   *url;			/* http(s) URL as given */
	char		name[600];		/* for messages */
	char		bucket[64];
	char	   *key;
	char	   *scheme_host;	/* "http://127.0.0.1:9000" */
	char	   *host;			/* "127.0.0.1:9000" */
	char	   *region;
	char	   *access_key;
	char	   *secret_key;
	char	   *session_token;
	char		sigv4[96];		/* "aws:amz:REGION:s3", for CURLOPT_AWS_SIGV4 */
	bool		path_style;
	TdbNetOptions net;
	TdbHttp    *http;
	uint64_t	requests,
				retries,
				bytes;
	uint64_t	rng;
};

static char *
dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/*
 * curl reads the region out of "aws:amz:REGION:s3" with sscanf("%64[^:]"):
 * a longer one or one with a colon would be cut short and signed wrong.
 */
static bool
valid_region(const char *s)
{
	size_t		n = strlen(s);

	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
			  (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_' || s[i] == '.'))
			return false;
	return true;
}

/* Whether a '/'-separated segment of key is "." or "..". */
static bool
has_dot_segment(const char *key)
{
	for (const char *seg = key;; seg++)
	{
		size_t		n = strcspn(seg, "/");

		if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
			return true;
		seg += n;
		if (*seg == '\0')
			return false;
	}
}

static void
net_defaults(TdbNetOptions *n)
{
	if (n->max_retries == 0)
		n->max_retries = 5;
	else if (n->max_retries < 0)
		n->max_retries = 0;		/* negative: no retries */
	if (n->retry_base_ms <= 0)
		n->retry_base_ms = 100;
	if (n->retry_max_ms <= 0)
		n->retry_max_ms = 5000;
	if (n->low_speed_bytes <= 0)
		n->low_speed_bytes = 1024;
	if (n->low_speed_seconds <= 0)
		n->low_speed_seconds = 10;
	if (n->connect_timeout_ms <= 0)
		n->connect_timeout_ms = 10000;
}

int
tdb_remote_open(const char *url, const TdbS3Config *s3, const TdbNetOptions *net,
				TdbRemote **out, TdbTrailError *err)
{
	TdbRemote  *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (r == NULL)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	if (net)
		r->net = *net;
	net_defaults(&r->net);
	r->rng = (uint64_t) time(NULL) ^ ((uint64_t) getpid() << 32) ^ (uintptr_t) r;
	if (strncmp(url, "s3://", 5) == 0)
	{
		const char *key;
		const char *ep;

		r->kind = REMOTE_S3;
		if (tdb_s3_parse_url(url, r->bucket, sizeof(r->bucket), &key) < 0)
		{
			free(r);
			return tdb_trail_fail(err, TDB_TRAIL_EINVAL,
								  "not an S3 URL (s3://bucket/key, bucket 3-63 of a-z 0-9 . -)");
		}
		if (s3 == NULL || s3->access_key == NULL || s3->secret_key == NULL)
		{
			/* the message names r->bucket: free r after it */
			tdb_trail_fail(err, TDB_TRAIL_EINVAL,
						   "s3://%s/%s: no credentials given (access key and secret key)", r->bucket, key);
			free(r);
			return TDB_TRAIL_EINVAL;
		}
		/* S3's limit; the encoded key must fit s3_prepare's buffer whole */
		if (strlen(key) > 1024)
		{
			tdb_trail_fail(err, TDB_TRAIL_EINVAL, "s3://%s/...: S3 keys are at most 1024 bytes", r->bucket);
			free(r);
			return TDB_TRAIL_EINVAL;
		}
		if (has_dot_segment(key))
		{
			tdb_trail_fail(err, TDB_TRAIL_EINVAL,
						   "s3://%s/%s: keys with \".\" or \"..\" segments are not supported (libcurl would remove them before signing)",
						   r->bucket, key);
			free(r);
			return TDB_TRAIL_EINVAL;
		}
		if (!valid_region(s3->region ? s3->region : "us-east-1"))
		{
			free(r);
			return tdb_trail_fail(err, TDB_TRAIL_EINVAL,
								  "S3 region must be 1 to 64 of A-Z a-z 0-9 . _ -");
		}
		r->key = strdup(key);
		r->region = strdup(s3->region ? s3->region : "us-east-1");
		snprintf(r->sigv4, sizeof(r->sigv4), "aws:amz:%s:s3", r->region ? r->region : "");
		r->access_key = strdup(s3->access_key);
		r->secret_key = strdup(s3->secret_key);
		r->session_token = dup_or_null(s3->session_token);
		r->path_style = s3->path_style;
		if (s3->endpoint)
			r->scheme_host = strdup(s3->endpoint);
		else
		{
			char		buf[128];

			snprintf(buf, sizeof(buf), "https://s3.%s.amazonaws.com", r->region);
			r->scheme_host = strdup(buf);
		}
		/* drop a trailing slash of the endpoint */
		if (r->scheme_host && r->scheme_host[0] && r->scheme_host[strlen(r->scheme_host) - 1] == '/')
			r->scheme_host[strlen(r->scheme_host) - 1] = '\0';
		ep = r->scheme_host ? strstr(r->scheme_host, "://") : NULL;
		if (ep == NULL || strchr(ep + 3, '/') != NULL)
		{
			tdb_remote_close(r);
			return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "S3 endpoint must be scheme://host[:port]");
		}
		r->host = strdup(ep + 3);
		snprintf(r->name, sizeof(r->name), "s3://%s/%s", r->bucket, key);
	}
	else if (strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0)
	{
		size_t		n = strcspn(url, "?#");

		r->kind = REMOTE_HTTP;
		r->url = strdup(url);
		snprintf(r->name, sizeof(r->name), "%.*s", (int) (n < 590 ? n : 590), url);
	}
	else
	{
		free(r);
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "not a remote URL: use http(s):// or s3://");
	}
	r->http = tdb_http_new();
	if (r->http == NULL || (r->kind == REMOTE_S3 && (!r->key || !r->region || !r->access_key ||
													 !r->secret_key || !r->host)))
	{
		tdb_remote_close(r);
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory (or curl failed to start)");
	}
	*out = r;
	return 0;
}

void
tdb_remote_close(TdbRemote *r)
{
	if (r == NULL)
		return;
	tdb_http_free(r->http);
	free(r->url);
	free(r->key);
	free(r->scheme_host);
	free(r->host);
	free(r->region);
	free(r->access_key);
	if (r->secret_key)
		memset(r->secret_key, 0, strlen(r->secret_key));
	free(r->secret_key);
	free(r->session_token);
	free(r);
}

const char *
tdb_remote_name(const TdbRemote *r)
{
	return r->name;
}

void
tdb_remote_counters(const TdbRemote *r, uint64_t *requests, uint64_t *retries, uint64_t *bytes)
{
	*requests = r->requests;
	*retries = r->retries;
	*bytes = r->bytes;
}

/*
 * Fill url and headers of an S3 request, for curl to sign: key NULL for a
 * bucket-level request, query the canonical query string ("" for none).
 */
static bool
s3_prepare(TdbRemote *r, TdbHttpReq *q, const char *method, const char *bucket,
		   const char *key, const char *query, const uint8_t *body, size_t body_len)
{
	char		ekey[3 * 1024 + 1];
	char		url[5200];
	char		payload[65];
	uint8_t		h[32];
	const char *scheme_end = strstr(r->scheme_host, "://");
	int			n;

	tdb_s3_uri_encode(key ? key : "", 1, ekey, sizeof(ekey));
	if (r->path_style)
		n = snprintf(url, sizeof(url), "%.*s://%s/%s%s%s%s%s", (int) (scheme_end - r->scheme_host),
					 r->scheme_host, r->host, bucket, key ? "/" : "", ekey,
					 query[0] ? "?" : "", query);
	else
		n = snprintf(url, sizeof(url), "%.*s://%s.%s/%s%s%s", (int) (scheme_end - r->scheme_host),
					 r->scheme_host, bucket, r->host, ekey, query[0] ? "?" : "", query);
	/* a cut URL would address and sign another object */
	if (n < 0 || (size_t) n >= sizeof(url))
		return false;
	if (!tdb_sha256(body_len > 0 ? body : (const uint8_t *) "", body_len, h))
		return false;
	tdb_hex(h, 32, payload);

	q->method = method;
	q->body = body;
	q->body_len = body_len;
	q->aws_sigv4 = r->sigv4;
	q->aws_key = r->access_key;
	q->aws_secret = r->secret_key;
	if ((q->url = strdup(url)) == NULL)
		return false;
	if (!tdb_http_add_header(q, "x-amz-content-sha256", payload))
		return false;
	return r->session_token == NULL ||
		tdb_http_add_header(q, "x-amz-security-token", r->session_token);
}

/* A GET of this object (HTTP or S3), with optional Range and If-Match. */
static bool
prepare_get(TdbRemote *r, TdbHttpReq *q, const char *range, const char *if_match)
{
	if (r->kind == REMOTE_S3)
	{
		if (!s3_prepare(r, q, "GET", r->bucket, r->key, "", NULL, 0))
			return false;
	}
	else
	{
		q->method = "GET";
		if ((q->url = strdup(r->url)) == NULL)
			return false;
	}
	if (range && !tdb_http_add_header(q, "Range", range))
		return false;
	if (if_match && !tdb_http_add_header(q, "If-Match", if_match))
		return false;
	return true;
}

/* The <Code> of an S3 error body, or "". */
static void
s3_error_code(const TdbHttpReq *q, char *out, size_t outlen)
{
	const char *a = strstr(q->errbody, "<Code>");
	const char *b = a ? strstr(a, "</Code>") : NULL;
	size_t		n;

	out[0] = '\0';
	if (a == NULL || b == NULL)
		return;
	a += 6;
	n = (size_t) (b - a);
	if (n >= outlen)
		n = outlen - 1;
	for (size_t i = 0; i < n; i++)
		out[i] = (a[i] >= 'A' && a[i] <= 'z') ? a[i] : '?';
	out[n] = '\0';
}

/*
 * What an ended request means, for every kind of request: 0 success
 * (2xx and complete), 1 retry, or a negative error with err set.
 */
static int
classify(TdbRemote *r, const TdbHttpReq *q, TdbTrailError *err)
{
	char		code[64];

	s3_error_code(q, code, sizeof(code));
	switch (q->transport)
	{
		case TDB_HTTP_DONE:
			break;
		case TDB_HTTP_CANCELED:
			return tdb_trail_fail(err, TDB_TRAIL_ECANCELED, "read of %s canceled", r->name);
		case TDB_HTTP_OVERFLOW:
			if (q->status == 200)
				return tdb_trail_fail(err, TDB_TRAIL_EPROTO,
									  "%s: HTTP 200 (the whole object) where 206 (a range) was expected; the server or a proxy ignored Range",
									  r->name);
			return tdb_trail_fail(err, TDB_TRAIL_EPROTO, "%s: response body longer than asked for (HTTP %ld)",
								  r->name, q->status);
		case TDB_HTTP_TIMEOUT:
			tdb_trail_fail(err, TDB_TRAIL_ENET, "%s: timed out or stalled below %ld bytes/s for %ld s (%s)",
						   r->name, r->net.low_speed_bytes, r->net.low_speed_seconds, q->transport_msg);
			return 1;
		case TDB_HTTP_SHORT:
			tdb_trail_fail(err, TDB_TRAIL_ENET, "%s: short body (%s)", r->name, q->transport_msg);
			return 1;
		case TDB_HTTP_RESET:
		case TDB_HTTP_FAILED:
			tdb_trail_fail(err, TDB_TRAIL_ENET, "%s: connection failed (%s)", r->name, q->transport_msg);
			return 1;
	}
	if (q->status >= 200 && q->status < 300)
		return 0;
	if (q->status == 0)
	{
		tdb_trail_fail(err, TDB_TRAIL_ENET, "%s: no response", r->name);
		return 1;
	}
	if (q->status == 401 || q->status == 403)
		return tdb_trail_fail(err, TDB_TRAIL_EAUTH,
							  "access denied to %s (HTTP %ld%s%s): %s", r->name, q->status,
							  code[0] ? " " : "", code,
							  r->kind == REMOTE_S3 ? "check the access key and secret key (the secret is not shown)"
							  : "the server refused the request");
	if (q->status == 404)
	{
		if (r->kind == REMOTE_S3)
			return tdb_trail_fail(err, TDB_TRAIL_ENOTFOUND,
								  "object not found: bucket \"%s\", key \"%s\" (HTTP 404%s%s)",
								  r->bucket, r->key, code[0] ? " " : "", code);
		return tdb_trail_fail(err, TDB_TRAIL_ENOTFOUND, "not found: %s (HTTP 404)", r->name);
	}
	if (q->status == 412)
		return tdb_trail_fail(err, TDB_TRAIL_EREPLACED,
							  "object replaced: %s changed while being read (If-Match failed, HTTP 412); rerun the query",
							  r->name);
	if (q->status == 429 || q->status >= 500 || strcmp(code, "SlowDown") == 0 ||
		strcmp(code, "RequestTimeout") == 0)
	{
		tdb_trail_fail(err, TDB_TRAIL_ENET, "%s: HTTP %ld%s%s", r->name, q->status,
					   code[0] ? " " : "", code);
		return 1;
	}
	return tdb_trail_fail(err, TDB_TRAIL_EHTTP, "%s: HTTP %ld%s%s", r->name, q->status,
						  code[0] ? " " : "", code);
}

/* Sleep before retry `attempt`, polling cancel every 50 ms. */
static int
backoff(TdbRemote *r, int attempt, TdbTrailError *err)
{
	uint64_t	cap = (uint64_t) r->net.retry_base_ms << (attempt < 20 ? attempt : 20);
	uint64_t	ms;

	if (cap > (uint64_t) r->net.retry_max_ms)
		cap = (uint64_t) r->net.retry_max_ms;
	/* "full jitter": uniform in [cap/2, cap] keeps a floor and spreads clients */
	r->rng = r->rng * 6364136223846793005ull + 1442695040888963407ull;
	ms = cap / 2 + (r->rng >> 33) % (cap / 2 + 1);
	while (ms > 0)
	{
		uint64_t	step = ms < 50 ? ms : 50;
		struct timespec ts = {0, (long) step * 1000000L};

		if (r->net.cancel && r->net.cancel(r->net.cancel_arg))
			return tdb_trail_fail(err, TDB_TRAIL_ECANCELED, "read of %s canceled", r->name);
		nanosleep(&ts, NULL);
		ms -= step;
	}
	return 0;
}

typedef int (*CheckFn) (TdbRemote *r, TdbHttpReq *q, void *ctx, TdbTrailError *err);

/*
 * Run reqs, maxp in flight (the next starts as one ends: in batches of
 * maxp, each batch waited for its slowest request), then retry those
 * check() says to retry, each at most max_retries times.  By slices of
 * 8 maxp requests, so that an error no retry mends (403, 404, 412) stops
 * the rest early: a refused upload does not send its other parts.
 */
static int
run_slice(TdbRemote *r, TdbHttpReq **reqs, int n, int maxp, CheckFn check,
		  void *ctx, TdbTrailError *err)
{
	TdbHttpReq *batch[8 * 64];	/* a slice: at most 8 maxp, maxp at most 64 */
	int			m = n,
				rc;

	memcpy(batch, reqs, sizeof(TdbHttpReq *) * (size_t) n);
	for (int attempt = 0;; attempt++)
	{
		TdbTrailError last = {0};
		int			nretry = 0;

		rc = tdb_http_run_window(r->http, batch, m, maxp, &r->net);
		r->requests += (uint64_t) m;
		if (rc < 0)
			return rc == TDB_TRAIL_ECANCELED ? tdb_trail_fail(err, rc, "read of %s canceled", r->name) :
				tdb_trail_fail(err, rc, "out of memory");
		for (int j = 0; j < m; j++)
		{
			int			c;

			r->bytes += batch[j]->out_len;
			if ((c = check(r, batch[j], ctx, &last)) < 0)
			{
				if (err)
					*err = last;
				return c;
			}
			if (c == 1)
				batch[nretry++] = batch[j];
		}
		if (nretry == 0)
			return 0;
		if (attempt >= r->net.max_retries)
			return tdb_trail_fail(err, last.code ? last.code : TDB_TRAIL_ENET,
								  "%s (gave up after %d attempts)", last.msg, attempt + 1);
		r->retries += (uint64_t) nretry;
		m = nretry;
		if ((rc = backoff(r, attempt, err)) < 0)
			return rc;
	}
}

static int
run_with_retries(TdbRemote *r, TdbHttpReq **reqs, int n, int maxp, CheckFn check,
				 void *ctx, TdbTrailError *err)
{
	int			rc = 0;

	maxp = maxp <= 0 ? 4 : maxp > 64 ? 64 : maxp;
	for (int b = 0; b < n && rc == 0; b += 8 * maxp)
		rc = run_slice(r, reqs + b, n - b < 8 * maxp ? n - b : 8 * maxp, maxp, check, ctx, err);
	return rc;
}

/* ---- range reads -------------------------------------------------------- */

static bool
parse_content_range(const char *s, uint64_t *a, uint64_t *b, uint64_t *total)
{
	unsigned long long x,
				y,
				t;
	int			used = 0;

	if (sscanf(s, "bytes %llu-%llu/%llu%n", &x, &y, &t, &used) != 3 || s[used] != '\0' ||
		y < x || y >= t)
		return false;
	*a = x;
	*b = y;
	*total = t;
	return true;
}

typedef struct TailCtx
{
	uint64_t	want;
	uint64_t	size;
} TailCtx;

static int
check_tail(TdbRemote *r, TdbHttpReq *q, void *arg, TdbTrailError *err)
{
	TailCtx    *c = arg;
	uint64_t	a,
				b,
				total;
	int			k = classify(r, q, err);

	if (k != 0)
	{
		/* an empty object cannot satisfy a suffix range */
		if (k < 0 && q->status == 416)
			return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT, "not a trail file: %s is empty", r->name);
		return k;
	}
	if (q->etag[0] == '\0')
		return tdb_trail_fail(err, TDB_TRAIL_EPROTO,
							  "%s: the server sent no ETag, so a consistent read cannot be guaranteed", r->name);
	if (q->status == 200)
	{
		/* the whole object, smaller than what we asked for */
		if (q->content_length >= 0 && (uint64_t) q->content_length != q->out_len)
		{
			tdb_trail_fail(err, TDB_TRAIL_ENET, "%s: short body (%zu of %lld bytes)", r->name,
						   q->out_len, (long long) q->content_length);
			return 1;
		}
		c->size = q->out_len;
		return 0;
	}
	if (q->status != 206 || !parse_content_range(q->content_range, &a, &b, &total))
		return tdb_trail_fail(err, TDB_TRAIL_EPROTO, "%s: HTTP %ld with Content-Range \"%s\" to a suffix range",
							  r->name, q->status, q->content_range);
	if (b != total - 1 || b - a + 1 > c->want)
		return tdb_trail_fail(err, TDB_TRAIL_EPROTO, "%s: Content-Range \"%s\" is not the last %llu bytes",
							  r->name, q->content_range, (unsigned long long) c->want);
	if (q->out_len != b - a + 1)
	{
		tdb_trail_fail(err, TDB_TRAIL_ENET, "%s: short body (%zu of %llu bytes)", r->name, q->out_len,
					   (unsigned long long) (b - a + 1));
		return 1;
	}
	c->size = total;
	return 0;
}

int
tdb_remote_get_tail(TdbRemote *r, uint64_t want, uint8_t *buf, uint64_t *got, uint64_t *size,
					char *etag, size_t etaglen, TdbTrailError *err)
{
	TdbHttpReq	q;
	TdbHttpReq *qp = &q;
	TailCtx		c = {want, 0};
	char		range[64];
	int			rc;

	memset(&q, 0, sizeof(q));
	snprintf(range, sizeof(range), "bytes=-%llu", (unsigned long long) want);
	if (!prepare_get(r, &q, range, NULL))
	{
		tdb_http_req_clear(&q);
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	}
	q.out = buf;
	q.out_cap = want;
	rc = run_with_retries(r, &qp, 1, 1, check_tail, &c, err);
	if (rc == 0)
	{
		*got = q.out_len;
		*size = c.size;
		snprintf(etag, etaglen, "%s", q.etag);
	}
	tdb_http_req_clear(&q);
	return rc;
}

typedef struct RangeCtx
{
	const TdbByteRange *ranges;
	const char *etag;
	uint64_t	size;
} RangeCtx;

static int
check_range(TdbRemote *r, TdbHttpReq *q, void *arg, TdbTrailError *err)
{
	RangeCtx   *c = arg;
	const TdbByteRange *rg = &c->ranges[q->tag];
	uint64_t	a,
				b,
				total;
	int			k = classify(r, q, err);

	if (k != 0)
		return k;
	if (q->etag[0] && strcmp(q->etag, c->etag) != 0)
		return tdb_trail_fail(err, TDB_TRAIL_EREPLACED,
							  "object replaced: %s has ETag %s, it had %s when the read began; rerun the query",
							  r->name, q->etag, c->etag);
	if (q->status == 200)
	{
		if (!(rg->off == 0 && rg->len == c->size))
			return tdb_trail_fail(err, TDB_TRAIL_EPROTO,
								  "%s: HTTP 200 (the whole object) where 206 (bytes %llu-%llu) was expected",
								  r->name, (unsigned long long) rg->off,
								  (unsigned long long) (rg->off + rg->len - 1));
	}
	else if (q->status != 206)
		return tdb_trail_fail(err, TDB_TRAIL_EPROTO, "%s: HTTP %ld to a range request", r->name, q->status);
	else if (!parse_content_range(q->content_range, &a, &b, &total) || a != rg->off ||
			 b != rg->off + rg->len - 1 || total != c->size)
		return tdb_trail_fail(err, TDB_TRAIL_EPROTO,
							  "%s: asked for bytes %llu-%llu/%llu, the server answered Content-Range \"%s\"",
							  r->name, (unsigned long long) rg->off,
							  (unsigned long long) (rg->off + rg->len - 1),
							  (unsigned long long) c->size, q->content_range);
	if (q->out_len != rg->len)
	{
		tdb_trail_fail(err, TDB_TRAIL_ENET, "%s: short body (%zu of %llu bytes at offset %llu)",
					   r->name, q->out_len, (unsigned long long) rg->len,
					   (unsigned long long) rg->off);
		return 1;
	}
	return 0;
}

int
tdb_remote_get_ranges(TdbRemote *r, const TdbByteRange *ranges, uint8_t **bufs, int n,
					  int max_parallel, const char *etag, uint64_t size, TdbTrailError *err)
{
	TdbHttpReq *qs = calloc(n > 0 ? (size_t) n : 1, sizeof(TdbHttpReq));
	TdbHttpReq **qp = calloc(n > 0 ? (size_t) n : 1, sizeof(TdbHttpReq *));
	RangeCtx	c = {ranges, etag, size};
	int			rc = 0;

	if (qs == NULL || qp == NULL)
		rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	for (int i = 0; i < n && rc == 0; i++)
	{
		char		range[64];

		if (ranges[i].len == 0 || ranges[i].off + ranges[i].len > size)
		{
			rc = tdb_trail_fail(err, TDB_TRAIL_EINVAL, "range %llu+%llu outside %s (%llu bytes)",
								(unsigned long long) ranges[i].off, (unsigned long long) ranges[i].len,
								r->name, (unsigned long long) size);
			break;
		}
		snprintf(range, sizeof(range), "bytes=%llu-%llu", (unsigned long long) ranges[i].off,
				 (unsigned long long) (ranges[i].off + ranges[i].len - 1));
		if (!prepare_get(r, &qs[i], range, etag))
			rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
		qs[i].out = bufs[i];
		qs[i].out_cap = ranges[i].len;
		qs[i].tag = i;
		qp[i] = &qs[i];
	}
	if (rc == 0)
		rc = run_with_retries(r, qp, n, max_parallel, check_range, &c, err);
	for (int i = 0; qs && i < n; i++)
		tdb_http_req_clear(&qs[i]);
	free(qs);
	free(qp);
	return rc;
}

/* ---- uploads ------------------------------------------------------------ */

static int
check_ok(TdbRemote *r, TdbHttpReq *q, void *arg, TdbTrailError *err)
{
	(void) arg;
	return classify(r, q, err);
}

static int
check_part(TdbRemote *r, TdbHttpReq *q, void *arg, TdbTrailError *err)
{
	int			k = classify(r, q, err);

	(void) arg;
	if (k == 0 && q->etag[0] == '\0')
		return tdb_trail_fail(err, TDB_TRAIL_EPROTO, "%s: part %d uploaded without an ETag", r->name, q->tag + 1);
	return k;
}

/* One signed request with retries; out_grow body for the caller. */
static int
s3_simple(TdbRemote *r, TdbHttpReq *q, const char *method, const char *bucket, const char *key,
		  const char *query, const uint8_t *body, size_t len, TdbTrailError *err)
{
	TdbHttpReq *qp = q;

	memset(q, 0, sizeof(*q));
	q->out_grow = true;
	if (!s3_prepare(r, q, method, bucket, key, query, body, len))
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	return run_with_retries(r, &qp, 1, 1, check_ok, NULL, err);
}

static bool
xml_value(const uint8_t *body, size_t len, const char *tag, char *out, size_t outlen)
{
	char		open[64],
				close[64];
	char	   *s = strndup((const char *) body, len);
	char	   *a,
			   *b;
	bool		ok = false;

	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	if (s && (a = strstr(s, open)) != NULL && (b = strstr(a, close)) != NULL &&
		(size_t) (b - a - strlen(open)) < outlen)
	{
		a += strlen(open);
		memcpy(out, a, (size_t) (b - a));
		out[b - a] = '\0';
		ok = true;
	}
	free(s);
	return ok;
}

static int
s3_multipart(TdbRemote *r, const uint8_t *buf, size_t len, size_t part, TdbTrailError *err)
{
	TdbHttpReq	q;
	char		upload_id[512],
				eid[1600],
				query[1800];
	int			nparts = (int) ((len + part - 1) / part);
	TdbHttpReq *parts = NULL;
	TdbHttpReq **pp = NULL;
	int			rc;
	char	   *xml = NULL;
	size_t		xl = 0;

	rc = s3_simple(r, &q, "POST", r->bucket, r->key, "uploads=", NULL, 0, err);
	if (rc == 0 && !xml_value(q.out, q.out_len, "UploadId", upload_id, sizeof(upload_id)))
		rc = tdb_trail_fail(err, TDB_TRAIL_EPROTO, "%s: no UploadId in the answer to CreateMultipartUpload", r->name);
	tdb_http_req_clear(&q);
	if (rc < 0)
		return rc;
	tdb_s3_uri_encode(upload_id, 0, eid, sizeof(eid));

	parts = calloc((size_t) nparts, sizeof(TdbHttpReq));
	pp = calloc((size_t) nparts, sizeof(TdbHttpReq *));
	xml = malloc((size_t) nparts * 400 + 200);
	if (!parts || !pp || !xml)
	{
		rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
		goto abort;
	}
	for (int i = 0; i < nparts; i++)
	{
		size_t		off = (size_t) i * part;
		size_t		n = len - off < part ? len - off : part;

		snprintf(query, sizeof(query), "partNumber=%d&uploadId=%s", i + 1, eid);
		parts[i].out_grow = true;
		parts[i].tag = i;
		if (!s3_prepare(r, &parts[i], "PUT", r->bucket, r->key, query, buf + off, n))
		{
			rc = tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
			goto abort;
		}
		pp[i] = &parts[i];
	}
	if ((rc = run_with_retries(r, pp, nparts, 4, check_part, NULL, err)) < 0)
		goto abort;

	xl = (size_t) sprintf(xml, "<CompleteMultipartUpload>");
	for (int i = 0; i < nparts; i++)
		xl += (size_t) sprintf(xml + xl, "<Part><PartNumber>%d</PartNumber><ETag>%.300s</ETag></Part>",
							   i + 1, parts[i].etag);
	xl += (size_t) sprintf(xml + xl, "</CompleteMultipartUpload>");
	snprintf(query, sizeof(query), "uploadId=%s", eid);
	rc = s3_simple(r, &q, "POST", r->bucket, r->key, query, (const uint8_t *) xml, xl, err);
	/* S3 may answer 200 and put an error in the body */
	if (rc == 0 && q.out_len > 0 && memmem(q.out, q.out_len, "<Error>", 7) != NULL)
	{
		char		code[64] = "";

		xml_value(q.out, q.out_len, "Code", code, sizeof(code));
		rc = tdb_trail_fail(err, TDB_TRAIL_EHTTP, "%s: CompleteMultipartUpload failed (%s)", r->name, code);
	}
	tdb_http_req_clear(&q);
	if (rc == 0)
		goto done;

abort:
	{
		/* best effort: parts of an unfinished upload cost storage until aborted */
		TdbTrailError ignore;

		snprintf(query, sizeof(query), "uploadId=%s", eid);
		s3_simple(r, &q, "DELETE", r->bucket, r->key, query, NULL, 0, &ignore);
		tdb_http_req_clear(&q);
	}
done:
	for (int i = 0; parts && i < nparts; i++)
		tdb_http_req_clear(&parts[i]);
	free(parts);
	free(pp);
	free(xml);
	return rc;
}

/*
 * Written unnamed (O_TMPFILE) in path's directory, named path.tmp.<pid>[.n]
 * when complete (linkat never replaces a file), renamed to path: a kill
 * while writing leaves nothing, and a file planted at the temporary name is
 * never written into.  Without O_TMPFILE the name is created O_EXCL.
 */
static int
store_local(const char *path, const void *buf, size_t len, TdbTrailError *err)
{
	char		tmp[4096],
				dir[4096],
				proc[64];
	int			fd,
				e;
	bool		unnamed;
	const char *slash = strrchr(path, '/');

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int) getpid()) >= (int) sizeof(tmp) - 16)
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "path too long");
	if (slash == NULL)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int) (slash - path), path);
	fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
	unnamed = fd >= 0;
	if (!unnamed)				/* no FIFO, symlink or planted file at the name */
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return tdb_trail_fail(err, TDB_TRAIL_EIO, "could not create \"%s\": %s", tmp, strerror(errno));
	e = 0;
	for (size_t at = 0; at < len && e == 0;)
	{
		ssize_t		w = write(fd, (const uint8_t *) buf + at, len - at);

		e = w < 0 ? (errno == EINTR ? 0 : errno) : w == 0 ? ENOSPC : 0;
		at += w > 0 ? (size_t) w : 0;
	}
	if (e != 0 || fsync(fd) != 0)
	{
		e = e ? e : errno;
		close(fd);
		if (!unnamed)
			unlink(tmp);
		return tdb_trail_fail(err, TDB_TRAIL_EIO, "could not write \"%s\": %s", unnamed ? dir : tmp, strerror(e));
	}
	if (unnamed)
	{
		size_t		base = strlen(tmp);
		int			rc = -1;

		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		for (int n = 0; n < 100 && rc != 0; n++)
		{
			if (n > 0)
				snprintf(tmp + base, sizeof(tmp) - base, ".%d", n);
			rc = linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW);
			if (rc != 0 && errno != EEXIST)
				break;
		}
		if (rc != 0)
		{
			e = errno;
			close(fd);
			return tdb_trail_fail(err, TDB_TRAIL_EIO, "could not name \"%s\": %s", tmp, strerror(e));
		}
	}
	if (close(fd) != 0)
	{
		e = errno;
		unlink(tmp);
		return tdb_trail_fail(err, TDB_TRAIL_EIO, "could not close \"%s\": %s", tmp, strerror(e));
	}
	if (rename(tmp, path) != 0)
	{
		e = errno;
		unlink(tmp);
		return tdb_trail_fail(err, TDB_TRAIL_EIO, "could not rename to \"%s\": %s", path, strerror(e));
	}
	return 0;
}

int
tdb_trail_store(const char *dest, const void *buf, size_t len, const TdbS3Config *s3,
				const TdbNetOptions *net, size_t part_size, TdbTrailError *err)
{
	TdbRemote  *r;
	int			rc;

	if (strncmp(dest, "http://", 7) == 0 || strncmp(dest, "https://", 8) == 0)
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "http(s) destinations are read only; use s3://");
	if (strncmp(dest, "s3://", 5) != 0)
		return store_local(dest, buf, len, err);
	if (part_size == 0)
		part_size = 64u << 20;
	if (part_size < (5u << 20))
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "S3 parts must be at least 5 MiB");
	if ((rc = tdb_remote_open(dest, s3, net, &r, err)) < 0)
		return rc;
	if (r->key[0] == '\0')
		rc = tdb_trail_fail(err, TDB_TRAIL_EINVAL, "%s: no object key", dest);
	else if (len <= part_size)
	{
		TdbHttpReq	q;

		rc = s3_simple(r, &q, "PUT", r->bucket, r->key, "", buf, len, err);
		tdb_http_req_clear(&q);
	}
	else
		rc = s3_multipart(r, buf, len, part_size, err);
	tdb_remote_close(r);
	return rc;
}

int
tdb_s3_create_bucket(const TdbS3Config *s3, const TdbNetOptions *net, const char *bucket,
					 TdbTrailError *err)
{
	char		url[128];
	TdbRemote  *r;
	TdbHttpReq	q;
	int			rc;

	snprintf(url, sizeof(url), "s3://%s/", bucket);
	if ((rc = tdb_remote_open(url, s3, net, &r, err)) < 0)
		return rc;
	rc = s3_simple(r, &q, "PUT", r->bucket, NULL, "", NULL, 0, err);
	if (rc < 0 && q.status == 409)	/* BucketAlreadyOwnedByYou */
		rc = 0;
	tdb_http_req_clear(&q);
	tdb_remote_close(r);
	return rc;
}
