/* ext2: block and inode allocation in the bitmaps.
 *
 * Setting a bit needs no dependency (a leaked block is benign); clearing one
 * waits for the patch that removed the last pointer to it.  A freed block is
 * remembered with that patch until it commits, so that reusing the block
 * cannot overwrite it on disk while the old owner still points at it.
 *
 * As in BSD soft updates, a block or inode whose free is not yet durable is
 * handed out again only when nothing else is free.  Reusing it at once is
 * correct (the new contents wait for the old pointer's removal) but chains
 * every new file behind the previous one's deletion: a round per update at
 * the next flush, and the reused block, still dirty with its old owner's
 * patches, needs undo data for a whole block.
 *
 * Under a journal the free is durable once its transaction's commit block
 * is, not when the cleared pointer reaches its home (the checkpoint).  As
 * in ext3, a block freed in the running transaction is not handed out
 * while any other is free: if the free were lost in a crash, its old owner
 * would still point at it, so new contents written in place would have to
 * wait for the commit, and meanwhile they can only go through the log (a
 * change that waits for the running transaction joins it).  A block freed
 * in a transaction whose commit is under way is handed out, its new
 * contents written home after that commit block; e2_jroom commits before
 * a write that needs blocks freed in the running transaction, so that
 * file data always goes home; only a block needed in the middle of an
 * operation on a nearly full disk (a directory block, an indirect block)
 * may still come from the running transaction's frees, through the log. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "e2_int.h"

#define FREED_PRUNE 65536

/* How far a block's or inode's free is from durable: no record or durable;
 * pending (soft updates) or in a committing transaction (journal); freed
 * in the running transaction.  An allocation takes the nearest level it
 * can find. */
enum { FREE_DONE, FREE_PENDING, FREE_RUNNING };

static struct patch *bitclr_dep(struct e2fs *fs, uint64_t key);
static int freed_level(struct e2fs *fs, uint64_t key);
static bool freed_any(const struct e2fs *fs);
static int max_level(const struct e2fs *fs);

/* First bit in [start, end) that is zero in a bitmap and, unless also is
 * NULL, in also too; or end. */
static uint32_t find_zero(const uint8_t *map, const uint8_t *also, uint32_t start, uint32_t end)
{
	uint32_t i = start;

	while (i < end) {
		uint8_t m = map[i >> 3] | (also ? also[i >> 3] : 0);

		if ((i & 7) == 0 && m == 0xff) {
			i += 8;
			continue;
		}
		if (!(m & (1u << (i & 7))))
			return i;
		i++;
	}
	return end;
}

/* Start a search of gr in commit generation gen: what earlier searches
 * found pending (the memo's run and the map) is forgotten when the
 * generation has moved on.  Returns the map of the bits found pending, or
 * NULL without memory (the search then looks every free bit up, as it
 * would anyway). */
static uint8_t *pend_map(struct e2_group *gr, uint64_t gen)
{
	size_t n = (gr->nblocks + 7) / 8;

	if (gr->pend_gen != gen) {
		gr->pend_gen = gen;
		gr->pend_lo = gr->pend_hi = 0;
		if (gr->pmap)
			memset(gr->pmap, 0, n);
	}
	if (!gr->pmap)
		gr->pmap = calloc(1, n);
	return gr->pmap;
}

void e2_groups_free(struct e2fs *fs)
{
	for (uint32_t g = 0; fs->g && g < fs->ngroups; g++)
		free(fs->g[g].pmap);
	free(fs->g);
	fs->g = NULL;
}

/* Flip bit of bitmap block b (held) in one patch, after dep (NULL: none). */
static int flip_in(struct e2fs *fs, struct cblock *b, uint32_t bit, struct patch *dep,
		   struct patch **out)
{
	return patch_create_bit(fs->c, b, (bit / 32) * 4, 1u << (bit % 32), dep ? &dep : NULL,
				dep ? 1 : 0, fs->scope, out);
}

