/*
 * writer.c
 *	  Control block, segments, publication and reclamation; see writer.h and
 *	  the protocol in shm.h.
 */
#include "writer.h"

#include <dirent.h>
#include <signal.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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

/* Remove every shared memory object named "<prefix>.*" (a dead instance's). */
static void
unlink_leftovers(const char *prefix)
{
	DIR		   *d = opendir("/dev/shm");
	struct dirent *e;
	size_t		plen = strlen(prefix + 1);

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL)
	{
		if (strncmp(e->d_name, prefix + 1, plen) == 0 && e->d_name[plen] == '.')
		{
			char		name[NAME_MAX + 2];

			snprintf(name, sizeof(name), "/%s", e->d_name);
			shm_unlink(name);
		}
	}
	closedir(d);
}

static void
free_segment(TdbWriter *w, uint32_t i)
{
	char		name[TDB_SHM_NAME_MAX + 24];
	TdbSegmentDesc *d = &w->ctl->segments[i];

	tdb_shm_seg_name(name, w->prefix, d->seq);
	shm_unlink(name);
	tdb_shm_unmap(w->seg_addr[i], d->size);
	w->seg_addr[i] = NULL;
	d->kind = TDB_SEG_FREE;
	d->size = 0;
	d->seq = 0;
}

/* Which versions and segments some reader may be reading. */
static void
compute_live(TdbWriter *w, bool *live_seg)
{
	uint64_t	active = atomic_load_explicit(&w->ctl->active, memory_order_seq_cst);

	memset(w->version_live, 0, sizeof(w->version_live));
	if (active != 0 && TDB_ACTIVE_IDX(active) < TDB_MAX_VERSIONS)
		w->version_live[TDB_ACTIVE_IDX(active)] = true;
	for (uint32_t s = 0; s < w->slots->nslots; s++)
	{
		uint64_t	p = atomic_load_explicit(&w->slots->slots[s].pin, memory_order_seq_cst);

		if (p != 0 && TDB_ACTIVE_IDX(p) < TDB_MAX_VERSIONS)
			w->version_live[TDB_ACTIVE_IDX(p)] = true;
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

int
tdb_writer_open(TdbWriter *w, const char *prefix, uint32_t nbackend_slots,
				uint32_t nexternal_slots, gid_t gid, int32_t postmaster_pid,
				TdbWriterOpenInfo *info, char *err)
{
	char		ctlname[TDB_SHM_NAME_MAX + 24];
	char		slotname[TDB_SHM_NAME_MAX + 24];
	void	   *p = NULL;
	size_t		sz = 0;
	void	   *sp = NULL;
	size_t		ssz = 0;
	uint32_t	nslots = nbackend_slots + nexternal_slots;
	uint64_t	instance;
	int			rc;

	memset(w, 0, sizeof(*w));
	memset(info, 0, sizeof(*info));
	if (strlen(prefix) >= TDB_SHM_NAME_MAX || prefix[0] != '/' || strchr(prefix + 1, '/'))
	{
		snprintf(err, TDB_ERRLEN, "shared memory name \"%s\" must start with '/', contain no other '/' and be shorter than %d bytes",
				 prefix, TDB_SHM_NAME_MAX);
		return TDB_SHM_EINVAL;
	}
	strcpy(w->prefix, prefix);
	w->gid = gid;
	tdb_shm_name(ctlname, prefix, "ctl");
	tdb_shm_name(slotname, prefix, "readers");

	if (tdb_shm_map(ctlname, true, true, sizeof(TdbControl), &p, &sz) == TDB_SHM_OK)
	{
		TdbControl *old = p;

		/* another live server's daemon owns this prefix: never share it */
		if (sz >= sizeof(TdbControl) && old->magic == TDB_CTL_MAGIC &&
			old->postmaster_pid != 0 && old->postmaster_pid != postmaster_pid &&
			kill(old->postmaster_pid, 0) == 0 &&
			atomic_load(&old->state) != TDB_DAEMON_STOPPED)
		{
			snprintf(err, TDB_ERRLEN, "shared memory \"%s\" belongs to the running server with postmaster pid %d",
					 ctlname, old->postmaster_pid);
			tdb_shm_unmap(p, sz);
			return TDB_SHM_EACCES;
		}
		if (sz == sizeof(TdbControl) && tdb_control_check(old, sz) == TDB_SHM_OK &&
			old->nslots == nslots && old->nbackend_slots == nbackend_slots &&
			strcmp(old->prefix, prefix) == 0 &&
			tdb_shm_map(slotname, true, true, sizeof(TdbSlotsHeader), &sp, &ssz) == TDB_SHM_OK &&
			tdb_slots_check(sp, ssz, old) == TDB_SHM_OK)
		{
			w->ctl = old;
			w->slots = sp;
			w->slots_size = ssz;
			old->daemon_pid = getpid();
			old->postmaster_pid = postmaster_pid;
			adopt(w, info);
			return TDB_SHM_OK;
		}
		/* incompatible: tell its readers to reopen, then start afresh */
		if (sz >= sizeof(uint32_t) * 2 && old->magic == TDB_CTL_MAGIC && sz >= sizeof(TdbControl))
			mark_stopped(old);	/* waiters too: they did not wake before */
		tdb_shm_unmap(p, sz);
		tdb_shm_unmap(sp, ssz);
	}

	unlink_leftovers(prefix);
	instance = new_instance_id();

	/* slots first: a reader that finds the control block finds its slots */
	rc = tdb_shm_create(slotname, tdb_slots_size(nslots), gid, true, &sp);
	if (rc != TDB_SHM_OK)
	{
		snprintf(err, TDB_ERRLEN, "cannot create shared memory object \"%s\": %s", slotname,
				 strerror(errno));
		return rc;
	}
	w->slots = sp;
	w->slots_size = tdb_slots_size(nslots);
	w->slots->magic = TDB_SLOTS_MAGIC;
	w->slots->nslots = nslots;
	w->slots->instance_id = instance;

	rc = tdb_shm_create(ctlname, sizeof(TdbControl), gid, false, &p);
	if (rc != TDB_SHM_OK)
	{
		snprintf(err, TDB_ERRLEN, "cannot create shared memory object \"%s\": %s", ctlname,
				 strerror(errno));
		shm_unlink(slotname);
		tdb_shm_unmap(w->slots, w->slots_size);
		w->slots = NULL;
		return rc;
	}
	w->ctl = p;
	w->ctl->version = TDB_SHM_VERSION;
	w->ctl->header_size = sizeof(TdbControl);
	w->ctl->instance_id = instance;
	w->ctl->nslots = nslots;
	w->ctl->nbackend_slots = nbackend_slots;
	w->ctl->daemon_pid = getpid();
	w->ctl->postmaster_pid = postmaster_pid;
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

	if (w->ctl == NULL)
		return;
	if (stopping)
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
	}
	for (uint32_t i = 0; i < TDB_MAX_SEGMENTS; i++)
		tdb_shm_unmap(w->seg_addr[i], w->ctl->segments[i].size);
	tdb_shm_unmap(w->slots, w->slots_size);
	tdb_shm_unmap(w->ctl, sizeof(TdbControl));
	memset(w, 0, sizeof(*w));
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
	seq = w->ctl->next_seq++;
	tdb_shm_seg_name(name, w->prefix, seq);
	rc = tdb_shm_create(name, size, w->gid, false, addr);
	if (rc != TDB_SHM_OK)
	{
		snprintf(err, TDB_ERRLEN, "cannot create shared memory object \"%s\" of %zu bytes: %s",
				 name, size, strerror(errno));
		return rc;
	}
	w->seg_addr[i] = *addr;
	w->ctl->segments[i].seq = seq;
	w->ctl->segments[i].size = size;
	w->ctl->segments[i].kind = kind;
	*seg = i;
	return TDB_SHM_OK;
}

int
tdb_writer_traffic_segment(TdbWriter *w, size_t size, uint32_t *seg, void **addr, char *err)
{
	bool		live_seg[TDB_MAX_SEGMENTS];

	compute_live(w, live_seg);
	for (uint32_t i = 0; i < TDB_MAX_SEGMENTS; i++)
	{
		if (w->ctl->segments[i].kind == TDB_SEG_TRAFFIC && !live_seg[i] &&
			w->ctl->segments[i].size == size && w->seg_addr[i] != NULL)
		{
			*seg = i;
			*addr = w->seg_addr[i];
			return TDB_SHM_OK;
		}
	}
	return tdb_writer_new_segment(w, TDB_SEG_TRAFFIC, size, seg, addr, err);
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
	d->generation = generation;
	d->map_id = map_id;
	d->published_at_us = now_us;
	d->map_seg = map_seg;
	d->traffic_seg = traffic_seg;
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

bool
tdb_writer_reap_slot(TdbWriter *w, uint32_t idx, int32_t dead_pid)
{
	return idx < w->slots->nslots && tdb_slot_reap(w->slots, idx, dead_pid);
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

void
tdb_writer_clear_backend_pins(const char *prefix, uint32_t nbackend_slots)
{
	char		name[TDB_SHM_NAME_MAX + 24];
	void	   *p;
	size_t		sz;

	tdb_shm_name(name, prefix, "readers");
	if (tdb_shm_map(name, true, true, sizeof(TdbSlotsHeader), &p, &sz) != TDB_SHM_OK)
		return;
	{
		TdbSlotsHeader *slots = p;

		if (slots->magic == TDB_SLOTS_MAGIC && sz >= tdb_slots_size(slots->nslots))
			for (uint32_t s = 0; s < nbackend_slots && s < slots->nslots; s++)
				atomic_store(&slots->slots[s].pin, 0);
	}
	tdb_shm_unmap(p, sz);
}

void
tdb_writer_stop_instance(const char *prefix, int32_t postmaster_pid)
{
	char		name[TDB_SHM_NAME_MAX + 24];
	void	   *p;
	size_t		sz;

	tdb_shm_name(name, prefix, "ctl");
	if (tdb_shm_map(name, true, true, sizeof(TdbControl), &p, &sz) == TDB_SHM_OK)
	{
		TdbControl *c = p;
		bool		ours = tdb_control_check(c, sz) == TDB_SHM_OK &&
			c->postmaster_pid == postmaster_pid;

		if (ours)
		{
			mark_stopped(c);
		}
		tdb_shm_unmap(p, sz);
		/* another server's instance (or garbage under our name): leave it */
		if (!ours)
			return;
	}
	unlink_leftovers(prefix);
}
