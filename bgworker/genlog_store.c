/*-------------------------------------------------------------------------
 *
 * genlog_store.c
 *	  The generation log in trafficdb.generations (see genlog_store.h and
 *	  docs/write-path.md).
 *
 * Records: D (one per published generation: the entries it changed), C
 * (a part of a checkpoint: the whole state of one generation, with ids) and
 * K (a checkpoint's marker: how many parts, a checksum over them, and the
 * map the state belongs to).  Bodies are the codec of src/genlog/genlog.h,
 * stored as written; PostgreSQL compresses them.  Nothing read from the
 * table is trusted: every body is checked (its CRC, then the decoder's
 * bounds, then that it belongs where it is) before it is applied.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "bgworker/genlog_store.h"
#include "checksum.h"
#include "genlog/genlog.h"
#include "hugepage.h"

#define UNIX_TO_PG_US ((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

#define K_MAGIC 0x4b424454u		/* "TDBK" */
#define K_BODY_SIZE 40

/* ---- the object's checksum --------------------------------------------------- */

char *
tdb_incident_layout(TdbTraffic *traffic, char **incidents, uint64 count, uint64 incident_count,
					Size *len)
{
	StringInfoData buf;
	uint32		zero = 0;

	*len = 0;
	if (incident_count == 0)
	{
		for (uint64 i = 0; i < count; i++)
			traffic[i].incident_off = 0;
		return NULL;
	}
	initStringInfo(&buf);
	appendBinaryStringInfo(&buf, (char *) &zero, 4);
	for (uint64 i = 0; i < count; i++)
	{
		uint32		l;

		if (incidents[i] == NULL)
		{
			traffic[i].incident_off = 0;
			continue;
		}
		l = (uint32) strlen(incidents[i]);
		traffic[i].incident_off = (uint32) buf.len;
		appendBinaryStringInfo(&buf, (char *) &l, 4);
		appendBinaryStringInfo(&buf, incidents[i], l);
	}
	*len = buf.len;
	return buf.data;
}

char *
tdb_incident_layout_delta(TdbTraffic *traffic, char **incidents, uint64 count, uint64 incident_count,
						  uint32 *inc, uint64 *ninc, const uint32 *changed, uint64 nchanged,
						  TdbIncidentMovedFn moved, void *arg, Size *len)
{
	uint32	   *cand = palloc_extended(Max(*ninc + nchanged, 1) * sizeof(uint32), MCXT_ALLOC_HUGE);
	uint64		ncand = 0,
				a = 0,
				b = 0,
				nnew = 0;
	StringInfoData buf;
	uint32		zero = 0;

	*len = 0;
	while (a < *ninc || b < nchanged)
	{
		uint32		i = (b >= nchanged || (a < *ninc && inc[a] <= changed[b])) ? inc[a++] : changed[b++];

		if (i < count && (ncand == 0 || cand[ncand - 1] != i))
			cand[ncand++] = i;
	}
	initStringInfo(&buf);
	if (incident_count > 0)
		appendBinaryStringInfo(&buf, (char *) &zero, 4);
	for (uint64 k = 0; k < ncand; k++)
	{
		uint32		i = cand[k];
		uint32		off = 0;

		if (incidents[i] != NULL)
		{
			uint32		l = (uint32) strlen(incidents[i]);

			off = (uint32) buf.len;
			appendBinaryStringInfo(&buf, (char *) &l, 4);
			appendBinaryStringInfo(&buf, incidents[i], l);
			inc[nnew++] = i;	/* from cand, a copy: inc is free to rewrite */
		}
		if (traffic[i].incident_off != off)
		{
			uint32		old = traffic[i].incident_off;

			traffic[i].incident_off = off;
			if (moved)
				moved(arg, i, old);
		}
	}
	*ninc = nnew;
	pfree(cand);
	if (incident_count == 0)
	{
		pfree(buf.data);
		return NULL;
	}
	*len = buf.len;
	return buf.data;
}

uint32
tdb_traffic_checksum(uint64 map_id, uint64 generation, int64 created_us, TdbTraffic *traffic,
					 char **incidents, uint64 count, uint64 incident_count)
{
	Size		ibytes;
	char	   *iblob = tdb_incident_layout(traffic, incidents, count, incident_count, &ibytes);
	uint32		crc = tdb_traffic_checksum_of(map_id, generation, count, traffic, iblob, ibytes, created_us);

	if (iblob)
		pfree(iblob);
	return crc;
}

