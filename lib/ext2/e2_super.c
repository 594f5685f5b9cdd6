/* ext2: opening, validating and closing a file system; the superblock and
 * group descriptors.  Nothing is trusted: every field is range-checked here,
 * so the rest of the module can rely on the geometry. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include "e2_int.h"

static __thread char open_err[256];

const char *e2_open_error(void)
{
	return open_err;
}

void e2_set_open_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(open_err, sizeof(open_err), fmt, ap);
	va_end(ap);
}

static int sb_write(struct e2fs *fs, size_t off, size_t len, struct patch **out);
static void fs_error(struct e2fs *fs);

int e2_err(struct e2fs *fs, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(fs->err, sizeof(fs->err), fmt, ap);
	va_end(ap);
	/* Every e2_err is a corrupt structure found (or one the module
	 * cannot trust); during the open it only refuses the open.  Counted
	 * before the log hears of it, so that the log sees the count. */
	if (fs->live)
		fs_error(fs);
	if (fs->opts.log)
		fs->opts.log(fs->opts.log_arg, fs->err);
	return err;
}

uint64_t e2_error_count(const struct e2fs *fs)
{
	return __atomic_load_n(&fs->nerrors, __ATOMIC_RELAXED);
}

enum e2_errors e2_errors_behaviour(const struct e2fs *fs)
{
	return fs->errors;
}

const char *e2_error(const struct e2fs *fs)
{
	return fs ? fs->err : open_err;
}

struct cache *e2_cache(struct e2fs *fs)
{
	return fs->c;
}

bool e2_was_unclean(const struct e2fs *fs)
{
	uint16_t st = fs->mounted_ro ? le16toh(fs->sb.s_state) : fs->mount_state;

	return !(st & EXT2_VALID_FS) || (st & EXT2_ERROR_FS);
}

uint32_t e2_now(void)
{
	return (uint32_t)time(NULL);
}

static bool is_power(uint32_t g, uint32_t base)
{
	uint64_t p = base;

	while (p < g)
		p *= base;
	return p == g;
}

bool e2_group_has_super(const struct e2fs *fs, uint32_t g)
{
	if (g <= 1 || !fs->sparse)
		return true;
	if (!(g & 1))
		return false;
	return is_power(g, 3) || is_power(g, 5) || is_power(g, 7);
}

/* True if blk may hold file data or an indirect block: inside the file
 * system and not one of the group's own metadata blocks. */
bool e2_block_ok(const struct e2fs *fs, uint32_t blk)
{
	const struct e2_group *gr;
	uint32_t g;

	if (blk < fs->first_data || blk >= fs->nblocks)
		return false;
	g = (blk - fs->first_data) / fs->bpg;
	gr = &fs->g[g];
	if (blk == gr->block_bitmap || blk == gr->inode_bitmap)
		return false;
	if (blk >= gr->inode_table && blk < gr->inode_table + fs->itb)
		return false;
	if (e2_group_has_super(fs, g) && blk < gr->first + 1 + fs->gdt_blocks + fs->reserved_gdt)
		return false;
	return true;
}

struct feature {
	uint32_t bit;
	const char *name;
};

static const struct feature incompat_names[] = {
    {EXT2_FEATURE_INCOMPAT_COMPRESSION, "compression"},
    {EXT3_FEATURE_INCOMPAT_RECOVER, "needs_recovery"},
    {EXT3_FEATURE_INCOMPAT_JOURNAL_DEV, "journal_dev"},
    {EXT2_FEATURE_INCOMPAT_META_BG, "meta_bg"},
    {EXT3_FEATURE_INCOMPAT_EXTENTS, "extents"},
    {EXT4_FEATURE_INCOMPAT_64BIT, "64bit"},
    {EXT4_FEATURE_INCOMPAT_MMP, "mmp"},
    {EXT4_FEATURE_INCOMPAT_FLEX_BG, "flex_bg"},
    {EXT4_FEATURE_INCOMPAT_EA_INODE, "ea_inode"},
    {EXT4_FEATURE_INCOMPAT_DIRDATA, "dirdata"},
    {EXT4_FEATURE_INCOMPAT_CSUM_SEED, "metadata_csum_seed"},
    {EXT4_FEATURE_INCOMPAT_LARGEDIR, "large_dir"},
    {EXT4_FEATURE_INCOMPAT_INLINE_DATA, "inline_data"},
    {EXT4_FEATURE_INCOMPAT_ENCRYPT, "encrypt"},
    {EXT4_FEATURE_INCOMPAT_CASEFOLD, "casefold"},
    {0, NULL},
};

