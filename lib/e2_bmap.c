/* ext2: block mapping (direct, indirect, double and triple indirect), file
 * writes that allocate, and truncation.
 *
 * A write runs in three passes so that the soft-updates order holds:
 *   A. allocate and fill new blocks (bitmap bit, full-block initialisation),
 *      overwrite mapped blocks in place;
 *   B. one inode patch: size, times, i_blocks and pointers held in the inode,
 *      after the data it covers and the new blocks it points to;
 *   C. pointers inside indirect blocks, after their block's bit and contents
 *      and after the inode patch, so no block is ever mapped beyond i_size.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "e2_int.h"

struct plan_ent {
	uint32_t parent, idx, pblk; /* parent 0: slot idx of the inode's i_block */
	struct patch *bit, *init;
};

struct plan {
	struct plan_ent *e;
	size_t n, cap;
};

static int plan_add(struct plan *pl, uint32_t parent, uint32_t idx, uint32_t pblk,
		    struct patch *bit, struct patch *init)
{
	if (pl->n == pl->cap) {
		size_t cap = pl->cap ? pl->cap * 2 : 16;
		struct plan_ent *ne = realloc(pl->e, cap * sizeof(*ne));

		if (!ne)
			return -ENOMEM;
		pl->e = ne;
		pl->cap = cap;
	}
	pl->e[pl->n++] = (struct plan_ent){parent, idx, pblk, bit, init};
	return 0;
}

static void plan_free(struct e2fs *fs, struct plan *pl)
{
	for (size_t i = 0; i < pl->n; i++) {
		patch_release(fs->c, pl->e[i].bit);
		patch_release(fs->c, pl->e[i].init);
	}
	free(pl->e);
}

