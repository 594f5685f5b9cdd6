/* ext2: the journal of an ext3 image (design.md §3, "Journal recovery").
 *
 * At open the journal inode's block map is resolved with plain device
 * reads (the cache is not used: a replay rewrites blocks under it), every
 * pointer checked to lie in the file system outside its fixed metadata,
 * and the JBD2 superblock checked (journal/jbd2.c).  A file system marked
 * needs_recovery has its log replayed and the mark cleared, then the open
 * starts again from the superblock the replay may have rewritten.  Under
 * softupdates the journal is not written: it stays empty and clean, so
 * Linux and e2fsck see a journal with nothing to replay. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "e2_int.h"
#include "journal/jbd2.h"

struct jmap {
	struct e2fs *fs;
	uint64_t *map;
	uint32_t n;   /* journal blocks wanted */
	uint32_t got; /* filled so far */
	uint8_t *buf[3];
};

static int bad_ptr(struct jmap *m, uint32_t blk, const char *what)
{
	if (!blk)
		e2_set_open_error("journal inode has a hole at journal block %u", m->got);
	else
		e2_set_open_error("journal inode %s points to block %u, outside the file "
				  "system's data blocks",
				  what, blk);
	return -EUCLEAN;
}

/* Fill the map from an indirect block of the given level (0: blk is a
 * data block itself). */
static int walk(struct jmap *m, uint32_t blk, int level)
{
	struct e2fs *fs = m->fs;
	uint32_t *kids;
	int r;

	if (m->got >= m->n)
		return 0;
	if (!e2_block_ok(fs, blk))
		return bad_ptr(m, blk, level ? "indirect block" : "block");
	if (level == 0) {
		m->map[m->got++] = blk;
		return 0;
	}
	r = bdev_read(fs->dev, blk, 1, m->buf[level - 1]);
	if (r) {
		e2_set_open_error("cannot read journal indirect block %u: %s", blk, strerror(-r));
		return r;
	}
	kids = (uint32_t *)(void *)m->buf[level - 1];
	for (uint32_t i = 0; i < fs->apb && m->got < m->n; i++) {
		r = walk(m, le32toh(kids[i]), level - 1);
		if (r)
			return r;
	}
	return 0;
}

static int journal_map(struct e2fs *fs, uint64_t **mapp, uint32_t *np)
{
	uint32_t ino = le32toh(fs->sb.s_journal_inum);
	struct ext2_inode in;
	struct jmap m = {fs, NULL, 0, 0, {NULL, NULL, NULL}};
	uint64_t size;
	uint32_t g, idx, blk;
	uint8_t *ib;
	int r;

	if (ino == 0 || le32toh(fs->sb.s_journal_dev) != 0) {
		e2_set_open_error("external journals are not supported");
		return -EOPNOTSUPP;
	}
	if (ino > fs->ninodes || ino == E2_ROOT_INO) {
		e2_set_open_error("corrupt superblock: journal inode %u", ino);
		return -EUCLEAN;
	}
	g = (ino - 1) / fs->ipg;
	idx = (ino - 1) % fs->ipg;
	blk = fs->g[g].inode_table + idx / fs->ipb;
	ib = malloc(fs->bs);
	if (!ib)
		return -ENOMEM;
	r = bdev_read(fs->dev, blk, 1, ib);
	if (r) {
		free(ib);
		e2_set_open_error("cannot read journal inode: %s", strerror(-r));
		return r;
	}
	memcpy(&in, ib + (idx % fs->ipb) * fs->isize, sizeof(in));
	free(ib);
	if (!S_ISREG(le16toh(in.i_mode))) {
		e2_set_open_error("journal inode %u is not a regular file", ino);
		return -EUCLEAN;
	}
	if (le32toh(in.i_flags) & (EXT4_EXTENTS_FL | EXT4_INLINE_DATA_FL)) {
		e2_set_open_error("journal inode %u uses extents", ino);
		return -EOPNOTSUPP;
	}
	size = le32toh(in.i_size) | (uint64_t)le32toh(in.i_size_high) << 32;
	if (size / fs->bs < JBD2_MIN_BLOCKS || size / fs->bs >= fs->nblocks) {
		e2_set_open_error("journal inode %u has a bad size (%llu bytes)", ino,
				  (unsigned long long)size);
		return -EUCLEAN;
	}
	m.n = (uint32_t)(size / fs->bs);
	m.map = calloc(m.n, sizeof(*m.map));
	for (int l = 0; l < 3; l++)
		m.buf[l] = malloc(fs->bs);
	r = -ENOMEM;
	if (!m.map || !m.buf[0] || !m.buf[1] || !m.buf[2])
		goto out;
	r = 0;
	for (int i = 0; i < E2_NDIR && !r; i++)
		r = walk(&m, le32toh(in.i_block[i]), 0);
	for (int l = 1; l <= 3 && !r; l++)
		r = walk(&m, le32toh(in.i_block[E2_IND + l - 1]), l);
out:
	for (int l = 0; l < 3; l++)
		free(m.buf[l]);
	if (r) {
		free(m.map);
		return r;
	}
	*mapp = m.map;
	*np = m.n;
	return 0;
}

