/*-------------------------------------------------------------------------
 *
 * trafficdb.c
 *	  What every PostgreSQL-side component uses and nothing of trafficdb's
 *	  own: the settings, the shared_preload_libraries check, and the check
 *	  of a relation argument.  It depends on no other file of the module,
 *	  so that any of them may use it (the module's entry point, _PG_init,
 *	  is module/init.c).
 *
 * trafficdb keeps its state in shared memory owned by a background worker,
 * so the library is only useful when the postmaster loads it at start-up.
 * A backend that loads it any other way (CREATE EXTENSION on a server that
 * was started without it in shared_preload_libraries) still defines the
 * settings, so that SHOW and pg_settings work, but every SQL entry point,
 * starting with the check in the install script, refuses to run.
 *
 * Settings are defined here once for every component: the daemon and the
 * wrappers read the C variables declared in module/trafficdb.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "catalog/pg_class.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "module/trafficdb.h"
#include "shm.h"

/* Settings (see docs/settings.md for what each one is for). */
char	   *tdb_database = NULL;
int			tdb_publish_interval_ms = 1000;
int			tdb_reader_pin_timeout_ms = 10000;
bool		tdb_huge_pages = true;
char	   *tdb_shm_group = NULL;
char	   *tdb_shm_name_setting = NULL;
int			tdb_max_external_readers = 64;
int			tdb_trail_memory_cache_kb = 64 * 1024;
int			tdb_trail_page_cache_kb = 64 * 1024;
bool		tdb_trail_footer_aggregates = true;
int			tdb_checkpoint_interval = 300;
int			tdb_checkpoint_timeout_s = 300;
double		tdb_checkpoint_min_changed = 4.0;
int			tdb_checkpoint_part_entries = 1048576;
int			tdb_log_retention_s = 3600;
int			tdb_log_retention_generations = 3600;
int			tdb_replay_verify = TDB_REPLAY_VERIFY_FULL;
int			tdb_log_trim_method = TDB_LOG_TRIM_TRUNCATE;
int			tdb_max_writers = 16;
int			tdb_max_subscribers = 64;
int			tdb_subscriber_ring_events = 4096;
int			tdb_writer_ring_slots = 65536;
char	   *tdb_writer_group = NULL;
int			tdb_writer_drain_interval_ms = 1;
int			tdb_stop_batches_ms = 2000;
int			tdb_feed_lock_timeout_ms = 200;
int			tdb_max_subscriptions_per_role = 1000;
int			tdb_match_budget_ms = 200;
int			tdb_subscription_index_mb = 64;
double		tdb_notify_queue_max_usage = 0.5;
int			tdb_max_subscriber_slots_per_role = 8;

static bool
check_ring_slots(int *newval, void **extra, GucSource source)
{
	(void) extra;
	(void) source;
	if (*newval < 128 || (*newval & (*newval - 1)) != 0)
	{
		GUC_check_errdetail("trafficdb.writer_ring_slots must be a power of two of at least 128, not %d.", *newval);
		return false;
	}
	return true;
}

static bool
check_power_of_two(int *newval, void **extra, GucSource source)
{
	(void) extra;
	(void) source;
	if (*newval < 64 || (*newval & (*newval - 1)) != 0)
	{
		GUC_check_errdetail("trafficdb.subscriber_ring_events must be a power of two of at least 64, not %d.", *newval);
		return false;
	}
	return true;
}

/*
 * trafficdb.shm_name: empty (the default, "/trafficdb.<port>"), or a POSIX
 * shared memory name prefix: "/" and a name without "/", short enough for
 * the names made from it (<prefix>.ctl, <prefix>.<n>, ...: src/shm.h).
 * Another value was taken before, and the server then failed at start with
 * a message about another server.  A value set in the configuration is
 * applied by DefineCustomStringVariable with only a WARNING when it fails
 * this check: tdb_define_settings then refuses to start the postmaster
 * (shm_name_refused).
 */
static char shm_name_refused[TDB_SHM_NAME_MAX * 4 + 200];

/*
 * v as it may be shown in a message: at most max bytes of it, cut at a
 * UTF-8 character's start (a cut character would make the whole message
 * unconvertible to the client's encoding), control characters written as
 * \n, \t or \xNN (the log's lines and the terminal showing them stay
 * intact), "..." after it when cut.  out holds max * 4 + 4 bytes.
 */
