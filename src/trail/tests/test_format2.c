/*
 * test_format2.c
 *	  What version 2 of the trail format adds: scans that read only the
 *	  chunks of the columns they use (exact byte counts), column summaries
 *	  per trail equal to brute force (NULL, NaN, -0, booleans), floats stored
 *	  scaled that read back bit for bit, the space-time order (no page mixes
 *	  time buckets, windows read less), and version 1 still written on
 *	  request.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <malloc.h>

#include "checksum.h"
#include "format.h"
#include "pager.h"
#include "trail_fixture.h"
#include "trail_unit.h"

/* The bytes a scan must read: the needed chunks of the pages it reads. */
static uint64_t
expected_bytes(const TdbTrailFooter *f, const TdbTrailQuery *q, const uint32_t *pages, uint32_t n)
{
	uint64_t	sum = 0;

	for (uint32_t i = 0; i < n; i++)
		for (int k = 0; k < 2 + f->schema.ncolumns; k++)
		{
			uint64_t	off;
			uint32_t	len;
			bool		need = k == TRAIL_CHUNK_CORE ||
				(k == TRAIL_CHUNK_POSITION && (!q->skip_position || q->has_bbox)) ||
				(k >= TRAIL_CHUNK_COLUMN0 && !((q->skip_columns >> (k - TRAIL_CHUNK_COLUMN0)) & 1));

			tdb_trail_chunk_range(f, pages[i], k, &off, &len);
			if (need)
				sum += len;
		}
	return sum;
}

/*
 * Random projections over random queries: the columns asked for come back
 * exactly, the others NULL (or 0 for positions), and the scan reads exactly
 * the chunks it needs of the pages it reads.
 */
UNIT_TEST(test_trail_v2_projection_reads_only_its_chunks)
{
	for (int layout = 1; layout < FX_LAYOUTS; layout++)
	{
		uint64_t	rng = 4242 + layout;
		FxSet		s;
		size_t		len;
		uint8_t    *buf;
		FxOpened		o;
		uint64_t	saved = 0;

		fx_layout(layout);
		fx_make(&s, &rng, layout % 2 == 0, 30, 300);
		buf = fx_encode(&s, 1500, 100, &len);
		if (buf == NULL || !fx_open_buf(&o, buf, len, "v2", true, false))
		{
			unit_fail(__FILE__, __LINE__, "cannot write or open the file");
			free(buf);
			fx_free(&s);
			continue;
		}
		for (int iter = 0; iter < 120; iter++)
		{
			const TdbTrailFooter *f = tdb_trail_footer(o.r);
			TdbTrailQuery q,
						full;
			TdbTrailScan *a,
					   *b;
			TdbTrailEvent ea,
						eb;
			TdbTrailScanStats sa,
						sb;
			TdbTrailError err;
			int			ra,
						rb;
			uint32_t   *pages = malloc((f->npages + 1) * sizeof(uint32_t));
			uint32_t	np = 0;

			memset(&q, 0, sizeof(q));
			if (iter % 3 == 1)
			{
				const FxEvent *e = &s.ev[unit_rand(&rng) % s.n];

				q.has_time = true;
				q.time_from = e->time - 1800000000LL;
				q.time_to = e->time + 1800000000LL;
			}
			if (iter % 3 == 2)
			{
				const FxEvent *e = &s.ev[unit_rand(&rng) % s.n];

				q.has_bbox = true;
				q.xmin = tdb_trail_coord_unfix(e->lon) - 1;
				q.xmax = q.xmin + 2;
				q.ymin = tdb_trail_coord_unfix(e->lat) - 1;
				q.ymax = q.ymin + 2;
			}
			full = q;
			q.skip_columns = unit_rand(&rng) % 8;
			q.skip_position = unit_rand(&rng) % 2;
			CHECK(tdb_trail_scan_begin(o.r, &full, &a, &err) == 0);
			CHECK(tdb_trail_scan_begin(o.r, &q, &b, &err) == 0);
			for (;;)
			{
				ra = tdb_trail_scan_next(a, &ea, &err);
				rb = tdb_trail_scan_next(b, &eb, &err);
				if (ra != rb)
				{
					unit_fail(__FILE__, __LINE__, "query %d: %d against %d", iter, ra, rb);
					break;
				}
				if (ra <= 0)
					break;
				CHECK(ea.time_us == eb.time_us);
				/* a box needs the positions: then they are read and returned */
				CHECK(q.skip_position && !q.has_bbox ? eb.lon == 0 && eb.lat == 0 :
					  ea.lon == eb.lon && ea.lat == eb.lat);
				for (int c = 0; c < 3; c++)
				{
					if ((q.skip_columns >> c) & 1)
						CHECK(eb.values[c].isnull);
					else
						CHECK(ea.values[c].isnull == eb.values[c].isnull &&
							  ea.values[c].i == eb.values[c].i &&
							  memcmp(&ea.values[c].f, &eb.values[c].f, 8) == 0 &&
							  ea.values[c].s == eb.values[c].s);
				}
			}
			tdb_trail_scan_stats(a, &sa);
			tdb_trail_scan_stats(b, &sb);
			/* the pages read: both scans read the same ones */
			CHECK_EQ_U64(sa.pages_read, sb.pages_read);
			for (uint32_t p = 0; p < f->npages; p++)
			{
				const TdbTrailPageInfo *pi = &f->pages[p];

				if ((!q.has_time || (pi->tmax >= q.time_from && pi->tmin <= q.time_to)) &&
					(!q.has_bbox || (tdb_trail_coord_unfix(pi->xmax) >= q.xmin - 1e-7 &&
									 tdb_trail_coord_unfix(pi->xmin) <= q.xmax + 1e-7 &&
									 tdb_trail_coord_unfix(pi->ymax) >= q.ymin - 1e-7 &&
									 tdb_trail_coord_unfix(pi->ymin) <= q.ymax + 1e-7)))
					pages[np++] = p;
			}
			if (np == sb.pages_read)
			{
				CHECK_EQ_U64(sb.bytes_read, expected_bytes(f, &q, pages, np));
				CHECK_EQ_U64(sa.bytes_read, expected_bytes(f, &full, pages, np));
			}
			saved += sa.bytes_read - sb.bytes_read;
			tdb_trail_scan_end(a);
			tdb_trail_scan_end(b);
			free(pages);
		}
		CHECK(saved > 0);
		fx_close_opened(&o);
		free(buf);
		fx_free(&s);
	}
	fx_layout(1);
}

