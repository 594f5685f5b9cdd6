/* A full file system: with no free blocks (and separately no free inodes)
 * the calls that need one fail with -ENOSPC, nothing else is damaged,
 * e2_close leaves an image e2fsck -fn finds clean, and deleting files makes
 * room again.
 */
#include <errno.h>
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

#include "ext2/e2.h"
#include "e2test_util.h"

#define CHUNK 16384

static uint8_t pat(unsigned id, uint64_t off)
{
	return (uint8_t)(1 + (id * 131 + off * 7 + (off >> 10) * 13) % 255);
}

static struct e2fs *open_fs(const char *path)
{
	struct e2_opts o = {.no_flusher = true};
	struct e2fs *fs = NULL;
	int ret = e2_open(path, &o, &fs);

	if (ret)
		fail_msg("e2_open %s: %d (%s)", path, ret, e2_open_error());
	return fs;
}

static void close_and_fsck(struct e2fs *fs, const char *path, const char *when)
{
	struct e2t_fsck r;
	int ret = e2_close(fs);

	if (ret)
		fail_msg("%s: e2_close: %d", when, ret);
	assert_int_equal(e2t_fsck_file(path, &r), 0);
	print_message("# %s: e2fsck -fn %s (status %d)\n", when, fsck_class_name(r.verdict),
		      r.status);
	if (r.verdict != FSCK_CLEAN)
		fail_msg("%s: e2fsck -fn is %s:\n%s", when, fsck_class_name(r.verdict),
			 r.output ? r.output : "");
	e2t_fsck_free(&r);
}

static uint32_t make_file(struct e2fs *fs, uint32_t dir, const char *name)
{
	struct stat st;
	int ret = e2_mknod(fs, NULL, dir, name, S_IFREG | 0644, 0, 0, 0, &st);

	if (ret)
		fail_msg("mknod %s: %d", name, ret);
	e2_forget(fs, st.st_ino, 1);
	return st.st_ino;
}

static uint32_t lookup(struct e2fs *fs, uint32_t dir, const char *name)
{
	struct stat st;
	int ret = e2_lookup(fs, dir, name, &st);

	if (ret)
		fail_msg("lookup %s: %d", name, ret);
	e2_forget(fs, st.st_ino, 1);
	return st.st_ino;
}

static void write_pat(struct e2fs *fs, uint32_t ino, unsigned id, size_t off, size_t len)
{
	uint8_t *buf = malloc(len);
	ssize_t n;

	assert_non_null(buf);
	for (size_t i = 0; i < len; i++)
		buf[i] = pat(id, off + i);
	n = e2_write(fs, NULL, ino, buf, len, (off_t)off);
	if (n != (ssize_t)len)
		fail_msg("write %zu bytes at %zu of inode %u: %zd", len, off, ino, n);
	free(buf);
}

/* The file holds exactly size bytes of pattern id. */
static void check_pat(struct e2fs *fs, uint32_t ino, unsigned id, size_t size)
{
	uint8_t *buf = malloc(size + 1);
	struct stat st;
	size_t got = 0;

	assert_non_null(buf);
	assert_int_equal(e2_getattr(fs, ino, &st), 0);
	if ((size_t)st.st_size != size)
		fail_msg("inode %u: size %lld, expected %zu", ino, (long long)st.st_size, size);
	while (got < size) {
		ssize_t n = e2_read(fs, ino, buf + got, size - got, (off_t)got);

		if (n <= 0)
			fail_msg("inode %u: read at %zu: %zd", ino, got, n);
		got += n;
	}
	for (size_t i = 0; i < size; i++)
		if (buf[i] != pat(id, i))
			fail_msg("inode %u: byte %zu is %02x, expected %02x", ino, i, buf[i],
				 pat(id, i));
	free(buf);
}

/* Append pattern id in chunks until the file system is full.  Returns the
 * file's size; the last failing call must be -ENOSPC. */
static size_t fill(struct e2fs *fs, uint32_t ino, unsigned id)
{
	uint8_t *buf = malloc(CHUNK);
	size_t size = 0;
	ssize_t n = 0;

	assert_non_null(buf);
	for (int i = 0; i < 10000; i++) {
		for (size_t k = 0; k < CHUNK; k++)
			buf[k] = pat(id, size + k);
		n = e2_write(fs, NULL, ino, buf, CHUNK, (off_t)size);
		if (n < 0)
			break;
		if (n > CHUNK)
			fail_msg("write returned %zd for %d bytes", n, CHUNK);
		size += n;
		if (n < CHUNK) {
			/* a short write: the next one must fail */
			continue;
		}
	}
	free(buf);
	if (n != -ENOSPC)
		fail_msg("filling: last write returned %zd, expected -ENOSPC", n);
	return size;
}

