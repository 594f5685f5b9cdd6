/* ext2: block mapping (direct, indirect, double and triple indirect), file
 * writes that allocate, and truncation.
 *
 * A write runs in three passes (see e2_write_locked) so that the
 * soft-updates order holds: new blocks are written whole before anything
 * points at them; a growing write changes the size and the pointers to the
 * data it covers in one inode write (indirect blocks it must change are
 * copied); pointers stored in place in existing indirect blocks go after
 * the inode patch that counted their blocks in i_blocks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "e2_int.h"
#include "util/grow.h"

uint64_t e2_max_lblk(const struct e2fs *fs)
{
	uint64_t a = fs->apb, aa = a * a;
	uint64_t tree = E2_NDIR + a + aa + aa * a;
	/* i_blocks: 32 bits of 512-byte units, indirect blocks included */
	uint64_t lim = ((1ULL << 32) - 1) / (fs->bs / 512), rest, meta;

	/* The whole tree, dense, with its 1 + (1 + a) + (1 + a + a^2)
	 * indirect blocks, fits (1 and 2 KiB blocks)? */
	if (tree + 1 + (1 + a) + (1 + a + aa) <= lim)
		return tree;
	/* Else lim less the indirect blocks a dense file of lim data blocks
	 * would have, as Linux's ext2 counts them (4 KiB blocks: 524801 of
	 * them), so that a file it wrote to its largest size is read here
	 * to its end. */
	rest = lim - E2_NDIR - a;
	if (rest < aa)
		meta = 1 + 1 + (rest + a - 1) / a;
	else {
		rest -= aa;
		meta = 1 + (1 + a) + 1 + (rest + a - 1) / a + (rest + aa - 1) / aa;
	}
	return lim - meta;
}

/* Offsets along the path to lblk; returns the depth (1..4). */
static int path_of(const struct e2fs *fs, uint64_t lblk, uint32_t off[4])
{
	uint64_t a = fs->apb;

	if (lblk < E2_NDIR) {
		off[0] = (uint32_t)lblk;
		return 1;
	}
	lblk -= E2_NDIR;
	if (lblk < a) {
		off[0] = E2_IND;
		off[1] = (uint32_t)lblk;
		return 2;
	}
	lblk -= a;
	if (lblk < a * a) {
		off[0] = E2_DIND;
		off[1] = (uint32_t)(lblk / a);
		off[2] = (uint32_t)(lblk % a);
		return 3;
	}
	lblk -= a * a;
	off[0] = E2_TIND;
	off[1] = (uint32_t)(lblk / (a * a));
	off[2] = (uint32_t)((lblk / a) % a);
	off[3] = (uint32_t)(lblk % a);
	return 4;
}

static int read_slot(struct e2fs *fs, struct e2_inode *ip, uint32_t parent, uint32_t idx,
		     uint32_t *val)
{
	struct cblock *b;
	int r;

	if (!parent) {
		*val = le32toh(ip->d.i_block[idx]);
		return 0;
	}
	r = cache_get(fs->c, parent, &b);
	if (r)
		return e2_err(fs, r, "inode %u: cannot read indirect block %u", ip->ino, parent);
	*val = le32toh(((const uint32_t *)cblock_data(b))[idx]);
	cache_put(fs->c, b);
	return 0;
}

/* Copy indirect block blk of inode ino into dst (fs->bs bytes). */
static int read_ind(struct e2fs *fs, uint32_t ino, uint32_t blk, void *dst)
{
	struct cblock *b;
	int r = cache_get(fs->c, blk, &b);

	if (r)
		return e2_err(fs, r, "inode %u: cannot read indirect block %u", ino, blk);
	memcpy(dst, cblock_data(b), fs->bs);
	cache_put(fs->c, b);
	return 0;
}

/* Follow the path to lblk.  *pblk is the mapped block or 0 for a hole;
 * *parent and *idx name the slot that holds (or would hold) it, and *level is
 * the level at which the path stops (depth-1 when only the leaf is absent). */
static int walk(struct e2fs *fs, struct e2_inode *ip, uint64_t lblk, uint32_t *pblk,
		uint32_t *parent, uint32_t *idx, int *level, int *depth)
{
	uint32_t off[4], chain[4], p = 0, v = 0;
	int d, r;

	if (lblk >= e2_max_lblk(fs))
		return -EFBIG;
	d = path_of(fs, lblk, off);
	*depth = d;
	for (int l = 0; l < d; l++) {
		r = read_slot(fs, ip, p, off[l], &v);
		if (r)
			return r;
		if (v && !e2_block_ok(fs, v))
			return e2_err(fs, -EIO, "inode %u: block %u out of range", ip->ino, v);
		for (int k = 0; k < l; k++)
			if (chain[k] == v && v)
				return e2_err(fs, -EIO, "inode %u: indirect block %u loops",
					      ip->ino, v);
		chain[l] = v;
		if (!v || l == d - 1) {
			*pblk = v;
			*parent = p;
			*idx = off[l];
			*level = l;
			return 0;
		}
		p = v;
	}
	return -EIO; /* not reached */
}

int e2_bmap(struct e2fs *fs, struct e2_inode *ip, uint64_t lblk, uint32_t *pblk)
{
	uint32_t parent, idx;
	int level, depth;

	return walk(fs, ip, lblk, pblk, &parent, &idx, &level, &depth);
}

int e2_bmap_cur(struct e2fs *fs, struct e2_inode *ip, uint64_t lblk, uint32_t *pblk,
		struct e2_bcursor *cur)
{
	uint32_t parent, idx, v;
	int level, depth, r;

	if (cur->blk && lblk >= cur->base && lblk - cur->base < fs->apb) {
		r = read_slot(fs, ip, cur->blk, (uint32_t)(lblk - cur->base), &v);
		if (r)
			return r;
		if (v && !e2_block_ok(fs, v))
			return e2_err(fs, -EIO, "inode %u: block %u out of range", ip->ino, v);
		*pblk = v;
		return 0;
	}
	r = walk(fs, ip, lblk, pblk, &parent, &idx, &level, &depth);
	if (r)
		return r;
	cur->blk = 0;
	if (depth > 1 && level == depth - 1) {
		cur->blk = parent;
		cur->base = lblk - idx;
	}
	return 0;
}

static uint32_t inode_goal(const struct e2fs *fs, const struct e2_inode *ip)
{
	if (ip->last_pblk)
		return ip->last_pblk + 1;
	return fs->g[(ip->ino - 1) / fs->ipg].first;
}

/* ---- writing ------------------------------------------------------------ */

/* An indirect block built in memory by a write: new, or a copy of an
 * existing one (copy-on-write).  Written whole, once, after what it points
 * at, and linked by one pointer change in its parent. */
struct shadow {
	uint32_t blk; /* its (newly allocated) number */
	uint32_t old; /* the block it replaces, 0 for a new one */
	int level;    /* 1: points at data blocks */
	int parent;   /* PARENT_INODE, PARENT_INPLACE or a shadow index */
	uint32_t *v;  /* contents, fs->bs bytes */
	struct patch *bit, *init;
	struct e2_deps deps; /* bits and contents of the blocks it points at */
};
#define PARENT_INODE   (-1)
#define PARENT_INPLACE (-2) /* a pointer in an existing block: wctx.cps */

/* A node on the path to a block: the inode, a shadow, or an existing
 * indirect block. */