/* Summaries of a column from brute force over the set, in the set's order. */
static void
brute_stats(const FxSet *s, int key, int col, TdbTrailStats *st)
{
	memset(st, 0, sizeof(*st));
	for (size_t i = 0; i < s->n; i++)
	{
		const FxEvent *e = &s->ev[i];
		int64_t		bits;

		if (s->schema.id_type == TDB_TRAIL_STRING ? strcmp(e->key_s, s->keys_s[key]) != 0 :
			e->key_i != s->keys_i[key])
			continue;
		if (e->vals[col].isnull)
			continue;
		bits = e->vals[col].i;
		if (s->schema.columns[col].type == TDB_TRAIL_FLOAT64)
			memcpy(&bits, &e->vals[col].f, 8);
		trail_stats_add(st, s->schema.columns[col].type, bits);
	}
}

/*
 * Per-trail counts and summaries in the footer equal brute force, in both
 * orders; special values (NaN, -0 and 0 tied, all NULL, booleans) are what
 * PostgreSQL's aggregates give over the rows in file order.
 */
UNIT_TEST(test_trail_v2_summaries_match_brute_force)
{
	for (int layout = 1; layout < FX_LAYOUTS; layout++)
	{
		uint64_t	rng = 515 + layout;
		FxSet		s;
		size_t		len;
		uint8_t    *buf;
		FxOpened		o;

		fx_layout(layout);
		fx_make(&s, &rng, false, 25, 200);
		buf = fx_encode(&s, 900, 64, &len);
		if (buf == NULL || !fx_open_buf(&o, buf, len, "v2", true, false))
		{
			free(buf);
			fx_free(&s);
			continue;
		}
		for (int k = 0; k < s.nkeys; k++)
		{
			const TdbTrailFooter *f = tdb_trail_footer(o.r);
			int			t = tdb_trail_find_int(f, s.keys_i[k]);
			uint64_t	n = 0;

			CHECK(t >= 0);
			if (t < 0)
				continue;
			for (size_t i = 0; i < s.n; i++)
				n += s.ev[i].key_i == s.keys_i[k];
			CHECK_EQ_U64(f->trails[t].nevents, n);
			for (int c = 0; c < 3; c++)
			{
				TdbTrailStats st;

				brute_stats(&s, k, c, &st);
				CHECK(trail_stats_equal(s.schema.columns[c].type, &st, &f->trails[t].stats[c]));
			}
		}
		fx_close_opened(&o);
		free(buf);
		fx_free(&s);
	}
	fx_layout(1);

	/* special values, one trail each, in a file by trail and one space-time */
	for (int layout = 1; layout < FX_LAYOUTS; layout++)
	{
		static const double vals[][4] = {
			{NAN, 1.5, -2, NAN},	/* a NaN: max is NaN, min -2 */
			{NAN, NAN, NAN, NAN},	/* only NaN: both NaN */
			{0.0, -0.0, 1, -0.0},	/* max 1; min the later of the zeros: -0 */
			{-0.0, 0.0, -1, 0.0},	/* min -1; max the later zero: +0 */
		};
		TdbTrailSchema sc;
		TdbTrailWriter *w;
		TdbTrailWriterOptions wo = {.order = layout % 2 == 0 ? TDB_TRAIL_ORDER_SPACETIME : TDB_TRAIL_ORDER_TRAIL,
			.version = layout <= 2 ? 2 : layout <= 5 ? 3 : 5};
		TdbTrailError err;
		uint8_t    *fb;
		size_t		fl;
		FxOpened		o;

		memset(&sc, 0, sizeof(sc));
		strcpy(sc.id_name, "id");
		sc.id_type = TDB_TRAIL_INT64;
		sc.ncolumns = 3;
		strcpy(sc.columns[0].name, "x");
		sc.columns[0].type = TDB_TRAIL_FLOAT64;
		strcpy(sc.columns[1].name, "b");
		sc.columns[1].type = TDB_TRAIL_BOOL;
		strcpy(sc.columns[2].name, "n");
		sc.columns[2].type = TDB_TRAIL_INT64;
		CHECK(tdb_trail_writer_create(&sc, &wo, &w, &err) == 0);
		for (int t = 0; t < 5; t++)
			for (int i = 0; i < 4; i++)
			{
				TdbTrailValue v[3];
				TdbTrailEvent ev;

				memset(v, 0, sizeof(v));
				memset(&ev, 0, sizeof(ev));
				ev.key.i = t;
				ev.time_us = 1000000LL * (i + 1);
				ev.lon = t;
				ev.lat = i;
				v[0].isnull = t == 4;
				v[0].f = t < 4 ? vals[t][i] : 0;
				v[1].i = t == 1 ? 1 : i % 2;	/* trail 1 all true */
				v[1].isnull = t == 3;
				v[2].isnull = true;			/* all NULL */
				ev.values = v;
				CHECK(tdb_trail_writer_add(w, &ev, &err) == 0);
			}
		CHECK(tdb_trail_writer_finish(w, &fb, &fl, &err) == 0);
		tdb_trail_writer_free(w);
		if (!fx_open_buf(&o, fb, fl, "v2", true, false))
		{
			free(fb);
			continue;
		}
		{
			const TdbTrailFooter *f = tdb_trail_footer(o.r);
			const TdbTrailStats *x;

			CHECK_EQ_U64(f->ntrails, 5);
			x = &f->trails[0].stats[0];
			CHECK(x->count == 4 && x->has_nan && x->has_range && x->fmin == -2 && x->fmax == 1.5);
			x = &f->trails[1].stats[0];
			CHECK(x->count == 4 && x->has_nan && !x->has_range);
			x = &f->trails[2].stats[0];
			CHECK(x->fmax == 1 && x->fmin == 0 && signbit(x->fmin));
			x = &f->trails[3].stats[0];
			CHECK(x->fmin == -1 && x->fmax == 0 && !signbit(x->fmax));
			CHECK_EQ_U64(f->trails[4].stats[0].count, 0);
			/* booleans: min = bool_and, max = bool_or */
			CHECK(f->trails[0].stats[1].count == 4 && f->trails[0].stats[1].imin == 0 &&
				  f->trails[0].stats[1].imax == 1);
			CHECK(f->trails[1].stats[1].imin == 1 && f->trails[1].stats[1].imax == 1);
			CHECK_EQ_U64(f->trails[3].stats[1].count, 0);
			for (int t = 0; t < 5; t++)
				CHECK_EQ_U64(f->trails[t].stats[2].count, 0);
			CHECK(tdb_trail_verify(o.r, NULL, &err) == 0);
		}
		fx_close_opened(&o);
		free(fb);
	}
}

