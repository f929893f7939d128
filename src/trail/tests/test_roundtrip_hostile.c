/*
 * test_roundtrip_hostile.c
 *	  A hostile review of the round-trip changes (bd91dac, ef6224b,
 *	  38b92f7): the lexicon read in one load_locked with trail and page
 *	  chunks (damaged, lying under a good CRC, none, loaded already, with a
 *	  damaged chunk in the same read; an error leaves nothing half made and
 *	  a retry fails the same way), a scan that finds nothing reads no
 *	  lexicon, version 3/4/5 files, joins that load every entry early, and
 *	  tdb_pager_read_exact's ranges ending in the tail (every straddle,
 *	  caches keyed by the shortened length, the tail extended in between).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../checksum.h"
#include "codec.h"
#include "footer3.h"
#include "format.h"
#include "pager.h"
#include "test_footer3_hostile.h"
#include "trail_fixture.h"
#include "trail_fixture_s3.h"
#include "trail_unit.h"

#define T0 FX_SMALL_T0

/*
 * Trail k: id 3k + 1, n events a second apart (times offset by k), a
 * float64 "v" and a string "s", name-(k % ndistinct), or NULL throughout
 * when ndistinct is 0.
 */
static uint8_t *
rt_write(int version, int ntrails, int n, uint32_t page_events, int ndistinct, size_t *len)
{
	return fx_write_small(version, ntrails, n, page_events, TDB_TRAIL_ORDER_TRAIL, ndistinct, len);
}

typedef struct RtQuery
{
	const int64_t *id;			/* NULL: by time */
	int64_t		from,
				to;				/* with id NULL */
	bool		skip_s;			/* skip column 1, "s" */
	TdbTrailPageCache *cache;
	uint32_t	lookups;
	int			ndistinct;		/* 0: "s" is NULL */
	TdbTrailScanStats *stats;	/* non-NULL: the scan's, at its end */
} RtQuery;

/* Events q finds, each checked against what rt_write wrote; < 0 the error. */
static int64_t
rt_count(TdbTrailReader *r, const RtQuery *rq, TdbTrailError *err)
{
	TdbTrailQuery q;
	TdbTrailScan *s;
	TdbTrailEvent ev;
	int64_t		n = 0;
	int			rc;

	memset(&q, 0, sizeof(q));
	if (rq->id)
	{
		q.ids_int = rq->id;
		q.nids = 1;
	}
	else
	{
		q.has_time = true;
		q.time_from = rq->from;
		q.time_to = rq->to;
	}
	q.skip_columns = rq->skip_s ? 2 : 0;
	q.page_cache = rq->cache;
	q.lookups_expected = rq->lookups;
	if ((rc = tdb_trail_scan_begin(r, &q, &s, err)) < 0)
		return rc;
	while ((rc = tdb_trail_scan_next(s, &ev, err)) > 0)
	{
		int64_t		k = (ev.key.i - 1) / 3;
		char		want[32];

		CHECK(rq->id == NULL || ev.key.i == *rq->id);
		CHECK(ev.values[0].f == k + (double) ((ev.time_us - T0 - k) / 1000000) * 0.5);
		if (!rq->skip_s && rq->ndistinct > 0)
		{
			snprintf(want, sizeof(want), "name-%05d", (int) (k % rq->ndistinct));
			CHECK(!ev.values[1].isnull && ev.values[1].s != NULL && strcmp(ev.values[1].s, want) == 0);
		}
		else if (!rq->skip_s)
			CHECK(ev.values[1].isnull);
		n++;
	}
	if (rq->stats)
		tdb_trail_scan_stats(s, rq->stats);
	tdb_trail_scan_end(s);
	return rc < 0 ? rc : n;
}