struct node {
	int sh;	      /* shadow index, or -1 */
	uint32_t blk; /* with sh == -1: 0 for the inode, else the block */
};

/* A pointer to store in place in an existing indirect block (pass C), or
 * (in e2_write_locked's dat list, val only) a data block allocated by the
 * write. */
struct cptr {
	uint32_t parent, idx, val;
	int sh;			  /* the shadow it points at, or -1 for data */
	struct patch *bit, *init; /* in-place data pointer: references held */
};

struct cplist {
	struct cptr *e;
	size_t n, cap;
};

struct wctx {
	struct e2fs *fs;
	struct e2_inode *ip;
	struct ext2_inode_large nw; /* the inode as the write leaves it */
	bool cow;		    /* pointers go into copies, not in place */
	bool quiet;    /* what only the write shows may leave out the caller's befores */
	uint32_t goal; /* allocation goal */
	struct shadow *sh;
	size_t nsh, capsh;
	struct cplist cpd, cps; /* in-place pointers to data / to shadows */
	struct e2_deps ideps;	/* the inode patch waits for these */
	/* the path of the last block, reused while the next block has the
	 * same leaf node (one walk per indirect block, not per block) */
	struct node n[4];
	uint32_t off[4];
	int depth;
	uint64_t base; /* first lblk of n[depth - 1] */
	bool valid;    /* the path is cached (only with depth > 1) */
};

/* The scope for a change that only the size or a pointer this write sets
 * shows (unseen): without the caller's befores when w is quiet (e2_gate.c).
 * Ended by e2_scope_restore(). */
static struct patch_scope *wscope(struct wctx *w, bool unseen)
{
	return w->quiet && unseen ? e2_scope_quiet(w->fs, NULL) : w->fs->scope;
}

static int cp_add(struct cplist *l, uint32_t parent, uint32_t idx, uint32_t val, int sh,
		  struct patch *bit, struct patch *init)
{
	if (GROW(&l->e, &l->cap, l->n + 1, 16))
		return -ENOMEM;
	if (bit)
		patch_retain(bit);
	if (init)
		patch_retain(init);
	l->e[l->n++] = (struct cptr){parent, idx, val, sh, bit, init};
	return 0;
}

static void cp_free(struct e2fs *fs, struct cplist *l)
{
	for (size_t i = 0; i < l->n; i++) {
		patch_release(fs->c, l->e[i].bit);
		patch_release(fs->c, l->e[i].init);
	}
	free(l->e);
}

static void wctx_free(struct wctx *w)
{
	struct e2fs *fs = w->fs;

	for (size_t i = 0; i < w->nsh; i++) {
		patch_release(fs->c, w->sh[i].bit);
		patch_release(fs->c, w->sh[i].init);
		e2_deps_free(fs, &w->sh[i].deps);
		free(w->sh[i].v);
	}
	free(w->sh);
	cp_free(fs, &w->cpd);
	cp_free(fs, &w->cps);
	e2_deps_free(fs, &w->ideps);
}

/* Undo the allocations of a write that fails before anything links them:
 * nothing on disk can point at these blocks, so they are freed at once. */
static void wctx_unalloc(struct wctx *w, const struct cplist *dat)
{
	for (size_t i = 0; i < w->nsh; i++)
		e2_bfree(w->fs, w->sh[i].blk, NULL);
	for (size_t i = 0; i < dat->n; i++)
		e2_bfree(w->fs, dat->e[i].val, NULL);
}

/* Index of blk's record in ip->pdeps (or npdeps); records whose members
 * are all on disk are dropped on the way. */
static size_t pdep_find(struct e2fs *fs, struct e2_inode *ip, uint32_t blk)
{
	size_t i = 0, at = SIZE_MAX;

	while (i < ip->npdeps) {
		struct e2_pdep *d = &ip->pdeps[i];

		if (e2_oset_prune(fs, &d->set)) {
			*d = ip->pdeps[--ip->npdeps];
			continue;
		}
		if (d->blk == blk)
			at = i;
		i++;
	}
	return at == SIZE_MAX ? ip->npdeps : at;
}

/* deps += what the pointers in blk wait for. */
static int pdep_deps(struct e2fs *fs, struct e2_inode *ip, uint32_t blk, struct e2_deps *deps)
{
	size_t i = pdep_find(fs, ip, blk);

	return i < ip->npdeps ? e2_oset_deps(fs, &ip->pdeps[i].set, deps) : 0;
}

static void pdep_drop(struct e2fs *fs, struct e2_inode *ip, uint32_t blk)
{
	size_t i = pdep_find(fs, ip, blk);

	if (i < ip->npdeps) {
		e2_oset_release(fs, &ip->pdeps[i].set);
		ip->pdeps[i] = ip->pdeps[--ip->npdeps];
	}
}

/* Pointers in blk now also wait for deps: record that for a later copy of
 * blk, and deps gains what the earlier pointers in blk wait for.  Without
 * memory for the record, wait for deps instead. */
static int pdep_add(struct e2fs *fs, struct e2_inode *ip, uint32_t blk, struct e2_deps *deps)
{
	size_t i = pdep_find(fs, ip, blk), n = deps->n;
	int r = 0;

	if (i == ip->npdeps) {
		if (GROW(&ip->pdeps, &ip->cappdeps, ip->npdeps + 1, 4)) {
			r = -ENOMEM;
		} else {
			ip->pdeps[i].blk = blk;
			ip->pdeps[i].set = (struct e2_oset){0};
			ip->npdeps++;
		}
	}
	if (!r)
		r = e2_oset_deps(fs, &ip->pdeps[i].set, deps);
	for (size_t k = 0; k < n && !r; k++)
		r = e2_oset_add(fs, &ip->pdeps[i].set, deps->p[k]);
	if (r) {
		for (size_t k = 0; k < deps->n; k++) {
			int r2 = cache_sync_patch(fs->c, deps->p[k]);

			if (r2)
				return r2;
		}
	}
	return 0;
}

/* Replaced blocks per inode freed at once (see e2_inode.dfree). */
#define DFREE_BATCH 64

int e2_dfree_flush(struct e2fs *fs, struct e2_inode *ip)
{
	int r = 0, r2;

	for (size_t i = 0; i < ip->ndfree; i++) {
		r2 = e2_bfree(fs, ip->dfree[i], ip->dfree_p);
		if (!r)
			r = r2;
	}
	fs->ndfree -= ip->ndfree;
	ip->ndfree = 0;
	patch_release(fs->c, ip->dfree_p);
	ip->dfree_p = NULL;
	return r;
}

int e2_dfree_all(struct e2fs *fs)
{
	int r = 0, r2;

	for (size_t i = 0; fs->ndfree && i < fs->ibuckets; i++)
		for (struct e2_inode *ip = fs->itab[i]; ip; ip = ip->hnext)
			if (ip->ndfree) {
				r2 = e2_dfree_flush(fs, ip);
				if (!r)
					r = r2;
			}
	return r;
}

/* blk is no longer reachable once ipp (an inode patch) is on disk. */
static int dfree_add(struct e2fs *fs, struct e2_inode *ip, uint32_t blk, struct patch *ipp)
{
	if (GROW(&ip->dfree, &ip->capdfree, ip->ndfree + 1, 8))
		return e2_bfree(fs, blk, ipp);
	ip->dfree[ip->ndfree++] = blk;
	fs->ndfree++;
	/* a later inode patch of this inode is ordered after the earlier
	 * ones (same bytes), so the newest covers the whole batch */
	patch_retain(ipp);
	patch_release(fs->c, ip->dfree_p);
	ip->dfree_p = ipp;
	return 0;
}

