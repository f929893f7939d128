/*-------------------------------------------------------------------------
 *
 * daemon.c
 *	  The trafficdb daemon: one background worker, the only writer of
 *	  trafficdb's shared memory.
 *
 * Each cycle (every trafficdb.publish_interval, or at once when a backend
 * asks) it serves a pending map-load request, then consumes the feed: in one
 * transaction it deletes a batch of committed rows from trafficdb.feed,
 * checks them, applies the good ones to its in-memory traffic array, upserts
 * them into trafficdb.traffic_state, files the bad ones in
 * trafficdb.feed_rejects, records the generation, publishes the new traffic
 * object in shared memory and queues a NOTIFY; then it commits.
 *
 * Durability: every committed feed row is either still in trafficdb.feed
 * or reflected in trafficdb.traffic_state (the deletion and the upsert
 * commit together).  The published object may run ahead of the commit (it
 * only ever holds values of committed feed rows), never behind it for
 * long.  On start, the daemon adopts whatever valid objects a previous run
 * left in shared memory (readers keep reading them), then rebuilds the map
 * and the traffic from the tables and publishes a new generation.
 *
 * Readers are never waited for: see src/writer.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <grp.h>
#include <limits.h>
#include <math.h>
#include <signal.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_bswap.h"
#include "portability/instr_time.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "module/shared.h"
#include "module/trafficdb.h"
#include "object.h"
#include "writer.h"

PGDLLEXPORT void tdb_daemon_main(Datum arg);

#define FEED_BATCH 200000
#define NOTIFY_CHANNEL "trafficdb_publish"

/* Valid ranges for feed values. */
#define MAX_SPEED_KMH 400.0

#define UNIX_TO_PG_US ((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

/* What the daemon holds between cycles. */
typedef struct DaemonState
{
	TdbWriter	writer;
	bool		writer_open;
	uint64		generation;		/* last published (or adopted) */

	/* the current map */
	uint32		map_seg;
	void	   *map_addr;
	TdbMapView	map;
	bool		have_map;

	/* working traffic, in map record order */
	TdbTraffic *traffic;
	int64	   *win_seq;		/* feed seq of each entry's value: ties on observed_at go to the later row */
	char	  **incidents;		/* per record, palloc'd text or NULL */
	uint64		incident_count;
	bool		dirty;			/* changes not yet published */
	char		refusal[TDB_ERRMSG_LEN];	/* why the last publication was refused */

	/* reader events already reported */
	uint64		revoked_reported;
	uint64		rebuilt_reported;

	MemoryContext cxt;			/* lives as long as the daemon */
} DaemonState;

static DaemonState D;

/*
 * The planner's statistics of the map (see TdbShared.map_extent): computed
 * once per map, when it is first published.
 */
static uint64 stats_map_id;
static double stats_extent[4];
static double stats_mean_box[2];
static double stats_arc_slack_m;

static void
compute_map_stats(const TdbMapView *v)
{
	const TdbRtree *t = &v->rtree;
	double		w = 0,
				h = 0;

	if (stats_map_id == v->hdr->map_id)
		return;
	memset(stats_extent, 0, sizeof(stats_extent));
	stats_mean_box[0] = stats_mean_box[1] = 0;
	if (t->nlevels > 0 && v->count > 0)
	{
		const TdbBoxF *root = &t->boxes[t->levels[t->nlevels - 1].first];
		const TdbBoxF *leaf = &t->boxes[t->levels[0].first];

		stats_extent[0] = root->xmin;
		stats_extent[1] = root->ymin;
		stats_extent[2] = root->xmax;
		stats_extent[3] = root->ymax;
		for (uint64 i = 0; i < t->levels[0].count; i++)
		{
			w += (double) leaf[i].xmax - leaf[i].xmin;
			h += (double) leaf[i].ymax - leaf[i].ymin;
		}
		stats_mean_box[0] = w / t->levels[0].count;
		stats_mean_box[1] = h / t->levels[0].count;
	}
	/* for nearest-first scans in metres: once here, not in every backend */
	stats_arc_slack_m = tdb_map_arc_slack_m(v);
	stats_map_id = v->hdr->map_id;
}

/* ---- registration ------------------------------------------------------------- */

void
tdb_daemon_register(void)
{
	BackgroundWorker bgw;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = 1;
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "trafficdb");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "tdb_daemon_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "trafficdb daemon");
	snprintf(bgw.bgw_type, BGW_MAXLEN, "trafficdb daemon");
	RegisterBackgroundWorker(&bgw);
}

/* ---- small helpers ------------------------------------------------------------- */

static int64
now_us(void)
{
	TimestampTz now = GetCurrentTimestamp();

	/* PostgreSQL timestamps count from 2000-01-01 */
	return (int64) now + UNIX_TO_PG_US;
}

static TimestampTz
us_to_timestamptz(int64 us)
{
	return (TimestampTz) (us - UNIX_TO_PG_US);
}

static void
set_last_error(const char *msg)
{
	SpinLockAcquire(&tdb_shared->mutex);
	strlcpy(tdb_shared->last_error, msg, TDB_ERRMSG_LEN);
	SpinLockRelease(&tdb_shared->mutex);
}

static gid_t
shm_gid(void)
{
	struct group *g;

	if (tdb_shm_group == NULL || tdb_shm_group[0] == '\0')
		return (gid_t) -1;
	g = getgrnam(tdb_shm_group);
	if (g == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("trafficdb.shm_group names group \"%s\", which does not exist",
						tdb_shm_group),
				 errhint("Create the group, or set trafficdb.shm_group to '' for owner-only access.")));
	return g->gr_gid;
}

static void
begin_tx(const char *what)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, what);
}