static int flip(struct e2fs *fs, uint32_t blk, uint32_t bit, struct patch *dep, struct patch **out)
{
	struct cblock *b;
	int r;

	r = cache_get(fs->c, blk, &b);
	if (r)
		return e2_err(fs, r, "cannot read bitmap block %u", blk);
	r = flip_in(fs, b, bit, dep, out);
	cache_put(fs->c, b);
	return r;
}

static int test_bit(struct e2fs *fs, uint32_t blk, uint32_t bit, bool *set)
{
	struct cblock *b;
	int r;

	r = cache_get(fs->c, blk, &b);
	if (r)
		return e2_err(fs, r, "cannot read bitmap block %u", blk);
	*set = cblock_data(b)[bit >> 3] & (1u << (bit & 7));
	cache_put(fs->c, b);
	return 0;
}

bool e2_block_unused(struct e2fs *fs, uint32_t blk)
{
	const struct e2_group *gr;
	bool set;

	if (!e2_block_ok(fs, blk))
		return false;
	gr = &fs->g[(blk - fs->first_data) / fs->bpg];
	return !test_bit(fs, gr->block_bitmap, blk - gr->first, &set) && !set;
}

/* Search group g's block bitmap from bit `from`; 0 and *blk on success. */
static int balloc_group(struct e2fs *fs, uint32_t g, uint32_t from, int reuse, uint32_t *blk,
			struct patch **bit)
{
	struct e2_group *gr = &fs->g[g];
	struct cblock *b;
	uint32_t i, skipped = 0, run = UINT32_MAX;
	uint64_t gen = 0;
	uint8_t *pm = NULL;
	bool memo_ok, memo = false, whole = true;
	int r;

	if (!gr->free_blocks)
		return -ENOSPC;
	r = cache_get(fs->c, gr->block_bitmap, &b);
	if (r)
		return e2_err(fs, r, "cannot read block bitmap %u", gr->block_bitmap);
	/* Searches from many files' goals walked the same pending frees
	 * bit by bit: 337 looked up per block allocated on the quick
	 * PostMark.  A search remembers the bits it walked without finding
	 * a free that is not pending, and the next jumps over them, until a
	 * round commits (only then can a pending free become durable).
	 * Only for the search that wants durable frees.  Under a journal
	 * the frees of the running transaction pile up the same way until
	 * it commits (1500 looked up per block after 3000 atomic replaces
	 * between two flushes); there the memo also ends when a transaction
	 * starts to commit, the one change of a free's level that needs no
	 * round (it makes a free durable at once under the debug=reuseearly
	 * negative control). */
	memo_ok = reuse == FREE_DONE && reuse < max_level(fs);
	if (memo_ok) {
		gen = cache_commits(fs->c) + (e2_journaling(fs) ? e2_jtid(fs) : 0);
		/* Pending frees scattered through the group (files deleted
		 * here and there) make many runs, of which the memo holds one:
		 * every bit found pending is also marked in a map of the
		 * group's, which the search then skips a byte at a time. */
		pm = pend_map(gr, gen);
		memo = gr->pend_hi > gr->pend_lo;
	}
	for (int pass = 0; pass < 2; pass++) {
		uint32_t start = pass ? 0 : from, end = pass ? from : gr->nblocks;

		run = UINT32_MAX;
		for (i = find_zero(cblock_data(b), pm, start, end); i < end;
		     i = find_zero(cblock_data(b), pm, i + 1, end)) {
			if (!e2_block_ok(fs, gr->first + i))
				continue;
			if (memo && i >= gr->pend_lo && i < gr->pend_hi) {
				if (run == UINT32_MAX)
					run = i;
				i = (gr->pend_hi < end ? gr->pend_hi : end) - 1;
				continue;
			}
			if (reuse == max_level(fs) || freed_level(fs, gr->first + i) <= reuse) {
				if (memo_ok && run != UINT32_MAX && i - run > 1) {
					gr->pend_lo = run;
					gr->pend_hi = i;
				}
				goto found;
			}
			if (pm)
				pm[i >> 3] |= (uint8_t)(1u << (i & 7));
			if (run == UINT32_MAX)
				run = i;
			/* Many pending frees (after an rm -rf) must not make
			 * every allocation walk them: the hint moves past
			 * them (a later wrap-around finds them), and a search
			 * from a goal below the hint jumps to it. */
			if (i == gr->bhint) {
				gr->bhint = i + 1;
			} else if (++skipped >= 8 && i + 1 < gr->bhint && gr->bhint <= end) {
				i = gr->bhint - 1;
				run = UINT32_MAX;
				whole = false;
			}
		}
	}
	cache_put(fs->c, b);
	if (memo_ok && whole) {
		/* every free bit looked at was pending: the whole group,
		 * unless the hint skipped some */
		gr->pend_lo = 0;
		gr->pend_hi = gr->nblocks;
	}
	if (reuse < max_level(fs))
		return -ENOSPC;
	/* The count said there was room: it was wrong.  Believe the bitmap. */
	fs->free_blocks -= gr->free_blocks;
	gr->free_blocks = 0;
	return -ENOSPC;
found:
	r = flip_in(fs, b, i, bitclr_dep(fs, gr->first + i), bit);
	cache_put(fs->c, b);
	if (r)
		return r;
	if (i == gr->bhint)
		gr->bhint = i + 1;
	gr->free_blocks--;
	fs->free_blocks--;
	*blk = gr->first + i;
	return e2_gd_write(fs, g);
}

