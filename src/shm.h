/*
 * shm.h
 *	  trafficdb's shared memory: where published objects live, and the
 *	  lock-free reader protocol every reader (SQL backends and external
 *	  processes alike) uses to pin a consistent version of them.
 *
 * Names.  Everything is a POSIX shared memory object under one prefix, by
 * default "/trafficdb.<port>" (setting trafficdb.shm_name):
 *	 <prefix>.lock		ownership: the server that holds an OFD write lock on
 *						it owns the prefix; a second server started with the
 *						same name finds it locked and touches nothing (0600)
 *	 <prefix>.ctl		the control block: the daemon writes it, readers map it
 *						read-only (mode 0600, or 0640 with trafficdb.shm_group)
 *	 <prefix>.readers	slots of external readers (libtrafficdb): each reader
 *						writes only its own slot (0600, or 0660 with a group)
 *	 <prefix>.<seq>		one object each (map or traffic), read-only for readers
 *
 * Names in /dev/shm are public: any local user can create one first.  An
 * object is trusted only if its owner is the server's user and it is a
 * regular file nobody else can write:
 *	 - the server (daemon, backends) requires its own euid (tdb_shm_map with
 *	   own); a name it needs that another user holds is "taken"
 *	   (TDB_SHM_ETAKEN, with the file and its owner named): a segment
 *	   <prefix>.<seq> is skipped for the next free number (readers find
 *	   segments through the control block), and if a fixed name (lock, ctl,
 *	   readers, subs, writers) is taken the daemon serves SQL from private
 *	   names (tdb_private_prefix, random) and reports what to do;
 *	 - an external process (libtrafficdb, tdbread, tdbsub, writers) accepts
 *	   only objects owned by the server's user: its own user, or the user
 *	   named by the environment variable TDB_SERVER_USER (a name or a uid),
 *	   by default "postgres" (tdb_shm_owner_trusted).
 *
 * SQL backends do not use <prefix>.readers: their pins live in PostgreSQL's
 * main shared memory, which only this server's own processes can write, so
 * neither another server nor a member of shm_group can clear them.
 *
 * We use our own POSIX objects rather than PostgreSQL's DSM segments so that
 * external processes can open them by a stable name, so that a postmaster
 * crash-restart (which destroys every DSM segment) leaves readers' objects
 * intact for the restarted daemon to validate and adopt, and so that
 * permissions can name a group.
 *
 * Versions.  A version is (generation, map object, traffic object).  The
 * control block holds TDB_MAX_VERSIONS version descriptors and one 64-bit
 * "active" word = generation << 8 | descriptor index.  Publishing fills a
 * free descriptor and stores the active word: one atomic store.
 *
 * Reader protocol (no lock, no system call):
 *	 pin:	 a = load(active); store(slot.pin, a); if load(active) == a: done,
 *			 else retry.   (seq_cst store then load: the daemon's reclaim scan,
 *			 which runs after its own seq_cst store of active, either sees the
 *			 pin or the reader sees the new active word and retries.)
 *	 read:	 the pinned descriptor, its segments: immutable while pinned.
 *	 unpin:	 store(slot.pin, 0).
 * The daemon reuses a descriptor (and rewrites the traffic segment it names
 * in place) only when no live pin names it and it is not active.  Traffic
 * segments are rewritten in place when free, so readers keep their
 * mappings across publications (no remap, no page faults per publish).
 *
 * Liveness.  A pin counts only while its owner lives: a backend's pin is
 * cleared with the server's shared memory on a crash-restart; an external
 * reader holds an OFD write lock on byte <slot> of <prefix>.readers for as
 * long as it uses the slot, which the kernel releases when it exits however
 * it exits (in any PID namespace), and the daemon ignores the pin of a slot
 * nobody has locked.  No process IDs are trusted.
 *
 * Pin timeout.  A pin never blocks publication for longer than the
 * writer's pin timeout (trafficdb.reader_pin_timeout): once a version has
 * been superseded for that long, its descriptor is revoked (its generation
 * word set to 0) and may be reused, and its traffic object is unlinked
 * rather than rewritten, so a reader still pinning it keeps reading intact
 * (if old) memory and learns at its next check that its snapshot was
 * revoked (tdb_reader_revoked).
 *
 * Memory ordering is argued for x86-64 (TSO), the only target built and
 * tested: on a weakly ordered CPU, revocation and the in-place rewrite would
 * need release fences between the generation-0 store and the plain stores
 * after it, and readers an acquire fence before their final checks.
 *
 * No PostgreSQL headers: linked into the module and into libtrafficdb.
 */
