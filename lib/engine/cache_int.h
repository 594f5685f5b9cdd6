/* Internals of the patch engine and block cache (not installed).
 *
 * Invariants the code relies on (see design.md §3):
 *
 *  - Every edge goes from a patch to one with a smaller sequence number
 *    (after->seq > before->seq).  New patches get the next number and
 *    depend only on existing ones; a merge adds to its target only
 *    dependencies older than the target; patch_add_depend() renumbers its
 *    target, which nothing depends on.  So the graph can never have a cycle.
 *  - A block's uncommitted patches are listed in sequence order.  A patch's
 *    undo bytes restore its range to what it was just before the patch, so
 *    rolling back in reverse order is always right.  Anything that changes
 *    bytes inside a soft patch's range later either depends on it or is
 *    merged into it; bit flips on a word commute with each other.
 *  - A hard patch has no dependencies and no patch it could be rolled back
 *    for, so it is in every write of its block and needs no undo data.
 *  - A non-rollbackable (NRB) patch is made only on a block with no other
 *    uncommitted patch, and every later patch of that block depends on it.
 *    So the block is never written without it, and it needs no undo data
 *    either.  Its befores are all older than it and none is on its block,
 *    so it cannot deadlock the block.  It is not made for changes that may
 *    wait on a held empty patch, which would pin the whole block.
 *  - A merge target nothing depends on may take a new sequence number (and
 *    move to the tail of its block's list) when nothing newer overlaps it.
 *  - A patch in flight (in the round being written), or written in a round
 *    that failed, never gains a dependency: its bytes may be on disk.
 *  - A block's overlap index, where it has one, lists under each 64th of
 *    the block, in list order, every soft patch whose range touches it
 *    except those marked PF_COVERED, and a patch so marked has a newer
 *    soft byte patch of the block over all its range among its 8 newest
 *    afters (patch.c, covered()).
 */
#ifndef FSTITCH_CACHE_INT_H
#define FSTITCH_CACHE_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cache.h"

enum patch_type { PT_BYTE, PT_BIT, PT_EMPTY };

enum patch_flags {
	PF_ALLOC = 1 << 0,    /* slab slot in use */
	PF_HARD = 1 << 1,     /* no undo, never rolled back */
	PF_HELD = 1 << 2,     /* empty patch held by its creator */
	PF_INFLIGHT = 1 << 3, /* part of the round being written */
	PF_BLOCKED = 1 << 4,  /* scratch: a same-block before is not written */
	PF_COMMITTED = 1 << 5,
	PF_NRB = 1 << 7,      /* no undo: made on a clean block, and every
			       * later patch of the block depends on it */
	PF_PINNED = 1 << 8,   /* may wait for a held empty patch (never
			       * cleared: only used to be careful) */
	PF_AFTV = 1 << 9,     /* afters are in aft.v (else aft.one) */
	PF_INSET = 1 << 10,   /* scratch: in the dependency set being built */
	PF_UNHOLDS = 1 << 11, /* lets a held patch go when committed
			       * (patch_unhold_after) */
	PF_WRITTEN = 1 << 6,  /* written in a round whose barrier failed: it
			       * may be on disk, so it must never gain a
			       * dependency (no soft merge into it) */
	PF_COVERED = 1 << 12, /* left out of its block's overlap index: a
			       * newer soft byte patch over all its range is
			       * among its 8 newest afters (patch.c) */
	PF_SMALL = 1 << 13,   /* in an empty patch's cell: the fields from
			       * bnext on do not exist */
	PF_MID = 1 << 14,     /* in a hard patch's cell: the fields from
			       * off on do not exist */
	PF_NOUNDO = 1 << 15,  /* in an NRB patch's cell: the fields from
			       * undo on do not exist */
};

/* Patches come in four sizes of cell (patch.c, patch_alloc()): empty
 * patches never use the fields from bnext on, hard ones never those from
 * off on, and NRB ones never undo, so their slabs hold only the fields
 * before (PATCH_EMPTY_SIZE, PATCH_HARD_SIZE and PATCH_NRB_SIZE bytes,
 * against sizeof(struct patch)).  Their flags say which (PF_SMALL, PF_MID,
 * PF_NOUNDO).  Code that may meet an empty patch reads no field from bnext
 * on unless its block is set, nor one from off on of a hard patch
 * (patch_npend_blk()), nor undo of an NRB one (patch_has_undo()).  A patch
 * turned empty by a discard stays in its cell. */