/* ---- writing ------------------------------------------------------------------ */

static void
to_entry(const TdbLogState *s, uint32 i, TdbGenlogEntry *e, uint64 gen)
{
	const TdbTraffic *t = &s->traffic[i];

	memset(e, 0, sizeof(*e));
	e->record = i;
	e->observed_us = t->updated_at_us;
	if (!isnan(t->speed_kmh))
	{
		e->present |= TDB_GENLOG_HAS_SPEED;
		e->speed_kmh = t->speed_kmh;
	}
	if (!isnan(t->free_flow_kmh))
	{
		e->present |= TDB_GENLOG_HAS_FREE_FLOW;
		e->free_flow_kmh = t->free_flow_kmh;
	}
	if (t->congestion != TDB_CONGESTION_UNKNOWN)
	{
		e->present |= TDB_GENLOG_HAS_CONGESTION;
		e->congestion = t->congestion;
	}
	if (t->confidence != TDB_CONFIDENCE_UNKNOWN)
	{
		e->present |= TDB_GENLOG_HAS_CONFIDENCE;
		e->confidence = t->confidence;
	}
	if (t->flags != 0)
	{
		e->present |= TDB_GENLOG_HAS_FLAGS;
		e->flags = t->flags;
	}
	/* (no incident anywhere, the common case: not a random read of the pointer array each) */
	if (s->incident_count > 0 && s->incidents[i])
	{
		e->present |= TDB_GENLOG_HAS_INCIDENT;
		e->incident = s->incidents[i];
		e->incident_len = (uint32) strlen(s->incidents[i]);
	}
	e->changed_gen = Min(t->changed_gen, gen);
	e->id = s->ids ? s->ids[i] : 0;
}

static SPIPlanPtr insert_plans[TDB_LOG_SEGMENTS];

/* Append a record: rec is len bytes after VARHDRSZ bytes of room for its header. */
static void
insert_record(uint64 gen, char kind, int part, int64 created_us, uint64 map_id, int64 entries,
			  bool has_crc, uint32 object_crc, void *rec, Size len)
{
	Oid			types[9] = {INT8OID, CHAROID, INT4OID, TIMESTAMPTZOID, INT8OID, INT8OID, INT8OID, INT8OID, BYTEAOID};
	Datum		vals[9];
	char		nulls[9] = "         ";
	bytea	   *b = rec;
	const char *body = VARDATA(b);
	int			seg = tdb_log_current_segment();

	SET_VARSIZE(b, VARHDRSZ + len);
	vals[0] = Int64GetDatum((int64) gen);
	vals[1] = CharGetDatum(kind);
	vals[2] = Int32GetDatum(part);
	vals[3] = TimestampTzGetDatum((TimestampTz) (created_us - UNIX_TO_PG_US));
	vals[4] = Int64GetDatum((int64) map_id);
	vals[5] = Int64GetDatum(entries);
	vals[6] = Int64GetDatum((int64) object_crc);
	nulls[6] = has_crc ? ' ' : 'n';
	vals[7] = Int64GetDatum((int64) tdb_crc32c(body, len));
	vals[8] = PointerGetDatum(b);
	/*
	 * Planned once per segment for the daemon's life (a record a generation;
	 * the plan cache re-plans it when a trim empties the segment, and every
	 * name in it is schema-qualified).  Straight into the partition: no
	 * tuple routing per record.
	 */
	if (insert_plans[seg] == NULL)
	{
		char		sql[256];
		SPIPlanPtr	plan;

		snprintf(sql, sizeof(sql), "INSERT INTO trafficdb_log.generations_%d (generation, kind, part, created_at, "
				 "map_id, entries, object_crc, body_crc, body, segment) "
				 "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, %d)", seg, seg);
		plan = SPI_prepare(sql, 9, types);
		if (plan == NULL || SPI_keepplan(plan) != 0)
			elog(ERROR, "could not plan the insert into trafficdb_log.generations_%d: %s",
				 seg, SPI_result_code_string(SPI_result));
		insert_plans[seg] = plan;
	}
	if (SPI_execute_plan(insert_plans[seg], vals, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not append to trafficdb_log.generations_%d", seg);
}

/*
 * Append a record the encoder made (malloc'd, VARHDRSZ bytes of room in
 * front), freeing it whatever happens: one copy of a checkpoint part (the
 * tuple's) instead of three.
 */
static void
insert_encoded(uint64 gen, char kind, int part, int64 created_us, uint64 map_id, int64 entries,
			   bool has_crc, uint32 object_crc, uint8_t *rec, size_t len)
{
	/* (the row's other columns and tuple header are formed around it: room for them) */
	if (len > MaxAllocSize - VARHDRSZ - 4096)
	{
		free(rec);
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a generation log record of %zu bytes is more than a bytea holds", len),
				 errhint("Lower trafficdb.checkpoint_part_entries.")));
	}
	PG_TRY();
	{
		insert_record(gen, kind, part, created_us, map_id, entries, has_crc, object_crc, rec, len);
	}
	PG_FINALLY();
	{
		free(rec);
	}
	PG_END_TRY();
}

