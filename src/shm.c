/*
 * shm.c
 *	  POSIX shared memory objects and reader slots; see shm.h for the
 *	  protocol.  System calls happen here only when mapping or creating,
 *	  never on the read path.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE				/* F_OFD_SETLK */
#endif
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

bool
tdb_shm_prefix_ok(const char *prefix, char *err)
{
	if (prefix != NULL && prefix[0] == '/' && strlen(prefix) < TDB_SHM_NAME_MAX)
		return true;
	snprintf(err, TDB_SHM_ERRLEN, "shared memory name \"%s\" must start with '/' and be shorter than %d bytes",
			 prefix ? prefix : "(null)", TDB_SHM_NAME_MAX);
	return false;
}

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

void
tdb_shm_describe_user(uid_t uid, char *out, size_t len)
{
	struct passwd pw;
	struct passwd *res = NULL;
	char		buf[1024];

	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res != NULL)
		snprintf(out, len, "user %s (uid %u)", res->pw_name, (unsigned) uid);
	else
		snprintf(out, len, "uid %u", (unsigned) uid);
}

/* The server's user as an external process knows it; (uid_t) -1 if unknown. */
static uid_t
server_uid(void)
{
	const char *who = getenv("TDB_SERVER_USER");
	struct passwd pw;
	struct passwd *res = NULL;
	char		buf[1024];
	char	   *end;
	unsigned long n;

	if (who == NULL || who[0] == '\0')
		who = "postgres";
	errno = 0;
	n = strtoul(who, &end, 10);
	if (*end == '\0' && errno == 0 && n < (unsigned long) (uid_t) -1)
		return (uid_t) n;
	if (getpwnam_r(who, &pw, buf, sizeof(buf), &res) == 0 && res != NULL)
		return res->pw_uid;
	return (uid_t) -1;
}

bool
tdb_shm_owner_trusted(uid_t uid)
{
	uid_t		srv;

	if (uid == geteuid())
		return true;
	srv = server_uid();
	return srv != (uid_t) -1 && uid == srv;
}

/* "/dev/shm<name>": where glibc keeps POSIX shared memory objects. */
static void
shm_path(char *out, size_t len, const char *name)
{
	snprintf(out, len, "/dev/shm%s", name);
}

bool
tdb_shm_name_taken(const char *name, char *err)
{
	char		path[TDB_SHM_NAME_MAX + 40];
	char		owner[64];
	struct stat st;

	shm_path(path, sizeof(path), name);
	if (lstat(path, &st) != 0)
		return false;			/* free (or unreadable: creating it will say) */
	if (S_ISREG(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & S_IWOTH) == 0)
		return false;			/* ours: adopted or replaced */
	tdb_shm_describe_user(st.st_uid, owner, sizeof(owner));
	if (!S_ISREG(st.st_mode) || st.st_uid == geteuid())
		snprintf(err, TDB_SHM_ERRLEN, "\"/dev/shm%.71s\" is taken: %s of %.48s; remove it, or set trafficdb.shm_name to a free name",
				 name, S_ISREG(st.st_mode) ? "writable by everyone" : "not a regular file", owner);
	else
		snprintf(err, TDB_SHM_ERRLEN, "\"/dev/shm%.71s\" is taken by %.48s, not this server's user: remove it as root, or set trafficdb.shm_name to a free name",
				 name, owner);
	return true;
}

bool
tdb_shm_prefix_taken(const char *prefix, char *err)
{
	static const char *const fixed[] = {"lock", "ctl", "readers", "subs", "writers"};
	char		name[TDB_SHM_NAME_MAX + 24];

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
	{
		tdb_shm_name(name, prefix, fixed[i]);
		if (tdb_shm_name_taken(name, err))
			return true;
	}
	return false;
}

void
tdb_shm_foreign_error(const char *name, char *err)
{
	char		path[TDB_SHM_NAME_MAX + 40];
	char		owner[64];
	struct stat st;
	uid_t		srv = server_uid();

	shm_path(path, sizeof(path), name);
	if (lstat(path, &st) != 0)
	{
		snprintf(err, TDB_SHM_ERRLEN, "\"%.71s\" was refused and is gone now: %s", name, strerror(errno));
		return;
	}
	tdb_shm_describe_user(st.st_uid, owner, sizeof(owner));
	if (!S_ISREG(st.st_mode) || (st.st_mode & S_IWOTH) != 0)
		snprintf(err, TDB_SHM_ERRLEN, "\"%.71s\" (of %.48s) is not a regular file writable only by its owner: refused, not trafficdb's",
				 name, owner);
	else
	{
		char		expect[64];

		if (srv == (uid_t) -1)
			snprintf(expect, sizeof(expect), "user \"%.32s\", unknown here", getenv("TDB_SERVER_USER") && getenv("TDB_SERVER_USER")[0] ? getenv("TDB_SERVER_USER") : "postgres");
		else
			tdb_shm_describe_user(srv, expect, sizeof(expect));
		snprintf(err, TDB_SHM_ERRLEN, "\"%.71s\" belongs to %.48s, but the server runs as %.48s (TDB_SERVER_USER): refused",
				 name, owner, expect);
	}
}

