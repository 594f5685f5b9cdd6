/* Crash states of the ext2 module (design.md §3, §4).
 *
 * Each workload runs on a recorder device over a fresh mke2fs image: a setup
 * phase (synced, then forgotten with bdev_recorder_reset), then the
 * operations under test with the rounds driven by hand.  Every crash state
 * the recorder's log allows (crash_enumerate; capped and sampled evenly) is
 * checked twice:
 *   - e2fsck -fn: soft updates may leave only benign findings (see
 *     e2test_util.c for which);
 *   - through the library, read only: every reachable file's blocks hold its
 *     own pattern or zeros, never another file's stale data; after a rename
 *     over an existing target (or an exchange) the names hold the complete
 *     old or the complete new file; after e2_fsync returned, the file is
 *     there, complete;
 *   - after a truncate and a later growth, the bytes cut off read as zeros
 *     (not the file's own old bytes, which the pattern check accepts);
 *   - no file reads zeros inside its size except where the workload made
 *     a hole or cut bytes off (size update -> the data it covers: a size
 *     on disk before the pointers to its data reads as a hole).
 * The same workloads under CONSISTENCY_NONE must produce dangerous states,
 * stale data, a broken rename in every workload that protects a name, and
 * cut-off bytes back: that shows these checks can fail.  The variants (small
 * rounds, tiny cache, four groups) have their own NONE runs, and the fsync
 * check is run once without the e2_fsync call, where it must fail.
 *
 * Environment: E2_CRASH_SEED, E2_CRASH_CAP (states checked per workload
 * under soft updates), E2_CRASH_MIXED (number of random mixed workloads),
 * E2_CRASH_TRACE (print the mixed workloads' steps), E2_CRASH_LOG (print
 * the blocks written in each round), E2_CRASH_ONLY (run only the
 * soft-updates checks of the workload of that name), E2_CRASH_DUMP (a
 * path: the first dangerous state's image is written there).  One argument, a part
 * (ops, rounds, mixed or controls; see main), runs a part of the tests. */
#include <errno.h>
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "bdev/bdev.h"
#include "engine/cache.h"
#include "crash/crashsim.h"
#include "ext2/e2.h"
#include "ext2/e2_falloc.h"
#include "e2test_util.h"

#define BS	 1024
#define IMG_KIB	 2048
#define MAXNAMES 256
#define MAXIDS	 24
#define FILE_CAP (1024 * 1024)

static void *g_img, *g_img1, *g_img4; /* the image in use: one group or four */
static size_t g_len, g_len1, g_len4;
static size_t g_total_states;
static size_t g_cache_blocks; /* 0, or a tiny cache that evicts mid-operation */
static size_t g_round_max;    /* 0, or a few blocks per round */

/* ---- patterns and the name table --------------------------------------- */

/* Byte `off` of the file with content id `id`: never zero, and different
 * for different ids at the same offset (131 is prime to 255). */
static uint8_t pat(unsigned id, uint64_t off)
{
	return (uint8_t)(1 + (id * 131 + off * 7 + (off >> 10) * 13) % 255);
}

struct nameids {
	char name[256];
	unsigned ids[MAXIDS];
	unsigned n;
	/* bytes [zfrom, zto) were cut off by a truncate and then covered
	 * again by a larger size: unless the file still has its size from
	 * before the truncate (zkeep), they must read as zeros.  The file's
	 * own pattern there would be its old, cut-off bytes come back. */
	uint64_t zfrom, zto, zkeep;
	/* bytes [hfrom, hto) may read as zeros (a hole, or a tail being cut
	 * off by a truncate); elsewhere inside the size zeros are a size
	 * that reached disk before the data it covers */
	uint64_t hfrom, hto;
};

/* A candidate content of a protected name: `size` bytes of pattern `id`,
 * or (empty_ok) the same inode while still empty: a file created and
 * written with one e2_write in the session before the rename has on disk
 * either size 0 or all its data (size update -> the data it covers). */
struct acand {
	unsigned id;
	size_t size;
	bool empty_ok;
	uint32_t ino; /* with empty_ok: the inode that may be empty */
};

struct work {
	const char *name;
	struct e2fs *fs;
	struct bdev *rec;
	enum consistency cons;
	struct e2t_rng rng;
	uint64_t seed;
	struct nameids names[MAXNAMES];
	unsigned nnames;
	unsigned next_id;
	/* names that must hold one of the candidate files, complete, at
	 * every crash point (rename over a target, exchange) */
	const char *atomic_name[2];
	uint32_t atomic_dir[2];
	unsigned natomic;
	struct acand atomic[5];
	unsigned nacand;
	/* a file renamed (not over a target): at every crash point one of
	 * these paths from the root names it, whole (a candidate above) */
	const char *either[2];
	size_t cache_blocks; /* e2_opts.cache_blocks for the run */
	/* after e2_fsync returned: from round durable_round on, durable_name
	 * in durable_dir holds durable_size bytes of pattern durable_id */
	const char *durable_name;
	uint32_t durable_dir;
	unsigned durable_id;
	size_t durable_size, durable_round;
	uint32_t dirs[8]; /* directory inodes made by setup, [0] is root */
	unsigned ndirs;
	bool trace; /* E2_CRASH_TRACE: print the mixed workload's steps */
};

/* Every name a file has ever had, with every content id it has had: in a
 * crash state a name may show any of them. */
static void name_add(struct work *w, const char *name, unsigned id)
{
	struct nameids *e = NULL;

	for (unsigned i = 0; i < w->nnames; i++)
		if (!strcmp(w->names[i].name, name))
			e = &w->names[i];
	if (!e) {
		assert_true(w->nnames < MAXNAMES);
		e = &w->names[w->nnames++];
		snprintf(e->name, sizeof(e->name), "%s", name);
		e->n = 0;
	}
	for (unsigned i = 0; i < e->n; i++)
		if (e->ids[i] == id)
			return;
	assert_true(e->n < MAXIDS);
	e->ids[e->n++] = id;
}

/* Bytes [from, to) of name may read as zeros (widened to cover earlier
 * ranges: one range per name). */
static void name_holes(struct work *w, const char *name, uint64_t from, uint64_t to)
{
	for (unsigned i = 0; i < w->nnames; i++) {
		struct nameids *e = &w->names[i];

		if (strcmp(e->name, name))
			continue;
		if (e->hto > e->hfrom) {
			from = from < e->hfrom ? from : e->hfrom;
			to = to > e->hto ? to : e->hto;
		}
		e->hfrom = from;
		e->hto = to;
		return;
	}
	fail_msg("workload %s: holes expected in unknown file '%s'", w->name, name);
}

/* Bytes [from, to) of name must read as zeros unless its size is keep. */
static void name_zeros(struct work *w, const char *name, uint64_t from, uint64_t to, uint64_t keep)
{
	for (unsigned i = 0; i < w->nnames; i++)
		if (!strcmp(w->names[i].name, name)) {
			w->names[i].zfrom = from;
			w->names[i].zto = to;
			w->names[i].zkeep = keep;
			name_holes(w, name, from, to);
			return;
		}
	fail_msg("workload %s: zeros expected in unknown file '%s'", w->name, name);
}

static const struct nameids *name_find(const struct work *w, const char *name)
{
	for (unsigned i = 0; i < w->nnames; i++)
		if (!strcmp(w->names[i].name, name))
			return &w->names[i];
	return NULL;
}

/* ---- operations with error checks -------------------------------------- */

