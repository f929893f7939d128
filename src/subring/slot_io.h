/*
 * slot_io.h
 *	  What both sides of the subscribers' rings do alike, private to
 *	  producer.c and consumer.c: lock a slot's byte of the
 *	  file, copy an event to or from a ring.
 */
#ifndef TDB_SUBRING_SLOT_IO_H
#define TDB_SUBRING_SLOT_IO_H

#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "subring/subring.h"

static inline int
slot_lock(int fd, int cmd, short type, uint32_t slot)
{
	struct flock fl;
	int			rc;
	int			tries = 0;

	memset(&fl, 0, sizeof(fl));
	fl.l_type = type;
	fl.l_whence = SEEK_SET;
	fl.l_start = (off_t) slot;
	fl.l_len = 1;
	do
		rc = fcntl(fd, cmd, &fl);
	while (rc != 0 && errno == EINTR && ++tries < 100);
	return rc;
}

/*
 * Copy one event to or from a ring.  Under ThreadSanitizer through the
 * memcpy interceptor: GCC expands a fixed-size memcpy (or a struct
 * assignment) into vector moves it does not instrument, which would hide a
 * missing release or acquire on head or tail from the thread tests.
 */
static inline void
copy_event(TdbSubEvent *dst, const TdbSubEvent *src)
{
#ifdef __SANITIZE_THREAD__
	void	   *(*volatile cpy) (void *, const void *, size_t) = memcpy;

	cpy(dst, src, sizeof(*dst));
#else
	memcpy(dst, src, sizeof(*dst));
#endif
}

#endif							/* TDB_SUBRING_SLOT_IO_H */
