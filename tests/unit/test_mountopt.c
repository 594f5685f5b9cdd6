/* fstitch-mount's option parser (lib/cli/mountopt.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/mountopt.h"

static int parse(struct mountopt *mo, const char *s, struct mountopt_error *err)
{
	mountopt_init(mo);
	return mountopt_parse(mo, s, err);
}

/* s is refused with -EINVAL for the reason kind. */
static void refused(const char *s, enum mountopt_err kind)
{
	struct mountopt mo;
	struct mountopt_error err;

	assert_int_equal(parse(&mo, s, &err), -EINVAL);
	assert_int_equal(err.kind, kind);
	mountopt_free(&mo);
}

static void test_defaults(void **state)
{
	struct mountopt mo;

	assert_int_equal(parse(&mo, "", NULL), 0);
	assert_int_equal(mo.consistency, CONSISTENCY_SOFTUPDATES);
	assert_int_equal(mo.cache_bytes, 0);
	assert_int_equal(mo.flush_interval_ms, 0);
	assert_false(mo.readonly);
	assert_null(mo.fuse_opts);
	assert_int_equal(mountopt_cache_blocks(&mo, 4096), 0);
	mountopt_free(&mo);
}

static void test_consistency(void **state)
{
	struct mountopt mo;
	struct mountopt_error err;

	/* not given: the open picks the mode from the image */
	assert_int_equal(parse(&mo, "commit=1", &err), 0);
	assert_false(mo.has_consistency);
	mountopt_free(&mo);

	assert_int_equal(parse(&mo, "consistency=none", &err), 0);
	assert_int_equal(mo.consistency, CONSISTENCY_NONE);
	assert_true(mo.has_consistency);
	/* later options override earlier ones, across -o arguments too */
	assert_int_equal(mountopt_parse(&mo, "consistency=softupdates", &err), 0);
	assert_int_equal(mo.consistency, CONSISTENCY_SOFTUPDATES);
	mountopt_free(&mo);

	assert_int_equal(parse(&mo, "consistency=journal,commit=2.5", &err), 0);
	assert_int_equal(mo.consistency, CONSISTENCY_JOURNAL);
	assert_int_equal(mo.commit_ms, 2500);
	assert_string_equal(mountopt_consistency_name(mo.consistency), "journal");
	mountopt_free(&mo);
	assert_int_equal(parse(&mo, "consistency=journal-data", &err), 0);
	assert_int_equal(mo.consistency, CONSISTENCY_JOURNAL_DATA);
	assert_string_equal(mountopt_consistency_name(mo.consistency), "journal-data");
	mountopt_free(&mo);

	assert_int_equal(parse(&mo, "consistency=ordered", &err), -EINVAL);
	assert_int_equal(err.kind, MOUNTOPT_BAD_VALUE);
	assert_string_equal(err.name, "consistency");
	assert_string_equal(err.value, "ordered");
	mountopt_free(&mo);

	assert_int_equal(parse(&mo, "commit=soon", &err), -EINVAL);
	assert_int_equal(err.kind, MOUNTOPT_BAD_VALUE);
	mountopt_free(&mo);

	assert_int_equal(parse(&mo, "consistency", &err), -EINVAL);
	assert_int_equal(err.kind, MOUNTOPT_NEED_VALUE);
	mountopt_free(&mo);

	assert_int_equal(parse(&mo, "consistency=", &err), -EINVAL);
	assert_int_equal(err.kind, MOUNTOPT_BAD_VALUE);
	mountopt_free(&mo);
	assert_string_equal(mountopt_consistency_name(CONSISTENCY_NONE), "none");
	assert_string_equal(mountopt_consistency_name(CONSISTENCY_SOFTUPDATES), "softupdates");
}

static void test_rename_order(void **state)
{
	struct mountopt mo;
	struct mountopt_error err;

	assert_int_equal(parse(&mo, "", NULL), 0);
	assert_int_equal(mo.rename_order, E2_RENAME_ORDER_ALL);
	assert_int_equal(mountopt_parse(&mo, "rename_order=file", &err), 0);
	assert_int_equal(mo.rename_order, E2_RENAME_ORDER_FILE);
	assert_int_equal(mountopt_parse(&mo, "rename_order=all", &err), 0);
	assert_int_equal(mo.rename_order, E2_RENAME_ORDER_ALL);
	assert_int_equal(mountopt_parse(&mo, "rename_order=process", &err), 0);
	assert_int_equal(mo.rename_order, E2_RENAME_ORDER_PROCESS);
	mountopt_free(&mo);
	assert_int_equal(parse(&mo, "rename_order=Process", &err), -EINVAL);
	assert_int_equal(err.kind, MOUNTOPT_BAD_VALUE);
	assert_string_equal(err.name, "rename_order");
	mountopt_free(&mo);
	assert_int_equal(parse(&mo, "rename_order", &err), -EINVAL);
	assert_int_equal(err.kind, MOUNTOPT_NEED_VALUE);
	mountopt_free(&mo);
}

