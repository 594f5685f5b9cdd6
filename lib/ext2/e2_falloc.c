/* ext2: preallocation and punching holes (fallocate) and hole queries
 * (SEEK_DATA/SEEK_HOLE), see e2_falloc.h; the frees of a punch are done
 * by e2_punch_locked() in e2_bmap.c, next to truncate's.  Both walk the block map as a tree, so
 * that a missing indirect block skips all it would map at once: a query over a sparse file of many
 * GiB costs what its mapped part costs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "e2_falloc.h"
#include "e2_int.h"

/* Zeros are written in chunks of this size, so that a huge preallocation
 * neither needs a huge buffer nor one huge set of patches per call. */
#define ZCHUNK (1U << 20)

/* The first block number in [from, lim) within the subtree at ptr that is
 * mapped (want_data) or a hole.  The subtree maps `span` blocks from
 * `base`: level 0 is one data block, level l an indirect block over
 * apb^l.  Returns 1 and *found, 0 if there is none, or -errno. */
static int scan(struct e2fs *fs, uint32_t ino, uint32_t ptr, int level, uint64_t base,
		uint64_t span, uint64_t from, uint64_t lim, bool want_data, uint64_t *found)
{
	uint64_t child, start = from > base ? from : base;
	struct cblock *b;
	int r = 0;

	if (start >= lim || base + span <= from)
		return 0;
	if (!ptr || level == 0) {
		if ((ptr != 0) != want_data)
			return 0;
		*found = start;
		return 1;
	}
	if (!e2_block_ok(fs, ptr))
		return e2_err(fs, -EIO, "inode %u: bad block number %u", ino, ptr);
	r = cache_get(fs->c, ptr, &b);
	if (r)
		return e2_err(fs, r, "inode %u: cannot read block %u", ino, ptr);
	child = span / fs->apb;
	for (uint64_t i = (start - base) / child; i < fs->apb && base + i * child < lim; i++) {
		uint32_t p;

		memcpy(&p, cblock_data(b) + 4 * i, sizeof(p));
		r = scan(fs, ino, le32toh(p), level - 1, base + i * child, child, from, lim,
			 want_data, found);
		if (r)
			break;
	}
	cache_put(fs->c, b);
	return r;
}

/* scan() over the whole map of ip: direct blocks, then the single, double
 * and triple indirect trees. */
static int find(struct e2fs *fs, struct e2_inode *ip, uint64_t from, uint64_t lim, bool want_data,
		uint64_t *found)
{
	uint64_t base = E2_NDIR, span = fs->apb;
	int r;

	for (uint32_t i = 0; i < E2_NDIR; i++) {
		r = scan(fs, ip->ino, le32toh(ip->d.i_block[i]), 0, i, 1, from, lim, want_data,
			 found);
		if (r)
			return r;
	}
	for (int l = 1; l <= 3; l++) {
		r = scan(fs, ip->ino, le32toh(ip->d.i_block[E2_IND + l - 1]), l, base, span, from,
			 lim, want_data, found);
		if (r)
			return r;
		base += span;
		span *= fs->apb;
	}
	return 0;
}

/* The next run of holes at or after pos, below lim: [*hole, *data).
 * 1 found, 0 none left, -errno. */
static int hole_run(struct e2fs *fs, struct e2_inode *ip, uint64_t pos, uint64_t lim,
		    uint64_t *hole, uint64_t *data)
{
	int r = find(fs, ip, pos, lim, false, hole);

	if (r <= 0)
		return r;
	r = find(fs, ip, *hole, lim, true, data);
	if (r < 0)
		return r;
	if (r == 0)
		*data = lim;
	return 1;
}

/* The blocks filling the holes of [first, lim) will take: the data blocks
 * and, for those past the direct ones, indirect blocks (one per apb, and a
 * double and a triple indirect block at most: an estimate on the safe
 * side). */
