/* Bad images: the ext2 module must answer every call on a corrupt image
 * with success or a clean -errno (open refused, or -EIO for that one
 * operation), and never crash, hang or read out of bounds (run it under
 * `make asan`).  Images come from mke2fs -d (content the library did not
 * write), corrupted at targeted fields and at seeded random bytes of the
 * metadata.  Images with features the module does not implement must be
 * refused with -EOPNOTSUPP and an error text that names the feature.
 *
 * Environment: E2_CORRUPT_SEED, E2_CORRUPT_RANDOM (random images).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
#include <cmocka.h>

#include "bdev/bdev.h"
#include "engine/cache.h"
#include "ext2/e2.h"
#include "e2test_util.h"

#define BS	 1024
#define IMG_KIB	 2048
#define READ_CAP (1024 * 1024)

static uint8_t *g_img, *g_img4k; /* the same tree with 1 KiB and 4 KiB blocks */
static size_t g_len, g_len4k;
static char g_label[160];  /* the image being exercised, for the hang report */
static unsigned g_badname; /* readdir names with NUL or '/' */
static char g_badname_label[160];

/* ---- raw layout of the base image (parsed here, not by the library) ---- */

static uint32_t get32(const uint8_t *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

struct layout {
	uint32_t bs, nblocks, ipg, isz, first_data, gdt;
	uint32_t block_bitmap, inode_bitmap, inode_table;
};

static struct layout L;

/* What the targeted corruptions aim at. */
enum target {
	T_SB,
	T_GD,
	T_ROOT,
	T_F12K,
	T_F300K,
	T_BIG,
	T_SLOW,
	T_FAST,
	T_SPARSE,
	T_DEEP,
	T_ROOTDIR_BLK,
	T_BIGDIR_BLK,
	T_BIGDIR_BLK2,
	T_IND_BLK,
	T_DIND_BLK,
	T_DIND_IND_BLK,
	T_BLOCK_BITMAP,
	T_INODE_BITMAP,
	NTARGETS
};

static uint64_t tgt_off[NTARGETS]; /* byte offset in the image */

static uint64_t inode_off(uint32_t ino)
{
	/* one group in these images */
	return (uint64_t)L.inode_table * L.bs + (uint64_t)(ino - 1) * L.isz;
}

static uint32_t inode_block(uint32_t ino, int i)
{
	return get32(g_img + inode_off(ino) + 40 + 4 * i);
}

/* Look a name up in a directory's direct blocks. */
static uint32_t raw_lookup(uint32_t dir, const char *name)
{
	size_t nl = strlen(name);

	for (int b = 0; b < 12; b++) {
		uint32_t blk = inode_block(dir, b);
		const uint8_t *p;
		uint32_t off = 0;

		if (!blk)
			break;
		p = g_img + (uint64_t)blk * L.bs;
		while (off + 8 <= L.bs) {
			uint16_t rl = get16(p + off + 4);

			if (get32(p + off) && p[off + 6] == nl && !memcmp(p + off + 8, name, nl))
				return get32(p + off);
			if (rl < 8)
				break;
			off += rl;
		}
	}
	return 0;
}

static void parse_layout(void)
{
	const uint8_t *sb = g_img + 1024, *gd;
	uint32_t ino;

	L.bs = 1024u << get32(sb + 24);
	L.nblocks = get32(sb + 4);
	L.ipg = get32(sb + 40);
	L.isz = get16(sb + 88);
	L.first_data = get32(sb + 20);
	L.gdt = L.first_data + 1;
	gd = g_img + (uint64_t)L.gdt * L.bs;
	L.block_bitmap = get32(gd);
	L.inode_bitmap = get32(gd + 4);
	L.inode_table = get32(gd + 8);
	assert_int_equal(L.bs, BS);

	tgt_off[T_SB] = 1024;
	tgt_off[T_GD] = (uint64_t)L.gdt * L.bs;
	tgt_off[T_ROOT] = inode_off(2);
#define INO(t, name)                                                                               \
	do {                                                                                       \
		ino = raw_lookup(2, name);                                                         \
		assert_int_not_equal(ino, 0);                                                      \
		tgt_off[t] = inode_off(ino);                                                       \
	} while (0)
	INO(T_F12K, "f12k");
	INO(T_F300K, "f300k");
	INO(T_BIG, "big");
	INO(T_SLOW, "slow");
	INO(T_FAST, "fast");
	INO(T_SPARSE, "sparse");
	INO(T_DEEP, "deep");
#undef INO
	tgt_off[T_ROOTDIR_BLK] = (uint64_t)inode_block(2, 0) * L.bs;
	ino = raw_lookup(2, "big");
	tgt_off[T_BIGDIR_BLK] = (uint64_t)inode_block(ino, 0) * L.bs;
	tgt_off[T_BIGDIR_BLK2] = (uint64_t)inode_block(ino, 2) * L.bs;
	ino = raw_lookup(2, "f300k");
	tgt_off[T_IND_BLK] = (uint64_t)inode_block(ino, 12) * L.bs;
	tgt_off[T_DIND_BLK] = (uint64_t)inode_block(ino, 13) * L.bs;
	tgt_off[T_DIND_IND_BLK] = (uint64_t)get32(g_img + tgt_off[T_DIND_BLK]) * L.bs;
	tgt_off[T_BLOCK_BITMAP] = (uint64_t)L.block_bitmap * L.bs;
	tgt_off[T_INODE_BITMAP] = (uint64_t)L.inode_bitmap * L.bs;
	for (int t = 0; t < NTARGETS; t++)
		assert_true(tgt_off[t] > 0 && tgt_off[t] + 4 <= g_len);
}

/* ---- exercising an image ----------------------------------------------- */

struct stats {
	unsigned images, refused, opened, eio, other_err, ops;
};

static struct stats g_st;

/* Every return value must be success or a clean -errno; -ENOSYS means the
 * call is not implemented, which is never acceptable here. */
static long chk(const char *what, long r)
{
	g_st.ops++;
	if (r < -4095 || r == -ENOSYS)
		fail_msg("%s: %s returned %ld", g_label, what, r);
	if (r == -EIO)
		g_st.eio++;
	else if (r < 0)
		g_st.other_err++;
	return r;
}

struct ents {
	char *name[512];
	uint32_t ino[512];
	size_t n;
};

static int collect(const struct e2_dirent *d, void *arg)
{
	struct ents *e = arg;

	if (d->name_len > 255)
		fail_msg("%s: readdir gave a name of %zu bytes", g_label, d->name_len);
	/* Such a name can be neither looked up nor passed to the kernel
	 * (FUSE fails the whole readdir with EIO): the entry is corrupt.
	 * Counted, and reported at the end, so that the rest still runs. */
	if (memchr(d->name, 0, d->name_len) || memchr(d->name, '/', d->name_len)) {
		if (!g_badname++)
			snprintf(g_badname_label, sizeof(g_badname_label), "%s", g_label);
	}
	if (e->n >= 512)
		return 1;
	e->name[e->n] = strndup(d->name, d->name_len);
	e->ino[e->n] = d->ino;
	e->n++;
	return 0;
}

struct walkstat {
	unsigned files, dirs, links, budget;
	size_t bytes;
};

static void read_file(struct e2fs *fs, uint32_t ino, const struct stat *st, struct walkstat *ws)
{
	static uint8_t buf[65536];
	off_t off = 0;

	while (off < st->st_size && off < READ_CAP) {
		ssize_t n = chk("read", e2_read(fs, ino, buf, sizeof(buf), off));

		if (n <= 0)
			break;
		if ((size_t)n > sizeof(buf))
			fail_msg("%s: read returned %zd for %zu bytes", g_label, n, sizeof(buf));
		ws->bytes += n;
		off += n;
	}
	/* and near the claimed end, and far beyond anything */
	if (st->st_size > 16)
		chk("read at end", e2_read(fs, ino, buf, 4096, st->st_size - 16));
	chk("read far", e2_read(fs, ino, buf, 4096, (off_t)1 << 40));
}

static void walk(struct e2fs *fs, uint32_t dir, int depth, struct walkstat *ws)
{
	struct ents e = {.n = 0};

	if (depth > 8 || ws->budget == 0)
		return;
	ws->budget--;
	ws->dirs++;
	chk("readdir", e2_readdir(fs, dir, 0, collect, &e));
	for (size_t i = 0; i < e.n; i++) {
		struct stat st;
		char buf[4200];

		if (!strcmp(e.name[i], ".") || !strcmp(e.name[i], ".."))
			goto next;
		if (ws->budget == 0)
			goto next;
		ws->budget--;
		chk("getattr(dirent)", e2_getattr(fs, e.ino[i], &st));
		if (chk("lookup", e2_lookup(fs, dir, e.name[i], &st)))
			goto next;
		chk("forget", e2_forget(fs, st.st_ino, 1));
		if (S_ISDIR(st.st_mode)) {
			walk(fs, st.st_ino, depth + 1, ws);
		} else if (S_ISREG(st.st_mode)) {
			ws->files++;
			read_file(fs, st.st_ino, &st, ws);
		} else if (S_ISLNK(st.st_mode)) {
			long n = chk("readlink", e2_readlink(fs, st.st_ino, buf, sizeof(buf)));

			ws->links++;
			if (n > (long)sizeof(buf))
				fail_msg("%s: readlink returned %ld", g_label, n);
		}
	next:
		free(e.name[i]);
	}
}

/* Some writes on top: they may fail cleanly, but must not crash. */
static void scribble(struct e2fs *fs)
{
	static uint8_t data[20000];
	struct stat st, a = {0};
	struct statvfs sv;

	memset(data, 0x5a, sizeof(data));
	chk("statfs", e2_statfs(fs, &sv));
	if (!chk("mknod",
		 e2_mknod(fs, NULL, E2_ROOT_INO, "newfile", S_IFREG | 0644, 0, 0, 0, &st))) {
		chk("forget", e2_forget(fs, st.st_ino, 1));
		chk("write new", e2_write(fs, NULL, st.st_ino, data, sizeof(data), 0));
		chk("write new far", e2_write(fs, NULL, st.st_ino, data, 100, 300000));
	}
	if (!chk("lookup f12k", e2_lookup(fs, E2_ROOT_INO, "f12k", &st))) {
		chk("forget", e2_forget(fs, st.st_ino, 1));
		chk("write f12k", e2_write(fs, NULL, st.st_ino, data, 3000, 11000));
		a.st_size = 5;
		chk("truncate f12k", e2_setattr(fs, NULL, st.st_ino, &a, E2_SET_SIZE, &st));
	}
	if (!chk("lookup f300k", e2_lookup(fs, E2_ROOT_INO, "f300k", &st))) {
		chk("forget", e2_forget(fs, st.st_ino, 1));
		a.st_size = 20000;
		chk("truncate f300k", e2_setattr(fs, NULL, st.st_ino, &a, E2_SET_SIZE, &st));
	}
	if (!chk("mkdir", e2_mkdir(fs, NULL, E2_ROOT_INO, "newdir", 0755, 0, 0, &st)))
		chk("forget", e2_forget(fs, st.st_ino, 1));
	chk("rename", e2_rename(fs, NULL, E2_ROOT_INO, "a", E2_ROOT_INO, "a2", 0));
	chk("rename over", e2_rename(fs, NULL, E2_ROOT_INO, "empty", E2_ROOT_INO, "sparse", 0));
	chk("unlink", e2_unlink(fs, NULL, E2_ROOT_INO, "hard"));
	chk("unlink big entry",
	    e2_unlink(fs, NULL, raw_lookup(2, "big"), "entry-with-a-longish-name-007"));
	chk("rmdir", e2_rmdir(fs, NULL, E2_ROOT_INO, "deep"));
	if (!chk("symlink", e2_symlink(fs, NULL, E2_ROOT_INO, "newlink", "somewhere/else/entirely",
				       0, 0, &st)))
		chk("forget", e2_forget(fs, st.st_ino, 1));
	chk("sync", e2_sync(fs));
}

/* A hang is found by the CPU time an image takes (30 s), not by the clock,
 * so that a loaded machine cannot make a slow but finishing run look like
 * a hang; a generous wall-clock limit (10 min) still catches a hang that
 * sleeps. */
#define HANG_CPU_S  30
#define HANG_WALL_S 600

static void on_alarm(int sig)
{
	static const char msg[] = "# hang: no answer within 30 s of CPU time (or 10 min) on image ";
	ssize_t r;

	r = write(1, msg, sizeof(msg) - 1);
	r = write(1, g_label, strlen(g_label));
	r = write(1, "\n", 1);
	(void)r;
	_exit(3);
}

/* Start (on) or stop both hang timers. */
static void hang_watch(bool on)
{
	struct itimerval cpu = {.it_value = {.tv_sec = on ? HANG_CPU_S : 0}};

	setitimer(ITIMER_PROF, &cpu, NULL);
	alarm(on ? HANG_WALL_S : 0);
}

/* Open a copy of img and exercise it.  Returns the open result. */
static int exercise(const uint8_t *img, size_t len, bool writes, struct walkstat *ws)
{
	struct e2_opts o = {.no_flusher = true};
	struct bdev *mem;
	struct e2fs *fs;
	int ret;

	memset(ws, 0, sizeof(*ws));
	ws->budget = 3000;
	g_st.images++;
	hang_watch(true);
	assert_int_equal(bdev_mem_create(BS, 0, img, len, &mem), 0);
	ret = (int)chk("open", e2_open_bdev(mem, &o, &fs));
	if (ret) {
		g_st.refused++;
		if (!e2_open_error() || !e2_open_error()[0])
			fail_msg("%s: open refused (%d) without an error text", g_label, ret);
		hang_watch(false);
		return ret;
	}
	g_st.opened++;
	walk(fs, E2_ROOT_INO, 0, ws);
	if (writes)
		scribble(fs);
	chk("close", e2_close(fs));
	hang_watch(false);
	return 0;
}

/* ---- targeted corruptions ----------------------------------------------- */

enum how { SET8, SET16, SET32, OR32, FILL, SELF_LOOP };

struct corruption {
	const char *name;
	enum target t;
	uint32_t off;
	enum how how;
	uint32_t val;
	int refuse; /* 1: open must fail; -EOPNOTSUPP: must fail with that */
};

static const struct corruption targeted[] = {
    /* superblock */
    {"sb magic", T_SB, 56, SET16, 0x1234, 1},
    {"sb log_block_size 30", T_SB, 24, SET32, 30, 1},
    {"sb log_block_size 7", T_SB, 24, SET32, 7, 1},
    {"sb blocks_per_group 0", T_SB, 32, SET32, 0, 1},
    {"sb inodes_per_group 0", T_SB, 40, SET32, 0, 1},
    {"sb inodes_per_group huge", T_SB, 40, SET32, 0xffffffffu, 1},
    {"sb blocks_count beyond device", T_SB, 4, SET32, 0x7fffffff, 1},
    {"sb blocks_count tiny", T_SB, 4, SET32, 10, 0},
    {"sb inodes_count 1", T_SB, 0, SET32, 1, 0},
    {"sb first_data_block 5000", T_SB, 20, SET32, 5000, 1},
    {"sb rev_level 7", T_SB, 76, SET32, 7, 1},
    {"sb inode_size 3", T_SB, 88, SET16, 3, 1},
    {"sb inode_size 100", T_SB, 88, SET16, 100, 1},
    {"sb inode_size 4096", T_SB, 88, SET16, 4096, 1},
    {"sb first_ino 0", T_SB, 84, SET32, 0, 0},
    {"sb first_ino huge", T_SB, 84, SET32, 0xffffffffu, 0},
    {"sb unknown incompat feature", T_SB, 96, OR32, 0x80000000u, -EOPNOTSUPP},
    {"sb free_blocks_count huge", T_SB, 12, SET32, 0xffffffffu, 0},
    {"sb free_inodes_count huge", T_SB, 16, SET32, 0xffffffffu, 0},
    /* group descriptor */
    {"gd block_bitmap 0", T_GD, 0, SET32, 0, 1},
    {"gd block_bitmap beyond", T_GD, 0, SET32, 0x7fffffff, 1},
    {"gd inode_bitmap beyond", T_GD, 4, SET32, 0x7fffffff, 1},
    {"gd inode_table beyond", T_GD, 8, SET32, 0x7fffffff, 1},
    {"gd inode_table at the end", T_GD, 8, SET32, IMG_KIB - 2, 1},
    {"gd block_bitmap = superblock", T_GD, 0, SET32, 1, 0},
    {"gd free counts huge", T_GD, 12, SET32, 0xffffffffu, 0},
    /* inodes */
    {"root mode 0", T_ROOT, 0, SET16, 0, 0},
    {"root is a regular file", T_ROOT, 0, SET16, S_IFREG | 0755, 0},
    {"root size 0", T_ROOT, 4, SET32, 0, 0},
    {"root block 0 beyond", T_ROOT, 40, SET32, 0x7fffffff, 0},
    {"root links 0", T_ROOT, 26, SET16, 0, 0},
    {"f12k block 3 beyond", T_F12K, 40 + 12, SET32, 0x7fffffff, 0},
    {"f12k block 3 = superblock", T_F12K, 40 + 12, SET32, 1, 0},
    {"f12k block 0 = 0xffffffff", T_F12K, 40, SET32, 0xffffffffu, 0},
    {"f12k size huge", T_F12K, 4, SET32, 0xffffffffu, 0},
    {"f12k size_high huge", T_F12K, 108, SET32, 0xffffffffu, 0},
    {"f12k links 0", T_F12K, 26, SET16, 0, 0},
    {"f12k extents flag", T_F12K, 32, OR32, 0x80000, 0},
    {"f12k type bogus", T_F12K, 0, SET16, 0xf1a4, 0},
    {"f12k is a directory", T_F12K, 0, SET16, S_IFDIR | 0755, 0},
    {"f300k indirect beyond", T_F300K, 40 + 48, SET32, 0x7fffffff, 0},
    {"f300k indirect = inode table", T_F300K, 40 + 48, SET32, 0, 0}, /* patched below */
    {"f300k double indirect beyond", T_F300K, 40 + 52, SET32, 0x7fffffff, 0},
    {"f300k triple indirect beyond", T_F300K, 40 + 56, SET32, 0x7fffffff, 0},
    {"f300k size_high", T_F300K, 108, SET32, 1, 0},
    {"big dir size 13", T_BIG, 4, SET32, 13, 0},
    {"big dir size huge", T_BIG, 4, SET32, 0x7ffffc00, 0},
    {"big dir block 1 beyond", T_BIG, 44, SET32, 0x7fffffff, 0},
    {"big dir block 1 hole", T_BIG, 44, SET32, 0, 0},
    {"big dir index flag", T_BIG, 32, OR32, 0x1000, 0},
    {"big is a regular file", T_BIG, 0, SET16, S_IFREG | 0644, 0},
    {"slow symlink size 5000", T_SLOW, 4, SET32, 5000, 0},
    {"slow symlink size 0", T_SLOW, 4, SET32, 0, 0},
    {"slow symlink block beyond", T_SLOW, 40, SET32, 0x7fffffff, 0},
    {"fast symlink size 200", T_FAST, 4, SET32, 200, 0},
    {"fast symlink size 59 garbage", T_FAST, 4, SET32, 59, 0},
    {"sparse size_high", T_SPARSE, 108, SET32, 0x10, 0},
    {"deep dir links 1", T_DEEP, 26, SET16, 1, 0},
    /* directory blocks */
    {"root dir rec_len 0", T_ROOTDIR_BLK, 4, SET16, 0, 0},
    {"root dir rec_len 3", T_ROOTDIR_BLK, 4, SET16, 3, 0},
    {"root dir rec_len past block", T_ROOTDIR_BLK, 4, SET16, 2000, 0},
    {"root dir name_len past rec_len", T_ROOTDIR_BLK, 6, SET8, 200, 0},
    {"root dir '.' inode 0", T_ROOTDIR_BLK, 0, SET32, 0, 0},
    {"root dir '..' inode huge", T_ROOTDIR_BLK, 12, SET32, 0x7fffffff, 0},
    {"root dir third entry inode 1", T_ROOTDIR_BLK, 24, SET32, 1, 0},
    {"root dir third entry inode huge", T_ROOTDIR_BLK, 24, SET32, 0xffffffffu, 0},
    {"root dir third entry rec_len 0", T_ROOTDIR_BLK, 28, SET16, 0, 0},
    {"root dir third entry type 7", T_ROOTDIR_BLK, 31, SET8, 7, 0},
    {"root dir second rec_len to block end", T_ROOTDIR_BLK, 16, SET16, 1012, 0},
    {"root dir all 0xff", T_ROOTDIR_BLK, 0, FILL, 0xff, 0},
    {"root dir all zero", T_ROOTDIR_BLK, 0, FILL, 0, 0},
    {"big dir rec_len 4", T_BIGDIR_BLK, 4, SET16, 4, 0},
    {"big dir rec_len odd", T_BIGDIR_BLK, 4, SET16, 13, 0},
    {"big dir block 2 garbage", T_BIGDIR_BLK2, 0, FILL, 0xa5, 0},
    {"big dir block 2 first rec_len 1024 name_len 255", T_BIGDIR_BLK2, 6, SET8, 255, 0},
    /* indirect blocks */
    {"indirect entries beyond", T_IND_BLK, 0, FILL, 0x7f, 0},
    {"indirect first entry beyond", T_IND_BLK, 0, SET32, 0x7fffffff, 0},
    {"indirect points at itself", T_IND_BLK, 0, SELF_LOOP, 0, 0},
    {"double indirect points at itself", T_DIND_BLK, 0, SELF_LOOP, 0, 0},
    {"double indirect all 0xff", T_DIND_BLK, 0, FILL, 0xff, 0},
    {"double indirect's indirect loops", T_DIND_IND_BLK, 0, SELF_LOOP, 0, 0},
    /* bitmaps: wrong but well-formed; writes must still end cleanly */
    {"block bitmap all free", T_BLOCK_BITMAP, 0, FILL, 0, 0},
    {"block bitmap all used", T_BLOCK_BITMAP, 0, FILL, 0xff, 0},
    {"inode bitmap all free", T_INODE_BITMAP, 0, FILL, 0, 0},
    {"inode bitmap all used", T_INODE_BITMAP, 0, FILL, 0xff, 0},
};

static void apply(uint8_t *img, const struct corruption *c)
{
	uint8_t *p = img + tgt_off[c->t] + c->off;

	switch (c->how) {
	case SET8:
		*p = (uint8_t)c->val;
		break;
	case SET16:
		put16(p, (uint16_t)c->val);
		break;
	case SET32:
		put32(p, c->val);
		break;
	case OR32:
		put32(p, get32(p) | c->val);
		break;
	case FILL:
		memset(img + tgt_off[c->t], (int)c->val, L.bs);
		break;
	case SELF_LOOP:
		/* every entry points at the block itself */
		for (uint32_t i = 0; i < L.bs / 4; i++)
			put32(img + tgt_off[c->t] + 4 * i, (uint32_t)(tgt_off[c->t] / L.bs));
		break;
	}
	if (!strcmp(c->name, "f300k indirect = inode table"))
		put32(p, L.inode_table);
}

static void test_corrupt_baseline(void **state)
{
	struct walkstat ws;
	int ret;

	snprintf(g_label, sizeof(g_label), "uncorrupted image");
	ret = exercise(g_img, g_len, false, &ws);
	if (ret)
		fail_msg("the uncorrupted image does not open: %d (%s)", ret, e2_open_error());
	print_message("# baseline: %u files, %u dirs, %u symlinks, %zu bytes read\n", ws.files,
		      ws.dirs, ws.links, ws.bytes);
	/* a, f12k, f300k, sparse, empty, hard, deep/.../file and the 150
	 * entries of big (symlinks: fast, slow) */
	assert_int_equal(ws.files, 157);
	assert_int_equal(ws.links, 2);
	assert_int_equal(ws.bytes, 100 + 13000 + 300000 + 400000 + 0 + 100 + 6);
	ret = exercise(g_img, g_len, true, &ws);
	assert_int_equal(ret, 0);
}

static void test_corrupt_targeted(void **state)
{
	size_t n = sizeof(targeted) / sizeof(targeted[0]);
	uint8_t *img = malloc(g_len);
	unsigned refused = 0;

	assert_non_null(img);
	for (size_t i = 0; i < n; i++) {
		const struct corruption *c = &targeted[i];
		struct walkstat ws;
		int ret;

		for (int writes = 0; writes < 2; writes++) {
			memcpy(img, g_img, g_len);
			apply(img, c);
			snprintf(g_label, sizeof(g_label), "targeted '%s'%s", c->name,
				 writes ? " with writes" : "");
			ret = exercise(img, g_len, writes, &ws);
			if (c->refuse == 1 && ret == 0)
				fail_msg("%s: a corrupt superblock or group table was accepted",
					 g_label);
			if (c->refuse < 0 && ret != c->refuse)
				fail_msg("%s: open returned %d, expected %d", g_label, ret,
					 c->refuse);
			refused += writes == 0 && ret != 0;
		}
		print_message("# %-45s open %s\n", c->name, ret ? e2_open_error() : "accepted");
	}
	print_message("# %zu targeted corruptions (each read only and with writes), "
		      "%u refused at open\n",
		      n, refused);
	free(img);
}

/* Blocks holding metadata: where random damage matters. */
static size_t metadata_blocks(uint32_t *out, size_t max)
{
	size_t n = 0;

	out[n++] = 1;
	out[n++] = L.gdt;
	out[n++] = L.block_bitmap;
	out[n++] = L.inode_bitmap;
	/* the inode-table blocks holding the inodes in use */
	for (uint32_t b = 0; b < 48 && n < max; b++)
		out[n++] = L.inode_table + b;
	for (int t = T_ROOTDIR_BLK; t <= T_DIND_IND_BLK && n < max; t++)
		out[n++] = (uint32_t)(tgt_off[t] / L.bs);
	return n;
}

static void test_corrupt_random(void **state)
{
	uint64_t seed = e2t_seed("E2_CORRUPT_SEED", 1);
	long count = e2t_env_long("E2_CORRUPT_RANDOM", 300);
	uint8_t *img = malloc(g_len);
	uint32_t blocks[64];
	size_t nb = metadata_blocks(blocks, 64);
	struct e2t_rng rng;
	unsigned opened0 = g_st.opened, images0 = g_st.images;

	assert_non_null(img);
	e2t_rng_seed(&rng, seed);
	for (long i = 0; i < count; i++) {
		struct walkstat ws;
		unsigned nflip = 1 + (unsigned)e2t_rng_below(&rng, 12);

		memcpy(img, g_img, g_len);
		for (unsigned k = 0; k < nflip; k++) {
			uint32_t b = blocks[e2t_rng_below(&rng, nb)];
			uint32_t off = (uint32_t)e2t_rng_below(&rng, L.bs);
			uint8_t *p = img + (uint64_t)b * L.bs + off;

			/* now a random byte, now a single bit, now a
			 * plausible-looking small number */
			switch (e2t_rng_below(&rng, 3)) {
			case 0:
				*p = (uint8_t)e2t_rng_next(&rng);
				break;
			case 1:
				*p ^= (uint8_t)(1u << e2t_rng_below(&rng, 8));
				break;
			default:
				if (off + 4 <= L.bs)
					put32(p, (uint32_t)e2t_rng_below(&rng, 4096));
			}
		}
		snprintf(g_label, sizeof(g_label), "random image %ld (seed %llu, %u changes)", i,
			 (unsigned long long)seed, nflip);
		exercise(img, g_len, i % 2, &ws);
	}
	print_message("# %u random images (seed %llu): %u opened, %u refused; "
		      "%u calls so far, %u EIO, %u other errors\n",
		      g_st.images - images0, (unsigned long long)seed, g_st.opened - opened0,
		      (g_st.images - images0) - (g_st.opened - opened0), g_st.ops, g_st.eio,
		      g_st.other_err);
	/* Most damage leaves the superblock alone: if nearly nothing opens,
	 * the walk above tested nothing. */
	if (g_st.opened - opened0 < (unsigned)count / 4)
		fail_msg("only %u of %ld random images opened", g_st.opened - opened0, count);
	if (g_badname)
		fail_msg("readdir returned %u names containing NUL or '/', first on %s", g_badname,
			 g_badname_label);
	free(img);
}

/* The same kind of damage on the 4 KiB-block image, anywhere in its first
 * 64 blocks (superblock, group table, bitmaps, inode table, directories
 * and the first indirect blocks). */
static void test_corrupt_random_4k(void **state)
{
	uint64_t seed = e2t_seed("E2_CORRUPT_SEED", 1) + 4096;
	long count = e2t_env_long("E2_CORRUPT_RANDOM", 300) / 2;
	uint8_t *img = malloc(g_len4k);
	unsigned opened0 = g_st.opened, images0 = g_st.images;
	struct walkstat ws;
	struct e2t_rng rng;

	assert_non_null(img);
	/* the undamaged image works, or this proves nothing */
	snprintf(g_label, sizeof(g_label), "uncorrupted 4 KiB image");
	if (exercise(g_img4k, g_len4k, false, &ws))
		fail_msg("the uncorrupted 4 KiB image does not open: %s", e2_open_error());
	assert_int_equal(ws.files, 157);
	e2t_rng_seed(&rng, seed);
	for (long i = 0; i < count; i++) {
		unsigned nflip = 1 + (unsigned)e2t_rng_below(&rng, 12);

		memcpy(img, g_img4k, g_len4k);
		for (unsigned k = 0; k < nflip; k++) {
			size_t off = 1024 + e2t_rng_below(&rng, 64 * 4096 - 1024 - 4);

			if (e2t_rng_below(&rng, 2))
				img[off] = (uint8_t)e2t_rng_next(&rng);
			else
				put32(img + off, (uint32_t)e2t_rng_below(&rng, 4096));
		}
		snprintf(g_label, sizeof(g_label), "random 4 KiB image %ld (seed %llu, %u changes)",
			 i, (unsigned long long)seed, nflip);
		exercise(img, g_len4k, i % 2, &ws);
	}
	print_message("# %u random 4 KiB-block images (seed %llu): %u opened\n",
		      g_st.images - images0 - 1, (unsigned long long)seed,
		      g_st.opened - opened0 - 1);
	if (g_st.opened - opened0 - 1 < (unsigned)count / 4)
		fail_msg("only %u of %ld random 4 KiB images opened", g_st.opened - opened0 - 1,
			 count);
	free(img);
}

/* ---- unsupported features ----------------------------------------------- */

struct feature_case {
	const char *mkfs;     /* extra mke2fs options */
	const char *names[3]; /* the error text must name one of these */
};

static const struct feature_case features[] = {
    {"-t ext4", {"extent", "flex_bg", "64bit"}},
    {"-O extents", {"extent", NULL, NULL}},
    {"-O 64bit,extents", {"64bit", "extent", NULL}},
    {"-O metadata_csum", {"metadata_csum", NULL, NULL}},
    {"-O flex_bg", {"flex_bg", NULL, NULL}},
};

static void test_unsupported_features(void **state)
{
	for (size_t i = 0; i < sizeof(features) / sizeof(features[0]); i++) {
		const struct feature_case *f = &features[i];
		struct e2_opts o = {.no_flusher = true};
		struct bdev *mem;
		struct e2fs *fs;
		const char *msg;
		void *img;
		size_t len;
		bool named = false;
		int ret;

		ret = e2t_mkfs_mem(4096, BS, f->mkfs, &img, &len);
		assert_int_equal(ret, 0);
		assert_int_equal(bdev_mem_create(BS, 0, img, len, &mem), 0);
		ret = e2_open_bdev(mem, &o, &fs);
		if (ret == 0) {
			e2_close(fs);
			fail_msg("mke2fs %s: image accepted", f->mkfs);
		}
		msg = e2_open_error();
		for (int k = 0; k < 3 && f->names[k]; k++)
			named |= msg && strstr(msg, f->names[k]) != NULL;
		print_message("# mke2fs %-18s -> %d: %s\n", f->mkfs, ret, msg ? msg : "(null)");
		if (ret != -EOPNOTSUPP)
			fail_msg("mke2fs %s: open returned %d, expected -EOPNOTSUPP", f->mkfs, ret);
		if (!named)
			fail_msg("mke2fs %s: error text '%s' names none of the features", f->mkfs,
				 msg ? msg : "");
		free(img);
	}
}

/* One feature flag at a time, set by hand in a plain ext2 image (mke2fs
 * will not make 64bit without extents). */
static void test_unsupported_feature_bits(void **state)
{
	static const struct {
		const char *name;
		uint32_t off, bit;
	} bits[] = {
	    {"extent", 96, 0x40},
	    {"64bit", 96, 0x80},
	    {"flex_bg", 96, 0x200},
	    {"metadata_csum", 100, 0x400},
	};

	for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++) {
		struct e2_opts o = {.no_flusher = true};
		uint8_t *img = malloc(g_len);
		struct bdev *mem;
		struct e2fs *fs;
		const char *msg;
		int ret;

		assert_non_null(img);
		memcpy(img, g_img, g_len);
		put32(img + 1024 + bits[i].off, get32(img + 1024 + bits[i].off) | bits[i].bit);
		assert_int_equal(bdev_mem_create(BS, 0, img, g_len, &mem), 0);
		ret = e2_open_bdev(mem, &o, &fs);
		msg = e2_open_error();
		print_message("# feature bit %-14s -> %d: %s\n", bits[i].name, ret,
			      msg ? msg : "(null)");
		if (ret == 0) {
			e2_close(fs);
			fail_msg("feature %s: image accepted", bits[i].name);
		}
		if (ret != -EOPNOTSUPP)
			fail_msg("feature %s: open returned %d, expected -EOPNOTSUPP", bits[i].name,
				 ret);
		if (!msg || !strstr(msg, bits[i].name))
			fail_msg("feature %s: error text '%s' does not name it", bits[i].name,
				 msg ? msg : "");
		free(img);
	}
}

