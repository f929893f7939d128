/*
 * fuzz_genlog.c
 *	  libFuzzer target of the generation-log record decoder: any bytes are
 *	  refused or decoded within the record and the map, never a bad read;
 *	  a decoded record re-encodes and decodes to the same entries.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "genlog/genlog.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	TdbGenlogHeader h,
				h2;
	TdbGenlogEntry *e = NULL,
			   *e2 = NULL;
	char		err[TDB_GENLOG_ERRLEN];
	uint8_t    *buf;
	size_t		len;

	if (!tdb_genlog_decode(data, size, &h, &e, err))
		return 0;
	buf = tdb_genlog_encode(&h, e, h.n, &len, err);
	if (buf == NULL || !tdb_genlog_decode(buf, len, &h2, &e2, err) || h2.n != h.n)
		abort();
	for (uint32_t i = 0; i < h.n; i++)
		if (e[i].record != e2[i].record || e[i].observed_us != e2[i].observed_us ||
			e[i].present != e2[i].present || e[i].changed_gen != e2[i].changed_gen)
			abort();
	free(buf);
	free(e);
	free(e2);
	return 0;
}
