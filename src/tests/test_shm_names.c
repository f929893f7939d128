/*
 * test_shm_names.c
 *	  Names in /dev/shm are public: whatever is found under a name the
 *	  server needs and did not make must never stop it or be mapped.  As one
 *	  OS user these tests hold names with things the server cannot remove or
 *	  trust (directories, symbolic links); test/security_names.sh does the
 *	  same as another OS user.
 */
#include "unit.h"
#include "reader.h"
#include "writer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"

static void
names_prefix(char *out, size_t len, const char *what)
{
	snprintf(out, len, "/tdbnames.%d.%s", (int) getpid(), what);
}

/* Hold "<prefix>.<suffix>" with a directory: nobody can shm_unlink it. */
static void
hold_dir(const char *prefix, const char *suffix)
{
	char		path[256];

	snprintf(path, sizeof(path), "/dev/shm%s.%s", prefix, suffix);
	(void) unlink(path);		/* a lock file a refused open left */
	(void) mkdir(path, 0700);
}

static void
release_dir(const char *prefix, const char *suffix)
{
	char		path[256];

	snprintf(path, sizeof(path), "/dev/shm%s.%s", prefix, suffix);
	(void) rmdir(path);
}

/*
 * Segment names taken while the server runs (the issue: "<prefix>.3 ...
 * .299" created, then the next new object failed) are skipped: the next
 * objects get free names, readers find them through the control block.
 */
UNIT_TEST(test_shm_names_taken_segments_are_skipped)
{
	char		prefix[64];
	char		seq[32];
	TdbWriter	w;
	char		err[TDB_ERRLEN];
	uint32_t	map_seg;
	void	   *map_addr;
	uint64_t	count;
	uint64_t	from;
	TdbReader	r;
	TdbSnapshot s;

	names_prefix(prefix, sizeof(prefix), "seg");
	CHECK_EQ_U64(open_published(&w, prefix, 4, 1, &map_seg, &map_addr, NULL), TDB_SHM_OK);
	from = w.ctl->next_seq;
	for (uint64_t i = from; i < from + 300; i++)
	{
		snprintf(seq, sizeof(seq), "%llu", (unsigned long long) i);
		hold_dir(prefix, seq);
	}
	/* a traffic object of another size needs a new name */
	CHECK_EQ_U64(publish_traffic_sized(&w, map_seg, 2, 1 << 20), TDB_SHM_OK);
	CHECK(w.names_skipped > 0);
	CHECK(strstr(w.skipped_err, prefix) != NULL);
	CHECK(strstr(w.skipped_err, "is taken") != NULL);
	CHECK(w.ctl->next_seq > from + 300);
	/* and a new map as well */
	CHECK_EQ_U64(publish_map(&w, &map_seg, &map_addr, &count), TDB_SHM_OK);
	CHECK_EQ_U64(publish_traffic(&w, map_seg, 3), TDB_SHM_OK);
	CHECK_EQ_U64(tdb_reader_open(&r, prefix, NULL, TDB_VALIDATE_FULL, err), TDB_SHM_OK);
	CHECK_EQ_U64(tdb_reader_acquire(&r, &s, err), TDB_SHM_OK);
	CHECK(snapshot_intact(&s, 3));
	tdb_reader_release(&r);
	tdb_reader_close(&r);
	tdb_writer_close(&w, true);
	for (uint64_t i = from; i < from + 300; i++)
	{
		snprintf(seq, sizeof(seq), "%llu", (unsigned long long) i);
		release_dir(prefix, seq);
	}
}

/*
 * A fixed name held by something the server did not make: the writer
 * refuses with TDB_SHM_ETAKEN naming the file (the daemon then publishes
 * under private names), instead of failing to create it on every start.
 */
