/* ext2: operations that make names: mknod, mkdir, symlink, link (and
 * readlink).  The inode is initialised, with its link count, after its
 * bitmap bit and its first block; the entry after the initialised inode
 * (design.md §4).  Until its entry is on disk the inode is an unattached
 * one to e2fsck: a leak, never a name for an inode that is not there. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include "e2_int.h"

/* What a new inode holds besides the common fields. */
struct newinode {
	mode_t mode;
	dev_t rdev;
	const char *target; /* symlink */
	size_t tlen;
};

/* The end of e2_tmpfile's create: ip, initialised by init (whose
 * reference this takes), gets no entry.  Cleared at once (the clear merges
 * with the init), it is an unused inode on disk, and an unlinked one held
 * by its caller here, until e2_link gives it a name, which then waits for
 * the init as any new inode's first name does. */
static int unnamed(struct e2fs *fs, struct e2_inode *ip, struct patch *init, struct stat *st)
{
	struct e2_deps none = {0};
	int r;

	e2_init_set(fs, ip, init);
	ip->nlookup++;
	r = e2_drop_last_link(fs, ip, &none);
	if (r) {
		/* (links 1 and no name: unattached, a leak at worst) */
		ip->nlookup--;
		return r;
	}
	ip->linkable = true;
	e2_istat(fs, ip, st);
	return 0;
}

