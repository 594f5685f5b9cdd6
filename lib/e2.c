/* ext2: the operations of e2.h.  Each one takes fs->lock, checks its
 * arguments, allocates everything it needs before linking anything in (so
 * that -ENOSPC leaves nothing half done), and creates its patches with the
 * soft-updates dependencies of design.md §4. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include "e2_int.h"

static void lock(struct e2fs *fs)
{
	pthread_mutex_lock(&fs->lock);
	e2_icache_trim(fs);
}

static void unlock(struct e2fs *fs)
{
	pthread_mutex_unlock(&fs->lock);
}

static int check_name(const char *name, size_t *len)
{
	size_t n = strlen(name);

	if (n == 0)
		return -ENOENT;
	if (n > EXT2_NAME_LEN)
		return -ENAMETOOLONG;
	if (memchr(name, '/', n))
		return -EINVAL;
	*len = n;
	return 0;
}

static bool dot_or_dotdot(const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..");
}

/* A live inode: in range, in use. */
static int get_live(struct e2fs *fs, uint32_t ino, struct e2_inode **out)
{
	struct e2_inode *ip;
	int r = e2_iget(fs, ino, &ip);

	if (r)
		return r;
	if (ip->freed || !ip->d.i_mode)
		return e2_err(fs, -EIO, "inode %u is not in use", ino);
	*out = ip;
	return 0;
}

static int get_dir(struct e2fs *fs, uint32_t ino, struct e2_inode **out)
{
	int r = get_live(fs, ino, out);

	if (r)
		return r;
	if (!e2_idir(*out))
		return -ENOTDIR;
	if (!e2_ilinks(&(*out)->d))
		return -ENOENT; /* removed directory */
	return 0;
}

/* The inode an entry names, checked to be in use. */
static int entry_inode(struct e2fs *fs, struct e2_inode *dir, const struct e2_dloc *loc,
		       const char *name, struct e2_inode **out)
{
	struct e2_inode *ip;
	int r = e2_iget(fs, loc->ino, &ip);

	if (r)
		return r;
	if (ip->freed || !ip->d.i_mode || (!e2_ilinks(&ip->d) && !ip->nlookup && !ip->nopen))
		return e2_err(fs, -EIO, "directory %u: entry '%s' names free inode %u",
			      dir->ino, name, loc->ino);
	*out = ip;
	return 0;
}

static int add_links(struct e2fs *fs, struct e2_inode *ip, int delta, struct e2_deps *deps,
		     struct patch **out)
{
	struct ext2_inode nw = ip->d;

	e2_iset_links(&nw, (uint16_t)(e2_ilinks(&nw) + delta));
	nw.i_ctime = htole32(e2_now());
	return e2_iwrite(fs, ip, &nw, deps, out);
}

/* Link count reached 0: clear the inode (links 0 and dtime in one patch,
 * after the entry removal), and free it now if nobody holds it. */
static int drop_last_link(struct e2fs *fs, struct e2_inode *ip, struct e2_deps *deps)
{
	struct ext2_inode nw = ip->d;
	struct patch *c = NULL;
	int r;

	e2_iset_links(&nw, 0);
	nw.i_dtime = nw.i_ctime = htole32(e2_now());
	r = e2_iwrite(fs, ip, &nw, deps, &c);
	if (r)
		return r;
	patch_release(fs->c, ip->clear);
	ip->clear = c;
	e2_dindex_free(ip->dix);
	ip->dix = NULL;
	return e2_iunref(fs, ip);
}

static int unlink_inode(struct e2fs *fs, struct e2_inode *ip, struct patch *removal)
{
	struct e2_deps d = { 0 };
	int r;

	r = e2_deps_addref(&d, removal);
	if (r)
		return r;
	if (e2_ilinks(&ip->d) > 1 && !e2_idir(ip))
		r = add_links(fs, ip, -1, &d, NULL);
	else
		r = drop_last_link(fs, ip, &d);
	e2_deps_free(fs, &d);
	return r;
}

static int touch_dir(struct e2fs *fs, struct e2_inode *dir)
{
	return e2_itouch(fs, dir, true, true);
}