static void
commit_tx(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* The schema PostGIS is installed in, quoted, or NULL if it is not installed. */
static char *
postgis_schema(void)
{
	if (SPI_execute("SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_extension e "
					"JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace "
					"WHERE e.extname = 'postgis'", true, 1) != SPI_OK_SELECT || SPI_processed == 0)
		return NULL;
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}

static bool
extension_installed(void)
{
	return SPI_execute("SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'trafficdb'",
					   true, 1) == SPI_OK_SELECT && SPI_processed == 1;
}

/* ---- map loading ---------------------------------------------------------------- */

/* What the last map load skipped, for its caller ("" = nothing). */
static char map_warning[TDB_ERRMSG_LEN];

typedef struct LoadCounts
{
	uint64		loaded;
	uint64		null_id;
	uint64		null_geom;
	uint64		not_linestring;
	uint64		bad_points;
	char		first_bad[TDB_ERRLEN];
} LoadCounts;

/*
 * Parse a 2D WKB LineString (or a MultiLineString of one part) into xy, a
 * buffer that grows in cxt and outlives the per-batch context the caller
 * resets.  Returns the point count, 0 for an empty one, -1 if it is another
 * type.
 */
static int64
parse_wkb_linestring(const bytea *wkb, MemoryContext cxt, double **xy, Size *cap)
{
	const unsigned char *p = (const unsigned char *) VARDATA_ANY(wkb);
	Size		len = VARSIZE_ANY_EXHDR(wkb);
	Size		pos = 0;
	uint32		type;
	uint32		n;
	bool		le;

	for (int depth = 0; depth < 2; depth++)
	{
		if (len - pos < 9)
			return -1;
		le = p[pos] == 1;
		memcpy(&type, p + pos + 1, 4);
		memcpy(&n, p + pos + 5, 4);
		if (!le)
		{
			type = pg_bswap32(type);
			n = pg_bswap32(n);
		}
		pos += 9;
		if (type == 5 && depth == 0)
		{
			/* MultiLineString: one part only */
			if (n != 1)
				return n == 0 ? 0 : -1;
			continue;
		}
		if (type != 2)
			return -1;
		if (n == 0)
			return 0;
		if ((Size) n * 16 > len - pos)
			return -1;
		if (*cap < (Size) n * 2)
		{
			*cap = (Size) n * 2;
			*xy = *xy ? repalloc(*xy, *cap * sizeof(double))
				: MemoryContextAlloc(cxt, *cap * sizeof(double));
		}
		memcpy(*xy, p + pos, (Size) n * 16);
		if (!le)
			for (uint32 i = 0; i < 2 * n; i++)
			{
				uint64		v;

				memcpy(&v, &(*xy)[i], 8);
				v = pg_bswap64(v);
				memcpy(&(*xy)[i], &v, 8);
			}
		return n;
	}
	return -1;
}

static const char *
col_or_null(const NameData *col, const char *cast)
{
	if (NameStr(*col)[0] == '\0')
		return psprintf("NULL::pg_catalog.%s", cast);
	return psprintf("(%s)::pg_catalog.%s", quote_identifier(NameStr(*col)), cast);
}

/*
 * Read the source table into a map builder.  Runs inside a transaction with
 * SPI connected; raises ERROR on anything that makes the whole load wrong.
 */
static TdbMapBuilder *
read_map_source(const TdbMapRequest *req, LoadCounts *counts)
{
	char	   *pg = postgis_schema();
	char	   *relname;
	char	   *query;
	Portal		portal;
	TdbMapBuilder *b;
	double	   *xy = NULL;
	Size		cap = 0;
	char		err[TDB_ERRLEN];
	Oid			save_userid;
	int			save_sec;
	int			guc_nest;
	MemoryContext batch_cxt;

	if (pg == NULL)
		ereport(ERROR, (errmsg("PostGIS is not installed in database \"%s\"", get_database_name(MyDatabaseId))));
	relname = get_rel_name(req->relid);
	if (relname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the map source table (OID %u) no longer exists", req->relid),
				 errhint("Load a map again with trafficdb.load_map().")));
	relname = quote_qualified_identifier(get_namespace_name(get_rel_namespace(req->relid)), relname);

	/* only the columns we need, under names no source column can clash with */
	query = psprintf("SELECT tdb_id::int8, %s.ST_AsBinary(%s.ST_Force2D(CASE "
					 "WHEN %s.ST_SRID(tdb_geom) = 4326 THEN tdb_geom "
					 "WHEN %s.ST_SRID(tdb_geom) = 0 THEN NULL "
					 "ELSE %s.ST_Transform(tdb_geom, 4326) END)), "
					 "tdb_class, tdb_name, tdb_speed, tdb_oneway "
					 "FROM (SELECT %s AS tdb_id, %s AS tdb_geom, %s AS tdb_class, %s AS tdb_name, "
					 "%s AS tdb_speed, %s AS tdb_oneway FROM %s) src",
					 pg, pg, pg, pg, pg,
					 quote_identifier(NameStr(req->id_column)),
					 quote_identifier(NameStr(req->geom_column)),
					 col_or_null(&req->class_column, "text"),
					 col_or_null(&req->name_column, "text"),
					 col_or_null(&req->speed_column, "float8"),
					 col_or_null(&req->oneway_column, "bool"),
					 relname);

	/*
	 * Read the source with the privileges of the role that asked for the
	 * load (row security, column grants, and no code of the table's owner
	 * running as the daemon's superuser), as a restricted operation.
	 */
	if (!OidIsValid(req->userid) || !SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(req->userid)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("the role that loaded the map (OID %u) no longer exists", req->userid),
				 errhint("Load the map again with trafficdb.load_map().")));
	GetUserIdAndSecContext(&save_userid, &save_sec);
	batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "trafficdb map load batch",
									  ALLOCSET_DEFAULT_SIZES);

	b = tdb_map_builder_create();
	if (b == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	memset(counts, 0, sizeof(*counts));

	/*
	 * Code in the source (a view calling a function) may change settings
	 * with set_config() or SET: undo every change at the end of the read,
	 * success or error, as PostgreSQL does around index expressions, so
	 * that nothing of the caller's outlives the read in the daemon.
	 */
	guc_nest = NewGUCNestLevel();
	PG_TRY();
	{
		SetUserIdAndSecContext(req->userid,
							   save_sec | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
		portal = SPI_cursor_open_with_args(NULL, query, 0, NULL, NULL, NULL, true, 0);
		for (;;)
		{
			MemoryContext oldcxt;

			SPI_cursor_fetch(portal, true, 10000);
			if (SPI_processed == 0)
				break;
			oldcxt = MemoryContextSwitchTo(batch_cxt);
			for (uint64 r = 0; r < SPI_processed; r++)
			{
				HeapTuple	tup = SPI_tuptable->vals[r];
				TupleDesc	td = SPI_tuptable->tupdesc;
				bool		isnull;
				Datum		d;
				int64		id;
				int64		npts;
				char	   *cls;
				char	   *name;
				double		speed = 0;
				bool		oneway = false;

				d = SPI_getbinval(tup, td, 1, &isnull);
				if (isnull)
				{
					counts->null_id++;
					continue;
				}
				id = DatumGetInt64(d);
				d = SPI_getbinval(tup, td, 2, &isnull);
				if (isnull)
				{
					counts->null_geom++;
					continue;
				}
				npts = parse_wkb_linestring(DatumGetByteaPP(d), oldcxt, &xy, &cap);
				if (npts < 2)
				{
					if (npts < 0)
						counts->not_linestring++;
					else
						counts->null_geom++;
					continue;
				}
				cls = SPI_getvalue(tup, td, 3);
				name = SPI_getvalue(tup, td, 4);
				d = SPI_getbinval(tup, td, 5, &isnull);
				if (!isnull)
					speed = DatumGetFloat8(d);
				d = SPI_getbinval(tup, td, 6, &isnull);
				if (!isnull)
					oneway = DatumGetBool(d);
				if (!(speed >= 0 && speed <= 65535))
					speed = 0;
				switch (tdb_map_builder_add(b, (uint64) id, xy, (uint32) npts, cls, name,
											(uint16) rint(speed), oneway ? TDB_LOC_ONEWAY : 0, err))
				{
					case TDB_OBJ_OK:
						counts->loaded++;
						break;
					case TDB_OBJ_EINVAL:
						if (counts->bad_points++ == 0)
							strlcpy(counts->first_bad, err, sizeof(counts->first_bad));
						break;
					case TDB_OBJ_ELIMIT:
						/* never load part of a map silently */
						ereport(ERROR,
								(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
								 errmsg("cannot load the map from %s: %s", relname, err),
								 errhint("Map the classes onto at most 256 (e.g. with a view over the source), "
										 "or load without class_column.")));
						break;
					default:
						ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("%s", err)));
				}
			}
			MemoryContextSwitchTo(oldcxt);
			MemoryContextReset(batch_cxt);
			SPI_freetuptable(SPI_tuptable);
		}
		SPI_cursor_close(portal);
		AtEOXact_GUC(false, guc_nest);
		SetUserIdAndSecContext(save_userid, save_sec);
	}
	PG_CATCH();
	{
		/* the transaction's abort undoes the GUC changes (AtEOXact_GUC) */
		SetUserIdAndSecContext(save_userid, save_sec);
		tdb_map_builder_free(b);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextDelete(batch_cxt);
	return b;
}

