/*-------------------------------------------------------------------------
 *
 * locations_row.c
 *	  An entry of the published map as a row of trafficdb.locations: its
 *	  shape as a geometry, its columns into a slot (the scan's rows, and the
 *	  rows a nearest-first scan checks its filters on before measuring).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "executor/executor.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "fdw/locations_internal.h"
#include "module/geometry.h"
#include "module/shared.h"
#include "module/snapshot.h"
#include "module/trafficdb.h"

#define UNIX_TO_PG_US ((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

/* Record i's points into st->xy (grown as needed); returns their count. */
uint32
loc_record_geom_xy(ForeignScanState *node, LocScanState *st, uint64 i)
{
	const TdbLocation *rec = &st->snap->map->records[i];

	if (st->xy_cap < rec->npoints)
	{
		st->xy_cap = rec->npoints;
		st->xy = st->xy ? repalloc(st->xy, sizeof(double) * 2 * st->xy_cap)
			: MemoryContextAlloc(node->ss.ps.state->es_query_cxt, sizeof(double) * 2 * st->xy_cap);
	}
	tdb_map_shape(st->snap->map, i, st->xy);
	return rec->npoints;
}

/* Record i's shape as a geometry Datum (its points go through st->xy). */
Datum
loc_record_geom(ForeignScanState *node, LocScanState *st, uint64 i)
{
	uint32		n = loc_record_geom_xy(node, st, i);

	return tdb_linestring_datum(st->xy, n);
}

/*
 * Entry i's columns into slot's values (the ones the query reads; geom also
 * if geom_too, never unless with_geom; own_geom: geom made already, or 0).
 */
void
loc_fill_row(ForeignScanState *node, LocScanState *st, TupleTableSlot *slot, uint64 i,
			 Datum own_geom, bool with_geom, bool geom_too)
{
	const TdbSnapshot *snap = st->snap;
	const TdbLocation *rec = &snap->map->records[i];
	const TdbTraffic *t = &snap->entries[i];

	for (int a = 0; a < st->natts; a++)
	{
		Datum	   *v = &slot->tts_values[a];
		bool	   *n = &slot->tts_isnull[a];

		*n = false;
		switch (a == st->geom_att && geom_too ? COL_GEOM : a == st->geom_att && !with_geom ? -1 : st->colmap[a])
		{
			case COL_LOCATION_ID:
				*v = Int64GetDatum((int64) rec->id);
				break;
			case COL_GEOM:
				*v = own_geom != (Datum) 0 ? own_geom : loc_record_geom(node, st, i);
				break;
			case COL_ROAD_CLASS:
				{
					const char *s = tdb_map_class(snap->map, i);

					*n = s[0] == '\0';
					*v = *n ? (Datum) 0 : CStringGetTextDatum(s);
				}
				break;
			case COL_NAME:
				{
					const char *s = tdb_map_name(snap->map, i);

					*n = s[0] == '\0';
					*v = *n ? (Datum) 0 : CStringGetTextDatum(s);
				}
				break;
			case COL_LENGTH_M:
				*v = Float8GetDatum(rec->length_m);
				break;
			case COL_SPEED_LIMIT:
				*n = rec->speed_limit_kmh == 0;
				*v = Int16GetDatum((int16) Min(rec->speed_limit_kmh, PG_INT16_MAX));
				break;
			case COL_ONEWAY:
				*v = BoolGetDatum((rec->flags & TDB_LOC_ONEWAY) != 0);
				break;
			case COL_SPEED:
				*n = isnan(t->speed_kmh);
				*v = Float4GetDatum(t->speed_kmh);
				break;
			case COL_FREE_FLOW:
				*n = isnan(t->free_flow_kmh);
				*v = Float4GetDatum(t->free_flow_kmh);
				break;
			case COL_CONGESTION:
				*n = t->congestion == TDB_CONGESTION_UNKNOWN;
				*v = Int16GetDatum(t->congestion);
				break;
			case COL_CONFIDENCE:
				*n = t->updated_at_us == 0 || t->confidence == TDB_CONFIDENCE_UNKNOWN;
				*v = Int16GetDatum(t->confidence);
				break;
			case COL_INCIDENT:
				{
					uint32		len;
					const char *inc = tdb_traffic_incident(snap->traffic, t, &len);

					*n = inc == NULL;
					*v = inc ? PointerGetDatum(cstring_to_text_with_len(inc, (int) len)) : (Datum) 0;
				}
				break;
			case COL_UPDATED_AT:
				*n = t->updated_at_us == 0;
				*v = TimestampTzGetDatum(t->updated_at_us - UNIX_TO_PG_US);
				break;
			case COL_GENERATION:
				*v = Int64GetDatum((int64) snap->generation);
				break;
			case COL_CHANGED_GENERATION:
				*n = t->changed_gen == 0;
				*v = Int64GetDatum((int64) t->changed_gen);
				break;
			default:
				*n = true;
				*v = (Datum) 0;
		}
	}
}