/*
 * The encoder's entries: of a D record, the changed records recs[] (n of
 * them, scattered over the map: fetched ahead); of a checkpoint part
 * (recs NULL), records part_first onwards in order.
 */
typedef struct EntrySource
{
	const TdbLogState *s;
	const uint32 *recs;
	uint64		n;
	uint64		part_first;
	uint64		gen;
} EntrySource;

static const TdbGenlogEntry *
source_entries(void *arg, uint32_t first, uint32_t n, TdbGenlogEntry *buf)
{
	EntrySource *src = arg;

	for (uint32_t k = 0; k < n; k++)
	{
		if (src->recs != NULL && first + k + 8 < src->n)
		{
			__builtin_prefetch(&src->s->traffic[src->recs[first + k + 8]]);
			if (src->s->incident_count > 0)
				__builtin_prefetch(&src->s->incidents[src->recs[first + k + 8]]);
		}
		to_entry(src->s, src->recs != NULL ? src->recs[first + k] : (uint32) (src->part_first + first + k),
				 &buf[k], src->gen);
	}
	return buf;
}

Size
tdb_log_write_delta(uint64 gen, int64 created_us, uint32 object_crc, const TdbLogState *s,
					const uint32 *recs, uint64 n)
{
	TdbGenlogHeader h;
	EntrySource src = {s, recs, n, 0, gen};
	uint8_t    *rec;
	size_t		len;
	char		err[TDB_GENLOG_ERRLEN];

	if (n > UINT32_MAX)
		elog(ERROR, "too many changed entries in one generation: " UINT64_FORMAT, n);
	memset(&h, 0, sizeof(h));
	h.kind = TDB_GENLOG_DELTA;
	h.generation = gen;
	h.map_id = s->map_id;
	h.count = s->count;
	rec = tdb_genlog_encode_from(&h, (uint32) n, source_entries, &src, VARHDRSZ, &len, err);
	if (rec == NULL)
		elog(ERROR, "could not encode generation " UINT64_FORMAT ": %s", gen, err);
	insert_encoded(gen, 'D', 0, created_us, s->map_id, (int64) n, true, object_crc, rec, len);
	return len;
}

static void
put_u32(uint8 *p, uint32 v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8) (v >> (8 * i));
}

static void
put_u64(uint8 *p, uint64 v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8) (v >> (8 * i));
}

static uint32
get_u32(const uint8 *p)
{
	uint32		v = 0;

	for (int i = 0; i < 4; i++)
		v |= (uint32) p[i] << (8 * i);
	return v;
}

static uint64
get_u64(const uint8 *p)
{
	uint64		v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64) p[i] << (8 * i);
	return v;
}

