/* ext2: the in-memory inode cache and inode writes.
 *
 * The cache holds a decoded copy of every inode in use by an operation or by
 * a caller reference; writes go through e2_iwrite(), which patches only the
 * bytes that changed so that unrelated fields do not pick up dependencies. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include "e2_int.h"

#define ICACHE_MAX 16384

/* The inode number's low bits: the buckets (a power of two) are the same
 * sets of numbers as with a multiplicative hash, whose low bits depend
 * only on the number's, but neighbouring inodes share pages of the table
 * (calloc()ed, so each page costs a fault on first touch: an allocator
 * looking at a few free inodes in a row touched a page for each). */
static size_t ihash(const struct e2fs *fs, uint32_t ino)
{
	return ino & (fs->ibuckets - 1);
}

void e2_iloc(const struct e2fs *fs, uint32_t ino, uint32_t *blk, uint32_t *off)
{
	uint32_t g = (ino - 1) / fs->ipg, idx = (ino - 1) % fs->ipg;

	*blk = fs->g[g].inode_table + idx / fs->ipb;
	*off = (idx % fs->ipb) * fs->isize;
}

int e2_iraw(struct e2fs *fs, uint32_t ino, void *dst, uint32_t len)
{
	struct cblock *b;
	uint32_t blk, off;
	int r;

	e2_iloc(fs, ino, &blk, &off);
	r = cache_get(fs->c, blk, &b);
	if (r)
		return e2_err(fs, r, "inode %u: cannot read inode table block %u", ino, blk);
	memcpy(dst, cblock_data(b) + off, len);
	cache_put(fs->c, b);
	return 0;
}

static int iread(struct e2fs *fs, struct e2_inode *ip)
{
	struct ext2_inode_large d;
	int r;

	memset(&d, 0, sizeof(d));
	r = e2_iraw(fs, ip->ino, &d, fs->icore);
	if (r)
		return r;
	ip->d = d;
	/* (an inode with a change of its size pending stays cached) */
	ip->size_hi = e2_isize(&d);
	return 0;
}

uint64_t e2_isize_hi(struct e2fs *fs, struct e2_inode *ip)
{
	/* once the last change of the size is on disk, so is every earlier
	 * one (each waits for the one before, or merged into it) */
	e2_patch_drop_committed(fs, &ip->size_p);
	if (!ip->size_p)
		ip->size_hi = e2_isize(&ip->d);
	return ip->size_hi;
}

static void irelease(struct e2fs *fs, struct e2_inode *ip)
{
	e2_init_set(fs, ip, NULL);
	e2_gate_drop(fs, ip);
	patch_release(fs->c, ip->clear);
	patch_release(fs->c, ip->rmset);
	ip->rmset = NULL;
	for (size_t i = 0; i < ip->nrmnames; i++)
		patch_release(fs->c, ip->rmnames[i].rm);
	free(ip->rmnames);
	ip->rmnames = NULL;
	ip->nrmnames = ip->caprmnames = 0;
	patch_release(fs->c, ip->sync);
	patch_release(fs->c, ip->sync_last);
	patch_release(fs->c, ip->sync_prev);
	patch_release(fs->c, ip->tailz);
	patch_release(fs->c, ip->size_p);
	ip->clear = ip->sync = ip->sync_last = ip->sync_prev = ip->tailz = ip->size_p = NULL;
	for (size_t i = 0; i < ip->npdeps; i++)
		e2_oset_release(fs, &ip->pdeps[i].set);
	free(ip->pdeps);
	ip->pdeps = NULL;
	ip->npdeps = ip->cappdeps = 0;
	/* (only when the file system goes away: inodes with a batch are
	 * flushed before they are dropped) */
	patch_release(fs->c, ip->dfree_p);
	fs->ndfree -= ip->ndfree;
	free(ip->dfree);
	ip->dfree = NULL;
	ip->dfree_p = NULL;
	ip->ndfree = ip->capdfree = 0;
	e2_dindex_free(ip->dix);
	ip->dix = NULL;
}

struct e2_inode *e2_ifind(struct e2fs *fs, uint32_t ino)
{
	struct e2_inode *ip;

	if (ino < 1 || ino > fs->ninodes)
		return NULL;
	for (ip = fs->itab[ihash(fs, ino)]; ip; ip = ip->hnext)
		if (ip->ino == ino)
			return ip;
	return NULL;
}