/*
 * Floats stored as scaled decimals read back bit for bit; values that are
 * not short decimals (or -0, NaN, infinities, beyond 2^53) go raw, and a
 * column of decimals takes far less than 8 bytes a value.
 */
UNIT_TEST(test_trail_v2_floats_exact)
{
	static const double odd[] = {0.1, 12.25, -3.5, 1e-300, -0.0, NAN, INFINITY, -INFINITY,
		9007199254740992.0, 9007199254740994.0, 123456.789, 1e15 + 0.5, 0.3, 2.675, 1e22, 5e-324};
	TdbTrailSchema sc;
	TdbTrailError err;

	memset(&sc, 0, sizeof(sc));
	strcpy(sc.id_name, "id");
	sc.id_type = TDB_TRAIL_INT64;
	sc.ncolumns = 1;
	strcpy(sc.columns[0].name, "x");
	sc.columns[0].type = TDB_TRAIL_FLOAT64;
	for (int trial = 0; trial < 3; trial++)
	{
		TdbTrailWriter *w;
		uint8_t    *fb;
		size_t		fl;
		FxOpened		o;
		int			n = trial == 0 ? (int) (sizeof(odd) / sizeof(odd[0])) : 2000;
		TdbTrailQuery q;
		TdbTrailScan *scan;
		TdbTrailEvent ev;
		int			i = 0;

		CHECK(tdb_trail_writer_create(&sc, NULL, &w, &err) == 0);
		for (int k = 0; k < n; k++)
		{
			TdbTrailValue v;
			TdbTrailEvent e;

			memset(&v, 0, sizeof(v));
			memset(&e, 0, sizeof(e));
			e.time_us = k;
			/* trial 1: knots to one decimal; trial 2: feet in steps of 25 */
			v.f = trial == 0 ? odd[k] : trial == 1 ? (double) (4000 + k % 900) / 10 : 25.0 * (k % 1400);
			e.values = &v;
			CHECK(tdb_trail_writer_add(w, &e, &err) == 0);
		}
		CHECK(tdb_trail_writer_finish(w, &fb, &fl, &err) == 0);
		tdb_trail_writer_free(w);
		if (!fx_open_buf(&o, fb, fl, "v2", true, false))
		{
			free(fb);
			continue;
		}
		memset(&q, 0, sizeof(q));
		CHECK(tdb_trail_scan_begin(o.r, &q, &scan, &err) == 0);
		while (tdb_trail_scan_next(scan, &ev, &err) > 0)
		{
			double		want = trial == 0 ? odd[i] : trial == 1 ? (double) (4000 + i % 900) / 10 : 25.0 * (i % 1400);

			if (memcmp(&want, &ev.values[0].f, 8) != 0 && !(isnan(want) && isnan(ev.values[0].f)))
				unit_fail(__FILE__, __LINE__, "trial %d value %d: %.17g read back as %.17g", trial, i,
						  want, ev.values[0].f);
			i++;
		}
		CHECK_EQ_U64(i, n);
		tdb_trail_scan_end(scan);
		if (trial > 0)
		{
			const TdbTrailFooter *f = tdb_trail_footer(o.r);
			uint64_t	colbytes = 0;

			for (uint32_t p = 0; p < f->npages; p++)
				colbytes += f->pages[p].chunk_len[TRAIL_CHUNK_COLUMN0];
			/* deltas of scaled integers: about 2 bytes a value, not 8 */
			CHECK(colbytes < (uint64_t) n * 3);
		}
		fx_close_opened(&o);
		free(fb);
	}
}

