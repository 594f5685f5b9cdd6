/* ext2: the operations of e2.h that look up and remove names, and the
 * helpers the other operation files share.  Each operation takes fs->lock,
 * checks its arguments, allocates everything it needs before linking
 * anything in (so that -ENOSPC leaves nothing half done), and creates its
 * patches with the soft-updates dependencies of design.md §4. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include "e2_int.h"

void e2_lock(struct e2fs *fs)
{
	e2_lock_caller(fs, NULL);
}

void e2_lock_caller(struct e2fs *fs, const struct e2_caller *who)
{
	pthread_mutex_lock(&fs->lock);
	/* (before the caller is set: the commit belongs to no patchgroup) */
	e2_jbound_locked(fs);
	fs->scope = who ? who->scope : NULL;
	fs->caller_pid = who && who->pid > 0 ? who->pid : 0;
	fs->caller_start = fs->caller_pid ? who->start : 0;
	fs->caller_group_order = who && who->group_order;
	fs->caller = who;
	e2_icache_trim(fs);
}

void e2_unlock(struct e2fs *fs)
{
	fs->scope = NULL;
	fs->caller_pid = 0;
	fs->caller_start = 0;
	fs->caller_group_order = false;
	fs->caller = NULL;
	pthread_mutex_unlock(&fs->lock);
}

int e2_check_name(const char *name, size_t *len)
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

int e2_check_change(const struct e2fs *fs, const char *name, size_t *len)
{
	if (fs->ro)
		return -EROFS;
	return e2_check_name(name, len);
}

bool e2_dot_or_dotdot(const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..");
}

/* A live inode: in range, in use.  One freed while the kernel still held
 * it (removed, never open) is gone: -ENOENT, as for its name. */
int e2_get_live(struct e2fs *fs, uint32_t ino, struct e2_inode **out)
{
	struct e2_inode *ip;
	int r;

	if (e2_iheld_free(fs, ino))
		return -ENOENT;
	r = e2_iget(fs, ino, &ip);
	if (r)
		return r;
	if (ip->freed || !ip->d.i_mode)
		return e2_err(fs, -EIO, "inode %u is not in use", ino);
	*out = ip;
	return 0;
}

/* A live regular file (the inode read and write work on). */
int e2_get_file(struct e2fs *fs, uint32_t ino, struct e2_inode **out)
{
	int r = e2_get_live(fs, ino, out);

	if (r)
		return r;
	if (e2_idir(*out))
		return -EISDIR;
	if (!S_ISREG(e2_imode(*out)))
		return -EINVAL;
	return 0;
}

int e2_get_dir(struct e2fs *fs, uint32_t ino, struct e2_inode **out)
{
	int r = e2_get_live(fs, ino, out);

	if (r)
		return r;
	if (!e2_idir(*out))
		return -ENOTDIR;
	if (!e2_ilinks(&(*out)->d))
		return -ENOENT; /* removed directory */
	return 0;
}

/* The inode an entry names, checked to be in use. */
int e2_entry_inode(struct e2fs *fs, struct e2_inode *dir, const struct e2_dloc *loc,
		   const char *name, struct e2_inode **out)
{
	struct e2_inode *ip;
	int r = e2_iget(fs, loc->ino, &ip);

	if (r)
		return r;
	if (ip->freed || !ip->d.i_mode || (!e2_ilinks(&ip->d) && !ip->nlookup && !ip->nopen))
		return e2_err(fs, -EIO, "directory %u: entry '%s' names free inode %u", dir->ino,
			      name, loc->ino);
	*out = ip;
	return 0;
}

int e2_add_links(struct e2fs *fs, struct e2_inode *ip, int delta, struct e2_deps *deps,
		 struct patch **out)
{
	struct ext2_inode_large nw = ip->d;
	struct timespec now;

	e2_now_ts(fs, &now);
	e2_iset_links(&nw, (uint16_t)(e2_ilinks(&nw) + delta));
	e2_iset_time(fs, &nw, E2_T_CTIME, &now);
	return e2_iwrite(fs, ip, &nw, deps, out);
}

/* e2_add_links after up to three patches (NULL: none). */
int e2_add_links_after(struct e2fs *fs, struct e2_inode *ip, int delta, struct patch *a,
		       struct patch *b, struct patch *c, struct patch **out)
{
	struct e2_deps d = {0};
	int r;

