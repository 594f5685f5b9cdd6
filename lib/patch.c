/* Patches: creation, merging, dependencies and commit propagation
 * (design.md §3).  The invariants are listed in cache_int.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "cache_int.h"

static __thread struct patch_scope *tls_scope;

void cache_set_scope(struct patch_scope *s)
{
	tls_scope = s;
}

/* ---- allocation -------------------------------------------------------- */

/* Patches come from slabs: one malloc per thousand patches instead of one
 * per patch, no allocator header per patch, and cache_destroy() can find
 * every patch (including empty and committed ones no list points to). */
static struct patch *patch_alloc(struct cache *c, enum patch_type type)
{
	struct patch *p;

	if (!c->pfree) {
		struct slab *s = malloc(sizeof(*s) + SLAB_PATCHES * sizeof(struct patch));
		size_t i;

		if (!s)
			return NULL;
		s->next = c->slabs;
		c->slabs = s;
		for (i = 0; i < SLAB_PATCHES; i++) {
			s->p[i].flags = 0;
			s->p[i].bnext = c->pfree;
			c->pfree = &s->p[i];
		}
	}
	p = c->pfree;
	c->pfree = p->bnext;
	memset(p, 0, sizeof(*p));
	p->flags = PF_ALLOC;
	p->type = (uint8_t)type;
	p->seq = ++c->seq;
	if (type == PT_BYTE)
		c->st.patches_byte++;
	else if (type == PT_BIT)
		c->st.patches_bit++;
	else
		c->st.patches_empty++;
	stats_engine(c, (int64_t)sizeof(struct patch));
	return p;
}

static void patch_free(struct cache *c, struct patch *p)
{
	if (p->type == PT_BYTE && p->undo) {
		c->st.undo_bytes -= p->len;
		stats_engine(c, -(int64_t)p->len);
		free(p->undo);
	}
	if (p->afters) {
		stats_engine(c, -(int64_t)(p->cafters * sizeof(*p->afters)));
		free(p->afters);
	}
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
	stats_engine(c, -(int64_t)sizeof(struct patch));
	p->flags = 0;
	p->bnext = c->pfree;
	c->pfree = p;
}

void patch_free_all(struct cache *c)
{
	struct slab *s, *next;
	size_t i;

	for (s = c->slabs; s; s = next) {
		next = s->next;
		for (i = 0; i < SLAB_PATCHES; i++) {
			struct patch *p = &s->p[i];

			if (!(p->flags & PF_ALLOC))
				continue;
			if (p->type == PT_BYTE)
				free(p->undo);
			free(p->afters);
		}
		free(s);
	}
	c->slabs = NULL;
	c->pfree = NULL;
}

/* ---- dependency edges -------------------------------------------------- */

static bool is_root(const struct patch *p)
{
	return p->npend_ext == 0 && p->npend_blk == 0;
}

/* Make room for one more after, so that adding edges later cannot fail
 * half way through a change. */