/* Working traffic for a new map: what ids still match keep their values. */
typedef struct WorkingTraffic
{
	TdbTraffic *traffic;
	int64	   *win_seq;
	char	  **incidents;
	uint64		incident_count;
} WorkingTraffic;

static void
remap_traffic(const TdbMapView *newmap, WorkingTraffic *out)
{
	Size		n = Max(newmap->count, 1);

	out->traffic = MemoryContextAllocHuge(D.cxt, n * sizeof(TdbTraffic));
	out->win_seq = MemoryContextAllocHuge(D.cxt, n * sizeof(int64));
	out->incidents = MemoryContextAllocExtended(D.cxt, n * sizeof(char *), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	out->incident_count = 0;
	for (uint64 i = 0; i < newmap->count; i++)
	{
		int64		o = D.have_map ? tdb_map_find(&D.map, newmap->records[i].id) : -1;

		if (o >= 0)
		{
			out->traffic[i] = D.traffic[o];
			out->win_seq[i] = D.win_seq[o];
			if (D.incidents[o])
			{
				out->incidents[i] = MemoryContextStrdup(D.cxt, D.incidents[o]);
				out->incident_count++;
			}
		}
		else
		{
			memset(&out->traffic[i], 0, sizeof(TdbTraffic));
			out->traffic[i].speed_kmh = NAN;
			out->traffic[i].free_flow_kmh = NAN;
			out->traffic[i].congestion = TDB_CONGESTION_UNKNOWN;
			out->traffic[i].confidence = TDB_CONFIDENCE_UNKNOWN;
			out->win_seq[i] = 0;
		}
	}
}

static void
free_working(TdbTraffic *traffic, int64 *win_seq, char **incidents, uint64 count)
{
	if (traffic == NULL)
		return;
	for (uint64 i = 0; i < count; i++)
		if (incidents[i])
			pfree(incidents[i]);
	pfree(traffic);
	pfree(win_seq);
	pfree(incidents);
}

/* Apply one traffic value to record i if it is not older than what we have. */
static bool
apply_traffic(uint64 i, int64 observed_us, int64 seq, float speed, float free_flow, int congestion,
			  int confidence, const char *incident, uint64 gen)
{
	TdbTraffic *t = &D.traffic[i];

	/* the newest observation wins; of two observed at the same instant, the later row */
	if (t->updated_at_us > observed_us ||
		(t->updated_at_us == observed_us && D.win_seq[i] > seq))
		return false;
	t->updated_at_us = observed_us;
	D.win_seq[i] = seq;
	t->speed_kmh = speed;
	t->free_flow_kmh = free_flow;
	t->congestion = (uint8) (congestion < 0 ? TDB_CONGESTION_UNKNOWN : congestion);
	t->confidence = (uint8) (confidence < 0 ? TDB_CONFIDENCE_UNKNOWN : confidence);
	t->changed_gen = gen;
	if (D.incidents[i])
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
	return true;
}

/*
 * Traffic values from six consecutive columns of a row of trafficdb.feed or
 * trafficdb.traffic_state, starting at column first: speed_kmh,
 * free_flow_kmh, congestion, confidence, incident, observed_at.  NULL speeds
 * become NaN, NULL levels NULL_LEVEL.
 */
/* The longest incident text the feed accepts (bytes); longer rows go to feed_rejects. */
#define MAX_INCIDENT_BYTES 4096

#define NULL_LEVEL INT_MIN

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

static void
read_traffic_row(HeapTuple tup, TupleDesc td, int first, TrafficRow *t)
{
	bool		isnull;
	Datum		d;

	d = SPI_getbinval(tup, td, first, &isnull);
	t->speed = isnull ? NAN : DatumGetFloat4(d);
	d = SPI_getbinval(tup, td, first + 1, &isnull);
	t->free_flow = isnull ? NAN : DatumGetFloat4(d);
	d = SPI_getbinval(tup, td, first + 2, &isnull);
	t->congestion = isnull ? NULL_LEVEL : DatumGetInt16(d);
	d = SPI_getbinval(tup, td, first + 3, &isnull);
	t->confidence = isnull ? NULL_LEVEL : DatumGetInt16(d);
	t->incident = SPI_getvalue(tup, td, first + 4);
	d = SPI_getbinval(tup, td, first + 5, &t->observed_null);
	t->observed = t->observed_null ? 0 : DatumGetTimestampTz(d);
	t->observed_us = (int64) t->observed + UNIX_TO_PG_US;
}

/* Load trafficdb.traffic_state into the working array (startup, new map). */
static void
load_traffic_state(void)
{
	Portal		portal;

	portal = SPI_cursor_open_with_args(NULL,
									   "SELECT location_id, speed_kmh, free_flow_kmh, congestion, confidence, "
									   "incident, observed_at, generation, feed_seq FROM trafficdb.traffic_state",
									   0, NULL, NULL, NULL, true, 0);
	for (;;)
	{
		SPI_cursor_fetch(portal, true, 50000);
		if (SPI_processed == 0)
			break;
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	td = SPI_tuptable->tupdesc;
			bool		isnull;
			int64		id = DatumGetInt64(SPI_getbinval(tup, td, 1, &isnull));
			int64		i = tdb_map_find(&D.map, (uint64) id);
			int64		g = DatumGetInt64(SPI_getbinval(tup, td, 8, &isnull));
			int64		seq = DatumGetInt64(SPI_getbinval(tup, td, 9, &isnull));
			TrafficRow	t;

			if (i < 0)
				continue;
			read_traffic_row(tup, td, 2, &t);
			apply_traffic((uint64) i, t.observed_us, seq, t.speed, t.free_flow, t.congestion,
						  t.confidence, t.incident, Min((uint64) g, D.generation + 1));
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
}

/* ---- publishing ------------------------------------------------------------------- */

/*
 * Write the working traffic into a free buffer and publish it as generation
 * gen.  Returns false (and leaves D.dirty set) if every version is pinned.
 */
static bool
publish_traffic(uint64 gen)
{
	instr_time	start,
				dur;
	Size		ibytes = 0;
	char	   *iblob = NULL;
	uint32		seg;
	void	   *addr;
	char		err[TDB_ERRLEN];
	int			rc;
	uint64		count = D.map.count;

	INSTR_TIME_SET_CURRENT(start);

	/* incidents: 4 unused bytes (offset 0 means none), then length + text each */
	if (D.incident_count > 0)
	{
		StringInfoData buf;
		uint32		zero = 0;

		initStringInfo(&buf);
		appendBinaryStringInfo(&buf, (char *) &zero, 4);
		for (uint64 i = 0; i < count; i++)
		{
			uint32		len;

			if (D.incidents[i] == NULL)
			{
				D.traffic[i].incident_off = 0;
				continue;
			}
			len = (uint32) strlen(D.incidents[i]);
			D.traffic[i].incident_off = (uint32) buf.len;
			appendBinaryStringInfo(&buf, (char *) &len, 4);
			appendBinaryStringInfo(&buf, D.incidents[i], len);
		}
		iblob = buf.data;
		ibytes = buf.len;
	}
	else
		for (uint64 i = 0; i < count; i++)
			D.traffic[i].incident_off = 0;

	rc = tdb_writer_traffic_segment(&D.writer,
									tdb_writer_traffic_capacity(tdb_traffic_size(count, ibytes)),
									&seg, &addr, err);
	if (rc != TDB_SHM_OK)
		ereport(ERROR, (errmsg("could not get a traffic buffer: %s", err)));
	tdb_traffic_write(addr, D.map.hdr->map_id, gen, count, D.traffic, iblob, ibytes, now_us());
	if (iblob)
		pfree(iblob);

	rc = tdb_writer_publish(&D.writer, gen, D.map.hdr->map_id, D.map_seg, seg, now_us());
	if (rc == TDB_SHM_ENOSLOT)
	{
		snprintf(D.refusal, sizeof(D.refusal),
				 "generation " UINT64_FORMAT " not published: readers pin all %d versions, each superseded less than trafficdb.reader_pin_timeout (%d ms) ago",
				 gen, TDB_MAX_VERSIONS, tdb_reader_pin_timeout_ms);
		SpinLockAcquire(&tdb_shared->mutex);
		tdb_shared->publishes_refused++;
		strlcpy(tdb_shared->last_error, D.refusal, TDB_ERRMSG_LEN);
		SpinLockRelease(&tdb_shared->mutex);
		ereport(WARNING,
				(errmsg("trafficdb: %s", D.refusal),
				 errhint("See trafficdb.readers for the readers holding old versions; publication resumes when they release them or their pins time out.")));
		D.dirty = true;
		return false;
	}
	D.generation = gen;
	D.dirty = false;
	tdb_writer_reclaim(&D.writer, D.map_seg);

	compute_map_stats(&D.map);
	INSTR_TIME_SET_CURRENT(dur);
	INSTR_TIME_SUBTRACT(dur, start);
	SpinLockAcquire(&tdb_shared->mutex);
	tdb_shared->generation = gen;
	tdb_shared->map_id = D.map.hdr->map_id;
	tdb_shared->locations = count;
	memcpy(tdb_shared->map_extent, stats_extent, sizeof(stats_extent));
	memcpy(tdb_shared->map_mean_box, stats_mean_box, sizeof(stats_mean_box));
	tdb_shared->map_arc_slack_m = stats_arc_slack_m;
	tdb_shared->map_bytes = D.map.hdr->total_size;
	tdb_shared->traffic_bytes = tdb_traffic_size(count, ibytes);
	tdb_shared->shm_bytes = tdb_writer_bytes(&D.writer);
	tdb_shared->last_publish_ms = INSTR_TIME_GET_MILLISEC(dur);
	tdb_shared->last_publish_at = GetCurrentTimestamp();
	tdb_shared->publishes++;
	SpinLockRelease(&tdb_shared->mutex);
	ConditionVariableBroadcast(&tdb_shared->cv);
	return true;
}

static void
record_generation(uint64 gen)
{
	Datum		arg = Int64GetDatum((int64) gen);
	Oid			type = INT8OID;

	SPI_execute_with_args("INSERT INTO trafficdb.daemon_state AS d (singleton, generation, published_at) "
						  "VALUES (true, $1, pg_catalog.now()) ON CONFLICT (singleton) DO UPDATE "
						  "SET generation = excluded.generation, published_at = excluded.published_at",
						  1, &type, &arg, NULL, false, 0);
}

/* Tell listeners (at commit) that gen is published. */
static void
notify_generation(uint64 gen)
{
	Async_Notify(NOTIFY_CHANNEL, psprintf(UINT64_FORMAT, gen));
}

/*
 * Build and publish a new map from req (inside a transaction), carrying
 * traffic over by location id.  Returns the number of locations.
 */
static uint64 absorb_feed(uint64 gen);

static uint64
load_map(const TdbMapRequest *req, bool record_source)
{
	LoadCounts	counts;
	TdbMapBuilder *b;
	char		err[TDB_ERRLEN];
	uint32		seg;
	void	   *addr;
	TdbMapView	view;
	instr_time	start,
				dur;
	uint64		map_id;
	uint64		gen = 0;
	uint64		skipped;
	WorkingTraffic wt;
	DaemonState saved;
	volatile bool published = false;

	INSTR_TIME_SET_CURRENT(start);
	b = read_map_source(req, &counts);
	if (tdb_map_builder_finish(b, err) != TDB_OBJ_OK)
	{
		tdb_map_builder_free(b);
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("cannot load the map from %s: %s", get_rel_name(req->relid), err),
				 errhint("Location ids (column \"%s\") must be unique.", NameStr(req->id_column))));
	}
	skipped = counts.null_id + counts.null_geom + counts.not_linestring + counts.bad_points;
	map_warning[0] = '\0';
	if (skipped > 0)
	{
		/* to the server log here, and to the caller of load_map (map_warning) */
		snprintf(map_warning, sizeof(map_warning),
				 "skipped " UINT64_FORMAT " of " UINT64_FORMAT " rows of %s while loading the map "
				 "(NULL id: " UINT64_FORMAT ", NULL or empty geometry: " UINT64_FORMAT
				 ", not a LineString: " UINT64_FORMAT ", invalid coordinates: " UINT64_FORMAT "%s%s)",
				 skipped, skipped + counts.loaded, get_rel_name(req->relid),
				 counts.null_id, counts.null_geom, counts.not_linestring, counts.bad_points,
				 counts.bad_points ? "; first: " : "", counts.first_bad);
		ereport(WARNING, (errmsg("trafficdb: %s", map_warning)));
	}

	if (pg_strong_random(&map_id, sizeof(map_id)) == false || map_id == 0)
		map_id = (uint64) GetCurrentTimestamp() | 1;
	if (tdb_writer_new_segment(&D.writer, TDB_SEG_MAP, tdb_map_builder_size(b), &seg, &addr, err) != TDB_SHM_OK)
	{
		tdb_map_builder_free(b);
		ereport(ERROR, (errmsg("could not create the map object: %s", err)));
	}
	tdb_map_builder_write(b, addr, map_id, now_us());
	tdb_map_builder_free(b);
	tdb_map_view_init(&view, addr);

	/*
	 * Switch to the new map, keeping the old state to put back if anything
	 * below fails: a failed load must leave the daemon as it was.
	 */
	remap_traffic(&view, &wt);
	saved = D;
	D.map_seg = seg;
	D.map_addr = addr;
	D.map = view;
	D.have_map = true;
	D.traffic = wt.traffic;
	D.win_seq = wt.win_seq;
	D.incidents = wt.incidents;
	D.incident_count = wt.incident_count;
	PG_TRY();
	{
		load_traffic_state();

		/*
		 * At startup, the feed rows a dead daemon consumed in a transaction
		 * that never committed are in the feed again, but what it published
		 * from them may have been seen (and adopted): absorb the feed before
		 * the first publication, so that no value readers saw goes back.
		 */
		if (!record_source)
			absorb_feed(D.generation + 1);

		INSTR_TIME_SET_CURRENT(dur);
		INSTR_TIME_SUBTRACT(dur, start);
		if (record_source)
		{
			Oid			types[9] = {OIDOID, NAMEOID, NAMEOID, NAMEOID, NAMEOID, NAMEOID, NAMEOID, INT8OID, OIDOID};
			Datum		vals[9];
			char		nulls[9] = "         ";
			const NameData *cols[6] = {&req->id_column, &req->geom_column, &req->class_column,
			&req->name_column, &req->speed_column, &req->oneway_column};

			vals[0] = ObjectIdGetDatum(req->relid);
			for (int c = 0; c < 6; c++)
			{
				vals[c + 1] = NameGetDatum(cols[c]);
				if (NameStr(*cols[c])[0] == '\0')
					nulls[c + 1] = 'n';
			}
			vals[7] = Int64GetDatum((int64) view.count);
			vals[8] = ObjectIdGetDatum(req->userid);
			SPI_execute("DELETE FROM trafficdb.map_source", false, 0);
			SPI_execute_with_args("INSERT INTO trafficdb.map_source (source, id_column, geom_column, "
								  "class_column, name_column, speed_limit_column, oneway_column, locations, loaded_by) "
								  "VALUES ($1::regclass, $2, $3, $4, $5, $6, $7, $8, $9)",
								  9, types, vals, nulls, false, 0);
		}
		/*
		 * Record the generation before publishing: publishing is the last
		 * thing that can fail.  (A failure after it, such as a lock timeout
		 * on daemon_state, made the catch below put back the old map, whose
		 * segment the publication had already unmapped: the next feed row
		 * crashed the daemon, and the generation number was used again.)
		 */
		gen = D.generation + 1;
		record_generation(gen);
		if (!publish_traffic(gen))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("readers pin every published version, so the new map cannot be published now"),
					 errhint("See trafficdb.readers, then try again.")));
		published = true;
		notify_generation(gen);
	}
	PG_CATCH();
	{
		/*
		 * Never roll back what readers may have seen: once published, the
		 * new map stays (its rows in map_source follow at the next load).
		 */
		if (!published)
		{
			free_working(D.traffic, D.win_seq, D.incidents, view.count);
			D = saved;
		}
		else
			free_working(saved.traffic, saved.win_seq, saved.incidents, saved.traffic ? saved.map.count : 0);
		PG_RE_THROW();
	}
	PG_END_TRY();
	free_working(saved.traffic, saved.win_seq, saved.incidents, saved.traffic ? saved.map.count : 0);

	SpinLockAcquire(&tdb_shared->mutex);
	tdb_shared->last_map_build_ms = INSTR_TIME_GET_MILLISEC(dur);
	SpinLockRelease(&tdb_shared->mutex);
	elog(LOG, "trafficdb: loaded map of " UINT64_FORMAT " locations from %s (%.0f ms), published generation " UINT64_FORMAT,
		 view.count, get_rel_name(req->relid), INSTR_TIME_GET_MILLISEC(dur), gen);
	return view.count;
}