bool e2_iheld_free(struct e2fs *fs, uint32_t ino)
{
	struct e2_inode *ip = e2_ifind(fs, ino);

	return ip && ip->freed && ip->nlookup;
}

int e2_iget(struct e2fs *fs, uint32_t ino, struct e2_inode **out)
{
	struct e2_inode *ip;
	size_t h;
	int r;

	if (ino < 1 || ino > fs->ninodes)
		return e2_err(fs, -EIO, "inode number %u out of range", ino);
	h = ihash(fs, ino);
	for (ip = fs->itab[h]; ip; ip = ip->hnext)
		if (ip->ino == ino)
			break;
	if (ip) {
		if (ip->freed) {
			/* Reallocated (or looked up through a stale entry):
			 * start again from what is on disk. */
			irelease(fs, ip);
			ip->freed = false;
			ip->unlinked = false;
			ip->linkable = false;
			ip->last_pblk = 0;
			r = iread(fs, ip);
			if (r)
				return r;
		}
		*out = ip;
		return 0;
	}
	ip = calloc(1, sizeof(*ip));
	if (!ip)
		return -ENOMEM;
	ip->ino = ino;
	r = iread(fs, ip);
	if (r) {
		free(ip);
		return r;
	}
	ip->hnext = fs->itab[h];
	fs->itab[h] = ip;
	fs->icount++;
	*out = ip;
	return 0;
}

/* Write len bytes of data over the on-disk inode ip at byte at of it, after
 * deps; then take nw as the cached copy, record the patch for fsync, and
 * give it to *out (if not NULL) or drop it. */
static int ipatch(struct e2fs *fs, struct e2_inode *ip, uint32_t at, uint32_t len, const void *data,
		  const struct ext2_inode_large *nw, struct e2_deps *deps, struct patch **out)
{
	struct patch *p = NULL;
	uint32_t blk, off;
	int r;

	e2_iloc(fs, ip->ino, &blk, &off);
	r = e2_patch(fs, blk, off + at, len, data, deps, &p);
	if (r)
		return r;
	if (e2_isize(nw) != e2_isize(&ip->d)) {
		(void)e2_isize_hi(fs, ip);
		if (e2_isize(nw) > ip->size_hi)
			ip->size_hi = e2_isize(nw);
		patch_retain(p);
		patch_release(fs->c, ip->size_p);
		ip->size_p = p;
	}
	memcpy(&ip->d, nw, fs->icore);
	e2_isync_add(fs, ip, p);
	if (out)
		*out = p;
	else
		patch_release(fs->c, p);
	return 0;
}

/* Write the bytes of *nw that differ from the cached copy, after deps.
 * *out (if not NULL) gets the patch, or NULL if nothing changed. */
int e2_iwrite(struct e2fs *fs, struct e2_inode *ip, const struct ext2_inode_large *nw,
	      struct e2_deps *deps, struct patch **out)
{
	const uint8_t *a = (const uint8_t *)&ip->d, *b = (const uint8_t *)nw;
	size_t lo = 0, hi = fs->icore;

	if (out)
		*out = NULL;
	while (lo < hi && a[lo] == b[lo])
		lo++;
	while (hi > lo && a[hi - 1] == b[hi - 1])
		hi--;
	if (lo == hi)
		return 0;
	if (fs->ro)
		return -EROFS;
	return ipatch(fs, ip, (uint32_t)lo, (uint32_t)(hi - lo), b + lo, nw, deps, out);
}

/* Record p as one of ip's changes, for e2_fsync: an empty patch that
 * nothing depends on collects them (patch_add_depend is allowed on it).
 * Only for inodes that have been fsynced once, or created after any fsync
 * on the mount (create()): the first fsync of another inode syncs
 * everything, so bulk writers that never fsync pay nothing. */
void e2_isync_add(struct e2fs *fs, struct e2_inode *ip, struct patch *p)
{
	if (!ip->sync_track || !p || patch_committed(p) || fs->opts.consistency == CONSISTENCY_NONE)
		return;
	if (p == ip->sync_last)
		return; /* merged into the patch added just before */
	patch_retain(p);
	patch_release(fs->c, ip->sync_last);
	ip->sync_last = p;
	if (ip->sync && !patch_committed(ip->sync) && patch_add_depend(fs->c, ip->sync, p) == 0)
		return;
	{
		/* Something depends on the old set already: chain a new one
		 * after it, so fsync still covers everything. */
		struct patch *d[2] = {ip->sync, p}, *np = NULL;

		if (patch_create_empty(fs->c, d, 2, &np)) {
			ip->sync_all = true;
			return;
		}
		patch_release(fs->c, ip->sync);
		ip->sync = np;
	}
}

