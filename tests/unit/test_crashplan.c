/* Unit tests of the numbered crash states of a recorder log and of the
 * cursor that rebuilds them into an image file (lib/crash/crashplan.c). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "bdev/bdev.h"
#include "crash/crashplan.h"
#include "bdev/reclog.h"

#define BS 1024
#define NB 32

#define TEMPLATE "/tmp/fstitch-test-crashplan-XXXXXX"
static char dir[sizeof(TEMPLATE)];
static char logpath[128], apath[128], bpath[128];

/* A log with rounds of 1, 3 and 7 writes, then 2 writes with no closing
 * barrier; block 5 is written twice in the 7-write round. */
static void make_log(void)
{
	static const int rounds[] = {1, 3, 7, 2};
	uint8_t *img = calloc(NB, BS), blk[BS];
	struct bdev *mem, *rec;
	unsigned k = 0;

	memcpy(dir, TEMPLATE, sizeof(TEMPLATE));
	assert_non_null(mkdtemp(dir));
	snprintf(logpath, sizeof(logpath), "%s/log", dir);
	snprintf(apath, sizeof(apath), "%s/a.img", dir);
	snprintf(bpath, sizeof(bpath), "%s/b.img", dir);
	for (int i = 0; i < NB * BS; i++)
		img[i] = (uint8_t)(i / BS);
	assert_int_equal(bdev_mem_create(BS, 0, img, NB * BS, &mem), 0);
	assert_int_equal(bdev_recorder_create(mem, &rec), 0);
	for (int r = 0; r < 4; r++) {
		for (int i = 0; i < rounds[r]; i++, k++) {
			struct bdev_write w = {.blkno = (r == 2 && i == 6) ? 5 : 1 + k % 20,
					       .data = blk};

			memset(blk, 0x80 + (int)k, BS);
			assert_int_equal(bdev_write(rec, &w, 1), 0);
		}
		if (r < 3)
			assert_int_equal(bdev_barrier(rec), 0);
	}
	assert_int_equal(reclog_save(rec, logpath), 0);
	bdev_destroy(rec);
	free(img);
}

static void cleanup(void)
{
	unlink(logpath);
	unlink(apath);
	unlink(bpath);
	rmdir(dir);
}

static int same_file(const char *a, const char *b)
{
	FILE *fa = fopen(a, "r"), *fb = fopen(b, "r");
	int ca, cb, same = 1;

	assert_non_null(fa);
	assert_non_null(fb);
	do {
		ca = fgetc(fa);
		cb = fgetc(fb);
		if (ca != cb)
			same = 0;
	} while (same && ca != EOF);
	fclose(fa);
	fclose(fb);
	return same;
}

static void test_numbering(void **state)
{
	struct crash_plan_opts o = {.exhaustive = 3, .samples = 5, .seed = 9};
	struct crash_plan *p;
	struct crash_plan_state s;

	make_log();
	assert_int_equal(crash_plan_open(logpath, &o, &p), 0);
	/* round 0: boundary; round 1: boundary + 6 subsets; round 2 (7
	 * writes > 3): boundary + 5 samples; round 3: boundary + 2; final */
	assert_int_equal(crash_plan_rounds(p), 4);
	assert_int_equal(crash_plan_barriers(p), 3);
	assert_int_equal(crash_plan_writes(p), 13);
	assert_int_equal(crash_plan_total(p), 1 + 7 + 6 + 3 + 1);
	assert_int_equal(crash_plan_count(p), crash_plan_total(p));
	assert_int_equal(crash_plan_state(p, 0, &s), 0);
	assert_true(s.boundary && s.round == 0 && s.napplied == 0);
	assert_int_equal(crash_plan_state(p, 1, &s), 0);
	assert_true(s.boundary && s.round == 1 && s.nround == 3);
	assert_int_equal(crash_plan_state(p, 2, &s), 0);
	assert_true(!s.boundary && s.napplied == 1);
	for (size_t n = 9; n < 14; n++) {
		assert_int_equal(crash_plan_state(p, n, &s), 0);
		assert_true(s.round == 2 && s.napplied > 0 && s.napplied < 7);
	}
	assert_int_equal(crash_plan_state(p, 17, &s), 0);
	assert_true(s.boundary && s.round == 4 && s.nround == 0);
	assert_int_equal(crash_plan_state(p, 18, &s), -ERANGE);
	crash_plan_free(p);
	assert_int_equal(crash_plan_open(dir, &o, &p) < 0, 1);
	cleanup();
}

/* Every state the incremental cursor writes, going forward, is the one a
 * fresh cursor builds from scratch; the same options give the same
 * states, another seed other samples. */