#define OK(w, expr)                                                                                \
	do {                                                                                       \
		long r_ = (long)(expr);                                                            \
		if (r_ < 0)                                                                        \
			fail_msg("workload %s seed %llu: %s: %ld (%s)", (w)->name,                 \
				 (unsigned long long)(w)->seed, #expr, r_, e2_error((w)->fs));     \
	} while (0)

static uint32_t w_lookup(struct work *w, uint32_t dir, const char *name)
{
	struct stat st;

	OK(w, e2_lookup(w->fs, dir, name, &st));
	e2_forget(w->fs, st.st_ino, 1);
	return st.st_ino;
}

static void w_write_pat(struct work *w, uint32_t ino, unsigned id, uint64_t off, size_t len)
{
	uint8_t *buf = malloc(len ? len : 1);
	ssize_t n;

	assert_non_null(buf);
	for (size_t i = 0; i < len; i++)
		buf[i] = pat(id, off + i);
	n = e2_write(w->fs, NULL, ino, buf, len, (off_t)off);
	if (n != (ssize_t)len)
		fail_msg("workload %s: write %zu at %llu: %zd", w->name, len,
			 (unsigned long long)off, n);
	free(buf);
}

/* Create a file holding size bytes of pattern id; returns its inode. */
static uint32_t w_file(struct work *w, uint32_t dir, const char *name, unsigned id, size_t size)
{
	struct stat st;

	OK(w, e2_mknod(w->fs, NULL, dir, name, S_IFREG | 0644, 0, 0, 0, &st));
	e2_forget(w->fs, st.st_ino, 1);
	name_add(w, name, id);
	for (size_t off = 0; off < size; off += 8192)
		w_write_pat(w, st.st_ino, id, off, size - off < 8192 ? size - off : 8192);
	return st.st_ino;
}

/* The same with one e2_write: on disk its size is 0 or size, nothing between. */
static uint32_t w_file1(struct work *w, uint32_t dir, const char *name, unsigned id, size_t size)
{
	struct stat st;

	OK(w, e2_mknod(w->fs, NULL, dir, name, S_IFREG | 0644, 0, 0, 0, &st));
	e2_forget(w->fs, st.st_ino, 1);
	name_add(w, name, id);
	w_write_pat(w, st.st_ino, id, 0, size);
	return st.st_ino;
}

/* Sets the size of inode ino (a truncate, or growth by a size change). */
static void w_size(struct work *w, uint32_t ino, off_t size)
{
	struct stat a = {0}, st;

	a.st_size = size;
	OK(w, e2_setattr(w->fs, NULL, ino, &a, E2_SET_SIZE, &st));
}

static uint32_t w_mkdir(struct work *w, uint32_t dir, const char *name)
{
	struct stat st;

	OK(w, e2_mkdir(w->fs, NULL, dir, name, 0755, 0, 0, &st));
	e2_forget(w->fs, st.st_ino, 1);
	return st.st_ino;
}

/* Run rounds until nothing is left to write, then a sync for anything the
 * module keeps outside the cache. */
static void w_rounds(struct work *w)
{
	struct cache *c = e2_cache(w->fs);
	size_t n = 1;

	assert_non_null(c);
	for (int i = 0; n && i < 100000; i++)
		OK(w, cache_flush_round(c, &n));
	/* the cache keeps reporting work: rounds that write nothing, or a
	 * loop between blocks; e2_sync below could hide either */
	if (n)
		fail_msg("workload %s: %zu blocks still to write after 100000 rounds", w->name, n);
	OK(w, e2_sync(w->fs));
}

/* Blocks full of other files' patterns, freed again: a file whose block
 * pointer reaches disk before its data would show them. */
static void setup_stale(struct work *w)
{
	char nm[32];

	for (unsigned i = 0; i < 6; i++) {
		snprintf(nm, sizeof(nm), "stale%u", i);
		w_file(w, E2_ROOT_INO, nm, 200 + i, 40000);
	}
	OK(w, e2_sync(w->fs));
	for (unsigned i = 0; i < 6; i++) {
		snprintf(nm, sizeof(nm), "stale%u", i);
		OK(w, e2_unlink(w->fs, NULL, E2_ROOT_INO, nm));
	}
	/* the frees durable, so that the workload's files land on those blocks */
	OK(w, e2_sync(w->fs));
}

/* ---- workloads ---------------------------------------------------------- */

struct workload {
	const char *name;
	void (*setup)(struct work *w);
	void (*run)(struct work *w);
	bool ordering_matters; /* must show dangerous states under NONE */
	bool tail_fires;       /* must show cut-off bytes back under NONE */
	bool hole_fires;       /* must show a size over a hole under NONE */
};

static void su_dirs(struct work *w)
{
	setup_stale(w);
	w->dirs[0] = E2_ROOT_INO;
	w->dirs[1] = w_mkdir(w, E2_ROOT_INO, "d");
	w->dirs[2] = w_mkdir(w, w->dirs[1], "e");
	w->ndirs = 3;
}

static void run_create(struct work *w)
{
	struct stat st;

	OK(w, e2_mknod(w->fs, NULL, E2_ROOT_INO, "c1", S_IFREG | 0644, 0, 0, 0, &st));
	e2_forget(w->fs, st.st_ino, 1);
	name_add(w, "c1", 1);
	w_rounds(w);
	OK(w, e2_mknod(w->fs, NULL, w->dirs[1], "c2", S_IFIFO | 0600, 0, 0, 0, &st));
	e2_forget(w->fs, st.st_ino, 1);
	OK(w, e2_mknod(w->fs, NULL, w->dirs[2], "c3", S_IFREG | 0600, 0, 0, 0, &st));
	e2_forget(w->fs, st.st_ino, 1);
	name_add(w, "c3", 3);
	w_rounds(w);
}

static void run_mkdir(struct work *w)
{
	w_mkdir(w, E2_ROOT_INO, "m1");
	w_rounds(w);
	w_mkdir(w, w->dirs[2], "m2");
	w_mkdir(w, w->dirs[1], "m3");
	w_rounds(w);
}

/* A new tree made in one go, a file on each level: a directory's inode
 * waits for its parent's count, which while the parent is new goes out in
 * the parent's own first write (e2_create.c). */
static void run_mkdir_tree(struct work *w)
{
	uint32_t d = E2_ROOT_INO;
	char name[8];

	for (unsigned i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "t%u", i);
		d = w_mkdir(w, d, name);
		snprintf(name, sizeof(name), "f%u", i);
		w_file(w, d, name, 20 + i, 1500);
	}
	w_rounds(w);
}

static void run_append(struct work *w)
{
	uint32_t a = w_file(w, E2_ROOT_INO, "a1", 1, 3000);
	uint32_t b = w_file(w, w->dirs[1], "a2", 2, 0);

	w_rounds(w);
	/* Through the indirect (12 KiB) and double-indirect (268 KiB) starts. */
	for (uint64_t off = 3000; off < 290000; off += 23000) {
		w_write_pat(w, a, 1, off, 23000);
		w_write_pat(w, b, 2, off - 3000, 23000);
		w_rounds(w);
	}
}

static void su_truncate(struct work *w)
{
	su_dirs(w);
	w_file(w, E2_ROOT_INO, "t1", 1, 290000);
	w_file(w, w->dirs[1], "t2", 2, 20000);
	w_file(w, w->dirs[1], "t3", 3, 5000);
}

static void run_truncate(struct work *w)
{
	uint32_t t1 = w_lookup(w, E2_ROOT_INO, "t1");
	uint32_t t2 = w_lookup(w, w->dirs[1], "t2");
	uint32_t t3 = w_lookup(w, w->dirs[1], "t3");

	w_size(w, t1, 5000);
	name_holes(w, "t1", 5000, 290000);
	w_rounds(w);
	w_size(w, t2, 0);
	/* shrink then extend: the tail must read as zeros, not old data */
	w_size(w, t3, 100);
	w_size(w, t3, 30000);
	name_zeros(w, "t3", 100, 30000, 5000);
	w_rounds(w);
	/* reuse the freed blocks for another file at once */
	w_file(w, E2_ROOT_INO, "t4", 4, 60000);
	w_rounds(w);
}

/* Sparse files cut just before their only block far out: the indirect
 * blocks over it are left empty, and go with it (as Linux's ext2 frees
 * them); a new file then takes the blocks freed.  Each pointer must be
 * gone on disk before its block is free, up the tree to the inode. */
static void su_trunc_sparse(struct work *w)
{
	uint32_t f;

	su_dirs(w);
	/* one block in the double-indirect tree, one in the single */
	f = w_file(w, E2_ROOT_INO, "s1", 1, 100);
	w_write_pat(w, f, 1, 800000, 3000);
	name_holes(w, "s1", 100, 800000);
	/* (lblk 781 of 1 KiB blocks starts at 799744: the truncate below
	 * cuts there) */
	f = w_file(w, w->dirs[1], "s2", 2, 100);
	w_write_pat(w, f, 2, 17408, 1000);
	name_holes(w, "s2", 100, 17408);
}

static void run_trunc_sparse(struct work *w)
{
	/* at the start of its first block: nothing of it is kept */
	w_size(w, w_lookup(w, E2_ROOT_INO, "s1"), 799744);
	w_size(w, w_lookup(w, w->dirs[1], "s2"), 17408);
	w_rounds(w);
	w_file(w, E2_ROOT_INO, "s3", 3, 40000);
	w_rounds(w);
}

/* Shrink then grow a synced file in one session: the bytes cut off must
 * not come back, whether the file grows by a size change or by a write
 * far beyond its end (size update -> the zeroed tail it covers).  Each
 * file in its own rounds, so that its inode and its tail block are the
 * only writes of the first round. */
static void su_shrink_grow(struct work *w)
{
	su_dirs(w);
	w_file(w, E2_ROOT_INO, "g1", 1, 5000);
	w_file(w, w->dirs[1], "g2", 2, 5000);
	w_file(w, w->dirs[2], "g3", 3, 5000);
}

static void run_shrink_grow(struct work *w)
{
	uint32_t g1 = w_lookup(w, E2_ROOT_INO, "g1");
	uint32_t g2 = w_lookup(w, w->dirs[1], "g2");
	uint32_t g3 = w_lookup(w, w->dirs[2], "g3");

	w_size(w, g1, 100);
	w_size(w, g1, 30000);
	name_zeros(w, "g1", 100, 30000, 5000);
	w_rounds(w);
	w_size(w, g2, 100);
	w_write_pat(w, g2, 2, 40000, 1000);
	name_zeros(w, "g2", 100, 40000, 5000);
	w_rounds(w);
	/* inside one block: cut to 1500, grow to 3000 */
	w_size(w, g3, 1500);
	w_size(w, g3, 3000);
	name_zeros(w, "g3", 1500, 3000, 5000);
	w_rounds(w);
}

static void su_unlink(struct work *w)
{
	struct stat st;
	uint32_t f2;

	su_dirs(w);
	w_file(w, E2_ROOT_INO, "u1", 1, 20000);
	f2 = w_file(w, w->dirs[1], "u2", 2, 3000);
	OK(w, e2_link(w->fs, NULL, f2, E2_ROOT_INO, "u2b", &st));
	e2_forget(w->fs, st.st_ino, 1);
	name_add(w, "u2b", 2);
	w_file(w, w->dirs[2], "u3", 3, 290000);
}

static void run_unlink(struct work *w)
{
	OK(w, e2_unlink(w->fs, NULL, E2_ROOT_INO, "u1"));
	w_rounds(w);
	OK(w, e2_unlink(w->fs, NULL, w->dirs[1], "u2"));
	OK(w, e2_unlink(w->fs, NULL, w->dirs[2], "u3"));
	w_rounds(w);
	/* the freed blocks and inodes go to a new file */
	w_file(w, E2_ROOT_INO, "u4", 4, 100000);
	w_rounds(w);
}

static void su_rmdir(struct work *w)
{
	su_dirs(w);
	w_mkdir(w, w->dirs[2], "r1");
	w_mkdir(w, E2_ROOT_INO, "r2");
}

static void run_rmdir(struct work *w)
{
	OK(w, e2_rmdir(w->fs, NULL, w->dirs[2], "r1"));
	w_rounds(w);
	OK(w, e2_rmdir(w->fs, NULL, w->dirs[1], "e"));
	OK(w, e2_rmdir(w->fs, NULL, E2_ROOT_INO, "r2"));
	w_rounds(w);
	w_mkdir(w, E2_ROOT_INO, "r3");
	w_rounds(w);
}

static void su_rename(struct work *w)
{
	su_dirs(w);
	w_file(w, E2_ROOT_INO, "n1", 1, 5000);
	w_mkdir(w, E2_ROOT_INO, "x");
	w_mkdir(w, w_lookup(w, E2_ROOT_INO, "x"), "y");
	name_add(w, "n1b", 1);
	name_add(w, "n1c", 1);
}

static void run_rename(struct work *w)
{
	uint32_t x = w_lookup(w, E2_ROOT_INO, "x");

	/* a file across parents, a directory across parents (its ".." and
	 * both link counts change), a file within a directory */
	OK(w, e2_rename(w->fs, NULL, E2_ROOT_INO, "n1", w->dirs[2], "n1b", 0));
	w_rounds(w);
	OK(w, e2_rename(w->fs, NULL, x, "y", w->dirs[1], "y", 0));
	w_rounds(w);
	OK(w, e2_rename(w->fs, NULL, w->dirs[2], "n1b", w->dirs[2], "n1c", 0));
	w_rounds(w);
}

/* A file moves from /d/e into /x/y, both made in the same session: at
 * every crash point one of its two paths from the root names it, whole.
 * Its new entry waits for y's and for x's (e2_init_deps), and the old
 * entry goes after it. */
