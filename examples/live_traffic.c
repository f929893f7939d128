/*
 * live_traffic.c
 *	  A latency-critical reader as a router or tile renderer would write it:
 *	  live traffic straight from trafficdb's shared memory through
 *	  libtrafficdb, no SQL.  It prints the slowest named segments of a box,
 *	  then sleeps until the server publishes again (no polling) and prints
 *	  what changed (roads with a name and a speed), for as many publications
 *	  as asked.  Names are aligned by their width on the terminal.
 *
 *	  live_traffic NAME XMIN YMIN XMAX YMAX [PUBLICATIONS [TIMEOUT_S]]
 *	  live_traffic /trafficdb.5433 24.93 60.16 24.95 60.17 2 30
 *
 *	  Build: cc -o live_traffic live_traffic.c $(pkg-config --cflags --libs trafficdb)
 */
#define _XOPEN_SOURCE 700			/* wcwidth */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include <trafficdb.h>

#define TOP 5

typedef struct Slowest
{
	int			n;
	trafficdb_location top[TOP];		/* ascending by speed / free flow */
	double		ratio[TOP];
	int			seen;
} Slowest;

/* widths of characters from wcwidth() (see put_text), else one column each */
static int	use_wcwidth;

/*
 * Code points never written to the terminal: C0 and C1 controls (ESC starts
 * an escape sequence; U+009B is CSI itself on some terminals), DEL, and the
 * bidirectional overrides and isolates, which reorder the rest of the line.
 * Names, road classes and incidents are whatever the map and the feed
 * were given.
 */
static int
unsafe(unsigned long c)
{
	return c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0x200E || c == 0x200F ||
		(c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069);
}

/*
 * One UTF-8 character of s (len bytes left): its length, its code point in
 * *c; 0 when the bytes are not UTF-8 (a stray continuation byte, a lead
 * byte without its continuation bytes, an overlong form).
 */
static size_t
utf8_char(const char *s, size_t len, unsigned long *c)
{
	unsigned char b = (unsigned char) s[0];
	size_t		n = b < 0x80 ? 1 : b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 :
		b >= 0xF0 && b <= 0xF4 ? 4 : 0;

	if (n == 0 || n > len)
		return 0;
	*c = n == 1 ? b : b & (0x7F >> n);
	for (size_t k = 1; k < n; k++)
	{
		if (((unsigned char) s[k] & 0xC0) != 0x80)
			return 0;
		*c = (*c << 6) | ((unsigned char) s[k] & 0x3F);
	}
	if ((n == 3 && *c < 0x800) || (n == 4 && (*c < 0x10000 || *c > 0x10FFFF)))
		return 0;
	return n;
}

/*
 * Print the len bytes of s in at most width terminal columns, cut before
 * the first character that would not fit; returns the columns used.
 * printf's "%-28.28s" counts bytes: a Finnish or Swedish name (Mäkelänkatu,
 * Hämeentie, Södra esplanaden) took fewer columns than its bytes, so the
 * columns after it moved left, and a cut could split a character in two.
 *
 * Text is UTF-8 whatever the user's locale (the database is UTF-8), so
 * widths come from wcwidth() under C.UTF-8, not the environment's locale,
 * which may be C or POSIX (a container): one column for ä, ö and å (single
 * precomposed code points, as OpenStreetMap stores its names, NFC), none
 * for a combining mark of decomposed text, two for a CJK character.  Where
 * C.UTF-8 is missing, each code point counts as one column: exact for
 * Finnish and Swedish names, which have no wide or combining characters.
 * Invalid bytes and unsafe() characters print as '?'; of zero-width
 * characters in a row, only the first two are written (a name of 5,000
 * combining marks would otherwise be 10 kB on one line).
 */
static int
put_text(const char *s, size_t len, int width)
{
	size_t		i = 0;
	int			used = 0;
	int			zero_run = 0;

	while (i < len)
	{
		unsigned long c = 0;
		size_t		n = utf8_char(s + i, len - i, &c);
		int			w = 1;
		int			bad = n == 0 || unsafe(c);

		if (n == 0)
			n = 1;
		else if (!bad && use_wcwidth)
		{
			wchar_t		wc = (wchar_t) c;

			if ((w = wcwidth(wc)) < 0)
			{
				w = 1;
				bad = 1;
			}
		}
		if (used + w > width)
			break;
		zero_run = w == 0 ? zero_run + 1 : 0;
		if (bad)
			putchar('?');
		else if (zero_run <= 2)
			fwrite(s + i, 1, n, stdout);
		used += w;
		i += n;
	}
	return used;
}

/* name in exactly width columns: put_text, then padded with spaces */
static void
print_cell(const char *name, int width)
{
	printf("%*s", width - put_text(name, strlen(name), width), "");
}

/* A road worth showing: it has a speed and a name. */
static int
shown(const trafficdb_location *l)
{
	return !isnan(l->traffic->speed_kmh) && l->name[0] != '\0';
}