/* Forget the newest shadow, whose pointer could not be stored. */
static void shadow_drop_last(struct wctx *w)
{
	struct shadow *s = &w->sh[--w->nsh];

	e2_bfree(w->fs, s->blk, NULL);
	patch_release(w->fs->c, s->bit);
	e2_deps_free(w->fs, &s->deps);
	free(s->v);
}

static int shadow_find(const struct wctx *w, uint32_t blk)
{
	for (size_t i = w->nsh; i-- > 0;)
		if (w->sh[i].blk == blk)
			return (int)i;
	return -1;
}

static int node_read(struct wctx *w, struct node n, uint32_t idx, bool leaf, uint32_t *val)
{
	int r;

	if (n.sh >= 0) {
		*val = le32toh(w->sh[n.sh].v[idx]);
		return 0;
	}
	if (!n.blk) {
		*val = le32toh(w->nw.i_block[idx]);
		return 0;
	}
	r = read_slot(w->fs, w->ip, n.blk, idx, val);
	if (r || *val || leaf)
		return r;
	/* a pointer to a new indirect block planned for this slot */
	for (size_t i = w->cps.n; i-- > 0;)
		if (w->cps.e[i].parent == n.blk && w->cps.e[i].idx == idx) {
			*val = w->cps.e[i].val;
			break;
		}
	return 0;
}

/* A new shadow for block blk (with its bitmap patch bit, which it takes);
 * old: the existing block it copies, or 0 for an empty one. */
static int shadow_new(struct wctx *w, uint32_t blk, struct patch *bit, uint32_t old, int level,
		      int *out)
{
	struct e2fs *fs = w->fs;
	struct shadow *s;
	int r;

	if (GROW(&w->sh, &w->capsh, w->nsh + 1, 8)) {
		r = -ENOMEM;
		goto fail;
	}
	s = &w->sh[w->nsh];
	memset(s, 0, sizeof(*s));
	s->v = calloc(1, fs->bs);
	if (!s->v) {
		r = -ENOMEM;
		goto fail;
	}
	s->blk = blk;
	s->old = old;
	s->level = level;
	s->parent = PARENT_INODE;
	s->bit = bit;
	w->nsh++;
	if (old) {
		r = read_ind(fs, w->ip->ino, old, s->v);
		if (r) {
			shadow_drop_last(w);
			return r;
		}
		/* The copy carries the block's pointers: it waits for what
		 * they wait for. */
		r = pdep_deps(fs, w->ip, old, &s->deps);
		if (r) {
			shadow_drop_last(w);
			return r;
		}
	}
	*out = (int)(w->nsh - 1);
	return 0;
fail:
	/* not recorded: give the block back here */
	e2_bfree(fs, blk, NULL);
	patch_release(fs->c, bit);
	return r;
}

static int set_ptr(struct wctx *w, int l, uint32_t val, int child, struct patch *bit,
		   struct patch *init);

/* Make the node at w->n[l] a shadow: a copy of the existing block old
 * (copy-on-write: its parent then points at the copy), or for old 0 a new
 * empty indirect block where the path had none. */
static int shadow_link(struct wctx *w, int l, uint32_t old)
{
	struct patch *bit = NULL;
	struct patch_scope *sc = wscope(w, true);
	uint32_t nb;
	int s = -1, r;

	r = e2_balloc(w->fs, w->goal, &nb, &bit);
	e2_scope_restore(w->fs, sc);
	if (r)
		return r;
	r = shadow_new(w, nb, bit, old, w->depth - l, &s);
	if (r)
		return r;
	w->goal = nb + 1;
	r = set_ptr(w, l - 1, nb, s, NULL, NULL);
	if (r) {
		shadow_drop_last(w);
		return r;
	}
	w->n[l] = (struct node){s, nb};
	return 0;
}

/* Store val in slot w->off[l] of node w->n[l].  val is data block (child
 * -1, with its bitmap and contents patches) or shadow child. */
static int set_ptr(struct wctx *w, int l, uint32_t val, int child, struct patch *bit,
		   struct patch *init)
{
	struct node n = w->n[l];
	uint32_t idx = w->off[l];
	struct e2_deps *d;
	int r;

	if (n.sh < 0 && n.blk) {
		if (!w->cow) {
			if (child >= 0)
				w->sh[child].parent = PARENT_INPLACE;
			return cp_add(child >= 0 ? &w->cps : &w->cpd, n.blk, idx, val, child, bit,
				      init);
		}
		r = shadow_link(w, l, n.blk);
		if (r)
			return r;
		n = w->n[l];
	}
	if (n.sh >= 0) {
		w->sh[n.sh].v[idx] = htole32(val);
		d = &w->sh[n.sh].deps;
	} else {
		w->nw.i_block[idx] = htole32(val);
		d = &w->ideps;
	}
	if (child >= 0) {
		w->sh[child].parent = n.sh >= 0 ? n.sh : PARENT_INODE;
		return 0; /* its patches are added once they exist */
	}
	r = e2_deps_addref(d, bit);
	if (!r)
		r = e2_deps_addref(d, init);
	return r;
}

/* Resolve the path to lblk into w->n/w->off, making missing indirect blocks
 * (as empty shadows).  *leaf gets the data block, 0 for a hole. */
static int wpath(struct wctx *w, uint64_t lblk, uint32_t *leaf)
{
	struct e2fs *fs = w->fs;
	uint32_t v;
	int d, r;

	if (w->valid && lblk >= w->base && lblk - w->base < fs->apb) {
		w->off[w->depth - 1] = (uint32_t)(lblk - w->base);
		return node_read(w, w->n[w->depth - 1], w->off[w->depth - 1], true, leaf);
	}
	w->valid = false;
	if (lblk >= e2_max_lblk(fs))
		return -EFBIG;
	d = path_of(fs, lblk, w->off);
	w->depth = d;
	w->n[0] = (struct node){-1, 0};
	for (int l = 1; l < d; l++) {
		r = node_read(w, w->n[l - 1], w->off[l - 1], false, &v);
		if (r)
			return r;
		if (!v) {
			r = shadow_link(w, l, 0);
			if (r)
				return r;
			continue;
		}
		if (!e2_block_ok(fs, v))
			return e2_err(fs, -EIO, "inode %u: block %u out of range", w->ip->ino, v);
		for (int k = 1; k < l; k++)
			if (w->n[k].blk == v)
				return e2_err(fs, -EIO, "inode %u: indirect block %u loops",
					      w->ip->ino, v);
		w->n[l] = (struct node){shadow_find(w, v), v};
	}
	r = node_read(w, w->n[d - 1], w->off[d - 1], true, leaf);
	if (r)
		return r;
	if (d > 1) {
		w->base = lblk - w->off[d - 1];
		w->valid = true;
	}
	return 0;
}

/* Write shadow s after what its pointers wait for.  Those go into the
 * block's record first, and the contents wait for the record's set, which
 * stands for every one of them: waiting for each member as well would
 * give each of them a second edge, and a file that grows by appends makes
 * a copy of its indirect block per write, each after the data blocks
 * still kept aside in the record and the new one.  Without a record (no
 * memory: pdep_add() then waited for the members to be durable) the
 * contents wait for the members themselves. */
