/*
 * genlog_fixture.h
 *	  What the generation log's unit tests share (test_genlog.c).
 */
#ifndef TDB_GENLOG_FIXTURE_H
#define TDB_GENLOG_FIXTURE_H

#include <stdbool.h>

#include "genlog/genlog.h"

#include <stdint.h>

/*
 * n random entries of a record of kind (D: increasing records; C: first +
 * i) of generation gen: every present bit pattern, any float bits, incident
 * texts with a NUL and empty ones.
 */
void		genlog_random_entries(uint64_t *rng, TdbGenlogEntry *e, uint32_t n, char kind, uint64_t gen,
								  uint32_t first);

/* Same entry as encoded: every field the present bits say, bit for bit. */
bool		genlog_same_entry(const TdbGenlogEntry *a, const TdbGenlogEntry *b, char kind);

#endif
