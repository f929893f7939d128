/*
 * http.c
 *	  The only file that uses libcurl (STYLE: one file per foreign library).
 *
 * A TdbHttp owns a curl multi handle, whose connection cache keeps
 * connections alive between batches.  Each request gets an easy handle for
 * the duration of a batch.  We set what curl leaves off by default and S3
 * needs: a low-speed limit (a stalled body otherwise waits forever), a
 * connect timeout, no signals (PostgreSQL backends own their signal
 * handlers), and a progress callback so a cancel is noticed mid-transfer.
 * Between transfers the wait in curl_multi_poll is capped at 100 ms and the
 * cancel callback is polled there too.
 */
#include "http.h"

#include <ctype.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trail.h"

struct TdbHttp
{
	CURLM	   *multi;
};

static pthread_once_t http_once = PTHREAD_ONCE_INIT;
static bool http_global_ok;

static void
http_global_init(void)
{
	http_global_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

TdbHttp *
tdb_http_new(void)
{
	TdbHttp    *h;

	pthread_once(&http_once, http_global_init);
	if (!http_global_ok)
		return NULL;
	h = calloc(1, sizeof(*h));
	if (h == NULL)
		return NULL;
	h->multi = curl_multi_init();
	if (h->multi == NULL)
	{
		free(h);
		return NULL;
	}
	return h;
}

void
tdb_http_free(TdbHttp *h)
{
	if (h == NULL)
		return;
	curl_multi_cleanup(h->multi);
	free(h);
}

bool
tdb_http_add_header(TdbHttpReq *r, const char *name, const char *value)
{
	size_t		n = strlen(name) + strlen(value) + 3;

	if (r->nheaders >= TDB_HTTP_MAX_HEADERS)
		return false;
	r->headers[r->nheaders] = malloc(n);
	if (r->headers[r->nheaders] == NULL)
		return false;
	snprintf(r->headers[r->nheaders], n, "%s: %s", name, value);
	r->nheaders++;
	return true;
}

void
tdb_http_req_reset_response(TdbHttpReq *r)
{
	r->out_len = 0;
	r->errbody_len = 0;
	r->errbody[0] = '\0';
	r->status = 0;
	r->etag[0] = '\0';
	r->content_range[0] = '\0';
	r->content_length = -1;
	r->transport = TDB_HTTP_DONE;
	r->transport_msg[0] = '\0';
}

void
tdb_http_req_clear(TdbHttpReq *r)
{
	free(r->url);
	r->url = NULL;
	for (int i = 0; i < r->nheaders; i++)
		free(r->headers[i]);
	r->nheaders = 0;
	if (r->out_grow)
	{
		free(r->out);
		r->out = NULL;
		r->out_cap = 0;
	}
	tdb_http_req_reset_response(r);
}

/* Per-transfer state. */
typedef struct Xfer
{
	TdbHttpReq *req;
	CURL	   *easy;
	struct curl_slist *hdrs;
	const TdbNetOptions *net;
	size_t		sent;
	bool		overflow;
	bool		canceled;
} Xfer;

static long
xfer_status(Xfer *x)
{
	long		code = 0;

	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
	return code;
}

static size_t
on_body(char *ptr, size_t size, size_t nmemb, void *arg)
{
	Xfer	   *x = arg;
	TdbHttpReq *r = x->req;
	size_t		n = size * nmemb;
	long		code = xfer_status(x);

	if (code < 200 || code >= 300)
	{
		size_t		room = sizeof(r->errbody) - 1 - r->errbody_len;
		size_t		k = n < room ? n : room;

		memcpy(r->errbody + r->errbody_len, ptr, k);
		r->errbody_len += k;
		r->errbody[r->errbody_len] = '\0';
		return n;
	}
	if (r->out_len + n > r->out_cap)
	{
		if (!r->out_grow)
		{
			/* more than asked for: stop now rather than download an object */
			x->overflow = true;
			return 0;
		}
		else
		{
			size_t		nc = r->out_cap ? r->out_cap : 4096;
			uint8_t    *nb;

			while (nc < r->out_len + n)
				nc *= 2;
			nb = realloc(r->out, nc);
			if (nb == NULL)
			{
				x->overflow = true;
				return 0;
			}
			r->out = nb;
			r->out_cap = nc;
		}
	}
	memcpy(r->out + r->out_len, ptr, n);
	r->out_len += n;
	return n;
}

static size_t
on_upload(char *ptr, size_t size, size_t nmemb, void *arg)
{
	Xfer	   *x = arg;
	size_t		room = size * nmemb;
	size_t		left = x->req->body_len - x->sent;
	size_t		n = left < room ? left : room;

	memcpy(ptr, x->req->body + x->sent, n);
	x->sent += n;
	return n;
}

/* Copy a header value (trimmed) if its name matches, case-insensitively. */
static void
header_value(const char *line, size_t len, const char *name, char *dst, size_t cap)
{
	size_t		nl = strlen(name);
	size_t		k;

	if (len <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
		return;
	line += nl + 1;
	len -= nl + 1;
	while (len > 0 && (*line == ' ' || *line == '\t'))
		line++, len--;
	while (len > 0 && isspace((unsigned char) line[len - 1]))
		len--;
	k = len < cap - 1 ? len : cap - 1;
	memcpy(dst, line, k);
	dst[k] = '\0';
}

static size_t
on_header(char *buf, size_t size, size_t nitems, void *arg)
{
	Xfer	   *x = arg;
	TdbHttpReq *r = x->req;
	size_t		n = size * nitems;
	char		cl[32] = "";

	/* a new status line (after a 100 Continue or a redirect): start over */
	if (n > 5 && strncmp(buf, "HTTP/", 5) == 0)
	{
		r->etag[0] = '\0';
		r->content_range[0] = '\0';
		r->content_length = -1;
		return n;
	}
	header_value(buf, n, "ETag", r->etag, sizeof(r->etag));
	header_value(buf, n, "Content-Range", r->content_range, sizeof(r->content_range));
	header_value(buf, n, "Content-Length", cl, sizeof(cl));
	if (cl[0])
		r->content_length = strtoll(cl, NULL, 10);
	return n;
}

static int
on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	Xfer	   *x = arg;

	(void) dltotal;
	(void) dlnow;
	(void) ultotal;
	(void) ulnow;
	if (x->net->cancel && x->net->cancel(x->net->cancel_arg))
	{
		x->canceled = true;
		return 1;
	}
	return 0;
}

static bool
xfer_setup(Xfer *x)
{
	TdbHttpReq *r = x->req;
	const TdbNetOptions *net = x->net;
	CURL	   *e = x->easy;

	for (int i = 0; i < r->nheaders; i++)
	{
		struct curl_slist *n = curl_slist_append(x->hdrs, r->headers[i]);

		if (n == NULL)
			return false;
		x->hdrs = n;
	}

	/*
	 * No "Expect:" header to stop curl's "Expect: 100-continue" on PUT
	 * bodies: curl's signer signs every header of CURLOPT_HTTPHEADER, that
	 * empty one too ("expect:" in the canonical request), though it is never
	 * sent, and MinIO then rebuilds it as "expect:100-continue": every
	 * signed request failed with SignatureDoesNotMatch.  The Expect header
	 * curl adds itself is not signed; S3 and MinIO accept it, and a refused
	 * upload then costs no body.
	 */
	curl_easy_setopt(e, CURLOPT_URL, r->url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(e, CURLOPT_XFERINFODATA, x);
	curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, net->low_speed_bytes);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, net->low_speed_seconds);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, net->connect_timeout_ms);
	/* never let a proxy from the environment see our signed requests */
	curl_easy_setopt(e, CURLOPT_PROXY, "");
	if (r->aws_sigv4)
	{
		if (curl_easy_setopt(e, CURLOPT_AWS_SIGV4, r->aws_sigv4) != CURLE_OK ||
			curl_easy_setopt(e, CURLOPT_USERNAME, r->aws_key) != CURLE_OK ||
			curl_easy_setopt(e, CURLOPT_PASSWORD, r->aws_secret) != CURLE_OK)
		{
			snprintf(r->transport_msg, sizeof(r->transport_msg),
					 "this libcurl cannot sign requests (CURLOPT_AWS_SIGV4: 7.75 or later, built with crypto)");
			return false;
		}
	}
	if (strcmp(r->method, "GET") == 0)
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	else if (strcmp(r->method, "HEAD") == 0)
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	else if (strcmp(r->method, "PUT") == 0)
	{
		curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, on_upload);
		curl_easy_setopt(e, CURLOPT_READDATA, x);
		curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t) r->body_len);
	}
	else if (strcmp(r->method, "POST") == 0)
	{
		curl_easy_setopt(e, CURLOPT_POST, 1L);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body ? (const char *) r->body : "");
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) r->body_len);
	}
	else
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
	return true;
}