/* ---- ext3 journals ---------------------------------------------------------- */

/* An image with a journal (1 KiB blocks), and where its journal
 * superblock is (byte offset in the image). */
static uint8_t *journal_image(size_t *len, size_t *jsb)
{
	uint8_t *img, *ino;
	uint32_t itable, isize;
	int ret;

	ret = e2t_mkfs_mem(4096, BS, "-O has_journal", (void **)&img, len);
	assert_int_equal(ret, 0);
	itable = get32(img + 2 * BS + 8); /* group 0's bg_inode_table */
	isize = get16(img + 1024 + 88);
	ino = img + (size_t)itable * BS + 7 * isize; /* inode 8 */
	*jsb = (size_t)get32(ino + 40) * BS;	     /* i_block[0] */
	assert_true(*jsb > 0 && *jsb < *len);
	assert_int_equal(get32(img + *jsb), 0x98393bc0u); /* JBD2 magic, big-endian */
	return img;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static int open_img(const uint8_t *img, size_t len, bool ro, struct e2fs **fs, struct bdev **mem)
{
	struct e2_opts o = {.no_flusher = true, .readonly = ro};

	assert_int_equal(bdev_mem_create(BS, 0, img, len, mem), 0);
	return e2_open_bdev(*mem, &o, fs);
}

/* A journal that needs recovery cannot be ignored: a read-only open is
 * refused, a read-write open replays it and clears the mark. */
static void test_journal_needs_recovery(void **state)
{
	struct bdev *mem;
	struct e2fs *fs;
	uint8_t *img;
	size_t len, jsb;
	int ret;

	(void)state;
	img = journal_image(&len, &jsb);
	put32(img + 1024 + 96, get32(img + 1024 + 96) | 0x4); /* needs_recovery */
	ret = open_img(img, len, true, &fs, &mem);
	print_message("# read-only, journal needing recovery -> %d: %s\n", ret, e2_open_error());
	if (ret == 0) {
		e2_close(fs);
		fail_msg("a read-only open ignored a journal that needs recovery");
	}
	assert_int_equal(ret, -EROFS);
	assert_non_null(strstr(e2_open_error(), "needs recovery"));
	ret = open_img(img, len, false, &fs, &mem);
	assert_int_equal(ret, 0);
	assert_true(e2_recovery(fs)->replayed);
	assert_int_equal(e2_recovery(fs)->transactions, 0);
	/* cleared on disk before the open went on */
	assert_int_equal(get32((uint8_t *)bdev_mem_data(mem) + 1024 + 96) & 0x4, 0);
	assert_int_equal(e2_close(fs), 0);
	free(img);
}

/* No mode chosen: journal where there is a journal (with checksums
 * too), softupdates without one. */
static void test_journal_default_mode(void **state)
{
	struct e2_opts o = {.no_flusher = true, .consistency_auto = true};
	struct bdev *mem;
	struct e2fs *fs;
	uint8_t *img;
	size_t len, jsb;

	(void)state;
	img = journal_image(&len, &jsb);
	assert_int_equal(bdev_mem_create(BS, 0, img, len, &mem), 0);
	assert_int_equal(e2_open_bdev(mem, &o, &fs), 0);
	assert_true(e2_journaling(fs));
	assert_int_equal(e2_close(fs), 0);
	/* the same journal with v1 checksums (compat 0x1) */
	put_be32(img + jsb + 0x24, 0x1);
	assert_int_equal(bdev_mem_create(BS, 0, img, len, &mem), 0);
	assert_int_equal(e2_open_bdev(mem, &o, &fs), 0);
	assert_true(e2_journaling(fs));
	assert_int_equal(e2_close(fs), 0);
	free(img);

	assert_int_equal(e2t_mkfs_mem(4096, BS, NULL, (void **)&img, &len), 0);
	assert_int_equal(bdev_mem_create(BS, 0, img, len, &mem), 0);
	assert_int_equal(e2_open_bdev(mem, &o, &fs), 0);
	assert_false(e2_journaling(fs));
	assert_int_equal(e2_close(fs), 0);
	free(img);
}

/* An orphan: a file removed while open, the removal committed, then a
 * crash.  The next read-write open replays the log and frees the file
 * from the orphan list; e2fsck -fn then finds nothing.  A list that names
 * an inode out of range is left alone, and the open goes on. */
static void test_journal_orphans(void **state)
{
	struct e2_opts o = {.no_flusher = true, .consistency_auto = true};
	const struct e2_recovery *rec;
	static uint8_t data[20000];
	struct bdev *mem;
	struct e2fs *fs;
	struct stat st;
	uint8_t *img, *crashed;
	size_t len, jsb;
	uint32_t ino;
	struct statvfs sv;
	uint64_t ffree, bfree;

	(void)state;
	img = journal_image(&len, &jsb);
	assert_int_equal(bdev_mem_create(BS, 0, img, len, &mem), 0);
	assert_int_equal(e2_open_bdev(mem, &o, &fs), 0);
	assert_int_equal(e2_statfs(fs, &sv), 0);
	ffree = sv.f_ffree;
	bfree = sv.f_bfree;
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &st), 0);
	ino = (uint32_t)st.st_ino;
	assert_int_equal(e2_open_inode(fs, ino), 0);
	assert_int_equal(e2_unlink(fs, NULL, E2_ROOT_INO, "f"), 0);
	memset(data, 'x', sizeof(data));
	assert_int_equal(e2_write(fs, NULL, ino, data, sizeof(data), 0), (ssize_t)sizeof(data));
	assert_int_equal(e2_sync(fs), 0); /* the commit: the file has no name */
	crashed = malloc(len);
	assert_non_null(crashed);
	memcpy(crashed, bdev_mem_data(mem), len);
	e2_abandon(fs);
	/* the crash left it on the list: s_last_orphan (superblock byte 232)
	 * names it once the log is replayed */
	assert_int_equal(bdev_mem_create(BS, 0, crashed, len, &mem), 0);
	assert_int_equal(e2_open_bdev(mem, &o, &fs), 0);
	rec = e2_recovery(fs);
	assert_true(rec->replayed);
	assert_int_equal(rec->orphans_freed, 1);
	assert_int_equal(rec->orphans_truncated, 0);
	assert_int_equal(rec->orphan_bad, 0);
	/* its inode and blocks are free again */
	assert_int_equal(e2_statfs(fs, &sv), 0);
	assert_int_equal(sv.f_ffree, ffree);
	assert_int_equal(sv.f_bfree, bfree);
	assert_int_equal(e2_close(fs), 0);
	free(crashed);

	/* a list naming inode 99999, past the last one: left for e2fsck */
	put_le32(img + 1024 + 232, 99999);
	assert_int_equal(bdev_mem_create(BS, 0, img, len, &mem), 0);
	assert_int_equal(e2_open_bdev(mem, &o, &fs), 0);
	assert_int_equal(e2_recovery(fs)->orphan_bad, 99999);
	assert_int_equal(e2_recovery(fs)->orphans_freed, 0);
	assert_int_equal(e2_close(fs), 0);
	free(img);
}

