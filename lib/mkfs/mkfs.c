/* Make an ext2 (or, with a journal, ext3) file system with libext2fs; see
 * mkfs.h.
 *
 * Two passes.  The first lays the file system out on a small in-memory
 * device (plan I/O below) and throws it away: that validates every parameter and
 * gives the exact geometry (libext2fs rounds inode counts and may drop a
 * last group that is too small) without touching the target, so errors and
 * --dry-run leave it as it was.  The second pass does the same on the real
 * file or device and writes.
 */
#include "mkfs.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <linux/fs.h>

#include <blkid/blkid.h>
#include <ext2fs/ext2fs.h>

#include "bdev/bdev.h"
#include "ext2/e2err.h"
#include "mkfs_int.h"
#include "util/fsprobe.h"
#include "util/grow.h"
#include "util/size.h"

#define KiB 1024ULL
#define MiB (1024 * KiB)

/* lost+found gets at least this much room, so that e2fsck can reconnect
 * files without having to allocate blocks on a damaged file system. */
#define LPF_MIN_BYTES (16 * KiB)

struct target {
	const char *path;
	bool exists;
	bool blockdev;
	uint64_t size; /* current size in bytes */
	/* An NBD export: its connection until libext2fs opens its own, and
	 * a sparse copy of its first and last MiB (where libblkid looks for
	 * signatures) that the probe, the wipe and zap_start() work on. */
	bool nbd;
	struct bdev *dev;
	int shadow; /* -1: none */
	char shadow_path[32];
};

#define NBD_WINDOW (1u << 20)

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------ plan I/O */

/* The first pass's device: unwritten blocks read as zeros and written ones
 * are kept in memory (a fresh file system writes only a few dozen blocks
 * outside the inode tables, which the plan does not zero), so that making
 * the root directory and lost+found can read back what it wrote. */
struct plan_blk {
	unsigned long long blk;
	unsigned char *data;
};

struct plan_dev {
	struct plan_blk *v;
	size_t n, cap;
};

static struct struct_io_manager plan_io_manager;

errcode_t mkfs_channel_new(io_manager m, const char *name, void *priv, io_channel *out)
{
	io_channel ch = calloc(1, sizeof(*ch));

	if (!ch)
		return EXT2_ET_NO_MEMORY;
	ch->name = strdup(name ? name : "");
	if (!ch->name) {
		free(ch);
		return EXT2_ET_NO_MEMORY;
	}
	ch->magic = EXT2_ET_MAGIC_IO_CHANNEL;
	ch->manager = m;
	ch->block_size = 1024;
	ch->refcount = 1;
	ch->private_data = priv;
	*out = ch;
	return 0;
}

void mkfs_channel_free(io_channel ch)
{
	free(ch->name);
	free(ch);
}

static errcode_t plan_open(const char *name, int flags, io_channel *channel)
{
	struct plan_dev *d = calloc(1, sizeof(*d));
	errcode_t err;

	if (!d)
		return EXT2_ET_NO_MEMORY;
	err = mkfs_channel_new(&plan_io_manager, name, d, channel);
	if (err)
		free(d);
	return err;
}

static void plan_drop(struct plan_dev *d)
{
	size_t i;

	for (i = 0; i < d->n; i++)
		free(d->v[i].data);
	free(d->v);
	d->v = NULL;
	d->n = d->cap = 0;
}

static errcode_t plan_close(io_channel ch)
{
	if (--ch->refcount > 0)
		return 0;
	plan_drop(ch->private_data);
	free(ch->private_data);
	mkfs_channel_free(ch);
	return 0;
}

static errcode_t plan_set_blksize(io_channel ch, int blksize)
{
	struct plan_dev *d = ch->private_data;

	/* Blocks kept under the old size would be misread under the new one;
	 * libext2fs changes the size only before it writes anything. */
	if (blksize != ch->block_size)
		plan_drop(d);
	ch->block_size = blksize;
	return 0;
}

static struct plan_blk *plan_find(struct plan_dev *d, unsigned long long blk)
{
	size_t i;

	for (i = 0; i < d->n; i++)
		if (d->v[i].blk == blk)
			return &d->v[i];
	return NULL;
}

