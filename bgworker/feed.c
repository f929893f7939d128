/*-------------------------------------------------------------------------
 *
 * feed.c
 *	  Feed intake: the daemon takes the committed rows of trafficdb.feed's
 *	  partitions, checks them, folds the good ones into the working traffic
 *	  and files the bad ones in trafficdb.feed_rejects, in the transaction
 *	  that logs the generation they go into.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>
#include <math.h>

#include "access/detoast.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "bgworker/daemon_internal.h"
#include "bgworker/working.h"
#include "module/trafficdb.h"

/* Valid ranges for feed values. */
#define MAX_SPEED_KMH 400.0

/* The longest incident text the feed accepts (bytes); longer rows go to feed_rejects. */
#define MAX_INCIDENT_BYTES 4096

#define NULL_LEVEL INT_MIN

/* The traffic values of a feed row: NULL speeds are NaN, NULL levels NULL_LEVEL. */
typedef struct TrafficRow
{
	float		speed;
	float		free_flow;
	int			congestion;
	int			confidence;
	char	   *incident;
	bool		observed_null;
	int64		observed_us;	/* Unix microseconds */
	TimestampTz observed;
} TrafficRow;

void
reject(Rejects *rj, int64 seq, int64 id, const char *reason)
{
	rj->seq = accumArrayResult(rj->seq, Int64GetDatum(seq), false, INT8OID, CurrentMemoryContext);
	rj->id = accumArrayResult(rj->id, Int64GetDatum(id), false, INT8OID, CurrentMemoryContext);
	rj->reason = accumArrayResult(rj->reason, CStringGetTextDatum(reason), false, TEXTOID,
								  CurrentMemoryContext);
	rj->n++;
}

/* NULL (NaN here) means unknown and is fine; anything else must be a speed. */
static bool
speed_ok(float v)
{
	return isnan(v) || (isfinite(v) && v >= 0 && v <= MAX_SPEED_KMH);
}

/* Check one feed row and fold it into the working traffic, or file it as a reject. */
typedef struct FeedRow
{
	int64		seq;
	int64		id;
	bool		nid;
	TrafficRow	t;
	int64		ibytes;			/* the incident's length (not read when too long) */
	bool		inull;
} FeedRow;

static void
consume_row(const FeedRow *row, uint64 gen, TimestampTz horizon, Rejects *rj)
{
	int64		seq = row->seq;
	int64		id = row->id;
	bool		nid = row->nid;
	const TrafficRow *tp = &row->t;
	TrafficRow	t = *tp;
	int64		i;

	if (!row->inull && row->ibytes > MAX_INCIDENT_BYTES)
	{
		/* never read into memory: a huge incident could stop every cycle */
		reject(rj, seq, nid ? 0 : id,
			   psprintf("incident is %lld bytes; at most %d are accepted", (long long) row->ibytes,
						MAX_INCIDENT_BYTES));
		return;
	}
	if (nid)
	{
		reject(rj, seq, 0, "location_id is NULL");
		return;
	}
	i = tdb_map_find(&D.map, (uint64) id);
	if (i < 0)
	{
		reject(rj, seq, id, "unknown location_id: not in the loaded map");
		return;
	}
	if (!speed_ok(t.speed))
	{
		reject(rj, seq, id, psprintf("speed_kmh %g is outside [0, %g]", t.speed, MAX_SPEED_KMH));
		return;
	}
	if (!speed_ok(t.free_flow))
	{
		reject(rj, seq, id, psprintf("free_flow_kmh %g is outside [0, %g]", t.free_flow, MAX_SPEED_KMH));
		return;
	}
	if (t.congestion != NULL_LEVEL && (t.congestion < 0 || t.congestion > TDB_CONGESTION_MAX))
	{
		reject(rj, seq, id, psprintf("congestion %d is outside [0, %d]", t.congestion, TDB_CONGESTION_MAX));
		return;
	}
	if (t.confidence != NULL_LEVEL && (t.confidence < 0 || t.confidence > 100))
	{
		reject(rj, seq, id, psprintf("confidence %d is outside [0, 100]", t.confidence));
		return;
	}
	if (t.observed_null)
	{
		reject(rj, seq, id, "observed_at is NULL");
		return;
	}
	/* compared as timestamptz: infinity and year 294276 must not wrap round in Unix microseconds */
	if (t.observed > horizon)
	{
		reject(rj, seq, id, psprintf("observed_at %s is more than 5 minutes in the future",
									 timestamptz_to_str(t.observed)));
		return;
	}
	/* the traffic object's 0 is "no traffic": a time at or before it would never show */
	if (t.observed_us <= 0)
	{
		reject(rj, seq, id, psprintf("observed_at %s is not after 1970-01-01 00:00:00+00",
									 timestamptz_to_str(t.observed)));
		return;
	}
	apply_traffic((uint64) i, t.observed_us, seq, t.speed, t.free_flow, t.congestion,
				  t.confidence, t.incident, gen);
}