static int write_shadow(struct wctx *w, struct shadow *s)
{
	struct e2fs *fs = w->fs;
	struct e2_deps own = {0};
	struct patch_scope *sc;
	int r;

	r = pdep_add(fs, w->ip, s->blk, &s->deps);
	if (!r)
		r = pdep_deps(fs, w->ip, s->blk, &own);
	sc = wscope(w, true);
	if (!r)
		r = e2_block_init(fs, s->blk, s->v, own.n ? &own : &s->deps, &s->init);
	e2_scope_restore(fs, sc);
	e2_deps_free(fs, &own);
	return r;
}

/* Write every shadow, deepest level first, each after what it points at,
 * and hand its patches to its parent. */
static int write_shadows(struct wctx *w)
{
	struct e2fs *fs = w->fs;
	int r;

	for (int lv = 1; lv <= 3; lv++)
		for (size_t i = 0; i < w->nsh; i++) {
			struct shadow *s = &w->sh[i];
			struct e2_deps *d;

			if (s->level != lv)
				continue;
			r = write_shadow(w, s);
			if (r)
				return r;
			e2_isync_add(fs, w->ip, s->init);
			if (s->parent == PARENT_INPLACE)
				continue; /* pass C takes them from the shadow */
			d = s->parent == PARENT_INODE ? &w->ideps : &w->sh[s->parent].deps;
			if ((r = e2_deps_addref(d, s->bit)) || (r = e2_deps_addref(d, s->init)))
				return r;
		}
	return 0;
}

/* Pass C: pointers stored in place in existing indirect blocks, runs of
 * adjacent slots in one patch, after the inode patch (which raised
 * i_blocks) and after the blocks they point at. */
static int write_inplace(struct wctx *w, struct cplist *l, struct patch *ipp, struct e2_deps *all)
{
	struct e2fs *fs = w->fs;
	struct e2_deps cdeps = {0};
	uint32_t *vals = (uint32_t *)fs->wtmp;
	int r = 0;

	for (size_t i = 0; i < l->n && !r;) {
		size_t j = i;
		struct patch *p = NULL;

		e2_deps_free(fs, &cdeps);
		while (!r && j < l->n && l->e[j].parent == l->e[i].parent &&
		       l->e[j].idx == l->e[i].idx + (j - i)) {
			const struct cptr *c = &l->e[j];

			vals[j - i] = htole32(c->val);
			if (c->sh >= 0) {
				if (!(r = e2_deps_addref(&cdeps, w->sh[c->sh].bit)))
					r = e2_deps_addref(&cdeps, w->sh[c->sh].init);
			} else if (!(r = e2_deps_addref(&cdeps, c->bit))) {
				r = e2_deps_addref(&cdeps, c->init);
			}
			j++;
		}
		if (!r)
			r = pdep_add(fs, w->ip, l->e[i].parent, &cdeps);
		if (!r)
			r = e2_deps_addref(&cdeps, ipp);
		if (!r)
			r = e2_patch(fs, l->e[i].parent, l->e[i].idx * 4, (uint32_t)(4 * (j - i)),
				     vals, &cdeps, &p);
		if (!r) {
			e2_isync_add(fs, w->ip, p);
			r = e2_deps_add(all, p);
		}
		i = j;
	}
	e2_deps_free(fs, &cdeps);
	return r;
}

/* Write size bytes at off.  The soft-updates order:
 *   A. new data blocks are allocated and written whole (bitmap bit, then
 *      contents); mapped blocks are overwritten in place; new indirect
 *      blocks are built in memory;
 *   B. the indirect blocks built are written whole, each after the blocks
 *      it points at; then one inode patch (size, times, i_blocks, direct
 *      and top-level pointers) after the blocks it points at and, when the
 *      size grows, after the data it covers;
 *   C. pointers stored in place in existing indirect blocks, after the
 *      inode patch (i_blocks is never below what the pointers reach).
 * A write that raises the size stores no pointer in place: it copies each
 * existing indirect block it must change (copy-on-write) and frees the old
 * one after the inode patch.  So the new size and every pointer to the data
 * it covers reach disk in the one inode write: a crash shows the file with
 * its old size and blocks or with its new ones, never a size over a hole
 * nor blocks past the size.  A write below the size (into holes) stores in
 * place: until the pointer lands the hole reads as zeros, as before.
 * extra: deps for every data patch (a new directory block's entry waits for
 * its inode).  Returns the byte count, or -errno if nothing was written.
 * *linked (if not NULL) gets an empty patch that commits once every new
 * block is reachable. */