/*
 * Space-time order: no page mixes time buckets or holds a trail twice, the
 * footer names the order and bucket, and a short window reads fewer bytes
 * than from the same events laid out by trail in pages of up to an hour
 * (the default before issue 33; with its 15-minute pages trail order reads
 * about as little on these 80 short trails).
 */
UNIT_TEST(test_trail_v2_spacetime_order)
{
	uint64_t	rng = 9090;
	FxSet		s;
	uint64_t	bytes[FX_LAYOUTS] = {0},
				rows[FX_LAYOUTS] = {0};

	fx_make(&s, &rng, false, 80, 400);
	for (int layout = 1; layout < FX_LAYOUTS; layout++)
	{
		size_t		len;
		uint8_t    *buf;
		FxOpened		o;
		const TdbTrailFooter *f;
		uint64_t	r2 = 1;

		fx_layout(layout);
		fx_page_span_us = (layout == 1 || layout == 3) ? 3600LL * 1000000 : 0;	/* by trail: hour-long pages, as written */
		buf = fx_encode(&s, 8192, 8192, &len);
		fx_page_span_us = 0;
		if (buf == NULL || !fx_open_buf(&o, buf, len, "v2", true, false))
		{
			free(buf);
			continue;
		}
		f = tdb_trail_footer(o.r);
		/* version 6 asked: written as 5 when the pages pass the column-major bound */
		CHECK(f->version == fx_version ||
			  (fx_version == 6 && f->version == TDB_TRAIL_VERSION_ROWMAJOR &&
			   f->data_end - TDB_TRAIL_HEADER_SIZE > TDB_TRAIL_COLMAJOR_MAX_BYTES));
		CHECK(f->order == fx_order);
		if (fx_order == TDB_TRAIL_ORDER_SPACETIME)
		{
			CHECK(f->bucket_us == fx_bucket_us);
			for (uint32_t p = 0; p < f->npages; p++)
			{
				int64_t		b0 = f->pages[p].tmin / f->bucket_us,
							b1 = f->pages[p].tmax / f->bucket_us;

				CHECK(b0 == b1);
			}
			/* space-time: pages hold several trails; by time: one each, by bucket then trail */
			{
				uint32_t	shared = 0;

				for (uint32_t p = 0; p < f->npages; p++)
				{
					shared += f->pages[p].trail == UINT32_MAX;
					if (fx_by_time && p > 0 && f->pages[p].trail != UINT32_MAX &&
						f->pages[p - 1].trail != UINT32_MAX)
					{
						int64_t		bp = f->pages[p - 1].tmin / f->bucket_us,
									bq = f->pages[p].tmin / f->bucket_us;

						CHECK(bp < bq || (bp == bq && f->pages[p - 1].trail <= f->pages[p].trail));
					}
				}
				CHECK(fx_by_time ? shared == 0 : shared > 0);
			}
		}
		for (int iter = 0; iter < 50; iter++)
		{
			const FxEvent *e = &s.ev[unit_rand(&r2) % s.n];
			TdbTrailQuery q;
			TdbTrailScan *scan;
			TdbTrailEvent ev;
			TdbTrailScanStats st;
			TdbTrailError err;

			memset(&q, 0, sizeof(q));
			q.has_time = true;
			q.time_from = e->time;
			q.time_to = e->time + 300000000LL;
			CHECK(tdb_trail_scan_begin(o.r, &q, &scan, &err) == 0);
			while (tdb_trail_scan_next(scan, &ev, &err) > 0)
				rows[layout - 1]++;
			tdb_trail_scan_stats(scan, &st);
			bytes[layout - 1] += st.bytes_read;
			tdb_trail_scan_end(scan);
		}
		fx_close_opened(&o);
		free(buf);
	}
	/* layouts 1 to 4: versions 2 and 3, by trail and space-time */
	CHECK_EQ_U64(rows[0], rows[1]);
	CHECK(bytes[1] < bytes[0]);
	/* version 3 the same rows, in fewer bytes than version 2 (its page encodings) */
	CHECK_EQ_U64(rows[2], rows[0]);
	CHECK_EQ_U64(rows[3], rows[0]);
	CHECK(bytes[3] < bytes[2]);
	CHECK(bytes[2] < bytes[0]);
	/* by time: the same rows, in fewer bytes than by trail (a window reads its bucket's pages) */
	CHECK_EQ_U64(rows[4], rows[0]);
	CHECK(bytes[4] < bytes[2]);
	fx_layout(1);
	fx_free(&s);
}

