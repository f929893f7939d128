/*
 * pagecache.c
 *	  Decoded pages kept for the scans that follow: a join on N trail ids
 *	  runs N scans of one file (one per outer row), and in a file whose
 *	  pages hold several trails (space-time order) those scans need the
 *	  same pages again and again.  A cache of decoded pages, keyed by page
 *	  number and handed from scan to scan (TdbTrailQuery.page_cache), lets
 *	  each page be fetched and decoded once per statement.
 *
 * The bound is on bytes: a page costs its decoded arrays (capacity times
 * the bytes of an event's core fields and of each column's values) and
 * the table costs a pointer per page of the file.  When a page would take
 * the cache past the bound, the least recently used pages go; a page
 * larger than the whole bound is not kept (the scan keeps it in its own
 * buffer, as without a cache).  One scan at a time uses a cache, and a
 * page it was handed stays valid until it asks for its next page (a scan
 * holds one page at a time).  A cache belongs to one file version (one footer): used with
 * another, it forgets every page first.  Caches may share a pool
 * (tdb_trail_page_cache_share): the bytes all of them hold then stay within
 * each one's bound too, as a backend's bound rather than a scan's.
 */
#include <stdlib.h>
#include <string.h>

#include "pagecache.h"

typedef struct PcEntry
{
	TdbTrailPage page;
	uint32_t	pageno;
	bool		position;		/* lon and lat decoded */
	uint64_t	skip_columns;	/* the columns not decoded */
	size_t		cost;
	struct PcEntry *prev,
			   *next;			/* recency: head the newest */
} PcEntry;

struct TdbTrailPageCache
{
	size_t		max_bytes;
	size_t		bytes;			/* entries + table */
	size_t	   *pool;			/* the bytes of every cache sharing it; NULL: none */
	const TdbTrailFooter *footer;	/* the file version of the entries */
	uint64_t	footer_end;		/* its data_end and npages, should the */
	uint32_t	footer_pages;	/* pointer be reused by another footer */
	PcEntry   **table;			/* per page of the file; NULL: not cached */
	uint32_t	npages;
	PcEntry    *head,
			   *tail;
	/* the file version whose first scan was seen (trail_page_cache_first_scan) */
	const TdbTrailFooter *seen;
	uint64_t	seen_end;
	uint32_t	seen_pages;
	TdbTrailPageCacheStats stats;
};

TdbTrailPageCache *
tdb_trail_page_cache_create(size_t max_bytes)
{
	TdbTrailPageCache *c = calloc(1, sizeof(*c));

	if (c != NULL)
		c->max_bytes = max_bytes;
	return c;
}

void
tdb_trail_page_cache_share(TdbTrailPageCache *c, size_t *pool)
{
	if (c->pool != NULL)
		*c->pool -= c->bytes;
	c->pool = pool;
	if (pool != NULL)
		*pool += c->bytes;
}

/* This cache's bytes, and its pool's, grown (or shrunk) by delta. */
static void
add_bytes(TdbTrailPageCache *c, size_t delta, bool grow)
{
	if (grow)
		c->bytes += delta;
	else
		c->bytes -= delta;
	if (c->pool != NULL)
	{
		*c->pool = grow ? *c->pool + delta : *c->pool - delta;
		if (*c->pool > c->stats.pool_peak_bytes)
			c->stats.pool_peak_bytes = *c->pool;
	}
}

/* Would n more bytes take this cache, or its pool, past the bound? */
static bool
over(const TdbTrailPageCache *c, size_t n)
{
	return c->bytes + n > c->max_bytes || (c->pool != NULL && *c->pool + n > c->max_bytes);
}

static void
unlink_entry(TdbTrailPageCache *c, PcEntry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->tail = e->prev;
	e->prev = e->next = NULL;
}

static void
push_front(TdbTrailPageCache *c, PcEntry *e)
{
	e->prev = NULL;
	e->next = c->head;
	if (c->head)
		c->head->prev = e;
	c->head = e;
	if (c->tail == NULL)
		c->tail = e;
}

static void
drop_entry(TdbTrailPageCache *c, PcEntry *e)
{
	unlink_entry(c, e);
	c->table[e->pageno] = NULL;
	add_bytes(c, e->cost, false);
	c->stats.pages--;
	tdb_trail_page_release(&e->page);
	free(e);
}

/* Forget every page (and the table), keeping the counters. */
static void
clear_all(TdbTrailPageCache *c)
{
	while (c->head)
		drop_entry(c, c->head);
	free(c->table);
	c->table = NULL;
	add_bytes(c, c->bytes, false);	/* the table's */
	c->npages = 0;
	c->footer = NULL;
}