int e2_write_locked(struct e2fs *fs, struct e2_inode *ip, const void *buf, size_t size,
		    uint64_t off, bool dir, struct e2_deps *extra, struct patch **linked)
{
	struct wctx w = {0};
	struct cplist dat = {0};
	struct e2_deps ddeps = {0}, all = {0};
	struct patch *ipp = NULL, *lf = NULL;
	uint8_t *tmp = fs->wtmp;
	uint64_t maxb = e2_max_size(fs), end, pos, oldsize = e2_isize(&ip->d), past;
	size_t done = 0;
	uint32_t nnew;
	int r = 0, stop_r = 0;
	bool ocov;

	if (fs->ro)
		return -EROFS;
	if (size == 0)
		return 0;
	if (off >= maxb)
		return -EFBIG;
	if (size > maxb - off)
		size = (size_t)(maxb - off);
	end = off + size;
	w.fs = fs;
	w.ip = ip;
	w.nw = ip->d;
	/* Under a journal the inode and the pointers stored in place are
	 * in one transaction (a piece of a write is: e2_jroom), kept or
	 * lost together: copies would only add a block to every commit. */
	w.cow = end > oldsize && !e2_journaling(fs);
	/* Blocks waiting in free batches are not free yet: give them back
	 * before the space they hold is missed. */
	if (fs->ndfree && fs->free_blocks < 2 * fs->ndfree + size / fs->bs + 64)
		e2_dfree_all(fs);
	if (w.cow) {
		/* Copies need room.  On a nearly full file system a growing
		 * write stores pointers in place (as a write into holes
		 * does), so that it can use the last free blocks: a crash
		 * may then show the new size over a hole (zeros), never
		 * another file's data. */
		uint64_t nb = (end - 1) / fs->bs - off / fs->bs + 1;

		if (fs->free_blocks < nb + 3 * (nb / fs->apb + 2))
			w.cow = false;
	}
	w.goal = inode_goal(fs, ip);
	/* A new file's gate (e2_gate.c) that waited for the whole
	 * rename_order set: so does the size below. */
	ocov = !dir && e2_gate_order_covered(fs, ip->gate, fs->order_gen);
	/* Bytes past every size the file may have on disk, and a new block,
	 * are seen only through the size or pointer that this write sets,
	 * which keeps the caller's befores: under soft updates they leave
	 * them out (e2_gate.c). */
	w.quiet = !dir && e2_gating(fs);
	past = w.quiet ? e2_isize_hi(fs, ip) : UINT64_MAX;
	/* Pass A */
	for (pos = off; pos < end;) {
		uint64_t lblk = pos / fs->bs;
		uint32_t boff = (uint32_t)(pos % fs->bs), len = fs->bs - boff;
		uint32_t pblk;
		struct patch *p = NULL, *bit = NULL;
		struct patch_scope *sc;

		if (len > end - pos)
			len = (uint32_t)(end - pos);
		r = wpath(&w, lblk, &pblk);
		if (r)
			break;
		if (pblk) {
			sc = wscope(&w, pos >= past);
			fs->jdata = !dir;
			r = e2_patch(fs, pblk, boff, len, (const uint8_t *)buf + (pos - off), extra,
				     &p);
			fs->jdata = false;
			e2_scope_restore(fs, sc);
			if (r)
				break;
			e2_isync_add(fs, ip, p);
			w.goal = pblk + 1;
			r = dir ? 0 : e2_order_add(fs, p);
			if (!r)
				r = e2_deps_add(&ddeps, p);
			if (r)
				break;
			pos += len;
			done = pos - off;
			continue;
		}
		sc = wscope(&w, true);
		r = e2_balloc(fs, w.goal, &pblk, &bit);
		if (r) {
			e2_scope_restore(fs, sc);
			break;
		}
		memset(tmp, 0, fs->bs);
		memcpy(tmp + boff, (const uint8_t *)buf + (pos - off), len);
		fs->jdata = !dir;
		fs->jnew = !dir;
		r = e2_block_init(fs, pblk, tmp, extra, &p);
		fs->jdata = false;
		fs->jnew = false;
		e2_scope_restore(fs, sc);
		if (r) {
			e2_bfree(fs, pblk, NULL);
			patch_release(fs->c, bit);
			break;
		}
		e2_isync_add(fs, ip, p);
		/* Recorded before it is linked, so that a failure after the
		 * link still frees it; the pointer's deps hold bit and p. */
		r = dir ? 0 : e2_order_add(fs, p);
		if (!r)
			r = cp_add(&dat, 0, 0, pblk, -1, NULL, NULL);
		if (!r) {
			r = set_ptr(&w, w.depth - 1, pblk, -1, bit, p);
			if (r)
				dat.n--; /* not linked (no room for a copy
					  * of its indirect block) */
		}
		patch_release(fs->c, bit);
		patch_release(fs->c, p);
		if (r) {
			e2_bfree(fs, pblk, NULL);
			break;
		}
		w.goal = pblk + 1;
		pos += len;
		done = pos - off;
	}
	stop_r = r;
	/* (only this file's own data joined the set since) */
	if (ocov)
		ip->gate->ogen = fs->order_gen;
	if (r && r != -ENOSPC && r != -EFBIG) {
		/* Metadata trouble: link nothing new.  Data overwritten in
		 * place stays; the size does not move. */
		wctx_unalloc(&w, &dat);
		goto out;
	}
	if (!done) {
		/* Nothing written: the indirect blocks made on the way are
		 * not needed. */
		wctx_unalloc(&w, &dat);
		goto out;
	}
	/* Pass B */
	r = write_shadows(&w);
	if (r)
		goto out;
	if (off + done > oldsize) {
		/* The size covers the data written and a tail zeroed by an
		 * earlier shrink. */
		for (size_t i = 0; i < ddeps.n; i++) {
			r = e2_deps_addref(&w.ideps, ddeps.p[i]);
			if (r)
				goto out;
		}
		e2_patch_drop_committed(fs, &ip->tailz);
		r = e2_deps_addref(&w.ideps, ip->tailz);
		/* rename_order=all: a longer size publishes the new bytes as
		 * a rename publishes a file (an append to a log that names
		 * other files): after every earlier data write, rename and
		 * link. */
		if (!r && !dir && !ocov)
			r = e2_order_deps(fs, &w.ideps);
		if (r)
			goto out;
		if (off + done > 0x7fffffffULL && !dir) {
			r = e2_sb_set_large_file(fs, &lf);
			if (r)
				goto out;
			r = e2_deps_add(&w.ideps, lf);
			if (r)
				goto out;
		}
		e2_iset_size(&w.nw, off + done);
	}
	/* i_blocks grows by the data blocks and the indirect blocks that
	 * are new (not copies, which replace a block). */
	nnew = (uint32_t)dat.n;
	for (size_t i = 0; i < w.nsh; i++)
		nnew += !w.sh[i].old;
	w.nw.i_blocks = htole32(le32toh(w.nw.i_blocks) + nnew * (fs->bs / 512));
	{
		struct timespec now;

		e2_now_ts(fs, &now);
		e2_iset_time(fs, &w.nw, E2_T_MTIME, &now);
		e2_iset_time(fs, &w.nw, E2_T_CTIME, &now);
	}
	r = e2_iwrite(fs, ip, &w.nw, &w.ideps, &ipp);
	if (r)
		goto out;
	/* The copies replaced their originals in the inode patch: free
	 * those once it is on disk, in batches (without an after for the
	 * inode patch, the next write's inode change merges into it). */
	if (ip->dfree_p && patch_committed(ip->dfree_p))
		e2_dfree_flush(fs, ip); /* no wait: frees at once */
	for (size_t i = 0; i < w.nsh; i++)
		if (w.sh[i].old) {
			pdep_drop(fs, ip, w.sh[i].old);
			r = dfree_add(fs, ip, w.sh[i].old, ipp);
			if (r)
				goto out;
		}
	if (ip->ndfree >= DFREE_BATCH) {
		r = e2_dfree_flush(fs, ip);
		if (r)
			goto out;
	}
	/* Pass C */
	r = write_inplace(&w, &w.cpd, ipp, &all);
	if (!r)
		r = write_inplace(&w, &w.cps, ipp, &all);
	if (r)
		goto out;
	for (size_t i = 0; i < w.nsh && !r; i++)
		r = e2_deps_addref(&all, w.sh[i].init);
	if (r)
		goto out;
	if (dat.n)
		ip->last_pblk = dat.e[dat.n - 1].val;
	if (linked) {
		r = e2_deps_addref(&all, ipp);
		if (!r)
			r = patch_create_empty(fs->c, all.p, all.n, linked);
		if (r)
			goto out;
	}
	r = stop_r;
out:
	patch_release(fs->c, ipp);
	e2_deps_free(fs, &ddeps);
	e2_deps_free(fs, &all);
	cp_free(fs, &dat);
	wctx_free(&w);
	if (done && (!r || r == -ENOSPC || r == -EFBIG))
		return (int)(done > 0x7fffffff ? 0x7fffffff : done);
	return r;
}

/* ---- freeing ----------------------------------------------------------- */

struct flist {
	uint32_t *b;
	size_t n, cap;
	/* indirect blocks already walked, to stop loops and repeats */
	uint32_t *seen;
	size_t nseen, capseen;
};

static int fl_push(uint32_t **a, size_t *n, size_t *cap, uint32_t v)
{
	if (GROW(a, cap, *n + 1, 64))
		return -ENOMEM;
	(*a)[(*n)++] = v;
	return 0;
}

/* Collect blk and, for level > 0, everything below it. */
static int collect(struct e2fs *fs, struct e2_inode *ip, uint32_t blk, int level, struct flist *fl)
{
	uint32_t *kids;
	int r;

	if (!e2_block_ok(fs, blk))
		return e2_err(fs, -EIO, "inode %u: block %u out of range", ip->ino, blk);
	if (level > 0) {
		for (size_t i = 0; i < fl->nseen; i++)
			if (fl->seen[i] == blk)
				return e2_err(fs, -EIO, "inode %u: indirect block %u repeated",
					      ip->ino, blk);
		r = fl_push(&fl->seen, &fl->nseen, &fl->capseen, blk);
		if (r)
			return r;
	}
	r = fl_push(&fl->b, &fl->n, &fl->cap, blk);
	if (r || level == 0)
		return r;
	kids = fs->kids[level - 1];
	r = read_ind(fs, ip->ino, blk, kids);
	if (r)
		return r;
	for (uint32_t i = 0; i < fs->apb && !r; i++)
		if (kids[i])
			r = collect(fs, ip, le32toh(kids[i]), level - 1, fl);
	return r;
}

