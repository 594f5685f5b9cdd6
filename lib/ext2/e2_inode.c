/* ext2: the in-memory inode cache and inode writes.
 *
 * The cache holds a decoded copy of every inode in use by an operation or by
 * a caller reference; writes go through e2_iwrite(), which patches only the
 * bytes that changed so that unrelated fields do not pick up dependencies. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include "e2_int.h"

#define ICACHE_MAX 16384

static size_t ihash(const struct e2fs *fs, uint32_t ino)
{
	return (ino * 2654435761u) % fs->ibuckets;
}

static void iloc(const struct e2fs *fs, uint32_t ino, uint32_t *blk, uint32_t *off)
{
	uint32_t g = (ino - 1) / fs->ipg, idx = (ino - 1) % fs->ipg;

	*blk = fs->g[g].inode_table + idx / fs->ipb;
	*off = (idx % fs->ipb) * fs->isize;
}

static int iread(struct e2fs *fs, struct e2_inode *ip)
{
	struct cblock *b;
	uint32_t blk, off;
	int r;

	iloc(fs, ip->ino, &blk, &off);
	r = cache_get(fs->c, blk, &b);
	if (r)
		return e2_err(fs, r, "inode %u: cannot read inode table block %u", ip->ino, blk);
	memcpy(&ip->d, cblock_data(b) + off, sizeof(ip->d));
	cache_put(fs->c, b);
	return 0;
}

static void irelease(struct e2fs *fs, struct e2_inode *ip)
{
	patch_release(fs->c, ip->init);
	patch_release(fs->c, ip->clear);
	patch_release(fs->c, ip->sync);
	patch_release(fs->c, ip->sync_last);
	patch_release(fs->c, ip->tailz);
	ip->init = ip->clear = ip->sync = ip->sync_last = ip->tailz = NULL;
	for (size_t i = 0; i < ip->npdeps; i++)
		patch_release(fs->c, ip->pdeps[i].p);
	free(ip->pdeps);
	ip->pdeps = NULL;
	ip->npdeps = ip->cappdeps = 0;
	/* (only when the file system goes away: inodes with a batch are
	 * flushed before they are dropped) */
	patch_release(fs->c, ip->dfree_p);
	fs->ndfree -= ip->ndfree;
	free(ip->dfree);
	ip->dfree = NULL;
	ip->dfree_p = NULL;
	ip->ndfree = ip->capdfree = 0;
	e2_dindex_free(ip->dix);
	ip->dix = NULL;
}

int e2_iget(struct e2fs *fs, uint32_t ino, struct e2_inode **out)
{
	struct e2_inode *ip;
	size_t h;
	int r;

	if (ino < 1 || ino > fs->ninodes)
		return e2_err(fs, -EIO, "inode number %u out of range", ino);
	h = ihash(fs, ino);
	for (ip = fs->itab[h]; ip; ip = ip->hnext)
		if (ip->ino == ino)
			break;
	if (ip) {
		if (ip->freed) {
			/* Reallocated (or looked up through a stale entry):
			 * start again from what is on disk. */
			irelease(fs, ip);
			ip->freed = false;
			ip->unlinked = false;
			ip->last_pblk = 0;
			r = iread(fs, ip);
			if (r)
				return r;
		}
		*out = ip;
		return 0;
	}
	ip = calloc(1, sizeof(*ip));
	if (!ip)
		return -ENOMEM;
	ip->ino = ino;
	r = iread(fs, ip);
	if (r) {
		free(ip);
		return r;
	}
	ip->hnext = fs->itab[h];
	fs->itab[h] = ip;
	fs->icount++;
	*out = ip;
	return 0;
}

/* Write the bytes of *nw that differ from the cached copy, after deps.
 * *out (if not NULL) gets the patch, or NULL if nothing changed. */
int e2_iwrite(struct e2fs *fs, struct e2_inode *ip, const struct ext2_inode *nw,
	      struct e2_deps *deps, struct patch **out)
{
	const uint8_t *a = (const uint8_t *)&ip->d, *b = (const uint8_t *)nw;
	size_t lo = 0, hi = sizeof(*nw);
	struct patch *p = NULL;
	uint32_t blk, off;
	int r;