static int create(struct e2fs *fs, const struct e2_caller *who, uint32_t parent, const char *name,
		  const struct newinode *ni, uid_t uid, gid_t gid, struct stat *st)
{
	struct e2_inode *dir, *ip;
	struct e2_deps ideps = {0}, edeps = {0};
	struct patch *linked = NULL, *ibit = NULL, *bbit = NULL, *binit = NULL, *init = NULL;
	struct patch *plink = NULL, *ent = NULL;
	struct patch_scope *sc = NULL;
	struct ext2_inode_large nw;
	struct e2_dloc loc;
	bool isdir = S_ISDIR(ni->mode);
	bool slow = S_ISLNK(ni->mode) && ni->tlen > E2_FAST_SYMLINK_MAX;
	bool gate, gated, quiet = false;
	uint64_t ogen = 0;
	uint32_t ino = 0, blk = 0;
	struct timespec now;
	uint8_t *buf = NULL;
	size_t len;
	int r;

	/* (name NULL: e2_tmpfile's file, which gets no entry) */
	len = 0;
	r = name ? e2_check_change(fs, name, &len) : fs->ro ? -EROFS : 0;
	if (r)
		return r;
	e2_lock_caller(fs, who);
	/* (gated: it gets a gate, with the scope's befores if gate) */
	gate = name && S_ISREG(ni->mode) && e2_gating(fs);
	gated = gate || (name && S_ISREG(ni->mode) && e2_order_gating(fs));
	r = e2_get_dir(fs, parent, &dir);
	if (r)
		goto out;
	r = name ? e2_dir_lookup(fs, dir, name, len, &loc) : -ENOENT;
	if (r != -ENOENT) {
		if (!r)
			r = -EEXIST;
		goto out;
	}
	if (e2_iimmutable(dir)) {
		r = -EPERM;
		goto out;
	}
	if (isdir && e2_ilinks(&dir->d) >= E2_LINK_MAX) {
		r = -EMLINK;
		goto out;
	}
	buf = calloc(1, fs->bs);
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	/* Allocate everything first: entry room, inode, block. */
	r = name ? e2_dir_prepare(fs, dir, len, &linked) : 0;
	if (r)
		goto out;
	/* A new file's bit and inode are seen only through its entry, which
	 * keeps the caller's befores: they leave them out (e2_gate.c). */
	if (gate) {
		sc = e2_scope_quiet(fs, NULL);
		quiet = true;
	}
	r = e2_ialloc(fs, parent, isdir, &ino, &ibit);
	if (r)
		goto out;
	if (isdir || slow) {
		r = e2_balloc(fs, fs->g[(ino - 1) / fs->ipg].first, &blk, &bbit);
		if (r) {
			e2_ifree_bit(fs, ino, isdir, ibit);
			goto out;
		}
	}
	r = e2_iget(fs, ino, &ip);
	if (r)
		goto undo;
	/* Once a file was fsynced on this mount, a new inode's changes are
	 * collected from its birth (e2_isync_add), so that its first fsync
	 * writes what it depends on instead of everything: a program that
	 * writes, fsyncs and renames new files pays a sync of the whole file
	 * system per file otherwise.  Bulk writers that never fsync still
	 * pay nothing. */
	if (fs->fsync_seen && !ip->sync_track) {
		ip->sync_track = true;
		ip->sync_all = false;
	}
	if (isdir) {
		/* The parent's count goes up before the ".." that counts: the
		 * one in a directory whose inode is in use, since e2fsck
		 * counts that one even while the directory is unattached.  So
		 * the inode waits for it (below), not the new block, which
		 * nobody reads before the inode is on disk.  Were the block
		 * to wait, each level of a new tree would wait for the level
		 * above it through its directory block, in a chain of rounds
		 * as long as the tree is deep. */
		r = e2_add_links(fs, dir, +1, NULL, &plink);
		if (r)
			goto undo;
		e2_dir_new_block(fs, ino, parent, buf);
	} else if (slow) {
		memcpy(buf, ni->target, ni->tlen);
	}
	if (blk) {
		r = e2_block_init(fs, blk, buf, NULL, &binit);
		if (r)
			goto undo;
	}
	memset(&nw, 0, sizeof(nw));
	nw.i_mode = htole16((uint16_t)ni->mode);
	nw.i_uid = htole16((uint16_t)uid);
	nw.osd2.linux2.l_i_uid_high = htole16((uint16_t)(uid >> 16));
	nw.i_gid = htole16((uint16_t)gid);
	nw.osd2.linux2.l_i_gid_high = htole16((uint16_t)(gid >> 16));
	/* Room for the extra timestamp words (and in-inode attributes
	 * after them), as Linux gives every new large inode. */
	if (fs->isize >= EXT2_GOOD_OLD_INODE_SIZE + E2_EXTRA_ISIZE)
		nw.i_extra_isize = htole16(E2_EXTRA_ISIZE);
	e2_now_ts(fs, &now);
	e2_iset_time(fs, &nw, E2_T_ATIME, &now);
	e2_iset_time(fs, &nw, E2_T_MTIME, &now);
	e2_iset_time(fs, &nw, E2_T_CTIME, &now);
	e2_iset_time(fs, &nw, E2_T_CRTIME, &now);
	e2_iset_links(&nw, isdir ? 2 : 1);
	nw.i_flags = htole32(e2_inherit_flags(ni->mode, le32toh(dir->d.i_flags)));
	/* Never the generation the number had before (ip->d still holds the
	 * freed inode): a handle to the old file must not reach this one. */
	nw.i_generation = htole32(fs->next_gen++);
	if (nw.i_generation == ip->d.i_generation)
		nw.i_generation = htole32(fs->next_gen++);
	if (isdir) {
		nw.i_size = htole32(fs->bs);
		nw.i_block[0] = htole32(blk);
		nw.i_blocks = htole32(fs->bs / 512);
	} else if (S_ISLNK(ni->mode)) {
		nw.i_size = htole32((uint32_t)ni->tlen);
		if (slow) {
			nw.i_block[0] = htole32(blk);
			nw.i_blocks = htole32(fs->bs / 512);
		} else {
			memcpy(nw.i_block, ni->target, ni->tlen);
		}
	} else if (S_ISCHR(ni->mode) || S_ISBLK(ni->mode)) {
		unsigned ma = major(ni->rdev), mi = minor(ni->rdev);

		if (ma < 256 && mi < 256)
			nw.i_block[0] = htole32((ma << 8) | mi);
		else
			nw.i_block[1] = htole32((mi & 0xff) | (ma << 8) | ((mi & ~0xffu) << 12));
	}
	/* The inode waits for its bitmap bit and its block, and a
	 * directory for its parent's count (and so for the parent's own
	 * first write when the parent is new: the ".." names it). */
	if ((r = e2_deps_addref(&ideps, ibit)) || (r = e2_deps_addref(&ideps, bbit)) ||
	    (r = e2_deps_addref(&ideps, binit)) || (r = e2_deps_addref(&ideps, plink)))
		goto undo;
	r = e2_iinit(fs, ip, &nw, &ideps, &init);
	if (quiet) {
		e2_scope_restore(fs, sc);
		quiet = false;
	}
	if (r)
		goto undo;
	if (blk)
		ip->last_pblk = blk;
	if (!name) {
		r = unnamed(fs, ip, init, st);
		init = NULL;
		goto out;
	}
	/* The entry waits for the initialised inode. */
	if ((r = e2_deps_addref(&edeps, init)) || (r = e2_deps_addref(&edeps, linked)))
		goto out;
	/* and, for a file that gets a gate, for what its later changes would
	 * (e2_gate.c); under the caller's group order it waits for no set,
	 * and its gate never covers one */
	ogen = fs->caller_group_order ? UINT64_MAX : fs->order_gen;
	if (gated && (r = e2_order_deps(fs, &edeps)))
		goto out;
	r = e2_dir_add_new(fs, dir, name, len, ino, ni->mode, &edeps, &ent);
	if (r) {
		/* Not linked anywhere: undo the inode (a leak at worst). */
		struct e2_deps none = {0};

		e2_drop_last_link(fs, ip, &none);
		goto out;
	}
	e2_isync_add(fs, ip, ent);
	if (gated)
		e2_gate_set(fs, ip, ent, ogen);
	/* In a directory that is itself new, fsync must make the whole path
	 * reachable: take the directory's own changes along. */
	if (e2_init_prune(fs, dir))
		e2_isync_add(fs, ip, dir->sync);
	/* What a new name for the inode, or a name put in it (a directory),
	 * waits for: its entry, which waits for the initialised inode, and,
	 * in a directory that is itself new, that directory's own init, and
	 * so on up.  A file renamed or linked into a new directory is then
	 * reachable once its name is on disk, as a program publishing it
	 * expects (rename_order).  The entry made here does not wait for the
	 * directory's: a crash may leave a new tree's lower levels unattached
	 * (a leak e2fsck puts in lost+found), and its entries do not wait
	 * for one another a level at a time.  The directory's part stays
	 * apart (init_up) until the inode gets entries of its own. */
	if (ent && !patch_committed(ent)) {
		struct patch *up = NULL;

		if ((r = e2_init_one(fs, dir, &up)))
			goto out;
		patch_retain(ent);
		e2_init_set(fs, ip, ent);
		if (up) {
			patch_retain(up);
			ip->init_up = up;
		}
	} else {
		e2_init_set(fs, ip, init);
		init = NULL;
	}
	r = e2_touch_name(fs, dir, true);
	if (r)
		goto out;
	ip->nlookup++;
	e2_istat(fs, ip, st);
	goto out;
undo:
	/* Nothing points at the new inode yet: give back what was taken (at
	 * worst a leak on disk, never a dangling reference). */
	if (plink)
		e2_add_links(fs, dir, -1, NULL, NULL);
	if (blk)
		e2_bfree(fs, blk, bbit);
	e2_ifree_bit(fs, ino, isdir, ibit);
out:
	if (quiet)
		e2_scope_restore(fs, sc);
	free(buf);
	e2_deps_free(fs, &ideps);
	e2_deps_free(fs, &edeps);
	patch_release(fs->c, linked);
	patch_release(fs->c, ibit);
	patch_release(fs->c, bbit);
	patch_release(fs->c, binit);
	patch_release(fs->c, init);
	patch_release(fs->c, plink);
	patch_release(fs->c, ent);
	e2_unlock(fs);
	return r;
}

