/*
 * slice.h
 *	  Ask the scheduler for a shorter slice (EEVDF, Linux 6.12 and later):
 *	  a woken subscriber then preempts a CPU-bound task on its CPU at once
 *	  instead of queueing until that task's slice (about 3 ms) ends.  The
 *	  policy stays SCHED_OTHER; no privilege is needed.  Older kernels
 *	  ignore the field or refuse it: then a warning naming who asked.
 *	  Used by tools/tdbsub --slice-us and bench/accessor (TDB_SLICE_US).
 */
#ifndef TDB_SLICE_H
#define TDB_SLICE_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline void
tdb_set_slice(const char *who, long us)
{
	struct
	{
		uint32_t	size;
		uint32_t	sched_policy;
		uint64_t	sched_flags;
		int32_t		sched_nice;
		uint32_t	sched_priority;
		uint64_t	sched_runtime;
		uint64_t	sched_deadline;
		uint64_t	sched_period;
	}			attr;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.sched_policy = 0;		/* SCHED_OTHER */
	attr.sched_runtime = (uint64_t) us * 1000;
	if (syscall(SYS_sched_setattr, 0, &attr, 0) != 0)
		fprintf(stderr, "%s: warning: a slice of %ld us: %s\n", who, us, strerror(errno));
}

#endif							/* TDB_SLICE_H */