	if (out)
		*out = NULL;
	while (lo < hi && a[lo] == b[lo])
		lo++;
	while (hi > lo && a[hi - 1] == b[hi - 1])
		hi--;
	if (lo == hi)
		return 0;
	if (fs->ro)
		return -EROFS;
	iloc(fs, ip->ino, &blk, &off);
	r = e2_patch(fs, blk, off + (uint32_t)lo, (uint32_t)(hi - lo), b + lo, deps, &p);
	if (r)
		return r;
	memcpy(&ip->d, nw, sizeof(*nw));
	e2_isync_add(fs, ip, p);
	if (out)
		*out = p;
	else
		patch_release(fs->c, p);
	return 0;
}

/* Record p as one of ip's changes, for e2_fsync: an empty patch that
 * nothing depends on collects them (patch_add_depend is allowed on it).
 * Only for inodes that have been fsynced once: the first fsync of an inode
 * syncs everything, so bulk writers that never fsync pay nothing. */
void e2_isync_add(struct e2fs *fs, struct e2_inode *ip, struct patch *p)
{
	if (!ip->sync_track || !p || patch_committed(p) || fs->opts.consistency == CONSISTENCY_NONE)
		return;
	if (p == ip->sync_last)
		return; /* merged into the patch added just before */
	patch_retain(p);
	patch_release(fs->c, ip->sync_last);
	ip->sync_last = p;
	if (ip->sync && !patch_committed(ip->sync) && patch_add_depend(fs->c, ip->sync, p) == 0)
		return;
	{
		/* Something depends on the old set already: chain a new one
		 * after it, so fsync still covers everything. */
		struct patch *d[2] = {ip->sync, p}, *np = NULL;

		if (patch_create_empty(fs->c, d, 2, &np)) {
			ip->sync_all = true;
			return;
		}
		patch_release(fs->c, ip->sync);
		ip->sync = np;
	}
}

/* Initialise a newly allocated inode in full (the extra bytes of large
 * inodes are zeroed, as Linux does for a new inode). */
int e2_iinit(struct e2fs *fs, struct e2_inode *ip, const struct ext2_inode *nw,
	     struct e2_deps *deps, struct patch **out)
{
	uint8_t buf[EXT2_MIN_BLOCK_SIZE * 64];
	struct patch *p = NULL;
	uint32_t blk, off;
	int r;

	memset(buf, 0, fs->isize);
	memcpy(buf, nw, sizeof(*nw));
	iloc(fs, ip->ino, &blk, &off);
	r = e2_patch(fs, blk, off, fs->isize, buf, deps, &p);
	if (r)
		return r;
	memcpy(&ip->d, nw, sizeof(*nw));
	e2_isync_add(fs, ip, p);
	if (out)
		*out = p;
	else
		patch_release(fs->c, p);
	return 0;
}

bool e2_idir(const struct e2_inode *ip)
{
	return S_ISDIR(le16toh(ip->d.i_mode));
}

mode_t e2_imode(const struct e2_inode *ip)
{
	return le16toh(ip->d.i_mode);
}

uint16_t e2_ilinks(const struct ext2_inode *d)
{
	return le16toh(d->i_links_count);
}

void e2_iset_links(struct ext2_inode *d, uint16_t n)
{
	d->i_links_count = htole16(n);
}

uint64_t e2_isize(const struct ext2_inode *d)
{
	uint64_t s = le32toh(d->i_size);

	if (S_ISREG(le16toh(d->i_mode)))
		s |= (uint64_t)le32toh(d->i_size_high) << 32;
	return s;
}

void e2_iset_size(struct ext2_inode *d, uint64_t size)
{
	d->i_size = htole32((uint32_t)size);
	if (S_ISREG(le16toh(d->i_mode)))
		d->i_size_high = htole32((uint32_t)(size >> 32));
}

bool e2_fast_symlink(const struct e2fs *fs, const struct ext2_inode *d)
{
	uint32_t ea = le32toh(d->i_file_acl) ? fs->bs / 512 : 0;

	return le32toh(d->i_blocks) == ea;
}

static dev_t decode_dev(const struct ext2_inode *d)
{
	uint32_t old = le32toh(d->i_block[0]), nw = le32toh(d->i_block[1]);

	if (old)
		return makedev((old >> 8) & 0xff, old & 0xff);
	return makedev((nw & 0xfff00) >> 8, (nw & 0xff) | ((nw >> 12) & 0xfff00));
}

