/*
 * sha256.h
 *	  SHA-256 for the trail code: S3 payload hashes (remote.c) and the disk
 *	  cache's file names (cache.c).
 *
 * OpenSSL's libcrypto computes it: sha256.c is the only file that includes
 * OpenSSL, as http.c is the only one that includes curl.
 */
#ifndef TDB_TRAIL_SHA256_H
#define TDB_TRAIL_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* false only when OpenSSL fails (out of memory, no SHA-256 provider) */
bool		tdb_sha256(const void *data, size_t len, uint8_t out[32]);

/* lowercase hex of len bytes into out, which holds 2 * len + 1 */
void		tdb_hex(const uint8_t *in, size_t len, char *out);

#endif							/* TDB_TRAIL_SHA256_H */