/* Whether the caller may take the blocks reserved for root, as Linux's
 * ext2 decides: root, the reserved user or group, or CAP_SYS_RESOURCE. */
static bool may_use_reserve(const struct e2fs *fs)
{
	const struct e2_caller *who = fs->caller;
	gid_t resgid = le16toh(fs->sb.s_def_resgid);

	if (!who || who->uid == 0 || who->uid == le16toh(fs->sb.s_def_resuid) ||
	    (resgid != 0 && who->gid == resgid))
		return true;
	return who->may_reserve && who->may_reserve(who, resgid);
}

/* Allocate a block near goal (0: no preference).  *bit gets the bitmap
 * patch, which the pointer to the block must depend on. */
int e2_balloc(struct e2fs *fs, uint32_t goal, uint32_t *blk, struct patch **bit)
{
	uint32_t g0 = 0, from;
	int r;

	if (!fs->free_blocks)
		return -ENOSPC;
	if (fs->free_blocks <= le32toh(fs->sb.s_r_blocks_count) && !may_use_reserve(fs))
		return -ENOSPC;
	if (goal >= fs->first_data && goal < fs->nblocks)
		g0 = (goal - fs->first_data) / fs->bpg;
	/* First only blocks whose free (if any) is durable, then any. */
	for (int reuse = freed_any(fs) ? FREE_DONE : max_level(fs); reuse <= max_level(fs);
	     reuse++) {
		for (uint32_t k = 0; k < fs->ngroups; k++) {
			uint32_t g = (g0 + k) % fs->ngroups;

			if (k == 0 && goal >= fs->first_data && goal < fs->nblocks)
				from = goal - fs->g[g].first;
			else
				from = fs->g[g].bhint;
			if (from >= fs->g[g].nblocks)
				from = 0;
			r = balloc_group(fs, g, from, reuse, blk, bit);
			if (r != -ENOSPC)
				return r;
		}
	}
	return -ENOSPC;
}

/* The key's low bits, as ihash() (e2_inode.c) and for the same reason:
 * an allocator walks neighbouring blocks and inodes. */
static size_t fhash(const struct e2fs *fs, uint64_t key)
{
	return (size_t)(key & (fs->fbuckets - 1));
}

