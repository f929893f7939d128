/*
 * writer.c
 *	  Control block, segments, publication and reclamation; see writer.h and
 *	  the protocol in shm.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "writer.h"

#include "clock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* segment names tried before giving up when others hold them */
#define TDB_NAME_ATTEMPTS	64

/*
 * How long making one object of huge pages may take (tdb_shm_make_huge):
 * 0.5-6 ms per MB measured here, so a traffic buffer of up to about 100 MB
 * and a map of up to about 1-10 GB become huge whole; a larger one only
 * its first part.
 */
#define HUGE_TRAFFIC_BUDGET_MS	100
#define HUGE_MAP_BUDGET_MS		5000

static uint64_t
new_instance_id(void)
{
	uint64_t	id = 0;

	if (getrandom(&id, sizeof(id), 0) != sizeof(id) || id == 0)
	{
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		id = ((uint64_t) ts.tv_sec * 1000000007ull) ^ (uint64_t) ts.tv_nsec ^
			((uint64_t) getpid() << 40);
	}
	return id ? id : 1;
}

/*
 * Remove every shared memory object named "<prefix>.*" (a dead instance's),
 * except the ownership lock unless with_lock.
 */
static void
unlink_leftovers(const char *prefix, bool with_lock)
{
	DIR		   *d = opendir("/dev/shm");
	struct dirent *e;
	size_t		plen = strlen(prefix + 1);

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL)
	{
		if (strncmp(e->d_name, prefix + 1, plen) == 0 && e->d_name[plen] == '.' &&
			(with_lock || strcmp(e->d_name + plen, ".lock") != 0))
		{
			char		name[NAME_MAX + 2];

			snprintf(name, sizeof(name), "/%s", e->d_name);
			shm_unlink(name);
		}
	}
	closedir(d);
}

/*
 * Traffic segment i is about to be rewritten or freed: descriptors of
 * versions that are no longer live but still name it stop holding their
 * generation.  Otherwise a pin of such a descriptor (a reader stopped inside
 * tdb_pin, which would retry, or a word a group member wrote) would make it
 * look pinned, and revoking it would free the segment under the version
 * that uses it now, perhaps the active one.
 */
static void
forget_versions_on(TdbWriter *w, uint32_t i)
{
	for (uint32_t v = 0; v < TDB_MAX_VERSIONS; v++)
		if (w->ctl->versions[v].traffic_seg == i &&
			__atomic_load_n(&w->ctl->versions[v].generation, __ATOMIC_RELAXED) != 0)
			__atomic_store_n(&w->ctl->versions[v].generation, 0, __ATOMIC_SEQ_CST);
}

static void
free_segment(TdbWriter *w, uint32_t i)
{
	char		name[TDB_SHM_NAME_MAX + 24];
	TdbSegmentDesc *d = &w->ctl->segments[i];

	if (d->kind == TDB_SEG_TRAFFIC)
		forget_versions_on(w, i);
	tdb_shm_seg_name(name, w->prefix, d->seq);
	shm_unlink(name);
	tdb_shm_unmap(w->seg_addr[i], d->size);
	w->seg_addr[i] = NULL;
	w->seg_huge[i] = 0;
	d->kind = TDB_SEG_FREE;
	d->size = 0;
	d->seq = 0;
}

/*
 * Reading <prefix>.readers, which members of shm_group can truncate: a
 * SIGBUS there must not kill the daemon.  The scan runs with bus_jmp set and
 * a fault jumps back out of it; any other SIGBUS gets the previous handler.
 */
static sigjmp_buf *volatile bus_jmp = NULL;
static struct sigaction prev_bus;
static bool bus_installed = false;

static void
bus_handler(int sig, siginfo_t *info, void *ctx)
{
	sigjmp_buf *j = bus_jmp;

	if (j != NULL)
	{
		bus_jmp = NULL;
		siglongjmp(*j, 1);
	}
	/* not ours: put the previous disposition back; the access faults again */
	sigaction(SIGBUS, &prev_bus, NULL);
	(void) sig;
	(void) info;
	(void) ctx;
}

static void
install_bus_handler(void)
{
	struct sigaction sa;

	if (bus_installed)
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = bus_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, &prev_bus) == 0)
		bus_installed = true;
}

static int	create_slots(TdbWriter *w, uint64_t instance, char *err);

