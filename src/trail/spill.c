/*
 * spill.c
 *	  The trail writer's external sort (spill.h): buffer, sorted runs in an
 *	  unnamed temporary file, k-way merge.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE				/* qsort_r, O_TMPFILE, mkostemp */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spill.h"

#define STAGE_BYTES		(256u << 10)	/* writes of a run */
#define READ_MIN_BYTES	(64u << 10)		/* a run's read buffer, at least */
#define READ_MAX_BYTES	(4u << 20)

struct TrailMergeIn
{
	uint64_t	off;			/* next unread byte of the run */
	uint64_t	left;			/* records not yet read into buf */
	uint8_t    *buf;
	uint32_t	bn,
				bpos,
				bcap;			/* records */
};

static int
sfail(TrailSorter *s, TdbTrailError *err, int code, const char *what, int e)
{
	const char *dir = s->tmpdir ? s->tmpdir : "$TMPDIR";

	s->rc = tdb_trail_fail(&s->err, code, "%s (temporary directory %s): %s", what, dir, strerror(e));
	if (err)
		*err = s->err;
	return s->rc;
}

void
trail_sorter_init(TrailSorter *s, size_t recsize, TrailRecCmp cmp, void *arg,
				  const char *tmpdir, size_t limit)
{
	memset(s, 0, sizeof(*s));
	s->recsize = recsize;
	s->cmp = cmp;
	s->arg = arg;
	s->tmpdir = tmpdir;
	s->limit = limit;
	s->fd = -1;
}

size_t
trail_sorter_bytes(const TrailSorter *s)
{
	return s->cap * (s->recsize + 2 * sizeof(uint32_t));
}

static int
ix_cmp(const void *a, const void *b, void *arg)
{
	const TrailSorter *s = arg;

	return s->cmp(s->buf + (size_t) *(const uint32_t *) a * s->recsize,
				  s->buf + (size_t) *(const uint32_t *) b * s->recsize, s->arg);
}

/* An unnamed file in the temporary directory, mode 0600: gone when closed, even by a crash. */
static int
open_tmp(TrailSorter *s, TdbTrailError *err)
{
	const char *dir = s->tmpdir;
	char		path[4096];

	if (dir == NULL || *dir == '\0')
		dir = getenv("TMPDIR");
	if (dir == NULL || *dir == '\0')
		dir = "/tmp";
	s->fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (s->fd >= 0)
		return 0;
	/* no O_TMPFILE on this file system: a fresh name, unlinked at once */
	if (snprintf(path, sizeof(path), "%s/trafficdb-trail-sort-XXXXXX", dir) >= (int) sizeof(path))
		return sfail(s, err, TDB_TRAIL_EINVAL, "the temporary directory's name is too long", ENAMETOOLONG);
	s->fd = mkostemp(path, O_CLOEXEC);
	if (s->fd < 0)
		return sfail(s, err, TDB_TRAIL_EIO, "could not create a temporary file for sorting", errno);
	unlink(path);
	return 0;
}

static int
write_all(TrailSorter *s, const uint8_t *p, size_t len, TdbTrailError *err)
{
	if (s->cancel != NULL && s->cancel(s->cancel_arg))
	{
		s->rc = tdb_trail_fail(&s->err, TDB_TRAIL_ECANCELED, "canceled while sorting");
		if (err)
			*err = s->err;
		return s->rc;
	}
	if (s->temp_used != NULL && s->temp_limit > 0 && *s->temp_used + len > s->temp_limit)
	{
		s->rc = tdb_trail_fail(&s->err, TDB_TRAIL_EIO,
							   "temporary files would exceed their limit (%llukB; in SQL, temp_file_limit)",
							   (unsigned long long) (s->temp_limit / 1024));
		if (err)
			*err = s->err;
		return s->rc;
	}
	while (len > 0)
	{
		ssize_t		w = pwrite(s->fd, p, len, (off_t) s->fend);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return sfail(s, err, TDB_TRAIL_EIO, "could not write a sorted run", w < 0 ? errno : ENOSPC);
		p += w;
		len -= (size_t) w;
		s->fend += (uint64_t) w;
		if (s->temp_used != NULL)
			*s->temp_used += (uint64_t) w;
	}
	return 0;
}

