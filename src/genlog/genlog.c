/*
 * genlog.c
 *	  Encoder and validating decoder of generation-log records (genlog.h,
 *	  docs/design-write-path.md section 2.2).
 *
 * Layout: a 48-byte little-endian header (magic, version, kind, flags,
 * generation, map id, location count, entries, first record, time base),
 * then columns, each a varint byte length and its bytes:
 *   D: record, present, observed, speed, free flow, congestion, confidence,
 *      flags, incident
 *   C: present, observed, speed, free flow, congestion, confidence, flags,
 *      incident, changed_gen, id
 * record: varints of the gap to the previous record minus one (ascending);
 * present: a byte per entry (TDB_GENLOG_HAS_*); observed: varints of the
 * time above the time base; speed, free flow: f32 bits of the entries that
 * have them; congestion, confidence: a byte each, likewise; flags and
 * incident (varint length, bytes) likewise; changed_gen: varints of
 * generation - changed_gen; id: zigzag varints of the difference from the
 * previous entry's.
 *
 * The decoder trusts nothing: counts are checked against the bytes present
 * before anything is allocated, every column must be consumed exactly, and
 * records, times and generations must be what an encoder can produce.
 */
#include "genlog.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../trail/codec.h"

enum
{
	COL_RECORD,
	COL_PRESENT,
	COL_OBSERVED,
	COL_SPEED,
	COL_FREE_FLOW,
	COL_CONGESTION,
	COL_CONFIDENCE,
	COL_FLAGS,
	COL_INCIDENT,
	COL_CHANGED_GEN,
	COL_ID,
	NCOLS
};

static bool
col_in_kind(int col, char kind)
{
	if (col == COL_RECORD)
		return kind == TDB_GENLOG_DELTA;
	if (col == COL_CHANGED_GEN || col == COL_ID)
		return kind == TDB_GENLOG_CHECKPOINT;
	return true;
}

static void fail(char *err, const char *fmt,...) __attribute__((format(printf, 2, 3)));

