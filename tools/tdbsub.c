/*
 * tdbsub: subscribe to live traffic events through shared memory
 * (libtrafficdb's trafficdb_subscribe) and print them, one line each:
 *
 *   tdbsub NAME [--box XMIN YMIN XMAX YMAX | --radius LON LAT METRES | --ids ID,ID,...
 *                | --all-subscriptions (the events of every row of trafficdb.subscriptions, with sub=ID)]
 *               [--congestion N | --speed-below KMH | --pct-below P | --incident] [--enter-exit]
 *               [--group NAME [--sticky]] [--count N] [--timeout-ms MS] [--latency] [--ack] [--ack-delay-ms MS]
 *               [--quiet] [--slice-us US] [--spin-us US]
 *   tdbsub NAME --group NAME --serve [--work-ms MS] [--label L] [--count N] [--timeout-ms MS]
 *   tdbsub NAME --request GROUP [--count N] [--message TEXT] [--timeout-ms MS]
 *
 * Prints "ready" once subscribed, then for each event:
 *   <kind> <generation> <location_id> <old_speed> <new_speed> <old_congestion> <new_congestion>
 * (with --latency, then the microseconds from the publication to the wake-up;
 * with --ack, events are peeked, printed with their seq, then acknowledged,
 * and "ack N" follows: at-least-once processing)
 * and stops after --count events (default: never) or --timeout-ms without
 * one (default 10,000).  Exit 0, or 1 with the error on stderr.
 *
 * Requests (trafficdb_request, trafficdb_take_request, trafficdb_answer):
 * --serve makes a member of the group that answers each request with
 * "<label> <request>" (label: --label, default the pid) after --work-ms,
 * printing "took <requester pid> <request>" and then "answered" (or "gone"
 * when the requester gave up); --request sends --count requests
 * ("<message> <i>", message default "req") to GROUP one after the other and
 * prints "answer <i> <answer> <microseconds>" for each.  Both need no area
 * (--none is implied).
 *
 * --quiet prints no event, only one line at the end (for benchmarks):
 *   received N overrun O first_published_us P last_received_us L
 * N the events (OVERRUN ones included), O the OVERRUN events among them,
 * P the earliest publication time the events carried and L when the last
 * receive returned (both Unix microseconds, CLOCK_REALTIME).
 *
 * --slice-us US asks the scheduler for a slice of US microseconds (see
 * tools/slice.h); --spin-us US polls the ring that long (trafficdb_receive with
 * a timeout of 0) before each blocking receive.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "slice.h"
#include "trafficdb.h"

static const char *const kinds[] = {"?", "change", "enter", "exit", "overrun"};

static int
fail(const char *what, int rc, trafficdb_subscriber *s)
{
	fprintf(stderr, "tdbsub: %s: %s: %s\n", what, trafficdb_strerror(rc), trafficdb_subscriber_errmsg(s));
	trafficdb_unsubscribe(s);
	return 1;
}

/* --serve: answer the group's requests until count of them or a timeout without one */
static int
serve(trafficdb_subscriber *s, const char *label, int work_ms, long count, int timeout)
{
	static char req[TRAFFICDB_REQUEST_MAX + 1];
	static char ans[TRAFFICDB_REQUEST_MAX];

	while (count != 0)
	{
		trafficdb_req r;
		int			rc = trafficdb_take_request(s, &r, req, timeout);
		int			n;

		if (rc == TRAFFICDB_SYSTEM)
			continue;
		if (rc < 0)
			return fail("take_request", rc, s);
		if (rc == 0)
			break;
		req[r.len] = '\0';
		printf("took %d %s\n", (int) r.requester_pid, req);
		fflush(stdout);
		if (work_ms > 0)
			nanosleep(&(struct timespec) {work_ms / 1000, (work_ms % 1000) * 1000000L}, NULL);
		n = snprintf(ans, sizeof(ans), "%s %s", label, req);
		rc = trafficdb_answer(s, &r, ans, n < (int) sizeof(ans) ? (size_t) n : sizeof(ans) - 1);
		if (rc != TRAFFICDB_OK && rc != TRAFFICDB_GONE)
			return fail("answer", rc, s);
		printf("%s\n", rc == TRAFFICDB_OK ? "answered" : "gone");
		fflush(stdout);
		if (count > 0)
			count--;
	}
	trafficdb_unsubscribe(s);
	return 0;
}

/* --request: count requests to group, one after the other */
static int
request_loop(trafficdb_subscriber *s, const char *group, const char *message, long count, int timeout)
{
	static char ans[TRAFFICDB_REQUEST_MAX + 1];

	for (long i = 1; count < 0 || i <= count; i++)
	{
		char		req[256];
		int			n = snprintf(req, sizeof(req), "%s %ld", message, i);
		int64_t		t0 = tdb_mono_us();
		int			rc = trafficdb_request(s, group, req, (size_t) n, ans, sizeof(ans) - 1, timeout);

		if (rc < 0)
			return fail("request", rc, s);
		ans[rc] = '\0';
		printf("answer %ld %s %lld\n", i, ans, (long long) (tdb_mono_us() - t0));
		fflush(stdout);
	}
	trafficdb_unsubscribe(s);
	return 0;
}