Size
tdb_log_write_checkpoint(uint64 gen, int64 created_us, uint32 object_crc, const TdbLogState *s,
						 const TdbLogMapInfo *mi, uint64 part_entries)
{
	uint32		nparts = 0;
	uint32		parts_crc = TDB_CRC32C_INIT;
	uint8		k[K_BODY_SIZE];
	uint8		kr[VARHDRSZ + K_BODY_SIZE] pg_attribute_aligned(4);
	Size		total = 0;

	if (part_entries == 0)
		part_entries = 1;
	for (uint64 first = 0; first < s->count || (first == 0 && nparts == 0); first += part_entries)
	{
		uint64		n = Min(part_entries, s->count - first);
		TdbGenlogHeader h;
		EntrySource src = {s, NULL, n, first, gen};
		uint8_t    *rec;
		size_t		len;
		char		err[TDB_GENLOG_ERRLEN];
		uint8		c[4];

		memset(&h, 0, sizeof(h));
		h.kind = TDB_GENLOG_CHECKPOINT;
		h.generation = gen;
		h.map_id = s->map_id;
		h.count = s->count;
		h.first_record = (uint32) first;
		rec = tdb_genlog_encode_from(&h, (uint32) n, source_entries, &src, VARHDRSZ, &len, err);
		if (rec == NULL)
			elog(ERROR, "could not encode the checkpoint of generation " UINT64_FORMAT ": %s", gen, err);
		put_u32(c, tdb_crc32c(rec + VARHDRSZ, len));
		parts_crc = tdb_crc32c_update(parts_crc, c, 4);
		insert_encoded(gen, 'C', (int) nparts, created_us, s->map_id, (int64) n, false, 0, rec, len);
		total += len;
		nparts++;
		if (s->count == 0)
			break;
	}

	memset(k, 0, sizeof(k));
	put_u32(k, K_MAGIC);
	put_u32(k + 4, nparts);
	put_u32(k + 8, tdb_crc32c_final(parts_crc));
	put_u32(k + 12, mi->map_crc);
	put_u64(k + 16, mi->map_generation);
	put_u64(k + 24, (uint64) mi->map_created_us);
	put_u64(k + 32, mi->replaced ? 1 : 0);
	memcpy(kr + VARHDRSZ, k, sizeof(k));
	insert_record(gen, 'K', 0, created_us, s->map_id, (int64) s->count, true, object_crc, kr, sizeof(k));
	return total + sizeof(k);
}

/* ---- queries ------------------------------------------------------------------ */

uint64
tdb_log_checkpoint_alone_after(uint64 last)
{
	Oid			type = INT8OID;
	Datum		arg = Int64GetDatum((int64) last);

	return tdb_log_query_u64("SELECT min(k.generation) FROM trafficdb.generations k "
					 "WHERE k.kind = 'K' AND k.generation > $1 AND NOT EXISTS "
					 "(SELECT FROM trafficdb.generations d WHERE d.kind = 'D' AND d.generation = k.generation)",
					 1, &type, &arg, 0);
}

uint64
tdb_log_last_generation(void)
{
	return tdb_log_query_u64("SELECT max(generation) FROM trafficdb.generations", 0, NULL, NULL, 0);
}

/* ---- replay --------------------------------------------------------------------- */

typedef struct RecordRow
{
	uint64		generation;
	int			part;
	int64		created_us;
	uint64		map_id;
	int64		entries;
	bool		has_crc;
	uint32		object_crc;
	uint32		body_crc;
	const uint8 *body;
	Size		len;
} RecordRow;

/* Columns: generation, part, created_at, map_id, entries, object_crc, body_crc, body. */
#define RECORD_COLS "generation, part, created_at, map_id, entries, object_crc, body_crc, body"

static void
read_row(HeapTuple tup, TupleDesc td, RecordRow *r)
{
	bool		isnull;
	bytea	   *b;

	r->generation = (uint64) DatumGetInt64(SPI_getbinval(tup, td, 1, &isnull));
	r->part = DatumGetInt32(SPI_getbinval(tup, td, 2, &isnull));
	r->created_us = DatumGetTimestampTz(SPI_getbinval(tup, td, 3, &isnull)) + UNIX_TO_PG_US;
	r->map_id = (uint64) DatumGetInt64(SPI_getbinval(tup, td, 4, &isnull));
	r->entries = DatumGetInt64(SPI_getbinval(tup, td, 5, &isnull));
	r->object_crc = (uint32) DatumGetInt64(SPI_getbinval(tup, td, 6, &isnull));
	r->has_crc = !isnull;
	r->body_crc = (uint32) DatumGetInt64(SPI_getbinval(tup, td, 7, &isnull));
	b = DatumGetByteaPP(SPI_getbinval(tup, td, 8, &isnull));
	r->body = (const uint8 *) VARDATA_ANY(b);
	r->len = VARSIZE_ANY_EXHDR(b);
}

