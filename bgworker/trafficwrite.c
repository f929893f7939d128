/*-------------------------------------------------------------------------
 *
 * trafficwrite.c
 *	  Writing a traffic object in O(changes), not O(locations).
 *
 * A free buffer is reused in place (tdb_writer_traffic_segment) and still
 * holds an object this daemon wrote a few writes earlier: only the entries
 * changed since then are copied, and the object's digest is updated by
 * theirs (tdb_traffic_update, docs/object-format.md).  What each write
 * changed is kept for the last WRITES_KEPT writes; a buffer older than that,
 * or holding another map or working state, is written whole.
 *
 * Incidents are laid out in record order (tdb_incident_layout, which replay
 * and followers use too), so one incident that grows moves the offsets of
 * every later one: the records that have an incident are kept sorted, and a
 * layout looks only at them and at the changed records, listing every entry
 * whose offset moved with the changes.  Cost: O(changes log changes +
 * incidents), with no scan of the locations.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "bgworker/daemon_internal.h"
#include "bgworker/genlog_store.h"

#define WRITES_KEPT 8

/*
 * A buffer is brought up to date entry by entry while the entries to copy
 * (the changes of every write since it was written) are at most
 * 1/DELTA_DIVISOR of the map, else written whole.  Each copied entry is a
 * scattered read and write and two digest terms; a whole write is one
 * sequential pass.  With 10,000 of 100,000 changed each generation (the
 * subscription bench), a buffer two writes old took a whole write when a
 * write of more than 1/16 of the map was not recorded: the daemon's cycle
 * went from 3.2-3.3 to 2.9-3.0 ms when writes up to 1/4 were recorded
 * (bench/sub_baselines.sh, 2 alternating runs of 7); at 1/3 that buffer
 * (20,000 entries to copy) is brought up to date in place the same way.
 */
#define DELTA_DIVISOR 3

/* The most entries a buffer is brought up to date with in place. */
static inline uint64
delta_limit(uint64 count)
{
	return count / DELTA_DIVISOR + 1024;
}

typedef struct WriteRecord
{
	uint64		seq;			/* 0: none */
	uint64		work_id;		/* D.work_id when written */
	bool		all;			/* not known, or too many: older buffers are written whole */
	uint32	   *idx;
	uint64		n;
	uint64		cap;
} WriteRecord;

static WriteRecord writes[WRITES_KEPT];
static uint64 write_seq;

/*
 * A write that failed between laying the incidents out (which moves offsets
 * in D.traffic) and record_write (no buffer: every version pinned, no name
 * left, /dev/shm full) leaves moved entries that no write record names: the
 * next write is then a whole one.
 */
static bool write_unfinished;

/* what each segment holds, as this daemon wrote it */
static struct
{
	uint64		write_seq;		/* 0: not known */
	uint64		shm_seq;		/* the segment's name: a new segment in the slot holds nothing */
	uint64		map_id;
	uint64		work_id;
}			held[TDB_MAX_SEGMENTS];

/* the records with an incident at the last layout, ascending; valid for inc_work_id */
static uint32 *inc_recs;
static uint64 ninc;
static uint64 inc_cap;
static uint64 inc_work_id;

/* records whose incident offset the last layout moved, beyond the changed ones */
static uint32 *moved;
static uint64 nmoved;
static uint64 moved_cap;

static void
ensure_u32(uint32 **a, uint64 *cap, uint64 need)
{
	if (*cap >= need)
		return;
	need = Max(need, Max(*cap * 2, 1024));
	/* keeps the content: note_moved grows the list it fills */
	*a = *a ? repalloc_huge(*a, need * sizeof(uint32)) : MemoryContextAllocHuge(D.cxt, need * sizeof(uint32));
	*cap = need;
}

static void
note_moved(uint32 i)
{
	ensure_u32(&moved, &moved_cap, nmoved + 1);
	moved[nmoved++] = i;
}

static void
moved_cb(void *arg, uint32 record, uint32 old_off)
{
	(void) arg;
	(void) old_off;
	note_moved(record);
}