static bool all_zero(const char *p, size_t n)
{
	return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

/* count > 0 is a number of blocks, count < 0 a number of bytes from the
 * start of block (libext2fs convention). */
static errcode_t plan_io(io_channel ch, unsigned long long block, int count, void *rbuf,
			 const void *wbuf)
{
	struct plan_dev *d = ch->private_data;
	size_t bs = (size_t)ch->block_size;
	size_t left = count < 0 ? (size_t)-count : (size_t)count * bs;
	size_t off = 0, n;
	struct plan_blk *b;

	while (left) {
		n = left < bs ? left : bs;
		b = plan_find(d, block);
		if (rbuf) {
			if (b)
				memcpy((char *)rbuf + off, b->data, n);
			else
				memset((char *)rbuf + off, 0, n);
		} else if (!b && all_zero((const char *)wbuf + off, n)) {
			/* reads as zeros already: libext2fs zeroes every
			 * block it allocates to a block-mapped file, a
			 * journal's worth, which need not be kept */
		} else {
			if (!b) {
				if (GROW(&d->v, &d->cap, d->n + 1, 64))
					return EXT2_ET_NO_MEMORY;
				b = &d->v[d->n];
				b->data = calloc(1, bs);
				if (!b->data)
					return EXT2_ET_NO_MEMORY;
				b->blk = block;
				d->n++;
			}
			memcpy(b->data, (const char *)wbuf + off, n);
		}
		left -= n;
		off += n;
		block++;
	}
	return 0;
}

static errcode_t plan_read_blk64(io_channel ch, unsigned long long block, int count, void *data)
{
	return plan_io(ch, block, count, data, NULL);
}

static errcode_t plan_read_blk(io_channel ch, unsigned long block, int count, void *data)
{
	return plan_io(ch, block, count, data, NULL);
}

static errcode_t plan_write_blk64(io_channel ch, unsigned long long block, int count,
				  const void *data)
{
	return plan_io(ch, block, count, NULL, data);
}

static errcode_t plan_write_blk(io_channel ch, unsigned long block, int count, const void *data)
{
	return plan_io(ch, block, count, NULL, data);
}

/* Zeroing is free: blocks never written read as zeros already.  Without
 * this, libext2fs would write zeros, which this device would keep in
 * memory (a journal's worth of them). */
static errcode_t plan_zeroout(io_channel ch, unsigned long long block, unsigned long long count)
{
	struct plan_dev *d = ch->private_data;
	size_t i;

	for (i = 0; i < d->n; i++)
		if (d->v[i].blk >= block && d->v[i].blk - block < count)
			memset(d->v[i].data, 0, (size_t)ch->block_size);
	return 0;
}

static errcode_t plan_flush(io_channel ch)
{
	return 0;
}

static struct struct_io_manager plan_io_manager = {
    .magic = EXT2_ET_MAGIC_IO_MANAGER,
    .name = "fstitch plan I/O",
    .open = plan_open,
    .close = plan_close,
    .set_blksize = plan_set_blksize,
    .read_blk = plan_read_blk,
    .write_blk = plan_write_blk,
    .flush = plan_flush,
    .read_blk64 = plan_read_blk64,
    .write_blk64 = plan_write_blk64,
    .zeroout = plan_zeroout,
};

/* ------------------------------------------------------------ checks */

void mkfs_opts_init(struct mkfs_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->reserved_percent = 5.0;
	opts->uuid_mode = MKFS_UUID_RANDOM;
}

static bool is_pow2(uint64_t x)
{
	return x && !(x & (x - 1));
}

static int check_opts(const struct mkfs_opts *o, char *err, size_t errlen)
{
	if (o->block_size && o->block_size != 1024 && o->block_size != 2048 &&
	    o->block_size != 4096) {
		seterr(err, errlen, "block size %u is not 1024, 2048 or 4096", o->block_size);
		return -EINVAL;
	}
	if (o->inode_size && (!is_pow2(o->inode_size) || o->inode_size < EXT2_GOOD_OLD_INODE_SIZE ||
			      o->inode_size > (o->block_size ? o->block_size : 4096))) {
		seterr(err, errlen,
		       "inode size %u is not a power of 2 between 128 and the block size",
		       o->inode_size);
		return -EINVAL;
	}
	if (o->inode_ratio && (o->inode_ratio < 1024 || o->inode_ratio > 64 * MiB)) {
		seterr(err, errlen, "bytes per inode %u is not between 1024 and 67108864",
		       o->inode_ratio);
		return -EINVAL;
	}
	if (!(o->reserved_percent >= 0.0 && o->reserved_percent <= 50.0)) {
		seterr(err, errlen, "reserved percentage %g is not between 0 and 50",
		       o->reserved_percent);
		return -EINVAL;
	}
	if (o->label && strlen(o->label) > EXT2_LABEL_LEN) {
		seterr(err, errlen, "label '%s' is longer than %d bytes", o->label, EXT2_LABEL_LEN);
		return -EINVAL;
	}
	if (o->inodes > UINT32_MAX) {
		seterr(err, errlen, "inode count %llu is more than ext2 can hold (%u)",
		       (unsigned long long)o->inodes, UINT32_MAX);
		return -EINVAL;
	}
	if (o->journal_mib && !(o->flags & MKFS_JOURNAL)) {
		seterr(err, errlen, "a journal size is given but no journal is asked for");
		return -EINVAL;
	}
	if ((unsigned)o->uuid_mode > MKFS_UUID_GIVEN) {
		seterr(err, errlen, "unknown UUID mode %d", (int)o->uuid_mode);
		return -EINVAL;
	}
	return 0;
}

/* Copy the export's first and last NBD_WINDOW bytes into the shadow
 * (out false) or back (out true, then flushed). */
static int nbd_windows(struct target *t, bool out)
{
	uint64_t ranges[2][2] = {{0, t->size < NBD_WINDOW ? t->size : NBD_WINDOW}, {0, t->size}};
	uint8_t *buf = malloc(NBD_WINDOW);
	int r = 0;

	if (!buf)
		return -ENOMEM;
	ranges[1][0] = t->size > 2 * (uint64_t)NBD_WINDOW ? t->size - NBD_WINDOW : ranges[0][1];
	for (int i = 0; i < 2 && !r; i++) {
		uint64_t off = ranges[i][0], len = ranges[i][1] - off;
		uint32_t bs = t->dev->block_size;

		if (ranges[i][1] <= off)
			continue;
		if (!out) {
			r = bdev_read(t->dev, off / bs, (uint32_t)(len / bs), buf);
			if (!r && pwrite(t->shadow, buf, len, (off_t)off) != (ssize_t)len)
				r = -EIO;
		} else if (pread(t->shadow, buf, len, (off_t)off) != (ssize_t)len) {
			r = -EIO;
		} else {
			struct bdev_write *w = calloc(len / bs, sizeof(*w));

			if (!w) {
				r = -ENOMEM;
				break;
			}
			for (uint64_t k = 0; k < len / bs; k++) {
				w[k].blkno = off / bs + k;
				w[k].data = buf + k * bs;
			}
			r = bdev_write(t->dev, w, len / bs);
			free(w);
		}
	}
	if (!r && out)
		r = bdev_barrier(t->dev);
	free(buf);
	return r == -ECONNRESET ? -EIO : r;
}

static int nbd_target(struct target *t, char *err, size_t errlen)
{
	char why[256];
	int ret;

	t->nbd = t->exists = t->blockdev = true;
	ret = bdev_nbd_open(t->path, 512, 0, 0, &t->dev, why, sizeof(why));
	if (ret) {
		seterr(err, errlen, "cannot open '%s': %s", t->path, why);
		return ret;
	}
	t->size = t->dev->nblocks * t->dev->block_size;
	t->shadow = memfd_create("fstitch-mkfs", MFD_CLOEXEC);
	if (t->shadow < 0 || ftruncate(t->shadow, (off_t)t->size) < 0) {
		ret = -errno;
		seterr(err, errlen, "cannot make a copy of the start of '%s': %s", t->path,
		       strerror(errno));
		return ret;
	}
	snprintf(t->shadow_path, sizeof(t->shadow_path), "/proc/self/fd/%d", t->shadow);
	ret = nbd_windows(t, false);
	if (ret)
		seterr(err, errlen, "cannot read '%s': %s", t->path, strerror(-ret));
	return ret;
}

static int stat_target(struct target *t, char *err, size_t errlen)
{
	struct stat st;
	int fd, ret;

	if (bdev_nbd_is_uri(t->path))
		return nbd_target(t, err, errlen);

	if (stat(t->path, &st) < 0) {
		if (errno == ENOENT) {
			t->exists = false;
			return 0;
		}
		ret = -errno;
		seterr(err, errlen, "cannot access '%s': %s", t->path, strerror(errno));
		return ret;
	}
	t->exists = true;
	if (S_ISREG(st.st_mode)) {
		t->size = (uint64_t)st.st_size;
		return 0;
	}
	if (!S_ISBLK(st.st_mode)) {
		seterr(err, errlen, "'%s' is not a regular file or block device", t->path);
		return -ENOTBLK;
	}
	t->blockdev = true;
	fd = open(t->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		seterr(err, errlen, "cannot open '%s': %s", t->path, strerror(errno));
		return ret;
	}
	ret = ioctl(fd, BLKGETSIZE64, &t->size) < 0 ? -errno : 0;
	if (ret)
		seterr(err, errlen, "cannot get the size of '%s': %s", t->path, strerror(-ret));
	close(fd);
	return ret;
}

/* Erase every signature libblkid knows on fd, so that nothing but the new
 * ext2 is found afterwards (an old GPT backup at the end of a device, or
 * another file system's magic outside what ext2 overwrites). */
static int wipe_signatures(int fd)
{
	blkid_probe pr = blkid_new_probe();
	int ret = 0;

	if (!pr)
		return -ENOMEM;
	if (blkid_probe_set_device(pr, fd, 0, 0) < 0) {
		ret = -EIO;
		goto out;
	}
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_MAGIC | BLKID_SUBLKS_BADCSUM);
	blkid_probe_enable_partitions(pr, 1);
	blkid_probe_set_partitions_flags(pr, BLKID_PARTS_MAGIC | BLKID_PARTS_FORCE_GPT);
	while (blkid_do_probe(pr) == 0) {
		if (blkid_do_wipe(pr, 0) < 0) {
			ret = errno ? -errno : -EIO;
			goto out;
		}
	}
out:
	blkid_free_probe(pr);
	return ret;
}

