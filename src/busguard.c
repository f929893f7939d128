/*
 * busguard.c
 *	  SIGBUS-safe mappings of segments that others can shrink; see busguard.h.
 *
 * The table is written by normal code with compare-and-swaps on each entry's
 * state and read by the handler with plain atomic loads: no lock, nothing
 * the handler could wait for (it can run on any thread, in the middle of a
 * registration).  An entry moves FREE -> REGISTERING -> ACTIVE (normal
 * code), ACTIVE -> BUSY -> BROKEN (the handler: its pages replaced), and
 * ACTIVE or BROKEN -> FREE (tdb_bus_unguard, which waits while BUSY, so the
 * handler never maps over a range its owner has already unmapped).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "busguard.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define TDB_BUS_REGISTERING 4

TdbBusRange tdb_bus_ranges[TDB_BUS_MAX_RANGES];

static struct sigaction prev_action;
static _Atomic int installed;	/* 0 no, 1 being installed, 2 yes */
static _Atomic unsigned long repairs;

/* Not ours: what the process did before us (the default action: killed by SIGBUS). */
static void
chain(int sig, siginfo_t *si, void *ctx)
{
	struct sigaction dfl;

	if ((prev_action.sa_flags & SA_SIGINFO) != 0 && prev_action.sa_sigaction != NULL &&
		(void *) prev_action.sa_sigaction != (void *) SIG_DFL && (void *) prev_action.sa_sigaction != (void *) SIG_IGN)
	{
		prev_action.sa_sigaction(sig, si, ctx);
		return;
	}
	if ((prev_action.sa_flags & SA_SIGINFO) == 0 && prev_action.sa_handler != SIG_DFL &&
		prev_action.sa_handler != SIG_IGN)
	{
		prev_action.sa_handler(sig);
		return;
	}
	/* the default: a fault faults again when we return, and kills; a sent SIGBUS is sent again */
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	sigaction(SIGBUS, &dfl, NULL);
	if (si == NULL || si->si_code <= 0)
		raise(SIGBUS);
}

static bool
contains(TdbBusRange *r, const char *a)
{
	char	   *start = atomic_load_explicit(&r->start, memory_order_relaxed);
	size_t		len = atomic_load_explicit(&r->len, memory_order_relaxed);

	return a >= start && (size_t) (a - start) < len;
}

static void
bus_handler(int sig, siginfo_t *si, void *ctx)
{
	int			saved = errno;

	/* a fault (si_code > 0): the kernel's, with the address */
	if (si != NULL && si->si_code > 0)
	{
		const char *a = si->si_addr;

		for (int i = 0; i < TDB_BUS_MAX_RANGES; i++)
		{
			TdbBusRange *r = &tdb_bus_ranges[i];
			int			st = atomic_load_explicit(&r->state, memory_order_acquire);

			if (st != TDB_BUS_ACTIVE && st != TDB_BUS_BUSY)
				continue;
			if (!contains(r, a))
				continue;
			if (st == TDB_BUS_ACTIVE &&
				atomic_compare_exchange_strong_explicit(&r->state, &st, TDB_BUS_BUSY, memory_order_acq_rel,
														memory_order_acquire))
			{
				void	   *p;

				if (!contains(r, a))
				{
					atomic_store_explicit(&r->state, TDB_BUS_ACTIVE, memory_order_release);
					continue;
				}
				p = mmap(atomic_load_explicit(&r->start, memory_order_relaxed),
						 atomic_load_explicit(&r->len, memory_order_relaxed),
						 atomic_load_explicit(&r->prot, memory_order_relaxed),
						 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
				if (p == MAP_FAILED)
				{
					atomic_store_explicit(&r->state, TDB_BUS_ACTIVE, memory_order_release);
					break;		/* cannot repair: as if it were not ours */
				}
				atomic_fetch_add_explicit(&repairs, 1, memory_order_relaxed);
				atomic_store_explicit(&r->state, TDB_BUS_BROKEN, memory_order_release);
				errno = saved;
				return;			/* the access runs again and reads zeros */
			}
			/* another thread is replacing these pages: retry once it is done */
			while (atomic_load_explicit(&r->state, memory_order_acquire) == TDB_BUS_BUSY)
				sched_yield();
			errno = saved;
			return;
		}
	}
	chain(sig, si, ctx);
	errno = saved;
}

static bool
install(void)
{
	int			st = atomic_load_explicit(&installed, memory_order_acquire);

	if (st == 2)
		return true;
	if (st == 0 && atomic_compare_exchange_strong(&installed, &st, 1))
	{
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = bus_handler;
		sa.sa_flags = SA_SIGINFO | SA_RESTART;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGBUS, &sa, &prev_action) != 0)
		{
			atomic_store(&installed, 0);
			return false;
		}
		atomic_store_explicit(&installed, 2, memory_order_release);
		return true;
	}
	while (atomic_load_explicit(&installed, memory_order_acquire) == 1)
		sched_yield();
	return atomic_load_explicit(&installed, memory_order_acquire) == 2;
}

int
tdb_bus_guard(void *addr, size_t len, int prot)
{
	if (addr == NULL || len == 0)
	{
		errno = EINVAL;
		return 0;
	}
	if (!install())
		return 0;
	for (int i = 0; i < TDB_BUS_MAX_RANGES; i++)
	{
		TdbBusRange *r = &tdb_bus_ranges[i];
		int			st = TDB_BUS_FREE;

		if (!atomic_compare_exchange_strong(&r->state, &st, TDB_BUS_REGISTERING))
			continue;
		atomic_store_explicit(&r->start, (char *) addr, memory_order_relaxed);
		atomic_store_explicit(&r->len, len, memory_order_relaxed);
		atomic_store_explicit(&r->prot, prot, memory_order_relaxed);
		atomic_store_explicit(&r->state, TDB_BUS_ACTIVE, memory_order_release);
		return i + 1;
	}
	errno = ENOSPC;
	return 0;
}

void
tdb_bus_unguard(int handle)
{
	TdbBusRange *r;

	if (handle <= 0 || handle > TDB_BUS_MAX_RANGES)
		return;
	r = &tdb_bus_ranges[handle - 1];
	for (;;)
	{
		int			st = atomic_load_explicit(&r->state, memory_order_acquire);

		if (st == TDB_BUS_BUSY)
		{
			sched_yield();
			continue;
		}
		if (st != TDB_BUS_ACTIVE && st != TDB_BUS_BROKEN)
			return;
		if (atomic_compare_exchange_strong(&r->state, &st, TDB_BUS_FREE))
			return;
	}
}

unsigned long
tdb_bus_repairs(void)
{
	return atomic_load_explicit(&repairs, memory_order_relaxed);
}
