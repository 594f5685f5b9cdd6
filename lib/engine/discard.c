/* Discarding a dead block's patches (design.md §3): when a freed block's
 * contents no longer matter, its pending patches need not reach disk.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "cache_int.h"

/* Checks of empty patches one cache_discard() may make: a dead data block
 * has a handful of dependents, and a long chain of empty patches is better
 * left alone than walked. */
#define DISCARD_BUDGET 64
#define DISCARD_DEPTH  8
#define DISCARD_ABSORB 8   /* patches folded into `clear` at most */
#define DISCARD_RETRY  256 /* blocks remembered for another try */

struct dctx {
	struct cblock *b; /* the dead block */
	struct patch *clear;
	struct patch *absorb[DISCARD_ABSORB];
	size_t nabsorb;
	uint32_t lo, hi; /* clear's range widened over them */
	int budget;
	bool txn; /* clear joined a transaction: see after_ok() */
};

static bool after_ok(struct dctx *d, struct patch *a, int depth, bool may_absorb);

/* May x (a patch on clear's block that waits for the dead block) have its
 * bytes folded into clear, so that they reach disk only together with it?
 * It must not be on disk yet, must overlap clear (its bytes are those
 * clear supersedes: the dead file's pointers, size, times), and everything
 * that waits for it must pass after_ok() itself. */
static bool absorbable(struct dctx *d, struct patch *x, int depth)
{
	struct patch *cl = d->clear;
	uint32_t i;

	if (!cl || cl->block != x->block || x->seq >= cl->seq || x->type != PT_BYTE ||
	    !patch_has_undo(x) ||
	    (x->flags & (PF_INFLIGHT | PF_WRITTEN | PF_PINNED | PF_HARD | PF_NRB)) ||
	    !overlaps(x, cl->off, patch_len(cl)))
		return false;
	for (i = 0; i < d->nabsorb; i++)
		if (d->absorb[i] == x)
			return true;
	if (d->nabsorb == DISCARD_ABSORB)
		return false;
	for (i = 0; i < x->nafters; i++)
		if (!after_ok(d, patch_after(x, i), depth + 1, false))
			return false;
	d->absorb[d->nabsorb++] = x;
	return true;
}

/* May a, which waits (directly or through empty patches) for a patch of the
 * dead block, do without that patch's bytes on disk?  Yes for another
 * patch of the block, for `clear` (which removes the last pointer to it:
 * whatever clear writes cannot show the block's bytes), for a patch whose
 * bytes can move into clear (absorbable()), and for an empty patch that
 * stands for nothing but such patches.  A held or pinned one stands for a
 * patchgroup, whose later changes were promised these bytes first: no.
 * Except a pinned one (not held) when clear joined a running transaction
 * (d->txn): a change that comes to wait for it later waits for a held
 * patch, so it is one of that transaction or a later one (the promise of
 * cache_txn's join()), which no crash state shows without clear.  (What
 * waits for it now is walked as for any empty patch; a commit block that
 * waits for the data is not empty, so data whose commit has begun stays.) */
static bool after_ok(struct dctx *d, struct patch *a, int depth, bool may_absorb)
{
	uint32_t i;

	if (a->block == d->b || a == d->clear)
		return true;
	if (depth >= DISCARD_DEPTH || --d->budget < 0)
		return false;
	if (a->type != PT_EMPTY)
		return may_absorb && absorbable(d, a, depth);
	if ((a->flags & PF_HELD) || ((a->flags & PF_PINNED) && !d->txn))
		return false;
	for (i = 0; i < a->nafters; i++)
		if (!after_ok(d, patch_after(a, i), depth + 1, may_absorb))
			return false;
	return true;
}

static bool discardable(struct dctx *d)
{
	struct cblock *b = d->b, *cb = d->clear ? d->clear->block : NULL;
	struct patch *p, *cl = d->clear;
	uint64_t low = UINT64_MAX;
	uint32_t i;

	if (b->refs || (b->flags & (BF_INFLIGHT | BF_READING | BF_BADREAD)) || !b->phead || cb == b)
		return false;
	for (p = b->phead; p; p = p->bnext) {
		/* in flight or written by a failed round: may be on disk;
		 * pinned: waits for a held patch (a patchgroup's, or the
		 * transaction's whose log will hold the block) */
		if (p->flags & (PF_INFLIGHT | PF_WRITTEN | PF_PINNED))
			return false;
		for (i = 0; i < p->nafters; i++)
			if (!after_ok(d, patch_after(p, i), 0, true))
				return false;
	}
	if (!d->nabsorb)
		return true;
	/* clear will carry the absorbed bytes: it must keep undo data, and
	 * its block must not be in a round right now. */
	if (cl->type != PT_BYTE || !patch_has_undo(cl) || (cb->flags & BF_INFLIGHT) ||
	    (cl->flags & (PF_INFLIGHT | PF_WRITTEN | PF_HARD | PF_NRB)))
		return false;
	d->lo = cl->off;
	d->hi = cl->off + patch_len(cl);
	for (i = 0; i < d->nabsorb; i++) {
		struct patch *x = d->absorb[i];

		if (x->seq < low)
			low = x->seq;
		if (x->off < d->lo)
			d->lo = x->off;
		if (x->off + patch_len(x) > d->hi)
			d->hi = x->off + patch_len(x);
	}
	/* Rolling back the merged clear must restore the whole span to what
	 * it was before the oldest absorbed patch: nothing else newer than
	 * that may touch the span.  (Older patches are rolled back after it
	 * and see their own bytes again.) */
	for (p = cb->phead; p; p = p->bnext) {
		bool mine = p == cl;

		for (i = 0; i < d->nabsorb && !mine; i++)
			mine = p == d->absorb[i];
		if (!mine && !(p->flags & PF_HARD) && p->seq > low &&
		    overlaps(p, d->lo, d->hi - d->lo))
			return false;
	}
	return true;
}

