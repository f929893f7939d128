/*
 * test_sign.c
 *	  SHA-256 (OpenSSL) and AWS Signature Version 4 as libcurl computes it
 *	  for http.c, against published test vectors.
 *
 * The signatures are the four examples of the S3 API reference ("Signature
 * Calculations for the Authorization Header: Transferring Payload in a
 * Single Chunk"): key AKIAIOSFODNN7EXAMPLE, time 20130524T000000Z, host
 * examplebucket.s3.amazonaws.com.  Each request goes through
 * tdb_http_run() to a listener on 127.0.0.1 that records what curl sent and
 * answers like a server would.  curl takes the time from an x-amz-date
 * header when the request has one, which makes its signature reproducible;
 * the Host header is set to the example's.  MinIO checks real signatures in
 * test_s3.c.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http.h"
#include "remote.h"
#include "sha256.h"
#include "trail_unit.h"

#define EX_KEY		"AKIAIOSFODNN7EXAMPLE"
#define EX_SECRET	"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define EX_HOST		"examplebucket.s3.amazonaws.com"
#define EX_DATE		"20130524T000000Z"
#define EMPTY_SHA	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

UNIT_TEST(test_trail_sha256_vectors)
{
	uint8_t		h[32];
	char		hex[65];
	char	   *a = malloc(1000000);

	/* FIPS 180-2, appendix B.1 and B.3, and the empty message */
	CHECK(tdb_sha256("abc", 3, h));
	tdb_hex(h, 32, hex);
	CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
	CHECK(tdb_sha256("", 0, h));
	tdb_hex(h, 32, hex);
	CHECK(strcmp(hex, EMPTY_SHA) == 0);
	memset(a, 'a', 1000000);
	CHECK(tdb_sha256(a, 1000000, h));
	tdb_hex(h, 32, hex);
	CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0);
	free(a);
}

/* ---- a listener that records one request per connection ----------------- */

#define CAPTURE_MAX 8

typedef struct Capture
{
	int			fd;
	int			port;
	int			n;				/* connections to serve */
	char		head[CAPTURE_MAX][4096];	/* request line and headers */
	size_t		body_len[CAPTURE_MAX];
	pthread_t	thread;
} Capture;

static bool
wait_readable(int fd)
{
	struct pollfd p = {fd, POLLIN, 0};

	return poll(&p, 1, 10000) == 1;	/* bounded: a broken test cannot hang */
}

static bool
write_all(int fd, const char *s)
{
	size_t		len = strlen(s);

	while (len > 0)
	{
		ssize_t		w = write(fd, s, len);

		if (w <= 0)
			return false;
		s += w;
		len -= (size_t) w;
	}
	return true;
}

/* The value of header name in head, or NULL. */
static const char *
head_value(const char *head, const char *name)
{
	size_t		nl = strlen(name);

	for (const char *l = strstr(head, "\r\n"); l && l[2]; l = strstr(l + 2, "\r\n"))
		if (strncasecmp(l + 2, name, nl) == 0 && l[2 + nl] == ':')
			return l + 3 + nl + strspn(l + 3 + nl, " ");
	return NULL;
}

/*
 * Serve c->n connections, one request each: read the head, answer
 * 100 Continue when asked, read the body, answer 200 and close.
 */