static void
xfer_finish(Xfer *x, CURLcode rc)
{
	TdbHttpReq *r = x->req;

	r->status = xfer_status(x);
	if (rc == CURLE_OK)
	{
		r->transport = TDB_HTTP_DONE;
		return;
	}
	snprintf(r->transport_msg, sizeof(r->transport_msg), "%s", curl_easy_strerror(rc));
	if (x->canceled || rc == CURLE_ABORTED_BY_CALLBACK)
		r->transport = TDB_HTTP_CANCELED;
	else if (x->overflow)
		r->transport = TDB_HTTP_OVERFLOW;
	else if (rc == CURLE_OPERATION_TIMEDOUT)
		r->transport = TDB_HTTP_TIMEOUT;
	else if (rc == CURLE_PARTIAL_FILE)
		r->transport = TDB_HTTP_SHORT;
	else if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR ||
			 rc == CURLE_GOT_NOTHING || rc == CURLE_SSL_CONNECT_ERROR)
		r->transport = TDB_HTTP_RESET;
	else
		r->transport = TDB_HTTP_FAILED;
}

/* Start reqs[*next] (the next whose setup succeeds); false when none is left. */
static bool
start_next(TdbHttp *h, Xfer *xs, TdbHttpReq **reqs, int n, int *next, const TdbNetOptions *net)
{
	while (*next < n)
	{
		int			i = (*next)++;

		xs[i].req = reqs[i];
		xs[i].net = net;
		xs[i].easy = curl_easy_init();
		if (xs[i].easy == NULL || !xfer_setup(&xs[i]))
		{
			reqs[i]->transport = TDB_HTTP_FAILED;
			if (reqs[i]->transport_msg[0] == '\0')
				snprintf(reqs[i]->transport_msg, sizeof(reqs[i]->transport_msg), "out of memory");
			continue;
		}
		curl_easy_setopt(xs[i].easy, CURLOPT_PRIVATE, &xs[i]);
		if (curl_multi_add_handle(h->multi, xs[i].easy) != CURLM_OK)
		{
			/* not in flight: counted as failed, never waited for */
			curl_easy_cleanup(xs[i].easy);
			xs[i].easy = NULL;
			reqs[i]->transport = TDB_HTTP_FAILED;
			snprintf(reqs[i]->transport_msg, sizeof(reqs[i]->transport_msg), "curl_multi_add_handle failed");
			continue;
		}
		return true;
	}
	return false;
}

