/* Operations of the ext2 module that fail part way.
 *
 * The device (a memory device with fault injection, under a cache of a few
 * blocks so that operations read and write in their middle) starts failing
 * reads, or writes, after n successful ones, for every n until the
 * operation gets through.  Whatever the operation returned, after the
 * faults stop:
 *   - the same file system is still usable: the operation run again
 *     returns success or a plain "already done" error (EEXIST, ENOENT);
 *   - e2_sync succeeds and e2fsck -fn finds the image clean or with only
 *     the findings a soft-updates crash may leave (e2test_util.c), so a
 *     failure in the middle never leaves a half-made name, a dangling
 *     entry or a count that is too low.
 * With write errors the sync under the fault fails and the dirty data is
 * written by the next one.  The negative control: the classifier must see
 * a hand-made half-done state (an entry naming a free inode) as dangerous,
 * or the loop above proves nothing.  And under a journal, a commit whose
 * checkpoint cannot write fails with a message saying so and loses
 * nothing (test_journal_checkpoint_fault). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bdev/bdev.h"
#include "engine/cache.h"
#include "ext2/e2.h"
#include "e2test_util.h"

#define BS	1024
#define MAXSKIP 400

struct ids {
	uint32_t d, e, x, f1, f2, tgt;
};

static void *g_img;
static size_t g_len;
static struct ids g_id; /* found once: the operations start with a cold cache */

static uint32_t look(struct e2fs *fs, uint32_t dir, const char *name)
{
	struct stat st;

	if (e2_lookup(fs, dir, name, &st))
		return 0;
	e2_forget(fs, st.st_ino, 1);
	return (uint32_t)st.st_ino;
}

static void ids_of(struct e2fs *fs, struct ids *id)
{
	id->d = look(fs, E2_ROOT_INO, "d");
	id->e = id->d ? look(fs, id->d, "e") : 0;
	id->x = look(fs, E2_ROOT_INO, "x");
	id->f1 = id->d ? look(fs, id->d, "f1") : 0;
	id->f2 = id->d ? look(fs, id->d, "f2") : 0;
	id->tgt = look(fs, E2_ROOT_INO, "tgt");
}

static void fill(struct e2fs *fs, uint32_t ino, size_t size, uint64_t off)
{
	uint8_t *buf = malloc(size);

	assert_non_null(buf);
	for (size_t i = 0; i < size; i++)
		buf[i] = (uint8_t)(1 + (off + i) % 251);
	assert_int_equal(e2_write(fs, NULL, ino, buf, size, (off_t)off), (ssize_t)size);
	free(buf);
}

static uint32_t mk(struct e2fs *fs, uint32_t dir, const char *name, mode_t mode)
{
	struct stat st;

	if (S_ISDIR(mode))
		assert_int_equal(e2_mkdir(fs, NULL, dir, name, mode & 07777, 0, 0, &st), 0);
	else
		assert_int_equal(e2_mknod(fs, NULL, dir, name, mode, 0, 0, 0, &st), 0);
	e2_forget(fs, st.st_ino, 1);
	return (uint32_t)st.st_ino;
}

/* ---- the operations ----------------------------------------------------- */

static int op_create(struct e2fs *fs, const struct ids *id)
{
	struct stat st;
	int r = e2_mknod(fs, NULL, id->e, "new", S_IFREG | 0644, 0, 0, 0, &st);

	if (!r)
		e2_forget(fs, st.st_ino, 1);
	return r;
}

static int op_mkdir(struct e2fs *fs, const struct ids *id)
{
	struct stat st;
	int r = e2_mkdir(fs, NULL, id->e, "newdir", 0755, 0, 0, &st);

	if (!r)
		e2_forget(fs, st.st_ino, 1);
	return r;
}

static int op_symlink(struct e2fs *fs, const struct ids *id)
{
	char slow[700];
	struct stat st;
	int r;

	memset(slow, 'q', sizeof(slow) - 1);
	slow[sizeof(slow) - 1] = 0;
	r = e2_symlink(fs, NULL, id->d, "sl", slow, 0, 0, &st);
	if (!r)
		e2_forget(fs, st.st_ino, 1);
	return r;
}