/*
 * Lay the incidents out by difference (tdb_incident_layout_delta) from the
 * records that had one at the last layout and the changed ones (touched,
 * since that layout or more), filling moved[].
 */
static char *
layout_incidents_delta(const uint32 *touched, uint64 ntouched, Size *len)
{
	uint32	   *sorted = palloc_extended(Max(ntouched, 1) * sizeof(uint32), MCXT_ALLOC_HUGE);
	char	   *blob;

	nmoved = 0;
	memcpy(sorted, touched, ntouched * sizeof(uint32));
	for (uint64 k = 1; k < ntouched; k++)
		if (sorted[k] < sorted[k - 1])
		{
			/* the daemon's and a follower's lists come sorted: this is for anything else */
			qsort(sorted, ntouched, sizeof(uint32), cmp_uint32);
			break;
		}
	ensure_u32(&inc_recs, &inc_cap, ninc + ntouched);
	blob = tdb_incident_layout_delta(D.traffic, D.incidents, D.map.count, D.incident_count, inc_recs, &ninc,
									 sorted, ntouched, moved_cb, NULL, len);
	pfree(sorted);
	return blob;
}

/* A whole layout (tdb_incident_layout) and the sorted list of records with an incident. */
static char *
layout_incidents_all(Size *len)
{
	char	   *blob = tdb_incident_layout(D.traffic, D.incidents, D.map.count, D.incident_count, len);

	ninc = 0;
	ensure_u32(&inc_recs, &inc_cap, D.incident_count);
	for (uint64 i = 0; i < D.map.count && ninc < inc_cap; i++)
		if (D.incidents[i] != NULL)
			inc_recs[ninc++] = (uint32) i;
	inc_work_id = D.work_id;
	return blob;
}

/* Can segment seg be brought up to date from the write records?  Fills spans. */
static int
delta_spans(uint32 seg, TdbIndexSpan *spans)
{
	int			n = 0;

	if (held[seg].write_seq == 0 || held[seg].shm_seq != D.writer.ctl->segments[seg].seq ||
		held[seg].map_id != D.map.hdr->map_id || held[seg].work_id != D.work_id ||
		write_seq - held[seg].write_seq >= WRITES_KEPT)
		return -1;
	for (uint64 s = held[seg].write_seq + 1; s <= write_seq; s++)
	{
		WriteRecord *r = &writes[s % WRITES_KEPT];

		if (r->seq != s || r->all || r->work_id != D.work_id)
			return -1;
		spans[n].idx = r->idx;
		spans[n++].n = r->n;
	}
	return n;
}

/* A record's list given back. */
static void
release_list(WriteRecord *r)
{
	r->n = 0;
	if (r->idx != NULL)
		pfree(r->idx);
	r->idx = NULL;
	r->cap = 0;
}

/*
 * Note what this write changed (touched == NULL: not known) and what seg
 * now holds.  The lists kept hold at most half the map in all (2 bytes a
 * location): past that the oldest are forgotten, as a buffer that needed
 * them would need more than the third of the map past which it is written
 * whole anyway.
 */
static void
record_write(uint32 seg, const uint32 *touched, uint64 ntouched)
{
	WriteRecord *r = &writes[++write_seq % WRITES_KEPT];
	uint64		kept;

	r->seq = write_seq;
	r->work_id = D.work_id;
	r->all = touched == NULL || ntouched + nmoved > delta_limit(D.map.count);
	r->n = 0;
	if (r->all || r->cap > 4 * (ntouched + nmoved) + 65536)
		release_list(r);		/* a large list no longer needed is given back */
	if (!r->all)
	{
		ensure_u32(&r->idx, &r->cap, ntouched + nmoved);
		memcpy(r->idx, touched, ntouched * sizeof(uint32));
		if (nmoved > 0)
			memcpy(r->idx + ntouched, moved, nmoved * sizeof(uint32));
		r->n = ntouched + nmoved;
	}
	kept = r->n;
	for (uint64 back = 1; back < WRITES_KEPT && back < write_seq; back++)
	{
		WriteRecord *o = &writes[(write_seq - back) % WRITES_KEPT];

		if (o->seq != write_seq - back)
			break;
		kept += o->n;
		if (kept > D.map.count / 2 + 1024 && !o->all)
		{
			/* forgotten: its write counts as unknown */
			o->all = true;
			release_list(o);
		}
	}
	held[seg].write_seq = write_seq;
	held[seg].shm_seq = D.writer.ctl->segments[seg].seq;
	held[seg].map_id = D.map.hdr->map_id;
	held[seg].work_id = D.work_id;
}

