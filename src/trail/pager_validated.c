/*
 * pager_validated.c
 *	  What this process learnt of remote objects by their tail requests
 *	  (size, ETag, the tail's bytes), for the pager's revalidate_seconds and
 *	  validation tokens: an open that finds its object here sends nothing.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pager.h"
#include "pager_internal.h"

/* A few entries, the oldest replaced first. */
#define VALIDATED_MAX 32

typedef struct Validated
{
	char	   *id;				/* cache_id: endpoint|name */
	uint64_t	size;
	char		etag[256];
	uint8_t    *tail;
	uint64_t	tail_len;
	double		at;				/* CLOCK_MONOTONIC seconds */
	uint64_t	token;			/* the opener's validation token */
} Validated;

static Validated validated[VALIDATED_MAX];
static pthread_mutex_t validated_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * A validation of p's object younger than max_age seconds, or made under
 * p's token, into p; true if found.
 */
bool
trail_validated_get(TdbPager *p, double max_age)
{
	bool		found = false;
	double		now = tdb_mono_s();

	pthread_mutex_lock(&validated_lock);
	for (int i = 0; i < VALIDATED_MAX; i++)
	{
		Validated  *v = &validated[i];

		if (v->id == NULL || strcmp(v->id, p->cache_id) != 0)
			continue;
		if (now - v->at < max_age || (p->token != 0 && v->token == p->token))
		{
			if (v->tail_len > p->tail_cap)
			{
				/* a tail extended by the footer, or longer first request: room for all of it */
				uint8_t    *nt = realloc(p->tail, v->tail_len);

				if (nt == NULL)
					break;		/* ask the server instead */
				p->tail = nt;
				p->tail_cap = v->tail_len;
			}
			p->size = v->size;
			snprintf(p->etag, sizeof(p->etag), "%s", v->etag);
			memcpy(p->tail, v->tail, v->tail_len);
			p->tail_len = v->tail_len;
			p->reused_age = now - v->at;
			p->reused_token = p->token != 0 && v->token == p->token;
			found = true;
		}
		break;
	}
	pthread_mutex_unlock(&validated_lock);
	return found;
}

static void
validated_drop_locked(Validated *v)
{
	free(v->id);
	free(v->tail);
	memset(v, 0, sizeof(*v));
}

/* Remember p's size, ETag and tail as learnt now. */
void
trail_validated_put(const TdbPager *p)
{
	Validated  *slot = NULL;
	uint8_t    *tail = malloc(p->tail_len ? p->tail_len : 1);
	char	   *id = strdup(p->cache_id);

	if (tail == NULL || id == NULL)
	{
		free(tail);
		free(id);
		return;
	}
	memcpy(tail, p->tail, p->tail_len);
	pthread_mutex_lock(&validated_lock);
	for (int i = 0; i < VALIDATED_MAX && slot == NULL; i++)
		if (validated[i].id != NULL && strcmp(validated[i].id, p->cache_id) == 0)
			slot = &validated[i];
	for (int i = 0; i < VALIDATED_MAX && slot == NULL; i++)
		if (validated[i].id == NULL)
			slot = &validated[i];
	if (slot == NULL)
	{
		slot = &validated[0];
		for (int i = 1; i < VALIDATED_MAX; i++)
			if (validated[i].at < slot->at)
				slot = &validated[i];
	}
	validated_drop_locked(slot);
	slot->id = id;
	slot->size = p->size;
	snprintf(slot->etag, sizeof(slot->etag), "%s", p->etag);
	slot->tail = tail;
	slot->tail_len = p->tail_len;
	slot->at = tdb_mono_s();
	slot->token = p->token;
	pthread_mutex_unlock(&validated_lock);
}

/* Forget what is known of p's object (it was replaced). */
void
trail_validated_forget(const TdbPager *p)
{
	pthread_mutex_lock(&validated_lock);
	for (int i = 0; i < VALIDATED_MAX; i++)
		if (validated[i].id != NULL && strcmp(validated[i].id, p->cache_id) == 0 &&
			strcmp(validated[i].etag, p->etag) == 0)
			validated_drop_locked(&validated[i]);
	pthread_mutex_unlock(&validated_lock);
}