uint64_t e2_max_lblk(const struct e2fs *fs)
{
	uint64_t a = fs->apb;
	uint64_t s = E2_NDIR + a + a * a + a * a * a;
	/* i_blocks is 32 bits of 512-byte units, indirect blocks included */
	uint64_t lim = ((1ULL << 32) - 1) / (fs->bs / 512) - (a * a + a + 3);

	return s < lim ? s : lim;
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

/* Follow the path to lblk.  *pblk is the mapped block or 0 for a hole;
 * *parent and *idx name the slot that holds (or would hold) it, and *missing is
 * the level at which the path stops (depth-1 when only the leaf is absent).
 * With pl, blocks planned but not yet linked count as present. */
static int walk(struct e2fs *fs, struct e2_inode *ip, uint64_t lblk, struct plan *pl,
		uint32_t *pblk, uint32_t *parent, uint32_t *idx, int *level, int *depth)
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
		if (!v && pl) {
			for (size_t i = pl->n; i-- > 0;)
				if (pl->e[i].parent == p && pl->e[i].idx == off[l]) {
					v = pl->e[i].pblk;
					break;
				}
		}
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

	return walk(fs, ip, lblk, NULL, pblk, &parent, &idx, &level, &depth);
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
	r = walk(fs, ip, lblk, NULL, pblk, &parent, &idx, &level, &depth);
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

/* Write size bytes at off (pass A/B/C above).  extra: deps for every data
 * patch (a new directory block's entry waits for its inode).  Returns the
 * byte count, or -errno if nothing was written.  *linked (if not NULL)
 * gets an empty patch that commits once every new block is reachable. */
int e2_write_locked(struct e2fs *fs, struct e2_inode *ip, const void *buf, size_t size,
		    uint64_t off, bool dir, struct e2_deps *extra, struct patch **linked)
{
	struct e2_deps all = {0};
	struct plan ind = {0}, dat = {0};
	struct e2_deps ideps = {0}, cdeps = {0};
	struct ext2_inode nw;
	struct patch *ip_patch = NULL, *lf = NULL;
	uint8_t *tmp = NULL, *zero = NULL;
	uint64_t maxb = e2_max_lblk(fs) * fs->bs, end, pos, oldsize = e2_isize(&ip->d);
	uint32_t goal = inode_goal(fs, ip);
	size_t done = 0;
	int r = 0, stop_r = 0;

	(void)dir;
	if (fs->ro)
		return -EROFS;
	if (size == 0)
		return 0;
	if (off >= maxb)
		return -EFBIG;
	if (size > maxb - off)
		size = (size_t)(maxb - off);
	end = off + size;
	tmp = fs->wtmp;
	zero = fs->wzero;
	/* Pass A */
	for (pos = off; pos < end;) {
		uint64_t lblk = pos / fs->bs;
		uint32_t boff = (uint32_t)(pos % fs->bs), len = fs->bs - boff;
		uint32_t pblk, parent, idx;
		int level, depth;
		struct patch *p = NULL, *bit = NULL;

		if (len > end - pos)
			len = (uint32_t)(end - pos);
		r = walk(fs, ip, lblk, &ind, &pblk, &parent, &idx, &level, &depth);
		if (r)
			break;
		if (pblk) {
			r = e2_patch(fs, pblk, boff, len, (const uint8_t *)buf + (pos - off), extra,
				     &p);
			if (r)
				break;
			e2_isync_add(fs, ip, p);
			goal = pblk + 1;
			r = e2_deps_add(&ideps, p);
			if (r)
				break;
			pos += len;
			done = pos - off;
			continue;
		}
		/* Missing indirect blocks along the path, then the leaf. */
		while (level < depth - 1) {
			uint32_t nb;

			r = e2_balloc(fs, goal, &nb, &bit);
			if (r)
				goto stop;
			r = e2_block_init(fs, nb, zero, NULL, &p);
			if (r) {
				e2_bfree(fs, nb, bit);
				patch_release(fs->c, bit);
				goto stop;
			}
			r = plan_add(&ind, parent, idx, nb, bit, p);
			if (r)
				goto stop;
			goal = nb + 1;
			r = walk(fs, ip, lblk, &ind, &pblk, &parent, &idx, &level, &depth);
			if (r)
				goto stop;
		}
		r = e2_balloc(fs, goal, &pblk, &bit);
		if (r)
			break;
		memset(tmp, 0, fs->bs);
		memcpy(tmp + boff, (const uint8_t *)buf + (pos - off), len);
		r = e2_block_init(fs, pblk, tmp, extra, &p);
		if (r) {
			e2_bfree(fs, pblk, bit);
			patch_release(fs->c, bit);
			break;
		}
		patch_retain(p);
		r = e2_deps_add(&ideps, p);
		if (!r)
			r = plan_add(&dat, parent, idx, pblk, bit, p);
		if (r)
			break;
		goal = pblk + 1;
		pos += len;
		done = pos - off;
	}
stop:
	stop_r = r;
	if (!done && !ind.n)
		goto out;
	if (r && r != -ENOSPC && r != -EFBIG)
		goto out; /* metadata trouble: leave the new blocks unlinked */
	/* Pass B */
	nw = ip->d;
	if (off + done > oldsize) {
		/* Growing over a tail zeroed by an earlier shrink. */
		e2_patch_drop_committed(fs, &ip->tailz);
		r = e2_deps_addref(&ideps, ip->tailz);
		if (r)
			goto out;
		if (off + done > 0x7fffffffULL && !dir) {
			r = e2_sb_set_large_file(fs, &lf);
			if (r)
				goto out;
			r = e2_deps_add(&ideps, lf);
			if (r)
				goto out;
		}
		e2_iset_size(&nw, off + done);
	} else {
		/* Size unchanged: the inode need not wait for overwritten data. */
		for (size_t i = 0; i < ideps.n; i++)
			patch_release(fs->c, ideps.p[i]);
		ideps.n = 0;
	}
	nw.i_blocks = htole32(le32toh(nw.i_blocks) + (uint32_t)((ind.n + dat.n) * (fs->bs / 512)));
	nw.i_mtime = nw.i_ctime = htole32(e2_now());
	for (int k = 0; k < 2; k++) {
		struct plan *pl = k ? &dat : &ind;

		for (size_t i = 0; i < pl->n; i++) {
			if (pl->e[i].parent)
				continue;
			nw.i_block[pl->e[i].idx] = htole32(pl->e[i].pblk);
			if ((r = e2_deps_addref(&ideps, pl->e[i].bit)) ||
			    (r = e2_deps_addref(&ideps, pl->e[i].init)))
				goto out;
		}
	}
	r = e2_iwrite(fs, ip, &nw, &ideps, &ip_patch);
	if (r)
		goto out;
	/* Pass C: pointers in indirect blocks, runs of adjacent slots at once. */
	for (int k = 0; k < 2; k++) {
		struct plan *pl = k ? &ind : &dat;
		uint32_t vals[1024];

		for (size_t i = 0; i < pl->n;) {
			size_t j = i;
			struct patch *p = NULL;

			if (!pl->e[i].parent) {
				i++;
				continue;
			}
			e2_deps_free(fs, &cdeps);
			r = e2_deps_addref(&cdeps, ip_patch);
			while (!r && j < pl->n && pl->e[j].parent == pl->e[i].parent &&
			       pl->e[j].idx == pl->e[i].idx + (j - i) && j - i < 1024) {
				vals[j - i] = htole32(pl->e[j].pblk);
				if (!(r = e2_deps_addref(&cdeps, pl->e[j].bit)))
					r = e2_deps_addref(&cdeps, pl->e[j].init);
				j++;
			}
			if (!r)
				r = e2_patch(fs, pl->e[i].parent, pl->e[i].idx * 4,
					     (uint32_t)(4 * (j - i)), vals, &cdeps, &p);
			if (!r) {
				e2_isync_add(fs, ip, p);
				r = e2_deps_add(&all, p);
			}
			if (r)
				goto out;
			i = j;
		}
	}
	if (dat.n)
		ip->last_pblk = dat.e[dat.n - 1].pblk;
	if (linked) {
		r = e2_deps_addref(&all, ip_patch);
		if (!r)
			r = patch_create_empty(fs->c, all.p, all.n, linked);
		if (r)
			goto out;
	}
	r = stop_r;
out:
	patch_release(fs->c, ip_patch);
	e2_deps_free(fs, &ideps);
	e2_deps_free(fs, &cdeps);
	e2_deps_free(fs, &all);
	plan_free(fs, &ind);
	plan_free(fs, &dat);
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
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		uint32_t *na = realloc(*a, c * sizeof(*na));

		if (!na)
			return -ENOMEM;
		*a = na;
		*cap = c;
	}
	(*a)[(*n)++] = v;
	return 0;
}

