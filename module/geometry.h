/*-------------------------------------------------------------------------
 *
 * geometry.h
 *	  PostGIS geometry values without linking against PostGIS: the type is
 *	  found through the extension catalog (its OID differs per database and
 *	  its schema is the user's choice) and values are made by PostGIS's own
 *	  binary receive function from EWKB.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TDB_MODULE_GEOMETRY_H
#define TDB_MODULE_GEOMETRY_H

#include "postgres.h"

#include "fmgr.h"

/* Schema of an installed extension, or InvalidOid. */
extern Oid	tdb_extension_schema(const char *extname);

/* PostGIS's schema, cached with the geometry type (ERROR if PostGIS is absent). */
extern Oid	tdb_postgis_schema(void);

/* OID of PostGIS's geometry type in this database; ERROR if PostGIS is absent. */
extern Oid	tdb_geometry_oid(void);

/* A geometry(LineString, 4326) Datum from npoints lon/lat pairs. */
extern Datum tdb_linestring_datum(const double *xy, uint32 npoints);

#endif							/* TDB_MODULE_GEOMETRY_H */