UNIT_TEST(test_shm_names_taken_fixed_name_is_named)
{
	static const char *const fixed[] = {"ctl", "readers", "subs", "writers", "lock"};
	char		prefix[64];
	TdbWriter	w;
	TdbWriterOpenInfo info;
	char		err[TDB_ERRLEN];
	int			rc;

	names_prefix(prefix, sizeof(prefix), "fixed");
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
	{
		char		want[128];

		hold_dir(prefix, fixed[i]);
		err[0] = '\0';
		rc = test_writer_open(&w, prefix, 4, 0, &info, err);
		CHECK_EQ_U64(rc, TDB_SHM_ETAKEN);
		if (rc == TDB_SHM_OK)
		{
			printf("# %s: opened anyway\n", fixed[i]);
			tdb_writer_close(&w, true);
		}
		snprintf(want, sizeof(want), "\"/dev/shm%s.%s\" is taken", prefix, fixed[i]);
		CHECK(strstr(err, want) != NULL);
		CHECK(strstr(err, "trafficdb.shm_name") != NULL);
		release_dir(prefix, fixed[i]);
	}
	/* freed: the writer starts */
	CHECK_EQ_U64(test_writer_open(&w, prefix, 4, 0, &info, err), TDB_SHM_OK);
	tdb_writer_close(&w, true);
}

/*
 * <prefix>.lock as a symbolic link (or held by another user): the prefix
 * lock says "taken" and whose, never "another running server".
 */
UNIT_TEST(test_shm_names_foreign_lock_is_not_a_server)
{
	char		prefix[64];
	char		path[256];
	char		err[TDB_SHM_ERRLEN];
	int			fd = -1;

	names_prefix(prefix, sizeof(prefix), "lock");
	snprintf(path, sizeof(path), "/dev/shm%s.lock", prefix);
	CHECK(symlink("/dev/null", path) == 0);
	err[0] = '\0';
	CHECK_EQ_U64(tdb_prefix_lock(prefix, &fd, err), TDB_SHM_ETAKEN);
	CHECK(fd < 0);
	CHECK(strstr(err, path) != NULL);
	CHECK(strstr(err, "another running server") == NULL);
	unlink(path);
	CHECK_EQ_U64(tdb_prefix_lock(prefix, &fd, err), TDB_SHM_OK);
	close(fd);
	unlink(path);
}

/* Who an external process takes for the server's user. */
UNIT_TEST(test_shm_names_owner_rule)
{
	char	   *saved = getenv("TDB_SERVER_USER") ? strdup(getenv("TDB_SERVER_USER")) : NULL;
	char		buf[32];
	uid_t		other = geteuid() == 4242 ? 4343 : 4242;

	/* its own user always: nobody else can make a file of that owner */
	CHECK(tdb_shm_owner_trusted(geteuid()));
	snprintf(buf, sizeof(buf), "%u", (unsigned) other);
	setenv("TDB_SERVER_USER", buf, 1);
	CHECK(tdb_shm_owner_trusted(other));
	CHECK(!tdb_shm_owner_trusted(other + 1));
	setenv("TDB_SERVER_USER", "root", 1);
	CHECK(tdb_shm_owner_trusted(0));
	CHECK(!tdb_shm_owner_trusted(other));
	setenv("TDB_SERVER_USER", "no-such-user-tdb", 1);
	CHECK(!tdb_shm_owner_trusted(other));
	if (saved)
	{
		setenv("TDB_SERVER_USER", saved, 1);
		free(saved);
	}
	else
		unsetenv("TDB_SERVER_USER");
}

/*
 * An external reader finds a control block it cannot trust (here a
 * symbolic link to a file the test made, as an impostor would plant): it
 * maps nothing and says why, naming the file.
 */
UNIT_TEST(test_shm_names_reader_refuses_untrusted_ctl)
{
	char		prefix[64];
	char		path[256];
	TdbReader	r;
	char		err[TDB_ERRLEN];

	names_prefix(prefix, sizeof(prefix), "rd");
	hold_dir(prefix, "ctl");
	err[0] = '\0';
	CHECK(tdb_reader_open(&r, prefix, NULL, TDB_VALIDATE_FULL, err) != TDB_SHM_OK);
	snprintf(path, sizeof(path), "%s.ctl", prefix);
	CHECK(strstr(err, path) != NULL);
	release_dir(prefix, "ctl");
}