/* Turn block patch p into an empty patch with the same edges. */
static void make_empty_patch(struct cache *c, struct patch *p)
{
	free_undo(c, p);
	free_masks(c, p);
	uncount_kind(c, p);
	c->st.patches_empty++;
	/* Edges from the block's other patches count as edges from
	 * elsewhere now: commit_one() of an empty patch decrements that. */
	p->npend_ext += patch_npend_blk(p);
	if (patch_cell(p) == CELL_FULL)
		p->undo = NULL;
	if (patch_cell(p) == CELL_FULL || patch_cell(p) == CELL_NRB) {
		p->npend_blk = 0;
		p->off = 0;
		p->lenm1 = 0;
	}
	p->flags &= ~(PF_HARD | PF_NRB | PF_BLOCKED);
	p->type = PT_EMPTY;
	p->block = NULL;
	c->st.patches_discarded++;
}

/* Fold the absorbed patches' bytes into clear: one undo over the span
 * discardable() measured (d->lo, d->hi), from
 * the current bytes (the gaps, which nothing newer touches), clear's undo,
 * then each absorbed undo, newest first, so the oldest state wins.  Each
 * absorbed patch becomes an empty patch that clear waits for.  Room for
 * those edges was reserved. */
static int absorb_all(struct cache *c, struct dctx *d)
{
	struct patch *cl = d->clear, *x, **pp;
	struct cblock *cb = cl->block;
	uint32_t lo = d->lo, hi = d->hi;
	size_t i, j;
	uint8_t *w;

	w = malloc(hi - lo);
	if (!w)
		return -ENOMEM;
	memcpy(w, cb->data + lo, hi - lo);
	undo_read(cl, w + (cl->off - lo));
	/* newest first (insertion sort by seq, descending: a handful) */
	for (i = 1; i < d->nabsorb; i++)
		for (j = i; j > 0 && d->absorb[j - 1]->seq < d->absorb[j]->seq; j--) {
			x = d->absorb[j];
			d->absorb[j] = d->absorb[j - 1];
			d->absorb[j - 1] = x;
		}
	for (i = 0; i < d->nabsorb; i++) {
		x = d->absorb[i];
		undo_read(x, w + (x->off - lo));
	}
	if (undo_replace(c, cl, w, hi - lo))
		return -ENOMEM;
	set_range(cl, lo, hi - lo);
	cb->ovmask |= pmask(c, cl);
	/* (rare: the next change that wants the index builds it again) */
	ovix_free(c, cb);
	for (i = 0; i < d->nabsorb; i++) {
		x = d->absorb[i];
		for (pp = &cb->phead; *pp != x; pp = &(*pp)->bnext)
			;
		*pp = x->bnext; /* (older than clear: never the tail) */
		x->bnext = NULL;
		cb->npatches--;
		if (is_root(x))
			cb->nroots--;
		/* clear counted x as a before on its own block */
		for (j = 0; j < x->nafters; j++) {
			struct patch *a = patch_after(x, j);

			if (a->block == cb) {
				a->npend_blk--;
				a->npend_ext++;
			}
		}
		make_empty_patch(c, x);
		if (!already_before(x, cl) && last_after(x) != cl) {
			/* (reserved in cache_discard) */
			if (x->flags & PF_AFTV)
				x->aft.v[x->nafters] = cl;
			else
				x->aft.one = cl;
			x->nafters++;
			cl->npend_ext++;
		}
	}
	return 0;
}

/* Commit the converted patches that wait for nothing (as empty patches
 * they stand for nothing left to write), then drop the extra references
 * that kept them alive while the list still linked them. */
static void settle(struct cache *c, struct patch **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!(v[i]->flags & PF_COMMITTED) && is_root(v[i]))
			patch_commit(c, v[i]);
	for (i = 0; i < n; i++)
		patch_release(c, v[i]);
}