enum patch_cell { CELL_EMPTY, CELL_HARD, CELL_NRB, CELL_FULL, NCELLS };

struct patch {
	struct cblock *block; /* NULL for empty patches */
	union {
		struct patch *one; /* without PF_AFTV: nafters <= 1 */
		struct patch **v;  /* with PF_AFTV: room for afters_cap() */
	} aft;			   /* patches that depend on this one;
				    * the slab free list */
	uint64_t seq;
	uint32_t nafters;
	uint32_t npend_ext; /* uncommitted befores elsewhere */
	uint32_t refs;	    /* caller references */
	uint16_t flags;
	uint8_t type;
	uint8_t committed; /* read without the lock */
	/* ---- block patches only (see above) ---- */
	struct patch *bnext; /* block list */
	/* ---- soft patches only ---- */
	uint16_t off, lenm1; /* byte range in the block: [off, off+len) */
	uint32_t npend_blk;  /* uncommitted befores on this block */
	/* ---- soft patches that may be rolled back only ---- */
	union {
		uint8_t *undo;	 /* soft byte patch (not NRB): len bytes */
		uint32_t mask;	 /* bit patch of one word */
		uint32_t *masks; /* bit patch of several words: one mask
				  * per word (patch_bit_mask()) */
	};
};

#define PATCH_EMPTY_SIZE offsetof(struct patch, bnext)
#define PATCH_HARD_SIZE	 offsetof(struct patch, off)
#define PATCH_NRB_SIZE	 offsetof(struct patch, undo)

static inline size_t cell_size(enum patch_cell k)
{
	static const size_t size[NCELLS] = {PATCH_EMPTY_SIZE, PATCH_HARD_SIZE, PATCH_NRB_SIZE,
					    sizeof(struct patch)};

	return size[k];
}

/* Room in aft.v holding n afters: 2, then half as much again each time
 * (2, 3, 4, 6, 9, 13, ...).  A patch moves to the vector on its second
 * after, and most stop at a handful: a data block's contents wait for a
 * few sets and copies, and with room doubling a fifth after took eight
 * slots.  afters_grow() is the room after cap. */
#define AFTERS_MIN 2
static inline uint32_t afters_grow(uint32_t cap)
{
	return cap + cap / 2;
}

static inline uint32_t afters_cap(uint32_t n)
{
	uint32_t cap = AFTERS_MIN;

	while (cap < n)
		cap = afters_grow(cap);
	return cap;
}

/* Whether p can take one more after without allocating. */
static inline bool after_room(const struct patch *p)
{
	if (!(p->flags & PF_AFTV))
		return p->nafters == 0;
	return p->nafters < afters_cap(p->nafters);
}

enum block_flags {
	BF_READING = 1 << 0, /* being read in; wait on io_cond */
	BF_BADREAD = 1 << 1, /* the read failed: unhashed, to be freed */
	BF_INFLIGHT = 1 << 2,
	BF_READY = 1 << 3,   /* on the ready list */
	BF_LRU = 1 << 4,     /* on the clean LRU list */
	BF_DEFER = 1 << 5,   /* scratch: to be put off to the next round */
	BF_LOG = 1 << 6,     /* written once, not read again (cache_get_log):
			      * first on the LRU list, reused first */
	BF_IDLE = 1 << 7,    /* scratch: put off by a sync, as nothing waits
			      * for its write or as it has slack (with
			      * BF_DEFER) */
	BF_PASSED = 1 << 8,  /* left out of the last round it could have
			      * gone in, for its write would roll a change
			      * back (round_locked()) */
	BF_REQUEUE = 1 << 9, /* scratch: passed in this round, to go to the
			      * ready list's tail (round_locked()) */
};