static void
set_entry(TdbLogState *s, const TdbGenlogEntry *e, MemoryContext cxt)
{
	TdbTraffic *t = &s->traffic[e->record];

	t->updated_at_us = e->observed_us;
	t->changed_gen = e->changed_gen;
	t->speed_kmh = (e->present & TDB_GENLOG_HAS_SPEED) ? e->speed_kmh : NAN;
	t->free_flow_kmh = (e->present & TDB_GENLOG_HAS_FREE_FLOW) ? e->free_flow_kmh : NAN;
	t->congestion = (e->present & TDB_GENLOG_HAS_CONGESTION) ? e->congestion : TDB_CONGESTION_UNKNOWN;
	t->confidence = (e->present & TDB_GENLOG_HAS_CONFIDENCE) ? e->confidence : TDB_CONFIDENCE_UNKNOWN;
	t->flags = (e->present & TDB_GENLOG_HAS_FLAGS) ? e->flags : 0;
	t->incident_off = 0;
	if (s->incidents[e->record])
	{
		pfree(s->incidents[e->record]);
		s->incidents[e->record] = NULL;
		s->incident_count--;
	}
	if (e->present & TDB_GENLOG_HAS_INCIDENT)
	{
		s->incidents[e->record] = MemoryContextAlloc(cxt, e->incident_len + 1);
		memcpy(s->incidents[e->record], e->incident, e->incident_len);
		s->incidents[e->record][e->incident_len] = '\0';
		s->incident_count++;
	}
}

static void
free_state(TdbLogState *s)
{
	if (s->traffic == NULL)
		return;
	for (uint64 i = 0; i < s->count; i++)
		if (s->incidents[i])
			pfree(s->incidents[i]);
	pfree(s->traffic);
	pfree(s->incidents);
	pfree(s->ids);
	memset(s, 0, sizeof(*s));
}

/*
 * Load the checkpoint whose marker is k into s.  Returns false with a
 * reason in err if any part is missing or damaged.
 */
