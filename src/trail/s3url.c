/*
 * s3url.c
 *	  S3's names: splitting s3://bucket/key and S3's URI encoding of keys
 *	  (the canonical form SigV4 signs).  Pure string functions, no network.
 */
#include "s3url.h"

#include <string.h>

#include "trail.h"

int
tdb_s3_parse_url(const char *url, char *bucket, size_t bucketlen, const char **key)
{
	const char *b,
			   *slash;
	size_t		n;

	if (strncmp(url, "s3://", 5) != 0)
		return TDB_TRAIL_EINVAL;
	b = url + 5;
	slash = strchr(b, '/');
	n = slash ? (size_t) (slash - b) : strlen(b);
	if (n < 3 || n > 63 || n >= bucketlen)
		return TDB_TRAIL_EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') || b[i] == '-' || b[i] == '.'))
			return TDB_TRAIL_EINVAL;
	memcpy(bucket, b, n);
	bucket[n] = '\0';
	*key = slash ? slash + 1 : "";
	return 0;
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
