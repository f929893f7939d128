/*-------------------------------------------------------------------------
 *
 * trails_access.c
 *	  The trail foreign data wrapper's way to a trail file: a server's and
 *	  a table's options (checked and parsed), URL rules, pager and writer
 *	  errors as PostgreSQL errors, the backend's block cache, and opening a
 *	  file through the pager (closed by a memory context reset).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/reloptions.h"
#include "access/table.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_user_mapping.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/paths.h"
#include "optimizer/pathnode.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "optimizer/tlist.h"
#include "parser/parse_coerce.h"
#include "parser/parsetree.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/timestamp.h"

#include "fdw/timebound.h"
#include "fdw/trails_internal.h"
#include "module/geometry.h"
#include "module/trafficdb.h"
#include "trail/cache.h"
#include "trail/pager.h"
#include "trail/trail.h"

/* ---- options ------------------------------------------------------------------ */

/* "16kB", "1MB", "1073741824": bytes, or -1 when it is not a size. */
static int64
parse_bytes(const char *s)
{
	char	   *end;
	double		v;
	int64		mult = 1;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno != 0 || v < 0)
		return -1;
	while (*end == ' ')
		end++;
	if (*end == '\0' || pg_strcasecmp(end, "B") == 0)
		mult = 1;
	else if (pg_strcasecmp(end, "kB") == 0)
		mult = INT64CONST(1) << 10;
	else if (pg_strcasecmp(end, "MB") == 0)
		mult = INT64CONST(1) << 20;
	else if (pg_strcasecmp(end, "GB") == 0)
		mult = INT64CONST(1) << 30;
	else if (pg_strcasecmp(end, "TB") == 0)
		mult = INT64CONST(1) << 40;
	else
		return -1;
	if (v * mult > (double) PG_INT64_MAX / 2)
		return -1;
	return (int64) (v * mult);
}

int64
trl_bytes_option(const char *name, const char *value, int64 min, int64 max, bool pow2)
{
	int64		b = parse_bytes(value);

	if (b < min || b > max || (pow2 && (b & (b - 1)) != 0))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"", name, value),
				 errdetail("Expected a size in bytes (or with kB, MB, GB) from " INT64_FORMAT " to " INT64_FORMAT "%s.",
						   min, max, pow2 ? ", a power of two" : "")));
	return b;
}

int
trl_int_option(const char *name, const char *value, int min, int max)
{
	char	   *end;
	long		v;

	errno = 0;
	v = strtol(value, &end, 10);
	if (end == value || *end != '\0' || errno != 0 || v < min || v > max)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"", name, value),
				 errdetail("Expected an integer from %d to %d.", min, max)));
	return (int) v;
}

bool
trl_is_remote_url(const char *url)
{
	return strncmp(url, "s3://", 5) == 0 || strncmp(url, "http://", 7) == 0 ||
		strncmp(url, "https://", 8) == 0;
}

/* A trail file location: s3://bucket/key, http(s)://..., or an absolute path. */
void
trl_check_url(const char *url, bool write)
{
	if (strncmp(url, "s3://", 5) == 0)
	{
		char		bucket[256];
		const char *key;

		if (tdb_s3_parse_url(url, bucket, sizeof(bucket), &key) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("invalid S3 location \"%s\"", url),
					 errdetail("Expected s3://bucket/key.")));
		return;
	}
	if (strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0)
	{
		if (write)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("cannot write a trail file to \"%s\"", url),
					 errdetail("Destinations are an absolute path or s3://bucket/key.")));
		return;
	}
	if (!is_absolute_path(url))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("trail file location \"%s\" is neither an absolute path nor an s3:// or http(s):// URL", url)));
	if (!has_privs_of_role(GetUserId(), write ? ROLE_PG_WRITE_SERVER_FILES : ROLE_PG_READ_SERVER_FILES))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to %s trail file \"%s\"", write ? "write" : "read", url),
				 errdetail("Only roles with privileges of the \"%s\" role may name files on the server.",
						   write ? "pg_write_server_files" : "pg_read_server_files")));
}