static void test_errors(void **state)
{
	struct mountopt mo;

	assert_int_equal(parse(&mo, "", NULL), 0);
	assert_int_equal(mo.errors, E2_ERRORS_DEFAULT);
	assert_int_equal(parse(&mo, "errors=continue", NULL), 0);
	assert_int_equal(mo.errors, E2_ERRORS_CONTINUE);
	assert_int_equal(mountopt_parse(&mo, "errors=remount-ro", NULL), 0);
	assert_int_equal(mo.errors, E2_ERRORS_RO);
	assert_int_equal(mountopt_parse(&mo, "errors=panic", NULL), 0);
	assert_int_equal(mo.errors, E2_ERRORS_PANIC);
	mountopt_free(&mo);
	refused("errors=remount_ro", MOUNTOPT_BAD_VALUE);
	refused("errors=", MOUNTOPT_BAD_VALUE);
	refused("errors", MOUNTOPT_NEED_VALUE);
}

static void test_sizes(void **state)
{
	static const struct {
		const char *s;
		int ret;
		uint64_t v;
	} cases[] = {
	    {"0", 0, 0},
	    {"4096", 0, 4096},
	    {"64K", 0, 64ULL << 10},
	    {"64k", 0, 64ULL << 10},
	    {"256M", 0, 256ULL << 20},
	    {"256MiB", 0, 256ULL << 20},
	    {"2G", 0, 2ULL << 30},
	    {"2GB", 0, 2ULL << 30},
	    {"1T", 0, 1ULL << 40},
	    {"", -EINVAL, 0},
	    {"abc", -EINVAL, 0},
	    {"-5M", -EINVAL, 0},
	    {" 5M", -EINVAL, 0},
	    {"5X", -EINVAL, 0},
	    {"5MM", -EINVAL, 0},
	    {"5Mx", -EINVAL, 0},
	    {"1.5M", -EINVAL, 0},
	    {"18446744073709551616", -EINVAL, 0}, /* 2^64 */
	    {"17179869184G", -EINVAL, 0},	  /* 2^64 bytes */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 12345;
		int r = mountopt_parse_size(cases[i].s, &v);

		if (r != cases[i].ret)
			fail_msg("size '%s': got %d, want %d", cases[i].s, r, cases[i].ret);
		if (r == 0 && v != cases[i].v)
			fail_msg("size '%s': got %llu", cases[i].s, (unsigned long long)v);
		if (r < 0 && v != 12345)
			fail_msg("size '%s': output written on failure", cases[i].s);
	}
}

static void test_cache(void **state)
{
	struct mountopt mo;
	struct mountopt_error err;

	assert_int_equal(parse(&mo, "cache=64M", &err), 0);
	assert_int_equal(mo.cache_bytes, 64ULL << 20);
	assert_int_equal(mountopt_cache_blocks(&mo, 4096), 16384);
	assert_int_equal(mountopt_cache_blocks(&mo, 1024), 65536);
	mountopt_free(&mo);

	/* the brief's example message comes from these fields */
	assert_int_equal(parse(&mo, "cache=abc", &err), -EINVAL);
	assert_int_equal(err.kind, MOUNTOPT_BAD_VALUE);
	assert_string_equal(err.name, "cache");
	assert_string_equal(err.value, "abc");
	mountopt_free(&mo);

	/* too small to hold a working set, too large to be meant */
	assert_int_equal(parse(&mo, "cache=4K", &err), -EINVAL);
	assert_int_equal(err.kind, MOUNTOPT_BAD_VALUE);
	mountopt_free(&mo);
	assert_int_equal(parse(&mo, "cache=2T", &err), -EINVAL);
	mountopt_free(&mo);
	assert_int_equal(parse(&mo, "cache=1M", &err), 0);
	assert_int_equal(mountopt_cache_blocks(&mo, 65536), 64); /* floor */
	mountopt_free(&mo);
}

