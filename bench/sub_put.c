/*
 * bench/sub_put.c: trafficdb's subscriptions fed by trafficdb_put (issue 32),
 * on the workload of bench/sub_baselines (bench/sub_workload.h), driven by
 * bench/sub_baselines.sh (side "put").
 *
 *   sub_put FILE SHM_NAME CONNINFO CONSUMERS [BATCH]
 *
 * The cluster at CONNINFO has the workload's map loaded (one location per
 * point, ids 1..n) and its subscriptions as rows of trafficdb.subscriptions
 * (name: the workload's subscription number, 1..s), as the script makes them.
 *
 * 1. The producer process opens its writer and puts the initial values back
 *    (trafficdb_put_many, then trafficdb_sync), so that every run starts from
 *    the same traffic with a producer already running (its lane and the
 *    map's pages warm, as the Redis publisher's connection is open).
 * 2. CONSUMERS processes subscribe through the shared-memory rings
 *    (trafficdb_subscribe, TRAFFICDB_AREA_SUBSCRIPTIONS: the events of every
 *    row) as one round-robin group: each event goes to one of them.  One
 *    trafficdb.publish() then makes the daemon attach them.
 * 3. One producer process puts every change of every round with
 *    trafficdb_put_many(TRAFFICDB_ASYNC | TRAFFICDB_WAIT), BATCH updates a
 *    call (default 1000, as the Redis publisher's pipeline), and after each
 *    round waits for it to be published (trafficdb_sync): the daemon then
 *    makes the generation at once (group commit).  With SUB_PUT_END=batch
 *    it ends each round with trafficdb_end_batch instead, which does not
 *    wait: the daemon publishes the round at once while the next one is
 *    put (one trafficdb_sync after the last).  Either way rounds never share
 *    a generation, so enter/exit are those between consecutive rounds (a
 *    round split over two generations gives the same events: its locations
 *    are distinct).
 * 4. Each consumer takes its events (trafficdb_receive) and checks each one:
 *    the change it reports (its location's change in the workload with those
 *    old and new speeds and congestions) lies in the box of the subscription
 *    it names and gives that kind there; it counts events by kind and notes
 *    when it took the last one.
 *
 * Printed (one line, key=value, as bench/sub_baselines): events and by kind,
 * expected, wrong (events that fail the check), overruns and dropped (the
 * OVERRUN events taken and the events they say were dropped: a consumer's
 * ring, trafficdb.subscriber_ring_events, held less than it fell behind),
 * changes, published, wall_ns
 * (the producer's first put to the last event taken by any consumer),
 * clients_cpu_ns (producer + consumers, getrusage from when they are ready),
 * server_cpu_ns (the daemon: /proc/<pid>/task/<tid>/schedstat before and
 * after) and cluster_cpu_ns (the postmaster and every child of it); put_ns
 * and sync_ns, the producer's time in trafficdb_put_many and in
 * trafficdb_sync over the rounds (where a round waits: the daemon's cycle).
 * Everything is bounded by SUB_MAX_SECONDS (300).
 */
#include "sub_workload.h"
#include "sub_proc.h"

#include <libpq-fe.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "trafficdb.h"

#define MAX_CONSUMERS 64
#define GROUP "sub_put_bench"

struct shared {
	_Atomic uint64_t by[4];
	_Atomic uint64_t wrong;
	_Atomic uint64_t overruns; /* TRAFFICDB_EVENT_OVERRUN events taken */
	_Atomic uint64_t dropped;  /* the events they say were dropped */
	_Atomic int64_t last_ns;
	_Atomic int64_t t0_ns;
	_Atomic int ready;
	_Atomic int go;
	_Atomic int done;  /* the producer has put and synced everything */
	_Atomic int stop;  /* the parent: consumers may leave */
	_Atomic int failed;
	int64_t cpu_ns[MAX_CONSUMERS + 1];
	uint64_t published;
	int64_t put_ns, sync_ns; /* the producer's time in put_many and in trafficdb_sync, all rounds */
};

static struct sub_workload W;
static struct shared *S;
static const char *g_name;
static uint32_t g_ncons;
static uint32_t g_batch = 1000;
static int g_end_batch;	/* SUB_PUT_END=batch: rounds end with trafficdb_end_batch, not trafficdb_sync */
static int32_t *sub_of_id; /* trafficdb.subscriptions id -> workload subscription index, -1 */
static uint32_t max_sub_id;
static uint32_t *loc_start, *loc_changes; /* location id -> its changes (indexes in W.changes), in order */

