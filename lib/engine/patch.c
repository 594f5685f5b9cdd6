/* Patches: creation, merging, dependencies and commit propagation
 * (design.md §3).  The invariants are listed in cache_int.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "cache_int.h"
#include "util/grow.h"

/* ---- allocation -------------------------------------------------------- */

/* Patches come from slabs: one malloc per thousand patches instead of one
 * per patch, no allocator header per patch, and cache_destroy() can find
 * every patch (including empty and committed ones no list points to).
 * Empty, hard and NRB patches, which most patches are under soft updates,
 * have slabs of their own with smaller cells (cache_int.h). */
static struct patch *patch_alloc(struct cache *c, enum patch_type type, enum patch_cell k)
{
	static const uint16_t cell_flag[NCELLS] = {PF_SMALL, PF_MID, PF_NOUNDO, 0};
	struct patch **freep = &c->pfree[k], *p;
	size_t size = cell_size(k);

	if (!*freep) {
		struct slab *s = malloc(sizeof(*s) + SLAB_PATCHES * size);
		size_t i;

		if (!s)
			return NULL;
		s->next = c->slabs[k];
		c->slabs[k] = s;
		for (i = 0; i < SLAB_PATCHES; i++) {
			struct patch *q = slab_patch(s, i, size);

			q->flags = 0;
			q->aft.one = *freep;
			*freep = q;
		}
	}
	p = *freep;
	*freep = p->aft.one;
	memset(p, 0, size);
	p->flags = PF_ALLOC | cell_flag[k];
	p->type = (uint8_t)type;
	p->seq = ++c->seq;
	if (type == PT_BYTE)
		c->st.patches_byte++;
	else if (type == PT_BIT)
		c->st.patches_bit++;
	else
		c->st.patches_empty++;
	stats_engine(c, (int64_t)size);
	return p;
}

/* Unlike undo bytes, a bit patch's masks stay until the patch is freed or
 * made empty: a committed patch stays on its block's list (and in its
 * overlap index) until the round takes it off, and changes still look at
 * its range and masks. */
void free_masks(struct cache *c, struct patch *p)
{
	if (!patch_has_masks(p))
		return;
	stats_engine(c, -(int64_t)patch_len(p));
	free(p->masks);
	p->masks = NULL;
	set_range(p, p->off, 4);
}

static void free_afters(struct cache *c, struct patch *p)
{
	if (p->flags & PF_AFTV) {
		stats_engine(c, -(int64_t)(afters_cap(p->nafters) * sizeof(struct patch *)));
		free(p->aft.v);
		p->flags &= ~PF_AFTV;
	}
	p->aft.v = NULL;
	p->nafters = 0;
}

/* Take p out of the per-kind patch counts (freed, or turned empty). */
void uncount_kind(struct cache *c, const struct patch *p)
{
	if (p->type == PT_BYTE)
		c->st.patches_byte--;
	else if (p->type == PT_BIT)
		c->st.patches_bit--;
	else
		c->st.patches_empty--;
	if (p->flags & PF_NRB)
		c->st.patches_nrb--;
	if (p->type != PT_EMPTY) {
		if (p->flags & PF_HARD)
			c->st.patches_hard--;
		else
			c->st.patches_soft--;
	}
}

static void patch_free(struct cache *c, struct patch *p)
{
	enum patch_cell k = patch_cell(p);

	free_undo(c, p);
	free_masks(c, p);
	free_afters(c, p);
	uncount_kind(c, p);
	stats_engine(c, -(int64_t)cell_size(k));
	p->flags = 0;
	p->aft.one = c->pfree[k];
	c->pfree[k] = p;
}

void patch_free_all(struct cache *c)
{
	struct slab *s, *next;
	size_t i;

	for (int k = 0; k < NCELLS; k++) {
		for (s = c->slabs[k]; s; s = next) {
			next = s->next;
			for (i = 0; i < SLAB_PATCHES; i++) {
				struct patch *p = slab_patch(s, i, cell_size(k));

				if (!(p->flags & PF_ALLOC))
					continue;
				if (patch_has_undo(p))
					undo_release(p->undo);
				else if (patch_has_masks(p))
					free(p->masks);
				if (p->flags & PF_AFTV)
					free(p->aft.v);
			}
			free(s);
		}
		c->slabs[k] = NULL;
		c->pfree[k] = NULL;
	}
}

/* ---- the overlap index ------------------------------------------------- */

/* A change must follow the older soft patches of its block that it
 * overlaps (make_change()).  Rather than look at every patch of a block
 * that has many, a change looks at those listed under the 64ths of the
 * block its span touches: each block with at least c->ovix_min patches
 * keeps, per 64th, its soft patches whose range touches it, in list
 * (sequence) order.  Hard patches are left out: they never order a change.
 * So are covered patches (covered()): a change never waits for one
 * directly, which keeps a range that a chain of patches rewrites (a
 * directory's mtime under chained patchgroups) down to its newest patch
 * in the index.  Whatever cannot keep the index right (no memory, a
 * discard) drops it, and the next change that wants it builds it again
 * from the list. */

static void slot_range(const struct cache *c, uint32_t off, uint32_t len, uint32_t *first,
		       uint32_t *last)
{
	uint32_t chunk = c->bs / OVIX_SLOTS;

	*first = off / chunk;
	*last = (off + len - 1) / chunk;
}

void ovix_free(struct cache *c, struct cblock *b)
{
	size_t bytes = OVIX_SLOTS * sizeof(*b->ovix);
	uint32_t i;

	if (!b->ovix)
		return;
	for (i = 0; i < OVIX_SLOTS; i++) {
		bytes += b->ovix[i].cap * sizeof(*b->ovix[i].v);
		free(b->ovix[i].v);
	}
	free(b->ovix);
	b->ovix = NULL;
	stats_engine(c, -(int64_t)bytes);
}

