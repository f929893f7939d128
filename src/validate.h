/*
 * validate.h
 *	  The rules a traffic update must meet, one copy for every way in: the
 *	  daemon's SQL feed, trafficdb_put (libtrafficdb, before anything is
 *	  written to the writers' ring) and the daemon's drain of that ring (which
 *	  trusts nothing it reads from shared memory).  So SQL and C can never
 *	  disagree about what is a valid update.
 *
 *	  speed_kmh, free_flow_kmh	absent (NaN) or finite, >= 0, <= 400
 *	  congestion				absent or 0 .. 4
 *	  confidence				absent or 0 .. 100
 *	  incident					absent, or at most 4,096 bytes of valid UTF-8
 *								without NUL
 *	  observed_at				after 1970-01-01 (Unix microseconds > 0), at most
 *								5 minutes after now
 *
 * Each check returns TDB_VALID_OK or TDB_VALID_BAD and, when bad, writes a
 * sentence naming the field and its value into msg (TDB_VALID_MSGLEN bytes),
 * worded as the feed's rejects are ("speed_kmh 401 is outside [0, 400]").
 *
 * Static inline, no PostgreSQL headers, C99 declarations at block start:
 * included by the module (bgworker) and by libtrafficdb.
 */
#ifndef TDB_VALIDATE_H
#define TDB_VALIDATE_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define TDB_VALID_OK			0
#define TDB_VALID_BAD			(-1)
#define TDB_VALID_MSGLEN		256

#define TDB_VALID_MAX_SPEED_KMH	400.0
#define TDB_VALID_MAX_CONGESTION 4
#define TDB_VALID_MAX_CONFIDENCE 100
#define TDB_VALID_MAX_INCIDENT	4096	/* bytes */
#define TDB_VALID_FUTURE_US		(5 * 60 * INT64_C(1000000))	/* observed_at may lead now by this */

/* A speed (speed_kmh or free_flow_kmh, named by field): NaN means absent and is fine. */
static inline int
tdb_valid_speed(const char *field, double v, char *msg)
{
	if (isnan(v) || (isfinite(v) && v >= 0 && v <= TDB_VALID_MAX_SPEED_KMH))
		return TDB_VALID_OK;
	snprintf(msg, TDB_VALID_MSGLEN, "%s %g is outside [0, %g]", field, v, TDB_VALID_MAX_SPEED_KMH);
	return TDB_VALID_BAD;
}

/* A present congestion level (SQL smallint, so any int). */
static inline int
tdb_valid_congestion(int v, char *msg)
{
	if (v >= 0 && v <= TDB_VALID_MAX_CONGESTION)
		return TDB_VALID_OK;
	snprintf(msg, TDB_VALID_MSGLEN, "congestion %d is outside [0, %d]", v, TDB_VALID_MAX_CONGESTION);
	return TDB_VALID_BAD;
}

/* A present confidence. */
static inline int
tdb_valid_confidence(int v, char *msg)
{
	if (v >= 0 && v <= TDB_VALID_MAX_CONFIDENCE)
		return TDB_VALID_OK;
	snprintf(msg, TDB_VALID_MSGLEN, "confidence %d is outside [0, %d]", v, TDB_VALID_MAX_CONFIDENCE);
	return TDB_VALID_BAD;
}

/*
 * Offset of the first byte of s[0 .. len) that is not part of well-formed
 * UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above
 * U+10FFFF) or is a NUL; len when there is none.
 */
static inline size_t
tdb_valid_utf8_prefix(const unsigned char *s, size_t len)
{
	size_t		i = 0;

	while (i < len)
	{
		unsigned char c = s[i];
		size_t		n;
		unsigned char lo = 0x80;
		unsigned char hi = 0xBF;

		if (c == 0)
			return i;
		if (c < 0x80)
		{
			i++;
			continue;
		}
		if (c >= 0xC2 && c <= 0xDF)
			n = 1;
		else if (c >= 0xE0 && c <= 0xEF)
		{
			n = 2;
			if (c == 0xE0)
				lo = 0xA0;		/* overlong */
			else if (c == 0xED)
				hi = 0x9F;		/* surrogates */
		}
		else if (c >= 0xF0 && c <= 0xF4)
		{
			n = 3;
			if (c == 0xF0)
				lo = 0x90;		/* overlong */
			else if (c == 0xF4)
				hi = 0x8F;		/* above U+10FFFF */
		}
		else
			return i;
		if (len - i <= n)
			return i;
		if (s[i + 1] < lo || s[i + 1] > hi)
			return i;
		for (size_t k = 2; k <= n; k++)
			if (s[i + k] < 0x80 || s[i + k] > 0xBF)
				return i;
		i += n + 1;
	}
	return len;
}

/* A present incident of len bytes (not NUL-terminated). */
static inline int
tdb_valid_incident(const char *s, size_t len, char *msg)
{
	size_t		bad;

	if (len > TDB_VALID_MAX_INCIDENT)
	{
		snprintf(msg, TDB_VALID_MSGLEN, "incident is %zu bytes; at most %d are accepted", len,
				 TDB_VALID_MAX_INCIDENT);
		return TDB_VALID_BAD;
	}
	if (len > 0 && s == NULL)
	{
		snprintf(msg, TDB_VALID_MSGLEN, "incident is NULL with a length of %zu bytes", len);
		return TDB_VALID_BAD;
	}
	bad = tdb_valid_utf8_prefix((const unsigned char *) s, len);
	if (bad < len)
	{
		snprintf(msg, TDB_VALID_MSGLEN, "incident is not valid UTF-8 without NUL: byte %zu of %zu is 0x%02x",
				 bad, len, (unsigned) (unsigned char) s[bad]);
		return TDB_VALID_BAD;
	}
	return TDB_VALID_OK;
}

/*
 * observed_at (Unix microseconds) against now (the same): not more than
 * TDB_VALID_FUTURE_US ahead.  Shown in UTC as the feed's message shows a
 * timestamptz.
 */
static inline int
tdb_valid_observed(int64_t observed_us, int64_t now_us, char *msg)
{
	time_t		secs;
	struct tm	tm;
	char		when[64];

	if (observed_us <= 0)
	{
		/* a traffic object's updated_at of 0 means "no traffic": such an update would never show */
		snprintf(msg, TDB_VALID_MSGLEN, "observed_at %lld (Unix microseconds) is not after 1970-01-01 00:00:00+00",
				 (long long) observed_us);
		return TDB_VALID_BAD;
	}
	if (observed_us <= now_us || observed_us - now_us <= TDB_VALID_FUTURE_US)
		return TDB_VALID_OK;
	secs = (time_t) (observed_us / 1000000);
	if (gmtime_r(&secs, &tm) != NULL &&
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm) > 0)
		snprintf(msg, TDB_VALID_MSGLEN, "observed_at %s.%06d+00 is more than 5 minutes in the future",
				 when, (int) (observed_us % 1000000));
	else
		snprintf(msg, TDB_VALID_MSGLEN, "observed_at %lld (Unix microseconds) is more than 5 minutes in the future",
				 (long long) observed_us);
	return TDB_VALID_BAD;
}

#endif							/* TDB_VALIDATE_H */