static int op_link(struct e2fs *fs, const struct ids *id)
{
	struct stat st;
	int r = e2_link(fs, NULL, id->f1, id->e, "l1", &st);

	if (!r)
		e2_forget(fs, st.st_ino, 1);
	return r;
}

static int op_unlink(struct e2fs *fs, const struct ids *id)
{
	return e2_unlink(fs, NULL, id->d, "f2");
}

static int op_rmdir(struct e2fs *fs, const struct ids *id)
{
	return e2_rmdir(fs, NULL, id->x, "y");
}

static int op_rename(struct e2fs *fs, const struct ids *id)
{
	return e2_rename(fs, NULL, id->d, "f1", id->e, "f1b", 0);
}

static int op_rename_over(struct e2fs *fs, const struct ids *id)
{
	return e2_rename(fs, NULL, id->d, "f2", E2_ROOT_INO, "tgt", 0);
}

static int op_rename_dir(struct e2fs *fs, const struct ids *id)
{
	return e2_rename(fs, NULL, id->x, "y", id->e, "y", 0);
}

static int op_exchange(struct e2fs *fs, const struct ids *id)
{
	return e2_rename(fs, NULL, id->d, "f1", E2_ROOT_INO, "tgt", E2_RENAME_EXCHANGE);
}

static int op_grow(struct e2fs *fs, const struct ids *id)
{
	static uint8_t buf[300000];
	ssize_t n;

	memset(buf, 7, sizeof(buf));
	n = e2_write(fs, NULL, id->f1, buf, sizeof(buf), 5000);
	return n < 0 ? (int)n : 0;
}

static int op_truncate(struct e2fs *fs, const struct ids *id)
{
	struct stat a = {0}, st;

	a.st_size = 100;
	return e2_setattr(fs, NULL, id->f2, &a, E2_SET_SIZE, &st);
}

static const struct {
	const char *name;
	int (*fn)(struct e2fs *fs, const struct ids *id);
} ops[] = {
    {"create", op_create},	   {"mkdir", op_mkdir},
    {"symlink", op_symlink},	   {"link", op_link},
    {"unlink", op_unlink},	   {"rmdir", op_rmdir},
    {"rename", op_rename},	   {"rename-over", op_rename_over},
    {"rename-dir", op_rename_dir}, {"exchange", op_exchange},
    {"write-grow", op_grow},	   {"truncate", op_truncate},
};
#define NOPS (sizeof(ops) / sizeof(ops[0]))

/* ---- running them -------------------------------------------------------- */

static struct e2fs *open_mem(const void *img, size_t len, struct bdev **mem)
{
	struct e2_opts o = {.no_flusher = true, .cache_blocks = 16};
	struct e2fs *fs = NULL;
	int r;

	assert_int_equal(bdev_mem_create(BS, 0, img, len, mem), 0);
	r = e2_open_bdev(*mem, &o, &fs);
	if (r)
		fail_msg("e2_open_bdev: %d (%s)", r, e2_open_error());
	return fs;
}

/* Sync, then e2fsck a copy of the image; the verdict. */
static enum fsck_class sync_and_check(struct e2fs *fs, struct bdev *mem, char *why, size_t len)
{
	struct e2t_fsck fr;
	enum fsck_class v;
	int r = e2_sync(fs);

	if (r) {
		snprintf(why, len, "e2_sync after the faults: %d (%s)", r, e2_error(fs));
		return FSCK_DANGEROUS;
	}
	/* (e2t_fsck_mem only writes the bytes out to a scratch file) */
	assert_int_equal(e2t_fsck_mem(bdev_mem_data(mem), g_len, &fr), 0);
	v = fr.verdict;
	snprintf(why, len, "%s", fr.findings);
	e2t_fsck_free(&fr);
	return v;
}