static void *
capture_main(void *arg)
{
	Capture    *c = arg;

	for (int i = 0; i < c->n; i++)
	{
		char	   *head = c->head[i];
		size_t		n = 0;
		char	   *end = NULL;
		const char *v;
		size_t		want,
					got;
		int			s;

		if (!wait_readable(c->fd) || (s = accept(c->fd, NULL, NULL)) < 0)
			return NULL;
		while (end == NULL && n < sizeof(c->head[i]) - 1 && wait_readable(s))
		{
			ssize_t		k = read(s, head + n, sizeof(c->head[i]) - 1 - n);

			if (k <= 0)
				break;
			n += (size_t) k;
			head[n] = '\0';
			end = strstr(head, "\r\n\r\n");
		}
		if (end == NULL)
		{
			close(s);
			return NULL;
		}
		v = head_value(head, "Content-Length");
		want = v ? strtoul(v, NULL, 10) : 0;
		got = n - (size_t) (end + 4 - head);
		end[2] = '\0';			/* keep the head, with its last CRLF */
		if ((v = head_value(head, "Expect")) != NULL && strncasecmp(v, "100-continue", 12) == 0)
			write_all(s, "HTTP/1.1 100 Continue\r\n\r\n");
		/* read the body, so that closing sends no reset over our answer */
		while (got < want && wait_readable(s))
		{
			char		buf[4096];
			ssize_t		k = read(s, buf, sizeof(buf));

			if (k <= 0)
				break;
			got += (size_t) k;
		}
		c->body_len[i] = got;
		write_all(s, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
		close(s);
	}
	return NULL;
}

static bool
capture_start(Capture *c, int n)
{
	struct sockaddr_in a;
	socklen_t	al = sizeof(a);

	memset(c, 0, sizeof(*c));
	c->n = n;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((c->fd = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
		bind(c->fd, (struct sockaddr *) &a, sizeof(a)) != 0 || listen(c->fd, 8) != 0 ||
		getsockname(c->fd, (struct sockaddr *) &a, &al) != 0)
		return false;
	c->port = ntohs(a.sin_port);
	return pthread_create(&c->thread, NULL, capture_main, c) == 0;
}

static void
capture_stop(Capture *c)
{
	pthread_join(c->thread, NULL);
	close(c->fd);
}

/* ---- the examples ------------------------------------------------------- */

typedef struct Example
{
	const char *method;
	const char *path;			/* as the URL carries it: S3-encoded */
	const char *query;
	const char *body;
	const char *headers[4];		/* besides Host, x-amz-date, x-amz-content-sha256 */
	const char *signed_headers;
	const char *signature;
} Example;

UNIT_TEST(test_trail_sigv4_vectors_through_curl)
{
	char		put_path[64];
	Example		ex[4] = {
		{"GET", "/test.txt", "", NULL, {"Range: bytes=0-9"},
			"host;range;x-amz-content-sha256;x-amz-date",
		"f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"},
		{"PUT", put_path, "", "Welcome to Amazon S3.",
			{"Date: Fri, 24 May 2013 00:00:00 GMT", "x-amz-storage-class: REDUCED_REDUNDANCY"},
			"date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
		"98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"},
		/* "?lifecycle" would be signed as written, without the "=" S3 adds */
		{"GET", "/", "lifecycle=", NULL, {NULL},
			"host;x-amz-content-sha256;x-amz-date",
		"fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"},
		{"GET", "/", "max-keys=2&prefix=J", NULL, {NULL},
			"host;x-amz-content-sha256;x-amz-date",
		"34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"},
	};
	Capture		cap;
	TdbHttp    *h = tdb_http_new();
	TdbNetOptions net;

	/* the key "test$file.text", encoded as S3 wants it in the URL */
	put_path[0] = '/';
	tdb_s3_uri_encode("test$file.text", 1, put_path + 1, sizeof(put_path) - 1);
	CHECK(strcmp(put_path, "/test%24file.text") == 0);
	memset(&net, 0, sizeof(net));
	net.low_speed_bytes = 1;
	net.low_speed_seconds = 10;
	net.connect_timeout_ms = 5000;
	if (h == NULL || !capture_start(&cap, 4))
	{
		unit_fail(__FILE__, __LINE__, "curl or the listener did not start");
		tdb_http_free(h);
		return;
	}
	for (int i = 0; i < 4; i++)
	{
		const Example *e = &ex[i];
		TdbHttpReq	q;
		TdbHttpReq *qp = &q;
		char		url[256],
					payload[65],
					want[512];
		uint8_t		hash[32];
		size_t		blen = e->body ? strlen(e->body) : 0;

		memset(&q, 0, sizeof(q));
		CHECK(tdb_sha256(e->body ? e->body : "", blen, hash));
		tdb_hex(hash, 32, payload);
		if (e->body)
			CHECK(strcmp(payload, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072") == 0);
		snprintf(url, sizeof(url), "http://127.0.0.1:%d%s%s%s", cap.port, e->path,
				 e->query[0] ? "?" : "", e->query);
		q.url = strdup(url);
		q.method = e->method;
		q.body = (const uint8_t *) e->body;
		q.body_len = blen;
		q.out_grow = true;
		q.aws_sigv4 = "aws:amz:us-east-1:s3";
		q.aws_key = EX_KEY;
		q.aws_secret = EX_SECRET;
		CHECK(tdb_http_add_header(&q, "Host", EX_HOST));
		CHECK(tdb_http_add_header(&q, "x-amz-date", EX_DATE));
		CHECK(tdb_http_add_header(&q, "x-amz-content-sha256", payload));
		for (int k = 0; k < 4 && e->headers[k]; k++)
		{
			char		name[64];
			const char *colon = strchr(e->headers[k], ':');

			snprintf(name, sizeof(name), "%.*s", (int) (colon - e->headers[k]), e->headers[k]);
			CHECK(tdb_http_add_header(&q, name, colon + 2));
		}
		CHECK(tdb_http_run(h, &qp, 1, &net) == 0);
		CHECK(q.transport == TDB_HTTP_DONE);
		CHECK_EQ_U64(q.status, 200);

		snprintf(want, sizeof(want),
				 "\r\nAuthorization: AWS4-HMAC-SHA256 Credential=" EX_KEY
				 "/20130524/us-east-1/s3/aws4_request, SignedHeaders=%s, Signature=%s\r\n",
				 e->signed_headers, e->signature);
		if (strstr(cap.head[i], want) == NULL)
			unit_fail(__FILE__, __LINE__, "%s %s%s%s: wanted%ssent:\n%s", e->method, e->path,
					  e->query[0] ? "?" : "", e->query, want, cap.head[i]);
		CHECK(strstr(cap.head[i], "wJalrXUtnFEMI") == NULL);
		CHECK_EQ_U64(cap.body_len[i], blen);
		/* the path and query went out as written: what was signed */
		snprintf(want, sizeof(want), "%s %s%s%s HTTP/1.1\r\n", e->method, e->path,
				 e->query[0] ? "?" : "", e->query);
		CHECK(strncmp(cap.head[i], want, strlen(want)) == 0);
		/*
		 * curl's own "Expect: 100-continue" on a PUT body goes out unsigned
		 * (SignedHeaders above has no "expect"), which S3 and MinIO accept.
		 */
		if (e->body)
			CHECK(head_value(cap.head[i], "Expect") != NULL);
		tdb_http_req_clear(&q);
	}
	capture_stop(&cap);
	tdb_http_free(h);
}

UNIT_TEST(test_trail_s3_uri_encode)
{
	char		enc[128];

	tdb_s3_uri_encode("a b/c~d*e", 1, enc, sizeof(enc));
	CHECK(strcmp(enc, "a%20b/c~d%2Ae") == 0);
	tdb_s3_uri_encode("a/b", 0, enc, sizeof(enc));
	CHECK(strcmp(enc, "a%2Fb") == 0);
	/* a literal % and non-ASCII bytes, upper-case hex; unreserved kept */
	tdb_s3_uri_encode("%41+=&?#\xc3\xa9-_.~", 1, enc, sizeof(enc));
	CHECK(strcmp(enc, "%2541%2B%3D%26%3F%23%C3%A9-_.~") == 0);
}
