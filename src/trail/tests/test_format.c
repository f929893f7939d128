/*
 * test_format.c
 *	  The trail file format through the local pager: exact round trips,
 *	  pruned queries equal to brute force while reading fewer pages, and
 *	  corrupted or truncated files rejected with an error, never a crash.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checksum.h"
#include "codec.h"
#include "format.h"
#include "pager.h"
#include "trail_fixture.h"
#include "trail_unit.h"

/* Open path through a local pager. */
static int
open_local(const char *path, TdbPager **p, TdbTrailReader **r, TdbTrailError *err)
{
	TdbPagerOptions o;
	int			rc;

	memset(&o, 0, sizeof(o));
	o.url = path;
	*r = NULL;
	if ((rc = tdb_pager_open(&o, p, err)) < 0)
		return rc;
	if ((rc = tdb_trail_open(*p, r, err)) < 0)
	{
		tdb_pager_close(*p);
		*p = NULL;
	}
	return rc;
}

UNIT_TEST(test_trail_codec_varints)
{
	int64_t		vals[] = {0, 1, -1, 63, -64, 64, 127, 128, INT64_MAX, INT64_MIN, 1LL << 35, -(1LL << 50)};
	CodecBuf	b;
	CodecCur	c;

	codec_buf_init(&b);
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		codec_put_svarint(&b, vals[i]);
	c.p = b.data;
	c.end = b.data + b.len;
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
	{
		int64_t		v = 0;

		CHECK(codec_get_svarint(&c, &v));
		CHECK_EQ_U64(v, vals[i]);
	}
	CHECK(codec_left(&c) == 0);
	{
		/* an 11-byte varint and a truncated one are rejected */
		uint8_t		bad[11];
		uint64_t	v;

		memset(bad, 0xFF, sizeof(bad));
		c.p = bad;
		c.end = bad + 11;
		CHECK(!codec_get_varint(&c, &v));
		c.p = bad;
		c.end = bad + 3;
		CHECK(!codec_get_varint(&c, &v));
	}
	codec_buf_free(&b);
}

/* Every event back, exactly, in (id, time, insertion) order. */
static void
roundtrip(bool string_ids, uint64_t seed)
{
	uint64_t	rng = seed;
	FxSet		s;
	char		dir[256],
				path[300];
	TdbPager   *p;
	TdbTrailReader *r;
	TdbTrailError err;
	TdbTrailQuery q;
	TdbTrailScan *sc;
	TdbTrailEvent ev;
	size_t		i = 0;
	int			rc;
	uint64_t	nev = 0;
	size_t	   *cur;

	fx_make(&s, &rng, string_ids, 40, 300);
	fx_tmpdir(dir, sizeof(dir), "rt");
	snprintf(path, sizeof(path), "%s/rt.trail", dir);
	fx_write(&s, path, 700, 64);
	CHECK(open_local(path, &p, &r, &err) == 0);
	if (r == NULL)
	{
		unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
		fx_free(&s);
		return;
	}
	CHECK_EQ_U64(tdb_trail_footer(r)->nevents, s.n);
	CHECK_EQ_U64(tdb_trail_footer(r)->ntrails, s.nkeys);
	CHECK(tdb_trail_footer(r)->npages > (uint32_t) s.nkeys);	/* trails span pages */
	memset(&q, 0, sizeof(q));
	CHECK(tdb_trail_scan_begin(r, &q, &sc, &err) == 0);
	cur = fx_cursor_new(&s);
	while ((rc = tdb_trail_scan_next(sc, &ev, &err)) > 0)
	{
		if (!fx_cursor_same(&s, cur, &q, &ev))
			unit_fail(__FILE__, __LINE__, "event %zu differs (layout v%d order %d)", i,
					  fx_version, (int) fx_order);
		i++;
	}
	free(cur);
	CHECK(rc == 0);
	CHECK_EQ_U64(i, s.n);
	tdb_trail_scan_end(sc);
	CHECK(tdb_trail_verify(r, &nev, &err) == 0);
	CHECK_EQ_U64(nev, s.n);
	tdb_trail_close(r);
	tdb_pager_close(p);
	unlink(path);
	rmdir(dir);
	fx_free(&s);
}

