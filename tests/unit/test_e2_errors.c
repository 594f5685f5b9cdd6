/* A corrupt structure found at run time (e2.h, enum e2_errors): the request
 * gets -EIO, e2_error() names the inode, the superblock is marked with
 * EXT2_ERROR_FS, and errors=remount-ro or panic stop further changes while
 * keeping the earlier ones.  Each test makes an image with the library,
 * breaks one block pointer in the raw bytes, and checks the image file
 * after e2_close.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bdev/bdev.h"
#include "ext2/e2.h"
#include "e2test_util.h"

#define BS	  1024
#define SB_STATE  (1024 + 58)
#define SB_ERRORS (1024 + 60)
#define ST_VALID  1
#define ST_ERROR  2

static uint8_t data[20000];
static char *path;
static uint32_t bad_ino;

static uint32_t get32(const uint8_t *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static struct e2fs *open_img(enum e2_errors errors, bool ro)
{
	struct e2_opts o = {.no_flusher = true, .errors = errors, .readonly = ro};
	struct e2fs *fs;

	assert_int_equal(e2_open(path, &o, &fs), 0);
	return fs;
}

static uint8_t *read_img(size_t *len)
{
	void *img;

	assert_int_equal(e2t_read_file(path, &img, len), 0);
	return img;
}

/* The scratch image: files "bad" (20000 bytes, its third block pointer
 * out of range) and "good", cleanly closed, s_errors as given. */
static void make_image(uint16_t s_errors)
{
	struct e2fs *fs;
	struct stat st;
	uint8_t *img, *p;
	size_t len;
	uint32_t itab, isz;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7);
	free(path);
	path = e2t_scratch_file("errors");
	assert_non_null(path);
	assert_int_equal(e2t_mkfs(path, 2048, BS, NULL, NULL), 0);
	fs = open_img(E2_ERRORS_DEFAULT, false);
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "bad", S_IFREG | 0644, 0, 0, 0, &st), 0);
	bad_ino = (uint32_t)st.st_ino;
	assert_int_equal(e2_write(fs, NULL, bad_ino, data, sizeof(data), 0), (ssize_t)sizeof(data));
	assert_int_equal(e2_forget(fs, bad_ino, 1), 0);
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "good", S_IFREG | 0644, 0, 0, 0, &st), 0);
	assert_int_equal(e2_write(fs, NULL, (uint32_t)st.st_ino, data, 100, 0), 100);
	assert_int_equal(e2_forget(fs, (uint32_t)st.st_ino, 1), 0);
	assert_int_equal(e2_close(fs), 0);

	img = read_img(&len);
	assert_int_equal(get16(img + SB_STATE), ST_VALID);
	img[SB_ERRORS] = (uint8_t)s_errors;
	img[SB_ERRORS + 1] = 0;
	itab = get32(img + 2 * BS + 8);
	isz = get16(img + 1024 + 88);
	p = img + (size_t)itab * BS + (size_t)(bad_ino - 1) * isz + 40 + 2 * 4;
	p[0] = p[1] = p[2] = 0xff; /* i_block[2] = 0x0fffffff */
	p[3] = 0x0f;
	assert_int_equal(e2t_write_file(path, img, len), 0);
	free(img);
}

static uint16_t disk_state(void)
{
	size_t len;
	uint8_t *img = read_img(&len);
	uint16_t st = get16(img + SB_STATE);

	free(img);
	return st;
}

/* Read "bad" to its end: the third block fails. */
static void hit_corruption(struct e2fs *fs)
{
	static uint8_t buf[sizeof(data)];

	assert_int_equal(e2_error_count(fs), 0);
	assert_int_equal(e2_read(fs, bad_ino, buf, sizeof(buf), 0), -EIO);
	assert_non_null(strstr(e2_error(fs), "inode 12"));
	assert_non_null(strstr(e2_error(fs), "268435455"));
	assert_int_equal(e2_error_count(fs), 1);
}

static void test_no_error_stays_clean(void **state)
{
	struct e2fs *fs;
	struct stat st;
	uint8_t buf[100];

	(void)state;
	make_image(0);
	fs = open_img(E2_ERRORS_RO, false);
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "good", &st), 0);
	assert_int_equal(e2_read(fs, (uint32_t)st.st_ino, buf, 100, 0), 100);
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "new", S_IFREG | 0644, 0, 0, 0, &st), 0);
	assert_int_equal(e2_error_count(fs), 0);
	assert_int_equal(e2_close(fs), 0);
	assert_int_equal(disk_state(), ST_VALID);
}

static void test_continue_marks_and_goes_on(void **state)
{
	struct e2fs *fs;
	struct stat st;

	(void)state;
	make_image(0);
	fs = open_img(E2_ERRORS_CONTINUE, false);
	assert_int_equal(e2_errors_behaviour(fs), E2_ERRORS_CONTINUE);
	hit_corruption(fs);
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "after", S_IFREG | 0644, 0, 0, 0, &st), 0);
	/* The same corruption again counts again. */
	assert_int_equal(e2_read(fs, bad_ino, data, sizeof(data), 0), -EIO);
	assert_int_equal(e2_error_count(fs), 2);
	assert_int_equal(e2_close(fs), 0);
	assert_int_equal(disk_state(), ST_VALID | ST_ERROR);
	fs = open_img(E2_ERRORS_CONTINUE, true);
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "after", &st), 0);
	assert_true(e2_was_unclean(fs));
	assert_int_equal(e2_close(fs), 0);
}