bool
tdb_writer_guarded(void (*fn) (void *), void *arg)
{
	sigjmp_buf	jb;

	install_bus_handler();
	if (sigsetjmp(jb, 1) != 0)
		return false;
	bus_jmp = &jb;
	fn(arg);
	bus_jmp = NULL;
	return true;
}

/*
 * The header of a new readers segment, which is group-writable from its
 * creation: a member truncating it at once must cost an error, not a SIGBUS.
 */
static bool
write_slots_header(TdbSlotsHeader *slots, uint32_t nslots, uint64_t instance)
{
	sigjmp_buf	jb;

	if (sigsetjmp(jb, 1) != 0)
		return false;
	bus_jmp = &jb;
	slots->nslots = nslots;
	slots->instance_id = instance;
	atomic_thread_fence(memory_order_release);
	slots->magic = TDB_SLOTS_MAGIC;
	bus_jmp = NULL;
	return true;
}

/*
 * tdb_slots_check of a readers segment found at start, which a group member
 * may be truncating right now: a fault is a failed check, not a SIGBUS.
 */
static int
slots_check_guarded(const TdbSlotsHeader *slots, size_t size, const TdbControl *ctl)
{
	sigjmp_buf	jb;
	int			rc;

	if (sigsetjmp(jb, 1) != 0)
		return TDB_SHM_EINVAL;
	bus_jmp = &jb;
	rc = tdb_slots_check(slots, size, ctl);
	bus_jmp = NULL;
	return rc;
}

/* Copy the external slots' words; false if the segment faulted. */
static bool
copy_external(TdbWriter *w)
{
	sigjmp_buf	jb;
	struct stat st;
	TdbReaderSlot *volatile slots = w->slots->slots;

	if (fstat(w->slots_fd, &st) != 0 || (size_t) st.st_size < w->slots_size)
	{
		snprintf(w->slots_damage, sizeof(w->slots_damage), "truncated to %lld bytes, %zu expected",
				 (long long) st.st_size, w->slots_size);
		return false;
	}
	strcpy(w->slots_damage, "truncated while the daemon read it");
	if (sigsetjmp(jb, 1) != 0)
		return false;
	bus_jmp = &jb;
	/*
	 * A header no new reader would accept (tdb_slots_check) refuses every
	 * external reader.  Repaired in place, from what we know: the readers
	 * attached keep their slots and their pins keep counting.
	 */
	if (__atomic_load_n(&w->slots->magic, __ATOMIC_ACQUIRE) != TDB_SLOTS_MAGIC ||
		w->slots->instance_id != w->ctl->instance_id || w->slots->nslots != w->nslots)
	{
		snprintf(w->slots_damage, sizeof(w->slots_damage), "its header was overwritten (magic %08x, instance %llx)",
				 w->slots->magic, (unsigned long long) w->slots->instance_id);
		w->slots->nslots = w->nslots;
		w->slots->instance_id = w->ctl->instance_id;
		atomic_thread_fence(memory_order_release);
		__atomic_store_n(&w->slots->magic, TDB_SLOTS_MAGIC, __ATOMIC_RELEASE);
		w->slots_repaired++;
	}
	for (uint32_t s = 0; s < w->nslots; s++)
	{
		w->ext_pin[s] = atomic_load_explicit(&slots[s].pin, memory_order_seq_cst);
		w->ext_pid[s] = atomic_load_explicit(&slots[s].pid, memory_order_relaxed);
	}
	bus_jmp = NULL;
	return true;
}

void
tdb_writer_scan_external(TdbWriter *w)
{
	if (w->nslots == 0)
		return;
	if (!copy_external(w))
	{
		char		err[TDB_ERRLEN];
		uint64_t	instance = w->ctl->instance_id;

		/*
		 * Someone with write access to the segment shrank it.  Make it anew
		 * (readers attached to the old one keep their mapping and learn of
		 * any rewrite under them from tdb_reader_revoked); its pins are
		 * void: nobody could have pinned through a truncated slot.
		 */
		tdb_shm_unmap(w->slots, w->slots_size);
		close(w->slots_fd);
		w->slots = NULL;
		w->slots_fd = -1;
		w->slots_rebuilt++;
		memset(w->ext_pin, 0, sizeof(uint64_t) * w->nslots);
		memset(w->ext_pid, 0, sizeof(int32_t) * w->nslots);
		memset(w->ext_alive, 0, sizeof(bool) * w->nslots);
		if (create_slots(w, instance, err) != TDB_SHM_OK)
		{
			/* no readers segment: no external reader can attach; pins are none */
			w->nslots = 0;
		}
		return;
	}
	for (uint32_t s = 0; s < w->nslots; s++)
		w->ext_alive[s] = w->ext_pin[s] != 0 || w->ext_pid[s] != 0 ?
			tdb_slot_alive(w->slots_fd, s) : false;
}

