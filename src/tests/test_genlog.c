/*
 * test_genlog.c
 *	  The generation-log record codec (src/genlog/): exact round trips of
 *	  D and C records (NaN payloads, -0, empty and binary incidents, times
 *	  before 1970, ids in any order), the encoder's refusals, every
 *	  truncation and random damage refused or decoded without a bad read
 *	  (run under ASan in make test), and the size of a typical delta.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "genlog/genlog.h"
#include "genlog_fixture.h"
#include "unit.h"

static const char *const incidents[] = {"", "roadworks", "accident\0with a NUL", "closed: flooding on both lanes"};
static const uint32_t incident_lens[] = {0, 9, 19, 30};

void
genlog_random_entries(uint64_t *rng, TdbGenlogEntry *e, uint32_t n, char kind, uint64_t gen, uint32_t first)
{
	uint32_t	rec = 0;

	for (uint32_t i = 0; i < n; i++)
	{
		TdbGenlogEntry *x = &e[i];
		uint32_t	bits;
		int			k = (int) (unit_rand(rng) % 4);

		memset(x, 0, sizeof(*x));
		rec += 1 + (uint32_t) (unit_rand(rng) % 50);
		x->record = kind == TDB_GENLOG_DELTA ? rec : first + i;
		x->present = (uint8_t) (unit_rand(rng) % 64);
		x->observed_us = (int64_t) (unit_rand(rng) % 4000000000000000ULL) - 2000000000000000LL;
		bits = (uint32_t) unit_rand(rng);
		memcpy(&x->speed_kmh, &bits, 4);	/* any bits: NaN payloads, -0, infinities */
		x->free_flow_kmh = i % 3 == 0 ? -0.0f : (float) (unit_rand(rng) % 1300) / 10;
		x->congestion = (uint8_t) unit_rand(rng);
		x->confidence = (uint8_t) unit_rand(rng);
		x->flags = (uint16_t) unit_rand(rng);
		x->incident = incidents[k];
		x->incident_len = incident_lens[k];
		x->changed_gen = kind == TDB_GENLOG_CHECKPOINT ? gen - unit_rand(rng) % (gen + 1) : gen;
		x->id = unit_rand(rng);
	}
}

bool
genlog_same_entry(const TdbGenlogEntry *a, const TdbGenlogEntry *b, char kind)
{
	if (a->record != b->record || a->present != b->present || a->observed_us != b->observed_us ||
		a->changed_gen != b->changed_gen)
		return false;
	if ((a->present & TDB_GENLOG_HAS_SPEED) && memcmp(&a->speed_kmh, &b->speed_kmh, 4) != 0)
		return false;
	if ((a->present & TDB_GENLOG_HAS_FREE_FLOW) && memcmp(&a->free_flow_kmh, &b->free_flow_kmh, 4) != 0)
		return false;
	if ((a->present & TDB_GENLOG_HAS_CONGESTION) && a->congestion != b->congestion)
		return false;
	if ((a->present & TDB_GENLOG_HAS_CONFIDENCE) && a->confidence != b->confidence)
		return false;
	if ((a->present & TDB_GENLOG_HAS_FLAGS) && a->flags != b->flags)
		return false;
	if ((a->present & TDB_GENLOG_HAS_INCIDENT) &&
		(a->incident_len != b->incident_len || memcmp(a->incident, b->incident, a->incident_len) != 0))
		return false;
	return kind != TDB_GENLOG_CHECKPOINT || a->id == b->id;
}

UNIT_TEST(test_genlog_roundtrip)
{
	uint64_t	rng = 16;

	for (int iter = 0; iter < 200; iter++)
	{
		char		kind = iter % 2 ? TDB_GENLOG_CHECKPOINT : TDB_GENLOG_DELTA;
		uint32_t	n = iter % 7 == 0 ? 0 : 1 + (uint32_t) (unit_rand(&rng) % 500);
		TdbGenlogEntry *e = calloc(n + 1, sizeof(TdbGenlogEntry)),
				   *d = NULL;
		TdbGenlogHeader h = {.kind = kind, .generation = 1 + unit_rand(&rng) % 1000000,
			.map_id = unit_rand(&rng), .count = 30000,
		.first_record = kind == TDB_GENLOG_CHECKPOINT ? (uint32_t) (unit_rand(&rng) % 1000) : 0},
					dh;
		char		err[TDB_GENLOG_ERRLEN];
		size_t		len;
		uint8_t    *buf;

		genlog_random_entries(&rng, e, n, kind, h.generation, h.first_record);
		buf = tdb_genlog_encode(&h, e, n, &len, err);
		CHECK(buf != NULL);
		if (buf == NULL)
		{
			unit_fail(__FILE__, __LINE__, "encode: %s", err);
			free(e);
			continue;
		}
		CHECK(tdb_genlog_decode(buf, len, &dh, &d, err));
		CHECK(dh.kind == kind && dh.generation == h.generation && dh.map_id == h.map_id &&
			  dh.count == h.count && dh.n == n && dh.first_record == h.first_record &&
			  dh.time_base_us == h.time_base_us);
		for (uint32_t i = 0; d && i < n; i++)
			if (!genlog_same_entry(&e[i], &d[i], kind))
			{
				unit_fail(__FILE__, __LINE__, "record %d entry %u differs", iter, i);
				break;
			}
		free(d);
		free(buf);
		free(e);
	}
}

