/*
 * crash_writer.c
 *	  The crash loop's feed writer (test/crash_loop.pl): commits batches of
 *	  rows into trafficdb.feed, one transaction each, and records the fate of
 *	  every batch in a log file outside the database, a COMMITTED one only
 *	  after COMMIT returned.  The server is killed under it; it reconnects
 *	  and goes on with the next batch number (never reused).
 *
 *	  crash_writer CONNINFO LOG CTLDIR SEED [SLEEP_US [MAX_SECONDS]]
 *
 * Log lines, one per batch that reached the server:
 *	  C n s		committed: COMMIT returned success
 *	  U n s		in doubt: COMMIT was sent and the connection died before its
 *				answer (committed or not: the loop looks for n in table
 *				crash_batches, which each batch's transaction also writes)
 *	  R n s		rolled back: failed before COMMIT, or COMMIT answered an error
 * where s is the set batch n wrote (see crash_batch.h).
 *
 * Control, through files in CTLDIR, checked between batches (never inside a
 * transaction): "pause" makes it idle and write "paused" (holding the next
 * batch number); removing "pause" resumes it; "stop" makes it exit.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "crash_batch.h"

static char ctl_pause[4096],
			ctl_paused[4096],
			ctl_stop[4096];

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int
exists(const char *path)
{
	return access(path, F_OK) == 0;
}

/* One whole line per write(2), so the loop never reads half a record. */
static void
log_line(int fd, char kind, uint64_t n, int set)
{
	char		line[64];
	int			len = snprintf(line, sizeof(line), "%c %" PRIu64 " %d\n", kind, n, set);

	if (write(fd, line, (size_t) len) != len)
	{
		perror("crash_writer: log");
		exit(1);
	}
}

/* Write the "paused" file atomically (rename), naming the next batch. */
static void
say_paused(uint64_t next)
{
	char		tmp[4200];
	FILE	   *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", ctl_paused);
	f = fopen(tmp, "w");
	if (f == NULL || fprintf(f, "%" PRIu64 "\n", next) < 0 || fclose(f) != 0 || rename(tmp, ctl_paused) != 0)
	{
		perror("crash_writer: paused file");
		exit(1);
	}
}

static int
exec_ok(PGconn *conn, const char *sql, const char *tag)
{
	PGresult   *res = PQexec(conn, sql);
	int			ok = PQresultStatus(res) == PGRES_COMMAND_OK && strcmp(PQcmdStatus(res), tag) == 0;

	PQclear(res);
	return ok;
}

int
main(int argc, char **argv)
{
	const char *conninfo;
	int			logfd;
	unsigned int seed;
	long		sleep_us = 1000;
	double		max_seconds = 3600,
				end;
	PGconn	   *conn = NULL;
	uint64_t	next = 1;
	unsigned long long committed = 0,
				indoubt = 0,
				rolledback = 0,
				connects = 0,
				connect_failures = 0;

	if (argc < 5 || argc > 7)
	{
		fprintf(stderr, "usage: crash_writer CONNINFO LOG CTLDIR SEED [SLEEP_US [MAX_SECONDS]]\n");
		return 2;
	}
	conninfo = argv[1];
	snprintf(ctl_pause, sizeof(ctl_pause), "%s/pause", argv[3]);
	snprintf(ctl_paused, sizeof(ctl_paused), "%s/paused", argv[3]);
	snprintf(ctl_stop, sizeof(ctl_stop), "%s/stop", argv[3]);
	seed = (unsigned int) strtoul(argv[4], NULL, 10);
	if (argc > 5)
		sleep_us = atol(argv[5]);
	if (argc > 6)
		max_seconds = atof(argv[6]);
	logfd = open(argv[2], O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (logfd < 0)
	{
		perror("crash_writer: open log");
		return 1;
	}
	/* the server dying under us closes the socket: an error, not a signal */
	signal(SIGPIPE, SIG_IGN);

	end = now_s() + max_seconds;
	while (now_s() < end)
	{
		int			set;
		int			lo,
					mid,
					hi;
		char		inc[32];
		char		sql[512];
		PGresult   *res;
		int			ok;

		if (exists(ctl_stop))
			break;
		if (exists(ctl_pause))
		{
			if (!exists(ctl_paused))
				say_paused(next);
			usleep(5000);
			continue;
		}
		if (exists(ctl_paused))
			unlink(ctl_paused);

		if (conn == NULL || PQstatus(conn) != CONNECTION_OK)
		{
			if (conn)
				PQfinish(conn);
			conn = PQconnectdb(conninfo);
			if (PQstatus(conn) != CONNECTION_OK)
			{
				connect_failures++;
				PQfinish(conn);
				conn = NULL;
				usleep(50000);	/* the server restarts: try again soon */
				continue;
			}
			connects++;
		}

		set = (int) (rand_r(&seed) % CRASH_SETS);
		lo = CRASH_FIRST_ID + set * CRASH_SET_SIZE;
		hi = lo + CRASH_SET_SIZE - 1;
		mid = lo + CRASH_SET_SIZE / 2;
		crash_incident(next, inc, sizeof(inc));

		/* two statements, so a crash can also land between them */
		ok = exec_ok(conn, "BEGIN", "BEGIN");
		for (int half = 0; ok && half < 2; half++)
		{
			snprintf(sql, sizeof(sql),
					 "INSERT INTO trafficdb.feed (location_id, speed_kmh, free_flow_kmh, congestion, "
					 "confidence, incident) SELECT id, %g, %g, %d, %d, '%s' FROM generate_series(%d, %d) id",
					 (double) crash_speed(next), (double) crash_free_flow(next),
					 crash_congestion(next), crash_confidence(next), inc,
					 half == 0 ? lo : mid, half == 0 ? mid - 1 : hi);
			res = PQexec(conn, sql);
			ok = PQresultStatus(res) == PGRES_COMMAND_OK &&
				strcmp(PQcmdStatus(res), "INSERT 0 0") != 0;
			PQclear(res);
		}
		if (ok)
		{
			/* the batch's own record, so an in-doubt COMMIT can be resolved */
			snprintf(sql, sizeof(sql), "INSERT INTO crash_batches VALUES (%" PRIu64 ", %d)", next, set);
			ok = exec_ok(conn, sql, "INSERT 0 1");
		}
		if (!ok)
		{
			/* COMMIT never sent: this batch cannot have committed */
			log_line(logfd, 'R', next, set);
			rolledback++;
			if (PQstatus(conn) == CONNECTION_OK)
				PQclear(PQexec(conn, "ROLLBACK"));
		}
		else if (exec_ok(conn, "COMMIT", "COMMIT"))
		{
			log_line(logfd, 'C', next, set);
			committed++;
		}
		else if (PQstatus(conn) == CONNECTION_OK)
		{
			/* the server answered COMMIT with an error: rolled back */
			log_line(logfd, 'R', next, set);
			rolledback++;
		}
		else
		{
			log_line(logfd, 'U', next, set);
			indoubt++;
		}
		next++;
		if (sleep_us > 0)
			usleep((useconds_t) sleep_us);
	}
	if (conn)
		PQfinish(conn);
	printf("batches=%" PRIu64 " committed=%llu indoubt=%llu rolledback=%llu connects=%llu connect_failures=%llu\n",
		   next - 1, committed, indoubt, rolledback, connects, connect_failures);
	return 0;
}