/* Revoke version v: readers pinning it learn so; its traffic object goes. */
static void
revoke_version(TdbWriter *w, uint32_t v)
{
	TdbVersionDesc *d = &w->ctl->versions[v];

	w->revoked++;
	w->last_revoked_generation = d->generation;
	__atomic_store_n(&d->generation, 0, __ATOMIC_SEQ_CST);

	/*
	 * Unlinked, never rewritten: whoever still maps it keeps reading the
	 * version it pinned.  (The map object may be shared with live versions;
	 * reclaim frees it when none uses it, and maps are never rewritten.)
	 */
	if (d->traffic_seg < TDB_MAX_SEGMENTS &&
		w->ctl->segments[d->traffic_seg].kind == TDB_SEG_TRAFFIC)
		free_segment(w, d->traffic_seg);
}

/* Mark the version a pin names, if the pin is of the version there now. */
static void
note_pin(TdbWriter *w, uint64_t p, bool *pinned)
{
	uint32_t	v = TDB_ACTIVE_IDX(p);

	if (p == 0 || v >= TDB_MAX_VERSIONS)
		return;
	/* a pin of a revoked or reused descriptor holds nothing */
	if (w->ctl->versions[v].generation == 0 ||
		w->ctl->versions[v].generation != TDB_ACTIVE_GEN(p))
		return;
	pinned[v] = true;
}

/*
 * Which versions and segments some reader may be reading: the active
 * version, and every version a live pin names that was superseded less than
 * the pin timeout ago.  Pinned versions beyond the timeout are revoked here.
 */
static void
compute_live(TdbWriter *w, bool *live_seg)
{
	uint64_t	active = atomic_load_explicit(&w->ctl->active, memory_order_seq_cst);
	bool		pinned[TDB_MAX_VERSIONS];
	int64_t		now = tdb_wall_us();

	memset(w->version_live, 0, sizeof(w->version_live));
	memset(pinned, 0, sizeof(pinned));
	if (active != 0 && TDB_ACTIVE_IDX(active) < TDB_MAX_VERSIONS)
		w->version_live[TDB_ACTIVE_IDX(active)] = true;
	for (uint32_t s = 0; s < w->nbackend_pins; s++)
		note_pin(w, atomic_load_explicit(&w->backend_pins[s].pin, memory_order_seq_cst), pinned);
	tdb_writer_scan_external(w);
	for (uint32_t s = 0; s < w->nslots; s++)
		if (w->ext_alive[s])
			note_pin(w, w->ext_pin[s], pinned);
	for (uint32_t v = 0; v < TDB_MAX_VERSIONS; v++)
	{
		TdbVersionDesc *d = &w->ctl->versions[v];

		if (!pinned[v] || w->version_live[v])
			continue;
		if (d->superseded_at_us == 0)
			d->superseded_at_us = now;
		if (w->pin_timeout_us > 0 && now - d->superseded_at_us >= w->pin_timeout_us)
			revoke_version(w, v);
		else
			w->version_live[v] = true;
	}
	if (live_seg == NULL)
		return;
	memset(live_seg, 0, sizeof(bool) * TDB_MAX_SEGMENTS);
	for (uint32_t v = 0; v < TDB_MAX_VERSIONS; v++)
	{
		if (!w->version_live[v] || w->ctl->versions[v].generation == 0)
			continue;
		if (w->ctl->versions[v].map_seg < TDB_MAX_SEGMENTS)
			live_seg[w->ctl->versions[v].map_seg] = true;
		if (w->ctl->versions[v].traffic_seg < TDB_MAX_SEGMENTS)
			live_seg[w->ctl->versions[v].traffic_seg] = true;
	}
}

