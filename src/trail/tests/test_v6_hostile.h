/*
 * test_v6_hostile.h
 *	  The files test_v6_hostile.c makes, shared with test_v6_hostile_s3.c.
 */
#ifndef TEST_V6_HOSTILE_H
#define TEST_V6_HOSTILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trail.h"

/* ntrails trails of n events, pages of page_events, nc extra columns, written as version. */
uint8_t    *h2_write(int version, int ntrails, int n, uint32_t page_events, int nc, size_t *len);

/* FNV over every event of a full scan of r; *n the count; *rc < 0 on error. */
uint64_t	h2_digest(TdbTrailReader *r, uint64_t *n, int *rc, TdbTrailError *err);

/* good's pages laid out again (to_colmajor or row-major) behind a version-v footer. */
uint8_t    *h2_relayout(const TdbTrailFooter *f, const uint8_t *good, bool to_colmajor, int v, size_t *outlen);

#endif