UNIT_TEST(test_trail_roundtrip_int_ids)
{
	for (int layout = 0; layout < FX_LAYOUTS; layout++)
	{
		fx_layout(layout);
		for (uint64_t seed = 1; seed <= 4; seed++)
			roundtrip(false, seed);
	}
	fx_layout(1);
}

UNIT_TEST(test_trail_roundtrip_string_ids)
{
	for (int layout = 0; layout < FX_LAYOUTS; layout++)
	{
		fx_layout(layout);
		for (uint64_t seed = 11; seed <= 13; seed++)
			roundtrip(true, seed);
	}
	fx_layout(1);
}

UNIT_TEST(test_trail_empty_and_single)
{
	TdbTrailSchema schema;
	TdbTrailWriter *w;
	TdbTrailError err;
	uint8_t    *buf;
	size_t		len;
	TdbTrailTrailer t;
	TdbTrailFooter f;

	memset(&schema, 0, sizeof(schema));
	strcpy(schema.id_name, "id");
	schema.id_type = TDB_TRAIL_INT64;
	CHECK(tdb_trail_writer_create(&schema, NULL, &w, &err) == 0);
	CHECK(tdb_trail_writer_finish(w, &buf, &len, &err) == 0);
	CHECK_EQ_U64(len, TDB_TRAIL_HEADER_SIZE + TDB_TRAIL_TRAILER_SIZE + 0 +
				 (len - TDB_TRAIL_HEADER_SIZE - TDB_TRAIL_TRAILER_SIZE));
	CHECK(tdb_trail_trailer_decode(buf + len - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE, len, &t, &err) == 0);
	CHECK(tdb_trail_footer_decode(buf + t.footer_offset, t.footer_length, &t, &f, &err) == 0);
	CHECK_EQ_U64(f.ntrails, 0);
	CHECK_EQ_U64(f.npages, 0);
	tdb_trail_footer_release(&f);
	free(buf);
	tdb_trail_writer_free(w);

	/* bad input is refused with a message, not stored */
	CHECK(tdb_trail_writer_create(&schema, NULL, &w, &err) == 0);
	{
		TdbTrailEvent ev;

		memset(&ev, 0, sizeof(ev));
		ev.lon = 200;
		CHECK(tdb_trail_writer_add(w, &ev, &err) == TDB_TRAIL_EINVAL);
		CHECK(strstr(err.msg, "outside") != NULL);
	}
	tdb_trail_writer_free(w);
}