int e2_mknod(struct e2fs *fs, const struct e2_caller *who, uint32_t parent, const char *name,
	     mode_t mode, dev_t rdev, uid_t uid, gid_t gid, struct stat *st)
{
	struct newinode ni = {.mode = mode, .rdev = rdev};

	switch (mode & S_IFMT) {
	case S_IFREG:
	case S_IFIFO:
	case S_IFSOCK:
	case S_IFCHR:
	case S_IFBLK:
		break;
	default:
		return -EINVAL;
	}
	ni.mode = (mode & S_IFMT) | (mode & 07777);
	return create(fs, who, parent, name, &ni, uid, gid, st);
}

int e2_tmpfile(struct e2fs *fs, const struct e2_caller *who, uint32_t parent, mode_t mode,
	       uid_t uid, gid_t gid, struct stat *st)
{
	struct newinode ni = {.mode = S_IFREG | (mode & 07777)};

	return create(fs, who, parent, NULL, &ni, uid, gid, st);
}

int e2_mkdir(struct e2fs *fs, const struct e2_caller *who, uint32_t parent, const char *name,
	     mode_t mode, uid_t uid, gid_t gid, struct stat *st)
{
	struct newinode ni = {.mode = S_IFDIR | (mode & 07777)};

	return create(fs, who, parent, name, &ni, uid, gid, st);
}

