/* ext2: rename.
 *
 * Order on disk: the new name exists before the old one goes.  Over an
 * existing target the target entry's inode number is overwritten in place
 * (one patch in one block), so the target name names the old or the new
 * inode at every crash point; the old target is unlinked after that patch.
 * Counts that a crash could leave too low are raised first and lowered
 * last (".." of a moved directory, both inodes of an exchange). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "e2_int.h"
#include "util/grow.h"

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

/* d += a, b (references taken; NULL and committed ones skipped). */
static int deps2(struct e2_deps *d, struct patch *a, struct patch *b)
{
	int r = e2_deps_addref(d, a);

	return r ? r : e2_deps_addref(d, b);
}

/* Forget the parked names whose removal is on disk. */
static void parked_prune(struct e2fs *fs)
{
	size_t k = 0;

	for (size_t i = 0; i < fs->nparked; i++)
		if (patch_committed(fs->parkrm[i])) {
			patch_release(fs->c, fs->parkrm[i]);
		} else {
			fs->parkpos[k] = fs->parkpos[i];
			fs->parkrm[k++] = fs->parkrm[i];
		}
	fs->nparked = k;
}

/* A target about to lose its last name to a rename is parked: it gets a
 * second name in lost+found, "#INO" (what e2fsck would call it), before the
 * retarget, and that name goes once the retarget is on disk, then the
 * inode is cleared (e2_remove_last).  So the old file stays named until
 * the rename is on disk (design.md §4).  0 and *h set (the new entry, or
 * NULL when there is no usable lost+found: then the target is cleared
 * after the retarget), or -errno. */
static int park(struct e2fs *fs, struct e2_inode *t, char *pname, size_t *plen,
		struct e2_inode **plf, struct patch **h)
{
	struct e2_inode *root, *lf;
	struct e2_deps d = {0};
	struct patch *linked = NULL, *lh = NULL;
	struct e2_dloc loc;
	int r;

	*h = NULL;
	*plf = NULL;
	*plen = (size_t)snprintf(pname, 16, "#%u", t->ino);
	if (e2_get_dir(fs, E2_ROOT_INO, &root) || e2_dir_lookup(fs, root, "lost+found", 10, &loc) ||
	    e2_entry_inode(fs, root, &loc, "lost+found", &lf) || !e2_idir(lf))
		return 0;
	r = e2_dir_lookup(fs, lf, pname, *plen, &loc);
	if (r != -ENOENT)
		return 0; /* taken (or unreadable): fall back */
	e2_init_prune(fs, lf);
	r = e2_dir_prepare(fs, lf, *plen, &linked);
	if (!r)
		r = e2_add_links(fs, t, +1, NULL, &lh);
	/* The parked name waits for the raised count, and so for the
	 * initialised inode the count is part of; not for the target's own
	 * entry (e2_init_deps()), as a name a program uses would.  A crash
	 * before that entry then finds the target named in lost+found only,
	 * where it would otherwise find it unattached: a leak either way. */
	if (!r && !(r = e2_deps_addref(&d, lh)) && !(r = e2_deps_addref(&d, linked)) &&
	    !(r = e2_init_deps(&d, lf))) {
		/* Not in the place of a parked name whose removal is still
		 * unwritten: the removal waits for an earlier rename, and so
		 * a chain of renames over one name would cost write rounds
		 * in proportion to its length. */
		parked_prune(fs);
		r = e2_dir_add_avoid(fs, lf, pname, *plen, t->ino, e2_imode(t), &d, h, fs->parkpos,
				     fs->nparked);
		if (r)
			(void)e2_add_links(fs, t, -1, NULL, NULL);
	}
	if (!r)
		*plf = lf;
	e2_deps_free(fs, &d);
	patch_release(fs->c, linked);
	patch_release(fs->c, lh);
	return r;
}

/* The parked name goes after `after` (e2_remove_last), freed in place;
 * its place is remembered until the removal is on disk (at most
 * E2_PARKED_MAX: then the oldest is forgotten, and without memory this
 * one is, so that a later parked name may wait for it). */
static int unpark(struct e2fs *fs, struct e2_inode *lf, const char *pname, size_t plen,
		  struct e2_inode *t, struct patch *after)
{
	struct patch *rm = NULL;
	uint32_t pos = 0;
	int r;

	r = e2_remove_last(fs, lf, pname, plen, t, after, &rm, &pos);
	if (r || !rm)
		return r;
	parked_prune(fs);
	if (fs->nparked == E2_PARKED_MAX) {
		patch_release(fs->c, fs->parkrm[0]);
		fs->nparked--;
		memmove(fs->parkpos, fs->parkpos + 1, fs->nparked * sizeof(*fs->parkpos));
		memmove(fs->parkrm, fs->parkrm + 1, fs->nparked * sizeof(*fs->parkrm));
	}
	if (GROW(&fs->parkpos, &fs->cappos, fs->nparked + 1, 32) ||
	    GROW(&fs->parkrm, &fs->caprm, fs->nparked + 1, 32)) {
		patch_release(fs->c, rm);
		return 0;
	}
	fs->parkpos[fs->nparked] = pos;
	fs->parkrm[fs->nparked++] = rm;
	return 0;
}

