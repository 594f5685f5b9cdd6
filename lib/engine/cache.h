/* The patch engine and write-back block cache (design.md §3).
 *
 * Every change to a cached block is a patch: a byte range with undo bytes, a
 * bit flip in a 32-bit word, or (with no block) an empty patch that stands
 * for a set of other patches.  A patch's dependencies ("befores") are given
 * when it is created; a patch may reach disk only once all of them are
 * durable, i.e. written in a round whose barrier has returned.
 *
 * The cache writes in rounds: it picks blocks with ready patches, writes a
 * copy of each with its unready patches rolled back (the cached block itself
 * is never rolled back), issues one barrier, and only then marks the patches
 * of that round committed.  A failed write or barrier commits nothing.
 *
 * Thread safety: every function here takes the cache's internal lock itself,
 * so callers may use the cache from several threads.  Callers that need a
 * sequence of changes to be atomic (the ext2 module) serialise themselves
 * with a lock of their own.  Block data returned by cblock_data() changes
 * only through patch_create_*().
 *
 * Return values: 0 or -errno unless stated; outputs written only on success.
 */
#ifndef FSTITCH_CACHE_H
#define FSTITCH_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "bdev/bdev.h"

struct cache;
struct cblock;
struct patch;

enum consistency {
	CONSISTENCY_SOFTUPDATES = 0, /* dependencies are honoured */
	CONSISTENCY_NONE = 1,	     /* dependencies are ignored: no ordering */
	/* The JBD2 journal modes (the file system runs the transactions
	 * through cache_set_txn(); to the engine they are softupdates). */
	CONSISTENCY_JOURNAL = 2,      /* metadata journaling, data ordered */
	CONSISTENCY_JOURNAL_DATA = 3, /* every block journaled */
};

struct cache_opts {
	size_t max_blocks;	    /* cached blocks, clean and dirty; 0: 65536 */
	size_t dirty_limit;	    /* dirty blocks at which writers wait for the
				     * flusher; 0: max_blocks / 2 */
	unsigned flush_interval_ms; /* how long dirty data may wait before the
				     * background flusher writes it; 0: 5000 */
	size_t round_max_blocks;    /* most blocks written in one round; 0: 4096 */
	enum consistency consistency;
};

/* A block with this many patches not yet on disk wakes the running flusher
 * for a whole pass, as at the interval (not under a journal). */
#define CACHE_CROWD_PATCHES 1024

/* Create a cache over dev (the caller still owns dev and destroys it after
 * cache_destroy).  No background thread runs until cache_start_flusher().
 * -EINVAL for a block size above 64 KiB. */
int cache_create(struct bdev *dev, const struct cache_opts *opts, struct cache **out);
/* Stop the flusher and free everything.  Does NOT write dirty data: call
 * cache_sync() first.  Outstanding block and patch references become
 * invalid. */
void cache_destroy(struct cache *c);
struct bdev *cache_bdev(struct cache *c);
uint32_t cache_block_size(const struct cache *c);

/* Start / stop the background flusher thread. */
int cache_start_flusher(struct cache *c);
void cache_stop_flusher(struct cache *c);
/* Have the running flusher write everything writable now, as at its
 * interval, without waiting for it (a journal's commit timer: the commit
 * is then on disk within commit=, not within flush_interval).  Nothing
 * without a flusher. */
void cache_flush_soon(struct cache *c);

/* ---- blocks ------------------------------------------------------------ */

/* Get block blkno, reading it from the device if it is not cached, and take
 * a reference.  -EINVAL if blkno is beyond the device; -EIO etc. from the
 * device.  May wait for the flusher when too many blocks are dirty; -EIO
 * when they are and the last round failed to write (nothing can be
 * cleaned until the device takes writes again; what is dirty is kept). */
int cache_get(struct cache *c, uint64_t blkno, struct cblock **out);
/* As cache_get, but if the block is not cached it is NOT read: it appears
 * zero-filled.  For a block the caller is about to initialise in full (a
 * freshly allocated block): the caller must then cover the whole block with
 * a patch, because the on-disk contents are unknown. */
int cache_get_new(struct cache *c, uint64_t blkno, struct cblock **out);
/* As cache_get_new, for a block written once and not read again while
 * mounted (a journal's log): once clean and unreferenced it is the first
 * block the cache reuses, so a long log recycles a few buffers instead of
 * filling the cache with blocks nobody reads (and touching new memory for
 * each).  Getting the block any other way makes it an ordinary block. */