	if (!(r = e2_deps_addref(&d, a)) && !(r = e2_deps_addref(&d, b)) &&
	    !(r = e2_deps_addref(&d, c)))
		r = e2_add_links(fs, ip, delta, &d, out);
	e2_deps_free(fs, &d);
	return r;
}

/* Write ip's clear (links 0 and dtime, one patch) after deps, and for a
 * directory after every removal of an entry from it. */
static int clear_inode(struct e2fs *fs, struct e2_inode *ip, struct e2_deps *deps,
		       struct patch **out)
{
	struct ext2_inode_large nw = ip->d;
	struct e2_deps d = {0};
	struct timespec now;
	int r;

	e2_patch_drop_committed(fs, &ip->rmset);
	if (ip->rmset) {
		for (size_t i = 0; deps && i < deps->n; i++)
			if ((r = e2_deps_addref(&d, deps->p[i])))
				goto out;
		if ((r = e2_deps_addref(&d, ip->rmset)))
			goto out;
		deps = &d;
	}
	e2_now_ts(fs, &now);
	e2_iset_links(&nw, 0);
	e2_iset_time(fs, &nw, E2_T_CTIME, &now);
	nw.i_dtime = htole32((uint32_t)now.tv_sec);
	r = e2_iwrite(fs, ip, &nw, deps, out);
out:
	e2_deps_free(fs, &d);
	return r;
}

/* ip has no name left: `gone` is the patch after which the disk holds
 * neither its name nor a live inode; its blocks and bitmap bit are freed
 * after it, now, or once the last open is released and the kernel has
 * forgotten it (e2_iunref).  Takes gone's reference. */
static int forget_inode(struct e2fs *fs, struct e2_inode *ip, struct patch *gone)
{
	int r;

	patch_release(fs->c, ip->clear);
	ip->clear = gone;
	ip->unlinked = true;
	e2_dindex_free(ip->dix);
	ip->dix = NULL;
	r = e2_iunref(fs, ip);
	/* Still open or held: under a journal it goes on the orphan list, in
	 * this transaction, so that a crash before it is freed cannot leave
	 * it allocated with no name. */
	if (!r && !ip->freed)
		r = e2_orphan_add(fs, ip);
	return r;
}

/* Link count reached 0: clear the inode (links 0 and dtime in one patch,
 * after deps), and free it now if nobody holds it. */
int e2_drop_last_link(struct e2fs *fs, struct e2_inode *ip, struct e2_deps *deps)
{
	struct patch *c = NULL;
	int r = clear_inode(fs, ip, deps, &c);

	return r ? r : forget_inode(fs, ip, c);
}

int e2_unlink_inode(struct e2fs *fs, struct e2_inode *ip, struct patch *removal)
{
	struct e2_deps d = {0};
	int r;

	r = e2_deps_addref(&d, removal);
	if (r)
		return r;
	if (e2_ilinks(&ip->d) > 1 && !e2_idir(ip))
		r = e2_add_links(fs, ip, -1, &d, NULL);
	else
		r = e2_drop_last_link(fs, ip, &d);
	e2_deps_free(fs, &d);
	return r;
}

/* ip lost the name in dir whose removal (or retargeting) is `removal`:
 * lower its count or clear it; a removed directory's ".." stops counting
 * in dir once the directory is cleared. */
int e2_remove_inode(struct e2fs *fs, struct e2_inode *dir, struct e2_inode *ip,
		    struct patch *removal)
{
	int r = e2_unlink_inode(fs, ip, removal);

	if (!r && e2_idir(ip))
		r = e2_add_links_after(fs, dir, -1, ip->clear, NULL, NULL, NULL);
	return r;
}

/* The times a name operation sets: ctime, and mtime too for a directory
 * whose names changed.  Ordered by no patchgroup (e2_gate.c). */
int e2_touch_name(struct e2fs *fs, struct e2_inode *ip, bool mtime)
{
	struct patch_scope *sc = e2_scope_quiet(fs, NULL);
	int r = e2_itouch(fs, ip, mtime, true);

	e2_scope_restore(fs, sc);
	return r;
}