/* ---- consuming the feed ----------------------------------------------------------- */

typedef struct Rejects
{
	ArrayBuildState *seq,
			   *id,
			   *reason;
	uint64		n;
} Rejects;

static void
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

/*
 * Consume one batch of the feed into the working traffic (inside a
 * transaction).  Returns the number of rows consumed.
 */
static uint64
consume_feed(uint64 gen, Rejects *rj, List **changed)
{
	uint64		n;
	int64		horizon = now_us() + 5 * 60 * USECS_PER_SEC;

	/*
	 * Any committed rows, in no particular order (observed_at decides which
	 * value wins): a TID scan of a batch is about 7 times faster than
	 * taking them in seq order through the primary key.
	 */
	if (SPI_execute(psprintf("DELETE FROM trafficdb.feed WHERE ctid = ANY (ARRAY("
							 "SELECT ctid FROM trafficdb.feed LIMIT %d)) "
							 "RETURNING seq, location_id, speed_kmh, free_flow_kmh, congestion, confidence, "
							 "CASE WHEN pg_catalog.octet_length(incident) <= %d THEN incident END, observed_at, "
							 "pg_catalog.octet_length(incident)", FEED_BATCH, MAX_INCIDENT_BYTES),
					false, 0) != SPI_OK_DELETE_RETURNING)
		elog(ERROR, "could not consume trafficdb.feed");
	n = SPI_processed;
	for (uint64 r = 0; r < n; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	td = SPI_tuptable->tupdesc;
		bool		isnull;
		bool		nid;
		int64		seq = DatumGetInt64(SPI_getbinval(tup, td, 1, &isnull));
		int64		id = DatumGetInt64(SPI_getbinval(tup, td, 2, &nid));
		TrafficRow	t;
		int64		i;
		Datum		ibytes;
		bool		inull;

		read_traffic_row(tup, td, 3, &t);
		ibytes = SPI_getbinval(tup, td, 9, &inull);
		if (!inull && DatumGetInt32(ibytes) > MAX_INCIDENT_BYTES)
		{
			/* never read into memory: a huge incident could stop every cycle */
			reject(rj, seq, nid ? 0 : id,
				   psprintf("incident is %d bytes; at most %d are accepted", DatumGetInt32(ibytes),
							MAX_INCIDENT_BYTES));
			continue;
		}
		if (nid)
		{
			reject(rj, seq, 0, "location_id is NULL");
			continue;
		}
		i = tdb_map_find(&D.map, (uint64) id);
		if (i < 0)
		{
			reject(rj, seq, id, "unknown location_id: not in the loaded map");
			continue;
		}
		if (!speed_ok(t.speed))
		{
			reject(rj, seq, id, psprintf("speed_kmh %g is outside [0, %g]", t.speed, MAX_SPEED_KMH));
			continue;
		}
		if (!speed_ok(t.free_flow))
		{
			reject(rj, seq, id, psprintf("free_flow_kmh %g is outside [0, %g]", t.free_flow, MAX_SPEED_KMH));
			continue;
		}
		if (t.congestion != NULL_LEVEL && (t.congestion < 0 || t.congestion > TDB_CONGESTION_MAX))
		{
			reject(rj, seq, id, psprintf("congestion %d is outside [0, %d]", t.congestion, TDB_CONGESTION_MAX));
			continue;
		}
		if (t.confidence != NULL_LEVEL && (t.confidence < 0 || t.confidence > 100))
		{
			reject(rj, seq, id, psprintf("confidence %d is outside [0, 100]", t.confidence));
			continue;
		}
		if (t.observed_null)
		{
			reject(rj, seq, id, "observed_at is NULL");
			continue;
		}
		if (t.observed_us > horizon)
		{
			reject(rj, seq, id, psprintf("observed_at %s is more than 5 minutes in the future",
										 timestamptz_to_str(t.observed)));
			continue;
		}
		if (apply_traffic((uint64) i, t.observed_us, seq, t.speed, t.free_flow, t.congestion,
						  t.confidence, t.incident, gen))
			*changed = lappend_int(*changed, (int) i);
	}
	SPI_freetuptable(SPI_tuptable);
	return n;
}