/* Collect blk and, for level > 0, everything below it. */
static int collect(struct e2fs *fs, struct e2_inode *ip, uint32_t blk, int level, struct flist *fl)
{
	struct cblock *b;
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
	r = cache_get(fs->c, blk, &b);
	if (r)
		return e2_err(fs, r, "inode %u: cannot read indirect block %u", ip->ino, blk);
	memcpy(kids, cblock_data(b), fs->bs);
	cache_put(fs->c, b);
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

/* Truncate the subtree at blk (level >= 1, covering lblks from base) so that
 * only lblks below keep remain.  Whole children are cleared from this block
 * in one patch; the blocks under them are freed after that patch. */
static int trunc_partial(struct e2fs *fs, struct e2_inode *ip, uint32_t blk, int level,
			 uint64_t base, uint64_t keep, struct e2_deps *clears, uint32_t *nfreed)
{
	uint64_t span = 1;
	uint32_t *kids, first = UINT32_MAX;
	struct flist fl = {0};
	struct cblock *b;
	struct patch *p = NULL;
	int r;

	for (int l = 1; l < level; l++)
		span *= fs->apb;
	if (!e2_block_ok(fs, blk))
		return e2_err(fs, -EIO, "inode %u: block %u out of range", ip->ino, blk);
	kids = fs->kids[level - 1];
	r = cache_get(fs->c, blk, &b);
	if (r)
		return e2_err(fs, r, "inode %u: cannot read indirect block %u", ip->ino, blk);
	memcpy(kids, cblock_data(b), fs->bs);
	cache_put(fs->c, b);
	for (uint32_t i = 0; i < fs->apb; i++) {
		uint64_t cb = base + i * span;
		uint32_t v = le32toh(kids[i]);

		if (!v || cb + span <= keep)
			continue;
		if (cb >= keep) {
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
	if (first != UINT32_MAX) {
		r = e2_patch(fs, blk, first * 4, (fs->apb - first) * 4, kids + first, NULL, &p);
		if (r)
			goto out;
		r = free_list(fs, &fl, 0, p);
		*nfreed += (uint32_t)fl.n;
		if (e2_deps_add(clears, p)) {
			/* cannot order the size update after the clear: wait */
			int r2 = cache_sync_patch(fs->c, p);

			patch_release(fs->c, p);
			if (!r)
				r = r2;
		}
	}
out:
	fl_free(&fl);
	return r;
}

/* Set the size; when shrinking, free the blocks past the end.  Pointers are
 * cleared before the blocks are marked free; cleared pointers in indirect
 * blocks reach disk before the smaller size does, so no block is ever mapped
 * beyond i_size on disk. */
int e2_truncate_locked(struct e2fs *fs, struct e2_inode *ip, uint64_t size)
{
	uint64_t old = e2_isize(&ip->d), keep, a = fs->apb;
	uint64_t base[3] = {E2_NDIR, E2_NDIR + a, E2_NDIR + a + a * a};
	uint64_t span[3] = {a, a * a, a * a * a};
	struct e2_deps clears = {0};
	struct flist top = {0};
	struct ext2_inode nw;
	struct patch *ipp = NULL, *lf = NULL;
	uint32_t nfreed = 0;
	int r = 0;

	if (fs->ro)
		return -EROFS;
	if (size > e2_max_lblk(fs) * fs->bs)
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
	if (size % fs->bs) {
		uint32_t pblk, boff = (uint32_t)(size % fs->bs);

		r = e2_bmap(fs, ip, size / fs->bs, &pblk);
		if (r)
			return r;
		if (pblk) {
			uint8_t *z = calloc(1, fs->bs);

			if (!z)
				return -ENOMEM;
			struct patch *zp = NULL;

			/* Later growth must read zeros here, also after a
			 * crash: every later size increase depends on this. */
			r = e2_patch(fs, pblk, boff, fs->bs - boff, z, NULL, &zp);
			free(z);
			if (r)
				return r;
			patch_release(fs->c, ip->tailz);
			ip->tailz = zp;
		}
	}
	keep = (size + fs->bs - 1) / fs->bs;
	for (uint32_t i = 0; i < E2_NDIR; i++) {
		uint32_t v = le32toh(nw.i_block[i]);

		if (i < keep || !v)
			continue;
		r = collect(fs, ip, v, 0, &top);
		if (r)
			goto out;
		nw.i_block[i] = 0;
	}
	for (int t = 0; t < 3; t++) {
		uint32_t v = le32toh(nw.i_block[E2_IND + t]);

		if (!v || keep >= base[t] + span[t])
			continue;
		if (keep <= base[t]) {
			r = collect(fs, ip, v, t + 1, &top);
			if (r)
				goto out;
			nw.i_block[E2_IND + t] = 0;
		} else {
			r = trunc_partial(fs, ip, v, t + 1, base[t], keep, &clears, &nfreed);
			if (r)
				goto out;
		}
	}
	nfreed += (uint32_t)top.n;
	e2_iset_size(&nw, size);
	{
		uint32_t ib = le32toh(nw.i_blocks), dec = nfreed * (fs->bs / 512);

		nw.i_blocks = htole32(ib > dec ? ib - dec : 0);
	}
	r = e2_iwrite(fs, ip, &nw, &clears, &ipp);
	if (r)
		goto out;
	r = free_list(fs, &top, 0, ipp);
out:
	patch_release(fs->c, ipp);
	e2_deps_free(fs, &clears);
	fl_free(&top);
	return r;
}
