/*
 * bench/sub_baselines.c: what a user would run instead of trafficdb's
 * subscriptions (issue 18), on one workload (bench/sub_workload.h), driven by
 * bench/sub_baselines.sh.
 *
 *   sub_baselines gen FILE N S R K SEED   write a workload, print its expected events
 *   sub_baselines info FILE               print the workload's sizes and expected events
 *   sub_baselines csv FILE DIR            locations.csv, changes.csv, subscriptions.csv
 *   sub_baselines redis FILE PORT SERVER_PID CONSUMERS [PIPELINE]
 *   sub_baselines notify FILE CONNINFO CONSUMERS
 *
 * redis: CONSUMERS processes SUBSCRIBE to channel sub_traffic on a Redis at
 * 127.0.0.1:PORT (raw RESP over a socket, no client library); then one
 * publisher PUBLISHes every change of every round, one message each
 * ("<id> <old speed> <old congestion> <new speed> <new congestion>"),
 * PIPELINE commands (default 1000) per write, and checks that every PUBLISH
 * reached CONSUMERS subscribers; then "END".
 *
 * notify: CONSUMERS libpq sessions LISTEN sub_traffic; one session runs, per
 * round, one prepared UPDATE of the round's K rows of sub_traffic from
 * sub_changes (one transaction each); the trigger bench/sub_baselines.sh
 * installed NOTIFYs each changed row with the same payload; then "END".
 * CONSUMERS 0 times the UPDATEs alone (the script installs no trigger then):
 * wall_ns is the publisher's, events 0.
 *
 * Every consumer holds the map's points and its share of the subscriptions
 * (index j % CONSUMERS), indexed by a grid of 0.01 x 0.005 degree buckets
 * (bucket -> the subscriptions whose box touches it), and for each message
 * tests the bucket's subscriptions: box, then condition and kind.  It counts
 * events and notes when it handled its last change.
 *
 * Printed (one line, key=value): events and by kind, the expected ones,
 * changes handled, wall_ns (the publisher's first command to the last change
 * handled by any consumer), and CPU in ns: clients (publisher and consumers,
 * getrusage from when they are ready), server (redis-server's threads, or the
 * publisher's and consumers' PostgreSQL backends: /proc/<pid>/task/<tid>/schedstat,
 * before and after), and for notify the whole cluster too (the postmaster and
 * every child of it, same source; a process that starts and ends between the
 * two readings is missed).  Everything is bounded by SUB_MAX_SECONDS (300).
 */
#include "sub_workload.h"
#include "sub_proc.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHANNEL "sub_traffic"
#define MAX_CONSUMERS 64
#define BUCKET_DLON 0.01
#define BUCKET_DLAT 0.005

/* ---- the consumers' matching: what a competent user would write ---- */

struct matcher {
	const struct sub_workload *w;
	double gx0, gy0;
	uint32_t gx, gy;
	uint32_t *off;	 /* gx * gy + 1 */
	uint32_t *items; /* subscription indexes, by bucket */
	uint64_t by[4];
	uint64_t changes;
	int64_t last_ns;
};

static uint32_t bucket_x(const struct matcher *m, double lon)
{
	double f = floor((lon - m->gx0) / BUCKET_DLON);

	return f < 0 ? 0 : f >= m->gx ? m->gx - 1 : (uint32_t)f;
}

static uint32_t bucket_y(const struct matcher *m, double lat)
{
	double f = floor((lat - m->gy0) / BUCKET_DLAT);

	return f < 0 ? 0 : f >= m->gy ? m->gy - 1 : (uint32_t)f;
}