int e2_lookup(struct e2fs *fs, uint32_t parent, const char *name, struct stat *st)
{
	struct e2_inode *dir, *ip;
	struct e2_dloc loc;
	size_t len;
	int r;

	r = e2_check_name(name, &len);
	if (r)
		return r;
	e2_lock(fs);
	r = e2_get_dir(fs, parent, &dir);
	if (!r)
		r = e2_dir_lookup(fs, dir, name, len, &loc);
	if (!r)
		r = e2_entry_inode(fs, dir, &loc, name, &ip);
	if (!r) {
		ip->nlookup++;
		e2_istat(fs, ip, st);
	}
	e2_unlock(fs);
	return r;
}

int e2_forget(struct e2fs *fs, uint32_t ino, uint64_t nlookup)
{
	struct e2_inode *ip;
	int r = 0;

	if (ino < 1 || ino > fs->ninodes)
		return -EIO;
	e2_lock(fs);
	/* Only a cached inode has references to drop.  A freed one is not
	 * read back: e2_iget would take it for a reallocated inode. */
	ip = e2_ifind(fs, ino);
	if (ip) {
		ip->nlookup = ip->nlookup > nlookup ? ip->nlookup - nlookup : 0;
		r = e2_iunref(fs, ip);
	}
	e2_unlock(fs);
	return r;
}

/* The inode the kernel asks about, with fs locked: a live one, or one
 * freed while the kernel still holds it (only when e2_close frees what is
 * left), which answers with its last attributes and no links.  An
 * unlinked inode the kernel holds is not freed, and answers as any
 * other. */
static int e2_get_asked(struct e2fs *fs, uint32_t ino, struct e2_inode **ip)
{
	if (e2_iheld_free(fs, ino)) {
		*ip = e2_ifind(fs, ino);
		return 0;
	}
	return e2_get_live(fs, ino, ip);
}

int e2_getattr(struct e2fs *fs, uint32_t ino, struct stat *st)
{
	struct e2_inode *ip;
	int r;

	e2_lock(fs);
	r = e2_get_asked(fs, ino, &ip);
	if (!r)
		e2_istat(fs, ip, st);
	e2_unlock(fs);
	return r;
}

int e2_generation(struct e2fs *fs, uint32_t ino, uint32_t *gen)
{
	struct e2_inode *ip;
	int r;

	e2_lock(fs);
	r = e2_get_asked(fs, ino, &ip);
	if (!r)
		*gen = le32toh(ip->d.i_generation);
	e2_unlock(fs);
	return r;
}

/* ip's last name, name in dir, goes after `after` (may be NULL): the entry
 * is removed first (after `after`), then the inode is cleared, then its
 * blocks and bit are freed (design.md §4).  A crash in between leaves an
 * unattached inode (or unconnected directory) that still holds its data:
 * a leak, which e2fsck -fy puts in lost+found.  The other order would
 * leave a name for a deleted inode, whose number and blocks may be handed
 * out again.  *rmp (if not NULL) gets the removal.  With posp the entry is
 * freed in place and *posp gets its position (e2_dir_remove_at). */
int e2_remove_last(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
		   struct e2_inode *ip, struct patch *after, struct patch **rmp, uint32_t *posp)
{
	struct e2_deps d = {0}, cd = {0};
	struct patch *c = NULL, *rm = NULL;
	int r;

	if ((r = e2_deps_addref(&d, after)) ||
	    (r = e2_dir_remove_at(fs, dir, name, len, &d, &rm, posp)))
		goto out;
	e2_dir_removal_pending(fs, dir, rm);
	/* (Failing here leaves the inode counted with no name: a leak.) */
	if ((r = e2_deps_addref(&cd, rm)) || (r = clear_inode(fs, ip, &cd, &c)))
		goto out;
	r = forget_inode(fs, ip, c);
	c = NULL;
	if (!r && e2_idir(ip))
		r = e2_add_links_after(fs, dir, -1, ip->clear, NULL, NULL, NULL);
	if (!r && rmp) {
		*rmp = rm;
		rm = NULL;
	}
out:
	patch_release(fs->c, c);
	patch_release(fs->c, rm);
	e2_deps_free(fs, &d);
	e2_deps_free(fs, &cd);
	return r;
}