static double
num(const char *s, const char *what)
{
	char	   *end;
	double		v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0')
	{
		fprintf(stderr, "tdbsub: %s \"%s\" is not a number\n", what, s);
		exit(1);
	}
	return v;
}

int
main(int argc, char **argv)
{
	trafficdb_filter f = {.area = -1};
	const char *group = NULL;
	int			mode = TRAFFICDB_GROUP_ROUND_ROBIN;
	long		count = -1;
	int			timeout = 10000;
	bool		latency = false;
	bool		ack = false;
	bool		quiet = false;
	long		spin_us = 0;
	int			ack_delay_ms = 0;
	bool		serving = false;
	int			work_ms = 0;
	const char *label = NULL;
	char		pidlabel[24];
	const char *request_group = NULL;
	const char *message = "req";
	uint64_t	ids[504];
	trafficdb_subscriber *s;
	static trafficdb_event ev[4096];
	long long	received = 0,
				overruns = 0,
				first_pub = 0,
				last_recv = 0;
	int			rc;

	if (argc < 2)
	{
		fprintf(stderr, "usage: tdbsub NAME [--box X0 Y0 X1 Y1 | --radius LON LAT M | --ids A,B,... | --all-subscriptions | --none] [condition] [--enter-exit] [--group G [--sticky]] [--count N] [--timeout-ms MS]\n       tdbsub NAME --group G --serve [--work-ms MS] [--label L] | tdbsub NAME --request G [--message TEXT]\n");
		return 1;
	}
	for (int i = 2; i < argc; i++)
	{
#define NEED(n) do { if (i + (n) >= argc) { fprintf(stderr, "tdbsub: %s needs %d value(s)\n", argv[i], n); return 1; } } while (0)
		if (strcmp(argv[i], "--box") == 0)
		{
			NEED(4);
			f.area = TRAFFICDB_AREA_BOX;
			for (int k = 0; k < 4; k++)
				f.box[k] = num(argv[++i], "a box coordinate");
		}
		else if (strcmp(argv[i], "--radius") == 0)
		{
			NEED(3);
			f.area = TRAFFICDB_AREA_RADIUS;
			f.lon = num(argv[++i], "the longitude");
			f.lat = num(argv[++i], "the latitude");
			f.radius_m = num(argv[++i], "the radius");
		}
		else if (strcmp(argv[i], "--ids") == 0)
		{
			char	   *p;

			NEED(1);
			f.area = TRAFFICDB_AREA_IDS;
			f.ids = ids;
			for (p = strtok(argv[++i], ","); p && f.nids < 504; p = strtok(NULL, ","))
				ids[f.nids++] = (uint64_t) num(p, "a location id");
		}
		else if (strcmp(argv[i], "--all-subscriptions") == 0)
			f.area = TRAFFICDB_AREA_SUBSCRIPTIONS;
		else if (strcmp(argv[i], "--none") == 0)
			f.area = TRAFFICDB_AREA_NONE;
		else if (strcmp(argv[i], "--serve") == 0)
			serving = true;
		else if (strcmp(argv[i], "--work-ms") == 0)
		{
			NEED(1);
			work_ms = (int) num(argv[++i], "the work time");
		}
		else if (strcmp(argv[i], "--label") == 0)
		{
			NEED(1);
			label = argv[++i];
		}
		else if (strcmp(argv[i], "--request") == 0)
		{
			NEED(1);
			request_group = argv[++i];
		}
		else if (strcmp(argv[i], "--message") == 0)
		{
			NEED(1);
			message = argv[++i];
		}
		else if (strcmp(argv[i], "--congestion") == 0)
		{
			NEED(1);
			f.condition = TRAFFICDB_COND_CONGESTION_AT_LEAST;
			f.value = num(argv[++i], "the congestion");
		}
		else if (strcmp(argv[i], "--speed-below") == 0)
		{
			NEED(1);
			f.condition = TRAFFICDB_COND_SPEED_BELOW;
			f.value = num(argv[++i], "the speed");
		}
		else if (strcmp(argv[i], "--pct-below") == 0)
		{
			NEED(1);
			f.condition = TRAFFICDB_COND_SPEED_BELOW_PCT;
			f.value = num(argv[++i], "the percentage");
		}
		else if (strcmp(argv[i], "--incident") == 0)
			f.condition = TRAFFICDB_COND_INCIDENT;
		else if (strcmp(argv[i], "--latency") == 0)
			latency = true;
		else if (strcmp(argv[i], "--quiet") == 0)
			quiet = true;
		else if (strcmp(argv[i], "--slice-us") == 0)
		{
			NEED(1);
			tdb_set_slice("tdbsub", (long) num(argv[++i], "the slice"));
		}
		else if (strcmp(argv[i], "--spin-us") == 0)
		{
			NEED(1);
			spin_us = (long) num(argv[++i], "the spin");
		}
		else if (strcmp(argv[i], "--ack") == 0)
			ack = true;
		else if (strcmp(argv[i], "--ack-delay-ms") == 0)
		{
			NEED(1);
			ack = true;
			ack_delay_ms = (int) num(argv[++i], "the delay");
		}
		else if (strcmp(argv[i], "--enter-exit") == 0)
			f.events = TRAFFICDB_EVENTS_ENTER_EXIT;
		else if (strcmp(argv[i], "--group") == 0)
		{
			NEED(1);
			group = argv[++i];
		}
		else if (strcmp(argv[i], "--sticky") == 0)
			mode = TRAFFICDB_GROUP_STICKY;
		else if (strcmp(argv[i], "--count") == 0)
		{
			NEED(1);
			count = (long) num(argv[++i], "the count");
		}
		else if (strcmp(argv[i], "--timeout-ms") == 0)
		{
			NEED(1);
			timeout = (int) num(argv[++i], "the timeout");
		}
		else
		{
			fprintf(stderr, "tdbsub: unknown option \"%s\"\n", argv[i]);
			return 1;
		}
	}
	if (f.area < 0 && (serving || request_group != NULL))
		f.area = TRAFFICDB_AREA_NONE;
	if (f.area < 0)
	{
		fprintf(stderr, "tdbsub: give --box, --radius, --ids, --all-subscriptions or --none\n");
		return 1;
	}
	if (serving && group == NULL)
	{
		fprintf(stderr, "tdbsub: --serve needs --group NAME\n");
		return 1;
	}
	if ((rc = trafficdb_subscribe(argv[1], &f, group, mode, &s)) != TRAFFICDB_OK)
	{
		fprintf(stderr, "tdbsub: %s: %s\n", trafficdb_strerror(rc), trafficdb_subscriber_errmsg(NULL));
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	if (serving)
	{
		snprintf(pidlabel, sizeof(pidlabel), "%d", (int) getpid());
		return serve(s, label ? label : pidlabel, work_ms, count, timeout);
	}
	if (request_group != NULL)
		return request_loop(s, request_group, message, count, timeout);
	while (count != 0)
	{
		int			batch = quiet && !ack ? 4096 : 256;
		int			max = count > 0 && count < batch ? (int) count : batch;
		int			n = 0;

		if (spin_us > 0 && !ack)
		{
			/* --spin-us: poll (timeout 0: no system call) that long before blocking */
			struct timespec t0,
						t1;

			clock_gettime(CLOCK_MONOTONIC, &t0);
			do
			{
				n = trafficdb_receive(s, ev, max, 0);
				clock_gettime(CLOCK_MONOTONIC, &t1);
			} while (n == 0 && (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000 < spin_us);
		}
		if (n == 0)
			n = ack ? trafficdb_peek(s, ev, max, timeout) : trafficdb_receive(s, ev, max, timeout);

		if (n == TRAFFICDB_SYSTEM)
			continue;
		if (n < 0)
		{
			fprintf(stderr, "tdbsub: %s: %s\n", trafficdb_strerror(n), trafficdb_subscriber_errmsg(s));
			trafficdb_unsubscribe(s);
			return 1;
		}
		if (n == 0)
			break;
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		if (quiet)
		{
			last_recv = (long long) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
			received += n;
			for (int k = 0; k < n; k++)
			{
				if (ev[k].kind == TRAFFICDB_EVENT_OVERRUN)
					overruns++;
				else if (first_pub == 0 || ev[k].published_us < first_pub)
					first_pub = ev[k].published_us;
			}
		}
		for (int k = 0; k < n && !quiet; k++)
		{
			printf("%s %llu %llu %.6g %.6g %u %u", kinds[ev[k].kind <= 4 ? ev[k].kind : 0],
				   (unsigned long long) ev[k].generation, (unsigned long long) ev[k].location_id,
				   ev[k].old_speed_kmh, ev[k].new_speed_kmh, ev[k].old_congestion, ev[k].new_congestion);
			if (latency)
				printf(" %lld", (long long) ((int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000 - ev[k].published_us));
			if (f.area == TRAFFICDB_AREA_SUBSCRIPTIONS)
				printf(" sub=%u", ev[k].subscriber);
			if (ack)
				printf(" seq=%llu%s", (unsigned long long) ev[k].seq, ev[k].flags & 1 ? " handed_over" : "");
			printf("\n");
		}
		if (!quiet)
			fflush(stdout);
		if (ack)
		{
			/* processed (printed): now taken; a death before this hands them to another member */
			if (ack_delay_ms > 0)
				nanosleep(&(struct timespec) {ack_delay_ms / 1000, (ack_delay_ms % 1000) * 1000000L}, NULL);
			if ((rc = trafficdb_ack(s, n)) != TRAFFICDB_OK)
			{
				fprintf(stderr, "tdbsub: %s: %s\n", trafficdb_strerror(rc), trafficdb_subscriber_errmsg(s));
				trafficdb_unsubscribe(s);
				return 1;
			}
			printf("ack %d\n", n);
			fflush(stdout);
		}
		if (count > 0)
			count -= n;
	}
	if (quiet)
		printf("received %lld overrun %lld first_published_us %lld last_received_us %lld\n", received, overruns,
			   first_pub, last_recv);
	trafficdb_unsubscribe(s);
	return 0;
}