int cache_get_log(struct cache *c, uint64_t blkno, struct cblock **out);
/* Drop a reference.  Unreferenced clean blocks are evicted LRU. */
void cache_put(struct cache *c, struct cblock *b);
/* What a block is, for fstitch-stat to name it (the file system says;
 * cache_get_new forgets it).  Set on a block the caller holds. */
enum cblock_kind {
	CBK_NONE = 0,
	CBK_XATTR = 1, /* an ext2 extended-attribute block */
};
void cblock_set_kind(struct cblock *b, unsigned kind);
/* The cached contents (block_size bytes): read only. */
const uint8_t *cblock_data(const struct cblock *b);
uint64_t cblock_number(const struct cblock *b);

/* ---- patches ----------------------------------------------------------- */

/* A patchgroup scope, given to every byte and bit patch made on behalf of
 * a scoped operation (NULL: none): befores() may add dependencies (treated
 * exactly like the caller's deps), and created() is told which patch now
 * carries the change (new or merged into).  Both run under the cache lock
 * and may call only patch_add_depend(), patch_retain() and patch_release()
 * on the cache. */
struct patch_scope {
	size_t (*befores)(struct patch_scope *s, struct patch *const **deps);
	void (*created)(struct patch_scope *s, struct patch *p);
};

/* Create a patch that changes len bytes at off in b to data.  deps[0..ndeps)
 * are the patches it must wait for; NULL entries and committed patches are
 * ignored.  The engine adds the same-block ordering it needs by itself (a
 * patch overlapping an earlier uncommitted one depends on it).  The change
 * may merge into an existing patch instead of creating one (hard patches,
 * overlapping soft patches) when that provably creates no cycle.
 * scope (NULL: none) adds its befores to deps and is told of the patch.
 * If out is not NULL it receives a reference to the patch that now carries
 * the change; release it with patch_release().  -EINVAL on a bad range. */
int patch_create_byte(struct cache *c, struct cblock *b, uint32_t off, uint32_t len,
		      const void *data, struct patch *const *deps, size_t ndeps,
		      struct patch_scope *scope, struct patch **out);
/* As patch_create_byte, but the change is also ordered after every pending
 * change of b that overlaps [span_off, span_off+span_len), which contains
 * the change: for a change whose meaning depends on the bytes around it (a
 * directory entry's rec_len reaching over later entries must not reach
 * disk before the change that wrote the entry it now points to).  Only the
 * change's own bytes are written and kept as undo.  -EINVAL also if the
 * span does not contain the change. */
int patch_create_byte_span(struct cache *c, struct cblock *b, uint32_t off, uint32_t len,
			   const void *data, uint32_t span_off, uint32_t span_len,
			   struct patch *const *deps, size_t ndeps, struct patch_scope *scope,
			   struct patch **out);
/* Flip the bits set in xor_mask in the 32-bit little-endian word at byte
 * offset off (a multiple of 4).  Otherwise as patch_create_byte. */
int patch_create_bit(struct cache *c, struct cblock *b, uint32_t off, uint32_t xor_mask,
		     struct patch *const *deps, size_t ndeps, struct patch_scope *scope,
		     struct patch **out);
/* An empty patch: no block, commits as soon as all of deps are committed.
 * With no (uncommitted) deps it is committed at once.  out is required. */
int patch_create_empty(struct cache *c, struct patch *const *deps, size_t ndeps,
		       struct patch **out);
/* Add a dependency after the fact.  Allowed only where no cycle can form:
 * `after` must be an uncommitted empty patch that nothing depends on yet
 * (-EBUSY otherwise).  A NULL or committed `before` is a no-op. */
int patch_add_depend(struct cache *c, struct patch *after, struct patch *before);

/* A held empty patch is not committed, even when all its deps are durable,
 * until patch_unhold() (a patchgroup's tail while the group is open).  out is
 * required. */
int patch_create_empty_held(struct cache *c, struct patch *const *deps, size_t ndeps,
			    struct patch **out);
void patch_unhold(struct cache *c, struct patch *p);

/* Let the held patch `hold` go once p is durable (at once if it is).  The
 * caller keeps references to both until p is committed. */
int patch_unhold_after(struct cache *c, struct patch *hold, struct patch *p);

/* An empty patch over every change pending now on the blocks blknos[0..n)
 * (a block not cached has none).  out is required. */
int patch_create_empty_blocks(struct cache *c, const uint64_t *blknos, size_t n,
			      struct patch **out);