UNIT_TEST(test_genlog_encoder_refusals)
{
	TdbGenlogEntry e[2];
	TdbGenlogHeader h = {.kind = TDB_GENLOG_DELTA, .generation = 10, .count = 100};
	char		err[TDB_GENLOG_ERRLEN];
	size_t		len;

	memset(e, 0, sizeof(e));
	e[0].record = 5;
	e[1].record = 5;			/* not ascending */
	CHECK(tdb_genlog_encode(&h, e, 2, &len, err) == NULL && strstr(err, "out of order") != NULL);
	e[1].record = 100;			/* past the map */
	CHECK(tdb_genlog_encode(&h, e, 2, &len, err) == NULL && strstr(err, "past the map") != NULL);
	e[1].record = 6;
	e[1].present = 0x40;
	CHECK(tdb_genlog_encode(&h, e, 2, &len, err) == NULL && strstr(err, "present bits") != NULL);
	e[1].present = TDB_GENLOG_HAS_INCIDENT;
	e[1].incident = "x";
	e[1].incident_len = TDB_GENLOG_MAX_INCIDENT + 1;
	CHECK(tdb_genlog_encode(&h, e, 2, &len, err) == NULL && strstr(err, "incident") != NULL);
	h.kind = TDB_GENLOG_CHECKPOINT;
	h.first_record = 5;
	e[1].incident_len = 1;
	e[0].changed_gen = 11;		/* after the checkpoint */
	CHECK(tdb_genlog_encode(&h, e, 2, &len, err) == NULL && strstr(err, "after the checkpoint") != NULL);
	h.kind = 'X';
	CHECK(tdb_genlog_encode(&h, e, 2, &len, err) == NULL && strstr(err, "kind") != NULL);
}

/* Truncations are refused; bit flips are refused or decode within bounds. */
UNIT_TEST(test_genlog_hostile_bytes)
{
	uint64_t	rng = 99;
	uint32_t	n = 300;
	TdbGenlogEntry *e = calloc(n, sizeof(TdbGenlogEntry)),
			   *d;
	TdbGenlogHeader h = {.kind = TDB_GENLOG_DELTA, .generation = 77, .count = 1u << 20},
				dh;
	char		err[TDB_GENLOG_ERRLEN];
	size_t		len;
	uint8_t    *buf;
	int			refused = 0;

	genlog_random_entries(&rng, e, n, TDB_GENLOG_DELTA, h.generation, 0);
	buf = tdb_genlog_encode(&h, e, n, &len, err);
	CHECK(buf != NULL);
	for (size_t cut = 0; buf && cut < len; cut++)
	{
		d = NULL;
		if (tdb_genlog_decode(buf, cut, &dh, &d, err))
			unit_fail(__FILE__, __LINE__, "a record cut to %zu of %zu bytes decoded", cut, len);
		free(d);
	}
	for (int iter = 0; buf && iter < 3000; iter++)
	{
		uint8_t    *bad = malloc(len);

		memcpy(bad, buf, len);
		bad[unit_rand(&rng) % len] ^= (uint8_t) (1u << (unit_rand(&rng) % 8));
		d = NULL;
		if (!tdb_genlog_decode(bad, len, &dh, &d, err))
			refused++;
		else
		{
			/* a valid decode stays inside the record and the map */
			for (uint32_t i = 0; i < dh.n; i++)
			{
				CHECK(d[i].record < dh.count);
				CHECK(d[i].incident_len == 0 ||
					  ((const uint8_t *) d[i].incident >= bad &&
					   (const uint8_t *) d[i].incident + d[i].incident_len <= bad + len));
			}
		}
		free(d);
		free(bad);
	}
	CHECK(refused > 0);
	free(buf);
	free(e);
}

/*
 * A typical delta (a city feed: speeds to a tenth, constant free flow and
 * confidence, a few incidents, times within a minute): about 16 bytes an
 * entry before PostgreSQL compresses it (the design's estimate).
 */
UNIT_TEST(test_genlog_delta_size)
{
	uint64_t	rng = 5;
	uint32_t	n = 100000;
	TdbGenlogEntry *e = calloc(n, sizeof(TdbGenlogEntry));
	TdbGenlogHeader h = {.kind = TDB_GENLOG_DELTA, .generation = 1000, .count = 1000000};
	char		err[TDB_GENLOG_ERRLEN];
	size_t		len;
	uint8_t    *buf;

	for (uint32_t i = 0; i < n; i++)
	{
		e[i].record = i * 10 + (uint32_t) (unit_rand(&rng) % 10);
		e[i].present = TDB_GENLOG_HAS_SPEED | TDB_GENLOG_HAS_FREE_FLOW | TDB_GENLOG_HAS_CONGESTION |
			TDB_GENLOG_HAS_CONFIDENCE | (i % 100 == 0 ? TDB_GENLOG_HAS_INCIDENT : 0);
		e[i].observed_us = 1764000000000000LL + (int64_t) (unit_rand(&rng) % 60000000);
		e[i].speed_kmh = (float) (unit_rand(&rng) % 1300) / 10;
		e[i].free_flow_kmh = 80;
		e[i].congestion = (uint8_t) (unit_rand(&rng) % 5);
		e[i].confidence = 90;
		e[i].incident = "roadworks";
		e[i].incident_len = 9;
	}
	buf = tdb_genlog_encode(&h, e, n, &len, err);
	CHECK(buf != NULL);
	printf("# a delta of %u entries: %zu bytes, %.1f bytes an entry\n", n, len, (double) len / n);
	CHECK(len < (size_t) n * 20);
	free(buf);
	free(e);
}

