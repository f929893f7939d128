/*-------------------------------------------------------------------------
 *
 * timebound.c
 *	  Options and pushed-down time ranges shared by the stream and trail
 *	  foreign data wrappers; see timebound.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/stratnum.h"
#include "catalog/pg_am.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_foreign_data_wrapper.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_type.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "common/int.h"
#include "utils/lsyscache.h"

#include "fdw/timebound.h"

const char *const tdb_time_bound_ops[] = {">=", ">", "<=", "<", "="};

char *
tdb_fdw_option(List *options, const char *name)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *d = lfirst(lc);

		if (strcmp(d->defname, name) == 0)
			return defGetString(d);
	}
	return NULL;
}

void
tdb_fdw_check_catalog(Oid catalog, const char *validator)
{
	char	   *name;

	if (catalog == ForeignDataWrapperRelationId || catalog == ForeignServerRelationId ||
		catalog == UserMappingRelationId || catalog == ForeignTableRelationId ||
		catalog == AttributeRelationId)
		return;
	name = get_rel_name(catalog);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 name ? errmsg("\"%s\" (OID %u) is not a catalog of foreign-data options", name, catalog) :
			 errmsg("relation with OID %u does not exist", catalog),
			 errdetail("Argument 2 of %s must be the catalog whose options argument 1 holds: "
					   "pg_foreign_data_wrapper, pg_foreign_server, pg_user_mapping, pg_foreign_table or pg_attribute.",
					   validator)));
}

int
tdb_time_bound_of(Oid opno, bool swap)
{
	Oid			family = get_opclass_family(GetDefaultOpClass(TIMESTAMPTZOID, BTREE_AM_OID));

	switch (get_op_opfamily_strategy(opno, family))
	{
		case BTEqualStrategyNumber:
			return TDB_BOUND_EQ;
		case BTGreaterEqualStrategyNumber:
			return swap ? TDB_BOUND_LE : TDB_BOUND_GE;
		case BTGreaterStrategyNumber:
			return swap ? TDB_BOUND_LT : TDB_BOUND_GT;
		case BTLessEqualStrategyNumber:
			return swap ? TDB_BOUND_GE : TDB_BOUND_LE;
		case BTLessStrategyNumber:
			return swap ? TDB_BOUND_GT : TDB_BOUND_LT;
		default:
			return -1;
	}
}

bool
tdb_time_bound_apply(int kind, TimestampTz v, int64 *from, int64 *to)
{
	int64		t;

	if (TIMESTAMP_NOT_FINITE(v))
	{
		/* time < -infinity, time > infinity, time = either: never */
		if (kind == TDB_BOUND_EQ || (v == DT_NOBEGIN) == (kind == TDB_BOUND_LE || kind == TDB_BOUND_LT))
			return false;
		return true;			/* time > -infinity, time < infinity: no bound */
	}
	/*
	 * After 294247-01-10 the value has no Unix microseconds in an int64 (it
	 * overflowed, and ts < it kept no row): every time is before it.
	 */
	if (pg_add_s64_overflow(v, UNIX_TO_PG_US, &t))
		return kind == TDB_BOUND_LE || kind == TDB_BOUND_LT ? *from <= *to : false;
	switch (kind)
	{
		case TDB_BOUND_GE:
			*from = Max(*from, t);
			break;
		case TDB_BOUND_GT:
			*from = Max(*from, t + 1);
			break;
		case TDB_BOUND_LE:
			*to = Min(*to, t);
			break;
		case TDB_BOUND_LT:
			*to = Min(*to, t - 1);
			break;
		case TDB_BOUND_EQ:
			*from = Max(*from, t);
			*to = Min(*to, t);
			break;
	}
	return *from <= *to;
}
