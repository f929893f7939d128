/*
 * crash_putter.c
 *	  The crash loop's ring writer (test/crash_loop.pl): puts traffic through
 *	  libtrafficdb's writers' ring (trafficdb_put, public API only) for a set
 *	  of locations no other writer touches, while the server (and the putter
 *	  itself) is killed around it, and records outside the database what it
 *	  put and what the library acknowledged.
 *
 *	  crash_putter NAME ACKS PUTS CTLDIR ID FIRST_ID COUNT SEED MAX_SECONDS STATS
 *
 * It owns locations FIRST_ID .. FIRST_ID + COUNT - 1 and gives each update a
 * counter c that is strictly increasing per location, also across restarts
 * (it continues from the PUTS file): c is the update's observed_at (Unix
 * microseconds), so the daemon's newest-wins rule keeps the highest c, and
 * every field is a function of c and the location (put_value() below;
 * test/crash_loop.pl checks the same functions), the incident naming c:
 * a published value is either one that was put or is caught as invented.
 *
 * In rotation: a TRAFFICDB_SYNC trafficdb_put of one location, a
 * TRAFFICDB_SYNC trafficdb_put_many of 2 to 8, and a burst of TRAFFICDB_ASYNC
 * puts (every fifth a flood that fills the lane: TRAFFICDB_BUSY), every
 * other burst followed by trafficdb_sync().
 *
 * PUTS, written with write() (a kill -9 loses none of it):
 *	  P loc c	about to put it (before the call)
 *	  A loc c	an ASYNC put of it returned TRAFFICDB_OK (in shared memory)
 * ACKS, written with write() and fdatasync() once the library acknowledged:
 *	  S loc c	a SYNC put or put_many holding it returned TRAFFICDB_OK
 *	  Y loc c	an ASYNC put of it, then trafficdb_sync() returned TRAFFICDB_OK
 * Every S and Y update is a promise: after any crash, the published value of
 * loc must be at least as new as c.
 *
 * Codes: TRAFFICDB_BUSY waits trafficdb_retry_after_us() and puts again;
 * TRAFFICDB_LOST (the library re-put it 4 times, a crash lost it each time)
 * puts again; TRAFFICDB_TIMEOUT waits with trafficdb_sync() (the update is
 * still queued); TRAFFICDB_STALE (an orderly stop) and the codes of a server
 * that is down or restarting close the writer and reopen it with a backoff.
 * Every loop is bounded; what is given up is counted (gave_up; interrupted:
 * given up because of SIGTERM), not acked.
 *
 * Control: the file CTLDIR/putpause makes it idle between two operations
 * (never inside a call, with every acknowledgement written; an ASYNC burst
 * ends at its next put, so that after a pause asked for during a crash only
 * the SYNC operation in flight puts, again, what it put before) and write
 * CTLDIR/putter<ID>.paused holding putpause's first line (a token, so the
 * loop never mistakes an older pause for this one); removing putpause
 * resumes it.  SIGTERM (or
 * MAX_SECONDS) makes it close its writer and exit 0, printing its counters,
 * which it also rewrites into STATS about every 200 ms.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <trafficdb.h>

#define MAX_LOCS		64
#define MAX_BATCH		8
#define MAX_BURST		16
#define FLOOD			150		/* ASYNC puts of a flood: 300 slots, more than a lane of 128 holds */
#define PUT_ATTEMPTS	400		/* tries of one operation after LOST or a reopen, each with a wait */
#define SYNC_ROUNDS		12		/* trafficdb_sync calls of TIMEOUT_MS after a TIMEOUT */
#define OPEN_ATTEMPTS	300		/* trafficdb_writer_open tries, backoff 10 ms doubling to 500 ms */
#define TIMEOUT_MS		5000
#define OP_SECONDS		120		/* and at most this long for one update or batch (BUSY: only this) */

static volatile sig_atomic_t stop_requested = 0;

