/*-------------------------------------------------------------------------
 *
 * init.c
 *	  The module's entry point: _PG_init defines the settings and, in the
 *	  postmaster, sets up the shared state, registers the daemon and
 *	  installs the hooks; and the SQL functions that belong to the
 *	  extension as a whole.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "bgworker/daemon.h"
#include "module/regions.h"
#include "module/shared.h"
#include "module/snapshot.h"
#include "module/trafficdb.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

PG_FUNCTION_INFO_V1(trafficdb_assert_preloaded);
PG_FUNCTION_INFO_V1(trafficdb_version);

void
_PG_init(void)
{
	tdb_loaded_at_startup = process_shared_preload_libraries_in_progress;

	tdb_define_settings();

	if (!tdb_loaded_at_startup)
		return;
	tdb_shared_request();
	tdb_daemon_register();
	tdb_snapshot_hooks();
	tdb_regions_hooks();
}

/*
 * trafficdb._assert_preloaded(): the first statement of the install script,
 * so that CREATE EXTENSION fails as a whole on a server without the library.
 */
Datum
trafficdb_assert_preloaded(PG_FUNCTION_ARGS)
{
	tdb_require_preload();
	PG_RETURN_VOID();
}

/* trafficdb.version(): the library's version, to compare with the SQL one. */
Datum
trafficdb_version(PG_FUNCTION_ARGS)
{
	tdb_require_preload();
	PG_RETURN_TEXT_P(cstring_to_text(TDB_LIBRARY_VERSION));
}