static void test_remount_ro_keeps_earlier_changes(void **state)
{
	struct e2fs *fs;
	struct stat st, attr;
	uint32_t ino;
	struct statvfs sv;

	(void)state;
	make_image(0);
	fs = open_img(E2_ERRORS_RO, false);
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "before", S_IFREG | 0644, 0, 0, 0, &st),
			 0);
	ino = (uint32_t)st.st_ino;
	assert_int_equal(e2_write(fs, NULL, ino, "before", 6, 0), 6);
	hit_corruption(fs);
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "after", S_IFREG | 0644, 0, 0, 0, &st),
			 -EROFS);
	assert_int_equal(e2_write(fs, NULL, ino, "x", 1, 0), -EROFS);
	assert_int_equal(e2_unlink(fs, NULL, E2_ROOT_INO, "good"), -EROFS);
	memset(&attr, 0, sizeof(attr));
	assert_int_equal(e2_setattr(fs, NULL, ino, &attr, E2_SET_SIZE, &st), -EROFS);
	assert_int_equal(e2_statfs(fs, &sv), 0);
	assert_true(sv.f_flag & ST_RDONLY);
	/* Reads go on. */
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "good", &st), 0);
	assert_int_equal(e2_sync(fs), 0);
	assert_int_equal(e2_close(fs), 0);
	assert_int_equal(disk_state(), ST_VALID | ST_ERROR);

	fs = open_img(E2_ERRORS_CONTINUE, true);
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "before", &st), 0);
	assert_int_equal(st.st_size, 6);
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "after", &st), -ENOENT);
	assert_int_equal(e2_close(fs), 0);
}

static void test_panic_is_read_only_in_the_library(void **state)
{
	struct e2fs *fs;
	struct stat st;

	(void)state;
	make_image(0);
	fs = open_img(E2_ERRORS_PANIC, false);
	hit_corruption(fs);
	assert_int_equal(e2_errors_behaviour(fs), E2_ERRORS_PANIC);
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "after", S_IFREG | 0644, 0, 0, 0, &st),
			 -EROFS);
	assert_int_equal(e2_close(fs), 0);
	assert_int_equal(disk_state(), ST_VALID | ST_ERROR);
}

static void test_default_from_superblock(void **state)
{
	struct e2fs *fs;
	struct stat st;

	(void)state;
	make_image(2); /* EXT2_ERRORS_RO */
	fs = open_img(E2_ERRORS_DEFAULT, false);
	assert_int_equal(e2_errors_behaviour(fs), E2_ERRORS_RO);
	hit_corruption(fs);
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "after", S_IFREG | 0644, 0, 0, 0, &st),
			 -EROFS);
	assert_int_equal(e2_close(fs), 0);

	make_image(3); /* EXT2_ERRORS_PANIC */
	fs = open_img(E2_ERRORS_DEFAULT, false);
	assert_int_equal(e2_errors_behaviour(fs), E2_ERRORS_PANIC);
	assert_int_equal(e2_close(fs), 0);
	/* An option overrides the superblock. */
	fs = open_img(E2_ERRORS_CONTINUE, false);
	assert_int_equal(e2_errors_behaviour(fs), E2_ERRORS_CONTINUE);
	assert_int_equal(e2_close(fs), 0);
	make_image(0);
	fs = open_img(E2_ERRORS_DEFAULT, false);
	assert_int_equal(e2_errors_behaviour(fs), E2_ERRORS_CONTINUE);
	assert_int_equal(e2_close(fs), 0);
}

static void test_read_only_mount_writes_nothing(void **state)
{
	struct e2fs *fs;
	size_t len, len2;
	uint8_t *before, *after;

	(void)state;
	make_image(0);
	before = read_img(&len);
	fs = open_img(E2_ERRORS_RO, true);
	hit_corruption(fs);
	assert_int_equal(e2_close(fs), 0);
	after = read_img(&len2);
	assert_int_equal(len, len2);
	assert_memory_equal(before, after, len);
	free(before);
	free(after);
}

/* Found by the image fuzzer: a directory whose size claims more blocks
 * than the file system has made its name index allocate and clear memory
 * for all of them (up to 128 MiB per directory with 1 KiB blocks) before
 * the first hole gave EIO.  The size alone is now refused. */
static void test_dir_size_beyond_fs(void **state)
{
	struct e2fs *fs;
	struct stat st;
	size_t len;
	uint8_t *img, *p;
	uint32_t itab, isz, dino;

	(void)state;
	make_image(0);
	fs = open_img(E2_ERRORS_CONTINUE, false);
	assert_int_equal(e2_mkdir(fs, NULL, E2_ROOT_INO, "d", 0755, 0, 0, &st), 0);
	dino = (uint32_t)st.st_ino;
	assert_int_equal(e2_close(fs), 0);
	img = read_img(&len);
	itab = get32(img + 2 * BS + 8);
	isz = get16(img + 1024 + 88);
	p = img + (size_t)itab * BS + (size_t)(dino - 1) * isz + 4; /* i_size */
	p[0] = 0;
	p[1] = 0xfc;
	p[2] = 0xff;
	p[3] = 0x07; /* 0x07fffc00: 131071 blocks of 1 KiB in a 2048-block fs */
	assert_int_equal(e2t_write_file(path, img, len), 0);
	free(img);
	fs = open_img(E2_ERRORS_CONTINUE, false);
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "d", &st), 0);
	assert_int_equal(e2_lookup(fs, dino, "x", &st), -EIO);
	assert_non_null(strstr(e2_error(fs), "bad size"));
	assert_int_equal(e2_close(fs), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_no_error_stays_clean, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_continue_marks_and_goes_on, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_remount_ro_keeps_earlier_changes, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_panic_is_read_only_in_the_library, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_default_from_superblock, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_read_only_mount_writes_nothing, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_dir_size_beyond_fs, e2t_remove_scratch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