int e2_lookup(struct e2fs *fs, uint32_t parent, const char *name, struct stat *st)
{
	struct e2_inode *dir, *ip;
	struct e2_dloc loc;
	size_t len;
	int r;

	r = check_name(name, &len);
	if (r)
		return r;
	lock(fs);
	r = get_dir(fs, parent, &dir);
	if (!r)
		r = e2_dir_lookup(fs, dir, name, len, &loc);
	if (!r)
		r = entry_inode(fs, dir, &loc, name, &ip);
	if (!r) {
		ip->nlookup++;
		e2_istat(fs, ip, st);
	}
	unlock(fs);
	return r;
}

int e2_forget(struct e2fs *fs, uint32_t ino, uint64_t nlookup)
{
	struct e2_inode *ip;
	int r;

	lock(fs);
	r = e2_iget(fs, ino, &ip);
	if (!r) {
		ip->nlookup = ip->nlookup > nlookup ? ip->nlookup - nlookup : 0;
		r = e2_iunref(fs, ip);
	}
	unlock(fs);
	return r;
}

int e2_getattr(struct e2fs *fs, uint32_t ino, struct stat *st)
{
	struct e2_inode *ip;
	int r;

	lock(fs);
	r = get_live(fs, ino, &ip);
	if (!r)
		e2_istat(fs, ip, st);
	unlock(fs);
	return r;
}

int e2_setattr(struct e2fs *fs, uint32_t ino, const struct stat *attr, unsigned set,
	       struct stat *st)
{
	struct ext2_inode nw;
	struct e2_inode *ip;
	uint32_t now = htole32(e2_now());
	int r;

	if (fs->ro)
		return -EROFS;
	lock(fs);
	r = get_live(fs, ino, &ip);
	if (r)
		goto out;
	if (set & E2_SET_SIZE) {
		mode_t m = e2_imode(ip);

		if (S_ISDIR(m)) {
			r = -EISDIR;
			goto out;
		}
		if (!S_ISREG(m)) {
			r = -EINVAL;
			goto out;
		}
		if (attr->st_size < 0) {
			r = -EINVAL;
			goto out;
		}
		if ((uint64_t)attr->st_size != e2_isize(&ip->d)) {
			r = e2_truncate_locked(fs, ip, (uint64_t)attr->st_size);
			if (r)
				goto out;
		}
	}
	nw = ip->d;
	if (set & E2_SET_SIZE)
		nw.i_mtime = now;
	if (set & E2_SET_MODE)
		nw.i_mode = htole16((uint16_t)((e2_imode(ip) & S_IFMT) | (attr->st_mode & 07777)));
	if (set & E2_SET_UID) {
		nw.i_uid = htole16((uint16_t)attr->st_uid);
		nw.osd2.linux2.l_i_uid_high = htole16((uint16_t)(attr->st_uid >> 16));
	}
	if (set & E2_SET_GID) {
		nw.i_gid = htole16((uint16_t)attr->st_gid);
		nw.osd2.linux2.l_i_gid_high = htole16((uint16_t)(attr->st_gid >> 16));
	}
	if (set & E2_SET_ATIME_NOW)
		nw.i_atime = now;
	else if (set & E2_SET_ATIME)
		nw.i_atime = htole32((uint32_t)attr->st_atime);
	if (set & E2_SET_MTIME_NOW)
		nw.i_mtime = now;
	else if (set & E2_SET_MTIME)
		nw.i_mtime = htole32((uint32_t)attr->st_mtime);
	if (set & E2_SET_CTIME)
		nw.i_ctime = htole32((uint32_t)attr->st_ctime);
	else if (set)
		nw.i_ctime = now;
	r = e2_iwrite(fs, ip, &nw, NULL, NULL);
	if (!r)
		e2_istat(fs, ip, st);
out:
	unlock(fs);
	return r;
}

/* What a new inode holds besides the common fields. */
struct newinode {
	mode_t mode;
	dev_t rdev;
	const char *target; /* symlink */
	size_t tlen;
};