static const struct feature rocompat_names[] = {
    {0x0004, "btree_dir"},
    {EXT4_FEATURE_RO_COMPAT_HUGE_FILE, "huge_file"},
    {EXT4_FEATURE_RO_COMPAT_GDT_CSUM, "uninit_bg (gdt_csum)"},
    {EXT4_FEATURE_RO_COMPAT_DIR_NLINK, "dir_nlink"},
    {EXT4_FEATURE_RO_COMPAT_EXTRA_ISIZE, "extra_isize"},
    {EXT4_FEATURE_RO_COMPAT_HAS_SNAPSHOT, "snapshot"},
    {EXT4_FEATURE_RO_COMPAT_QUOTA, "quota"},
    {EXT4_FEATURE_RO_COMPAT_BIGALLOC, "bigalloc"},
    {EXT4_FEATURE_RO_COMPAT_METADATA_CSUM, "metadata_csum"},
    {EXT4_FEATURE_RO_COMPAT_REPLICA, "replica"},
    {EXT4_FEATURE_RO_COMPAT_READONLY, "read-only"},
    {EXT4_FEATURE_RO_COMPAT_PROJECT, "project"},
    {EXT4_FEATURE_RO_COMPAT_SHARED_BLOCKS, "shared_blocks"},
    {EXT4_FEATURE_RO_COMPAT_VERITY, "verity"},
    {EXT4_FEATURE_RO_COMPAT_ORPHAN_PRESENT, "orphan_present"},
    {0, NULL},
};

/* Compat features change the layout in ways our checks or our writes would
 * get wrong; refused although older drivers could ignore them. */
static const struct feature compat_names[] = {
    {EXT4_FEATURE_COMPAT_SPARSE_SUPER2, "sparse_super2"},
    {EXT4_FEATURE_COMPAT_FAST_COMMIT, "fast_commit"},
    {EXT4_FEATURE_COMPAT_ORPHAN_FILE, "orphan_file"},
    {EXT2_FEATURE_COMPAT_EXCLUDE_BITMAP, "exclude_bitmap"},
    {0, NULL},
};

static int refuse(uint32_t bits, const struct feature *tab, const char *kind)
{
	uint32_t b;
	int i;

	if (!bits)
		return 0;
	for (i = 0; tab[i].name; i++)
		if (bits & tab[i].bit) {
			e2_set_open_error("feature '%s' is not supported", tab[i].name);
			return -EOPNOTSUPP;
		}
	b = bits & -bits;
	e2_set_open_error("unknown %s feature 0x%x is not supported", kind, b);
	return -EOPNOTSUPP;
}

static int check_features(struct e2fs *fs)
{
	const struct ext2_super_block *s = &fs->sb;
	uint32_t compat = le32toh(s->s_feature_compat);
	uint32_t incompat = le32toh(s->s_feature_incompat);
	uint32_t rocompat = le32toh(s->s_feature_ro_compat);
	int r;

	if (le32toh(s->s_rev_level) == EXT2_GOOD_OLD_REV)
		return 0; /* revision 0 has no feature fields */
	/* needs_recovery is the journal step's business (e2_journal.c). */
	r = refuse(incompat &
		       ~(uint32_t)(EXT2_FEATURE_INCOMPAT_FILETYPE | EXT3_FEATURE_INCOMPAT_RECOVER),
		   incompat_names, "incompatible");
	if (r)
		return r;
	r = refuse(rocompat & ~(uint32_t)(EXT2_FEATURE_RO_COMPAT_SPARSE_SUPER |
					  EXT2_FEATURE_RO_COMPAT_LARGE_FILE),
		   rocompat_names, "read-only compatible");
	if (r)
		return r;
	for (int i = 0; compat_names[i].name; i++)
		if (compat & compat_names[i].bit) {
			e2_set_open_error("feature '%s' is not supported", compat_names[i].name);
			return -EOPNOTSUPP;
		}
	fs->filetype = incompat & EXT2_FEATURE_INCOMPAT_FILETYPE;
	fs->sparse = rocompat & EXT2_FEATURE_RO_COMPAT_SPARSE_SUPER;
	return 0;
}