bool e2_init_prune(struct e2fs *fs, struct e2_inode *ip)
{
	e2_patch_drop_committed(fs, &ip->init_up);
	if (ip->init && patch_committed(ip->init)) {
		patch_release(fs->c, ip->init);
		ip->init = ip->init_up;
		ip->init_up = NULL;
	}
	return ip->init != NULL;
}

int e2_init_deps(struct e2_deps *d, struct e2_inode *ip)
{
	int r = e2_deps_addref(d, ip->init);

	return r ? r : e2_deps_addref(d, ip->init_up);
}

void e2_init_set(struct e2fs *fs, struct e2_inode *ip, struct patch *p)
{
	patch_release(fs->c, ip->init);
	patch_release(fs->c, ip->init_up);
	ip->init = p;
	ip->init_up = NULL;
}

int e2_init_one(struct e2fs *fs, struct e2_inode *ip, struct patch **out)
{
	struct patch *d[2], *np = NULL;
	int r;

	*out = NULL;
	if (!e2_init_prune(fs, ip))
		return 0;
	if (ip->init_up) {
		d[0] = ip->init;
		d[1] = ip->init_up;
		r = patch_create_empty(fs->c, d, 2, &np);
		if (r)
			return r;
		e2_init_set(fs, ip, np);
	}
	*out = ip->init;
	return 0;
}

int e2_ipending_deps(struct e2fs *fs, struct e2_inode *ip, struct e2_deps *d)
{
	struct patch *p = NULL;
	uint32_t blk, off;
	int r;

	if (e2_idir(ip) || fs->opts.consistency == CONSISTENCY_NONE)
		return 0;
	e2_iloc(fs, ip->ino, &blk, &off);
	r = patch_create_empty_range(fs->c, blk, off, fs->isize, &p);
	if (r)
		return r;
	if (patch_committed(p)) {
		patch_release(fs->c, p);
		return 0;
	}
	r = e2_deps_add(d, p);
	if (r)
		patch_release(fs->c, p);
	return r;
}

/* Initialise a newly allocated inode in full (the bytes past nw's part of
 * a large inode are zeroed, as Linux does for a new inode). */
int e2_iinit(struct e2fs *fs, struct e2_inode *ip, const struct ext2_inode_large *nw,
	     struct e2_deps *deps, struct patch **out)
{
	uint8_t buf[EXT2_MIN_BLOCK_SIZE * 64];
	int r;

	memset(buf, 0, fs->isize);
	memcpy(buf, nw, fs->icore);
	r = ipatch(fs, ip, 0, fs->isize, buf, nw, deps, out);
	if (!r && sizeof(ip->d) > fs->icore)
		memset((uint8_t *)&ip->d + fs->icore, 0, sizeof(ip->d) - fs->icore);
	return r;
}

bool e2_idir(const struct e2_inode *ip)
{
	return S_ISDIR(le16toh(ip->d.i_mode));
}

bool e2_iimmutable(const struct e2_inode *ip)
{
	return le32toh(ip->d.i_flags) & EXT2_IMMUTABLE_FL;
}

bool e2_iappend(const struct e2_inode *ip)
{
	return le32toh(ip->d.i_flags) & EXT2_APPEND_FL;
}

mode_t e2_imode(const struct e2_inode *ip)
{
	return le16toh(ip->d.i_mode);
}

gid_t e2_igid(const struct e2_inode *ip)
{
	return le16toh(ip->d.i_gid) | (uint32_t)le16toh(ip->d.osd2.linux2.l_i_gid_high) << 16;
}

uint16_t e2_ilinks(const struct ext2_inode_large *d)
{
	return le16toh(d->i_links_count);
}

void e2_iset_links(struct ext2_inode_large *d, uint16_t n)
{
	d->i_links_count = htole16(n);
}

