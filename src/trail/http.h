/*
 * http.h
 *	  The one doorway to libcurl (only http.c includes curl.h): run a batch
 *	  of HTTP requests concurrently and report, per request, the status,
 *	  the headers the pager needs and how the transport ended.
 *
 * Nothing here knows S3 or retries: remote.c decides what a status means
 * and whether to try again.  Replacing or mocking curl touches http.c only.
 */
#ifndef TDB_TRAIL_HTTP_H
#define TDB_TRAIL_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "types.h"

#define TDB_HTTP_MAX_HEADERS 12

/* How the transfer ended, apart from the HTTP status. */
typedef enum TdbHttpTransport
{
	TDB_HTTP_DONE = 0,			/* a complete response was received */
	TDB_HTTP_TIMEOUT,			/* connect timeout or below the low-speed limit */
	TDB_HTTP_RESET,				/* connection refused, reset, closed early */
	TDB_HTTP_SHORT,				/* body shorter than its Content-Length */
	TDB_HTTP_OVERFLOW,			/* body longer than the buffer (range ignored?) */
	TDB_HTTP_CANCELED,			/* the cancel callback said stop */
	TDB_HTTP_FAILED				/* anything else curl reports */
} TdbHttpTransport;

typedef struct TdbHttpReq
{
	/* request */
	const char *method;			/* GET, PUT, POST, DELETE, HEAD */
	char	   *url;
	char	   *headers[TDB_HTTP_MAX_HEADERS];	/* "Name: value", owned */
	int			nheaders;
	const uint8_t *body;
	size_t		body_len;
	int			tag;			/* the caller's, untouched */

	/*
	 * AWS Signature Version 4, computed by curl (CURLOPT_AWS_SIGV4) when
	 * aws_sigv4 is set: "aws:amz:REGION:SERVICE".  The caller's strings,
	 * which must outlive the request.  curl signs the URL's path and query
	 * exactly as written and every header above, and takes the payload hash
	 * from an x-amz-content-sha256 header (remote.c explains what that
	 * asks of the caller).
	 */
	const char *aws_sigv4;
	const char *aws_key;		/* access key id */
	const char *aws_secret;		/* secret access key */

	/* response body: into out (out_cap bytes, grown if out_grow) */
	uint8_t    *out;
	size_t		out_cap;
	bool		out_grow;		/* out is malloc'd by http.c, caller frees */
	size_t		out_len;
	char		errbody[1024];	/* first bytes of a non-2xx body (S3 XML) */
	size_t		errbody_len;

	/* response */
	long		status;
	char		etag[256];
	char		content_range[128];
	int64_t		content_length; /* -1: not given */
	TdbHttpTransport transport;
	char		transport_msg[256];
} TdbHttpReq;

typedef struct TdbHttp TdbHttp;

/* NULL on failure (curl could not initialise). */
TdbHttp    *tdb_http_new(void);
void		tdb_http_free(TdbHttp *h);

/*
 * Run reqs concurrently (connections are reused across calls).  Returns 0
 * when every request has ended one way or another (see transport), or
 * TDB_TRAIL_ECANCELED when the cancel callback stopped the batch; cancel is
 * polled at least every 100 ms.
 */
int			tdb_http_run(TdbHttp *h, TdbHttpReq **reqs, int n, const TdbNetOptions *net);

/* The same with at most maxp transfers in flight, the next started as one ends. */
int			tdb_http_run_window(TdbHttp *h, TdbHttpReq **reqs, int n, int maxp,
								const TdbNetOptions *net);

/* Add a "Name: value" header (copied); false when full or out of memory. */
bool		tdb_http_add_header(TdbHttpReq *r, const char *name, const char *value);

/* Free url and headers (and out when out_grow); resets the response. */
void		tdb_http_req_clear(TdbHttpReq *r);

/* Forget the response of a previous attempt before a retry. */
void		tdb_http_req_reset_response(TdbHttpReq *r);

#endif							/* TDB_TRAIL_HTTP_H */