/* Version 1 on request: its trailer, no booleans, read as before. */
UNIT_TEST(test_trail_v1_still_written)
{
	uint64_t	rng = 31;
	FxSet		s;
	size_t		len;
	uint8_t    *buf;
	TdbTrailTrailer t;
	TdbTrailError err;
	TdbTrailSchema sc;
	TdbTrailWriter *w;
	TdbTrailWriterOptions o1 = {.version = 1};
	TdbTrailWriterOptions bad = {.version = 1, .order = TDB_TRAIL_ORDER_SPACETIME};
	TdbTrailWriterOptions bad3 = {.version = TDB_TRAIL_VERSION + 1};

	fx_layout(0);
	fx_make(&s, &rng, false, 5, 50);
	buf = fx_encode(&s, 4096, 100, &len);
	CHECK(buf != NULL && tdb_trail_trailer_decode(buf + len - TDB_TRAIL_TRAILER_SIZE,
												  TDB_TRAIL_TRAILER_SIZE, len, &t, &err) == 0);
	CHECK(t.version == 1);
	free(buf);
	fx_free(&s);
	fx_layout(1);

	memset(&sc, 0, sizeof(sc));
	strcpy(sc.id_name, "id");
	sc.id_type = TDB_TRAIL_INT64;
	sc.ncolumns = 1;
	strcpy(sc.columns[0].name, "b");
	sc.columns[0].type = TDB_TRAIL_BOOL;
	CHECK(tdb_trail_writer_create(&sc, &o1, &w, &err) == TDB_TRAIL_EINVAL);
	CHECK(strstr(err.msg, "unknown type") != NULL);
	sc.columns[0].type = TDB_TRAIL_INT64;
	CHECK(tdb_trail_writer_create(&sc, &bad, &w, &err) == TDB_TRAIL_EINVAL);
	CHECK(strstr(err.msg, "version") != NULL);
	CHECK(tdb_trail_writer_create(&sc, &bad3, &w, &err) == TDB_TRAIL_EINVAL);
	/* the versions it names are those it writes (it said "2, 3 or 4" after version 5 came) */
	{
		char		want[32];

		snprintf(want, sizeof(want), "or 2 to %d (", TDB_TRAIL_VERSION);
		CHECK(strstr(err.msg, want) != NULL);
	}
}