static void freed_drop(struct e2fs *fs, struct e2_freed **pp)
{
	struct e2_freed *f = *pp;

	*pp = f->next;
	patch_release(fs->c, f->clear);
	patch_release(fs->c, f->bitclr);
	free(f);
	fs->fcount--;
}

static bool freed_done(struct e2fs *fs, struct e2_freed *f)
{
	struct patch *c;

	if (f->journal) /* (no writer any more: it committed everything) */
		return !e2_journaling(fs) || e2_jstate(fs, f->tid, &c) == E2_J_DONE;
	return (!f->clear || patch_committed(f->clear)) &&
	       (!f->bitclr || patch_committed(f->bitclr));
}

static void freed_prune(struct e2fs *fs)
{
	for (size_t i = 0; i < fs->fbuckets; i++) {
		struct e2_freed **pp = &fs->ftab[i];

		while (*pp) {
			if (freed_done(fs, *pp))
				freed_drop(fs, pp);
			else
				pp = &(*pp)->next;
		}
	}
}

static struct e2_freed *freed_find(struct e2fs *fs, uint64_t key)
{
	struct e2_freed **pp = &fs->ftab[fhash(fs, key)];

	for (; *pp; pp = &(*pp)->next) {
		if ((*pp)->key != key)
			continue;
		if (freed_done(fs, *pp)) {
			freed_drop(fs, pp);
			return NULL;
		}
		return *pp;
	}
	return NULL;
}

static struct patch *live(struct patch *p)
{
	return p && !patch_committed(p) ? p : NULL;
}

/* The patch a reused block's new contents must wait for, or NULL: the
 * removal of its last pointer, or under a journal the commit block of the
 * transaction that freed it (a change that waits for the running one
 * joins it). */
struct patch *e2_freed_dep(struct e2fs *fs, uint32_t blk)
{
	struct e2_freed *f = freed_find(fs, blk);
	struct patch *c = NULL;

	if (!f)
		return NULL;
	if (f->journal && e2_jstate(fs, f->tid, &c) != E2_J_RUNNING)
		return live(c);
	return live(f->clear);
}

/* May some free (block or inode) not be durable yet?  (Without ordering
 * nothing waits for a free, and reuse costs nothing: never.)  If not, the
 * allocators skip their first, reuse-avoiding pass. */
static bool freed_any(const struct e2fs *fs)
{
	return fs->opts.consistency != CONSISTENCY_NONE && fs->fcount;
}

static int max_level(const struct e2fs *fs)
{
	return e2_journaling(fs) ? FREE_RUNNING : FREE_PENDING;
}

static int freed_level(struct e2fs *fs, uint64_t key)
{
	struct e2_freed *f;
	struct patch *c;

	if (!freed_any(fs) || !(f = freed_find(fs, key)))
		return FREE_DONE;
	if (f->journal && e2_jstate(fs, f->tid, &c) == E2_J_RUNNING)
		return FREE_RUNNING;
	return FREE_PENDING;
}

/* The pending clear of a bit we are about to set again: setting it must be
 * ordered after the clear (a flip means "set" only on top of the clear). */
static struct patch *bitclr_dep(struct e2fs *fs, uint64_t key)
{
	struct e2_freed *f = freed_find(fs, key);

	return f ? live(f->bitclr) : NULL;
}

/* Find or make the record for key before the bit is flipped, so that
 * running out of memory fails the free instead of losing the ordering. */
static struct e2_freed *freed_slot(struct e2fs *fs, uint64_t key)
{
	struct e2_freed *f;

	if (fs->fcount >= FREED_PRUNE && fs->fcount >= fs->fprune_at) {
		freed_prune(fs);
		fs->fprune_at = fs->fcount * 2; /* amortised O(1) per free */
	}
	for (f = fs->ftab[fhash(fs, key)]; f; f = f->next)
		if (f->key == key)
			return f;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->key = key;
	f->next = fs->ftab[fhash(fs, key)];
	fs->ftab[fhash(fs, key)] = f;
	fs->fcount++;
	return f;
}