static void matcher_init(struct matcher *m, const struct sub_workload *w, uint32_t idx, uint32_t ncons)
{
	const struct sub_wl_header *h = &w->h;
	size_t nb, total = 0;
	uint32_t pass, j, x, y;

	memset(m, 0, sizeof(*m));
	m->w = w;
	m->gx0 = h->lon0 - h->dx;
	m->gy0 = h->lat0 - h->dy;
	m->gx = (uint32_t)ceil((h->side + 2) * h->dx / BUCKET_DLON) + 1;
	m->gy = (uint32_t)ceil((h->rows + 2) * h->dy / BUCKET_DLAT) + 1;
	nb = (size_t)m->gx * m->gy;
	m->off = calloc(nb + 1, sizeof(uint32_t));
	if (!m->off)
		fail("out of memory");
	/* two passes: count per bucket, then fill */
	for (pass = 0; pass < 2; pass++) {
		for (j = idx; j < h->s; j += ncons) {
			const struct sub_box *b = &w->subs[j];
			uint32_t x0 = bucket_x(m, b->xmin), x1 = bucket_x(m, b->xmax);
			uint32_t y0 = bucket_y(m, b->ymin), y1 = bucket_y(m, b->ymax);

			for (y = y0; y <= y1; y++)
				for (x = x0; x <= x1; x++) {
					size_t bk = (size_t)y * m->gx + x;

					if (pass == 0)
						m->off[bk + 1]++;
					else
						m->items[m->off[bk]++] = j;
				}
		}
		if (pass == 0) {
			for (size_t i = 0; i < nb; i++)
				m->off[i + 1] += m->off[i];
			total = m->off[nb];
			m->items = malloc(sizeof(uint32_t) * (total ? total : 1));
			if (!m->items)
				fail("out of memory");
		} else {
			/* off[b] now holds the end of bucket b: shift back */
			memmove(m->off + 1, m->off, sizeof(uint32_t) * nb);
			m->off[0] = 0;
		}
	}
}

/* one message: "<id> <old speed> <old congestion> <new speed> <new congestion>" */
static void matcher_handle(struct matcher *m, const char *msg, size_t len)
{
	const struct sub_workload *w = m->w;
	char buf[96], *p, *e;
	struct sub_change c;
	unsigned long id;
	long oc, nc;
	double lon, lat;
	uint32_t bk, i;

	if (len >= sizeof(buf))
		fail("message too long (%zu bytes)", len);
	memcpy(buf, msg, len);
	buf[len] = 0;
	id = strtoul(buf, &p, 10);
	strtod(p, &e);
	oc = strtol(e, &p, 10);
	strtod(p, &e);
	nc = strtol(e, &p, 10);
	if (id == 0 || id > w->h.n || oc < 0 || oc > 255 || nc < 0 || nc > 255 || *p != 0)
		fail("bad message '%s'", buf);
	memset(&c, 0, sizeof(c));
	c.id = (uint32_t)id;
	c.old_cong = (uint8_t)oc;
	c.new_cong = (uint8_t)nc;
	lon = w->lon[id - 1];
	lat = w->lat[id - 1];
	bk = bucket_y(m, lat) * m->gx + bucket_x(m, lon);
	for (i = m->off[bk]; i < m->off[bk + 1]; i++) {
		const struct sub_box *b = &w->subs[m->items[i]];

		if (sub_in_box(b, lon, lat))
			m->by[sub_event(b, &c)]++;
	}
	m->changes++;
	m->last_ns = now_ns();
}

/* ---- what the children tell the parent ---- */

struct ready_msg {
	int32_t backend_pid; /* 0 for Redis */
	int32_t ok;
};

struct result_msg {
	uint64_t by[4];
	uint64_t changes;
	int64_t t_ns; /* consumers: last change handled; publisher: first command */
	int64_t end_ns; /* publisher: its last command's reply */
	int64_t cpu_ns;
	int32_t ok, pad;
};

/* A consumer's result to the parent: what its matcher counted, and its CPU since cpu0. */
static void send_matched(int out, const struct matcher *m, int64_t cpu0)
{
	struct result_msg res;

	memset(&res, 0, sizeof(res));
	memcpy(res.by, m->by, sizeof(res.by));
	res.changes = m->changes;
	res.t_ns = m->last_ns;
	res.cpu_ns = cpu_self_ns() - cpu0;
	res.ok = 1;
	write_all(out, &res, sizeof(res));
}

/* ---- Redis over a raw socket ---- */