static bool
load_checkpoint(const RecordRow *k, TdbLogState *s, TdbLogMapInfo *mi, MemoryContext cxt,
				char *err, Size errlen)
{
	uint32		nparts;
	uint32		want_crc;
	uint32		parts_crc = TDB_CRC32C_INIT;
	uint64		next = 0;
	Oid			type = INT8OID;
	Datum		arg = Int64GetDatum((int64) k->generation);
	Portal		portal;
	bool		ok = true;

	if (k->len != K_BODY_SIZE || tdb_crc32c(k->body, k->len) != k->body_crc ||
		get_u32(k->body) != K_MAGIC || k->entries < 0 || (uint64) k->entries >= UINT32_MAX)
	{
		snprintf(err, errlen, "its marker is damaged");
		return false;
	}
	nparts = get_u32(k->body + 4);
	want_crc = get_u32(k->body + 8);
	mi->map_crc = get_u32(k->body + 12);
	mi->map_generation = get_u64(k->body + 16);
	mi->map_created_us = (int64) get_u64(k->body + 24);
	mi->replaced = (get_u64(k->body + 32) & 1) != 0;

	s->map_id = k->map_id;
	s->count = (uint64) k->entries;
	/*
	 * These become the daemon's working arrays (updates land at random):
	 * huge pages where the kernel grants them, asked before the first touch
	 * as alloc_working does, or a restarted daemon works on 4 kB pages.
	 */
	s->traffic = tdb_huge_fresh(MemoryContextAllocHuge(cxt, Max(s->count, 1) * sizeof(TdbTraffic)),
								Max(s->count, 1) * sizeof(TdbTraffic), false);
	s->incidents = tdb_huge_fresh(MemoryContextAllocHuge(cxt, Max(s->count, 1) * sizeof(char *)),
								  Max(s->count, 1) * sizeof(char *), true);
	s->ids = MemoryContextAllocHuge(cxt, Max(s->count, 1) * sizeof(uint64));
	s->incident_count = 0;

	portal = SPI_cursor_open_with_args(NULL, "SELECT " RECORD_COLS " FROM trafficdb.generations "
									   "WHERE generation = $1 AND kind = 'C' ORDER BY part",
									   1, &type, &arg, NULL, true, 0);
	for (uint32 p = 0; ok; p++)
	{
		RecordRow	r;
		TdbGenlogHeader h;
		TdbGenlogEntry *e = NULL;
		char		derr[TDB_GENLOG_ERRLEN];
		uint8		c[4];

		SPI_cursor_fetch(portal, true, 1);
		if (SPI_processed == 0)
		{
			if (p != nparts)
			{
				snprintf(err, errlen, "it has %u of its %u parts", p, nparts);
				ok = false;
			}
			break;
		}
		read_row(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, &r);
		if ((uint32) r.part != p || p >= nparts)
		{
			snprintf(err, errlen, "part %d is unexpected (%u parts)", r.part, nparts);
			ok = false;
		}
		else if (tdb_crc32c(r.body, r.len) != r.body_crc)
		{
			snprintf(err, errlen, "part %d fails its checksum", r.part);
			ok = false;
		}
		else if (!tdb_genlog_decode(r.body, r.len, &h, &e, derr))
		{
			snprintf(err, errlen, "part %d: %s", r.part, derr);
			ok = false;
		}
		else if (h.kind != TDB_GENLOG_CHECKPOINT || h.generation != k->generation ||
				 h.map_id != k->map_id || h.count != s->count || h.first_record != next ||
				 (uint64) h.first_record + h.n > s->count)
		{
			snprintf(err, errlen, "part %d does not belong to it", r.part);
			ok = false;
		}
		else
		{
			for (uint32 j = 0; j < h.n; j++)
			{
				set_entry(s, &e[j], cxt);
				s->ids[e[j].record] = e[j].id;
			}
			next += h.n;
			put_u32(c, r.body_crc);
			parts_crc = tdb_crc32c_update(parts_crc, c, 4);
		}
		free(e);
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	if (ok && next != s->count)
	{
		snprintf(err, errlen, "its parts hold " UINT64_FORMAT " of " UINT64_FORMAT " locations", next, s->count);
		ok = false;
	}
	if (ok && tdb_crc32c_final(parts_crc) != want_crc)
	{
		snprintf(err, errlen, "its parts are not the ones it was written with");
		ok = false;
	}
	if (!ok)
		free_state(s);
	return ok;
}

static void
check_crc(TdbReplay *r, uint64 gen, uint32 crc, uint32 recorded)
{
	r->verified++;
	if (crc != recorded)
	{
		r->mismatches++;
		ereport(WARNING,
				(errmsg("trafficdb: replay of generation " UINT64_FORMAT " is not byte-identical to its publication "
						"(object checksum %08x, recorded %08x)", gen, crc, recorded)));
	}
}

static void
verify(TdbReplay *r, const RecordRow *row)
{
	if (!row->has_crc)
		return;
	check_crc(r, row->generation,
			  tdb_traffic_checksum(r->state.map_id, row->generation, row->created_us, r->state.traffic,
								   r->state.incidents, r->state.count, r->state.incident_count),
			  row->object_crc);
}

bool
tdb_log_follow(TdbLogState *s, uint64 *last, uint64 max, tdb_log_gen_fn cb, void *arg, MemoryContext cxt,
			   uint64 *damaged_at, uint64 *applied, char *err, Size errlen)
{
	Oid			types[2] = {INT8OID, INT8OID};
	Datum		args[2];
	Portal		portal;
	MemoryContext rowcxt = AllocSetContextCreate(CurrentMemoryContext, "trafficdb replay", ALLOCSET_DEFAULT_SIZES);
	bool		ok = true;

	args[0] = Int64GetDatum((int64) *last);
	args[1] = Int64GetDatum(max > 0 ? (int64) max : PG_INT64_MAX);
	portal = SPI_cursor_open_with_args(NULL, "SELECT " RECORD_COLS " FROM trafficdb.generations "
									   "WHERE kind = 'D' AND generation > $1 ORDER BY generation, part LIMIT $2",
									   2, types, args, NULL, true, 0);
	for (;;)
	{
		RecordRow	row;
		TdbGenlogHeader h;
		TdbGenlogEntry *e = NULL;
		char		derr[TDB_GENLOG_ERRLEN];
		bool		bad = true;
		MemoryContext old;

		SPI_cursor_fetch(portal, true, 1);
		if (SPI_processed == 0)
			break;
		old = MemoryContextSwitchTo(rowcxt);
		read_row(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, &row);
		if (row.generation != *last + 1 || row.part != 0)
			snprintf(err, errlen, "generation log damaged at generation " UINT64_FORMAT
					 ": generation " UINT64_FORMAT " has no record", *last + 1, *last + 1);
		else if (tdb_crc32c(row.body, row.len) != row.body_crc)
			snprintf(err, errlen, "generation log damaged at generation " UINT64_FORMAT
					 ": its record fails its checksum", row.generation);
		else if (!tdb_genlog_decode(row.body, row.len, &h, &e, derr))
			snprintf(err, errlen, "generation log damaged at generation " UINT64_FORMAT ": %s",
					 row.generation, derr);
		else if (h.kind != TDB_GENLOG_DELTA || h.generation != row.generation ||
				 h.map_id != s->map_id || row.map_id != s->map_id || h.count != s->count)
			snprintf(err, errlen, "generation log damaged at generation " UINT64_FORMAT
					 ": its record belongs to another map or generation", row.generation);
		else
			bad = false;
		if (bad)
		{
			free(e);
			MemoryContextSwitchTo(old);
			if (damaged_at)
				*damaged_at = *last + 1;
			ok = false;
			break;
		}
		MemoryContextSwitchTo(old);
		s->nchanged = 0;
		for (uint32 j = 0; j < h.n; j++)
		{
			if (s->digest != NULL && e[j].record < s->count)
			{
				/* the entry's hash out, its new one in: replay verifies in O(changes) */
				*s->digest -= tdb_traffic_entry_hash(e[j].record, &s->traffic[e[j].record]);
				set_entry(s, &e[j], cxt);
				*s->digest += tdb_traffic_entry_hash(e[j].record, &s->traffic[e[j].record]);
			}
			else
				set_entry(s, &e[j], cxt);
			if (s->changed != NULL && s->nchanged < s->count)
				s->changed[s->nchanged++] = e[j].record;
		}
		free(e);
		*last = row.generation;
		if (applied)
			(*applied)++;
		if (cb)
			cb(arg, row.generation, row.created_us, row.has_crc, row.object_crc);
		SPI_freetuptable(SPI_tuptable);
		MemoryContextReset(rowcxt);
	}
	SPI_cursor_close(portal);
	MemoryContextDelete(rowcxt);
	return ok;
}

/* What a replay checks after each generation. */
typedef struct ReplayVerify
{
	TdbReplay  *r;
	bool		verify_all;
	bool		have_last;
	RecordRow	last_row;
	/* verify_all: the digest, and the records with an incident at the last layout (ascending) */
	uint64		sum;
	uint32	   *inc;
	uint64		ninc;
} ReplayVerify;

/*
 * verify_all, at the checkpoint: lay the incidents out, sum every entry's
 * hash and list the records with an incident, once (O(locations)).
 */
static void
digest_start(ReplayVerify *rv, MemoryContext cxt)
{
	TdbLogState *s = &rv->r->state;
	Size		len;
	char	   *blob = tdb_incident_layout(s->traffic, s->incidents, s->count, s->incident_count, &len);

	if (blob)
		pfree(blob);
	rv->sum = 0;
	for (uint64 i = 0; i < s->count; i++)
		rv->sum += tdb_traffic_entry_hash(i, &s->traffic[i]);
	rv->inc = MemoryContextAllocHuge(cxt, Max(s->count, 1) * sizeof(uint32));
	rv->ninc = 0;
	for (uint64 i = 0; i < s->count; i++)
		if (s->incidents[i])
			rv->inc[rv->ninc++] = (uint32) i;
	if (s->changed == NULL)
		s->changed = MemoryContextAllocHuge(cxt, Max(s->count, 1) * sizeof(uint32));
	s->digest = &rv->sum;
}

/*
 * verify_all, after each generation: lay the incidents out as
 * tdb_incident_layout would, looking only at the records that had one and
 * the changed ones (ascending in a D record), keeping the digest; then the
 * object's checksum from it.  O(changes + incidents).
 */
static void
digest_moved(void *arg, uint32 i, uint32 old_off)
{
	ReplayVerify *rv = arg;
	TdbTraffic	before = rv->r->state.traffic[i];

	before.incident_off = old_off;
	rv->sum -= tdb_traffic_entry_hash(i, &before);
	rv->sum += tdb_traffic_entry_hash(i, &rv->r->state.traffic[i]);
}

static uint32
digest_checksum(ReplayVerify *rv, uint64 gen, int64 created_us)
{
	TdbLogState *s = &rv->r->state;
	Size		len;
	char	   *blob = tdb_incident_layout_delta(s->traffic, s->incidents, s->count, s->incident_count,
												 rv->inc, &rv->ninc, s->changed, s->nchanged,
												 digest_moved, rv, &len);
	uint32		crc = tdb_traffic_checksum_sum(s->map_id, gen, s->count, rv->sum, blob, len, created_us);

	if (blob)
		pfree(blob);
	return crc;
}

static void
replay_generation(void *arg, uint64 gen, int64 created_us, bool has_crc, uint32 object_crc)
{
	ReplayVerify *rv = arg;
	RecordRow	row;

	memset(&row, 0, sizeof(row));
	row.generation = gen;
	row.created_us = created_us;
	row.has_crc = has_crc;
	row.object_crc = object_crc;
	rv->r->last_created_us = created_us;
	if (rv->verify_all && rv->r->state.digest != NULL)
	{
		/* O(changes): the digest kept by tdb_log_follow, the incidents laid out by difference */
		uint32		crc = digest_checksum(rv, gen, created_us);

		if (has_crc)
			check_crc(rv->r, gen, crc, object_crc);
	}
	else if (rv->verify_all)
		verify(rv->r, &row);
	else
	{
		rv->last_row = row;
		rv->have_last = true;
	}
}

bool
tdb_log_replay(TdbReplay *r, bool verify_all, MemoryContext cxt, char *err, Size errlen)
{
	RecordRow	k;
	uint64		nk;
	SPITupleTable *ktab;

	memset(r, 0, sizeof(*r));
	err[0] = '\0';
	r->first = tdb_log_query_u64("SELECT min(generation) FROM trafficdb.generations", 0, NULL, NULL, 0);

	/* the newest complete checkpoint */
	if (SPI_execute("SELECT " RECORD_COLS " FROM trafficdb.generations WHERE kind = 'K' "
					"ORDER BY generation DESC", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read trafficdb.generations");
	nk = SPI_processed;
	ktab = SPI_tuptable;
	for (uint64 i = 0; i < nk; i++)
	{
		char		why[256];

		read_row(ktab->vals[i], ktab->tupdesc, &k);
		if (load_checkpoint(&k, &r->state, &r->map, cxt, why, sizeof(why)))
		{
			r->found = true;
			r->checkpoint = k.generation;
			r->checkpoint_at_us = k.created_us;
			r->last_created_us = k.created_us;
			r->last = k.generation;
			if (i + 1 < nk)
				r->older_checkpoint = (uint64) DatumGetInt64(SPI_getbinval(ktab->vals[i + 1], ktab->tupdesc, 1, &(bool){false}));
			break;
		}
		ereport(LOG, (errmsg("trafficdb: checkpoint of generation " UINT64_FORMAT " is unusable (%s); trying an older one",
							 k.generation, why)));
	}
	if (!r->found)
	{
		if (nk > 0)
		{
			snprintf(err, errlen, "generation log damaged: none of its %d checkpoint(s) is complete", (int) nk);
			r->damaged_at = r->first ? r->first : 1;
			return false;
		}
		return true;			/* an empty log */
	}
	/* the checkpoint itself, compared with its publication */
	verify(r, &k);

	/* the D records after it, in order, without a gap */
	{
		ReplayVerify rv = {r, verify_all, false, {0}, 0, NULL, 0};
		bool		ok;

		if (verify_all)
			digest_start(&rv, cxt);
		ok = tdb_log_follow(&r->state, &r->last, 0, replay_generation, &rv, cxt,
										&r->damaged_at, &r->replayed, err, errlen);

		if (!verify_all && rv.have_last && rv.last_row.generation == r->last)
			verify(r, &rv.last_row);
		r->state.digest = NULL;
		if (rv.inc)
			pfree(rv.inc);
		return ok;
	}
}
