/*
 * sigv4.c
 *	  SHA-256 (FIPS 180-4), HMAC (RFC 2104) and the AWS Signature Version 4
 *	  canonical request / string to sign / signing key chain.
 *
 * Secrets only pass through the HMAC key schedule here; nothing in this
 * file formats them into a message.
 */
#include "sigv4.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void
sha256_block(TdbSha256 *c, const uint8_t *p)
{
	uint32_t	w[64],
				a, b, d, e, f, g, h, cc;

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t) p[4 * i] << 24 | (uint32_t) p[4 * i + 1] << 16 |
			(uint32_t) p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++)
	{
		uint32_t	s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t	s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);

		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	a = c->h[0];
	b = c->h[1];
	cc = c->h[2];
	d = c->h[3];
	e = c->h[4];
	f = c->h[5];
	g = c->h[6];
	h = c->h[7];
	for (int i = 0; i < 64; i++)
	{
		uint32_t	S1 = ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25);
		uint32_t	ch = (e & f) ^ (~e & g);
		uint32_t	t1 = h + S1 + ch + K[i] + w[i];
		uint32_t	S0 = ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22);
		uint32_t	maj = (a & b) ^ (a & cc) ^ (b & cc);
		uint32_t	t2 = S0 + maj;

		h = g;
		g = f;
		f = e;
		e = d + t1;
		d = cc;
		cc = b;
		b = a;
		a = t1 + t2;
	}
	c->h[0] += a;
	c->h[1] += b;
	c->h[2] += cc;
	c->h[3] += d;
	c->h[4] += e;
	c->h[5] += f;
	c->h[6] += g;
	c->h[7] += h;
}

void
tdb_sha256_init(TdbSha256 *c)
{
	static const uint32_t iv[8] = {
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19
	};

	memcpy(c->h, iv, sizeof(iv));
	c->total = 0;
	c->buflen = 0;
}

void
tdb_sha256_update(TdbSha256 *c, const void *data, size_t len)
{
	const uint8_t *p = data;

	c->total += len;
	if (c->buflen)
	{
		size_t		k = 64 - c->buflen < len ? 64 - c->buflen : len;

		memcpy(c->buf + c->buflen, p, k);
		c->buflen += k;
		p += k;
		len -= k;
		if (c->buflen < 64)
			return;
		sha256_block(c, c->buf);
		c->buflen = 0;
	}
	for (; len >= 64; p += 64, len -= 64)
		sha256_block(c, p);
	memcpy(c->buf, p, len);
	c->buflen = len;
}

void
tdb_sha256_final(TdbSha256 *c, uint8_t out[32])
{
	uint64_t	bits = c->total * 8;
	uint8_t		pad[72];
	size_t		padlen = (c->buflen < 56 ? 56 : 120) - c->buflen;

	memset(pad, 0, sizeof(pad));
	pad[0] = 0x80;
	for (int i = 0; i < 8; i++)
		pad[padlen + i] = (uint8_t) (bits >> (56 - 8 * i));
	tdb_sha256_update(c, pad, padlen + 8);
	for (int i = 0; i < 8; i++)
	{
		out[4 * i] = (uint8_t) (c->h[i] >> 24);
		out[4 * i + 1] = (uint8_t) (c->h[i] >> 16);
		out[4 * i + 2] = (uint8_t) (c->h[i] >> 8);
		out[4 * i + 3] = (uint8_t) c->h[i];
	}
}

void
tdb_sha256(const void *data, size_t len, uint8_t out[32])
{
	TdbSha256	c;

	tdb_sha256_init(&c);
	tdb_sha256_update(&c, data, len);
	tdb_sha256_final(&c, out);
}

void
tdb_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t len, uint8_t out[32])
{
	uint8_t		k[64],
				pad[64],
				inner[32];
	TdbSha256	c;

	memset(k, 0, sizeof(k));
	if (keylen > 64)
		tdb_sha256(key, keylen, k);
	else
		memcpy(k, key, keylen);
	for (int i = 0; i < 64; i++)
		pad[i] = k[i] ^ 0x36;
	tdb_sha256_init(&c);
	tdb_sha256_update(&c, pad, 64);
	tdb_sha256_update(&c, msg, len);
	tdb_sha256_final(&c, inner);
	for (int i = 0; i < 64; i++)
		pad[i] = k[i] ^ 0x5c;
	tdb_sha256_init(&c);
	tdb_sha256_update(&c, pad, 64);
	tdb_sha256_update(&c, inner, 32);
	tdb_sha256_final(&c, out);
	memset(k, 0, sizeof(k));
	memset(pad, 0, sizeof(pad));
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

	tdb_sha256(canon, o, hash);
	tdb_hex(hash, 32, hashhex);
	snprintf(scope, sizeof(scope), "%s/%s/%s/aws4_request", date, region, service);
	n = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s\n%s", amz_date, scope, hashhex);
	if (n < 0 || (size_t) n >= sizeof(sts))
		return -1;

	n = snprintf(kseed, sizeof(kseed), "AWS4%s", secret_key);
	if (n < 0 || (size_t) n >= sizeof(kseed))
		return -1;
	tdb_hmac_sha256(kseed, (size_t) n, date, 8, kdate);
	memset(kseed, 0, sizeof(kseed));
	tdb_hmac_sha256(kdate, 32, region, strlen(region), kregion);
	tdb_hmac_sha256(kregion, 32, service, strlen(service), kservice);
	tdb_hmac_sha256(kservice, 32, "aws4_request", 12, ksigning);
	tdb_hmac_sha256(ksigning, 32, sts, strlen(sts), sig);
	tdb_hex(sig, 32, sighex);

	n = snprintf(out, outlen, "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
				 access_key, scope, signed_names, sighex);
	return (n < 0 || (size_t) n >= outlen) ? -1 : 0;
}