static int check_geometry(struct e2fs *fs)
{
	const struct ext2_super_block *s = &fs->sb;
	uint32_t log = le32toh(s->s_log_block_size);
	uint64_t ng;

	if (le16toh(s->s_magic) != EXT2_SUPER_MAGIC) {
		e2_set_open_error("not an ext2 file system (bad magic 0x%04x)",
				  le16toh(s->s_magic));
		return -EINVAL;
	}
	if (le32toh(s->s_rev_level) > EXT2_DYNAMIC_REV) {
		e2_set_open_error("unsupported revision %u", le32toh(s->s_rev_level));
		return -EOPNOTSUPP;
	}
	if (log > 6) {
		e2_set_open_error("corrupt superblock: block size 2^%u KiB", log);
		return -EUCLEAN;
	}
	fs->bs = 1024u << log;
	fs->apb = fs->bs / 4;
	fs->nblocks = le32toh(s->s_blocks_count);
	fs->ninodes = le32toh(s->s_inodes_count);
	fs->bpg = le32toh(s->s_blocks_per_group);
	fs->ipg = le32toh(s->s_inodes_per_group);
	fs->first_data = le32toh(s->s_first_data_block);
	if (le32toh(s->s_rev_level) == EXT2_GOOD_OLD_REV) {
		fs->isize = 128;
		fs->first_ino = 11;
	} else {
		fs->isize = le16toh(s->s_inode_size);
		fs->first_ino = le32toh(s->s_first_ino);
	}
	if (le32toh(s->s_log_cluster_size) != log && le32toh(s->s_rev_level) > 0 &&
	    s->s_log_cluster_size != 0) {
		e2_set_open_error("corrupt superblock: cluster size differs from block size");
		return -EUCLEAN;
	}
	if (fs->first_data != (fs->bs == 1024 ? 1u : 0u)) {
		e2_set_open_error("corrupt superblock: first data block %u", fs->first_data);
		return -EUCLEAN;
	}
	if (fs->bpg == 0 || fs->bpg > 8 * fs->bs || fs->ipg == 0 || fs->ipg > 8 * fs->bs) {
		e2_set_open_error("corrupt superblock: %u blocks, %u inodes per group", fs->bpg,
				  fs->ipg);
		return -EUCLEAN;
	}
	if (fs->isize < 128 || fs->isize > fs->bs || (fs->isize & (fs->isize - 1))) {
		e2_set_open_error("corrupt superblock: inode size %u", fs->isize);
		return -EUCLEAN;
	}
	if (fs->nblocks <= fs->first_data + 1) {
		e2_set_open_error("corrupt superblock: %u blocks", fs->nblocks);
		return -EUCLEAN;
	}
	ng = ((uint64_t)fs->nblocks - fs->first_data + fs->bpg - 1) / fs->bpg;
	fs->ngroups = (uint32_t)ng;
	if ((uint64_t)fs->ipg * ng != fs->ninodes) {
		e2_set_open_error("corrupt superblock: %u inodes is not %u groups of %u",
				  fs->ninodes, fs->ngroups, fs->ipg);
		return -EUCLEAN;
	}
	if (fs->first_ino < EXT2_GOOD_OLD_FIRST_INO || fs->first_ino >= fs->ninodes) {
		e2_set_open_error("corrupt superblock: first inode %u", fs->first_ino);
		return -EUCLEAN;
	}
	fs->ipb = fs->bs / fs->isize;
	fs->icore = fs->isize < sizeof(struct ext2_inode_large)
			? fs->isize
			: (uint32_t)sizeof(struct ext2_inode_large);
	fs->itb = (fs->ipg + fs->ipb - 1) / fs->ipb;
	fs->gdt_blocks = (uint32_t)((ng * sizeof(struct ext2_group_desc) + fs->bs - 1) / fs->bs);
	fs->reserved_gdt = 0;
	if (le32toh(s->s_feature_compat) & EXT2_FEATURE_COMPAT_RESIZE_INODE)
		fs->reserved_gdt = le16toh(s->s_reserved_gdt_blocks);
	if (fs->reserved_gdt > fs->apb) {
		e2_set_open_error("corrupt superblock: %u reserved gdt blocks", fs->reserved_gdt);
		return -EUCLEAN;
	}
	if (fs->first_data + 1 + fs->gdt_blocks + fs->reserved_gdt >= fs->nblocks ||
	    1 + fs->gdt_blocks + fs->reserved_gdt + 2 + fs->itb > fs->bpg) {
		e2_set_open_error("corrupt superblock: group tables do not fit in a group");
		return -EUCLEAN;
	}
	if ((uint64_t)fs->nblocks * fs->bs > (uint64_t)fs->dev->nblocks * fs->dev->block_size) {
		e2_set_open_error("device (%llu bytes) is smaller than the file system "
				  "(%llu bytes)",
				  (unsigned long long)fs->dev->nblocks * fs->dev->block_size,
				  (unsigned long long)fs->nblocks * fs->bs);
		return -EUCLEAN;
	}
	return 0;
}

static int load_groups(struct e2fs *fs)
{
	struct cblock *b = NULL;
	uint32_t per = fs->bs / sizeof(struct ext2_group_desc);
	int r;

	fs->g = calloc(fs->ngroups, sizeof(*fs->g));
	fs->scratch = calloc(5, fs->bs);
	if (!fs->g || !fs->scratch)
		return -ENOMEM;
	fs->wtmp = fs->scratch;
	fs->wzero = fs->scratch + fs->bs;
	for (int l = 0; l < 3; l++)
		fs->kids[l] = (uint32_t *)(void *)(fs->scratch + (size_t)(2 + l) * fs->bs);
	fs->free_blocks = fs->free_inodes = 0;
	for (uint32_t g = 0; g < fs->ngroups; g++) {
		struct e2_group *gr = &fs->g[g];
		const struct ext2_group_desc *gd;
		uint32_t meta_end;

		if (g % per == 0) {
			if (b)
				cache_put(fs->c, b);
			r = cache_get(fs->c, fs->first_data + 1 + g / per, &b);
			if (r) {
				e2_set_open_error("cannot read group descriptors: %s",
						  strerror(-r));
				return r;
			}
		}
		gd = (const struct ext2_group_desc *)cblock_data(b) + g % per;
		gr->first = fs->first_data + g * fs->bpg;
		gr->nblocks = fs->nblocks - gr->first < fs->bpg ? fs->nblocks - gr->first : fs->bpg;
		gr->block_bitmap = le32toh(gd->bg_block_bitmap);
		gr->inode_bitmap = le32toh(gd->bg_inode_bitmap);
		gr->inode_table = le32toh(gd->bg_inode_table);
		gr->free_blocks = le16toh(gd->bg_free_blocks_count);
		gr->free_inodes = le16toh(gd->bg_free_inodes_count);
		gr->used_dirs = le16toh(gd->bg_used_dirs_count);
		meta_end = gr->first +
			   (e2_group_has_super(fs, g) ? 1 + fs->gdt_blocks + fs->reserved_gdt : 0);
		if (g == 0 && fs->first_data == 0)
			meta_end = 1 + fs->gdt_blocks + fs->reserved_gdt;
#define IN_GROUP(x) ((x) >= meta_end && (x) < gr->first + gr->nblocks)
		if (!IN_GROUP(gr->block_bitmap) || !IN_GROUP(gr->inode_bitmap) ||
		    !IN_GROUP(gr->inode_table) || !IN_GROUP(gr->inode_table + fs->itb - 1) ||
		    gr->block_bitmap == gr->inode_bitmap ||
		    (gr->block_bitmap >= gr->inode_table &&
		     gr->block_bitmap < gr->inode_table + fs->itb) ||
		    (gr->inode_bitmap >= gr->inode_table &&
		     gr->inode_bitmap < gr->inode_table + fs->itb)) {
			e2_set_open_error("corrupt group descriptor %u: bitmaps or inode "
					  "table out of place",
					  g);
			cache_put(fs->c, b);
			return -EUCLEAN;
		}
#undef IN_GROUP
		if (gr->free_blocks > gr->nblocks || gr->free_inodes > fs->ipg ||
		    gr->used_dirs > fs->ipg) {
			e2_set_open_error("corrupt group descriptor %u: free counts", g);
			cache_put(fs->c, b);
			return -EUCLEAN;
		}
		fs->free_blocks += gr->free_blocks;
		fs->free_inodes += gr->free_inodes;
	}
	if (b)
		cache_put(fs->c, b);
	return 0;
}

