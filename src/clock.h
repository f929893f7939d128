/*
 * clock.h
 *	  The clocks the engine, libtrafficdb and the tools read: one place for
 *	  the conversion of a timespec.  No PostgreSQL headers.
 */
#ifndef TDB_CLOCK_H
#define TDB_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t
tdb_clock_us(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* CLOCK_MONOTONIC: timeouts and intervals */
static inline int64_t
tdb_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t
tdb_mono_us(void)
{
	return tdb_clock_us(CLOCK_MONOTONIC);
}

static inline int64_t
tdb_mono_ms(void)
{
	return tdb_mono_us() / 1000;
}

static inline double
tdb_mono_s(void)
{
	return (double) tdb_mono_us() / 1e6;
}

/* CLOCK_REALTIME: Unix microseconds, as objects and events carry them */
static inline int64_t
tdb_wall_us(void)
{
	return tdb_clock_us(CLOCK_REALTIME);
}

#endif							/* TDB_CLOCK_H */