static void test_enospc_blocks(void **state)
{
	char *path = e2t_scratch_file("enospc");
	char longname[220], slow[600];
	struct statvfs sv;
	struct stat st;
	struct e2fs *fs;
	uint32_t keep1, keep2, keep3, filler;
	size_t fsize;
	int ret, nfiles = 0;

	assert_non_null(path);
	assert_int_equal(e2t_mkfs(path, 1024, 1024, "-m 0", NULL), 0);
	fs = open_fs(path);
	keep1 = make_file(fs, E2_ROOT_INO, "keep1");
	write_pat(fs, keep1, 1, 0, 100);
	keep2 = make_file(fs, E2_ROOT_INO, "keep2");
	write_pat(fs, keep2, 2, 0, 20000);
	ret = e2_mkdir(fs, NULL, E2_ROOT_INO, "dir", 0755, 0, 0, &st);
	assert_int_equal(ret, 0);
	e2_forget(fs, st.st_ino, 1);
	keep3 = make_file(fs, st.st_ino, "keep3");
	write_pat(fs, keep3, 3, 0, 5000);
	assert_int_equal(e2_sync(fs), 0);

	filler = make_file(fs, E2_ROOT_INO, "filler");
	fsize = fill(fs, filler, 4);
	assert_int_equal(e2_statfs(fs, &sv), 0);
	print_message("# filled: filler is %zu bytes; statfs: %llu free blocks, %llu free inodes\n",
		      fsize, (unsigned long long)sv.f_bfree, (unsigned long long)sv.f_ffree);
	if (sv.f_bfree != 0)
		fail_msg("statfs says %llu blocks free after ENOSPC",
			 (unsigned long long)sv.f_bfree);
	/* past the double-indirect start: the fill crossed both boundaries */
	assert_true(fsize > 274432);

	/* Everything that needs a block fails cleanly. */
	assert_int_equal(e2_write(fs, NULL, filler, "x", 1, (off_t)fsize), -ENOSPC);
	assert_int_equal(e2_write(fs, NULL, keep2, "x", 1, 30000), -ENOSPC);
	assert_int_equal(e2_mkdir(fs, NULL, E2_ROOT_INO, "nodir", 0755, 0, 0, &st), -ENOSPC);
	memset(slow, 's', sizeof(slow) - 1);
	slow[sizeof(slow) - 1] = 0;
	assert_int_equal(e2_symlink(fs, NULL, E2_ROOT_INO, "slowlink", slow, 0, 0, &st), -ENOSPC);
	/* names until the root directory needs another block */
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	for (nfiles = 0; nfiles < 100; nfiles++) {
		char num[16];

		snprintf(num, sizeof(num), "%05d", nfiles);
		memcpy(longname, num, 5);
		ret = e2_mknod(fs, NULL, E2_ROOT_INO, longname, S_IFREG | 0644, 0, 0, 0, &st);
		if (ret)
			break;
		e2_forget(fs, st.st_ino, 1);
	}
	print_message("# %d long names fitted in the root directory before %d\n", nfiles, ret);
	assert_int_equal(ret, -ENOSPC);
	/* a write that needs no new block still works (inside keep2) */
	write_pat(fs, keep2, 2, 100, 50);

	check_pat(fs, keep1, 1, 100);
	check_pat(fs, keep2, 2, 20000);
	check_pat(fs, keep3, 3, 5000);
	check_pat(fs, filler, 4, fsize);
	close_and_fsck(fs, path, "full (no blocks)");

	/* Reopen: content intact, and deleting makes room. */
	fs = open_fs(path);
	check_pat(fs, lookup(fs, E2_ROOT_INO, "keep1"), 1, 100);
	check_pat(fs, lookup(fs, E2_ROOT_INO, "keep2"), 2, 20000);
	check_pat(fs, lookup(fs, lookup(fs, E2_ROOT_INO, "dir"), "keep3"), 3, 5000);
	check_pat(fs, lookup(fs, E2_ROOT_INO, "filler"), 4, fsize);
	assert_int_equal(e2_unlink(fs, NULL, E2_ROOT_INO, "filler"), 0);
	assert_int_equal(e2_statfs(fs, &sv), 0);
	print_message("# after unlink: %llu free blocks\n", (unsigned long long)sv.f_bfree);
	if (sv.f_bfree * sv.f_bsize < fsize)
		fail_msg("unlinking a %zu-byte file freed only %llu blocks", fsize,
			 (unsigned long long)sv.f_bfree);
	ret = e2_mkdir(fs, NULL, E2_ROOT_INO, "nowdir", 0755, 0, 0, &st);
	assert_int_equal(ret, 0);
	e2_forget(fs, st.st_ino, 1);
	filler = make_file(fs, E2_ROOT_INO, "again");
	write_pat(fs, filler, 5, 0, 300000);
	check_pat(fs, filler, 5, 300000);
	close_and_fsck(fs, path, "after freeing");
	unlink(path);
	free(path);
}