/* Take over a valid control block: map and check what its versions use. */
static void
adopt(TdbWriter *w, TdbWriterOpenInfo *info)
{
	TdbControl *c = w->ctl;
	bool		live_seg[TDB_MAX_SEGMENTS];
	uint64_t	active;
	char		err[TDB_ERRLEN];

	for (uint32_t i = 0; i < TDB_MAX_SEGMENTS; i++)
	{
		char		name[TDB_SHM_NAME_MAX + 24];
		void	   *addr;
		size_t		size;

		if (c->segments[i].kind == TDB_SEG_FREE)
			continue;
		tdb_shm_seg_name(name, w->prefix, c->segments[i].seq);
		if (c->segments[i].kind > TDB_SEG_TRAFFIC ||
			tdb_shm_map(name, true, true, sizeof(TdbObjectHeader), &addr, &size) != TDB_SHM_OK ||
			size != c->segments[i].size)
		{
			if (c->segments[i].kind <= TDB_SEG_TRAFFIC)
				shm_unlink(name);
			if (c->segments[i].kind == TDB_SEG_TRAFFIC)
				forget_versions_on(w, i);
			c->segments[i].kind = TDB_SEG_FREE;
			info->segments_dropped++;
			continue;
		}
		w->seg_addr[i] = addr;
	}

	/* every version still in use must point at objects that validate */
	compute_live(w, live_seg);
	active = atomic_load(&c->active);
	for (uint32_t v = 0; v < TDB_MAX_VERSIONS; v++)
	{
		TdbVersionDesc *d = &c->versions[v];
		bool		map_ok;
		bool		traffic_ok;

		if (!w->version_live[v])
			continue;
		map_ok = d->map_seg < TDB_MAX_SEGMENTS &&
			c->segments[d->map_seg].kind == TDB_SEG_MAP &&
			tdb_map_validate(w->seg_addr[d->map_seg], c->segments[d->map_seg].size,
							 TDB_VALIDATE_FULL, err) == TDB_OBJ_OK;
		traffic_ok = map_ok && d->traffic_seg < TDB_MAX_SEGMENTS &&
			c->segments[d->traffic_seg].kind == TDB_SEG_TRAFFIC &&
			tdb_traffic_validate(w->seg_addr[d->traffic_seg], c->segments[d->traffic_seg].size,
								 TDB_VALIDATE_FULL, w->seg_addr[d->map_seg], err) == TDB_OBJ_OK &&
			((TdbObjectHeader *) w->seg_addr[d->traffic_seg])->generation == d->generation;
		if (map_ok && traffic_ok)
		{
			if (d->generation > info->last_generation)
				info->last_generation = d->generation;
			continue;
		}
		/* corrupt: unpublish the version and drop what failed */
		if (active != 0 && TDB_ACTIVE_IDX(active) == v)
			atomic_store(&c->active, 0);
		if (!map_ok && d->map_seg < TDB_MAX_SEGMENTS &&
			c->segments[d->map_seg].kind != TDB_SEG_FREE)
		{
			free_segment(w, d->map_seg);
			info->segments_dropped++;
		}
		if (map_ok && d->traffic_seg < TDB_MAX_SEGMENTS &&
			c->segments[d->traffic_seg].kind != TDB_SEG_FREE)
		{
			free_segment(w, d->traffic_seg);
			info->segments_dropped++;
		}
		d->generation = 0;
	}
	info->adopted = true;
}

/*
 * Tell readers this control block is finished: the state, then a wake-up of
 * everyone blocked in a futex wait on the notify word (who re-check the state).
 */
