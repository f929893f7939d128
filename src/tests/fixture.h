/*
 * fixture.h
 *	  Publishing a small map and its traffic through the writer, for tests.
 */
#ifndef TDB_TEST_FIXTURE_H
#define TDB_TEST_FIXTURE_H

#include "reader.h"
#include "writer.h"

#define NLOC 1000

/* A map of NLOC segments (ids 1000..1999, class "primary", limit 50) in a new segment. */
int			publish_map(TdbWriter *w, uint32_t *seg, void **addr, uint64_t *count);

/* Publish generation gen: every entry carries speed = gen and changed_gen = gen. */
int			publish_traffic(TdbWriter *w, uint32_t map_seg, uint64_t gen);
int			publish_traffic_sized(TdbWriter *w, uint32_t map_seg, uint64_t gen, size_t size);

/* Review knobs: huge_pages for test_writer_open, padded traffic and map objects (0: unpadded). */
extern bool fixture_huge_pages;
extern size_t fixture_traffic_bytes;
extern size_t fixture_map_bytes;
size_t		fixture_traffic_size(void);

/* Does this kernel make a fresh 2 MB object huge (MADV_COLLAPSE, free huge pages)? */
bool		fixture_kernel_makes_huge(void);

/* Every entry of snapshot s still says what publish_traffic wrote for generation gen. */
bool		snapshot_intact(const TdbSnapshot *s, uint64_t gen);

/*
 * A writer under prefix (2 backend slots, nexternal external ones) that has
 * published the map and generation gen of its traffic; info (may be
 * NULL) receives what tdb_writer_open() reported.
 */
/* A writer with nexternal slots, no backend pins, the given pin timeout (0: none). */
int			test_writer_open(TdbWriter *w, const char *prefix, uint32_t nexternal,
							 int64_t pin_timeout_us, TdbWriterOpenInfo *info, char *err);
int			open_published(TdbWriter *w, const char *prefix, uint32_t nexternal, uint64_t gen,
						   uint32_t *map_seg, void **map_addr, TdbWriterOpenInfo *info);

/*
 * A writer under prefix (test_writer_open) that has published the map but
 * no traffic yet; info (may be NULL) receives what tdb_writer_open() reported.
 */
int			open_with_map(TdbWriter *w, const char *prefix, uint32_t nexternal, int64_t pin_timeout_us,
						  uint32_t *map_seg, void **map_addr, TdbWriterOpenInfo *info);

#endif