#ifndef TDB_SHM_H
#define TDB_SHM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/types.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25		/* Linux 6.1; older C libraries lack the name */
#endif

#define TDB_CTL_MAGIC		0x4C544454u /* "TDTL" */
#define TDB_SLOTS_MAGIC		0x53544454u /* "TDTS" */
#define TDB_SHM_VERSION		3
#define TDB_MAX_VERSIONS	64
#define TDB_MAX_SEGMENTS	128
#define TDB_SHM_NAME_MAX	64
#define TDB_SHM_ERRLEN		256 /* = TDB_ERRLEN: err buffers below */

#define TDB_ACTIVE_WORD(gen, idx)	(((uint64_t) (gen) << 8) | (uint64_t) (idx))
#define TDB_ACTIVE_GEN(word)		((word) >> 8)
#define TDB_ACTIVE_IDX(word)		((uint32_t) ((word) & 0xFF))

typedef enum TdbSegKind
{
	TDB_SEG_FREE = 0,
	TDB_SEG_MAP = 1,
	TDB_SEG_TRAFFIC = 2
} TdbSegKind;

typedef struct TdbSegmentDesc
{
	uint64_t	seq;			/* name suffix; unique per control block */
	uint64_t	size;			/* bytes of the shared memory object */
	uint32_t	kind;			/* TdbSegKind */
	uint32_t	reserved;
} TdbSegmentDesc;

typedef struct TdbVersionDesc
{
	uint64_t	generation;		/* 0 = free or revoked (atomic loads/stores) */
	uint64_t	map_id;
	int64_t		published_at_us;
	int64_t		superseded_at_us;	/* when another version became active; 0 = not yet */
	uint32_t	map_seg;		/* index into segments[] */
	uint32_t	traffic_seg;
} TdbVersionDesc;

typedef enum TdbDaemonState
{
	TDB_DAEMON_STARTING = 0,
	TDB_DAEMON_RUNNING = 1,
	TDB_DAEMON_STOPPED = 2		/* orderly shutdown: reopen later */
} TdbDaemonState;

/* The control block: written by the daemon only. */
typedef struct TdbControl
{
	uint32_t	magic;
	uint16_t	version;
	uint16_t	header_size;	/* sizeof(TdbControl) */
	uint64_t	instance_id;	/* new for each control block created */
	uint32_t	nslots;			/* external reader slots in <prefix>.readers */
	uint32_t	reserved0;
	int32_t		daemon_pid;		/* for display only */
	int32_t		postmaster_pid; /* for display only: ownership is the lock */
	char		prefix[TDB_SHM_NAME_MAX];
	_Atomic uint32_t state;		/* TdbDaemonState */
	_Atomic uint32_t notify;	/* futex word: incremented on every publish */
	_Atomic uint64_t active;	/* 0 = nothing published yet */
	uint64_t	next_seq;
	TdbSegmentDesc segments[TDB_MAX_SEGMENTS];
	TdbVersionDesc versions[TDB_MAX_VERSIONS];
	/*
	 * changes_since(g) is answered for g >= changes_from - 1 only: the
	 * generation log keeps changes back to there (and a map reload or a
	 * repaired log starts over).  0 = no limit known.  Set before each
	 * publication.
	 */
	_Atomic uint64_t changes_from;
} TdbControl;

/*
 * One reader's slot: a cache line of its own.  Backends' slots are in
 * PostgreSQL's shared memory; external readers' in <prefix>.readers, where
 * any member of shm_group could write anything: the daemon takes nothing
 * from there but pins (checked against the descriptors) and display data.
 */
typedef struct TdbReaderSlot
{
	_Atomic uint64_t pin;		/* pinned active word, 0 = none */
	_Atomic int32_t pid;		/* the owner's pid in its own namespace: display only */
	uint32_t	reserved;
	char		pad[48];
} __attribute__((aligned(64))) TdbReaderSlot;

typedef struct TdbSlotsHeader
{
	uint32_t	magic;
	uint32_t	nslots;			/* informative: everyone uses the control block's */
	uint64_t	instance_id;	/* same as the control block's */
	char		pad[48];
	TdbReaderSlot slots[];
} TdbSlotsHeader;