/* ------------------------------------------------------------ layout */

/* The superblock handed to ext2fs_initialize for the chosen geometry. */
static void fill_param(struct ext2_super_block *p, const struct mkfs_opts *o, unsigned bs,
		       uint64_t blocks, uint64_t inodes)
{
	memset(p, 0, sizeof(*p));
	p->s_rev_level = EXT2_DYNAMIC_REV;
	p->s_log_block_size = (uint32_t)(__builtin_ctz(bs) - EXT2_MIN_BLOCK_LOG_SIZE);
	p->s_log_cluster_size = p->s_log_block_size;
	p->s_inode_size = (uint16_t)(o->inode_size ? o->inode_size : 256);
	p->s_inodes_count = (uint32_t)inodes;
	ext2fs_blocks_count_set(p, blocks);
	/* ext2fs_initialize keeps this ratio if it has to drop a last group. */
	ext2fs_r_blocks_count_set(p, (blk64_t)((double)blocks * o->reserved_percent / 100.0));
	p->s_feature_compat = 0;
	p->s_feature_incompat = EXT2_FEATURE_INCOMPAT_FILETYPE;
	p->s_feature_ro_compat =
	    EXT2_FEATURE_RO_COMPAT_SPARSE_SUPER | EXT2_FEATURE_RO_COMPAT_LARGE_FILE;
}

