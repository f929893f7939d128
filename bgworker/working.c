/*-------------------------------------------------------------------------
 *
 * working.c
 *	  The daemon's working traffic: one entry per record of the current
 *	  map, which the feed and the writers' ring update and each
 *	  publication writes out; carried over by location id to a new map.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "utils/memutils.h"

#include "bgworker/daemon_internal.h"
#include "hugepage.h"

static void
alloc_working(uint64 count, WorkingTraffic *out)
{
	Size		n = Max(count, 1);

	/* updates land at random: huge pages where the kernel grants them (hugepage.h) */
	out->traffic = tdb_huge_fresh(MemoryContextAllocHuge(D.cxt, n * sizeof(TdbTraffic)), n * sizeof(TdbTraffic), false);
	out->win_seq = tdb_huge_fresh(MemoryContextAllocHuge(D.cxt, n * sizeof(int64)), n * sizeof(int64), true);
	out->incidents = tdb_huge_fresh(MemoryContextAllocHuge(D.cxt, n * sizeof(char *)), n * sizeof(char *), true);
	out->pend = MemoryContextAllocHuge(D.cxt, n * sizeof(uint32));
	out->pend_bit = MemoryContextAllocExtended(D.cxt, n / 8 + 1, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	out->incident_count = 0;
}

/*
 * Traffic of old_count records with ids old_ids onto newmap, by location id;
 * the other locations of newmap get no traffic.
 */
void
remap_traffic(const TdbMapView *newmap, uint64 old_count, const uint64 *old_ids,
			  const TdbTraffic *old_traffic, char **old_incidents, WorkingTraffic *out)
{
	alloc_working(newmap->count, out);
	for (uint64 i = 0; i < newmap->count; i++)
	{
		memset(&out->traffic[i], 0, sizeof(TdbTraffic));
		out->traffic[i].speed_kmh = NAN;
		out->traffic[i].free_flow_kmh = NAN;
		out->traffic[i].congestion = TDB_CONGESTION_UNKNOWN;
		out->traffic[i].confidence = TDB_CONFIDENCE_UNKNOWN;
	}
	for (uint64 o = 0; o < old_count; o++)
	{
		int64		i = tdb_map_find(newmap, old_ids[o]);

		if (i < 0)
			continue;
		out->traffic[i] = old_traffic[o];
		out->traffic[i].incident_off = 0;
		if (old_incidents[o])
		{
			out->incidents[i] = MemoryContextStrdup(D.cxt, old_incidents[o]);
			out->incident_count++;
		}
	}
}

void
free_working(WorkingTraffic *w, uint64 count)
{
	if (w->traffic == NULL)
		return;
	for (uint64 i = 0; i < count; i++)
		if (w->incidents[i])
			pfree(w->incidents[i]);
	pfree(w->traffic);
	pfree(w->win_seq);
	pfree(w->incidents);
	pfree(w->pend);
	pfree(w->pend_bit);
	memset(w, 0, sizeof(*w));
}

void
set_daemon_working(const WorkingTraffic *w)
{
	static uint64 last_work_id = 0;

	D.work_id = ++last_work_id;
	D.traffic = w->traffic;
	D.win_seq = w->win_seq;
	D.incidents = w->incidents;
	D.incident_count = w->incident_count;
	D.pend = w->pend;
	D.pend_bit = w->pend_bit;
	D.npend = 0;
	D.offsets_zero = false;
}

/* qsort of uint32 (record lists) */
int
cmp_uint32(const void *a, const void *b)
{
	uint32		x = *(const uint32 *) a;
	uint32		y = *(const uint32 *) b;

	return x < y ? -1 : x > y;
}