static int reserve_after(struct cache *c, struct patch *d)
{
	struct patch **v;
	uint32_t cap;

	if (d->nafters < d->cafters)
		return 0;
	cap = d->cafters ? d->cafters * 2 : 2;
	v = realloc(d->afters, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	stats_engine(c, (int64_t)((cap - d->cafters) * sizeof(*v)));
	d->afters = v;
	d->cafters = cap;
	return 0;
}

/* after waits for before.  Room must have been reserved. */
static void add_edge(struct patch *before, struct patch *after)
{
	/* Repeated changes with the same dependency are common (a run of
	 * writes to one file); the last entry catches most duplicates. */
	if (before->nafters && before->afters[before->nafters - 1] == after)
		return;
	before->afters[before->nafters++] = after;
	if (before->block && before->block == after->block)
		after->npend_blk++;
	else
		after->npend_ext++;
}

/* A small set of patches: the dependencies of one new change. */
struct depset {
	struct patch **v;
	size_t n, cap;
	struct patch *inl[16];
};

static void depset_init(struct depset *s)
{
	s->v = s->inl;
	s->n = 0;
	s->cap = 16;
}

static void depset_done(struct depset *s)
{
	if (s->v != s->inl)
		free(s->v);
}

static int depset_add(struct depset *s, struct patch *p)
{
	size_t i;

	/* Duplicates would only cost edges; look for them in small sets. */
	if (s->n <= 32)
		for (i = 0; i < s->n; i++)
			if (s->v[i] == p)
				return 0;
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

/* ---- commit ------------------------------------------------------------ */

static int work_push(struct cache *c, struct patch *p)
{
	if (c->nwork == c->cwork) {
		size_t cap = c->cwork ? c->cwork * 2 : 64;
		struct patch **v = realloc(c->work, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		c->work = v;
		c->cwork = cap;
	}
	c->work[c->nwork++] = p;
	return 0;
}

static void unlink_from_block(struct cache *c, struct patch *p)
{
	struct cblock *b = p->block;

	if (p->bprev)
		p->bprev->bnext = p->bnext;
	else
		b->phead = p->bnext;
	if (p->bnext)
		p->bnext->bprev = p->bprev;
	else
		b->ptail = p->bprev;
	p->bnext = p->bprev = NULL;
	b->npatches--;
	if (b->hard == p)
		b->hard = NULL;
	if (b->nrb == p)
		b->nrb = NULL;
}

static void commit_one(struct cache *c, struct patch *p)
{
	struct cblock *b = p->block;
	uint32_t i;

	p->flags |= PF_COMMITTED;
	p->flags &= ~PF_INFLIGHT;
	__atomic_store_n(&p->committed, 1, __ATOMIC_RELEASE);
	c->st.patches_committed++;
	if (b) {
		unlink_from_block(c, p);
		b->nroots--;
		if (p->type == PT_BYTE && p->undo) {
			c->st.undo_bytes -= p->len;
			stats_engine(c, -(int64_t)p->len);
			free(p->undo);
			p->undo = NULL;
		}
	}
	for (i = 0; i < p->nafters; i++) {
		struct patch *a = p->afters[i];

		if (b && a->block == b)
			a->npend_blk--;
		else
			a->npend_ext--;
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
	if (p->afters) {
		stats_engine(c, -(int64_t)(p->cafters * sizeof(*p->afters)));
		free(p->afters);
		p->afters = NULL;
		p->nafters = p->cafters = 0;
	}
	if (b) {
		if (b->npatches == 0)
			block_became_clean(c, b);
		ready_update(c, b);
	}
	if (__atomic_load_n(&p->refs, __ATOMIC_ACQUIRE) == 0)
		patch_free(c, p);
}

void patch_commit(struct cache *c, struct patch *p)
{
	size_t base = c->nwork;

	commit_one(c, p);
	while (c->nwork > base)
		commit_one(c, c->work[--c->nwork]);
}

/* ---- changes ----------------------------------------------------------- */

static bool overlaps(const struct patch *q, uint32_t off, uint32_t len)
{
	return q->off < off + len && off < q->off + q->len;
}

static void apply_change(struct cblock *b, enum patch_type type, uint32_t off,
			 uint32_t len, const void *data, uint32_t mask)
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
static enum merge can_merge_soft(struct cblock *b, struct patch *t, enum patch_type type,
				 uint32_t off, uint32_t len, const struct depset *ds,
				 bool pinned)
{
	enum merge how = MERGE;
	bool adds = false;
	uint32_t lo, hi;
	struct patch *q;
	size_t i;

	if (t->flags & (PF_INFLIGHT | PF_WRITTEN | PF_HARD))
		return NO_MERGE;
	/* A byte change cannot become a bit flip. */
	if (type == PT_BYTE && t->type != PT_BYTE)
		return NO_MERGE;
	/* Bit flips into a bit patch only on the same word. */
	if (type == PT_BIT && t->type == PT_BIT && t->off != off)
		return NO_MERGE;
	for (i = 0; i < ds->n; i++) {
		if (ds->v[i] == t)
			continue;
		adds = true;
		/* Only older befores keep the graph ordered by sequence
		 * number, unless t can take a new number. */
		if (ds->v[i]->seq >= t->seq)
			how = MERGE_RENUMBER;
	}
	/* Never make t's changes wait for a held patch they did not wait
	 * for: that would pin them (and a patchgroup's sync) indefinitely. */
	if (adds && pinned)
		return NO_MERGE;
	if (how == MERGE_RENUMBER && t->nafters)
		return NO_MERGE;
	if (t->type == PT_BIT || (t->flags & PF_NRB))
		return how; /* no undo range to keep in order */
	/* t's undo will grow to cover the whole span.  Nothing newer than t
	 * may touch the bytes it gains, or rolling t back would undo that
	 * too.  (Within t's old range the order is already right.)  If t
	 * moves to the tail, nothing newer may overlap any of it. */
	lo = t->off < off ? t->off : off;
	hi = t->off + t->len > off + len ? t->off + t->len : off + len;
	for (q = b->ptail; q && q != t; q = q->bprev) {
		if (q->flags & PF_HARD)
			continue;
		if (how == MERGE_RENUMBER && overlaps(q, lo, hi - lo))
			return NO_MERGE;
		if (lo < t->off && overlaps(q, lo, t->off - lo))
			return NO_MERGE;
		if (hi > t->off + t->len && overlaps(q, t->off + t->len, hi - t->off - t->len))
			return NO_MERGE;
	}
	return how;
}

/* Merging a change that does not overlap t widens t's undo range over the
 * gap; allow that only while it stays small. */
#define MAX_WIDEN 64

static bool cheap_widen(const struct patch *t, uint32_t off, uint32_t len)
{
	uint32_t lo, hi;

	if (t->flags & (PF_HARD | PF_NRB))
		return !(t->flags & PF_HARD);
	if (t->type == PT_BIT)
		return true; /* can_merge_soft checks the word */
	lo = t->off < off ? t->off : off;
	hi = t->off + t->len > off + len ? t->off + t->len : off + len;
	return (hi - lo) - t->len <= MAX_WIDEN;
}

/* Give t the next sequence number and the tail of its block's list.  Only
 * for a patch nothing depends on (so no edge points to a larger number)
 * that nothing newer overlaps (so rollback order does not change). */
static void renumber(struct cache *c, struct patch *t)
{
	struct cblock *b = t->block;

	t->seq = ++c->seq;
	if (b->ptail == t)
		return;
	if (t->bprev)
		t->bprev->bnext = t->bnext;
	else
		b->phead = t->bnext;
	t->bnext->bprev = t->bprev;
	t->bnext = NULL;
	t->bprev = b->ptail;
	b->ptail->bnext = t;
	b->ptail = t;
}

/* Widen t's undo range to cover [off, off+len) with the current bytes. */
static int widen_undo(struct cache *c, struct cblock *b, struct patch *t,
		      uint32_t off, uint32_t len)
{
	uint32_t lo, hi;
	uint8_t *u;

	lo = t->off < off ? t->off : off;
	hi = t->off + t->len > off + len ? t->off + t->len : off + len;
	if (lo == t->off && hi == t->off + t->len)
		return 0;
	u = malloc(hi - lo);
	if (!u)
		return -ENOMEM;
	/* Bytes outside t's old range are unchanged by t: their value
	 * before t is their value now. */
	memcpy(u, b->data + lo, hi - lo);
	memcpy(u + (t->off - lo), t->undo, t->len);
	free(t->undo);
	c->st.undo_bytes += (hi - lo) - t->len;
	stats_engine(c, (int64_t)((hi - lo) - t->len));
	t->undo = u;
	t->off = lo;
	t->len = hi - lo;
	return 0;
}

static void append_to_block(struct cache *c, struct cblock *b, struct patch *p)
{
	p->block = b;
	p->bprev = b->ptail;
	p->bnext = NULL;
	if (b->ptail)
		b->ptail->bnext = p;
	else
		b->phead = p;
	b->ptail = p;
	if (b->npatches++ == 0)
		block_became_dirty(c, b);
}

static int make_change(struct cache *c, struct cblock *b, enum patch_type type,
		       uint32_t off, uint32_t len, const void *data, uint32_t mask,
		       struct patch *const *deps, size_t ndeps, struct patch **out)
{
	struct patch_scope *scope = tls_scope;
	struct patch *const *sdeps = NULL;
	struct patch *res = NULL, *cand = NULL, *q;
	struct depset ds;
	size_t nsdeps = 0, i;
	enum merge how;
	bool taken, pinned = false;
	int err = 0;

	depset_init(&ds);
	cache_lock(c, &taken);
	if (scope && scope->befores)
		nsdeps = scope->befores(scope, &sdeps);
	if (c->opts.consistency == CONSISTENCY_NONE)
		goto collected;
	for (i = 0; i < ndeps + nsdeps; i++) {
		struct patch *d = i < ndeps ? deps[i] : sdeps[i - ndeps];

		if (!d || (d->flags & PF_COMMITTED))
			continue;
		/* A hard patch is in every write of its block. */
		if (d->block == b && (d->flags & PF_HARD))
			continue;
		err = depset_add(&ds, d);
		if (err)
			goto out;
	}
	/* Nothing of a block with an NRB patch is written without it. */
	if (b->nrb) {
		err = depset_add(&ds, b->nrb);
		if (err)
			goto out;
	}
	/* Same-block ordering: the change must not reach disk without the
	 * older changes it overlaps, or their rollback would undo it. */
	for (q = b->ptail; q; q = q->bprev) {
		if ((q->flags & PF_HARD) || !overlaps(q, off, len))
			continue;
		if (!cand)
			cand = q;
		/* Flips of distinct bits commute.  Flips of the same bit do
		 * not: a flip means "set" or "clear" only after the flips of
		 * that bit before it. */
		if (type == PT_BIT && q->type == PT_BIT && !(q->mask & mask))
			continue;
		err = depset_add(&ds, q);
		if (err)
			goto out;
	}
collected:
	for (i = 0; i < ds.n; i++) {
		if (ds.v[i]->flags & (PF_HELD | PF_PINNED))
			pinned = true;
		err = reserve_after(c, ds.v[i]);
		if (err)
			goto out;
	}

	if (ds.n == 0) {
		/* Nothing to wait for and nothing to be rolled back for:
		 * no undo needed, and one hard patch per block suffices. */
		if (b->hard && !(b->hard->flags & PF_INFLIGHT)) {
			res = b->hard;
			c->st.patches_merged++;
		} else {
			res = patch_alloc(c, type);
			if (!res) {
				err = -ENOMEM;
				goto out;
			}
			res->flags |= PF_HARD;
			c->st.patches_hard++;
			c->st.patches_created++;
			append_to_block(c, b, res);
			b->hard = res;
			b->nroots++;
			ready_update(c, b);
		}
		apply_change(b, type, off, len, data, mask);
		goto done;
	}

	/* Merge into the newest soft patch the change overlaps; if it
	 * overlaps none, into the block's NRB patch; else into the newest
	 * patch of the block if that costs little undo data.  (Nothing is
	 * newer than the tail, so the change is in order there too.) */
	how = NO_MERGE;
	if (!cand)
		cand = b->nrb;
	if (cand)
		how = can_merge_soft(b, cand, type, off, len, &ds, pinned);
	if (how == NO_MERGE && b->ptail && b->ptail != cand &&
	    cheap_widen(b->ptail, off, len)) {
		cand = b->ptail;
		how = can_merge_soft(b, cand, type, off, len, &ds, pinned);
	}
	if (how != NO_MERGE) {
		bool was_root = is_root(cand);

		if (cand->type == PT_BYTE && !(cand->flags & PF_NRB)) {
			err = widen_undo(c, b, cand, off, len);
			if (err)
				goto out;
		} else if (cand->type == PT_BIT) {
			cand->mask ^= mask;
		} else {
			/* NRB: keep the range covering every change */
			uint32_t lo = cand->off < off ? cand->off : off;
			uint32_t hi = cand->off + cand->len > off + len ?
					      cand->off + cand->len : off + len;

			cand->off = lo;
			cand->len = hi - lo;
		}
		if (how == MERGE_RENUMBER)
			renumber(c, cand);
		apply_change(b, type, off, len, data, mask);
		for (i = 0; i < ds.n; i++)
			if (ds.v[i] != cand)
				add_edge(ds.v[i], cand);
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

	res = patch_alloc(c, type);
	if (!res) {
		err = -ENOMEM;
		goto out;
	}
	c->st.patches_soft++;
	res->off = off;
	res->len = len;
	if (pinned)
		res->flags |= PF_PINNED;
	if (type == PT_BYTE && b->npatches == 0 && !pinned) {
		/* The block has nothing else to write: rather than keep
		 * undo data, hold back every later change to the block
		 * until this one can be written (cache_int.h). */
		res->flags |= PF_NRB;
		b->nrb = res;
		c->st.patches_nrb++;
	} else if (type == PT_BYTE) {
		res->undo = malloc(len);
		if (!res->undo) {
			patch_free(c, res);
			err = -ENOMEM;
			goto out;
		}
		memcpy(res->undo, b->data + off, len);
		c->st.undo_bytes += len;
		stats_engine(c, len);
	} else {
		res->mask = mask;
	}
	c->st.patches_created++;
	append_to_block(c, b, res);
	apply_change(b, type, off, len, data, mask);
	for (i = 0; i < ds.n; i++)
		add_edge(ds.v[i], res);
	/* (every dependency is uncommitted, so res is not a root) */
done:
	if (scope && scope->created)
		scope->created(scope, res);
	if (out) {
		__atomic_add_fetch(&res->refs, 1, __ATOMIC_RELAXED);
		*out = res;
	}
out:
	cache_unlock(c, taken);
	depset_done(&ds);
	return err;
}

int patch_create_byte(struct cache *c, struct cblock *b, uint32_t off, uint32_t len,
		      const void *data, struct patch *const *deps, size_t ndeps,
		      struct patch **out)
{
	if (!c || !b || !data || len == 0 || off >= c->bs || len > c->bs - off)
		return -EINVAL;
	return make_change(c, b, PT_BYTE, off, len, data, 0, deps, ndeps, out);
}

int patch_create_bit(struct cache *c, struct cblock *b, uint32_t off, uint32_t xor_mask,
		     struct patch *const *deps, size_t ndeps, struct patch **out)
{
	if (!c || !b || (off & 3) || off > c->bs - 4)
		return -EINVAL;
	return make_change(c, b, PT_BIT, off, 4, NULL, xor_mask, deps, ndeps, out);
}

static int make_empty(struct cache *c, struct patch *const *deps, size_t ndeps,
		      bool held, struct patch **out)
{
	struct depset ds;
	struct patch *p;
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
			err = reserve_after(c, deps[i]);
			if (err)
				goto out;
		}
	}
	p = patch_alloc(c, PT_EMPTY);
	if (!p) {
		err = -ENOMEM;
		goto out;
	}
	c->st.patches_created++;
	p->refs = 1;
	if (held)
		p->flags |= PF_HELD;
	for (i = 0; i < ds.n; i++) {
		add_edge(ds.v[i], p);
		if (ds.v[i]->flags & (PF_HELD | PF_PINNED))
			p->flags |= PF_PINNED;
	}
	if (!held && is_root(p))
		patch_commit(c, p);
	*out = p;
out:
	cache_unlock(c, taken);
	depset_done(&ds);
	return err;
}

int patch_create_empty(struct cache *c, struct patch *const *deps, size_t ndeps,
		       struct patch **out)
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
	err = reserve_after(c, before);
	if (err)
		goto out;
	/* Nothing depends on `after`, so it may take a new, larger number:
	 * every edge still points to a smaller one (cache_int.h). */
	after->seq = ++c->seq;
	add_edge(before, after);
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
	if (__atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) == 0 &&
	    (p->flags & PF_COMMITTED))
		patch_free(c, p);
	cache_unlock(c, taken);
}

bool patch_committed(const struct patch *p)
{
	return p && __atomic_load_n(&p->committed, __ATOMIC_ACQUIRE);
}