/* Write the superblock fields in [off, off+len) of fs->sb. */
static int sb_write(struct e2fs *fs, size_t off, size_t len, struct patch **out)
{
	return e2_patch(fs, fs->sb_blk, fs->sb_off + (uint32_t)off, (uint32_t)len,
			(const uint8_t *)&fs->sb + off, NULL, out);
}

#define SB_RANGE(a, b)                                                                             \
	offsetof(struct ext2_super_block, a), offsetof(struct ext2_super_block, b) +               \
						  sizeof(((struct ext2_super_block *)0)->b) -      \
						  offsetof(struct ext2_super_block, a)

/* Free counts need no ordering (fsck recomputes them): dependency-free
 * patches, which the engine merges into one hard patch per block.  Counts
 * the cached superblock already holds are not written again: every commit
 * of a journal writes the counts, and a change with the same bytes would
 * still put the superblock in the transaction, one more block to log for
 * an fsync that allocated nothing. */
int e2_sb_write_counts(struct e2fs *fs)
{
	size_t off = offsetof(struct ext2_super_block, s_free_blocks_count);
	uint32_t v[2];
	struct cblock *b;
	bool same;
	int r;

	fs->sb.s_free_blocks_count = htole32((uint32_t)fs->free_blocks);
	fs->sb.s_free_inodes_count = htole32((uint32_t)fs->free_inodes);
	v[0] = fs->sb.s_free_blocks_count;
	v[1] = fs->sb.s_free_inodes_count;
	r = cache_get(fs->c, fs->sb_blk, &b);
	if (r)
		return e2_err(fs, r, "cannot read the superblock");
	same = memcmp(cblock_data(b) + fs->sb_off + off, v, sizeof(v)) == 0;
	cache_put(fs->c, b);
	if (same)
		return 0;
	return sb_write(fs, SB_RANGE(s_free_blocks_count, s_free_inodes_count), NULL);
}

int e2_sb_write_orphan(struct e2fs *fs, uint32_t ino, struct patch **out)
{
	fs->sb.s_last_orphan = htole32(ino);
	return sb_write(fs, SB_RANGE(s_last_orphan, s_last_orphan), out);
}

int e2_sb_write_incompat(struct e2fs *fs, struct patch **out)
{
	return sb_write(fs, SB_RANGE(s_feature_incompat, s_feature_incompat), out);
}

int e2_sb_write_incompat_after(struct e2fs *fs, struct patch *dep)
{
	struct e2_deps d = {0};
	int r = e2_deps_add(&d, dep);

	if (!r)
		r = e2_patch(fs, fs->sb_blk,
			     fs->sb_off +
				 (uint32_t)offsetof(struct ext2_super_block, s_feature_incompat),
			     4, &fs->sb.s_feature_incompat, &d, NULL);
	free(d.p);
	return r;
}

int e2_gd_write(struct e2fs *fs, uint32_t g)
{
	uint32_t per = fs->bs / sizeof(struct ext2_group_desc);
	uint16_t v[3];

	v[0] = htole16((uint16_t)fs->g[g].free_blocks);
	v[1] = htole16((uint16_t)fs->g[g].free_inodes);
	v[2] = htole16((uint16_t)fs->g[g].used_dirs);
	return e2_patch(fs, fs->first_data + 1 + g / per,
			(g % per) * sizeof(struct ext2_group_desc) +
			    offsetof(struct ext2_group_desc, bg_free_blocks_count),
			sizeof(v), v, NULL, NULL);
}

int e2_sb_set_large_file(struct e2fs *fs, struct patch **out)
{
	uint32_t ro = le32toh(fs->sb.s_feature_ro_compat);

	*out = NULL;
	if (ro & EXT2_FEATURE_RO_COMPAT_LARGE_FILE)
		return 0;
	fs->sb.s_feature_ro_compat = htole32(ro | EXT2_FEATURE_RO_COMPAT_LARGE_FILE);
	if (le32toh(fs->sb.s_rev_level) == EXT2_GOOD_OLD_REV)
		return -EFBIG;
	return sb_write(fs, SB_RANGE(s_feature_ro_compat, s_feature_ro_compat), out);
}