struct cblock {
	uint64_t blkno;
	uint8_t *data;
	struct cblock *hnext;
	struct cblock *lprev, *lnext; /* LRU list of clean idle blocks */
	struct cblock *rprev, *rnext; /* ready list */
	struct cblock *dprev, *dnext; /* dirty list, oldest dirtied first */
	uint64_t dirty_ns;	      /* CLOCK_MONOTONIC ns when it became dirty */
	struct patch *phead, *ptail;  /* uncommitted patches, by seq
				       * (singly linked) */
	struct patch *hard;	      /* the hard patch changes merge into */
	struct patch *nrb;	      /* the NRB patch, if any */
	uint64_t ovmask;	      /* 64ths of the block that soft patches
				       * may cover (a superset) */
	struct ovslot *ovix;	      /* per 64th, the soft patches over it,
				       * or NULL (patch.c, the overlap index) */
	uint32_t refs;
	uint32_t npatches;
	uint32_t nroots; /* patches with no uncommitted before */
	uint16_t flags;
	uint16_t defers;       /* put off from the last round it was in */
	uint16_t kind;	       /* enum cblock_kind, for inspection */
	uint64_t gen;	       /* cache's change count at its last
				* change (cache_discard retries) */
	uint64_t jhold, jfrom; /* every patch of the block from
				* sequence number jfrom on waits for
				* the transaction hold numbered jhold
				* (0: none known; see make_change) */
};

/* One 64th of a block in the overlap index: the soft patches of the block's
 * list whose range touches it, in list (sequence) order. */
struct ovslot {
	struct patch **v;
	uint32_t n, cap;
};

#define OVIX_SLOTS 64
/* Default of cache.ovix_min.  An index costs a block about 1 KiB, and
 * more for each patch over several 64ths: kept from 16 patches on, the
 * inode-table blocks of an untar, at 17 or so each, held a third of the
 * engine's memory in indexes.  Below 64, walking the list costs little. */
#define OVIX_MIN 64

struct bchunk;

/* A patch whose pending befores one block write would settle, and how
 * many of them are left (round.c, choose_patches()). */
struct settle_slot {
	struct patch *p;
	uint32_t left;
	uint32_t gen; /* valid when equal to r_settle_gen */
};

/* A patch and the rounds its write and everything waiting for it need
 * (round.c, slack_compute()). */
struct slack_slot {
	struct patch *p;
	uint32_t h;
	/* For an empty patch, whose afters may be on several blocks: the
	 * block of the after that gives h, and the most h2 over afters on
	 * any other block, at b2.  A patch on b1 may go in one write with
	 * those on b1, and needs only h2 + 1 for the rest. */
	const struct cblock *b1, *b2;
	uint32_t h2;
};

#define SLAB_PATCHES 1024 /* patches per slab */

/* SLAB_PATCHES cells of one size (cell_size()). */
struct slab {
	struct slab *next;
	_Alignas(struct patch) unsigned char mem[];
};

static inline struct patch *slab_patch(struct slab *s, size_t i, size_t size)
{
	return (struct patch *)(void *)(s->mem + i * size);
}

struct cache {
	struct bdev *dev;
	struct cache_opts opts;
	uint32_t bs;
	uint64_t born_ns; /* CLOCK_MONOTONIC ns at cache_create */
	pthread_mutex_t lock;
	pthread_cond_t io_cond;	   /* a block read finished */
	pthread_cond_t round_cond; /* the round in flight finished */
	pthread_cond_t flush_cond; /* wakes the flusher */

	struct cblock **hash;
	size_t hmask, nblocks;
	struct cblock *lru_head, *lru_tail;
	struct cblock *ready_head, *ready_tail;
	struct cblock *dirty_head, *dirty_tail;
	size_t nready, ndirty, ninflight;

	struct bchunk *bchunks; /* block structures and buffers */
	struct cblock *bfree;
	struct slab *slabs[NCELLS];  /* by enum patch_cell */
	struct patch *pfree[NCELLS]; /* their free cells (through aft.one) */
	uint64_t seq;
	uint32_t ovix_min; /* patches a block needs for an overlap
			    * index (OVIX_MIN; tests lower it) */