static void su_rename_new_dirs(struct work *w)
{
	su_dirs(w);
	w_file(w, w->dirs[2], "pub", 1, 5000);
	w->atomic[0] = (struct acand){.id = 1, .size = 5000};
	w->nacand = 1;
	w->either[0] = "d/e/pub";
	w->either[1] = "x/y/pub";
	name_add(w, "pub", 1);
}

static void run_rename_new_dirs(struct work *w)
{
	uint32_t x = w_mkdir(w, E2_ROOT_INO, "x");
	uint32_t y = w_mkdir(w, x, "y");

	OK(w, e2_rename(w->fs, NULL, w->dirs[2], "pub", y, "pub", 0));
	w_rounds(w);
}

static void su_rename_over(struct work *w)
{
	su_dirs(w);
	w->atomic_name[0] = "target";
	w->atomic_dir[0] = E2_ROOT_INO;
	w->natomic = 1;
	w->atomic[0] = (struct acand){.id = 1, .size = 20000};
	w->atomic[1] = (struct acand){.id = 2, .size = 30000};
	w->nacand = 2;
	w_file(w, E2_ROOT_INO, "target", 1, 20000);
	w_file(w, E2_ROOT_INO, "new", 2, 30000);
	name_add(w, "target", 2);
}

static void run_rename_over(struct work *w)
{
	OK(w, e2_rename(w->fs, NULL, E2_ROOT_INO, "new", E2_ROOT_INO, "target", 0));
	w_rounds(w);
}

/* The same across directories: the new name's block and the old name's
 * block are different blocks. */
static void su_rename_over_dirs(struct work *w)
{
	su_rename_over(w);
	OK(w, e2_rename(w->fs, NULL, E2_ROOT_INO, "new", w->dirs[2], "new", 0));
}

/* The size of the file made in the session before a rename over a target
 * or an exchange: past the direct blocks, so that its size and the
 * pointers in its indirect block must reach disk together (the inode and
 * the indirect block are different blocks).  FRESH_BIG reaches into the
 * double-indirect blocks (12 + 256 blocks of 1 KiB). */
#define FRESH_SIZE 25000
#define FRESH_BIG  300000

/* /d/e/fresh, made in this session with one e2_write of size bytes of
 * pattern 3, is about to go to /target: the third content /target may
 * show (empty while still the same new inode). */
static void w_fresh_candidate(struct work *w, size_t size)
{
	w->atomic[2] = (struct acand){.id = 3, .size = size, .empty_ok = true};
	w->atomic[2].ino = w_file1(w, w->dirs[2], "fresh", 3, size);
	w->nacand = 3;
	name_add(w, "target", 3);
}

/* A file made in this session goes over the target first (its entry and
 * inode are new: without ordering the target can name an inode not yet
 * on disk), then the synced one. */
static void run_rename_over_dirs(struct work *w)
{
	w_fresh_candidate(w, FRESH_SIZE);
	OK(w, e2_rename(w->fs, NULL, w->dirs[2], "fresh", E2_ROOT_INO, "target", 0));
	w_rounds(w);
	OK(w, e2_rename(w->fs, NULL, w->dirs[2], "new", E2_ROOT_INO, "target", 0));
	w_rounds(w);
}

/* The same with a file reaching the double-indirect blocks. */
static void run_rename_over_big(struct work *w)
{
	w_fresh_candidate(w, FRESH_BIG);
	OK(w, e2_rename(w->fs, NULL, w->dirs[2], "fresh", E2_ROOT_INO, "target", 0));
	w_rounds(w);
}

/* A directory growing past its 12 direct blocks: its size and the pointers
 * in its indirect block must reach disk together (a directory's size over a
 * hole is corrupt for e2fsck).  The names are 200 bytes long, four to a
 * block, and are hard links to one small file, so no inodes are needed. */
#define DG_NAMES 48 /* 12 blocks */

static void dg_name(char *buf, size_t len, unsigned i)
{
	memset(buf, 'a' + i % 26, 200);
	snprintf(buf + 190, len - 190, "%09u", i);
}

static void dg_link(struct work *w, uint32_t f, uint32_t d, unsigned i)
{
	char nm[256];
	struct stat st;

	dg_name(nm, sizeof(nm), i);
	OK(w, e2_link(w->fs, NULL, f, d, nm, &st));
	e2_forget(w->fs, st.st_ino, 1);
	name_add(w, nm, 1);
}

static void su_dir_grow(struct work *w)
{
	uint32_t d, f;

	su_dirs(w);
	d = w_mkdir(w, E2_ROOT_INO, "big");
	f = w_file(w, E2_ROOT_INO, "f", 1, 100);
	for (unsigned i = 0; i < DG_NAMES; i++)
		dg_link(w, f, d, i);
}

static void run_dir_grow(struct work *w)
{
	uint32_t d = w_lookup(w, E2_ROOT_INO, "big");
	uint32_t f = w_lookup(w, E2_ROOT_INO, "f");
	unsigned i = DG_NAMES;

	/* two blocks in one session (a new indirect block, then a second
	 * pointer in it), then two more after it is on disk */
	for (; i < DG_NAMES + 8; i++)
		dg_link(w, f, d, i);
	w_rounds(w);
	for (; i < DG_NAMES + 16; i++)
		dg_link(w, f, d, i);
	w_rounds(w);
}

/* Writes into the holes of a sparse file, below its size: through a new
 * indirect block, an existing one, a new double-indirect block and an
 * existing one; then a hole and the end in one indirect block.  Until a
 * pointer lands the hole reads as zeros, as it did; what must never show
 * is another file's data or an i_blocks too low. */
static void su_holes(struct work *w)
{
	uint32_t f;

	su_dirs(w);
	f = w_file(w, E2_ROOT_INO, "sparse", 1, 100);
	w_size(w, f, 300000);
	name_holes(w, "sparse", 100, 300000);
}

static void run_holes(struct work *w)
{
	uint32_t f = w_lookup(w, E2_ROOT_INO, "sparse");

	w_write_pat(w, f, 1, 20000, 3000);
	w_rounds(w);
	w_write_pat(w, f, 1, 30000, 2000);
	w_write_pat(w, f, 1, 280000, 3000);
	w_rounds(w);
	w_write_pat(w, f, 1, 284000, 5000);
	w_rounds(w);
	/* a hole filled, then in the same session a write past the end that
	 * copies the indirect block holding the new pointer: the copy must
	 * wait for that pointer's data */
	w_write_pat(w, f, 1, 290000, 2000);
	w_write_pat(w, f, 1, 300000, 3000);
	w_rounds(w);
}

static size_t barriers_so_far(struct bdev *rec)
{
	size_t n = 0;

	for (size_t i = 0; i < bdev_recorder_count(rec); i++)
		n += bdev_recorder_event(rec, i)->kind == REC_BARRIER;
	return n;
}

/* e2_fsync makes a new file durable, with its name, whatever comes after.
 * Without the e2_fsync call (the negative control) the same expectation
 * must fail. */
static void fsync_common(struct work *w, bool call)
{
	uint32_t d = w_mkdir(w, w->dirs[1], "fd");
	uint32_t f;

	w_file(w, w->dirs[2], "other", 5, 30000);
	f = w_file(w, d, "synced", 6, 70000);
	if (call)
		OK(w, e2_fsync(w->fs, f, false));
	w->durable_name = "synced";
	w->durable_dir = d;
	w->durable_id = 6;
	w->durable_size = 70000;
	w->durable_round = barriers_so_far(w->rec);
	w_file(w, E2_ROOT_INO, "later", 7, 20000);
	OK(w, e2_unlink(w->fs, NULL, w->dirs[2], "other"));
	w_rounds(w);
}

static void run_fsync(struct work *w)
{
	fsync_common(w, true);
}

static void run_fsync_skipped(struct work *w)
{
	fsync_common(w, false);
}

/* After a first fsync (which syncs everything), a new file in a new
 * directory collects its changes from its birth: its own fsync writes only
 * what it depends on (its data, inode, entry, and the new directory's),
 * not the unrelated file written beside it. */
static void fsync_new_common(struct work *w, bool call)
{
	uint32_t d, f;

	f = w_file(w, w->dirs[2], "first", 4, 10000);
	OK(w, e2_fsync(w->fs, f, false));
	d = w_mkdir(w, w->dirs[1], "fd");
	w_file(w, w->dirs[2], "other", 5, 30000);
	f = w_file(w, d, "synced", 6, 70000);
	if (call)
		OK(w, e2_fsync(w->fs, f, false));
	w->durable_name = "synced";
	w->durable_dir = d;
	w->durable_id = 6;
	w->durable_size = 70000;
	w->durable_round = barriers_so_far(w->rec);
	w_file(w, E2_ROOT_INO, "later", 7, 20000);
	OK(w, e2_unlink(w->fs, NULL, w->dirs[2], "other"));
	w_rounds(w);
}

static void run_fsync_new(struct work *w)
{
	fsync_new_common(w, true);
}

static void run_fsync_new_skipped(struct work *w)
{
	fsync_new_common(w, false);
}

/* Exchange across directories: /target and /d/e/new swap places. */
static void su_exchange(struct work *w)
{
	su_rename_over_dirs(w);
	w->atomic_name[1] = "new";
	w->atomic_dir[1] = w->dirs[2];
	w->natomic = 2;
	name_add(w, "new", 1);
}

/* Both names exist at every crash point, each with one complete file.
 * First a file made in this session trades places with /target (without
 * ordering /target can name its inode before that is on disk), then
 * /target and /d/e/new trade places, twice. */
static void run_exchange(struct work *w)
{
	w_fresh_candidate(w, FRESH_SIZE);
	name_add(w, "fresh", 1);
	OK(w,
	   e2_rename(w->fs, NULL, w->dirs[2], "fresh", E2_ROOT_INO, "target", E2_RENAME_EXCHANGE));
	w_rounds(w);
	name_add(w, "target", 2);
	name_add(w, "new", 3);
	OK(w, e2_rename(w->fs, NULL, w->dirs[2], "new", E2_ROOT_INO, "target", E2_RENAME_EXCHANGE));
	w_rounds(w);
	OK(w, e2_rename(w->fs, NULL, E2_ROOT_INO, "target", w->dirs[2], "new", E2_RENAME_EXCHANGE));
	w_rounds(w);
}

static void su_link(struct work *w)
{
	su_dirs(w);
	w_file(w, E2_ROOT_INO, "l1", 1, 7000);
	name_add(w, "l2", 1);
	name_add(w, "l3", 1);
}