/* Clear needs_recovery (and mark errors the journal recorded) in the
 * primary superblock, written in place. */
static int clear_recover(struct e2fs *fs, bool errors)
{
	uint8_t *b = malloc(fs->bs);
	struct ext2_super_block *sb;
	struct bdev_write w;
	int r;

	if (!b)
		return -ENOMEM;
	r = bdev_read(fs->dev, fs->sb_blk, 1, b);
	if (!r) {
		sb = (struct ext2_super_block *)(void *)(b + fs->sb_off);
		sb->s_feature_incompat = htole32(le32toh(sb->s_feature_incompat) &
						 ~(uint32_t)EXT3_FEATURE_INCOMPAT_RECOVER);
		if (errors)
			sb->s_state = htole16(le16toh(sb->s_state) | EXT2_ERROR_FS);
		w.blkno = fs->sb_blk;
		w.data = b;
		r = bdev_write(fs->dev, &w, 1);
	}
	if (!r)
		r = bdev_barrier(fs->dev);
	free(b);
	if (r)
		e2_set_open_error("cannot write superblock after journal replay: %s", strerror(-r));
	return r;
}

int e2_journal_setup(struct e2fs *fs, struct e2_recovery *rec)
{
	bool recover = le32toh(fs->sb.s_feature_incompat) & EXT3_FEATURE_INCOMPAT_RECOVER;
	struct jbd2_recovery jr;
	struct jbd2 *j = NULL;
	uint64_t *map = NULL;
	uint32_t n = 0;
	char err[200];
	int r;

	if (!(le32toh(fs->sb.s_feature_compat) & EXT3_FEATURE_COMPAT_HAS_JOURNAL)) {
		if (recover) {
			e2_set_open_error("corrupt superblock: needs_recovery without a journal");
			return -EUCLEAN;
		}
		return 0;
	}
	/* A read-only open of a clean file system reads nothing of the
	 * journal: it neither writes nor depends on it. */
	if (fs->mounted_ro && !recover)
		return 0;
	if (recover && fs->mounted_ro) {
		e2_set_open_error("the journal needs recovery: open read-write to replay it");
		return -EROFS;
	}
	r = journal_map(fs, &map, &n);
	if (r)
		return r;
	r = jbd2_open(fs->dev, map, n, fs->nblocks, &j, err, sizeof(err));
	if (r) {
		if (r != -ENOMEM)
			e2_set_open_error("%s", err);
		goto out;
	}
	if (!recover) {
		if (!jbd2_is_empty(j)) {
			e2_set_open_error("the journal holds transactions but the file system "
					  "is not marked needs_recovery (run e2fsck)");
			r = -EUCLEAN;
		} else if (!fs->mounted_ro) {
			/* kept for the writer (consistency=journal*) */
			free(fs->jmap);
			fs->jmap = map;
			fs->jmapn = n;
			map = NULL;
		}
		goto out;
	}
	r = jbd2_recover(j, &jr, err, sizeof(err));
	if (r) {
		e2_set_open_error("cannot replay the journal: %s", err);
		goto out;
	}
	r = clear_recover(fs, jr.journal_errno != 0);
	if (r)
		goto out;
	rec->replayed = true;
	rec->transactions = jr.end_tid - jr.first_tid;
	rec->blocks = jr.blocks;
	rec->revoked = jr.revoked;
	rec->journal_errno = jr.journal_errno;
	r = 1;
out:
	jbd2_close(j);
	free(map);
	return r;
}