	/* The round: only one at a time, so its scratch is kept. */
	bool round_busy;
	unsigned nsyncs; /* cache_sync() calls writing everything */
	int last_round_err;
	struct cblock **r_blocks;
	struct bdev_write *r_writes;
	uint8_t **r_copies; /* the blocks' copies as written, in r_copymem */
	uint8_t *r_copymem; /* round_max_blocks of them, from chunk_map() */
	size_t r_copylen;
	size_t *r_pstart;
	struct patch **r_patches;
	size_t r_np, r_cap;
	struct patch **r_roll; /* one block's patches to roll back */
	size_t r_nroll, r_rollcap;
	struct settle_slot *r_settle; /* choose_patches()'s scratch table */
	size_t r_settle_cap;	      /* its slots (a power of two) */
	size_t r_settle_used;	      /* slots of this generation */
	uint32_t r_settle_gen;
	struct slack_slot *r_slack; /* slack_compute()'s table (round.c) */
	size_t r_slack_cap, r_slack_used;
	struct patch **r_slackv; /* the patches it holds, by seq */
	size_t r_slackcap;
	/* seq, changes and blocks_discarded when the table was filled */
	uint64_t r_slack_seq, r_slack_chg, r_slack_disc;
	uint32_t r_slack_max; /* the longest chain of rounds left */
	struct patch **work;  /* empty patches to commit */
	size_t nwork, cwork;
	struct patch *dclear; /* cache_discard(): the clear of the
			       * blocks in dretry (a reference) */
	struct dretry {
		uint64_t blkno, gen; /* gen: the block's at the failed try */
	} * dretry;		     /* blocks to try discarding again */
	uint64_t changes;	     /* changes made (generation numbers) */
	size_t ndretry, cdretry;

	struct cache_txn *txn; /* running transaction, or NULL */
	struct unhold {
		struct patch *hold, *after;
	} * unholds; /* patch_unhold_after() pairs */
	size_t nunholds, cunholds;

	pthread_t flusher;
	/* flusher_full: the kick asks for a whole pass, as at the interval
	 * (a crowded block, block_crowded()), not for rounds while memory
	 * pressure lasts */
	bool flusher_running, flusher_stop, flusher_kick, flusher_full;

	struct cache_stats st;
	uint64_t st_dirty_waits;
};

/* Small accessors shared by the engine files. */
static inline uint32_t patch_nafters(const struct patch *p)
{
	return p->nafters;
}

static inline struct patch *patch_after(const struct patch *p, uint32_t i)
{
	return (p->flags & PF_AFTV) ? p->aft.v[i] : p->aft.one;
}

static inline uint32_t patch_off(const struct patch *p)
{
	return p->off;
}

static inline uint32_t patch_len(const struct patch *p)
{
	return (uint32_t)p->lenm1 + 1;
}

/* Undo bytes (undo.c): the shared zeros, packed or a plain copy. */
extern uint8_t zero_undo[65536];

static inline bool undo_shared(const struct patch *p)
{
	return p->undo == zero_undo;
}

/* Whether the patch keeps undo bytes: hard and NRB patches never do. */
static inline bool patch_has_undo(const struct patch *p)
{
	return p->type == PT_BYTE && !(p->flags & (PF_HARD | PF_NRB | PF_NOUNDO)) && p->undo;
}

/* Whether p, a soft byte patch of a block, has let its undo bytes go
 * (drop_undo()): it waits for nothing elsewhere, nor for anything of its
 * block that a write of the block may leave out, so it is in every write
 * of its block, and it never gains a before that could keep it out. */
static inline bool patch_undo_dropped(const struct patch *p)
{
	return p->block && p->type == PT_BYTE &&
	       !(p->flags & (PF_HARD | PF_NRB | PF_NOUNDO | PF_COMMITTED)) && !p->undo;
}

/* Whether every write of p's block carries p: a hard patch, an NRB one
 * (nothing of its block is written without it) or one without undo. */
static inline bool patch_in_every_write(const struct patch *p)
{
	return (p->flags & (PF_HARD | PF_NRB)) || patch_undo_dropped(p);
}

/* Whether p is a bit patch over several words, with a mask array
 * (make_change() merges a flip into a bit patch of a nearby word). */