static int blocks_needed(struct e2fs *fs, struct e2_inode *ip, uint64_t first, uint64_t lim,
			 uint64_t *need)
{
	uint64_t pos = first, hole, data, n = 0, deep = 0;
	int r;

	for (;;) {
		r = hole_run(fs, ip, pos, lim, &hole, &data);
		if (r <= 0)
			break;
		n += data - hole;
		if (data > E2_NDIR)
			deep += data - (hole > E2_NDIR ? hole : E2_NDIR);
		pos = data;
	}
	if (r < 0)
		return r;
	*need = n + (deep ? (deep + fs->apb - 1) / fs->apb + 2 : 0);
	return 0;
}

/* The first checks of fallocate and punch: a range of at least one byte
 * from a non-negative offset, on a writable file system.  *end is off +
 * len (two numbers below 2^63: the sum fits). */
static int check_range(const struct e2fs *fs, off_t off, off_t len, uint64_t *end)
{
	if (off < 0 || len <= 0)
		return -EINVAL;
	if (fs->ro)
		return -EROFS;
	*end = (uint64_t)off + (uint64_t)len;
	return 0;
}

int e2_falloc(struct e2fs *fs, const struct e2_caller *who, uint32_t ino, bool keep_size, off_t off,
	      off_t len)
{
	uint64_t oldsize, newsize, end, first, lim, pos, need, hole, data;
	struct e2_inode *ip;
	uint8_t *zero = NULL;
	int r;

	r = check_range(fs, off, len, &end);
	if (r)
		return r;
	if (end > e2_max_size(fs))
		return -EFBIG;
	e2_lock_caller(fs, who);
	r = e2_get_file(fs, ino, &ip);
	if (r)
		goto out;
	if (e2_iimmutable(ip)) {
		r = -EPERM;
		goto out;
	}
	oldsize = e2_isize(&ip->d);
	if (keep_size && end > oldsize) {
		/* ext2 has no place for blocks past the end of a file. */
		r = -EOPNOTSUPP;
		goto out;
	}
	newsize = end > oldsize ? end : oldsize;
	first = (uint64_t)off / fs->bs;
	lim = (end + fs->bs - 1) / fs->bs;
	r = blocks_needed(fs, ip, first, lim, &need);
	if (r)
		goto out;
	if (need > fs->free_blocks) {
		r = -ENOSPC;
		goto out;
	}
	if (need) {
		zero = calloc(1, ZCHUNK);
		if (!zero) {
			r = -ENOMEM;
			goto out;
		}
	}
	/* Each run of holes is filled by ordinary writes of zeros: the write
	 * path already orders the zeroed blocks before the pointers to them
	 * and those before the size that exposes them. */
	for (pos = first; need;) {
		uint64_t lo, hi;

		r = hole_run(fs, ip, pos, lim, &hole, &data);
		if (r <= 0)
			break;
		lo = hole * fs->bs;
		hi = data * fs->bs < newsize ? data * fs->bs : newsize;
		while (lo < hi) {
			size_t n = hi - lo < ZCHUNK ? (size_t)(hi - lo) : ZCHUNK;
			int w;

			/* Under a journal, in pieces that each fit a
			 * transaction, as a write is (e2_file.c): the
			 * indirect blocks of a large preallocation alone may
			 * be more than the log holds. */
			if (e2_journaling(fs)) {
				uint64_t nb = (lo + n - 1) / fs->bs - lo / fs->bs + 1, piece;

				r = e2_jroom(fs, nb, &piece);
				if (r)
					goto undo;
				if (piece < nb)
					n = (size_t)(piece * fs->bs - lo % fs->bs);
			}
			w = e2_write_locked(fs, ip, zero, n, lo, false, NULL, NULL);
			if (w >= 0 && (size_t)w < n)
				w = -ENOSPC;
			if (w < 0) {
				r = w;
				goto undo;
			}
			lo += n;
		}
		pos = data;
	}
	if (r < 0)
		goto undo;
	r = 0;
	if (e2_isize(&ip->d) < newsize) {
		/* Nothing to fill in the last block: only the size moves. */
		r = e2_truncate_locked(fs, ip, newsize);
		if (!r)
			r = e2_itouch(fs, ip, true, true);
		if (r)
			goto undo;
	}
	goto out;
undo:
	/* A failed fallocate leaves the size as it was; blocks filled below
	 * it stay (zeros, as the holes read). */
	if (e2_isize(&ip->d) > oldsize)
		e2_truncate_locked(fs, ip, oldsize);
out:
	e2_unlock(fs);
	free(zero);
	return r;
}