static void
mark_stopped(TdbControl *c)
{
	atomic_store(&c->state, TDB_DAEMON_STOPPED);
	atomic_fetch_add(&c->notify, 1);
	syscall(SYS_futex, &c->notify, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Create <prefix>.readers for w->nslots slots of instance; open slots_fd. */
static int
create_slots(TdbWriter *w, uint64_t instance, char *err)
{
	char		slotname[TDB_SHM_NAME_MAX + 24];
	void	   *sp;
	int			rc;

	tdb_shm_name(slotname, w->prefix, "readers");
	w->slots_size = tdb_slots_size(w->nslots);
	rc = tdb_shm_create(slotname, w->slots_size, w->gid, true, &sp);
	if (rc == TDB_SHM_OK)
	{
		w->slots_fd = shm_open(slotname, O_RDONLY | O_CLOEXEC, 0);
		if (w->slots_fd < 0)
		{
			rc = TDB_SHM_ESYS;
			tdb_shm_unmap(sp, w->slots_size);
		}
	}
	if (rc != TDB_SHM_OK)
	{
		snprintf(err, TDB_ERRLEN, "cannot create shared memory object \"%s\": %s", slotname,
				 strerror(errno));
		shm_unlink(slotname);
		return rc;
	}
	w->slots = sp;
	if (!write_slots_header(sp, w->nslots, instance))
	{
		/* a group member truncated it as soon as it existed */
		snprintf(err, TDB_ERRLEN, "shared memory object \"%s\" was truncated while being created",
				 slotname);
		tdb_shm_unmap(sp, w->slots_size);
		close(w->slots_fd);
		w->slots = NULL;
		w->slots_fd = -1;
		shm_unlink(slotname);
		return TDB_SHM_ECORRUPT;
	}
	return TDB_SHM_OK;
}

int
tdb_writer_open(TdbWriter *w, const char *prefix, const TdbWriterConfig *cfg,
				TdbWriterOpenInfo *info, char *err)
{
	char		ctlname[TDB_SHM_NAME_MAX + 24];
	char		slotname[TDB_SHM_NAME_MAX + 24];
	void	   *p = NULL;
	size_t		sz = 0;
	uint64_t	instance;
	int			rc;

	memset(w, 0, sizeof(*w));
	memset(info, 0, sizeof(*info));
	w->slots_fd = -1;
	w->lock_fd = -1;
	if (strlen(prefix) >= TDB_SHM_NAME_MAX || prefix[0] != '/' || strchr(prefix + 1, '/'))
	{
		snprintf(err, TDB_ERRLEN, "shared memory name \"%s\" must start with '/', contain no other '/' and be shorter than %d bytes",
				 prefix, TDB_SHM_NAME_MAX);
		return TDB_SHM_EINVAL;
	}
	strcpy(w->prefix, prefix);
	w->gid = cfg->gid;
	w->nslots = cfg->nexternal_slots;
	w->backend_pins = cfg->backend_pins;
	w->nbackend_pins = cfg->backend_pins ? cfg->nbackend_pins : 0;
	w->pin_timeout_us = cfg->pin_timeout_us;
	w->huge_pages = cfg->huge_pages;
	w->ext_pin = calloc(w->nslots + 1, sizeof(uint64_t));
	w->ext_pid = calloc(w->nslots + 1, sizeof(int32_t));
	w->ext_alive = calloc(w->nslots + 1, sizeof(bool));
	if (w->ext_pin == NULL || w->ext_pid == NULL || w->ext_alive == NULL)
	{
		snprintf(err, TDB_ERRLEN, "out of memory");
		tdb_writer_close(w, false);
		return TDB_SHM_ESYS;
	}

	/* the prefix must be ours before anything under it is touched */
	if (cfg->lock_fd >= 0)
		w->lock_fd = cfg->lock_fd;
	else
	{
		rc = tdb_prefix_lock(prefix, &w->lock_fd, err);
		if (rc != TDB_SHM_OK)
		{
			tdb_writer_close(w, false);
			return rc;
		}
		w->own_lock = true;
	}
	install_bus_handler();

	/* a fixed name another user holds would stop us at every start: say whose */
	if (tdb_shm_prefix_taken(prefix, err))
	{
		tdb_writer_close(w, false);
		return TDB_SHM_ETAKEN;
	}
	tdb_shm_name(ctlname, prefix, "ctl");
	tdb_shm_name(slotname, prefix, "readers");

	if (tdb_shm_map(ctlname, true, true, sizeof(TdbControl), &p, &sz) == TDB_SHM_OK)
	{
		TdbControl *old = p;
		void	   *sp = NULL;
		size_t		ssz = 0;
		int			sfd = -1;

		if (sz == sizeof(TdbControl) && tdb_control_check(old, sz) == TDB_SHM_OK &&
			old->nslots == w->nslots && strcmp(old->prefix, prefix) == 0 &&
			tdb_shm_map_fd(slotname, true, true, sizeof(TdbSlotsHeader), &sp, &ssz, &sfd) == TDB_SHM_OK &&
			slots_check_guarded(sp, ssz, old) == TDB_SHM_OK)
		{
			w->ctl = old;
			w->slots = sp;
			w->slots_size = tdb_slots_size(w->nslots);
			w->slots_fd = sfd;
			if (ssz != w->slots_size)
			{
				/* a group member resized it: start the segment afresh */
				tdb_shm_unmap(sp, ssz);
				close(sfd);
				w->slots = NULL;
				w->slots_fd = -1;
				if ((rc = create_slots(w, old->instance_id, err)) != TDB_SHM_OK)
				{
					tdb_writer_close(w, false);
					return rc;
				}
			}
			old->daemon_pid = getpid();
			old->postmaster_pid = cfg->postmaster_pid;
			adopt(w, info);
			return TDB_SHM_OK;
		}
		if (sp != NULL)
			tdb_shm_unmap(sp, ssz);
		if (sfd >= 0)
			close(sfd);
		/* incompatible: tell its readers to reopen, then start afresh */
		if (sz >= sizeof(TdbControl) && old->magic == TDB_CTL_MAGIC)
			mark_stopped(old);	/* waiters too: they did not wake before */
		tdb_shm_unmap(p, sz);
	}

	unlink_leftovers(prefix, false);
	instance = new_instance_id();

	/* slots first: a reader that finds the control block finds its slots */
	rc = create_slots(w, instance, err);
	if (rc != TDB_SHM_OK)
	{
		tdb_writer_close(w, false);
		return rc;
	}

	rc = tdb_shm_create(ctlname, sizeof(TdbControl), w->gid, false, &p);
	if (rc != TDB_SHM_OK)
	{
		snprintf(err, TDB_ERRLEN, "cannot create shared memory object \"%s\": %s", ctlname,
				 strerror(errno));
		shm_unlink(slotname);
		tdb_writer_close(w, false);
		return rc;
	}
	w->ctl = p;
	w->ctl->version = TDB_SHM_VERSION;
	w->ctl->header_size = sizeof(TdbControl);
	w->ctl->instance_id = instance;
	w->ctl->nslots = w->nslots;
	w->ctl->daemon_pid = getpid();
	w->ctl->postmaster_pid = cfg->postmaster_pid;
	strcpy(w->ctl->prefix, prefix);
	w->ctl->next_seq = 1;
	atomic_store(&w->ctl->state, TDB_DAEMON_STARTING);
	/* the magic last: a block with a magic is complete */
	atomic_thread_fence(memory_order_release);
	w->ctl->magic = TDB_CTL_MAGIC;
	return TDB_SHM_OK;
}

void
tdb_writer_close(TdbWriter *w, bool stopping)
{
	char		name[TDB_SHM_NAME_MAX + 24];

	if (w->ctl != NULL && stopping)
	{
		mark_stopped(w->ctl);
		for (uint32_t i = 0; i < TDB_MAX_SEGMENTS; i++)
			if (w->ctl->segments[i].kind != TDB_SEG_FREE)
			{
				tdb_shm_seg_name(name, w->prefix, w->ctl->segments[i].seq);
				shm_unlink(name);
			}
		tdb_shm_name(name, w->prefix, "ctl");
		shm_unlink(name);
		tdb_shm_name(name, w->prefix, "readers");
		shm_unlink(name);
		if (w->own_lock)
		{
			tdb_shm_name(name, w->prefix, "lock");
			shm_unlink(name);
		}
	}
	if (w->ctl != NULL)
	{
		for (uint32_t i = 0; i < TDB_MAX_SEGMENTS; i++)
			tdb_shm_unmap(w->seg_addr[i], w->ctl->segments[i].size);
		tdb_shm_unmap(w->ctl, sizeof(TdbControl));
	}
	tdb_shm_unmap(w->slots, w->slots_size);
	if (w->slots_fd >= 0)
		close(w->slots_fd);
	if (w->own_lock && w->lock_fd >= 0)
		close(w->lock_fd);
	free(w->ext_pin);
	free(w->ext_pid);
	free(w->ext_alive);
	memset(w, 0, sizeof(*w));
	w->slots_fd = -1;
	w->lock_fd = -1;
}

int
tdb_writer_new_segment(TdbWriter *w, TdbSegKind kind, size_t size, uint32_t *seg, void **addr,
					   char *err)
{
	char		name[TDB_SHM_NAME_MAX + 24];
	uint32_t	i;
	uint64_t	seq;
	int			rc;

	for (i = 0; i < TDB_MAX_SEGMENTS; i++)
		if (w->ctl->segments[i].kind == TDB_SEG_FREE)
			break;
	if (i == TDB_MAX_SEGMENTS)
	{
		snprintf(err, TDB_ERRLEN, "all %d segment descriptors are in use (readers pin old versions)",
				 TDB_MAX_SEGMENTS);
		return TDB_SHM_ENOSLOT;
	}

	/*
	 * Any local user can create <prefix>.<seq> before us: such a name is
	 * skipped (readers find segments through the control block, so any free
	 * number serves), a bounded number of times.
	 */
	for (int attempt = 0;; attempt++)
	{
		seq = w->ctl->next_seq++;
		tdb_shm_seg_name(name, w->prefix, seq);
		rc = tdb_shm_create(name, size, w->gid, false, addr);
		if (rc != TDB_SHM_ETAKEN)
			break;
		w->names_skipped++;
		if (!tdb_shm_name_taken(name, w->skipped_err))
			snprintf(w->skipped_err, sizeof(w->skipped_err), "shared memory name \"%s\" was taken while we created it", name);
		if (attempt >= TDB_NAME_ATTEMPTS)
		{
			snprintf(err, TDB_ERRLEN, "cannot create a shared memory object: %d names in a row were taken by others, the last: %.160s",
					 attempt + 1, w->skipped_err);
			return rc;
		}
		/* jump over a run of names taken in advance */
		if (attempt >= 8)
			w->ctl->next_seq += (uint64_t) 1 << (attempt < 40 ? attempt - 8 : 32);
	}
	if (rc != TDB_SHM_OK)
	{
		snprintf(err, TDB_ERRLEN, "cannot create shared memory object \"%s\" of %zu bytes: %s",
				 name, size, strerror(errno));
		return rc;
	}
	/*
	 * Before anyone writes it: the first writes then fault in 2 MB at a
	 * time.  The copy is bounded: a traffic buffer is made while a
	 * publication waits (SYNC writers with it), a map while load_map does.
	 */
	w->seg_huge[i] = w->huge_pages ?
		tdb_shm_make_huge(*addr, size, kind == TDB_SEG_MAP ? HUGE_MAP_BUDGET_MS : HUGE_TRAFFIC_BUDGET_MS) : 0;
	w->seg_addr[i] = *addr;
	w->ctl->segments[i].seq = seq;
	w->ctl->segments[i].size = size;
	w->ctl->segments[i].kind = kind;
	*seg = i;
	return TDB_SHM_OK;
}

int
tdb_writer_traffic_segment(TdbWriter *w, size_t size, const uint64_t *rank, uint32_t *seg, void **addr,
						   char *err)
{
	bool		live_seg[TDB_MAX_SEGMENTS];
	uint32_t	best = TDB_MAX_SEGMENTS;

	compute_live(w, live_seg);
	for (uint32_t i = 0; i < TDB_MAX_SEGMENTS; i++)
		if (w->ctl->segments[i].kind == TDB_SEG_TRAFFIC && !live_seg[i] &&
			w->ctl->segments[i].size == size && w->seg_addr[i] != NULL &&
			(best == TDB_MAX_SEGMENTS || (rank != NULL && rank[i] > rank[best])))
			best = i;
	if (best < TDB_MAX_SEGMENTS)
	{
		/*
		 * Rewritten in place: first say so in the object itself, so that a
		 * reader whose pin was taken from it (a group member can clear an
		 * external slot) finds the generation changed when it checks after
		 * reading (tdb_reader_revoked), as with a seqlock.
		 */
		(void) __atomic_exchange_n(&((TdbObjectHeader *) w->seg_addr[best])->generation, 0,
								   __ATOMIC_SEQ_CST);
		forget_versions_on(w, best);
		*seg = best;
		*addr = w->seg_addr[best];
		return TDB_SHM_OK;
	}
	return tdb_writer_new_segment(w, TDB_SEG_TRAFFIC, size, seg, addr, err);
}

size_t
tdb_writer_traffic_capacity(size_t size)
{
	size_t		grain = 65536;

	while (grain < size / 16)
		grain <<= 1;
	return (size + grain - 1) / grain * grain;
}

int
tdb_writer_publish(TdbWriter *w, uint64_t generation, uint64_t map_id, uint32_t map_seg,
				   uint32_t traffic_seg, int64_t now_us)
{
	uint32_t	v;
	TdbVersionDesc *d;

	compute_live(w, NULL);
	for (v = 0; v < TDB_MAX_VERSIONS; v++)
		if (!w->version_live[v])
			break;
	if (v == TDB_MAX_VERSIONS)
		return TDB_SHM_ENOSLOT;
	d = &w->ctl->versions[v];
	d->map_id = map_id;
	d->published_at_us = now_us;
	d->superseded_at_us = 0;
	d->map_seg = map_seg;
	d->traffic_seg = traffic_seg;
	__atomic_store_n(&d->generation, generation, __ATOMIC_RELEASE);
	{
		uint64_t	old = atomic_load(&w->ctl->active);

		if (old != 0 && TDB_ACTIVE_IDX(old) < TDB_MAX_VERSIONS)
			w->ctl->versions[TDB_ACTIVE_IDX(old)].superseded_at_us = tdb_wall_us();
	}
	atomic_store_explicit(&w->ctl->active, TDB_ACTIVE_WORD(generation, v), memory_order_seq_cst);
	atomic_store_explicit(&w->ctl->state, TDB_DAEMON_RUNNING, memory_order_release);
	atomic_fetch_add_explicit(&w->ctl->notify, 1, memory_order_release);
	syscall(SYS_futex, &w->ctl->notify, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
	return TDB_SHM_OK;
}

int
tdb_writer_reclaim(TdbWriter *w, uint32_t keep_map_seg)
{
	bool		live_seg[TDB_MAX_SEGMENTS];
	int			spares = 0;
	int			freed = 0;
	uint64_t	active = atomic_load(&w->ctl->active);
	uint64_t	active_size = 0;

	compute_live(w, live_seg);
	if (active != 0 && TDB_ACTIVE_IDX(active) < TDB_MAX_VERSIONS &&
		w->ctl->versions[TDB_ACTIVE_IDX(active)].traffic_seg < TDB_MAX_SEGMENTS)
		active_size = w->ctl->segments[w->ctl->versions[TDB_ACTIVE_IDX(active)].traffic_seg].size;
	for (uint32_t i = 0; i < TDB_MAX_SEGMENTS; i++)
	{
		TdbSegmentDesc *d = &w->ctl->segments[i];

		if (d->kind == TDB_SEG_FREE || live_seg[i] || i == keep_map_seg)
			continue;
		/* keep two spare traffic buffers of the current size for reuse */
		if (d->kind == TDB_SEG_TRAFFIC && d->size == active_size && spares < 2)
		{
			spares++;
			continue;
		}
		free_segment(w, i);
		freed++;
	}
	return freed;
}

uint64_t
tdb_writer_bytes(const TdbWriter *w)
{
	uint64_t	total = 0;

	for (uint32_t i = 0; i < TDB_MAX_SEGMENTS; i++)
		if (w->ctl->segments[i].kind != TDB_SEG_FREE)
			total += w->ctl->segments[i].size;
	return total;
}

uint64_t
tdb_writer_huge_bytes(const TdbWriter *w)
{
	uint64_t	total = 0;

	for (uint32_t i = 0; i < TDB_MAX_SEGMENTS; i++)
		if (w->ctl->segments[i].kind != TDB_SEG_FREE)
			total += w->seg_huge[i];
	return total;
}

void
tdb_writer_stop_instance(const char *prefix)
{
	char		name[TDB_SHM_NAME_MAX + 24];
	void	   *p;
	size_t		sz;

	tdb_shm_name(name, prefix, "ctl");
	if (tdb_shm_map(name, true, true, sizeof(TdbControl), &p, &sz) == TDB_SHM_OK)
	{
		if (tdb_control_check(p, sz) == TDB_SHM_OK)
			mark_stopped(p);
		tdb_shm_unmap(p, sz);
	}

	/*
	 * The lock last: once its name is gone another server can take the
	 * prefix, and it must not adopt objects we are still removing.
	 */
	unlink_leftovers(prefix, false);
	tdb_shm_name(name, prefix, "lock");
	shm_unlink(name);
}

bool
tdb_writer_instance_of(const char *prefix, int32_t postmaster_pid)
{
	char		name[TDB_SHM_NAME_MAX + 24];
	void	   *p;
	size_t		sz;
	bool		ours = false;

	tdb_shm_name(name, prefix, "ctl");
	if (tdb_shm_map(name, false, true, sizeof(TdbControl), &p, &sz) == TDB_SHM_OK)
	{
		ours = tdb_control_check(p, sz) == TDB_SHM_OK &&
			((TdbControl *) p)->postmaster_pid == postmaster_pid;
		tdb_shm_unmap(p, sz);
	}
	return ours;
}