/* The ext_attr feature, before the first attribute is stored: *out (or
 * NULL if it is set already) is what the inode must wait for. */
int e2_sb_set_ext_attr(struct e2fs *fs, struct patch **out)
{
	uint32_t c = le32toh(fs->sb.s_feature_compat);

	*out = NULL;
	if (c & EXT2_FEATURE_COMPAT_EXT_ATTR)
		return 0;
	if (le32toh(fs->sb.s_rev_level) == EXT2_GOOD_OLD_REV)
		return -EOPNOTSUPP;
	fs->sb.s_feature_compat = htole32(c | EXT2_FEATURE_COMPAT_EXT_ATTR);
	return sb_write(fs, SB_RANGE(s_feature_compat, s_feature_compat), out);
}

/* A corrupt structure was found at run time (fs->lock held), as ext2's
 * ext2_error(): the superblock says the file system has errors, so that
 * e2fsck checks it however it is unmounted, and errors=remount-ro or panic
 * stop all further changes.  The mark goes to disk with the next flush
 * round, as a patch that depends on nothing; changes already made stay
 * and are still written in their order (they were made before the
 * damage was seen, and each is as consistent as a crash would leave it). */
static void fs_error(struct e2fs *fs)
{
	if (__atomic_add_fetch(&fs->nerrors, 1, __ATOMIC_RELAXED) > 1 || fs->ro)
		return;
	fs->mount_state |= EXT2_ERROR_FS;
	fs->sb.s_state = htole16(le16toh(fs->sb.s_state) | EXT2_ERROR_FS);
	/* Best effort: the request fails with -EIO either way, and the
	 * close writes s_state again. */
	(void)sb_write(fs, SB_RANGE(s_state, s_state), NULL);
	if (fs->errors != E2_ERRORS_CONTINUE)
		fs->ro = true;
}

/* Buckets for a hash table of at most n entries: a power of two from 64
 * to 65536. */
static size_t tab_size(uint64_t n)
{
	size_t b = 64;

	while (b < n && b < (1u << 16))
		b <<= 1;
	return b;
}

static int mount_rw(struct e2fs *fs)
{
	uint16_t state = le16toh(fs->sb.s_state);
	bool journal = fs->opts.consistency == CONSISTENCY_JOURNAL ||
		       fs->opts.consistency == CONSISTENCY_JOURNAL_DATA;
	int r;

	fs->mount_state = state;
	fs->sb.s_mnt_count = htole16(le16toh(fs->sb.s_mnt_count) + 1);
	fs->sb.s_mtime = htole32(e2_now());
	r = sb_write(fs, SB_RANGE(s_mtime, s_wtime), NULL);
	if (!r)
		r = sb_write(fs, SB_RANGE(s_mnt_count, s_mnt_count), NULL);
	if (!r)
		r = e2_sb_write_counts(fs);
	if (r)
		return r;
	/* Under a journal the file system stays marked clean, as Linux's
	 * ext3 leaves it: needs_recovery, set before the first commit block
	 * can reach the disk, says that the log is to be replayed, and a
	 * replayed log leaves nothing for e2fsck to check (nor for the next
	 * mount to warn of).  Every change reaches its place only after a
	 * commit block, so nothing here needs a round of its own. */
	if (journal)
		return 0;
	/* Without one, the unclean mark must be on disk before any other
	 * change is. */
	fs->sb.s_state = htole16(state & ~EXT2_VALID_FS);
	r = sb_write(fs, SB_RANGE(s_state, s_state), NULL);
	if (r)
		return r;
	return cache_sync(fs->c);
}

static void fs_free(struct e2fs *fs)
{
	if (fs->c)
		e2_jfree(fs);
	free(fs->jmap);
	fs->jmap = NULL;
	if (fs->c) {
		e2_order_destroy(fs);
		for (size_t i = 0; i < fs->nparked; i++)
			patch_release(fs->c, fs->parkrm[i]);
		e2_dir_removals_free(fs);
	}
	free(fs->parkpos);
	free(fs->parkrm);
	fs->parkpos = NULL;
	fs->parkrm = NULL;
	fs->nparked = fs->cappos = fs->caprm = 0;
	free(fs->rmbuf);
	free(fs->spbuf);
	fs->rmbuf = fs->spbuf = NULL;
	fs->caprmbuf = fs->capspbuf = 0;
	e2_icache_destroy(fs);
	e2_freed_destroy(fs);
	e2_xattr_destroy(fs);
	if (fs->c)
		cache_destroy(fs->c);
	bdev_destroy(fs->dev);
	e2_groups_free(fs);
	free(fs->scratch);
	free(fs->orph);
	pthread_mutex_destroy(&fs->lock);
	free(fs);
}

/* A handle on dev, not loaded yet: fs_free() undoes it.  Takes dev, which
 * it destroys if there is no memory for the handle. */
/* Where this mount's inode generations start.  Each mount must start
 * somewhere new: a number freed in one mount and reused in the next would
 * otherwise come back with the generation it had, and a file handle (the
 * kernel's, or an NFS client's across a restart) naming the old file would
 * reach the new one. */
