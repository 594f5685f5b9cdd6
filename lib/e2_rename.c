/* ext2: rename.
 *
 * Order on disk: the new name exists before the old one goes.  Over an
 * existing target the target entry's inode number is overwritten in place
 * (one patch in one block), so the target name names the old or the new
 * inode at every crash point; the old target is unlinked after that patch.
 * Counts that a crash could leave too low are raised first and lowered
 * last (".." of a moved directory, both inodes of an exchange). */
#include <errno.h>
#include <string.h>
#include "e2_int.h"

/* e2_add_links after up to three patches. */
static int links(struct e2fs *fs, struct e2_inode *ip, int delta, struct patch *d1,
		 struct patch *d2, struct patch *d3, struct patch **out)
{
	struct e2_deps d = {0};
	int r;

	if (!(r = e2_deps_addref(&d, d1)) && !(r = e2_deps_addref(&d, d2)) &&
	    !(r = e2_deps_addref(&d, d3)))
		r = e2_add_links(fs, ip, delta, &d, out);
	e2_deps_free(fs, &d);
	return r;
}

/* True (1) if dir a is d or an ancestor of d. */
static int is_ancestor(struct e2fs *fs, uint32_t a, uint32_t d)
{
	uint32_t cur = d;

	for (uint32_t steps = 0; steps <= fs->ninodes; steps++) {
		struct e2_inode *ip;
		uint32_t up;
		int r;

		if (cur == a)
			return 1;
		if (cur == E2_ROOT_INO)
			return 0;
		r = e2_iget(fs, cur, &ip);
		if (!r)
			r = e2_dir_get_dotdot(fs, ip, &up);
		if (r)
			return r;
		cur = up;
	}
	return e2_err(fs, -EIO, "directory %u: '..' chain loops", d);
}

static int deps2(struct e2fs *fs, struct e2_deps *d, struct patch *a, struct patch *b)
{
	int r = e2_deps_addref(d, a);

	(void)fs;
	if (!r)
		r = e2_deps_addref(d, b);
	return r;
}

/* Unlink the replaced target t (its entry now names another inode: o). */
static int drop_target(struct e2fs *fs, struct e2_inode *p2, struct e2_inode *t, struct patch *o)
{
	int r = e2_unlink_inode(fs, t, o);

	/* A removed directory's ".." stops counting once it is cleared. */
	if (!r && e2_idir(t))
		r = links(fs, p2, -1, t->clear, NULL, NULL, NULL);
	return r;
}