static void run_faults(enum bdev_fault kind, const char *kname, size_t *nfailed, size_t *nruns,
		       size_t *nsyncfail, size_t *nmidway)
{
	char bad[4096] = "";

	for (size_t k = 0; k < NOPS; k++) {
		size_t failed = 0, runs = 0, midway = 0;

		for (unsigned skip = 0; skip < MAXSKIP; skip++) {
			struct bdev *mem;
			struct e2fs *fs = open_mem(g_img, g_len, &mem);
			struct ids id = g_id;
			char why[2048];
			enum fsck_class v;
			struct cache_stats s0, s1;
			int r, r2;

			cache_get_stats(e2_cache(fs), &s0);
			bdev_mem_inject(mem, kind, skip, 1u << 30, -EIO);
			r = ops[k].fn(fs, &id);
			cache_get_stats(e2_cache(fs), &s1);
			/* failed after some of its changes were made */
			if (r && s1.patches_created != s0.patches_created)
				midway++;
			if (kind == BDEV_FAULT_WRITE && e2_sync(fs))
				(*nsyncfail)++; /* dirty data kept, written below */
			bdev_mem_inject(mem, kind, 0, 0, 0);
			runs++;
			if (r)
				failed++;
			/* The same file system goes on: the operation again. */
			r2 = ops[k].fn(fs, &id);
			v = sync_and_check(fs, mem, why, sizeof(why));
			if (r2 && r2 != -EEXIST && r2 != -ENOENT && v != FSCK_DANGEROUS) {
				snprintf(why, sizeof(why), "run again after the faults: %d (%s)",
					 r2, e2_error(fs));
				v = FSCK_DANGEROUS;
			}
			e2_abandon(fs);
			if (v == FSCK_DANGEROUS) {
				size_t o = strlen(bad);

				snprintf(bad + o, sizeof(bad) - o,
					 "\n%s %s, faults after %u: returned %d; %s", kname,
					 ops[k].name, skip, r, why);
				break;
			}
			if (!r)
				break; /* got through before the first fault */
		}
		print_message("# %-5s faults: %-11s %zu runs, %zu failed, %zu of them after "
			      "changes were made\n",
			      kname, ops[k].name, runs, failed, midway);
		*nfailed += failed;
		*nmidway += midway;
		*nruns += runs;
	}
	if (bad[0])
		fail_msg("a failed operation left a dangerous state:%s", bad);
}

static void test_read_faults(void **state)
{
	size_t failed = 0, runs = 0, syncfail = 0, midway = 0;

	(void)state;
	run_faults(BDEV_FAULT_READ, "read", &failed, &runs, &syncfail, &midway);
	print_message("# %zu runs, %zu operations failed by read errors, %zu after changes "
		      "were made\n",
		      runs, failed, midway);
	/* the loop must have made operations fail, some of them after they
	 * had made changes, or it showed nothing */
	assert_true(failed >= NOPS);
	assert_true(midway > 0);
}

static void test_write_faults(void **state)
{
	size_t failed = 0, runs = 0, syncfail = 0, midway = 0;

	(void)state;
	run_faults(BDEV_FAULT_WRITE, "write", &failed, &runs, &syncfail, &midway);
	print_message("# %zu runs, %zu operations failed by write errors, %zu syncs failed\n", runs,
		      failed, syncfail);
	/* the syncs under the fault must have failed, or nothing was tried */
	assert_true(syncfail >= NOPS);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The negative control: a half-done create (an entry naming an inode
 * whose bitmap bit is clear) is dangerous to the classifier. */
static void test_half_done_is_dangerous(void **state)
{
	struct bdev *mem;
	struct e2fs *fs = open_mem(g_img, g_len, &mem);
	struct e2t_fsck fr;
	struct stat st;
	uint8_t *img;
	uint32_t ino, ipg, ibm;

	(void)state;
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "half", S_IFREG | 0644, 0, 0, 0, &st), 0);
	ino = (uint32_t)st.st_ino;
	e2_forget(fs, ino, 1);
	assert_int_equal(e2_sync(fs), 0);
	img = malloc(g_len);
	assert_non_null(img);
	memcpy(img, bdev_mem_data(mem), g_len);
	e2_abandon(fs);
	/* clear the inode's bit in group 0's inode bitmap (the group
	 * descriptor at block 2 of a 1 KiB-block image says where it is) */
	ipg = le32(img + 1024 + 40); /* s_inodes_per_group */
	assert_true(ino - 1 < ipg);
	ibm = le32(img + 2 * BS + 4); /* bg_inode_bitmap */
	img[(size_t)ibm * BS + (ino - 1) / 8] &= (uint8_t) ~(1u << ((ino - 1) % 8));
	assert_int_equal(e2t_fsck_mem(img, g_len, &fr), 0);
	if (fr.verdict != FSCK_DANGEROUS)
		fail_msg("an entry naming a free inode is %s:\n%s", fsck_class_name(fr.verdict),
			 fr.findings);
	e2t_fsck_free(&fr);
	free(img);
}