static int redis_connect(int port)
{
	struct sockaddr_in a;
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (fd < 0)
		fail("socket: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		fail("connect 127.0.0.1:%d: %s", port, strerror(errno));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* an integer ending in \r\n at b[p..len): the position after it, 0 when
 * incomplete, -1 when malformed */
static long resp_int(const char *b, size_t len, size_t p, long long *v)
{
	const char *cr;
	char *end;

	if (p >= len)
		return 0;
	cr = memchr(b + p, '\r', len - p);
	if (!cr || (size_t)(cr - b) + 1 >= len)
		return 0;
	if (cr[1] != '\n')
		return -1;
	*v = strtoll(b + p, &end, 10);
	if (end != cr || end == b + p)
		return -1;
	return cr - b + 2;
}

struct slice {
	const char *p;
	size_t len;
};

/* a push message (an array of bulk strings and integers) at b[0..len): bytes
 * used, 0 when incomplete, -1 when malformed */
static long resp_push(const char *b, size_t len, struct slice *el, int *nel)
{
	long long n, l;
	long q, q2;
	int i;

	if (len == 0)
		return 0;
	if (b[0] != '*')
		return -1;
	q = resp_int(b, len, 1, &n);
	if (q <= 0)
		return q;
	if (n < 1 || n > 4)
		return -1;
	for (i = 0; i < n; i++) {
		if ((size_t)q >= len)
			return 0;
		if (b[q] == '$') {
			q2 = resp_int(b, len, (size_t)q + 1, &l);
			if (q2 <= 0)
				return q2;
			if (l < 0 || l > (1 << 20))
				return -1;
			if ((size_t)q2 + (size_t)l + 2 > len)
				return 0;
			el[i].p = b + q2;
			el[i].len = (size_t)l;
			q = q2 + (long)l + 2;
		} else if (b[q] == ':') {
			q2 = resp_int(b, len, (size_t)q + 1, &l);
			if (q2 <= 0)
				return q2;
			el[i].p = b + q + 1;
			el[i].len = (size_t)(q2 - q - 3);
			q = q2;
		} else
			return -1;
	}
	*nel = (int)n;
	return q;
}

static int slice_is(const struct slice *s, const char *str)
{
	return s->len == strlen(str) && memcmp(s->p, str, s->len) == 0;
}

static void redis_consumer(const struct sub_workload *w, int port, uint32_t idx, uint32_t ncons, int out)
{
	static const char sub[] = "*2\r\n$9\r\nSUBSCRIBE\r\n$11\r\n" CHANNEL "\r\n";
	const size_t cap = 1 << 20;
	char *buf = malloc(cap);
	size_t have = 0;
	struct matcher m;
	struct ready_msg rd = {0, 1};
	int fd, subscribed = 0, done = 0;
	int64_t cpu0 = 0;

	if (!buf)
		fail("out of memory");
	matcher_init(&m, w, idx, ncons);
	fd = redis_connect(port);
	write_all(fd, sub, sizeof(sub) - 1);
	while (!done) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		size_t used = 0;
		ssize_t r;

		if (now_ns() > deadline_ns)
			fail("redis consumer %u: deadline, %llu changes handled", idx, (unsigned long long)m.changes);
		if (poll(&pfd, 1, remaining_ms()) <= 0)
			continue;
		r = read(fd, buf + have, cap - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			fail("redis consumer %u: connection lost (%s)", idx, r < 0 ? strerror(errno) : "closed");
		have += (size_t)r;
		while (!done) {
			struct slice el[4];
			int nel = 0;
			long q = resp_push(buf + used, have - used, el, &nel);

			if (q < 0)
				fail("redis consumer %u: malformed reply", idx);
			if (q == 0)
				break;
			used += (size_t)q;
			if (nel == 3 && slice_is(&el[0], "message")) {
				if (slice_is(&el[2], "END"))
					done = 1;
				else
					matcher_handle(&m, el[2].p, el[2].len);
			} else if (nel == 3 && slice_is(&el[0], "subscribe") && !subscribed) {
				subscribed = 1;
				cpu0 = cpu_self_ns();
				write_all(out, &rd, sizeof(rd));
			} else
				fail("redis consumer %u: unexpected push message", idx);
		}
		memmove(buf, buf + used, have - used);
		have -= used;
		if (have == cap)
			fail("redis consumer %u: a message over %zu bytes", idx, cap);
	}
	send_matched(out, &m, cpu0);
	close(fd);
	free(buf);
}

/* read `count` integer replies, each equal to `expect` */
static void redis_replies(int fd, char *rbuf, size_t cap, size_t *have, long count, long long expect)
{
	while (count > 0) {
		size_t used = 0;
		ssize_t r;
		struct pollfd pfd = {.fd = fd, .events = POLLIN};

		while (count > 0) {
			long long v;
			long q;

			if (*have - used == 0)
				break;
			if (rbuf[used] != ':')
				fail("redis publisher: unexpected reply '%.40s'", rbuf + used);
			q = resp_int(rbuf + used, *have - used, 1, &v);
			if (q < 0)
				fail("redis publisher: malformed reply");
			if (q == 0)
				break;
			if (v != expect)
				fail("redis publisher: a PUBLISH reached %lld subscribers, not %lld", v, expect);
			used += (size_t)q;
			count--;
		}
		memmove(rbuf, rbuf + used, *have - used);
		*have -= used;
		if (count == 0)
			break;
		if (now_ns() > deadline_ns)
			fail("redis publisher: deadline");
		if (poll(&pfd, 1, remaining_ms()) <= 0)
			continue;
		r = read(fd, rbuf + *have, cap - *have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			fail("redis publisher: connection lost");
		*have += (size_t)r;
	}
}

static size_t redis_publish_cmd(char *p, const char *payload, int plen)
{
	return (size_t)sprintf(p, "*3\r\n$7\r\nPUBLISH\r\n$11\r\n" CHANNEL "\r\n$%d\r\n%s\r\n", plen, payload);
}

static void redis_publisher(const struct sub_workload *w, int port, uint32_t ncons, long pipeline, int out, int go)
{
	size_t total = (size_t)w->h.r * w->h.k, i = 0, have = 0;
	const size_t rcap = 1 << 16;
	char *obuf = malloc((size_t)pipeline * 128 + 128), *rbuf = malloc(rcap), payload[96], gob;
	struct ready_msg rd = {0, 1};
	struct result_msg res;
	int fd;
	int64_t cpu0;

	if (!obuf || !rbuf)
		fail("out of memory");
	fd = redis_connect(port);
	write_all(out, &rd, sizeof(rd));
	if (read_full(go, &gob, 1) < 0)
		fail("redis publisher: no go");
	memset(&res, 0, sizeof(res));
	cpu0 = cpu_self_ns();
	res.t_ns = now_ns();
	while (i < total) {
		size_t len = 0;
		long n = 0;

		for (; i < total && n < pipeline; i++, n++) {
			const struct sub_change *c = &w->changes[i];
			int plen = snprintf(payload, sizeof(payload), "%u %d %d %d %d", c->id, c->old_speed, c->old_cong,
					    c->new_speed, c->new_cong);

			len += redis_publish_cmd(obuf + len, payload, plen);
		}
		write_all(fd, obuf, len);
		redis_replies(fd, rbuf, rcap, &have, n, ncons);
		res.changes += (uint64_t)n;
	}
	res.end_ns = now_ns();
	write_all(fd, obuf, redis_publish_cmd(obuf, "END", 3));
	redis_replies(fd, rbuf, rcap, &have, 1, ncons);
	res.cpu_ns = cpu_self_ns() - cpu0;
	res.ok = 1;
	write_all(out, &res, sizeof(res));
	close(fd);
	free(obuf);
	free(rbuf);
}

/* ---- PostgreSQL LISTEN/NOTIFY ---- */

static PGconn *pg_connect(const char *conninfo)
{
	PGconn *c = PQconnectdb(conninfo);

	if (PQstatus(c) != CONNECTION_OK)
		fail("connect: %s", PQerrorMessage(c));
	return c;
}

static void pg_ok(PGconn *c, PGresult *r, const char *what)
{
	ExecStatusType st = PQresultStatus(r);

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		fail("%s: %s", what, PQerrorMessage(c));
}

static void notify_consumer(const struct sub_workload *w, const char *conninfo, uint32_t idx, uint32_t ncons, int out,
			    int go)
{
	struct matcher m;
	struct ready_msg rd;
	PGconn *c;
	PGresult *r;
	int done = 0;
	int64_t cpu0;

	matcher_init(&m, w, idx, ncons);
	c = pg_connect(conninfo);
	r = PQexec(c, "LISTEN " CHANNEL);
	pg_ok(c, r, "LISTEN");
	PQclear(r);
	rd.backend_pid = PQbackendPID(c);
	rd.ok = 1;
	cpu0 = cpu_self_ns();
	write_all(out, &rd, sizeof(rd));
	while (!done) {
		struct pollfd pfd = {.fd = PQsocket(c), .events = POLLIN};
		PGnotify *nt;

		if (now_ns() > deadline_ns)
			fail("notify consumer %u: deadline, %llu changes handled", idx, (unsigned long long)m.changes);
		if (poll(&pfd, 1, remaining_ms()) <= 0)
			continue;
		if (!PQconsumeInput(c))
			fail("notify consumer %u: %s", idx, PQerrorMessage(c));
		while ((nt = PQnotifies(c)) != NULL) {
			if (strcmp(nt->extra, "END") == 0)
				done = 1;
			else if (!done)
				matcher_handle(&m, nt->extra, strlen(nt->extra));
			PQfreemem(nt);
		}
	}
	send_matched(out, &m, cpu0);
	hold(go); /* the backend lives until the parent has read its CPU time */
	PQfinish(c);
}

static void notify_publisher(const struct sub_workload *w, const char *conninfo, int out, int go)
{
	struct ready_msg rd;
	struct result_msg res;
	PGconn *c = pg_connect(conninfo);
	PGresult *r;
	char gob, rbuf[16], kbuf[16];
	const char *params[1] = {rbuf};
	uint32_t round;
	int64_t cpu0;

	r = PQprepare(c, "upd",
		      "UPDATE sub_traffic AS t SET speed_kmh = c.speed_kmh, congestion = c.congestion"
		      " FROM sub_changes AS c WHERE c.round = $1::int AND t.location_id = c.location_id",
		      1, NULL);
	pg_ok(c, r, "PREPARE");
	PQclear(r);
	rd.backend_pid = PQbackendPID(c);
	rd.ok = 1;
	write_all(out, &rd, sizeof(rd));
	if (read_full(go, &gob, 1) < 0)
		fail("notify publisher: no go");
	memset(&res, 0, sizeof(res));
	snprintf(kbuf, sizeof(kbuf), "%u", w->h.k);
	cpu0 = cpu_self_ns();
	res.t_ns = now_ns();
	for (round = 0; round < w->h.r; round++) {
		if (now_ns() > deadline_ns)
			fail("notify publisher: deadline at round %u", round);
		snprintf(rbuf, sizeof(rbuf), "%u", round);
		r = PQexecPrepared(c, "upd", 1, params, NULL, NULL, 0);
		pg_ok(c, r, "UPDATE");
		if (strcmp(PQcmdTuples(r), kbuf) != 0)
			fail("notify publisher: round %u updated %s rows, not %s", round, PQcmdTuples(r), kbuf);
		PQclear(r);
		res.changes += w->h.k;
	}
	res.end_ns = now_ns();
	r = PQexec(c, "SELECT pg_notify('" CHANNEL "', 'END')");
	pg_ok(c, r, "NOTIFY END");
	PQclear(r);
	res.cpu_ns = cpu_self_ns() - cpu0;
	res.ok = 1;
	write_all(out, &res, sizeof(res));
	hold(go);
	PQfinish(c);
}

/* ---- the driver ---- */

struct child {
	pid_t pid;
	int out; /* what it writes */
	int go;	 /* what the parent writes (publisher) */
	struct ready_msg rd;
	struct result_msg res;
};

static struct child kids[MAX_CONSUMERS + 1];
static int nkids;

static void kill_kids(void)
{
	for (int i = 0; i < nkids; i++)
		if (kids[i].pid > 0)
			kill(kids[i].pid, SIGKILL);
}

static void parent_fail(const char *what)
{
	kill_kids();
	fail("%s", what);
}

typedef void (*child_fn)(int idx, int out, int go);

static struct child *spawn(child_fn fn, int idx)
{
	struct child *k = &kids[nkids++];
	int po[2], pg[2];

	if (pipe(po) < 0 || pipe(pg) < 0)
		parent_fail("pipe");
	fflush(NULL);
	k->pid = fork();
	if (k->pid < 0)
		parent_fail("fork");
	if (k->pid == 0) {
		close(po[0]);
		close(pg[1]);
		fn(idx, po[1], pg[0]);
		_exit(0);
	}
	close(po[1]);
	close(pg[0]);
	k->out = po[0];
	k->go = pg[1];
	if (read_full(k->out, &k->rd, sizeof(k->rd)) < 0 || !k->rd.ok)
		parent_fail("a child failed before it was ready");
	return k;
}

static struct sub_workload W;
static const char *g_conninfo;
static int g_port;
static uint32_t g_ncons;
static long g_pipeline = 1000;

static void run_redis_consumer(int idx, int out, int go)
{
	(void)go;
	redis_consumer(&W, g_port, (uint32_t)idx, g_ncons, out);
}
static void run_redis_publisher(int idx, int out, int go)
{
	(void)idx;
	redis_publisher(&W, g_port, g_ncons, g_pipeline, out, go);
}
static void run_notify_consumer(int idx, int out, int go)
{
	notify_consumer(&W, g_conninfo, (uint32_t)idx, g_ncons, out, go);
}
static void run_notify_publisher(int idx, int out, int go)
{
	(void)idx;
	notify_publisher(&W, g_conninfo, out, go);
}

/* consumers, then the publisher; go; results.  server_pids: the processes
 * whose CPU counts as the server's (redis-server, or the backends added
 * here); postmaster > 0: the whole cluster too */
static void drive(child_fn consumer, child_fn publisher, int redis_pid, int notify)
{
	struct child *pub;
	int spids[MAX_CONSUMERS + 2], nsp = 0, postmaster = 0;
	int64_t s0[MAX_CONSUMERS + 2], s1, server = 0, clients = 0, last = 0;
	static struct procset c0, c1;
	uint64_t by[4] = {0, 0, 0, 0}, changes = 0;
	uint32_t i;

	for (i = 0; i < g_ncons; i++) {
		struct child *k = spawn(consumer, (int)i);

		if (notify)
			spids[nsp++] = k->rd.backend_pid;
	}
	pub = spawn(publisher, 0);
	if (notify) {
		spids[nsp++] = pub->rd.backend_pid;
		postmaster = proc_ppid(pub->rd.backend_pid);
		if (postmaster <= 1)
			parent_fail("no postmaster above the publisher's backend (a remote server?)");
		cluster_snapshot(&c0, postmaster);
	} else
		spids[nsp++] = redis_pid;
	for (int j = 0; j < nsp; j++)
		if ((s0[j] = proc_cpu_ns(spids[j])) < 0)
			parent_fail("cannot read a server process's CPU time in /proc (a remote server?)");
	write_all(pub->go, "g", 1);
	for (int j = nkids - 1; j >= 0; j--) { /* the publisher first: if it fails, no waiting for the consumers */
		if (read_full(kids[j].out, &kids[j].res, sizeof(kids[j].res)) < 0 || !kids[j].res.ok)
			parent_fail("a child failed or ran out of time (SUB_MAX_SECONDS)");
	}
	for (int j = 0; j < nsp; j++) {
		if ((s1 = proc_cpu_ns(spids[j])) < 0)
			parent_fail("a server process ended during the run");
		server += s1 - s0[j];
	}
	if (notify)
		cluster_snapshot(&c1, postmaster);
	for (int j = 0; j < nkids; j++)
		if (write(kids[j].go, "x", 1) < 0) /* they may disconnect now (or have gone) */
			continue;
	for (int j = 0; j < nkids; j++) {
		int st;

		waitpid(kids[j].pid, &st, 0);
		kids[j].pid = 0;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail("a child exited with status %d", st);
		clients += kids[j].res.cpu_ns;
		if (&kids[j] == pub)
			continue;
		for (int e = 0; e < 4; e++)
			by[e] += kids[j].res.by[e];
		changes += kids[j].res.changes;
		if (kids[j].res.t_ns > last)
			last = kids[j].res.t_ns;
	}
	if (g_ncons == 0) /* no consumers (the UPDATEs alone): the publisher's time */
		last = pub->res.end_ns;
	printf("events=%llu change=%llu enter=%llu exit=%llu expected=%llu changes=%llu published=%llu wall_ns=%lld "
	       "clients_cpu_ns=%lld server_cpu_ns=%lld cluster_cpu_ns=%lld\n",
	       (unsigned long long)(by[1] + by[2] + by[3]), (unsigned long long)by[1], (unsigned long long)by[2],
	       (unsigned long long)by[3], (unsigned long long)W.h.expected_events, (unsigned long long)changes,
	       (unsigned long long)pub->res.changes, (long long)(last - pub->res.t_ns), (long long)clients,
	       (long long)server, notify ? (long long)cluster_delta(&c0, &c1) : -1LL);
}

static uint32_t arg_u32(const char *s, const char *what)
{
	char *e;
	unsigned long v = strtoul(s, &e, 10);

	if (*s == 0 || *e != 0 || v > 1000000000UL)
		fail("%s: '%s' is not a count", what, s);
	return (uint32_t)v;
}

static void write_csv(const char *dir)
{
	const struct sub_wl_header *h = &W.h;
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/locations.csv", dir);
	if (!(f = fopen(path, "w")))
		fail("%s: %s", path, strerror(errno));
	for (uint32_t i = 0; i < h->n; i++)
		fprintf(f, "%u,%.9f,%.9f,%d,%d\n", i + 1, W.lon[i], W.lat[i], W.speed[i], W.cong[i]);
	if (fclose(f) != 0)
		fail("%s: %s", path, strerror(errno));
	snprintf(path, sizeof(path), "%s/changes.csv", dir);
	if (!(f = fopen(path, "w")))
		fail("%s: %s", path, strerror(errno));
	for (size_t i = 0; i < (size_t)h->r * h->k; i++)
		fprintf(f, "%zu,%u,%d,%d\n", i / h->k, W.changes[i].id, W.changes[i].new_speed, W.changes[i].new_cong);
	if (fclose(f) != 0)
		fail("%s: %s", path, strerror(errno));
	snprintf(path, sizeof(path), "%s/subscriptions.csv", dir);
	if (!(f = fopen(path, "w")))
		fail("%s: %s", path, strerror(errno));
	for (uint32_t j = 0; j < h->s; j++) {
		const struct sub_box *b = &W.subs[j];

		fprintf(f, "%u,%.9f,%.9f,%.9f,%.9f,%s,%s,%s\n", j + 1, b->xmin, b->ymin, b->xmax, b->ymax,
			b->cond == SUB_COND_NONE ? "" : "congestion_at_least", b->cond == SUB_COND_NONE ? "" : "3",
			b->events == SUB_EVENTS_CHANGE ? "change" : "enter_exit");
	}
	if (fclose(f) != 0)
		fail("%s: %s", path, strerror(errno));
}

static void usage(void)
{
	fprintf(stderr, "usage: sub_baselines gen FILE N S R K SEED | info FILE | csv FILE DIR\n"
			"       | redis FILE PORT SERVER_PID CONSUMERS [PIPELINE] | notify FILE CONNINFO CONSUMERS\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *max = getenv("SUB_MAX_SECONDS");

	deadline_ns = now_ns() + (int64_t)(max ? atoi(max) : 300) * 1000000000;
	signal(SIGPIPE, SIG_IGN);
	if (argc < 3)
		usage();
	if (strcmp(argv[1], "gen") == 0) {
		if (argc != 8)
			usage();
		if (sub_wl_generate(&W, arg_u32(argv[3], "N"), arg_u32(argv[4], "S"), arg_u32(argv[5], "R"),
				    arg_u32(argv[6], "K"), strtoull(argv[7], NULL, 10)) < 0)
			fail("generate: %s (K must not exceed N)", strerror(errno));
		if (sub_wl_write(&W, argv[2]) < 0)
			fail("%s: %s", argv[2], strerror(errno));
	} else if (sub_wl_read(&W, argv[2]) < 0)
		return 1;
	if (strcmp(argv[1], "gen") == 0 || strcmp(argv[1], "info") == 0) {
		printf("n=%u s=%u r=%u k=%u seed=%llu expected=%llu change=%llu enter=%llu exit=%llu\n", W.h.n, W.h.s,
		       W.h.r, W.h.k, (unsigned long long)W.h.seed, (unsigned long long)W.h.expected_events,
		       (unsigned long long)W.h.expected_change, (unsigned long long)W.h.expected_enter,
		       (unsigned long long)W.h.expected_exit);
	} else if (strcmp(argv[1], "csv") == 0 && argc == 4) {
		write_csv(argv[3]);
	} else if (strcmp(argv[1], "redis") == 0 && (argc == 6 || argc == 7)) {
		g_port = (int)arg_u32(argv[3], "PORT");
		g_ncons = arg_u32(argv[5], "CONSUMERS");
		if (argc == 7)
			g_pipeline = (long)arg_u32(argv[6], "PIPELINE");
		if (g_ncons < 1 || g_ncons > MAX_CONSUMERS || g_pipeline < 1 || g_pipeline > 100000)
			fail("CONSUMERS 1-%d, PIPELINE 1-100000", MAX_CONSUMERS);
		drive(run_redis_consumer, run_redis_publisher, (int)arg_u32(argv[4], "SERVER_PID"), 0);
	} else if (strcmp(argv[1], "notify") == 0 && argc == 5) {
		g_conninfo = argv[3];
		g_ncons = arg_u32(argv[4], "CONSUMERS");
		if (g_ncons > MAX_CONSUMERS)
			fail("CONSUMERS 0-%d (0: the UPDATEs alone, with no trigger installed)", MAX_CONSUMERS);
		drive(run_notify_consumer, run_notify_publisher, 0, 1);
	} else
		usage();
	sub_wl_free(&W);
	return 0;
}