static PGconn *pg_connect(const char *conninfo)
{
	PGconn *c = PQconnectdb(conninfo);

	if (PQstatus(c) != CONNECTION_OK)
		fail("connect '%s': %s", conninfo, PQerrorMessage(c));
	return c;
}

static PGresult *pg_query(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);

	if (PQresultStatus(r) != PGRES_TUPLES_OK && PQresultStatus(r) != PGRES_COMMAND_OK)
		fail("%s: %s", sql, PQerrorMessage(c));
	return r;
}

/* the rows' ids, by their name (the workload's subscription number 1..s) */
static void load_sub_ids(PGconn *c)
{
	PGresult *r = pg_query(c, "SELECT id, name FROM trafficdb.subscriptions ORDER BY id");
	int n = PQntuples(r);

	if ((uint32_t)n != W.h.s)
		fail("trafficdb.subscriptions has %d rows, the workload %u subscriptions", n, W.h.s);
	max_sub_id = (uint32_t)strtoul(PQgetvalue(r, n - 1, 0), NULL, 10);
	sub_of_id = malloc(sizeof(int32_t) * ((size_t)max_sub_id + 1));
	if (!sub_of_id)
		fail("out of memory");
	for (uint32_t i = 0; i <= max_sub_id; i++)
		sub_of_id[i] = -1;
	for (int i = 0; i < n; i++) {
		unsigned long id = strtoul(PQgetvalue(r, i, 0), NULL, 10);
		unsigned long j = strtoul(PQgetvalue(r, i, 1), NULL, 10);

		if (id > max_sub_id || j < 1 || j > W.h.s)
			fail("trafficdb.subscriptions row %lu is named '%s', not a subscription number 1-%u", id,
			     PQgetvalue(r, i, 1), W.h.s);
		sub_of_id[id] = (int32_t)(j - 1);
	}
	PQclear(r);
}

static void index_changes(void)
{
	const struct sub_wl_header *h = &W.h;
	size_t total = (size_t)h->r * h->k;

	loc_start = calloc((size_t)h->n + 2, sizeof(uint32_t));
	loc_changes = malloc(sizeof(uint32_t) * (total ? total : 1));
	if (!loc_start || !loc_changes)
		fail("out of memory");
	for (size_t i = 0; i < total; i++)
		loc_start[W.changes[i].id]++;
	for (uint32_t i = 0; i <= h->n; i++)
		loc_start[i + 1] += loc_start[i];
	for (size_t i = total; i-- > 0;)
		loc_changes[--loc_start[W.changes[i].id]] = (uint32_t)i;
	/* loc_start[id] .. loc_start[id + 1]: location id's changes in workload order */
}

/* The change an event reports: its location's change with those old and new values, or NULL. */
static const struct sub_change *change_of(const trafficdb_event *e)
{
	uint64_t id = e->location_id;

	if (id < 1 || id > W.h.n)
		return NULL;
	for (uint32_t i = loc_start[id]; i < loc_start[id + 1]; i++) {
		const struct sub_change *c = &W.changes[loc_changes[i]];

		if (c->old_speed == e->old_speed_kmh && c->new_speed == e->new_speed_kmh &&
		    c->old_cong == e->old_congestion && c->new_cong == e->new_congestion)
			return c;
	}
	return NULL;
}

static trafficdb_update update_of(uint32_t id, int speed, int cong)
{
	trafficdb_update u;

	memset(&u, 0, sizeof(u));
	u.location_id = id;
	u.speed_kmh = (float)speed;
	u.congestion = (uint8_t)cong;
	u.has = TRAFFICDB_HAS_SPEED | TRAFFICDB_HAS_CONGESTION;
	return u;
}

static void put_all(trafficdb_writer *w, const trafficdb_update *u, size_t n)
{
	size_t done = 0;

	while (done < n) {
		size_t take = n - done < g_batch ? n - done : g_batch, got = 0;
		int rc = trafficdb_put_many(w, u + done, take, TRAFFICDB_ASYNC | TRAFFICDB_WAIT, &got);

		done += got;
		if (rc != TRAFFICDB_OK)
			fail("trafficdb_put_many: %s: %s", trafficdb_strerror(rc), trafficdb_writer_errmsg(w));
		if (now_ns() > deadline_ns)
			fail("out of time putting (SUB_MAX_SECONDS)");
	}
}