/* Result codes (negative = error), shared with libtrafficdb. */
typedef enum TdbShmResult
{
	TDB_SHM_OK = 0,
	TDB_SHM_ENOENT = -20,		/* no such shared memory object (server not running?) */
	TDB_SHM_EACCES = -21,		/* permission denied */
	TDB_SHM_EINVAL = -22,		/* not a trafficdb object, or an incompatible one */
	TDB_SHM_ENOSLOT = -23,		/* every reader slot is taken */
	TDB_SHM_EEMPTY = -24,		/* nothing published yet */
	TDB_SHM_ESTALE = -25,		/* the server stopped; reopen */
	TDB_SHM_ECORRUPT = -26,		/* an object failed validation */
	TDB_SHM_ESYS = -27,			/* a system call failed: see errno */
	TDB_SHM_EBUSY = -28,		/* the prefix belongs to another running server */
	TDB_SHM_EREVOKED = -29,		/* the pinned version was revoked (pin timeout) */
	TDB_SHM_ETAKEN = -30		/* the name is another user's object (or not a file): never used */
} TdbShmResult;

static inline size_t
tdb_slots_size(uint32_t nslots)
{
	return sizeof(TdbSlotsHeader) + (size_t) nslots * sizeof(TdbReaderSlot);
}

/*
 * Is prefix a shared memory name ("/..." shorter than TDB_SHM_NAME_MAX)?
 * If not, says why in err (TDB_SHM_ERRLEN bytes), naming it.
 */
bool		tdb_shm_prefix_ok(const char *prefix, char *err);

/* "<prefix>.<suffix>" into out (TDB_SHM_NAME_MAX + 24 bytes). */
void		tdb_shm_name(char *out, const char *prefix, const char *suffix);
void		tdb_shm_seg_name(char *out, const char *prefix, uint64_t seq);

/*
 * Map an existing shared memory object.  writable selects PROT_WRITE.
 * Returns TDB_SHM_OK with *addr and *size set, or TDB_SHM_ENOENT / EACCES /
 * ESYS (errno kept).  min_size guards against truncated objects.  Objects
 * writable by everyone are refused (TDB_SHM_EACCES): anyone could have put
 * them there.  own: require that the caller's user owns the object (the
 * server's own processes); without own, that tdb_shm_owner_trusted accepts
 * its owner (external processes).  An object of any other user is
 * TDB_SHM_ETAKEN (tdb_shm_foreign_error says whose it is).
 */
int			tdb_shm_map(const char *name, bool writable, bool own, size_t min_size, void **addr,
						size_t *size);

/* The same, keeping the descriptor open in *fd (close-on-exec) for locks. */
int			tdb_shm_map_fd(const char *name, bool writable, bool own, size_t min_size, void **addr,
						   size_t *size, int *fd);

/*
 * Create (or replace one of ours) an object of size bytes, mapped
 * read-write, with mode 0600, or group-readable (group_write: also
 * group-writable) when gid is not (gid_t) -1.  TDB_SHM_ETAKEN (errno
 * EEXIST) when the name holds something we cannot remove: another user's.
 */
int			tdb_shm_create(const char *name, size_t size, gid_t gid, bool group_write, void **addr);

/*
 * Make the whole 2 MB pages of a freshly created object (addr as
 * tdb_shm_create mapped it, every page allocated) huge pages in the page
 * cache, by MADV_COLLAPSE: it works whatever /dev/shm's huge= option and
 * shmem_enabled say, short of "deny", and copies the object once (0.5 ms
 * per MB with free huge pages, up to about 6 ms when the kernel compacts
 * memory first, on a loaded 2-vCPU guest: more than the 4 kB page faults
 * the first writes then save).  Every process that maps the object aligned
 * (tdb_shm_map) then reaches it through one TLB entry per 2 MB.  Returns
 * the bytes now in huge pages: 0 for an object under 2 MB or a kernel
 * without MADV_COLLAPSE (before 6.1).  It stops at the first page the
 * kernel has no huge page for (or no room in the memory cgroup), and once
 * budget_ms have passed, leaving the rest of the object on 4 kB pages:
 * nothing else changes.
 */
size_t		tdb_shm_make_huge(void *addr, size_t size, int budget_ms);

/*
 * Create name (it must not exist) of size bytes with mode and group set
 * before anyone can open it, its first reserve bytes allocated (a full
 * /dev/shm is an error here, not a SIGBUS later; the rest stays sparse), and
 * map it read-write at *addr.  Returns the open descriptor, or -1 with errno
 * set, *what naming the step that failed ("cannot create", "cannot size",
 * "cannot reserve the header of", "cannot map") and nothing left under name.
 */
