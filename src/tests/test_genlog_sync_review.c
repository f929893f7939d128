/*
 * test_genlog_sync_review.c
 *	  The hostile review of a370aee: tdb_genlog_encode_from keeps the first
 *	  pass's entries when the record is one slice (n <= 4,096) instead of
 *	  calling get() again.  Records of 0, 1, 2, 4,095, 4,096, 4,097, 8,191,
 *	  8,192, 8,193 and 12,293 entries, D records and C checkpoint parts that
 *	  start anywhere (many slices), from three kinds of source: one that
 *	  writes into buf (the daemon's source_entries), one that returns a
 *	  pointer into its own array (tdb_genlog_encode's array_entries), and
 *	  one that copies into a scratch array of its own which it overwrites at
 *	  every call ("anywhere else that stays valid until the next call", the
 *	  weakest promise genlog.h allows).  Each record must be byte for byte
 *	  the one tdb_genlog_encode makes of the same entries, decode to entries
 *	  equal to the originals field by field (bit patterns, incident bytes),
 *	  and get() must be asked for exactly the slices the contract says: once
 *	  each when there is one slice, twice each (in order) when there are more.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genlog/genlog.h"
#include "genlog_fixture.h"
#include "unit.h"

#define SLICE 4096


enum
{
	SRC_INTO_BUF,				/* writes into buf, returns buf */
	SRC_OWN_ARRAY,				/* returns a pointer into the caller's array */
	SRC_OWN_SCRATCH,			/* copies into its own scratch, overwritten at every call */
	SRC_KINDS
};

typedef struct ReviewSource
{
	int			kind;
	const TdbGenlogEntry *all;	/* the entries, indexed from 0 */
	uint32_t	n;
	TdbGenlogEntry *scratch;	/* SRC_OWN_SCRATCH: room for a slice */
	uint32_t	calls;
	uint32_t	firsts[64];
	uint32_t	ns[64];
	bool		bad_args;
} ReviewSource;

static const TdbGenlogEntry *
review_get(void *arg, uint32_t first, uint32_t n, TdbGenlogEntry *buf)
{
	ReviewSource *src = arg;

	if (src->calls < 64)
	{
		src->firsts[src->calls] = first;
		src->ns[src->calls] = n;
	}
	src->calls++;
	if ((uint64_t) first + n > src->n || n == 0 || n > SLICE)
	{
		src->bad_args = true;
		return buf;
	}
	switch (src->kind)
	{
		case SRC_INTO_BUF:
			/* poison first: a stale byte of an earlier call would show */
			memset(buf, 0xA5, (size_t) n * sizeof(TdbGenlogEntry));
			memcpy(buf, src->all + first, (size_t) n * sizeof(TdbGenlogEntry));
			return buf;
		case SRC_OWN_ARRAY:
			/* buf is not the source's: scribble on it, the encoder must not read it */
			memset(buf, 0x5A, (size_t) n * sizeof(TdbGenlogEntry));
			return src->all + first;
		default:
			memset(buf, 0x5A, (size_t) n * sizeof(TdbGenlogEntry));
			memset(src->scratch, 0xC3, (size_t) SLICE * sizeof(TdbGenlogEntry));
			memcpy(src->scratch, src->all + first, (size_t) n * sizeof(TdbGenlogEntry));
			return src->scratch;
	}
}

/* As encoded, and no incident length where none is present. */
static bool
review_same(const TdbGenlogEntry *a, const TdbGenlogEntry *b, char kind)
{
	return genlog_same_entry(a, b, kind) && ((a->present & TDB_GENLOG_HAS_INCIDENT) || b->incident_len == 0);
}

