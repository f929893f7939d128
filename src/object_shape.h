/*
 * object_shape.h
 *	  How a map record's shape is stored (docs/object-format.md): the
 *	  encoding byte the builder (object_build.c) writes and the readers
 *	  (object.c) decode.
 */
#ifndef TDB_OBJECT_SHAPE_H
#define TDB_OBJECT_SHAPE_H

#include <math.h>
#include <stdint.h>

#include "rtree.h"

#define SHAPE_E7	0			/* zigzag varint deltas at 1e-7 degree from (0, 0) */
#define SHAPE_RAW	1			/* f64 pairs */
#define SHAPE_E7_BOX 2			/* zigzag varint deltas at 1e-7 degree from the leaf box's corner */

/*
 * The origin of a SHAPE_E7_BOX shape: its record's leaf box (float,
 * rounded outward) lower-left corner in 1e-7 degrees, rounded down.  The
 * first point is then a small delta (2-3 bytes per coordinate, not 5).
 */
static inline void
shape_box_origin(const TdbBoxF *leaf, int64_t *qx, int64_t *qy)
{
	*qx = (int64_t) floor((double) leaf->xmin * 1e7);
	*qy = (int64_t) floor((double) leaf->ymin * 1e7);
}

#endif							/* TDB_OBJECT_SHAPE_H */