/* The server's options and, for S3, the current user's mapping. */
TrailOptions *
trail_options(ForeignServer *server, bool s3)
{
	TrailOptions *o = palloc0(sizeof(TrailOptions));
	char	   *v;

	o->servername = server->servername;
	o->endpoint = tdb_fdw_option(server->options, "endpoint");
	o->region = tdb_fdw_option(server->options, "region");
	o->path_style = (v = tdb_fdw_option(server->options, "path_style")) != NULL ?
		defGetBoolean(makeDefElem("path_style", (Node *) makeString(v), -1)) : o->endpoint != NULL;
	o->block_size = (v = tdb_fdw_option(server->options, "block_size")) != NULL ?
		(uint32) trl_bytes_option("block_size", v, 16 << 10, 16 << 20, true) : 0;	/* the pager's, 16 kB */
	v = tdb_fdw_option(server->options, "cache_dir");
	if (v == NULL)
		o->cache_dir = psprintf("%s/trafficdb_trail_cache", DataDir);
	else if (strcmp(v, "none") != 0)
		o->cache_dir = v;
	o->cache_bytes = (v = tdb_fdw_option(server->options, "cache_size")) != NULL ?
		(uint64) trl_bytes_option("cache_size", v, 1 << 20, INT64CONST(1) << 50, false) : UINT64CONST(1) << 30;
	o->parallel = (v = tdb_fdw_option(server->options, "parallel")) != NULL ?
		trl_int_option("parallel", v, 1, 64) : 4;
	o->readahead = (v = tdb_fdw_option(server->options, "readahead")) != NULL ?
		trl_int_option("readahead", v, -1, 1024) : 0;	/* the pager's, 64 blocks */
	o->retries = (v = tdb_fdw_option(server->options, "retries")) != NULL ?
		trl_int_option("retries", v, 0, 100) : 5;
	o->revalidate = (v = tdb_fdw_option(server->options, "revalidate_interval")) != NULL ?
		trl_int_option("revalidate_interval", v, 0, REVALIDATE_MAX) : 0;
	if (s3)
	{
		UserMapping *um = GetUserMapping(GetUserId(), server->serverid);

		o->access_key = tdb_fdw_option(um->options, "access_key");
		o->secret_key = tdb_fdw_option(um->options, "secret_key");
		o->session_token = tdb_fdw_option(um->options, "session_token");
		if (o->access_key == NULL || o->secret_key == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
					 errmsg("user mapping of \"%s\" on server \"%s\" has no access_key or no secret_key",
							GetUserNameFromId(GetUserId(), false), server->servername),
					 errhint("ALTER USER MAPPING FOR CURRENT_USER SERVER %s OPTIONS (ADD access_key '...', ADD secret_key '...').",
							 quote_identifier(server->servername))));
	}
	return o;
}

/* Query cancel, statement_timeout and termination reach the pager through this. */
static int
trail_cancel(void *arg)
{
	(void) arg;
	return QueryCancelPending || ProcDiePending;
}

void
trl_net_options(const TrailOptions *o, TdbNetOptions *net)
{
	memset(net, 0, sizeof(*net));
	net->max_retries = o->retries == 0 ? -1 : o->retries;	/* the library's 0 means its default */
	net->cancel = trail_cancel;
}

void
trl_s3_config(const TrailOptions *o, TdbS3Config *s3)
{
	memset(s3, 0, sizeof(*s3));
	s3->endpoint = o->endpoint;
	s3->region = o->region;
	s3->access_key = o->access_key;
	s3->secret_key = o->secret_key;
	s3->session_token = o->session_token;
	s3->path_style = o->path_style;
}

