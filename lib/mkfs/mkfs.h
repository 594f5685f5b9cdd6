/* Making a standard ext2 revision 1 file system with libext2fs.
 *
 * The feature set is fixed: filetype, sparse_super and large_file, nothing
 * else (no dir_index, resize_inode or ext_attr), because that is the ext2
 * that fstitch's ext2 module, e2fsck, debugfs and Linux all agree on.  With
 * MKFS_JOURNAL it gets has_journal too, an internal JBD2 journal in inode 8
 * made by libext2fs as mke2fs -j makes it: that is ext3.  Sizes follow mke2fs: below 3 MiB 1 KiB
 * blocks and one inode per 8 KiB, below 512 MiB 1 KiB blocks and one inode per 4 KiB, otherwise 4
 * KiB blocks and one inode per 16 KiB.
 */
#ifndef FSTITCH_MKFS_H
#define FSTITCH_MKFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uuid/uuid.h>

enum mkfs_uuid_mode {
	MKFS_UUID_RANDOM = 0, /* the default */
	MKFS_UUID_TIME,
	MKFS_UUID_CLEAR, /* all zeros */
	MKFS_UUID_GIVEN, /* mkfs_opts.uuid */
};

enum mkfs_flags {
	/* Overwrite a file system or partition table that libblkid finds. */
	MKFS_FORCE = 1 << 0,
	/* Check everything and fill mkfs_info, but write and create nothing. */
	MKFS_DRY_RUN = 1 << 1,
	/* Add a journal (has_journal), of mkfs_opts.journal_mib or, when that
	 * is 0, of the size mke2fs picks for the file system's size. */
	MKFS_JOURNAL = 1 << 2,
};

/* mke2fs's bounds on a journal: 1024 to 10240000 blocks, and at most half
 * of the free blocks. */
#define MKFS_JOURNAL_MIN_BLOCKS 1024u
#define MKFS_JOURNAL_MAX_BLOCKS 10240000u

struct mkfs_opts {
	uint64_t size;		 /* bytes (rounded down to blocks); 0: all */
	unsigned block_size;	 /* 1024, 2048 or 4096; 0: by size */
	uint64_t inodes;	 /* 0: size / inode_ratio */
	unsigned inode_ratio;	 /* bytes per inode; 0: by size */
	unsigned inode_size;	 /* 128 .. block size, power of 2; 0: 256 */
	double reserved_percent; /* 0 .. 50 */
	const char *label;	 /* at most 16 bytes; NULL: none */
	enum mkfs_uuid_mode uuid_mode;
	uuid_t uuid;	/* for MKFS_UUID_GIVEN */
	unsigned flags; /* enum mkfs_flags */
	/* Journal size in MiB (mke2fs -J size=); 0: by size.  Only with
	 * MKFS_JOURNAL. */
	unsigned journal_mib;
	/* Called once, before mkfs_make() blocks, when an existing target is
	 * locked by an fstitch daemon that is still writing it back after an
	 * unmount (see mkfs_make()); NULL: wait silently. */
	void (*waiting)(const char *path);
};

#define MKFS_MAX_BACKUPS 64

/* What was made (or, with MKFS_DRY_RUN, what would be). */
struct mkfs_info {
	uint64_t blocks;
	unsigned block_size;
	uint64_t inodes;
	unsigned inode_size;
	unsigned groups;
	unsigned blocks_per_group;
	unsigned inodes_per_group;
	uint64_t reserved_blocks;
	uint64_t free_blocks; /* after the root directory, lost+found and journal */
	uint64_t free_inodes;
	uint64_t journal_blocks; /* 0: no journal */
	char label[17];
	uuid_t uuid;
	/* First block of every group that holds a superblock copy (sparse_super:
	 * groups 1 and powers of 3, 5 and 7); the first nbackups, at most
	 * MKFS_MAX_BACKUPS. */
	uint64_t backups[MKFS_MAX_BACKUPS];
	unsigned nbackups;
	bool created;	 /* the image file did not exist and was created */
	char found[128]; /* what MKFS_FORCE overwrote ("an ext4 file system"), or "" */
};

/* Default options: everything chosen by size, 5% reserved, random UUID. */
void mkfs_opts_init(struct mkfs_opts *opts);

/* Make the file system on path: an image file (created when missing, and
 * extended when shorter than opts->size) or a block device.  Fills *info on
 * success.  Never prints; on failure writes a one-line explanation (no
 * program name, no trailing newline) to err and returns:
 *   -EINVAL  a bad option value, or a size or inode count that cannot make a
 *            file system (too small, too large, too many inodes), or a
 *            journal that does not fit (file system below 2048 blocks, a
 *            journal size outside the bounds above)
 *   -ENOENT  path does not exist and opts->size is 0
 *   -EEXIST  libblkid found a file system or partition table and
 *            MKFS_FORCE is not set; err is "'path' contains ..." naming it
 *            (type, and label when there is one)
 *   -EBUSY   path is mounted or in use
 *   -ENOTBLK path is neither a regular file nor a block device
 *   other    -errno from the system or libext2fs (I/O, permission, ...)
 * Nothing is written before every check has passed; an image file that this
 * call created is removed again if a later step fails.
 *
 * fstitch-mount holds a lock (flock(2)) on its image until its final flush
 * has ended, which is after the unmount returns.  An existing target is
 * locked the same way for the whole call, so that such a flush cannot write
 * over the new file system: while a daemon holds the lock and path is not
 * mounted, the call waits for it (opts->waiting says so first), except
 * with MKFS_DRY_RUN, which writes nothing and does not wait. */
int mkfs_make(const char *path, const struct mkfs_opts *opts, struct mkfs_info *info, char *err,
	      size_t errlen);

#endif