static void run_link(struct work *w)
{
	uint32_t f = w_lookup(w, E2_ROOT_INO, "l1");
	struct stat st;

	OK(w, e2_link(w->fs, NULL, f, w->dirs[2], "l2", &st));
	e2_forget(w->fs, st.st_ino, 1);
	w_rounds(w);
	OK(w, e2_link(w->fs, NULL, f, E2_ROOT_INO, "l3", &st));
	e2_forget(w->fs, st.st_ino, 1);
	w_rounds(w);
}

static void run_symlink(struct work *w)
{
	char slow[700];
	struct stat st;

	memset(slow, 'q', sizeof(slow) - 1);
	slow[sizeof(slow) - 1] = 0;
	OK(w, e2_symlink(w->fs, NULL, E2_ROOT_INO, "s1", "short/target", 0, 0, &st));
	e2_forget(w->fs, st.st_ino, 1);
	w_rounds(w);
	OK(w, e2_symlink(w->fs, NULL, w->dirs[1], "s2", slow, 0, 0, &st));
	e2_forget(w->fs, st.st_ino, 1);
	w_rounds(w);
}

/* Inodes and blocks freed and handed out again, with and without a flush
 * in between (a create undone before it reached disk writes nothing). */
static void run_reuse(struct work *w)
{
	struct stat st;

	w_file(w, E2_ROOT_INO, "r1", 1, 3000);
	OK(w, e2_unlink(w->fs, NULL, E2_ROOT_INO, "r1"));
	w_file(w, E2_ROOT_INO, "r2", 2, 5000);
	w_rounds(w);
	OK(w, e2_symlink(w->fs, NULL, w->dirs[1], "s", "m0", 0, 0, &st));
	e2_forget(w->fs, st.st_ino, 1);
	w_rounds(w);
	OK(w, e2_unlink(w->fs, NULL, w->dirs[1], "s"));
	w_file(w, w->dirs[1], "r3", 3, 2000);
	w_rounds(w);
	OK(w, e2_unlink(w->fs, NULL, E2_ROOT_INO, "r2"));
	w_mkdir(w, E2_ROOT_INO, "r4");
	w_rounds(w);
}

/* Holes punched in files (fallocate's PUNCH_HOLE): direct blocks with a
 * partial block on each side, a whole indirect tree, part of the double
 * indirect tree, and from the middle to the end, which also empties the
 * double indirect block; the blocks freed are taken at once by new files.
 * A pointer must be gone on disk before its block is free (truncate's
 * rule), or the punched file shows the new file's data. */
static void su_punch(struct work *w)
{
	su_dirs(w);
	w_file(w, E2_ROOT_INO, "p1", 1, 290000);
	w_file(w, w->dirs[1], "p2", 2, 40000);
	name_holes(w, "p1", 3000, 290000);
	name_holes(w, "p2", 1000, 40000);
}

static void run_punch(struct work *w)
{
	uint32_t p1 = w_lookup(w, E2_ROOT_INO, "p1");
	uint32_t p2 = w_lookup(w, w->dirs[1], "p2");

	OK(w, e2_punch(w->fs, NULL, p1, 3000, 8000));
	OK(w, e2_punch(w->fs, NULL, p1, 12 * BS, 256 * BS));
	OK(w, e2_punch(w->fs, NULL, p1, (12 + 256) * BS, 5000));
	/* all of p2 but its first bytes: its indirect block is left empty */
	OK(w, e2_punch(w->fs, NULL, p2, 1000, 1 << 20));
	w_file(w, E2_ROOT_INO, "p3", 3, 60000);
	w_rounds(w);
	/* only pointers inside an indirect block: in their own rounds, so
	 * that their bitmap bits share no word with other frees */
	OK(w, e2_punch(w->fs, NULL, p1, (12 + 256 + 6) * BS, 4 * BS));
	w_rounds(w);
	OK(w, e2_punch(w->fs, NULL, p1, 200000, 1 << 20));
	w_file(w, w->dirs[1], "p4", 4, 100000);
	w_rounds(w);
}

/* A name of 240 bytes (a 248-byte record: four fill a directory block). */
static void long_name(char *buf, char c, unsigned i)
{
	memset(buf, c, 236);
	snprintf(buf + 236, 5, "%04u", i % 10000);
}

static void su_unlink_create(struct work *w)
{
	char nm[256];
	struct stat st;

	su_dirs(w);
	/* e's first block: ".", "..", four long names */
	for (unsigned i = 0; i < 4; i++) {
		long_name(nm, 'a', i);
		w_file(w, w->dirs[2], nm, 20 + i, 3000);
	}
	/* its second: "b0" with the record of a long name removed after
	 * it, then three long names */
	w_file(w, w->dirs[2], "b0", 30, 3000);
	long_name(nm, 'b', 1);
	OK(w, e2_mknod(w->fs, NULL, w->dirs[2], nm, S_IFREG | 0644, 0, 0, 0, &st));
	e2_forget(w->fs, st.st_ino, 1);
	for (unsigned i = 2; i < 5; i++) {
		long_name(nm, 'b', i);
		w_file(w, w->dirs[2], nm, 30 + i, 3000);
	}
	long_name(nm, 'b', 1);
	OK(w, e2_unlink(w->fs, NULL, w->dirs[2], nm));
}

/* New files take no room whose removal is not on disk yet (e2_dir_add_new):
 * past the stale name of an entry freed in place, in its block, and in a
 * new block when the only room is a record a removal widened.  Each new
 * entry reaches disk without waiting for the removal and the inode clear
 * before it, so the removed file can still be named next to the new one. */
static void run_unlink_create(struct work *w)
{
	char nm[256];

	OK(w, e2_unlink(w->fs, NULL, w->dirs[2], "b0"));
	long_name(nm, 'c', 1);
	w_file(w, w->dirs[2], nm, 41, 5000);
	long_name(nm, 'a', 1);
	OK(w, e2_unlink(w->fs, NULL, w->dirs[2], nm));
	long_name(nm, 'c', 0);
	w_file(w, w->dirs[2], nm, 40, 5000);
	w_rounds(w);
}

/* One round only: part of what is pending reaches disk. */
static void w_round1(struct work *w)
{
	size_t n;

	OK(w, cache_flush_round(e2_cache(w->fs), &n));
}

static void su_churn(struct work *w)
{
	su_dirs(w);
	w_file(w, w->dirs[1], "k0", 10, 3000);
	w_file(w, w->dirs[1], "k1", 11, 3000);
	w_file(w, w->dirs[1], "k9", 19, 3000);
}

/* Creates, unlinks and re-creates in one directory block, files written in
 * several e2_write calls (their inodes reach disk late), inodes reused.  An
 * unlink merges the last entry into its predecessor (a change that waits
 * for nothing); a create then splits that room, shortening the
 * predecessor's rec_len in a change that waits for the new inode; and
 * unlinking the predecessor merges its rec_len, as now cached, into the
 * entry before it.  That last change must not reach disk before the
 * create: the entry before would end inside the room the create's
 * rollback leaves ("directory corrupted"), or keep naming an inode that
 * has been cleared. */
static void run_churn(struct work *w)
{
	uint32_t d = w->dirs[1];

	OK(w, e2_unlink(w->fs, NULL, d, "k9"));
	w_file(w, d, "k2", 12, 20000);
	OK(w, e2_unlink(w->fs, NULL, d, "k1"));
	w_round1(w);
	w_file(w, d, "k3", 13, 17000);
	OK(w, e2_unlink(w->fs, NULL, d, "k2"));
	w_round1(w);
	w_file(w, d, "k1", 14, 9000);
	OK(w, e2_unlink(w->fs, NULL, d, "k0"));
	w_round1(w);
	w_file(w, d, "k4", 15, 26000);
	OK(w, e2_unlink(w->fs, NULL, d, "k3"));
	w_file(w, d, "k2", 16, 5000);
	w_round1(w);
	OK(w, e2_unlink(w->fs, NULL, d, "k1"));
	w_file(w, d, "k0", 17, 12000);
	OK(w, e2_unlink(w->fs, NULL, d, "k4"));
	w_rounds(w);
}

/* mkdir and rmdir, symlink and unlink, over and over in one directory
 * between rounds: a new name keeps off the removals not yet on disk by
 * growing the directory only a few blocks, once a round, and then goes
 * over them (dir_add); the directory must stay whole either way. */
static void run_dir_cycle(struct work *w)
{
	struct stat st;
	char name[16];

	for (unsigned i = 0; i < 12; i++) {
		snprintf(name, sizeof(name), "m%u", i);
		w_mkdir(w, w->dirs[1], name);
		OK(w, e2_rmdir(w->fs, NULL, w->dirs[1], name));
		snprintf(name, sizeof(name), "s%u", i);
		OK(w, e2_symlink(w->fs, NULL, w->dirs[1], name, "target", 0, 0, &st));
		e2_forget(w->fs, st.st_ino, 1);
		OK(w, e2_unlink(w->fs, NULL, w->dirs[1], name));
		if (i % 4 == 3)
			w_round1(w);
	}
	w_mkdir(w, w->dirs[1], "kept");
	w_file(w, w->dirs[1], "f", 1, 3000);
	w_rounds(w);
	/* a few blocks grown to keep off the removals, once a round: not one
	 * an iteration (E2_DIR_FRESH_MAX) */
	OK(w, e2_getattr(w->fs, w->dirs[1], &st));
	assert_true(st.st_size <= 5 * BS);
}