/* A pager or writer error as a PostgreSQL error. */
void
trail_error(const TdbTrailError *err, const char *what)
{
	int			code;

	if (err->code == TDB_TRAIL_ECANCELED)
		CHECK_FOR_INTERRUPTS();
	switch (err->code)
	{
		case TDB_TRAIL_ENOTFOUND:
			code = ERRCODE_UNDEFINED_FILE;
			break;
		case TDB_TRAIL_EAUTH:
			code = ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION;
			break;
		case TDB_TRAIL_EREPLACED:
			code = ERRCODE_T_R_SERIALIZATION_FAILURE;
			break;
		case TDB_TRAIL_ECORRUPT:
			code = ERRCODE_DATA_CORRUPTED;
			break;
		case TDB_TRAIL_EVERSION:
			code = ERRCODE_FEATURE_NOT_SUPPORTED;
			break;
		case TDB_TRAIL_ENET:
		case TDB_TRAIL_EHTTP:
		case TDB_TRAIL_EPROTO:
			code = ERRCODE_FDW_UNABLE_TO_ESTABLISH_CONNECTION;
			break;
		case TDB_TRAIL_ECANCELED:
			code = ERRCODE_QUERY_CANCELED;
			break;
		case TDB_TRAIL_EIO:
			code = ERRCODE_IO_ERROR;
			break;
		case TDB_TRAIL_ENOMEM:
			code = ERRCODE_OUT_OF_MEMORY;
			break;
		default:
			code = ERRCODE_INVALID_PARAMETER_VALUE;
			break;
	}
	ereport(ERROR,
			(errcode(code),
			 errmsg("%s: %s", what, err->msg),
			 errdetail("%s", tdb_trail_strerror(err->code))));
}

/* ---- opening a trail file ------------------------------------------------------ */

/*
 * One LRU of blocks per backend, shared by its scans, for the backend's life.
 * A change of trafficdb.trail_memory_cache resizes it in place: an open
 * cursor's pager still holds it, so it is never freed.
 */
static TdbBlockLru *backend_lru = NULL;
static int	backend_lru_kb = 0;

static TdbBlockLru *
trail_lru(void)
{
	if (backend_lru != NULL && backend_lru_kb != tdb_trail_memory_cache_kb)
	{
		tdb_lru_resize(backend_lru, (size_t) tdb_trail_memory_cache_kb * 1024);
		backend_lru_kb = tdb_trail_memory_cache_kb;
	}
	if (backend_lru == NULL)
	{
		backend_lru = tdb_lru_create((size_t) tdb_trail_memory_cache_kb * 1024);
		if (backend_lru == NULL)
			ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
		backend_lru_kb = tdb_trail_memory_cache_kb;
	}
	return backend_lru;
}


static void
trail_handle_close(void *arg)
{
	TrailHandle *h = arg;

	tdb_trail_scan_end(h->scan);
	h->scan = NULL;
	tdb_trail_page_cache_free(h->page_cache);
	h->page_cache = NULL;
	tdb_trail_close(h->reader);
	h->reader = NULL;
	tdb_pager_close(h->pager);
	h->pager = NULL;
}

/*
 * Open url through server; ft (NULL for IMPORT) may set its own
 * revalidate_interval.  A file that cannot be opened or read is an error,
 * or (missing_ok) NULL.
 */
