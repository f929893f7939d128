/*
 * reader.c
 *	  Pinning versions and mapping their objects read-only; see reader.h.
 */
#include "reader.h"

#include "busguard.h"

#include <errno.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int
fail(char *err, int code, const char *fmt, const char *name)
{
	/* another user's object under our name: say whose, never map it */
	if (code == TDB_SHM_ETAKEN)
		tdb_shm_foreign_error(name, err);
	else
		snprintf(err, TDB_ERRLEN, fmt, name, strerror(errno));
	return code;
}

int
tdb_reader_open(TdbReader *r, const char *prefix, TdbReaderSlot *backend_slot,
				TdbValidateLevel map_check, char *err)
{
	char		name[TDB_SHM_NAME_MAX + 24];
	void	   *p;
	size_t		sz;
	int			rc;
	bool		own = backend_slot != NULL;

	memset(r, 0, sizeof(*r));
	r->slot_idx = -1;
	r->slots_fd = -1;
	r->map_check = map_check;
	if (!tdb_shm_prefix_ok(prefix, err))
		return TDB_SHM_EINVAL;
	strcpy(r->prefix, prefix);

	tdb_shm_name(name, prefix, "ctl");
	rc = tdb_shm_map(name, false, own, sizeof(TdbControl), &p, &sz);
	if (rc == TDB_SHM_ENOENT)
		return fail(err, rc, "shared memory object \"%s\" does not exist (%s): is the server running with trafficdb preloaded?", name);
	if (rc == TDB_SHM_EACCES)
		return fail(err, rc, "no permission to map \"%s\" (%s): run as the server's OS user or set trafficdb.shm_group", name);
	if (rc != TDB_SHM_OK)
		return fail(err, rc, "cannot map \"%s\": %s", name);
	r->ctl = p;
	r->ctl_size = sz;
	if (tdb_control_check(r->ctl, sz) != TDB_SHM_OK)
	{
		snprintf(err, TDB_ERRLEN, "\"%s\" is not a trafficdb control block of format %d", name,
				 TDB_SHM_VERSION);
		tdb_reader_close(r);
		return TDB_SHM_EINVAL;
	}
	r->instance_id = r->ctl->instance_id;

	if (own)
	{
		r->slot = backend_slot;
		return TDB_SHM_OK;
	}

	tdb_shm_name(name, prefix, "readers");
	rc = tdb_shm_map_fd(name, true, false, sizeof(TdbSlotsHeader), &p, &sz, &r->slots_fd);
	if (rc != TDB_SHM_OK)
	{
		rc = fail(err, rc, "cannot map reader slots \"%s\": %s", name);
		tdb_reader_close(r);
		return rc;
	}
	r->slots = p;
	r->slots_size = sz;
	/* before the first read: any member of shm_group can truncate it */
	r->bus_slots = tdb_bus_guard(p, sz, PROT_READ | PROT_WRITE);
	if (r->bus_slots == 0)
	{
		rc = fail(err, TDB_SHM_ESYS, "cannot guard the mapping of \"%s\" against truncation: %s", name);
		tdb_reader_close(r);
		return rc;
	}
	if (tdb_slots_check(r->slots, sz, r->ctl) != TDB_SHM_OK || tdb_bus_broken(r->bus_slots))
	{
		snprintf(err, TDB_ERRLEN, "\"%s\" does not match the control block", name);
		tdb_reader_close(r);
		return TDB_SHM_EINVAL;
	}
	r->slot_idx = tdb_slot_claim(r->slots_fd, r->slots, r->ctl->nslots, (int32_t) getpid());
	if (r->slot_idx < 0)
	{
		snprintf(err, TDB_ERRLEN, "all %u external reader slots are taken (trafficdb.max_external_readers)",
				 r->ctl->nslots);
		tdb_reader_close(r);
		return TDB_SHM_ENOSLOT;
	}
	r->owns_slot = true;
	r->slot = &r->slots->slots[r->slot_idx];
	return TDB_SHM_OK;
}

void
tdb_reader_close(TdbReader *r)
{
	if (r->slot != NULL)
	{
		tdb_unpin(r->slot);
		if (r->owns_slot)
			tdb_slot_release(r->slots_fd, r->slots, (uint32_t) r->slot_idx);
	}
	for (int i = 0; i < TDB_MAX_SEGMENTS; i++)
		tdb_shm_unmap(r->segs[i].addr, r->segs[i].size);
	tdb_bus_unguard(r->bus_slots);
	tdb_shm_unmap(r->slots, r->slots_size);
	if (r->slots_fd >= 0)
		close(r->slots_fd);
	tdb_shm_unmap((void *) r->ctl, r->ctl_size);
	memset(r, 0, sizeof(*r));
	r->slot_idx = -1;
	r->slots_fd = -1;
}