/* A cache larger than physical memory is refused with the limit, so that
 * the message can say how much there is; up to it is fine. */
static void test_cache_above_memory(void **state)
{
	struct mountopt mo;
	struct mountopt_error err;

	mountopt_init(&mo);
	assert_true(mo.mem_bytes > 0); /* this machine's, from sysconf */
	mo.mem_bytes = 23ULL << 30;
	assert_int_equal(mountopt_parse(&mo, "cache=1T", &err), -EINVAL);
	assert_int_equal(err.kind, MOUNTOPT_TOO_LARGE);
	assert_string_equal(err.name, "cache");
	assert_string_equal(err.value, "1T");
	assert_true(err.limit == 23ULL << 30);
	assert_int_equal(mo.cache_bytes, 0);
	assert_int_equal(mountopt_parse(&mo, "cache=24G", &err), -EINVAL);
	assert_int_equal(err.kind, MOUNTOPT_TOO_LARGE);
	assert_int_equal(mountopt_parse(&mo, "cache=23G", &err), 0);
	assert_true(mo.cache_bytes == 23ULL << 30);
	/* other errors carry no limit */
	assert_int_equal(mountopt_parse(&mo, "cache=x", &err), -EINVAL);
	assert_int_equal(err.kind, MOUNTOPT_BAD_VALUE);
	assert_true(err.limit == 0);
	mountopt_free(&mo);

	/* memory unknown: only the fixed range applies */
	mountopt_init(&mo);
	mo.mem_bytes = 0;
	assert_int_equal(mountopt_parse(&mo, "cache=1T", &err), 0);
	mountopt_free(&mo);
}

static void test_seconds(void **state)
{
	static const struct {
		const char *s;
		int ret;
		unsigned ms;
	} cases[] = {
	    {"5", 0, 5000},
	    {"0.25", 0, 250},
	    {"0.001", 0, 1},
	    {"1.5", 0, 1500},
	    {"3600", 0, 3600000},
	    {"86400", 0, 86400000},
	    {"0", -EINVAL, 0},
	    {"0.0", -EINVAL, 0},
	    {"0.0001", -EINVAL, 0},
	    {"86401", -EINVAL, 0},
	    {"99999999999999999999", -EINVAL, 0},
	    {"1.", -EINVAL, 0},
	    {".5", -EINVAL, 0},
	    {"5s", -EINVAL, 0},
	    {"-1", -EINVAL, 0},
	    {"", -EINVAL, 0},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned ms = 777;
		int r = mountopt_parse_seconds(cases[i].s, &ms);

		if (r != cases[i].ret)
			fail_msg("seconds '%s': got %d, want %d", cases[i].s, r, cases[i].ret);
		if (r == 0 && ms != cases[i].ms)
			fail_msg("seconds '%s': got %u ms", cases[i].s, ms);
		if (r < 0 && ms != 777)
			fail_msg("seconds '%s': output written on failure", cases[i].s);
	}
}

static void test_flush_interval(void **state)
{
	struct mountopt mo;
	struct mountopt_error err;

	assert_int_equal(parse(&mo, "flush_interval=30", &err), 0);
	assert_int_equal(mo.flush_interval_ms, 30000);
	mountopt_free(&mo);
	assert_int_equal(parse(&mo, "flush_interval=soon", &err), -EINVAL);
	assert_int_equal(err.kind, MOUNTOPT_BAD_VALUE);
	assert_string_equal(err.name, "flush_interval");
	assert_string_equal(err.value, "soon");
	mountopt_free(&mo);
}

static void test_ro_rw(void **state)
{
	struct mountopt mo;
	struct mountopt_error err;
	char *s = NULL;

	assert_int_equal(parse(&mo, "ro", &err), 0);
	assert_true(mo.readonly);
	assert_int_equal(mountopt_fuse_string(&mo, "/img", &s), 0);
	assert_non_null(strstr(s, "ro,"));
	assert_null(strstr(s, "rw"));
	free(s);
	assert_int_equal(mountopt_parse(&mo, "rw", &err), 0);
	assert_false(mo.readonly);
	mountopt_free(&mo);

	assert_int_equal(parse(&mo, "ro=1", &err), -EINVAL);
	assert_int_equal(err.kind, MOUNTOPT_NO_VALUE);
	assert_string_equal(err.name, "ro");
	mountopt_free(&mo);
}

