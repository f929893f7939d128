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

#include "catalog/namespace.h"
#include "executor/spi.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "bgworker/genlog_store.h"

static int	log_segment = -1;	/* the segment records go to; -1: not known yet */

int
tdb_log_current_segment(void)
{
	if (log_segment < 0)
	{
		uint64		s = tdb_log_query_u64("SELECT segment::bigint FROM trafficdb.generations "
										  "ORDER BY generation DESC LIMIT 1", 0, NULL, NULL, 0);

		log_segment = s < TDB_LOG_SEGMENTS ? (int) s : 0;
	}
	return log_segment;
}

/* The newest (or oldest) record of segment seg: false if it is empty. */
static bool
segment_end(int seg, bool newest, uint64 *gen, TimestampTz *created_at)
{
	char		sql[160];
	bool		isnull;

	snprintf(sql, sizeof(sql), "SELECT generation, created_at FROM trafficdb.generations_%d "
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
 * Empty segment seg, unless a session is reading it: the daemon never waits
 * for a lock a user holds (the next trim tries again).
 */
static bool
empty_segment(int seg)
{
	char		name[NAMEDATALEN];
	char		sql[80];
	Oid			relid;

	snprintf(name, sizeof(name), "generations_%d", seg);
	relid = get_relname_relid(name, get_namespace_oid("trafficdb", false));
	if (!OidIsValid(relid))
		elog(ERROR, "trafficdb.%s is missing: the generation log has lost a segment", name);
	if (!ConditionalLockRelationOid(relid, AccessExclusiveLock))
	{
		elog(LOG, "trafficdb: trafficdb.%s is in use: it is trimmed at a later checkpoint", name);
		return false;
	}
	snprintf(sql, sizeof(sql), "TRUNCATE trafficdb.%s", name);
	if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not trim trafficdb.%s", name);
	return true;
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
tdb_log_trim(uint64 gen, uint64 keep_from_checkpoint, int retention_s, int retention_generations)
{
	uint64		by_count = gen > (uint64) retention_generations ? gen - (uint64) retention_generations : 0;
	uint64		keep = Min(by_count, keep_from_checkpoint);
	TimestampTz cutoff = GetCurrentTimestamp() - (int64) retention_s * USECS_PER_SEC;
	int			cur;
	uint64		g;
	TimestampTz at;

	cur = tdb_log_current_segment();
	/*
	 * A segment goes whole once its newest record is older than both
	 * settings keep and than the checkpoint replay may fall back to.
	 */
	for (int seg = 0; seg < TDB_LOG_SEGMENTS; seg++)
		if (seg != cur && segment_end(seg, true, &g, &at) &&
			g < keep && at < cutoff)
			empty_segment(seg);
	return tdb_log_query_u64("SELECT min(generation) FROM trafficdb.generations", 0, NULL, NULL, gen);
}