static void fill_info(ext2_filsys fs, struct mkfs_info *info)
{
	struct ext2_super_block *sb = fs->super;
	dgrp_t g;

	info->blocks = ext2fs_blocks_count(sb);
	info->block_size = fs->blocksize;
	info->inodes = sb->s_inodes_count;
	info->inode_size = EXT2_INODE_SIZE(sb);
	info->groups = fs->group_desc_count;
	info->blocks_per_group = sb->s_blocks_per_group;
	info->inodes_per_group = sb->s_inodes_per_group;
	info->reserved_blocks = ext2fs_r_blocks_count(sb);
	info->free_blocks = ext2fs_free_blocks_count(sb);
	info->free_inodes = sb->s_free_inodes_count;
	memcpy(info->label, sb->s_volume_name, EXT2_LABEL_LEN);
	info->label[EXT2_LABEL_LEN] = '\0';
	memcpy(info->uuid, sb->s_uuid, sizeof(info->uuid));
	info->nbackups = 0;
	for (g = 1; g < fs->group_desc_count && info->nbackups < MKFS_MAX_BACKUPS; g++)
		if (ext2fs_bg_has_super(fs, g))
			info->backups[info->nbackups++] = ext2fs_group_first_block2(fs, g);
}

static void set_identity(ext2_filsys fs, const struct mkfs_opts *o)
{
	struct ext2_super_block *sb = fs->super;

	switch (o->uuid_mode) {
	case MKFS_UUID_TIME:
		uuid_generate_time(sb->s_uuid);
		break;
	case MKFS_UUID_CLEAR:
		uuid_clear(sb->s_uuid);
		break;
	case MKFS_UUID_GIVEN:
		memcpy(sb->s_uuid, o->uuid, sizeof(sb->s_uuid));
		break;
	case MKFS_UUID_RANDOM:
	default:
		uuid_generate(sb->s_uuid);
		break;
	}
	memset(sb->s_volume_name, 0, sizeof(sb->s_volume_name));
	if (o->label)
		memcpy(sb->s_volume_name, o->label, strlen(o->label));
	/* Seed for directory hashing, should dir_index ever be turned on
	 * (tune2fs -O dir_index); mke2fs always sets it. */
	uuid_generate((unsigned char *)sb->s_hash_seed);
	sb->s_def_hash_version = EXT2_HASH_HALF_MD4;
	/* No mount-count or interval fsck, as mke2fs by default. */
	sb->s_max_mnt_count = (__u16)-1;
	sb->s_checkinterval = 0;
}