static const char *shm_name;
static int	acks_fd = -1,
			puts_fd = -1;
static char ctl_pause[4096],
			ctl_paused[4096],
			stats_path[4096];
static uint64_t first_id;
static int	nlocs;
static int64_t last_c[MAX_LOCS];	/* per location: the highest counter put */
static trafficdb_writer *w = NULL;
static unsigned int seed;

static struct
{
	unsigned long long opens,
				open_noslot,	/* trafficdb_writer_open said NOSLOT: no lane free */
				open_failures,	/* other failed opens (server down, restarting) */
				first_open_tries,	/* how many tries the first open of this process took */
				sync_puts,
				sync_batches,
				async_puts,
				acked_sync,		/* S lines */
				acked_by_sync,	/* Y lines */
				busy,
				lost,			/* TRAFFICDB_LOST from a SYNC put or put_many */
				sync_lost,		/* TRAFFICDB_LOST from trafficdb_sync */
				timeouts,
				stale,
				reopens,
				other_errors,
				gave_up,
				interrupted;
} C;

static void
on_term(int sig)
{
	(void) sig;
	stop_requested = 1;
}

/* Is a pause requested (CTLDIR/putpause exists)? */
static int
pause_requested(void)
{
	return access(ctl_pause, F_OK) == 0;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int64_t
realtime_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void
sleep_us(long us)
{
	if (us > 0)
		usleep((useconds_t) us);
}

/* The values of update c of location loc: test/crash_loop.pl's put_value() checks them. */
static void
put_value(uint64_t loc, int64_t c, trafficdb_update *u, char *incident, size_t len)
{
	memset(u, 0, sizeof(*u));
	u->location_id = loc;
	u->observed_at_us = c;
	u->speed_kmh = (float) (c % 397);
	u->free_flow_kmh = (float) ((c + (int64_t) loc) % 397);
	u->congestion = (uint8_t) ((c / 7) % 5);
	u->confidence = (uint8_t) ((c / 11) % 101);
	u->incident_len = (uint32_t) snprintf(incident, len, "p%" PRId64, c);
	u->incident = incident;
	u->has = TRAFFICDB_HAS_SPEED | TRAFFICDB_HAS_FREE_FLOW | TRAFFICDB_HAS_CONGESTION |
		TRAFFICDB_HAS_CONFIDENCE | TRAFFICDB_HAS_INCIDENT;
}

/* The next counter of location k: its observed_at, strictly above the last one. */
static int64_t
next_counter(int k)
{
	int64_t		c = realtime_us();

	if (c <= last_c[k])
		c = last_c[k] + 1;
	last_c[k] = c;
	return c;
}

static void
write_all(int fd, const char *buf, size_t len, const char *what)
{
	while (len > 0)
	{
		ssize_t		n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
		{
			fprintf(stderr, "crash_putter: write %s: %s\n", what, strerror(errno));
			exit(1);
		}
		buf += n;
		len -= (size_t) n;
	}
}

/* Lines "<kind> loc c" for n updates, in one write (and fdatasync for ACKS). */
static void
log_updates(int fd, char kind, const trafficdb_update *u, size_t n)
{
	static char buf[FLOOD * 48];
	size_t		len = 0;

	for (size_t i = 0; i < n; i++)
		len += (size_t) snprintf(buf + len, sizeof(buf) - len, "%c %" PRIu64 " %" PRId64 "\n", kind,
								 u[i].location_id, u[i].observed_at_us);
	write_all(fd, buf, len, fd == acks_fd ? "acks" : "puts");
	if (fd == acks_fd && fdatasync(fd) != 0)
	{
		fprintf(stderr, "crash_putter: fdatasync acks: %s\n", strerror(errno));
		exit(1);
	}
}

static void
format_counters(char *buf, size_t len)
{
	snprintf(buf, len,
			 "opens=%llu open_noslot=%llu open_failures=%llu first_open_tries=%llu sync_puts=%llu "
			 "sync_batches=%llu async_puts=%llu acked_sync=%llu acked_by_sync=%llu busy=%llu lost=%llu "
			 "sync_lost=%llu timeouts=%llu stale=%llu reopens=%llu other_errors=%llu gave_up=%llu interrupted=%llu\n",
			 C.opens, C.open_noslot, C.open_failures, C.first_open_tries, C.sync_puts, C.sync_batches,
			 C.async_puts, C.acked_sync, C.acked_by_sync, C.busy, C.lost, C.sync_lost, C.timeouts, C.stale,
			 C.reopens, C.other_errors, C.gave_up, C.interrupted);
}

static void
write_stats(void)
{
	char		tmp[4200];
	char		line[1024];
	FILE	   *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", stats_path);
	format_counters(line, sizeof(line));
	f = fopen(tmp, "w");
	if (f == NULL)
		return;
	fputs(line, f);
	if (fclose(f) == 0)
		rename(tmp, stats_path);
}

static void
maybe_write_stats(void)
{
	static double next = 0;

	if (now_s() >= next)
	{
		write_stats();
		next = now_s() + 0.2;
	}
}

/* Drop a line a kill -9 may have cut (there is none in practice: one write each). */
static void
trim_partial_line(int fd, const char *what)
{
	off_t		end = lseek(fd, 0, SEEK_END);
	char		c;

	while (end > 0)
	{
		if (pread(fd, &c, 1, end - 1) != 1)
		{
			fprintf(stderr, "crash_putter: read %s: %s\n", what, strerror(errno));
			exit(1);
		}
		if (c == '\n')
			break;
		end--;
	}
	if (ftruncate(fd, end) != 0)
	{
		fprintf(stderr, "crash_putter: truncate %s: %s\n", what, strerror(errno));
		exit(1);
	}
}

/* The highest counter put so far per location, from PUTS (a restart goes on above it). */
static void
restore_counters(const char *path)
{
	FILE	   *f = fopen(path, "r");
	char		line[128];

	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL)
	{
		char		kind;
		uint64_t	loc;
		int64_t		c;

		if (sscanf(line, "%c %" SCNu64 " %" SCNd64, &kind, &loc, &c) == 3 &&
			loc >= first_id && loc < first_id + (uint64_t) nlocs && c > last_c[loc - first_id])
			last_c[loc - first_id] = c;
	}
	fclose(f);
}