/* ---- a checkpoint that cannot write -------------------------------------- */

struct kept {
	struct bdev *mem;
	void *bytes;
	size_t len;
};

static void keep_bytes(struct cache *c, void *arg)
{
	struct kept *k = arg;

	(void)c;
	k->bytes = malloc(k->len);
	if (k->bytes)
		memcpy(k->bytes, bdev_mem_data(k->mem), k->len);
}

/* Close fs (on mem, len bytes); *out (malloc'd) gets the device's bytes
 * as the close leaves them.  The close's status. */
static int close_keep(struct e2fs *fs, struct bdev *mem, size_t len, void **out)
{
	struct kept k = {.mem = mem, .len = len};
	int r = e2_close_then(fs, keep_bytes, &k);

	assert_non_null(k.bytes);
	*out = k.bytes;
	return r;
}

/* chmod inodes first..first+n-1 to mode, each in an inode table block of
 * its own (inodes of a block's size) */
static void chmod_range(struct e2fs *fs, uint32_t first, unsigned n, mode_t mode)
{
	struct stat a = {0}, st;

	a.st_mode = mode;
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(e2_setattr(fs, NULL, first + i, &a, E2_SET_MODE, &st), 0);
}

/* The journal tests' file system: 1 KiB blocks, a 1024-block log, inodes
 * of a block each; opened on *mem with jopts (no background thread). */
static const struct e2_opts jopts = {.no_flusher = true,
				     .consistency = CONSISTENCY_JOURNAL,
				     .cache_blocks = 16384,
				     .clock = e2t_fixed_clock};

static struct e2fs *open_small_log(struct bdev **mem, size_t *len)
{
	struct e2fs *fs;
	void *img;
	int r;

	assert_int_equal(e2t_mkfs_mem(8192, BS, "-t ext3 -J size=1 -I 1024 -N 1200", &img, len), 0);
	assert_int_equal(bdev_mem_create(BS, 0, img, *len, mem), 0);
	free(img);
	r = e2_open_bdev(*mem, &jopts, &fs);
	if (r)
		fail_msg("e2_open_bdev: %d (%s)", r, e2_open_error());
	return fs;
}

/* Make directory d and files d/f0000..f1099 in it (inode numbers in a run,
 * each inode in a table block of its own), syncing after every sync_every
 * (0: never); the first file's inode number.  *dir gets d's. */
static uint32_t make_1100(struct e2fs *fs, unsigned sync_every, uint32_t *dir)
{
	uint32_t first = 0, ino;
	char nm[32];

	*dir = mk(fs, E2_ROOT_INO, "d", S_IFDIR | 0755);
	for (unsigned i = 0; i < 1100; i++) {
		snprintf(nm, sizeof(nm), "f%04u", i);
		ino = mk(fs, *dir, nm, S_IFREG | 0600);
		if (!first)
			first = ino;
		assert_int_equal(ino, first + i);
		if (sync_every && i % sync_every == sync_every - 1)
			assert_int_equal(e2_sync(fs), 0);
	}
	return first;
}