void e2_istat(struct e2fs *fs, const struct e2_inode *ip, struct stat *st)
{
	const struct ext2_inode *d = &ip->d;
	mode_t m = le16toh(d->i_mode);

	memset(st, 0, sizeof(*st));
	st->st_ino = ip->ino;
	st->st_mode = m;
	st->st_nlink = e2_ilinks(d);
	st->st_uid = le16toh(d->i_uid) | (uint32_t)le16toh(d->osd2.linux2.l_i_uid_high) << 16;
	st->st_gid = le16toh(d->i_gid) | (uint32_t)le16toh(d->osd2.linux2.l_i_gid_high) << 16;
	st->st_size = (off_t)e2_isize(d);
	st->st_blksize = fs->bs;
	st->st_blocks = le32toh(d->i_blocks);
	st->st_atime = le32toh(d->i_atime);
	st->st_mtime = le32toh(d->i_mtime);
	st->st_ctime = le32toh(d->i_ctime);
	if (S_ISCHR(m) || S_ISBLK(m))
		st->st_rdev = decode_dev(d);
}

int e2_itouch(struct e2fs *fs, struct e2_inode *ip, bool mtime, bool ctime)
{
	struct ext2_inode nw = ip->d;
	uint32_t now = htole32(e2_now());

	if (mtime)
		nw.i_mtime = now;
	if (ctime)
		nw.i_ctime = now;
	return e2_iwrite(fs, ip, &nw, NULL, NULL);
}

/* Return an unlinked inode's blocks and its bitmap bit.  Both wait for the
 * inode clear (links 0, dtime set), which waited for the entry removal. */
int e2_ifree(struct e2fs *fs, struct e2_inode *ip)
{
	mode_t m = e2_imode(ip);
	int r = 0, r2;

	if (ip->freed)
		return 0;
	r = e2_dfree_flush(fs, ip);
	if (r == -ENOMEM)
		return r;
	if (S_ISREG(m) || S_ISDIR(m) || (S_ISLNK(m) && !e2_fast_symlink(fs, &ip->d))) {
		r2 = e2_free_all_blocks(fs, ip, ip->clear);
		if (r2 == -ENOMEM)
			return r2;
		if (!r)
			r = r2;
	}
	r2 = e2_xattr_release(fs, ip, ip->clear);
	if (!r)
		r = r2;
	r2 = e2_ifree_bit(fs, ip->ino, S_ISDIR(m), ip->clear);
	if (!r)
		r = r2;
	ip->freed = true;
	e2_dindex_free(ip->dix);
	ip->dix = NULL;
	return r;
}

int e2_iunref(struct e2fs *fs, struct e2_inode *ip)
{
	if (!ip->unlinked || ip->freed || ip->nlookup || ip->nopen || e2_ilinks(&ip->d) || fs->ro)
		return 0;
	if (!ip->d.i_mode)
		return 0;
	return e2_ifree(fs, ip);
}

static void idrop(struct e2fs *fs, struct e2_inode **pp)
{
	struct e2_inode *ip = *pp;

	*pp = ip->hnext;
	irelease(fs, ip);
	free(ip);
	fs->icount--;
}

/* Forget unreferenced inodes when the cache grows large.  Never drops an
 * inode that still has to be freed later (an unlinked one in use). */
void e2_icache_trim(struct e2fs *fs)
{
	if (fs->icount < ICACHE_MAX || fs->icount < fs->itrim_at)
		return;
	for (size_t i = 0; i < fs->ibuckets; i++) {
		struct e2_inode **pp = &fs->itab[i];

		while (*pp) {
			struct e2_inode *ip = *pp;

			e2_patch_drop_committed(fs, &ip->init);
			e2_patch_drop_committed(fs, &ip->clear);
			if (ip->ndfree)
				e2_dfree_flush(fs, ip);
			/* An inode whose initialisation is still pending must
			 * stay: a new entry for it has to wait for that patch. */
			if (!ip->nlookup && !ip->nopen && ip->ino != E2_ROOT_INO && !ip->init &&
			    !ip->clear && (ip->freed || !ip->unlinked))
				idrop(fs, pp);
			else
				pp = &ip->hnext;
		}
	}
	/* Referenced inodes stay; do not sweep again until the cache has
	 * doubled, so the sweep costs O(1) per operation amortised. */
	fs->itrim_at = fs->icount * 2;
}

void e2_icache_destroy(struct e2fs *fs)
{
	if (!fs->itab)
		return;
	for (size_t i = 0; i < fs->ibuckets; i++)
		while (fs->itab[i])
			idrop(fs, &fs->itab[i]);
	free(fs->itab);
	fs->itab = NULL;
}
