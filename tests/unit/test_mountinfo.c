/* The mount table reader (lib/util/mountinfo.c), on a table written here. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "e2test_util.h"
#include "util/mountinfo.h"

static const char table[] =
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "not a mount line\n"
    "40 22 0:39 / /mnt/dead rw,nosuid,nodev - fuse.fstitch /srv/a.img rw,user_id=0\n"
    "41 22 7:3 / /mnt/with\\040space rw master:2 shared:7 - fuseblk.fstitch /dev/loop3 rw\n"
    "42 40 0:45 / /mnt/dead rw - tmpfs tmp\\134fs rw\n"
    "43 22 0:46 / /short rw\n";

static char *write_table(char **dir)
{
	char *path;

	*dir = e2t_tmpdir_new("mountinfo");
	assert_non_null(*dir);
	assert_true(asprintf(&path, "%s/mountinfo", *dir) > 0);
	assert_int_equal(e2t_write_file(path, table, strlen(table)), 0);
	return path;
}

static int count_cb(const struct mountinfo_ent *e, void *arg)
{
	(*(int *)arg)++;
	return 0;
}

static void test_each_skips_malformed_lines(void **state)
{
	char *dir, *path = write_table(&dir);
	int n = 0;

	assert_int_equal(mountinfo_each(path, count_cb, &n), 0);
	assert_int_equal(n, 4);
	assert_int_equal(mountinfo_each("/nonexistent/mountinfo", count_cb, &n), -ENOENT);
	e2t_rm_rf(dir);
	free(dir);
	free(path);
}

static void test_find_takes_the_topmost_and_unescapes(void **state)
{
	char *dir, *path = write_table(&dir), type[32], src[64];

	/* two mounts on /mnt/dead: the later one is on top */
	assert_int_equal(mountinfo_find(path, "/mnt/dead", type, sizeof(type), src, sizeof(src)),
			 1);
	assert_string_equal(type, "tmpfs");
	assert_string_equal(src, "tmp\\fs");
	assert_int_equal(
	    mountinfo_find(path, "/mnt/with space", type, sizeof(type), src, sizeof(src)), 1);
	assert_string_equal(type, "fuseblk.fstitch");
	assert_string_equal(src, "/dev/loop3");
	assert_int_equal(mountinfo_find(path, "/mnt", NULL, 0, NULL, 0), 0);
	/* a short buffer gets a truncated, terminated copy */
	assert_int_equal(mountinfo_find(path, "/", type, 3, src, sizeof(src)), 1);
	assert_string_equal(type, "ex");
	e2t_rm_rf(dir);
	free(dir);
	free(path);
}

static void test_dev_mounted(void **state)
{
	char *dir, *path = write_table(&dir);

	assert_int_equal(mountinfo_dev_mounted(path, makedev(7, 3)), 1);
	assert_int_equal(mountinfo_dev_mounted(path, makedev(8, 1)), 1);
	assert_int_equal(mountinfo_dev_mounted(path, makedev(7, 4)), 0);
	/* the real table has at least the root */
	assert_int_equal(mountinfo_find(NULL, "/", NULL, 0, NULL, 0), 1);
	e2t_rm_rf(dir);
	free(dir);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_each_skips_malformed_lines),
	    cmocka_unit_test(test_find_takes_the_topmost_and_unescapes),
	    cmocka_unit_test(test_dev_mounted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