/* Superblocks in the writes rec logged from event `from` on (in place or
 * as a journal copy: the ext2 magic at byte 56 and this image's UUID):
 * their number in *n, in *named how many of them have s_last_orphan
 * (byte 232) equal to ino (any non-zero value when ino is 0), and the
 * last one's s_last_orphan in *last. */
static void sb_writes(struct bdev *rec, const uint8_t *img, size_t from, uint32_t ino, unsigned *n,
		      unsigned *named, uint32_t *last)
{
	*n = *named = *last = 0;
	for (size_t i = from; i < bdev_recorder_count(rec); i++) {
		const struct rec_event *ev = bdev_recorder_event(rec, i);
		const uint8_t *b = ev->data;

		if (ev->kind != REC_WRITE || get16(b + 56) != 0xEF53 ||
		    memcmp(b + 104, img + 1024 + 104, 16))
			continue;
		*last = get32(b + 232);
		(*n)++;
		*named += ino ? *last == ino : *last != 0;
	}
}

/* Under a journal, the removal of a file nobody holds frees it in its own
 * transaction: no superblock write ever names it on the orphan list.  A
 * file the caller (the kernel) still holds a lookup reference on stays
 * usable (it opens and reads) and goes on the list until the FORGET frees
 * it, as Linux keeps an unlinked inode until its last iput.  The same
 * removal of an open file puts it on the list too (the observation can
 * fail), and its release takes it off. */