/* Random queries: exactly the brute-force events, in the same order. */
static void
pruning(int layout)
{
	uint64_t	rng = 77;
	FxSet		s;
	char		dir[256],
				path[300];
	TdbPager   *p;
	TdbTrailReader *r;
	TdbTrailError err;
	uint64_t	pages_read = 0,
				pages_total = 0,
				selective = 0;

	/* version 6: trails short enough that the pages fit TDB_TRAIL_COLMAJOR_MAX_BYTES (column-major) */
	fx_make(&s, &rng, false, 60, layout >= 8 ? 80 : 400);
	fx_layout(layout);
	fx_tmpdir(dir, sizeof(dir), "prune");
	snprintf(path, sizeof(path), "%s/p.trail", dir);
	fx_write(&s, path, 1024, 100);
	if (open_local(path, &p, &r, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
		fx_free(&s);
		return;
	}
	for (int iter = 0; iter < 300; iter++)
	{
		TdbTrailQuery q;
		int64_t		ids[6];
		TdbTrailScan *sc;
		TdbTrailEvent ev;
		TdbTrailScanStats st;
		size_t		want = 0,
					got = 0,
					k = 0;
		size_t	   *cur;
		int			rc;
		int			kind = iter % 4;

		memset(&q, 0, sizeof(q));
		if (kind == 0 || kind == 3)
		{
			q.nids = 1 + (int) (unit_rand(&rng) % 5);
			for (int i = 0; i < q.nids; i++)
				ids[i] = unit_rand(&rng) % 8 == 0 ? 12345 : s.keys_i[unit_rand(&rng) % (uint64_t) s.nkeys];
			q.ids_int = ids;
		}
		if (kind == 1 || kind == 3)
		{
			const FxEvent *e = &s.ev[unit_rand(&rng) % s.n];

			q.has_time = true;
			q.time_from = e->time - (int64_t) (unit_rand(&rng) % 3600000000ULL);
			q.time_to = q.time_from + (int64_t) (unit_rand(&rng) % 7200000000ULL);
		}
		if (kind == 2 || (kind == 3 && iter % 8 == 3))
		{
			const FxEvent *e = &s.ev[unit_rand(&rng) % s.n];
			double		w = unit_rand_double(&rng, 0.001, 5);

			q.has_bbox = true;
			q.xmin = tdb_trail_coord_unfix(e->lon) - w;
			q.xmax = tdb_trail_coord_unfix(e->lon) + unit_rand_double(&rng, 0, 5);
			q.ymin = tdb_trail_coord_unfix(e->lat) - unit_rand_double(&rng, 0, 5);
			q.ymax = tdb_trail_coord_unfix(e->lat) + w;
		}
		if (iter % 10 == 9)
			q.limit = 1 + unit_rand(&rng) % 50;
		for (size_t i = 0; i < s.n; i++)
			want += fx_matches(&s, &s.ev[i], &q);
		if (q.limit && want > q.limit)
			want = q.limit;
		if (tdb_trail_scan_begin(r, &q, &sc, &err) < 0)
		{
			unit_fail(__FILE__, __LINE__, "scan_begin: %s", err.msg);
			continue;
		}
		cur = fx_cursor_new(&s);
		while ((rc = tdb_trail_scan_next(sc, &ev, &err)) > 0)
		{
			/* version 1 and trail order: exactly the brute-force order */
			if (fx_order == TDB_TRAIL_ORDER_TRAIL)
			{
				while (k < s.n && !fx_matches(&s, &s.ev[k], &q))
					k++;
				if (k >= s.n || !fx_same(&s, &s.ev[k], &ev))
				{
					unit_fail(__FILE__, __LINE__, "query %d: row %zu is not the brute-force row", iter, got);
					break;
				}
				k++;
			}
			if (!fx_cursor_same(&s, cur, &q, &ev))
			{
				unit_fail(__FILE__, __LINE__, "query %d (layout %d): row %zu is not a brute-force row",
						  iter, layout, got);
				break;
			}
			got++;
		}
		free(cur);
		CHECK(rc >= 0);
		if (got != want)
			unit_fail(__FILE__, __LINE__, "query %d (kind %d): %zu rows, brute force %zu", iter, kind, got, want);
		tdb_trail_scan_stats(sc, &st);
		CHECK(st.pages_read <= tdb_trail_footer(r)->npages);
		if (!q.limit)
		{
			pages_read += st.pages_read;
			pages_total += tdb_trail_footer(r)->npages;
			selective += st.pages_read < tdb_trail_footer(r)->npages;
		}
		tdb_trail_scan_end(sc);
	}
	/* every kind of predicate prunes: far fewer pages than full scans */
	CHECK(pages_read * 4 < pages_total);
	CHECK(selective > 200);
	tdb_trail_close(r);
	tdb_pager_close(p);
	unlink(path);
	rmdir(dir);
	fx_free(&s);
}

UNIT_TEST(test_trail_pruning_matches_brute_force)
{
	for (int layout = 0; layout < FX_LAYOUTS; layout++)
	{
		uint32_t	cm = fx_colmajor_files;

		fx_layout(layout);
		pruning(layout);
		/* version 6: these files' pages are small, so column-major */
		CHECK(layout < 8 || fx_colmajor_files > cm);
	}
	fx_layout(1);
}

/* A limit stops reading pages. */
UNIT_TEST(test_trail_limit_stops_reading)
{
	uint64_t	rng = 5;
	FxSet		s;
	char		dir[256],
				path[300];
	TdbPager   *p;
	TdbTrailReader *r;
	TdbTrailError err;
	TdbTrailQuery q;
	TdbTrailScan *sc;
	TdbTrailEvent ev;
	TdbTrailScanStats st;
	int			n = 0;

	fx_make(&s, &rng, false, 20, 300);
	fx_tmpdir(dir, sizeof(dir), "limit");
	snprintf(path, sizeof(path), "%s/l.trail", dir);
	fx_write(&s, path, 512, 32);
	CHECK(open_local(path, &p, &r, &err) == 0);
	memset(&q, 0, sizeof(q));
	q.limit = 3;
	CHECK(tdb_trail_scan_begin(r, &q, &sc, &err) == 0);
	while (tdb_trail_scan_next(sc, &ev, &err) > 0)
		n++;
	tdb_trail_scan_stats(sc, &st);
	CHECK_EQ_U64(n, 3);
	CHECK_EQ_U64(st.pages_read, 1);
	tdb_trail_scan_end(sc);
	tdb_trail_close(r);
	tdb_pager_close(p);
	unlink(path);
	rmdir(dir);
	fx_free(&s);
}

/* Read every event; 0 or the error code. */
static int
read_all(const char *path, TdbTrailError *err, uint64_t *n)
{
	TdbPager   *p;
	TdbTrailReader *r;
	int			rc = open_local(path, &p, &r, err);

	*n = 0;
	if (rc < 0)
		return rc;
	rc = tdb_trail_verify(r, n, err);
	tdb_trail_close(r);
	tdb_pager_close(p);
	return rc;
}

/*
 * Bit flips anywhere (header excepted: nothing reads it) and truncations:
 * each gives TDB_TRAIL_ECORRUPT with a message, none crashes or returns
 * other data.
 */
static void
corruption(void)
{
	uint64_t	rng = 99;
	FxSet		s;
	char		dir[256],
				path[300];
	size_t		len;
	uint8_t    *good;
	TdbTrailTrailer t;
	TdbTrailError err;
	int			detected = 0,
				tried = 0;

	fx_make(&s, &rng, true, 15, 200);
	good = fx_encode(&s, 600, 50, &len);
	fx_tmpdir(dir, sizeof(dir), "corrupt");
	snprintf(path, sizeof(path), "%s/c.trail", dir);
	CHECK(tdb_trail_trailer_decode(good + len - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE, len, &t, &err) == 0);

	for (int iter = 0; iter < 300; iter++)
	{
		uint8_t    *bad = malloc(len);
		size_t		pos;
		uint64_t	n;
		int			rc;
		int			region = iter % 3;

		memcpy(bad, good, len);
		/* pages, footer, trailer in turn */
		if (region == 0)
			pos = TDB_TRAIL_HEADER_SIZE + unit_rand(&rng) % (t.footer_offset - TDB_TRAIL_HEADER_SIZE);
		else if (region == 1)
			pos = t.footer_offset + unit_rand(&rng) % t.footer_length;
		else
			pos = len - TDB_TRAIL_TRAILER_SIZE + unit_rand(&rng) % TDB_TRAIL_TRAILER_SIZE;
		bad[pos] ^= (uint8_t) (1u << (unit_rand(&rng) % 8));
		if (region == 2 && pos >= len - 16 && pos < len - 8)
			bad[pos] ^= 0;		/* reserved bytes are covered by the CRC too */
		CHECK(fx_write_file(path, bad, len));
		rc = read_all(path, &err, &n);
		tried++;
		if (rc == TDB_TRAIL_ECORRUPT || rc == TDB_TRAIL_EVERSION)
		{
			detected++;
			CHECK(strstr(err.msg, "corrupt") != NULL || strstr(err.msg, "checksum") != NULL ||
				  strstr(err.msg, "not a trail file") != NULL || strstr(err.msg, "version") != NULL ||
				  strstr(err.msg, "trailer") != NULL);
		}
		else
			unit_fail(__FILE__, __LINE__, "flip at %zu (region %d) not detected: rc %d", pos, region, rc);
		free(bad);
	}
	CHECK_EQ_U64(detected, tried);

	/* truncations at every kind of place */
	for (size_t cut = 0; cut < len; cut += 1 + len / 97)
	{
		uint64_t	n;
		int			rc;

		CHECK(fx_write_file(path, good, cut));
		rc = read_all(path, &err, &n);
		if (rc != TDB_TRAIL_ECORRUPT)
			unit_fail(__FILE__, __LINE__, "truncation to %zu bytes: rc %d", cut, rc);
	}
	/* and bytes appended */
	{
		uint8_t    *more = calloc(1, len + 10);
		uint64_t	n;

		memcpy(more, good, len);
		CHECK(fx_write_file(path, more, len + 10));
		CHECK(read_all(path, &err, &n) == TDB_TRAIL_ECORRUPT);
		free(more);
	}
	unlink(path);
	rmdir(dir);
	free(good);
	fx_free(&s);
}

/*
 * A footer with a valid CRC but lying contents (zone maps that exclude the
 * page's events) is rejected by the page decoder, so pruning never trusts a
 * lie silently.
 */
UNIT_TEST(test_trail_corruption_detected)
{
	for (int layout = 0; layout < FX_LAYOUTS; layout++)
	{
		fx_layout(layout);
		corruption();
	}
	fx_layout(1);
}

static void
lying_zone_map(void)
{
	uint64_t	rng = 3;
	FxSet		s;
	size_t		len;
	uint8_t    *buf;
	TdbTrailTrailer t;
	TdbTrailFooter f;
	TdbTrailError err;
	CodecBuf	nf;
	TdbTrailPage pg;
	uint32_t	pn = 0;

	if (fx_version >= 3)
		return;					/* version 3's footer in pieces: test_footer3.c */
	fx_make(&s, &rng, false, 3, 50);
	buf = fx_encode(&s, 4096, 1000, &len);
	CHECK(tdb_trail_trailer_decode(buf + len - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE, len, &t, &err) == 0);
	CHECK(tdb_trail_footer_decode(buf + t.footer_offset, t.footer_length, &t, &f, &err) == 0);
	/* shrink the time range of a page that has one by a microsecond, re-encode */
	while (pn + 1 < f.npages && f.pages[pn].tmax == f.pages[pn].tmin)
		pn++;
	CHECK(f.pages[pn].tmax > f.pages[pn].tmin);
	f.pages[pn].tmax--;
	f.pages[pn].tmin = f.pages[pn].tmin + 1 > f.pages[pn].tmax ? f.pages[pn].tmax : f.pages[pn].tmin + 1;
	codec_buf_init(&nf);
	trail_footer_encode(&nf, &f);
	t.footer_length = nf.len;
	t.footer_crc = tdb_crc32c_final(tdb_crc32c_update(TDB_CRC32C_INIT, nf.data, nf.len));
	{
		TdbTrailFooter f2;

		CHECK(tdb_trail_footer_decode(nf.data, nf.len, &t, &f2, &err) == 0);
		memset(&pg, 0, sizeof(pg));
		CHECK(tdb_trail_page_decode(&f2, pn, buf + f2.pages[pn].offset, f2.pages[pn].length, &pg, &err) ==
			  TDB_TRAIL_ECORRUPT);
		CHECK(strstr(err.msg, "zone map") != NULL);
		tdb_trail_page_release(&pg);
		tdb_trail_footer_release(&f2);
	}
	codec_buf_free(&nf);
	tdb_trail_footer_release(&f);
	free(buf);
	fx_free(&s);
}

UNIT_TEST(test_trail_lying_zone_map_rejected)
{
	for (int layout = 0; layout < FX_LAYOUTS; layout++)
	{
		fx_layout(layout);
		lying_zone_map();
	}
	fx_layout(1);
}