/* A random mix over a few names, flushing at random points. */
static void run_mixed(struct work *w)
{
	char nm[32], nm2[32];
	struct stat st, a;

	for (int step = 0; step < 40; step++) {
		uint32_t d = w->dirs[e2t_rng_below(&w->rng, w->ndirs)];
		uint32_t d2 = w->dirs[e2t_rng_below(&w->rng, w->ndirs)];
		unsigned k = (unsigned)e2t_rng_below(&w->rng, 6);
		int ret;

		snprintf(nm, sizeof(nm), "m%u", k);
		snprintf(nm2, sizeof(nm2), "m%u", (unsigned)e2t_rng_below(&w->rng, 6));
		ret = e2_lookup(w->fs, d, nm, &st);
		if (ret == 0)
			e2_forget(w->fs, st.st_ino, 1);
		else if (ret != -ENOENT)
			OK(w, ret);
		unsigned opc = (unsigned)e2t_rng_below(&w->rng, 8);

		if (w->trace)
			print_message("#   step %d: op %u on %u/%s (exists %d) other %u/%s\n", step,
				      opc, d, nm, ret == 0, d2, nm2);
		switch (opc) {
		case 0:
		case 1:
			if (ret == 0)
				break;
			w_file(w, d, nm, w->next_id++, e2t_rng_below(&w->rng, 40000));
			break;
		case 2:
			/* append more of the same content */
			if (ret == 0 && S_ISREG(st.st_mode)) {
				const struct nameids *e = name_find(w, nm);
				unsigned id;

				/* the id the file has now is its creation id,
				 * which appends keep; find it by content */
				if (st.st_size == 0 || !e)
					break;
				{
					uint8_t b;

					OK(w, e2_read(w->fs, st.st_ino, &b, 1, 0));
					id = 0;
					for (unsigned i = 0; i < e->n; i++)
						if (pat(e->ids[i], 0) == b)
							id = e->ids[i];
				}
				if (id)
					w_write_pat(w, st.st_ino, id, st.st_size,
						    1 + e2t_rng_below(&w->rng, 30000));
			}
			break;
		case 3:
			if (ret == 0 && S_ISREG(st.st_mode)) {
				off_t was = st.st_size;

				memset(&a, 0, sizeof(a));
				a.st_size = (off_t)e2t_rng_below(&w->rng, st.st_size + 1);
				OK(w, e2_setattr(w->fs, NULL, st.st_ino, &a, E2_SET_SIZE, &st));
				/* the tail being cut off may read as zeros,
				 * under each name of the file */
				for (unsigned di = 0; di < w->ndirs; di++)
					for (unsigned ki = 0; ki < 6; ki++) {
						char ln[32];
						struct stat t;

						snprintf(ln, sizeof(ln), "m%u", ki);
						if (e2_lookup(w->fs, w->dirs[di], ln, &t))
							continue;
						e2_forget(w->fs, t.st_ino, 1);
						if (t.st_ino == st.st_ino && name_find(w, ln))
							name_holes(w, ln, (uint64_t)a.st_size,
								   (uint64_t)was);
					}
			}
			break;
		case 4:
			if (ret == 0 && !S_ISDIR(st.st_mode))
				OK(w, e2_unlink(w->fs, NULL, d, nm));
			break;
		case 5:
			if (ret == 0 && S_ISREG(st.st_mode)) {
				struct stat t;
				int r2 = e2_lookup(w->fs, d2, nm2, &t);
				const struct nameids *e = name_find(w, nm);

				if (r2 == 0)
					e2_forget(w->fs, t.st_ino, 1);
				if (r2 == 0 && S_ISDIR(t.st_mode))
					break;
				OK(w, e2_rename(w->fs, NULL, d, nm, d2, nm2, 0));
				for (unsigned i = 0; e && i < e->n; i++)
					name_add(w, nm2, e->ids[i]);
				if (e && e->hto > e->hfrom)
					name_holes(w, nm2, e->hfrom, e->hto);
			}
			break;
		case 6:
			if (ret == 0 && S_ISREG(st.st_mode)) {
				struct stat t;
				const struct nameids *e = name_find(w, nm);

				if (e2_lookup(w->fs, d2, nm2, &t) == 0) {
					e2_forget(w->fs, t.st_ino, 1);
					break;
				}
				OK(w, e2_link(w->fs, NULL, st.st_ino, d2, nm2, &t));
				e2_forget(w->fs, t.st_ino, 1);
				for (unsigned i = 0; e && i < e->n; i++)
					name_add(w, nm2, e->ids[i]);
				if (e && e->hto > e->hfrom)
					name_holes(w, nm2, e->hfrom, e->hto);
			}
			break;
		default:
			if (ret != 0) {
				OK(w, e2_symlink(w->fs, NULL, d, nm, "m0", 0, 0, &st));
				e2_forget(w->fs, st.st_ino, 1);
			} else if (S_ISLNK(st.st_mode)) {
				OK(w, e2_unlink(w->fs, NULL, d, nm));
			}
		}
		if (e2t_rng_below(&w->rng, 3) == 0) {
			w_rounds(w);
			if (w->trace)
				print_message("#   rounds (log at %zu)\n",
					      bdev_recorder_count(w->rec));
		}
	}
	w_rounds(w);
}

/* ---- checking one crash state ------------------------------------------ */

struct seen {
	uint64_t *h;
	enum fsck_class *v;
	size_t n, cap;
};

struct checker {
	struct work *w;
	size_t index, stride, total;
	size_t checked, distinct, clean, benign, dangerous, semantic;
	size_t foreign;	  /* states where a file showed another file's data */
	size_t torn;	  /* states where a protected name had neither file */
	size_t oldtail;	  /* states where cut-off bytes came back */
	size_t holes;	  /* states where a file read zeros inside its size */
	size_t undurable; /* states where an fsynced file was not complete */
	unsigned natomic; /* the workload protects names (rename, exchange) */
	struct seen seen;
	char first[3000];
	bool fail_fast;
};

struct walkent {
	char *name;
	uint32_t ino;
};

struct walklist {
	struct walkent *v;
	size_t n;
};

static int walk_collect(const struct e2_dirent *d, void *arg)
{
	struct walklist *l = arg;

	if ((d->name_len == 1 && d->name[0] == '.') ||
	    (d->name_len == 2 && !memcmp(d->name, "..", 2)))
		return 0;
	if (l->n >= 4096)
		return 1;
	l->v = realloc(l->v, (l->n + 1) * sizeof(*l->v));
	if (!l->v)
		return 1;
	l->v[l->n].name = strndup(d->name, d->name_len);
	l->v[l->n].ino = d->ino;
	l->n++;
	return 0;
}

/* Check one regular file's content against the ids its name may carry. */
static int check_content(struct work *w, struct e2fs *fs, const char *name, uint32_t ino,
			 const struct stat *st, char *why, size_t whylen)
{
	const struct nameids *e = name_find(w, name);
	uint8_t *buf;
	size_t got = 0;
	int ret = 0;

	if (!e) {
		snprintf(why, whylen, "file '%s' (inode %u) was never created", name, ino);
		return -1;
	}
	if (st->st_size > FILE_CAP) {
		snprintf(why, whylen, "file '%s' has size %lld", name, (long long)st->st_size);
		return -1;
	}
	buf = malloc(st->st_size + 1);
	assert_non_null(buf);
	while (got < (size_t)st->st_size) {
		ssize_t n = e2_read(fs, ino, buf + got, st->st_size - got, (off_t)got);

		if (n <= 0) {
			snprintf(why, whylen, "read '%s' at %zu: %zd (%s)", name, got, n,
				 e2_error(fs));
			ret = -1;
			goto out;
		}
		got += n;
	}
	ret = -1;
	for (unsigned i = 0; i < e->n && ret; i++) {
		size_t k;

		for (k = 0; k < got; k++)
			if (buf[k] && buf[k] != pat(e->ids[i], k))
				break;
		if (k == got)
			ret = 0;
	}
	if (ret) {
		size_t k;

		for (k = 0; k < got && (!buf[k] || buf[k] == pat(e->ids[0], k)); k++)
			;
		snprintf(why, whylen,
			 "file '%s' (inode %u, size %zu) holds foreign data at byte %zu "
			 "(0x%02x; its ids: %u%s)",
			 name, ino, got, k, buf[k], e->ids[0], e->n > 1 ? ",..." : "");
		goto out;
	}
	for (size_t k = 0; k < got; k++)
		if (!buf[k] && (k < e->hfrom || k >= e->hto)) {
			size_t z = k;

			while (z < got && !buf[z])
				z++;
			snprintf(why, whylen,
				 "file '%s' (inode %u, size %zu) reads zeros inside its size at "
				 "bytes [%zu, %zu): the size reached disk before its data",
				 name, ino, got, k, z);
			ret = -1;
			goto out;
		}
	if (e->zto && got != e->zkeep) {
		for (uint64_t k = e->zfrom; k < e->zto && k < got; k++)
			if (buf[k]) {
				snprintf(why, whylen,
					 "file '%s' (inode %u, size %zu) shows cut-off bytes again "
					 "at byte %llu (0x%02x; zeros expected in [%llu, %llu))",
					 name, ino, got, (unsigned long long)k, buf[k],
					 (unsigned long long)e->zfrom, (unsigned long long)e->zto);
				ret = -1;
				break;
			}
	}
out:
	free(buf);
	return ret;
}

static int walk(struct work *w, struct e2fs *fs, uint32_t dir, int depth, char *why, size_t whylen)
{
	struct walklist l = {0};
	int ret;

	if (depth > 12) {
		snprintf(why, whylen, "directory tree deeper than 12");
		return -1;
	}
	ret = e2_readdir(fs, dir, 0, walk_collect, &l);
	if (ret) {
		snprintf(why, whylen, "readdir %u: %d (%s)", dir, ret, e2_error(fs));
		ret = -1;
	}
	for (size_t i = 0; i < l.n && !ret; i++) {
		struct stat st;
		int r = e2_lookup(fs, dir, l.v[i].name, &st);

		if (r) {
			snprintf(why, whylen, "lookup '%s' in %u: %d (%s)", l.v[i].name, dir, r,
				 e2_error(fs));
			ret = -1;
			break;
		}
		e2_forget(fs, st.st_ino, 1);
		if (S_ISDIR(st.st_mode) && strcmp(l.v[i].name, "lost+found"))
			ret = walk(w, fs, st.st_ino, depth + 1, why, whylen);
		else if (S_ISREG(st.st_mode))
			ret = check_content(w, fs, l.v[i].name, st.st_ino, &st, why, whylen);
		else if (S_ISLNK(st.st_mode)) {
			char buf[1024];
			int n = e2_readlink(fs, st.st_ino, buf, sizeof(buf));

			if (n < 0) {
				snprintf(why, whylen, "readlink '%s': %d", l.v[i].name, n);
				ret = -1;
			}
		}
	}
	for (size_t i = 0; i < l.n; i++)
		free(l.v[i].name);
	free(l.v);
	return ret;
}

/* name in dir is one of the candidate files, complete (or empty where
 * that is allowed). */