static void test_journal_rm_held(void **state)
{
	struct e2_opts o = {.no_flusher = true, .consistency_auto = true};
	static uint8_t data[20000], back[20000];
	struct bdev *mem, *rec;
	struct e2fs *fs;
	struct stat st;
	struct statvfs sv;
	uint8_t *img;
	size_t len, jsb, mark;
	uint32_t f, g, h, last;
	uint64_t ffree;
	unsigned n, named;

	(void)state;
	memset(data, 'x', sizeof(data));
	img = journal_image(&len, &jsb);
	assert_int_equal(bdev_mem_create(BS, 0, img, len, &mem), 0);
	assert_int_equal(bdev_recorder_create(mem, &rec), 0);
	assert_int_equal(e2_open_bdev(rec, &o, &fs), 0);
	assert_true(e2_journaling(fs));
	assert_int_equal(e2_statfs(fs, &sv), 0);
	ffree = sv.f_ffree;
	/* f: its reference dropped before the removal */
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &st), 0);
	f = (uint32_t)st.st_ino;
	assert_int_equal(e2_write(fs, NULL, f, data, sizeof(data), 0), (ssize_t)sizeof(data));
	assert_int_equal(e2_forget(fs, f, 1), 0);
	assert_int_equal(e2_sync(fs), 0);
	assert_int_equal(bdev_recorder_reset(rec), 0);
	assert_int_equal(e2_unlink(fs, NULL, E2_ROOT_INO, "f"), 0);
	assert_int_equal(e2_statfs(fs, &sv), 0);
	assert_int_equal(sv.f_ffree, ffree);
	assert_int_equal(e2_sync(fs), 0);
	sb_writes(rec, img, 0, 0, &n, &named, &last);
	print_message("# rm of a file nobody holds: %u superblock writes, %u naming an orphan\n", n,
		      named);
	assert_int_equal(named, 0);

	/* h keeps the reference e2_mknod takes, as the kernel keeps its
	 * lookup until FORGET */
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "h", S_IFREG | 0644, 0, 0, 0, &st), 0);
	h = (uint32_t)st.st_ino;
	assert_int_equal(e2_write(fs, NULL, h, data, sizeof(data), 0), (ssize_t)sizeof(data));
	assert_int_equal(e2_sync(fs), 0);
	mark = bdev_recorder_count(rec);
	assert_int_equal(e2_unlink(fs, NULL, E2_ROOT_INO, "h"), 0);
	assert_int_equal(e2_getattr(fs, h, &st), 0);
	assert_int_equal(st.st_nlink, 0);
	assert_int_equal(st.st_size, sizeof(data));
	assert_int_equal(e2_open_inode(fs, h), 0);
	assert_int_equal(e2_read(fs, h, back, sizeof(back), 0), (ssize_t)sizeof(back));
	assert_memory_equal(back, data, sizeof(data));
	assert_int_equal(e2_release_inode(fs, h), 0);
	assert_int_equal(e2_statfs(fs, &sv), 0);
	assert_int_equal(sv.f_ffree, ffree - 1);
	assert_int_equal(e2_sync(fs), 0);
	sb_writes(rec, img, mark, h, &n, &named, &last);
	print_message("# rm of a held file: %u superblock writes, %u naming it\n", n, named);
	assert_true(named > 0);
	mark = bdev_recorder_count(rec);
	assert_int_equal(e2_forget(fs, h, 1), 0);
	assert_int_equal(e2_statfs(fs, &sv), 0);
	assert_int_equal(sv.f_ffree, ffree);
	assert_int_equal(e2_sync(fs), 0);
	sb_writes(rec, img, mark, 0, &n, &named, &last);
	assert_true(n > 0);
	assert_int_equal(last, 0); /* off the list */

	/* the control: g is open when it goes */
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "g", S_IFREG | 0644, 0, 0, 0, &st), 0);
	g = (uint32_t)st.st_ino;
	assert_int_equal(e2_open_inode(fs, g), 0);
	assert_int_equal(e2_sync(fs), 0);
	mark = bdev_recorder_count(rec);
	assert_int_equal(e2_unlink(fs, NULL, E2_ROOT_INO, "g"), 0);
	assert_int_equal(e2_sync(fs), 0);
	sb_writes(rec, img, mark, g, &n, &named, &last);
	print_message("# rm of an open file: %u superblock writes, %u naming it\n", n, named);
	assert_true(named > 0);
	mark = bdev_recorder_count(rec);
	assert_int_equal(e2_release_inode(fs, g), 0);
	assert_int_equal(e2_forget(fs, g, 1), 0);
	assert_int_equal(e2_sync(fs), 0);
	sb_writes(rec, img, mark, 0, &n, &named, &last);
	assert_true(n > 0);
	assert_int_equal(last, 0); /* off the list */
	assert_int_equal(e2_close(fs), 0);
	free(img);
}