static void
close_writer(void)
{
	if (w != NULL)
	{
		trafficdb_writer_close(w);
		w = NULL;
	}
}

/* Open the writer if it is not: false after OPEN_ATTEMPTS failures or on SIGTERM. */
static int
ensure_open(void)
{
	long		backoff = 10000;

	if (w != NULL)
		return 1;
	for (int tries = 1; tries <= OPEN_ATTEMPTS && !stop_requested; tries++)
	{
		int			rc = trafficdb_writer_open(shm_name, &w);

		if (rc == TRAFFICDB_OK)
		{
			trafficdb_writer_set_timeout(w, TIMEOUT_MS);
			if (C.opens++ == 0)
				C.first_open_tries = (unsigned long long) tries;
			else
				C.reopens++;
			write_stats();
			return 1;
		}
		w = NULL;
		if (rc == TRAFFICDB_NOSLOT)
			C.open_noslot++;
		else
			C.open_failures++;
		if (rc == TRAFFICDB_PERMISSION || rc == TRAFFICDB_BADARG)
		{
			fprintf(stderr, "crash_putter: trafficdb_writer_open: %s: %s\n", trafficdb_strerror(rc),
					trafficdb_writer_errmsg(NULL));
			exit(1);
		}
		maybe_write_stats();
		sleep_us(backoff);
		backoff = backoff * 2 > 500000 ? 500000 : backoff * 2;
	}
	return 0;
}

