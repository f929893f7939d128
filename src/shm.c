/*
 * shm.c
 *	  POSIX shared memory objects and reader slots; see shm.h for the
 *	  protocol.  System calls happen here only when mapping or creating,
 *	  never on the read path.
 */
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

void
tdb_shm_name(char *out, const char *prefix, const char *suffix)
{
	snprintf(out, TDB_SHM_NAME_MAX + 24, "%s.%s", prefix, suffix);
}

void
tdb_shm_seg_name(char *out, const char *prefix, uint64_t seq)
{
	snprintf(out, TDB_SHM_NAME_MAX + 24, "%s.%llu", prefix, (unsigned long long) seq);
}

static int
errno_result(void)
{
	if (errno == ENOENT)
		return TDB_SHM_ENOENT;
	if (errno == EACCES || errno == EPERM)
		return TDB_SHM_EACCES;
	return TDB_SHM_ESYS;
}

int
tdb_shm_map(const char *name, bool writable, bool own, size_t min_size, void **addr, size_t *size)
{
	int			fd;
	struct stat st;
	void	   *p;

	fd = shm_open(name, writable ? O_RDWR : O_RDONLY, 0);
	if (fd < 0)
		return errno_result();
	if (fstat(fd, &st) != 0)
	{
		int			save = errno;

		close(fd);
		errno = save;
		return TDB_SHM_ESYS;
	}
	if ((st.st_mode & S_IWOTH) != 0 || (own && st.st_uid != geteuid()))
	{
		close(fd);
		errno = EPERM;
		return TDB_SHM_EACCES;
	}
	if ((size_t) st.st_size < min_size || st.st_size == 0)
	{
		close(fd);
		return TDB_SHM_EINVAL;
	}
	p = mmap(NULL, (size_t) st.st_size, writable ? PROT_READ | PROT_WRITE : PROT_READ,
			 MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
	{
		int			save = errno;

		close(fd);
		errno = save;
		return errno_result();
	}
	close(fd);
	*addr = p;
	*size = (size_t) st.st_size;
	return TDB_SHM_OK;
}

/* posix_fallocate, retried on EINTR; returns 0 or an errno value. */
static int
posix_fallocate_retry(int fd, off_t size)
{
	int			rc;

	do
		rc = posix_fallocate(fd, 0, size);
	while (rc == EINTR);
	return rc;
}

int
tdb_shm_create(const char *name, size_t size, gid_t gid, bool group_write, void **addr)
{
	int			fd;
	void	   *p;
	mode_t		mode = 0600;

	if (gid != (gid_t) -1)
		mode = group_write ? 0660 : 0640;
	shm_unlink(name);
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return errno_result();
	/* the umask must not decide the mode; the group is set before it opens up */
	/*
	 * Reserve the pages now: tmpfs allocates on first write, and running out
	 * of /dev/shm there would be a SIGBUS in the daemon instead of an error.
	 */
	if ((gid != (gid_t) -1 && fchown(fd, (uid_t) -1, gid) != 0) ||
		fchmod(fd, mode) != 0 || ftruncate(fd, (off_t) size) != 0 ||
		(errno = posix_fallocate_retry(fd, (off_t) size)) != 0)
	{
		int			save = errno;

		close(fd);
		shm_unlink(name);
		errno = save;
		return errno_result();
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
	{
		int			save = errno;

		close(fd);
		shm_unlink(name);
		errno = save;
		return errno_result();
	}
	close(fd);
	*addr = p;
	return TDB_SHM_OK;
}

void
tdb_shm_unmap(void *addr, size_t size)
{
	if (addr != NULL && size > 0)
		munmap(addr, size);
}

int
tdb_slot_claim(TdbSlotsHeader *slots, uint32_t first, int32_t pid)
{
	for (uint32_t i = first; i < slots->nslots; i++)
	{
		int32_t		expected = 0;

		if (atomic_load_explicit(&slots->slots[i].pid, memory_order_relaxed) == 0 &&
			atomic_compare_exchange_strong(&slots->slots[i].pid, &expected, pid))
		{
			atomic_store_explicit(&slots->slots[i].pin, 0, memory_order_relaxed);
			return (int) i;
		}
	}
	return -1;
}

void
tdb_slot_release(TdbSlotsHeader *slots, uint32_t idx)
{
	atomic_store_explicit(&slots->slots[idx].pin, 0, memory_order_release);
	atomic_store_explicit(&slots->slots[idx].pid, 0, memory_order_release);
}

bool
tdb_slot_reap(TdbSlotsHeader *slots, uint32_t idx, int32_t dead_pid)
{
	int32_t		expected = dead_pid;

	if (!atomic_compare_exchange_strong(&slots->slots[idx].pid, &expected, -1))
		return false;
	atomic_store_explicit(&slots->slots[idx].pin, 0, memory_order_release);
	atomic_store_explicit(&slots->slots[idx].pid, 0, memory_order_release);
	return true;
}

int
tdb_control_check(const TdbControl *ctl, size_t size)
{
	if (size < sizeof(TdbControl) || ctl->magic != TDB_CTL_MAGIC ||
		ctl->version != TDB_SHM_VERSION || ctl->header_size != sizeof(TdbControl))
		return TDB_SHM_EINVAL;
	if (ctl->nbackend_slots > ctl->nslots ||
		memchr(ctl->prefix, '\0', sizeof(ctl->prefix)) == NULL)
		return TDB_SHM_EINVAL;
	return TDB_SHM_OK;
}

int
tdb_slots_check(const TdbSlotsHeader *slots, size_t size, const TdbControl *ctl)
{
	if (size < sizeof(TdbSlotsHeader) || slots->magic != TDB_SLOTS_MAGIC ||
		slots->nslots != ctl->nslots || size < tdb_slots_size(slots->nslots) ||
		slots->instance_id != ctl->instance_id)
		return TDB_SHM_EINVAL;
	return TDB_SHM_OK;
}