bool
tdb_reader_stale(const TdbReader *r)
{
	return r->ctl == NULL ||
		atomic_load_explicit(&r->ctl->state, memory_order_acquire) == TDB_DAEMON_STOPPED ||
		tdb_bus_broken(r->bus_slots);
}

/*
 * With TRAFFICDB_COLLAPSE=1 in the environment, an object this process maps
 * is made of huge pages in the page cache (MADV_COLLAPSE: synchronous, it
 * works whatever /dev/shm's huge= mount option and shmem_enabled say, short
 * of "deny"), so that its lookups take one TLB entry per 2 MB instead of
 * per 4 kB.  The first process to do it for an object copies it (52-181 ms
 * per 64 MB on a loaded 2-core VM); later ones find huge pages and only
 * map them.  Off by default: the copy happens while the version is pinned.
 * Best effort: a kernel without it, or no free huge page, leaves 4 kB
 * pages.
 */
static void
collapse_opt_in(void *addr, size_t size)
{
	const char *env = getenv("TRAFFICDB_COLLAPSE");

	if (env != NULL && strcmp(env, "1") == 0 && size >= ((size_t) 2 << 20))
		(void) madvise(addr, size, MADV_COLLAPSE);
}

/* Make sure segment idx (as the pinned version names it) is mapped here. */
static int
map_segment(TdbReader *r, uint32_t idx, char *err)
{
	const TdbSegmentDesc *d;
	TdbReaderSeg *s;
	char		name[TDB_SHM_NAME_MAX + 24];
	uint64_t	seq;
	int			rc;

	if (idx >= TDB_MAX_SEGMENTS)
	{
		snprintf(err, TDB_ERRLEN, "version names segment %u of %d", idx, TDB_MAX_SEGMENTS);
		return TDB_SHM_ECORRUPT;
	}
	d = &r->ctl->segments[idx];
	s = &r->segs[idx];

	/*
	 * One load: if the daemon freed the segment and gave its index to a new
	 * object meanwhile (our version was revoked), what we record must be the
	 * name we mapped, or a later acquire would take this mapping for the new
	 * object.  Names are never reused, so the name is the object.
	 */
	seq = __atomic_load_n(&d->seq, __ATOMIC_RELAXED);
	if (s->seq == seq && s->addr != NULL)
		return TDB_SHM_OK;
	tdb_shm_unmap(s->addr, s->size);
	memset(s, 0, sizeof(*s));
	tdb_shm_seg_name(name, r->prefix, seq);
	rc = tdb_shm_map(name, false, !r->owns_slot, sizeof(TdbObjectHeader), &s->addr, &s->size);
	if (rc != TDB_SHM_OK)
	{
		s->addr = NULL;
		return fail(err, rc, "cannot map object \"%s\": %s", name);
	}
	s->seq = seq;
	collapse_opt_in(s->addr, s->size);
	return TDB_SHM_OK;
}