static uint32_t gen_seed(void)
{
	uint32_t v;
	struct timespec ts;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v))
		return v;
	/* No entropy yet (early boot): the clock and pid still differ from
	 * one mount to the next. */
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint32_t)ts.tv_sec * 2654435761u ^ (uint32_t)ts.tv_nsec ^ (uint32_t)getpid() << 16;
}

static int fs_new(struct bdev *dev, struct e2fs **out)
{
	struct e2fs *fs = calloc(1, sizeof(*fs));

	if (!fs) {
		bdev_destroy(dev);
		return -ENOMEM;
	}
	pthread_mutex_init(&fs->lock, NULL);
	fs->dev = dev;
	*out = fs;
	return 0;
}

/* Open the image or device at path for e2_open() or e2_recover(); a
 * failure is explained in open_err. */
static int open_path(const char *path, unsigned flags, struct bdev **dev)
{
	int r = bdev_file_open(path, 1024, flags, dev);

	if (r == -EBUSY)
		e2_set_open_error("'%s' is in use by another fstitch process", path);
	else if (r)
		e2_set_open_error("cannot open '%s': %s", path, strerror(-r));
	return r;
}

/* Read and check the superblock and group descriptors, and make the
 * cache: everything of an open that a journal replay can change. */
static int load_fs(struct e2fs *fs)
{
	struct bdev *dev = fs->dev;
	const struct e2_opts *opts = &fs->opts;
	struct cache_opts co = {0};
	int r;

	r = bdev_set_block_size(dev, 1024);
	if (r) {
		e2_set_open_error("cannot set device block size: %s", strerror(-r));
		return r;
	}
	if (dev->nblocks < 2) {
		e2_set_open_error("device too small for an ext2 file system");
		return -EINVAL;
	}
	{
		uint8_t buf[1024];

		r = bdev_read(dev, 1, 1, buf);
		if (r) {
			e2_set_open_error("cannot read superblock: %s", strerror(-r));
			return r;
		}
		memcpy(&fs->sb, buf, sizeof(fs->sb));
	}
	r = check_geometry(fs);
	if (r)
		return r;
	r = check_features(fs);
	if (r)
		return r;
	r = bdev_set_block_size(dev, fs->bs);
	if (r) {
		e2_set_open_error("cannot set device block size %u: %s", fs->bs, strerror(-r));
		return r;
	}
	fs->sb_blk = fs->bs == 1024 ? 1 : 0;
	fs->sb_off = fs->bs == 1024 ? 0 : 1024;
	co.max_blocks = opts->cache_blocks;
	co.flush_interval_ms = opts->flush_interval_ms;
	/* The default mode: journal where there is a journal (the writer
	 * handles every journal the replay accepts). */
	if (opts->consistency_auto)
		fs->opts.consistency =
		    le32toh(fs->sb.s_feature_compat) & EXT3_FEATURE_COMPAT_HAS_JOURNAL
			? CONSISTENCY_JOURNAL
			: CONSISTENCY_SOFTUPDATES;
	co.consistency = opts->consistency;
	co.round_max_blocks = opts->round_max_blocks;
	r = cache_create(dev, &co, &fs->c);
	if (r) {
		e2_set_open_error("cannot create block cache: %s", strerror(-r));
		return r;
	}
	r = load_groups(fs);
	if (r)
		return r;
	return 0;
}

static void unload_fs(struct e2fs *fs)
{
	cache_destroy(fs->c);
	fs->c = NULL;
	e2_groups_free(fs);
	free(fs->scratch);
	fs->scratch = NULL;
}