/* A removed number the kernel still holds is not given out again until
 * the FORGET: the kernel would take the new inode for the old one.  With
 * every inode in use, the removed file's inode stays allocated until the
 * FORGET frees it, and then it is given out. */
static void test_held_number_not_reused(void **state)
{
	struct e2_opts o = {.no_flusher = true};
	struct bdev *mem;
	struct e2fs *fs;
	struct stat st;
	uint8_t *img;
	size_t len;
	uint32_t f;
	char name[16];
	int i, r;

	(void)state;
	assert_int_equal(e2t_mkfs_mem(1024, BS, "-N 32", (void **)&img, &len), 0);
	assert_int_equal(bdev_mem_create(BS, 0, img, len, &mem), 0);
	assert_int_equal(e2_open_bdev(mem, &o, &fs), 0);
	for (i = 0;; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		r = e2_mknod(fs, NULL, E2_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &st);
		if (r)
			break;
		e2_forget(fs, (uint32_t)st.st_ino, 1);
	}
	assert_int_equal(r, -ENOSPC);
	assert_true(i > 2);
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "n1", &st), 0);
	f = (uint32_t)st.st_ino;
	assert_int_equal(e2_unlink(fs, NULL, E2_ROOT_INO, "n1"), 0);
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "new", S_IFREG | 0644, 0, 0, 0, &st),
			 -ENOSPC);
	assert_int_equal(e2_getattr(fs, f, &st), 0);
	assert_int_equal(st.st_nlink, 0);
	assert_int_equal(e2_forget(fs, f, 1), 0);
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "new", S_IFREG | 0644, 0, 0, 0, &st), 0);
	assert_int_equal(st.st_ino, f);
	assert_int_equal(st.st_nlink, 1);
	e2_forget(fs, f, 1);
	assert_int_equal(e2_close(fs), 0);
	free(img);
}

