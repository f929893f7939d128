/*
 * trail_memfile.h
 *	  A trail file's bytes in memory as the version-3 footer's chunk loader
 *	  reads them (a TrailRangeRead over any range inside them): shared by
 *	  the unit tests and the fuzzer, which links none of trail_fixture.c.
 */
#ifndef TDB_TRAIL_MEMFILE_H
#define TDB_TRAIL_MEMFILE_H

#include <stdint.h>
#include <string.h>

#include "format.h"
#include "trail.h"

typedef struct FxMemFile
{
	const uint8_t *data;
	size_t		size;
} FxMemFile;

/* arg: an FxMemFile; a range past its end is TDB_TRAIL_ECORRUPT */
static inline int
fx_mem_read(void *arg, const TdbByteRange *r, int n, uint8_t **bufs, TdbTrailError *err)
{
	const FxMemFile *m = arg;

	for (int i = 0; i < n; i++)
	{
		if (r[i].off > m->size || r[i].len > m->size - r[i].off)
			return tdb_trail_fail(err, TDB_TRAIL_ECORRUPT, "range past the end");
		memcpy(bufs[i], m->data + r[i].off, r[i].len);
	}
	return 0;
}

/* The whole footer of a file in memory (version 3 and 4: the head, then every chunk). */
static inline int
fx_decode_footer_whole(const uint8_t *buf, size_t len, const TdbTrailTrailer *t, TdbTrailFooter *f,
					   TdbTrailError *err)
{
	FxMemFile	m = {buf, len};
	int			rc = tdb_trail_footer_decode(buf + t->footer_offset, t->footer_length, t, f, err);

	if (rc == 0 && f->version >= 3 && (rc = trail_footer3_load_all(f, true, fx_mem_read, &m, err)) < 0)
		tdb_trail_footer_release(f);
	return rc;
}

#endif							/* TDB_TRAIL_MEMFILE_H */