int
tdb_http_run(TdbHttp *h, TdbHttpReq **reqs, int n, const TdbNetOptions *net)
{
	return tdb_http_run_window(h, reqs, n, n, net);
}

/*
 * At most maxp transfers in flight, each one that ends replaced by the next
 * request at once: a slow response holds up its own slot only (run in
 * batches of maxp, each batch waited for the slowest of its requests).
 */
int
tdb_http_run_window(TdbHttp *h, TdbHttpReq **reqs, int n, int maxp, const TdbNetOptions *net)
{
	Xfer	   *xs = calloc(n > 0 ? (size_t) n : 1, sizeof(Xfer));
	int			running = 0,
				inflight = 0,
				next = 0;
	int			rc = 0;

	if (xs == NULL)
		return TDB_TRAIL_ENOMEM;
	if (maxp < 1)
		maxp = 1;
	/* every request not started yet reads as not done (a cancel marks them) */
	for (int i = 0; i < n; i++)
		tdb_http_req_reset_response(reqs[i]);
	while (inflight < maxp && start_next(h, xs, reqs, n, &next, net))
		inflight++;

	/* bounded: every transfer ends by completion, error, low speed or cancel */
	for (;;)
	{
		CURLMsg    *m;
		int			left;

		if (curl_multi_perform(h->multi, &running) != CURLM_OK)
			break;
		while ((m = curl_multi_info_read(h->multi, &left)) != NULL)
		{
			if (m->msg == CURLMSG_DONE)
			{
				Xfer	   *x = NULL;
				CURL	   *e = m->easy_handle;

				curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **) &x);
				if (x)
				{
					xfer_finish(x, m->data.result);
					/* its connection goes back to the pool for the next request */
					curl_multi_remove_handle(h->multi, e);
					curl_easy_cleanup(e);
					x->easy = NULL;
				}
				inflight--;
			}
		}
		while (inflight < maxp && start_next(h, xs, reqs, n, &next, net))
			inflight++;
		if (inflight == 0 && next >= n)
			break;
		if (net->cancel && net->cancel(net->cancel_arg))
		{
			rc = TDB_TRAIL_ECANCELED;
			for (int i = 0; i < n; i++)
				if (reqs[i]->transport == TDB_HTTP_DONE && reqs[i]->status == 0)
					reqs[i]->transport = TDB_HTTP_CANCELED;
			break;
		}
		curl_multi_poll(h->multi, NULL, 0, 100, NULL);
	}

	for (int i = 0; i < n; i++)
	{
		if (xs[i].easy)
		{
			curl_multi_remove_handle(h->multi, xs[i].easy);
			curl_easy_cleanup(xs[i].easy);
		}
		curl_slist_free_all(xs[i].hdrs);
	}
	free(xs);
	return rc;
}
