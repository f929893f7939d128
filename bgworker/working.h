/*-------------------------------------------------------------------------
 *
 * working.h
 *	  Applying one traffic value to the daemon's working traffic: the feed
 *	  (feed.c) and the writers' ring drain (putdrain.c) call it once per
 *	  update, so it is inline here rather than a call into working.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TDB_BGWORKER_WORKING_H
#define TDB_BGWORKER_WORKING_H

#include <math.h>

#include "utils/memutils.h"

#include "bgworker/daemon_internal.h"

/* Record i changed: it goes into the next log record. */
static inline void
mark_changed(uint64 i)
{
	if (D.pend_bit[i >> 3] & (1 << (i & 7)))
		return;
	D.pend_bit[i >> 3] |= (uint8) (1 << (i & 7));
	D.pend[D.npend++] = (uint32) i;
}

/*
 * Apply one traffic value to record i if it is not older than what we have:
 * the newest observation wins; of two observed at the same instant, the one
 * consumed in the later generation, and within one generation the later row.
 */
static inline bool
apply_traffic(uint64 i, int64 observed_us, int64 seq, float speed, float free_flow, int congestion,
			  int confidence, const char *incident, uint64 gen)
{
	TdbTraffic *t = &D.traffic[i];

	if (t->updated_at_us > observed_us ||
		(t->updated_at_us == observed_us && t->changed_gen == gen && D.win_seq[i] > seq))
		return false;
	t->updated_at_us = observed_us;
	D.win_seq[i] = seq;
	/* one NaN for unknown, whatever bits the row had: the log stores "absent" */
	t->speed_kmh = isnan(speed) ? NAN : speed;
	t->free_flow_kmh = isnan(free_flow) ? NAN : free_flow;
	t->congestion = (uint8) (congestion < 0 ? TDB_CONGESTION_UNKNOWN : congestion);
	t->confidence = (uint8) (confidence < 0 ? TDB_CONFIDENCE_UNKNOWN : confidence);
	t->changed_gen = gen;
	/* incident_count counts the non-NULL pointers: none, no random read of the array */
	if (D.incident_count > 0 && D.incidents[i])
	{
		pfree(D.incidents[i]);
		D.incidents[i] = NULL;
		D.incident_count--;
	}
	if (incident)
	{
		D.incidents[i] = MemoryContextStrdup(D.cxt, incident);
		D.incident_count++;
	}
	mark_changed(i);
	return true;
}

#endif							/* TDB_BGWORKER_WORKING_H */
