/* Engine introspection (lib/inspect sends it, fstitch-stat shows it): a consistent snapshot of the
 * patch engine, the block cache and the patchgroups of a running mount.
 *
 * A snapshot is taken under the cache lock (and, when groups are wanted,
 * the patchgroup engine lock first: the documented order) and copies out
 * only counters and at most `limit` entries of each list, so that a busy
 * mount stalls for bounded time.  The one exception is finding what a patch
 * waits for: the engine keeps only forward edges (before -> afters), so
 * INSP_PATCHES and INSP_WHY scan the live patches once per step; that is
 * bounded by `limit` steps and by a budget of patch slots scanned, and
 * documented in fstitch-stat(8).
 *
 * The snapshot is plain data (no pointers into the engine) so that the
 * daemon can send it over the control socket (CTL_STATS) and the command
 * can render it (statfmt.h).  Patches are named by their sequence number,
 * which is unique among live patches.
 *
 * Return values: 0 or -errno; outputs written only on success.
 */
#ifndef FSTITCH_SNAPSHOT_H
#define FSTITCH_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>
#include "cache.h"

struct pgeng;

/* What the snapshot holds besides the summary (always present). */
enum insp_view {
	INSP_SUMMARY = 0,
	INSP_BLOCKS = 1,  /* dirty blocks, oldest dirtied first */
	INSP_GROUPS = 2,  /* patchgroups, newest first */
	INSP_PATCHES = 3, /* the patches of one block and what each waits for */
	INSP_WHY = 4,	  /* the chain keeping one block from being written */
	INSP_GRAPH = 5,	  /* dirty blocks' patches, group patches and the edges
			   * among them (for Graphviz) */
	INSP_VIEW_MAX
};

#define INSP_LIMIT_DEFAULT 64
#define INSP_LIMIT_MAX	   100000

struct insp_query {
	uint32_t view;	/* enum insp_view */
	uint32_t limit; /* most entries per list; 0: INSP_LIMIT_DEFAULT */
	uint64_t block; /* INSP_PATCHES, INSP_WHY */
};

struct insp_summary {
	struct cache_stats st;
	uint64_t patches_pending; /* created and not yet committed */
	uint64_t dirty_waits;	  /* times a writer waited for the flusher */
	uint64_t max_blocks, dirty_limit;
	uint64_t oldest_dirty_ms; /* age of the oldest dirty block; 0 if none */
	uint64_t groups_known, groups_open, groups_engaged, groups_sealed, groups_closed;
	uint64_t groups_counted; /* groups the counts above cover (<= known) */
	uint32_t block_size;
	uint32_t consistency; /* enum consistency */
	uint32_t flush_interval_ms;
	uint32_t round_busy;  /* a round is being written right now */
	uint32_t have_groups; /* the mount serves patchgroups */
	uint32_t reserved;
	uint64_t age_ms;       /* since the cache was made (the mount started):
				* the counters above are totals over it */
	struct bdev_stats dev; /* the device under the cache */
	uint32_t have_txn;     /* a journal runs transactions: txn is valid */
	uint32_t reserved2;
	struct cache_txn_stats txn;
};

enum insp_block_flags {
	INSP_B_READY = 1 << 0,	  /* on the ready list */
	INSP_B_INFLIGHT = 1 << 1, /* being written by the current round */
	INSP_B_PARTIAL = 1 << 2,  /* more patches than were looked at */
};

struct insp_block {
	uint64_t blkno;
	uint64_t age_ms; /* since it became dirty */
	uint64_t undo_bytes;
	uint32_t npatches;
	uint32_t nready; /* patches with no unwritten dependency */
	uint32_t nhard;
	uint32_t flags; /* enum insp_block_flags */
};

enum insp_patch_type { INSP_P_BYTE = 0, INSP_P_BIT = 1, INSP_P_EMPTY = 2 };