static void test_unknown(void **state)
{
	struct mountopt mo;
	struct mountopt_error err;

	assert_int_equal(parse(&mo, "ro,bogus,cache=8M", &err), -EINVAL);
	assert_int_equal(err.kind, MOUNTOPT_UNKNOWN);
	assert_string_equal(err.name, "bogus");
	mountopt_free(&mo);
	/* options only fuse2 or the high-level API knew are refused too */
	assert_int_equal(parse(&mo, "nonempty", &err), -EINVAL);
	assert_int_equal(err.kind, MOUNTOPT_UNKNOWN);
	mountopt_free(&mo);
	assert_int_equal(parse(&mo, "allow_other=yes", &err), -EINVAL);
	assert_int_equal(err.kind, MOUNTOPT_NO_VALUE);
	mountopt_free(&mo);
}

static void test_mount8_options_dropped(void **state)
{
	struct mountopt mo;
	struct mountopt_error err;
	char *s = NULL;

	/* what an fstab line hands a helper: none of it reaches libfuse */
	assert_int_equal(parse(&mo,
			       "defaults,noauto,user,nofail,_netdev,x-systemd.automount,"
			       "comment=fstitch",
			       &err),
			 0);
	assert_null(mo.fuse_opts);
	/* nofail alone is acted on: the helper exits 0 for a missing source */
	assert_true(mo.nofail);
	assert_int_equal(mountopt_fuse_string(&mo, "/img", &s), 0);
	assert_string_equal(s, "rw,default_permissions,fsname=/img,subtype=fstitch");
	free(s);
	assert_false(mo.allow_other);
	assert_false(mo.allow_root);
	/* neither blkdev nor noblkdev: the daemon chooses */
	assert_false(mo.has_blkdev);
	mountopt_free(&mo);
	assert_int_equal(parse(&mo, "blkdev", &err), 0);
	assert_true(mo.blkdev);
	assert_true(mo.has_blkdev);
	assert_int_equal(mountopt_fuse_string(&mo, "/dev/loop7", &s), 0);
	assert_string_equal(s, "rw,blkdev,default_permissions,fsname=/dev/loop7,subtype=fstitch");
	free(s);
	assert_int_equal(mountopt_parse(&mo, "noblkdev", &err), 0);
	assert_false(mo.blkdev);
	assert_true(mo.has_blkdev);
	assert_int_equal(mountopt_parse(&mo, "blkdev=1", &err), -EINVAL);
	assert_int_equal(err.kind, MOUNTOPT_NO_VALUE);
	mountopt_free(&mo);
	assert_int_equal(parse(&mo, "allow_root", &err), 0);
	assert_false(mo.nofail);
	assert_true(mo.allow_root);
	assert_false(mo.allow_other);
	mountopt_free(&mo);
}

static void test_fuse_passthrough(void **state)
{
	struct mountopt mo;
	struct mountopt_error err;
	char *s = NULL;

	assert_int_equal(parse(&mo, "allow_other,nosuid,nodev,noatime,default_permissions", &err),
			 0);
	assert_string_equal(mo.fuse_opts, "allow_other,nosuid,nodev,noatime");
	/* remembered too: they decide who may use the control socket */
	assert_true(mo.allow_other);
	assert_false(mo.allow_root);
	assert_int_equal(mountopt_fuse_string(&mo, "/srv/a.img", &s), 0);
	assert_string_equal(s, "allow_other,nosuid,nodev,noatime,rw,default_permissions,"
			       "fsname=/srv/a.img,subtype=fstitch");
	free(s);
	mountopt_free(&mo);
}

/* The atime options reach the kernel and decide what a read writes, with
 * the kernel's precedence: noatime over the rest, strictatime over
 * relatime (the default). */
static void test_atime(void **state)
{
	static const struct {
		const char *opts;
		enum e2_atime want;
	} cases[] = {
	    {"rw", E2_ATIME_RELATIME},
	    {"noatime", E2_ATIME_NOATIME},
	    {"noatime,relatime", E2_ATIME_NOATIME},
	    {"noatime,atime", E2_ATIME_RELATIME},
	    {"strictatime", E2_ATIME_STRICT},
	    {"norelatime", E2_ATIME_STRICT},
	    {"strictatime,relatime", E2_ATIME_RELATIME},
	    {"relatime,nostrictatime", E2_ATIME_RELATIME},
	    {"strictatime,noatime", E2_ATIME_NOATIME},
	};
	struct mountopt mo;
	struct mountopt_error err;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(parse(&mo, cases[i].opts, &err), 0);
		if (mountopt_atime(&mo) != cases[i].want)
			fail_msg("-o %s: atime mode %d, want %d", cases[i].opts,
				 (int)mountopt_atime(&mo), (int)cases[i].want);
		mountopt_free(&mo);
	}
	/* libfuse refuses the mount for any of these but atime and noatime */
	assert_int_equal(parse(&mo, "noatime,relatime,strictatime,nodiratime,lazytime,atime", &err),
			 0);
	assert_string_equal(mo.fuse_opts, "noatime,atime");
	assert_true(mo.nodiratime);
	mountopt_free(&mo);
	assert_int_equal(parse(&mo, "nodiratime,diratime", &err), 0);
	assert_false(mo.nodiratime);
	mountopt_free(&mo);
}

