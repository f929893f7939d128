/*
 * sigv4.h
 *	  SHA-256, HMAC-SHA-256 and AWS Signature Version 4 for S3 requests.
 *
 * Pure computation (no I/O, no curl): the hashes are OpenSSL's, the SigV4
 * steps follow the AWS documentation; the unit tests check both against
 * published test vectors.
 */
#ifndef TDB_TRAIL_SIGV4_H
#define TDB_TRAIL_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* false only when OpenSSL fails (out of memory, no SHA-256 provider) */
bool		tdb_sha256(const void *data, size_t len, uint8_t out[32]);
bool		tdb_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t len,
							uint8_t out[32]);
void		tdb_hex(const uint8_t *in, size_t len, char *out);	/* 2 * len + 1 */

/* A header to sign: lowercase name, trimmed value. */
typedef struct TdbSigHeader
{
	const char *name;
	const char *value;
} TdbSigHeader;

/*
 * The Authorization header value for one request.  canonical_uri and
 * canonical_query must already be URI-encoded as S3 wants (query sorted by
 * name); headers are sorted here.  amz_date is "YYYYMMDDTHHMMSSZ".
 * Returns 0, or -1 when out is too small.
 */
int			tdb_sigv4_authorization(const char *method, const char *canonical_uri,
									const char *canonical_query,
									const TdbSigHeader *headers, int nheaders,
									const char *payload_sha256_hex,
									const char *region, const char *service,
									const char *amz_date,
									const char *access_key, const char *secret_key,
									char *out, size_t outlen);

/* S3 URI encoding: unreserved characters kept, '/' kept when keep_slash. */
void		tdb_s3_uri_encode(const char *in, int keep_slash, char *out, size_t outlen);

#endif							/* TDB_TRAIL_SIGV4_H */