uint64_t e2_isize(const struct ext2_inode_large *d)
{
	uint64_t s = le32toh(d->i_size);

	if (S_ISREG(le16toh(d->i_mode)))
		s |= (uint64_t)le32toh(d->i_size_high) << 32;
	return s;
}

void e2_iset_size(struct ext2_inode_large *d, uint64_t size)
{
	d->i_size = htole32((uint32_t)size);
	if (S_ISREG(le16toh(d->i_mode)))
		d->i_size_high = htole32((uint32_t)(size >> 32));
}

bool e2_fast_symlink(const struct e2fs *fs, const struct ext2_inode_large *d)
{
	uint32_t ea = le32toh(d->i_file_acl) ? fs->bs / 512 : 0;

	return le32toh(d->i_blocks) == ea;
}

static dev_t decode_dev(const struct ext2_inode_large *d)
{
	uint32_t old = le32toh(d->i_block[0]), nw = le32toh(d->i_block[1]);

	if (old)
		return makedev((old >> 8) & 0xff, old & 0xff);
	return makedev((nw & 0xfff00) >> 8, (nw & 0xff) | ((nw >> 12) & 0xfff00));
}

void e2_istat(struct e2fs *fs, const struct e2_inode *ip, struct stat *st)
{
	const struct ext2_inode_large *d = &ip->d;
	mode_t m = le16toh(d->i_mode);

	memset(st, 0, sizeof(*st));
	st->st_ino = ip->ino;
	st->st_mode = m;
	st->st_nlink = e2_ilinks(d);
	st->st_uid = le16toh(d->i_uid) | (uint32_t)le16toh(d->osd2.linux2.l_i_uid_high) << 16;
	st->st_gid = e2_igid(ip);
	st->st_size = (off_t)e2_isize(d);
	/* A removed directory still open has size 0, as Linux's ext2_rmdir()
	 * leaves it; its blocks stay on disk, with their size, until it is
	 * freed, so that a crash finds them consistent. */
	if (S_ISDIR(m) && st->st_nlink == 0)
		st->st_size = 0;
	st->st_blksize = fs->bs;
	st->st_blocks = le32toh(d->i_blocks);
	e2_iget_time(fs, d, E2_T_ATIME, &st->st_atim);
	e2_iget_time(fs, d, E2_T_MTIME, &st->st_mtim);
	e2_iget_time(fs, d, E2_T_CTIME, &st->st_ctim);
	if (S_ISCHR(m) || S_ISBLK(m))
		st->st_rdev = decode_dev(d);
}

int e2_itouch(struct e2fs *fs, struct e2_inode *ip, bool mtime, bool ctime)
{
	struct ext2_inode_large nw = ip->d;
	struct timespec now;

	e2_now_ts(fs, &now);
	if (mtime)
		e2_iset_time(fs, &nw, E2_T_MTIME, &now);
	if (ctime)
		e2_iset_time(fs, &nw, E2_T_CTIME, &now);
	return e2_iwrite(fs, ip, &nw, NULL, NULL);
}

/* ---- timestamps ---------------------------------------------------------- */

/* Linux's limits (fs/ext4/ext4.h): signed 32-bit seconds, and with the
 * extra words two epoch bits more, up to 2446-05-10. */
#define E2_TIME_MIN	  ((int64_t)INT32_MIN)
#define E2_TIME_MAX	  ((int64_t)INT32_MAX)
#define E2_TIME_MAX_EXTRA (((int64_t)1 << 34) - 1 + INT32_MIN)
#define E2_EPOCH_MASK	  3u

static const struct {
	size_t sec, extra;
} tfield[] = {
    [E2_T_ATIME] = {offsetof(struct ext2_inode_large, i_atime),
		    offsetof(struct ext2_inode_large, i_atime_extra)},
    [E2_T_MTIME] = {offsetof(struct ext2_inode_large, i_mtime),
		    offsetof(struct ext2_inode_large, i_mtime_extra)},
    [E2_T_CTIME] = {offsetof(struct ext2_inode_large, i_ctime),
		    offsetof(struct ext2_inode_large, i_ctime_extra)},
    [E2_T_CRTIME] = {offsetof(struct ext2_inode_large, i_crtime),
		     offsetof(struct ext2_inode_large, i_crtime_extra)},
};

/* The 4-byte field at off lies inside this inode: in the first 128 bytes,
 * or within a valid i_extra_isize (as Linux's EXT4_FITS_IN_INODE). */