static inline bool patch_has_masks(const struct patch *p)
{
	return p->type == PT_BIT && !(p->flags & PF_HARD) && p->lenm1 > 3;
}

/* The bits soft bit patch p flips in the word at off (0 outside its
 * range). */
static inline uint32_t patch_bit_mask(const struct patch *p, uint32_t off)
{
	if (off < p->off || off - p->off > p->lenm1)
		return 0;
	return p->lenm1 == 3 ? p->mask : p->masks[(off - p->off) / 4];
}

/* Allocated and not yet committed. */
static inline bool patch_live(const struct patch *p)
{
	return (p->flags & PF_ALLOC) && !(p->flags & PF_COMMITTED);
}

/* Patch helpers shared by patch.c and discard.c. */
static inline void set_range(struct patch *p, uint32_t off, uint32_t len)
{
	p->off = (uint16_t)off;
	p->lenm1 = (uint16_t)(len - 1);
}

/* The 64ths of a block of size bs that [off, off+len) touches. */
static inline uint64_t chunk_mask(uint32_t bs, uint32_t off, uint32_t len)
{
	uint32_t chunk = bs / 64, first = off / chunk, last = (off + len - 1) / chunk;

	if (last - first >= 63)
		return ~0ull;
	return ((2ull << (last - first)) - 1) << first;
}

static inline uint64_t pmask(const struct cache *c, const struct patch *p)
{
	return chunk_mask(c->bs, p->off, (uint32_t)p->lenm1 + 1);
}

static inline enum patch_cell patch_cell(const struct patch *p)
{
	return (p->flags & PF_SMALL)	? CELL_EMPTY
	       : (p->flags & PF_MID)	? CELL_HARD
	       : (p->flags & PF_NOUNDO) ? CELL_NRB
					: CELL_FULL;
}

/* npend_blk, which empty and hard patches have not (always 0). */
static inline uint32_t patch_npend_blk(const struct patch *p)
{
	return p->block && !(p->flags & PF_HARD) ? p->npend_blk : 0;
}

static inline bool is_root(const struct patch *p)
{
	return p->npend_ext == 0 && patch_npend_blk(p) == 0;
}

static inline struct patch *last_after(const struct patch *d)
{
	return d->nafters ? patch_after(d, d->nafters - 1) : NULL;
}

/* Is t known to depend on d already?  Only d's newest afters are looked
 * at: enough for the common case, a run of changes made with the same
 * dependencies (a patchgroup's befores, say).  A transaction's hold has
 * an after for every change of the transaction, so for it the block's
 * record tells (struct cblock, jhold). */
static inline bool already_before(const struct patch *d, const struct patch *t)
{
	uint32_t i, n = d->nafters, lo = n > 8 ? n - 8 : 0;

	if (t->block && t->block->jhold == d->seq && t->seq >= t->block->jfrom)
		return true;

	for (i = n; i-- > lo;)
		if (patch_after(d, i) == t)
			return true;
	return false;
}

static inline bool overlaps(const struct patch *q, uint32_t off, uint32_t len)
{
	return q->off < off + len && off < q->off + patch_len(q);
}

/* A small set of patches: the dependencies of one new change. */
struct depset {
	struct patch **v;
	size_t n, cap;
	struct patch *inl[16];
};

/* cache.c */
/* The cached block blkno, or NULL; call with the cache lock held. */
struct cblock *cache_find_locked(struct cache *c, uint64_t blkno);
void cache_lock(struct cache *c, bool *taken);
void cache_unlock(struct cache *c, bool taken);
void ready_update(struct cache *c, struct cblock *b);
void ready_requeue(struct cache *c, struct cblock *b);
void block_became_dirty(struct cache *c, struct cblock *b);
void block_crowded(struct cache *c);
void block_became_clean(struct cache *c, struct cblock *b);
void stats_engine(struct cache *c, int64_t delta);
/* Take a clean, unreferenced block out of the cache. */
void block_drop(struct cache *c, struct cblock *b);
/* Whether this thread holds c's lock re-entered (see cache_lock()). */
bool cache_reentered(const struct cache *c);
/* Drop the lock for I/O and take it back; only the thread that took it
 * with cache_lock() and holds it once (not re-entered) may do this. */