static void sync_all(trafficdb_writer *w, const char *what)
{
	int rc = trafficdb_sync(w, remaining_ms() > 0 ? 60000 : 1);

	if (rc != TRAFFICDB_OK)
		fail("trafficdb_sync (%s): %s: %s", what, trafficdb_strerror(rc), trafficdb_writer_errmsg(w));
}

static void consumer(uint32_t idx)
{
	trafficdb_filter f;
	trafficdb_subscriber *s;
	trafficdb_event ev[256];
	uint64_t by[4] = {0, 0, 0, 0}, wrong = 0, overruns = 0, dropped = 0;
	int64_t cpu0, last = 0;
	int rc;

	memset(&f, 0, sizeof(f));
	f.area = TRAFFICDB_AREA_SUBSCRIPTIONS;
	if ((rc = trafficdb_subscribe(g_name, &f, GROUP, TRAFFICDB_GROUP_ROUND_ROBIN, &s)) != TRAFFICDB_OK)
		fail("trafficdb_subscribe: %s: %s", trafficdb_strerror(rc), trafficdb_subscriber_errmsg(NULL));
	cpu0 = cpu_self_ns();
	atomic_fetch_add(&S->ready, 1);
	for (;;) {
		int n = trafficdb_receive(s, ev, 256, 50);
		int64_t t;

		if (n < 0 && n != TRAFFICDB_SYSTEM)
			fail("trafficdb_receive: %s: %s", trafficdb_strerror(n), trafficdb_subscriber_errmsg(s));
		if (n <= 0) {
			if (atomic_load(&S->stop) || atomic_load(&S->failed) || now_ns() > deadline_ns)
				break;
			continue;
		}
		t = now_ns();
		for (int i = 0; i < n; i++) {
			const trafficdb_event *e = &ev[i];
			int32_t j = e->subscriber <= max_sub_id ? sub_of_id[e->subscriber] : -1;
			const struct sub_change *c = change_of(e);
			int want = SUB_EV_NONE;

			if (e->kind == TRAFFICDB_EVENT_OVERRUN) {
				/* the ring was full: location_id events were dropped (counted apart, not as wrong) */
				overruns++;
				dropped += e->location_id;
				continue;
			}
			if (e->kind < 1 || e->kind > 3) {
				wrong++;
				continue;
			}
			/* the subscription holds the location, and the change gives that kind */
			if (j >= 0 && c != NULL && sub_in_box(&W.subs[j], W.lon[c->id - 1], W.lat[c->id - 1]))
				want = sub_event(&W.subs[j], c);
			if (want != e->kind)
				wrong++;
			by[e->kind]++;
		}
		last = t;
		for (int k = 1; k <= 3; k++) { /* the parent watches the total */
			atomic_fetch_add(&S->by[k], by[k]);
			by[k] = 0;
		}
		{
			int64_t prev = atomic_load(&S->last_ns);

			while (last > prev && !atomic_compare_exchange_weak(&S->last_ns, &prev, last))
				;
		}
	}
	atomic_fetch_add(&S->wrong, wrong);
	atomic_fetch_add(&S->overruns, overruns);
	atomic_fetch_add(&S->dropped, dropped);
	S->cpu_ns[idx] = cpu_self_ns() - cpu0;
	trafficdb_unsubscribe(s);
}

/* 1: the initial values back in, published, through the producer's own writer */
static void restore_initial(trafficdb_writer *w)
{
	const struct sub_wl_header *h = &W.h;
	trafficdb_update *u = malloc(sizeof(trafficdb_update) * h->n);

	if (!u)
		fail("out of memory");
	for (uint32_t i = 0; i < h->n; i++)
		u[i] = update_of(i + 1, W.speed[i], W.cong[i]);
	put_all(w, u, h->n);
	sync_all(w, "the initial values");
	free(u);
}

