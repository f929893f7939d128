/*
 * cache.c
 *	  The on-disk block cache shared by processes and the in-process LRU
 *	  (cache.h says what each guarantees).
 *
 * Disk layout under the cache directory:
 *	  blocks/XX/<sha256 of key, hex>	block files (XX = first two hex digits)
 *	  tmp/<pid>.<n>						blocks being written
 *	  evict.lock						flock'd by the process sweeping
 * A block file is a 32-byte header (magic, version, key length, data
 * length, CRC-32C of the data, CRC-32C of the header), the key, the data.
 *
 * Why no fsync, of the block or of the directory after the rename: a cache
 * may lose blocks in a power cut (a miss costs a refetch); what it must
 * never do is serve a wrong block, and the checks on every read (header
 * CRC, data CRC, the full key, the length) turn a block torn or emptied by
 * a crash into a miss.  An fsync per block made filling the cache the
 * largest cost of a cold query (bench/trails_parquet.sh: up to 6x).
 */
#include "cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../checksum.h"
#include "codec.h"
#include "sha256.h"

#define BLOCK_MAGIC		0x43424454u /* "TDBC" */
#define BLOCK_VERSION	1
#define BLOCK_HDR		32
#define SWEEP_EVERY		256			/* puts between sweeps, to see others' inserts */

/*
 * What this process knows of a cache directory's size, shared by every
 * cache object it opens on that directory: the directory is scanned at the
 * process's first open only (a full cache is tens of thousands of files, and
 * a pager, so a cache object, is opened per query), then kept up to date by
 * this process's inserts and sweeps; other processes' inserts are noticed
 * at every SWEEP_EVERY-th insert of this process, which sweeps.
 */
typedef struct DirState
{
	char	   *dir;
	uint64_t	approx_bytes;	/* what we know is in the directory */
	uint64_t	puts;
} DirState;

#define DIR_STATES 8
static DirState dir_states[DIR_STATES];
static uint64_t dir_scans;		/* directory walks by this process, for tests */
static pthread_mutex_t dir_lock = PTHREAD_MUTEX_INITIALIZER;

struct TdbDiskCache
{
	char	   *dir;
	uint64_t	max_bytes;
	DirState   *st;				/* in dir_states, or own when that is full */
	DirState	own;
};

static atomic_uint tmp_seq;		/* temporary file names, process-wide */

static int
mkdir_p(const char *path)
{
	if (mkdir(path, 0700) == 0 || errno == EEXIST)
		return 0;
	return -1;
}

/* false when the hash cannot be computed: the caller skips the cache */
static bool
block_path(const TdbDiskCache *c, const char *key, char *out, size_t outlen, char *sub, size_t sublen)
{
	uint8_t		h[32];
	char		hex[65];

	if (!tdb_sha256(key, strlen(key), h))
		return false;
	tdb_hex(h, 32, hex);
	snprintf(sub, sublen, "%s/blocks/%.2s", c->dir, hex);
	snprintf(out, outlen, "%s/%s", sub, hex);
	return true;
}

/* Scan the directory: total bytes, and optionally remove oldest over max. */
typedef struct BlockFile
{
	char	   *path;
	time_t		mtime;
	uint64_t	size;
} BlockFile;

static int
mtime_cmp(const void *a, const void *b)
{
	const BlockFile *x = a,
			   *y = b;

	return (x->mtime > y->mtime) - (x->mtime < y->mtime);
}

