/*
 * types.h
 *	  The plain types the pager (pager.h), the object store (remote.h) and
 *	  the HTTP doorway (http.h) share: where S3 is, how the network behaves,
 *	  a byte range.  Types only, no functions: any of them includes it
 *	  without depending on the others.
 */
#ifndef TDB_TRAIL_TYPES_H
#define TDB_TRAIL_TYPES_H

#include <stdbool.h>
#include <stdint.h>

/* Where and how to reach S3 (or MinIO). */
typedef struct TdbS3Config
{
	const char *endpoint;		/* "http://127.0.0.1:9000"; NULL: AWS */
	const char *region;			/* NULL: "us-east-1" */
	const char *access_key;
	const char *secret_key;
	const char *session_token;	/* NULL unless temporary credentials */
	bool		path_style;		/* bucket in the path (MinIO) */
} TdbS3Config;

/* Network behaviour shared by the pager and the uploader. */
typedef struct TdbNetOptions
{
	int			max_retries;	/* 0: 5; negative: none */
	int			retry_base_ms;	/* first backoff; 0: 100 */
	int			retry_max_ms;	/* backoff cap; 0: 5000 */
	long		low_speed_bytes;	/* abort below this rate ... 0: 1024 */
	long		low_speed_seconds;	/* ... for this long; 0: 10 */
	long		connect_timeout_ms; /* 0: 10000 */
	/* Polled at least every 100 ms during waits; nonzero stops the call. */
	int			(*cancel) (void *arg);
	void	   *cancel_arg;
} TdbNetOptions;

/* A byte range [off, off + len). */
typedef struct TdbByteRange
{
	uint64_t	off;
	uint64_t	len;
} TdbByteRange;

/* What a pager did (pager.h's tdb_pager_stats). */
typedef struct TdbPagerStats
{
	uint64_t	reads;			/* tdb_pager_read calls */
	uint64_t	requests;		/* HTTP requests sent (retries included) */
	uint64_t	retries;
	uint64_t	bytes_network;	/* body bytes received */
	uint64_t	bytes_disk_cache;	/* served from cache_dir */
	uint64_t	bytes_memory;	/* served from the LRU */
	uint64_t	bytes_local;	/* read from a local file */
	double		wait_seconds;	/* the caller waited for the network (object store or HTTP) */
	bool		validation_reused;	/* size and ETag known from an earlier open */
	double		validation_age; /* seconds since they were learnt */
	bool		validation_by_token;	/* ... under this opener's token */
} TdbPagerStats;

#endif							/* TDB_TRAIL_TYPES_H */