int e2_rename(struct e2fs *fs, const struct e2_caller *who, uint32_t parent, const char *name,
	      uint32_t newparent, const char *newname, unsigned flags)
{
	struct e2_inode *p1, *p2, *s, *t = NULL;
	struct e2_deps d = {0};
	struct patch *l2 = NULL, *l1 = NULL, *n = NULL, *dd = NULL, *rm = NULL;
	struct patch *ls = NULL, *lt = NULL, *o1 = NULL, *o2 = NULL, *dt = NULL;
	struct patch *linked = NULL, *parked = NULL;
	struct e2_inode *lf = NULL;
	char pname[16];
	size_t plen = 0;
	struct e2_dloc loc1, loc2;
	size_t len1, len2;
	bool sdir, tdir = false, moved, exists, oneblk, inplace, onepatch;
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
	e2_lock_caller(fs, who);
	r = e2_get_dir(fs, parent, &p1);
	if (!r)
		r = e2_get_dir(fs, newparent, &p2);
	if (r)
		goto out;
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
	/* A name leaves p1 (and p2 when it replaces or exchanges one), and
	 * a name goes into p2 (and p1 in an exchange), as Linux's
	 * may_delete() and may_create() see it. */
	if (e2_iimmutable(p1) || e2_iappend(p1) || e2_iimmutable(s) || e2_iappend(s) ||
	    e2_iimmutable(p2) ||
	    (exists && (e2_iappend(p2) || e2_iimmutable(t) || e2_iappend(t)))) {
		r = -EPERM;
		goto out;
	}
	/* Their names change: no gate of one stands for them any more. */
	e2_gate_drop(fs, s);
	if (t)
		e2_gate_drop(fs, t);
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
	oneblk = exists && !moved && !sdir && !(flags & E2_RENAME_EXCHANGE) &&
		 loc1.pos / fs->bs == loc2.pos / fs->bs;
	/* Read every block this rename changes before the first change: a
	 * read error half way would leave, say, a directory under two names
	 * with no crash at all. */
	{
		uint32_t up, rec1;

		if ((r = e2_dir_preread(fs, p1, loc1.pos, &rec1)) ||
		    (exists && (r = e2_dir_preread(fs, p2, loc2.pos, NULL))) ||
		    (sdir && moved && (r = e2_dir_get_dotdot(fs, s, &up))) ||
		    (tdir && moved && (r = e2_dir_get_dotdot(fs, t, &up))))
			goto out;
		/* To a new name in the same directory, in the old entry's
		 * record when the name fits: one patch as well
		 * (e2_dir_rename_in_place). */
		inplace = !exists && !moved && !sdir && fs->opts.consistency != CONSISTENCY_NONE &&
			  rec1 >= E2_REC_LEN(len2);
		/* Either way the new name and the old one's removal are one
		 * patch: no raised count, no separate removal. */
		onepatch = oneblk || inplace;
	}
	e2_init_prune(fs, s);
	if (t)
		e2_init_prune(fs, t);
	/* A name put into a directory whose own link count is not on disk yet
	 * waits for it (design.md §4): until then e2fsck does not read the
	 * directory's blocks. */
	e2_init_prune(fs, p1);
	e2_init_prune(fs, p2);

	if (flags & E2_RENAME_EXCHANGE) {
		/* Both counts up while both names may name one inode. */
		if ((r = e2_add_links(fs, s, +1, NULL, &ls)) ||
		    (r = e2_add_links(fs, t, +1, NULL, &lt)))
			goto out;
		if (sdir && moved && (r = e2_add_links(fs, p2, +1, NULL, &l2)))
			goto out;
		if (tdir && moved && (r = e2_add_links(fs, p1, +1, NULL, &l1)))
			goto out;
		if ((r = e2_deps_addref(&d, ls)) || (r = e2_init_deps(&d, s)) ||
		    (r = e2_init_deps(&d, p2)) || (r = e2_order_deps(fs, &d)) ||
		    (r = e2_ipending_deps(fs, s, &d)) ||
		    (r = e2_dir_retarget(fs, p2, newname, len2, s->ino, e2_imode(s), &d, &o2)))
			goto out;
		e2_deps_free(fs, &d);
		if ((r = e2_deps_addref(&d, lt)) || (r = e2_init_deps(&d, t)) ||
		    (r = e2_init_deps(&d, p1)) || (r = e2_order_deps(fs, &d)) ||
		    (r = e2_ipending_deps(fs, t, &d)) ||
		    (r = e2_dir_retarget(fs, p1, name, len1, t->ino, e2_imode(t), &d, &o1)))
			goto out;
		if ((r = e2_order_add(fs, o2)) || (r = e2_order_add(fs, o1)))
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
		if ((r = e2_add_links_after(fs, s, -1, o1, o2, NULL, NULL)) ||
		    (r = e2_add_links_after(fs, t, -1, o1, o2, NULL, NULL)))
			goto out;
		if (sdir && moved && (r = e2_add_links_after(fs, p1, -1, dd, o1, o2, NULL)))
			goto out;
		if (tdir && moved && (r = e2_add_links_after(fs, p2, -1, dt, o1, o2, NULL)))
			goto out;
	} else {
		/* A file's count covers both of its names until the old one
		 * is gone (too low would be dangerous after a crash); so does
		 * the new parent's for a directory moved in. */
		if (!exists && !onepatch && (r = e2_dir_prepare(fs, p2, len2, &linked)))
			goto out;
		if (sdir && moved && (r = e2_add_links(fs, p2, +1, NULL, &l2)))
			goto out;
		/* rename_order=all: after every earlier data write, rename and
		 * link (e2_order_deps).  Over a file named in the same block,
		 * the retarget and the removal are one patch: never two names
		 * on disk, so the count is not raised.  In every mode after
		 * the file's own inode as it stands (e2_ipending_deps): the
		 * count's patch need not cover the size, and over one block
		 * there is none. */
		if (!onepatch && (r = e2_add_links(fs, s, +1, NULL, &ls)))
			goto out;
		if ((r = e2_init_deps(&d, s)) || (r = deps2(&d, linked, ls)) ||
		    (r = e2_init_deps(&d, p2)) || (r = e2_order_deps(fs, &d)) ||
		    (r = e2_ipending_deps(fs, s, &d)))
			goto out;
		/* A target losing its last name is parked first (see park()). */
		if (exists && !tdir && e2_ilinks(&t->d) == 1 &&
		    fs->opts.consistency != CONSISTENCY_NONE) {
			/* The parked name is the file system's own business,
			 * unseen under any name a program uses: it stays out
			 * of the caller's patchgroup (which would order it
			 * after the group's earlier changes, and the next
			 * group after its removal, a round trip through
			 * lost+found per rename of a chain). */
			struct patch_scope *sc = fs->scope;

			fs->scope = NULL;
			r = park(fs, t, pname, &plen, &lf, &parked);
			fs->scope = sc;
			if (r || (r = e2_deps_addref(&d, parked)))
				goto out;
		}
		if (oneblk)
			r = e2_dir_move_in_block(fs, p2, name, len1, newname, len2, s->ino,
						 e2_imode(s), &d, &n);
		else if (inplace)
			r = e2_dir_rename_in_place(fs, p2, name, len1, newname, len2, s->ino,
						   e2_imode(s), &d, &n);
		else if (exists)
			r = e2_dir_retarget(fs, p2, newname, len2, s->ino, e2_imode(s), &d, &n);
		else
			r = e2_dir_add(fs, p2, newname, len2, s->ino, e2_imode(s), &d, &n);
		if (r || (r = e2_order_add(fs, n)))
			goto out;
		e2_deps_free(fs, &d);
		if (sdir && moved &&
		    ((r = deps2(&d, l2, n)) || (r = e2_dir_set_dotdot(fs, s, newparent, &d, &dd))))
			goto out;
		e2_deps_free(fs, &d);
		/* The old entry goes once the new one and the moved
		 * directory's new ".." are on disk. */
		if (!onepatch &&
		    ((r = deps2(&d, n, dd)) || (r = e2_dir_remove(fs, p1, name, len1, &d, &rm))))
			goto out;
		if (sdir && moved && (r = e2_add_links_after(fs, p1, -1, dd, rm, NULL, NULL)))
			goto out;
		if (!onepatch && (r = e2_add_links_after(fs, s, -1, rm, NULL, NULL, NULL)))
			goto out;
		/* The replaced target loses its name with the retarget; a
		 * parked one its last name after that. */
		if (lf) {
			struct patch_scope *sc = fs->scope;

			fs->scope = NULL;
			r = unpark(fs, lf, pname, plen, t, n);
			fs->scope = sc;
		} else if (exists) {
			r = e2_remove_inode(fs, p2, t, n);
		}
		if (r)
			goto out;
	}
	e2_isync_add(fs, s, n);
	e2_isync_add(fs, s, o2);
	if (t) {
		e2_isync_add(fs, t, o1);
		e2_isync_add(fs, t, rm);
	}
	e2_isync_add(fs, s, rm);
	r = e2_touch_name(fs, s, false);
	if (!r)
		r = e2_touch_name(fs, p1, true);
	if (!r && moved)
		r = e2_touch_name(fs, p2, true);
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
	patch_release(fs->c, parked);
	e2_unlock(fs);
	return r;
}