/* Root directory (owned by the caller, so that an unprivileged user can use
 * an image it made), lost+found, the reserved inodes and the empty bad
 * block inode: what e2fsck expects of a fresh file system. */
static errcode_t populate(ext2_filsys fs)
{
	struct ext2_inode inode;
	ext2_ino_t ino;
	unsigned lpf_size = 0;
	errcode_t err;
	int i;

	err = ext2fs_mkdir(fs, EXT2_ROOT_INO, EXT2_ROOT_INO, NULL);
	if (err)
		return err;
	if (geteuid() != 0 || getegid() != 0) {
		err = ext2fs_read_inode(fs, EXT2_ROOT_INO, &inode);
		if (err)
			return err;
		inode.i_uid = (__u16)geteuid();
		ext2fs_set_i_uid_high(inode, geteuid() >> 16);
		inode.i_gid = (__u16)getegid();
		ext2fs_set_i_gid_high(inode, getegid() >> 16);
		err = ext2fs_write_inode(fs, EXT2_ROOT_INO, &inode);
		if (err)
			return err;
	}

	err = ext2fs_mkdir(fs, EXT2_ROOT_INO, 0, "lost+found");
	if (err)
		return err;
	err = ext2fs_lookup(fs, EXT2_ROOT_INO, "lost+found", 10, NULL, &ino);
	if (err)
		return err;
	for (i = 1; i < EXT2_NDIR_BLOCKS; i++) {
		lpf_size += fs->blocksize;
		if (lpf_size >= LPF_MIN_BYTES && lpf_size >= 2 * fs->blocksize)
			break;
		err = ext2fs_expand_dir(fs, ino);
		if (err)
			return err;
	}

	for (ino = EXT2_ROOT_INO + 1; ino < EXT2_FIRST_INODE(fs->super); ino++)
		ext2fs_inode_alloc_stats2(fs, ino, +1, 0);

	ext2fs_mark_inode_bitmap2(fs->inode_map, EXT2_BAD_INO);
	ext2fs_inode_alloc_stats2(fs, EXT2_BAD_INO, +1, 0);
	return ext2fs_update_bb_inode(fs, NULL);
}

/* The journal's length in blocks for fs (0: none asked for), as mke2fs
 * picks it: by the file system's size, or from opts->journal_mib within
 * mke2fs's bounds.  Called on a fresh layout, whose free count is what
 * mke2fs checks the size against. */
static int journal_blocks(ext2_filsys fs, const struct mkfs_opts *o, uint64_t size, blk_t *out,
			  char *err, size_t errlen)
{
	struct ext2fs_journal_params jp;
	uint64_t blocks, half;
	char sbuf[32];

	*out = 0;
	if (!(o->flags & MKFS_JOURNAL))
		return 0;
	if (ext2fs_get_journal_params(&jp, fs)) {
		seterr(err, errlen,
		       "size %s is too small for a journal: that needs a file system of at "
		       "least 2048 blocks (this one has %llu of %u bytes)",
		       size_format(size, sbuf, sizeof(sbuf)),
		       (unsigned long long)ext2fs_blocks_count(fs->super), fs->blocksize);
		return -EINVAL;
	}
	if (!o->journal_mib) {
		*out = jp.num_journal_blocks;
		return 0;
	}
	blocks = (uint64_t)o->journal_mib * MiB / fs->blocksize;
	if (blocks < MKFS_JOURNAL_MIN_BLOCKS || blocks > MKFS_JOURNAL_MAX_BLOCKS) {
		seterr(err, errlen,
		       "journal size %u MiB is %llu blocks of %u bytes; a journal must have "
		       "%u to %u blocks",
		       o->journal_mib, (unsigned long long)blocks, fs->blocksize,
		       MKFS_JOURNAL_MIN_BLOCKS, MKFS_JOURNAL_MAX_BLOCKS);
		return -EINVAL;
	}
	half = ext2fs_free_blocks_count(fs->super) / 2;
	if (blocks > half) {
		seterr(err, errlen,
		       "journal size %u MiB is too large for a file system of %s: a journal "
		       "may take at most half of the free blocks (%llu MiB here)",
		       o->journal_mib, size_format(size, sbuf, sizeof(sbuf)),
		       (unsigned long long)(half * fs->blocksize / MiB));
		return -EINVAL;
	}
	*out = (blk_t)blocks;
	return 0;
}