int			tdb_shm_create_fd(const char *name, size_t size, size_t reserve, mode_t mode, gid_t gid,
							  void **addr, const char **what);

/*
 * May an external process trust an object owned by uid?  Its own user, or
 * the server's user: $TDB_SERVER_USER (a user name or a numeric uid) when
 * set, else the user named "postgres".
 */
bool		tdb_shm_owner_trusted(uid_t uid);

/* "user NAME (uid N)" into out (len bytes). */
void		tdb_shm_describe_user(uid_t uid, char *out, size_t len);

/*
 * Is name (a shared memory object) present and not this process's user's
 * regular file?  If so, says in err (TDB_SHM_ERRLEN bytes) which file, whose
 * it is and what to do, and returns true.  Absent or ours: false.
 */
bool		tdb_shm_name_taken(const char *name, char *err);

/*
 * Are any of the fixed names of prefix (lock, ctl, readers, subs, writers)
 * taken (tdb_shm_name_taken)?  The first one found is described in err.
 */
bool		tdb_shm_prefix_taken(const char *prefix, char *err);

/*
 * Why an object an external process opened was refused: err names the
 * file, its owner and the user expected (TDB_SHM_ERRLEN bytes).
 */
void		tdb_shm_foreign_error(const char *name, char *err);

/*
 * Is name present but not something to trust: not a regular file, or (own)
 * not this user's, or (!own) of an owner tdb_shm_owner_trusted refuses?
 * For an open that failed (EACCES, ELOOP): another user's object is
 * TDB_SHM_ETAKEN, not a permission problem of ours.  Keeps errno.
 */
bool		tdb_shm_untrusted(const char *name, bool own);

/* A failed system call's errno as a TdbShmResult (ENOENT, EACCES, else ESYS). */
int			tdb_shm_errno_result(void);

void		tdb_shm_unmap(void *addr, size_t size);

/* ---- the reader protocol ----------------------------------------------------- */

/*
 * Pin the active version into slot.  Returns the pinned active word, or 0 if
 * nothing is published.  Lock-free: loops only while the daemon publishes.
 */
static inline uint64_t
tdb_pin(const TdbControl *ctl, TdbReaderSlot *slot)
{
	for (;;)
	{
		uint64_t	a = atomic_load_explicit(&ctl->active, memory_order_acquire);

		if (a == 0)
			return 0;
		atomic_store_explicit(&slot->pin, a, memory_order_seq_cst);
		if (atomic_load_explicit(&ctl->active, memory_order_seq_cst) == a)
			return a;
	}
}

static inline void
tdb_unpin(TdbReaderSlot *slot)
{
	atomic_store_explicit(&slot->pin, 0, memory_order_release);
}

/*
 * Claim a free external slot of the readers segment open as fd: the first
 * slot in [0, nslots) whose byte this process can OFD-write-lock without
 * waiting.  -1 if every slot is locked by someone.  The lock lasts until
 * tdb_slot_release or until the descriptor's last copy is closed.
 */
int			tdb_slot_claim(int fd, TdbSlotsHeader *slots, uint32_t nslots, int32_t pid);
void		tdb_slot_release(int fd, TdbSlotsHeader *slots, uint32_t idx);

/*
 * Is external slot idx owned by a live process?  (An OFD lock test: false
 * when no open file description other than fd's holds the slot's byte.)
 * On a failing system call, true: never drop a pin we cannot judge.
 */
bool		tdb_slot_alive(int fd, uint32_t idx);

/*
 * Take the ownership lock of prefix ("<prefix>.lock", an OFD write lock,
 * close-on-exec so that programs the server runs do not keep it).  On
 * success *fd holds it; TDB_SHM_EBUSY when another server (of our user)
 * holds it; TDB_SHM_ETAKEN when the name is another user's file (err says
 * whose): then it protects nothing and is never opened.
 */
int			tdb_prefix_lock(const char *prefix, int *fd, char *err);

/* Basic checks of a mapped control block / slots segment. */
int			tdb_control_check(const TdbControl *ctl, size_t size);
int			tdb_slots_check(const TdbSlotsHeader *slots, size_t size, const TdbControl *ctl);

/* The generation a version descriptor holds now (0: free or revoked). */
static inline uint64_t
tdb_version_generation(const TdbVersionDesc *v)
{
	return __atomic_load_n(&v->generation, __ATOMIC_ACQUIRE);
}

#endif							/* TDB_SHM_H */
