/*
 * client.h
 *	  What libtrafficdb's files share beyond the public header (hidden
 *	  from the library's users: -fvisibility=hidden).
 */
#ifndef TDB_CLIENT_H
#define TDB_CLIENT_H

/* What the library exports (built with -fvisibility=hidden). */
#define TDB_API __attribute__((visibility("default")))

/* A TdbShmResult as the public TRAFFICDB_* code. */
int			tdb_client_from_shm(int rc);

#endif							/* TDB_CLIENT_H */