/* Corrupt journals: refused by a read-write open with a clear message;
 * a read-only open of a clean file system does not read the journal. */
static void test_journal_corrupt(void **state)
{
	static const struct {
		const char *what;
		uint32_t off; /* in the journal superblock */
		uint32_t val;
		const char *words;
	} cases[] = {
	    {"magic", 0, 0x12345678, "bad journal superblock"},
	    {"block size", 12, 4096, "block size 4096 differs"},
	    {"length", 16, 1u << 20, "but the journal has"},
	    {"first block", 20, 0, "first log block"},
	    {"log start", 28, 99999, "log start"},
	    {"log start, not marked", 28, 5, "not marked needs_recovery"},
	    {"feature", 40, 0x80, "unknown journal feature"},
	};
	struct bdev *mem;
	struct e2fs *fs;
	uint8_t *img, *c;
	size_t len, jsb;
	int ret;

	(void)state;
	img = journal_image(&len, &jsb);
	c = malloc(len);
	assert_non_null(c);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(c, img, len);
		put_be32(c + jsb + cases[i].off, cases[i].val);
		ret = open_img(c, len, false, &fs, &mem);
		print_message("# journal %s -> %d: %s\n", cases[i].what, ret, e2_open_error());
		if (ret == 0) {
			e2_close(fs);
			fail_msg("journal %s: accepted", cases[i].what);
		}
		assert_true(ret == -EUCLEAN || ret == -EOPNOTSUPP);
		if (!strstr(e2_open_error(), cases[i].words))
			fail_msg("journal %s: '%s' does not say '%s'", cases[i].what,
				 e2_open_error(), cases[i].words);
		ret = open_img(c, len, true, &fs, &mem);
		assert_int_equal(ret, 0);
		e2_close(fs);
	}
	free(c);
	free(img);
}