/* Remove tmp files of processes that no longer exist. */
static uint64_t
sweep_tmp(const char *dir)
{
	char		path[1200];
	DIR		   *d;
	struct dirent *de;
	uint64_t	n = 0;

	snprintf(path, sizeof(path), "%s/tmp", dir);
	if ((d = opendir(path)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL)
	{
		long		pid;

		if (de->d_name[0] == '.')
			continue;
		pid = strtol(de->d_name, NULL, 10);
		if (pid > 0 && (kill((pid_t) pid, 0) == 0 || errno != ESRCH))
			continue;
		snprintf(path, sizeof(path), "%s/tmp/%s", dir, de->d_name);
		if (unlink(path) == 0)
			n++;
	}
	closedir(d);
	return n;
}

static uint64_t
scan_blocks(const char *dir, BlockFile **files, size_t *nfiles)
{
	uint64_t	total = 0;
	size_t		n = 0,
				cap = 0;

	__atomic_add_fetch(&dir_scans, 1, __ATOMIC_RELAXED);
	for (int s = 0; s < 256; s++)
	{
		char		sub[1200];
		DIR		   *d;
		struct dirent *de;

		snprintf(sub, sizeof(sub), "%s/blocks/%02x", dir, s);
		if ((d = opendir(sub)) == NULL)
			continue;
		while ((de = readdir(d)) != NULL)
		{
			struct stat st;
			char		path[1600];

			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", sub, de->d_name);
			if (stat(path, &st) != 0)
				continue;
			total += (uint64_t) st.st_size;
			if (files)
			{
				if (n == cap)
				{
					size_t		nc = cap ? cap * 2 : 1024;
					BlockFile  *nf = realloc(*files, nc * sizeof(BlockFile));

					if (nf == NULL)
						continue;
					*files = nf;
					cap = nc;
				}
				if (((*files)[n].path = strdup(path)) == NULL)
					continue;
				(*files)[n].mtime = st.st_mtime;
				(*files)[n].size = (uint64_t) st.st_size;
				n++;
			}
		}
		closedir(d);
	}
	if (nfiles)
		*nfiles = n;
	return total;
}

int
tdb_disk_cache_open(const char *dir, uint64_t max_bytes, TdbDiskCache **out, TdbTrailError *err)
{
	TdbDiskCache *c;
	char		path[1200];

	*out = NULL;
	if (strlen(dir) > 400)
		return tdb_trail_fail(err, TDB_TRAIL_EINVAL, "cache directory path too long");
	snprintf(path, sizeof(path), "%s/blocks", dir);
	if (mkdir_p(dir) != 0 || mkdir_p(path) != 0)
		return tdb_trail_fail(err, TDB_TRAIL_EIO, "could not create cache directory \"%s\": %s",
							  dir, strerror(errno));
	snprintf(path, sizeof(path), "%s/tmp", dir);
	if (mkdir_p(path) != 0)
		return tdb_trail_fail(err, TDB_TRAIL_EIO, "could not create \"%s\": %s", path, strerror(errno));
	c = calloc(1, sizeof(*c));
	if (c == NULL || (c->dir = strdup(dir)) == NULL)
	{
		free(c);
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "out of memory");
	}
	c->max_bytes = max_bytes ? max_bytes : (1ull << 30);
	pthread_mutex_lock(&dir_lock);
	for (int i = 0; i < DIR_STATES && c->st == NULL; i++)
		if (dir_states[i].dir != NULL && strcmp(dir_states[i].dir, dir) == 0)
			c->st = &dir_states[i];
	for (int i = 0; i < DIR_STATES && c->st == NULL; i++)
		if (dir_states[i].dir == NULL && (dir_states[i].dir = strdup(dir)) != NULL)
		{
			c->st = &dir_states[i];
			c->st->approx_bytes = scan_blocks(dir, NULL, NULL);
		}
	pthread_mutex_unlock(&dir_lock);
	if (c->st == NULL)
	{
		c->st = &c->own;
		c->own.approx_bytes = scan_blocks(dir, NULL, NULL);
	}
	*out = c;
	return 0;
}

void
tdb_disk_cache_close(TdbDiskCache *c)
{
	if (c == NULL)
		return;
	free(c->dir);
	free(c);
}