static int discard_one(struct cache *c, struct cblock *b, struct patch *clear)
{
	struct dctx d = {.clear = clear, .budget = DISCARD_BUDGET};
	struct patch *p, *next, *list;
	struct depset keep;
	size_t i;
	int ret = 0;

	if (!b)
		return 0;
	d.b = b;
	/* (a change that waits for a held patch joins: clear's hold is
	 * the running transaction's or an earlier one's) */
	d.txn = c->txn && (clear->flags & PF_PINNED);
	if (!discardable(&d))
		return 0;
	depset_init(&keep);
	for (i = 0; i < d.nabsorb; i++)
		if (!already_before(d.absorb[i], clear) && reserve_after(c, d.absorb[i]))
			goto out;
	/* (the keep list is sized before anything changes) */
	for (p = b->phead; p; p = p->bnext)
		if (plainset_add(&keep, p))
			goto out;
	for (i = 0; i < d.nabsorb; i++)
		if (plainset_add(&keep, d.absorb[i]))
			goto out;
	if (d.nabsorb) {
		if (absorb_all(c, &d))
			goto out;
		ready_update(c, clear->block);
	}
	list = b->phead;
	b->phead = b->ptail = NULL;
	b->hard = b->nrb = NULL;
	b->npatches = 0;
	b->nroots = 0;
	b->ovmask = 0;
	ovix_free(c, b);
	b->defers = 0;
	for (p = list; p; p = next) {
		next = p->bnext;
		p->bnext = NULL;
		make_empty_patch(c, p);
	}
	/* a reference each, so that committing one cannot free another
	 * still to be looked at */
	for (i = 0; i < keep.n; i++)
		patch_retain(keep.v[i]);
	settle(c, keep.v, keep.n);
	block_became_clean(c, b);
	ready_update(c, b);
	/* The cached bytes were never written: forget them. */
	block_drop(c, b);
	c->st.blocks_discarded++;
	ret = 1;
out:
	if (keep.v != keep.inl)
		free(keep.v);
	return ret;
}

/* Blocks whose discard failed wait for another try with the same clear:
 * one freed early (a file's direct blocks) can become discardable once
 * another is gone (the indirect block whose pointer patch waited for it). */
static void retry_reset(struct cache *c, struct patch *clear)
{
	struct patch *old = c->dclear;

	c->ndretry = 0;
	c->dclear = clear;
	patch_retain(clear);
	patch_release(c, old);
}

static void retry_push(struct cache *c, struct cblock *b)
{
	if (!b)
		return;
	if (c->ndretry == c->cdretry) {
		size_t cap = c->cdretry ? c->cdretry * 2 : 16;
		struct dretry *v;

		if (cap > DISCARD_RETRY)
			return;
		v = realloc(c->dretry, cap * sizeof(*v));
		if (!v)
			return;
		c->dretry = v;
		c->cdretry = cap;
	}
	c->dretry[c->ndretry].blkno = b->blkno;
	c->dretry[c->ndretry].gen = b->gen;
	c->ndretry++;
}

int cache_discard(struct cache *c, uint64_t blkno, struct patch *clear)
{
	struct cblock *b;
	bool taken, progress;
	size_t i;
	int ret = 0;

	if (!c)
		return 0;
	cache_lock(c, &taken);
	if (c->opts.consistency == CONSISTENCY_NONE)
		goto out;
	/* A freed block that is clean holds what the disk holds, and nothing
	 * reads a freed block (a reuse initialises it): its buffer goes back
	 * for the next block at once, rather than stay on the clean list
	 * until the cache is full.  Under soft updates a freed block is not
	 * handed out again until its free is durable, so new blocks take new
	 * buffers: PostMark's cache grew to its limit, each new 2 MiB chunk
	 * a page fault the host fills with zeros.  (Not under a
	 * transaction, whose checkpoint may still write the block home.) */
	b = cache_find_locked(c, blkno);
	if (b && !c->txn && idle_clean(b) && !(b->flags & BF_READY)) {
		block_drop(c, b);
		goto out;
	}
	if (!clear || (clear->flags & PF_COMMITTED))
		goto out;
	if (clear != c->dclear)
		retry_reset(c, NULL);
	ret = discard_one(c, b, clear);
	if (!ret) {
		/* (discard_one() changes nothing when it fails: b is live) */
		if (!c->dclear)
			retry_reset(c, clear);
		retry_push(c, b);
		goto out;
	}
	do {
		progress = false;
		for (i = 0; i < c->ndretry;) {
			b = cache_find_locked(c, c->dretry[i].blkno);
			/* Changed since (reused, say): no longer ours to drop. */
			if (!b || b->gen != c->dretry[i].gen) {
				c->dretry[i] = c->dretry[--c->ndretry];
			} else if (discard_one(c, b, clear)) {
				c->dretry[i] = c->dretry[--c->ndretry];
				progress = true;
			} else {
				i++;
			}
		}
	} while (progress);
	if (!c->ndretry)
		retry_reset(c, NULL);
out:
	cache_unlock(c, taken);
	return ret;
}