/* Random bytes in the journal superblock and the first log blocks of a
 * file system marked needs_recovery: every open ends in success or a clean
 * refusal (ASan watches the rest). */
static void test_journal_random(void **state)
{
	uint64_t seed = e2t_seed("E2_CORRUPT_SEED", 1);
	struct e2t_rng rng;
	struct bdev *mem;
	struct e2fs *fs;
	uint8_t *img, *c;
	size_t len, jsb;
	unsigned ok = 0, refused = 0;
	int ret;

	(void)state;
	img = journal_image(&len, &jsb);
	put32(img + 1024 + 96, get32(img + 1024 + 96) | 0x4);
	/* a log that starts at block 1 with transaction 1's descriptor */
	put_be32(img + jsb + 28, 1);
	put_be32(img + jsb + BS, 0xc03b3998);
	put_be32(img + jsb + BS + 4, 1);
	memcpy(img + jsb + BS + 8, img + jsb + 24, 4); /* s_sequence */
	c = malloc(len);
	assert_non_null(c);
	e2t_rng_seed(&rng, seed);
	for (int i = 0; i < 300; i++) {
		memcpy(c, img, len);
		for (int k = 1 + (int)e2t_rng_below(&rng, 6); k > 0; k--) {
			size_t at = jsb + e2t_rng_below(&rng, 4) * BS +
				    (e2t_rng_below(&rng, 2) ? e2t_rng_below(&rng, 64)
							    : e2t_rng_below(&rng, BS));

			c[at] ^= (uint8_t)(1u << e2t_rng_below(&rng, 8));
		}
		ret = open_img(c, len, false, &fs, &mem);
		if (ret == 0) {
			ok++;
			e2_close(fs);
		} else {
			assert_true(ret == -EUCLEAN || ret == -EOPNOTSUPP);
			refused++;
		}
	}
	print_message("# journal random (seed %llu): %u opened, %u refused\n",
		      (unsigned long long)seed, ok, refused);
	free(c);
	free(img);
}

/* ---- setup --------------------------------------------------------------- */

static int write_host(const char *dir, const char *name, size_t size, size_t at)
{
	char *p;
	int fd, ret = 0;

	if (asprintf(&p, "%s/%s", dir, name) < 0)
		return -1;
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	free(p);
	if (fd < 0)
		return -1;
	for (size_t off = at; off < size && !ret; off++) {
		uint8_t b = (uint8_t)(1 + off % 251);

		if (pwrite(fd, &b, 1, (off_t)off) != 1)
			ret = -1;
		if (at && off >= at + 5)
			break;
	}
	if (!ret && ftruncate(fd, (off_t)size) < 0)
		ret = -1;
	close(fd);
	return ret;
}

static int group_setup(void **state)
{
	char *dir = e2t_tmpdir_new("corrupt"), *opts = NULL, *cmd = NULL;
	int ret = -1;

	signal(SIGALRM, on_alarm);
	signal(SIGPROF, on_alarm);
	if (!dir)
		return -1;
	/* built by hand, then copied in by mke2fs -d: no library code
	 * involved in making the base image */
	if (write_host(dir, "a", 100, 0) || write_host(dir, "f12k", 13000, 0) ||
	    write_host(dir, "f300k", 300000, 0) || write_host(dir, "empty", 0, 0))
		goto out;
	if (asprintf(&cmd,
		     "cd '%s' && ln a hard && ln -s a fast && "
		     "ln -s %0200d slow && mkdir -p big deep/a/b/c && printf abcdef > "
		     "deep/a/b/c/file && "
		     "for i in $(seq -w 0 149); do : > big/entry-with-a-longish-name-$i; done",
		     dir, 7) < 0)
		goto out;
	if (e2t_sh(cmd, NULL) != 0)
		goto out;
	/* sparse: only a few bytes far in */
	if (write_host(dir, "sparse", 400000, 200000))
		goto out;
	if (asprintf(&opts, "-d %s -N 256 -m 0", dir) < 0)
		goto out;
	ret = e2t_mkfs_mem(IMG_KIB, BS, opts, (void **)&g_img, &g_len);
	if (!ret)
		ret = e2t_mkfs_mem(8192, 4096, opts, (void **)&g_img4k, &g_len4k);
	if (ret) {
		print_message("# mke2fs -d failed: %d\n", ret);
		goto out;
	}
	parse_layout();
	ret = 0;
out:
	e2t_rm_rf(dir);
	free(dir);
	free(opts);
	free(cmd);
	return ret;
}

static int group_teardown(void **state)
{
	print_message("# %u images, %u opened, %u refused, %u calls: %u EIO, %u other errors\n",
		      g_st.images, g_st.opened, g_st.refused, g_st.ops, g_st.eio, g_st.other_err);
	free(g_img);
	free(g_img4k);
	return 0;
}

/* ---- extended attributes ---------------------------------------------------- */