static void freed_fill(struct e2fs *fs, struct e2_freed *f, struct patch *clear,
		       struct patch *bitclr, bool blk)
{
	f->journal = e2_journaling(fs);
	if (f->journal)
		f->tid = blk ? e2_jfreed(fs) : e2_jtid(fs);
	clear = live(clear);
	bitclr = live(bitclr);
	if (clear)
		patch_retain(clear);
	if (bitclr)
		patch_retain(bitclr);
	patch_release(fs->c, f->clear);
	patch_release(fs->c, f->bitclr);
	f->clear = clear;
	f->bitclr = bitclr;
}

void e2_freed_destroy(struct e2fs *fs)
{
	if (!fs->ftab)
		return;
	for (size_t i = 0; i < fs->fbuckets; i++)
		while (fs->ftab[i])
			freed_drop(fs, &fs->ftab[i]);
	free(fs->ftab);
	fs->ftab = NULL;
}

int e2_bfree(struct e2fs *fs, uint32_t blk, struct patch *clear)
{
	struct e2_freed *f;
	struct patch *bp = NULL;
	struct e2_group *gr;
	uint32_t g, i;
	bool set;
	int r;

	if (!e2_block_ok(fs, blk))
		return e2_err(fs, -EIO, "freeing block %u: out of range", blk);
	g = (blk - fs->first_data) / fs->bpg;
	gr = &fs->g[g];
	i = blk - gr->first;
	r = test_bit(fs, gr->block_bitmap, i, &set);
	if (r)
		return r;
	if (!set)
		return e2_err(fs, -EIO, "block %u freed twice", blk);
	f = freed_slot(fs, blk);
	if (!f)
		return -ENOMEM;
	r = flip(fs, gr->block_bitmap, i, clear, &bp);
	if (r)
		return r;
	freed_fill(fs, f, clear, bp, true);
	patch_release(fs->c, bp);
	/* Contents that never reached disk need not: a file created and
	 * deleted before a flush writes no data (design.md §4).  The engine
	 * keeps them if anything but `clear` still needs them.  The crash
	 * test in tests/unit/test_engine_discard.c covers this over create /
	 * write / fsync / truncate / delete; it relies on e2_dir_remove's
	 * rec_len change being ordered over the removed entry's header
	 * (patch_create_byte_span). */
	cache_discard(fs->c, blk, clear);
	if (i < gr->bhint)
		gr->bhint = i;
	gr->free_blocks++;
	fs->free_blocks++;
	return e2_gd_write(fs, g);
}

/* The highest clear bit below end, or UINT32_MAX when there is none. */
static uint32_t find_zero_down(const uint8_t *map, uint32_t end)
{
	uint32_t i = end;

	while (i-- > 0) {
		if ((i & 7) == 7 && map[i >> 3] == 0xff) {
			i -= 7;
			continue;
		}
		if (!(map[i >> 3] & (1u << (i & 7))))
			return i;
	}
	return UINT32_MAX;
}

/* Whether the free inode ino may be handed out at reuse level `reuse`:
 * SLOT_HELD while the kernel still knows it by its old number, SLOT_LATER
 * while its free is not far enough along (freed_level()). */
enum slot { SLOT_TAKE, SLOT_HELD, SLOT_LATER };

static enum slot inode_slot(struct e2fs *fs, uint32_t ino, int reuse)
{
	if (e2_iheld_free(fs, ino))
		return SLOT_HELD;
	if (reuse == max_level(fs) || freed_level(fs, E2_FREED_INODE | ino) <= reuse)
		return SLOT_TAKE;
	return SLOT_LATER;
}