int e2_open_bdev(struct bdev *dev, const struct e2_opts *opts, struct e2fs **out)
{
	struct e2_opts dflt = {0};
	struct e2_recovery rec2 = {0};
	struct e2fs *fs;
	int r;

	e2_set_open_error("%s", "");
	if (!opts)
		opts = &dflt;
	r = fs_new(dev, &fs);
	if (r)
		return r;
	fs->opts = *opts;
	fs->ro = opts->readonly;
	fs->next_gen = gen_seed();
	fs->mounted_ro = opts->readonly;
	r = load_fs(fs);
	if (r)
		goto fail;
	r = e2_journal_setup(fs, &fs->recovery);
	if (r > 0) {
		/* The replay may have rewritten any block: start again from
		 * the superblock. */
		unload_fs(fs);
		r = load_fs(fs);
		if (!r)
			r = e2_journal_setup(fs, &rec2);
		if (r > 0)
			r = -EIO; /* still marked after a replay: cannot happen */
	}
	if (r)
		goto fail;
	/* Tables sized by what they can hold, up to 64k buckets: a small
	 * file system does not pay for clearing and scanning a large one at
	 * every open, close and sync. */
	fs->ibuckets = tab_size(fs->ninodes);
	fs->itab = calloc(fs->ibuckets, sizeof(*fs->itab));
	fs->fbuckets = tab_size((uint64_t)fs->ninodes + fs->nblocks);
	fs->ftab = calloc(fs->fbuckets, sizeof(*fs->ftab));
	if (!fs->itab || !fs->ftab) {
		r = -ENOMEM;
		goto fail;
	}
	{
		struct e2_inode *root;

		r = e2_iget(fs, E2_ROOT_INO, &root);
		if (r || !e2_idir(root)) {
			e2_set_open_error("corrupt root directory: %s",
					  r ? fs->err : "not a directory");
			r = -EUCLEAN;
			goto fail;
		}
	}
	if (!fs->ro) {
		r = mount_rw(fs);
		if (r) {
			e2_set_open_error("cannot write superblock: %s", strerror(-r));
			goto fail;
		}
	}
	/* A read-only open writes nothing, so it leaves the orphan list to the
	 * next read-write one.  (Linux processes it on a read-only mount too,
	 * unless the device cannot be written; it also replays the journal
	 * there, which a read-only open here refuses to do.) */
	fs->recovery.orphans_kept = fs->ro && fs->sb.s_last_orphan;
	if (!fs->ro) {
		r = e2_jw_start(fs);
		if (r)
			goto fail;
		/* After the replay, as Linux: the list may name inodes a crash
		 * left in use with no name.  (The commit timer may run.) */
		pthread_mutex_lock(&fs->lock);
		r = e2_orphans_recover(fs, &fs->recovery);
		pthread_mutex_unlock(&fs->lock);
		if (r) {
			e2_set_open_error("cannot process the orphan list: %s",
					  r == -EIO ? fs->err : strerror(-r));
			goto fail;
		}
	}
	if (!opts->no_flusher) {
		r = cache_start_flusher(fs->c);
		if (r) {
			e2_set_open_error("cannot start flusher: %s", strerror(-r));
			goto fail;
		}
	}
	fs->errors = opts->errors;
	if (fs->errors == E2_ERRORS_DEFAULT) {
		switch (le16toh(fs->sb.s_errors)) {
		case EXT2_ERRORS_RO:
			fs->errors = E2_ERRORS_RO;
			break;
		case EXT2_ERRORS_PANIC:
			fs->errors = E2_ERRORS_PANIC;
			break;
		default:
			fs->errors = E2_ERRORS_CONTINUE;
			break;
		}
	}
	fs->live = true;
	*out = fs;
	return 0;
fail:
	fs_free(fs);
	return r;
}

int e2_open(const char *path, const struct e2_opts *opts, struct e2fs **out)
{
	struct bdev *dev;
	unsigned flags = BDEV_EXCL;
	int r;

	if (opts && opts->readonly)
		flags |= BDEV_RDONLY;
	r = open_path(path, flags, &dev);
	if (r)
		return r;
	return e2_open_bdev(dev, opts, out);
}

const struct e2_recovery *e2_recovery(const struct e2fs *fs)
{
	return &fs->recovery;
}

int e2_recover(const char *path, struct e2_recovery *out)
{
	struct e2fs *fs;
	struct bdev *dev;
	int r;

	e2_set_open_error("%s", "");
	r = open_path(path, BDEV_EXCL, &dev);
	if (!r)
		r = fs_new(dev, &fs);
	if (r)
		return r;
	r = load_fs(fs);
	if (!r)
		r = e2_journal_setup(fs, &fs->recovery);
	if (r >= 0) {
		*out = fs->recovery;
		r = 0;
	}
	fs_free(fs);
	return r;
}

int e2_close(struct e2fs *fs)
{
	return e2_close_then(fs, NULL, NULL);
}

int e2_close_then(struct e2fs *fs, void (*done)(struct cache *c, void *arg), void *arg)
{
	int r = 0, r2;

	if (!fs)
		return 0;
	pthread_mutex_lock(&fs->lock);
	/* The close commits by itself: the timer has nothing left to do. */
	e2_jstop_soon(fs);
	if (!fs->mounted_ro) {
		/* Orphans: unlinked inodes still referenced when we stop
		 * (not after an error made the file system read-only: that
		 * would be a change). */
		for (size_t i = 0; !fs->ro && i < fs->ibuckets; i++)
			for (struct e2_inode *ip = fs->itab[i]; ip; ip = ip->hnext)
				if (ip->unlinked && !ip->freed) {
					ip->nlookup = 0;
					ip->nopen = 0;
					r2 = e2_ifree(fs, ip);
					if (!r)
						r = r2;
				}
		r2 = fs->ro ? 0 : e2_dfree_all(fs);
		if (!r)
			r = r2;
		/* Under a journal the closing superblock changes join the
		 * running transaction: one commit and one checkpoint, not
		 * two.  Whether all went well is known only at the commit,
		 * and if it fails the transaction (clean state included)
		 * never reaches the disk. */
		r2 = fs->jw ? 0 : cache_sync(fs->c);
		if (!r)
			r = r2;
		if (!r) {
			/* Clean only if it was clean at mount and all went well;
			 * mount_state carries EXT2_ERROR_FS after an error. */
			fs->sb.s_state = htole16(fs->mount_state);
			fs->sb.s_wtime = htole32(e2_now());
			r = e2_sb_write_counts(fs);
			if (!r)
				r = sb_write(fs, SB_RANGE(s_wtime, s_wtime), NULL);
			if (!r)
				r = sb_write(fs, SB_RANGE(s_state, s_state), NULL);
			r2 = fs->jw ? e2_jflush_locked(fs) : cache_sync(fs->c);
			if (!r)
				r = r2;
		}
	}
	if (fs->jw) {
		r2 = e2_jstop(fs, !r && !fs->ro);
		if (!r)
			r = r2;
	}
	pthread_mutex_unlock(&fs->lock);
	cache_stop_flusher(fs->c);
	if (done)
		done(fs->c, arg);
	fs_free(fs);
	return r;
}

