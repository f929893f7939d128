/*-------------------------------------------------------------------------
 *
 * genlog_segments.c
 *	  The generation log's segments: which partition of
 *	  trafficdb.generations records go to, moving on to the next one before
 *	  a checkpoint, and trimming by emptying whole segments (see
 *	  genlog_store.h and docs/write-path.md).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_inherits.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/procarray.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "bgworker/genlog_store.h"

static int	log_segment = -1;	/* the segment records go to; -1: not known yet */

/*
 * Per segment, once a trim found it aged out: that trim's transaction id.
 * TRUNCATE is not MVCC-safe (a snapshot older than it that reads the
 * segment afterwards finds it empty), so a segment is truncated only once
 * the marking transaction committed and every snapshot that can read the
 * segment is younger than it: each of them then saw the log with the
 * checkpoint that made the segment unneeded.  After HELD_TRIMS trims held
 * back so (a long transaction), its rows are deleted instead: MVCC-safe.
 */
static TransactionId trim_mark[TDB_LOG_SEGMENTS];
static int	trim_held[TDB_LOG_SEGMENTS];

#define HELD_TRIMS 3

static Oid	check_segment(int seg);

/* Is every snapshot that can read segment seg younger than xid? */
static bool
snapshots_after(int seg, TransactionId xid)
{
	Relation	rel = table_open(check_segment(seg), AccessShareLock);
	TransactionId horizon = GetOldestNonRemovableTransactionId(rel);

	table_close(rel, NoLock);
	return TransactionIdPrecedes(xid, horizon);
}

uint64
tdb_log_query_u64(const char *sql, int nargs, Oid *types, Datum *vals, uint64 dflt)
{
	bool		isnull;
	Datum		d;

	/* not read-only: see what this transaction deleted (a trim) */
	if (SPI_execute_with_args(sql, nargs, types, vals, NULL, false, 1) != SPI_OK_SELECT ||
		SPI_processed == 0)
		return dflt;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? dflt : (uint64) DatumGetInt64(d);
}

/*
 * Segment seg's table, which must still be a partition of the log: a
 * segment detached (or dropped) by hand is an error, never a table records
 * silently go to.  So is one whose DETACH ... CONCURRENTLY was cancelled
 * half-way: still a partition, but pending detach, which queries of
 * trafficdb.generations leave out (the log would read as holed).
 */
static Oid
check_segment(int seg)
{
	char		name[NAMEDATALEN];
	Oid			relid;

	snprintf(name, sizeof(name), "generations_%d", seg);
	relid = get_relname_relid(name, get_namespace_oid("trafficdb_log", false));
	if (!OidIsValid(relid) || !get_rel_relispartition(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("trafficdb_log.%s is not a segment of the generation log trafficdb.generations", name),
				 errhint("The log is eight partitions: ALTER TABLE trafficdb.generations ATTACH PARTITION trafficdb_log.%s FOR VALUES IN (%d).",
						 name, seg)));
	if (PartitionHasPendingDetach(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("trafficdb_log.%s is being detached from the generation log trafficdb.generations (a DETACH PARTITION ... CONCURRENTLY did not finish)", name),
				 errhint("Finish the detach and attach the segment again: ALTER TABLE trafficdb.generations DETACH PARTITION trafficdb_log.%s FINALIZE; ALTER TABLE trafficdb.generations ATTACH PARTITION trafficdb_log.%s FOR VALUES IN (%d).",
						 name, name, seg)));
	return relid;
}

int
tdb_log_current_segment(void)
{
	if (log_segment < 0)
	{
		uint64		s;

		if (!OidIsValid(get_namespace_oid("trafficdb_log", true)))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the generation log has no segments (schema trafficdb_log): the extension was created by an earlier build"),
					 errhint("pg_dump the database, then DROP EXTENSION trafficdb CASCADE and CREATE EXTENSION trafficdb with this build, and restore.")));
		s = tdb_log_query_u64("SELECT segment::bigint FROM trafficdb.generations "
										  "ORDER BY generation DESC LIMIT 1", 0, NULL, NULL, 0);

		log_segment = s < TDB_LOG_SEGMENTS ? (int) s : 0;
	}
	check_segment(log_segment);
	return log_segment;
}