/* A group's files take inodes upwards from where the last one went (the
 * hint), its directories downwards from the top of the group.  Nested
 * directories made together then share inode table blocks with one
 * another rather than with the files in them: a new directory's inode
 * waits for its parent's count (e2_create.c), so a new tree's inodes go
 * out a block, not a level, a round; and the inode block of a new
 * directory's files is not the one that waits for the directory's own
 * block, whose entries wait for those files (which would have one of the
 * two written twice, a change rolled back).  The cost: a directory's
 * inode and its files' are in different blocks, one more read for a
 * cold lookup. */
static int ialloc_group(struct e2fs *fs, uint32_t g, bool dir, int reuse, uint32_t *ino,
			struct patch **bit)
{
	struct e2_group *gr = &fs->g[g];
	struct cblock *b;
	uint32_t i, start = gr->ihint;
	bool held = false;
	int r;

	if (!gr->free_inodes)
		return -ENOSPC;
	r = cache_get(fs->c, gr->inode_bitmap, &b);
	if (r)
		return e2_err(fs, r, "cannot read inode bitmap %u", gr->inode_bitmap);
	if (start >= fs->ipg)
		start = 0;
	for (i = fs->ipg; dir && (i = find_zero_down(cblock_data(b), i)) != UINT32_MAX;) {
		enum slot sl;

		if (g * fs->ipg + i + 1 < fs->first_ino)
			break;
		sl = inode_slot(fs, g * fs->ipg + i + 1, reuse);
		if (sl == SLOT_TAKE)
			goto take;
		held |= sl == SLOT_HELD;
	}
	for (int pass = 0; !dir && pass < 2; pass++) {
		uint32_t s = pass ? 0 : start, e = pass ? start : fs->ipg;

		for (i = find_zero(cblock_data(b), NULL, s, e); i < e;
		     i = find_zero(cblock_data(b), NULL, i + 1, e)) {
			enum slot sl;

			if (g * fs->ipg + i + 1 < fs->first_ino)
				continue;
			sl = inode_slot(fs, g * fs->ipg + i + 1, reuse);
			if (sl == SLOT_TAKE)
				goto found;
			if (sl == SLOT_HELD) {
				held = true;
				continue;
			}
			if (i == gr->ihint)
				gr->ihint = i + 1; /* as for blocks */
		}
	}
	cache_put(fs->c, b);
	/* (a number the kernel still holds is free all the same) */
	if (reuse < max_level(fs) || held)
		return -ENOSPC;
	fs->free_inodes -= gr->free_inodes;
	gr->free_inodes = 0;
	return -ENOSPC;
found:
	gr->ihint = i + 1;
take:
	r = flip_in(fs, b, i, bitclr_dep(fs, E2_FREED_INODE | (g * fs->ipg + i + 1)), bit);
	cache_put(fs->c, b);
	if (r)
		return r;
	gr->free_inodes--;
	fs->free_inodes--;
	if (dir)
		gr->used_dirs++;
	*ino = g * fs->ipg + i + 1;
	return e2_gd_write(fs, g);
}

/* The group a new directory goes in, for a parent in group pg.  Top-level
 * directories spread out: the group with the most free blocks, less its
 * directories, among those with at least average free inodes.  A deeper
 * one stays with its parent, in the first group from the parent's on
 * whose free inodes and blocks are no more than a quarter of a group
 * below the average and whose directories not too many above it, as
 * Linux's Orlov allocator does.  Kept together, a tree's inodes share
 * inode table blocks: a new tree's levels, each waiting for the count of
 * the level above, and a removed tree's, each waiting for the clear of
 * the level below, go out in fewer rounds, each block once. */