/* After a code that is no acknowledgement: wait, maybe reopen.  Exits on a code that is our bug. */
static void
after_failure(int rc)
{
	long		us;

	switch (rc)
	{
		case TRAFFICDB_BUSY:
			C.busy++;
			us = (long) trafficdb_retry_after_us(w);
			sleep_us(us < 200 ? 200 : us > 200000 ? 200000 : us);
			return;
		case TRAFFICDB_LOST:
			C.lost++;
			return;
		case TRAFFICDB_STALE:
			C.stale++;
			close_writer();
			return;
		case TRAFFICDB_NOTFOUND:
		case TRAFFICDB_BADARG:
			fprintf(stderr, "crash_putter: put: %s: %s\n", trafficdb_strerror(rc), trafficdb_writer_errmsg(w));
			exit(1);
		default:
			/* NOTRUNNING, EMPTY, SYSTEM, ...: the server is restarting; open anew */
			C.other_errors++;
			if (C.other_errors <= 20)
				fprintf(stderr, "crash_putter: put: %s: %s\n", trafficdb_strerror(rc), trafficdb_writer_errmsg(w));
			close_writer();
			sleep_us(50000);
			return;
	}
}

/* After TRAFFICDB_TIMEOUT: trafficdb_sync until it says something else (bounded). */
static int
sync_after_timeout(void)
{
	int			rc = TRAFFICDB_TIMEOUT;

	for (int i = 0; i < SYNC_ROUNDS && rc == TRAFFICDB_TIMEOUT && !stop_requested; i++)
	{
		rc = trafficdb_sync(w, TIMEOUT_MS);
		if (rc == TRAFFICDB_TIMEOUT)
			C.timeouts++;
	}
	return rc;
}

/*
 * Put u[0..n) with TRAFFICDB_SYNC (trafficdb_put for one, else
 * trafficdb_put_many) until acknowledged; then log them as S.  The same
 * values every time: newest-wins makes a re-put harmless.
 */
static void
put_sync(const trafficdb_update *u, size_t n)
{
	double		give_up_at = now_s() + OP_SECONDS;

	log_updates(puts_fd, 'P', u, n);
	for (int attempt = 0; attempt < PUT_ATTEMPTS && !stop_requested && now_s() < give_up_at; attempt++)
	{
		int			rc;

		if (!ensure_open())
			break;
		maybe_write_stats();
		if (n == 1)
			rc = trafficdb_put(w, &u[0], TRAFFICDB_SYNC);
		else
			rc = trafficdb_put_many(w, u, n, TRAFFICDB_SYNC, NULL);
		if (rc == TRAFFICDB_TIMEOUT)
		{
			C.timeouts++;
			rc = sync_after_timeout();
		}
		if (rc == TRAFFICDB_OK)
		{
			log_updates(acks_fd, 'S', u, n);
			C.acked_sync += n;
			return;
		}
		if (rc == TRAFFICDB_BUSY)
			attempt--;			/* a full lane while the server restarts: bounded by time only */
		if (rc != TRAFFICDB_TIMEOUT)
			after_failure(rc);
	}
	if (stop_requested)
		C.interrupted += n;
	else
		C.gave_up += n;
}

/* Log the updates u[idx[0..n)] as kind into fd. */
static void
log_picked(int fd, char kind, const trafficdb_update *u, const int *idx, size_t n)
{
	static trafficdb_update pick[FLOOD];

	for (size_t i = 0; i < n; i++)
		pick[i] = u[idx[i]];
	log_updates(fd, kind, pick, n);
}

/*
 * A burst of 1 .. MAX_BURST ASYNC puts with pauses between them, or (every
 * fifth) a flood of FLOOD puts at once, more than a lane of 128 slots holds
 * (each takes two): they meet TRAFFICDB_BUSY unless the daemon drains in
 * between.  Every other burst ends with trafficdb_sync (Y for what it covers).
 */
