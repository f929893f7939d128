/*-------------------------------------------------------------------------
 *
 * tile.c
 *	  trafficdb.tile_mvt(z, x, y[, options]) and tile_mvt_etag(...): the
 *	  vector tile of the live traffic, encoded in C (src/tile/) from the
 *	  pinned version of the shared-memory objects.
 *
 * Everything is checked here, before any shared memory is read: the tile
 * address (z in 0..30, x and y on its grid), the options (a JSON object of
 * integers: extent, buffer, budget; keys starting with "_" are ignored, so
 * a tile server's cache buster passes), and the caller's right to read
 * trafficdb.locations, whose rows the tile shows.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "mb/pg_wchar.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "checksum.h"
#include "module/snapshot.h"
#include "module/trafficdb.h"
#include "tile/mvt.h"

PG_FUNCTION_INFO_V1(trafficdb_tile_mvt);
PG_FUNCTION_INFO_V1(trafficdb_tile_mvt_etag);

/* ---- memory -------------------------------------------------------------- */

static void *
tile_grow(void *ctx, void *p, size_t size)
{
	(void) ctx;
	if (p == NULL)
		return palloc_extended(size, MCXT_ALLOC_HUGE);
	return repalloc_huge(p, size);
}

static void
tile_release(void *ctx, void *p)
{
	(void) ctx;
	pfree(p);
}

static void *
rank_grow(void *ctx, void *p, size_t size)
{
	(void) ctx;
	if (p == NULL)
		return MemoryContextAllocExtended(TopMemoryContext, size, MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
	return repalloc_huge(p, size);
}

static const TdbKnnAlloc tile_alloc = {tile_grow, tile_release, NULL};
static const TdbKnnAlloc rank_alloc = {rank_grow, tile_release, NULL};

/* The low-zoom rank of the map this backend last tiled (built on first need). */
static TdbMvtRank rank_cache;

/*
 * Its shapes in Web Mercator, projected on first use: two transcendental
 * functions per vertex were a third of a tile's time.  At most this many
 * bytes per backend (16 per vertex: Helsinki about 5 MB, Delaware about
 * 40 MB); a larger map is projected per tile.
 */
#define TILE_PROJ_CAP (UINT64CONST(64) << 20)
static TdbMvtProj proj_cache;

static void
tile_interrupt(void)
{
	CHECK_FOR_INTERRUPTS();
}

/* ---- arguments ----------------------------------------------------------- */

static void
check_address(int32 z, int32 x, int32 y)
{
	int64		side;

	if (z < 0 || z > TDB_MVT_MAX_ZOOM)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tile zoom %d is out of range: expected 0 to %d", z, TDB_MVT_MAX_ZOOM)));
	side = INT64CONST(1) << z;
	if (x < 0 || x >= side)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tile column x = %d is outside the grid of zoom %d: expected 0 to " INT64_FORMAT,
						x, z, side - 1)));
	if (y < 0 || y >= side)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tile row y = %d is outside the grid of zoom %d: expected 0 to " INT64_FORMAT,
						y, z, side - 1)));
}

/*
 * At most 64 bytes of a string for a message, cut on a character boundary:
 * half a UTF-8 character made the message itself invalid (a client whose
 * encoding is not UTF-8 got "invalid byte sequence" instead of the error).
 */
static char *
clip_text(const char *s, int len)
{
	return pnstrdup(s, pg_mbcliplen(s, len, 64));
}

/* A short, printable rendering of a JSON value for an error message. */
static char *
show_value(JsonbValue *v)
{
	char	   *s;

	switch (v->type)
	{
		case jbvNull:
			return pstrdup("null");
		case jbvBool:
			return pstrdup(v->val.boolean ? "true" : "false");
		case jbvNumeric:
			s = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
			break;
		case jbvString:
			s = psprintf("\"%s\"", clip_text(v->val.string.val, v->val.string.len));
			break;
		default:
			return pstrdup("an array or object");
	}
	if (strlen(s) > 70)
		s = psprintf("%s...", clip_text(s, strlen(s)));
	return s;
}

static int64
option_integer(const char *key, JsonbValue *v, int64 lo, int64 hi)
{
	char	   *text;
	char	   *end;
	long long	n;

	if (v->type != jbvNumeric)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tile option \"%s\" must be an integer, not %s", key, show_value(v)),
				 errhint("Give options as a JSON object of integers, e.g. '{\"extent\": 4096, \"buffer\": 64}'.")));
	text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
	errno = 0;
	n = strtoll(text, &end, 10);
	if (*end != '\0' || errno != 0 || n < lo || n > hi)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tile option \"%s\" = %s is out of range: expected an integer from " INT64_FORMAT " to " INT64_FORMAT,
						key, show_value(v), lo, hi)));
	return n;
}