static int free_list(struct e2fs *fs, struct flist *fl, size_t from, struct patch *clear)
{
	int r = 0, r2;

	for (size_t i = from; i < fl->n; i++) {
		r2 = e2_bfree(fs, fl->b[i], clear);
		if (!r)
			r = r2;
	}
	return r;
}

static void fl_free(struct flist *fl)
{
	free(fl->b);
	free(fl->seen);
}

int e2_free_all_blocks(struct e2fs *fs, struct e2_inode *ip, struct patch *clear)
{
	struct flist fl = {0};
	int r = 0, r2;

	for (int i = 0; i < EXT2_N_BLOCKS; i++) {
		uint32_t v = le32toh(ip->d.i_block[i]);

		if (!v)
			continue;
		r2 = collect(fs, ip, v, i < E2_NDIR ? 0 : i - E2_NDIR + 1, &fl);
		if (r2 == -ENOMEM) {
			r = r2;
			goto out;
		}
		if (!r)
			r = r2;
	}
	r2 = free_list(fs, &fl, 0, clear);
	if (!r)
		r = r2;
out:
	fl_free(&fl);
	return r;
}

/* How many lblks one pointer of an indirect block at level (>= 1) maps. */
static uint64_t span_of(const struct e2fs *fs, int level)
{
	uint64_t span = 1;

	for (int l = 1; l < level; l++)
		span *= fs->apb;
	return span;
}

/* Read ip's indirect block blk, at level (>= 1), into that level's scratch
 * buffer: a walk down the tree keeps one buffer a level, so a parent's
 * pointers stay put while its children are read. */
static int read_kids(struct e2fs *fs, struct e2_inode *ip, uint32_t blk, int level, uint32_t **kids)
{
	int r;

	if (!e2_block_ok(fs, blk))
		return e2_err(fs, -EIO, "inode %u: block %u out of range", ip->ino, blk);
	r = read_ind(fs, ip->ino, blk, fs->kids[level - 1]);
	if (!r)
		*kids = fs->kids[level - 1];
	return r;
}

/* The end of a truncate or punch: lower i_blocks by the nfreed blocks
 * freed below indirect blocks and those in top (what the inode itself
 * pointed to), write the inode after the clears, and free top's blocks
 * only after that write. */
static int iwrite_and_free(struct e2fs *fs, struct e2_inode *ip, struct ext2_inode_large *nw,
			   struct e2_deps *clears, struct flist *top, uint32_t nfreed)
{
	uint32_t ib = le32toh(nw->i_blocks), dec;
	struct patch *ipp = NULL;
	int r;

	nfreed += (uint32_t)top->n;
	dec = nfreed * (fs->bs / 512);
	nw->i_blocks = htole32(ib > dec ? ib - dec : 0);
	r = e2_iwrite(fs, ip, nw, clears, &ipp);
	if (!r)
		r = free_list(fs, top, 0, ipp);
	patch_release(fs->c, ipp);
	return r;
}

/* Write kids[first..last], already zeroed where a child goes, back to the
 * indirect block blk in one patch, and free the blocks in fl (the children
 * and all below them) after that patch: a pointer is cleared before its
 * block is free.  The inode update that follows (the smaller size or
 * i_blocks) must not reach disk before the clear, so the patch joins
 * clears; where it cannot, the clear is waited for here.  fsync_ip, when
 * not NULL, records the clear among that inode's changes for fsync
 * directly, not only through the inode update that depends on it (punch
 * passes its inode, truncate NULL). */
static int clear_and_free(struct e2fs *fs, struct e2_inode *fsync_ip, uint32_t blk, uint32_t *kids,
			  uint32_t first, uint32_t last, struct flist *fl, struct e2_deps *clears,
			  uint32_t *nfreed)
{
	struct patch *p = NULL;
	int r, r2;

	r = e2_patch(fs, blk, first * 4, (last - first + 1) * 4, kids + first, NULL, &p);
	if (r)
		return r;
	if (fsync_ip)
		e2_isync_add(fs, fsync_ip, p);
	r = free_list(fs, fl, 0, p);
	*nfreed += (uint32_t)fl->n;
	if (e2_deps_add(clears, p)) {
		r2 = cache_sync_patch(fs->c, p);
		patch_release(fs->c, p);
		if (!r)
			r = r2;
	}
	return r;
}

/* *any: whether the subtree at blk (level >= 1, covering lblks from base)
 * maps a data block at an lblk below `below`.  An indirect block that maps
 * none there is left empty by a truncate to `below`, and goes with it, as
 * Linux's ext2 frees it (a sparse file cut just before its only block far
 * out kept its indirect blocks). */
static int maps_below(struct e2fs *fs, struct e2_inode *ip, uint32_t blk, int level, uint64_t base,
		      uint64_t below, bool *any)
{
	uint64_t span = span_of(fs, level);
	uint32_t *kids;
	int r;

	*any = false;
	r = read_kids(fs, ip, blk, level, &kids);
	for (uint32_t i = 0; !r && i < fs->apb && base + i * span < below; i++) {
		uint32_t v = le32toh(kids[i]);

		if (!v)
			continue;
		if (level == 1) {
			*any = true;
			return 0;
		}
		r = maps_below(fs, ip, v, level - 1, base + i * span, below, any);
		if (*any)
			return r;
	}
	return r;
}

/* Truncate the subtree at blk (level >= 1, covering lblks from base) so that
 * only lblks below keep remain.  Whole children are cleared from this block
 * in one patch; the blocks under them are freed after that patch. */
static int trunc_partial(struct e2fs *fs, struct e2_inode *ip, uint32_t blk, int level,
			 uint64_t base, uint64_t keep, struct e2_deps *clears, uint32_t *nfreed)
{
	uint64_t span = span_of(fs, level);
	uint32_t *kids, first = UINT32_MAX;
	struct flist fl = {0};
	int r;

	r = read_kids(fs, ip, blk, level, &kids);
	if (r)
		return r;
	for (uint32_t i = 0; i < fs->apb; i++) {
		uint64_t cb = base + i * span;
		uint32_t v = le32toh(kids[i]);
		bool any = true;

		if (!v || cb + span <= keep)
			continue;
		/* the child that keep cuts: whole if it keeps nothing */
		if (cb < keep && level > 1) {
			r = maps_below(fs, ip, v, level - 1, cb, keep, &any);
			if (r)
				goto out;
		}
		if (cb >= keep || !any) {
			if (first == UINT32_MAX)
				first = i;
			r = collect(fs, ip, v, level - 1, &fl);
			if (r)
				goto out;
			kids[i] = 0;
		} else if (level > 1) {
			r = trunc_partial(fs, ip, v, level - 1, cb, keep, clears, nfreed);
			if (r)
				goto out;
		}
	}
	if (first != UINT32_MAX)
		r = clear_and_free(fs, NULL, blk, kids, first, fs->apb - 1, &fl, clears, nfreed);
out:
	fl_free(&fl);
	return r;
}

