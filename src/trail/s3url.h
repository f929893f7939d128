/*
 * s3url.h
 *	  S3's names (s3url.c): s3://bucket/key and the URI encoding of keys.
 */
#ifndef TDB_TRAIL_S3URL_H
#define TDB_TRAIL_S3URL_H

#include <stddef.h>

/* Split s3://bucket/key; 0 or TDB_TRAIL_EINVAL. */
int			tdb_s3_parse_url(const char *url, char *bucket, size_t bucketlen,
							 const char **key);

/*
 * S3's URI encoding (its canonical form for SigV4): A-Z a-z 0-9 - _ . ~
 * kept, '/' kept when keep_slash, every other byte %XX (upper-case hex).
 * out holds 3 * strlen(in) + 1; longer input is cut.
 */
void		tdb_s3_uri_encode(const char *in, int keep_slash, char *out, size_t outlen);

#endif							/* TDB_TRAIL_S3URL_H */
