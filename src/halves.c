/*
 * halves.c
 *	  tdb_halves(): one piece of work in two threads (halves.h).
 */
#include "halves.h"

#include <pthread.h>
#include <signal.h>

uint64_t	tdb_halves_min = 1000000;

#define HALF_STACK (1024 * 1024)

typedef struct HalfCall
{
	void		(*fn) (void *arg, int half);
	void	   *arg;
} HalfCall;

static void *
second_half(void *p)
{
	HalfCall   *c = p;

	c->fn(c->arg, 1);
	return NULL;
}

void
tdb_halves(void (*fn) (void *arg, int half), void *arg, uint64_t n)
{
	HalfCall	c = {fn, arg};
	pthread_t	th;
	pthread_attr_t attr;
	sigset_t	all,
				old;
	int			rc;

	if (n < tdb_halves_min)
	{
		fn(arg, 0);
		fn(arg, 1);
		return;
	}
	/* the thread inherits this mask: every signal stays with the caller's thread */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* 1 MiB of stack, not the default 8: glibc keeps a finished thread's stack for the next */
	rc = pthread_attr_init(&attr);
	if (rc == 0)
	{
		pthread_attr_setstacksize(&attr, HALF_STACK);
		rc = pthread_create(&th, &attr, second_half, &c);
		pthread_attr_destroy(&attr);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	fn(arg, 0);
	if (rc == 0)
		pthread_join(th, NULL);
	else
		fn(arg, 1);
}
