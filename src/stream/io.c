/*
 * io.c
 *	  The two real I/O layers of stream files: a POSIX file or block device
 *	  (pread, pwrite, fdatasync; the file preallocated at creation) and a
 *	  memory region.  Tests bring their own layer (power loss, failures).
 */
#include "stream/stream.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/file.h>

typedef struct FileCtx
{
	int			fd;
} FileCtx;

static int
file_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	FileCtx    *f = ctx;
	size_t		done = 0;

	while (done < len)
	{
		ssize_t		n = pread(f->fd, (char *) buf + done, len - done, (off_t) (off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		done += (size_t) n;
	}
	return 0;
}

static int
file_write(void *ctx, uint64_t off, const void *buf, size_t len)
{
	FileCtx    *f = ctx;
	size_t		done = 0;

	while (done < len)
	{
		ssize_t		n = pwrite(f->fd, (const char *) buf + done, len - done, (off_t) (off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		done += (size_t) n;
	}
	return 0;
}

static int
file_sync(void *ctx)
{
	return fdatasync(((FileCtx *) ctx)->fd) == 0 ? 0 : -1;
}

static int
io_file_open(const char *path, bool create, bool writable, uint64_t size, TdbStreamIO *io, char *err,
			 size_t errlen)
{
	FileCtx    *f;
	struct stat st;
	int			fd;

	/* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below) */
	fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NONBLOCK | (create ? O_CREAT | O_EXCL : 0), 0640);
	if (fd < 0)
	{
		snprintf(err, errlen, "could not %s \"%s\"%s: %s", create ? "create" : "open", path,
				 writable ? "" : " for reading", strerror(errno));
		return TDB_STREAM_EIO;
	}
	if (fstat(fd, &st) != 0)
		goto fail;
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
	{
		snprintf(err, errlen, "\"%s\" is not a regular file or a block device", path);
		close(fd);
		return TDB_STREAM_EIO;
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)
		goto fail;
	if (S_ISBLK(st.st_mode))
	{
		uint64_t	bytes;

		if (ioctl(fd, BLKGETSIZE64, &bytes) != 0)
			goto fail;
		st.st_size = (off_t) bytes;
	}
	else if (create)
	{
		/* every section preallocated: no later write can fail for space */
		int			rc = posix_fallocate(fd, 0, (off_t) size);

		if (rc != 0)
		{
			errno = rc;
			unlink(path);
			goto fail;
		}
		st.st_size = (off_t) size;
		/* make the file's existence and size durable */
		if (fsync(fd) != 0)
			goto fail;
	}
	f = malloc(sizeof(*f));
	if (f == NULL)
	{
		errno = ENOMEM;
		goto fail;
	}
	f->fd = fd;
	io->ctx = f;
	io->read = file_read;
	io->write = file_write;
	io->sync = file_sync;
	io->size = (uint64_t) st.st_size;
	return TDB_STREAM_OK;
fail:
	snprintf(err, errlen, "\"%s\": %s", path, strerror(errno));
	close(fd);
	return TDB_STREAM_EIO;
}

int
tdb_stream_io_file(const char *path, bool create, uint64_t size, TdbStreamIO *io, char *err, size_t errlen)
{
	return io_file_open(path, create, true, size, io, err, errlen);
}

int
tdb_stream_io_file_readonly(const char *path, TdbStreamIO *io, char *err, size_t errlen)
{
	return io_file_open(path, false, false, 0, io, err, errlen);
}

int
tdb_stream_io_fd(const TdbStreamIO *io)
{
	return io->ctx != NULL && io->read == file_read ? ((const FileCtx *) io->ctx)->fd : -1;
}

int
tdb_stream_io_lock(TdbStreamIO *io, bool exclusive)
{
	FileCtx    *f = io->ctx;

	while (flock(f->fd, exclusive ? LOCK_EX : LOCK_SH) != 0)
		if (errno != EINTR)
			return TDB_STREAM_EIO;
	return TDB_STREAM_OK;
}

void
tdb_stream_io_file_close(TdbStreamIO *io)
{
	if (io->ctx != NULL)
	{
		close(((FileCtx *) io->ctx)->fd);
		free(io->ctx);
		io->ctx = NULL;
	}
}

static int
mem_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	memcpy(buf, (char *) ctx + off, len);
	return 0;
}

static int
mem_write(void *ctx, uint64_t off, const void *buf, size_t len)
{
	memcpy((char *) ctx + off, buf, len);
	return 0;
}

static int
mem_sync(void *ctx)
{
	(void) ctx;
	return 0;
}

void
tdb_stream_io_memory(void *region, uint64_t size, TdbStreamIO *io)
{
	io->ctx = region;
	io->read = mem_read;
	io->write = mem_write;
	io->sync = mem_sync;
	io->size = size;
}