void io_unlock(struct cache *c);
void io_lock(struct cache *c);
void lru_add(struct cache *c, struct cblock *b);
/* A clean block nothing uses or waits on. */
bool idle_clean(const struct cblock *b);
/* Evict idle clean blocks while the cache is over its size. */
void evict(struct cache *c);

/* Whether memory pressure calls for a round now: once more than half the
 * dirty limit is dirty and a quarter of the limit can be written, or at
 * three quarters whatever can.  Between the two the flusher lets the
 * writable blocks gather, so that rounds grow in size rather than in
 * number (a round of the few blocks that became writable during the last
 * one costs a barrier for little). */
static inline bool flush_pressed(const struct cache *c)
{
	size_t l = c->opts.dirty_limit;

	return c->ndirty >= l - l / 4 || (c->ndirty > l / 2 && c->nready >= l / 4);
}

/* Block buffers are aligned to the smaller of this and the block size. */
#define DATA_ALIGN 4096

/* cache.c */
#define CHUNK_BYTES ((size_t)2 << 20)
/* len bytes (a multiple of CHUNK_BYTES) of zeroed memory aligned to
 * CHUNK_BYTES, offered for huge pages; NULL if it cannot be mapped.  Freed
 * with munmap(). */
uint8_t *chunk_map(size_t len);

/* round.c */
/* Write one round of the blocks with patches older than limit (the lock
 * held, not re-entered; -EDEADLK if it is). */
int round_locked(struct cache *c, size_t *nwritten, uint64_t limit);
/* Free a round's scratch memory, its copies' mapping too (cache_destroy). */
void round_scratch_free(struct cache *c);

/* patch.c */
void patch_commit(struct cache *c, struct patch *p);
/* Mark p committed and release what waits for it (the cache lock held). */
void commit_one(struct cache *c, struct patch *p);
/* Make room in d for one more after. */
int reserve_after(struct cache *c, struct patch *d);
void free_undo(struct cache *c, struct patch *p);
/* Undo for the len bytes at d, counted in undo_bytes and engine memory;
 * NULL when out of memory. */
uint8_t *undo_take(struct cache *c, const uint8_t *d, uint32_t len);
/* p's undo becomes the len bytes at w, the old bytes of the range p is
 * about to take (assembled by the caller, freed here); 0, or -ENOMEM with
 * p as it was.  Call before set_range(): the old undo's size is p's. */
int undo_replace(struct cache *c, struct patch *p, uint8_t *w, uint32_t len);
/* Write p's undo bytes (patch_len(p) of them) to out. */
void undo_read(const struct patch *p, uint8_t *out);
/* The memory p's undo holds: 0 for none and for the shared zeros. */
size_t undo_size(const struct patch *p);
/* Free undo u, not counted (the counts are the caller's). */
void undo_release(uint8_t *u);
void free_masks(struct cache *c, struct patch *p);
/* Take p out of the per-kind patch counts. */
void uncount_kind(struct cache *c, const struct patch *p);
void depset_init(struct depset *s);
/* Append p to s without the membership mark depset_add() uses. */
int plainset_add(struct depset *s, struct patch *p);
/* After a round committed patches of b, done[0..ndone) and no others:
 * drop them from its list (freeing those nobody references). */
void block_prune_committed(struct cache *c, struct cblock *b, struct patch *const *done,
			   size_t ndone);
void patch_free_all(struct cache *c);
/* Free b's overlap index (rebuilt when a change needs it). */
void ovix_free(struct cache *c, struct cblock *b);
/* The older soft patches of b that a change (type, off, len, mask) with
 * span [soff, soff+slen) must follow, into ov (a plain set), and in *cand
 * the newest soft patch overlapping [off, off+len) or NULL: through the
 * overlap index where it serves, by the whole list if linear (cache lock
 * held; make_change() and the tests). */
int same_block_befores(struct cache *c, struct cblock *b, enum patch_type type, uint32_t off,
		       uint32_t len, uint32_t mask, uint32_t soff, uint32_t slen, bool linear,
		       struct depset *ov, struct patch **cand);

/* discard.c: cache_discard() is declared in cache.h. */

#endif
