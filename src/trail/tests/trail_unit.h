/*
 * trail_unit.h
 *	  The src/tests harness (unit.h: CHECK macros, unit_rand, src/tests/main.c
 *	  as the runner) for the trail tests.  trail.mk builds them with
 *	  UNIT_TESTS_LIST naming this directory's tests.list, so unit.h declares
 *	  these tests.
 */
#ifndef TDB_TRAIL_UNIT_H
#define TDB_TRAIL_UNIT_H

#include "../../tests/unit.h"

#endif							/* TDB_TRAIL_UNIT_H */