void e2_abandon(struct e2fs *fs)
{
	if (!fs)
		return;
	cache_stop_flusher(fs->c);
	fs_free(fs);
}

/* The blocks that hold the file system's own structures, counted as
 * Linux counts them for statfs without minixdf (the ext4 driver, which
 * serves ext2 mounts on current kernels): everything before the first
 * data block; a superblock, the group descriptor table and the reserved
 * GDT blocks in each group that has a copy; and each group's two bitmaps
 * and inode table.  df then shows the same use as the kernel does for the
 * same image, about 1% on an empty one. */
static uint64_t e2_overhead(const struct e2fs *fs)
{
	uint64_t o = fs->first_data;

	for (uint32_t g = 0; g < fs->ngroups; g++)
		if (e2_group_has_super(fs, g))
			o += 1 + fs->gdt_blocks + fs->reserved_gdt;
	return o + (uint64_t)fs->ngroups * (2 + fs->itb);
}

int e2_statfs(struct e2fs *fs, struct statvfs *sv)
{
	uint64_t resv, journal = 0;
	struct stat jst;

	/* Linux counts an internal journal's blocks as overhead too */
	if ((le32toh(fs->sb.s_feature_compat) & EXT3_FEATURE_COMPAT_HAS_JOURNAL) &&
	    !fs->sb.s_journal_dev && fs->sb.s_journal_inum &&
	    e2_getattr(fs, le32toh(fs->sb.s_journal_inum), &jst) == 0)
		journal = (uint64_t)jst.st_size / fs->bs;
	memset(sv, 0, sizeof(*sv));
	pthread_mutex_lock(&fs->lock);
	resv = le32toh(fs->sb.s_r_blocks_count);
	sv->f_bsize = fs->bs;
	sv->f_frsize = fs->bs;
	sv->f_blocks = fs->nblocks - e2_overhead(fs);
	if (journal < sv->f_blocks)
		sv->f_blocks -= journal;
	sv->f_bfree = fs->free_blocks;
	sv->f_bavail = fs->free_blocks > resv ? fs->free_blocks - resv : 0;
	sv->f_files = fs->ninodes;
	sv->f_ffree = fs->free_inodes;
	sv->f_favail = fs->free_inodes;
	sv->f_namemax = EXT2_NAME_LEN;
	{
		uint32_t id;

		memcpy(&id, fs->sb.s_uuid, sizeof(id));
		sv->f_fsid = le32toh(id);
	}
	if (fs->ro)
		sv->f_flag |= ST_RDONLY;
	pthread_mutex_unlock(&fs->lock);
	return 0;
}

int e2_sync(struct e2fs *fs)
{
	int r;

	if (fs->mounted_ro)
		return 0;
	/* Read-only after an error: what was changed before still goes
	 * (committed transactions included, though the log holds them). */
	if (fs->ro) {
		if (fs->jw) {
			pthread_mutex_lock(&fs->lock);
			r = e2_jcheckpoint_locked(fs);
			pthread_mutex_unlock(&fs->lock);
			if (r)
				return r;
		}
		return cache_sync(fs->c);
	}
	pthread_mutex_lock(&fs->lock);
	r = e2_dfree_all(fs);
	if (!r)
		r = e2_sb_write_counts(fs);
	pthread_mutex_unlock(&fs->lock);
	if (r)
		return r;
	/* Journal modes: durable in the log is durable. */
	if (fs->jw)
		return e2_jsync(fs);
	/* Not under fs->lock: other operations go on while rounds are written. */
	return cache_sync(fs->c);
}

/* Only this inode's changes and what they depend on: the patches recorded
 * in ip->sync (data, inode, new entries).  Not under fs->lock while the
 * rounds are written. */
int e2_fsync(struct e2fs *fs, uint32_t ino, bool datasync)
{
	struct e2_inode *ip;
	struct patch *p = NULL;
	int r;

	(void)datasync;
	if (fs->jw && !fs->ro)
		return e2_jsync(fs); /* one commit, whatever the depth */
	if (fs->ro)
		return e2_sync(fs);
	if (fs->opts.consistency == CONSISTENCY_NONE)
		return e2_sync(fs);
	pthread_mutex_lock(&fs->lock);
	fs->fsync_seen = true;
	r = e2_iget(fs, ino, &ip);
	if (!r && (ip->sync_all || !ip->sync_track)) {
		ip->sync_all = false;
		ip->sync_track = true;
		pthread_mutex_unlock(&fs->lock);
		return e2_sync(fs);
	}
	if (!r) {
		p = ip->sync;
		ip->sync = NULL; /* later changes start a new set */
		/* (a later change merged into a patch of this one must
		 * join the next set as well) */
		patch_release(fs->c, ip->sync_last);
		ip->sync_last = NULL;
		if (p) {
			patch_release(fs->c, ip->sync_prev);
			ip->sync_prev = p;
		} else {
			p = ip->sync_prev; /* (in flight, failed or done) */
		}
		patch_retain(p);
	}
	pthread_mutex_unlock(&fs->lock);
	if (r || !p)
		return r;
	r = cache_sync_patch(fs->c, p);
	patch_release(fs->c, p);
	return r;
}