/* ---- hostile review (review-v2) ---------------------------------------- */

/* Write events (ids[i], times[i]) with no extra columns; NULL on failure. */
static uint8_t *
review_write(const TdbTrailWriterOptions *o, int n, const int64_t *ids, const int64_t *times,
			 size_t *len)
{
	TdbTrailSchema s = fx_schema(TDB_TRAIL_INT64, 0, TDB_TRAIL_INT64);
	TdbTrailWriter *w;
	TdbTrailError err;

	if (tdb_trail_writer_create(&s, o, &w, &err) < 0)
		return NULL;
	for (int i = 0; i < n; i++)
	{
		TdbTrailEvent ev;

		memset(&ev, 0, sizeof(ev));
		ev.key.i = ids[i];
		ev.time_us = times[i];
		ev.lon = i % 7;
		ev.lat = i % 5;
		if (tdb_trail_writer_add(w, &ev, &err) < 0)
		{
			tdb_trail_writer_free(w);
			return NULL;
		}
	}
	return fx_writer_done(w, len);
}

/*
 * A trail whose times span more than INT64_MAX microseconds (an event
 * before 1970 and one near the end of int64, or PostgreSQL's whole
 * timestamp range, 4713 BC to 294276 AD): the writer accepts the events,
 * so the file it writes must open and give them back.
 */