static void
put_async_burst(int burst_no)
{
	static trafficdb_update u[FLOOD];
	static char texts[FLOOD][32];
	int			acked[FLOOD];	/* a flood's acknowledged puts: its A lines, written at its end */
	int			pending[FLOOD]; /* acknowledged on the writer open now: what trafficdb_sync covers */
	size_t		nacked = 0;
	size_t		npending = 0;
	int			flood = burst_no % 5 == 4;
	int			k = flood ? FLOOD : 1 + (int) (rand_r(&seed) % MAX_BURST);
	int			rc;

	for (int i = 0; i < k; i++)
	{
		int			loc = flood ? i % nlocs : (int) (rand_r(&seed) % (unsigned) nlocs);

		put_value(first_id + (uint64_t) loc, next_counter(loc), &u[i], texts[i], sizeof(texts[i]));
	}
	if (flood)
		log_updates(puts_fd, 'P', u, (size_t) k);	/* all before the first put */
	/* a pause ends a burst: nothing new after the loop asked (see the header) */
	for (int i = 0; i < k && !stop_requested && !pause_requested(); i++)
	{
		int			ok = 0;
		double		give_up_at = now_s() + OP_SECONDS;

		if (!flood)
			log_updates(puts_fd, 'P', &u[i], 1);
		for (int attempt = 0; attempt < PUT_ATTEMPTS && !stop_requested && now_s() < give_up_at; attempt++)
		{
			if (!ensure_open())
				break;
			maybe_write_stats();
			rc = trafficdb_put(w, &u[i], TRAFFICDB_ASYNC);
			if (rc == TRAFFICDB_OK)
			{
				ok = 1;
				break;
			}
			if (rc != TRAFFICDB_BUSY)
				npending = 0;	/* a new writer cannot tell whether the old one's puts committed */
			else
				attempt--;		/* a full lane while the server restarts: bounded by time only */
			after_failure(rc);
		}
		if (!ok)
		{
			if (stop_requested)
				C.interrupted++;
			else
				C.gave_up++;
			continue;
		}
		C.async_puts++;
		if (flood)
			acked[nacked++] = i;
		else
		{
			log_updates(puts_fd, 'A', &u[i], 1);
			sleep_us(500 + (long) (rand_r(&seed) % 2000));
		}
		pending[npending++] = i;
	}
	if (nacked > 0)
		log_picked(puts_fd, 'A', u, acked, nacked);
	if (burst_no % 2 != 0 || npending == 0 || w == NULL || stop_requested)
		return;
	rc = trafficdb_sync(w, TIMEOUT_MS);
	if (rc == TRAFFICDB_TIMEOUT)
	{
		C.timeouts++;
		rc = sync_after_timeout();
	}
	if (rc == TRAFFICDB_OK)
	{
		log_picked(acks_fd, 'Y', u, pending, npending);
		C.acked_by_sync += npending;
	}
	else if (rc == TRAFFICDB_LOST)
		C.sync_lost++;			/* some update of this writer was lost: expected across a crash */
	else if (rc != TRAFFICDB_TIMEOUT)
		after_failure(rc);
}

