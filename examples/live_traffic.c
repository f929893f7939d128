/*
 * live_traffic.c
 *	  A latency-critical reader as a router or tile renderer would write it:
 *	  live traffic straight from trafficdb's shared memory through
 *	  libtrafficdb, no SQL.  It prints the slowest segments of a box, then
 *	  sleeps until the server publishes again (no polling) and prints what
 *	  changed, for as many publications as asked.
 *
 *	  live_traffic NAME XMIN YMIN XMAX YMAX [PUBLICATIONS [TIMEOUT_S]]
 *	  live_traffic /trafficdb.5433 24.93 60.16 24.95 60.17 2 30
 *
 *	  Build: cc -o live_traffic live_traffic.c $(pkg-config --cflags --libs trafficdb)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <trafficdb.h>

#define TOP 5

typedef struct Slowest
{
	int			n;
	trafficdb_location top[TOP];		/* ascending by speed / free flow */
	double		ratio[TOP];
	int			seen;
} Slowest;

/* Keep the TOP slowest segments relative to free flow (views, no copies). */
static int
collect(const trafficdb_location *l, void *arg)
{
	Slowest    *s = arg;
	double		r;
	int			i;

	if (isnan(l->traffic->speed_kmh))
		return 0;
	s->seen++;
	if (!(l->traffic->free_flow_kmh > 0))
		return 0;				/* no free-flow speed to compare with */
	r = l->traffic->speed_kmh / l->traffic->free_flow_kmh;
	if (s->n == TOP && r >= s->ratio[TOP - 1])
		return 0;
	i = s->n < TOP ? s->n++ : TOP - 1;
	for (; i > 0 && s->ratio[i - 1] > r; i--)
	{
		s->top[i] = s->top[i - 1];
		s->ratio[i] = s->ratio[i - 1];
	}
	s->top[i] = *l;
	s->ratio[i] = r;
	return 0;
}

static int
print_change(const trafficdb_location *l, void *arg)
{
	int		   *n = arg;

	if ((*n)++ < TOP)
		printf("  changed %12llu %-28.28s %5.1f km/h%s%.*s\n", (unsigned long long) l->id, l->name,
			   l->traffic->speed_kmh, l->incident ? "  incident: " : "",
			   (int) l->incident_len, l->incident ? l->incident : "");
	return 0;
}

static int
fail(const char *what, int rc, trafficdb_handle *h)
{
	fprintf(stderr, "live_traffic: %s: %s%s%s\n", what, trafficdb_strerror(rc), h ? ": " : "",
			h ? trafficdb_errmsg(h) : "");
	return 1;
}

int
main(int argc, char **argv)
{
	trafficdb_handle *h;
	double		b[4];
	int			publications = argc > 6 ? atoi(argv[6]) : 0;
	int			timeout_ms = (argc > 7 ? atoi(argv[7]) : 10) * 1000;
	uint64_t	gen;
	int64_t		published_at;
	Slowest		s = {0};
	int			rc;

	if (argc < 6)
	{
		fprintf(stderr, "usage: live_traffic NAME XMIN YMIN XMAX YMAX [PUBLICATIONS [TIMEOUT_S]]\n");
		return 2;
	}
	for (int i = 0; i < 4; i++)
		b[i] = atof(argv[2 + i]);

	if ((rc = trafficdb_open(argv[1], &h)) != TRAFFICDB_OK)
		return fail(argv[1], rc, NULL);
	if ((rc = trafficdb_begin(h, &gen)) != TRAFFICDB_OK)
		return fail("trafficdb_begin", rc, h);
	trafficdb_published_at(h, &published_at);
	if ((rc = trafficdb_bbox(h, b[0], b[1], b[2], b[3], collect, &s)) != TRAFFICDB_OK)
		return fail("trafficdb_bbox", rc, h);
	printf("generation %llu: %d segments with traffic in the box; the slowest:\n",
		   (unsigned long long) gen, s.seen);
	for (int i = 0; i < s.n; i++)
		printf("  %12llu %-28.28s %-12s %5.1f / %5.1f km/h (%2.0f%%)\n",
			   (unsigned long long) s.top[i].id, s.top[i].name, s.top[i].road_class,
			   s.top[i].traffic->speed_kmh, s.top[i].traffic->free_flow_kmh, 100 * s.ratio[i]);
	trafficdb_end(h);					/* the views above are invalid from here */
	fflush(stdout);

	for (int p = 0; p < publications; p++)
	{
		uint64_t	before = gen;
		int			changed = 0;

		if ((rc = trafficdb_wait(h, gen, timeout_ms, &gen)) != TRAFFICDB_OK)
			return fail("trafficdb_wait", rc, h);
		if ((rc = trafficdb_begin(h, &gen)) != TRAFFICDB_OK)
			return fail("trafficdb_begin", rc, h);
		trafficdb_changes_since(h, before, print_change, &changed);
		printf("woken by generation %llu: %d locations changed since %llu\n",
			   (unsigned long long) gen, changed, (unsigned long long) before);
		trafficdb_end(h);
		fflush(stdout);
	}
	trafficdb_close(h);
	return 0;
}