/* img (len bytes, freed here) as a close left it: e2fsck -fn must find it
 * clean; then open it again on a new *mem, with jopts. */
static struct e2fs *check_and_reopen(void *img, size_t len, struct bdev **mem)
{
	struct e2t_fsck fr;
	struct e2fs *fs;
	int r;

	assert_int_equal(e2t_fsck_mem(img, len, &fr), 0);
	print_message("# e2fsck after the close: %s (exit %d) %s\n", fsck_class_name(fr.verdict),
		      fr.status, fr.findings);
	assert_int_equal(fr.verdict, FSCK_CLEAN);
	e2t_fsck_free(&fr);
	assert_int_equal(bdev_mem_create(BS, 0, img, len, mem), 0);
	free(img);
	r = e2_open_bdev(*mem, &jopts, &fs);
	if (r)
		fail_msg("the open after the close: %d (%s)", r, e2_open_error());
	return fs;
}

/* Under consistency=journal a commit that needs more log space than is
 * free first writes the oldest transactions home (commit_locked()).  When
 * that write fails, the commit fails with the device's error and "cannot
 * checkpoint transaction N" (e2_error()), and nothing is lost: the mount
 * goes on once the device works again, and everything is on disk after
 * the close.  Reached without chance or timing (no background thread):
 * two fsynced transactions of 100 inode blocks each stay in the log (less
 * than a quarter of it: nothing goes home yet), then one of 900 blocks
 * fits the log but not beside them, and every write fails from its fsync
 * on, whose first write is the checkpoint's. */
static void test_journal_checkpoint_fault(void **state)
{
	struct bdev *mem, *mem2;
	struct e2fs *fs, *fs2;
	struct e2t_fsck fr;
	struct stat st;
	void *img;
	size_t len;
	uint32_t first, dir;
	int r;

	(void)state;
	fs = open_small_log(&mem, &len);
	/* (keep each transaction well inside the log) */
	first = make_1100(fs, 200, &dir);
	assert_int_equal(e2_sync(fs), 0);
	chmod_range(fs, first, 100, 0641);
	assert_int_equal(e2_fsync(fs, first, false), 0);
	chmod_range(fs, first + 100, 100, 0642);
	assert_int_equal(e2_fsync(fs, first + 100, false), 0);
	chmod_range(fs, first + 200, 900, 0643);
	bdev_mem_inject(mem, BDEV_FAULT_WRITE, 0, 1u << 30, -EIO);
	r = e2_fsync(fs, first + 200, false);
	print_message("# the fsync under write faults: %d (%s)\n", r, e2_error(fs));
	assert_int_equal(r, -EIO);
	if (!strstr(e2_error(fs), "journal: cannot checkpoint transaction"))
		fail_msg("the failed fsync says: %s", e2_error(fs));
	assert_int_equal(e2_error_count(fs), 1);
	/* the faults stop: the same mount goes on, the checkpoint again */
	bdev_mem_inject(mem, BDEV_FAULT_WRITE, 0, 0, 0);
	assert_int_equal(e2_fsync(fs, first + 200, false), 0);
	assert_int_equal(close_keep(fs, mem, len, &img), 0);
	/* the superblock keeps the error for the next check (s_state has
	 * EXT2_ERROR_FS), which finds nothing else */
	assert_int_equal(((uint8_t *)img)[1024 + 58] & 2, 2);
	/* and the next open has every change, the failed fsync's too */
	fs2 = check_and_reopen(img, len, &mem2);
	for (unsigned i = 0; i < 1100; i++) {
		assert_int_equal(e2_getattr(fs2, first + i, &st), 0);
		assert_int_equal(st.st_mode & 07777, i < 100 ? 0641 : i < 200 ? 0642 : 0643);
	}
	assert_int_equal(close_keep(fs2, mem2, len, &img), 0);
	assert_int_equal(e2t_fsck_mem(img, len, &fr), 0);
	free(img);
	assert_int_equal(fr.verdict, FSCK_CLEAN);
	e2t_fsck_free(&fr);
}