void
tdb_trail_page_cache_free(TdbTrailPageCache *c)
{
	if (c == NULL)
		return;
	clear_all(c);
	free(c);
}

void
tdb_trail_page_cache_stats(const TdbTrailPageCache *c, TdbTrailPageCacheStats *out)
{
	*out = c->stats;
	out->bytes = c->bytes;
	out->max_bytes = c->max_bytes;
}

static bool
same_file(const TdbTrailPageCache *c, const TdbTrailFooter *f)
{
	return c->footer == f && c->footer_end == f->data_end && c->footer_pages == f->npages;
}

static bool
entry_serves(const PcEntry *e, bool position, uint64_t skip_columns)
{
	/* every chunk asked for was decoded */
	return (e->position || !position) && (e->skip_columns & ~skip_columns) == 0;
}

bool
trail_page_cache_seen(const TdbTrailPageCache *c, const TdbTrailFooter *f)
{
	return c->seen == f && c->seen_end == f->data_end && c->seen_pages == f->npages;
}

bool
trail_page_cache_first_scan(TdbTrailPageCache *c, const TdbTrailFooter *f)
{
	if (trail_page_cache_seen(c, f))
		return false;
	c->seen = f;
	c->seen_end = f->data_end;
	c->seen_pages = f->npages;
	return true;
}

bool
trail_page_cache_has(const TdbTrailPageCache *c, const TdbTrailFooter *f, uint32_t pageno,
					 bool position, uint64_t skip_columns)
{
	return c != NULL && same_file(c, f) && pageno < c->npages && c->table[pageno] != NULL &&
		entry_serves(c->table[pageno], position, skip_columns);
}

const TdbTrailPage *
trail_page_cache_get(TdbTrailPageCache *c, const TdbTrailFooter *f, uint32_t pageno, bool position,
					 uint64_t skip_columns)
{
	PcEntry    *e;

	if (!trail_page_cache_has(c, f, pageno, position, skip_columns))
		return NULL;
	e = c->table[pageno];
	unlink_entry(c, e);
	push_front(c, e);
	c->stats.hits++;
	return &e->page;
}

static size_t
page_cost(const TdbTrailPage *p)
{
	return sizeof(PcEntry) + (size_t) p->cap * (sizeof(uint32_t) + sizeof(int64_t) + 2 * sizeof(int32_t) +
												(size_t) p->ncolumns * sizeof(TdbTrailValue));
}

const TdbTrailPage *
trail_page_cache_put(TdbTrailPageCache *c, const TdbTrailFooter *f, uint32_t pageno, bool position,
					 uint64_t skip_columns, TdbTrailPage *page)
{
	size_t		cost = page_cost(page);
	PcEntry    *e;
	size_t		tb;

	if (pageno >= f->npages)
		return NULL;
	if (!same_file(c, f))
	{
		tb = (size_t) f->npages * sizeof(PcEntry *);
		clear_all(c);
		if (tb >= c->max_bytes || over(c, tb) ||
			(c->table = calloc(f->npages ? f->npages : 1, sizeof(PcEntry *))) == NULL)
		{
			c->stats.refused++;
			return NULL;		/* not even the table fits: no cache */
		}
		c->footer = f;
		c->footer_end = f->data_end;
		c->footer_pages = f->npages;
		c->npages = f->npages;
		add_bytes(c, tb, true);
	}
	if (c->table[pageno] != NULL)
		drop_entry(c, c->table[pageno]);	/* decoded with fewer chunks: replaced */
	tb = (size_t) c->npages * sizeof(PcEntry *);
	if (cost > c->max_bytes - tb)
	{
		/* larger than the bound less the table: with every page gone, still too large */
		c->stats.refused++;
		return NULL;
	}
	while (over(c, cost) && c->tail != NULL)
	{
		c->stats.evictions++;
		drop_entry(c, c->tail);
	}
	if (over(c, cost) || (e = calloc(1, sizeof(*e))) == NULL)
	{
		c->stats.refused++;
		return NULL;
	}
	e->page = *page;
	memset(page, 0, sizeof(*page));
	e->pageno = pageno;
	e->position = position;
	e->skip_columns = skip_columns;
	e->cost = cost;
	c->table[pageno] = e;
	add_bytes(c, cost, true);
	if (c->bytes > c->stats.peak_bytes)
		c->stats.peak_bytes = c->bytes;
	push_front(c, e);
	c->stats.inserts++;
	c->stats.pages++;
	return &e->page;
}