/* sync and dirsync reach the kernel and the daemon; async takes sync back. */
static void test_sync(void **state)
{
	struct mountopt mo;
	struct mountopt_error err;

	assert_int_equal(parse(&mo, "sync,dirsync", &err), 0);
	assert_true(mo.sync);
	assert_true(mo.dirsync);
	assert_string_equal(mo.fuse_opts, "sync,dirsync");
	mountopt_free(&mo);
	assert_int_equal(parse(&mo, "sync,async", &err), 0);
	assert_false(mo.sync);
	assert_false(mo.dirsync);
	mountopt_free(&mo);
	assert_int_equal(parse(&mo, "rw", &err), 0);
	assert_false(mo.sync);
	assert_false(mo.dirsync);
	mountopt_free(&mo);
}

static void test_fsname_escaping(void **state)
{
	struct mountopt mo;
	struct mountopt_error err;
	char *s = NULL;

	/* a comma in the image's name must not split the libfuse option */
	assert_int_equal(parse(&mo, "", &err), 0);
	assert_int_equal(mountopt_fuse_string(&mo, "/tmp/a,b\\c.img", &s), 0);
	assert_string_equal(s, "rw,default_permissions,fsname=/tmp/a\\,b\\\\c.img,"
			       "subtype=fstitch");
	free(s);
	mountopt_free(&mo);

	/* the user's own fsname and subtype win, escaped commas survive */
	assert_int_equal(parse(&mo, "fsname=my\\,disk,subtype=x", &err), 0);
	assert_true(mo.has_fsname);
	assert_true(mo.has_subtype);
	assert_int_equal(mountopt_fuse_string(&mo, "/img", &s), 0);
	assert_string_equal(s, "fsname=my\\,disk,subtype=x,rw,default_permissions");
	free(s);
	mountopt_free(&mo);

	refused("fsname=", MOUNTOPT_BAD_VALUE);
}

static void test_empty_items_and_debug(void **state)
{
	struct mountopt mo;
	struct mountopt_error err;

	assert_int_equal(parse(&mo, ",,cache=2M,,debug,", &err), 0);
	assert_int_equal(mo.cache_bytes, 2ULL << 20);
	assert_true(mo.debug);
	mountopt_free(&mo);
}

static void test_max_read(void **state)
{
	struct mountopt mo;
	struct mountopt_error err;

	assert_int_equal(parse(&mo, "max_read=128K", &err), 0);
	assert_string_equal(mo.fuse_opts, "max_read=131072");
	mountopt_free(&mo);
	refused("max_read=12", MOUNTOPT_BAD_VALUE);
}

static void test_max_threads(void **state)
{
	struct mountopt mo;
	struct mountopt_error err;
	const char *bad[] = {"max_threads=0", "max_threads=1025", "max_threads=-1",
			     "max_threads=",  "max_threads=4x",	  "max_threads=+4"};

	assert_int_equal(parse(&mo, "", NULL), 0);
	assert_int_equal(mo.max_threads, 0);
	mountopt_free(&mo);
	assert_int_equal(parse(&mo, "max_threads=1", &err), 0);
	assert_int_equal(mo.max_threads, 1);
	assert_int_equal(mountopt_parse(&mo, "max_threads=1024", &err), 0);
	assert_int_equal(mo.max_threads, 1024);
	assert_null(mo.fuse_opts); /* ours, not libfuse's */
	mountopt_free(&mo);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse(&mo, bad[i], &err), -EINVAL);
		assert_string_equal(err.name, "max_threads");
		mountopt_free(&mo);
	}
	refused("max_threads", MOUNTOPT_NEED_VALUE);
}