bool
tdb_shm_untrusted(const char *name, bool own)
{
	char		path[TDB_SHM_NAME_MAX + 40];
	struct stat st;
	int			save = errno;
	bool		bad;

	shm_path(path, sizeof(path), name);
	bad = lstat(path, &st) == 0 &&
		(!S_ISREG(st.st_mode) || (own ? st.st_uid != geteuid() : !tdb_shm_owner_trusted(st.st_uid)));
	errno = save;
	return bad;
}

int
tdb_shm_errno_result(void)
{
	if (errno == ENOENT)
		return TDB_SHM_ENOENT;
	if (errno == EACCES || errno == EPERM)
		return TDB_SHM_EACCES;
	return TDB_SHM_ESYS;
}

/*
 * mmap(NULL, size, prot, MAP_SHARED, fd, 0) at an address aligned to 2 MB
 * when the object is at least that large: where the page cache holds an
 * object in huge pages (a /dev/shm mounted with huge=within_size or
 * huge=always, or an object collapsed by MADV_COLLAPSE) a process maps them
 * with one TLB entry per 2 MB only if the address is aligned as the file
 * offset is.  The kernel aligns on its own only objects whose size is a
 * multiple of 2 MB.  The reservation around the object is given back.
 */
static void *
map_huge_aligned(int fd, size_t size, int prot)
{
	const size_t huge = (size_t) 2 << 20;
	size_t		page = (size_t) sysconf(_SC_PAGESIZE);
	char	   *r,
			   *a,
			   *end;

	if (size < huge)
		return mmap(NULL, size, prot, MAP_SHARED, fd, 0);
	r = mmap(NULL, size + huge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return MAP_FAILED;
	a = (char *) (((uintptr_t) r + huge - 1) & ~(uintptr_t) (huge - 1));
	if (mmap(a, size, prot, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED)
	{
		int			save = errno;

		munmap(r, size + huge);
		errno = save;
		return MAP_FAILED;
	}
	if (a > r)
		munmap(r, (size_t) (a - r));
	end = a + (size + page - 1) / page * page;
	if (end < r + size + huge)
		munmap(end, (size_t) (r + size + huge - end));
	return a;
}

int
tdb_shm_map(const char *name, bool writable, bool own, size_t min_size, void **addr, size_t *size)
{
	return tdb_shm_map_fd(name, writable, own, min_size, addr, size, NULL);
}

int
tdb_shm_map_fd(const char *name, bool writable, bool own, size_t min_size, void **addr,
			   size_t *size, int *fd_out)
{
	int			fd;
	struct stat st;
	void	   *p;

	/*
	 * O_NONBLOCK: another local user can make a FIFO under the name, and
	 * open() of a FIFO for reading waits for a writer, deaf to cancel and
	 * SIGTERM (it is restarted); with it, open() returns and fstat() below
	 * refuses what is not a regular file.  It changes nothing for the
	 * regular files we map.
	 */
	fd = shm_open(name, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0);
	if (fd < 0)
	{
		/* not ours to open: say whose it is rather than blame the permissions */
		if ((errno == EACCES || errno == ELOOP) && tdb_shm_untrusted(name, own))
		{
			errno = EPERM;
			return TDB_SHM_ETAKEN;
		}
		return tdb_shm_errno_result();
	}
	if (fstat(fd, &st) != 0)
	{
		int			save = errno;

		close(fd);
		errno = save;
		return TDB_SHM_ESYS;
	}
	if (!S_ISREG(st.st_mode) || (st.st_mode & S_IWOTH) != 0 ||
		(own ? st.st_uid != geteuid() : !tdb_shm_owner_trusted(st.st_uid)))
	{
		close(fd);
		errno = EPERM;
		return TDB_SHM_ETAKEN;
	}
	if ((size_t) st.st_size < min_size || st.st_size == 0)
	{
		close(fd);
		return TDB_SHM_EINVAL;
	}
	p = map_huge_aligned(fd, (size_t) st.st_size, writable ? PROT_READ | PROT_WRITE : PROT_READ);
	if (p == MAP_FAILED)
	{
		int			save = errno;

		close(fd);
		errno = save;
		return tdb_shm_errno_result();
	}
	if (fd_out != NULL)
		*fd_out = fd;
	else
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
tdb_shm_create_fd(const char *name, size_t size, size_t reserve, mode_t mode, gid_t gid, void **addr,
				  const char **what)
{
	int			fd;
	int			rc;
	void	   *p;

	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
	{
		*what = "cannot create";
		return -1;
	}
	/* the umask must not decide the mode; the group is set before it opens up */
	if ((gid != (gid_t) -1 && fchown(fd, (uid_t) -1, gid) != 0) || fchmod(fd, mode) != 0 ||
		ftruncate(fd, (off_t) size) != 0)
	{
		*what = "cannot size";
		goto fail;
	}
	/*
	 * Reserve the pages now: tmpfs allocates on first write, and running out
	 * of /dev/shm there would be a SIGBUS instead of an error.
	 */
	if (reserve > 0 && (rc = posix_fallocate_retry(fd, (off_t) reserve)) != 0)
	{
		errno = rc;
		*what = "cannot reserve the header of";
		goto fail;
	}
	p = map_huge_aligned(fd, size, PROT_READ | PROT_WRITE);
	if (p == MAP_FAILED)
	{
		*what = "cannot map";
		goto fail;
	}
	*addr = p;
	return fd;

fail:
	rc = errno;
	close(fd);
	shm_unlink(name);
	errno = rc;
	return -1;
}

int
tdb_shm_create(const char *name, size_t size, gid_t gid, bool group_write, void **addr)
{
	const char *what;
	int			fd;

	shm_unlink(name);			/* ours (a dead instance's); another user's stays */
	fd = tdb_shm_create_fd(name, size, size,
						   gid == (gid_t) -1 ? 0600 : group_write ? 0660 : 0640, gid, addr, &what);
	if (fd < 0)
		return errno == EEXIST ? TDB_SHM_ETAKEN : tdb_shm_errno_result();
	close(fd);
	return TDB_SHM_OK;
}

size_t
tdb_shm_make_huge(void *addr, size_t size, int budget_ms)
{
	const uintptr_t huge = (uintptr_t) 2 << 20;
	uintptr_t	from = ((uintptr_t) addr + huge - 1) & ~(huge - 1);
	uintptr_t	to = ((uintptr_t) addr + size) & ~(huge - 1);
	size_t		done = 0;
	struct timespec t0,
				t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	/*
	 * A page at a time, to count them and to keep to the budget.  No kernel
	 * support (EINVAL), no memory (ENOMEM) or no room in the memory cgroup
	 * (EBUSY): stop, the next pages would fail the same way after as long a
	 * try.  EAGAIN (a page briefly locked or under writeback): once more.
	 */
	for (uintptr_t p = from; addr != NULL && p < to; p += huge)
	{
		int			rc = madvise((void *) p, huge, MADV_COLLAPSE);

		if (rc != 0 && errno == EAGAIN)
			rc = madvise((void *) p, huge, MADV_COLLAPSE);
		if (rc == 0)
			done += huge;
		else if (errno == EINVAL || errno == ENOMEM || errno == EBUSY)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= budget_ms)
			break;
	}
	return done;
}

void
tdb_shm_unmap(void *addr, size_t size)
{
	if (addr != NULL && size > 0)
		munmap(addr, size);
}

/* An OFD lock request on byte idx: F_OFD_SETLK or F_OFD_GETLK. */
static int
slot_lock(int fd, int cmd, short type, uint32_t idx, struct flock *fl)
{
	int			rc;

	memset(fl, 0, sizeof(*fl));
	fl->l_type = type;
	fl->l_whence = SEEK_SET;
	fl->l_start = (off_t) idx;
	fl->l_len = 1;
	do
		rc = fcntl(fd, cmd, fl);
	while (rc != 0 && errno == EINTR);
	return rc;
}

int
tdb_slot_claim(int fd, TdbSlotsHeader *slots, uint32_t nslots, int32_t pid)
{
	struct flock fl;

	for (uint32_t i = 0; i < nslots; i++)
	{
		if (slot_lock(fd, F_OFD_SETLK, F_WRLCK, i, &fl) != 0)
			continue;			/* a live reader has it (or the kernel said no) */
		/* ours until released: whatever a dead owner left there is void */
		atomic_store_explicit(&slots->slots[i].pin, 0, memory_order_seq_cst);
		atomic_store_explicit(&slots->slots[i].pid, pid, memory_order_relaxed);
		return (int) i;
	}
	return -1;
}

void
tdb_slot_release(int fd, TdbSlotsHeader *slots, uint32_t idx)
{
	struct flock fl;

	atomic_store_explicit(&slots->slots[idx].pin, 0, memory_order_release);
	atomic_store_explicit(&slots->slots[idx].pid, 0, memory_order_relaxed);
	slot_lock(fd, F_OFD_SETLK, F_UNLCK, idx, &fl);
}

bool
tdb_slot_alive(int fd, uint32_t idx)
{
	struct flock fl;

	if (slot_lock(fd, F_OFD_GETLK, F_WRLCK, idx, &fl) != 0)
		return true;
	return fl.l_type != F_UNLCK;
}

int
tdb_prefix_lock(const char *prefix, int *fd_out, char *err)
{
	char		name[TDB_SHM_NAME_MAX + 24];
	struct flock fl;

	tdb_shm_name(name, prefix, "lock");
	for (int attempt = 0; attempt < 8; attempt++)
	{
		struct stat st_fd;
		struct stat st_name;
		char		path[TDB_SHM_NAME_MAX + 40];
		int			fd;

		/*
		 * Another user's file under this name is no server of ours (those
		 * run as our user) but someone who got there first: never open it,
		 * let alone wait for its lock.
		 */
		if (tdb_shm_name_taken(name, err))
			return TDB_SHM_ETAKEN;
		fd = shm_open(name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0)
		{
			int			save = errno;

			if (tdb_shm_name_taken(name, err))
				return TDB_SHM_ETAKEN;
			errno = save;
			snprintf(err, TDB_SHM_ERRLEN, "cannot open \"%s\": %s", name, strerror(errno));
			return tdb_shm_errno_result();
		}
		if (fstat(fd, &st_fd) != 0 || !S_ISREG(st_fd.st_mode) || st_fd.st_uid != geteuid())
		{
			close(fd);
			if (tdb_shm_name_taken(name, err))
				return TDB_SHM_ETAKEN;
			continue;			/* replaced meanwhile: look again */
		}
		if (slot_lock(fd, F_OFD_SETLK, F_WRLCK, 0, &fl) != 0)
		{
			int			save = errno;

			close(fd);
			if (save == EAGAIN || save == EACCES)
			{
				snprintf(err, TDB_SHM_ERRLEN, "shared memory prefix \"%s\" is in use by another running server (it holds the lock on \"%s\"); give each server its own trafficdb.shm_name",
						 prefix, name);
				return TDB_SHM_EBUSY;
			}
			errno = save;
			snprintf(err, TDB_SHM_ERRLEN, "cannot lock \"%s\": %s", name, strerror(errno));
			return TDB_SHM_ESYS;
		}

		/*
		 * The name must still be the file we locked: an exiting owner unlinks
		 * it, and a lock on an unlinked file protects nothing.
		 */
		snprintf(path, sizeof(path), "/dev/shm%s", name);
		if (fstat(fd, &st_fd) == 0 && stat(path, &st_name) == 0 &&
			st_fd.st_ino == st_name.st_ino && st_fd.st_dev == st_name.st_dev)
		{
			*fd_out = fd;
			return TDB_SHM_OK;
		}
		close(fd);
	}
	snprintf(err, TDB_SHM_ERRLEN, "\"%s\" keeps being replaced while locking it", name);
	return TDB_SHM_EBUSY;
}

int
tdb_control_check(const TdbControl *ctl, size_t size)
{
	if (size < sizeof(TdbControl) || ctl->magic != TDB_CTL_MAGIC ||
		ctl->version != TDB_SHM_VERSION || ctl->header_size != sizeof(TdbControl))
		return TDB_SHM_EINVAL;
	if (ctl->nslots > (1u << 20) || memchr(ctl->prefix, '\0', sizeof(ctl->prefix)) == NULL)
		return TDB_SHM_EINVAL;
	return TDB_SHM_OK;
}

int
tdb_slots_check(const TdbSlotsHeader *slots, size_t size, const TdbControl *ctl)
{
	/* sizes come from the control block, which only the daemon writes */
	if (size < tdb_slots_size(ctl->nslots) || slots->magic != TDB_SLOTS_MAGIC ||
		slots->instance_id != ctl->instance_id)
		return TDB_SHM_EINVAL;
	return TDB_SHM_OK;
}