static int check_complete(struct e2fs *fs, const char *what, uint32_t dir, const char *name,
			  const struct acand *cand, unsigned ncand, char *why, size_t whylen)
{
	struct stat st;
	uint8_t *buf;
	size_t got = 0;
	int ret = e2_lookup(fs, dir, name, &st);

	if (ret) {
		snprintf(why, whylen, "%s '%s' missing: %d", what, name, ret);
		return -1;
	}
	e2_forget(fs, st.st_ino, 1);
	if (!S_ISREG(st.st_mode) || st.st_nlink < 1 || st.st_size > FILE_CAP) {
		snprintf(why, whylen, "%s '%s': mode %o nlink %lu size %lld", what, name,
			 (unsigned)st.st_mode, (unsigned long)st.st_nlink, (long long)st.st_size);
		return -1;
	}
	buf = malloc(st.st_size + 1);
	assert_non_null(buf);
	while (got < (size_t)st.st_size) {
		ssize_t n = e2_read(fs, st.st_ino, buf + got, st.st_size - got, (off_t)got);

		if (n <= 0)
			break;
		got += n;
	}
	ret = -1;
	for (unsigned v = 0; v < ncand && ret; v++) {
		size_t k;

		if (cand[v].empty_ok && st.st_ino == cand[v].ino && st.st_size == 0) {
			ret = 0;
			break;
		}
		if (got != cand[v].size || (size_t)st.st_size != got)
			continue;
		for (k = 0; k < got && buf[k] == pat(cand[v].id, k); k++)
			;
		if (k == got)
			ret = 0;
	}
	if (ret)
		snprintf(why, whylen,
			 "%s '%s' (inode %llu, size %lld) is not a complete expected file", what,
			 name, (unsigned long long)st.st_ino, (long long)st.st_size);
	free(buf);
	return ret;
}

/* check_complete() of a path from the root ("a/b/name"): a directory on
 * the way that is missing (say, put in lost+found by e2fsck) fails it. */
static int check_path(struct e2fs *fs, const char *path, const struct acand *cand, unsigned ncand,
		      char *why, size_t whylen)
{
	uint32_t dir = E2_ROOT_INO;
	const char *p = path, *slash;
	struct stat st;
	char part[64];

	while ((slash = strchr(p, '/'))) {
		snprintf(part, sizeof(part), "%.*s", (int)(slash - p), p);
		if (e2_lookup(fs, dir, part, &st) || !S_ISDIR(st.st_mode)) {
			snprintf(why, whylen, "rename target '%s': no directory '%s'", path, part);
			return -1;
		}
		e2_forget(fs, st.st_ino, 1);
		dir = (uint32_t)st.st_ino;
		p = slash + 1;
	}
	return check_complete(fs, "rename target", dir, p, cand, ncand, why, whylen);
}

/* Open the crash image read only through the library and check it. */
static int check_semantics(struct work *w, const struct crash_state *cs, char *why, size_t whylen)
{
	struct e2_opts o = {.readonly = true, .no_flusher = true};
	struct bdev *mem;
	struct e2fs *fs;
	int ret;

	ret = bdev_mem_create(cs->block_size, 0, cs->image, cs->image_len, &mem);
	assert_int_equal(ret, 0);
	ret = e2_open_bdev(mem, &o, &fs);
	if (ret) {
		snprintf(why, whylen, "open read only: %d (%s)", ret, e2_open_error());
		return -1;
	}
	/* the protected names first: theirs is the more specific failure */
	ret = 0;
	if (w->durable_name && cs->round >= w->durable_round) {
		struct acand want = {.id = w->durable_id, .size = w->durable_size};

		ret = check_complete(fs, "fsynced file", w->durable_dir, w->durable_name, &want, 1,
				     why, whylen);
		if (ret) {
			size_t wo = strlen(why);

			snprintf(why + wo, whylen - wo, " after e2_fsync returned");
		}
	}
	for (unsigned i = 0; !ret && i < w->natomic; i++)
		ret = check_complete(fs, "rename target", w->atomic_dir[i], w->atomic_name[i],
				     w->atomic, w->nacand, why, whylen);
	if (!ret && w->either[0] && check_path(fs, w->either[0], w->atomic, w->nacand, why, whylen))
		ret = check_path(fs, w->either[1], w->atomic, w->nacand, why, whylen);
	if (!ret)
		ret = walk(w, fs, E2_ROOT_INO, 0, why, whylen);
	e2_abandon(fs);
	return ret;
}

static bool seen_lookup(struct seen *s, uint64_t h, enum fsck_class *v)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->h[i] == h) {
			*v = s->v[i];
			return true;
		}
	return false;
}

static void seen_add(struct seen *s, uint64_t h, enum fsck_class v)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->h = realloc(s->h, s->cap * sizeof(*s->h));
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		assert_true(s->h && s->v);
	}
	s->h[s->n] = h;
	s->v[s->n] = v;
	s->n++;
}

static int count_cb(const struct crash_state *cs, void *arg)
{
	return 0;
}

static void describe_state(const struct crash_state *cs, char *buf, size_t len)
{
	size_t o = (size_t)snprintf(buf, len, "round %zu, %zu of %zu writes [", cs->round,
				    cs->napplied, cs->nround);

	for (size_t i = 0; i < cs->nround && i < 64 && o + 2 < len; i++)
		buf[o++] = cs->mask[i] ? '1' : '0';
	snprintf(buf + o, len - o, "%s]", cs->nround > 64 ? "..." : "");
}