enum insp_patch_flags {
	INSP_P_HARD = 1 << 0,
	INSP_P_HELD = 1 << 1, /* held empty patch: commits only when let go */
	INSP_P_INFLIGHT = 1 << 2,
	INSP_P_COMMITTED = 1 << 3,
	INSP_P_TARGET = 1 << 4, /* belongs to the block asked about */
};

enum insp_role { INSP_R_NONE = 0, INSP_R_HEAD = 1, INSP_R_TAIL = 2 };

struct insp_patch {
	uint64_t seq;	/* its name */
	uint64_t blkno; /* UINT64_MAX for an empty patch */
	int64_t group;	/* the group it stands for (role), or 0 */
	uint32_t type;	/* enum insp_patch_type */
	uint32_t flags; /* enum insp_patch_flags */
	uint32_t off, len;
	uint32_t undo_bytes;
	uint32_t npend_ext; /* unwritten dependencies on other blocks */
	uint32_t npend_blk; /* ... and on its own block */
	uint32_t nafters;
	uint32_t role; /* enum insp_role */
	uint32_t kind; /* enum cblock_kind of its block */
};

/* after waits for before (both by sequence number). */
struct insp_edge {
	uint64_t before, after;
};

struct insp_group {
	int64_t id;
	uint64_t nchanges; /* changes made in it so far */
	uint64_t pending;  /* of those (and its befores' tails), not durable */
	uint64_t head_seq, tail_seq;
	uint32_t owner;
	uint32_t state; /* enum pg_state bits */
	uint32_t engaged;
	uint32_t nbefores, nafters;
	uint32_t head_held, tail_held;
	uint32_t reserved;
};

/* How a why-chain ends. */
enum insp_why_end {
	INSP_WHY_CLEAN = 0, /* the block has nothing to write */
	INSP_WHY_READY,	    /* every patch is writable: next round takes it */
	INSP_WHY_INFLIGHT,  /* it is being written right now */
	INSP_WHY_HELD,	    /* the last patch is held (an open patchgroup or
			     * ordering chain) */
	INSP_WHY_WRITE,	    /* the last patch is writable: its block goes in
			     * the next round, and then this one can */
	INSP_WHY_DEPTH,	    /* the chain is longer than the limit (or than
			     * 16 million patch slots of scanning) */
	INSP_WHY_LOST,	    /* a counted dependency was not found (a bug) */
	INSP_WHY_MAX
};

enum insp_snap_flags {
	INSP_S_TRUNCATED = 1 << 0, /* a list was cut at the limit */
	INSP_S_XATTR = 1 << 1,	   /* the block asked about is an attribute block */
};

struct insp_snap {
	uint32_t view;
	uint32_t flags; /* enum insp_snap_flags */
	uint64_t block; /* the block asked about */
	uint32_t limit;
	uint32_t why_end; /* enum insp_why_end (INSP_WHY) */
	struct insp_summary sum;
	/* INSP_BLOCKS, INSP_GRAPH (the blocks shown) */
	struct insp_block *blocks;
	size_t nblocks;
	/* INSP_GROUPS, INSP_GRAPH */
	struct insp_group *groups;
	size_t ngroups;
	/* INSP_PATCHES: the block's patches (INSP_P_TARGET), then the other
	 * patches they wait for.  INSP_WHY: the chain, in order, each waiting
	 * for the next.  INSP_GRAPH: every node. */
	struct insp_patch *patches;
	size_t npatches;
	struct insp_edge *edges;
	size_t nedges;
};

/* Take a snapshot of cache c (and of the groups of e, which may be NULL).
 * -EINVAL for a bad query, -ENXIO for INSP_PATCHES or INSP_WHY of a block
 * past the end of the device, -ENOMEM.  The caller frees *out with
 * inspect_free(). */
int inspect_take(struct cache *c, struct pgeng *e, const struct insp_query *q,
		 struct insp_snap **out);
void inspect_free(struct insp_snap *s);

#endif
