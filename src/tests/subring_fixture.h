/*
 * subring_fixture.h
 *	  What the tests of the subscribers' rings share (subring_fixture.c): a
 *	  ring in /dev/shm under a fresh prefix with the daemon's side played by
 *	  the test, events, consumers, and the request servers and requesters of
 *	  the request-response tests.
 */
#ifndef TDB_TEST_SUBRING_FIXTURE_H
#define TDB_TEST_SUBRING_FIXTURE_H

#include "subring/subring.h"

#include <pthread.h>
#include <time.h>

#define INSTANCE	4242u
#define GROUP		7u

typedef struct SubEnv
{
	char		prefix[64];
	TdbSubring	r;
} SubEnv;

/* A ring of nslots slots of ring_events events, RUNNING; false (and a failed check) when not made. */
bool		senv_open(SubEnv *e, uint32_t nslots, uint32_t ring_events);
void		senv_close(SubEnv *e);

static inline void
sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

/* A CHANGE event of location id at generation gen. */
TdbSubEvent mkev(uint64_t id, uint64_t gen);
/* A consumer of e's ring (borrow: the producer's mapping, or NULL). */
bool		open_consumer(TdbSubConsumer *c, SubEnv *e, void *borrow);
/* Sweep into ch (up to max); returns how many changes. */
uint32_t	sweep(SubEnv *e, TdbSubChange *ch, uint32_t max);
/* Sweep until slot is attached (bounded). */
bool		attach(SubEnv *e, int slot);
/* Open should fail with want (and not crash). */
void		open_fails(SubEnv *e, uint64_t instance, int want);

/* A consumer thread of the thread tests (ThreadSanitizer: they borrow the producer's mapping). */
typedef struct Member
{
	SubEnv	   *e;
	uint64_t	want;			/* spsc / overrun: events to get */
	uint64_t	group;
	_Atomic int ready;			/* subscribed: slot + 1 */
	_Atomic int *stop;
	_Atomic uint8_t *seen;		/* group: per id */
	uint64_t	got;
	uint64_t	bad;
	uint64_t	dropped;		/* overrun: sum of the OVERRUN counts */
	uint64_t	overruns;
	uint64_t	sessions;
	uint64_t	seed;
} Member;

/* ---- request-response (subreq.c) ---- */

#define REQ_GROUP	9u

typedef struct Server
{
	SubEnv	   *e;
	int			id;				/* put in each answer */
	int			work_us;		/* per request */
	int			die_after;		/* > 0: take that many-th request and leave without answering */
	_Atomic int *stop;
	_Atomic int ready;
	uint64_t	answered;
	uint64_t	gone;
	uint64_t	bad;
} Server;

typedef struct Requester
{
	SubEnv	   *e;
	int			count;
	uint64_t	seed;
	uint64_t	ok;
	uint64_t	bad;
	uint64_t	by_server[8];
} Requester;

/* n server threads in REQ_GROUP answering (make_answer) until *stop; false if one could not subscribe. */
bool		start_servers(Server *sv, pthread_t *t, int n, SubEnv *e, _Atomic int *stop, int work_us);
/* A server thread (arg: its Server): takes requests of REQ_GROUP and answers them. */
void	   *server_main(void *arg);
/* The answer to a request: "<server id>:" then the request's bytes reversed. */
uint32_t	make_answer(int id, const unsigned char *req, uint32_t len, unsigned char *out);
/* A requester thread (arg: its Requester): count calls, each answer checked. */
void	   *requester_main(void *arg);
/* Cells not FREE (0: nothing leaked). */
uint32_t	cells_in_use(SubEnv *e);

#endif							/* TDB_TEST_SUBRING_FIXTURE_H */
