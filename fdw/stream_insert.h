/*
 * stream_insert.h
 *	  The stream FDW's INSERT callbacks (stream_insert.c), for its handler.
 */
#ifndef TDB_FDW_STREAM_INSERT_H
#define TDB_FDW_STREAM_INSERT_H

#include "foreign/fdwapi.h"

void		strBeginForeignModify(ModifyTableState *mtstate, ResultRelInfo *rinfo, List *fdw_private,
								  int subplan_index, int eflags);
void		strBeginForeignInsert(ModifyTableState *mtstate, ResultRelInfo *rinfo);
TupleTableSlot *strExecForeignInsert(EState *estate, ResultRelInfo *rinfo, TupleTableSlot *slot, TupleTableSlot *plan_slot);
void		strEndForeignModify(EState *estate, ResultRelInfo *rinfo);
int			strIsForeignRelUpdatable(Relation rel);

#endif							/* TDB_FDW_STREAM_INSERT_H */