/* A burst of operations with no commit between them (no background
 * thread here; in a mount, operations that keep the timer thread from the
 * lock) must not grow one transaction past what the log holds: every
 * later commit would fail and the changes could never reach the disk.
 * 1100 creates, each in an inode table block of its own, in a log of 1024
 * blocks: an operation that starts with half the log in the running
 * transaction commits it first (e2_jbound_locked), and the sync at the
 * end works. */
static void test_journal_burst_fits(void **state)
{
	struct bdev *mem, *mem2;
	struct e2fs *fs, *fs2;
	struct stat st;
	void *img;
	size_t len;
	uint32_t dir, first;
	char nm[32];
	int r;

	(void)state;
	fs = open_small_log(&mem, &len);
	first = make_1100(fs, 0, &dir);
	r = e2_sync(fs);
	if (r)
		fail_msg("the sync after the burst: %d (%s)", r, e2_error(fs));
	assert_int_equal(e2_error_count(fs), 0);
	assert_int_equal(close_keep(fs, mem, len, &img), 0);
	fs2 = check_and_reopen(img, len, &mem2);
	for (unsigned i = 0; i < 1100; i++) {
		snprintf(nm, sizeof(nm), "f%04u", i);
		assert_int_equal(e2_lookup(fs2, dir, nm, &st), 0);
		assert_int_equal(st.st_ino, first + i);
	}
	assert_int_equal(close_keep(fs2, mem2, len, &img), 0);
	free(img);
}

static int group_setup(void **state)
{
	struct bdev *mem;
	struct e2fs *fs;
	struct e2_opts o = {.no_flusher = true};
	struct stat st;
	uint32_t d, e, x, f1, f2, t;
	void *img;
	size_t len;
	char nm[32];

	(void)state;
	if (e2t_mkfs_mem(2048, BS, "-N 256", &img, &len))
		return -1;
	if (bdev_mem_create(BS, 0, img, len, &mem) || e2_open_bdev(mem, &o, &fs))
		return -1;
	free(img);
	d = mk(fs, E2_ROOT_INO, "d", S_IFDIR | 0755);
	e = mk(fs, d, "e", S_IFDIR | 0755);
	x = mk(fs, E2_ROOT_INO, "x", S_IFDIR | 0755);
	mk(fs, x, "y", S_IFDIR | 0755);
	f1 = mk(fs, d, "f1", S_IFREG | 0644);
	fill(fs, f1, 5000, 0);
	f2 = mk(fs, d, "f2", S_IFREG | 0644);
	fill(fs, f2, 40000, 0);
	t = mk(fs, E2_ROOT_INO, "tgt", S_IFREG | 0644);
	fill(fs, t, 20000, 0);
	/* directories of several blocks, so that names are found by reads */
	for (int i = 0; i < 60; i++) {
		snprintf(nm, sizeof(nm), "filler-name-%03d", i);
		assert_int_equal(e2_link(fs, NULL, t, i % 2 ? d : e, nm, &st), 0);
		e2_forget(fs, st.st_ino, 1);
	}
	if (e2_sync(fs))
		return -1;
	ids_of(fs, &g_id);
	if (!(g_id.d && g_id.e && g_id.x && g_id.f1 && g_id.f2 && g_id.tgt))
		return -1;
	g_len = len;
	g_img = malloc(len);
	if (!g_img)
		return -1;
	memcpy(g_img, bdev_mem_data(mem), len);
	e2_abandon(fs);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	free(g_img);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_half_done_is_dangerous),
	    cmocka_unit_test(test_read_faults),
	    cmocka_unit_test(test_write_faults),
	    cmocka_unit_test(test_journal_checkpoint_fault),
	    cmocka_unit_test(test_journal_burst_fits),
	};

	return cmocka_run_group_tests_name("tests", tests, group_setup, group_teardown);
}