static bool
read_full(int fd, void *buf, size_t len, off_t off)
{
	uint8_t    *p = buf;

	while (len > 0)
	{
		ssize_t		r = pread(fd, p, len, off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		p += r;
		len -= (size_t) r;
		off += r;
	}
	return true;
}

/*
 * Validate an open block file against key and copy its data into buf (when
 * not NULL): 1 valid and ours, 0 a valid block of another key or length
 * (a hash collision, a caller's mistake: leave it), -1 damaged.
 */
static int
block_check(int fd, const char *key, void *buf, size_t len)
{
	uint8_t		h[BLOCK_HDR];
	struct stat st;
	uint32_t	klen,
				dlen;
	char	   *kbuf;
	uint8_t    *dbuf;
	int			rc = -1;

	if (fstat(fd, &st) != 0 || st.st_size < BLOCK_HDR || !read_full(fd, h, BLOCK_HDR, 0))
		return -1;
	if (codec_get_u32le(h) != BLOCK_MAGIC || codec_get_u32le(h + 4) != BLOCK_VERSION ||
		codec_get_u32le(h + 28) != tdb_crc32c(h, 28))
		return -1;
	klen = codec_get_u32le(h + 8);
	dlen = codec_get_u32le(h + 12);
	if (klen > 8192 || (uint64_t) st.st_size != (uint64_t) BLOCK_HDR + klen + dlen)
		return -1;
	kbuf = malloc(klen + 1);
	dbuf = malloc(dlen ? dlen : 1);
	if (kbuf && dbuf && read_full(fd, kbuf, klen, BLOCK_HDR) &&
		read_full(fd, dbuf, dlen, BLOCK_HDR + klen))
	{
		if (codec_get_u32le(h + 16) != tdb_crc32c(dbuf, dlen))
			rc = -1;
		else if (strlen(key) != klen || memcmp(kbuf, key, klen) != 0 || (buf && dlen != len))
			rc = 0;
		else
		{
			if (buf)
				memcpy(buf, dbuf, dlen);
			rc = 1;
		}
	}
	free(kbuf);
	free(dbuf);
	return rc;
}

bool
tdb_disk_cache_get(TdbDiskCache *c, const char *key, void *buf, size_t len)
{
	char		path[700],
				sub[600];
	int			fd;
	int			rc;

	if (!block_path(c, key, path, sizeof(path), sub, sizeof(sub)))
		return false;
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	rc = block_check(fd, key, buf, len);
	if (rc > 0)
		futimens(fd, NULL);		/* LRU order for eviction */
	close(fd);
	if (rc < 0)
		unlink(path);			/* damaged: let the next reader refetch it */
	return rc > 0;
}

void
tdb_disk_cache_put(TdbDiskCache *c, const char *key, const void *buf, size_t len)
{
	char		path[700],
				sub[600],
				tmp[700];
	uint8_t		h[BLOCK_HDR];
	size_t		klen = strlen(key);
	int			fd;
	bool		ok;

	if (klen > 8192 || len > UINT32_MAX)
		return;
	if (!block_path(c, key, path, sizeof(path), sub, sizeof(sub)) || mkdir_p(sub) != 0)
		return;
	/*
	 * A name no other writer of this process takes (pagers of one backend,
	 * and their read-ahead threads, write at once: a per-cache counter gave
	 * two of them the same file, one's key over the other's bytes), and
	 * O_EXCL in case a crashed process of the same pid left one behind.
	 */
	snprintf(tmp, sizeof(tmp), "%s/tmp/%d.%u", c->dir, (int) getpid(), atomic_fetch_add(&tmp_seq, 1));
	memset(h, 0, sizeof(h));
	codec_put_u32le(h, BLOCK_MAGIC);
	codec_put_u32le(h + 4, BLOCK_VERSION);
	codec_put_u32le(h + 8, (uint32_t) klen);
	codec_put_u32le(h + 12, (uint32_t) len);
	codec_put_u32le(h + 16, tdb_crc32c(buf, len));
	codec_put_u32le(h + 28, tdb_crc32c(h, 28));
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return;
	ok = write(fd, h, BLOCK_HDR) == BLOCK_HDR &&
		write(fd, key, klen) == (ssize_t) klen &&
		write(fd, buf, len) == (ssize_t) len;
	ok = close(fd) == 0 && ok;
	if (!ok || rename(tmp, path) != 0)
	{
		unlink(tmp);
		return;
	}
	{
		bool		sweep;

		pthread_mutex_lock(&dir_lock);
		c->st->approx_bytes += BLOCK_HDR + klen + len;
		sweep = c->st->approx_bytes > c->max_bytes || ++c->st->puts % SWEEP_EVERY == 0;
		pthread_mutex_unlock(&dir_lock);
		if (sweep)
			tdb_disk_cache_evict(c);
	}
}

void
tdb_disk_cache_evict(TdbDiskCache *c)
{
	char		lock[1200];
	int			fd;
	BlockFile  *files = NULL;
	size_t		n = 0;
	uint64_t	total;

	snprintf(lock, sizeof(lock), "%s/evict.lock", c->dir);
	fd = open(lock, O_RDWR | O_CREAT, 0600);
	if (fd < 0)
		return;
	/* someone else sweeping: they will do it; we refresh our view next time */
	if (flock(fd, LOCK_EX | LOCK_NB) != 0)
	{
		close(fd);
		return;
	}
	sweep_tmp(c->dir);
	total = scan_blocks(c->dir, &files, &n);
	if (total > c->max_bytes)
	{
		/* down to 90 % so that every insert does not sweep */
		uint64_t	target = c->max_bytes / 10 * 9;

		qsort(files, n, sizeof(BlockFile), mtime_cmp);
		for (size_t i = 0; i < n && total > target; i++)
			if (unlink(files[i].path) == 0)
				total -= files[i].size;
	}
	pthread_mutex_lock(&dir_lock);
	c->st->approx_bytes = total;
	pthread_mutex_unlock(&dir_lock);
	for (size_t i = 0; i < n; i++)
		free(files[i].path);
	free(files);
	flock(fd, LOCK_UN);
	close(fd);
}

int
tdb_disk_cache_verify(const char *dir, TdbDiskCacheReport *rep, TdbTrailError *err)
{
	BlockFile  *files = NULL;
	size_t		n = 0;
	bool		hash_failed = false;

	memset(rep, 0, sizeof(*rep));
	rep->tmp_removed = sweep_tmp(dir);
	scan_blocks(dir, &files, &n);
	for (size_t i = 0; i < n && !hash_failed; i++)
	{
		int			fd = open(files[i].path, O_RDONLY);
		uint8_t		h[BLOCK_HDR];
		bool		ok = false;

		if (fd >= 0 && read_full(fd, h, BLOCK_HDR, 0) && codec_get_u32le(h + 8) <= 8192)
		{
			uint32_t	klen = codec_get_u32le(h + 8);
			char	   *key = malloc(klen + 1);

			/* read the key, then validate the whole file against it */
			if (key && read_full(fd, key, klen, BLOCK_HDR))
			{
				uint8_t		hh[32];
				char		hex[65];
				const char *base = strrchr(files[i].path, '/');

				key[klen] = '\0';
				/* no hash says nothing about the file: stop, delete nothing */
				hash_failed = !tdb_sha256(key, klen, hh);
				if (!hash_failed)
				{
					tdb_hex(hh, 32, hex);
					ok = base && strcmp(base + 1, hex) == 0 && block_check(fd, key, NULL, 0) > 0;
				}
			}
			free(key);
		}
		if (fd >= 0)
			close(fd);
		if (hash_failed)
			break;
		if (ok)
		{
			rep->blocks_ok++;
			rep->bytes += files[i].size;
		}
		else
		{
			rep->blocks_bad++;
			unlink(files[i].path);
		}
	}
	for (size_t i = 0; i < n; i++)
		free(files[i].path);
	free(files);
	if (hash_failed)
		return tdb_trail_fail(err, TDB_TRAIL_ENOMEM, "%s: SHA-256 failed (OpenSSL), nothing more verified", dir);
	return 0;
}

/* ---- in-process LRU ----------------------------------------------------- */

typedef struct LruEntry
{
	char	   *key;
	uint8_t    *data;
	size_t		len;
	uint64_t	hash;
	struct LruEntry *hnext;		/* hash chain */
	struct LruEntry *prev,
			   *next;			/* recency list, head = newest */
} LruEntry;

struct TdbBlockLru
{
	pthread_mutex_t lock;
	size_t		max_bytes;
	size_t		bytes;
	LruEntry  **table;
	size_t		nbuckets;
	LruEntry   *head,
			   *tail;
};

static uint64_t
lru_hash(const char *s)
{
	uint64_t	h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (uint8_t) *s) * 1099511628211ull;
	return h;
}