UNIT_TEST(test_trail_v2_review_trail_spanning_int64)
{
	static const int64_t ids[4] = {1, 1, 2, 2};
	static const int64_t spans[3][2] = {
		{INT64_MIN, INT64_MAX},
		{-1, INT64_MAX},
		{-211813488000000000LL, 9223371331199999999LL - 946684800000000LL},
	};

	for (int order = 0; order < 2; order++)
		for (int k = 0; k < 3; k++)
		{
			TdbTrailWriterOptions o;
			int64_t		times[4] = {spans[k][0], spans[k][1], 0, 1};
			size_t		len;
			uint8_t    *buf;
			FxOpened		op;
			uint64_t	n = 0;
			TdbTrailError err;

			memset(&o, 0, sizeof(o));
			o.order = (TdbTrailOrder) order;
			o.bucket_us = 3600LL * 1000000;
			buf = review_write(&o, 4, ids, times, &len);
			CHECK(buf != NULL);
			if (buf == NULL)
				continue;
			if (fx_open_buf(&op, buf, len, "v2", true, false))
			{
				CHECK(tdb_trail_verify(op.r, &n, &err) == 0);
				CHECK_EQ_U64(n, 4);
				fx_close_opened(&op);
			}
			else
				unit_fail(__FILE__, __LINE__, "order %d, span %d: the writer's file does not open", order, k);
			free(buf);
		}
}

/*
 * A footer whose summaries lie (valid CRCs: a writer bug or a forged
 * file) opens, since the decoder cannot check them without the pages;
 * verify recomputes every summary and count and names the lie.
 */
UNIT_TEST(test_trail_v2_verify_finds_lying_summaries)
{
	for (int lie = 0; lie < 2; lie++)
	{
		uint64_t	rng = 61 + lie;
		FxSet		s;
		size_t		len;
		uint8_t    *buf,
				   *bad;
		TdbTrailTrailer t;
		TdbTrailFooter f;
		TdbTrailError err;
		CodecBuf	nf;
		FxOpened		o;
		size_t		blen;

		fx_layout(1);
		fx_make(&s, &rng, false, 8, 60);
		buf = fx_encode(&s, 4096, 1000, &len);
		CHECK(tdb_trail_trailer_decode(buf + len - TDB_TRAIL_TRAILER_SIZE, TDB_TRAIL_TRAILER_SIZE, len, &t, &err) == 0);
		CHECK(tdb_trail_footer_decode(buf + t.footer_offset, t.footer_length, &t, &f, &err) == 0);
		if (lie == 0)
			((TdbTrailStats *) f.trails[0].stats)[0].fmax += 1;	/* sog's max */
		else
		{
			/*
			 * one event moved from the count of a trail whose columns all
			 * have NULLs (so its summaries stay valid) to trail 0's: the
			 * totals still agree
			 */
			uint32_t	k = 1;

			while (k < f.ntrails && (f.trails[k].stats[0].count >= f.trails[k].nevents ||
									 f.trails[k].stats[1].count >= f.trails[k].nevents ||
									 f.trails[k].stats[2].count >= f.trails[k].nevents))
				k++;
			CHECK(k < f.ntrails);
			if (k == f.ntrails)
				k = 1;
			f.trails[k].nevents--;
			f.trails[0].nevents++;
		}
		codec_buf_init(&nf);
		trail_footer_encode(&nf, &f);
		blen = t.footer_offset + nf.len + TDB_TRAIL_TRAILER_SIZE;
		bad = malloc(blen);
		memcpy(bad, buf, t.footer_offset);
		memcpy(bad + t.footer_offset, nf.data, nf.len);
		t.footer_length = nf.len;
		t.footer_crc = tdb_crc32c(nf.data, nf.len);
		t.file_size = blen;
		trail_trailer_encode(bad + t.footer_offset + nf.len, &t);
		if (fx_open_buf(&o, bad, blen, "v2", true, false))
		{
			CHECK(tdb_trail_verify(o.r, NULL, &err) == TDB_TRAIL_ECORRUPT);
			CHECK(strstr(err.msg, lie == 0 ? "disagrees with the footer's summary" : "events in pages") != NULL);
			fx_close_opened(&o);
		}
		codec_buf_free(&nf);
		tdb_trail_footer_release(&f);
		free(bad);
		free(buf);
		fx_free(&s);
	}
}

/*
 * A footer is decoded once per file version and process: the second open
 * of the same bytes decodes nothing, a rewritten file is decoded anew, and
 * readers still open keep their footer after the file changed.
 */