static int check_cb(const struct crash_state *cs, void *arg)
{
	struct checker *c = arg;
	size_t idx = c->index++;
	struct e2t_fsck fr;
	struct crash_state repaired;
	enum fsck_class v;
	char why[512] = "", desc[128];
	void *fixed = NULL;
	size_t flen = 0;
	uint64_t h;
	int ret;

	/* An even sample of the states, always including the last. */
	if (idx % c->stride && idx + 1 != c->total)
		return 0;
	c->checked++;
	h = e2t_hash(cs->image, cs->image_len);
	if (seen_lookup(&c->seen, h, &v))
		goto count;
	c->distinct++;
	ret = e2t_fsck_mem_repair(cs->image, cs->image_len, &fr, &fixed, &flen);
	assert_int_equal(ret, 0);
	v = fr.verdict;
	/* The files are judged as a user finds them after the repair. */
	if (fixed) {
		repaired = *cs;
		repaired.image = fixed;
		repaired.image_len = flen;
	}
	if (check_semantics(c->w, fixed ? &repaired : cs, why, sizeof(why))) {
		v = FSCK_DANGEROUS;
		c->semantic++;
		if (strstr(why, "foreign data"))
			c->foreign++;
		if (strstr(why, "rename target"))
			c->torn++;
		if (strstr(why, "cut-off bytes"))
			c->oldtail++;
		if (strstr(why, "zeros inside its size"))
			c->holes++;
		if (strstr(why, "after e2_fsync returned"))
			c->undurable++;
	}
	if (v == FSCK_DANGEROUS && !c->first[0]) {
		/* the state, its dangerous findings first, then the rest */
		size_t o;
		char *l, *save;
		const char *dump;

		describe_state(cs, desc, sizeof(desc));
		if ((dump = getenv("E2_CRASH_DUMP")))
			e2t_write_file(dump, cs->image, cs->image_len);
		o = (size_t)snprintf(c->first, sizeof(c->first), "%s\n%s%s%s", desc,
				     why[0] ? "library: " : "", why, why[0] ? "\n" : "");
		for (int pass = 0; pass < 2; pass++) {
			char copy[sizeof(fr.findings)];

			memcpy(copy, fr.findings, sizeof(copy));
			for (l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
				if ((l[0] == 'D') == (pass == 0) && o < sizeof(c->first))
					o += (size_t)snprintf(c->first + o, sizeof(c->first) - o,
							      "%s\n", l);
		}
	}
	e2t_fsck_free(&fr);
	free(fixed);
	seen_add(&c->seen, h, v);
count:
	if (v == FSCK_CLEAN)
		c->clean++;
	else if (v == FSCK_BENIGN)
		c->benign++;
	else
		c->dangerous++;
	return 0;
}

/* Run one workload under `cons` and check up to cap of its crash states. */
static void run_workload(const struct workload *wl, enum consistency cons, uint64_t seed,
			 size_t cap, struct checker *c)
{
	struct e2_opts o = {.consistency = cons,
			    .no_flusher = true,
			    .cache_blocks = g_cache_blocks,
			    .round_max_blocks = g_round_max,
			    .clock = e2t_fixed_clock};
	struct crash_opts co = {.max_exhaustive = 8, .samples = 24, .seed = seed};
	struct work *w = calloc(1, sizeof(*w));
	struct bdev *mem, *rec;
	size_t n = 0, nlog;
	int ret;

	assert_non_null(w);
	w->name = wl->name;
	w->cons = cons;
	w->seed = seed;
	w->next_id = 10;
	w->trace = e2t_env_long("E2_CRASH_TRACE", 0) != 0;
	e2t_rng_seed(&w->rng, seed);
	assert_int_equal(bdev_mem_create(BS, 0, g_img, g_len, &mem), 0);
	assert_int_equal(bdev_recorder_create(mem, &rec), 0);
	w->rec = rec;
	ret = e2_open_bdev(rec, &o, &w->fs);
	if (ret)
		fail_msg("workload %s: e2_open_bdev: %d (%s)", wl->name, ret, e2_open_error());
	if (wl->setup)
		wl->setup(w);
	else
		su_dirs(w);
	OK(w, e2_sync(w->fs));
	OK(w, bdev_recorder_reset(rec));
	wl->run(w);

	if (e2t_env_long("E2_CRASH_LOG", 0)) {
		/* the recorded log, one line per round: block numbers written */
		char line[2048];
		size_t lo = 0;

		for (size_t i = 0; i < bdev_recorder_count(rec); i++) {
			const struct rec_event *ev = bdev_recorder_event(rec, i);

			if (ev->kind == REC_WRITE && lo < sizeof(line) - 24)
				lo += (size_t)snprintf(line + lo, sizeof(line) - lo, " %llu",
						       (unsigned long long)ev->blkno);
			if (ev->kind == REC_BARRIER || i + 1 == bdev_recorder_count(rec)) {
				line[lo] = 0;
				print_message("#   %s round:%s\n", wl->name, line);
				lo = 0;
			}
		}
	}
	memset(c, 0, sizeof(*c));
	c->w = w;
	c->natomic = w->natomic + (w->either[0] != NULL);
	ret = crash_enumerate(rec, &co, count_cb, NULL, &n);
	assert_int_equal(ret, 0);
	c->total = n;
	c->stride = n > cap ? (n + cap - 1) / cap : 1;
	ret = crash_enumerate(rec, &co, check_cb, c, NULL);
	assert_int_equal(ret, 0);
	nlog = bdev_recorder_count(rec);
	e2_abandon(w->fs);
	g_total_states += c->checked;
	print_message(
	    "# %-16s %-11s%s seed %llu: %zu log events, %zu states, %zu checked "
	    "(%zu distinct): %zu clean, %zu repaired by e2fsck -fy, %zu dangerous (%zu by library "
	    "checks: %zu foreign data, %zu torn rename, %zu cut-off bytes back, "
	    "%zu fsynced file incomplete, %zu size over a hole)\n",
	    wl->name, cons == CONSISTENCY_NONE ? "none" : "softupdates",
	    g_round_max ? " small-rounds" : "", (unsigned long long)seed, nlog, n, c->checked,
	    c->distinct, c->clean, c->benign, c->dangerous, c->semantic, c->foreign, c->torn,
	    c->oldtail, c->undurable, c->holes);
	free(c->seen.h);
	free(c->seen.v);
	free(w);
}

/* Replaces of one name with no round between them, as a program
 * replacing a file in a loop makes them: each rename parks the file it
 * replaces in lost+found while the removal of the name parked before is
 * not on disk yet, so the new parked name goes past the old one
 * (e2_dir_add_avoid); the retargets and removals are one patch each
 * (one directory block). */
static void run_replace_chain(struct work *w)
{
	OK(w, e2_rename(w->fs, NULL, E2_ROOT_INO, "new", E2_ROOT_INO, "target", 0));
	for (unsigned id = 3; id <= 4; id++) {
		struct acand *a = &w->atomic[w->nacand++];

		*a = (struct acand){.id = id, .size = FRESH_SIZE, .empty_ok = true};
		a->ino = w_file1(w, E2_ROOT_INO, "new", id, FRESH_SIZE);
		name_add(w, "target", id);
		OK(w, e2_rename(w->fs, NULL, E2_ROOT_INO, "new", E2_ROOT_INO, "target", 0));
	}
	w_rounds(w);
}

static const struct workload workloads[] = {
    {"create", NULL, run_create, true, false, false},
    {"mkdir", NULL, run_mkdir, true, false, false},
    {"mkdir-tree", NULL, run_mkdir_tree, true, false, false},
    {"write-append", NULL, run_append, true, false, true},
    {"truncate", su_truncate, run_truncate, true, false, false},
    {"trunc-sparse", su_trunc_sparse, run_trunc_sparse, true, false, false},
    {"shrink-grow", su_shrink_grow, run_shrink_grow, true, true, false},
    {"unlink", su_unlink, run_unlink, true, false, false},
    {"rmdir", su_rmdir, run_rmdir, true, false, false},
    {"rename", su_rename, run_rename, true, false, false},
    {"rename-over", su_rename_over, run_rename_over, true, false, false},
    {"rename-new-dirs", su_rename_new_dirs, run_rename_new_dirs, true, false, false},
    {"rename-over-dirs", su_rename_over_dirs, run_rename_over_dirs, true, false, false},
    {"exchange", su_exchange, run_exchange, true, false, false},
    {"rename-over-big", su_rename_over_dirs, run_rename_over_big, true, false, false},
    {"replace-chain", su_rename_over, run_replace_chain, true, false, false},
    {"dir-grow", su_dir_grow, run_dir_grow, true, false, false},
    {"holes", su_holes, run_holes, true, false, false},
    {"punch", su_punch, run_punch, true, false, false},
    {"link", su_link, run_link, true, false, false},
    {"symlink", NULL, run_symlink, true, false, false},
    {"dir-cycle", su_dirs, run_dir_cycle, true, false, false},
    {"reuse", NULL, run_reuse, true, false, false},
    {"dir-churn", su_churn, run_churn, true, false, false},
    {"unlink-create", su_unlink_create, run_unlink_create, true, false, false},
    {"fsync", NULL, run_fsync, false, false, false},
    {"fsync-new", NULL, run_fsync_new, false, false, false},
};
#define NWORK (sizeof(workloads) / sizeof(workloads[0]))

static size_t cap_su(void)
{
	return (size_t)e2t_env_long("E2_CRASH_CAP", E2T_SANITIZED ? 80 : 300);
}

/* Print text as TAP comment lines. */
static void print_comment(const char *text)
{
	const char *p = text;

	while (*p) {
		const char *nl = strchr(p, '\n');
		int n = nl ? (int)(nl - p) : (int)strlen(p);

		print_message("#   %.*s\n", n, p);
		p += n + (nl ? 1 : 0);
	}
}

/* Run a workload under soft updates; false (and the first bad state
 * printed) if any state was dangerous. */
static bool check_softupdates(const struct workload *wl, uint64_t seed)
{
	const char *only = getenv("E2_CRASH_ONLY");
	struct checker c;

	if (only && *only && strcmp(only, wl->name))
		return true;

	run_workload(wl, CONSISTENCY_SOFTUPDATES, seed, cap_su(), &c);
	if (c.checked == 0) {
		print_message("# workload %s: no crash states\n", wl->name);
		return false;
	}
	if (c.dangerous) {
		print_message("# workload %s seed %llu: %zu dangerous crash states under soft "
			      "updates; the first:\n",
			      wl->name, (unsigned long long)seed, c.dangerous);
		print_comment(c.first);
		return false;
	}
	return true;
}

static void test_crash_each_op(void **state)
{
	uint64_t seed = e2t_seed("E2_CRASH_SEED", 1);
	size_t before = g_total_states;
	char bad[256] = "";

	for (size_t i = 0; i < NWORK; i++)
		if (!check_softupdates(&workloads[i], seed)) {
			strncat(bad, " ", sizeof(bad) - strlen(bad) - 1);
			strncat(bad, workloads[i].name, sizeof(bad) - strlen(bad) - 1);
		}
	print_message("# %zu states checked\n", g_total_states - before);
	if (bad[0])
		fail_msg("dangerous crash states under soft updates in:%s", bad);
}

/* Again with at most 3 blocks per round: many small rounds, so that the
 * order between blocks of one operation is visible at round boundaries. */
static void test_crash_each_op_small_rounds(void **state)
{
	uint64_t seed = e2t_seed("E2_CRASH_SEED", 1);
	size_t before = g_total_states;
	char bad[256] = "";

	g_round_max = 3;
	for (size_t i = 0; i < NWORK; i++)
		if (!check_softupdates(&workloads[i], seed + 7)) {
			strncat(bad, " ", sizeof(bad) - strlen(bad) - 1);
			strncat(bad, workloads[i].name, sizeof(bad) - strlen(bad) - 1);
		}
	g_round_max = 0;
	print_message("# %zu states checked\n", g_total_states - before);
	if (bad[0])
		fail_msg("dangerous crash states under soft updates (3-block rounds) in:%s", bad);
}

static void test_crash_mixed(void **state)
{
	uint64_t seed = e2t_seed("E2_CRASH_SEED", 1);
	long n = e2t_env_long("E2_CRASH_MIXED", 8);
	size_t before = g_total_states;
	const struct workload wl = {"mixed", NULL, run_mixed, true, false, false};
	char bad[256] = "";

	for (long i = 0; i < n; i++) {
		bool ok;

		/* every other one with 2-block rounds */
		g_round_max = i % 2 ? 2 : 0;
		ok = check_softupdates(&wl, seed * 1000 + (uint64_t)i);
		g_round_max = 0;
		if (!ok) {
			size_t o = strlen(bad);

			snprintf(bad + o, sizeof(bad) - o, " %llu",
				 (unsigned long long)(seed * 1000 + (uint64_t)i));
		}
	}
	print_message("# %zu states checked\n", g_total_states - before);
	if (bad[0])
		fail_msg("dangerous crash states under soft updates for mixed seeds:%s", bad);
}

/* The same with a cache of a few dozen blocks: dirty blocks are written
 * in the middle of operations to make room, in rounds nobody asked for. */
static void test_crash_mixed_tiny_cache(void **state)
{
	uint64_t seed = e2t_seed("E2_CRASH_SEED", 1);
	long n = e2t_env_long("E2_CRASH_MIXED", 8) / 2;
	size_t before = g_total_states;
	const struct workload wl = {"mixed-tiny-cache", NULL, run_mixed, true, false, false};
	char bad[256] = "";

	g_cache_blocks = 24;
	for (long i = 0; i < n; i++)
		if (!check_softupdates(&wl, seed * 1000 + 500 + (uint64_t)i)) {
			size_t o = strlen(bad);

			snprintf(bad + o, sizeof(bad) - o, " %llu",
				 (unsigned long long)(seed * 1000 + 500 + (uint64_t)i));
		}
	g_cache_blocks = 0;
	print_message("# %zu states checked\n", g_total_states - before);
	if (bad[0])
		fail_msg("dangerous crash states under soft updates for mixed seeds:%s", bad);
}

/* Mixed workloads on an image with four block groups of 512 blocks: files
 * and directories spread over groups, with per-group bitmaps and counts. */
static void test_crash_mixed_four_groups(void **state)
{
	uint64_t seed = e2t_seed("E2_CRASH_SEED", 1);
	long n = e2t_env_long("E2_CRASH_MIXED", 8) / 2;
	size_t before = g_total_states;
	const struct workload wl = {"mixed-4-groups", NULL, run_mixed, true, false, false};
	char bad[256] = "";

	g_img = g_img4;
	g_len = g_len4;
	for (long i = 0; i < n; i++) {
		bool ok;

		g_round_max = i % 2 ? 3 : 0;
		ok = check_softupdates(&wl, seed * 1000 + 700 + (uint64_t)i);
		g_round_max = 0;
		if (!ok) {
			size_t o = strlen(bad);

			snprintf(bad + o, sizeof(bad) - o, " %llu",
				 (unsigned long long)(seed * 1000 + 700 + (uint64_t)i));
		}
	}
	g_img = g_img1;
	g_len = g_len1;
	print_message("# %zu states checked\n", g_total_states - before);
	if (bad[0])
		fail_msg("dangerous crash states under soft updates for mixed seeds:%s", bad);
}

/* The negative control: without ordering the same workloads must leave
 * dangerous states, or the checks above prove nothing. */
static void test_crash_none_is_caught(void **state)
{
	uint64_t seed = e2t_seed("E2_CRASH_SEED", 1);
	size_t before = g_total_states, total_bad = 0, missed = 0, total_foreign = 0;
	size_t total_torn = 0;
	char missed_names[256] = "";

	for (size_t i = 0; i < NWORK; i++) {
		struct checker c;

		run_workload(&workloads[i], CONSISTENCY_NONE, seed, 60, &c);
		total_bad += c.dangerous;
		total_foreign += c.foreign;
		total_torn += c.torn;
		if (c.dangerous) {
			/* the state, then its first finding */
			char *nl = strchr(c.first, '\n');
			char *nl2 = nl ? strchr(nl + 1, '\n') : NULL;

			if (nl2)
				*nl2 = 0;
			if (nl)
				*nl = ' ';
			print_message("#   e.g. %s\n", c.first);
		}
		/* each library check a workload sets up must fire for it:
		 * a rename check that never fails proves nothing */
		if ((workloads[i].ordering_matters && c.dangerous == 0) ||
		    (c.natomic && c.torn == 0) || (workloads[i].tail_fires && c.oldtail == 0) ||
		    (workloads[i].hole_fires && c.holes == 0)) {
			size_t o = strlen(missed_names);

			missed++;
			snprintf(missed_names + o, sizeof(missed_names) - o, " %s%s%s%s%s",
				 workloads[i].name, c.dangerous ? "" : "(dangerous)",
				 c.natomic && !c.torn ? "(torn rename)" : "",
				 workloads[i].tail_fires && !c.oldtail ? "(cut-off bytes)" : "",
				 workloads[i].hole_fires && !c.holes ? "(size over a hole)" : "");
		}
	}
	print_message("# %zu states checked under none, %zu dangerous, %zu with foreign data, "
		      "%zu with a rename target that is neither file\n",
		      g_total_states - before, total_bad, total_foreign, total_torn);
	/* the data check, too, must be able to fail */
	if (total_foreign == 0)
		fail_msg("no state under CONSISTENCY_NONE showed stale data of another file");
	if (total_torn == 0)
		fail_msg("no state under CONSISTENCY_NONE broke a rename over a target");
	if (missed)
		fail_msg("under CONSISTENCY_NONE no state failed the named check for:%s",
			 missed_names);
}

/* The fsync check's own negative control: the same expectations recorded
 * without calling e2_fsync must fail under soft updates too. */
static void test_crash_fsync_check_fires(void **state)
{
	uint64_t seed = e2t_seed("E2_CRASH_SEED", 1);
	const struct workload wl[] = {
	    {"fsync-skipped", NULL, run_fsync_skipped, false, false, false},
	    {"fsync-new-skipped", NULL, run_fsync_new_skipped, false, false, false},
	};
	struct checker c;

	for (size_t i = 0; i < sizeof(wl) / sizeof(wl[0]); i++) {
		run_workload(&wl[i], CONSISTENCY_SOFTUPDATES, seed, 60, &c);
		if (c.undurable == 0)
			fail_msg("the fsync durability check never failed without e2_fsync (%s)",
				 wl[i].name);
	}
}

/* One run under CONSISTENCY_NONE per variant of the soft-updates tests
 * (3-block rounds, a 24-block cache, four groups): each must find
 * dangerous states, and with 3-block rounds a broken rename too, or that
 * variant's clean result proves nothing. */
static void test_crash_none_variants(void **state)
{
	uint64_t seed = e2t_seed("E2_CRASH_SEED", 1);
	const struct workload mixed = {"mixed", NULL, run_mixed, true, false, false};
	char missed[256] = "";
	struct checker c;
	size_t torn = 0;

	g_round_max = 3;
	for (size_t i = 0; i < NWORK; i++) {
		if (strcmp(workloads[i].name, "unlink") && strcmp(workloads[i].name, "exchange") &&
		    strcmp(workloads[i].name, "rename-over-big"))
			continue;
		run_workload(&workloads[i], CONSISTENCY_NONE, seed + 7, 120, &c);
		torn += c.torn;
		if (!c.dangerous) {
			strncat(missed, " small-rounds:", sizeof(missed) - strlen(missed) - 1);
			strncat(missed, workloads[i].name, sizeof(missed) - strlen(missed) - 1);
		}
	}
	/* the rename check, too, must fail with small rounds (in one of the
	 * two renaming workloads: which one depends on the block layout) */
	if (!torn)
		strncat(missed, " small-rounds:torn-rename", sizeof(missed) - strlen(missed) - 1);
	run_workload(&mixed, CONSISTENCY_NONE, seed * 1000 + 1, 40, &c);
	g_round_max = 0;
	if (!c.dangerous)
		strncat(missed, " small-rounds:mixed", sizeof(missed) - strlen(missed) - 1);

	g_cache_blocks = 24;
	run_workload(&mixed, CONSISTENCY_NONE, seed * 1000 + 500, 40, &c);
	g_cache_blocks = 0;
	if (!c.dangerous)
		strncat(missed, " tiny-cache:mixed", sizeof(missed) - strlen(missed) - 1);

	g_img = g_img4;
	g_len = g_len4;
	run_workload(&mixed, CONSISTENCY_NONE, seed * 1000 + 700, 40, &c);
	g_img = g_img1;
	g_len = g_len1;
	if (!c.dangerous)
		strncat(missed, " four-groups:mixed", sizeof(missed) - strlen(missed) - 1);
	if (missed[0])
		fail_msg("no dangerous state under CONSISTENCY_NONE for:%s", missed);
}

/* The classifier itself, on images damaged by hand with debugfs: each case
 * must come out as expected, or the crash verdicts above mean nothing. */
static void test_fsck_classifier(void **state)
{
	static const struct {
		const char *debugfs; /* commands, ';' separated */
		enum fsck_class want;
	} cases[] = {
	    {"", FSCK_CLEAN},
	    {"setb 1500 5", FSCK_BENIGN},	      /* leaked blocks */
	    {"sif /f links_count 3", FSCK_BENIGN},    /* link count too high */
	    {"sif /f links_count 0", FSCK_DANGEROUS}, /* entry naming a deleted inode */
	    {"clri /f", FSCK_DANGEROUS},	      /* entry to a cleared inode */
	    {"unlink /z", FSCK_BENIGN},		      /* unattached, zero length */
	    {"unlink /f", FSCK_BENIGN},		      /* unattached, holding data */
	    {"unlink /d", FSCK_BENIGN},		      /* unconnected directory */
	    {"ln /f /d/f", FSCK_DANGEROUS},	      /* link count too low */
	    {"freeb 12", FSCK_DANGEROUS},	      /* used block marked free */
	    {"freei /f", FSCK_DANGEROUS},	      /* used inode marked free */
	    {"sif /f block[0] 5", FSCK_DANGEROUS},    /* block shared with metadata */
	    {"sif /d size 0", FSCK_BENIGN},	      /* a directory size e2fsck fixes */
	};
	char *path = e2t_tmpfile("classify");
	void *img;
	size_t len;

	assert_non_null(path);
	assert_int_equal(e2t_mkfs(path, IMG_KIB, BS, NULL, NULL), 0);
	{
		char *cmd;

		assert_true(asprintf(&cmd,
				     "f=$(mktemp) && head -c 5000 /dev/urandom > $f && "
				     "debugfs -w -f - '%s' >/dev/null 2>&1 <<EOF\n"
				     "write $f f\nwrite /dev/null z\nmkdir d\nEOF\nrm -f $f",
				     path) > 0);
		assert_int_equal(e2t_sh(cmd, NULL), 0);
		free(cmd);
	}
	assert_int_equal(e2t_read_file(path, &img, &len), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct e2t_fsck fr;
		char *cmd;

		assert_int_equal(e2t_write_file(path, img, len), 0);
		if (cases[i].debugfs[0]) {
			assert_true(
			    asprintf(&cmd, "debugfs -w -R '%s' '%s'", cases[i].debugfs, path) > 0);
			assert_int_equal(e2t_sh(cmd, NULL), 0);
			free(cmd);
		}
		assert_int_equal(e2t_fsck_file(path, &fr), 0);
		print_message("# classify '%s': %s\n", cases[i].debugfs,
			      fsck_class_name(fr.verdict));
		if (fr.verdict != cases[i].want)
			fail_msg("debugfs '%s': e2fsck verdict %s, expected %s\n%s",
				 cases[i].debugfs, fsck_class_name(fr.verdict),
				 fsck_class_name(cases[i].want), fr.output);
		e2t_fsck_free(&fr);
	}
	free(img);
	unlink(path);
	free(path);
}

static int group_setup(void **state)
{
	int ret = e2t_mkfs_mem(IMG_KIB, BS, NULL, &g_img1, &g_len1);

	if (!ret)
		ret = e2t_mkfs_mem(IMG_KIB, BS, "-g 512 -N 256", &g_img4, &g_len4);
	if (ret) {
		print_message("# mke2fs failed: %d\n", ret);
		return -1;
	}
	g_img = g_img1;
	g_len = g_len1;
	return 0;
}

static int group_teardown(void **state)
{
	free(g_img1);
	free(g_img4);
	print_message("# %zu states checked\n", g_total_states);
	return 0;
}

/* Every test, in order.  PART (the one argument) runs only a part of them,
 * for tests/run.sh to run the parts side by side: the parts are slices of
 * this list, so together they run every test once. */
static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_fsck_classifier),
    cmocka_unit_test(test_crash_each_op),
    cmocka_unit_test(test_crash_each_op_small_rounds),
    cmocka_unit_test(test_crash_mixed),
    cmocka_unit_test(test_crash_mixed_tiny_cache),
    cmocka_unit_test(test_crash_mixed_four_groups),
    cmocka_unit_test(test_crash_none_is_caught),
    cmocka_unit_test(test_crash_none_variants),
    cmocka_unit_test(test_crash_fsync_check_fires),
};