int e2_rename(struct e2fs *fs, uint32_t parent, const char *name, uint32_t newparent,
	      const char *newname, unsigned flags)
{
	struct e2_inode *p1, *p2, *s, *t = NULL;
	struct e2_deps d = {0};
	struct patch *l2 = NULL, *l1 = NULL, *n = NULL, *dd = NULL, *rm = NULL;
	struct patch *ls = NULL, *lt = NULL, *o1 = NULL, *o2 = NULL, *dt = NULL;
	struct patch *linked = NULL;
	struct e2_dloc loc1, loc2;
	size_t len1, len2;
	bool sdir, tdir = false, moved, exists;
	int r;

	if (fs->ro)
		return -EROFS;
	if (flags & ~(unsigned)(E2_RENAME_NOREPLACE | E2_RENAME_EXCHANGE) ||
	    (flags & E2_RENAME_NOREPLACE && flags & E2_RENAME_EXCHANGE))
		return -EINVAL;
	if ((r = e2_check_name(name, &len1)) || (r = e2_check_name(newname, &len2)))
		return r;
	if (e2_dot_or_dotdot(name) || e2_dot_or_dotdot(newname))
		return -EINVAL;
	e2_lock(fs);
	r = e2_iget(fs, parent, &p1);
	if (!r)
		r = e2_iget(fs, newparent, &p2);
	if (r)
		goto out;
	if (!e2_idir(p1) || !e2_idir(p2)) {
		r = -ENOTDIR;
		goto out;
	}
	if (!e2_ilinks(&p1->d) || !e2_ilinks(&p2->d)) {
		r = -ENOENT;
		goto out;
	}
	r = e2_dir_lookup(fs, p1, name, len1, &loc1);
	if (!r)
		r = e2_entry_inode(fs, p1, &loc1, name, &s);
	if (r)
		goto out;
	r = e2_dir_lookup(fs, p2, newname, len2, &loc2);
	if (r && r != -ENOENT)
		goto out;
	exists = !r;
	if (exists) {
		r = e2_entry_inode(fs, p2, &loc2, newname, &t);
		if (r)
			goto out;
	}
	r = 0;
	if (exists && flags & E2_RENAME_NOREPLACE) {
		r = -EEXIST;
		goto out;
	}
	if (!exists && flags & E2_RENAME_EXCHANGE) {
		r = -ENOENT;
		goto out;
	}
	if (exists && t == s)
		goto out; /* two names of one inode: nothing to do */
	sdir = e2_idir(s);
	tdir = exists && e2_idir(t);
	moved = parent != newparent;
	if (exists && !(flags & E2_RENAME_EXCHANGE)) {
		if (sdir && !tdir) {
			r = -ENOTDIR;
			goto out;
		}
		if (!sdir && tdir) {
			r = -EISDIR;
			goto out;
		}
		if (tdir && (r = e2_dir_empty(fs, t)))
			goto out;
	}
	if (sdir && moved) {
		r = is_ancestor(fs, s->ino, newparent);
		if (r > 0)
			r = -EINVAL;
		if (r)
			goto out;
	}
	if (tdir && moved && flags & E2_RENAME_EXCHANGE) {
		r = is_ancestor(fs, t->ino, parent);
		if (r > 0)
			r = -EINVAL;
		if (r)
			goto out;
	}
	if (sdir && moved && !tdir && e2_ilinks(&p2->d) >= E2_LINK_MAX) {
		r = -EMLINK;
		goto out;
	}
	if (flags & E2_RENAME_EXCHANGE && tdir && moved && e2_ilinks(&p1->d) >= E2_LINK_MAX) {
		r = -EMLINK;
		goto out;
	}
	e2_patch_drop_committed(fs, &s->init);
	if (t)
		e2_patch_drop_committed(fs, &t->init);

	if (flags & E2_RENAME_EXCHANGE) {
		/* Both counts up while both names may name one inode. */
		if ((r = links(fs, s, +1, NULL, NULL, NULL, &ls)) ||
		    (r = links(fs, t, +1, NULL, NULL, NULL, &lt)))
			goto out;
		if (sdir && moved && (r = links(fs, p2, +1, NULL, NULL, NULL, &l2)))
			goto out;
		if (tdir && moved && (r = links(fs, p1, +1, NULL, NULL, NULL, &l1)))
			goto out;
		if ((r = deps2(fs, &d, ls, s->init)) ||
		    (r = e2_dir_retarget(fs, p2, newname, len2, s->ino, e2_imode(s), &d, &o2)))
			goto out;
		e2_deps_free(fs, &d);
		if ((r = deps2(fs, &d, lt, t->init)) ||
		    (r = e2_dir_retarget(fs, p1, name, len1, t->ino, e2_imode(t), &d, &o1)))
			goto out;
		e2_deps_free(fs, &d);
		if (sdir && moved &&
		    ((r = e2_deps_addref(&d, l2)) ||
		     (r = e2_dir_set_dotdot(fs, s, newparent, &d, &dd))))
			goto out;
		e2_deps_free(fs, &d);
		if (tdir && moved &&
		    ((r = e2_deps_addref(&d, l1)) ||
		     (r = e2_dir_set_dotdot(fs, t, parent, &d, &dt))))
			goto out;
		if ((r = links(fs, s, -1, o1, o2, NULL, NULL)) ||
		    (r = links(fs, t, -1, o1, o2, NULL, NULL)))
			goto out;
		if (sdir && moved && (r = links(fs, p1, -1, dd, o1, o2, NULL)))
			goto out;
		if (tdir && moved && (r = links(fs, p2, -1, dt, o1, o2, NULL)))
			goto out;
	} else if (exists) {
		/* A file's count covers both of its names until the old one
		 * is gone (too low would be dangerous after a crash). */
		if ((r = links(fs, s, +1, NULL, NULL, NULL, &ls)))
			goto out;
		if ((r = deps2(fs, &d, s->init, ls)) ||
		    (r = e2_dir_retarget(fs, p2, newname, len2, s->ino, e2_imode(s), &d, &n)))
			goto out;
		e2_deps_free(fs, &d);
		if (sdir && moved) {
			if ((r = links(fs, p2, +1, NULL, NULL, NULL, &l2)) ||
			    (r = deps2(fs, &d, l2, n)) ||
			    (r = e2_dir_set_dotdot(fs, s, newparent, &d, &dd)))
				goto out;
			e2_deps_free(fs, &d);
		}
		/* The old entry goes once the new one and the moved
		 * directory's new ".." are on disk. */
		if ((r = deps2(fs, &d, n, dd)) || (r = e2_dir_remove(fs, p1, name, len1, &d, &rm)))
			goto out;
		if (sdir && moved && (r = links(fs, p1, -1, dd, rm, NULL, NULL)))
			goto out;
		if ((r = links(fs, s, -1, rm, NULL, NULL, NULL)))
			goto out;
		r = drop_target(fs, p2, t, n);
		if (r)
			goto out;
	} else {
		r = e2_dir_prepare(fs, p2, len2, &linked);
		if (r)
			goto out;
		if (sdir && moved && (r = links(fs, p2, +1, NULL, NULL, NULL, &l2)))
			goto out;
		if ((r = links(fs, s, +1, NULL, NULL, NULL, &ls)))
			goto out;
		if ((r = deps2(fs, &d, s->init, linked)) || (r = e2_deps_addref(&d, ls)) ||
		    (r = e2_dir_add(fs, p2, newname, len2, s->ino, e2_imode(s), &d, &n)))
			goto out;
		e2_deps_free(fs, &d);
		if (sdir && moved &&
		    ((r = deps2(fs, &d, l2, n)) ||
		     (r = e2_dir_set_dotdot(fs, s, newparent, &d, &dd))))
			goto out;
		e2_deps_free(fs, &d);
		/* The old entry goes once the new one and the moved
		 * directory's new ".." are on disk. */
		if ((r = deps2(fs, &d, n, dd)) || (r = e2_dir_remove(fs, p1, name, len1, &d, &rm)))
			goto out;
		if (sdir && moved && (r = links(fs, p1, -1, dd, rm, NULL, NULL)))
			goto out;
		if ((r = links(fs, s, -1, rm, NULL, NULL, NULL)))
			goto out;
	}
	e2_isync_add(fs, s, n);
	e2_isync_add(fs, s, o2);
	if (t) {
		e2_isync_add(fs, t, o1);
		e2_isync_add(fs, t, rm);
	}
	e2_isync_add(fs, s, rm);
	{
		struct ext2_inode nw = s->d;

		nw.i_ctime = htole32(e2_now());
		r = e2_iwrite(fs, s, &nw, NULL, NULL);
	}
	if (!r)
		r = e2_itouch(fs, p1, true, true);
	if (!r && moved)
		r = e2_itouch(fs, p2, true, true);
out:
	e2_deps_free(fs, &d);
	patch_release(fs->c, l1);
	patch_release(fs->c, l2);
	patch_release(fs->c, n);
	patch_release(fs->c, dd);
	patch_release(fs->c, dt);
	patch_release(fs->c, rm);
	patch_release(fs->c, ls);
	patch_release(fs->c, lt);
	patch_release(fs->c, o1);
	patch_release(fs->c, o2);
	patch_release(fs->c, linked);
	e2_unlock(fs);
	return r;
}