/* One write much larger than the free space: a short count or -ENOSPC,
 * with the file's size telling the truth either way. */
static void test_enospc_one_big_write(void **state)
{
	char *path = e2t_scratch_file("enospc");
	size_t len = 2 * 1024 * 1024;
	uint8_t *buf = malloc(len);
	struct stat st;
	struct e2fs *fs;
	uint32_t ino;
	ssize_t n;

	assert_non_null(path);
	assert_non_null(buf);
	assert_int_equal(e2t_mkfs(path, 1024, 1024, "-m 0", NULL), 0);
	fs = open_fs(path);
	ino = make_file(fs, E2_ROOT_INO, "big");
	for (size_t i = 0; i < len; i++)
		buf[i] = pat(7, i);
	n = e2_write(fs, NULL, ino, buf, len, 0);
	print_message("# 2 MiB write into 1 MiB: %zd\n", n);
	if (n != -ENOSPC && (n <= 0 || (size_t)n >= len))
		fail_msg("write returned %zd, expected a short count or -ENOSPC", n);
	assert_int_equal(e2_getattr(fs, ino, &st), 0);
	check_pat(fs, ino, 7, n > 0 ? (size_t)n : 0);
	close_and_fsck(fs, path, "after one big write");
	free(buf);
	unlink(path);
	free(path);
}

static void test_enospc_inodes(void **state)
{
	char *path = e2t_scratch_file("enospc");
	char name[32];
	struct statvfs sv;
	struct stat st;
	struct e2fs *fs;
	int ret = 0, n;

	assert_non_null(path);
	assert_int_equal(e2t_mkfs(path, 2048, 1024, "-N 32 -m 0", NULL), 0);
	fs = open_fs(path);
	write_pat(fs, make_file(fs, E2_ROOT_INO, "keep"), 1, 0, 3000);
	for (n = 0; n < 10000; n++) {
		snprintf(name, sizeof(name), "f%d", n);
		ret = e2_mknod(fs, NULL, E2_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &st);
		if (ret)
			break;
		e2_forget(fs, st.st_ino, 1);
	}
	print_message("# %d files created before %d\n", n, ret);
	assert_int_equal(ret, -ENOSPC);
	assert_true(n > 0);
	assert_int_equal(e2_statfs(fs, &sv), 0);
	assert_int_equal(sv.f_ffree, 0);
	assert_int_equal(e2_mkdir(fs, NULL, E2_ROOT_INO, "d", 0755, 0, 0, &st), -ENOSPC);
	assert_int_equal(e2_symlink(fs, NULL, E2_ROOT_INO, "l", "target", 0, 0, &st), -ENOSPC);
	/* a hard link needs no inode */
	assert_int_equal(e2_link(fs, NULL, lookup(fs, E2_ROOT_INO, "f0"), E2_ROOT_INO, "f0b", &st),
			 0);
	e2_forget(fs, st.st_ino, 1);
	check_pat(fs, lookup(fs, E2_ROOT_INO, "keep"), 1, 3000);
	close_and_fsck(fs, path, "full (no inodes)");

	fs = open_fs(path);
	check_pat(fs, lookup(fs, E2_ROOT_INO, "keep"), 1, 3000);
	assert_int_equal(e2_unlink(fs, NULL, E2_ROOT_INO, "f1"), 0);
	assert_int_equal(e2_unlink(fs, NULL, E2_ROOT_INO, "f2"), 0);
	assert_int_equal(e2_mkdir(fs, NULL, E2_ROOT_INO, "d", 0755, 0, 0, &st), 0);
	e2_forget(fs, st.st_ino, 1);
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "again", S_IFREG | 0644, 0, 0, 0, &st), 0);
	e2_forget(fs, st.st_ino, 1);
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "again2", S_IFREG | 0644, 0, 0, 0, &st),
			 -ENOSPC);
	close_and_fsck(fs, path, "after freeing inodes");
	unlink(path);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_enospc_blocks, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_enospc_one_big_write, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_enospc_inodes, e2t_remove_scratch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
