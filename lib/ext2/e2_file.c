/* ext2: file contents and attributes: setattr (incl. truncate), read,
 * write. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "e2_int.h"

int e2_setattr(struct e2fs *fs, const struct e2_caller *who, uint32_t ino, const struct stat *attr,
	       unsigned set, struct stat *st)
{
	struct ext2_inode_large nw;
	struct e2_inode *ip;
	struct timespec now;
	int r;

	if (fs->ro)
		return -EROFS;
	e2_now_ts(fs, &now);
	e2_lock_caller(fs, who);
	r = e2_get_live(fs, ino, &ip);
	if (r)
		goto out;
	/* (an empty set, as chown(f, -1, -1) sends, changes ctime alone) */
	if (e2_iimmutable(ip) || e2_iappend(ip)) {
		r = -EPERM;
		goto out;
	}
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
		if ((uint64_t)attr->st_size > e2_max_size(fs)) {
			r = -EFBIG;
			goto out;
		}
	}
	/* The caller's drop comes after every check, as Linux's
	 * setattr_prepare() refuses a change before anything moves, and
	 * before the change itself, whose new mode it leaves.  An empty set
	 * is chown(f, -1, -1), which drops as a chown does. */
	if (who && who->kill_priv && (!set || (set & (E2_SET_SIZE | E2_SET_UID | E2_SET_GID)))) {
		r = e2_kill_priv_locked(fs, ip, who->kill_suid,
					set & E2_SET_GID ? attr->st_gid : E2_SAME_GID);
		if (r < 0)
			goto out;
		if (r && who->dropped)
			*who->dropped = true;
		r = 0;
	}
	if (set & E2_SET_SIZE) {
		if ((uint64_t)attr->st_size != e2_isize(&ip->d)) {
			r = e2_truncate_locked(fs, ip, (uint64_t)attr->st_size);
			if (r)
				goto out;
		}
	}
	nw = ip->d;
	if (set & E2_SET_SIZE)
		e2_iset_time(fs, &nw, E2_T_MTIME, &now);
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
		e2_iset_time(fs, &nw, E2_T_ATIME, &now);
	else if (set & E2_SET_ATIME)
		e2_iset_time(fs, &nw, E2_T_ATIME, &attr->st_atim);
	if (set & E2_SET_MTIME_NOW)
		e2_iset_time(fs, &nw, E2_T_MTIME, &now);
	else if (set & E2_SET_MTIME)
		e2_iset_time(fs, &nw, E2_T_MTIME, &attr->st_mtim);
	if (set & E2_SET_CTIME)
		e2_iset_time(fs, &nw, E2_T_CTIME, &attr->st_ctim);
	else
		e2_iset_time(fs, &nw, E2_T_CTIME, &now);
	r = e2_iwrite(fs, ip, &nw, NULL, NULL);
	if (!r && (set & E2_SET_MODE))
		r = e2_acl_chmod_locked(fs, ip);
	if (!r)
		e2_istat(fs, ip, st);
out:
	e2_unlock(fs);
	return r;
}

/* at is before bt (as Linux's timespec64_compare(at, bt) < 0). */
static bool ts_before(const struct timespec *at, const struct timespec *bt)
{
	return at->tv_sec < bt->tv_sec || (at->tv_sec == bt->tv_sec && at->tv_nsec < bt->tv_nsec);
}

void e2_touch_atime(struct e2fs *fs, struct e2_inode *ip)
{
	struct timespec at, mt, ct, now;
	struct ext2_inode_large nw;

	if (fs->ro || fs->opts.atime == E2_ATIME_NOATIME ||
	    (le32toh(ip->d.i_flags) & EXT2_NOATIME_FL))
		return;
	e2_iget_time(fs, &ip->d, E2_T_ATIME, &at);
	e2_iget_time(fs, &ip->d, E2_T_MTIME, &mt);
	e2_iget_time(fs, &ip->d, E2_T_CTIME, &ct);
	e2_now_ts(fs, &now);
	if (fs->opts.atime == E2_ATIME_STRICT) {
		if (at.tv_sec == now.tv_sec && at.tv_nsec == now.tv_nsec)
			return;
	} else if (ts_before(&mt, &at) && ts_before(&ct, &at) && now.tv_sec - at.tv_sec < 86400) {
		/* (Linux's relatime moves it when the last change is as new
		 * as the access or newer: a new file's first read does) */
		return;
	}
	nw = ip->d;
	e2_iset_time(fs, &nw, E2_T_ATIME, &now);
	e2_iwrite(fs, ip, &nw, NULL, NULL); /* best effort: the read succeeded */
}

ssize_t e2_read(struct e2fs *fs, uint32_t ino, void *buf, size_t size, off_t off)
{
	struct e2_bcursor cur = {0, 0};
	struct e2_inode *ip;
	uint64_t fsize, pos, end;
	ssize_t r;

	if (off < 0)
		return -EINVAL;
	e2_lock(fs);
	r = e2_get_file(fs, ino, &ip);
	if (r)
		goto out;
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
		e = e2_bmap_cur(fs, ip, pos / fs->bs, &pblk, &cur);
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
	e2_touch_atime(fs, ip);
out:
	e2_unlock(fs);
	return r;
}