/* Is a pause requested?  Its token (the file's first line) into buf. */
static int
pause_token(char *buf, size_t len)
{
	FILE	   *f = fopen(ctl_pause, "r");

	if (f == NULL)
		return 0;
	if (fgets(buf, (int) len, f) == NULL)
		buf[0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
	return 1;
}

/* Write CTLDIR/putter<ID>.paused holding the token, atomically (rename). */
static void
say_paused(const char *token)
{
	char		tmp[4200];
	FILE	   *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", ctl_paused);
	f = fopen(tmp, "w");
	if (f == NULL || fprintf(f, "%s\n", token) < 0 || fclose(f) != 0 || rename(tmp, ctl_paused) != 0)
	{
		fprintf(stderr, "crash_putter: %s: %s\n", ctl_paused, strerror(errno));
		exit(1);
	}
}

static int
open_log(const char *path, const char *what)
{
	int			fd = open(path, O_RDWR | O_CREAT | O_APPEND, 0644);

	if (fd < 0)
	{
		fprintf(stderr, "crash_putter: open %s %s: %s\n", what, path, strerror(errno));
		exit(1);
	}
	trim_partial_line(fd, what);
	return fd;
}

int
main(int argc, char **argv)
{
	struct sigaction sa;
	double		end;
	int			paused = 0;
	char		token[64],
				paused_token[64] = "";
	char		line[1024];

	if (argc != 11)
	{
		fprintf(stderr, "usage: crash_putter NAME ACKS PUTS CTLDIR ID FIRST_ID COUNT SEED MAX_SECONDS STATS\n");
		return 2;
	}
	shm_name = argv[1];
	snprintf(ctl_pause, sizeof(ctl_pause), "%s/putpause", argv[4]);
	snprintf(ctl_paused, sizeof(ctl_paused), "%s/putter%s.paused", argv[4], argv[5]);
	first_id = strtoull(argv[6], NULL, 10);
	nlocs = atoi(argv[7]);
	seed = (unsigned int) strtoul(argv[8], NULL, 10) ^ (unsigned int) getpid();
	end = now_s() + atof(argv[9]);
	snprintf(stats_path, sizeof(stats_path), "%s", argv[10]);
	if (nlocs < MAX_BATCH || nlocs > MAX_LOCS || first_id == 0)
	{
		fprintf(stderr, "crash_putter: COUNT must be %d .. %d, FIRST_ID above 0\n", MAX_BATCH, MAX_LOCS);
		return 2;
	}
	acks_fd = open_log(argv[2], "acks");
	puts_fd = open_log(argv[3], "puts");
	restore_counters(argv[3]);
	unlink(ctl_paused);			/* a killed predecessor's */

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;	/* no SA_RESTART: a sleep ends early */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	for (unsigned long op = 0; !stop_requested && now_s() < end; op++)
	{
		maybe_write_stats();
		if (pause_token(token, sizeof(token)))
		{
			/* say "paused" with the request's token: the loop tells this pause from an older one */
			if (!paused || strcmp(token, paused_token) != 0)
			{
				say_paused(token);
				snprintf(paused_token, sizeof(paused_token), "%s", token);
				paused = 1;
			}
			op--;
			sleep_us(5000);
			continue;
		}
		if (paused)
		{
			unlink(ctl_paused);
			paused = 0;
		}
		if (!ensure_open())
			continue;			/* the deadline or SIGTERM bounds this */

		if (op % 3 == 0)
		{
			/* one location, TRAFFICDB_SYNC */
			trafficdb_update u;
			char		text[32];
			int			k = (int) (rand_r(&seed) % (unsigned) nlocs);

			put_value(first_id + (uint64_t) k, next_counter(k), &u, text, sizeof(text));
			C.sync_puts++;
			put_sync(&u, 1);
		}
		else if (op % 3 == 1)
		{
			/* 2 .. 8 distinct locations, TRAFFICDB_SYNC put_many */
			trafficdb_update u[MAX_BATCH];
			char		texts[MAX_BATCH][32];
			int			n = 2 + (int) (rand_r(&seed) % (MAX_BATCH - 1));
			int			k0 = (int) (rand_r(&seed) % (unsigned) nlocs);

			for (int i = 0; i < n; i++)
			{
				int			k = (k0 + i) % nlocs;

				put_value(first_id + (uint64_t) k, next_counter(k), &u[i], texts[i], sizeof(texts[i]));
			}
			C.sync_batches++;
			put_sync(u, (size_t) n);
		}
		else
			put_async_burst((int) (op / 3));
		sleep_us(1000 + (long) (rand_r(&seed) % 2000));
	}
	close_writer();
	write_stats();
	format_counters(line, sizeof(line));
	fputs(line, stdout);
	return 0;
}
