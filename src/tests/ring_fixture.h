/*
 * ring_fixture.h
 *	  What the tests of the writers' ring share (ring_fixture.c): a published
 *	  map and a ring in /dev/shm under a fresh prefix, the daemon's side
 *	  played by the test, libtrafficdb writers on it, and the updates the
 *	  test's "daemon" drains.
 */
#ifndef TDB_TEST_RING_FIXTURE_H
#define TDB_TEST_RING_FIXTURE_H

#include "fixture.h"
#include "ring/ring.h"
#include "trafficdb.h"

#include <time.h>

typedef struct RingEnv
{
	char		prefix[64];
	TdbWriter	w;
	uint32_t	map_seg;
	void	   *map_addr;
	TdbRing		ring;
} RingEnv;

/* A published map and a RUNNING ring of nlanes lanes of lane_slots slots; false (and a failed check) when not made. */
bool		env_open(RingEnv *e, uint32_t nlanes, uint32_t lane_slots);
void		env_close(RingEnv *e);
/* A libtrafficdb writer on e (NULL, and a failed check, when it cannot open). */
trafficdb_writer *open_writer(RingEnv *e);

/* What the test's "daemon" got: copies of the updates. */
typedef struct Got
{
	TdbRingUpdate u;
	char		text[TDB_VALID_MAX_INCIDENT];
	uint32_t	lane;
	uint64_t	ticket;
} Got;

typedef struct Collect
{
	Got		   *got;
	size_t		n;
	size_t		cap;
} Collect;

/* A drain callback appending a copy of each update to a Collect (arg). */
int			ring_collect(void *arg, const TdbRingUpdate *u, uint32_t lane, uint64_t ticket);
uint64_t	drain_all(RingEnv *e, Collect *c, TdbRingDrainStats *st);
/* The wall clock in microseconds. */
int64_t		now_us(void);

static inline void
sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

/* An incident text of len bytes that says which k it belongs to (ASCII). */
void		incident_text(char *out, uint32_t len, uint64_t k);

#endif							/* TDB_TEST_RING_FIXTURE_H */