static void test_cursor_and_determinism(void **state)
{
	struct crash_plan_opts o = {.exhaustive = 2, .samples = 6, .seed = 3};
	struct crash_plan *p, *q;
	struct crash_cursor *a, *b;
	size_t n, differ = 0;

	make_log();
	assert_int_equal(crash_plan_open(logpath, &o, &p), 0);
	assert_int_equal(crash_plan_open(logpath, &o, &q), 0);
	assert_int_equal(crash_cursor_open(p, apath, &a), 0);
	for (n = 0; n < crash_plan_total(p); n++) {
		assert_int_equal(crash_cursor_seek(a, n), 0);
		assert_int_equal(crash_cursor_open(q, bpath, &b), 0);
		assert_int_equal(crash_cursor_seek(b, n), 0);
		crash_cursor_free(b);
		assert_true(same_file(apath, bpath));
	}
	/* forward moves wrote only the blocks that differ */
	assert_int_equal(crash_cursor_full_writes(a), 1);
	assert_true(crash_cursor_blocks_written(a) < NB + 3 * crash_plan_total(p) * 7);
	crash_cursor_free(a);
	crash_plan_free(q);
	/* another seed: the sampled states of the 7-write round differ */
	o.seed = 4;
	assert_int_equal(crash_plan_open(logpath, &o, &q), 0);
	assert_int_equal(crash_plan_total(p), crash_plan_total(q));
	for (n = 0; n < crash_plan_total(p); n++) {
		assert_int_equal(crash_cursor_open(p, apath, &a), 0);
		assert_int_equal(crash_cursor_open(q, bpath, &b), 0);
		assert_int_equal(crash_cursor_seek(a, n), 0);
		assert_int_equal(crash_cursor_seek(b, n), 0);
		crash_cursor_free(a);
		crash_cursor_free(b);
		differ += !same_file(apath, bpath);
	}
	assert_true(differ > 0);
	crash_plan_free(p);
	crash_plan_free(q);
	cleanup();
}

/* After someone writes to the file, resync puts back exactly the state. */
static void test_resync(void **state)
{
	struct crash_plan *p;
	struct crash_cursor *a, *b;
	uint8_t junk[3 * BS];
	int fd;

	make_log();
	assert_int_equal(crash_plan_open(logpath, NULL, &p), 0);
	assert_int_equal(crash_cursor_open(p, apath, &a), 0);
	assert_int_equal(crash_cursor_open(p, bpath, &b), 0);
	for (size_t n = 0; n < crash_plan_total(p); n++) {
		assert_int_equal(crash_cursor_seek(a, n), 0);
		fd = open(apath, O_WRONLY);
		memset(junk, (int)n, sizeof(junk));
		assert_int_equal(pwrite(fd, junk, sizeof(junk), (off_t)(n % NB) * BS / 2),
				 (ssize_t)sizeof(junk));
		assert_int_equal(ftruncate(fd, NB * BS + 100), 0);
		close(fd);
		assert_int_equal(crash_cursor_resync(a), 0);
		assert_int_equal(crash_cursor_seek(b, n), 0);
		assert_true(same_file(apath, bpath));
	}
	crash_cursor_free(a);
	crash_cursor_free(b);
	crash_plan_free(p);
	cleanup();
}

/* --max: the final state always, boundaries next, in state order, the
 * same for the same seed. */
static void test_max(void **state)
{
	struct crash_plan_opts o = {.exhaustive = 3, .samples = 5, .seed = 1, .max = 8};
	struct crash_plan *p, *q;
	struct crash_plan_state s, t;
	size_t nb = 0, last = 0;

	make_log();
	assert_int_equal(crash_plan_open(logpath, &o, &p), 0);
	assert_int_equal(crash_plan_open(logpath, &o, &q), 0);
	assert_int_equal(crash_plan_count(p), 8);
	for (size_t i = 0; i < 8; i++) {
		crash_plan_selected(p, i, &s);
		crash_plan_selected(q, i, &t);
		assert_int_equal(s.state, t.state);
		assert_true(i == 0 || s.state > last);
		last = s.state;
		nb += s.boundary;
	}
	assert_int_equal(last, crash_plan_total(p) - 1);
	assert_int_equal(nb, 5); /* 4 round boundaries and the final state */
	crash_plan_free(p);
	crash_plan_free(q);
	o.max = 3;
	assert_int_equal(crash_plan_open(logpath, &o, &p), 0);
	assert_int_equal(crash_plan_count(p), 3);
	for (size_t i = 0; i < 3; i++) {
		crash_plan_selected(p, i, &s);
		assert_true(s.boundary);
	}
	crash_plan_free(p);
	cleanup();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_numbering),
	    cmocka_unit_test(test_cursor_and_determinism),
	    cmocka_unit_test(test_resync),
	    cmocka_unit_test(test_max),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
