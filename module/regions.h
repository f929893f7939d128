/*-------------------------------------------------------------------------
 *
 * regions.h
 *	  A fleet of region nodes: the feed's region check and the planner hook
 *	  of trafficdb_global (regions.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef TDB_MODULE_REGIONS_H
#define TDB_MODULE_REGIONS_H

/* Install the planner hook (_PG_init). */
extern void tdb_regions_hooks(void);

#endif							/* TDB_MODULE_REGIONS_H */
