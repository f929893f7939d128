/*
 * test_busguard.c
 *	  SIGBUS-safe mappings (src/busguard.h): a registered mapping whose file
 *	  shrinks reads zeros and is marked broken; any other SIGBUS still kills.
 */
#include "unit.h"
#include "busguard.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* A shared memory object of pages pages, filled with 0x5a, mapped read-write; its fd in *fd. */
static volatile unsigned char *
make_object(const char *name, int pages, int *fd)
{
	void	   *p;
	size_t		len = (size_t) pages * 4096;

	shm_unlink(name);
	*fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	CHECK(*fd >= 0);
	if (*fd < 0)
		return NULL;
	shm_unlink(name);
	CHECK(ftruncate(*fd, (off_t) len) == 0);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	CHECK(p != MAP_FAILED);
	if (p == MAP_FAILED)
		return NULL;
	memset(p, 0x5a, len);
	return p;
}

UNIT_TEST(test_busguard_truncated_mapping_reads_zeros)
{
	char		name[64];
	int			fd;
	volatile unsigned char *p;
	int			h;
	unsigned long before = tdb_bus_repairs();

	snprintf(name, sizeof(name), "/tdbbus.%d.a", (int) getpid());
	p = make_object(name, 3, &fd);
	if (p == NULL)
		return;
	h = tdb_bus_guard((void *) p, 3 * 4096, PROT_READ | PROT_WRITE);
	CHECK(h > 0);
	CHECK(!tdb_bus_broken(h));
	CHECK_EQ_U64(p[4096 + 7], 0x5a);
	/* a member of the group truncates it: the next access would be a SIGBUS */
	CHECK(ftruncate(fd, 0) == 0);
	CHECK_EQ_U64(p[2 * 4096 + 1], 0);	/* the read retried on zero pages */
	CHECK(tdb_bus_broken(h));
	CHECK_EQ_U64(tdb_bus_repairs(), before + 1);
	p[5] = 1;					/* and writes land in private pages */
	CHECK_EQ_U64(p[5], 1);
	tdb_bus_unguard(h);
	CHECK(!tdb_bus_broken(h));
	munmap((void *) p, 3 * 4096);
	close(fd);
	CHECK(!tdb_bus_broken(0));
	tdb_bus_unguard(0);			/* no handle: nothing */
}

UNIT_TEST(test_busguard_other_faults_still_kill)
{
	pid_t		pid = fork();
	int			status = 0;

	CHECK(pid >= 0);
	if (pid == 0)
	{
		char		name[64];
		int			fd,
					fd2;
		volatile unsigned char *guarded,
				   *plain;

		snprintf(name, sizeof(name), "/tdbbus.%d.b", (int) getpid());
		guarded = make_object(name, 1, &fd);
		snprintf(name, sizeof(name), "/tdbbus.%d.c", (int) getpid());
		plain = make_object(name, 1, &fd2);
		if (guarded == NULL || plain == NULL || tdb_bus_guard((void *) guarded, 4096, PROT_READ | PROT_WRITE) == 0)
			_exit(2);
		if (ftruncate(fd2, 0) != 0)
			_exit(2);
		(void) plain[10];		/* not registered: the default action, as without the guard */
		_exit(0);
	}
	waitpid(pid, &status, 0);
#ifdef __SANITIZE_ADDRESS__
	/* the previous handler is ASan's: it reports the BUS and exits 1 */
	CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS) || (WIFEXITED(status) && WEXITSTATUS(status) == 1));
#else
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS);
#endif
	if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS))
		printf("# status %d\n", status);
}