/* Where p is, or would go, in s (by sequence number). */
static uint32_t slot_find(const struct ovslot *s, const struct patch *p)
{
	uint32_t lo = 0, hi = s->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (s->v[mid]->seq < p->seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether p, a soft patch of the list, need not be listed: among its 8
 * newest afters is a soft byte patch of its block whose range contains
 * p's.  A change that overlaps p overlaps that patch too, and finds p
 * already before it (already_before() looks at the same 8), so p is never
 * a direct before of the change; nor its merge target, as that patch is
 * newer.  Whether p is covered changes only when p gains an after
 * (add_edge()) or its range grows (widen()): a cover's range only grows,
 * it leaves the list only after p (it waits for p), and a discard, which
 * can empty it, drops the index. */
static bool covered(const struct patch *p)
{
	uint32_t i, n = p->nafters, lo = n > 8 ? n - 8 : 0, end = p->off + patch_len(p);

	for (i = n; i-- > lo;) {
		const struct patch *a = patch_after(p, i);

		if (a->block == p->block && a->type == PT_BYTE &&
		    !(a->flags & (PF_HARD | PF_COMMITTED)) && a->off <= p->off &&
		    a->off + patch_len(a) >= end)
			return true;
	}
	return false;
}

/* List p under every 64th its range touches (where it is not yet: after a
 * widening, only the new ones). */
static void ovix_list(struct cache *c, struct cblock *b, struct patch *p)
{
	uint32_t first, last, i;

	slot_range(c, p->off, patch_len(p), &first, &last);
	for (i = first; i <= last; i++) {
		struct ovslot *s = &b->ovix[i];
		uint32_t at = slot_find(s, p);

		if (at < s->n && s->v[at] == p)
			continue;
		if (s->n == s->cap) {
			size_t cap = s->cap;

			if (GROW(&s->v, &cap, (size_t)s->n + 1, 4)) {
				ovix_free(c, b);
				return;
			}
			stats_engine(c, (int64_t)((cap - s->cap) * sizeof(*s->v)));
			s->cap = (uint32_t)cap;
		}
		memmove(s->v + at + 1, s->v + at, (s->n - at) * sizeof(*s->v));
		s->v[at] = p;
		s->n++;
	}
}

static void ovix_unlist(struct cache *c, struct cblock *b, struct patch *p)
{
	uint32_t first, last, i;

	slot_range(c, p->off, patch_len(p), &first, &last);
	for (i = first; i <= last; i++) {
		struct ovslot *s = &b->ovix[i];
		uint32_t at = slot_find(s, p);

		if (at < s->n && s->v[at] == p) {
			memmove(s->v + at, s->v + at + 1, (s->n - at - 1) * sizeof(*s->v));
			s->n--;
		}
	}
}

/* p is new, gained an after or grew: list it or not, as covered() says. */
static void ovix_update(struct cache *c, struct cblock *b, struct patch *p)
{
	if (!b || !b->ovix || (p->flags & PF_HARD))
		return;
	if (covered(p)) {
		p->flags |= PF_COVERED;
		ovix_unlist(c, b, p);
	} else {
		p->flags &= ~PF_COVERED;
		ovix_list(c, b, p);
	}
}

/* p is about to take the block's newest sequence number (renumber()):
 * move it to the end of its 64ths' lists. */
static void ovix_to_tail(struct cache *c, struct cblock *b, struct patch *p)
{
	uint32_t first, last, i;

	if (!b->ovix || (p->flags & PF_HARD))
		return;
	slot_range(c, p->off, patch_len(p), &first, &last);
	for (i = first; i <= last; i++) {
		struct ovslot *s = &b->ovix[i];
		uint32_t at = slot_find(s, p);

		if (at == s->n || s->v[at] != p) {
			/* (never: p has no afters, so it is listed) */
			ovix_free(c, b);
			return;
		}
		memmove(s->v + at, s->v + at + 1, (s->n - at - 1) * sizeof(*s->v));
		s->v[s->n - 1] = p;
	}
}

static void ovix_build(struct cache *c, struct cblock *b)
{
	struct patch *p;

	b->ovix = calloc(OVIX_SLOTS, sizeof(*b->ovix));
	if (!b->ovix)
		return;
	stats_engine(c, OVIX_SLOTS * sizeof(*b->ovix));
	/* (in list order, so each goes at the end) */
	for (p = b->phead; p && b->ovix; p = p->bnext)
		ovix_update(c, b, p);
}

/* Drop the committed patches the round is about to take off the list. */
static void ovix_prune(struct cblock *b)
{
	uint32_t i, j, k;

	if (!b->ovix)
		return;
	for (i = 0; i < OVIX_SLOTS; i++) {
		struct ovslot *s = &b->ovix[i];

		for (j = k = 0; j < s->n; j++)
			if (!(s->v[j]->flags & PF_COMMITTED))
				s->v[k++] = s->v[j];
		s->n = k;
	}
}

/* ---- dependency edges -------------------------------------------------- */

/* Make room in d for one more after, so that adding edges later cannot
 * fail half way through a change.  Harmless to repeat. */
int reserve_after(struct cache *c, struct patch *d)
{
	struct patch **v;
	uint32_t cap;

	if (after_room(d))
		return 0;
	if (!(d->flags & PF_AFTV)) {
		v = malloc(AFTERS_MIN * sizeof(*v));
		if (!v)
			return -ENOMEM;
		v[0] = d->aft.one;
		d->aft.v = v;
		d->flags |= PF_AFTV;
		stats_engine(c, AFTERS_MIN * sizeof(*v));
		return 0;
	}
	cap = afters_cap(d->nafters);
	/* nafters == cap: the room grows (afters_cap(n + 1) == afters_grow(cap)) */
	v = realloc(d->aft.v, afters_grow(cap) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	d->aft.v = v;
	stats_engine(c, (int64_t)((afters_grow(cap) - cap) * sizeof(*v)));
	return 0;
}

/* `after` waits for `before`.  Room must have been reserved. */
static void add_edge(struct cache *c, struct patch *before, struct patch *after)
{
	/* Repeated changes with the same dependency are common (a run of
	 * writes to one file); the last entry catches most duplicates. */
	if (last_after(before) == after)
		return;
	if (before->flags & PF_AFTV)
		before->aft.v[before->nafters] = after;
	else
		before->aft.one = after;
	before->nafters++;
	if (before->block && before->block == after->block)
		after->npend_blk++;
	else
		after->npend_ext++;
	ovix_update(c, before->block, before); /* (its newest afters changed) */
}

void depset_init(struct depset *s)
{
	s->v = s->inl;
	s->n = 0;
	s->cap = 16;
}

static void depset_done(struct depset *s)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		s->v[i]->flags &= ~PF_INSET;
	if (s->v != s->inl)
		free(s->v);
}

/* Add p to a set whose members are known to be distinct (no flag). */
int plainset_add(struct depset *s, struct patch *p)
{
	if (s->n == s->cap) {
		struct patch **v;

		if (s->v == s->inl) {
			v = malloc(s->cap * 2 * sizeof(*v));
			if (v)
				memcpy(v, s->inl, sizeof(s->inl));
		} else {
			v = realloc(s->v, s->cap * 2 * sizeof(*v));
		}
		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap *= 2;
	}
	s->v[s->n++] = p;
	return 0;
}

static int depset_add(struct depset *s, struct patch *p)
{
	int err;

	/* Each patch at most once, so each edge is reserved and added once. */
	if (p->flags & PF_INSET)
		return 0;
	err = plainset_add(s, p);
	if (!err)
		p->flags |= PF_INSET;
	return err;
}

/* Reserve room for edges from every patch in ds (except a) to a. */
static int reserve_all(struct cache *c, const struct depset *ds, struct patch *a)
{
	size_t i;
	int err;

	for (i = 0; i < ds->n; i++) {
		/* (no edge is added where there is one already) */
		if (ds->v[i] == a || already_before(ds->v[i], a))
			continue;
		err = reserve_after(c, ds->v[i]);
		if (err)
			return err;
	}
	return 0;
}

/* ---- commit ------------------------------------------------------------ */

static int work_push(struct cache *c, struct patch *p)
{
	if (GROW(&c->work, &c->cwork, c->nwork + 1, 64))
		return -ENOMEM;
	c->work[c->nwork++] = p;
	return 0;
}

/* Let h go; queued: within a commit, whose loop commits it. */
static void unhold_locked(struct cache *c, struct patch *h, bool queued)
{
	if (!(h->flags & PF_HELD))
		return;
	h->flags &= ~PF_HELD;
	if ((h->flags & PF_COMMITTED) || !is_root(h))
		return;
	if (!queued || work_push(c, h))
		patch_commit(c, h);
}

/* p committed: let go what waited for it to be (patch_unhold_after). */
static void fire_unholds(struct cache *c, struct patch *p)
{
	for (size_t i = 0; i < c->nunholds;) {
		if (c->unholds[i].after == p) {
			struct patch *h = c->unholds[i].hold;

			c->unholds[i] = c->unholds[--c->nunholds];
			unhold_locked(c, h, true);
		} else {
			i++;
		}
	}
	p->flags &= ~PF_UNHOLDS;
}

/* Let a's undo bytes go once no write of its block can leave it out: it
 * waits for nothing elsewhere, and all it waits for on its block is in
 * every write (a hard patch, the NRB one, or one without undo itself).
 * Never rolled back from then on, it needs no undo, and it may take on no
 * before that could change that (can_merge_soft()).  An untar's
 * inode-table blocks held the undo of each new file's size and pointers
 * until the next round, long after the data they point to was on disk:
 * 0.95 MB of a 6 MB peak.  Finding a's befores on its block walks
 * the list up to a; past DROP_WALK patches or afters looked at, the undo
 * stays. */
#define DROP_WALK 256

static void drop_undo(struct cache *c, struct patch *a)
{
	const struct patch *q;
	uint32_t left = a->npend_blk, i;
	int walk = DROP_WALK;

	if (a->npend_ext || !patch_has_undo(a) || (a->flags & (PF_INFLIGHT | PF_WRITTEN)))
		return;
	for (q = a->block->phead; left && q && q != a; q = q->bnext) {
		if ((walk -= 1 + (int)q->nafters) < 0)
			return;
		if (q->flags & PF_COMMITTED)
			continue;
		for (i = 0; i < q->nafters && patch_after(q, i) != a; i++)
			;
		if (i == q->nafters)
			continue;
		if (!patch_in_every_write(q))
			return;
		left--;
	}
	if (left == 0) {
		free_undo(c, a);
		c->st.undo_dropped++;
	}
}

/* Mark p committed and release what waits for it.  A block patch stays on
 * its block's list (which is singly linked) until the round prunes it. */
void commit_one(struct cache *c, struct patch *p)
{
	struct cblock *b = p->block;
	uint32_t i;

	p->flags |= PF_COMMITTED;
	p->flags &= ~PF_INFLIGHT;
	__atomic_store_n(&p->committed, 1, __ATOMIC_RELEASE);
	c->st.patches_committed++;
	if (b) {
		b->npatches--;
		b->nroots--;
		if (b->hard == p)
			b->hard = NULL;
		if (b->nrb == p)
			b->nrb = NULL;
		free_undo(c, p);
	}
	for (i = 0; i < p->nafters; i++) {
		struct patch *a = patch_after(p, i);

		if (b && a->block == b)
			a->npend_blk--;
		else
			a->npend_ext--;
		if (a->block && a->npend_ext == 0)
			drop_undo(c, a);
		if (!is_root(a))
			continue;
		if (a->block) {
			a->block->nroots++;
			ready_update(c, a->block);
		} else if (!(a->flags & PF_HELD)) {
			/* Empty patches commit as soon as their befores
			 * have: they stand for nothing to write.  If the
			 * work list cannot grow, commit right here (deep
			 * recursion only with chains of empty patches). */
			if (work_push(c, a))
				patch_commit(c, a);
		}
	}
	free_afters(c, p);
	if (p->flags & PF_UNHOLDS)
		fire_unholds(c, p);
	if (!b && __atomic_load_n(&p->refs, __ATOMIC_ACQUIRE) == 0)
		patch_free(c, p);
}

void patch_commit(struct cache *c, struct patch *p)
{
	size_t base = c->nwork;

	commit_one(c, p);
	while (c->nwork > base)
		commit_one(c, c->work[--c->nwork]);
}

/* Drop the committed patches from the overlap index: one by one when they
 * are few, else by sweeping every 64th. */
#define OVIX_PRUNE_ONE 8

void block_prune_committed(struct cache *c, struct cblock *b, struct patch *const *done,
			   size_t ndone)
{
	struct patch **pp = &b->phead, *p, *last = NULL;
	size_t left = ndone, i;

	/* (while the committed ones can still be told) */
	if (b->ovix && ndone <= OVIX_PRUNE_ONE) {
		for (i = 0; i < ndone; i++)
			if (!(done[i]->flags & PF_HARD))
				ovix_unlist(c, b, done[i]);
	} else {
		ovix_prune(b);
	}
	/* The committed patches are the round's: once they are all off the
	 * list, the rest of it stays as it is.  They are mostly the oldest,
	 * so a long list is not walked to its end each round. */
	while (left && (p = *pp)) {
		if (!(p->flags & PF_COMMITTED)) {
			last = p;
			pp = &p->bnext;
			continue;
		}
		*pp = p->bnext;
		p->bnext = NULL;
		left--;
		if (__atomic_load_n(&p->refs, __ATOMIC_ACQUIRE) == 0)
			patch_free(c, p);
	}
	if (!*pp) {
		/* walked to the end: the tail, and the 64ths (ovmask is a
		 * superset between such walks, as changes only add to it) */
		b->ptail = last;
		b->ovmask = 0;
		for (p = b->phead; p; p = p->bnext)
			if (!(p->flags & PF_HARD))
				b->ovmask |= pmask(c, p);
	}
	if (!b->phead)
		ovix_free(c, b);
	if (b->npatches == 0)
		block_became_clean(c, b);
	ready_update(c, b);
}

/* ---- changes ----------------------------------------------------------- */

static void apply_change(struct cblock *b, enum patch_type type, uint32_t off, uint32_t len,
			 const void *data, uint32_t mask)
{
	if (type == PT_BYTE) {
		memcpy(b->data + off, data, len);
	} else {
		uint8_t *w = b->data + off;

		/* little-endian word, whatever the host */
		w[0] ^= (uint8_t)mask;
		w[1] ^= (uint8_t)(mask >> 8);
		w[2] ^= (uint8_t)(mask >> 16);
		w[3] ^= (uint8_t)(mask >> 24);
	}
}

enum merge { NO_MERGE, MERGE, MERGE_RENUMBER };

/* Can the change (type, off, len) with dependencies ds merge into the soft
 * patch t without a cycle and without breaking rollback order?  Nothing
 * newer than t may overlap the change itself (the caller picks t so). */
static enum merge can_merge_soft(struct patch *t, enum patch_type type, uint32_t off, uint32_t len,
				 const struct depset *ds)
{
	enum merge how = MERGE;
	uint32_t lo, hi, tend;
	struct patch *q;
	size_t i;

	if (t->flags & (PF_INFLIGHT | PF_WRITTEN | PF_HARD))
		return NO_MERGE;
	/* Without undo, t must stay in every write of its block: it may
	 * take on no before that could keep it out. */
	if (patch_undo_dropped(t))
		for (i = 0; i < ds->n; i++) {
			struct patch *d = ds->v[i];

			if (d != t && !already_before(d, t) &&
			    !(d->block == t->block && patch_in_every_write(d)))
				return NO_MERGE;
		}
	tend = t->off + patch_len(t);
	/* A byte change cannot become a bit flip. */
	if (type == PT_BYTE && t->type != PT_BYTE)
		return NO_MERGE;
	/* Bit flips into a bit patch only on a word of its range
	 * (merge_bit_near() widens one that is the newest of its block). */
	if (type == PT_BIT && t->type == PT_BIT && (off < t->off || off - t->off > t->lenm1))
		return NO_MERGE;
	for (i = 0; i < ds->n; i++) {
		struct patch *d = ds->v[i];

		if (d == t || already_before(d, t))
			continue;
		/* Never make t's changes wait for a held patch they did not
		 * wait for: that would pin them (and a patchgroup's sync)
		 * indefinitely. */
		if (d->flags & (PF_HELD | PF_PINNED))
			return NO_MERGE;
		/* Only older befores keep the graph ordered by sequence
		 * number, unless t can take a new number. */
		if (d->seq >= t->seq)
			how = MERGE_RENUMBER;
	}
	if (how == MERGE_RENUMBER && t->nafters)
		return NO_MERGE;
	if (t->type == PT_BIT || (t->flags & PF_NRB)) {
		/* no undo range to keep in order; an NRB patch with no
		 * afters is the only patch of its block */
		return how;
	}
	/* t's undo will grow to cover the whole span.  Nothing newer than t
	 * may touch the bytes it gains, or rolling t back would undo that
	 * too.  (Within t's old range the order is already right.)  If t
	 * moves to the tail, nothing newer may overlap any of it. */
	lo = t->off < off ? t->off : off;
	hi = tend > off + len ? tend : off + len;
	for (q = t->bnext; q; q = q->bnext) {
		if (q->flags & PF_HARD)
			continue;
		if (how == MERGE_RENUMBER && overlaps(q, lo, hi - lo))
			return NO_MERGE;
		if (lo < t->off && overlaps(q, lo, t->off - lo))
			return NO_MERGE;
		if (hi > tend && overlaps(q, tend, hi - tend))
			return NO_MERGE;
	}
	return how;
}

/* Merging a change that does not overlap t widens t's undo range over the
 * gap; allow that only while it stays small. */
#define MAX_WIDEN 64
/* ... or, for a change joined to the running transaction on a block where
 * the writer allows it (cache_txn.wide), up to one inode of the usual
 * size: the transaction's changes of a block all go home in one write, and
 * the inodes cleared by an rm -rf took a patch each (undo, edges, and a
 * step in every commit, checkpoint and round). */
#define MAX_WIDEN_TXN 256

static bool cheap_widen(const struct patch *t, uint32_t off, uint32_t len, uint32_t most)
{
	uint32_t lo, hi, tend;

	if (t->flags & PF_HARD)
		return false; /* (nor has it a range) */
	if (t->type == PT_BIT || (t->flags & PF_NRB))
		return true; /* can_merge_soft checks the word */
	tend = t->off + patch_len(t);
	lo = t->off < off ? t->off : off;
	hi = tend > off + len ? tend : off + len;
	return (hi - lo) - patch_len(t) <= most;
}

/* Give t the next sequence number and the tail of its block's list.  Only
 * for a patch nothing depends on (so no edge points to a larger number)
 * that nothing newer overlaps (so rollback order does not change). */
static void renumber(struct cache *c, struct patch *t)
{
	struct cblock *b = t->block;
	struct patch **pp;

	ovix_to_tail(c, b, t);
	t->seq = ++c->seq;
	if (b->ptail == t)
		return;
	for (pp = &b->phead; *pp != t; pp = &(*pp)->bnext)
		;
	*pp = t->bnext;
	t->bnext = NULL;
	b->ptail->bnext = t;
	b->ptail = t;
}

/* Widen t's range (and undo, if it has any) to cover [off, off+len) with
 * the current bytes. */
static int widen(struct cache *c, struct cblock *b, struct patch *t, uint32_t off, uint32_t len)
{
	uint32_t lo, hi, tend = t->off + patch_len(t);

	lo = t->off < off ? t->off : off;
	hi = tend > off + len ? tend : off + len;
	if (lo == t->off && hi == tend)
		return 0;
	if (patch_has_undo(t)) {
		uint8_t *w = malloc(hi - lo);

		if (!w)
			return -ENOMEM;
		/* Bytes outside t's old range are unchanged by t: their
		 * value before t is their value now. */
		memcpy(w, b->data + lo, hi - lo);
		undo_read(t, w + (t->off - lo));
		if (undo_replace(c, t, w, hi - lo))
			return -ENOMEM;
	}
	set_range(t, lo, hi - lo);
	b->ovmask |= pmask(c, t);
	ovix_update(c, b, t);
	return 0;
}

static void append_to_block(struct cache *c, struct cblock *b, struct patch *p)
{
	p->block = b;
	p->bnext = NULL;
	if (b->ptail)
		b->ptail->bnext = p;
	else
		b->phead = p;
	b->ptail = p;
	if (b->npatches++ == 0)
		block_became_dirty(c, b);
	else if (b->npatches == CACHE_CROWD_PATCHES)
		block_crowded(c);
}

/* Whether every patch of ds is on b and in every write of it: then so is
 * a patch that waits for ds alone, and it needs no undo. */
static bool in_every_write(const struct cblock *b, const struct depset *ds)
{
	size_t i;

	for (i = 0; i < ds->n; i++)
		if (ds->v[i]->block != b || !patch_in_every_write(ds->v[i]))
			return false;
	return true;
}

/* A new patch carrying the change.  Undo data is taken before the change
 * is applied (by the caller). */
static int new_patch(struct cache *c, struct cblock *b, enum patch_type type, uint32_t off,
		     uint32_t len, uint32_t mask, const struct depset *ds, bool pinned,
		     struct patch **out)
{
	/* The block has nothing else to write: rather than keep undo data,
	 * hold back every later change of the block until this one can be
	 * written.  If that may take a held patch's time, only for a change
	 * of the whole block (a freshly written data block, whose later
	 * changes are its owner's). */
	bool nrb = ds->n && type == PT_BYTE && b->npatches == 0 && (!pinned || len == c->bs);
	struct patch *p;
	size_t i;
	int err;

	p = patch_alloc(c, type, ds->n == 0 ? CELL_HARD : nrb ? CELL_NRB : CELL_FULL);
	if (!p)
		return -ENOMEM;
	if (ds->n == 0) {
		/* Nothing to wait for and nothing to be rolled back for: no
		 * undo needed, and one hard patch per block suffices. */
		p->flags |= PF_HARD;
		c->st.patches_hard++;
	} else {
		/* (a hard patch's range is never looked at: it has none) */
		set_range(p, off, len);
		c->st.patches_soft++;
		if (pinned)
			p->flags |= PF_PINNED;
		if (type == PT_BIT) {
			p->mask = mask;
		} else if (nrb) {
			p->flags |= PF_NRB;
			c->st.patches_nrb++;
		} else if (in_every_write(b, ds)) {
			/* (undo stays NULL: see drop_undo()) */
			c->st.undo_dropped++;
		} else {
			p->undo = undo_take(c, b->data + off, len);
			if (!p->undo) {
				err = -ENOMEM;
				goto fail;
			}
		}
		err = reserve_all(c, ds, p);
		if (err)
			goto fail;
	}
	c->st.patches_created++;
	append_to_block(c, b, p);
	if (p->flags & PF_HARD)
		b->hard = p;
	if (p->flags & PF_NRB)
		b->nrb = p;
	if (!(p->flags & PF_HARD)) {
		b->ovmask |= pmask(c, p);
		ovix_update(c, b, p);
	}
	for (i = 0; i < ds->n; i++)
		add_edge(c, ds->v[i], p);
	if (is_root(p)) {
		b->nroots++;
		ready_update(c, b);
	}
	*out = p;
	return 0;
fail:
	patch_free(c, p);
	return err;
}

/* A change (type, off, len, mask) with span [soff, soff+slen). */
struct span {
	enum patch_type type;
	uint32_t off, len, mask, soff, slen;
};

/* Look at q, the next older patch of the block in list order, for a
 * change: see same_block_befores().  (Inlined: it runs once for each patch
 * looked at, the engine's hottest loop.) */
__attribute__((always_inline)) static inline int visit_older(const struct span *x, struct patch *q,
							     struct depset *ov, struct patch **cand)
{
	size_t i;

	if ((q->flags & PF_HARD) || !overlaps(q, x->soff, x->slen))
		return 0;
	if (overlaps(q, x->off, x->len))
		*cand = q; /* the newest one, in the end */
	/* Flips of distinct bits commute.  Flips of the same bit do not: a
	 * flip means "set" or "clear" only after the flips of that bit before
	 * it. */
	if (x->type == PT_BIT && q->type == PT_BIT && !(patch_bit_mask(q, x->off) & x->mask))
		return 0;
	/* An older overlapping patch q itself waits for is implied: without
	 * this, n rewrites of one range that cannot merge (chained
	 * patchgroups) would make n^2 edges. */
	for (i = 0; i < ov->n;) {
		if (already_before(ov->v[i], q))
			ov->v[i] = ov->v[--ov->n];
		else
			i++;
	}
	return plainset_add(ov, q);
}

/* Whether the list walk would take q, a patch of block b, into account
 * for the change x (visit_older() up to the bit rule). */
static inline bool counts_for(const struct span *x, const struct cblock *b, const struct patch *q)
{
	return q->block == b && !(q->flags & PF_HARD) && overlaps(q, x->soff, x->slen) &&
	       !(x->type == PT_BIT && q->type == PT_BIT && !(patch_bit_mask(q, x->off) & x->mask));
}

/* visit_older() for a patch of the index.  The walk ends with the patches
 * it took into account that no later one of them found already before it
 * (already_before()): later, since every after is newer.  Here that is
 * asked of each patch's newest afters directly, as the index leaves out
 * covered patches, which the walk would have met. */
__attribute__((always_inline)) static inline int visit_listed(const struct span *x,
							      const struct cblock *b,
							      struct patch *q, struct depset *ov,
							      struct patch **cand)
{
	uint32_t i, n = q->nafters, lo = n > 8 ? n - 8 : 0;

	if (!overlaps(q, x->soff, x->slen))
		return 0;
	if (overlaps(q, x->off, x->len))
		*cand = q; /* (the newest one, in the end) */
	if (x->type == PT_BIT && q->type == PT_BIT && !(patch_bit_mask(q, x->off) & x->mask))
		return 0;
	for (i = n; i-- > lo;)
		if (counts_for(x, b, patch_after(q, i)))
			return 0;
	return plainset_add(ov, q);
}

/* Spans over more 64ths than this walk the whole list. */
#define OVIX_SPAN 4

/* The walk goes through the block's list, oldest first, with
 * visit_older().  The index gives the same set and the same *cand from
 * fewer patches: it leaves out only patches the walk passes over (hard
 * ones, and those under none of the span's 64ths) and covered ones (which
 * never end up in the set, nor as *cand), and it keeps list order. */
int same_block_befores(struct cache *c, struct cblock *b, enum patch_type type, uint32_t off,
		       uint32_t len, uint32_t mask, uint32_t soff, uint32_t slen, bool linear,
		       struct depset *ov, struct patch **cand)
{
	const struct span x = {type, off, len, mask, soff, slen};
	uint32_t first, last, k, j, pos[OVIX_SPAN] = {0};
	struct patch *q;
	int err;

	*cand = NULL;
	/* (nothing to look at when no soft patch can overlap) */
	if (!(chunk_mask(c->bs, soff, slen) & b->ovmask))
		return 0;
	slot_range(c, soff, slen, &first, &last);
	k = last - first + 1;
	if (linear || k > OVIX_SPAN || (!b->ovix && b->npatches < c->ovix_min)) {
		for (q = b->phead; q; q = q->bnext)
			if ((err = visit_older(&x, q, ov, cand)))
				return err;
		return 0;
	}
	if (!b->ovix)
		ovix_build(c, b);
	if (!b->ovix) /* (no memory for it) */
		return same_block_befores(c, b, type, off, len, mask, soff, slen, true, ov, cand);
	if (k == 1) {
		const struct ovslot *s = &b->ovix[first];

		for (j = 0; j < s->n; j++)
			if ((err = visit_listed(&x, b, s->v[j], ov, cand)))
				return err;
		return 0;
	}
	/* Merge the k lists by sequence number; a patch under several of the
	 * 64ths is at the head of each of their lists at once. */
	for (;;) {
		q = NULL;
		for (j = 0; j < k; j++) {
			const struct ovslot *s = &b->ovix[first + j];

			if (pos[j] < s->n && (!q || s->v[pos[j]]->seq < q->seq))
				q = s->v[pos[j]];
		}
		if (!q)
			return 0;
		for (j = 0; j < k; j++) {
			const struct ovslot *s = &b->ovix[first + j];

			if (pos[j] < s->n && s->v[pos[j]] == q)
				pos[j]++;
		}
		if ((err = visit_listed(&x, b, q, ov, cand)))
			return err;
	}
}

/* Drop from ds each patch that another member of ds already waits for
 * (among its newest afters, already_before()), unless it is of block b:
 * the change will wait for that member, which cannot commit before the
 * patch does, so a direct edge would add no order, only memory.  (A
 * member dropped because of one dropped in turn is still followed: the
 * edges themselves stay.)  A data block's contents, say, are in the
 * rename_order set and in the set of its indirect block, and the inode
 * patch waits for both.  Patches of b stay: same-block order and the
 * overlap index look at direct edges.  Whether a patch dropped was held
 * or pinned (what waits for it is pinned too, but be exact). */
static bool prune_implied(struct depset *ds, const struct cblock *b)
{
	bool pinned = false;
	size_t i, n = 0;

	for (i = 0; i < ds->n; i++) {
		struct patch *d = ds->v[i];
		uint32_t j, lo = d->nafters > 8 ? d->nafters - 8 : 0;
		bool implied = false;

		if (!b || d->block != b)
			for (j = d->nafters; j-- > lo && !implied;)
				implied = (patch_after(d, j)->flags & PF_INSET) != 0;
		if (implied) {
			d->flags &= ~PF_INSET;
			pinned |= (d->flags & (PF_HELD | PF_PINNED)) != 0;
		} else {
			ds->v[n++] = d;
		}
	}
	ds->n = n;
	return pinned;
}

/* A change that joins the running transaction keeps only its waits on its
 * own block (the order of its bytes against theirs, for rollback) and on
 * the transaction's hold h.  Its other waits are the transaction's to
 * keep: h goes only once the commit is durable, and by then everything
 * the change waited for elsewhere is durable or in the log, replayed until
 * its own home write is durable (cache.h, struct cache_txn).  A held
 * patchgroup head is no exception: the log copy does not wait for it
 * either, and the group can gain no more befores once it has a change.
 * So once committed, the transaction's changes go home in one round, in
 * any order. */
static void txn_keep_own(struct depset *ds, const struct cblock *b, const struct patch *h)
{
	size_t i, n = 0;

	for (i = 0; i < ds->n; i++) {
		struct patch *d = ds->v[i];

		if (d->block == b || d == h)
			ds->v[n++] = d;
		else
			d->flags &= ~PF_INSET;
	}
	ds->n = n;
}

/* Whether t already waits for every member of ds (or is one). */
static bool waits_for_all(const struct depset *ds, const struct patch *t)
{
	for (size_t i = 0; i < ds->n; i++)
		if (ds->v[i] != t && !already_before(ds->v[i], t))
			return false;
	return true;
}

/* Flip mask into soft bit patch t at the word off of its range. */
static void bit_xor(struct patch *t, uint32_t off, uint32_t mask)
{
	if (t->lenm1 == 3)
		t->mask ^= mask;
	else
		t->masks[(off - t->off) / 4] ^= mask;
}

/* Bytes of bitmap a bit patch may span: 512 bits. */
#define MAX_BIT_SPAN 64

/* Merge the flip of mask at word off, with dependencies ds, into the
 * block's newest patch if that is a soft bit patch of a nearby word that
 * already waits for all of ds: its range grows to take the word.  A file's
 * blocks are freed one by one, each after the same inode clear, and took
 * a patch per word of the bitmap.  No edge is added, so the graph stays as
 * it was; nothing on the block is newer than the tail, so rolling it back
 * restores the words as they were before it, whatever older patches did
 * to them (flips commute, and an older change of the same bits is in ds,
 * which the tail already follows).  0 if merged, 1 if not, or -ENOMEM. */
static int merge_bit_near(struct cache *c, struct cblock *b, uint32_t off, uint32_t mask,
			  const struct depset *ds)
{
	struct patch *t = b->ptail;
	uint32_t lo, hi, tend, *m;
	size_t i;

	if (!t || t->type != PT_BIT || (t->flags & (PF_HARD | PF_INFLIGHT | PF_WRITTEN)))
		return 1;
	tend = t->off + patch_len(t);
	lo = t->off < off ? t->off : off;
	hi = tend > off + 4 ? tend : off + 4;
	if (hi - lo > MAX_BIT_SPAN || (off >= t->off && off < tend))
		return 1;
	if (!waits_for_all(ds, t))
		return 1;
	m = calloc((hi - lo) / 4, sizeof(*m));
	if (!m)
		return -ENOMEM;
	for (i = t->off; i < tend; i += 4)
		m[(i - lo) / 4] = patch_bit_mask(t, (uint32_t)i);
	m[(off - lo) / 4] = mask;
	stats_engine(c, (int64_t)(hi - lo) - (patch_has_masks(t) ? (int64_t)patch_len(t) : 0));
	if (patch_has_masks(t))
		free(t->masks);
	t->masks = m;
	set_range(t, lo, hi - lo);
	b->ovmask |= pmask(c, t);
	ovix_update(c, b, t);
	return 0;
}

/* [soff, soff+slen) contains the change: what overlaps it is ordered
 * before the change (for a plain change, the change's own range). */
static int make_change(struct cache *c, struct cblock *b, enum patch_type type, uint32_t off,
		       uint32_t len, const void *data, uint32_t mask, uint32_t soff, uint32_t slen,
		       struct patch *const *deps, size_t ndeps, struct patch_scope *scope,
		       struct patch **out)
{
	struct patch *const *sdeps = NULL;
	struct patch *res = NULL, *cand = NULL, *hold = NULL;
	struct depset ds, ov;
	size_t nsdeps = 0, i;
	enum merge how = NO_MERGE;
	bool taken, pinned = false, joined = false, unscoped = false;
	int err = 0;

	depset_init(&ds);
	depset_init(&ov);
	cache_lock(c, &taken);
	b->gen = ++c->changes;
	if (scope && scope->befores)
		nsdeps = scope->befores(scope, &sdeps);
	if (c->opts.consistency == CONSISTENCY_NONE)
		goto collected;
	if (c->txn && c->txn->unscoped && nsdeps)
		unscoped = c->txn->unscoped(c->txn, b->blkno);
	for (i = 0; i < ndeps + nsdeps; i++) {
		struct patch *d = i < ndeps ? deps[i] : sdeps[i - ndeps];

		if (!d || (d->flags & PF_COMMITTED))
			continue;
		/* The transaction keeps the scope's order for this change
		 * (cache.h, unscoped()): a before that waits for a held patch
		 * would pin it into the transaction, and its data into the
		 * log.  A change that joins anyway drops it all the same
		 * (txn_keep_own()). */
		if (unscoped && i >= ndeps && (d->flags & (PF_HELD | PF_PINNED)))
			continue;
		/* A hard patch is in every write of its block. */
		if (d->block == b && (d->flags & PF_HARD))
			continue;
		err = depset_add(&ds, d);
		if (err)
			goto out;
	}
	if (prune_implied(&ds, b))
		pinned = true;
	/* Nothing of a block with an NRB patch is written without it. */
	if (b->nrb) {
		err = depset_add(&ds, b->nrb);
		if (err)
			goto out;
	}
	/* Same-block ordering: the change must not reach disk without the
	 * older changes it overlaps, or their rollback would undo it. */
	err = same_block_befores(c, b, type, off, len, mask, soff, slen, false, &ov, &cand);
	if (err)
		goto out;
	for (i = 0; i < ov.n; i++) {
		err = depset_add(&ds, ov.v[i]);
		if (err)
			goto out;
	}
	for (i = 0; i < ds.n; i++)
		if (ds.v[i]->flags & (PF_HELD | PF_PINNED))
			pinned = true;
	if (c->txn) {
		struct patch *h = c->txn->join(c->txn, b->blkno, pinned);

		if (h && !(h->flags & PF_COMMITTED)) {
			joined = true;
			hold = h;
			err = depset_add(&ds, h);
			if (err)
				goto out;
			pinned = true;
			txn_keep_own(&ds, b, h);
		}
	}
collected:
	if (ds.n == 0) {
		if (b->hard && !(b->hard->flags & PF_INFLIGHT)) {
			res = b->hard;
			c->st.patches_merged++;
			apply_change(b, type, off, len, data, mask);
			goto done;
		}
		err = new_patch(c, b, type, off, len, mask, &ds, false, &res);
		if (err)
			goto out;
		apply_change(b, type, off, len, data, mask);
		goto done;
	}

	/* Merge into the newest soft patch the change overlaps; if it
	 * overlaps none, into the block's NRB patch; else into the newest
	 * patch of the block if that costs little undo data and that patch
	 * waits for nothing: the change would take on its befores, and a
	 * change merged into an unrelated one that waits for a chain of
	 * other blocks would wait for that chain too (a park in lost+found
	 * behind the removal of the one before it cost a round per rename).
	 * A change joined to the running transaction merges into the newest
	 * patch also when that already waits for all the change waits for:
	 * both wait for the transaction's hold, and so go home in the same
	 * round (a file's pointers, stored in its indirect block one append
	 * at a time, took a patch each).  (Nothing is newer than the tail,
	 * so the change is in order there too.) */
	if (!cand)
		cand = b->nrb;
	if (cand)
		how = can_merge_soft(cand, type, off, len, &ds);
	if (how == NO_MERGE && b->ptail && b->ptail != cand &&
	    ((cheap_widen(b->ptail, off, len, MAX_WIDEN) && is_root(b->ptail)) ||
	     (joined &&
	      cheap_widen(b->ptail, off, len,
			  c->txn->wide && c->txn->wide(c->txn, b->blkno) ? MAX_WIDEN_TXN
									 : MAX_WIDEN) &&
	      waits_for_all(&ds, b->ptail)))) {
		cand = b->ptail;
		how = can_merge_soft(cand, type, off, len, &ds);
	}
	if (how != NO_MERGE) {
		bool was_root = is_root(cand);

		err = reserve_all(c, &ds, cand);
		if (err)
			goto out;
		if (cand->type == PT_BIT) {
			bit_xor(cand, off, mask);
		} else {
			err = widen(c, b, cand, off, len);
			if (err)
				goto out;
		}
		if (how == MERGE_RENUMBER)
			renumber(c, cand);
		apply_change(b, type, off, len, data, mask);
		for (i = 0; i < ds.n; i++)
			if (ds.v[i] != cand && !already_before(ds.v[i], cand))
				add_edge(c, ds.v[i], cand);
		if (pinned)
			cand->flags |= PF_PINNED;
		if (was_root && !is_root(cand)) {
			b->nroots--;
			ready_update(c, b);
		}
		c->st.patches_merged++;
		res = cand;
		goto done;
	}
	if (type == PT_BIT) {
		err = merge_bit_near(c, b, off, mask, &ds);
		if (err < 0)
			goto out;
		if (!err) {
			apply_change(b, type, off, len, data, mask);
			if (pinned)
				b->ptail->flags |= PF_PINNED;
			c->st.patches_merged++;
			res = b->ptail;
			goto done;
		}
	}
	err = new_patch(c, b, type, off, len, mask, &ds, pinned, &res);
	if (err)
		goto out;
	apply_change(b, type, off, len, data, mask);
done:
	/* Keep the block's record of its transaction's patches exact: a
	 * joined change newest on its block starts or extends a run of
	 * patches that all wait for the hold, and any other change may end
	 * it (already_before() believes it). */
	if (!joined) {
		b->jhold = 0;
	} else if (b->jhold != hold->seq && res == b->ptail) {
		b->jhold = hold->seq;
		b->jfrom = res->seq;
	}
	if (c->txn && !joined && c->txn->outside)
		c->txn->outside(c->txn, res);
	if (scope && scope->created)
		scope->created(scope, res);
	if (out) {
		__atomic_add_fetch(&res->refs, 1, __ATOMIC_RELAXED);
		*out = res;
	}
out:
	depset_done(&ds); /* under the lock: it writes the patches' flags */
	if (ov.v != ov.inl)
		free(ov.v);
	cache_unlock(c, taken);
	return err;
}

int patch_create_byte(struct cache *c, struct cblock *b, uint32_t off, uint32_t len,
		      const void *data, struct patch *const *deps, size_t ndeps,
		      struct patch_scope *scope, struct patch **out)
{
	if (!c || !b || !data || len == 0 || off >= c->bs || len > c->bs - off)
		return -EINVAL;
	return make_change(c, b, PT_BYTE, off, len, data, 0, off, len, deps, ndeps, scope, out);
}

int patch_create_byte_span(struct cache *c, struct cblock *b, uint32_t off, uint32_t len,
			   const void *data, uint32_t span_off, uint32_t span_len,
			   struct patch *const *deps, size_t ndeps, struct patch_scope *scope,
			   struct patch **out)
{
	if (!c || !b || !data || len == 0 || off >= c->bs || len > c->bs - off || span_off > off ||
	    span_len > c->bs - span_off || off + len > span_off + span_len)
		return -EINVAL;
	return make_change(c, b, PT_BYTE, off, len, data, 0, span_off, span_len, deps, ndeps, scope,
			   out);
}

int patch_create_bit(struct cache *c, struct cblock *b, uint32_t off, uint32_t xor_mask,
		     struct patch *const *deps, size_t ndeps, struct patch_scope *scope,
		     struct patch **out)
{
	if (!c || !b || (off & 3) || off > c->bs - 4)
		return -EINVAL;
	return make_change(c, b, PT_BIT, off, 4, NULL, xor_mask, off, 4, deps, ndeps, scope, out);
}

/* Under the lock: a new empty patch (held or not) after every patch of ds,
 * committed at once if it waits for nothing and is not held. */
static int empty_after(struct cache *c, const struct depset *ds, bool held, struct patch **out)
{
	struct patch *p = patch_alloc(c, PT_EMPTY, CELL_EMPTY);
	int err;

	if (!p)
		return -ENOMEM;
	err = reserve_all(c, ds, p);
	if (err) {
		patch_free(c, p);
		return err;
	}
	c->st.patches_created++;
	p->refs = 1;
	if (held)
		p->flags |= PF_HELD;
	for (size_t i = 0; i < ds->n; i++) {
		add_edge(c, ds->v[i], p);
		if (ds->v[i]->flags & (PF_HELD | PF_PINNED))
			p->flags |= PF_PINNED;
	}
	if (!held && is_root(p))
		patch_commit(c, p);
	*out = p;
	return 0;
}

static int make_empty(struct cache *c, struct patch *const *deps, size_t ndeps, bool held,
		      struct patch **out)
{
	struct depset ds;
	bool taken;
	size_t i;
	int err = 0;

	if (!c || !out)
		return -EINVAL;
	depset_init(&ds);
	cache_lock(c, &taken);
	if (c->opts.consistency != CONSISTENCY_NONE) {
		for (i = 0; i < ndeps; i++) {
			if (!deps[i] || (deps[i]->flags & PF_COMMITTED))
				continue;
			err = depset_add(&ds, deps[i]);
			if (err)
				goto out;
		}
	}
	err = empty_after(c, &ds, held, out);
out:
	depset_done(&ds); /* under the lock: it writes the patches' flags */
	cache_unlock(c, taken);
	return err;
}

int patch_create_empty(struct cache *c, struct patch *const *deps, size_t ndeps, struct patch **out)
{
	return make_empty(c, deps, ndeps, false, out);
}

int patch_create_empty_held(struct cache *c, struct patch *const *deps, size_t ndeps,
			    struct patch **out)
{
	return make_empty(c, deps, ndeps, true, out);
}

void patch_unhold(struct cache *c, struct patch *p)
{
	bool taken;

	if (!c || !p)
		return;
	cache_lock(c, &taken);
	if (p->flags & PF_HELD) {
		p->flags &= ~PF_HELD;
		if (!(p->flags & PF_COMMITTED) && is_root(p))
			patch_commit(c, p);
	}
	cache_unlock(c, taken);
}

int patch_unhold_after(struct cache *c, struct patch *hold, struct patch *p)
{
	bool taken;
	int err = 0;

	if (!c || !hold || !p)
		return -EINVAL;
	cache_lock(c, &taken);
	if (p->flags & PF_COMMITTED) {
		unhold_locked(c, hold, false);
		goto out;
	}
	if (c->nunholds == c->cunholds) {
		size_t cap = c->cunholds ? c->cunholds * 2 : 16;
		struct unhold *v = realloc(c->unholds, cap * sizeof(*v));

		if (!v) {
			err = -ENOMEM;
			goto out;
		}
		c->unholds = v;
		c->cunholds = cap;
	}
	c->unholds[c->nunholds].hold = hold;
	c->unholds[c->nunholds++].after = p;
	p->flags |= PF_UNHOLDS;
out:
	cache_unlock(c, taken);
	return err;
}

int patch_create_empty_blocks(struct cache *c, const uint64_t *blknos, size_t n, struct patch **out)
{
	return patch_create_empty_blocks_after(c, blknos, n, NULL, out);
}

int patch_create_empty_blocks_after(struct cache *c, const uint64_t *blknos, size_t n,
				    struct patch *prev, struct patch **out)
{
	struct depset ds;
	bool taken;
	size_t i;
	int err = 0;

	if (!c || !out)
		return -EINVAL;
	depset_init(&ds);
	cache_lock(c, &taken);
	if (prev && !(prev->flags & PF_COMMITTED))
		err = depset_add(&ds, prev);
	for (i = 0; i < n && !err; i++) {
		struct cblock *b = cache_find_locked(c, blknos[i]);

		for (struct patch *q = b ? b->phead : NULL; q && !err; q = q->bnext)
			if (!(q->flags & PF_COMMITTED) && (!prev || q->seq > prev->seq))
				err = depset_add(&ds, q);
	}
	if (!err)
		err = empty_after(c, &ds, false, out);
	depset_done(&ds);
	cache_unlock(c, taken);
	return err;
}

int patch_create_empty_range(struct cache *c, uint64_t blkno, uint32_t off, uint32_t len,
			     struct patch **out)
{
	struct depset ds;
	struct cblock *b;
	bool taken;
	int err = 0;

	if (!c || !out || len == 0 || off >= c->bs || len > c->bs - off)
		return -EINVAL;
	depset_init(&ds);
	cache_lock(c, &taken);
	b = cache_find_locked(c, blkno);
	/* A hard patch has no range of its own: it may hold any byte. */
	for (struct patch *q = b ? b->phead : NULL; q && !err; q = q->bnext)
		if (!(q->flags & PF_COMMITTED) && ((q->flags & PF_HARD) || overlaps(q, off, len)))
			err = depset_add(&ds, q);
	if (!err && b && b->nrb && !(b->nrb->flags & PF_COMMITTED))
		err = depset_add(&ds, b->nrb);
	if (!err)
		err = empty_after(c, &ds, false, out);
	depset_done(&ds);
	cache_unlock(c, taken);
	return err;
}

int patch_add_depend(struct cache *c, struct patch *after, struct patch *before)
{
	bool taken;
	int err = 0;

	if (!c || !after)
		return -EINVAL;
	cache_lock(c, &taken);
	if (after->type != PT_EMPTY || (after->flags & PF_COMMITTED) || after->nafters) {
		err = -EBUSY;
		goto out;
	}
	if (!before || (before->flags & PF_COMMITTED))
		goto out;
	if (before == after) {
		err = -EINVAL;
		goto out;
	}
	if (c->opts.consistency == CONSISTENCY_NONE)
		goto out;
	if (last_after(before) != after) {
		err = reserve_after(c, before);
		if (err)
			goto out;
	}
	/* Nothing depends on `after`, so it may take a new, larger number:
	 * every edge still points to a smaller one (cache_int.h). */
	after->seq = ++c->seq;
	add_edge(c, before, after);
	if (before->flags & (PF_HELD | PF_PINNED))
		after->flags |= PF_PINNED;
out:
	cache_unlock(c, taken);
	return err;
}

void patch_retain(struct patch *p)
{
	if (p)
		__atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
}

void patch_release(struct cache *c, struct patch *p)
{
	bool taken;

	if (!p)
		return;
	cache_lock(c, &taken);
	/* (A round commits and prunes its patches under one hold of the
	 * lock, so a committed patch seen here is on no block list.) */
	if (__atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) == 0 && (p->flags & PF_COMMITTED))
		patch_free(c, p);
	cache_unlock(c, taken);
}

bool patch_committed(const struct patch *p)
{
	return p && __atomic_load_n(&p->committed, __ATOMIC_ACQUIRE);
}

int patch_where(struct cache *c, const struct patch *p, uint64_t *blkno, uint32_t *off,
		uint32_t *len)
{
	int r = -ENOENT;
	bool taken;

	if (!p)
		return r;
	cache_lock(c, &taken);
	if (!(p->flags & PF_COMMITTED) && p->block) {
		*blkno = p->block->blkno;
		/* A hard patch has no range (cache_int.h): the changes
		 * merged into it may lie anywhere in the block. */
		*off = (p->flags & PF_HARD) ? 0 : p->off;
		*len = (p->flags & PF_HARD) ? c->bs : patch_len(p);
		r = 0;
	}
	cache_unlock(c, taken);
	return r;
}