static int create(struct e2fs *fs, uint32_t parent, const char *name,
		  const struct newinode *ni, uid_t uid, gid_t gid, struct stat *st)
{
	struct e2_inode *dir, *ip;
	struct e2_deps ideps = { 0 }, bdeps = { 0 }, edeps = { 0 };
	struct patch *linked = NULL, *ibit = NULL, *bbit = NULL, *binit = NULL, *init = NULL;
	struct patch *plink = NULL, *ent = NULL;
	struct ext2_inode nw;
	struct e2_dloc loc;
	bool isdir = S_ISDIR(ni->mode);
	bool slow = S_ISLNK(ni->mode) && ni->tlen > E2_FAST_SYMLINK_MAX;
	uint32_t ino = 0, blk = 0, now = htole32(e2_now());
	uint8_t *buf = NULL;
	size_t len;
	int r;

	if (fs->ro)
		return -EROFS;
	r = check_name(name, &len);
	if (r)
		return r;
	lock(fs);
	r = get_dir(fs, parent, &dir);
	if (r)
		goto out;
	r = e2_dir_lookup(fs, dir, name, len, &loc);
	if (r != -ENOENT) {
		if (!r)
			r = -EEXIST;
		goto out;
	}
	if (isdir && e2_ilinks(&dir->d) >= E2_LINK_MAX) {
		r = -EMLINK;
		goto out;
	}
	/* Allocate everything first: entry room, inode, block. */
	r = e2_dir_prepare(fs, dir, len, &linked);
	if (r)
		goto out;
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
		goto out;
	buf = calloc(1, fs->bs);
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	if (isdir) {
		/* The parent's count goes up before the ".." that counts. */
		r = add_links(fs, dir, +1, NULL, &plink);
		if (!r)
			r = e2_deps_addref(&bdeps, plink);
		if (r)
			goto out;
		e2_dir_new_block(fs, ino, parent, buf);
	} else if (slow) {
		memcpy(buf, ni->target, ni->tlen);
	}
	if (blk) {
		r = e2_block_init(fs, blk, buf, &bdeps, &binit);
		if (r)
			goto out;
	}
	memset(&nw, 0, sizeof(nw));
	nw.i_mode = htole16((uint16_t)ni->mode);
	nw.i_uid = htole16((uint16_t)uid);
	nw.osd2.linux2.l_i_uid_high = htole16((uint16_t)(uid >> 16));
	nw.i_gid = htole16((uint16_t)gid);
	nw.osd2.linux2.l_i_gid_high = htole16((uint16_t)(gid >> 16));
	nw.i_atime = nw.i_ctime = nw.i_mtime = now;
	e2_iset_links(&nw, isdir ? 2 : 1);
	nw.i_generation = htole32((uint32_t)random());
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
	/* The inode waits for its bitmap bit and its block. */
	if ((r = e2_deps_addref(&ideps, ibit)) || (r = e2_deps_addref(&ideps, bbit)) ||
	    (r = e2_deps_addref(&ideps, binit)))
		goto out;
	r = e2_iinit(fs, ip, &nw, &ideps, &init);
	if (r)
		goto out;
	if (blk)
		ip->last_pblk = blk;
	/* The entry waits for the initialised inode. */
	if ((r = e2_deps_addref(&edeps, init)) || (r = e2_deps_addref(&edeps, linked)))
		goto out;
	r = e2_dir_add(fs, dir, name, len, ino, ni->mode, &edeps, &ent);
	if (r) {
		/* Not linked anywhere: undo the inode (a leak at worst). */
		struct e2_deps none = { 0 };

		drop_last_link(fs, ip, &none);
		goto out;
	}
	e2_isync_add(fs, ip, ent);
	patch_release(fs->c, ip->init);
	ip->init = init;
	init = NULL;
	r = touch_dir(fs, dir);
	if (r)
		goto out;
	ip->nlookup++;
	e2_istat(fs, ip, st);
out:
	free(buf);
	e2_deps_free(fs, &ideps);
	e2_deps_free(fs, &bdeps);
	e2_deps_free(fs, &edeps);
	patch_release(fs->c, linked);
	patch_release(fs->c, ibit);
	patch_release(fs->c, bbit);
	patch_release(fs->c, binit);
	patch_release(fs->c, init);
	patch_release(fs->c, plink);
	patch_release(fs->c, ent);
	unlock(fs);
	return r;
}

int e2_mknod(struct e2fs *fs, uint32_t parent, const char *name, mode_t mode, dev_t rdev,
	     uid_t uid, gid_t gid, struct stat *st)
{
	struct newinode ni = { .mode = mode, .rdev = rdev };

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
	return create(fs, parent, name, &ni, uid, gid, st);
}

int e2_mkdir(struct e2fs *fs, uint32_t parent, const char *name, mode_t mode, uid_t uid,
	     gid_t gid, struct stat *st)
{
	struct newinode ni = { .mode = S_IFDIR | (mode & 07777) };

	return create(fs, parent, name, &ni, uid, gid, st);
}