int e2_getflags(struct e2fs *fs, uint32_t ino, uint32_t *flags)
{
	struct e2_inode *ip;
	int r;

	e2_lock(fs);
	r = e2_get_live(fs, ino, &ip);
	if (!r)
		*flags = le32toh(ip->d.i_flags) & E2_FL_VISIBLE;
	e2_unlock(fs);
	return r;
}

uint32_t e2_inherit_flags(mode_t mode, uint32_t dirflags)
{
	uint32_t f = dirflags & E2_FL_INHERITED;

	if (S_ISDIR(mode))
		return f;
	if (S_ISREG(mode))
		return f & ~(uint32_t)(EXT2_DIRSYNC_FL | EXT2_TOPDIR_FL);
	return f & (EXT2_NODUMP_FL | EXT2_NOATIME_FL);
}

int e2_setflags(struct e2fs *fs, const struct e2_caller *who, uint32_t ino, uint32_t flags,
		bool may_fix)
{
	struct ext2_inode_large nw;
	struct e2_inode *ip;
	struct timespec now;
	uint32_t old;
	int r;

	if (fs->ro)
		return -EROFS;
	e2_now_ts(fs, &now);
	e2_lock_caller(fs, who);
	r = e2_get_live(fs, ino, &ip);
	if (r)
		goto out;
	old = le32toh(ip->d.i_flags);
	flags = (old & ~E2_FL_MODIFIABLE) | (flags & E2_FL_MODIFIABLE);
	if (((flags ^ old) & (EXT2_IMMUTABLE_FL | EXT2_APPEND_FL)) && !may_fix) {
		r = -EPERM;
		goto out;
	}
	/* (the directory flags are refused on anything else, as Linux's
	 * ext2 support refuses them) */
	if (!S_ISDIR(e2_imode(ip)) && (flags & ~old & (EXT2_DIRSYNC_FL | EXT2_TOPDIR_FL))) {
		r = -EOPNOTSUPP;
		goto out;
	}
	if (flags == old)
		goto out;
	nw = ip->d;
	nw.i_flags = htole32(flags);
	e2_iset_time(fs, &nw, E2_T_CTIME, &now);
	r = e2_iwrite(fs, ip, &nw, NULL, NULL);
out:
	e2_unlock(fs);
	return r;
}

ssize_t e2_write(struct e2fs *fs, const struct e2_caller *who, uint32_t ino, const void *buf,
		 size_t size, off_t off)
{
	struct e2_inode *ip;
	size_t done = 0;
	ssize_t r;

	if (fs->ro)
		return -EROFS;
	if (off < 0)
		return -EINVAL;
	if (size > 0x40000000)
		size = 0x40000000;
	e2_lock_caller(fs, who);
	r = e2_get_file(fs, ino, &ip);
	if (r)
		goto out;
	/* (an append-only file is written through O_APPEND alone, which
	 * fstitch-mount's open asks for: at its end) */
	if (e2_iimmutable(ip) || (e2_iappend(ip) && (uint64_t)off < e2_isize(&ip->d))) {
		r = -EPERM;
		goto out;
	}
	/* Linux's write checks come first: a write of nothing, or from past
	 * the largest file, drops nothing. */
	if (size == 0) {
		r = 0;
		goto out;
	}
	if ((uint64_t)off >= e2_max_size(fs)) {
		r = -EFBIG;
		goto out;
	}
	if (who && who->kill_priv) {
		r = e2_kill_priv_locked(fs, ip, who->kill_suid, E2_SAME_GID);
		if (r < 0)
			goto out;
		if (r && who->dropped)
			*who->dropped = true;
		r = 0;
	}
	if (!e2_journaling(fs)) {
		/* A new file seen only through its entry: what that waited
		 * for, its changes need not (e2_gate.c). */
		struct e2_gate *g = e2_gate_get(fs, ip);
		struct patch_scope *sc = g ? e2_scope_quiet(fs, g) : fs->scope;

		r = e2_write_locked(fs, ip, buf, size, (uint64_t)off, false, NULL, NULL);
		e2_scope_restore(fs, sc);
		goto out;
	}
	/* Under a journal, in pieces that each fit a transaction (a crash
	 * keeps or loses each piece whole: fstitch(7)). */
	while (done < size) {
		uint64_t at = (uint64_t)off + done, piece;
		uint64_t nb = (at + (size - done) - 1) / fs->bs - at / fs->bs + 1;
		size_t len;
		int w;

		r = e2_jroom(fs, nb, &piece);
		if (r)
			break;
		len = size - done;
		if (piece < nb)
			len = (size_t)(piece * fs->bs - at % fs->bs);
		w = e2_write_locked(fs, ip, (const uint8_t *)buf + done, len, at, false, NULL,
				    NULL);
		if (w < 0) {
			r = w;
			break;
		}
		done += (size_t)w;
		if ((size_t)w < len)
			break;
	}
	if (done)
		r = (ssize_t)done;
out:
	e2_unlock(fs);
	return r;
}