int e2_symlink(struct e2fs *fs, const struct e2_caller *who, uint32_t parent, const char *name,
	       const char *target, uid_t uid, gid_t gid, struct stat *st)
{
	struct newinode ni = {.mode = S_IFLNK | 0777, .target = target};

	ni.tlen = strlen(target);
	if (ni.tlen == 0)
		return -ENOENT;
	if (ni.tlen >= fs->bs || ni.tlen >= 4096)
		return -ENAMETOOLONG;
	return create(fs, who, parent, name, &ni, uid, gid, st);
}

int e2_readlink(struct e2fs *fs, uint32_t ino, char *buf, size_t size)
{
	struct e2_inode *ip;
	uint64_t len;
	int r;

	e2_lock(fs);
	r = e2_get_live(fs, ino, &ip);
	if (r)
		goto out;
	if (!S_ISLNK(e2_imode(ip))) {
		r = -EINVAL;
		goto out;
	}
	len = e2_isize(&ip->d);
	if (e2_fast_symlink(fs, &ip->d)) {
		if (len > E2_FAST_SYMLINK_MAX + 1 || len == 0) {
			r = e2_err(fs, -EIO, "inode %u: bad fast symlink length %llu", ino,
				   (unsigned long long)len);
			goto out;
		}
		if (len > size)
			len = size;
		memcpy(buf, ip->d.i_block, len);
	} else {
		uint32_t pblk;
		struct cblock *b;

		if (len >= fs->bs || len == 0) {
			r = e2_err(fs, -EIO, "inode %u: bad symlink length %llu", ino,
				   (unsigned long long)len);
			goto out;
		}
		r = e2_bmap(fs, ip, 0, &pblk);
		if (!r && !pblk)
			r = e2_err(fs, -EIO, "inode %u: symlink has no block", ino);
		if (r)
			goto out;
		r = cache_get(fs->c, pblk, &b);
		if (r)
			goto out;
		if (len > size)
			len = size;
		memcpy(buf, cblock_data(b), len);
		cache_put(fs->c, b);
	}
	/* (as Linux's readlink(2) and following the link do) */
	e2_touch_atime(fs, ip);
	r = (int)len;
out:
	e2_unlock(fs);
	return r;
}

/* The first name of e2_tmpfile's file: off the orphan list under a
 * journal (in the transaction that adds the name), then links 1 and no
 * dtime, a live inode again.  Until then it was unused on disk, and
 * unlinked here.  A failure leaves it unnamed (and, off the list, at
 * worst a leak). */