/* The journal inode (8), its superblock and the superblock's backup of its
 * block map, where mke2fs puts them (the middle of the file system).  lazy
 * leaves the journal's blocks unzeroed: for the first pass, whose device
 * would otherwise keep every one of them in memory. */
static errcode_t add_journal(ext2_filsys fs, blk_t blocks, bool lazy)
{
	struct ext2fs_journal_params jp;

	memset(&jp, 0, sizeof(jp));
	jp.num_journal_blocks = blocks;
	/* the target's mount state was checked before this pass began */
	return ext2fs_add_journal_inode3(
	    fs, &jp, ~0ULL, EXT2_MKJOURNAL_NO_MNT_CHECK | (lazy ? EXT2_MKJOURNAL_LAZYINIT : 0));
}

/* Inode tables must read as zeros: without uninit_bg e2fsck and the kernel
 * trust every inode in them. */
static errcode_t zero_inode_tables(ext2_filsys fs)
{
	dgrp_t g;
	errcode_t err;

	for (g = 0; g < fs->group_desc_count; g++) {
		err = ext2fs_zero_blocks2(fs, ext2fs_inode_table_loc(fs, g),
					  (int)fs->inode_blocks_per_group, NULL, NULL);
		if (err)
			return err;
	}
	return 0;
}

/* Zero the first 4 KiB (boot sector and whatever an old, larger-block file
 * system left around the superblock) before libext2fs writes its own. */
static int zap_start(int fd, uint64_t size)
{
	static const char zeros[4096];
	size_t n = size < sizeof(zeros) ? (size_t)size : sizeof(zeros);

	if (pwrite(fd, zeros, n, 0) != (ssize_t)n)
		return errno ? -errno : -EIO;
	return 0;
}

static pthread_once_t e2err_table_once = PTHREAD_ONCE_INIT;

static void load_e2err_table(void)
{
	initialize_ext2_error_table();
}

/* libext2fs's own text for e, with its com_err table registered so that
 * the text is not "Unknown code ext2 35". */
static const char *describe_e2err(errcode_t e)
{
	pthread_once(&e2err_table_once, load_e2err_table);
	return error_message(e);
}

/* Take the image lock fstitch-mount holds (see mkfs.h): the descriptor in
 * *lockfd, kept until the end.  A mounted target is refused at once rather
 * than waited for: its daemon will not let go until it is unmounted. */
static int lock_target(const char *path, const struct mkfs_opts *opts, int *lockfd, char *err,
		       size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), mflags = 0, ret;
	errcode_t e;

	if (fd < 0) {
		ret = -errno;
		seterr(err, errlen, "cannot open '%s': %s", path, strerror(errno));
		return ret;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		goto done;
	if (errno != EWOULDBLOCK) {
		ret = -errno;
		seterr(err, errlen, "cannot lock '%s': %s", path, strerror(errno));
		goto fail;
	}
	e = ext2fs_check_if_mounted(path, &mflags);
	if (!e && (mflags & EXT2_MF_MOUNTED)) {
		seterr(err, errlen, "'%s' is mounted", path);
		ret = -EBUSY;
		goto fail;
	}
	if (opts->waiting)
		opts->waiting(path);
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			ret = -errno;
			seterr(err, errlen, "cannot lock '%s': %s", path, strerror(errno));
			goto fail;
		}
	}
done:
	*lockfd = fd;
	return 0;
fail:
	close(fd);
	return ret;
}

