/*
 * trail_fixture_s3.h
 *	  What the tests against MinIO share (src/trail/tests/run.sh starts it
 *	  and the fault proxy): the bucket, quick network options, uploads,
 *	  the proxy's fault plans.
 */
#ifndef TDB_TRAIL_FIXTURE_S3_H
#define TDB_TRAIL_FIXTURE_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pager.h"
#include "types.h"

#define BUCKET "trail-tests"

/* 4 retries from 20 ms, a 2 s low-speed limit: faults end quickly. */
TdbNetOptions fx_fast_net(void);

/* o zeroed, then url on c with fx_fast_net() and 16 kB blocks. */
void		fx_pager_options(TdbPagerOptions *o, const TdbS3Config *c, const char *url);
/* url opened on S3 (c) as a fresh process sees it (no footer decoded before); lru_bytes 0: the pager's
 * own 64 MiB; false after a unit_fail. */
bool		fx_s3_open_fresh(const TdbS3Config *c, const char *url, size_t lru_bytes, TdbPager **p, TdbTrailReader **r);

/* BUCKET exists; false after a unit_fail. */
bool		fx_ensure_bucket(const TdbS3Config *c);

/* buf stored as s3://BUCKET/key (parts of part bytes; 0: one PUT). */
bool		fx_put(const TdbS3Config *c, const char *key, const void *buf, size_t len, size_t part);

/* n pseudo-random bytes of seed (malloc'd). */
uint8_t    *fx_random_bytes(size_t n, uint64_t seed);

/*
 * buf stored as s3://BUCKET/key directly, and *proxied filled to read it
 * through the fault proxy; false (after a skip line or a unit_fail) when
 * either is not there.
 */
bool		fx_put_for_proxy(TdbS3Config *proxied, const char *key, const void *buf, size_t len);

/* The fault proxy's next faults, one per request ("" : none; fault_proxy.py). */
bool		fx_proxy_plan(const char *plan);

/* CLOCK_MONOTONIC in seconds. */
double		fx_now(void);

#endif							/* TDB_TRAIL_FIXTURE_S3_H */