static int first_link(struct e2fs *fs, struct e2_inode *ip, struct patch **out)
{
	struct ext2_inode_large nw;
	struct timespec now;
	int r;

	if (ip->orphan && (r = e2_orphan_del(fs, ip, NULL)))
		return r;
	nw = ip->d;
	e2_now_ts(fs, &now);
	e2_iset_links(&nw, 1);
	e2_iset_time(fs, &nw, E2_T_CTIME, &now);
	nw.i_dtime = 0;
	r = e2_iwrite(fs, ip, &nw, NULL, out);
	if (r)
		return r;
	ip->linkable = false;
	ip->unlinked = false;
	patch_release(fs->c, ip->clear);
	ip->clear = NULL;
	return 0;
}

int e2_link(struct e2fs *fs, const struct e2_caller *who, uint32_t ino, uint32_t newparent,
	    const char *newname, struct stat *st)
{
	struct e2_inode *dir, *ip;
	struct e2_deps d = {0};
	struct patch *linked = NULL, *lp = NULL, *ent = NULL;
	struct e2_dloc loc;
	bool first;
	size_t len;
	int r;

	r = e2_check_change(fs, newname, &len);
	if (r)
		return r;
	e2_lock_caller(fs, who);
	r = e2_get_live(fs, ino, &ip);
	if (r)
		goto out;
	if (e2_idir(ip)) {
		r = -EPERM;
		goto out;
	}
	/* (a first name only for e2_tmpfile's file, which alone is
	 * linkable, and only while it has none) */
	first = !e2_ilinks(&ip->d);
	if (first && !ip->linkable) {
		r = -ENOENT;
		goto out;
	}
	if (e2_ilinks(&ip->d) >= E2_LINK_MAX) {
		r = -EMLINK;
		goto out;
	}
	r = e2_get_dir(fs, newparent, &dir);
	if (r)
		goto out;
	r = e2_dir_lookup(fs, dir, newname, len, &loc);
	if (r != -ENOENT) {
		if (!r)
			r = -EEXIST;
		goto out;
	}
	if (e2_iimmutable(dir) || e2_iimmutable(ip) || e2_iappend(ip)) {
		r = -EPERM;
		goto out;
	}
	r = e2_dir_prepare(fs, dir, len, &linked);
	if (r)
		goto out;
	/* A second name: the first no longer gates what the file shows. */
	e2_gate_drop(fs, ip);
	/* The count goes up before the new entry reaches disk. */
	r = first ? first_link(fs, ip, &lp) : e2_add_links(fs, ip, +1, NULL, &lp);
	if (r)
		goto out;
	e2_init_prune(fs, ip);
	e2_init_prune(fs, dir);
	if ((r = e2_deps_addref(&d, lp)) || (r = e2_init_deps(&d, ip)) ||
	    (r = e2_deps_addref(&d, linked)) || (r = e2_init_deps(&d, dir)) ||
	    (r = e2_order_deps(fs, &d)) || (r = e2_ipending_deps(fs, ip, &d)))
		goto out;
	r = e2_dir_add(fs, dir, newname, len, ino, e2_imode(ip), &d, &ent);
	if (r) {
		struct e2_deps none = {0};

		if (!first)
			e2_add_links(fs, ip, -1, &none, NULL);
		else if (!e2_drop_last_link(fs, ip, &none))
			ip->linkable = true; /* unnamed again */
		goto out;
	}
	e2_isync_add(fs, ip, ent);
	r = e2_order_add(fs, ent);
	patch_release(fs->c, ent);
	if (r)
		goto out;
	if (lp) {
		e2_init_set(fs, ip, lp);
		lp = NULL;
	}
	r = e2_touch_name(fs, dir, true);
	if (r)
		goto out;
	ip->nlookup++;
	e2_istat(fs, ip, st);
out:
	e2_deps_free(fs, &d);
	patch_release(fs->c, linked);
	patch_release(fs->c, lp);
	e2_unlock(fs);
	return r;
}