static int remove_common(struct e2fs *fs, const struct e2_caller *who, uint32_t parent,
			 const char *name, bool rmdir)
{
	struct e2_inode *dir, *ip;
	struct e2_deps d = {0};
	struct patch *rm = NULL;
	struct e2_dloc loc;
	size_t len;
	int r;

	r = e2_check_change(fs, name, &len);
	if (r)
		return r;
	if (rmdir && !strcmp(name, "."))
		return -EINVAL;
	if (rmdir && !strcmp(name, ".."))
		return -ENOTEMPTY;
	if (!rmdir && e2_dot_or_dotdot(name))
		return -EISDIR;
	e2_lock_caller(fs, who);
	r = e2_get_dir(fs, parent, &dir);
	if (!r)
		r = e2_dir_lookup(fs, dir, name, len, &loc);
	if (!r)
		r = e2_entry_inode(fs, dir, &loc, name, &ip);
	if (r)
		goto out;
	/* (as Linux's may_delete(), before the file type) */
	if (e2_iimmutable(dir) || e2_iappend(dir) || e2_iimmutable(ip) || e2_iappend(ip)) {
		r = -EPERM;
		goto out;
	}
	if (rmdir != e2_idir(ip)) {
		r = rmdir ? -ENOTDIR : -EISDIR;
		goto out;
	}
	if (rmdir) {
		r = e2_dir_empty(fs, ip);
		if (r)
			goto out;
	}
	e2_gate_drop(fs, ip);
	if (!e2_idir(ip) && e2_ilinks(&ip->d) > 1) {
		/* Not its last name: the entry goes, then the count. */
		r = e2_dir_remove(fs, dir, name, len, &d, &rm);
		if (!r)
			r = e2_add_links_after(fs, ip, -1, rm, NULL, NULL, NULL);
	} else {
		r = e2_remove_last(fs, dir, name, len, ip, NULL, NULL, NULL);
	}
	if (!r)
		r = e2_touch_name(fs, dir, true);
out:
	patch_release(fs->c, rm);
	e2_deps_free(fs, &d);
	e2_unlock(fs);
	return r;
}

int e2_unlink(struct e2fs *fs, const struct e2_caller *who, uint32_t parent, const char *name)
{
	return remove_common(fs, who, parent, name, false);
}

int e2_rmdir(struct e2fs *fs, const struct e2_caller *who, uint32_t parent, const char *name)
{
	return remove_common(fs, who, parent, name, true);
}

int e2_open_inode(struct e2fs *fs, uint32_t ino)
{
	return e2_open_as(fs, ino, O_RDONLY, NULL);
}

int e2_open_as(struct e2fs *fs, uint32_t ino, int oflags, mode_t *mode)
{
	bool writes = (oflags & O_ACCMODE) != O_RDONLY || (oflags & O_TRUNC);
	struct e2_inode *ip;
	int r;

	e2_lock(fs);
	r = e2_get_live(fs, ino, &ip);
	if (!r && writes &&
	    (e2_iimmutable(ip) || (e2_iappend(ip) && (!(oflags & O_APPEND) || (oflags & O_TRUNC)))))
		r = -EPERM;
	if (!r) {
		ip->nopen++;
		if (mode)
			*mode = e2_imode(ip);
	}
	e2_unlock(fs);
	return r;
}

int e2_release_inode(struct e2fs *fs, uint32_t ino)
{
	struct e2_inode *ip;
	int r;

	e2_lock(fs);
	r = e2_iget(fs, ino, &ip);
	if (!r) {
		if (ip->nopen)
			ip->nopen--;
		r = e2_iunref(fs, ip);
	}
	e2_unlock(fs);
	return r;
}

int e2_readdir(struct e2fs *fs, uint32_t ino, off_t off,
	       int (*fn)(const struct e2_dirent *d, void *arg), void *arg)
{
	struct e2_inode *ip;
	int r;

	e2_lock(fs);
	r = e2_get_live(fs, ino, &ip);
	if (!r)
		r = e2_dir_iterate(fs, ip, off, fn, arg);
	if (r >= 0 && !fs->opts.nodiratime)
		e2_touch_atime(fs, ip);
	e2_unlock(fs);
	return r;
}