static void producer(void)
{
	const struct sub_wl_header *h = &W.h;
	trafficdb_writer *w;
	trafficdb_update *u = malloc(sizeof(trafficdb_update) * h->k);
	int64_t cpu0;
	int rc;

	if (!u)
		fail("out of memory");
	if ((rc = trafficdb_writer_open(g_name, &w)) != TRAFFICDB_OK)
		fail("trafficdb_writer_open: %s: %s", trafficdb_strerror(rc), trafficdb_writer_errmsg(NULL));
	trafficdb_writer_set_timeout(w, 60000);
	restore_initial(w); /* before any consumer subscribes: they get none of its events */
	cpu0 = cpu_self_ns();
	atomic_fetch_add(&S->ready, 1);
	while (!atomic_load(&S->go)) {
		if (atomic_load(&S->failed) || now_ns() > deadline_ns)
			fail("the run was called off before it started");
		usleep(200);
	}
	atomic_store(&S->t0_ns, now_ns());
	for (uint32_t rd = 0; rd < h->r; rd++) {
		const struct sub_change *c = &W.changes[(size_t)rd * h->k];

		for (uint32_t i = 0; i < h->k; i++)
			u[i] = update_of(c[i].id, c[i].new_speed, c[i].new_cong);
		{
			int64_t t0 = now_ns(), t1, t2;

			put_all(w, u, h->k);
			t1 = now_ns();
			if (g_end_batch) {
				/* published at once, in generations of its own; the next round is put meanwhile */
				int rc = trafficdb_end_batch(w, TRAFFICDB_WAIT);

				if (rc != TRAFFICDB_OK)
					fail("trafficdb_end_batch: %s: %s", trafficdb_strerror(rc), trafficdb_writer_errmsg(w));
			} else
				sync_all(w, "a round"); /* published: the next round goes into a later generation */
			t2 = now_ns();
			S->put_ns += t1 - t0;
			S->sync_ns += t2 - t1;
			if (getenv("SUB_PUT_VERBOSE"))
				fprintf(stderr, "sub_put: round %u: put %.2f ms, sync %.2f ms\n", rd, (t1 - t0) / 1e6,
					(t2 - t1) / 1e6);
		}
		S->published += h->k;
	}
	if (g_end_batch) {
		int64_t t1 = now_ns();

		sync_all(w, "the last round");
		S->sync_ns += now_ns() - t1;
	}
	S->cpu_ns[g_ncons] = cpu_self_ns() - cpu0;
	atomic_store(&S->done, 1);
	trafficdb_writer_close(w);
	free(u);
}

static pid_t kids[MAX_CONSUMERS + 1];
static int nkids;

static void spawn(int idx)
{
	pid_t p;

	fflush(NULL);
	p = fork();
	if (p < 0)
		fail("fork: %s", strerror(errno));
	if (p == 0) {
		if (idx < (int)g_ncons)
			consumer((uint32_t)idx);
		else
			producer();
		_exit(0);
	}
	kids[nkids++] = p;
}

static void kill_kids(void)
{
	for (int i = 0; i < nkids; i++)
		if (kids[i] > 0)
			kill(kids[i], SIGKILL);
}

static void wait_for(int (*cond)(void), const char *what)
{
	while (!cond()) {
		for (int i = 0; i < nkids; i++) {
			int st;

			if (kids[i] > 0 && waitpid(kids[i], &st, WNOHANG) == kids[i]) {
				kids[i] = 0;
				if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
					atomic_store(&S->failed, 1);
					kill_kids();
					fail("a child failed while waiting for %s (status %d)", what, st);
				}
			}
		}
		if (now_ns() > deadline_ns) {
			atomic_store(&S->failed, 1);
			kill_kids();
			fail("out of time waiting for %s (SUB_MAX_SECONDS)", what);
		}
		usleep(500);
	}
}

static int producer_ready(void) { return atomic_load(&S->ready) == 1; }
static int all_ready(void) { return atomic_load(&S->ready) == (int)g_ncons + 1; }
static int all_done(void)
{
	uint64_t total = atomic_load(&S->by[1]) + atomic_load(&S->by[2]) + atomic_load(&S->by[3]);

	return atomic_load(&S->done) && total >= W.h.expected_events;
}
static int64_t done_at;
static int done_or_quiet(void)
{
	/* every event expected, or the producer done and 2 s without more */
	if (all_done())
		return 1;
	if (atomic_load(&S->done)) {
		if (done_at == 0)
			done_at = now_ns();
		return now_ns() - done_at > 2000000000LL;
	}
	return 0;
}

static uint32_t arg_u32(const char *s, const char *what, uint32_t lo, uint32_t hi)
{
	char *e;
	unsigned long v = strtoul(s, &e, 10);

	if (*s == 0 || *e != 0 || v < lo || v > hi)
		fail("%s: '%s' is not a whole number from %u to %u", what, s, lo, hi);
	return (uint32_t)v;
}