UNIT_TEST(test_genlog_encode_from_slice_edges)
{
	static const uint32_t sizes[] = {0, 1, 2, 4095, 4096, 4097, 8191, 8192, 8193, 3 * 4096 + 5};
	static const uint32_t c_firsts[] = {0, 1, 4095, 123457};
	uint64_t	rng = 0x5eed;
	TdbGenlogEntry *scratch = malloc((size_t) SLICE * sizeof(TdbGenlogEntry));
	int			records = 0;

	for (int kk = 0; kk < 2; kk++)
	{
		char		kind = kk ? TDB_GENLOG_CHECKPOINT : TDB_GENLOG_DELTA;

		for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
			for (size_t fi = 0; fi < (kind == TDB_GENLOG_CHECKPOINT ? 4u : 1u); fi++)
			{
				uint32_t	n = sizes[si];
				uint32_t	first_record = kind == TDB_GENLOG_CHECKPOINT ? c_firsts[fi] : 0;
				TdbGenlogEntry *e = calloc((size_t) n + 1, sizeof(TdbGenlogEntry));
				TdbGenlogHeader h0 = {.kind = kind, .generation = 1000 + unit_rand(&rng) % 1000000,
					.map_id = unit_rand(&rng), .count = (uint64_t) first_record + 51u * n + 10,
				.first_record = first_record};
				TdbGenlogHeader href = h0;
				char		err[TDB_GENLOG_ERRLEN];
				size_t		reflen;
				uint8_t    *ref;
				uint32_t	slices = (n + SLICE - 1) / SLICE;
				uint32_t	want_calls = slices <= 1 ? slices : 2 * slices;

				genlog_random_entries(&rng, e, n, kind, h0.generation, first_record);
				ref = tdb_genlog_encode(&href, e, n, &reflen, err);
				if (ref == NULL)
				{
					unit_fail(__FILE__, __LINE__, "%c n=%u: encode: %s", kind, n, err);
					free(e);
					continue;
				}
				for (int sk = 0; sk < SRC_KINDS; sk++)
					for (size_t front = 0; front <= 4; front += 4)
					{
						ReviewSource src = {.kind = sk, .all = e, .n = n, .scratch = scratch};
						TdbGenlogHeader h = h0,
									dh;
						TdbGenlogEntry *d = NULL;
						size_t		len;
						uint8_t    *rec = tdb_genlog_encode_from(&h, n, review_get, &src, front, &len, err);

						records++;
						if (rec == NULL)
						{
							unit_fail(__FILE__, __LINE__, "%c n=%u src %d: encode_from: %s", kind, n, sk, err);
							continue;
						}
						CHECK(!src.bad_args);
						if (src.calls != want_calls)
							unit_fail(__FILE__, __LINE__, "%c n=%u src %d: get called %u times, expected %u",
									  kind, n, sk, src.calls, want_calls);
						/* the slices in order, once per pass */
						for (uint32_t c = 0; c < src.calls && c < 64 && src.calls == want_calls; c++)
						{
							uint32_t	s = slices <= 1 ? c : c % slices;
							uint32_t	wn = n - s * SLICE < SLICE ? n - s * SLICE : SLICE;

							if (src.firsts[c] != s * SLICE || src.ns[c] != wn)
								unit_fail(__FILE__, __LINE__, "%c n=%u src %d: call %u asked %u+%u, expected %u+%u",
										  kind, n, sk, c, src.firsts[c], src.ns[c], s * SLICE, wn);
						}
						/* the very record tdb_genlog_encode makes */
						if (len != reflen || memcmp(rec + front, ref, len) != 0)
							unit_fail(__FILE__, __LINE__, "%c n=%u first %u src %d front %zu: %zu bytes, not the %zu of tdb_genlog_encode",
									  kind, n, first_record, sk, front, len, reflen);
						CHECK(h.n == n && h.time_base_us == href.time_base_us);
						if (!tdb_genlog_decode(rec + front, len, &dh, &d, err))
							unit_fail(__FILE__, __LINE__, "%c n=%u src %d: decode: %s", kind, n, sk, err);
						else
						{
							CHECK(dh.kind == kind && dh.n == n && dh.first_record == first_record &&
								  dh.count == h0.count && dh.generation == h0.generation &&
								  dh.map_id == h0.map_id);
							for (uint32_t i = 0; i < n; i++)
								if (!review_same(&e[i], &d[i], kind))
								{
									unit_fail(__FILE__, __LINE__, "%c n=%u src %d: entry %u differs", kind, n, sk, i);
									break;
								}
						}
						free(d);
						free(rec);
					}
				free(ref);
				free(e);
			}
	}
	printf("# %d records encoded from 3 kinds of source\n", records);
	free(scratch);
}

/*
 * A source that refuses in the first pass (an entry out of order at the
 * last of one slice, or in a later slice): no record, and the second pass
 * never runs on what the first pass rejected.
 */
UNIT_TEST(test_genlog_encode_from_refusal_one_slice)
{
	static const uint32_t sizes[] = {1, 2, 4096, 4097, 8193};

	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
	{
		uint32_t	n = sizes[si];
		TdbGenlogEntry *e = calloc(n, sizeof(TdbGenlogEntry));
		TdbGenlogEntry *scratch = malloc((size_t) SLICE * sizeof(TdbGenlogEntry));
		TdbGenlogHeader h = {.kind = TDB_GENLOG_DELTA, .generation = 5, .count = (uint64_t) n + 10};
		char		err[TDB_GENLOG_ERRLEN];
		size_t		len = 77;

		for (uint32_t i = 0; i < n; i++)
		{
			e[i].record = i + 1;
			e[i].changed_gen = 5;
		}
		e[n - 1].record = n + 10;	/* past the map */
		for (int sk = 0; sk < SRC_KINDS; sk++)
		{
			ReviewSource src = {.kind = sk, .all = e, .n = n, .scratch = scratch};
			TdbGenlogHeader hh = h;

			CHECK(tdb_genlog_encode_from(&hh, n, review_get, &src, 4, &len, err) == NULL);
			CHECK(strstr(err, "past the map") != NULL);
			CHECK(len == 0);
			/* the first pass only: slices up to the refused one */
			CHECK(src.calls == (n + SLICE - 1) / SLICE);
		}
		free(scratch);
		free(e);
	}
}