static uint32_t dir_group(const struct e2fs *fs, uint32_t parent, uint32_t pg)
{
	uint64_t avgi = fs->free_inodes / fs->ngroups, avgb = fs->free_blocks / fs->ngroups;
	uint64_t dirs = 0, maxdirs;
	uint32_t best = pg;
	int64_t bestv = -1;

	for (uint32_t g = 0; g < fs->ngroups; g++)
		dirs += fs->g[g].used_dirs;
	maxdirs = dirs / fs->ngroups + fs->ipg / 16;
	if (parent != E2_ROOT_INO) {
		for (uint32_t k = 0; k < fs->ngroups; k++) {
			const struct e2_group *gr = &fs->g[(pg + k) % fs->ngroups];

			if (gr->free_inodes && gr->used_dirs < maxdirs &&
			    gr->free_inodes + fs->ipg / 4 >= avgi &&
			    gr->free_blocks + fs->bpg / 4 >= avgb)
				return (pg + k) % fs->ngroups;
		}
	}
	for (uint32_t g = 0; g < fs->ngroups; g++) {
		const struct e2_group *gr = &fs->g[g];

		if (!gr->free_inodes || gr->free_inodes < avgi)
			continue;
		if ((int64_t)gr->free_blocks - gr->used_dirs > bestv) {
			bestv = (int64_t)gr->free_blocks - gr->used_dirs;
			best = g;
		}
	}
	return best;
}

/* Directories by dir_group(); files stay with their parent. */
int e2_ialloc(struct e2fs *fs, uint32_t parent, bool dir, uint32_t *ino, struct patch **bit)
{
	uint32_t g0 = (parent - 1) / fs->ipg;
	int r;

	if (!fs->free_inodes)
		return -ENOSPC;
	if (dir)
		g0 = dir_group(fs, parent, g0);
	for (int reuse = freed_any(fs) ? FREE_DONE : max_level(fs); reuse <= max_level(fs);
	     reuse++) {
		for (uint32_t k = 0; k < fs->ngroups; k++) {
			r = ialloc_group(fs, (g0 + k) % fs->ngroups, dir, reuse, ino, bit);
			if (r != -ENOSPC)
				return r;
		}
	}
	return -ENOSPC;
}

int e2_ifree_bit(struct e2fs *fs, uint32_t ino, bool dir, struct patch *clear)
{
	uint32_t g = (ino - 1) / fs->ipg, i = (ino - 1) % fs->ipg;
	struct e2_group *gr = &fs->g[g];
	struct e2_freed *f;
	struct patch *bp = NULL;
	bool set;
	int r;

	r = test_bit(fs, gr->inode_bitmap, i, &set);
	if (r)
		return r;
	if (!set)
		return e2_err(fs, -EIO, "inode %u freed twice", ino);
	f = freed_slot(fs, E2_FREED_INODE | ino);
	if (!f)
		return -ENOMEM;
	r = flip(fs, gr->inode_bitmap, i, clear, &bp);
	if (r)
		return r;
	freed_fill(fs, f, NULL, bp, false);
	patch_release(fs->c, bp);
	if (i < gr->ihint)
		gr->ihint = i;
	gr->free_inodes++;
	fs->free_inodes++;
	if (dir && gr->used_dirs)
		gr->used_dirs--;
	return e2_gd_write(fs, g);
}

/* Initialise a newly allocated block in full: its previous contents on disk
 * are unknown, and a reused block must wait for its old pointer to go. */
int e2_block_init(struct e2fs *fs, uint32_t blk, const void *data, struct e2_deps *deps,
		  struct patch **out)
{
	struct e2_deps local = {0};
	struct e2_deps *d = deps ? deps : &local;
	struct patch *fd = e2_freed_dep(fs, blk);
	struct cblock *b;
	int r;

	r = e2_deps_add(d, fd); /* borrowed: removed again below */
	if (r)
		return r;
	r = cache_get_new(fs->c, blk, &b);
	if (!r) {
		r = patch_create_byte(fs->c, b, 0, fs->bs, data, d->p, d->n, fs->scope, out);
		cache_put(fs->c, b);
	} else {
		r = e2_err(fs, r, "cannot get block %u", blk);
	}
	if (fd)
		d->n--;
	free(local.p);
	return r;
}
