/*
 * sha256.c
 *	  SHA-256 through OpenSSL's EVP interface (libcrypto, which libcurl
 *	  loads anyway for TLS and for the SigV4 signatures it computes).
 */
#include "sha256.h"

#include <openssl/evp.h>

bool
tdb_sha256(const void *data, size_t len, uint8_t out[32])
{
	unsigned int n = 0;

	return EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) == 1 && n == 32;
}

void
tdb_hex(const uint8_t *in, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++)
	{
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * len] = '\0';
}
