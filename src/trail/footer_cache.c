/*
 * footer_cache.c
 *	  The process's decoded footers, shared by its readers (footer_cache.h
 *	  says what and why): a small table, least recently used evicted first,
 *	  bounded by decoded memory.
 */
#include "footer_cache.h"
#include "format.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define FOOTER_CACHE_SLOTS 8
#define FOOTER_CACHE_BYTES ((size_t) 64 << 20)

static SharedFooter *footer_cache[FOOTER_CACHE_SLOTS];
static size_t footer_cache_bytes;
static uint64_t footer_cache_tick;
static uint64_t footer_decodes;
static pthread_mutex_t footer_lock = PTHREAD_MUTEX_INITIALIZER;

static void
shared_footer_free(SharedFooter *sf)
{
	tdb_trail_footer_release(&sf->f);
	free(sf->key);
	free(sf);
}

SharedFooter *
footer_cache_get(const char *key)
{
	SharedFooter *hit = NULL;

	pthread_mutex_lock(&footer_lock);
	for (int i = 0; i < FOOTER_CACHE_SLOTS && hit == NULL; i++)
		if (footer_cache[i] && strcmp(footer_cache[i]->key, key) == 0)
			hit = footer_cache[i];
	if (hit)
	{
		hit->refs++;
		hit->used = ++footer_cache_tick;
	}
	pthread_mutex_unlock(&footer_lock);
	return hit;
}

void
footer_cache_put(SharedFooter *sf)
{
	pthread_mutex_lock(&footer_lock);
	if (sf->cost <= FOOTER_CACHE_BYTES / 2)
	{
		int			slot = -1;

		for (;;)
		{
			int			oldest = -1;

			slot = -1;
			for (int i = 0; i < FOOTER_CACHE_SLOTS; i++)
			{
				if (footer_cache[i] == NULL)
				{
					if (slot < 0)
						slot = i;
					continue;
				}
				if (oldest < 0 || footer_cache[i]->used < footer_cache[oldest]->used)
					oldest = i;
			}
			if (slot >= 0 && footer_cache_bytes + sf->cost <= FOOTER_CACHE_BYTES)
				break;
			/* evict the least recently used; its readers keep it until they close */
			footer_cache[oldest]->cached = false;
			footer_cache_bytes -= footer_cache[oldest]->cost;
			if (footer_cache[oldest]->refs == 0)
				shared_footer_free(footer_cache[oldest]);
			footer_cache[oldest] = NULL;
		}
		footer_cache[slot] = sf;
		sf->cached = true;
		sf->used = ++footer_cache_tick;
		footer_cache_bytes += sf->cost;
	}
	pthread_mutex_unlock(&footer_lock);
}

/* Evict the least recently used entry but keep; false if none. */
static bool
evict_oldest_locked(const SharedFooter *keep)
{
	int			oldest = -1;

	for (int i = 0; i < FOOTER_CACHE_SLOTS; i++)
		if (footer_cache[i] && footer_cache[i] != keep &&
			(oldest < 0 || footer_cache[i]->used < footer_cache[oldest]->used))
			oldest = i;
	if (oldest < 0)
		return false;
	footer_cache[oldest]->cached = false;
	footer_cache_bytes -= footer_cache[oldest]->cost;
	if (footer_cache[oldest]->refs == 0)
		shared_footer_free(footer_cache[oldest]);
	footer_cache[oldest] = NULL;
	return true;
}

void
footer_cache_release(SharedFooter *sf)
{
	bool		free_it;

	pthread_mutex_lock(&footer_lock);
	if (sf->cached && sf->f.lazy)
	{
		/* version 3: the chunks its readers loaded count too, now */
		size_t		cost = sf->base_cost + trail_footer3_loaded_memory(&sf->f);

		footer_cache_bytes += cost - sf->cost;
		sf->cost = cost;
		if (cost > FOOTER_CACHE_BYTES / 2)
		{
			for (int i = 0; i < FOOTER_CACHE_SLOTS; i++)
				if (footer_cache[i] == sf)
					footer_cache[i] = NULL;
			sf->cached = false;
			footer_cache_bytes -= cost;
		}
		while (footer_cache_bytes > FOOTER_CACHE_BYTES && evict_oldest_locked(sf))
			;
	}
	free_it = --sf->refs == 0 && !sf->cached;
	pthread_mutex_unlock(&footer_lock);
	if (free_it)
		shared_footer_free(sf);
}

void
tdb_trail_footer_cache_clear(void)
{
	pthread_mutex_lock(&footer_lock);
	for (int i = 0; i < FOOTER_CACHE_SLOTS; i++)
	{
		SharedFooter *sf = footer_cache[i];

		if (sf == NULL)
			continue;
		sf->cached = false;
		footer_cache_bytes -= sf->cost;
		if (sf->refs == 0)
			shared_footer_free(sf);
		footer_cache[i] = NULL;
	}
	pthread_mutex_unlock(&footer_lock);
}

uint64_t
tdb_trail_footer_cache_bytes(void)
{
	uint64_t	n;

	pthread_mutex_lock(&footer_lock);
	n = footer_cache_bytes;
	pthread_mutex_unlock(&footer_lock);
	return n;
}

uint64_t
tdb_trail_footer_decodes(void)
{
	uint64_t	n;

	pthread_mutex_lock(&footer_lock);
	n = footer_decodes;
	pthread_mutex_unlock(&footer_lock);
	return n;
}


void
footer_cache_count_decode(void)
{
	pthread_mutex_lock(&footer_lock);
	footer_decodes++;
	pthread_mutex_unlock(&footer_lock);
}
