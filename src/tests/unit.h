/*
 * unit.h
 *	  A minimal test harness for the engine code in src/.
 *
 * Each test is a function registered in tests.list; CHECK* macros record a
 * failure with file and line and let the test go on, so one run reports all
 * that is wrong.  The runner prints TAP ("ok N - name") and closes with the
 * line "N passed, N failed", which CI reads.
 */
#ifndef TDB_UNIT_H
#define TDB_UNIT_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

extern int	unit_failures;		/* failures in the running test */

void		unit_fail(const char *file, int line, const char *fmt, ...)
			__attribute__((format(printf, 3, 4)));

#define CHECK(cond) \
	do { if (!(cond)) unit_fail(__FILE__, __LINE__, "CHECK(%s)", #cond); } while (0)

#define CHECK_EQ_U64(got, want) \
	do { \
		uint64_t g_ = (uint64_t) (got), w_ = (uint64_t) (want); \
		if (g_ != w_) \
			unit_fail(__FILE__, __LINE__, "%s = %" PRIu64 " (0x%" PRIx64 "), expected %s = %" PRIu64 " (0x%" PRIx64 ")", \
					  #got, g_, g_, #want, w_, w_); \
	} while (0)

#define CHECK_NEAR(got, want, tol) \
	do { \
		double g_ = (got), w_ = (want), t_ = (tol); \
		if (!(g_ >= w_ - t_ && g_ <= w_ + t_)) \
			unit_fail(__FILE__, __LINE__, "%s = %.9g, expected %.9g +/- %.3g", #got, g_, w_, t_); \
	} while (0)

/* Deterministic generator for randomised tests (splitmix64). */
static inline uint64_t
unit_rand(uint64_t *state)
{
	uint64_t	z = (*state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Uniform double in [lo, hi). */
static inline double
unit_rand_double(uint64_t *state, double lo, double hi)
{
	return lo + (hi - lo) * ((double) (unit_rand(state) >> 11) / 9007199254740992.0);
}

#define UNIT_TEST(name) void name(void)

/*
 * Declarations of every test, generated from the suite's list: tests.list
 * beside this file unless UNIT_TESTS_LIST names another (relative to here).
 */
#ifndef UNIT_TESTS_LIST
#define UNIT_TESTS_LIST "tests.list"
#endif
#define X(name) UNIT_TEST(name);
#include UNIT_TESTS_LIST
#undef X

#endif							/* TDB_UNIT_H */