/* The same over only the changes newer than prev (made after it), and
 * prev itself; NULL: as patch_create_empty_blocks().  A chain of such
 * patches covers what each would cover alone, with as many edges as
 * there are changes rather than one per change for every link. */
int patch_create_empty_blocks_after(struct cache *c, const uint64_t *blknos, size_t n,
				    struct patch *prev, struct patch **out);

/* An empty patch over every change pending now on block blkno that
 * overlaps [off, off+len): what must be on disk for those bytes to read
 * as they do in memory, and every hard change of it (which keeps no
 * range).  out is required; -EINVAL on a bad range. */
int patch_create_empty_range(struct cache *c, uint64_t blkno, uint32_t off, uint32_t len,
			     struct patch **out);

/* A running transaction (the journal modes).  join() is asked, for every
 * byte or bit change of block blkno made after cache_set_txn(), whether
 * the change joins the running transaction: it returns the transaction's
 * held empty patch, which the change then depends on, or NULL.  pinned
 * says whether the change already waits for a held patch.  A change that
 * joins keeps only its waits on its own block and on the returned hold:
 * the transaction promises that when its hold goes, whatever the change
 * waited for on other blocks is durable or will be replayed from its log
 * until the change itself is durable (patch.c, txn_keep_own()).
 * outside() is told which patch carries a change that did not join.
 * unscoped() is asked first, before the change's dependencies are
 * gathered: if it returns true, the change leaves out its patch scope's
 * befores that wait for a held patch (a patchgroup's order over changes
 * that joined a transaction), so that a data change such a before alone
 * would pin can stay outside the transaction.  The transaction promises
 * that no crash state shows the change before a commit that comes after
 * every change made so far (a block the change initialises, allocated in
 * the running transaction, is reachable only through that transaction),
 * and that this commit waits for the change.  join() returns the hold
 * for every change with pinned set, but for the transaction's own writes,
 * which wait for no empty patch of others: cache_discard() relies on it (a
 * change that comes to wait for a held patch is one of the running
 * transaction or a later one).  All three run under the cache lock and may
 * call only patch_retain().  NULL: none. */
struct cache_txn_stats {
	uint64_t running_tid;	      /* the running transaction's number */
	uint64_t running_blocks;      /* blocks it has */
	uint64_t running_ordered;     /* data changes its commit will wait for */
	uint64_t committing;	      /* committed, commit block not yet durable */
	uint64_t held;		      /* commit durable, held for a later checkpoint */
	uint64_t checkpointing;	      /* let go home, not all written there yet */
	uint64_t checkpointed;	      /* all home, its log space not yet reused */
	uint64_t log_used, log_total; /* journal blocks */
	uint64_t commits, logged_blocks;
};
struct cache_txn {
	struct patch *(*join)(struct cache_txn *t, uint64_t blkno, bool pinned);
	void (*outside)(struct cache_txn *t, struct patch *p);
	bool (*unscoped)(struct cache_txn *t, uint64_t blkno);
	/* For inspection, under the cache lock (NULL: none). */
	void (*stats)(struct cache_txn *t, struct cache_txn_stats *out);
	/* Under the cache lock, from a writer: too much is dirty and nothing
	 * can be written, everything waiting for held transactions; let some
	 * go soon (NULL: none).  Must not take the file system's locks. */
	void (*pressure)(struct cache_txn *t);
	/* Under the cache lock: may changes that join on block blkno merge
	 * across a gap of a few hundred bytes (NULL: never)?  Only where no
	 * change outside the transactions will land: it would overlap the
	 * widened patch and so wait for the hold. */
	bool (*wide)(struct cache_txn *t, uint64_t blkno);
};
void cache_set_txn(struct cache *c, struct cache_txn *t);

/* Take another reference: only while holding one, or in a scope callback. */
void patch_retain(struct patch *p);
/* Drop a reference; NULL is a no-op. */
void patch_release(struct cache *c, struct patch *p);
/* True once the patch is durable (its round's barrier returned). */
bool patch_committed(const struct patch *p);
/* Where a block patch not yet durable lies: its block's number and its
 * range of bytes there (a bit patch: its 32-bit words), which grows when
 * later changes merge into it.  -ENOENT for a durable or empty patch. */
int patch_where(struct cache *c, const struct patch *p, uint64_t *blkno, uint32_t *off,
		uint32_t *len);