UNIT_TEST(test_trail_footer_decoded_once)
{
	uint64_t	rng = 4711;
	FxSet		s;
	size_t		len;
	uint8_t    *buf;
	FxOpened		a,
				b;
	uint64_t	d0;

	fx_layout(1);
	fx_make(&s, &rng, false, 20, 200);
	buf = fx_encode(&s, 2048, 100, &len);
	d0 = tdb_trail_footer_decodes();
	if (buf == NULL || !fx_open_buf(&a, buf, len, "v2", true, false))
		goto out;
	CHECK_EQ_U64(tdb_trail_footer_decodes() - d0, 1);
	{
		TdbPagerOptions po;
		TdbPager   *p;
		TdbTrailReader *r;
		TdbTrailError err;

		memset(&po, 0, sizeof(po));
		po.url = a.path;
		CHECK(tdb_pager_open(&po, &p, &err) == 0);
		CHECK(tdb_trail_open(p, &r, &err) == 0);
		CHECK_EQ_U64(tdb_trail_footer_decodes() - d0, 1);	/* shared */
		CHECK(tdb_trail_footer(r) == tdb_trail_footer(a.r));
		CHECK(tdb_trail_verify(r, NULL, &err) == 0);
		tdb_trail_close(r);
		tdb_pager_close(p);
	}
	/* another version (other events): decoded anew; the first reader's footer stays valid */
	{
		uint64_t	rng2 = 4712;
		FxSet		s2;
		size_t		len2;
		uint8_t    *buf2;
		TdbTrailError err;

		fx_make(&s2, &rng2, false, 21, 200);
		buf2 = fx_encode(&s2, 2048, 100, &len2);
		if (buf2 && fx_open_buf(&b, buf2, len2, "v2", true, false))
		{
			CHECK_EQ_U64(tdb_trail_footer_decodes() - d0, 2);
			CHECK_EQ_U64(tdb_trail_footer(b.r)->ntrails, s2.nkeys);
			fx_close_opened(&b);
		}
		CHECK_EQ_U64(tdb_trail_footer(a.r)->ntrails, s.nkeys);
		CHECK(tdb_trail_verify(a.r, NULL, &err) == 0);
		free(buf2);
		fx_free(&s2);
	}
	fx_close_opened(&a);
out:
	free(buf);
	fx_free(&s);
}

/*
 * The footer cache's bound is on decoded memory: what it counts for a
 * footer must cover what the decoded footer holds allocated (a footer of
 * many short trails decodes to many times its bytes: a 48-byte summary per
 * column and trail, each encoded in a few bytes).
 */
UNIT_TEST(test_trail_footer_cache_counts_decoded_memory)
{
#if defined(__SANITIZE_ADDRESS__)
	printf("# skip: mallinfo2 does not see ASan's allocations\n");
#else
	uint64_t	rng = 99;
	FxSet		s;
	size_t		len;
	uint8_t    *buf;
	FxOpened		a;
	TdbPagerOptions po;
	TdbTrailError err;
	struct mallinfo2 m0,
				m1;
	size_t		allocated;
	uint64_t	counted;

	memset(&a, 0, sizeof(a));
	fx_layout(1);
	fx_make(&s, &rng, false, 20000, 1);
	buf = fx_encode(&s, 2048, 100, &len);
	tdb_trail_footer_cache_clear();
	fx_tmpdir(a.dir, sizeof(a.dir), "v2");
	snprintf(a.path, sizeof(a.path), "%s/f.trail", a.dir);
	memset(&po, 0, sizeof(po));
	po.url = a.path;
	if (buf == NULL || !fx_write_file(a.path, buf, len) || tdb_pager_open(&po, &a.pager, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "cannot write or open the file");
		goto out;
	}
	m0 = mallinfo2();
	if (tdb_trail_open(a.pager, &a.r, &err) < 0)
	{
		unit_fail(__FILE__, __LINE__, "open: %s", err.msg);
		tdb_pager_close(a.pager);
		goto out;
	}
	m1 = mallinfo2();
	allocated = (m1.uordblks + m1.hblkhd) - (m0.uordblks + m0.hblkhd);
	counted = tdb_trail_footer_cache_bytes();
	printf("# %u trails, %u pages: allocated %zu, counted %llu\n", tdb_trail_footer(a.r)->ntrails,
		   tdb_trail_footer(a.r)->npages, allocated, (unsigned long long) counted);
	CHECK(counted > 0);
	/* the reader's own few bytes aside, what is held is what is counted */
	CHECK(allocated <= counted + 4096);
	fx_close_opened(&a);
out:
	tdb_trail_footer_cache_clear();
	free(buf);
	fx_free(&s);
#endif
}