int mkfs_make(const char *path, const struct mkfs_opts *opts, struct mkfs_info *info, char *err,
	      size_t errlen)
{
	struct target t = {.path = path, .shadow = -1};
	struct ext2_super_block param;
	struct mkfs_info out;
	ext2_filsys fs = NULL;
	uint64_t size, blocks, inodes;
	unsigned bs, ratio;
	blk_t jblocks = 0;
	int ret, fd = -1, lockfd = -1, mflags = 0;
	bool created = false;
	char found[128] = "", sbuf[32];
	errcode_t e;

	memset(&out, 0, sizeof(out));
	ret = check_opts(opts, err, errlen);
	if (ret)
		return ret;
	ret = stat_target(&t, err, errlen);
	if (ret)
		goto out;

	size = opts->size ? opts->size : t.size;
	if (!t.exists && !opts->size) {
		seterr(err, errlen, "'%s' does not exist and no size was given to create it", path);
		ret = -ENOENT;
		goto out;
	}
	if (t.blockdev && size > t.size) {
		seterr(err, errlen, "size %llu bytes is larger than '%s' (%llu bytes)",
		       (unsigned long long)size, path, (unsigned long long)t.size);
		ret = -EINVAL;
		goto out;
	}

	/* mke2fs's size classes (see mkfs.h). */
	if (size < 3 * MiB) {
		bs = 1024;
		ratio = 8192;
	} else if (size < 512 * MiB) {
		bs = 1024;
		ratio = 4096;
	} else {
		bs = 4096;
		ratio = 16384;
	}
	if (opts->block_size)
		bs = opts->block_size;
	if (opts->inode_ratio)
		ratio = opts->inode_ratio;
	/* An inode per less than a block can never all be used. */
	if (ratio < bs)
		ratio = bs;
	if (opts->inode_size > bs) {
		seterr(err, errlen, "inode size %u is larger than the block size %u",
		       opts->inode_size, bs);
		ret = -EINVAL;
		goto out;
	}

	blocks = size / bs;
	if (blocks > UINT32_MAX) {
		seterr(err, errlen,
		       "size %s is too large for ext2 with %u-byte blocks (at most %llu blocks)",
		       size_format(size, sbuf, sizeof(sbuf)), bs, (unsigned long long)UINT32_MAX);
		ret = -EINVAL;
		goto out;
	}
	inodes = opts->inodes ? opts->inodes : (size + ratio - 1) / ratio;
	if (inodes > UINT32_MAX)
		inodes = UINT32_MAX;

	/* Pass 1: lay out in memory. */
	fill_param(&param, opts, bs, blocks, inodes);
	e = ext2fs_initialize(path, EXT2_FLAG_64BITS | EXT2_FLAG_RW, &param, &plan_io_manager, &fs);
	if (!e)
		e = ext2fs_allocate_tables(fs);
	if (e) {
		if (e == EXT2_ET_TOOSMALL || blocks < 64)
			seterr(err, errlen,
			       "size %s is too small for an ext2 file system with %u-byte blocks",
			       size_format(size, sbuf, sizeof(sbuf)), bs);
		else
			seterr(err, errlen,
			       "cannot lay out %llu blocks of %u bytes with %llu inodes: %s",
			       (unsigned long long)blocks, bs, (unsigned long long)inodes,
			       describe_e2err(e));
		ret = -EINVAL;
		goto out;
	}
	ret = journal_blocks(fs, opts, size, &jblocks, err, errlen);
	if (ret)
		goto out;
	set_identity(fs, opts);
	e = populate(fs);
	if (e) {
		seterr(err, errlen, "cannot lay out the root directory: %s", describe_e2err(e));
		ret = -EINVAL;
		goto out;
	}
	if (jblocks) {
		e = add_journal(fs, jblocks, true);
		if (e) {
			seterr(err, errlen, "cannot lay out a journal of %u blocks: %s", jblocks,
			       describe_e2err(e));
			ret = -EINVAL;
			goto out;
		}
	}
	fill_info(fs, &out);
	out.journal_blocks = jblocks;
	ext2fs_free(fs);
	fs = NULL;

	/* Before the target is read, so that the checks see it as a flush
	 * still running will leave it. */
	if (t.exists && !t.nbd && !(opts->flags & MKFS_DRY_RUN)) {
		ret = lock_target(path, opts, &lockfd, err, errlen);
		if (ret)
			goto out;
	}
	if (t.exists && !t.nbd) {
		e = ext2fs_check_if_mounted(path, &mflags);
		if (e) {
			ret = e2err_to_errno(e);
			seterr(err, errlen, "cannot tell whether '%s' is mounted: %s", path,
			       describe_e2err(e));
			goto out;
		}
		if (mflags & EXT2_MF_MOUNTED) {
			seterr(err, errlen, "'%s' is mounted", path);
			ret = -EBUSY;
			goto out;
		}
		if (mflags & EXT2_MF_BUSY) {
			seterr(err, errlen, "'%s' is in use", path);
			ret = -EBUSY;
			goto out;
		}
	}
	if (t.exists) {
		ret = fsprobe_describe(t.nbd ? t.shadow_path : path, found, sizeof(found), NULL, 0);
		if (ret < 0) {
			seterr(err, errlen, "cannot probe '%s' for an existing file system: %s",
			       path, strerror(-ret));
			goto out;
		}
		if (ret > 0 && !(opts->flags & MKFS_FORCE)) {
			seterr(err, errlen, "'%s' holds %s", path, found);
			ret = -EEXIST;
			goto out;
		}
		if (ret == 0)
			found[0] = '\0';
	}
	memcpy(out.found, found, sizeof(out.found));
	if (opts->flags & MKFS_DRY_RUN) {
		out.created = !t.exists;
		ret = 0;
		goto out;
	}

	/* Pass 2: for real. */
	if (t.nbd)
		fd = fcntl(t.shadow, F_DUPFD_CLOEXEC, 0);
	else
		fd = open(path, O_RDWR | O_CLOEXEC | (t.exists ? 0 : O_CREAT | O_EXCL), 0666);
	if (fd < 0) {
		ret = -errno;
		seterr(err, errlen, "cannot %s '%s': %s", t.exists ? "open" : "create", path,
		       strerror(errno));
		goto out;
	}
	created = !t.exists;
	if (!t.blockdev && t.size < size && ftruncate(fd, (off_t)size) < 0) {
		ret = -errno;
		seterr(err, errlen, "cannot extend '%s' to %llu bytes: %s", path,
		       (unsigned long long)size, strerror(errno));
		goto out;
	}
	if (found[0]) {
		ret = wipe_signatures(fd);
		if (ret) {
			seterr(err, errlen, "cannot erase the old signatures on '%s': %s", path,
			       strerror(-ret));
			goto out;
		}
	}
	ret = zap_start(fd, size);
	if (ret) {
		seterr(err, errlen, "cannot write to '%s': %s", path, strerror(-ret));
		goto out;
	}
	if (t.nbd) {
		/* the wiped and zapped windows to the export, flushed, and
		 * this connection gone before libext2fs makes its own */
		ret = nbd_windows(&t, true);
		if (ret) {
			seterr(err, errlen, "cannot write to '%s': %s", path, strerror(-ret));
			goto out;
		}
		bdev_destroy(t.dev);
		t.dev = NULL;
	}
	/* libext2fs opens the device exclusively; ours must be gone by then.
	 * Its final fsync covers what was written through this descriptor. */
	if (close(fd) < 0) {
		fd = -1;
		ret = -errno;
		seterr(err, errlen, "cannot write to '%s': %s", path, strerror(errno));
		goto out;
	}
	fd = -1;

	fill_param(&param, opts, bs, blocks, inodes);
	e = ext2fs_initialize(path,
			      EXT2_FLAG_64BITS | EXT2_FLAG_RW | (t.nbd ? 0 : EXT2_FLAG_EXCLUSIVE),
			      &param, t.nbd ? mkfs_nbd_io_manager : unix_io_manager, &fs);
	if (e) {
		ret = e2err_to_errno(e);
		seterr(err, errlen, "cannot open '%s': %s", path, describe_e2err(e));
		goto out;
	}
	e = ext2fs_allocate_tables(fs);
	if (!e) {
		set_identity(fs, opts);
		/* Keep the identity the first pass reported. */
		memcpy(fs->super->s_uuid, out.uuid, sizeof(out.uuid));
		e = zero_inode_tables(fs);
	}
	if (!e)
		e = populate(fs);
	if (!e && jblocks)
		e = add_journal(fs, jblocks, false);
	if (!e) {
		fill_info(fs, &out);
		out.journal_blocks = jblocks;
		/* Writes superblock copies, group descriptors and bitmaps,
		 * then flushes (fsync) the device. */
		e = ext2fs_close_free(&fs);
	}
	if (e) {
		ret = e2err_to_errno(e);
		seterr(err, errlen, "cannot write the file system to '%s': %s", path,
		       describe_e2err(e));
		goto out;
	}
	out.created = created;
	ret = 0;
out:
	if (fs)
		ext2fs_free(fs);
	if (fd >= 0)
		close(fd);
	if (lockfd >= 0)
		close(lockfd);
	if (ret && created)
		unlink(path);
	bdev_destroy(t.dev);
	if (t.shadow >= 0)
		close(t.shadow);
	if (ret == 0)
		*info = out;
	return ret;
}
