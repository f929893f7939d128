/*
 * trail_unit.h
 *	  The src/tests harness (unit.h: CHECK macros, unit_rand) for the trail
 *	  tests, with their own list.  unit.h also declares the engine tests of
 *	  src/tests/tests.list; declarations only, nothing links against them.
 */
#ifndef TDB_TRAIL_UNIT_H
#define TDB_TRAIL_UNIT_H

#include "../../tests/unit.h"

#define X(name) UNIT_TEST(name);
#include "tests.list"
#undef X

#endif							/* TDB_TRAIL_UNIT_H */
