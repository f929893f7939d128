/*
 * sigv4.c
 *	  SHA-256 and HMAC-SHA-256 through OpenSSL's libcrypto (EVP), and the
 *	  AWS Signature Version 4 canonical request / string to sign / signing
 *	  key chain.
 *
 * Secrets only pass through the HMAC key schedule here; nothing in this
 * file formats them into a message.
 */
#include "sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool
tdb_sha256(const void *data, size_t len, uint8_t out[32])
{
	unsigned int n = 0;

	return EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) == 1 && n == 32;
}

bool
tdb_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t len, uint8_t out[32])
{
	unsigned int n = 0;

	return HMAC(EVP_sha256(), key, (int) keylen, msg, len, out, &n) != NULL && n == 32;
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

void
tdb_s3_uri_encode(const char *in, int keep_slash, char *out, size_t outlen)
{
	static const char digits[] = "0123456789ABCDEF";
	size_t		o = 0;

	for (; *in && o + 4 < outlen; in++)
	{
		unsigned char ch = (unsigned char) *in;

		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
			ch == '-' || ch == '_' || ch == '.' || ch == '~' || (ch == '/' && keep_slash))
			out[o++] = (char) ch;
		else
		{
			out[o++] = '%';
			out[o++] = digits[ch >> 4];
			out[o++] = digits[ch & 15];
		}
	}
	out[o] = '\0';
}

static int
header_cmp(const void *a, const void *b)
{
	return strcmp(((const TdbSigHeader *) a)->name, ((const TdbSigHeader *) b)->name);
}

int
tdb_sigv4_authorization(const char *method, const char *canonical_uri,
						const char *canonical_query, const TdbSigHeader *headers,
						int nheaders, const char *payload_sha256_hex, const char *region,
						const char *service, const char *amz_date, const char *access_key,
						const char *secret_key, char *out, size_t outlen)
{
	TdbSigHeader sorted[16];
	char		canon[8192];
	char		signed_names[512];
	char		sts[1024];
	char		scope[128];
	char		date[9];
	uint8_t		hash[32],
				kdate[32],
				kregion[32],
				kservice[32],
				ksigning[32],
				sig[32];
	char		hashhex[65],
				sighex[65];
	char		kseed[256];
	size_t		o = 0,
				so = 0;
	int			n;
	bool		ok;

	if (nheaders > 16 || strlen(amz_date) != 16)
		return -1;
	memcpy(sorted, headers, sizeof(TdbSigHeader) * (size_t) nheaders);
	qsort(sorted, (size_t) nheaders, sizeof(TdbSigHeader), header_cmp);
	memcpy(date, amz_date, 8);
	date[8] = '\0';

	n = snprintf(canon, sizeof(canon), "%s\n%s\n%s\n", method, canonical_uri, canonical_query);
	if (n < 0 || (size_t) n >= sizeof(canon))
		return -1;
	o = (size_t) n;
	signed_names[0] = '\0';
	for (int i = 0; i < nheaders; i++)
	{
		n = snprintf(canon + o, sizeof(canon) - o, "%s:%s\n", sorted[i].name, sorted[i].value);
		if (n < 0 || (size_t) n >= sizeof(canon) - o)
			return -1;
		o += (size_t) n;
		n = snprintf(signed_names + so, sizeof(signed_names) - so, "%s%s",
					 i ? ";" : "", sorted[i].name);
		if (n < 0 || (size_t) n >= sizeof(signed_names) - so)
			return -1;
		so += (size_t) n;
	}
	n = snprintf(canon + o, sizeof(canon) - o, "\n%s\n%s", signed_names, payload_sha256_hex);
	if (n < 0 || (size_t) n >= sizeof(canon) - o)
		return -1;
	o += (size_t) n;

	if (!tdb_sha256(canon, o, hash))
		return -1;
	tdb_hex(hash, 32, hashhex);
	snprintf(scope, sizeof(scope), "%s/%s/%s/aws4_request", date, region, service);
	n = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s\n%s", amz_date, scope, hashhex);
	if (n < 0 || (size_t) n >= sizeof(sts))
		return -1;

	n = snprintf(kseed, sizeof(kseed), "AWS4%s", secret_key);
	if (n < 0 || (size_t) n >= sizeof(kseed))
		return -1;
	ok = tdb_hmac_sha256(kseed, (size_t) n, date, 8, kdate) &&
		tdb_hmac_sha256(kdate, 32, region, strlen(region), kregion) &&
		tdb_hmac_sha256(kregion, 32, service, strlen(service), kservice) &&
		tdb_hmac_sha256(kservice, 32, "aws4_request", 12, ksigning) &&
		tdb_hmac_sha256(ksigning, 32, sts, strlen(sts), sig);
	memset(kseed, 0, sizeof(kseed));
	if (!ok)
		return -1;
	tdb_hex(sig, 32, sighex);

	n = snprintf(out, outlen, "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
				 access_key, scope, signed_names, sighex);
	return (n < 0 || (size_t) n >= outlen) ? -1 : 0;
}