static int
push_run(TrailSorter *s, uint64_t off, uint64_t n, TdbTrailError *err)
{
	if (s->nruns == s->runcap)
	{
		uint32_t	nc = s->runcap ? s->runcap * 2 : 64;
		TrailRun   *nr = realloc(s->runs, nc * sizeof(TrailRun));

		if (nr == NULL)
			return sfail(s, err, TDB_TRAIL_ENOMEM, "out of memory", ENOMEM);
		s->runs = nr;
		s->runcap = nc;
	}
	s->runs[s->nruns].off = off;
	s->runs[s->nruns].n = n;
	s->nruns++;
	s->spilled++;
	return 0;
}

/* Sort the buffer and write it as a run. */
static int
spill(TrailSorter *s, TdbTrailError *err)
{
	uint8_t    *stage;
	size_t		per = STAGE_BYTES / s->recsize ? STAGE_BYTES / s->recsize : 1;
	uint64_t	start;
	int			rc = 0;

	if (s->fd < 0 && open_tmp(s, err) < 0)
		return s->rc;
	stage = malloc(per * s->recsize);
	if (stage == NULL)
		return sfail(s, err, TDB_TRAIL_ENOMEM, "out of memory", ENOMEM);
	qsort_r(s->ix, s->n, sizeof(uint32_t), ix_cmp, s);
	start = s->fend;
	for (size_t i = 0; i < s->n && rc == 0;)
	{
		size_t		k = 0;

		for (; k < per && i < s->n; k++, i++)
			memcpy(stage + k * s->recsize, s->buf + (size_t) s->ix[i] * s->recsize, s->recsize);
		rc = write_all(s, stage, k * s->recsize, err);
	}
	free(stage);
	if (rc == 0)
		rc = push_run(s, start, s->n, err);
	s->n = 0;
	return rc;
}

int
trail_sorter_put(TrailSorter *s, const void *rec, TdbTrailError *err)
{
	size_t		per = s->recsize + 2 * sizeof(uint32_t);

	if (s->rc < 0)
	{
		if (err)
			*err = s->err;
		return s->rc;
	}
	if (s->n == s->cap || (s->n + 1) * per > s->limit)
	{
		size_t		most = s->limit / per;

		if (most < 16)
			most = 16;
		if (most > UINT32_MAX)
			most = UINT32_MAX;
		if (s->n > 0 && (s->n >= most || (s->n + 1) * per > s->limit))
		{
			/* full: sort it and write it as a run */
			if (spill(s, err) < 0)
				return s->rc;
		}
		else if (s->n == s->cap)
		{
			size_t		nc = s->cap ? s->cap * 2 : 1024;
			uint8_t    *nb;
			uint32_t   *ni;

			if (nc > most)
				nc = most;
			nb = realloc(s->buf, nc * s->recsize);
			if (nb == NULL)
				return sfail(s, err, TDB_TRAIL_ENOMEM, "out of memory", ENOMEM);
			s->buf = nb;
			ni = realloc(s->ix, nc * sizeof(uint32_t));
			if (ni == NULL)
				return sfail(s, err, TDB_TRAIL_ENOMEM, "out of memory", ENOMEM);
			s->ix = ni;
			s->cap = nc;
		}
	}
	memcpy(s->buf + s->n * s->recsize, rec, s->recsize);
	s->ix[s->n] = (uint32_t) s->n;
	s->n++;
	s->total++;
	return 0;
}

/* ---- merging ---------------------------------------------------------- */