int main(int argc, char **argv)
{
	const char *max = getenv("SUB_MAX_SECONDS");
	const char *end = getenv("SUB_PUT_END");
	PGconn *pg;
	PGresult *r;
	int daemon, postmaster;
	int64_t d0, d1;
	static struct procset c0, c1;
	int64_t clients = 0;

	deadline_ns = now_ns() + (int64_t)(max ? atoi(max) : 300) * 1000000000;
	signal(SIGPIPE, SIG_IGN);
	if (argc != 5 && argc != 6) {
		fprintf(stderr, "usage: sub_put FILE SHM_NAME CONNINFO CONSUMERS [BATCH]\n");
		return 2;
	}
	if (end != NULL && strcmp(end, "batch") != 0 && strcmp(end, "sync") != 0)
		fail("SUB_PUT_END: '%s' is neither batch nor sync", end);
	g_end_batch = end != NULL && strcmp(end, "batch") == 0;
	if (sub_wl_read(&W, argv[1]) < 0)
		return 1;
	g_name = argv[2];
	g_ncons = arg_u32(argv[4], "CONSUMERS", 1, MAX_CONSUMERS);
	if (argc == 6)
		g_batch = arg_u32(argv[5], "BATCH", 1, 65536);
	S = mmap(NULL, sizeof(*S), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (S == MAP_FAILED)
		fail("mmap: %s", strerror(errno));
	memset(S, 0, sizeof(*S));
	pg = pg_connect(argv[3]);
	load_sub_ids(pg);
	index_changes();
	r = pg_query(pg, "SELECT daemon_pid FROM trafficdb.status");
	daemon = atoi(PQgetvalue(r, 0, 0));
	PQclear(r);
	if (daemon <= 0 || (postmaster = proc_ppid(daemon)) <= 1)
		fail("no local trafficdb daemon (trafficdb.status.daemon_pid %d)", daemon);

	spawn((int)g_ncons); /* the producer, which puts the initial values back first */
	wait_for(producer_ready, "the producer to put the initial values");
	for (uint32_t i = 0; i < g_ncons; i++)
		spawn((int)i);
	wait_for(all_ready, "the consumers to subscribe");
	PQclear(pg_query(pg, "SELECT trafficdb.publish()")); /* the daemon attaches the consumers */

	if ((d0 = proc_cpu_ns(daemon)) < 0)
		fail("cannot read the daemon's CPU time in /proc");
	cluster_snapshot(&c0, postmaster);
	atomic_store(&S->go, 1);
	wait_for(done_or_quiet, "the events");
	if ((d1 = proc_cpu_ns(daemon)) < 0)
		fail("the daemon ended during the run");
	cluster_snapshot(&c1, postmaster);
	atomic_store(&S->stop, 1);
	for (int i = 0; i < nkids; i++) {
		int st;

		if (kids[i] <= 0)
			continue;
		waitpid(kids[i], &st, 0);
		kids[i] = 0;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail("a child exited with status %d", st);
	}
	for (uint32_t i = 0; i <= g_ncons; i++) {
		clients += S->cpu_ns[i];
		if (getenv("SUB_PUT_VERBOSE"))
			fprintf(stderr, "sub_put: %s %u: %.1f ms of CPU\n", i < g_ncons ? "consumer" : "producer", i,
				S->cpu_ns[i] / 1e6);
	}
	{
		uint64_t c = S->by[1], e = S->by[2], x = S->by[3];

		printf("events=%llu change=%llu enter=%llu exit=%llu expected=%llu wrong=%llu overruns=%llu dropped=%llu "
		       "changes=%llu published=%llu "
		       "wall_ns=%lld clients_cpu_ns=%lld server_cpu_ns=%lld cluster_cpu_ns=%lld put_ns=%lld sync_ns=%lld "
		       "rounds=%u\n",
		       (unsigned long long)(c + e + x), (unsigned long long)c, (unsigned long long)e,
		       (unsigned long long)x, (unsigned long long)W.h.expected_events, (unsigned long long)S->wrong,
		       (unsigned long long)S->overruns, (unsigned long long)S->dropped,
		       (unsigned long long)S->published, (unsigned long long)S->published,
		       (long long)(S->last_ns - S->t0_ns), (long long)clients, (long long)(d1 - d0),
		       (long long)cluster_delta(&c0, &c1), (long long)S->put_ns, (long long)S->sync_ns, W.h.r);
	}
	PQfinish(pg);
	sub_wl_free(&W);
	return 0;
}