static void test_lock_wait(void **state)
{
	struct mountopt mo;
	struct mountopt_error err;

	assert_int_equal(parse(&mo, "lock_wait=2.5", &err), 0);
	assert_int_equal(mo.lock_wait_ms, 2500);
	mountopt_free(&mo);
	assert_int_equal(parse(&mo, "lock_wait=soon", &err), -EINVAL);
	assert_int_equal(err.kind, MOUNTOPT_BAD_VALUE);
	assert_string_equal(err.value, "soon");
	mountopt_free(&mo);
}

static void test_nbd(void **state)
{
	struct mountopt mo;
	struct mountopt_error err;

	assert_int_equal(parse(&mo, "rw", &err), 0);
	assert_int_equal(mo.nbd_retry_ms, MOUNTOPT_NBD_RETRY_MS);
	assert_false(mo.unsafe_no_flush);
	mountopt_free(&mo);
	assert_int_equal(parse(&mo, "nbd_retry=0.5,unsafe_no_flush", &err), 0);
	assert_int_equal(mo.nbd_retry_ms, 500);
	assert_true(mo.unsafe_no_flush);
	mountopt_free(&mo);
	assert_int_equal(parse(&mo, "nbd_retry=0", &err), 0);
	assert_int_equal(mo.nbd_retry_ms, 0);
	mountopt_free(&mo);
	assert_int_equal(parse(&mo, "nbd_retry=-1", &err), -EINVAL);
	assert_int_equal(err.kind, MOUNTOPT_BAD_VALUE);
	mountopt_free(&mo);
	refused("nbd_retry", MOUNTOPT_NEED_VALUE);
	refused("unsafe_no_flush=1", MOUNTOPT_NO_VALUE);
}

static void test_statsfile(void **state)
{
	struct mountopt mo;
	struct mountopt_error err;

	assert_int_equal(parse(&mo, "statsfile=/tmp/a\\,b.json,ro", &err), 0);
	assert_string_equal(mo.statsfile, "/tmp/a,b.json");
	assert_true(mo.readonly);
	/* a later one replaces it (and the old string is not leaked) */
	assert_int_equal(mountopt_parse(&mo, "statsfile=s.json", &err), 0);
	assert_string_equal(mo.statsfile, "s.json");
	mountopt_free(&mo);
	assert_null(mo.statsfile);
	refused("statsfile=", MOUNTOPT_BAD_VALUE);
	refused("statsfile", MOUNTOPT_NEED_VALUE);
}

static void test_ratelimit(void **state)
{
	struct mountopt_ratelimit rl = {.burst = 3, .window_ms = 1000};
	uint64_t missed = 99;
	int logged = 0;

	/* a storm of 100 events in one window: 3 lines */
	for (int i = 0; i < 100; i++)
		logged += mountopt_ratelimit(&rl, 5000 + (uint64_t)i, &missed);
	assert_int_equal(logged, 3);
	assert_int_equal(rl.suppressed, 97);
	/* still inside the window: counted only */
	assert_false(mountopt_ratelimit(&rl, 5999, &missed));
	/* the next window logs again and says how many were left out */
	assert_true(mountopt_ratelimit(&rl, 6000, &missed));
	assert_int_equal(missed, 98);
	assert_true(mountopt_ratelimit(&rl, 6001, &missed));
	assert_int_equal(missed, 0);
	/* a clock that goes backwards starts a new window, never stalls */
	assert_true(mountopt_ratelimit(&rl, 10, NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_consistency),
	    cmocka_unit_test(test_rename_order),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_sizes),
	    cmocka_unit_test(test_cache),
	    cmocka_unit_test(test_cache_above_memory),
	    cmocka_unit_test(test_seconds),
	    cmocka_unit_test(test_flush_interval),
	    cmocka_unit_test(test_ro_rw),
	    cmocka_unit_test(test_unknown),
	    cmocka_unit_test(test_mount8_options_dropped),
	    cmocka_unit_test(test_fuse_passthrough),
	    cmocka_unit_test(test_fsname_escaping),
	    cmocka_unit_test(test_empty_items_and_debug),
	    cmocka_unit_test(test_max_read),
	    cmocka_unit_test(test_max_threads),
	    cmocka_unit_test(test_lock_wait),
	    cmocka_unit_test(test_nbd),
	    cmocka_unit_test(test_statsfile),
	    cmocka_unit_test(test_ratelimit),
	    cmocka_unit_test(test_atime),
	    cmocka_unit_test(test_sync),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
