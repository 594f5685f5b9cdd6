/* ext2: ext3's orphan list in the journal modes (design.md §3, "Orphan
 * list").
 *
 * The list starts at the superblock's s_last_orphan and goes on through
 * the i_dtime of each inode on it, as Linux and e2fsprogs keep it.  An
 * inode whose last name goes while it is open, or while the kernel still
 * holds a lookup reference on it, joins the list in the transaction that
 * clears its link count, and leaves it in the transaction that frees it
 * (at the last release or FORGET).  So a crash in between leaves it on the
 * list, never allocated with no name and no trace; the next read-write
 * open frees it (and cuts back an inode the kernel left on the list with
 * links, a truncate in progress), as Linux's ext3_orphan_cleanup() does.
 * An inode that nothing holds is freed in the transaction of its removal
 * and never joins the list.
 *
 * fs->orph holds the list in its disk order: fs->orph[0] is
 * s_last_orphan, and the i_dtime of fs->orph[i] names fs->orph[i + 1]
 * (0 for the last).  Everything here runs under fs->lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "e2_int.h"
#include "util/grow.h"

bool e2_orphans_on(const struct e2fs *fs)
{
	return e2_jw_orphans(fs) && !fs->orph_bad && !fs->ro;
}

/* i_dtime of ip := next, after deps (NULL: none). */
static int set_next(struct e2fs *fs, struct e2_inode *ip, uint32_t next, struct e2_deps *deps,
		    struct patch **out)
{
	struct ext2_inode_large nw = ip->d;

	nw.i_dtime = htole32(next);
	return e2_iwrite(fs, ip, &nw, deps, out);
}

int e2_orphan_add(struct e2fs *fs, struct e2_inode *ip)
{
	uint32_t head = le32toh(fs->sb.s_last_orphan);
	int r;

	if (ip->orphan || !e2_orphans_on(fs))
		return 0;
	if (GROW(&fs->orph, &fs->caporph, fs->norph + 1, 16))
		return -ENOMEM;
	/* Both changes are in the running transaction, with the link count's
	 * clear: a replay has all three or none. */
	r = set_next(fs, ip, head, NULL, NULL);
	if (!r)
		r = e2_sb_write_orphan(fs, ip->ino, NULL);
	if (r)
		return r;
	memmove(fs->orph + 1, fs->orph, fs->norph * sizeof(*fs->orph));
	fs->orph[0] = ip->ino;
	fs->norph++;
	ip->orphan = true;
	return 0;
}

int e2_orphan_del(struct e2fs *fs, struct e2_inode *ip, struct patch **out)
{
	struct e2_deps d = {0};
	struct patch *link = NULL;
	struct e2_inode *prev;
	struct ext2_inode_large nw;
	size_t i;
	uint32_t next;
	struct timespec now;
	int r;

	for (i = 0; i < fs->norph && fs->orph[i] != ip->ino; i++)
		;
	if (i == fs->norph)
		return e2_err(fs, -EIO, "inode %u is not on the orphan list", ip->ino);
	next = i + 1 < fs->norph ? fs->orph[i + 1] : 0;
	/* The link to it goes first: the one to the next inode replaces it. */
	if (i == 0) {
		r = e2_sb_write_orphan(fs, next, &link);
	} else {
		r = e2_iget(fs, fs->orph[i - 1], &prev);
		if (!r)
			r = set_next(fs, prev, next, NULL, &link);
	}
	if (!r)
		r = e2_deps_add(&d, link);
	if (!r)
		r = e2_deps_addref(&d, ip->clear);
	if (r)
		goto out;
	/* Off the list, its dtime is a time again (0 while it has links). */
	nw = ip->d;
	e2_now_ts(fs, &now);
	nw.i_dtime = e2_ilinks(&ip->d) ? 0 : htole32((uint32_t)now.tv_sec);
	r = e2_iwrite(fs, ip, &nw, &d, out);
	if (r)
		goto out;
	memmove(fs->orph + i, fs->orph + i + 1, (fs->norph - i - 1) * sizeof(*fs->orph));
	fs->norph--;
	ip->orphan = false;
out:
	e2_deps_free(fs, &d);
	return r;
}

/* An orphan with links: a truncate Linux did not finish.  Its blocks past
 * i_size go, as ext3_orphan_cleanup() truncates it. */
static int cut_back(struct e2fs *fs, struct e2_inode *ip)
{
	uint64_t size = e2_isize(&ip->d);
	int r = 0;

	/* The truncate frees whatever lies past the size it is given when the
	 * file looks longer than that; only the in-memory copy says so.  It
	 * goes first: one too long for a transaction keeps the inode on the
	 * list until its last step. */
	if (S_ISREG(e2_imode(ip))) {
		e2_iset_size(&ip->d, size + 1);
		r = e2_truncate_locked(fs, ip, size);
	}
	return r ? r : e2_orphan_del(fs, ip, NULL);
}

static void forget_list(struct e2fs *fs)
{
	struct e2_inode *ip;

	for (size_t i = 0; i < fs->norph; i++)
		if (!e2_iget(fs, fs->orph[i], &ip))
			ip->orphan = false;
	fs->norph = 0;
}

int e2_orphans_recover(struct e2fs *fs, struct e2_recovery *rec)
{
	uint32_t ino = le32toh(fs->sb.s_last_orphan);
	struct e2_inode *ip;
	int r = 0;

	if (!ino || fs->ro)
		return 0;
	if (le16toh(fs->sb.s_state) & EXT2_ERROR_FS) {
		/* As Linux and e2fsck: with errors the list is not trusted,
		 * and the full check that the errors call for finds the
		 * inodes anyway. */
		rec->orphans_dropped = true;
		fs->orph_bad = true;
		return e2_sb_write_orphan(fs, 0, NULL);
	}
	/* Read the whole chain before changing anything: a list that names an
	 * inode out of range or free, or runs in a circle, is left as it is
	 * for e2fsck, and no new inode joins it. */
	while (ino) {
		if (ino < fs->first_ino || ino > fs->ninodes || fs->norph >= fs->ninodes ||
		    e2_iget(fs, ino, &ip) || !ip->d.i_mode || ip->orphan) {
			rec->orphan_bad = ino;
			fs->orph_bad = true;
			forget_list(fs);
			return 0;
		}
		if (GROW(&fs->orph, &fs->caporph, fs->norph + 1, 16)) {
			forget_list(fs);
			return -ENOMEM;
		}
		fs->orph[fs->norph++] = ino;
		ip->orphan = true;
		ino = le32toh(ip->d.i_dtime);
	}
	while (fs->norph && !r) {
		r = e2_iget(fs, fs->orph[0], &ip);
		if (r)
			break;
		if (e2_ilinks(&ip->d)) {
			r = cut_back(fs, ip);
			rec->orphans_truncated += !r;
		} else {
			/* e2_ifree takes it off the list first */
			ip->unlinked = true;
			r = e2_ifree(fs, ip);
			rec->orphans_freed += !r;
		}
	}
	return r;
}