static int
acquire_once(TdbReader *r, TdbSnapshot *snap, char *err)
{
	uint64_t	a;
	TdbVersionDesc v;
	TdbReaderSeg *ms;
	TdbReaderSeg *ts;
	int			rc;

	if (tdb_reader_stale(r))
	{
		snprintf(err, TDB_ERRLEN, "the trafficdb daemon has stopped; reopen to attach to the new instance");
		return TDB_SHM_ESTALE;
	}
	a = tdb_pin(r->ctl, r->slot);
	if (a == 0)
	{
		snprintf(err, TDB_ERRLEN, "nothing is published yet: load a map with trafficdb.load_map()");
		return TDB_SHM_EEMPTY;
	}
	r->pinned = a;
	if (TDB_ACTIVE_IDX(a) >= TDB_MAX_VERSIONS)
	{
		snprintf(err, TDB_ERRLEN, "active word names version slot %u", TDB_ACTIVE_IDX(a));
		rc = TDB_SHM_ECORRUPT;
		goto failed;
	}
	v = r->ctl->versions[TDB_ACTIVE_IDX(a)];
	v.generation = tdb_version_generation(&r->ctl->versions[TDB_ACTIVE_IDX(a)]);
	if (v.generation != TDB_ACTIVE_GEN(a))
	{
		if (v.generation == 0 || v.generation > TDB_ACTIVE_GEN(a))
		{
			/* revoked or reused since we pinned it: we stalled that long */
			snprintf(err, TDB_ERRLEN, "generation %llu was revoked while this reader attached to it",
					 (unsigned long long) TDB_ACTIVE_GEN(a));
			rc = TDB_SHM_EREVOKED;
			goto failed;
		}
		snprintf(err, TDB_ERRLEN, "version slot %u holds generation %llu, the active word says %llu",
				 TDB_ACTIVE_IDX(a), (unsigned long long) v.generation,
				 (unsigned long long) TDB_ACTIVE_GEN(a));
		rc = TDB_SHM_ECORRUPT;
		goto failed;
	}
	if ((rc = map_segment(r, v.map_seg, err)) != TDB_SHM_OK ||
		(rc = map_segment(r, v.traffic_seg, err)) != TDB_SHM_OK)
		goto failed;
	ms = &r->segs[v.map_seg];
	ts = &r->segs[v.traffic_seg];

	/*
	 * Drop mappings of objects the daemon has freed or replaced, so that
	 * their memory goes back to the system: a reader that stays connected
	 * must not keep every map it ever read.
	 */
	for (uint32_t i = 0; i < TDB_MAX_SEGMENTS; i++)
	{
		if (r->segs[i].addr == NULL || i == v.map_seg || i == v.traffic_seg)
			continue;
		if (r->ctl->segments[i].kind == TDB_SEG_FREE || r->ctl->segments[i].seq != r->segs[i].seq)
		{
			tdb_shm_unmap(r->segs[i].addr, r->segs[i].size);
			memset(&r->segs[i], 0, sizeof(r->segs[i]));
		}
	}

	/* a map is checked once per process: it never changes */
	if (!ms->validated)
	{
		if (tdb_map_validate(ms->addr, ms->size, r->map_check, err) != TDB_OBJ_OK)
		{
			rc = TDB_SHM_ECORRUPT;
			goto failed;
		}
		tdb_map_view_init(&ms->view, ms->addr);
		ms->validated = true;
	}
	/* traffic buffers are rewritten in place: O(1) checks on every acquire */
	if (tdb_traffic_validate(ts->addr, ts->size, TDB_VALIDATE_HEADER, ms->view.hdr, err) != TDB_OBJ_OK)
	{
		rc = TDB_SHM_ECORRUPT;
		goto failed;
	}
	if (((const TdbObjectHeader *) ts->addr)->generation != v.generation)
	{
		snprintf(err, TDB_ERRLEN, "traffic object holds generation %llu, version says %llu",
				 (unsigned long long) ((const TdbObjectHeader *) ts->addr)->generation,
				 (unsigned long long) v.generation);
		rc = TDB_SHM_ECORRUPT;
		goto failed;
	}
	snap->generation = v.generation;
	snap->published_at_us = v.published_at_us;
	snap->map = &ms->view;
	snap->traffic = ts->addr;
	snap->entries = tdb_traffic_entries(ts->addr);

	/*
	 * What we mapped and checked is the pinned version's only if the
	 * version was not revoked meanwhile (a reader stopped for longer than
	 * the pin timeout right here).
	 */
	if (tdb_reader_revoked(r, snap))
	{
		snprintf(err, TDB_ERRLEN, "generation %llu was revoked while this reader attached to it",
				 (unsigned long long) v.generation);
		rc = TDB_SHM_EREVOKED;
		goto failed;
	}
	return TDB_SHM_OK;

failed:
	/* a segment gone or changed under a revoked pin is not corruption */
	if (rc != TDB_SHM_EREVOKED && r->pinned != 0 && TDB_ACTIVE_IDX(r->pinned) < TDB_MAX_VERSIONS &&
		tdb_version_generation(&r->ctl->versions[TDB_ACTIVE_IDX(r->pinned)]) != TDB_ACTIVE_GEN(r->pinned))
		rc = TDB_SHM_EREVOKED;
	tdb_reader_release(r);
	return rc;
}

int
tdb_reader_acquire(TdbReader *r, TdbSnapshot *snap, char *err)
{
	int			rc;

	/* a revoked attach is retried: the next version is the active one */
	for (int attempt = 0; attempt < 16; attempt++)
	{
		rc = acquire_once(r, snap, err);
		if (rc != TDB_SHM_EREVOKED)
			break;
	}
	/* after the pin: a pin stored into pages that shrank away (zeros now) holds nothing */
	if (__builtin_expect(tdb_bus_broken(r->bus_slots), 0))
	{
		if (rc == TDB_SHM_OK)
			tdb_reader_release(r);
		snprintf(err, TDB_ERRLEN, "the external readers' segment %s.readers was truncated by a process with write access to it (a member of trafficdb.shm_group): reopen",
				 r->prefix);
		return TDB_SHM_ESTALE;
	}
	return rc;
}

void
tdb_reader_release(TdbReader *r)
{
	if (r->slot != NULL)
		tdb_unpin(r->slot);
	r->pinned = 0;
}
