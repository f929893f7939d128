/*
 * trail_write.h
 *	  trafficdb-trail's options, shared by its commands (tools/trafficdb-trail.c)
 *	  and its write command (tools/trail_write.c: CSV in two passes within a
 *	  memory limit, a progress line, the file made whole or not at all).
 */
#ifndef TDB_TRAIL_WRITE_H
#define TDB_TRAIL_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "csvtime.h"
#include "trail/pager.h"
#include "trail/trail.h"

typedef struct Opts
{
	TdbPagerOptions pager;
	const char *id, *time, *lon, *lat;
	TdbTimeUnit time_unit;
	TdbTimeWindow time_window;
	const char *types[TDB_TRAIL_MAX_COLUMNS + 1];
	int			ntypes;
	uint32_t	page_bytes;
	int64_t		page_seconds;
	int			format_version;
	TdbTrailOrder order;
	bool		by_time;		/* --order time: space-time without the place */
	int64_t		bucket_seconds;	/* 0: not given */
	size_t		part_mb;
	size_t		memory_limit;	/* write: bytes; 0: the writer's default */
	const char *temp_dir;		/* write: sort runs and the input's copy; NULL: $TMPDIR */
	bool		quiet;			/* write: no progress line */
	int64_t		ids[4096];
	const char *sids[4096];
	int			nids;
	bool		has_from, has_to, has_bbox, stats, list_trails, list_pages;
	int64_t		from, to;
	double		bbox[4];
	uint64_t	limit;
	const char *columns;		/* cat: the extra columns to read and print (comma-separated); NULL: all */
	bool		no_position;	/* cat: lon and lat not read (printed empty) */
} Opts;

/* trafficdb-trail.c */
void		usage(void) __attribute__((noreturn));
void		die_err(const TdbTrailError *e) __attribute__((noreturn));

/* trail_write.c: trafficdb-trail write OUT < CSV */
int			cmd_write(const char *out, Opts *o);

#endif							/* TDB_TRAIL_WRITE_H */
