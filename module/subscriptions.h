/*-------------------------------------------------------------------------
 *
 * subscriptions.h
 *	  Rows of trafficdb.subscriptions as the matcher's filters
 *	  (subscriptions.c, src/submatch.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef TDB_MODULE_SUBSCRIPTIONS_H
#define TDB_MODULE_SUBSCRIPTIONS_H

#include "postgres.h"

#include "access/htup.h"
#include "access/tupdesc.h"

#include "geo.h"
#include "submatch.h"

/*
 * The filter of one row of trafficdb.subscriptions (its ids and polygon
 * allocated in cxt).  ERROR naming the value for a row the matcher cannot
 * use; location ids are not checked against a map here.
 */
extern void tdb_subscription_filter(TupleDesc td, HeapTuple tup, TdbSubFilter *f, MemoryContext cxt);

#endif							/* TDB_MODULE_SUBSCRIPTIONS_H */