/* The lblks the inode's indirect trees map: tree t (0 single, 1 double, 2
 * triple indirect, at i_block[E2_IND + t]) maps span[t] lblks from base[t]. */
struct trees {
	uint64_t base[3], span[3];
};

static void trees_of(const struct e2fs *fs, struct trees *tr)
{
	uint64_t a = fs->apb;

	*tr = (struct trees){{E2_NDIR, E2_NDIR + a, E2_NDIR + a + a * a}, {a, a * a, a * a * a}};
}

/* Take the block (level 0) or tree (level >= 1) that slot of the inode
 * points to out of nw into fl, to be freed once the inode update that
 * clears the pointer is on disk. */
static int detach(struct e2fs *fs, struct e2_inode *ip, struct ext2_inode_large *nw, unsigned slot,
		  int level, struct flist *fl)
{
	int r = collect(fs, ip, le32toh(nw->i_block[slot]), level, fl);

	if (!r)
		nw->i_block[slot] = 0;
	return r;
}

/* Free the blocks at and past lblk ceil(size / bs), zero the rest of the
 * block size falls in, and write the inode with i_size isize (size itself
 * but in a truncate cut into transactions: trunc_chain).  Pointers are
 * cleared before the blocks are marked free; cleared pointers in indirect
 * blocks reach disk before the inode update does, so no block is ever
 * mapped beyond i_size on disk. */
static int trunc_to(struct e2fs *fs, struct e2_inode *ip, uint64_t size, uint64_t isize)
{
	uint64_t keep;
	struct trees tr;
	struct e2_deps clears = {0};
	struct flist top = {0};
	struct ext2_inode_large nw = ip->d;
	uint32_t nfreed = 0;
	int r = 0;

	if (size % fs->bs) {
		uint32_t pblk, boff = (uint32_t)(size % fs->bs);

		r = e2_bmap(fs, ip, size / fs->bs, &pblk);
		if (r)
			return r;
		if (pblk) {
			struct patch *zp = NULL;

			/* Later growth must read zeros here, also after a
			 * crash: every later size increase depends on this. */
			fs->jdata = !e2_idir(ip);
			r = e2_patch(fs, pblk, boff, fs->bs - boff, fs->wzero, NULL, &zp);
			fs->jdata = false;
			if (r)
				return r;
			patch_release(fs->c, ip->tailz);
			ip->tailz = zp;
		}
	}
	keep = (size + fs->bs - 1) / fs->bs;
	for (uint32_t i = 0; i < E2_NDIR; i++) {
		if (i < keep || !nw.i_block[i])
			continue;
		r = detach(fs, ip, &nw, i, 0, &top);
		if (r)
			goto out;
	}
	trees_of(fs, &tr);
	for (int t = 0; t < 3; t++) {
		uint32_t v = le32toh(nw.i_block[E2_IND + t]);
		bool any = true;

		if (!v || keep >= tr.base[t] + tr.span[t])
			continue;
		if (keep > tr.base[t]) {
			r = maps_below(fs, ip, v, t + 1, tr.base[t], keep, &any);
			if (r)
				goto out;
		}
		if (keep <= tr.base[t] || !any) {
			r = detach(fs, ip, &nw, E2_IND + t, t + 1, &top);
			if (r)
				goto out;
		} else {
			r = trunc_partial(fs, ip, v, t + 1, tr.base[t], keep, &clears, &nfreed);
			if (r)
				goto out;
		}
	}
	e2_iset_size(&nw, isize);
	r = iwrite_and_free(fs, ip, &nw, &clears, &top, nfreed);
out:
	e2_deps_free(fs, &clears);
	fl_free(&top);
	return r;
}

/* ---- truncating under a journal --------------------------------------- */

/* The highest lblk below `below` that the indirect block blk (level >= 1,
 * mapping lblks from base) has something at: a data block, or an indirect
 * block under it, which stands at the first lblk it maps (a truncate to
 * that lblk or lower frees it).  *found is false if there is none. */
static int last_in(struct e2fs *fs, struct e2_inode *ip, uint32_t blk, int level, uint64_t base,
		   uint64_t below, uint64_t *at, bool *found)
{
	uint64_t span = span_of(fs, level);
	uint32_t *kids;
	int r;

	r = read_kids(fs, ip, blk, level, &kids);
	for (uint32_t i = fs->apb; !r && i-- > 0;) {
		uint64_t cb = base + i * span;
		uint32_t v = le32toh(kids[i]);

		if (!v || cb >= below)
			continue;
		if (level > 1) {
			r = last_in(fs, ip, v, level - 1, cb, below, at, found);
			if (r || *found)
				return r;
		}
		*at = cb;
		*found = true;
		return 0;
	}
	return r;
}

/* The same for the whole inode. */
static int last_used(struct e2fs *fs, struct e2_inode *ip, uint64_t below, uint64_t *at,
		     bool *found)
{
	struct trees tr;
	int r;

	*found = false;
	trees_of(fs, &tr);
	for (int t = 2; t >= 0; t--) {
		uint32_t v = le32toh(ip->d.i_block[E2_IND + t]);

		if (!v || tr.base[t] >= below)
			continue;
		r = last_in(fs, ip, v, t + 1, tr.base[t], below, at, found);
		if (r || *found)
			return r;
		*at = tr.base[t];
		*found = true;
		return 0;
	}
	for (uint32_t i = E2_NDIR; i-- > 0;)
		if (i < below && ip->d.i_block[i]) {
			*at = i;
			*found = true;
			break;
		}
	return 0;
}

/* Shrink to size under a journal, where a transaction must fit in the log:
 * the blocks of a large file, or of one spread over many block groups,
 * take a bitmap block and a group descriptor block each in the worst case,
 * more than the log holds.  Freed from the end in steps, each of which
 * fits one transaction (e2_jroom commits before it when the running one
 * is full): step by step every transaction leaves a whole file system.
 * With the orphan list the inode joins it before the first step (unless
 * it is there already) and i_size is the final size from the first step
 * on: a crash in between leaves it on the list, and the next mount (or
 * e2fsck) finishes the cut, as ext3's truncate does; it leaves the list
 * with the last step.  Without the list each step is a truncate of its
 * own, to a size between.  *done is false, and nothing changed, when one
 * step does it all. */
static int trunc_chain(struct e2fs *fs, struct e2_inode *ip, uint64_t size, bool *done)
{
	uint64_t old = e2_isize(&ip->d), keep = (size + fs->bs - 1) / fs->bs;
	uint64_t end, n, half, step, isize;
	bool found, join = false, listed;
	int r;

	*done = false;
	r = last_used(fs, ip, UINT64_MAX, &end, &found);
	if (r || !found || end < keep || end + 1 - keep <= e2_jpiece_max(fs) / 2)
		return r;
	end++;
	*done = true;
	if (!ip->orphan && e2_orphans_on(fs)) {
		r = e2_orphan_add(fs, ip);
		if (r)
			return r;
		join = true;
	}
	listed = ip->orphan;
	for (;;) {
		r = e2_jroom(fs, 2 * (end - keep), &n);
		if (r)
			return r;
		/* a step's n lblks free at most n data blocks and n / apb + 3
		 * indirect blocks, each with its bitmap block and group
		 * descriptor block in the worst case: e2_jroom(2n) allows
		 * for that */
		half = n / 2 ? n / 2 : 1;
		if (end - keep <= half)
			break;
		step = end - half;
		/* the size the step writes: the final one while listed */
		isize = step * fs->bs < old ? step * fs->bs : old;
		r = trunc_to(fs, ip, step * fs->bs, listed ? size : isize);
		if (!r)
			r = last_used(fs, ip, step, &end, &found);
		if (r)
			return r;
		end = found && end >= keep ? end + 1 : keep;
	}
	r = trunc_to(fs, ip, size, size);
	if (!r && join)
		r = e2_orphan_del(fs, ip, NULL);
	return r;
}

