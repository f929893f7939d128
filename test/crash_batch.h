/*
 * crash_batch.h
 *	  What the crash loop's feed writer writes, shared with its reader
 *	  (test/crash_loop.pl drives both).
 *
 * The map has SETS * SET_SIZE locations, ids FIRST_ID and up; set s is ids
 * FIRST_ID + s * SET_SIZE .. FIRST_ID + (s + 1) * SET_SIZE - 1.  Batch n
 * (n >= 1, one transaction) writes every location of one set, each with the
 * values below, all derived from n.  A batch commits whole or not at all, so
 * one published version must show every location of a set with the values
 * of the same batch: a mix, or a field that does not match the batch named
 * by the incident, is an inconsistent read.  Batch 0 means "no traffic yet".
 */
#ifndef CRASH_BATCH_H
#define CRASH_BATCH_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CRASH_SETS		20
#define CRASH_SET_SIZE	10
#define CRASH_FIRST_ID	1

/* Every field a different function of n, so a torn entry shows. */
static inline float
crash_speed(uint64_t n)
{
	return (float) (n % 397);
}

static inline float
crash_free_flow(uint64_t n)
{
	return (float) ((n / 397) % 397);
}

static inline int
crash_congestion(uint64_t n)
{
	return (int) (n % 5);
}

static inline int
crash_confidence(uint64_t n)
{
	return (int) (n % 101);
}

/* The incident names the batch: "b<n>". */
static inline void
crash_incident(uint64_t n, char *buf, size_t len)
{
	snprintf(buf, len, "b%" PRIu64, n);
}

/* The batch an incident names, or 0 if it names none. */
static inline uint64_t
crash_parse_incident(const char *s, size_t len)
{
	uint64_t	n = 0;

	if (s == NULL || len < 2 || len > 21 || s[0] != 'b')
		return 0;
	for (size_t i = 1; i < len; i++)
	{
		if (s[i] < '0' || s[i] > '9')
			return 0;
		n = n * 10 + (uint64_t) (s[i] - '0');
	}
	return n;
}

#endif							/* CRASH_BATCH_H */