/* make fuzz-genlog's find: a count past 2^32 let a delta wrap a record out of order */
UNIT_TEST(test_genlog_record_past_2_32_refused)
{
	static const uint8_t in[] = {84, 68, 66, 71, 1, 0, 68, 0, 0, 0, 109, 0, 1, 0, 0, 54, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 48, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 84, 68, 66, 71, 201, 71, 194, 24, 0, 128, 104, 0, 0, 201, 201, 42, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 201, 201, 84, 91, 201, 201, 201, 201, 71, 201, 201, 201, 194, 24, 0, 128, 96, 0, 0, 201, 201, 42, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 48, 48, 48, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 48, 52, 48, 48, 9, 0, 48, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 87, 0, 0, 0, 0, 0, 0};
	TdbGenlogHeader h;
	TdbGenlogEntry *e = NULL;
	char		err[TDB_GENLOG_ERRLEN];

	CHECK(!tdb_genlog_decode(in, sizeof(in), &h, &e, err));
	free(e);
}

/*
 * The encoding is a format others read (replay, followers, older builds): a
 * faster encoder must give the same bytes.  CRC-32C of the records of 40
 * random D and C sets (300 entries each, or 0; the last two 9,000, more than
 * a slice of the encoder: every field, NaN payloads, incidents with NULs,
 * ids in any order), as the first encoder wrote them.
 */
UNIT_TEST(test_genlog_encoding_unchanged)
{
	uint64_t	rng = 77;
	uint32_t	crc = TDB_CRC32C_INIT;
	size_t		total = 0;

	for (int iter = 0; iter < 42; iter++)
	{
		char		kind = iter % 2 ? TDB_GENLOG_CHECKPOINT : TDB_GENLOG_DELTA;
		uint32_t	n = iter >= 40 ? 9000 : iter % 10 == 0 ? 0 : 300;
		TdbGenlogEntry *e = calloc(n + 1, sizeof(TdbGenlogEntry));
		TdbGenlogHeader h;
		uint8_t    *buf;
		size_t		len;
		char		err[TDB_GENLOG_ERRLEN];

		memset(&h, 0, sizeof(h));
		h.kind = kind;
		h.generation = 1000 + (uint64_t) iter;
		h.map_id = 42;
		h.count = 1000000;
		h.first_record = kind == TDB_GENLOG_CHECKPOINT ? 5000 : 0;
		genlog_random_entries(&rng, e, n, kind, h.generation, h.first_record);
		buf = tdb_genlog_encode(&h, e, n, &len, err);
		CHECK(buf != NULL);
		crc = tdb_crc32c_update(crc, buf, len);
		total += len;
		free(buf);
		free(e);
	}
	printf("# 42 records, %zu bytes, crc %08x\n", total, tdb_crc32c_final(crc));
	CHECK(total == 846874);
	CHECK(tdb_crc32c_final(crc) == 0x3ad90859);
}

/*
 * Entries with none of the optional fields: every column but the record's
 * and the present bits is empty (make fuzz-genlog's find: an empty column
 * was written at a null pointer, undefined behaviour UBSan reports).
 */
UNIT_TEST(test_genlog_empty_columns)
{
	for (int kind = 0; kind < 2; kind++)
	{
		TdbGenlogEntry e[3];
		TdbGenlogHeader h,
					h2;
		TdbGenlogEntry *back = NULL;
		uint8_t    *buf;
		size_t		len;
		char		err[TDB_GENLOG_ERRLEN];

		memset(e, 0, sizeof(e));
		memset(&h, 0, sizeof(h));
		h.kind = kind ? TDB_GENLOG_CHECKPOINT : TDB_GENLOG_DELTA;
		h.generation = 7;
		h.count = 10;
		for (int i = 0; i < 3; i++)
		{
			e[i].record = (uint32_t) (kind ? i : 2 * i + 1);
			e[i].observed_us = 1000 + i;
			e[i].changed_gen = 7;
		}
		buf = tdb_genlog_encode(&h, e, 3, &len, err);
		CHECK(buf != NULL);
		CHECK(buf != NULL && tdb_genlog_decode(buf, len, &h2, &back, err));
		CHECK(back != NULL && h2.n == 3 && genlog_same_entry(&e[2], &back[2], h.kind));
		free(back);
		free(buf);
	}
}