static const uint8_t *
in_cur(const TrailMergeIn *in, size_t recsize)
{
	return in->buf + (size_t) in->bpos * recsize;
}

static bool
heap_less(TrailSorter *s, uint32_t a, uint32_t b)
{
	return s->cmp(in_cur(&s->in[a], s->recsize), in_cur(&s->in[b], s->recsize), s->arg) < 0;
}

static void
sift_down(TrailSorter *s, uint32_t i)
{
	for (uint32_t guard = 0; guard < 64; guard++)
	{
		uint32_t	l = 2 * i + 1,
					r = l + 1,
					m = i;

		if (l < s->nheap && heap_less(s, s->heap[l], s->heap[m]))
			m = l;
		if (r < s->nheap && heap_less(s, s->heap[r], s->heap[m]))
			m = r;
		if (m == i)
			return;
		{
			uint32_t	t = s->heap[i];

			s->heap[i] = s->heap[m];
			s->heap[m] = t;
		}
		i = m;
	}
}

/* Refill input k's buffer; false on a read error (s->rc set). */
static bool
refill(TrailSorter *s, TrailMergeIn *in)
{
	size_t		want = in->left < in->bcap ? (size_t) in->left : in->bcap;
	size_t		bytes = want * s->recsize,
				got = 0;

	while (got < bytes)
	{
		ssize_t		r = pread(s->fd, in->buf + got, bytes - got, (off_t) (in->off + got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
		{
			sfail(s, NULL, TDB_TRAIL_EIO, "could not read a sorted run back", r < 0 ? errno : EIO);
			return false;
		}
		got += (size_t) r;
	}
	in->off += bytes;
	in->left -= want;
	in->bn = (uint32_t) want;
	in->bpos = 0;
	return true;
}

static void
merge_end(TrailSorter *s, uint32_t k)
{
	if (s->in)
		for (uint32_t i = 0; i < k; i++)
			free(s->in[i].buf);
	free(s->in);
	free(s->heap);
	s->in = NULL;
	s->heap = NULL;
	s->nheap = 0;
}

/* Start merging runs[0, k) with merge_bytes of read buffers. */
static int
merge_begin(TrailSorter *s, uint32_t k, size_t merge_bytes, TdbTrailError *err)
{
	size_t		rb = merge_bytes / k;

	if (rb < READ_MIN_BYTES)
		rb = READ_MIN_BYTES;
	if (rb > READ_MAX_BYTES)
		rb = READ_MAX_BYTES;
	s->in = calloc(k, sizeof(TrailMergeIn));
	s->heap = malloc(k * sizeof(uint32_t));
	if (s->in == NULL || s->heap == NULL)
		return sfail(s, err, TDB_TRAIL_ENOMEM, "out of memory", ENOMEM);
	for (uint32_t i = 0; i < k; i++)
	{
		TrailMergeIn *in = &s->in[i];

		in->off = s->runs[i].off;
		in->left = s->runs[i].n;
		in->bcap = (uint32_t) (rb / s->recsize ? rb / s->recsize : 1);
		in->buf = malloc((size_t) in->bcap * s->recsize);
		if (in->buf == NULL)
			return sfail(s, err, TDB_TRAIL_ENOMEM, "out of memory", ENOMEM);
		if (in->left == 0)
			continue;
		if (!refill(s, in))
		{
			if (err)
				*err = s->err;
			return s->rc;
		}
		s->heap[s->nheap++] = i;
	}
	for (uint32_t i = s->nheap / 2 + 1; i-- > 0;)
		sift_down(s, i);
	return 0;
}

/* Advance the heap's top input by one record. */
static void
merge_skip(TrailSorter *s)
{
	TrailMergeIn *in = &s->in[s->heap[0]];

	if (++in->bpos == in->bn)
	{
		if (in->left == 0)
		{
			s->heap[0] = s->heap[--s->nheap];
			if (s->nheap > 0)
				sift_down(s, 0);
			return;
		}
		if (!refill(s, in))
		{
			s->nheap = 0;
			return;
		}
	}
	sift_down(s, 0);
}

/* Merge runs[0, k) into one new run at the end of the file. */
static int
merge_pass(TrailSorter *s, uint32_t k, size_t merge_bytes, TdbTrailError *err)
{
	size_t		per = STAGE_BYTES / s->recsize ? STAGE_BYTES / s->recsize : 1;
	uint8_t    *stage = malloc(per * s->recsize);
	uint64_t	start = s->fend,
				n = 0;
	size_t		m = 0;
	int			rc = 0;

	if (stage == NULL)
		return sfail(s, err, TDB_TRAIL_ENOMEM, "out of memory", ENOMEM);
	rc = merge_begin(s, k, merge_bytes / 2, err);
	while (rc == 0 && s->nheap > 0)
	{
		memcpy(stage + m * s->recsize, in_cur(&s->in[s->heap[0]], s->recsize), s->recsize);
		m++;
		n++;
		merge_skip(s);
		if (s->rc < 0)
			rc = s->rc;
		else if (m == per || s->nheap == 0)
		{
			rc = write_all(s, stage, m * s->recsize, err);
			m = 0;
		}
	}
	merge_end(s, k);
	free(stage);
	if (rc < 0)
	{
		if (err)
			*err = s->err;
		return rc;
	}
	memmove(s->runs, s->runs + k, (s->nruns - k) * sizeof(TrailRun));
	s->nruns -= k;
	s->spilled--;				/* push_run counts it again */
	return push_run(s, start, n, err);
}

int
trail_sorter_finish(TrailSorter *s, size_t merge_bytes, TdbTrailError *err)
{
	uint32_t	fanin = (uint32_t) (merge_bytes / READ_MIN_BYTES);

	if (s->rc < 0)
	{
		if (err)
			*err = s->err;
		return s->rc;
	}
	if (s->nruns == 0)
	{
		if (s->n > 1)
			qsort_r(s->ix, s->n, sizeof(uint32_t), ix_cmp, s);
		s->mode = 1;
		s->pos = 0;
		return 0;
	}
	if (s->n > 0 && spill(s, err) < 0)
		return s->rc;
	free(s->buf);
	free(s->ix);
	s->buf = NULL;
	s->ix = NULL;
	s->cap = 0;
	if (fanin < 2)
		fanin = 2;
	if (fanin > 4096)
		fanin = 4096;
	/* each pass turns fanin runs into one: bounded by the run count */
	for (uint32_t guard = s->nruns; s->nruns > fanin && guard > 0; guard--)
		if (merge_pass(s, fanin, merge_bytes, err) < 0)
			return s->rc;
	s->mode = 2;
	if (merge_begin(s, s->nruns, merge_bytes, err) < 0)
		return s->rc;
	return 0;
}

const void *
trail_sorter_peek(TrailSorter *s)
{
	if (s->rc < 0)
		return NULL;
	if (s->mode == 1)
		return s->pos < s->n ? s->buf + (size_t) s->ix[s->pos] * s->recsize : NULL;
	if (s->mode == 2)
		return s->nheap > 0 ? in_cur(&s->in[s->heap[0]], s->recsize) : NULL;
	return NULL;
}

void
trail_sorter_skip(TrailSorter *s)
{
	if (s->mode == 1)
		s->pos++;
	else if (s->mode == 2 && s->nheap > 0)
		merge_skip(s);
}

void
trail_sorter_free(TrailSorter *s)
{
	merge_end(s, s->nruns);
	free(s->buf);
	free(s->ix);
	free(s->runs);
	if (s->fd >= 0)
		close(s->fd);
	if (s->temp_used != NULL)
		*s->temp_used -= s->fend;	/* the file is gone */
	s->fend = 0;
	s->buf = NULL;
	s->ix = NULL;
	s->runs = NULL;
	s->fd = -1;
}