/* The newest (or oldest) record of segment seg: false if it is empty. */
static bool
segment_end(int seg, bool newest, uint64 *gen, TimestampTz *created_at)
{
	char		sql[160];
	bool		isnull;

	snprintf(sql, sizeof(sql), "SELECT generation, created_at FROM trafficdb_log.generations_%d "
			 "ORDER BY generation %s LIMIT 1", seg, newest ? "DESC" : "ASC");
	/* not read-only: see what this transaction emptied */
	if (SPI_execute(sql, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read segment %d of trafficdb.generations", seg);
	if (SPI_processed == 0)
		return false;
	*gen = (uint64) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	*created_at = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	return true;
}

/*
 * Empty segment seg (TRUNCATE, or DELETE of its rows), unless that means
 * waiting for a lock someone holds on it, its indexes or its TOAST table:
 * the daemon never waits.  In a subtransaction with lock_timeout 1 ms, its
 * lock error (or a deadlock with a reader of a segment already emptied)
 * caught: false.
 */
static bool
empty_segment(int seg, bool by_delete)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool done = false;
	char		sql[64];

	check_segment(seg);
	snprintf(sql, sizeof(sql), by_delete ? "DELETE FROM trafficdb_log.generations_%d" : "TRUNCATE trafficdb_log.generations_%d", seg);
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		int			nest = NewGUCNestLevel();

		(void) set_config_option("lock_timeout", "1", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
		if (SPI_execute(sql, false, 0) != (by_delete ? SPI_OK_DELETE : SPI_OK_UTILITY))
			elog(ERROR, "could not trim trafficdb_log.generations_%d", seg);
		/* a lock timeout that fired as the lock was granted is raised here, and caught */
		CHECK_FOR_INTERRUPTS();
		AtEOXact_GUC(true, nest);
		ReleaseCurrentSubTransaction();
		done = true;
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		e = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		if (e->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE && e->sqlerrcode != ERRCODE_T_R_DEADLOCK_DETECTED)
			ReThrowError(e);
		FreeErrorData(e);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return done;
}

void
tdb_log_next_segment(uint64 gen, int retention_s, int retention_generations)
{
	int			cur;
	int			next;
	uint64		g;
	TimestampTz at;

	/* where the newest record is (whatever an aborted transaction left in memory) */
	log_segment = -1;
	cur = tdb_log_current_segment();
	next = (cur + 1) % TDB_LOG_SEGMENTS;
	if (!segment_end(next, false, &g, &at) && segment_end(cur, false, &g, &at) &&
		gen - g >= (uint64) retention_generations / (TDB_LOG_SEGMENTS - 1) &&
		GetCurrentTimestamp() - at >= (int64) retention_s * USECS_PER_SEC / (TDB_LOG_SEGMENTS - 1))
		log_segment = next;
}

uint64
tdb_log_trim(uint64 gen, uint64 keep_from_checkpoint, int retention_s, int retention_generations,
			 bool by_delete)
{
	uint64		by_count = gen > (uint64) retention_generations ? gen - (uint64) retention_generations : 0;
	uint64		keep = Min(by_count, keep_from_checkpoint);
	TimestampTz cutoff = GetCurrentTimestamp() - (int64) retention_s * USECS_PER_SEC;
	int			cur = tdb_log_current_segment();
	int			order[TDB_LOG_SEGMENTS];
	uint64		newest[TDB_LOG_SEGMENTS];
	TimestampTz at[TDB_LOG_SEGMENTS];
	int			n = 0;
	bool		hold = false;

	/* the other segments that hold records, oldest first */
	for (int seg = 0; seg < TDB_LOG_SEGMENTS; seg++)
	{
		int			k;

		if (seg == cur || !segment_end(seg, true, &newest[seg], &at[seg]))
		{
			trim_mark[seg] = InvalidTransactionId;
			trim_held[seg] = 0;
			continue;
		}
		for (k = n; k > 0 && newest[order[k - 1]] > newest[seg]; k--)
			order[k] = order[k - 1];
		order[k] = seg;
		n++;
	}
	/*
	 * A segment goes whole once its newest record is older than both
	 * settings keep and than the checkpoint replay may fall back to; in
	 * order, so that the log stays whole from its oldest record on: after
	 * one that must stay (in use, or marked too recently), none goes.
	 */
	for (int i = 0; i < n; i++)
	{
		int			seg = order[i];
		bool		delete_rows = by_delete;

		if (newest[seg] >= keep || at[seg] >= cutoff)
			break;
		if (!by_delete && (!TransactionIdIsValid(trim_mark[seg]) || !TransactionIdDidCommit(trim_mark[seg])))
		{
			trim_mark[seg] = GetTopTransactionId();
			trim_held[seg] = 0;
			hold = true;
		}
		if (hold)
			continue;
		if (!by_delete && !snapshots_after(seg, trim_mark[seg]))
		{
			if (++trim_held[seg] < HELD_TRIMS)
			{
				hold = true;
				continue;
			}
			if (trim_held[seg] == HELD_TRIMS)
				elog(LOG, "trafficdb: a snapshot older than the trim of trafficdb_log.generations_%d is still open: its rows are deleted instead of truncated", seg);
			delete_rows = true;
		}
		if (delete_rows || !empty_segment(seg, false))
		{
			/*
			 * A session holds a lock TRUNCATE would wait for (any role with
			 * USAGE on trafficdb_log can, by preparing a statement on the
			 * segment), or an old snapshot can still read it: its rows are
			 * deleted instead, which waits for no reader.
			 */
			if (!delete_rows)
				elog(LOG, "trafficdb: trafficdb_log.generations_%d is in use: its rows are deleted instead of truncated", seg);
			if (!empty_segment(seg, true))
			{
				elog(LOG, "trafficdb: trafficdb_log.generations_%d is locked: it is trimmed at a later checkpoint", seg);
				hold = true;
				continue;
			}
		}
		trim_mark[seg] = InvalidTransactionId;
		trim_held[seg] = 0;
	}
	return tdb_log_query_u64("SELECT min(generation) FROM trafficdb.generations", 0, NULL, NULL, gen);
}
