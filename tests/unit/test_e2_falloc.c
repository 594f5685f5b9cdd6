/* Preallocation and hole queries (lib/ext2/e2_falloc.c) on real images: the
 * results against what was written, the refusals, and the one path the
 * FUSE tests cannot reach: the disk filling up part way through, after the
 * up-front estimate said there was room.  e2fsck -fn judges every image.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "ext2/e2.h"
#include "ext2/e2_falloc.h"
#include "e2test_util.h"

#define BS 1024
#define APB (BS / 4)

static struct e2fs *new_fs(const char *path, unsigned kib)
{
	struct e2_opts o = {.no_flusher = true};
	struct e2fs *fs = NULL;
	int r;

	r = e2t_mkfs(path, kib, BS, "-m 0", NULL);
	if (r)
		fail_msg("mke2fs: %d", r);
	r = e2_open(path, &o, &fs);
	if (r)
		fail_msg("e2_open: %d (%s)", r, e2_open_error());
	return fs;
}

static void close_clean(struct e2fs *fs, const char *path)
{
	struct e2t_fsck f;

	assert_int_equal(e2_close(fs), 0);
	assert_int_equal(e2t_fsck_file(path, &f), 0);
	if (f.verdict != E2T_CLEAN)
		fail_msg("e2fsck -fn: %s\n%s", e2t_verdict_name(f.verdict),
			 f.output ? f.output : "");
	e2t_fsck_free(&f);
}

static uint32_t mkfile(struct e2fs *fs, const char *name)
{
	struct stat st;

	assert_int_equal(e2_mknod(fs, E2_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &st), 0);
	e2_forget(fs, (uint32_t)st.st_ino, 1);
	return (uint32_t)st.st_ino;
}

static uint64_t bfree(struct e2fs *fs)
{
	struct statvfs sv;

	assert_int_equal(e2_statfs(fs, &sv), 0);
	return sv.f_bfree;
}

static off_t fsize(struct e2fs *fs, uint32_t ino)
{
	struct stat st;

	assert_int_equal(e2_getattr(fs, ino, &st), 0);
	return st.st_size;
}

static off_t seek(struct e2fs *fs, uint32_t ino, off_t off, bool data)
{
	off_t res = -1;
	int r = e2_seek(fs, ino, off, data, &res);

	return r < 0 ? r : res;
}

static void test_alloc_and_seek(void **state)
{
	char *path = e2t_scratch_file("falloc");
	struct e2fs *fs = new_fs(path, 4096);
	uint32_t f = mkfile(fs, "f"), g = mkfile(fs, "g");
	uint8_t buf[3 * BS];
	uint64_t free0;

	/* data at block 0 and block 40 (past the direct blocks), holes between */
	assert_int_equal(e2_write(fs, f, "a", 1, 0), 1);
	assert_int_equal(e2_write(fs, f, "b", 1, 40 * BS + 5), 1);
	assert_int_equal(seek(fs, f, 0, false), BS);
	assert_int_equal(seek(fs, f, 1, true), 1);
	assert_int_equal(seek(fs, f, BS, true), 40 * BS);
	assert_int_equal(seek(fs, f, 40 * BS, false), 40 * BS + 6);
	assert_int_equal(seek(fs, f, 40 * BS + 6, true), -ENXIO);
	/* fill the holes of blocks 2..19 only, keeping the size */
	free0 = bfree(fs);
	assert_int_equal(e2_falloc(fs, f, true, 2 * BS + 100, 18 * BS - 100), 0);
	assert_int_equal(fsize(fs, f), 40 * BS + 6);
	/* 18 data blocks (the indirect block is there for block 40) */
	assert_int_equal(free0 - bfree(fs), 18);
	assert_int_equal(seek(fs, f, BS, true), 2 * BS);
	assert_int_equal(seek(fs, f, 2 * BS, false), 20 * BS);
	memset(buf, 0x55, sizeof(buf));
	assert_int_equal(e2_read(fs, f, buf, sizeof(buf), 2 * BS), (ssize_t)sizeof(buf));
	for (size_t i = 0; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0);
	/* keeping the size past the end is refused, and changes nothing */
	free0 = bfree(fs);
	assert_int_equal(e2_falloc(fs, f, true, 40 * BS, 2 * BS), -EOPNOTSUPP);
	assert_int_equal(bfree(fs), free0);
	assert_int_equal(fsize(fs, f), 40 * BS + 6);
	/* mode 0 past the end: the size moves, in the last block too */
	assert_int_equal(e2_falloc(fs, f, false, 40 * BS, 100), 0);
	assert_int_equal(fsize(fs, f), 40 * BS + 100);
	assert_int_equal(bfree(fs), free0);
	assert_int_equal(e2_falloc(fs, g, false, 0, 5 * BS + 1), 0);
	assert_int_equal(fsize(fs, g), 5 * BS + 1);
	assert_int_equal(seek(fs, g, 0, false), 5 * BS + 1);
	/* bad arguments */
	assert_int_equal(e2_falloc(fs, g, false, -1, 10), -EINVAL);
	assert_int_equal(e2_falloc(fs, g, false, 0, 0), -EINVAL);
	assert_int_equal(e2_falloc(fs, E2_ROOT_INO, false, 0, 10), -EISDIR);
	assert_int_equal(e2_falloc(fs, g, false, INT64_MAX - 10, 100), -EFBIG);
	/* more than is free: refused before anything changes */
	free0 = bfree(fs);
	assert_int_equal(e2_falloc(fs, g, false, 0, (off_t)(free0 + 1) * BS), -ENOSPC);
	assert_int_equal(fsize(fs, g), 5 * BS + 1);
	assert_int_equal(bfree(fs), free0);
	close_clean(fs, path);
	free(path);
}

