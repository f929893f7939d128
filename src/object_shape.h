/*
 * object_shape.h
 *	  How a map record's shape is stored (docs/object-format.md): the
 *	  encoding byte the builder (object_build.c) writes and the readers
 *	  (object.c) decode.
 */
#ifndef TDB_OBJECT_SHAPE_H
#define TDB_OBJECT_SHAPE_H

#define SHAPE_E7	0
#define SHAPE_RAW	1

#endif							/* TDB_OBJECT_SHAPE_H */
