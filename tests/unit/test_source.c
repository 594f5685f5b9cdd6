/* Resolving fstitch-mount's SOURCE (lib/cli/source.c). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/source.h"

static char dir[] = "/tmp/fstitch-test-source.XXXXXX";

static int setup(void **state)
{
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* A file of len bytes, zero except a superblock magic and block-size
 * field when log >= 0. */
static void make_file(const char *path, size_t len, int log)
{
	unsigned char *buf = calloc(1, len);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_non_null(buf);
	assert_true(fd >= 0);
	if (log >= 0 && len >= 2048) {
		buf[1024 + 24] = (unsigned char)log;
		buf[1024 + 56] = 0x53;
		buf[1024 + 57] = 0xef;
	}
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
	free(buf);
}

static void test_tags(void **state)
{
	assert_true(source_is_tag("LABEL=x"));
	assert_true(source_is_tag("UUID=1234"));
	assert_true(source_is_tag("PARTUUID=1234"));
	assert_true(source_is_tag("PARTLABEL=x"));
	assert_false(source_is_tag("label=x"));
	assert_false(source_is_tag("/dev/sda"));
	assert_false(source_is_tag("disk.img"));
}

static void test_nbd_uri(void **state)
{
	struct source src = {.path = NULL};

	/* taken as given, without looking for a file of that name */
	assert_int_equal(source_resolve("nbd+unix:///exp?socket=/run/x.sock", &src), 0);
	assert_string_equal(src.path, "nbd+unix:///exp?socket=/run/x.sock");
	assert_true(src.nbd);
	assert_false(src.blockdev);
	source_free(&src);
	assert_int_equal(source_resolve("nbds://host:10809/exp", &src), 0);
	assert_true(src.nbd);
	source_free(&src);
	/* a relative socket path is made absolute (the daemon changes to
	 * /), percent-encoded */
	{
		char cwd[PATH_MAX], want[PATH_MAX + 64];

		assert_non_null(getcwd(cwd, sizeof(cwd)));
		assert_int_equal(chdir(dir), 0);
		assert_int_equal(mkdir("a b", 0755), 0);
		assert_int_equal(chdir("a b"), 0);
		assert_int_equal(source_resolve("nbd+unix:///e?tls=off&socket=d.sock", &src), 0);
		snprintf(want, sizeof(want), "nbd+unix:///e?tls=off&socket=%s/a%%20b/d.sock", dir);
		assert_string_equal(src.path, want);
		source_free(&src);
		assert_int_equal(chdir(cwd), 0);
	}
	/* not a scheme of NBD: a (missing) file */
	assert_int_equal(source_resolve("nbdx://host/exp", &src), -ENOENT);
	assert_int_equal(source_resolve("NBD://host/exp", &src), -ENOENT);
}

static void test_file(void **state)
{
	char path[PATH_MAX], rel[PATH_MAX], cwd[PATH_MAX];
	struct source src = {.path = NULL};

	snprintf(path, sizeof(path), "%s/a.img", dir);
	make_file(path, 4096, 0);
	assert_int_equal(source_resolve(path, &src), 0);
	assert_string_equal(src.path, path);
	assert_false(src.blockdev);
	assert_false(src.tag);
	source_free(&src);

	/* a relative path comes back absolute */
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(dir), 0);
	snprintf(rel, sizeof(rel), "./a.img");
	assert_int_equal(source_resolve(rel, &src), 0);
	assert_string_equal(src.path, path);
	source_free(&src);
	assert_int_equal(chdir(cwd), 0);
}

static void test_errors(void **state)
{
	struct source src = {.path = NULL};
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/missing.img", dir);
	assert_int_equal(source_resolve(path, &src), -ENOENT);
	assert_int_equal(source_resolve(dir, &src), -EISDIR);
	assert_int_equal(source_resolve("/dev/null", &src), -ENODEV);
	assert_int_equal(source_resolve("", &src), -EINVAL);
	assert_int_equal(source_resolve("LABEL=", &src), -EINVAL);
	assert_int_equal(source_resolve("UUID=\"\"", &src), -EINVAL);
	assert_int_equal(source_resolve("LABEL=fstitch-no-such-label-anywhere", &src), -ENOENT);
	assert_null(src.path);
}

static void test_block_size(void **state)
{
	char path[PATH_MAX];
	uint32_t bs = 0;

	snprintf(path, sizeof(path), "%s/bs.img", dir);
	make_file(path, 4096, 0);
	assert_int_equal(source_block_size(path, &bs), 0);
	assert_int_equal(bs, 1024);
	make_file(path, 4096, 2);
	assert_int_equal(source_block_size(path, &bs), 0);
	assert_int_equal(bs, 4096);
	make_file(path, 4096, 6);
	assert_int_equal(source_block_size(path, &bs), 0);
	assert_int_equal(bs, 65536);

	/* no magic, an absurd block size, too short: left to e2_open */
	bs = 77;
	make_file(path, 4096, -1);
	assert_int_equal(source_block_size(path, &bs), -EINVAL);
	make_file(path, 4096, 7);
	assert_int_equal(source_block_size(path, &bs), -EINVAL);
	make_file(path, 1500, 0);
	assert_int_equal(source_block_size(path, &bs), -EINVAL);
	assert_int_equal(bs, 77);
	snprintf(path, sizeof(path), "%s/none.img", dir);
	assert_int_equal(source_block_size(path, &bs), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tags),       cmocka_unit_test(test_nbd_uri),
	    cmocka_unit_test(test_file),       cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_block_size),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