/*
 * Take feed partition p (inside the cycle's transaction): lock it, waiting
 * (if wait) at most trafficdb.feed_lock_timeout for the writers already in
 * it (new ones were pointed at another partition before), read it whole into the
 * working traffic and truncate it.  The lock is held until the commit that
 * logs the generation, so no row can enter p between the read and the
 * TRUNCATE; a writer that chose p just before the flip waits for our commit
 * and its rows are taken next time p comes round.  Returns the rows read,
 * or -1 if p could not be locked in time (its rows wait for a later cycle).
 */
/* The feed's columns, by name in each partition (a partition may have other attribute numbers). */
static const struct
{
	const char *name;
	Oid			type;
}			feed_cols[] = {
	{"seq", INT8OID}, {"location_id", INT8OID}, {"speed_kmh", FLOAT4OID}, {"free_flow_kmh", FLOAT4OID},
	{"congestion", INT2OID}, {"confidence", INT2OID}, {"incident", TEXTOID}, {"observed_at", TIMESTAMPTZOID}
};

/*
 * Read partition relid (locked AccessExclusive by the caller) whole, with a
 * heap scan under a snapshot taken now: no executor and no tuple copies (the
 * SPI cursor this replaces cost about twice as much per row).
 */
static int64
scan_partition(Oid relid, int p, uint64 gen, TimestampTz horizon, Rejects *rj)
{
	Relation	rel = table_open(relid, NoLock);
	TupleDesc	td = RelationGetDescr(rel);
	int			att[lengthof(feed_cols)];
	Snapshot	snap;
	TableScanDesc scan;
	TupleTableSlot *slot;
	MemoryContext textcxt;
	int64		n = 0;

	for (int c = 0; c < (int) lengthof(feed_cols); c++)
	{
		att[c] = -1;
		for (int j = 0; j < td->natts; j++)
		{
			Form_pg_attribute a = TupleDescAttr(td, j);

			if (!a->attisdropped && strcmp(NameStr(a->attname), feed_cols[c].name) == 0)
			{
				if (a->atttypid != feed_cols[c].type)
					ereport(ERROR,
							(errcode(ERRCODE_DATATYPE_MISMATCH),
							 errmsg("column %s of trafficdb.feed_%d has type %s, not %s", feed_cols[c].name, p,
									format_type_be(a->atttypid), format_type_be(feed_cols[c].type)),
							 errhint("Recreate the extension: the feed's columns are its own.")));
				att[c] = j;
			}
		}
		if (att[c] < 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("trafficdb.feed_%d has no column %s", p, feed_cols[c].name),
					 errhint("Recreate the extension: the feed's columns are its own.")));
	}

	snap = RegisterSnapshot(GetLatestSnapshot());
	scan = table_beginscan(rel, snap, 0, NULL);
	slot = table_slot_create(rel, NULL);
	textcxt = AllocSetContextCreate(CurrentMemoryContext, "trafficdb feed text", ALLOCSET_DEFAULT_SIZES);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		Datum	   *v;
		bool	   *nl;
		FeedRow		row;

		if ((n & 65535) == 0)
		{
			CHECK_FOR_INTERRUPTS();
			MemoryContextReset(textcxt);
		}
		slot_getallattrs(slot);
		v = slot->tts_values;
		nl = slot->tts_isnull;
		row.seq = nl[att[0]] ? 0 : DatumGetInt64(v[att[0]]);
		row.nid = nl[att[1]];
		row.id = row.nid ? 0 : DatumGetInt64(v[att[1]]);
		row.t.speed = nl[att[2]] ? NAN : DatumGetFloat4(v[att[2]]);
		row.t.free_flow = nl[att[3]] ? NAN : DatumGetFloat4(v[att[3]]);
		row.t.congestion = nl[att[4]] ? NULL_LEVEL : DatumGetInt16(v[att[4]]);
		row.t.confidence = nl[att[5]] ? NULL_LEVEL : DatumGetInt16(v[att[5]]);
		row.inull = nl[att[6]];
		row.ibytes = 0;
		row.t.incident = NULL;
		if (!row.inull)
		{
			/* measured without detoasting: a huge one is never read */
			row.ibytes = (int64) toast_raw_datum_size(v[att[6]]) - VARHDRSZ;
			if (row.ibytes <= MAX_INCIDENT_BYTES)
			{
				MemoryContext old = MemoryContextSwitchTo(textcxt);

				row.t.incident = TextDatumGetCString(v[att[6]]);
				MemoryContextSwitchTo(old);
			}
		}
		row.t.observed_null = nl[att[7]];
		row.t.observed = row.t.observed_null ? 0 : DatumGetTimestampTz(v[att[7]]);
		/* infinity and the last years a timestamptz holds do not fit: checked by consume_row */
		row.t.observed_us = TIMESTAMP_NOT_FINITE(row.t.observed) || row.t.observed > PG_INT64_MAX - UNIX_TO_PG_US ? 0 :
			(int64) row.t.observed + UNIX_TO_PG_US;
		consume_row(&row, gen, horizon, rj);
		n++;
	}
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	UnregisterSnapshot(snap);
	MemoryContextDelete(textcxt);
	table_close(rel, NoLock);
	return n;
}