/* Zero bytes [a, b) of ip, all in one block, if that block is mapped (a
 * hole reads as zeros already).  A data write: no ordering of its own. */
static int zero_part(struct e2fs *fs, struct e2_inode *ip, uint64_t a, uint64_t b)
{
	struct patch *p = NULL;
	uint32_t pblk;
	int r;

	if (a >= b)
		return 0;
	r = e2_bmap(fs, ip, a / fs->bs, &pblk);
	if (r || !pblk)
		return r;
	fs->jdata = true;
	r = e2_patch(fs, pblk, (uint32_t)(a % fs->bs), (uint32_t)(b - a), fs->wzero, NULL, &p);
	fs->jdata = false;
	if (r)
		return r;
	e2_isync_add(fs, ip, p);
	patch_release(fs->c, p);
	return 0;
}

int e2_punch(struct e2fs *fs, const struct e2_caller *who, uint32_t ino, off_t off, off_t len)
{
	uint64_t size, end, first, lim;
	struct e2_inode *ip;
	int r;

	r = check_range(fs, off, len, &end);
	if (r)
		return r;
	e2_lock_caller(fs, who);
	r = e2_get_file(fs, ino, &ip);
	if (r)
		goto out;
	if (e2_iimmutable(ip) || e2_iappend(ip)) {
		r = -EPERM;
		goto out;
	}
	size = e2_isize(&ip->d);
	if ((uint64_t)off >= size)
		goto out; /* nothing of the file is in the range */
	/* Whole blocks go; a range reaching the end takes the last block
	 * whole too (what follows the size reads as zeros anyway). */
	first = ((uint64_t)off + fs->bs - 1) / fs->bs;
	if (end >= size) {
		end = size;
		lim = (size + fs->bs - 1) / fs->bs;
	} else {
		lim = end / fs->bs;
	}
	if (first > lim) {
		/* inside one block */
		r = zero_part(fs, ip, (uint64_t)off, end);
		if (!r)
			r = e2_itouch(fs, ip, true, true);
		goto out;
	}
	r = zero_part(fs, ip, (uint64_t)off, first * fs->bs);
	if (!r && lim * fs->bs < end)
		r = zero_part(fs, ip, lim * fs->bs, end);
	if (!r)
		r = e2_punch_locked(fs, ip, first, lim);
out:
	e2_unlock(fs);
	return r;
}

int e2_seek(struct e2fs *fs, uint32_t ino, off_t off, bool data, off_t *out)
{
	struct e2_inode *ip;
	uint64_t size, blk;
	int r;

	if (off < 0)
		return -ENXIO;
	e2_lock(fs);
	r = e2_get_file(fs, ino, &ip);
	if (r)
		goto out;
	size = e2_isize(&ip->d);
	if ((uint64_t)off >= size) {
		r = -ENXIO;
		goto out;
	}
	r = find(fs, ip, (uint64_t)off / fs->bs, (size + fs->bs - 1) / fs->bs, data, &blk);
	if (r < 0)
		goto out;
	if (r == 0) {
		if (data) {
			r = -ENXIO;
			goto out;
		}
		*out = (off_t)size;
	} else {
		*out = blk * fs->bs > (uint64_t)off ? (off_t)(blk * fs->bs) : off;
	}
	r = 0;
out:
	e2_unlock(fs);
	return r;
}