static void
shm_name_shown(char *out, const char *v, size_t max)
{
	size_t		len = strlen(v);
	size_t		n = len;
	char	   *o = out;

	if (n > max)
	{
		n = max;
		while (n > 0 && ((unsigned char) v[n] & 0xC0) == 0x80)
			n--;
	}
	for (size_t i = 0; i < n; i++)
	{
		unsigned char c = (unsigned char) v[i];

		if (c == '\n')
			o += sprintf(o, "\\n");
		else if (c == '\t')
			o += sprintf(o, "\\t");
		else if (c < 0x20 || c == 0x7F)
			o += sprintf(o, "\\x%02X", c);
		else
			*o++ = (char) c;
	}
	if (n < len)
		o += sprintf(o, "...");
	*o = '\0';
}

static bool
check_shm_name(char **newval, void **extra, GucSource source)
{
	const char *v = *newval;
	size_t		len;
	size_t		ctl;
	char		shown[TDB_SHM_NAME_MAX * 4 + 4];
	char		why[TDB_SHM_NAME_MAX * 4 + 100];

	(void) extra;
	(void) source;
	if (v == NULL || v[0] == '\0')
		return true;
	len = strlen(v);
	for (ctl = 0; ctl < len; ctl++)
		if ((unsigned char) v[ctl] < 0x20 || (unsigned char) v[ctl] == 0x7F)
			break;
	shm_name_shown(shown, v, len >= TDB_SHM_NAME_MAX ? TDB_SHM_NAME_MAX / 2 : TDB_SHM_NAME_MAX);
	if (v[0] != '/')
		snprintf(why, sizeof(why), "\"%s\" does not start with \"/\".", shown);
	else if (len == 1)
		snprintf(why, sizeof(why), "\"/\" has no name after the \"/\".");
	else if (strchr(v + 1, '/') != NULL)
		snprintf(why, sizeof(why), "\"%s\" has a \"/\" after the first character.", shown);
	else if (len >= TDB_SHM_NAME_MAX)
		snprintf(why, sizeof(why), "\"%s\" is %zu bytes long, too long for the shared memory names made from it.",
				 shown, len);
	else if (ctl < len)
		snprintf(why, sizeof(why), "\"%s\" has a control character (byte %zu).", shown, ctl + 1);
	else
		return true;
	GUC_check_errdetail("%s trafficdb.shm_name must be \"/\" followed by at most %d bytes without \"/\" "
						"or control characters (for example \"/trafficdb.5432\"), or empty for \"/trafficdb.<port>\".",
						why, TDB_SHM_NAME_MAX - 2);
	snprintf(shm_name_refused, sizeof(shm_name_refused), "%s", why);
	return false;
}

static const struct config_enum_entry log_trim_options[] = {
	{"truncate", TDB_LOG_TRIM_TRUNCATE, false},
	{"delete", TDB_LOG_TRIM_DELETE, false},
	{NULL, 0, false}
};

static const struct config_enum_entry replay_verify_options[] = {
	{"full", TDB_REPLAY_VERIFY_FULL, false},
	{"last", TDB_REPLAY_VERIFY_LAST, false},
	{NULL, 0, false}
};

/* True when the postmaster loaded us through shared_preload_libraries. */
bool		tdb_loaded_at_startup = false;