int e2_symlink(struct e2fs *fs, uint32_t parent, const char *name, const char *target,
	       uid_t uid, gid_t gid, struct stat *st)
{
	struct newinode ni = { .mode = S_IFLNK | 0777, .target = target };

	ni.tlen = strlen(target);
	if (ni.tlen == 0)
		return -ENOENT;
	if (ni.tlen >= fs->bs || ni.tlen >= 4096)
		return -ENAMETOOLONG;
	return create(fs, parent, name, &ni, uid, gid, st);
}

int e2_readlink(struct e2fs *fs, uint32_t ino, char *buf, size_t size)
{
	struct e2_inode *ip;
	uint64_t len;
	int r;

	lock(fs);
	r = get_live(fs, ino, &ip);
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
	r = (int)len;
out:
	unlock(fs);
	return r;
}

int e2_link(struct e2fs *fs, uint32_t ino, uint32_t newparent, const char *newname,
	    struct stat *st)
{
	struct e2_inode *dir, *ip;
	struct e2_deps d = { 0 };
	struct patch *linked = NULL, *lp = NULL, *ent = NULL;
	struct e2_dloc loc;
	size_t len;
	int r;

	if (fs->ro)
		return -EROFS;
	r = check_name(newname, &len);
	if (r)
		return r;
	lock(fs);
	r = get_live(fs, ino, &ip);
	if (r)
		goto out;
	if (e2_idir(ip)) {
		r = -EPERM;
		goto out;
	}
	if (!e2_ilinks(&ip->d)) {
		r = -ENOENT;
		goto out;
	}
	if (e2_ilinks(&ip->d) >= E2_LINK_MAX) {
		r = -EMLINK;
		goto out;
	}
	r = get_dir(fs, newparent, &dir);
	if (r)
		goto out;
	r = e2_dir_lookup(fs, dir, newname, len, &loc);
	if (r != -ENOENT) {
		if (!r)
			r = -EEXIST;
		goto out;
	}
	r = e2_dir_prepare(fs, dir, len, &linked);
	if (r)
		goto out;
	/* The count goes up before the new entry reaches disk. */
	r = add_links(fs, ip, +1, NULL, &lp);
	if (r)
		goto out;
	e2_patch_drop_committed(fs, &ip->init);
	if ((r = e2_deps_addref(&d, lp)) || (r = e2_deps_addref(&d, ip->init)) ||
	    (r = e2_deps_addref(&d, linked)))
		goto out;
	r = e2_dir_add(fs, dir, newname, len, ino, e2_imode(ip), &d, &ent);
	if (r) {
		struct e2_deps none = { 0 };

		add_links(fs, ip, -1, &none, NULL);
		goto out;
	}
	e2_isync_add(fs, ip, ent);
	patch_release(fs->c, ent);
	if (lp) {
		patch_release(fs->c, ip->init);
		ip->init = lp;
		lp = NULL;
	}
	r = touch_dir(fs, dir);
	if (r)
		goto out;
	ip->nlookup++;
	e2_istat(fs, ip, st);
out:
	e2_deps_free(fs, &d);
	patch_release(fs->c, linked);
	patch_release(fs->c, lp);
	unlock(fs);
	return r;
}

static int remove_common(struct e2fs *fs, uint32_t parent, const char *name, bool rmdir)
{
	struct e2_inode *dir, *ip;
	struct e2_deps d = { 0 };
	struct patch *rm = NULL;
	struct e2_dloc loc;
	size_t len;
	int r;

	if (fs->ro)
		return -EROFS;
	r = check_name(name, &len);
	if (r)
		return r;
	if (rmdir && !strcmp(name, "."))
		return -EINVAL;
	if (rmdir && !strcmp(name, ".."))
		return -ENOTEMPTY;
	if (!rmdir && dot_or_dotdot(name))
		return -EISDIR;
	lock(fs);
	r = get_dir(fs, parent, &dir);
	if (!r)
		r = e2_dir_lookup(fs, dir, name, len, &loc);
	if (!r)
		r = entry_inode(fs, dir, &loc, name, &ip);
	if (r)
		goto out;
	if (rmdir != e2_idir(ip)) {
		r = rmdir ? -ENOTDIR : -EISDIR;
		goto out;
	}
	if (rmdir) {
		r = e2_dir_empty(fs, ip);
		if (r)
			goto out;
	}
	/* The entry goes first; the inode clear (or the lower count) waits. */
	r = e2_dir_remove(fs, dir, name, len, &d, &rm);
	if (r)
		goto out;
	r = unlink_inode(fs, ip, rm);
	if (r)
		goto out;
	if (rmdir) {
		/* The removed directory's ".." no longer counts once it is
		 * cleared. */
		struct e2_deps c = { 0 };

		r = e2_deps_addref(&c, ip->clear);
		if (!r)
			r = add_links(fs, dir, -1, &c, NULL);
		e2_deps_free(fs, &c);
		if (r)
			goto out;
	}
	r = touch_dir(fs, dir);
out:
	patch_release(fs->c, rm);
	e2_deps_free(fs, &d);
	unlock(fs);
	return r;
}