static void
parse_options(Jsonb *j, TdbMvtOptions *o)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	bool		have_buffer = false;

	o->extent = TDB_MVT_DEFAULT_EXTENT;
	o->buffer = TDB_MVT_DEFAULT_BUFFER;
	o->budget = TDB_MVT_DEFAULT_BUDGET;
	if (j == NULL)
		return;
	if (!JB_ROOT_IS_OBJECT(j))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tile options must be a JSON object, not %s",
						JB_ROOT_IS_SCALAR(j) ? "a scalar" : "an array"),
				 errhint("Give options as a JSON object, e.g. '{\"extent\": 4096, \"buffer\": 64}'.")));
	it = JsonbIteratorInit(&j->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char	   *key;
		JsonbValue	val;

		if (tok != WJB_KEY)
			continue;
		key = clip_text(v.val.string.val, v.val.string.len);
		tok = JsonbIteratorNext(&it, &val, true);
		if (tok != WJB_VALUE)
			elog(ERROR, "unexpected jsonb token %d in tile options", (int) tok);
		if (v.val.string.len > 0 && v.val.string.val[0] == '_')
			continue;
		if (v.val.string.len == 6 && memcmp(v.val.string.val, "extent", 6) == 0)
			o->extent = (uint32_t) option_integer("extent", &val, TDB_MVT_MIN_EXTENT, TDB_MVT_MAX_EXTENT);
		else if (v.val.string.len == 6 && memcmp(v.val.string.val, "buffer", 6) == 0)
		{
			o->buffer = (uint32_t) option_integer("buffer", &val, 0, TDB_MVT_MAX_EXTENT);
			have_buffer = true;
		}
		else if (v.val.string.len == 6 && memcmp(v.val.string.val, "budget", 6) == 0)
			o->budget = (uint32_t) option_integer("budget", &val, TDB_MVT_MIN_BUDGET, TDB_MVT_MAX_BUDGET);
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown tile option \"%s\"", key),
					 errdetail("The options are extent, buffer and budget; keys starting with \"_\" are ignored.")));
	}
	if (o->buffer > o->extent)
	{
		if (have_buffer)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("tile option \"buffer\" = %u is larger than the extent %u", o->buffer, o->extent)));
		o->buffer = o->extent;	/* a small extent with the default buffer */
	}
}

static void
check_read_right(void)
{
	Oid			nsp = get_namespace_oid("trafficdb", true);
	Oid			rel = OidIsValid(nsp) ? get_relname_relid("locations", nsp) : InvalidOid;

	if (!OidIsValid(rel))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation \"trafficdb.locations\" does not exist"),
				 errhint("CREATE EXTENSION trafficdb creates it.")));
	if (pg_class_aclcheck(rel, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table trafficdb.locations"),
				 errdetail("A tile shows rows of trafficdb.locations: reading it needs SELECT on that table.")));
}

/* ---- the tile ------------------------------------------------------------ */

typedef struct TileOut
{
	bytea	   *mvt;
	uint64		max_changed_gen;
	uint64		map_id;
} TileOut;

static void
make_tile(FunctionCallInfo fcinfo, TileOut *res)
{
	int32		z = PG_GETARG_INT32(0);
	int32		x = PG_GETARG_INT32(1);
	int32		y = PG_GETARG_INT32(2);
	TdbMvtOptions opt;
	TdbMvtEnv	env;
	TdbMvtResult out;
	const TdbSnapshot *snap;

	tdb_require_preload();
	check_address(z, x, y);
	parse_options(PG_NARGS() > 3 && !PG_ARGISNULL(3) ? PG_GETARG_JSONB_P(3) : NULL, &opt);
	check_read_right();

	snap = tdb_backend_snapshot();
	memset(&env, 0, sizeof(env));
	env.alloc = &tile_alloc;
	env.header = VARHDRSZ;
	env.rank = &rank_cache;
	env.rank_alloc = &rank_alloc;
	env.proj = &proj_cache;
	env.proj_cap = TILE_PROJ_CAP;
	env.interrupt = tile_interrupt;
	if (tdb_mvt_encode(snap->map, snap->traffic, snap->entries, (uint32_t) z, (uint32_t) x, (uint32_t) y,
					   &opt, &env, &out) != TDB_MVT_OK)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory encoding tile %d/%d/%d", z, x, y)));
	if (tdb_reader_revoked(tdb_backend_reader(), snap))
		ereport(ERROR,
				(errcode(ERRCODE_SNAPSHOT_TOO_OLD),
				 errmsg("trafficdb generation " UINT64_FORMAT " was revoked while tile %d/%d/%d was encoded",
						snap->generation, z, x, y),
				 errdetail("It was superseded more than trafficdb.reader_pin_timeout ago and released, so that publication goes on."),
				 errhint("Retry: the next statement reads the current generation.")));
	res->mvt = (bytea *) out.data;
	SET_VARSIZE(res->mvt, VARHDRSZ + out.size);
	res->max_changed_gen = out.max_changed_gen;
	res->map_id = snap->map->hdr->map_id;
}

Datum
trafficdb_tile_mvt(PG_FUNCTION_ARGS)
{
	TileOut		t;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		PG_RETURN_NULL();
	make_tile(fcinfo, &t);
	PG_RETURN_BYTEA_P(t.mvt);
}

Datum
trafficdb_tile_mvt_etag(PG_FUNCTION_ARGS)
{
	TileOut		t;
	TupleDesc	desc;
	Datum		values[2];
	bool		nulls[2] = {false, false};
	uint32		crc;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		PG_RETURN_NULL();
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE || desc->natts != 2)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("trafficdb.tile_mvt_etag must be declared to return (mvt bytea, etag text)")));
	desc = BlessTupleDesc(desc);
	make_tile(fcinfo, &t);
	crc = tdb_crc32c(VARDATA(t.mvt), VARSIZE(t.mvt) - VARHDRSZ);
	values[0] = PointerGetDatum(t.mvt);
	values[1] = CStringGetTextDatum(psprintf("%llu-%llx-%08x", (unsigned long long) t.max_changed_gen,
											 (unsigned long long) t.map_id, crc));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
