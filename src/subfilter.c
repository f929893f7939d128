/*
 * subfilter.c
 *	  A subscription filter as bytes: see subfilter.h.
 */
#include "subfilter.h"

#include <stdio.h>
#include <string.h>

_Static_assert(sizeof(TdbSubFilterWire) == 64, "the wire header is 64 bytes");

size_t
tdb_subfilter_encode(const TdbSubFilter *f, void *buf, size_t size, char *err)
{
	TdbSubFilterWire h;
	size_t		body = 0;

	if (size < TDB_SUBFILTER_BYTES)
	{
		snprintf(err, TDB_ERRLEN, "a filter needs %d bytes, not %zu", TDB_SUBFILTER_BYTES, size);
		return 0;
	}
	if (!tdb_sub_filter_check(f, err))
		return 0;
	memset(&h, 0, sizeof(h));
	h.magic = TDB_SUBFILTER_MAGIC;
	h.version = TDB_SUBFILTER_VERSION;
	h.area = (uint8_t) f->area;
	h.cond = (uint8_t) f->cond;
	h.on = (uint8_t) f->on;
	h.value = f->value;
	h.id = f->id;
	switch (f->area)
	{
		case TDB_SUB_IDS:
			if (f->nids > TDB_SUBFILTER_MAX_IDS)
			{
				snprintf(err, TDB_ERRLEN, "%u location ids: a filter holds at most %zu (subscribe several times)",
						 f->nids, (size_t) TDB_SUBFILTER_MAX_IDS);
				return 0;
			}
			h.count = f->nids;
			body = (size_t) f->nids * sizeof(uint64_t);
			memcpy((char *) buf + sizeof(h), f->ids, body);
			break;
		case TDB_SUB_POLYGON:
			if (f->polygon.nrings != 1)
			{
				snprintf(err, TDB_ERRLEN, "a polygon of %u rings: a filter holds one ring", f->polygon.nrings);
				return 0;
			}
			if (f->polygon.npoints > TDB_SUBFILTER_MAX_POINTS)
			{
				snprintf(err, TDB_ERRLEN, "a polygon of %u points: a filter holds at most %zu",
						 f->polygon.npoints, (size_t) TDB_SUBFILTER_MAX_POINTS);
				return 0;
			}
			h.count = f->polygon.npoints;
			body = (size_t) f->polygon.npoints * 2 * sizeof(double);
			memcpy((char *) buf + sizeof(h), f->polygon.xy, body);
			break;
		case TDB_SUB_BOX:
			h.geo[0] = f->box.xmin;
			h.geo[1] = f->box.ymin;
			h.geo[2] = f->box.xmax;
			h.geo[3] = f->box.ymax;
			break;
		case TDB_SUB_RADIUS:
			h.geo[0] = f->lon;
			h.geo[1] = f->lat;
			h.geo[2] = f->radius_m;
			break;
		case TDB_SUB_ALL_SQL:
		case TDB_SUB_NONE:
			break;
	}
	memcpy(buf, &h, sizeof(h));
	return sizeof(h) + body;
}

bool
tdb_subfilter_decode(const void *buf, size_t size, TdbSubFilter *f, TdbSubFilterStore *store, char *err)
{
	TdbSubFilterWire h;
	size_t		room;

	memset(f, 0, sizeof(*f));
	if (size < sizeof(h))
	{
		snprintf(err, TDB_ERRLEN, "a filter of %zu bytes is shorter than its %zu-byte header", size, sizeof(h));
		return false;
	}
	/* one copy of the header: what is checked is what is used */
	memcpy(&h, buf, sizeof(h));
	if (h.magic != TDB_SUBFILTER_MAGIC || h.version != TDB_SUBFILTER_VERSION)
	{
		snprintf(err, TDB_ERRLEN, "not a filter of this version (magic 0x%08x, version %u; expected 0x%08x, %d)",
				 h.magic, h.version, TDB_SUBFILTER_MAGIC, TDB_SUBFILTER_VERSION);
		return false;
	}
	room = (size < TDB_SUBFILTER_BYTES ? size : TDB_SUBFILTER_BYTES) - sizeof(h);
	f->id = h.id;
	f->area = (TdbSubArea) h.area;
	f->cond = (TdbSubCond) h.cond;
	f->on = (TdbSubOn) h.on;
	f->value = h.value;
	switch (h.area)
	{
		case TDB_SUB_IDS:
			if (h.count > room / sizeof(uint64_t))
			{
				snprintf(err, TDB_ERRLEN, "%u location ids do not fit in the filter's %zu bytes", h.count, room);
				return false;
			}
			memcpy(store->ids, (const char *) buf + sizeof(h), (size_t) h.count * sizeof(uint64_t));
			f->ids = store->ids;
			f->nids = h.count;
			break;
		case TDB_SUB_POLYGON:
			if (h.count > room / (2 * sizeof(double)))
			{
				snprintf(err, TDB_ERRLEN, "%u polygon points do not fit in the filter's %zu bytes", h.count, room);
				return false;
			}
			memcpy(store->xy, (const char *) buf + sizeof(h), (size_t) h.count * 2 * sizeof(double));
			store->ring_end[0] = h.count;
			if (h.count == 0 ||
				!tdb_knn_query_init(&f->polygon, TDB_KNN_POLYGON, store->xy, h.count, store->ring_end, 1))
			{
				snprintf(err, TDB_ERRLEN, "subscription %u: the polygon is empty or has a coordinate that is not a finite number",
						 h.id);
				return false;
			}
			break;
		case TDB_SUB_BOX:
			f->box = (TdbBox) {h.geo[0], h.geo[1], h.geo[2], h.geo[3]};
			break;
		case TDB_SUB_RADIUS:
			f->lon = h.geo[0];
			f->lat = h.geo[1];
			f->radius_m = h.geo[2];
			break;
		case TDB_SUB_ALL_SQL:
		case TDB_SUB_NONE:
			break;
		default:
			break;				/* tdb_sub_filter_check names it */
	}
	return tdb_sub_filter_check(f, err);
}