static const struct {
	const char *name;
	size_t from, to; /* tests[from] up to, not with, tests[to] */
} parts[] = {
    {"ops", 0, 2},	/* the classifier, each operation */
    {"rounds", 2, 3},	/* each operation in small rounds */
    {"mixed", 3, 5},	/* mixed workloads, and with a tiny cache */
    {"controls", 5, 9}, /* four groups, and every CONSISTENCY_NONE control */
};

int main(int argc, char **argv)
{
	size_t from = 0, to = sizeof(tests) / sizeof(tests[0]), i;

	/* the slices must cover the list, each test once */
	for (i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		if (parts[i].from != (i ? parts[i - 1].to : 0) ||
		    (i + 1 == sizeof(parts) / sizeof(parts[0]) && parts[i].to != to)) {
			fprintf(stderr, "%s: part '%s' leaves a gap\n", argv[0], parts[i].name);
			return 70;
		}
	/* Each crash state takes several image-sized buffers (the copy for
	 * the library's checks, e2fsck's repair read back), freed before the
	 * next state.  glibc would map each one afresh and unmap it at the
	 * free, and every first touch of a page is a fault, which in a
	 * virtual machine costs more than the copy: keep them on the heap,
	 * which the next state reuses. */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 128 << 20);
	if (argc > 2) {
		fprintf(stderr, "usage: %s [PART]\n", argv[0]);
		return 64;
	}
	if (argc == 2) {
		for (i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
			if (!strcmp(parts[i].name, argv[1]))
				break;
		if (i == sizeof(parts) / sizeof(parts[0])) {
			fprintf(stderr, "%s: no part '%s' (ops, rounds, mixed, controls)\n",
				argv[0], argv[1]);
			return 64;
		}
		from = parts[i].from;
		to = parts[i].to;
	}
	return _cmocka_run_group_tests(argc == 2 ? argv[1] : "test_e2_crash", tests + from,
				       to - from, group_setup, group_teardown);
}