size_t
tdb_lru_capacity(const TdbBlockLru *l)
{
	TdbBlockLru *m = (TdbBlockLru *) l;	/* the lock is not the LRU's contents */
	size_t		v;

	pthread_mutex_lock(&m->lock);
	v = l->max_bytes;
	pthread_mutex_unlock(&m->lock);
	return v;
}

TdbBlockLru *
tdb_lru_create(size_t max_bytes)
{
	TdbBlockLru *l = calloc(1, sizeof(*l));

	if (l == NULL)
		return NULL;
	l->nbuckets = 4096;
	l->table = calloc(l->nbuckets, sizeof(LruEntry *));
	if (l->table == NULL)
	{
		free(l);
		return NULL;
	}
	l->max_bytes = max_bytes;
	pthread_mutex_init(&l->lock, NULL);
	return l;
}

static void
lru_unlink(TdbBlockLru *l, LruEntry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		l->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		l->tail = e->prev;
	e->prev = e->next = NULL;
}

static void
lru_push_front(TdbBlockLru *l, LruEntry *e)
{
	e->next = l->head;
	e->prev = NULL;
	if (l->head)
		l->head->prev = e;
	l->head = e;
	if (l->tail == NULL)
		l->tail = e;
}

static LruEntry *
lru_find(TdbBlockLru *l, const char *key, uint64_t h)
{
	for (LruEntry *e = l->table[h % l->nbuckets]; e; e = e->hnext)
		if (e->hash == h && strcmp(e->key, key) == 0)
			return e;
	return NULL;
}

