/*
 * layout_check.c
 *	  Compile-time proof that the public structs of include/trafficdb.h which
 *	  the library hands out as casts of shared memory have the layout of the
 *	  internal structs they stand for.  No code: it only fails the build.
 *
 * trafficdb_get_traffic and trafficdb_get (through trafficdb_location.traffic)
 * return a TdbTraffic entry of the published traffic object cast to
 * trafficdb_traffic, so every field must sit at the same offset, with the
 * same type, and the structs must have the same size and alignment (an
 * array of them is indexed by callers).  trafficdb_location is filled field
 * by field, not cast, so it needs no check here.
 */
#include <stddef.h>

#include "trafficdb.h"
#include "object.h"

/* Same offset and same type (GNU C's __typeof__, as the library's build uses gnu11). */
#define SAME_FIELD(pub, pubf, priv, privf) \
	_Static_assert(offsetof(pub, pubf) == offsetof(priv, privf) && \
				   __builtin_types_compatible_p(__typeof__(((pub *) 0)->pubf), __typeof__(((priv *) 0)->privf)), \
				   #pub "." #pubf " must have the offset and type of " #priv "." #privf)

_Static_assert(sizeof(trafficdb_traffic) == sizeof(TdbTraffic), "trafficdb_traffic must have the size of TdbTraffic");
_Static_assert(_Alignof(trafficdb_traffic) == _Alignof(TdbTraffic), "trafficdb_traffic must have the alignment of TdbTraffic");
SAME_FIELD(trafficdb_traffic, updated_at_us, TdbTraffic, updated_at_us);
SAME_FIELD(trafficdb_traffic, changed_generation, TdbTraffic, changed_gen);
SAME_FIELD(trafficdb_traffic, speed_kmh, TdbTraffic, speed_kmh);
SAME_FIELD(trafficdb_traffic, free_flow_kmh, TdbTraffic, free_flow_kmh);
SAME_FIELD(trafficdb_traffic, incident_offset, TdbTraffic, incident_off);
SAME_FIELD(trafficdb_traffic, congestion, TdbTraffic, congestion);
SAME_FIELD(trafficdb_traffic, confidence, TdbTraffic, confidence);
SAME_FIELD(trafficdb_traffic, flags, TdbTraffic, flags);