/*
 * Nothing in partition relid, not even dead rows: no block (TRUNCATE leaves
 * none, and a row, committed or not, makes one).  An AccessShareLock, held
 * only for the look: unlike the AccessExclusiveLock that taking rows needs,
 * it gives the transaction no xid and writes no WAL (under wal_level
 * replica an exclusive lock is logged for standbys, and the commit then
 * waits for its flush): an idle daemon's feed cycles write nothing.
 */
static bool
partition_empty(Oid relid)
{
	Relation	rel = table_open(relid, AccessShareLock);
	bool		empty = RelationGetNumberOfBlocks(rel) == 0;

	table_close(rel, AccessShareLock);
	return empty;
}

/* The longest sleep between two tries of a partition's lock (they start at 1 ms and double). */
#define FEED_LOCK_POLL_MAX_MS 8

static int64
consume_partition(int p, uint64 gen, Rejects *rj, bool wait)
{
	Oid			nsp = get_namespace_oid("trafficdb", false);
	Oid			relid = get_relname_relid(psprintf("feed_%d", p), nsp);
	TimestampTz horizon = GetCurrentTimestamp() + 5 * 60 * USECS_PER_SEC;
	int64		n = 0;
	TimestampTz start = GetCurrentTimestamp();
	long		poll_ms = 1;

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("trafficdb.feed_%d does not exist", p),
				 errhint("Recreate the extension: the feed is partitions trafficdb.feed_0 to trafficdb.feed_%d.", TDB_FEED_PARTS - 1)));
	/* rows inserted after this look are taken by the next cycle, as rows inserted after the scan */
	if (partition_empty(relid))
		return 0;
	/* without queueing: a writer holding its transaction open delays only its partition */
	while (!ConditionalLockRelationOid(relid, AccessExclusiveLock))
	{
		if (!wait || TimestampDifferenceExceeds(start, GetCurrentTimestamp(), tdb_feed_lock_timeout_ms))
		{
			SpinLockAcquire(&tdb_shared->mutex);
			tdb_shared->feed_parts_skipped++;
			SpinLockRelease(&tdb_shared->mutex);
			return -1;
		}
		CHECK_FOR_INTERRUPTS();
		/* not the latch: a request it carries is the main loop's to see */
		pg_usleep(poll_ms * 1000L);
		poll_ms = Min(poll_ms * 2, FEED_LOCK_POLL_MAX_MS);
	}

	n = scan_partition(relid, p, gen, horizon, rj);
	/* with no row left (dead ones too: they would keep partition_empty false) */
	if (SPI_execute(psprintf("TRUNCATE trafficdb.feed_%d", p), false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not truncate trafficdb.feed_%d", p);
	return n;
}

/*
 * Consume the feed (inside a transaction): point new rows at a partition
 * that no writer holds, then take every other one whose writers have
 * finished (at start, all).  A partition that could not be locked is
 * "held" (a writer keeps its transaction open): new rows avoid it until it
 * has been taken.  Returns the rows consumed.
 */
static bool feed_held[TDB_FEED_PARTS];

static uint64
consume_feed(uint64 gen, Rejects *rj, bool all)
{
	int			cur = (int) (pg_atomic_read_u32(&tdb_shared->feed_part) % TDB_FEED_PARTS);
	int			next = cur;
	uint64		n = 0;

	for (int k = 1; k < TDB_FEED_PARTS; k++)
		if (!feed_held[(cur + k) % TDB_FEED_PARTS])
		{
			next = (cur + k) % TDB_FEED_PARTS;
			break;
		}
	pg_atomic_write_u32(&tdb_shared->feed_part, (uint32) next);
	for (int p = 0; p < TDB_FEED_PARTS; p++)
	{
		int64		k;

		if (p == next && !all)
			continue;
		/* only the partition new rows went to until now can have writers finishing */
		k = consume_partition(p, gen, rj, p == cur);
		feed_held[p] = k < 0;
		if (k > 0)
			n += (uint64) k;
	}
	return n;
}

void
persist_rejects(Rejects *rj)
{
	Oid			types[3] = {INT8ARRAYOID, INT8ARRAYOID, TEXTARRAYOID};
	Datum		vals[3];

	if (rj->n == 0)
		return;
	vals[0] = makeArrayResult(rj->seq, CurrentMemoryContext);
	vals[1] = makeArrayResult(rj->id, CurrentMemoryContext);
	vals[2] = makeArrayResult(rj->reason, CurrentMemoryContext);
	SPI_execute_with_args("INSERT INTO trafficdb.feed_rejects (seq, location_id, reason) "
						  "SELECT * FROM unnest($1, $2, $3)", 3, types, vals, NULL, false, 0);
}

/*
 * One cycle of feed consumption and publication.  force: publish even if
 * nothing changed (a trafficdb.publish() call).
 */
uint64
absorb_feed(uint64 gen, bool all)
{
	uint64		consumed;
	Rejects		rj = {0};
	instr_time	start,
				dur;

	INSTR_TIME_SET_CURRENT(start);
	consumed = consume_feed(gen, &rj, all);

	if (D.npend > 0)
		D.dirty = true;
	persist_rejects(&rj);
	INSTR_TIME_SET_CURRENT(dur);
	INSTR_TIME_SUBTRACT(dur, start);
	SpinLockAcquire(&tdb_shared->mutex);
	tdb_shared->feed_rows_consumed += consumed - rj.n;
	tdb_shared->feed_rows_rejected += rj.n;
	if (consumed > 0)
		tdb_shared->last_feed_rows_per_sec = consumed / Max(INSTR_TIME_GET_DOUBLE(dur), 1e-6);
	SpinLockRelease(&tdb_shared->mutex);
	if (rj.n > 0)
		ereport(LOG, (errmsg("trafficdb: rejected " UINT64_FORMAT " feed row(s); see trafficdb.feed_rejects", rj.n)));
	return consumed;
}