/* The estimate counts the indirect blocks of the holes' extent, with room
 * for two partial ones; a range that crosses from the double into the
 * triple indirect tree needs more (the triple indirect block and its
 * children), so with just enough free blocks for the estimate the disk
 * fills up part way.  The size must be put back and every block freed. */
static void test_enospc_part_way(void **state)
{
	char *path = e2t_scratch_file("falloc-full");
	struct e2fs *fs = new_fs(path, 2048);
	uint32_t filler = mkfile(fs, "filler"), f = mkfile(fs, "f");
	static uint8_t chunk[64 * BS];
	const off_t tind = (off_t)(12 + APB + APB * APB) * BS;
	uint64_t free0;
	off_t size;
	ssize_t n;

	memset(chunk, 0x5a, sizeof(chunk));
	for (size = 0;; size += n) {
		n = e2_write(fs, filler, chunk, sizeof(chunk), size);
		if (n <= 0)
			break;
	}
	assert_int_equal(bfree(fs), 0);
	/* give back blocks until 5 or 6 are free: the estimate for two holes
	 * past the direct blocks is 5, what the range below needs is 7 */
	while (bfree(fs) < 5) {
		struct stat attr = {.st_size = size - BS}, st;

		size -= BS;
		assert_int_equal(e2_setattr(fs, filler, &attr, E2_SET_SIZE, &st), 0);
	}
	free0 = bfree(fs);
	assert_in_range(free0, 5, 6);
	assert_int_equal(e2_falloc(fs, f, false, tind - BS, 2 * BS), -ENOSPC);
	assert_int_equal(fsize(fs, f), 0);
	assert_int_equal(bfree(fs), free0);
	assert_int_equal(seek(fs, f, 0, true), -ENXIO);
	/* the same range fits once there is room */
	{
		struct stat attr = {.st_size = size - 8 * BS}, st;

		assert_int_equal(e2_setattr(fs, filler, &attr, E2_SET_SIZE, &st), 0);
	}
	assert_int_equal(e2_falloc(fs, f, false, tind - BS, 2 * BS), 0);
	assert_int_equal(fsize(fs, f), tind + BS);
	assert_int_equal(seek(fs, f, 0, true), tind - BS);
	assert_int_equal(seek(fs, f, tind - BS, false), tind + BS);
	close_clean(fs, path);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_alloc_and_seek, e2t_remove_scratch),
		cmocka_unit_test_teardown(test_enospc_part_way, e2t_remove_scratch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