static bool fits(const struct e2fs *fs, const struct ext2_inode_large *d, size_t off)
{
	uint32_t extra;

	if (off + 4 <= EXT2_GOOD_OLD_INODE_SIZE)
		return true;
	if (fs->isize <= EXT2_GOOD_OLD_INODE_SIZE)
		return false;
	extra = le16toh(d->i_extra_isize);
	if ((extra & 3) || EXT2_GOOD_OLD_INODE_SIZE + extra > fs->isize)
		return false; /* damaged: no extra fields at all */
	/* (a larger i_extra_isize than Linux's 32 covers these fields too) */
	return off + 4 <= EXT2_GOOD_OLD_INODE_SIZE + extra && off + 4 <= fs->icore;
}

static uint32_t get32le(const struct ext2_inode_large *d, size_t off)
{
	uint32_t v;

	memcpy(&v, (const uint8_t *)d + off, 4);
	return le32toh(v);
}

static void put32le(struct ext2_inode_large *d, size_t off, uint32_t v)
{
	v = htole32(v);
	memcpy((uint8_t *)d + off, &v, 4);
}

uint32_t e2_time_gran(const struct e2fs *fs)
{
	return fs->isize >= offsetof(struct ext2_inode_large, i_atime_extra) + 4 ? 1 : 1000000000;
}

/* The coarse clock, as the kernel's current_time(): it moves once a tick,
 * so that a run of writes within a tick changes the inode once, not at
 * every write (each change would be one more inode patch). */
void e2_now_ts(const struct e2fs *fs, struct timespec *ts)
{
	if (fs->opts.clock)
		fs->opts.clock(ts);
	else if (clock_gettime(CLOCK_REALTIME_COARSE, ts) != 0)
		clock_gettime(CLOCK_REALTIME, ts);
}

void e2_iset_time(const struct e2fs *fs, struct ext2_inode_large *d, enum e2_tfield f,
		  const struct timespec *ts)
{
	/* The file system's range and granularity, as the kernel sets
	 * s_time_min, s_time_max and s_time_gran from the inode size. */
	bool fine = e2_time_gran(fs) == 1;
	int64_t max = fine ? E2_TIME_MAX_EXTRA : E2_TIME_MAX, sec = ts->tv_sec;
	uint32_t nsec =
	    fine && ts->tv_nsec > 0 && ts->tv_nsec < 1000000000 ? (uint32_t)ts->tv_nsec : 0;

	if (sec <= E2_TIME_MIN) {
		sec = E2_TIME_MIN;
		nsec = 0;
	} else if (sec >= max) {
		sec = max;
		nsec = 0;
	}
	if (fits(fs, d, tfield[f].extra)) {
		/* low 32 bits as they are; the epoch bits say how many
		 * times 2^32 to add to the signed value read back */
		uint32_t epoch = (uint32_t)((sec - (int32_t)sec) >> 32) & E2_EPOCH_MASK;

		put32le(d, tfield[f].sec, (uint32_t)sec);
		put32le(d, tfield[f].extra, epoch | nsec << 2);
	} else if (fits(fs, d, tfield[f].sec)) {
		/* no extra word in this inode: 1901 to 2038 only */
		if (sec > E2_TIME_MAX)
			sec = E2_TIME_MAX;
		put32le(d, tfield[f].sec, (uint32_t)(int32_t)sec);
	}
}

void e2_iget_time(const struct e2fs *fs, const struct ext2_inode_large *d, enum e2_tfield f,
		  struct timespec *ts)
{
	int64_t sec = 0;
	uint32_t nsec = 0;

	if (fits(fs, d, tfield[f].sec))
		sec = (int32_t)get32le(d, tfield[f].sec);
	if (fits(fs, d, tfield[f].extra)) {
		uint32_t x = get32le(d, tfield[f].extra);

		sec += (int64_t)(x & E2_EPOCH_MASK) << 32;
		nsec = x >> 2;
		if (nsec >= 1000000000)
			nsec = 0; /* damaged: whole seconds are still right */
	}
	ts->tv_sec = (time_t)sec;
	ts->tv_nsec = (long)nsec;
}

/* Return an unlinked inode's blocks and its bitmap bit.  Both wait for the
 * inode clear (links 0, dtime set), which waited for the entry removal. */