uint32
write_traffic_object(uint64 gen, int64 created_us, const uint32 *touched, uint64 ntouched,
					 uint32 *seg, Size *bytes, uint64 *entries)
{
	Size		ibytes = 0;
	char	   *iblob = NULL;
	void	   *addr;
	char		err[TDB_ERRLEN];
	int			rc;
	uint64		count = D.map.count;
	TdbIndexSpan spans[WRITES_KEPT + 2];
	int			nspans;
	uint64		rank[TDB_MAX_SEGMENTS];

	nmoved = 0;
	if (write_unfinished)
		touched = NULL;
	write_unfinished = true;
	if (D.incident_count == 0 && D.offsets_zero)
	{
		/* no incident, and none laid out before: every incident_off is 0 already */
		ninc = 0;
		inc_work_id = D.work_id;
	}
	else if (touched != NULL && inc_work_id == D.work_id)
		iblob = layout_incidents_delta(touched, ntouched, &ibytes);
	else
	{
		iblob = layout_incidents_all(&ibytes);
		touched = NULL;			/* offsets moved in entries no list names */
	}
	D.offsets_zero = D.incident_count == 0;
	/* of the free buffers, the one written last: the fewest changes to copy */
	for (uint32 i = 0; i < TDB_MAX_SEGMENTS; i++)
		rank[i] = held[i].shm_seq == D.writer.ctl->segments[i].seq ? held[i].write_seq : 0;
	rc = tdb_writer_traffic_segment(&D.writer,
									tdb_writer_traffic_capacity(tdb_traffic_size(count, ibytes)),
									rank, seg, &addr, err);
	if (rc != TDB_SHM_OK)
		ereport(ERROR, (errmsg("could not get a traffic buffer: %s", err)));
	nspans = touched != NULL ? delta_spans(*seg, spans) : -1;
	if (nspans >= 0)
	{
		/* past a third of the map, one sequential pass costs less than the scattered entries */
		uint64		n = ntouched + nmoved;

		for (int k = 0; k < nspans; k++)
			n += spans[k].n;
		if (n > delta_limit(count))
			nspans = -1;
	}
	/*
	 * tdb_traffic_update trusts the buffer's header (count, sections): one
	 * that anyone with write access to /dev/shm changed is written whole.
	 */
	if (nspans >= 0 &&
		tdb_traffic_validate(addr, D.writer.ctl->segments[*seg].size, TDB_VALIDATE_HEADER, D.map.hdr, err) != TDB_OBJ_OK)
		nspans = -1;
	if (nspans >= 0)
	{
		spans[nspans].idx = touched;
		spans[nspans++].n = ntouched;
		spans[nspans].idx = moved;
		spans[nspans++].n = nmoved;
		tdb_traffic_update(addr, gen, D.traffic, spans, nspans, iblob, ibytes, created_us);
		*entries = 0;
		for (int k = 0; k < nspans; k++)
			*entries += spans[k].n;
	}
	else
	{
		tdb_traffic_write(addr, D.map.hdr->map_id, gen, count, D.traffic, iblob, ibytes, created_us);
		*entries = count;
	}
	record_write(*seg, touched, ntouched);
	write_unfinished = false;
	if (iblob)
		pfree(iblob);
	*bytes = tdb_traffic_size(count, ibytes);
	return ((TdbObjectHeader *) addr)->checksum;
}
