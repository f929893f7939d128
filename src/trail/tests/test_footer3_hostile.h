/*
 * test_footer3_hostile.h
 *	  The files and the query test_footer3_hostile.c's tests use, shared
 *	  with test_footer3_shared.c.
 */
#ifndef TDB_TEST_FOOTER3_HOSTILE_H
#define TDB_TEST_FOOTER3_HOSTILE_H

#include <stddef.h>
#include <stdint.h>

#include "trail.h"
#include "trail_fixture.h"

/* Trail k: id 3k + 1, n events a second apart, nc int64 columns, pages of page_events. */
uint8_t    *hostile_write_file(int ntrails, int n, uint32_t page_events, int nc, TdbTrailOrder order,
							   size_t *len);

/* buf opened as fx_open_buf does, but an error at open is returned (o->r NULL), not a failure. */
int			hostile_open(FxOpened *o, const uint8_t *buf, size_t len, TdbTrailError *err);

/* Events of trail id (NULL: all); < 0 the error. */
int64_t		hostile_count_events(TdbTrailReader *r, const int64_t *id, TdbTrailError *err);

#endif							/* TDB_TEST_FOOTER3_HOSTILE_H */