static void
fail(char *err, const char *fmt,...)
{
	va_list		ap;

	if (err == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(err, TDB_GENLOG_ERRLEN, fmt, ap);
	va_end(ap);
}

/* Entries encoded a slice at a time (64 bytes each: 256 kB, within L2). */
#define ENCODE_SLICE 4096

/* f32 bits, little-endian */
static inline uint8_t *
put_f32(uint8_t *p, float f)
{
	uint32_t	bits;

	memcpy(&bits, &f, 4);
	codec_put_u32le(p, bits);
	return p + 4;
}

/* The most bytes column col of the entries can take. */
static size_t
column_bound(int col, const TdbGenlogEntry *e, uint32_t n)
{
	size_t		sum = 0;

	switch (col)
	{
		case COL_RECORD:
			return (size_t) n * 5;
		case COL_PRESENT:
		case COL_CONGESTION:
		case COL_CONFIDENCE:
			return n;
		case COL_SPEED:
		case COL_FREE_FLOW:
			return (size_t) n * 4;
		case COL_FLAGS:
			return (size_t) n * 3;
		case COL_INCIDENT:
			for (uint32_t i = 0; i < n; i++)
				if (e[i].present & TDB_GENLOG_HAS_INCIDENT)
					sum += 5 + (size_t) e[i].incident_len;
			return sum;
		default:
			return (size_t) n * 10;
	}
}

/*
 * Append column col of the entries to b: one loop a column, straight into
 * the room reserved for its largest size.  prev: the entry before e[0] (its
 * record and id are what e[0]'s are stored after), or NULL for the first.
 */
static void
put_column(CodecBuf *b, int col, const TdbGenlogHeader *h, const TdbGenlogEntry *e, uint32_t n,
		   const TdbGenlogEntry *prev)
{
	uint8_t    *p;
	uint8_t		has;
	size_t		bound = n > 0 ? column_bound(col, e, n) : 0;

	/* (an empty column may have no buffer at all: nothing to write) */
	if (bound == 0 || !codec_buf_reserve(b, bound))
		return;
	p = b->data + b->len;
	switch (col)
	{
		case COL_RECORD:
			p = codec_varint_at(p, prev ? e[0].record - prev->record - 1 : e[0].record);
			for (uint32_t i = 1; i < n; i++)
				p = codec_varint_at(p, e[i].record - e[i - 1].record - 1);
			break;
		case COL_PRESENT:
			for (uint32_t i = 0; i < n; i++)
				*p++ = e[i].present;
			break;
		case COL_OBSERVED:
			for (uint32_t i = 0; i < n; i++)
				p = codec_varint_at(p, (uint64_t) e[i].observed_us - (uint64_t) h->time_base_us);
			break;
		case COL_SPEED:
			for (uint32_t i = 0; i < n; i++)
				if (e[i].present & TDB_GENLOG_HAS_SPEED)
					p = put_f32(p, e[i].speed_kmh);
			break;
		case COL_FREE_FLOW:
			for (uint32_t i = 0; i < n; i++)
				if (e[i].present & TDB_GENLOG_HAS_FREE_FLOW)
					p = put_f32(p, e[i].free_flow_kmh);
			break;
		case COL_CONGESTION:
		case COL_CONFIDENCE:
			has = col == COL_CONGESTION ? TDB_GENLOG_HAS_CONGESTION : TDB_GENLOG_HAS_CONFIDENCE;
			for (uint32_t i = 0; i < n; i++)
				if (e[i].present & has)
					*p++ = col == COL_CONGESTION ? e[i].congestion : e[i].confidence;
			break;
		case COL_FLAGS:
			for (uint32_t i = 0; i < n; i++)
				if (e[i].present & TDB_GENLOG_HAS_FLAGS)
					p = codec_varint_at(p, e[i].flags);
			break;
		case COL_INCIDENT:
			for (uint32_t i = 0; i < n; i++)
				if (e[i].present & TDB_GENLOG_HAS_INCIDENT)
				{
					p = codec_varint_at(p, e[i].incident_len);
					if (e[i].incident_len > 0)
						memcpy(p, e[i].incident, e[i].incident_len);
					p += e[i].incident_len;
				}
			break;
		case COL_CHANGED_GEN:
			for (uint32_t i = 0; i < n; i++)
				p = codec_varint_at(p, h->generation - e[i].changed_gen);
			break;
		case COL_ID:
			p = codec_varint_at(p, codec_zigzag((int64_t) (e[0].id - (prev ? prev->id : 0))));
			for (uint32_t i = 1; i < n; i++)
				p = codec_varint_at(p, codec_zigzag((int64_t) (e[i].id - e[i - 1].id)));
			break;
	}
	b->len = (size_t) (p - b->data);
}

/* tdb_genlog_encode's entries: the caller's array itself. */
static const TdbGenlogEntry *
array_entries(void *arg, uint32_t first, uint32_t n, TdbGenlogEntry *buf)
{
	(void) n;
	(void) buf;
	return (const TdbGenlogEntry *) arg + first;
}

uint8_t *
tdb_genlog_encode(TdbGenlogHeader *h, const TdbGenlogEntry *e, uint32_t n, size_t *len, char *err)
{
	return tdb_genlog_encode_from(h, n, array_entries, (void *) e, 0, len, err);
}

/* Is entry i (x; prev: entry i - 1, or NULL) one an encoder may write?  Else err says why. */
static bool
entry_ok(const TdbGenlogHeader *h, uint32_t i, const TdbGenlogEntry *x, const TdbGenlogEntry *prev, char *err)
{
	if (h->kind == TDB_GENLOG_DELTA ? (x->record >= h->count || (prev != NULL && x->record <= prev->record)) :
		x->record != h->first_record + i)
	{
		fail(err, "entry %u: record %u out of order or past the map (%llu locations)", i,
			 x->record, (unsigned long long) h->count);
		return false;
	}
	if ((x->present & ~TDB_GENLOG_PRESENT_MASK) ||
		((x->present & TDB_GENLOG_HAS_INCIDENT) &&
		 (x->incident_len > TDB_GENLOG_MAX_INCIDENT || (x->incident == NULL && x->incident_len > 0))))
	{
		fail(err, "entry %u (record %u): bad present bits %#x or incident of %u bytes (at most %u)",
			 i, x->record, x->present, x->incident_len, TDB_GENLOG_MAX_INCIDENT);
		return false;
	}
	if (h->kind == TDB_GENLOG_CHECKPOINT && x->changed_gen > h->generation)
	{
		fail(err, "entry %u (record %u): changed in generation %llu, after the checkpoint's %llu", i,
			 x->record, (unsigned long long) x->changed_gen, (unsigned long long) h->generation);
		return false;
	}
	return true;
}

/*
 * Two passes over the entries, a slice at a time (so that a checkpoint's
 * million entries never exist at once, and each slice is read while it is
 * in the cache): the first checks them and finds the time base, the second
 * fills the columns.  The record is then laid out once, at its exact size.
 */
uint8_t *
tdb_genlog_encode_from(TdbGenlogHeader *h, uint32_t n, TdbGenlogEntries get, void *arg,
					   size_t front, size_t *len, char *err)
{
	CodecBuf	cols[NCOLS];
	TdbGenlogEntry *buf;
	const TdbGenlogEntry *one = NULL;	/* the first pass's last slice */
	TdbGenlogEntry prev;
	bool		ok = true;
	uint8_t		hdr[TDB_GENLOG_HEADER_SIZE];
	uint8_t    *out,
			   *p;
	size_t		total;

	*len = 0;
	if (h->kind != TDB_GENLOG_DELTA && h->kind != TDB_GENLOG_CHECKPOINT)
	{
		fail(err, "record kind %d; expected 'D' or 'C'", h->kind);
		return NULL;
	}
	if (h->kind == TDB_GENLOG_DELTA)
		h->first_record = 0;
	if ((uint64_t) h->first_record + n > h->count)
	{
		fail(err, "records %u .. %u + %u past the map's %llu locations", h->first_record,
			 h->first_record, n, (unsigned long long) h->count);
		return NULL;
	}
	buf = malloc(sizeof(TdbGenlogEntry) * (n < ENCODE_SLICE ? (n > 0 ? n : 1) : ENCODE_SLICE));
	if (buf == NULL)
	{
		fail(err, "out of memory encoding %u entries", n);
		return NULL;
	}
	h->n = n;
	h->time_base_us = 0;
	for (uint32_t first = 0; first < n; first += ENCODE_SLICE)
	{
		uint32_t	m = n - first < ENCODE_SLICE ? n - first : ENCODE_SLICE;
		const TdbGenlogEntry *e = get(arg, first, m, buf);

		one = e;

		for (uint32_t i = 0; i < m; i++)
		{
			if (!entry_ok(h, first + i, &e[i], i > 0 ? &e[i - 1] : first > 0 ? &prev : NULL, err))
			{
				free(buf);
				return NULL;
			}
			if ((first == 0 && i == 0) || e[i].observed_us < h->time_base_us)
				h->time_base_us = e[i].observed_us;
		}
		prev = e[m - 1];
	}

	for (int c = 0; c < NCOLS; c++)
		codec_buf_init(&cols[c]);
	for (uint32_t first = 0; first < n; first += ENCODE_SLICE)
	{
		uint32_t	m = n - first < ENCODE_SLICE ? n - first : ENCODE_SLICE;
		/* one slice (a generation's D record, mostly): the first pass's entries are still valid */
		const TdbGenlogEntry *e = n <= ENCODE_SLICE ? one : get(arg, first, m, buf);

		for (int c = 0; c < NCOLS; c++)
			if (col_in_kind(c, h->kind))
				put_column(&cols[c], c, h, e, m, first > 0 ? &prev : NULL);
		prev = e[m - 1];
	}
	free(buf);

	memset(hdr, 0, sizeof(hdr));
	codec_put_u32le(hdr, TDB_GENLOG_MAGIC);
	hdr[4] = TDB_GENLOG_VERSION & 0xFF;
	hdr[5] = TDB_GENLOG_VERSION >> 8;
	hdr[6] = (uint8_t) h->kind;
	hdr[7] = 0;
	codec_put_u64le(hdr + 8, h->generation);
	codec_put_u64le(hdr + 16, h->map_id);
	codec_put_u64le(hdr + 24, h->count);
	codec_put_u32le(hdr + 32, n);
	codec_put_u32le(hdr + 36, h->first_record);
	codec_put_u64le(hdr + 40, (uint64_t) h->time_base_us);
	total = front + sizeof(hdr);
	for (int c = 0; c < NCOLS; c++)
	{
		ok = ok && cols[c].ok;
		if (col_in_kind(c, h->kind))
			total += 10 + cols[c].len;
	}
	out = ok ? malloc(total) : NULL;
	if (out != NULL)
	{
		p = out + front;
		memcpy(p, hdr, sizeof(hdr));
		p += sizeof(hdr);
		for (int c = 0; c < NCOLS; c++)
			if (col_in_kind(c, h->kind))
			{
				p = codec_varint_at(p, cols[c].len);
				if (cols[c].len > 0)
					memcpy(p, cols[c].data, cols[c].len);
				p += cols[c].len;
			}
		*len = (size_t) (p - out) - front;
	}
	for (int c = 0; c < NCOLS; c++)
		codec_buf_free(&cols[c]);
	if (out == NULL)
		fail(err, "out of memory encoding %u entries", n);
	return out;
}

#define BAD(...) \
	do { fail(err, __VA_ARGS__); goto bad; } while (0)

bool
tdb_genlog_decode(const uint8_t *buf, size_t len, TdbGenlogHeader *h, TdbGenlogEntry **entries,
				  char *err)
{
	TdbGenlogEntry *e = NULL;
	CodecCur	c;
	uint32_t	n;
	int			col;

	*entries = NULL;
	memset(h, 0, sizeof(*h));
	if (buf == NULL || len < TDB_GENLOG_HEADER_SIZE || codec_get_u32le(buf) != TDB_GENLOG_MAGIC)
	{
		fail(err, "not a generation-log record (%zu bytes, no TDBG magic)", len);
		return false;
	}
	if ((buf[4] | (buf[5] << 8)) != TDB_GENLOG_VERSION)
	{
		fail(err, "generation-log record version %d; this build reads version %d",
			 buf[4] | (buf[5] << 8), TDB_GENLOG_VERSION);
		return false;
	}
	h->kind = (char) buf[6];
	h->flags = buf[7];
	h->generation = codec_get_u64le(buf + 8);
	h->map_id = codec_get_u64le(buf + 16);
	h->count = codec_get_u64le(buf + 24);
	h->n = n = codec_get_u32le(buf + 32);
	h->first_record = codec_get_u32le(buf + 36);
	h->time_base_us = (int64_t) codec_get_u64le(buf + 40);
	if ((h->kind != TDB_GENLOG_DELTA && h->kind != TDB_GENLOG_CHECKPOINT) || h->flags != 0 ||
		(h->kind == TDB_GENLOG_DELTA && h->first_record != 0) ||
		(uint64_t) h->first_record + n > h->count)
	{
		fail(err, "corrupted generation-log record: kind %d, flags %u, records %u + %u of %llu",
			 h->kind, h->flags, h->first_record, n, (unsigned long long) h->count);
		return false;
	}
	/* every entry takes at least its present byte */
	if (n > len - TDB_GENLOG_HEADER_SIZE)
	{
		fail(err, "corrupted generation-log record: %u entries in %zu bytes", n, len);
		return false;
	}
	e = calloc(n ? n : 1, sizeof(TdbGenlogEntry));
	if (e == NULL)
	{
		fail(err, "out of memory for %u entries", n);
		return false;
	}
	c.p = buf + TDB_GENLOG_HEADER_SIZE;
	c.end = buf + len;
	for (col = 0; col < NCOLS; col++)
	{
		uint64_t	clen;
		CodecCur	k;

		if (!col_in_kind(col, h->kind))
		{
			if (col == COL_RECORD)
				for (uint32_t i = 0; i < n; i++)
					e[i].record = h->first_record + i;
			continue;
		}
		if (!codec_get_varint(&c, &clen) || clen > codec_left(&c))
			BAD("corrupted generation-log record: column %d runs past the end", col);
		k.p = c.p;
		k.end = c.p + clen;
		c.p += clen;
		for (uint32_t i = 0; i < n; i++)
		{
			TdbGenlogEntry *x = &e[i];
			uint64_t	v;
			uint8_t		u8,
						le[4];
			uint32_t	bits;

			switch (col)
			{
				case COL_RECORD:
					/* records are uint32: a count past 2^32 must not let one wrap */
					if (!codec_get_varint(&k, &v) ||
						v >= (h->count < (1ULL << 32) ? h->count : (1ULL << 32)) -
						(i == 0 ? 0 : (uint64_t) e[i - 1].record + 1))
						BAD("corrupted generation-log record: entry %u's record past the map", i);
					x->record = (uint32_t) ((i == 0 ? 0 : e[i - 1].record + 1) + v);
					break;
				case COL_PRESENT:
					if (!codec_get_u8(&k, &x->present) || (x->present & ~TDB_GENLOG_PRESENT_MASK))
						BAD("corrupted generation-log record: entry %u's present bits", i);
					break;
				case COL_OBSERVED:
					if (!codec_get_varint(&k, &v) || v > (uint64_t) INT64_MAX - (uint64_t) h->time_base_us)
						BAD("corrupted generation-log record: entry %u's time", i);
					x->observed_us = (int64_t) ((uint64_t) h->time_base_us + v);
					break;
				case COL_SPEED:
				case COL_FREE_FLOW:
					if (!(x->present & (col == COL_SPEED ? TDB_GENLOG_HAS_SPEED : TDB_GENLOG_HAS_FREE_FLOW)))
						break;
					if (!codec_get_bytes(&k, le, 4))
						BAD("corrupted generation-log record: entry %u's speed", i);
					bits = codec_get_u32le(le);
					memcpy(col == COL_SPEED ? &x->speed_kmh : &x->free_flow_kmh, &bits, 4);
					break;
				case COL_CONGESTION:
				case COL_CONFIDENCE:
					if (!(x->present & (col == COL_CONGESTION ? TDB_GENLOG_HAS_CONGESTION : TDB_GENLOG_HAS_CONFIDENCE)))
						break;
					if (!codec_get_u8(&k, &u8))
						BAD("corrupted generation-log record: entry %u's congestion or confidence", i);
					*(col == COL_CONGESTION ? &x->congestion : &x->confidence) = u8;
					break;
				case COL_FLAGS:
					if (!(x->present & TDB_GENLOG_HAS_FLAGS))
						break;
					if (!codec_get_varint(&k, &v) || v > UINT16_MAX)
						BAD("corrupted generation-log record: entry %u's flags", i);
					x->flags = (uint16_t) v;
					break;
				case COL_INCIDENT:
					if (!(x->present & TDB_GENLOG_HAS_INCIDENT))
						break;
					if (!codec_get_varint(&k, &v) || v > TDB_GENLOG_MAX_INCIDENT || v > codec_left(&k))
						BAD("corrupted generation-log record: entry %u's incident", i);
					x->incident = (const char *) k.p;
					x->incident_len = (uint32_t) v;
					k.p += v;
					break;
				case COL_CHANGED_GEN:
					if (!codec_get_varint(&k, &v) || v > h->generation)
						BAD("corrupted generation-log record: entry %u changed after the checkpoint", i);
					x->changed_gen = h->generation - v;
					break;
				case COL_ID:
					if (!codec_get_varint(&k, &v))
						BAD("corrupted generation-log record: entry %u's id", i);
					x->id = (i == 0 ? 0 : e[i - 1].id) + (uint64_t) codec_unzigzag(v);
					break;
			}
		}
		if (codec_left(&k) != 0)
			BAD("corrupted generation-log record: %zu bytes left over in column %d", codec_left(&k), col);
	}
	if (codec_left(&c) != 0)
		BAD("corrupted generation-log record: %zu bytes after the last column", codec_left(&c));
	if (h->kind == TDB_GENLOG_DELTA)
		for (uint32_t i = 0; i < n; i++)
			e[i].changed_gen = h->generation;
	*entries = e;
	return true;

bad:
	free(e);
	return false;
}
