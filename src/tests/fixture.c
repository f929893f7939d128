/*
 * fixture.c
 *	  A small published map for the tests of the reader side: NLOC segments
 *	  on a grid near Helsinki, ids 1000.., and traffic whose every entry
 *	  carries speed = generation (so a mixed snapshot shows).
 */
#include "fixture.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Review knobs (test_shm_huge_review.c): writers made with huge_pages, objects padded to these sizes. */
bool		fixture_huge_pages = false;
size_t		fixture_traffic_bytes = 0;	/* 0: tdb_traffic_size(NLOC, 0) */
size_t		fixture_map_bytes = 0;	/* 0: the builder's size */

bool
fixture_kernel_makes_huge(void)
{
	char		name[64];
	void	   *p = NULL;
	size_t		got;

	snprintf(name, sizeof(name), "/tdbhugep.%d", (int) getpid());
	if (tdb_shm_create(name, (size_t) 2 << 20, (gid_t) -1, false, &p) != TDB_SHM_OK)
		return false;
	got = tdb_shm_make_huge(p, (size_t) 2 << 20, 10000);
	tdb_shm_unmap(p, (size_t) 2 << 20);
	shm_unlink(name);
	return got == ((size_t) 2 << 20);
}

size_t
fixture_traffic_size(void)
{
	return fixture_traffic_bytes ? fixture_traffic_bytes : tdb_traffic_size(NLOC, 0);
}


/* A map of NLOC short segments on a grid near Helsinki. */
int
publish_map(TdbWriter *w, uint32_t *seg, void **addr, uint64_t *count)
{
	TdbMapBuilder *b = tdb_map_builder_create();
	char		err[TDB_ERRLEN];
	int			rc;

	for (int i = 0; i < NLOC; i++)
	{
		double		x = 24.9 + (i % 40) * 0.001;
		double		y = 60.15 + (i / 40) * 0.001;
		double		xy[4] = {x, y, x + 0.0005, y + 0.0003};

		tdb_map_builder_add(b, 1000 + i, xy, 2, "primary", NULL, 50, 0, err);
	}
	tdb_map_builder_finish(b, err);
	rc = tdb_writer_new_segment(w, TDB_SEG_MAP,
								fixture_map_bytes > tdb_map_builder_size(b) ? fixture_map_bytes : tdb_map_builder_size(b),
								seg, addr, err);
	if (rc == TDB_SHM_OK)
		tdb_map_builder_write(b, *addr, 42, 0);
	*count = tdb_map_builder_count(b);
	tdb_map_builder_free(b);
	return rc;
}

/* Publish generation gen: every entry carries speed = gen. */
int
publish_traffic(TdbWriter *w, uint32_t map_seg, uint64_t gen)
{
	return publish_traffic_sized(w, map_seg, gen, fixture_traffic_size());
}

/* The same in a traffic buffer of size bytes (what a change of incidents' size does). */
int
publish_traffic_sized(TdbWriter *w, uint32_t map_seg, uint64_t gen, size_t size)
{
	static TdbTraffic t[NLOC];
	uint32_t	seg;
	void	   *addr;
	char		err[TDB_ERRLEN];
	int			rc;

	for (int i = 0; i < NLOC; i++)
	{
		t[i].speed_kmh = (float) gen;
		t[i].free_flow_kmh = 50;
		t[i].changed_gen = gen;
		t[i].congestion = TDB_CONGESTION_UNKNOWN;
		t[i].updated_at_us = (int64_t) gen;
	}
	rc = tdb_writer_traffic_segment(w, size, NULL, &seg, &addr, err);
	if (rc != TDB_SHM_OK)
		return rc;
	tdb_traffic_write(addr, 42, gen, NLOC, t, NULL, 0, (int64_t) gen);
	rc = tdb_writer_publish(w, gen, 42, map_seg, seg, (int64_t) gen);
	tdb_writer_reclaim(w, map_seg);
	return rc;
}


int
test_writer_open(TdbWriter *w, const char *prefix, uint32_t nexternal, int64_t pin_timeout_us,
				 TdbWriterOpenInfo *info, char *err)
{
	TdbWriterConfig cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.nexternal_slots = nexternal;
	cfg.gid = (gid_t) -1;
	cfg.lock_fd = -1;
	cfg.postmaster_pid = 1;
	cfg.pin_timeout_us = pin_timeout_us;
	cfg.huge_pages = fixture_huge_pages;
	return tdb_writer_open(w, prefix, &cfg, info, err);
}

int
open_with_map(TdbWriter *w, const char *prefix, uint32_t nexternal, int64_t pin_timeout_us, uint32_t *map_seg,
			  void **map_addr, TdbWriterOpenInfo *info_out)
{
	TdbWriterOpenInfo info;
	char		err[TDB_ERRLEN];
	uint64_t	count;
	int			rc;

	rc = test_writer_open(w, prefix, nexternal, pin_timeout_us, &info, err);
	if (info_out)
		*info_out = info;
	if (rc != TDB_SHM_OK)
		return rc;
	return publish_map(w, map_seg, map_addr, &count);
}

int
open_published(TdbWriter *w, const char *prefix, uint32_t nexternal, uint64_t gen, uint32_t *map_seg,
			   void **map_addr, TdbWriterOpenInfo *info_out)
{
	int			rc;

	rc = open_with_map(w, prefix, nexternal, 0, map_seg, map_addr, info_out);
	if (rc != TDB_SHM_OK)
		return rc;
	return publish_traffic(w, *map_seg, gen);
}

/* Every entry of a snapshot still says what publish_traffic wrote for generation gen. */
bool
snapshot_intact(const TdbSnapshot *s, uint64_t gen)
{
	for (int i = 0; i < NLOC; i++)
		if (s->entries[i].speed_kmh != (float) gen || s->entries[i].changed_gen != gen)
			return false;
	return true;
}