/* Offset of inode ino in a one-group image with 1 KiB blocks. */
static size_t xinode_off(const uint8_t *img, uint32_t ino)
{
	uint32_t itab = get32(img + 2 * 1024 + 8), isz = get16(img + 1024 + 88);

	return (size_t)itab * 1024 + (size_t)(ino - 1) * isz;
}

struct xcorrupt {
	const char *name;
	bool inode; /* in the inode's own area (256-byte inodes) */
	void (*fn)(uint8_t *area, size_t len);
};

static void xc_magic(uint8_t *a, size_t n)
{
	(void)n;
	put32(a, 0xEA020001u);
}

static void xc_refcount0(uint8_t *a, size_t n)
{
	(void)n;
	put32(a + 4, 0);
}

static void xc_hblocks(uint8_t *a, size_t n)
{
	(void)n;
	put32(a + 8, 7);
}

/* no end marker: entries run to the end of the area */
static void xc_noend(uint8_t *a, size_t n)
{
	memset(a + 32, 0x41, n - 32);
}

/* well-formed entries, distinct names, no values, up to the last one,
 * whose name runs past the end of the block */
static void xc_name_past(uint8_t *a, size_t n)
{
	size_t p, k = 0;

	memset(a + 32, 0, n - 32);
	for (p = 32; p + 20 <= n; p += 20, k++) {
		a[p] = 2;
		a[p + 1] = 1;
		a[p + 16] = (uint8_t)('a' + k / 26);
		a[p + 17] = (uint8_t)('a' + k % 26);
	}
	a[p] = 8;
	a[p + 1] = 1;
}

static void xc_value_past(uint8_t *a, size_t n)
{
	(void)n;
	put16(a + 32 + 2, 1020);
	put32(a + 32 + 8, 500);
}

/* the second entry's value on top of the first's */
static void xc_overlap(uint8_t *a, size_t n)
{
	uint32_t second = 32 + ((16 + a[32] + 3) & ~3u);

	(void)n;
	put16(a + second + 2, get16(a + 32 + 2));
}

static void xc_value_on_entries(uint8_t *a, size_t n)
{
	(void)n;
	put16(a + 32 + 2, 32);
}

static void xc_inode_noend(uint8_t *a, size_t n)
{
	memset(a + 4, 0x41, n - 4);
}

static void xc_inode_value_past(uint8_t *a, size_t n)
{
	(void)n;
	put16(a + 4 + 2, 80);
	put32(a + 4 + 8, 40);
}

static void xc_inode_name_past(uint8_t *a, size_t n)
{
	(void)n;
	a[4] = 200;
}

static const struct xcorrupt xcorruptions[] = {
    {"bad magic", false, xc_magic},
    {"reference count 0", false, xc_refcount0},
    {"h_blocks not 1", false, xc_hblocks},
    {"no end of entries", false, xc_noend},
    {"name past the block", false, xc_name_past},
    {"value past the block", false, xc_value_past},
    {"overlapping values", false, xc_overlap},
    {"value over the entries", false, xc_value_on_entries},
    {"in-inode: no end of entries", true, xc_inode_noend},
    {"in-inode: value past the inode", true, xc_inode_value_past},
    {"in-inode: name past the inode", true, xc_inode_name_past},
};

static void test_corrupt_xattr(void **state)
{
	struct e2_opts o = {.no_flusher = true};
	char val[600];
	uint8_t *base, *img;
	size_t len;
	struct bdev *mem;
	struct e2fs *fs;
	struct stat st;
	uint32_t bad, good;
	void *raw;

	(void)state;
	memset(val, 'v', sizeof(val));
	for (size_t i = 0; i < sizeof(xcorruptions) / sizeof(xcorruptions[0]); i++) {
		const struct xcorrupt *c = &xcorruptions[i];
		char buf[700];
		size_t off;
		ssize_t r;

		/* a fresh image: "bad" with two block attributes (or small ones
		 * in its inode), "good" with its own */
		assert_int_equal(
		    e2t_mkfs_mem(1024, 1024, c->inode ? "-I 256" : "-I 128", &raw, &len), 0);
		assert_int_equal(bdev_mem_create(1024, 0, raw, len, &mem), 0);
		free(raw);
		assert_int_equal(e2_open_bdev(mem, &o, &fs), 0);
		assert_int_equal(
		    e2_mknod(fs, NULL, E2_ROOT_INO, "bad", S_IFREG | 0644, 0, 0, 0, &st), 0);
		bad = (uint32_t)st.st_ino;
		assert_int_equal(
		    e2_mknod(fs, NULL, E2_ROOT_INO, "good", S_IFREG | 0644, 0, 0, 0, &st), 0);
		good = (uint32_t)st.st_ino;
		assert_int_equal(e2_setxattr(fs, NULL, bad, "user.one", val, c->inode ? 8 : 300, 0),
				 0);
		assert_int_equal(e2_setxattr(fs, NULL, bad, "user.two", val, c->inode ? 8 : 200, 0),
				 0);
		assert_int_equal(e2_setxattr(fs, NULL, good, "user.g", val, 500, 0), 0);
		assert_int_equal(e2_sync(fs), 0);
		base = bdev_mem_data(mem);
		img = malloc(len);
		assert_non_null(img);
		memcpy(img, base, len);
		e2_abandon(fs);
		off = xinode_off(img, bad);
		if (c->inode) {
			/* after the 128 bytes and i_extra_isize */
			size_t body = off + 128 + get16(img + off + 128);

			assert_int_equal(get32(img + body), 0xEA020000u);
			c->fn(img + body, 256 - (body - off));
		} else {
			uint32_t blk = get32(img + off + 104);

			assert_true(blk > 0);
			assert_int_equal(get32(img + (size_t)blk * 1024), 0xEA020000u);
			c->fn(img + (size_t)blk * 1024, 1024);
		}
		snprintf(g_label, sizeof(g_label), "attributes: %s", c->name);
		assert_int_equal(bdev_mem_create(1024, 0, img, len, &mem), 0);
		free(img);
		assert_int_equal(e2_open_bdev(mem, &o, &fs), 0);
		/* every attribute call on the damaged inode: EIO with a reason */
		r = e2_getxattr(fs, bad, "user.one", buf, sizeof(buf));
		if (r != -EIO)
			fail_msg("%s: getxattr gave %zd, expected -EIO", c->name, r);
		assert_non_null(strstr(e2_error(fs), "attribute"));
		print_message("# %-32s %s\n", c->name, e2_error(fs));
		assert_int_equal(e2_listxattr(fs, bad, buf, sizeof(buf), true), -EIO);
		assert_int_equal(e2_setxattr(fs, NULL, bad, "user.new", "x", 1, 0), -EIO);
		assert_int_equal(e2_removexattr(fs, NULL, bad, "user.one"), -EIO);
		/* the rest of the file system works */
		assert_int_equal(e2_getxattr(fs, good, "user.g", buf, sizeof(buf)), 500);
		assert_int_equal(e2_setxattr(fs, NULL, good, "user.h", "x", 1, 0), 0);
		assert_int_equal(e2_getattr(fs, bad, &st), 0);
		/* removing the damaged file neither crashes nor frees a block
		 * twice */
		(void)e2_unlink(fs, NULL, E2_ROOT_INO, "bad");
		(void)e2_forget(fs, bad, 1);
		(void)e2_forget(fs, good, 1);
		(void)e2_close(fs);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_corrupt_baseline),
	    cmocka_unit_test(test_corrupt_targeted),
	    cmocka_unit_test(test_corrupt_random),
	    cmocka_unit_test(test_corrupt_random_4k),
	    cmocka_unit_test(test_unsupported_features),
	    cmocka_unit_test(test_unsupported_feature_bits),
	    cmocka_unit_test(test_journal_needs_recovery),
	    cmocka_unit_test(test_journal_default_mode),
	    cmocka_unit_test(test_journal_orphans),
	    cmocka_unit_test(test_journal_rm_held),
	    cmocka_unit_test(test_held_number_not_reused),
	    cmocka_unit_test(test_journal_corrupt),
	    cmocka_unit_test(test_journal_random),
	    cmocka_unit_test(test_corrupt_xattr),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