void
tdb_define_settings(void)
{
	DefineCustomIntVariable("trafficdb.publish_interval",
							"Time between two traffic publications by the daemon.",
							"trafficdb.publish() publishes at once, whatever this says.",
							&tdb_publish_interval_ms,
							1000,
							10,
							3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("trafficdb.trail_memory_cache",
							"Memory each backend keeps of recently read trail file blocks.",
							"Blocks are shared by the backend's scans; the disk cache of a trafficdb_trails server is shared by all backends.",
							&tdb_trail_memory_cache_kb,
							64 * 1024,
							0,
							INT_MAX / 2,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("trafficdb.trail_page_cache",
							"Memory a join's lookups in one trail file keep of the pages they decoded.",
							"A nested loop's lookups (one scan per outer row) share the pages they "
							"decoded, so that a page holding several trails is fetched and decoded "
							"once per statement; least recently used pages go first; 0: none.",
							&tdb_trail_page_cache_kb,
							64 * 1024,
							0,
							INT_MAX / 2,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("trafficdb.trail_footer_aggregates",
							 "Answers aggregates over trail foreign tables from the file's footer.",
							 "count, min, max, bool_and and bool_or of a whole trail file or of "
							 "its trails (GROUP BY the trail id) come from the footer's summaries "
							 "without fetching any page; off: PostgreSQL aggregates the rows.",
							 &tdb_trail_footer_aggregates,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("trafficdb.huge_pages",
							 "Makes the map and traffic objects of huge pages.",
							 "The daemon makes each shared-memory object of 2 MB or more it "
							 "creates of 2 MB pages (MADV_COLLAPSE, Linux 6.1 or later; it works "
							 "whatever /dev/shm's huge= option and shmem_enabled say, short of "
							 "deny), so that a lookup misses the TLB once per 2 MB instead of "
							 "per 4 kB.  Best effort: status.shm_huge_bytes says what it got.",
							 &tdb_huge_pages,
							 true,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("trafficdb.reader_pin_timeout",
							"How long a reader may keep a superseded version.",
							"A version superseded longer than this ago is revoked even if "
							"readers pin it: they get an error (SQLSTATE 72000) or "
							"TRAFFICDB_REVOKED at their next use, and publication goes on.",
							&tdb_reader_pin_timeout_ms,
							10000,
							100,
							INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("trafficdb.checkpoint_interval",
							"Generations between two checkpoints of the generation log.",
							"A checkpoint is the whole traffic state of one generation; a restart "
							"replays the newest one and the records after it.",
							&tdb_checkpoint_interval,
							300, 1, INT_MAX,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomRealVariable("trafficdb.checkpoint_min_changed",
							 "Changed entries logged since the last checkpoint, in locations, before checkpoint_interval makes another.",
							 "A checkpoint writes every location: after fewer changes than that it costs more "
							 "than the replay it saves, and at a high publication rate on a large map it "
							 "would make publication cost the map's size again.  The default, 4, keeps the "
							 "replay after a crash below the map build a restart does anyway.  0: by "
							 "generations alone.  checkpoint_timeout still bounds the time between two.",
							 &tdb_checkpoint_min_changed,
							 4.0, 0.0, 1000.0,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("trafficdb.checkpoint_timeout",
							"Longest time between two checkpoints of the generation log.",
							NULL,
							&tdb_checkpoint_timeout_s,
							300, 1, INT_MAX / 1000,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("trafficdb.checkpoint_part_entries",
							"Locations in one part (one row) of a checkpoint.",
							NULL,
							&tdb_checkpoint_part_entries,
							1048576, 1024, 1 << 26,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("trafficdb.log_retention",
							"How long the generation log keeps a generation's record.",
							"changes_since() answers for generations still kept; the log keeps "
							"what this or trafficdb.log_retention_generations keeps, whichever "
							"is more, and always its newest two checkpoints.",
							&tdb_log_retention_s,
							3600, 0, INT_MAX / 1000,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("trafficdb.log_retention_generations",
							"How many of the newest generations the generation log keeps.",
							NULL,
							&tdb_log_retention_generations,
							3600, 0, INT_MAX,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("trafficdb.log_trim",
							 "How the generation log's aged segments are emptied.",
							 "truncate: TRUNCATE, once no snapshot older than the trim remains (no row "
							 "deleted, nothing for VACUUM; each is an AccessExclusiveLock that hot standbys "
							 "replay); delete: DELETE of the segment's rows (no lock a standby session meets, "
							 "dead rows for VACUUM).",
							 &tdb_log_trim_method,
							 TDB_LOG_TRIM_TRUNCATE,
							 log_trim_options,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("trafficdb.replay_verify",
							 "Which replayed generations a restart compares with their publication.",
							 "full: every one (the traffic object rebuilt for each generation must have "
							 "the checksum recorded when it was published); last: the checkpoint and the newest only.",
							 &tdb_replay_verify,
							 TDB_REPLAY_VERIFY_FULL,
							 replay_verify_options,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("trafficdb.feed_lock_timeout",
							"How long a feed cycle waits for the writers still in the feed partition it takes.",
							"A writer that holds its transaction open longer delays only the rows of its partition "
							"(to a later cycle; trafficdb.status.feed_parts_skipped counts it); the rest is published.",
							&tdb_feed_lock_timeout_ms,
							200, 0, 60000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("trafficdb.max_subscriptions_per_role",
							"The most rows of trafficdb.subscriptions one role may own.",
							"Counted at INSERT (a role's rows are those whose owner it is); "
							"superusers are not counted.  Only a superuser changes it, "
							"e.g. ALTER ROLE app SET trafficdb.max_subscriptions_per_role = 5000.",
							&tdb_max_subscriptions_per_role,
							1000, 0, INT_MAX,
							PGC_SUSET, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("trafficdb.writer_drain_interval",
							"How often the daemon drains the writers' ring while writers put.",
							"Between publications; updates drained are published by the next one.",
							&tdb_writer_drain_interval_ms,
							1, 1, 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("trafficdb.stop_batches_timeout",
							"How long an orderly stop publishes the writers' queued batches a generation each.",
							"Batches ended with trafficdb_end_batch and still queued when the server stops are "
							"published one generation each for this long, then the rest together in one last "
							"generation (none is lost); 0: all together at once.",
							&tdb_stop_batches_ms,
							2000, 0, 60000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	/*
	 * Postmaster settings can only be defined while the postmaster loads the
	 * library (PostgreSQL raises FATAL otherwise); without preloading they
	 * would mean nothing anyway.
	 */
	if (process_shared_preload_libraries_in_progress)
	{
		DefineCustomStringVariable("trafficdb.database",
								   "Database the trafficdb daemon connects to.",
								   "The daemon loads the road map and consumes the feed in this "
								   "database; create the extension there.",
								   &tdb_database,
								   "postgres",
								   PGC_POSTMASTER,
								   0,
								   NULL, NULL, NULL);

		DefineCustomStringVariable("trafficdb.shm_name",
								   "Name prefix of trafficdb's POSIX shared memory objects.",
								   "Empty means \"/trafficdb.<port>\". External readers open "
								   "<prefix>.ctl; see docs/shared-memory.md.",
								   &tdb_shm_name_setting,
								   "",
								   PGC_POSTMASTER,
								   0,
								   check_shm_name, NULL, NULL);

		DefineCustomIntVariable("trafficdb.max_external_readers",
								"Reader slots for processes outside the server (libtrafficdb).",
								NULL,
								&tdb_max_external_readers,
								64,
								0,
								4096,
								PGC_POSTMASTER,
								0,
								NULL, NULL, NULL);

		DefineCustomIntVariable("trafficdb.max_writers",
								"Writer lanes in <prefix>.writers: processes that may put at once (libtrafficdb trafficdb_put).",
								"0: no writers' ring.",
								&tdb_max_writers,
								16, 0, 1024,
								PGC_POSTMASTER, 0,
								NULL, NULL, NULL);

		DefineCustomIntVariable("trafficdb.max_subscribers",
								"Slots in <prefix>.subs: external processes subscribed at once (libtrafficdb trafficdb_subscribe).",
								"0: no subscribers' rings.",
								&tdb_max_subscribers,
								64, 0, 1024,
								PGC_POSTMASTER, 0,
								NULL, NULL, NULL);

		DefineCustomIntVariable("trafficdb.match_budget_ms",
								"Time the daemon spends matching subscriptions against one publication, after it is published.",
								"What does not fit is not matched: every subscriber gets an overrun event naming the generation, "
								"notify subscriptions an overrun in their next payload, and trafficdb.status counts it.",
								&tdb_match_budget_ms,
								200, 1, 60000,
								PGC_SIGHUP, GUC_UNIT_MS,
								NULL, NULL, NULL);

		DefineCustomIntVariable("trafficdb.subscription_index_mb",
								"Memory the daemon's index of subscriptions (location, subscription pairs) may take.",
								"Subscriptions that do not fit get no events; trafficdb.status counts them (subscriptions_unindexed).",
								&tdb_subscription_index_mb,
								64, 1, 65536,
								PGC_SIGHUP, GUC_UNIT_MB,
								NULL, NULL, NULL);

		DefineCustomRealVariable("trafficdb.notify_queue_max_usage",
								 "Fraction of the NOTIFY queue (pg_notification_queue_usage()) above which the daemon sends no notifications.",
								 "Notifications not sent are counted (trafficdb.status notify_dropped); a subscription's next one says overrun.",
								 &tdb_notify_queue_max_usage,
								 0.5, 0.0, 0.9,
								 PGC_SIGHUP, 0,
								 NULL, NULL, NULL);

		DefineCustomIntVariable("trafficdb.max_subscriber_slots_per_role",
								"Subscriber slots (trafficdb.subscription_events) the sessions of one role may hold at once.",
								"Counted over the sessions of the role's login; external subscribers are not counted.",
								&tdb_max_subscriber_slots_per_role,
								8, 1, 1024,
								PGC_SIGHUP, 0,
								NULL, NULL, NULL);

		DefineCustomIntVariable("trafficdb.subscriber_ring_events",
								"Events each subscriber's ring holds (a power of two); a subscriber further behind gets an overrun event.",
								NULL,
								&tdb_subscriber_ring_events,
								4096, 64, 1048576,
								PGC_POSTMASTER, 0,
								check_power_of_two, NULL, NULL);

		DefineCustomIntVariable("trafficdb.writer_ring_slots",
								"64-byte slots in each writer lane (a power of two).",
								NULL,
								&tdb_writer_ring_slots,
								65536, 128, 1 << 24,
								PGC_POSTMASTER, 0,
								check_ring_slots, NULL, NULL);

		DefineCustomStringVariable("trafficdb.writer_group",
								   "Operating-system group given write access to the writers' ring.",
								   "Empty means owner-only (mode 0600): only the server's user can put. "
								   "Writers also need read access (trafficdb.shm_group).",
								   &tdb_writer_group,
								   "",
								   PGC_POSTMASTER,
								   0,
								   NULL, NULL, NULL);

		DefineCustomStringVariable("trafficdb.shm_group",
								   "Operating-system group given read access to trafficdb's shared memory.",
								   "Empty means owner-only (mode 0600), which is the default.",
								   &tdb_shm_group,
								   "",
								   PGC_POSTMASTER,
								   0,
								   NULL, NULL, NULL);
	}

	MarkGUCPrefixReserved("trafficdb");

	/*
	 * An invalid trafficdb.shm_name in the configuration was only warned
	 * about (the WARNING says why): the postmaster must not start on the
	 * default names instead of the ones the admin meant.
	 */
	if (process_shared_preload_libraries_in_progress && shm_name_refused[0] != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for parameter \"trafficdb.shm_name\": %s", shm_name_refused),
				 errhint("trafficdb.shm_name must be \"/\" followed by at most %d bytes without \"/\" "
						 "or control characters (for example \"/trafficdb.5432\"), or empty for \"/trafficdb.<port>\".",
						 TDB_SHM_NAME_MAX - 2)));
}

/*
 * Raise the error every SQL entry point gives when the postmaster did not
 * load the library.  Callable from C by any component.
 */
void
tdb_require_preload(void)
{
	if (tdb_loaded_at_startup)
		return;

	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("trafficdb must be loaded via shared_preload_libraries"),
			 errdetail("The server was started with shared_preload_libraries = '%s'; "
					   "trafficdb's daemon and shared memory are set up only when the "
					   "server starts with the library preloaded.",
					   GetConfigOption("shared_preload_libraries", false, false)),
			 errhint("Add 'trafficdb' to shared_preload_libraries in postgresql.conf "
					 "(keeping any libraries already listed), restart the server, "
					 "then run the command again.")));
}

char
tdb_relation_arg(Oid relid, const char *func, const char *argname, const char *expected)
{
	if (SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
	{
		LockRelationOid(relid, AccessShareLock);
		/* locking processed invalidations: it may have been dropped meanwhile */
		if (SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
			return get_rel_relkind(relid);
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_TABLE),
			 errmsg("relation with OID %u does not exist", relid),
			 errdetail("Argument %s of %s must be %s.", argname, func, expected)));
	return '\0';
}

const char *
tdb_relkind_name(char relkind)
{
	switch (relkind)
	{
		case RELKIND_RELATION:
			return "a table";
		case RELKIND_PARTITIONED_TABLE:
			return "a partitioned table";
		case RELKIND_VIEW:
			return "a view";
		case RELKIND_MATVIEW:
			return "a materialized view";
		case RELKIND_FOREIGN_TABLE:
			return "a foreign table";
		case RELKIND_SEQUENCE:
			return "a sequence";
		case RELKIND_INDEX:
			return "an index";
		case RELKIND_PARTITIONED_INDEX:
			return "a partitioned index";
		case RELKIND_COMPOSITE_TYPE:
			return "a composite type";
		case RELKIND_TOASTVALUE:
			return "a TOAST table";
	}
	return "a relation";
}