/* The lexicon's place and checks, from a fresh open of buf; false after a unit_fail. */
static bool
rt_lexicon(const uint8_t *buf, size_t len, uint64_t *off, uint64_t *lexlen, uint32_t *crc, uint32_t *nstr)
{
	FxOpened	o;
	TdbTrailError err;
	const F3Lazy *z;

	if (hostile_open(&o, buf, len, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
		return false;
	}
	z = tdb_trail_footer(o.r)->lazy;
	CHECK(z != NULL);
	if (z != NULL)
	{
		*off = z->lex_off;
		*lexlen = z->lex_len;
		*crc = z->lex_crc;
		*nstr = z->nstrings;
	}
	fx_close_opened(&o);
	return z != NULL;
}

/*
 * A copy of buf with its lexicon's lex_len bytes replaced by lie; with
 * good_crc, the head's lexicon CRC, the footer CRC and the trailer made to
 * agree (a lie only the lexicon's decoding can find).  NULL after a unit_fail.
 */
static uint8_t *
rt_relex(const uint8_t *buf, size_t len, const uint8_t *lie, bool good_crc)
{
	uint64_t	off,
				lexlen;
	uint32_t	crc,
				nstr;
	uint8_t    *out;
	uint8_t    *tr;
	uint64_t	foff,
				flen;
	CodecBuf	pat;
	int			hits = 0;
	size_t		at = 0;

	if (!rt_lexicon(buf, len, &off, &lexlen, &crc, &nstr) || (out = malloc(len)) == NULL)
		return NULL;
	memcpy(out, buf, len);
	memcpy(out + off, lie, lexlen);
	if (!good_crc)
		return out;
	tr = out + len - TDB_TRAIL_TRAILER_SIZE;
	foff = codec_get_u64le(tr);
	flen = codec_get_u64le(tr + 8);
	/* the head's "nstrings, lex_len, crc" */
	codec_buf_init(&pat);
	codec_put_varint(&pat, nstr);
	codec_put_varint(&pat, lexlen);
	{
		uint8_t		le[4];

		codec_put_u32le(le, crc);
		codec_put_bytes(&pat, le, 4);
	}
	for (size_t i = foff; pat.ok && i + pat.len <= foff + flen; i++)
		if (memcmp(out + i, pat.data, pat.len) == 0)
			hits++, at = i + pat.len - 4;
	codec_buf_free(&pat);
	if (hits != 1)
	{
		unit_fail(__FILE__, __LINE__, "the lexicon's CRC found %d times in the head", hits);
		free(out);
		return NULL;
	}
	codec_put_u32le(out + at, tdb_crc32c(out + off, lexlen));
	codec_put_u32le(tr + 24, tdb_crc32c(out + foff, flen));
	codec_put_u32le(tr + 40, tdb_crc32c(tr, 40));
	return out;
}

/* The state a failed lexicon must leave: nothing loaded, nothing allocated. */
static void
check_no_lexicon(const TdbTrailReader *r)
{
	const TdbTrailFooter *f = tdb_trail_footer(r);
	const F3Lazy *z = f->lazy;

	CHECK(!z->lex_loaded);
	CHECK(z->lex_arena == NULL);
	CHECK(f->strings == NULL);
	CHECK(f->nstrings == 0);
}

/*
 * A lexicon that lies, with a bad CRC or a good one: every scan that
 * decodes "s" (by id, by time) fails cleanly, again on retry, leaving no
 * lexicon; scans that skip "s" still find every event.  The lexicon of
 * rt_write(.., 2 distinct) is 2 strings of 10 bytes: 23 bytes.
 */
UNIT_TEST(test_rt_lying_lexicon_fails_cleanly)
{
	size_t		len;
	uint8_t    *good = rt_write(5, 40, 5, 2, 2, &len);
	uint64_t	off,
				L = 0;
	uint32_t	crc,
				nstr;
	struct
	{
		const char *what;
		bool		good_crc;
		uint8_t		lie[64];
	}			cases[9];
	int			nc = 0;

	CHECK(good != NULL);
	if (good == NULL || !rt_lexicon(good, len, &off, &L, &crc, &nstr))
		goto out;
	CHECK(nstr == 2 && L == 23);
	if (L != 23)
		goto out;
	memset(cases, 0, sizeof(cases));
	for (int k = 0; k < 9; k++)
		memset(cases[k].lie, 'x', sizeof(cases[k].lie));	/* strings of NULs are refused */
	/* a flipped byte, the CRC left */
	cases[nc].what = "checksum";
	memcpy(cases[nc].lie, good + off, L);
	cases[nc++].lie[5] ^= 0x40;
	/* one string (21 bytes), where the head says 2 */
	cases[nc].what = "disagrees";
	cases[nc].good_crc = true;
	cases[nc].lie[0] = 1, cases[nc].lie[1] = 21;
	nc++;
	/* three: 19 bytes, "", "" */
	cases[nc].what = "disagrees";
	cases[nc].good_crc = true;
	cases[nc].lie[0] = 3, cases[nc].lie[1] = 19, cases[nc].lie[21] = 0, cases[nc].lie[22] = 0;
	nc++;
	/* none, then 22 bytes of nothing */
	cases[nc].what = "disagrees";
	cases[nc].good_crc = true;
	cases[nc].lie[0] = 0;
	nc++;
	/* two, 10 bytes and 9, then a trailing byte */
	cases[nc].what = "trailing bytes";
	cases[nc].good_crc = true;
	cases[nc].lie[0] = 2, cases[nc].lie[1] = 10, cases[nc].lie[12] = 9, cases[nc].lie[22] = 7;
	nc++;
	/* two, the first 2^32 - 1 bytes long */
	cases[nc].what = "bad lexicon string";
	cases[nc].good_crc = true;
	memcpy(cases[nc].lie, "\x02\xff\xff\xff\xff\x0f", 6);
	nc++;
	/* 2^32 + 2 strings (2 once truncated to 32 bits) */
	cases[nc].what = "bad lexicon size";
	cases[nc].good_crc = true;
	memcpy(cases[nc].lie, "\x82\x80\x80\x80\x10\x0a", 6);
	nc++;
	/* two, the second's length past the end */
	cases[nc].what = "bad lexicon string";
	cases[nc].good_crc = true;
	cases[nc].lie[0] = 2, cases[nc].lie[1] = 10, cases[nc].lie[12] = 30;
	nc++;
	for (int k = 0; k < nc; k++)
	{
		uint8_t    *bad = rt_relex(good, len, cases[k].lie, cases[k].good_crc);
		FxOpened	o;
		TdbTrailError err;
		int64_t		id = 3 * 17 + 1,
					absent = 0;
		RtQuery		byid = {&id, 0, 0, false, NULL, 0, 2, NULL},
					window = {NULL, T0 + 17, T0 + 17, false, NULL, 0, 2, NULL};
		uint64_t	ev;

		if (bad == NULL)
			continue;
		if (hostile_open(&o, bad, len, &err) < 0)
		{
			unit_fail(__FILE__, __LINE__, "case %d refused at open: %s", k, err.msg);
			free(bad);
			continue;
		}
		for (int round = 0; round < 2; round++)
		{
			int64_t		got = rt_count(o.r, &byid, &err);

			if (got != TDB_TRAIL_ECORRUPT || strstr(err.msg, cases[k].what) == NULL)
				unit_fail(__FILE__, __LINE__, "case %d (%s), round %d, by id: %lld (%s)", k, cases[k].what,
						  round, (long long) got, got < 0 ? err.msg : "rows");
			check_no_lexicon(o.r);
			got = rt_count(o.r, &window, &err);
			if (got != TDB_TRAIL_ECORRUPT || strstr(err.msg, cases[k].what) == NULL)
				unit_fail(__FILE__, __LINE__, "case %d (%s), round %d, window: %lld (%s)", k, cases[k].what,
						  round, (long long) got, got < 0 ? err.msg : "rows");
			check_no_lexicon(o.r);
		}
		/* without "s": every event, the lexicon never read */
		byid.skip_s = window.skip_s = true;
		CHECK(rt_count(o.r, &byid, &err) == 5);
		CHECK(rt_count(o.r, &window, &err) == 1);
		/* an absent id finds nothing, whatever the lexicon */
		byid.skip_s = false;
		byid.id = &absent;
		CHECK(rt_count(o.r, &byid, &err) == 0);
		check_no_lexicon(o.r);
		/* the whole footer: the lexicon's damage found, cleanly */
		CHECK(tdb_trail_verify(o.r, &ev, &err) == TDB_TRAIL_ECORRUPT);
		check_no_lexicon(o.r);
		fx_close_opened(&o);
		free(bad);
	}
	/* the same lengths, other strings, a good CRC: read as written (a lie nothing can see) */
	{
		uint8_t		lie[23];
		uint8_t    *bad;
		FxOpened	o;
		TdbTrailError err;

		memcpy(lie, good + off, L);
		for (int i = 0; i < 23; i++)
			if (lie[i] == 'n')
				lie[i] = 'N';
		if ((bad = rt_relex(good, len, lie, true)) != NULL && hostile_open(&o, bad, len, &err) == 0)
		{
			const TdbTrailFooter *f = tdb_trail_footer(o.r);
			int64_t		id = 3 * 17 + 1;
			TdbTrailQuery q;
			TdbTrailScan *s = NULL;
			TdbTrailEvent e;

			CHECK(tdb_trail_need_lexicon(o.r, &err) == 0);
			CHECK(((const F3Lazy *) f->lazy)->lex_loaded && f->nstrings == 2 && strncmp(f->strings[0], "Name-", 5) == 0);
			memset(&q, 0, sizeof(q));
			q.ids_int = &id;
			q.nids = 1;
			CHECK(tdb_trail_scan_begin(o.r, &q, &s, &err) == 0);
			CHECK(s != NULL && tdb_trail_scan_next(s, &e, &err) == 1 && strcmp(e.values[1].s, "Name-00001") == 0);
			tdb_trail_scan_end(s);
			fx_close_opened(&o);
		}
		free(bad);
	}
out:
	free(good);
}

/* A byte of chunk (kind, j) of buf flipped. */
static uint8_t *
rt_damage_chunk(const uint8_t *buf, size_t len, int kind, uint32_t j)
{
	FxOpened	o;
	TdbTrailError err;
	uint8_t    *out = NULL;

	if (hostile_open(&o, buf, len, &err) < 0)
		return NULL;
	{
		const F3Lazy *z = tdb_trail_footer(o.r)->lazy;

		if (j < z->nchunks[kind] && (out = malloc(len)) != NULL)
		{
			memcpy(out, buf, len);
			out[z->chunks[kind][j].off + z->chunks[kind][j].len / 2] ^= 0x10;
		}
	}
	fx_close_opened(&o);
	return out;
}

/*
 * A damaged trail chunk (read with the lexicon by a lookup) or page chunk
 * (read with it by a time window), the lexicon good or damaged too: a
 * clean error, no lexicon left half made, again on retry; what the
 * damaged chunk does not hold still read right, strings included.
 */
UNIT_TEST(test_rt_damaged_chunk_read_with_the_lexicon)
{
	size_t		len;
	uint8_t    *good = rt_write(5, 200, 5, 2, 2, &len);
	uint64_t	off,
				L = 0;
	uint32_t	crc,
				nstr;

	CHECK(good != NULL);
	if (good == NULL || !rt_lexicon(good, len, &off, &L, &crc, &nstr))
		goto out;
	for (int kase = 0; kase < 4; kase++)
	{
		int			kind = kase & 1 ? TRAIL3_PAGES : TRAIL3_TRAILS;
		bool		lexbad = kase >= 2;
		uint8_t    *bad = rt_damage_chunk(good, len, kind, 0);
		FxOpened	o;
		TdbTrailError err;
		int64_t		id = 1,			/* trail 0: in chunk 0 of either kind */
					far = 3 * 199 + 1;
		RtQuery		q = {kind == TRAIL3_TRAILS ? &id : NULL, T0, T0, false, NULL, 0, 2, NULL},
					other = {&far, 0, 0, false, NULL, 0, 2, NULL};

		if (bad == NULL)
		{
			unit_fail(__FILE__, __LINE__, "case %d: no chunk to damage", kase);
			continue;
		}
		if (lexbad)
			bad[off + 3] ^= 0x01;
		if (hostile_open(&o, bad, len, &err) < 0)
		{
			unit_fail(__FILE__, __LINE__, "case %d refused at open: %s", kase, err.msg);
			free(bad);
			continue;
		}
		for (int round = 0; round < 2; round++)
		{
			int64_t		got = rt_count(o.r, &q, &err);

			if (got != TDB_TRAIL_ECORRUPT)
				unit_fail(__FILE__, __LINE__, "case %d round %d: %lld (%s)", kase, round, (long long) got,
						  got < 0 ? err.msg : "rows");
			/* the chunk is decoded before the lexicon, which is then dropped */
			check_no_lexicon(o.r);
		}
		/* trail 199 (other chunks): its events, with strings unless the lexicon is damaged */
		{
			int64_t		got = rt_count(o.r, &other, &err);

			if (got != (lexbad ? TDB_TRAIL_ECORRUPT : 5))
				unit_fail(__FILE__, __LINE__, "case %d, another trail: %lld (%s)", kase, (long long) got,
						  got < 0 ? err.msg : "rows");
			CHECK(((const F3Lazy *) tdb_trail_footer(o.r)->lazy)->lex_loaded == !lexbad);
		}
		fx_close_opened(&o);
		free(bad);
	}
out:
	free(good);
}

/*
 * Lookups and windows on versions 3, 4 and 5, "s" read or skipped, with
 * strings, all NULL (no lexicon at all: nstrings 0), many distinct: the
 * events written; the lexicon loaded once, with the first scan that decodes
 * "s", then not again (loaded_bytes unchanged).
 */
UNIT_TEST(test_rt_versions_and_lexicon_shapes)
{
	static const int vers[3] = {3, 4, 5};
	static const int distinct[3] = {2, 0, 300};

	for (int vi = 0; vi < 3; vi++)
		for (int di = 0; di < 3; di++)
		{
			size_t		len;
			uint8_t    *buf = rt_write(vers[vi], 300, 4, 3, distinct[di], &len);
			FxOpened	o;
			TdbTrailError err;
			const F3Lazy *z;
			size_t		loaded = 0;

			if (buf == NULL || hostile_open(&o, buf, len, &err) < 0)
			{
				unit_fail(__FILE__, __LINE__, "version %d, %d strings: not written or opened", vers[vi],
						  distinct[di]);
				free(buf);
				continue;
			}
			z = tdb_trail_footer(o.r)->lazy;
			CHECK(z != NULL && z->nstrings == (uint32_t) distinct[di]);
			for (int pass = 0; z != NULL && pass < 2; pass++)
				for (int skip = 1; skip >= 0; skip--)
				{
					int64_t		id = 3 * 123 + 1;
					RtQuery		byid = {&id, 0, 0, skip, NULL, 0, distinct[di], NULL},
								window = {NULL, T0 + 200, T0 + 200, skip, NULL, 0, distinct[di], NULL};
					int64_t		a = rt_count(o.r, &byid, &err),
								b = rt_count(o.r, &window, &err);

					if (a != 4 || b != 1)
						unit_fail(__FILE__, __LINE__, "version %d, %d strings, skip %d: %lld by id, %lld by time (%s)",
								  vers[vi], distinct[di], skip, (long long) a, (long long) b, err.msg);
					CHECK(z->lex_loaded == (distinct[di] > 0 && (pass > 0 || !skip)));
					if (pass == 0 && !skip)
						loaded = z->loaded_bytes;
					if (pass == 1)
						CHECK(z->loaded_bytes == loaded);
				}
			fx_close_opened(&o);
			free(buf);
		}
}

/*
 * A scan that finds nothing to decode reads no lexicon: ids below the
 * first and above the last (no trail chunk to read), a time window before
 * the file (no page chunk).  Both read it once the commits under review
 * asked for the lexicon with chunks however many there were, none
 * included: on S3 a GET the scan had no use for (test_rt_s3_empty_scans_
 * send_nothing counts them).
 */
UNIT_TEST(test_rt_empty_scans_read_no_lexicon)
{
	size_t		len;
	uint8_t    *buf = rt_write(5, 40, 5, 2, 2, &len);
	FxOpened	o;
	TdbTrailError err;
	int64_t		below = -5,
				above = 3 * 40 + 10,
				between = 3;	/* inside the id range, no such trail: its chunk is read */
	RtQuery		q[3] = {
		{&below, 0, 0, false, NULL, 0, 2, NULL},
		{&above, 0, 0, false, NULL, 0, 2, NULL},
		{NULL, T0 - 1000000, T0 - 1, false, NULL, 0, 2, NULL},
	};

	if (buf == NULL || hostile_open(&o, buf, len, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "not written or opened");
		free(buf);
		return;
	}
	for (int k = 0; k < 3; k++)
	{
		CHECK(rt_count(o.r, &q[k], &err) == 0);
		if (((const F3Lazy *) tdb_trail_footer(o.r)->lazy)->lex_loaded)
			unit_fail(__FILE__, __LINE__, "scan %d found nothing but read the lexicon", k);
	}
	q[0].id = &between;
	CHECK(rt_count(o.r, &q[0], &err) == 0);
	fx_close_opened(&o);
	free(buf);
}

/* ---- on MinIO (src/trail/tests/run.sh) ------------------------------------ */

static int
rt_open_s3(const TdbS3Config *c, const char *key, uint32_t tail_bytes, const char *cache_dir, TdbPager **p,
		   TdbTrailError *err)
{
	TdbPagerOptions o;

	fx_pager_options(&o, c, key);
	o.tail_bytes = tail_bytes;
	o.cache_dir = cache_dir;
	return tdb_pager_open(&o, p, err);
}

/* ranges r[0 .. n-1] of p read exactly, each compared with want's bytes */
static void
rt_exact(TdbPager *p, const uint8_t *want, const TdbByteRange *r, int n, const char *what)
{
	uint8_t    *bufs[16];
	TdbTrailError err;

	for (int i = 0; i < n; i++)
		bufs[i] = malloc(r[i].len ? r[i].len : 1);	/* exactly: ASan sees a byte too many */
	if (tdb_pager_read_exact(p, r, n, bufs, &err) < 0)
		unit_fail(__FILE__, __LINE__, "%s: %s", what, err.msg);
	else
		for (int i = 0; i < n; i++)
			if (r[i].len > 0 && memcmp(bufs[i], want + r[i].off, r[i].len) != 0)
				unit_fail(__FILE__, __LINE__, "%s: range %d (%llu+%llu) differs from the object", what, i,
						  (unsigned long long) r[i].off, (unsigned long long) r[i].len);
	for (int i = 0; i < n; i++)
		free(bufs[i]);
}

/*
 * Exact reads ending in the tail, every shape: a byte below it, ending at
 * the object's end, twice in one read, empty ones, one at the tail, one
 * ending at it and the same offset a byte longer; read again (memory
 * cache), by a fresh pager on the same disk cache, by one with a longer
 * tail (another shortened length: another key), and after the tail is
 * extended down past some of them.  Always the object's bytes.
 */
UNIT_TEST(test_rt_s3_exact_reads_straddling_the_tail)
{
	TdbS3Config c;
	size_t		n = 200000;
	uint8_t    *want = fx_random_bytes(n, 4242);
	char		dir[256];
	const char *key = "s3://" BUCKET "/rt-straddle.bin";
	TdbPager   *p = NULL,
			   *p2 = NULL,
			   *p3 = NULL;
	TdbPagerStats ps;
	TdbTrailError err;
	uint64_t	t = n - 4096;	/* tail_off with a 4 kB tail */
	TdbByteRange r[9] = {
		{1000, 100}, {t - 1, 2}, {t - 500, 4596}, {t - 500, 4596}, {t - 10, 0},
		{n, 0}, {t, 10}, {t - 3000, 3000}, {t - 3000, 3001},
	};

	fx_tmpdir(dir, sizeof(dir), "rtstraddle");
	if (!fx_s3_env(&c, false) || !fx_ensure_bucket(&c) || !fx_put(&c, "rt-straddle.bin", want, n, 0))
		goto out;
	if (rt_open_s3(&c, key, 4096, dir, &p, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
		goto out;
	}
	rt_exact(p, want, r, 9, "cold");
	rt_exact(p, want, r, 9, "warm");
	tdb_pager_stats(p, &ps);
	/*
	 * The tail, 100 bytes, then below the tail: 1, 500 and 3000.  Ranges
	 * equal once shortened (r7, r8) or equal (r2, r3) in one read are
	 * fetched once (fetch_merged: a range repeating the one before adds no
	 * byte; 500 and 3000 more before).  r1 lies within r2's bytes but comes
	 * before them: fetched on its own.
	 */
	if (ps.bytes_network != 4096 + 100 + 1 + 500 + 3000)
		unit_fail(__FILE__, __LINE__, "%llu bytes fetched", (unsigned long long) ps.bytes_network);
	/* a fresh pager on the same disk cache: the same keys */
	if (rt_open_s3(&c, key, 4096, dir, &p2, &err) == 0)
	{
		rt_exact(p2, want, r, 9, "disk cache");
		tdb_pager_stats(p2, &ps);
		CHECK(ps.bytes_disk_cache > 0);
	}
	else
		unit_fail(__FILE__, __LINE__, "open 2: %s", err.msg);
	/* a longer tail: the same ranges shortened otherwise, or not at all */
	if (rt_open_s3(&c, key, 8192, dir, &p3, &err) == 0)
	{
		TdbByteRange r3[3] = {{n - 9000, 9000}, {n - 8193, 8193}, {t - 3000, 3001}};

		rt_exact(p3, want, r, 9, "longer tail");
		rt_exact(p3, want, r3, 3, "longer tail, its own straddles");
	}
	else
		unit_fail(__FILE__, __LINE__, "open 3: %s", err.msg);
	/* the tail extended below some of them: read again */
	CHECK(tdb_pager_extend_tail(p, t - 2000, &err) == 0);
	rt_exact(p, want, r, 9, "after extend");
	CHECK(tdb_pager_extend_tail(p, 500, &err) == 0);
	rt_exact(p, want, r, 9, "after a second extend");
out:
	tdb_pager_close(p);
	tdb_pager_close(p2);
	tdb_pager_close(p3);
	free(want);
}

/*
 * A straddling range longer than one GET (MAX_RANGE_BYTES, 16 MB) with a
 * byte far below, so that the tail is not extended first: read by blocks,
 * the object's bytes.
 */
UNIT_TEST(test_rt_s3_exact_read_longer_than_a_get_into_the_tail)
{
	TdbS3Config c;
	size_t		n = 24u << 20;
	uint8_t    *want = fx_random_bytes(n, 99);
	TdbPager   *p = NULL;
	TdbTrailError err;
	TdbByteRange r[2] = {{0, 1}, {n - (16u << 20) - 1000, (16u << 20) + 1000}};

	if (!fx_s3_env(&c, false) || !fx_ensure_bucket(&c) || !fx_put(&c, "rt-long.bin", want, n, 8u << 20))
		goto out;
	if (rt_open_s3(&c, "s3://" BUCKET "/rt-long.bin", 4096, NULL, &p, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
		goto out;
	}
	rt_exact(p, want, r, 2, "long");
	rt_exact(p, want, r, 2, "long, again");
out:
	tdb_pager_close(p);
	free(want);
}

/*
 * A join over S3 (a page cache, 10 lookups expected, a small file: the
 * first lookup loads every entry and the lexicon at once, then
 * prefetch_union): every lookup finds what a lookup alone finds, "s" read
 * or skipped, and the first still prefetches the union.  With a damaged
 * lexicon, the lookups decoding "s" fail cleanly (no lexicon left), those
 * skipping it do not.
 */
UNIT_TEST(test_rt_s3_join_loads_entries_and_lexicon_early)
{
	TdbS3Config c;
	size_t		len;
	uint8_t    *good = rt_write(5, 40, 5, 2, 2, &len);
	uint64_t	off,
				L = 0;
	uint32_t	crc,
				nstr;

	if (good == NULL || !rt_lexicon(good, len, &off, &L, &crc, &nstr))
		goto out;
	if (!fx_s3_env(&c, false) || !fx_ensure_bucket(&c))
		goto out;
	for (int kase = 0; kase < 4; kase++)
	{
		bool		lexbad = kase >= 2,
					skip = kase & 1;
		char		name[64];
		uint8_t    *buf = malloc(len);
		TdbPager   *p = NULL;
		TdbTrailReader *r = NULL;
		TdbTrailPageCache *cache = tdb_trail_page_cache_create(8u << 20);
		TdbTrailError err;

		memcpy(buf, good, len);
		if (lexbad)
			buf[off + 2] ^= 0x08;
		snprintf(name, sizeof(name), "rt-join-%d.trail", kase);
		tdb_trail_footer_cache_clear();
		if (!fx_put(&c, name, buf, len, 0))
			goto next;
		snprintf(name, sizeof(name), "s3://" BUCKET "/rt-join-%d.trail", kase);
		if (rt_open_s3(&c, name, 4096, NULL, &p, &err) < 0 || tdb_trail_open(p, &r, &err) < 0)
		{
			unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
			goto next;
		}
		for (int k = 0; k < 10; k++)
		{
			int64_t		id = k == 9 ? 0 : 3 * (4 * k + 1) + 1;	/* the last absent */
			TdbTrailScanStats st;
			RtQuery		q = {&id, 0, 0, skip, cache, 10, 2, &st};
			int64_t		got = rt_count(r, &q, &err),
						expect = lexbad && !skip && k < 9 ? TDB_TRAIL_ECORRUPT : k == 9 ? 0 : 5;

			/* a damaged lexicon: even the absent id's lookup, which loads it with the entries */
			if (lexbad && !skip && k == 0)
				expect = TDB_TRAIL_ECORRUPT;
			if (got != expect && !(lexbad && !skip && k == 9 && got == TDB_TRAIL_ECORRUPT))
				unit_fail(__FILE__, __LINE__, "case %d lookup %d: %lld (%s), expected %lld", kase, k,
						  (long long) got, got < 0 ? err.msg : "rows", (long long) expect);
			if (k == 0 && got >= 0)
				CHECK(st.union_prefetched);
			if (lexbad)
				check_no_lexicon(r);
		}
next:
		tdb_trail_close(r);
		tdb_pager_close(p);
		tdb_trail_page_cache_free(cache);
		free(buf);
	}
out:
	free(good);
}

/*
 * Memory running out while a lookup loads the lexicon (or anything else) is
 * TDB_TRAIL_ENOMEM, never "corrupted": a child process opens nothing new,
 * lowers its address-space limit to what it maps give or take a slack
 * (-8 to +8 MB), and looks up a trail that needs the lexicon.  Before, a
 * failed allocation of the lexicon's string table said "corrupted trail
 * file footer: out of memory in the lexicon" (TDB_TRAIL_ECORRUPT).
 */
static void
oom_sweep(void)
{
	size_t		len;
	const int	ntrails = 60000;
	uint8_t    *buf = rt_write(5, ntrails, 1, 4096, ntrails, &len);
	FxOpened	o;
	int			ok = 0,
				enomem = 0,
				corrupt = 0,
				other = 0;

	CHECK(buf != NULL);
	if (buf == NULL || !fx_open_buf(&o, buf, len, "oom", false, true))
	{
		free(buf);
		return;
	}
	/* below what it maps too: memory the lookup frees (a heap trimmed) is then not enough */
	for (long slack = -(8L << 20); slack <= (8L << 20); slack += 128 << 10)
	{
		pid_t		pid;
		int			status = 0;

		fflush(stdout);
		pid = fork();
		CHECK(pid >= 0);
		if (pid < 0)
			break;
		if (pid == 0)
		{
			long		pages = 0;
			FILE	   *f = fopen("/proc/self/statm", "r");
			struct rlimit rl;
			int64_t		id = 3LL * 41234 + 1;
			RtQuery		rq = {.id = &id, .ndistinct = ntrails};
			TdbTrailError err;
			int64_t		rc;

			/*
			 * Every large allocation its own mapping, under the limit: the
			 * heap's free chunks (the parent's, freed) taken first, as
			 * glibc would serve an allocation from them without a new page.
			 */
			mallopt(M_MMAP_THRESHOLD, 64 << 10);
			for (size_t k = 0, cap = mallinfo2().fordblks / (16 << 10) + 64;
				 k < cap && mallinfo2().fordblks >= (16 << 10); k++)
				if (malloc(16 << 10) == NULL)
					break;
			if (f == NULL || fscanf(f, "%ld", &pages) != 1)
				_exit(3);
			fclose(f);
			rl.rlim_cur = rl.rlim_max = (rlim_t) (pages * sysconf(_SC_PAGESIZE) + slack);
			if (setrlimit(RLIMIT_AS, &rl) != 0)
				_exit(3);
			rc = rt_count(o.r, &rq, &err);
			if (rc == 1)
				_exit(0);
			if (rc == TDB_TRAIL_ENOMEM)
				_exit(1);
			if (rc == TDB_TRAIL_ECORRUPT)
			{
				printf("# slack %ld kB: %s\n", slack / 1024, err.msg);
				_exit(2);
			}
			_exit(3);
		}
		waitpid(pid, &status, 0);
		if (!WIFEXITED(status))
			other++;
		else
			switch (WEXITSTATUS(status))
			{
				case 0:
					ok++;
					break;
				case 1:
					enomem++;
					break;
				case 2:
					corrupt++;
					break;
				default:
					other++;
			}
	}
	printf("# %d found the trail, %d out of memory, %d corrupted, %d other\n", ok, enomem, corrupt, other);
	CHECK(corrupt == 0);
	CHECK(other == 0);
	CHECK(enomem > 0);
	CHECK(ok > 0);
	fx_close_opened(&o);
	free(buf);
}

/*
 * In a process of its own (this binary again, this test alone): after other
 * tests, glibc serves the lookup's allocations from memory their threads'
 * arenas freed, and the limit never bites.
 */
UNIT_TEST(test_trail_out_of_memory_is_not_corruption)
{
	pid_t		pid;
	int			status = 0;

#ifdef __SANITIZE_ADDRESS__
	/* ASan reserves terabytes of shadow: no address-space limit can hold */
	printf("# skipped under AddressSanitizer\n");
	return;
#endif
	if (getenv("TRAIL_OOM_SWEEP") != NULL)
	{
		oom_sweep();
		return;
	}
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
	{
		/* its TAP lines are not this run's: to stderr */
		dup2(2, 1);
		setenv("TRAIL_OOM_SWEEP", "1", 1);
		execl("/proc/self/exe", "trail_tests", "test_trail_out_of_memory_is_not_corruption", (char *) NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, &status, 0);
	CHECK(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