/* Set the size; when shrinking, free the blocks past the end (trunc_to;
 * under a journal, in steps that each fit a transaction: trunc_chain). */
int e2_truncate_locked(struct e2fs *fs, struct e2_inode *ip, uint64_t size)
{
	uint64_t old = e2_isize(&ip->d);
	struct e2_deps clears = {0};
	struct ext2_inode_large nw;
	struct patch *lf = NULL;
	bool done;
	int r = 0;

	if (fs->ro)
		return -EROFS;
	if (size > e2_max_size(fs))
		return -EFBIG;
	nw = ip->d;
	if (size >= old) {
		e2_patch_drop_committed(fs, &ip->tailz);
		r = e2_deps_addref(&clears, ip->tailz);
		if (r)
			return r;
		if (size > 0x7fffffffULL) {
			r = e2_sb_set_large_file(fs, &lf);
			if (r)
				return r;
			r = e2_deps_add(&clears, lf);
			if (r)
				return r;
		}
		e2_iset_size(&nw, size);
		r = e2_iwrite(fs, ip, &nw, &clears, NULL);
		e2_deps_free(fs, &clears);
		return r;
	}
	if (e2_journaling(fs)) {
		r = trunc_chain(fs, ip, size, &done);
		if (r || done)
			return r;
	}
	return trunc_to(fs, ip, size, size);
}

int e2_free_in_steps(struct e2fs *fs, struct e2_inode *ip)
{
	bool done;

	if (fs->ro || !e2_journaling(fs))
		return 0;
	return trunc_chain(fs, ip, 0, &done);
}

/* ---- punching holes ---------------------------------------------------- */

static bool inside(uint64_t cb, uint64_t span, uint64_t lo, uint64_t hi)
{
	return cb >= lo && cb + span <= hi;
}

/* 1 if the subtree at blk (level >= 1, mapping lblks from base) keeps no
 * pointer once [lo, hi) is punched out of it, 0 if it does, or -errno. */
static int punch_empties(struct e2fs *fs, struct e2_inode *ip, uint32_t blk, int level,
			 uint64_t base, uint64_t lo, uint64_t hi)
{
	uint64_t span = span_of(fs, level);
	uint32_t *kids;
	int r;

	r = read_kids(fs, ip, blk, level, &kids);
	if (r)
		return r;
	for (uint32_t i = 0; i < fs->apb; i++) {
		uint64_t cb = base + i * span;

		if (!kids[i] || inside(cb, span, lo, hi))
			continue;
		if (cb + span <= lo || cb >= hi || level == 1)
			return 0;
		/* (reads into the next level's scratch: kids stays) */
		r = punch_empties(fs, ip, le32toh(kids[i]), level - 1, cb, lo, hi);
		if (r <= 0)
			return r;
	}
	return 1;
}

/* Punch [lo, hi) out of the subtree at blk (level >= 1), which keeps some
 * pointer.  Children wholly inside the range, and children the punch
 * leaves empty, are cleared from blk in one patch and freed (with all
 * below them) only after that patch: truncate's rule, pointer cleared
 * before the block is free.  A child partly inside is punched in turn. */
static int punch_tree(struct e2fs *fs, struct e2_inode *ip, uint32_t blk, int level, uint64_t base,
		      uint64_t lo, uint64_t hi, struct e2_deps *clears, uint32_t *nfreed)
{
	uint64_t span = span_of(fs, level);
	uint32_t *kids, first = UINT32_MAX, last = 0;
	struct flist fl = {0};
	int r;

	r = read_kids(fs, ip, blk, level, &kids);
	if (r)
		return r;
	for (uint32_t i = 0; i < fs->apb; i++) {
		uint64_t cb = base + i * span;
		uint32_t v = le32toh(kids[i]);
		int gone = 0;

		if (!v || cb + span <= lo || cb >= hi)
			continue;
		if (inside(cb, span, lo, hi)) {
			gone = 1;
		} else if (level > 1) {
			gone = punch_empties(fs, ip, v, level - 1, cb, lo, hi);
			if (gone == 0)
				gone = punch_tree(fs, ip, v, level - 1, cb, lo, hi, clears, nfreed);
			if (gone < 0) {
				r = gone;
				goto out;
			}
		}
		if (gone == 1) {
			r = collect(fs, ip, v, level - 1, &fl);
			if (r)
				goto out;
			kids[i] = 0;
			if (first == UINT32_MAX)
				first = i;
			last = i;
		}
	}
	if (first != UINT32_MAX)
		r = clear_and_free(fs, ip, blk, kids, first, last, &fl, clears, nfreed);
out:
	fl_free(&fl);
	return r;
}

/* Free the blocks of lblks [lo, hi) of ip, and the indirect blocks that
 * map nothing afterwards.  The size stays.  Pointers in indirect blocks
 * are cleared in place, each patch before the frees it allows; the inode
 * update (its own cleared pointers, the lower i_blocks, the times) comes
 * after those clears, so i_blocks on disk is never below what the
 * pointers reach, and the blocks it no longer points to are freed after
 * it. */
int e2_punch_locked(struct e2fs *fs, struct e2_inode *ip, uint64_t lo, uint64_t hi)
{
	struct trees tr;
	struct e2_deps clears = {0};
	struct flist top = {0};
	struct ext2_inode_large nw;
	struct timespec now;
	uint32_t nfreed = 0;
	int r = 0;

	if (fs->ro)
		return -EROFS;
	nw = ip->d;
	for (uint64_t i = lo; i < hi && i < E2_NDIR; i++) {
		if (!nw.i_block[i])
			continue;
		r = detach(fs, ip, &nw, (unsigned)i, 0, &top);
		if (r)
			goto out;
	}
	trees_of(fs, &tr);
	for (int t = 0; t < 3; t++) {
		uint32_t v = le32toh(nw.i_block[E2_IND + t]);
		int gone;

		if (!v || tr.base[t] + tr.span[t] <= lo || tr.base[t] >= hi)
			continue;
		if (inside(tr.base[t], tr.span[t], lo, hi)) {
			gone = 1;
		} else {
			gone = punch_empties(fs, ip, v, t + 1, tr.base[t], lo, hi);
			if (gone == 0)
				gone = punch_tree(fs, ip, v, t + 1, tr.base[t], lo, hi, &clears,
						  &nfreed);
		}
		if (gone < 0) {
			r = gone;
			goto out;
		}
		if (gone == 1) {
			r = detach(fs, ip, &nw, E2_IND + t, t + 1, &top);
			if (r)
				goto out;
		}
	}
	e2_now_ts(fs, &now);
	e2_iset_time(fs, &nw, E2_T_MTIME, &now);
	e2_iset_time(fs, &nw, E2_T_CTIME, &now);
	r = iwrite_and_free(fs, ip, &nw, &clears, &top, nfreed);
out:
	e2_deps_free(fs, &clears);
	fl_free(&top);
	return r;
}