TrailHandle *
trail_open_ext(ForeignServer *server, ForeignTable *ft, const char *url, MemoryContext cxt, bool missing_ok,
			   bool head_only)
{
	TrailHandle *h = MemoryContextAllocZero(cxt, sizeof(TrailHandle));
	TrailOptions *o = trail_options(server, strncmp(url, "s3://", 5) == 0);
	TdbPagerOptions po;
	TdbTrailError err;
	char	   *rv = ft ? tdb_fdw_option(ft->options, "revalidate_interval") : NULL;

	/*
	 * An http(s):// table names a server of the owner's choosing: it must lie
	 * under the server's endpoint unless the user may read server files
	 * (otherwise a table could make the database fetch from any host).
	 */
	if ((strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0) &&
		!has_privs_of_role(GetUserId(), ROLE_PG_READ_SERVER_FILES) &&
		(o->endpoint == NULL || strncmp(url, o->endpoint, strlen(o->endpoint)) != 0 ||
		 (url[strlen(o->endpoint)] != '/' && o->endpoint[strlen(o->endpoint) - 1] != '/')))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to read \"%s\" through server \"%s\"", url, server->servername),
				 errdetail("An http(s) URL must start with the server's endpoint, unless the user has privileges of pg_read_server_files.")));
	h->url = MemoryContextStrdup(cxt, url);
	memset(&po, 0, sizeof(po));
	po.url = h->url;
	trl_s3_config(o, &po.s3);
	trl_net_options(o, &po.net);
	po.block_size = o->block_size;
	/*
	 * count(*) and the other whole-file aggregates: the head alone answers
	 * them, so the first request is the last 4 KiB (trailer and a small
	 * head; a larger head is then read exactly) rather than 16 KiB.  The execution's
	 * open reuses this validation (same token), tail included.
	 */
	po.tail_bytes = head_only ? 4096 : 0;
	po.cache_dir = trl_is_remote_url(url) ? o->cache_dir : NULL;
	po.cache_max_bytes = o->cache_bytes;
	po.lru = trail_lru();
	po.max_parallel = o->parallel;
	/* the next pages fetched in a thread while these are decoded (trail_cancel reads two flags) */
	po.async = true;
	po.readahead_max = o->readahead;
	po.revalidate_seconds = rv ? trl_int_option("revalidate_interval", rv, 0, REVALIDATE_MAX) : o->revalidate;
	/* planning and execution of one statement validate an object once */
	po.validation_token = (uint64) GetCurrentStatementStartTimestamp();
	h->cb.func = trail_handle_close;
	h->cb.arg = h;
	MemoryContextRegisterResetCallback(cxt, &h->cb);
	if (tdb_pager_open(&po, &h->pager, &err) < 0)
	{
		if (missing_ok && err.code != TDB_TRAIL_ECANCELED)
			return NULL;
		trail_error(&err, psprintf("could not open trail file \"%s\"", url));
	}
	if (tdb_trail_open(h->pager, &h->reader, &err) < 0)
	{
		if (missing_ok && err.code != TDB_TRAIL_ECANCELED)
			return NULL;		/* the context's reset closes the pager */
		trail_error(&err, psprintf("could not read the footer of trail file \"%s\"", url));
	}
	return h;
}

TrailHandle *
trail_open(ForeignServer *server, ForeignTable *ft, const char *url, MemoryContext cxt)
{
	return trail_open_ext(server, ft, url, cxt, false, false);
}

/* The elements of an id array (id = ANY(array)); returns their type. */
Oid
trl_id_array_elems(Datum v, Datum **elems, bool **nulls, int *n)
{
	ArrayType  *arr = DatumGetArrayTypeP(v);
	Oid			elemtype = ARR_ELEMTYPE(arr);
	int16		elemlen;
	bool		elembyval;
	char		elemalign;

	get_typlenbyvalalign(elemtype, &elemlen, &elembyval, &elemalign);
	deconstruct_array(arr, elemtype, elemlen, elembyval, elemalign, elems, nulls, n);
	return elemtype;
}

/*
 * A file's time (Unix microseconds, any int64) as a timestamptz: a time
 * PostgreSQL cannot represent is an error, never a wrapped or invalid
 * value.
 */
Datum
trail_time_datum(int64 unix_us)
{
	TimestampTz t;

	if (unix_us < PG_INT64_MIN + UNIX_TO_PG_US || !IS_VALID_TIMESTAMP(t = unix_us - UNIX_TO_PG_US))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("trail file time " INT64_FORMAT " (microseconds since 1970) is out of range for timestamptz", unix_us)));
	return TimestampTzGetDatum(t);
}

/* A table option, or dflt when the table does not set it. */
const char *
trl_table_option_or(ForeignTable *ft, const char *option, const char *dflt)
{
	const char *v = tdb_fdw_option(ft->options, option);

	return v ? v : dflt;
}