/* Block blkno's contents are dead once `clear` is durable: a file system
 * freed the block, and `clear` removed the last pointer to it.  If none of
 * the block's pending patches may be on disk yet or waits for a held patch,
 * and everything that waits for them is `clear` itself, another of the
 * block's patches, or an empty patch (neither held nor waiting for a held
 * patch; under a transaction that `clear` joined, not held) whose own
 * dependents pass the same test, they are discarded: each becomes an empty
 * patch, keeping its place in the dependency order (what waited for it now
 * waits only for what it waited for) but writing nothing, and the block
 * leaves the cache, so that it reads as what is on disk.  Since `clear`
 * removes the last pointer, no crash state can show the block's unwritten
 * contents through it.  A later reuse of the block must initialise it in
 * full after `clear` (as a reused block always must).  Returns 1 if
 * discarded; 0 if nothing was done (the block is not cached, clean,
 * referenced, in flight, was written in a failed round, may wait for a
 * held patch, or something else needs its data on disk), in which case it
 * is written as usual; never fails.  A clean block that nothing uses
 * leaves the cache (0 too: it had nothing to discard), whatever clear,
 * except under a transaction.  With CONSISTENCY_NONE nothing is
 * discarded (the baseline writes what ext2 mounted async would). */
int cache_discard(struct cache *c, uint64_t blkno, struct patch *clear);

/* ---- writing ----------------------------------------------------------- */

/* Run one round: write every block that has ready patches (up to
 * round_max_blocks), one barrier, commit.  (A block that would be written
 * with patches rolled back is put off for one round when everything they
 * wait for is written in this one, so that it goes once, whole.)
 * *nwritten (if not NULL) gets the number of block writes.  Waits if
 * another round is in flight.  On a write or barrier error nothing of the
 * round is committed and the error is returned. */
int cache_flush_round(struct cache *c, size_t *nwritten);
/* Rounds until nothing is dirty.  A block whose write would roll a patch
 * back is put off while the rounds have other blocks to write and no
 * other block waits for it, or putting it off a round leaves the sync no
 * longer (design.md §3): it may then go once, whole, after what it waits
 * for.
 * Returns the first error (and stops there), or -EAGAIN when what is left
 * dirty waits, directly or not, for a held empty patch, so that no round
 * can write it. */
int cache_sync(struct cache *c);
/* Rounds until p and everything it depends on are durable.  The rounds
 * write only patches older than p (all p can depend on), not everything
 * dirty.  For a held p: until everything it depends on is durable.
 * Errors as cache_sync(). */
int cache_sync_patch(struct cache *c, struct patch *p);
/* Have the device prepare the n ranges of count[i] blocks at blkno[i]
 * (bdev_prepare: blocks that read as zeros, which nothing cached may
 * write while this runs), then, if it wrote anything, issue one barrier,
 * counted as a round's.  Between rounds.  0 or -errno. */
int cache_prepare(struct cache *c, const uint64_t *blkno, const uint64_t *count, size_t n);

/* ---- counters ---------------------------------------------------------- */

struct cache_stats {
	uint64_t blocks_cached, blocks_dirty, blocks_inflight, blocks_ready;
	uint64_t patches_byte, patches_bit, patches_empty; /* live */
	uint64_t patches_hard, patches_soft;		   /* live */
	uint64_t undo_bytes;				   /* undo data held */
	uint64_t engine_bytes; /* patch structures + undo + dependency edges */
	uint64_t dirty_bytes;  /* blocks_dirty * block_size */
	uint64_t patches_created, patches_merged, patches_committed;
	uint64_t rounds, barriers, block_writes, rollback_writes;
	uint64_t write_errors, barrier_errors;
	uint64_t peak_engine_bytes, peak_dirty_bytes;
	uint64_t patches_nrb;	    /* live soft patches without undo (counted in
				     * patches_soft too): see cache_int.h */
	uint64_t dirty_waits;	    /* times a writer waited for the flusher */
	uint64_t blocks_discarded;  /* cache_discard() calls that dropped a block */
	uint64_t patches_discarded; /* block patches they turned into empty ones */
	uint64_t undo_dropped;	    /* soft byte patches that let their undo go,
				     * or took none, as no write of their block
				     * could leave them out */
};
void cache_get_stats(struct cache *c, struct cache_stats *st);
/* The rounds that have committed so far (stats.barriers): while it stays
 * the same, no patch has reached disk. */
uint64_t cache_commits(struct cache *c);

#endif
