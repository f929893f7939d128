/*
 * remote.h
 *	  One remote object (http(s):// or s3://bucket/key): signed range GETs
 *	  with validation and retries, and uploads (single PUT or multipart).
 *
 * This is where HTTP statuses get their meaning.  Retried (with exponential
 * backoff and jitter): 5xx, 429 and S3 SlowDown, timeouts (the low-speed
 * limit included), resets and short bodies.  Not retried, each with its own
 * error: 403 (credentials), 404 (names bucket and key), 412 (object
 * replaced), a 200 where a 206 was asked for (unless the range is the whole
 * object), a wrong Content-Range or ETag.
 */
#ifndef TDB_TRAIL_REMOTE_H
#define TDB_TRAIL_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "s3url.h"			/* tdb_s3_parse_url and tdb_s3_uri_encode, for remote.h's callers */
#include "trail.h"
#include "types.h"

typedef struct TdbRemote TdbRemote;

int			tdb_remote_open(const char *url, const TdbS3Config *s3,
							const TdbNetOptions *net, TdbRemote **out,
							TdbTrailError *err);
void		tdb_remote_close(TdbRemote *r);

/* "s3://bucket/key" or the URL: what error messages name. */
const char *tdb_remote_name(const TdbRemote *r);

/*
 * The first request: the last want bytes (fewer if the object is smaller).
 * Learns the object's size and ETag.  *got bytes land at buf; they are the
 * object's bytes [size - got, size).
 */
int			tdb_remote_get_tail(TdbRemote *r, uint64_t want, uint8_t *buf,
								uint64_t *got, uint64_t *size, char *etag,
								size_t etaglen, TdbTrailError *err);

/*
 * Fetch n ranges concurrently (at most max_parallel at a time), each into
 * bufs[i], each pinned to etag with If-Match and checked against size.
 */
int			tdb_remote_get_ranges(TdbRemote *r, const TdbByteRange *ranges,
								  uint8_t **bufs, int n, int max_parallel,
								  const char *etag, uint64_t size,
								  TdbTrailError *err);

/*
 * Write a whole object: a local path (tmp + fsync + rename) or s3:// (one
 * PUT up to part_size, else a multipart upload with parts of part_size,
 * at least 5 MiB; a failed multipart upload is aborted).
 */
int			tdb_trail_store(const char *dest, const void *buf, size_t len,
							const TdbS3Config *s3, const TdbNetOptions *net,
							size_t part_size, TdbTrailError *err);

/* S3 CreateBucket (tests and the demo); an existing bucket is fine. */
int			tdb_s3_create_bucket(const TdbS3Config *s3, const TdbNetOptions *net,
								 const char *bucket, TdbTrailError *err);

/* Counters since open. */
void		tdb_remote_counters(const TdbRemote *r, uint64_t *requests,
								uint64_t *retries, uint64_t *bytes);

#endif							/* TDB_TRAIL_REMOTE_H */