/* Keep the TOP slowest named segments relative to free flow (views, no copies). */
static int
collect(const trafficdb_location *l, void *arg)
{
	Slowest    *s = arg;
	double		r;
	int			i;

	if (isnan(l->traffic->speed_kmh))
		return 0;
	s->seen++;
	if (!shown(l) || !(l->traffic->free_flow_kmh > 0))
		return 0;				/* unnamed, or no free-flow speed to compare with */
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

typedef struct Changes
{
	int			changed;		/* every location that changed */
	int			printed;		/* of them, those printed: named, with a speed */
} Changes;

static int
print_change(const trafficdb_location *l, void *arg)
{
	Changes    *c = arg;

	c->changed++;
	if (c->printed < TOP && shown(l))
	{
		c->printed++;
		printf("  changed %12llu ", (unsigned long long) l->id);
		print_cell(l->name, 28);
		printf(" %5.1f km/h", l->traffic->speed_kmh);
		if (l->incident)
		{
			printf("  incident: ");
			put_text(l->incident, l->incident_len, 60);
		}
		putchar('\n');
	}
	return 0;
}

static int
fail(const char *what, int rc, trafficdb_handle *h)
{
	fprintf(stderr, "live_traffic: %s: %s%s%s\n", what, trafficdb_strerror(rc), h ? ": " : "",
			h ? trafficdb_errmsg(h) : "");
	return 1;
}

/* argv[i] as a number within [lo, hi], or exit naming the value and what was expected */
static double
number_arg(const char *what, const char *arg, double lo, double hi, int whole)
{
	char	   *end;
	double		v;

	errno = 0;
	v = strtod(arg, &end);
	if (end == arg || *end != '\0' || errno != 0 || !(v >= lo && v <= hi) || (whole && v != (double) (long) v))
	{
		fprintf(stderr, "live_traffic: %s \"%s\": expected %s from %g to %g\n", what, arg,
				whole ? "a whole number" : "a number", lo, hi);
		exit(2);
	}
	return v;
}

int
main(int argc, char **argv)
{
	trafficdb_handle *h;
	double		b[4];
	int			publications = 0;
	int			timeout_ms = 10 * 1000;
	uint64_t	gen;
	int64_t		published_at;
	Slowest		s = {0};
	int			rc;

	if (argc < 6)
	{
		fprintf(stderr, "usage: live_traffic NAME XMIN YMIN XMAX YMAX [PUBLICATIONS [TIMEOUT_S]]\n");
		return 2;
	}
	b[0] = number_arg("XMIN", argv[2], -180, 180, 0);
	b[1] = number_arg("YMIN", argv[3], -90, 90, 0);
	b[2] = number_arg("XMAX", argv[4], -180, 180, 0);
	b[3] = number_arg("YMAX", argv[5], -90, 90, 0);
	if (argc > 6)
		publications = (int) number_arg("PUBLICATIONS", argv[6], 0, 1000000, 1);
	if (argc > 7)					/* a day at most: milliseconds fit an int */
		timeout_ms = (int) (number_arg("TIMEOUT_S", argv[7], 0, 86400, 0) * 1000);
	use_wcwidth = setlocale(LC_CTYPE, "C.UTF-8") != NULL;	/* see print_cell */

	if ((rc = trafficdb_open(argv[1], &h)) != TRAFFICDB_OK)
		return fail(argv[1], rc, NULL);
	if ((rc = trafficdb_begin(h, &gen)) != TRAFFICDB_OK)
		return fail("trafficdb_begin", rc, h);
	trafficdb_published_at(h, &published_at);
	if ((rc = trafficdb_bbox(h, b[0], b[1], b[2], b[3], collect, &s)) != TRAFFICDB_OK)
		return fail("trafficdb_bbox", rc, h);
	printf("generation %llu: %d segments with traffic in the box; the slowest named:\n",
		   (unsigned long long) gen, s.seen);
	for (int i = 0; i < s.n; i++)
	{
		int			w;

		printf("  %12llu ", (unsigned long long) s.top[i].id);
		print_cell(s.top[i].name, 28);
		putchar(' ');
		w = put_text(s.top[i].road_class, strlen(s.top[i].road_class), 24);
		printf("%*s", w < 12 ? 12 - w : 0, "");		/* as "%-12s" did */
		printf(" %5.1f / %5.1f km/h (%2.0f%%)\n",
			   s.top[i].traffic->speed_kmh, s.top[i].traffic->free_flow_kmh, 100 * s.ratio[i]);
	}
	trafficdb_end(h);					/* the views above are invalid from here */
	fflush(stdout);

	for (int p = 0; p < publications; p++)
	{
		uint64_t	before = gen;
		Changes		c = {0};

		if ((rc = trafficdb_wait(h, gen, timeout_ms, &gen)) != TRAFFICDB_OK)
			return fail("trafficdb_wait", rc, h);
		if ((rc = trafficdb_begin(h, &gen)) != TRAFFICDB_OK)
			return fail("trafficdb_begin", rc, h);
		trafficdb_changes_since(h, before, print_change, &c);
		printf("woken by generation %llu: %d locations changed since %llu (%d named ones with a speed shown)\n",
			   (unsigned long long) gen, c.changed, (unsigned long long) before, c.printed);
		trafficdb_end(h);
		fflush(stdout);
	}
	trafficdb_close(h);
	return 0;
}