static void
lru_remove(TdbBlockLru *l, LruEntry *e)
{
	LruEntry  **pp = &l->table[e->hash % l->nbuckets];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	lru_unlink(l, e);
	l->bytes -= e->len;
	free(e->key);
	free(e->data);
	free(e);
}

void
tdb_lru_resize(TdbBlockLru *l, size_t max_bytes)
{
	pthread_mutex_lock(&l->lock);
	l->max_bytes = max_bytes;
	while (l->tail && l->bytes > max_bytes)
		lru_remove(l, l->tail);
	pthread_mutex_unlock(&l->lock);
}

void
tdb_lru_free(TdbBlockLru *l)
{
	if (l == NULL)
		return;
	while (l->head)
		lru_remove(l, l->head);
	free(l->table);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

bool
tdb_lru_get(TdbBlockLru *l, const char *key, size_t off, size_t len, void *dst)
{
	uint64_t	h = lru_hash(key);
	LruEntry   *e;
	bool		hit = false;

	pthread_mutex_lock(&l->lock);
	e = lru_find(l, key, h);
	if (e && off + len <= e->len)
	{
		if (len > 0)
			memcpy(dst, e->data + off, len);
		lru_unlink(l, e);
		lru_push_front(l, e);
		hit = true;
	}
	pthread_mutex_unlock(&l->lock);
	return hit;
}

void
tdb_lru_put(TdbBlockLru *l, const char *key, const void *data, size_t len)
{
	uint64_t	h = lru_hash(key);
	LruEntry   *e;

	pthread_mutex_lock(&l->lock);
	if (len > l->max_bytes)
	{
		pthread_mutex_unlock(&l->lock);
		return;
	}
	if ((e = lru_find(l, key, h)) != NULL)
		lru_remove(l, e);
	while (l->tail && l->bytes + len > l->max_bytes)
		lru_remove(l, l->tail);
	e = calloc(1, sizeof(*e));
	if (e && (e->key = strdup(key)) != NULL && (e->data = malloc(len ? len : 1)) != NULL)
	{
		memcpy(e->data, data, len);
		e->len = len;
		e->hash = h;
		e->hnext = l->table[h % l->nbuckets];
		l->table[h % l->nbuckets] = e;
		lru_push_front(l, e);
		l->bytes += len;
	}
	else if (e)
	{
		free(e->key);
		free(e);
	}
	pthread_mutex_unlock(&l->lock);
}

uint64_t
tdb_disk_cache_scans(void)
{
	return __atomic_load_n(&dir_scans, __ATOMIC_RELAXED);
}