/* Upsert the changed records into trafficdb.traffic_state. */
static void
persist_changes(List *changed, uint64 gen)
{
	ArrayBuildState *a[9] = {0};
	Oid			types[9] = {INT8ARRAYOID, FLOAT4ARRAYOID, FLOAT4ARRAYOID, INT2ARRAYOID,
	INT2ARRAYOID, TEXTARRAYOID, TIMESTAMPTZARRAYOID, INT8ARRAYOID, INT8ARRAYOID};
	Datum		vals[9];
	ListCell   *lc;
	MemoryContext cxt = CurrentMemoryContext;

	foreach(lc, changed)
	{
		uint64		i = (uint64) lfirst_int(lc);
		TdbTraffic *t = &D.traffic[i];

		if (t->changed_gen != gen)
			continue;
		t->changed_gen = gen + 1;	/* mark as done; restored below */
		a[0] = accumArrayResult(a[0], Int64GetDatum((int64) D.map.records[i].id), false, INT8OID, cxt);
		a[1] = accumArrayResult(a[1], Float4GetDatum(t->speed_kmh), isnan(t->speed_kmh), FLOAT4OID, cxt);
		a[2] = accumArrayResult(a[2], Float4GetDatum(t->free_flow_kmh), isnan(t->free_flow_kmh), FLOAT4OID, cxt);
		a[3] = accumArrayResult(a[3], Int16GetDatum(t->congestion),
								t->congestion == TDB_CONGESTION_UNKNOWN, INT2OID, cxt);
		a[4] = accumArrayResult(a[4], Int16GetDatum(t->confidence),
								t->confidence == TDB_CONFIDENCE_UNKNOWN, INT2OID, cxt);
		a[5] = accumArrayResult(a[5], D.incidents[i] ? CStringGetTextDatum(D.incidents[i]) : (Datum) 0,
								D.incidents[i] == NULL, TEXTOID, cxt);
		a[6] = accumArrayResult(a[6], TimestampTzGetDatum(us_to_timestamptz(t->updated_at_us)), false,
								TIMESTAMPTZOID, cxt);
		a[7] = accumArrayResult(a[7], Int64GetDatum((int64) gen), false, INT8OID, cxt);
		a[8] = accumArrayResult(a[8], Int64GetDatum(D.win_seq[i]), false, INT8OID, cxt);
	}
	foreach(lc, changed)
		D.traffic[lfirst_int(lc)].changed_gen = gen;
	if (a[0] == NULL)
		return;
	for (int c = 0; c < 9; c++)
		vals[c] = makeArrayResult(a[c], cxt);
	if (SPI_execute_with_args("INSERT INTO trafficdb.traffic_state AS s (location_id, speed_kmh, "
							  "free_flow_kmh, congestion, confidence, incident, observed_at, generation, feed_seq) "
							  "SELECT * FROM unnest($1, $2, $3, $4, $5, $6, $7, $8, $9) "
							  "ON CONFLICT (location_id) DO UPDATE SET speed_kmh = excluded.speed_kmh, "
							  "free_flow_kmh = excluded.free_flow_kmh, congestion = excluded.congestion, "
							  "confidence = excluded.confidence, incident = excluded.incident, "
							  "observed_at = excluded.observed_at, generation = excluded.generation, "
							  "feed_seq = excluded.feed_seq",
							  9, types, vals, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not update trafficdb.traffic_state");
}

static void
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
static uint64
absorb_feed(uint64 gen)
{
	uint64		consumed = 0;
	Rejects		rj = {0};
	List	   *changed = NIL;
	instr_time	start,
				dur;
	bool		more;

	INSTR_TIME_SET_CURRENT(start);
	do
	{
		uint64		n = consume_feed(gen, &rj, &changed);

		consumed += n;
		more = n == FEED_BATCH;
	} while (more && consumed < 10 * (uint64) FEED_BATCH);

	if (changed != NIL)
		D.dirty = true;
	persist_changes(changed, gen);
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

static void
feed_cycle(bool force)
{
	uint64		gen = D.generation + 1;

	if (!D.have_map)
		return;
	absorb_feed(gen);
	/* as in load_map: nothing that can fail after the publication */
	if (D.dirty || force)
	{
		record_generation(gen);
		if (publish_traffic(gen))
			notify_generation(gen);
	}
}

/* ---- readers ------------------------------------------------------------------------- */

/*
 * Record what readers pin (for trafficdb.readers), report readers that hold
 * a superseded version too long and versions revoked from them.  Liveness
 * and revocation are the writer's (tdb_writer_scan_external, compute_live):
 * no process ID is trusted here.
 */
static void
watch_readers(void)
{
	TimestampTz now = GetCurrentTimestamp();
	uint64		active = atomic_load(&D.writer.ctl->active);
	uint32		nbackend = tdb_shared->nbackend_slots;

	tdb_writer_scan_external(&D.writer);
	for (uint32 s = 0; s < tdb_shared->nslots; s++)
	{
		uint64		pin = 0;
		int32		pid = 0;
		TdbSlotWatch *w = &tdb_shared->slots[s];

		if (s < nbackend)
			pin = atomic_load(&tdb_backend_pins[s].pin);
		else if (s - nbackend < D.writer.nslots && D.writer.ext_alive[s - nbackend])
		{
			pin = D.writer.ext_pin[s - nbackend];
			pid = D.writer.ext_pid[s - nbackend];
		}
		SpinLockAcquire(&tdb_shared->mutex);
		w->pid = pid;

		/*
		 * Pinning the active version holds nothing back (a reader that
		 * re-pins it in a loop shows the same word): the clock starts when
		 * the pinned version stops being the active one.
		 */
		if (pin == 0 || pin == active)
		{
			w->pin = pin;
			w->since = 0;
			w->reported = false;
		}
		else if (pin != w->pin || w->since == 0)
		{
			w->pin = pin;
			w->since = now;
			w->reported = false;
		}
		else if (!w->reported &&
				 TimestampDifferenceExceeds(w->since, now, tdb_reader_pin_timeout_ms))
		{
			w->reported = true;
			SpinLockRelease(&tdb_shared->mutex);
			ereport(LOG,
					(errmsg("trafficdb: %s reader slot %u has held generation " UINT64_FORMAT " since %s",
							s < nbackend ? "backend" : "external", s < nbackend ? s : s - nbackend,
							TDB_ACTIVE_GEN(pin), timestamptz_to_str(w->since)),
					 errdetail("Publication goes on: a version superseded longer than trafficdb.reader_pin_timeout ago is revoked, and its reader gets an error when it next uses it."),
					 errhint("See trafficdb.readers.")));
			continue;
		}
		SpinLockRelease(&tdb_shared->mutex);
	}
	if (D.writer.revoked != D.revoked_reported)
	{
		ereport(LOG,
				(errmsg("trafficdb: revoked " UINT64_FORMAT " version(s) pinned longer than trafficdb.reader_pin_timeout after they were superseded (last: generation " UINT64_FORMAT ")",
						D.writer.revoked - D.revoked_reported, D.writer.last_revoked_generation)));
		D.revoked_reported = D.writer.revoked;
	}
	if (D.writer.slots_rebuilt != D.rebuilt_reported)
	{
		ereport(WARNING,
				(errmsg("trafficdb: the external readers' segment %s.readers was damaged (resized by a process with write access to it) and was made anew",
						tdb_shm_prefix()),
				 errdetail("External readers attached before must reopen; their pins were ignored.")));
		D.rebuilt_reported = D.writer.slots_rebuilt;
	}
	SpinLockAcquire(&tdb_shared->mutex);
	tdb_shared->versions_revoked = D.writer.revoked;
	SpinLockRelease(&tdb_shared->mutex);
}

/* ---- requests ------------------------------------------------------------------------ */

static void
finish_map_request(uint64 seq, TdbRequestStatus status, const char *msg, uint64 count)
{
	SpinLockAcquire(&tdb_shared->mutex);
	tdb_shared->map_status = status;
	tdb_shared->map_loaded_count = count;
	strlcpy(tdb_shared->map_error, msg ? msg : "", TDB_ERRMSG_LEN);
	tdb_shared->map_done_seq = seq;
	SpinLockRelease(&tdb_shared->mutex);
	ConditionVariableBroadcast(&tdb_shared->cv);
}

/*
 * Run fn inside its own transaction; on ERROR, abort it, log, keep the
 * message for the caller and return false.  The daemon survives errors in
 * one request or one cycle.
 */
typedef void (*TxFn) (void *arg);

static bool
run_in_tx(const char *what, TxFn fn, void *arg, char *errbuf)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	volatile bool ok = true;

	begin_tx(what);
	PG_TRY();
	{
		fn(arg);
		commit_tx();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		ok = false;
		if (errbuf)
			snprintf(errbuf, TDB_ERRMSG_LEN, "%s%s%s%s%s", edata->message,
					 edata->detail ? "\nDETAIL:  " : "", edata->detail ? edata->detail : "",
					 edata->hint ? "\nHINT:  " : "", edata->hint ? edata->hint : "");
		ereport(LOG, (errmsg("trafficdb: %s failed: %s", what, edata->message)));
		set_last_error(edata->message);
		FreeErrorData(edata);
		pgstat_report_activity(STATE_IDLE, NULL);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	return ok;
}

typedef struct MapLoadArg
{
	TdbMapRequest req;
	bool		record_source;
	uint64		count;
} MapLoadArg;

static void
map_load_tx(void *p)
{
	MapLoadArg *a = p;

	a->count = load_map(&a->req, a->record_source);
}

static void
feed_tx(void *p)
{
	/* DROP EXTENSION: stop consuming; what is published stays readable */
	if (!extension_installed())
	{
		D.have_map = false;
		return;
	}
	feed_cycle(*(bool *) p);
}

/* At start: rebuild the map from trafficdb.map_source, if a map was ever loaded. */
static void
startup_tx(void *p)
{
	MapLoadArg *a = p;

	a->count = 0;
	if (!extension_installed())
		return;
	if (SPI_execute("SELECT generation FROM trafficdb.daemon_state", true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
	{
		bool		isnull;
		int64		g = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));

		if (!isnull && (uint64) g > D.generation)
			D.generation = (uint64) g;
	}
	if (SPI_execute("SELECT source, id_column, geom_column, class_column, name_column, "
					"speed_limit_column, oneway_column, loaded_by FROM trafficdb.map_source", true, 1) != SPI_OK_SELECT ||
		SPI_processed == 0)
		return;
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	td = SPI_tuptable->tupdesc;
		NameData   *cols[6] = {&a->req.id_column, &a->req.geom_column, &a->req.class_column,
		&a->req.name_column, &a->req.speed_column, &a->req.oneway_column};
		bool		isnull;

		a->req.relid = DatumGetObjectId(SPI_getbinval(tup, td, 1, &isnull));
		a->req.userid = DatumGetObjectId(SPI_getbinval(tup, td, 8, &isnull));
		for (int c = 0; c < 6; c++)
		{
			char	   *v = SPI_getvalue(tup, td, c + 2);

			namestrcpy(cols[c], v ? v : "");
		}
	}
	a->count = load_map(&a->req, false);
}

/* ---- main ---------------------------------------------------------------------------- */

static void
daemon_detach(int code, Datum arg)
{
	bool		own_lock = D.writer_open && D.writer.own_lock;

	(void) code;
	(void) arg;
	/* leave the objects in place: readers keep them, the next daemon adopts them */
	if (D.writer_open)
		tdb_writer_close(&D.writer, false);
	D.writer_open = false;
	if (tdb_shared)
	{
		SpinLockAcquire(&tdb_shared->mutex);
		if (own_lock)
			tdb_shared->prefix_owned = false;	/* our lock went with the writer */
		tdb_shared->daemon_latch = NULL;
		tdb_shared->daemon_pid = 0;
		SpinLockRelease(&tdb_shared->mutex);
		ConditionVariableBroadcast(&tdb_shared->cv);
	}
}

void
tdb_daemon_main(Datum main_arg)
{
	TdbWriterOpenInfo info;
	char		err[TDB_ERRLEN];
	MapLoadArg	start_arg;
	TimestampTz startup_failed_at = 0;

	(void) main_arg;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(tdb_database, NULL, 0);

	/*
	 * The daemon runs SQL as a superuser: nothing a user controls may change
	 * what its names mean.  search_path is pg_catalog at override level (no
	 * SET, set_config() or database/role setting can change it afterwards),
	 * and every name of its own SQL is schema-qualified as well.
	 */
	SetConfigOption("search_path", "pg_catalog", PGC_SUSET, PGC_S_OVERRIDE);
	/* (multi-argument unnest in FROM must stay unqualified: it is syntax there) */

	memset(&D, 0, sizeof(D));
	D.cxt = AllocSetContextCreate(TopMemoryContext, "trafficdb daemon", ALLOCSET_DEFAULT_SIZES);

	SpinLockAcquire(&tdb_shared->mutex);
	tdb_shared->daemon_latch = MyLatch;
	tdb_shared->daemon_pid = MyProcPid;
	SpinLockRelease(&tdb_shared->mutex);
	before_shmem_exit(daemon_detach, (Datum) 0);

	for (bool reported = false;; reported = true)
	{
		TdbWriterConfig cfg;
		int			rc;

		memset(&cfg, 0, sizeof(cfg));
		cfg.nexternal_slots = (uint32) tdb_max_external_readers;
		cfg.gid = shm_gid();
		/* the postmaster's lock, inherited; if it had none, try ours */
		cfg.lock_fd = tdb_prefix_lock_fd;
		cfg.postmaster_pid = (int32) PostmasterPid;
		cfg.backend_pins = tdb_backend_pins;
		cfg.nbackend_pins = tdb_nbackend_slots();
		cfg.pin_timeout_us = (int64) tdb_reader_pin_timeout_ms * 1000;
		rc = tdb_writer_open(&D.writer, tdb_shm_prefix(), &cfg, &info, err);
		if (rc == TDB_SHM_OK)
			break;
		SpinLockAcquire(&tdb_shared->mutex);
		strlcpy(tdb_shared->last_error, err, TDB_ERRMSG_LEN);
		SpinLockRelease(&tdb_shared->mutex);
		if (rc != TDB_SHM_EBUSY)
			ereport(ERROR, (errmsg("trafficdb: cannot set up shared memory: %s", err)));

		/*
		 * Another server owns the prefix: say so once, then wait for it to
		 * go (checking every 10 s) instead of failing and restarting.
		 */
		if (!reported)
			ereport(WARNING,
					(errmsg("trafficdb: not publishing: %s", err),
					 errhint("Set trafficdb.shm_name to a prefix no other server uses, and restart.")));
		/* requests meanwhile fail at once, saying why */
		{
			uint64		map_req;
			bool		map_pending;

			SpinLockAcquire(&tdb_shared->mutex);
			if (tdb_shared->publish_requested > tdb_shared->publish_done)
			{
				tdb_shared->publish_failed = tdb_shared->publish_requested;
				strlcpy(tdb_shared->publish_error, err, TDB_ERRMSG_LEN);
				tdb_shared->publish_done = tdb_shared->publish_requested;
			}
			map_req = tdb_shared->map_req_seq;
			map_pending = map_req > tdb_shared->map_done_seq;
			SpinLockRelease(&tdb_shared->mutex);
			if (map_pending)
				finish_map_request(map_req, TDB_REQ_FAILED, err, 0);
			ConditionVariableBroadcast(&tdb_shared->cv);
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10000,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ShutdownRequestPending)
			proc_exit(0);
	}
	D.writer_open = true;
	SpinLockAcquire(&tdb_shared->mutex);
	tdb_shared->prefix_owned = true;
	tdb_shared->prefix_error[0] = '\0';
	SpinLockRelease(&tdb_shared->mutex);
	D.generation = info.last_generation;
	if (info.adopted)
		ereport(LOG,
				(errmsg("trafficdb: adopted shared memory %s at generation " UINT64_FORMAT "%s",
						tdb_shm_prefix(), info.last_generation,
						info.segments_dropped ? ", dropping corrupt objects" : ""),
				 errdetail("%d object(s) failed validation and were discarded.", info.segments_dropped)));
	else
		ereport(LOG, (errmsg("trafficdb: created shared memory %s", tdb_shm_prefix())));

	for (;;)
	{
		uint64		pub_req;
		uint64		map_req;
		bool		map_pending;
		MapLoadArg	map_arg;
		bool		force;

		if (ShutdownRequestPending)
			break;
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			D.writer.pin_timeout_us = (int64) tdb_reader_pin_timeout_ms * 1000;
		}

		/*
		 * Without a map (a fresh start, a restart, the extension not created
		 * yet) rebuild from the tables; after a failure, retry once a minute.
		 */
		if (!D.have_map &&
			(startup_failed_at == 0 ||
			 TimestampDifferenceExceeds(startup_failed_at, GetCurrentTimestamp(), 60000)))
			startup_failed_at = run_in_tx("trafficdb startup", startup_tx, &start_arg, NULL) ?
				0 : GetCurrentTimestamp();

		SpinLockAcquire(&tdb_shared->mutex);
		pub_req = tdb_shared->publish_requested;
		map_req = tdb_shared->map_req_seq;
		map_pending = map_req > tdb_shared->map_done_seq;
		map_arg.req = tdb_shared->map_req;
		force = pub_req > tdb_shared->publish_done;
		SpinLockRelease(&tdb_shared->mutex);

		if (map_pending)
		{
			MapLoadArg	a = map_arg;
			char		msg[TDB_ERRMSG_LEN];

			a.record_source = true;
			a.count = 0;
			if (run_in_tx("trafficdb map load", map_load_tx, &a, msg))
				finish_map_request(map_req, TDB_REQ_DONE, map_warning[0] ? map_warning : NULL, a.count);
			else
				finish_map_request(map_req, TDB_REQ_FAILED, msg, 0);
		}

		{
			char		msg[TDB_ERRMSG_LEN];
			bool		ok = true;

			msg[0] = '\0';
			D.refusal[0] = '\0';
			if (D.have_map)
				ok = run_in_tx("trafficdb feed", feed_tx, &force, msg);
			if (force)
			{
				/* publish() callers learn that it failed, and why */
				SpinLockAcquire(&tdb_shared->mutex);
				tdb_shared->publish_done = pub_req;
				if (!ok || D.refusal[0] != '\0')
				{
					tdb_shared->publish_failed = pub_req;
					strlcpy(tdb_shared->publish_error, ok ? D.refusal : msg, TDB_ERRMSG_LEN);
				}
				SpinLockRelease(&tdb_shared->mutex);
				ConditionVariableBroadcast(&tdb_shared->cv);
			}
		}
		watch_readers();
		tdb_writer_reclaim(&D.writer, D.have_map ? D.map_seg : TDB_MAX_SEGMENTS);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 tdb_publish_interval_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	proc_exit(1);
}