int e2_ifree(struct e2fs *fs, struct e2_inode *ip)
{
	mode_t m = e2_imode(ip);
	int r = 0, r2;

	if (ip->freed)
		return 0;
	/* Under a journal, blocks too many to free in one transaction go
	 * first, in steps, the inode on the orphan list meanwhile: a commit
	 * between two steps (e2_jroom) has the removal and the list. */
	if (S_ISREG(m)) {
		r = e2_free_in_steps(fs, ip);
		if (r)
			return r;
	}
	if (ip->orphan) {
		/* Off the orphan list in the transaction that frees it; the
		 * frees wait for that (the list must never name a free inode). */
		struct patch *off = NULL;

		r = e2_orphan_del(fs, ip, &off);
		if (r)
			return r;
		patch_release(fs->c, ip->clear);
		ip->clear = off;
	}
	r = e2_dfree_flush(fs, ip);
	if (r == -ENOMEM)
		return r;
	if (S_ISREG(m) || S_ISDIR(m) || (S_ISLNK(m) && !e2_fast_symlink(fs, &ip->d))) {
		r2 = e2_free_all_blocks(fs, ip, ip->clear);
		if (r2 == -ENOMEM)
			return r2;
		if (!r)
			r = r2;
	}
	r2 = e2_xattr_release(fs, ip, ip->clear);
	if (!r)
		r = r2;
	r2 = e2_ifree_bit(fs, ip->ino, S_ISDIR(m), ip->clear);
	if (!r)
		r = r2;
	ip->freed = true;
	ip->linkable = false;
	e2_dindex_free(ip->dix);
	ip->dix = NULL;
	return r;
}

/* An unlinked inode goes once nothing can reach it: no open and no lookup
 * reference.  The kernel reopens an inode it holds through
 * /proc/PID/fd/N (an O_PATH descriptor, a descriptor of another process)
 * with no name left, as Linux's own ext2 allows until the inode's last
 * iput, which is what FORGET reports. */
int e2_iunref(struct e2fs *fs, struct e2_inode *ip)
{
	if (!ip->unlinked || ip->freed || ip->nopen || ip->nlookup || e2_ilinks(&ip->d) || fs->ro)
		return 0;
	if (!ip->d.i_mode)
		return 0;
	return e2_ifree(fs, ip);
}

static void idrop(struct e2fs *fs, struct e2_inode **pp)
{
	struct e2_inode *ip = *pp;

	*pp = ip->hnext;
	irelease(fs, ip);
	free(ip);
	fs->icount--;
}

/* Forget unreferenced inodes when the cache grows large.  Never drops an
 * inode that still has to be freed later (an unlinked one in use). */
void e2_icache_trim(struct e2fs *fs)
{
	if (fs->icount < ICACHE_MAX || fs->icount < fs->itrim_at)
		return;
	for (size_t i = 0; i < fs->ibuckets; i++) {
		struct e2_inode **pp = &fs->itab[i];

		while (*pp) {
			struct e2_inode *ip = *pp;

			e2_init_prune(fs, ip);
			(void)e2_gate_get(fs, ip); /* drops one whose entry is on disk */
			e2_patch_drop_committed(fs, &ip->clear);
			e2_patch_drop_committed(fs, &ip->rmset);
			e2_patch_drop_committed(fs, &ip->size_p);
			if (ip->ndfree)
				e2_dfree_flush(fs, ip);
			/* An inode whose initialisation is still pending must
			 * stay: a new entry for it has to wait for that patch. */
			if (!ip->nlookup && !ip->nopen && ip->ino != E2_ROOT_INO && !ip->init &&
			    !ip->clear && !ip->rmset && !ip->size_p && (ip->freed || !ip->unlinked))
				idrop(fs, pp);
			else
				pp = &ip->hnext;
		}
	}
	/* Referenced inodes stay; do not sweep again until the cache has
	 * doubled, so the sweep costs O(1) per operation amortised. */
	fs->itrim_at = fs->icount * 2;
}

void e2_icache_destroy(struct e2fs *fs)
{
	if (!fs->itab)
		return;
	for (size_t i = 0; i < fs->ibuckets; i++)
		while (fs->itab[i])
			idrop(fs, &fs->itab[i]);
	free(fs->itab);
	fs->itab = NULL;
}
