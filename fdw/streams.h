/*
 * streams.h
 *	  What the stream FDW's other files need of streams.c: its scan's
 *	  entry, by which the window functions recognise a stream table.
 */
#ifndef TDB_FDW_STREAMS_H
#define TDB_FDW_STREAMS_H

#include "foreign/fdwapi.h"

void		strBeginForeignScan(ForeignScanState *node, int eflags);

#endif							/* TDB_FDW_STREAMS_H */