int e2_unlink(struct e2fs *fs, uint32_t parent, const char *name)
{
	return remove_common(fs, parent, name, false);
}

int e2_rmdir(struct e2fs *fs, uint32_t parent, const char *name)
{
	return remove_common(fs, parent, name, true);
}

int e2_open_inode(struct e2fs *fs, uint32_t ino)
{
	struct e2_inode *ip;
	int r;

	lock(fs);
	r = get_live(fs, ino, &ip);
	if (!r)
		ip->nopen++;
	unlock(fs);
	return r;
}

int e2_release_inode(struct e2fs *fs, uint32_t ino)
{
	struct e2_inode *ip;
	int r;

	lock(fs);
	r = e2_iget(fs, ino, &ip);
	if (!r) {
		if (ip->nopen)
			ip->nopen--;
		r = e2_iunref(fs, ip);
	}
	unlock(fs);
	return r;
}

ssize_t e2_read(struct e2fs *fs, uint32_t ino, void *buf, size_t size, off_t off)
{
	struct e2_inode *ip;
	uint64_t fsize, pos, end;
	ssize_t r;

	if (off < 0)
		return -EINVAL;
	lock(fs);
	r = get_live(fs, ino, &ip);
	if (r)
		goto out;
	if (e2_idir(ip)) {
		r = -EISDIR;
		goto out;
	}
	if (!S_ISREG(e2_imode(ip))) {
		r = -EINVAL;
		goto out;
	}
	fsize = e2_isize(&ip->d);
	if ((uint64_t)off >= fsize) {
		r = 0;
		goto out;
	}
	end = fsize - (uint64_t)off < size ? fsize : (uint64_t)off + size;
	for (pos = (uint64_t)off; pos < end;) {
		uint32_t boff = (uint32_t)(pos % fs->bs), len = fs->bs - boff, pblk;
		uint8_t *dst = (uint8_t *)buf + (pos - (uint64_t)off);
		struct cblock *b;
		int e;

		if (len > end - pos)
			len = (uint32_t)(end - pos);
		e = e2_bmap(fs, ip, pos / fs->bs, &pblk);
		if (e) {
			r = e;
			goto out;
		}
		if (!pblk) {
			memset(dst, 0, len);
		} else {
			e = cache_get(fs->c, pblk, &b);
			if (e) {
				r = e2_err(fs, e, "inode %u: cannot read block %u", ino, pblk);
				goto out;
			}
			memcpy(dst, cblock_data(b) + boff, len);
			cache_put(fs->c, b);
		}
		pos += len;
	}
	r = (ssize_t)(end - (uint64_t)off);
out:
	unlock(fs);
	return r;
}

ssize_t e2_write(struct e2fs *fs, uint32_t ino, const void *buf, size_t size, off_t off)
{
	struct e2_inode *ip;
	ssize_t r;

	if (fs->ro)
		return -EROFS;
	if (off < 0)
		return -EINVAL;
	if (size > 0x40000000)
		size = 0x40000000;
	lock(fs);
	r = get_live(fs, ino, &ip);
	if (r)
		goto out;
	if (e2_idir(ip)) {
		r = -EISDIR;
		goto out;
	}
	if (!S_ISREG(e2_imode(ip))) {
		r = -EINVAL;
		goto out;
	}
	r = e2_write_locked(fs, ip, buf, size, (uint64_t)off, false, NULL, NULL);
out:
	unlock(fs);
	return r;
}

int e2_readdir(struct e2fs *fs, uint32_t ino, off_t off,
	       int (*fn)(const struct e2_dirent *d, void *arg), void *arg)
{
	struct e2_inode *ip;
	int r;

	lock(fs);
	r = get_live(fs, ino, &ip);
	if (!r)
		r = e2_dir_iterate(fs, ip, off, fn, arg);
	unlock(fs);
	return r;
}
